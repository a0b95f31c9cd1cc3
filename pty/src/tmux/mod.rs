//! The tmux transport: workers in tmux sessions on a private server.
//!
//! A [`TmuxServer`] is one tmux server on its own socket (`tmux -L <name>`, never the user's
//! default server) plus one control-mode client attached to a hidden session,
//! `clawpool-control`. Each worker gets a session of its own, which a person can attach to; its
//! window is also linked into the control session so its output reaches the control client as
//! `%output` notifications. The worker's program is started only after that link exists (the
//! session starts on a placeholder that `respawn-pane` replaces), so the raw log and the screen
//! see its output from the first byte.
//!
//! Workers keep running when this process exits. [`TmuxServer::attach`] adopts one again and
//! rebuilds its screen from a single capture. Panes are created with `remain-on-exit` so the
//! exit status survives the process; the exit itself is noticed through a pidfd on the pane's
//! process, not by polling.

mod control;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::watch;

use self::control::{ControlClient, quote};
use crate::local::{kill_group, pidfd_exit_status, pidfd_open, register};
use crate::rawlog::{RawLog, RawLogConfig};
use crate::screen::{ScreenModel, ScreenOptions};
use crate::spec::{DEFAULT_DRAIN_TIMEOUT, resolve_program};
use crate::worker::{Transport, TransportFuture};
use crate::{
    DEFAULT_SCROLLBACK_LINES, ExitStatus, Input, ScreenHub, SpawnError, SpawnSpec, TermSize,
    TmuxError, Worker, WorkerError,
};

/// The hidden session the control client attaches to.
pub const CONTROL_SESSION: &str = "clawpool-control";

/// How long [`TmuxServer::kill_server`] waits for the server process, and then each of its
/// panes' processes, to exit after `kill-server`.
const SERVER_EXIT_DEADLINE: Duration = Duration::from_secs(1);

/// How long to wait for tmux to report a pane dead after its process exited, before calling
/// the exit status lost (a process that escaped the group can keep the terminal open).
const DEAD_PANE_DEADLINE: Duration = Duration::from_secs(5);

/// Where a private tmux server lives.
#[derive(Debug, Clone)]
pub struct TmuxConfig {
    /// The socket name, passed as `tmux -L <name>`.
    pub socket_name: String,
    /// The folder tmux keeps its sockets in (`TMUX_TMPDIR`); `None` uses tmux's default.
    /// Tests set it so they never share a socket folder with a person's tmux.
    pub tmpdir: Option<PathBuf>,
    /// The tmux program: a name looked up in `PATH`, or a path.
    pub program: OsString,
}

impl TmuxConfig {
    /// A server named `socket_name` in tmux's default socket folder.
    pub fn new(socket_name: impl Into<String>) -> Self {
        Self {
            socket_name: socket_name.into(),
            tmpdir: None,
            program: "tmux".into(),
        }
    }
}

/// A private tmux server with its control-mode client.
#[derive(Clone)]
pub struct TmuxServer {
    inner: Arc<ServerInner>,
}

struct ServerInner {
    config: TmuxConfig,
    tmux: PathBuf,
    control: ControlClient,
    /// The server process, for the SIGCHLD nudge in [`dead_status`].
    server_pid: Option<u32>,
}

/// Options for adopting a running worker with [`TmuxServer::attach`].
#[derive(Debug, Clone, Default)]
pub struct AttachOptions {
    /// Where to keep the raw byte stream from now on.
    pub raw_log: Option<RawLogConfig>,
    /// How many scrolled-off lines the screen keeps (0 means the default).
    pub scrollback_lines: usize,
}

/// The tmux program `config` names, once its socket name is checked.
fn checked_program(config: &TmuxConfig) -> Result<PathBuf, TmuxError> {
    validate_name("socket", &config.socket_name, true)?;
    resolve_program(
        &config.program,
        &std::env::temp_dir(),
        std::env::var_os("PATH").as_deref(),
    )
    .map_err(|_| TmuxError::NotInstalled {
        program: config.program.to_string_lossy().into_owned(),
    })
}

