//! Hooks: configured commands run on selected lane events, with the event's JSON on stdin.
//!
//! This module owns running one hook safely. A hook runs in its own process group, gets the
//! event JSON on its stdin (which is then closed), and is given a time limit: when the limit
//! passes, the whole group is killed and the hook is reported as timed out. A hook that exits
//! before reading all of its stdin is not a failure (many notifiers only need to run). Nothing
//! a hook does — failing, hanging, flooding stderr — can hold up a lane: the supervisor runs
//! [`run_hook`] in a task of its own and only reports the [`HookOutcome`].
//!
//! [`EventSelector`] says which event kinds a hook receives (`"lane.blocked"`, `"lane.*"`,
//! `"*"`).

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::time::Instant;

/// The time limit of a hook when none is configured.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of a hook's stderr is kept (its end).
pub const STDERR_TAIL_BYTES: usize = 4096;

/// After a hook's process exits, how long its stderr may still be read (a process it left
/// behind may hold it open).
const STDERR_DRAIN: Duration = Duration::from_millis(200);

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookCommand {
    /// A program and its arguments, run directly (`command = ["notify", "--to", "ops"]`).
    Argv(Vec<String>),
    /// A shell command line, run with `/bin/sh -c` (`command = "notify-send lane"`).
    Shell(String),
}

/// Which event kinds a hook receives: patterns where `*` matches any run of characters
/// (`lane.blocked`, `lane.*`, `lane.recovery.*`, `*`). An empty selector receives nothing
/// (the hook runs only when a policy `notify` rule names it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventSelector {
    patterns: Vec<String>,
}

impl EventSelector {
    /// A selector from patterns: each is non-empty and made of lowercase letters, digits, `_`,
    /// `.` and `*`.
    pub fn new<S: Into<String>>(patterns: impl IntoIterator<Item = S>) -> Result<Self, HookError> {
        let patterns: Vec<String> = patterns.into_iter().map(Into::into).collect();
        for pattern in &patterns {
            let ok = !pattern.is_empty()
                && pattern
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.*".contains(c));
            if !ok {
                return Err(HookError::BadPattern {
                    pattern: pattern.clone(),
                });
            }
        }
        Ok(Self { patterns })
    }

    /// The patterns.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// An event of `kind` is selected.
    pub fn matches(&self, kind: &str) -> bool {
        self.patterns
            .iter()
            .any(|p| glob(p.as_bytes(), kind.as_bytes()))
    }
}

/// `*` matches any run of bytes; everything else matches itself.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// A configured hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// Its name (policy `notify` rules name it).
    pub name: String,
    /// What to run.
    pub command: HookCommand,
    /// Its time limit; then its process group is killed.
    pub timeout: Duration,
    /// The event kinds it receives.
    pub events: EventSelector,
}

/// The hooks in `hooks` that receive events of `kind`, in order.
pub fn hooks_for<'a>(hooks: &'a [HookSpec], kind: &'a str) -> impl Iterator<Item = &'a HookSpec> {
    hooks.iter().filter(move |h| h.events.matches(kind))
}

/// How a hook run went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOutcome {
    /// Its exit status code, when it exited by itself.
    pub exit: Option<i32>,
    /// The signal that ended it, if one did (`SIGKILL` after a timeout).
    pub signal: Option<i32>,
    /// It ran past its time limit and its process group was killed.
    pub timed_out: bool,
    /// How long it ran.
    pub duration: Duration,
    /// The end of its stderr (at most [`STDERR_TAIL_BYTES`]), lossily decoded.
    pub stderr_tail: String,
    /// Writing its stdin failed for a reason other than the hook not reading it all (which is
    /// not a failure). Reported, never fatal.
    pub stdin_error: Option<String>,
}

impl HookOutcome {
    /// It exited 0 within its time limit.
    pub fn succeeded(&self) -> bool {
        !self.timed_out && self.exit == Some(0)
    }

    /// One line for people: `exited 0 in 12ms`, `exited 3 in 40ms: <stderr's last line>`,
    /// `timed out after 10.0s (process group killed)`.
    pub fn describe(&self) -> String {
        let took = if self.duration < Duration::from_secs(1) {
            format!("{}ms", self.duration.as_millis())
        } else {
            format!("{:.1}s", self.duration.as_secs_f64())
        };
        let mut line = if self.timed_out {
            format!("timed out after {took} (process group killed)")
        } else if let Some(code) = self.exit {
            format!("exited {code} in {took}")
        } else if let Some(signal) = self.signal {
            format!("killed by signal {signal} after {took}")
        } else {
            format!("ended after {took}")
        };
        if let Some(last) = self
            .stderr_tail
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            && !self.succeeded()
        {
            line.push_str(": ");
            line.push_str(last.trim());
        }
        line
    }
}

