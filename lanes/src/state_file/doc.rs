//! The on-disk document: [`WorkerStateDoc`] and its parts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::LaneEventKind;
use crate::payload::{GitFailed, LaneOutcome, MergeAttempt, Payload, TrustResolved};
use crate::{BlockedSubphase, Evidence, FailureClass, LaneEvent, LaneState, LaneStatus};

use crate::ledger::RecoveryLedger;
use crate::verification::{Freshness, GitOperation, GreenLevel, HeadState, Verification};

use super::SCHEMA_VERSION;

/// The per-lane state file, `<worktree>/.claw/worker-state.json`, as it is on disk.
///
/// A superset of claw-code's worker-state snapshot (`worker_id`, `status`, `is_ready`,
/// `trust_gate_cleared`, `prompt_in_flight`, `last_event`, `updated_at`,
/// `seconds_since_update`), whose fields hold exactly claw-code's vocabulary, so an
/// orchestrator written against claw-code's own types (`WorkerStatus`, `WorkerEvent`) reads
/// them in every state a lane can be in. clawpool's richer status and event are in fields of
/// their own (`lane_status`, `blocked`, `lane_event`). See `docs/state-file.md` for every
/// field. Every key is written on every write (`null` when unknown), so polling tools can rely
/// on the shape.
///
/// All times are Unix epoch **seconds**, as in claw-code, except `lane_event.at_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerStateDoc {
    /// The major version of this format; [`SCHEMA_VERSION`] for files this crate writes.
    /// Readers refuse larger values; new fields are added without changing it.
    pub schema_version: u32,
    /// The id of this run of the lane's worker (changes when the worker is restarted).
    pub worker_id: String,
    /// The nearest status in claw-code's vocabulary (see [`claw_status`]): the file's
    /// `status`.
    #[serde(rename = "status")]
    pub claw_status: ClawStatus,
    /// The lane's status, in clawpool's vocabulary: the file's `lane_status`.
    #[serde(rename = "lane_status")]
    pub status: LaneStatus,
    /// `status == ready_for_prompt`: a prompt may be delivered now.
    pub is_ready: bool,
    /// The lane is past the trust gate: the trust dialog was answered, or the agent reached
    /// its input line without asking.
    pub trust_gate_cleared: bool,
    /// An operator trusted this lane (`clawpool trust`, or a "yes" to its trust dialog): its
    /// folder is outside the trusted roots, and clawpool drives it only because of this. Kept
    /// so that a supervisor that adopts the lane, or restarts its agent, still may.
    #[serde(default)]
    pub trusted_by_operator: bool,
    /// A prompt was submitted (Enter pressed) and neither accepted nor refused yet.
    pub prompt_in_flight: bool,
    /// The last lane event that claw-code has a kind for, in claw-code's `WorkerEvent` shape;
    /// `null` before the first.
    pub last_event: Option<ClawEvent>,
    /// The last lane event applied, whatever its kind; `null` before the first.
    pub lane_event: Option<LastEvent>,
    /// When the last lane event happened (epoch s). Heartbeat rewrites do not change it.
    pub updated_at: u64,
    /// Seconds since the lane last made meaningful progress (`progress_at`), as of the write.
    /// Readers recompute it (see [`with_ages`](super::with_ages)).
    pub seconds_since_update: u64,
    /// When the lane last made meaningful progress (epoch s): a lane event, or the agent's
    /// screen changing while it works. Heartbeat rewrites do not change it.
    pub progress_at: u64,
    /// The lane's name.
    pub lane: String,
    /// The agent profile the lane runs (`claude`, `codex`, …).
    pub agent: String,
    /// The agent process, once started.
    pub pid: Option<u32>,
    /// The terminal the agent runs in.
    pub transport: Transport,
    /// The lane's git worktree (absolute path).
    pub worktree: String,
    /// The lane's branch, when known.
    pub branch: Option<String>,
    /// What the lane's branch was made from, when known.
    pub base: Option<Base>,
    /// The prompt's delivery.
    pub prompt: Prompt,
    /// Set exactly when `status` is `blocked`.
    pub blocked: Option<Blocked>,
    /// Set exactly when `status` is `failed` or `blocked`: every failed or blocked lane has
    /// one failure class (for a blocked lane, the class its subphase is heading for).
    pub failure: Option<Failure>,
    /// The supervisor that owns the lane and writes this file.
    pub supervisor: Supervisor,
    /// What the worktree has checked out: `{"kind": "branch", "name", "sha"}` or
    /// `{"kind": "detached", "sha"}`; `null` before the first check.
    #[serde(default)]
    pub head: Option<HeadState>,
    /// The branch against its base, as last checked; `null` before the first check.
    #[serde(default)]
    pub freshness: Option<Freshness>,
    /// A git operation paused in the worktree (rebase, merge, …); `null` when there is none.
    #[serde(default)]
    pub git_operation: Option<GitOperation>,
    /// The highest green level the lane's current HEAD reached; `null` until one is reached,
    /// and again once the branch moves on.
    #[serde(default)]
    pub green_level: Option<GreenLevel>,
    /// The last verification; `null` before the first.
    #[serde(default)]
    pub verification: Option<Verification>,
    /// Every recovery attempt and the restart record (`docs/recovery.md`).
    #[serde(default)]
    pub recovery: RecoveryLedger,
    /// What a person must do for the lane, when recovery handed it over (`lane.escalated`, or
    /// `lane.blocked` with a next action); `null` otherwise, and again once the lane moves on.
    #[serde(default)]
    pub escalation: Option<Escalation>,
    /// What a finished lane's work came to (`lane.outcome`): `changed`, or `no_changes` (no
    /// commits of its own since its base and a clean worktree); `null` until the lane
    /// finishes, and again once it is anything but finished.
    #[serde(default)]
    pub outcome: Option<LaneOutcome>,
    /// The tool-permission questions the permission policy decided (`docs/permissions.md`):
    /// counts and the latest decisions. Empty in files written before clawpool decided them.
    #[serde(default)]
    pub permissions: super::PermissionDecisions,
    /// The agent's hook channel (`docs/state-file.md`): reports received and failed. All zero
    /// for an agent without one, and in files written before clawpool had it.
    #[serde(default)]
    pub hooks: super::HookChannel,
    /// The tokens the agent reported using (`usage`): absent while it reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<super::Usage>,
    /// The lane's sandbox (`docs/sandbox.md`): set when its agent runs in one; absent when it
    /// runs unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::LaneSandbox>,
    /// What the usage cost in US dollars, with the lane's price table (`crate::cost`); absent
    /// while the agent reported no usage, or when its model has no price (`cost` says why):
    /// never a zero for unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// What `cost_usd` was computed from (the model, the price entry and its date), or why
    /// there is none; absent while the agent reported no usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<super::cost::CostBasis>,
    /// The lane's open pull request on the forge (`lane.pr.opened`, `clawpool pr`); absent
    /// while it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequest>,
    /// What the lane may cost (the packet's `budget_usd`, or the last `clawpool budget`): past
    /// it the lane is held `blocked{budget}`; absent when the lane has no budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// The prices the lane's supervisor prices usage with ([`WorkerStateDoc::set_prices`]);
    /// not part of the file: a reader shows the cost the supervisor wrote.
    #[serde(skip)]
    prices: Option<std::sync::Arc<super::cost::PriceTable>>,
    /// Fields written by a newer writer of the same schema version that this version does not
    /// know: kept so that reading and printing a file loses nothing. Never written by this
    /// version itself.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A lane's pull request on the forge, as `lane.pr.opened` said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// Its page.
    pub url: String,
    /// Its head branch (the lane's).
    pub branch: String,
    /// The branch it merges into.
    pub base: String,
    /// The lane's HEAD when it was pushed for it.
    pub head: String,
    /// When it was recorded (epoch s).
    pub at: u64,
}

