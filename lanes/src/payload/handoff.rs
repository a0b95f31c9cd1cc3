//! The payloads of a lane's hand-off: landing on its base (`lane.landed`, `lane.land_failed`)
//! and its pull request (`lane.pr.opened`).

use serde::{Deserialize, Serialize};

/// `lane.landed`: the lane's work, verified on top of the base as it stood, moved the base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landed {
    /// The base branch's full ref.
    pub base_ref: String,
    /// Where the base was.
    pub old_base: String,
    /// Where it is now.
    pub new_base: String,
    /// The lane's verified HEAD.
    pub head: String,
    /// `fast_forward`, `merge_commit`, or `batch` (in one candidate commit with other lanes).
    pub method: String,
    /// How many times the lane was merged forward and verified (more than one when the base
    /// moved meanwhile).
    pub attempts: u32,
}

/// Why `clawpool land` left a lane out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandFailure {
    /// Merging the base into it conflicts (the merge was aborted).
    Conflict,
    /// Its verification failed.
    Red,
    /// A verification command hung past its timeout.
    Hung,
    /// It could not be brought up to the base or verified: dirty worktree, detached HEAD, a
    /// git operation in progress, no verification commands, the lane still driven.
    Refused,
    /// The base kept moving while it was verified.
    BaseKeptMoving,
}

/// `lane.land_failed`: the lane was left out of a land run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandFailed {
    /// What kind of failure.
    pub failure: LandFailure,
    /// In one line.
    pub reason: String,
    /// The base commit it was tried against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_sha: Option<String>,
    /// The lane's HEAD when it was left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The verification logs, the evidence of a red or a hang.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
    /// What a person or an orchestrator does next.
    pub next_action: String,
}

/// `lane.pr.opened`: the lane's branch has an open pull request on the forge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrOpened {
    /// Its number on the forge.
    pub number: u64,
    /// Its page.
    pub url: String,
    /// The lane's branch, its head.
    pub branch: String,
    /// The branch it asks to merge into.
    pub base: String,
    /// The forge's repository, `owner/name`.
    pub repository: String,
    /// The lane's HEAD pushed with it.
    pub head: String,
    /// Whether it was already open (a second `clawpool pr` finds it instead of opening
    /// another).
    #[serde(default)]
    pub existing: bool,
}
