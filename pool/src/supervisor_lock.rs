//! The repository's supervisor lock: one supervisor (a foreground `spawn`, `adopt`, or the
//! daemon) owns a repository's lanes at a time. The lock is a file in the common git dir,
//! held with an OS lock for the owner's life, and reads `PID\nROLE\n` so that a refusal can
//! name the holder and `spawn --detach` can tell a daemon about to listen from a foreground
//! supervisor that never takes lanes from anyone.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use clawpool_worktree::Repo;

use crate::error::CommandError;

/// The supervisor lock's path for a repository.
pub fn lock_path(repo: &Repo) -> PathBuf {
    repo.state_dir().supervisor_lock()
}

/// Which kind of supervisor holds the repository's lock, written in the lock file after its
/// pid: `spawn --detach` must tell a daemon that is about to listen (wait for its socket) from
/// a foreground supervisor that will never take lanes from anyone (refuse at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupervisorRole {
    /// `clawpool spawn` without `--detach`: runs its own packet and nothing else.
    Spawn,
    /// `clawpool adopt`: drives the lanes it took over and nothing else.
    Adopt,
    /// `clawpool daemon`: takes lanes through its socket.
    Daemon,
}

impl SupervisorRole {
    fn name(self) -> &'static str {
        match self {
            SupervisorRole::Spawn => "spawn",
            SupervisorRole::Adopt => "adopt",
            SupervisorRole::Daemon => "daemon",
        }
    }
}

/// Takes the repository's supervisor lock for `role`, or refuses with `supervisor_running`
/// naming the pid that holds it. The lock file then reads `PID\nROLE\n`.
pub fn hold_supervisor_lock(path: &Path, role: SupervisorRole) -> Result<File, CommandError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CommandError::io("creating clawpool's folder in the git dir", e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| CommandError::io("opening the supervisor lock", e))?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.set_len(0);
            // One write, so a reader sees the pid and the role together or nothing.
            let _ = file.write_all(format!("{}\n{}\n", std::process::id(), role.name()).as_bytes());
            Ok(file)
        }
        Err(_) => Err(supervisor_running(path)),
    }
}

/// The refusal for a lock someone else holds, naming the holder's pid when the file has it.
fn supervisor_running(path: &Path) -> CommandError {
    // The holder writes its pid just after taking the lock: a supervisor started at the same
    // moment may find the file still empty.
    let holder = std::fs::read_to_string(path).unwrap_or_default();
    let holder = match holder.lines().next().map(str::trim) {
        None | Some("") => String::new(),
        Some(pid) => format!(" (pid {pid})"),
    };
    CommandError::invalid(
        "supervisor_running",
        format!(
            "another clawpool supervisor{holder} is running lanes for this repository; wait for it to finish or stop it"
        ),
    )
}

/// Who holds the supervisor lock right now.
#[derive(Debug)]
pub enum LockHolder {
    /// Nobody: a daemon started now would get it.
    Free,
    /// A daemon, or a holder that has not written its role yet (it does so right after taking
    /// the lock): worth waiting for its socket.
    DaemonOrStarting,
    /// A foreground `spawn` or `adopt`: it takes no lanes; the refusal names its pid.
    Foreground(CommandError),
}

/// Looks at the supervisor lock without creating anything. Testing whether it is free takes it
/// for an instant when it is: a supervisor trying at that instant is refused, as one started at
/// the same moment as another is; `spawn --detach` then starts its daemon again.
pub fn supervisor_lock_holder(path: &Path) -> Result<LockHolder, CommandError> {
    let file = match std::fs::OpenOptions::new().read(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockHolder::Free),
        Err(e) => return Err(CommandError::io("opening the supervisor lock", e)),
    };
    match file.try_lock() {
        Ok(()) => Ok(LockHolder::Free),
        Err(std::fs::TryLockError::WouldBlock) => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            Ok(match text.lines().nth(1).map(str::trim) {
                Some("spawn") | Some("adopt") => LockHolder::Foreground(supervisor_running(path)),
                _ => LockHolder::DaemonOrStarting,
            })
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(CommandError::io("testing the supervisor lock", e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second supervisor is refused by name while the first holds the lock, `spawn
    /// --detach` reads the holder as a foreground one (never to wait for), and the lock is
    /// free again once its holder is gone.
    #[test]
    fn one_supervisor_at_a_time_and_its_role_is_read_back() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("clawpool/supervisor.lock");
        assert!(matches!(
            supervisor_lock_holder(&path).expect("probe"),
            LockHolder::Free
        ));
        let held = hold_supervisor_lock(&path, SupervisorRole::Spawn).expect("the first holds it");
        let refused = hold_supervisor_lock(&path, SupervisorRole::Daemon)
            .expect_err("a second supervisor is refused");
        assert_eq!(refused.kind, "supervisor_running");
        assert!(
            refused
                .message
                .contains(&format!("(pid {})", std::process::id())),
            "{}",
            refused.message
        );
        assert!(matches!(
            supervisor_lock_holder(&path).expect("probe"),
            LockHolder::Foreground(_)
        ));
        drop(held);
        assert!(matches!(
            supervisor_lock_holder(&path).expect("probe"),
            LockHolder::Free
        ));
        let daemon = hold_supervisor_lock(&path, SupervisorRole::Daemon).expect("free again");
        assert!(matches!(
            supervisor_lock_holder(&path).expect("probe"),
            LockHolder::DaemonOrStarting
        ));
        drop(daemon);
    }
}