/// claw-code's worker status vocabulary (`WorkerStatus` in claw-code's
/// `rust/crates/runtime/src/worker_boot.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClawStatus {
    /// `spawning`.
    Spawning,
    /// `trust_required`.
    TrustRequired,
    /// `tool_permission_required`.
    ToolPermissionRequired,
    /// `ready_for_prompt`.
    ReadyForPrompt,
    /// `running`.
    Running,
    /// `finished`.
    Finished,
    /// `failed`.
    Failed,
}

/// The claw-code status nearest to a clawpool lane state.
///
/// clawpool's `spawning`, `trust_required`, `tool_permission_required`, `ready_for_prompt`,
/// `running`, `finished` and `failed` are claw-code's, spelled the same. The others:
///
/// - `prompt_accepted` → `running` (claw-code goes to `running` when it sends the prompt);
/// - `stopped` → `finished` (claw-code's control plane ends a worker as `finished`);
/// - `blocked{trust_prompt}` → `trust_required`, `blocked{tool_permission}` →
///   `tool_permission_required`;
/// - any other `blocked` → `running` once a prompt was sent (claw-code stays `running`, with
///   `prompt_in_flight`, until it sees the prompt taken or misdelivered), `spawning` before.
pub fn claw_status(
    status: LaneStatus,
    subphase: Option<BlockedSubphase>,
    prompt_sent: bool,
) -> ClawStatus {
    match status {
        LaneStatus::Spawning => ClawStatus::Spawning,
        LaneStatus::TrustRequired => ClawStatus::TrustRequired,
        LaneStatus::ToolPermissionRequired => ClawStatus::ToolPermissionRequired,
        LaneStatus::ReadyForPrompt => ClawStatus::ReadyForPrompt,
        LaneStatus::PromptAccepted | LaneStatus::Running => ClawStatus::Running,
        // claw-code has no status of its own for a worker a person ended: its control plane's
        // `terminate` records `finished` ("worker terminated by control plane"), so does this.
        LaneStatus::Finished | LaneStatus::Stopped => ClawStatus::Finished,
        LaneStatus::Failed => ClawStatus::Failed,
        LaneStatus::Blocked => match subphase {
            Some(BlockedSubphase::TrustPrompt) => ClawStatus::TrustRequired,
            Some(BlockedSubphase::ToolPermission) => ClawStatus::ToolPermissionRequired,
            _ if prompt_sent => ClawStatus::Running,
            _ => ClawStatus::Spawning,
        },
    }
}

