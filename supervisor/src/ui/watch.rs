//! What wakes `clawpool ui`: file-system notifications (inotify, through `notify`) on each
//! shown repository's lane registry — each lane's entry, event log and terminal log —, on each
//! lane's `.claw/` folder, where its state file is rewritten, and with `--all` on the user's
//! index of repositories. Each notification becomes one
//! [`Change`] naming the lane it touched; nothing is polled. A lane's screen changing matters
//! only while it is the one shown: the others' terminal logs (agents drawing spinners) are
//! dropped here, on the watcher's thread, and never wake the dashboard.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawpool_worktree::layout::{LANE_DIR, control_socket};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::lanes::LaneKey;

/// What changed on disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change {
    /// A lane's events or registry entry: its row (git included) and its events are read again.
    Lane(LaneKey),
    /// Only a lane's state file (a heartbeat rewrites it every 5 s): its state is read again,
    /// its branch facts kept.
    State(LaneKey),
    /// Only a lane's terminal log grew: its screen changed, nothing else.
    Screen(LaneKey),
    /// A lane folder appeared in a repository's registry or went away.
    Registry(usize),
    /// The user's index of repositories was rewritten (`--all`).
    Repositories,
}

/// The registries, the lanes' `.claw/` folders and the index, watched while the dashboard
/// runs.
pub struct Watch {
    watcher: RecommendedWatcher,
    /// Each watched registry folder, by its repository's position.
    registries: Arc<Mutex<Vec<(PathBuf, usize)>>>,
    /// Each watched `.claw/` folder, by the lane it belongs to.
    lane_folders: Arc<Mutex<HashMap<PathBuf, LaneKey>>>,
    /// The index file, when watched.
    index: Arc<Mutex<Option<PathBuf>>>,
    /// The lane whose screen is shown.
    shown: Arc<Mutex<Option<LaneKey>>>,
}

impl Watch {
    /// Starts a watcher with nothing watched yet; changes go to `changes`.
    pub fn start(changes: mpsc::UnboundedSender<Change>) -> notify::Result<Self> {
        let registries: Arc<Mutex<Vec<(PathBuf, usize)>>> = Arc::default();
        let lane_folders: Arc<Mutex<HashMap<PathBuf, LaneKey>>> = Arc::default();
        let index: Arc<Mutex<Option<PathBuf>>> = Arc::default();
        let shown: Arc<Mutex<Option<LaneKey>>> = Arc::default();
        let roots = Arc::clone(&registries);
        let folders = Arc::clone(&lane_folders);
        let index_file = Arc::clone(&index);
        let screen_shown = Arc::clone(&shown);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else {
                return;
            };
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            for path in &event.paths {
                let in_registry = roots.lock().ok().and_then(|roots| {
                    roots.iter().find_map(|(root, repo)| {
                        Some((path.strip_prefix(root).ok()?.to_owned(), *repo))
                    })
                });
                let is_index = index_file
                    .lock()
                    .is_ok_and(|index| index.as_deref() == Some(path.as_path()));
                let change = match in_registry {
                    Some((relative, repo)) => registry_change(repo, &relative),
                    None if is_index => Some(Change::Repositories),
                    None => folders.lock().ok().and_then(|folders| {
                        let folder = path.parent()?;
                        let lane = folders.get(folder)?;
                        // The socket's own file changing is clawpool's, not the lane's.
                        (*path != control_socket(folder.parent()?))
                            .then(|| Change::State(lane.clone()))
                    }),
                };
                if let Some(Change::Screen(lane)) = &change
                    && screen_shown
                        .lock()
                        .map_or(true, |shown| shown.as_ref() != Some(lane))
                {
                    continue;
                }
                if let Some(change) = change {
                    let _ = changes.send(change);
                }
            }
        })?;
        Ok(Self {
            watcher,
            registries,
            lane_folders,
            index,
            shown,
        })
    }

    /// Watches `registry` (repository `repo`'s `clawpool/lanes/`, recursively), once.
    pub fn follow_registry(&mut self, repo: usize, registry: &Path) -> notify::Result<()> {
        let Ok(mut registries) = self.registries.lock() else {
            return Ok(());
        };
        if registries.iter().any(|(_, known)| *known == repo) {
            return Ok(());
        }
        self.watcher.watch(registry, RecursiveMode::Recursive)?;
        registries.push((registry.to_owned(), repo));
        Ok(())
    }

    /// Watches the user's index of repositories, `index`: its folder, since the index is
    /// replaced by a rename each time it is written.
    pub fn follow_index(&mut self, index: &Path) -> notify::Result<()> {
        let Some(folder) = index.parent() else {
            return Ok(());
        };
        self.watcher.watch(folder, RecursiveMode::NonRecursive)?;
        if let Ok(mut watched) = self.index.lock() {
            *watched = Some(index.to_owned());
        }
        Ok(())
    }

    /// From now on, screen changes of `lane` (only) are reported.
    pub fn show_screen_of(&self, lane: Option<&LaneKey>) {
        if let Ok(mut shown) = self.shown.lock() {
            *shown = lane.cloned();
        }
    }

    /// Watches lane `key`'s `.claw/` folder in `worktree` too (its state file), once.
    pub fn follow_lane(&mut self, key: &LaneKey, worktree: &Path) {
        let folder = worktree.join(LANE_DIR);
        let Ok(mut folders) = self.lane_folders.lock() else {
            return;
        };
        if folders.contains_key(&folder) {
            return;
        }
        // A lane whose folder is gone (removed by gc) is shown from its registry alone.
        if self
            .watcher
            .watch(&folder, RecursiveMode::NonRecursive)
            .is_ok()
        {
            folders.insert(folder, key.clone());
        }
    }
}

/// The change a path under repository `repo`'s registry stands for: `<lane>/terminal.log` is
/// the lane's screen, any other file in `<lane>/` its state, and the lane folder itself the
/// registry.
fn registry_change(repo: usize, relative: &Path) -> Option<Change> {
    let mut parts = relative.components().filter_map(|part| match part {
        Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
        _ => None,
    });
    let Some(name) = parts.next() else {
        return Some(Change::Registry(repo));
    };
    let lane = LaneKey { repo, name };
    match parts.next().as_deref() {
        None => Some(Change::Registry(repo)),
        Some(name) if name.starts_with("terminal.log") => Some(Change::Screen(lane)),
        Some(_) => Some(Change::Lane(lane)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_log_is_the_screen_and_other_files_are_the_lane() {
        let alpha = LaneKey {
            repo: 1,
            name: "alpha".into(),
        };
        assert_eq!(
            registry_change(1, Path::new("alpha/terminal.log")),
            Some(Change::Screen(alpha.clone()))
        );
        assert_eq!(
            registry_change(1, Path::new("alpha/events.jsonl")),
            Some(Change::Lane(alpha.clone()))
        );
        assert_eq!(
            registry_change(1, Path::new("alpha/verify/targeted.log")),
            Some(Change::Lane(alpha))
        );
        assert_eq!(
            registry_change(1, Path::new("alpha")),
            Some(Change::Registry(1))
        );
        assert_eq!(registry_change(1, Path::new("")), Some(Change::Registry(1)));
    }
}
