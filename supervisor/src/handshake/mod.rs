//! The boot handshake: from "process started" to "prompt accepted", and on to finished.
//!
//! [`Handshake::run`] owns one lane's worker. It wakes on screen changes, the worker's exit,
//! operator commands and its own deadlines; each time it reads the screen through the profile
//! ([`crate::detect::observe`]) and moves the lane through `spawning → trust_required →
//! ready_for_prompt → prompt_accepted → running → finished`, or to `blocked{…}` /
//! `failed{…}`. Every transition is a [`clawpool_lanes::LaneEvent`] with its evidence.
//!
//! What it will and will not type:
//! - nothing at all, not a prompt nor a key, into a lane whose trust gate is closed (outside
//!   the trusted roots and not trusted by an operator), whether or not the agent asks: an
//!   agent's own trust store may trust the folder already (agents record trust for the whole
//!   repository), so an agent that does not ask proves nothing. Such a lane is
//!   `blocked{trust_prompt}` until `clawpool trust`;
//! - a dialog is answered only when its policy is `auto` (trust dialogs: only when the lane
//!   is trusted), or when an operator says so, and never when it is `never`;
//! - the prompt is typed only into an idle input line (`ready_for_prompt`), never into a
//!   screen that looks like a shell, and never a second time while the first copy is still in
//!   the input line (only Enter is pressed again);
//! - `prompt_accepted` needs proof on screen: the draft left the input line and the prompt was
//!   echoed or a working indicator appeared.

mod answer;
mod delivery;
mod external;
mod unknown;
mod verdict;

use std::path::PathBuf;
use std::time::Duration;

use clawpool_lanes::{BlockedSubphase, EventLog, Evidence, FailureClass, LaneState, LaneStatus};
use clawpool_pty::{ExitStatus, Worker};
use clawpool_recovery::Trigger;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::detect::{Observation, Seen, observe};
use crate::profiles::{DialogKind, Policy, Profile, Signal};
use crate::trust::StoreGuard;

pub use delivery::{PromptPlan, Receipt, check_prompt, plan_prompt};
pub use external::ExternalProgress;
pub use verdict::{OperatorRequest, SendFate, Verdict, VerdictReply};

/// Timing and limits of the handshake (resolved from the `[handshake]` configuration).
pub use crate::config::HandshakeSettings as Settings;

/// What an operator can tell a lane (also the lane control socket's wire format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum OperatorCommand {
    /// Trust the lane's folder: answer its trust dialog with yes.
    Trust,
    /// Answer the dialog on screen with this choice.
    Answer {
        /// The choice (e.g. `yes`, `no`).
        choice: String,
    },
    /// Deliver more text to the agent, by the same rules as the prompt: typed only into an
    /// idle input line, and verified as accepted. Queued while the agent works.
    Send {
        /// The text.
        text: String,
    },
    /// Stop the worker and end the lane.
    Stop,
    /// Stop the worker and start it again in the same worktree.
    Restart(RestartRequest),
}

/// Why and how a lane's worker is started again.
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

/// What the lane's driver does once the handshake returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Next {
    /// Nothing: the lane's state is final for this worker.
    Done,
    /// Start a new worker in the same worktree.
    Restart(RestartRequest),
    /// The worker is alive but needs a recovery recipe for this situation.
    Recover(Trigger),
    /// A recovery check ([`Handshake::check_progress`]) saw meaningful progress: what it was.
    Progressed(String),
    /// A recovery check's time ran out without meaningful progress.
    NoProgress,
    /// The lane became blocked on something a person answers (a trust dialog its policy does
    /// not let clawpool answer, a tool permission, a boot dialog): the worker is alive, and the
    /// recovery policy says what to tell them.
    Blocked,
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

/// Whether clawpool may drive a lane: type into it, answer its dialogs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustGate {
    /// The lane's folder is under a trusted root: its trust dialog is answered by itself.
    AllowListed,
    /// An operator trusted this lane (`clawpool trust`, or a "yes" to its trust dialog).
    ByOperator,
    /// Neither: nothing is typed and nothing answered until an operator trusts the lane.
    Closed,
}

impl TrustGate {
    /// The gate of a lane from the allow-list's decision and whether an operator trusted it.
    pub fn of(allow_listed: bool, by_operator: bool) -> Self {
        match (allow_listed, by_operator) {
            (true, _) => TrustGate::AllowListed,
            (false, true) => TrustGate::ByOperator,
            (false, false) => TrustGate::Closed,
        }
    }

    /// Whether clawpool may drive the lane.
    pub fn is_open(self) -> bool {
        self != TrustGate::Closed
    }
}

/// The lane as the handshake sees it.
#[derive(Debug, Clone)]
pub struct LaneContext {
    /// The lane's name.
    pub name: String,
    /// Its folder (canonical).
    pub cwd: PathBuf,
    /// Whether clawpool may drive it.
    pub trust: TrustGate,
    /// The agent's trust store, kept to this lane when clawpool answers a trust dialog.
    pub store: Option<StoreGuard>,
    /// How the prompt goes to the agent.
    pub prompt: PromptPlan,
}

/// How the handshake ended.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The final state.
    pub state: LaneState,
    /// The prompt delivery receipt.
    pub receipt: Receipt,
    /// The worker's exit status, if it exited.
    pub exit: Option<String>,
    /// Whether the lane ended or its worker is to be started again.
    pub next: Next,
    /// Whether the worker ever showed its idle input (a worker that exits before that is a
    /// failed start, not a crash).
    pub reached_ready: bool,
    /// The lane's trust gate as the run left it (an operator may have opened it).
    #[serde(skip)]
    pub trust: TrustGate,
    /// The lane's trust store guard as the run left it (it knows whether clawpool answered a
    /// trust dialog, so the store can be confined again after the agent exits).
    #[serde(skip)]
    pub store: Option<StoreGuard>,
    /// The verdict owed to the operator who asked for [`Next::Restart`]: the driver sends it
    /// once the new worker started, or could not.
    #[serde(skip)]
    pub restart_reply: Option<VerdictReply>,
    /// Texts still queued for the agent when the run ended, in order: the next run with the
    /// same lane delivers them.
    #[serde(skip)]
    pub unsent: Vec<String>,
    /// The dialog the lane was left waiting on for an operator, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dialog: Option<WaitingDialog>,
}

/// A dialog on screen that waits for an operator's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitingDialog {
    /// The dialog's name in the profile.
    pub name: String,
    /// The choices `clawpool answer` takes for it.
    pub choices: Vec<String>,
}

impl WaitingDialog {
    /// What to add to a next action that asks a person to answer it.
    pub fn hint(&self) -> String {
        format!(
            "dialog {:?} is on screen; its choices: {}",
            self.name,
            self.choices.join(", ")
        )
    }
}

