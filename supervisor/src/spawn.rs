//! `clawpool spawn` and `clawpool adopt` as the binary has them: their flags turned into the
//! pool's requests ([`clawpool_pool::request`]), and what the pool reports rendered — the live
//! board of lanes on a terminal (or event lines), notices, and the final document. Planning,
//! starting, the registry, the supervisor lock and adoption are the pool's
//! ([`clawpool_pool::start`], [`clawpool_pool::adoption`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use clawpool_lanes::LaneEvent;
use clawpool_pool::Pool;
use clawpool_pool::observer::{LaneNote, Notice, Observer};
use clawpool_pool::request::{
    AdoptRequest, InvalidPacket, PoolReply, PoolRequest, SpawnReply, SpawnRequest, Transport,
};
use clawpool_worktree::Repo;
use serde_json::json;

pub use clawpool_pool::tmux::{tmux_attach_command, tmux_socket_name};

use crate::cli::{AdoptArgs, OutputFormat, SpawnArgs, TransportKind};
use crate::loaded::Loaded;
use crate::output::{CommandError, EXIT_INVALID_INPUT};
use crate::progress::Progress;
use crate::run_lane::print_event;

impl From<TransportKind> for Transport {
    fn from(kind: TransportKind) -> Self {
        match kind {
            TransportKind::Pty => Transport::Pty,
            TransportKind::Tmux => Transport::Tmux,
        }
    }
}

/// The JSON error document's `error` object for a refused packet: `kind`, `message` (every
/// problem, as text shows it) and `problems` (`[{path, message}]`), as `clawpool packet
/// validate` gives it.
pub fn invalid_packet_json(invalid: &InvalidPacket) -> serde_json::Value {
    let err = CommandError::from(invalid);
    json!({"kind": err.kind, "message": err.message, "problems": invalid.problems})
}

/// Prints a packet's refusal on stderr in the chosen format; exit 2.
fn report_invalid(invalid: &InvalidPacket, format: OutputFormat) -> ExitCode {
    match format {
        OutputFormat::Json => eprintln!("{}", json!({"error": invalid_packet_json(invalid)})),
        OutputFormat::Text => {
            eprintln!("clawpool: error: {}", CommandError::from(invalid).message);
        }
    }
    ExitCode::from(EXIT_INVALID_INPUT)
}

/// How `clawpool spawn` ended: it ran the packet itself, or the repository's background
/// supervisor is to take it (`--detach`, or a daemon already holds the lock). Handing over is
/// the caller's (`daemon::hand_over`), so that spawning never depends on the daemon's code.
pub enum Spawned {
    /// The packet ran here; the exit code says how.
    Ran(ExitCode),
    /// The daemon is to take the packet.
    HandOver {
        /// The repository.
        repo: Repo,
        /// The packet's text.
        packet: String,
        /// Start a daemon if none runs (`--detach`); otherwise only hand over to a running one.
        start: bool,
        /// Why this process could not run it itself, when handing over is the fallback: the
        /// error to report if no daemon takes it.
        refused: Option<CommandError>,
    },
}

/// `clawpool spawn`: the packet read (from its file, or made from `--name`/`--prompt`), handed
/// to the pool, and its lanes rendered as they run.
pub async fn run(args: &SpawnArgs, loaded: Loaded) -> Result<Spawned, CommandError> {
    let packet = match args.inline_packet() {
        Some(text) => text,
        None => std::fs::read_to_string(args.packet_name()).map_err(|e| {
            CommandError::invalid(
                "packet_not_found",
                format!(
                    "cannot read task packet {}: {e}",
                    args.packet_name().display()
                ),
            )
        })?,
    };
    let request = SpawnRequest {
        repo: args.repo.clone(),
        packet,
        packet_name: args.packet_name(),
        transport: args.transport.into(),
        concurrency: args.concurrency,
        agent: args.agent.clone(),
        rerun: args.rerun,
        detach: args.detach,
    };
    let board = Board::new(args.output_format);
    let reply = Pool::new(loaded)
        .handle(PoolRequest::Spawn(request), Arc::new(board.clone()))
        .await?;
    let PoolReply::Spawn(reply) = reply else {
        unreachable!("the pool answers a spawn request with a spawn reply")
    };
    let report = match reply {
        SpawnReply::Invalid(invalid) => {
            return Ok(Spawned::Ran(report_invalid(&invalid, args.output_format)));
        }
        SpawnReply::HandOver(hand_over) => {
            return Ok(Spawned::HandOver {
                repo: hand_over.repo,
                packet: hand_over.packet,
                start: hand_over.start,
                refused: hand_over.refused,
            });
        }
        SpawnReply::Ran(report) => report,
    };
    match args.output_format {
        OutputFormat::Json => {
            let ran = report.lanes.iter().map(|(name, state)| {
                json!({
                    "lane": name,
                    "state": state,
                    "state_file_degraded": report.unpersisted.get(name),
                })
            });
            let lanes: Vec<_> = ran
                .chain(report.skipped.iter().map(|lane| json!(lane)))
                .collect();
            println!(
                "{}",
                json!({
                    "lanes": lanes,
                    "interrupted": report.interrupted.map(|signal| json!({"signal": signal.name(), "exit": signal.exit_code()})),
                })
            );
        }
        OutputFormat::Text => {
            for (name, err) in &report.unpersisted {
                eprintln!(
                    "clawpool: lane {name}: its outcome is in its event log but could not be written to its state file ({err}); `clawpool adopt` writes it once the file can be written"
                );
            }
            if let Some(signal) = report.interrupted {
                eprintln!(
                    "clawpool: interrupted by {}: every started lane's agent was stopped and the lane recorded as failed, queued lanes were not started; exit {}",
                    signal.name(),
                    signal.exit_code()
                );
            }
        }
    }
    Ok(Spawned::Ran(match report.interrupted {
        Some(signal) => ExitCode::from(signal.exit_code()),
        None if report.all_finished() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    }))
}