impl TmuxServer {
    /// Connects to the server, starting it (with the control session) when it is not running.
    pub async fn connect(config: TmuxConfig) -> Result<Self, TmuxError> {
        let tmux = checked_program(&config)?;
        let base = |tmux: &PathBuf| base_command(tmux, &config);
        let started = base(&tmux)
            .args([
                "new-session",
                "-d",
                "-s",
                CONTROL_SESSION,
                "-x",
                "80",
                "-y",
                "24",
            ])
            .args(["--", "sleep", "2147483647"])
            .output()
            .await
            .map_err(|source| TmuxError::Io {
                what: "starting the tmux server",
                source,
            })?;
        let stderr = String::from_utf8_lossy(&started.stderr);
        if !started.status.success() && !stderr.contains("duplicate session") {
            return Err(TmuxError::Command {
                command: "new-session".into(),
                message: stderr.trim().to_owned(),
            });
        }
        let control = ControlClient::attach(base(&tmux), CONTROL_SESSION).await?;
        // Keep a dead pane (and with it the exit status) until clawpool has read it.
        control.command("set-option -g remain-on-exit on").await?;
        let server_pid = control
            .command(&format!("display-message -p {}", quote("#{pid}")))
            .await
            .ok()
            .and_then(|reply| parse_pid(&reply, "display-message").ok());
        Ok(Self {
            inner: Arc::new(ServerInner {
                config,
                tmux,
                control,
                server_pid,
            }),
        })
    }

    /// Connects to the server only when it is already running: `None` when there is none, so
    /// that looking for a lane's session never leaves a new, empty server behind.
    pub async fn connect_existing(config: TmuxConfig) -> Result<Option<Self>, TmuxError> {
        let tmux = checked_program(&config)?;
        let probed = base_command(&tmux, &config)
            .args(["list-sessions", "-F", "#{session_name}"])
            .output()
            .await
            .map_err(|source| TmuxError::Io {
                what: "looking for the tmux server",
                source,
            })?;
        if !probed.status.success() {
            // tmux says "no server running" or "error connecting to …" (a socket left behind).
            return Ok(None);
        }
        Self::connect(config).await.map(Some)
    }

    /// The socket name (`tmux -L <name>`).
    pub fn socket_name(&self) -> &str {
        &self.inner.config.socket_name
    }

    /// Starts a worker in a new session named `session`.
    pub async fn spawn(&self, session: &str, spec: SpawnSpec) -> Result<Worker, SpawnError> {
        validate_name("session", session, false)?;
        let program = spec.resolve()?;
        let raw_log = open_raw_log(spec.raw_log.clone())?;
        let control = &self.inner.control;
        let created = control
            .command(&format!(
                "new-session -d -s {} -x {} -y {} -P -F {} -- sleep 2147483647",
                quote(session),
                spec.size.cols,
                spec.size.rows,
                quote("#{pane_id} #{window_id}"),
            ))
            .await
            .map_err(|err| match err {
                TmuxError::Command { message, .. } if message.contains("duplicate session") => {
                    TmuxError::SessionExists {
                        socket: self.socket_name().to_owned(),
                        session: session.to_owned(),
                    }
                }
                other => other,
            })?;
        let (pane, window) = parse_ids(&created, "new-session")?;
        let hub = ScreenHub::start(
            ScreenModel::new(ScreenOptions {
                size: spec.size,
                scrollback_lines: spec.scrollback_lines,
                answer_queries: false,
            }),
            raw_log,
        );
        control.register(&pane, &window, &hub);
        match self.start_program(&pane, &program, &spec).await {
            Ok(pid) => Ok(self.worker(session, pane, Some(pid), hub, spec.drain_timeout)),
            Err(err) => {
                control.unregister(&pane);
                hub.finish();
                let _ = control
                    .command(&format!("kill-session -t {}", quote(session)))
                    .await;
                Err(err.into())
            }
        }
    }

