//! Automatic recovery of one lane, in the process that drives it.
//!
//! After every run of the handshake, the lane's facts go through the recovery policy; a
//! `recover` decision is limited by the lane's ledger (and, for restarts, by the restart
//! backoff and intensity) and becomes an attempt: a [`RecipeRun`] carried out step by step.
//! Each step is a [`Plan`] the driver carries out against the worker and reports back
//! ([`Recovery::step_done`]), or, for a `wait_for_progress` check, a run of the handshake
//! whose outcome says whether the agent made progress ([`Recovery::after_run`]). Every ledger
//! change is written to the state file (`recovery`) and recorded as a `lane.recovery.*`
//! event; a recipe that escalates or is used up raises its escalation with its reason and
//! next action, and a lane whose worker is still alive stays supervised (blocked, watched for
//! progress) so a person can still save it.
//!
//! Not carried out here: answering a trust dialog again (the handshake answers a trusted lane's
//! dialog up to three times itself, then the policy hands it to a person). A recipe that
//! reaches that step fails its attempt naming the step; nothing is pretended.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::handshake::{Next, Outcome};
use crate::lane_state::StateRecorder;
use clawpool_lanes::state_file::{GreenLevel, now_secs};
use clawpool_lanes::{BlockedSubphase, EventLog, LaneState, LaneStatus};
use clawpool_lanes::{Payload, payload::Escalated};
use clawpool_recovery::{
    Action, AttemptEnd, AttemptId, AttemptOrigin, AttemptState, EscalationOutcome, LaneFacts,
    Ledger, Policy, Queued, Recipe, RecipeRun, RestartDecision, RestartTracker, RunState, Step,
    StepOutcome, Trigger,
};

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Run the handshake on with the same worker.
    CarryOn {
        /// Texts to deliver first, by the prompt's rules (a recipe's nudge).
        followups: Vec<String>,
        /// What ends the run besides the lane ending.
        watch: Watch,
    },
    /// Send this key (the profile's key names) to the worker, then [`Recovery::step_done`].
    SendKey(String),
    /// Press Enter once more on the draft still in the input line (never retyping it), then
    /// [`Recovery::step_done`]; the next run watches for the prompt being taken.
    Resubmit,
    /// Wait this long, then [`Recovery::step_done`].
    Wait(Duration),
    /// Start the worker again after `delay`, then [`Recovery::step_done`]; the next run of
    /// the handshake is a new worker's.
    Restart {
        /// The wait first (restart backoff).
        delay: Duration,
        /// With the profile's resume arguments (the step fails when it has none).
        resume: bool,
        /// Deliver the prompt again.
        redeliver: bool,
        /// The recipe.
        by: String,
    },
    /// Merge the lane's base into its branch (the lane's branch checks), then
    /// [`Recovery::step_done`].
    MergeForward,
    /// Close the lane out, as the policy's `rule` says: stop its worker and mark it done.
    CloseOut {
        /// The rule that decided it.
        rule: String,
    },
    /// Nothing more: the lane ends as it is.
    Done,
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
    last: Option<Outcome>,
    lane: String,
    /// The lane's event log file (facts for `notify` rules are read beside it).
    events_path: PathBuf,
    /// `notify` rules already run, each with the lane's situation it ran for: a rule runs its
    /// hook once per situation, not after every run of the handshake.
    notified: HashSet<String>,
    /// The kinds of action taken for the finished lane: each at most once, so finishing ends.
    finishing_done: HashSet<&'static str>,
}

impl Recovery {
    /// Recovery for `lane`, continuing the ledger its state file holds.
    ///
    /// An attempt a dead supervisor was carrying out is closed as failed (its steps may have
    /// half happened, so none is replayed; it counts against the recipe's limit), and
    /// recorded as such. One it had only queued is carried out when the lane next needs that
    /// recipe.
    pub fn new(
        policy: Arc<Policy>,
        lane: &str,
        events_path: &Path,
        events: &EventLog,
        recorder: &StateRecorder,
    ) -> Self {
        let record = recorder.doc().recovery;
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
        ledger.adopt(now_secs());
        let recovery = Self {
            policy,
            ledger,
            restarts,
            current: None,
            last: None,
            lane: lane.to_owned(),
            events_path: events_path.to_owned(),
            notified: HashSet::new(),
            finishing_done: HashSet::new(),
        };
        for id in running {
            recovery.publish(id, events, recorder);
        }
        recovery
    }

