//! Registering a new linked worktree by writing git's administrative files directly, and
//! finding the registration of one path without reading every other worktree's.
//!
//! `git worktree add` reads the `HEAD`, `gitdir` and `commondir` of every worktree already
//! registered (to refuse a path or a branch some other worktree has), several times over, so
//! the n-th lane costs O(n): with 300 worktrees, one add makes about 1,800 reads of other
//! worktrees' `HEAD` files, and 1,000 sequential adds take about a minute, mostly system time
//! (`docs/performance.md`, "Lane worktree creation"). For a lane on a *new* branch none of
//! those checks can fail — no worktree has a branch that did not exist — and the caller has
//! already checked the path under the repository's worktree lock. So the registration is
//! written here with git's own layout (the steps `git worktree add` takes, in its order:
//! `<common>/worktrees/<id>/` with `locked` while it is being made, the worktree's `.git` file,
//! `gitdir`, `commondir`, `HEAD`); the branch and the checkout are made either by libgit2
//! (`crate::checkout`, when that writes what git would) or by git itself (`git branch`, then
//! `git reset --hard` in the new worktree, as `git worktree add` runs it, and the
//! `post-checkout` hook through `git hook run`), none of which look at other worktrees.
//!
//! Only the layout of git's files reference backend with absolute paths is written; a
//! repository using the reftable backend, per-worktree configuration or a sparse checkout,
//! and a folder name that is not already a valid worktree id, get `git worktree add`
//! ([`fast_registration_applies`], [`worktree_id`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::{Repo, WorktreeError, paths};

/// The file in a worktree's admin folder that keeps `git worktree prune` away from a worktree
/// still being made; `git worktree add` writes it with this content and removes it at the end.
const INITIALIZING_LOCK: &str = "locked";

/// Whether a lane worktree of `repo` may be registered by [`Registration::begin`] rather than
/// `git worktree add`: the repository stores refs as files (HEAD is then the one-line file
/// written here), has no per-worktree configuration (which `git worktree add` would set up)
/// and no sparse checkout (whose patterns it would copy).
pub(crate) fn fast_registration_applies(repo: &Repo) -> Result<bool, WorktreeError> {
    let git = repo.git2()?;
    let config = git
        .config()
        .map_err(|err| WorktreeError::query("the configuration", repo.common_dir(), &err))?;
    let ref_storage_is_files = config
        .get_string("extensions.refStorage")
        .map_or(true, |storage| storage.eq_ignore_ascii_case("files"));
    let flag = |name: &str| config.get_bool(name).unwrap_or(false);
    Ok(ref_storage_is_files && !flag("extensions.worktreeConfig") && !flag("core.sparseCheckout"))
}

/// The admin folder name git gives a worktree at `path` (its folder name), when that name is
/// already one git keeps as it is: ASCII letters, digits, `-`, `_` and `.`, not starting with
/// `.`, without `..`, not ending in `.` or `.lock`. `None` otherwise: git would rewrite it
/// (`sanitize_refname_component`), and `git worktree add` is used instead.
pub(crate) fn worktree_id(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let valid = !name.is_empty()
        && name.chars().all(allowed)
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.ends_with(".lock")
        && !name.contains("..");
    valid.then(|| name.to_owned())
}

/// A registration being written; [`Registration::admin_dir`] is what a failed creation
/// removes.
pub(crate) struct Registration {
    admin_dir: PathBuf,
}

