//! The boot handshake: from "process started" to "prompt accepted", and on to finished.
//!
//! [`Handshake::run`] owns one lane's worker. It wakes on screen changes, the worker's exit,
//! operator commands and its own deadlines; each time it reads the screen through the profile
//! ([`clawpool_agents::detect::observe`]) and moves the lane through `spawning → trust_required →
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
pub mod machine;
mod unknown;
mod verdict;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use clawpool_lanes::payload::{Payload, TrustStoreConfined};
use clawpool_lanes::{EventLog, EventLogError, EventReport, LaneEvent, LaneEventKind, LaneState};
use clawpool_pty::Worker;
use clawpool_recovery::Trigger;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::channel::ChannelMessage;
use crate::interrupt::{Interrupt, StopSignal};
use crate::permission_gate::PermissionGate;
use clawpool_agents::profiles::Profile;
use clawpool_agents::trust::StoreGuard;
use machine::{Effect, Input, Machine, Record};

pub use delivery::{PromptPlan, Receipt, check_prompt, plan_prompt};
pub use external::ExternalProgress;
pub use verdict::{OperatorRequest, SendFate, Verdict, VerdictReply};

/// Timing and limits of the handshake (resolved from the `[handshake]` configuration).
pub use clawpool_agents::config::HandshakeSettings as Settings;

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
    /// Set the lane's budget (`clawpool budget`): a lane held over its old one takes a text
    /// again once its cost is within the new one.
    Budget {
        /// The new budget.
        usd: clawpool_lanes::payload::Usd,
    },
}

/// Why and how a lane's worker is started again: what `lane.restart_requested` records.
pub use clawpool_lanes::payload::RestartRequest;

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
    /// The lane's worker was already restarted once because it did not apply the trust
    /// clawpool gave it ([`TRUST_NOT_APPLIED`]): never again.
    pub restarted_to_apply_trust: bool,
    /// A tool-permission question the lane waited on for a person went away without
    /// clawpool's answer (`lane.dialog_answered_outside`): the lane is held
    /// `blocked{tool_permission}` — never running, finished or answered by its policy again —
    /// until an operator's text goes in (`clawpool send`) or a restart.
    pub answered_outside: bool,
    /// What the lane may cost, and whether it is held over it.
    pub budget: LaneBudget,
}

/// A lane's budget as the machine keeps it across runs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LaneBudget {
    /// The budget in US dollars (`budget_usd`); `None`: no budget.
    pub usd: Option<f64>,
    /// The lane is held `blocked{budget}`: its cost passed the budget and no text went in
    /// since (`clawpool send`, taken only within the budget).
    pub held: bool,
}

/// Who asks for a restart of an agent that saved the trust clawpool gave it but still does
/// not run trusted (`RestartRequest::by`).
pub const TRUST_NOT_APPLIED: &str = "trust_not_applied";

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
    /// Whether the lane is held for a person after a tool-permission question was answered
    /// outside clawpool ([`LaneContext::answered_outside`]): later runs keep holding it.
    #[serde(skip)]
    pub answered_outside: bool,
    /// The lane's budget as the run left it (raised, held): later runs keep it.
    #[serde(skip)]
    pub budget: LaneBudget,
    /// The supervisor was told to stop during the run, by this signal: the lane was failed
    /// for it (`supervisor_interrupted`) and its worker stopped.
    #[serde(skip)]
    pub interrupted: Option<StopSignal>,
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

