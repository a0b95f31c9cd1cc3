//! Branch freshness and verification of a lane: "branch freshness before blame".
//!
//! [`check_branch`] reads where a lane's worktree stands (HEAD, a paused git operation, and
//! freshness against its base). [`verify`] runs a green level: for broad levels (`package`
//! and up) it first checks freshness and applies the lane's merge policy — merge-forward
//! before broad tests — then runs every command of the level (each with a timeout; all of
//! them run), and concludes green, red, stale red (a red on a branch that still lacks base
//! commits is not a regression), hung, or blocked. Everything it finds is recorded as lane
//! events; the last one, `lane.verified`, carries the whole [`Verification`] for the state
//! file.

pub mod commands;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_lanes::state_file::{
    CommandOutcome, CommandResult, Freshness, GitOperation, GreenLevel, HeadState, MergeOutcome,
    Verification, VerifyResult, now_secs,
};
use clawpool_lanes::{BlockedSubphase, EventLog, FailureClass, LaneSpec, LaneState, LaneStatus};
use clawpool_worktree::{
    FetchOptions, FreshnessOptions, FreshnessState, MergePolicy, Repo, check_freshness,
    git_operation, head_state, merge_forward,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Where a lane's branch stands.
#[derive(Debug, Clone)]
pub struct BranchCheck {
    /// What is checked out, when it could be read.
    pub head: Option<HeadState>,
    /// A git operation in progress in the worktree.
    pub operation: Option<GitOperation>,
    /// Freshness against the base (`unknown` with the reason while an operation is paused).
    pub freshness: Freshness,
}

/// How often the base's remote may be fetched (per repository), from configuration.
#[derive(Debug, Clone, Copy)]
pub struct FreshnessSettings {
    /// How often a running lane's freshness is checked.
    pub check_interval: Duration,
    /// The least time between two fetches of the base's remote.
    pub fetch_interval: Duration,
}

impl From<&crate::handshake::Settings> for FreshnessSettings {
    fn from(settings: &crate::handshake::Settings) -> Self {
        Self {
            check_interval: settings.freshness_check,
            fetch_interval: settings.fetch_interval,
        }
    }
}

impl Default for FreshnessSettings {
    /// A check every 60 s; a fetch at most every 5 min.
    fn default() -> Self {
        Self {
            check_interval: Duration::from_secs(60),
            fetch_interval: Duration::from_secs(300),
        }
    }
}

/// Reads where the lane worktree `dir` stands against `base` (blocking: git).
pub fn check_branch(dir: &Path, base: &str, settings: &FreshnessSettings) -> BranchCheck {
    let options = FreshnessOptions {
        fetch: Some(FetchOptions {
            min_interval: settings.fetch_interval,
            ..FetchOptions::default()
        }),
        ..FreshnessOptions::default()
    };
    BranchCheck {
        head: head_state(dir).ok(),
        operation: git_operation(dir).ok().flatten(),
        freshness: check_freshness(dir, base, &options),
    }
}

/// Records a branch check on the lane: its state-file fields, and `branch.stale_against_main`
/// when the lane has just become stale (`was` is the previous verdict).
pub fn record_branch(events: &EventLog, check: &BranchCheck, was: Option<FreshnessState>) {
    let freshness = &check.freshness;
    if freshness.state == FreshnessState::Stale && was != Some(FreshnessState::Stale) {
        let _ = events.record(
            "branch.stale_against_main",
            None,
            None,
            None,
            json!({
                "base_ref": freshness.base_ref, "base_sha": freshness.base_sha,
                "behind": freshness.behind, "ahead": freshness.ahead,
                "missing": freshness.missing,
            }),
        );
    }
}

/// A lane's verification settings, from its packet; kept in the lane's registry entry
/// (`lane.json`, key `verify`) so later commands and supervisors find them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneVerifySpec {
    /// How the base is brought in before broad levels.
    #[serde(default)]
    pub merge_policy: MergePolicy,
    /// The commands of each level (the packet's `verify_commands`, else its
    /// `acceptance_tests`).
    #[serde(default)]
    pub commands: BTreeMap<GreenLevel, Vec<String>>,
    /// How long each command may run, in seconds.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// The level verified at once when the lane finishes.
    #[serde(default)]
    pub on_finish: Option<GreenLevel>,
}