    async fn start_program(
        &self,
        pane: &str,
        program: &std::path::Path,
        spec: &SpawnSpec,
    ) -> Result<u32, TmuxError> {
        let control = &self.inner.control;
        control
            .command(&format!(
                "link-window -d -s {} -t {}:",
                quote(pane),
                CONTROL_SESSION
            ))
            .await?;
        let mut argv: Vec<OsString> = Vec::new();
        let mut line = format!(
            "respawn-pane -k -t {} -c {}",
            pane,
            quote_os(spec.cwd.as_os_str())
        );
        // tmux sets `TMUX` and `TMUX_PANE` in every pane: the program is started through
        // `env`, which removes them (and, with `clean_env`, everything else tmux adds: `env
        // -i` is the only way to start clean) and then becomes the program, same pid.
        argv.push("env".into());
        for name in crate::spec::TMUX_VARS {
            argv.push("-u".into());
            argv.push(name.into());
        }
        let env = spec
            .env
            .iter()
            .filter(|(key, _)| !crate::spec::TMUX_VARS.iter().any(|name| key == name));
        if spec.clean_env {
            argv.push("-i".into());
            argv.extend(env.map(|(k, v)| {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                kv
            }));
        } else {
            for (key, value) in env {
                let mut kv = key.clone();
                kv.push("=");
                kv.push(value);
                line.push_str(&format!(" -e {}", quote_os(&kv)));
            }
        }
        argv.push(program.as_os_str().to_owned());
        argv.extend(spec.args.iter().cloned());
        line.push_str(" --");
        for arg in &argv {
            line.push(' ');
            line.push_str(&quote_os(arg));
        }
        control.command(&line).await?;
        let reply = control
            .command(&format!(
                "display-message -p -t {pane} {}",
                quote("#{pane_pid}")
            ))
            .await?;
        parse_pid(&reply, "display-message")
    }

    /// Adopts the worker running in `session` (started by an earlier process): its screen is
    /// rebuilt from one capture, and its output flows from then on.
    pub async fn attach(
        &self,
        session: &str,
        options: AttachOptions,
    ) -> Result<Worker, SpawnError> {
        validate_name("session", session, false)?;
        let control = &self.inner.control;
        let panes = control
            .command(&format!(
                "list-panes -t {}: -F {}",
                quote(session),
                quote("#{pane_id} #{window_id} #{pane_pid} #{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{alternate_on}")
            ))
            .await
            .map_err(|err| match err {
                TmuxError::Command { .. } => TmuxError::NoSuchSession {
                    socket: self.socket_name().to_owned(),
                    session: session.to_owned(),
                },
                other => other,
            })?;
        let fields: Vec<&str> = panes
            .first()
            .map(|line| line.split(' ').collect())
            .unwrap_or_default();
        let [
            pane,
            window,
            pid,
            width,
            height,
            cursor_x,
            cursor_y,
            alternate,
        ] = fields[..]
        else {
            return Err(TmuxError::Unexpected {
                command: "list-panes",
                reply: panes.join("\n"),
            }
            .into());
        };
        let number = |text: &str| text.parse::<u16>().unwrap_or(0);
        let size = TermSize {
            rows: number(height),
            cols: number(width),
        };
        let scrollback_lines = match options.scrollback_lines {
            0 => DEFAULT_SCROLLBACK_LINES,
            n => n,
        };
        let screen_options = ScreenOptions {
            size,
            scrollback_lines,
            answer_queries: false,
        };
        let hub = ScreenHub::start(
            ScreenModel::new(screen_options),
            open_raw_log(options.raw_log)?,
        );
        let linked = control
            .command(&format!(
                "list-windows -t {CONTROL_SESSION} -F {}",
                quote("#{window_id}")
            ))
            .await?;
        if !linked.iter().any(|w| w == window) {
            control
                .command(&format!("link-window -d -s {pane} -t {CONTROL_SESSION}:"))
                .await?;
        }
        control.register(pane, window, &hub);
        let cursor = (number(cursor_y), number(cursor_x));
        let alternate = alternate == "1";
        let rebuild_hub = Arc::clone(&hub);
        let rebuild: control::InlineHook = Box::new(move |reply| {
            if let Ok(rows) = reply {
                let mut model = ScreenModel::new(screen_options);
                model.feed(&redraw_bytes(rows, cursor, alternate));
                rebuild_hub.reset(model);
            }
        });
        control
            .command_with(&format!("capture-pane -p -e -t {pane}"), Some(rebuild))
            .await?;
        let pid = pid.parse().ok();
        Ok(self.worker(session, pane.to_owned(), pid, hub, DEFAULT_DRAIN_TIMEOUT))
    }

    /// Kills one worker session (its process gets SIGHUP from its closed terminal).
    pub async fn kill_session(&self, session: &str) -> Result<(), TmuxError> {
        validate_name("session", session, false)?;
        self.inner
            .control
            .command(&format!("kill-session -t {}", quote(session)))
            .await
            .map(drop)
    }

