//! A lane's hook channel: facts the agent reports about itself, besides its screen
//! (`docs/events.md`, "Hook facts").
//!
//! For an agent whose profile has `hooks = "claude"`, the lane writes `hooks.json` in its
//! record folder, a Claude Code settings file declaring one hook per [`HOOK_EVENTS`] entry,
//! and starts Claude Code with `--settings` on it (the user's own settings are never touched).
//! The file is clawpool's, not the agent's: it lives where the agent's workspace writes do not
//! reach (a sandbox binds it read-only), and every start of the agent — a restart under
//! whichever supervisor adopted the lane too — writes it anew from the profile, so settings,
//! permissions or hooks an agent slipped into it never reach its next start. Each hook runs
//! `clawpool hook EVENT` ([`crate::control::deliver`]), which finds its lane only through the environment set
//! at spawn ([`SOCKET_ENV`], [`TOKEN_ENV`]: the lane's control socket and a random token of
//! this lane), never through its folder, and hands the hook's JSON payload to the control
//! socket as one [`HookReport`] line. The control socket checks the token and passes the
//! report on as a [`ChannelMessage`]; the handshake turns it into a typed [`HookFact`].
//!
//! After a `Stop`, and when a tool starts (`PreToolUse`), the lane reads the latest assistant
//! message's token usage from the transcript the hook named ([`usage`]), in a task the lane
//! owns ([`UsageReads`]): Claude Code writes the turn's last assistant message to its
//! transcript after the hook, so the hook is answered without waiting for it, and the lane's
//! close waits (briefly) for the reads still going before its last write; a tool's start gives
//! the cost mid-turn, which the lane's budget is checked against.
//!
//! Codex, when its app server does not start, reports its turns' ends through its `notify`
//! program instead ([`codex_notify`]): the same command, token and control socket, one event.
//!
//! A hook never blocks or breaks the agent: delivery is bounded ([`DELIVERY_TIMEOUT`]), the
//! command always exits 0, and a delivery that fails is appended to the lane's failures file
//! ([`FAILURES_ENV`]), which the lane watches ([`FailureWatch`]) and counts.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use clawpool_lanes::Payload;
use clawpool_lanes::payload::{HookReported, ProtocolReported};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::permission_gate::{PermissionAnswer, PermissionGate};
use clawpool_recovery::permissions::Verdict;

pub mod codex_notify;
pub mod usage;

pub use usage::{TranscriptUsage, UsageReads, last_turn_usage};

/// The channel's name in `lane.channel.*` events and the state file's `hooks.channel`.
pub const CLAUDE_HOOKS: &str = "claude_hooks";
/// The environment variable naming the lane's control socket.
pub const SOCKET_ENV: &str = "CLAWPOOL_LANE_SOCKET";
/// The environment variable holding the lane's hook token.
pub const TOKEN_ENV: &str = "CLAWPOOL_LANE_TOKEN";
/// The environment variable naming the file failed deliveries are appended to.
pub const FAILURES_ENV: &str = "CLAWPOOL_HOOK_FAILURES";
/// The settings file, in the lane's record folder.
pub const SETTINGS_FILE: &str = "hooks.json";
/// The failures file, in the lane's `.claw/`.
pub const FAILURES_FILE: &str = "hook-failures.jsonl";
/// The lane's hook token, in its record folder (owner-only), outside the worktree its agent may
/// write: a supervisor that adopts the lane's running agent accepts the hooks that agent was
/// started with, never a token the agent put in its place.
pub const TOKEN_FILE: &str = "hook-token";
/// How long one delivery may take, reading the payload included.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest payload delivered (a tool's input can be big; the lane needs only its head).
pub(crate) const MAX_PAYLOAD: u64 = 1 << 20;

/// The Claude Code hook events a lane declares (all present in 2.1.330).
pub const HOOK_EVENTS: [&str; 8] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "Notification",
    "Stop",
    "SessionEnd",
];

/// Events whose hooks take a tool matcher.
const TOOL_EVENTS: [&str; 3] = ["PreToolUse", "PostToolUse", "PermissionRequest"];

