//! Garbage collection of a repository's lanes (`clawpool gc`): removes the worktrees of lanes
//! that are over (their last status finished or failed) and whose work is safe elsewhere —
//! landed (reachable from the lane's base), pushed (reachable from the branch's remote-tracking
//! ref) or empty — and prunes git's entries for worktrees whose folders are gone. Uncommitted
//! work, commits neither landed nor pushed, and a lane whose supervisor was lost before it
//! ended (its tmux worker may still be at work there), are never removed without `--force`,
//! and each kept lane is named with why; a lane someone holds never is, whatever `--force`
//! says. Who holds a lane is told by its supervisor lock in its registry folder — taken by
//! `spawn` before it makes the worktree and kept by the lane's supervisor to its last write —
//! never by files in the worktree, which the lane's agent can delete. gc takes that lock itself
//! for each lane it judges and keeps it until the lane's registry folder is gone, so no spawn
//! starts the lane meanwhile. Also here: ending the repository's private tmux server once no
//! lane runs on it ([`end_idle_tmux_server`]). The verdicts are typed ([`GcVerdict`],
//! [`Because`]); printing them is the caller's.

use std::path::{Path, PathBuf};

use clawpool_lane::registry::{RegistryFolder, lane_registry, registered_names};
use clawpool_lanes::read_lane_record;
use clawpool_lanes::state_file::{SupervisorLock, now_secs};
use clawpool_worktree::{Repo, pushed_to, remove_lane_worktree, worktree_status};
use serde::Serialize;

use crate::error::CommandError;

/// Collect the garbage of one repository's lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcRequest {
    /// A folder in the repository.
    pub repo: PathBuf,
    /// Remove uncommitted or unpublished work and lanes whose supervisor was lost, too (never
    /// a lane someone holds).
    pub force: bool,
}

/// What a gc came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcReply {
    /// Each registered lane, by name, with what was decided for it.
    pub lanes: Vec<GcVerdict>,
    /// Whether `git worktree prune` ran and succeeded.
    pub pruned_worktree_entries: bool,
    /// Why the user's index of repositories could not drop this one when its last lane went
    /// (gc's work is done either way; not in gc's JSON document).
    #[serde(skip)]
    pub index_not_updated: Option<String>,
}

/// What gc decided for one lane; serialized as `gc --output-format json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcVerdict {
    /// The lane.
    pub lane: String,
    /// Whether its worktree and registry folder were removed.
    pub removed: bool,
    /// Why, as a stable word for programs.
    pub because: Because,
    /// Why, for people.
    pub reason: String,
    /// The status `clawpool state` shows (`supervisor_lost` included); `None` when unknown.
    pub status: Option<String>,
}

/// Runs a gc request, calling `judging(lane, checked, of)` as each lane is judged (this module
/// stays below the observer, which the request API's types are above).
pub fn gc(
    request: &GcRequest,
    judging: &dyn Fn(&str, usize, usize),
) -> Result<GcReply, CommandError> {
    let repo = Repo::open(&request.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let main = repo
        .main_branch()
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let names = crate::registry::registered_lanes(&repo);
    let total = names.len();
    let mut lanes = Vec::new();
    for (checked, name) in names.into_iter().enumerate() {
        judging(&name, checked, total);
        let registry = lane_registry(&repo, &name);
        lanes.push(judge_held(&repo, &main, &name, &registry, request.force));
    }
    // Its last lane gone, the repository leaves the user's index (`ui --all` no longer lists
    // it); gc's work is done either way.
    let index_not_updated = if registered_names(&repo).is_empty() {
        crate::known_repos::remove(&repo).err()
    } else {
        None
    };
    let pruned_worktree_entries = std::process::Command::new("git")
        .args(["worktree", "prune"])
        .current_dir(repo.root())
        .status()
        .is_ok_and(|s| s.success());
    Ok(GcReply {
        lanes,
        pruned_worktree_entries,
        index_not_updated,
    })
}

/// Ends the repository's private tmux server (its hidden `clawpool-control` session with its
/// placeholder `sleep`) when no lane's session runs on it any more: nothing else ends a server
/// whose lanes ended after the supervisor that started them went (`daemon --stop`, a killed
/// spawn). Never starts one; leaves a server with any lane session alone.
pub async fn end_idle_tmux_server(repo: &Repo) {
    let config = clawpool_pty::TmuxConfig::new(crate::tmux::tmux_socket_name(repo));
    if let Ok(Some(server)) = clawpool_pty::TmuxServer::connect_existing(config).await
        && server.sessions().await.is_ok_and(|s| s.is_empty())
    {
        let _ = server.kill_server().await;
    }
}

/// Writes the removed lane's marker (`StateDir::removed`): `{"lane", "removed_at", "reason"}`,
/// so that spawning its packet again does not silently re-create it (`clawpool spawn --rerun`
/// does, and removes the marker). Best effort: a lane whose marker could not be written is only
/// re-created as a lane never spawned would be.
fn leave_removed_marker(repo: &Repo, verdict: &GcVerdict) {
    let marker = repo.state_dir().removed(&verdict.lane);
    if let Some(dir) = marker.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let doc = RemovedMarker {
        lane: &verdict.lane,
        removed_at: now_secs(),
        reason: &verdict.reason,
    };
    if let Ok(text) = serde_json::to_string_pretty(&doc) {
        let _ = std::fs::write(marker, format!("{text}\n"));
    }
}

/// The removed lane's marker, as [`leave_removed_marker`] writes it.
#[derive(Serialize)]
struct RemovedMarker<'a> {
    lane: &'a str,
    reason: &'a str,
    removed_at: u64,
}

