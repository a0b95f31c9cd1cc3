//! The typed fields of the lane events whose fields other code reads: one struct per kind,
//! written and read through [`Payload`], so a writer and its readers cannot disagree on a key.
//!
//! On the wire the fields stay where they always were, in the event's `detail` object
//! (`docs/events.md`); [`LaneEvent::payload`](crate::LaneEvent::payload) reads them back as
//! the variant of the event's kind. A field a writer leaves out reads as absent, and an event
//! whose detail does not have its kind's shape (a log written by another version) reads as no
//! payload: reading a log never fails on it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::LaneEventKind;
use crate::verification::{GreenLevel, Verification};

/// `lane.started`, `lane.adopted`: the worker the run drives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStarted {
    /// The profile's name.
    pub agent: String,
    /// The worker's process id, when the transport knows it.
    pub pid: Option<u32>,
}

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

/// `lane.prompt_sent`: Enter is about to be pressed on the draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptSent {
    /// Which press of Enter this is, counting every worker of the lane.
    pub attempt: u32,
    /// What pressed it, when not the handshake (`resubmit_prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// `lane.prompt_accepted`: the delivery receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptAccepted {
    /// `typed`, `task_file`, `launch_arg` or `none`.
    pub method: String,
    /// How many times Enter was pressed for the draft.
    pub attempts: u32,
    /// When Enter was first pressed (epoch ms).
    pub sent_at: Option<u64>,
    /// When acceptance was seen (epoch ms).
    pub accepted_at: Option<u64>,
    /// The evidence of acceptance (the echoed prompt or the working indicator).
    pub observed_prompt_preview: Option<String>,
}

/// `lane.escalated`, and the `lane.blocked` of a recipe that escalates by blocking: a person
/// must act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalated {
    /// Why clawpool could not go on by itself.
    pub reason: String,
    /// The recommended next action (commands name the lane).
    pub next_action: String,
    /// The recovery recipe that escalated, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<String>,
}

/// What a finished lane's work came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneOutcome {
    /// The lane's branch has commits of its own since its base, or its worktree has
    /// uncommitted work.
    Changed,
    /// Nothing changed: no commits of its own since its base and a clean worktree. Its
    /// passing tests prove only the unchanged code, so it is never merge-ready.
    NoChanges,
}

/// `lane.outcome`: what a finished lane's work came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeReported {
    /// Changed or not.
    pub outcome: LaneOutcome,
    /// Commits of the lane's own since its base.
    pub commits: u64,
    /// Whether the worktree has uncommitted work.
    pub dirty: bool,
}

/// `lane.verified`: a verification's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    /// What ran and how it ended.
    pub verification: Verification,
    /// The green level the lane reached, if any.
    pub green_level: Option<GreenLevel>,
    /// Why it is not green (the state file's failure detail when the lane's state moved).
    pub message: Option<String>,
}

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

/// `lane.commit.created`: the lane's branch gained a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitCreated {
    /// The commit.
    pub sha: String,
    /// Its subject line.
    pub subject: String,
    /// Which look noticed it: `start`, `watch`, `sweep` or `last`.
    pub look: String,
}

/// `lane.commits.skipped`: more new commits in one look than are reported one by one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitsSkipped {
    /// How many older ones are summed up here.
    pub count: usize,
    /// The oldest of them.
    pub oldest: Option<String>,
    /// The newest commit that is reported on its own.
    pub newest_reported: Option<String>,
    /// Which look noticed them.
    pub look: String,
}

/// `lane.closed_out`: the policy's `close_out` ended the lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedOut {
    /// The rule that decided it.
    pub rule: String,
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
}

