//! How driving a lane can fail before its agent runs, with the `kind` a JSON consumer matches
//! on. Everything after the agent starts is the lane's state, not an error.

use clawpool_pty::SpawnError;

/// Why a lane could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaneError {
    /// The lane's input is wrong (a prompt the agent cannot take).
    #[error("{message}")]
    Invalid {
        /// What is wrong, for JSON consumers (`invalid_prompt`).
        kind: &'static str,
        /// What is wrong, for people.
        message: String,
    },
    /// The lane's own files could not be made or opened.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The agent's process could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
}

impl LaneError {
    /// Bad input, of kind `kind`.
    pub fn invalid(kind: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            kind,
            message: message.into(),
        }
    }

    /// A file of the lane's that could not be made or opened while `what`.
    pub fn io(what: &'static str, source: std::io::Error) -> Self {
        Self::Io { what, source }
    }
}
