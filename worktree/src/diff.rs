//! A lane's change, read through libgit2: what its branch changed since its merge base with
//! the base as it stands now (its own commits and the files they touch, with line counts), and
//! apart from it what is not committed yet (staged, unstaged and untracked files). Nothing here
//! runs git or writes anything.

use std::path::{Path, PathBuf};

use git2::{Delta, Diff, DiffOptions, Oid, Repository, Sort};
use serde::{Deserialize, Serialize};

use crate::WorktreeError;
use crate::status::open_worktree;

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// New.
    Added,
    /// Changed in place.
    Modified,
    /// Gone.
    Deleted,
    /// Moved (its old path in [`FileChange::old_path`]).
    Renamed,
    /// Its kind changed (a file became a symlink, say).
    TypeChanged,
    /// Not tracked by git yet.
    Untracked,
}

/// One file of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// Its path in the worktree (the new one for a rename).
    pub path: String,
    /// Its path before a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// How it changed.
    pub status: FileStatus,
    /// Lines added (0 for a binary file).
    pub insertions: usize,
    /// Lines removed (0 for a binary file).
    pub deletions: usize,
    /// Whether git sees it as binary (no line counts then).
    pub binary: bool,
}

/// One commit of the lane's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneCommit {
    /// Its full sha.
    pub sha: String,
    /// The first line of its message.
    pub summary: String,
    /// Its author's name.
    pub author: String,
}

/// A lane's change against its base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneDiff {
    /// The base as given (a branch, a ref or a sha).
    pub base: String,
    /// The base's commit now.
    pub base_sha: String,
    /// Where the lane's branch and the base last met: the committed change is counted from it.
    pub merge_base: String,
    /// The lane's HEAD.
    pub head: String,
    /// The lane's own commits (on its branch, not on the base; merges that brought the base
    /// in are left out), newest first.
    pub commits: Vec<LaneCommit>,
    /// What those commits change: the tree at the merge base against the tree at HEAD.
    pub files: Vec<FileChange>,
    /// What is not committed: HEAD against the index and the files on disk, untracked files
    /// included.
    pub uncommitted: Vec<FileChange>,
    /// The committed change as a unified patch (only when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The uncommitted change as a unified patch (only when asked for; untracked files in
    /// full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncommitted_patch: Option<String>,
}

/// The change of the worktree whose top folder is `worktree` against `base` (a branch, a ref
/// or a sha, resolved in the worktree's repository now). `with_patch` adds the unified patches.
pub fn lane_diff(worktree: &Path, base: &str, with_patch: bool) -> Result<LaneDiff, WorktreeError> {
    let repo = open_worktree(worktree)?;
    let q = |what: &'static str| move |err: git2::Error| WorktreeError::query(what, worktree, &err);
    let head = repo.refname_to_id("HEAD").map_err(q("HEAD"))?;
    let base_sha = repo
        .revparse_single(base)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| WorktreeError::BaseNotFound {
            base: base.to_owned(),
            repo: PathBuf::from(worktree),
        })?
        .id();
    let merge_base = repo
        .merge_base(head, base_sha)
        .map_err(q("the merge base of HEAD and the base"))?;
    let commits = own_commits(&repo, head, base_sha).map_err(q("the lane's commits"))?;
    let old = repo
        .find_commit(merge_base)
        .and_then(|c| c.tree())
        .map_err(q("the merge base's tree"))?;
    let new = repo
        .find_commit(head)
        .and_then(|c| c.tree())
        .map_err(q("HEAD's tree"))?;
    let mut committed = repo
        .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut DiffOptions::new()))
        .map_err(q("the committed change"))?;
    committed
        .find_similar(None)
        .map_err(q("the committed change's renames"))?;
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true);
    let pending = repo
        .diff_tree_to_workdir_with_index(Some(&new), Some(&mut options))
        .map_err(q("the uncommitted change"))?;
    Ok(LaneDiff {
        base: base.to_owned(),
        base_sha: base_sha.to_string(),
        merge_base: merge_base.to_string(),
        head: head.to_string(),
        commits,
        files: files(&committed).map_err(q("the committed change"))?,
        uncommitted: files(&pending).map_err(q("the uncommitted change"))?,
        patch: with_patch
            .then(|| patch(&committed))
            .transpose()
            .map_err(q("the committed patch"))?,
        uncommitted_patch: with_patch
            .then(|| patch(&pending))
            .transpose()
            .map_err(q("the uncommitted patch"))?,
    })
}

