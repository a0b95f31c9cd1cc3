//! The control socket's wire contract (`docs/control-protocol.md`): one versioned, typed
//! request ([`ControlRequest`]) in, one typed reply ([`ControlResponse`]) out, each one JSON
//! line. Both sides of the socket — the lane's listener ([`super::listen`]) and every client
//! ([`ask`]: `clawpool` operator commands, `clawpool ui`, `clawpool hook`) — use these types;
//! nobody reads the socket's JSON by key.
//!
//! A request names the protocol version it speaks (`v`); a lane answers a version it does not
//! speak with an [`ErrorKind::UnsupportedVersion`] error naming both, before reading anything
//! else of the request, so that an old client and a new lane (or the reverse) fail loudly.

use std::path::Path;

use clawpool_lanes::LaneState;
use clawpool_lanes::state_file::GreenLevel;
use clawpool_lanes::state_file::Verification;
use clawpool_worktree::MergeOutcome;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::channel::{HookDecision, HookReport};
use crate::handshake::{OperatorCommand, Verdict};

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// One request to a lane's control socket: `{"v": 1, "request": {"type": …, …}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// The protocol version the caller speaks.
    pub v: u32,
    /// What it asks.
    pub request: Request,
}

impl ControlRequest {
    /// `request` in this build's version.
    pub fn new(request: Request) -> Self {
        ControlRequest {
            v: VERSION,
            request,
        }
    }

    /// Reads a request line: the version first (a version this build does not speak is
    /// refused by name, whatever the rest says), then the request itself.
    pub fn parse(line: &str) -> Result<Self, ControlError> {
        /// Only the version: read first, so a request of another version is never half-read.
        #[derive(Deserialize)]
        struct Versioned {
            v: Option<u32>,
        }
        let versioned: Versioned = serde_json::from_str(line)
            .map_err(|e| ControlError::new(ErrorKind::BadRequest, format!("not a request: {e}")))?;
        match versioned.v {
            Some(VERSION) => {}
            Some(other) => {
                return Err(ControlError::new(
                    ErrorKind::UnsupportedVersion,
                    format!(
                        "control protocol version {other} is not spoken here: this lane speaks version {VERSION}"
                    ),
                ));
            }
            None => {
                return Err(ControlError::new(
                    ErrorKind::UnsupportedVersion,
                    format!(
                        "the request names no protocol version (`v`): this lane speaks version {VERSION}"
                    ),
                ));
            }
        }
        serde_json::from_str(line)
            .map_err(|e| ControlError::new(ErrorKind::BadRequest, format!("a bad request: {e}")))
    }
}

/// What a caller asks of a lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// An operator's command (`trust`, `answer`, `send`, `stop`, `restart`): answered with
    /// the lane's [`Verdict`] once it decided.
    Operator(OperatorCommand),
    /// Bring the base into the lane's branch by its policy (merge when the policy is warn or
    /// block too: an operator asked for it); answered with [`ControlReply::Merged`].
    MergeForward,
    /// Verify a green level; answered with [`ControlReply::Verified`].
    Verify {
        /// The level.
        level: GreenLevel,
    },
    /// The lane's live screen; answered at once with [`ControlReply::Screen`].
    Screen,
    /// A hook's report (`clawpool hook`), carrying the lane's token; answered with
    /// [`ControlReply::HookTaken`] once it is queued for the handshake.
    Hook(HookReport),
}

impl Request {
    /// The request as its command is typed (`answer --choice yes`, `merge-forward`, `hook
    /// Stop`, …), for `lane.caller_refused`.
    pub fn describe(&self) -> String {
        match self {
            Request::Operator(command) => command.describe(),
            Request::MergeForward => "merge-forward".to_owned(),
            Request::Verify { level } => format!("verify --level {level}"),
            Request::Screen => "screen".to_owned(),
            Request::Hook(report) => format!("hook {}", report.event),
        }
    }
}

/// One reply from a lane's control socket: `{"v": 1, "reply": {"type": …, …}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlResponse {
    /// The protocol version the lane speaks.
    pub v: u32,
    /// Its answer.
    pub reply: ControlReply,
}

/// What a lane answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlReply {
    /// What the lane did with an operator's command (also a caller refused at the socket's
    /// gate, as a `refused` verdict, so the command prints and exits by it).
    Verdict(Verdict),
    /// What merge-forward did.
    Merged {
        /// Its outcome (`docs/worktrees.md`).
        merge: MergeOutcome,
    },
    /// What a verification did.
    Verified(Box<VerifiedReply>),
    /// The lane's screen now.
    Screen(ScreenSnapshot),
    /// A hook report queued for the handshake; `decision` is Claude Code's answer to a
    /// PermissionRequest the lane's policy decided (none for an ask, or another event).
    HookTaken {
        /// The hook's output for the agent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<HookDecision>,
    },
    /// The request never reached the lane, or the lane could not do it.
    Error(ControlError),
}

/// A verification's result, as the socket and `clawpool verify --output-format json` give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifiedReply {
    /// The record for the state file.
    pub verification: Verification,
    /// The green level reached, if any.
    pub green_level: Option<GreenLevel>,
    /// The lane state it leads to for a lane whose worker is no longer driven.
    pub lane_state: LaneState,
}

impl From<&crate::verify::Verified> for VerifiedReply {
    fn from(verified: &crate::verify::Verified) -> Self {
        VerifiedReply {
            verification: verified.verification.clone(),
            green_level: verified.green_level,
            lane_state: verified.lane_state,
        }
    }
}

