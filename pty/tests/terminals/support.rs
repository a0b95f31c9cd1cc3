//! Helpers that read like the domain: wait for the screen to show something, wait for a
//! process to be gone, make a private tmux server that is always cleaned up.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use clawpool_pty::{ScreenSnapshot, TmuxConfig, TmuxServer, Worker};
use tokio::io::unix::AsyncFd;

/// Generous upper bound for anything a test waits for; only reached when the feature is broken.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Waits (on screen-changed notifications, not by polling) until `pred` holds for the screen.
pub async fn screen_until(
    worker: &Worker,
    what: &str,
    pred: impl Fn(&ScreenSnapshot) -> bool,
) -> ScreenSnapshot {
    let mut changes = worker.changes();
    let wait = async {
        loop {
            let snap = worker.snapshot();
            if pred(&snap) {
                return snap;
            }
            if !changes.changed().await {
                let snap = worker.snapshot();
                assert!(
                    pred(&snap),
                    "output ended before {what}; screen:\n{}",
                    snap.text()
                );
                return snap;
            }
        }
    };
    match tokio::time::timeout(PATIENCE, wait).await {
        Ok(snap) => snap,
        Err(_) => panic!(
            "timed out waiting for {what}; screen:\n{}",
            worker.snapshot().text()
        ),
    }
}

/// Waits until the screen shows `needle`.
pub async fn screen_shows(worker: &Worker, needle: &str) -> ScreenSnapshot {
    screen_until(worker, &format!("{needle:?} on screen"), |s| {
        s.contains(needle)
    })
    .await
}

/// Waits for the worker to exit.
pub async fn exited(worker: &Worker) -> clawpool_pty::ExitStatus {
    tokio::time::timeout(PATIENCE, worker.wait())
        .await
        .expect("the worker exits in time")
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

/// Waits until the process `pid` (not necessarily our child) has exited, through a pidfd.
pub async fn gone(pid: u32) {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return; // Already gone (ESRCH).
    }
    // SAFETY: a new fd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the fd is owned by the AsyncFd from here on.
    let fd = unsafe { AsyncFd::register(fd) }.expect("register pidfd");
    let _exited = tokio::time::timeout(PATIENCE, fd.readable())
        .await
        .expect("the process exits in time")
        .expect("pidfd readable");
}

/// A private tmux server in a throwaway socket folder, killed when dropped.
pub struct PrivateTmux {
    pub dir: tempfile::TempDir,
    pub config: TmuxConfig,
}

impl PrivateTmux {
    pub fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir for tmux sockets");
        let config = TmuxConfig {
            tmpdir: Some(dir.path().to_owned()),
            ..TmuxConfig::new(format!("clawpool-test-{name}-{}", std::process::id()))
        };
        Self { dir, config }
    }

    pub async fn connect(&self) -> TmuxServer {
        TmuxServer::connect(self.config.clone())
            .await
            .expect("private tmux server starts")
    }

    pub fn socket_path(&self) -> PathBuf {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        self.dir
            .path()
            .join(format!("tmux-{uid}"))
            .join(&self.config.socket_name)
    }
}

impl Drop for PrivateTmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.config.socket_name)
            .arg("kill-server")
            .env("TMUX_TMPDIR", self.dir.path())
            .env_remove("TMUX")
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// The pid a test program printed as `<label>=<pid>` on a row of its screen.
pub fn pid_on_screen(snap: &ScreenSnapshot, label: &str) -> u32 {
    let prefix = format!("{label}=");
    snap.rows
        .iter()
        .find_map(|row| row.strip_prefix(prefix.as_str()))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix}<pid> on screen:\n{}", snap.text()))
}

/// Resizes a worker running `read x; stty size` and checks the program sees the new size.
pub async fn assert_resize_reaches(worker: &Worker) {
    worker
        .resize(clawpool_pty::TermSize {
            rows: 30,
            cols: 100,
        })
        .await
        .expect("resize");
    worker
        .send(&clawpool_pty::Input::Key(clawpool_pty::Key::Enter))
        .await
        .expect("enter");
    screen_shows(worker, "30 100").await;
}
