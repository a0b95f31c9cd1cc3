//! Lane worktrees: creating (or reusing) one branch and one worktree per lane, and removing
//! them again.
//!
//! Every creation and removal holds the repository's lock (see [`crate::lock`]) from the first
//! look at the lane's path to the last git command, so parallel lanes never race each other in
//! git's admin files, and the checks made before a creation still hold when it runs.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use git2::{Repository, RepositoryOpenFlags};

use crate::register::is_registered;
use crate::{Repo, WorktreeError, checkout, git, lock, paths, register, status};

/// What a lane needs: a branch, the revision that branch starts from, and a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneWorktreeSpec {
    /// The lane's name; used for the defaults only.
    pub lane: String,
    /// The branch the worktree has checked out (without `refs/heads/`).
    pub branch: String,
    /// The revision a new branch starts from. Not used when the branch already exists.
    pub base: String,
    /// The worktree's folder.
    pub path: PathBuf,
}

impl LaneWorktreeSpec {
    /// The defaults for lane `lane`: branch `lanes/<lane>`, based on the repository's
    /// [main branch](Repo::main_branch), at [`Repo::default_worktree_path`].
    ///
    /// A lane name may contain `/` (it then nests folders and branch segments) but no empty,
    /// `.` or `..` segment, and must make a valid branch name.
    pub fn new(repo: &Repo, lane: &str) -> Result<LaneWorktreeSpec, WorktreeError> {
        let invalid = || WorktreeError::InvalidName {
            what: "lane",
            name: lane.to_owned(),
        };
        if lane.is_empty()
            || lane
                .split('/')
                .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        {
            return Err(invalid());
        }
        let branch = format!("lanes/{lane}");
        if !branch_name_is_valid(&branch) {
            return Err(invalid());
        }
        Ok(LaneWorktreeSpec {
            lane: lane.to_owned(),
            branch,
            base: repo.main_branch()?,
            path: repo.default_worktree_path(lane),
        })
    }
}

/// What [`prepare_lane_worktree`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// A new worktree was made.
    Created {
        /// The worktree's folder (absolute, symlinks resolved).
        path: PathBuf,
        /// The branch it has checked out.
        branch: String,
        /// The commit the spec's base resolved to.
        base_sha: String,
        /// The commit checked out: `base_sha` for a new branch, the branch's tip otherwise.
        head_sha: String,
        /// Whether the branch was created (from `base_sha`) or already existed.
        new_branch: bool,
    },
    /// A worktree on the right branch was already there and was left as it was.
    Reused {
        /// The worktree's folder (absolute, symlinks resolved).
        path: PathBuf,
        /// The branch it has checked out.
        branch: String,
        /// The commit it has checked out.
        head_sha: String,
    },
}

impl Prepared {
    /// The worktree's folder.
    pub fn path(&self) -> &Path {
        match self {
            Prepared::Created { path, .. } | Prepared::Reused { path, .. } => path,
        }
    }

    /// The branch checked out in it.
    pub fn branch(&self) -> &str {
        match self {
            Prepared::Created { branch, .. } | Prepared::Reused { branch, .. } => branch,
        }
    }

    /// The commit checked out in it.
    pub fn head_sha(&self) -> &str {
        match self {
            Prepared::Created { head_sha, .. } | Prepared::Reused { head_sha, .. } => head_sha,
        }
    }
}

/// Makes sure the lane's worktree exists at `spec.path` with `spec.branch` checked out.
///
/// - A worktree of this repository already at the path on `spec.branch` is reused as it is
///   ([`Prepared::Reused`]); the base is not looked at.
/// - One on another branch or a detached HEAD is refused ([`WorktreeError::WrongBranch`]);
///   anything else there that is not an empty folder is refused
///   ([`WorktreeError::PathOccupied`]).
/// - Otherwise the worktree is made: on a new branch from the base (created with `--no-track`,
///   so it never pushes to or pulls from the base), or on the branch if it already exists. A
///   stale registration at the path (its folder deleted by hand) is cleared first. The base must
///   exist either way ([`WorktreeError::BaseNotFound`]).
///
/// `.claw/` is added to the repository's exclude file first (see [`Repo::exclude_claw`]).
///
/// If creation fails, what it made (the branch, the folder and the parent folders it created,
/// git's registration) is removed again before the error is returned; if even that fails, the
/// error is [`WorktreeError::CleanupFailed`], saying what is left.
///
/// Blocks while another thread or process prepares or removes a worktree of the same
/// repository.
pub fn prepare_lane_worktree(
    repo: &Repo,
    spec: &LaneWorktreeSpec,
) -> Result<Prepared, WorktreeError> {
    if !branch_name_is_valid(&spec.branch) {
        return Err(WorktreeError::InvalidName {
            what: "branch",
            name: spec.branch.clone(),
        });
    }
    let path = paths::normalize(&spec.path)
        .map_err(|source| WorktreeError::io("resolve", &spec.path, source))?;
    let _lock = lock::acquire(repo.common_dir())?;
    repo.exclude_claw_locked()?;

    let stale = match inspect(repo, &path)? {
        Slot::Lane {
            branch: Some(found),
            head,
        } if found == spec.branch => {
            return Ok(Prepared::Reused {
                path,
                branch: found,
                head_sha: head,
            });
        }
        Slot::Lane { branch, .. } => {
            return Err(WorktreeError::WrongBranch {
                path,
                expected: spec.branch.clone(),
                found: branch,
            });
        }
        Slot::Occupied => return Err(WorktreeError::PathOccupied { path }),
        Slot::Free { stale } => stale,
    };
    create(repo, spec, path, stale)
}

