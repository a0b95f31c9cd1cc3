//! The pool's writes and reads across the repository's lane registry (`clawpool/lanes/<name>/`
//! in the common git dir; one lane's folder is `clawpool_lane::registry`): which lanes are
//! registered, writing a lane's entry, and which lanes' outcomes never reached their state
//! file.

use std::collections::BTreeMap;

use clawpool_lane::registry::{RegistryEntry, RegistryFolder, lane_registry};
use clawpool_worktree::Repo;

/// The names of the lanes registered in the repository's common git dir, sorted: every
/// folder, including one whose supervisor died before it wrote the entry.
pub fn registered_lanes(repo: &Repo) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo.state_dir().lanes())
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Writes the lane's registry entry (`lane.json`) atomically.
pub fn write_entry(registry: &RegistryFolder, entry: &RegistryEntry) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(entry).map_err(std::io::Error::other)?;
    clawpool_worktree::replace::replace_file(&registry.entry_file(), format!("{text}\n").as_bytes())
}

/// The lanes among `names` whose state file could not be written at their end (their degraded
/// marker is still there), with the write's error: their outcome is only in their event log.
pub fn unpersisted_outcomes<'a>(
    repo: &Repo,
    names: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    names
        .filter_map(|name| {
            let err = lane_registry(repo, name).degraded()?;
            Some((name.clone(), err))
        })
        .collect()
}
