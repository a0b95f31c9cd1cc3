//! The payloads of a lane's run: its worker started, restarted, failed or stalled, recovery's
//! ledger and escalations, and what the finished lane came to.

use serde::{Deserialize, Serialize};

use crate::ledger::LedgerEntry;

/// `lane.started`, `lane.adopted`: the worker the run drives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStarted {
    /// The profile's name.
    pub agent: String,
    /// The worker's process id, when the transport knows it.
    pub pid: Option<u32>,
}

/// `lane.escalated`, and the `lane.blocked` of a recipe that escalates by blocking: a person
/// must act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalated {
    /// Why clawpool could not go on by itself.
    pub reason: String,
    /// The recommended next action (commands name the lane).
    pub next_action: String,
    /// The recovery recipe that escalated, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<String>,
}

/// What a finished lane's work came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneOutcome {
    /// The lane's branch has commits of its own since its base, or its worktree has
    /// uncommitted work.
    Changed,
    /// Nothing changed: no commits of its own since its base and a clean worktree. Its
    /// passing tests prove only the unchanged code, so it is never merge-ready.
    NoChanges,
}

/// `lane.outcome`: what a finished lane's work came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeReported {
    /// Changed or not.
    pub outcome: LaneOutcome,
    /// Commits of the lane's own since its base.
    pub commits: u64,
    /// Whether the worktree has uncommitted work.
    pub dirty: bool,
}

/// `lane.closed_out`: the policy's `close_out` ended the lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedOut {
    /// The rule that decided it.
    pub rule: String,
}

/// `lane.session_replaced`: a tmux session of the lane's name, left by a supervisor that was
/// killed, was ended before the lane started afresh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionReplaced {
    /// `SOCKET:SESSION`.
    pub session: String,
    /// Whether it was ended.
    pub killed: bool,
    /// Why not, when it was not (null otherwise).
    pub error: Option<String>,
}

/// `lane.restart_requested`: why and how a lane's worker is started again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartRequest {
    /// Who asked, or which recovery recipe (`operator`, `restart_crashed_worker`, …).
    pub by: String,
    /// Start the agent with its profile's resume arguments (when it has them).
    #[serde(default)]
    pub resume: bool,
    /// Deliver the lane's prompt again after the restart, whatever happened to it before.
    #[serde(default)]
    pub redeliver: bool,
}

/// `lane.restarted`: a new worker is being started in the lane (its `lane.started` follows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restarted {
    /// Who asked ([`RestartRequest::by`]).
    pub by: String,
    /// How many restarts the lane has had, this one included.
    pub restart: u32,
    /// The new worker's id.
    pub worker_id: String,
    /// Whether the agent is started with its resume arguments.
    pub resume: bool,
    /// Whether the lane has a prompt to deliver again.
    pub redeliver_prompt: bool,
    /// The restart dropped the turn the agent was in (taken, not delivered again): the new
    /// agent idle is not the lane's work done, until a prompt is accepted.
    #[serde(default)]
    pub dropped_turn: bool,
    /// The state the lane was in.
    pub previous: String,
    /// The old worker's exit status, if it exited.
    pub previous_exit: Option<String>,
}

/// `lane.failed`: the transition's own fields, when it has any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneFailed {
    /// The signal that interrupted the supervisor (evidence `supervisor_interrupted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Why, when no evidence says it (a worker that could not be started again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `lane.stalled`: a running lane showed no meaningful progress for its stall time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stalled {
    /// How long it showed none.
    pub seconds_without_progress: u64,
    /// The lane's stall time.
    pub stall_after_secs: u64,
}

/// `lane.recovery.*`: a recovery ledger entry as it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryAttempt {
    /// The entry's index in the ledger.
    pub id: usize,
    /// The entry.
    #[serde(flatten)]
    pub entry: LedgerEntry,
}

/// What came of a lane's earlier run, for `lane.rerun`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreviousRun {
    /// It finished (a close-out included).
    Finished,
    /// A person stopped it (`clawpool stop`).
    Stopped,
    /// `clawpool gc` removed its worktree and registry entry.
    RemovedByGc,
}

/// `lane.rerun`: a fresh run of the lane's task starts after an earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rerun {
    /// What asked for it (`spawn --rerun`).
    pub by: String,
    /// What came of the earlier run.
    pub previous: PreviousRun,
}

/// `lane.publication_restored`: the lane's published state file (`.claw/worker-state.json`)
/// was not what its supervisor last wrote, and was written again from the lane's record. The
/// agent in the lane can write its worktree; what it writes there is never believed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicationRestored {
    /// What was found in its place.
    pub found: PublicationFound,
    /// The `lane_status` the file found claimed, when it was a JSON object with one (the first
    /// look may catch a file half-written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_status: Option<String>,
}

/// What a lane's supervisor found where its published state file should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublicationFound {
    /// No file (deleted, or its folder removed).
    Removed,
    /// A file other than the one written.
    Changed,
}
