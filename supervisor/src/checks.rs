//! `clawpool merge-forward` and `clawpool verify`: the flags as the pool's request (the pool's
//! [`clawpool_pool::lane_checks`] decides where the checks run and runs them), the typed
//! outcome rendered as lines for people or one JSON document, and the exit code.

use std::process::ExitCode;
use std::sync::Arc;

use clawpool_lane::control::VerifiedReply;
use clawpool_pool::config::ConfigInput;
use clawpool_pool::lane_checks::parse_level;
use clawpool_pool::observer::Silent;
use clawpool_pool::request::{LaneArg, VerifyRequest};
use clawpool_pool::{Pool, PoolReply, PoolRequest};
use clawpool_worktree::MergeOutcome;
use serde::Serialize;

use crate::cli::{MergeForwardArgs, OutputFormat, VerifyArgs};
use crate::output::CommandError;

/// Runs `request` in the pool (no progress to show: the binary's spinner says it runs).
async fn handle(request: PoolRequest) -> Result<PoolReply, CommandError> {
    Pool::reading(ConfigInput::of_this_process(None))
        .handle(request, Arc::new(Silent))
        .await
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
    let request = PoolRequest::MergeForward(LaneArg::here(&args.lane));
    let PoolReply::MergeForward(merge) = handle(request).await? else {
        unreachable!("the pool answers a merge-forward with a merge's outcome")
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
pub(crate) fn wire_outcome(merge: &MergeOutcome) -> String {
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
    let level = parse_level(&args.level)?;
    let progress = crate::progress::Progress::spinner(
        args.output_format,
        format!("verifying {} at {}", args.lane.display(), args.level),
    );
    let request = PoolRequest::Verify(VerifyRequest {
        lane: LaneArg::here(&args.lane),
        level,
    });
    let reply = handle(request).await;
    progress.clear();
    let PoolReply::Verify(reply) = reply? else {
        unreachable!("the pool answers a verify with a verification")
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

/// `clawpool verify --output-format json`'s document: `ok`, then the reply's fields (also the
/// MCP `verify_lane` tool's `result`).
pub fn verified_document(reply: &VerifiedReply) -> serde_json::Value {
    serde_json::json!({
        "ok": true,
        "verification": reply.verification,
        "green_level": reply.green_level,
        "lane_state": reply.lane_state,
    })
}
