//! Time to check a lane's freshness: `check_freshness` (open the worktree, look for a paused
//! operation, resolve the base, ahead/behind, merge base, up to 50 missing commits) on a
//! 50,000-commit history, for a fresh lane, a lane 1,000 commits behind and one 40,000 behind,
//! each with 20 commits of its own. Each is timed twice: with the base moving between calls
//! (alternately `main` and `main~1`, so every call walks the history) and with nothing moving
//! (the walk is reused). Three storages: the objects as `git fast-import` packed them; plus the
//! commit-graph `check_freshness` writes when there is none (`ensure_commit_graph`: generation
//! numbers v1, the only kind libgit2 1.9 reads; the time to write it is reported); then that
//! graph replaced by one as git writes it by default (`git commit-graph write --reachable`,
//! v2, also what `git gc` writes), which clawpool leaves alone and libgit2 cannot read, so
//! `check_freshness` walks it with the git CLI (`rev-list`, `merge-base`, `log`).
//!
//! Run with `cargo bench -p clawpool-worktree --bench freshness`; it prints a Markdown report
//! on stdout and progress on stderr. `CLAWPOOL_BENCH_QUICK=1` shortens every measurement.
//! Under `cargo test` it does nothing. The repository lives in a temporary folder removed at
//! the end; the git commands get their identity from the fast-import stream and `-c` options,
//! so the developer's configuration is only read, never written.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clawpool_worktree::{CommitGraph, FreshnessOptions, FreshnessState, check_freshness};
use git2::{Oid, Repository, Sort};

/// Commits on the base branch. With the three lanes' 20 commits each, 50,000 in all.
const TRUNK: usize = 49_940;
/// Commits on each lane branch, on top of where it forked.
const LANE_COMMITS: usize = 20;
/// The target for one check.
const TARGET: Duration = Duration::from_millis(100);

