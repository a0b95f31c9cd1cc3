//! `clawpool gc`: remove the worktrees of lanes that are over (their last status finished or
//! failed) and whose work is merged or empty, and prune git's entries for worktrees whose
//! folders are gone. Uncommitted or unmerged work, and a lane whose supervisor was lost before
//! it ended (its tmux worker may still be at work there), are never removed without `--force`;
//! a lane someone holds never is, whatever `--force` says. Who holds a lane is told by its
//! supervisor lock in its registry folder — taken by `spawn` before it makes the worktree and
//! kept by the lane's supervisor to its last write — never by files in the worktree, which the
//! lane's agent can delete. gc takes that lock itself for each lane it judges and keeps it
//! until the lane's registry folder is gone, so no spawn starts the lane meanwhile.

use std::path::Path;
use std::process::ExitCode;

use clawpool_lanes::read_lane_record;
use clawpool_lanes::state_file::SupervisorLock;
use clawpool_lanes::state_file::now_secs;
use clawpool_worktree::{Repo, remove_lane_worktree, worktree_status};
use serde_json::json;

use crate::cli::{GcArgs, OutputFormat};
use crate::output::CommandError;
use crate::progress::Progress;
use clawpool_lane::registry::{RegistryFolder, lane_registry, registered_names};

/// What gc decided for one lane.
struct Verdict {
    lane: String,
    removed: bool,
    reason: String,
    /// The status `clawpool state` shows (`supervisor_lost` included); `None` when unknown.
    status: Option<String>,
}

