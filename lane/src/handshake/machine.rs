//! The handshake's state machine: every decision about one lane's worker, and no I/O.
//!
//! [`Machine::handle`] takes one [`Input`] (a look at the screen, the worker's exit, an
//! operator's command, or the result of an effect it asked for) and returns the [`Effect`]s
//! the driver ([`super::Handshake::run`]) carries out, in order: keys and text for the
//! terminal, events to record, verdicts to send, a dialog to answer, the worker to stop.
//! [`Machine::next_deadline`] says when to look again if nothing happens. The lane's state is
//! changed here and only here; time comes in with each input (`now`), and every timing rule
//! (boot timeout, finish-idle, provider block, submit retries, unknown screen, stall, recovery
//! check) is a comparison against it, so the rules are tested with paused tokio time.
//!
//! Effects that have a result (a dialog answered, the worktree's git operation looked up, a
//! task file written, the trust store noted) suspend the decision that asked for them; the
//! driver feeds their result back as the next input before anything else happens. A terminal
//! write carries the effects that only make sense once it succeeded (`on_sent`); when it
//! fails, the driver skips them and reports [`Input::SendFailed`].

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use clawpool_lanes::payload::{
    ChannelContradiction, ChannelDegraded, DeliveryHeld, DialogAnswered, DialogAnsweredOutside,
    DialogIgnored, ErrorReport, Escalated, InputCleared, LaneFailed, OperatorDeclined, Payload,
    PromptMisdelivery, PromptRound, PromptSent, PromptTyped, SendQueued, SendRefused, Stalled,
    TrustResolved, WorkerStarted,
};
use clawpool_lanes::{BlockedSubphase, EventSource, Evidence, FailureClass, LaneState};
use clawpool_pty::{ExitStatus, ScreenSnapshot};
use clawpool_recovery::{ProgressSource, ProgressTracker, Trigger};
use clawpool_worktree::GitOperation;
use tokio::time::Instant;

use super::delivery::{self, PromptPlan, Receipt};
use super::unknown::UnknownScreen;
use super::verdict::{OperatorRequest, QueuePlace, SendFate, Verdict, VerdictReply};
use super::{LaneContext, Next, OperatorCommand, RestartRequest, Settings, TrustGate};
use crate::channel::ProtocolFact;
use crate::channel::{HookEvent, HookFact};
use crate::permission_gate::PermissionAnswer;
use clawpool_agents::detect::{Observation, Phase, Seen, observe_in};
use clawpool_agents::profiles::{AgentHooks, Dialog, DialogKind, Policy, Profile, Signal};
use clawpool_recovery::permissions::Verdict as PermissionVerdict;

/// Something that happened to the lane, with the time it is handled at.
#[derive(Debug)]
pub enum Input {
    /// The screen as it is now, and the latest progress seen off it (worktree changes,
    /// commits: epoch ms and what).
    Look {
        /// The screen.
        screen: ScreenSnapshot,
        /// The latest off-screen progress.
        external: Option<(u64, ProgressSource)>,
    },
    /// The worker exited; the screen holds everything it wrote.
    Exited(ExitStatus, ScreenSnapshot),
    /// An operator's command, with the screen as it is when it arrived.
    Operator {
        /// The command and the way back for its verdict.
        request: OperatorRequest,
        /// The screen.
        screen: ScreenSnapshot,
    },
    /// A terminal write ([`Effect::Send`]) failed; its `on_sent` effects were not carried out.
    SendFailed {
        /// Why.
        error: String,
        /// Whether the lane fails for it (delivering the prompt), or the worker's exit, which
        /// follows, tells what happened (emptying the input line).
        fatal: bool,
    },
    /// [`Effect::Answer`] is done.
    Answered(Result<(), String>),
    /// [`Effect::ProbeGitOperation`]: the git operation in the lane's worktree, if any.
    GitOperation(Option<GitOperation>),
    /// [`Effect::WriteTaskFile`] is done.
    TaskFileWritten(Result<(), String>),
    /// [`Effect::GuardTrustStore`] is done: whether the store could be noted (its error was
    /// recorded by the driver).
    StoreGuarded(bool),
    /// [`Effect::DecidePermission`]: what the permission policy says about the question.
    PermissionDecided(PermissionAnswer),
    /// The agent reported a fact through its hook channel.
    Hook(HookFact),
    /// The lane's gate decided the question of the agent's PermissionRequest hook, and an
    /// allow or deny was the hook's answer.
    HookPermissionDecided(PermissionAnswer),
    /// A hook could not deliver its report: the channel is not to be relied on.
    HookFailed {
        /// The hook event.
        event: String,
        /// Why, in the hook's words.
        error: String,
    },
    /// The agent reported a fact through its app server's protocol.
    Protocol(ProtocolFact),
    /// The connection to the agent's app server ended: the channel is not to be relied on.
    ProtocolLost {
        /// Why.
        error: String,
    },
    /// The supervisor was told to stop (SIGINT, SIGTERM): the signal's name.
    Interrupted(&'static str),
    /// The lane's worktree (this folder) is gone: deleted or moved away while the lane ran.
    WorktreeGone(std::path::PathBuf),
    /// The lane's cost in US dollars now, priced as its agent's usage arrived (`cost_usd`):
    /// checked against its budget ([`super::LaneBudget`]).
    Cost(f64),
}

/// What the driver carries out for the machine.
#[derive(Debug)]
pub enum Effect {
    /// Record a lane event.
    Record(Record),
    /// Write to the worker's terminal; then, if that worked, these.
    Send {
        /// The text or key.
        input: clawpool_pty::Input,
        /// What follows a successful write.
        on_sent: Vec<Effect>,
        /// Whether a failed write fails the lane ([`Input::SendFailed`]).
        fatal: bool,
    },
    /// Run a dialog's choice against the worker; then [`Input::Answered`].
    Answer {
        /// The dialog.
        dialog: Dialog,
        /// The choice.
        choice: String,
    },
    /// Stop the worker (SIGTERM, then SIGKILL after the grace time).
    StopWorker,
    /// The agent's boot is over (a prompt is in): from now the terminal answers only the
    /// queries the profile says the agent asks while it works, so nothing the agent prints
    /// makes the terminal type into its input line (`docs/terminals.md`, "Queries").
    BootOver,
    /// Look up the git operation in the lane's worktree; then [`Input::GitOperation`].
    ProbeGitOperation,
    /// Note the agent's trust store before clawpool answers its trust dialog; then
    /// [`Input::StoreGuarded`].
    GuardTrustStore,
    /// Withdraw what the agent recorded in its trust store beyond the lane.
    ConfineTrustStore,
    /// Write a text sent to the agent into the task file; then [`Input::TaskFileWritten`].
    WriteTaskFile {
        /// The file.
        file: PathBuf,
        /// The text.
        prompt: String,
    },
    /// Ask the lane's permission gate about the tool-permission dialog on these screen rows;
    /// then [`Input::PermissionDecided`].
    DecidePermission {
        /// The screen's rows.
        rows: Vec<String>,
    },
    /// Send a verdict to whoever waits for it.
    Reply {
        /// The way back.
        to: VerdictReply,
        /// The verdict.
        verdict: Verdict,
    },
}

/// A lane event to record (the event log numbers and stamps it).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Its kind and typed fields (`lane.prompt_typed` with its length, …).
    pub payload: Payload,
    /// The state before, for a transition.
    pub from: Option<LaneState>,
    /// The state after, for a transition (or the state a lane starts in).
    pub to: Option<LaneState>,
    /// What on screen (or elsewhere) decided it.
    pub evidence: Option<Evidence>,
    /// Where the fact that decided it came from.
    pub source: Option<EventSource>,
}

/// A recovery recipe's `wait_for_progress` check on this run.
///
/// Its time runs from the start of the run; it counts progress once armed, when the agent has
/// taken everything it was given (the prompt or a nudge was accepted and nothing is queued),
/// so the echo of our own text is never taken for progress. A nudge that cannot be delivered
/// (the input line is not free) is a check without progress.
#[derive(Debug, Clone)]
struct ProgressCheck {
    /// `None`: no time limit (an escalated lane watched until it moves).
    within: Option<Duration>,
    started: Instant,
    /// When it was armed (epoch ms), if it is.
    armed_at: Option<u64>,
    /// Normalised texts this run delivered: screen lines inside them are their echo.
    delivered: Vec<String>,
}

/// A text waiting to be delivered, with the verdict owed to the operator who sent it (none
/// for a recovery's nudge, or once the operator was told it is queued).
#[derive(Debug)]
pub(super) struct Followup {
    pub(super) text: String,
    pub(super) reply: Option<VerdictReply>,
}

/// A decision waiting for the result of an effect it asked for.
#[derive(Debug)]
enum Suspended {
    /// A dialog answered by clawpool itself (its policy, or the trust allow-list).
    PolicyAnswer {
        name: String,
        choice: String,
        kind: DialogKind,
        attempt: u32,
        evidence: Evidence,
    },
    /// A dialog answered by an operator's command.
    OperatorAnswer {
        name: String,
        choice: String,
        kind: DialogKind,
        reply: VerdictReply,
    },
    /// A tool-permission dialog waits for the permission policy's decision.
    Permission {
        name: String,
        dialog: Dialog,
        evidence: Evidence,
    },
    /// Delivery waits to know whether a git operation holds it.
    Delivery,
    /// A text's round starts once its task file is written.
    Round {
        followup: Followup,
        plan: PromptPlan,
    },
}

/// How many times clawpool answers the same dialog before it blocks the lane instead.
const MAX_ANSWERS_PER_DIALOG: u32 = 3;

/// How often a worktree with a paused git operation is looked at again while delivery waits.
const HOLD_RECHECK: Duration = Duration::from_secs(2);

/// How many times the input line is emptied of our own text in one round before giving up.
const MAX_INPUT_CLEARS: u32 = 3;

/// One lane's handshake state and rules.
pub struct Machine<'a> {
    profile: &'a Profile,
    lane: LaneContext,
    settings: Settings,
    state: LaneState,
    receipt: Receipt,
    /// The time of the input being handled.
    now: Instant,
    /// A moment and the wall clock (epoch ms) at it: wall times are derived from `now`, so
    /// they move with paused time in tests.
    anchor: (Instant, u64),
    /// The dialog the lane is blocked on, waiting for an operator.
    waiting_dialog: Option<String>,
    /// When the current idle spell (after acceptance) began.
    idle_since: Option<Instant>,
    /// How long the input must stay idle before the machine acts: `finish_idle` (then
    /// finished) once the agent was seen working or drew a reply, `start_timeout` (then
    /// blocked: the turn never started) before.
    finish_wait: Duration,
    /// When the provider retry text first showed in the current spell.
    provider_since: Option<Instant>,
    /// Since when a lane blocked on its provider has shown no provider-retry text: the agent
    /// counts as back only once that held for [`PROVIDER_BACK_HOLD`].
    provider_clear_since: Option<Instant>,
    boot_deadline: Instant,
    /// Each dialog's answer attempts, so a dialog that will not go away ends up blocked.
    answer_attempts: HashMap<String, u32>,
    /// Whether tool-permission dialogs go to the lane's permission policy
    /// ([`Effect::DecidePermission`]) before a person.
    decides_permissions: bool,
    /// Answers the permission policy gave each question since the agent last worked, so a
    /// question that will not go away ends up blocked.
    permission_answers: HashMap<String, u32>,
    /// Texts sent with [`OperatorCommand::Send`], delivered one by one when the agent is idle.
    followups: VecDeque<Followup>,
    /// The verdict owed for the text being delivered this round.
    round_reply: Option<VerdictReply>,
    /// Whether this round delivers a text sent after the prompt (an operator's or a nudge).
    followup_round: bool,
    /// The verdict owed for a restart, handed to the driver with the outcome.
    restart_reply: Option<VerdictReply>,
    /// Set when the run is to end (an operator's stop or restart, a recovery trigger, a
    /// check's result).
    next: Option<Next>,
    /// Whether the idle input was ever seen.
    reached_ready: bool,
    /// What counts as progress while the agent works, and since when there was none.
    progress: ProgressTracker,
    /// The latest off-screen progress the driver reported.
    external: Option<(u64, ProgressSource)>,
    /// A running lane with no progress this long is stalled; `None` never.
    stall_after: Option<Duration>,
    /// A recovery check in progress, if the driver asked for one.
    check: Option<ProgressCheck>,
    /// Hand a lane that becomes blocked to recovery.
    recover_blocked: bool,
    /// While a git operation is paused in the lane's worktree, nothing is typed: when to look
    /// at the worktree again.
    held_until: Option<Instant>,
    /// Times the input line was emptied of our own text the agent put back, this round.
    input_clears: u32,
    /// How long a running lane has shown a screen no rule knows.
    unknown_screen: UnknownScreen,
    /// Set when clawpool answered a trust dialog: the agent's store is confined to the lane
    /// once the dialog is gone.
    confine_pending: bool,
    /// A restart dropped the turn the agent was in: its idle input is not its work done.
    dropped_turn: bool,
    /// Whether this run recorded `lane.trust_resolved` (once per run, however many answers).
    trust_recorded: bool,
    /// clawpool's answer to the trust dialog whose check did not confirm it (under load the
    /// expected highlight can come after the check gave up, while the keys still worked): the
    /// dialog gone from the screen afterwards is the proof, and the resolution is recorded then.
    unconfirmed_trust: Option<(&'static str, Evidence)>,
    /// When the trust clawpool gave the agent must have taken effect: an agent still showing
    /// its profile's `booting` signal then is restarted once ([`super::TRUST_NOT_APPLIED`]).
    trust_due: Option<Instant>,
    /// Whether the agent's boot is over: clawpool typed into it, its prompt was taken, or it
    /// was seen working. From then no trust or boot dialog is a question ([`Phase::Turn`]).
    booted: bool,
    /// The boot-only dialog whose look-alike shows now, recorded once (`lane.dialog_ignored`).
    lookalike: Option<String>,
    /// A decision waiting for an effect's result.
    suspended: Option<Suspended>,
    /// Where the input being handled came from (an effect's result keeps its decision's).
    source: Option<EventSource>,
    /// The agent's hook channel, as far as its reports told.
    hooks: HookState,
    /// Effects decided while handling the current input.
    out: Vec<Effect>,
    /// The lane's cost as last reported ([`Input::Cost`]); `None` while unknown.
    cost_usd: Option<f64>,
}