/// A lane's screen: its size, the cursor (row, column), the visible rows as `text` (trailing
/// blanks and empty trailing rows removed), and `formatted`, the same screen as escape
/// sequences with its colours (what redraws it on another terminal of the same size).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenSnapshot {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// The cursor: row, column.
    pub cursor: (u16, u16),
    /// The visible rows, joined by newlines.
    pub text: String,
    /// The screen as escape sequences.
    pub formatted: String,
}

/// Why a request got no answer of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ControlError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What went wrong, in words.
    pub message: String,
}

impl ControlError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ControlError {
            kind,
            message: message.into(),
        }
    }
}

/// The kinds of [`ControlError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request names a protocol version the lane does not speak (or none).
    UnsupportedVersion,
    /// The line is not a request of this version.
    BadRequest,
    /// The caller may not make this request (`lane.caller_refused` records it).
    Refused,
    /// The lane ended before it answered.
    LaneEnded,
    /// A `screen` request before the lane's first worker started, or after its terminal ended.
    NoWorker,
    /// A hook report to a lane without a hook channel.
    NoHookChannel,
    /// A hook report whose token is not the lane's.
    WrongToken,
    /// The lane's handshake did not take a hook report (its queue is full or gone).
    NotTaken,
    /// Merge-forward failed (git failed; a refused merge is a [`ControlReply::Merged`]).
    MergeFailed,
}

/// Sends `request` to the lane listening on `socket` and reads its reply. An I/O error when
/// nobody listens or the connection breaks; a reply this build cannot read is an
/// [`io::ErrorKind::InvalidData`](std::io::ErrorKind::InvalidData) error that quotes it.
pub async fn ask(socket: &Path, request: Request) -> std::io::Result<ControlReply> {
    let line = serde_json::to_string(&ControlRequest::new(request))?;
    let stream = UnixStream::connect(socket).await?;
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{line}\n").as_bytes()).await?;
    let mut reply = String::new();
    BufReader::new(read).read_line(&mut reply).await?;
    parse_response(reply.trim())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Reads a reply line: one of this version, or why it cannot be read.
pub fn parse_response(line: &str) -> Result<ControlReply, String> {
    let response: ControlResponse = serde_json::from_str(line).map_err(|e| {
        if line.is_empty() {
            "the lane closed the connection without a reply".to_owned()
        } else {
            format!("an unreadable reply ({e}): {line:?}")
        }
    })?;
    if response.v != VERSION {
        return Err(format!(
            "the lane speaks control protocol version {}, this clawpool version {VERSION}",
            response.v
        ));
    }
    Ok(response.reply)
}

/// The line that carries `reply`.
pub fn response_line(reply: ControlReply) -> String {
    let response = ControlResponse { v: VERSION, reply };
    // Every field of a reply serialises (plain data, string keys).
    serde_json::to_string(&response).unwrap_or_else(|e| {
        format!(
            r#"{{"v":{VERSION},"reply":{{"type":"error","kind":"bad_request","message":"the reply could not be written: {e}"}}}}"#
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_back_as_written() {
        let requests = [
            Request::Operator(OperatorCommand::Answer {
                choice: "yes".into(),
            }),
            Request::Operator(OperatorCommand::Stop),
            Request::MergeForward,
            Request::Verify {
                level: GreenLevel::Package,
            },
            Request::Screen,
            Request::Hook(HookReport {
                token: "t".into(),
                event: "Stop".into(),
                payload: serde_json::json!({"session_id": "s"}),
            }),
        ];
        for request in requests {
            let line = serde_json::to_string(&ControlRequest::new(request.clone())).expect("line");
            assert_eq!(
                ControlRequest::parse(&line).expect("parses").request,
                request
            );
        }
    }

    #[test]
    fn the_documented_wire_shape() {
        let line = r#"{"v":1,"request":{"type":"operator","command":"answer","choice":"yes"}}"#;
        assert_eq!(
            ControlRequest::parse(line).expect("parses").request,
            Request::Operator(OperatorCommand::Answer {
                choice: "yes".into()
            })
        );
        let reply = response_line(ControlReply::Verdict(Verdict::Ignored {
            reason: "no dialog on screen".into(),
        }));
        assert_eq!(
            reply,
            r#"{"v":1,"reply":{"type":"verdict","verdict":"ignored","reason":"no dialog on screen"}}"#
        );
        let error = response_line(ControlReply::Error(ControlError::new(
            ErrorKind::LaneEnded,
            "the lane has ended",
        )));
        assert_eq!(
            error,
            r#"{"v":1,"reply":{"type":"error","kind":"lane_ended","message":"the lane has ended"}}"#
        );
        assert_eq!(
            parse_response(&error),
            Ok(ControlReply::Error(ControlError::new(
                ErrorKind::LaneEnded,
                "the lane has ended"
            )))
        );
    }

    #[test]
    fn another_version_is_refused_by_name() {
        let err =
            ControlRequest::parse(r#"{"v":2,"request":{"type":"screen"}}"#).expect_err("version 2");
        assert_eq!(err.kind, ErrorKind::UnsupportedVersion);
        assert!(err.message.contains("version 2"), "{err}");
        // The pre-versioned line of older clients: no `v`.
        let err = ControlRequest::parse(r#"{"command":"screen"}"#).expect_err("no version");
        assert_eq!(err.kind, ErrorKind::UnsupportedVersion);
        let err = ControlRequest::parse(r#"{"v":1,"request":{"type":"dance"}}"#)
            .expect_err("unknown request");
        assert_eq!(err.kind, ErrorKind::BadRequest);
        let err = parse_response(r#"{"v":7,"reply":{"type":"hook_taken"}}"#).expect_err("v7");
        assert!(err.contains("version 7"), "{err}");
    }
}
