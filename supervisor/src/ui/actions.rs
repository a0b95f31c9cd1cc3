//! The operator commands the dashboard's keys run on the selected lane, in-process: each is
//! the pool's own request ([`Pool::handle`], as the CLI's command and the MCP server make it),
//! so its checks, its errors and its effect are exactly the CLI's, and the one line the
//! dashboard shows is read from the typed reply — the lane's verdict's reason, the merge's
//! outcome, the verification's result, or the error's message, the texts `clawpool COMMAND`
//! answers with.
//!
//! A `send` to a lane that ended (stopped or finished, no supervisor) is a follow-up, which
//! drives the lane until its new end. The dashboard must not be that lane's owner (quitting it
//! would end the lane): the pool hands it back ([`OperateReply::HandOver`]) and the dashboard
//! gives it to the repository's daemon, starting one if none runs, as the MCP server does.

use std::path::Path;
use std::sync::Arc;

use clawpool_lane::handshake::{OperatorCommand, RestartRequest, Verdict};
use clawpool_lanes::state_file::VerifyResult;
use clawpool_lanes::{LaneState, wire_name};
use clawpool_pool::config::ConfigInput;
use clawpool_pool::error::CommandError;
use clawpool_pool::lane_checks::parse_level;
use clawpool_pool::observer::Silent;
use clawpool_pool::request::{
    LaneArg, OperateReply, OperateRequest, RecoverReply, RecoverRequest, VerifyRequest,
};
use clawpool_pool::{Pool, PoolReply, PoolRequest};
use clawpool_worktree::MergeOutcome;

/// An operator command on one lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `clawpool trust`.
    Trust,
    /// `clawpool answer --choice CHOICE`.
    Answer(String),
    /// `clawpool send TEXT`.
    Send(String),
    /// `clawpool stop`.
    Stop,
    /// `clawpool restart --resume`.
    Restart,
    /// `clawpool merge-forward`.
    MergeForward,
    /// `clawpool verify --level LEVEL`.
    Verify(String),
    /// `clawpool recover` (the recipe the policy decides).
    Recover,
}

/// What a command answered: whether it did it, and its one line.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command did it (the CLI's exit 0).
    pub ok: bool,
    /// What it said: the lane's verdict, the merge's outcome, the error's message.
    pub message: String,
}

impl Outcome {
    fn failed(err: CommandError) -> Self {
        Self {
            ok: false,
            message: err.message,
        }
    }

    /// An operator command's verdict: its reason when the lane did it, else the CLI's error
    /// (`lane alpha refused `clawpool stop`: …`).
    fn verdict(lane: &str, command: &OperatorCommand, verdict: &Verdict) -> Self {
        if verdict.is_done() {
            return Self {
                ok: true,
                message: verdict.reason().to_owned(),
            };
        }
        let (_, message) = crate::operator_cmd::verdict_error(lane, command, verdict);
        Self { ok: false, message }
    }
}

impl Action {
    /// The command as a person would type it (without the lane).
    pub fn describe(&self) -> String {
        match self {
            Action::Trust => "trust".into(),
            Action::Answer(choice) => format!("answer --choice {choice}"),
            Action::Send(text) => format!("send {text:?}"),
            Action::Stop => "stop".into(),
            Action::Restart => "restart --resume".into(),
            Action::MergeForward => "merge-forward".into(),
            Action::Verify(level) => format!("verify --level {level}"),
            Action::Recover => "recover".into(),
        }
    }

    /// The lane's control socket's command, for those it takes.
    fn operator_command(&self) -> Option<OperatorCommand> {
        Some(match self {
            Action::Trust => OperatorCommand::Trust,
            Action::Answer(choice) => OperatorCommand::Answer {
                choice: choice.clone(),
            },
            Action::Send(text) => OperatorCommand::Send { text: text.clone() },
            Action::Stop => OperatorCommand::Stop,
            Action::Restart => OperatorCommand::Restart(RestartRequest {
                by: "operator".into(),
                resume: true,
                redeliver: false,
            }),
            Action::MergeForward | Action::Verify(_) | Action::Recover => return None,
        })
    }

    /// Runs the command on `lane` (the lane's worktree, resolved in its repository, as the
    /// CLI run there would take it) and waits for its answer; `config` is what the pool reads
    /// the configuration from (the recovery policy, a follow-up's settings).
    pub async fn run(&self, lane: LaneArg, config: ConfigInput) -> Outcome {
        match self.run_in_pool(lane, config).await {
            Ok(outcome) => outcome,
            Err(err) => Outcome::failed(err),
        }
    }

