//! The payloads of the agent's own channel: opened, degraded, contradicted by the screen, and
//! the hook, protocol and usage facts it reported (the agent's fields kept in its vocabulary).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Evidence;

/// `lane.channel.opened`: the agent's own channel is set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelOpened {
    /// `claude_hooks`, `codex_app_server` or `codex_notify`.
    pub channel: String,
    /// Claude Code's: the lane's settings file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The app server's: its socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// Set up again by a supervisor adopting the lane.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopted: bool,
}

/// `lane.channel.degraded`: the agent's channel failed; the screen decides from now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelDegraded {
    /// `claude_hooks`, `codex_app_server` or `codex_notify`.
    pub channel: String,
    /// The hook whose report was lost, or for the app server `connection`, `start`, `adopt`.
    pub event: String,
    /// Why, in the failing side's words.
    pub error: String,
    /// Failures so far.
    pub failed: u32,
    /// What decides from now: `screen`.
    pub decides: String,
}

impl ChannelDegraded {
    /// What decides once the channel is degraded.
    pub const SCREEN: &str = "screen";
}

/// `lane.hook`: a fact the agent reported through its hook channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookReported {
    /// The hook event (`SessionStart`, `Stop`, …; Codex's notify type).
    pub event: String,
    /// The agent's session, when it named one.
    pub session_id: Option<String>,
    /// The agent's transcript, when it named one.
    pub transcript_path: Option<String>,
    /// The event's own fields (`prompt`, `tool`, …: `docs/events.md`), cut to size.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// `lane.protocol`: a message of the agent's own protocol (Codex's app server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolReported {
    /// The message's method (`turn/completed`, `thread/tokenUsage/updated`, …).
    pub event: String,
    /// The agent fact it means (`Stop`, `PreToolUse`, …).
    pub means: String,
    /// The thread it concerns.
    pub thread_id: Option<String>,
    /// The message's fields, in the agent's vocabulary.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl ProtocolReported {
    /// The method of Codex's running token totals for a thread.
    pub const TOKEN_USAGE: &str = "thread/tokenUsage/updated";
}

/// `lane.usage`: a turn's token usage, as the agent wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageReported {
    /// Where it was read (`claude_transcript`).
    pub source: String,
    /// The usage object, in the agent's vocabulary.
    pub usage: Value,
    /// The transcript it was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    /// The model that answered, as the transcript names it (what the usage is priced as).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The id of the assistant message the usage is of: read again (a tool call's report,
    /// then the turn's end), the same message replaces its earlier count instead of adding
    /// to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// An amount of US dollars in an event or a command (a lane's budget, its cost when the
/// budget was set). Never NaN: JSON has no NaN, and budgets are checked to be above 0 where
/// they are read (the packet, `clawpool budget`), so equality is total.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Usd(pub f64);

impl Eq for Usd {}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Small budgets (a test's, a cent) keep their digits; larger ones read as money.
        if self.0 < 1.0 {
            write!(f, "${:.6}", self.0)
        } else {
            write!(f, "${:.2}", self.0)
        }
    }
}

/// `lane.budget_set`: an operator set the lane's budget (`clawpool budget`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetSet {
    /// The new budget.
    pub budget_usd: Usd,
    /// The budget before, if there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub was_usd: Option<Usd>,
    /// The lane's cost when it was set, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Usd>,
}

/// `lane.channel.contradiction`: the agent's channel and its screen disagreed past a bound,
/// and the rule of `docs/events.md` decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelContradiction {
    /// What the channel said.
    pub channel: Evidence,
    /// What the screen showed.
    pub screen: Evidence,
    /// How long they disagreed.
    pub for_ms: u64,
    /// What the lane became: `finished`, or `channel_waits` (it kept its state).
    pub resolved: String,
}

impl ChannelContradiction {
    /// The channel's finish won over a screen still showing work: the lane is finished.
    pub const FINISHED: &str = "finished";
    /// The channel's open turn won over an idle-looking screen: the lane keeps its state and
    /// waits for the channel's finish.
    pub const CHANNEL_WAITS: &str = "channel_waits";
}
