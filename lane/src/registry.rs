//! The lane registry: one folder per lane in clawpool's state folder
//! ([`clawpool_worktree::layout`]), holding the lane's entry (`lane.json`, a [`RegistryEntry`]),
//! its event log, hooks log, degraded mark and verification logs. `spawn` writes the entry
//! (atomically); every other command reads it as the typed [`RegistryEntry`], never by key name.
//! It also holds the lane's branch as a reader last worked it out (`branch.json`, a
//! [`BranchRecord`]): whoever opens the worktree to work it out writes it back (atomically),
//! and a reader takes it only while it is current for the lane's HEAD, base and worktree.

use std::path::{Path, PathBuf};

use crate::verify::LaneVerifySpec;
use clawpool_lanes::state_file::Transport;
use clawpool_worktree::layout::{BRANCH_RECORD, DEGRADED_MARKER, EVENTS, LANE_ENTRY, VERIFY_LOGS};
use clawpool_worktree::{BranchRecord, Repo};
use serde::{Deserialize, Serialize};

/// What `spawn` records about a lane when it creates it (`lane.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistryEntry {
    /// The lane's name.
    pub name: String,
    /// Its worktree.
    pub worktree: PathBuf,
    /// Its branch.
    #[serde(default)]
    pub branch: Option<String>,
    /// What its branch was made from.
    #[serde(default)]
    pub base: RegisteredBase,
    /// The agent profile it runs.
    #[serde(default)]
    pub agent: String,
    /// Its task.
    #[serde(default)]
    pub prompt: Option<String>,
    /// The supervisor that created it.
    #[serde(default)]
    pub supervisor_pid: u32,
    /// Its verification settings, from its packet.
    #[serde(default)]
    pub verify: LaneVerifySpec,
    /// The terminal its worker runs in, recorded before the worker starts (absent in entries
    /// written before clawpool recorded it).
    #[serde(default)]
    pub transport: Option<Transport>,
    /// Its packet's `permission_profile` (none: the policy's default; `docs/permissions.md`).
    #[serde(default)]
    pub permission_profile: Option<String>,
    /// Its sandbox (`docs/sandbox.md`), when its agent runs in one: a supervisor that adopts
    /// or resumes the lane starts its agent again in the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<clawpool_lanes::LaneSandbox>,
    /// The bubblewrap program its sandbox is made with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<PathBuf>,
}

impl RegistryEntry {
    /// The sandbox the lane's agent is started in again (by `adopt`, or a follow-up), as the
    /// lane's first supervisor made it.
    pub fn sandbox_request(&self) -> Option<crate::sandbox::SandboxRequest> {
        self.sandbox
            .clone()
            .map(|lane| crate::sandbox::SandboxRequest {
                lane,
                bwrap: self.bwrap.clone().map_or_else(
                    || crate::sandbox::DEFAULT_BWRAP.into(),
                    PathBuf::into_os_string,
                ),
            })
    }
}

/// A lane's base as the registry records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredBase {
    /// The ref (`main`, `origin/main`).
    #[serde(rename = "ref", default)]
    pub git_ref: Option<String>,
    /// The commit it pointed to when the lane was made.
    #[serde(default)]
    pub sha: Option<String>,
}

/// Lane `name`'s registry folder in `repo`.
pub fn lane_registry(repo: &Repo, name: &str) -> RegistryFolder {
    RegistryFolder(repo.state_dir().lane(name))
}

/// Every lane in `repo`'s registry that has an entry, by name, sorted.
pub fn registered_names(repo: &Repo) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo.state_dir().lanes())
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().join(LANE_ENTRY).is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A lane's registry folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryFolder(PathBuf);

impl RegistryFolder {
    /// The registry folder whose lane's event log is `events` (its parent).
    pub fn of_events(events: &Path) -> Self {
        Self(events.parent().map(Path::to_owned).unwrap_or_default())
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// The lane's entry file.
    pub fn entry_file(&self) -> PathBuf {
        self.0.join(LANE_ENTRY)
    }

    /// The lane's event log.
    pub fn events(&self) -> PathBuf {
        self.0.join(EVENTS)
    }

    /// The mark left while the lane's state file cannot be written.
    pub fn degraded_marker(&self) -> PathBuf {
        self.0.join(DEGRADED_MARKER)
    }

    /// The folder of the lane's verification logs.
    pub fn verify_logs(&self) -> PathBuf {
        self.0.join(VERIFY_LOGS)
    }

    /// The lane's entry; `Err` says why it cannot be read (missing, not JSON, wrong shape).
    pub fn entry(&self) -> Result<RegistryEntry, RegistryError> {
        let file = self.entry_file();
        let text = std::fs::read_to_string(&file).map_err(|e| RegistryError {
            missing: e.kind() == std::io::ErrorKind::NotFound,
            message: format!("{}: {e}", file.display()),
        })?;
        serde_json::from_str(&text).map_err(|e| RegistryError {
            missing: false,
            message: format!("{}: {e}", file.display()),
        })
    }

    /// The lane's branch as a reader last worked it out; `None` when there is none or it
    /// cannot be read (a reader then works the branch out itself).
    pub fn branch_record(&self) -> Option<BranchRecord> {
        let text = std::fs::read(self.0.join(BRANCH_RECORD)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Keeps `record` as the lane's branch for the next reader, replacing the file whole (a
    /// temporary file renamed over it, so no reader sees half of one). A failed write only
    /// leaves the next reader to work the branch out again.
    pub fn keep_branch_record(&self, record: &BranchRecord) {
        let Ok(text) = serde_json::to_vec(record) else {
            return;
        };
        let _ = clawpool_worktree::replace::replace_file(&self.0.join(BRANCH_RECORD), &text);
    }

    /// The entry's degraded mark, if the lane's supervisor could not write its state file.
    pub fn degraded(&self) -> Option<String> {
        std::fs::read_to_string(self.degraded_marker())
            .ok()
            .map(|e| e.trim().to_owned())
    }
}

/// Why a registry entry could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RegistryError {
    /// There is no entry file.
    pub missing: bool,
    /// What went wrong, naming the file.
    pub message: String,
}