pub fn run(args: &GcArgs) -> Result<ExitCode, CommandError> {
    let repo = Repo::open(&args.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let main = repo
        .main_branch()
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let root = repo.state_dir().lanes();
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut verdicts = Vec::new();
    let progress = Progress::bar(
        args.output_format,
        names.len() as u64,
        "gc {bar:30} {pos}/{len} lanes checked · {msg}",
    );
    for (checked, name) in names.into_iter().enumerate() {
        progress.set(checked as u64, name.clone());
        let registry = lane_registry(&repo, &name);
        verdicts.push(judge_held(&repo, &main, &name, &registry, args.force));
    }
    progress.clear();
    // Its last lane gone, the repository leaves the user's index (`ui --all` no longer lists
    // it); gc's work is done either way.
    if registered_names(&repo).is_empty()
        && let Err(err) = crate::known_repos::remove(&repo)
    {
        tracing::warn!("the index of repositories with lanes was not updated: {err}");
    }
    let pruned = std::process::Command::new("git")
        .args(["worktree", "prune"])
        .current_dir(repo.root())
        .status()
        .is_ok_and(|s| s.success());
    match args.output_format {
        OutputFormat::Json => println!(
            "{}",
            json!({
                "lanes": verdicts.iter().map(|v| json!({"lane": v.lane, "removed": v.removed, "reason": v.reason, "status": v.status})).collect::<Vec<_>>(),
                "pruned_worktree_entries": pruned,
            })
        ),
        OutputFormat::Text => {
            for v in &verdicts {
                let what = if v.removed { "removed" } else { "kept   " };
                println!("{what} {:<24} {}", v.lane, v.reason);
            }
            if verdicts.is_empty() {
                println!("(no lanes in this repository)");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Ends the repository's private tmux server (its hidden `clawpool-control` session with its
/// placeholder `sleep`) when no lane's session runs on it any more: nothing else ends a server
/// whose lanes ended after the supervisor that started them went (`daemon --stop`, a killed
/// spawn). Never starts one; leaves a server with any lane session alone.
pub async fn end_idle_tmux_server(repo: &Repo) {
    let config = clawpool_pty::TmuxConfig::new(crate::spawn::tmux_socket_name(repo));
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
fn leave_removed_marker(repo: &Repo, verdict: &Verdict) {
    let marker = repo.state_dir().removed(&verdict.lane);
    if let Some(dir) = marker.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let doc = json!({"lane": verdict.lane, "removed_at": now_secs(), "reason": verdict.reason});
    let _ = std::fs::write(marker, format!("{doc:#}\n"));
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
) -> Verdict {
    let _lock = match SupervisorLock::hold(registry.dir()) {
        Ok(lock) => lock,
        Err(err) => {
            let held = err.kind() == std::io::ErrorKind::WouldBlock;
            let status = registry.entry().ok().and_then(|entry| {
                read_lane_record(registry.dir(), &entry.worktree)
                    .ok()
                    .map(|doc| clawpool_lanes::wire_name(&doc.status))
            });
            return Verdict {
                lane: name.to_owned(),
                removed: false,
                reason: run_allows_removal(&LaneRun::Held, force)
                    .err()
                    .filter(|_| held)
                    .unwrap_or_else(|| format!("its lock cannot be taken: {err}")),
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
fn judge(repo: &Repo, main: &str, name: &str, registry: &RegistryFolder, force: bool) -> Verdict {
    let keep = |reason: String, status: Option<String>| Verdict {
        lane: name.to_owned(),
        removed: false,
        reason,
        status,
    };
    let Ok(entry) = registry.entry() else {
        return keep("no readable lane.json".into(), None);
    };
    let dir = entry.worktree.clone();
    if !dir.exists() {
        return Verdict {
            lane: name.to_owned(),
            removed: true,
            reason: "its folder was already gone".into(),
            status: None,
        };
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
    if let Err(reason) = run_allows_removal(&run, force) {
        return keep(reason, status);
    }
    let Ok(worktree) = worktree_status(&dir) else {
        return keep("not a worktree of this repository".into(), status);
    };
    let base = entry.base.sha.as_deref().unwrap_or(main);
    let tree = Tree {
        dirty: worktree.dirty,
        empty: is_ancestor(repo.root(), &worktree.head, base),
        merged: is_ancestor(repo.root(), &worktree.head, main),
        branch: worktree
            .branch
            .clone()
            .unwrap_or_else(|| worktree.head.clone()),
        main: main.to_owned(),
    };
    let why = match tree_allows_removal(&tree, force) {
        Ok(why) => why,
        Err(reason) => return keep(reason, status),
    };
    match remove_lane_worktree(repo, &dir, force) {
        Ok(()) => Verdict {
            lane: name.to_owned(),
            removed: true,
            reason: why,
            status,
        },
        Err(err) => keep(format!("could not remove: {err}"), status),
    }
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
fn run_allows_removal(run: &LaneRun, force: bool) -> Result<(), String> {
    match run {
        LaneRun::Ended => Ok(()),
        LaneRun::Held => Err(
            "held by a live clawpool (being prepared or running): never removed, --force or not"
                .into(),
        ),
        LaneRun::SupervisorLost(state) if !force => Err(format!(
            "supervisor_lost while {state}: its worker may still run (`clawpool adopt` takes it over); use --force"
        )),
        LaneRun::Unknown(kind) if !force => Err(format!("state unknown ({kind}); use --force")),
        LaneRun::SupervisorLost(_) | LaneRun::Unknown(_) => Ok(()),
    }
}

/// A lane worktree's work, as gc weighs it.
#[derive(Debug)]
struct Tree {
    /// Uncommitted changes or untracked files.
    dirty: bool,
    /// HEAD is the lane's base or behind it: no commits of its own.
    empty: bool,
    /// HEAD is in the main branch.
    merged: bool,
    branch: String,
    main: String,
}

/// Whether a worktree's work lets gc remove it: `Ok` with the reason given for removing it,
/// `Err` with the reason for keeping it. Uncommitted or unmerged work goes only with `--force`.
fn tree_allows_removal(tree: &Tree, force: bool) -> Result<String, String> {
    let Tree { branch, main, .. } = tree;
    match (tree.dirty, tree.empty, tree.merged) {
        (true, _, _) if !force => Err("uncommitted work; use --force".into()),
        (false, true, _) => Ok("no commits of its own".into()),
        (false, false, true) => Ok(format!("{branch} is merged into {main}")),
        _ if !force => Err(format!(
            "{branch} has work not merged into {main}; use --force"
        )),
        _ => Ok("--force".into()),
    }
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

    fn tree(dirty: bool, empty: bool, merged: bool) -> Tree {
        Tree {
            dirty,
            empty,
            merged,
            branch: "lanes/a".into(),
            main: "main".into(),
        }
    }

    #[test]
    fn only_an_ended_run_goes_without_force() {
        assert!(run_allows_removal(&LaneRun::Ended, false).is_ok());
        let lost = LaneRun::SupervisorLost("running".into());
        let kept = run_allows_removal(&lost, false).expect_err("a lost supervisor's lane is kept");
        assert!(kept.contains("supervisor_lost while running"), "{kept}");
        assert!(kept.contains("--force"), "{kept}");
        assert!(run_allows_removal(&lost, true).is_ok());
        let unknown = LaneRun::Unknown("invalid_state_file");
        assert!(run_allows_removal(&unknown, false).is_err());
        assert!(run_allows_removal(&unknown, true).is_ok());
    }

    #[test]
    fn a_held_lane_is_never_removed() {
        for force in [false, true] {
            let kept = run_allows_removal(&LaneRun::Held, force).expect_err("kept");
            assert!(kept.contains("held by a live clawpool"), "{kept}");
        }
    }

    #[test]
    fn empty_or_merged_clean_work_goes_and_the_rest_needs_force() {
        assert_eq!(
            tree_allows_removal(&tree(false, true, false), false),
            Ok("no commits of its own".to_owned())
        );
        assert_eq!(
            tree_allows_removal(&tree(false, false, true), false),
            Ok("lanes/a is merged into main".to_owned())
        );
        let unmerged = tree_allows_removal(&tree(false, false, false), false);
        assert!(
            unmerged
                .as_ref()
                .is_err_and(|why| why.contains("not merged into main")),
            "{unmerged:?}"
        );
        let dirty = tree_allows_removal(&tree(true, true, true), false);
        assert!(
            dirty.as_ref().is_err_and(|why| why.contains("uncommitted")),
            "{dirty:?}"
        );
        for (dirty, empty, merged) in [
            (false, false, false),
            (true, false, false),
            (true, true, true),
        ] {
            assert!(tree_allows_removal(&tree(dirty, empty, merged), true).is_ok());
        }
    }
}
