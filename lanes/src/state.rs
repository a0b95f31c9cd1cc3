//! The lane lifecycle as it appears on the wire (snake_case).

use crate::LaneEventKind;
use serde::{Deserialize, Serialize};

/// Where a lane is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneStatus {
    /// The worker process is starting; nothing recognisable on screen yet.
    Spawning,
    /// The agent asks whether to trust the folder.
    TrustRequired,
    /// The agent asks permission for a tool while working.
    ToolPermissionRequired,
    /// The agent shows an empty input line and nothing else in the way: a prompt may be typed.
    ReadyForPrompt,
    /// The screen proves the agent took the prompt.
    PromptAccepted,
    /// The agent is working.
    Running,
    /// The lane waits for something outside the agent (see [`BlockedSubphase`]).
    Blocked,
    /// The agent returned to its idle input after working, or exited 0.
    Finished,
    /// A person ended the lane (`clawpool stop`) before its work was done: neither finished
    /// nor failed — nothing went wrong, and `clawpool send` may take it up again.
    Stopped,
    /// The lane ended in failure (see [`FailureClass`]).
    Failed,
}

impl LaneStatus {
    /// Finished, stopped or failed: nothing more will happen to the lane by itself.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            LaneStatus::Finished | LaneStatus::Stopped | LaneStatus::Failed
        )
    }

    /// The kind of the lane event that brings a lane into this status (`docs/events.md`).
    pub fn transition_kind(self) -> LaneEventKind {
        match self {
            LaneStatus::Spawning => LaneEventKind::Spawning,
            LaneStatus::TrustRequired => LaneEventKind::TrustRequired,
            LaneStatus::ToolPermissionRequired => LaneEventKind::ToolPermissionRequired,
            LaneStatus::ReadyForPrompt => LaneEventKind::Ready,
            LaneStatus::PromptAccepted => LaneEventKind::PromptAccepted,
            LaneStatus::Running => LaneEventKind::Running,
            LaneStatus::Blocked => LaneEventKind::Blocked,
            LaneStatus::Finished => LaneEventKind::Finished,
            LaneStatus::Stopped => LaneEventKind::Stopped,
            LaneStatus::Failed => LaneEventKind::Failed,
        }
    }
}

/// Why a lane is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedSubphase {
    /// A trust dialog the lane's policy does not allow answering.
    TrustPrompt,
    /// A tool-permission question waiting for an operator.
    ToolPermission,
    /// A known boot dialog waiting for an operator.
    BootDialog,
    /// Something on screen no profile rule recognises.
    UnknownDialog,
    /// The prompt could not be delivered (not accepted, or typed into the wrong place).
    PromptDelivery,
    /// The model provider is unreachable; the agent is retrying.
    Provider,
    /// The lane's branch needs attention before work continues.
    BranchFreshness,
    /// A test command exceeded its timeout.
    TestHang,
    /// The agent shows no meaningful progress while working (and recovery did not help).
    Stalled,
    /// The lane's cost passed its budget (`budget_usd`): its turn was interrupted and it is
    /// held until the budget is raised or the lane stopped.
    Budget,
}

impl BlockedSubphase {
    /// The failure class a lane blocked this way is heading for: every blocked lane has one.
    pub const fn failure_class(self) -> FailureClass {
        match self {
            BlockedSubphase::TrustPrompt => FailureClass::TrustGate,
            BlockedSubphase::ToolPermission => FailureClass::ToolPermission,
            BlockedSubphase::BootDialog | BlockedSubphase::UnknownDialog => {
                FailureClass::BootDialog
            }
            BlockedSubphase::PromptDelivery => FailureClass::PromptDelivery,
            BlockedSubphase::Provider => FailureClass::Provider,
            BlockedSubphase::BranchFreshness => FailureClass::BranchDivergence,
            BlockedSubphase::TestHang => FailureClass::TestHang,
            BlockedSubphase::Stalled => FailureClass::Stalled,
            BlockedSubphase::Budget => FailureClass::Budget,
        }
    }
}

