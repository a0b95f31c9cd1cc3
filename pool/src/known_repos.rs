//! The user's index of repositories with lanes: `$XDG_STATE_HOME/clawpool/repositories.json`
//! (default `~/.local/state/clawpool/repositories.json`), which `clawpool ui --all` and
//! `clawpool board --all` read to find every repository with lanes on this machine without
//! scanning the disk. `spawn` adds a repository when it registers a lane there, `gc` removes
//! it when its last lane goes; both rewrite the file atomically under a lock
//! (`repositories.lock` beside it). A repository whose lane registry has gone since (the
//! repository deleted, its lanes removed by hand) is left out quietly when the index is read.

use std::fs::File;
use std::path::{Path, PathBuf};

use clawpool_lanes::state_file::now_secs;
use clawpool_worktree::Repo;
use serde::{Deserialize, Serialize};

use clawpool_lane::registry::registered_names;

/// The index file's name in clawpool's state folder.
const INDEX_FILE: &str = "repositories.json";
/// The lock taken while the index is rewritten.
const LOCK_FILE: &str = "repositories.lock";

/// The index as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    repositories: Vec<KnownRepo>,
}

/// One repository in the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownRepo {
    /// The top folder of its main worktree.
    pub root: PathBuf,
    /// When spawn first registered a lane in it (seconds since the epoch).
    pub added_at: u64,
}

/// clawpool's folder in the user's state dir: `$XDG_STATE_HOME/clawpool` when that is an
/// absolute path (the XDG spec ignores a relative one), else `$HOME/.local/state/clawpool`.
pub fn state_folder() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute());
    let base = match xdg {
        Some(dir) => dir,
        None => PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?)
            .join(".local")
            .join("state"),
    };
    Some(base.join("clawpool"))
}

/// Where the index is, for messages and docs.
pub fn index_path() -> Option<PathBuf> {
    state_folder().map(|dir| dir.join(INDEX_FILE))
}

/// Every repository in the index that still has registered lanes, in the order they were
/// added. A missing index is an empty one; an unreadable one is an error naming the file.
pub fn read() -> Result<Vec<Repo>, String> {
    let Some(folder) = state_folder() else {
        return Err("neither XDG_STATE_HOME nor HOME is set: no index of repositories".into());
    };
    let index = load(&folder.join(INDEX_FILE))?;
    Ok(index
        .repositories
        .iter()
        .filter_map(|known| Repo::open(&known.root).ok())
        .filter(|repo| !registered_names(repo).is_empty())
        .collect())
}

/// Adds `repo` to the index unless it is there already (spawn, on registering a lane).
pub fn add(repo: &Repo) -> Result<(), String> {
    update(|index| {
        if index.repositories.iter().any(|k| k.root == repo.root()) {
            return false;
        }
        index.repositories.push(KnownRepo {
            root: repo.root().to_owned(),
            added_at: now_secs(),
        });
        true
    })
}

/// Removes `repo` from the index (gc, once its last lane is gone). A repository the index
/// does not name leaves it untouched (not even created).
pub fn remove(repo: &Repo) -> Result<(), String> {
    let Some(folder) = state_folder() else {
        return Ok(());
    };
    if !load(&folder.join(INDEX_FILE))?
        .repositories
        .iter()
        .any(|k| k.root == repo.root())
    {
        return Ok(());
    }
    update(|index| {
        let before = index.repositories.len();
        index.repositories.retain(|k| k.root != repo.root());
        index.repositories.len() != before
    })
}

/// Reads the index under its lock, lets `change` edit it, and writes it back (through a
/// temporary file renamed over it) when `change` says it changed something.
fn update(change: impl FnOnce(&mut Index) -> bool) -> Result<(), String> {
    let Some(folder) = state_folder() else {
        return Err("neither XDG_STATE_HOME nor HOME is set: no index of repositories".into());
    };
    std::fs::create_dir_all(&folder).map_err(|e| format!("creating {}: {e}", folder.display()))?;
    let lock_path = folder.join(LOCK_FILE);
    let lock = File::create(&lock_path)
        .and_then(|file| file.lock().map(|()| file))
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    let path = folder.join(INDEX_FILE);
    let mut index = load(&path)?;
    if change(&mut index) {
        let text = serde_json::to_string_pretty(&index).expect("the index serializes");
        clawpool_worktree::replace::replace_file(&path, format!("{text}\n").as_bytes())
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    drop(lock);
    Ok(())
}

fn load(path: &Path) -> Result<Index, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| format!("{} is not an index of repositories: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index::default()),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}