/// Commits reachable from `head` and not from `base`, newest first, merges left out.
fn own_commits(repo: &Repository, head: Oid, base: Oid) -> Result<Vec<LaneCommit>, git2::Error> {
    let mut walk = repo.revwalk()?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)?;
    walk.push(head)?;
    walk.hide(base)?;
    let mut commits = Vec::new();
    for id in walk {
        let commit = repo.find_commit(id?)?;
        if commit.parent_count() > 1 {
            continue;
        }
        commits.push(LaneCommit {
            sha: commit.id().to_string(),
            summary: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                .into_owned(),
            author: String::from_utf8_lossy(commit.author().name_bytes()).into_owned(),
        });
    }
    Ok(commits)
}

fn files(diff: &Diff<'_>) -> Result<Vec<FileChange>, git2::Error> {
    let mut out = Vec::new();
    for (n, delta) in diff.deltas().enumerate() {
        let status = match delta.status() {
            Delta::Added | Delta::Copied => FileStatus::Added,
            Delta::Deleted => FileStatus::Deleted,
            Delta::Renamed => FileStatus::Renamed,
            Delta::Typechange => FileStatus::TypeChanged,
            Delta::Untracked => FileStatus::Untracked,
            Delta::Modified => FileStatus::Modified,
            // Unmodified, ignored, unreadable or conflicted entries are no change of the lane's.
            _ => continue,
        };
        let path_of = |f: git2::DiffFile<'_>| {
            f.path()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let new_path = path_of(delta.new_file());
        let old_path = path_of(delta.old_file());
        let binary = delta.flags().is_binary();
        let (insertions, deletions) = match git2::Patch::from_diff(diff, n)? {
            Some(patch) => {
                let (_, added, removed) = patch.line_stats()?;
                (added, removed)
            }
            None => (0, 0),
        };
        out.push(FileChange {
            old_path: (status == FileStatus::Renamed).then_some(old_path),
            path: new_path,
            status,
            insertions,
            deletions,
            binary,
        });
    }
    Ok(out)
}

fn patch(diff: &Diff<'_>) -> Result<String, git2::Error> {
    let mut text = String::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin());
        }
        text.push_str(&String::from_utf8_lossy(line.content()));
        true
    })?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "{args:?}: {out:?}");
    }

    #[test]
    fn committed_and_uncommitted_are_told_apart() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path();
        git(repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("a.txt"), "one\ntwo\n").expect("write");
        git(repo, &["add", "."]);
        git(repo, &["commit", "-qm", "base"]);
        git(repo, &["checkout", "-qb", "lane"]);
        std::fs::write(repo.join("a.txt"), "one\nTWO\nthree\n").expect("write");
        git(repo, &["commit", "-qam", "lane work"]);
        git(repo, &["checkout", "-q", "main"]);
        std::fs::write(repo.join("b.txt"), "base moved\n").expect("write");
        git(repo, &["add", "."]);
        git(repo, &["commit", "-qm", "base moves"]);
        git(repo, &["checkout", "-q", "lane"]);
        std::fs::write(repo.join("new.txt"), "pending\n").expect("write");

        let diff = lane_diff(repo, "main", true).expect("diff");
        assert_eq!(diff.commits.len(), 1);
        assert_eq!(diff.commits[0].summary, "lane work");
        // The base's own later commit is not the lane's change.
        assert_eq!(diff.files.len(), 1, "{:?}", diff.files);
        assert_eq!(diff.files[0].path, "a.txt");
        assert_eq!(diff.files[0].status, FileStatus::Modified);
        assert_eq!((diff.files[0].insertions, diff.files[0].deletions), (2, 1));
        assert_eq!(diff.uncommitted.len(), 1);
        assert_eq!(diff.uncommitted[0].path, "new.txt");
        assert_eq!(diff.uncommitted[0].status, FileStatus::Untracked);
        assert!(diff.patch.as_deref().is_some_and(|p| p.contains("+TWO")));
        assert!(
            diff.uncommitted_patch
                .as_deref()
                .is_some_and(|p| p.contains("+pending"))
        );
    }
}