/// A lane: its name and how many base commits it lacks.
const LANES: [(&str, usize); 3] = [("fresh", 0), ("near", 1_000), ("far", 40_000)];

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let budget = if std::env::var_os("CLAWPOOL_BENCH_QUICK").is_some() {
        Duration::from_millis(300)
    } else {
        Duration::from_secs(3)
    };
    let tmp = tempfile::tempdir().expect("the bench needs a temporary folder");
    let tmp = tmp
        .path()
        .canonicalize()
        .expect("the temporary folder exists");
    let root = tmp.join("proj");

    let started = Instant::now();
    build(&root);
    let built = started.elapsed();
    let lanes: Vec<PathBuf> = LANES
        .iter()
        .map(|(name, _)| {
            let path = tmp.join("proj.lanes").join(name);
            let path_str = path.to_str().expect("UTF-8 temp path");
            git(
                &root,
                &["worktree", "add", "-q", path_str, &format!("lanes/{name}")],
            );
            path
        })
        .collect();
    eprintln!("history built in {:.1} s", built.as_secs_f64());

    // The bench sets up each storage itself; clawpool's own graph writing is one of them.
    let options = FreshnessOptions {
        max_missing: 50,
        fetch: None,
        commit_graph: false,
    };
    let mut report = String::new();
    let _ = writeln!(
        report,
        "{} commits ({TRUNK} on `main`, {LANE_COMMITS} on each of {} lanes), built with \
         `git fast-import` in {:.1} s. Each lane has {LANE_COMMITS} commits of its own. \
         `check_freshness(lane, \"main\")`, no fetch, 50 missing commits listed at most; \
         each row is {} s of calls (at least 20, at most 2,000) after 3 warm-up calls. Ratio = p99 / target.\n",
        TRUNK + LANE_COMMITS * LANES.len(),
        LANES.len(),
        built.as_secs_f64(),
        budget.as_secs_f64(),
    );
    let _ = writeln!(
        report,
        "| storage | lane | ahead / behind | check | calls | p50 | p99 | max | target | ratio |"
    );
    let _ = writeln!(report, "|---|---|---:|---|---:|---:|---:|---:|---:|---:|");
    let mut breakdowns = Vec::new();
    let mut graph_written = Duration::ZERO;
    for (storage, graph) in [
        ("no commit-graph", Graph::None),
        ("written by clawpool (v1)", Graph::Clawpool),
        ("git's default (v2), walked by git", Graph::GitDefault),
    ] {
        match graph {
            Graph::None => {}
            Graph::Clawpool => {
                // What the first check with `commit_graph: true` does on a repository without one.
                let common = root.join(".git");
                let started = Instant::now();
                let wrote = clawpool_worktree::ensure_commit_graph(&common, &lanes[0])
                    .expect("the commit-graph is written");
                graph_written = started.elapsed();
                assert!(wrote);
            }
            Graph::GitDefault => git(&root, &["commit-graph", "write", "--reachable"]),
        }
        // The walk each storage is meant to get: libgit2 unless it cannot read the graph.
        let expected = match graph {
            Graph::None => CommitGraph::None,
            Graph::Clawpool => CommitGraph::Readable,
            Graph::GitDefault => CommitGraph::Unreadable,
        };
        assert_eq!(
            clawpool_worktree::commit_graph(&root.join(".git")),
            expected
        );
        for ((name, behind), path) in LANES.iter().zip(&lanes) {
            eprintln!("{storage}: lane {name}");
            let check = check_freshness(path, "main", &options);
            assert_eq!(
                (check.ahead, check.behind),
                (Some(LANE_COMMITS as u32), Some(*behind as u32)),
                "{check:?}"
            );
            let expected = if *behind == 0 {
                FreshnessState::Fresh
            } else {
                FreshnessState::Stale
            };
            assert_eq!(check.state, expected);
            // Alternating bases: the walk remembered for one never fits the next call.
            let mut flip = false;
            let moving = measure(budget, || {
                flip = !flip;
                check_freshness(path, if flip { "main~1" } else { "main" }, &options);
            });
            let still = measure(budget, || {
                check_freshness(path, "main", &options);
            });
            for (check, mut samples) in [("base moved (walks)", moving), ("nothing moved", still)] {
                let s = Summary::of(&mut samples);
                let _ = writeln!(
                    report,
                    "| {storage} | {name} | {LANE_COMMITS} / {behind} | {check} | {} | {} | {} | {} | {} | {:.2} |",
                    samples.len(),
                    ms(s.p50),
                    ms(s.p99),
                    ms(s.max),
                    ms(TARGET),
                    s.p99.as_secs_f64() / TARGET.as_secs_f64(),
                );
            }
            if *name == "far" {
                let steps = match graph {
                    Graph::GitDefault => cli_breakdown(path, budget),
                    Graph::None | Graph::Clawpool => breakdown(path, budget),
                };
                breakdowns.push((storage, steps));
            }
        }
    }

    let _ = writeln!(
        report,
        "\nWriting the v1 commit-graph (`ensure_commit_graph`, once per repository, on the first \
         check when there is none): {}.",
        ms(graph_written)
    );
    let _ = writeln!(
        report,
        "\nWhere the time goes for the lane 40,000 behind (p50). `check_freshness` opens the \
         repository afresh for every check, so libgit2 has nothing cached: each step is timed \
         the same way, together with the opening (the first row alone); `git rev-list` \
         doing the counting is there for comparison. With git's v2 graph the steps are the \
         three git commands the check runs, as it runs them, and libgit2's count (which \
         cannot use that graph) for comparison.\n"
    );
    let _ = writeln!(report, "| storage | step | p50 |");
    let _ = writeln!(report, "|---|---|---:|");
    for (storage, steps) in breakdowns {
        for (step, p50) in steps {
            let _ = writeln!(report, "| {storage} | {step} | {} |", ms(p50));
        }
    }
    print!("{report}");
}

