//! Benchmarks for the terminals foundation: screen-model throughput, the latency from a byte a
//! worker writes to the screen-changed notification (PTY and tmux, 1 and 100 workers), the
//! supervisor's CPU and RSS per idle worker, and, side by side in the same run, a
//! `tmux capture-pane` polling loop at 500 ms (what common tmux agent managers do).
//!
//! Run it with `scripts/bench-terminals.sh` (or `cargo bench -p clawpool-pty --bench
//! terminals`). The Markdown report goes to stdout, progress to stderr. Under `cargo test` it
//! does nothing. `CLAWPOOL_BENCH_QUICK=1` shortens every window (for trying changes, not for
//! figures).
//!
//! # How it is measured
//!
//! The program plays three roles, chosen by its arguments:
//!
//! - `--bench` (what cargo passes): the orchestrator. It runs the throughput benchmark itself
//!   and every terminal phase in a fresh child process of its own (`--phase …`), so that the
//!   RSS and CPU of one phase are not blurred by what an earlier phase left in the allocator,
//!   and so that a hung phase can be killed and its private tmux server cleaned up.
//! - `--phase latency|idle pty|tmux N DIR`: one measurement; prints `RESULT <key> <value>`.
//! - `--emitter PERIOD_MS LIFETIME_S`: the worker program of the latency phases. Every
//!   `PERIOD_MS` (at a per-process phase offset, so 100 of them do not tick together) it reads
//!   `CLOCK_MONOTONIC` and writes `T <seq> <ns>` in one `write(2)`. The supervisor side takes
//!   the time when a screen-changed notification wakes it, then reads the screen; every line
//!   it finds there that was written before the wake-up, and not seen before, gives one
//!   sample: wake-up time minus write time. Lines written after the wake-up wait for the next
//!   notification. Both clocks are the same system-wide monotonic clock.
//!
//! The baseline poller does the same with `tmux capture-pane -p` run as a subprocess for each
//! session every 500 ms (sequentially, the next sweep starting at once when a sweep overran),
//! comparing with the previous capture; the sample is the time the capture returned minus the
//! write time. Its CPU is its thread's own (`RUSAGE_THREAD`, which includes forking) plus each
//! subprocess's, read with `wait4`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawpool_pty::{
    Input, Key, ScreenModel, ScreenOptions, SpawnSpec, TermSize, TmuxConfig, TmuxServer, Worker,
};

/// How many workers the "many workers" phases run.
const WORKERS: usize = 100;
/// How often an emitter writes a line.
const EMIT_PERIOD_MS: u64 = 50;
/// Emitters exit on their own after this long, whatever happens to the bench.
const EMITTER_LIFETIME_S: u64 = 180;
/// The baseline's polling interval.
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Lines an idle worker prints (on request) to fill its screen and scrollback.
const HISTORY_LINES: usize = 1_200;

struct Timing {
    warmup: Duration,
    window: Duration,
    idle_settle: Duration,
    idle_window: Duration,
    poll_window: Duration,
    throughput_batch: Duration,
    server_alone: Duration,
}

fn timing() -> Timing {
    if std::env::var_os("CLAWPOOL_BENCH_QUICK").is_some() {
        Timing {
            warmup: Duration::from_millis(500),
            window: Duration::from_secs(2),
            idle_settle: Duration::from_millis(500),
            idle_window: Duration::from_secs(2),
            poll_window: Duration::from_secs(2),
            throughput_batch: Duration::from_millis(50),
            server_alone: Duration::from_secs(1),
        }
    } else {
        Timing {
            warmup: Duration::from_secs(2),
            window: Duration::from_secs(10),
            idle_settle: Duration::from_secs(3),
            idle_window: Duration::from_secs(10),
            poll_window: Duration::from_secs(10),
            throughput_batch: Duration::from_millis(300),
            server_alone: Duration::from_secs(5),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--emitter") => emitter(&args[1..]),
        Some("--phase") => phase(&args[1..]),
        _ if args.iter().any(|a| a == "--bench") => orchestrate(),
        _ => eprintln!(
            "terminals: benchmark skipped (run it with `cargo bench -p clawpool-pty --bench terminals`)"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Clocks, CPU and memory

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
}

/// User plus system CPU time of `who` (`RUSAGE_SELF`, `RUSAGE_THREAD`).
fn rusage_cpu(who: libc::c_int) -> Duration {
    // SAFETY: an all-zero rusage is a valid value; getrusage writes one.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` lives across the call.
    unsafe { libc::getrusage(who, &mut ru) };
    timeval(ru.ru_utime) + timeval(ru.ru_stime)
}

fn self_cpu() -> Duration {
    rusage_cpu(libc::RUSAGE_SELF)
}

/// The fields of `/proc/<pid>/stat` after the command name (field 3, the state, is index 0).
fn proc_stat(pid: u32) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_owned();
    let rest = stat[close + 1..]
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    Some((comm, rest))
}

/// CPU time (user + system) of another process, at clock-tick resolution.
fn proc_cpu(pid: u32) -> Option<Duration> {
    let (_, fields) = proc_stat(pid)?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos((utime + stime) * 1_000_000_000 / hz))
}

/// Resident set size in KiB (`VmRSS`).
fn proc_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

fn self_rss_kib() -> u64 {
    proc_rss_kib(std::process::id()).unwrap_or(0)
}

/// Processes whose parent is this process and whose command name starts with `comm`.
fn children_named(comm: &str) -> Vec<u32> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            proc_stat(pid)
                .is_some_and(|(name, fields)| name.starts_with(comm) && fields.get(1) == Some(&me))
        })
        .collect()
}

/// Whether a process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(_, fields)| !matches!(fields[0].as_str(), "Z" | "X"))
}

/// Waits up to `patience` for every pid to be gone, then SIGKILLs what is left. Returns how
/// many had to be killed.
fn ensure_gone(pids: &[u32], patience: Duration) -> usize {
    let until = Instant::now() + patience;
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    for &pid in &left {
        // SAFETY: sending a signal has no memory-safety preconditions.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    left.len()
}

fn raise_nofile_limit() {
    // SAFETY: getrlimit/setrlimit read and write one rlimit.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn pct(cpu: Duration, wall: Duration) -> f64 {
    100.0 * cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9)
}

fn report(key: &str, value: f64) {
    println!("RESULT {key} {value}");
}

/// Nearest-rank percentile of sorted nanosecond samples, in milliseconds.
fn percentile_ms(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e6
}

