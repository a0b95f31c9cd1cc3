//! The payloads of trust and questions: the folder's trust, the agent's trust store, dialogs
//! answered, permission decisions, and operator commands the lane did not carry out.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `lane.trust_resolved`: how the folder came to be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustResolved {
    /// `allowlist` (clawpool answered for an allow-listed root), `manual` (`clawpool trust`),
    /// `preseeded`, `policy`, … (`docs/events.md`).
    pub method: String,
}

impl TrustResolved {
    /// The method of an operator's `clawpool trust`, which outlives the supervisor.
    pub const MANUAL: &str = "manual";
    /// The method of a dialog clawpool answered for a lane under a trusted root.
    pub const AUTO_ALLOWLISTED: &str = "auto_allowlisted";
}

/// `lane.dialog_answered`: a dialog on screen answered with keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DialogAnswered {
    /// The dialog's name in the profile.
    pub dialog: String,
    /// The choice pressed.
    pub choice: String,
    /// `policy` (the lane's dialog policy or permission policy) or `operator`.
    pub by: String,
    /// Which answer to this dialog it is (a trust dialog is answered up to three times).
    pub attempt: u32,
    /// Whether the keys were sent and the dialog went.
    pub completed: bool,
    /// Why not, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl DialogAnswered {
    /// The answer `by` the lane's policy.
    pub const BY_POLICY: &str = "policy";
    /// The answer `by` an operator's `clawpool answer` or `clawpool trust`.
    pub const BY_OPERATOR: &str = "operator";
    /// The dialog name of a tool-permission question.
    pub const TOOL_PERMISSION: &str = "tool_permission";
}

/// `lane.dialog_ignored`: the screen showed what a boot-only dialog's rule matches (a trust or
/// boot dialog) after the agent's boot was over: agent output, not a question. Nothing was
/// pressed and the lane's state did not change (`docs/trust.md`, "The screen").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DialogIgnored {
    /// The dialog's name in the profile.
    pub dialog: String,
    /// Why it is not a question.
    pub reason: String,
}

impl DialogIgnored {
    /// The only reason today: the agent was past its boot.
    pub const AFTER_BOOT: &str = "after_boot";
}

/// `lane.permission.decided`: the permission policy decided a tool-permission question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDecided {
    /// `bash`, `write`, `edit` (or the hook's tool name); null when the question could not be
    /// read.
    pub tool: Option<String>,
    /// The verb of the part that decided.
    pub verb: Option<String>,
    /// Its arguments (truncated).
    pub args: Vec<String>,
    /// The folder it runs in.
    pub cwd: Option<String>,
    /// The rule that decided (`grant:<id>` for a remembered answer).
    pub rule: String,
    /// `allow`, `deny` or `ask`.
    pub decision: String,
    /// Why, in one line.
    pub reason: String,
    /// The whole command or path (truncated); absent when the question could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// How many parts the command has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<usize>,
    /// The lane's permission profile.
    pub profile: String,
    /// Grant stores set aside or unreadable this time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grant_stores: Vec<Value>,
}

impl PermissionDecided {
    /// The grant a remembered answer came from, when one did.
    pub fn grant(&self) -> Option<&str> {
        self.rule.strip_prefix("grant:")
    }
}

/// `lane.trust_store_seeded`: the lane's folder recorded as trusted in the agent's store
/// before it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustStoreSeeded {
    /// The store's file.
    pub store: String,
    /// What seeding did (`Seeded`, `AlreadyTrusted`); absent when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `lane.trust_store_confined`: what the agent recorded in its trust store beyond the lane,
/// withdrawn (`docs/trust.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustStoreConfined {
    /// The store's file.
    pub store: String,
    /// The projects whose trust was withdrawn; absent when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<Vec<String>>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `lane.operator_ignored`, `lane.operator_refused`: an operator's command the lane did not
/// carry out; nothing was pressed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorDeclined {
    /// The command as typed (`answer --choice yes`, `trust`).
    pub command: String,
    /// Why, in words.
    pub reason: String,
    /// The dialog's choices, when a choice was named and refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
}

/// `lane.caller_refused`: a request to the lane's control socket from a caller the lane does not
/// take it from — an operator request from inside a lane, a hook report from outside this
/// lane's agent (`docs/trust.md`, "Threat model"); nothing reached the lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallerRefused {
    /// The request as typed (`answer --choice yes`, `trust`, `hook Stop`, `screen`, …).
    pub request: String,
    /// Why, in words.
    pub reason: String,
    /// The caller's pid, when the kernel gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The caller's uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// The lane the caller runs inside, if that is why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside: Option<CallerLane>,
}

/// The lane a refused caller runs inside, and the process that says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallerLane {
    /// The lane's name.
    pub lane: String,
    /// Its folder.
    pub dir: String,
    /// The process carrying the lane's mark (its agent).
    pub pid: u32,
    /// How that process is the caller's: `itself`, `ancestor`, `session_leader`,
    /// `group_leader`.
    pub relation: String,
}

/// `lane.dialog_answered_outside`: a dialog the lane was blocked on, waiting for its answer,
/// went away without clawpool having sent one — keys typed into the agent's terminal by
/// someone else (a person attached to its tmux session, or the agent itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DialogAnsweredOutside {
    /// The dialog's name in the profile.
    pub dialog: String,
    /// Its kind: `trust`, `tool_permission` or `boot`.
    pub dialog_kind: String,
}
