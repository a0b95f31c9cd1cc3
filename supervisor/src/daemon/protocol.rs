//! The daemon socket's wire contract (`docs/control-protocol.md`, "The daemon socket"): one
//! versioned, typed request ([`DaemonRequest`]) in, one typed reply ([`DaemonReply`]) out, each
//! one JSON line. The daemon and every client (`spawn --detach`, `spawn` handing over,
//! `daemon --stop`) use these types; nobody reads the socket's JSON by key.
//!
//! As on a lane's control socket, the version is read first: a request of another version is
//! answered [`DaemonErrorKind::UnsupportedVersion`] naming both, never half-read.

use std::path::PathBuf;

use clawpool_lanes::LaneState;
use serde::{Deserialize, Serialize};

use crate::cli::TransportKind;
use clawpool_pool::config::ConfigInput;
use clawpool_pool::request::Skipped;

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// One request: `{"v": 1, "request": {"type": …, …}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonRequest {
    /// The protocol version the caller speaks.
    pub v: u32,
    /// What it asks.
    pub request: Request,
}

/// What a caller asks of the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Validate a packet as `clawpool spawn` does and start its lanes.
    Spawn(SpawnRequest),
    /// How many lanes run.
    Status,
    /// End the daemon (lanes in tmux keep running and can be adopted).
    Stop,
}

/// A packet to run, with everything of the command that asked which decides how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// The packet's text.
    pub packet: String,
    /// What the packet is called in messages (its file).
    pub packet_name: PathBuf,
    pub transport: TransportKind,
    pub concurrency: Option<usize>,
    /// `--agent`, for lanes that name none.
    pub agent: Option<String>,
    /// `spawn --rerun`: run finished lanes again, re-create those gc removed.
    pub rerun: bool,
    /// The command's configuration: the lanes start with it, not with the daemon's.
    pub config: ConfigInput,
}

impl DaemonRequest {
    /// `request` in this build's version.
    pub fn new(request: Request) -> Self {
        Self {
            v: VERSION,
            request,
        }
    }

    /// Reads a request line: the version first, then the request itself.
    pub fn parse(line: &str) -> Result<Self, DaemonError> {
        #[derive(Deserialize)]
        struct Versioned {
            v: Option<u32>,
        }
        let versioned: Versioned = serde_json::from_str(line).map_err(|e| {
            DaemonError::new(DaemonErrorKind::BadRequest, format!("not a request: {e}"))
        })?;
        if versioned.v != Some(VERSION) {
            let theirs = versioned
                .v
                .map_or_else(|| "no version".to_owned(), |v| format!("version {v}"));
            return Err(DaemonError::new(
                DaemonErrorKind::UnsupportedVersion,
                format!(
                    "the request speaks {theirs} of the daemon protocol: this daemon speaks version {VERSION}"
                ),
            ));
        }
        serde_json::from_str(line).map_err(|e| {
            DaemonError::new(DaemonErrorKind::BadRequest, format!("a bad request: {e}"))
        })
    }
}

/// One reply: `{"v": 1, "reply": {"type": …, …}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonReply {
    /// The protocol version the daemon speaks.
    pub v: u32,
    /// What it answers.
    pub reply: Reply,
}

impl DaemonReply {
    /// `reply` in this build's version.
    pub fn new(reply: Reply) -> Self {
        Self { v: VERSION, reply }
    }
}

/// The daemon's answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// The packet's lanes were started; those an earlier run left are listed apart.
    Spawned {
        lanes: Vec<String>,
        skipped: Vec<SkippedEntry>,
    },
    /// How many lanes the daemon runs.
    Status { running: usize },
    /// The daemon ends once this reply is sent.
    Stopping,
    /// The request was refused; nothing was started.
    Error(DaemonError),
}

/// A lane of the packet left as an earlier run left it, as spawn's final document lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedEntry {
    pub lane: String,
    /// Its state as its state file has it (none for a lane gc removed).
    pub state: Option<LaneState>,
    pub skipped: Skipped,
}

/// A refusal, with the kind a program matches on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonError {
    pub kind: DaemonErrorKind,
    pub message: String,
}

impl DaemonError {
    pub fn new(kind: DaemonErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// Why the daemon refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DaemonErrorKind {
    /// The caller runs inside a lane (or as another user).
    CallerRefused,
    /// The request speaks another version of this protocol.
    UnsupportedVersion,
    /// The line is not a request of this version.
    BadRequest,
    /// The configuration the request carries does not load.
    InvalidConfig,
    /// The packet or its lanes were refused, or starting them failed; the message says which.
    SpawnRefused,
}

impl DaemonErrorKind {
    /// The `kind` a CLI client reports the refusal with (docs/cli.md).
    pub fn cli_kind(self) -> &'static str {
        match self {
            Self::CallerRefused => "caller_refused",
            Self::UnsupportedVersion => "daemon_version",
            Self::BadRequest => "daemon_bad_request",
            Self::InvalidConfig => "invalid_config",
            Self::SpawnRefused => "daemon_refused",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_of_another_version_is_refused_by_name_before_the_rest_is_read() {
        let err = DaemonRequest::parse(r#"{"v": 2, "request": {"type": "launch_rockets"}}"#)
            .expect_err("refused");
        assert_eq!(err.kind, DaemonErrorKind::UnsupportedVersion);
        assert!(err.message.contains("version 2"), "{}", err.message);
        let err = DaemonRequest::parse(r#"{"command": "stop"}"#).expect_err("refused");
        assert_eq!(err.kind, DaemonErrorKind::UnsupportedVersion);
        assert!(err.message.contains("no version"), "{}", err.message);
    }

    #[test]
    fn requests_and_replies_read_back_as_written() {
        let request = DaemonRequest::new(Request::Status);
        let line = serde_json::to_string(&request).expect("json");
        assert_eq!(line, r#"{"v":1,"request":{"type":"status"}}"#);
        assert_eq!(DaemonRequest::parse(&line).expect("parsed"), request);
        let reply = DaemonReply::new(Reply::Error(DaemonError::new(
            DaemonErrorKind::InvalidConfig,
            "bad",
        )));
        let line = serde_json::to_string(&reply).expect("json");
        assert_eq!(
            line,
            r#"{"v":1,"reply":{"type":"error","kind":"invalid_config","message":"bad"}}"#
        );
        assert_eq!(
            serde_json::from_str::<DaemonReply>(&line).expect("parsed"),
            reply
        );
    }
}
