//! Driving one lane: start its agent in the lane's folder, run the boot handshake with its
//! prompt, keep its event log and state file, and listen for operator commands on the lane's
//! control socket. `clawpool run` drives one lane this way in the foreground; `clawpool spawn`
//! drives many, each in its own worktree.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::handshake::{
    ExternalProgress, Handshake, LaneContext, Next, Outcome, PromptPlan, RestartRequest, Resumed,
    Settings, TRUST_NOT_APPLIED, TrustGate, Verdict, check_prompt, confine_trust_store,
    plan_prompt,
};
use crate::lane_state::StateRecorder;
use crate::permission_gate::PermissionGate;
use clawpool_agents::profiles::{
    AgentHooks, DialogKind, Policy as DialogPolicy, Profile, TrustStore,
};
use clawpool_agents::trust::{
    StoreGuard, claude_config_file, codex_config_file, gemini_trusted_folders_file,
    qwen_trusted_folders_file, seed_claude_trust, seed_codex_trust, seed_gemini_trust,
};
use clawpool_lanes::LaneEventKind;
use clawpool_lanes::state_file::{self, Base, SupervisorLock};
use clawpool_lanes::{
    EventLog, FailureClass, LaneEvent, LaneState, LaneStatus, StateFileWriter, WorkerStateDoc,
};
use clawpool_pty::{RawLogConfig, SpawnSpec, TmuxServer, Worker};
use serde_json::json;
use tokio::sync::mpsc;

use crate::app_server::AppServer;
use crate::channel::{self, FailureWatch, HookInbox};
use crate::checks::LaneChecks;
use crate::control;
use crate::error::LaneError;
use crate::interrupt::{Interrupt, StopSignal};
use crate::recovering::{Finishing, Plan, Recovery, Watch};
use crate::worktree_watch::{BranchWatch, LaneWatch};
use clawpool_recovery::StepOutcome;

/// The folder inside a lane where clawpool keeps its files.
pub use clawpool_worktree::layout::LANE_DIR as STATE_DIR;

/// The tmux server `clawpool run` uses.
pub const RUN_SOCKET: &str = "clawpool-run";

/// Where a lane's worker runs.
#[derive(Clone)]
pub enum Terminal {
    /// A PTY this process owns.
    Pty,
    /// A session on this tmux server.
    Tmux(TmuxServer),
}

impl Terminal {
    /// Kills the tmux server once no lane runs on it any more (and removes its socket).
    pub async fn close_if_unused(&self) {
        if let Terminal::Tmux(server) = self
            && server.sessions().await.is_ok_and(|s| s.is_empty())
        {
            let _ = server.kill_server().await;
        }
    }
}

/// One lane, ready to be driven.
pub struct LaneJob {
    /// The lane's name.
    pub name: String,
    /// Its folder (canonical).
    pub dir: PathBuf,
    /// The agent's profile, shared by every lane of that agent: its compiled regexes are
    /// compiled once, and each copy of a regex would keep its own match caches (tens of KiB
    /// once used) per lane.
    pub profile: Arc<Profile>,
    /// Whether its folder is under a trusted root.
    pub trusted: bool,
    /// The handshake's timing.
    pub settings: Settings,
    /// The task.
    pub prompt: Option<String>,
    /// Where the worker runs.
    pub terminal: Terminal,
    /// Extra environment for the agent.
    pub env: Vec<(String, String)>,
    /// Terminal size.
    pub size: Option<clawpool_pty::TermSize>,
    /// The lane's event log file.
    pub events_path: PathBuf,
    /// The raw terminal log file.
    pub terminal_log: PathBuf,
    /// The lane's branch and base, for the state file.
    pub branch: Option<String>,
    /// The base ref and sha.
    pub base: Option<(String, String)>,
    /// Called with every event (to show progress).
    pub on_event: Box<dyn Fn(&LaneEvent) + Send + Sync>,
    /// The lane's branch checks and verification (lanes made by `clawpool spawn`).
    pub checks: Option<LaneChecks>,
    /// The recovery policy.
    pub policy: Arc<clawpool_recovery::Policy>,
    /// SIGINT/SIGTERM to the supervisor: the lane's agent is stopped and the lane recorded as
    /// failed, with the signal as evidence.
    pub interrupt: Interrupt,
}

/// What driving a lane ended with.
pub struct LaneResult {
    /// The handshake's outcome (`None` when the supervisor was interrupted).
    pub outcome: Option<Outcome>,
    /// The signal that stopped the lane, and the state it was recorded in.
    pub interrupted: Option<(StopSignal, LaneState)>,
    /// The state file's last write error, if the last write failed (after retries): the lane's
    /// outcome is in its event log but not in its state file.
    pub degraded: Option<String>,
}

impl LaneResult {
    /// The state the lane ended in, however it ended.
    pub fn final_state(&self) -> Option<LaneState> {
        self.outcome
            .as_ref()
            .map(|o| o.state)
            .or(self.interrupted.map(|(_, state)| state))
    }
}

