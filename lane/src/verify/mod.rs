//! Branch freshness and verification of a lane: "branch freshness before blame".
//!
//! [`check_branch`] reads where a lane's worktree stands (HEAD, a paused git operation, and
//! freshness against its base). [`verify`] runs a green level: for broad levels (`package`
//! and up) it first checks freshness and applies the lane's merge policy — merge-forward
//! before broad tests. A branch that still lacks base commits after that runs nothing
//! (`blocked`) unless the policy is `warn`, so no broad green is ever reported on a branch
//! missing fixes its base has; otherwise every command of the level runs (each with a
//! timeout) and the result is green, red, stale red (a red under `warn` on a branch that
//! lacks base commits: not a regression) or hung. Everything it finds is recorded as lane
//! events; the last one, `lane.verified`, carries the whole [`Verification`] for the state
//! file. The rules are in `docs/worktrees.md`, "Verification".

pub mod commands;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_agents::config::HandshakeSettings;
use clawpool_lanes::state_file::{
    CommandOutcome, CommandResult, Freshness, GreenLevel, MergeOutcome, Verification, VerifyResult,
    now_secs,
};
use clawpool_lanes::{EventLog, FailureClass, LaneSpec, LaneState};
use clawpool_lanes::{Payload, payload};
use clawpool_worktree::{
    FetchOptions, FreshnessOptions, FreshnessState, MergePolicy, Repo, check_branch_state,
    head_state, merge_forward,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::finishing;

/// Where a lane's branch stands: the worktree crate's one look at it (what is checked out, a
/// git operation in progress, freshness against the base — `unknown` with the reason while an
/// operation is paused).
pub type BranchCheck = clawpool_worktree::BranchState;

/// How often the base's remote may be fetched (per repository), from configuration.
#[derive(Debug, Clone, Copy)]
pub struct FreshnessSettings {
    /// How often a running lane's freshness is checked.
    pub check_interval: Duration,
    /// The least time between two fetches of the base's remote.
    pub fetch_interval: Duration,
}

/// The freshness part of the handshake's settings (`[handshake]` in configuration).
impl From<&HandshakeSettings> for FreshnessSettings {
    fn from(settings: &HandshakeSettings) -> Self {
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

/// Reads where the lane worktree `dir` stands against `base` (blocking: git); `known_bases`
/// are commits the base pointed to before (see [`clawpool_worktree::check_branch_state`]).
pub fn check_branch(
    dir: &Path,
    base: &str,
    known_bases: &[String],
    settings: &FreshnessSettings,
) -> BranchCheck {
    let options = FreshnessOptions {
        fetch: Some(FetchOptions {
            min_interval: settings.fetch_interval,
            ..FetchOptions::default()
        }),
        ..FreshnessOptions::default()
    };
    let known: Vec<&str> = known_bases.iter().map(String::as_str).collect();
    check_branch_state(dir, base, &known, &options)
}

/// Records a branch check on the lane: its state-file fields, and `branch.stale_against_main`
/// when the lane has just become stale (`was` is the previous verdict).
pub fn record_branch(events: &EventLog, check: &BranchCheck, was: Option<FreshnessState>) {
    let freshness = &check.freshness;
    if freshness.state == FreshnessState::Stale && was != Some(FreshnessState::Stale) {
        let stale = payload::BranchStale {
            base_ref: freshness.base_ref.clone(),
            base_sha: freshness.base_sha.clone(),
            behind: freshness.behind,
            ahead: freshness.ahead,
            missing: freshness.missing.clone(),
        };
        let _ = events.report(Payload::BranchStale(stale), None, None, None);
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
            known_bases: Vec::new(),
            freshness,
            last_freshness: None,
            held: None,
            sandbox: None,
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
    /// Commits the base pointed to before (at the lane's creation, at its last check).
    pub known_bases: Vec<String>,
    /// Fetch and check intervals.
    pub freshness: FreshnessSettings,
    /// The lane's freshness verdict before this verification (its state file's), so that
    /// `branch.stale_against_main` is emitted when the lane becomes stale, not on every
    /// verification of a lane already known to be stale.
    pub last_freshness: Option<FreshnessState>,
    /// The green level the lane holds and the HEAD it was reached on (its state file's): a
    /// green at a lower level on the same HEAD keeps it.
    pub held: Option<(GreenLevel, String)>,
    /// The lane's sandbox (`docs/sandbox.md`): its commands run in it, as its agent does.
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
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

/// Verifies the lane worktree `dir` of the repository at `repo_root` by `plan`, recording every
/// step in `events`. `lane_state` is applied (as the `to` of `lane.verified`) only when
/// `transition` is set: a lane whose worker is still driven keeps the state its screen shows.
///
/// For broad levels the branch is checked and the lane's merge policy applied first; what
/// that leaves decides what runs ([`BranchVerdict`]): a branch that still lacks base commits
/// runs nothing (`blocked`) unless the policy is `warn`, so no broad green is ever reported on
/// a branch missing fixes its base already has.
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
    let mut verdict = BranchVerdict::Fresh;
    if plan.level.needs_fresh_branch() {
        let base_in = bring_base_in(repo_root, dir, plan, events).await;
        verdict = branch_verdict(&base_in, plan.policy);
        merge = base_in.merge;
        branch = Some(base_in.check);
    }
    let head = head_state(dir).ok().map(|h| h.sha().to_owned());
    let mut results = Vec::new();
    if !matches!(verdict, BranchVerdict::Blocked(_)) {
        for (n, command) in plan.commands.iter().enumerate() {
            let log = plan.log_dir.join(format!(
                "{}-{}-{}.log",
                started_at,
                plan.level.as_str(),
                n + 1
            ));
            let result =
                commands::run_command(command, dir, &log, plan.timeout, plan.sandbox.as_deref())
                    .await;
            if result.outcome == CommandOutcome::Hung {
                let hung = payload::TestHung {
                    command: command.clone(),
                    timeout_secs: plan.timeout.as_secs(),
                    log: log.display().to_string(),
                };
                let _ = events.report(Payload::TestHung(hung), None, None, None);
            }
            results.push(result);
        }
    }
    let freshness = branch.as_ref().map(|b| b.freshness.clone());
    let failed: Vec<&CommandResult> = results
        .iter()
        .filter(|r| matches!(r.outcome, CommandOutcome::Failed | CommandOutcome::Error))
        .collect();
    let hung: Vec<&CommandResult> = results
        .iter()
        .filter(|r| r.outcome == CommandOutcome::Hung)
        .collect();
    // One line saying why the result is not a plain green: the branch's problem first, then
    // the commands that failed or hung.
    let mut why: Vec<String> = Vec::new();
    if let Some(reason) = verdict.reason() {
        why.push(reason.to_owned());
    }
    if !failed.is_empty() {
        why.push(describe_commands("failed", &failed));
    }
    if !hung.is_empty() {
        why.push(describe_commands(
            &format!("hung past {} s", plan.timeout.as_secs()),
            &hung,
        ));
    }
    // A failure wins over a hang (both in the same run): a failing command is a verdict on the
    // lane's work, a hang may be the machine. The hang stays visible: its `test.hung` event,
    // its command's `hung` outcome, the reason, and `hung` in `lane.red`.
    let (result, class) = match &verdict {
        BranchVerdict::Blocked(_) => (VerifyResult::Blocked, None),
        _ if !failed.is_empty() => {
            let compile = failed
                .iter()
                .any(|r| commands::looks_like_compile_failure(Path::new(&r.log)));
            let class = if compile {
                FailureClass::Compile
            } else {
                FailureClass::Test
            };
            // Only a branch known to lack base commits excuses a red; `unknown` does not
            // (a failed fetch must not hide a regression).
            if matches!(verdict, BranchVerdict::StaleWarned(_)) {
                (VerifyResult::StaleRed, Some(class))
            } else {
                (VerifyResult::Red, Some(class))
            }
        }
        _ if !hung.is_empty() => (VerifyResult::Hung, Some(FailureClass::TestHang)),
        _ => (VerifyResult::Green, None),
    };
    let green_level = match result {
        VerifyResult::Green
            if plan.level == GreenLevel::MergeReady && verdict.reason().is_some() =>
        {
            why.push("not merge-ready: the branch is not known to have every base commit".into());
            Some(GreenLevel::Workspace)
        }
        VerifyResult::Green
            if plan.level == GreenLevel::MergeReady
                && branch
                    .as_ref()
                    .is_some_and(|b| b.freshness.ahead == Some(0)) =>
        {
            // The unchanged code passing its tests proves nothing about the lane's work.
            why.push("not merge-ready: the branch has no commits of its own".into());
            Some(GreenLevel::Workspace)
        }
        VerifyResult::Green => Some(plan.level),
        _ => None,
    };
    // A lower level's green on the HEAD a higher level was reached on keeps the higher one.
    // `lane.green` says what this run reached; the lane's level (`lane.verified`) keeps it.
    let reached = green_level;
    let green_level = match (reached, &plan.held, &head) {
        (Some(reached), Some((held, held_head)), Some(head))
            if held_head == head && *held > reached =>
        {
            Some(*held)
        }
        // Nothing ran (the branch held it back): no verdict on the code, so the level the
        // HEAD reached stays; whether it still stands against the base as it is now is the
        // freshness's to say.
        (None, Some((held, held_head)), Some(head))
            if result == VerifyResult::Blocked && held_head == head =>
        {
            Some(*held)
        }
        _ => reached,
    };
    let verification = Verification {
        level: plan.level,
        result,
        class,
        commands: results.clone(),
        merge,
        freshness,
        reason: (!why.is_empty()).then(|| why.join("; ")),
        head,
        started_at,
        finished_at: now_secs(),
    };
    record_result(events, &verification, reached, &failed, &hung, &verdict);
    let lane_state = finishing::after_verification(current, result, class);
    let to = (transition && lane_state != current).then_some(lane_state);
    let verified = Payload::Verified(Box::new(payload::Verified {
        verification: verification.clone(),
        green_level,
        // What the state file shows as the failure's detail when `to` is set.
        message: verification.reason.clone(),
    }));
    let _ = events.report(verified, to.map(|_| current), to, None);
    Verified {
        verification,
        green_level,
        lane_state,
        branch,
    }
}

/// What the branch check (and merge-forward) before a broad level means for its commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchVerdict {
    /// The branch has every base commit: the commands run and a red is a regression.
    Fresh,
    /// No verdict (a fetch that failed, a base that cannot be read) and nothing known to be
    /// missing: the commands run and a red is still `red` — a regression is never hidden
    /// behind "unknown" —, a green says freshness is unknown and stops short of `merge_ready`.
    Unknown(String),
    /// Base commits are missing and the lane's policy is `warn`: the commands run; a red is
    /// `stale_red`, a green says the branch is stale and stops short of `merge_ready`.
    StaleWarned(String),
    /// Base commits are missing and the policy could not or may not bring them in (conflict,
    /// dirty worktree, detached HEAD, unrelated histories, a failed merge, the `block`
    /// policy), or a git operation is in progress: nothing runs, the lane is
    /// `blocked{branch_freshness}`.
    Blocked(String),
}

impl BranchVerdict {
    /// The one-line reason, for anything but fresh.
    pub fn reason(&self) -> Option<&str> {
        match self {
            BranchVerdict::Fresh => None,
            BranchVerdict::Unknown(why)
            | BranchVerdict::StaleWarned(why)
            | BranchVerdict::Blocked(why) => Some(why),
        }
    }
}

/// The branch before a broad level, after the lane's merge policy was applied.
#[derive(Debug, Clone)]
pub struct BaseIn {
    /// The branch as the commands would see it (checked again after a merge).
    pub check: BranchCheck,
    /// What merge-forward did, when it was tried.
    pub merge: Option<MergeOutcome>,
    /// Why merge-forward failed, when git did (the worktree was verified back where it was,
    /// or the error says it is not).
    pub merge_error: Option<String>,
}

/// Whether `freshness` says the lane lacks base commits: `stale` or `diverged`, or `unknown`
/// (after a failed fetch) whose counts against the base as last fetched still show some.
fn lacks_base_commits(freshness: &Freshness) -> bool {
    match freshness.state {
        FreshnessState::Stale | FreshnessState::Diverged | FreshnessState::BaseRewound => true,
        FreshnessState::Unknown => {
            freshness.operation.is_none() && freshness.behind.is_some_and(|b| b > 0)
        }
        FreshnessState::Fresh => false,
    }
}

/// Checks freshness and, when the lane lacks base commits, applies its policy (blocking git
/// work off the async threads).
async fn bring_base_in(
    repo_root: &Path,
    dir: &Path,
    plan: &VerifyPlan,
    events: &EventLog,
) -> BaseIn {
    let (root, dir_owned, base, known, settings, policy) = (
        repo_root.to_owned(),
        dir.to_owned(),
        plan.base.clone(),
        plan.known_bases.clone(),
        plan.freshness,
        plan.policy,
    );
    let work = tokio::task::spawn_blocking(move || {
        let before = check_branch(&dir_owned, &base, &known, &settings);
        if !lacks_base_commits(&before.freshness) || before.operation.is_some() {
            return (before, None);
        }
        let outcome = Repo::open(&root)
            .and_then(|repo| merge_forward(&repo, &dir_owned, &base, policy))
            .map_err(|e| e.to_string());
        let after = match &outcome {
            Ok(MergeOutcome::Merged { .. }) => check_branch(&dir_owned, &base, &known, &settings),
            _ => before.clone(),
        };
        (after, Some((before, outcome)))
    })
    .await;
    let Ok((check, attempt)) = work else {
        return BaseIn {
            check: check_branch(dir, &plan.base, &plan.known_bases, &plan.freshness),
            merge: None,
            merge_error: None,
        };
    };
    let Some((before, outcome)) = attempt else {
        record_branch(events, &check, plan.last_freshness);
        return BaseIn {
            check,
            merge: None,
            merge_error: None,
        };
    };
    record_branch(events, &before, plan.last_freshness);
    match outcome {
        Ok(outcome) => {
            record_merge(events, &outcome);
            BaseIn {
                check,
                merge: Some(outcome),
                merge_error: None,
            }
        }
        Err(error) => {
            let failed = payload::ErrorReport {
                error: error.clone(),
            };
            let _ = events.report(Payload::MergeFailed(failed), None, None, None);
            BaseIn {
                check,
                merge: None,
                merge_error: Some(error),
            }
        }
    }
}

/// One event per merge-forward that did something or was refused.
pub fn record_merge(events: &EventLog, outcome: &MergeOutcome) {
    let payload = match outcome {
        MergeOutcome::Merged { .. } => Payload::MergedForward(outcome.clone()),
        MergeOutcome::Conflict { .. } => Payload::MergeConflict(outcome.clone()),
        MergeOutcome::UpToDate { .. } => return,
        _ => Payload::MergeRefused(outcome.clone()),
    };
    let _ = events.report(payload, None, None, None);
}

/// Why a merge-forward did not bring the base in, in one line; `None` when it did (merged or
/// already up to date).
pub fn merge_problem(outcome: &MergeOutcome) -> Option<String> {
    Some(match outcome {
        MergeOutcome::Merged { .. } | MergeOutcome::UpToDate { .. } => return None,
        MergeOutcome::Dirty { paths } => format!(
            "the worktree has uncommitted changes ({}); nothing was merged",
            paths.join(", ")
        ),
        MergeOutcome::Conflict { paths, head, .. } => format!(
            "merging the base conflicts in {}; the merge was aborted, the branch is back at {head}",
            paths.join(", ")
        ),
        MergeOutcome::Detached { sha } => {
            format!("HEAD is detached at {sha}: no branch to merge into")
        }
        MergeOutcome::Diverged { .. } => "the branch shares no history with its base".into(),
        MergeOutcome::OperationInProgress { operation } => format!(
            "a git {} is in progress in the worktree",
            wire(&operation.kind)
        ),
        MergeOutcome::NotApplied { policy, .. } => {
            format!("the lane's merge policy is {}", wire(policy))
        }
    })
}

/// What the branch check before a broad level allows (see [`BranchVerdict`]).
pub fn branch_verdict(base_in: &BaseIn, policy: MergePolicy) -> BranchVerdict {
    let freshness = &base_in.check.freshness;
    if let Some(op) = base_in.check.operation {
        return BranchVerdict::Blocked(format!(
            "a git {} is in progress in the worktree; no verdict until it is finished or aborted",
            wire(&op.kind)
        ));
    }
    if !lacks_base_commits(freshness) {
        return match freshness.state {
            FreshnessState::Unknown => BranchVerdict::Unknown(format!(
                "freshness unknown: {}",
                freshness.error.as_deref().unwrap_or("no verdict")
            )),
            _ => BranchVerdict::Fresh,
        };
    }
    let missing = match (freshness.state, freshness.behind) {
        (FreshnessState::Diverged, _) => "the branch shares no history with its base".to_owned(),
        // Nothing is missing: the base lost commits the branch still has.
        (FreshnessState::BaseRewound, _) => {
            let dropped = freshness.dropped.unwrap_or(0);
            return BranchVerdict::Blocked(format!(
                "{} moved backwards: the lane's branch would bring back {dropped} commit{} dropped from it",
                freshness.base_ref,
                if dropped == 1 { "" } else { "s" },
            ));
        }
        // What is missing where: commits of the base that the lane's branch does not have.
        (_, Some(behind)) => format!(
            "{behind} commit{} of {} missing from the lane's branch",
            if behind == 1 { "" } else { "s" },
            freshness.base_ref
        ),
        (_, None) => format!(
            "commits of {} missing from the lane's branch",
            freshness.base_ref
        ),
    };
    if policy == MergePolicy::Warn {
        return BranchVerdict::StaleWarned(format!("stale: {missing} (merge policy warn)"));
    }
    let why = match (&base_in.merge, &base_in.merge_error) {
        (_, Some(error)) => format!("merging the base failed: {error}"),
        // Unrelated histories: saying so once is the whole reason.
        (None | Some(MergeOutcome::Diverged { .. }), None)
            if freshness.state == FreshnessState::Diverged =>
        {
            return BranchVerdict::Blocked(missing);
        }
        (Some(outcome), None) => merge_problem(outcome)
            // Merged, yet still lacking commits: the base moved on while it merged.
            .unwrap_or_else(|| "the base moved on again while it was merged forward".into()),
        (None, None) => "the base was not merged forward".into(),
    };
    BranchVerdict::Blocked(format!("{missing}: {why}"))
}

/// `serde`'s snake_case name of a unit variant.
fn wire(value: &impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `` `a`, `b` failed `` (a list of commands with what happened to them).
fn describe_commands(what: &str, commands: &[&CommandResult]) -> String {
    let names: Vec<String> = commands
        .iter()
        .map(|c| match c.exit_code {
            Some(code) if c.outcome == CommandOutcome::Failed => {
                format!("`{}` (exit {code})", c.command)
            }
            _ => format!("`{}`", c.command),
        })
        .collect();
    format!("{} {what}", names.join(", "))
}

fn record_result(
    events: &EventLog,
    verification: &Verification,
    green_level: Option<GreenLevel>,
    failed: &[&CommandResult],
    hung: &[&CommandResult],
    verdict: &BranchVerdict,
) {
    let level = verification.level;
    let freshness = verification.freshness.as_ref();
    let behind = freshness.and_then(|f| f.behind);
    let missing = freshness.map(|f| f.missing.clone());
    let reason = verification.reason.clone();
    let owned = |commands: &[&CommandResult]| commands.iter().map(|&c| c.clone()).collect();
    let payload = match verification.result {
        // A green says what branch it was on: `stale` (policy warn) and `unknown` greens are
        // not the same promise as a green on a fresh branch.
        VerifyResult::Green => Payload::Green(payload::Green {
            level: green_level,
            asked: level,
            freshness: freshness.map(|f| f.state),
            stale: matches!(verdict, BranchVerdict::StaleWarned(_)),
            behind,
            missing,
            reason,
        }),
        VerifyResult::Red => Payload::Red(payload::Red {
            level,
            class: verification.class,
            failed: owned(failed),
            hung: owned(hung),
            freshness: Some(freshness.map(|f| f.state)),
            reason,
        }),
        VerifyResult::StaleRed => Payload::StaleRed(payload::StaleRed {
            level,
            class: verification.class,
            failed: owned(failed),
            hung: owned(hung),
            missing,
            behind,
            reason,
        }),
        VerifyResult::Hung => Payload::Red(payload::Red {
            level,
            class: Some(FailureClass::TestHang),
            failed: Vec::new(),
            hung: owned(hung),
            freshness: None,
            reason,
        }),
        VerifyResult::Blocked => Payload::VerifyBlocked(payload::VerifyBlocked {
            level,
            reason,
            merge: verification.merge.clone(),
            behind,
            missing,
        }),
    };
    let _ = events.report(payload, None, None, None);
    if green_level == Some(GreenLevel::MergeReady) {
        let ready = payload::MergeReady {
            head: freshness.and_then(|f| f.head.clone()),
        };
        let _ = events.report(Payload::MergeReady(ready), None, None, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawpool_lanes::state_file::GitOperation;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn read_events(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn plan(level: GreenLevel, commands: &[&str], log_dir: PathBuf) -> VerifyPlan {
        let spec = LaneVerifySpec {
            commands: [(level, commands.iter().map(|c| (*c).to_owned()).collect())].into(),
            timeout_secs: 1,
            ..LaneVerifySpec::default()
        };
        spec.plan(level, "main", log_dir, FreshnessSettings::default())
    }

    /// A repository whose base is `origin/main` and whose `origin` cannot be fetched, and a
    /// lane worktree on it: its freshness is `unknown` (the fetch failed), not stale.
    fn unfetchable_lane(tmp: &Path) -> (PathBuf, PathBuf) {
        let repo = tmp.join("repo");
        std::fs::create_dir_all(&repo).expect("repo folder");
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("a.txt"), "a\n").expect("file");
        git(&repo, &["add", "a.txt"]);
        git(&repo, &["commit", "-qm", "one"]);
        let gone = tmp.join("no-such-remote.git");
        git(
            &repo,
            &["remote", "add", "origin", gone.to_str().expect("utf-8")],
        );
        git(&repo, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
        let lane = tmp.join("lane");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "lanes/a",
                lane.to_str().expect("utf-8"),
                "main",
            ],
        );
        (repo, lane)
    }

    #[tokio::test]
    async fn a_red_on_a_branch_of_unknown_freshness_is_a_red_and_its_green_is_not_merge_ready() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let tmp = tmp.path().canonicalize().expect("temp path");
        let (repo, lane) = unfetchable_lane(&tmp);
        let log = tmp.join("events.jsonl");
        let events = EventLog::open("a", &log).expect("event log");
        let finished = LaneState::Finished;

        let red = verify(
            &repo,
            &lane,
            &plan(GreenLevel::Package, &["false"], tmp.join("logs")),
            &events,
            finished,
            true,
        )
        .await;
        let freshness = red.verification.freshness.as_ref().expect("checked");
        assert_eq!(freshness.state, FreshnessState::Unknown, "{freshness:?}");
        assert!(
            freshness
                .error
                .as_deref()
                .is_some_and(|e| e.contains("fetch")),
            "{freshness:?}"
        );
        assert_eq!(red.verification.result, VerifyResult::Red);
        assert_eq!(red.lane_state, LaneState::Failed(FailureClass::Test));
        let kinds: Vec<String> = read_events(&log)
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(kinds.contains(&"lane.red".to_owned()), "{kinds:?}");
        assert!(!kinds.contains(&"lane.stale_red".to_owned()), "{kinds:?}");

        let green = verify(
            &repo,
            &lane,
            &plan(GreenLevel::MergeReady, &["true"], tmp.join("logs")),
            &events,
            red.lane_state,
            true,
        )
        .await;
        assert_eq!(green.verification.result, VerifyResult::Green);
        assert_eq!(green.green_level, Some(GreenLevel::Workspace));
        assert!(
            green
                .verification
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with("freshness unknown")),
            "{:?}",
            green.verification.reason
        );
        assert!(
            !read_events(&log)
                .iter()
                .any(|e| e["kind"] == "lane.merge.ready")
        );
    }

    #[tokio::test]
    async fn a_failure_wins_over_a_hang_and_the_hang_stays_visible() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let log = tmp.path().join("events.jsonl");
        let events = EventLog::open("a", &log).expect("event log");
        let verified = verify(
            tmp.path(),
            tmp.path(),
            &plan(
                GreenLevel::Targeted,
                &["sleep 30", "exit 4"],
                tmp.path().join("logs"),
            ),
            &events,
            LaneState::Finished,
            true,
        )
        .await;
        let v = &verified.verification;
        assert_eq!(v.result, VerifyResult::Red);
        assert_eq!(v.class, Some(FailureClass::Test));
        assert_eq!(v.commands[0].outcome, CommandOutcome::Hung);
        assert_eq!(v.commands[1].exit_code, Some(4));
        assert_eq!(
            v.reason.as_deref(),
            Some("`exit 4` (exit 4) failed; `sleep 30` hung past 1 s")
        );
        let logged = read_events(&log);
        assert!(logged.iter().any(|e| e["kind"] == "test.hung"));
        let red = logged
            .iter()
            .find(|e| e["kind"] == "lane.red")
            .expect("lane.red");
        assert_eq!(red["detail"]["hung"][0]["command"], "sleep 30");
        assert_eq!(red["detail"]["failed"][0]["command"], "exit 4");
    }

    fn freshness(state: FreshnessState, behind: Option<u32>) -> Freshness {
        Freshness {
            state,
            ahead: Some(1),
            behind,
            base_ref: "main".into(),
            base_sha: Some("b".into()),
            head: Some("h".into()),
            merge_base: Some("m".into()),
            missing: Vec::new(),
            checked_at: 0,
            operation: None,
            error: (state == FreshnessState::Unknown).then(|| "the last fetch failed".into()),
            dropped: None,
        }
    }

    fn base_in(f: Freshness, merge: Option<MergeOutcome>, error: Option<&str>) -> BaseIn {
        BaseIn {
            check: BranchCheck {
                head: None,
                operation: None,
                freshness: f,
            },
            merge,
            merge_error: error.map(str::to_owned),
        }
    }

    #[test]
    fn only_a_branch_known_to_lack_base_commits_is_held_or_excused() {
        use FreshnessState as S;
        let conflict = MergeOutcome::Conflict {
            paths: vec!["a.txt".into()],
            head: "h".into(),
            base_sha: "b".into(),
            method: clawpool_worktree::MergeMethod::Merge,
        };
        let policy = MergePolicy::MergeForward;
        assert_eq!(
            branch_verdict(&base_in(freshness(S::Fresh, Some(0)), None, None), policy),
            BranchVerdict::Fresh
        );
        assert!(matches!(
            branch_verdict(&base_in(freshness(S::Unknown, Some(0)), None, None), policy),
            BranchVerdict::Unknown(_)
        ));
        assert_eq!(
            branch_verdict(
                &base_in(freshness(S::Stale, Some(2)), Some(conflict.clone()), None),
                policy
            ),
            BranchVerdict::Blocked(
                "2 commits of main missing from the lane's branch: merging the base conflicts in a.txt; the \
                 merge was aborted, the branch is back at h"
                    .into()
            )
        );
        // Unknown after a failed fetch, yet behind the base as last fetched: still lacking.
        assert!(matches!(
            branch_verdict(
                &base_in(freshness(S::Unknown, Some(1)), None, Some("hook said no")),
                policy
            ),
            BranchVerdict::Blocked(why) if why.ends_with("merging the base failed: hook said no")
        ));
        assert_eq!(
            branch_verdict(
                &base_in(freshness(S::Diverged, Some(3)), None, None),
                MergePolicy::Block
            ),
            BranchVerdict::Blocked("the branch shares no history with its base".into())
        );
        assert_eq!(
            branch_verdict(
                &base_in(freshness(S::Stale, Some(1)), None, None),
                MergePolicy::Warn
            ),
            BranchVerdict::StaleWarned(
                "stale: 1 commit of main missing from the lane's branch (merge policy warn)".into()
            )
        );
        let mut paused = base_in(freshness(S::Unknown, None), None, None);
        paused.check.operation = Some(GitOperation {
            kind: clawpool_worktree::GitOperationKind::Rebase,
            paused: true,
        });
        assert!(matches!(
            branch_verdict(&paused, policy),
            BranchVerdict::Blocked(why) if why.starts_with("a git rebase is in progress")
        ));
    }
}
