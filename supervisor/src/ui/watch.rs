//! What wakes `clawpool ui`: file-system notifications (inotify, through `notify`) on the
//! repository's lane registry — each lane's entry, event log and terminal log — and on each
//! lane's `.claw/` folder, where its state file is rewritten. Each notification becomes one
//! [`Change`] naming the lane it touched; nothing is polled. A lane's screen changing matters
//! only while it is the one shown: the others' terminal logs (agents drawing spinners) are
//! dropped here, on the watcher's thread, and never wake the dashboard.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawpool_worktree::layout::{LANE_DIR, control_socket};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// What changed on disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change {
    /// A lane's events or registry entry: its row (git included) and its events are read again.
    Lane(String),
    /// Only a lane's state file (a heartbeat rewrites it every 5 s): its state is read again,
    /// its branch facts kept.
    State(String),
    /// Only a lane's terminal log grew: its screen changed, nothing else.
    Screen(String),
    /// A lane folder appeared in the registry or went away.
    Registry,
}

/// The registry and the lanes' `.claw/` folders, watched while the dashboard runs.
pub struct Watch {
    watcher: RecommendedWatcher,
    /// Each watched `.claw/` folder, by the lane it belongs to.
    lane_folders: Arc<Mutex<HashMap<PathBuf, String>>>,
    /// The lane whose screen is shown.
    shown: Arc<Mutex<Option<String>>>,
}

impl Watch {
    /// Starts watching `registry` (the repository's `clawpool/lanes/`, recursively); changes
    /// go to `changes`.
    pub fn start(registry: &Path, changes: mpsc::UnboundedSender<Change>) -> notify::Result<Self> {
        let lane_folders: Arc<Mutex<HashMap<PathBuf, String>>> = Arc::default();
        let shown: Arc<Mutex<Option<String>>> = Arc::default();
        let root = registry.to_owned();
        let folders = Arc::clone(&lane_folders);
        let screen_shown = Arc::clone(&shown);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else {
                    return;
                };
                if matches!(event.kind, EventKind::Access(_)) {
                    return;
                }
                for path in &event.paths {
                    let change = match path.strip_prefix(&root) {
                        Ok(relative) => registry_change(relative),
                        Err(_) => folders.lock().ok().and_then(|folders| {
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
        watcher.watch(registry, RecursiveMode::Recursive)?;
        Ok(Self {
            watcher,
            lane_folders,
            shown,
        })
    }

    /// From now on, screen changes of `lane` (only) are reported.
    pub fn show_screen_of(&self, lane: Option<&str>) {
        if let Ok(mut shown) = self.shown.lock() {
            *shown = lane.map(str::to_owned);
        }
    }

    /// Watches lane `name`'s `.claw/` folder in `worktree` too (its state file), once.
    pub fn follow_lane(&mut self, name: &str, worktree: &Path) {
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
            folders.insert(folder, name.to_owned());
        }
    }
}

/// The change a path under the registry stands for: `<lane>/terminal.log` is the lane's
/// screen, any other file in `<lane>/` its state, and the lane folder itself the registry.
fn registry_change(relative: &Path) -> Option<Change> {
    let mut parts = relative.components().filter_map(|part| match part {
        Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
        _ => None,
    });
    let Some(lane) = parts.next() else {
        return Some(Change::Registry);
    };
    match parts.next().as_deref() {
        None => Some(Change::Registry),
        Some(name) if name.starts_with("terminal.log") => Some(Change::Screen(lane)),
        Some(_) => Some(Change::Lane(lane)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_log_is_the_screen_and_other_files_are_the_lane() {
        assert_eq!(
            registry_change(Path::new("alpha/terminal.log")),
            Some(Change::Screen("alpha".into()))
        );
        assert_eq!(
            registry_change(Path::new("alpha/events.jsonl")),
            Some(Change::Lane("alpha".into()))
        );
        assert_eq!(
            registry_change(Path::new("alpha/verify/targeted.log")),
            Some(Change::Lane("alpha".into()))
        );
        assert_eq!(registry_change(Path::new("alpha")), Some(Change::Registry));
        assert_eq!(registry_change(Path::new("")), Some(Change::Registry));
    }
}
