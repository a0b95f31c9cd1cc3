//! The kinds of lane events: one variant per kind, each named on the wire by its stable dotted
//! name (`lane.prompt_sent`, `branch.merged_forward`). Writers record a variant; readers match on variants. A kind this
//! build does not know (a log written by a newer clawpool) is kept as [`LaneEventKind::Other`],
//! so reading an event log never fails on it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a lane event says happened (`docs/events.md` describes each).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LaneEventKind {
    /// `lane.started`: The agent's process started (`detail.agent`, `detail.pid`).
    Started,
    /// `lane.adopted`: A supervisor took over a lane whose supervisor died (`clawpool adopt`).
    Adopted,
    /// `lane.session_replaced`: A tmux session left by an earlier run under the lane's name was replaced.
    SessionReplaced,
    /// `lane.trust_store_seeded`: The agent's trust store was pre-seeded for the lane's folder.
    TrustStoreSeeded,
    /// `lane.trust_store_confined`: What the agent recorded in its trust store was kept to the lane's folder.
    TrustStoreConfined,
    /// `lane.spawning`: Transition to `spawning`.
    Spawning,
    /// `lane.trust_required`: Transition to `trust_required`: the agent asks whether to trust the folder.
    TrustRequired,
    /// `lane.trust_resolved`: The trust question was answered, or the lane trusted by an operator.
    TrustResolved,
    /// `lane.dialog_answered`: A dialog was answered as the lane's policy allows.
    DialogAnswered,
    /// `lane.dialog_ignored`: Text that looks like a dialog only a starting agent asks showed after boot: not a question, nothing pressed.
    DialogIgnored,
    /// `lane.tool_permission_required`: Transition to `tool_permission_required`.
    ToolPermissionRequired,
    /// `lane.permission.decided`: The permission policy decided a tool-permission question.
    PermissionDecided,
    /// `lane.ready`: Transition to `ready_for_prompt`.
    Ready,
    /// `lane.delivery_held`: Delivery waits (a git operation paused in the worktree).
    DeliveryHeld,
    /// `lane.delivery_resumed`: Delivery goes on after a hold.
    DeliveryResumed,
    /// `lane.prompt_typed`: The prompt (or a pointer to `.claw/task.md`) was typed into the input line.
    PromptTyped,
    /// `lane.prompt_sent`: Enter is about to be pressed on the draft (recorded first).
    PromptSent,
    /// `lane.prompt_misdelivery`: The prompt reached a shell or another folder instead of the agent.
    PromptMisdelivery,
    /// `lane.prompt_accepted`: Transition to `prompt_accepted`: the agent took the prompt.
    PromptAccepted,
    /// `lane.prompt_round`: A follow-up text starts a new round of delivery.
    PromptRound,
    /// `lane.input_cleared`: The input line was emptied before typing.
    InputCleared,
    /// `lane.send_queued`: An operator's text waits for the agent to be idle.
    SendQueued,
    /// `lane.send_refused`: An operator's text was refused.
    SendRefused,
    /// `lane.send_failed`: Writing to the worker's terminal failed.
    SendFailed,
    /// `lane.running`: Transition to `running`.
    Running,
    /// `lane.stalled`: A running lane made no progress for the stall time.
    Stalled,
    /// `lane.hook`: The agent reported a fact through its hook channel (`detail.event`, …).
    Hook,
    /// `lane.channel.degraded`: The agent's hook channel failed: the screen decides from now.
    ChannelDegraded,
    /// `lane.protocol`: The agent reported a fact through its app server (`detail.message`, …).
    Protocol,
    /// `lane.channel.opened`: The agent's own channel is up (`detail.channel`).
    ChannelOpened,
    /// `lane.channel.contradiction`: The agent's channel and its screen disagreed past a bound.
    ChannelContradiction,
    /// `lane.usage`: The tokens of a turn, read from the agent's transcript.
    Usage,
    /// `lane.blocked`: Transition to `blocked` (with its subphase).
    Blocked,
    /// `lane.escalated`: A person is needed: the reason and the next action.
    Escalated,
    /// `lane.operator_ignored`: An operator command had nothing to do.
    OperatorIgnored,
    /// `lane.operator_refused`: An operator command was refused.
    OperatorRefused,
    /// `lane.caller_refused`: A request to the lane's control socket came from a caller it
    /// does not take requests from (inside a lane, another lane's hook).
    CallerRefused,
    /// `lane.dialog_answered_outside`: A dialog clawpool was waiting on went away without
    /// clawpool's answer.
    DialogAnsweredOutside,
    /// `lane.restart_requested`: An operator asked for the worker to be started again.
    RestartRequested,
    /// `lane.restarted`: A new worker runs in the lane's folder.
    Restarted,
    /// `lane.commit.created`: A commit appeared on the lane's branch (`detail.sha`).
    CommitCreated,
    /// `lane.commits.skipped`: Commits the log had not reported, summed up.
    CommitsSkipped,
    /// `lane.branch_blocked`: The branch cannot be checked or merged forward.
    BranchBlocked,
    /// `lane.stale_red`: A red result on a branch behind its base.
    StaleRed,
    /// `branch.stale_against_main`: The lane just became stale against its base.
    BranchStaleAgainstMain,
    /// `branch.merged_forward`: The base was merged (or rebased) into the lane's branch.
    BranchMergedForward,
    /// `branch.merge_conflict`: Merging the base forward conflicted; the lane is back at its head.
    BranchMergeConflict,
    /// `branch.merge_refused`: Merging the base forward was refused (dirty, detached, …).
    BranchMergeRefused,
    /// `branch.merge_failed`: Git failed while merging the base forward.
    BranchMergeFailed,
    /// `test.hung`: A verification command ran past its timeout and was killed.
    TestHung,
    /// `lane.green`: Verification passed at a level.
    Green,
    /// `lane.red`: Verification failed at a level.
    Red,
    /// `lane.verify_blocked`: Verification could not run.
    VerifyBlocked,
    /// `lane.verified`: A verification finished (its level and result).
    Verified,
    /// `lane.merge.ready`: The lane is green at merge-ready.
    MergeReady,
    /// `lane.recovery.queued`: A recovery attempt was queued.
    RecoveryQueued,
    /// `lane.recovery.running`: A recovery attempt is being carried out.
    RecoveryRunning,
    /// `lane.recovery.succeeded`: A recovery attempt healed the lane.
    RecoverySucceeded,
    /// `lane.recovery.failed`: A recovery attempt did not heal the lane.
    RecoveryFailed,
    /// `lane.recovery.exhausted`: The recipe's attempts are used up.
    RecoveryExhausted,
    /// `lane.finished`: Transition to `finished`.
    Finished,
    /// `lane.stopped`: Transition to `stopped`: a person ended the lane (`clawpool stop`).
    Stopped,
    /// `lane.failed`: Transition to `failed` (with its class).
    Failed,
    /// `lane.outcome`: How the lane ended, summed up.
    Outcome,
    /// `lane.closed_out`: The lane was closed out as the policy says.
    ClosedOut,
    /// `lane.rerun`: A finished lane was run again (`--rerun`).
    Rerun,
    /// `lane.publication_restored`: The lane's published state file was changed or removed by someone other than its supervisor, and was written again from the lane's record.
    PublicationRestored,
    /// `lane.landed`: The lane's verified work moved its base (`clawpool land`).
    Landed,
    /// `lane.land_failed`: `clawpool land` left the lane out: conflict, red, hang or a refusal.
    LandFailed,
    /// `lane.pr.opened`: A pull request of the lane's branch was opened on the forge, or found open (`clawpool pr`).
    PrOpened,
    /// `lane.budget_set`: An operator set the lane's budget (`clawpool budget`).
    BudgetSet,
    /// A kind this build does not know, as written.
    Other(String),
}

