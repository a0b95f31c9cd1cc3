//! Git for lanes: one worktree and one branch per lane, and the freshness of that branch
//! against its base.
//!
//! What lands here: creating and reusing lane worktrees (the git CLI for `worktree add`,
//! `fetch`, `merge`, serialised per repository), read-only queries through git2 (ahead/behind,
//! merge-base, the commits a lane lacks, paused operations such as a rebase), and
//! merge-forward. Nothing here knows about terminals or agents.
//!
//! The crate is empty until the lanes and branch-freshness issues fill it.
