//! `clawpool merge-forward` and `clawpool verify`: through the lane's control socket while a
//! supervisor drives the lane, directly on its worktree otherwise — holding the lane's
//! supervisor lock, so never beside a live supervisor whose socket did not answer (the lane
//! engine's [`LaneChecks`] either way).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clawpool_lane::checks::{LaneChecks, verified_json};
use clawpool_lane::control::LaneOp;
use clawpool_lane::lane_state::StateRecorder;
use clawpool_lane::registry::RegistryFolder;
use clawpool_lane::verify::FreshnessSettings;
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::state_file::SupervisorLock;
use clawpool_lanes::{EventLog, read_lane_record};
use clawpool_worktree::Repo;
use serde_json::Value;

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
async fn through_supervisor(record: &Path, op: &LaneOp) -> Option<Value> {
    let socket = clawpool_worktree::layout::control_socket(record);
    let line = serde_json::to_string(op).ok()?;
    let reply = clawpool_lane::control::request(&socket, &line).await.ok()?;
    serde_json::from_str(&reply).ok()
}

/// Runs `op` on a lane no supervisor drives: this process writes its events and state file.
async fn directly(lane: &LaneOnDisk, op: &LaneOp) -> Result<Value, CommandError> {
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
        LaneOp::MergeForward => lane.checks.merge_forward(&events, &recorder, owned).await,
        LaneOp::Verify { level } => {
            verified_json(&lane.checks.verify(*level, &events, &recorder, owned).await)
        }
    })
}

async fn run_op(lane_arg: &Path, op: LaneOp) -> Result<Value, CommandError> {
    let lane = lane_on_disk(lane_arg)?;
    match through_supervisor(&lane.record, &op).await {
        Some(reply) => Ok(reply),
        None => directly(&lane, &op).await,
    }
}

/// `clawpool merge-forward LANE`.
pub async fn run_merge_forward(args: MergeForwardArgs) -> Result<ExitCode, CommandError> {
    let reply = run_op(&args.lane, LaneOp::MergeForward).await?;
    if reply["ok"] != true {
        return Err(CommandError {
            kind: "merge_forward_failed",
            message: reply["error"].as_str().unwrap_or_default().to_owned(),
            exit: crate::output::EXIT_FAILURE,
        });
    }
    let merge = &reply["merge"];
    match args.output_format {
        OutputFormat::Json => println!("{merge}"),
        OutputFormat::Text => println!("{}", describe_merge(merge)),
    }
    Ok(match merge["outcome"].as_str() {
        Some("merged" | "up_to_date") => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

fn describe_merge(merge: &Value) -> String {
    let text = |key: &str| merge[key].as_str().unwrap_or_default().to_owned();
    let paths = || {
        merge["paths"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    match merge["outcome"].as_str().unwrap_or_default() {
        "merged" => format!(
            "merged {} forward: {} -> {}",
            text("base_sha"),
            text("old_head"),
            text("new_head")
        ),
        "up_to_date" => format!("up to date with {}", text("base_sha")),
        "dirty" => format!("refused: uncommitted changes in {}", paths()),
        "conflict" => format!(
            "conflict in {}; aborted, the lane is back at {}",
            paths(),
            text("head")
        ),
        "detached" => format!("refused: HEAD is detached at {}", text("sha")),
        "diverged" => "refused: the branch shares no history with its base".into(),
        "operation_in_progress" => format!("refused: a git operation is in progress ({merge})"),
        other => format!("{other}: {merge}"),
    }
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
    let reply = reply?;
    let verification = &reply["verification"];
    match args.output_format {
        OutputFormat::Json => println!("{reply}"),
        OutputFormat::Text => {
            for command in verification["commands"].as_array().into_iter().flatten() {
                println!(
                    "{:<7} {:>7} ms  {}  (log: {})",
                    command["outcome"].as_str().unwrap_or_default(),
                    command["duration_ms"],
                    command["command"].as_str().unwrap_or_default(),
                    command["log"].as_str().unwrap_or_default()
                );
            }
            let reason = verification["reason"]
                .as_str()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            println!(
                "{}: {}{reason}; green level: {}",
                verification["level"].as_str().unwrap_or_default(),
                verification["result"].as_str().unwrap_or_default(),
                reply["green_level"].as_str().unwrap_or("none")
            );
        }
    }
    Ok(if verification["result"] == "green" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