/// How long a lane blocked on its provider must show the agent working without any
/// provider-retry text before it counts as running again. An agent's retry loop shows its
/// working indicator for each attempt (aider's `Waiting for <model>` between `Retrying in N
/// seconds...` lines): a glimpse of it between two failures is not the provider back.
pub const PROVIDER_BACK_HOLD: Duration = Duration::from_secs(8);

/// How long a tool-permission dialog waits for the PermissionRequest hook's decision once the
/// agent's hooks are known to work, before the screen's gate decides it: the hook's whole
/// delivery bound, and a second for the report to reach the handshake.
pub const HOOK_PERMISSION_GRACE: Duration =
    Duration::from_secs(crate::channel::DELIVERY_TIMEOUT.as_secs() + 1);

/// How long a tool reported started and not reported done counts as running: Claude Code's
/// longest tool timeout (its Bash tool's maximum). A tool whose end was never reported (the
/// agent interrupted in the middle of it) is left to the screen after this.
pub const TOOL_RUNNING_BOUND: Duration = Duration::from_secs(600);

/// How long a reported finish (`Stop`, the thread idle) waits for a screen that still shows
/// the agent working to stop showing it; past it the contradiction is recorded and the
/// report wins (`docs/events.md`, "Contradictions").
pub const CONTRADICTION_BOUND: Duration = Duration::from_secs(5);

/// What a reported finish says of the turn beyond its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// The report names the turn's last reply and no background work still in flight
    /// (Claude Code's Stop: `last_assistant_message`, `background_tasks`): the turn is over
    /// whatever the screen still shows.
    ReplyKnown,
    /// The report says only that the turn ended (Codex's thread idle, its notify program, a
    /// Stop without the reply): a screen still showing work is waited for.
    ScreenToFollow,
}

/// A reported finish the screen contradicted when it came.
#[derive(Debug)]
struct HeldStop {
    /// When it came.
    at: Instant,
    /// Its evidence.
    evidence: Evidence,
    /// Its channel.
    source: Option<EventSource>,
}

/// What the agent's hook reports told the machine (`docs/events.md`, "Hook facts").
#[derive(Debug, Default)]
struct HookState {
    /// The last look's working indicator, when it showed one.
    screen_working: Option<Evidence>,
    /// A reported finish waiting for the screen to stop showing work.
    held_stop: Option<HeldStop>,
    /// The channel proved to work in this run: a report reached the lane (a started agent's
    /// first is its SessionStart; an adopted one's, whatever it reports next).
    live: bool,
    /// Since when the screen has shown the prompt taken while the hook had not said so.
    screen_accept_since: Option<Instant>,
    /// A `UserPromptSubmit` was reported and no `Stop` since: the agent's turn is open.
    turn_open: bool,
    /// Tools reported started (`PreToolUse`) and not reported done (`PostToolUse`).
    tools_running: u32,
    /// When the last tool was reported started.
    tool_started_at: Option<Instant>,
    /// Deliveries that failed; from the first one the channel is degraded: its reports are
    /// still recorded, and the screen alone decides.
    failures: u32,
    /// What the lane's gate answered the latest PermissionRequest hook, until the agent moves
    /// on to another tool or turn: the dialog of that question, if it shows, is not answered
    /// again.
    permission: Option<PermissionVerdict>,
    /// Since when a tool-permission dialog has shown with no PermissionRequest decision: the
    /// screen's gate decides after [`HOOK_PERMISSION_GRACE`].
    permission_dialog_since: Option<Instant>,
    /// The open turn's idle-looking screen was recorded as a contradiction (once per turn).
    idle_contradicted: bool,
    /// The open turn was reported opening in this run (its UserPromptSubmit reached this
    /// supervisor), so its end will be reported here too. A turn an adopter took over may
    /// have ended while no supervisor listened: its idle screen still ends it.
    turn_opened_here: bool,
}

impl HookState {
    fn degraded(&self) -> bool {
        self.failures > 0
    }

    /// Whether the agent's own reports decide what they cover now.
    fn decides(&self) -> bool {
        self.live && !self.degraded()
    }

    /// Whether a tool is reported running at `now` (within [`TOOL_RUNNING_BOUND`] of its start).
    fn tool_running(&self, now: Instant) -> bool {
        self.tools_running > 0
            && self
                .tool_started_at
                .is_some_and(|at| now.duration_since(at) < TOOL_RUNNING_BOUND)
    }

    /// No tool is running any more (its turn ended, or it waits for a permission).
    fn tools_done(&mut self) {
        self.tools_running = 0;
        self.tool_started_at = None;
    }
}

impl<'a> Machine<'a> {
    /// A machine for a worker started at `now`; `wall_ms` is the wall clock at `now`.
    pub fn new(
        profile: &'a Profile,
        lane: LaneContext,
        settings: Settings,
        now: Instant,
        wall_ms: u64,
    ) -> Self {
        let receipt = Receipt::new(&lane.prompt);
        Self {
            profile,
            lane,
            settings,
            state: LaneState::Spawning,
            receipt,
            now,
            anchor: (now, wall_ms),
            waiting_dialog: None,
            idle_since: None,
            finish_wait: settings.finish_idle,
            provider_since: None,
            provider_clear_since: None,
            boot_deadline: now + settings.boot_timeout,
            answer_attempts: HashMap::new(),
            decides_permissions: false,
            permission_answers: HashMap::new(),
            followups: VecDeque::new(),
            round_reply: None,
            followup_round: false,
            restart_reply: None,
            next: None,
            reached_ready: false,
            progress: ProgressTracker::new(wall_ms / 1000),
            external: None,
            stall_after: None,
            check: None,
            recover_blocked: false,
            held_until: None,
            input_clears: 0,
            unknown_screen: UnknownScreen::default(),
            confine_pending: false,
            dropped_turn: false,
            trust_recorded: false,
            unconfirmed_trust: None,
            trust_due: None,
            booted: false,
            lookalike: None,
            suspended: None,
            source: None,
            hooks: HookState::default(),
            out: Vec::new(),
            cost_usd: None,
        }
    }

    /// Ends the run with [`Next::Recover`]`(stalled)` when the lane is `running` and its
    /// screen shows no meaningful progress for `after`.
    pub fn stall_after(&mut self, after: Duration) {
        self.stall_after = Some(after);
    }

    /// Ends the run when the lane becomes blocked on something recovery or a person deals
    /// with (see [`super::Handshake::recover_blocked`]).
    pub fn recover_blocked(&mut self) {
        self.recover_blocked = true;
    }

    /// A recovery check from now: [`Next::Progressed`] at the first meaningful progress once
    /// the agent has taken what it was given, [`Next::NoProgress`] when `within` passes.
    pub fn check_progress(&mut self, within: Option<Duration>) {
        let prompt = match &self.lane.prompt {
            PromptPlan::None => None,
            PromptPlan::Typed { prompt }
            | PromptPlan::TaskFile { prompt, .. }
            | PromptPlan::LaunchArg { prompt } => Some(clawpool_recovery::normalize_line(prompt)),
        };
        self.check = Some(ProgressCheck {
            within,
            started: self.now,
            armed_at: None,
            delivered: prompt.into_iter().collect(),
        });
    }

    /// Tool-permission dialogs whose profile policy is `ask` go to the permission policy
    /// first; only its asks wait for a person.
    pub fn decide_permissions(&mut self) {
        self.decides_permissions = true;
    }

    /// Texts to deliver, in order, as soon as the agent is idle (a recovery's nudge).
    pub fn with_followups(&mut self, texts: Vec<String>) {
        self.followups
            .extend(texts.into_iter().map(|text| Followup { text, reply: None }));
    }

    /// Continues the prompt count of an earlier worker of the same lane.
    pub fn after_attempts(&mut self, attempts: u32) {
        self.receipt.continue_count(attempts);
    }

    /// A restart dropped the turn the agent was in.
    pub fn after_dropped_turn(&mut self, dropped: bool) {
        self.dropped_turn = dropped;
    }

    /// Takes over a lane in a recorded state; with `retry_after`, a draft still in the input
    /// line after a recorded Enter gets Enter again after it.
    pub fn take_over(&mut self, from: super::Resumed, retry_after: Option<Duration>) {
        self.state = from.state;
        self.receipt
            .resume(from.attempts, from.sent_at, from.accepted_at, retry_after);
        self.reached_ready = !matches!(from.state, LaneState::Spawning | LaneState::TrustRequired);
        if from.state == LaneState::Blocked(BlockedSubphase::ToolPermission) {
            // Still waiting for a person's answer: one that comes between runs, or while no
            // supervisor ran, came from outside clawpool (an operator's `answer` is taken
            // during a run, never between).
            self.waiting_dialog = self
                .profile
                .dialogs
                .iter()
                .find(|dialog| dialog.kind == DialogKind::ToolPermission)
                .map(|dialog| dialog.name.clone());
        }
        // A prompt the earlier supervisor saw taken opened a turn that no report closed: the
        // agent's Stop finishes it, though no UserPromptSubmit reaches this supervisor.
        self.hooks.turn_open = from.accepted_at.is_some();
        if from.sent_at.is_some() || from.accepted_at.is_some() {
            self.end_boot();
        }
    }

    /// The event that opens a run (`lane.started`, `lane.adopted`).
    pub fn open(&mut self, adopted: bool, pid: Option<u32>) -> Vec<Effect> {
        let worker = WorkerStarted {
            agent: self.profile.name().to_owned(),
            pid,
        };
        let payload = if adopted {
            Payload::Adopted(worker)
        } else {
            Payload::Started(worker)
        };
        self.report(payload, None, Some(self.state), None);
        if adopted && self.state == LaneState::ReadyForPrompt {
            // Taking the lane over clears the escalation a person was given (any state set
            // does): a turn a restart dropped still needs one.
            self.escalate_dropped_turn();
        }
        std::mem::take(&mut self.out)
    }

    /// The lane's state.
    pub fn state(&self) -> LaneState {
        self.state
    }

    /// Whether a prompt is in flight: typed and entered (or given at launch) and not yet seen
    /// taken. Its acceptance is what callers wait on (`wait --until running`, the next
    /// `send`), so the driver looks at every screen change meanwhile instead of coalescing
    /// them.
    pub fn awaits_acceptance(&self) -> bool {
        self.receipt.accepted_at.is_none()
            && (self.receipt.submitted() || self.receipt.awaiting_launch_prompt())
    }

    /// Whether the run is over: the lane ended, or something ends the run.
    pub fn is_over(&self) -> bool {
        self.state.is_terminal() || self.next.is_some()
    }

