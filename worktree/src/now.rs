//! Many lanes' branches as they stand now, for a reader that shows them all (the board, the
//! dashboard, `clawpool state`): [`BranchesNow`] resolves each base once per look, and each
//! lane's freshness is its record's when that was checked for the lane's HEAD and the base as
//! they are now, and checked again (without fetching) only when either moved. A finished lane
//! has no owner left to check it, so without this its record would say `fresh` however far
//! its base had moved since.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use git2::Repository;

use crate::freshness::{Freshness, FreshnessOptions, FreshnessState, freshness_in};
use crate::{Repo, WorktreeError, base, status};

/// A repository's bases as resolved at one look, reused for every lane of that look.
pub struct BranchesNow {
    git: Repository,
    root: PathBuf,
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

impl BranchesNow {
    /// A look at `repo`'s branches.
    pub fn open(repo: &Repo) -> Result<Self, WorktreeError> {
        Ok(BranchesNow {
            git: repo.git2()?,
            root: repo.root().to_owned(),
            bases: HashMap::new(),
        })
    }

    /// The commit `base` points to now (the remote-tracking branch when there is one, as
    /// [`crate::resolve_base`]), resolved once per look.
    fn base_sha(&mut self, base: &str) -> Option<String> {
        if let Some(sha) = self.bases.get(base) {
            return sha.clone();
        }
        let sha = base::resolve_in(&self.git, base, &self.root)
            .ok()
            .map(|b| b.sha);
        self.bases.insert(base.to_owned(), sha.clone());
        sha
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
