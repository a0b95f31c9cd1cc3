//! `clawpool run`: one lane in the foreground. The agent is started in the lane's folder and
//! driven through the boot handshake with its prompt; every lane event is printed as it
//! happens and kept in `.claw/events.jsonl`; an operator can answer a blocked lane through
//! `.claw/control.sock` (`clawpool trust`, `clawpool answer`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clawpool::handshake::{
    Handshake, LaneContext, OperatorCommand, PromptPlan, Settings, check_prompt, plan_prompt,
};
use clawpool::lane_state::StateRecorder;
use clawpool::profiles::{Profile, TrustStore};
use clawpool::trust::{
    TrustRoots, claude_config_file, codex_config_file, seed_claude_trust, seed_codex_trust,
};
use clawpool_lanes::state_file;
use clawpool_lanes::{EventLog, LaneEvent, LaneStatus, StateFileWriter, WorkerStateDoc};
use clawpool_pty::{RawLogConfig, SpawnSpec, TmuxConfig, TmuxServer, Worker};
use serde_json::json;
use tokio::sync::mpsc;

use crate::cli::{OutputFormat, TransportKind};
use crate::control;
use crate::output::CommandError;

/// Everything `clawpool run` needs, resolved from flags and configuration.
pub struct RunRequest {
    pub profile: Profile,
    pub roots: TrustRoots,
    pub settings: Settings,
    pub cwd: PathBuf,
    pub lane: Option<String>,
    pub prompt: Option<String>,
    pub transport: TransportKind,
    pub format: OutputFormat,
    pub env: Vec<(String, String)>,
    pub size: Option<clawpool_pty::TermSize>,
}

/// The folder inside a lane where clawpool keeps its files.
pub const STATE_DIR: &str = ".claw";

