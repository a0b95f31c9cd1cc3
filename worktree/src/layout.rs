//! Where clawpool keeps its own files in a repository: the folder `clawpool/` in the common git
//! dir, shared by every worktree of the repository. Every path under it is named here — the
//! lane registry, the locks, the daemon's socket and log, gc's marks — so the layout is known
//! in one place; callers ask [`StateDir`] instead of joining names.
//!
//! ```text
//! <common git dir>/clawpool/
//!   lanes/<name>/          one registry folder per lane, its *record folder*: lane.json,
//!                          state.json (the lane's state, the truth), supervisor.lock (held
//!                          from the lane's preparation to its last write), control.sock,
//!                          events.jsonl, hooks.json (Claude Code's hook settings), hook-token
//!                          (the token its agent's reports carry, owner only), hooks.log,
//!                          state-degraded, verify/
//!   stream.jsonl           the repository's event stream: every lane's events, in the order
//!                          they were appended, each with its cursor (`docs/events.md`)
//!   removed/<name>.json    a lane `clawpool gc` removed
//!   supervisor.lock        held by the supervisor driving the repository's lanes
//!   worktree.lock          serialises worktree creation and removal
//!   fetch.lock, fetch-stamps/
//!   daemon.sock, daemon.log
//!   permission-grants.json operators' lane and repository permission grants, and its .lock
//!                          (`clawpool_recovery::permissions::grants`)
//! <lane worktree>/.claw/   worker-state.json: a publication of state.json for claw-code's
//!                          `claw state`, rewritten, never read back (and for `clawpool run`,
//!                          which has no registry, its record folder too: state.json,
//!                          supervisor.lock, control.sock, events.jsonl, terminal.log)
//! $XDG_RUNTIME_DIR/clawpool/ or /tmp/clawpool-<uid>/
//!                          <hash>.sock: a lane's control socket when its record folder's path
//!                          is too long for a socket address (`control_socket`)
//! ```
//!
//! A lane's *record folder* holds what clawpool believes about the lane and what proves its
//! supervisor alive. For a lane of `clawpool spawn` it is the registry folder, outside the
//! worktree, where the agent's ordinary workspace writes do not reach; the worktree's `.claw/`
//! only receives publications. Readers find a lane's record folder from the registry, never
//! from the worktree.

use std::path::{Path, PathBuf};

/// clawpool's folder inside a lane's own worktree: the published state file
/// (`worker-state.json`), the hook failures file, and for `clawpool run` the lane's record
/// folder (and so its hook settings and token).
pub const LANE_DIR: &str = ".claw";

/// A lane's state document, the truth, in its record folder.
pub const STATE_RECORD: &str = "state.json";
/// The lock a lane's supervisor holds for the lane's life (and `spawn` from before its
/// worktree is made), in its record folder.
pub const LANE_LOCK: &str = "supervisor.lock";
/// A lane's control socket's name in its record folder.
const CONTROL_SOCKET: &str = "control.sock";

/// Where a socket address's path must fit: `sun_path` is 108 bytes on Linux, one of them the
/// terminating NUL.
const SUN_PATH_MAX: usize = 107;

/// The record folder of a `clawpool run` lane in `dir`: its `.claw/` (it has no registry).
pub fn run_record(dir: &Path) -> PathBuf {
    dir.join(LANE_DIR)
}

/// The lane's state document in its record folder `record`.
pub fn state_record(record: &Path) -> PathBuf {
    record.join(STATE_RECORD)
}

/// The lane's supervisor lock in its record folder `record`.
pub fn lane_lock(record: &Path) -> PathBuf {
    record.join(LANE_LOCK)
}

/// The control socket of the lane whose record folder is `record`, where operator commands
/// go: `control.sock` in the record folder when that path fits in a socket address, otherwise
/// `<hash of the record folder>.sock` in the user's runtime folder ([`runtime_dir`]). A pure
/// function of the record folder and the user, so the supervisor that listens and every
/// command that connects agree without another file to keep in step.
pub fn control_socket(record: &Path) -> PathBuf {
    let direct = record.join(CONTROL_SOCKET);
    if direct.as_os_str().len() <= SUN_PATH_MAX {
        return direct;
    }
    let absolute = record.canonicalize().unwrap_or_else(|_| record.to_owned());
    runtime_dir().join(format!(
        "{:016x}.sock",
        fnv1a(absolute.as_os_str().as_encoded_bytes())
    ))
}

/// The user's own folder for sockets whose natural place has too long a path:
/// `$XDG_RUNTIME_DIR/clawpool` when that variable names an absolute folder, else
/// `/tmp/clawpool-<uid>`. [`ensure_runtime_dir`] makes it and checks it is the user's.
pub fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir.join("clawpool"),
        // SAFETY: getuid has no preconditions and cannot fail.
        _ => PathBuf::from(format!("/tmp/clawpool-{}", unsafe { libc::getuid() })),
    }
}

