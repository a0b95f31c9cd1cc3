//! Branch freshness: how a lane's HEAD stands against its base — commits ahead and behind,
//! the merge base, and which base commits the lane lacks — as one [`Freshness`] record, ready
//! to be written into the lane's state file.
//!
//! Everything is read through libgit2 (no process) except the optional, throttled fetch of the
//! base's remote. What costs is walking the history between the lane and its base: a few
//! milliseconds for a lane 1,000 commits behind, a few hundred for one 40,000 behind without a
//! commit-graph libgit2 can read — which is why a check writes one when the repository has none
//! (`crate::ensure_commit_graph`; see `docs/performance.md`, "Freshness"), and why, when the
//! repository already has one libgit2 cannot read (git's default generation numbers v2, after
//! a `git gc`), the walk goes through the git CLI, which reads it (`crate::commit_graph`).
//! Commits never change, so the walk is remembered per
//! worktree and reused while neither the lane's HEAD nor the base commit moves; a repeated
//! check costs well under a millisecond, which is what makes checking hundreds of lanes every
//! few seconds cheap. A check never fails and never guesses: whatever goes wrong (an unknown
//! base, an unreadable repository, a failed fetch, a paused rebase) makes the state `unknown`
//! with the reason, never `fresh`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use git2::{ErrorCode, Oid, Repository, RepositoryOpenFlags, Sort};
use serde::{Deserialize, Serialize};

use crate::fetch::{self, FetchOptions, FetchOutcome};
use crate::graph::CommitGraph;
use crate::operation::{self, GitOperation};
use crate::status::{HeadState, MissingCommit};
use crate::{WorktreeError, base, git, graph, status};

/// The verdict on a lane's freshness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreshnessState {
    /// The lane has every commit of its base (`behind == 0`); it may have its own on top.
    Fresh,
    /// The base has commits the lane lacks (`behind > 0`) and the two share history (a merge
    /// base exists), so merging the base forward can bring them in. Whether the lane has
    /// commits of its own (`ahead`) does not matter: a lane at work on an old base is the
    /// normal stale case.
    Stale,
    /// The lane and its base share no history at all (no merge base): merging would join two
    /// unrelated histories, which is refused.
    Diverged,
    /// No verdict: `error` says why (git failed, the base does not exist, the fetch failed, or
    /// an operation is in progress in the worktree, see `operation`).
    Unknown,
    /// The base moved backwards past commits the lane has: commits that were on the base when
    /// it was last known (the lane's base at creation, or at its last check) are no longer on
    /// it, and the lane's HEAD still has them (`dropped` counts them). Merging the lane would
    /// bring them back, so it is never merge-ready; someone has to decide (rebase the lane
    /// onto the base as it is, or restore the base).
    BaseRewound,
}

impl FreshnessState {
    /// Every verdict.
    pub const ALL: [FreshnessState; 5] = [
        FreshnessState::Fresh,
        FreshnessState::Stale,
        FreshnessState::Diverged,
        FreshnessState::Unknown,
        FreshnessState::BaseRewound,
    ];

    /// The wire name (`fresh`, `stale`, `diverged`, `unknown`, `base_rewound`).
    pub fn as_str(self) -> &'static str {
        match self {
            FreshnessState::Fresh => "fresh",
            FreshnessState::Stale => "stale",
            FreshnessState::Diverged => "diverged",
            FreshnessState::Unknown => "unknown",
            FreshnessState::BaseRewound => "base_rewound",
        }
    }
}

