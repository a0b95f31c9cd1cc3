//! Merge-forward: bringing a lane's base into the lane's branch, inside the lane's own
//! worktree, by its policy — merge, rebase, or leave it to the caller (warn, block).
//!
//! The rules that make it safe to run unattended: only a clean worktree on a branch, with no
//! operation in progress, is touched; nothing is ever stashed (not even through
//! `merge.autoStash`/`rebase.autoStash`); a merge or rebase that stops on conflicts is aborted
//! and the worktree verified to be exactly where it was; nothing is pushed; and git runs in
//! the lane's worktree only, so the main worktree and the other lanes are never touched.
//!
//! No repository lock is taken (unlike worktree creation): a merge or rebase writes the lane
//! worktree's own git dir (HEAD, index, `MERGE_HEAD`, `rebase-merge/`), the lane's branch ref
//! — checked out only here, so no other worktree updates it — and new objects, which git adds
//! atomically whoever else is writing. The files the lock guards (`config`, `packed-refs`,
//! `worktrees/`) are not written, and `rebase.updateRefs` is turned off so that a rebase never
//! moves another branch. One merge-forward per lane at a time is the caller's to ensure (git's
//! own `index.lock` makes a second one fail rather than interleave).

use std::ffi::OsStr;
use std::path::Path;

use git2::{ErrorCode, Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::operation::{self, GitOperation};
use crate::status::{self, HeadState};
use crate::{Repo, WorktreeError, base, git, paths};

/// What a lane does when its base has moved on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergePolicy {
    /// Merge the base into the lane's branch (a fast-forward when the lane has no commits of
    /// its own, a merge commit otherwise).
    #[default]
    MergeForward,
    /// Rebase the lane's commits onto the base (rewrites the lane's branch).
    Rebase,
    /// Change nothing; the caller reports the lane as stale.
    Warn,
    /// Change nothing; the caller holds the lane until someone brings it up to date.
    Block,
}

/// How the base was brought in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeMethod {
    /// `git merge`.
    Merge,
    /// `git rebase`.
    Rebase,
}

/// What [`merge_forward`] did. Every outcome but `Merged` left the worktree as it was.
///
/// In JSON: `{"outcome": "merged", "old_head": …, …}` and so on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum MergeOutcome {
    /// The lane already has every base commit; nothing was done.
    UpToDate {
        /// The lane's HEAD.
        head: String,
        /// The base commit.
        base_sha: String,
    },
    /// The base was brought in: the branch moved from `old_head` to `new_head`, which has
    /// `base_sha` in its history. Nothing was pushed.
    Merged {
        /// The lane's HEAD before.
        old_head: String,
        /// The lane's HEAD now.
        new_head: String,
        /// The base commit brought in.
        base_sha: String,
        /// Merge or rebase.
        method: MergeMethod,
    },
    /// The lane is behind, but its policy is `warn` or `block`: nothing was done, what to do
    /// is the caller's.
    NotApplied {
        /// The policy.
        policy: MergePolicy,
        /// The lane's HEAD.
        head: String,
        /// The base commit the lane lacks.
        base_sha: String,
    },
    /// Refused: the worktree has uncommitted changes or untracked files (listed, relative to
    /// its top; an untracked folder once, ending in `/`). Nothing was done.
    Dirty {
        /// The paths that make it dirty.
        paths: Vec<String>,
    },
    /// The merge or rebase stopped on conflicts in `paths`; it was aborted and the worktree
    /// verified to be back at `head`, on its branch, clean.
    Conflict {
        /// The conflicting paths, relative to the worktree's top.
        paths: Vec<String>,
        /// The lane's HEAD, as before and again now.
        head: String,
        /// The base commit that conflicted.
        base_sha: String,
        /// Merge or rebase.
        method: MergeMethod,
    },
    /// Refused: a git operation is in progress in the worktree (someone else's; it is not
    /// touched). Nothing was done.
    OperationInProgress {
        /// The operation.
        operation: GitOperation,
    },
    /// Refused: the worktree's HEAD is detached, so there is no branch to bring the base
    /// into. Nothing was done.
    Detached {
        /// The commit checked out.
        sha: String,
    },
    /// Refused: the lane and the base share no history (freshness `diverged`); git would
    /// refuse to join unrelated histories. Nothing was done.
    Diverged {
        /// The lane's HEAD.
        head: String,
        /// The base commit.
        base_sha: String,
    },
}

