//! The batched merge queue's driver (`clawpool land --batch N`): carries out what
//! [`BatchPlan`](super::batch_plan::BatchPlan) decides, and nothing else.
//!
//! Each lane is taken as in the one-at-a-time queue (its supervisor lock held for the whole
//! run, its event log opened). For each batch the plan hands out, the driver reads the base,
//! merges the batch's lane heads onto it one after the other in the object store (a lane that
//! conflicts is told to the plan before anything is verified), makes the candidate — one
//! commit whose parents are the base and the merged heads, with the merged tree — checks it
//! out in the run's own detached worktree and runs the union of the lanes' commands at the
//! level there, stopping at the first that fails or hangs. A green candidate moves the base by
//! the same compare-and-swap as one lane does (a base that moved meanwhile is reported to the
//! plan, which tries the batch again from the new base); the checkout of the base is brought
//! along. Neither the lanes' worktrees nor their branches are touched: only commits land, each
//! lane's HEAD as it was when the run began.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clawpool_lane::verify::commands::run_command;
use clawpool_lanes::Payload;
use clawpool_lanes::payload::{LandFailure, Landed};
use clawpool_lanes::state_file::{CommandOutcome, now_secs};
use clawpool_worktree::{
    BaseMove, CandidateWorktree, HeadState, Repo, TreeMerge, base_checkout, bring_checkout_along,
    commit_tree, head_state, is_ancestor, merge_trees, move_base,
};
use serde::Serialize;

use super::batch_plan::{BatchPlan, Decision, Exclusion, Trial};
use super::{LandOptions, LaneVerdict, OpenLane, Prepared, left_out, open_lane};

/// One candidate verified in a batched run.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateRecord {
    /// The lanes merged in it, in order.
    pub lanes: Vec<String>,
    /// The base it was made on.
    pub base: String,
    /// The candidate commit.
    pub commit: String,
    /// `green`, `red`, `hung` or `base_moved` (green, but the base moved first).
    pub result: &'static str,
    /// How long its verification took, in milliseconds.
    pub verify_ms: u64,
}

/// A lane taken into the run.
struct Taken<'a> {
    prepared: &'a Prepared,
    open: OpenLane,
    head: String,
    /// How many candidates with it were green on a base that then moved.
    retries: u32,
}

/// What a candidate's verification found.
struct Verification {
    trial: Trial,
    /// The commands that did not pass, with their outcome.
    why: Vec<String>,
    logs: Vec<String>,
    took: Duration,
}

