//! A Codex lane's protocol channel: the agent's own app server, owned by the lane, reporting
//! turns, items, approvals and token usage as protocol messages (`docs/events.md`, "Protocol
//! facts").
//!
//! For an agent whose profile has `hooks = "codex_app_server"`, the lane starts
//! `codex app-server --listen unix://.claw/codex-app-server.sock` ([`AppServer::start`]) with
//! the agent's own program, environment and folder, connects to it as a client of its own
//! (JSON-RPC over a WebSocket on that Unix socket, [`websocket`]), and only then starts the
//! interactive TUI attached to it with `--remote` ([`AppServer::tui_args`]): a person
//! attaching sees the usual screen, and the lane hears of the TUI's thread from its start.
//! What the server tells every client (a thread started, a thread's status) needs no
//! subscription; for the rest (turns, items, token usage) the lane rejoins the TUI's thread
//! (`thread/resume`), which 0.169.0 allows once the thread has a rollout: from its first turn
//! on ([`Observer`]).
//!
//! Each message the lane uses becomes a [`ProtocolFact`](crate::channel::ProtocolFact): its
//! meaning among the agent facts the handshake knows ([`HookEvent`]: the thread turning active
//! is a prompt submitted, a tool item a tool running, waiting on approval a permission
//! request, the thread idle again the turn's stop) and the message's own detail. A connection
//! that closes while the lane runs is [`ChannelMessage::ProtocolLost`]: the screen decides from
//! then on. The server lives as long as the lane's driver holds its [`AppServer`] (its process
//! group is ended on drop).
//!
//! A supervisor that dies leaves the server running, the TUI attached to it; the supervisor
//! adopting the lane reconnects to it ([`AppServer::adopt`]), rejoins the TUI's thread
//! ([`Observer::reconnecting`]) and ends the server with the lane as if it had started it.

pub mod websocket;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_pty::SpawnSpec;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::channel::{ChannelMessage, HookEvent, ProtocolFact};
use clawpool_lanes::Payload;
use clawpool_lanes::payload::{ChannelDegraded, ChannelOpened};
use websocket::WebSocket;

/// The channel's name in `lane.channel.*` events and the state file's `hooks.channel`.
pub const CHANNEL: &str = "codex_app_server";

/// The app server's socket, in the lane's `.claw/`.
pub const SOCKET_FILE: &str = "codex-app-server.sock";
/// Where the app server's output goes, in the lane's `.claw/`.
pub const LOG_FILE: &str = "codex-app-server.log";
/// How long the app server may take to listen (a Codex boot is seconds of CPU on a loaded
/// machine).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the socket is tried while the server boots: it says nothing when it listens.
const CONNECT_INTERVAL: Duration = Duration::from_millis(50);

/// Notifications the lane never reads: streamed text and output, many per turn.
const OPTED_OUT: [&str; 8] = [
    "item/agentMessage/delta",
    "item/plan/delta",
    "item/reasoning/textDelta",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/summaryPartAdded",
    "item/commandExecution/outputDelta",
    "item/fileChange/outputDelta",
    "command/exec/outputDelta",
];

/// Items that are a tool running (`item/started` … `item/completed`).
const TOOL_ITEMS: [&str; 8] = [
    "commandExecution",
    "fileChange",
    "mcpToolCall",
    "dynamicToolCall",
    "collabAgentToolCall",
    "webSearch",
    "imageView",
    "imageGeneration",
];

/// What the lane knows of the TUI's thread, from the messages so far; decides what each new
/// message means.
#[derive(Debug, Default)]
pub struct Observer {
    /// The TUI's thread (not an ephemeral side thread, nor a sub-agent's).
    thread: Option<String>,
    /// The thread is running a turn.
    active: bool,
    /// The thread waits for an approval.
    waiting_on_approval: bool,
    /// The request sent and not answered yet: its id, and what it asked.
    asked: Option<(u64, Asked)>,
    /// The loaded threads of a server the lane reconnected to, not tried yet as the TUI's.
    candidates: Vec<String>,
    /// The lane receives the thread's turns and items.
    subscribed: bool,
    /// The last request id used.
    last_id: u64,
    /// The model the thread runs, as `thread/resume`'s reply names it (no notification does):
    /// what its token usage is priced as (the state file's `cost_usd`).
    model: Option<String>,
}

