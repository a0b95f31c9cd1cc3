//! Adoption: taking over a repository's lanes after their supervisor died (even with SIGKILL).
//! For each registered lane that has not ended, its state file is caught up with its event log,
//! its worker is looked for where the file says it runs, and the lane is driven on from its
//! live tmux session — with no worktree made again and nothing it already sent sent again — or
//! recorded `failed{worker_lost}` naming its terminal. A lane that cannot be taken over is left
//! as it is and named. [`adopt`] is the whole of `clawpool adopt`; the daemon calls
//! [`adopt_lanes`] under the lock it already holds.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use clawpool_lane::checks::LaneChecks;
use clawpool_lane::drive::{LaneJob, Start, Terminal, drive, session_name};
use clawpool_lane::interrupt::Interrupt;
use clawpool_lane::registry::{RegistryEntry, lane_registry};
use clawpool_lanes::LaneState;
use clawpool_pty::TmuxServer;
use clawpool_worktree::Repo;

use crate::config::Loaded;
use crate::error::CommandError;
use crate::observer::{LaneNote, Observer};
use crate::registry::registered_lanes;
use crate::request::{AdoptReply, AdoptRequest, NotAdopted};
use crate::start::open_repo;
use crate::supervisor_lock::{SupervisorRole, hold_supervisor_lock, lock_path};
use crate::tmux::tmux_socket_name;
use crate::tmux_servers::TmuxServers;

/// `clawpool adopt`: holding the repository's supervisor lock, takes over every registered
/// lane and waits for each to end (or SIGINT/SIGTERM to stop them).
pub async fn adopt(
    loaded: &Loaded,
    request: AdoptRequest,
    observer: Arc<dyn Observer>,
) -> Result<AdoptReply, CommandError> {
    let repo = open_repo(&request.repo)?;
    let _lock = hold_supervisor_lock(&lock_path(&repo), SupervisorRole::Adopt)?;
    let interrupt =
        Interrupt::listen().map_err(|e| CommandError::io("listening for SIGINT and SIGTERM", e))?;
    let names = registered_lanes(&repo);
    observer.starting(&names);
    let Adoptions {
        tasks,
        mut not_adopted,
        cleanups,
        servers,
    } = adopt_lanes(&repo, names, loaded, &observer, &interrupt);
    for cleanup in cleanups {
        let _ = cleanup.await;
    }
    let mut adopted = BTreeMap::new();
    for task in tasks {
        match task.await {
            Ok((name, Ok(state))) => {
                adopted.insert(name, state);
            }
            Ok((_, Err(refused))) => not_adopted.push(refused),
            // A lane task that panicked: its lane is not driven any more.
            Err(_) => {}
        }
    }
    // Every lane is over: a server nothing runs on any more goes, with its socket — the
    // repository's own too, which a supervisor killed before any lane recorded it started.
    let _ = servers.get(&tmux_socket_name(&repo)).await;
    servers.close_unused().await;
    observer.done();
    Ok(AdoptReply {
        adopted,
        not_adopted,
        interrupted: interrupt.received(),
    })
}

/// One adopted lane's task: it ends with the lane's final state, or why it could not be driven
/// after all.
pub type AdoptionTask = tokio::task::JoinHandle<(String, Result<Option<LaneState>, NotAdopted>)>;

/// The outcome of [`adopt_lanes`]: a task per lane taken over, and the lanes refused at once.
pub struct Adoptions {
    /// One per lane taken over (or recorded as lost).
    pub tasks: Vec<AdoptionTask>,
    /// Lanes that were not taken over (their state file or registry entry unreadable, their
    /// agent unknown): nothing was done to them.
    pub not_adopted: Vec<NotAdopted>,
    /// Ending the tmux sessions lanes that had already ended left behind (their supervisor was
    /// killed between recording the end and closing the session).
    pub cleanups: Vec<tokio::task::JoinHandle<()>>,
    /// The tmux servers the lanes were found on.
    pub servers: TmuxServers,
}

