//! The pool's one entry point: [`Pool::handle`] runs any [`PoolRequest`] with the
//! configuration the pool was given and replies with its typed [`PoolReply`]. Spawn, adopt and gc
//! stream their progress through the caller's [`Observer`] and reply once every lane is over,
//! so one entry point serves them as well as a one-shot request.

use std::sync::Arc;

use crate::config::Loaded;
use crate::error::CommandError;
use crate::observer::Observer;
use crate::request::{PoolReply, PoolRequest};

/// A repository's pool as one caller sees it: the configuration its requests run with.
pub struct Pool {
    /// `None` for a pool that only reads and collects lanes ([`Pool::reader`]).
    loaded: Option<Loaded>,
}

impl Pool {
    /// The pool with the configuration `loaded` (the pool's input).
    pub fn new(loaded: Loaded) -> Self {
        Self {
            loaded: Some(loaded),
        }
    }

    /// A pool for the requests that need no configuration — [`PoolRequest::Board`] and
    /// [`PoolRequest::Gc`] read the lanes' records and git, never a profile — so that a board
    /// is not refused, nor slowed, by a configuration file it does not use.
    pub fn reader() -> Self {
        Self { loaded: None }
    }

    /// The configuration, for a request that starts lanes.
    fn loaded(&self) -> Result<&Loaded, CommandError> {
        self.loaded.as_ref().ok_or_else(|| {
            CommandError::invalid(
                "no_configuration",
                "this pool was made without a configuration (Pool::reader): it cannot start or adopt lanes",
            )
        })
    }

    /// Runs `request`, telling `observer` of its progress, and replies with what it came to.
    pub async fn handle(
        &self,
        request: PoolRequest,
        observer: Arc<dyn Observer>,
    ) -> Result<PoolReply, CommandError> {
        Ok(match request {
            PoolRequest::Spawn(spawn) => {
                PoolReply::Spawn(crate::start::spawn(self.loaded()?, spawn, observer).await?)
            }
            PoolRequest::Adopt(adopt) => {
                PoolReply::Adopt(crate::adoption::adopt(self.loaded()?, adopt, observer).await?)
            }
            PoolRequest::Board(board) => PoolReply::Board(crate::board::board(&board)?),
            PoolRequest::Gc(gc) => PoolReply::Gc(crate::gc::gc(&gc, &|lane, checked, of| {
                observer.judging(lane, checked, of)
            })?),
        })
    }
}
