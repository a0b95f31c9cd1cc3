//! Reading lanes back: `clawpool board` (every lane of a repository) turned into the pool's
//! request and its typed rows rendered (the table's cells, the JSON document), `clawpool
//! events` and `clawpool attach` (how a lane argument finds its lane is the pool's). The rows
//! themselves — records, liveness, branches against their bases — are the pool's
//! (`clawpool_pool::board`). Read-only: these work from the lanes' records (`state.json` in
//! each registry folder, never the worktree's published copy) and event logs alone, with or
//! without a supervisor running.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::wire_name;
use clawpool_pool::board::{BoardLane, BoardReply, BoardRequest, RepositoryCost};
use clawpool_pool::{Observer, Pool, PoolReply, PoolRequest};
use clawpool_worktree::Repo;
use serde_json::Value;

use crate::cells;
use crate::cli::OutputFormat;
use crate::output::{CommandError, EXIT_FAILURE};
use clawpool_worktree::layout::LANE_DIR;

/// How a lane argument finds its lane is the pool's ([`clawpool_pool::lane_lookup`]).
pub use clawpool_pool::lane_lookup::{FoundLane, find_enclosing_lane, find_lane};

/// Lane `name`'s board row (the pool's, `clawpool_pool::board::board_lane`) as the JSON
/// document `clawpool board` prints, for the MCP server's `list_lanes`, which hands documents
/// to its client.
pub fn board_lane(repo: &Repo, name: &str, now: u64) -> Value {
    document(&clawpool_pool::board::board_lane(repo, name, now))
}

/// A typed board row as its JSON document.
fn document(lane: &BoardLane) -> Value {
    serde_json::to_value(lane).unwrap_or(Value::Null)
}

