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
//! Each message the lane uses becomes a [`ProtocolFact`]: its meaning among the agent facts
//! the handshake knows ([`HookEvent`]: the thread turning active is a prompt submitted, a tool
//! item a tool running, waiting on approval a permission request, the thread idle again the
//! turn's stop) and the message's own detail. A connection that closes while the lane runs
//! is [`ChannelMessage::ProtocolLost`]: the screen decides from then on. The server lives as
//! long as the lane's driver holds its [`AppServer`] (its process group is ended on drop).

pub mod websocket;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_pty::SpawnSpec;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::channel::{ChannelMessage, HookEvent, HookFact};
use websocket::WebSocket;

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

/// One protocol message the lane uses, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolFact {
    /// The message (`thread/status/changed`, `item/started`, …).
    pub message: String,
    /// What it means among the agent's facts (its `session_id` is the thread).
    pub fact: HookFact,
    /// The message's own fields the lane records (`status`, `item`, `usage`, …).
    pub fields: Value,
}

impl ProtocolFact {
    fn new(message: &str, thread: Option<&str>, event: HookEvent, fields: Value) -> Self {
        Self {
            message: message.to_owned(),
            fact: HookFact {
                session_id: thread.map(str::to_owned),
                transcript_path: None,
                event,
            },
            fields,
        }
    }

    /// The `lane.protocol` event's detail: the message, what it means, its thread and fields.
    pub fn detail(&self) -> Value {
        let mut detail = json!({
            "event": self.message,
            "means": self.fact.name(),
            "thread_id": self.fact.session_id,
        });
        if let (Some(detail), Some(fields)) = (detail.as_object_mut(), self.fields.as_object()) {
            detail.extend(fields.clone());
        }
        detail
    }
}

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
    /// A `thread/resume` is sent and not answered.
    resume_pending: bool,
    /// The lane receives the thread's turns and items.
    subscribed: bool,
    /// The last request id used.
    last_id: u64,
}

impl Observer {
    /// What one message from the server means: a fact for the lane, and a request to send.
    pub fn on_message(&mut self, message: &Value) -> (Option<ProtocolFact>, Option<Value>) {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            // A reply: only the thread's rejoining is ever asked for.
            if self.resume_pending {
                self.resume_pending = false;
                self.subscribed = message.get("result").is_some();
            }
            return (None, None);
        };
        if message.get("id").is_some() {
            // A request for the TUI (an approval); the lane never answers one.
            return (None, None);
        }
        let params = &message["params"];
        let text = |value: &Value| value.as_str().map(str::to_owned);
        if method == "thread/started" {
            let thread = &params["thread"];
            let side = thread["ephemeral"] == true || !thread["parentThreadId"].is_null();
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
                    json!({"turn_id": params["turnId"],
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
            "idle" if was_active => HookEvent::Stop,
            _ => other(method),
        };
        let mut request = None;
        if kind == "active" && !self.subscribed && !self.resume_pending {
            self.resume_pending = true;
            self.last_id += 1;
            request = Some(json!({
                "jsonrpc": "2.0",
                "id": self.last_id,
                "method": "thread/resume",
                "params": {"threadId": thread, "excludeTurns": true},
            }));
        }
        let fact = ProtocolFact::new(
            method,
            thread,
            event,
            json!({"status": kind, "flags": flags}),
        );
        (Some(fact), request)
    }
}

fn other(method: &str) -> HookEvent {
    HookEvent::Other {
        name: method.to_owned(),
    }
}

/// The lane's app server: its process and the lane's connection to it.
pub struct AppServer {
    socket: PathBuf,
    /// Dropped without waiting: tokio reaps it once the signal on drop ended it.
    process: tokio::process::Child,
    observer: JoinHandle<()>,
}

impl AppServer {
    /// Starts the app server of the agent `spec` starts (its program, environment and folder),
    /// listening on `.claw/codex-app-server.sock` in `dir`, and connects to it; its facts go
    /// to `sender`. An error says why in words (the lane falls back to the screen).
    pub async fn start(
        spec: &SpawnSpec,
        dir: &Path,
        sender: mpsc::Sender<ChannelMessage>,
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
        let mut command = tokio::process::Command::new(&program);
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
                if let Ok(connection) = WebSocket::connect(&socket).await {
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
        let observer = tokio::spawn(observe(connection, sender));
        Ok(Self {
            socket,
            process,
            observer,
        })
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
        if let Some(pid) = self.process.id().and_then(|pid| i32::try_from(pid).ok()) {
            // SIGTERM, not SIGKILL: on it the server removes its socket (and the one it
            // binds under /tmp/codex-daemon-UID/ for paths too long for a socket address).
            // SAFETY: killpg only sends a signal to the group this lane started.
            unsafe {
                libc::killpg(pid, libc::SIGTERM);
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

/// Reads the server's messages for the lane until the connection ends, which it reports.
async fn observe(mut connection: WebSocket, sender: mpsc::Sender<ChannelMessage>) {
    // Connected before the TUI starts, the lane hears of its thread from the start: the
    // channel works from now on.
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
    let mut observer = Observer::default();
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

#[cfg(test)]
mod tests;
