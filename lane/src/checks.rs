//! A lane's branch and verification, in the process that owns the lane: the freshness watch
//! (at start, when the lane's HEAD, branch or base ref moves, and every
//! `freshness_check_secs`), merge-forward and verify on an operator's
//! request (arriving on the lane's control socket), and verification when the lane finishes
//! (the packet's `verify_on_finish`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::finishing;
use crate::lane_state::StateRecorder;
use crate::verify::{
    self, BranchCheck, FreshnessSettings, LaneVerifySpec, Verified, check_branch, merge_problem,
    record_branch, record_merge,
};
use clawpool_lanes::payload::{
    BranchBlocked, ErrorReport, GitFailed, MergeAttempt, OutcomeReported,
};
use clawpool_lanes::state_file::{GreenLevel, LaneOutcome};
use clawpool_lanes::{EventLog, LaneState, LaneStatus, Payload};
use clawpool_worktree::{MergeOutcome, Repo, merge_forward};
use tokio::sync::mpsc;

use crate::control::{ControlError, ControlReply, ErrorKind, LaneOp, OpRequest, VerifiedReply};
use crate::registry::{RegistryEntry, RegistryFolder};

/// What a lane's branch work needs.
#[derive(Clone)]
pub struct LaneChecks {
    /// The repository's top folder.
    pub repo_root: PathBuf,
    /// The lane's worktree.
    pub dir: PathBuf,
    /// The lane's base ref.
    pub base: String,
    /// The commit its base pointed to when the lane was made (its registry entry's): the base
    /// no longer having it, and the lane still having it, is a base that moved backwards.
    pub known_base: Option<String>,
    /// Its verification settings.
    pub spec: LaneVerifySpec,
    /// Where verification logs go.
    pub log_dir: PathBuf,
    /// Check and fetch intervals.
    pub freshness: FreshnessSettings,
    /// The lane's sandbox, which its verification commands run in (set when the lane opens).
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
}

impl LaneChecks {
    /// The checks of a lane from its registry entry.
    pub fn from_registry(
        entry: &RegistryEntry,
        repo: &Repo,
        dir: &Path,
        registry: &RegistryFolder,
        freshness: FreshnessSettings,
    ) -> LaneChecks {
        let base = entry
            .base
            .git_ref
            .clone()
            .unwrap_or_else(|| repo.main_branch().unwrap_or_else(|_| "main".into()));
        LaneChecks {
            repo_root: repo.root().to_owned(),
            dir: dir.to_owned(),
            base,
            known_base: entry.base.sha.clone(),
            spec: entry.verify.clone(),
            log_dir: registry.verify_logs(),
            freshness,
            sandbox: None,
        }
    }

    /// Checks the branch and records it in the state file (and `branch.stale_against_main`
    /// when it just became stale).
    pub async fn check(&self, events: &EventLog, recorder: &StateRecorder) -> BranchCheck {
        let was = recorder.doc().freshness;
        let known = self.known_bases(was.as_ref());
        let (dir, base, settings) = (self.dir.clone(), self.base.clone(), self.freshness);
        let check =
            tokio::task::spawn_blocking(move || check_branch(&dir, &base, &known, &settings))
                .await
                .unwrap_or_else(|_| {
                    let known = self.known_bases(None);
                    check_branch(&self.dir, &self.base, &known, &self.freshness)
                });
        let was = was.map(|f| f.state);
        record_branch(events, &check, was);
        recorder.update(|doc| {
            doc.head = check.head.clone();
            doc.git_operation = check.operation;
            doc.freshness = Some(check.freshness.clone());
        });
        check
    }

    /// The commits the base is known to have pointed to: at the lane's creation, and at the
    /// last check (`last`, the state file's freshness).
    pub fn known_bases(&self, last: Option<&clawpool_worktree::Freshness>) -> Vec<String> {
        self.known_base
            .iter()
            .chain(last.and_then(|f| f.base_sha.as_ref()))
            .cloned()
            .collect()
    }