/// The typed fields of an event, as the variant of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `lane.started`.
    Started(WorkerStarted),
    /// `lane.adopted`.
    Adopted(WorkerStarted),
    /// `lane.trust_resolved`.
    TrustResolved(TrustResolved),
    /// `lane.prompt_sent`.
    PromptSent(PromptSent),
    /// `lane.prompt_accepted`.
    PromptAccepted(PromptAccepted),
    /// `lane.escalated`.
    Escalated(Escalated),
    /// `lane.blocked` by a recipe's escalation (other `lane.blocked` events have no payload).
    BlockedEscalated(Escalated),
    /// `lane.outcome`.
    Outcome(OutcomeReported),
    /// `lane.permission.decided`.
    PermissionDecided(PermissionDecided),
    /// `lane.channel.opened`.
    ChannelOpened(ChannelOpened),
    /// `lane.channel.degraded`.
    ChannelDegraded(ChannelDegraded),
    /// `lane.verified` (boxed: a verification with its commands is large).
    Verified(Box<Verified>),
    /// `lane.dialog_answered`.
    DialogAnswered(DialogAnswered),
    /// `lane.commit.created`.
    CommitCreated(CommitCreated),
    /// `lane.commits.skipped`.
    CommitsSkipped(CommitsSkipped),
    /// `lane.closed_out`.
    ClosedOut(ClosedOut),
    /// `lane.hook`.
    Hook(HookReported),
    /// `lane.protocol`.
    Protocol(ProtocolReported),
    /// `lane.usage`.
    Usage(UsageReported),
}

impl Payload {
    /// The kind of event that carries it.
    pub fn kind(&self) -> LaneEventKind {
        match self {
            Payload::Started(_) => LaneEventKind::Started,
            Payload::Adopted(_) => LaneEventKind::Adopted,
            Payload::TrustResolved(_) => LaneEventKind::TrustResolved,
            Payload::PromptSent(_) => LaneEventKind::PromptSent,
            Payload::PromptAccepted(_) => LaneEventKind::PromptAccepted,
            Payload::Escalated(_) => LaneEventKind::Escalated,
            Payload::BlockedEscalated(_) => LaneEventKind::Blocked,
            Payload::Outcome(_) => LaneEventKind::Outcome,
            Payload::PermissionDecided(_) => LaneEventKind::PermissionDecided,
            Payload::ChannelOpened(_) => LaneEventKind::ChannelOpened,
            Payload::ChannelDegraded(_) => LaneEventKind::ChannelDegraded,
            Payload::Verified(_) => LaneEventKind::Verified,
            Payload::DialogAnswered(_) => LaneEventKind::DialogAnswered,
            Payload::CommitCreated(_) => LaneEventKind::CommitCreated,
            Payload::CommitsSkipped(_) => LaneEventKind::CommitsSkipped,
            Payload::ClosedOut(_) => LaneEventKind::ClosedOut,
            Payload::Hook(_) => LaneEventKind::Hook,
            Payload::Protocol(_) => LaneEventKind::Protocol,
            Payload::Usage(_) => LaneEventKind::Usage,
        }
    }

    /// Its fields as the event's `detail`.
    pub fn detail(&self) -> Value {
        let value = match self {
            Payload::Started(p) | Payload::Adopted(p) => serde_json::to_value(p),
            Payload::TrustResolved(p) => serde_json::to_value(p),
            Payload::PromptSent(p) => serde_json::to_value(p),
            Payload::PromptAccepted(p) => serde_json::to_value(p),
            Payload::Escalated(p) | Payload::BlockedEscalated(p) => serde_json::to_value(p),
            Payload::Outcome(p) => serde_json::to_value(p),
            Payload::PermissionDecided(p) => serde_json::to_value(p),
            Payload::ChannelOpened(p) => serde_json::to_value(p),
            Payload::ChannelDegraded(p) => serde_json::to_value(p),
            Payload::Verified(p) => serde_json::to_value(p),
            Payload::DialogAnswered(p) => serde_json::to_value(p),
            Payload::CommitCreated(p) => serde_json::to_value(p),
            Payload::CommitsSkipped(p) => serde_json::to_value(p),
            Payload::ClosedOut(p) => serde_json::to_value(p),
            Payload::Hook(p) => serde_json::to_value(p),
            Payload::Protocol(p) => serde_json::to_value(p),
            Payload::Usage(p) => serde_json::to_value(p),
        };
        value.expect("payloads are plain data")
    }