pub async fn run_board(
    repo_dir: &Path,
    all: bool,
    watch: bool,
    format: OutputFormat,
) -> Result<ExitCode, CommandError> {
    let request = if all {
        BoardRequest::Known
    } else {
        BoardRequest::Repository(repo_dir.to_owned())
    };
    let pool = Pool::reader();
    loop {
        let PoolReply::Board(reply) = pool
            .handle(PoolRequest::Board(request.clone()), Arc::new(NoProgress))
            .await?
        else {
            unreachable!("the pool answers a board request with a board")
        };
        match format {
            OutputFormat::Json => print_json(&reply, all),
            OutputFormat::Text => {
                if watch {
                    print!("\x1b[H\x1b[2J");
                }
                if all && reply.sections.is_empty() {
                    println!("(no repository with lanes in the index)");
                }
                for section in reply.sections {
                    if all {
                        println!("repository {}", section.repo.root().display());
                    }
                    let cost = section.cost();
                    print_table(&section.into_lanes(), &cost);
                }
            }
        }
        if !watch {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// The board as one JSON document, `{"lanes": [...], "cost": [...]}`, each row written by the
/// pool (a kept row as it was printed, its ages as of now); with `--all` each lane and each
/// cost names its repository.
fn print_json(reply: &BoardReply, all: bool) {
    #[derive(serde::Serialize)]
    struct Cost {
        #[serde(flatten)]
        cost: RepositoryCost,
        repository: String,
    }
    let costs: Vec<Cost> = reply
        .sections
        .iter()
        .map(|section| Cost {
            cost: section.cost(),
            repository: section.repo.root().display().to_string(),
        })
        .collect();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let _ = write_board(&mut out, reply, all, &costs);
}

fn write_board(
    out: &mut impl Write,
    reply: &BoardReply,
    all: bool,
    costs: &impl serde::Serialize,
) -> std::io::Result<()> {
    out.write_all(b"{\"lanes\":[")?;
    let mut first = true;
    for section in &reply.sections {
        let repository = all.then(|| section.repo.root().display().to_string());
        for row in &section.rows {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            row.write_json(out, repository.as_deref())?;
        }
    }
    out.write_all(b"],\"cost\":")?;
    serde_json::to_writer(&mut *out, costs)?;
    out.write_all(b"}\n")?;
    out.flush()
}

/// A board reports no progress: it is one read.
struct NoProgress;

impl Observer for NoProgress {
    fn starting(&self, _: &[String]) {}
    fn lane(&self, _: &str, _: clawpool_pool::LaneNote) {}
    fn event(&self, _: &clawpool_lanes::LaneEvent) {}
    fn notice(&self, _: clawpool_pool::Notice) {}
    fn done(&self) {}
}

fn print_table(lanes: &[BoardLane], cost: &RepositoryCost) {
    let now = now_secs();
    let rows: Vec<[String; 15]> = lanes
        .iter()
        .map(|lane| {
            let doc = cells::doc(lane);
            let text = |field: Option<String>| field.unwrap_or_else(|| "-".into());
            let status = cells::status_cell(lane);
            let status = match lane.board.state_file_degraded {
                Some(_) => format!("{status} (state file degraded)"),
                None => status,
            };
            let ahead = lane
                .board
                .commits_ahead
                .map_or_else(|| "-".into(), |n| format!("+{n}"));
            let dirty = match lane.board.dirty {
                Some(true) => "dirty",
                Some(false) => "clean",
                None => "-",
            };
            let last_event = match &lane.state {
                Ok(view) => view.doc.lane_event.as_ref().map(|e| wire_name(&e.kind)),
                Err(err) => Some(err.kind().to_owned()),
            };
            [
                doc.map_or_else(|| lane.name.clone(), |doc| doc.lane.clone()),
                text(doc.map(|doc| doc.agent.clone())),
                status,
                text(doc.and_then(|doc| {
                    let event = doc.lane_event.as_ref()?;
                    Some(format!("{}s", now.saturating_sub(event.timestamp)))
                })),
                text(doc.map(|doc| format!("{}s", doc.seconds_since_update))),
                text(doc.and_then(|doc| doc.branch.clone())),
                format!("{ahead} {dirty}"),
                cells::freshness_cell(lane),
                text(doc.and_then(|doc| doc.green_level.map(|level| wire_name(&level)))),
                cells::permissions_cell(lane),
                cells::tokens_cell(lane),
                cells::cost_cell(lane),
                text(last_event),
                cells::sandbox_cell(lane),
                text(doc.and_then(|doc| {
                    doc.pull_request
                        .as_ref()
                        .map(|pr| format!("#{}", pr.number))
                })),
            ]
        })
        .collect();
    let header = [
        "lane",
        "agent",
        "status",
        "in state",
        "progress",
        "branch",
        "commits",
        "freshness",
        "green",
        "perms a/d/?",
        "tokens",
        "cost",
        "last event",
        "sandbox",
        "pr",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", line(&header.map(str::to_owned)));
    for row in &rows {
        println!("{}", line(row));
    }
    if rows.is_empty() {
        println!("(no lanes in this repository)");
    } else {
        println!(
            "cost: ${:.4} over {} priced lane(s){}",
            cost.total_usd,
            cost.lanes_priced,
            match cost.lanes_unpriced {
                0 => String::new(),
                n => format!(", {n} lane(s) with usage that has no price (cost `?`)"),
            }
        );
    }
    for lane in lanes {
        if let Some(doc) = cells::doc(lane)
            && let Some(escalation) = &doc.escalation
        {
            println!(
                "{}: {}\n    next: {}",
                doc.lane, escalation.reason, escalation.next_action
            );
        }
    }
}

pub async fn run_events(lane: &Path, follow: bool) -> Result<ExitCode, CommandError> {
    let found = find_lane(lane)?;
    // One listener for the whole run: a `ctrl_c()` made anew each round misses a Ctrl-C that
    // arrives while the log is being read. Only when following: a plain read stays
    // interruptible by the default action.
    let mut interrupt = if follow {
        Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .map_err(|e| CommandError::io("listening for Ctrl-C", e))?,
        )
    } else {
        None
    };
    let mut offset = 0usize;
    loop {
        let text = match std::fs::read_to_string(&found.events) {
            Ok(text) => text,
            Err(e) if offset == 0 && !follow => {
                return Err(CommandError {
                    kind: "missing_events",
                    message: format!("no event log at {}: {e}", found.events.display()),
                    exit: EXIT_FAILURE,
                });
            }
            Err(_) => String::new(),
        };
        // Only whole lines: a line being appended right now is printed on the next round.
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        if complete > offset {
            print!("{}", &text[offset..complete]);
            offset = complete;
        }
        let Some(interrupt) = interrupt.as_mut() else {
            return Ok(ExitCode::SUCCESS);
        };
        // Following never ends by itself, not even when the lane does: events still come
        // after it (its last commits, verification, merge-forward). Ctrl-C ends it, exit 0.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// `clawpool attach`: a tmux lane is attached for real (a person can take over); a PTY lane is
/// mirrored read-only from its raw terminal log until it ends or Ctrl-C.
pub async fn run_attach(lane: &Path) -> Result<ExitCode, CommandError> {
    let found = find_lane(lane)?;
    let doc = found.state().map_err(|err| CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit: EXIT_FAILURE,
    })?;
    if let Some(target) = &doc.transport.session {
        let (socket, session) = target.split_once(':').unwrap_or(("", target));
        let err = std::os::unix::process::CommandExt::exec(
            std::process::Command::new("tmux")
                .args(["-L", socket, "attach", "-t", session])
                .env_remove("TMUX"),
        );
        return Err(CommandError::io("running tmux attach", err));
    }
    let log = found.events.with_file_name("terminal.log");
    let log = if log.is_file() {
        log
    } else {
        found.dir.join(LANE_DIR).join("terminal.log")
    };
    // Lanes run at the default size; the mirror replays at that size.
    let mut model = clawpool_pty::ScreenModel::new(clawpool_pty::ScreenOptions {
        answer_queries: false,
        ..clawpool_pty::ScreenOptions::new(clawpool_pty::TermSize::default())
    });
    let mut offset = 0usize;
    let mut out = std::io::stdout();
    loop {
        let bytes = std::fs::read(&log)
            .map_err(|e| CommandError::io("reading the lane's terminal log", e))?;
        if bytes.len() < offset {
            offset = 0; // rotated
        }
        if bytes.len() > offset {
            model.feed(&bytes[offset..]);
            offset = bytes.len();
            let mut frame = b"\x1b[H\x1b[2J".to_vec();
            frame.extend_from_slice(&model.contents_formatted());
            std::io::Write::write_all(&mut out, &frame)
                .map_err(|e| CommandError::io("writing to the terminal", e))?;
            std::io::Write::flush(&mut out)
                .map_err(|e| CommandError::io("writing to the terminal", e))?;
        }
        let ended = found
            .state()
            .map(|d| d.status.is_terminal())
            .unwrap_or(true);
        if ended {
            println!("\r\nclawpool: the lane has ended");
            return Ok(ExitCode::SUCCESS);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}
