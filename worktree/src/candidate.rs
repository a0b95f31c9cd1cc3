//! A batched land run's candidate (`clawpool land --batch`): lanes merged together onto a base
//! commit without touching any lane's worktree or the base's checkout. Merges are done in the
//! object store (`git merge-tree --write-tree`, so a conflict is found before anything is
//! checked out), the candidate is one commit whose parents are the base and every merged lane
//! head (so the base's first-parent line gets exactly one commit per green batch, the tree that
//! was verified), and it is verified in a detached worktree of its own, made once per run and
//! removed after.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::{Repo, WorktreeError, git};

/// What merging a commit into another in the object store came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeMerge {
    /// A clean merge: its tree.
    Clean {
        /// The merged tree's id.
        tree: String,
    },
    /// Conflicts, in these files; nothing was written anywhere but unreferenced objects.
    Conflict {
        /// The conflicted files.
        paths: Vec<String>,
    },
}

/// Merges `theirs` into `ours` (both commits) in the object store: `git merge-tree
/// --write-tree --name-only`.
pub fn merge_trees(repo: &Repo, ours: &str, theirs: &str) -> Result<TreeMerge, WorktreeError> {
    let args = [
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        ours,
        theirs,
    ]
    .map(OsStr::new);
    let output = git::command(repo.root(), &args)
        .output()
        .map_err(|source| WorktreeError::io("run git in", repo.root(), source))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let tree = lines.next().unwrap_or_default().trim().to_owned();
    match output.status.code() {
        Some(0) => Ok(TreeMerge::Clean { tree }),
        // Exit 1 is git's "the merge has conflicts"; the files follow the tree id.
        Some(1) if !tree.is_empty() => Ok(TreeMerge::Conflict {
            paths: lines
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
        }),
        _ => git::finish(&args, output.status, &output.stdout, &output.stderr)
            .map(|_| TreeMerge::Clean { tree }),
    }
}

/// A commit of `tree` with `parents`, in order, and `message` (`git commit-tree`).
pub fn commit_tree(
    repo: &Repo,
    tree: &str,
    parents: &[&str],
    message: &str,
) -> Result<String, WorktreeError> {
    let mut args = vec![OsStr::new("commit-tree"), OsStr::new(tree)];
    for parent in parents {
        args.push(OsStr::new("-p"));
        args.push(OsStr::new(parent));
    }
    args.push(OsStr::new("-m"));
    args.push(OsStr::new(message));
    Ok(git::run(repo.root(), &args)?.trim().to_owned())
}

/// The detached worktree a run verifies its candidates in.
#[derive(Debug)]
pub struct CandidateWorktree {
    repo_root: PathBuf,
    path: PathBuf,
}

impl CandidateWorktree {
    /// Makes a detached worktree at `path` (left over from an earlier run: replaced), at
    /// `commit`.
    pub fn create(repo: &Repo, path: &Path, commit: &str) -> Result<Self, WorktreeError> {
        if path.exists() {
            remove(repo.root(), path);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| WorktreeError::io("create", parent, source))?;
        }
        git::run(
            repo.root(),
            &[
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--quiet"),
                OsStr::new("--detach"),
                path.as_os_str(),
                OsStr::new(commit),
            ],
        )?;
        Ok(CandidateWorktree {
            repo_root: repo.root().to_owned(),
            path: path.to_owned(),
        })
    }

    /// Its folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Puts exactly `commit`'s files in it: checked out detached, local changes and untracked
    /// files of an earlier candidate's verification removed (ignored files, such as build
    /// output, are kept).
    pub fn check_out(&self, commit: &str) -> Result<(), WorktreeError> {
        git::run(
            &self.path,
            &[
                OsStr::new("checkout"),
                OsStr::new("--quiet"),
                OsStr::new("--force"),
                OsStr::new("--detach"),
                OsStr::new(commit),
            ],
        )?;
        git::run(&self.path, &[OsStr::new("clean"), OsStr::new("-ffdq")]).map(|_| ())
    }
}

impl Drop for CandidateWorktree {
    /// The worktree goes with the run.
    fn drop(&mut self) {
        remove(&self.repo_root, &self.path);
    }
}

fn remove(repo_root: &Path, path: &Path) {
    let _ = git::run(
        repo_root,
        &[
            OsStr::new("worktree"),
            OsStr::new("remove"),
            OsStr::new("--force"),
            OsStr::new("--force"),
            path.as_os_str(),
        ],
    );
    let _ = std::fs::remove_dir_all(path);
    let _ = git::run(repo_root, &[OsStr::new("worktree"), OsStr::new("prune")]);
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_git::git;

    fn branch_with(root: &Path, name: &str, file: &str, content: &str) -> String {
        git(root, &["checkout", "-qb", name, "main"]);
        std::fs::write(root.join(file), content).expect("write");
        git(root, &["add", file]);
        git(root, &["commit", "-qm", name]);
        let sha = git(root, &["rev-parse", "HEAD"]);
        git(root, &["checkout", "-q", "main"]);
        sha
    }

    #[test]
    fn lanes_merge_into_one_candidate_commit_and_conflicts_are_named() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        git(root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("a"), "1\n").expect("write");
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "one"]);
        let base = git(root, &["rev-parse", "HEAD"]);
        let b = branch_with(root, "b", "b", "b\n");
        let c = branch_with(root, "c", "c", "c\n");
        let a1 = branch_with(root, "a1", "a", "x\n");
        let a2 = branch_with(root, "a2", "a", "y\n");
        let repo = Repo::open(root).expect("repo");

        let TreeMerge::Clean { tree } = merge_trees(&repo, &base, &b).expect("merge") else {
            panic!("b merges cleanly");
        };
        let step = commit_tree(&repo, &tree, &[&base, &b], "step").expect("commit");
        let TreeMerge::Clean { tree } = merge_trees(&repo, &step, &c).expect("merge") else {
            panic!("c merges cleanly");
        };
        let candidate = commit_tree(&repo, &tree, &[&base, &b, &c], "candidate").expect("commit");
        assert_eq!(
            git(root, &["rev-list", "--parents", "-n1", &candidate]),
            format!("{candidate} {base} {b} {c}")
        );
        let TreeMerge::Clean { tree } = merge_trees(&repo, &base, &a1).expect("merge") else {
            panic!("a1 merges cleanly");
        };
        let merged = commit_tree(&repo, &tree, &[&base, &a1], "m").expect("commit");
        assert_eq!(
            merge_trees(&repo, &merged, &a2).expect("merge"),
            TreeMerge::Conflict {
                paths: vec!["a".into()]
            }
        );

        let path = root.join(".git/candidate");
        let worktree = CandidateWorktree::create(&repo, &path, &base).expect("worktree");
        std::fs::write(path.join("junk"), "x").expect("write");
        worktree.check_out(&candidate).expect("check out");
        assert!(path.join("b").exists() && path.join("c").exists());
        assert!(!path.join("junk").exists());
        drop(worktree);
        assert!(!path.exists());
        // The base's checkout was never touched.
        assert_eq!(git(root, &["rev-parse", "HEAD"]), base);
        assert!(git(root, &["status", "--porcelain"]).is_empty());
    }
}