/// The creation half of [`prepare_lane_worktree`], for a free path (`path` normalized), with
/// the lock held.
fn create(
    repo: &Repo,
    spec: &LaneWorktreeSpec,
    path: PathBuf,
    stale: bool,
) -> Result<Prepared, WorktreeError> {
    let base_sha = repo.resolve(&spec.base)?;
    // Taken before the stale registration goes (it may remove an empty folder), so that a
    // failure restores the path as the caller left it.
    let existed = path.exists();
    let first_missing = paths::first_missing(&path);
    if stale {
        clear_stale_registration(repo, &path)?;
    }
    let new_branch = !repo.branch_exists(&spec.branch);

    // A new branch is checked out nowhere, so none of the checks `git worktree add` makes
    // against every other worktree can fail: the registration is written directly, at a cost
    // that does not grow with the number of worktrees (see `crate::register`).
    let fast_id = if new_branch && register::fast_registration_applies(repo)? {
        register::worktree_id(&path)
    } else {
        None
    };
    let mut admin_dir = None;
    let added = match &fast_id {
        // Nothing git would run or apply on the way: no git process at all (`crate::checkout`).
        Some(id) if checkout::in_process_applies(repo, &path, &base_sha)? => {
            add_in_process(repo, spec, &path, id, &base_sha, &mut admin_dir)
        }
        Some(id) => add_registered(repo, spec, &path, id, &base_sha, &mut admin_dir),
        None => add_with_git(repo, spec, &path, &base_sha, new_branch),
    };
    let created = added.and_then(|_| match inspect(repo, &path)? {
        Slot::Lane {
            branch: Some(found),
            head,
        } if found == spec.branch => Ok(head),
        _ => Err(WorktreeError::Git {
            command: "git worktree add".to_owned(),
            stderr: format!(
                "reported success, but {} is not on branch {:?}",
                path.display(),
                spec.branch
            ),
        }),
    });
    match created {
        Ok(head_sha) => Ok(Prepared::Created {
            path,
            branch: spec.branch.clone(),
            base_sha,
            head_sha,
            new_branch,
        }),
        Err(cause) => {
            let undo = Undo {
                path: &path,
                admin_dir: admin_dir.as_deref(),
                existed,
                first_missing,
                branch: new_branch.then_some(&spec.branch),
            };
            match undo.run(repo) {
                Ok(()) => Err(cause),
                Err(leftovers) => Err(WorktreeError::CleanupFailed {
                    cause: Box::new(cause),
                    leftovers,
                }),
            }
        }
    }
}

/// Makes the worktree with `git worktree add`: for an existing branch (git refuses one checked
/// out elsewhere, which takes reading every worktree), or a repository or folder name the
/// direct registration does not cover.
fn add_with_git(
    repo: &Repo,
    spec: &LaneWorktreeSpec,
    path: &Path,
    base_sha: &str,
    new_branch: bool,
) -> Result<(), WorktreeError> {
    let mut args = ["worktree", "add", "--quiet"].map(OsStr::new).to_vec();
    if new_branch {
        // The sha, not the base's name: it is what was checked, and `--no-track` keeps even a
        // remote-branch base from becoming the lane's upstream.
        args.extend(["--no-track", "-b", &spec.branch].map(OsStr::new));
        args.extend([path.as_os_str(), OsStr::new(base_sha)]);
    } else {
        args.extend([path.as_os_str(), OsStr::new(&spec.branch)]);
    }
    git::run(repo.root(), &args).map(drop)
}

