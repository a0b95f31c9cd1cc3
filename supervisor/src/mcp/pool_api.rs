//! The MCP server's one way into the pool: every tool reaches lanes through here.
//!
//! Reads are in-process, on what the pool and lanes crates already own: the repository's event
//! stream and waiting on it (`clawpool_pool`), the lane registry and records (the board's
//! [`crate::board::board_lane`], the same documents `clawpool board`/`state` print).
//!
//! Operations are the pool's typed requests, in-process ([`clawpool_pool::Pool::handle`]):
//! send, stop, answer, trust, restart, recover, verify, merge-forward, and spawn (`detach`, the
//! pool's hand-over given to the repository's daemon as `clawpool spawn --detach` gives it); a
//! send to a lane that ended is a follow-up, handed to the repository's daemon (started when
//! none runs) and waited for, so the server owns no long-lived lane. Each tool's `result`
//! document is built from the typed reply by the same rendering the CLI's `--output-format
//! json` uses, so the documents are the CLI's. The configuration is read for each operation, as a command would read it.
//! A lane's control socket and the daemon see this server as the operator: one outside every
//! lane exactly when this server runs outside every lane (`mcp/mod.rs` checks). No operation
//! runs a child `clawpool`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clawpool_lane::handshake::{OperatorCommand, RestartRequest, Verdict};
use clawpool_lanes::stream::StreamEvent;
use clawpool_lanes::{LaneEvent, LaneState, WorkerStateDoc, with_ages};
use clawpool_pool::config::ConfigInput;
use clawpool_pool::error::CommandError;
use clawpool_pool::lane_checks::parse_level;
use clawpool_pool::observer::Silent;
use clawpool_pool::request::{
    LaneArg, RecoverReply, RecoverRequest, SpawnReply, SpawnRequest, Transport, VerifyRequest,
};
use clawpool_pool::request::{OperateReply, OperateRequest};
use clawpool_pool::{Follower, Pool, PoolReply, PoolRequest, Start, Until, WaitOutcome};
use clawpool_worktree::MergeOutcome;
use clawpool_worktree::Repo;
use clawpool_worktree::layout::{EVENTS, StateDir};
use serde_json::Value;

/// A failure with the `kind` the CLI's JSON errors carry.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The stable name (`unknown_lane`, `lane_refused`, …).
    pub kind: String,
    /// In words.
    pub message: String,
    /// The rest of the CLI's error document (a verdict's fields), `Null` when none.
    pub detail: Value,
}

impl From<CommandError> for ApiError {
    fn from(err: CommandError) -> Self {
        Self::new(err.kind, err.message)
    }
}

impl ApiError {
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            message: message.into(),
            detail: Value::Null,
        }
    }
}

/// An operation on the pool, as the MCP tools ask for it.
#[derive(Debug, Clone)]
pub enum Operation {
    Spawn {
        name: String,
        prompt: String,
        agent: Option<String>,
        base: Option<String>,
    },
    /// A task packet in any of its forms (`docs/task-packet.md`), as `clawpool spawn PACKET`
    /// reads it from a file.
    SpawnPacket {
        packet: Value,
    },
    Send {
        lane: String,
        text: String,
    },
    Stop {
        lane: String,
    },
    Answer {
        lane: String,
        choice: String,
    },
    Trust {
        lane: String,
    },
    Restart {
        lane: String,
        resume: bool,
        redeliver: bool,
    },
    Recover {
        lane: String,
        recipe: Option<String>,
    },
    Verify {
        lane: String,
        level: Option<String>,
    },
    MergeForward {
        lane: String,
    },
}

impl Operation {
    /// The lane it names (a packet names its own, checked by the packet's rules).
    fn lane(&self) -> Option<&str> {
        Some(match self {
            Operation::SpawnPacket { .. } => return None,
            Operation::Spawn { name, .. } => name,
            Operation::Send { lane, .. }
            | Operation::Stop { lane }
            | Operation::Answer { lane, .. }
            | Operation::Trust { lane }
            | Operation::Restart { lane, .. }
            | Operation::Recover { lane, .. }
            | Operation::Verify { lane, .. }
            | Operation::MergeForward { lane } => lane,
        })
    }

    /// The operator command it is, for those the lane's control socket takes.
    fn operator_command(&self) -> Option<OperatorCommand> {
        Some(match self {
            Operation::Send { text, .. } => OperatorCommand::Send { text: text.clone() },
            Operation::Stop { .. } => OperatorCommand::Stop,
            Operation::Trust { .. } => OperatorCommand::Trust,
            Operation::Answer { choice, .. } => OperatorCommand::Answer {
                choice: choice.clone(),
            },
            Operation::Restart {
                resume, redeliver, ..
            } => OperatorCommand::Restart(RestartRequest {
                by: "operator".into(),
                resume: *resume,
                redeliver: *redeliver,
            }),
            _ => return None,
        })
    }
}