    /// Handles one input at `now`; the effects to carry out, in order.
    pub fn handle(&mut self, input: Input, now: Instant) -> Vec<Effect> {
        self.now = now;
        match &input {
            Input::Look { .. } => self.source = Some(EventSource::Screen),
            Input::Operator { .. } => self.source = Some(EventSource::Operator),
            Input::Exited(..) => self.source = Some(EventSource::Process),
            Input::Hook(_) | Input::HookFailed { .. } | Input::HookPermissionDecided(_) => {
                self.source = Some(EventSource::Hook)
            }
            Input::Protocol(_) | Input::ProtocolLost { .. } => {
                self.source = Some(EventSource::Protocol);
            }
            Input::Interrupted(_) | Input::WorktreeGone(_) | Input::Cost(_) => self.source = None,
            // An effect's result goes on with the decision that asked for it.
            _ => {}
        }
        match input {
            Input::Look { screen, external } => self.look(&screen, external),
            Input::Exited(status, screen) => self.on_exit(status, &screen),
            Input::Operator { request, screen } => self.on_operator(request, &screen),
            Input::SendFailed { error, fatal } => {
                if fatal && !self.state.is_terminal() {
                    self.transition(
                        LaneState::Failed(FailureClass::PromptDelivery),
                        Some(Evidence {
                            rule: "send".into(),
                            region: "terminal".into(),
                            matched: error,
                        }),
                    );
                }
            }
            Input::Answered(result) => self.answered(result),
            Input::Interrupted(signal) => {
                // Whatever the run was doing, the lane ends here; an interrupted task is not
                // a finished one.
                self.out.push(Effect::StopWorker);
                let failed = interrupted(self.state, signal);
                self.state = failed.to.unwrap_or(self.state);
                self.out.push(Effect::Record(failed));
                self.next = Some(Next::Done);
            }
            Input::WorktreeGone(dir) => {
                // Nothing the agent does from now on can be the lane's work: the lane fails
                // now, before any screen could make it look finished.
                if !self.state.is_terminal() {
                    self.out.push(Effect::StopWorker);
                    let failed = worktree_gone(self.state, &dir);
                    self.state = failed.to.unwrap_or(self.state);
                    self.out.push(Effect::Record(failed));
                }
                self.next = Some(Next::Done);
            }
            Input::GitOperation(operation) => {
                if matches!(self.suspended, Some(Suspended::Delivery)) {
                    self.suspended = None;
                    if !self.held(operation) {
                        self.type_text();
                    }
                }
            }
            Input::TaskFileWritten(result) => {
                if let Some(Suspended::Round { followup, plan }) = self.suspended.take() {
                    self.round_written(followup, plan, result);
                }
            }
            Input::StoreGuarded(ok) => self.confine_pending |= ok,
            Input::PermissionDecided(answer) => self.permission_decided(answer),
            Input::Hook(fact) => self.on_hook(fact),
            Input::HookPermissionDecided(answer) => self.hook_permission_decided(answer),
            Input::HookFailed { event, error } => {
                // Codex's notify program shares the hooks' command and failures file.
                let channel = if event == crate::channel::codex_notify::EVENT {
                    crate::channel::codex_notify::CHANNEL
                } else {
                    crate::channel::CLAUDE_HOOKS
                };
                self.on_channel_failed(channel, event, error);
            }
            Input::Protocol(fact) => self.on_protocol(fact),
            Input::ProtocolLost { error } => {
                self.on_channel_failed(crate::app_server::CHANNEL, "connection".into(), error);
            }
            Input::Cost(usd) => self.on_cost(usd),
        }
        std::mem::take(&mut self.out)
    }

    /// How the run ends: the verdicts still owed, and what the driver hands on.
    pub fn finish(&mut self) -> (Vec<Effect>, Ended) {
        if let Some(reply) = self.round_reply.take() {
            self.reply(
                reply,
                Verdict::Failed {
                    reason: format!(
                        "the text was typed but not yet submitted when the lane became {}",
                        self.state
                    ),
                },
            );
        }
        self.tell_queued();
        let dialog = self
            .waiting_dialog
            .as_deref()
            .and_then(|name| self.profile.dialog(name))
            .map(|dialog| super::WaitingDialog {
                name: dialog.name.clone(),
                choices: dialog.choices.keys().cloned().collect(),
            });
        let ended = Ended {
            state: self.state,
            receipt: self.receipt.clone(),
            next: self.next.clone().unwrap_or(Next::Done),
            reached_ready: self.reached_ready,
            trust: self.lane.trust,
            answered_outside: self.lane.answered_outside,
            budget: self.lane.budget,
            restart_reply: self.restart_reply.take(),
            unsent: self.followups.drain(..).map(|f| f.text).collect(),
            dialog,
        };
        (std::mem::take(&mut self.out), ended)
    }

    /// The next time the lane must be looked at even if its screen does not change.
    ///
    /// Only deadlines after `looked_at` (when the screen was last read) count: one that had
    /// already passed then was acted on by that look, or needs nothing, and waking for it again
    /// would spin (e.g. while blocked on the provider with the retry text still showing).
    pub fn next_deadline(&self, looked_at: Instant, now: Instant) -> Instant {
        let far = now + Duration::from_secs(3600);
        let mut wake = far;
        let mut consider = |at: Option<Instant>| {
            if let Some(at) = at.filter(|at| *at > looked_at) {
                wake = wake.min(at);
            }
        };
        if matches!(self.state, LaneState::Spawning | LaneState::TrustRequired) {
            consider(Some(self.boot_deadline));
            consider(self.trust_due);
        }
        consider(self.idle_since.map(|t| t + self.finish_wait));
        consider(
            self.provider_since
                .map(|t| t + self.settings.provider_block),
        );
        if self.state == LaneState::Blocked(BlockedSubphase::Provider) {
            consider(self.provider_clear_since.map(|t| t + PROVIDER_BACK_HOLD));
        }
        consider(self.receipt.retry_at());
        consider(self.receipt.submit_at());
        consider(self.held_until);
        consider(
            self.hooks
                .screen_accept_since
                .filter(|_| self.hooks.decides())
                .map(|since| since + self.settings.hook_grace),
        );
        consider(
            self.hooks
                .permission_dialog_since
                .filter(|_| self.hooks.decides())
                .map(|since| since + HOOK_PERMISSION_GRACE),
        );
        consider(
            self.hooks
                .held_stop
                .as_ref()
                .map(|held| held.at + CONTRADICTION_BOUND),
        );
        let without_progress = self.progress.idle_for(self.wall_secs_at(now));
        consider(
            self.unknown_screen
                .deadline(now, self.settings.unknown_screen, without_progress),
        );
        if let Some(check) = &self.check {
            consider(check.within.map(|within| check.started + within));
        } else if let (Some(after), LaneState::Running) = (self.stall_after, self.state) {
            consider(Some(
                now + after.saturating_sub(without_progress) + Duration::from_secs(1),
            ));
        }
        wake
    }

    fn wall_ms_at(&self, at: Instant) -> u64 {
        let (instant, wall) = self.anchor;
        wall + at.saturating_duration_since(instant).as_millis() as u64
    }

    fn wall_secs_at(&self, at: Instant) -> u64 {
        self.wall_ms_at(at) / 1000
    }

    fn wall_secs(&self) -> u64 {
        self.wall_secs_at(self.now)
    }

    /// One look at the screen: the handshake's step, then stalls, unknown screens and the
    /// queue's verdicts.
    fn look(&mut self, screen: &ScreenSnapshot, external: Option<(u64, ProgressSource)>) {
        self.external = external;
        if self.receipt.awaiting_launch_prompt() && !self.receipt.echoes_counted() {
            // The run's first look: whatever shows the launch prompt now was drawn before
            // (an adopted agent's screen, a resumed session's history).
            let rows = delivery::echo_rows(screen, self.profile, &self.receipt);
            self.receipt.note_echoes_before(rows);
        }
        let seen = self.observe(screen);
        self.hooks.screen_working = matches!(
            seen.seen,
            Seen::Signal {
                signal: Signal::Working
            }
        )
        .then(|| Evidence {
            rule: seen.rule.clone(),
            region: seen.region.clone(),
            matched: seen.evidence.clone(),
        });
        if self.settle_held_stop() {
            return;
        }
        let unrecognised = seen.seen == Seen::Unknown;
        self.step(seen, screen);
        self.check_stall(&screen.rows);
        self.check_unknown_screen(unrecognised, screen);
        self.tell_queued();
    }

    /// What the screen shows at this point of the agent's life: before its boot is over every
    /// dialog of the profile counts; after it, a trust or boot dialog's look-alike is agent
    /// output — recorded once while it shows (`lane.dialog_ignored`), never answered, never a
    /// reason to block — and the screen is read as if it were not there (so a permission
    /// dialog that shows the look-alike in the file it asks about is that permission dialog).
    fn observe(&mut self, screen: &ScreenSnapshot) -> Observation {
        let phase = if self.booted {
            Phase::Turn
        } else {
            Phase::Boot
        };
        let sighting = observe_in(self.profile, screen, phase);
        match sighting.ignored {
            Some(lookalike) if self.lookalike.as_deref() != Some(lookalike.rule.as_str()) => {
                self.lookalike = Some(lookalike.rule.clone());
                let ignored = DialogIgnored {
                    dialog: lookalike.rule.clone(),
                    reason: DialogIgnored::AFTER_BOOT.into(),
                };
                let evidence = Evidence {
                    rule: lookalike.rule,
                    region: lookalike.region,
                    matched: lookalike.evidence,
                };
                self.report(Payload::DialogIgnored(ignored), None, None, Some(evidence));
            }
            Some(_) => {}
            None => self.lookalike = None,
        }
        sighting.observation
    }

    /// The agent's boot is over; the driver is told once ([`Effect::BootOver`]).
    fn end_boot(&mut self) {
        if !std::mem::replace(&mut self.booted, true) {
            self.out.push(Effect::BootOver);
        }
    }

    /// Texts sent by an operator that the last look did not start delivering wait in the
    /// queue: their senders are told so.
    fn tell_queued(&mut self) {
        let waiting = self.followups.len();
        let mut told = Vec::new();
        for (position, followup) in self.followups.iter_mut().enumerate() {
            if let Some(reply) = followup.reply.take() {
                told.push((
                    reply,
                    Verdict::Done {
                        reason: format!(
                            "queued ({} of {waiting}): the lane is {}; the text is typed once \
                             the agent's input line is idle and empty",
                            position + 1,
                            self.state
                        ),
                        send: Some(SendFate::Queued),
                        queue: Some(QueuePlace {
                            place: position + 1,
                            of: waiting,
                        }),
                    },
                ));
            }
        }
        for (reply, verdict) in told {
            self.reply(reply, verdict);
        }
    }

    /// Feeds the screen to the progress tracker; a running lane without progress for the
    /// stall time ends the run for recovery.
    fn check_stall(&mut self, rows: &[String]) {
        let now = self.wall_secs();
        let new_lines = self.progress.observe_screen(now, rows);
        if let Some((at_ms, source)) = self.external {
            self.progress.note(at_ms / 1000, source);
        }
        if self.hooks.tool_running(self.now) {
            // The agent said a tool is running and has not said it is done: a silent tool
            // call is work, not a stall.
            self.progress.note(now, ProgressSource::AgentEvent);
        }
        if self.check.is_some() {
            self.run_check(&new_lines);
            return;
        }
        let Some(after) = self.stall_after else {
            return;
        };
        if self.state == LaneState::Running && self.progress.is_stalled(now, after) {
            let stalled = Stalled {
                seconds_without_progress: self.progress.idle_for(now).as_secs(),
                stall_after_secs: after.as_secs(),
            };
            self.report(Payload::Stalled(stalled), None, None, None);
            self.next = Some(Next::Recover(Trigger::Stalled));
        }
    }

    /// A running lane that shows a screen no rule knows and makes no progress for
    /// `unknown_screen_secs` is blocked on it, with the screen's text as evidence; nothing is
    /// pressed. A known screen afterwards moves it on as usual.
    fn check_unknown_screen(&mut self, unrecognised: bool, screen: &ScreenSnapshot) {
        let now = self.now;
        let running = self.state == LaneState::Running;
        self.unknown_screen.observe(unrecognised && running, now);
        let without_progress = self.progress.idle_for(self.wall_secs());
        if running
            && self
                .unknown_screen
                .is_due(now, self.settings.unknown_screen, without_progress)
        {
            let evidence = Evidence {
                rule: "unknown_screen".into(),
                region: "screen".into(),
                matched: screen_excerpt(&screen.text()),
            };
            self.transition(
                LaneState::Blocked(BlockedSubphase::UnknownDialog),
                Some(evidence),
            );
        }
    }

    /// Carries a recovery check on with the lines this look found new.
    fn run_check(&mut self, new_lines: &[String]) {
        let taken = self.followups.is_empty()
            && (self.receipt.method == "none" || self.receipt.accepted_at.is_some());
        let working = self.state.in_turn();
        let now = self.now;
        let wall_ms = self.wall_ms_at(now);
        let external = self.external;
        // What an agent prints while it retries its provider (each failure, each wait) is the
        // retry loop, not the agent getting on: a lane blocked on its provider progresses when
        // it is running again.
        let retrying = self.state == LaneState::Blocked(BlockedSubphase::Provider);
        let Some(check) = self.check.as_mut() else {
            return;
        };
        let progress = new_lines.iter().filter(|_| !retrying).find(|line| {
            let words = line.trim_start_matches(|c: char| !c.is_alphanumeric());
            !words.is_empty() && !check.delivered.iter().any(|d| d.contains(words))
        });
        let off_screen = external
            .filter(|(at, _)| check.armed_at.is_some_and(|armed| *at > armed))
            .map(|(_, source)| source);
        match (progress, off_screen) {
            (Some(line), _) if check.armed_at.is_some() => {
                self.next = Some(Next::Progressed(format!("a new line on screen: {line}")));
            }
            (_, Some(source)) => {
                self.next = Some(Next::Progressed(describe_source(source).to_owned()));
            }
            _ if check
                .within
                .is_some_and(|within| now.duration_since(check.started) >= within) =>
            {
                self.next = Some(Next::NoProgress);
            }
            // Armed after this look, so what it found (the echo) is not progress.
            _ if taken && working && check.armed_at.is_none() => {
                check.armed_at = Some(wall_ms);
            }
            _ => {}
        }
    }

