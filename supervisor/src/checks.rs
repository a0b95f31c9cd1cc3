//! `clawpool merge-forward` and `clawpool verify`: through the lane's control socket while a
//! supervisor drives the lane, directly on its worktree otherwise — holding the lane's
//! supervisor lock, so never beside a live supervisor whose socket did not answer (the lane
//! engine's [`LaneChecks`] either way).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clawpool_lane::checks::LaneChecks;
use clawpool_lane::control::{ControlReply, ErrorKind, LaneOp, Request, VerifiedReply};
use clawpool_lane::lane_state::StateRecorder;
use clawpool_lane::registry::RegistryFolder;
use clawpool_lane::verify::FreshnessSettings;
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::state_file::SupervisorLock;
use clawpool_lanes::{EventLog, read_lane_record};
use clawpool_worktree::{MergeOutcome, Repo};
use serde::Serialize;

use crate::cli::{MergeForwardArgs, OutputFormat, VerifyArgs};
use crate::output::CommandError;

/// The lane's registry entry and files, for the commands that act on a lane directly.
struct LaneOnDisk {
    checks: LaneChecks,
    events: PathBuf,
    /// Its record folder (its registry folder).
    record: PathBuf,
    name: String,
}

fn lane_on_disk(arg: &Path) -> Result<LaneOnDisk, CommandError> {
    let found = crate::board::find_lane(arg)?;
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
        exit: crate::output::EXIT_FAILURE,
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

async fn run_op(lane_arg: &Path, op: LaneOp) -> Result<ControlReply, CommandError> {
    let lane = lane_on_disk(lane_arg)?;
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
        exit: crate::output::EXIT_FAILURE,
    }
}

/// The wire name of a value that serialises as one string (`green`, `passed`, …).
fn wire<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `clawpool merge-forward LANE`.
pub async fn run_merge_forward(args: MergeForwardArgs) -> Result<ExitCode, CommandError> {
    let merge = match run_op(&args.lane, LaneOp::MergeForward).await? {
        ControlReply::Merged { merge } => merge,
        other => return Err(unexpected("merge_forward_failed", other)),
    };
    match args.output_format {
        OutputFormat::Json => println!("{}", json_line(&merge)),
        OutputFormat::Text => println!("{}", describe_merge(&merge)),
    }
    Ok(match merge {
        MergeOutcome::Merged { .. } | MergeOutcome::UpToDate { .. } => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// `value` as one JSON line.
fn json_line<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn describe_merge(merge: &MergeOutcome) -> String {
    match merge {
        MergeOutcome::Merged {
            old_head,
            new_head,
            base_sha,
            ..
        } => format!("merged {base_sha} forward: {old_head} -> {new_head}"),
        MergeOutcome::UpToDate { base_sha, .. } => format!("up to date with {base_sha}"),
        MergeOutcome::Dirty { paths } => {
            format!("refused: uncommitted changes in {}", paths.join(", "))
        }
        MergeOutcome::Conflict { paths, head, .. } => format!(
            "conflict in {}; aborted, the lane is back at {head}",
            paths.join(", ")
        ),
        MergeOutcome::Detached { sha } => format!("refused: HEAD is detached at {sha}"),
        MergeOutcome::Diverged { .. } => {
            "refused: the branch shares no history with its base".into()
        }
        MergeOutcome::OperationInProgress { .. } => format!(
            "refused: a git operation is in progress ({})",
            json_line(merge)
        ),
        other => format!("{}: {}", wire_outcome(other), json_line(other)),
    }
}

/// The outcome's name on the wire (`not_applied`, …).
fn wire_outcome(merge: &MergeOutcome) -> String {
    #[derive(serde::Deserialize)]
    struct Tag {
        outcome: String,
    }
    serde_json::to_string(merge)
        .ok()
        .and_then(|line| serde_json::from_str::<Tag>(&line).ok())
        .map(|tag| tag.outcome)
        .unwrap_or_default()
}

/// `clawpool verify LANE [--level LEVEL]`.
pub async fn run_verify(args: VerifyArgs) -> Result<ExitCode, CommandError> {
    let level = GreenLevel::parse(&args.level).ok_or_else(|| {
        CommandError::invalid(
            "invalid_level",
            format!(
                "unknown level {:?}: expected targeted, package, workspace or merge_ready",
                args.level
            ),
        )
    })?;
    let progress = crate::progress::Progress::spinner(
        args.output_format,
        format!("verifying {} at {}", args.lane.display(), args.level),
    );
    let reply = run_op(&args.lane, LaneOp::Verify { level }).await;
    progress.clear();
    let reply = match reply? {
        ControlReply::Verified(reply) => reply,
        other => return Err(unexpected("verify_failed", other)),
    };
    let verification = &reply.verification;
    match args.output_format {
        OutputFormat::Json => println!("{}", verified_document(&reply)),
        OutputFormat::Text => {
            for command in &verification.commands {
                println!(
                    "{:<7} {:>7} ms  {}  (log: {})",
                    wire(&command.outcome),
                    command.duration_ms,
                    command.command,
                    command.log
                );
            }
            let reason = verification
                .reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            println!(
                "{}: {}{reason}; green level: {}",
                verification.level,
                wire(&verification.result),
                reply
                    .green_level
                    .map_or_else(|| "none".to_owned(), |level| level.to_string())
            );
        }
    }
    Ok(
        if verification.result == clawpool_lanes::state_file::VerifyResult::Green {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}

/// `clawpool verify --output-format json`'s document: `ok`, then the reply's fields.
fn verified_document(reply: &VerifiedReply) -> String {
    serde_json::json!({
        "ok": true,
        "verification": reply.verification,
        "green_level": reply.green_level,
        "lane_state": reply.lane_state,
    })
    .to_string()
}