/// One hook's report, as `clawpool hook` sends it to the control socket (a
/// [`Request::Hook`](crate::control::Request::Hook)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookReport {
    /// The lane's token.
    pub token: String,
    /// The hook event (`Stop`, …).
    pub event: String,
    /// The hook's JSON payload as the agent gave it (`null` when it was not JSON).
    pub payload: Value,
}

/// Why a hook report was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookRefused {
    /// Its token is not the lane's.
    #[error("the hook's token is not this lane's")]
    WrongToken,
    /// The handshake's queue did not take it.
    #[error("{0}")]
    NotTaken(String),
}

/// Claude Code's answer to a PermissionRequest hook (its `hookSpecificOutput`), when the
/// lane's policy decided the question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookDecision {
    /// Always `PermissionRequest`.
    #[serde(rename = "hookEventName")]
    pub hook_event_name: String,
    /// The decision.
    pub decision: PermissionDecision,
}

/// A PermissionRequest's decision, in Claude Code's terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDecision {
    /// Allow or deny.
    pub behavior: Behavior,
    /// What the agent is told of a deny.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What Claude Code does with the tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behavior {
    /// Run it.
    Allow,
    /// Do not run it; tell the agent the message.
    Deny,
}

/// What a hook reported, typed: the fields of its payload the lane uses.
#[derive(Debug, Clone, PartialEq)]
pub struct HookFact {
    /// The agent's session.
    pub session_id: Option<String>,
    /// The agent's transcript of the session.
    pub transcript_path: Option<String>,
    /// The event and its own fields.
    pub event: HookEvent,
}

/// The hook events, each with its payload's fields.
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    /// The session started (`source`: `startup`, `resume`, …).
    SessionStart {
        /// How it started.
        source: Option<String>,
    },
    /// The agent took a prompt.
    UserPromptSubmit {
        /// The prompt.
        prompt: String,
    },
    /// A tool is about to run.
    PreToolUse {
        /// The tool (`Bash`, `Write`, …).
        tool_name: String,
        /// Its input.
        tool_input: Value,
    },
    /// A tool ran.
    PostToolUse {
        /// The tool.
        tool_name: String,
    },
    /// The agent asks for permission to run a tool.
    PermissionRequest {
        /// The tool.
        tool_name: String,
        /// Its input.
        tool_input: Value,
    },
    /// The agent shows a notification (`notification_type`: `permission_prompt`,
    /// `idle_prompt`, …).
    Notification {
        /// Its type.
        notification_type: Option<String>,
        /// Its text.
        message: Option<String>,
    },
    /// The agent's turn is over.
    Stop {
        /// The text of the turn's last reply, as the agent reports it with the Stop (Claude
        /// Code's `last_assistant_message`); `None` when it sent none, or an empty one (a
        /// turn that ended on a tool call or an interrupt).
        last_message: Option<String>,
        /// How much background work the agent reports still in flight when its turn ended
        /// (Claude Code's `background_tasks`: running, pending or backgrounded).
        in_flight: usize,
    },
    /// The session ended.
    SessionEnd {
        /// Why.
        reason: Option<String>,
    },
    /// Codex's `notify` program was told a turn is complete ([`codex_notify::EVENT`]); the
    /// channel reports nothing else.
    TurnComplete {
        /// Codex's id of the turn.
        turn_id: Option<String>,
        /// The turn's user input, as Codex took it: a side turn of Codex's own (its title
        /// generation) quotes the lane's prompt inside a text of its own.
        input_messages: Vec<String>,
        /// The turn's last assistant message.
        last_message: Option<String>,
    },
    /// An event the lane does not declare (a newer agent's): recorded, decides nothing.
    Other {
        /// Its name.
        name: String,
    },
}

