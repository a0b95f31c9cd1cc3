//! A commit-graph libgit2 can read, written once when a repository has none.
//!
//! Walking a long history reads and inflates every commit object on the way (about 5 µs
//! each): a lane 40,000 commits behind costs a few hundred milliseconds per check. A
//! commit-graph (`objects/info/commit-graph`) holds every commit's parents and generation
//! number in one mapped file and cuts that several times over; git writes one itself on
//! `git gc` and `git maintenance`, so writing one is ordinary, additive repository upkeep.
//! libgit2 1.9 reads only generation numbers v1, while git ≥ 2.31 writes v2 by default, so the
//! graph written here asks for v1 on the command line (`-c`, the configuration is not
//! written); git reads v1 graphs as well. A repository that already has a graph (or a split
//! graph chain) is left as it is: its maintenance is its owner's.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::{WorktreeError, git};

/// The common dirs this process already looked at: one attempt each, whatever its result (a
/// failed write is not retried on every check).
static LOOKED_AT: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Whether the repository whose common git dir is `common_dir` has a commit-graph.
pub fn has_commit_graph(common_dir: &Path) -> bool {
    let info = common_dir.join("objects").join("info");
    info.join("commit-graph").is_file() || info.join("commit-graphs").is_dir()
}

/// Writes a commit-graph (generation numbers v1, every reachable commit) for the repository
/// whose common git dir is `common_dir`, running git in `worktree`, if it has none; at most
/// once per repository per process. `Ok(true)` when one was written now.
///
/// Two processes writing at once is safe: git takes `commit-graph.lock` and the second fails,
/// which is reported like any git failure; the graph of the first is there either way.
pub fn ensure_commit_graph(common_dir: &Path, worktree: &Path) -> Result<bool, WorktreeError> {
    {
        let mut seen = LOOKED_AT.lock().unwrap_or_else(PoisonError::into_inner);
        if !seen.insert(common_dir.to_path_buf()) {
            return Ok(false);
        }
    }
    if has_commit_graph(common_dir) {
        return Ok(false);
    }
    let args: Vec<&OsStr> = [
        "-c",
        "commitGraph.generationVersion=1",
        "commit-graph",
        "write",
        "--reachable",
        "--no-progress",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    git::run(worktree, &args)?;
    Ok(true)
}