/// What a new supervisor knows of a lane it adopts, from the lane's state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// One lane's handshake: the [`Machine`] that decides, and the worker, event log and operator
/// channel it decides for. This is the driver: it waits for the screen to change, the worker to
/// exit, an operator's command or the machine's deadline, hands that to the machine, and carries
/// out what the machine says, feeding the results of effects that have one straight back.
pub struct Handshake<'a> {
    machine: Machine<'a>,
    worker: Worker,
    profile: &'a Profile,
    cwd: PathBuf,
    /// The worktree's `.git` when the lane is a git worktree: gone, the worktree is.
    worktree_git: Option<PathBuf>,
    lane_name: String,
    events: &'a EventLog,
    operator: &'a mut mpsc::Receiver<OperatorRequest>,
    /// The agent's hook channel, for an agent that has one.
    hooks: Option<&'a mut mpsc::Receiver<ChannelMessage>>,
    /// The agent's trust store, kept to this lane when clawpool answers a trust dialog.
    store: Option<StoreGuard>,
    /// The event that opens the run: `lane.started`, `lane.adopted` (taken over from an
    /// earlier supervisor), or none when the same supervisor carries on with the same worker.
    opening: Option<LaneEventKind>,
    /// Progress the lane makes off its screen (worktree changes, commits).
    external: Option<ExternalProgress>,
    /// The lane's permission gate, when tool-permission dialogs go to its policy first.
    permissions: Option<PermissionGate>,
    /// The signals that stop the supervisor: the run ends the lane on one.
    interrupt: Interrupt,
    /// The lane's cost as usage arrives ([`Input::Cost`]), when it is priced.
    cost: Option<tokio::sync::watch::Receiver<Option<f64>>>,
    settings: Settings,
}

/// How long a worker has to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

impl<'a> Handshake<'a> {
    /// A handshake for a worker that has just been started.
    pub fn new(
        worker: Worker,
        profile: &'a Profile,
        mut lane: LaneContext,
        settings: Settings,
        events: &'a EventLog,
        operator: &'a mut mpsc::Receiver<OperatorRequest>,
    ) -> Self {
        let store = lane.store.take();
        let cwd = lane.cwd.clone();
        let worktree_git = Some(cwd.join(".git")).filter(|git| git.symlink_metadata().is_ok());
        let lane_name = lane.name.clone();
        Self {
            machine: Machine::new(
                profile,
                lane,
                settings,
                Instant::now(),
                clawpool_lanes::now_ms(),
            ),
            worker,
            profile,
            cwd,
            worktree_git,
            lane_name,
            events,
            operator,
            hooks: None,
            store,
            opening: Some(LaneEventKind::Started),
            external: None,
            permissions: None,
            interrupt: Interrupt::never(),
            cost: None,
            settings,
        }
    }

    /// Ends the lane, failed with the signal as evidence, when `interrupt` fires during the
    /// run ([`Outcome::interrupted`]).
    pub fn with_interrupt(mut self, interrupt: Interrupt) -> Self {
        self.interrupt = interrupt;
        self
    }

    /// Checks the lane's cost against its budget as it changes (`cost`: the lane's state
    /// recorder's, which prices each usage event as it is recorded), from the start of the run.
    pub fn with_cost(mut self, cost: tokio::sync::watch::Receiver<Option<f64>>) -> Self {
        self.cost = Some(cost);
        self
    }

    /// Counts what `external` records (worktree changes, commits) as progress, for stalls and
    /// recovery checks alike.
    pub fn with_external_progress(mut self, external: ExternalProgress) -> Self {
        self.external = Some(external);
        self
    }

