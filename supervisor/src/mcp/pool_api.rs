//! The MCP server's one way into the pool: every tool reaches lanes through here, so that this
//! module alone is re-pointed when the pool's typed request API (issue #27) lands.
//!
//! Reads are in-process, on what the pool and lanes crates already own: the repository's event
//! stream and waiting on it (`clawpool_pool`), the lane registry and records (the board's
//! [`crate::board::board_lane`], the same documents `clawpool board`/`state` print).
//!
//! Operations (send, stop, answer, trust, restart, recover, verify, merge-forward, spawn) run
//! the CLI's own command in a child process, JSON mode, in the repository: today's command
//! functions print their results on stdout, which is the MCP transport, and hold logic the
//! binary has not yet handed to the pool. The child is this server's own executable, so it is
//! the same code and the same verdicts as `clawpool COMMAND --output-format json`; its stdout
//! document is the reply, its stderr `{"error": {"kind", …}}` the error with the CLI's `kind`.
//! The child inherits this server's process tree: a lane's control socket sees an operator
//! outside every lane exactly when this server runs outside every lane (`mcp/mod.rs` checks).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_lanes::stream::StreamEvent;
use clawpool_lanes::{LaneEvent, WorkerStateDoc, read_lane_record, with_ages};
use clawpool_pool::{Follower, Start, Until, WaitOutcome};
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

    /// The CLI command that carries it out. Options first, then `--` and the positionals, so
    /// a text starting with `-` stays a text.
    fn command_line(&self, repo: &Path, packet_file: Option<&Path>) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |a: &str| args.push(a.into());
        match self {
            Operation::SpawnPacket { .. } => {
                push("spawn");
                push("--detach");
                push("--output-format");
                push("json");
                push("--repo");
                args.push(repo.into());
                args.push("--".into());
                args.push(packet_file.unwrap_or(Path::new("")).into());
                return args;
            }
            Operation::Spawn {
                name,
                prompt,
                agent,
                base,
            } => {
                push("spawn");
                push("--name");
                push(name);
                push("--prompt");
                push(prompt);
                if let Some(agent) = agent {
                    push("--agent");
                    push(agent);
                }
                if let Some(base) = base {
                    push("--base");
                    push(base);
                }
                push("--detach");
                push("--output-format");
                push("json");
                args.push("--repo".into());
                args.push(repo.into());
                return args;
            }
            Operation::Send { lane, text } => {
                push("send");
                push("--output-format");
                push("json");
                push("--");
                push(lane);
                push(text);
                return args;
            }
            Operation::Stop { .. } => push("stop"),
            Operation::Trust { .. } => push("trust"),
            Operation::Answer { choice, .. } => {
                push("answer");
                push("--choice");
                push(choice);
            }
            Operation::Restart {
                resume, redeliver, ..
            } => {
                push("restart");
                if *resume {
                    push("--resume");
                }
                if *redeliver {
                    push("--redeliver");
                }
            }
            Operation::Recover { recipe, .. } => {
                push("recover");
                if let Some(recipe) = recipe {
                    push("--recipe");
                    push(recipe);
                }
            }
            Operation::Verify { level, .. } => {
                push("verify");
                if let Some(level) = level {
                    push("--level");
                    push(level);
                }
            }
            Operation::MergeForward { .. } => push("merge-forward"),
        }
        push("--output-format");
        push("json");
        push("--");
        push(self.lane().unwrap_or_default());
        args
    }
}

/// What an operation answered: the CLI's JSON document, and whether it exited 0 (`verify`
/// and `merge-forward` answer a document that says what failed, exiting 1).
#[derive(Debug, Clone)]
pub struct OpReply {
    pub ok: bool,
    pub document: Value,
}

/// The pool of one repository, as the MCP server sees it.
#[derive(Debug, Clone)]
pub struct PoolApi {
    /// The repository's top folder (operations run there, so lane names resolve in it).
    root: PathBuf,
    state: StateDir,
    exe: PathBuf,
    config: Option<PathBuf>,
}