/// A text waiting to be delivered, with the verdict owed to the operator who sent it (none
/// for a recovery's nudge, or once the operator was told it is queued).
#[derive(Debug)]
struct Followup {
    text: String,
    reply: Option<VerdictReply>,
}

/// One lane's handshake.
pub struct Handshake<'a> {
    worker: Worker,
    profile: &'a Profile,
    lane: LaneContext,
    settings: Settings,
    events: &'a EventLog,
    operator: &'a mut mpsc::Receiver<OperatorRequest>,
    state: LaneState,
    receipt: Receipt,
    /// The dialog the lane is blocked on, waiting for an operator.
    waiting_dialog: Option<String>,
    /// When the current idle spell (after acceptance) began.
    idle_since: Option<Instant>,
    /// When the provider retry text first showed in the current spell.
    provider_since: Option<Instant>,
    boot_deadline: Instant,
    /// Each dialog's answer attempts, so a dialog that will not go away ends up blocked.
    answer_attempts: std::collections::HashMap<String, u32>,
    /// The event that opens the run: `lane.started`, `lane.adopted` (taken over from an
    /// earlier supervisor), or none when the same supervisor carries on with the same worker.
    opening: Option<&'static str>,
    /// Texts sent with [`OperatorCommand::Send`], delivered one by one when the agent is idle.
    followups: std::collections::VecDeque<Followup>,
    /// The verdict owed for the text being delivered this round.
    round_reply: Option<VerdictReply>,
    /// Whether this round delivers a text sent after the prompt (an operator's or a nudge).
    followup_round: bool,
    /// The verdict owed for a restart, handed to the driver with the outcome.
    restart_reply: Option<VerdictReply>,
    /// Set when an operator asked to stop or restart: the run loop ends.
    next: Option<Next>,
    /// Whether the idle input was ever seen.
    reached_ready: bool,
    /// What counts as progress while the agent works, and since when there was none.
    progress: clawpool_recovery::ProgressTracker,
    /// A running lane with no progress this long is stalled; `None` never.
    stall_after: Option<Duration>,
    /// A recovery check in progress, if the driver asked for one.
    check: Option<ProgressCheck>,
    /// Hand a lane that becomes blocked to recovery ([`Handshake::recover_blocked`]).
    recover_blocked: bool,
    /// While a git operation is paused in the lane's worktree, nothing is typed: when to look
    /// at the worktree again.
    held_until: Option<Instant>,
    /// Times the input line was emptied of our own text the agent put back, this round.
    input_clears: u32,
    /// How long a running lane has shown a screen no rule knows.
    unknown_screen: unknown::UnknownScreen,
    /// Progress the lane makes off its screen (worktree changes, commits).
    external: Option<ExternalProgress>,
    /// Set when clawpool answered a trust dialog: the agent's store is confined to the lane
    /// once the dialog is gone.
    confine_pending: bool,
    /// A restart dropped the turn the agent was in: its idle input is not its work done.
    dropped_turn: bool,
}

/// What a new supervisor knows of a lane it adopts, from the lane's state file.
#[derive(Debug, Clone, Copy)]
pub struct Resumed {
    /// The lane's last recorded state.
    pub state: LaneState,
    /// Enter presses for the prompt so far.
    pub attempts: u32,
    /// When the prompt was first sent (epoch s).
    pub sent_at: Option<u64>,
    /// When it was seen accepted (epoch s).
    pub accepted_at: Option<u64>,
}

/// How long a worker has to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How many times clawpool answers the same dialog before it blocks the lane instead.
const MAX_ANSWERS_PER_DIALOG: u32 = 3;

/// Off-screen progress, as a recovery check's result says it.
fn describe_source(source: clawpool_recovery::ProgressSource) -> &'static str {
    match source {
        clawpool_recovery::ProgressSource::WorktreeChange => "a file changed in the worktree",
        clawpool_recovery::ProgressSource::Commit => "a new commit on the lane's branch",
        clawpool_recovery::ProgressSource::Screen => "a new line on screen",
        clawpool_recovery::ProgressSource::AgentEvent => "the agent moved on",
    }
}

/// How often a worktree with a paused git operation is looked at again while delivery waits.
const HOLD_RECHECK: Duration = Duration::from_secs(2);

/// How many times the input line is emptied of our own text in one round before giving up.
const MAX_INPUT_CLEARS: u32 = 3;

impl<'a> Handshake<'a> {
    /// A handshake for a worker that has just been started.
    pub fn new(
        worker: Worker,
        profile: &'a Profile,
        lane: LaneContext,
        settings: Settings,
        events: &'a EventLog,
        operator: &'a mut mpsc::Receiver<OperatorRequest>,
    ) -> Self {
        let receipt = Receipt::new(&lane.prompt);
        Self {
            worker,
            profile,
            lane,
            settings,
            events,
            operator,
            state: LaneState::plain(LaneStatus::Spawning),
            receipt,
            waiting_dialog: None,
            idle_since: None,
            provider_since: None,
            boot_deadline: Instant::now() + settings.boot_timeout,
            answer_attempts: Default::default(),
            opening: Some("lane.started"),
            followups: Default::default(),
            round_reply: None,
            followup_round: false,
            restart_reply: None,
            next: None,
            reached_ready: false,
            progress: clawpool_recovery::ProgressTracker::new(
                clawpool_lanes::state_file::now_secs(),
            ),
            stall_after: None,
            check: None,
            recover_blocked: false,
            held_until: None,
            input_clears: 0,
            unknown_screen: Default::default(),
            external: None,
            confine_pending: false,
            dropped_turn: false,
        }
    }

    /// Counts what `external` records (worktree changes, commits) as progress, for stalls and
    /// recovery checks alike.
    pub fn with_external_progress(mut self, external: ExternalProgress) -> Self {
        self.external = Some(external);
        self
    }

    /// Ends the run with [`Next::Recover`]`("stalled")` when the lane is `running` and its
    /// screen shows no meaningful progress for `after` (spinners, timers and token counters
    /// are not progress; new lines are).
    pub fn stall_after(mut self, after: Duration) -> Self {
        self.stall_after = Some(after);
        self
    }

    /// Ends the run when the lane becomes blocked on something recovery or a person deals
    /// with: `blocked{provider}` → [`Next::Recover`]`("provider_down")` (the agent keeps
    /// retrying; a recipe decides how long to wait), `blocked{unknown_dialog}` →
    /// [`Next::Recover`]`("unknown_dialog")`, `blocked{trust_prompt|tool_permission|boot_dialog}`
    /// → [`Next::Blocked`], a submitted draft the agent does not take
    /// (`blocked{prompt_delivery}` after `max_submit_attempts` Enter presses) →
    /// [`Next::Recover`]`("prompt_not_accepted")`.
    pub fn recover_blocked(mut self) -> Self {
        self.recover_blocked = true;
        self
    }

