//! Planning a packet's lanes: everything that can be checked is checked before anything is
//! created — the packet (every problem with its JSON path), each lane's agent and its binary,
//! each lane's base branch, its folder, its sandbox, the prompts — and every problem is
//! reported at once.

use std::path::{Path, PathBuf};

use clawpool_lane::drive::{LaneJob, Terminal, preflight};
use clawpool_lane::handshake::check_prompt;
use clawpool_lane::interrupt::Interrupt;
use clawpool_lanes::{LaneSpec, PacketContext, PacketError, PacketErrors, check_packet};
use clawpool_worktree::{LaneWorktreeSpec, Repo};

use super::PlannedLane;
use crate::config::Loaded;
use crate::request::InvalidPacket;

/// Reads and validates a packet against the repository and configuration: every problem at
/// once (the packet's own, then each lane's against the repository), nothing created.
pub fn prepare(
    repo: &Repo,
    loaded: &Loaded,
    packet: &Path,
    text: &str,
    agent: Option<&str>,
) -> Result<Vec<PlannedLane>, InvalidPacket> {
    let context = PacketContext {
        repo_root: repo.root().to_owned(),
        worktree_root: repo.default_worktree_path("x").parent().map(Path::to_owned),
        default_agent: agent.map(str::to_owned),
    };
    let checked = check_packet(text, &context);
    let mut problems = checked.problems;
    let lanes = plan(repo, loaded, checked.lanes, agent, &mut problems);
    if problems.is_empty() {
        Ok(lanes)
    } else {
        Err(InvalidPacket {
            file: packet.to_owned(),
            problems: PacketErrors(problems),
        })
    }
}