impl HookFact {
    /// The fact a hook `event` with `payload` reports.
    pub fn from_report(event: &str, payload: &Value) -> Self {
        let text = |key: &str| payload.get(key).and_then(Value::as_str).map(str::to_owned);
        let tool_name = || text("tool_name").unwrap_or_default();
        let tool_input = || payload.get("tool_input").cloned().unwrap_or(Value::Null);
        let event = match event {
            "SessionStart" => HookEvent::SessionStart {
                source: text("source"),
            },
            "UserPromptSubmit" => HookEvent::UserPromptSubmit {
                prompt: text("prompt").unwrap_or_default(),
            },
            "PreToolUse" => HookEvent::PreToolUse {
                tool_name: tool_name(),
                tool_input: tool_input(),
            },
            "PostToolUse" => HookEvent::PostToolUse {
                tool_name: tool_name(),
            },
            "PermissionRequest" => HookEvent::PermissionRequest {
                tool_name: tool_name(),
                tool_input: tool_input(),
            },
            "Notification" => HookEvent::Notification {
                notification_type: text("notification_type"),
                message: text("message"),
            },
            "Stop" => HookEvent::Stop {
                last_message: text("last_assistant_message").filter(|m| !m.trim().is_empty()),
                in_flight: payload
                    .get("background_tasks")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len),
            },
            "SessionEnd" => HookEvent::SessionEnd {
                reason: text("reason"),
            },
            codex_notify::EVENT => HookEvent::TurnComplete {
                turn_id: text("turn-id"),
                input_messages: payload
                    .get("input-messages")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|message| message.as_str().map(str::to_owned))
                    .collect(),
                last_message: text("last-assistant-message"),
            },
            other => HookEvent::Other {
                name: other.to_owned(),
            },
        };
        Self {
            // Codex names its session a thread, in kebab case.
            session_id: text("session_id").or_else(|| text("thread-id")),
            transcript_path: text("transcript_path"),
            event,
        }
    }

    /// The event's name.
    pub fn name(&self) -> &str {
        match &self.event {
            HookEvent::SessionStart { .. } => "SessionStart",
            HookEvent::UserPromptSubmit { .. } => "UserPromptSubmit",
            HookEvent::PreToolUse { .. } => "PreToolUse",
            HookEvent::PostToolUse { .. } => "PostToolUse",
            HookEvent::PermissionRequest { .. } => "PermissionRequest",
            HookEvent::Notification { .. } => "Notification",
            HookEvent::Stop { .. } => "Stop",
            HookEvent::SessionEnd { .. } => "SessionEnd",
            HookEvent::TurnComplete { .. } => codex_notify::EVENT,
            HookEvent::Other { name } => name,
        }
    }

    /// The `lane.hook` event's payload: the event and the fields it carried.
    pub fn report(&self) -> HookReported {
        let fields = match &self.event {
            HookEvent::SessionStart { source } => json!({"source": source}),
            HookEvent::UserPromptSubmit { prompt } => {
                json!({"prompt": prompt.chars().take(120).collect::<String>()})
            }
            HookEvent::PreToolUse {
                tool_name,
                tool_input,
            }
            | HookEvent::PermissionRequest {
                tool_name,
                tool_input,
            } => json!({"tool": tool_name, "tool_input": truncated(tool_input)}),
            HookEvent::PostToolUse { tool_name } => json!({"tool": tool_name}),
            HookEvent::Notification {
                notification_type,
                message,
            } => json!({"notification_type": notification_type, "message": message}),
            HookEvent::SessionEnd { reason } => json!({"reason": reason}),
            HookEvent::TurnComplete {
                turn_id,
                input_messages,
                last_message,
            } => json!({
                "turn_id": turn_id,
                "input_messages": input_messages
                    .iter()
                    .map(|text| text.chars().take(120).collect::<String>())
                    .collect::<Vec<_>>(),
                "last_assistant_message": last_message
                    .as_ref()
                    .map(|text| text.chars().take(120).collect::<String>()),
            }),
            HookEvent::Stop {
                last_message,
                in_flight,
            } => json!({
                "last_assistant_message": last_message
                    .as_ref()
                    .map(|text| text.chars().take(120).collect::<String>()),
                "background_tasks": in_flight,
            }),
            HookEvent::Other { .. } => json!({}),
        };
        HookReported {
            event: self.name().to_owned(),
            session_id: self.session_id.clone(),
            transcript_path: self.transcript_path.clone(),
            fields: match fields {
                Value::Object(fields) => fields,
                _ => Map::new(),
            },
        }
    }

    /// The `lane.hook` event's detail.
    pub fn detail(&self) -> Value {
        Payload::Hook(self.report()).detail()
    }
}