    /// Checks now, then whenever `moves` says the lane's HEAD, branch or base ref moved, and
    /// every interval besides (a safety sweep, and what fetches a remote base), until aborted.
    pub fn watch(
        self,
        events: Arc<EventLog>,
        recorder: StateRecorder,
        mut moves: tokio::sync::watch::Receiver<u64>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.freshness.check_interval);
            let mut watched = true;
            loop {
                tokio::select! {
                    changed = moves.changed(), if watched => watched = changed.is_ok(),
                    _ = tick.tick() => {}
                }
                self.check(&events, &recorder).await;
            }
        })
    }

    /// Brings the base in (`merge_forward`, or `rebase` when that is the lane's policy).
    /// When it could not (a dirty worktree, a conflict — aborted —, a detached HEAD, unrelated
    /// histories, a paused git operation, git failing) the lane is held as
    /// [`HELD`](finishing::HELD) with the reason, through `lane.branch_blocked`; the state
    /// changes only when the caller owns it (`owned`: the lane's state now, no worker driven any
    /// more), as for `verify`.
    pub async fn merge_forward(
        &self,
        events: &EventLog,
        recorder: &StateRecorder,
        owned: Option<LaneState>,
    ) -> Result<MergeOutcome, String> {
        self.bring_base_in(events, recorder, owned).await.0
    }

    /// [`LaneChecks::merge_forward`], with why it did not bring the base in, if it did not.
    pub async fn bring_base_in(
        &self,
        events: &EventLog,
        recorder: &StateRecorder,
        owned: Option<LaneState>,
    ) -> (Result<MergeOutcome, String>, Option<String>) {
        let policy = match self.spec.merge_policy {
            clawpool_worktree::MergePolicy::Rebase => clawpool_worktree::MergePolicy::Rebase,
            _ => clawpool_worktree::MergePolicy::MergeForward,
        };
        let (root, dir, base) = (self.repo_root.clone(), self.dir.clone(), self.base.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            Repo::open(&root).and_then(|repo| merge_forward(&repo, &dir, &base, policy))
        })
        .await;
        let (reply, problem, merge) = match outcome {
            Ok(Ok(outcome)) => {
                record_merge(events, &outcome);
                (
                    Ok(outcome.clone()),
                    merge_problem(&outcome),
                    Some(MergeAttempt::Outcome(outcome)),
                )
            }
            Ok(Err(err)) => {
                let error = err.to_string();
                let failed = ErrorReport {
                    error: error.clone(),
                };
                let _ = events.report(Payload::MergeFailed(failed), None, None, None);
                (
                    Err(error.clone()),
                    Some(format!("merging the base failed: {error}")),
                    Some(MergeAttempt::Failed(GitFailed::Failed { error })),
                )
            }
            Err(err) => (Err(err.to_string()), None, None),
        };
        if let (Some(reason), Some(merge)) = (&problem, merge) {
            let (from, to) = owned.and_then(finishing::after_refused_merge).unzip();
            // `message` is what the state file shows as the failure's detail.
            let blocked = BranchBlocked {
                merge,
                message: reason.clone(),
            };
            let _ = events.report(Payload::BranchBlocked(blocked), from, to, None);
        }
        self.check(events, recorder).await;
        (reply, problem)
    }

    /// Verifies `level`. `owned` is the lane's state when the caller owns it (no worker driven
    /// any more): the result may then move it. While a worker is driven (`None`) the state is
    /// its machine's and the verification leaves it as it is.
    pub async fn verify(
        &self,
        level: GreenLevel,
        events: &EventLog,
        recorder: &StateRecorder,
        owned: Option<LaneState>,
    ) -> Verified {
        let mut plan = self
            .spec
            .plan(level, &self.base, self.log_dir.clone(), self.freshness);
        let doc = recorder.doc();
        let current = owned.unwrap_or_else(|| doc.lane_state());
        plan.known_bases = self.known_bases(doc.freshness.as_ref());
        plan.last_freshness = doc.freshness.map(|f| f.state);
        plan.held = doc.green_level.zip(doc.verification.and_then(|v| v.head));
        plan.sandbox = self.sandbox.clone();
        let verified = verify::verify(
            &self.repo_root,
            &self.dir,
            &plan,
            events,
            current,
            owned.is_some(),
        )
        .await;
        if let Some(branch) = &verified.branch {
            recorder.update(|doc| {
                doc.head = branch.head.clone();
                doc.git_operation = branch.operation;
                doc.freshness = Some(branch.freshness.clone());
            });
        }
        verified
    }

    /// Records what the finished lane's work came to (`lane.outcome`): `no_changes` when its
    /// branch has no commits of its own since its base (`base_sha`, the sha it was made from,
    /// and the base ref's tip; merge commits bringing the base in are not its own) and its
    /// worktree is clean, `changed` otherwise. Nothing is recorded when git cannot tell.
    pub async fn record_outcome(&self, base_sha: Option<String>, events: &EventLog) {
        let (dir, base) = (self.dir.clone(), self.base.clone());
        let looked =
            tokio::task::spawn_blocking(move || own_work(&dir, &base, base_sha.as_deref())).await;
        let Ok(Some((commits, dirty))) = looked else {
            return;
        };
        let outcome = if commits == 0 && !dirty {
            LaneOutcome::NoChanges
        } else {
            LaneOutcome::Changed
        };
        let reported = Payload::Outcome(OutcomeReported {
            outcome,
            commits,
            dirty,
        });
        let _ = events.report(reported, None, None, None);
    }

    /// Serves branch requests for a lane being driven: each waits for the agent to be idle
    /// (ready or finished) — a merge or a test run never happens under an agent at work.
    pub fn serve(
        self,
        mut requests: mpsc::Receiver<OpRequest>,
        events: Arc<EventLog>,
        recorder: StateRecorder,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while let Some((op, reply)) = requests.recv().await {
                let mut statuses = recorder.statuses();
                let _ = statuses
                    .wait_for(|s| matches!(s, LaneStatus::ReadyForPrompt | LaneStatus::Finished))
                    .await;
                let result = match op {
                    LaneOp::MergeForward => {
                        match self.merge_forward(&events, &recorder, None).await {
                            Ok(merge) => ControlReply::Merged { merge },
                            Err(error) => ControlReply::Error(ControlError::new(
                                ErrorKind::MergeFailed,
                                error,
                            )),
                        }
                    }
                    LaneOp::Verify { level } => {
                        let verified = self.verify(level, &events, &recorder, None).await;
                        ControlReply::Verified(Box::new(VerifiedReply::from(&verified)))
                    }
                };
                // The reply says the lane's state (its green level, its freshness): the
                // state file says it too by the time the operator reads it.
                recorder.flushed().await;
                let _ = reply.send(result);
            }
        })
    }
}

/// The lane worktree `dir`'s own work: its commits that are not merges and not reachable from
/// its base (the ref, and the sha it was made from), and whether the worktree is dirty.
fn own_work(dir: &Path, base_ref: &str, base_sha: Option<&str>) -> Option<(u64, bool)> {
    let hidden: Vec<&str> = std::iter::once(base_ref).chain(base_sha).collect();
    let work = clawpool_worktree::own_work(dir, &hidden).ok()?;
    Some((work.commits, work.dirty))
}