/// claw-code's worker event kinds (`WorkerEventKind` in claw-code's
/// `rust/crates/runtime/src/worker_boot.rs`), those a clawpool lane event can stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClawEventKind {
    /// `spawning`.
    Spawning,
    /// `trust_required`.
    TrustRequired,
    /// `tool_permission_required`.
    ToolPermissionRequired,
    /// `trust_resolved`.
    TrustResolved,
    /// `ready_for_prompt`.
    ReadyForPrompt,
    /// `prompt_misdelivery`.
    PromptMisdelivery,
    /// `running`.
    Running,
    /// `finished`.
    Finished,
    /// `failed`.
    Failed,
}

/// The claw-code event kind a lane event stands for, if any (`to` is its transition's target):
///
/// | lane event | claw-code kind |
/// |---|---|
/// | `lane.started`, `lane.spawning` | `spawning` |
/// | `lane.trust_required`, `lane.blocked` to `trust_prompt` | `trust_required` |
/// | `lane.tool_permission_required`, `lane.blocked` to `tool_permission` | `tool_permission_required` |
/// | `lane.trust_resolved` | `trust_resolved` |
/// | `lane.ready` | `ready_for_prompt` |
/// | `lane.prompt_misdelivery` | `prompt_misdelivery` |
/// | `lane.prompt_accepted`, `lane.running` | `running` |
/// | `lane.finished`, `lane.closed_out` | `finished` |
/// | `lane.failed` | `failed` |
///
/// Every other event (`lane.prompt_sent`, other `lane.blocked`, commits, verification, …) has
/// none and leaves `last_event` as it was.
pub fn claw_event_kind(kind: &LaneEventKind, to: Option<LaneState>) -> Option<ClawEventKind> {
    Some(match kind {
        LaneEventKind::Started | LaneEventKind::Spawning => ClawEventKind::Spawning,
        LaneEventKind::TrustRequired => ClawEventKind::TrustRequired,
        LaneEventKind::ToolPermissionRequired => ClawEventKind::ToolPermissionRequired,
        LaneEventKind::TrustResolved => ClawEventKind::TrustResolved,
        LaneEventKind::Ready => ClawEventKind::ReadyForPrompt,
        LaneEventKind::PromptMisdelivery => ClawEventKind::PromptMisdelivery,
        LaneEventKind::PromptAccepted | LaneEventKind::Running => ClawEventKind::Running,
        LaneEventKind::Finished | LaneEventKind::Stopped | LaneEventKind::ClosedOut => {
            ClawEventKind::Finished
        }
        LaneEventKind::Failed => ClawEventKind::Failed,
        LaneEventKind::Blocked => match to.and_then(LaneState::subphase) {
            Some(BlockedSubphase::TrustPrompt) => ClawEventKind::TrustRequired,
            Some(BlockedSubphase::ToolPermission) => ClawEventKind::ToolPermissionRequired,
            _ => return None,
        },
        _ => return None,
    })
}

/// A lane event as claw-code's `WorkerEvent` (`{seq, kind, status, detail, payload,
/// timestamp}`), in claw-code's vocabulary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClawEvent {
    /// The event's `seq` in the lane's event log.
    pub seq: u64,
    /// claw-code's kind.
    pub kind: ClawEventKind,
    /// claw-code's status after the event.
    pub status: ClawStatus,
    /// One human-readable line, as in `lane_event.detail`.
    pub detail: Option<String>,
    /// claw-code's tagged payload where it has one for the event (`{"type": "trust_prompt",
    /// "cwd", "resolution"?}` for trust events), else `null`.
    pub payload: Option<Value>,
    /// When it happened (epoch s).
    pub timestamp: u64,
}

impl ClawEvent {
    /// `event` (a lane event as `lane_event` holds it) as claw-code's event of `kind`, after
    /// which claw-code's status is `status`; `cwd` is the lane's worktree.
    pub fn from_lane_event(
        event: &LastEvent,
        kind: ClawEventKind,
        status: ClawStatus,
        cwd: &str,
    ) -> Self {
        let payload = match kind {
            ClawEventKind::TrustRequired => Some(serde_json::json!({
                "type": "trust_prompt",
                "cwd": cwd,
            })),
            ClawEventKind::TrustResolved => {
                let detail = event.payload.as_ref().and_then(|p| p.get("detail"));
                let resolved = detail.and_then(|d| Payload::read(&LaneEventKind::TrustResolved, d));
                let resolution = match resolved {
                    Some(Payload::TrustResolved(trust))
                        if trust.method == TrustResolved::AUTO_ALLOWLISTED =>
                    {
                        TrustResolved::AUTO_ALLOWLISTED
                    }
                    _ => "manual_approval",
                };
                Some(serde_json::json!({
                    "type": "trust_prompt",
                    "cwd": cwd,
                    "resolution": resolution,
                }))
            }
            _ => None,
        };
        Self {
            seq: event.seq,
            kind,
            status,
            detail: event.detail.clone(),
            payload,
            timestamp: event.timestamp,
        }
    }
}