/// How many times the last write of a lane's state file is tried before the lane is reported as
/// not persisted, and how long apart: a disk that is full for a moment (a log rotated, a
/// build's temporary files removed) gets a chance to take the lane's outcome.
const FINAL_WRITE_TRIES: u32 = 5;
const FINAL_WRITE_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// Builds the worker's spawn spec from the profile, refusing an agent that is not installed
/// before anything is written.
fn spawn_spec(job: &LaneJob) -> Result<SpawnSpec, LaneError> {
    let launch = &job.profile.manifest.launch;
    let mut spec = SpawnSpec::new(&launch.command, &job.dir);
    for (key, value) in launch
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain(job.env.iter().cloned())
    {
        spec = spec.env(key, value);
    }
    clawpool_pty::resolve_program(
        spec.program.as_ref(),
        &job.dir,
        spec.env_value("PATH").as_deref(),
    )
    .map_err(LaneError::from)?;
    spec = spec.args(launch.args.iter());
    if let Some(size) = job.size {
        spec.size = size;
    }
    spec.raw_log = Some(RawLogConfig::new(&job.terminal_log));
    Ok(spec)
}

/// Checks what can be checked before anything is created: the prompt and the agent binary.
pub fn preflight(job: &LaneJob) -> Result<(), LaneError> {
    if let Some(prompt) = &job.prompt {
        check_prompt(prompt)
            .map_err(|e| LaneError::invalid("invalid_prompt", format!("lane {}: {e}", job.name)))?;
    }
    spawn_spec(job).map(drop)
}

/// How a lane's worker comes to be driven.
pub enum Start {
    /// Start the agent.
    Spawn,
    /// Carry on with a worker an earlier supervisor started (a tmux session that outlived
    /// it), from the lane's recorded state.
    Adopt {
        /// The re-attached worker.
        worker: Worker,
        /// The lane's state file as the earlier supervisor left it.
        doc: Box<WorkerStateDoc>,
    },
}