fn report_latencies(prefix: &str, mut samples: Vec<u64>, missed: u64) {
    samples.sort_unstable();
    report(&format!("{prefix}.p50_ms"), percentile_ms(&samples, 50.0));
    report(&format!("{prefix}.p90_ms"), percentile_ms(&samples, 90.0));
    report(&format!("{prefix}.p99_ms"), percentile_ms(&samples, 99.0));
    report(&format!("{prefix}.max_ms"), percentile_ms(&samples, 100.0));
    report(&format!("{prefix}.samples"), samples.len() as f64);
    report(&format!("{prefix}.missed"), missed as f64);
}

// ---------------------------------------------------------------------------------------------
// The emitter (the worker program of the latency phases)

fn emitter(args: &[String]) {
    let period_ms: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(50);
    let lifetime_s: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let period = period_ms * 1_000_000;
    let start = mono_ns();
    let offset = (u64::from(std::process::id()).wrapping_mul(2_654_435_761)) % period;
    let mut next = start + offset;
    let mut seq: u64 = 0;
    loop {
        let ts = libc::timespec {
            tv_sec: (next / 1_000_000_000) as libc::time_t,
            tv_nsec: (next % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: clock_nanosleep reads one timespec; the remainder pointer may be null.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        let now = mono_ns();
        let line = format!("T {seq} {now}\n");
        // SAFETY: writes `line.len()` bytes from a live buffer to stdout.
        let n = unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
        if n != line.len() as isize || now - start > lifetime_s * 1_000_000_000 {
            return;
        }
        seq += 1;
        next += period;
        if next < now {
            next = now + period;
        }
    }
}

/// `(seq, write time)` from a `T <seq> <ns>` row.
fn parse_row(row: &str) -> Option<(u64, u64)> {
    let mut words = row.strip_prefix("T ")?.split_whitespace();
    let seq = words.next()?.parse().ok()?;
    let ns = words.next()?.parse().ok()?;
    Some((seq, ns))
}

/// Latency samples for one watched screen, fed with what the screen showed at each look.
struct Tracker {
    last: Option<u64>,
    window: (u64, u64),
    samples: Vec<u64>,
    first_seq: Option<u64>,
    last_seq: Option<u64>,
}

impl Tracker {
    fn new(window: (u64, u64)) -> Self {
        Self {
            last: None,
            window,
            samples: Vec::new(),
            first_seq: None,
            last_seq: None,
        }
    }

    /// Takes the rows seen at `seen` (ns): each new line written by then is one sample.
    fn look<'a>(&mut self, rows: impl Iterator<Item = &'a str>, seen: u64) {
        for (seq, written) in rows.filter_map(parse_row) {
            if self.last.is_some_and(|last| seq <= last) {
                continue;
            }
            if written > seen {
                // Written after the wake-up: it belongs to the next notification.
                break;
            }
            self.last = Some(seq);
            if written >= self.window.0 && written < self.window.1 {
                self.samples.push(seen - written);
                self.first_seq.get_or_insert(seq);
                self.last_seq = Some(seq);
            }
        }
    }

    /// Lines written in the window that were never seen (scrolled away unseen).
    fn missed(&self) -> u64 {
        match (self.first_seq, self.last_seq) {
            (Some(first), Some(last)) => {
                (last - first + 1).saturating_sub(self.samples.len() as u64)
            }
            _ => 0,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The capture-pane polling baseline

struct Poller {
    socket: String,
    dir: PathBuf,
    sessions: Vec<String>,
}

struct PollStats {
    samples: Vec<u64>,
    missed: u64,
    /// The poller thread's own CPU (including the fork side of spawning).
    cpu_self: Duration,
    /// The `tmux capture-pane` subprocesses' CPU.
    cpu_children: Duration,
    cpu_server: Duration,
    wall: Duration,
    sweeps: u64,
    sweep_time: Duration,
    captures: u64,
}

impl Poller {
    /// One `tmux capture-pane -p` as a subprocess: its output and its CPU time.
    fn capture(&self, session: &str) -> (Vec<u8>, Duration) {
        let child = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(["capture-pane", "-p", "-t", session])
            .env("TMUX_TMPDIR", &self.dir)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            return (Vec::new(), Duration::ZERO);
        };
        let mut out = Vec::new();
        if let Some(mut stdout) = child.stdout.take() {
            let _ = stdout.read_to_end(&mut out);
        }
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 writes the status and one rusage.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; the pid is our own unreaped child.
        let reaped = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut ru) };
        let cpu = if reaped > 0 {
            timeval(ru.ru_utime) + timeval(ru.ru_stime)
        } else {
            Duration::ZERO
        };
        (out, cpu)
    }

    /// Polls for `window` (plus a tail so lines written near its end are still found), then
    /// reports latencies for lines written inside `window` and CPU over the whole run.
    fn run(&self, window: Duration, server_pid: Option<u32>) -> PollStats {
        let n = self.sessions.len();
        let mut previous: Vec<Vec<u8>> = vec![Vec::new(); n];
        let mut trackers: Vec<Tracker> = Vec::new();
        // A first sweep so that what was on screen before polling began is not "detected".
        let start = mono_ns() + POLL_INTERVAL.as_nanos() as u64 + 20_000_000;
        let end = start + window.as_nanos() as u64;
        for _ in 0..n {
            trackers.push(Tracker::new((start, end)));
        }
        let tail = 3 * POLL_INTERVAL.as_nanos() as u64;
        let cpu0 = rusage_cpu(libc::RUSAGE_THREAD);
        let server0 = server_pid.and_then(proc_cpu);
        let wall0 = Instant::now();
        let mut cpu_children = Duration::ZERO;
        let mut sweeps = 0;
        let mut sweep_time = Duration::ZERO;
        let mut captures = 0;
        let mut next_tick = Instant::now();
        while mono_ns() < end + tail {
            let now = Instant::now();
            if next_tick > now {
                std::thread::sleep(next_tick - now);
            }
            let sweep_start = Instant::now();
            for (i, session) in self.sessions.iter().enumerate() {
                let (out, cpu) = self.capture(session);
                let seen = mono_ns();
                cpu_children += cpu;
                captures += 1;
                if out != previous[i] {
                    let text = String::from_utf8_lossy(&out);
                    trackers[i].look(text.lines(), seen);
                    previous[i] = out;
                }
            }
            sweeps += 1;
            sweep_time += sweep_start.elapsed();
            next_tick += POLL_INTERVAL;
            let now = Instant::now();
            if next_tick < now {
                next_tick = now;
            }
        }
        let wall = wall0.elapsed();
        let cpu_self = rusage_cpu(libc::RUSAGE_THREAD) - cpu0;
        let cpu_server = match (server0, server_pid.and_then(proc_cpu)) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        };
        let missed = trackers.iter().map(Tracker::missed).sum();
        let samples = trackers.into_iter().flat_map(|t| t.samples).collect();
        PollStats {
            samples,
            missed,
            cpu_self,
            cpu_children,
            cpu_server,
            wall,
            sweeps,
            sweep_time,
            captures,
        }
    }
}

