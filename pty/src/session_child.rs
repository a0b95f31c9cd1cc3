//! Starting a PTY worker's process without `fork`: `posix_spawn`, which glibc carries out with
//! `clone(CLONE_VM | CLONE_VFORK)`, so the supervisor's page tables are not copied for a child
//! that only `exec`s (with `fork` every start copied them and the child's `exec` dropped them
//! again, a cost that grows with the supervisor: a few hundred MiB at 1,000 lanes).
//!
//! The child starts as portable-pty's `spawn_command` started it: the leader of a new session
//! (`POSIX_SPAWN_SETSID`) and of its process group, with the terminal as its controlling tty
//! (the new session leader opens the terminal's slave side without `O_NOCTTY`, which on Linux
//! makes it the controlling terminal, as `TIOCSCTTY` did, and its process group the terminal's
//! foreground group); standard input, output and error on the terminal and no other
//! descriptor; SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGALRM and SIGPIPE (which Rust
//! programs ignore) at their default actions and no signal blocked; the program's path as
//! `argv[0]`; and the environment given, with `SHELL` (the user's login shell) when it has
//! none. Needs glibc 2.34 (`posix_spawn_file_actions_addclosefrom_np`).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::ptr;

/// A worker process to start on a terminal.
pub(crate) struct SessionChild<'a> {
    /// The program's path (resolved; no `PATH` lookup here).
    pub program: &'a Path,
    /// Its arguments, after `argv[0]`.
    pub args: &'a [OsString],
    /// The folder it starts in.
    pub cwd: &'a Path,
    /// Its whole environment (`SHELL` is added when it has none).
    pub env: Vec<(OsString, OsString)>,
    /// The terminal's slave side (`/dev/pts/N`), which becomes its controlling terminal.
    pub tty: &'a Path,
}

/// Signals whose disposition the child starts with at the default, whatever this process set:
/// those portable-pty reset, SIGPIPE (which Rust programs ignore and `std::process` resets),
/// and glibc's two internal signals (32 and 33), which glibc's `posix_spawn` leaves ignored in
/// the child unless they are here, where after `fork` and `exec` they were at their default.
const DEFAULT_SIGNALS: [libc::c_int; 9] = [
    libc::SIGCHLD,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGALRM,
    libc::SIGPIPE,
    32,
    33,
];

impl SessionChild<'_> {
    /// Starts the process and returns its pid. A program that cannot be executed, a folder
    /// that cannot be entered or a terminal that cannot be opened is an error here (glibc
    /// reports the child's failure before `posix_spawn` returns).
    pub(crate) fn spawn(mut self) -> io::Result<u32> {
        if !self.env.iter().any(|(key, _)| key == "SHELL") {
            self.env.push(("SHELL".into(), login_shell()));
        }
        let program = c_string(self.program.as_os_str())?;
        let argv: Vec<CString> = std::iter::once(Ok(program.clone()))
            .chain(self.args.iter().map(|arg| c_string(arg)))
            .collect::<io::Result<_>>()?;
        let envp: Vec<CString> = self
            .env
            .iter()
            .map(|(key, value)| {
                let mut pair = key.clone();
                pair.push("=");
                pair.push(value);
                c_string(&pair)
            })
            .collect::<io::Result<_>>()?;
        let cwd = c_string(self.cwd.as_os_str())?;
        let tty = c_string(self.tty.as_os_str())?;
        let argv_ptrs = null_terminated(&argv);
        let envp_ptrs = null_terminated(&envp);

        let mut actions = FileActions::new()?;
        // SAFETY: `actions` was initialised; the strings live until after `posix_spawn`
        // (glibc copies them anyway).
        unsafe {
            check(libc::posix_spawn_file_actions_addchdir_np(
                &mut actions.0,
                cwd.as_ptr(),
            ))?;
            check(libc::posix_spawn_file_actions_addopen(
                &mut actions.0,
                0,
                tty.as_ptr(),
                libc::O_RDWR,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(&mut actions.0, 0, 1))?;
            check(libc::posix_spawn_file_actions_adddup2(&mut actions.0, 0, 2))?;
            check(libc::posix_spawn_file_actions_addclosefrom_np(
                &mut actions.0,
                3,
            ))?;
        }
        let mut attr = SpawnAttr::new()?;
        // SAFETY: `attr` was initialised; the signal sets are plain values, emptied by
        // sigemptyset before use.
        unsafe {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            let mut defaults: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut defaults);
            for signal in DEFAULT_SIGNALS {
                add_signal(&mut defaults, signal);
            }
            check(libc::posix_spawnattr_setsigmask(&mut attr.0, &none))?;
            check(libc::posix_spawnattr_setsigdefault(&mut attr.0, &defaults))?;
            let flags = libc::POSIX_SPAWN_SETSID
                | (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short;
            check(libc::posix_spawnattr_setflags(&mut attr.0, flags))?;
        }
        let mut pid: libc::pid_t = 0;
        // SAFETY: every pointer is valid for the call: the path, the null-terminated argv and
        // envp arrays (whose strings outlive the call), the initialised actions and attributes.
        check(unsafe {
            libc::posix_spawn(
                &mut pid,
                program.as_ptr(),
                &actions.0,
                &attr.0,
                argv_ptrs.as_ptr(),
                envp_ptrs.as_ptr(),
            )
        })?;
        Ok(pid as u32)
    }
}

