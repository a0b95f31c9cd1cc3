//! Errors as people and programs read them: a message and an exit code, or in JSON mode one
//! JSON document on stderr with a stable `kind`.

use std::process::ExitCode;

use clawpool_lane::error::LaneError;
use clawpool_pty::{SpawnError, TmuxError, UnknownKey};
use serde_json::json;

use crate::cli::OutputFormat;

/// Exit code for bad input (flags, names, paths): nothing was started.
pub const EXIT_INVALID_INPUT: u8 = 2;
/// Exit code when clawpool itself failed while running.
pub const EXIT_FAILURE: u8 = 1;

/// A command's failure, with the `kind` JSON consumers match on.
#[derive(Debug)]
pub struct CommandError {
    pub kind: &'static str,
    pub message: String,
    pub exit: u8,
}

impl CommandError {
    pub fn invalid(kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            exit: EXIT_INVALID_INPUT,
        }
    }

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

/// Prints the error on stderr in the chosen format and returns the exit code.
pub fn report(err: &CommandError, format: OutputFormat) -> ExitCode {
    match format {
        OutputFormat::Text => eprintln!("clawpool: error: {}", err.message),
        OutputFormat::Json => eprintln!(
            "{}",
            json!({"error": {"kind": err.kind, "message": err.message}})
        ),
    }
    ExitCode::from(err.exit)
}
