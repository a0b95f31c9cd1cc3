//! Throttled fetches: a remote is fetched at most once per interval per repository, and never
//! twice at once, whatever the number of lanes, threads and processes asking.
//!
//! Two files in `<common>/clawpool/` make it so. `fetch.lock` is an OS file lock (see
//! [`crate::lock`]) held while deciding and fetching, so a second caller waits for the fetch
//! in progress instead of starting another. `fetch-stamps` records, per remote, when the last
//! attempt finished and how it ended; a caller that finds the last attempt younger than the
//! interval skips, so the caller that waited on the lock then sees the new stamp and skips too.
//! A failed attempt is recorded as well: an unreachable remote is tried once per interval, not
//! once per lane.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use git2::Repository;
use serde::{Deserialize, Serialize};

use crate::{Repo, WorktreeError, git, lock};

/// How often, and for how long at most, a remote is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchOptions {
    /// No fetch of the same remote starts within this long after the previous one finished
    /// (succeeded or failed). Zero fetches every time (still one at a time).
    pub min_interval: Duration,
    /// A fetch still running after this long is killed and counts as failed.
    pub timeout: Duration,
}

impl Default for FetchOptions {
    /// Every 5 minutes at most, given 60 seconds.
    fn default() -> Self {
        FetchOptions {
            min_interval: Duration::from_secs(300),
            timeout: Duration::from_secs(60),
        }
    }
}

/// What [`fetch_if_due`] did.
///
/// In JSON: `{"outcome": "fetched", …}` or `{"outcome": "skipped", …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum FetchOutcome {
    /// This call fetched the remote, successfully.
    Fetched {
        /// The remote.
        remote: String,
        /// When the fetch finished, in seconds since the Unix epoch.
        at: u64,
    },
    /// The remote was fetched (or tried) less than the interval ago, by this process or
    /// another; nothing was run.
    Skipped {
        /// The remote.
        remote: String,
        /// When that attempt finished, in seconds since the Unix epoch.
        last_attempt: u64,
        /// Why that attempt failed, if it did: until the interval has passed, the
        /// remote-tracking refs are as old as the fetch before it.
        last_error: Option<String>,
    },
}

/// Fetches `remote` (`git fetch <remote>`) unless it was fetched, or tried, less than
/// `options.min_interval` ago, waiting first for any fetch of this repository in progress.
///
/// A failed or timed-out fetch is an error ([`WorktreeError::Git`],
/// [`WorktreeError::TimedOut`]) and is recorded like a successful one, so callers within the
/// interval get [`FetchOutcome::Skipped`] with the error instead of trying again.
/// A name that is not a configured remote is [`WorktreeError::UnknownRemote`].
///
/// The fetch updates remote-tracking refs only: no worktree, no local branch, and not
/// `FETCH_HEAD` (a person's `git merge FETCH_HEAD` in the main worktree keeps meaning what
/// they fetched). Submodules are not fetched.
pub fn fetch_if_due(
    repo: &Repo,
    remote: &str,
    options: &FetchOptions,
) -> Result<FetchOutcome, WorktreeError> {
    fetch_if_due_in(&repo.git2()?, repo.root(), remote, options)
}

/// [`fetch_if_due`] with the repository open (any of its worktrees: refs, config and the
/// stamps are shared); `dir` is the worktree git runs in.
pub(crate) fn fetch_if_due_in(
    git: &Repository,
    dir: &Path,
    remote: &str,
    options: &FetchOptions,
) -> Result<FetchOutcome, WorktreeError> {
    if remote.starts_with('-') || git.find_remote(remote).is_err() {
        return Err(WorktreeError::UnknownRemote {
            remote: remote.to_owned(),
            repo: dir.to_path_buf(),
        });
    }
    let common = git.commondir();
    let stamps = stamps_path(common);
    // Without the lock first: the stamps file is only ever replaced whole, and most calls
    // (one per lane per check) find a recent stamp and need not queue behind a fetch.
    if let Some(skipped) = recent(&read_stamps(&stamps)?, remote, options.min_interval) {
        return Ok(skipped);
    }
    let _lock = lock::acquire_fetch(common)?;
    // Again under the lock: whoever held it before may just have fetched.
    let mut all = read_stamps(&stamps)?;
    if let Some(skipped) = recent(&all, remote, options.min_interval) {
        return Ok(skipped);
    }
    let args = [
        "fetch",
        "--quiet",
        // FETCH_HEAD belongs to the worktree git runs in (a lane's, or the main one, where a
        // person may be about to `git merge FETCH_HEAD`): left alone. Needs git 2.29.
        "--no-write-fetch-head",
        "--no-recurse-submodules",
        "--",
        remote,
    ]
    .map(OsStr::new);
    let result = git::run_with_timeout(dir, &args, options.timeout);
    let at = now_millis();
    let error = result.as_ref().err().map(ToString::to_string);
    all.retain(|stamp| stamp.remote != remote);
    all.push(Stamp {
        remote: remote.to_owned(),
        at,
        error,
    });
    write_stamps(&stamps, &all)?;
    result.map(|_| FetchOutcome::Fetched {
        remote: remote.to_owned(),
        at: at / 1000,
    })
}

/// The last attempt to fetch one remote.
#[derive(Debug)]
struct Stamp {
    remote: String,
    /// When it finished, in milliseconds since the Unix epoch.
    at: u64,
    /// Why it failed, if it did.
    error: Option<String>,
}

fn stamps_path(common: &Path) -> PathBuf {
    crate::layout::StateDir::of(common).fetch_stamps()
}

/// The outcome for a remote whose last attempt is younger than `interval`, if it is.
fn recent(stamps: &[Stamp], remote: &str, interval: Duration) -> Option<FetchOutcome> {
    let stamp = stamps.iter().find(|s| s.remote == remote)?;
    let now = now_millis();
    // A stamp in the future means the clock went back: fetch rather than wait for it.
    let age = now.checked_sub(stamp.at)?;
    (u128::from(age) < interval.as_millis()).then(|| FetchOutcome::Skipped {
        remote: remote.to_owned(),
        last_attempt: stamp.at / 1000,
        last_error: stamp.error.clone(),
    })
}

/// The stamps file: one line per remote, `<millis>\t<remote>\t<error or nothing>`. A remote
/// name cannot contain a tab or a newline (ref names exclude control characters) and errors
/// are written on one line, so the format needs no quoting. Lines that do not parse are
/// ignored: the worst a damaged file causes is one fetch too many.
fn read_stamps(path: &Path) -> Result<Vec<Stamp>, WorktreeError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(WorktreeError::io("read", path, source)),
    };
    Ok(text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let at = fields.next()?.parse().ok()?;
            let remote = fields.next()?.to_owned();
            let error = fields.next().filter(|e| !e.is_empty()).map(str::to_owned);
            Some(Stamp { remote, at, error })
        })
        .collect())
}

/// Replaces the stamps file whole (written aside, renamed over), so a reader without the lock
/// never sees half of it.
fn write_stamps(path: &Path, stamps: &[Stamp]) -> Result<(), WorktreeError> {
    let mut text = String::from("# clawpool: when each remote was last fetched (see fetch.lock)\n");
    for stamp in stamps {
        let error = stamp
            .error
            .as_deref()
            .unwrap_or("")
            .replace(['\n', '\r', '\t'], " ");
        text.push_str(&format!("{}\t{}\t{error}\n", stamp.at, stamp.remote));
    }
    crate::replace::replace_file(path, text.as_bytes())
        .map_err(|source| WorktreeError::io("write", path, source))
}

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Now, in seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_secs() -> u64 {
    now_millis() / 1000
}
