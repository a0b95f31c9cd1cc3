//! The PTY transport: a worker in a pseudo-terminal this process owns.
//!
//! portable-pty opens the terminal; the child is started without `fork`
//! ([`crate::session_child`]), as a session and process-group leader with the terminal as its
//! controlling tty. Everything after that avoids portable-pty's pitfalls: its reader blocks a
//! thread, so the master side is read through a non-blocking duplicate under `AsyncFd`;
//! dropping its writer types a newline and EOF, so its writer is never taken and input goes
//! through the same duplicate; signals go to the whole process group with `killpg`, not to
//! the child alone.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portable_pty::{MasterPty, PtySize, native_pty_system};
use tokio::io::unix::AsyncFd;
use tokio::sync::{oneshot, watch};

use crate::rawlog::RawLog;
use crate::screen::{ScreenModel, ScreenOptions};
use crate::session_child::SessionChild;
use crate::worker::{Transport, TransportFuture};
use crate::{
    ExitStatus, Input, ScreenHub, SpawnError, SpawnSpec, TermSize, Worker, WorkerError, text_bytes,
};

pub(crate) struct PtyTransport {
    pid: u32,
    /// Kept for resizing; the worker's output is read through `io`, not through this.
    master: Mutex<Box<dyn MasterPty + Send>>,
    io: Arc<PtyIo>,
}

/// The non-blocking duplicate of the master side, shared by the reader task (which also
/// writes query replies) and `send`.
struct PtyIo {
    fd: AsyncFd<OwnedFd>,
    /// Serialises writers so a reply can never land in the middle of typed text.
    write_lock: tokio::sync::Mutex<()>,
}

pub(crate) async fn spawn(spec: SpawnSpec) -> Result<Worker, SpawnError> {
    let program = spec.resolve()?;
    let size = pty_size(spec.size);
    let pair = native_pty_system()
        .openpty(size)
        .map_err(|e| SpawnError::Pty(format!("{e:#}")))?;

    let raw_log = spec
        .raw_log
        .clone()
        .map(RawLog::open)
        .transpose()
        .map_err(|source| SpawnError::Io {
            what: "opening the raw terminal log",
            source,
        })?;
    let master_fd = pair
        .master
        .as_raw_fd()
        .ok_or_else(|| SpawnError::Pty("the pty master has no file descriptor".into()))?;
    let io_fd = nonblocking_dup(master_fd).map_err(|source| SpawnError::Io {
        what: "duplicating the pty master",
        source,
    })?;

    let tty = pair
        .master
        .tty_name()
        .ok_or_else(|| SpawnError::Pty("the pty's terminal has no name".into()))?;
    let pid = SessionChild {
        program: &program,
        args: &spec.args,
        cwd: &spec.cwd,
        env: worker_env(&spec),
        tty: &tty,
    }
    .spawn()
    .map_err(|source| SpawnError::Io {
        what: "starting the worker (posix_spawn)",
        source,
    })?;
    // The child opened its own copy of the slave side; ours would keep the terminal open
    // after every process using it is gone, hiding the end of the stream.
    drop(pair.slave);

    let exited = match pidfd_open(pid) {
        Ok(pidfd) => pidfd,
        Err(source) => {
            kill_group(pid, libc::SIGKILL);
            reap(pid);
            return Err(SpawnError::Io {
                what: "watching the worker process (pidfd_open)",
                source,
            });
        }
    };
    let fd = register(io_fd).map_err(|source| SpawnError::Io {
        what: "registering the pty with the runtime",
        source,
    })?;

    let model = ScreenModel::new(ScreenOptions {
        size: spec.size,
        scrollback_lines: spec.scrollback_lines,
        answer_queries: true,
    });
    let hub = ScreenHub::start(model, raw_log);
    let io = Arc::new(PtyIo {
        fd,
        write_lock: tokio::sync::Mutex::new(()),
    });
    let (exit_tx, exit_rx) = watch::channel(None);
    let (status_tx, status_rx) = oneshot::channel();
    tokio::spawn(wait_for_exit(pid, exited, status_tx));
    tokio::spawn(pump_output(
        Arc::clone(&hub),
        Arc::clone(&io),
        status_rx,
        exit_tx,
        spec.drain_timeout,
    ));

    Ok(Worker {
        hub,
        transport: Arc::new(PtyTransport {
            pid,
            master: Mutex::new(pair.master),
            io,
        }),
        exit: exit_rx,
    })
}