    /// The worker sessions on this server (every session but the control session).
    pub async fn sessions(&self) -> Result<Vec<String>, TmuxError> {
        let names = self
            .inner
            .control
            .command(&format!("list-sessions -F {}", quote("#{session_name}")))
            .await?;
        Ok(names.into_iter().filter(|s| s != CONTROL_SESSION).collect())
    }

    /// Kills the whole server and every worker on it, and returns once the server process is
    /// gone.
    pub async fn kill_server(&self) -> Result<(), TmuxError> {
        let mut closed = self.inner.control.closed();
        // Opened before the kill: a pid cannot be reused while its pidfd is held. The panes'
        // processes (the control session's placeholder among them) end with the server, a
        // moment after it.
        let server = self
            .inner
            .server_pid
            .and_then(|pid| pidfd_open(pid).and_then(register).ok());
        let panes: Vec<_> = self
            .inner
            .control
            .command(&format!("list-panes -a -F {}", quote("#{pane_pid}")))
            .await
            .unwrap_or_default()
            .iter()
            .filter_map(|pid| pid.trim().parse().ok())
            .filter_map(|pid| pidfd_open(pid).and_then(register).ok())
            .collect();
        // Control clients of supervisors that were killed are still attached, and nobody reads
        // them: the server would wait for them before exiting. Ours is the only live one.
        let ours = self.inner.control.pid();
        let stale = self
            .inner
            .control
            .command(&format!(
                "list-clients -t {CONTROL_SESSION} -F {}",
                quote("#{client_pid}")
            ))
            .await
            .unwrap_or_default();
        for pid in stale
            .iter()
            .filter_map(|pid| pid.trim().parse::<u32>().ok())
        {
            if Some(pid) != ours
                && let Ok(pid) = libc::pid_t::try_from(pid)
            {
                // SAFETY: kill(2) on a pid tmux reports as one of its clients.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        match self.inner.control.command("kill-server").await {
            Ok(_) | Err(TmuxError::ControlClosed) => {}
            Err(err) => return Err(err),
        }
        let _ = closed.wait_for(|closed| *closed).await;
        // Whoever checks for leftover processes next must not find the server still there.
        if let Some(server) = &server {
            let _ = tokio::time::timeout(SERVER_EXIT_DEADLINE, server.readable()).await;
        }
        for pane in &panes {
            let _ = tokio::time::timeout(SERVER_EXIT_DEADLINE, pane.readable()).await;
        }
        // tmux leaves its socket file behind when the server exits.
        match std::fs::remove_file(self.socket_path()) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(TmuxError::Io {
                what: "removing the tmux socket",
                source: err,
            }),
            _ => Ok(()),
        }
    }

    /// Where the server's socket is: `$TMUX_TMPDIR/tmux-<uid>/<name>`, as tmux itself places it.
    pub fn socket_path(&self) -> PathBuf {
        let dir = self
            .inner
            .config
            .tmpdir
            .clone()
            .or_else(|| std::env::var_os("TMUX_TMPDIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        dir.join(format!("tmux-{uid}"))
            .join(&self.inner.config.socket_name)
    }

    /// A tmux command for this server, for callers that need one outside the control client
    /// (`attach` for a person, for instance).
    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.inner.tmux);
        cmd.arg("-L")
            .arg(&self.inner.config.socket_name)
            .env_remove("TMUX");
        if let Some(dir) = &self.inner.config.tmpdir {
            cmd.env("TMUX_TMPDIR", dir);
        }
        cmd
    }

    fn worker(
        &self,
        session: &str,
        pane: String,
        pid: Option<u32>,
        hub: Arc<ScreenHub>,
        drain_timeout: Duration,
    ) -> Worker {
        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(watch_exit(
            Arc::clone(&self.inner),
            pane.clone(),
            pid,
            Arc::clone(&hub),
            drain_timeout,
            exit_tx,
        ));
        Worker {
            hub,
            transport: Arc::new(TmuxTransport {
                server: Arc::clone(&self.inner),
                session: session.to_owned(),
                pane,
                pid,
            }),
            exit: exit_rx,
        }
    }
}

pub(crate) struct TmuxTransport {
    server: Arc<ServerInner>,
    session: String,
    pane: String,
    pid: Option<u32>,
}

