//! [`Worker`]: the transport-independent handle to one program in a terminal.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::WorkerError;
use crate::exit::ExitStatus;
use crate::{Input, ScreenChanges, ScreenHub, ScreenSnapshot, TermSize};

/// A future a transport returns (boxed: the worker holds its transport as a trait object).
pub(crate) type TransportFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the worker asks of the transport that runs it (a PTY of this process, a tmux pane).
/// The transports implement it; the worker does not know which one it holds.
pub(crate) trait Transport: Send + Sync {
    /// The worker's process id, while known.
    fn pid(&self) -> Option<u32>;

    /// The tmux server's socket name and the session name, for a tmux worker.
    fn tmux_session(&self) -> Option<(&str, &str)> {
        None
    }

    /// Types `input` (the hub tells the terminal modes the application asked for).
    fn send<'a>(
        &'a self,
        hub: &'a ScreenHub,
        input: &'a Input,
    ) -> TransportFuture<'a, Result<(), WorkerError>>;

    /// Resizes the terminal.
    fn resize(&self, size: TermSize) -> TransportFuture<'_, Result<(), WorkerError>>;

    /// Sends `signal` to the worker's whole process group.
    fn signal_group(&self, signal: libc::c_int);
}

/// One program running in a terminal, with its screen.
///
/// Cloning gives another handle to the same worker. A PTY worker is killed (its whole process
/// group) when its last handle is dropped; a tmux worker keeps running.
#[derive(Clone)]
pub struct Worker {
    pub(crate) hub: Arc<ScreenHub>,
    pub(crate) transport: Arc<dyn Transport>,
    /// Set (once) after the process exited and its remaining output was drained.
    pub(crate) exit: watch::Receiver<Option<ExitStatus>>,
}

impl Worker {
    /// The worker's process id, while known.
    pub fn pid(&self) -> Option<u32> {
        self.transport.pid()
    }

    /// For a tmux worker: the private server's socket name and the session name, which a
    /// person can attach to with `tmux -L <socket> attach -t <session>`.
    pub fn tmux_session(&self) -> Option<(&str, &str)> {
        self.transport.tmux_session()
    }

    /// What the screen shows now.
    pub fn snapshot(&self) -> ScreenSnapshot {
        self.hub.snapshot()
    }

    /// From now on the worker's terminal answers at most `answers` of the queries in its
    /// output ([`crate::QueryAnswers`]); it never answers more than before.
    pub fn limit_query_answers(&self, answers: crate::QueryAnswers) {
        self.hub.limit_query_answers(answers);
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
        self.transport.send(&self.hub, input).await
    }

    /// Resizes the terminal (the application gets SIGWINCH).
    pub async fn resize(&self, size: TermSize) -> Result<(), WorkerError> {
        self.transport.resize(size).await?;
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
        self.transport.signal_group(libc::SIGTERM);
        if let Ok(status) = tokio::time::timeout(grace, self.wait()).await {
            return status;
        }
        self.transport.signal_group(libc::SIGKILL);
        self.wait().await
    }
}
