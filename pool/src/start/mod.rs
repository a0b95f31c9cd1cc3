//! Starting a packet's lanes: [`plan`] checks everything before anything is created,
//! [`earlier`] leaves alone what earlier runs dealt with, and [`start_all`] starts the rest
//! with bounded concurrency, each lane by [`lane`] in its own worktree with its registry
//! entry. [`spawn`] is the whole of a foreground `clawpool spawn` (the repository's supervisor
//! lock, signals, the notifier, waiting for every lane); [`start_lanes`] is the same start
//! inside a supervisor that already holds the lock (the daemon) and does not wait.

pub mod earlier;
mod lane;
pub mod plan;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clawpool_lane::drive::Terminal;
use clawpool_lane::interrupt::Interrupt;
use clawpool_lanes::{LaneSpec, LaneState};
use clawpool_pty::{TmuxConfig, TmuxServer};
use clawpool_worktree::{LaneWorktreeSpec, Repo};
use tokio::sync::Semaphore;

pub use earlier::leave_earlier_runs;
pub use plan::{AgentOverride, agent_overrides, prepare};

use crate::config::Loaded;
use crate::error::CommandError;
use crate::notifier::Notifier;
use crate::observer::{LaneNote, Notice, Observer};
use crate::request::{
    HandOver, Skipped, SkippedLane, SpawnReply, SpawnReport, SpawnRequest, Transport,
};
use crate::supervisor_lock::{SupervisorRole, hold_supervisor_lock, lock_path};
use crate::tmux::{tmux_attach_command, tmux_socket_name};

/// Lanes started at once when `--concurrency` is not given.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// How long an owner of lanes that is done waits for the notifications still queued (a lane's
/// last `finished`) before it exits; what is left goes out with the repository's next notifier.
pub const NOTIFY_GRACE: Duration = Duration::from_secs(3);

/// One lane after validation: everything needed to start it.
pub struct PlannedLane {
    /// The lane as the packet gave it.
    pub spec: LaneSpec,
    profile: std::sync::Arc<clawpool_agents::profiles::Profile>,
    worktree: LaneWorktreeSpec,
    base_sha: String,
    /// The configured roots plus the lane's own; decided once the worktree exists.
    roots: clawpool_agents::trust::TrustRoots,
    /// The recovery policy.
    policy: std::sync::Arc<clawpool_recovery::Policy>,
    /// The prices the lane's usage is priced with.
    prices: std::sync::Arc<clawpool_lanes::cost::PriceTable>,
    /// The earlier run `--rerun` runs this lane again after (finished, or removed by gc).
    rerun_of: Option<Skipped>,
    /// The sandbox its agent runs in, its bubblewrap already found and tried.
    sandbox: Option<clawpool_lane::sandbox::SandboxRequest>,
}

/// Opens the repository a request names.
pub fn open_repo(path: &Path) -> Result<Repo, CommandError> {
    Repo::open(path).map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))
}

/// The terminal lanes of this repository run in.
pub async fn terminal_for(repo: &Repo, transport: Transport) -> Result<Terminal, CommandError> {
    Ok(match transport {
        Transport::Pty => Terminal::Pty,
        Transport::Tmux => {
            Terminal::Tmux(TmuxServer::connect(TmuxConfig::new(tmux_socket_name(repo))).await?)
        }
    })
}

/// Starts the repository's notifier when the configuration has endpoints; one that cannot
/// start is a notice and the lanes run without it.
pub fn start_notifier(repo: &Repo, loaded: &Loaded, observer: &dyn Observer) -> Option<Notifier> {
    let targets = loaded.config.notify_targets().to_vec();
    let prices = Arc::clone(&loaded.prices);
    match Notifier::start(&repo.state_dir(), repo.root(), targets, prices) {
        Ok(notifier) => notifier,
        Err(e) => {
            observer.notice(Notice::NotificationsOff(e.to_string()));
            None
        }
    }
}

