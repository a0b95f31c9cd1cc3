//! A lane's control socket (in its record folder, `layout::control_socket`; mode 0600): how `clawpool trust`, `answer`,
//! `send`, `stop`, `restart` and `recover` reach the process running the lane, and how
//! `clawpool ui` reads the lane's live screen, and how the agent's hooks report to the lane
//! (`clawpool hook`, [`crate::channel`]). One JSON line in (an [`OperatorCommand`], a
//! [`LaneOp`], `{"command": "screen"}` or a [`HookReport`] carrying the lane's token), one JSON
//! line out: the lane's [`Verdict`] once it decided, the op's result, the [`ScreenSource`]'s
//! snapshot, `{"ok": true}` for a hook report queued for the handshake, or
//! `{"ok": false, "error": …}` when the request never reached it (a hook report without the
//! lane's token among them).
//!
//! Every connection's caller is identified first, from the socket's peer credentials
//! ([`crate::caller`]): a hook report is taken only from a process inside this lane (its agent
//! or what the agent runs) and no other, everything else only from a process inside no lane
//! and of this process's user. A refused request never reaches the lane: its caller is told
//! why (an operator command as a `refused` verdict), and the attempt is recorded on the lane
//! as `lane.caller_refused` ([`CallerGate`]).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::caller::{Caller, Refusal};
use crate::channel::{HookInbox, HookReport};
use crate::handshake::{OperatorCommand, OperatorRequest, Verdict, VerdictReply};
use clawpool_lanes::payload::{CallerLane, CallerRefused};
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::{EventLog, Payload};
use clawpool_pty::Worker;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// A request about a lane's branch, over its control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum LaneOp {
    /// Bring the base into the lane's branch by its policy (merge when the policy is warn or
    /// block too: an operator asked for it).
    MergeForward,
    /// Verify a green level.
    Verify {
        /// The level.
        level: GreenLevel,
    },
}

/// A [`LaneOp`] with where its result goes.
pub type OpRequest = (LaneOp, oneshot::Sender<Value>);

/// The lane's current worker, whose screen a `screen` request reads: the driver shows it each
/// worker it starts (a restart starts a new one), so PTY and tmux lanes alike answer from the
/// screen model the handshake itself watches, without anyone attaching.
#[derive(Clone, Default)]
pub struct ScreenSource(Arc<Mutex<Option<Worker>>>);

impl ScreenSource {
    /// From now on, `screen` requests read `worker`'s screen.
    pub fn show(&self, worker: &Worker) {
        if let Ok(mut current) = self.0.lock() {
            *current = Some(worker.clone());
        }
    }

    /// Forgets the worker once the lane's terminal is over, so that nothing keeps its screen
    /// model alive.
    pub fn clear(&self) {
        if let Ok(mut current) = self.0.lock() {
            *current = None;
        }
    }

    /// The reply to a `screen` request: `ok`, the size (`cols`, `rows`), the `cursor` (row,
    /// column), the visible rows as `text`, and `formatted`, the same screen as escape
    /// sequences with its colours (what redraws it on another terminal).
    fn reply(&self) -> Value {
        let worker = self.0.lock().ok().and_then(|current| current.clone());
        let Some(worker) = worker else {
            return serde_json::json!({"ok": false, "error": "the lane has no worker: not started yet, or its terminal is over"});
        };
        let snapshot = worker.snapshot();
        serde_json::json!({
            "ok": true,
            "cols": snapshot.size.cols,
            "rows": snapshot.size.rows,
            "cursor": [snapshot.cursor.0, snapshot.cursor.1],
            "text": snapshot.text(),
            "formatted": String::from_utf8_lossy(&worker.contents_formatted()),
        })
    }
}

/// Who the socket takes requests from: hook reports from this lane's own agent, everything else
/// from callers inside no lane; refusals are recorded in the lane's event log.
#[derive(Clone)]
pub struct CallerGate {
    /// The lane's folder: the mark its agent was started with.
    pub lane_dir: PathBuf,
    /// Where a refused caller is recorded.
    pub events: Arc<EventLog>,
}

