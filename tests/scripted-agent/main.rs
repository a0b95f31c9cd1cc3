//! `clawpool-scripted-agent`: a fake interactive coding agent for clawpool's tests and
//! demos.
//!
//! It draws a full-screen TUI the way Claude Code and Codex do — boot dialogs, a
//! transcript, an input box, a spinner while working, permission prompts — and does what a
//! TOML scenario scripts for each prompt (write files, commit, sleep, hang, crash, turn into
//! a shell…). The screen strings and the scenario format are documented in
//! `docs/scripted-agent.md`; detection rules are written against them.
//!
//! ```text
//! clawpool-scripted-agent [--scenario FILE] [--prompt TEXT] [PROMPT...]
//! ```
//!
//! This file owns the command line and the event loop: it waits (`poll`) for stdin, the
//! signal pipe and the app's next deadline, feeds keys and time to [`app::App`], draws its
//! screens, and carries out exits.

mod app;
mod input;
mod prompt_log;
mod scenario;
mod steps;
mod term;
#[cfg(test)]
mod tests;
mod ui;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use app::{App, Control};
use input::{Decoder, ESC_TIMEOUT};
use prompt_log::PromptLog;
use scenario::Scenario;
use term::{Signal, Signals, TermSize, Terminal};
use ui::Renderer;

const USAGE: &str =
    "usage: clawpool-scripted-agent [--scenario FILE] [--resume] [--settings FILE] \
     [--prompt TEXT] [PROMPT...]

  --scenario FILE  the TOML scenario (default: $CLAWPOOL_AGENT_SCENARIO, else built-in)
  --resume         continue the earlier session: the prompts already in the prompt log count
  --settings FILE  Claude Code's settings file: the command hooks its `hook` steps run
  --prompt TEXT    a prompt submitted as soon as the agent is ready (so is PROMPT...)";

/// The command line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Args {
    scenario: Option<PathBuf>,
    prompt: Option<String>,
    resume: bool,
    settings: Option<PathBuf>,
}

/// Parses the arguments after the program name; `Ok(None)` means `--help`.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
    let mut parsed = Args::default();
    let mut positional: Vec<String> = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--scenario" => parsed.scenario = Some(PathBuf::from(value("--scenario")?)),
            "--prompt" => parsed.prompt = Some(value("--prompt")?),
            "--resume" => parsed.resume = true,
            "--settings" => parsed.settings = Some(PathBuf::from(value("--settings")?)),
            "--" => positional.extend(args.by_ref()),
            s if s.starts_with('-') && s.len() > 1 => return Err(format!("unknown option {s}")),
            _ => positional.push(arg),
        }
    }
    if !positional.is_empty() {
        if parsed.prompt.is_some() {
            return Err("give the prompt either with --prompt or as arguments, not both".into());
        }
        parsed.prompt = Some(positional.join(" "));
    }
    Ok(Some(parsed))
}

/// An environment variable, unless unset or empty.
fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn main() {
    std::process::exit(run());
}

/// Everything up to the event loop; returns the exit code. Usage and scenario errors
/// exit 2 before the terminal is touched.
fn run() -> i32 {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("clawpool-scripted-agent: {e}\n{USAGE}");
            return 2;
        }
    };
    let scenario = match args
        .scenario
        .or_else(|| env_path("CLAWPOOL_AGENT_SCENARIO"))
    {
        Some(path) => match Scenario::load(&path) {
            Ok(scenario) => scenario,
            Err(e) => {
                eprintln!("clawpool-scripted-agent: {e}");
                return 2;
            }
        },
        None => Scenario::default(),
    };
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("clawpool-scripted-agent: cannot read the working folder: {e}");
            return 2;
        }
    };
    let log_path = scenario
        .prompt_log
        .clone()
        .or_else(|| env_path("CLAWPOOL_AGENT_PROMPT_LOG"))
        .map(|p| cwd.join(p));
    let terminal = match Terminal::setup() {
        Ok(terminal) => terminal,
        Err(e) => {
            eprintln!("clawpool-scripted-agent: cannot put the terminal in raw mode: {e}");
            return 2;
        }
    };
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            terminal.restore();
            eprintln!("clawpool-scripted-agent: cannot install signal handlers: {e}");
            return 2;
        }
    };
    let log = PromptLog::new(log_path);
    let resumed = if args.resume { log.prompts() } else { 0 };
    if let Some(settings) = args.settings {
        steps::use_settings(settings);
    }
    let app = App::new(
        scenario,
        cwd,
        log,
        args.prompt,
        !terminal.is_tty(),
        Instant::now(),
    )
    .resumed(resumed);
    EventLoop {
        app,
        terminal,
        signals,
        renderer: Renderer::new(),
        size: term::size(),
        drawn_tick: None,
    }
    .run()
}

