//! Many lanes' branches as they stand now, for a reader that shows them all (the board, the
//! dashboard, `clawpool state`): [`BranchesNow`] resolves each base once per look, and each
//! lane's freshness is its record's when that was checked for the lane's HEAD and the base as
//! they are now, and checked again (without fetching) only when either moved. A finished lane
//! has no owner left to check it, so without this its record would say `fresh` however far
//! its base had moved since.
//!
//! What a look worked out for a lane nobody drives is kept as a [`BranchRecord`] in the lane's
//! registry folder (the common git dir, where clawpool's state lives, never the worktree), so
//! the next look reads a file instead of opening the worktree: it is taken only while the
//! lane's HEAD commit (read from the worktree's admin folder in the common git dir and the
//! repository's refs, without opening the worktree), its base's commit and the change times
//! of the worktree's index and top folder are those it was worked out for. A change time
//! (`ctime`) is set by the kernel on every change and cannot be set back by a process, unlike
//! a modification time, so a lane's agent cannot make an old record look current.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use git2::Repository;
use serde::{Deserialize, Serialize};

use crate::freshness::{Freshness, FreshnessOptions, FreshnessState, freshness_in};
use crate::{Repo, WorktreeError, base, status};

/// A repository's bases as resolved at one look, reused for every lane of that look.
pub struct BranchesNow {
    git: Repository,
    root: PathBuf,
    /// The repository's common git dir, whose `worktrees/` holds each linked worktree's admin
    /// folder (its `HEAD`, its `index`).
    common: PathBuf,
    /// Every linked worktree's admin folder by the worktree's `.git` path, read once from the
    /// admin folders' `gitdir` files when a worktree's admin folder is not named like it.
    admins: Option<HashMap<PathBuf, PathBuf>>,
    /// Each base name asked for, and the commit it pointed to when first asked (`None`: it
    /// named none).
    bases: HashMap<String, Option<String>>,
}

/// One lane's branch now.
#[derive(Debug, Clone)]
pub struct LaneNow {
    /// Its freshness against its base as the base is now.
    pub freshness: Freshness,
    /// Whether its worktree has uncommitted work (as [`crate::worktree_status`]); `None` when
    /// the worktree or its HEAD cannot be read.
    pub dirty: Option<bool>,
}

/// A lane's branch as a look worked it out, and what it was worked out for: kept in the
/// lane's registry folder ([`crate::layout::BRANCH_RECORD`]) and taken by a later look only
/// while all of `head`, `base_sha`, `index` and `top` are still so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchRecord {
    /// The lane's HEAD commit.
    pub head: String,
    /// The commit its base pointed to.
    pub base_sha: String,
    /// The worktree's index (in its admin folder) when the look began.
    pub index: Option<Stamp>,
    /// The worktree's top folder when the look began (a file made, removed or renamed there).
    pub top: Option<Stamp>,
    /// Whether the worktree had uncommitted work.
    pub dirty: Option<bool>,
    /// Its freshness against the base.
    pub freshness: Freshness,
}

/// A file's identity and last change as the kernel keeps them: its inode and change time
/// (`ctime`, which no process can set back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// The inode number.
    pub ino: u64,
    /// The change time, seconds.
    pub ctime: i64,
    /// The change time's nanoseconds.
    pub ctime_nsec: i64,
}

impl Stamp {
    /// The stamp of `path` now; `None` when it cannot be read.
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            ino: meta.ino(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
        })
    }
}

impl BranchesNow {
    /// A look at `repo`'s branches.
    pub fn open(repo: &Repo) -> Result<Self, WorktreeError> {
        Ok(BranchesNow {
            git: repo.git2()?,
            root: repo.root().to_owned(),
            common: repo.common_dir().to_owned(),
            admins: None,
            bases: HashMap::new(),
        })
    }

    /// The commit `base` points to now (the remote-tracking branch when there is one, as
    /// [`crate::resolve_base`]), resolved once per look.
    pub fn base_sha(&mut self, base: &str) -> Option<String> {
        if let Some(sha) = self.bases.get(base) {
            return sha.clone();
        }
        let sha = base::resolve_in(&self.git, base, &self.root)
            .ok()
            .map(|b| b.sha);
        self.bases.insert(base.to_owned(), sha.clone());
        sha
    }