fn report_poll(prefix: &str, stats: PollStats, workers: usize) {
    report(
        &format!("{prefix}.cpu_self_pct"),
        pct(stats.cpu_self, stats.wall),
    );
    report(
        &format!("{prefix}.cpu_children_pct"),
        pct(stats.cpu_children, stats.wall),
    );
    report(
        &format!("{prefix}.cpu_server_pct"),
        pct(stats.cpu_server, stats.wall),
    );
    report(
        &format!("{prefix}.sweep_ms"),
        stats.sweep_time.as_secs_f64() * 1e3 / stats.sweeps.max(1) as f64,
    );
    report(
        &format!("{prefix}.captures_per_s"),
        stats.captures as f64 / stats.wall.as_secs_f64(),
    );
    report(&format!("{prefix}.workers"), workers as f64);
    report_latencies(prefix, stats.samples, stats.missed);
}

// ---------------------------------------------------------------------------------------------
// Phases (each in its own process)

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn phase(args: &[String]) {
    let [kind, transport, n, dir] = args else {
        panic!("usage: --phase latency|idle pty|tmux N DIR");
    };
    let n: usize = n.parse().expect("worker count");
    let tmux = match transport.as_str() {
        "pty" => false,
        "tmux" => true,
        other => panic!("unknown transport {other}"),
    };
    raise_nofile_limit();
    let dir = PathBuf::from(dir);
    match kind.as_str() {
        "latency" => phase_latency(tmux, n, &dir),
        "idle" => phase_idle(tmux, n, &dir),
        other => panic!("unknown phase {other}"),
    }
}

fn tmux_config(dir: &Path, socket: &str) -> TmuxConfig {
    TmuxConfig {
        tmpdir: Some(dir.to_owned()),
        ..TmuxConfig::new(socket)
    }
}

