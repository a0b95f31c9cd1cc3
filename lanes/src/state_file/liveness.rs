//! Whether the supervisor that owns a lane is alive, at no cost while nothing happens: for the
//! lane's whole life it holds an exclusive lock on `.claw/supervisor.lock` in the lane's
//! folder, which the operating system releases when the process ends, however it ends
//! (SIGKILL included). A reader that can take the lock knows the supervisor is gone; one that
//! cannot knows it is there. No file is rewritten to say so.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

/// The lock file, relative to the lane's folder.
pub const SUPERVISOR_LOCK: &str = ".claw/supervisor.lock";

/// The lock file of the lane in `worktree`.
pub fn supervisor_lock_path(worktree: &Path) -> PathBuf {
    worktree.join(SUPERVISOR_LOCK)
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
    /// Takes the lane in `worktree` for this process. Refused while another live process
    /// holds it: two supervisors must never drive one lane.
    pub fn hold(worktree: &Path) -> io::Result<SupervisorLock> {
        let path = supervisor_lock_path(worktree);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(SupervisorLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "{} is held: another supervisor drives this lane",
                    path.display()
                ),
            )),
            Err(TryLockError::Error(err)) => Err(err),
        }
    }
}

/// Whether the supervisor of the lane in `worktree` is alive, as its lock says.
pub fn probe(worktree: &Path) -> Liveness {
    let Ok(file) = File::open(supervisor_lock_path(worktree)) else {
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