/// Drives one lane to finished or failed (or until Ctrl-C).
pub async fn drive(job: LaneJob, start: Start) -> Result<LaneResult, LaneError> {
    let mut spec = spawn_spec(&job)?;
    // Tool-permission questions go to the policy's `[permissions]` before a person.
    let permissions = job.policy.permissions();
    let permission_gate =
        PermissionGate::for_worktree(permissions.policy.clone(), &job.dir, permissions)?;
    let state_dir = job.dir.join(STATE_DIR);
    std::fs::create_dir_all(&state_dir)
        .map_err(|e| LaneError::io("creating the lane's .claw folder", e))?;
    // Held until the lane's last write: readers probe it to tell a live supervisor from a
    // lost one, so nothing has to rewrite the state file while nothing happens.
    let supervisor_lock = SupervisorLock::hold(&job.dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => LaneError::invalid("lane_busy", e.to_string()),
        _ => LaneError::io("taking the lane's supervisor lock", e),
    })?;
    let session = session_name(&job.name);
    // The tmux target is in the state file before the agent starts: a supervisor killed at any
    // moment after that leaves a lane `clawpool adopt` looks for in the right place.
    let transport = transport_of(&job.terminal, &session);
    // An operator's trust outlives the supervisor that received it.
    let operator_trusted = matches!(&start, Start::Adopt { doc, .. } if doc.trusted_by_operator);
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
    };
    // A mark left by an earlier run stays until a write succeeds.
    let marker = job
        .events_path
        .parent()
        .map(|registry| registry.join(crate::lane_state::DEGRADED_MARKER));
    let recorder = StateRecorder::with_marker(doc, StateFileWriter::for_worktree(&job.dir), marker);
    let on_state = recorder.clone();
    let on_event =
        crate::hooks::with_hooks(job.on_event, Arc::clone(&job.policy), &job.events_path);
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
    let plan = plan_prompt(
        job.prompt.as_deref(),
        &job.settings,
        &job.profile,
        &job.dir,
        trust.is_open(),
    )
    .map_err(|e| LaneError::io("writing .claw/task.md", e))?;
    let socket = clawpool_worktree::layout::control_socket(&job.dir);
    // The agent's own reports, for an agent that makes them; a worker adopted from an earlier
    // supervisor keeps reporting with the token it was started with, kept in the lane.
    let (hook_tx, mut hook_rx) = mpsc::channel(64);
    let hook_channel = match (job.profile.manifest.launch.hooks, &adopt) {
        (AgentHooks::Claude, Some(_)) => {
            let setup = channel::resume_claude(&job.dir);
            if setup.is_some() {
                let _ = events.record(
                    LaneEventKind::ChannelOpened,
                    None,
                    None,
                    None,
                    json!({"channel": "claude_hooks", "adopted": true}),
                );
            }
            setup
        }
        (AgentHooks::Claude, None) => {
            let program = std::env::current_exe().map_err(|e| {
                LaneError::io("finding the clawpool binary for the agent's hooks", e)
            })?;
            let setup = channel::set_up_claude(&job.dir, &socket, &program)
                .map_err(|e| LaneError::io("writing the lane's hook settings", e))?;
            spec = spec.args(setup.args.iter());
            for (key, value) in &setup.env {
                spec = spec.env(key, value);
            }
            let _ = events.record(
                LaneEventKind::ChannelOpened,
                None,
                None,
                None,
                json!({"channel": "claude_hooks", "settings": setup.args.last()}),
            );
            Some(setup)
        }
        _ => None,
    };
    // Codex's app server, owned by the lane, with the TUI attached to it; when it does not
    // start, the TUI runs on its own and the screen decides.
    let app_server = match (job.profile.manifest.launch.hooks, &adopt) {
        (AgentHooks::CodexAppServer, None) => {
            match AppServer::start(&spec, &job.dir, hook_tx.clone()).await {
                Ok(server) => {
                    // 0.169.0 refuses `--remote` with `--no-daemon`: the lane's own server
                    // stands in for the shared one that flag keeps away.
                    spec.args.retain(|arg| arg != "--no-daemon");
                    spec = spec.args(server.tui_args());
                    let _ = events.record(
                        LaneEventKind::ChannelOpened,
                        None,
                        None,
                        None,
                        json!({"channel": "codex_app_server",
                               "socket": server.socket().display().to_string()}),
                    );
                    Some(server)
                }
                Err(error) => {
                    let _ = events.record(
                        LaneEventKind::ChannelDegraded,
                        None,
                        None,
                        None,
                        json!({"channel": "codex_app_server", "event": "start", "error": error,
                               "failed": 1, "decides": "screen"}),
                    );
                    None
                }
            }
        }
        // The TUI an earlier supervisor started stays attached to that supervisor's server.
        (AgentHooks::CodexAppServer, Some(_)) => {
            AppServer::adopt(&job.dir, hook_tx.clone(), &events).await
        }
        _ => None,
    };
    let _failure_watch = hook_channel
        .as_ref()
        .and_then(|setup| FailureWatch::start(&setup.failures, hook_tx.clone()));
    // The hook answers permission questions when the policy decides them on screen too.
    let policy_decides_permissions = job.profile.dialogs.iter().any(|dialog| {
        dialog.kind == DialogKind::ToolPermission && dialog.policy == DialogPolicy::Ask
    });
    let hook_inbox = hook_channel.as_ref().map(|setup| HookInbox {
        token: setup.token.clone(),
        sender: hook_tx,
        permissions: policy_decides_permissions.then(|| permission_gate.clone()),
        usage_log: Some(Arc::clone(&events)),
    });
    let base_spec = spec.clone();
    spec = with_prompt(spec, &job.profile, &plan);

    let (operator_tx, mut operator_rx) = mpsc::channel(8);
    let (ops_tx, ops_rx) = mpsc::channel(4);
    let screen = control::ScreenSource::default();
    let listener = control::listen(&socket, operator_tx, ops_tx, screen.clone(), hook_inbox)
        .map_err(|e| LaneError::io("opening the lane's control socket", e))?;

    let (worker, mut resumed) = match adopt {
        Some((worker, resumed)) => (Ok(worker), Some(resumed)),
        None => {
            replace_leftover_session(&job.terminal, &session, &events).await;
            (
                start_worker(&job.terminal, &session, spec.clone()).await,
                None,
            )
        }
    };
    let mut worker = match worker {
        Ok(worker) => worker,
        Err(err) => {
            drop(operator_rx);
            listener.close().await;
            let _ = std::fs::remove_file(&socket);
            return Err(err.into());
        }
    };
    let commits = match job.branch {
        Some(_) => Some(CommitWatch::start(
            job.dir.clone(),
            Arc::clone(&events),
            &job.events_path,
            job.base.clone(),
        )),
        None => None,
    };
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
    let mut rig = Rig {
        name: &job.name,
        profile: &job.profile,
        terminal: &job.terminal,
        lane: LaneContext {
            name: job.name.clone(),
            cwd: job.dir.clone(),
            trust,
            store: trust_store_file(&job.profile, &spec)
                .and_then(|(kind, file)| StoreGuard::new(kind, file, job.dir.clone())),
            prompt: plan.clone(),
            restarted_to_apply_trust: false,
        },
        plan,
        base_spec,
        session,
        events: Arc::clone(&events),
        recorder: recorder.clone(),
        restarts: 0,
        dropped_turn: false,
    };
    let mut prior_attempts = 0;
    let mut recovery = Recovery::new(
        Arc::clone(&job.policy),
        &job.name,
        &job.events_path,
        &events,
        &recorder,
    );
    // How the next run of the handshake starts: with a new worker, or carrying on with the
    // same one after a recovery step (its state and receipt as the last run left them).
    let mut carry: Option<Resumed> = None;
    // Set when a recovery pressed Enter again on the draft: the next run carries on as
    // `ready_for_prompt`, where the handshake sees the prompt being taken.
    let mut resubmitted = false;
    let mut followups = Vec::new();
    let mut watch = Watch::Troubles;
    let outcome = 'lane: loop {
        let run_started = state_file::now_secs();
        // Set when a recovery step starts a new worker before the next run.
        let mut fresh = false;
        screen.show(&worker);
        let mut handshake = Handshake::new(
            worker.clone(),
            &job.profile,
            rig.lane.clone(),
            job.settings,
            &events,
            &mut operator_rx,
        )
        .after_attempts(prior_attempts)
        .after_dropped_turn(rig.dropped_turn)
        .with_followups(std::mem::take(&mut followups))
        .with_external_progress(external.clone())
        .with_permissions(permission_gate.clone());
        if hook_channel.is_some() || app_server.is_some() {
            handshake = handshake.with_hook_channel(&mut hook_rx);
        }
        handshake = match watch {
            Watch::Troubles => handshake
                .stall_after(recovery.stall_after())
                .recover_blocked(),
            Watch::Check(within) => handshake.check_progress(Some(within)),
            Watch::Escalated => handshake.check_progress(None),
        };
        if let Some(resumed) = resumed.take() {
            handshake = handshake.resume(resumed);
        } else if let Some(resumed) = carry.take() {
            handshake = handshake.carry_on(resumed);
        }
        let outcome = tokio::select! {
            outcome = handshake.run() => outcome,
            signal = job.interrupt.wait() => {
                break 'lane Err(interrupted(&worker, signal, &events, &recorder).await);
            }
        };
        // An operator may have trusted the lane during the run, and clawpool may have answered
        // its trust dialog: later runs keep both.
        rig.lane.trust = outcome.trust;
        rig.lane.store = outcome.store.clone();
        if let Next::Restart(request) = &outcome.next {
            let request = request.clone();
            rig.lane.restarted_to_apply_trust |= request.by == TRUST_NOT_APPLIED;
            let reply = outcome.restart_reply.clone().unwrap_or_default();
            match rig.restart(&outcome, &request).await {
                Ok(new_worker) => {
                    reply.send(Verdict::done(format!(
                        "restarted: a new worker (pid {}) runs in the lane's folder{}",
                        new_worker
                            .pid()
                            .map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
                        if matches!(rig.lane.prompt, PromptPlan::None) {
                            ""
                        } else {
                            ", and the lane's prompt is delivered again"
                        }
                    )));
                    worker = new_worker;
                    prior_attempts = outcome.receipt.attempts;
                    followups = outcome.unsent.clone();
                    watch = Watch::Troubles;
                    continue;
                }
                Err(failed) => {
                    reply.send(Verdict::Failed {
                        reason: format!(
                            "the worker could not be started again; the lane is {}",
                            failed.state
                        ),
                    });
                    break Ok(failed);
                }
            }
        }
        let mut plan = recovery.after_run(&outcome, run_started, &events, &recorder);
        loop {
            plan = match plan {
                Plan::Done => {
                    // An escalation may have moved the lane (a stall escalated is blocked).
                    let state = recorder.doc().lane_state();
                    break 'lane Ok(Outcome { state, ..outcome });
                }
                Plan::CarryOn {
                    followups: mut texts,
                    watch: next,
                } => {
                    // A restarted worker starts its own handshake; the same one carries on.
                    carry = (!fresh).then(|| Resumed {
                        state: if resubmitted {
                            LaneState::plain(LaneStatus::ReadyForPrompt)
                        } else {
                            recorder.doc().lane_state()
                        },
                        attempts: outcome.receipt.attempts + u32::from(resubmitted),
                        sent_at: outcome.receipt.sent_at.map(|ms| ms / 1000),
                        accepted_at: outcome.receipt.accepted_at.map(|ms| ms / 1000),
                    });
                    resubmitted = false;
                    // What an operator queued and the run did not deliver goes first.
                    texts.splice(0..0, outcome.unsent.iter().cloned());
                    followups = texts;
                    watch = next;
                    continue 'lane;
                }
                Plan::SendKey(_) | Plan::Resubmit if !rig.lane.trust.is_open() => {
                    let why = "nothing is typed into a lane nobody trusted (`clawpool trust`)";
                    recovery.step_done(StepOutcome::Failed(why.into()), &events, &recorder)
                }
                Plan::SendKey(key) => {
                    let sent = match key.parse::<clawpool_pty::Key>() {
                        Ok(key) => worker
                            .send(&clawpool_pty::Input::Key(key))
                            .await
                            .map_err(|e| e.to_string()),
                        Err(e) => Err(format!("{e}")),
                    };
                    let step = match sent {
                        Ok(()) => StepOutcome::Done,
                        Err(why) => StepOutcome::Failed(format!("sending {key}: {why}")),
                    };
                    recovery.step_done(step, &events, &recorder)
                }
                Plan::Resubmit => {
                    let attempt = outcome.receipt.attempts + 1;
                    // Recorded before the press, as the handshake does: an adopter of a lane
                    // whose supervisor was killed in between presses Enter, never retypes.
                    let _ = events.record(
                        LaneEventKind::PromptSent,
                        None,
                        None,
                        None,
                        json!({"attempt": attempt, "by": "resubmit_prompt"}),
                    );
                    let step = match worker
                        .send(&clawpool_pty::Input::Key(clawpool_pty::Key::Enter))
                        .await
                    {
                        Ok(()) => {
                            resubmitted = true;
                            StepOutcome::Done
                        }
                        Err(err) => StepOutcome::Failed(format!("pressing Enter: {err}")),
                    };
                    recovery.step_done(step, &events, &recorder)
                }
                Plan::MergeForward => {
                    let step = match &job.checks {
                        Some(checks) => merge_step(checks, &events, &recorder, false).await,
                        None => StepOutcome::Failed("the lane has no branch of its own".into()),
                    };
                    recovery.step_done(step, &events, &recorder)
                }
                Plan::CloseOut { rule } => {
                    worker.stop(std::time::Duration::from_secs(5)).await;
                    let state = LaneState::plain(LaneStatus::Finished);
                    let _ = events.record(
                        LaneEventKind::ClosedOut,
                        Some(recorder.doc().lane_state()),
                        Some(state),
                        None,
                        json!({"rule": rule}),
                    );
                    break 'lane Ok(Outcome {
                        state,
                        next: Next::Done,
                        ..outcome
                    });
                }
                Plan::Wait(wait) => {
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        signal = job.interrupt.wait() => {
                            break 'lane Err(interrupted(&worker, signal, &events, &recorder).await);
                        }
                    }
                    recovery.step_done(StepOutcome::Done, &events, &recorder)
                }
                Plan::Restart {
                    delay,
                    resume,
                    redeliver,
                    by,
                } => {
                    if resume && job.profile.manifest.launch.resume_args.is_empty() {
                        let why = format!(
                            "the {} profile has no resume arguments; the worker was left as it is",
                            job.profile.name()
                        );
                        recovery.step_done(StepOutcome::Failed(why), &events, &recorder)
                    } else {
                        worker.stop(std::time::Duration::from_secs(5)).await;
                        tokio::select! {
                            _ = tokio::time::sleep(delay) => {}
                            signal = job.interrupt.wait() => {
                                break 'lane Err(interrupted(&worker, signal, &events, &recorder).await);
                            }
                        }
                        let request = RestartRequest {
                            by,
                            resume,
                            redeliver,
                        };
                        match rig.restart(&outcome, &request).await {
                            Ok(new_worker) => {
                                worker = new_worker;
                                prior_attempts = outcome.receipt.attempts;
                                recovery.restarted(&recorder);
                                fresh = true;
                                recovery.step_done(StepOutcome::Done, &events, &recorder)
                            }
                            Err(failed) => break 'lane Ok(failed),
                        }
                    }
                }
            };
        }
    };
    // Commands still waiting are told the lane ended; every verdict is written before the
    // process may exit.
    drop(operator_rx);
    // The agent rewrites its trust store from memory when it exits: confine it once it is gone.
    worker.stop(std::time::Duration::from_secs(5)).await;
    // The lane's terminal is over: its screen model goes now, not after the verification and
    // close-out that may follow for minutes (a `screen` request is answered that it ended).
    screen.clear();
    drop(worker);
    if let Some(store) = &rig.lane.store {
        confine_trust_store(store, &events);
    }
    if let Some((watch, serve)) = branch_tasks {
        watch.abort();
        serve.abort();
    }
    listener.close().await;
    let (mut outcome, interrupted) = match outcome {
        Ok(outcome) => (Some(outcome), None),
        Err(interrupted) => (None, Some(interrupted)),
    };
    if let (Some(checks), Some(finished)) = (&job.checks, outcome.as_mut())
        && finished.state.status == LaneStatus::Finished
    {
        if let Some(level) = checks.spec.on_finish {
            checks.verify(level, &events, &recorder, true).await;
        }
        finish_by_policy(checks, &mut recovery, &events, &recorder).await;
        finished.state = recorder.doc().lane_state();
        if finished.state.status == LaneStatus::Finished {
            let base_sha = job.base.as_ref().map(|(_, sha)| sha.clone());
            checks.record_outcome(base_sha, &events).await;
        }
    }
    if let (Some(task), Some(commits)) = (commit_task, &commits) {
        task.abort();
        // A commit made just before the lane finished is still reported.
        commits.check(Look::Last).await;
    }
    if let Terminal::Tmux(server) = &job.terminal {
        let _ = server.kill_session(&rig.session).await;
    }
    write_last(&recorder).await;
    drop(supervisor_lock);
    let _ = std::fs::remove_file(&socket);
    Ok(LaneResult {
        outcome,
        interrupted,
        degraded: recorder.degraded(),
    })
}