/// What a request the lane sent asked.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Asked {
    /// `thread/resume` of the TUI's thread: to hear its turns and items.
    Rejoin,
    /// `thread/loaded/list`: the threads of a server the lane reconnected to.
    LoadedThreads,
    /// `thread/resume` of one of those: whether it is the TUI's thread, and its status now.
    Adopt,
}

impl Observer {
    /// An observer for a server the lane reconnects to, whose TUI's thread started long ago:
    /// nothing tells a new client of it, and nothing is replayed. It asks which threads the
    /// server has loaded (`thread/loaded/list`), rejoins them one by one (`thread/resume`,
    /// which answers with the thread and its status now, and subscribes the connection to its
    /// turns and items) until one is the TUI's, and reports that thread's status as its first
    /// fact. Returns the observer and its first request.
    pub fn reconnecting() -> (Self, Value) {
        let mut observer = Self::default();
        let request = observer.request("thread/loaded/list", json!({}), Asked::LoadedThreads);
        (observer, request)
    }

    /// What one message from the server means: a fact for the lane, and a request to send.
    pub fn on_message(&mut self, message: &Value) -> (Option<ProtocolFact>, Option<Value>) {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return self.on_reply(message);
        };
        if message.get("id").is_some() {
            // A request for the TUI (an approval); the lane never answers one.
            return (None, None);
        }
        let params = &message["params"];
        let text = |value: &Value| value.as_str().map(str::to_owned);
        if method == "thread/started" {
            let thread = &params["thread"];
            let side = is_side_thread(thread);
            let Some(id) = thread["id"].as_str().filter(|_| !side) else {
                return (None, None);
            };
            *self = Self {
                thread: Some(id.to_owned()),
                last_id: self.last_id,
                ..Self::default()
            };
            let event = HookEvent::SessionStart {
                source: Some("thread/started".into()),
            };
            return (
                Some(ProtocolFact::new(method, Some(id), event, json!({}))),
                None,
            );
        }
        let thread = params["threadId"].as_str();
        if thread.is_none() || thread != self.thread.as_deref() {
            return (None, None);
        }
        let (event, fields) = match method {
            "thread/status/changed" => {
                return self.status_changed(method, thread, &params["status"]);
            }
            "turn/started" | "turn/completed" => {
                let turn = &params["turn"];
                (
                    other(method),
                    json!({"turn_id": turn["id"], "status": turn["status"], "error": turn["error"]}),
                )
            }
            "item/started" | "item/completed" => {
                let item = &params["item"];
                let kind = item["type"].as_str().unwrap_or_default().to_owned();
                let command = item["command"]
                    .as_str()
                    .map(|c| c.chars().take(200).collect::<String>());
                let event = match (TOOL_ITEMS.contains(&kind.as_str()), method) {
                    (true, "item/started") => HookEvent::PreToolUse {
                        tool_name: kind.clone(),
                        tool_input: command.clone().map_or(Value::Null, Value::String),
                    },
                    (true, _) => HookEvent::PostToolUse {
                        tool_name: kind.clone(),
                    },
                    (false, _) => other(method),
                };
                (
                    event,
                    json!({"item": kind, "item_id": item["id"], "command": command}),
                )
            }
            "thread/tokenUsage/updated" => {
                let usage = &params["tokenUsage"];
                (
                    other(method),
                    json!({"turn_id": params["turnId"], "model": self.model,
                           "usage": {"last": usage["last"], "total": usage["total"]}}),
                )
            }
            "error" => (
                other(method),
                json!({"message": text(&params["error"]["message"]), "will_retry": params["willRetry"]}),
            ),
            _ => return (None, None),
        };
        (Some(ProtocolFact::new(method, thread, event, fields)), None)
    }

    /// The thread's status changed: a turn started (and the lane rejoins the thread if it has
    /// not yet), it waits on an approval, or it is idle again.
    fn status_changed(
        &mut self,
        method: &str,
        thread: Option<&str>,
        status: &Value,
    ) -> (Option<ProtocolFact>, Option<Value>) {
        let kind = status["type"].as_str().unwrap_or_default();
        let flags = status["activeFlags"].clone();
        let approval = flags
            .as_array()
            .is_some_and(|flags| flags.iter().any(|f| f == "waitingOnApproval"));
        let was_active = std::mem::replace(&mut self.active, kind == "active");
        let was_waiting = std::mem::replace(&mut self.waiting_on_approval, approval);
        let event = match kind {
            "active" if !was_active => HookEvent::UserPromptSubmit {
                prompt: String::new(),
            },
            "active" if approval && !was_waiting => HookEvent::PermissionRequest {
                tool_name: "approval".into(),
                tool_input: Value::Null,
            },
            // The thread idle names no reply: a finish over a working screen waits for it.
            "idle" if was_active => HookEvent::Stop {
                last_message: None,
                in_flight: 0,
            },
            _ => other(method),
        };
        let request = (kind == "active" && !self.subscribed && self.asked.is_none()).then(|| {
            self.request(
                "thread/resume",
                json!({"threadId": thread, "excludeTurns": true}),
                Asked::Rejoin,
            )
        });
        let fact = ProtocolFact::new(
            method,
            thread,
            event,
            json!({"status": kind, "flags": flags}),
        );
        (Some(fact), request)
    }

    /// A reply to the lane's request: rejoined or not, the threads loaded, or whether the
    /// thread tried is the TUI's (then its status now is the fact).
    fn on_reply(&mut self, reply: &Value) -> (Option<ProtocolFact>, Option<Value>) {
        let Some((_, asked)) = self.asked.filter(|(id, _)| reply["id"] == *id) else {
            return (None, None);
        };
        self.asked = None;
        let result = reply.get("result");
        match asked {
            Asked::Rejoin => {
                self.subscribed = result.is_some();
                self.model = result.and_then(|r| r["model"].as_str()).map(str::to_owned);
                (None, None)
            }
            Asked::LoadedThreads => {
                let loaded = result.and_then(|r| r["data"].as_array());
                // Tried in the server's order, taken from the end.
                self.candidates = loaded
                    .into_iter()
                    .flatten()
                    .rev()
                    .filter_map(|thread| thread.as_str().map(str::to_owned))
                    .collect();
                (None, self.try_next_candidate())
            }
            Asked::Adopt => {
                let thread = result
                    .map(|result| &result["thread"])
                    .filter(|thread| !is_side_thread(thread));
                let Some((id, status)) =
                    thread.and_then(|t| Some((t["id"].as_str()?.to_owned(), &t["status"])))
                else {
                    // Refused (a thread with no rollout yet, like Codex's title thread), or
                    // a side thread: the next one.
                    return (None, self.try_next_candidate());
                };
                self.candidates.clear();
                self.thread = Some(id.clone());
                self.subscribed = true;
                self.model = result.and_then(|r| r["model"].as_str()).map(str::to_owned);
                self.status_changed("thread/resume", Some(&id), status)
            }
        }
    }

    /// Rejoins the next loaded thread, if one is left.
    fn try_next_candidate(&mut self) -> Option<Value> {
        let thread = self.candidates.pop()?;
        Some(self.request(
            "thread/resume",
            json!({"threadId": thread, "excludeTurns": true}),
            Asked::Adopt,
        ))
    }

    /// A request with the next id, remembered as what is asked.
    fn request(&mut self, method: &str, params: Value, asked: Asked) -> Value {
        self.last_id += 1;
        self.asked = Some((self.last_id, asked));
        json!({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
    }
}

/// Whether `thread` is not a TUI's own: an ephemeral side thread, or a sub-agent's.
fn is_side_thread(thread: &Value) -> bool {
    thread["ephemeral"] == true || !thread["parentThreadId"].is_null()
}

fn other(method: &str) -> HookEvent {
    HookEvent::Other {
        name: method.to_owned(),
    }
}

/// The lane's app server: its process and the lane's connection to it.
pub struct AppServer {
    socket: PathBuf,
    process: ServerProcess,
    observer: JoinHandle<()>,
}

/// The app server's process, which ends with the lane.
enum ServerProcess {
    /// Started by this lane's driver. Dropped without waiting: tokio reaps it once the signal
    /// on drop ended it.
    Started(tokio::process::Child),
    /// Started by the supervisor the lane was adopted from, and left running when it died (in
    /// a process group of its own, with the TUI still attached): that group, found from the
    /// socket's other end.
    Adopted {
        /// The server's process group.
        group: i32,
    },
}

impl ServerProcess {
    /// The process group the server and what it started run in.
    fn group(&self) -> Option<i32> {
        match self {
            Self::Started(child) => child.id().and_then(|pid| i32::try_from(pid).ok()),
            Self::Adopted { group } => Some(*group),
        }
    }
}

impl AppServer {
    /// Starts the app server of the agent `spec` starts (its program, environment and folder),
    /// listening on `.claw/codex-app-server.sock` in `dir`, and connects to it; its facts go
    /// to `sender`, inside `sandbox` when the lane has one. An error says why in words (the lane
    /// falls back to the screen).
    pub async fn start(
        spec: &SpawnSpec,
        dir: &Path,
        sender: mpsc::Sender<ChannelMessage>,
        sandbox: Option<&crate::sandbox::Sandbox>,
    ) -> Result<Self, String> {
        let state_dir = dir.join(clawpool_worktree::layout::LANE_DIR);
        std::fs::create_dir_all(&state_dir).map_err(|e| format!("creating .claw/: {e}"))?;
        let socket = state_dir.join(SOCKET_FILE);
        // A socket left by an earlier run would be connected to and found dead.
        let _ = std::fs::remove_file(&socket);
        let log = std::fs::File::create(state_dir.join(LOG_FILE))
            .map_err(|e| format!("creating .claw/{LOG_FILE}: {e}"))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        // Found as the agent's own `PATH` finds it, like the worker's program.
        let program = clawpool_pty::resolve_program(
            &spec.program,
            &spec.cwd,
            spec.env_value("PATH").as_deref(),
        )
        .map_err(|e| format!("finding the agent for its app server: {e}"))?;
        // In the lane's sandbox, when it has one: the tools the server runs are the agent's.
        let mut command = match sandbox {
            Some(sandbox) => {
                let mut command = tokio::process::Command::new(sandbox.program());
                command.args(sandbox.args_for(&spec.cwd)).arg(&program);
                command
            }
            None => tokio::process::Command::new(&program),
        };
        if spec.clean_env {
            command.env_clear();
        }
        command
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .arg("app-server")
            .arg("--listen")
            .arg(format!("unix://{}", socket.display()))
            .current_dir(&spec.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own group: the sandboxes and commands it starts go with it.
            .process_group(0);
        let mut process = command
            .spawn()
            .map_err(|e| format!("starting {} app-server: {e}", program.display()))?;
        let mut connection = tokio::time::timeout(START_TIMEOUT, async {
            loop {
                if let Ok(Some(status)) = process.try_wait() {
                    return Err(format!(
                        "the app server exited ({status}) before listening (.claw/{LOG_FILE})"
                    ));
                }
                let (path, _folder) = reachable(&socket);
                if let Ok(connection) = WebSocket::connect(&path).await {
                    return Ok(connection);
                }
                tokio::time::sleep(CONNECT_INTERVAL).await;
            }
        })
        .await
        .map_err(|_| {
            format!(
                "the app server did not listen within {} s (.claw/{LOG_FILE})",
                START_TIMEOUT.as_secs()
            )
        })??;
        tokio::time::timeout(START_TIMEOUT, initialize(&mut connection))
            .await
            .map_err(|_| "the app server did not answer `initialize`".to_owned())??;
        let observer = tokio::spawn(observe(connection, sender, Observer::default()));
        Ok(Self {
            socket,
            process: ServerProcess::Started(process),
            observer,
        })
    }

    /// Reconnects to the app server an earlier supervisor started for the lane in `dir`: a
    /// supervisor that dies, even by SIGKILL, leaves it listening on
    /// `.claw/codex-app-server.sock` (its own process group) with the TUI still attached. The
    /// lane rejoins the TUI's thread ([`Observer::reconnecting`]), its facts go to `sender`,
    /// and the server ends with the lane as one it started would. An error says why in words
    /// (the server is gone: the screen decides).
    pub async fn reconnect(
        dir: &Path,
        sender: mpsc::Sender<ChannelMessage>,
    ) -> Result<Self, String> {
        let socket = dir
            .join(clawpool_worktree::layout::LANE_DIR)
            .join(SOCKET_FILE);
        let (path, _folder) = reachable(&socket);
        let mut connection = WebSocket::connect(&path)
            .await
            .map_err(|e| format!("connecting to .claw/{SOCKET_FILE}: {e}"))?;
        let pid = connection
            .peer_pid()
            .map_err(|e| format!("finding the app server's process: {e}"))?;
        // SAFETY: getpgid and getpgrp only read the process table.
        let (group, own_group) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
        if group <= 1 || group == own_group {
            // Never signalled as a group: that would reach this supervisor, or everything.
            return Err(format!(
                "the app server (pid {pid}) is not in a process group of its own"
            ));
        }
        tokio::time::timeout(START_TIMEOUT, initialize(&mut connection))
            .await
            .map_err(|_| "the app server did not answer `initialize`".to_owned())??;
        let (observer, first_request) = Observer::reconnecting();
        connection
            .send_text(&first_request.to_string())
            .await
            .map_err(|e| format!("talking to the app server: {e}"))?;
        let observer = tokio::spawn(observe(connection, sender, observer));
        Ok(Self {
            socket,
            process: ServerProcess::Adopted { group },
            observer,
        })
    }

    /// [`AppServer::reconnect`] for a lane being adopted, recorded in its `events`: the channel
    /// opened again (`lane.channel.opened` with `adopted: true`), or the server gone and the
    /// screen deciding (`lane.channel.degraded`, `event: adopt`, with the error).
    pub async fn adopt(
        dir: &Path,
        sender: mpsc::Sender<ChannelMessage>,
        events: &clawpool_lanes::EventLog,
    ) -> Option<Self> {
        let (server, payload) = match Self::reconnect(dir, sender).await {
            Ok(server) => {
                let opened = Payload::ChannelOpened(ChannelOpened {
                    channel: CHANNEL.into(),
                    settings: None,
                    socket: Some(server.socket.display().to_string()),
                    adopted: true,
                });
                (Some(server), opened)
            }
            Err(error) => {
                let degraded = Payload::ChannelDegraded(ChannelDegraded {
                    channel: CHANNEL.into(),
                    event: "adopt".into(),
                    error,
                    failed: 1,
                    decides: ChannelDegraded::SCREEN.into(),
                });
                (None, degraded)
            }
        };
        let _ = events.report(payload, None, None, None);
        server
    }

    /// The arguments that attach the agent's TUI to this server.
    pub fn tui_args(&self) -> [String; 2] {
        [
            "--remote".into(),
            format!("unix://{}", self.socket.display()),
        ]
    }

    /// The server's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        // The lane is over: its end is no lost connection.
        self.observer.abort();
        if let Some(group) = self.process.group() {
            // SIGTERM, not SIGKILL: on it the server removes its socket (and the one it
            // binds under /tmp/codex-daemon-UID/ for paths too long for a socket address).
            // SAFETY: killpg only sends a signal to the server's own group.
            unsafe {
                libc::killpg(group, libc::SIGTERM);
            }
        }
    }
}

/// The protocol's opening: `initialize` (opting out of streamed text), its reply, then
/// `initialized`.
async fn initialize(connection: &mut WebSocket) -> Result<(), String> {
    let request = json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "clientInfo": {"name": "clawpool", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {"optOutNotificationMethods": OPTED_OUT},
        },
    });
    let lost = |e: std::io::Error| format!("talking to the app server: {e}");
    connection
        .send_text(&request.to_string())
        .await
        .map_err(lost)?;
    loop {
        let Some(text) = connection.next_text().await.map_err(lost)? else {
            return Err("the app server closed the connection during `initialize`".into());
        };
        let reply: Value = serde_json::from_str(&text).unwrap_or_default();
        if reply["id"] == 0 {
            if let Some(error) = reply.get("error") {
                return Err(format!("the app server refused `initialize`: {error}"));
            }
            break;
        }
    }
    connection
        .send_text(&json!({"jsonrpc": "2.0", "method": "initialized"}).to_string())
        .await
        .map_err(lost)
}