    /// The admin folder of the linked worktree `worktree` in the common git dir: the one named
    /// like the worktree when its `gitdir` names this worktree (as `git worktree add` makes
    /// them), else the one whose `gitdir` does, found by reading them all once.
    fn admin_dir(&mut self, worktree: &Path) -> Option<PathBuf> {
        let dot_git = worktree.join(".git");
        let names = |admin: &Path| {
            std::fs::read_to_string(admin.join("gitdir"))
                .is_ok_and(|gitdir| Path::new(gitdir.trim_end()) == dot_git)
        };
        let guess = self.common.join("worktrees").join(worktree.file_name()?);
        if names(&guess) {
            return Some(guess);
        }
        let admins = self.admins.get_or_insert_with(|| {
            let Ok(entries) = std::fs::read_dir(self.common.join("worktrees")) else {
                return HashMap::new();
            };
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| {
                    let gitdir = std::fs::read_to_string(entry.path().join("gitdir")).ok()?;
                    Some((PathBuf::from(gitdir.trim_end()), entry.path()))
                })
                .collect()
        });
        admins.get(&dot_git).cloned()
    }

    /// The commit the linked worktree whose admin folder is `admin` has checked out, read from
    /// its `HEAD` file and the repository's branches (never from the worktree's own files):
    /// `None` when it is anything else than a commit or a branch (`refs/heads/`) with one.
    fn head_of(&self, admin: &Path) -> Option<String> {
        let head = std::fs::read_to_string(admin.join("HEAD")).ok()?;
        let head = head.trim_end();
        match head.strip_prefix("ref: ") {
            Some(name) if name.starts_with("refs/heads/") => {
                self.git.refname_to_id(name).ok().map(|oid| oid.to_string())
            }
            Some(_) => None,
            None => git2::Oid::from_str(head).ok().map(|oid| oid.to_string()),
        }
    }

    /// As [`BranchesNow::lane`], taking `kept` (the lane's [`BranchRecord`]) instead of
    /// opening the worktree while it is still current, unless `owned` (a lane whose owner is
    /// at work: its files change without its HEAD moving). Returns, besides the lane, the
    /// record of what was worked out when the worktree was opened, to keep for the next look
    /// (`None` when the record was taken, or nothing could be keyed).
    pub fn lane_kept(
        &mut self,
        worktree: &Path,
        base: &str,
        known_bases: &[&str],
        recorded: Option<&Freshness>,
        kept: Option<&BranchRecord>,
        owned: bool,
    ) -> (LaneNow, Option<BranchRecord>) {
        let base_sha = self.base_sha(base);
        let admin = self.admin_dir(worktree);
        // Stamped before anything is read: a change while the look runs makes its record old.
        let index = admin.as_deref().and_then(|a| Stamp::of(&a.join("index")));
        let top = Stamp::of(worktree);
        let head = admin.as_deref().and_then(|a| self.head_of(a));
        if let (false, Some(kept), Some(head), Some(base_sha)) = (owned, kept, &head, &base_sha)
            && kept.head == *head
            && kept.base_sha == *base_sha
            && kept.index.is_some()
            && kept.index == index
            && kept.top.is_some()
            && kept.top == top
            && kept.freshness.state != FreshnessState::Unknown
        {
            let lane = LaneNow {
                freshness: kept.freshness.clone(),
                dirty: kept.dirty,
            };
            return (lane, None);
        }
        let lane = self.lane(worktree, base, known_bases, recorded);
        // Kept only when the worktree's own HEAD is the one read from the admin folder (a
        // worktree whose `.git` file points elsewhere is never taken from a record).
        let record = match (head, base_sha) {
            (Some(head), Some(base_sha))
                if lane.freshness.head.as_deref() == Some(head.as_str())
                    && lane.freshness.base_sha.as_deref() == Some(base_sha.as_str())
                    && lane.freshness.state != FreshnessState::Unknown =>
            {
                Some(BranchRecord {
                    head,
                    base_sha,
                    index,
                    top,
                    dirty: lane.dirty,
                    freshness: lane.freshness.clone(),
                })
            }
            _ => None,
        };
        (lane, record)
    }

    /// The lane whose worktree is `worktree`, made from `base`, as it stands now. `recorded`
    /// is its record's last freshness: kept when it was checked for the same HEAD and base
    /// commit and had a verdict; otherwise the branch is checked again, with `known_bases`
    /// (commits the base pointed to before) telling a base that moved backwards.
    pub fn lane(
        &mut self,
        worktree: &Path,
        base: &str,
        known_bases: &[&str],
        recorded: Option<&Freshness>,
    ) -> LaneNow {
        let base_sha = self.base_sha(base);
        let lane = status::open_worktree(worktree);
        let head = lane
            .as_ref()
            .ok()
            .and_then(|repo| repo.refname_to_id("HEAD").ok())
            .map(|oid| oid.to_string());
        let dirty = match (&lane, &head) {
            (Ok(repo), Some(_)) => status::dirty_paths(repo, worktree)
                .ok()
                .map(|paths| !paths.is_empty()),
            _ => None,
        };
        let current = recorded.filter(|r| {
            r.state != FreshnessState::Unknown
                && head.is_some()
                && r.head == head
                && base_sha.is_some()
                && r.base_sha == base_sha
        });
        let freshness = match current {
            Some(recorded) => recorded.clone(),
            None => {
                let options = FreshnessOptions {
                    fetch: None,
                    commit_graph: false,
                    ..FreshnessOptions::default()
                };
                freshness_in(lane.as_ref(), worktree, base, known_bases, &options)
            }
        };
        LaneNow { freshness, dirty }
    }
}