/// Writes the history with `git fast-import`: `main` ({TRUNK} commits, each changing one of
/// 500 files), and `lanes/<name>` forked from `main` so many commits before its tip, each with
/// {LANE_COMMITS} commits of its own (newer than the trunk's: lanes are worked on now).
fn build(root: &Path) {
    std::fs::create_dir_all(root).expect("the repository folder is creatable");
    git(root, &["init", "-q", "-b", "main"]);
    let mut stream = String::with_capacity(TRUNK * 200);
    let start = 1_600_000_000u64;
    let commit = |stream: &mut String,
                  branch: &str,
                  mark: usize,
                  from: Option<usize>,
                  time: u64,
                  file: &str,
                  body: &str| {
        let message = format!("{branch} commit {mark}\n");
        let _ = write!(
            stream,
            "commit refs/heads/{branch}\nmark :{mark}\ncommitter Bench <bench@example.invalid> {time} +0000\ndata {}\n{message}",
            message.len()
        );
        if let Some(from) = from {
            let _ = writeln!(stream, "from :{from}");
        }
        let _ = write!(
            stream,
            "M 100644 inline {file}\ndata {}\n{body}\n",
            body.len()
        );
    };
    for i in 1..=TRUNK {
        let from = (i > 1).then(|| i - 1);
        let time = start + i as u64 * 60;
        commit(
            &mut stream,
            "main",
            i,
            from,
            time,
            &format!("src/m{:02}/f{}.txt", i % 500 / 50, i % 500),
            &format!("{i}\n"),
        );
    }
    let tip_time = start + TRUNK as u64 * 60;
    for (n, (name, behind)) in LANES.iter().enumerate() {
        let fork = TRUNK - behind;
        for j in 1..=LANE_COMMITS {
            let mark = 100_000 * (n + 1) + j;
            let from = if j == 1 { fork } else { mark - 1 };
            let time = tip_time + (j as u64) * 60;
            commit(
                &mut stream,
                &format!("lanes/{name}"),
                mark,
                Some(from),
                time,
                &format!("lane-{name}/{j}.txt"),
                &format!("{name} {j}\n"),
            );
        }
    }
    let mut child = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("git is installed");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stream.as_bytes())
        .expect("fast-import reads the stream");
    assert!(child.wait().expect("fast-import runs").success());
}

