//! Automatic recovery of one lane, in the process that drives it: a core that decides and does
//! no I/O.
//!
//! After every run of the handshake, the lane's facts go through the recovery policy; a
//! `recover` decision is limited by the lane's ledger (and, for restarts, by the restart
//! backoff and intensity) and becomes an attempt: a [`RecipeRun`] carried out step by step.
//! Each step is a [`Plan`] the driver carries out against the worker and reports back
//! ([`Recovery::step_done`]), or, for a `wait_for_progress` check, a run of the handshake
//! whose outcome says whether the agent made progress ([`Recovery::after_run`]). Every ledger
//! change is to be written to the state file (`recovery`) and recorded as a `lane.recovery.*`
//! event; a recipe that escalates or is used up raises its escalation with its reason and
//! next action, and a lane whose worker is still alive stays supervised (blocked, watched for
//! progress) so a person can still save it.
//!
//! Everything recovery decides besides the plan is an [`Effect`] the driver carries out in
//! order (an event, the ledger saved, a `notify` hook run): recovery is given the time and
//! what the driver read of the lane (its facts: green level, freshness, times) with each call,
//! and puts over them what it owns (the lane's state as the last run and its escalations left
//! it, the ledger), so every rule here — limits, backoff, escalation, `notify` once per
//! situation — is decided the same for the same inputs (`recovering/tests.rs`).
//!
//! Not carried out here: answering a trust dialog again (the handshake answers a trusted lane's
//! dialog up to three times itself, then the policy hands it to a person). A recipe that
//! reaches that step fails its attempt naming the step; nothing is pretended.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::handshake::{Next, Outcome, RestartRequest, Resumed, WaitingDialog};
use clawpool_lanes::payload::{ClosedOut, PromptSent};
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::{BlockedSubphase, LaneState, LaneStatus};
use clawpool_lanes::{Payload, payload::Escalated};
use clawpool_pty::Key;
use clawpool_recovery::{
    Action, AttemptEnd, AttemptId, AttemptOrigin, AttemptState, EscalationOutcome, LaneFacts,
    Ledger, Policy, Queued, Recipe, RecipeRun, RecoveryLedger, RestartDecision, RestartTracker,
    RunState, Step, StepOutcome, Trigger,
};

#[cfg(test)]
mod tests;

/// What recovery asks the driver to do besides its [`Plan`], in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Record an escalation: `lane.escalated`, or a `lane.blocked` from `from` to `to` when
    /// the escalation blocks the lane.
    Report {
        /// The escalation.
        payload: Payload,
        /// The lane's state before, when the escalation moves it.
        from: Option<LaneState>,
        /// The lane's state after, when the escalation moves it.
        to: Option<LaneState>,
    },
    /// Record a ledger change: a `lane.recovery.*` event with the attempt.
    Record {
        /// The event.
        payload: Payload,
    },
    /// Write the ledger (with the restart record) to the lane's state file, `recovery`.
    Save(RecoveryLedger),
    /// Run the hook of a `notify` rule, with the facts it matched.
    Notify {
        /// The hook's name in the policy.
        hook: String,
        /// The rule.
        rule: String,
        /// The facts the rule matched (boxed: they are large).
        facts: Box<LaneFacts>,
    },
}

/// What recovery decided: the driver's next step, and what to carry out first.
#[derive(Debug)]
pub struct Decision<T> {
    /// The next step.
    pub next: T,
    /// What to carry out before it, in order.
    pub effects: Vec<Effect>,
}

/// How a run of the handshake ended, as far as recovery decides on it.
#[derive(Debug, Clone)]
pub struct RunEnd {
    /// The lane's state (moved by recovery when an escalation blocks the lane).
    pub state: LaneState,
    /// What the run asked for.
    pub next: Next,
    /// Whether the worker ever showed its idle input.
    pub reached_ready: bool,
    /// Whether Enter was pressed on the prompt by this worker.
    pub submitted: bool,
    /// Enter presses for the prompt, counting every worker of the lane.
    pub attempts: u32,
    /// When the prompt was first sent (epoch s).
    pub sent_at: Option<u64>,
    /// When it was seen accepted (epoch s).
    pub accepted_at: Option<u64>,
    /// Texts still queued for the agent: the next run on the same lane delivers them first.
    pub unsent: Vec<String>,
    /// Whether clawpool may type into the lane (its trust gate as the run left it).
    pub trust_open: bool,
    /// The dialog the lane was left waiting on for an operator.
    pub dialog: Option<WaitingDialog>,
}

