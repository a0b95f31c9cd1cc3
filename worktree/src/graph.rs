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
//! graph chain) is left as it is: its maintenance is its owner's. When that graph is one
//! libgit2 cannot read ([`commit_graph`] says so), a freshness check walks the history with
//! the git CLI instead, which does read it.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

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

/// Which commit-graph a repository has, from libgit2's point of view: whether its history
/// walks can be fast through libgit2, or only through git.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitGraph {
    /// None that git would use either: no `objects/info/commit-graph` file and no split-graph
    /// chain (`objects/info/commit-graphs/commit-graph-chain`).
    None,
    /// A single `objects/info/commit-graph` file libgit2 reads: format version 1, SHA-1, and
    /// only chunks libgit2 1.9 knows (fan-out, lookup, commit data, extra edges, and the
    /// changed-path Bloom filters it skips) — generation numbers v1, as
    /// [`ensure_commit_graph`] writes.
    Readable,
    /// A graph git uses and libgit2 ignores (it then reads every commit object on the way):
    /// a file with any other chunk — generation numbers v2 (`GDA2`, `GDO2`), git's default
    /// since 2.31 and what `git gc` writes —, another format version, or a file it cannot
    /// parse; or only a split chain, which libgit2 does not read at all (`git maintenance`
    /// and `fetch.writeCommitGraph` write those).
    Unreadable,
}

/// The chunks libgit2 1.9 accepts in a commit-graph file (`commit_graph.c`); any other makes
/// it reject the whole file.
const LIBGIT2_CHUNKS: [&[u8; 4]; 6] = [b"OIDF", b"OIDL", b"CDAT", b"EDGE", b"BIDX", b"BDAT"];

/// What the graph files looked like when a repository was classified: size and modification
/// time of the single file and of the chain file, `None` for one that is not there. git
/// replaces both by renaming a new file into place, so a rewrite changes the time.
type Stamp = [Option<(u64, Option<SystemTime>)>; 2];

/// The last classification of each common dir, with the stamp it was made for.
static CLASSIFIED: Mutex<BTreeMap<PathBuf, (Stamp, CommitGraph)>> = Mutex::new(BTreeMap::new());

/// More repositories than this classified and the memory is cleared: the cost is reading one
/// file header again for each.
const MAX_CLASSIFIED: usize = 1024;

/// The commit-graph of the repository whose common git dir is `common_dir`, as libgit2 sees it.
///
/// The verdict is remembered per repository for this process and reused while the graph files
/// have the same size and modification time (two `stat`s), so that a graph rewritten by
/// `git gc` while clawpool runs is noticed on the next check; otherwise it costs reading the
/// file's header and table of contents (a few hundred bytes), never the whole file.
pub fn commit_graph(common_dir: &Path) -> CommitGraph {
    let info = common_dir.join("objects").join("info");
    let single = info.join("commit-graph");
    let chain = info.join("commit-graphs").join("commit-graph-chain");
    let stamp: Stamp = [&single, &chain].map(|file| {
        fs::metadata(file)
            .ok()
            .filter(fs::Metadata::is_file)
            .map(|meta| (meta.len(), meta.modified().ok()))
    });
    {
        let classified = CLASSIFIED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, verdict)) = classified.get(common_dir)
            && *seen == stamp
        {
            return *verdict;
        }
    }
    // git reads the single file when there is one and the chain only otherwise; libgit2 reads
    // only the single file.
    let verdict = match stamp {
        [Some(_), _] => {
            if libgit2_reads(&single) {
                CommitGraph::Readable
            } else {
                CommitGraph::Unreadable
            }
        }
        [None, Some(_)] => CommitGraph::Unreadable,
        [None, None] => CommitGraph::None,
    };
    let mut classified = CLASSIFIED.lock().unwrap_or_else(PoisonError::into_inner);
    if classified.len() >= MAX_CLASSIFIED && !classified.contains_key(common_dir) {
        classified.clear();
    }
    classified.insert(common_dir.to_path_buf(), (stamp, verdict));
    verdict
}

/// Whether libgit2 1.9 would accept the commit-graph `file`, judged as it does from the
/// header (`CGPH`, version 1, SHA-1) and the chunk ids in the table of contents; anything
/// unreadable counts as not accepted (git may still use it, and the CLI then gives the answer
/// either way).
fn libgit2_reads(file: &Path) -> bool {
    // Header: signature (4), version (1), hash version (1), chunk count (1), base graphs (1);
    // then 12 bytes per chunk (4-byte id, 8-byte offset) and a terminating entry.
    let mut header = [0u8; 8];
    let Ok(mut graph) = File::open(file) else {
        return false;
    };
    if graph.read_exact(&mut header).is_err()
        || &header[..4] != b"CGPH"
        || header[4] != 1
        || header[5] != 1
        || header[6] == 0
    {
        return false;
    }
    let mut toc = vec![0u8; usize::from(header[6]) * 12];
    if graph.read_exact(&mut toc).is_err() {
        return false;
    }
    toc.chunks_exact(12)
        .all(|entry| LIBGIT2_CHUNKS.iter().any(|id| entry[..4] == id[..]))
}