    /// A reported finish held while the screen showed the agent working: finished as soon as
    /// the screen stops showing it, or once it has shown it for [`CONTRADICTION_BOUND`] after
    /// the report, with a `lane.channel.contradiction` carrying both evidences. Whether the
    /// lane finished.
    fn settle_held_stop(&mut self) -> bool {
        let Some(held) = self.hooks.held_stop.take() else {
            return false;
        };
        let still_working = self.state.in_turn();
        if !still_working || !self.followups.is_empty() {
            return false;
        }
        let held_for = self.now.duration_since(held.at);
        if let Some(screen) = self.hooks.screen_working.clone() {
            if held_for < CONTRADICTION_BOUND {
                self.hooks.held_stop = Some(held);
                return false;
            }
            // The decision is the channel's, the screen's evidence its contradiction.
            self.source = held.source;
            self.contradiction(
                held.evidence.clone(),
                screen,
                held_for,
                ChannelContradiction::FINISHED,
            );
        }
        self.source = held.source;
        self.transition(LaneState::Finished, Some(held.evidence));
        true
    }

    /// Reacts to one observation of the screen.
    fn step(&mut self, seen: Observation, screen: &ScreenSnapshot) {
        let evidence = Evidence {
            rule: seen.rule.clone(),
            region: seen.region.clone(),
            matched: seen.evidence.clone(),
        };
        if !matches!(
            seen.seen,
            Seen::Signal {
                signal: Signal::ProviderRetry
            }
        ) {
            self.provider_since = None;
            if self.state == LaneState::Blocked(BlockedSubphase::Provider) {
                self.provider_clear_since.get_or_insert(self.now);
            }
        } else {
            self.provider_clear_since = None;
        }
        if !matches!(seen.seen, Seen::Idle) {
            self.idle_since = None;
        }
        let trust_dialog_shown = matches!(
            seen.seen,
            Seen::Dialog {
                dialog: DialogKind::Trust,
                ..
            }
        );
        if self.confine_pending && !trust_dialog_shown {
            self.confine_pending = false;
            self.out.push(Effect::ConfineTrustStore);
        }
        let past_trust = !trust_dialog_shown
            && !matches!(
                seen.seen,
                Seen::Unknown
                    | Seen::Signal {
                        signal: Signal::Shell
                    }
            );
        if past_trust && let Some((method, answered)) = self.unconfirmed_trust.take() {
            let evidence = Evidence {
                matched: format!(
                    "the trust dialog is gone after clawpool's answer, whose check had timed out; now: {}",
                    evidence.matched
                ),
                ..answered
            };
            self.trust_answered(method, evidence);
        }
        self.notice_answered_outside(&seen.seen, &evidence);
        match &seen.seen {
            Seen::Dialog { name, dialog } => self.on_dialog(name, *dialog, evidence, screen),
            Seen::Signal {
                signal: Signal::Shell,
            } => self.on_shell(evidence),
            Seen::Signal {
                signal: Signal::ProviderRetry,
            } => self.on_provider_retry(evidence),
            Seen::Signal {
                signal: Signal::Working,
            } => self.on_working(evidence, screen),
            Seen::Idle => self.on_idle(evidence, screen),
            Seen::Draft { text } => self.on_draft(text, evidence, screen),
            Seen::Signal {
                signal: Signal::Booting,
            } => {
                self.restart_if_trust_not_applied(&evidence);
                self.on_unrecognised(evidence, screen)
            }
            Seen::Unknown => self.on_unrecognised(evidence, screen),
        }
    }

    /// A dialog the lane waited on for a person is gone from a screen the profile knows, with
    /// no answer of clawpool's in flight: its answer was typed into the terminal by someone
    /// else (a person attached to the tmux session, or the agent itself through a tmux socket
    /// it should not have). Recorded as `lane.dialog_answered_outside`, never as progress; a
    /// tool-permission question answered so holds the lane `blocked{tool_permission}` for a
    /// person ([`super::LaneContext::answered_outside`]), with an escalation saying what to do.
    /// A screen no rule knows says nothing yet (a redraw may be under way).
    fn notice_answered_outside(&mut self, seen: &Seen, now_showing: &Evidence) {
        let Some(name) = self.waiting_dialog.clone() else {
            return;
        };
        let Some(kind) = self.profile.dialog(&name).map(|dialog| dialog.kind) else {
            return;
        };
        let gone = match seen {
            Seen::Dialog { dialog, .. } => *dialog != kind,
            Seen::Idle | Seen::Draft { .. } => true,
            Seen::Signal { signal } => matches!(signal, Signal::Working | Signal::ProviderRetry),
            Seen::Unknown => false,
        };
        if !gone || self.suspended.is_some() {
            return;
        }
        self.waiting_dialog = None;
        let evidence = Evidence {
            rule: name.clone(),
            region: now_showing.region.clone(),
            matched: format!(
                "dialog {name:?} gone without an answer from clawpool; the screen shows {} ({})",
                now_showing.rule, now_showing.matched
            ),
        };
        let outside = DialogAnsweredOutside {
            dialog: name.clone(),
            dialog_kind: dialog_kind_name(kind).to_owned(),
        };
        self.report(
            Payload::DialogAnsweredOutside(outside),
            None,
            None,
            Some(evidence.clone()),
        );
        if kind != DialogKind::ToolPermission {
            // A trust dialog answered so opens no gate (clawpool's is its own), and a boot
            // dialog is harmless: the record is all.
            return;
        }
        self.lane.answered_outside = true;
        let escalated = Escalated {
            reason: format!(
                "the tool-permission question {name:?} was answered outside clawpool (keys typed \
                 into the lane's terminal by someone else: a person attached to it, or the agent)"
            ),
            next_action: format!(
                "check what the agent did in {}; then `clawpool send {} TEXT` to carry on, or \
                 `clawpool stop {}`",
                self.lane.cwd.display(),
                self.lane.name,
                self.lane.name
            ),
            recipe: None,
        };
        let next = self.next.clone();
        self.transition(
            LaneState::Blocked(BlockedSubphase::ToolPermission),
            Some(evidence),
        );
        // Not recovery's to escalate as a question still on screen: the machine keeps
        // watching the held lane, and this escalation is its next action.
        self.next = next;
        self.report(Payload::Escalated(escalated), None, None, None);
    }

    fn on_dialog(
        &mut self,
        name: &str,
        kind: DialogKind,
        evidence: Evidence,
        screen: &ScreenSnapshot,
    ) {
        let Some(dialog) = self.profile.dialog(name).cloned() else {
            return;
        };
        if kind == DialogKind::ToolPermission {
            // The screen's question is newer than the tool's reported start: the tool waits
            // for its answer, and a refused one never runs (nor reports the turn's end).
            self.hooks.tools_done();
            self.hooks.turn_opened_here = false;
        }
        let (pending, subphase) = match kind {
            DialogKind::Trust => (LaneState::TrustRequired, BlockedSubphase::TrustPrompt),
            DialogKind::ToolPermission => (
                LaneState::ToolPermissionRequired,
                BlockedSubphase::ToolPermission,
            ),
            DialogKind::Boot => (self.state, BlockedSubphase::BootDialog),
        };
        if self.waiting_dialog.as_deref() == Some(name) {
            return; // Still waiting for the operator.
        }
        if self.lane.answered_outside && kind == DialogKind::ToolPermission {
            // Held for a person: not even the policy's allow is given until one acts.
            self.waiting_dialog = Some(name.to_owned());
            return self.transition(LaneState::Blocked(subphase), Some(evidence));
        }
        if !self.lane.trust.is_open() && kind != DialogKind::Trust {
            // Not even a harmless-looking question is answered for a lane nobody trusted.
            return self.hold_at_gate(Evidence {
                matched: format!(
                    "the agent asks {name:?}, and {}",
                    gate_reason(&self.lane.name)
                ),
                ..evidence
            });
        }
        let answerable = match kind {
            DialogKind::Trust => self.lane.trust.is_open(),
            _ => dialog.policy == Policy::Auto && dialog.answer.is_some(),
        };
        let answers = self.answer_attempts.get(name).copied().unwrap_or(0);
        if self.state == LaneState::Blocked(subphase)
            && (!answerable || answers >= MAX_ANSWERS_PER_DIALOG)
        {
            // Already blocked on it when this run began (the same worker, carried on after
            // recovery handed the lane to a person): still waiting for the operator.
            self.waiting_dialog = Some(name.to_owned());
            return;
        }
        if kind == DialogKind::ToolPermission && self.receipt.submitted() {
            // Asking for a tool means the agent took the prompt and is working on it.
            self.accept(evidence.clone());
            if self.state == LaneState::PromptAccepted {
                self.transition(LaneState::Running, Some(evidence.clone()));
            }
        }
        if pending != self.state && kind != DialogKind::Boot {
            self.transition(pending, Some(evidence.clone()));
        }
        let automatic = match kind {
            DialogKind::Trust => self.lane.trust.is_open().then_some("yes".to_owned()),
            _ => (dialog.policy == Policy::Auto)
                .then(|| dialog.answer.clone())
                .flatten(),
        };
        let policy_decides = kind == DialogKind::ToolPermission
            && self.decides_permissions
            && dialog.policy == Policy::Ask;
        // Some(true): the PermissionRequest hook answers this question; Some(false): it asked
        // for a person; None: the screen's gate decides.
        let by_hook = (policy_decides && automatic.is_none() && self.hooks.decides())
            .then(|| self.hook_decides_permission())
            .flatten();
        let attempts = self.answer_attempts.entry(name.to_owned()).or_default();
        match automatic {
            Some(choice) if *attempts < MAX_ANSWERS_PER_DIALOG => {
                *attempts += 1;
                let attempt = *attempts;
                if kind == DialogKind::Trust {
                    self.out.push(Effect::GuardTrustStore);
                }
                self.out.push(Effect::Answer {
                    dialog,
                    choice: choice.clone(),
                });
                self.suspended = Some(Suspended::PolicyAnswer {
                    name: name.to_owned(),
                    choice,
                    kind,
                    attempt,
                    evidence,
                });
            }
            None if by_hook == Some(true) => {}
            None if policy_decides && by_hook.is_none() => {
                self.hooks.permission_dialog_since = None;
                self.out.push(Effect::DecidePermission {
                    rows: screen.rows.clone(),
                });
                self.suspended = Some(Suspended::Permission {
                    name: name.to_owned(),
                    dialog,
                    evidence,
                });
            }
            _ => {
                self.waiting_dialog = Some(name.to_owned());
                self.transition(LaneState::Blocked(subphase), Some(evidence));
            }
        }
    }

    /// Who answers the question of the tool-permission dialog on screen, for a lane whose
    /// hooks work: `Some(true)` the PermissionRequest hook — it answered allow or deny (the
    /// agent applies that), or its decision may still come ([`HOOK_PERMISSION_GRACE`]);
    /// `Some(false)` a person — the hook's decision was ask, not to be made a second time;
    /// `None` the screen's gate — no decision came in time.
    fn hook_decides_permission(&mut self) -> Option<bool> {
        match self.hooks.permission {
            Some(PermissionVerdict::Allow | PermissionVerdict::Deny) => Some(true),
            Some(PermissionVerdict::Ask) => Some(false),
            None => {
                let since = *self.hooks.permission_dialog_since.get_or_insert(self.now);
                (self.now.duration_since(since) < HOOK_PERMISSION_GRACE).then_some(true)
            }
        }
    }

    /// The lane's gate decided the PermissionRequest hook's question: recorded (source
    /// `hook`), and remembered so that its dialog, if it shows, is not answered again; an ask
    /// blocks the lane for a person when the dialog shows.
    fn hook_permission_decided(&mut self, answer: PermissionAnswer) {
        let evidence = Evidence {
            rule: "PermissionRequest".into(),
            region: "hook".into(),
            matched: answer.question.chars().take(120).collect(),
        };
        let decided = Payload::PermissionDecided(answer.decided);
        self.report(decided, None, None, Some(evidence));
        self.hooks.permission = Some(answer.verdict);
        self.hooks.permission_dialog_since = None;
    }

    /// The permission policy decided the question on screen: recorded, then allow answers
    /// the dialog yes, deny answers it no, and ask leaves it to a person as before.
    fn permission_decided(&mut self, answer: PermissionAnswer) {
        let Some(Suspended::Permission {
            name,
            dialog,
            evidence,
        }) = self.suspended.take()
        else {
            return;
        };
        let decided = Payload::PermissionDecided(answer.decided);
        self.report(decided, None, None, Some(evidence.clone()));
        let choice = match answer.verdict {
            PermissionVerdict::Allow => Some("yes"),
            PermissionVerdict::Deny => Some("no"),
            PermissionVerdict::Ask => None,
        };
        let answers = self.permission_answers.entry(answer.question).or_default();
        match choice {
            Some(choice)
                if *answers < MAX_ANSWERS_PER_DIALOG && dialog.choices.contains_key(choice) =>
            {
                *answers += 1;
                let attempt = *answers;
                self.out.push(Effect::Answer {
                    dialog,
                    choice: choice.to_owned(),
                });
                self.suspended = Some(Suspended::PolicyAnswer {
                    name,
                    choice: choice.to_owned(),
                    kind: DialogKind::ToolPermission,
                    attempt,
                    evidence,
                });
            }
            _ => {
                self.waiting_dialog = Some(name);
                self.transition(
                    LaneState::Blocked(BlockedSubphase::ToolPermission),
                    Some(evidence),
                );
            }
        }
    }

