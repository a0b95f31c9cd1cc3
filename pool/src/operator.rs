//! An operator's command to one lane — `trust`, `answer`, `send`, `stop`, `restart`,
//! `budget` — carried to the supervisor driving the lane over its control socket, and the
//! lane's typed [`Verdict`] back. A lane that ended answers from its record (how and when it
//! ended, and what takes it up again), and a `send` to a lane that was stopped or finished
//! becomes a follow-up ([`crate::follow_up`]): this process drives the lane to its new end,
//! or, when the request asks, the follow-up to a registered lane is checked and handed back to
//! the caller for the repository's daemon to run ([`OperateReply::HandOver`]).
//! Which lane an argument means is [`crate::lane_lookup`]'s; rendering the verdict is the
//! caller's.

use clawpool_lane::handshake::{OperatorCommand, Verdict, check_prompt};
use clawpool_lanes::state_file::{Liveness, now_secs, probe};
use clawpool_lanes::{LaneStatus, WorkerStateDoc};
use clawpool_worktree::Repo;

use crate::config::Loaded;
use crate::error::CommandError;
use crate::lane_lookup::{FoundLane, find_lane_arg};
use crate::request::{FollowUp, FollowUpHandOver, LaneArg, OperateReply, OperateRequest};

/// Runs an operator command. `loaded` gives the configuration a follow-up resumes the lane
/// with, loaded for the lane's folder only when a follow-up runs.
pub(crate) async fn operate<L: std::ops::Deref<Target = Loaded>>(
    request: OperateRequest,
    loaded: impl FnOnce(&FoundLane) -> Result<L, CommandError>,
) -> Result<OperateReply, CommandError> {
    if let OperatorCommand::Send { text } = &request.command {
        check_prompt(text).map_err(|e| CommandError::invalid("invalid_text", e.to_string()))?;
        let found = find_lane_arg(&request.lane)?;
        // No process drives a lane that ended: this one takes it up again, or the repository's
        // daemon does.
        if let Some(doc) = crate::follow_up::ended_lane(&found)
            && probe(&found.record()) != Liveness::Alive
        {
            if request.hand_over_follow_up
                && let Some(hand_over) = registered_hand_over(&found, &doc, text)
            {
                return Ok(OperateReply::HandOver(hand_over));
            }
            let loaded = loaded(&found)?;
            let result = crate::follow_up::run(
                &found,
                doc,
                text.clone(),
                &loaded,
                request.follow_up_stops_on_signals,
            )
            .await?;
            return Ok(OperateReply::FollowUp(FollowUp {
                accepted: result
                    .outcome
                    .as_ref()
                    .is_some_and(|o| o.receipt.accepted_at.is_some()),
                state: result.final_state(),
            }));
        }
    }
    Ok(OperateReply::Verdict(
        send_operator(&request.lane, &request.command).await?,
    ))
}

/// The follow-up to hand to the daemon of the lane's repository, when the lane is registered
/// there (a `clawpool run` lane has no daemon: its follow-up runs here).
fn registered_hand_over(
    found: &FoundLane,
    doc: &WorkerStateDoc,
    text: &str,
) -> Option<FollowUpHandOver> {
    let repo = Repo::open(&found.dir).ok()?;
    crate::lane_lookup::registered(&repo, &doc.lane)
        .filter(|registered| registered.record() == found.record())?;
    Some(FollowUpHandOver {
        repo,
        lane: doc.lane.clone(),
        text: text.to_owned(),
    })
}

/// Sends an operator command to the lane `lane` names and waits for its verdict.
pub async fn send_operator(
    lane: &LaneArg,
    command: &OperatorCommand,
) -> Result<Verdict, CommandError> {
    let lane = find_lane_arg(lane)?;
    let socket = lane.socket();
    let verdict = clawpool_lane::control::operator_verdict(&socket, command)
        .await
        .map_err(|why| {
            // A lane that ended is answered from its record, not from the socket it no
            // longer has.
            if let Ok(doc) = lane.state()
                && doc.status.is_terminal()
            {
                return CommandError::invalid(
                    "lane_not_running",
                    ended_lane_answer(&doc, command),
                );
            }
            CommandError::invalid(
                "lane_not_running",
                format!(
                    "no running lane at {} ({why}); is `clawpool run` or `clawpool spawn` running there?",
                    lane.dir.display()
                ),
            )
        })?;
    Ok(verdict)
}

/// What an operator command gets from a lane that ended: how and when it ended, as its state
/// file records it, and what (if anything) takes it up again.
fn ended_lane_answer(doc: &WorkerStateDoc, command: &OperatorCommand) -> String {
    let ago = now_secs().saturating_sub(doc.updated_at);
    let nothing = match command {
        OperatorCommand::Stop => "nothing to stop",
        OperatorCommand::Restart(_) => "nothing to restart",
        OperatorCommand::Send { .. } => "it takes no follow-up",
        _ => "nothing to answer",
    };
    let again = match doc.status {
        LaneStatus::Failed => "`clawpool spawn --rerun` starts its task again".to_owned(),
        _ => format!("`clawpool send {} TEXT` takes it up again", doc.lane),
    };
    format!(
        "lane {} ended {} {ago}s ago (at {}, epoch seconds; worker {}); {nothing}: {again}",
        doc.lane,
        doc.lane_state(),
        doc.updated_at,
        doc.worker_id
    )
}
