//! `clawpool`: a worker-pool supervisor for interactive CLI coding agents.
//!
//! The binary is glue. It parses flags without touching the system ([`cli`]), resolves them
//! into what the library crates need, runs the command, and turns every failure into one
//! clear message (or, with `--output-format json`, one JSON document with a `kind`) and a
//! non-zero exit ([`output`]).

mod board;
mod cells;
mod checks;
mod cli;
mod daemon;
mod demo;
mod doctor;
mod explain_cmd;
mod gc;
mod handoff_cmd;
mod init;
mod known_repos;
mod loaded;
mod mcp;
mod mirror;
mod notifying;
mod operator_cmd;
mod output;
mod packet_cmd;
mod permissions_cmd;
mod policy_cmd;
mod progress;
mod publish_cmd;
mod run_lane;
mod run_one;
mod spawn;
mod state_cmd;
mod stream_cmd;
mod ui;
mod ui_log;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use clawpool_pool::supervisor_lock::{LockHolder, lock_path, supervisor_lock_holder};

use crate::cli::{Cli, Command};
use crate::output::CommandError;

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    raise_open_file_limit();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    let inputs = matches
        .subcommand_matches("run-one")
        .map(run_one::scripted_inputs)
        .unwrap_or_default();
    // The dashboard draws on the terminal: its log lines go to a file (`ui_log`).
    let (writer, ansi) = match &cli.command {
        Command::Ui(args) => (ui_log::writer(args), false),
        _ => (
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr),
            true,
        ),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CLAWPOOL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(writer)
        .with_ansi(ansi)
        .init();
    let format = cli.command.output_format();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            return output::report(&CommandError::io("starting the async runtime", err), format);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::RunOne(args) => run_one::run(args, inputs).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Run(args) => run_lane(args).await,
            Command::Trust(args) => {
                operator(&args, clawpool_lane::handshake::OperatorCommand::Trust).await
            }
            Command::Answer(args) if args.remember.is_some() => {
                permissions_cmd::run_answer_remembering(&args).await
            }
            Command::Answer(args) => {
                let command = clawpool_lane::handshake::OperatorCommand::Answer {
                    choice: args.choice.clone(),
                };
                operator(&args.lane, command).await
            }
            Command::Send(args) => {
                let command = clawpool_lane::handshake::OperatorCommand::Send { text: args.text };
                let config = loaded::input(&args.config);
                operator_cmd::operate(&args.lane, command, args.output_format, config).await
            }
            Command::Stop(args) => {
                operator(&args, clawpool_lane::handshake::OperatorCommand::Stop).await
            }
            Command::Restart(args) => {
                let command = clawpool_lane::handshake::OperatorCommand::Restart(
                    clawpool_lane::handshake::RestartRequest {
                        by: "operator".into(),
                        resume: args.resume,
                        redeliver: args.redeliver,
                    },
                );
                operator(&args.lane, command).await
            }
            Command::MergeForward(args) => checks::run_merge_forward(args).await,
            Command::Verify(args) => checks::run_verify(args).await,
            Command::Explain(args) => {
                let loaded = loaded::load(&args.config, None)?;
                match (&args.lane, &args.screen) {
                    (Some(lane), _) => explain_cmd::run_explain_lane(
                        &loaded.profiles,
                        lane,
                        args.agent.as_deref(),
                        args.output_format,
                    ),
                    (None, Some(screen)) => explain_cmd::run_explain(
                        &loaded.profiles,
                        args.agent.as_deref().unwrap_or_default(),
                        &explain_cmd::load_screen(screen, args.size)?,
                        &screen.display().to_string(),
                        None,
                        args.output_format,
                    ),
                    (None, None) => Err(CommandError::invalid(
                        "invalid_argument",
                        "give a LANE or --screen FILE",
                    )),
                }
            }
            Command::Config(cli::ConfigArgs {
                command: cli::ConfigCommand::Show(args),
            }) => {
                let loaded = loaded::load(&args.config, None)?;
                loaded::show(&loaded, args.output_format);
                Ok(ExitCode::SUCCESS)
            }
            Command::Init(args) => init::run(&args),
            Command::Budget(args) => {
                let usd = clawpool_lanes::payload::Usd(args.usd);
                let command = clawpool_lane::handshake::OperatorCommand::Budget { usd };
                let lane = cli::LaneArgs {
                    lane: args.lane,
                    output_format: args.output_format,
                };
                operator(&lane, command).await
            }
            Command::Spawn(args) => {
                let loaded = loaded::load(&args.config, Some(&args.repo))?;
                match spawn::run(&args, loaded).await? {
                    spawn::Spawned::Ran(code) => Ok(code),
                    spawn::Spawned::HandOver {
                        repo,
                        packet,
                        start,
                        refused,
                    } => match daemon::hand_over(&repo, &args, &packet, start).await {
                        Ok(code) => Ok(code),
                        Err(err) => Err(refused.unwrap_or(err)),
                    },
                }
            }
            Command::Adopt(args) => {
                let loaded = loaded::load(&args.config, Some(&args.repo))?;
                spawn::adopt(args, loaded).await
            }
            Command::Gc(args) => {
                let code = gc::run(&args).await?;
                // A server no lane runs on goes too, unless a supervisor may be about to start
                // one there.
                if let Ok(repo) = clawpool_worktree::Repo::open(&args.repo)
                    && supervisor_lock_holder(&lock_path(&repo))
                        .is_ok_and(|holder| matches!(holder, LockHolder::Free))
                {
                    clawpool_pool::gc::end_idle_tmux_server(&repo).await;
                }
                Ok(code)
            }
            Command::Daemon(args) => {
                let loaded = loaded::load(&args.config, Some(&args.repo))?;
                daemon::run(args, loaded).await
            }
            Command::Board(args) => {
                board::run_board(&args.repo, args.all, args.watch, args.output_format).await
            }
            Command::Ui(args) => ui::run(args).await,
            Command::Events(args) => match &args.lane {
                Some(lane) if !args.all => board::run_events(lane, args.follow).await,
                _ => {
                    stream_cmd::run_events_all(
                        &args.repo,
                        args.follow,
                        args.since,
                        args.output_format,
                    )
                    .await
                }
            },
            Command::Wait(args) => stream_cmd::run_wait(&args).await,
            Command::Hook(args) => {
                // A hook must never break the agent: a failure is recorded for the lane (when
                // its environment names where) and said on stderr, and the exit is 0.
                let env = |key: &str| std::env::var(key).ok();
                let delivered = match &args.payload {
                    // Codex's notify program runs with the TUI's terminal as its stdin: an
                    // argument payload leaves it alone.
                    Some(payload) => {
                        clawpool_lane::control::deliver(&args.event, payload.as_bytes(), env).await
                    }
                    None => {
                        clawpool_lane::control::deliver(&args.event, tokio::io::stdin(), env).await
                    }
                };
                match delivered {
                    // The agent reads its answer (a PermissionRequest's decision) on stdout.
                    Ok(Some(answer)) => println!("{answer}"),
                    Ok(None) => {}
                    Err(error) => eprintln!("clawpool hook {}: not delivered: {error}", args.event),
                }
                Ok(ExitCode::SUCCESS)
            }
            Command::Attach(args) => board::run_attach(&args.lane).await,
            Command::State(args) => state_cmd::run_state(&args.lane, args.output_format),
            Command::Packet(cli::PacketArgs {
                command: cli::PacketCommand::Validate(args),
            }) => {
                let loaded = loaded::load(&args.config, Some(&args.repo))?;
                packet_cmd::run_packet_validate(
                    &loaded.profiles,
                    &args.file,
                    &args.repo,
                    args.output_format,
                )
            }
            Command::Policy(cli::PolicyArgs {
                command: cli::PolicyCommand::Explain(args),
            }) => policy_cmd::run_explain(&args),
            Command::Policy(cli::PolicyArgs {
                command: cli::PolicyCommand::Check(args),
            }) => policy_cmd::run_check(&args),
            Command::Recover(args) => policy_cmd::run_recover(&args).await,
            Command::Permissions(cli::PermissionsArgs {
                command: cli::PermissionsCommand::Check(args),
            }) => permissions_cmd::run_check(&args),
            Command::Permissions(cli::PermissionsArgs {
                command: cli::PermissionsCommand::Explain(args),
            }) => permissions_cmd::run_explain(&args),
            Command::Doctor(args) => {
                let loaded = loaded::load(&args.config, Some(&args.repo))?;
                doctor::run_doctor(&loaded, &args)
            }
            Command::Diff(args) => handoff_cmd::run_diff(&args),
            Command::Land(args) => handoff_cmd::run_land(&args).await,
            Command::Mcp(args) => mcp::run(&args).await,
            Command::Push(args) => publish_cmd::run_push(&args).await,
            Command::Pr(args) => publish_cmd::run_pr(&args).await,
        }
    });
    // Hooks still running (each ends by its timeout) are not cut off by the exit.
    runtime.block_on(clawpool_lane::hooks::drain());
    // Input forwarding may be parked in a blocking read of stdin; do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(err) => output::report(&err, format),
    }
}

