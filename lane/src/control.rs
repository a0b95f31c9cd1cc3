//! A lane's control socket (in its record folder, `layout::control_socket`; mode 0600): how `clawpool trust`, `answer`,
//! `send`, `stop`, `restart`, `recover`, `merge-forward` and `verify` reach the process running
//! the lane, how `clawpool ui` reads the lane's live screen, and how the agent's hooks report
//! to the lane (`clawpool hook`, [`crate::channel`]). One versioned, typed request line in, one
//! typed reply line out ([`protocol`], `docs/control-protocol.md`): the lane's [`Verdict`] once
//! it decided, the branch request's result, the [`ScreenSource`]'s snapshot, a hook report
//! queued for the handshake, or an error with its kind when the request never reached the lane
//! (another protocol version, an unreadable line, a hook report without the lane's token).
//!
//! Every connection's caller is identified first, from the socket's peer credentials
//! ([`crate::caller`]): a hook report is taken only from a process inside this lane (its agent
//! or what the agent runs) and no other, everything else only from a process inside no lane
//! and of this process's user. A refused request never reaches the lane: its caller is told
//! why (an operator command as a `refused` verdict), and the attempt is recorded on the lane
//! as `lane.caller_refused` ([`CallerGate`]).

mod hook_client;
pub mod protocol;

pub use hook_client::deliver;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::caller::{Caller, Refusal};
use crate::channel::{HookInbox, HookRefused};
use crate::handshake::{OperatorCommand, OperatorRequest, Verdict, VerdictReply};
use crate::lane_state::StateRecorder;
use clawpool_lanes::payload::{CallerLane, CallerRefused};
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::{EventLog, Payload};
use clawpool_pty::Worker;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use protocol::{
    ControlError, ControlReply, ControlRequest, ErrorKind, Request, ScreenSnapshot, VerifiedReply,
    ask,
};

