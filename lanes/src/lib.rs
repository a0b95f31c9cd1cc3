//! Lanes: task packets, per-lane state, and the lane event log.
//!
//! What lands here: parsing and validating task packets (single, array, or batch form), the
//! lane state machine and its on-disk document (`.claw/worker-state.json`, written
//! atomically), and typed lane events appended to `events.jsonl`. It sits on top of `worktree/`
//! and knows nothing about how a terminal is driven.
//!
//! The crate is empty until the lanes issue fills it.
