//! The merge queue (`clawpool land`): lanes land on their base one at a time, in the order
//! given, and the base only ever moves to a commit that was verified green.
//!
//! For each lane, holding its supervisor lock (a lane still driven is refused, not raced):
//! the base as it stands now — including the lanes landed before it in this run — is merged
//! into the lane's branch in its own worktree (the lane engine's merge-forward, recorded as
//! usual), then the lane is verified at the asked level there (the lane engine's
//! verification: its commands, their timeouts, its events and state changes). Only a green on
//! a HEAD that contains the base commit it was merged with moves the base, by a
//! compare-and-swap of the branch's ref from that commit; a base that moved meanwhile is done
//! again (up to [`LandOptions::attempts`] times), never overwritten. The checkout that has the
//! base branch checked out is brought along as a fast-forward would; a dirty one refuses the
//! whole run before anything moves. A lane that conflicts, turns red, hangs or cannot be
//! verified is left out with its reason and evidence (`lane.land_failed`) and the queue goes
//! on. With [`LandOptions::batch`] the lanes are instead tried several at a time in one
//! candidate and a red candidate is bisected ([`batch`], decided by [`batch_plan`]). Rules and
//! exit codes: `docs/handoff.md`.

mod batch;
pub mod batch_plan;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_lane::checks::LaneChecks;
use clawpool_lane::lane_state::StateRecorder;
use clawpool_lane::registry::RegistryFolder;
use clawpool_lane::verify::FreshnessSettings;
use clawpool_lanes::payload::{LandFailed, LandFailure, Landed};
use clawpool_lanes::state_file::{GreenLevel, SupervisorLock, VerifyResult};
use clawpool_lanes::{EventLog, Payload, read_lane_record};
use clawpool_worktree::{
    BaseMove, LandMethod, MergeOutcome, Repo, base_checkout, bring_checkout_along, is_ancestor,
    landing_commit, local_branch_ref, move_base,
};
use serde::Serialize;

/// A lane to land, as the caller found it.
#[derive(Debug, Clone)]
pub struct LaneToLand {
    /// Its worktree.
    pub dir: PathBuf,
    /// Its event log (in its registry folder).
    pub events: PathBuf,
}

/// How to land.
#[derive(Debug, Clone, Copy)]
pub struct LandOptions {
    /// Fast-forward or merge commit.
    pub method: LandMethod,
    /// The verification level a lane must be green at.
    pub level: GreenLevel,
    /// How many times a lane is merged forward and verified when the base keeps moving.
    pub attempts: u32,
    /// At most how long each verification command may run, whatever the lane's own timeout
    /// (its packet's `verify_timeout_secs`) allows: `None` keeps the lane's.
    pub timeout: Option<Duration>,
    /// Batch mode: up to this many lanes are merged together into one candidate, verified
    /// once, and a red candidate is bisected (`None`: one lane at a time).
    pub batch: Option<usize>,
}

/// What became of one lane.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum LaneVerdict {
    /// The base moved to its verified work.
    Landed {
        /// The lane.
        lane: String,
        /// The base's new commit.
        new_base: String,
        /// The lane's verified HEAD.
        head: String,
        /// How many tries the base's moves took.
        attempts: u32,
        /// Why the base's checkout could not be brought along (its files then lag its
        /// branch: `git reset --keep HEAD` there catches up).
        #[serde(skip_serializing_if = "Option::is_none")]
        checkout_error: Option<String>,
        /// Batch mode: the lanes that landed in the same candidate commit (this one included).
        #[serde(skip_serializing_if = "Option::is_none")]
        batch: Option<Vec<String>>,
    },
    /// The base already has all of it: nothing to land.
    AlreadyOnBase {
        /// The lane.
        lane: String,
    },
    /// Left out: the base did not move for it.
    LeftOut {
        /// The lane.
        lane: String,
        /// Why, with the evidence (as in `lane.land_failed`).
        #[serde(flatten)]
        failed: LandFailed,
    },
}

impl LaneVerdict {
    /// Whether the lane was left out.
    pub fn left_out(&self) -> bool {
        matches!(self, LaneVerdict::LeftOut { .. })
    }
}

/// What a land run did.
#[derive(Debug, Clone, Serialize)]
pub struct LandReport {
    /// The base's full ref (of the first lane; each lane lands on its own base).
    pub base_ref: String,
    /// Its commit before the run.
    pub base_before: String,
    /// Its commit after.
    pub base_after: String,
    /// The checkout brought along, if the base is checked out.
    pub checkout: Option<PathBuf>,
    /// One verdict per lane, in the order they were taken (batch mode: in the order given).
    pub lanes: Vec<LaneVerdict>,
    /// Batch mode: every candidate verified, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<batch::CandidateRecord>,
}

