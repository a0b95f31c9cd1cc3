//! Why starting a worker, driving it, or talking to tmux failed: the errors every transport
//! and the [`Worker`](crate::Worker) handle share.

use crate::exit::ExitStatus;

/// Why a worker could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program is not an executable file, or not found in `PATH`.
    #[error("program not found or not executable: {}", program.to_string_lossy())]
    ProgramNotFound {
        /// The program as given.
        program: std::ffi::OsString,
    },
    /// The working folder does not exist (or is not a folder).
    #[error("working directory does not exist: {}", cwd.display())]
    CwdNotFound {
        /// The folder as given.
        cwd: std::path::PathBuf,
    },
    /// The pseudo-terminal could not be opened or the process not started.
    #[error("could not start the worker in a pseudo-terminal: {0}")]
    Pty(String),
    /// The operating system refused something (pidfd, fd duplication, …).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// tmux failed.
    #[error(transparent)]
    Tmux(#[from] TmuxError),
}

/// Why a tmux operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// No tmux binary where it was looked for.
    #[error(
        "tmux is not installed ({program:?} not found); install it, e.g. `apt-get install tmux`"
    )]
    NotInstalled {
        /// The program that was looked for.
        program: String,
    },
    /// A socket or session name tmux cannot use.
    #[error(
        "invalid tmux {what} name {name:?}: use letters, digits, `-`, `_` (and `.` for sockets)"
    )]
    InvalidName {
        /// `socket` or `session`.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// The session does not exist on this server.
    #[error("no tmux session {session:?} on server {socket:?}")]
    NoSuchSession {
        /// The socket name.
        socket: String,
        /// The session name.
        session: String,
    },
    /// A session of that name already exists.
    #[error("tmux session {session:?} already exists on server {socket:?}")]
    SessionExists {
        /// The socket name.
        socket: String,
        /// The session name.
        session: String,
    },
    /// tmux answered a command with an error.
    #[error("tmux {command} failed: {message}")]
    Command {
        /// The command (first word).
        command: String,
        /// What tmux said.
        message: String,
    },
    /// tmux printed something this module cannot read.
    #[error("unexpected tmux reply to {command}: {reply:?}")]
    Unexpected {
        /// The command.
        command: &'static str,
        /// The reply.
        reply: String,
    },
    /// The control-mode client is gone: the server exited or was killed.
    #[error("the tmux server went away (control client closed)")]
    ControlClosed,
    /// Running tmux failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
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
