//! The signals that stop a foreground supervisor (`clawpool spawn`, `adopt`, `run`): SIGINT
//! (Ctrl-C) and SIGTERM, listened for once for the whole run and shared by every lane, so that
//! each lane stops its agent and records why, lanes still queued are not started, and the
//! command exits with a code that names the signal.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// A signal that stops a foreground supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C in the supervisor's terminal.
    Interrupt,
    /// SIGTERM: `kill PID`, a service manager, a CI runner's timeout.
    Terminate,
}

impl StopSignal {
    /// The signal's name, as people and the lanes' evidence read it.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The exit code after it: 128 + the signal's number, as a shell reports a process the
    /// signal killed, so a script cannot mistake an interrupted batch for a failed lane (1).
    pub fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => 128 + libc::SIGINT as u8,
            StopSignal::Terminate => 128 + libc::SIGTERM as u8,
        }
    }
}

/// Whether (and by which signal) the supervisor was told to stop; every clone sees the same.
#[derive(Clone)]
pub struct Interrupt {
    received: watch::Receiver<Option<StopSignal>>,
}

impl Interrupt {
    /// Listens for SIGINT and SIGTERM from now on (inside the runtime). The first one counts;
    /// later ones change nothing (stopping each lane is bounded by its agent's stop grace).
    pub fn listen() -> std::io::Result<Self> {
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let (sender, received) = watch::channel(None);
        tokio::spawn(async move {
            let first = tokio::select! {
                _ = interrupt.recv() => StopSignal::Interrupt,
                _ = terminate.recv() => StopSignal::Terminate,
            };
            sender.send_replace(Some(first));
            // Keep the handlers installed (a later signal must not kill the process half-way
            // through stopping the lanes) and the sender alive for late subscribers.
            loop {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            }
        });
        Ok(Self { received })
    }

    /// One that never fires: the daemon is stopped with `clawpool daemon --stop`, and a
    /// packet's validation probe never runs a lane.
    pub fn never() -> Self {
        let (_, received) = watch::channel(None);
        Self { received }
    }

    /// The signal received so far, if any.
    pub fn received(&self) -> Option<StopSignal> {
        *self.received.borrow()
    }

    /// Waits for the signal (forever for [`Interrupt::never`]).
    pub async fn wait(&self) -> StopSignal {
        let mut received = self.received.clone();
        let signal = received
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|s| *s);
        match signal {
            Some(signal) => signal,
            None => std::future::pending().await,
        }
    }
}
