//! What wakes `clawpool ui`: file-system notifications (inotify, through `notify`) on each
//! shown repository's lane registry, on each lane's event log, on the shown lane's whole
//! registry folder (its terminal log: its screen), on each lane's `.claw/` folder, where its
//! state file is published at each change (a wake-up only: what is shown is read from the
//! lane's record in its registry folder), and with `--all` on the user's index of repositories. Each
//! notification becomes one [`Change`] naming the lane it touched; nothing is polled.
//!
//! A lane's terminal log grows with every frame its agent draws (a spinner: several times a
//! second), and matters only while its screen is shown. So only the shown lane's registry
//! folder is watched whole; of the others only the event log is watched (a file watch), and
//! their terminal logs never reach the dashboard — not even its watcher's thread. A lane whose
//! event log does not exist yet (its supervisor is starting it) is watched whole until it does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawpool_worktree::layout::{EVENTS, LANE_DIR};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::lanes::LaneKey;

/// What changed on disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change {
    /// A lane's events or registry entry: its row (git included) and its events are read again.
    Lane(LaneKey),
    /// Only a lane's state file (rewritten on a lane change): its state is read again,
    /// its branch facts kept.
    State(LaneKey),
    /// Only a lane's terminal log grew: its screen changed, nothing else.
    Screen(LaneKey),
    /// A lane folder appeared in a repository's registry or went away.
    Registry(usize),
    /// The user's index of repositories was rewritten (`--all`).
    Repositories,
}

/// How much of a lane's registry folder is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    /// The whole folder: the shown lane (its terminal log), or a lane with no event log yet.
    Folder,
    /// Its event log alone.
    EventLog,
}

/// Which lane (or registry) a path the watcher reports belongs to; shared with its thread.
#[derive(Default)]
struct Paths {
    /// Each registry folder, by its repository's position.
    registries: Vec<(PathBuf, usize)>,
    /// Each lane's registry folder.
    lane_folders: HashMap<PathBuf, LaneKey>,
    /// Each lane's `.claw/` folder.
    claw_folders: HashMap<PathBuf, LaneKey>,
    /// The index file, when watched.
    index: Option<PathBuf>,
    /// The lane whose screen is shown.
    shown: Option<LaneKey>,
}

/// The registries, the lanes' files and the index, watched while the dashboard runs.
pub struct Watch {
    watcher: RecommendedWatcher,
    paths: Arc<Mutex<Paths>>,
    /// What is watched of each lane's registry folder, and the folder.
    lanes: HashMap<LaneKey, (PathBuf, Watched)>,
}

impl Watch {
    /// Starts a watcher with nothing watched yet; changes go to `changes`.
    pub fn start(changes: mpsc::UnboundedSender<Change>) -> notify::Result<Self> {
        let paths: Arc<Mutex<Paths>> = Arc::default();
        let known = Arc::clone(&paths);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else {
                return;
            };
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            let Ok(known) = known.lock() else {
                return;
            };
            for path in &event.paths {
                if let Some(change) = known.change_of(path) {
                    let _ = changes.send(change);
                }
            }
        })?;
        Ok(Self {
            watcher,
            paths,
            lanes: HashMap::new(),
        })
    }

    fn paths(&self) -> std::sync::MutexGuard<'_, Paths> {
        self.paths.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches `registry` (repository `repo`'s `clawpool/lanes/`: lane folders appearing and
    /// going), once.
    pub fn follow_registry(&mut self, repo: usize, registry: &Path) -> notify::Result<()> {
        if self
            .paths()
            .registries
            .iter()
            .any(|(_, known)| *known == repo)
        {
            return Ok(());
        }
        self.watcher.watch(registry, RecursiveMode::NonRecursive)?;
        self.paths().registries.push((registry.to_owned(), repo));
        Ok(())
    }

    /// Watches the user's index of repositories, `index`: its folder, since the index is
    /// replaced by a rename each time it is written.
    pub fn follow_index(&mut self, index: &Path) -> notify::Result<()> {
        let Some(folder) = index.parent() else {
            return Ok(());
        };
        self.watcher.watch(folder, RecursiveMode::NonRecursive)?;
        self.paths().index = Some(index.to_owned());
        Ok(())
    }

    /// From now on, screen changes of `lane` (only) are reported: its registry folder is
    /// watched whole, the previously shown lane's only for its event log.
    pub fn show_screen_of(&mut self, lane: Option<&LaneKey>) {
        let before = std::mem::replace(&mut self.paths().shown, lane.cloned());
        if before.as_ref() == lane {
            return;
        }
        for key in [before.as_ref(), lane].into_iter().flatten() {
            if let Some((folder, _)) = self.lanes.get(key).cloned() {
                self.watch_lane(key, &folder);
            }
        }
    }

    /// Watches lane `key`'s registry folder `registry`, as much of it as it needs (see the
    /// module). Called again after the lane changed, it moves a lane whose event log has
    /// appeared to watching that alone.
    pub fn follow_lane(&mut self, key: &LaneKey, registry: &Path) {
        self.paths()
            .lane_folders
            .insert(registry.to_owned(), key.clone());
        self.watch_lane(key, registry);
    }

    /// Watches lane `key`'s `.claw/` folder in `worktree` (its state file), once.
    pub fn follow_state(&mut self, key: &LaneKey, worktree: &Path) {
        let folder = worktree.join(LANE_DIR);
        if self.paths().claw_folders.contains_key(&folder) {
            return;
        }
        // A lane whose folder is gone (removed by gc) is shown from its registry alone.
        if self
            .watcher
            .watch(&folder, RecursiveMode::NonRecursive)
            .is_ok()
        {
            self.paths().claw_folders.insert(folder, key.clone());
        }
    }

    /// Makes what is watched of lane `key`'s registry folder what it should be now.
    fn watch_lane(&mut self, key: &LaneKey, folder: &Path) {
        let events = folder.join(EVENTS);
        let wanted = if self.paths().shown.as_ref() == Some(key) || !events.is_file() {
            Watched::Folder
        } else {
            Watched::EventLog
        };
        let current = self.lanes.get(key).map(|(_, watched)| *watched);
        if current == Some(wanted) {
            return;
        }
        let target = |watched: Watched| match watched {
            Watched::Folder => folder.to_owned(),
            Watched::EventLog => events.clone(),
        };
        if let Some(current) = current {
            let _ = self.watcher.unwatch(&target(current));
        }
        match self
            .watcher
            .watch(&target(wanted), RecursiveMode::NonRecursive)
        {
            Ok(()) => {
                self.lanes.insert(key.clone(), (folder.to_owned(), wanted));
            }
            // The log went away between the look and the watch (gc): the folder, if any.
            Err(_) if wanted == Watched::EventLog => {
                if self
                    .watcher
                    .watch(folder, RecursiveMode::NonRecursive)
                    .is_ok()
                {
                    self.lanes
                        .insert(key.clone(), (folder.to_owned(), Watched::Folder));
                }
            }
            Err(_) => {
                self.lanes.remove(key);
            }
        }
    }
}

