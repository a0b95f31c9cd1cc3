//! CPU per screen change: the work a lane does each time its agent's screen changes, measured
//! on recorded real sessions.
//!
//! A lane, woken by a screen change, feeds what the agent wrote to its screen model, takes a
//! snapshot, runs its profile's detection on it and feeds the rows to its progress tracker
//! (`lane/src/handshake`: `Worker::snapshot`, `detect::observe`,
//! `ProgressTracker::observe_screen`). This benchmark replays the recorded Claude Code 2.1.330
//! and Codex 0.169.0 sessions (`tests/fixtures/recordings/*-120x40/stream.bin`) through that
//! same path, in pieces the size of one redraw, and prints the thread's CPU time per change,
//! in total and per step.
//!
//! Run it with `cargo bench -p clawpool-agents --bench screen_changes`; see
//! docs/performance.md ("CPU per screen change"). Under `cargo test` it does nothing.
//!
//! A recording holds no write boundaries (it was captured with `tmux pipe-pane`), so a change
//! is cut from the stream as the bytes up to the first escape sequence at or after
//! [`CHANGE_BYTES`]: about what one spinner or status redraw writes. Codex marks its frames
//! with synchronized-update brackets; its stream is cut at their ends instead.

use std::path::Path;
use std::time::Duration;

use clawpool_agents::detect::observe;
use clawpool_agents::profiles::{Profile, ProfileSet};
use clawpool_pty::{ScreenModel, ScreenOptions, TermSize};
use clawpool_recovery::progress::ProgressTracker;

/// Roughly how many bytes one change of a stream without frame markers holds.
const CHANGE_BYTES: usize = 128;
/// The end of a synchronized update (DEC mode 2026): one whole frame.
const FRAME_END: &[u8] = b"\x1b[?2026l";
/// How many batches each recording is measured in; the median is reported.
const BATCHES: usize = 5;

/// The recordings replayed: folder under `tests/fixtures/recordings`, and the profile.
const RECORDINGS: [(&str, &str); 3] = [
    ("claude-2.1.330-120x40", "claude"),
    ("claude-2.1.330-provider-down-120x40", "claude"),
    ("codex-0.169.0-120x40", "codex"),
];

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!(
            "screen_changes: benchmark skipped (run it with `cargo bench -p clawpool-agents --bench screen_changes`)"
        );
        return;
    }
    let quick = std::env::var_os("CLAWPOOL_BENCH_QUICK").is_some();
    let batch = if quick {
        Duration::from_millis(50)
    } else {
        Duration::from_millis(500)
    };
    let profiles = ProfileSet::builtin().expect("the built-in profiles compile");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recordings");
    println!(
        "| Recording | changes | of them leaving the rows as they were | bytes per change | µs per change (median of {BATCHES}) | feed | snapshot | detection | progress |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (folder, agent) in RECORDINGS {
        let stream = std::fs::read(root.join(folder).join("stream.bin")).expect("recording");
        let changes = split_into_changes(&stream);
        let profile = profiles.get(agent).expect("a built-in profile");
        let measured = measure(profile, &changes, batch);
        println!(
            "| {folder} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            changes.len(),
            rows_left_as_they_were(&changes),
            stream.len() / changes.len(),
            measured.total(),
            measured.feed,
            measured.snapshot,
            measured.detection,
            measured.progress,
        );
    }
}

/// The stream cut into the pieces a lane would be woken for.
fn split_into_changes(stream: &[u8]) -> Vec<&[u8]> {
    let framed = stream.windows(FRAME_END.len()).any(|w| w == FRAME_END);
    let mut changes = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < stream.len() {
        let cut = if framed {
            stream[at..]
                .starts_with(FRAME_END)
                .then(|| at + FRAME_END.len())
        } else {
            (at - start >= CHANGE_BYTES && stream[at] == 0x1b).then_some(at)
        };
        match cut {
            Some(end) => {
                changes.push(&stream[start..end]);
                start = end;
                at = end.max(at + 1);
            }
            None => at += 1,
        }
    }
    if start < stream.len() {
        changes.push(&stream[start..]);
    }
    changes
}

/// How many changes leave every visible row (text and undimmed text) as it was: cursor moves,
/// mode switches, a title, a redraw of the same text.
fn rows_left_as_they_were(changes: &[&[u8]]) -> usize {
    let mut model = ScreenModel::new(ScreenOptions::new(TermSize {
        rows: 40,
        cols: 120,
    }));
    let mut before = model.snapshot();
    let mut same = 0;
    for change in changes {
        model.feed(change);
        let after = model.snapshot();
        same += usize::from(after.rows == before.rows && after.undimmed == before.undimmed);
        before = after;
    }
    same
}

/// CPU µs per change, per step.
#[derive(Clone, Copy, Default)]
struct PerChange {
    feed: f64,
    snapshot: f64,
    detection: f64,
    progress: f64,
}

impl PerChange {
    fn total(&self) -> f64 {
        self.feed + self.snapshot + self.detection + self.progress
    }
}

/// Replays the whole session (a fresh screen and tracker each time) enough times for a batch
/// of about `batch` CPU time, [`BATCHES`] times; the batch with the median total wins.
fn measure(profile: &Profile, changes: &[&[u8]], batch: Duration) -> PerChange {
    let once = replay(profile, changes);
    let once_ns = once.total() * changes.len() as f64 * 1e3;
    let reps = ((batch.as_nanos() as f64 / once_ns.max(1.0)).ceil() as usize).max(1);
    let mut batches: Vec<PerChange> = (0..BATCHES)
        .map(|_| {
            let mut sum = PerChange::default();
            for _ in 0..reps {
                let one = replay(profile, changes);
                sum.feed += one.feed;
                sum.snapshot += one.snapshot;
                sum.detection += one.detection;
                sum.progress += one.progress;
            }
            let reps = reps as f64;
            PerChange {
                feed: sum.feed / reps,
                snapshot: sum.snapshot / reps,
                detection: sum.detection / reps,
                progress: sum.progress / reps,
            }
        })
        .collect();
    batches.sort_by(|a, b| a.total().total_cmp(&b.total()));
    batches[BATCHES / 2]
}

/// One replay of a session; CPU µs per change, per step.
fn replay(profile: &Profile, changes: &[&[u8]]) -> PerChange {
    let mut model = ScreenModel::new(ScreenOptions::new(TermSize {
        rows: 40,
        cols: 120,
    }));
    let mut tracker = ProgressTracker::new(0);
    let mut spent = [0u64; 4];
    for (i, change) in changes.iter().enumerate() {
        let t0 = thread_cpu_ns();
        std::hint::black_box(model.feed(change));
        let t1 = thread_cpu_ns();
        let snapshot = model.snapshot();
        let t2 = thread_cpu_ns();
        std::hint::black_box(observe(profile, &snapshot));
        let t3 = thread_cpu_ns();
        // A redraw about every 100 ms, as Claude Code's spinner.
        std::hint::black_box(tracker.observe_screen(i as u64 / 10, &snapshot.rows));
        let t4 = thread_cpu_ns();
        for (slot, (from, to)) in spent
            .iter_mut()
            .zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4)])
        {
            *slot += to - from;
        }
    }
    let per_change = |ns: u64| ns as f64 / 1e3 / changes.len() as f64;
    PerChange {
        feed: per_change(spent[0]),
        snapshot: per_change(spent[1]),
        detection: per_change(spent[2]),
        progress: per_change(spent[3]),
    }
}

/// This thread's CPU time (user + system), in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