impl std::fmt::Display for FreshnessState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A lane's freshness against its base, as checked at `checked_at`.
///
/// Counts and shas are `None` when they could not be worked out. With state `unknown` they may
/// still be present: after a failed fetch they are against the base as last fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Freshness {
    /// The verdict.
    pub state: FreshnessState,
    /// Commits on the lane's HEAD that are not on the base.
    pub ahead: Option<u32>,
    /// Commits on the base that are not on the lane's HEAD (all of them, however many
    /// `missing` lists).
    pub behind: Option<u32>,
    /// The ref actually compared: `origin/main` when the remote-tracking branch was used,
    /// otherwise the base as given.
    pub base_ref: String,
    /// The commit `base_ref` pointed to.
    pub base_sha: Option<String>,
    /// The lane's HEAD commit that was compared (on its branch or detached).
    #[serde(default)]
    pub head: Option<String>,
    /// The best common ancestor of the lane's HEAD and the base; `None` when they share no
    /// history (or it could not be worked out).
    pub merge_base: Option<String>,
    /// The newest base commits the lane lacks, newest first, at most
    /// [`FreshnessOptions::max_missing`]; `behind` is the total.
    #[serde(default)]
    pub missing: Vec<MissingCommit>,
    /// When the check was made, in seconds since the Unix epoch.
    pub checked_at: u64,
    /// The operation in progress in the worktree that prevented a verdict, if that is why the
    /// state is `unknown`.
    #[serde(default)]
    pub operation: Option<GitOperation>,
    /// Why the state is `unknown`; `None` otherwise.
    #[serde(default)]
    pub error: Option<String>,
    /// With state `base_rewound`: how many commits the lane's HEAD has that were on its base
    /// once and are no longer (what merging the lane would bring back); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u32>,
}

/// How [`check_freshness`] works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreshnessOptions {
    /// The most commits listed in [`Freshness::missing`].
    pub max_missing: usize,
    /// Fetch the base's remote first, throttled (see [`crate::fetch_if_due`]); `None` never
    /// fetches and compares the remote-tracking refs as they are.
    pub fetch: Option<FetchOptions>,
    /// Write a commit-graph libgit2 can read when the repository has none (once per
    /// repository per process; see [`crate::ensure_commit_graph`]): what keeps a check of a
    /// lane far behind its base well under 100 ms. A failed write is ignored (the walk is only
    /// slower).
    pub commit_graph: bool,
}

impl Default for FreshnessOptions {
    /// Up to 50 missing commits listed; the base's remote fetched at most every 5 minutes; a
    /// commit-graph written when the repository has none.
    fn default() -> Self {
        FreshnessOptions {
            max_missing: 50,
            fetch: Some(FetchOptions::default()),
            commit_graph: true,
        }
    }
}

/// How the HEAD of the worktree whose top folder is `worktree` stands against `base` (resolved
/// as [`crate::resolve_base`] does: the remote-tracking branch when there is one).
///
/// With `options.fetch`, the base's remote is fetched first if due; a fetch that fails, or
/// failed less than the interval ago, makes the state `unknown` with the fetch's error, the
/// counts then being against the base as last fetched.
///
/// While a git operation is in progress in the worktree (see [`crate::git_operation`]) there
/// is no verdict: the state is `unknown`, with the operation in `operation`. A detached HEAD
/// is compared like any other.
///
/// The walk through the history (counts, merge base, missing commits) is reused from this
/// process's previous check of the same `worktree` when the HEAD and base commits are the same
/// as then; everything else (operation, base, fetch) is looked at every time.
///
/// Never fails and never panics: any error becomes state `unknown` with its message.
pub fn check_freshness(worktree: &Path, base: &str, options: &FreshnessOptions) -> Freshness {
    let lane = status::open_worktree(worktree);
    freshness_in(lane.as_ref(), worktree, base, &[], options)
}

/// A lane's branch as one look sees it: what [`crate::head_state`], [`crate::git_operation`]
/// and [`check_freshness`] say, in that order, from one opening of the worktree (each opening
/// reads git's configuration files, which a supervisor checking hundreds of lanes notices).
#[derive(Debug, Clone)]
pub struct BranchState {
    /// What the worktree has checked out (`None` when it cannot be read).
    pub head: Option<HeadState>,
    /// The git operation in progress in it, if any (`None` too when it cannot be read).
    pub operation: Option<GitOperation>,
    /// How it stands against its base.
    pub freshness: Freshness,
}

/// [`BranchState`] of the worktree whose top folder is `worktree` against `base`, with
/// `options` for the freshness check. `known_bases` are commits the base is known to have
/// pointed to (the lane's base when it was made, the base at its last check): one the base no
/// longer has, and the lane's HEAD does, makes the state `base_rewound`. Never fails: what
/// cannot be read is `None`, or for the freshness state `unknown` with its error.
pub fn check_branch_state(
    worktree: &Path,
    base: &str,
    known_bases: &[&str],
    options: &FreshnessOptions,
) -> BranchState {
    let lane = status::open_worktree(worktree);
    let opened = lane.as_ref().ok();
    BranchState {
        head: opened.and_then(|repo| status::head_state_of(repo, worktree).ok()),
        operation: opened.and_then(operation::operation_of),
        freshness: freshness_in(lane.as_ref(), worktree, base, known_bases, options),
    }
}