/// The tmux server's pid, asked through a plain client.
fn tmux_server_pid(server: &TmuxServer) -> Option<u32> {
    let out = server
        .command()
        .args(["display-message", "-p", "#{pid}"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

struct TmuxPids {
    server: Option<u32>,
    client: Option<u32>,
}

async fn spawn_all(
    server: Option<&TmuxServer>,
    prefix: &str,
    n: usize,
    spec: &SpawnSpec,
) -> Vec<Arc<Worker>> {
    let mut workers = Vec::with_capacity(n);
    for i in 0..n {
        let worker = match server {
            Some(server) => server
                .spawn(&format!("{prefix}{i}"), spec.clone())
                .await
                .expect("tmux worker starts"),
            None => Worker::spawn_pty(spec.clone())
                .await
                .expect("pty worker starts"),
        };
        workers.push(Arc::new(worker));
    }
    workers
}

async fn stop_all(workers: &[Arc<Worker>]) {
    let stops: Vec<_> = workers
        .iter()
        .map(|w| {
            let w = Arc::clone(w);
            tokio::spawn(async move { w.stop(Duration::from_millis(500)).await })
        })
        .collect();
    for stop in stops {
        let _ = stop.await;
    }
}

/// What a tmux phase leaves running for the capture-pane baseline to poll after the
/// supervisor's runtime (and with it the control client) is gone.
struct Leftover {
    sessions: Vec<String>,
    server_pid: Option<u32>,
}

fn phase_latency(tmux: bool, n: usize, dir: &Path) {
    let t = timing();
    let exe = std::env::current_exe().expect("own path");
    let socket = format!("clawpool-bench-lat{n}-{}", std::process::id());
    let config = tmux_config(dir, &socket);
    let name = if tmux { "tmux" } else { "pty" };
    let prefix = format!("lat.{name}.{n}");
    let mut worker_pids = Vec::new();
    let rt = runtime();
    let leftover = rt.block_on(async {
        let server = if tmux {
            Some(
                TmuxServer::connect(config.clone())
                    .await
                    .expect("private tmux server"),
            )
        } else {
            None
        };
        let pids = TmuxPids {
            server: server.as_ref().and_then(tmux_server_pid),
            client: children_named("tmux").first().copied(),
        };
        if tmux {
            eprintln!(
                "  tmux server pid {:?}, control client pid {:?}",
                pids.server, pids.client
            );
        }
        let spec = SpawnSpec::new(&exe, dir).args([
            "--emitter".to_owned(),
            EMIT_PERIOD_MS.to_string(),
            EMITTER_LIFETIME_S.to_string(),
        ]);
        let spawn_started = Instant::now();
        let workers = spawn_all(server.as_ref(), "w", n, &spec).await;
        report(
            &format!("{prefix}.spawn_ms_per_worker"),
            spawn_started.elapsed().as_secs_f64() * 1e3 / n as f64,
        );
        worker_pids.extend(workers.iter().filter_map(|w| w.pid()));

        let win_start = mono_ns() + t.warmup.as_nanos() as u64;
        let win_end = win_start + t.window.as_nanos() as u64;
        let stop_at =
            tokio::time::Instant::now() + t.warmup + t.window + Duration::from_millis(300);
        let watchers: Vec<_> = workers
            .iter()
            .map(|worker| {
                let worker = Arc::clone(worker);
                tokio::spawn(async move {
                    let mut tracker = Tracker::new((win_start, win_end));
                    let mut changes = worker.changes();
                    let mut notifications = 0u64;
                    loop {
                        tokio::select! {
                            more = changes.changed() => if !more { break },
                            _ = tokio::time::sleep_until(stop_at) => break,
                        }
                        let seen = mono_ns();
                        notifications += 1;
                        let snapshot = worker.snapshot();
                        tracker.look(snapshot.rows.iter().map(String::as_str), seen);
                    }
                    (tracker, notifications)
                })
            })
            .collect();

        tokio::time::sleep(t.warmup).await;
        let cpu0 = self_cpu();
        let server0 = pids.server.and_then(proc_cpu);
        let client0 = pids.client.and_then(proc_cpu);
        let wall0 = Instant::now();
        tokio::time::sleep(t.window).await;
        let wall = wall0.elapsed();
        let cpu = self_cpu() - cpu0;
        let delta =
            |pid: Option<u32>, before: Option<Duration>| match (before, pid.and_then(proc_cpu)) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => Duration::ZERO,
            };
        let server_cpu = delta(pids.server, server0);
        let client_cpu = delta(pids.client, client0);

        let mut samples = Vec::new();
        let mut missed = 0;
        let mut notifications = 0;
        for watcher in watchers {
            let (tracker, count) = watcher.await.expect("watcher task");
            missed += tracker.missed();
            notifications += count;
            samples.extend(tracker.samples);
        }
        report(&format!("{prefix}.cpu_self_pct"), pct(cpu, wall));
        report(&format!("{prefix}.cpu_server_pct"), pct(server_cpu, wall));
        report(&format!("{prefix}.cpu_client_pct"), pct(client_cpu, wall));
        report(
            &format!("{prefix}.notifications_per_s"),
            notifications as f64 / (t.warmup + t.window).as_secs_f64(),
        );
        report_latencies(&prefix, samples, missed);

        match server {
            Some(_) if n == WORKERS => {
                // The same workers go on for the baseline; the control client goes with the
                // runtime, so the poller is alone with the tmux server.
                Some(Leftover {
                    sessions: (0..n).map(|i| format!("w{i}")).collect(),
                    server_pid: pids.server,
                })
            }
            Some(server) => {
                stop_all(&workers).await;
                server.kill_server().await.expect("kill tmux server");
                None
            }
            None => {
                stop_all(&workers).await;
                None
            }
        }
    });
    drop(rt);
    if let Some(leftover) = leftover {
        // What the tmux server spends on the workers' output with nobody watching, so the
        // watchers' own share of its CPU can be told apart.
        let before = leftover.server_pid.and_then(proc_cpu);
        let wall0 = Instant::now();
        std::thread::sleep(t.server_alone);
        if let (Some(a), Some(b)) = (before, leftover.server_pid.and_then(proc_cpu)) {
            report(
                &format!("{prefix}.cpu_server_alone_pct"),
                pct(b.saturating_sub(a), wall0.elapsed()),
            );
        }
        eprintln!("  baseline: capture-pane polling of the same {n} workers");
        let poller = Poller {
            socket: socket.clone(),
            dir: dir.to_owned(),
            sessions: leftover.sessions,
        };
        let stats = poller.run(t.poll_window, leftover.server_pid);
        report_poll("poll.active", stats, n);
        kill_tmux(&config);
    }
    let killed = ensure_gone(&worker_pids, Duration::from_secs(3));
    if killed > 0 {
        eprintln!("  warning: {killed} workers had to be SIGKILLed after the phase");
    }
}

/// Kills a private server through the API (a fresh control client), as a supervisor would.
fn kill_tmux(config: &TmuxConfig) {
    runtime().block_on(async {
        match TmuxServer::connect(config.clone()).await {
            Ok(server) => {
                if let Err(err) = server.kill_server().await {
                    eprintln!("  warning: kill-server failed: {err}");
                }
            }
            Err(err) => eprintln!("  warning: could not reconnect to kill the server: {err}"),
        }
    });
}

fn phase_idle(tmux: bool, n: usize, dir: &Path) {
    let t = timing();
    let socket = format!("clawpool-bench-idle{n}-{}", std::process::id());
    let config = tmux_config(dir, &socket);
    let name = if tmux { "tmux" } else { "pty" };
    let prefix = format!("idle.{name}");
    let mut worker_pids = Vec::new();
    let rt = runtime();
    let leftover = rt.block_on(async {
        let server = if tmux {
            Some(
                TmuxServer::connect(config.clone())
                    .await
                    .expect("private tmux server"),
            )
        } else {
            None
        };
        let pids = TmuxPids {
            server: server.as_ref().and_then(tmux_server_pid),
            client: children_named("tmux").first().copied(),
        };
        // Waits for Enter like an agent at its prompt; on Enter it prints a screenful and
        // a scrollback's worth of history, then waits again (`cat`, which reads and prints
        // nothing unless typed to).
        let script = format!(
            "read x; i=0; while [ $i -lt {HISTORY_LINES} ]; do \
             printf '%05d %s\\n' $i \"$1\"; i=$((i+1)); done; echo history-done; exec cat"
        );
        let filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
                      tempor incididunt ut labore";
        let spec = SpawnSpec::new("sh", dir).args(["-c", &script, "idle", filler]);

        // One worker first, so one-time costs (runtime, reactor, lazy statics) are not
        // charged to the hundred.
        let warm = spawn_all(server.as_ref(), "warm", 1, &spec).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop_all(&warm).await;
        drop(warm);
        tokio::time::sleep(Duration::from_secs(1)).await;

        let rss0 = self_rss_kib();
        let server_rss0 = pids.server.and_then(proc_rss_kib);
        let client_rss0 = pids.client.and_then(proc_rss_kib);
        let workers = spawn_all(server.as_ref(), "i", n, &spec).await;
        worker_pids.extend(workers.iter().filter_map(|w| w.pid()));
        tokio::time::sleep(t.idle_settle).await;
        let per = |after: Option<u64>, before: Option<u64>| match (before, after) {
            (Some(a), Some(b)) => (b as f64 - a as f64) / n as f64,
            _ => f64::NAN,
        };
        report(
            &format!("{prefix}.rss_fresh_kib"),
            per(Some(self_rss_kib()), Some(rss0)),
        );
        report(
            &format!("{prefix}.server_rss_fresh_kib"),
            per(pids.server.and_then(proc_rss_kib), server_rss0),
        );
        report(
            &format!("{prefix}.client_rss_fresh_kib"),
            per(pids.client.and_then(proc_rss_kib), client_rss0),
        );

        // Fill every screen and scrollback, then let it all go quiet.
        for worker in &workers {
            worker.send(&Input::Key(Key::Enter)).await.expect("enter");
        }
        for worker in &workers {
            let mut changes = worker.changes();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while !worker.snapshot().contains("history-done") {
                match tokio::time::timeout_at(deadline, changes.changed()).await {
                    Ok(true) => {}
                    _ => panic!("an idle worker never printed its history"),
                }
            }
        }
        tokio::time::sleep(t.idle_settle).await;
        report(
            &format!("{prefix}.rss_full_kib"),
            per(Some(self_rss_kib()), Some(rss0)),
        );
        report(
            &format!("{prefix}.server_rss_full_kib"),
            per(pids.server.and_then(proc_rss_kib), server_rss0),
        );
        report(
            &format!("{prefix}.client_rss_full_kib"),
            per(pids.client.and_then(proc_rss_kib), client_rss0),
        );
        report(
            &format!("{prefix}.scrollback_lines"),
            workers[0].scrollback().len() as f64,
        );

        let cpu0 = self_cpu();
        let server0 = pids.server.and_then(proc_cpu);
        let client0 = pids.client.and_then(proc_cpu);
        let wall0 = Instant::now();
        tokio::time::sleep(t.idle_window).await;
        let wall = wall0.elapsed();
        let per_cpu = |before: Option<Duration>, after: Option<Duration>| match (before, after) {
            (Some(a), Some(b)) => pct(b.saturating_sub(a), wall) / n as f64,
            _ => f64::NAN,
        };
        report(
            &format!("{prefix}.cpu_pct_per_worker"),
            per_cpu(Some(cpu0), Some(self_cpu())),
        );
        report(
            &format!("{prefix}.server_cpu_pct_per_worker"),
            per_cpu(server0, pids.server.and_then(proc_cpu)),
        );
        report(
            &format!("{prefix}.client_cpu_pct_per_worker"),
            per_cpu(client0, pids.client.and_then(proc_cpu)),
        );

        match server {
            Some(_) => Some(Leftover {
                sessions: (0..n).map(|i| format!("i{i}")).collect(),
                server_pid: pids.server,
            }),
            None => {
                stop_all(&workers).await;
                None
            }
        }
    });
    drop(rt);
    if let Some(leftover) = leftover {
        eprintln!("  baseline: capture-pane polling of the same {n} idle workers");
        let poller = Poller {
            socket: socket.clone(),
            dir: dir.to_owned(),
            sessions: leftover.sessions,
        };
        let stats = poller.run(t.poll_window, leftover.server_pid);
        report_poll("poll.idle", stats, n);
        kill_tmux(&config);
    }
    let killed = ensure_gone(&worker_pids, Duration::from_secs(3));
    if killed > 0 {
        eprintln!("  warning: {killed} workers had to be SIGKILLed after the phase");
    }
}

// ---------------------------------------------------------------------------------------------
// Screen-model throughput (runs in the orchestrator)

/// A few MB of colour-heavy output: SGR 256-colour and truecolour changes every few
/// characters, cursor moves, erases, scrolling (plain and in a region), UTF-8.
fn synthetic_stream(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rand = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let words: [&str; 8] = ["fn ", "let ", "x", "→ ", "✻ ", "│", "é", "0x1f"];
    let mut out = Vec::with_capacity(len + 256);
    while out.len() < len {
        let op = rand(100);
        let piece = match op {
            0..=54 => {
                let mut s = String::new();
                for _ in 0..1 + rand(3) {
                    s.push_str(words[rand(words.len() as u64) as usize]);
                }
                s
            }
            55..=66 => format!("\x1b[38;5;{}m", rand(256)),
            67..=71 => format!("\x1b[48;5;{}m", rand(256)),
            72..=78 => format!("\x1b[38;2;{};{};{}m", rand(256), rand(256), rand(256)),
            79..=81 => format!("\x1b[48;2;{};{};{}m", rand(256), rand(256), rand(256)),
            82..=84 => {
                ["\x1b[0m", "\x1b[1;3m", "\x1b[4m", "\x1b[22;23;24m"][rand(4) as usize].to_owned()
            }
            85..=89 => "\r\n".to_owned(),
            90..=92 => format!("\x1b[{};{}H", 1 + rand(40), 1 + rand(120)),
            93..=94 => ["\x1b[K", "\x1b[2K", "\x1b[1K"][rand(3) as usize].to_owned(),
            95 => "\x1b[40;1H\r\n\r\n\r\n".to_owned(),
            96 => format!("\x1b[5;30r\x1b[{}S\x1b[{}T\x1b[r", 1 + rand(3), 1 + rand(2)),
            97 => format!("\x1b7\x1b[{}A\x1b[{}C\x1b8", 1 + rand(5), 1 + rand(20)),
            98 => format!("\x1b[{}L\x1b[{}M", 1 + rand(2), 1 + rand(2)),
            _ => "\x1b]0;✻ synthetic title\x07".to_owned(),
        };
        out.extend_from_slice(piece.as_bytes());
    }
    out
}

struct Throughput {
    name: String,
    bytes: usize,
    mb_per_s: Vec<f64>,
}

fn feed_all(model: &mut ScreenModel, stream: &[u8]) {
    for chunk in stream.chunks(4096) {
        std::hint::black_box(model.feed(std::hint::black_box(chunk)));
    }
}

fn measure_throughput(
    name: &str,
    stream: &[u8],
    options: ScreenOptions,
    batch: Duration,
) -> Throughput {
    // Calibrate: how many replays make one batch.
    let mut model = ScreenModel::new(options);
    let started = Instant::now();
    feed_all(&mut model, stream);
    let once = started.elapsed().max(Duration::from_micros(1));
    let reps = (batch.as_secs_f64() / once.as_secs_f64()).ceil().max(1.0) as usize;
    let mut mb_per_s = Vec::new();
    for _ in 0..5 {
        let mut model = ScreenModel::new(options);
        let started = Instant::now();
        for _ in 0..reps {
            feed_all(&mut model, stream);
        }
        let secs = started.elapsed().as_secs_f64();
        mb_per_s.push((stream.len() * reps) as f64 / secs / 1e6);
    }
    mb_per_s.sort_by(f64::total_cmp);
    Throughput {
        name: name.to_owned(),
        bytes: stream.len(),
        mb_per_s,
    }
}

fn throughput_all(batch: Duration) -> Vec<Throughput> {
    let size = TermSize {
        rows: 40,
        cols: 120,
    };
    let options = ScreenOptions::new(size);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recordings");
    let mut recordings: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path().join("stream.bin"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    recordings.sort();
    let mut results = Vec::new();
    for path in recordings {
        let name = path
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stream = std::fs::read(&path).expect("recording");
        results.push(measure_throughput(&name, &stream, options, batch));
    }
    let synthetic = synthetic_stream(4 << 20);
    results.push(measure_throughput(
        "synthetic colour-heavy",
        &synthetic,
        options,
        batch,
    ));
    results.push(measure_throughput(
        "synthetic colour-heavy, no text scrollback",
        &synthetic,
        ScreenOptions {
            scrollback_lines: 0,
            ..options
        },
        batch,
    ));
    results
}

// ---------------------------------------------------------------------------------------------
// The orchestrator

struct PhaseRun {
    name: String,
    ok: bool,
    secs: f64,
}

/// Runs one phase in a child process with a fresh private socket folder; collects its
/// `RESULT` lines into `results`; always cleans up any tmux server left in that folder.
fn run_phase(args: &[&str], timeout: Duration, results: &mut BTreeMap<String, f64>) -> PhaseRun {
    let name = args.join(" ");
    eprintln!("phase {name} …");
    let dir = tempfile::Builder::new()
        .prefix("clawpool-bench-")
        .tempdir()
        .expect("temp dir");
    let exe = std::env::current_exe().expect("own path");
    let started = Instant::now();
    let child = Command::new(&exe)
        .arg("--phase")
        .args(args)
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut ok = false;
    match child {
        Ok(mut child) => {
            let stdout = child.stdout.take().expect("piped stdout");
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            let deadline = Instant::now() + timeout;
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => {
                        ok = status.success();
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    _ => {
                        eprintln!("  phase {name} timed out; killing it");
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
            while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
                let mut words = line.split_whitespace();
                if words.next() == Some("RESULT")
                    && let (Some(key), Some(value)) = (words.next(), words.next())
                    && let Ok(value) = value.parse::<f64>()
                {
                    results.insert(key.to_owned(), value);
                }
            }
        }
        Err(err) => eprintln!("  could not start phase {name}: {err}"),
    }
    cleanup_tmux_dir(dir.path());
    let secs = started.elapsed().as_secs_f64();
    eprintln!("  done in {secs:.1} s{}", if ok { "" } else { " (FAILED)" });
    PhaseRun { name, ok, secs }
}

/// Kills every tmux server with a socket in `dir` (a phase that crashed leaves one behind).
fn cleanup_tmux_dir(dir: &Path) {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let Ok(entries) = std::fs::read_dir(dir.join(format!("tmux-{uid}"))) else {
        return;
    };
    for entry in entries.flatten() {
        let socket = entry.file_name();
        let killed = Command::new("tmux")
            .arg("-L")
            .arg(&socket)
            .arg("kill-server")
            .env("TMUX_TMPDIR", dir)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if killed {
            eprintln!(
                "  cleaned up tmux server {} left by the phase",
                socket.to_string_lossy()
            );
        }
    }
}

fn machine() -> Vec<(String, String)> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let tmux = Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "not installed".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|k| k.parse::<u64>().ok())
        })
        .map_or_else(String::new, |kib| {
            format!("{:.1} GiB", kib as f64 / 1048576.0)
        });
    vec![
        ("CPU".into(), cpu),
        ("cores (nproc)".into(), cores.to_string()),
        ("memory".into(), mem),
        ("kernel".into(), kernel),
        ("tmux".into(), tmux),
    ]
}

