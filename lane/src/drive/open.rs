//! Opening a lane: everything it runs with, in the order a crash anywhere leaves something
//! `clawpool adopt` can find — the supervisor lock, the state file with the terminal target,
//! the event log, the watches, the agent's own channel, the control socket, then the worker.

use std::path::PathBuf;
use std::sync::Arc;

use clawpool_agents::profiles::{AgentHooks, DialogKind, Policy as DialogPolicy};
use clawpool_agents::trust::StoreGuard;
use clawpool_lanes::payload::{ChannelDegraded, ChannelOpened, Restarted};
use clawpool_lanes::state_file::{self, Base, SupervisorLock};
use clawpool_lanes::{
    BlockedSubphase, EventLog, LaneEventKind, LaneState, Payload, WorkerStateDoc,
};
use clawpool_pty::Worker;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::commits::CommitWatch;
use super::trust_store::{seed_trust_store, trust_store_file};
use super::worker::{Rig, replace_leftover_session, restarts_of, start_worker, with_prompt};
use super::{LaneJob, STATE_DIR, Start, session_name, spawn_spec, transport_of};
use crate::app_server::{self, AppServer};
use crate::channel::{
    self, ChannelMessage, ChannelSetup, ClaudeSettings, FailureWatch, HookInbox, UsageReads,
};
use crate::control::{self, ControlSocket, ScreenSource};
use crate::error::LaneError;
use crate::handshake::OperatorRequest;
use crate::handshake::{
    ExternalProgress, LaneBudget, LaneContext, Resumed, TrustGate, plan_prompt,
};
use crate::lane_state::StateRecorder;
use crate::permission_gate::PermissionGate;
use crate::registry::RegistryFolder;
use crate::sandbox::{Sandbox, SandboxSite};
use crate::worktree_watch::{BranchWatch, LaneWatch};

/// A lane with everything it runs with: what [`super::runs`] drives and [`super::finish`]
/// closes. Dropping it stops the watches and tasks it holds.
pub(super) struct OpenLane {
    pub(super) job: LaneJob,
    pub(super) events: Arc<EventLog>,
    pub(super) recorder: StateRecorder,
    pub(super) rig: Rig,
    pub(super) worker: Worker,
    /// The state an adopted worker was left in by the supervisor that died.
    pub(super) resumed: Option<Resumed>,
    pub(super) external: ExternalProgress,
    pub(super) permission_gate: PermissionGate,
    pub(super) screen: ScreenSource,
    pub(super) operator_rx: mpsc::Receiver<OperatorRequest>,
    /// The agent's reports (hooks, protocol), when the lane has a channel for them.
    pub(super) hook_rx: Option<mpsc::Receiver<ChannelMessage>>,
    pub(super) socket: PathBuf,
    pub(super) listener: ControlSocket,
    pub(super) commits: Option<CommitWatch>,
    pub(super) commit_task: Option<JoinHandle<()>>,
    /// The freshness watch and the branch requests' server.
    pub(super) branch_tasks: Option<(JoinHandle<()>, JoinHandle<()>)>,
    pub(super) supervisor_lock: SupervisorLock,
    /// Puts the published state file back when someone else changed it; ends with the watch.
    pub(super) publication_task: JoinHandle<()>,
    /// The transcript reads the hooks asked for, settled by the close before the last write.
    pub(super) usage_reads: UsageReads,
    /// Held for the lane's life: the lane's subscription to its repository's watcher.
    pub(super) _lane_watch: LaneWatch,
    /// Held for the lane's life: the lane's own Codex app server.
    pub(super) _app_server: Option<AppServer>,
    /// Held for the lane's life: the hooks' failed deliveries, watched.
    pub(super) _failure_watch: Option<FailureWatch>,
}

