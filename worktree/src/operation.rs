//! Paused git operations in a worktree: a rebase, `git am`, merge, cherry-pick or revert that
//! stopped part-way, or a bisect session.
//!
//! Each is read from the files git keeps in the worktree's *own* git dir (for a linked
//! worktree `<common>/worktrees/<name>/`, not the common dir), so one lane's paused rebase is
//! never reported for the main worktree or another lane. While one is in progress the
//! worktree's HEAD and index are mid-change: no freshness verdict is given and nothing is
//! merged into it.

use std::fs;
use std::path::Path;

use git2::{Repository, RepositoryState};
use serde::{Deserialize, Serialize};

use crate::{WorktreeError, status};

/// Which operation is in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GitOperationKind {
    /// `git rebase` (any backend, interactive or not): `rebase-merge/` or `rebase-apply/`.
    Rebase,
    /// `git am`: `rebase-apply/` with its `applying` marker. Reported separately because it is
    /// finished with `git am --continue`/`--abort`, not `git rebase …`.
    Am,
    /// `git merge` (or `git pull`): `MERGE_HEAD`.
    Merge,
    /// `git cherry-pick`: `CHERRY_PICK_HEAD`, or a multi-commit sequence's `sequencer/todo`
    /// between two of its commits.
    CherryPick,
    /// `git revert`: `REVERT_HEAD`, or a multi-commit sequence's `sequencer/todo`.
    Revert,
    /// `git bisect`: `BISECT_LOG`.
    Bisect,
}

/// An operation in progress in a worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GitOperation {
    /// Which one.
    pub kind: GitOperationKind,
    /// Whether git stopped in the middle of changing the branch and waits for someone to
    /// finish it (`--continue`, `--skip`, a commit) or `--abort` it: true for every kind but
    /// bisect. A bisect session leaves each step a complete checkout and ends with
    /// `git bisect reset`, so it is in progress but not paused.
    pub paused: bool,
}

/// The operation in progress in the worktree whose top folder is `worktree`, if any.
///
/// Read from that worktree's own git dir only. Fails with [`WorktreeError::NotARepository`]
/// when `worktree` is not the top of a worktree.
pub fn git_operation(worktree: &Path) -> Result<Option<GitOperation>, WorktreeError> {
    Ok(operation_of(&status::open_worktree(worktree)?))
}

/// [`git_operation`] of an open worktree.
pub(crate) fn operation_of(repo: &Repository) -> Option<GitOperation> {
    // libgit2 reads the same files git's own `status` does, from `repo.path()`, which is the
    // worktree's own git dir, in git's order of precedence: a merge stopped inside a rebase is
    // the rebase (that is what has to be continued or aborted).
    let kind = match repo.state() {
        RepositoryState::Rebase
        | RepositoryState::RebaseInteractive
        | RepositoryState::RebaseMerge
        | RepositoryState::ApplyMailboxOrRebase => GitOperationKind::Rebase,
        RepositoryState::ApplyMailbox => GitOperationKind::Am,
        RepositoryState::Merge => GitOperationKind::Merge,
        RepositoryState::CherryPick | RepositoryState::CherryPickSequence => {
            GitOperationKind::CherryPick
        }
        RepositoryState::Revert | RepositoryState::RevertSequence => GitOperationKind::Revert,
        RepositoryState::Bisect => GitOperationKind::Bisect,
        RepositoryState::Clean => sequence_between_commits(repo)?,
    };
    Some(GitOperation {
        kind,
        paused: kind != GitOperationKind::Bisect,
    })
}

/// A multi-commit cherry-pick or revert stopped on a conflict, resolved and committed by hand,
/// has no `CHERRY_PICK_HEAD`/`REVERT_HEAD` any more but is still in progress until
/// `--continue` (libgit2 does not see it; git's `status` does): its `sequencer/todo` says which
/// of the two it is.
fn sequence_between_commits(repo: &Repository) -> Option<GitOperationKind> {
    let todo = fs::read_to_string(repo.path().join("sequencer").join("todo")).ok()?;
    let first = todo
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .and_then(|line| line.split_whitespace().next());
    Some(match first {
        Some("revert") => GitOperationKind::Revert,
        _ => GitOperationKind::CherryPick,
    })
}
