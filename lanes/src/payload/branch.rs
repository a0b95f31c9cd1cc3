//! The payloads of the lane's branch and its verification: commits seen, freshness,
//! merge-forward, test runs and their verdicts.

use clawpool_worktree::MissingCommit;
use serde::{Deserialize, Serialize};

use crate::FailureClass;
use crate::verification::{CommandResult, FreshnessState, GreenLevel, MergeOutcome, Verification};

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

/// `branch.stale_against_main`: the lane just became stale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchStale {
    /// The ref compared.
    pub base_ref: String,
    /// The commit it pointed to.
    pub base_sha: Option<String>,
    /// Base commits the lane lacks.
    pub behind: Option<u32>,
    /// Commits of the lane's not on the base.
    pub ahead: Option<u32>,
    /// The newest missing ones, newest first.
    pub missing: Vec<MissingCommit>,
}

/// What a `clawpool merge-forward` that did not bring the base in came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MergeAttempt {
    /// Git ran and said no (`dirty`, `conflict`, …).
    Outcome(MergeOutcome),
    /// Git failed.
    Failed(GitFailed),
}

/// A merge-forward on which git failed: `{"outcome": "failed", "error": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum GitFailed {
    /// The only case.
    Failed {
        /// Git's words.
        error: String,
    },
}

/// `lane.branch_blocked`: a `clawpool merge-forward` did not bring the base in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchBlocked {
    /// The outcome's fields.
    #[serde(flatten)]
    pub merge: MergeAttempt,
    /// The reason, in one line (the state file's failure detail).
    pub message: String,
}

/// `test.hung`: a verification command ran past its timeout and was killed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestHung {
    /// The command.
    pub command: String,
    /// Its timeout.
    pub timeout_secs: u64,
    /// Its output's log file.
    pub log: String,
}

/// `lane.green`: a verification passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Green {
    /// What this run reached.
    pub level: Option<GreenLevel>,
    /// What was asked.
    pub asked: GreenLevel,
    /// The branch's state; null for `targeted`.
    pub freshness: Option<FreshnessState>,
    /// Green on a stale branch under the `warn` policy.
    pub stale: bool,
    /// Base commits the branch lacks.
    pub behind: Option<u32>,
    /// The newest of them.
    pub missing: Option<Vec<MissingCommit>>,
    /// Why it is not a plain green; null on a fresh branch.
    pub reason: Option<String>,
}

/// `lane.red`: a regression (or a hang).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Red {
    /// The level asked.
    pub level: GreenLevel,
    /// `compile`, `test` or `test_hang`.
    pub class: Option<FailureClass>,
    /// The commands that failed.
    pub failed: Vec<CommandResult>,
    /// The commands that hung.
    pub hung: Vec<CommandResult>,
    /// The branch's state (null for `targeted`); absent for a run that only hung.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub freshness: Option<Option<FreshnessState>>,
    /// Why, in one line.
    pub reason: Option<String>,
}

/// `lane.stale_red`: a red on a branch lacking base commits, run only because the policy is
/// `warn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleRed {
    /// The level asked.
    pub level: GreenLevel,
    /// `compile`, `test` or `test_hang`.
    pub class: Option<FailureClass>,
    /// The commands that failed.
    pub failed: Vec<CommandResult>,
    /// The commands that hung.
    pub hung: Vec<CommandResult>,
    /// The newest base commits the branch lacks.
    pub missing: Option<Vec<MissingCommit>>,
    /// How many.
    pub behind: Option<u32>,
    /// Why, in one line.
    pub reason: Option<String>,
}

/// `lane.verify_blocked`: nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyBlocked {
    /// The level asked.
    pub level: GreenLevel,
    /// Why.
    pub reason: Option<String>,
    /// What merge-forward did first.
    pub merge: Option<MergeOutcome>,
    /// Base commits the branch lacks.
    pub behind: Option<u32>,
    /// The newest of them.
    pub missing: Option<Vec<MissingCommit>>,
}

/// `lane.merge.ready`: green at `merge_ready` on a fresh branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeReady {
    /// The HEAD that is ready.
    pub head: Option<String>,
}

/// A key that is absent (`None`) or present, null or not (`Some`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}