/// The running agent: the app plus everything that talks to the outside.
struct EventLoop {
    app: App,
    terminal: Terminal,
    signals: Signals,
    renderer: Renderer,
    size: TermSize,
    /// The spinner tick last drawn, to redraw the spinner once per tick.
    drawn_tick: Option<u32>,
}

impl EventLoop {
    fn run(mut self) -> i32 {
        if term::write_out(term::START.as_bytes()).is_err() {
            return self.terminal_gone();
        }
        let mut decoder = Decoder::new();
        let mut last_read = Instant::now();
        let mut stdin_open = true;
        loop {
            let now = Instant::now();
            let control = self.app.advance(now);
            if let Some(code) = self.carry_out(control) {
                return code;
            }
            if !self.draw(now) {
                return self.terminal_gone();
            }

            let mut deadline = self.app.deadline(now);
            if decoder.has_partial() {
                let flush_at = last_read + ESC_TIMEOUT;
                deadline = Some(deadline.map_or(flush_at, |d| d.min(flush_at)));
            }
            let mut fds = [
                libc::pollfd {
                    // A negative descriptor is skipped by poll: stdin after its end.
                    fd: if stdin_open { libc::STDIN_FILENO } else { -1 },
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.signals.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: poll reads and writes exactly the array it is given.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, poll_timeout(deadline, now)) };
            if ready < 0 {
                // EINTR: a signal arrived; its byte is in the pipe for the next round.
                continue;
            }

            for signal in self.signals.drain() {
                match signal {
                    Signal::Resize => {
                        self.size = term::size();
                        self.renderer.invalidate();
                    }
                    Signal::Terminate(number) => {
                        self.leave(false);
                        return 128 + number;
                    }
                }
            }

            let mut keys = Vec::new();
            if fds[0].revents != 0 {
                let mut buf = [0u8; 4096];
                // SAFETY: reads into a live buffer of the stated length. poll said stdin
                // is readable (or at its end), so this does not block.
                let n =
                    unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
                if let Ok(len @ 1..) = usize::try_from(n) {
                    last_read = Instant::now();
                    keys = decoder.feed(&buf[..len]);
                } else if n == 0 || !interrupted() {
                    // A terminal that ends (EOF or EIO) has hung up; a pipe that ends just
                    // means no more keys.
                    if self.terminal.is_tty() {
                        self.leave(false);
                        return 128 + libc::SIGHUP;
                    }
                    stdin_open = false;
                    self.app.stdin_closed();
                }
            }
            if decoder.has_partial() && Instant::now() >= last_read + ESC_TIMEOUT {
                keys.extend(decoder.flush());
            }
            let now = Instant::now();
            for key in keys {
                let control = self.app.key(key, now);
                if let Some(code) = self.carry_out(control) {
                    return code;
                }
            }
        }
    }

    /// Draws the app's screen if anything changed; false when stdout is gone.
    fn draw(&mut self, now: Instant) -> bool {
        let raw = self.app.take_raw();
        if !raw.is_empty() && term::write_out(&raw).is_err() {
            return false;
        }
        let screen = self.app.screen(now, self.size);
        let tick = self.app.spinner_tick(now);
        let force = if tick.is_some() && tick != self.drawn_tick {
            screen.spinner_row
        } else {
            None
        };
        self.drawn_tick = tick;
        let frame = self.renderer.frame(&screen, self.size, force);
        frame.is_empty() || term::write_out(frame.as_bytes()).is_ok()
    }

    /// Does what `control` says; `Some(code)` when the process must exit with it.
    fn carry_out(&mut self, control: Control) -> Option<i32> {
        match control {
            Control::Continue => None,
            Control::Exit { code, goodbye } => {
                if goodbye {
                    self.draw(Instant::now());
                }
                self.leave(goodbye);
                Some(code)
            }
            Control::ShellError { prompt } => Some(self.become_shell(&prompt)),
        }
    }