/// Lands `prepared` in batches of up to `size` (see the module's documentation): the verdicts
/// in the order the lanes were given, and the candidates verified.
pub(super) async fn land_batched(
    repo: &Repo,
    base_ref: &str,
    prepared: &[Prepared],
    options: LandOptions,
    size: usize,
) -> (Vec<LaneVerdict>, Vec<CandidateRecord>) {
    let mut verdicts: Vec<Option<LaneVerdict>> = prepared.iter().map(|_| None).collect();
    let mut candidates = Vec::new();
    let mut taken: BTreeMap<usize, Taken> = BTreeMap::new();
    let base_sha = match repo.resolve(base_ref) {
        Ok(sha) => sha,
        Err(e) => return (refuse_all(prepared, &e.to_string()), candidates),
    };
    for (i, lane) in prepared.iter().enumerate() {
        let open = match open_lane(lane, options) {
            Ok(open) => open,
            Err(verdict) => {
                verdicts[i] = Some(*verdict);
                continue;
            }
        };
        let head = match head_state(&lane.checks.dir) {
            Ok(HeadState::Branch { sha, .. }) => sha,
            Ok(_) => {
                verdicts[i] = Some(refused(
                    lane,
                    &open,
                    "the lane's HEAD is detached: only a branch's commits land".into(),
                ));
                continue;
            }
            Err(e) => {
                verdicts[i] = Some(refused(lane, &open, e.to_string()));
                continue;
            }
        };
        if is_ancestor(repo, &head, &base_sha).unwrap_or(false) {
            verdicts[i] = Some(LaneVerdict::AlreadyOnBase {
                lane: lane.name.clone(),
            });
            continue;
        }
        taken.insert(
            i,
            Taken {
                prepared: lane,
                open,
                head,
                retries: 0,
            },
        );
    }
    let worktree_path = repo
        .common_dir()
        .join("clawpool")
        .join("land")
        .join(format!("candidate-{}", std::process::id()));
    let worktree = match CandidateWorktree::create(repo, &worktree_path, &base_sha) {
        Ok(worktree) => worktree,
        Err(e) => {
            for (i, lane) in &taken {
                let reason = format!("making the candidate worktree: {e}");
                verdicts[*i] = Some(refused(lane.prepared, &lane.open, reason));
            }
            return (verdicts.into_iter().flatten().collect(), candidates);
        }
    };
    let logs_dir = repo.common_dir().join("clawpool").join("land").join("logs");
    let mut plan = BatchPlan::new(taken.keys().copied(), size, options.attempts);
    while let Some(batch) = plan.next_batch() {
        let base_sha = match repo.resolve(base_ref) {
            Ok(sha) => sha,
            Err(e) => {
                stop(&taken, &mut verdicts, &e.to_string(), None);
                break;
            }
        };
        // Merge the batch onto the base, one lane after the other; conflicts go to the plan.
        let mut merged: Vec<usize> = Vec::new();
        let mut tip = base_sha.clone();
        let mut tree = None;
        for i in batch {
            let lane = &taken[&i];
            match merge_trees(repo, &tip, &lane.head) {
                Ok(TreeMerge::Clean { tree: t }) => {
                    match commit_tree(repo, &t, &[&tip, &lane.head], "clawpool land: step") {
                        Ok(step) => {
                            tip = step;
                            tree = Some(t);
                            merged.push(i);
                        }
                        Err(e) => {
                            plan.conflicts(&i, true);
                            verdicts[i] = Some(refused(lane.prepared, &lane.open, e.to_string()));
                        }
                    }
                }
                Ok(TreeMerge::Conflict { paths }) => {
                    let with_base = merged.is_empty()
                        || !matches!(
                            merge_trees(repo, &base_sha, &lane.head),
                            Ok(TreeMerge::Clean { .. })
                        );
                    if let Decision::LeaveOut(_, _) = plan.conflicts(&i, with_base) {
                        let reason =
                            format!("merging it with the base conflicts in {}", paths.join(", "));
                        verdicts[i] = Some(exclude(
                            lane,
                            Exclusion::Conflict,
                            reason,
                            &base_sha,
                            Vec::new(),
                        ));
                    }
                }
                Err(e) => {
                    plan.conflicts(&i, true);
                    verdicts[i] = Some(refused(lane.prepared, &lane.open, e.to_string()));
                }
            }
        }
        let Some(tree) = tree.filter(|_| !merged.is_empty()) else {
            plan.verified(Trial::Green);
            continue;
        };
        let names: Vec<String> = merged
            .iter()
            .map(|i| taken[i].prepared.name.clone())
            .collect();
        let parents: Vec<&str> = std::iter::once(base_sha.as_str())
            .chain(merged.iter().map(|i| taken[i].head.as_str()))
            .collect();
        let message = format!(
            "Land lanes {}\n\nVerified green together at {}.",
            names.join(", "),
            options.level.as_str()
        );
        let candidate = match commit_tree(repo, &tree, &parents, &message)
            .and_then(|c| worktree.check_out(&c).map(|()| c))
        {
            Ok(candidate) => candidate,
            Err(e) => {
                stop(&taken, &mut verdicts, &e.to_string(), None);
                break;
            }
        };
        let verification = verify(&worktree, &merged, &taken, options, &logs_dir).await;
        let mut trial = verification.trial;
        let mut checkout = None;
        if trial == Trial::Green {
            // The checkout is looked at again just before the move, as for one lane.
            match base_checkout(repo, base_ref) {
                Ok(Some(c)) if !c.dirty.is_empty() => {
                    let reason = format!(
                        "the base is checked out in {} with uncommitted changes ({})",
                        c.path.display(),
                        c.dirty.join(", ")
                    );
                    stop(&taken, &mut verdicts, &reason, Some(&base_sha));
                    break;
                }
                Ok(c) => checkout = c,
                Err(e) => {
                    stop(&taken, &mut verdicts, &e.to_string(), None);
                    break;
                }
            }
            let reflog = format!("clawpool land --batch: {}", names.join(", "));
            match move_base(repo, base_ref, &base_sha, &candidate, &reflog) {
                Ok(BaseMove::Moved) => {}
                Ok(BaseMove::MovedMeanwhile { .. }) => trial = Trial::BaseMoved,
                Err(e) => {
                    stop(&taken, &mut verdicts, &e.to_string(), None);
                    break;
                }
            }
        }
        candidates.push(CandidateRecord {
            lanes: names.clone(),
            base: base_sha.clone(),
            commit: candidate.clone(),
            result: match trial {
                Trial::Green => "green",
                Trial::Red => "red",
                Trial::Hung => "hung",
                Trial::BaseMoved => "base_moved",
            },
            verify_ms: u64::try_from(verification.took.as_millis()).unwrap_or(u64::MAX),
        });
        let checkout_error = checkout
            .as_ref()
            .filter(|_| trial == Trial::Green)
            .and_then(|c| {
                bring_checkout_along(&c.path, &base_sha, &candidate)
                    .err()
                    .map(|e| format!("{}: {e}", c.path.display()))
            });
        for decision in plan.verified(trial) {
            match decision {
                Decision::Land(lanes) => {
                    for i in lanes {
                        let lane = &taken[&i];
                        let landed = Landed {
                            base_ref: base_ref.to_owned(),
                            old_base: base_sha.clone(),
                            new_base: candidate.clone(),
                            head: lane.head.clone(),
                            method: "batch".into(),
                            attempts: lane.retries + 1,
                        };
                        let _ = lane
                            .open
                            .events
                            .report(Payload::Landed(landed), None, None, None);
                        verdicts[i] = Some(LaneVerdict::Landed {
                            lane: lane.prepared.name.clone(),
                            new_base: candidate.clone(),
                            head: lane.head.clone(),
                            attempts: lane.retries + 1,
                            checkout_error: checkout_error.clone(),
                            batch: Some(names.clone()),
                        });
                    }
                }
                Decision::LeaveOut(i, why) => {
                    let reason = match why {
                        Exclusion::BaseKeptMoving => format!(
                            "its batch was green but the base moved before it could land, {} times",
                            options.attempts
                        ),
                        _ => format!(
                            "alone on the base, its candidate {candidate} was not green: {}",
                            verification.why.join("; ")
                        ),
                    };
                    verdicts[i] = Some(exclude(
                        &taken[&i],
                        why,
                        reason,
                        &base_sha,
                        verification.logs.clone(),
                    ));
                }
                Decision::Retry(lanes) => {
                    for i in lanes {
                        if let Some(lane) = taken.get_mut(&i) {
                            lane.retries += 1;
                        }
                    }
                }
                Decision::Split(..) | Decision::Defer(_) => {}
            }
        }
    }
    drop(worktree);
    let verdicts = verdicts
        .into_iter()
        .zip(prepared)
        .map(|(verdict, lane)| {
            verdict.unwrap_or_else(|| {
                left_out(
                    &lane.name,
                    None,
                    LandFailure::Refused,
                    "the run stopped before the lane was decided".into(),
                    None,
                    None,
                    Vec::new(),
                )
            })
        })
        .collect();
    (verdicts, candidates)
}