/// The last lane event, whatever its kind (`lane_event`): claw-code's event shape
/// (`{seq, kind, status, detail, payload, timestamp}`) in clawpool's vocabulary, plus `at_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastEvent {
    /// The event's `seq` in the lane's event log.
    pub seq: u64,
    /// The event's kind as in the event log (`lane.ready`, `lane.prompt_accepted`, …).
    pub kind: LaneEventKind,
    /// The lane's status after the event.
    pub status: LaneStatus,
    /// One human-readable line: the transition and its evidence, when there is one.
    pub detail: Option<String>,
    /// The event's structured data: `from`, `to`, `evidence` and `detail` from the event log,
    /// those it has; `null` when it has none.
    pub payload: Option<Value>,
    /// When it happened (epoch s).
    pub timestamp: u64,
    /// When it happened (epoch ms), as `at_ms` in the event log.
    pub at_ms: u64,
}

impl LastEvent {
    /// The `last_event` for `event`, after which the lane's status is `status`.
    pub fn from_event(event: &LaneEvent, status: LaneStatus) -> Self {
        let mut payload = Map::new();
        if let Some(from) = &event.from {
            payload.insert("from".into(), to_value(from));
        }
        if let Some(to) = &event.to {
            payload.insert("to".into(), to_value(to));
        }
        if let Some(evidence) = &event.evidence {
            payload.insert("evidence".into(), to_value(evidence));
        }
        if !event.detail.is_null() {
            payload.insert("detail".into(), event.detail.clone());
        }
        let transition = match (&event.from, &event.to) {
            (Some(from), Some(to)) => Some(format!("{from} -> {to}")),
            (None, Some(to)) => Some(format!("-> {to}")),
            _ => None,
        };
        let evidence = event.evidence.as_ref().map(describe_evidence);
        let detail = match (transition, evidence) {
            (Some(t), Some(e)) => Some(format!("{t} ({e})")),
            (t, e) => t.or(e),
        };
        Self {
            seq: event.seq,
            kind: event.kind.clone(),
            status,
            detail,
            payload: (!payload.is_empty()).then_some(Value::Object(payload)),
            timestamp: event.at_ms / 1000,
            at_ms: event.at_ms,
        }
    }
}

/// The terminal an agent runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transport {
    /// `pty` or `tmux`.
    pub kind: TransportKind,
    /// For tmux, the target to attach to (`SOCKET:SESSION`); `null` for a PTY.
    pub session: Option<String>,
}

/// The kind of terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// A PTY the supervisor owns.
    Pty,
    /// A tmux session on a private server.
    Tmux,
}

/// What a lane's branch was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Base {
    /// The ref as given (`main`, `origin/main`, a tag).
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The commit it resolved to when the lane's branch was made.
    pub sha: String,
}

/// How the lane's prompt was delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// How many times Enter was pressed for the prompt (0: not sent).
    pub attempts: u32,
    /// When Enter was first pressed (epoch s).
    pub sent_at: Option<u64>,
    /// When the screen proved the prompt was taken (epoch s).
    pub accepted_at: Option<u64>,
    /// The delivery receipt, once the prompt was accepted.
    pub receipt: Option<PromptReceipt>,
    /// How many texts `clawpool send` delivered after the lane's prompt; the other fields
    /// describe the latest delivery.
    #[serde(default)]
    pub followups: u32,
    /// A restart dropped the turn the agent was in and no prompt was accepted since: the
    /// agent idle is not the lane's work done (a supervisor adopting the lane keeps to that).
    #[serde(default)]
    pub turn_dropped: bool,
}

/// The parts of the supervisor's delivery receipt that are not already in [`Prompt`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptReceipt {
    /// `typed`, `task_file`, `launch_arg` or `none`.
    pub method: String,
    /// The evidence of acceptance (the echoed prompt or the working indicator).
    pub observed_prompt_preview: Option<String>,
}

/// Why and since when a lane is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    /// What the lane waits for.
    pub subphase: BlockedSubphase,
    /// Since when (epoch s); kept while the subphase stays the same.
    pub since: u64,
}

/// A lane handed to a person: why, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    /// Why clawpool could not go on by itself.
    pub reason: String,
    /// The recommended next action (commands name the lane).
    pub next_action: String,
    /// The recovery recipe that escalated, if one did.
    pub recipe: Option<String>,
    /// When (epoch s).
    pub at: u64,
}

/// Why a lane failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The failure class.
    pub class: FailureClass,
    /// One human-readable line: the evidence that decided.
    pub detail: Option<String>,
}