fn orchestrate() {
    let t = timing();
    let started = Instant::now();
    let mut results = BTreeMap::new();
    let mut runs = Vec::new();
    let timeout = Duration::from_secs(240);
    let workers = WORKERS.to_string();
    for args in [
        ["idle", "pty", workers.as_str()],
        ["idle", "tmux", workers.as_str()],
        ["latency", "pty", "1"],
        ["latency", "pty", workers.as_str()],
        ["latency", "tmux", "1"],
        ["latency", "tmux", workers.as_str()],
    ] {
        runs.push(run_phase(&args, timeout, &mut results));
    }
    eprintln!("screen-model throughput …");
    let tp_started = Instant::now();
    let throughput = throughput_all(t.throughput_batch);
    eprintln!("  done in {:.1} s", tp_started.elapsed().as_secs_f64());
    let total = started.elapsed();
    print!(
        "{}",
        render(&results, &throughput, &runs, total, &machine())
    );
}

// ---------------------------------------------------------------------------------------------
// The report

struct R<'a>(&'a BTreeMap<String, f64>);

impl R<'_> {
    fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied().filter(|v| v.is_finite())
    }

    /// A value with `digits` decimals, or `n/a`.
    fn f(&self, key: &str, digits: usize) -> String {
        fmt(self.get(key), digits)
    }

    fn sum(&self, keys: &[&str]) -> Option<f64> {
        keys.iter().map(|k| self.get(k)).sum()
    }
}