impl From<&Outcome> for RunEnd {
    fn from(outcome: &Outcome) -> Self {
        Self {
            state: outcome.state,
            next: outcome.next.clone(),
            reached_ready: outcome.reached_ready,
            submitted: outcome.receipt.submitted(),
            attempts: outcome.receipt.attempts,
            sent_at: outcome.receipt.sent_at.map(|ms| ms / 1000),
            accepted_at: outcome.receipt.accepted_at.map(|ms| ms / 1000),
            unsent: outcome.unsent.clone(),
            trust_open: outcome.trust.is_open(),
            dialog: outcome.dialog.clone(),
        }
    }
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Run the handshake again.
    Run(NextRun),
    /// Send this key to the worker, then [`Recovery::step_done`].
    SendKey(Key),
    /// Press Enter once more on the draft still in the input line (never retyping it), then
    /// [`Recovery::step_done`]. Its `lane.prompt_sent` is among the effects before it: an
    /// adopter of a lane whose supervisor was killed in between presses Enter, never retypes.
    PressEnter,
    /// Wait this long, then [`Recovery::step_done`].
    Wait(Duration),
    /// Stop the worker, wait `delay` (the restart backoff), and start it again as `request`
    /// says; then [`Recovery::step_done`], or the lane ends with the failed start.
    Restart {
        /// The wait between the stop and the start.
        delay: Duration,
        /// How the new worker starts.
        request: RestartRequest,
    },
    /// Merge the lane's base into its branch (the lane's branch checks), then
    /// [`Recovery::step_done`].
    MergeForward,
    /// Stop the worker, then [`Recovery::step_done`]: the policy closes the lane out.
    StopWorker,
    /// The lane ended, in this state.
    End(LaneState),
}

/// How the next run of the handshake starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextRun {
    /// Carry on with the same worker, in this state and with this receipt (after a recovery
    /// step); `None` for a new worker, whose handshake starts its own.
    pub carry: Option<Resumed>,
    /// Texts to deliver first: what the last run did not deliver, then a recipe's nudge.
    pub followups: Vec<String>,
    /// What ends the run besides the lane ending.
    pub watch: Watch,
}

/// What recovery decided to do, before it is made a [`Plan`] the driver can carry out (which
/// may refuse it: a key for a lane nobody trusted, a resume the profile cannot do).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Intent {
    CarryOn {
        followups: Vec<String>,
        watch: Watch,
    },
    SendKey(String),
    Resubmit,
    Wait(Duration),
    Restart {
        delay: Duration,
        resume: bool,
        redeliver: bool,
        by: String,
    },
    MergeForward,
    CloseOut {
        rule: String,
    },
    Done,
}

/// The plan the driver is carrying out, where its report means more than the step's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    /// Enter pressed again: the next run watches the prompt being taken.
    Enter,
    /// A new worker: the next run is its handshake.
    Restart,
    /// The worker stopped for the policy's close-out rule.
    CloseOut(String),
}

/// What recovery knows of the lane that does not change while it is driven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneAbilities {
    /// The agent's profile (its name, in a refusal).
    pub profile: String,
    /// The profile has resume arguments.
    pub resumable: bool,
    /// The lane has a branch of its own to merge forward.
    pub has_branch: bool,
}

/// What the policy asks for a finished lane ([`Recovery::finishing`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finishing {
    /// Carry out these steps of a recipe (a merge-forward).
    Steps(Plan),
    /// Verify up to this level (the lane has commands for it).
    Verify(GreenLevel),
    /// Close the lane out: it is done; `lane.closed_out` with the rule.
    CloseOut {
        /// The rule that decided it.
        rule: String,
    },
    /// Nothing (more).
    Nothing,
}