/// The lane's last write, tried again a few times when it fails: the lane's outcome is already
/// in its event log, and this is what puts it in its state file.
async fn write_last(recorder: &StateRecorder) {
    for attempt in 1..=FINAL_WRITE_TRIES {
        recorder.update(|_| {});
        if recorder.degraded().is_none() || attempt == FINAL_WRITE_TRIES {
            return;
        }
        tokio::time::sleep(FINAL_WRITE_BACKOFF).await;
    }
}

/// The tmux session a lane's worker runs in: `lane-<name>`, with anything tmux cannot take in a
/// session name replaced.
pub fn session_name(lane: &str) -> String {
    format!("lane-{lane}").replace(
        |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
        "_",
    )
}

/// What the state file says about the lane's terminal: for tmux, the `SOCKET:SESSION` target.
pub fn transport_of(terminal: &Terminal, session: &str) -> state_file::Transport {
    match terminal {
        Terminal::Pty => state_file::Transport {
            kind: state_file::TransportKind::Pty,
            session: None,
        },
        Terminal::Tmux(server) => state_file::Transport {
            kind: state_file::TransportKind::Tmux,
            session: Some(format!("{}:{session}", server.socket_name())),
        },
    }
}

/// A session of the lane's name already on the server was left by a supervisor that ended
/// (killed, or the machine went down) while the lane ran: its agent is stopped with it and the
/// replacement recorded, so the lane starts afresh and no agent is left working unwatched.
async fn replace_leftover_session(terminal: &Terminal, session: &str, events: &EventLog) {
    let Terminal::Tmux(server) = terminal else {
        return;
    };
    let leftover = server
        .sessions()
        .await
        .is_ok_and(|sessions| sessions.iter().any(|s| s == session));
    if !leftover {
        return;
    }
    let killed = server.kill_session(session).await;
    let _ = events.record(
        LaneEventKind::SessionReplaced,
        None,
        None,
        None,
        json!({
            "session": format!("{}:{session}", server.socket_name()),
            "killed": killed.is_ok(),
            "error": killed.err().map(|e| e.to_string()),
        }),
    );
}

