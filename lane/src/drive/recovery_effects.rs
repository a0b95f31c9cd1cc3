//! Where recovery's decisions meet the lane's files: what recovery is told of the lane before
//! it decides (its facts as the state file and event log have them, and the time), and its
//! [`Effect`]s carried out in order after (events recorded, the ledger saved, `notify` hooks
//! run). Recovery itself reads and writes nothing (`crate::recovering`).

use clawpool_lanes::EventLog;
use clawpool_lanes::state_file::now_secs;
use clawpool_recovery::LaneFacts;

use super::LaneJob;
use crate::lane_state::StateRecorder;
use crate::recovering::{Decision, Effect};

/// The lane as recovery is told it now: its facts, and the time (epoch s).
pub(super) fn read_lane(job: &LaneJob, recorder: &StateRecorder) -> (LaneFacts, u64) {
    let now = now_secs();
    let facts = crate::facts::lane_facts(&recorder.doc(), &job.events_path, now);
    (facts, now)
}

/// Carries out what recovery decided besides its next step, in order, and returns the step.
/// An event that cannot be written is the event log's to report (it degrades the lane's
/// state file); recovery goes on as decided.
pub(super) fn apply<T>(
    decision: Decision<T>,
    job: &LaneJob,
    events: &EventLog,
    recorder: &StateRecorder,
) -> T {
    carry_out(decision.effects, job, events, recorder);
    decision.next
}

/// Carries out `effects` in order.
pub(super) fn carry_out(
    effects: Vec<Effect>,
    job: &LaneJob,
    events: &EventLog,
    recorder: &StateRecorder,
) {
    for effect in effects {
        match effect {
            Effect::Report { payload, from, to } => {
                let _ = events.report(payload, from, to, None);
            }
            Effect::Record { payload } => {
                let _ = events.report(payload, None, None, None);
            }
            Effect::Save(record) => recorder.update(|doc| doc.recovery = record),
            Effect::Notify { hook, rule, facts } => {
                let log = job.events_path.with_file_name(crate::hooks::HOOKS_LOG);
                crate::hooks::notify(&job.policy, &hook, &rule, &facts, &log);
            }
        }
    }
}
