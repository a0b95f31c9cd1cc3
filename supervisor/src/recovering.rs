//! Automatic recovery of one lane, in the process that drives it: after every run of the
//! handshake, the lane's facts go through the recovery policy; a `recover` decision is
//! limited by the lane's ledger (and, for restarts, by the restart backoff and intensity) and
//! turned into a [`Plan`] the driver carries out against the worker. Every ledger change is
//! written to the state file (`recovery`) and recorded as a `lane.recovery.*` event; a recipe
//! that is used up escalates with its reason and next action.
//!
//! Carried out here: `Restart` (with backoff for `restart_crashed_worker`), and the
//! interrupt, wait and nudge steps of `interrupt_and_nudge`. A recipe whose first actions are
//! steps this driver does not carry out (answering a dialog again, resubmitting, merging
//! forward) is recorded as a failed attempt naming the step, never pretended.

use std::sync::Arc;
use std::time::Duration;

use clawpool::handshake::{Next, Outcome};
use clawpool::lane_state::StateRecorder;
use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{BlockedSubphase, EventLog, FailureClass, LaneState, LaneStatus};
use clawpool_recovery::{
    Action, AttemptEnd, AttemptId, AttemptOrigin, EscalationOutcome, LaneFacts, Ledger, Policy,
    Queued, Recipe, RestartDecision, RestartTracker, Step, Trigger,
};
use serde_json::json;

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Start the worker again after `delay`.
    Restart {
        /// The wait first (restart backoff).
        delay: Duration,
        /// With the profile's resume arguments.
        resume: bool,
        /// Deliver the prompt again.
        redeliver: bool,
        /// The recipe.
        by: String,
    },
    /// Interrupt the working agent, wait, then deliver a nudge on the same worker.
    Nudge {
        /// The interrupt key (profile key name).
        key: String,
        /// How long to wait after it.
        wait: Duration,
        /// The nudge.
        text: String,
    },
    /// Nothing more: the lane ends as it is.
    Done,
}

/// A lane's recovery state while it is driven.
pub struct Recovery {
    policy: Arc<Policy>,
    ledger: Ledger,
    restarts: RestartTracker,
    current: Option<AttemptId>,
    lane: String,
}