/// The supervisor that owns a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Supervisor {
    /// Its process id.
    pub pid: u32,
    /// When it last wrote this file (epoch s): on every change. Nothing rewrites the file
    /// while nothing happens; whether the supervisor is alive is its lock's to say
    /// ([`probe`](super::probe)).
    pub heartbeat_at: u64,
}

impl WorkerStateDoc {
    /// The document of a lane whose worker is starting (`spawning`) at `now` (epoch s), owned
    /// by this process.
    pub fn new(
        worker_id: impl Into<String>,
        lane: impl Into<String>,
        agent: impl Into<String>,
        worktree: impl Into<String>,
        transport: Transport,
        now: u64,
    ) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            worker_id: worker_id.into(),
            status: LaneStatus::Spawning,
            claw_status: ClawStatus::Spawning,
            is_ready: false,
            trust_gate_cleared: false,
            trusted_by_operator: false,
            prompt_in_flight: false,
            last_event: None,
            lane_event: None,
            updated_at: now,
            seconds_since_update: 0,
            progress_at: now,
            lane: lane.into(),
            agent: agent.into(),
            pid: None,
            transport,
            worktree: worktree.into(),
            branch: None,
            base: None,
            prompt: Prompt::default(),
            blocked: None,
            failure: None,
            supervisor: Supervisor {
                pid: std::process::id(),
                heartbeat_at: now,
            },
            head: None,
            freshness: None,
            git_operation: None,
            green_level: None,
            verification: None,
            recovery: RecoveryLedger::default(),
            escalation: None,
            outcome: None,
            permissions: super::PermissionDecisions::default(),
            hooks: super::HookChannel::default(),
            usage: None,
            sandbox: None,
            cost_usd: None,
            pull_request: None,
            cost: None,
            budget_usd: None,
            prices: None,
            extra: Map::new(),
        }
    }

    /// The lane state (`status` with its subphase or failure class).
    ///
    /// A file read through [`super::parse_state`] is coherent (a blocked lane has `blocked`, a
    /// failed one `failure`); a document built by hand without them reads as blocked on an
    /// unknown dialog, or failed on infrastructure: the least that can be said.
    pub fn lane_state(&self) -> LaneState {
        match self.status {
            LaneStatus::Blocked => LaneState::Blocked(
                self.blocked
                    .map_or(BlockedSubphase::UnknownDialog, |b| b.subphase),
            ),
            LaneStatus::Failed => LaneState::Failed(
                self.failure
                    .as_ref()
                    .map_or(FailureClass::Infra, |f| f.class),
            ),
            plain => LaneState::of_plain(plain).expect("neither blocked nor failed"),
        }
    }

    /// Whether `status`, `blocked` and `failure` fit together: `blocked` exactly when
    /// blocked, `failure` when blocked or failed. `None` when they do, else what is wrong.
    pub(super) fn incoherence(&self) -> Option<String> {
        let status = crate::state::wire_name(&self.status);
        match (self.status, &self.blocked, &self.failure) {
            (LaneStatus::Blocked, None, _) => Some("lane_status blocked without `blocked`".into()),
            (LaneStatus::Failed, _, None) => Some("lane_status failed without `failure`".into()),
            (LaneStatus::Blocked | LaneStatus::Failed, _, _) | (_, None, None) => None,
            (_, Some(_), _) => Some(format!("lane_status {status} with `blocked`")),
            (_, _, Some(_)) => Some(format!("lane_status {status} with `failure`")),
        }
    }

    /// Sets the lane state as of `at` (epoch s): `status`, `blocked` (keeping `since` while
    /// the subphase is unchanged) and `failure` (with `detail`). Does not touch `updated_at`.
    pub fn set_state(&mut self, state: LaneState, at: u64, failure_detail: Option<String>) {
        let was_blocked = self.blocked;
        let status = state.status();
        if !matches!(status, LaneStatus::Blocked | LaneStatus::Failed) {
            // The lane moved on: whatever a person was asked to do is past.
            self.escalation = None;
        }
        if status != LaneStatus::Finished {
            self.outcome = None;
        }
        self.status = status;
        self.blocked = state.subphase().map(|subphase| Blocked {
            subphase,
            since: match was_blocked {
                Some(b) if b.subphase == subphase => b.since,
                _ => at,
            },
        });
        self.failure = state
            .failure()
            .or(state.subphase().map(BlockedSubphase::failure_class))
            .map(|class| Failure {
                class,
                detail: failure_detail,
            });
        match state {
            LaneState::ReadyForPrompt | LaneState::PromptAccepted | LaneState::Running => {
                self.trust_gate_cleared = true;
            }
            _ => {}
        }
        if state == LaneState::PromptAccepted {
            self.prompt_in_flight = false;
            self.prompt.accepted_at.get_or_insert(at);
        }
        if state.is_terminal() {
            self.prompt_in_flight = false;
        }
        self.refresh_derived();
    }

    /// Applies the events of the lane's event log (the text of its `events.jsonl`) that came
    /// after the document's `lane_event`, and returns how many: the log is appended before the
    /// state file is rewritten, so a supervisor killed in between, or one whose last writes
    /// failed (a full disk), left the file behind the log. A line cut short by a crash is
    /// skipped. A document with no event yet is left as it is: the log's events then belong to
    /// earlier runs of the lane.
    pub fn catch_up(&mut self, log: &str) -> usize {
        let Some(after) = self.lane_event.as_ref().map(|e| e.seq) else {
            return 0;
        };
        let mut applied = 0;
        for event in log
            .lines()
            .filter_map(|line| serde_json::from_str::<LaneEvent>(line).ok())
            .filter(|event| event.seq > after)
        {
            self.apply_event(&event);
            applied += 1;
        }
        applied
    }

    /// Applies a lane event (`docs/events.md`): its `to` state, what its kind says about trust
    /// and the prompt, `last_event`, `updated_at` and `progress_at`.
    pub fn apply_event(&mut self, event: &LaneEvent) {
        let at = event.at_ms / 1000;
        let payload = event.payload();
        if let Some(to) = event.to {
            let detail = event
                .evidence
                .as_ref()
                .map(describe_evidence)
                .or_else(|| payload.as_ref().and_then(stated_reason));
            self.set_state(to, at, detail);
        }
        match payload {
            Some(Payload::Started(started)) => self.pid = started.pid,
            Some(Payload::Restarted(restarted)) => {
                self.prompt.turn_dropped = restarted.dropped_turn;
            }
            Some(Payload::TrustResolved(trust)) => {
                self.trusted_by_operator |= trust.method == TrustResolved::MANUAL;
            }
            Some(Payload::PromptSent(sent)) => {
                self.prompt.attempts = self.prompt.attempts.max(sent.attempt);
            }
            Some(Payload::PromptAccepted(receipt)) => {
                self.prompt.attempts = self.prompt.attempts.max(receipt.attempts);
                if let Some(sent) = receipt.sent_at {
                    self.prompt.sent_at.get_or_insert(sent / 1000);
                }
                if let Some(accepted) = receipt.accepted_at {
                    self.prompt.accepted_at = Some(accepted / 1000);
                }
                self.prompt.receipt = Some(PromptReceipt {
                    method: receipt.method,
                    observed_prompt_preview: receipt.observed_prompt_preview,
                });
            }
            Some(Payload::Escalated(escalated) | Payload::BlockedEscalated(escalated)) => {
                self.escalation = Some(Escalation {
                    reason: escalated.reason,
                    next_action: escalated.next_action,
                    recipe: escalated.recipe,
                    at,
                });
            }
            Some(Payload::Outcome(reported)) => self.outcome = Some(reported.outcome),
            Some(Payload::PrOpened(opened)) => {
                self.pull_request = Some(PullRequest {
                    number: opened.number,
                    url: opened.url,
                    branch: opened.branch,
                    base: opened.base,
                    head: opened.head,
                    at,
                });
            }
            Some(Payload::PermissionDecided(decided)) => self.permissions.record(decided, at),
            Some(Payload::ChannelOpened(opened)) => self.hooks.opened(opened),
            Some(Payload::ChannelDegraded(degraded)) => self.hooks.degraded(&degraded),
            Some(Payload::Hook(hook)) => self.hooks.received(&hook.event, at),
            Some(Payload::Usage(reported)) => {
                super::usage::from_transcript(&mut self.usage, &reported, at);
                self.reprice();
            }
            Some(Payload::Protocol(message)) => {
                self.hooks.received(&message.event, at);
                super::usage::from_protocol(&mut self.usage, &message, at);
                self.reprice();
            }
            Some(Payload::BudgetSet(set)) => self.budget_usd = Some(set.budget_usd.0),
            Some(Payload::Verified(verified)) => {
                let verified = *verified;
                self.green_level = verified.green_level;
                self.verification = Some(verified.verification);
            }
            // A prompt_sent from a log without its attempt counts as one more.
            None if event.kind == LaneEventKind::PromptSent => {
                self.prompt.attempts = self.prompt.attempts.saturating_add(1);
            }
            // The other kinds tell the state file nothing beyond its `last_event`.
            _ => {}
        }
        match &event.kind {
            LaneEventKind::TrustResolved => self.trust_gate_cleared = true,
            LaneEventKind::PromptSent => {
                self.prompt_in_flight = true;
                self.prompt.sent_at.get_or_insert(at);
            }
            LaneEventKind::PromptAccepted => {
                self.prompt_in_flight = false;
                self.prompt.turn_dropped = false;
                self.prompt.accepted_at.get_or_insert(at);
            }
            LaneEventKind::PromptMisdelivery => self.prompt_in_flight = false,
            LaneEventKind::PromptRound => {
                self.prompt = Prompt {
                    followups: self.prompt.followups + 1,
                    turn_dropped: self.prompt.turn_dropped,
                    ..Prompt::default()
                };
            }
            _ => {}
        }
        self.refresh_derived();
        let lane_event = LastEvent::from_event(event, self.status);
        if let Some(kind) = claw_event_kind(&event.kind, event.to) {
            self.last_event = Some(ClawEvent::from_lane_event(
                &lane_event,
                kind,
                self.claw_status,
                &self.worktree,
            ));
        }
        self.lane_event = Some(lane_event);
        self.updated_at = at;
        // An operator's command the lane ignored or refused did nothing to it: no progress.
        if !matches!(
            event.kind,
            LaneEventKind::OperatorIgnored | LaneEventKind::OperatorRefused
        ) {
            self.record_progress(at);
        }
    }

    /// Records meaningful progress at `at` (epoch s) — e.g. the agent's screen changed while
    /// it works. Never moves `progress_at` backwards.
    pub fn record_progress(&mut self, at: u64) {
        self.progress_at = self.progress_at.max(at);
    }

    /// Prepares the document for a write at `now` (epoch s): `supervisor.heartbeat_at`,
    /// `seconds_since_update`, and the fields derived from others (`is_ready`,
    /// `claw_status`). Call it before every [`StateFileWriter::write`](super::StateFileWriter::write).
    pub fn stamp(&mut self, now: u64) {
        self.refresh_derived();
        self.supervisor.heartbeat_at = now;
        self.seconds_since_update = now.saturating_sub(self.progress_at);
    }

    /// Prices the lane's usage with `prices` from now on (the supervisor's configuration).
    pub fn set_prices(&mut self, prices: std::sync::Arc<super::cost::PriceTable>) {
        self.prices = Some(prices);
        self.reprice();
    }

    /// `cost_usd` and `cost` from the usage and the prices; left as they are without prices
    /// (a document read back by a reader).
    fn reprice(&mut self) {
        let (Some(usage), Some(prices)) = (&self.usage, &self.prices) else {
            return;
        };
        let (usd, basis) = super::cost::price(usage, prices);
        self.cost_usd = usd;
        self.cost = Some(basis);
    }

    /// Recomputes `is_ready` and `claw_status` from `status`, `blocked` and `prompt`.
    pub fn refresh_derived(&mut self) {
        self.is_ready = self.status == LaneStatus::ReadyForPrompt;
        self.claw_status = claw_status(
            self.status,
            self.blocked.map(|b| b.subphase),
            self.prompt.sent_at.is_some() || self.prompt.attempts > 0,
        );
    }
}