/// A tool's input for an event's detail: as it is when short, else its JSON's first 200
/// characters.
fn truncated(input: &Value) -> Value {
    let text = input.to_string();
    if text.chars().count() <= 200 {
        input.clone()
    } else {
        Value::String(text.chars().take(200).collect())
    }
}

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
    pub(crate) fn new(
        message: &str,
        thread: Option<&str>,
        event: HookEvent,
        fields: Value,
    ) -> Self {
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

    /// The `lane.protocol` event's payload: the message, what it means, its thread and fields.
    pub fn report(&self) -> ProtocolReported {
        ProtocolReported {
            event: self.message.clone(),
            means: self.fact.name().to_owned(),
            thread_id: self.fact.session_id.clone(),
            fields: self.fields.as_object().cloned().unwrap_or_default(),
        }
    }

    /// The `lane.protocol` event's detail.
    pub fn detail(&self) -> Value {
        Payload::Protocol(self.report()).detail()
    }
}

/// What the hook channel hands the handshake.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelMessage {
    /// A hook's report reached the lane.
    Fact(HookFact),
    /// The lane's permission gate decided the question of the PermissionRequest report just
    /// before (handed on right after its [`ChannelMessage::Fact`]); an allow or deny was
    /// given to the hook as its answer.
    PermissionDecided(PermissionAnswer),
    /// A hook could not deliver its report (its own words).
    Failed {
        /// The hook event.
        event: String,
        /// Why.
        error: String,
    },
    /// A protocol message from the agent's app server (`crate::app_server`).
    Protocol(ProtocolFact),
    /// The connection to the agent's app server ended while the lane ran.
    ProtocolLost {
        /// Why.
        error: String,
    },
}

/// Where the control socket sends hook reports whose token is the lane's.
#[derive(Clone)]
pub struct HookInbox {
    /// The lane's token.
    pub token: String,
    /// The handshake's channel.
    pub sender: mpsc::Sender<ChannelMessage>,
    /// The gate that answers PermissionRequest reports, when the lane's policy decides its
    /// tool-permission questions (`docs/permissions.md`, "Answering through the hook").
    pub permissions: Option<PermissionGate>,
    /// The lane's reads of the usage in the transcript a `Stop` or `PreToolUse` names
    /// (`lane.usage`), which its close settles.
    pub usage: Option<UsageReads>,
}

impl HookInbox {
    /// Takes a hook report: queued for the handshake (never waiting for it), or refused with
    /// the reason, which the hook records as its failure. A PermissionRequest report is
    /// decided at once by the lane's gate: an allow or deny the handshake took is in the reply
    /// as `decision` (the hook's `hookSpecificOutput`); an ask has none.
    pub fn take(&self, report: HookReport) -> Result<Option<HookDecision>, HookRefused> {
        let not_taken =
            |err: String| HookRefused::NotTaken(format!("the lane did not take it: {err}"));
        if report.token != self.token {
            return Err(HookRefused::WrongToken);
        }
        let fact = HookFact::from_report(&report.event, &report.payload);
        // The turn's end, and each tool's start: the message that called the tool is in the
        // transcript before the tool runs, so a lane's cost is known mid-turn, in time for its
        // budget to stop a long tool call.
        let reads_usage = matches!(
            fact.event,
            HookEvent::Stop { .. } | HookEvent::PreToolUse { .. }
        );
        if let (true, Some(transcript), Some(reads)) =
            (reads_usage, &fact.transcript_path, &self.usage)
        {
            reads.start(PathBuf::from(transcript));
        }
        let question = match (&fact.event, &self.permissions) {
            (
                HookEvent::PermissionRequest {
                    tool_name,
                    tool_input,
                },
                Some(gate),
            ) => {
                let cwd = report.payload.get("cwd").and_then(Value::as_str);
                Some(gate.decide_hook(tool_name, tool_input, cwd))
            }
            _ => None,
        };
        if let Err(err) = self.sender.try_send(ChannelMessage::Fact(fact)) {
            return Err(not_taken(err.to_string()));
        }
        let Some(answer) = question else {
            return Ok(None);
        };
        let decision = hook_decision(&answer);
        // Only a decision the lane records is given to the agent.
        match self
            .sender
            .try_send(ChannelMessage::PermissionDecided(answer))
        {
            Ok(()) => Ok(decision),
            Err(err) => Err(not_taken(err.to_string())),
        }
    }
}

