//! The per-lane state file, `<worktree>/.claw/worker-state.json`: the public contract other
//! tools poll (`docs/state-file.md`).
//!
//! - [`WorkerStateDoc`] is the document on disk, a superset of claw-code's worker-state
//!   snapshot. The supervisor keeps one per lane, feeds it every lane event
//!   ([`WorkerStateDoc::apply_event`]) and progress ([`WorkerStateDoc::record_progress`]),
//!   and [stamps](WorkerStateDoc::stamp) it before each write.
//! - [`StateFileWriter`] replaces the file atomically on every transition and at least every
//!   [`HEARTBEAT_INTERVAL`]; readers never see a partial file, and a failed write leaves the
//!   previous file intact.
//! - [`read_state_file`] reads and checks a file; [`with_ages`] makes the view a reader shows,
//!   with ages recomputed and a lane whose supervisor stopped heartbeating shown as
//!   `supervisor_lost`.

mod doc;
mod permissions;
mod read;
mod recovery;
mod verification;
mod view;
mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use doc::{
    Base, Blocked, ClawEvent, ClawEventKind, ClawStatus, Escalation, Failure, LaneOutcome,
    LastEvent, Prompt, PromptReceipt, Supervisor, Transport, TransportKind, WorkerStateDoc,
    claw_event_kind, claw_status,
};
pub use permissions::{PermissionDecision, PermissionDecisions, RECENT_PERMISSION_DECISIONS};
pub use read::{StateFileError, parse_state, read_lane_state, read_state_file};
pub use recovery::{AttemptOrigin, AttemptState, LedgerEntry, RecoveryLedger, RestartRecord};
pub use verification::{
    CommandOutcome, CommandResult, Freshness, FreshnessState, GitOperation, GreenLevel, HeadState,
    MergeOutcome, Verification, VerifyResult,
};
pub use view::{ShownStatus, StateView, with_ages};
pub use write::StateFileWriter;

/// The state file's major format version. Readers refuse files with a larger one; fields are
/// added without changing it.
///
/// Version 2 made `status` and `last_event` exactly claw-code's vocabulary and moved clawpool's
/// own to `lane_status` and `lane_event`; version 1 files (`status` in clawpool's vocabulary,
/// `claw_status` beside it, `last_event` with dotted kinds) are still read, and migrated.
pub const SCHEMA_VERSION: u32 = 2;

/// Where the state file is, relative to the lane's worktree.
pub const STATE_FILE: &str = ".claw/worker-state.json";

/// The longest a supervisor goes without rewriting a lane's state file.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// A lane whose supervisor heartbeat is older than this is shown as `supervisor_lost`.
pub const SUPERVISOR_LOST_AFTER: Duration = Duration::from_secs(15);

/// The state file of the lane in `worktree`.
pub fn state_file_path(worktree: &Path) -> PathBuf {
    worktree.join(STATE_FILE)
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    crate::now_ms() / 1000
}

#[cfg(test)]
mod tests;