/// Adds `signal` to `set` by its bit, as glibc lays a `sigset_t` out (an array of unsigned
/// longs, bit `signal - 1`): `sigaddset` refuses glibc's internal signals, which the child's
/// default set must hold too.
fn add_signal(set: &mut libc::sigset_t, signal: libc::c_int) {
    let bits = libc::c_ulong::BITS as usize;
    let bit = signal as usize - 1;
    let words = (set as *mut libc::sigset_t).cast::<libc::c_ulong>();
    // SAFETY: `bit / bits` is below 2 for the signals here, within the 16 words of a
    // `sigset_t`, which `set` points to.
    unsafe { *words.add(bit / bits) |= 1 << (bit % bits) };
}

/// The user's login shell from the password database, `/bin/sh` when it has none that can be
/// executed: what portable-pty gave a worker whose environment had no `SHELL`.
fn login_shell() -> OsString {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: `passwd` is plain data filled by getpwuid_r, whose strings point into `buf`,
    // which outlives their use below.
    let shell = unsafe {
        let mut passwd: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = ptr::null_mut();
        let r = libc::getpwuid_r(
            libc::getuid(),
            &mut passwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        (r == 0 && !found.is_null() && !passwd.pw_shell.is_null())
            .then(|| OsStr::from_bytes(std::ffi::CStr::from_ptr(passwd.pw_shell).to_bytes()))
            .map(OsStr::to_owned)
    };
    let executable = |shell: &OsString| {
        c_string(shell)
            // SAFETY: access reads a NUL-terminated path.
            .is_ok_and(|path| unsafe { libc::access(path.as_ptr(), libc::X_OK) } == 0)
    };
    shell.filter(executable).unwrap_or_else(|| "/bin/sh".into())
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.to_owned().into_vec()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a NUL byte in {}", text.to_string_lossy()),
        )
    })
}

fn null_terminated(strings: &[CString]) -> Vec<*mut libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain(std::iter::once(ptr::null_mut()))
        .collect()
}

/// posix_spawn's functions return the error number instead of setting `errno`.
fn check(code: libc::c_int) -> io::Result<()> {
    match code {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// `posix_spawn_file_actions_t`, destroyed when dropped. (glibc's holds a pointer to its
/// list of actions, never to itself, so it may move.)
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<Self> {
        // SAFETY: zeroed memory is what `_init` overwrites.
        let mut actions = unsafe { std::mem::zeroed() };
        // SAFETY: initialises the value.
        check(unsafe { libc::posix_spawn_file_actions_init(&mut actions) })?;
        Ok(Self(actions))
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// `posix_spawnattr_t`, destroyed when dropped.
struct SpawnAttr(libc::posix_spawnattr_t);

impl SpawnAttr {
    fn new() -> io::Result<Self> {
        // SAFETY: as for `FileActions::new`.
        let mut attr = unsafe { std::mem::zeroed() };
        // SAFETY: initialises the value.
        check(unsafe { libc::posix_spawnattr_init(&mut attr) })?;
        Ok(Self(attr))
    }
}

impl Drop for SpawnAttr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}
