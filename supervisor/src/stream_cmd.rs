//! `clawpool events --all` and `clawpool wait`: the repository's stream (`clawpool_pool`),
//! printed.

use std::path::Path;
use std::process::ExitCode;

use clawpool_lanes::stream::StreamEvent;
use clawpool_pool::{Follower, LaneProgress, Start, WaitOutcome};
use clawpool_worktree::Repo;
use clawpool_worktree::layout::StateDir;

use crate::cli::{OutputFormat, WaitArgs};
use crate::output::{CommandError, EXIT_FAILURE};

/// Exit code of a wait whose time ran out (as `timeout(1)`'s).
const EXIT_TIMED_OUT: u8 = 124;

fn state_dir(repo: &Path) -> Result<StateDir, CommandError> {
    let repo =
        Repo::open(repo).map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    Ok(StateDir::of(repo.common_dir()))
}

fn stream_error(err: clawpool_pool::StreamError) -> CommandError {
    let exit = match err {
        clawpool_pool::StreamError::UnknownCursor { .. } => crate::output::EXIT_INVALID_INPUT,
        _ => EXIT_FAILURE,
    };
    CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit,
    }
}

/// `clawpool events --all [--follow] [--since CURSOR]`.
pub async fn run_events_all(
    repo: &Path,
    follow: bool,
    since: Option<u64>,
    format: OutputFormat,
) -> Result<ExitCode, CommandError> {
    let dir = state_dir(repo)?;
    let start = since.map_or(Start::Beginning, Start::After);
    let mut follower = Follower::open(&dir, start).map_err(stream_error)?;
    let mut interrupt = if follow {
        Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .map_err(|e| CommandError::io("listening for Ctrl-C", e))?,
        )
    } else {
        None
    };
    let mut events = follower.read().map_err(stream_error)?;
    loop {
        print_events(&events, format);
        let Some(interrupt) = interrupt.as_mut() else {
            return Ok(ExitCode::SUCCESS);
        };
        // Like a lane's `events --follow`, following never ends by itself; Ctrl-C, exit 0.
        tokio::select! {
            next = follower.next() => events = next.map_err(stream_error)?,
            _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
        }
    }
}

fn print_events(events: &[StreamEvent], format: OutputFormat) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in events {
        match format {
            OutputFormat::Json => {
                let json = serde_json::to_string(line).unwrap_or_default();
                let _ = writeln!(out, "{json}");
            }
            OutputFormat::Text => {
                let event = &line.event;
                let change = match (&event.from, &event.to) {
                    (Some(from), Some(to)) => {
                        format!("  {} -> {}", state_name(from), state_name(to))
                    }
                    (None, Some(to)) => format!("  -> {}", state_name(to)),
                    _ => String::new(),
                };
                let _ = writeln!(
                    out,
                    "{:>10}  {}  #{}  {}{change}",
                    line.cursor,
                    event.lane,
                    event.seq,
                    event.kind.as_str()
                );
            }
        }
    }
    // Followers read line by line as it comes.
    let _ = out.flush();
}

fn state_name(state: &clawpool_lanes::LaneState) -> String {
    use clawpool_lanes::{LaneState, wire_name};
    let status = wire_name(&state.status());
    match state {
        LaneState::Blocked(subphase) => format!("{status}({})", wire_name(subphase)),
        LaneState::Failed(class) => format!("{status}({})", wire_name(class)),
        _ => status,
    }
}

/// `clawpool wait LANE... --until STATES [--timeout SECONDS]`.
pub async fn run_wait(args: &WaitArgs) -> Result<ExitCode, CommandError> {
    if let Some(bad) = args
        .lanes
        .iter()
        .find(|name| !clawpool_lanes::is_valid_lane_name(name))
    {
        return Err(CommandError::invalid(
            "invalid_argument",
            format!("{bad:?} is not a lane name (docs/task-packet.md, \"Lane names\")"),
        ));
    }
    let dir = state_dir(&args.repo)?;
    let outcome = clawpool_pool::wait(&dir, &args.lanes, &args.until, args.timeout)
        .await
        .map_err(|err| CommandError {
            kind: err.kind(),
            message: err.to_string(),
            exit: EXIT_FAILURE,
        })?;
    let (lanes, exit, summary) = match &outcome {
        WaitOutcome::Reached { lanes, .. } => (lanes, ExitCode::SUCCESS, None),
        WaitOutcome::EndedElsewhere { lanes, .. } => (
            lanes,
            ExitCode::from(EXIT_FAILURE),
            Some("a lane ended in a state not waited for"),
        ),
        WaitOutcome::TimedOut { lanes, .. } => (
            lanes,
            ExitCode::from(EXIT_TIMED_OUT),
            Some("timed out before every lane reached a state waited for"),
        ),
    };
    match args.output_format {
        OutputFormat::Json => println!("{}", serde_json::to_string(&outcome).unwrap_or_default()),
        OutputFormat::Text => {
            for lane in lanes {
                println!("{}", describe(lane));
            }
            if let Some(summary) = summary {
                eprintln!("clawpool: wait: {summary}");
            }
        }
    }
    Ok(exit)
}

fn describe(lane: &LaneProgress) -> String {
    let state = lane
        .state
        .as_ref()
        .map_or_else(|| "(no event yet)".to_owned(), state_name);
    let mark = if lane.reached { "reached" } else { "waiting" };
    format!("{}  {state}  {mark}", lane.lane)
}
