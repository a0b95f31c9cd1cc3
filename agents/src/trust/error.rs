//! The one error type of trust resolution.
//!
//! Every variant names the path it is about: these errors end up in `clawpool doctor` output
//! and lane events, where "which file?" is the first question a person asks.

use std::io;
use std::path::PathBuf;

/// Why a trust decision or a trust-store edit failed.
///
/// An agent's config file that cannot be understood is never overwritten: the error says so
/// ("left untouched") and the lane simply goes through the trust dialog instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The lane's folder does not exist, so there is nothing to decide about.
    #[error("lane path {} does not exist", path.display())]
    LaneNotFound {
        /// The lane path as given.
        path: PathBuf,
    },
    /// The lane's folder exists but its canonical path could not be resolved.
    #[error("cannot resolve lane path {}: {source}", path.display())]
    LanePath {
        /// The lane path as given.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// Trust stores are keyed by absolute paths; a relative one would trust nothing (or the
    /// wrong thing).
    #[error("project path {} is not absolute; trust stores are keyed by absolute paths", path.display())]
    ProjectNotAbsolute {
        /// The project path as given.
        path: PathBuf,
    },
    /// The project path cannot be written as a JSON or TOML key.
    #[error("project path {} is not valid UTF-8, so it cannot be a trust-store key", path.display())]
    ProjectNotUtf8 {
        /// The project path as given.
        path: PathBuf,
    },
    /// The config file (or its folder) could not be read.
    #[error("cannot read {}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// The config file is not UTF-8 text.
    #[error("{} is not valid UTF-8; left untouched", file.display())]
    NotUtf8 {
        /// The file.
        file: PathBuf,
    },
    /// The Claude Code config file is not valid JSON.
    #[error("{} is not valid JSON (line {line}, column {column}): {source}; left untouched", file.display())]
    InvalidJson {
        /// The file.
        file: PathBuf,
        /// 1-based line of the first error.
        line: usize,
        /// 1-based column of the first error.
        column: usize,
        /// The parser's message.
        source: serde_json::Error,
    },
    /// The Codex config file is not valid TOML.
    #[error("{} is not valid TOML (line {line}, column {column}): {message}; left untouched", file.display())]
    InvalidToml {
        /// The file.
        file: PathBuf,
        /// 1-based line of the first error.
        line: usize,
        /// 1-based column of the first error.
        column: usize,
        /// The parser's message (without its own copy of the offending line).
        message: String,
    },
    /// The file parses, but not into the shape the agent uses (e.g. `projects` is a string),
    /// so editing it would mean guessing.
    #[error("{}: {what}; left untouched", file.display())]
    UnexpectedShape {
        /// The file.
        file: PathBuf,
        /// What was expected and found.
        what: String,
    },
    /// The config path is a symlink to nothing. Writing there would replace the link (the
    /// user's dotfile setup) with a plain file, so clawpool refuses.
    #[error("{} is a symlink to a missing file; left untouched", file.display())]
    DanglingSymlink {
        /// The file as given.
        file: PathBuf,
    },
    /// The sibling lock file could not be created or locked.
    #[error("cannot lock {}: {source}", lock_file.display())]
    Lock {
        /// The lock file (`<file>.clawpool.lock`).
        lock_file: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// Writing the new contents failed; the original file is unchanged and no temporary file
    /// is left behind.
    #[error("cannot write {}: {source}", file.display())]
    Write {
        /// The file.
        file: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
}