/// [`check_freshness`] of a worktree already opened (or the error opening it).
pub(crate) fn freshness_in(
    lane: Result<&Repository, &WorktreeError>,
    worktree: &Path,
    base: &str,
    known_bases: &[&str],
    options: &FreshnessOptions,
) -> Freshness {
    let mut freshness = Freshness {
        state: FreshnessState::Unknown,
        ahead: None,
        behind: None,
        base_ref: base.to_owned(),
        base_sha: None,
        head: None,
        merge_base: None,
        missing: Vec::new(),
        checked_at: fetch::now_secs(),
        operation: None,
        error: None,
        dropped: None,
    };
    let compared = match lane {
        Ok(lane) => compare(lane, worktree, base, known_bases, options, &mut freshness)
            .map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    };
    if let Err(err) = compared {
        freshness.state = FreshnessState::Unknown;
        freshness.error = Some(err);
    }
    freshness
}

/// Fills `out` in; an error leaves what was found so far.
fn compare(
    lane: &Repository,
    worktree: &Path,
    base: &str,
    known_bases: &[&str],
    options: &FreshnessOptions,
    out: &mut Freshness,
) -> Result<(), WorktreeError> {
    if let Some(operation) = operation::operation_of(lane) {
        out.operation = Some(operation);
        out.error = Some(format!(
            "a {} is in progress in {}; no verdict until it is finished or aborted",
            operation_name(operation),
            worktree.display()
        ));
        return Ok(());
    }
    let head = lane
        .refname_to_id("HEAD")
        .map_err(|err| WorktreeError::query("HEAD", worktree, &err))?;
    out.head = Some(head.to_string());

    let mut fetch_problem = None;
    if let Some(fetch) = &options.fetch
        && let Some(tracking) = base::tracking(lane, base)
    {
        fetch_problem = match fetch::fetch_if_due_in(lane, worktree, &tracking.remote, fetch) {
            Ok(FetchOutcome::Skipped {
                last_error: Some(error),
                ..
            }) => Some(format!(
                "the last fetch of {} failed: {error}",
                tracking.remote
            )),
            Ok(_) => None,
            Err(err) => Some(format!("fetching {}: {err}", tracking.remote)),
        };
    }

    // Before the repository is opened: libgit2 looks for the graph when it opens the object
    // database, so a graph written later would not be used by this check.
    if options.commit_graph {
        let _ = graph::ensure_commit_graph(lane.commondir(), worktree);
    }
    // The common dir's view, opened after the fetch: base revisions such as `HEAD~1` mean
    // there what they mean to `Repo::resolve` (the main worktree's HEAD), as when the lane was
    // created from them.
    let git = Repository::open_ext(
        lane.commondir(),
        RepositoryOpenFlags::NO_SEARCH,
        &[] as &[&Path],
    )
    .map_err(|err| WorktreeError::query("the repository", lane.commondir(), &err))?;
    let base_ref = base::resolve_in(&git, base, worktree)?;
    out.base_ref = base_ref.name;
    out.base_sha = Some(base_ref.sha.clone());
    let base_oid = Oid::from_str(&base_ref.sha)
        .map_err(|err| WorktreeError::query("the base", worktree, &err))?;

    let walked = match remembered(worktree, head, base_oid, options.max_missing) {
        Some(walked) => walked,
        None => {
            // Both give the same answers; git is only faster when it can use a graph libgit2
            // cannot (about 27 ms instead of 185 for a lane 40,000 behind), and costs one to
            // three processes (about 2 ms) per walk otherwise.
            let walked = match graph::commit_graph(lane.commondir()) {
                CommitGraph::Unreadable => {
                    walk_with_git(worktree, head, base_oid, options.max_missing)?
                }
                CommitGraph::None | CommitGraph::Readable => {
                    walk(&git, worktree, head, base_oid, options.max_missing)?
                }
            };
            remember(worktree, &walked);
            walked
        }
    };
    out.state = match (walked.behind, &walked.merge_base) {
        (0, _) => FreshnessState::Fresh,
        (_, Some(_)) => FreshnessState::Stale,
        (_, None) => FreshnessState::Diverged,
    };
    out.ahead = Some(walked.ahead);
    out.behind = Some(walked.behind);
    out.merge_base = walked.merge_base;
    out.missing = walked.missing;
    if out.state != FreshnessState::Diverged
        && let Some(dropped) = dropped_from_base(&git, head, base_oid, known_bases)
            .map_err(|err| WorktreeError::query("the base's history", worktree, &err))?
    {
        out.state = FreshnessState::BaseRewound;
        out.dropped = Some(dropped);
    }
    if let Some(problem) = fetch_problem {
        out.state = FreshnessState::Unknown;
        out.error = Some(problem);
    }
    Ok(())
}