/// A foreground `clawpool spawn`: validates the packet, then either says the daemon is to
/// take it (`detach`, or a daemon holds the repository's lock) or takes the lock, starts the
/// lanes here and waits for every one of them to end (or SIGINT/SIGTERM to stop them).
pub async fn spawn(
    loaded: &Loaded,
    request: SpawnRequest,
    observer: Arc<dyn Observer>,
) -> Result<SpawnReply, CommandError> {
    let repo = open_repo(&request.repo)?;
    let lanes = match prepare(
        &repo,
        loaded,
        &request.packet_name,
        &request.packet,
        request.agent.as_deref(),
    ) {
        Ok(lanes) => lanes,
        Err(invalid) => return Ok(SpawnReply::Invalid(invalid)),
    };
    if let Some(cli_agent) = &request.agent {
        for lane in agent_overrides(&lanes, cli_agent) {
            observer.notice(Notice::AgentOverridden {
                lane: lane.lane,
                agent: lane.agent,
                cli_agent: cli_agent.clone(),
            });
        }
    }
    if request.detach {
        return Ok(SpawnReply::HandOver(HandOver {
            repo,
            packet: request.packet,
            start: true,
            refused: None,
        }));
    }
    let (lanes, skipped) = leave_earlier_runs(&repo, lanes, request.rerun);

    // One supervisor per repository: a running daemon takes the lanes; anyone else refuses.
    let _lock = match hold_supervisor_lock(&lock_path(&repo), SupervisorRole::Spawn) {
        Ok(lock) => lock,
        Err(refused) => {
            return Ok(SpawnReply::HandOver(HandOver {
                repo,
                packet: request.packet,
                start: false,
                refused: Some(refused),
            }));
        }
    };

    let interrupt =
        Interrupt::listen().map_err(|e| CommandError::io("listening for SIGINT and SIGTERM", e))?;
    // This process owns the repository's lanes now: it tells people about them.
    let notifier = start_notifier(&repo, loaded, observer.as_ref());
    let terminal = terminal_for(&repo, request.transport).await?;
    if let Terminal::Tmux(server) = &terminal {
        for lane in &lanes {
            observer.notice(Notice::Attach {
                lane: lane.spec.name.clone(),
                command: tmux_attach_command(server.socket_name(), &lane.spec.name),
            });
        }
    }
    let names: Vec<String> = lanes
        .iter()
        .map(|l| l.spec.name.clone())
        .chain(skipped.iter().map(|s| s.name.clone()))
        .collect();
    observer.starting(&names);
    for lane in &skipped {
        observer.lane(&lane.name, LaneNote::Skipped(lane.why));
    }
    let tasks = start_all(
        repo.root(),
        lanes,
        &terminal,
        loaded.settings,
        request.concurrency,
        &observer,
        &interrupt,
    );
    let mut lanes: BTreeMap<String, Option<LaneState>> = BTreeMap::new();
    for task in tasks {
        if let Ok((name, state)) = task.await {
            lanes.insert(name, state);
        }
    }
    observer.done();
    if let Some(notifier) = notifier {
        notifier.finish(NOTIFY_GRACE).await;
    }
    terminal.close_if_unused().await;
    let unpersisted = crate::registry::unpersisted_outcomes(&repo, lanes.keys());
    Ok(SpawnReply::Ran(SpawnReport {
        lanes,
        unpersisted,
        skipped,
        interrupted: interrupt.received(),
    }))
}

/// Lanes a supervisor that already holds the repository's lock (the daemon) started, still
/// running.
pub struct StartedLanes {
    /// The lanes started, in the packet's order.
    pub names: Vec<String>,
    /// The lanes an earlier run left, not started.
    pub skipped: Vec<SkippedLane>,
    /// One per lane started: it ends with the lane's final state.
    pub tasks: Vec<tokio::task::JoinHandle<(String, Option<LaneState>)>>,
}

/// Validates `request`'s packet exactly as [`spawn`] does and starts its lanes with `loaded`,
/// in a supervisor that holds the repository's lock and is never interrupted by a signal (the
/// daemon); returns at once, the lanes running.
pub async fn start_lanes(
    repo: &Repo,
    loaded: &Loaded,
    request: &SpawnRequest,
    observer: Arc<dyn Observer>,
) -> Result<StartedLanes, CommandError> {
    let lanes = prepare(
        repo,
        loaded,
        &request.packet_name,
        &request.packet,
        request.agent.as_deref(),
    )?;
    let (lanes, skipped) = leave_earlier_runs(repo, lanes, request.rerun);
    let names: Vec<String> = lanes.iter().map(|l| l.spec.name.clone()).collect();
    let terminal = terminal_for(repo, request.transport).await?;
    observer.starting(&names);
    let tasks = start_all(
        repo.root(),
        lanes,
        &terminal,
        loaded.settings,
        request.concurrency,
        &observer,
        &Interrupt::never(),
    );
    Ok(StartedLanes {
        names,
        skipped,
        tasks,
    })
}

/// Starts every lane, at most `concurrency` at once; each task ends with the lane's final state.
pub fn start_all(
    repo_root: &Path,
    lanes: Vec<PlannedLane>,
    terminal: &Terminal,
    settings: clawpool_lane::handshake::Settings,
    concurrency: Option<usize>,
    observer: &Arc<dyn Observer>,
    interrupt: &Interrupt,
) -> Vec<tokio::task::JoinHandle<(String, Option<LaneState>)>> {
    let concurrency = Arc::new(Semaphore::new(
        concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1),
    ));
    lanes
        .into_iter()
        .map(|lane| {
            let concurrency = Arc::clone(&concurrency);
            let observer = Arc::clone(observer);
            let root = repo_root.to_owned();
            let terminal = terminal.clone();
            let interrupt = interrupt.clone();
            tokio::spawn(async move {
                let name = lane.spec.name.clone();
                let permit = tokio::select! {
                    permit = concurrency.acquire_owned() => permit,
                    signal = interrupt.wait() => {
                        observer.lane(&name, LaneNote::NotStarted(signal));
                        return (name, None);
                    }
                };
                observer.lane(&name, LaneNote::PreparingWorktree);
                let result = match Repo::open(&root) {
                    Ok(repo) => {
                        lane::start_lane(
                            &repo,
                            lane,
                            terminal,
                            settings,
                            observer.clone(),
                            interrupt,
                        )
                        .await
                    }
                    Err(e) => Err(CommandError::invalid("not_a_repository", e.to_string())),
                };
                drop(permit);
                let final_state = match result {
                    Ok(state) => state,
                    Err(err) => {
                        observer.lane(&name, LaneNote::Failed(err.message));
                        None
                    }
                };
                (name, final_state)
            })
        })
        .collect()
}