/// Brings `base` (resolved as [`crate::resolve_base`] does; fetch first with
/// [`crate::fetch_if_due`] to merge the remote's latest) into the branch checked out in the
/// lane worktree `worktree`, by `policy`.
///
/// In order: an operation in progress, a detached HEAD, a lane that already has the base, a
/// base with no common history, a `warn`/`block` policy and a dirty worktree each return
/// their outcome without changing anything. Otherwise, in the worktree,
/// `git merge --no-edit --ff -m "Merge <base> into <branch>" <base sha>` or
/// `git rebase <base sha>` runs, with any stashing turned off and, only when git has no
/// identity for the repository, `user.name=clawpool`/`user.email=clawpool@localhost`.
/// Hooks run as usual.
///
/// If it stops on conflicts it is aborted (`git merge --abort`/`git rebase --abort`) and the
/// worktree verified — same branch, same commit, no operation, clean — before
/// [`MergeOutcome::Conflict`] is returned; if it is not back,
/// [`WorktreeError::NotRestored`]. Any other failure of git is returned as
/// [`WorktreeError::Git`] after the same abort and verification.
///
/// `worktree` must be a linked worktree of `repo` (its top folder); the main worktree or
/// anything else is [`WorktreeError::NotALaneWorktree`].
pub fn merge_forward(
    repo: &Repo,
    worktree: &Path,
    base: &str,
    policy: MergePolicy,
) -> Result<MergeOutcome, WorktreeError> {
    let lane = status::open_worktree(worktree)?;
    let ours = paths::normalize(lane.commondir()).is_ok_and(|c| c == repo.common_dir());
    if !ours || !lane.is_worktree() {
        return Err(WorktreeError::NotALaneWorktree {
            path: worktree.to_path_buf(),
            repo: repo.root().to_path_buf(),
        });
    }
    if let Some(operation) = operation::operation_of(&lane) {
        return Ok(MergeOutcome::OperationInProgress { operation });
    }
    let (branch, old_head) = match status::head_state_of(&lane, worktree)? {
        HeadState::Branch { name, sha } => (name, sha),
        HeadState::Detached { sha } => return Ok(MergeOutcome::Detached { sha }),
    };
    let git = repo.git2()?;
    let base = base::resolve_in(&git, base, repo.root())?;
    let head_oid = oid(&old_head, worktree)?;
    let base_oid = oid(&base.sha, worktree)?;
    let has_base = head_oid == base_oid
        || git
            .graph_descendant_of(head_oid, base_oid)
            .map_err(|err| WorktreeError::query("the history", worktree, &err))?;
    if has_base {
        return Ok(MergeOutcome::UpToDate {
            head: old_head,
            base_sha: base.sha,
        });
    }
    match git.merge_base(head_oid, base_oid) {
        Ok(_) => {}
        Err(err) if err.code() == ErrorCode::NotFound => {
            return Ok(MergeOutcome::Diverged {
                head: old_head,
                base_sha: base.sha,
            });
        }
        Err(err) => return Err(WorktreeError::query("the merge base", worktree, &err)),
    }
    let method = match policy {
        MergePolicy::MergeForward => MergeMethod::Merge,
        MergePolicy::Rebase => MergeMethod::Rebase,
        MergePolicy::Warn | MergePolicy::Block => {
            return Ok(MergeOutcome::NotApplied {
                policy,
                head: old_head,
                base_sha: base.sha,
            });
        }
    };
    let dirty = status::dirty_paths(&lane, worktree)?;
    if !dirty.is_empty() {
        return Ok(MergeOutcome::Dirty { paths: dirty });
    }

    let mut args: Vec<String> = identity_overrides(&lane, worktree);
    match method {
        MergeMethod::Merge => {
            args.extend(
                [
                    "-c",
                    "merge.autoStash=false",
                    "merge",
                    "--quiet",
                    "--no-edit",
                    // Whatever `merge.ff` says: a lane with no commits of its own just moves
                    // up, one with commits gets a merge commit, and neither fails.
                    "--ff",
                    // Files git ignores are not the lane's to lose either.
                    "--no-overwrite-ignore",
                    "-m",
                ]
                .map(str::to_owned),
            );
            args.push(format!("Merge {} into {branch}", base.name));
        }
        MergeMethod::Rebase => {
            args.extend(
                [
                    "-c",
                    "rebase.autoStash=false",
                    "-c",
                    "rebase.updateRefs=false",
                    "rebase",
                    "--quiet",
                ]
                .map(str::to_owned),
            );
        }
    }
    // The sha, not the name: what was checked is what is merged, even if a fetch moves the
    // remote-tracking ref meanwhile.
    args.push(base.sha.clone());
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    drop(lane);

    let restore = Restore {
        worktree,
        branch: &branch,
        old_head: &old_head,
        method,
    };
    match git::run(worktree, &args) {
        Ok(_) => {
            let new_head = restore.check_merged(&git, base_oid)?;
            Ok(MergeOutcome::Merged {
                old_head,
                new_head,
                base_sha: base.sha,
                method,
            })
        }
        Err(err) => {
            let paths = restore.abort()?;
            if paths.is_empty() {
                // Stopped for another reason than conflicts (a hook, a file git would not
                // overwrite): the worktree is back, and git's message says what happened.
                Err(err)
            } else {
                Ok(MergeOutcome::Conflict {
                    paths,
                    head: old_head,
                    base_sha: base.sha,
                    method,
                })
            }
        }
    }
}