/// How many commits `head` would bring back to `base`: of the commits `base` was once known to
/// point to (`known`, hex shas; ones that do not parse or are not in the repository are
/// skipped), each that `base` no longer has and `head` does counts the commits it has that
/// `base` has not; the most of any. `None` when there are none: the base only moved forward.
fn dropped_from_base(
    git: &Repository,
    head: Oid,
    base: Oid,
    known: &[&str],
) -> Result<Option<u32>, git2::Error> {
    let mut most = None;
    for known in known {
        let Ok(known) = Oid::from_str(known) else {
            continue;
        };
        if known == base || git.find_commit(known).is_err() {
            continue;
        }
        let on_base = git.graph_descendant_of(base, known)?;
        let in_head = known == head || git.graph_descendant_of(head, known)?;
        if on_base || !in_head {
            continue;
        }
        let mut walk = git.revwalk()?;
        walk.push(known)?;
        walk.hide(base)?;
        let count = saturate(walk.count());
        most = Some(most.map_or(count, |m: u32| m.max(count)));
    }
    Ok(most.filter(|n| *n > 0))
}

/// What walking the history between a lane's HEAD and its base found.
#[derive(Debug, Clone)]
struct Walked {
    head: Oid,
    base: Oid,
    /// The limit `missing` was listed with.
    max_missing: usize,
    ahead: u32,
    behind: u32,
    merge_base: Option<String>,
    missing: Vec<MissingCommit>,
}

/// The last successful walk of each worktree, by the path it was checked as. One entry per
/// worktree, replaced when its HEAD or base moves, so it grows only with the number of lanes.
static LAST_WALKS: Mutex<BTreeMap<PathBuf, Walked>> = Mutex::new(BTreeMap::new());

/// More worktrees than this remembered (a long-lived process that has seen many lanes come
/// and go) and the memory is cleared: the cost is one walk per lane.
const MAX_REMEMBERED: usize = 4096;

/// The walk remembered for `worktree`, if it was made for the same commits and limit.
fn remembered(worktree: &Path, head: Oid, base: Oid, max_missing: usize) -> Option<Walked> {
    // A panic elsewhere while holding the lock leaves whole entries behind: still usable.
    let walks = LAST_WALKS.lock().unwrap_or_else(PoisonError::into_inner);
    walks
        .get(worktree)
        .filter(|w| w.head == head && w.base == base && w.max_missing == max_missing)
        .cloned()
}

fn remember(worktree: &Path, walked: &Walked) {
    let mut walks = LAST_WALKS.lock().unwrap_or_else(PoisonError::into_inner);
    if walks.len() >= MAX_REMEMBERED && !walks.contains_key(worktree) {
        walks.clear();
    }
    walks.insert(worktree.to_path_buf(), walked.clone());
}

/// Counts, merge base and missing commits of `head` against `base`.
fn walk(
    git: &Repository,
    worktree: &Path,
    head: Oid,
    base: Oid,
    max_missing: usize,
) -> Result<Walked, WorktreeError> {
    let (ahead, behind) = git
        .graph_ahead_behind(head, base)
        .map_err(|err| WorktreeError::query("ahead/behind counts", worktree, &err))?;
    // When one side has nothing the other lacks, it is the merge base: no second walk.
    let merge_base = match (ahead, behind) {
        (_, 0) => Some(base.to_string()),
        (0, _) => Some(head.to_string()),
        _ => match git.merge_base(head, base) {
            Ok(oid) => Some(oid.to_string()),
            Err(err) if err.code() == ErrorCode::NotFound => None,
            Err(err) => return Err(WorktreeError::query("the merge base", worktree, &err)),
        },
    };
    let missing = if behind > 0 && max_missing > 0 {
        missing(git, head, base, max_missing)
            .map_err(|err| WorktreeError::query("the missing commits", worktree, &err))?
    } else {
        Vec::new()
    };
    Ok(Walked {
        head,
        base,
        max_missing,
        ahead: saturate(ahead),
        behind: saturate(behind),
        merge_base,
        missing,
    })
}