/// Makes the folder `socket` is in when it is the user's runtime folder: created 0700, and
/// refused unless it is a real folder (not a link) owned by this user that nobody else can
/// write or read — in a shared `/tmp` another user could have made it first.
pub fn ensure_socket_dir(socket: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let Some(dir) = socket.parent() else {
        return Ok(());
    };
    if dir != runtime_dir() {
        return std::fs::create_dir_all(dir);
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private folder of this user (it must be a folder owned by uid {uid} with mode 0700)",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// FNV-1a, 64 bits: a short stable name for a long path (not a secret; the folder is private).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A lane's registry entry, in its registry folder.
pub const LANE_ENTRY: &str = "lane.json";
/// A lane's event log, in its registry folder (or in `.claw/` for a lane of `clawpool run`).
pub const EVENTS: &str = "events.jsonl";
/// The repository's event stream, in its clawpool folder.
pub const STREAM: &str = "stream.jsonl";
/// The mark a supervisor leaves in a lane's registry folder while it cannot write the lane's
/// state file.
pub const DEGRADED_MARKER: &str = "state-degraded";
/// The folder of a lane's verification logs, in its registry folder.
pub const VERIFY_LOGS: &str = "verify";
/// A lane's branch as a reader last worked it out ([`crate::BranchRecord`]), in its registry
/// folder: what lets a board of lanes nobody owns read files instead of every worktree.
pub const BRANCH_RECORD: &str = "branch.json";

/// clawpool's folder in a repository's common git dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// The folder of the repository whose common git dir is `common_dir`.
    pub fn of(common_dir: &Path) -> Self {
        Self {
            root: common_dir.join("clawpool"),
        }
    }

    /// The repository's folder that holds the lane event log at `events`, when `events` is a
    /// registry lane's log (`<root>/lanes/<name>/events.jsonl`); `None` for any other log (a
    /// `clawpool run` lane's `.claw/events.jsonl`, a test's file), which has no repository
    /// stream.
    pub fn of_lane_events(events: &Path) -> Option<Self> {
        let lane = events.parent()?;
        let lanes = lane.parent()?;
        let root = lanes.parent()?;
        let named = |path: &Path, name: &str| path.file_name().is_some_and(|n| n == name);
        (named(events, EVENTS) && named(lanes, "lanes") && named(root, "clawpool")).then(|| Self {
            root: root.to_owned(),
        })
    }

    /// The repository's event stream: every event of every lane, each with its cursor.
    pub fn stream(&self) -> PathBuf {
        self.root.join(STREAM)
    }

    /// The folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lane registry: one folder per lane.
    pub fn lanes(&self) -> PathBuf {
        self.root.join("lanes")
    }

    /// Lane `name`'s registry folder.
    pub fn lane(&self, name: &str) -> PathBuf {
        self.lanes().join(name)
    }

    /// The record folder of lane `name`: its registry folder.
    pub fn record(&self, name: &str) -> PathBuf {
        self.lane(name)
    }

    /// The mark `clawpool gc` leaves for lane `name` when it removes it.
    pub fn removed(&self, name: &str) -> PathBuf {
        self.root.join("removed").join(format!("{name}.json"))
    }

    /// The lock the supervisor driving the repository's lanes holds.
    pub fn supervisor_lock(&self) -> PathBuf {
        self.root.join("supervisor.lock")
    }

    /// The lock that serialises worktree creation and removal.
    pub fn worktree_lock(&self) -> PathBuf {
        self.root.join("worktree.lock")
    }

    /// The lock that serialises fetches.
    pub fn fetch_lock(&self) -> PathBuf {
        self.root.join("fetch.lock")
    }

    /// When each remote was last fetched.
    pub fn fetch_stamps(&self) -> PathBuf {
        self.root.join("fetch-stamps")
    }

    /// The background supervisor's socket.
    pub fn daemon_socket(&self) -> PathBuf {
        self.root.join("daemon.sock")
    }

    /// The background supervisor's log.
    pub fn daemon_log(&self) -> PathBuf {
        self.root.join("daemon.log")
    }

    /// The notifier's record (`docs/notify.md`): how far it read the stream, what each
    /// endpoint still has to be sent, and how its deliveries went.
    pub fn notify_status(&self) -> PathBuf {
        self.root.join("notify.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_path_that_fits_stays_in_the_record_folder_and_a_long_one_moves() {
        let short = Path::new("/repo/.git/clawpool/lanes/a");
        assert_eq!(control_socket(short), short.join("control.sock"));
        let long = PathBuf::from(format!("/repo/{}/.git/clawpool/lanes/a", "x".repeat(120)));
        let moved = control_socket(&long);
        assert_eq!(moved.parent(), Some(runtime_dir().as_path()));
        assert!(
            moved.as_os_str().len() <= SUN_PATH_MAX,
            "{}",
            moved.display()
        );
        // Stable for one folder, different for another.
        assert_eq!(control_socket(&long), moved);
        assert_ne!(control_socket(&long.with_file_name("b")), moved);
    }
}