/// What an operation answered: the CLI's JSON document, and whether the CLI would exit 0
/// (`verify` and `merge-forward` answer a document that says what failed, exiting 1); for an
/// operator command, the lane's typed answer.
#[derive(Debug, Clone)]
pub struct OpReply {
    pub ok: bool,
    pub document: Value,
    pub answer: Option<LaneAnswer>,
}

/// What the lane did with an operator command.
#[derive(Debug, Clone)]
pub enum LaneAnswer {
    /// The verdict of the supervisor driving it.
    Verdict(Verdict),
    /// A follow-up to a lane that ended took the text as a new turn (the verdict in words).
    FollowedUp { reason: String },
}

/// The pool of one repository, as the MCP server sees it.
#[derive(Debug, Clone)]
pub struct PoolApi {
    /// The repository's top folder (operations run there, so lane names resolve in it).
    root: PathBuf,
    state: StateDir,
    config: Option<PathBuf>,
}

impl PoolApi {
    pub fn open(repo: &Path, config: Option<PathBuf>) -> Result<Self, ApiError> {
        let repo =
            Repo::open(repo).map_err(|e| ApiError::new("not_a_repository", e.to_string()))?;
        Ok(Self {
            root: repo.root().to_owned(),
            state: StateDir::of(repo.common_dir()),
            config: config.map(|c| c.canonicalize().unwrap_or(c)),
        })
    }

    /// The repository's clawpool folder (`<git common dir>/clawpool`).
    pub fn state_dir(&self) -> &StateDir {
        &self.state
    }

    fn repo(&self) -> Result<Repo, ApiError> {
        Repo::open(&self.root).map_err(|e| ApiError::new("not_a_repository", e.to_string()))
    }

    /// Every registered lane, as `clawpool board --output-format json` shows it.
    pub fn list_lanes(&self) -> Result<Vec<Value>, ApiError> {
        let repo = self.repo()?;
        let now = clawpool_lanes::state_file::now_secs();
        Ok(clawpool_lane::registry::registered_names(&repo)
            .iter()
            .map(|name| crate::board::board_lane(&repo, name, now))
            .collect())
    }

    /// Every registered lane's name.
    pub fn lane_names(&self) -> Result<Vec<String>, ApiError> {
        Ok(clawpool_lane::registry::registered_names(&self.repo()?))
    }

    /// A lane's record, as `clawpool state LANE --output-format json` prints it.
    pub fn lane_state(&self, lane: &str) -> Result<Value, ApiError> {
        let (doc, record) = self.record(lane)?;
        Ok(with_ages(&doc, &record, clawpool_lanes::state_file::now_secs()).to_json())
    }

    /// A lane's record, typed, and its folder.
    pub fn record(&self, lane: &str) -> Result<(WorkerStateDoc, PathBuf), ApiError> {
        check_name(lane)?;
        let repo = self.repo()?;
        let found = clawpool_pool::lane_lookup::registered(&repo, lane).ok_or_else(|| {
            ApiError::new(
                "unknown_lane",
                format!("no lane {lane:?} in this repository's registry"),
            )
        })?;
        let doc = found
            .state()
            .map_err(|e| ApiError::new(e.kind(), e.to_string()))?;
        Ok((doc, found.record()))
    }

    /// The stream's events after `since` (all of it when `None`), of `lane` only when given, at
    /// most `limit`; and the cursor to ask from next.
    pub fn events(
        &self,
        lane: Option<&str>,
        since: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<StreamEvent>, Option<u64>), ApiError> {
        if let Some(lane) = lane {
            check_name(lane)?;
        }
        let start = since.map_or(Start::Beginning, Start::After);
        let mut follower = Follower::open(&self.state, start)
            .map_err(|e| ApiError::new(e.kind(), e.to_string()))?;
        let all = follower
            .read()
            .map_err(|e| ApiError::new(e.kind(), e.to_string()))?;
        let mut next = since;
        let mut events = Vec::new();
        for line in all {
            if events.len() == limit {
                break;
            }
            next = Some(line.cursor);
            if lane.is_none_or(|lane| line.event.lane == lane) {
                events.push(line);
            }
        }
        Ok((events, next))
    }

    /// A follower of the stream from now, for reporting progress while waiting.
    pub fn follow_now(&self) -> Result<Follower, ApiError> {
        Follower::open(&self.state, Start::Now).map_err(|e| ApiError::new(e.kind(), e.to_string()))
    }

    /// `clawpool wait`, in-process.
    pub async fn wait(
        &self,
        lanes: &[String],
        until: &[Until],
        timeout: Option<Duration>,
    ) -> Result<WaitOutcome, ApiError> {
        for lane in lanes {
            check_name(lane)?;
        }
        clawpool_pool::wait(&self.state, lanes, until, timeout)
            .await
            .map_err(|e| ApiError::new(e.kind(), e.to_string()))
    }

