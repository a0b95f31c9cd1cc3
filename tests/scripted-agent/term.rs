//! The terminal itself: raw mode on stdin (termios) and its restoration, the window size
//! (`TIOCGWINSZ`), the signals that concern the terminal (SIGWINCH, SIGTERM, SIGHUP, SIGINT)
//! turned into readable bytes through a self-pipe, the escape sequences that set terminal
//! modes, and writing to stdout.
//!
//! When stdin is not a terminal (tests piping input) raw mode is skipped and everything
//! else works the same.

use std::io::{self, Write};
use std::os::fd::RawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};

/// Sent once at start: window title, bracketed paste on, a clean screen.
pub const START: &str = "\x1b]0;scripted-agent\x07\x1b[?2004h\x1b[0m\x1b[2J\x1b[H";
/// Undoes the modes [`START`] and drawing set: colours, bracketed paste, hidden cursor.
pub const RESET_MODES: &str = "\x1b[0m\x1b[?2004l\x1b[?25h";
/// Clears the screen and homes the cursor.
pub const CLEAR: &str = "\x1b[2J\x1b[H";

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

impl Default for TermSize {
    /// The classic 80x24, for when nothing says otherwise.
    fn default() -> Self {
        Self { rows: 24, cols: 80 }
    }
}

/// The termios stdin had before raw mode, kept where the panic hook can find it.
static SAVED_TERMIOS: Mutex<Option<libc::termios>> = Mutex::new(None);

/// Stdin's terminal, put in raw mode by [`setup`](Self::setup) when it is a terminal at all.
/// Restoring is an explicit [`restore`](Self::restore), not `Drop`: exits go through
/// `process::exit` (or `exec`), which run no destructors.
pub struct Terminal {
    tty: bool,
}

impl Terminal {
    /// Puts stdin into raw mode if it is a terminal: bytes arrive one by one, unechoed, and
    /// Ctrl-C arrives as a byte instead of a signal, as real agents see them.
    pub fn setup() -> io::Result<Self> {
        // SAFETY: isatty only inspects the descriptor.
        if unsafe { libc::isatty(libc::STDIN_FILENO) } != 1 {
            return Ok(Self { tty: false });
        }
        // SAFETY: termios is plain old data; tcgetattr fills it or fails.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor and a pointer to a live termios.
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut raw = saved;
        // SAFETY: cfmakeraw only edits the struct it is given.
        unsafe { libc::cfmakeraw(&mut raw) };
        *SAVED_TERMIOS.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
        // SAFETY: a valid descriptor and a fully initialised termios.
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        std::panic::set_hook(Box::new(|info| {
            restore_termios();
            let _ = write_out(RESET_MODES.as_bytes());
            eprintln!("\r\nclawpool-scripted-agent panicked: {info}\r");
        }));
        Ok(Self { tty: true })
    }

    /// Whether stdin is a terminal (and so in raw mode).
    pub fn is_tty(&self) -> bool {
        self.tty
    }

    /// Leaves raw mode; the terminal is as it was before [`setup`](Self::setup).
    pub fn restore(&self) {
        if self.tty {
            restore_termios();
        }
    }
}

fn restore_termios() {
    let saved = *SAVED_TERMIOS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(saved) = saved {
        // SAFETY: a valid descriptor and the termios tcgetattr filled. Failure (the
        // terminal is gone) leaves nothing to restore.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &saved) };
    }
}

/// The window size: from stdout's terminal, else stdin's, else `LINES`/`COLUMNS`, else
/// 80x24. A terminal reporting 0 (a PTY nobody sized) counts as no answer.
pub fn size() -> TermSize {
    for fd in [libc::STDOUT_FILENO, libc::STDIN_FILENO] {
        // SAFETY: winsize is plain old data.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ writes a winsize through the pointer or fails.
        let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
        if ok && ws.ws_row > 0 && ws.ws_col > 0 {
            return TermSize {
                rows: ws.ws_row,
                cols: ws.ws_col,
            };
        }
    }
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|&n| n > 0)
    };
    let default = TermSize::default();
    TermSize {
        rows: env("LINES").unwrap_or(default.rows),
        cols: env("COLUMNS").unwrap_or(default.cols),
    }
}

/// Writes everything to stdout and flushes, so a frame reaches the terminal whole.
pub fn write_out(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// A signal the event loop must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGWINCH: the window changed size.
    Resize,
    /// SIGTERM, SIGHUP or SIGINT (the number): restore the terminal and go. (Raw mode turns
    /// Ctrl-C into a byte; SIGINT comes only from `kill` or a terminal not in raw mode.)
    Terminate(i32),
}

/// The write end of the self-pipe, for the signal handler (which can reach only statics).
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // Signal numbers fit in a byte; the loop decodes them back.
    let byte = signal as u8;
    // SAFETY: errno is thread-local and write(2) is async-signal-safe; errno is saved
    // around it so the interrupted code does not see it change.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        libc::write(fd, (&byte as *const u8).cast(), 1);
        *errno = saved;
    }
}

/// Signals delivered as bytes on a pipe, so that `poll` wakes for them like for input.
pub struct Signals {
    read_fd: RawFd,
}

impl Signals {
    /// Installs the handlers. Call once.
    pub fn install() -> io::Result<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array. Non-blocking so a full pipe
        // never blocks the handler; close-on-exec so the shell of `shell_error` does not
        // inherit them.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        SIGNAL_PIPE.store(fds[1], Ordering::Relaxed);
        for signal in [libc::SIGWINCH, libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
            // SAFETY: sigaction is plain old data; zeroed is an empty mask and no flags.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // Restart reads interrupted by a signal; poll still wakes for the pipe byte.
            action.sa_flags = libc::SA_RESTART;
            // SAFETY: installs a handler that only does async-signal-safe work.
            if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Self { read_fd: fds[0] })
    }

    /// The descriptor to poll for readability.
    pub fn fd(&self) -> RawFd {
        self.read_fd
    }

    /// The signals that arrived since the last call, without duplicates.
    pub fn drain(&self) -> Vec<Signal> {
        let mut signals = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reads into a live buffer of the stated length.
            let n = unsafe { libc::read(self.read_fd, buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            for &byte in &buf[..n] {
                let signal = match i32::from(byte) {
                    libc::SIGWINCH => Signal::Resize,
                    other => Signal::Terminate(other),
                };
                if !signals.contains(&signal) {
                    signals.push(signal);
                }
            }
        }
        signals
    }
}
