//! A lane's runs: the handshake on its worker, then what recovery asks for, until the lane
//! ends or the supervisor is interrupted.
//!
//! Each run of the handshake ends with an [`Outcome`]; an operator's restart is carried out at
//! once, anything else goes to [`Recovery`], whose [`Plan`] steps are carried out here one at
//! a time (a key, a wait, Enter on the draft, a merge-forward, a restart, a close-out), each
//! reported back, until recovery says to run the handshake again (on the same worker or a new
//! one) or that the lane ended. The lane's state between runs is recovery's (the last run's,
//! as an escalation may have moved it); nothing here reads it back from the state file.

use std::time::Duration;

use clawpool_lanes::payload::{ClosedOut, PromptSent};
use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{EventLog, LaneEventKind, LaneState, Payload};
use clawpool_pty::{Input, Key, Worker};
use clawpool_recovery::StepOutcome;
use serde_json::json;

use super::finish::merge_step;
use super::open::OpenLane;
use super::recovery_effects::{apply, carry_out, read_lane};
use crate::handshake::{
    Handshake, Next, Outcome, PromptPlan, RestartRequest, Resumed, TRUST_NOT_APPLIED, Verdict,
};
use crate::interrupt::StopSignal;
use crate::lane_state::StateRecorder;
use crate::recovering::{Plan, Recovery, RunEnd, Watch};

/// How long a worker stopped by clawpool gets before it is killed.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(5);

/// The supervisor was told to stop: the signal, and the state the lane was recorded in.
pub(super) type Interrupted = (StopSignal, LaneState);

/// How the next run of the handshake starts.
struct NextRun {
    /// Carry on with the same worker, in this state and with this receipt (after a recovery
    /// step); `None` for a new worker, whose handshake starts its own.
    carry: Option<Resumed>,
    /// Texts to deliver first.
    followups: Vec<String>,
    /// What ends the run besides the lane ending.
    watch: Watch,
}

/// What carrying out a recovery step came to.
enum Flow {
    /// The step is done: what recovery says next.
    Next(Plan),
    /// Run the handshake again.
    Run(NextRun),
    /// The lane ended (boxed: an outcome is large).
    Ended(Box<Outcome>),
}

/// What the runs carry from one to the next.
struct Carried {
    /// Enter presses for the prompt by the lane's earlier workers.
    prior_attempts: u32,
    /// A recovery step started a new worker during this run's plan.
    fresh: bool,
    /// A recovery pressed Enter again on the draft: the next run carries on as
    /// `ready_for_prompt`, where the handshake sees the prompt being taken.
    resubmitted: bool,
}

impl OpenLane {
    /// Runs the lane until it ends (`Ok`, with how) or the supervisor is interrupted.
    pub(super) async fn run(&mut self, recovery: &mut Recovery) -> Result<Outcome, Interrupted> {
        let mut carried = Carried {
            prior_attempts: 0,
            fresh: false,
            resubmitted: false,
        };
        let mut next = NextRun {
            carry: None,
            followups: Vec::new(),
            watch: Watch::Troubles,
        };
        loop {
            let run_started = now_secs();
            carried.fresh = false;
            let outcome = self
                .run_handshake(next, recovery, carried.prior_attempts)
                .await?;
            // An operator may have trusted the lane during the run, and clawpool may have
            // answered its trust dialog: later runs keep both.
            self.rig.lane.trust = outcome.trust;
            self.rig.lane.store = outcome.store.clone();
            if let Next::Restart(request) = &outcome.next {
                if let Err(failed) = self.restart_for(&outcome, request.clone()).await {
                    return Ok(failed);
                }
                carried.prior_attempts = outcome.receipt.attempts;
                next = NextRun {
                    carry: None,
                    followups: outcome.unsent.clone(),
                    watch: Watch::Troubles,
                };
                continue;
            }
            let (read, now) = read_lane(&self.job, &self.recorder);
            let decision = recovery.after_run(RunEnd::from(&outcome), run_started, read, now);
            let mut plan = apply(decision, &self.job, &self.events, &self.recorder);
            next = loop {
                plan = match self
                    .carry_out(plan, &outcome, recovery, &mut carried)
                    .await?
                {
                    Flow::Next(plan) => plan,
                    Flow::Run(next) => break next,
                    Flow::Ended(ended) => return Ok(*ended),
                };
            };
        }
    }

