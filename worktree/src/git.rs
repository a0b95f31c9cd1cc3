//! Running the git CLI for the writes (`worktree add`, `worktree remove`, `branch -D`, `merge`,
//! `rebase`), for `fetch`, and for the history walks (a freshness check's, a lane's own-commit
//! count) in a repository whose commit-graph libgit2 cannot read (see `crate::graph`).
//!
//! Writes go through git itself rather than libgit2 so that they behave exactly like a person's
//! git: the same hooks, the same safety checks (a branch checked out twice, a locked worktree),
//! the same on-disk format whatever extensions the repository uses.

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::WorktreeError;

/// Variables that would point git at another repository, worktree or index than the one in
/// `-C`. They are set when clawpool itself runs inside a git hook or `git rebase --exec`, and
/// must not leak into the commands run here.
const REPO_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// Runs `git -C <dir> <args>` and returns its standard output; a non-zero exit becomes
/// [`WorktreeError::Git`] with git's standard error.
pub(crate) fn run(dir: &Path, args: &[&OsStr]) -> Result<String, WorktreeError> {
    let output = command(dir, args)
        .output()
        .map_err(|source| WorktreeError::io("run git in", dir, source))?;
    finish(args, output.status, &output.stdout, &output.stderr)
}

/// [`run`] for commands that talk to another machine (`fetch`), which can hang on a dead
/// network or a prompt nobody answers: after `timeout` git and everything it started are
/// killed and the result is [`WorktreeError::TimedOut`].
pub(crate) fn run_with_timeout(
    dir: &Path,
    args: &[&OsStr],
    timeout: Duration,
) -> Result<String, WorktreeError> {
    let deadline = Instant::now() + timeout;
    let mut cmd = command(dir, args);
    // Its own process group, so that a timeout also kills the transport git started (`ssh`,
    // `git-remote-https`), which would otherwise hold the pipes open; and so that a transport
    // that tries to prompt on the terminal is stopped (a background group may not read it)
    // instead of waiting for a person.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|source| WorktreeError::io("run git in", dir, source))?;
    // Both pipes are drained by threads (a full pipe would block git) that report when they
    // reach the end, which is when git and every process holding its output have exited: no
    // polling. Either pipe missing cannot happen (both were asked for piped); treat it as empty.
    let (tx, rx) = mpsc::channel();
    let readers = [
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    ];
    for (which, reader) in readers.into_iter().enumerate() {
        let tx = tx.clone();
        thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut reader) = reader {
                // A read error ends the stream; what was read so far is kept.
                let _ = reader.read_to_end(&mut bytes);
            }
            // The receiver is gone only after a timeout, when nobody wants the output.
            let _ = tx.send((which, bytes));
        });
    }
    drop(tx);
    let mut streams: [Option<Vec<u8>>; 2] = [None, None];
    while streams.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((which, bytes)) => streams[which] = Some(bytes),
            Err(_) => {
                kill(&mut child);
                return Err(WorktreeError::TimedOut {
                    command: command_line(args),
                    after: timeout,
                });
            }
        }
    }
    let status = child
        .wait()
        .map_err(|source| WorktreeError::io("wait for git in", dir, source))?;
    let [stdout, stderr] = streams.map(Option::unwrap_or_default);
    finish(args, status, &stdout, &stderr)
}

/// Runs a read-only history query (`rev-list`, `merge-base`, `log`) in `dir` and returns its
/// standard output; an exit status of `absent` (the one a command uses for "there is none",
/// such as `merge-base` finding no common ancestor) is `Ok(None)`, any other non-zero one
/// [`WorktreeError::Git`].
///
/// Unlike [`run`], made to give the same answers libgit2 would for the same question, whatever
/// the environment: `dir` is the working directory (a worktree of the repository), the C
/// locale (messages and numbers as parsed here), no pager, no optional locks (a query must
/// not take `index.lock` or rewrite the index from under a lane's agent), and replace refs
/// ignored (libgit2 does not honour them, so the two would count different histories).
pub(crate) fn read(
    dir: &Path,
    args: &[&OsStr],
    absent: Option<i32>,
) -> Result<Option<String>, WorktreeError> {
    let mut cmd = scrubbed();
    cmd.current_dir(dir)
        .args(["--no-pager", "--no-replace-objects"])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C");
    let output = cmd
        .output()
        .map_err(|source| WorktreeError::io("run git in", dir, source))?;
    if absent.is_some() && output.status.code() == absent {
        return Ok(None);
    }
    finish(args, output.status, &output.stdout, &output.stderr).map(Some)
}

/// `git -C <dir> <args>` with the repository-selecting variables removed and nothing that
/// could wait for a person.
pub(crate) fn command(dir: &Path, args: &[&OsStr]) -> Command {
    let mut cmd = scrubbed();
    cmd.arg("-C").arg(dir).args(args);
    cmd
}

/// A `git` command with the repository-selecting variables removed and nothing that could
/// wait for a person; the caller adds where it runs and the arguments.
fn scrubbed() -> Command {
    let mut cmd = Command::new("git");
    for var in REPO_ENV {
        cmd.env_remove(var);
    }
    // Nothing here may ever wait for a person: no credential prompt, no pager, no editor.
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Standard output on success; [`WorktreeError::Git`] with git's message otherwise.
pub(crate) fn finish(
    args: &[&OsStr],
    status: ExitStatus,
    stdout: &[u8],
    stderr: &[u8],
) -> Result<String, WorktreeError> {
    if status.success() {
        return Ok(String::from_utf8_lossy(stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(stderr).trim().to_owned();
    Err(WorktreeError::Git {
        command: command_line(args),
        stderr: if stderr.is_empty() {
            format!("git exited with {status}")
        } else {
            stderr
        },
    })
}

/// A git command whose output is not what it documents (never seen; a check must still not
/// guess from it).
pub(crate) fn unexpected(command: &str, output: &str) -> WorktreeError {
    WorktreeError::Git {
        command: format!("git {command}"),
        stderr: format!("unexpected output {output:?}"),
    }
}

/// Kills a timed-out git and its process group, and reaps it.
fn kill(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: killpg only sends a signal. The group is the one `process_group(0)` made for
        // this child, whose id cannot have been reused: the child is not reaped until the
        // `wait` below.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
    // Already dead on Unix; elsewhere the only way. Errors mean it exited by itself.
    let _ = child.kill();
    let _ = child.wait();
}

/// The command as a person would type it (without `-C`, which is always the repository).
fn command_line(args: &[&OsStr]) -> String {
    let mut line = String::from("git");
    for arg in args {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}