impl CallerGate {
    /// Whether `caller` may make the request in `line`: the caller when it may, else the
    /// refusal, recorded on the lane.
    fn admit(&self, caller: Result<Caller, Refusal>, line: &str) -> Result<Caller, Refusal> {
        let hook = HookReport::parse(line);
        let admitted = caller.and_then(|caller| match &hook {
            Some(_) => caller.check_hook(&self.lane_dir),
            None => caller.check_operator(),
        });
        if let Err(refusal) = &admitted {
            let caller = refusal.caller.as_ref();
            let refused = CallerRefused {
                request: describe_request(line, hook.as_ref()),
                reason: refusal.reason.clone(),
                pid: caller.map(|c| c.pid),
                uid: caller.map(|c| c.uid),
                inside: refusal.inside.as_ref().map(|marked| CallerLane {
                    lane: marked.mark.name.clone(),
                    dir: marked.mark.dir.display().to_string(),
                    pid: marked.pid,
                    relation: marked.relation.as_str().to_owned(),
                }),
            };
            let _ = self
                .events
                .report(Payload::CallerRefused(refused), None, None, None);
        }
        admitted
    }
}

/// A request line as its command is typed, for the refusal's event.
fn describe_request(line: &str, hook: Option<&HookReport>) -> String {
    if let Some(report) = hook {
        return format!("hook {}", report.event);
    }
    if is_screen_request(line) {
        return "screen".to_owned();
    }
    if let Ok(op) = serde_json::from_str::<LaneOp>(line) {
        return match op {
            LaneOp::MergeForward => "merge-forward".to_owned(),
            LaneOp::Verify { level } => format!("verify --level {level}"),
        };
    }
    match serde_json::from_str::<OperatorCommand>(line) {
        Ok(command) => command.describe(),
        Err(_) => "an unreadable request".to_owned(),
    }
}

/// The reply that tells a refused caller why: a `refused` verdict for an operator command (so
/// the command prints and exits by it), an error for anything else.
fn refusal_reply(line: &str, refusal: &Refusal) -> Value {
    if serde_json::from_str::<OperatorCommand>(line).is_ok() {
        let verdict = Verdict::Refused {
            reason: format!("refused: {}", refusal.reason),
            choices: Vec::new(),
        };
        if let Ok(reply) = serde_json::to_value(verdict) {
            return reply;
        }
    }
    serde_json::json!({"ok": false, "refused": true, "error": format!("refused: {}", refusal.reason)})
}

/// Whether `line` is a `screen` request.
fn is_screen_request(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|request| request["command"] == "screen")
}

/// A lane's listening control socket.
pub struct ControlSocket {
    accept: JoinHandle<()>,
    /// Each connection holds a clone: once all are gone, every reply was written.
    connections: mpsc::Sender<()>,
    closed: mpsc::Receiver<()>,
}

impl ControlSocket {
    /// Stops taking connections and waits until every open one has written its reply. Call it
    /// once nothing sends verdicts any more (the handshake's receiver is dropped), so every
    /// waiting connection has its answer, or learns that the lane ended.
    pub async fn close(mut self) {
        self.accept.abort();
        let _ = (&mut self.accept).await;
        drop(self.connections);
        while self.closed.recv().await.is_some() {}
    }
}

