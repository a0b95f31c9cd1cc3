//! Recovery: the failure taxonomy, recovery recipes with bounded attempts, restart backoff,
//! and executable policy rules.
//!
//! What lands here: classifying a failed or blocked lane into exactly one failure class from
//! its evidence, the recipes that act on a worker to heal it (answer a dialog again, restart,
//! interrupt and nudge, merge forward), the ledger that records every attempt, and the policy
//! rules that map lane conditions to actions.
//!
//! The crate is empty until the recovery issue fills it.
