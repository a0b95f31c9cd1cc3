//! Terminals for clawpool workers.
//!
//! The main type is [`Worker`]: one interactive program running in a terminal, whose screen
//! this crate keeps as text. A worker runs either in a pseudo-terminal this process owns
//! ([`Worker::spawn_pty`]) or in a tmux session on a private server ([`TmuxServer`]), where a
//! person can attach to watch or take over and where it outlives the supervisor. Both give the
//! same API: the current [`ScreenSnapshot`], a stream of coalesced [`ScreenChanges`], input as
//! text or named [`Key`]s, resize, and the exit status.
//!
//! The crate also owns the [`ScreenModel`] (vt100 underneath, plus title, text scrollback and
//! answers to terminal queries), the size-capped [`RawLog`] of every byte a worker wrote, and
//! [`replay`] of recorded byte streams.
//!
//! It knows nothing about agents, prompts or lanes: deciding what a screen means is the
//! supervisor's job.
//!
//! # Theory of operation
//!
//! Every worker has a [`hub`](ScreenHub) that owns its screen model. Transports feed output
//! into it; a per-worker coalescing task turns changes into notifications (at most one per
//! [`COALESCE_WINDOW`]). For a PTY, one tokio task reads the master side through `AsyncFd`
//! (reads never block a thread), answers terminal queries, and feeds the hub; a second task
//! waits for the child on a pidfd. When the child exits, that is the truth: the reader drains
//! what is still in flight for at most the spec's drain timeout, then the exit status is
//! published, so whoever awaits the exit sees the final screen. For tmux, one control-mode
//! client per server reads `%output` for every worker on that server and feeds their hubs.

mod error;
mod exit;
mod hub;
mod keys;
mod local;
mod rawlog;
pub mod replay;
mod screen;
mod session_child;
mod spec;
pub mod tmux;
mod worker;

pub use error::{SpawnError, TmuxError, WorkerError};
pub use exit::ExitStatus;
pub use hub::{COALESCE_WINDOW, ScreenChanges};
pub use keys::{Input, KEY_NAMES, Key, UnknownKey, text_bytes};
pub use rawlog::{RawLog, RawLogConfig};
pub use screen::{
    DEFAULT_SCROLLBACK_LINES, QueryAnswers, ScreenModel, ScreenOptions, ScreenSnapshot,
};
pub use spec::{DEFAULT_DRAIN_TIMEOUT, SpawnSpec, resolve_program};
pub use tmux::{AttachOptions, CONTROL_SESSION, TmuxConfig, TmuxServer};
pub use worker::Worker;

use hub::ScreenHub;

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

impl Default for TermSize {
    /// 120x40, the size the agent recordings were made at.
    fn default() -> Self {
        Self {
            rows: 40,
            cols: 120,
        }
    }
}