/// What a transition without evidence says of the state it leads to, for the failure's
/// detail: why a worker could not be started again, why a merge-forward did not bring the
/// base in (git's own words when it failed), why a verification moved the lane.
fn stated_reason(payload: &Payload) -> Option<String> {
    match payload {
        Payload::Failed(failed) => failed.error.clone(),
        Payload::BranchBlocked(blocked) => Some(match &blocked.merge {
            MergeAttempt::Failed(GitFailed::Failed { error }) => error.clone(),
            MergeAttempt::Outcome(_) => blocked.message.clone(),
        }),
        Payload::Verified(verified) => verified.message.clone(),
        _ => None,
    }
}

/// `rule (region): matched`.
fn describe_evidence(evidence: &Evidence) -> String {
    format!(
        "{} ({}): {}",
        evidence.rule, evidence.region, evidence.matched
    )
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, at_ms: u64, kind: &str, to: Option<LaneState>, detail: Value) -> LaneEvent {
        LaneEvent {
            seq,
            at_ms,
            kind: LaneEventKind::parse(kind),
            lane: "fix-login".to_owned(),
            from: None,
            to,
            evidence: None,
            detail,
            source: None,
        }
    }

    fn doc() -> WorkerStateDoc {
        WorkerStateDoc::new(
            "fix-login-1",
            "fix-login",
            "claude",
            "/work/lanes/fix-login",
            Transport {
                kind: TransportKind::Pty,
                session: None,
            },
            1_000,
        )
    }

    #[test]
    fn a_new_worker_whose_pid_is_unknown_shows_no_pid_not_the_last_ones() {
        let mut doc = doc();
        let started = |pid: Value| json!({"agent": "claude", "pid": pid});
        let spawning = Some(LaneState::Spawning);
        doc.apply_event(&event(
            1,
            1_000,
            "lane.started",
            spawning,
            started(json!(4242)),
        ));
        assert_eq!(doc.pid, Some(4242));
        doc.apply_event(&event(
            2,
            2_000,
            "lane.started",
            spawning,
            started(Value::Null),
        ));
        assert_eq!(doc.pid, None);
    }

    #[test]
    fn events_drive_the_claw_code_fields() {
        let mut doc = doc();
        doc.apply_event(&event(
            1,
            1_000_000,
            "lane.started",
            Some(LaneState::Spawning),
            json!({"agent": "claude", "pid": 4242}),
        ));
        assert_eq!(doc.pid, Some(4242));
        doc.apply_event(&event(
            2,
            1_002_000,
            "lane.trust_required",
            Some(LaneState::TrustRequired),
            Value::Null,
        ));
        assert!(!doc.trust_gate_cleared);
        doc.apply_event(&event(
            3,
            1_003_000,
            "lane.trust_resolved",
            None,
            json!({"method": "auto_allowlisted"}),
        ));
        assert!(doc.trust_gate_cleared);
        doc.apply_event(&event(
            4,
            1_004_000,
            "lane.ready",
            Some(LaneState::ReadyForPrompt),
            Value::Null,
        ));
        assert!(doc.is_ready);
        assert_eq!(doc.claw_status, ClawStatus::ReadyForPrompt);
        doc.apply_event(&event(
            5,
            1_005_000,
            "lane.prompt_sent",
            None,
            json!({"attempt": 1}),
        ));
        assert!(doc.prompt_in_flight);
        assert_eq!(doc.prompt.sent_at, Some(1_005));
        doc.apply_event(&event(
            6,
            1_006_500,
            "lane.prompt_accepted",
            Some(LaneState::PromptAccepted),
            json!({"method": "typed", "attempts": 2, "sent_at": 1_005_100u64,
                   "accepted_at": 1_006_400u64, "observed_prompt_preview": "❯ fix it"}),
        ));
        assert!(!doc.prompt_in_flight);
        assert!(!doc.is_ready);
        assert_eq!(doc.claw_status, ClawStatus::Running);
        assert_eq!(doc.prompt.attempts, 2);
        assert_eq!(doc.prompt.accepted_at, Some(1_006));
        assert_eq!(
            doc.prompt.receipt.as_ref().map(|r| r.method.as_str()),
            Some("typed")
        );
        assert_eq!(doc.updated_at, 1_006);
        assert_eq!(doc.progress_at, 1_006);
        let last = doc.lane_event.as_ref().expect("lane event");
        assert_eq!(
            (last.seq, last.status, last.timestamp),
            (6, LaneStatus::PromptAccepted, 1_006)
        );
        assert_eq!(
            last.payload.as_ref().expect("payload")["detail"]["attempts"],
            2
        );
        // claw-code's view of the same event: it is `running` once the prompt is taken.
        let claw = doc.last_event.as_ref().expect("claw-code's last event");
        assert_eq!(
            (claw.seq, claw.kind, claw.status, claw.timestamp),
            (6, ClawEventKind::Running, ClawStatus::Running, 1_006)
        );
        assert_eq!(claw.payload, None);

        // An operator's command the lane ignored changes nothing: no progress.
        doc.apply_event(&event(
            7,
            1_060_000,
            "lane.operator_ignored",
            None,
            json!({"command": "answer", "reason": "no dialog on screen"}),
        ));
        assert_eq!(doc.progress_at, 1_006);
        assert_eq!(doc.updated_at, 1_060);
    }

    #[test]
    fn blocked_keeps_since_and_maps_to_claw_code() {
        let mut doc = doc();
        doc.set_state(LaneState::Blocked(BlockedSubphase::UnknownDialog), 10, None);
        assert_eq!(doc.claw_status, ClawStatus::Spawning);
        doc.set_state(LaneState::Blocked(BlockedSubphase::UnknownDialog), 20, None);
        assert_eq!(doc.blocked.map(|b| b.since), Some(10));
        doc.set_state(LaneState::Blocked(BlockedSubphase::TrustPrompt), 30, None);
        assert_eq!(doc.blocked.map(|b| b.since), Some(30));
        assert_eq!(doc.claw_status, ClawStatus::TrustRequired);
        doc.prompt.sent_at = Some(31);
        doc.set_state(LaneState::Blocked(BlockedSubphase::Provider), 40, None);
        assert_eq!(doc.claw_status, ClawStatus::Running);
        doc.set_state(
            LaneState::Failed(FailureClass::WorkerCrashed),
            50,
            Some("process_exit (process): exit 3".into()),
        );
        assert_eq!(doc.blocked, None);
        assert_eq!(
            doc.failure.as_ref().map(|f| f.class),
            Some(FailureClass::WorkerCrashed)
        );
        assert_eq!(doc.claw_status, ClawStatus::Failed);
    }

    #[test]
    fn a_finished_lanes_outcome_is_kept_until_it_is_anything_but_finished() {
        let mut doc = doc();
        let finished = Some(LaneState::Finished);
        doc.apply_event(&event(1, 1_000_000, "lane.finished", finished, Value::Null));
        assert_eq!(doc.outcome, None);
        doc.apply_event(&event(
            2,
            1_001_000,
            "lane.outcome",
            None,
            json!({"outcome": "no_changes", "commits": 0, "dirty": false}),
        ));
        assert_eq!(doc.outcome, Some(LaneOutcome::NoChanges));
        assert_eq!(to_value(&doc)["outcome"], "no_changes");
        doc.set_state(LaneState::Failed(FailureClass::Test), 1_002, None);
        assert_eq!(doc.outcome, None);
        // A file written before the field existed reads as no outcome.
        let mut old = to_value(&doc);
        old.as_object_mut().expect("object").remove("outcome");
        let read: WorkerStateDoc = serde_json::from_value(old).expect("an older file");
        assert_eq!(read.outcome, None);
    }
}