    /// A recovery check: once the agent has taken what it was given, end the run with
    /// [`Next::Progressed`] at the first meaningful progress on screen, or [`Next::NoProgress`]
    /// when `within` (if any) passes without any. Stall detection is off meanwhile (the check
    /// is it), and a lane blocked as stalled stays so until it shows progress.
    pub fn check_progress(mut self, within: Option<Duration>) -> Self {
        let prompt = match &self.lane.prompt {
            PromptPlan::None => None,
            PromptPlan::Typed { prompt }
            | PromptPlan::TaskFile { prompt, .. }
            | PromptPlan::LaunchArg { prompt } => Some(clawpool_recovery::normalize_line(prompt)),
        };
        self.check = Some(ProgressCheck {
            within,
            started: Instant::now(),
            armed_at: None,
            delivered: prompt.into_iter().collect(),
        });
        self
    }

    /// Texts to deliver, in order, as soon as the agent is idle (a recovery's nudge).
    pub fn with_followups(mut self, texts: Vec<String>) -> Self {
        self.followups
            .extend(texts.into_iter().map(|text| Followup { text, reply: None }));
        self
    }

    /// Continues the prompt count of an earlier worker of the same lane: a prompt delivered
    /// again after a restart is attempt `attempts + 1`.
    pub fn after_attempts(mut self, attempts: u32) -> Self {
        self.receipt.continue_count(attempts);
        self
    }

    /// The worker was started again while its agent was in the middle of a turn that was not
    /// delivered again: until it takes a new text, stopping it does not finish the lane.
    pub fn after_dropped_turn(mut self, dropped: bool) -> Self {
        self.dropped_turn = dropped;
        self
    }

    /// Continues a lane an earlier supervisor was driving, from its recorded state: nothing
    /// already sent is sent again, and a draft still in the input line after a recorded Enter
    /// gets Enter again by the prompt's rules.
    pub fn resume(self, from: Resumed) -> Self {
        let retry_after = self.settings.accept_timeout / self.settings.max_submit_attempts.max(1);
        let mut handshake = self.take_over(from, Some(retry_after));
        handshake.opening = Some("lane.adopted");
        handshake
    }

    /// Carries on with the same worker after the driver stepped in (a recovery recipe's key,
    /// wait or nudge): like [`Handshake::resume`], without announcing a new start; pressing
    /// Enter again is the recovery's to decide.
    pub fn carry_on(self, from: Resumed) -> Self {
        let mut handshake = self.take_over(from, None);
        handshake.opening = None;
        handshake
    }

    fn take_over(mut self, from: Resumed, retry_after: Option<Duration>) -> Self {
        self.state = from.state;
        self.receipt
            .resume(from.attempts, from.sent_at, from.accepted_at, retry_after);
        self.reached_ready = !matches!(
            from.state.status,
            LaneStatus::Spawning | LaneStatus::TrustRequired
        );
        self
    }

