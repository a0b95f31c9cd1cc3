//! Where clawpool keeps its own files in a repository: the folder `clawpool/` in the common git
//! dir, shared by every worktree of the repository. Every path under it is named here — the
//! lane registry, the locks, the daemon's socket and log, gc's marks — so the layout is known
//! in one place; callers ask [`StateDir`] instead of joining names.
//!
//! ```text
//! <common git dir>/clawpool/
//!   lanes/<name>/          one registry folder per lane: lane.json, events.jsonl, hooks.log,
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
//! <lane worktree>/.claw/     worker-state.json, control.sock (and for `clawpool run`:
//!                          events.jsonl, terminal.log)
//! ```

use std::path::{Path, PathBuf};

/// clawpool's folder inside a lane's own worktree (a `clawpool run` lane's folder): its state
/// file (`worker-state.json`), control socket, and for `clawpool run` its event log.
pub const LANE_DIR: &str = ".claw";

/// The socket of the supervisor driving the lane in `lane_dir`, where operator commands go.
pub fn control_socket(lane_dir: &Path) -> PathBuf {
    lane_dir.join(LANE_DIR).join("control.sock")
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
}
