//! Closing a lane once its runs ended: its worker stopped and its terminal gone, its trust
//! store confined, its control socket closed and its transcript reads settled, then for a
//! finished lane the finishing stage (verification on finish, and what the policy asks:
//! merge-forward, verify, close-out), its last commits reported, and its last state written.
//!
//! Every task of the lane that appends to its event log or writes its state file is over
//! before the last write: the reads of the agent's usage are settled ([`USAGE_GRACE`]), the
//! branch and commit watches and the publication's guard are cancelled and waited for. So the
//! last write holds the lane's last event, and nothing appends to the log after it.
//!
//! From here no worker is driven: the lane's state is the finishing stage's to change, and it
//! is carried from step to step (each check is given the state it may move and says where it
//! leads), not read back from the state file.

use std::time::Duration;

use clawpool_lanes::payload::{ClosedOut, Payload};
use clawpool_lanes::{EventLog, LaneState};
use clawpool_recovery::StepOutcome;

use super::commits::Look;
use super::open::OpenLane;
use super::recovery_effects::{apply, read_lane};
use super::runs::{Interrupted, STOP_GRACE};
use super::{FINAL_WRITE_BACKOFF, FINAL_WRITE_TRIES, LaneJob, LaneResult, Terminal};
use crate::checks::LaneChecks;
use crate::finishing;
use crate::handshake::{Outcome, confine_trust_store};
use crate::lane_state::StateRecorder;
use crate::recovering::{Finishing, Plan, Recovery};

/// How long the lane's close waits, once its agent stopped and its control socket closed, for
/// the usage reads still polling the agent's transcript (the turn's last answer reaches it
/// after the `Stop` hook). The agent has exited by then, so what it wrote is all there is; a
/// read that still finds nothing is given up and the turn's usage stays unknown, not zero.
pub(super) const USAGE_GRACE: Duration = Duration::from_secs(2);

impl OpenLane {
    /// Closes the lane after its runs `ended`.
    pub(super) async fn close(
        self,
        ended: Result<Outcome, Interrupted>,
        recovery: &mut Recovery,
    ) -> LaneResult {
        let OpenLane {
            job,
            events,
            recorder,
            rig,
            worker,
            screen,
            operator_rx,
            socket,
            listener,
            commits,
            commit_task,
            branch_tasks,
            supervisor_lock,
            publication_task,
            usage_reads,
            ..
        } = self;
        // Commands still waiting are told the lane ended; every verdict is written before the
        // process may exit.
        drop(operator_rx);
        // The agent rewrites its trust store from memory when it exits: confine it once it is
        // gone.
        worker.stop(STOP_GRACE).await;
        // The lane's terminal is over: its screen model goes now, not after the verification
        // and close-out that may follow for minutes (a `screen` request is answered that it
        // ended).
        screen.clear();
        drop(worker);
        if let Some(store) = &rig.lane.store {
            confine_trust_store(store, &events);
        }
        if let Some((watch, serve)) = branch_tasks {
            watch.abort();
            serve.abort();
            // Cancelled is not over: a check may be appending as it is told.
            let _ = watch.await;
            let _ = serve.await;
        }
        // No hook report is taken after this, so no read starts.
        listener.close().await;
        let settled = usage_reads.settle(USAGE_GRACE).await;
        if settled.given_up > 0 {
            tracing::info!(
                lane = %job.name,
                given_up = settled.given_up,
                "the agent's transcript never showed the usage of its last report"
            );
        }
        let (mut outcome, interrupted) = match ended {
            Ok(outcome) => (Some(outcome), None),
            Err(interrupted) => (None, Some(interrupted)),
        };
        // A worktree deleted under the lane leaves nothing to finish: a failure with evidence,
        // never `finished` (its agent may well have ended its turn as usual).
        if let (Some(checks), Some(ended)) = (&job.checks, outcome.as_mut())
            && ended.state == LaneState::Finished
            && !checks.dir.join(".git").exists()
        {
            let gone = crate::handshake::machine::worktree_gone(ended.state, &checks.dir);
            ended.state = gone.to.unwrap_or(ended.state);
            let _ = gone.append_to(&events);
        }
        if let (Some(checks), Some(finished)) = (&job.checks, outcome.as_mut())
            && finished.state == LaneState::Finished
        {
            let mut state = finished.state;
            if let Some(level) = checks.spec.on_finish {
                state = checks
                    .verify(level, &events, &recorder, Some(state))
                    .await
                    .lane_state;
            }
            state = finish_by_policy(checks, recovery, (&job, &events, &recorder), state).await;
            finished.state = state;
            if state == LaneState::Finished {
                let base_sha = job.base.as_ref().map(|(_, sha)| sha.clone());
                checks.record_outcome(base_sha, &events).await;
            }
        }
        if let (Some(task), Some(commits)) = (commit_task, &commits) {
            task.abort();
            let _ = task.await;
            // A commit made just before the lane finished is still reported.
            commits.check(Look::Last).await;
        }
        if let Terminal::Tmux(server) = &job.terminal {
            let _ = server.kill_session(&rig.session).await;
        }
        // The last write publishes the state file anyway; the guard that puts it back (and
        // records that it did) ends before it.
        publication_task.abort();
        let _ = publication_task.await;
        write_last(&recorder).await;
        drop(supervisor_lock);
        let _ = std::fs::remove_file(&socket);
        LaneResult {
            outcome,
            interrupted,
            degraded: recorder.degraded(),
        }
    }
}

