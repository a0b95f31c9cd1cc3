//! Lanes: the lane lifecycle, typed lane events, and the append-only event log.
//!
//! A lane is one agent working in one git worktree. Its lifecycle is [`LaneStatus`] (with a
//! [`BlockedSubphase`] while blocked and a [`FailureClass`] once failed); every change of state
//! is a [`LaneEvent`] with a per-lane, strictly increasing `seq`, appended to the lane's
//! [`EventLog`] (JSON lines). Later issues add task packets and the per-lane state file here.
//!
//! This crate decides nothing about screens or terminals: the supervisor's handshake observes
//! the worker and reports transitions; this crate gives them a shape that other tools can read.

mod events;
mod state;

pub use events::{EventLog, EventLogError, Evidence, LaneEvent, now_ms};
pub use state::{BlockedSubphase, FailureClass, LaneState, LaneStatus};