/// Runs the union of the merged lanes' commands at the level in the candidate worktree (each
/// with the longest timeout a lane of the batch gives it), stopping at the first that does not
/// pass.
async fn verify(
    worktree: &CandidateWorktree,
    merged: &[usize],
    taken: &BTreeMap<usize, Taken<'_>>,
    options: LandOptions,
    logs_dir: &std::path::Path,
) -> Verification {
    let mut commands: Vec<(String, u64)> = Vec::new();
    for i in merged {
        let spec = &taken[i].prepared.checks.spec;
        for command in spec.commands.get(&options.level).into_iter().flatten() {
            match commands.iter_mut().find(|(c, _)| c == command) {
                Some((_, timeout)) => *timeout = (*timeout).max(spec.timeout_secs),
                None => commands.push((command.clone(), spec.timeout_secs)),
            }
        }
    }
    let started = Instant::now();
    let stamp = format!("{}-{}", now_secs(), std::process::id());
    let mut logs = Vec::new();
    let mut why = Vec::new();
    let mut trial = Trial::Green;
    for (n, (command, timeout)) in commands.iter().enumerate() {
        let log = logs_dir.join(format!("{stamp}-{}.log", n + 1));
        if let Some(parent) = log.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let result = run_command(
            command,
            worktree.path(),
            &log,
            Duration::from_secs(*timeout),
            None,
        )
        .await;
        logs.push(result.log.clone());
        match result.outcome {
            CommandOutcome::Passed => continue,
            CommandOutcome::Hung => {
                why.push(format!("`{command}` hung past {timeout} s"));
                trial = Trial::Hung;
            }
            _ => {
                why.push(format!("`{command}` failed"));
                trial = Trial::Red;
            }
        }
        break;
    }
    Verification {
        trial,
        why,
        logs,
        took: started.elapsed(),
    }
}

fn refused(lane: &Prepared, open: &OpenLane, reason: String) -> LaneVerdict {
    left_out(
        &lane.name,
        Some(&open.events),
        LandFailure::Refused,
        reason,
        None,
        None,
        Vec::new(),
    )
}

fn exclude(
    lane: &Taken,
    why: Exclusion,
    reason: String,
    base_sha: &str,
    logs: Vec<String>,
) -> LaneVerdict {
    let failure = match why {
        Exclusion::Conflict => LandFailure::Conflict,
        Exclusion::Red => LandFailure::Red,
        Exclusion::Hung => LandFailure::Hung,
        Exclusion::BaseKeptMoving => LandFailure::BaseKeptMoving,
    };
    left_out(
        &lane.prepared.name,
        Some(&lane.open.events),
        failure,
        reason,
        Some(base_sha.to_owned()),
        Some(lane.head.clone()),
        logs,
    )
}

/// Leaves every lane not yet decided out (refused, for `reason`): the run cannot go on.
fn stop(
    taken: &BTreeMap<usize, Taken>,
    verdicts: &mut [Option<LaneVerdict>],
    reason: &str,
    base_sha: Option<&str>,
) {
    for (i, lane) in taken {
        if verdicts[*i].is_none() {
            verdicts[*i] = Some(left_out(
                &lane.prepared.name,
                Some(&lane.open.events),
                LandFailure::Refused,
                reason.to_owned(),
                base_sha.map(str::to_owned),
                Some(lane.head.clone()),
                Vec::new(),
            ));
        }
    }
}

fn refuse_all(prepared: &[Prepared], reason: &str) -> Vec<LaneVerdict> {
    prepared
        .iter()
        .map(|lane| {
            left_out(
                &lane.name,
                None,
                LandFailure::Refused,
                reason.to_owned(),
                None,
                None,
                Vec::new(),
            )
        })
        .collect()
}