impl Transport for TmuxTransport {
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn tmux_session(&self) -> Option<(&str, &str)> {
        Some((&self.server.config.socket_name, &self.session))
    }

    fn send<'a>(
        &'a self,
        hub: &'a ScreenHub,
        input: &'a Input,
    ) -> TransportFuture<'a, Result<(), WorkerError>> {
        Box::pin(self.send_input(hub, input))
    }

    fn resize(&self, size: TermSize) -> TransportFuture<'_, Result<(), WorkerError>> {
        Box::pin(async move {
            self.server
                .control
                .command(&format!(
                    "resize-window -t {} -x {} -y {}",
                    self.pane, size.cols, size.rows
                ))
                .await
                .map(drop)
                .map_err(WorkerError::from)
        })
    }

    fn signal_group(&self, signal: libc::c_int) {
        if let Some(pid) = self.pid {
            kill_group(pid, signal);
        }
    }
}

impl TmuxTransport {
    async fn send_input(&self, hub: &ScreenHub, input: &Input) -> Result<(), WorkerError> {
        let control = &self.server.control;
        let pane = &self.pane;
        match input {
            Input::Key(key) => {
                control
                    .command(&format!("send-keys -t {pane} {}", key.tmux_name()))
                    .await?;
            }
            Input::Bytes(bytes) if !bytes.is_empty() => {
                let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                control
                    .command(&format!("send-keys -H -t {pane} {}", hex.join(" ")))
                    .await?;
            }
            Input::Bytes(_) => {}
            Input::Text(text) if !hub.bracketed_paste() && !text.contains(['\n', '\r']) => {
                control
                    .command(&format!("send-keys -l -t {pane} -- {}", quote(text)))
                    .await?;
            }
            Input::Text(text) => {
                // A paste, so tmux wraps it in bracketed-paste markers when the application
                // asked for them, exactly as a person's terminal would.
                let buffer = format!("clawpool-{}", pane.trim_start_matches('%'));
                control
                    .command(&format!("set-buffer -b {buffer} -- {}", quote(text)))
                    .await?;
                control
                    .command(&format!("paste-buffer -p -d -b {buffer} -t {pane}"))
                    .await?;
            }
        }
        Ok(())
    }
}

/// Waits for the pane's process to exit, then for tmux to mark the pane dead, then for its
/// last output to arrive, then publishes the exit status.
async fn watch_exit(
    server: Arc<ServerInner>,
    pane: String,
    pid: Option<u32>,
    hub: Arc<ScreenHub>,
    drain_timeout: Duration,
    exit_tx: watch::Sender<Option<ExitStatus>>,
) {
    let mut closed = server.control.closed();
    let pidfd = pid.and_then(|pid| pidfd_open(pid).and_then(register).ok());
    if let (Some(pid), Some(pidfd)) = (pid, &pidfd) {
        tokio::select! {
            _ = pidfd.readable() => {
                // Anything left in the worker's process group (a grandchild holding the
                // terminal open) goes with it, or the pane would never be reported dead.
                kill_group(pid, libc::SIGKILL);
            }
            _ = closed.wait_for(|closed| *closed) => {}
        }
    }
    let status = dead_status(&server, &pane, pidfd.as_ref()).await;
    drain(&hub, drain_timeout).await;
    server.control.unregister(&pane);
    hub.finish();
    let _ = exit_tx.send(Some(status));
}

/// tmux queues a pane's output to control clients apart from command replies, so the last
/// `%output` can arrive after the reply that says the pane is dead. There is no marker for
/// "that was all", so wait until the output has been quiet for a moment, at most
/// `drain_timeout`.
async fn drain(hub: &ScreenHub, drain_timeout: Duration) {
    const QUIET: Duration = Duration::from_millis(40);
    let deadline = tokio::time::Instant::now() + drain_timeout;
    loop {
        let fed = hub.chunks_fed();
        let until = (tokio::time::Instant::now() + QUIET).min(deadline);
        tokio::time::sleep_until(until).await;
        if hub.chunks_fed() == fed || tokio::time::Instant::now() >= deadline {
            return;
        }
    }
}

