//! Publishing a lane's branch: `git push REMOTE refs/heads/B:refs/heads/B` (the git CLI, so the
//! user's credentials, hooks and transport apply as for their own push, bounded by a timeout),
//! and the question gc asks before it removes a worktree — is this commit pushed, that is,
//! reachable from the branch's remote-tracking ref (`refs/remotes/R/B`, which git updates on a
//! successful push)?

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Repo, WorktreeError, git};

/// How long a push may take before git and its transport are killed.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(120);

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pushed {
    /// The remote.
    pub remote: String,
    /// The branch, as named on both sides.
    pub branch: String,
    /// The commit the remote's branch now has.
    pub head: String,
    /// Whether the remote had it already (nothing was sent).
    pub up_to_date: bool,
}

/// Pushes local branch `branch` of `repo` to the branch of the same name on `remote`. A push
/// the remote refuses (not a fast-forward, a hook, a protected branch) is an error with git's
/// message; nothing is forced.
pub fn push_branch(repo: &Repo, remote: &str, branch: &str) -> Result<Pushed, WorktreeError> {
    let branch = branch.strip_prefix("refs/heads/").unwrap_or(branch);
    let local = format!("refs/heads/{branch}");
    let head = repo.resolve(&local)?;
    let tracking = format!("refs/remotes/{remote}/{branch}");
    let before = repo.resolve(&tracking).ok();
    let refspec = format!("{local}:{local}");
    // `--porcelain` keeps the output one line per ref; `-u` records the upstream so that the
    // branch names the remote it was published to.
    git::run_with_timeout(
        repo.root(),
        &[
            OsStr::new("push"),
            OsStr::new("--porcelain"),
            OsStr::new("-u"),
            OsStr::new(remote),
            OsStr::new(&refspec),
        ],
        PUSH_TIMEOUT,
    )?;
    Ok(Pushed {
        remote: remote.to_owned(),
        branch: branch.to_owned(),
        up_to_date: before.as_deref() == Some(head.as_str()),
        head,
    })
}

/// The remote-tracking refs (`refs/remotes/R/branch`, any remote R) that contain `commit`:
/// where it is known to be pushed. Empty when none does (or git cannot tell).
pub fn pushed_to(repo: &Path, commit: &str, branch: &str) -> Vec<String> {
    let Ok(list) = git::run(
        repo,
        &[
            OsStr::new("for-each-ref"),
            OsStr::new("--format=%(refname)"),
            OsStr::new("--contains"),
            OsStr::new(commit),
            OsStr::new("refs/remotes/"),
        ],
    ) else {
        return Vec::new();
    };
    list.lines()
        .filter(|name| {
            name.strip_prefix("refs/remotes/")
                .and_then(|rest| rest.split_once('/'))
                .is_some_and(|(_, pushed)| pushed == branch)
        })
        .map(str::to_owned)
        .collect()
}