    /// Drives the lane until it is finished or failed.
    pub async fn run(mut self) -> Outcome {
        if let Some(kind) = self.opening {
            self.event(
                kind,
                None,
                Some(self.state),
                None,
                serde_json::json!({"agent": self.profile.name(), "pid": self.worker.pid()}),
            );
        }
        let mut changes = self.worker.changes();
        let mut output_open = true;
        loop {
            if let Some(status) = self.worker.exit_status() {
                self.on_exit(status);
                break;
            }
            let looked_at = Instant::now();
            let snapshot = self.worker.snapshot();
            let seen = observe(self.profile, &snapshot);
            let unrecognised = seen.seen == Seen::Unknown;
            self.step(seen).await;
            self.check_stall(&snapshot.rows);
            self.check_unknown_screen(unrecognised, &snapshot);
            self.tell_queued();
            if self.state.status.is_terminal() || self.next.is_some() {
                break;
            }
            let wake = self.next_deadline(looked_at);
            tokio::select! {
                more = changes.changed(), if output_open => output_open = more,
                _ = self.worker.wait(), if !output_open => {}
                request = self.operator.recv() => {
                    if let Some(request) = request {
                        self.on_operator(request).await;
                        if self.next.is_some() {
                            break;
                        }
                    }
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
        if self.state.status == LaneStatus::Finished && self.worker.exit_status().is_none() {
            // The agent is idle with the work done; the lane is over, so is the worker.
            self.worker.stop(Duration::from_secs(5)).await;
        }
        // The agent may record its trust late (or again on exit): confine once more.
        self.confine_store();
        if let Some(reply) = self.round_reply.take() {
            reply.send(Verdict::Failed {
                reason: format!(
                    "the text was typed but not yet submitted when the lane became {}",
                    self.state
                ),
            });
        }
        self.tell_queued();
        let dialog = self
            .waiting_dialog
            .as_deref()
            .and_then(|name| self.profile.dialog(name))
            .map(|dialog| WaitingDialog {
                name: dialog.name.clone(),
                choices: dialog.choices.keys().cloned().collect(),
            });
        Outcome {
            state: self.state,
            receipt: self.receipt,
            exit: self.worker.exit_status().map(|s| s.to_string()),
            next: self.next.unwrap_or(Next::Done),
            reached_ready: self.reached_ready,
            trust: self.lane.trust,
            store: self.lane.store,
            restart_reply: self.restart_reply,
            unsent: self.followups.into_iter().map(|f| f.text).collect(),
            dialog,
        }
    }

    /// Texts sent by an operator that the last look did not start delivering wait in the
    /// queue: their senders are told so.
    fn tell_queued(&mut self) {
        let waiting = self.followups.len();
        for (position, followup) in self.followups.iter_mut().enumerate() {
            if let Some(reply) = followup.reply.take() {
                reply.send(Verdict::Done {
                    reason: format!(
                        "queued ({} of {waiting}): the lane is {}; the text is typed once the \
                         agent's input line is idle and empty",
                        position + 1,
                        self.state
                    ),
                    send: Some(SendFate::Queued),
                });
            }
        }
    }

    /// Feeds the screen to the progress tracker; a running lane without progress for the
    /// stall time ends the run for recovery.
    fn check_stall(&mut self, rows: &[String]) {
        let now = clawpool_lanes::state_file::now_secs();
        let new_lines = self.progress.observe_screen(now, rows);
        if let Some((at_ms, source)) = self.external.as_ref().and_then(ExternalProgress::latest) {
            self.progress.note(at_ms / 1000, source);
        }
        if self.check.is_some() {
            self.run_check(&new_lines);
            return;
        }
        let Some(after) = self.stall_after else {
            return;
        };
        if self.state.status == LaneStatus::Running && self.progress.is_stalled(now, after) {
            self.event(
                "lane.stalled",
                None,
                None,
                None,
                serde_json::json!({
                    "seconds_without_progress": self.progress.idle_for(now).as_secs(),
                    "stall_after_secs": after.as_secs(),
                }),
            );
            self.next = Some(Next::Recover(Trigger::Stalled));
        }
    }

    /// A running lane that shows a screen no rule knows (a notice, a dialog no profile has)
    /// and makes no progress for `unknown_screen_secs` is blocked on it, with the screen's text
    /// as evidence; nothing is pressed. A known screen afterwards moves it on as usual.
    fn check_unknown_screen(
        &mut self,
        unrecognised: bool,
        snapshot: &clawpool_pty::ScreenSnapshot,
    ) {
        let now = Instant::now();
        let running = self.state.status == LaneStatus::Running;
        self.unknown_screen.observe(unrecognised && running, now);
        let without_progress = self
            .progress
            .idle_for(clawpool_lanes::state_file::now_secs());
        if running
            && self
                .unknown_screen
                .is_due(now, self.settings.unknown_screen, without_progress)
        {
            let evidence = Evidence {
                rule: "unknown_screen".into(),
                region: "screen".into(),
                matched: screen_excerpt(&snapshot.text()),
            };
            self.transition(
                LaneState::blocked(BlockedSubphase::UnknownDialog),
                Some(evidence),
            );
        }
    }

    /// Carries a recovery check on with the lines this look found new.
    fn run_check(&mut self, new_lines: &[String]) {
        let taken = self.followups.is_empty()
            && (self.receipt.method == "none" || self.receipt.accepted_at.is_some());
        let working = matches!(
            self.state.status,
            LaneStatus::PromptAccepted
                | LaneStatus::Running
                | LaneStatus::Blocked
                | LaneStatus::ToolPermissionRequired
        );
        let external = self.external.as_ref().and_then(ExternalProgress::latest);
        let Some(check) = self.check.as_mut() else {
            return;
        };
        let progress = new_lines.iter().find(|line| {
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
                .is_some_and(|within| check.started.elapsed() >= within) =>
            {
                self.next = Some(Next::NoProgress);
            }
            // Armed after this look, so what it found (the echo) is not progress.
            _ if taken && working && check.armed_at.is_none() => {
                check.armed_at = Some(clawpool_lanes::now_ms());
            }
            _ => {}
        }
    }

    /// The next time the lane must be looked at even if its screen does not change.
    ///
    /// Only deadlines after `looked_at` (when the screen was last read) count: one that had
    /// already passed then was acted on by that look, or needs nothing, and waking for it again
    /// would spin (e.g. while blocked on the provider with the retry text still showing).
    fn next_deadline(&self, looked_at: Instant) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        let mut wake = far;
        let mut consider = |at: Option<Instant>| {
            if let Some(at) = at.filter(|at| *at > looked_at) {
                wake = wake.min(at);
            }
        };
        if matches!(
            self.state.status,
            LaneStatus::Spawning | LaneStatus::TrustRequired
        ) {
            consider(Some(self.boot_deadline));
        }
        consider(self.idle_since.map(|t| t + self.settings.finish_idle));
        consider(
            self.provider_since
                .map(|t| t + self.settings.provider_block),
        );
        consider(self.receipt.retry_at());
        consider(self.receipt.submit_at());
        consider(self.held_until);
        consider(
            self.unknown_screen.deadline(
                Instant::now(),
                self.settings.unknown_screen,
                self.progress
                    .idle_for(clawpool_lanes::state_file::now_secs()),
            ),
        );
        if let Some(check) = &self.check {
            consider(check.within.map(|within| check.started + within));
        } else if let (Some(after), LaneStatus::Running) = (self.stall_after, self.state.status) {
            let idle = self
                .progress
                .idle_for(clawpool_lanes::state_file::now_secs());
            consider(Some(
                Instant::now() + after.saturating_sub(idle) + Duration::from_secs(1),
            ));
        }
        wake
    }

    /// Reacts to one observation of the screen.
    async fn step(&mut self, seen: Observation) {
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
            self.confine_store();
        }
        match &seen.seen {
            Seen::Dialog { name, dialog } => self.on_dialog(name, *dialog, evidence).await,
            Seen::Signal {
                signal: Signal::Shell,
            } => self.on_shell(evidence).await,
            Seen::Signal {
                signal: Signal::ProviderRetry,
            } => self.on_provider_retry(evidence),
            Seen::Signal {
                signal: Signal::Working,
            } => self.on_working(evidence),
            Seen::Idle => self.on_idle(evidence).await,
            Seen::Draft { text } => self.on_draft(text, evidence).await,
            Seen::Signal {
                signal: Signal::Booting,
            }
            | Seen::Unknown => self.on_unrecognised(evidence),
        }
    }

    async fn on_dialog(&mut self, name: &str, kind: DialogKind, evidence: Evidence) {
        let Some(dialog) = self.profile.dialog(name).cloned() else {
            return;
        };
        let (pending, subphase) = match kind {
            DialogKind::Trust => (
                LaneState::plain(LaneStatus::TrustRequired),
                BlockedSubphase::TrustPrompt,
            ),
            DialogKind::ToolPermission => (
                LaneState::plain(LaneStatus::ToolPermissionRequired),
                BlockedSubphase::ToolPermission,
            ),
            DialogKind::Boot => (self.state, BlockedSubphase::BootDialog),
        };
        if self.waiting_dialog.as_deref() == Some(name) {
            return; // Still waiting for the operator.
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
        if self.state == LaneState::blocked(subphase)
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
            if self.state.status == LaneStatus::PromptAccepted {
                self.transition(
                    LaneState::plain(LaneStatus::Running),
                    Some(evidence.clone()),
                );
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
        let attempts = self.answer_attempts.entry(name.to_owned()).or_default();
        match automatic {
            Some(choice) if *attempts < MAX_ANSWERS_PER_DIALOG => {
                *attempts += 1;
                let attempt = *attempts;
                if kind == DialogKind::Trust {
                    self.guard_store();
                }
                let answered = answer::answer(&self.worker, self.profile, &dialog, &choice).await;
                let resolved = answered.is_ok() && kind == DialogKind::Trust;
                self.event(
                    "lane.dialog_answered",
                    None,
                    None,
                    Some(evidence.clone()),
                    answered_detail(name, &choice, "policy", attempt, answered),
                );
                if resolved {
                    let method = match self.lane.trust {
                        TrustGate::ByOperator => "operator_earlier",
                        _ => "auto_allowlisted",
                    };
                    self.trust_resolved(method, evidence);
                }
            }
            _ => {
                self.waiting_dialog = Some(name.to_owned());
                self.transition(LaneState::blocked(subphase), Some(evidence));
            }
        }
    }

    async fn on_shell(&mut self, evidence: Evidence) {
        let target = delivery::misdelivery_target(&evidence.matched, &self.lane.cwd);
        self.event(
            "lane.prompt_misdelivery",
            None,
            None,
            Some(evidence.clone()),
            serde_json::json!({"target": target, "prompt_sent": self.receipt.submitted()}),
        );
        self.transition(
            LaneState::failed(FailureClass::PromptDelivery),
            Some(evidence),
        );
    }

    fn on_provider_retry(&mut self, evidence: Evidence) {
        let since = *self.provider_since.get_or_insert_with(Instant::now);
        if self.state.status == LaneStatus::ReadyForPrompt && self.receipt.submitted() {
            // The agent took the prompt and is trying to reach its provider with it.
            self.accept(evidence.clone());
        }
        if self.state.status == LaneStatus::PromptAccepted {
            self.transition(
                LaneState::plain(LaneStatus::Running),
                Some(evidence.clone()),
            );
        }
        if since.elapsed() >= self.settings.provider_block
            && self.state != LaneState::blocked(BlockedSubphase::Provider)
        {
            self.transition(
                LaneState::blocked(BlockedSubphase::Provider),
                Some(evidence),
            );
        }
    }

    fn on_working(&mut self, evidence: Evidence) {
        self.waiting_dialog = None;
        match self.state.status {
            LaneStatus::Blocked
                if self.check.is_some()
                    && self.state.subphase == Some(BlockedSubphase::Stalled) =>
            {
                // Still working on screen is what it was stalled at; only progress unblocks.
            }
            LaneStatus::PromptAccepted
            | LaneStatus::ToolPermissionRequired
            | LaneStatus::Blocked => {
                if self.receipt.accepted_at.is_some() {
                    self.transition(LaneState::plain(LaneStatus::Running), Some(evidence));
                }
            }
            LaneStatus::Spawning | LaneStatus::TrustRequired | LaneStatus::ReadyForPrompt => {
                // Working before anything was typed: the prompt went in at launch.
                if self.receipt.awaiting_launch_prompt() {
                    self.receipt.accept("(launch argument)");
                    self.transition(
                        LaneState::plain(LaneStatus::PromptAccepted),
                        Some(evidence.clone()),
                    );
                    self.transition(LaneState::plain(LaneStatus::Running), Some(evidence));
                } else if self.receipt.submitted() {
                    let echo =
                        delivery::echoed(&self.worker.snapshot(), self.profile, &self.receipt);
                    self.accept(match echo {
                        Some(preview) => Evidence {
                            rule: "prompt_echo".into(),
                            region: "screen".into(),
                            matched: preview,
                        },
                        None => evidence.clone(),
                    });
                    self.transition(LaneState::plain(LaneStatus::Running), Some(evidence));
                }
            }
            LaneStatus::Running => {}
            LaneStatus::Finished | LaneStatus::Failed => {}
        }
    }

    async fn on_idle(&mut self, evidence: Evidence) {
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
        match self.state.status {
            LaneStatus::Spawning | LaneStatus::TrustRequired => {
                if self.receipt.awaiting_launch_prompt() {
                    // The prompt went in at launch; the agent shows its input before it starts
                    // (or after it already finished with it).
                    self.transition(LaneState::plain(LaneStatus::ReadyForPrompt), Some(evidence));
                    self.check_launch_echo();
                    return;
                }
                self.transition(LaneState::plain(LaneStatus::ReadyForPrompt), Some(evidence));
                self.deliver().await;
            }
            LaneStatus::ReadyForPrompt => {
                if self.receipt.submitted() {
                    // Enter was pressed and the input is empty: accepted if the prompt shows.
                    if let Some(preview) =
                        delivery::echoed(&self.worker.snapshot(), self.profile, &self.receipt)
                    {
                        self.accept(Evidence {
                            rule: "prompt_echo".into(),
                            region: "screen".into(),
                            matched: preview,
                        });
                        self.idle_since = Some(Instant::now());
                    }
                } else if self.receipt.awaiting_launch_prompt() {
                    self.check_launch_echo();
                } else {
                    self.deliver().await;
                }
            }
            LaneStatus::PromptAccepted
            | LaneStatus::Running
            | LaneStatus::Blocked
            | LaneStatus::ToolPermissionRequired => {
                if self.state.status == LaneStatus::ToolPermissionRequired {
                    // The permission was answered and the agent carried on.
                    self.transition(
                        LaneState::plain(LaneStatus::Running),
                        Some(evidence.clone()),
                    );
                }
                if !self.followups.is_empty() {
                    // Idle with more to say: the next text, instead of finishing.
                    self.transition(LaneState::plain(LaneStatus::ReadyForPrompt), Some(evidence));
                    self.deliver().await;
                    return;
                }
                // Back at its idle input after taking the prompt: done once it stays idle.
                let since = *self.idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= self.settings.finish_idle {
                    self.transition(LaneState::plain(LaneStatus::Finished), Some(evidence));
                }
            }
            LaneStatus::Finished | LaneStatus::Failed => {}
        }
    }

    async fn on_draft(&mut self, text: &str, evidence: Evidence) {
        self.reached_ready = true;
        if self.state.status == LaneStatus::Spawning
            || self.state.status == LaneStatus::TrustRequired
        {
            // A draft nobody here typed: the input is not free, so the lane is not ready.
            if Instant::now() >= self.boot_deadline {
                self.transition(
                    LaneState::blocked(BlockedSubphase::PromptDelivery),
                    Some(evidence),
                );
            }
            return;
        }
        if self.state.status != LaneStatus::ReadyForPrompt {
            // More to say, and the line holds text (one the agent put back after an interrupt,
            // or anything else): it is emptied first, so nothing is typed on top of it.
            if !self.followups.is_empty() && self.receipt.accepted_at.is_some() {
                self.clear_input_for_followup(text, evidence).await;
            }
            return;
        }
        if self.followup_round && !self.receipt.submitted() && !self.receipt.matches_draft(text) {
            if self.receipt.draft_arriving(text) {
                return; // Our text, still arriving.
            }
            // Not (only) ours: text the agent put into the line before or while we typed.
            // Empty the line and type the text again; Enter only on exactly the text sent.
            if self.clear_input(text, evidence.clone()).await {
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
            self.submit(evidence).await;
        } else if self.receipt.retry_due() {
            if self.receipt.submits() >= self.settings.max_submit_attempts {
                self.transition(
                    LaneState::blocked(BlockedSubphase::PromptDelivery),
                    Some(evidence),
                );
            } else {
                self.submit(evidence).await;
            }
        }
    }

    /// The input line holds text while more is queued (Claude Code puts an interrupted prompt
    /// back): empty it with the profile's keys, so the next text is not typed on top of it.
    /// When it cannot be emptied (no `clear_keys`, or still not empty after
    /// [`MAX_INPUT_CLEARS`] tries), nothing is typed: the queued texts are refused.
    async fn clear_input_for_followup(&mut self, draft: &str, evidence: Evidence) {
        if self.clear_input(draft, evidence).await {
            return;
        }
        let reason = self.uncleared_reason(draft);
        while let Some(Followup { text, reply }) = self.followups.pop_front() {
            self.event(
                "lane.send_refused",
                None,
                None,
                None,
                serde_json::json!({"chars": text.chars().count(), "draft": draft, "reason": reason}),
            );
            if let Some(reply) = reply {
                reply.send(Verdict::Refused {
                    reason: reason.clone(),
                    choices: Vec::new(),
                });
            }
        }
    }

    /// The text being delivered met a line that would not empty: it is not sent, and the lane
    /// is blocked on delivery with the line's text as evidence.
    fn refuse_round(&mut self, draft: &str, evidence: Evidence) {
        let reason = self.uncleared_reason(draft);
        self.event(
            "lane.send_refused",
            None,
            None,
            None,
            serde_json::json!({"draft": draft, "reason": reason}),
        );
        if let Some(reply) = self.round_reply.take() {
            reply.send(Verdict::Refused {
                reason,
                choices: Vec::new(),
            });
        }
        self.transition(
            LaneState::blocked(BlockedSubphase::PromptDelivery),
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
    /// cannot (no keys, this round's clears used up, the terminal is gone).
    async fn clear_input(&mut self, draft: &str, evidence: Evidence) -> bool {
        let keys = &self.profile.input.clear_keys;
        if keys.is_empty() || self.input_clears >= MAX_INPUT_CLEARS {
            return false;
        }
        self.input_clears += 1;
        for key in keys.clone() {
            if self
                .worker
                .send(&clawpool_pty::Input::Key(key))
                .await
                .is_err()
            {
                return false;
            }
        }
        self.event(
            "lane.input_cleared",
            None,
            None,
            Some(evidence),
            serde_json::json!({
                "draft": draft,
                "keys": keys.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
        );
        true
    }

    fn on_unrecognised(&mut self, evidence: Evidence) {
        if matches!(
            self.state.status,
            LaneStatus::Spawning | LaneStatus::TrustRequired
        ) && Instant::now() >= self.boot_deadline
        {
            let text = self.worker.snapshot().text();
            let subphase = if text.trim().is_empty() {
                BlockedSubphase::PromptDelivery
            } else {
                BlockedSubphase::UnknownDialog
            };
            self.transition(
                LaneState::blocked(subphase),
                Some(Evidence {
                    matched: screen_excerpt(&text),
                    ..evidence
                }),
            );
        }
    }

    fn on_exit(&mut self, status: ExitStatus) {
        let evidence = Evidence {
            rule: "process_exit".into(),
            region: "process".into(),
            matched: status.to_string(),
        };
        let state = match status {
            ExitStatus::Exited(0) => LaneState::plain(LaneStatus::Finished),
            ExitStatus::Lost => LaneState::failed(FailureClass::WorkerLost),
            _ if self.receipt.submitted() && self.receipt.accepted_at.is_none() => {
                self.event(
                    "lane.prompt_misdelivery",
                    None,
                    None,
                    Some(evidence.clone()),
                    serde_json::json!({"target": "shell", "reason": "the agent process is gone"}),
                );
                LaneState::failed(FailureClass::PromptDelivery)
            }
            _ => LaneState::failed(FailureClass::WorkerCrashed),
        };
        if !self.state.status.is_terminal() {
            self.transition(state, Some(evidence));
        }
    }

    /// Carries out an operator's command and sends its verdict back (a restart's and a text's
    /// verdict come later: when the new worker started, when the text was submitted).
    async fn on_operator(&mut self, request: OperatorRequest) {
        let OperatorRequest { command, reply } = request;
        let verdict = match &command {
            OperatorCommand::Send { .. } if !self.lane.trust.is_open() => Verdict::Refused {
                reason: format!(
                    "nothing is typed into this lane: {}",
                    gate_reason(&self.lane.name)
                ),
                choices: Vec::new(),
            },
            OperatorCommand::Send { text } => return self.queue_followup(text.clone(), reply),
            OperatorCommand::Stop => self.stop_by_operator().await,
            OperatorCommand::Restart(restart) => {
                self.restart(restart.clone()).await;
                self.restart_reply = Some(reply);
                return;
            }
            OperatorCommand::Trust | OperatorCommand::Answer { .. } => {
                self.answer_by_operator(&command).await
            }
        };
        let kind = match &verdict {
            Verdict::Ignored { .. } => Some("lane.operator_ignored"),
            Verdict::Refused { .. } => Some("lane.operator_refused"),
            // A dialog answered or not is in `lane.dialog_answered`; a stop in the transition.
            Verdict::Done { .. } | Verdict::Failed { .. } => None,
        };
        if let Some(kind) = kind {
            let mut detail = serde_json::json!({
                "command": command.describe(),
                "reason": verdict.reason(),
            });
            if let Verdict::Refused { choices, .. } = &verdict
                && !choices.is_empty()
            {
                detail["choices"] = serde_json::json!(choices);
            }
            self.event(kind, None, None, None, detail);
        }
        reply.send(verdict);
    }

    /// `clawpool trust` and `clawpool answer`: the dialog on screen answered with the choice.
    async fn answer_by_operator(&mut self, command: &OperatorCommand) -> Verdict {
        let snapshot = self.worker.snapshot();
        let seen = observe(self.profile, &snapshot);
        let trust_dialog_shown = matches!(
            seen.seen,
            Seen::Dialog {
                dialog: DialogKind::Trust,
                ..
            }
        );
        if *command == OperatorCommand::Trust && !trust_dialog_shown && !self.lane.trust.is_open() {
            return self.open_gate_by_operator();
        }
        let Seen::Dialog { name, dialog } = &seen.seen else {
            return Verdict::Ignored {
                reason: format!(
                    "no dialog on screen (the lane is {}); nothing was pressed",
                    self.state
                ),
            };
        };
        let Some(spec) = self.profile.dialog(name).cloned() else {
            return Verdict::Ignored {
                reason: format!(
                    "dialog {name:?} is not in the {} profile",
                    self.profile.name()
                ),
            };
        };
        let choices: Vec<String> = spec.choices.keys().cloned().collect();
        let choice = match (command, dialog) {
            (OperatorCommand::Trust, DialogKind::Trust) => "yes".to_owned(),
            (OperatorCommand::Answer { choice }, _) => choice.clone(),
            (_, _) => {
                return Verdict::Refused {
                    reason: format!(
                        "the dialog on screen is {name:?}, not a trust dialog; answer it with \
                         `clawpool answer LANE --choice CHOICE` (choices: {})",
                        choices.join(", ")
                    ),
                    choices,
                };
            }
        };
        if spec.policy == Policy::Never && *dialog != DialogKind::Trust {
            return Verdict::Refused {
                reason: format!(
                    "dialog {name:?} has policy never: clawpool never answers it; answer it in \
                     the lane's terminal"
                ),
                choices: Vec::new(),
            };
        }
        if !spec.choices.contains_key(&choice) {
            return Verdict::Refused {
                reason: format!(
                    "dialog {name:?} has no choice {choice:?}; its choices are: {}",
                    choices.join(", ")
                ),
                choices,
            };
        }
        if *dialog == DialogKind::Trust {
            self.guard_store();
        }
        let answered = answer::answer(&self.worker, self.profile, &spec, &choice).await;
        let verdict = match &answered {
            Ok(()) => Verdict::done(format!("answered dialog {name:?} with {choice:?}")),
            Err(error) => Verdict::Failed {
                reason: format!("answering dialog {name:?} with {choice:?}: {error}"),
            },
        };
        let resolved = answered.is_ok() && *dialog == DialogKind::Trust && choice == "yes";
        if resolved && !self.lane.trust.is_open() {
            self.lane.trust = TrustGate::ByOperator;
        }
        self.event(
            "lane.dialog_answered",
            None,
            None,
            None,
            answered_detail(name, &choice, "operator", 1, answered),
        );
        self.waiting_dialog = None;
        if resolved {
            let evidence = Evidence {
                rule: name.clone(),
                region: "operator".into(),
                matched: "clawpool trust".into(),
            };
            self.trust_resolved("manual", evidence);
        }
        // Back to the state the dialog interrupted; the next observation moves on from there.
        let resumed = match *dialog {
            DialogKind::Trust => LaneState::plain(LaneStatus::TrustRequired),
            DialogKind::ToolPermission => LaneState::plain(LaneStatus::ToolPermissionRequired),
            DialogKind::Boot if self.receipt.accepted_at.is_some() => {
                LaneState::plain(LaneStatus::Running)
            }
            DialogKind::Boot => LaneState::plain(LaneStatus::Spawning),
        };
        self.transition(resumed, None);
        verdict
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
        if self.state == LaneState::blocked(BlockedSubphase::TrustPrompt) {
            self.transition(LaneState::plain(LaneStatus::TrustRequired), None);
        }
        Verdict::done(format!(
            "trusted lane {}: clawpool drives it from now on",
            self.lane.name
        ))
    }

    /// Holds a lane nobody trusted where clawpool would otherwise type or answer:
    /// `blocked{trust_prompt}`, waiting for `clawpool trust`.
    fn hold_at_gate(&mut self, evidence: Evidence) {
        let held = LaneState::blocked(BlockedSubphase::TrustPrompt);
        if self.state == held {
            return;
        }
        if matches!(
            self.state.status,
            LaneStatus::Spawning | LaneStatus::ReadyForPrompt
        ) {
            self.transition(LaneState::plain(LaneStatus::TrustRequired), None);
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

    /// Notes the agent's trust store before clawpool answers a trust dialog.
    fn guard_store(&mut self) {
        let Some(store) = self.lane.store.as_mut() else {
            return;
        };
        match store.before_answer() {
            Ok(()) => self.confine_pending = true,
            Err(err) => {
                let file = store.file().display().to_string();
                self.event(
                    "lane.trust_store_confined",
                    None,
                    None,
                    None,
                    serde_json::json!({"store": file, "error": err.to_string()}),
                );
            }
        }
    }

    fn confine_store(&mut self) {
        if let Some(store) = &self.lane.store {
            confine_trust_store(store, self.events);
        }
    }

    fn queue_followup(&mut self, text: String, reply: VerdictReply) {
        self.followups.push_back(Followup {
            text,
            reply: Some(reply),
        });
        self.event(
            "lane.send_queued",
            None,
            None,
            None,
            serde_json::json!({"queued": self.followups.len()}),
        );
    }

    /// Whether the agent has nothing left to do: its prompt (if any) was taken and it is idle.
    fn is_idle_and_done(&self) -> bool {
        let prompt_done = self.receipt.method == "none" || self.receipt.accepted_at.is_some();
        let idle = self.state.status == LaneStatus::ReadyForPrompt
            || (self.idle_since.is_some() && self.state.status != LaneStatus::Blocked);
        prompt_done && idle && self.followups.is_empty()
    }

    async fn stop_by_operator(&mut self) -> Verdict {
        let done = self.is_idle_and_done() && !self.dropped_turn;
        self.worker.stop(STOP_GRACE).await;
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
        let to = match self.state.subphase {
            _ if done => LaneState::plain(LaneStatus::Finished),
            // Stopped while blocked: it failed for what blocked it (a stall, the provider…).
            Some(subphase) if self.state.status == LaneStatus::Blocked => {
                LaneState::failed(subphase.failure_class())
            }
            _ => LaneState::failed(FailureClass::Infra),
        };
        self.transition(to, Some(evidence));
        self.next = Some(Next::Done);
        Verdict::done(format!("stopped: the worker ended and the lane is {to}"))
    }

    async fn restart(&mut self, request: RestartRequest) {
        self.event(
            "lane.restart_requested",
            None,
            None,
            None,
            serde_json::to_value(&request).unwrap_or_default(),
        );
        self.worker.stop(STOP_GRACE).await;
        self.next = Some(Next::Restart(request));
    }

    /// A launch prompt the agent worked through between two looks: its echo above the idle
    /// input proves it took it.
    fn check_launch_echo(&mut self) {
        if let Some(preview) =
            delivery::echoed(&self.worker.snapshot(), self.profile, &self.receipt)
        {
            self.accept(Evidence {
                rule: "prompt_echo".into(),
                region: "screen".into(),
                matched: preview,
            });
            self.idle_since = Some(Instant::now());
        }
    }

    /// Types the prompt (or the task-file line) into an idle input line; once the prompt was
    /// taken, the next text sent by an operator.
    async fn deliver(&mut self) {
        if !self.lane.trust.is_open() {
            return;
        }
        if self.receipt.text_to_type().is_none()
            && (self.receipt.method == "none" || self.receipt.accepted_at.is_some())
        {
            self.next_followup();
        }
        let Some(text) = self.receipt.text_to_type() else {
            return;
        };
        if self.delivery_held() {
            return;
        }
        if let Err(err) = self
            .worker
            .send(&clawpool_pty::Input::Text(text.clone()))
            .await
        {
            self.transition(
                LaneState::failed(FailureClass::PromptDelivery),
                Some(Evidence {
                    rule: "send".into(),
                    region: "terminal".into(),
                    matched: err.to_string(),
                }),
            );
            return;
        }
        self.receipt.typed();
        self.event(
            "lane.prompt_typed",
            None,
            None,
            None,
            serde_json::json!({"chars": text.chars().count(), "method": self.receipt.method}),
        );
    }

    /// Whether a git operation paused in the lane's worktree (a rebase, merge, cherry-pick,
    /// revert or `git am` stopped part-way) holds delivery: its HEAD and index are mid-change,
    /// so no new work goes in until someone finishes or aborts it. Looked at again every
    /// [`HOLD_RECHECK`] while held; a folder that is not a git worktree holds nothing.
    fn delivery_held(&mut self) -> bool {
        let now = Instant::now();
        if self.held_until.is_some_and(|until| now < until) {
            return true;
        }
        let paused = clawpool_worktree::git_operation(&self.lane.cwd)
            .ok()
            .flatten()
            .filter(|op| op.paused);
        match (paused, self.held_until) {
            (Some(op), held) => {
                if held.is_none() {
                    self.event(
                        "lane.delivery_held",
                        None,
                        None,
                        None,
                        serde_json::json!({"operation": op}),
                    );
                }
                self.held_until = Some(now + HOLD_RECHECK);
                true
            }
            (None, Some(_)) => {
                self.held_until = None;
                self.event(
                    "lane.delivery_resumed",
                    None,
                    None,
                    None,
                    serde_json::json!({}),
                );
                false
            }
            (None, None) => false,
        }
    }

    /// Starts delivering the next queued text, with a receipt of its own.
    fn next_followup(&mut self) {
        let Some(Followup { text, reply }) = self.followups.pop_front() else {
            return;
        };
        let plan = match delivery::plan_followup(&text, &self.settings, &self.lane.cwd) {
            Ok(plan) => plan,
            Err(err) => {
                let error = format!("writing the task file: {err}");
                self.event(
                    "lane.send_failed",
                    None,
                    None,
                    None,
                    serde_json::json!({"error": error}),
                );
                if let Some(reply) = reply {
                    reply.send(Verdict::Failed { reason: error });
                }
                return;
            }
        };
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
        self.event(
            "lane.prompt_round",
            None,
            None,
            None,
            serde_json::json!({"method": self.receipt.method, "chars": text.chars().count()}),
        );
    }

    /// Presses Enter on our draft. The press is recorded just before it is made: a supervisor
    /// killed in between leaves a lane whose adopter presses Enter again on the draft still
    /// there, where one killed just after an unrecorded press would have its adopter type the
    /// prompt a second time into an agent that already took it.
    async fn submit(&mut self, evidence: Evidence) {
        self.receipt
            .submitted_now(self.settings.accept_timeout / self.settings.max_submit_attempts.max(1));
        self.event(
            "lane.prompt_sent",
            None,
            None,
            Some(evidence.clone()),
            serde_json::json!({"attempt": self.receipt.attempts}),
        );
        if let Err(err) = self
            .worker
            .send(&clawpool_pty::Input::Key(clawpool_pty::Key::Enter))
            .await
        {
            self.transition(
                LaneState::failed(FailureClass::PromptDelivery),
                Some(Evidence {
                    matched: err.to_string(),
                    ..evidence
                }),
            );
            return;
        }
        if let Some(reply) = self.round_reply.take() {
            reply.send(Verdict::Done {
                reason: "delivered: typed into the agent's empty input line, checked to be \
                         exactly the text sent, and submitted"
                    .into(),
                send: Some(SendFate::Delivered),
            });
        }
    }

    fn accept(&mut self, evidence: Evidence) {
        if self.receipt.accepted_at.is_some() {
            return;
        }
        self.receipt.accept(&evidence.matched);
        self.dropped_turn = false;
        self.transition(LaneState::plain(LaneStatus::PromptAccepted), Some(evidence));
    }

    fn trust_resolved(&mut self, method: &str, evidence: Evidence) {
        self.event(
            "lane.trust_resolved",
            None,
            None,
            Some(evidence),
            serde_json::json!({"method": method}),
        );
    }

    fn transition(&mut self, to: LaneState, evidence: Option<Evidence>) {
        if to == self.state {
            return;
        }
        let from = self.state;
        self.state = to;
        let kind = to.status.transition_kind();
        let detail = match to.status {
            LaneStatus::PromptAccepted => serde_json::to_value(&self.receipt).unwrap_or_default(),
            _ => serde_json::Value::Null,
        };
        self.event(kind, Some(from), Some(to), evidence, detail);
        if to.status == LaneStatus::Blocked
            && self.recover_blocked
            && self.check.is_none()
            && self.next.is_none()
        {
            // What recovery can heal is decided in one place, for the driver, `policy
            // explain` and `recover` alike; a question for a person goes to the policy as is.
            self.next = match Trigger::of(to, self.receipt.submitted()) {
                Some(trigger) => Some(Next::Recover(trigger)),
                None => match to.subphase {
                    Some(
                        BlockedSubphase::TrustPrompt
                        | BlockedSubphase::ToolPermission
                        | BlockedSubphase::BootDialog,
                    ) => Some(Next::Blocked),
                    _ => None,
                },
            };
        }
    }

    fn event(
        &self,
        kind: &str,
        from: Option<LaneState>,
        to: Option<LaneState>,
        evidence: Option<Evidence>,
        detail: serde_json::Value,
    ) {
        if let Err(err) = self.events.record(kind, from, to, evidence, detail) {
            tracing::warn!(lane = %self.lane.name, error = %err, "could not record a lane event");
        }
    }
}

/// Withdraws what the agent recorded in its trust store beyond the lane since clawpool answered
/// its trust dialog (see [`crate::trust::confine`]), recording what changed as
/// `lane.trust_store_confined`. Nothing when clawpool answered no trust dialog.
pub fn confine_trust_store(store: &StoreGuard, events: &EventLog) {
    if !store.answered() {
        return;
    }
    let file = store.file().display().to_string();
    let detail = match store.confine() {
        Ok(confined) if !confined.written => return,
        Ok(confined) => serde_json::json!({"store": file, "revoked": confined.revoked}),
        Err(err) => serde_json::json!({"store": file, "error": err.to_string()}),
    };
    let _ = events.record("lane.trust_store_confined", None, None, None, detail);
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

fn answered_detail(
    dialog: &str,
    choice: &str,
    by: &str,
    attempt: u32,
    answered: Result<(), String>,
) -> serde_json::Value {
    let mut detail = serde_json::json!({
        "dialog": dialog, "choice": choice, "by": by, "attempt": attempt,
        "completed": answered.is_ok(),
    });
    if let Err(error) = answered {
        detail["error"] = error.into();
    }
    detail
}
