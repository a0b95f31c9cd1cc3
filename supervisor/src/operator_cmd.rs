//! The operator commands (`trust`, `answer`, `send`, `stop`, `restart`, `budget`) as the
//! binary sees them: the flags as the pool's [`PoolRequest::Operate`] (the pool finds the lane,
//! carries the command to it, and checks a follow-up to a lane that ended, which the
//! repository's daemon runs when one listens and this process otherwise), and the typed reply
//! rendered — a line for people, or one JSON document (the MCP tools answer the same
//! documents) — with the exit code.

use std::process::ExitCode;
use std::sync::Arc;

use clawpool_lane::caller::{Caller, ProcFs};
use clawpool_lane::handshake::{OperatorCommand, Verdict};
use clawpool_lane::interrupt::Interrupt;
use clawpool_lanes::LaneState;
use clawpool_pool::request::{FollowUp, FollowUpHandOver, LaneArg, OperateReply, OperateRequest};
use clawpool_pool::{Pool, PoolReply, PoolRequest};
use serde_json::json;

use crate::cli::OutputFormat;
use crate::output::CommandError;

/// Reports a follow-up to an ended lane (`clawpool send` on a stopped or finished lane, which
/// drove the lane to its new end): delivered when the agent took the text as a new turn
/// (exit 0 when the lane then finished), otherwise an error as any verdict's, `lane_failed`.
pub fn print_follow_up(lane: &str, follow_up: &FollowUp, format: OutputFormat) -> ExitCode {
    let (verdict, extra) = follow_up_verdict(follow_up);
    let command = OperatorCommand::Send {
        text: String::new(),
    };
    let code = print_verdict(lane, &command, &verdict, format, extra);
    if follow_up.accepted && follow_up.state != Some(LaneState::Finished) {
        return ExitCode::from(crate::output::EXIT_FAILURE);
    }
    code
}

/// A follow-up as a verdict, and the fields its document adds (`send`, `state`, `follow_up`).
pub fn follow_up_verdict(follow_up: &FollowUp) -> (Verdict, serde_json::Value) {
    let ended = follow_up
        .state
        .map_or_else(|| "unknown".to_owned(), |s| s.to_string());
    let verdict = if follow_up.accepted {
        Verdict::done(format!(
            "follow-up delivered as a new turn of the lane's session; the lane ended {ended}"
        ))
    } else {
        Verdict::Failed {
            reason: format!(
                "the agent started again did not take the text; the lane ended {ended}"
            ),
        }
    };
    let extra = json!({"send": if follow_up.accepted { "delivered" } else { "not_delivered" }, "state": follow_up.state, "follow_up": true});
    (verdict, extra)
}

/// An operator command's verdict as one JSON document: `lane`, `command`, the verdict's
/// fields and `extra`'s (what `--output-format json` prints, and the MCP tools answer).
pub fn verdict_document(
    lane: &str,
    command: &OperatorCommand,
    verdict: &Verdict,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut document = json!({"lane": lane, "command": command.describe()});
    if let (Some(fields), Ok(serde_json::Value::Object(verdict_fields))) =
        (document.as_object_mut(), serde_json::to_value(verdict))
    {
        fields.extend(verdict_fields);
        if let serde_json::Value::Object(extra) = extra {
            fields.extend(extra);
        }
    }
    document
}

/// The error an operator command that the lane did not do comes to: `kind` `lane_ignored`,
/// `lane_refused`, `lane_over_budget` or `lane_failed`, and its message.
pub fn verdict_error(lane: &str, command: &OperatorCommand, verdict: &Verdict) -> (String, String) {
    let kind = format!("lane_{}", verdict.name());
    let message = format!(
        "lane {lane} {} `clawpool {}`: {}",
        verdict.name(),
        command.describe(),
        verdict.reason()
    );
    (kind, message)
}

/// Prints an operator command's verdict and returns the exit status: on stdout and 0 when the
/// lane did it; otherwise an error (JSON: one document on stderr, `kind` `lane_ignored`,
/// `lane_refused` or `lane_failed`, with the verdict's fields) and 1. `extra` adds fields to the
/// JSON document.
pub fn print_verdict(
    lane: &str,
    command: &OperatorCommand,
    verdict: &Verdict,
    format: OutputFormat,
    extra: serde_json::Value,
) -> ExitCode {
    let mut document = verdict_document(lane, command, verdict, extra);
    if verdict.is_done() {
        match format {
            OutputFormat::Json => println!("{document}"),
            OutputFormat::Text => println!("lane {lane}: {}", verdict.reason()),
        }
        return ExitCode::SUCCESS;
    }
    let (kind, message) = verdict_error(lane, command, verdict);
    match format {
        OutputFormat::Json => {
            document["kind"] = kind.into();
            document["message"] = message.into();
            eprintln!("{}", json!({ "error": document }));
        }
        OutputFormat::Text => eprintln!("clawpool: error: {message}"),
    }
    ExitCode::from(crate::output::EXIT_FAILURE)
}

