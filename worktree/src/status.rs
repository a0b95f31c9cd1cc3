//! What a worktree has checked out and whether it has uncommitted work: read through libgit2,
//! never by running git, so asking is cheap enough to do on every state refresh.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use git2::{ErrorCode, Repository, RepositoryOpenFlags, Status, StatusOptions};
use serde::{Deserialize, Serialize};

use crate::graph::{CommitGraph, commit_graph};
use crate::{WorktreeError, git};

/// A worktree's checkout and cleanliness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeStatus {
    /// The branch checked out (without `refs/heads/`); `None` for a detached HEAD.
    pub branch: Option<String>,
    /// The HEAD commit, as a full hex sha.
    pub head: String,
    /// Whether any tracked file is modified (staged or not) or any untracked, non-ignored file
    /// exists: the same test `git worktree remove` applies before refusing.
    pub dirty: bool,
}

/// What a worktree's HEAD is: a branch, or a commit checked out directly (detached).
///
/// In JSON: `{"kind": "branch", "name": "lanes/a", "sha": "…"}` or
/// `{"kind": "detached", "sha": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HeadState {
    /// HEAD is a branch.
    Branch {
        /// The branch, without `refs/heads/`.
        name: String,
        /// Its tip, as a full hex sha.
        sha: String,
    },
    /// HEAD is a commit, not a branch (a checkout of a sha or tag, or the middle of a rebase
    /// or bisect).
    Detached {
        /// The commit, as a full hex sha.
        sha: String,
    },
}

impl HeadState {
    /// The commit checked out.
    pub fn sha(&self) -> &str {
        match self {
            HeadState::Branch { sha, .. } | HeadState::Detached { sha } => sha,
        }
    }
}

/// The commit a worktree (main or linked) has checked out, read without scanning its files:
/// cheap enough to ask every few seconds for hundreds of lanes.
pub fn worktree_head(path: &Path) -> Result<String, WorktreeError> {
    let repo = open_worktree(path)?;
    repo.refname_to_id("HEAD")
        .map(|id| id.to_string())
        .map_err(|err| WorktreeError::query("HEAD", path, &err))
}

/// The branch or detached commit the worktree (main or linked) whose top folder is `path` has
/// checked out, read without scanning its files.
///
/// Fails with [`WorktreeError::NotARepository`] when `path` is not the top of a worktree, and
/// [`WorktreeError::Query`] when HEAD has no commit yet.
pub fn head_state(path: &Path) -> Result<HeadState, WorktreeError> {
    head_state_of(&open_worktree(path)?, path)
}

/// [`head_state`] of an open worktree (`path` names it in errors).
pub(crate) fn head_state_of(repo: &Repository, path: &Path) -> Result<HeadState, WorktreeError> {
    let sha = repo
        .refname_to_id("HEAD")
        .map_err(|err| WorktreeError::query("HEAD", path, &err))?
        .to_string();
    Ok(match head_branch(repo) {
        Some(name) => HeadState::Branch { name, sha },
        None => HeadState::Detached { sha },
    })
}

/// Opens the worktree whose top folder is `path` (its own HEAD, index and git dir).
pub(crate) fn open_worktree(path: &Path) -> Result<Repository, WorktreeError> {
    Repository::open_ext(path, RepositoryOpenFlags::NO_SEARCH, &[] as &[&Path]).map_err(|err| {
        match err.code() {
            ErrorCode::NotFound => WorktreeError::NotARepository {
                path: PathBuf::from(path),
            },
            _ => WorktreeError::query("the worktree", path, &err),
        }
    })
}

/// The status of the worktree (main or linked) whose top folder is `path`.
///
/// Fails with [`WorktreeError::NotARepository`] when `path` is not the top of a worktree, and
/// [`WorktreeError::Query`] when HEAD has no commit yet.
pub fn worktree_status(path: &Path) -> Result<WorktreeStatus, WorktreeError> {
    let repo = open_worktree(path)?;
    let head = repo
        .refname_to_id("HEAD")
        .map_err(|err| WorktreeError::query("HEAD", path, &err))?;
    let dirty = !dirty_paths(&repo, path)?.is_empty();
    Ok(WorktreeStatus {
        branch: head_branch(&repo),
        head: head.to_string(),
        dirty,
    })
}

/// The paths (relative to the worktree's top, `/`-separated) that make a worktree dirty:
/// tracked files modified, staged or not, and untracked files that are not ignored. An
/// untracked folder is one entry ending in `/`: existence is all that matters here, and a
/// folder of build output would otherwise list thousands of files.
pub(crate) fn dirty_paths(repo: &Repository, path: &Path) -> Result<Vec<String>, WorktreeError> {
    let mut options = StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .include_ignored(false)
        .exclude_submodules(false);
    let statuses = repo
        .statuses(Some(&mut options))
        .map_err(|err| WorktreeError::query("the status", path, &err))?;
    Ok(statuses
        .iter()
        .filter(|entry| {
            let status = entry.status();
            status != Status::CURRENT && !status.contains(Status::IGNORED)
        })
        .map(|entry| String::from_utf8_lossy(entry.path_bytes()).into_owned())
        .collect())
}

