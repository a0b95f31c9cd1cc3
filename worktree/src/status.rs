//! What a worktree has checked out and whether it has uncommitted work: read through libgit2,
//! never by running git, so asking is cheap enough to do on every state refresh.

use std::path::{Path, PathBuf};

use git2::{ErrorCode, Repository, RepositoryOpenFlags, Status, StatusOptions};

use crate::WorktreeError;

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

/// The commit a worktree (main or linked) has checked out, read without scanning its files:
/// cheap enough to ask every few seconds for hundreds of lanes.
pub fn worktree_head(path: &Path) -> Result<String, WorktreeError> {
    let repo = open_worktree(path)?;
    repo.refname_to_id("HEAD")
        .map(|id| id.to_string())
        .map_err(|err| WorktreeError::query("HEAD", path, &err))
}

fn open_worktree(path: &Path) -> Result<Repository, WorktreeError> {
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
    let mut options = StatusOptions::new();
    // Untracked folders are reported as one entry: existence is all that matters here.
    options
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .include_ignored(false)
        .exclude_submodules(false);
    let statuses = repo
        .statuses(Some(&mut options))
        .map_err(|err| WorktreeError::query("the status", path, &err))?;
    let dirty = statuses.iter().any(|entry| {
        let status = entry.status();
        status != Status::CURRENT && !status.contains(Status::IGNORED)
    });
    Ok(WorktreeStatus {
        branch: head_branch(&repo),
        head: head.to_string(),
        dirty,
    })
}

/// The branch HEAD points to, when it points to one.
pub(crate) fn head_branch(repo: &Repository) -> Option<String> {
    let head = repo.find_reference("HEAD").ok()?;
    head.symbolic_target()
        .ok()??
        .strip_prefix("refs/heads/")
        .map(str::to_owned)
}