/// Claude Code's PermissionRequest answer (`hookSpecificOutput`) for `answer`: behavior allow,
/// or deny with the policy's reason as the message the agent is told; none for an ask (the
/// agent shows its dialog).
fn hook_decision(answer: &PermissionAnswer) -> Option<HookDecision> {
    let decision = match answer.verdict {
        Verdict::Allow => PermissionDecision {
            behavior: Behavior::Allow,
            message: None,
        },
        Verdict::Deny => PermissionDecision {
            behavior: Behavior::Deny,
            message: Some(format!(
                "clawpool's permission policy denies this ({}): {}",
                answer.decided.rule, answer.decided.reason
            )),
        },
        Verdict::Ask => return None,
    };
    Some(HookDecision {
        hook_event_name: "PermissionRequest".to_owned(),
        decision,
    })
}

/// A lane's hook channel, set up for its agent: what to add to the agent's command line and
/// environment, and the token its control socket checks.
#[derive(Debug, Clone)]
pub struct ChannelSetup {
    /// The lane's token.
    pub token: String,
    /// Arguments for the agent (`--settings FILE`).
    pub args: Vec<String>,
    /// Environment for the agent (and so for its hooks).
    pub env: Vec<(String, String)>,
    /// The failures file.
    pub failures: PathBuf,
}

/// The Claude Code settings file of the lane whose record folder is `record`.
pub fn settings_file(record: &Path) -> PathBuf {
    record.join(SETTINGS_FILE)
}

/// What writing a lane's Claude Code settings needs: where the file goes and what it says.
#[derive(Debug, Clone)]
pub struct ClaudeSettings {
    /// The lane's record folder.
    pub record: PathBuf,
    /// The clawpool binary, each hook's command.
    pub program: PathBuf,
    /// Whether the agent runs with `prefersReducedMotion`.
    pub reduced_motion: bool,
}

impl ClaudeSettings {
    /// Writes the settings file from the profile, replacing whatever is there (a link the
    /// agent put in its place is replaced, not followed), and returns its path: before every
    /// start of the agent.
    pub fn write(&self) -> std::io::Result<PathBuf> {
        let file = settings_file(&self.record);
        let settings = claude_settings(&self.program, self.reduced_motion);
        // A run lane's record is in its worktree, where the agent may have put links.
        clawpool_worktree::replace::replace_file(&file, &serde_json::to_vec_pretty(&settings)?)?;
        Ok(file)
    }
}

/// Sets up Claude Code's hooks for the lane in `dir`, whose control socket is `socket`:
/// writes the settings file ([`ClaudeSettings`]) and a new token.
pub fn set_up_claude(
    dir: &Path,
    socket: &Path,
    settings: &ClaudeSettings,
) -> std::io::Result<ChannelSetup> {
    let state_dir = dir.join(clawpool_worktree::layout::LANE_DIR);
    std::fs::create_dir_all(&state_dir)?;
    let file = settings.write()?;
    bind_to_lane(
        &state_dir,
        &settings.record,
        socket,
        vec!["--settings".into(), file.display().to_string()],
    )
}

/// A new token for the lane whose `.claw/` is `state_dir` and whose record folder is `record`
/// (where the token is kept for an adopter) and the environment that binds the agent's reports
/// to the lane's control socket `socket`, with `args` for the agent; the failures file of an
/// earlier run is removed.
fn bind_to_lane(
    state_dir: &Path,
    record: &Path,
    socket: &Path,
    args: Vec<String>,
) -> std::io::Result<ChannelSetup> {
    let failures = state_dir.join(FAILURES_FILE);
    // A file left by an earlier run counts that run's failures, not this one's.
    let _ = std::fs::remove_file(&failures);
    let token = new_token()?;
    // Replaced, not written through: a run lane's record is its worktree's `.claw/`, where the
    // agent may have put a link at the token's name.
    clawpool_worktree::replace::replace_private_file(&record.join(TOKEN_FILE), token.as_bytes())?;
    Ok(ChannelSetup {
        args,
        env: vec![
            (SOCKET_ENV.into(), socket.display().to_string()),
            (TOKEN_ENV.into(), token.clone()),
            (FAILURES_ENV.into(), failures.display().to_string()),
        ],
        token,
        failures,
    })
}