    /// The payload of an event of `kind` with this `detail`; `None` for a kind without one or a
    /// detail that does not have its kind's shape.
    pub fn read(kind: &LaneEventKind, detail: &Value) -> Option<Payload> {
        fn typed<T: DeserializeOwned>(detail: &Value) -> Option<T> {
            T::deserialize(detail).ok()
        }
        Some(match kind {
            LaneEventKind::Started => Payload::Started(typed(detail)?),
            LaneEventKind::Adopted => Payload::Adopted(typed(detail)?),
            LaneEventKind::TrustResolved => Payload::TrustResolved(typed(detail)?),
            LaneEventKind::PromptSent => Payload::PromptSent(typed(detail)?),
            LaneEventKind::PromptAccepted => Payload::PromptAccepted(typed(detail)?),
            LaneEventKind::Escalated => Payload::Escalated(typed(detail)?),
            LaneEventKind::Blocked => Payload::BlockedEscalated(typed(detail)?),
            LaneEventKind::Outcome => Payload::Outcome(typed(detail)?),
            LaneEventKind::PermissionDecided => Payload::PermissionDecided(typed(detail)?),
            LaneEventKind::ChannelOpened => Payload::ChannelOpened(typed(detail)?),
            LaneEventKind::ChannelDegraded => Payload::ChannelDegraded(typed(detail)?),
            LaneEventKind::Verified => Payload::Verified(Box::new(typed(detail)?)),
            LaneEventKind::DialogAnswered => Payload::DialogAnswered(typed(detail)?),
            LaneEventKind::CommitCreated => Payload::CommitCreated(typed(detail)?),
            LaneEventKind::CommitsSkipped => Payload::CommitsSkipped(typed(detail)?),
            LaneEventKind::ClosedOut => Payload::ClosedOut(typed(detail)?),
            LaneEventKind::Hook => Payload::Hook(typed(detail)?),
            LaneEventKind::Protocol => Payload::Protocol(typed(detail)?),
            LaneEventKind::Usage => Payload::Usage(typed(detail)?),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LaneEvent;
    use crate::verification::VerifyResult;

    fn every_payload() -> Vec<Payload> {
        let started = WorkerStarted {
            agent: "claude".into(),
            pid: Some(42),
        };
        let escalated = Escalated {
            reason: "stalled twice".into(),
            next_action: "clawpool attach a".into(),
            recipe: Some("interrupt_and_nudge".into()),
        };
        vec![
            Payload::Started(started.clone()),
            Payload::Adopted(WorkerStarted {
                pid: None,
                ..started
            }),
            Payload::TrustResolved(TrustResolved {
                method: TrustResolved::MANUAL.into(),
            }),
            Payload::PromptSent(PromptSent {
                attempt: 2,
                by: Some("resubmit_prompt".into()),
            }),
            Payload::PromptAccepted(PromptAccepted {
                method: "typed".into(),
                attempts: 1,
                sent_at: Some(1_000),
                accepted_at: Some(2_000),
                observed_prompt_preview: Some("fix the bug".into()),
            }),
            Payload::Escalated(Escalated {
                recipe: None,
                ..escalated.clone()
            }),
            Payload::BlockedEscalated(escalated),
            Payload::Outcome(OutcomeReported {
                outcome: LaneOutcome::NoChanges,
                commits: 0,
                dirty: false,
            }),
            Payload::PermissionDecided(PermissionDecided {
                tool: Some("bash".into()),
                verb: Some("cargo".into()),
                args: vec!["test".into()],
                cwd: Some("/work/lanes/a".into()),
                rule: "grant:g1".into(),
                decision: "allow".into(),
                reason: "granted for this repository".into(),
                command: Some("cargo test".into()),
                parts: Some(1),
                profile: "workspace-write".into(),
                grant_stores: vec![serde_json::json!({"store": "x", "set_aside": true})],
            }),
            Payload::ChannelOpened(ChannelOpened {
                channel: "codex_app_server".into(),
                settings: None,
                socket: Some(".claw/codex-app-server.sock".into()),
                adopted: true,
            }),
            Payload::ChannelDegraded(ChannelDegraded {
                channel: "claude_hooks".into(),
                event: "Stop".into(),
                error: "the control socket is gone".into(),
                failed: 2,
                decides: ChannelDegraded::SCREEN.into(),
            }),
            Payload::Verified(Box::new(Verified {
                verification: Verification {
                    level: GreenLevel::Targeted,
                    result: VerifyResult::Green,
                    class: None,
                    commands: Vec::new(),
                    merge: None,
                    freshness: None,
                    reason: None,
                    head: Some("abc123".into()),
                    started_at: 1,
                    finished_at: 2,
                },
                green_level: Some(GreenLevel::Targeted),
                message: None,
            })),
            Payload::DialogAnswered(DialogAnswered {
                dialog: DialogAnswered::TOOL_PERMISSION.into(),
                choice: "no".into(),
                by: DialogAnswered::BY_OPERATOR.into(),
                attempt: 1,
                completed: false,
                error: Some("the dialog did not go".into()),
            }),
            Payload::CommitCreated(CommitCreated {
                sha: "abc123".into(),
                subject: "Fix the login bug".into(),
                look: "watch".into(),
            }),
            Payload::CommitsSkipped(CommitsSkipped {
                count: 3,
                oldest: Some("aaa111".into()),
                newest_reported: Some("bbb222".into()),
                look: "start".into(),
            }),
            Payload::ClosedOut(ClosedOut {
                rule: "close-out-merge-ready".into(),
            }),
            Payload::Hook(HookReported {
                event: "PreToolUse".into(),
                session_id: Some("s1".into()),
                transcript_path: None,
                fields: serde_json::json!({"tool": "Bash", "tool_input": {"command": "ls"}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            }),
            Payload::Protocol(ProtocolReported {
                event: ProtocolReported::TOKEN_USAGE.into(),
                means: "Usage".into(),
                thread_id: Some("t1".into()),
                fields: serde_json::json!({"turn_id": "7", "usage": {"total": {"inputTokens": 3}}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            }),
            Payload::Usage(UsageReported {
                source: "claude_transcript".into(),
                usage: serde_json::json!({"input_tokens": 3, "output_tokens": 5}),
                transcript_path: Some("/tmp/t.jsonl".into()),
            }),
        ]
    }

    #[test]
    fn every_payload_reads_back_as_written_under_its_kind() {
        for payload in every_payload() {
            let read = Payload::read(&payload.kind(), &payload.detail());
            assert_eq!(read.as_ref(), Some(&payload), "{}", payload.kind());
        }
    }

    #[test]
    fn the_documented_example_event_reads_as_its_payload() {
        let doc = include_str!("../../docs/events.md");
        let example = doc
            .split("```json\n")
            .nth(1)
            .and_then(|rest| rest.split("\n```").next())
            .expect("docs/events.md opens with an example event");
        let event: LaneEvent = serde_json::from_str(example).expect("the example is an event");
        assert_eq!(
            event.payload(),
            Some(Payload::PromptAccepted(PromptAccepted {
                method: "typed".into(),
                attempts: 1,
                sent_at: Some(1_795_266_696_326),
                accepted_at: Some(1_795_266_696_338),
                observed_prompt_preview: Some("❯ fix the login bug".into()),
            }))
        );
    }

    #[test]
    fn a_detail_without_its_kinds_shape_has_no_payload() {
        assert_eq!(
            Payload::read(
                &LaneEventKind::PromptSent,
                &serde_json::json!({"attempt": "one"})
            ),
            None
        );
        // A transition to blocked that no escalation made.
        assert_eq!(Payload::read(&LaneEventKind::Blocked, &Value::Null), None);
        assert_eq!(
            Payload::read(&LaneEventKind::Running, &serde_json::json!({})),
            None
        );
    }
}
