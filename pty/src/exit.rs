//! [`ExitStatus`]: how a worker's process ended, whichever transport ran it.

/// How a worker's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
    /// It is gone but its status could not be read: the tmux server went away, or the pane
    /// never reported its end.
    Lost,
}

impl ExitStatus {
    /// Exited with code 0.
    pub fn success(self) -> bool {
        self == ExitStatus::Exited(0)
    }

    /// The exit code a shell would report: the code, or 128 plus the signal number.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Exited(code) => code,
            ExitStatus::Signaled(signal) => 128 + signal,
            ExitStatus::Lost => 255,
        }
    }

    /// Decodes a `waitpid` status word.
    pub(crate) fn from_wait_status(status: libc::c_int) -> Self {
        if libc::WIFSIGNALED(status) {
            ExitStatus::Signaled(libc::WTERMSIG(status))
        } else {
            ExitStatus::Exited(libc::WEXITSTATUS(status))
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Exited(code) => write!(f, "exit code {code}"),
            ExitStatus::Signaled(signal) => write!(f, "killed by signal {signal}"),
            ExitStatus::Lost => f.write_str("exit status lost"),
        }
    }
}
