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
    /// The lane ended in failure (see [`FailureClass`]).
    Failed,
}

impl LaneStatus {
    /// Finished or failed: nothing more will happen to the lane by itself.
    pub fn is_terminal(self) -> bool {
        matches!(self, LaneStatus::Finished | LaneStatus::Failed)
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
}

impl BlockedSubphase {
    /// The failure class a lane blocked this way is heading for: every blocked lane has one.
    pub fn failure_class(self) -> FailureClass {
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
}

/// A lane status with the detail that belongs to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneState {
    /// The status.
    pub status: LaneStatus,
    /// Set exactly when `status` is `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subphase: Option<BlockedSubphase>,
    /// Set exactly when `status` is `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
}

impl LaneState {
    /// A state without subphase or failure class.
    pub const fn plain(status: LaneStatus) -> Self {
        Self {
            status,
            subphase: None,
            failure: None,
        }
    }

    /// `blocked{subphase}`.
    pub const fn blocked(subphase: BlockedSubphase) -> Self {
        Self {
            status: LaneStatus::Blocked,
            subphase: Some(subphase),
            failure: None,
        }
    }

    /// `failed{class}`.
    pub const fn failed(class: FailureClass) -> Self {
        Self {
            status: LaneStatus::Failed,
            subphase: None,
            failure: Some(class),
        }
    }
}

impl std::fmt::Display for LaneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", wire_name(&self.status))?;
        if let Some(subphase) = &self.subphase {
            write!(f, "{{{}}}", wire_name(subphase))?;
        }
        if let Some(class) = &self.failure {
            write!(f, "{{{}}}", wire_name(class))?;
        }
        Ok(())
    }
}

/// The snake_case name a unit variant has on the wire.
pub(crate) fn wire_name(value: &impl Serialize) -> String {
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
        assert_eq!(
            LaneState::plain(LaneStatus::ReadyForPrompt).to_string(),
            "ready_for_prompt"
        );
        assert_eq!(
            LaneState::blocked(BlockedSubphase::TrustPrompt).to_string(),
            "blocked{trust_prompt}"
        );
        assert_eq!(
            LaneState::failed(FailureClass::WorkerCrashed).to_string(),
            "failed{worker_crashed}"
        );
        let json = serde_json::to_value(LaneState::blocked(BlockedSubphase::Provider))
            .expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({"status": "blocked", "subphase": "provider"})
        );
    }
}
