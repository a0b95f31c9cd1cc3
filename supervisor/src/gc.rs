//! `clawpool gc`: remove the worktrees of lanes that are over and whose work is merged or
//! empty, and prune git's entries for worktrees whose folders are gone. Uncommitted or
//! unmerged work is never removed without `--force`; a lane that is still running never is.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{read_state_file, state_file_path, with_ages};
use clawpool_worktree::{Repo, remove_lane_worktree, worktree_status};
use serde_json::json;

use crate::cli::{GcArgs, OutputFormat};
use crate::output::CommandError;

/// What gc decided for one lane.
struct Verdict {
    lane: String,
    removed: bool,
    reason: String,
}

pub fn run(args: &GcArgs) -> Result<ExitCode, CommandError> {
    let repo = Repo::open(&args.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let main = repo
        .main_branch()
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let root = repo.common_dir().join("clawpool").join("lanes");
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
    for name in names {
        let registry = root.join(&name);
        let verdict = judge(&repo, &main, &name, &registry, args.force);
        if verdict.removed {
            let _ = std::fs::remove_dir_all(&registry);
        }
        verdicts.push(verdict);
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
                "lanes": verdicts.iter().map(|v| json!({"lane": v.lane, "removed": v.removed, "reason": v.reason})).collect::<Vec<_>>(),
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

fn judge(repo: &Repo, main: &str, name: &str, registry: &Path, force: bool) -> Verdict {
    let keep = |reason: String| Verdict {
        lane: name.to_owned(),
        removed: false,
        reason,
    };
    let entry: serde_json::Value = match std::fs::read_to_string(registry.join("lane.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
    {
        Some(entry) => entry,
        None => return keep("no readable lane.json".into()),
    };
    let dir = PathBuf::from(entry["worktree"].as_str().unwrap_or_default());
    if !dir.exists() {
        return Verdict {
            lane: name.to_owned(),
            removed: true,
            reason: "its folder was already gone".into(),
        };
    }
    match read_state_file(&state_file_path(&dir)) {
        Ok(doc) => {
            let view = with_ages(&doc, now_secs());
            if !doc.status.is_terminal() && !view.supervisor_lost {
                return keep(format!(
                    "still {} under a live supervisor",
                    doc.lane_state()
                ));
            }
        }
        Err(err) if !force => return keep(format!("state unknown ({}); use --force", err.kind())),
        Err(_) => {}
    }
    let Ok(status) = worktree_status(&dir) else {
        return keep("not a worktree of this repository".into());
    };
    let branch = status.branch.clone().unwrap_or_else(|| status.head.clone());
    let base = entry["base"]["sha"].as_str().unwrap_or(main);
    let empty = is_ancestor(repo.root(), &status.head, base);
    let merged = is_ancestor(repo.root(), &status.head, main);
    let why = match (status.dirty, empty, merged) {
        (true, _, _) if !force => return keep("uncommitted work; use --force".into()),
        (false, true, _) => "no commits of its own".to_owned(),
        (false, false, true) => format!("{branch} is merged into {main}"),
        (_, _, _) if !force => {
            return keep(format!(
                "{branch} has work not merged into {main}; use --force"
            ));
        }
        _ => "--force".to_owned(),
    };
    match remove_lane_worktree(repo, &dir, force) {
        Ok(()) => Verdict {
            lane: name.to_owned(),
            removed: true,
            reason: why,
        },
        Err(err) => keep(format!("could not remove: {err}")),
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