impl Registration {
    /// Makes the admin folder `<common>/worktrees/<id>` (or `<id>1`, `<id>2`, … when taken, as
    /// git numbers them) with `locked`, then the worktree's folder (an empty one already there
    /// is kept) and its `.git` file, `gitdir`, `commondir` and `HEAD` on `branch`. The checkout
    /// is the caller's. On error, what was made so far is reported through `made` so that the
    /// caller's undo removes it.
    pub(crate) fn begin(
        repo: &Repo,
        path: &Path,
        id: &str,
        branch: &str,
        made: &mut Option<PathBuf>,
    ) -> Result<Registration, WorktreeError> {
        let worktrees = repo.common_dir().join("worktrees");
        fs::create_dir_all(&worktrees)
            .map_err(|source| WorktreeError::io("create folder", &worktrees, source))?;
        let mut counter = 0u32;
        let admin_dir = loop {
            let candidate = if counter == 0 {
                worktrees.join(id)
            } else {
                worktrees.join(format!("{id}{counter}"))
            };
            match fs::create_dir(&candidate) {
                Ok(()) => break candidate,
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => counter += 1,
                Err(source) => return Err(WorktreeError::io("create folder", &candidate, source)),
            }
        };
        *made = Some(admin_dir.clone());
        let write = |file: PathBuf, content: String| {
            fs::write(&file, content).map_err(|source| WorktreeError::io("write", file, source))
        };
        write(
            admin_dir.join(INITIALIZING_LOCK),
            "initializing\n".to_owned(),
        )?;
        fs::create_dir_all(path)
            .map_err(|source| WorktreeError::io("create folder", path, source))?;
        let dot_git = path.join(".git");
        write(
            dot_git.clone(),
            format!("gitdir: {}\n", admin_dir.display()),
        )?;
        write(admin_dir.join("gitdir"), format!("{}\n", dot_git.display()))?;
        write(admin_dir.join("commondir"), "../..\n".to_owned())?;
        write(
            admin_dir.join("HEAD"),
            format!("ref: refs/heads/{branch}\n"),
        )?;
        Ok(Registration { admin_dir })
    }

    /// Removes `locked` once the checkout is in place: the worktree is then complete.
    pub(crate) fn finish(self) -> Result<(), WorktreeError> {
        let lock = self.admin_dir.join(INITIALIZING_LOCK);
        fs::remove_file(&lock).map_err(|source| WorktreeError::io("remove", lock, source))
    }
}

/// Whether git would find the hook `name` (`post-checkout`, `reference-transaction`) to run in
/// the new worktree at `worktree`: an executable file in `core.hooksPath` (`~/` expanded; a
/// relative path taken from the worktree, where hooks run) or in `<common>/hooks/`. git ignores
/// a hook file that is not executable, and so does this. When the configuration cannot be read
/// the answer is yes, and git decides.
pub(crate) fn hook_present(repo: &Repo, worktree: &Path, name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let hooks_path = repo
        .git2()
        .and_then(|git| {
            git.config()
                .map_err(|err| WorktreeError::query("the configuration", repo.common_dir(), &err))
        })
        .map(|config| config.get_path("core.hooksPath").ok());
    let hooks_dir = match hooks_path {
        Err(_) => return true,
        Ok(Some(configured)) => worktree.join(configured),
        Ok(None) => repo.common_dir().join("hooks"),
    };
    fs::metadata(hooks_dir.join(name))
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Whether git has a linked worktree registered at `path` (normalized).
///
/// Reads only the admin folders whose names could be the one git gave that path: its name
/// starts with the path's folder name up to the first character git might rewrite, and git
/// only ever appends a counter. A folder name starting with such a character (a leading `.`,
/// say) leaves nothing to go by, and every registration is read.
pub(crate) fn is_registered(repo: &Repo, path: &Path) -> Result<bool, WorktreeError> {
    let worktrees = repo.common_dir().join("worktrees");
    let entries = match fs::read_dir(&worktrees) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(WorktreeError::io("read folder", &worktrees, source)),
    };
    let prefix: String = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect();
    for entry in entries {
        let entry = entry.map_err(|source| WorktreeError::io("read folder", &worktrees, source))?;
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        // A registration without a readable `gitdir` is not one git can name a path for.
        let Ok(gitdir) = fs::read_to_string(entry.path().join("gitdir")) else {
            continue;
        };
        // git 2.48+ may record it relative to the admin folder (`worktree.useRelativePaths`).
        let dot_git = entry.path().join(gitdir.trim_end_matches(['\n', '\r']));
        if let Some(registered) = dot_git.parent()
            && paths::normalize(registered).is_ok_and(|p| p == path)
        {
            return Ok(true);
        }
    }
    Ok(false)
}