    /// Restores the terminal and leaves the cursor on a fresh line under the UI.
    fn leave(&mut self, goodbye: bool) {
        let mut out = format!("{}\x1b[{};1H\r\n", term::RESET_MODES, self.size.rows);
        if goodbye {
            out.push_str("Goodbye\r\n");
        }
        let _ = term::write_out(out.as_bytes());
        self.terminal.restore();
    }

    /// The terminal hung up or stdout closed: nothing can be shown any more.
    fn terminal_gone(&mut self) -> i32 {
        self.terminal.restore();
        128 + libc::SIGHUP
    }

    /// `shell_error`: what a shell prints when given the prompt as commands, then a real
    /// interactive shell in this process's place. Returns only if the shell cannot start.
    fn become_shell(&mut self, prompt: &str) -> i32 {
        let _ = term::write_out(format!("{}{}", term::RESET_MODES, term::CLEAR).as_bytes());
        self.terminal.restore();
        // The terminal is cooked again, so `\n` is a full line end.
        let errors: String = prompt
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(|word| format!("bash: {word}: command not found\n"))
            .collect();
        let _ = term::write_out(errors.as_bytes());
        let err = Command::new("/bin/sh").arg("-i").env("PS1", "$ ").exec();
        eprintln!("clawpool-scripted-agent: cannot exec /bin/sh: {err}");
        127
    }
}

/// Whether the last libc call failed with EINTR.
fn interrupted() -> bool {
    std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
}

/// Milliseconds until `deadline` for poll (rounded up, so it never wakes early and spins),
/// or -1 to wait for input only.
fn poll_timeout(deadline: Option<Instant>, now: Instant) -> libc::c_int {
    let Some(deadline) = deadline else {
        return -1;
    };
    let wait = deadline.saturating_duration_since(now);
    let ms = wait.as_millis() + u128::from(wait.subsec_nanos() % 1_000_000 != 0);
    libc::c_int::try_from(ms.min(Duration::from_secs(3600).as_millis())).unwrap_or(libc::c_int::MAX)
}

#[cfg(test)]
mod main_tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Option<Args>, String> {
        parse_args(list.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn command_line_forms() {
        assert_eq!(args(&[]), Ok(Some(Args::default())));
        assert_eq!(args(&["--help"]), Ok(None));
        let parsed = args(&["--scenario", "s.toml", "--prompt", "do it"]).expect("valid");
        assert_eq!(
            parsed,
            Some(Args {
                scenario: Some("s.toml".into()),
                prompt: Some("do it".into()),
                resume: false,
                settings: None,
            })
        );
        let parsed = args(&["--resume", "go on"]).expect("valid");
        assert_eq!(
            parsed,
            Some(Args {
                scenario: None,
                prompt: Some("go on".into()),
                resume: true,
                settings: None,
            })
        );
        let parsed = args(&["--settings", "/l/.claw/hooks.json", "--prompt", "go"]).expect("valid");
        assert_eq!(
            parsed.and_then(|a| a.settings),
            Some("/l/.claw/hooks.json".into())
        );
        let parsed = args(&["--scenario=s.toml", "fix", "the bug"]).expect("valid");
        assert_eq!(
            parsed.and_then(|a| a.prompt).as_deref(),
            Some("fix the bug")
        );
        let parsed = args(&["--", "--not-a-flag"]).expect("valid");
        assert_eq!(
            parsed.and_then(|a| a.prompt).as_deref(),
            Some("--not-a-flag")
        );
        assert!(args(&["--bogus"]).is_err());
        assert!(args(&["--prompt"]).is_err());
        assert!(args(&["--prompt", "a", "b"]).is_err());
    }

    #[test]
    fn poll_timeout_rounds_up() {
        let now = Instant::now();
        assert_eq!(poll_timeout(None, now), -1);
        assert_eq!(poll_timeout(Some(now), now), 0);
        assert_eq!(poll_timeout(Some(now + Duration::from_micros(300)), now), 1);
        assert_eq!(
            poll_timeout(Some(now + Duration::from_millis(100)), now),
            100
        );
    }
}
