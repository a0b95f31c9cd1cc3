//! A repository lanes are made in: where its main worktree and common git dir are, which
//! branch is its main one, what a revision resolves to, and the `.claw/` exclude rule.
//!
//! [`Repo`] holds only paths and opens the repository (libgit2) for each query, so it is
//! `Send + Sync`, cheap to clone, and never sees stale state after git's own writes.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use git2::{BranchType, ErrorCode, Repository, RepositoryOpenFlags};

use crate::{WorktreeError, lock, paths};

/// The line added to `info/exclude`, and the spellings of it that already do the job.
const CLAW_EXCLUDE: &str = ".claw/";
const CLAW_EXCLUDE_EQUIVALENTS: &[&str] = &[".claw/", ".claw", "/.claw/", "/.claw"];

/// A git repository with a main worktree, as found from any path inside it or inside one of
/// its linked worktrees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    root: PathBuf,
    common_dir: PathBuf,
}

impl Repo {
    /// Finds the repository that `path` is in (the main worktree, a linked worktree, or any
    /// folder inside either).
    ///
    /// Fails with [`WorktreeError::NotARepository`] naming `path` when there is none, and with
    /// [`WorktreeError::BareRepository`] for a bare repository.
    pub fn open(path: &Path) -> Result<Repo, WorktreeError> {
        let found = Repository::discover(path).map_err(|err| match err.code() {
            ErrorCode::NotFound => WorktreeError::NotARepository {
                path: path.to_path_buf(),
            },
            _ => WorktreeError::query("the repository", path, &err),
        })?;
        let common_dir = paths::normalize(found.commondir())
            .map_err(|source| WorktreeError::io("resolve", found.commondir(), source))?;
        // A linked worktree knows its common dir but not the main worktree; the common dir,
        // opened as a repository, does.
        let main = if found.is_worktree() {
            Repository::open(&common_dir)
                .map_err(|err| WorktreeError::query("the main worktree", &common_dir, &err))?
        } else {
            found
        };
        let Some(workdir) = main.workdir() else {
            return Err(WorktreeError::BareRepository {
                path: path.to_path_buf(),
            });
        };
        let root = paths::normalize(workdir)
            .map_err(|source| WorktreeError::io("resolve", workdir, source))?;
        Ok(Repo { root, common_dir })
    }

    /// The top folder of the main worktree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The common git dir, shared by the main worktree and every linked one (usually
    /// `<root>/.git`).
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// clawpool's own folder in the repository ([`crate::layout`]).
    pub fn state_dir(&self) -> crate::layout::StateDir {
        crate::layout::StateDir::of(&self.common_dir)
    }

    /// The branch lanes start from when their packet names none: the branch `origin/HEAD`
    /// points to (or another remote's `HEAD` when there is no `origin`), else the branch the
    /// main worktree has checked out, else `init.defaultBranch`, else `main`.
    pub fn main_branch(&self) -> Result<String, WorktreeError> {
        let repo = self.git2()?;
        let mut remotes = vec!["origin".to_owned()];
        if let Ok(names) = repo.remotes() {
            remotes.extend(
                names
                    .iter()
                    .filter_map(|n| n.ok().flatten())
                    .filter(|n| *n != "origin")
                    .map(str::to_owned),
            );
        }
        for remote in remotes {
            let head = format!("refs/remotes/{remote}/HEAD");
            let prefix = format!("refs/remotes/{remote}/");
            if let Ok(reference) = repo.find_reference(&head)
                && let Some(branch) = reference
                    .symbolic_target()
                    .ok()
                    .flatten()
                    .and_then(|t| t.strip_prefix(prefix.as_str()))
            {
                return Ok(branch.to_owned());
            }
        }
        // The common dir's HEAD is the main worktree's, even on an unborn branch.
        if let Ok(head) = repo.find_reference("HEAD")
            && let Some(branch) = head
                .symbolic_target()
                .ok()
                .flatten()
                .and_then(|t| t.strip_prefix("refs/heads/"))
        {
            return Ok(branch.to_owned());
        }
        if let Ok(config) = repo.config()
            && let Ok(branch) = config.get_string("init.defaultBranch")
            && !branch.is_empty()
        {
            return Ok(branch);
        }
        Ok("main".to_owned())
    }