/// Takes over every lane among `names` that has not ended: its state file is first caught up
/// with its event log (a supervisor killed between the two, or one that could not write the
/// file, left it behind), then its live tmux session is driven on, and a lane whose worker is
/// gone is recorded as `failed{worker_lost}`. A registry folder without its `lane.json` is a
/// lane whose supervisor died before registering it: nothing of it ever ran. The caller must
/// hold the repository's supervisor lock, so no other supervisor owns them. A lane that cannot
/// be taken over is left as it is and returned in `not_adopted`; the caller reports it (the
/// board shows it only in text output).
pub fn adopt_lanes(
    repo: &Repo,
    names: Vec<String>,
    loaded: &Loaded,
    observer: &Arc<dyn Observer>,
    interrupt: &Interrupt,
) -> Adoptions {
    let mut tasks = Vec::new();
    let mut cleanups = Vec::new();
    // One copy of each agent's profile for all its lanes (`LaneJob::profile`).
    let mut shared_profiles = std::collections::HashMap::new();
    let servers = TmuxServers::default();
    let mut not_adopted = Vec::new();
    let mut refuse = |lane: &str, kind: &'static str, error: String| {
        observer.lane(
            lane,
            LaneNote::NotAdopted {
                kind,
                error: error.clone(),
            },
        );
        not_adopted.push(NotAdopted {
            lane: lane.to_owned(),
            kind,
            error,
        });
    };
    for name in names {
        let registry = lane_registry(repo, &name);
        let entry = match registry.entry() {
            Ok(entry) => entry,
            Err(err) if err.missing => {
                observer.lane(&name, LaneNote::NeverRegistered);
                continue;
            }
            Err(err) => {
                refuse(&name, "invalid_registry_entry", err.message);
                continue;
            }
        };
        let dir = entry.worktree.clone();
        let events_path = registry.events();
        let marker = registry.degraded_marker();
        // Whoever holds the lane (a `gc`, a `verify` on it) is left to it; held from here,
        // nobody else changes the lane while it is recorded or adopted.
        let lock = match clawpool_lanes::state_file::SupervisorLock::hold(registry.dir()) {
            Ok(lock) => lock,
            Err(err) => {
                refuse(&name, "lane_busy", err.to_string());
                continue;
            }
        };
        let mut doc = match clawpool_lanes::read_lane_record(registry.dir(), &dir) {
            Ok(doc) => doc,
            Err(err @ clawpool_lanes::StateFileError::Missing { .. }) => {
                // The state file is handed to its writer before the agent starts, but written
                // behind: a supervisor killed in between left no state file, and may have
                // left the lane's session (its placeholder, or even its agent). Nothing of
                // it is driven on, and its session is ended. Which session is the lane's own
                // name on the repository's server, as spawn made it, never a name read from
                // a file: one that pointed elsewhere would end another lane.
                let in_tmux = entry
                    .transport
                    .as_ref()
                    .is_some_and(|t| t.session.is_some());
                match never_started(&name, (registry.dir(), &dir), &entry, &events_path, &marker) {
                    Ok(lost) => {
                        if in_tmux {
                            let target =
                                format!("{}:{}", tmux_socket_name(repo), session_name(&name));
                            cleanups
                                .push(tokio::spawn(end_leftover_session(target, servers.clone())));
                        }
                        observer.lane(&name, LaneNote::Lost(lost));
                        tasks.push(tokio::spawn(async move { (name, Ok(Some(lost))) }));
                    }
                    Err(_) => refuse(&name, err.kind(), err.to_string()),
                }
                continue;
            }
            Err(err) => {
                refuse(&name, err.kind(), err.to_string());
                continue;
            }
        };
        let behind = std::fs::read_to_string(&events_path)
            .map(|log| doc.catch_up(&log))
            .unwrap_or(0);
        if doc.status.is_terminal() {
            if behind > 0 || marker.exists() {
                // The outcome was only in the event log: it goes into the state file now.
                let _ = clawpool_lane::lane_state::StateRecorder::with_marker(
                    doc.clone(),
                    registry.dir(),
                    Some(&dir),
                    Some(marker),
                );
            } else {
                clawpool_lane::lane_state::republish(registry.dir(), &dir);
            }
            if let Some(target) = doc.transport.session.clone() {
                cleanups.push(tokio::spawn(end_leftover_session(target, servers.clone())));
            }
            observer.lane(&name, LaneNote::AlreadyEnded(doc.lane_state()));
            continue;
        }
        let profile = match loaded.profiles.get(&doc.agent) {
            Ok(profile) => std::sync::Arc::clone(
                shared_profiles
                    .entry(doc.agent.clone())
                    .or_insert_with(|| std::sync::Arc::new(profile.clone())),
            ),
            Err(err) => {
                refuse(&name, "unknown_agent", err.to_string());
                continue;
            }
        };
        let observer = Arc::clone(observer);
        let settings = loaded.settings;
        let roots = loaded.roots.clone();
        let policy = std::sync::Arc::clone(&loaded.policy);
        let prices = std::sync::Arc::clone(&loaded.prices);
        let interrupt = interrupt.clone();
        let servers = servers.clone();
        tasks.push(tokio::spawn(async move {
            let state = adopt_lane(
                (&name, lock),
                &registry,
                &dir,
                entry,
                doc,
                profile,
                (settings, policy, prices, interrupt),
                roots,
                (Arc::clone(&observer), servers),
            )
            .await;
            let state = state.map_err(|err| {
                observer.lane(&name, LaneNote::Failed(err.message.clone()));
                NotAdopted {
                    lane: name.clone(),
                    kind: err.kind,
                    error: err.message,
                }
            });
            (name, state)
        }));
    }
    Adoptions {
        tasks,
        not_adopted,
        cleanups,
        servers,
    }
}