/// Reads the server's messages for the lane, as `observer` makes them out, until the connection
/// ends, which it reports.
async fn observe(
    mut connection: WebSocket,
    sender: mpsc::Sender<ChannelMessage>,
    mut observer: Observer,
) {
    // Connected before the TUI starts, the lane hears of its thread from the start; reconnected,
    // it rejoins the thread: the channel works from now on.
    let connected = ProtocolFact::new(
        "initialize",
        None,
        HookEvent::SessionStart {
            source: Some("initialize".into()),
        },
        json!({}),
    );
    if sender
        .send(ChannelMessage::Protocol(connected))
        .await
        .is_err()
    {
        return;
    }
    let error = loop {
        let text = match connection.next_text().await {
            Ok(Some(text)) => text,
            Ok(None) => break "the app server closed the connection".to_owned(),
            Err(err) => break format!("reading from the app server: {err}"),
        };
        let Ok(message) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let (fact, request) = observer.on_message(&message);
        if let Some(request) = request
            && let Err(err) = connection.send_text(&request.to_string()).await
        {
            break format!("writing to the app server: {err}");
        }
        if let Some(fact) = fact
            && sender.send(ChannelMessage::Protocol(fact)).await.is_err()
        {
            // The lane is gone.
            return;
        }
    };
    let _ = sender.send(ChannelMessage::ProtocolLost { error }).await;
}

