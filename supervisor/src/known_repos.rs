//! The user's index of repositories with lanes is the pool's ([`clawpool_pool::known_repos`]):
//! `spawn` adds a repository when it registers a lane there. The binary's commands that read
//! it (`ui --all`, `board --all`) or drop a repository from it (`gc`) reach it by this name.

pub use clawpool_pool::known_repos::*;