/// Stops the lane's worker on SIGINT/SIGTERM to the supervisor and records the lane as failed,
/// with the signal as evidence: the class its block was heading for when it was blocked,
/// otherwise `infra` (an interrupted task is not a finished one).
async fn interrupted(
    worker: &Worker,
    signal: StopSignal,
    events: &EventLog,
    recorder: &StateRecorder,
) -> (StopSignal, LaneState) {
    worker.stop(std::time::Duration::from_secs(5)).await;
    let from = recorder.doc().lane_state();
    let to = match from.subphase {
        Some(subphase) if from.status == LaneStatus::Blocked => {
            LaneState::failed(subphase.failure_class())
        }
        _ => LaneState::failed(FailureClass::Infra),
    };
    let _ = events.record(
        LaneEventKind::Failed,
        Some(from),
        Some(to),
        Some(clawpool_lanes::Evidence {
            rule: "supervisor_interrupted".into(),
            region: "supervisor".into(),
            matched: format!("interrupted by {} while {from}", signal.name()),
        }),
        json!({"signal": signal.name()}),
    );
    (signal, to)
}

/// A recipe's `merge_forward` step: the base brought in, or why not. `transition` when no
/// worker is driven any more (the lane's state may then change to blocked).
async fn merge_step(
    checks: &LaneChecks,
    events: &EventLog,
    recorder: &StateRecorder,
    transition: bool,
) -> StepOutcome {
    match checks.bring_base_in(events, recorder, transition).await {
        (_, None) => StepOutcome::Done,
        (_, Some(problem)) => StepOutcome::Failed(problem),
    }
}