/// The lane's folder that stands in for Codex's daemon folder in its sandbox
/// (`crate::sandbox::codex_daemon_dir`).
pub fn daemon_stand_in(dir: &Path) -> std::path::PathBuf {
    dir.join(clawpool_worktree::layout::LANE_DIR)
        .join("codex-daemon")
}

/// Where to connect for the app server listening on `socket`: Codex makes `socket` a link into
/// its daemon folder; for a sandboxed lane that folder was the lane's stand-in, so the link's
/// target is looked up there (outside the sandbox the link resolves as it is). The stand-in's
/// path is too long for a socket address, so it is reached through an open handle on the
/// folder (`/proc/self/fd/N/NAME`), which the caller keeps open while it connects.
fn reachable(socket: &Path) -> (std::path::PathBuf, Option<std::fs::File>) {
    let unchanged = (socket.to_owned(), None);
    let Ok(target) = std::fs::read_link(socket) else {
        return unchanged;
    };
    let (Some(parent), Some(name), Some(lane_dir)) =
        (target.parent(), target.file_name(), socket.parent())
    else {
        return unchanged;
    };
    let stand_in = lane_dir.join("codex-daemon");
    if parent != crate::sandbox::codex_daemon_dir() || !stand_in.join(name).exists() {
        return unchanged;
    }
    match std::fs::File::open(&stand_in) {
        Ok(folder) => {
            use std::os::fd::AsRawFd;
            let path = Path::new("/proc/self/fd")
                .join(folder.as_raw_fd().to_string())
                .join(name);
            (path, Some(folder))
        }
        Err(_) => unchanged,
    }
}

#[cfg(test)]
mod tests;