    /// Whether the local branch `name` (without `refs/heads/`) exists.
    pub fn branch_exists(&self, name: &str) -> bool {
        self.git2()
            .is_ok_and(|repo| repo.find_branch(name, BranchType::Local).is_ok())
    }

    /// The commit (full hex sha) that `rev` names: any revision git understands (`main`,
    /// `v1.2`, `HEAD~2`, a sha), or a branch that exists only as `origin/<rev>`.
    ///
    /// Fails with [`WorktreeError::BaseNotFound`] when it names no commit.
    pub fn resolve(&self, rev: &str) -> Result<String, WorktreeError> {
        let repo = self.git2()?;
        let peel = |spec: &str| {
            repo.revparse_single(spec)
                .and_then(|object| object.peel_to_commit())
                .map(|c| c.id())
        };
        // A leading '-' would be read as an option by the git CLI later; git never names a
        // revision so.
        let found = if rev.is_empty() || rev.starts_with('-') {
            None
        } else {
            peel(rev)
                .or_else(|_| peel(&format!("refs/remotes/origin/{rev}")))
                .ok()
        };
        found
            .map(|oid| oid.to_string())
            .ok_or_else(|| WorktreeError::BaseNotFound {
                base: rev.to_owned(),
                repo: self.root.clone(),
            })
    }

    /// Where a lane's worktree goes by default: `<repo-parent>/<repo-name>.lanes/<lane>`,
    /// beside the repository rather than inside it, so that tools scanning the main worktree
    /// (builds, watchers, searches) never walk into the lanes.
    pub fn default_worktree_path(&self, lane: &str) -> PathBuf {
        let name = self
            .root
            .file_name()
            .map_or_else(|| "repo".into(), |n| n.to_string_lossy());
        let parent = self.root.parent().unwrap_or(&self.root);
        parent.join(format!("{name}.lanes")).join(lane)
    }

    /// Makes sure `.claw/` (each lane's state folder) is ignored in every worktree, through
    /// `<common>/info/exclude` rather than a tracked `.gitignore`, so the project's files are
    /// never edited. Idempotent; an existing equivalent line (`.claw`, `/.claw/`) counts.
    pub fn exclude_claw(&self) -> Result<(), WorktreeError> {
        let _lock = lock::acquire(&self.common_dir)?;
        self.exclude_claw_locked()
    }

    /// [`exclude_claw`](Repo::exclude_claw) for callers that already hold the lock.
    pub(crate) fn exclude_claw_locked(&self) -> Result<(), WorktreeError> {
        let info = self.common_dir.join("info");
        let exclude = info.join("exclude");
        let current = match fs::read_to_string(&exclude) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(WorktreeError::io("read", exclude, source)),
        };
        if current
            .lines()
            .any(|line| CLAW_EXCLUDE_EQUIVALENTS.contains(&line.trim_end()))
        {
            return Ok(());
        }
        let mut updated = current;
        if !updated.is_empty() && !updated.ends_with('\n') {
            updated.push('\n');
        }
        updated.push_str("# clawpool: each lane's state folder\n");
        updated.push_str(CLAW_EXCLUDE);
        updated.push('\n');
        fs::create_dir_all(&info)
            .map_err(|source| WorktreeError::io("create folder", &info, source))?;
        // Written aside and renamed over, so git never reads a half-written file.
        let staged = info.join("exclude.clawpool-new");
        let write = || -> io::Result<()> {
            let mut file = fs::File::create(&staged)?;
            file.write_all(updated.as_bytes())?;
            file.sync_all()?;
            fs::rename(&staged, &exclude)
        };
        write().map_err(|source| WorktreeError::io("write", &exclude, source))
    }

    /// The repository, opened through its common dir (so HEAD is the main worktree's).
    pub(crate) fn git2(&self) -> Result<Repository, WorktreeError> {
        Repository::open_ext(
            &self.common_dir,
            RepositoryOpenFlags::NO_SEARCH,
            &[] as &[&Path],
        )
        .map_err(|err| WorktreeError::query("the repository", &self.common_dir, &err))
    }
}
