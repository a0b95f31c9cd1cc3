//! The pool's one entry point: [`Pool::handle`] runs any [`PoolRequest`] with the
//! configuration the pool was given and replies with its typed [`PoolReply`]. Spawn and adopt
//! stream their progress through the caller's [`Observer`] and reply once every lane is over,
//! so one entry point serves them as well as a one-shot request.

use std::sync::Arc;

use crate::config::Loaded;
use crate::error::CommandError;
use crate::observer::Observer;
use crate::request::{PoolReply, PoolRequest};

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
