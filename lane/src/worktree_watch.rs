//! A lane's worktree watched for file changes (inotify, through `notify`): a file the agent
//! writes is progress even when its screen shows nothing new (`docs/recovery.md`, "Stalls").
//!
//! Changes under a name starting with `.` (`.git/`, `.claw/`, `.pytest_cache/`, an agent's or a
//! test double's own logs) are tools' bookkeeping, not the lane's work, and do not count. A
//! worktree that cannot be watched (the inotify watch limit, a folder that went away) is
//! logged once and left to the screen and the commit watcher.

use std::path::{Component, Path};

use crate::handshake::ExternalProgress;
use clawpool_recovery::ProgressSource;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// Watches one worktree while it lives.
pub struct WorktreeWatch {
    _watcher: RecommendedWatcher,
}

impl WorktreeWatch {
    /// Starts watching `dir` recursively, recording each counted change in `progress`.
    pub fn start(dir: &Path, progress: ExternalProgress) -> Option<Self> {
        let root = dir.to_owned();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else {
                    return;
                };
                if !matches!(event.kind, EventKind::Access(_))
                    && event.paths.iter().any(|path| counts(&root, path))
                {
                    progress.record(ProgressSource::WorktreeChange);
                }
            })
            .map_err(|err| warn(dir, &err))
            .ok()?;
        watcher
            .watch(dir, RecursiveMode::Recursive)
            .map_err(|err| warn(dir, &err))
            .ok()?;
        Some(Self { _watcher: watcher })
    }
}

fn warn(dir: &Path, err: &notify::Error) {
    tracing::warn!(
        worktree = %dir.display(),
        error = %err,
        "the worktree is not watched for changes; only the screen and commits show progress"
    );
}

/// Whether a change at `path` is the lane's work: inside `root`, and no part of it (below
/// `root`) a dot-name.
fn counts(root: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(root) else {
        return false;
    };
    let parts: Vec<Component<'_>> = relative.components().collect();
    !parts.is_empty()
        && parts.iter().all(|part| match part {
            Component::Normal(name) => !name.to_string_lossy().starts_with('.'),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_and_bookkeeping_does_not() {
        let root = Path::new("/lanes/fix");
        assert!(counts(root, Path::new("/lanes/fix/src/main.rs")));
        assert!(counts(root, Path::new("/lanes/fix/out.txt")));
        assert!(!counts(root, Path::new("/lanes/fix/.git/index")));
        assert!(!counts(
            root,
            Path::new("/lanes/fix/.claw/worker-state.json")
        ));
        assert!(!counts(root, Path::new("/lanes/fix/.prompts.jsonl")));
        assert!(!counts(
            root,
            Path::new("/lanes/fix/target/.rustc_info.json")
        ));
        assert!(!counts(root, Path::new("/lanes/fix")));
        assert!(!counts(root, Path::new("/lanes/other/src/main.rs")));
    }
}
