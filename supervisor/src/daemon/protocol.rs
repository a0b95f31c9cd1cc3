//! The daemon socket's wire contract (`docs/control-protocol.md`, "The daemon socket"): one
//! versioned, typed request ([`DaemonRequest`]) in, one typed reply ([`DaemonReply`]) out, each
//! one JSON line. The daemon and every client (`spawn --detach`, `spawn` handing over, `send`
//! and the MCP `send_to_lane` handing a follow-up over, `daemon --stop`) use these types;
//! nobody reads the socket's JSON by key.
//!
//! As on a lane's control socket, the version is read first: a request of another version is
//! answered [`DaemonErrorKind::UnsupportedVersion`] naming both, never half-read.

use std::path::PathBuf;

use clawpool_lanes::LaneState;
use serde::{Deserialize, Serialize};

use crate::cli::TransportKind;
use clawpool_lane::handshake::Verdict;
use clawpool_pool::config::ConfigInput;
use clawpool_pool::error::{CommandError, EXIT_FAILURE, EXIT_INVALID_INPUT};
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
    /// Take a stopped or finished lane up again with a new turn, as one of the daemon's lanes;
    /// answered once the lane ended again.
    FollowUp(FollowUpRequest),
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

/// A follow-up (`clawpool send` to a lane that ended), with the configuration of the command
/// that asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowUpRequest {
    /// The lane's name in the repository's registry.
    pub lane: String,
    /// The text of the new turn.
    pub text: String,
    /// The command's configuration: the lane's agent starts again with it, not with the
    /// daemon's.
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
    /// A follow-up's end: whether the agent started again took the text as a new turn, and
    /// the state the lane then ended in (none when it is not known).
    FollowedUp {
        accepted: bool,
        state: Option<LaneState>,
    },
    /// The lane of a follow-up was driven again by the time the daemon looked: the text went to
    /// its supervisor as any `send` does, and this is the lane's verdict.
    Sent { verdict: Verdict },
    /// How many lanes the daemon runs.
    Status { running: usize },
    /// The daemon ends once this reply is sent.
    Stopping,
    /// The request was refused (nothing was started), or a follow-up failed; the kind says
    /// which.
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
    /// A follow-up's lane is not in the repository's registry.
    UnknownLane,
    /// A follow-up's lane is held by another supervisor (another follow-up, say).
    LaneBusy,
    /// A follow-up's lane is past its budget: nothing was started.
    OverBudget,
    /// A follow-up's lane's profile has no resume arguments: nothing was started.
    NotResumable,
    /// A follow-up was refused or failed otherwise; the message gives the reason and its kind.
    FollowUpFailed,
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
            Self::UnknownLane => "unknown_lane",
            Self::LaneBusy => "lane_busy",
            Self::OverBudget => "over_budget",
            Self::NotResumable => "not_resumable",
            Self::FollowUpFailed => "follow_up_failed",
        }
    }

    /// The exit code a CLI client ends with: a follow-up's refusals as `send` running it
    /// itself ends with them (bad input, nothing started), anything else a failure.
    pub fn exit(self) -> u8 {
        match self {
            Self::UnknownLane | Self::LaneBusy | Self::OverBudget | Self::NotResumable => {
                EXIT_INVALID_INPUT
            }
            _ => EXIT_FAILURE,
        }
    }
}

impl DaemonError {
    /// A follow-up the pool refused or that failed, with the kind a client reports it by: the
    /// kind `send` reports when it runs the follow-up itself, where there is one here.
    pub fn of_follow_up(err: CommandError) -> Self {
        let kind = match err.kind {
            "unknown_lane" => DaemonErrorKind::UnknownLane,
            "lane_busy" => DaemonErrorKind::LaneBusy,
            "over_budget" => DaemonErrorKind::OverBudget,
            "not_resumable" => DaemonErrorKind::NotResumable,
            "invalid_config" => DaemonErrorKind::InvalidConfig,
            other => {
                return Self::new(
                    DaemonErrorKind::FollowUpFailed,
                    format!("{} ({other})", err.message),
                );
            }
        };
        Self::new(kind, err.message)
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
    fn a_follow_up_and_its_end_read_back_as_written() {
        let request = DaemonRequest::new(Request::FollowUp(FollowUpRequest {
            lane: "alpha".into(),
            text: "now add a test".into(),
            config: ConfigInput::of_this_process(None),
        }));
        let line = serde_json::to_string(&request).expect("json");
        assert!(
            line.starts_with(r#"{"v":1,"request":{"type":"follow_up","lane":"alpha","text":"now add a test","config":"#),
            "{line}"
        );
        assert_eq!(DaemonRequest::parse(&line).expect("parsed"), request);
        for reply in [
            Reply::FollowedUp {
                accepted: true,
                state: Some(LaneState::Finished),
            },
            Reply::Sent {
                verdict: Verdict::done("sent"),
            },
        ] {
            let reply = DaemonReply::new(reply);
            let line = serde_json::to_string(&reply).expect("json");
            assert_eq!(
                serde_json::from_str::<DaemonReply>(&line).expect("parsed"),
                reply,
                "{line}"
            );
        }
    }

    #[test]
    fn a_follow_ups_refusal_keeps_the_kind_send_reports_it_by() {
        let refused = DaemonError::of_follow_up(CommandError::invalid("over_budget", "past it"));
        assert_eq!(refused.kind.cli_kind(), "over_budget");
        assert_eq!(refused.kind.exit(), EXIT_INVALID_INPUT);
        let failed = DaemonError::of_follow_up(CommandError::io(
            "starting the agent",
            std::io::Error::other("gone"),
        ));
        assert_eq!(failed.kind, DaemonErrorKind::FollowUpFailed);
        assert_eq!(failed.kind.exit(), EXIT_FAILURE);
        assert!(failed.message.ends_with("(io)"), "{}", failed.message);
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