/// Validates every lane against the repository and configuration, adding every problem found
/// to `problems` (each check that does not depend on an earlier one runs whatever that one
/// found); returns the lanes that passed.
fn plan(
    repo: &Repo,
    loaded: &Loaded,
    specs: Vec<LaneSpec>,
    default_agent: Option<&str>,
    problems: &mut Vec<PacketError>,
) -> Vec<PlannedLane> {
    let mut planned = Vec::new();
    // One copy of each agent's profile for all its lanes (`LaneJob::profile`).
    let mut shared_profiles = std::collections::HashMap::new();
    for spec in specs {
        let at = |field: &str| format!("{}.{field}", spec.source);
        let before = problems.len();
        let profile = match spec
            .agent
            .clone()
            .or_else(|| default_agent.map(str::to_owned))
        {
            None => {
                problems.push(PacketError::new(
                    at("agent"),
                    "no agent: give the lane an `agent` or pass --agent",
                ));
                None
            }
            Some(agent) => match loaded.profiles.get(&agent) {
                Ok(profile) => Some(std::sync::Arc::clone(
                    shared_profiles
                        .entry(agent)
                        .or_insert_with(|| std::sync::Arc::new(profile.clone())),
                )),
                Err(err) => {
                    problems.push(PacketError::new(at("agent"), err.to_string()));
                    None
                }
            },
        };
        if let Err(e) = check_prompt(&spec.prompt) {
            problems.push(PacketError::new(
                spec.source.clone(),
                format!("lane {}: {e}", spec.name),
            ));
        }
        let worktree = match LaneWorktreeSpec::new(repo, &spec.name) {
            Ok(mut worktree) => {
                if let Some(base) = &spec.base {
                    worktree.base = base.clone();
                }
                if let Some(branch) = &spec.branch {
                    worktree.branch = branch.clone();
                }
                if let Some(path) = &spec.worktree {
                    worktree.path = path.clone();
                }
                Some(worktree)
            }
            Err(err) => {
                problems.push(PacketError::new(at("name"), err.to_string()));
                None
            }
        };
        let base_sha = worktree
            .as_ref()
            .and_then(|worktree| match repo.resolve(&worktree.base) {
                Ok(sha) => Some(sha),
                Err(err) => {
                    problems.push(PacketError::new(at("base"), err.to_string()));
                    None
                }
            });
        if let Some(existing) = worktree.as_ref().and_then(existing_folder_on_other_branch) {
            problems.push(PacketError::new(at("worktree"), existing));
        }
        if let Some(profile) = &profile {
            // The binary only: the prompt was checked above.
            let probe = LaneJob {
                checks: None,
                policy: std::sync::Arc::clone(&loaded.policy),
                prices: std::sync::Arc::clone(&loaded.prices),
                budget_usd: None,
                name: spec.name.clone(),
                dir: repo.root().to_owned(),
                profile: std::sync::Arc::clone(profile),
                trusted: false,
                settings: loaded.settings,
                prompt: None,
                terminal: Terminal::Pty,
                env: Vec::new(),
                size: None,
                events_path: PathBuf::new(),
                terminal_log: PathBuf::new(),
                branch: None,
                base: None,
                on_event: Box::new(|_| {}),
                interrupt: Interrupt::never(),
                lock: None,
                sandbox: None,
            };
            if let Err(err) = preflight(&probe) {
                problems.push(PacketError::new(at("agent"), err.to_string()));
            }
        }
        // A lane that asks for a sandbox this machine cannot make is refused with the rest:
        // it never starts unconfined.
        let permission_profile = loaded
            .policy
            .permissions()
            .profile_for(spec.permission_profile.as_deref())
            .unwrap_or(loaded.policy.permissions().default_profile);
        let mut sandbox = crate::sandboxing::lane_request(
            &loaded.config,
            spec.sandbox.as_deref(),
            permission_profile,
        );
        if let Some(request) = &mut sandbox {
            let path = std::env::var_os("PATH");
            match clawpool_lane::sandbox::probe(&request.bwrap, path.as_deref()) {
                Ok(program) => request.bwrap = program.into_os_string(),
                Err(why) => problems.push(PacketError::new(
                    at("sandbox"),
                    format!("the lane asks for a sandbox (docs/sandbox.md): {why}"),
                )),
            }
        }
        let (Some(profile), Some(worktree), Some(base_sha)) = (profile, worktree, base_sha) else {
            continue;
        };
        if problems.len() > before {
            continue;
        }
        let mut roots = loaded.roots.clone();
        roots.trusted.extend(spec.trusted_roots.iter().cloned());
        planned.push(PlannedLane {
            spec,
            profile,
            worktree,
            base_sha,
            roots,
            policy: std::sync::Arc::clone(&loaded.policy),
            prices: std::sync::Arc::clone(&loaded.prices),
            rerun_of: None,
            sandbox,
        });
    }
    planned
}

/// A lane folder that is already a worktree on another branch is refused before anything is
/// created (the worktree crate would refuse it too, but only once earlier lanes had started).
fn existing_folder_on_other_branch(spec: &LaneWorktreeSpec) -> Option<String> {
    let status = clawpool_worktree::worktree_status(&spec.path).ok()?;
    match status.branch {
        Some(branch) if branch == spec.branch => None,
        other => Some(format!(
            "lane folder {} exists with {} checked out, not {}",
            spec.path.display(),
            other.map_or("a detached HEAD".to_owned(), |b| format!("branch {b}")),
            spec.branch
        )),
    }
}

/// A lane that runs another agent than `--agent` because the packet names one (a lane's own
/// `agent` or the packet's `defaults`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOverride {
    /// The lane.
    pub lane: String,
    /// The agent the packet names for it.
    pub agent: String,
}

/// The lanes that run another agent than `cli_agent` (`--agent`), which is only the default
/// for lanes that name none.
pub fn agent_overrides(lanes: &[PlannedLane], cli_agent: &str) -> Vec<AgentOverride> {
    lanes
        .iter()
        .filter_map(|lane| {
            let agent = lane.spec.agent.as_deref().filter(|a| *a != cli_agent)?;
            Some(AgentOverride {
                lane: lane.spec.name.clone(),
                agent: agent.to_owned(),
            })
        })
        .collect()
}