/// Why a land run did nothing at all.
#[derive(Debug, thiserror::Error)]
pub enum LandError {
    /// No lane was given.
    #[error("no lane to land")]
    NoLanes,
    /// A lane has no registry entry, so no base.
    #[error("{dir} is not a lane made by `clawpool spawn` (no registry entry): it has no base")]
    NotSpawned {
        /// Its folder.
        dir: String,
    },
    /// The lanes do not share a base.
    #[error("lanes land on one base per run: {first} and {other} differ")]
    MixedBases {
        /// The first lane's base.
        first: String,
        /// Another's.
        other: String,
    },
    /// The base is no local branch.
    #[error("the base {base} is not a local branch: only a local branch can be landed on")]
    NotABranch {
        /// The base as the lane has it.
        base: String,
    },
    /// The base branch is checked out with uncommitted changes.
    #[error(
        "the base {base} is checked out in {path} with uncommitted changes ({paths}): commit or stash them, then land"
    )]
    DirtyCheckout {
        /// The base branch.
        base: String,
        /// The checkout.
        path: String,
        /// Its dirty files.
        paths: String,
    },
    /// Git failed.
    #[error(transparent)]
    Git(#[from] clawpool_worktree::WorktreeError),
}

impl LandError {
    /// Its `kind` in JSON errors.
    pub fn kind(&self) -> &'static str {
        match self {
            LandError::NoLanes => "no_lanes",
            LandError::NotSpawned { .. } => "not_a_spawned_lane",
            LandError::MixedBases { .. } => "mixed_bases",
            LandError::NotABranch { .. } => "base_not_a_branch",
            LandError::DirtyCheckout { .. } => "dirty_base_checkout",
            LandError::Git(_) => "git_failed",
        }
    }
}

struct Prepared {
    name: String,
    checks: LaneChecks,
    lane: LaneToLand,
}

/// Lands `lanes` in order (see the module's documentation).
pub async fn land(
    repo: &Repo,
    lanes: &[LaneToLand],
    options: LandOptions,
) -> Result<LandReport, LandError> {
    if lanes.is_empty() {
        return Err(LandError::NoLanes);
    }
    let mut prepared = Vec::new();
    for lane in lanes {
        let registry = RegistryFolder::of_events(&lane.events);
        let entry = registry.entry().map_err(|_| LandError::NotSpawned {
            dir: lane.dir.display().to_string(),
        })?;
        let mut checks = LaneChecks::from_registry(
            &entry,
            repo,
            &lane.dir,
            &registry,
            FreshnessSettings::default(),
        );
        if let Some(cap) = options.timeout {
            checks.spec.timeout_secs = checks.spec.timeout_secs.min(cap.as_secs().max(1));
        }
        prepared.push(Prepared {
            name: entry.name.clone(),
            checks,
            lane: lane.clone(),
        });
    }
    let base = prepared[0].checks.base.clone();
    if let Some(other) = prepared.iter().find(|p| p.checks.base != base) {
        return Err(LandError::MixedBases {
            first: base,
            other: other.checks.base.clone(),
        });
    }
    let base_ref =
        local_branch_ref(repo, &base).ok_or(LandError::NotABranch { base: base.clone() })?;
    let checkout = base_checkout(repo, &base_ref)?;
    if let Some(checkout) = &checkout
        && !checkout.dirty.is_empty()
    {
        return Err(LandError::DirtyCheckout {
            base,
            path: checkout.path.display().to_string(),
            paths: checkout.dirty.join(", "),
        });
    }
    let base_before = repo.resolve(&base_ref)?;
    let mut verdicts = Vec::new();
    let mut candidates = Vec::new();
    match options.batch {
        Some(size) => {
            (verdicts, candidates) =
                batch::land_batched(repo, &base_ref, &prepared, options, size).await;
        }
        None => {
            for lane in &prepared {
                verdicts.push(land_one(repo, &base_ref, lane, options).await);
            }
        }
    }
    Ok(LandReport {
        base_after: repo.resolve(&base_ref)?,
        base_ref,
        base_before,
        checkout: checkout.map(|c| c.path),
        lanes: verdicts,
        candidates,
    })
}

