//! Time to create lane worktrees: `prepare_lane_worktree` against `git worktree add` run by
//! hand, in sequence (50 lanes) and in parallel (16 lanes), on a small and a medium repository;
//! then 1,000 lanes in sequence each way, the cost per lane reported by hundreds (whether it
//! stays flat as worktrees accumulate).
//!
//! Run with `cargo bench -p clawpool-worktree --bench create`; it prints a Markdown report on
//! stdout and progress on stderr. `CLAWPOOL_BENCH_QUICK=1` runs one round instead of three.
//! Under `cargo test` it does nothing. Every run's repository lives in a temporary folder
//! that is removed as soon as the run is measured; the git commands it runs by hand get their
//! identity from `-c` options, so the developer's configuration is only read, never written.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clawpool_worktree::{LaneWorktreeSpec, Repo, prepare_lane_worktree};

/// Lanes created one after another per run.
const SEQUENTIAL_LANES: usize = 50;
/// Lanes created at once in the parallel runs.
const PARALLEL_LANES: usize = 16;
/// Lanes created one after another in the scale run (`CLAWPOOL_BENCH_SCALE` overrides it).
const SCALE_LANES: usize = 1000;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let rounds = if std::env::var_os("CLAWPOOL_BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    let tmp = tempfile::tempdir().expect("the bench needs a temporary folder");
    let tmp = tmp
        .path()
        .canonicalize()
        .expect("the temporary folder exists");

    println!("## Lane worktree creation\n");
    println!(
        "{SEQUENTIAL_LANES} lanes in sequence, {rounds} rounds (fresh repository each run, the two \
         ways alternating which goes first); per-lane figures are over all rounds.\n"
    );
    println!(
        "| repository | way | total per {SEQUENTIAL_LANES} lanes (median round) | mean / lane | p50 | p95 | max |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let mut n = 0;
    for (label, files) in [("small (6 files)", 5), ("medium (2,001 files, 8 MB)", 2000)] {
        let mut ours = Samples::default();
        let mut raw = Samples::default();
        let mut reuse = Samples::default();
        for round in 0..rounds {
            let ways: [bool; 2] = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for use_crate in ways {
                n += 1;
                let dir = tmp.join(format!("r{n}"));
                let root = make_repo(&dir, "proj", files);
                eprintln!(
                    "{label}, round {}: {}",
                    round + 1,
                    if use_crate {
                        "prepare_lane_worktree"
                    } else {
                        "git worktree add"
                    }
                );
                if use_crate {
                    ours.rounds.push(sequential_prepare(&root, &mut ours.lanes));
                    sequential_prepare(&root, &mut reuse.lanes);
                } else {
                    raw.rounds.push(sequential_git(&root, &mut raw.lanes));
                }
                // Each run's 50 checkouts go as soon as it is measured, to keep the disk use low.
                settle(&dir);
            }
        }
        println!("{}", ours.row(label, "`prepare_lane_worktree`"));
        println!(
            "{}",
            raw.row(label, "`git worktree add --no-track -b` by hand")
        );
        println!(
            "{}",
            reuse.row(label, "`prepare_lane_worktree` again (reuse)")
        );
    }

    println!("\n## Parallel creation\n");
    println!("{PARALLEL_LANES} lanes started at once, {rounds} rounds.\n");
    println!("| repository | way | wall time (median round) | failed lanes (all rounds) |");
    println!("|---|---|---:|---:|");
    let ways = [
        "`prepare_lane_worktree` from 16 threads",
        "16 × `git worktree add --no-track -b` at once, no lock",
        "16 × `git worktree add -b … origin/main` at once (sets upstream), no lock",
    ];
    // Each distinct failure message, with how often it was seen.
    let mut messages = std::collections::BTreeMap::new();
    for (label, files) in [("small", 5), ("medium", 2000)] {
        let mut walls = vec![Vec::new(); ways.len()];
        let mut failures = vec![0; ways.len()];
        for round in 0..rounds {
            for way in 0..ways.len() {
                n += 1;
                let dir = tmp.join(format!("r{n}"));
                let upstream = make_repo(&dir, "upstream", files);
                let upstream = upstream.to_str().expect("UTF-8 temp path");
                git(&dir, &["clone", "-q", upstream, "proj"]);
                let root = dir.join("proj");
                eprintln!("parallel, {label}, round {}: {}", round + 1, ways[way]);
                let (wall, errors) = match way {
                    0 => parallel_prepare(&root),
                    1 => parallel_git(&root, &["--no-track"], "main"),
                    _ => parallel_git(&root, &[], "origin/main"),
                };
                walls[way].push(wall);
                failures[way] += errors.len();
                for error in errors {
                    // Paths, branch names and worktree ids differ per lane; the message without
                    // them is the same failure.
                    let key = error.split('\'').step_by(2).collect::<Vec<_>>().join("'…'");
                    let key: String = key
                        .chars()
                        .map(|c| if c.is_ascii_digit() { '#' } else { c })
                        .collect();
                    *messages.entry(key).or_insert(0) += 1;
                }
                settle(&dir);
            }
        }
        for (way, name) in ways.iter().enumerate() {
            walls[way].sort();
            let median = walls[way][walls[way].len() / 2];
            let of = PARALLEL_LANES * rounds;
            println!(
                "| {label} | {name} | {} | {} of {of} |",
                ms(median),
                failures[way]
            );
        }
    }
    if !messages.is_empty() {
        println!("\nFailures seen (count, git's message with names elided):\n");
        for (message, count) in messages {
            println!("- {count} × `{message}`");
        }
    }

    let scale = std::env::var("CLAWPOOL_BENCH_SCALE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(SCALE_LANES);
    by_hundreds(&tmp, scale);
}

/// `count` lanes in sequence each way in a fresh small repository, nothing else running: the
/// mean creation cost per lane by hundreds, and the last hundred against the first.
fn by_hundreds(tmp: &Path, count: usize) {
    println!("\n## {count} lanes in sequence, by hundreds\n");
    println!("One round each way, a fresh small repository (6 files) each.\n");
    eprintln!("scale: {count} × prepare_lane_worktree");
    let ours_dir = tmp.join("scale-ours");
    let root = make_repo(&ours_dir, "proj", 5);
    let mut ours = Vec::new();
    let ours_total = create_prepared(&root, count, &mut ours);
    settle(&ours_dir);
    eprintln!("scale: {count} × git worktree add");
    let git_dir = tmp.join("scale-git");
    let root = make_repo(&git_dir, "proj", 5);
    let mut raw = Vec::new();
    let raw_total = create_by_git(&root, count, &mut raw);
    settle(&git_dir);
    println!("| lanes | `git worktree add` | `prepare_lane_worktree` | ours / git |");
    println!("|---|---:|---:|---:|");
    let mean = |lanes: &[Duration]| lanes.iter().sum::<Duration>() / lanes.len().max(1) as u32;
    let hundreds: Vec<(Duration, Duration)> = raw
        .chunks(100)
        .zip(ours.chunks(100))
        .map(|(raw, ours)| (mean(raw), mean(ours)))
        .collect();
    for (i, (raw, ours)) in hundreds.iter().enumerate() {
        println!(
            "| {}-{} | {} | {} | {:.2} |",
            i * 100 + 1,
            ((i + 1) * 100).min(count),
            ms(*raw),
            ms(*ours),
            ours.as_secs_f64() / raw.as_secs_f64()
        );
    }
    if let (Some(first), Some(last)) = (hundreds.first(), hundreds.last()) {
        println!(
            "| last hundred / first hundred | {:.2}x | {:.2}x | |",
            last.0.as_secs_f64() / first.0.as_secs_f64(),
            last.1.as_secs_f64() / first.1.as_secs_f64()
        );
    }
    println!(
        "| all {count} | {} | {} | {:.2} |",
        ms(raw_total),
        ms(ours_total),
        ours_total.as_secs_f64() / raw_total.as_secs_f64()
    );
}

/// Removes a finished run's folder and flushes the disk, so that neither the space nor the
/// write-back of one run weighs on the next.
fn settle(dir: &Path) {
    std::fs::remove_dir_all(dir).expect("the run's folder is removable");
    // Best effort: without `sync` the next run only gets noisier.
    let _ = Command::new("sync").status();
}

/// Timings of one way of creating lanes.
#[derive(Default)]
struct Samples {
    /// Each lane's creation time.
    lanes: Vec<Duration>,
    /// Each round's total.
    rounds: Vec<Duration>,
}

impl Samples {
    fn row(&mut self, repo: &str, way: &str) -> String {
        self.lanes.sort();
        self.rounds.sort();
        let pick = |q: f64| {
            // Nearest rank.
            let rank = ((q * self.lanes.len() as f64).ceil() as usize).max(1);
            self.lanes[rank - 1]
        };
        let total = if self.rounds.is_empty() {
            "—".to_owned()
        } else {
            ms(self.rounds[self.rounds.len() / 2])
        };
        let mean = self.lanes.iter().sum::<Duration>() / self.lanes.len() as u32;
        format!(
            "| {repo} | {way} | {total} | {} | {} | {} | {} |",
            ms(mean),
            ms(pick(0.5)),
            ms(pick(0.95)),
            ms(*self.lanes.last().expect("at least one lane"))
        )
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A repository at `<dir>/<name>` on `main` with one commit of `files` files (about 4 KiB
/// each, in folders of 50) plus a README.
fn make_repo(dir: &Path, name: &str, files: usize) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).expect("the repository folder is creatable");
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("README.md"), "# bench\n").expect("README is writable");
    let line = "the quick brown fox jumps over the lazy dog, 0123456789\n";
    for i in 0..files {
        let folder = root.join(format!("src/m{:02}", i / 50));
        std::fs::create_dir_all(&folder).expect("folders are creatable");
        let body: String = (0..70).map(|l| format!("{i} {l} {line}")).collect();
        std::fs::write(folder.join(format!("f{i}.txt")), body).expect("files are writable");
    }
    git(&root, &["add", "."]);
    git(
        &root,
        &[
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.invalid",
            "commit",
            "-q",
            "-m",
            "initial",
        ],
    );
    root
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Creates the lanes through the crate; returns the total and adds each lane's time.
fn sequential_prepare(root: &Path, lanes: &mut Vec<Duration>) -> Duration {
    create_prepared(root, SEQUENTIAL_LANES, lanes)
}

/// Creates the same lanes (branch, path, no upstream) with plain git.
fn sequential_git(root: &Path, lanes: &mut Vec<Duration>) -> Duration {
    create_by_git(root, SEQUENTIAL_LANES, lanes)
}

/// Creates `count` lanes through the crate; returns the total and adds each lane's time.
fn create_prepared(root: &Path, count: usize, lanes: &mut Vec<Duration>) -> Duration {
    let repo = Repo::open(root).expect("the bench repository opens");
    let start = Instant::now();
    for i in 0..count {
        let t = Instant::now();
        let spec = LaneWorktreeSpec::new(&repo, &format!("l{i:04}")).expect("valid lane name");
        prepare_lane_worktree(&repo, &spec).expect("the lane is prepared");
        lanes.push(t.elapsed());
    }
    start.elapsed()
}

/// Creates `count` lanes (branch, path, no upstream) with plain `git worktree add`.
fn create_by_git(root: &Path, count: usize, lanes: &mut Vec<Duration>) -> Duration {
    let lanes_dir = root.with_extension("lanes");
    let start = Instant::now();
    for i in 0..count {
        let t = Instant::now();
        let path = lanes_dir.join(format!("l{i:04}"));
        let branch = format!("lanes/l{i:04}");
        let path = path.to_str().expect("UTF-8 temp path");
        git(
            root,
            &[
                "worktree",
                "add",
                "--quiet",
                "--no-track",
                "-b",
                &branch,
                path,
                "main",
            ],
        );
        lanes.push(t.elapsed());
    }
    start.elapsed()
}

/// Prepares the lanes from one thread each; returns the wall time and the failures.
fn parallel_prepare(root: &Path) -> (Duration, Vec<String>) {
    let repo = Repo::open(root).expect("the bench repository opens");
    let start = Instant::now();
    let failed = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..PARALLEL_LANES)
            .map(|i| {
                let repo = &repo;
                scope.spawn(move || {
                    let spec =
                        LaneWorktreeSpec::new(repo, &format!("p{i:02}")).expect("valid lane name");
                    prepare_lane_worktree(repo, &spec)
                })
            })
            .collect();
        let results = handles
            .into_iter()
            .map(|h| h.join().expect("no thread panics"));
        results
            .filter_map(|result| result.err().map(|err| err.to_string()))
            .collect()
    });
    (start.elapsed(), failed)
}

/// Starts `git worktree add` for every lane at once, without any lock.
fn parallel_git(root: &Path, extra: &[&str], base: &str) -> (Duration, Vec<String>) {
    let lanes_dir = root.with_extension("lanes");
    let start = Instant::now();
    let children: Vec<_> = (0..PARALLEL_LANES)
        .map(|i| {
            let path = lanes_dir.join(format!("p{i:02}"));
            Command::new("git")
                .arg("-C")
                .arg(root)
                .args(["worktree", "add", "--quiet"])
                .args(extra)
                .args(["-b", &format!("lanes/p{i:02}")])
                .arg(&path)
                .arg(base)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("git is installed")
        })
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|child| child.wait_with_output().expect("git runs"))
        .collect();
    let elapsed = start.elapsed();
    let errors = outputs
        .iter()
        .filter(|out| !out.status.success())
        .map(|out| {
            let stderr = String::from_utf8_lossy(&out.stderr);
            // git's first "error:"/"fatal:" line says what went wrong; hints follow it.
            let line = stderr
                .lines()
                .find(|l| l.starts_with("error:") || l.starts_with("fatal:"));
            line.unwrap_or(stderr.trim()).to_owned()
        })
        .collect();
    (elapsed, errors)
}