/// The report channel of a lane in `dir` whose agent was started by an earlier supervisor with
/// a hook command (Claude Code's hooks, Codex's notify program): its token, kept in the lane's
/// record folder `record` at spawn, so that the agent's reports (still carrying that token and
/// this lane's control socket `socket`) reach the adopting supervisor — and the arguments
/// `args` and the environment a worker it starts again (a restart) needs to report on the same
/// channel, with the same token. `None` when the lane has no token there (started without one,
/// or by a clawpool that kept it in the worktree, where its agent could have replaced it).
pub fn resume_reports(
    dir: &Path,
    record: &Path,
    socket: &Path,
    args: Vec<String>,
) -> Option<ChannelSetup> {
    let state_dir = dir.join(clawpool_worktree::layout::LANE_DIR);
    let token = std::fs::read_to_string(record.join(TOKEN_FILE)).ok()?;
    let token = token.trim();
    let failures = state_dir.join(FAILURES_FILE);
    (!token.is_empty()).then(|| ChannelSetup {
        token: token.to_owned(),
        args,
        env: vec![
            (SOCKET_ENV.into(), socket.display().to_string()),
            (TOKEN_ENV.into(), token.to_owned()),
            (FAILURES_ENV.into(), failures.display().to_string()),
        ],
        failures,
    })
}

/// [`resume_reports`] for Claude Code: its restarts start on the lane's settings file, which
/// each restart writes anew from the profile before it starts the agent
/// ([`ClaudeSettings::write`]).
pub fn resume_claude(dir: &Path, socket: &Path, record: &Path) -> Option<ChannelSetup> {
    resume_reports(
        dir,
        record,
        socket,
        vec![
            "--settings".into(),
            settings_file(record).display().to_string(),
        ],
    )
}

/// Claude Code settings declaring a `PROGRAM hook EVENT` command hook for every
/// [`HOOK_EVENTS`] entry (tool events for every tool), and `prefersReducedMotion` when
/// `reduced_motion`.
pub fn claude_settings(program: &Path, reduced_motion: bool) -> Value {
    let quoted = shell_quote(&program.display().to_string());
    let hooks: serde_json::Map<String, Value> = HOOK_EVENTS
        .iter()
        .map(|event| {
            let hook = json!({
                "type": "command",
                "command": format!("{quoted} hook {event}"),
                // Claude Code's own bound; delivery gives up well before it.
                "timeout": 5,
            });
            let entry = if TOOL_EVENTS.contains(event) {
                json!({"matcher": "*", "hooks": [hook]})
            } else {
                json!({"hooks": [hook]})
            };
            ((*event).to_owned(), json!([entry]))
        })
        .collect();
    if reduced_motion {
        json!({"hooks": hooks, "prefersReducedMotion": true})
    } else {
        json!({"hooks": hooks})
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A random token (128 bits, hex) from the kernel.
fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Watches a lane's failures file (inotify on its folder): each line a hook appends becomes a
/// [`ChannelMessage::Failed`] for the handshake.
pub struct FailureWatch {
    _watcher: notify::RecommendedWatcher,
}

impl FailureWatch {
    /// Starts watching `file`; `None` (logged) when its folder cannot be watched.
    pub fn start(file: &Path, sender: mpsc::Sender<ChannelMessage>) -> Option<Self> {
        use notify::Watcher;
        let watched = file.to_owned();
        let read_to = Mutex::new(0u64);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else {
                    return;
                };
                if !may_add_lines(&event.kind) || !event.paths.iter().any(|path| path == &watched) {
                    return;
                }
                let mut offset = read_to.lock().unwrap_or_else(|p| p.into_inner());
                for (event, error) in new_failures(&watched, &mut offset) {
                    let _ = sender.try_send(ChannelMessage::Failed { event, error });
                }
            })
            .map_err(|err| tracing::warn!(error = %err, "hook failures are not watched"))
            .ok()?;
        let folder = file.parent()?;
        watcher
            .watch(folder, notify::RecursiveMode::NonRecursive)
            .map_err(|err| tracing::warn!(error = %err, "hook failures are not watched"))
            .ok()?;
        Some(Self { _watcher: watcher })
    }
}

