//! A lane's branch and its verification, as the state file and `lane.verified` events carry
//! them: freshness against the base, the HEAD, a paused git operation, and the last
//! verification with its green level.

use serde::{Deserialize, Serialize};

pub use clawpool_worktree::{Freshness, FreshnessState, GitOperation, HeadState, MergeOutcome};

use crate::FailureClass;

/// How far a lane's work has been verified, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GreenLevel {
    /// The commands that cover the change itself.
    Targeted,
    /// The package the change is in.
    Package,
    /// The whole workspace.
    Workspace,
    /// Everything, on a branch that has all of its base: ready to merge.
    MergeReady,
}

impl GreenLevel {
    /// Every level, lowest first.
    pub const ALL: [GreenLevel; 4] = [
        GreenLevel::Targeted,
        GreenLevel::Package,
        GreenLevel::Workspace,
        GreenLevel::MergeReady,
    ];

    /// Its name on the wire (`merge_ready`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            GreenLevel::Targeted => "targeted",
            GreenLevel::Package => "package",
            GreenLevel::Workspace => "workspace",
            GreenLevel::MergeReady => "merge_ready",
        }
    }

    /// The level named `name`.
    pub fn parse(name: &str) -> Option<GreenLevel> {
        GreenLevel::ALL.into_iter().find(|l| l.as_str() == name)
    }

    /// Broad levels (`package` and up) bring the base in first: merge-forward before broad
    /// tests.
    pub fn needs_fresh_branch(self) -> bool {
        self >= GreenLevel::Package
    }
}

impl std::fmt::Display for GreenLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a verification concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyResult {
    /// Every command passed.
    Green,
    /// A command failed on a branch that has all of its base: a real failure.
    Red,
    /// A command failed on a branch that lacks base commits merge-forward could not bring
    /// in: not reported as a regression.
    StaleRed,
    /// A command ran past its timeout (and no command failed).
    Hung,
    /// Nothing ran: the branch could not be made fresh and the lane's policy holds it.
    Blocked,
}

/// How one verification command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandOutcome {
    /// Exit status 0.
    Passed,
    /// A non-zero exit.
    Failed,
    /// Still running at its timeout: killed (`test.hung`).
    Hung,
    /// Could not be started.
    Error,
}

/// One verification command's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandResult {
    /// The command line (run with `sh -c` in the worktree).
    pub command: String,
    /// How it ended.
    pub outcome: CommandOutcome,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// How long it ran (ms).
    pub duration_ms: u64,
    /// The file with its stdout and stderr.
    pub log: String,
}

/// The lane's last verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// The level asked for.
    pub level: GreenLevel,
    /// What it concluded.
    pub result: VerifyResult,
    /// The failure class of a red (`compile` or `test`) or a hang (`test_hang`).
    pub class: Option<FailureClass>,
    /// Every command, in order (all of them run, whatever the ones before did).
    pub commands: Vec<CommandResult>,
    /// What merge-forward did first (broad levels only).
    pub merge: Option<MergeOutcome>,
    /// The branch's freshness the commands ran on.
    pub freshness: Option<Freshness>,
    /// Why it is blocked or stale, in one line.
    pub reason: Option<String>,
    /// The HEAD commit the commands ran on (after any merge-forward); `null` when it could
    /// not be read, and in files written before clawpool recorded it.
    #[serde(default)]
    pub head: Option<String>,
    /// When it started and finished (epoch s).
    pub started_at: u64,
    /// When it finished (epoch s).
    pub finished_at: u64,
}
