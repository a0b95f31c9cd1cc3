//! The operator commands the dashboard's keys run on the selected lane, in-process: each is
//! the pool's own request ([`Pool::handle`], as the CLI's command and the MCP server make it),
//! so its checks, its errors and its effect are exactly the CLI's, and the one line the
//! dashboard shows is read from the typed reply — the lane's verdict's reason, the merge's
//! outcome, the verification's result, or the error's message, the texts `clawpool COMMAND`
//! answers with.
//!
//! `send` is the exception. To a lane that ended (stopped or finished, no supervisor) it is a
//! follow-up, which drives the lane until its new end. The dashboard must not be that lane's
//! owner (quitting it would end the lane), so [`follow_up`] hands it to `clawpool send` run
//! as a child, as before the dashboard called the pool. To any other lane it goes in-process
//! through the part of the pool's `Operate` that never becomes a follow-up
//! (`clawpool_pool::operator::send_operator`): a lane that ends just as the text is sent is
//! answered from its record, never taken up by the dashboard.

use std::path::Path;
use std::sync::Arc;

use clawpool_lane::handshake::{OperatorCommand, RestartRequest, Verdict, check_prompt};
use clawpool_lanes::state_file::{Liveness, VerifyResult, probe};
use clawpool_lanes::{LaneStatus, wire_name};
use clawpool_pool::config::ConfigInput;
use clawpool_pool::error::CommandError;
use clawpool_pool::lane_checks::parse_level;
use clawpool_pool::lane_lookup::find_lane_arg;
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
        if let Action::Send(text) = self {
            // As the pool's own `send`: the text is checked before the lane is looked at.
            check_prompt(text).map_err(|e| CommandError::invalid("invalid_text", e.to_string()))?;
            if is_follow_up(&lane) {
                return Ok(follow_up(&lane, text, config.explicit.as_deref()).await);
            }
            // A lane that ended after the look above must not become a follow-up this
            // process drives: the command goes to the lane's control socket only, which
            // answers for an ended lane from its record (what takes it up again).
            let command = OperatorCommand::Send { text: text.clone() };
            let verdict = clawpool_pool::operator::send_operator(&lane, &command).await?;
            return Ok(Outcome::verdict(&label, &command, &verdict));
        }
        let pool = Pool::reading(config);
        if let Some(command) = self.operator_command() {
            let request = PoolRequest::Operate(OperateRequest {
                lane,
                command: command.clone(),
                follow_up_stops_on_signals: false,
            });
            let PoolReply::Operate(reply) = pool.handle(request, Arc::new(Silent)).await? else {
                unreachable!("the pool answers an operator request with an operator reply")
            };
            return Ok(match reply {
                OperateReply::Verdict(verdict) => Outcome::verdict(&label, &command, &verdict),
                OperateReply::FollowUp(_) => {
                    unreachable!("only a send becomes a follow-up, and a send is answered above")
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

/// Whether a `send` to `lane` is a follow-up, by the pool's rule: the lane's record says
/// stopped or finished, and no supervisor holds it.
fn is_follow_up(lane: &LaneArg) -> bool {
    let Ok(found) = find_lane_arg(lane) else {
        return false;
    };
    found
        .state()
        .is_ok_and(|doc| matches!(doc.status, LaneStatus::Stopped | LaneStatus::Finished))
        && probe(&found.dir) != Liveness::Alive
}

/// A follow-up to the ended `lane`: `clawpool send LANE TEXT` (with the dashboard's
/// `--config`, which the resumed lane's settings come from) run as a child of the dashboard,
/// which drives the lane to its new end while the dashboard stays live.
///
/// The repository's daemon is to own follow-ups (a lane the dashboard drove would end with
/// it); until it takes them, this is the one command the dashboard still runs as a child.
async fn follow_up(lane: &LaneArg, text: &str, config: Option<&Path>) -> Outcome {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(err) => {
            return Outcome {
                ok: false,
                message: format!("cannot find clawpool's own binary: {err}"),
            };
        }
    };
    let mut command = tokio::process::Command::new(program);
    command
        .current_dir(&lane.from)
        .arg("send")
        .arg(&lane.arg)
        .arg(text)
        .args(["--output-format", "json"]);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    let output = command.stdin(std::process::Stdio::null()).output().await;
    match output {
        Ok(output) => Outcome {
            ok: output.status.success(),
            message: follow_up_line(&output.stdout, &output.stderr),
        },
        Err(err) => Outcome {
            ok: false,
            message: format!("cannot run clawpool send: {err}"),
        },
    }
}

/// The one line of `clawpool send --output-format json`'s answer (docs/cli.md): the error's
/// message on stderr, else the verdict's reason on stdout, else the first line there is.
fn follow_up_line(stdout: &[u8], stderr: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Failed {
        error: Message,
    }
    #[derive(serde::Deserialize)]
    struct Message {
        message: String,
    }
    #[derive(serde::Deserialize)]
    struct Done {
        reason: String,
    }
    if let Ok(failed) = serde_json::from_slice::<Failed>(stderr) {
        return failed.error.message;
    }
    if let Ok(done) = serde_json::from_slice::<Done>(stdout) {
        return done.reason;
    }
    let text = if stderr.trim_ascii().is_empty() {
        stdout
    } else {
        stderr
    };
    String::from_utf8_lossy(text)
        .trim()
        .lines()
        .next()
        .unwrap_or("done")
        .to_owned()
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
    fn a_follow_ups_line_is_the_error_else_the_verdict() {
        assert_eq!(
            follow_up_line(
                b"",
                br#"{"error": {"kind": "lane_failed", "message": "the agent did not take it"}}"#
            ),
            "the agent did not take it"
        );
        assert_eq!(
            follow_up_line(
                br#"{"lane": "a", "verdict": "done", "reason": "follow-up delivered"}"#,
                b""
            ),
            "follow-up delivered"
        );
        assert_eq!(follow_up_line(b"", b"killed\n"), "killed");
    }

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