/// A verification command's timeout when the packet sets none.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;

fn default_timeout_secs() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

impl Default for LaneVerifySpec {
    fn default() -> Self {
        Self {
            merge_policy: MergePolicy::default(),
            commands: BTreeMap::new(),
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            on_finish: None,
        }
    }
}

impl LaneVerifySpec {
    /// The settings a packet lane asks for (its fields were checked when the packet was read).
    pub fn from_lane(lane: &LaneSpec) -> Self {
        let commands = GreenLevel::ALL
            .into_iter()
            .map(|level| {
                let own = lane.verify_commands.get(level.as_str());
                (level, own.unwrap_or(&lane.acceptance_tests).clone())
            })
            .filter(|(_, commands)| !commands.is_empty())
            .collect();
        Self {
            merge_policy: lane
                .merge_policy
                .as_deref()
                .and_then(|p| serde_json::from_value(json!(p)).ok())
                .unwrap_or_default(),
            commands,
            timeout_secs: lane.verify_timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
            on_finish: lane.verify_on_finish.as_deref().and_then(GreenLevel::parse),
        }
    }

    /// The plan for verifying `level` on a branch made from `base`, logging into `log_dir`.
    pub fn plan(
        &self,
        level: GreenLevel,
        base: &str,
        log_dir: PathBuf,
        freshness: FreshnessSettings,
    ) -> VerifyPlan {
        VerifyPlan {
            level,
            commands: self.commands.get(&level).cloned().unwrap_or_default(),
            timeout: Duration::from_secs(self.timeout_secs),
            log_dir,
            policy: self.merge_policy,
            base: base.to_owned(),
            freshness,
        }
    }
}

/// What to verify and how.
#[derive(Debug, Clone)]
pub struct VerifyPlan {
    /// The level.
    pub level: GreenLevel,
    /// Its commands, in order.
    pub commands: Vec<String>,
    /// How long each may run.
    pub timeout: Duration,
    /// Where their logs go.
    pub log_dir: PathBuf,
    /// The lane's merge policy.
    pub policy: MergePolicy,
    /// The lane's base ref.
    pub base: String,
    /// Fetch and check intervals.
    pub freshness: FreshnessSettings,
}

/// What a verification did, and what it means for the lane.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The record for the state file.
    pub verification: Verification,
    /// The green level reached, if any.
    pub green_level: Option<GreenLevel>,
    /// The lane state it leads to for a lane whose worker is no longer driven.
    pub lane_state: LaneState,
    /// The branch as checked.
    pub branch: Option<BranchCheck>,
}