async fn run_lane(args: cli::RunArgs) -> Result<ExitCode, CommandError> {
    let prompt = match (&args.prompt, &args.prompt_file) {
        (Some(prompt), _) => Some(prompt.clone()),
        (None, Some(file)) => Some(std::fs::read_to_string(file).map_err(|e| {
            CommandError::invalid(
                "prompt_file_not_found",
                format!("cannot read prompt file {}: {e}", file.display()),
            )
        })?),
        (None, None) => None,
    };
    let loaded = loaded::load(&args.config, Some(&args.cwd))?;
    let profile = loaded
        .profiles
        .get(&args.agent)
        .map_err(|e| CommandError::invalid("unknown_agent", e.to_string()))?
        .clone();
    run_lane::run(run_lane::RunRequest {
        profile,
        roots: loaded.roots.clone(),
        settings: loaded.settings,
        cwd: args.cwd,
        lane: args.lane,
        prompt,
        transport: args.transport,
        format: args.output_format,
        env: args.env,
        size: args.size,
        policy: std::sync::Arc::clone(&loaded.policy),
        sandbox: clawpool_pool::sandboxing::lane_request(
            &loaded.config,
            None,
            loaded.policy.permissions().default_profile,
        ),
        prices: std::sync::Arc::clone(&loaded.prices),
    })
    .await
}

/// Sends `command` to the lane and reports its verdict (exit 0 only when the lane did it).
async fn operator(
    args: &cli::LaneArgs,
    command: clawpool_lane::handshake::OperatorCommand,
) -> Result<ExitCode, CommandError> {
    // Only a `send` that becomes a follow-up reads the configuration.
    let config = clawpool_pool::config::ConfigInput::of_this_process(None);
    operator_cmd::operate(&args.lane, command, args.output_format, config).await
}

/// `clawpool board | head` closes stdout early; `println!` then panics. SIGPIPE stays ignored
/// (a tmux control client or a lane's socket going away must never kill the supervisor), so
/// a failed print to stdout ends the process quietly with the shell's SIGPIPE status instead.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// Every lane holds a handful of descriptors (its terminal, a pidfd, its logs, its control
/// socket); a few hundred lanes need more than the usual soft limit of 1024, so take the hard
/// limit.
fn raise_open_file_limit() {
    // SAFETY: getrlimit/setrlimit read and write one rlimit struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