/// What ends a run of the handshake besides the lane ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// The lane's own troubles: a stall, a provider that stays down.
    Troubles,
    /// A recipe's `wait_for_progress` check: progress, or this long without any.
    Check(Duration),
    /// An escalated lane, left to a person: only progress (or the lane ending) ends the run,
    /// after which the lane is watched for troubles again.
    Escalated,
}

/// The attempt being carried out.
struct Attempt {
    id: AttemptId,
    run: RecipeRun,
    trigger: Trigger,
    /// The restart backoff, taken by the recipe's first restart.
    delay: Option<Duration>,
}

/// A lane's recovery state while it is driven.
pub struct Recovery {
    policy: Arc<Policy>,
    ledger: Ledger,
    restarts: RestartTracker,
    current: Option<Attempt>,
    /// How the last run of the handshake ended: what a failed attempt is decided again on.
    last: Option<RunEnd>,
    lane: String,
    /// `notify` rules already run, each with the lane's situation it ran for: a rule runs its
    /// hook once per situation, not after every run of the handshake.
    notified: HashSet<String>,
    /// The kinds of action taken for the finished lane: each at most once, so finishing ends.
    finishing_done: HashSet<&'static str>,
    abilities: LaneAbilities,
    /// The plan being carried out, when its report means more than how the step went.
    pending: Option<Pending>,
    /// A recovery step started a new worker since the last run: the next run is its own.
    fresh: bool,
    /// Enter was pressed again on the draft since the last run: the next run carries on as
    /// `ready_for_prompt`, where the handshake sees the prompt being taken.
    resubmitted: bool,
    /// The call being decided: when (epoch s), what the driver read of the lane, and what
    /// recovery asks to be carried out so far.
    now: u64,
    read: LaneFacts,
    effects: Vec<Effect>,
}

impl Recovery {
    /// Recovery for `lane` at `now` (epoch s), continuing the ledger its state file holds,
    /// and what to carry out first.
    ///
    /// An attempt a dead supervisor was carrying out is closed as failed (its steps may have
    /// half happened, so none is replayed; it counts against the recipe's limit), and
    /// recorded as such. One it had only queued is carried out when the lane next needs that
    /// recipe.
    pub fn new(
        policy: Arc<Policy>,
        lane: &str,
        abilities: LaneAbilities,
        record: RecoveryLedger,
        now: u64,
    ) -> (Self, Vec<Effect>) {
        let restarts =
            RestartTracker::from_record(policy.restart_policy().clone(), record.restart.clone());
        let mut ledger = Ledger::from_record(record);
        let running: Vec<AttemptId> = (0..ledger.record().entries.len())
            .map(AttemptId)
            .filter(|id| {
                ledger
                    .entry(*id)
                    .is_some_and(|e| e.state == AttemptState::Running)
            })
            .collect();
        ledger.adopt(now);
        let mut recovery = Self {
            policy,
            ledger,
            restarts,
            current: None,
            last: None,
            lane: lane.to_owned(),
            notified: HashSet::new(),
            finishing_done: HashSet::new(),
            abilities,
            pending: None,
            fresh: false,
            resubmitted: false,
            now,
            read: LaneFacts::new(lane, LaneStatus::Spawning),
            effects: Vec::new(),
        };
        for id in running {
            recovery.publish(id);
        }
        let effects = std::mem::take(&mut recovery.effects);
        (recovery, effects)
    }

    /// The lane's state as the last run left it and recovery moved it since (a recipe that
    /// escalates by blocking blocks the lane); `None` before the first run ended.
    pub fn lane_state(&self) -> Option<LaneState> {
        self.last.as_ref().map(|run| run.state)
    }

    /// The stall time of the policy.
    pub fn stall_after(&self) -> Duration {
        self.policy.stall_after()
    }