    /// One run of the handshake, or the interrupt that stopped it.
    async fn run_handshake(
        &mut self,
        next: NextRun,
        recovery: &Recovery,
        prior_attempts: u32,
    ) -> Result<Outcome, Interrupted> {
        self.screen.show(&self.worker);
        let mut handshake = Handshake::new(
            self.worker.clone(),
            &self.job.profile,
            self.rig.lane.clone(),
            self.job.settings,
            &self.events,
            &mut self.operator_rx,
        )
        .after_attempts(prior_attempts)
        .after_dropped_turn(self.rig.dropped_turn)
        .with_followups(next.followups)
        .with_external_progress(self.external.clone())
        .with_permissions(self.permission_gate.clone());
        if let Some(hook_rx) = self.hook_rx.as_mut() {
            handshake = handshake.with_hook_channel(hook_rx);
        }
        handshake = match next.watch {
            Watch::Troubles => handshake
                .stall_after(recovery.stall_after())
                .recover_blocked(),
            Watch::Check(within) => handshake.check_progress(Some(within)),
            Watch::Escalated => handshake.check_progress(None),
        };
        if let Some(resumed) = self.resumed.take() {
            handshake = handshake.resume(resumed);
        } else if let Some(resumed) = next.carry {
            handshake = handshake.carry_on(resumed);
        }
        tokio::select! {
            outcome = handshake.run() => Ok(outcome),
            signal = self.job.interrupt.wait() => {
                Err(interrupted(&self.worker, signal, &self.events, &self.recorder).await)
            }
        }
    }

    /// An operator's `clawpool restart`: a new worker, and the operator told how it went. The
    /// lane ends (`Err`, failed) when the worker cannot be started again.
    async fn restart_for(
        &mut self,
        outcome: &Outcome,
        request: RestartRequest,
    ) -> Result<(), Outcome> {
        self.rig.lane.restarted_to_apply_trust |= request.by == TRUST_NOT_APPLIED;
        let reply = outcome.restart_reply.clone().unwrap_or_default();
        match self.rig.restart(outcome, &request).await {
            Ok(worker) => {
                reply.send(Verdict::done(format!(
                    "restarted: a new worker (pid {}) runs in the lane's folder{}",
                    worker
                        .pid()
                        .map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
                    if matches!(self.rig.lane.prompt, PromptPlan::None) {
                        ""
                    } else {
                        ", and the lane's prompt is delivered again"
                    }
                )));
                self.worker = worker;
                Ok(())
            }
            Err(failed) => {
                reply.send(Verdict::Failed {
                    reason: format!(
                        "the worker could not be started again; the lane is {}",
                        failed.state
                    ),
                });
                Err(failed)
            }
        }
    }