/// Why a hook could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The command has no program.
    #[error("hook {name}: the command is empty")]
    EmptyCommand {
        /// The hook.
        name: String,
    },
    /// The program could not be started (not found, not executable, …).
    #[error("hook {name}: cannot start {program:?}: {source}")]
    Spawn {
        /// The hook.
        name: String,
        /// The program.
        program: String,
        /// The error.
        source: std::io::Error,
    },
    /// Waiting for the hook's process failed.
    #[error("hook {name}: waiting for it failed: {source}")]
    Wait {
        /// The hook.
        name: String,
        /// The error.
        source: std::io::Error,
    },
    /// An event pattern has characters other than lowercase letters, digits, `_`, `.`, `*`.
    #[error("bad event pattern {pattern:?} (write e.g. \"lane.blocked\" or \"lane.*\")")]
    BadPattern {
        /// The pattern.
        pattern: String,
    },
}

/// Runs `spec` with `input` (the event's JSON) on its stdin and waits for it, at most its
/// time limit. The hook runs in its own process group; on timeout the whole group is killed
/// (`SIGKILL`) and reaped. An error means it could not be started; everything after that is in
/// the [`HookOutcome`].
pub async fn run_hook(spec: &HookSpec, input: &[u8]) -> Result<HookOutcome, HookError> {
    let (program, args): (&str, Vec<&str>) = match &spec.command {
        HookCommand::Argv(argv) => match argv.split_first() {
            Some((program, args)) => (program, args.iter().map(String::as_str).collect()),
            None => {
                return Err(HookError::EmptyCommand {
                    name: spec.name.clone(),
                });
            }
        },
        HookCommand::Shell(line) => ("/bin/sh", vec!["-c", line.as_str()]),
    };
    let started = Instant::now();
    let deadline = started + spec.timeout;
    let mut child = Command::new(program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| HookError::Spawn {
            name: spec.name.clone(),
            program: program.to_owned(),
            source,
        })?;
    let pgid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());

    let writer = child.stdin.take().map(|mut stdin| {
        let input = input.to_vec();
        tokio::spawn(async move {
            let written = stdin.write_all(&input).await;
            drop(stdin);
            match written {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Some(e.to_string()),
                _ => None,
            }
        })
    });
    let tail = Arc::new(Mutex::new(Vec::new()));
    let reader = child.stderr.take().map(|mut stderr| {
        let tail = Arc::clone(&tail);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                tail.extend_from_slice(&buf[..n]);
                let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                tail.drain(..excess);
            }
        })
    });

    let (status, timed_out) = match tokio::time::timeout_at(deadline, child.wait()).await {
        Ok(status) => (status, false),
        Err(_) => {
            if let Some(pgid) = pgid {
                // SAFETY: killpg only sends a signal. The group's leader is our child, not yet
                // reaped (we have not waited for it), so its pid — the group id — cannot have
                // been reused.
                unsafe {
                    libc::killpg(pgid, libc::SIGKILL);
                }
            }
            (child.wait().await, true)
        }
    };
    let status = status.map_err(|source| HookError::Wait {
        name: spec.name.clone(),
        source,
    })?;
    let duration = started.elapsed();

    let stdin_error = match writer {
        Some(task) if task.is_finished() => task.await.ok().flatten(),
        Some(task) => {
            // The hook is over without reading all of its input: not a failure.
            task.abort();
            None
        }
        None => None,
    };
    if let Some(mut task) = reader {
        let drain_until = Instant::now() + STDERR_DRAIN;
        if tokio::time::timeout_at(drain_until, &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
    let stderr_tail = {
        let tail = tail.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&tail).into_owned()
    };
    Ok(HookOutcome {
        exit: status.code(),
        signal: status.signal(),
        timed_out,
        duration,
        stderr_tail,
        stdin_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: HookCommand, timeout: Duration) -> HookSpec {
        HookSpec {
            name: "test-hook".into(),
            command,
            timeout,
            events: EventSelector::new(["lane.*"]).expect("pattern"),
        }
    }

    fn shell(line: &str, timeout: Duration) -> HookSpec {
        spec(HookCommand::Shell(line.to_owned()), timeout)
    }

    /// Waits (at most 5 s, returning as soon as it happens) for `pid` to terminate; true if it
    /// is gone or dead. Uses a pidfd, so it wakes on the exit itself.
    fn terminates(pid: libc::pid_t) -> bool {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        }
        let fd = fd as libc::c_int;
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; then the fd we own is closed.
        let ready = unsafe {
            let ready = libc::poll(&mut poll, 1, 5_000);
            libc::close(fd);
            ready
        };
        ready == 1
    }

    #[tokio::test]
    async fn a_hook_gets_the_event_on_stdin_and_succeeds() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("event.json");
        let event = br#"{"seq":7,"kind":"lane.blocked","lane":"fix-login"}"#;
        let hook = spec(
            HookCommand::Argv(vec![
                "/bin/sh".into(),
                "-c".into(),
                "cat > \"$1\"".into(),
                "hook".into(),
                out.display().to_string(),
            ]),
            Duration::from_secs(20),
        );
        let outcome = run_hook(&hook, event).await.expect("runs");
        assert!(outcome.succeeded(), "{outcome:?}");
        assert_eq!(outcome.exit, Some(0));
        assert_eq!(std::fs::read(&out).expect("written"), event);
        assert!(
            outcome.describe().starts_with("exited 0 in "),
            "{}",
            outcome.describe()
        );
    }

    #[tokio::test]
    async fn a_non_zero_exit_is_reported_with_stderr() {
        let outcome = run_hook(
            &shell(
                "echo 'slack: 401 unauthorized' >&2; exit 3",
                Duration::from_secs(20),
            ),
            b"{}",
        )
        .await
        .expect("runs");
        assert!(!outcome.succeeded());
        assert_eq!((outcome.exit, outcome.timed_out), (Some(3), false));
        assert_eq!(outcome.stderr_tail, "slack: 401 unauthorized\n");
        assert!(
            outcome.describe().ends_with(": slack: 401 unauthorized"),
            "{}",
            outcome.describe()
        );
    }

    #[tokio::test]
    async fn a_hanging_hook_is_killed_with_its_group_at_the_timeout() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pid_file = dir.path().join("child.pid");
        let line = format!("sleep 300 & echo $! > '{}'; wait", pid_file.display());
        let timeout = Duration::from_secs(2);
        let outcome = run_hook(&shell(&line, timeout), b"{}").await.expect("runs");
        assert!(outcome.timed_out, "{outcome:?}");
        assert!(!outcome.succeeded());
        assert_eq!(outcome.signal, Some(libc::SIGKILL));
        assert!(outcome.duration >= timeout, "{outcome:?}");
        assert!(outcome.duration < Duration::from_secs(30), "{outcome:?}");
        let pid: libc::pid_t = std::fs::read_to_string(&pid_file)
            .expect("the hook wrote its child's pid")
            .trim()
            .parse()
            .expect("a pid");
        assert!(terminates(pid), "the hook's child {pid} outlived the hook");
        let described = outcome.describe();
        assert!(
            described.starts_with("timed out after ")
                && described.ends_with("(process group killed)"),
            "{described}"
        );
    }

    #[tokio::test]
    async fn a_hook_that_never_reads_its_stdin_is_not_a_failure() {
        let input = vec![b'x'; 1 << 20];
        let outcome = run_hook(
            &spec(
                HookCommand::Argv(vec!["true".into()]),
                Duration::from_secs(20),
            ),
            &input,
        )
        .await
        .expect("runs");
        assert!(outcome.succeeded(), "{outcome:?}");
        assert_eq!(outcome.stdin_error, None);
    }

    #[tokio::test]
    async fn a_hook_that_cannot_start_is_an_error() {
        let err = run_hook(
            &spec(
                HookCommand::Argv(vec!["/nonexistent/clawpool-hook".into()]),
                DEFAULT_HOOK_TIMEOUT,
            ),
            b"{}",
        )
        .await
        .expect_err("no such program");
        assert!(matches!(err, HookError::Spawn { .. }), "{err}");
        let err = run_hook(
            &spec(HookCommand::Argv(vec![]), DEFAULT_HOOK_TIMEOUT),
            b"{}",
        )
        .await
        .expect_err("empty");
        assert_eq!(err.to_string(), "hook test-hook: the command is empty");
    }

    #[test]
    fn selectors_pick_event_kinds() {
        let selector = EventSelector::new(["lane.blocked", "lane.recovery.*"]).expect("patterns");
        assert!(selector.matches("lane.blocked"));
        assert!(selector.matches("lane.recovery.exhausted"));
        assert!(!selector.matches("lane.failed"));
        assert!(!selector.matches("lane.blocked.extra"));
        let all_lane = EventSelector::new(["lane.*"]).expect("pattern");
        assert!(all_lane.matches("lane.commit.created"));
        assert!(!all_lane.matches("supervisor.started"));
        assert!(
            EventSelector::new(["*"])
                .expect("pattern")
                .matches("anything")
        );
        assert!(
            EventSelector::new(["lane.*.created"])
                .expect("pattern")
                .matches("lane.commit.created")
        );
        assert!(!EventSelector::default().matches("lane.blocked"));
        assert!(EventSelector::new(["Lane.Blocked"]).is_err());
        assert!(EventSelector::new([""]).is_err());
        let hooks = [
            HookSpec {
                name: "a".into(),
                command: HookCommand::Shell("true".into()),
                timeout: DEFAULT_HOOK_TIMEOUT,
                events: selector,
            },
            HookSpec {
                name: "b".into(),
                command: HookCommand::Shell("true".into()),
                timeout: DEFAULT_HOOK_TIMEOUT,
                events: all_lane,
            },
        ];
        let names = |kind| {
            hooks_for(&hooks, kind)
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("lane.blocked"), ["a", "b"]);
        assert_eq!(names("lane.ready"), ["b"]);
    }
}
