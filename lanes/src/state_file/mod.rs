//! The per-lane state document: the lane's record, `state.json` in its record folder (the
//! registry folder; [`clawpool_worktree::layout`]), which is what clawpool believes, and its
//! publication `<worktree>/.claw/worker-state.json`, the public contract other tools poll
//! (`docs/state-file.md`), rewritten from the record and never read back as truth.
//!
//! - [`WorkerStateDoc`] is the document on disk, a superset of claw-code's worker-state
//!   snapshot. The supervisor keeps one per lane, feeds it every lane event
//!   ([`WorkerStateDoc::apply_event`]) and progress ([`WorkerStateDoc::record_progress`]),
//!   and [stamps](WorkerStateDoc::stamp) it before each write.
//! - [`StateFileWriter`] replaces the file atomically on every change; readers never see a
//!   partial file, and a failed write leaves the previous file intact. Nothing rewrites it
//!   while nothing happens.
//! - [`SupervisorLock`] is held by the supervisor for the lane's life; [`probe`] tells a
//!   reader whether it still is ([`liveness`]).
//! - [`read_state_file`] reads and checks a file, [`read_lane_record`] a lane's record;
//!   [`with_ages`] makes the view a reader shows,
//!   with ages recomputed and a lane whose supervisor is gone shown as `supervisor_lost`.

pub mod cost;
mod doc;
mod hook_channel;
pub mod liveness;
mod permissions;
mod read;
mod usage;
mod view;
mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::ledger::{AttemptOrigin, AttemptState, LedgerEntry, RecoveryLedger, RestartRecord};
pub use crate::payload::LaneOutcome;
pub use crate::verification::{
    CommandOutcome, CommandResult, Freshness, FreshnessState, GitOperation, GreenLevel, HeadState,
    MergeOutcome, Verification, VerifyResult,
};
pub use doc::{
    Base, Blocked, ClawEvent, ClawEventKind, ClawStatus, Escalation, Failure, LastEvent, Prompt,
    PromptReceipt, PullRequest, Supervisor, Transport, TransportKind, WorkerStateDoc,
    claw_event_kind, claw_status,
};
pub use hook_channel::HookChannel;
pub use liveness::{Liveness, SupervisorLock, probe};
pub use permissions::{
    GrantUse, PermissionDecision, PermissionDecisions, RECENT_PERMISSION_DECISIONS,
};
pub use read::{StateFileError, parse_state, read_lane_record, read_state_file};
pub use usage::{
    Tokens, Usage, from_protocol as usage_from_protocol, from_transcript as usage_from_transcript,
};
pub use view::{ShownStatus, StateView, supervisor_lost, with_ages};
pub use write::StateFileWriter;

/// The state file's major format version. Readers refuse files with a larger one; fields are
/// added without changing it.
///
/// Version 2 made `status` and `last_event` exactly claw-code's vocabulary and moved clawpool's
/// own to `lane_status` and `lane_event`; version 1 files (`status` in clawpool's vocabulary,
/// `claw_status` beside it, `last_event` with dotted kinds) are still read, and migrated.
pub const SCHEMA_VERSION: u32 = 2;

/// Where the published state file is, relative to the lane's worktree.
pub const STATE_FILE: &str = ".claw/worker-state.json";

/// A lane without a supervisor lock whose file is older than this is shown as
/// `supervisor_lost` (files written by a clawpool from before the lock, which rewrote them
/// every 5 s as a heartbeat).
pub const SUPERVISOR_LOST_AFTER: Duration = Duration::from_secs(15);

/// The published state file of the lane in `worktree`.
pub fn state_file_path(worktree: &Path) -> PathBuf {
    worktree.join(STATE_FILE)
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    crate::now_ms() / 1000
}

#[cfg(test)]
mod tests;