    /// Decides what follows a run of the handshake that started at `run_started` (epoch s)
    /// and ended as `run` at `now`, the lane read as `read`.
    pub fn after_run(
        &mut self,
        run: RunEnd,
        run_started: u64,
        read: LaneFacts,
        now: u64,
    ) -> Decision<Plan> {
        self.begin(read, now);
        self.fresh = false;
        if run.reached_ready {
            self.restarts.on_healthy(run_started);
        }
        let healed = run.state == LaneState::Finished;
        let next = run.next.clone();
        let describe = describe(&run);
        self.last = Some(run);
        self.notify();
        let plan = if self.current.is_some() {
            let step = match next {
                Next::Progressed(what) => StepOutcome::Progress(what),
                Next::NoProgress => StepOutcome::NoProgress,
                _ if healed => StepOutcome::Progress("the lane finished".to_owned()),
                _ => StepOutcome::Failed(format!("the lane ended {describe}")),
            };
            self.advance(step)
        } else if healed {
            Intent::Done
        } else if let Next::Progressed(_) = next {
            // An escalated lane moved again: back to watching it for troubles.
            carry_on(Watch::Troubles)
        } else {
            self.decide()
        };
        let plan = self.act(plan);
        self.decided(plan)
    }

    /// Reports how the step the last [`Plan`] asked for went (at `now`, the lane read as
    /// `read`), and says what comes next. A [`Plan::Restart`] reported done started a new
    /// worker; a [`Plan::StopWorker`] reported ends the lane closed out.
    pub fn step_done(&mut self, step: StepOutcome, read: LaneFacts, now: u64) -> Decision<Plan> {
        self.begin(read, now);
        let done = step == StepOutcome::Done;
        let plan = match self.pending.take() {
            Some(Pending::CloseOut(rule)) => self.closed_out(rule),
            Some(Pending::Restart) if done => {
                self.restarts.on_restarted();
                self.save();
                self.fresh = true;
                self.advance_to_plan(step)
            }
            Some(Pending::Enter) if done => {
                self.resubmitted = true;
                self.advance_to_plan(step)
            }
            _ => self.advance_to_plan(step),
        };
        self.decided(plan)
    }

    /// What the policy asks next for the lane the finishing stage holds in `state` (fresh
    /// facts after each action, `read` at `now`): merge its base forward (the recipe, within
    /// the ledger's limits), verify it (only to a level it has commands for), close it out.
    /// Each kind of action is taken at most once.
    pub fn finishing(
        &mut self,
        state: LaneState,
        has_commands: impl Fn(GreenLevel) -> bool,
        read: LaneFacts,
        now: u64,
    ) -> Decision<Finishing> {
        self.begin(read, now);
        self.notify();
        let finishing = if state == LaneState::Finished {
            self.finish(state, has_commands)
        } else {
            Finishing::Nothing
        };
        self.decided(finishing)
    }

    fn advance_to_plan(&mut self, step: StepOutcome) -> Plan {
        let intent = self.advance(step);
        self.act(intent)
    }