/// A request about a lane's branch ([`Request::MergeForward`], [`Request::Verify`]), as the
/// lane's checks task serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
pub type OpRequest = (LaneOp, oneshot::Sender<ControlReply>);

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

    /// The reply to a `screen` request: the worker's [`ScreenSnapshot`].
    fn reply(&self) -> ControlReply {
        let worker = self.0.lock().ok().and_then(|current| current.clone());
        let Some(worker) = worker else {
            return ControlReply::Error(ControlError::new(
                ErrorKind::NoWorker,
                "the lane has no worker: not started yet, or its terminal is over",
            ));
        };
        let snapshot = worker.snapshot();
        ControlReply::Screen(ScreenSnapshot {
            cols: snapshot.size.cols,
            rows: snapshot.size.rows,
            cursor: snapshot.cursor,
            text: snapshot.text(),
            formatted: String::from_utf8_lossy(&worker.contents_formatted()).into_owned(),
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
    /// Whether `caller` may make `request` (as read from its line): the caller when it may,
    /// else the refusal, recorded on the lane. Only a hook report is taken from inside the
    /// lane; anything else, an unreadable line included, only from outside every lane.
    fn admit(
        &self,
        caller: Result<Caller, Refusal>,
        request: &Result<ControlRequest, ControlError>,
    ) -> Result<Caller, Refusal> {
        let request = request.as_ref().ok().map(|r| &r.request);
        let admitted = caller.and_then(|caller| match request {
            Some(Request::Hook(_)) => caller.check_hook(&self.lane_dir),
            _ => caller.check_operator(),
        });
        if let Err(refusal) = &admitted {
            let caller = refusal.caller.as_ref();
            let refused = CallerRefused {
                request: request
                    .map(Request::describe)
                    .unwrap_or_else(|| "an unreadable request".to_owned()),
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

/// The reply that tells a refused caller why: a `refused` verdict for an operator command (so
/// the command prints and exits by it), an error for anything else.
fn refusal_reply(
    request: &Result<ControlRequest, ControlError>,
    refusal: &Refusal,
) -> ControlReply {
    let reason = format!("refused: {}", refusal.reason);
    match request {
        Ok(ControlRequest {
            request: Request::Operator(_),
            ..
        }) => ControlReply::Verdict(Verdict::Refused {
            reason,
            choices: Vec::new(),
        }),
        _ => ControlReply::Error(ControlError::new(ErrorKind::Refused, reason)),
    }
}

/// The reply when the lane is gone before it answered.
fn lane_ended() -> ControlReply {
    ControlReply::Error(ControlError::new(
        ErrorKind::LaneEnded,
        "the lane has ended",
    ))
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
/// A verdict is written back once `state`'s files hold what the command did.
pub fn listen(
    socket: &Path,
    gate: CallerGate,
    state: StateRecorder,
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
            let handler = Handler {
                state: state.clone(),
                commands: commands.clone(),
                ops: ops.clone(),
                screen: screen.clone(),
                hooks: hooks.clone(),
            };
            let open = open.clone();
            let gate = gate.clone();
            tokio::spawn(async move {
                let _open = open;
                // Identified while connected: the caller waits for the reply, so its pid is
                // still its own.
                let caller = Caller::of(&stream);
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                let request = match BufReader::new(read).read_line(&mut line).await {
                    Ok(_) => ControlRequest::parse(&line),
                    Err(err) => Err(ControlError::new(ErrorKind::BadRequest, err.to_string())),
                };
                let reply = match gate.admit(caller, &request) {
                    Err(refusal) => refusal_reply(&request, &refusal),
                    Ok(_) => match request {
                        Ok(request) => handler.answer(request.request).await,
                        Err(error) => ControlReply::Error(error),
                    },
                };
                let line = protocol::response_line(reply);
                let _ = write.write_all(format!("{line}\n").as_bytes()).await;
            });
        }
    });
    Ok(ControlSocket {
        accept,
        connections,
        closed,
    })
}

/// Where each kind of admitted request goes.
struct Handler {
    state: StateRecorder,
    commands: mpsc::Sender<OperatorRequest>,
    ops: mpsc::Sender<OpRequest>,
    screen: ScreenSource,
    hooks: Option<HookInbox>,
}

impl Handler {
    /// Answers one admitted request.
    async fn answer(&self, request: Request) -> ControlReply {
        match request {
            Request::Operator(command) => {
                let verdict = verdict_of(&self.commands, command).await;
                // An operator reads the lane's state right after its verdict (`stop`, then
                // `state`): the state files say what the command did by the time it is told.
                self.state.flushed().await;
                verdict
            }
            Request::MergeForward => self.op(LaneOp::MergeForward).await,
            Request::Verify { level } => self.op(LaneOp::Verify { level }).await,
            Request::Screen => self.screen.reply(),
            Request::Hook(report) => match &self.hooks {
                Some(inbox) => match inbox.take(report) {
                    Ok(decision) => ControlReply::HookTaken { decision },
                    Err(refused) => {
                        let kind = match refused {
                            HookRefused::WrongToken => ErrorKind::WrongToken,
                            HookRefused::NotTaken(_) => ErrorKind::NotTaken,
                        };
                        ControlReply::Error(ControlError::new(kind, refused.to_string()))
                    }
                },
                None => ControlReply::Error(ControlError::new(
                    ErrorKind::NoHookChannel,
                    "the lane has no hook channel",
                )),
            },
        }
    }

    /// Hands `op` to the lane's checks task and waits for its result.
    async fn op(&self, op: LaneOp) -> ControlReply {
        let (tx, rx) = oneshot::channel();
        match self.ops.send((op, tx)).await {
            Ok(()) => rx.await.unwrap_or_else(|_| lane_ended()),
            Err(_) => lane_ended(),
        }
    }
}

/// Hands `command` to the lane and waits for its verdict.
async fn verdict_of(
    commands: &mpsc::Sender<OperatorRequest>,
    command: OperatorCommand,
) -> ControlReply {
    let (reply, verdict) = VerdictReply::new();
    if commands
        .send(OperatorRequest { command, reply })
        .await
        .is_err()
    {
        return lane_ended();
    }
    match verdict.await {
        Ok(verdict) => ControlReply::Verdict(verdict),
        Err(_) => lane_ended(),
    }
}

/// Sends `command` to the lane listening on `socket`; its verdict, or why it never reached a
/// lane (no socket, nobody listening, the lane ended before it decided).
pub async fn operator_verdict(socket: &Path, command: &OperatorCommand) -> Result<Verdict, String> {
    match ask(socket, Request::Operator(command.clone()))
        .await
        .map_err(|e| e.to_string())?
    {
        ControlReply::Verdict(verdict) => Ok(verdict),
        ControlReply::Error(error) => Err(error.message),
        other => Err(format!("a reply that is not a verdict: {other:?}")),
    }
}
