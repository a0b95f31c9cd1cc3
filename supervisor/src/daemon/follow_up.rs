//! Follow-ups owned by the repository's pool server: one live owner per repository.
//!
//! A `send` to a stopped or finished registered lane (`clawpool send`, the MCP `send_to_lane`)
//! is checked by the pool where it was asked ([`OperateReply::HandOver`]) and handed here, to
//! the daemon, as a [`FollowUpRequest`] with the asking command's configuration. The daemon
//! runs it as one of its own lanes — the pool's [`PoolRequest::Operate`] in its own process,
//! counted by `status`, not stopped by any signal, left to run in tmux (and adoptable) over
//! `daemon --stop` as its other lanes are — and answers the asker once the lane ended again,
//! with the typed verdict the pool's follow-up came to. The asker only waits: ending it (a
//! signal, a closed MCP server) ends the waiting, never the lane.
//!
//! Only callers the daemon admits ask (its socket's check of the caller's process tree): a
//! lane's agent cannot drive another lane through the daemon.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use clawpool_lane::handshake::OperatorCommand;
use clawpool_pool::config::ConfigInput;
use clawpool_pool::observer::Silent;
use clawpool_pool::request::{FollowUp, FollowUpHandOver, LaneArg, OperateReply, OperateRequest};
use clawpool_pool::{Pool, PoolReply, PoolRequest};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

use super::protocol::{DaemonError, DaemonErrorKind, DaemonReply, FollowUpRequest, Reply, Request};
use crate::output::CommandError;

/// Runs `request` in the daemon as one of its lanes (counted in `running` until it ended) and
/// answers on `write` once the lane ended again. A caller that went away in the meantime is no
/// matter: the lane is the daemon's.
pub(super) fn serve(
    root: PathBuf,
    request: FollowUpRequest,
    running: &Arc<AtomicUsize>,
    mut write: OwnedWriteHalf,
) {
    running.fetch_add(1, Ordering::SeqCst);
    let running = Arc::clone(running);
    tokio::spawn(async move {
        let lane = request.lane.clone();
        eprintln!("clawpool: follow-up to lane {lane} taken");
        let reply = run(&root, request).await;
        running.fetch_sub(1, Ordering::SeqCst);
        eprintln!("clawpool: follow-up to lane {lane} over: {reply:?}");
        let line = serde_json::to_string(&DaemonReply::new(reply)).unwrap_or_default();
        let _ = write.write_all(format!("{line}\n").as_bytes()).await;
    });
}

/// The pool's follow-up, driven in this process to the lane's new end.
async fn run(root: &Path, request: FollowUpRequest) -> Reply {
    // A name only, looked up in this daemon's registry: never a folder elsewhere.
    if !clawpool_lanes::is_valid_lane_name(&request.lane) {
        return Reply::Error(DaemonError::new(
            DaemonErrorKind::BadRequest,
            format!(
                "{:?} is not a lane name (docs/task-packet.md, \"Lane names\")",
                request.lane
            ),
        ));
    }
    let operate = OperateRequest {
        lane: LaneArg {
            from: root.to_owned(),
            arg: PathBuf::from(&request.lane),
        },
        command: OperatorCommand::Send { text: request.text },
        // The daemon is stopped with `daemon --stop`, never its lanes by a signal.
        follow_up_stops_on_signals: false,
        hand_over_follow_up: false,
    };
    match Pool::reading(request.config)
        .handle(PoolRequest::Operate(operate), Arc::new(Silent))
        .await
    {
        Ok(PoolReply::Operate(OperateReply::FollowUp(follow_up))) => Reply::FollowedUp {
            accepted: follow_up.accepted,
            state: follow_up.state,
        },
        // Somebody drives the lane again: the text went to it as any send's does.
        Ok(PoolReply::Operate(OperateReply::Verdict(verdict))) => Reply::Sent { verdict },
        Ok(_) => Reply::Error(DaemonError::new(
            DaemonErrorKind::FollowUpFailed,
            "the pool answered a follow-up with something else",
        )),
        Err(err) => Reply::Error(DaemonError::of_follow_up(err)),
    }
}

/// Hands `hand_over` to the repository's daemon — starting one (with `--config
/// config_file`) when `start` and none listens — and waits until the lane ended again: the
/// reply as the pool's own. `Ok(None)`: no daemon listens and none was to be started; nothing
/// was sent, the caller runs the follow-up itself.
pub async fn hand_follow_up(
    hand_over: FollowUpHandOver,
    config: ConfigInput,
    config_file: Option<&Path>,
    start: bool,
) -> Result<Option<OperateReply>, CommandError> {
    let lane = hand_over.lane.clone();
    let message = Request::FollowUp(FollowUpRequest {
        lane: hand_over.lane,
        text: hand_over.text,
        config,
    });
    let Some(reply) = super::ask(&hand_over.repo, &message, config_file, start).await? else {
        return Ok(None);
    };
    Ok(Some(match reply {
        Reply::FollowedUp { accepted, state } => {
            OperateReply::FollowUp(FollowUp { accepted, state })
        }
        Reply::Sent { verdict } => OperateReply::Verdict(verdict),
        other => {
            return Err(super::refusal(
                other,
                &format!("the daemon did not take the follow-up to lane {lane}"),
            ));
        }
    }))
}
