//! Moving a base branch to a verified lane commit, and nothing else: the commit that lands
//! (the lane's HEAD for a fast-forward, or a merge commit of the base and the lane's HEAD with
//! the lane's tree — the tree that was verified), a compare-and-swap of the branch's ref (the
//! move happens only if the branch is still where it was read, so a base that moved meanwhile
//! is never overwritten), and the worktree that has the branch checked out brought along as a
//! fast-forward would bring it (`git read-tree -m -u OLD NEW`), which a dirty checkout
//! refuses.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::status::{dirty_paths, open_worktree};
use crate::{Repo, WorktreeError, git};

/// How a lane's work lands on its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandMethod {
    /// The base moves to the lane's verified HEAD (which contains the base): linear history,
    /// the lane's own commits and its merge-forward commit.
    #[default]
    FastForward,
    /// A merge commit on the base whose parents are the base and the lane's verified HEAD and
    /// whose tree is that HEAD's: one commit per landed lane on the base's first-parent line.
    MergeCommit,
}

/// Where a base branch is checked out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseCheckout {
    /// The worktree's top folder.
    pub path: PathBuf,
    /// Its uncommitted files (empty when clean).
    pub dirty: Vec<String>,
}

/// The full ref name of a local branch base (`main` → `refs/heads/main`); `None` when the
/// base is no local branch (a remote-tracking branch or a sha cannot be landed on).
pub fn local_branch_ref(repo: &Repo, base: &str) -> Option<String> {
    let name = base.strip_prefix("refs/heads/").unwrap_or(base);
    repo.branch_exists(name)
        .then(|| format!("refs/heads/{name}"))
}

/// The worktree (main or linked) that has `branch_ref` checked out, with its dirty files;
/// `None` when none has.
pub fn base_checkout(repo: &Repo, branch_ref: &str) -> Result<Option<BaseCheckout>, WorktreeError> {
    let list = git::run(
        repo.root(),
        &[
            OsStr::new("worktree"),
            OsStr::new("list"),
            OsStr::new("--porcelain"),
        ],
    )?;
    let mut path = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if line.strip_prefix("branch ") == Some(branch_ref)
            && let Some(path) = path.take()
        {
            let open = open_worktree(&path)?;
            let dirty = dirty_paths(&open, &path)?;
            return Ok(Some(BaseCheckout { path, dirty }));
        }
    }
    Ok(None)
}

/// The commit that lands `lane_head` (verified, containing `base_sha`) on a base at
/// `base_sha`: `lane_head` itself for a fast-forward, else a new merge commit with the lane's
/// tree.
pub fn landing_commit(
    repo: &Repo,
    method: LandMethod,
    base_sha: &str,
    lane_head: &str,
    message: &str,
) -> Result<String, WorktreeError> {
    match method {
        LandMethod::FastForward => Ok(lane_head.to_owned()),
        LandMethod::MergeCommit => {
            let tree = format!("{lane_head}^{{tree}}");
            let out = git::run(
                repo.root(),
                &[
                    OsStr::new("commit-tree"),
                    OsStr::new(&tree),
                    OsStr::new("-p"),
                    OsStr::new(base_sha),
                    OsStr::new("-p"),
                    OsStr::new(lane_head),
                    OsStr::new("-m"),
                    OsStr::new(message),
                ],
            )?;
            Ok(out.trim().to_owned())
        }
    }
}

/// Whether `ancestor` is reachable from `commit`.
pub fn is_ancestor(repo: &Repo, ancestor: &str, commit: &str) -> Result<bool, WorktreeError> {
    let open = git2::Repository::open(repo.root())
        .map_err(|err| WorktreeError::query("the repository", repo.root(), &err))?;
    let q = |err: git2::Error| WorktreeError::query("commits", repo.root(), &err);
    let a = git2::Oid::from_str(ancestor).map_err(q)?;
    let c = git2::Oid::from_str(commit).map_err(q)?;
    Ok(a == c || open.graph_descendant_of(c, a).map_err(q)?)
}

/// What a compare-and-swap of the base did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseMove {
    /// The base now points at the new commit.
    Moved,
    /// The base was no longer at the expected commit: nothing was written.
    MovedMeanwhile {
        /// Where it is now.
        now: String,
    },
}

/// Moves `branch_ref` from `old` to `new` only if it still points at `old` (`git update-ref
/// REF NEW OLD`, under git's ref lock), with `reason` in its reflog.
pub fn move_base(
    repo: &Repo,
    branch_ref: &str,
    old: &str,
    new: &str,
    reason: &str,
) -> Result<BaseMove, WorktreeError> {
    let moved = git::run(
        repo.root(),
        &[
            OsStr::new("update-ref"),
            OsStr::new("-m"),
            OsStr::new(reason),
            OsStr::new(branch_ref),
            OsStr::new(new),
            OsStr::new(old),
        ],
    );
    match moved {
        Ok(_) => Ok(BaseMove::Moved),
        Err(err) => match repo.resolve(branch_ref) {
            Ok(now) if now != old => Ok(BaseMove::MovedMeanwhile { now }),
            _ => Err(err),
        },
    }
}

/// Brings the checkout at `path` (whose branch just moved from `old` to `new`) along: its index
/// and files go from `old`'s tree to `new`'s as a fast-forward would (`git read-tree -m -u`),
/// which refuses to overwrite local changes.
pub fn bring_checkout_along(path: &Path, old: &str, new: &str) -> Result<(), WorktreeError> {
    git::run(
        path,
        &[
            OsStr::new("read-tree"),
            OsStr::new("-m"),
            OsStr::new("-u"),
            OsStr::new(old),
            OsStr::new(new),
        ],
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_git::git;

    #[test]
    fn the_base_moves_only_from_where_it_was_read() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        git(root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("a"), "1\n").expect("write");
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "one"]);
        let one = git(root, &["rev-parse", "HEAD"]);
        git(root, &["checkout", "-qb", "lane"]);
        std::fs::write(root.join("a"), "2\n").expect("write");
        git(root, &["commit", "-qam", "two"]);
        let two = git(root, &["rev-parse", "HEAD"]);
        git(root, &["checkout", "-q", "main"]);
        let repo = Repo::open(root).expect("repo");
        let main = local_branch_ref(&repo, "main").expect("a local branch");
        let checkout = base_checkout(&repo, &main)
            .expect("list")
            .expect("checked out");
        assert!(checkout.dirty.is_empty());
        // A stale expectation writes nothing.
        assert_eq!(
            move_base(&repo, &main, &two, &one, "test").expect("cas"),
            BaseMove::MovedMeanwhile { now: one.clone() }
        );
        assert_eq!(
            move_base(&repo, &main, &one, &two, "test").expect("cas"),
            BaseMove::Moved
        );
        bring_checkout_along(root, &one, &two).expect("along");
        assert_eq!(
            std::fs::read_to_string(root.join("a")).expect("read"),
            "2\n"
        );
        assert!(git(root, &["status", "--porcelain"]).is_empty());
        let merge = landing_commit(&repo, LandMethod::MergeCommit, &two, &two, "m").expect("m");
        assert_ne!(merge, two);
        assert!(is_ancestor(&repo, &two, &merge).expect("walk"));
        assert!(!is_ancestor(&repo, &merge, &two).expect("walk"));
    }
}
