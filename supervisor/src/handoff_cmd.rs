//! `clawpool diff` and `clawpool land`: flags in, the library's typed results out (text or
//! JSON). The diff is `clawpool_worktree::lane_diff`, the merge queue `clawpool_pool::land`.

use std::path::Path;
use std::process::ExitCode;

use clawpool_lane::registry::{RegistryFolder, lane_registry, registered_names};
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::{LaneStatus, read_lane_record};
use clawpool_pool::land::{LandOptions, LaneToLand, LaneVerdict};
use clawpool_worktree::{FileChange, LandMethod, LaneDiff, Repo};

use crate::cli::{DiffArgs, LandArgs, LandMethodArg, OutputFormat};
use crate::output::CommandError;

/// `clawpool diff LANE [--stat]`.
pub fn run_diff(args: &DiffArgs) -> Result<ExitCode, CommandError> {
    let found = crate::board::find_lane(&args.lane)?;
    let (name, diff) = lane_change(&found.dir, &found.events, !args.stat)?;
    match args.output_format {
        OutputFormat::Json => println!("{}", serde_json::to_string(&diff).unwrap_or_default()),
        OutputFormat::Text => print!("{}", describe_diff(&name, &diff)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The change of the lane whose worktree is `dir` and event log `events`, against its base as
/// registered (else the main branch), with its name: what `clawpool diff` prints and the
/// dashboard's diff view shows.
pub fn lane_change(
    dir: &Path,
    events: &Path,
    with_patch: bool,
) -> Result<(String, LaneDiff), CommandError> {
    let entry = RegistryFolder::of_events(events).entry().map_err(|_| {
        CommandError::invalid(
            "not_a_spawned_lane",
            format!(
                "{} is not a lane made by `clawpool spawn` (no registry entry): it has no base to compare with",
                dir.display()
            ),
        )
    })?;
    let repo =
        Repo::open(dir).map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let base = entry
        .base
        .git_ref
        .clone()
        .unwrap_or_else(|| repo.main_branch().unwrap_or_else(|_| "main".into()));
    let diff = clawpool_worktree::lane_diff(dir, &base, with_patch).map_err(|e| CommandError {
        kind: "diff_failed",
        message: e.to_string(),
        exit: crate::output::EXIT_FAILURE,
    })?;
    Ok((entry.name, diff))
}

fn describe_diff(lane: &str, diff: &LaneDiff) -> String {
    let short = |sha: &str| sha.chars().take(10).collect::<String>();
    let mut out = format!(
        "lane {lane}: {} commit(s) since {} (merge base {} with {} at {})\n",
        diff.commits.len(),
        short(&diff.merge_base),
        short(&diff.merge_base),
        diff.base,
        short(&diff.base_sha)
    );
    for commit in &diff.commits {
        out.push_str(&format!("  {} {}\n", short(&commit.sha), commit.summary));
    }
    out.push_str("committed:\n");
    files(&mut out, &diff.files);
    out.push_str("not committed:\n");
    files(&mut out, &diff.uncommitted);
    if let Some(patch) = &diff.patch
        && !patch.is_empty()
    {
        out.push_str("\n# committed\n");
        out.push_str(patch);
    }
    if let Some(patch) = &diff.uncommitted_patch
        && !patch.is_empty()
    {
        out.push_str("\n# not committed\n");
        out.push_str(patch);
    }
    out
}

fn files(out: &mut String, files: &[FileChange]) {
    for file in files {
        out.push_str(&format!("  {}\n", file_line(file)));
    }
    if files.is_empty() {
        out.push_str("  (nothing)\n");
    }
}

/// One file of a diff in one line: its status, its line counts and its path.
pub fn file_line(file: &FileChange) -> String {
    let counts = if file.binary {
        "binary".to_owned()
    } else {
        format!("+{} -{}", file.insertions, file.deletions)
    };
    let renamed = file
        .old_path
        .as_ref()
        .map(|old| format!(" (from {old})"))
        .unwrap_or_default();
    format!(
        "{:<10} {counts:>12}  {}{renamed}",
        clawpool_lanes::wire_name(&file.status),
        file.path
    )
}

/// `clawpool land LANE... | --ready`.
pub async fn run_land(args: &LandArgs) -> Result<ExitCode, CommandError> {
    let level = match GreenLevel::parse(&args.level) {
        Some(level) if level >= GreenLevel::Package => level,
        _ => {
            return Err(CommandError::invalid(
                "invalid_level",
                format!(
                    "level {:?} is not a broad level: expected package, workspace or merge_ready",
                    args.level
                ),
            ));
        }
    };
    if args.batch == Some(0) || args.timeout == Some(0) {
        return Err(CommandError::invalid(
            "invalid_argument",
            "--batch and --timeout must be at least 1",
        ));
    }
    if args.attempts == 0 {
        return Err(CommandError::invalid(
            "invalid_argument",
            "--attempts must be at least 1",
        ));
    }
    let mut lanes = Vec::new();
    let repo = if args.ready {
        let repo = Repo::open(&args.repo)
            .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
        for name in registered_names(&repo) {
            let registry = lane_registry(&repo, &name);
            let Ok(entry) = registry.entry() else {
                continue;
            };
            let Ok(doc) = read_lane_record(registry.dir(), &entry.worktree) else {
                continue;
            };
            if doc.lane_state().status() == LaneStatus::Finished
                && doc.green_level == Some(GreenLevel::MergeReady)
            {
                lanes.push(LaneToLand {
                    dir: entry.worktree,
                    events: registry.events(),
                });
            }
        }
        repo
    } else {
        for arg in &args.lanes {
            let found = crate::board::find_lane(arg)?;
            lanes.push(LaneToLand {
                dir: found.dir,
                events: found.events,
            });
        }
        let first = lanes.first().map(|l| l.dir.clone()).unwrap_or_default();
        Repo::open(&first).map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?
    };
    if lanes.is_empty() {
        // `--ready` with nothing ready: nothing to do is no failure.
        match args.output_format {
            OutputFormat::Json => println!("{{\"lanes\":[]}}"),
            OutputFormat::Text => {
                println!("no lane is ready to land (finished and green at merge_ready)")
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let options = LandOptions {
        method: match args.method {
            LandMethodArg::FastForward => LandMethod::FastForward,
            LandMethodArg::MergeCommit => LandMethod::MergeCommit,
        },
        level,
        attempts: args.attempts,
        timeout: args.timeout.map(std::time::Duration::from_secs),
        batch: args.batch,
    };
    let progress = crate::progress::Progress::spinner(
        args.output_format,
        format!("landing {} lane(s)", lanes.len()),
    );
    let report = clawpool_pool::land(&repo, &lanes, options).await;
    progress.clear();
    let report = report.map_err(|e| CommandError {
        kind: e.kind(),
        message: e.to_string(),
        exit: crate::output::EXIT_FAILURE,
    })?;
    match args.output_format {
        OutputFormat::Json => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
        OutputFormat::Text => {
            for verdict in &report.lanes {
                println!("{}", describe_verdict(verdict));
            }
            println!(
                "{}: {} -> {}",
                report.base_ref,
                short(&report.base_before),
                short(&report.base_after)
            );
        }
    }
    Ok(if report.lanes.iter().any(LaneVerdict::left_out) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn short(sha: &str) -> String {
    sha.chars().take(10).collect()
}

fn describe_verdict(verdict: &LaneVerdict) -> String {
    match verdict {
        LaneVerdict::Landed {
            lane,
            new_base,
            attempts,
            checkout_error,
            batch,
            ..
        } => {
            let again = if *attempts > 1 {
                format!(" (after {attempts} tries: the base moved meanwhile)")
            } else {
                String::new()
            };
            let checkout = checkout_error
                .as_ref()
                .map(|e| format!("; the base's checkout was not updated: {e}"))
                .unwrap_or_default();
            let together = batch
                .as_ref()
                .filter(|lanes| lanes.len() > 1)
                .map(|lanes| format!(" (with {})", lanes.join(", ")))
                .unwrap_or_default();
            format!(
                "landed    {lane}: base now {}{together}{again}{checkout}",
                short(new_base)
            )
        }
        LaneVerdict::AlreadyOnBase { lane } => format!("up to date {lane}: the base has all of it"),
        LaneVerdict::LeftOut { lane, failed } => {
            let failure = serde_json::to_value(failed.failure)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let logs = if failed.logs.is_empty() {
                String::new()
            } else {
                format!("\n          logs: {}", failed.logs.join(", "))
            };
            format!(
                "left out {lane} ({failure}): {}{logs}\n          next: {}",
                failed.reason, failed.next_action
            )
        }
    }
}