/// Listens on `socket`: operator commands go to the handshake, each with the way back for its
/// verdict, branch requests ([`LaneOp`]) to `ops`, whose reply is sent back when the work is
/// done, `screen` requests are answered at once from `screen`, and hook reports go to `hooks`
/// (refused when the lane has no hook channel); each only from the callers `gate` admits.
pub fn listen(
    socket: &Path,
    gate: CallerGate,
    commands: mpsc::Sender<OperatorRequest>,
    ops: mpsc::Sender<OpRequest>,
    screen: ScreenSource,
    hooks: Option<HookInbox>,
) -> std::io::Result<ControlSocket> {
    // A socket file left by a lane that died is stale: nobody can be listening on it.
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    let (connections, closed) = mpsc::channel(1);
    let open = connections.clone();
    let accept = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let commands = commands.clone();
            let ops = ops.clone();
            let open = open.clone();
            let screen = screen.clone();
            let hooks = hooks.clone();
            let gate = gate.clone();
            tokio::spawn(async move {
                let _open = open;
                // Identified while connected: the caller waits for the reply, so its pid is
                // still its own.
                let caller = Caller::of(&stream);
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                let read = BufReader::new(read).read_line(&mut line).await;
                if let Err(refusal) = gate.admit(caller, &line) {
                    let reply = refusal_reply(&line, &refusal);
                    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
                    return;
                }
                if is_screen_request(&line) {
                    let reply = screen.reply();
                    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
                    return;
                }
                if let Some(report) = HookReport::parse(&line) {
                    let reply = match &hooks {
                        Some(inbox) => inbox.take(report),
                        None => {
                            serde_json::json!({"ok": false, "error": "the lane has no hook channel"})
                        }
                    };
                    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
                    return;
                }
                if let Ok(op) = serde_json::from_str::<LaneOp>(&line) {
                    let (tx, rx) = oneshot::channel();
                    let reply = match ops.send((op, tx)).await {
                        Ok(()) => rx.await.unwrap_or_else(
                            |_| serde_json::json!({"ok": false, "error": "the lane has ended"}),
                        ),
                        Err(_) => serde_json::json!({"ok": false, "error": "the lane has ended"}),
                    };
                    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
                    return;
                }
                let reply = match read {
                    Ok(_) => match serde_json::from_str::<OperatorCommand>(&line) {
                        Ok(command) => verdict_of(&commands, command).await,
                        Err(err) => serde_json::json!({"ok": false, "error": err.to_string()}),
                    },
                    Err(err) => serde_json::json!({"ok": false, "error": err.to_string()}),
                };
                let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
            });
        }
    });
    Ok(ControlSocket {
        accept,
        connections,
        closed,
    })
}

/// Hands `command` to the lane and waits for its verdict.
async fn verdict_of(
    commands: &mpsc::Sender<OperatorRequest>,
    command: OperatorCommand,
) -> serde_json::Value {
    let ended = serde_json::json!({"ok": false, "error": "the lane has ended"});
    let (reply, verdict) = VerdictReply::new();
    if commands
        .send(OperatorRequest { command, reply })
        .await
        .is_err()
    {
        return ended;
    }
    match verdict.await {
        Ok(verdict) => serde_json::to_value(&verdict).unwrap_or(ended),
        Err(_) => ended,
    }
}

/// A lane's reply to an operator command: its verdict, or why the command never reached it.
pub fn parse_reply(reply: &str) -> Result<Verdict, String> {
    if let Ok(verdict) = serde_json::from_str::<Verdict>(reply) {
        return Ok(verdict);
    }
    let parsed: serde_json::Value = serde_json::from_str(reply).unwrap_or_default();
    Err(match parsed["error"].as_str() {
        Some(error) => error.to_owned(),
        None => format!("an unreadable reply: {reply:?}"),
    })
}

/// Sends one command to the lane listening on `socket`; returns its reply.
pub async fn send(socket: &Path, command: &OperatorCommand) -> std::io::Result<String> {
    request(socket, &serde_json::to_string(command)?).await
}

/// Sends one JSON line to the lane listening on `socket`; returns its reply line.
pub async fn request(socket: &Path, line: &str) -> std::io::Result<String> {
    let stream = UnixStream::connect(socket).await?;
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{line}\n").as_bytes()).await?;
    let mut reply = String::new();
    BufReader::new(read).read_line(&mut reply).await?;
    Ok(reply.trim().to_owned())
}
