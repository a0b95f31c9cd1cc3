//! [`Worker`]: the transport-independent handle to one program in a terminal.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::local::PtyTransport;
use crate::tmux::TmuxTransport;
use crate::{
    Input, ScreenChanges, ScreenHub, ScreenSnapshot, SpawnError, SpawnSpec, TermSize, TmuxError,
};

/// How a worker's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
    /// It is gone but its status could not be read: the tmux server went away, or the pane
    /// never reported its end.
    Lost,
}

impl ExitStatus {
    /// Exited with code 0.
    pub fn success(self) -> bool {
        self == ExitStatus::Exited(0)
    }

    /// The exit code a shell would report: the code, or 128 plus the signal number.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Exited(code) => code,
            ExitStatus::Signaled(signal) => 128 + signal,
            ExitStatus::Lost => 255,
        }
    }

    /// Decodes a `waitpid` status word.
    pub(crate) fn from_wait_status(status: libc::c_int) -> Self {
        if libc::WIFSIGNALED(status) {
            ExitStatus::Signaled(libc::WTERMSIG(status))
        } else {
            ExitStatus::Exited(libc::WEXITSTATUS(status))
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Exited(code) => write!(f, "exit code {code}"),
            ExitStatus::Signaled(signal) => write!(f, "killed by signal {signal}"),
            ExitStatus::Lost => f.write_str("exit status lost"),
        }
    }
}

/// Why an operation on a running worker failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The worker has exited; there is nothing to type into.
    #[error("the worker has exited ({0})")]
    Exited(ExitStatus),
    /// Writing to or resizing the terminal failed.
    #[error("terminal I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// tmux failed.
    #[error(transparent)]
    Tmux(#[from] TmuxError),
}

pub(crate) enum Transport {
    Pty(PtyTransport),
    Tmux(TmuxTransport),
}

/// One program running in a terminal, with its screen.
///
/// Cloning gives another handle to the same worker. A PTY worker is killed (its whole process
/// group) when its last handle is dropped; a tmux worker keeps running.
#[derive(Clone)]
pub struct Worker {
    pub(crate) hub: Arc<ScreenHub>,
    pub(crate) transport: Arc<Transport>,
    /// Set (once) after the process exited and its remaining output was drained.
    pub(crate) exit: watch::Receiver<Option<ExitStatus>>,
}

impl Worker {
    /// Starts a worker in a pseudo-terminal owned by this process. It leads its own process
    /// group; when this process exits, the terminal closes and the worker gets SIGHUP.
    pub async fn spawn_pty(spec: SpawnSpec) -> Result<Worker, SpawnError> {
        crate::local::spawn(spec).await
    }

    /// The worker's process id, while known.
    pub fn pid(&self) -> Option<u32> {
        match self.transport.as_ref() {
            Transport::Pty(pty) => Some(pty.pid()),
            Transport::Tmux(tmux) => tmux.pid(),
        }
    }

    /// For a tmux worker: the private server's socket name and the session name, which a
    /// person can attach to with `tmux -L <socket> attach -t <session>`.
    pub fn tmux_session(&self) -> Option<(&str, &str)> {
        match self.transport.as_ref() {
            Transport::Pty(_) => None,
            Transport::Tmux(tmux) => Some((tmux.socket_name(), tmux.session_name())),
        }
    }

    /// What the screen shows now.
    pub fn snapshot(&self) -> ScreenSnapshot {
        self.hub.snapshot()
    }

    /// The lines that scrolled off the top, oldest first.
    pub fn scrollback(&self) -> Vec<String> {
        self.hub.scrollback()
    }

    /// The screen with colours, as escape sequences that redraw it on another terminal.
    pub fn contents_formatted(&self) -> Vec<u8> {
        self.hub.contents_formatted()
    }

    /// Screen-changed notifications from now on.
    pub fn changes(&self) -> ScreenChanges {
        self.hub.subscribe()
    }

    /// Types text or presses a key.
    pub async fn send(&self, input: &Input) -> Result<(), WorkerError> {
        if let Some(status) = self.exit_status() {
            return Err(WorkerError::Exited(status));
        }
        match self.transport.as_ref() {
            Transport::Pty(pty) => pty.send(&self.hub, input).await,
            Transport::Tmux(tmux) => tmux.send(&self.hub, input).await,
        }
    }

    /// Resizes the terminal (the application gets SIGWINCH).
    pub async fn resize(&self, size: TermSize) -> Result<(), WorkerError> {
        match self.transport.as_ref() {
            Transport::Pty(pty) => pty.resize(size)?,
            Transport::Tmux(tmux) => tmux.resize(size).await?,
        }
        self.hub.resize(size);
        Ok(())
    }

    /// The exit status, once the worker has exited and its output has been drained.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// Waits for the worker to exit; the screen then holds everything it wrote.
    pub async fn wait(&self) -> ExitStatus {
        let mut exit = self.exit.clone();
        loop {
            if let Some(status) = *exit.borrow_and_update() {
                return status;
            }
            if exit.changed().await.is_err() {
                // The transport task ended without a status: only possible when the runtime
                // is shutting down, so the worker is as good as lost.
                return exit.borrow().unwrap_or(ExitStatus::Lost);
            }
        }
    }

    /// Stops the worker: SIGTERM to its whole process group, up to `grace` to exit, then
    /// SIGKILL to the group. Returns the exit status.
    pub async fn stop(&self, grace: Duration) -> ExitStatus {
        if let Some(status) = self.exit_status() {
            return status;
        }
        match self.transport.as_ref() {
            Transport::Pty(pty) => pty.signal_group(libc::SIGTERM),
            Transport::Tmux(tmux) => tmux.signal_group(libc::SIGTERM),
        }
        if let Ok(status) = tokio::time::timeout(grace, self.wait()).await {
            return status;
        }
        match self.transport.as_ref() {
            Transport::Pty(pty) => pty.signal_group(libc::SIGKILL),
            Transport::Tmux(tmux) => tmux.signal_group(libc::SIGKILL),
        }
        self.wait().await
    }
}