/// Verifies the lane worktree `dir` of the repository at `repo_root` by `plan`, recording every step in `events`.
/// `lane_state` is applied (as the `to` of `lane.verified`) only when `transition` is set: a
/// lane whose worker is still driven keeps the state its screen shows.
pub async fn verify(
    repo_root: &Path,
    dir: &Path,
    plan: &VerifyPlan,
    events: &EventLog,
    current: LaneState,
    transition: bool,
) -> Verified {
    let started_at = now_secs();
    let mut merge = None;
    let mut branch = None;
    let mut reason = None;
    let mut blocked = false;
    if plan.level.needs_fresh_branch() {
        let (check, outcome) = bring_base_in(repo_root, dir, plan, events).await;
        if let Some(why) = freshness_problem(&check, outcome.as_ref(), plan.policy) {
            blocked = matches!(plan.policy, MergePolicy::Block)
                || matches!(outcome, Some(MergeOutcome::Dirty { .. }))
                || check.operation.is_some_and(|op| op.paused);
            reason = Some(why);
        }
        merge = outcome;
        branch = Some(check);
    }
    let mut results = Vec::new();
    if !blocked {
        for (n, command) in plan.commands.iter().enumerate() {
            let log = plan.log_dir.join(format!(
                "{}-{}-{}.log",
                started_at,
                plan.level.as_str(),
                n + 1
            ));
            let result = commands::run_command(command, dir, &log, plan.timeout).await;
            if result.outcome == CommandOutcome::Hung {
                let _ = events.record(
                    "test.hung",
                    None,
                    None,
                    None,
                    json!({"command": command, "timeout_secs": plan.timeout.as_secs(), "log": log}),
                );
            }
            results.push(result);
        }
    }
    let freshness = branch.as_ref().map(|b| b.freshness.clone());
    let stale = freshness
        .as_ref()
        .is_some_and(|f| f.state != FreshnessState::Fresh);
    let failed: Vec<&CommandResult> = results
        .iter()
        .filter(|r| matches!(r.outcome, CommandOutcome::Failed | CommandOutcome::Error))
        .collect();
    let hung = results.iter().any(|r| r.outcome == CommandOutcome::Hung);
    let (result, class) = if blocked {
        (VerifyResult::Blocked, None)
    } else if !failed.is_empty() {
        let compile = failed
            .iter()
            .any(|r| commands::looks_like_compile_failure(Path::new(&r.log)));
        let class = if compile {
            FailureClass::Compile
        } else {
            FailureClass::Test
        };
        if stale {
            (VerifyResult::StaleRed, Some(class))
        } else {
            (VerifyResult::Red, Some(class))
        }
    } else if hung {
        (VerifyResult::Hung, Some(FailureClass::TestHang))
    } else {
        (VerifyResult::Green, None)
    };
    let green_level = match result {
        VerifyResult::Green if plan.level == GreenLevel::MergeReady && stale => {
            reason.get_or_insert_with(|| "not merge-ready: the branch lacks base commits".into());
            Some(GreenLevel::Workspace)
        }
        VerifyResult::Green => Some(plan.level),
        _ => None,
    };
    let verification = Verification {
        level: plan.level,
        result,
        class,
        commands: results.clone(),
        merge,
        freshness,
        reason,
        started_at,
        finished_at: now_secs(),
    };
    record_result(events, &verification, green_level, &failed);
    let lane_state = match result {
        VerifyResult::Green if current.status == LaneStatus::Failed => {
            LaneState::plain(LaneStatus::Finished)
        }
        VerifyResult::Green => current,
        VerifyResult::Red => LaneState::failed(class.unwrap_or(FailureClass::Test)),
        VerifyResult::StaleRed | VerifyResult::Blocked => {
            LaneState::blocked(BlockedSubphase::BranchFreshness)
        }
        VerifyResult::Hung => LaneState::blocked(BlockedSubphase::TestHang),
    };
    let to = (transition && lane_state != current).then_some(lane_state);
    let _ = events.record(
        "lane.verified",
        to.map(|_| current),
        to,
        None,
        json!({"verification": verification, "green_level": green_level}),
    );
    Verified {
        verification,
        green_level,
        lane_state,
        branch,
    }
}

/// Checks freshness and, when the lane is behind, applies its policy (blocking git work off
/// the async threads).
async fn bring_base_in(
    repo_root: &Path,
    dir: &Path,
    plan: &VerifyPlan,
    events: &EventLog,
) -> (BranchCheck, Option<MergeOutcome>) {
    let (root, dir_owned, base, settings, policy) = (
        repo_root.to_owned(),
        dir.to_owned(),
        plan.base.clone(),
        plan.freshness,
        plan.policy,
    );
    let work = tokio::task::spawn_blocking(move || {
        let before = check_branch(&dir_owned, &base, &settings);
        if before.freshness.state != FreshnessState::Stale || before.operation.is_some() {
            return (before, None);
        }
        let outcome = Repo::open(&root)
            .and_then(|repo| merge_forward(&repo, &dir_owned, &base, policy))
            .map_err(|e| e.to_string());
        let after = match &outcome {
            Ok(MergeOutcome::Merged { .. }) => check_branch(&dir_owned, &base, &settings),
            _ => before.clone(),
        };
        (after, Some((before, outcome)))
    })
    .await;
    let Ok((check, attempt)) = work else {
        return (check_branch(dir, &plan.base, &plan.freshness), None);
    };
    let Some((before, outcome)) = attempt else {
        record_branch(events, &check, None);
        return (check, None);
    };
    record_branch(events, &before, None);
    match outcome {
        Ok(outcome) => {
            record_merge(events, &outcome);
            (check, Some(outcome))
        }
        Err(error) => {
            let _ = events.record(
                "branch.merge_failed",
                None,
                None,
                None,
                json!({"error": error}),
            );
            (check, None)
        }
    }
}