impl PoolApi {
    pub fn open(repo: &Path, config: Option<PathBuf>) -> Result<Self, ApiError> {
        let repo =
            Repo::open(repo).map_err(|e| ApiError::new("not_a_repository", e.to_string()))?;
        let exe = std::env::current_exe()
            .map_err(|e| ApiError::new("io", format!("finding clawpool's own executable: {e}")))?;
        Ok(Self {
            root: repo.root().to_owned(),
            state: StateDir::of(repo.common_dir()),
            exe,
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

    /// A lane's record, as `clawpool state LANE --output-format json` prints it.
    pub fn lane_state(&self, lane: &str) -> Result<Value, ApiError> {
        let (doc, record) = self.record(lane)?;
        Ok(with_ages(&doc, &record, clawpool_lanes::state_file::now_secs()).to_json())
    }

    /// A lane's record, typed, and its folder.
    pub fn record(&self, lane: &str) -> Result<(WorkerStateDoc, PathBuf), ApiError> {
        check_name(lane)?;
        let repo = self.repo()?;
        let registry = clawpool_lane::registry::lane_registry(&repo, lane);
        let entry = registry.entry().map_err(|_| {
            ApiError::new(
                "unknown_lane",
                format!("no lane {lane:?} in this repository's registry"),
            )
        })?;
        let doc = read_lane_record(registry.dir(), &entry.worktree)
            .map_err(|e| ApiError::new(e.kind(), e.to_string()))?;
        Ok((doc, registry.dir().to_owned()))
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

    /// `packet` as a file for `clawpool spawn`.
    fn packet_file(&self, packet: &Value) -> Result<tempfile::NamedTempFile, ApiError> {
        let io = |e: std::io::Error| ApiError::new("io", format!("writing the packet: {e}"));
        std::fs::create_dir_all(self.state.root()).map_err(io)?;
        let mut file = tempfile::Builder::new()
            .prefix("mcp-packet-")
            .suffix(".json")
            .tempfile_in(self.state.root())
            .map_err(io)?;
        std::io::Write::write_all(&mut file, packet.to_string().as_bytes()).map_err(io)?;
        Ok(file)
    }

    /// Carries out `op` with the CLI's own command (see the module's doc).
    pub async fn operate(&self, op: &Operation) -> Result<OpReply, ApiError> {
        if let Some(lane) = op.lane() {
            check_name(lane)?;
        }
        // A packet goes to `clawpool spawn` as the file it reads, in the clawpool folder (its
        // relative paths resolve against the repository, wherever the file is), removed after.
        let packet_file = match op {
            Operation::SpawnPacket { packet } => Some(self.packet_file(packet)?),
            _ => None,
        };
        let command_line = op.command_line(&self.root, packet_file.as_ref().map(|f| f.path()));
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .args(&command_line)
            .current_dir(&self.root)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some(config) = &self.config {
            command.env("CLAWPOOL_CONFIG", config);
        }
        let out = command
            .output()
            .await
            .map_err(|e| ApiError::new("io", format!("running clawpool: {e}")))?;
        let document = last_json(&out.stdout);
        if out.status.success() {
            return Ok(OpReply {
                ok: true,
                document: document.unwrap_or(Value::Null),
            });
        }
        if let Some(Value::Object(mut error)) =
            last_json(&out.stderr).and_then(|mut e| e.get_mut("error").map(Value::take))
        {
            let kind = match error.remove("kind") {
                Some(Value::String(kind)) => kind,
                _ => "command_failed".to_owned(),
            };
            let message = match error.remove("message") {
                Some(Value::String(message)) => message,
                _ => String::new(),
            };
            return Err(ApiError {
                kind,
                message,
                detail: Value::Object(error),
            });
        }
        match document {
            Some(document) => Ok(OpReply {
                ok: false,
                document,
            }),
            None => Err(ApiError::new(
                "command_failed",
                format!(
                    "clawpool {} exited {}: {}",
                    command_line[0].to_string_lossy(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            )),
        }
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

/// The last line of `bytes` that is a JSON document.
fn last_json(bytes: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(bytes);
    serde_json::from_str(text.trim()).ok().or_else(|| {
        text.lines()
            .rev()
            .find_map(|line| serde_json::from_str(line.trim()).ok())
    })
}