impl LaneEventKind {
    /// Every kind this build records, in the order `docs/events.md` lists them.
    pub const ALL: [LaneEventKind; 71] = [
        LaneEventKind::Started,
        LaneEventKind::Adopted,
        LaneEventKind::SessionReplaced,
        LaneEventKind::TrustStoreSeeded,
        LaneEventKind::TrustStoreConfined,
        LaneEventKind::Spawning,
        LaneEventKind::TrustRequired,
        LaneEventKind::TrustResolved,
        LaneEventKind::DialogAnswered,
        LaneEventKind::DialogIgnored,
        LaneEventKind::ToolPermissionRequired,
        LaneEventKind::PermissionDecided,
        LaneEventKind::Ready,
        LaneEventKind::DeliveryHeld,
        LaneEventKind::DeliveryResumed,
        LaneEventKind::PromptTyped,
        LaneEventKind::PromptSent,
        LaneEventKind::PromptMisdelivery,
        LaneEventKind::PromptAccepted,
        LaneEventKind::PromptRound,
        LaneEventKind::InputCleared,
        LaneEventKind::SendQueued,
        LaneEventKind::SendRefused,
        LaneEventKind::SendFailed,
        LaneEventKind::Running,
        LaneEventKind::Stalled,
        LaneEventKind::Hook,
        LaneEventKind::ChannelDegraded,
        LaneEventKind::Protocol,
        LaneEventKind::ChannelOpened,
        LaneEventKind::ChannelContradiction,
        LaneEventKind::Usage,
        LaneEventKind::Blocked,
        LaneEventKind::Escalated,
        LaneEventKind::OperatorIgnored,
        LaneEventKind::OperatorRefused,
        LaneEventKind::CallerRefused,
        LaneEventKind::DialogAnsweredOutside,
        LaneEventKind::RestartRequested,
        LaneEventKind::Restarted,
        LaneEventKind::CommitCreated,
        LaneEventKind::CommitsSkipped,
        LaneEventKind::BranchBlocked,
        LaneEventKind::StaleRed,
        LaneEventKind::BranchStaleAgainstMain,
        LaneEventKind::BranchMergedForward,
        LaneEventKind::BranchMergeConflict,
        LaneEventKind::BranchMergeRefused,
        LaneEventKind::BranchMergeFailed,
        LaneEventKind::TestHung,
        LaneEventKind::Green,
        LaneEventKind::Red,
        LaneEventKind::VerifyBlocked,
        LaneEventKind::Verified,
        LaneEventKind::MergeReady,
        LaneEventKind::RecoveryQueued,
        LaneEventKind::RecoveryRunning,
        LaneEventKind::RecoverySucceeded,
        LaneEventKind::RecoveryFailed,
        LaneEventKind::RecoveryExhausted,
        LaneEventKind::Finished,
        LaneEventKind::Stopped,
        LaneEventKind::Failed,
        LaneEventKind::Outcome,
        LaneEventKind::ClosedOut,
        LaneEventKind::Rerun,
        LaneEventKind::PublicationRestored,
        LaneEventKind::Landed,
        LaneEventKind::LandFailed,
        LaneEventKind::PrOpened,
        LaneEventKind::BudgetSet,
    ];

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            LaneEventKind::Started => "lane.started",
            LaneEventKind::Adopted => "lane.adopted",
            LaneEventKind::SessionReplaced => "lane.session_replaced",
            LaneEventKind::TrustStoreSeeded => "lane.trust_store_seeded",
            LaneEventKind::TrustStoreConfined => "lane.trust_store_confined",
            LaneEventKind::Spawning => "lane.spawning",
            LaneEventKind::TrustRequired => "lane.trust_required",
            LaneEventKind::TrustResolved => "lane.trust_resolved",
            LaneEventKind::DialogAnswered => "lane.dialog_answered",
            LaneEventKind::DialogIgnored => "lane.dialog_ignored",
            LaneEventKind::ToolPermissionRequired => "lane.tool_permission_required",
            LaneEventKind::PermissionDecided => "lane.permission.decided",
            LaneEventKind::Ready => "lane.ready",
            LaneEventKind::DeliveryHeld => "lane.delivery_held",
            LaneEventKind::DeliveryResumed => "lane.delivery_resumed",
            LaneEventKind::PromptTyped => "lane.prompt_typed",
            LaneEventKind::PromptSent => "lane.prompt_sent",
            LaneEventKind::PromptMisdelivery => "lane.prompt_misdelivery",
            LaneEventKind::PromptAccepted => "lane.prompt_accepted",
            LaneEventKind::PromptRound => "lane.prompt_round",
            LaneEventKind::InputCleared => "lane.input_cleared",
            LaneEventKind::SendQueued => "lane.send_queued",
            LaneEventKind::SendRefused => "lane.send_refused",
            LaneEventKind::SendFailed => "lane.send_failed",
            LaneEventKind::Running => "lane.running",
            LaneEventKind::Stalled => "lane.stalled",
            LaneEventKind::Hook => "lane.hook",
            LaneEventKind::ChannelDegraded => "lane.channel.degraded",
            LaneEventKind::Protocol => "lane.protocol",
            LaneEventKind::ChannelOpened => "lane.channel.opened",
            LaneEventKind::ChannelContradiction => "lane.channel.contradiction",
            LaneEventKind::Usage => "lane.usage",
            LaneEventKind::Blocked => "lane.blocked",
            LaneEventKind::Escalated => "lane.escalated",
            LaneEventKind::OperatorIgnored => "lane.operator_ignored",
            LaneEventKind::OperatorRefused => "lane.operator_refused",
            LaneEventKind::CallerRefused => "lane.caller_refused",
            LaneEventKind::DialogAnsweredOutside => "lane.dialog_answered_outside",
            LaneEventKind::RestartRequested => "lane.restart_requested",
            LaneEventKind::Restarted => "lane.restarted",
            LaneEventKind::CommitCreated => "lane.commit.created",
            LaneEventKind::CommitsSkipped => "lane.commits.skipped",
            LaneEventKind::BranchBlocked => "lane.branch_blocked",
            LaneEventKind::StaleRed => "lane.stale_red",
            LaneEventKind::BranchStaleAgainstMain => "branch.stale_against_main",
            LaneEventKind::BranchMergedForward => "branch.merged_forward",
            LaneEventKind::BranchMergeConflict => "branch.merge_conflict",
            LaneEventKind::BranchMergeRefused => "branch.merge_refused",
            LaneEventKind::BranchMergeFailed => "branch.merge_failed",
            LaneEventKind::TestHung => "test.hung",
            LaneEventKind::Green => "lane.green",
            LaneEventKind::Red => "lane.red",
            LaneEventKind::VerifyBlocked => "lane.verify_blocked",
            LaneEventKind::Verified => "lane.verified",
            LaneEventKind::MergeReady => "lane.merge.ready",
            LaneEventKind::RecoveryQueued => "lane.recovery.queued",
            LaneEventKind::RecoveryRunning => "lane.recovery.running",
            LaneEventKind::RecoverySucceeded => "lane.recovery.succeeded",
            LaneEventKind::RecoveryFailed => "lane.recovery.failed",
            LaneEventKind::RecoveryExhausted => "lane.recovery.exhausted",
            LaneEventKind::Finished => "lane.finished",
            LaneEventKind::Stopped => "lane.stopped",
            LaneEventKind::Failed => "lane.failed",
            LaneEventKind::Outcome => "lane.outcome",
            LaneEventKind::ClosedOut => "lane.closed_out",
            LaneEventKind::Rerun => "lane.rerun",
            LaneEventKind::PublicationRestored => "lane.publication_restored",
            LaneEventKind::Landed => "lane.landed",
            LaneEventKind::LandFailed => "lane.land_failed",
            LaneEventKind::PrOpened => "lane.pr.opened",
            LaneEventKind::BudgetSet => "lane.budget_set",
            LaneEventKind::Other(name) => name,
        }
    }

    /// The kind named `name`; [`LaneEventKind::Other`] when this build does not know it.
    pub fn parse(name: &str) -> LaneEventKind {
        LaneEventKind::ALL
            .iter()
            .find(|kind| kind.as_str() == name)
            .cloned()
            .unwrap_or_else(|| LaneEventKind::Other(name.to_owned()))
    }
}