/// Records a registered lane whose state file was never written as `failed{worker_lost}`: its
/// supervisor died after registering it and before the lane's first state write reached the
/// disk. Its state file is made from the registry entry, naming the terminal the lane was to
/// run in.
fn never_started(
    name: &str,
    (record, dir): (&Path, &Path),
    entry: &RegistryEntry,
    events_path: &Path,
    marker: &Path,
) -> Result<LaneState, CommandError> {
    let transport = entry.transport.clone().ok_or_else(|| {
        CommandError::invalid(
            "invalid_registry_entry",
            "transport: the entry does not say where the lane was to run",
        )
    })?;
    let terminal = match (&transport.kind, &transport.session) {
        (_, Some(target)) => format!("tmux session {target}"),
        (_, None) => "a PTY".to_owned(),
    };
    let mut doc = clawpool_lanes::WorkerStateDoc::new(
        format!("{name}-{}", std::process::id()),
        name,
        &entry.agent,
        dir.display().to_string(),
        transport,
        clawpool_lanes::state_file::now_secs(),
    );
    doc.branch = entry.branch.clone();
    let recorder = clawpool_lane::lane_state::StateRecorder::with_marker(
        doc,
        record,
        Some(dir),
        Some(marker.to_owned()),
    );
    record_lost(
        name,
        events_path,
        recorder,
        format!("the supervisor ended before it recorded the lane's start in {terminal}"),
    )
}

/// Records `failed{worker_lost}` with `why` in the lane's event log and state file.
fn record_lost(
    name: &str,
    events_path: &Path,
    recorder: clawpool_lane::lane_state::StateRecorder,
    why: String,
) -> Result<LaneState, CommandError> {
    let events = clawpool_lanes::EventLog::open(name, events_path)
        .map_err(|e| CommandError::io("opening the lane's event log", e.source))?
        .observe(Box::new(move |event| recorder.on_event(event)));
    let lost = clawpool_lane::handshake::machine::worker_lost(why);
    let state = lost
        .to
        .unwrap_or(LaneState::Failed(clawpool_lanes::FailureClass::WorkerLost));
    let _ = lost.append_to(&events);
    Ok(state)
}

/// Ends the tmux session `target` (`SOCKET:SESSION`) of a lane that has already ended, if it
/// is still there.
async fn end_leftover_session(target: String, servers: TmuxServers) {
    let Some((socket, session)) = target.split_once(':') else {
        return;
    };
    if let Ok(Some(server)) = servers.get(socket).await
        && server
            .sessions()
            .await
            .is_ok_and(|sessions| sessions.iter().any(|s| s == session))
    {
        let _ = server.kill_session(session).await;
    }
}

/// What became of an unfinished lane's worker while no supervisor watched it.
enum Found {
    /// Its tmux session is live, with its agent started: it can be driven on.
    Live(TmuxServer, String),
    /// It is gone (or was never fully started, and its session was ended): why.
    Gone(String),
}