/// `clawpool adopt`: after a supervisor died (even with SIGKILL), the pool takes over every
/// live lane it left in tmux ([`clawpool_pool::adoption`]); a lane that cannot be taken over is
/// reported in every output format, left alone, and makes the exit code 1.
pub async fn adopt(args: AdoptArgs, loaded: Loaded) -> Result<ExitCode, CommandError> {
    let board = Board::new(args.output_format);
    let request = AdoptRequest {
        repo: args.repo.clone(),
    };
    let reply = Pool::new(loaded)
        .handle(PoolRequest::Adopt(request), Arc::new(board.clone()))
        .await?;
    let PoolReply::Adopt(reply) = reply else {
        unreachable!("the pool answers an adopt request with an adopt reply")
    };
    match args.output_format {
        OutputFormat::Json => println!(
            "{}",
            json!({
                "lanes": reply.adopted.iter().map(|(name, state)| json!({"lane": name, "state": state})).collect::<Vec<_>>(),
                "not_adopted": reply.not_adopted,
                "interrupted": reply.interrupted.map(|signal| json!({"signal": signal.name(), "exit": signal.exit_code()})),
            })
        ),
        OutputFormat::Text => {
            if let Some(signal) = reply.interrupted {
                eprintln!(
                    "clawpool: interrupted by {}: every adopted lane's agent was stopped and the lane recorded as failed; exit {}",
                    signal.name(),
                    signal.exit_code()
                );
            }
        }
    }
    Ok(match reply.interrupted {
        Some(signal) => ExitCode::from(signal.exit_code()),
        None if reply.all_finished() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}

/// What the user sees while lanes run: on a terminal, one live line per lane; otherwise (or
/// with JSON output) the events as a plain line log. The pool reports to it as an
/// [`Observer`].
#[derive(Clone)]
pub struct Board {
    inner: Arc<Mutex<BoardState>>,
    format: OutputFormat,
    live: bool,
    /// Under the live lane lines: how many lanes are done (`crate::progress`); made once the
    /// pool says how many lanes there are.
    progress: Arc<OnceLock<Progress>>,
    /// The task redrawing the live lines, from the start of the lanes to their end.
    painter: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

struct BoardState {
    lanes: BTreeMap<String, LaneLine>,
    painted_rows: usize,
    width: usize,
}

struct LaneLine {
    state: String,
    since: Instant,
    last_event: String,
}

impl LaneLine {
    /// Whether the lane is over for this batch: ended, skipped or never started.
    fn is_done(&self) -> bool {
        ["finished", "stopped", "failed", "skipped", "not started"]
            .iter()
            .any(|done| self.state.starts_with(done))
    }
}

/// A lane's situation as its board line says it.
fn note_text(note: &LaneNote) -> String {
    match note {
        LaneNote::Skipped(why) => format!("skipped: {why}"),
        LaneNote::NotStarted(signal) => format!("not started: interrupted by {}", signal.name()),
        LaneNote::PreparingWorktree => "preparing worktree".to_owned(),
        LaneNote::Failed(message) => format!("failed: {message}"),
        LaneNote::NotAdopted { kind, error } => format!("not adopted: {kind} ({error})"),
        LaneNote::NeverRegistered => "never started (not registered)".to_owned(),
        LaneNote::Lost(state) => state.to_string(),
        LaneNote::AlreadyEnded(state) => format!("{state} (already ended)"),
        LaneNote::Unrecorded { state, error } => {
            format!("{state} (not in its state file: {error})")
        }
    }
}

impl Board {
    /// A board with no lanes yet: the pool names them ([`Observer::starting`]).
    pub fn new(format: OutputFormat) -> Self {
        let live = format == OutputFormat::Text && crate::mirror::can_mirror();
        Self {
            inner: Arc::new(Mutex::new(BoardState {
                lanes: BTreeMap::new(),
                painted_rows: 0,
                width: 4,
            })),
            format,
            live,
            progress: Arc::new(OnceLock::new()),
            painter: Arc::new(Mutex::new(None)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BoardState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, lane: &str, state: &str, event: Option<&str>) {
        let width = {
            let mut inner = self.lock();
            let width = inner.width;
            if let Some(line) = inner.lanes.get_mut(lane) {
                if line.state != state {
                    line.state = state.to_owned();
                    line.since = Instant::now();
                }
                if let Some(event) = event {
                    line.last_event = event.to_owned();
                }
            }
            width
        };
        if !self.live && self.format == OutputFormat::Text && event.is_none() {
            println!("{lane:<width$} {state}");
        }
    }

    /// On a terminal, redraws the lane lines four times a second.
    fn paint_live(&self) {
        if !self.live {
            return;
        }
        let board = self.clone();
        let painter = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                board.paint();
            }
        });
        *self.painter.lock().unwrap_or_else(|p| p.into_inner()) = Some(painter);
    }

    fn paint(&self) {
        let mut inner = self.lock();
        let mut out = String::new();
        if inner.painted_rows > 0 {
            out.push_str(&format!("\x1b[{}A", inner.painted_rows));
        }
        let width = inner.width;
        for (name, line) in &inner.lanes {
            out.push_str(&format!(
                "\r\x1b[2K{name:<width$}  {:<32} {:>5}s  {}\n",
                line.state,
                line.since.elapsed().as_secs(),
                line.last_event
            ));
        }
        inner.painted_rows = inner.lanes.len();
        let done = inner.lanes.values().filter(|l| l.is_done()).count();
        let queued = inner.lanes.values().filter(|l| l.state == "queued").count();
        let working = inner.lanes.len() - done - queued;
        let progress = self.progress.get_or_init(Progress::none);
        progress.set(done as u64, format!("{working} working · {queued} queued"));
        // The progress line sits under the lane lines: out of the way while they are redrawn.
        progress.suspend(|| {
            print!("{out}");
            let _ = std::io::stdout().flush();
        });
    }
}

impl Observer for Board {
    fn starting(&self, lanes: &[String]) {
        {
            let mut inner = self.lock();
            inner.width = lanes.iter().map(String::len).max().unwrap_or(4).max(4);
            inner.lanes = lanes
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        LaneLine {
                            state: "queued".into(),
                            since: Instant::now(),
                            last_event: String::new(),
                        },
                    )
                })
                .collect();
        }
        let _ = self.progress.set(if self.live {
            Progress::bar(
                self.format,
                lanes.len() as u64,
                "{bar:30} {pos}/{len} lanes done · {msg} · {elapsed}",
            )
        } else {
            Progress::none()
        });
        self.paint_live();
    }

    fn lane(&self, lane: &str, note: LaneNote) {
        self.set(lane, &note_text(&note), None);
    }

    fn event(&self, event: &LaneEvent) {
        if let Some(to) = &event.to {
            self.set(&event.lane, &to.to_string(), Some(event.kind.as_str()));
        } else {
            let state = self
                .lock()
                .lanes
                .get(&event.lane)
                .map(|l| l.state.clone())
                .unwrap_or_default();
            self.set(&event.lane, &state, Some(event.kind.as_str()));
        }
        if !self.live {
            let width = self.lock().width;
            print_event(event, self.format, Some(width));
        }
    }

    fn notice(&self, notice: Notice) {
        match (notice, self.format) {
            (
                Notice::AgentOverridden {
                    lane,
                    agent,
                    cli_agent,
                },
                format,
            ) => {
                let message = format!(
                    "lane {lane} runs agent {agent}, as the packet names it: --agent {cli_agent} applies only to lanes that name no agent"
                );
                match format {
                    OutputFormat::Json => eprintln!(
                        "{}",
                        json!({"notice": {"kind": "agent_overridden", "lane": lane,
                            "agent": agent, "cli_agent": cli_agent, "message": message}})
                    ),
                    OutputFormat::Text => eprintln!("clawpool: notice: {message}"),
                }
            }
            (Notice::Attach { lane, command }, OutputFormat::Text) => {
                eprintln!("clawpool: lane {lane}: {command}");
            }
            (Notice::Attach { .. }, OutputFormat::Json) => {}
            (Notice::NotificationsOff(err), _) => {
                eprintln!("clawpool: notifications are off: {err}");
            }
            (Notice::IndexNotUpdated(err), _) => {
                tracing::warn!("the index of repositories with lanes was not updated: {err}");
            }
        }
    }

    fn done(&self) {
        if let Some(painter) = self
            .painter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            painter.abort();
        }
        if self.live {
            self.paint();
            if let Some(progress) = self.progress.get() {
                progress.clear();
            }
        } else if self.format == OutputFormat::Text {
            let inner = self.lock();
            let width = inner.width;
            println!("\n{:<width$}  state", "lane");
            for (name, line) in &inner.lanes {
                println!("{name:<width$}  {}", line.state);
            }
        }
    }
}
