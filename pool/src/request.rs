//! The pool's typed API: one [`PoolRequest`] per operation, each carrying its own data, and
//! one typed reply per request ([`PoolReply`]). Callers (the CLI, the daemon, `clawpool ui`,
//! the MCP server) convert their own flags or wire messages into these; nothing here is a
//! command line or a JSON value. Progress while a request runs goes to the caller's
//! [`Observer`](crate::observer::Observer); the reply is what the request came to.
//! This module is the API's data only; [`crate::service::Pool::handle`] runs a request.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clawpool_lane::control::VerifiedReply;
use clawpool_lane::handshake::{OperatorCommand, Verdict};
use clawpool_lane::interrupt::StopSignal;
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::{LaneState, PacketErrors};
use clawpool_recovery::Action;
use clawpool_recovery::permissions::{Grant, GrantScope, SetAside};
use clawpool_worktree::{MergeOutcome, Repo};

use crate::error::{CommandError, EXIT_INVALID_INPUT};

/// A request to the pool of one repository.
pub enum PoolRequest {
    /// Start a packet's lanes here (or say that the daemon is to take them).
    Spawn(SpawnRequest),
    /// Take over the lanes a supervisor that died left.
    Adopt(AdoptRequest),
    /// Show every lane as it stands now.
    Board(crate::board::BoardRequest),
    /// Remove the lanes whose work is safe elsewhere.
    Gc(crate::gc::GcRequest),
    /// An operator's command to one lane: trust, answer, send (a follow-up to a lane that
    /// ended), stop, restart, budget.
    Operate(OperateRequest),
    /// Merge a lane's base into its branch.
    MergeForward(LaneArg),
    /// Verify a lane's work at a level.
    Verify(VerifyRequest),
    /// Answer the tool-permission question a lane waits on and keep the yes as a grant
    /// (`answer --remember`).
    AnswerRemembering(RememberRequest),
    /// Run a recovery recipe on a lane by hand (`recover`).
    Recover(RecoverRequest),
}

/// The reply to a [`PoolRequest`], variant for variant.
pub enum PoolReply {
    /// What a [`PoolRequest::Spawn`] came to.
    Spawn(SpawnReply),
    /// What a [`PoolRequest::Adopt`] came to.
    Adopt(AdoptReply),
    /// The board a [`PoolRequest::Board`] read.
    Board(crate::board::BoardReply),
    /// What a [`PoolRequest::Gc`] decided for each lane.
    Gc(crate::gc::GcReply),
    /// What a [`PoolRequest::Operate`] came to.
    Operate(OperateReply),
    /// The merge's outcome (merged, up to date, or why not).
    MergeForward(MergeOutcome),
    /// The verification, green or not, and the lane's green level after it.
    Verify(Box<VerifiedReply>),
    /// The lane's verdict on the answer, and the grant kept.
    AnswerRemembering(RememberReply),
    /// The recipe run, or why it was refused before anything was sent.
    Recover(RecoverReply),
}

/// The terminal a packet's lanes run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A PTY owned by the supervisor: its lanes end with it.
    Pty,
    /// A session on the repository's private tmux server: lanes outlive their supervisor and
    /// can be adopted.
    Tmux,
}

impl From<clawpool_lanes::state_file::TransportKind> for Transport {
    fn from(kind: clawpool_lanes::state_file::TransportKind) -> Self {
        match kind {
            clawpool_lanes::state_file::TransportKind::Pty => Transport::Pty,
            clawpool_lanes::state_file::TransportKind::Tmux => Transport::Tmux,
        }
    }
}

/// Start the lanes of a task packet.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// A folder in the repository.
    pub repo: PathBuf,
    /// The packet's text.
    pub packet: String,
    /// The packet's name in messages (its file, or a name for an inline packet).
    pub packet_name: PathBuf,
    /// The terminal the lanes run in.
    pub transport: Transport,
    /// Lanes started at once (default [`crate::start::DEFAULT_CONCURRENCY`]).
    pub concurrency: Option<usize>,
    /// The agent of lanes that name none.
    pub agent: Option<String>,
    /// Run again the lanes earlier runs finished, stopped or gc removed.
    pub rerun: bool,
    /// Hand the lanes to the repository's daemon rather than run them here.
    pub detach: bool,
}

