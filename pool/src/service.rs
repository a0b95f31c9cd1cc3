//! The pool's one entry point: [`Pool::handle`] runs any [`PoolRequest`] with the
//! configuration the pool was given and replies with its typed [`PoolReply`]. Spawn, adopt and gc
//! stream their progress through the caller's [`Observer`] and reply once every lane is over,
//! so one entry point serves them as well as a one-shot request.

use std::path::Path;
use std::sync::Arc;

use crate::config::{ConfigInput, Loaded};
use crate::error::CommandError;
use crate::observer::Observer;
use crate::request::{PoolReply, PoolRequest};

/// A repository's pool as one caller sees it: the configuration its requests run with.
pub struct Pool {
    config: Config,
}

/// Where the pool's configuration comes from.
enum Config {
    /// Loaded by the caller, once.
    Loaded(Box<Loaded>),
    /// Loaded for each request that needs it, for the repository the request acts in: a
    /// configuration file edited between two requests is read afresh, and a request that
    /// needs none (most operator commands) never fails on one.
    Input(ConfigInput),
    /// None: the pool only reads and collects lanes ([`Pool::reader`]).
    None,
}

impl Pool {
    /// The pool with the configuration `loaded` (the pool's input).
    pub fn new(loaded: Loaded) -> Self {
        Self {
            config: Config::Loaded(Box::new(loaded)),
        }
    }

    /// The pool reading its configuration as `input` locates it, for each request that needs
    /// it (a long-lived caller, or a command that may need none).
    pub fn reading(input: ConfigInput) -> Self {
        Self {
            config: Config::Input(input),
        }
    }

    /// A pool for the requests that need no configuration — [`PoolRequest::Board`] and
    /// [`PoolRequest::Gc`] read the lanes' records and git, never a profile — so that a board
    /// is not refused, nor slowed, by a configuration file it does not use.
    pub fn reader() -> Self {
        Self {
            config: Config::None,
        }
    }

    /// The configuration for a request acting in `dir`.
    fn loaded(&self, dir: &Path) -> Result<LoadedRef<'_>, CommandError> {
        Ok(match &self.config {
            Config::Loaded(loaded) => LoadedRef::Given(loaded),
            Config::Input(input) => {
                LoadedRef::Read(Box::new(Loaded::load_input(input, Some(dir))?))
            }
            Config::None => {
                return Err(CommandError::invalid(
                    "no_configuration",
                    "this pool was made without a configuration (Pool::reader): it cannot start, adopt or operate on lanes",
                ));
            }
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
                let loaded = self.loaded(&spawn.repo)?;
                PoolReply::Spawn(crate::start::spawn(&loaded, spawn, observer).await?)
            }
            PoolRequest::Adopt(adopt) => {
                let loaded = self.loaded(&adopt.repo)?;
                PoolReply::Adopt(crate::adoption::adopt(&loaded, adopt, observer).await?)
            }
            PoolRequest::Operate(operate) => PoolReply::Operate(
                crate::operator::operate(operate, |lane| self.loaded(&lane.dir)).await?,
            ),
            PoolRequest::MergeForward(lane) => {
                PoolReply::MergeForward(crate::lane_checks::merge_forward(&lane).await?)
            }
            PoolRequest::Verify(verify) => {
                PoolReply::Verify(crate::lane_checks::verify(&verify).await?)
            }
            PoolRequest::Recover(recover) => PoolReply::Recover(
                crate::recover::recover(recover, |lane| self.loaded(&lane.dir)).await?,
            ),
            PoolRequest::AnswerRemembering(answer) => {
                PoolReply::AnswerRemembering(crate::remember::answer_remembering(answer).await?)
            }
            PoolRequest::Board(board) => PoolReply::Board(crate::board::board(&board)?),
            PoolRequest::Gc(gc) => PoolReply::Gc(crate::gc::gc(&gc, &|lane, checked, of| {
                observer.judging(lane, checked, of)
            })?),
        })
    }
}

/// The configuration for one request: the pool's own, or one read for it.
enum LoadedRef<'a> {
    Given(&'a Loaded),
    Read(Box<Loaded>),
}

impl std::ops::Deref for LoadedRef<'_> {
    type Target = Loaded;

    fn deref(&self) -> &Loaded {
        match self {
            LoadedRef::Given(loaded) => loaded,
            LoadedRef::Read(loaded) => loaded,
        }
    }
}