    /// Carries out one step of recovery's plan after the run that ended with `outcome`.
    async fn carry_out(
        &mut self,
        plan: Plan,
        outcome: &Outcome,
        recovery: &mut Recovery,
        carried: &mut Carried,
    ) -> Result<Flow, Interrupted> {
        let (events, recorder) = (&self.events, &self.recorder);
        // The lane's state now: the run's, or what an escalation moved it to.
        let state = recovery.lane_state().unwrap_or(outcome.state);
        let step = match plan {
            Plan::Done => {
                return Ok(Flow::Ended(Box::new(Outcome {
                    state,
                    ..outcome.clone()
                })));
            }
            Plan::CarryOn {
                followups: mut texts,
                watch,
            } => {
                // A restarted worker starts its own handshake; the same one carries on.
                let resubmitted = std::mem::take(&mut carried.resubmitted);
                let carry = (!carried.fresh).then(|| Resumed {
                    state: if resubmitted {
                        LaneState::ReadyForPrompt
                    } else {
                        state
                    },
                    attempts: outcome.receipt.attempts + u32::from(resubmitted),
                    sent_at: outcome.receipt.sent_at.map(|ms| ms / 1000),
                    accepted_at: outcome.receipt.accepted_at.map(|ms| ms / 1000),
                });
                // What an operator queued and the run did not deliver goes first.
                texts.splice(0..0, outcome.unsent.iter().cloned());
                return Ok(Flow::Run(NextRun {
                    carry,
                    followups: texts,
                    watch,
                }));
            }
            Plan::SendKey(_) | Plan::Resubmit if !self.rig.lane.trust.is_open() => {
                let why = "nothing is typed into a lane nobody trusted (`clawpool trust`)";
                StepOutcome::Failed(why.into())
            }
            Plan::SendKey(key) => {
                let sent = match key.parse::<Key>() {
                    Ok(key) => self
                        .worker
                        .send(&Input::Key(key))
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(format!("{e}")),
                };
                match sent {
                    Ok(()) => StepOutcome::Done,
                    Err(why) => StepOutcome::Failed(format!("sending {key}: {why}")),
                }
            }
            Plan::Resubmit => {
                let attempt = outcome.receipt.attempts + 1;
                // Recorded before the press, as the handshake does: an adopter of a lane whose
                // supervisor was killed in between presses Enter, never retypes.
                let sent = Payload::PromptSent(PromptSent {
                    attempt,
                    by: Some("resubmit_prompt".into()),
                });
                let _ = events.report(sent, None, None, None);
                match self.worker.send(&Input::Key(Key::Enter)).await {
                    Ok(()) => {
                        carried.resubmitted = true;
                        StepOutcome::Done
                    }
                    Err(err) => StepOutcome::Failed(format!("pressing Enter: {err}")),
                }
            }
            Plan::MergeForward => match &self.job.checks {
                // The worker is driven: the lane's state stays its machine's.
                Some(checks) => merge_step(checks, events, recorder, None).await,
                None => StepOutcome::Failed("the lane has no branch of its own".into()),
            },
            Plan::CloseOut { rule } => {
                self.worker.stop(STOP_GRACE).await;
                let closed = Payload::ClosedOut(ClosedOut { rule });
                let _ = events.report(closed, Some(state), Some(LaneState::Finished), None);
                return Ok(Flow::Ended(Box::new(Outcome {
                    state: LaneState::Finished,
                    next: Next::Done,
                    ..outcome.clone()
                })));
            }
            Plan::Wait(wait) => {
                self.sleep_unless_interrupted(wait).await?;
                StepOutcome::Done
            }
            Plan::Restart { resume: true, .. }
                if self.job.profile.manifest.launch.resume_args.is_empty() =>
            {
                StepOutcome::Failed(format!(
                    "the {} profile has no resume arguments; the worker was left as it is",
                    self.job.profile.name()
                ))
            }
            Plan::Restart {
                delay,
                resume,
                redeliver,
                by,
            } => {
                self.worker.stop(STOP_GRACE).await;
                self.sleep_unless_interrupted(delay).await?;
                let request = RestartRequest {
                    by,
                    resume,
                    redeliver,
                };
                match self.rig.restart(outcome, &request).await {
                    Ok(worker) => {
                        self.worker = worker;
                        carried.prior_attempts = outcome.receipt.attempts;
                        let saved = recovery.restarted();
                        carry_out(saved, &self.job, events, recorder);
                        carried.fresh = true;
                        StepOutcome::Done
                    }
                    Err(failed) => return Ok(Flow::Ended(Box::new(failed))),
                }
            }
        };
        let (read, now) = read_lane(&self.job, recorder);
        let decision = recovery.step_done(step, read, now);
        Ok(Flow::Next(apply(decision, &self.job, events, recorder)))
    }

    /// Waits `wait`, or stops the lane on an interrupt.
    async fn sleep_unless_interrupted(&self, wait: Duration) -> Result<(), Interrupted> {
        tokio::select! {
            _ = tokio::time::sleep(wait) => Ok(()),
            signal = self.job.interrupt.wait() => {
                Err(interrupted(&self.worker, signal, &self.events, &self.recorder).await)
            }
        }
    }
}

/// Stops the lane's worker on SIGINT/SIGTERM to the supervisor and records the lane as failed,
/// with the signal as evidence: the class its block was heading for when it was blocked,
/// otherwise `infra` (an interrupted task is not a finished one).
///
/// The state it was in is read from the state document: the handshake that owned it was
/// dropped mid-run by the interrupt.
async fn interrupted(
    worker: &Worker,
    signal: StopSignal,
    events: &EventLog,
    recorder: &StateRecorder,
) -> Interrupted {
    worker.stop(STOP_GRACE).await;
    let from = recorder.doc().lane_state();
    let to = from.stopped_unfinished();
    let _ = events.record(
        LaneEventKind::Failed,
        Some(from),
        Some(to),
        Some(clawpool_lanes::Evidence {
            rule: "supervisor_interrupted".into(),
            region: "supervisor".into(),
            matched: format!("interrupted by {} while {from}", signal.name()),
        }),
        json!({"signal": signal.name()}),
    );
    (signal, to)
}
