//! `clawpool run-one`: one worker in a terminal, shown live or as snapshots, with the exit
//! code of the worker.

use std::process::ExitCode;
use std::time::Duration;

use clawpool_pty::{Input, Key, SpawnSpec, TmuxConfig, TmuxServer, Worker};
use serde_json::json;

use crate::cli::{OutputFormat, RunOneArgs, TransportKind};
use crate::mirror;
use crate::output::CommandError;

/// One step of scripted input, in command-line order.
#[derive(Debug, Clone)]
pub enum ScriptedInput {
    Text(String),
    Keys(String),
}

/// How long a worker gets to exit after SIGTERM when clawpool is interrupted.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The tmux server run-one uses: `tmux -L clawpool-run-one attach -t <session>` to watch.
pub const RUN_ONE_SOCKET: &str = "clawpool-run-one";

pub async fn run(args: RunOneArgs, inputs: Vec<ScriptedInput>) -> Result<ExitCode, CommandError> {
    let inputs = resolve_inputs(&inputs)?;
    let live = !args.snapshots && mirror::can_mirror();
    let size = args
        .size
        .or_else(|| live.then(mirror::terminal_size).flatten())
        .unwrap_or_default();
    let (program, program_args) = args
        .command
        .split_first()
        .ok_or_else(|| CommandError::invalid("invalid_argument", "no program given after --"))?;
    let mut spec = SpawnSpec::new(program, &args.cwd).args(program_args);
    spec.size = size;
    spec.clean_env = args.clean_env;
    spec.env = args.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    spec.raw_log = args.raw_log.clone().map(clawpool_pty::RawLogConfig::new);
    run_worker(spec, args.transport, live, args.output_format, inputs).await
}

/// Starts the worker, shows it, waits for it, and cleans up after it.
pub async fn run_worker(
    spec: SpawnSpec,
    transport: TransportKind,
    live: bool,
    format: OutputFormat,
    inputs: Vec<Input>,
) -> Result<ExitCode, CommandError> {
    let (worker, tmux) = match transport {
        TransportKind::Pty => (Worker::spawn_pty(spec).await?, None),
        TransportKind::Tmux => {
            let server = TmuxServer::connect(TmuxConfig::new(RUN_ONE_SOCKET)).await?;
            let session = format!("run-{}", std::process::id());
            let worker = server.spawn(&session, spec).await?;
            eprintln!(
                "clawpool: watch or take over with: tmux -L {RUN_ONE_SOCKET} attach -t {session}"
            );
            (worker, Some((server, session)))
        }
    };
    if !inputs.is_empty() {
        tokio::spawn(send_when_drawn(worker.clone(), inputs));
    }
    let shown = tokio::select! {
        shown = show(&worker, live, format) => shown,
        _ = tokio::signal::ctrl_c() => {
            worker.stop(STOP_GRACE).await;
            Ok(())
        }
    };
    let status = worker.wait().await;
    if let Some((server, session)) = tmux {
        cleanup_tmux(&server, &session).await;
    }
    shown.map_err(|err| CommandError::io("showing the worker's screen", err))?;
    match format {
        OutputFormat::Text => eprintln!("clawpool: worker ended: {status}"),
        OutputFormat::Json => println!(
            "{}",
            json!({"exit": {"code": status.code(), "status": status.to_string()}})
        ),
    }
    Ok(ExitCode::from(
        u8::try_from(status.code()).unwrap_or(u8::MAX),
    ))
}

async fn show(worker: &Worker, live: bool, format: OutputFormat) -> std::io::Result<()> {
    if live {
        mirror::mirror(worker).await
    } else {
        mirror::print_snapshots(worker, format).await
    }
}

/// Waits for the first non-empty screen, then sends the scripted inputs in order.
async fn send_when_drawn(worker: Worker, inputs: Vec<Input>) {
    let mut changes = worker.changes();
    while worker.snapshot().text().trim().is_empty() {
        if !changes.changed().await {
            return;
        }
    }
    for input in &inputs {
        if worker.send(input).await.is_err() {
            return;
        }
    }
}

async fn cleanup_tmux(server: &TmuxServer, session: &str) {
    let _ = server.kill_session(session).await;
    if server
        .sessions()
        .await
        .map(|s| s.is_empty())
        .unwrap_or(false)
    {
        let _ = server.kill_server().await;
    }
}

/// Turns --send-text/--keys into inputs, rejecting unknown key names before anything starts.
pub fn resolve_inputs(inputs: &[ScriptedInput]) -> Result<Vec<Input>, CommandError> {
    let mut resolved = Vec::new();
    for input in inputs {
        match input {
            ScriptedInput::Text(text) => resolved.push(Input::Text(text.clone())),
            ScriptedInput::Keys(keys) => {
                for name in keys.split(',').map(str::trim).filter(|k| !k.is_empty()) {
                    resolved.push(Input::Key(name.parse::<Key>()?));
                }
            }
        }
    }
    Ok(resolved)
}

/// `--send-text` and `--keys` in the order they were given on the command line.
pub fn scripted_inputs(matches: &clap::ArgMatches) -> Vec<ScriptedInput> {
    let mut inputs: Vec<(usize, ScriptedInput)> = Vec::new();
    for (id, make) in [
        (
            "send_text",
            ScriptedInput::Text as fn(String) -> ScriptedInput,
        ),
        ("keys", ScriptedInput::Keys),
    ] {
        if let (Some(values), Some(indices)) =
            (matches.get_many::<String>(id), matches.indices_of(id))
        {
            inputs.extend(indices.zip(values.cloned().map(make)));
        }
    }
    inputs.sort_by_key(|(index, _)| *index);
    inputs.into_iter().map(|(_, input)| input).collect()
}