/// Why a lane failed (or, for a blocked lane, what kind of failure it is heading for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The prompt never reached the agent.
    PromptDelivery,
    /// The trust gate could not be passed.
    TrustGate,
    /// A tool permission was refused or never answered.
    ToolPermission,
    /// A boot dialog could not be passed.
    BootDialog,
    /// The model provider failed.
    Provider,
    /// The branch diverged from its base.
    BranchDivergence,
    /// The build failed.
    Compile,
    /// Tests failed.
    Test,
    /// Tests hung.
    TestHang,
    /// The worker exited non-zero or died.
    WorkerCrashed,
    /// The worker is gone and its status unknown.
    WorkerLost,
    /// No progress for too long.
    Stalled,
    /// Something around the agent failed (disk, git, terminal).
    Infra,
    /// The lane's cost passed its budget.
    Budget,
}

/// A lane's state: its status with the data that belongs to that status and to no other.
///
/// On the wire it is `{"status": …}`, with `subphase` exactly when blocked and `failure`
/// exactly when failed (`docs/events.md`); a document that pairs them otherwise is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "WireState", try_from = "WireState")]
pub enum LaneState {
    /// See [`LaneStatus::Spawning`].
    Spawning,
    /// See [`LaneStatus::TrustRequired`].
    TrustRequired,
    /// See [`LaneStatus::ToolPermissionRequired`].
    ToolPermissionRequired,
    /// See [`LaneStatus::ReadyForPrompt`].
    ReadyForPrompt,
    /// See [`LaneStatus::PromptAccepted`].
    PromptAccepted,
    /// See [`LaneStatus::Running`].
    Running,
    /// Waiting for something outside the agent, and what.
    Blocked(BlockedSubphase),
    /// See [`LaneStatus::Finished`].
    Finished,
    /// See [`LaneStatus::Stopped`].
    Stopped,
    /// Ended in failure, and of which kind.
    Failed(FailureClass),
}

impl LaneState {
    /// The status, without its data.
    pub const fn status(self) -> LaneStatus {
        match self {
            LaneState::Spawning => LaneStatus::Spawning,
            LaneState::TrustRequired => LaneStatus::TrustRequired,
            LaneState::ToolPermissionRequired => LaneStatus::ToolPermissionRequired,
            LaneState::ReadyForPrompt => LaneStatus::ReadyForPrompt,
            LaneState::PromptAccepted => LaneStatus::PromptAccepted,
            LaneState::Running => LaneStatus::Running,
            LaneState::Blocked(_) => LaneStatus::Blocked,
            LaneState::Finished => LaneStatus::Finished,
            LaneState::Stopped => LaneStatus::Stopped,
            LaneState::Failed(_) => LaneStatus::Failed,
        }
    }

    /// Why the lane is blocked, when it is.
    pub const fn subphase(self) -> Option<BlockedSubphase> {
        match self {
            LaneState::Blocked(subphase) => Some(subphase),
            _ => None,
        }
    }

    /// Why the lane failed, when it did.
    pub const fn failure(self) -> Option<FailureClass> {
        match self {
            LaneState::Failed(class) => Some(class),
            _ => None,
        }
    }

    /// Finished, stopped or failed: nothing more will happen to the lane by itself.
    pub const fn is_terminal(self) -> bool {
        self.status().is_terminal()
    }

    /// In a turn: the agent took a prompt and has not come back to its input (accepted,
    /// running, asking for a tool's permission, or blocked while at it).
    pub const fn in_turn(self) -> bool {
        matches!(
            self,
            LaneState::PromptAccepted
                | LaneState::Running
                | LaneState::ToolPermissionRequired
                | LaneState::Blocked(_)
        )
    }

    /// The state a lane ends in when the supervisor is interrupted before the lane finished:
    /// a blocked lane fails for what blocked it (a stall, the provider…), any other for the
    /// infrastructure. (A person's `clawpool stop` is [`LaneState::Stopped`] instead.)
    pub const fn interrupted_unfinished(self) -> Self {
        match self {
            LaneState::Blocked(subphase) => LaneState::Failed(subphase.failure_class()),
            _ => LaneState::Failed(FailureClass::Infra),
        }
    }