/// Takes a finished lane on as the policy says (`Recovery::finishing`): merge its base forward,
/// verify it, close it out — each at most once, with fresh facts after each.
async fn finish_by_policy(
    checks: &LaneChecks,
    recovery: &mut Recovery,
    events: &EventLog,
    recorder: &StateRecorder,
) {
    let has_commands = |level| checks.spec.commands.contains_key(&level);
    // The policy decides on the branch as it is now, not as the last periodic check saw it.
    checks.check(events, recorder).await;
    loop {
        match recovery.finishing(has_commands, events, recorder) {
            Finishing::Steps(mut plan) => {
                // A finished lane has no worker: merging forward is the only step it can take.
                while plan == Plan::MergeForward {
                    let step = merge_step(checks, events, recorder, true).await;
                    plan = recovery.step_done(step, events, recorder);
                }
            }
            Finishing::Verify(level) => {
                checks.verify(level, events, recorder, true).await;
            }
            Finishing::CloseOut { rule } => {
                let _ = events.record(
                    LaneEventKind::ClosedOut,
                    None,
                    None,
                    None,
                    json!({"rule": rule}),
                );
                return;
            }
            Finishing::Nothing => return,
        }
    }
}

/// The spawn spec with the prompt passed at launch, when that is how it goes in.
fn with_prompt(spec: SpawnSpec, profile: &Profile, plan: &PromptPlan) -> SpawnSpec {
    match plan {
        PromptPlan::LaunchArg { prompt } => spec.args(
            profile
                .manifest
                .launch
                .prompt_args
                .iter()
                .map(|a| a.replace("{prompt}", prompt)),
        ),
        _ => spec,
    }
}

/// What starting a lane's worker again needs.
struct Rig<'a> {
    name: &'a str,
    profile: &'a Profile,
    terminal: &'a Terminal,
    /// The lane as the next handshake sees it (its prompt: none once taken, unless delivered
    /// again).
    lane: LaneContext,
    /// How the lane's prompt goes in.
    plan: PromptPlan,
    /// The agent's spawn spec without the prompt.
    base_spec: SpawnSpec,
    session: String,
    events: Arc<EventLog>,
    recorder: StateRecorder,
    restarts: u32,
    /// The last restart dropped the turn the agent was in (taken, not delivered again).
    dropped_turn: bool,
}

