//! `clawpool state LANE`: a lane's state file as a reader shows it (ages recomputed, a lost
//! supervisor made visible), as its JSON document or the lines a person looks for first.

use std::path::Path;
use std::process::ExitCode;

use clawpool_lanes::state_file::StateView;
use clawpool_lanes::wire_name;

use crate::cli::OutputFormat;
use crate::output::CommandError;

/// `clawpool state LANE`.
pub fn run_state(lane_dir: &Path, format: OutputFormat) -> Result<ExitCode, CommandError> {
    let lane = crate::board::find_enclosing_lane(lane_dir)?;
    let doc = match lane.state() {
        Ok(doc) => doc,
        Err(err) => {
            return Err(CommandError {
                kind: err.kind(),
                message: err.to_string(),
                exit: crate::output::EXIT_FAILURE,
            });
        }
    };
    let view =
        clawpool_lanes::with_ages(&doc, &lane.record(), clawpool_lanes::state_file::now_secs());
    match format {
        OutputFormat::Json => println!("{}", view.to_json()),
        OutputFormat::Text => print_state(&view),
    }
    Ok(ExitCode::SUCCESS)
}

/// The text of `clawpool state LANE`: the lines a person looks for first.
fn print_state(view: &StateView) {
    let doc = &view.doc;
    let subphase = doc
        .blocked
        .as_ref()
        .map(|blocked| format!("{{{}}}", wire_name(&blocked.subphase)))
        .unwrap_or_default();
    println!("lane      {}", doc.lane);
    println!("agent     {}", doc.agent);
    println!("status    {}{subphase}", view.status.name());
    if let Some(event) = &doc.lane_event {
        println!(
            "in state  {} s",
            clawpool_lanes::state_file::now_secs().saturating_sub(event.timestamp)
        );
    }
    println!("progress  {} s ago", doc.seconds_since_update);
    println!("worktree  {}", doc.worktree);
    if let Some(branch) = &doc.branch {
        println!("branch    {branch}");
    }
    if let Some(channel) = &doc.hooks.channel {
        let degraded = if doc.hooks.degraded {
            " (degraded: the screen decides)"
        } else {
            ""
        };
        println!("channel   {channel}{degraded}");
    }
    if let Some(usage) = &doc.usage {
        println!(
            "tokens    {}/{} in total over {} turns (last turn {}/{}), from {}",
            usage.total.input,
            usage.total.output,
            usage.turns,
            usage.last_turn.input,
            usage.last_turn.output,
            usage.source
        );
    }
    if let Some(event) = &doc.lane_event {
        println!("last      #{} {}", event.seq, event.kind);
    }
    if let Some(escalation) = &doc.escalation {
        println!("escalated {}", escalation.reason);
        println!("next      {}", escalation.next_action);
    }
}