    /// Takes the facts the agent reports through its hook channel (and the channel's failed
    /// deliveries) as inputs, beside its screen.
    pub fn with_hook_channel(mut self, hooks: &'a mut mpsc::Receiver<ChannelMessage>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Answers the agent's tool-permission dialogs by `gate`'s policy (allow: yes, deny: no;
    /// ask: a person, as without it), recording each decision as `lane.permission.decided`.
    pub fn with_permissions(mut self, gate: PermissionGate) -> Self {
        self.permissions = Some(gate);
        self.machine.decide_permissions();
        self
    }

    /// Ends the run with [`Next::Recover`]`(stalled)` when the lane is `running` and its
    /// screen shows no meaningful progress for `after` (spinners, timers and token counters
    /// are not progress; new lines are).
    pub fn stall_after(mut self, after: Duration) -> Self {
        self.machine.stall_after(after);
        self
    }

    /// Ends the run when the lane becomes blocked on something recovery or a person deals
    /// with: `blocked{provider}` → [`Next::Recover`]`(provider_down)` (the agent keeps
    /// retrying; a recipe decides how long to wait), `blocked{unknown_dialog}` →
    /// [`Next::Recover`]`(unknown_dialog)`, `blocked{trust_prompt|tool_permission|boot_dialog}`
    /// → [`Next::Blocked`], a submitted draft the agent does not take
    /// (`blocked{prompt_delivery}` after `max_submit_attempts` Enter presses) →
    /// [`Next::Recover`]`(prompt_not_accepted)`, an input line that held text nobody here typed
    /// before anything was submitted (`blocked{prompt_delivery}`) → [`Next::Blocked`].
    pub fn recover_blocked(mut self) -> Self {
        self.machine.recover_blocked();
        self
    }

    /// A recovery check: once the agent has taken what it was given, end the run with
    /// [`Next::Progressed`] at the first meaningful progress on screen, or [`Next::NoProgress`]
    /// when `within` (if any) passes without any. Stall detection is off meanwhile (the check
    /// is it), and a lane blocked as stalled stays so until it shows progress.
    pub fn check_progress(mut self, within: Option<Duration>) -> Self {
        self.machine.check_progress(within);
        self
    }

    /// Texts to deliver, in order, as soon as the agent is idle (a recovery's nudge).
    pub fn with_followups(mut self, texts: Vec<String>) -> Self {
        self.machine.with_followups(texts);
        self
    }

    /// Continues the prompt count of an earlier worker of the same lane: a prompt delivered
    /// again after a restart is attempt `attempts + 1`.
    pub fn after_attempts(mut self, attempts: u32) -> Self {
        self.machine.after_attempts(attempts);
        self
    }

    /// The worker was started again while its agent was in the middle of a turn that was not
    /// delivered again: until it takes a new text, stopping it does not finish the lane.
    pub fn after_dropped_turn(mut self, dropped: bool) -> Self {
        self.machine.after_dropped_turn(dropped);
        self
    }

    /// Continues a lane an earlier supervisor was driving, from its recorded state: nothing
    /// already sent is sent again, and a draft still in the input line after a recorded Enter
    /// gets Enter again by the prompt's rules.
    pub fn resume(mut self, from: Resumed) -> Self {
        let retry_after = self.settings.accept_timeout / self.settings.max_submit_attempts.max(1);
        self.machine.take_over(from, Some(retry_after));
        self.opening = Some(LaneEventKind::Adopted);
        self
    }

    /// Carries on with the same worker after the driver stepped in (a recovery recipe's key,
    /// wait or nudge): like [`Handshake::resume`], without announcing a new start; pressing
    /// Enter again is the recovery's to decide.
    pub fn carry_on(mut self, from: Resumed) -> Self {
        self.machine.take_over(from, None);
        self.opening = None;
        self
    }

    /// Drives the lane until it is finished or failed, or something ends the run.
    pub async fn run(mut self) -> Outcome {
        if let Some(kind) = self.opening.take() {
            let adopted = kind == LaneEventKind::Adopted;
            let effects = self.machine.open(adopted, self.worker.pid());
            self.carry_out(effects).await;
        }
        let mut cost = self.cost.take();
        if let Some(usd) = cost.as_mut().and_then(|c| *c.borrow_and_update()) {
            // A lane already past its budget (held before, or a budget lowered) is held
            // before anything is typed.
            self.input(Input::Cost(usd)).await;
        }
        let mut changes = self.worker.changes();
        let mut output_open = true;
        let mut interrupted = None;
        let interrupt = self.interrupt.clone();
        loop {
            if let Some(status) = self.worker.exit_status() {
                self.input(Input::Exited(status, self.worker.snapshot()))
                    .await;
                break;
            }
            // One stat a look: a worktree deleted under the lane fails it at once, before a
            // screen could make it look finished.
            if self
                .worktree_git
                .as_ref()
                .is_some_and(|git| git.symlink_metadata().is_err())
            {
                self.input(Input::WorktreeGone(self.cwd.clone())).await;
                break;
            }
            let looked_at = Instant::now();
            let screen = self.worker.snapshot();
            let external = self.external.as_ref().and_then(ExternalProgress::latest);
            self.input(Input::Look { screen, external }).await;
            if self.machine.is_over() {
                break;
            }
            let wake = self.machine.next_deadline(looked_at, Instant::now());
            changes.set_urgent(self.machine.awaits_acceptance());
            tokio::select! {
                more = changes.changed(), if output_open => output_open = more,
                _ = self.worker.wait(), if !output_open => {}
                request = self.operator.recv() => {
                    if let Some(request) = request {
                        let screen = self.worker.snapshot();
                        self.input(Input::Operator { request, screen }).await;
                        if self.machine.is_over() {
                            break;
                        }
                    }
                }
                message = next_report(&mut self.hooks) => {
                    match message {
                        Some(ChannelMessage::Fact(fact)) => self.input(Input::Hook(fact)).await,
                        Some(ChannelMessage::PermissionDecided(answer)) => {
                            self.input(Input::HookPermissionDecided(answer)).await;
                        }
                        Some(ChannelMessage::Failed { event, error }) => {
                            self.input(Input::HookFailed { event, error }).await;
                        }
                        Some(ChannelMessage::Protocol(fact)) => {
                            self.input(Input::Protocol(fact)).await;
                        }
                        Some(ChannelMessage::ProtocolLost { error }) => {
                            self.input(Input::ProtocolLost { error }).await;
                        }
                        // Every sender is gone: the lane's channel is closed for good.
                        None => self.hooks = None,
                    }
                    if self.machine.is_over() {
                        break;
                    }
                }
                usd = next_cost(&mut cost) => {
                    if let Some(usd) = usd {
                        self.input(Input::Cost(usd)).await;
                        if self.machine.is_over() {
                            break;
                        }
                    }
                }
                signal = interrupt.wait() => {
                    self.input(Input::Interrupted(signal.name())).await;
                    interrupted = Some(signal);
                    break;
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
        if self.machine.state() == LaneState::Finished && self.worker.exit_status().is_none() {
            // The agent is idle with the work done; the lane is over, so is the worker.
            self.worker.stop(STOP_GRACE).await;
        }
        // The agent may record its trust late (or again on exit): confine once more.
        self.confine_store();
        let (effects, ended) = self.machine.finish();
        self.carry_out(effects).await;
        Outcome {
            state: ended.state,
            receipt: ended.receipt,
            exit: self.worker.exit_status().map(|s| s.to_string()),
            next: ended.next,
            reached_ready: ended.reached_ready,
            trust: ended.trust,
            answered_outside: ended.answered_outside,
            budget: ended.budget,
            store: self.store,
            restart_reply: ended.restart_reply,
            unsent: ended.unsent,
            dialog: ended.dialog,
            interrupted,
        }
    }

    /// Hands one input to the machine and carries out what it says.
    async fn input(&mut self, input: Input) {
        let effects = self.machine.handle(input, Instant::now());
        self.carry_out(effects).await;
    }

    /// Carries out effects in order; the result of one that has a result goes back to the
    /// machine at once, and what it says next comes before the rest.
    async fn carry_out(&mut self, effects: Vec<Effect>) {
        let mut queue: VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            let result = match effect {
                Effect::Record(record) => {
                    // A decision's events go in together (a hook's record and the finish it
                    // decides): the state file each one writes does not hold up the next.
                    let mut records = vec![record];
                    while let Some(Effect::Record(_)) = queue.front() {
                        if let Some(Effect::Record(next)) = queue.pop_front() {
                            records.push(next);
                        }
                    }
                    self.record_all(records);
                    None
                }
                Effect::Send {
                    input,
                    on_sent,
                    fatal,
                } => match self.worker.send(&input).await {
                    Ok(()) => {
                        for effect in on_sent.into_iter().rev() {
                            queue.push_front(effect);
                        }
                        None
                    }
                    Err(err) => Some(Input::SendFailed {
                        error: err.to_string(),
                        fatal,
                    }),
                },
                Effect::Answer { dialog, choice } => Some(Input::Answered(
                    answer::answer(&self.worker, self.profile, &dialog, &choice).await,
                )),
                Effect::StopWorker => {
                    self.worker.stop(STOP_GRACE).await;
                    None
                }
                Effect::BootOver => {
                    let answers = if self.profile.manifest.input.cursor_reports {
                        clawpool_pty::QueryAnswers::CursorPosition
                    } else {
                        clawpool_pty::QueryAnswers::None
                    };
                    self.worker.limit_query_answers(answers);
                    None
                }
                Effect::ProbeGitOperation => Some(Input::GitOperation(
                    clawpool_worktree::git_operation(&self.cwd).ok().flatten(),
                )),
                Effect::GuardTrustStore => Some(Input::StoreGuarded(self.guard_store())),
                Effect::ConfineTrustStore => {
                    self.confine_store();
                    None
                }
                Effect::WriteTaskFile { file, prompt } => Some(Input::TaskFileWritten(
                    delivery::write_task_file(&file, &prompt).map_err(|e| e.to_string()),
                )),
                // Only a handshake given a gate (`with_permissions`) asks for a decision.
                Effect::DecidePermission { rows } => self
                    .permissions
                    .as_ref()
                    .map(|gate| Input::PermissionDecided(gate.decide(&rows))),
                Effect::Reply { to, verdict } => {
                    to.send(verdict);
                    None
                }
            };
            if let Some(input) = result {
                let next = self.machine.handle(input, Instant::now());
                for effect in next.into_iter().rev() {
                    queue.push_front(effect);
                }
            }
        }
    }

    fn record_all(&self, records: Vec<Record>) {
        let reports = records.into_iter().map(Record::into_report).collect();
        for result in self.events.report_all(reports) {
            if let Err(err) = result {
                tracing::warn!(lane = %self.lane_name, error = %err, "could not record a lane event");
            }
        }
    }

    /// Notes the agent's trust store before clawpool answers a trust dialog; whether it could.
    fn guard_store(&mut self) -> bool {
        let Some(store) = self.store.as_mut() else {
            return false;
        };
        match store.before_answer() {
            Ok(()) => true,
            Err(err) => {
                let failed = TrustStoreConfined {
                    store: store.file().display().to_string(),
                    revoked: None,
                    error: Some(err.to_string()),
                };
                let _ = self
                    .events
                    .report(Payload::TrustStoreConfined(failed), None, None, None);
                false
            }
        }
    }

    fn confine_store(&self) {
        if let Some(store) = &self.store {
            confine_trust_store(store, self.events);
        }
    }
}

impl Record {
    /// Appends the event the machine asked for to the lane's event log.
    pub fn append_to(self, events: &EventLog) -> Result<LaneEvent, EventLogError> {
        events.report_from(self.source, self.payload, self.from, self.to, self.evidence)
    }

    /// The event, for [`EventLog::report_all`].
    fn into_report(self) -> EventReport {
        EventReport {
            source: self.source,
            payload: self.payload,
            from: self.from,
            to: self.to,
            evidence: self.evidence,
        }
    }
}

/// The lane's cost once it changes (`None`: still unknown); never when the run has no cost
/// to watch, or its recorder is gone.
async fn next_cost(cost: &mut Option<tokio::sync::watch::Receiver<Option<f64>>>) -> Option<f64> {
    let Some(receiver) = cost else {
        return std::future::pending().await;
    };
    if receiver.changed().await.is_err() {
        *cost = None;
        return std::future::pending().await;
    }
    *receiver.borrow_and_update()
}

/// The next message of the hook channel, if the lane has one; never, otherwise.
async fn next_report(
    hooks: &mut Option<&mut mpsc::Receiver<ChannelMessage>>,
) -> Option<ChannelMessage> {
    match hooks {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// Withdraws what the agent recorded in its trust store beyond the lane since clawpool answered
/// its trust dialog (see [`clawpool_agents::trust::confine`]), recording what changed as
/// `lane.trust_store_confined`. Nothing when clawpool answered no trust dialog.
pub fn confine_trust_store(store: &StoreGuard, events: &EventLog) {
    if !store.answered() {
        return;
    }
    let store_file = store.file().display().to_string();
    let confined = match store.confine() {
        Ok(confined) if !confined.written => return,
        Ok(confined) => TrustStoreConfined {
            store: store_file,
            revoked: Some(confined.revoked),
            error: None,
        },
        Err(err) => TrustStoreConfined {
            store: store_file,
            revoked: None,
            error: Some(err.to_string()),
        },
    };
    let _ = events.report(Payload::TrustStoreConfined(confined), None, None, None);
}
