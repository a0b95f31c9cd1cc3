//! `clawpool packet validate`: a task packet's problems, as `spawn` would find them, before
//! anything starts.

use std::path::Path;
use std::process::ExitCode;

use clawpool_agents::profiles::ProfileSet;
use serde_json::json;

use crate::cli::OutputFormat;
use crate::output::CommandError;

/// A problem for each lane that names an agent no profile is known for, at the lane's
/// `agent` path, in the words `spawn` uses.
pub fn unknown_agents(
    profiles: &ProfileSet,
    lanes: &[clawpool_lanes::LaneSpec],
) -> Vec<clawpool_lanes::PacketError> {
    lanes
        .iter()
        .filter_map(|lane| {
            let agent = lane.agent.as_deref()?;
            let err = profiles.get(agent).err()?;
            Some(clawpool_lanes::PacketError::new(
                format!("{}.agent", lane.source),
                err.to_string(),
            ))
        })
        .collect()
}
/// `clawpool packet validate`: the packet's own problems, then each lane's agent against the
/// known profiles (as `spawn` checks it; binaries and bases are spawn's to check).
pub fn run_packet_validate(
    profiles: &ProfileSet,
    file: &Path,
    repo: &Path,
    format: OutputFormat,
) -> Result<ExitCode, CommandError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        CommandError::invalid(
            "packet_not_found",
            format!("cannot read task packet {}: {e}", file.display()),
        )
    })?;
    let repo_root = repo.canonicalize().map_err(|_| {
        CommandError::invalid(
            "cwd_not_found",
            format!("repository folder does not exist: {}", repo.display()),
        )
    })?;
    let parsed =
        clawpool_lanes::parse_packet(&text, &clawpool_lanes::PacketContext::new(repo_root))
            .and_then(|batch| {
                let unknown = unknown_agents(profiles, &batch.lanes);
                if unknown.is_empty() {
                    Ok(batch)
                } else {
                    Err(clawpool_lanes::PacketErrors(unknown))
                }
            });
    match parsed {
        Ok(batch) => {
            match format {
                OutputFormat::Json => println!("{}", json!({"valid": true, "packet": batch})),
                OutputFormat::Text => {
                    println!("{}: valid, {} lane(s)", file.display(), batch.lanes.len());
                    for lane in &batch.lanes {
                        println!(
                            "  {:<24} agent {:<10} {}",
                            lane.name,
                            lane.agent.as_deref().unwrap_or("(default)"),
                            lane.prompt.lines().next().unwrap_or("")
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            match format {
                OutputFormat::Json => eprintln!(
                    "{}",
                    json!({"error": {"kind": "invalid_packet", "message": format!("{} has {} problem(s)", file.display(), errors.0.len()), "problems": errors}})
                ),
                OutputFormat::Text => eprintln!("clawpool: {}: {errors}", file.display()),
            }
            Ok(ExitCode::from(crate::output::EXIT_INVALID_INPUT))
        }
    }
}