/// Makes the worktree on a new branch as [`add_registered`] does, with libgit2 making the
/// branch and the checkout instead of `git branch` and `git reset --hard`: for repositories
/// where that writes what git would (no hook, `filter` or `working-tree-encoding` on the way,
/// see `crate::checkout`), at the cost of no process.
fn add_in_process(
    repo: &Repo,
    spec: &LaneWorktreeSpec,
    path: &Path,
    id: &str,
    base_sha: &str,
    admin_dir: &mut Option<PathBuf>,
) -> Result<(), WorktreeError> {
    checkout::create_branch(repo, &spec.branch, base_sha)?;
    let registration = register::Registration::begin(repo, path, id, &spec.branch, admin_dir)?;
    checkout::check_out(path)?;
    registration.finish()
}

/// Makes the worktree on a new branch the way `git worktree add --no-track -b` does, without
/// its scans of every other worktree: `git branch`, the registration written directly (its
/// admin folder reported in `admin_dir` as soon as it exists, for the undo), `git reset
/// --hard` in the new worktree for the index and the files, then the `post-checkout` hook, if
/// there is one, with the arguments `git worktree add` gives it.
fn add_registered(
    repo: &Repo,
    spec: &LaneWorktreeSpec,
    path: &Path,
    id: &str,
    base_sha: &str,
    admin_dir: &mut Option<PathBuf>,
) -> Result<(), WorktreeError> {
    let branch_args = [
        "branch",
        "--quiet",
        "--no-track",
        "--",
        &spec.branch,
        base_sha,
    ];
    git::run(repo.root(), &branch_args.map(OsStr::new))?;
    let registration = register::Registration::begin(repo, path, id, &spec.branch, admin_dir)?;
    let reset = ["reset", "--hard", "--no-recurse-submodules", "--quiet"];
    git::run(path, &reset.map(OsStr::new))?;
    registration.finish()?;
    // Looked for first: a process per lane for a hook most repositories do not have is a
    // third of the creation's cost.
    if !register::hook_present(repo, path, "post-checkout") {
        return Ok(());
    }
    let no_commit = "0".repeat(base_sha.len());
    let hook = [
        "hook",
        "run",
        "--ignore-missing",
        "post-checkout",
        "--",
        &no_commit,
        base_sha,
        "1",
    ];
    git::run(path, &hook.map(OsStr::new)).map(drop)
}

/// Removes the lane worktree at `path` (its folder and git's registration of it). The branch
/// is kept: the lane's commits live there.
///
/// A worktree with modified or untracked files is refused ([`WorktreeError::Dirty`]) unless
/// `force` is set; ignored files (such as `.claw/`) do not count and are removed with it. A
/// worktree whose folder was already deleted by hand has its registration cleared. Anything
/// that is not a linked worktree of `repo` (including the main worktree) is refused
/// ([`WorktreeError::NotALaneWorktree`]). Locked worktrees (`git worktree lock`) are refused by
/// git even with `force`.
pub fn remove_lane_worktree(repo: &Repo, path: &Path, force: bool) -> Result<(), WorktreeError> {
    let normalized =
        paths::normalize(path).map_err(|source| WorktreeError::io("resolve", path, source))?;
    let not_lane = || WorktreeError::NotALaneWorktree {
        path: path.to_path_buf(),
        repo: repo.root().to_path_buf(),
    };
    let _lock = lock::acquire(repo.common_dir())?;
    match inspect(repo, &normalized)? {
        Slot::Lane { .. } => {
            if !force && status::worktree_status(&normalized)?.dirty {
                return Err(WorktreeError::Dirty { path: normalized });
            }
            let mut args = vec![OsStr::new("worktree"), OsStr::new("remove")];
            if force {
                args.push(OsStr::new("--force"));
            }
            args.push(normalized.as_os_str());
            git::run(repo.root(), &args).map(drop)
        }
        Slot::Free { stale: true } => clear_stale_registration(repo, &normalized),
        Slot::Free { stale: false } | Slot::Occupied => Err(not_lane()),
    }
}

/// What is at a lane's path.
enum Slot {
    /// A linked worktree of this repository.
    Lane {
        /// Its branch; `None` for a detached HEAD.
        branch: Option<String>,
        /// Its HEAD commit.
        head: String,
    },
    /// Nothing, or an empty folder: `git worktree add` can go there. `stale` says git still
    /// has a registration for the path whose folder was deleted (or emptied) by hand.
    Free { stale: bool },
    /// Anything else.
    Occupied,
}

