//! What to start and how: the description of a worker shared by every transport, and the
//! checks that turn bad input into a clear error before anything is started.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::rawlog::RawLogConfig;
use crate::screen::DEFAULT_SCROLLBACK_LINES;
use crate::{SpawnError, TermSize};

/// How long to keep reading after a worker exits, unless a spec says otherwise.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_millis(250);

/// The variables through which a process reaches a tmux server (`TMUX`: its socket, and
/// `TMUX_PANE`), which tmux sets in every pane: no worker is started with them, so an agent
/// cannot drive its own terminal, or another lane's session on the same private server, by
/// running `tmux` (nor the tmux of a person who started clawpool inside one).
pub const TMUX_VARS: [&str; 2] = ["TMUX", "TMUX_PANE"];

/// A worker to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The program: a name looked up in `PATH`, or a path (relative paths are taken from
    /// `cwd`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The folder it starts in. It must exist.
    pub cwd: PathBuf,
    /// Variables set for the worker, on top of the inherited environment (or alone, with
    /// `clean_env`).
    pub env: Vec<(OsString, OsString)>,
    /// Start from an empty environment instead of this process's.
    pub clean_env: bool,
    /// The terminal size.
    pub size: TermSize,
    /// Where to keep the raw byte stream, if anywhere.
    pub raw_log: Option<RawLogConfig>,
    /// How many scrolled-off lines the screen keeps.
    pub scrollback_lines: usize,
    /// After the worker exits, how long to keep reading output it (or a grandchild holding
    /// the terminal open) still has in flight.
    pub drain_timeout: Duration,
}

impl SpawnSpec {
    /// A worker running `program` in `cwd` at 120x40, inheriting the environment.
    pub fn new(program: impl Into<OsString>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            clean_env: false,
            size: TermSize::default(),
            raw_log: None,
            scrollback_lines: DEFAULT_SCROLLBACK_LINES,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets one environment variable.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The value `key` will have in the worker's environment.
    pub fn env_value(&self, key: &str) -> Option<OsString> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .or_else(|| {
                if self.clean_env {
                    None
                } else {
                    std::env::var_os(key)
                }
            })
    }

    /// Checks the folder and finds the program, as the worker's own `PATH` would.
    pub(crate) fn resolve(&self) -> Result<PathBuf, SpawnError> {
        if !self.cwd.is_dir() {
            return Err(SpawnError::CwdNotFound {
                cwd: self.cwd.clone(),
            });
        }
        resolve_program(&self.program, &self.cwd, self.env_value("PATH").as_deref())
    }
}

/// Finds `program` the way `execvp` would, but reports a miss as an error naming it.
pub fn resolve_program(
    program: &OsStr,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, SpawnError> {
    let not_found = || SpawnError::ProgramNotFound {
        program: program.to_owned(),
    };
    let as_path = Path::new(program);
    if program.is_empty() {
        return Err(not_found());
    }
    if as_path.components().count() > 1 || as_path.is_absolute() {
        let full = cwd.join(as_path);
        return if is_executable(&full) {
            Ok(full)
        } else {
            Err(not_found())
        };
    }
    let default_path = OsString::from("/usr/local/bin:/usr/bin:/bin");
    std::env::split_paths(path_var.unwrap_or(&default_path))
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(not_found)
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