/// Opens the lane and starts (or adopts) its worker.
pub(super) async fn open(mut job: LaneJob, start: Start) -> Result<OpenLane, LaneError> {
    let mut spec = spawn_spec(&job)?;
    let record = job.record();
    // In the record folder (or the user's runtime folder when that path is too long for a
    // socket address), never in the worktree, where the agent could remove it.
    let socket = clawpool_worktree::layout::control_socket(&record);
    // A lane that asked for a sandbox and cannot have one stops here, before anything of it
    // is written: never silently unconfined.
    let sandbox = match &job.sandbox {
        Some(request) => {
            let home = spec.env_value("HOME").map(PathBuf::from);
            let path_var = spec.env_value("PATH");
            let codex_daemon = (job.profile.manifest.launch.hooks == AgentHooks::CodexAppServer)
                .then(|| crate::app_server::daemon_stand_in(&job.dir));
            let agent_settings = (job.profile.manifest.launch.hooks == AgentHooks::Claude)
                .then(|| channel::settings_file(&record));
            let site = SandboxSite {
                dir: &job.dir,
                record: (record != job.dir.join(STATE_DIR)).then_some(record.as_path()),
                socket: &socket,
                home: home.as_deref(),
                agent_writes: &job.profile.manifest.launch.sandbox_writes,
                path_var: path_var.as_deref(),
                codex_daemon: codex_daemon.as_deref(),
                agent_settings: agent_settings.as_deref(),
            };
            let sandbox = Sandbox::build(request, &site).map_err(|message| {
                LaneError::invalid(
                    "sandbox_unavailable",
                    format!("lane {} asked for a sandbox: {message}", job.name),
                )
            })?;
            Some(Arc::new(sandbox))
        }
        None => None,
    };
    // Tool-permission questions go to the policy's `[permissions]` before a person.
    let permissions = job.policy.permissions();
    let permission_gate = PermissionGate::for_worktree(
        permissions.policy.clone(),
        &job.dir,
        &RegistryFolder::of_events(&job.events_path),
        permissions,
    )?;
    let state_dir = job.dir.join(STATE_DIR);
    std::fs::create_dir_all(&state_dir)
        .map_err(|e| LaneError::io("creating the lane's .claw folder", e))?;
    if let Some(checks) = &mut job.checks {
        checks.sandbox = sandbox.clone();
    }
    // Held until the lane's last write, in the record folder where the agent's workspace
    // writes do not reach: readers probe it to tell a live supervisor from a lost one, so
    // nothing has to rewrite the state file while nothing happens.
    let supervisor_lock = match job.lock.take() {
        Some(lock) => lock,
        None => SupervisorLock::hold(&record).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock => LaneError::invalid("lane_busy", e.to_string()),
            _ => LaneError::io("taking the lane's supervisor lock", e),
        })?,
    };
    let session = session_name(&job.name);
    // The tmux target is in the state file before the agent starts: a supervisor killed at any
    // moment after that leaves a lane `clawpool adopt` looks for in the right place.
    let transport = transport_of(&job.terminal, &session);
    // An operator's trust outlives the supervisor that received it.
    let operator_trusted = match &start {
        Start::Adopt { doc, .. } | Start::Resume { doc } => doc.trusted_by_operator,
        Start::Spawn => false,
    };
    // The channel an adopted worker was started with is the one it reports on.
    let adopted_channel = match &start {
        Start::Adopt { doc, .. } => doc.hooks.channel.clone(),
        Start::Spawn | Start::Resume { .. } => None,
    };
    // The restarts the lane's earlier workers had: a restart goes on counting from them,
    // whichever supervisor started them.
    let earlier_restarts = match &start {
        Start::Adopt { doc, .. } | Start::Resume { doc } => restarts_of(&doc.worker_id),
        Start::Spawn => 0,
    };
    // A turn an earlier restart dropped stays dropped whoever drives the lane now: the adopted
    // agent idle is not its work done.
    let dropped_turn = match &start {
        Start::Adopt { doc, .. } => doc.prompt.turn_dropped,
        Start::Spawn | Start::Resume { .. } => false,
    };
    // A follow-up to an ended lane: the state it ended in, and its worker's new id.
    let resuming = match &start {
        Start::Resume { doc } => Some((
            doc.lane_state(),
            format!(
                "{}-{}-r{}",
                job.name,
                std::process::id(),
                earlier_restarts + 1
            ),
        )),
        _ => None,
    };
    let (doc, adopt) = match start {
        Start::Spawn => {
            let mut doc = WorkerStateDoc::new(
                format!("{}-{}", job.name, std::process::id()),
                &job.name,
                job.profile.name(),
                job.dir.display().to_string(),
                transport,
                state_file::now_secs(),
            );
            doc.branch = job.branch.clone();
            doc.base = job.base.clone().map(|(git_ref, sha)| Base { git_ref, sha });
            (doc, None)
        }
        Start::Adopt { worker, mut doc } => {
            let resumed = Resumed {
                state: doc.lane_state(),
                attempts: doc.prompt.attempts,
                sent_at: doc.prompt.sent_at,
                accepted_at: doc.prompt.accepted_at,
            };
            doc.supervisor.pid = std::process::id();
            (*doc, Some((worker, resumed)))
        }
        Start::Resume { mut doc } => {
            doc.supervisor.pid = std::process::id();
            if let Some((_, worker_id)) = &resuming {
                doc.worker_id = worker_id.clone();
            }
            (*doc, None)
        }
    };
    let mut doc = doc;
    doc.sandbox = sandbox.as_ref().map(|s| s.recorded().clone());
    // A mark left by an earlier run stays until a write succeeds.
    let marker = job
        .events_path
        .parent()
        .map(|registry| registry.join(crate::lane_state::DEGRADED_MARKER));
    let mut doc = doc;
    doc.set_prices(Arc::clone(&job.prices));
    if job.budget_usd.is_some() {
        doc.budget_usd = job.budget_usd;
    }
    let budget = LaneBudget {
        usd: doc.budget_usd,
        // A lane found held is held still (its cost is checked again as the run starts).
        held: doc.lane_state() == LaneState::Blocked(BlockedSubphase::Budget),
    };
    let recorder = StateRecorder::with_marker(doc, &record, Some(&job.dir), marker);
    let on_state = recorder.clone();
    // The event log's observer calls the job's `on_event` from now on.
    let on_event = std::mem::replace(&mut job.on_event, Box::new(|_| {}));
    let on_event = crate::hooks::with_hooks(on_event, Arc::clone(&job.policy), &job.events_path);
    let external = ExternalProgress::new();
    let on_commit = external.clone();
    let events = Arc::new(
        EventLog::open(&job.name, &job.events_path)
            .map_err(|e| LaneError::io("opening the lane's event log", e.source))?
            .observe(Box::new(move |event| {
                on_state.on_event(event);
                if event.kind == LaneEventKind::CommitCreated {
                    on_commit.record(clawpool_recovery::ProgressSource::Commit);
                }
                on_event(event);
            })),
    );
    // The lane's files, and for a lane with a branch its HEAD, branch and base ref, watched
    // with the other lanes of its repository (one inotify instance for them all). Adding
    // watches waits for the shared watcher's thread, which may be busy with other lanes'
    // events: not on the runtime's threads.
    let branch_watch = job.branch.as_ref().map(|_| BranchWatch {
        base: job
            .base
            .as_ref()
            .map(|(git_ref, _)| git_ref.clone())
            .or_else(|| job.checks.as_ref().map(|checks| checks.base.clone())),
    });
    let lane_watch = {
        let (dir, progress) = (job.dir.clone(), external.clone());
        tokio::task::spawn_blocking(move || LaneWatch::start(&dir, progress, branch_watch))
            .await
            .map_err(|e| LaneError::io("watching the lane's folder", std::io::Error::other(e)))?
    };

    if job.trusted && adopt.is_none() {
        seed_trust_store(&job.profile, &job.dir, &spec, &events);
    }
    let trust = TrustGate::of(job.trusted, operator_trusted);
    // A follow-up goes in as a typed turn of the resumed session, never at launch.
    let plan = plan_prompt(
        job.prompt.as_deref(),
        &job.settings,
        &job.profile,
        &job.dir,
        trust.is_open() && resuming.is_none(),
    )
    .map_err(|e| LaneError::io("writing .claw/task.md", e))?;
    clawpool_worktree::layout::ensure_socket_dir(&socket)
        .map_err(|e| LaneError::io("making the folder of the lane's control socket", e))?;
    // The agent's own reports, for an agent that makes them; a worker adopted from an earlier
    // supervisor keeps reporting with the token it was started with, kept in the lane.
    let (hook_tx, hook_rx) = mpsc::channel(64);
    // Claude Code's settings file is written anew before each start of the agent: here for a
    // new worker, by the rig for a restart (an adopted worker already runs on it).
    let claude_settings = match job.profile.manifest.launch.hooks {
        AgentHooks::Claude => Some(ClaudeSettings {
            record: record.clone(),
            program: clawpool_program("finding the clawpool binary for the agent's hooks")?,
            reduced_motion: job.profile.manifest.launch.reduced_motion,
        }),
        _ => None,
    };
    let hook_channel = match (&claude_settings, &adopt) {
        (Some(_), Some(_)) => resume_reports(
            channel::resume_claude(&job.dir, &socket, &record),
            channel::CLAUDE_HOOKS,
            &events,
        ),
        (Some(settings), None) => {
            let setup = channel::set_up_claude(&job.dir, &socket, settings)
                .map_err(|e| LaneError::io("writing the lane's hook settings", e))?;
            spec = spec.args(setup.args.iter());
            for (key, value) in &setup.env {
                spec = spec.env(key, value);
            }
            let opened = Payload::ChannelOpened(ChannelOpened {
                channel: channel::CLAUDE_HOOKS.into(),
                settings: setup.args.last().cloned(),
                socket: None,
                adopted: false,
            });
            let _ = events.report(opened, None, None, None);
            Some(setup)
        }
        _ => None,
    };
    // Codex's app server, owned by the lane, with the TUI attached to it; when it does not
    // start, the TUI runs on its own, reporting its turns' ends through its notify program,
    // and the screen decides the rest.
    let mut notify_channel = None;
    let app_server = match (job.profile.manifest.launch.hooks, &adopt) {
        (AgentHooks::CodexAppServer, None) => {
            match AppServer::start(&spec, &job.dir, hook_tx.clone(), sandbox.as_deref()).await {
                Ok(server) => {
                    // 0.169.0 refuses `--remote` with `--no-daemon`: the lane's own server
                    // stands in for the shared one that flag keeps away.
                    spec.args.retain(|arg| arg != "--no-daemon");
                    spec = spec.args(server.tui_args());
                    let opened = Payload::ChannelOpened(ChannelOpened {
                        channel: app_server::CHANNEL.into(),
                        settings: None,
                        socket: Some(server.socket().display().to_string()),
                        adopted: false,
                    });
                    let _ = events.report(opened, None, None, None);
                    Some(server)
                }
                Err(error) => {
                    let degraded = Payload::ChannelDegraded(ChannelDegraded {
                        channel: app_server::CHANNEL.into(),
                        event: "start".into(),
                        error,
                        failed: 1,
                        decides: ChannelDegraded::SCREEN.into(),
                    });
                    let _ = events.report(degraded, None, None, None);
                    let program =
                        clawpool_program("finding the clawpool binary for Codex's notify")?;
                    let setup = channel::codex_notify::set_up(&job.dir, &record, &socket, &program)
                        .map_err(|e| LaneError::io("setting up Codex's notify channel", e))?;
                    spec = spec.args(setup.args.iter());
                    for (key, value) in &setup.env {
                        spec = spec.env(key, value);
                    }
                    let opened = Payload::ChannelOpened(ChannelOpened {
                        channel: channel::codex_notify::CHANNEL.into(),
                        settings: setup.args.last().cloned(),
                        socket: None,
                        adopted: false,
                    });
                    let _ = events.report(opened, None, None, None);
                    notify_channel = Some(setup);
                    None
                }
            }
        }
        // A TUI an earlier supervisor started with its notify program notifies with the token
        // kept in the lane.
        (AgentHooks::CodexAppServer, Some(_))
            if adopted_channel.as_deref() == Some(channel::codex_notify::CHANNEL) =>
        {
            let program = clawpool_program("finding the clawpool binary for Codex's notify")?;
            notify_channel = resume_reports(
                channel::codex_notify::resume(&job.dir, &record, &socket, &program),
                channel::codex_notify::CHANNEL,
                &events,
            );
            None
        }
        // The TUI an earlier supervisor started stays attached to that supervisor's server.
        (AgentHooks::CodexAppServer, Some(_)) => {
            AppServer::adopt(&job.dir, hook_tx.clone(), &events).await
        }
        _ => None,
    };
    let hook_channel = hook_channel.or(notify_channel);
    // An adopted worker runs with its channel already; a worker a restart starts in its place
    // gets the same arguments, environment and token (the channel's setup for a new worker
    // put them in the spec above).
    if let (Some(_), Some(setup)) = (&adopt, &hook_channel) {
        spec = spec.args(setup.args.iter());
        for (key, value) in &setup.env {
            spec = spec.env(key, value);
        }
    }
    let failure_watch = hook_channel
        .as_ref()
        .and_then(|setup| FailureWatch::start(&setup.failures, hook_tx.clone()));
    // The hook answers permission questions when the policy decides them on screen too.
    let policy_decides_permissions = job.profile.dialogs.iter().any(|dialog| {
        dialog.kind == DialogKind::ToolPermission && dialog.policy == DialogPolicy::Ask
    });
    let has_channel = hook_channel.is_some() || app_server.is_some();
    let usage_reads = UsageReads::new(Arc::clone(&events));
    let hook_inbox = hook_channel.as_ref().map(|setup| HookInbox {
        token: setup.token.clone(),
        sender: hook_tx,
        permissions: policy_decides_permissions.then(|| permission_gate.clone()),
        usage: Some(usage_reads.clone()),
    });
    let base_spec = spec.clone();
    spec = with_prompt(spec, &job.profile, &plan);
    if resuming.is_some() {
        spec = spec.args(job.profile.manifest.launch.resume_args.iter());
    }

    let (operator_tx, operator_rx) = mpsc::channel(8);
    let (ops_tx, ops_rx) = mpsc::channel(4);
    let screen = ScreenSource::default();
    let gate = control::CallerGate {
        lane_dir: job.dir.clone(),
        events: Arc::clone(&events),
    };
    let listener = control::listen(
        &socket,
        gate,
        recorder.clone(),
        operator_tx,
        ops_tx,
        screen.clone(),
        hook_inbox,
    )
    .map_err(|e| LaneError::io("opening the lane's control socket", e))?;

    let (worker, resumed) = match adopt {
        Some((worker, resumed)) => (Ok(worker), Some(resumed)),
        None => {
            replace_leftover_session(&job.terminal, &session, &events).await;
            if let Some((previous, worker_id)) = &resuming {
                let restarted = Restarted {
                    by: "send".into(),
                    restart: earlier_restarts + 1,
                    worker_id: worker_id.clone(),
                    resume: true,
                    redeliver_prompt: false,
                    dropped_turn: false,
                    previous: previous.to_string(),
                    previous_exit: None,
                };
                let _ = events.report(Payload::Restarted(restarted), None, None, None);
            }
            (
                start_worker(&job.terminal, &session, spec.clone(), sandbox.as_deref()).await,
                None,
            )
        }
    };
    let worker = match worker {
        Ok(worker) => worker,
        Err(err) => {
            drop(operator_rx);
            listener.close().await;
            let _ = std::fs::remove_file(&socket);
            return Err(err.into());
        }
    };
    // The worktree's copy of the state file is the agent's to write; what it writes there is
    // put back from the record, and recorded.
    let publication_task = {
        let mut changes = lane_watch.publication();
        let (recorder, events) = (recorder.clone(), Arc::clone(&events));
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if let Some(restored) = recorder.check_publication() {
                    let _ = events.report(Payload::PublicationRestored(restored), None, None, None);
                }
            }
        })
    };
    let commits = job.branch.as_ref().map(|_| {
        CommitWatch::start(
            job.dir.clone(),
            Arc::clone(&events),
            &job.events_path,
            job.base.clone(),
        )
    });
    let commit_task = commits
        .as_ref()
        .map(|commits| commits.spawn(lane_watch.moves()));
    let branch_tasks = job.checks.clone().map(|checks| {
        (
            checks
                .clone()
                .watch(Arc::clone(&events), recorder.clone(), lane_watch.moves()),
            checks.serve(ops_rx, Arc::clone(&events), recorder.clone()),
        )
    });
    let rig = Rig {
        name: job.name.clone(),
        profile: Arc::clone(&job.profile),
        terminal: job.terminal.clone(),
        lane: LaneContext {
            name: job.name.clone(),
            cwd: job.dir.clone(),
            trust,
            store: trust_store_file(&job.profile, &spec)
                .and_then(|(kind, file)| StoreGuard::new(kind, file, job.dir.clone())),
            prompt: plan.clone(),
            restarted_to_apply_trust: false,
            answered_outside: false,
            budget,
        },
        plan,
        base_spec,
        session,
        events: Arc::clone(&events),
        recorder: recorder.clone(),
        restarts: earlier_restarts + u32::from(resuming.is_some()),
        dropped_turn,
        sandbox,
        claude_settings,
    };
    Ok(OpenLane {
        job,
        events,
        recorder,
        rig,
        worker,
        resumed,
        external,
        permission_gate,
        screen,
        operator_rx,
        hook_rx: has_channel.then_some(hook_rx),
        socket,
        listener,
        commits,
        commit_task,
        branch_tasks,
        supervisor_lock,
        publication_task,
        usage_reads,
        _lane_watch: lane_watch,
        _app_server: app_server,
        _failure_watch: failure_watch,
    })
}

/// This clawpool binary, the command an agent's reports run (`clawpool hook`); `what` names
/// the lookup in its error.
fn clawpool_program(what: &'static str) -> Result<PathBuf, LaneError> {
    std::env::current_exe().map_err(|e| LaneError::io(what, e))
}

/// The report channel (named `name`) of an adopted worker, which reports with the token kept
/// in the lane: recorded as opened again (`adopted: true`) when there is one.
fn resume_reports(
    setup: Option<ChannelSetup>,
    name: &str,
    events: &EventLog,
) -> Option<ChannelSetup> {
    let setup = setup?;
    let opened = Payload::ChannelOpened(ChannelOpened {
        channel: name.into(),
        settings: None,
        socket: None,
        adopted: true,
    });
    let _ = events.report(opened, None, None, None);
    Some(setup)
}