    /// Makes what recovery decided a plan the driver can carry out; what the lane cannot do
    /// fails the step at once, and the attempt goes on from there.
    fn act(&mut self, mut intent: Intent) -> Plan {
        loop {
            let refused = match intent {
                Intent::Done => return Plan::End(self.state()),
                Intent::CarryOn { followups, watch } => {
                    return Plan::Run(self.next_run(followups, watch));
                }
                Intent::SendKey(_) | Intent::Resubmit if !self.trust_open() => {
                    "nothing is typed into a lane nobody trusted (`clawpool trust`)".to_owned()
                }
                Intent::SendKey(name) => match name.parse::<Key>() {
                    Ok(key) => return Plan::SendKey(key),
                    Err(e) => format!("sending {name}: {e}"),
                },
                Intent::Resubmit => {
                    let attempt = self.last.as_ref().map_or(0, |run| run.attempts) + 1;
                    let sent = Payload::PromptSent(PromptSent {
                        attempt,
                        by: Some("resubmit_prompt".into()),
                    });
                    self.effects.push(Effect::Report {
                        payload: sent,
                        from: None,
                        to: None,
                    });
                    self.pending = Some(Pending::Enter);
                    return Plan::PressEnter;
                }
                Intent::Wait(wait) => return Plan::Wait(wait),
                Intent::MergeForward if !self.abilities.has_branch => {
                    "the lane has no branch of its own".to_owned()
                }
                Intent::MergeForward => return Plan::MergeForward,
                Intent::Restart { resume: true, .. } if !self.abilities.resumable => format!(
                    "the {} profile has no resume arguments; the worker was left as it is",
                    self.abilities.profile
                ),
                Intent::Restart {
                    delay,
                    resume,
                    redeliver,
                    by,
                } => {
                    self.pending = Some(Pending::Restart);
                    let request = RestartRequest {
                        by,
                        resume,
                        redeliver,
                    };
                    return Plan::Restart { delay, request };
                }
                Intent::CloseOut { rule } => {
                    self.pending = Some(Pending::CloseOut(rule));
                    return Plan::StopWorker;
                }
            };
            intent = self.advance(StepOutcome::Failed(refused));
        }
    }

    /// The lane's state now: the last run's, or what an escalation moved it to.
    fn state(&self) -> LaneState {
        self.lane_state().unwrap_or(LaneState::Spawning)
    }

    fn trust_open(&self) -> bool {
        self.last.as_ref().is_some_and(|run| run.trust_open)
    }

    /// How the next run starts: a restarted worker starts its own handshake, the same one
    /// carries on; what the last run did not deliver goes first.
    fn next_run(&mut self, followups: Vec<String>, watch: Watch) -> NextRun {
        let resubmitted = std::mem::take(&mut self.resubmitted);
        let last = self.last.as_ref();
        let carry = match last {
            Some(run) if !self.fresh => Some(Resumed {
                state: if resubmitted {
                    LaneState::ReadyForPrompt
                } else {
                    run.state
                },
                attempts: run.attempts + u32::from(resubmitted),
                sent_at: run.sent_at,
                accepted_at: run.accepted_at,
            }),
            _ => None,
        };
        let mut texts = last.map(|run| run.unsent.clone()).unwrap_or_default();
        texts.extend(followups);
        NextRun {
            carry,
            followups: texts,
            watch,
        }
    }

    /// The worker stopped for the policy's close-out: the lane is done.
    fn closed_out(&mut self, rule: String) -> Plan {
        let from = self.state();
        self.effects.push(Effect::Report {
            payload: Payload::ClosedOut(ClosedOut { rule }),
            from: Some(from),
            to: Some(LaneState::Finished),
        });
        if let Some(run) = self.last.as_mut() {
            run.state = LaneState::Finished;
        }
        Plan::End(LaneState::Finished)
    }

    fn begin(&mut self, read: LaneFacts, now: u64) {
        self.read = read;
        self.now = now;
    }

    fn decided<T>(&mut self, next: T) -> Decision<T> {
        Decision {
            next,
            effects: std::mem::take(&mut self.effects),
        }
    }

    fn finish(&mut self, state: LaneState, has_commands: impl Fn(GreenLevel) -> bool) -> Finishing {
        let facts = self.facts(state);
        let Some(decision) = self.policy.decide(&facts) else {
            return Finishing::Nothing;
        };
        let (kind, finishing) = match decision.action {
            Action::Recover { recipe } => {
                let Ok(recipe) = self.policy.recipes().require(&recipe).cloned() else {
                    return Finishing::Nothing;
                };
                if !recipe.steps.contains(&Step::MergeForward) {
                    return Finishing::Nothing;
                }
                if !self.finishing_done.insert("merge_forward") {
                    return Finishing::Nothing;
                }
                let Some(run) = self.last.clone() else {
                    return Finishing::Nothing;
                };
                let intent = self.attempt(&recipe, recipe.trigger, &run);
                return Finishing::Steps(self.act(intent));
            }
            Action::Verify { level } if has_commands(level) => ("verify", Finishing::Verify(level)),
            Action::Verify { .. } => return Finishing::Nothing,
            Action::CloseOut => (
                "close_out",
                Finishing::CloseOut {
                    rule: decision.rule,
                },
            ),
            _ => return Finishing::Nothing,
        };
        if self.finishing_done.insert(kind) {
            finishing
        } else {
            Finishing::Nothing
        }
    }