/// Judges lane `name` holding its supervisor lock, and removes its registry folder (leaving
/// gc's marker) before letting go of it when the lane goes. A lane whose lock someone else
/// holds — a spawn preparing it, a supervisor driving it — is kept, `--force` or not.
fn judge_held(
    repo: &Repo,
    main: &str,
    name: &str,
    registry: &RegistryFolder,
    force: bool,
) -> GcVerdict {
    let _lock = match SupervisorLock::hold(registry.dir()) {
        Ok(lock) => lock,
        Err(err) => {
            let held = err.kind() == std::io::ErrorKind::WouldBlock;
            let status = registry.entry().ok().and_then(|entry| {
                read_lane_record(registry.dir(), &entry.worktree)
                    .ok()
                    .map(|doc| clawpool_lanes::wire_name(&doc.status))
            });
            let (because, reason) = match run_allows_removal(&LaneRun::Held, force) {
                Err(kept) if held => kept,
                _ => (
                    Because::Unlockable,
                    format!("its lock cannot be taken: {err}"),
                ),
            };
            return GcVerdict {
                lane: name.to_owned(),
                removed: false,
                because,
                reason,
                status,
            };
        }
    };
    let verdict = judge(repo, main, name, registry, force);
    if verdict.removed {
        let _ = std::fs::remove_dir_all(registry.dir());
        leave_removed_marker(repo, &verdict);
    }
    verdict
}

/// Judges lane `name`, whose supervisor lock this process holds: nobody prepares or drives it.
fn judge(repo: &Repo, main: &str, name: &str, registry: &RegistryFolder, force: bool) -> GcVerdict {
    let verdict =
        |removed: bool, (because, reason): (Because, String), status: Option<String>| GcVerdict {
            lane: name.to_owned(),
            removed,
            because,
            reason,
            status,
        };
    let Ok(entry) = registry.entry() else {
        return verdict(
            false,
            (Because::Unreadable, "no readable lane.json".into()),
            None,
        );
    };
    let dir = entry.worktree.clone();
    if !dir.exists() {
        return verdict(
            true,
            (Because::FolderGone, "its folder was already gone".into()),
            None,
        );
    }
    // From the lane's record, never its worktree's copy. The lock is ours, so a lane not
    // ended has lost its supervisor.
    let (run, status) = match read_lane_record(registry.dir(), &dir) {
        Ok(doc) if doc.status.is_terminal() => {
            (LaneRun::Ended, Some(clawpool_lanes::wire_name(&doc.status)))
        }
        Ok(doc) => (
            LaneRun::SupervisorLost(doc.lane_state().to_string()),
            Some("supervisor_lost".to_owned()),
        ),
        Err(err) => (LaneRun::Unknown(err.kind()), None),
    };
    if let Err(kept) = run_allows_removal(&run, force) {
        return verdict(false, kept, status);
    }
    let Ok(worktree) = worktree_status(&dir) else {
        return verdict(
            false,
            (
                Because::NotAWorktree,
                "not a worktree of this repository".into(),
            ),
            status,
        );
    };
    // Landed means on the lane's own base as it is now (the branch it was made from), not on
    // whatever the repository's main branch is.
    let base = entry
        .base
        .git_ref
        .clone()
        .unwrap_or_else(|| main.to_owned());
    let start = entry.base.sha.as_deref().unwrap_or(&base);
    let branch = worktree
        .branch
        .clone()
        .unwrap_or_else(|| worktree.head.clone());
    let tree = Tree {
        dirty: worktree.dirty,
        empty: is_ancestor(repo.root(), &worktree.head, start),
        landed: is_ancestor(repo.root(), &worktree.head, &base),
        pushed: match &worktree.branch {
            Some(branch) => pushed_to(repo.root(), &worktree.head, branch),
            None => Vec::new(),
        },
        branch,
        base,
    };
    let why = match tree_allows_removal(&tree, force) {
        Ok(why) => why,
        Err(kept) => return verdict(false, kept, status),
    };
    match remove_lane_worktree(repo, &dir, force) {
        Ok(()) => verdict(true, why, status),
        Err(err) => verdict(
            false,
            (Because::RemoveFailed, format!("could not remove: {err}")),
            status,
        ),
    }
}

