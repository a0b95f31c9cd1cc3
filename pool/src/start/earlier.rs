//! What earlier runs left of a packet's lanes: a finished lane, one a person stopped and one
//! `gc` removed are not started again; with `--rerun` they are, recorded as `lane.rerun`.

use clawpool_lane::registry::{RegistryFolder, lane_registry};
use clawpool_lanes::payload::{Payload, PreviousRun, Rerun};
use clawpool_lanes::{LaneEvent, LaneState};
use clawpool_worktree::Repo;

use super::PlannedLane;
use crate::error::CommandError;
use crate::request::{Skipped, SkippedLane};

/// What an earlier run left of lane `name` that keeps it from starting again: a registry
/// entry whose state file says finished or stopped, or gc's marker with no registry entry.
fn earlier_run(repo: &Repo, name: &str) -> Option<(Skipped, Option<LaneState>)> {
    let Ok(entry) = lane_registry(repo, name).entry() else {
        return repo
            .state_dir()
            .removed(name)
            .exists()
            .then_some((Skipped::RemovedByGc, None));
    };
    let doc =
        clawpool_lanes::read_lane_record(lane_registry(repo, name).dir(), &entry.worktree).ok()?;
    let why = match doc.status {
        clawpool_lanes::LaneStatus::Finished => Skipped::Finished,
        clawpool_lanes::LaneStatus::Stopped => Skipped::Stopped,
        _ => return None,
    };
    Some((why, Some(doc.lane_state())))
}

/// Sorts out the lanes an earlier run already dealt with: a finished lane, one a person
/// stopped, and one `gc` removed, are skipped; with `rerun` they run again (a fresh run of the
/// task, recorded as `lane.rerun`). Every other lane (never run, failed, or not ended) starts
/// as before.
pub fn leave_earlier_runs(
    repo: &Repo,
    lanes: Vec<PlannedLane>,
    rerun: bool,
) -> (Vec<PlannedLane>, Vec<SkippedLane>) {
    let mut to_start = Vec::new();
    let mut skipped = Vec::new();
    for mut lane in lanes {
        match earlier_run(repo, &lane.spec.name) {
            Some((why, _)) if rerun => {
                lane.rerun_of = Some(why);
                to_start.push(lane);
            }
            Some((why, state)) => skipped.push(SkippedLane {
                name: lane.spec.name.clone(),
                why,
                state,
            }),
            None => to_start.push(lane),
        }
    }
    (to_start, skipped)
}

/// Records in the lane's event log that `--rerun` starts a fresh run of its task after an
/// earlier run that finished (in the same worktree) or that gc removed (re-created: gc's
/// marker goes). The new run's state file starts afresh; its event log goes on. Returns the
/// event recorded.
pub(super) fn record_rerun(
    repo: &Repo,
    name: &str,
    registry: &RegistryFolder,
    earlier: Skipped,
) -> Result<LaneEvent, CommandError> {
    let events = clawpool_lanes::EventLog::open(name, &registry.events())
        .map_err(|e| CommandError::io("opening the lane's event log", e.source))?;
    let rerun = Rerun {
        by: "spawn --rerun".into(),
        previous: match earlier {
            Skipped::Finished => PreviousRun::Finished,
            Skipped::Stopped => PreviousRun::Stopped,
            Skipped::RemovedByGc => PreviousRun::RemovedByGc,
        },
    };
    let event = events
        .report(Payload::Rerun(rerun), None, None, None)
        .map_err(|e| CommandError::io("writing the lane's event log", e.source))?;
    if earlier == Skipped::RemovedByGc {
        let _ = std::fs::remove_file(repo.state_dir().removed(name));
    }
    Ok(event)
}