    /// The lane's facts as recovery decides on them: what the driver read of the lane, with
    /// what recovery owns put over it — the lane in `state`, and the ledger.
    fn facts(&self, state: LaneState) -> LaneFacts {
        let mut facts = self.read.clone();
        if (facts.status, facts.subphase) != (state.status(), state.subphase()) {
            // Moved by recovery since the driver read the lane: it entered the state now.
            facts.seconds_in_state = 0;
        }
        facts.status = state.status();
        facts.subphase = state.subphase();
        facts.failure = state
            .failure()
            .or(state.subphase().map(BlockedSubphase::failure_class));
        facts.attempts = self.ledger.attempt_counts();
        facts.recovery = self.ledger.status();
        facts
    }

    /// Puts the lane's facts, as the last run left them, through the policy, then runs the
    /// `notify` rules that match where that left the lane.
    fn decide(&mut self) -> Intent {
        let plan = self.decide_action();
        self.notify();
        plan
    }

    /// Runs the hooks of the `notify` rules that match the lane's facts, once per situation.
    fn notify(&mut self) {
        let mut facts = match self.lane_state() {
            Some(state) => self.facts(state),
            None => self.read.clone(),
        };
        if let Some(trigger) = self.last.as_ref().and_then(trigger_of) {
            facts.trigger = Some(trigger);
        }
        for decision in self.policy.evaluate(&facts) {
            let Action::Notify { hook } = decision.action else {
                continue;
            };
            let situation = format!(
                "{}|{:?}|{:?}|{:?}|{:?}|{}",
                decision.rule,
                facts.status,
                facts.subphase,
                facts.failure,
                facts.trigger,
                facts.recovery
            );
            if self.notified.insert(situation) {
                self.effects.push(Effect::Notify {
                    hook,
                    rule: decision.rule,
                    facts: Box::new(facts.clone()),
                });
            }
        }
    }

    fn decide_action(&mut self) -> Intent {
        let Some(run) = self.last.clone() else {
            return Intent::Done;
        };
        let trigger = trigger_of(&run);
        if trigger.is_none() && run.next != Next::Blocked {
            return self.after_escalation();
        }
        let mut facts = LaneFacts::new(&self.lane, run.state.status());
        facts.subphase = run.state.subphase();
        facts.failure = run
            .state
            .failure()
            .or_else(|| run.state.subphase().map(BlockedSubphase::failure_class));
        facts.trigger = trigger;
        facts.attempts = self.ledger.attempt_counts();
        facts.recovery = self.ledger.status();
        let Some(decision) = self.policy.decide(&facts) else {
            return self.after_escalation();
        };
        match decision.action {
            Action::Recover { recipe } => match self.policy.recipes().require(&recipe) {
                Ok(recipe) => {
                    let recipe = recipe.clone();
                    let trigger = trigger.unwrap_or(recipe.trigger);
                    self.attempt(&recipe, trigger, &run)
                }
                Err(_) => self.after_escalation(),
            },
            Action::Escalate {
                reason,
                next_action,
            } => {
                let next_action =
                    self.with_dialog_choices(next_action.replace("{lane}", &self.lane));
                self.escalate(&reason, &next_action);
                self.after_escalation()
            }
            Action::CloseOut if self.worker_alive() => Intent::CloseOut {
                rule: decision.rule,
            },
            // Verifying and merging forward are for a finished lane (`finishing`).
            _ => self.after_escalation(),
        }
    }