/// Why gc removed or kept a lane, as a stable word (`because` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Because {
    /// Removed: its folder was gone already.
    FolderGone,
    /// Removed: no commits of its own.
    Empty,
    /// Removed: its HEAD is on its base.
    Landed,
    /// Removed: its HEAD is on its branch's remote-tracking ref.
    Pushed,
    /// Removed by `--force`.
    Forced,
    /// Kept: a live clawpool holds it.
    Held,
    /// Kept: its lock could not be taken for another reason.
    Unlockable,
    /// Kept: its supervisor was lost before it ended.
    SupervisorLost,
    /// Kept: its registry entry or state record cannot be read.
    Unreadable,
    /// Kept: its folder is no worktree of the repository.
    NotAWorktree,
    /// Kept: uncommitted work.
    Uncommitted,
    /// Kept: commits neither landed nor pushed.
    #[serde(rename = "not_landed_nor_pushed")]
    Unpublished,
    /// Kept: git would not remove it.
    RemoveFailed,
}

/// How a lane's run stands, from its lock and its record.
#[derive(Debug)]
enum LaneRun {
    /// Its last status is finished or failed: nothing more will happen in its worktree.
    Ended,
    /// Someone holds its lock: a spawn preparing it, or its live supervisor.
    Held,
    /// Not ended, and its supervisor stopped writing: a tmux worker may still be at work in
    /// the worktree, and `clawpool adopt` can take it over.
    SupervisorLost(String),
    /// The state file cannot be read (its error kind).
    Unknown(&'static str),
}

/// Whether a lane's run lets gc remove its worktree (`Err` says why not). Only an ended run
/// may go without `--force`; a run under a live supervisor never may.
fn run_allows_removal(run: &LaneRun, force: bool) -> Result<(), (Because, String)> {
    match run {
        LaneRun::Ended => Ok(()),
        LaneRun::Held => Err((
            Because::Held,
            "held by a live clawpool (being prepared or running): never removed, --force or not"
                .into(),
        )),
        LaneRun::SupervisorLost(state) if !force => Err((
            Because::SupervisorLost,
            format!(
                "supervisor_lost while {state}: its worker may still run (`clawpool adopt` takes it over); use --force"
            ),
        )),
        LaneRun::Unknown(kind) if !force => Err((
            Because::Unreadable,
            format!("state unknown ({kind}); use --force"),
        )),
        LaneRun::SupervisorLost(_) | LaneRun::Unknown(_) => Ok(()),
    }
}

/// A lane worktree's work, as gc weighs it.
#[derive(Debug)]
struct Tree {
    /// Uncommitted changes or untracked files.
    dirty: bool,
    /// HEAD is the lane's starting commit or behind it: no commits of its own.
    empty: bool,
    /// HEAD is on the lane's base.
    landed: bool,
    /// The remote-tracking refs of the lane's branch that have HEAD.
    pushed: Vec<String>,
    branch: String,
    base: String,
}

/// Whether a worktree's work lets gc remove it: `Ok` with the reason given for removing it,
/// `Err` with the reason for keeping it. Uncommitted work, and commits neither landed nor
/// pushed, go only with `--force`.
fn tree_allows_removal(tree: &Tree, force: bool) -> Result<(Because, String), (Because, String)> {
    let Tree { branch, base, .. } = tree;
    if tree.dirty && !force {
        return Err((Because::Uncommitted, "uncommitted work; use --force".into()));
    }
    if tree.dirty {
        return Ok((Because::Forced, "--force".into()));
    }
    if tree.empty {
        return Ok((Because::Empty, "no commits of its own".into()));
    }
    if tree.landed {
        return Ok((Because::Landed, format!("{branch} is landed on {base}")));
    }
    if let Some(remote) = tree.pushed.first() {
        let remote = remote.strip_prefix("refs/remotes/").unwrap_or(remote);
        return Ok((Because::Pushed, format!("{branch} is pushed ({remote})")));
    }
    if force {
        return Ok((Because::Forced, "--force".into()));
    }
    Err((
        Because::Unpublished,
        format!("{branch} has commits neither landed on {base} nor pushed; use --force"),
    ))
}

/// Whether `commit` is `target` or one of its ancestors.
fn is_ancestor(repo: &Path, commit: &str, target: &str) -> bool {
    std::process::Command::new("git")
        .args(["merge-base", "--is-ancestor", commit, target])
        .current_dir(repo)
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dirty: bool, empty: bool, landed: bool, pushed: bool) -> Tree {
        Tree {
            dirty,
            empty,
            landed,
            pushed: if pushed {
                vec!["refs/remotes/origin/lanes/a".into()]
            } else {
                Vec::new()
            },
            branch: "lanes/a".into(),
            base: "main".into(),
        }
    }

