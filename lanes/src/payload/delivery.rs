//! The payloads of delivering text to the agent: the prompt typed, sent, accepted or
//! misdelivered, queued texts, the input line cleared, delivery held.

use serde::{Deserialize, Serialize};

use crate::verification::GitOperation;

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

/// `lane.prompt_typed`: text was typed into the input line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTyped {
    /// How many characters.
    pub chars: usize,
    /// `typed` or `task_file`.
    pub method: String,
}

/// `lane.prompt_misdelivery`: the prompt went, or would have gone, somewhere else than the
/// agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptMisdelivery {
    /// `shell` or `wrong_target`.
    pub target: String,
    /// Whether Enter had been pressed on it (a shell on screen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_sent: Option<bool>,
    /// Why, when the agent process is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `lane.prompt_round`: the next queued text starts its delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptRound {
    /// `typed` or `task_file`.
    pub method: String,
    /// How many characters.
    pub chars: usize,
}

/// `lane.input_cleared`: the profile's `clear_keys` emptied the input line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputCleared {
    /// What the line held.
    pub draft: String,
    /// The keys pressed.
    pub keys: Vec<String>,
}

/// `lane.send_queued`: a text waits for its turn (`clawpool send`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendQueued {
    /// Texts waiting.
    pub queued: usize,
}

/// `lane.send_refused`: text that cannot go into an empty input line; nothing was typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendRefused {
    /// The refused queued text's length (absent for the round already being delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chars: Option<usize>,
    /// What the line held.
    pub draft: String,
    /// Why, in words.
    pub reason: String,
}

/// `lane.send_failed`, `branch.merge_failed`: something clawpool needed failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReport {
    /// Why, in the failing side's words.
    pub error: String,
}

/// `lane.delivery_held`: a git operation is paused in the lane's worktree, so nothing is typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryHeld {
    /// The operation.
    pub operation: GitOperation,
}