    fn attempt(&mut self, recipe: &Recipe, trigger: Trigger, run: &RunEnd) -> Intent {
        let now = self.now;
        let queued = self
            .ledger
            .queue(recipe, &trigger.to_string(), AttemptOrigin::Policy, now);
        let id = match queued {
            Queued::Attempt { id, .. } => id,
            // Queued by a supervisor that stopped before carrying it out.
            Queued::Busy { id }
                if self.ledger.entry(id).is_some_and(|e| {
                    e.state == AttemptState::Queued && e.recipe == recipe.name
                }) =>
            {
                id
            }
            Queued::Busy { .. } => return self.after_escalation(),
            Queued::Exhausted { id, newly } => {
                self.publish(id);
                if newly {
                    self.escalate_recipe(recipe);
                }
                return self.after_escalation();
            }
        };
        self.publish(id);
        let delay = if recipe.backoff {
            match self.restarts.on_exit(now, run.reached_ready) {
                RestartDecision::RestartAfter { delay, .. } => Some(delay),
                exhausted => {
                    let why = exhausted.describe(self.restarts.policy());
                    let _ = self.ledger.start(id, now);
                    let _ = self.ledger.finish(id, AttemptEnd::Failed, now, why.clone());
                    self.publish(id);
                    let exhausted =
                        self.ledger
                            .record_exhausted(recipe, &trigger.to_string(), now, why);
                    self.publish(exhausted);
                    self.escalate_recipe(recipe);
                    return self.after_escalation();
                }
            }
        } else {
            None
        };
        let _ = self.ledger.start(id, now);
        self.publish(id);
        self.current = Some(Attempt {
            id,
            run: RecipeRun::new(recipe.clone()),
            trigger,
            delay,
        });
        self.next_step()
    }

    /// Advances the attempt by how its step went.
    fn advance(&mut self, step: StepOutcome) -> Intent {
        let Some(attempt) = self.current.as_mut() else {
            return Intent::Done;
        };
        match attempt.run.advance(step) {
            RunState::Continue => self.next_step(),
            RunState::Succeeded(result) => {
                self.end_attempt(AttemptEnd::Succeeded, result);
                if self.worker_alive() {
                    carry_on(Watch::Troubles)
                } else {
                    Intent::Done
                }
            }
            RunState::Failed(result) => {
                self.end_attempt(AttemptEnd::Failed, result);
                self.decide()
            }
            RunState::Escalated(result) => {
                let recipe = attempt.run.recipe().clone();
                self.end_attempt(AttemptEnd::Failed, result);
                self.escalate_recipe(&recipe);
                self.after_escalation()
            }
        }
    }

    /// The plan for the attempt's current step; steps that need no worker are done here.
    fn next_step(&mut self) -> Intent {
        let Some(attempt) = self.current.as_mut() else {
            return Intent::Done;
        };
        let Some((_, step)) = attempt.run.current() else {
            return Intent::Done;
        };
        match step.clone() {
            Step::SendKey(key) => Intent::SendKey(key),
            Step::Wait(wait) => Intent::Wait(wait),
            Step::WaitForProgress(within) => carry_on(Watch::Check(within)),
            Step::SendText(text) => {
                // Queued for the handshake, which types it by the prompt's rules; a check
                // right after it starts once the agent has taken it.
                let watch = match attempt.run.advance(StepOutcome::Done) {
                    RunState::Continue => match attempt.run.current() {
                        Some((_, Step::WaitForProgress(within))) => Watch::Check(*within),
                        _ => return self.advance(StepOutcome::Done),
                    },
                    _ => Watch::Troubles,
                };
                Intent::CarryOn {
                    followups: vec![text],
                    watch,
                }
            }
            Step::Restart {
                resume,
                redeliver_prompt,
            } => Intent::Restart {
                delay: attempt.delay.take().unwrap_or_default(),
                resume,
                redeliver: redeliver_prompt,
                by: attempt.run.recipe().name.clone(),
            },
            Step::Escalate => self.advance(StepOutcome::Done),
            Step::MergeForward => Intent::MergeForward,
            Step::Resubmit => Intent::Resubmit,
            Step::AnswerTrust => self.advance(StepOutcome::Failed(
                "answer_trust is not a step this supervisor carries out in a recipe".into(),
            )),
        }
    }

