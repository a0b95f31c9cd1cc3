//! `clawpool-model-server`: a scripted stand-in for a model provider, so the real
//! coding agents (Claude Code, Codex, opencode, gemini-cli, Qwen Code, aider) can run offline in end-to-end tests with fake
//! keys and answer exactly what a test scripted.
//!
//! It speaks the Anthropic Messages API (`POST /v1/messages`, streamed or not), the
//! OpenAI Responses API (`POST /v1/responses`), the OpenAI Chat Completions API
//! (`POST /v1/chat/completions`) and the Gemini API's generate-content
//! (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`), serves the script's turns to the
//! agent's task requests in order, answers side requests (title generation) without
//! using up turns, and logs every request as a JSON line. It listens on loopback
//! only, on a port the OS picks, and announces it on stdout (and in `--port-file`).
//!
//! ```text
//! clawpool-model-server [--script FILE] [--record FILE] [--port-file FILE] [--side-text TEXT]
//!                       [--every-request-is-a-task] [--timings FILE]
//! ```

mod anthropic;
mod chat;
mod gemini;
mod http;
mod openai;
mod record;
mod request;
mod script;
mod server;
mod side;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use anyhow::{Context, bail};
use tokio::net::TcpListener;

use crate::record::Recorder;
use crate::script::Script;
use crate::server::Server;

const USAGE: &str = "\
usage: clawpool-model-server [--script FILE] [--record FILE] [--port-file FILE] [--side-text TEXT]
                             [--every-request-is-a-task] [--timings FILE]

  --script FILE     JSON list of turns served to task requests in order
                    (text, tool_use, hang, refuse, error; see script.rs)
  --record FILE     append every request as a JSON line (truncated at start)
  --port-file FILE  also write the chosen port number to FILE
  --side-text TEXT  reply to side requests such as title generation (default: Scripted task)
  --every-request-is-a-task
                    serve script turns to requests without tools too (aider offers none)
  --timings FILE    append, for every task request answered, when its answer's last byte was
                    written: {\"seq\", \"turn\", \"last_byte_ms\"} (epoch ms), for benchmarks

Listens on 127.0.0.1 on an OS-chosen port and prints `listening on 127.0.0.1:PORT`.";

/// The parsed command line.
#[derive(Default)]
struct Options {
    script: Option<PathBuf>,
    record: Option<PathBuf>,
    port_file: Option<PathBuf>,
    side_text: Option<String>,
    every_request_is_a_task: bool,
    timings: Option<PathBuf>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> anyhow::Result<Options> {
    let mut options = Options::default();
    while let Some(arg) = args.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .with_context(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--script" => options.script = Some(value()?.into()),
            "--record" => options.record = Some(value()?.into()),
            "--port-file" => options.port_file = Some(value()?.into()),
            "--timings" => options.timings = Some(value()?.into()),
            "--side-text" => options.side_text = Some(value()?),
            "--every-request-is-a-task" if inline.is_none() => {
                options.every_request_is_a_task = true;
            }
            _ => bail!("unknown argument {arg:?}\n\n{USAGE}"),
        }
    }
    Ok(options)
}

/// Writes the port so that a reader polling for the file never sees it half
/// written: write a sibling temp file, then rename it into place.
fn write_port_file(path: &Path, port: u16) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{port}\n"))
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

fn main() -> ExitCode {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
        .and_then(|runtime| runtime.block_on(run()));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // `{:#}` prints the context chain on one line, without the backtrace
            // anyhow's Debug form adds when RUST_BACKTRACE is set.
            eprintln!("clawpool-model-server: {err:#}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let options = parse_args(std::env::args().skip(1))?;
    let script = match &options.script {
        Some(path) => Script::load(path)?,
        None => Script::empty(),
    };
    let recorder = options
        .record
        .as_deref()
        .map(Recorder::create)
        .transpose()?;

    // Loopback only: this server answers anything with fake data and must never be
    // reachable from another machine.
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .context("binding 127.0.0.1:0")?;
    let addr = listener.local_addr().context("reading the bound address")?;

    if let Some(path) = &options.port_file {
        write_port_file(path, addr.port())?;
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {addr}").context("writing to stdout")?;
    // Tests read this line through a pipe, where stdout is block-buffered.
    stdout.flush().context("flushing stdout")?;
    drop(stdout);

    let server = Arc::new(Server {
        script,
        recorder,
        side_text: options
            .side_text
            .unwrap_or_else(|| "Scripted task".to_owned()),
        every_request_is_a_task: options.every_request_is_a_task,
        seq: AtomicU64::new(0),
        timings: options
            .timings
            .as_deref()
            .map(Recorder::create)
            .transpose()?,
    });
    server::serve(listener, server).await;
    Ok(())
}
