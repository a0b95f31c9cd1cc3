//! The one error type of this crate. Every variant names the thing it is about (a path, a
//! branch, a revision, a command), because these errors end up in front of a person deciding
//! what to fix, usually without the context of the call that failed.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What can go wrong while finding a repository, preparing or removing a lane worktree,
/// reading a worktree's status, fetching, or merging a lane forward.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorktreeError {
    /// The path is not a git repository, nor inside one (or it does not exist).
    #[error("{} is not a git repository (nor inside one)", path.display())]
    NotARepository {
        /// The path that was given.
        path: PathBuf,
    },

    /// The repository has no main worktree, so there is nowhere to put lanes beside it.
    #[error(
        "{} is a bare repository; lanes need a repository with a main worktree",
        path.display()
    )]
    BareRepository {
        /// The path that was given.
        path: PathBuf,
    },

    /// The base revision does not name a commit (not as given, not as `origin/<base>`).
    #[error("base {base:?} does not exist in {}", repo.display())]
    BaseNotFound {
        /// The revision as given.
        base: String,
        /// The main worktree of the repository it was looked up in.
        repo: PathBuf,
    },

    /// A worktree of this repository already sits at the lane's path, on another branch (or
    /// on a detached HEAD). It is left alone: it may hold another lane's work.
    #[error(
        "{} is already a worktree on {}, not on branch {expected:?}",
        path.display(),
        found.as_ref().map_or_else(|| "a detached HEAD".to_owned(), |b| format!("branch {b:?}"))
    )]
    WrongBranch {
        /// The worktree's folder.
        path: PathBuf,
        /// The branch the lane asked for.
        expected: String,
        /// The branch checked out there; `None` for a detached HEAD.
        found: Option<String>,
    },

    /// Something that is not a worktree of this repository is at the lane's path: a file, a
    /// folder with content, another repository, or this repository's main worktree.
    #[error(
        "{} already exists and is not a lane worktree of this repository (nor an empty folder)",
        path.display()
    )]
    PathOccupied {
        /// The lane's path.
        path: PathBuf,
    },

    /// A lane or branch name that git (or a folder name) cannot take.
    #[error("{name:?} is not a valid {what} name")]
    InvalidName {
        /// `"lane"` or `"branch"`.
        what: &'static str,
        /// The name as given.
        name: String,
    },

    /// The path given for removal is not a linked worktree of this repository.
    #[error("{} is not a lane worktree of {}", path.display(), repo.display())]
    NotALaneWorktree {
        /// The path that was given.
        path: PathBuf,
        /// The main worktree of the repository.
        repo: PathBuf,
    },

    /// The worktree has modified or untracked files, and removal was not forced.
    #[error(
        "{} has uncommitted changes or untracked files; not removed (force removes it anyway)",
        path.display()
    )]
    Dirty {
        /// The worktree's folder.
        path: PathBuf,
    },

    /// A git command failed; `stderr` is what git said.
    #[error("`{command}` failed: {stderr}")]
    Git {
        /// The command line, for a person to rerun.
        command: String,
        /// git's error output (or the exit status when it printed nothing).
        stderr: String,
    },

    /// A git command that talks to another machine (`fetch`) did not finish in time; it was
    /// killed, with everything it started.
    #[error("`{command}` did not finish within {} s and was stopped", after.as_secs_f64())]
    TimedOut {
        /// The command line, for a person to rerun.
        command: String,
        /// How long it was given.
        after: Duration,
    },

    /// The remote named for a fetch is not configured in the repository.
    #[error("{remote:?} is not a remote of {}", repo.display())]
    UnknownRemote {
        /// The name as given.
        remote: String,
        /// The main worktree of the repository.
        repo: PathBuf,
    },

    /// A merge or rebase that stopped was aborted, but the worktree is not back where it was
    /// before (another branch or commit, an operation still in progress, or changed files).
    /// Nothing more was done to it: a person has to look.
    #[error(
        "after aborting, {} is not back at {expected_head} on branch {branch:?}: {found}",
        path.display()
    )]
    NotRestored {
        /// The lane's worktree.
        path: PathBuf,
        /// The branch it had checked out.
        branch: String,
        /// The commit it was at before the merge or rebase.
        expected_head: String,
        /// What is different.
        found: String,
    },

    /// A git query (through libgit2) failed for another reason than "not a repository": an
    /// unreadable repository, an unsupported repository extension, an unborn HEAD.
    #[error("cannot read {what} of {}: {message}", path.display())]
    Query {
        /// What was being read.
        what: &'static str,
        /// The repository or worktree it was read from.
        path: PathBuf,
        /// libgit2's message.
        message: String,
    },

    /// A write made through libgit2 (a lane's new branch, its checkout) failed.
    #[error("cannot {what} in {}: {message}", path.display())]
    Write {
        /// The operation, as a verb phrase ("create branch", "check out").
        what: &'static str,
        /// The repository or worktree it was made in.
        path: PathBuf,
        /// libgit2's message.
        message: String,
    },

    /// A file-system operation failed.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// The operation, as a verb phrase ("create folder", "write").
        what: &'static str,
        /// The file or folder it was done on.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// The per-repository lock file could not be created or locked.
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// Creating a worktree failed, and undoing what it had made failed too: `leftovers` says
    /// what is still there to remove by hand.
    #[error("{cause}; cleaning up also failed, still present: {leftovers}")]
    CleanupFailed {
        /// Why the creation failed.
        #[source]
        cause: Box<WorktreeError>,
        /// What is left behind, and why it could not be removed.
        leftovers: String,
    },
}

impl WorktreeError {
    /// An [`Io`](WorktreeError::Io) error about `path`.
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        WorktreeError::Io {
            what,
            path: path.into(),
            source,
        }
    }

    /// A [`Query`](WorktreeError::Query) error from a libgit2 error.
    pub(crate) fn query(what: &'static str, path: impl Into<PathBuf>, err: &git2::Error) -> Self {
        WorktreeError::Query {
            what,
            path: path.into(),
            message: err.message().to_owned(),
        }
    }
}
