//! Git for lanes: one branch and one worktree per lane.
//!
//! A lane gets a branch (by default `lanes/<lane>`, started from the repository's main
//! branch) and a worktree (by default `<repo-parent>/<repo-name>.lanes/<lane>`), made by
//! [`prepare_lane_worktree`] from a [`LaneWorktreeSpec`]. Calling it again reuses the worktree;
//! a worktree on another branch, or anything else at the path, is refused. A creation that
//! fails takes back what it made. [`remove_lane_worktree`] removes a worktree (not its
//! branch), refusing one with uncommitted work unless forced; [`worktree_status`] says what a
//! worktree has checked out and whether it is dirty. [`Repo`] finds the repository, its main
//! branch and revisions, and keeps `.claw/` out of git through `info/exclude`.
//!
//! # Theory of operation
//!
//! Reads go through libgit2 (`git2`, no network features): they are cheap and need no
//! process. Writes — `git worktree add`, `git worktree remove`, `git branch -D` — go through
//! the git CLI, so they run the repository's hooks and checks exactly as a person's git would.
//! Writes to one repository are serialised by an OS file lock in its common git dir
//! (`<common>/clawpool/worktree.lock`), held across the checks and the commands, because
//! parallel `git worktree add` race on git's own administrative files. Nothing here knows about
//! terminals or agents. See `docs/worktrees.md` for the rules.

mod error;
mod git;
mod lane;
mod lock;
mod paths;
mod repo;
mod status;

pub use error::WorktreeError;
pub use lane::{LaneWorktreeSpec, Prepared, prepare_lane_worktree, remove_lane_worktree};
pub use repo::Repo;
pub use status::{WorktreeStatus, worktree_head, worktree_status};