/// One event per merge-forward that did something or was refused.
pub fn record_merge(events: &EventLog, outcome: &MergeOutcome) {
    let kind = match outcome {
        MergeOutcome::Merged { .. } => "branch.merged_forward",
        MergeOutcome::Conflict { .. } => "branch.merge_conflict",
        MergeOutcome::UpToDate { .. } => return,
        _ => "branch.merge_refused",
    };
    let _ = events.record(
        kind,
        None,
        None,
        None,
        serde_json::to_value(outcome).unwrap_or_default(),
    );
}

/// Why the branch is not fresh enough for broad tests, if it is not.
fn freshness_problem(
    check: &BranchCheck,
    outcome: Option<&MergeOutcome>,
    policy: MergePolicy,
) -> Option<String> {
    if let Some(op) = check.operation {
        return Some(format!(
            "a git {} is in progress in the worktree",
            serde_json::to_value(op.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        ));
    }
    match outcome {
        Some(MergeOutcome::Dirty { paths }) => Some(format!(
            "the worktree has uncommitted changes ({}); nothing was merged",
            paths.join(", ")
        )),
        Some(MergeOutcome::Conflict { paths, .. }) => Some(format!(
            "merging the base conflicts in {}; the merge was aborted",
            paths.join(", ")
        )),
        Some(MergeOutcome::Detached { sha }) => Some(format!(
            "HEAD is detached at {sha}: no branch to merge into"
        )),
        Some(MergeOutcome::Diverged { .. }) => {
            Some("the branch shares no history with its base".into())
        }
        Some(MergeOutcome::NotApplied { .. }) => Some(format!(
            "{} base commits missing; the lane's merge policy is {}",
            check.freshness.behind.unwrap_or_default(),
            serde_json::to_value(policy)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        )),
        _ if check.freshness.state == FreshnessState::Unknown => Some(format!(
            "freshness unknown: {}",
            check.freshness.error.clone().unwrap_or_default()
        )),
        _ => None,
    }
}

fn record_result(
    events: &EventLog,
    verification: &Verification,
    green_level: Option<GreenLevel>,
    failed: &[&CommandResult],
) {
    let level = verification.level.as_str();
    let (kind, detail) = match verification.result {
        VerifyResult::Green => ("lane.green", json!({"level": green_level})),
        VerifyResult::Red => (
            "lane.red",
            json!({"level": level, "class": verification.class, "failed": failed}),
        ),
        VerifyResult::StaleRed => (
            "lane.stale_red",
            json!({
                "level": level, "class": verification.class, "failed": failed,
                "missing": verification.freshness.as_ref().map(|f| &f.missing),
                "behind": verification.freshness.as_ref().and_then(|f| f.behind),
                "reason": verification.reason,
            }),
        ),
        VerifyResult::Hung => ("lane.red", json!({"level": level, "class": "test_hang"})),
        VerifyResult::Blocked => (
            "lane.verify_blocked",
            json!({"level": level, "reason": verification.reason}),
        ),
    };
    let _ = events.record(kind, None, None, None, detail);
    if green_level == Some(GreenLevel::MergeReady) {
        let _ = events.record(
            "lane.merge.ready",
            None,
            None,
            None,
            json!({"head": verification.freshness.as_ref().and_then(|f| f.head.clone())}),
        );
    }
}