    /// A dialog's answer is in: recorded, and what it resolved.
    fn answered(&mut self, answered: Result<(), String>) {
        match self.suspended.take() {
            Some(Suspended::PolicyAnswer {
                name,
                choice,
                kind,
                attempt,
                evidence,
            }) => {
                let ok = answered.is_ok();
                self.report(
                    answer_of(&name, &choice, DialogAnswered::BY_POLICY, attempt, answered),
                    None,
                    None,
                    Some(evidence.clone()),
                );
                if kind == DialogKind::Trust {
                    let method = match self.lane.trust {
                        TrustGate::ByOperator => "operator_earlier",
                        _ => TrustResolved::AUTO_ALLOWLISTED,
                    };
                    if ok {
                        self.trust_answered(method, evidence);
                    } else if !self.trust_recorded {
                        self.unconfirmed_trust = Some((method, evidence));
                    }
                }
            }
            Some(Suspended::OperatorAnswer {
                name,
                choice,
                kind,
                reply,
            }) => {
                let verdict = match &answered {
                    Ok(()) => Verdict::done(format!("answered dialog {name:?} with {choice:?}")),
                    Err(error) => Verdict::Failed {
                        reason: format!("answering dialog {name:?} with {choice:?}: {error}"),
                    },
                };
                let resolved = answered.is_ok() && kind == DialogKind::Trust && choice == "yes";
                if resolved && !self.lane.trust.is_open() {
                    self.lane.trust = TrustGate::ByOperator;
                }
                self.report(
                    answer_of(&name, &choice, DialogAnswered::BY_OPERATOR, 1, answered),
                    None,
                    None,
                    None,
                );
                self.waiting_dialog = None;
                if resolved {
                    let evidence = Evidence {
                        rule: name.clone(),
                        region: "operator".into(),
                        matched: "clawpool trust".into(),
                    };
                    self.trust_answered("manual", evidence);
                }
                // Back to the state the dialog interrupted; the next observation moves on
                // from there.
                let resumed = match kind {
                    DialogKind::Trust => LaneState::TrustRequired,
                    DialogKind::ToolPermission => LaneState::ToolPermissionRequired,
                    DialogKind::Boot if self.receipt.accepted_at.is_some() => LaneState::Running,
                    DialogKind::Boot => LaneState::Spawning,
                };
                self.transition(resumed, None);
                self.reply(reply, verdict);
            }
            other => self.suspended = other,
        }
    }

    /// One fact the agent reported through its hook channel (the rules: `docs/events.md`,
    /// "Hook facts"). Every report is recorded (`lane.hook`); what it decides, it decides at
    /// once, and what it says is newer than anything the screen showed before it.
    fn on_hook(&mut self, fact: HookFact) {
        self.report(Payload::Hook(fact.report()), None, None, None);
        let evidence = Evidence {
            rule: fact.name().to_owned(),
            region: "hook".into(),
            matched: match &fact.event {
                HookEvent::UserPromptSubmit { prompt } => prompt.chars().take(120).collect(),
                HookEvent::PreToolUse { tool_name, .. }
                | HookEvent::PostToolUse { tool_name }
                | HookEvent::PermissionRequest { tool_name, .. } => tool_name.clone(),
                HookEvent::TurnComplete {
                    turn_id: Some(turn_id),
                    ..
                } => format!("turn {turn_id} complete"),
                _ => format!("the agent's {} hook", fact.name()),
            },
        };
        self.agent_fact(fact.event, evidence);
    }

    /// One message from the agent's app server (`docs/events.md`, "Protocol facts"): recorded
    /// (`lane.protocol`), then decided as the agent fact it means, with the message as its
    /// evidence.
    fn on_protocol(&mut self, protocol: ProtocolFact) {
        self.report(Payload::Protocol(protocol.report()), None, None, None);
        let status = protocol.fields["status"].as_str().unwrap_or_default();
        let evidence = Evidence {
            rule: protocol.message.clone(),
            region: "protocol".into(),
            matched: match &protocol.fact.event {
                HookEvent::PreToolUse { tool_name, .. }
                | HookEvent::PostToolUse { tool_name }
                | HookEvent::PermissionRequest { tool_name, .. } => tool_name.clone(),
                _ if status.is_empty() => protocol.message.clone(),
                _ => format!("thread {status}"),
            },
        };
        self.agent_fact(protocol.fact.event, evidence);
    }

    /// What an agent-reported fact decides, whichever channel reported it: nothing once the
    /// channel is degraded or the lane is over.
    fn agent_fact(&mut self, event: HookEvent, evidence: Evidence) {
        if self.hooks.degraded() || self.state.is_terminal() {
            return;
        }
        if let HookEvent::TurnComplete { input_messages, .. } = &event {
            // Codex's notify program reports turn ends and nothing else: the screen, which
            // saw the turn accepted, still decides what the channel does not report, so the
            // channel is never made the lane's decider (`live`). Only the end of the turn of
            // the text the lane delivered counts: Codex notifies its own side turns too.
            let ours = input_messages
                .iter()
                .any(|message| self.receipt.delivered(message));
            if ours && self.state.in_turn() && self.receipt.accepted_at.is_some() {
                self.hooks.tools_done();
                self.reported_finish(evidence, Settled::ScreenToFollow);
            }
            return;
        }
        self.hooks.live = true;
        let wall = self.wall_secs();
        match event {
            HookEvent::UserPromptSubmit { .. } => {
                // A new turn: whatever the last one left unreported is over, and the agent's
                // boot certainly is.
                self.end_boot();
                self.hooks.tools_done();
                self.hooks.permission = None;
                self.hooks.held_stop = None;
                self.hooks.turn_open = true;
                self.hooks.turn_opened_here = true;
                self.hooks.idle_contradicted = false;
                self.idle_since = None;
                self.progress.note(wall, ProgressSource::AgentEvent);
                let before_acceptance = matches!(
                    self.state,
                    LaneState::Spawning | LaneState::TrustRequired | LaneState::ReadyForPrompt
                );
                if before_acceptance
                    && self.lane.trust.is_open()
                    && (self.receipt.submitted() || self.receipt.awaiting_launch_prompt())
                {
                    self.reached_ready = true;
                    self.accept(evidence);
                }
            }
            HookEvent::PreToolUse { .. }
            | HookEvent::PostToolUse { .. }
            | HookEvent::PermissionRequest { .. } => {
                // A new tool, its end, or a new question: an earlier answer is not this one's.
                // A tool means a turn: the boot is over.
                self.end_boot();
                self.hooks.permission = None;
                match event {
                    HookEvent::PreToolUse { .. } => {
                        self.hooks.tools_running += 1;
                        self.hooks.tool_started_at = Some(self.now);
                    }
                    HookEvent::PostToolUse { .. } => {
                        self.hooks.tools_running = self.hooks.tools_running.saturating_sub(1);
                    }
                    // A tool that asks permission is not running: it waits for the answer,
                    // and a refused one never runs (Claude Code reports no end for it, and
                    // interrupts the turn without a Stop): the turn's end is the screen's
                    // again.
                    _ => {
                        self.hooks.tools_done();
                        self.hooks.turn_opened_here = false;
                    }
                }
                self.idle_since = None;
                self.progress.note(wall, ProgressSource::AgentEvent);
                if self.state == LaneState::PromptAccepted {
                    self.transition(LaneState::Running, Some(evidence));
                }
            }
            HookEvent::Stop {
                last_message,
                in_flight,
            } => {
                self.hooks.tools_done();
                self.hooks.permission = None;
                let turn_was_open = std::mem::replace(&mut self.hooks.turn_open, false);
                // A Stop for a turn this lane saw start.
                if turn_was_open && self.state.in_turn() && self.receipt.accepted_at.is_some() {
                    let settled = match last_message {
                        Some(_) if in_flight == 0 => Settled::ReplyKnown,
                        _ => Settled::ScreenToFollow,
                    };
                    self.reported_finish(evidence, settled);
                }
            }
            HookEvent::SessionEnd { .. } => self.hooks.tools_done(),
            HookEvent::SessionStart { .. }
            | HookEvent::Notification { .. }
            | HookEvent::TurnComplete { .. }
            | HookEvent::Other { .. } => {}
        }
    }

    /// The agent reported the end of the turn the lane is in: with nothing more to say, the
    /// lane is finished. With texts queued, the idle screen delivers the next one as before.
    /// Over a screen that still shows the agent working, a report that names the turn's last
    /// reply with nothing left in flight finishes at once (the agent paints its idle screen
    /// after its Stop hook; its indicator is the stale side); any other waits for the screen
    /// ([`HeldStop`]).
    fn reported_finish(&mut self, evidence: Evidence, settled: Settled) {
        if !self.followups.is_empty() || self.lane.answered_outside {
            return;
        }
        if self.hooks.screen_working.is_some() && settled == Settled::ScreenToFollow {
            // The screen still shows the agent working: it gets a bound to catch up (a redraw
            // late by a few ms is no contradiction).
            self.hooks.held_stop = Some(HeldStop {
                at: self.now,
                evidence,
                source: self.source,
            });
        } else {
            self.transition(LaneState::Finished, Some(evidence));
        }
    }

    /// A hook could not deliver its report, or the app server's connection ended: from the
    /// first failure the channel is degraded (each failure a `lane.channel.degraded` with the
    /// count so far), what it had said about running tools or an open turn no longer holds,
    /// and the screen decides alone.
    fn on_channel_failed(&mut self, channel: &str, event: String, error: String) {
        self.hooks.failures += 1;
        self.hooks.tools_done();
        self.hooks.turn_open = false;
        self.hooks.held_stop = None;
        let degraded = Payload::ChannelDegraded(ChannelDegraded {
            channel: channel.to_owned(),
            event,
            error,
            failed: self.hooks.failures,
            decides: ChannelDegraded::SCREEN.into(),
        });
        self.report(degraded, None, None, None);
    }

    fn on_shell(&mut self, evidence: Evidence) {
        let target = delivery::misdelivery_target(&evidence.matched, &self.lane.cwd);
        let misdelivery = PromptMisdelivery {
            target: target.to_owned(),
            prompt_sent: Some(self.receipt.submitted()),
            reason: None,
        };
        self.report(
            Payload::PromptMisdelivery(misdelivery),
            None,
            None,
            Some(evidence.clone()),
        );
        self.transition(
            LaneState::Failed(FailureClass::PromptDelivery),
            Some(evidence),
        );
    }

    fn on_provider_retry(&mut self, evidence: Evidence) {
        let since = *self.provider_since.get_or_insert(self.now);
        if self.state == LaneState::ReadyForPrompt && self.receipt.submitted() {
            // The agent took the prompt and is trying to reach its provider with it.
            self.accept(evidence.clone());
        }
        if self.state == LaneState::PromptAccepted {
            self.transition(LaneState::Running, Some(evidence.clone()));
        }
        if self.now.duration_since(since) >= self.settings.provider_block
            && self.state != LaneState::Blocked(BlockedSubphase::Provider)
        {
            self.transition(
                LaneState::Blocked(BlockedSubphase::Provider),
                Some(evidence),
            );
        }
    }

    fn on_working(&mut self, evidence: Evidence, screen: &ScreenSnapshot) {
        // An agent at work has started: what it draws from now is its output.
        self.end_boot();
        self.waiting_dialog = None;
        self.permission_answers.clear();
        self.hooks.permission_dialog_since = None;
        match self.state {
            LaneState::Blocked(BlockedSubphase::Stalled) if self.check.is_some() => {
                // Still working on screen is what it was stalled at; only progress unblocks.
            }
            LaneState::Blocked(BlockedSubphase::Provider)
                if self
                    .provider_clear_since
                    .is_none_or(|since| self.now.duration_since(since) < PROVIDER_BACK_HOLD) =>
            {
                // Not back yet: the retry text may come again (deadline at the hold's end).
            }
            LaneState::PromptAccepted
            | LaneState::ToolPermissionRequired
            | LaneState::Blocked(_) => {
                if self.receipt.accepted_at.is_some() {
                    self.transition(LaneState::Running, Some(evidence));
                }
            }
            LaneState::Spawning | LaneState::TrustRequired | LaneState::ReadyForPrompt => {
                if (self.receipt.awaiting_launch_prompt() || self.receipt.submitted())
                    && !self.screen_shows_this_prompt_taken(screen)
                    && !self.screen_may_accept()
                {
                    return;
                }
                // Working before anything was typed: the prompt went in at launch.
                if self.receipt.awaiting_launch_prompt() {
                    self.receipt.accept("(launch argument)");
                    self.transition(LaneState::PromptAccepted, Some(evidence.clone()));
                    self.transition(LaneState::Running, Some(evidence));
                } else if self.receipt.submitted() {
                    let echo = delivery::echoed(screen, self.profile, &self.receipt);
                    self.accept(match echo {
                        Some(preview) => Evidence {
                            rule: "prompt_echo".into(),
                            region: "screen".into(),
                            matched: preview,
                        },
                        None => evidence.clone(),
                    });
                    self.transition(LaneState::Running, Some(evidence));
                }
            }
            LaneState::Running
            | LaneState::Finished
            | LaneState::Stopped
            | LaneState::Failed(_) => {}
        }
    }

