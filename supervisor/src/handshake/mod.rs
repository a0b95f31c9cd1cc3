//! The boot handshake: from "process started" to "prompt accepted", and on to finished.
//!
//! [`Handshake::run`] owns one lane's worker. It wakes on screen changes, the worker's exit,
//! operator commands and its own deadlines; each time it reads the screen through the profile
//! ([`crate::detect::observe`]) and moves the lane through `spawning → trust_required →
//! ready_for_prompt → prompt_accepted → running → finished`, or to `blocked{…}` /
//! `failed{…}`. Every transition is a [`clawpool_lanes::LaneEvent`] with its evidence.
//!
//! What it will and will not type:
//! - a dialog is answered only when its policy is `auto` (trust dialogs: only when the lane
//!   is under a trusted root), or when an operator says so, and never when it is `never`;
//! - the prompt is typed only into an idle input line (`ready_for_prompt`), never into a
//!   screen that looks like a shell, and never a second time while the first copy is still in
//!   the input line (only Enter is pressed again);
//! - `prompt_accepted` needs proof on screen: the draft left the input line and the prompt was
//!   echoed or a working indicator appeared.

mod answer;
mod delivery;
mod external;

use std::path::PathBuf;
use std::time::Duration;

use clawpool_lanes::{BlockedSubphase, EventLog, Evidence, FailureClass, LaneState, LaneStatus};
use clawpool_pty::{ExitStatus, Worker};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::detect::{Observation, Seen, observe};
use crate::profiles::{DialogKind, Policy, Profile, Signal};

pub use delivery::{PromptPlan, Receipt, check_prompt, plan_prompt};
pub use external::ExternalProgress;

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
    /// The worker is alive but needs a recovery recipe (the trigger's name, e.g. `stalled`).
    Recover(String),
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

/// The lane as the handshake sees it.
#[derive(Debug, Clone)]
pub struct LaneContext {
    /// The lane's name.
    pub name: String,
    /// Its folder (canonical).
    pub cwd: PathBuf,
    /// Whether trust dialogs may be answered automatically (under a trusted root).
    pub trusted: bool,
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
}

