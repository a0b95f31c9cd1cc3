//! Showing a worker on the user's own terminal: live (mirroring, with keystrokes passed
//! through) or as printed snapshots.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::Instant;

use clawpool_pty::{Input, ScreenSnapshot, TermSize, Worker};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::cli::OutputFormat;

/// Whether stdout and stdin are both terminals, so the worker can be mirrored live.
pub fn can_mirror() -> bool {
    is_tty(libc::STDIN_FILENO) && is_tty(libc::STDOUT_FILENO)
}

fn is_tty(fd: libc::c_int) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// The user's terminal size, when stdout is a terminal.
pub fn terminal_size() -> Option<TermSize> {
    // SAFETY: TIOCGWINSZ writes one winsize struct.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_row > 0 && ws.ws_col > 0).then_some(TermSize {
        rows: ws.ws_row,
        cols: ws.ws_col,
    })
}

/// Puts the user's terminal in raw mode for as long as it lives.
struct RawMode {
    saved: libc::termios,
}

impl RawMode {
    fn enable() -> std::io::Result<Self> {
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: tcgetattr fills the termios struct for a valid fd.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut raw = saved;
        // SAFETY: cfmakeraw edits the struct in place; tcsetattr applies it to the same fd.
        unsafe { libc::cfmakeraw(&mut raw) };
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `enable` on the same fd.
        unsafe { libc::tcsetattr(std::io::stdin().as_raw_fd(), libc::TCSANOW, &self.saved) };
    }
}

/// Mirrors the worker's screen onto the user's terminal and passes keystrokes through, until
/// the worker exits.
pub async fn mirror(worker: &Worker) -> std::io::Result<()> {
    let _raw = RawMode::enable()?;
    let mut stdout = std::io::stdout();
    let mut changes = worker.changes();
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 4096];
    let mut stdin_open = true;
    loop {
        let mut frame = b"\x1b[H\x1b[2J".to_vec();
        frame.extend_from_slice(&worker.contents_formatted());
        stdout.write_all(&frame)?;
        stdout.flush()?;
        tokio::select! {
            more = changes.changed() => if !more { break },
            read = stdin.read(&mut buf), if stdin_open => match read {
                Ok(0) | Err(_) => stdin_open = false,
                Ok(n) => {
                    if worker.send(&Input::Bytes(buf[..n].to_vec())).await.is_err() {
                        stdin_open = false;
                    }
                }
            },
            _ = winch.recv() => {
                if let Some(size) = terminal_size() {
                    let _ = worker.resize(size).await;
                }
            }
        }
    }
    stdout.write_all(b"\x1b[0m\r\n")?;
    stdout.flush()
}

/// Prints the screen each time its text changes, until the worker exits.
pub async fn print_snapshots(worker: &Worker, format: OutputFormat) -> std::io::Result<()> {
    let started = Instant::now();
    let mut changes = worker.changes();
    let mut last: Option<ScreenSnapshot> = None;
    let mut count = 0usize;
    loop {
        let snap = worker.snapshot();
        let blank_start = last.is_none() && snap.text().trim().is_empty();
        if !blank_start && last.as_ref().map(ScreenSnapshot::text) != Some(snap.text()) {
            count += 1;
            print_snapshot(&snap, count, started.elapsed().as_millis(), format)?;
            last = Some(snap);
        }
        if !changes.changed().await {
            break;
        }
    }
    Ok(())
}

fn print_snapshot(
    snap: &ScreenSnapshot,
    n: usize,
    at_ms: u128,
    format: OutputFormat,
) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match format {
        OutputFormat::Text => {
            writeln!(stdout, "--- snapshot {n} at {at_ms} ms ---")?;
            stdout.write_all(snap.text().as_bytes())?;
        }
        OutputFormat::Json => writeln!(
            stdout,
            "{}",
            json!({
                "snapshot": n,
                "at_ms": at_ms,
                "rows": snap.rows,
                "cursor": [snap.cursor.0, snap.cursor.1],
                "title": snap.title,
                "alternate_screen": snap.alternate_screen,
            })
        )?,
    }
    stdout.flush()
}