/// Where the lane was before, to check where it is after.
struct Restore<'a> {
    worktree: &'a Path,
    branch: &'a str,
    old_head: &'a str,
    method: MergeMethod,
}

impl Restore<'_> {
    /// After git reported success: the branch is still checked out, nothing is in progress,
    /// and its new tip has the base. Returns the new tip.
    fn check_merged(&self, git: &Repository, base: Oid) -> Result<String, WorktreeError> {
        let lane = status::open_worktree(self.worktree)?;
        let head = status::head_state_of(&lane, self.worktree)?;
        let problem = match (&head, operation::operation_of(&lane)) {
            (_, Some(operation)) => Some(format!("{operation:?} still in progress")),
            (HeadState::Detached { .. }, None) => Some("HEAD is detached".to_owned()),
            (HeadState::Branch { name, .. }, None) if name != self.branch => {
                Some(format!("branch {name:?} is checked out"))
            }
            (HeadState::Branch { sha, .. }, None) => {
                let new = oid(sha, self.worktree)?;
                let has_base = new == base
                    || git
                        .graph_descendant_of(new, base)
                        .map_err(|err| WorktreeError::query("the history", self.worktree, &err))?;
                (!has_base).then(|| format!("the new head {sha} does not contain the base"))
            }
        };
        match problem {
            None => Ok(head.sha().to_owned()),
            Some(found) => Err(WorktreeError::Git {
                command: format!("git {}", self.verb()),
                stderr: format!(
                    "reported success, but in {}: {found}",
                    self.worktree.display()
                ),
            }),
        }
    }

    /// After git failed: aborts what it left in progress, then checks the worktree is back
    /// where it was. Returns the paths that were in conflict.
    fn abort(&self) -> Result<Vec<String>, WorktreeError> {
        let lane = status::open_worktree(self.worktree)?;
        let mut conflicts = Vec::new();
        if operation::operation_of(&lane).is_some() {
            // Read before aborting: the abort clears them from the index.
            conflicts = conflict_paths(&lane, self.worktree)?;
            let args = [self.verb(), "--abort"].map(OsStr::new);
            if let Err(err) = git::run(self.worktree, &args) {
                return Err(self.not_restored(format!("{err}")));
            }
        }
        drop(lane);
        self.verify()?;
        Ok(conflicts)
    }

    /// Same branch, same commit, nothing in progress, nothing modified or untracked.
    fn verify(&self) -> Result<(), WorktreeError> {
        let lane = status::open_worktree(self.worktree)?;
        if let Some(operation) = operation::operation_of(&lane) {
            return Err(self.not_restored(format!("{operation:?} still in progress")));
        }
        match status::head_state_of(&lane, self.worktree)? {
            HeadState::Branch { name, sha } if name == self.branch && sha == self.old_head => {}
            HeadState::Branch { name, sha } => {
                return Err(self.not_restored(format!("HEAD is {sha} on branch {name:?}")));
            }
            HeadState::Detached { sha } => {
                return Err(self.not_restored(format!("HEAD is detached at {sha}")));
            }
        }
        let dirty = status::dirty_paths(&lane, self.worktree)?;
        if !dirty.is_empty() {
            return Err(self.not_restored(format!("changed files: {}", dirty.join(", "))));
        }
        Ok(())
    }

    fn not_restored(&self, found: String) -> WorktreeError {
        WorktreeError::NotRestored {
            path: self.worktree.to_path_buf(),
            branch: self.branch.to_owned(),
            expected_head: self.old_head.to_owned(),
            found,
        }
    }

    fn verb(&self) -> &'static str {
        match self.method {
            MergeMethod::Merge => "merge",
            MergeMethod::Rebase => "rebase",
        }
    }
}