fn fmt(value: Option<f64>, digits: usize) -> String {
    match value {
        Some(v) => format!("{v:.digits$}"),
        None => "n/a".into(),
    }
}

/// `a / b` as "N×", or "n/a".
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => {
            let r = a / b;
            if r >= 100.0 {
                format!("{r:.0}×")
            } else {
                format!("{r:.1}×")
            }
        }
        (Some(_), Some(_)) => "∞ (clawpool measured 0)".into(),
        _ => "n/a".into(),
    }
}

fn verdict(value: Option<f64>, limit: f64) -> &'static str {
    match value {
        Some(v) if v <= limit => "PASS",
        Some(_) => "FAIL",
        None => "n/a",
    }
}

fn render(
    results: &BTreeMap<String, f64>,
    throughput: &[Throughput],
    runs: &[PhaseRun],
    total: Duration,
    machine: &[(String, String)],
) -> String {
    use std::fmt::Write;
    let r = R(results);
    let mut s = String::new();
    let w = WORKERS;
    let _ = writeln!(s, "### Machine\n");
    for (k, v) in machine {
        let _ = writeln!(s, "- {k}: {v}");
    }
    let _ = writeln!(
        s,
        "- bench wall time: {:.0} s (phases: {})\n",
        total.as_secs_f64(),
        runs.iter()
            .map(|p| format!(
                "{} {:.0} s{}",
                p.name,
                p.secs,
                if p.ok { "" } else { " FAILED" }
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let _ = writeln!(
        s,
        "### Screen-model throughput (`ScreenModel::feed`, 120x40, default options, 4 KiB chunks; MB = 10^6 bytes)\n"
    );
    let _ = writeln!(s, "| Stream | Size | MB/s (median of 5) | min – max |");
    let _ = writeln!(s, "|---|---:|---:|---:|");
    for tp in throughput {
        let _ = writeln!(
            s,
            "| {} | {:.1} KiB | {:.1} | {:.1} – {:.1} |",
            tp.name,
            tp.bytes as f64 / 1024.0,
            tp.mb_per_s[tp.mb_per_s.len() / 2],
            tp.mb_per_s[0],
            tp.mb_per_s[tp.mb_per_s.len() - 1],
        );
    }

    let _ = writeln!(
        s,
        "\n### Latency: child `write` → screen-changed notification (every worker writes a line every {EMIT_PERIOD_MS} ms)\n"
    );
    let _ = writeln!(
        s,
        "| Watcher | Workers | p50 ms | p90 ms | p99 ms | max ms | samples | missed | p99 ≤ 20 ms |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for (label, prefix, n) in [
        ("clawpool, PTY", "lat.pty.1", 1),
        ("clawpool, PTY", &format!("lat.pty.{w}"), w),
        ("clawpool, tmux control mode", "lat.tmux.1", 1),
        ("clawpool, tmux control mode", &format!("lat.tmux.{w}"), w),
        ("baseline: capture-pane every 500 ms", "poll.active", w),
    ] {
        let target = if prefix.starts_with("poll") {
            format!(
                "{} (baseline)",
                verdict(r.get(&format!("{prefix}.p99_ms")), 20.0)
            )
        } else if n == w {
            verdict(r.get(&format!("{prefix}.p99_ms")), 20.0).to_owned()
        } else {
            "—".to_owned()
        };
        let _ = writeln!(
            s,
            "| {label} | {n} | {} | {} | {} | {} | {} | {} | {target} |",
            r.f(&format!("{prefix}.p50_ms"), 2),
            r.f(&format!("{prefix}.p90_ms"), 2),
            r.f(&format!("{prefix}.p99_ms"), 2),
            r.f(&format!("{prefix}.max_ms"), 2),
            r.f(&format!("{prefix}.samples"), 0),
            r.f(&format!("{prefix}.missed"), 0),
        );
    }

    let _ = writeln!(
        s,
        "\n### CPU while watching {w} active workers (% of one core; the workers' own CPU is not counted)\n"
    );
    let _ = writeln!(
        s,
        "| Watcher | watcher process | its subprocesses | tmux control client | tmux server | total | total per worker |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    let pty_active = r.get(&format!("lat.pty.{w}.cpu_self_pct"));
    let tmux_active_keys = [
        format!("lat.tmux.{w}.cpu_self_pct"),
        format!("lat.tmux.{w}.cpu_client_pct"),
        format!("lat.tmux.{w}.cpu_server_pct"),
    ];
    let tmux_active_keys: Vec<&str> = tmux_active_keys.iter().map(String::as_str).collect();
    let tmux_active = r.sum(&tmux_active_keys);
    let poll_active = r.sum(&[
        "poll.active.cpu_self_pct",
        "poll.active.cpu_children_pct",
        "poll.active.cpu_server_pct",
    ]);
    let per_worker = |v: Option<f64>| fmt(v.map(|v| v / w as f64), 3);
    let _ = writeln!(
        s,
        "| clawpool, PTY | {} | — | — | — | {} | {} |",
        r.f(&format!("lat.pty.{w}.cpu_self_pct"), 2),
        fmt(pty_active, 2),
        per_worker(pty_active),
    );
    let _ = writeln!(
        s,
        "| clawpool, tmux | {} | — | {} | {} | {} | {} |",
        r.f(&format!("lat.tmux.{w}.cpu_self_pct"), 2),
        r.f(&format!("lat.tmux.{w}.cpu_client_pct"), 2),
        r.f(&format!("lat.tmux.{w}.cpu_server_pct"), 2),
        fmt(tmux_active, 2),
        per_worker(tmux_active),
    );
    let _ = writeln!(
        s,
        "| baseline: capture-pane every 500 ms | {} | {} | — | {} | {} | {} |",
        r.f("poll.active.cpu_self_pct", 2),
        r.f("poll.active.cpu_children_pct", 2),
        r.f("poll.active.cpu_server_pct", 2),
        fmt(poll_active, 2),
        per_worker(poll_active),
    );
    let server_alone = r.get(&format!("lat.tmux.{w}.cpu_server_alone_pct"));
    let _ = writeln!(
        s,
        "\nWith no watcher at all, the tmux server spent {} % of a core on the same workers' output \
         (reading their PTYs, updating its grids): that part is the price of tmux itself, not of \
         watching. The baseline's sweep over {w} sessions took {} ms on average ({} captures/s).",
        fmt(server_alone, 2),
        r.f("poll.active.sweep_ms", 0),
        r.f("poll.active.captures_per_s", 0),
    );

    let _ = writeln!(
        s,
        "\n### {w} idle workers (each has printed {HISTORY_LINES} lines, so its screen and scrollback are full)\n"
    );
    let _ = writeln!(
        s,
        "| Transport | supervisor CPU per worker (% core) | supervisor RSS per worker, fresh / full (KiB) | tmux server CPU per worker | tmux server RSS per worker, fresh / full (KiB) | tmux control client RSS per worker, full (KiB) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        s,
        "| PTY | {} | {} / {} | — | — | — |",
        r.f("idle.pty.cpu_pct_per_worker", 5),
        r.f("idle.pty.rss_fresh_kib", 0),
        r.f("idle.pty.rss_full_kib", 0),
    );
    let _ = writeln!(
        s,
        "| tmux | {} | {} / {} | {} | {} / {} | {} |",
        r.f("idle.tmux.cpu_pct_per_worker", 5),
        r.f("idle.tmux.rss_fresh_kib", 0),
        r.f("idle.tmux.rss_full_kib", 0),
        r.f("idle.tmux.server_cpu_pct_per_worker", 5),
        r.f("idle.tmux.server_rss_fresh_kib", 0),
        r.f("idle.tmux.server_rss_full_kib", 0),
        r.f("idle.tmux.client_rss_full_kib", 0),
    );
    let poll_idle = r.sum(&[
        "poll.idle.cpu_self_pct",
        "poll.idle.cpu_children_pct",
        "poll.idle.cpu_server_pct",
    ]);
    let _ = writeln!(
        s,
        "| baseline: capture-pane every 500 ms (same idle tmux workers) | {} (poller {} + subprocesses {}) | — | {} | — | — |",
        fmt(
            r.sum(&["poll.idle.cpu_self_pct", "poll.idle.cpu_children_pct"])
                .map(|v| v / w as f64),
            4
        ),
        fmt(r.get("poll.idle.cpu_self_pct").map(|v| v / w as f64), 4),
        fmt(r.get("poll.idle.cpu_children_pct").map(|v| v / w as f64), 4),
        fmt(r.get("poll.idle.cpu_server_pct").map(|v| v / w as f64), 4),
    );

    let _ = writeln!(
        s,
        "\n### Against the capture-pane baseline ({w} workers, same tmux server kind)\n"
    );
    let _ = writeln!(
        s,
        "| Figure | baseline | clawpool tmux | baseline ÷ clawpool tmux | clawpool PTY | baseline ÷ clawpool PTY |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for (label, p) in [
        ("latency p50 (ms)", "p50_ms"),
        ("latency p99 (ms)", "p99_ms"),
    ] {
        let base = r.get(&format!("poll.active.{p}"));
        let tmux = r.get(&format!("lat.tmux.{w}.{p}"));
        let pty = r.get(&format!("lat.pty.{w}.{p}"));
        let _ = writeln!(
            s,
            "| {label} | {} | {} | {} | {} | {} |",
            fmt(base, 2),
            fmt(tmux, 2),
            ratio(base, tmux),
            fmt(pty, 2),
            ratio(base, pty)
        );
    }
    let poll_active_proc = r.sum(&["poll.active.cpu_self_pct", "poll.active.cpu_children_pct"]);
    let tmux_active_proc = r.sum(&[tmux_active_keys[0], tmux_active_keys[1]]);
    let _ = writeln!(
        s,
        "| CPU, active workers: watcher process (+ its subprocesses; for clawpool tmux + its control client) (% core) | {} | {} | {} | {} | {} |",
        fmt(poll_active_proc, 2),
        fmt(tmux_active_proc, 2),
        ratio(poll_active_proc, tmux_active_proc),
        fmt(pty_active, 2),
        ratio(poll_active_proc, pty_active),
    );
    let watching = |v: Option<f64>| match (v, server_alone) {
        (Some(v), Some(alone)) => Some((v - alone).max(0.0)),
        _ => None,
    };
    let _ = writeln!(
        s,
        "| CPU, active workers: the above + the tmux server's extra work for the watcher (server minus server alone) (% core) | {} | {} | {} | {} | {} |",
        fmt(watching(poll_active), 2),
        fmt(watching(tmux_active), 2),
        ratio(watching(poll_active), watching(tmux_active)),
        fmt(pty_active, 2),
        ratio(watching(poll_active), pty_active),
    );
    let _ = writeln!(
        s,
        "| CPU, active workers: the above + all of the tmux server (% core) | {} | {} | {} | {} | {} |",
        fmt(poll_active, 2),
        fmt(tmux_active, 2),
        ratio(poll_active, tmux_active),
        fmt(pty_active, 2),
        ratio(poll_active, pty_active),
    );
    let poll_idle_proc = r.sum(&["poll.idle.cpu_self_pct", "poll.idle.cpu_children_pct"]);
    let idle_tmux_proc = r
        .sum(&[
            "idle.tmux.cpu_pct_per_worker",
            "idle.tmux.client_cpu_pct_per_worker",
        ])
        .map(|v| v * w as f64);
    let idle_tmux_all = r
        .sum(&[
            "idle.tmux.cpu_pct_per_worker",
            "idle.tmux.client_cpu_pct_per_worker",
            "idle.tmux.server_cpu_pct_per_worker",
        ])
        .map(|v| v * w as f64);
    let idle_pty = r.get("idle.pty.cpu_pct_per_worker").map(|v| v * w as f64);
    let _ = writeln!(
        s,
        "| CPU, idle workers: watcher process (as above) (% core) | {} | {} | {} | {} | {} |",
        fmt(poll_idle_proc, 3),
        fmt(idle_tmux_proc, 3),
        ratio(poll_idle_proc, idle_tmux_proc),
        fmt(idle_pty, 3),
        ratio(poll_idle_proc, idle_pty),
    );
    let _ = writeln!(
        s,
        "| CPU, idle workers: the above + tmux server (% core) | {} | {} | {} | {} | {} |",
        fmt(poll_idle, 3),
        fmt(idle_tmux_all, 3),
        ratio(poll_idle, idle_tmux_all),
        fmt(idle_pty, 3),
        ratio(poll_idle, idle_pty),
    );

    let _ = writeln!(s, "\n### Targets\n");
    let _ = writeln!(
        s,
        "| Target | PTY | tmux (supervisor) | tmux (supervisor + control client + server) |"
    );
    let _ = writeln!(s, "|---|---|---|---|");
    let lat = |key: &str| {
        let v = r.get(key);
        format!("{} ms {}", fmt(v, 2), verdict(v, 20.0))
    };
    let _ = writeln!(
        s,
        "| p99 notification latency ≤ 20 ms at {w} workers | {} | {} | {} |",
        lat(&format!("lat.pty.{w}.p99_ms")),
        lat(&format!("lat.tmux.{w}.p99_ms")),
        lat(&format!("lat.tmux.{w}.p99_ms")),
    );
    let cpu = |v: Option<f64>| format!("{} % {}", fmt(v, 5), verdict(v, 0.1));
    let _ = writeln!(
        s,
        "| idle CPU ≤ 0.1 % of a core per worker | {} | {} | {} |",
        cpu(r.get("idle.pty.cpu_pct_per_worker")),
        cpu(r.get("idle.tmux.cpu_pct_per_worker")),
        cpu(idle_tmux_all.map(|v| v / w as f64)),
    );
    let mib = |v: Option<f64>| {
        format!(
            "{} MiB {}",
            fmt(v.map(|k| k / 1024.0), 2),
            verdict(v, 4096.0)
        )
    };
    let _ = writeln!(
        s,
        "| RSS ≤ 4 MiB per worker (full screen and scrollback) | {} | {} | {} |",
        mib(r.get("idle.pty.rss_full_kib")),
        mib(r.get("idle.tmux.rss_full_kib")),
        mib(r.sum(&[
            "idle.tmux.rss_full_kib",
            "idle.tmux.server_rss_full_kib",
            "idle.tmux.client_rss_full_kib"
        ])),
    );
    s
}