impl Worker {
    /// Starts a worker in a pseudo-terminal owned by this process. It leads its own process
    /// group; when this process exits, the terminal closes and the worker gets SIGHUP.
    pub async fn spawn_pty(spec: SpawnSpec) -> Result<Worker, SpawnError> {
        spawn(spec).await
    }
}

impl Transport for PtyTransport {
    fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }

    fn send<'a>(
        &'a self,
        hub: &'a ScreenHub,
        input: &'a Input,
    ) -> TransportFuture<'a, Result<(), WorkerError>> {
        let bytes = match input {
            Input::Text(text) => text_bytes(text, hub.bracketed_paste()),
            Input::Key(key) => key.bytes(hub.application_cursor()),
            Input::Bytes(bytes) => bytes.clone(),
        };
        Box::pin(async move {
            self.io.write_all(&bytes).await?;
            Ok(())
        })
    }

    fn resize(&self, size: TermSize) -> TransportFuture<'_, Result<(), WorkerError>> {
        let resized = self
            .master
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .resize(pty_size(size))
            .map_err(|e| WorkerError::Io(io::Error::other(format!("{e:#}"))));
        Box::pin(std::future::ready(resized))
    }

    fn signal_group(&self, signal: libc::c_int) {
        kill_group(self.pid, signal);
    }
}

impl Drop for PtyTransport {
    fn drop(&mut self) {
        // A worker nobody holds any more must not outlive its handle as an orphan. Until it
        // is reaped its pid cannot be reused, so this reaches only its own group.
        kill_group(self.pid, libc::SIGKILL);
    }
}

impl PtyIo {
    async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        let _serialised = self.write_lock.lock().await;
        while !bytes.is_empty() {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| {
                // SAFETY: the fd is open for as long as `self.fd` lives, and the buffer is valid
                // for `bytes.len()` bytes.
                let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(n)) => bytes = &bytes[n..],
                Ok(Err(err)) if err.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    /// Reads one chunk. `Ok(None)` means the slave side is closed (Linux reports EIO).
    async fn read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| {
                // SAFETY: as in `write_all`; the buffer is valid for `buf.len()` bytes.
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(0)) => return Ok(None),
                Ok(Ok(n)) => return Ok(Some(n)),
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => return Ok(None),
                Ok(Err(err)) if err.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => {}
            }
        }
    }
}

/// Waits on the pidfd, clears out anything left in the worker's process group, then reaps.
async fn wait_for_exit(pid: u32, pidfd: OwnedFd, status_tx: oneshot::Sender<ExitStatus>) {
    let status = match register(pidfd) {
        Ok(pidfd) => match pidfd.readable().await {
            Ok(_exited) => {
                // The worker is a zombie now, so its pid (the group id) is still reserved:
                // a grandchild that kept the terminal open is killed here and cannot orphan.
                kill_group(pid, libc::SIGKILL);
                reap(pid)
            }
            Err(_) => blocking_reap(pid).await,
        },
        Err(_) => blocking_reap(pid).await,
    };
    let _ = status_tx.send(status);
}

/// The most one read of a PTY's master side returns.
const PTY_READ_CHUNK: usize = 4 * 1024;

/// Reads output into the hub until the terminal closes, or until the drain deadline after
/// the child's exit, whichever comes first; then publishes the exit status.
async fn pump_output(
    hub: Arc<ScreenHub>,
    io: Arc<PtyIo>,
    mut status_rx: oneshot::Receiver<ExitStatus>,
    exit_tx: watch::Sender<Option<ExitStatus>>,
    drain_timeout: Duration,
) {
    // One read of a PTY's master side returns at most what the line discipline holds, 4 KiB
    // (Linux's N_TTY_BUF_SIZE): a larger buffer is never filled, yet it is kept (and, zeroed,
    // resident) for the worker's whole life, in every lane.
    let mut buf = vec![0u8; PTY_READ_CHUNK];
    let mut status: Option<ExitStatus> = None;
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let read = async {
            match deadline {
                Some(at) => tokio::time::timeout_at(at, io.read(&mut buf))
                    .await
                    .unwrap_or(Ok(None)),
                None => io.read(&mut buf).await,
            }
        };
        tokio::select! {
            biased;
            exited = &mut status_rx, if status.is_none() => {
                status = Some(exited.unwrap_or(ExitStatus::Lost));
                deadline = Some(tokio::time::Instant::now() + drain_timeout);
            }
            chunk = read => match chunk {
                Ok(Some(n)) => {
                    let replies = hub.feed(&buf[..n]);
                    if !replies.is_empty() && io.write_all(&replies).await.is_err() {
                        tracing::debug!("could not answer a terminal query; the worker is gone");
                    }
                }
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "reading the worker's terminal failed");
                    break;
                }
            },
        }
    }
    let status = match status {
        Some(status) => status,
        None => status_rx.await.unwrap_or(ExitStatus::Lost),
    };
    hub.finish();
    let _ = exit_tx.send(Some(status));
}

