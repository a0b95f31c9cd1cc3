//! The pool's typed API: one [`PoolRequest`] per operation, each carrying its own data, and
//! one typed reply per request ([`PoolReply`]). Callers (the CLI, the daemon, `clawpool ui`,
//! the MCP server) convert their own flags or wire messages into these; nothing here is a
//! command line or a JSON value. Progress while a request runs goes to the caller's
//! [`Observer`](crate::observer::Observer); the reply is what the request came to.
//!
//! [`Pool::handle`] takes any request. Spawn and adopt stream their progress through the
//! observer and reply once every lane is over, so one entry point serves them as well as a
//! one-shot request.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use clawpool_lane::interrupt::StopSignal;
use clawpool_lanes::LaneState;
use clawpool_worktree::Repo;

use crate::adoption::NotAdopted;
use crate::config::Loaded;
use crate::error::CommandError;
use crate::observer::Observer;
use crate::start::{InvalidPacket, SkippedLane};

/// A request to the pool of one repository.
pub enum PoolRequest {
    /// Start a packet's lanes here (or say that the daemon is to take them).
    Spawn(SpawnRequest),
    /// Take over the lanes a supervisor that died left.
    Adopt(AdoptRequest),
}

/// The reply to a [`PoolRequest`], variant for variant.
pub enum PoolReply {
    /// What a [`PoolRequest::Spawn`] came to.
    Spawn(SpawnReply),
    /// What a [`PoolRequest::Adopt`] came to.
    Adopt(AdoptReply),
}

/// The terminal a packet's lanes run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A PTY owned by the supervisor: its lanes end with it.
    Pty,
    /// A session on the repository's private tmux server: lanes outlive their supervisor and
    /// can be adopted.
    Tmux,
}

impl From<clawpool_lanes::state_file::TransportKind> for Transport {
    fn from(kind: clawpool_lanes::state_file::TransportKind) -> Self {
        match kind {
            clawpool_lanes::state_file::TransportKind::Pty => Transport::Pty,
            clawpool_lanes::state_file::TransportKind::Tmux => Transport::Tmux,
        }
    }
}

/// Start the lanes of a task packet.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// A folder in the repository.
    pub repo: PathBuf,
    /// The packet's text.
    pub packet: String,
    /// The packet's name in messages (its file, or a name for an inline packet).
    pub packet_name: PathBuf,
    /// The terminal the lanes run in.
    pub transport: Transport,
    /// Lanes started at once (default [`crate::start::DEFAULT_CONCURRENCY`]).
    pub concurrency: Option<usize>,
    /// The agent of lanes that name none.
    pub agent: Option<String>,
    /// Run again the lanes earlier runs finished, stopped or gc removed.
    pub rerun: bool,
    /// Hand the lanes to the repository's daemon rather than run them here.
    pub detach: bool,
}

/// Take over every registered lane of a repository that has not ended.
#[derive(Debug, Clone)]
pub struct AdoptRequest {
    /// A folder in the repository.
    pub repo: PathBuf,
}

/// What a spawn came to.
pub enum SpawnReply {
    /// The packet was refused before anything was created, with every problem found.
    Invalid(InvalidPacket),
    /// The repository's daemon is to take the packet (handing over is the caller's, so that
    /// the pool never depends on the daemon's transport).
    HandOver(HandOver),
    /// The lanes ran here to their ends.
    Ran(SpawnReport),
}

/// A packet the daemon is to take.
pub struct HandOver {
    /// The repository.
    pub repo: Repo,
    /// The packet's text.
    pub packet: String,
    /// Start a daemon if none runs (`--detach`); otherwise only hand over to a running one.
    pub start: bool,
    /// Why this process could not run it itself, when handing over is the fallback: the error
    /// to report if no daemon takes it.
    pub refused: Option<CommandError>,
}

/// The lanes a foreground spawn ran, and how each ended.
pub struct SpawnReport {
    /// Each lane started, with its final state (none when it never started).
    pub lanes: BTreeMap<String, Option<LaneState>>,
    /// The lanes whose outcome is in their event log but could not be written to their state
    /// file, with the write's error.
    pub unpersisted: BTreeMap<String, String>,
    /// The lanes an earlier run left, not started.
    pub skipped: Vec<SkippedLane>,
    /// The signal that stopped the run, if one did.
    pub interrupted: Option<StopSignal>,
}

impl SpawnReport {
    /// Whether every lane started here finished and its state file says so.
    pub fn all_finished(&self) -> bool {
        self.unpersisted.is_empty()
            && self
                .lanes
                .values()
                .all(|s| s.is_some_and(|s| s == LaneState::Finished))
    }
}

/// The lanes an adoption took over, and those it left alone.
pub struct AdoptReply {
    /// Each lane taken over (or recorded as lost), with its final state.
    pub adopted: BTreeMap<String, Option<LaneState>>,
    /// The lanes not taken over, and why: nothing was done to them.
    pub not_adopted: Vec<NotAdopted>,
    /// The signal that stopped the run, if one did.
    pub interrupted: Option<StopSignal>,
}

impl AdoptReply {
    /// Whether every lane was taken over and finished.
    pub fn all_finished(&self) -> bool {
        self.not_adopted.is_empty()
            && self
                .adopted
                .values()
                .all(|s| s.is_some_and(|s| s == LaneState::Finished))
    }
}

/// A repository's pool as one caller sees it: the configuration its requests run with.
pub struct Pool {
    loaded: Loaded,
}

impl Pool {
    /// The pool with the configuration `loaded` (the pool's input).
    pub fn new(loaded: Loaded) -> Self {
        Self { loaded }
    }

    /// Runs `request`, telling `observer` of its progress, and replies with what it came to.
    pub async fn handle(
        &self,
        request: PoolRequest,
        observer: Arc<dyn Observer>,
    ) -> Result<PoolReply, CommandError> {
        Ok(match request {
            PoolRequest::Spawn(spawn) => {
                PoolReply::Spawn(crate::start::spawn(&self.loaded, spawn, observer).await?)
            }
            PoolRequest::Adopt(adopt) => {
                PoolReply::Adopt(crate::adoption::adopt(&self.loaded, adopt, observer).await?)
            }
        })
    }
}