    async fn run_in_pool(
        &self,
        lane: LaneArg,
        config: ConfigInput,
    ) -> Result<Outcome, CommandError> {
        let label = lane.label();
        let pool = Pool::reading(config.clone());
        if let Some(command) = self.operator_command() {
            let request = PoolRequest::Operate(OperateRequest {
                lane,
                command: command.clone(),
                follow_up_stops_on_signals: false,
                hand_over_follow_up: true,
            });
            let PoolReply::Operate(reply) = pool.handle(request, Arc::new(Silent)).await? else {
                unreachable!("the pool answers an operator request with an operator reply")
            };
            let reply = match reply {
                OperateReply::HandOver(hand_over) => {
                    let file = config.explicit.clone();
                    crate::daemon::follow_up::hand_follow_up(
                        hand_over,
                        config,
                        file.as_deref(),
                        true,
                    )
                    .await?
                    .ok_or_else(|| {
                        CommandError::invalid("daemon_not_running", "no daemon took the follow-up")
                    })?
                }
                reply => reply,
            };
            return Ok(match reply {
                OperateReply::Verdict(verdict) => Outcome::verdict(&label, &command, &verdict),
                OperateReply::FollowUp(follow_up) => {
                    let (verdict, _) = crate::operator_cmd::follow_up_verdict(&follow_up);
                    let mut outcome = Outcome::verdict(&label, &command, &verdict);
                    // As `clawpool send`'s exit: the lane must also have finished again.
                    outcome.ok &= follow_up.state == Some(LaneState::Finished);
                    outcome
                }
                OperateReply::HandOver(_) => {
                    unreachable!("a follow-up handed over is answered above")
                }
            });
        }
        match self {
            Action::MergeForward => {
                let request = PoolRequest::MergeForward(lane);
                let PoolReply::MergeForward(merge) = pool.handle(request, Arc::new(Silent)).await?
                else {
                    unreachable!("the pool answers a merge-forward with a merge's outcome")
                };
                Ok(Outcome {
                    ok: matches!(
                        merge,
                        MergeOutcome::Merged { .. } | MergeOutcome::UpToDate { .. }
                    ),
                    message: format!("merge-forward: {}", crate::checks::wire_outcome(&merge)),
                })
            }
            Action::Verify(level) => {
                let request = PoolRequest::Verify(VerifyRequest {
                    lane,
                    level: parse_level(level)?,
                });
                let PoolReply::Verify(reply) = pool.handle(request, Arc::new(Silent)).await? else {
                    unreachable!("the pool answers a verify with a verification")
                };
                let verification = &reply.verification;
                Ok(Outcome {
                    ok: verification.result == VerifyResult::Green,
                    message: format!(
                        "verify {}: {}",
                        wire_name(&verification.level),
                        wire_name(&verification.result)
                    ),
                })
            }
            Action::Recover => {
                let request = PoolRequest::Recover(RecoverRequest { lane, recipe: None });
                let PoolReply::Recover(reply) = pool.handle(request, Arc::new(Silent)).await?
                else {
                    unreachable!("the pool answers a recover with the recipe run or refused")
                };
                Ok(match reply {
                    RecoverReply::Ran(run) => {
                        Outcome::verdict(&run.lane, &run.command, &run.verdict)
                    }
                    RecoverReply::Refused(refused) => Outcome {
                        ok: false,
                        message: refused.message,
                    },
                })
            }
            Action::Trust
            | Action::Answer(_)
            | Action::Send(_)
            | Action::Stop
            | Action::Restart => unreachable!("operator commands are answered above"),
        }
    }
}

/// The lane argument the dashboard's commands take for the lane whose worktree is `worktree`,
/// of the repository whose top folder is `repo`.
pub fn lane_arg(repo: &Path, worktree: &Path) -> LaneArg {
    LaneArg {
        from: repo.to_owned(),
        arg: worktree.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_verdict_reads_as_the_clis_error() {
        let outcome = Outcome::verdict(
            "/w/alpha",
            &OperatorCommand::Stop,
            &Verdict::Refused {
                reason: "not now".into(),
                choices: Vec::new(),
            },
        );
        assert!(!outcome.ok);
        assert_eq!(
            outcome.message,
            "lane /w/alpha refused `clawpool stop`: not now"
        );
    }
}
