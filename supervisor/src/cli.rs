//! Command-line flags: parsed and checked here without touching the system.

use std::path::PathBuf;

use clap::{ArgMatches, Args, Parser, Subcommand, ValueEnum};
use clawpool_pty::TermSize;

/// A worker-pool supervisor for interactive CLI coding agents.
#[derive(Debug, Parser)]
#[command(name = "clawpool", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start one worker in a terminal, show its screen, and exit with its status.
    RunOne(RunOneArgs),
    /// Run the scripted agent in a throwaway git repository and show its screen.
    Demo(DemoArgs),
}

impl Command {
    pub fn output_format(&self) -> OutputFormat {
        match self {
            Command::RunOne(args) => args.output_format,
            Command::Demo(args) => args.output_format,
        }
    }
}

/// Which terminal a worker runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportKind {
    /// A pseudo-terminal owned by this process.
    Pty,
    /// A session on a private tmux server (`tmux -L clawpool-run-one`), which a person can attach to.
    Tmux,
}

/// How results and errors are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    /// For people.
    #[default]
    Text,
    /// One JSON document per screen snapshot and per error (JSON lines on stdout).
    Json,
}

#[derive(Debug, Args)]
pub struct RunOneArgs {
    /// The folder the worker starts in.
    #[arg(long)]
    pub cwd: PathBuf,
    /// The terminal to run it in.
    #[arg(long, value_enum, default_value_t = TransportKind::Pty)]
    pub transport: TransportKind,
    /// Print a snapshot of the screen each time it changes instead of mirroring it live.
    #[arg(long)]
    pub snapshots: bool,
    /// Terminal size as COLSxROWS (default: your terminal's size when mirroring, else 120x40).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<TermSize>,
    /// Set an environment variable for the worker (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Start the worker with only the variables given by --env.
    #[arg(long)]
    pub clean_env: bool,
    /// Append the worker's raw output to this file.
    #[arg(long)]
    pub raw_log: Option<PathBuf>,
    /// Type this text once the worker has drawn its first screen (repeatable, in order with --keys).
    #[arg(long = "send-text", value_name = "TEXT")]
    pub send_text: Vec<String>,
    /// Press these keys, comma-separated (Enter, Tab, Esc, Up, Down, Left, Right, Backspace,
    /// C-c, C-d, 0-9), once the worker has drawn its first screen (repeatable).
    #[arg(long = "keys", value_name = "KEY[,KEY...]")]
    pub keys: Vec<String>,
    /// Output format for snapshots and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The terminal to run the scripted agent in.
    #[arg(long, value_enum, default_value_t = TransportKind::Pty)]
    pub transport: TransportKind,
    /// Print snapshots instead of mirroring the screen live.
    #[arg(long)]
    pub snapshots: bool,
    /// Output format for snapshots and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

fn parse_size(text: &str) -> Result<TermSize, String> {
    let (cols, rows) = text
        .split_once('x')
        .ok_or_else(|| format!("size {text:?} is not COLSxROWS, e.g. 120x40"))?;
    let number = |n: &str| {
        n.parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("size {text:?}: {n:?} is not a positive number"))
    };
    Ok(TermSize {
        cols: number(cols)?,
        rows: number(rows)?,
    })
}

fn parse_env(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// `--send-text` and `--keys` in the order they were given on the command line.
pub fn scripted_inputs(matches: &ArgMatches) -> Vec<crate::run_one::ScriptedInput> {
    use crate::run_one::ScriptedInput;
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