fn left_out(
    lane: &str,
    events: Option<&EventLog>,
    failure: LandFailure,
    reason: String,
    base_sha: Option<String>,
    head: Option<String>,
    logs: Vec<String>,
) -> LaneVerdict {
    let next_action = match failure {
        LandFailure::Conflict => format!(
            "resolve the conflict in the lane (`clawpool merge-forward {lane}`, or a follow-up with `clawpool send {lane} TEXT`), then land again"
        ),
        LandFailure::Red | LandFailure::Hung => format!(
            "read the verification logs, fix the lane (`clawpool send {lane} TEXT`), then land again"
        ),
        LandFailure::Refused => format!("fix what is named, then `clawpool land {lane}` again"),
        LandFailure::BaseKeptMoving => {
            format!("`clawpool land {lane}` again when the base is quiet")
        }
    };
    let failed = LandFailed {
        failure,
        reason,
        base_sha,
        head,
        logs,
        next_action,
    };
    if let Some(events) = events {
        let _ = events.report(Payload::LandFailed(failed.clone()), None, None, None);
    }
    LaneVerdict::LeftOut {
        lane: lane.to_owned(),
        failed,
    }
}

/// A lane taken for a land run: its supervisor lock held (nobody may drive it while it is
/// merged and verified here), its state recorder, and its event log feeding that recorder.
struct OpenLane {
    _lock: SupervisorLock,
    recorder: StateRecorder,
    events: EventLog,
}

/// Takes `lane` for landing at `options.level`, or the verdict that leaves it out (refused:
/// no commands at the level, a supervisor driving it, its state or log unreadable).
fn open_lane(lane: &Prepared, options: LandOptions) -> Result<OpenLane, Box<LaneVerdict>> {
    let name = lane.name.as_str();
    let refused = |reason: String| {
        Box::new(left_out(
            name,
            None,
            LandFailure::Refused,
            reason,
            None,
            None,
            Vec::new(),
        ))
    };
    if lane
        .checks
        .spec
        .commands
        .get(&options.level)
        .is_none_or(Vec::is_empty)
    {
        return Err(refused(format!(
            "the lane has no verification commands at {}: nothing would prove its work green",
            options.level.as_str()
        )));
    }
    let record = lane
        .lane
        .events
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default();
    let lock = match SupervisorLock::hold(&record) {
        Ok(lock) => lock,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            return Err(refused(format!(
                "a supervisor drives the lane ({e}): stop it or let it finish"
            )));
        }
        Err(e) => return Err(refused(format!("taking the lane's supervisor lock: {e}"))),
    };
    let doc = match read_lane_record(&record, &lane.checks.dir) {
        Ok(doc) => doc,
        Err(e) => return Err(refused(format!("reading the lane's state: {e}"))),
    };
    let recorder = StateRecorder::new(doc, &record, Some(&lane.checks.dir));
    let on_state = recorder.clone();
    let events = match EventLog::open(name, &lane.lane.events) {
        Ok(log) => log.observe(Box::new(move |event| on_state.on_event(event))),
        Err(e) => {
            return Err(refused(format!(
                "opening the lane's event log: {}",
                e.source
            )));
        }
    };
    Ok(OpenLane {
        _lock: lock,
        recorder,
        events,
    })
}