pub async fn run(request: RunRequest) -> Result<ExitCode, CommandError> {
    if let Some(prompt) = &request.prompt {
        check_prompt(prompt).map_err(|e| CommandError::invalid("invalid_prompt", e.to_string()))?;
    }
    let cwd = request.cwd.canonicalize().map_err(|_| {
        CommandError::invalid(
            "cwd_not_found",
            format!(
                "working directory does not exist: {}",
                request.cwd.display()
            ),
        )
    })?;
    let lane_name = match &request.lane {
        Some(name) => name.clone(),
        None => cwd
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "lane".into()),
    };
    let decision = request
        .roots
        .decide(&cwd)
        .map_err(|e| CommandError::invalid("invalid_lane_path", e.to_string()))?;
    let profile = request.profile;
    let command = profile.manifest.launch.command.clone();
    let mut spec = SpawnSpec::new(&command, &cwd);
    for (key, value) in profile
        .manifest
        .launch
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain(request.env.iter().cloned())
    {
        spec = spec.env(key, value);
    }
    // Resolve the agent before touching anything in the lane: a missing agent is bad input.
    clawpool_pty::resolve_program(
        spec.program.as_ref(),
        &cwd,
        spec.env_value("PATH").as_deref(),
    )
    .map_err(CommandError::from)?;

    let state_dir = cwd.join(STATE_DIR);
    std::fs::create_dir_all(&state_dir)
        .map_err(|e| CommandError::io("creating the lane's .claw folder", e))?;
    exclude_from_git(&cwd);
    let events_path = state_dir.join("events.jsonl");
    let format = request.format;
    let transport = state_file::Transport {
        kind: match request.transport {
            TransportKind::Pty => state_file::TransportKind::Pty,
            TransportKind::Tmux => state_file::TransportKind::Tmux,
        },
        session: None,
    };
    let doc = WorkerStateDoc::new(
        format!("{lane_name}-{}", std::process::id()),
        &lane_name,
        profile.name(),
        cwd.display().to_string(),
        transport,
        state_file::now_secs(),
    );
    let recorder = StateRecorder::new(doc, StateFileWriter::for_worktree(&cwd));
    let on_event = recorder.clone();
    let events = EventLog::open(&lane_name, &events_path)
        .map_err(|e| CommandError::io("opening the lane's event log", e.source))?
        .observe(Box::new(move |event| {
            on_event.on_event(event);
            print_event(event, format);
        }));

    if decision.is_trusted() {
        seed_trust_store(&profile, &cwd, &spec, &events);
    }
    let plan = plan_prompt(request.prompt.as_deref(), &request.settings, &profile, &cwd)
        .map_err(|e| CommandError::io("writing .claw/task.md", e))?;
    spec = spec.args(profile.manifest.launch.args.iter());
    if let PromptPlan::LaunchArg { prompt } = &plan {
        spec = spec.args(
            profile
                .manifest
                .launch
                .prompt_args
                .iter()
                .map(|a| a.replace("{prompt}", prompt)),
        );
    }
    if let Some(size) = request.size {
        spec.size = size;
    }
    spec.raw_log = Some(RawLogConfig::new(state_dir.join("terminal.log")));

    let (operator_tx, operator_rx) = mpsc::channel(8);
    let socket = state_dir.join("control.sock");
    let listener = control::listen(&socket, operator_tx)
        .map_err(|e| CommandError::io("opening the lane's control socket", e))?;

    let (worker, tmux) = match request.transport {
        TransportKind::Pty => (Worker::spawn_pty(spec).await?, None),
        TransportKind::Tmux => {
            let server =
                TmuxServer::connect(TmuxConfig::new(crate::run_one::RUN_ONE_SOCKET)).await?;
            let session = format!("lane-{lane_name}-{}", std::process::id()).replace(
                |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
                "_",
            );
            let worker = server.spawn(&session, spec).await?;
            if format == OutputFormat::Text {
                eprintln!(
                    "clawpool: watch or take over with: tmux -L {} attach -t {session}",
                    crate::run_one::RUN_ONE_SOCKET
                );
            }
            (worker, Some((server, session)))
        }
    };
    if let Some((server, session)) = &tmux {
        let target = format!("{}:{session}", server.socket_name());
        recorder.update(|doc| doc.transport.session = Some(target));
    }
    let heartbeat = recorder.heartbeat();
    let lane = LaneContext {
        name: lane_name,
        cwd,
        trusted: decision.is_trusted(),
        prompt: plan,
    };
    let handshake = Handshake::new(
        worker.clone(),
        &profile,
        lane,
        request.settings,
        &events,
        operator_rx,
    );
    let outcome = tokio::select! {
        outcome = handshake.run() => Some(outcome),
        _ = tokio::signal::ctrl_c() => None,
    };
    listener.abort();
    heartbeat.abort();
    recorder.update(|_| {});
    let _ = std::fs::remove_file(&socket);
    if outcome.is_none() {
        worker.stop(std::time::Duration::from_secs(5)).await;
    }
    if let Some((server, session)) = tmux {
        let _ = server.kill_session(&session).await;
        if server
            .sessions()
            .await
            .map(|s| s.is_empty())
            .unwrap_or(false)
        {
            let _ = server.kill_server().await;
        }
    }
    let Some(outcome) = outcome else {
        return Ok(ExitCode::from(130));
    };
    let degraded = recorder.degraded();
    match format {
        OutputFormat::Text => {
            eprintln!("clawpool: lane ended {}", outcome.state);
            if let Some(err) = &degraded {
                eprintln!("clawpool: warning: the lane's state file is degraded: {err}");
            }
        }
        OutputFormat::Json => println!(
            "{}",
            json!({"outcome": outcome, "state_file_degraded": degraded})
        ),
    }
    Ok(if outcome.state.status == LaneStatus::Finished {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn seed_trust_store(profile: &Profile, cwd: &Path, spec: &SpawnSpec, events: &EventLog) {
    let home = spec
        .env_value("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let (store, result) = match profile.manifest.launch.trust_store {
        TrustStore::None => return,
        TrustStore::Claude => {
            let file = claude_config_file(
                &home,
                spec.env_value("CLAUDE_CONFIG_DIR")
                    .as_deref()
                    .map(Path::new),
            );
            (file.clone(), seed_claude_trust(&file, cwd))
        }
        TrustStore::Codex => {
            let file = codex_config_file(
                &home,
                spec.env_value("CODEX_HOME").as_deref().map(Path::new),
            );
            (file.clone(), seed_codex_trust(&file, cwd))
        }
    };
    let detail = match &result {
        Ok(outcome) => json!({"store": store, "outcome": format!("{outcome:?}")}),
        Err(err) => json!({"store": store, "error": err.to_string()}),
    };
    let _ = events.record("lane.trust_store_seeded", None, None, None, detail);
}

/// Keeps `.claw/` out of git through the repository's own exclude file, never a tracked file.
fn exclude_from_git(cwd: &Path) {
    let Ok(out) = std::process::Command::new("git")
        .args(["rev-parse", "--git-path", "info/exclude"])
        .current_dir(cwd)
        .output()
    else {
        return;
    };
    if !out.status.success() {
        return;
    }
    let path = cwd.join(String::from_utf8_lossy(&out.stdout).trim());
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current
        .lines()
        .any(|l| l.trim() == "/.claw/" || l.trim() == ".claw/")
    {
        return;
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut text = current;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(".claw/\n");
    let _ = std::fs::write(&path, text);
}

fn print_event(event: &LaneEvent, format: OutputFormat) {
    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string(event).unwrap_or_default()),
        OutputFormat::Text => {
            let change = match (&event.from, &event.to) {
                (Some(from), Some(to)) => format!("{from} → {to}"),
                (None, Some(to)) => to.to_string(),
                _ => String::new(),
            };
            let why = event
                .evidence
                .as_ref()
                .map(|e| {
                    format!(
                        "  [{} in {}: {:?}]",
                        e.rule,
                        e.region,
                        e.matched.chars().take(80).collect::<String>()
                    )
                })
                .unwrap_or_default();
            let detail = if event.detail.is_null() {
                String::new()
            } else {
                format!(" {}", event.detail)
            };
            println!("#{:<3} {:<28} {change}{detail}{why}", event.seq, event.kind);
        }
    }
}

/// Sends an operator command to the lane running in `lane_dir`.
pub async fn send_operator(
    lane_dir: &Path,
    command: OperatorCommand,
) -> Result<String, CommandError> {
    let socket = lane_dir.join(STATE_DIR).join("control.sock");
    control::send(&socket, &command).await.map_err(|e| {
        CommandError::invalid(
            "lane_not_running",
            format!(
                "no running lane at {} ({e}); is `clawpool run` running there?",
                lane_dir.display()
            ),
        )
    })
}
