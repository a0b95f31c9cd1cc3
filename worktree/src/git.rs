//! Running the git CLI for the writes (`worktree add`, `worktree remove`, `branch -D`).
//!
//! Writes go through git itself rather than libgit2 so that they behave exactly like a person's
//! git: the same hooks, the same safety checks (a branch checked out twice, a locked worktree),
//! the same on-disk format whatever extensions the repository uses.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

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
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args);
    for var in REPO_ENV {
        cmd.env_remove(var);
    }
    // Nothing here may ever wait for a person: no credential prompt, no pager, no editor.
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = cmd
        .output()
        .map_err(|source| WorktreeError::io("run git in", dir, source))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Err(WorktreeError::Git {
        command: command_line(args),
        stderr: if stderr.is_empty() {
            format!("git exited with {}", output.status)
        } else {
            stderr
        },
    })
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
