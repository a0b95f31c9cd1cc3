//! `clawpool run`: one lane in the foreground, driven by the lane engine, its events printed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clawpool_agents::profiles::Profile;
use clawpool_agents::trust::TrustRoots;
use clawpool_lane::drive::{
    LaneJob, RUN_SOCKET, STATE_DIR, Start, Terminal, drive, exclude_from_git, preflight,
};
use clawpool_lane::handshake::{Settings, check_prompt};
use clawpool_lane::interrupt::Interrupt;
use clawpool_lanes::{LaneEvent, LaneState};
use clawpool_pty::{TmuxConfig, TmuxServer};
use serde_json::json;

use crate::cli::{OutputFormat, TransportKind};
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
    pub policy: Arc<clawpool_recovery::Policy>,
    /// The sandbox the agent runs in (`docs/sandbox.md`), if any.
    pub sandbox: Option<clawpool_lane::sandbox::SandboxRequest>,
    /// What the lane's usage is priced with.
    pub prices: Arc<clawpool_lanes::cost::PriceTable>,
}

/// `clawpool run`: one lane in the foreground, in the folder given.
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
    let name = match &request.lane {
        Some(name) => name.clone(),
        None => cwd
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "lane".into()),
    };
    // One name rule everywhere: the name becomes a tmux session, a registry folder and part of
    // a worker id, so `a/b` or `..` must not get through here when packets refuse them.
    if !clawpool_lanes::is_valid_lane_name(&name) {
        let what = match &request.lane {
            Some(_) => format!("--lane {name:?}"),
            None => format!("the folder's name {name:?} (the default lane name)"),
        };
        return Err(CommandError::invalid(
            "invalid_lane_name",
            format!(
                "{what} is not a lane name: it must match ^[a-z0-9][a-z0-9._-]{{0,62}}$, as in \
                 task packets{}",
                if request.lane.is_none() {
                    "; name the lane with --lane"
                } else {
                    ""
                }
            ),
        ));
    }
    let decision = request
        .roots
        .decide(&cwd)
        .map_err(|e| CommandError::invalid("invalid_lane_path", e.to_string()))?;
    let format = request.format;
    let terminal = match request.transport {
        TransportKind::Pty => Terminal::Pty,
        TransportKind::Tmux => {
            Terminal::Tmux(TmuxServer::connect(TmuxConfig::new(RUN_SOCKET)).await?)
        }
    };
    let job = LaneJob {
        name: name.clone(),
        dir: cwd.clone(),
        profile: std::sync::Arc::new(request.profile),
        trusted: decision.is_trusted(),
        settings: request.settings,
        prompt: request.prompt,
        terminal: terminal.clone(),
        env: request.env,
        size: request.size,
        events_path: cwd.join(STATE_DIR).join(clawpool_worktree::layout::EVENTS),
        terminal_log: cwd.join(STATE_DIR).join("terminal.log"),
        branch: None,
        base: None,
        on_event: Box::new(move |event| print_event(event, format, None)),
        checks: None,
        policy: request.policy,
        prices: request.prices,
        budget_usd: None,
        interrupt: Interrupt::listen()
            .map_err(|e| CommandError::io("listening for SIGINT and SIGTERM", e))?,
        lock: None,
        sandbox: request.sandbox,
    };
    preflight(&job)?;
    exclude_from_git(&cwd);
    if let (Terminal::Tmux(server), OutputFormat::Text) = (&terminal, format) {
        eprintln!(
            "clawpool: watch or take over with: tmux -L {} attach -t lane-{name}",
            server.socket_name()
        );
    }
    let result = drive(job, Start::Spawn).await?;
    terminal.close_if_unused().await;
    if let Some((signal, state)) = result.interrupted {
        match format {
            OutputFormat::Text => eprintln!(
                "clawpool: interrupted by {}: the agent was stopped and the lane recorded as {state}; exit {}",
                signal.name(),
                signal.exit_code()
            ),
            OutputFormat::Json => println!(
                "{}",
                json!({"interrupted": {"signal": signal.name(), "exit": signal.exit_code()}, "state": state})
            ),
        }
        return Ok(ExitCode::from(signal.exit_code()));
    }
    let Some(outcome) = result.outcome else {
        return Ok(ExitCode::from(1));
    };
    match format {
        OutputFormat::Text => {
            eprintln!("clawpool: lane ended {}", outcome.state);
            if let Some(err) = &result.degraded {
                eprintln!("clawpool: warning: the lane's state file is degraded: {err}");
            }
        }
        OutputFormat::Json => println!(
            "{}",
            json!({"outcome": outcome, "state_file_degraded": result.degraded})
        ),
    }
    Ok(if outcome.state == LaneState::Finished {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Prints one event: a JSON line, or a line for people (prefixed with the lane's name when
/// several lanes share the output).
pub fn print_event(event: &LaneEvent, format: OutputFormat, lane_column: Option<usize>) {
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
            let lane = lane_column
                .map(|width| format!("{:<width$} ", event.lane))
                .unwrap_or_default();
            println!(
                "{lane}#{:<3} {:<28} {change}{detail}{why}",
                event.seq, event.kind
            );
        }
    }
}