impl Paths {
    /// The change `path` stands for, if the dashboard cares about it.
    fn change_of(&self, path: &Path) -> Option<Change> {
        let parent = path.parent()?;
        if let Some((_, repo)) = self
            .registries
            .iter()
            .find(|(root, _)| parent == root || path == root)
        {
            return Some(Change::Registry(*repo));
        }
        if self.index.as_deref() == Some(path) {
            return Some(Change::Repositories);
        }
        if let Some(lane) = self.lane_folders.get(parent) {
            let file = path.file_name()?.to_string_lossy();
            return match lane_file_change(lane, &file) {
                Change::Screen(lane) if self.shown.as_ref() != Some(&lane) => None,
                change => Some(change),
            };
        }
        let lane = self.claw_folders.get(parent)?;
        Some(Change::State(lane.clone()))
    }
}

/// The change a file in lane `lane`'s registry folder stands for: `terminal.log` (and its
/// rotations) is the lane's screen, any other file (its event log, entry, degraded mark) the
/// lane.
fn lane_file_change(lane: &LaneKey, file: &str) -> Change {
    if file.starts_with("terminal.log") {
        Change::Screen(lane.clone())
    } else {
        Change::Lane(lane.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha() -> LaneKey {
        LaneKey {
            repo: 1,
            name: "alpha".into(),
        }
    }

    fn paths() -> Paths {
        let mut paths = Paths {
            registries: vec![(PathBuf::from("/r/.git/clawpool/lanes"), 1)],
            shown: Some(alpha()),
            ..Paths::default()
        };
        paths
            .lane_folders
            .insert(PathBuf::from("/r/.git/clawpool/lanes/alpha"), alpha());
        paths
            .claw_folders
            .insert(PathBuf::from("/r.lanes/alpha/.claw"), alpha());
        paths
    }

    #[test]
    fn a_terminal_log_is_the_screen_and_other_files_are_the_lane() {
        let paths = paths();
        let change = |path: &str| paths.change_of(Path::new(path));
        assert_eq!(
            change("/r/.git/clawpool/lanes/alpha/terminal.log"),
            Some(Change::Screen(alpha()))
        );
        assert_eq!(
            change("/r/.git/clawpool/lanes/alpha/events.jsonl"),
            Some(Change::Lane(alpha()))
        );
        assert_eq!(
            change("/r/.git/clawpool/lanes/alpha"),
            Some(Change::Registry(1))
        );
        assert_eq!(
            change("/r.lanes/alpha/.claw/worker-state.json"),
            Some(Change::State(alpha()))
        );
    }

    #[test]
    fn a_lane_not_shown_has_no_screen_changes() {
        let mut paths = paths();
        paths.shown = None;
        assert_eq!(
            paths.change_of(Path::new("/r/.git/clawpool/lanes/alpha/terminal.log")),
            None
        );
    }
}