/// One lane's handshake.
pub struct Handshake<'a> {
    worker: Worker,
    profile: &'a Profile,
    lane: LaneContext,
    settings: Settings,
    events: &'a EventLog,
    operator: &'a mut mpsc::Receiver<OperatorCommand>,
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
    followups: std::collections::VecDeque<String>,
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
    /// Progress the lane makes off its screen (worktree changes, commits).
    external: Option<ExternalProgress>,
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
        operator: &'a mut mpsc::Receiver<OperatorCommand>,
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
            external: None,
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
        self.followups.extend(texts);
        self
    }

    /// Continues the prompt count of an earlier worker of the same lane: a prompt delivered
    /// again after a restart is attempt `attempts + 1`.
    pub fn after_attempts(mut self, attempts: u32) -> Self {
        self.receipt.continue_count(attempts);
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
            self.step(seen).await;
            self.check_stall(&snapshot.rows);
            if self.state.status.is_terminal() || self.next.is_some() {
                break;
            }
            let wake = self.next_deadline(looked_at);
            tokio::select! {
                more = changes.changed(), if output_open => output_open = more,
                _ = self.worker.wait(), if !output_open => {}
                command = self.operator.recv() => {
                    if let Some(command) = command {
                        self.on_operator(command).await;
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
        Outcome {
            state: self.state,
            receipt: self.receipt,
            exit: self.worker.exit_status().map(|s| s.to_string()),
            next: self.next.unwrap_or(Next::Done),
            reached_ready: self.reached_ready,
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
            self.next = Some(Next::Recover("stalled".into()));
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
        consider(self.held_until);
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
        let answerable = match kind {
            DialogKind::Trust => self.lane.trusted,
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
            DialogKind::Trust => self.lane.trusted.then_some("yes".to_owned()),
            _ => (dialog.policy == Policy::Auto)
                .then(|| dialog.answer.clone())
                .flatten(),
        };
        let attempts = self.answer_attempts.entry(name.to_owned()).or_default();
        match automatic {
            Some(choice) if *attempts < MAX_ANSWERS_PER_DIALOG => {
                *attempts += 1;
                let attempt = *attempts;
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
                    self.trust_resolved("auto_allowlisted", evidence);
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
        self.waiting_dialog = None;
        self.reached_ready = true;
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
            if !self.followups.is_empty()
                && self.receipt.accepted_at.is_some()
                && self.receipt.matches_draft(text)
            {
                self.clear_returned_draft(text, evidence).await;
            }
            return;
        }
        if !self.receipt.matches_draft(text) {
            return;
        }
        if !self.receipt.submitted() {
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

    /// The agent put text it had taken back into its input line (Claude Code does with an
    /// interrupted prompt) while more is queued: empty the line with the profile's keys, so
    /// the next text is not typed on top of it. Never anything but our own accepted text.
    async fn clear_returned_draft(&mut self, draft: &str, evidence: Evidence) {
        let keys = &self.profile.input.clear_keys;
        if keys.is_empty() || self.input_clears >= MAX_INPUT_CLEARS {
            return;
        }
        self.input_clears += 1;
        for key in keys.clone() {
            if self
                .worker
                .send(&clawpool_pty::Input::Key(key))
                .await
                .is_err()
            {
                return;
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
            let excerpt: String = text
                .lines()
                .rev()
                .filter(|l| !l.trim().is_empty())
                .take(6)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            self.transition(
                LaneState::blocked(subphase),
                Some(Evidence {
                    matched: excerpt,
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

    async fn on_operator(&mut self, command: OperatorCommand) {
        match command {
            OperatorCommand::Send { text } => return self.queue_followup(text),
            OperatorCommand::Stop => return self.stop_by_operator().await,
            OperatorCommand::Restart(request) => return self.restart(request).await,
            OperatorCommand::Trust | OperatorCommand::Answer { .. } => {}
        }
        let snapshot = self.worker.snapshot();
        let seen = observe(self.profile, &snapshot);
        let Seen::Dialog { name, dialog } = &seen.seen else {
            self.event(
                "lane.operator_ignored",
                None,
                None,
                None,
                serde_json::json!({"command": format!("{command:?}"), "reason": "no dialog on screen"}),
            );
            return;
        };
        let choice = match (&command, dialog) {
            (OperatorCommand::Trust, DialogKind::Trust) => "yes".to_owned(),
            (OperatorCommand::Answer { choice }, _) => choice.clone(),
            (_, _) => {
                self.event(
                    "lane.operator_ignored",
                    None,
                    None,
                    None,
                    serde_json::json!({"command": "trust", "reason": format!("the dialog on screen is {name:?}, not a trust dialog")}),
                );
                return;
            }
        };
        let Some(spec) = self.profile.dialog(name).cloned() else {
            return;
        };
        if spec.policy == Policy::Never && *dialog != DialogKind::Trust {
            self.event(
                "lane.operator_ignored",
                None,
                None,
                None,
                serde_json::json!({"command": format!("{command:?}"), "reason": format!("dialog {name:?} has policy never")}),
            );
            return;
        }
        let answered = answer::answer(&self.worker, self.profile, &spec, &choice).await;
        let resolved = answered.is_ok() && *dialog == DialogKind::Trust && choice == "yes";
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
    }

    fn queue_followup(&mut self, text: String) {
        self.followups.push_back(text);
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

    async fn stop_by_operator(&mut self) {
        let done = self.is_idle_and_done();
        self.worker.stop(STOP_GRACE).await;
        let evidence = Evidence {
            rule: "operator_stop".into(),
            region: "operator".into(),
            matched: if done {
                "clawpool stop (the agent was idle with its work done)".into()
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
        let Some(text) = self.followups.pop_front() else {
            return;
        };
        let plan = match delivery::plan_followup(&text, &self.settings, &self.lane.cwd) {
            Ok(plan) => plan,
            Err(err) => {
                self.event(
                    "lane.send_failed",
                    None,
                    None,
                    None,
                    serde_json::json!({"error": format!("writing the task file: {err}")}),
                );
                return;
            }
        };
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
        }
    }

    fn accept(&mut self, evidence: Evidence) {
        if self.receipt.accepted_at.is_some() {
            return;
        }
        self.receipt.accept(&evidence.matched);
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
        let kind = match to.status {
            LaneStatus::Spawning => "lane.spawning",
            LaneStatus::TrustRequired => "lane.trust_required",
            LaneStatus::ToolPermissionRequired => "lane.tool_permission_required",
            LaneStatus::ReadyForPrompt => "lane.ready",
            LaneStatus::PromptAccepted => "lane.prompt_accepted",
            LaneStatus::Running => "lane.running",
            LaneStatus::Blocked => "lane.blocked",
            LaneStatus::Finished => "lane.finished",
            LaneStatus::Failed => "lane.failed",
        };
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
            self.next = match to.subphase {
                Some(BlockedSubphase::Provider) => Some(Next::Recover("provider_down".into())),
                Some(BlockedSubphase::UnknownDialog) => {
                    Some(Next::Recover("unknown_dialog".into()))
                }
                Some(BlockedSubphase::PromptDelivery)
                    if self.receipt.submitted() && self.receipt.accepted_at.is_none() =>
                {
                    Some(Next::Recover("prompt_not_accepted".into()))
                }
                Some(
                    BlockedSubphase::TrustPrompt
                    | BlockedSubphase::ToolPermission
                    | BlockedSubphase::BootDialog,
                ) => Some(Next::Blocked),
                _ => None,
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