    /// The lane's state as the last run left it and recovery moved it since (a recipe that
    /// escalates by blocking blocks the lane); `None` before the first run ended.
    pub fn lane_state(&self) -> Option<LaneState> {
        self.last.as_ref().map(|outcome| outcome.state)
    }

    /// The stall time of the policy.
    pub fn stall_after(&self) -> Duration {
        self.policy.stall_after()
    }

    /// Decides what follows a run of the handshake that started at `run_started` (epoch s).
    pub fn after_run(
        &mut self,
        outcome: &Outcome,
        run_started: u64,
        events: &EventLog,
        recorder: &StateRecorder,
    ) -> Plan {
        if outcome.reached_ready {
            self.restarts.on_healthy(run_started);
        }
        self.last = Some(outcome.clone());
        self.notify(recorder);
        if self.current.is_some() {
            let step = match &outcome.next {
                Next::Progressed(what) => StepOutcome::Progress(what.clone()),
                Next::NoProgress => StepOutcome::NoProgress,
                _ if is_healed(outcome) => StepOutcome::Progress("the lane finished".to_owned()),
                _ => StepOutcome::Failed(format!("the lane ended {}", describe(outcome))),
            };
            return self.step_done(step, events, recorder);
        }
        if is_healed(outcome) {
            return Plan::Done;
        }
        if let Next::Progressed(_) = outcome.next {
            // An escalated lane moved again: back to watching it for troubles.
            return carry_on(Watch::Troubles);
        }
        self.decide(events, recorder)
    }

    /// Reports how the step the last [`Plan`] asked for went, and says what comes next.
    pub fn step_done(
        &mut self,
        step: StepOutcome,
        events: &EventLog,
        recorder: &StateRecorder,
    ) -> Plan {
        let Some(attempt) = self.current.as_mut() else {
            return Plan::Done;
        };
        match attempt.run.advance(step) {
            RunState::Continue => self.next_step(events, recorder),
            RunState::Succeeded(result) => {
                self.end_attempt(AttemptEnd::Succeeded, result, events, recorder);
                if self.worker_alive() {
                    carry_on(Watch::Troubles)
                } else {
                    Plan::Done
                }
            }
            RunState::Failed(result) => {
                self.end_attempt(AttemptEnd::Failed, result, events, recorder);
                self.decide(events, recorder)
            }
            RunState::Escalated(result) => {
                let recipe = attempt.run.recipe().clone();
                self.end_attempt(AttemptEnd::Failed, result, events, recorder);
                self.escalate_recipe(&recipe, events);
                self.after_escalation()
            }
        }
    }