/// A recipe's `merge_forward` step: the base brought in, or why not. `owned` is the lane's
/// state when no worker is driven any more: a base that cannot be brought in then holds the
/// lane as [`HELD`](finishing::HELD).
pub(super) async fn merge_step(
    checks: &LaneChecks,
    events: &EventLog,
    recorder: &StateRecorder,
    owned: Option<LaneState>,
) -> StepOutcome {
    match checks.bring_base_in(events, recorder, owned).await {
        (_, None) => StepOutcome::Done,
        (_, Some(problem)) => StepOutcome::Failed(problem),
    }
}

/// Takes a finished lane on as the policy says (`Recovery::finishing`): merge its base forward,
/// verify it, close it out — each at most once, with fresh facts after each. Returns the state
/// the lane is left in.
async fn finish_by_policy(
    checks: &LaneChecks,
    recovery: &mut Recovery,
    (job, events, recorder): (&LaneJob, &EventLog, &StateRecorder),
    mut state: LaneState,
) -> LaneState {
    let has_commands = |level| checks.spec.commands.contains_key(&level);
    // The policy decides on the branch as it is now, not as the last periodic check saw it.
    checks.check(events, recorder).await;
    loop {
        let (read, now) = read_lane(job, recorder);
        let decision = recovery.finishing(state, has_commands, read, now);
        match apply(decision, job, events, recorder) {
            Finishing::Steps(mut plan) => {
                // A finished lane has no worker: merging forward is the only step it can take.
                while plan == Plan::MergeForward {
                    let step = merge_step(checks, events, recorder, Some(state)).await;
                    if let StepOutcome::Failed(_) = step
                        && let Some((_, held)) = finishing::after_refused_merge(state)
                    {
                        state = held;
                    }
                    let (read, now) = read_lane(job, recorder);
                    plan = apply(recovery.step_done(step, read, now), job, events, recorder);
                }
            }
            Finishing::Verify(level) => {
                let verified = checks.verify(level, events, recorder, Some(state)).await;
                state = verified.lane_state;
            }
            Finishing::CloseOut { rule } => {
                let closed = Payload::ClosedOut(ClosedOut { rule });
                let _ = events.report(closed, None, None, None);
                return state;
            }
            Finishing::Nothing => return state,
        }
    }
}

/// The lane's last write, waited for and tried again a few times when it fails: the lane's
/// outcome is already in its event log, and this is what puts it in its state file before the
/// lane's supervisor lock goes (and before `spawn` or `run` may exit). When the writer's last
/// write succeeded the file already holds everything (each change is handed to the writer as
/// it is made), and it is not written again: on a busy supervisor every write is a new file
/// (an inode allocated, one freed) and two fsyncs.
async fn write_last(recorder: &StateRecorder) {
    recorder.flushed().await;
    if recorder.degraded().is_none() {
        return;
    }
    for attempt in 1..=FINAL_WRITE_TRIES {
        recorder.update(|_| {});
        recorder.flushed().await;
        if recorder.degraded().is_none() || attempt == FINAL_WRITE_TRIES {
            return;
        }
        tokio::time::sleep(FINAL_WRITE_BACKOFF).await;
    }
}