    /// A lane's own log (for a receipt's evidence).
    pub fn lane_log(&self, lane: &str) -> Vec<LaneEvent> {
        std::fs::read_to_string(self.state.lane(lane).join(EVENTS))
            .map(|text| {
                text.lines()
                    .filter_map(|line| serde_json::from_str(line).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The configuration input an operation reads, as `clawpool COMMAND` run with this
    /// server's `--config` as `CLAWPOOL_CONFIG` would read it.
    fn config_input(&self) -> ConfigInput {
        let mut input = ConfigInput::of_this_process(None);
        if let Some(config) = &self.config {
            input.env_config = Some(config.clone());
        }
        input
    }

    /// Runs `request` in the pool.
    async fn handle(&self, request: PoolRequest) -> Result<PoolReply, ApiError> {
        Pool::reading(self.config_input())
            .handle(request, Arc::new(Silent))
            .await
            .map_err(ApiError::from)
    }

    /// The lane `lane` names, resolved in the repository.
    fn lane_arg(&self, lane: &str) -> LaneArg {
        LaneArg {
            from: self.root.clone(),
            arg: PathBuf::from(lane),
        }
    }

    /// Carries out `op` (see the module's doc).
    pub async fn operate(&self, op: &Operation) -> Result<OpReply, ApiError> {
        if let Some(lane) = op.lane() {
            check_name(lane)?;
        }
        if let Some(command) = op.operator_command() {
            let lane = op.lane().unwrap_or_default();
            return self.operator(lane, command).await;
        }
        match op {
            Operation::Spawn {
                name,
                prompt,
                agent,
                base,
            } => {
                let args = crate::cli::SpawnArgs {
                    packet: None,
                    name: Some(name.clone()),
                    prompt: Some(prompt.clone()),
                    base: base.clone(),
                    repo: self.root.clone(),
                    concurrency: None,
                    transport: crate::cli::TransportKind::Pty,
                    agent: agent.clone(),
                    detach: true,
                    rerun: false,
                    config: crate::cli::ConfigFlag { config: None },
                    output_format: crate::cli::OutputFormat::Json,
                };
                let packet = args.inline_packet().unwrap_or_default();
                self.spawn(packet, args.packet_name(), agent.clone()).await
            }
            // Named in messages (a problem's) as the tool's argument it came in.
            Operation::SpawnPacket { packet } => {
                self.spawn(packet.to_string(), PathBuf::from("packet"), None)
                    .await
            }
            Operation::Verify { lane, level } => {
                let level = parse_level(level.as_deref().unwrap_or("targeted"))?;
                let request = PoolRequest::Verify(VerifyRequest {
                    lane: self.lane_arg(lane),
                    level,
                });
                let PoolReply::Verify(reply) = self.handle(request).await? else {
                    unreachable!("the pool answers a verify with a verification")
                };
                Ok(OpReply {
                    ok: reply.verification.result
                        == clawpool_lanes::state_file::VerifyResult::Green,
                    document: crate::checks::verified_document(&reply),
                    answer: None,
                })
            }
            Operation::MergeForward { lane } => {
                let request = PoolRequest::MergeForward(self.lane_arg(lane));
                let PoolReply::MergeForward(merge) = self.handle(request).await? else {
                    unreachable!("the pool answers a merge-forward with a merge's outcome")
                };
                Ok(OpReply {
                    ok: matches!(
                        merge,
                        MergeOutcome::Merged { .. } | MergeOutcome::UpToDate { .. }
                    ),
                    document: serde_json::to_value(&merge).unwrap_or_default(),
                    answer: None,
                })
            }
            Operation::Recover { lane, recipe } => {
                let request = PoolRequest::Recover(RecoverRequest {
                    lane: self.lane_arg(lane),
                    recipe: recipe.clone(),
                });
                let PoolReply::Recover(reply) = self.handle(request).await? else {
                    unreachable!("the pool answers a recover with the recipe run or refused")
                };
                let run = match reply {
                    RecoverReply::Ran(run) => run,
                    RecoverReply::Refused(refused) => {
                        return Err(ApiError {
                            kind: refused.why.kind().to_owned(),
                            message: refused.message,
                            detail: crate::policy_cmd::refusal_fields(&refused.why),
                        });
                    }
                };
                let document = crate::operator_cmd::verdict_document(
                    &run.lane,
                    &run.command,
                    &run.verdict,
                    crate::policy_cmd::run_fields(&run),
                );
                if !run.verdict.is_done() {
                    let (kind, message) =
                        crate::operator_cmd::verdict_error(&run.lane, &run.command, &run.verdict);
                    return Err(ApiError {
                        kind,
                        message,
                        detail: document,
                    });
                }
                Ok(OpReply {
                    ok: true,
                    document,
                    answer: None,
                })
            }
            Operation::Send { .. }
            | Operation::Stop { .. }
            | Operation::Answer { .. }
            | Operation::Trust { .. }
            | Operation::Restart { .. } => {
                unreachable!("operator commands are answered above")
            }
        }
    }

    /// An operator command to `lane`: its verdict as `clawpool COMMAND --output-format json`
    /// documents it; a verdict other than done is the CLI's error (`lane_refused`, …) with
    /// the verdict's fields.
    async fn operator(&self, lane: &str, command: OperatorCommand) -> Result<OpReply, ApiError> {
        let request = PoolRequest::Operate(OperateRequest {
            lane: self.lane_arg(lane),
            command: command.clone(),
            follow_up_stops_on_signals: false,
            hand_over_follow_up: true,
        });
        let PoolReply::Operate(reply) = self.handle(request).await? else {
            unreachable!("the pool answers an operator request with an operator reply")
        };
        // A follow-up to a lane that ended is the daemon's (started if none runs): this server
        // owns no long-lived lane. It waits for the lane's new end, as `clawpool send` does.
        let reply = match reply {
            OperateReply::HandOver(hand_over) => crate::daemon::follow_up::hand_follow_up(
                hand_over,
                self.config_input(),
                self.config.as_deref(),
                true,
            )
            .await?
            .ok_or_else(|| ApiError::new("daemon_not_running", "no daemon took the follow-up"))?,
            reply => reply,
        };
        let (verdict, extra, finished) = match reply {
            OperateReply::Verdict(verdict) => (verdict, Value::Null, true),
            OperateReply::FollowUp(follow_up) => {
                let (verdict, extra) = crate::operator_cmd::follow_up_verdict(&follow_up);
                (verdict, extra, follow_up.state == Some(LaneState::Finished))
            }
            OperateReply::HandOver(_) => unreachable!("a follow-up handed over is answered above"),
        };
        let followed_up = !extra.is_null();
        let document = crate::operator_cmd::verdict_document(lane, &command, &verdict, extra);
        if !verdict.is_done() {
            let (kind, message) = crate::operator_cmd::verdict_error(lane, &command, &verdict);
            return Err(ApiError {
                kind,
                message,
                detail: document,
            });
        }
        let answer = if followed_up {
            LaneAnswer::FollowedUp {
                reason: verdict.reason().to_owned(),
            }
        } else {
            LaneAnswer::Verdict(verdict)
        };
        Ok(OpReply {
            ok: finished,
            document,
            answer: Some(answer),
        })
    }

    /// Starts a packet's lanes: checked by the pool, handed to the repository's daemon (started
    /// when none runs), as `clawpool spawn --detach` does.
    async fn spawn(
        &self,
        packet: String,
        packet_name: PathBuf,
        agent: Option<String>,
    ) -> Result<OpReply, ApiError> {
        let request = PoolRequest::Spawn(SpawnRequest {
            repo: self.root.clone(),
            packet,
            packet_name: packet_name.clone(),
            transport: Transport::Pty,
            concurrency: None,
            agent: agent.clone(),
            rerun: false,
            detach: true,
        });
        let PoolReply::Spawn(reply) = self.handle(request).await? else {
            unreachable!("the pool answers a spawn request with a spawn reply")
        };
        let hand_over = match reply {
            SpawnReply::Invalid(invalid) => {
                let err = CommandError::from(&invalid);
                return Err(ApiError {
                    kind: err.kind.to_owned(),
                    message: err.message,
                    detail: serde_json::json!({ "problems": invalid.problems }),
                });
            }
            SpawnReply::HandOver(hand_over) => hand_over,
            SpawnReply::Ran(_) => unreachable!("a detached spawn is handed over, never run here"),
        };
        let message = crate::daemon::protocol::SpawnRequest {
            packet: hand_over.packet,
            packet_name,
            transport: crate::cli::TransportKind::Pty,
            concurrency: None,
            agent,
            rerun: false,
            config: self.config_input(),
        };
        let handed = crate::daemon::hand_to_daemon(
            &hand_over.repo,
            message,
            self.config.as_deref(),
            hand_over.start,
        )
        .await
        .map_err(|err| ApiError::from(hand_over.refused.unwrap_or(err)))?;
        Ok(OpReply {
            ok: true,
            document: handed.document(),
            answer: None,
        })
    }
}

/// A lane name as the packet's rules take it: never a flag, a path, or empty.
fn check_name(lane: &str) -> Result<(), ApiError> {
    if clawpool_lanes::is_valid_lane_name(lane) {
        Ok(())
    } else {
        Err(ApiError::new(
            "invalid_argument",
            format!("{lane:?} is not a lane name (docs/task-packet.md, \"Lane names\")"),
        ))
    }
}
