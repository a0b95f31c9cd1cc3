//! Git for lanes: one branch and one worktree per lane, and how each lane stands against its
//! base.
//!
//! A lane gets a branch (by default `lanes/<lane>`, started from the repository's main
//! branch) and a worktree (by default `<repo-parent>/<repo-name>.lanes/<lane>`), made by
//! [`prepare_lane_worktree`] from a [`LaneWorktreeSpec`]. Calling it again reuses the worktree;
//! a worktree on another branch, or anything else at the path, is refused. A creation that
//! fails takes back what it made. [`remove_lane_worktree`] removes a worktree (not its
//! branch), refusing one with uncommitted work unless forced; [`worktree_status`] says what a
//! worktree has checked out and whether it is dirty, [`head_state`] whether its HEAD is a
//! branch or detached. [`Repo`] finds the repository, its main branch and revisions, and keeps
//! `.claw/` out of git through `info/exclude`.
//!
//! Freshness: [`check_freshness`] compares a lane's HEAD with its base — the remote-tracking
//! branch when there is one ([`resolve_base`]), fetched at most once per interval per
//! repository ([`fetch_if_due`]) — and gives a [`Freshness`] record (fresh, stale, diverged or
//! unknown; ahead, behind, merge base, the missing commits) for the lane's state file.
//! [`git_operation`] reports a rebase, merge, cherry-pick, revert, `git am` or bisect in
//! progress in a worktree, during which there is no verdict. [`merge_forward`] brings the base
//! into a clean lane by its [`MergePolicy`] (merge, rebase, or leave it to the caller),
//! aborting back to the exact previous commit on conflict.
//!
//! # Theory of operation
//!
//! Reads go through libgit2 (`git2`, no network features): they are cheap and need no
//! process. The exception is a history walk (a freshness check's, or [`own_work`]'s)
//! in a repository whose commit-graph libgit2 cannot read ([`commit_graph`]): git reads it and
//! is then several times faster, so the walk runs `git rev-list`, `git merge-base` and
//! `git log` instead. Writes — `git worktree add`, `git worktree remove`, `git branch -D`, `git merge`,
//! `git rebase` — and `git fetch` go through the git CLI, so they run the repository's hooks
//! and checks exactly as a person's git would. The one exception is the registration of a
//! lane worktree on a new branch (`register`): its admin files are written with git's layout,
//! because `git worktree add` reads every other worktree and the n-th lane would cost O(n);
//! where no hook, `filter` or `working-tree-encoding` attribute is in play, its branch and checkout
//! are made by libgit2 too (`checkout`), so that creating a lane starts no process; otherwise
//! the branch, the checkout and the `post-checkout` hook are git's. Worktree creation and removal in one repository
//! are serialised by an OS file lock in its common git dir (`<common>/clawpool/worktree.lock`),
//! held across the checks and the commands, because parallel `git worktree add` race on git's
//! own administrative files; fetches by another (`fetch.lock`), with a stamp file that
//! throttles them. Nothing here knows about terminals or agents. See `docs/worktrees.md` for
//! the rules.
//!
//! Publishing: [`push_branch`] pushes a lane's branch to a remote (the git CLI, with a timeout);
//! [`pushed_to`] says which remote-tracking refs already contain a commit.

mod base;
mod candidate;
mod checkout;
mod diff;
mod error;
mod fetch;
mod freshness;
mod git;
mod graph;
mod land;
mod lane;
pub mod layout;
mod lock;
mod merge;
mod now;
mod operation;
mod paths;
mod push;
mod register;
pub mod replace;
mod repo;
mod status;
#[cfg(test)]
mod test_git;

pub use base::{BaseRef, resolve_base};
pub use candidate::{CandidateWorktree, TreeMerge, commit_tree, merge_trees};
pub use diff::{FileChange, FileStatus, LaneCommit, LaneDiff, lane_diff};
pub use error::WorktreeError;
pub use fetch::{FetchOptions, FetchOutcome, fetch_if_due};
pub use freshness::{
    BranchState, Freshness, FreshnessOptions, FreshnessState, check_branch_state, check_freshness,
};
pub use graph::{CommitGraph, commit_graph, ensure_commit_graph, has_commit_graph};
pub use land::{
    BaseCheckout, BaseMove, LandMethod, base_checkout, bring_checkout_along, is_ancestor,
    landing_commit, local_branch_ref, move_base,
};
pub use lane::{LaneWorktreeSpec, Prepared, prepare_lane_worktree, remove_lane_worktree};
pub use merge::{MergeMethod, MergeOutcome, MergePolicy, merge_forward};
pub use now::{BranchRecord, BranchesNow, LaneNow, Stamp};
pub use operation::{GitOperation, GitOperationKind, git_operation};
pub use push::{PUSH_TIMEOUT, Pushed, push_branch, pushed_to};
pub use repo::Repo;
pub use status::{
    HeadState, MissingCommit, NewCommits, OwnWork, WorktreeStatus, head_state, new_commits,
    own_work, worktree_head, worktree_status,
};