/// Registers an fd we own with the runtime's reactor.
pub(crate) fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `fd` is an open descriptor owned by the AsyncFd from here on, so it stays valid
    // until the AsyncFd (and with it the registration) is dropped.
    unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// The worker's whole environment: this process's (none with `clean_env`), `TERM` when neither
/// gives one, then the spec's variables, a later one replacing an earlier one of the same name;
/// never a tmux client's variables ([`crate::spec::TMUX_VARS`]).
fn worker_env(spec: &SpawnSpec) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> = if spec.clean_env {
        BTreeMap::new()
    } else {
        std::env::vars_os().collect()
    };
    if spec.env_value("TERM").is_none() {
        env.insert("TERM".into(), "xterm-256color".into());
    }
    env.extend(spec.env.iter().cloned());
    for name in crate::spec::TMUX_VARS {
        env.remove(OsStr::new(name));
    }
    env.into_iter().collect()
}

fn pty_size(size: TermSize) -> PtySize {
    PtySize {
        rows: size.rows,
        cols: size.cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

fn nonblocking_dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a valid fd; the result is a new fd we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is a freshly created fd owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(dup) };
    // SAFETY: plain fcntl calls on an fd we own.
    unsafe {
        let flags = libc::fcntl(dup, libc::F_GETFL);
        if flags < 0 || libc::fcntl(dup, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(owned)
}

/// A pidfd for `pid`: readable once the process has exited (Linux 5.3+).
pub(crate) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: the syscall takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The exit status the kernel keeps on a pidfd (`PIDFD_GET_INFO` with `PIDFD_INFO_EXIT`,
/// Linux 6.15+): readable by anyone holding a pidfd opened before the process was reaped, so
/// it does not depend on the reaper (tmux, for panes) passing the status on. `None` before the
/// process has been reaped, or on older kernels.
pub(crate) fn pidfd_exit_status(pidfd: &impl AsRawFd) -> Option<ExitStatus> {
    /// `struct pidfd_info` as of its first version (64 bytes, `PIDFD_INFO_SIZE_VER0`).
    #[repr(C)]
    #[derive(Default)]
    struct PidfdInfo {
        mask: u64,
        cgroupid: u64,
        ids: [u32; 11],
        exit_code: i32,
    }
    const PIDFD_INFO_EXIT: u64 = 1 << 3;
    // _IOWR(PIDFS_IOCTL_MAGIC = 0xFF, 11, struct pidfd_info of 64 bytes)
    const PIDFD_GET_INFO: libc::c_ulong = 0xC040_FF0B;
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    // SAFETY: the ioctl writes at most 64 bytes (the size encoded in the request) into `info`,
    // which is 64 bytes and lives across the call.
    let r = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO,
            &mut info as *mut PidfdInfo,
        )
    };
    (r == 0 && info.mask & PIDFD_INFO_EXIT != 0)
        .then(|| ExitStatus::from_wait_status(info.exit_code))
}

pub(crate) fn kill_group(pgid: u32, signal: libc::c_int) {
    // SAFETY: sending a signal has no memory-safety preconditions. ESRCH (group gone) is the
    // expected outcome once everything has exited.
    unsafe {
        libc::killpg(pgid as libc::pid_t, signal);
    }
}

fn reap(pid: u32) -> ExitStatus {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid writes one int into `status`.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        if r == pid as libc::pid_t {
            return ExitStatus::from_wait_status(status);
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            // Someone else reaped it.
            return ExitStatus::Lost;
        }
    }
}

async fn blocking_reap(pid: u32) -> ExitStatus {
    tokio::task::spawn_blocking(move || reap(pid))
        .await
        .unwrap_or(ExitStatus::Lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_at_least(major: u32, minor: u32) -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
    }

    #[test]
    fn a_pidfd_keeps_the_exit_status_after_someone_else_reaps() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 9"])
            .spawn()
            .expect("spawn sh");
        let pidfd = pidfd_open(child.id()).expect("pidfd_open");
        assert!(child.wait().expect("reap").code() == Some(9));
        let status = pidfd_exit_status(&pidfd);
        if kernel_at_least(6, 15) {
            assert_eq!(status, Some(ExitStatus::Exited(9)));
        } else {
            assert_eq!(status, None);
        }
    }
}