impl Recovery {
    /// Recovery for `lane`, continuing the ledger its state file holds.
    pub fn new(policy: Arc<Policy>, lane: &str, recorder: &StateRecorder) -> Self {
        let record = recorder.doc().recovery;
        let restarts =
            RestartTracker::from_record(policy.restart_policy().clone(), record.restart.clone());
        let mut ledger = Ledger::from_record(record);
        // An attempt a dead supervisor was carrying out is closed as failed, not replayed.
        ledger.adopt(now_secs());
        Self {
            policy,
            ledger,
            restarts,
            current: None,
            lane: lane.to_owned(),
        }
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
        let now = now_secs();
        if outcome.reached_ready {
            self.restarts.on_healthy(run_started);
        }
        let healed = outcome.state.status == LaneStatus::Finished && outcome.next == Next::Done;
        if let Some(id) = self.current.take() {
            let (end, result) = if healed {
                (
                    AttemptEnd::Succeeded,
                    "the lane went on and finished".to_owned(),
                )
            } else {
                (
                    AttemptEnd::Failed,
                    format!("the lane ended {} again", describe(outcome)),
                )
            };
            let _ = self.ledger.finish(id, end, now, result);
            self.publish(id, events, recorder);
        }
        if healed {
            return Plan::Done;
        }
        let Some(trigger) = trigger_of(outcome) else {
            return Plan::Done;
        };
        let mut facts = LaneFacts::new(&self.lane, outcome.state.status);
        facts.subphase = outcome.state.subphase;
        facts.failure = outcome.state.failure;
        facts.trigger = Some(trigger);
        facts.attempts = self.ledger.attempt_counts();
        facts.recovery = self.ledger.status();
        let Some(decision) = self.policy.decide(&facts) else {
            return Plan::Done;
        };
        match decision.action {
            Action::Recover { recipe } => match self.policy.recipes().require(&recipe) {
                Ok(recipe) => {
                    let recipe = recipe.clone();
                    self.attempt(&recipe, trigger, outcome, events, recorder)
                }
                Err(_) => Plan::Done,
            },
            Action::Escalate {
                reason,
                next_action,
            } => {
                escalate(events, &reason, &next_action.replace("{lane}", &self.lane));
                Plan::Done
            }
            _ => Plan::Done,
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
            Queued::Busy { .. } => return Plan::Done,
            Queued::Exhausted { id, newly } => {
                self.publish(id, events, recorder);
                if newly {
                    self.escalate_recipe(recipe, outcome, events);
                }
                return Plan::Done;
            }
        };
        self.publish(id, events, recorder);
        let plan = match recipe.steps.first() {
            Some(Step::Restart {
                resume,
                redeliver_prompt,
            }) => {
                let delay = if recipe.backoff {
                    match self.restarts.on_exit(now, outcome.reached_ready) {
                        RestartDecision::RestartAfter { delay, .. } => Ok(delay),
                        exhausted => Err(exhausted.describe(self.restarts.policy())),
                    }
                } else {
                    Ok(Duration::ZERO)
                };
                delay.map(|delay| Plan::Restart {
                    delay,
                    resume: *resume,
                    redeliver: *redeliver_prompt,
                    by: recipe.name.clone(),
                })
            }
            Some(Step::SendKey(key)) => {
                let wait = recipe.steps.iter().find_map(|s| match s {
                    Step::Wait(d) => Some(*d),
                    _ => None,
                });
                let text = recipe.steps.iter().find_map(|s| match s {
                    Step::SendText(t) => Some(t.clone()),
                    _ => None,
                });
                match text {
                    Some(text) => Ok(Plan::Nudge {
                        key: key.clone(),
                        wait: wait.unwrap_or_default(),
                        text,
                    }),
                    None => Err("the recipe has no text to send after the key".to_owned()),
                }
            }
            Some(Step::Escalate) => Err(recipe.escalation.reason.clone()),
            other => Err(format!(
                "step {other:?} is not carried out by this supervisor; nothing was done"
            )),
        };
        match plan {
            Ok(plan) => {
                let _ = self.ledger.start(id, now);
                self.current = Some(id);
                self.publish(id, events, recorder);
                plan
            }
            Err(why) => {
                let _ = self.ledger.start(id, now);
                let _ = self.ledger.finish(id, AttemptEnd::Failed, now, why.clone());
                self.publish(id, events, recorder);
                let exhausted =
                    self.ledger
                        .record_exhausted(recipe, &trigger.to_string(), now, why);
                self.publish(exhausted, events, recorder);
                self.escalate_recipe(recipe, outcome, events);
                Plan::Done
            }
        }
    }

    /// The worker was started again by a recovery restart.
    pub fn restarted(&mut self, recorder: &StateRecorder) {
        self.restarts.on_restarted();
        self.save(recorder);
    }

    fn escalate_recipe(&self, recipe: &Recipe, outcome: &Outcome, events: &EventLog) {
        let next_action = recipe.escalation.next_action_for(&self.lane);
        match recipe.escalation.outcome {
            EscalationOutcome::Block if outcome.state.status != LaneStatus::Failed => {
                let subphase = match outcome.next {
                    Next::Recover(_) => BlockedSubphase::Stalled,
                    _ => outcome.state.subphase.unwrap_or(BlockedSubphase::Stalled),
                };
                let _ = events.record(
                    "lane.blocked",
                    Some(outcome.state),
                    Some(LaneState::blocked(subphase)),
                    None,
                    json!({"reason": recipe.escalation.reason, "next_action": next_action,
                           "recipe": recipe.name}),
                );
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

/// `lane.escalated`: a person must act; the lane keeps its state.
fn escalate(events: &EventLog, reason: &str, next_action: &str) {
    let _ = events.record(
        "lane.escalated",
        None,
        None,
        None,
        json!({"reason": reason, "next_action": next_action}),
    );
}

/// What a recipe could heal in how the run ended.
fn trigger_of(outcome: &Outcome) -> Option<Trigger> {
    if let Next::Recover(name) = &outcome.next {
        return name.parse().ok();
    }
    match (outcome.state.status, outcome.state.failure) {
        (LaneStatus::Failed, Some(FailureClass::WorkerCrashed | FailureClass::WorkerLost)) => {
            Some(Trigger::WorkerExited)
        }
        (LaneStatus::Failed, Some(FailureClass::PromptDelivery)) => {
            Some(Trigger::PromptMisdelivered)
        }
        _ => None,
    }
}

fn describe(outcome: &Outcome) -> String {
    match &outcome.next {
        Next::Recover(trigger) => format!("{} ({trigger})", outcome.state),
        _ => outcome.state.to_string(),
    }
}