    fn end_attempt(&mut self, end: AttemptEnd, result: String) {
        if let Some(attempt) = self.current.take() {
            let _ = self.ledger.finish(attempt.id, end, self.now, result);
            self.publish(attempt.id);
            if end == AttemptEnd::Failed
                && let Some(last) = self.last.as_mut()
                && last.next == Next::NoProgress
            {
                // Decided again as what set the attempt off (the worker is still there).
                last.next = Next::Recover(attempt.trigger);
            }
        }
    }

    /// An escalated (or undecidable) lane: watched until it moves if its worker is alive.
    fn after_escalation(&self) -> Intent {
        if self.worker_alive() {
            carry_on(Watch::Escalated)
        } else {
            Intent::Done
        }
    }

    /// Whether the last run left the worker running (only a recovery or a check ended it).
    fn worker_alive(&self) -> bool {
        self.last.as_ref().is_some_and(|run| {
            !run.state.is_terminal()
                && matches!(
                    run.next,
                    Next::Recover(_) | Next::Progressed(_) | Next::NoProgress | Next::Blocked
                )
        })
    }

    /// A next action for a lane waiting on a dialog names the dialog and its choices, so the
    /// person knows what `clawpool answer` takes.
    fn with_dialog_choices(&self, next_action: String) -> String {
        match self.last.as_ref().and_then(|run| run.dialog.as_ref()) {
            Some(dialog) => format!("{next_action} ({})", dialog.hint()),
            None => next_action,
        }
    }

    fn escalate_recipe(&mut self, recipe: &Recipe) {
        let next_action = self.with_dialog_choices(recipe.escalation.next_action_for(&self.lane));
        let Some(run) = self.last.as_mut() else {
            return;
        };
        match recipe.escalation.outcome {
            EscalationOutcome::Block
                if !matches!(run.state, LaneState::Failed(_) | LaneState::Stopped) =>
            {
                let subphase = recipe
                    .trigger
                    .subphase()
                    .or(run.state.subphase())
                    .unwrap_or(BlockedSubphase::Stalled);
                let escalated = Payload::BlockedEscalated(Escalated {
                    reason: recipe.escalation.reason.clone(),
                    next_action,
                    recipe: Some(recipe.name.clone()),
                });
                let blocked = LaneState::Blocked(subphase);
                self.effects.push(Effect::Report {
                    payload: escalated,
                    from: Some(run.state),
                    to: Some(blocked),
                });
                run.state = blocked;
            }
            _ => self.escalate(&recipe.escalation.reason, &next_action),
        }
    }

    /// `lane.escalated`: a person must act; the lane keeps its state.
    fn escalate(&mut self, reason: &str, next_action: &str) {
        let escalated = Payload::Escalated(Escalated {
            reason: reason.to_owned(),
            next_action: next_action.to_owned(),
            recipe: None,
        });
        self.effects.push(Effect::Report {
            payload: escalated,
            from: None,
            to: None,
        });
    }

    fn publish(&mut self, id: AttemptId) {
        self.save();
        if let Some(payload) = self.ledger.event(id) {
            self.effects.push(Effect::Record { payload });
        }
    }

    fn save(&mut self) {
        let mut record = self.ledger.record().clone();
        record.restart = self.restarts.record().clone();
        self.effects.push(Effect::Save(record));
    }
}

fn carry_on(watch: Watch) -> Intent {
    Intent::CarryOn {
        followups: Vec::new(),
        watch,
    }
}

/// What a recipe could heal in how the run ended: what the handshake named when it ended the
/// run for recovery, else what the lane's state says ([`Trigger::of`]).
fn trigger_of(run: &RunEnd) -> Option<Trigger> {
    match &run.next {
        Next::Recover(trigger) => Some(*trigger),
        _ => Trigger::of(run.state, run.submitted),
    }
}

fn describe(run: &RunEnd) -> String {
    match &run.next {
        Next::Recover(trigger) => format!("{} ({trigger})", run.state),
        _ => run.state.to_string(),
    }
}