async fn land_one(
    repo: &Repo,
    base_ref: &str,
    lane: &Prepared,
    options: LandOptions,
) -> LaneVerdict {
    let name = lane.name.as_str();
    let open = match open_lane(lane, options) {
        Ok(open) => open,
        Err(verdict) => return *verdict,
    };
    let recorder = &open.recorder;
    let events = &open.events;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let base_sha = match repo.resolve(base_ref) {
            Ok(sha) => sha,
            Err(e) => {
                return left_out(
                    name,
                    Some(events),
                    LandFailure::Refused,
                    e.to_string(),
                    None,
                    None,
                    Vec::new(),
                );
            }
        };
        let (reply, problem) = lane
            .checks
            .bring_base_in(events, recorder, Some(recorder.doc().lane_state()))
            .await;
        if let Some(reason) = problem {
            let (failure, head) = match reply {
                Ok(MergeOutcome::Conflict { head, .. }) => (LandFailure::Conflict, Some(head)),
                _ => (LandFailure::Refused, None),
            };
            return left_out(
                name,
                Some(events),
                failure,
                reason,
                Some(base_sha),
                head,
                Vec::new(),
            );
        }
        let verified = lane
            .checks
            .verify(
                options.level,
                events,
                recorder,
                Some(recorder.doc().lane_state()),
            )
            .await;
        let verification = &verified.verification;
        let logs: Vec<String> = verification
            .commands
            .iter()
            .map(|c| c.log.clone())
            .collect();
        let head = verification.head.clone();
        let failure = match verification.result {
            VerifyResult::Green => None,
            VerifyResult::Hung => Some(LandFailure::Hung),
            VerifyResult::Red | VerifyResult::StaleRed => Some(LandFailure::Red),
            VerifyResult::Blocked => Some(LandFailure::Refused),
        };
        if let Some(failure) = failure {
            let reason = verification.reason.clone().unwrap_or_else(|| {
                format!("verification at {} was not green", options.level.as_str())
            });
            return left_out(
                name,
                Some(events),
                failure,
                reason,
                Some(base_sha),
                head,
                logs,
            );
        }
        let Some(head) = head else {
            return left_out(
                name,
                Some(events),
                LandFailure::Refused,
                "the lane's HEAD could not be read after its verification".into(),
                Some(base_sha),
                None,
                logs,
            );
        };
        // The verified commit must carry the base it is to replace, or the move would drop
        // base commits.
        match is_ancestor(repo, &base_sha, &head) {
            Ok(true) => {}
            Ok(false) => {
                // Verified against an older base (the base moved during the merge): again.
                if attempts < options.attempts {
                    continue;
                }
                return left_out(
                    name,
                    Some(events),
                    LandFailure::BaseKeptMoving,
                    format!("the base moved {attempts} times while the lane was verified"),
                    Some(base_sha),
                    Some(head),
                    logs,
                );
            }
            Err(e) => {
                return left_out(
                    name,
                    Some(events),
                    LandFailure::Refused,
                    e.to_string(),
                    Some(base_sha),
                    Some(head),
                    logs,
                );
            }
        }
        if is_ancestor(repo, &head, &base_sha).unwrap_or(false) {
            return LaneVerdict::AlreadyOnBase {
                lane: name.to_owned(),
            };
        }
        let message = format!(
            "Land lane {name}\n\nVerified green at {} on {head}.",
            options.level.as_str()
        );
        let new_base = match landing_commit(repo, options.method, &base_sha, &head, &message) {
            Ok(commit) => commit,
            Err(e) => {
                return left_out(
                    name,
                    Some(events),
                    LandFailure::Refused,
                    e.to_string(),
                    Some(base_sha),
                    Some(head),
                    logs,
                );
            }
        };
        // The checkout is looked at again just before the move: a change made while the lane
        // was verified refuses it, so nothing of a person's is overwritten.
        let checkout = match base_checkout(repo, base_ref) {
            Ok(checkout) => checkout,
            Err(e) => {
                return left_out(
                    name,
                    Some(events),
                    LandFailure::Refused,
                    e.to_string(),
                    Some(base_sha),
                    Some(head),
                    logs,
                );
            }
        };
        if let Some(checkout) = &checkout
            && !checkout.dirty.is_empty()
        {
            let reason = format!(
                "the base is checked out in {} with uncommitted changes ({})",
                checkout.path.display(),
                checkout.dirty.join(", ")
            );
            return left_out(
                name,
                Some(events),
                LandFailure::Refused,
                reason,
                Some(base_sha),
                Some(head),
                logs,
            );
        }
        let reflog = format!("clawpool land: {name}");
        match move_base(repo, base_ref, &base_sha, &new_base, &reflog) {
            Ok(BaseMove::Moved) => {}
            Ok(BaseMove::MovedMeanwhile { now }) => {
                if attempts < options.attempts {
                    continue;
                }
                return left_out(
                    name,
                    Some(events),
                    LandFailure::BaseKeptMoving,
                    format!(
                        "the base moved to {now} while the lane was verified, {attempts} times"
                    ),
                    Some(base_sha),
                    Some(head),
                    logs,
                );
            }
            Err(e) => {
                return left_out(
                    name,
                    Some(events),
                    LandFailure::Refused,
                    e.to_string(),
                    Some(base_sha),
                    Some(head),
                    logs,
                );
            }
        }
        // The base moved; a checkout whose files could not follow is said, not hidden.
        let checkout_error = checkout.as_ref().and_then(|checkout| {
            bring_checkout_along(&checkout.path, &base_sha, &new_base)
                .err()
                .map(|e| format!("{}: {e}", checkout.path.display()))
        });
        let landed = Landed {
            base_ref: base_ref.to_owned(),
            old_base: base_sha,
            new_base: new_base.clone(),
            head: head.clone(),
            method: match options.method {
                LandMethod::FastForward => "fast_forward".into(),
                LandMethod::MergeCommit => "merge_commit".into(),
            },
            attempts,
        };
        let _ = events.report(Payload::Landed(landed), None, None, None);
        return LaneVerdict::Landed {
            lane: name.to_owned(),
            new_base,
            head,
            attempts,
            checkout_error,
            batch: None,
        };
    }
}