    /// The state of a status that carries no data; `None` for blocked and failed, which do.
    pub const fn of_plain(status: LaneStatus) -> Option<Self> {
        Some(match status {
            LaneStatus::Spawning => LaneState::Spawning,
            LaneStatus::TrustRequired => LaneState::TrustRequired,
            LaneStatus::ToolPermissionRequired => LaneState::ToolPermissionRequired,
            LaneStatus::ReadyForPrompt => LaneState::ReadyForPrompt,
            LaneStatus::PromptAccepted => LaneState::PromptAccepted,
            LaneStatus::Running => LaneState::Running,
            LaneStatus::Finished => LaneState::Finished,
            LaneStatus::Stopped => LaneState::Stopped,
            LaneStatus::Blocked | LaneStatus::Failed => return None,
        })
    }
}

/// [`LaneState`] as it is written: a status and the optional fields beside it.
#[derive(Serialize, Deserialize)]
struct WireState {
    status: LaneStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subphase: Option<BlockedSubphase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure: Option<FailureClass>,
}

impl From<LaneState> for WireState {
    fn from(state: LaneState) -> Self {
        WireState {
            status: state.status(),
            subphase: state.subphase(),
            failure: state.failure(),
        }
    }
}

impl TryFrom<WireState> for LaneState {
    type Error = String;

    fn try_from(wire: WireState) -> Result<Self, String> {
        let status = wire_name(&wire.status);
        match (wire.status, wire.subphase, wire.failure) {
            (LaneStatus::Blocked, Some(subphase), None) => Ok(LaneState::Blocked(subphase)),
            (LaneStatus::Failed, None, Some(class)) => Ok(LaneState::Failed(class)),
            (LaneStatus::Blocked, None, _) => Err("a blocked state needs its subphase".into()),
            (LaneStatus::Failed, _, None) => Err("a failed state needs its failure".into()),
            (LaneStatus::Blocked, _, Some(_)) => Err("a blocked state has no failure".into()),
            (LaneStatus::Failed, Some(_), _) => Err("a failed state has no subphase".into()),
            (_, Some(_), _) => Err(format!("a {status} state has no subphase")),
            (_, _, Some(_)) => Err(format!("a {status} state has no failure")),
            (plain, None, None) => {
                Ok(LaneState::of_plain(plain).expect("neither blocked nor failed"))
            }
        }
    }
}

impl std::fmt::Display for LaneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", wire_name(&self.status()))?;
        match self {
            LaneState::Blocked(subphase) => write!(f, "{{{}}}", wire_name(subphase)),
            LaneState::Failed(class) => write!(f, "{{{}}}", wire_name(class)),
            _ => Ok(()),
        }
    }
}

/// The name a unit variant has on the wire (its serialised string; empty for anything else).
pub fn wire_name(value: &impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_as_on_the_wire() {
        assert_eq!(LaneState::ReadyForPrompt.to_string(), "ready_for_prompt");
        assert_eq!(
            LaneState::Blocked(BlockedSubphase::TrustPrompt).to_string(),
            "blocked{trust_prompt}"
        );
        assert_eq!(
            LaneState::Failed(FailureClass::WorkerCrashed).to_string(),
            "failed{worker_crashed}"
        );
        let json = serde_json::to_value(LaneState::Blocked(BlockedSubphase::Provider))
            .expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({"status": "blocked", "subphase": "provider"})
        );
        let read: LaneState = serde_json::from_value(json).expect("reads back");
        assert_eq!(read, LaneState::Blocked(BlockedSubphase::Provider));
    }

    #[test]
    fn a_state_whose_data_does_not_fit_its_status_is_refused() {
        for (wire, why) in [
            (
                serde_json::json!({"status": "blocked"}),
                "a blocked state needs its subphase",
            ),
            (
                serde_json::json!({"status": "failed", "subphase": "provider"}),
                "a failed state needs its failure",
            ),
            (
                serde_json::json!({"status": "running", "subphase": "provider"}),
                "a running state has no subphase",
            ),
            (
                serde_json::json!({"status": "finished", "failure": "test"}),
                "a finished state has no failure",
            ),
            (
                serde_json::json!({"status": "blocked", "subphase": "provider", "failure": "provider"}),
                "a blocked state has no failure",
            ),
        ] {
            let error = serde_json::from_value::<LaneState>(wire.clone()).expect_err(why);
            assert!(error.to_string().contains(why), "{wire}: {error}");
        }
    }
}