/// Calls `f` 3 times, then until `budget` has passed (at least 20 times, at most 2,000), and
/// returns each call's time.
fn measure(budget: Duration, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..3 {
        f();
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while (start.elapsed() < budget || samples.len() < 20) && samples.len() < 2_000 {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    samples
}

/// The steps of a check of `lane` against `main`, each timed with a fresh opening of the
/// repository (so that nothing is cached from the call before, as in `check_freshness`).
fn breakdown(lane: &Path, budget: Duration) -> Vec<(&'static str, Duration)> {
    let budget = budget / 3;
    let open = || {
        let lane = Repository::open(lane).expect("the lane opens");
        let head = lane.refname_to_id("HEAD").expect("HEAD");
        let common = Repository::open(lane.commondir()).expect("the repository opens");
        let base = common.refname_to_id("refs/heads/main").expect("main");
        (common, head, base)
    };
    let p50 = |mut samples: Vec<Duration>| Summary::of(&mut samples).p50;
    let mut steps = vec![(
        "open the worktree and the repository, read HEAD and main",
        p50(measure(budget, || {
            open();
        })),
    )];
    let (_, head, base) = open();
    steps.push((
        "open + `graph_ahead_behind`",
        p50(measure(budget, || {
            let (git, _, _) = open();
            git.graph_ahead_behind(head, base).expect("counts");
        })),
    ));
    steps.push((
        "open + `merge_base`",
        p50(measure(budget, || {
            let (git, _, _) = open();
            git.merge_base(head, base).expect("a merge base");
        })),
    ));
    steps.push((
        "open + 50 missing commits (revwalk `HEAD..main`, date order)",
        p50(measure(budget, || {
            let (git, _, _) = open();
            missing(&git, head, base);
        })),
    ));
    let lane_str = lane.to_str().expect("UTF-8 temp path");
    steps.push((
        "`git rev-list --left-right --count HEAD...main` (CLI, for comparison)",
        p50(measure(budget, || {
            git(
                Path::new(lane_str),
                &["rev-list", "--left-right", "--count", "HEAD...main"],
            );
        })),
    ));
    steps
}

/// The steps of a check of `lane` against `main` in a repository whose graph libgit2 cannot
/// read: the three git commands `check_freshness` runs, with its options and environment, on
/// the two commits; then libgit2's count for comparison.
fn cli_breakdown(lane: &Path, budget: Duration) -> Vec<(&'static str, Duration)> {
    let budget = budget / 3;
    let p50 = |mut samples: Vec<Duration>| Summary::of(&mut samples).p50;
    let repo = Repository::open(lane).expect("the lane opens");
    let head = repo.refname_to_id("HEAD").expect("HEAD").to_string();
    let base = repo
        .refname_to_id("refs/heads/main")
        .expect("main")
        .to_string();
    let symmetric = format!("{head}...{base}");
    let range = format!("{head}..{base}");
    let mut steps = Vec::new();
    for (step, args) in [
        (
            "`git rev-list --left-right --count HEAD...main`",
            vec!["rev-list", "--left-right", "--count", &symmetric],
        ),
        (
            "`git merge-base HEAD main`",
            vec!["merge-base", &head, &base],
        ),
        (
            "`git log --date-order --format=%H%x00%s -n 50 HEAD..main`",
            vec![
                "log",
                "--date-order",
                "--no-show-signature",
                "--encoding=UTF-8",
                "--format=%H%x00%s",
                "--max-count=50",
                &range,
            ],
        ),
    ] {
        steps.push((step, p50(measure(budget, || git_read(lane, &args)))));
    }
    let (head, base) = (
        Oid::from_str(&head).expect("an id"),
        Oid::from_str(&base).expect("an id"),
    );
    steps.push((
        "open + `graph_ahead_behind` (libgit2, for comparison)",
        p50(measure(budget, || {
            let git = Repository::open(lane).expect("the lane opens");
            git.graph_ahead_behind(head, base).expect("counts");
        })),
    ));
    steps
}

/// A read-only git command as `check_freshness` runs it: in the worktree, no pager, no
/// optional locks, the C locale, replace refs ignored.
fn git_read(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["--no-pager", "--no-replace-objects"])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `check_freshness` does for the missing list.
fn missing(git: &Repository, head: Oid, base: Oid) {
    let mut walk = git.revwalk().expect("a walk");
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)
        .expect("sorting");
    walk.push(base).expect("push");
    walk.hide(head).expect("hide");
    for oid in walk.take(50) {
        git.find_commit(oid.expect("an id")).expect("a commit");
    }
}

/// How the repository's commit-graph is made for a storage row.
#[derive(Clone, Copy)]
enum Graph {
    /// None at all (as `git fast-import` leaves it).
    None,
    /// By `ensure_commit_graph`, as a check does when there is none.
    Clawpool,
    /// `git commit-graph write --reachable` with git's defaults (v2; what `git gc` writes),
    /// replacing clawpool's: libgit2 1.9 cannot read it, so the check walks with git.
    GitDefault,
}

struct Summary {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Summary {
    fn of(samples: &mut [Duration]) -> Summary {
        samples.sort();
        // Nearest rank.
        let pick = |q: f64| {
            let rank = ((q * samples.len() as f64).ceil() as usize).max(1);
            samples[rank - 1]
        };
        Summary {
            p50: pick(0.5),
            p99: pick(0.99),
            max: *samples.last().expect("at least one sample"),
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.invalid",
        ])
        .args(args)
        .output()
        .expect("git is installed");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