    /// What the policy asks next for the finished lane, as its state file has it now (fresh
    /// facts after each action): merge its base forward (the recipe, within the ledger's
    /// limits), verify it (only to a level it has commands for), close it out. Each kind of
    /// action is taken at most once.
    pub fn finishing(
        &mut self,
        has_commands: impl Fn(GreenLevel) -> bool,
        events: &EventLog,
        recorder: &StateRecorder,
    ) -> Finishing {
        self.notify(recorder);
        let doc = recorder.doc();
        if doc.status != LaneStatus::Finished {
            return Finishing::Nothing;
        }
        let facts = crate::facts::lane_facts(&doc, &self.events_path, now_secs());
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
                let Some(outcome) = self.last.clone() else {
                    return Finishing::Nothing;
                };
                let plan = self.attempt(&recipe, recipe.trigger, &outcome, events, recorder);
                return Finishing::Steps(plan);
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

    /// The worker was started again by a recovery restart.
    pub fn restarted(&mut self, recorder: &StateRecorder) {
        self.restarts.on_restarted();
        self.save(recorder);
    }

    /// Puts the lane's facts, as the last run left them, through the policy, then runs the
    /// `notify` rules that match where that left the lane.
    fn decide(&mut self, events: &EventLog, recorder: &StateRecorder) -> Plan {
        let plan = self.decide_action(events, recorder);
        self.notify(recorder);
        plan
    }

    /// Runs the hooks of the `notify` rules that match the lane's facts as its state file has
    /// them, once per situation.
    fn notify(&mut self, recorder: &StateRecorder) {
        let doc = recorder.doc();
        let mut facts = crate::facts::lane_facts(&doc, &self.events_path, now_secs());
        if let Some(trigger) = self.last.as_ref().and_then(trigger_of) {
            facts.trigger = Some(trigger);
        }
        let log = self
            .events_path
            .parent()
            .map(|dir| dir.join(crate::hooks::HOOKS_LOG))
            .unwrap_or_else(|| PathBuf::from(crate::hooks::HOOKS_LOG));
        for decision in self.policy.evaluate(&facts) {
            let Action::Notify { hook } = &decision.action else {
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
                crate::hooks::notify(&self.policy, hook, &decision.rule, &facts, &log);
            }
        }
    }

    fn decide_action(&mut self, events: &EventLog, recorder: &StateRecorder) -> Plan {
        let Some(outcome) = self.last.clone() else {
            return Plan::Done;
        };
        let trigger = trigger_of(&outcome);
        if trigger.is_none() && outcome.next != Next::Blocked {
            return self.after_escalation();
        }
        let mut facts = LaneFacts::new(&self.lane, outcome.state.status());
        facts.subphase = outcome.state.subphase();
        facts.failure = outcome
            .state
            .failure()
            .or_else(|| outcome.state.subphase().map(BlockedSubphase::failure_class));
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
                    self.attempt(&recipe, trigger, &outcome, events, recorder)
                }
                Err(_) => self.after_escalation(),
            },
            Action::Escalate {
                reason,
                next_action,
            } => {
                let next_action =
                    self.with_dialog_choices(next_action.replace("{lane}", &self.lane));
                escalate(events, &reason, &next_action);
                self.after_escalation()
            }
            Action::CloseOut if self.worker_alive() => Plan::CloseOut {
                rule: decision.rule,
            },
            // Verifying and merging forward are for a finished lane (`finishing`).
            _ => self.after_escalation(),
        }
    }

    fn attempt(
        &mut self,
        recipe: &Recipe,
        trigger: Trigger,
        outcome: &Outcome,
        events: &EventLog,
        recorder: &StateRecorder,
    ) -> Plan {
        let now = now_secs();
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
                self.publish(id, events, recorder);
                if newly {
                    self.escalate_recipe(recipe, events);
                }
                return self.after_escalation();
            }
        };
        self.publish(id, events, recorder);
        let delay = if recipe.backoff {
            match self.restarts.on_exit(now, outcome.reached_ready) {
                RestartDecision::RestartAfter { delay, .. } => Some(delay),
                exhausted => {
                    let why = exhausted.describe(self.restarts.policy());
                    let _ = self.ledger.start(id, now);
                    let _ = self.ledger.finish(id, AttemptEnd::Failed, now, why.clone());
                    self.publish(id, events, recorder);
                    let exhausted =
                        self.ledger
                            .record_exhausted(recipe, &trigger.to_string(), now, why);
                    self.publish(exhausted, events, recorder);
                    self.escalate_recipe(recipe, events);
                    return self.after_escalation();
                }
            }
        } else {
            None
        };
        let _ = self.ledger.start(id, now);
        self.publish(id, events, recorder);
        self.current = Some(Attempt {
            id,
            run: RecipeRun::new(recipe.clone()),
            trigger,
            delay,
        });
        self.next_step(events, recorder)
    }

    /// The plan for the attempt's current step; steps that need no worker are done here.
    fn next_step(&mut self, events: &EventLog, recorder: &StateRecorder) -> Plan {
        let Some(attempt) = self.current.as_mut() else {
            return Plan::Done;
        };
        let Some((_, step)) = attempt.run.current() else {
            return Plan::Done;
        };
        match step.clone() {
            Step::SendKey(key) => Plan::SendKey(key),
            Step::Wait(wait) => Plan::Wait(wait),
            Step::WaitForProgress(within) => carry_on(Watch::Check(within)),
            Step::SendText(text) => {
                // Queued for the handshake, which types it by the prompt's rules; a check
                // right after it starts once the agent has taken it.
                let watch = match attempt.run.advance(StepOutcome::Done) {
                    RunState::Continue => match attempt.run.current() {
                        Some((_, Step::WaitForProgress(within))) => Watch::Check(*within),
                        _ => return self.step_done(StepOutcome::Done, events, recorder),
                    },
                    _ => Watch::Troubles,
                };
                Plan::CarryOn {
                    followups: vec![text],
                    watch,
                }
            }
            Step::Restart {
                resume,
                redeliver_prompt,
            } => Plan::Restart {
                delay: attempt.delay.take().unwrap_or_default(),
                resume,
                redeliver: redeliver_prompt,
                by: attempt.run.recipe().name.clone(),
            },
            Step::Escalate => self.step_done(StepOutcome::Done, events, recorder),
            Step::MergeForward => Plan::MergeForward,
            Step::Resubmit => Plan::Resubmit,
            Step::AnswerTrust => self.step_done(
                StepOutcome::Failed(
                    "answer_trust is not a step this supervisor carries out in a recipe".into(),
                ),
                events,
                recorder,
            ),
        }
    }

    fn end_attempt(
        &mut self,
        end: AttemptEnd,
        result: String,
        events: &EventLog,
        recorder: &StateRecorder,
    ) {
        if let Some(attempt) = self.current.take() {
            let _ = self.ledger.finish(attempt.id, end, now_secs(), result);
            self.publish(attempt.id, events, recorder);
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
    fn after_escalation(&self) -> Plan {
        if self.worker_alive() {
            carry_on(Watch::Escalated)
        } else {
            Plan::Done
        }
    }

    /// Whether the last run left the worker running (only a recovery or a check ended it).
    fn worker_alive(&self) -> bool {
        self.last.as_ref().is_some_and(|o| {
            !o.state.is_terminal()
                && matches!(
                    o.next,
                    Next::Recover(_) | Next::Progressed(_) | Next::NoProgress | Next::Blocked
                )
        })
    }

    /// A next action for a lane waiting on a dialog names the dialog and its choices, so the
    /// person knows what `clawpool answer` takes.
    fn with_dialog_choices(&self, next_action: String) -> String {
        match self
            .last
            .as_ref()
            .and_then(|outcome| outcome.dialog.as_ref())
        {
            Some(dialog) => format!("{next_action} ({})", dialog.hint()),
            None => next_action,
        }
    }

    fn escalate_recipe(&mut self, recipe: &Recipe, events: &EventLog) {
        let next_action = self.with_dialog_choices(recipe.escalation.next_action_for(&self.lane));
        let Some(outcome) = self.last.as_mut() else {
            return;
        };
        match recipe.escalation.outcome {
            EscalationOutcome::Block if !matches!(outcome.state, LaneState::Failed(_)) => {
                let subphase = recipe
                    .trigger
                    .subphase()
                    .or(outcome.state.subphase())
                    .unwrap_or(BlockedSubphase::Stalled);
                let escalated = Payload::BlockedEscalated(Escalated {
                    reason: recipe.escalation.reason.clone(),
                    next_action,
                    recipe: Some(recipe.name.clone()),
                });
                let blocked = LaneState::Blocked(subphase);
                let _ = events.report(escalated, Some(outcome.state), Some(blocked), None);
                outcome.state = blocked;
            }
            _ => escalate(events, &recipe.escalation.reason, &next_action),
        }
    }

    fn publish(&self, id: AttemptId, events: &EventLog, recorder: &StateRecorder) {
        self.save(recorder);
        if let Some((kind, detail)) = self.ledger.event(id) {
            let _ = events.record(kind, None, None, None, detail);
        }
    }

    fn save(&self, recorder: &StateRecorder) {
        let mut record = self.ledger.record().clone();
        record.restart = self.restarts.record().clone();
        recorder.update(|doc| doc.recovery = record);
    }
}

fn carry_on(watch: Watch) -> Plan {
    Plan::CarryOn {
        followups: Vec::new(),
        watch,
    }
}

/// The lane finished its work.
fn is_healed(outcome: &Outcome) -> bool {
    outcome.state == LaneState::Finished
}

/// `lane.escalated`: a person must act; the lane keeps its state.
fn escalate(events: &EventLog, reason: &str, next_action: &str) {
    let escalated = Payload::Escalated(Escalated {
        reason: reason.to_owned(),
        next_action: next_action.to_owned(),
        recipe: None,
    });
    let _ = events.report(escalated, None, None, None);
}

/// What a recipe could heal in how the run ended: what the handshake named when it ended the
/// run for recovery, else what the lane's state says ([`Trigger::of`]).
fn trigger_of(outcome: &Outcome) -> Option<Trigger> {
    match &outcome.next {
        Next::Recover(trigger) => Some(*trigger),
        _ => Trigger::of(outcome.state, outcome.receipt.submitted()),
    }
}

fn describe(outcome: &Outcome) -> String {
    match &outcome.next {
        Next::Recover(trigger) => format!("{} ({trigger})", outcome.state),
        _ => outcome.state.to_string(),
    }
}
