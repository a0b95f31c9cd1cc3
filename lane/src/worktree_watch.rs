//! The lanes' worktrees and branches watched from the filesystem, with one inotify instance
//! (one `notify` watcher and its thread) per repository in the supervisor process, shared by
//! every lane of that repository: the kernel's per-user limit on inotify instances
//! (`fs.inotify.max_user_instances`, 128 by default) would otherwise cap the lanes one user can
//! run, and nothing has to poll a lane while nothing happens.
//!
//! What a lane is told:
//!
//! - **Work**: a file changed in its worktree counts as progress even when its screen shows
//!   nothing new (`docs/recovery.md`, "Stalls"). Changes under a name starting with `.`
//!   (`.git/`, `.claw/`, `.pytest_cache/`, an agent's or a test double's own logs) are tools'
//!   bookkeeping, not the lane's work, and do not count.
//! - **Its published state file** (`.claw/worker-state.json`) changed or removed: the lane
//!   checks it is what its supervisor wrote and puts it back otherwise ([`LaneWatch::publication`]).
//! - **Moves** (lanes with a branch): its worktree's `HEAD` (in `.git/worktrees/<name>/`),
//!   the loose ref that `HEAD` names, or its base ref changed — git replaces each of these by
//!   renaming a `.lock` file over it, so one event arrives per update. The lane's commit and
//!   freshness checks run on that ([`LaneWatch::moves`]) instead of on a timer; a slow sweep
//!   of their own covers what a watch can miss (an inotify queue that overflowed, a ref only
//!   in `packed-refs`, a ref directory made between two looks).
//!
//! A repository that cannot be watched (no inotify instance left, a folder that went away) is
//! logged once and left to the screen and the sweeps.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::handshake::ExternalProgress;
use clawpool_recovery::ProgressSource;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::watch;

/// What a lane with a branch is watched for, besides its worktree's files.
pub struct BranchWatch {
    /// The lane's base ref as the packet names it (`main`, `origin/main`, `refs/heads/main`).
    pub base: Option<String>,
}

/// One lane's subscription to its repository's watcher; unsubscribes when dropped.
pub struct LaneWatch {
    shared: Option<Arc<RepoWatcher>>,
    id: u64,
    watched: Vec<PathBuf>,
    moves: watch::Receiver<u64>,
    publication: watch::Receiver<u64>,
}

impl LaneWatch {
    /// Starts watching the lane in `dir` (canonical): its files, counted in `progress`, and,
    /// with `branch`, its HEAD, branch and base ref.
    pub fn start(dir: &Path, progress: ExternalProgress, branch: Option<BranchWatch>) -> Self {
        let (moved, moves) = watch::channel(0);
        let (published, publication) = watch::channel(0);
        let git = branch.and_then(|branch| GitPaths::of(dir).map(|paths| (paths, branch)));
        let key = git
            .as_ref()
            .map_or_else(|| dir.to_owned(), |(paths, _)| paths.common.clone());
        let Some(shared) = RepoWatcher::for_repository(&key, git.is_some()) else {
            return Self {
                shared: None,
                id: 0,
                watched: Vec::new(),
                moves,
                publication,
            };
        };
        let mut watched = Vec::new();
        if shared.watch(dir, RecursiveMode::Recursive) {
            watched.push(dir.to_owned());
        }
        let mut lane = WatchedLane {
            worktree: dir.to_owned(),
            progress,
            head_file: None,
            branch_ref: None,
            base_refs: Vec::new(),
            moved,
            published,
        };
        if let Some((paths, branch)) = git {
            shared.watch_refs(&paths.common);
            // Not the main worktree's git dir, the common dir (`watch_refs` says why): a lane
            // there has its branch's ref watched, and a detached HEAD left to the sweeps.
            if paths.git_dir != paths.common
                && shared.watch(&paths.git_dir, RecursiveMode::NonRecursive)
            {
                watched.push(paths.git_dir.clone());
            }
            lane.branch_ref = symbolic_ref(&paths.git_dir.join("HEAD"));
            lane.head_file = Some(paths.git_dir.join("HEAD"));
            lane.base_refs = branch
                .base
                .as_deref()
                .map(ref_candidates)
                .unwrap_or_default();
        }
        let id = shared.add(lane);
        Self {
            shared: Some(shared),
            id,
            watched,
            moves,
            publication,
        }
    }

    /// A receiver that changes each time the lane's HEAD, branch or base ref moved.
    pub fn moves(&self) -> watch::Receiver<u64> {
        self.moves.clone()
    }

    /// A receiver that changes each time something happened to the lane's published state file
    /// (`.claw/worker-state.json`) or its folder — the supervisor's own writes included.
    pub fn publication(&self) -> watch::Receiver<u64> {
        self.publication.clone()
    }
}