/// Take over every registered lane of a repository that has not ended.
#[derive(Debug, Clone)]
pub struct AdoptRequest {
    /// A folder in the repository.
    pub repo: PathBuf,
}

/// What a spawn came to.
pub enum SpawnReply {
    /// The packet was refused before anything was created, with every problem found.
    Invalid(InvalidPacket),
    /// The repository's daemon is to take the packet (handing over is the caller's, so that
    /// the pool never depends on the daemon's transport).
    HandOver(HandOver),
    /// The lanes ran here to their ends.
    Ran(SpawnReport),
}

/// A packet the daemon is to take.
pub struct HandOver {
    /// The repository.
    pub repo: Repo,
    /// The packet's text.
    pub packet: String,
    /// Start a daemon if none runs (`--detach`); otherwise only hand over to a running one.
    pub start: bool,
    /// Why this process could not run it itself, when handing over is the fallback: the error
    /// to report if no daemon takes it.
    pub refused: Option<CommandError>,
}

/// The lanes a foreground spawn ran, and how each ended.
pub struct SpawnReport {
    /// Each lane started, with its final state (none when it never started).
    pub lanes: BTreeMap<String, Option<LaneState>>,
    /// The lanes whose outcome is in their event log but could not be written to their state
    /// file, with the write's error.
    pub unpersisted: BTreeMap<String, String>,
    /// The lanes an earlier run left, not started.
    pub skipped: Vec<SkippedLane>,
    /// The signal that stopped the run, if one did.
    pub interrupted: Option<StopSignal>,
}

impl SpawnReport {
    /// Whether every lane started here finished and its state file says so.
    pub fn all_finished(&self) -> bool {
        self.unpersisted.is_empty()
            && self
                .lanes
                .values()
                .all(|s| s.is_some_and(|s| s == LaneState::Finished))
    }
}

/// The lanes an adoption took over, and those it left alone.
pub struct AdoptReply {
    /// Each lane taken over (or recorded as lost), with its final state.
    pub adopted: BTreeMap<String, Option<LaneState>>,
    /// The lanes not taken over, and why: nothing was done to them.
    pub not_adopted: Vec<NotAdopted>,
    /// The signal that stopped the run, if one did.
    pub interrupted: Option<StopSignal>,
}

impl AdoptReply {
    /// Whether every lane was taken over and finished.
    pub fn all_finished(&self) -> bool {
        self.not_adopted.is_empty()
            && self
                .adopted
                .values()
                .all(|s| s.is_some_and(|s| s == LaneState::Finished))
    }
}

/// Why a lane of the packet is not started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    /// Its last run finished (a close-out included): its prompt is not typed again.
    Finished,
    /// A person stopped its last run (`clawpool stop`): a spawn does not undo that by typing
    /// the task again; `clawpool send` continues the lane's session.
    Stopped,
    /// `clawpool gc` removed its worktree and registry entry: it is not re-created.
    RemovedByGc,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skipped::Finished => "finished",
            Skipped::Stopped => "stopped (`clawpool send` continues it)",
            Skipped::RemovedByGc => "removed by gc",
        })
    }
}

/// A lane of the packet left as an earlier run left it; serialized as spawn's final document
/// lists it: `{"lane", "state", "skipped"}`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkippedLane {
    /// The lane's name.
    #[serde(rename = "lane")]
    pub name: String,
    /// Its state as its state file has it (none for a lane gc removed).
    pub state: Option<LaneState>,
    /// Why it was not started.
    #[serde(rename = "skipped")]
    pub why: Skipped,
}

