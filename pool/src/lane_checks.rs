//! A lane's checks on request — `merge-forward` (its base merged into its branch) and
//! `verify` (its commands run at a green level): through the lane's control socket while a
//! supervisor drives the lane, directly on its worktree otherwise — holding the lane's
//! supervisor lock, so never beside a live supervisor whose socket did not answer. The
//! checks themselves are the lane engine's ([`LaneChecks`]); this module decides where they
//! run and answers their typed outcome.

use std::path::{Path, PathBuf};

use clawpool_lane::checks::LaneChecks;
use clawpool_lane::control::{ControlReply, ErrorKind, LaneOp, Request, VerifiedReply};
use clawpool_lane::lane_state::StateRecorder;
use clawpool_lane::registry::RegistryFolder;
use clawpool_lane::verify::FreshnessSettings;
use clawpool_lanes::state_file::{GreenLevel, SupervisorLock};
use clawpool_lanes::{EventLog, read_lane_record};
use clawpool_worktree::{MergeOutcome, Repo};

use crate::error::{CommandError, EXIT_FAILURE};
use crate::lane_lookup::find_lane_arg;
use crate::request::{LaneArg, VerifyRequest};

/// A green level by its name (`targeted`, `package`, `workspace`, `merge_ready`), or the
/// `invalid_level` error naming what was given.
pub fn parse_level(level: &str) -> Result<GreenLevel, CommandError> {
    GreenLevel::parse(level).ok_or_else(|| {
        CommandError::invalid(
            "invalid_level",
            format!(
                "unknown level {level:?}: expected targeted, package, workspace or merge_ready"
            ),
        )
    })
}

/// Merges the lane's base into its branch; the merge's outcome, whatever it was.
pub(crate) async fn merge_forward(lane: &LaneArg) -> Result<MergeOutcome, CommandError> {
    match run_op(lane, LaneOp::MergeForward).await? {
        ControlReply::Merged { merge } => Ok(merge),
        other => Err(unexpected("merge_forward_failed", other)),
    }
}

/// Verifies the lane at the level asked; the verification, green or not.
pub(crate) async fn verify(request: &VerifyRequest) -> Result<Box<VerifiedReply>, CommandError> {
    let op = LaneOp::Verify {
        level: request.level,
    };
    match run_op(&request.lane, op).await? {
        ControlReply::Verified(reply) => Ok(reply),
        other => Err(unexpected("verify_failed", other)),
    }
}

/// The lane's registry entry and files, for acting on a lane directly.
struct LaneOnDisk {
    checks: LaneChecks,
    events: PathBuf,
    /// Its record folder (its registry folder).
    record: PathBuf,
    name: String,
}

fn lane_on_disk(lane: &LaneArg) -> Result<LaneOnDisk, CommandError> {
    let found = find_lane_arg(lane)?;
    let registry = RegistryFolder::of_events(&found.events);
    let entry = registry.entry().map_err(|_| {
            CommandError::invalid(
                "not_a_spawned_lane",
                format!(
                    "{} is not a lane made by `clawpool spawn` (no registry entry): it has no base to compare with",
                    found.dir.display()
                ),
            )
        })?;
    let repo = Repo::open(&found.dir)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    Ok(LaneOnDisk {
        checks: LaneChecks::from_registry(
            &entry,
            &repo,
            &found.dir,
            &registry,
            FreshnessSettings::default(),
        ),
        record: found.record(),
        events: found.events,
        name: entry.name.clone(),
    })
}

/// Sends `op` to the supervisor driving the lane, if one is; `None` when none listens.
async fn through_supervisor(record: &Path, op: LaneOp) -> Option<ControlReply> {
    let socket = clawpool_worktree::layout::control_socket(record);
    let request = match op {
        LaneOp::MergeForward => Request::MergeForward,
        LaneOp::Verify { level } => Request::Verify { level },
    };
    clawpool_lane::control::ask(&socket, request).await.ok()
}

/// Runs `op` on a lane no supervisor drives: this process writes its events and state file.
async fn directly(lane: &LaneOnDisk, op: LaneOp) -> Result<ControlReply, CommandError> {
    // Nobody may drive the lane while this process changes it: a supervisor that holds it but
    // did not answer is refused, not raced.
    let _lock = SupervisorLock::hold(&lane.record).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => CommandError::invalid(
            "lane_busy",
            format!("{e}; its control socket did not answer: try again"),
        ),
        _ => CommandError::io("taking the lane's supervisor lock", e),
    })?;
    let doc = read_lane_record(&lane.record, &lane.checks.dir).map_err(|e| CommandError {
        kind: e.kind(),
        message: e.to_string(),
        exit: EXIT_FAILURE,
    })?;
    // Nobody else drives the lane: its state is this process's to change, from its record.
    let owned = Some(doc.lane_state());
    let recorder = StateRecorder::new(doc, &lane.record, Some(&lane.checks.dir));
    let on_state = recorder.clone();
    let events = EventLog::open(&lane.name, &lane.events)
        .map_err(|e| CommandError::io("opening the lane's event log", e.source))?
        .observe(Box::new(move |event| on_state.on_event(event)));
    Ok(match op {
        LaneOp::MergeForward => match lane.checks.merge_forward(&events, &recorder, owned).await {
            Ok(merge) => ControlReply::Merged { merge },
            Err(error) => ControlReply::Error(clawpool_lane::control::ControlError::new(
                ErrorKind::MergeFailed,
                error,
            )),
        },
        LaneOp::Verify { level } => ControlReply::Verified(Box::new(VerifiedReply::from(
            &lane.checks.verify(level, &events, &recorder, owned).await,
        ))),
    })
}

async fn run_op(lane: &LaneArg, op: LaneOp) -> Result<ControlReply, CommandError> {
    let lane = lane_on_disk(lane)?;
    match through_supervisor(&lane.record, op).await {
        Some(reply) => Ok(reply),
        None => directly(&lane, op).await,
    }
}

/// A reply that is not the one `op` asks for: the lane's error (`kind` the caller's, since a
/// lane that ended answers the same way for both), or a reply of the wrong shape.
fn unexpected(kind: &'static str, reply: ControlReply) -> CommandError {
    CommandError {
        kind,
        message: match reply {
            ControlReply::Error(error) => error.message,
            other => format!("the lane gave a reply of another request: {other:?}"),
        },
        exit: EXIT_FAILURE,
    }
}