impl Drop for LaneWatch {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.remove(self.id, &self.watched);
        }
    }
}

/// A lane as its repository's watcher dispatches to it.
struct WatchedLane {
    worktree: PathBuf,
    progress: ExternalProgress,
    /// The worktree's own `HEAD` file (`.git/worktrees/<name>/HEAD`).
    head_file: Option<PathBuf>,
    /// The ref `HEAD` names (`refs/heads/<branch>`), re-read whenever `HEAD` changes; `None`
    /// when detached (each commit then rewrites `HEAD` itself).
    branch_ref: Option<String>,
    /// The names the base ref may resolve to, as git reads a short name.
    base_refs: Vec<String>,
    moved: watch::Sender<u64>,
    published: watch::Sender<u64>,
}

impl WatchedLane {
    fn tell_moved(&self) {
        self.moved.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The lanes of a repository, found by the paths their events come on: an event is looked up
/// by its path's folders and by its own path, never compared with every lane (at a thousand
/// lanes that comparison was most of an idle supervisor's time).
#[derive(Default)]
struct Lanes {
    next_id: u64,
    by_id: HashMap<u64, WatchedLane>,
    by_worktree: HashMap<PathBuf, u64>,
    by_head_file: HashMap<PathBuf, u64>,
}

/// The one watcher of a repository (or of a folder outside git, for `clawpool run`).
struct RepoWatcher {
    // Lock order: never hold `lanes` while calling the watcher: the watcher's calls wait for
    // its thread, which takes `lanes` to dispatch an event.
    watcher: Mutex<RecommendedWatcher>,
    lanes: Arc<Mutex<Lanes>>,
    /// Whether a lane with a branch had the repository's refs watched.
    refs_watched: Mutex<bool>,
}

/// The watchers of the repositories with lanes in this process, by common git dir.
fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<RepoWatcher>>> {
    static WATCHERS: OnceLock<Mutex<HashMap<PathBuf, Weak<RepoWatcher>>>> = OnceLock::new();
    WATCHERS.get_or_init(Default::default)
}

impl RepoWatcher {
    /// The repository's watcher (`key` its common git dir when `git`, else the one folder it
    /// watches), made when its first lane asks.
    fn for_repository(key: &Path, git: bool) -> Option<Arc<Self>> {
        let mut watchers = registry().lock().unwrap_or_else(|p| p.into_inner());
        watchers.retain(|_, watcher| watcher.strong_count() > 0);
        if let Some(existing) = watchers.get(key).and_then(Weak::upgrade) {
            return Some(existing);
        }
        let lanes: Arc<Mutex<Lanes>> = Arc::default();
        let dispatch_to = Arc::clone(&lanes);
        let common = git.then(|| key.to_owned());
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event {
                let mut lanes = dispatch_to.lock().unwrap_or_else(|p| p.into_inner());
                dispatch(common.as_deref(), &mut lanes, &event);
            }
        })
        .map_err(|err| warn(key, &err))
        .ok()?;
        let shared = Arc::new(Self {
            watcher: Mutex::new(watcher),
            lanes,
            refs_watched: Mutex::new(false),
        });
        watchers.insert(key.to_owned(), Arc::downgrade(&shared));
        Some(shared)
    }

    fn watch(&self, path: &Path, mode: RecursiveMode) -> bool {
        let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        watcher
            .watch(path, mode)
            .map_err(|err| warn(path, &err))
            .is_ok()
    }

    /// Watches the repository's loose refs, once. Not the common dir itself: every git
    /// command of every lane opens files there (`config`, `HEAD`), and inotify queues an event
    /// for each open; what changes there that matters (`packed-refs`, rewritten by `git
    /// pack-refs` or `gc`, which move no ref) is left to the sweeps.
    fn watch_refs(&self, common: &Path) {
        let mut watched = self.refs_watched.lock().unwrap_or_else(|p| p.into_inner());
        if !*watched {
            self.watch(&common.join("refs"), RecursiveMode::Recursive);
            *watched = true;
        }
    }

    fn add(&self, lane: WatchedLane) -> u64 {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        lanes.next_id += 1;
        let id = lanes.next_id;
        lanes.by_worktree.insert(lane.worktree.clone(), id);
        if let Some(head) = &lane.head_file {
            lanes.by_head_file.insert(head.clone(), id);
        }
        lanes.by_id.insert(id, lane);
        id
    }

    fn remove(&self, id: u64, watched: &[PathBuf]) {
        {
            let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(lane) = lanes.by_id.remove(&id) {
                lanes.by_worktree.remove(&lane.worktree);
                if let Some(head) = &lane.head_file {
                    lanes.by_head_file.remove(head);
                }
            }
        }
        let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        for path in watched {
            // A folder already gone took its watches with it.
            let _ = watcher.unwatch(path);
        }
    }
}