    fn on_idle(&mut self, evidence: Evidence, screen: &ScreenSnapshot) {
        self.reached_ready = true;
        if !self.lane.trust.is_open() {
            // The agent is ready without having asked: its own store trusts the folder, which
            // is no reason for clawpool to.
            return self.hold_at_gate(Evidence {
                matched: format!(
                    "the agent is ready without asking, and {}",
                    gate_reason(&self.lane.name)
                ),
                ..evidence
            });
        }
        self.waiting_dialog = None;
        match self.state {
            LaneState::Spawning | LaneState::TrustRequired => {
                self.transition(LaneState::ReadyForPrompt, Some(evidence));
                if self.receipt.awaiting_launch_prompt() {
                    // The prompt went in at launch; the agent shows its input before it starts
                    // (or after it already finished with it).
                    self.check_launch_echo(screen);
                } else {
                    self.deliver();
                    self.escalate_dropped_turn();
                }
            }
            LaneState::ReadyForPrompt => {
                if self.receipt.submitted() {
                    // Enter was pressed and the input is empty: accepted if the prompt shows.
                    self.check_launch_echo(screen);
                } else if self.receipt.awaiting_launch_prompt() {
                    self.check_launch_echo(screen);
                } else {
                    self.deliver();
                }
            }
            LaneState::PromptAccepted
            | LaneState::Running
            | LaneState::Blocked(_)
            | LaneState::ToolPermissionRequired => {
                if self.state == LaneState::ToolPermissionRequired && !self.lane.answered_outside {
                    // The permission was answered and the agent carried on.
                    self.transition(LaneState::Running, Some(evidence.clone()));
                }
                if !self.followups.is_empty() {
                    // Idle with more to say: the next text, instead of finishing. An
                    // operator's text is a person acting on a held lane: it is released.
                    self.lane.answered_outside = false;
                    self.transition(LaneState::ReadyForPrompt, Some(evidence));
                    self.deliver();
                    return;
                }
                if self.hooks.tool_running(self.now)
                    || self.lane.answered_outside
                    || self.held_on_budget()
                {
                    // The agent reported a tool running: an idle-looking screen does not
                    // overrule it. A lane held for a person is not finished by its agent
                    // going idle.
                    self.idle_since = None;
                    return;
                }
                // Back at its idle input after taking the prompt: done once it stays idle. A
                // turn never seen working and without a reply under the echo has not started
                // (an agent starting among many on few cores draws its spinner seconds after
                // the echo): it is never finished, and past `start_timeout` it is blocked.
                let unstarted = self.state == LaneState::PromptAccepted
                    && !delivery::replied(screen, self.profile, &self.receipt);
                self.finish_wait = if unstarted {
                    self.settings.start_timeout
                } else {
                    self.settings.finish_idle
                };
                let since = *self.idle_since.get_or_insert(self.now);
                let idle_for = self.now.duration_since(since);
                if idle_for < self.finish_wait {
                    return;
                }
                if unstarted {
                    self.transition(
                        LaneState::Blocked(BlockedSubphase::PromptDelivery),
                        Some(Evidence {
                            rule: "turn_not_started".into(),
                            region: "screen".into(),
                            matched: format!(
                                "the prompt's echo over an idle input for {}s, no work and no \
                                 reply seen",
                                idle_for.as_secs()
                            ),
                        }),
                    );
                } else if self.hooks.decides()
                    && self.hooks.turn_open
                    && self.hooks.turn_opened_here
                {
                    // The channel opened the turn and never said it ended: the turn's end is
                    // its to report. An idle-looking screen is not enough — the agent can draw
                    // one of its own (a notice with a box in it: `docs/trust.md`, "The
                    // screen"). Recorded once per spell; a channel that never reports again is
                    // a stall, which recovery takes on.
                    if !std::mem::replace(&mut self.hooks.idle_contradicted, true) {
                        let channel = turn_still_open();
                        self.contradiction(
                            channel,
                            evidence.clone(),
                            idle_for,
                            ChannelContradiction::CHANNEL_WAITS,
                        );
                    }
                } else {
                    if self.hooks.decides() && self.hooks.turn_open {
                        // A turn taken over from an earlier supervisor: its Stop may have
                        // come while nobody listened, so the screen ends it, on the record.
                        let channel = turn_still_open();
                        self.contradiction(
                            channel,
                            evidence.clone(),
                            idle_for,
                            ChannelContradiction::FINISHED,
                        );
                    }
                    self.transition(LaneState::Finished, Some(evidence));
                }
            }
            LaneState::Finished | LaneState::Stopped | LaneState::Failed(_) => {}
        }
    }

    /// A restart dropped the turn the agent was in and nothing is being typed: the new agent
    /// sits idle with the work not done, and nothing will happen by itself — a person must
    /// give it a new turn. Recorded as an escalation (the state file's `escalation`, the
    /// board's next action) that the next accepted prompt clears.
    fn escalate_dropped_turn(&mut self) {
        if !self.dropped_turn
            || self.receipt.text_to_type().is_some()
            || !self.followups.is_empty()
            || self.suspended.is_some()
        {
            return;
        }
        let lane = self.lane.name.clone();
        self.report(
            Payload::Escalated(Escalated {
                reason: "a restart dropped the turn in flight: the agent is idle with its work \
                         not done"
                    .into(),
                next_action: format!(
                    "`clawpool send {lane} TEXT` gives it a new turn (or `clawpool restart {lane} \
                     --redeliver` types its task again)"
                ),
                recipe: None,
            }),
            None,
            None,
            None,
        );
    }

    /// A prompt the agent worked through between two looks (or Enter pressed and the input
    /// empty again): its echo above the idle input proves it took it.
    fn check_launch_echo(&mut self, screen: &ScreenSnapshot) {
        if let Some(preview) = delivery::echoed(screen, self.profile, &self.receipt) {
            if !self.screen_may_accept() {
                return;
            }
            self.accept(Evidence {
                rule: "prompt_echo".into(),
                region: "screen".into(),
                matched: preview,
            });
            self.idle_since = Some(self.now);
        }
    }

    fn on_draft(&mut self, text: &str, evidence: Evidence, screen: &ScreenSnapshot) {
        self.reached_ready = true;
        if self.state == LaneState::Spawning || self.state == LaneState::TrustRequired {
            // A draft nobody here typed: the input is not free, so the lane is not ready.
            if self.now >= self.boot_deadline {
                self.transition(
                    LaneState::Blocked(BlockedSubphase::PromptDelivery),
                    Some(evidence),
                );
            }
            return;
        }
        if self.state != LaneState::ReadyForPrompt {
            // More to say, and the line holds text (one the agent put back after an interrupt,
            // or anything else): it is emptied first, so nothing is typed on top of it.
            if !self.followups.is_empty() && self.receipt.accepted_at.is_some() {
                self.clear_input_for_followup(text, evidence);
            }
            return;
        }
        if self.followup_round && !self.receipt.submitted() && !self.receipt.matches_draft(text) {
            if self.receipt.draft_arriving(text) {
                return; // Our text, still arriving.
            }
            // Not (only) ours: text the agent put into the line before or while we typed.
            // Empty the line and type the text again; Enter only on exactly the text sent.
            if self.clear_input(text, evidence.clone()) {
                self.receipt.retype();
            } else {
                self.refuse_round(text, evidence);
            }
            return;
        }
        if !self.receipt.matches_draft(text) {
            return;
        }
        if !self.receipt.submitted() {
            let settle = Duration::from_millis(self.profile.manifest.input.submit_after_ms);
            if self.receipt.draft_settling(settle) {
                return; // Woken again when it has shown long enough (`next_deadline`).
            }
            self.submit(evidence, screen);
        } else if self.receipt.retry_due() {
            if self.receipt.submits() >= self.settings.max_submit_attempts {
                self.transition(
                    LaneState::Blocked(BlockedSubphase::PromptDelivery),
                    Some(evidence),
                );
            } else {
                self.submit(evidence, screen);
            }
        }
    }

    /// The input line holds text while more is queued (Claude Code puts an interrupted prompt
    /// back): empty it with the profile's keys, so the next text is not typed on top of it.
    /// When it cannot be emptied (no `clear_keys`, or still not empty after
    /// [`MAX_INPUT_CLEARS`] tries), nothing is typed: the queued texts are refused.
    fn clear_input_for_followup(&mut self, draft: &str, evidence: Evidence) {
        if self.clear_input(draft, evidence) {
            return;
        }
        let reason = self.uncleared_reason(draft);
        while let Some(Followup { text, reply }) = self.followups.pop_front() {
            let refused = SendRefused {
                chars: Some(text.chars().count()),
                draft: draft.to_owned(),
                reason: reason.clone(),
            };
            self.report(Payload::SendRefused(refused), None, None, None);
            if let Some(reply) = reply {
                self.reply(
                    reply,
                    Verdict::Refused {
                        reason: reason.clone(),
                        choices: Vec::new(),
                    },
                );
            }
        }
    }

    /// The text being delivered met a line that would not empty: it is not sent, and the lane
    /// is blocked on delivery with the line's text as evidence.
    fn refuse_round(&mut self, draft: &str, evidence: Evidence) {
        let reason = self.uncleared_reason(draft);
        let refused = SendRefused {
            chars: None,
            draft: draft.to_owned(),
            reason: reason.clone(),
        };
        self.report(Payload::SendRefused(refused), None, None, None);
        if let Some(reply) = self.round_reply.take() {
            self.reply(
                reply,
                Verdict::Refused {
                    reason,
                    choices: Vec::new(),
                },
            );
        }
        self.transition(
            LaneState::Blocked(BlockedSubphase::PromptDelivery),
            Some(evidence),
        );
    }

    /// Why a line holding `draft` could not be emptied.
    fn uncleared_reason(&self, draft: &str) -> String {
        if self.profile.input.clear_keys.is_empty() {
            format!(
                "the agent's input line holds text ({draft:?}) and the {} profile has no \
                 clear_keys to empty it; nothing was typed",
                self.profile.name()
            )
        } else {
            format!(
                "the agent's input line still holds text ({draft:?}) after emptying it \
                 {MAX_INPUT_CLEARS} times; nothing more was typed"
            )
        }
    }

    /// Presses the profile's `clear_keys` to empty the input line of `draft`; `false` when it
    /// cannot (no keys, or this round's clears used up).
    fn clear_input(&mut self, draft: &str, evidence: Evidence) -> bool {
        let keys = self.profile.input.clear_keys.clone();
        if keys.is_empty() || self.input_clears >= MAX_INPUT_CLEARS {
            return false;
        }
        self.input_clears += 1;
        let cleared = Effect::Record(Record {
            payload: Payload::InputCleared(InputCleared {
                draft: draft.to_owned(),
                keys: keys.iter().map(ToString::to_string).collect(),
            }),
            from: None,
            to: None,
            evidence: Some(evidence),
            source: self.source,
        });
        // Each key only after the one before it went through; the event once all did.
        let mut chain = vec![cleared];
        for key in keys.into_iter().rev() {
            chain = vec![Effect::Send {
                input: clawpool_pty::Input::Key(key),
                on_sent: chain,
                fatal: false,
            }];
        }
        self.out.extend(chain);
        true
    }

    /// An agent that still shows its `booting` signal [`Settings::trust_apply`] after clawpool
    /// answered its trust dialog saved the trust without applying it (gemini-cli 0.61.0 saves
    /// it, then can lose the relaunch that applies it: `docs/real-agents.md`). Typing into it
    /// would lose the prompt and waiting ends at the boot deadline, while a new worker starts
    /// trusted from the store: restarted once, before anything was typed.
    fn restart_if_trust_not_applied(&mut self, evidence: &Evidence) {
        let due = self.trust_due.is_some_and(|due| self.now >= due);
        let booting = matches!(self.state, LaneState::Spawning | LaneState::TrustRequired);
        if !due || !booting || self.receipt.submitted() || self.lane.restarted_to_apply_trust {
            return;
        }
        self.trust_due = None;
        let request = super::RestartRequest {
            by: super::TRUST_NOT_APPLIED.to_owned(),
            resume: false,
            redeliver: false,
        };
        self.restart(request, Some(evidence.clone()));
    }

    fn on_unrecognised(&mut self, evidence: Evidence, screen: &ScreenSnapshot) {
        if matches!(self.state, LaneState::Spawning | LaneState::TrustRequired)
            && self.now >= self.boot_deadline
        {
            let text = screen.text();
            let subphase = if text.trim().is_empty() {
                BlockedSubphase::PromptDelivery
            } else {
                BlockedSubphase::UnknownDialog
            };
            self.transition(
                LaneState::Blocked(subphase),
                Some(Evidence {
                    matched: screen_excerpt(&text),
                    ..evidence
                }),
            );
        }
    }

    fn on_exit(&mut self, status: ExitStatus, screen: &ScreenSnapshot) {
        let mut evidence = Evidence {
            rule: "process_exit".into(),
            region: "process".into(),
            matched: status.to_string(),
        };
        // An agent that gives up on its provider and exits with an error code (claw 0.1.3)
        // leaves the failure on its last screen: the lane failed on the provider, not in the
        // agent. A worker killed by a signal crashed, whatever its screen shows.
        let gave_up = match status {
            ExitStatus::Exited(code) if code != 0 => Some(self.observe(screen)).filter(|seen| {
                seen.seen
                    == Seen::Signal {
                        signal: Signal::ProviderRetry,
                    }
            }),
            _ => None,
        };
        let state = match status {
            ExitStatus::Exited(0) => LaneState::Finished,
            ExitStatus::Lost => LaneState::Failed(FailureClass::WorkerLost),
            _ if let Some(seen) = gave_up => {
                evidence = Evidence {
                    rule: seen.rule,
                    region: seen.region,
                    matched: format!("{} (the agent exited: {status})", seen.evidence),
                };
                LaneState::Failed(FailureClass::Provider)
            }
            _ if self.receipt.submitted() && self.receipt.accepted_at.is_none() => {
                let misdelivery = PromptMisdelivery {
                    target: "shell".into(),
                    prompt_sent: None,
                    reason: Some("the agent process is gone".into()),
                };
                self.report(
                    Payload::PromptMisdelivery(misdelivery),
                    None,
                    None,
                    Some(evidence.clone()),
                );
                LaneState::Failed(FailureClass::PromptDelivery)
            }
            _ => LaneState::Failed(FailureClass::WorkerCrashed),
        };
        if !self.state.is_terminal() {
            self.transition(state, Some(evidence));
        }
    }

