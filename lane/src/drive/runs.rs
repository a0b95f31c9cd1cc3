//! A lane's runs: the handshake on its worker, then what recovery asks for, until the lane
//! ends or the supervisor is interrupted.
//!
//! Each run of the handshake ends with an [`Outcome`]; an operator's restart is carried out at
//! once, anything else goes to [`Recovery`], whose [`Plan`] steps are carried out here one at
//! a time (a key, a wait, Enter on the draft, a merge-forward, a restart, stopping the worker),
//! each reported back, until recovery says how to run the handshake again (on the same worker
//! or a new one, with what first) or that the lane ended, in which state. Everything that is
//! decided — what the lane can do, what the next run carries on from — is recovery's; this
//! only touches the worker and the clock. The lane's state between runs is recovery's too;
//! nothing here reads it back from the state file.

use std::time::Duration;

use clawpool_lanes::LaneState;
use clawpool_lanes::state_file::now_secs;
use clawpool_pty::{Input, Key};
use clawpool_recovery::StepOutcome;

use super::finish::merge_step;
use super::open::OpenLane;
use super::recovery_effects::{apply, read_lane};
use crate::handshake::machine;
use crate::handshake::{
    Handshake, Next, Outcome, PromptPlan, RestartRequest, TRUST_NOT_APPLIED, Verdict,
};
use crate::interrupt::StopSignal;
use crate::recovering::{NextRun, Plan, Recovery, RunEnd, Watch};

/// How long a worker stopped by clawpool gets before it is killed.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(5);

/// The supervisor was told to stop: the signal, and the state the lane was recorded in.
pub(super) type Interrupted = (StopSignal, LaneState);

impl OpenLane {
    /// Runs the lane until it ends (`Ok`, with how) or the supervisor is interrupted.
    pub(super) async fn run(&mut self, recovery: &mut Recovery) -> Result<Outcome, Interrupted> {
        // Enter presses for the prompt by the lane's earlier workers.
        let mut prior_attempts = 0;
        let mut next = NextRun {
            carry: None,
            followups: Vec::new(),
            watch: Watch::Troubles,
        };
        loop {
            let run_started = now_secs();
            let outcome = self.run_handshake(next, recovery, prior_attempts).await;
            if let Some(signal) = outcome.interrupted {
                return Err((signal, outcome.state));
            }
            // An operator may have trusted the lane during the run, and clawpool may have
            // answered its trust dialog: later runs keep both.
            self.rig.lane.trust = outcome.trust;
            self.rig.lane.store = outcome.store.clone();
            // A lane held for a person stays held until one acts: a restart is one.
            self.rig.lane.answered_outside =
                outcome.answered_outside && !matches!(outcome.next, Next::Restart(_));
            // A budget raised or a hold taken during the run holds for the next.
            self.rig.lane.budget = outcome.budget;
            if let Next::Restart(request) = &outcome.next {
                if let Err(failed) = self.restart_for(&outcome, request.clone()).await {
                    return Ok(failed);
                }
                prior_attempts = outcome.receipt.attempts;
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
                // The lane's state while no run owns it is recovery's.
                let state = recovery.lane_state().unwrap_or(outcome.state);
                let step = match plan {
                    Plan::Run(next) => break next,
                    Plan::End(state) => return Ok(Outcome { state, ..outcome }),
                    Plan::Restart { delay, request } => {
                        match self.restart_step(&outcome, delay, request, state).await? {
                            Ok(()) => {
                                prior_attempts = outcome.receipt.attempts;
                                StepOutcome::Done
                            }
                            Err(failed) => return Ok(failed),
                        }
                    }
                    Plan::Wait(wait) => {
                        self.sleep_unless_interrupted(wait, state).await?;
                        StepOutcome::Done
                    }
                    Plan::SendKey(key) => self.press(key, format!("sending {key}")).await,
                    Plan::PressEnter => self.press(Key::Enter, "pressing Enter".into()).await,
                    Plan::MergeForward => match &self.job.checks {
                        // The worker is driven: the lane's state stays its machine's.
                        Some(checks) => {
                            merge_step(checks, &self.events, &self.recorder, None).await
                        }
                        None => StepOutcome::Failed("the lane has no branch of its own".into()),
                    },
                    Plan::StopWorker => {
                        self.worker.stop(STOP_GRACE).await;
                        StepOutcome::Done
                    }
                };
                let (read, now) = read_lane(&self.job, &self.recorder);
                let decision = recovery.step_done(step, read, now);
                plan = apply(decision, &self.job, &self.events, &self.recorder);
            };
        }
    }

    /// One run of the handshake (which ends the lane itself on an interrupt).
    async fn run_handshake(
        &mut self,
        next: NextRun,
        recovery: &Recovery,
        prior_attempts: u32,
    ) -> Outcome {
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
        .with_permissions(self.permission_gate.clone())
        .with_interrupt(self.job.interrupt.clone())
        .with_cost(self.recorder.cost());
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
        handshake.run().await
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

    /// A key for the worker: how sending it went.
    async fn press(&self, key: Key, what: String) -> StepOutcome {
        match self.worker.send(&Input::Key(key)).await {
            Ok(()) => StepOutcome::Done,
            Err(err) => StepOutcome::Failed(format!("{what}: {err}")),
        }
    }

    /// A recovery restart: the worker stopped, the backoff waited out, a new worker started
    /// (`Ok(Err)`: it could not be, and the lane ended so).
    async fn restart_step(
        &mut self,
        outcome: &Outcome,
        delay: Duration,
        request: RestartRequest,
        state: LaneState,
    ) -> Result<Result<(), Outcome>, Interrupted> {
        self.worker.stop(STOP_GRACE).await;
        self.sleep_unless_interrupted(delay, state).await?;
        Ok(match self.rig.restart(outcome, &request).await {
            Ok(worker) => {
                self.worker = worker;
                Ok(())
            }
            Err(failed) => Err(failed),
        })
    }

    /// Waits `wait`, or, on an interrupt, stops the lane in `state` (no run owns it: it is
    /// recovery's) and records why.
    async fn sleep_unless_interrupted(
        &self,
        wait: Duration,
        state: LaneState,
    ) -> Result<(), Interrupted> {
        tokio::select! {
            _ = tokio::time::sleep(wait) => Ok(()),
            signal = self.job.interrupt.wait() => {
                self.worker.stop(STOP_GRACE).await;
                let failed = machine::interrupted(state, signal.name());
                let to = failed.to.unwrap_or(state);
                let _ = failed.append_to(&self.events);
                Err((signal, to))
            }
        }
    }
}