/// The branch HEAD points to, when it points to one.
pub(crate) fn head_branch(repo: &Repository) -> Option<String> {
    let head = repo.find_reference("HEAD").ok()?;
    head.symbolic_target()
        .ok()??
        .strip_prefix("refs/heads/")
        .map(str::to_owned)
}

/// A commit named by its sha and subject: one the lane does not have from its base
/// ([`crate::Freshness::missing`]), or one new on the lane ([`NewCommits`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingCommit {
    /// Its full hex sha.
    pub sha: String,
    /// The first line of its message.
    pub subject: String,
}

/// The commits a worktree's HEAD gained over what is already known: see [`new_commits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCommits {
    /// The HEAD commit walked from, as a full hex sha.
    pub head: String,
    /// The newest `limit` new commits, oldest first.
    pub commits: Vec<MissingCommit>,
    /// How many older new commits were left out of `commits` to keep within `limit`.
    pub left_out: usize,
    /// The oldest commit left out, when any was.
    pub oldest_left_out: Option<String>,
}

/// The commits reachable from the HEAD of the worktree whose top folder is `path` and from
/// none of `known` (shas or revisions; any that does not resolve, e.g. a commit since
/// garbage-collected, is skipped), oldest first, never a parent after its child.
///
/// At most the newest `limit` are returned with their subjects; older ones are only counted,
/// so a branch that suddenly gains thousands of commits (a history imported at once) costs one
/// walk of their ids, not thousands of commit reads.
pub fn new_commits(path: &Path, known: &[&str], limit: usize) -> Result<NewCommits, WorktreeError> {
    let repo = open_worktree(path)?;
    let head = repo
        .refname_to_id("HEAD")
        .map_err(|err| WorktreeError::query("HEAD", path, &err))?;
    let walked = (|| -> Result<NewCommits, git2::Error> {
        let mut walk = repo.revwalk()?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::TIME)?;
        walk.push(head)?;
        for rev in known {
            if let Ok(commit) = repo.revparse_single(rev).and_then(|o| o.peel_to_commit()) {
                walk.hide(commit.id())?;
            }
        }
        // Newest first: the first `limit` are the ones reported.
        let mut newest = Vec::new();
        let mut left_out = 0;
        let mut oldest_left_out = None;
        for oid in walk {
            let oid = oid?;
            if newest.len() < limit {
                newest.push(oid);
            } else {
                left_out += 1;
                oldest_left_out = Some(oid);
            }
        }
        let commits = newest
            .into_iter()
            .rev()
            .map(|oid| {
                let commit = repo.find_commit(oid)?;
                Ok(MissingCommit {
                    sha: oid.to_string(),
                    subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                        .into_owned(),
                })
            })
            .collect::<Result<_, git2::Error>>()?;
        Ok(NewCommits {
            head: head.to_string(),
            commits,
            left_out,
            oldest_left_out: oldest_left_out.map(|o| o.to_string()),
        })
    })();
    walked.map_err(|err| WorktreeError::query("the new commits", path, &err))
}

/// What a finished lane's work came to: its own commits and whether it left uncommitted work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnWork {
    /// How many commits HEAD has that none of the hidden revisions has, merge commits left
    /// out: what `git rev-list --count --no-merges HEAD --not <hidden>` prints.
    pub commits: u64,
    /// Whether the worktree is dirty, as [`WorktreeStatus::dirty`] says.
    pub dirty: bool,
}

/// The [`OwnWork`] of the worktree whose top folder is `path` against `hidden` (revisions,
/// resolved in the worktree as git resolves them there), from one opening of the worktree. A
/// revision that does not resolve is an error, as it is for git.
///
/// The commits are counted by libgit2, without a process, except in a repository whose
/// commit-graph libgit2 cannot read, where git counts ([`commit_graph`]): the walk from a
/// hidden base that has moved far ahead reads every commit on the way, which git does from the
/// graph.
pub fn own_work(path: &Path, hidden: &[&str]) -> Result<OwnWork, WorktreeError> {
    let repo = open_worktree(path)?;
    let dirty = !dirty_paths(&repo, path)?.is_empty();
    if commit_graph(repo.commondir()) == CommitGraph::Unreadable {
        let args: Vec<&OsStr> = ["rev-list", "--count", "--no-merges", "HEAD", "--not"]
            .iter()
            .chain(hidden)
            .map(OsStr::new)
            .collect();
        let out = git::read(path, &args, None)?.unwrap_or_default();
        let commits = out
            .trim()
            .parse()
            .map_err(|_| git::unexpected("rev-list --count --no-merges", &out))?;
        return Ok(OwnWork { commits, dirty });
    }
    let counted = (|| -> Result<u64, git2::Error> {
        let mut walk = repo.revwalk()?;
        walk.push_head()?;
        for rev in hidden {
            walk.hide(repo.revparse_single(rev)?.peel_to_commit()?.id())?;
        }
        let mut own = 0;
        for oid in walk {
            if repo.find_commit(oid?)?.parent_count() <= 1 {
                own += 1;
            }
        }
        Ok(own)
    })();
    let commits =
        counted.map_err(|err| WorktreeError::query("the branch's own commits", path, &err))?;
    Ok(OwnWork { commits, dirty })
}