    /// Carries out an operator's command and sends its verdict back (a restart's, a text's and
    /// an answer's verdict come later: when the new worker started, when the text was
    /// submitted, when the dialog was answered).
    fn on_operator(&mut self, request: OperatorRequest, screen: &ScreenSnapshot) {
        let OperatorRequest { command, reply } = request;
        let verdict = match &command {
            OperatorCommand::Send { .. } if !self.lane.trust.is_open() => Verdict::Refused {
                reason: format!(
                    "nothing is typed into this lane: {}",
                    gate_reason(&self.lane.name)
                ),
                choices: Vec::new(),
            },
            OperatorCommand::Send { .. } if self.over_budget() => self
                .send_over_budget()
                .unwrap_or_else(|| Verdict::done("within budget")),
            OperatorCommand::Send { text } => {
                self.release_budget_hold();
                return self.queue_followup(text.clone(), reply);
            }
            OperatorCommand::Budget { usd } => self.set_budget(*usd),
            OperatorCommand::Stop => self.stop_by_operator(),
            OperatorCommand::Restart(restart) => {
                self.restart(restart.clone(), None);
                self.restart_reply = Some(reply);
                return;
            }
            OperatorCommand::Trust | OperatorCommand::Answer { .. } => {
                match self.answer_by_operator(&command, screen, reply) {
                    // Answered once the dialog's keys went in (`answered`).
                    None => return,
                    Some((verdict, reply)) => return self.decided(&command, verdict, reply),
                }
            }
        };
        self.decided(&command, verdict, reply);
    }

    /// Records a command the lane ignored or refused, and sends its verdict.
    fn decided(&mut self, command: &OperatorCommand, verdict: Verdict, reply: VerdictReply) {
        let declined = |choices: &[String]| OperatorDeclined {
            command: command.describe(),
            reason: verdict.reason().to_owned(),
            choices: choices.to_vec(),
        };
        let payload = match &verdict {
            Verdict::Ignored { .. } => Some(Payload::OperatorIgnored(declined(&[]))),
            Verdict::Refused { choices, .. } => Some(Payload::OperatorRefused(declined(choices))),
            Verdict::OverBudget { .. } => Some(Payload::OperatorRefused(declined(&[]))),
            // A dialog answered or not is in `lane.dialog_answered`; a stop in the transition.
            Verdict::Done { .. } | Verdict::Failed { .. } => None,
        };
        if let Some(payload) = payload {
            self.report(payload, None, None, None);
        }
        self.reply(reply, verdict);
    }

    /// `clawpool trust` and `clawpool answer`: the dialog on screen answered with the choice.
    /// `None` when the answer is under way (its verdict follows [`Input::Answered`]).
    fn answer_by_operator(
        &mut self,
        command: &OperatorCommand,
        screen: &ScreenSnapshot,
        reply: VerdictReply,
    ) -> Option<(Verdict, VerdictReply)> {
        match self.operator_answer(command, screen) {
            Ok((name, choice, kind)) => {
                self.suspended = Some(Suspended::OperatorAnswer {
                    name,
                    choice,
                    kind,
                    reply,
                });
                None
            }
            Err(verdict) => Some((verdict, reply)),
        }
    }

    /// The dialog an operator's answer goes to and the choice (its keys are on their way), or
    /// the verdict that nothing will be pressed.
    fn operator_answer(
        &mut self,
        command: &OperatorCommand,
        screen: &ScreenSnapshot,
    ) -> Result<(String, String, DialogKind), Verdict> {
        // An operator's answer goes only to a dialog the agent can be asking now.
        let seen = self.observe(screen);
        let trust_dialog_shown = matches!(
            seen.seen,
            Seen::Dialog {
                dialog: DialogKind::Trust,
                ..
            }
        );
        if *command == OperatorCommand::Trust && !trust_dialog_shown && !self.lane.trust.is_open() {
            return Err(self.open_gate_by_operator());
        }
        let Seen::Dialog { name, dialog } = &seen.seen else {
            return Err(Verdict::Ignored {
                reason: format!(
                    "no dialog on screen (the lane is {}); nothing was pressed",
                    self.state
                ),
            });
        };
        let Some(spec) = self.profile.dialog(name).cloned() else {
            return Err(Verdict::Ignored {
                reason: format!(
                    "dialog {name:?} is not in the {} profile",
                    self.profile.name()
                ),
            });
        };
        let choices: Vec<String> = spec.choices.keys().cloned().collect();
        let choice = match (command, dialog) {
            (OperatorCommand::Trust, DialogKind::Trust) => "yes".to_owned(),
            (OperatorCommand::Answer { choice }, _) => choice.clone(),
            (_, _) => {
                return Err(Verdict::Refused {
                    reason: format!(
                        "the dialog on screen is {name:?}, not a trust dialog; answer it with \
                         `clawpool answer LANE --choice CHOICE` (choices: {})",
                        choices.join(", ")
                    ),
                    choices,
                });
            }
        };
        if spec.policy == Policy::Never && *dialog != DialogKind::Trust {
            return Err(Verdict::Refused {
                reason: format!(
                    "dialog {name:?} has policy never: clawpool never answers it; answer it in \
                     the lane's terminal"
                ),
                choices: Vec::new(),
            });
        }
        if !spec.choices.contains_key(&choice) {
            return Err(Verdict::Refused {
                reason: format!(
                    "dialog {name:?} has no choice {choice:?}; its choices are: {}",
                    choices.join(", ")
                ),
                choices,
            });
        }
        if *dialog == DialogKind::Trust {
            self.out.push(Effect::GuardTrustStore);
        }
        self.out.push(Effect::Answer {
            dialog: spec,
            choice: choice.clone(),
        });
        Ok((name.clone(), choice, *dialog))
    }

    /// An operator trusts a lane whose agent did not ask (or asks something else first): the
    /// gate opens, and the next look at the screen carries on from where the lane was held.
    fn open_gate_by_operator(&mut self) -> Verdict {
        self.lane.trust = TrustGate::ByOperator;
        self.waiting_dialog = None;
        self.trust_resolved(
            "manual",
            Evidence {
                rule: "trust_gate".into(),
                region: "operator".into(),
                matched: "clawpool trust".into(),
            },
        );
        if self.state == LaneState::Blocked(BlockedSubphase::TrustPrompt) {
            self.transition(LaneState::TrustRequired, None);
        }
        Verdict::done(format!(
            "trusted lane {}: clawpool drives it from now on",
            self.lane.name
        ))
    }

    /// Holds a lane nobody trusted where clawpool would otherwise type or answer:
    /// `blocked{trust_prompt}`, waiting for `clawpool trust`.
    fn hold_at_gate(&mut self, evidence: Evidence) {
        let held = LaneState::Blocked(BlockedSubphase::TrustPrompt);
        if self.state == held {
            return;
        }
        if matches!(self.state, LaneState::Spawning | LaneState::ReadyForPrompt) {
            self.transition(LaneState::TrustRequired, None);
        }
        self.transition(
            held,
            Some(Evidence {
                rule: "trust_gate".into(),
                region: "allow_list".into(),
                ..evidence
            }),
        );
    }

    fn queue_followup(&mut self, text: String, reply: VerdictReply) {
        self.followups.push_back(Followup {
            text,
            reply: Some(reply),
        });
        let queued = SendQueued {
            queued: self.followups.len(),
        };
        self.report(Payload::SendQueued(queued), None, None, None);
    }

    /// Whether the agent has nothing left to do: its prompt (if any) was taken and it is idle.
    fn is_idle_and_done(&self) -> bool {
        let prompt_done = self.receipt.method == "none" || self.receipt.accepted_at.is_some();
        let idle = self.state == LaneState::ReadyForPrompt
            || (self.idle_since.is_some() && !matches!(self.state, LaneState::Blocked(_)));
        prompt_done && idle && self.followups.is_empty()
    }

    fn stop_by_operator(&mut self) -> Verdict {
        let done = self.is_idle_and_done() && !self.dropped_turn;
        self.out.push(Effect::StopWorker);
        let evidence = Evidence {
            rule: "operator_stop".into(),
            region: "operator".into(),
            matched: if done {
                "clawpool stop (the agent was idle with its work done)".into()
            } else if self.dropped_turn {
                "clawpool stop after a restart dropped the turn in flight (never finished)".into()
            } else {
                format!("clawpool stop while {}", self.state)
            },
        };
        // A person ended the lane: its work done is `finished`; a lane blocked fails for what
        // blocked it (a stall escalated to a person, the provider down: a cause that was
        // there before the stop); anything else — a turn cut short, a turn a restart dropped
        // — is `stopped`, never a failure (nothing around the agent failed; `clawpool send`
        // may take it up again).
        let to = match self.state {
            _ if done => LaneState::Finished,
            // Held on its budget: a person chose to end it, nothing failed.
            LaneState::Blocked(BlockedSubphase::Budget) => LaneState::Stopped,
            LaneState::Blocked(subphase) => LaneState::Failed(subphase.failure_class()),
            _ => LaneState::Stopped,
        };
        self.transition(to, Some(evidence));
        self.next = Some(Next::Done);
        Verdict::done(format!("stopped: the worker ended and the lane is {to}"))
    }

    /// Ends the run with a new worker asked for, recorded with what asked for it.
    fn restart(&mut self, request: RestartRequest, evidence: Option<Evidence>) {
        self.report(
            Payload::RestartRequested(request.clone()),
            None,
            None,
            evidence,
        );
        self.out.push(Effect::StopWorker);
        self.next = Some(Next::Restart(request));
    }

    /// Types the prompt (or the task-file line) into an idle input line; once the prompt was
    /// taken, the next text sent by an operator. A git operation paused in the worktree holds
    /// it: looked up first ([`Effect::ProbeGitOperation`]) unless a recent look still holds.
    fn deliver(&mut self) {
        if !self.lane.trust.is_open() || self.suspended.is_some() || self.held_on_budget() {
            return;
        }
        if self.receipt.text_to_type().is_none()
            && (self.receipt.method == "none" || self.receipt.accepted_at.is_some())
        {
            self.next_followup();
            if self.suspended.is_some() {
                return; // Its task file is being written.
            }
        }
        if self.receipt.text_to_type().is_none() {
            return;
        }
        if self.held_until.is_some_and(|until| self.now < until) {
            return;
        }
        self.out.push(Effect::ProbeGitOperation);
        self.suspended = Some(Suspended::Delivery);
    }

    /// Whether the git operation found in the lane's worktree (a rebase, merge, cherry-pick,
    /// revert or `git am` stopped part-way) holds delivery: its HEAD and index are mid-change,
    /// so no new work goes in until someone finishes or aborts it. Looked at again every
    /// [`HOLD_RECHECK`] while held.
    fn held(&mut self, operation: Option<GitOperation>) -> bool {
        let paused = operation.filter(|op| op.paused);
        match (paused, self.held_until) {
            (Some(op), held) => {
                if held.is_none() {
                    let held = DeliveryHeld { operation: op };
                    self.report(Payload::DeliveryHeld(held), None, None, None);
                }
                self.held_until = Some(self.now + HOLD_RECHECK);
                true
            }
            (None, Some(_)) => {
                self.held_until = None;
                self.report(Payload::DeliveryResumed, None, None, None);
                false
            }
            (None, None) => false,
        }
    }

    /// Types the text to type, once nothing holds delivery.
    fn type_text(&mut self) {
        let Some(text) = self.receipt.text_to_type() else {
            return;
        };
        // Before the text goes in: from now on the agent's screen shows what it was told.
        self.end_boot();
        self.receipt.typed();
        let typed = Effect::Record(Record {
            payload: Payload::PromptTyped(PromptTyped {
                chars: text.chars().count(),
                method: self.receipt.method.to_owned(),
            }),
            from: None,
            to: None,
            evidence: None,
            source: self.source,
        });
        self.out.push(Effect::Send {
            input: clawpool_pty::Input::Text(text),
            on_sent: vec![typed],
            fatal: true,
        });
    }

    /// Starts delivering the next queued text, with a receipt of its own (once its task file
    /// is written, for a long one).
    fn next_followup(&mut self) {
        let Some(followup) = self.followups.pop_front() else {
            return;
        };
        let plan = delivery::followup_plan(&followup.text, &self.settings, &self.lane.cwd);
        if let PromptPlan::TaskFile { prompt, file } = &plan {
            self.out.push(Effect::WriteTaskFile {
                file: file.clone(),
                prompt: prompt.clone(),
            });
            self.suspended = Some(Suspended::Round { followup, plan });
            return;
        }
        self.start_round(followup, plan);
    }