/// [`walk`] through the git CLI, run in the lane's `worktree`, on the commits already
/// resolved (so the three commands see the same two commits even if a ref moves meanwhile):
/// `git rev-list --left-right --count`, `git merge-base` when neither side contains the other,
/// and `git log --date-order -n <max_missing>` for the missing commits.
fn walk_with_git(
    worktree: &Path,
    head: Oid,
    base: Oid,
    max_missing: usize,
) -> Result<Walked, WorktreeError> {
    let run = |args: &[&str], absent: Option<i32>| {
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        git::read(worktree, &args, absent)
    };
    let (head_hex, base_hex) = (head.to_string(), base.to_string());
    let symmetric = format!("{head_hex}...{base_hex}");
    let counts =
        run(&["rev-list", "--left-right", "--count", &symmetric], None)?.unwrap_or_default();
    let (ahead, behind) = counts
        .trim()
        .split_once('\t')
        .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)))
        .ok_or_else(|| git::unexpected("rev-list --left-right --count", &counts))?;
    let merge_base = match (ahead, behind) {
        (_, 0) => Some(base_hex.clone()),
        (0, _) => Some(head_hex.clone()),
        // Exit status 1 is git's "no common ancestor" (its errors exit with 128).
        _ => match run(&["merge-base", &head_hex, &base_hex], Some(1))? {
            None => None,
            Some(out) => {
                let sha = out.trim();
                if Oid::from_str(sha).is_err() {
                    return Err(git::unexpected("merge-base", &out));
                }
                Some(sha.to_owned())
            }
        },
    };
    let missing = if behind > 0 && max_missing > 0 {
        // `%s` is the first paragraph joined into one line, as libgit2's summary; output
        // re-encoded to UTF-8 whatever `i18n.logOutputEncoding` says, and no signature lines
        // even with `log.showSignature`, so that nothing but these records is printed.
        let out = run(
            &[
                "log",
                "--date-order",
                "--no-show-signature",
                "--encoding=UTF-8",
                "--format=%H%x00%s",
                &format!("--max-count={max_missing}"),
                &format!("{head_hex}..{base_hex}"),
            ],
            None,
        )?
        .unwrap_or_default();
        out.lines()
            .map(|line| {
                let (sha, subject) = line
                    .split_once('\0')
                    .ok_or_else(|| git::unexpected("log", &out))?;
                Ok(MissingCommit {
                    sha: sha.to_owned(),
                    subject: subject.to_owned(),
                })
            })
            .collect::<Result<_, WorktreeError>>()?
    } else {
        Vec::new()
    };
    Ok(Walked {
        head,
        base,
        max_missing,
        ahead: saturate(ahead),
        behind: saturate(behind),
        merge_base,
        missing,
    })
}

/// The newest `limit` commits reachable from `base` and not from `head`, newest first, as
/// `git log --date-order head..base` lists them: by commit date, but never a parent before its
/// children (commits made within one second, or with a skewed clock, would otherwise come out
/// in any order).
fn missing(
    git: &Repository,
    head: Oid,
    base: Oid,
    limit: usize,
) -> Result<Vec<MissingCommit>, git2::Error> {
    let mut walk = git.revwalk()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)?;
    walk.push(base)?;
    walk.hide(head)?;
    walk.take(limit)
        .map(|oid| {
            let commit = git.find_commit(oid?)?;
            Ok(MissingCommit {
                sha: commit.id().to_string(),
                subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                    .into_owned(),
            })
        })
        .collect()
}

/// How an operation is named in messages.
fn operation_name(operation: GitOperation) -> &'static str {
    use crate::GitOperationKind as K;
    match operation.kind {
        K::Rebase => "rebase",
        K::Am => "git am",
        K::Merge => "merge",
        K::CherryPick => "cherry-pick",
        K::Revert => "revert",
        K::Bisect => "bisect",
    }
}

/// A count as stored (`u32`): more than four billion commits is as many as can be told.
fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