impl Rig<'_> {
    /// Starts a new worker in the lane's folder after `outcome`'s has stopped; the lane fails
    /// (and that is the `Err`) when it cannot be started.
    async fn restart(
        &mut self,
        outcome: &Outcome,
        request: &RestartRequest,
    ) -> Result<Worker, Outcome> {
        self.restarts += 1;
        let accepted = outcome.receipt.accepted_at.is_some();
        self.lane.prompt = if request.redeliver || !accepted {
            self.plan.clone()
        } else {
            PromptPlan::None
        };
        // A turn the agent was in is dropped with its worker unless its prompt goes in again;
        // one dropped earlier stays dropped while the lane sits idle.
        let mid_turn = matches!(
            outcome.state.status,
            LaneStatus::PromptAccepted
                | LaneStatus::Running
                | LaneStatus::Blocked
                | LaneStatus::ToolPermissionRequired
        );
        let redelivered = !matches!(self.lane.prompt, PromptPlan::None);
        self.dropped_turn = !redelivered
            && accepted
            && (mid_turn
                || (self.dropped_turn && outcome.state.status == LaneStatus::ReadyForPrompt));
        let mut spec = with_prompt(self.base_spec.clone(), self.profile, &self.lane.prompt);
        let resume_args = &self.profile.manifest.launch.resume_args;
        let resume = request.resume && !resume_args.is_empty();
        if resume {
            spec = spec.args(resume_args.iter());
        }
        if let Terminal::Tmux(server) = self.terminal {
            let _ = server.kill_session(&self.session).await;
        }
        let worker_id = format!("{}-{}-r{}", self.name, std::process::id(), self.restarts);
        self.recorder
            .update(|doc| doc.worker_id = worker_id.clone());
        let _ = self.events.record(
            LaneEventKind::Restarted,
            None,
            None,
            None,
            json!({
                "by": request.by, "restart": self.restarts, "worker_id": worker_id,
                "resume": resume, "redeliver_prompt": !matches!(self.lane.prompt, PromptPlan::None),
                "previous": outcome.state.to_string(), "previous_exit": outcome.exit,
            }),
        );
        match start_worker(self.terminal, &self.session, spec).await {
            Ok(worker) => Ok(worker),
            Err(err) => {
                let _ = self.events.record(
                    LaneEventKind::Failed,
                    Some(outcome.state),
                    Some(LaneState::failed(FailureClass::WorkerCrashed)),
                    None,
                    json!({"error": format!("the worker could not be started again: {err}")}),
                );
                Err(Outcome {
                    state: LaneState::failed(FailureClass::WorkerCrashed),
                    next: Next::Done,
                    ..outcome.clone()
                })
            }
        }
    }
}

/// Starts the lane's agent on its terminal.
async fn start_worker(
    terminal: &Terminal,
    session: &str,
    spec: SpawnSpec,
) -> Result<Worker, clawpool_pty::SpawnError> {
    match terminal {
        Terminal::Pty => Worker::spawn_pty(spec).await,
        Terminal::Tmux(server) => server.spawn(session, spec).await,
    }
}

/// How often a spawned lane's branch is looked at when nothing told it that it moved: a
/// safety sweep for what the repository's watch can miss (an inotify queue that overflowed, a
/// repository that could not be watched). Moves are noticed from the filesystem as they happen
/// ([`LaneWatch`]), so this can be slow.
const COMMIT_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// What made the commit watch look (`look` in `lane.commit.created`).
#[derive(Clone, Copy)]
enum Look {
    /// When the lane starts (commits made while no supervisor ran).
    Start,
    /// The repository's watch said the lane's HEAD, branch or base moved.
    Watch,
    /// The slow safety sweep.
    Sweep,
    /// When the lane ends.
    Last,
}

impl Look {
    fn name(self) -> &'static str {
        match self {
            Look::Start => "start",
            Look::Watch => "watch",
            Look::Sweep => "sweep",
            Look::Last => "last",
        }
    }
}

/// At most this many `lane.commit.created` per look; older new commits are summed up in one
/// `lane.commits.skipped`, so a history imported at once cannot flood the log.
const MAX_COMMIT_EVENTS: usize = 50;

/// Records one `lane.commit.created` per commit the lane's branch gains.
///
/// A look walks from HEAD back to what is already accounted for: the last commit reported
/// (read back from the lane's event log when the watch starts, so commits made while no
/// supervisor ran are reported once on adoption, and none twice), the base sha the branch was
/// made from, and the base ref's current tip. Commits reachable from the base are not the
/// lane's own work: a merge of the base forward reports the merge commit, not the base commits
/// it brought in.
#[derive(Clone)]
struct CommitWatch {
    dir: PathBuf,
    events: Arc<EventLog>,
    /// The base ref and the sha it resolved to when the branch was made.
    base: Option<(String, String)>,
    /// The last commit accounted for; held across a whole look so that the final look after
    /// the periodic task is aborted cannot report a commit twice.
    last: Arc<tokio::sync::Mutex<Option<String>>>,
}

impl CommitWatch {
    fn start(
        dir: PathBuf,
        events: Arc<EventLog>,
        events_path: &Path,
        base: Option<(String, String)>,
    ) -> Self {
        Self {
            dir,
            events,
            base,
            last: Arc::new(tokio::sync::Mutex::new(last_reported_commit(events_path))),
        }
    }