    /// A long text's task file was written (or could not be): its round starts, or its sender
    /// is told why not.
    fn round_written(&mut self, followup: Followup, plan: PromptPlan, written: Result<(), String>) {
        match written {
            Ok(()) => {
                self.start_round(followup, plan);
                self.deliver();
            }
            Err(err) => {
                let error = format!("writing the task file: {err}");
                let failed = ErrorReport {
                    error: error.clone(),
                };
                self.report(Payload::SendFailed(failed), None, None, None);
                if let Some(reply) = followup.reply {
                    self.reply(reply, Verdict::Failed { reason: error });
                }
            }
        }
    }

    fn start_round(&mut self, Followup { text, reply }: Followup, plan: PromptPlan) {
        self.round_reply = reply;
        self.followup_round = true;
        self.receipt = Receipt::new(&plan);
        self.idle_since = None;
        self.input_clears = 0;
        if let Some(check) = self.check.as_mut() {
            check
                .delivered
                .push(clawpool_recovery::normalize_line(&text));
        }
        let round = PromptRound {
            method: self.receipt.method.to_owned(),
            chars: text.chars().count(),
        };
        self.report(Payload::PromptRound(round), None, None, None);
    }

    /// Presses Enter on our draft. The press is recorded just before it is made: a supervisor
    /// killed in between leaves a lane whose adopter presses Enter again on the draft still
    /// there, where one killed just after an unrecorded press would have its adopter type the
    /// prompt a second time into an agent that already took it.
    fn submit(&mut self, evidence: Evidence, screen: &ScreenSnapshot) {
        if !self.receipt.echoes_counted() {
            let rows = delivery::echo_rows(screen, self.profile, &self.receipt);
            self.receipt.note_echoes_before(rows);
        }
        self.receipt
            .submitted_now(self.settings.accept_timeout / self.settings.max_submit_attempts.max(1));
        let sent = PromptSent {
            attempt: self.receipt.attempts,
            by: None,
        };
        self.report(Payload::PromptSent(sent), None, None, Some(evidence));
        let mut on_sent = Vec::new();
        if let Some(reply) = self.round_reply.take() {
            on_sent.push(Effect::Reply {
                to: reply,
                verdict: Verdict::Done {
                    reason: "delivered: typed into the agent's empty input line, checked to be \
                             exactly the text sent, and submitted"
                        .into(),
                    send: Some(SendFate::Delivered),
                    queue: None,
                },
            });
        }
        self.out.push(Effect::Send {
            input: clawpool_pty::Input::Key(clawpool_pty::Key::Enter),
            on_sent,
            fatal: true,
        });
    }

    /// Whether the screen's proof that the prompt was taken decides now: always when the
    /// agent's hooks do not decide (none, not proved to work in this run, or degraded), else
    /// once it has shown for the settings' `hook_grace` without the agent's UserPromptSubmit.
    fn screen_may_accept(&mut self) -> bool {
        if !self.hooks.decides() {
            return true;
        }
        let since = *self.hooks.screen_accept_since.get_or_insert(self.now);
        self.now.duration_since(since) >= self.settings.hook_grace
    }

    /// Whether the screen, showing the agent at work, proves it took this prompt well enough
    /// to decide before the agent's own report: its echo drawn since the text could be taken
    /// (more rows show it than before Enter, or before a launch prompt's agent drew anything),
    /// so neither an earlier turn's echo of the same text nor a working indicator alone
    /// counts. Claude Code draws the echo and its spinner before it runs its UserPromptSubmit
    /// hook, so the screen's proof is the first; the report, when it comes, opens the turn as
    /// before. Codex's app server keeps deciding acceptance by its thread turning active
    /// within `hook_grace` (its TUI echoes a prompt before the server has the turn).
    fn screen_shows_this_prompt_taken(&self, screen: &ScreenSnapshot) -> bool {
        self.profile.manifest.launch.hooks == AgentHooks::Claude
            && delivery::echoed_anew(screen, self.profile, &self.receipt).is_some()
    }

    fn accept(&mut self, evidence: Evidence) {
        if self.receipt.accepted_at.is_some() {
            return;
        }
        self.hooks.screen_accept_since = None;
        self.end_boot();
        self.receipt.accept(&evidence.matched);
        self.dropped_turn = false;
        self.transition(LaneState::PromptAccepted, Some(evidence));
    }

    /// clawpool's answer resolved the trust dialog: recorded, and the agent has
    /// [`Settings::trust_apply`] from now to show it runs trusted.
    fn trust_answered(&mut self, method: &str, evidence: Evidence) {
        if !self.trust_recorded {
            self.trust_due = Some(self.now + self.settings.trust_apply);
        }
        self.trust_resolved(method, evidence);
    }

    /// Records the lane's trust resolved, once per run.
    fn trust_resolved(&mut self, method: &str, evidence: Evidence) {
        self.unconfirmed_trust = None;
        if std::mem::replace(&mut self.trust_recorded, true) {
            return;
        }
        let method = method.to_owned();
        let resolved = Payload::TrustResolved(TrustResolved { method });
        self.report(resolved, None, None, Some(evidence));
    }

    /// The one place a lane's state changes.
    fn transition(&mut self, to: LaneState, evidence: Option<Evidence>) {
        if to == self.state || self.budget_holds_from(to) {
            return;
        }
        if self.lane.answered_outside
            && self.state == LaneState::Blocked(BlockedSubphase::ToolPermission)
            && matches!(
                to,
                LaneState::PromptAccepted | LaneState::Running | LaneState::ToolPermissionRequired
            )
        {
            // Held for a person: the agent working again (its screen, its hooks) moves it
            // nowhere. Its exit, a stop or an operator's text still do.
            return;
        }
        let from = self.state;
        self.state = to;
        let payload = Payload::transition(to.status())
            .unwrap_or_else(|| Payload::PromptAccepted(self.receipt.as_payload()));
        self.report(payload, Some(from), Some(to), evidence);
        if let LaneState::Blocked(subphase) = to
            && self.recover_blocked
            && self.check.is_none()
            && self.next.is_none()
        {
            // What recovery can heal is decided in one place, for the driver, `policy
            // explain` and `recover` alike; a question for a person goes to the policy as is.
            self.next = match Trigger::of(to, self.receipt.submitted()) {
                Some(trigger) => Some(Next::Recover(trigger)),
                None => match subphase {
                    // A question for a person, or an input line holding text nobody here
                    // typed before the prompt went in (an answer to a terminal query, a
                    // person's keys): never left sitting silently, the policy escalates it.
                    BlockedSubphase::TrustPrompt
                    | BlockedSubphase::ToolPermission
                    | BlockedSubphase::BootDialog
                    | BlockedSubphase::PromptDelivery => Some(Next::Blocked),
                    _ => None,
                },
            };
        }
    }

    /// `lane.channel.contradiction`: the channel and the screen disagreed for `lasted`, each
    /// with its evidence; the lane is finished by the rule of `docs/events.md`.
    fn contradiction(
        &mut self,
        channel: Evidence,
        screen: Evidence,
        lasted: Duration,
        resolved: &str,
    ) {
        let contradiction = ChannelContradiction {
            channel,
            screen,
            for_ms: lasted.as_millis() as u64,
            resolved: resolved.to_owned(),
        };
        self.report(
            Payload::ChannelContradiction(contradiction),
            None,
            None,
            None,
        );
    }

    /// Records an event.
    fn report(
        &mut self,
        payload: Payload,
        from: Option<LaneState>,
        to: Option<LaneState>,
        evidence: Option<Evidence>,
    ) {
        self.out.push(Effect::Record(Record {
            payload,
            from,
            to,
            evidence,
            source: self.source,
        }));
    }

    fn reply(&mut self, to: VerdictReply, verdict: Verdict) {
        self.out.push(Effect::Reply { to, verdict });
    }
}

/// What a run of the machine hands on to the driver when it ends.
pub struct Ended {
    /// The final state.
    pub state: LaneState,
    /// The prompt delivery receipt.
    pub receipt: Receipt,
    /// Whether the lane ended or its worker is to be started again.
    pub next: Next,
    /// Whether the worker ever showed its idle input.
    pub reached_ready: bool,
    /// The lane's trust gate as the run left it.
    pub trust: TrustGate,
    /// Whether a tool-permission question was answered outside clawpool and no operator
    /// acted since ([`super::LaneContext::answered_outside`]).
    pub answered_outside: bool,
    /// The lane's budget as the run left it (raised, held).
    pub budget: super::LaneBudget,
    /// The verdict owed to the operator who asked for a restart.
    pub restart_reply: Option<VerdictReply>,
    /// Texts still queued.
    pub unsent: Vec<String>,
    /// The dialog the lane was left waiting on for an operator, if any.
    pub dialog: Option<super::WaitingDialog>,
}

/// A dialog kind's name in events.
fn dialog_kind_name(kind: DialogKind) -> &'static str {
    match kind {
        DialogKind::Trust => "trust",
        DialogKind::ToolPermission => "tool_permission",
        DialogKind::Boot => "boot",
    }
}

/// Off-screen progress, as a recovery check's result says it.
fn describe_source(source: ProgressSource) -> &'static str {
    match source {
        ProgressSource::WorktreeChange => "a file changed in the worktree",
        ProgressSource::Commit => "a new commit on the lane's branch",
        ProgressSource::Screen => "a new line on screen",
        ProgressSource::AgentEvent => "the agent moved on",
    }
}

/// Why a lane's trust gate is closed, for evidence and errors.
fn gate_reason(lane: &str) -> String {
    format!(
        "lane {lane} is not under a trusted root and no operator trusted it (`clawpool trust {lane}`)"
    )
}

/// The last six non-blank lines of a screen: what a person needs to see of a screen no rule
/// knows.
fn screen_excerpt(text: &str) -> String {
    let mut lines: Vec<&str> = text
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(6)
        .collect();
    lines.reverse();
    lines.join("\n")
}

/// The lane's failure when the supervisor is told to stop by `signal` while the lane is in
/// `from`: the class its block was heading for when it was blocked, otherwise `infra`, with the
/// signal as evidence. Recorded by the machine during a run, and by the driver between runs.
pub fn interrupted(from: LaneState, signal: &str) -> Record {
    let to = from.interrupted_unfinished();
    Record {
        payload: Payload::Failed(LaneFailed {
            signal: Some(signal.to_owned()),
            error: None,
        }),
        from: Some(from),
        to: Some(to),
        evidence: Some(Evidence {
            rule: "supervisor_interrupted".into(),
            region: "supervisor".into(),
            matched: format!("interrupted by {signal} while {from}"),
        }),
        source: None,
    }
}

/// The lane's failure when its worktree `dir` is gone (deleted or moved away while the lane
/// ran): whatever the screen says, there is no work to finish, so `infra`, with the missing
/// folder as evidence. The machine records it on [`Input::WorktreeGone`]; the driver, for a
/// worktree gone between the last look and the lane's close.
pub fn worktree_gone(from: LaneState, dir: &std::path::Path) -> Record {
    Record {
        payload: Payload::Failed(LaneFailed {
            signal: None,
            error: Some(format!(
                "the lane's worktree {} was deleted while the lane ran",
                dir.display()
            )),
        }),
        from: Some(from),
        to: Some(LaneState::Failed(FailureClass::Infra)),
        evidence: Some(Evidence {
            rule: "worktree_gone".into(),
            region: "worktree".into(),
            matched: format!("{} does not exist", dir.display()),
        }),
        source: None,
    }
}

/// The lane's failure when its worker cannot be started again (a restart's new worker) while
/// the lane is in `from`: `worker_crashed`, with the start's error. Recorded by the driver,
/// which has no worker left to run the machine on.
pub fn start_failed(from: LaneState, error: String) -> Record {
    Record {
        payload: Payload::Failed(LaneFailed {
            signal: None,
            error: Some(format!("the worker could not be started again: {error}")),
        }),
        from: Some(from),
        to: Some(LaneState::Failed(FailureClass::WorkerCrashed)),
        evidence: None,
        source: None,
    }
}

/// The lane's failure when a supervisor taking it over finds its worker gone (`why`), its
/// state before unknown: `worker_lost`, with `why` as evidence.
pub fn worker_lost(why: String) -> Record {
    Record {
        payload: Payload::Failed(LaneFailed::default()),
        from: None,
        to: Some(LaneState::Failed(FailureClass::WorkerLost)),
        evidence: Some(Evidence {
            rule: "worker_gone".into(),
            region: "process".into(),
            matched: why,
        }),
        source: None,
    }
}

fn answer_of(
    dialog: &str,
    choice: &str,
    by: &str,
    attempt: u32,
    answered: Result<(), String>,
) -> Payload {
    Payload::DialogAnswered(DialogAnswered {
        dialog: dialog.to_owned(),
        choice: choice.to_owned(),
        by: by.to_owned(),
        attempt,
        completed: answered.is_ok(),
        error: answered.err(),
    })
}

/// The channel's side of a contradiction with an idle-looking screen: it opened the turn and
/// has not reported its end.
fn turn_still_open() -> Evidence {
    Evidence {
        rule: "turn_open".into(),
        region: "channel".into(),
        matched: "no finish reported since the turn opened".into(),
    }
}

mod budget;
#[cfg(test)]
mod tests;
