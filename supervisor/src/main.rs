//! `clawpool`: a worker-pool supervisor for interactive CLI coding agents.
//!
//! The binary is glue. It parses flags without touching the system ([`cli`]), resolves them
//! into what the library crates need, runs the command, and turns every failure into one
//! clear message (or, with `--output-format json`, one JSON document with a `kind`) and a
//! non-zero exit ([`output`]).

mod cli;
mod demo;
mod mirror;
mod output;
mod run_one;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command};
use crate::output::CommandError;

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    let inputs = matches
        .subcommand_matches("run-one")
        .map(cli::scripted_inputs)
        .unwrap_or_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CLAWPOOL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
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
        }
    });
    // Input forwarding may be parked in a blocking read of stdin; do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(err) => output::report(&err, format),
    }
}