/// The pane's exit status: from the kernel through the pidfd when it keeps one (Linux 6.15+),
/// else from tmux once it has reaped the process.
async fn dead_status(
    server: &ServerInner,
    pane: &str,
    pidfd: Option<&tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
) -> ExitStatus {
    let query = format!(
        "display-message -p -t {pane} {}",
        quote("#{pane_dead} #{pane_dead_status} #{pane_dead_signal}")
    );
    let deadline = tokio::time::Instant::now() + DEAD_PANE_DEADLINE;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(status) = pidfd.and_then(pidfd_exit_status) {
            return status;
        }
        let Ok(reply) = server.control.command(&query).await else {
            return ExitStatus::Lost;
        };
        let line = reply.first().map(String::as_str).unwrap_or("");
        let mut fields = line.split(' ');
        let dead = fields.next() == Some("1");
        let code = fields.next().and_then(|s| s.parse().ok());
        let signal = fields.next().and_then(|s| s.parse().ok());
        match (dead, code, signal) {
            (true, Some(code), _) => return ExitStatus::Exited(code),
            (true, None, Some(signal)) => return ExitStatus::Signaled(signal),
            _ if tokio::time::Instant::now() >= deadline => return ExitStatus::Lost,
            (true, None, None) => {
                // The pane is closed but tmux has not reaped its process: tmux 3.3 misses a
                // SIGCHLD now and then and leaves the zombie until the next one. Send it one;
                // its handler reaps every exited child.
                if let Some(server) = server.server_pid {
                    // SAFETY: sending a signal has no memory-safety preconditions.
                    unsafe { libc::kill(server as libc::pid_t, libc::SIGCHLD) };
                }
            }
            _ => {}
        }
        // tmux learns of the exit from its own SIGCHLD, which can land just after ours.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Bytes that redraw a captured screen (rows with SGR attributes) on a blank model.
fn redraw_bytes(rows: &[String], cursor: (u16, u16), alternate: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    if alternate {
        bytes.extend_from_slice(b"\x1b[?1049h");
    }
    bytes.extend_from_slice(b"\x1b[H\x1b[2J");
    for (i, row) in rows.iter().enumerate() {
        bytes.extend_from_slice(format!("\x1b[{};1H", i + 1).as_bytes());
        bytes.extend_from_slice(row.as_bytes());
        bytes.extend_from_slice(b"\x1b[0m");
    }
    bytes.extend_from_slice(format!("\x1b[{};{}H", cursor.0 + 1, cursor.1 + 1).as_bytes());
    bytes
}

fn base_command(tmux: &PathBuf, config: &TmuxConfig) -> Command {
    let mut cmd = Command::new(tmux);
    // `-f /dev/null`: a person's ~/.tmux.conf (base-index, hooks, key tables) must not
    // change how workers are started or read.
    cmd.arg("-L")
        .arg(&config.socket_name)
        .args(["-f", "/dev/null"])
        .env_remove("TMUX");
    if let Some(dir) = &config.tmpdir {
        cmd.env("TMUX_TMPDIR", dir);
    }
    cmd
}

fn open_raw_log(config: Option<RawLogConfig>) -> Result<Option<RawLog>, SpawnError> {
    config
        .map(RawLog::open)
        .transpose()
        .map_err(|source| SpawnError::Io {
            what: "opening the raw terminal log",
            source,
        })
}

fn validate_name(what: &'static str, name: &str, allow_dot: bool) -> Result<(), TmuxError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || (allow_dot && c == '.'));
    if ok {
        Ok(())
    } else {
        Err(TmuxError::InvalidName {
            what,
            name: name.to_owned(),
        })
    }
}

fn quote_os(text: &std::ffi::OsStr) -> String {
    quote(&text.to_string_lossy())
}

fn parse_ids(reply: &[String], command: &'static str) -> Result<(String, String), TmuxError> {
    let line = reply.first().map(String::as_str).unwrap_or("");
    match line.split_once(' ') {
        Some((pane, window)) if pane.starts_with('%') && window.starts_with('@') => {
            Ok((pane.to_owned(), window.to_owned()))
        }
        _ => Err(TmuxError::Unexpected {
            command,
            reply: line.to_owned(),
        }),
    }
}

fn parse_pid(reply: &[String], command: &'static str) -> Result<u32, TmuxError> {
    let line = reply.first().map(String::as_str).unwrap_or("");
    line.trim().parse().map_err(|_| TmuxError::Unexpected {
        command,
        reply: line.to_owned(),
    })
}
