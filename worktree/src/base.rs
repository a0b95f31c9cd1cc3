//! Which ref a lane is compared with and merged from.
//!
//! A lane's base is a name (`main`, `release/1.2`); what is compared is the remote-tracking
//! branch for it when the repository has a remote carrying it, because the remote is where
//! other people's work arrives, and the local branch of the same name is only as new as the
//! last time someone pulled it in the main worktree.

use std::path::Path;

use git2::Repository;
use serde::{Deserialize, Serialize};

use crate::{Repo, WorktreeError};

/// The ref a base resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRef {
    /// The ref compared, as git writes it short: `origin/main` for a remote-tracking branch,
    /// otherwise the base as given (`main`, `v1.2`, a sha).
    pub name: String,
    /// The commit it points to, as a full hex sha.
    pub sha: String,
    /// The remote `name` is a remote-tracking branch of (what to fetch to bring it up to
    /// date); `None` for a local ref or any other revision.
    pub remote: Option<String>,
}

/// What `base` resolves to in `repo`: the remote-tracking branch for it when there is one,
/// else `base` itself as any revision git understands.
///
/// The remote-tracking branch is given by the first of these rules that applies:
///
/// 1. the upstream configured for the local branch `base` (`branch.<base>.remote` and
///    `.merge`, as `git branch --set-upstream-to` writes them), when that is a remote;
/// 2. `base` itself when it already names one (`origin/main`);
/// 3. `refs/remotes/origin/<base>`, or, when there is no `origin` but exactly one remote,
///    `refs/remotes/<that remote>/<base>`.
///
/// When none applies (several remotes, none of them `origin`, no upstream configured: there
/// is no telling which remote matters), or its ref does not exist (never fetched), `base` is
/// used as given.
///
/// Fails with [`WorktreeError::BaseNotFound`] when `base` names no commit.
pub fn resolve_base(repo: &Repo, base: &str) -> Result<BaseRef, WorktreeError> {
    resolve_in(&repo.git2()?, base, repo.root())
}

/// A remote-tracking branch that may carry a base.
pub(crate) struct Tracking {
    /// The remote it belongs to.
    pub(crate) remote: String,
    /// Its full ref name (`refs/remotes/origin/main`), which may not exist yet.
    pub(crate) refname: String,
}

/// The remote-tracking branch for `base` by the rules of [`resolve_base`], whether or not its
/// ref exists yet (a fetch may create it).
pub(crate) fn tracking(git: &Repository, base: &str) -> Option<Tracking> {
    if base.is_empty() || base.starts_with('-') {
        return None;
    }
    let local = format!("refs/heads/{base}");
    if let Ok(upstream) = git.branch_upstream_name(&local)
        && let Ok(refname) = upstream.as_str()
        && refname.starts_with("refs/remotes/")
        && let Ok(remote) = git.branch_upstream_remote(&local)
        && let Ok(remote) = remote.as_str()
    {
        return Some(Tracking {
            remote: remote.to_owned(),
            refname: refname.to_owned(),
        });
    }
    let remotes: Vec<String> = git
        .remotes()
        .map(|names| {
            names
                .iter()
                .flatten()
                .flatten()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // The longest remote name that prefixes `base`: remote names may contain `/` themselves.
    if let Some(remote) = remotes
        .iter()
        .filter(|r| {
            base.strip_prefix(r.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|rest| !rest.is_empty())
        })
        .max_by_key(|r| r.len())
    {
        return Some(Tracking {
            remote: remote.clone(),
            refname: format!("refs/remotes/{base}"),
        });
    }
    let remote = if remotes.iter().any(|r| r == "origin") {
        "origin"
    } else if let [only] = remotes.as_slice() {
        only.as_str()
    } else {
        return None;
    };
    let refname = format!("refs/remotes/{remote}/{base}");
    // `HEAD~2` or `main^{commit}` cannot be on a remote; `git2` would reject the name anyway.
    git2::Reference::is_valid_name(&refname).then(|| Tracking {
        remote: remote.to_owned(),
        refname,
    })
}

/// [`resolve_base`] in an open repository; `root` names it in errors.
pub(crate) fn resolve_in(
    git: &Repository,
    base: &str,
    root: &Path,
) -> Result<BaseRef, WorktreeError> {
    if let Some(tracking) = tracking(git, base)
        && let Ok(commit) = git
            .find_reference(&tracking.refname)
            .and_then(|r| r.peel_to_commit())
    {
        let name = tracking
            .refname
            .strip_prefix("refs/remotes/")
            .unwrap_or(&tracking.refname)
            .to_owned();
        return Ok(BaseRef {
            name,
            sha: commit.id().to_string(),
            remote: Some(tracking.remote),
        });
    }
    // A leading '-' would be read as an option by the git CLI later; git never names a
    // revision so.
    let found = (!base.is_empty() && !base.starts_with('-'))
        .then(|| {
            git.revparse_single(base)
                .and_then(|object| object.peel_to_commit())
                .ok()
        })
        .flatten();
    match found {
        Some(commit) => Ok(BaseRef {
            name: base.to_owned(),
            sha: commit.id().to_string(),
            remote: None,
        }),
        None => Err(WorktreeError::BaseNotFound {
            base: base.to_owned(),
            repo: root.to_path_buf(),
        }),
    }
}
