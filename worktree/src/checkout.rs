//! Making a new lane's branch and checkout inside the process, through libgit2, and deciding
//! when that writes what git would.
//!
//! A directly registered lane (`crate::register`) used to cost two git processes, `git branch`
//! and `git reset --hard`: on two busy cores a process start is several milliseconds, most of
//! a creation whose checkout is small, and creations are serialised per repository. libgit2
//! writes the same loose ref (with its reflog entry) and the same index and files, as long as
//! nothing git would run or apply on the way is in play: a hook on those steps
//! (`reference-transaction`, `post-checkout`), a `filter` attribute (its driver, LFS and the
//! like, is a program libgit2 does not run), or a `working-tree-encoding` attribute (which
//! libgit2 ignores). The attributes are what is looked for, not the drivers in the
//! configuration: git-lfs configures its driver for every repository of the user, and a
//! repository no attribute of which names it checks out the same without it. Line-ending
//! conversion (`core.autocrlf`, `core.eol`, the `text` and `eol` attributes) and `ident` are
//! libgit2's own filters and apply as in git. Anywhere else git itself makes the branch and
//! the checkout, as before.

use std::fs;
use std::path::{Path, PathBuf};

use git2::build::CheckoutBuilder;
use git2::{Oid, Repository, TreeWalkMode, TreeWalkResult};

use crate::{Repo, WorktreeError, register};

/// The attributes libgit2's checkout does not apply: a file with one would be written otherwise
/// than git writes it (not through its filter driver, not in its encoding). Looked for as
/// words anywhere in an attributes file, macro definitions included; a pattern that merely
/// contains one sends the lane to git, which is only slower.
const UNSUPPORTED_ATTRIBUTES: [&str; 2] = ["filter", "working-tree-encoding"];

/// The hooks git runs while `git worktree add` makes a branch and checks it out.
const CREATION_HOOKS: [&str; 2] = ["reference-transaction", "post-checkout"];

/// Whether a lane worktree at `worktree` on a new branch from `base_sha` can have its branch
/// and checkout made by libgit2 ([`create_branch`], [`check_out`]) with the same result as
/// git's: no hook on the way, and no `filter` or `working-tree-encoding` in any attributes
/// file (the system's, the user's, the repository's `info/attributes`, or a `.gitattributes`
/// in the base's tree).
pub(crate) fn in_process_applies(
    repo: &Repo,
    worktree: &Path,
    base_sha: &str,
) -> Result<bool, WorktreeError> {
    let git = repo.git2()?;
    let config = git
        .config()
        .map_err(|err| WorktreeError::query("the configuration", repo.common_dir(), &err))?;
    // A relative `core.hooksPath` is taken from the worktree, whose files (and so perhaps its
    // hooks) are not there before the checkout: git is left to find them.
    let hooks_in_tree = config
        .get_path("core.hooksPath")
        .is_ok_and(|hooks| hooks.is_relative());
    if hooks_in_tree
        || CREATION_HOOKS
            .iter()
            .any(|hook| register::hook_present(repo, worktree, hook))
    {
        return Ok(false);
    }
    let mut attribute_files = vec![
        repo.common_dir().join("info/attributes"),
        PathBuf::from("/etc/gitattributes"),
    ];
    attribute_files.extend(user_attributes_file(&config));
    if attribute_files
        .iter()
        .any(|file| fs::read(file).is_ok_and(|text| mentions_unsupported_attribute(&text)))
    {
        return Ok(false);
    }
    let tree = Oid::from_str(base_sha)
        .and_then(|oid| git.find_commit(oid))
        .and_then(|commit| commit.tree())
        .map_err(|err| WorktreeError::query("the base's tree", repo.common_dir(), &err))?;
    let mut unsupported = false;
    let mut walk_error = None;
    tree.walk(TreeWalkMode::PreOrder, |_, entry| {
        if entry.name_bytes() != b".gitattributes" {
            return TreeWalkResult::Ok;
        }
        match git.find_blob(entry.id()) {
            Ok(blob) if mentions_unsupported_attribute(blob.content()) => {
                unsupported = true;
                TreeWalkResult::Abort
            }
            Ok(_) => TreeWalkResult::Ok,
            Err(err) => {
                walk_error = Some(err);
                TreeWalkResult::Abort
            }
        }
    })
    // An abort is how the walk stops early; what it found is in the flags.
    .or_else(|err| match err.code() {
        git2::ErrorCode::User => Ok(()),
        _ => Err(err),
    })
    .map_err(|err| WorktreeError::query("the base's tree", repo.common_dir(), &err))?;
    if let Some(err) = walk_error {
        return Err(WorktreeError::query(
            "a .gitattributes file",
            repo.common_dir(),
            &err,
        ));
    }
    Ok(!unsupported)
}

/// The user's attributes file: `core.attributesFile`, or git's default
/// `$XDG_CONFIG_HOME/git/attributes` (`~/.config/git/attributes`).
fn user_attributes_file(config: &git2::Config) -> Option<PathBuf> {
    if let Ok(configured) = config.get_path("core.attributesFile") {
        return Some(configured);
    }
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(config_home.join("git/attributes"))
}

/// Whether an attributes file's `text` names an attribute libgit2 does not apply.
fn mentions_unsupported_attribute(text: &[u8]) -> bool {
    UNSUPPORTED_ATTRIBUTES.iter().any(|attribute| {
        text.windows(attribute.len())
            .any(|window| window == attribute.as_bytes())
    })
}

/// Creates `branch` at `sha`, failing if it exists, as `git branch --no-track <branch> <sha>`
/// does: a loose ref, with the reflog entry `core.logAllRefUpdates` asks for.
pub(crate) fn create_branch(repo: &Repo, branch: &str, sha: &str) -> Result<(), WorktreeError> {
    let git = repo.git2()?;
    let failed = |err: git2::Error| WorktreeError::Write {
        what: "create branch",
        path: repo.root().to_path_buf(),
        message: format!("{branch}: {}", err.message()),
    };
    let commit = Oid::from_str(sha)
        .and_then(|oid| git.find_commit(oid))
        .map_err(failed)?;
    git.branch(branch, &commit, false).map(drop).map_err(failed)
}

/// Fills the registered, still empty worktree at `worktree` with the tree of its HEAD (the new
/// branch) and writes its index, as `git reset --hard` does in `git worktree add`.
pub(crate) fn check_out(worktree: &Path) -> Result<(), WorktreeError> {
    let failed = |err: git2::Error| WorktreeError::Write {
        what: "check out",
        path: worktree.to_path_buf(),
        message: err.message().to_owned(),
    };
    let git = Repository::open(worktree).map_err(failed)?;
    let tree = git
        .head()
        .and_then(|head| head.peel_to_tree())
        .map_err(failed)?;
    // HEAD already names this tree, so to libgit2 every file is "unmodified but missing":
    // forced and recreating missing files, it writes them all, then the index.
    let mut how = CheckoutBuilder::new();
    how.force().recreate_missing(true);
    git.checkout_tree(tree.as_object(), Some(&mut how))
        .map_err(failed)
}
