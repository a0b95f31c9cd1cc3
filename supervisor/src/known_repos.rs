//! The user's index of repositories with lanes is the pool's ([`clawpool_pool::known_repos`]):
//! `spawn` adds a repository when it registers a lane there and `gc` drops it with its last
//! lane. The binary's commands that read it (`ui --all`) reach it by this name.

pub use clawpool_pool::known_repos::*;
