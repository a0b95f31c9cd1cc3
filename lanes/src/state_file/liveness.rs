//! Whether the supervisor that owns a lane is alive, at no cost while nothing happens: for the
//! lane's whole life it holds an exclusive lock on `supervisor.lock` in the lane's record
//! folder (its registry folder, outside the worktree the agent writes in:
//! [`clawpool_worktree::layout`]), which the operating system releases when the process ends,
//! however it ends (SIGKILL included). `clawpool spawn` takes the same lock before it makes the
//! lane's worktree and hands it to the lane's driver, so a lane being prepared is held too.
//! A reader that can take the lock knows nobody prepares or drives the lane; one that cannot
//! knows somebody does. No file is rewritten to say so.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The lock file of the lane whose record folder is `record`.
pub fn supervisor_lock_path(record: &Path) -> PathBuf {
    clawpool_worktree::layout::lane_lock(record)
}

/// What a reader can tell about a lane's supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Its lock is held: the supervisor is running.
    Alive,
    /// Its lock is free: the supervisor ended.
    Gone,
    /// No lock file (a lane written by a clawpool from before the lock, or a folder that
    /// is gone) or one that cannot be probed: the heartbeat's age decides.
    Unknown,
}

/// The lock a supervisor holds for a lane's life; dropping it releases the lane.
#[derive(Debug)]
pub struct SupervisorLock {
    _file: File,
}

impl SupervisorLock {
    /// Takes the lane whose record folder is `record` for this process. Refused while another
    /// live process holds it: two supervisors must never drive one lane, and `clawpool gc`
    /// never removes a lane somebody holds.
    pub fn hold(record: &Path) -> io::Result<SupervisorLock> {
        let path = supervisor_lock_path(record);
        // A lock taken on a file that `gc` unlinked (with the lane's registry folder) between
        // our open and our lock would guard nothing: take it again on the file now there.
        for _ in 0..8 {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!(
                            "{} is held: another clawpool prepares or drives this lane",
                            path.display()
                        ),
                    ));
                }
                Err(TryLockError::Error(err)) => return Err(err),
            }
            let held = file.metadata()?;
            match std::fs::metadata(&path) {
                Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => {
                    return Ok(SupervisorLock { _file: file });
                }
                _ => continue,
            }
        }
        Err(io::Error::other(format!(
            "{} kept being replaced while it was taken",
            path.display()
        )))
    }
}

/// Whether the supervisor of the lane whose record folder is `record` is alive, as its lock
/// says.
pub fn probe(record: &Path) -> Liveness {
    let Ok(file) = File::open(supervisor_lock_path(record)) else {
        return Liveness::Unknown;
    };
    match file.try_lock_shared() {
        // Taken, so nobody held it; released when `file` closes.
        Ok(()) => Liveness::Gone,
        Err(TryLockError::WouldBlock) => Liveness::Alive,
        Err(TryLockError::Error(_)) => Liveness::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_alive_a_released_one_gone_and_none_unknown() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(probe(dir.path()), Liveness::Unknown);
        let lock = SupervisorLock::hold(dir.path()).expect("hold");
        assert_eq!(probe(dir.path()), Liveness::Alive);
        // A second supervisor is refused while the first holds the lane.
        let second = SupervisorLock::hold(dir.path()).expect_err("refused");
        assert_eq!(second.kind(), io::ErrorKind::WouldBlock);
        drop(lock);
        assert_eq!(probe(dir.path()), Liveness::Gone);
        // Probing does not take the lane: a new supervisor can still hold it.
        let again = SupervisorLock::hold(dir.path()).expect("hold again");
        assert_eq!(probe(dir.path()), Liveness::Alive);
        drop(again);
    }
}