/// Looks for the worker of a lane that has not ended where its state file says it runs.
async fn find_worker(
    doc: &clawpool_lanes::WorkerStateDoc,
    servers: &TmuxServers,
) -> Result<Found, CommandError> {
    let target = match (&doc.transport.kind, doc.transport.session.as_deref()) {
        (clawpool_lanes::state_file::TransportKind::Pty, _) => {
            // A PTY is owned by its supervisor: its worker ended with it.
            return Ok(Found::Gone(
                "its terminal was a PTY owned by the supervisor that ended".to_owned(),
            ));
        }
        (_, target) => target.and_then(|t| t.split_once(':')),
    };
    let Some((socket, session)) = target else {
        return Ok(Found::Gone(
            "its state file names no tmux session (written by an older clawpool)".to_owned(),
        ));
    };
    let Some(server) = servers.get(socket).await? else {
        return Ok(Found::Gone(format!(
            "tmux server {socket} is not running: session {session} is gone with it"
        )));
    };
    let live = server
        .sessions()
        .await
        .is_ok_and(|sessions| sessions.iter().any(|s| s == session));
    if !live {
        return Ok(Found::Gone(format!(
            "tmux session {socket}:{session} is gone"
        )));
    }
    if doc.pid.is_none() {
        // Killed while starting the agent: the session may hold the placeholder or an agent
        // whose start was never recorded. Neither can be driven on from the state file.
        let _ = server.kill_session(session).await;
        let why = format!(
            "the supervisor ended while starting the agent in tmux session {socket}:{session}; the session was ended"
        );
        return Ok(Found::Gone(why));
    }
    Ok(Found::Live(server, session.to_owned()))
}

#[allow(clippy::too_many_arguments)]
async fn adopt_lane(
    (name, lock): (&str, clawpool_lanes::state_file::SupervisorLock),
    registry: &clawpool_lane::registry::RegistryFolder,
    dir: &Path,
    entry: RegistryEntry,
    doc: clawpool_lanes::WorkerStateDoc,
    profile: std::sync::Arc<clawpool_agents::profiles::Profile>,
    (settings, policy, prices, interrupt): (
        clawpool_lane::handshake::Settings,
        std::sync::Arc<clawpool_recovery::Policy>,
        std::sync::Arc<clawpool_lanes::cost::PriceTable>,
        Interrupt,
    ),
    roots: clawpool_agents::trust::TrustRoots,
    (observer, servers): (Arc<dyn Observer>, TmuxServers),
) -> Result<Option<LaneState>, CommandError> {
    let (server, session) = match find_worker(&doc, &servers).await? {
        Found::Live(server, session) => (server, session),
        Found::Gone(why) => {
            // The worker is gone: record that, once, in the lane's own files.
            let recorder = clawpool_lane::lane_state::StateRecorder::with_marker(
                doc,
                registry.dir(),
                Some(dir),
                Some(registry.degraded_marker()),
            );
            let lost = record_lost(name, &registry.events(), recorder, why)?;
            observer.lane(name, LaneNote::Lost(lost));
            return Ok(Some(lost));
        }
    };
    let worker = server
        .attach(
            &session,
            clawpool_pty::AttachOptions {
                raw_log: Some(clawpool_pty::RawLogConfig::new(
                    registry.dir().join("terminal.log"),
                )),
                scrollback_lines: 0,
            },
        )
        .await?;
    let trusted = roots.decide(dir).map(|d| d.is_trusted()).unwrap_or(false);
    let on_event = Arc::clone(&observer);
    let checks = Repo::open(dir)
        .ok()
        .map(|repo| LaneChecks::from_registry(&entry, &repo, dir, registry, (&settings).into()));
    let job = LaneJob {
        checks,
        policy,
        prices,
        budget_usd: None,
        name: name.to_owned(),
        dir: dir.to_owned(),
        profile,
        trusted,
        settings,
        prompt: entry.prompt.clone(),
        terminal: Terminal::Tmux(server),
        env: Vec::new(),
        size: None,
        events_path: registry.events(),
        terminal_log: registry.dir().join("terminal.log"),
        branch: doc.branch.clone(),
        base: doc.base.clone().map(|b| (b.git_ref, b.sha)),
        on_event: Box::new(move |event| on_event.event(event)),
        interrupt,
        lock: Some(lock),
        sandbox: entry.sandbox_request(),
    };
    let result = drive(
        job,
        Start::Adopt {
            worker,
            doc: Box::new(doc),
        },
    )
    .await?;
    Ok(result.final_state())
}