    /// Looks once; records an event per commit HEAD gained since the last look.
    async fn check(&self, look: Look) {
        let mut last = self.last.lock().await;
        let mut known: Vec<String> = last.iter().cloned().collect();
        if let Some((git_ref, sha)) = &self.base {
            known.push(sha.clone());
            known.push(git_ref.clone());
        }
        let dir = self.dir.clone();
        let walked = tokio::task::spawn_blocking(move || {
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            clawpool_worktree::new_commits(&dir, &known, MAX_COMMIT_EVENTS)
        })
        .await;
        // No HEAD to read (the folder is mid-rewrite, or gone): the next look tries again.
        let Ok(Ok(new)) = walked else {
            return;
        };
        if new.left_out > 0 {
            let _ = self.events.record(
                LaneEventKind::CommitsSkipped,
                None,
                None,
                None,
                json!({
                    "count": new.left_out,
                    "oldest": new.oldest_left_out,
                    "newest_reported": new.commits.first().map(|c| &c.sha),
                    "look": look.name(),
                }),
            );
        }
        for commit in &new.commits {
            let _ = self.events.record(
                LaneEventKind::CommitCreated,
                None,
                None,
                None,
                json!({"sha": commit.sha, "subject": commit.subject, "look": look.name()}),
            );
        }
        *last = Some(new.head);
    }

    /// Looks at start, then whenever `moves` says the lane's HEAD, branch or base moved, and
    /// every [`COMMIT_SWEEP_INTERVAL`] besides, until aborted.
    fn spawn(&self, mut moves: tokio::sync::watch::Receiver<u64>) -> tokio::task::JoinHandle<()> {
        let watch = self.clone();
        tokio::spawn(async move {
            watch.check(Look::Start).await;
            let mut sweep = tokio::time::interval_at(
                tokio::time::Instant::now() + COMMIT_SWEEP_INTERVAL,
                COMMIT_SWEEP_INTERVAL,
            );
            let mut watched = true;
            loop {
                let look = tokio::select! {
                    changed = moves.changed(), if watched => {
                        // The watch is gone only with the lane; the sweep carries on until then.
                        watched = changed.is_ok();
                        Look::Watch
                    }
                    _ = sweep.tick() => Look::Sweep,
                };
                watch.check(look).await;
            }
        })
    }
}

/// The sha of the last `lane.commit.created` in a lane's event log, if any.
fn last_reported_commit(events_path: &Path) -> Option<String> {
    std::fs::read_to_string(events_path)
        .ok()?
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<LaneEvent>(line).ok())
        .filter(|event| event.kind == LaneEventKind::CommitCreated)
        .find_map(|event| event.detail["sha"].as_str().map(str::to_owned))
}

/// The agent's trust store file as the agent will find it (its HOME, `CLAUDE_CONFIG_DIR` or
/// `CODEX_HOME`, `GEMINI_CLI_HOME` or `GEMINI_CLI_TRUSTED_FOLDERS_PATH`, `QWEN_HOME` or
/// `QWEN_CODE_TRUSTED_FOLDERS_PATH` as the lane's environment sets them); `None` for an agent
/// without one.
fn trust_store_file(profile: &Profile, spec: &SpawnSpec) -> Option<(TrustStore, PathBuf)> {
    let home = spec
        .env_value("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let store = profile.manifest.launch.trust_store;
    let file = match store {
        TrustStore::None => return None,
        TrustStore::Claude => claude_config_file(
            &home,
            spec.env_value("CLAUDE_CONFIG_DIR")
                .as_deref()
                .map(Path::new),
        ),
        TrustStore::Codex => codex_config_file(
            &home,
            spec.env_value("CODEX_HOME").as_deref().map(Path::new),
        ),
        TrustStore::Gemini => gemini_trusted_folders_file(
            &home,
            spec.env_value("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
                .as_deref()
                .map(Path::new),
            spec.env_value("GEMINI_CLI_HOME").as_deref().map(Path::new),
        ),
        TrustStore::Qwen => qwen_trusted_folders_file(
            &home,
            spec.env_value("QWEN_CODE_TRUSTED_FOLDERS_PATH")
                .as_deref()
                .map(Path::new),
            spec.env_value("QWEN_HOME").as_deref().map(Path::new),
        ),
    };
    Some((store, file))
}

fn seed_trust_store(profile: &Profile, cwd: &Path, spec: &SpawnSpec, events: &EventLog) {
    let Some((kind, store)) = trust_store_file(profile, spec) else {
        return;
    };
    let result = match kind {
        TrustStore::Claude => seed_claude_trust(&store, cwd),
        TrustStore::Codex => seed_codex_trust(&store, cwd),
        TrustStore::Gemini | TrustStore::Qwen => seed_gemini_trust(&store, cwd),
        TrustStore::None => return,
    };
    let detail = match &result {
        Ok(outcome) => json!({"store": store, "outcome": format!("{outcome:?}")}),
        Err(err) => json!({"store": store, "error": err.to_string()}),
    };
    let _ = events.record(LaneEventKind::TrustStoreSeeded, None, None, None, detail);
}

/// Keeps `.claw/` out of git through the repository's own exclude file, never a tracked file.
pub fn exclude_from_git(cwd: &Path) {
    if let Ok(repo) = clawpool_worktree::Repo::open(cwd) {
        let _ = repo.exclude_claw();
    }
}