/// Tells each lane what `event` means for it.
fn dispatch(common: Option<&Path>, lanes: &mut Lanes, event: &notify::Event) {
    // Events were lost (the instance's queue overflowed): the sweeps look again. Telling every
    // lane at once would be worse: each look opens files under watch, and with many lanes the
    // events of those opens alone overflow the queue again.
    if event.need_rescan() || matches!(event.kind, EventKind::Access(_)) {
        return;
    }
    for path in &event.paths {
        let ref_name = common
            .and_then(|common| path.strip_prefix(common).ok())
            .filter(|r| r.starts_with("refs"))
            .and_then(Path::to_str);
        let worker = path
            .ancestors()
            .skip(1)
            .find_map(|folder| lanes.by_worktree.get(folder))
            .and_then(|id| lanes.by_id.get(id));
        if let Some(lane) = worker {
            if counts(&lane.worktree, path) {
                lane.progress.record(ProgressSource::WorktreeChange);
            } else if is_publication(&lane.worktree, path) {
                lane.published.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
        if let Some(id) = lanes.by_head_file.get(path.as_path()).copied()
            && let Some(lane) = lanes.by_id.get_mut(&id)
        {
            // `HEAD` may name another branch now: later commits move that one.
            lane.branch_ref = symbolic_ref(path);
            lane.tell_moved();
        }
        // A ref moved: the lanes on that branch, or based on it.
        if let Some(name) = ref_name {
            lanes
                .by_id
                .values()
                .filter(|lane| {
                    lane.branch_ref.as_deref() == Some(name)
                        || lane.base_refs.iter().any(|b| b == name)
                })
                .for_each(WatchedLane::tell_moved);
        }
    }
}

fn warn(path: &Path, err: &notify::Error) {
    tracing::warn!(
        path = %path.display(),
        error = %err,
        "not watched for changes; only the screen and the periodic sweeps show progress"
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

/// Whether `path` is the published state file of the lane in `root`, or the folder it is in.
fn is_publication(root: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(root) else {
        return false;
    };
    relative == Path::new(clawpool_lanes::state_file::STATE_FILE)
        || relative == Path::new(clawpool_worktree::layout::LANE_DIR)
}

/// A worktree's own git dir and its repository's common dir, read from its `.git` (a file
/// `gitdir: …` in a linked worktree, the folder itself in the main one), both canonical.
struct GitPaths {
    git_dir: PathBuf,
    common: PathBuf,
}

impl GitPaths {
    fn of(worktree: &Path) -> Option<Self> {
        let dot_git = worktree.join(".git");
        let git_dir = if dot_git.is_dir() {
            dot_git
        } else {
            let text = std::fs::read_to_string(&dot_git).ok()?;
            let named = text.strip_prefix("gitdir:")?.trim();
            worktree.join(named)
        };
        let git_dir = std::fs::canonicalize(git_dir).ok()?;
        let common = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(text) => std::fs::canonicalize(git_dir.join(text.trim())).ok()?,
            Err(_) => git_dir.clone(),
        };
        Some(Self { git_dir, common })
    }
}

/// The ref a `HEAD` file names (`ref: refs/heads/x`), `None` when detached or unreadable.
fn symbolic_ref(head: &Path) -> Option<String> {
    let text = std::fs::read_to_string(head).ok()?;
    Some(text.strip_prefix("ref:")?.trim().to_owned())
}

/// The full ref names a short name can stand for, in git's order (`git help revisions`).
fn ref_candidates(name: &str) -> Vec<String> {
    if name.starts_with("refs/") {
        return vec![name.to_owned()];
    }
    vec![
        format!("refs/{name}"),
        format!("refs/tags/{name}"),
        format!("refs/heads/{name}"),
        format!("refs/remotes/{name}"),
        format!("refs/remotes/{name}/HEAD"),
    ]
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

    #[test]
    fn the_published_state_file_and_its_folder_are_told_apart_from_other_bookkeeping() {
        let root = Path::new("/lanes/fix");
        assert!(is_publication(
            root,
            Path::new("/lanes/fix/.claw/worker-state.json")
        ));
        assert!(is_publication(root, Path::new("/lanes/fix/.claw")));
        assert!(!is_publication(root, Path::new("/lanes/fix/.claw/task.md")));
        assert!(!is_publication(
            root,
            Path::new("/lanes/other/.claw/worker-state.json")
        ));
    }

    #[test]
    fn a_short_base_name_stands_for_each_ref_git_would_read() {
        assert_eq!(ref_candidates("refs/heads/main"), ["refs/heads/main"]);
        let candidates = ref_candidates("origin/main");
        assert!(candidates.contains(&"refs/remotes/origin/main".to_owned()));
        assert!(candidates.contains(&"refs/heads/origin/main".to_owned()));
    }
}