    #[test]
    fn only_an_ended_run_goes_without_force() {
        assert!(run_allows_removal(&LaneRun::Ended, false).is_ok());
        let lost = LaneRun::SupervisorLost("running".into());
        let (because, kept) =
            run_allows_removal(&lost, false).expect_err("a lost supervisor's lane is kept");
        assert_eq!(because, Because::SupervisorLost);
        assert!(kept.contains("supervisor_lost while running"), "{kept}");
        assert!(kept.contains("--force"), "{kept}");
        assert!(run_allows_removal(&lost, true).is_ok());
        let unknown = LaneRun::Unknown("invalid_state_file");
        assert!(run_allows_removal(&unknown, false).is_err());
        assert!(run_allows_removal(&unknown, true).is_ok());
    }

    /// `because` in gc's JSON: the stable words programs match on, as before the verdicts
    /// were typed.
    #[test]
    fn every_because_is_its_stable_word() {
        let words: Vec<String> = [
            Because::FolderGone,
            Because::Empty,
            Because::Landed,
            Because::Pushed,
            Because::Forced,
            Because::Held,
            Because::Unlockable,
            Because::SupervisorLost,
            Because::Unreadable,
            Because::NotAWorktree,
            Because::Uncommitted,
            Because::Unpublished,
            Because::RemoveFailed,
        ]
        .iter()
        .map(|b| {
            serde_json::to_value(b)
                .expect("word")
                .as_str()
                .expect("a string")
                .to_owned()
        })
        .collect();
        assert_eq!(
            words,
            [
                "folder_gone",
                "empty",
                "landed",
                "pushed",
                "forced",
                "held",
                "unlockable",
                "supervisor_lost",
                "unreadable",
                "not_a_worktree",
                "uncommitted",
                "not_landed_nor_pushed",
                "remove_failed",
            ]
        );
    }

    #[test]
    fn a_held_lane_is_never_removed() {
        for force in [false, true] {
            let (because, kept) = run_allows_removal(&LaneRun::Held, force).expect_err("kept");
            assert_eq!(because, Because::Held);
            assert!(kept.contains("held by a live clawpool"), "{kept}");
        }
    }

    #[test]
    fn empty_landed_or_pushed_clean_work_goes_and_the_rest_needs_force() {
        let because = |t: Tree, force| match tree_allows_removal(&t, force) {
            Ok((b, _)) | Err((b, _)) => b,
        };
        assert_eq!(
            because(tree(false, true, false, false), false),
            Because::Empty
        );
        assert_eq!(
            because(tree(false, false, true, false), false),
            Because::Landed
        );
        assert_eq!(
            tree_allows_removal(&tree(false, false, false, true), false),
            Ok((
                Because::Pushed,
                "lanes/a is pushed (origin/lanes/a)".to_owned()
            ))
        );
        let kept = tree_allows_removal(&tree(false, false, false, false), false);
        assert!(
            kept.as_ref()
                .is_err_and(|(b, why)| *b == Because::Unpublished
                    && why.contains("neither landed on main nor pushed")),
            "{kept:?}"
        );
        // Pushed or landed commits do not make uncommitted work safe.
        assert_eq!(
            because(tree(true, false, true, true), false),
            Because::Uncommitted
        );
        for (dirty, empty, landed) in [
            (false, false, false),
            (true, false, false),
            (true, true, true),
        ] {
            assert!(tree_allows_removal(&tree(dirty, empty, landed, false), true).is_ok());
        }
    }
}