/// A packet refused before anything was created, with every problem found.
#[derive(Debug)]
pub struct InvalidPacket {
    /// The packet file, as given.
    pub file: PathBuf,
    /// Every problem, each with its JSON path.
    pub problems: PacketErrors,
}

impl From<&InvalidPacket> for CommandError {
    fn from(invalid: &InvalidPacket) -> Self {
        CommandError {
            kind: "invalid_packet",
            message: format!("{}: {}", invalid.file.display(), invalid.problems),
            exit: EXIT_INVALID_INPUT,
        }
    }
}

impl From<InvalidPacket> for CommandError {
    fn from(invalid: InvalidPacket) -> Self {
        Self::from(&invalid)
    }
}

/// A lane that could not be taken over, and why: `kind` is the error's stable name
/// (`invalid_state_file`, `missing_worker_state`, `invalid_registry_entry`, `unknown_agent`,
/// or the kind of the error that stopped it, e.g. `tmux_failed`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct NotAdopted {
    /// The lane.
    pub lane: String,
    /// The error's stable name.
    pub kind: &'static str,
    /// For people.
    pub error: String,
}

/// A lane as its caller named it: `arg` (a lane name or a folder) resolved in `from` (a
/// folder of the repository whose registry a name is looked up in; a relative folder is taken
/// from there). The CLI's `from` is the current folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneArg {
    /// The folder the argument is resolved in.
    pub from: PathBuf,
    /// The argument as given.
    pub arg: PathBuf,
}

impl LaneArg {
    /// `arg` as given on this process's command line: resolved in the current folder.
    pub fn here(arg: &Path) -> Self {
        Self {
            from: PathBuf::from("."),
            arg: arg.to_owned(),
        }
    }

    /// The argument as its caller wrote it, for messages.
    pub fn label(&self) -> String {
        self.arg.display().to_string()
    }
}

/// Send `command` to a lane.
pub struct OperateRequest {
    /// The lane, as the caller named it.
    pub lane: LaneArg,
    /// The command.
    pub command: OperatorCommand,
    /// Whether a follow-up this request drives stops its lane on this process's SIGINT or
    /// SIGTERM (the CLI: yes, as `clawpool run`). A long-lived caller (the MCP server) says no:
    /// listening would keep those signals from ending it for the rest of its life.
    pub follow_up_stops_on_signals: bool,
    /// Whether a follow-up to a registered lane is replied [`OperateReply::HandOver`] instead
    /// of driven here: the repository's pool server (the daemon) is to own it. Handing over
    /// is the caller's, as a spawn's is, so that the pool never depends on the daemon's
    /// transport.
    pub hand_over_follow_up: bool,
}

/// What an operator command came to.
pub enum OperateReply {
    /// The lane's verdict, from the supervisor driving it.
    Verdict(Verdict),
    /// A `send` to a stopped or finished lane, which this request drove to its new end.
    FollowUp(FollowUp),
    /// A `send` to a stopped or finished registered lane, checked (the text, the lane, that it
    /// ended and nobody drives it) and not started: the repository's daemon is to run it.
    HandOver(FollowUpHandOver),
}

/// A follow-up the repository's daemon is to run.
#[derive(Debug, Clone)]
pub struct FollowUpHandOver {
    /// The lane's repository.
    pub repo: Repo,
    /// The lane's name in the repository's registry.
    pub lane: String,
    /// The text of the new turn.
    pub text: String,
}

/// A follow-up's end: whether the agent started again took the text as a new turn, and the
/// state the lane then ended in.
#[derive(Debug, Clone, Copy)]
pub struct FollowUp {
    /// The text was accepted as a new turn of the lane's session.
    pub accepted: bool,
    /// The state the lane ended in (`None` when it is not known).
    pub state: Option<LaneState>,
}

/// Verify a lane's work at a level.
#[derive(Debug, Clone)]
pub struct VerifyRequest {
    /// The lane, as the caller named it.
    pub lane: LaneArg,
    /// The green level asked for.
    pub level: GreenLevel,
}