/// An operator command (`trust`, `answer`, `send`, `stop`, `restart`, `budget`) as the pool's
/// request, its reply rendered: exit 0 only when the lane did it. `config` is read only if a
/// `send` becomes a follow-up. A follow-up to a registered lane goes to the repository's daemon
/// when one listens (this command then only waits for its end: SIGINT/SIGTERM end the waiting,
/// the lane runs on under the daemon); otherwise this process runs it, as `run` would.
pub async fn operate(
    lane: &std::path::Path,
    command: OperatorCommand,
    format: OutputFormat,
    config: clawpool_pool::config::ConfigInput,
) -> Result<ExitCode, CommandError> {
    let request = |hand_over_follow_up| OperateRequest {
        lane: LaneArg::here(lane),
        command: command.clone(),
        follow_up_stops_on_signals: true,
        hand_over_follow_up,
    };
    let pool = Pool::reading(config.clone());
    let label = lane.display().to_string();
    let reply = match handle(&pool, request(true)).await? {
        OperateReply::HandOver(hand_over) => match wait_on_daemon(hand_over, config).await? {
            Some(reply) => reply,
            // No daemon serves the repository: this process takes the lane up again, unless
            // it runs inside a lane (a lane's agent drives no other lane, nor its own anew).
            None => {
                refuse_inside_a_lane()?;
                handle(&pool, request(false)).await?
            }
        },
        reply => reply,
    };
    Ok(match reply {
        OperateReply::Verdict(verdict) => {
            print_verdict(&label, &command, &verdict, format, serde_json::Value::Null)
        }
        OperateReply::FollowUp(follow_up) => print_follow_up(&label, &follow_up, format),
        OperateReply::HandOver(_) => unreachable!("a follow-up is handed over only when asked"),
    })
}

/// Runs an operator request in the pool.
async fn handle(pool: &Pool, request: OperateRequest) -> Result<OperateReply, CommandError> {
    let reply = pool
        .handle(
            PoolRequest::Operate(request),
            Arc::new(clawpool_pool::observer::Silent),
        )
        .await?;
    let PoolReply::Operate(reply) = reply else {
        unreachable!("the pool answers an operator request with an operator reply")
    };
    Ok(reply)
}

/// Hands a follow-up to the repository's daemon, if one listens, and waits for the lane's new
/// end. SIGINT/SIGTERM end the waiting (`interrupted`, the signal's exit code), not the lane:
/// it is the daemon's. `None`: no daemon listens; nothing was sent.
async fn wait_on_daemon(
    hand_over: FollowUpHandOver,
    config: clawpool_pool::config::ConfigInput,
) -> Result<Option<OperateReply>, CommandError> {
    let interrupt =
        Interrupt::listen().map_err(|e| CommandError::io("listening for SIGINT/SIGTERM", e))?;
    let lane = hand_over.lane.clone();
    let socket = crate::daemon::socket_path(&hand_over.repo);
    tokio::select! {
        reply = crate::daemon::follow_up::hand_follow_up(hand_over, config, None, false) => reply,
        signal = interrupt.wait() => Err(CommandError {
            kind: "interrupted",
            message: format!(
                "stopped waiting on {}: the follow-up to lane {lane} goes on under the \
                 repository's daemon ({}), which owns it; `clawpool wait {lane} --until \
                 finished` or `clawpool board` follow it, `clawpool stop {lane}` stops it",
                signal.name(),
                socket.display()
            ),
            exit: signal.exit_code(),
        }),
    }
}

/// Refuses (`caller_refused`) when this process runs inside a lane.
fn refuse_inside_a_lane() -> Result<(), CommandError> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    Caller::identify(std::process::id(), uid, &ProcFs)
        .check_operator()
        .map(drop)
        .map_err(|refusal| CommandError {
            kind: "caller_refused",
            message: format!("a lane may not take a lane up again: {}", refusal.reason),
            exit: crate::output::EXIT_FAILURE,
        })
}