/// Whether an event on the failures file may bring lines: its creation, a write, a rename. Not
/// an access: reading the file opens it, and the open is an event of its own — answered with
/// another read, one hook failure kept a core busy for the rest of the lane's life.
fn may_add_lines(kind: &notify::EventKind) -> bool {
    use notify::event::ModifyKind;
    matches!(
        kind,
        notify::EventKind::Create(_)
            | notify::EventKind::Modify(
                ModifyKind::Data(_) | ModifyKind::Name(_) | ModifyKind::Any
            )
    )
}

/// The complete lines appended to `file` after `offset` (moved past them), as (event, error).
pub(crate) fn new_failures(file: &Path, offset: &mut u64) -> Vec<(String, String)> {
    let Ok(mut handle) = std::fs::File::open(file) else {
        return Vec::new();
    };
    let mut text = String::new();
    if handle.seek(SeekFrom::Start(*offset)).is_err() || handle.read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    let complete = text.rfind('\n').map_or(0, |end| end + 1);
    *offset += complete as u64;
    text[..complete]
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|line| {
            (
                line["event"].as_str().unwrap_or_default().to_owned(),
                line["error"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_write_or_a_new_file_is_read_for_failures() {
        use notify::EventKind;
        use notify::event::{
            AccessKind, AccessMode, CreateKind, DataChange, MetadataKind, ModifyKind,
        };
        for kind in [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::To)),
        ] {
            assert!(may_add_lines(&kind), "{kind:?}");
        }
        // The watch's own read opens the file: answering that would read again, forever.
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
        ] {
            assert!(!may_add_lines(&kind), "{kind:?}");
        }
    }

    #[test]
    fn settings_declare_every_event_with_the_program_quoted() {
        let settings = claude_settings(Path::new("/opt/it's/clawpool"), false);
        assert_eq!(settings.get("prefersReducedMotion"), None);
        let reduced = claude_settings(Path::new("/opt/it's/clawpool"), true);
        assert_eq!(reduced["prefersReducedMotion"], true);
        assert_eq!(reduced["hooks"], settings["hooks"]);
        for event in HOOK_EVENTS {
            let entry = &settings["hooks"][event][0];
            assert_eq!(
                entry["hooks"][0]["command"],
                format!("'/opt/it'\\''s/clawpool' hook {event}")
            );
            assert_eq!(entry["hooks"][0]["type"], "command");
            assert_eq!(
                entry.get("matcher").is_some(),
                TOOL_EVENTS.contains(&event),
                "{event}"
            );
        }
    }

    #[test]
    fn payloads_become_typed_facts() {
        let fact = HookFact::from_report(
            "PreToolUse",
            &json!({"session_id": "s1", "transcript_path": "/t.jsonl", "tool_name": "Bash",
                    "tool_input": {"command": "sleep 8"}}),
        );
        assert_eq!(fact.session_id.as_deref(), Some("s1"));
        assert_eq!(fact.transcript_path.as_deref(), Some("/t.jsonl"));
        assert_eq!(
            fact.event,
            HookEvent::PreToolUse {
                tool_name: "Bash".into(),
                tool_input: json!({"command": "sleep 8"})
            }
        );
        assert_eq!(fact.detail()["tool"], "Bash");
        let note = HookFact::from_report(
            "Notification",
            &json!({"notification_type": "idle_prompt", "message": "waiting"}),
        );
        assert_eq!(note.detail()["notification_type"], "idle_prompt");
        assert_eq!(HookFact::from_report("Stop", &Value::Null).name(), "Stop");
        // Claude Code's Stop carries the turn's last reply and the work still in flight.
        let stop = HookFact::from_report(
            "Stop",
            &json!({"stop_hook_active": false, "last_assistant_message": "Done.",
                    "background_tasks": [{"id": "b1"}]}),
        );
        assert_eq!(
            stop.event,
            HookEvent::Stop {
                last_message: Some("Done.".into()),
                in_flight: 1
            }
        );
        assert_eq!(stop.detail()["last_assistant_message"], "Done.");
        assert_eq!(stop.detail()["background_tasks"], 1);
        let blank = HookFact::from_report("Stop", &json!({"last_assistant_message": " \n"}));
        assert_eq!(
            blank.event,
            HookEvent::Stop {
                last_message: None,
                in_flight: 0
            }
        );
        assert_eq!(
            HookFact::from_report("TeammateIdle", &Value::Null).name(),
            "TeammateIdle"
        );
    }

    #[tokio::test]
    async fn a_report_with_another_token_is_refused() {
        let (sender, mut receiver) = mpsc::channel(4);
        let inbox = HookInbox {
            token: "ours".into(),
            sender,
            permissions: None,
            usage: None,
        };
        let report = |token: &str| HookReport {
            token: token.into(),
            event: "Stop".into(),
            payload: Value::Null,
        };
        assert_eq!(inbox.take(report("theirs")), Err(HookRefused::WrongToken));
        assert!(receiver.try_recv().is_err());
        assert_eq!(inbox.take(report("ours")), Ok(None));
        assert!(matches!(
            receiver.try_recv(),
            Ok(ChannelMessage::Fact(HookFact {
                event: HookEvent::Stop { .. },
                ..
            }))
        ));
    }

    #[tokio::test]
    async fn a_permission_request_is_answered_with_the_gates_decision() {
        use clawpool_recovery::permissions::{
            Effect, Entry, LaneContext, PermissionPolicy, Profile, Scope, Tool,
        };
        let dir = tempfile::tempdir().expect("a worktree");
        let worktree = dir.path().canonicalize().expect("worktree");
        let policy = PermissionPolicy {
            entries: vec![Entry {
                tool: Some(Tool::Bash),
                verb: "touch".into(),
                scope: Scope::Anywhere,
                effect: Effect::Deny,
            }],
        };
        let gate = PermissionGate::new(
            policy,
            LaneContext {
                worktree: worktree.clone(),
                repository: worktree.clone(),
                other_lanes: Vec::new(),
                home: None,
                profile: Profile::WorkspaceWrite,
                protected: Default::default(),
            },
        );
        let (sender, mut receiver) = mpsc::channel(8);
        let inbox = HookInbox {
            token: "ours".into(),
            sender,
            permissions: Some(gate),
            usage: None,
        };
        let ask = |tool: &str, input: Value, cwd: &Path| HookReport {
            token: "ours".into(),
            event: "PermissionRequest".into(),
            payload: json!({"tool_name": tool, "tool_input": input, "cwd": cwd}),
        };
        let inside = worktree.join("a.txt");
        let decision = |reply: Result<Option<HookDecision>, HookRefused>| reply.expect("taken");
        let allowed = decision(inbox.take(ask("Write", json!({"file_path": inside}), &worktree)))
            .expect("a decision");
        assert_eq!(
            serde_json::to_value(&allowed).expect("json"),
            json!({"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}})
        );
        let denied = decision(inbox.take(ask("Bash", json!({"command": "touch x"}), &worktree)))
            .expect("a decision");
        assert_eq!(denied.decision.behavior, Behavior::Deny);
        assert!(
            denied
                .decision
                .message
                .as_deref()
                .is_some_and(|m| m.contains("permissions.entry#1:deny")),
            "{denied:?}"
        );
        // `cat x` is a safe read in the worktree, but not in the folder the agent runs it in.
        let reply = inbox.take(ask("Bash", json!({"command": "cat x"}), Path::new("/")));
        assert_eq!(reply, Ok(None), "an ask has no answer");
        let mut kinds = Vec::new();
        while let Ok(message) = receiver.try_recv() {
            kinds.push(match message {
                ChannelMessage::Fact(fact) => fact.name().to_owned(),
                ChannelMessage::PermissionDecided(answer) => answer.verdict.name().to_owned(),
                other => format!("{other:?}"),
            });
        }
        assert_eq!(
            kinds,
            [
                "PermissionRequest",
                "allow",
                "PermissionRequest",
                "deny",
                "PermissionRequest",
                "ask"
            ]
        );
    }
}