/// Answer the tool-permission question a lane waits on, keeping a yes as a grant.
#[derive(Debug, Clone)]
pub struct RememberRequest {
    /// The lane, as the caller named it.
    pub lane: LaneArg,
    /// The choice (a scope other than `once` keeps only a `yes`: the caller checks).
    pub choice: String,
    /// How widely the grant applies (`once` keeps none).
    pub scope: GrantScope,
}

/// What an `answer --remember` came to.
pub struct RememberReply {
    /// The lane's verdict on the answer.
    pub verdict: Verdict,
    /// The grant kept: none for `once`, or when the lane did not take the answer.
    pub kept: Option<KeptGrant>,
}

/// A grant kept for a lane's question.
pub struct KeptGrant {
    /// The grant as stored (numbered and signed).
    pub grant: Grant,
    /// The store it is in.
    pub store: PathBuf,
    /// The store found unreadable and set aside before this one was started, if it was.
    pub set_aside: Option<SetAside>,
    /// The lane's name as the grant records it (its worktree's folder).
    pub lane: String,
}

/// Run a recovery recipe on a lane by hand.
#[derive(Debug, Clone)]
pub struct RecoverRequest {
    /// The lane, as the caller named it.
    pub lane: LaneArg,
    /// The recipe; `None`: the one the lane's policy decides for its state.
    pub recipe: Option<String>,
}

/// What a `recover` came to.
pub enum RecoverReply {
    /// The recipe's operator command went to the lane: its verdict.
    Ran(RecipeRun),
    /// Refused before anything was sent to the lane.
    Refused(RecoverRefused),
}

/// A recipe run by hand.
pub struct RecipeRun {
    /// The lane's name (its folder when its record cannot be read).
    pub lane: String,
    /// The recipe.
    pub recipe: String,
    /// The policy rule that decided it, when none was named.
    pub decided_by: Option<String>,
    /// The operator command that carried it out.
    pub command: OperatorCommand,
    /// The lane's verdict on it.
    pub verdict: Verdict,
}

/// A recipe refused, in words and by kind.
pub struct RecoverRefused {
    /// For people.
    pub message: String,
    /// Why, with its fields.
    pub why: RecoverRefusal,
}

/// Why a `recover` was refused.
pub enum RecoverRefusal {
    /// No recipe of that name.
    UnknownRecipe {
        /// Every recipe's name.
        recipes: Vec<String>,
        /// Those `recover` runs.
        runnable_by_hand: Vec<String>,
    },
    /// No operator command carries the recipe out.
    NotRunnableByHand {
        /// The recipe.
        recipe: String,
        /// The rule that decided it, when none was named.
        decided_by: Option<String>,
        /// The recipes `recover` runs.
        runnable_by_hand: Vec<String>,
    },
    /// None was named and the policy decides none for the lane's state.
    NoRecipe {
        /// The rule that matched and what it decides instead (`None`: no rule matched).
        decision: Option<DecidedRecipe>,
    },
}

/// A policy rule's decision that is not a recipe.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DecidedRecipe {
    /// The rule.
    pub rule: String,
    /// What it decides.
    pub action: Action,
}

impl RecoverRefusal {
    /// The error's stable name.
    pub fn kind(&self) -> &'static str {
        match self {
            RecoverRefusal::UnknownRecipe { .. } => "unknown_recipe",
            RecoverRefusal::NotRunnableByHand { .. } => "recipe_not_runnable_by_hand",
            RecoverRefusal::NoRecipe { .. } => "no_recipe",
        }
    }

    /// The exit code: a name or recipe that cannot be run is bad input; a state the policy
    /// has no recipe for is a failure.
    pub fn exit(&self) -> u8 {
        match self {
            RecoverRefusal::NoRecipe { .. } => crate::error::EXIT_FAILURE,
            _ => EXIT_INVALID_INPUT,
        }
    }
}