/// The paths with conflicts in the worktree's index, sorted, each once.
fn conflict_paths(lane: &Repository, worktree: &Path) -> Result<Vec<String>, WorktreeError> {
    let query = |err: git2::Error| WorktreeError::query("the conflicts", worktree, &err);
    let index = lane.index().map_err(query)?;
    let mut paths = Vec::new();
    for conflict in index.conflicts().map_err(query)? {
        let conflict = conflict.map_err(query)?;
        // Whichever side has the path: a file deleted on one side has no entry there.
        if let Some(entry) = conflict.our.or(conflict.their).or(conflict.ancestor) {
            paths.push(String::from_utf8_lossy(&entry.path).into_owned());
        }
    }
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// `-c user.name=… -c user.email=…` for whichever of the two the repository's configuration
/// lacks, when git has no usable identity for it (as `git var` reports with git's own strict
/// rules: environment, configuration, then the system's user and host names). Without one, a
/// merge commit or a rebased commit cannot be written, which is common on CI machines. A
/// person's own identity, when there is one, is never overridden.
fn identity_overrides(lane: &Repository, worktree: &Path) -> Vec<String> {
    let known = ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"]
        .iter()
        .all(|var| git::run(worktree, &[OsStr::new("var"), OsStr::new(var)]).is_ok());
    if known {
        return Vec::new();
    }
    let config = lane.config().ok();
    let has = |key: &str| {
        config
            .as_ref()
            .and_then(|c| c.get_string(key).ok())
            .is_some_and(|value| !value.trim().is_empty())
    };
    let mut args = Vec::new();
    for (key, value) in [
        ("user.name", "clawpool"),
        ("user.email", "clawpool@localhost"),
    ] {
        if !has(key) {
            args.push("-c".to_owned());
            args.push(format!("{key}={value}"));
        }
    }
    args
}

fn oid(sha: &str, worktree: &Path) -> Result<Oid, WorktreeError> {
    Oid::from_str(sha).map_err(|err| WorktreeError::query("a commit id", worktree, &err))
}