impl From<&str> for LaneEventKind {
    fn from(name: &str) -> Self {
        LaneEventKind::parse(name)
    }
}

impl fmt::Display for LaneEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for LaneEventKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for LaneEventKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(LaneEventKind::parse(&String::deserialize(deserializer)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_wire_name() {
        for kind in LaneEventKind::ALL {
            let json = serde_json::to_string(&kind).expect("serialise");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(
                serde_json::from_str::<LaneEventKind>(&json).expect("parse"),
                kind
            );
        }
    }

    #[test]
    fn an_unknown_kind_is_kept_as_written() {
        let kind: LaneEventKind = serde_json::from_str("\"lane.from_the_future\"").expect("parse");
        assert_eq!(kind, LaneEventKind::Other("lane.from_the_future".into()));
        assert_eq!(
            serde_json::to_string(&kind).expect("serialise"),
            "\"lane.from_the_future\""
        );
    }

    #[test]
    fn every_kind_is_documented_in_events_md() {
        let doc = include_str!("../../docs/events.md");
        let missing: Vec<&str> = LaneEventKind::ALL
            .iter()
            .map(LaneEventKind::as_str)
            .filter(|name| !doc.contains(&format!("`{name}`")))
            .collect();
        assert!(missing.is_empty(), "not in docs/events.md: {missing:?}");
    }
}