/// Looks at `path` (normalized): see [`Slot`].
fn inspect(repo: &Repo, path: &Path) -> Result<Slot, WorktreeError> {
    let meta = match path.symlink_metadata() {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Slot::Free {
                stale: is_registered(repo, path)?,
            });
        }
        Err(source) => return Err(WorktreeError::io("inspect", path, source)),
    };
    if !meta.is_dir() {
        return Ok(Slot::Occupied);
    }
    if let Ok(found) = Repository::open_ext(path, RepositoryOpenFlags::NO_SEARCH, &[] as &[&Path]) {
        let ours = paths::normalize(found.commondir()).is_ok_and(|c| c == repo.common_dir());
        if !ours || !found.is_worktree() {
            // Another repository, or this one's main worktree: never a lane.
            return Ok(Slot::Occupied);
        }
        let head = found
            .refname_to_id("HEAD")
            .map_err(|err| WorktreeError::query("HEAD", path, &err))?
            .to_string();
        return Ok(Slot::Lane {
            branch: status::head_branch(&found),
            head,
        });
    }
    if paths::is_empty_dir(path).map_err(|source| WorktreeError::io("read folder", path, source))? {
        return Ok(Slot::Free {
            stale: is_registered(repo, path)?,
        });
    }
    Ok(Slot::Occupied)
}

/// Drops git's registration of a worktree at `path` whose folder is gone or empty, so that
/// `git worktree add` accepts the path again. Targeted (`git worktree remove <path>`) rather
/// than `git worktree prune`, which would touch every other stale worktree as well.
fn clear_stale_registration(repo: &Repo, path: &Path) -> Result<(), WorktreeError> {
    if path.exists() {
        // git only removes a missing worktree's registration, and the folder is empty.
        fs::remove_dir(path)
            .map_err(|source| WorktreeError::io("remove empty folder", path, source))?;
    }
    let args = [
        OsStr::new("worktree"),
        OsStr::new("remove"),
        path.as_os_str(),
    ];
    git::run(repo.root(), &args).map(drop)
}

/// What a failed creation may have left, and how to take it away again.
struct Undo<'a> {
    path: &'a Path,
    /// The admin folder a direct registration made (`crate::register`), if it got that far.
    admin_dir: Option<&'a Path>,
    /// The path was an empty folder before: empty it rather than remove it.
    existed: bool,
    /// The outermost parent folder the creation had to make (possibly `path` itself).
    first_missing: Option<PathBuf>,
    /// The branch, when this creation was the one to make it.
    branch: Option<&'a String>,
}

impl Undo<'_> {
    /// Removes the leftovers, in the only order git allows: the worktree (so the branch is no
    /// longer checked out), then the folders, then the branch. Returns what could not be
    /// removed.
    fn run(&self, repo: &Repo) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(admin_dir) = self.admin_dir
            && let Err(err) = fs::remove_dir_all(admin_dir)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            problems.push(format!(
                "worktree registration {} ({err})",
                admin_dir.display()
            ));
        }
        if is_registered(repo, self.path).unwrap_or(true) {
            // Twice forced: the half-made worktree may be dirty, and git may have locked it
            // while it was being added.
            let mut args = ["worktree", "remove", "--force", "--force"]
                .map(OsStr::new)
                .to_vec();
            args.push(self.path.as_os_str());
            if let Err(err) = git::run(repo.root(), &args)
                && is_registered(repo, self.path).unwrap_or(true)
            {
                problems.push(format!("worktree registration ({err})"));
            }
        }
        let mut cleared = if self.path.exists() {
            fs::remove_dir_all(self.path)
        } else {
            Ok(())
        };
        if cleared.is_ok() && self.existed {
            // It was an empty folder (possibly removed to clear a stale registration).
            cleared = fs::create_dir(self.path);
        }
        if let Err(err) = cleared {
            problems.push(format!("folder {} ({err})", self.path.display()));
        }
        if let Some(top) = &self.first_missing {
            // Parents made for this worktree, innermost first; a parent something else now
            // uses is not empty and stays.
            for dir in self.path.ancestors().skip(1) {
                if !dir.starts_with(top) || fs::remove_dir(dir).is_err() {
                    break;
                }
            }
        }
        if let Some(branch) = self.branch
            && repo.branch_exists(branch)
        {
            let args = ["branch", "-D", "--", branch.as_str()].map(OsStr::new);
            if let Err(err) = git::run(repo.root(), &args) {
                problems.push(format!("branch {branch:?} ({err})"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// Whether git accepts `name` as a branch name, and the git CLI will not read it as an option.
fn branch_name_is_valid(name: &str) -> bool {
    !name.starts_with('-') && name != "HEAD" && git2::Branch::name_is_valid(name).unwrap_or(false)
}
