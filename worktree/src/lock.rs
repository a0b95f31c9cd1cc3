//! The per-repository locks: one that serialises worktree creation and removal, one that
//! serialises fetches.
//!
//! Two `git worktree add` running at once in one repository race on git's own administrative
//! files (`<common>/worktrees/`, `config.lock`, the ref locks), and one of them fails; two
//! fetches of one remote at once do the same work twice and race on the remote-tracking refs.
//! Each lock is an OS file lock (`flock` on Unix) on a file in `<common>/clawpool/`: it lives
//! in the common git dir, so every worktree of the repository sees the same file; it
//! serialises threads as well as processes, because each acquisition opens the file anew; and
//! the OS releases it when the holder exits, even on a crash, so a stale lock file is harmless.
//! The two are separate files so that a slow fetch never holds up the creation of a lane.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::WorktreeError;

/// Holds one of the repository's locks until dropped.
#[derive(Debug)]
pub(crate) struct RepoLock {
    /// Closing the file releases the lock; it is kept open only for that.
    _file: File,
}

/// The worktree lock file of the repository whose common git dir is `common_dir`.
pub(crate) fn lock_path(common_dir: &Path) -> PathBuf {
    crate::layout::StateDir::of(common_dir).worktree_lock()
}

/// The fetch lock file of the repository whose common git dir is `common_dir`.
pub(crate) fn fetch_lock_path(common_dir: &Path) -> PathBuf {
    crate::layout::StateDir::of(common_dir).fetch_lock()
}

/// Blocks until this thread holds the repository's worktree lock.
///
/// Not re-entrant: a thread that already holds it and asks again waits for ever, so callers
/// inside the crate take it once, at the public entry point.
pub(crate) fn acquire(common_dir: &Path) -> Result<RepoLock, WorktreeError> {
    acquire_file(lock_path(common_dir))
}

/// Blocks until this thread holds the repository's fetch lock. Not re-entrant either.
pub(crate) fn acquire_fetch(common_dir: &Path) -> Result<RepoLock, WorktreeError> {
    acquire_file(fetch_lock_path(common_dir))
}

/// Locks `path` (`<common>/clawpool/<name>.lock`), creating it and its folder if needed.
fn acquire_file(path: PathBuf) -> Result<RepoLock, WorktreeError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|source| WorktreeError::Lock {
            path: path.clone(),
            source,
        })?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| WorktreeError::Lock {
            path: path.clone(),
            source,
        })?;
    file.lock()
        .map_err(|source| WorktreeError::Lock { path, source })?;
    Ok(RepoLock { _file: file })
}
