//! `clawpool permissions check`: one permission question decided the way a lane would decide
//! it (`docs/permissions.md`). The lane's side (its worktree, repository, sibling lanes and
//! profile) is `clawpool_lane::permission_gate`; the decision is `clawpool_recovery::permissions`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clawpool_recovery::permissions::{Decision, LaneContext, Profile, Request, Tool};
use serde_json::json;

use crate::cli::{OutputFormat, PermissionsCheckArgs};
use crate::loaded::Loaded;
use crate::output::CommandError;
use clawpool_lane::permission_gate::lane_context;

/// `clawpool permissions check`.
pub fn run_check(args: &PermissionsCheckArgs) -> Result<ExitCode, CommandError> {
    let cwd = match &args.cwd {
        Some(cwd) if !cwd.is_dir() => {
            return Err(CommandError::invalid(
                "cwd_not_found",
                format!("--cwd {}: no such folder", cwd.display()),
            ));
        }
        Some(cwd) => Some(cwd.canonicalize().unwrap_or_else(|_| cwd.clone())),
        None => None,
    };
    let worktree = match &args.lane {
        Some(lane) => crate::board::find_lane(lane)?.dir,
        None => {
            let here = std::env::current_dir()
                .map_err(|e| CommandError::io("reading the current folder", e))?;
            worktree_top(cwd.as_deref().unwrap_or(&here))
        }
    };
    let loaded = Loaded::load(&args.config, Some(&worktree))?;
    let settings = loaded.policy.permissions();
    let mut lane = lane_context(&worktree, settings)?;
    if let Some(name) = &args.profile {
        lane.profile = Profile::parse(name).ok_or_else(|| {
            CommandError::invalid(
                "invalid_argument",
                format!(
                    "--profile {name:?}: expected read-only, workspace-write or \
                     danger-full-access"
                ),
            )
        })?;
    }
    let request = match (&args.command, &args.write, &args.edit) {
        (Some(command), _, _) if command.trim().is_empty() => {
            return Err(CommandError::invalid(
                "invalid_argument",
                "--command is empty: give the command the agent asks to run",
            ));
        }
        (Some(command), _, _) => Request::Command {
            command: command.clone(),
            cwd: cwd.unwrap_or_else(|| lane.worktree.clone()),
        },
        (None, Some(path), _) => Request::File {
            tool: Tool::Write,
            path: path.clone(),
        },
        (None, None, Some(path)) => Request::File {
            tool: Tool::Edit,
            path: path.clone(),
        },
        (None, None, None) => {
            return Err(CommandError::invalid(
                "invalid_argument",
                "give --command, --write or --edit",
            ));
        }
    };
    let decision = settings.policy.decide(&lane, &request);
    match args.output_format {
        OutputFormat::Json => println!("{}", check_json(&lane, &request, &decision)),
        OutputFormat::Text => print_check(&lane, &decision),
    }
    Ok(ExitCode::SUCCESS)
}

fn check_json(lane: &LaneContext, request: &Request, decision: &Decision) -> serde_json::Value {
    let (tool, question, cwd) = match request {
        Request::Command { command, cwd } => ("bash", command.clone(), cwd.clone()),
        Request::File { tool, path } => (
            tool.name(),
            path.display().to_string(),
            lane.worktree.clone(),
        ),
    };
    json!({
        "decision": decision.verdict,
        "rule": decision.rule,
        "reason": decision.reason,
        "tool": tool,
        "question": question,
        "cwd": cwd,
        "worktree": lane.worktree,
        "profile": lane.profile,
        "parts": decision.parts,
    })
}

fn print_check(lane: &LaneContext, decision: &Decision) {
    println!(
        "{} by {}: {}",
        decision.verdict.name(),
        decision.rule,
        decision.reason
    );
    println!(
        "lane: {} (profile {})",
        lane.worktree.display(),
        lane.profile.name()
    );
    for part in &decision.parts {
        let text = std::iter::once(part.verb.as_str())
            .chain(part.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        println!(
            "  {:<5} {text}  [{}] in {}",
            part.verdict.name(),
            part.rule,
            part.cwd.display()
        );
    }
}

/// The top of the git worktree `dir` is in (the first folder up with a `.git`), else `dir`.
fn worktree_top(dir: &Path) -> PathBuf {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.ancestors()
        .find(|folder| folder.join(".git").exists())
        .unwrap_or(&dir)
        .to_path_buf()
}
