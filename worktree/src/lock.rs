//! The per-repository lock that serialises worktree creation and removal.
//!
//! Two `git worktree add` running at once in one repository race on git's own administrative
//! files (`<common>/worktrees/`, `config.lock`, the ref locks), and one of them fails. The lock
//! is an OS file lock (`flock` on Unix) on `<common>/clawpool/worktree.lock`: it lives in the
//! common git dir, so every worktree of the repository sees the same file; it serialises
//! threads as well as processes, because each acquisition opens the file anew; and the OS
//! releases it when the holder exits, even on a crash, so a stale lock file is harmless.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::WorktreeError;

/// Holds the repository's worktree lock until dropped.
#[derive(Debug)]
pub(crate) struct RepoLock {
    /// Closing the file releases the lock; it is kept open only for that.
    _file: File,
}

/// The lock file of the repository whose common git dir is `common_dir`.
pub(crate) fn lock_path(common_dir: &Path) -> PathBuf {
    common_dir.join("clawpool").join("worktree.lock")
}

/// Blocks until this thread holds the repository's worktree lock.
///
/// Not re-entrant: a thread that already holds it and asks again waits for ever, so callers
/// inside the crate take it once, at the public entry point.
pub(crate) fn acquire(common_dir: &Path) -> Result<RepoLock, WorktreeError> {
    let path = lock_path(common_dir);
    let dir = path
        .parent()
        .expect("the lock path is <common>/clawpool/worktree.lock");
    fs::create_dir_all(dir).map_err(|source| WorktreeError::Lock {
        path: path.clone(),
        source,
    })?;
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
