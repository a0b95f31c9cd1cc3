//! The failure of a request to the pool (or any command of the binary): a message, the exit
//! code a command ends with, and the stable `kind` JSON consumers match on.

use clawpool_lane::error::LaneError;
use clawpool_pty::{SpawnError, TmuxError, UnknownKey};

/// Exit code for bad input (flags, names, paths): nothing was started.
pub const EXIT_INVALID_INPUT: u8 = 2;
/// Exit code when clawpool itself failed while running.
pub const EXIT_FAILURE: u8 = 1;

/// A command's failure, with the `kind` JSON consumers match on.
#[derive(Debug)]
pub struct CommandError {
    /// Stable, snake_case: what JSON consumers (the CLI's `--output-format json`, MCP tool
    /// errors) match on.
    pub kind: &'static str,
    /// For people: names the thing that is wrong.
    pub message: String,
    /// The exit code of the command that failed ([`EXIT_INVALID_INPUT`], [`EXIT_FAILURE`]).
    pub exit: u8,
}

impl CommandError {
    /// Bad input: nothing was started or changed.
    pub fn invalid(kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            exit: EXIT_INVALID_INPUT,
        }
    }

    /// An I/O failure while doing `what`.
    pub fn io(what: &str, err: std::io::Error) -> Self {
        Self {
            kind: "io",
            message: format!("{what}: {err}"),
            exit: EXIT_FAILURE,
        }
    }
}

impl From<LaneError> for CommandError {
    fn from(err: LaneError) -> Self {
        match err {
            LaneError::Invalid { kind, message } => Self::invalid(kind, message),
            LaneError::Io { what, source } => Self::io(what, source),
            LaneError::Spawn(err) => Self::from(err),
        }
    }
}

impl From<SpawnError> for CommandError {
    fn from(err: SpawnError) -> Self {
        let kind = match &err {
            SpawnError::ProgramNotFound { .. } => "program_not_found",
            SpawnError::CwdNotFound { .. } => "cwd_not_found",
            SpawnError::Tmux(tmux) => return Self::from_tmux(tmux, err.to_string()),
            SpawnError::Pty(_) | SpawnError::Io { .. } => "spawn_failed",
        };
        let exit = match kind {
            "spawn_failed" => EXIT_FAILURE,
            _ => EXIT_INVALID_INPUT,
        };
        Self {
            kind,
            message: err.to_string(),
            exit,
        }
    }
}

impl From<TmuxError> for CommandError {
    fn from(err: TmuxError) -> Self {
        let message = err.to_string();
        Self::from_tmux(&err, message)
    }
}

impl From<UnknownKey> for CommandError {
    fn from(err: UnknownKey) -> Self {
        Self::invalid("unknown_key", err.to_string())
    }
}

impl CommandError {
    fn from_tmux(err: &TmuxError, message: String) -> Self {
        let (kind, exit) = match err {
            TmuxError::NotInstalled { .. } => ("tmux_not_installed", EXIT_INVALID_INPUT),
            TmuxError::InvalidName { .. } => ("invalid_name", EXIT_INVALID_INPUT),
            TmuxError::SessionExists { .. } => ("session_exists", EXIT_INVALID_INPUT),
            TmuxError::NoSuchSession { .. } => ("no_such_session", EXIT_INVALID_INPUT),
            _ => ("tmux_failed", EXIT_FAILURE),
        };
        Self {
            kind,
            message,
            exit,
        }
    }
}
