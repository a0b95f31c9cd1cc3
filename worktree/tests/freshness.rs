//! Freshness and merge-forward in real repositories: counts and missing commits, base refs and
//! remotes, throttled fetches, paused git operations, detached HEADs, and merging or rebasing
//! a lane forward — with conflicts aborted back to the exact previous commit and dirty
//! worktrees left byte for byte as they were.

// Shared with lanes.rs; not every helper is used here.
#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clawpool_worktree::{
    FetchOptions, FetchOutcome, Freshness, FreshnessOptions, FreshnessState, GitOperation,
    GitOperationKind, HeadState, MergeMethod, MergeOutcome, MergePolicy, MissingCommit, Repo,
    WorktreeError, check_branch_state, check_freshness, fetch_if_due, git_operation, head_state,
    merge_forward, prepare_lane_worktree, resolve_base,
};
use support::{Sandbox, open};

/// Freshness without any fetch: the tests that want one say so.
fn local() -> FreshnessOptions {
    FreshnessOptions {
        max_missing: 50,
        fetch: None,
        commit_graph: false,
    }
}

/// Fetch on every check (still one at a time).
fn always_fetch() -> FreshnessOptions {
    FreshnessOptions {
        max_missing: 50,
        fetch: Some(FetchOptions {
            min_interval: Duration::ZERO,
            timeout: Duration::from_secs(60),
        }),
        commit_graph: false,
    }
}

const HOUR: FetchOptions = FetchOptions {
    min_interval: Duration::from_secs(3600),
    timeout: Duration::from_secs(60),
};

/// Writes `file` (relative to `dir`) and commits it; returns the new commit.
fn commit(sb: &Sandbox, dir: &Path, file: &str, content: &str, message: &str) -> String {
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("the folder is creatable");
    }
    fs::write(&path, content).expect("the file is writable");
    sb.git(dir, &["add", "--", file]);
    sb.git(dir, &["commit", "-q", "-m", message]);
    sb.sha(dir, "HEAD")
}

/// A lane worktree with the default spec (branch `lanes/<lane>` from main).
fn lane(repo: &Repo, name: &str) -> PathBuf {
    let spec = clawpool_worktree::LaneWorktreeSpec::new(repo, name).expect("valid lane name");
    prepare_lane_worktree(repo, &spec)
        .expect("the lane is created")
        .path()
        .to_path_buf()
}

/// Every file under `dir` (outside `.git`) with its bytes, plus what git says about the
/// worktree: the whole observable state a refused merge must leave alone.
fn snapshot(sb: &Sandbox, dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in fs::read_dir(dir).expect("the folder is readable") {
            let path = entry.expect("an entry").path();
            let name = path
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            if name == ".git" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                // Compared whole; every file these tests write is text.
                let bytes = fs::read(&path).expect("the file is readable");
                out.insert(name, String::from_utf8(bytes).expect("text"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    for (key, args) in [
        ("@status", &["status", "--porcelain=v2", "--branch"][..]),
        ("@diff", &["diff"][..]),
        ("@diff-cached", &["diff", "--cached"][..]),
        ("@head", &["rev-parse", "HEAD"][..]),
        ("@stash", &["stash", "list"][..]),
        ("@branch", &["symbolic-ref", "-q", "HEAD"][..]),
    ] {
        out.insert(key.to_owned(), sb.git(dir, args));
    }
    out
}

/// Whether git's own status is empty (nothing modified, staged or untracked).
fn clean(sb: &Sandbox, dir: &Path) -> bool {
    sb.git(dir, &["status", "--porcelain"]).is_empty()
}

/// The parents of `rev`.
fn parents(sb: &Sandbox, dir: &Path, rev: &str) -> Vec<String> {
    sb.git(dir, &["rev-list", "--parents", "-n", "1", rev])
        .split_whitespace()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Freshness

#[test]
fn a_new_lane_is_fresh() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    let main = sb.sha(&root, "main");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();

    let f = check_freshness(&path, "main", &local());
    assert_eq!(
        f,
        Freshness {
            state: FreshnessState::Fresh,
            ahead: Some(0),
            behind: Some(0),
            base_ref: "main".into(),
            base_sha: Some(main.clone()),
            head: Some(main.clone()),
            merge_base: Some(main),
            missing: vec![],
            checked_at: f.checked_at,
            operation: None,
            error: None,
            dropped: None,
        }
    );
    assert!(f.checked_at >= before && f.checked_at <= before + 60);
}

#[test]
fn a_lane_behind_its_base_is_stale_with_counts_and_the_missing_commits() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let fork = sb.sha(&root, "main");
    let path = lane(&repo, "a");
    commit(&sb, &path, "lane1.txt", "1\n", "lane work 1");
    let head = commit(&sb, &path, "lane2.txt", "2\n", "lane work 2");
    let m1 = commit(&sb, &root, "m1.txt", "1\n", "fix: one");
    let m2 = commit(&sb, &root, "m2.txt", "2\n", "fix: two\n\nwith a body");
    let m3 = commit(&sb, &root, "m3.txt", "3\n", "fix: three");

    let f = check_freshness(&path, "main", &local());
    assert_eq!(f.state, FreshnessState::Stale, "{f:?}");
    assert_eq!((f.ahead, f.behind), (Some(2), Some(3)));
    assert_eq!(f.base_ref, "main");
    assert_eq!(f.base_sha.as_deref(), Some(m3.as_str()));
    assert_eq!(f.head.as_deref(), Some(head.as_str()));
    assert_eq!(f.merge_base.as_deref(), Some(fork.as_str()));
    let missing = |sha: &str, subject: &str| MissingCommit {
        sha: sha.to_owned(),
        subject: subject.to_owned(),
    };
    assert_eq!(
        f.missing,
        vec![
            missing(&m3, "fix: three"),
            missing(&m2, "fix: two"),
            missing(&m1, "fix: one"),
        ]
    );
    assert_eq!(f.error, None);

    // The list is capped; `behind` stays the total.
    let capped = check_freshness(
        &path,
        "main",
        &FreshnessOptions {
            max_missing: 2,
            fetch: None,
            commit_graph: false,
        },
    );
    assert_eq!(capped.behind, Some(3));
    assert_eq!(
        capped.missing.iter().map(|m| &m.sha).collect::<Vec<_>>(),
        vec![&m3, &m2]
    );

    // A lane with no commits of its own that is behind is stale too.
    let other = lane(&repo, "b");
    sb.git(&other, &["reset", "-q", "--hard", &fork]);
    let f = check_freshness(&other, "main", &local());
    assert_eq!(
        (f.state, f.ahead, f.behind),
        (FreshnessState::Stale, Some(0), Some(3))
    );
}

#[test]
fn an_unknown_base_or_a_broken_worktree_is_unknown_never_fresh() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");

    for base in ["no-such-branch", "", "-main", "main~99"] {
        let f = check_freshness(&path, base, &local());
        assert_eq!(f.state, FreshnessState::Unknown, "{base:?}: {f:?}");
        assert_eq!((f.ahead, f.behind, &f.base_sha), (None, None, &None));
        let error = f.error.expect("an unknown state says why");
        assert!(error.contains("does not exist"), "{base:?}: {error}");
        assert_eq!(f.base_ref, base);
    }

    let nowhere = sb.path().join("not-a-repo");
    fs::create_dir(&nowhere).expect("creatable");
    let f = check_freshness(&nowhere, "main", &local());
    assert_eq!(f.state, FreshnessState::Unknown);
    assert!(
        f.error
            .as_deref()
            .is_some_and(|e| e.contains("not a git repository")),
        "{f:?}"
    );

    // A repository git cannot walk (a missing object) is unknown too, with git's message.
    let head = sb.sha(&path, "HEAD");
    let objects = repo.common_dir().join("objects");
    let loose = objects.join(&head[..2]).join(&head[2..]);
    fs::remove_file(&loose).expect("the initial commit is a loose object");
    let f = check_freshness(&path, "main", &local());
    assert_eq!(f.state, FreshnessState::Unknown, "{f:?}");
    assert!(f.error.is_some());
}

#[test]
fn a_repeated_check_reuses_the_walk_until_head_or_base_moves() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    let m1 = commit(&sb, &root, "m1.txt", "1\n", "one");
    commit(&sb, &root, "m2.txt", "2\n", "two");
    let first = check_freshness(&path, "main", &local());
    assert_eq!(
        (first.state, first.behind),
        (FreshnessState::Stale, Some(2))
    );

    // Take away a commit the walk needs: a check that walked again would fail on it.
    let loose = repo
        .common_dir()
        .join("objects")
        .join(&m1[..2])
        .join(&m1[2..]);
    fs::remove_file(&loose).expect("the commit is a loose object");
    let again = check_freshness(&path, "main", &local());
    assert_eq!(
        again,
        Freshness {
            checked_at: again.checked_at,
            ..first
        },
        "reused, not walked"
    );

    // The base moves: the history is walked again (and the missing commit is noticed).
    commit(&sb, &root, "m3.txt", "3\n", "three");
    let moved = check_freshness(&path, "main", &local());
    assert_eq!(moved.state, FreshnessState::Unknown, "{moved:?}");
    assert!(moved.error.is_some());
}

#[test]
fn unrelated_histories_are_diverged_and_not_merged() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    let head = sb.sha(&path, "HEAD");
    let tree = sb.git(&root, &["rev-parse", "HEAD^{tree}"]);
    let orphan = sb.git(&root, &["commit-tree", &tree, "-m", "another history"]);
    sb.git(&root, &["branch", "elsewhere", &orphan]);

    let f = check_freshness(&path, "elsewhere", &local());
    assert_eq!(f.state, FreshnessState::Diverged, "{f:?}");
    assert_eq!(f.merge_base, None);
    assert_eq!((f.ahead, f.behind), (Some(1), Some(1)));
    assert_eq!(f.missing.len(), 1);

    let outcome = merge_forward(&repo, &path, "elsewhere", MergePolicy::MergeForward)
        .expect("merge-forward answers");
    assert_eq!(
        outcome,
        MergeOutcome::Diverged {
            head: head.clone(),
            base_sha: orphan
        }
    );
    assert_eq!(sb.sha(&path, "HEAD"), head);
}

#[test]
fn a_detached_head_is_reported_with_its_sha_and_compared() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    let start = sb.sha(&path, "HEAD");
    let own = commit(&sb, &path, "lane.txt", "x\n", "lane work");
    assert_eq!(
        head_state(&path).expect("a head"),
        HeadState::Branch {
            name: "lanes/a".into(),
            sha: own.clone()
        }
    );

    sb.git(&path, &["checkout", "-q", "--detach", &start]);
    let state = head_state(&path).expect("a head");
    assert_eq!(state, HeadState::Detached { sha: start.clone() });
    assert_eq!(state.sha(), start);

    commit(&sb, &root, "fix.txt", "fix\n", "fix");
    let f = check_freshness(&path, "main", &local());
    assert_eq!(f.head.as_deref(), Some(start.as_str()));
    assert_eq!(
        (f.state, f.ahead, f.behind),
        (FreshnessState::Stale, Some(0), Some(1))
    );

    let outcome = merge_forward(&repo, &path, "main", MergePolicy::MergeForward)
        .expect("merge-forward answers");
    assert_eq!(outcome, MergeOutcome::Detached { sha: start.clone() });
    assert_eq!(sb.sha(&path, "HEAD"), start);
    assert_eq!(sb.sha(&root, "lanes/a"), own, "the branch is untouched");
}

// ---------------------------------------------------------------------------------------------
// Base refs, remotes and fetches

/// A bare "remote" (`origin.git`), a clone of it (`proj`, the repository lanes are made in),
/// and a second clone (`pusher`) that stands for everyone else pushing to the remote.
struct Remote {
    origin: PathBuf,
    proj: PathBuf,
    pusher: PathBuf,
    /// Each `git-upload-pack` the remote serves for `proj` appends a line here.
    count: PathBuf,
}

impl Remote {
    fn new(sb: &Sandbox) -> Remote {
        let up = sb.repo("up", "main");
        let base = sb.path();
        let origin = base.join("origin.git");
        let s = |p: &Path| p.to_str().expect("UTF-8 sandbox").to_owned();
        sb.git(&base, &["clone", "-q", "--bare", &s(&up), &s(&origin)]);
        let proj = base.join("proj");
        let pusher = base.join("pusher");
        for clone in [&proj, &pusher] {
            sb.git(&base, &["clone", "-q", &s(&origin), &s(clone)]);
            sb.git(clone, &["config", "user.name", "Lane Tester"]);
            sb.git(clone, &["config", "user.email", "lanes@example.invalid"]);
        }
        // Counting what the remote serves is counting fetches: `remote.<name>.uploadpack` is
        // what git runs on the "remote side", here the same machine.
        let count = base.join("fetch-count");
        let wrapper = base.join("upload-pack");
        fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\necho fetch >> '{}'\nexec git-upload-pack \"$@\"\n",
                count.display()
            ),
        )
        .expect("the wrapper is writable");
        fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755))
            .expect("the wrapper is executable");
        sb.git(&proj, &["config", "remote.origin.uploadpack", &s(&wrapper)]);
        Remote {
            origin,
            proj,
            pusher,
            count,
        }
    }

    /// A new commit on the remote's `branch`, pushed from the other clone.
    fn push(&self, sb: &Sandbox, branch: &str, file: &str, message: &str) -> String {
        sb.git(&self.pusher, &["checkout", "-q", "-B", branch]);
        sb.git(
            &self.pusher,
            &["reset", "-q", "--hard", &format!("origin/{branch}")],
        );
        let sha = commit(sb, &self.pusher, file, &format!("{message}\n"), message);
        sb.git(&self.pusher, &["push", "-q", "origin", branch]);
        sha
    }

    /// How many fetches the remote has served to `proj`.
    fn fetches(&self) -> usize {
        fs::read_to_string(&self.count).map_or(0, |t| t.lines().count())
    }
}

#[test]
fn the_remote_tracking_branch_is_preferred_and_fetched_when_asked() {
    let sb = Sandbox::new();
    let remote = Remote::new(&sb);
    let repo = open(&remote.proj);
    // Local main has a commit the remote does not: the lane is compared with origin/main all
    // the same.
    commit(&sb, &remote.proj, "local.txt", "l\n", "unpushed");
    let path = lane(&repo, "a");
    let origin_main = sb.sha(&remote.proj, "origin/main");

    let base = resolve_base(&repo, "main").expect("main resolves");
    assert_eq!(base.name, "origin/main");
    assert_eq!(base.sha, origin_main);
    assert_eq!(base.remote.as_deref(), Some("origin"));

    let pushed = remote.push(&sb, "main", "upstream.txt", "upstream fix");
    // Without a fetch, the remote's new commit is not known yet.
    let f = check_freshness(&path, "main", &local());
    assert_eq!((f.state, f.behind), (FreshnessState::Fresh, Some(0)));
    assert_eq!(f.base_ref, "origin/main");
    assert_eq!(remote.fetches(), 0);

    let f = check_freshness(&path, "main", &always_fetch());
    assert_eq!(remote.fetches(), 1);
    assert_eq!(f.state, FreshnessState::Stale, "{f:?}");
    assert_eq!(f.base_ref, "origin/main");
    assert_eq!(f.base_sha.as_deref(), Some(pushed.as_str()));
    assert_eq!((f.ahead, f.behind), (Some(1), Some(1)));
    assert_eq!(f.missing[0].subject, "upstream fix");

    // Merged forward from the remote-tracking branch, and nothing is pushed.
    let refs_before = sb.git(&remote.origin, &["for-each-ref"]);
    let outcome = merge_forward(&repo, &path, "main", MergePolicy::MergeForward)
        .expect("merge-forward answers");
    assert!(
        matches!(&outcome, MergeOutcome::Merged { base_sha, .. } if *base_sha == pushed),
        "{outcome:?}"
    );
    assert!(path.join("upstream.txt").is_file());
    assert_eq!(sb.git(&remote.origin, &["for-each-ref"]), refs_before);
    assert_eq!(
        sb.git(&path, &["log", "-1", "--format=%s"]),
        "Merge origin/main into lanes/a"
    );
}

#[test]
fn resolve_base_prefers_the_upstream_then_origin_then_the_only_remote() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let first = sb.sha(&root, "main");
    let second = commit(&sb, &root, "b.txt", "b\n", "second");
    let resolved = |base: &str| {
        let b = resolve_base(&repo, base).expect("the base resolves");
        (b.name, b.sha, b.remote)
    };
    let local = |name: &str, sha: &str| (name.to_owned(), sha.to_owned(), None);
    let tracking = |name: &str, sha: &str, remote: &str| {
        (name.to_owned(), sha.to_owned(), Some(remote.to_owned()))
    };

    // No remote: the local branch, or any revision as given.
    assert_eq!(resolved("main"), local("main", &second));
    assert_eq!(resolved(&first), local(&first, &first));
    assert_eq!(resolved("main~1"), local("main~1", &first));

    // The only remote, when it has the branch.
    sb.git(&root, &["remote", "add", "fork", "/nonexistent/fork.git"]);
    assert_eq!(resolved("main"), local("main", &second), "no fork/main yet");
    sb.git(&root, &["update-ref", "refs/remotes/fork/main", &first]);
    assert_eq!(resolved("main"), tracking("fork/main", &first, "fork"));

    // Several remotes, none of them origin, no upstream: no telling which, so local.
    sb.git(&root, &["remote", "add", "other", "/nonexistent/other.git"]);
    sb.git(&root, &["update-ref", "refs/remotes/other/main", &first]);
    assert_eq!(resolved("main"), local("main", &second));

    // origin wins over the others.
    sb.git(
        &root,
        &["remote", "add", "origin", "/nonexistent/origin.git"],
    );
    sb.git(&root, &["update-ref", "refs/remotes/origin/main", &second]);
    assert_eq!(resolved("main"), tracking("origin/main", &second, "origin"));

    // The configured upstream wins over origin.
    sb.git(&root, &["config", "branch.main.remote", "other"]);
    sb.git(&root, &["config", "branch.main.merge", "refs/heads/main"]);
    assert_eq!(resolved("main"), tracking("other/main", &first, "other"));

    // A remote-tracking branch named directly, and names with dots and slashes.
    assert_eq!(resolved("fork/main"), tracking("fork/main", &first, "fork"));
    sb.git(&root, &["branch", "release/1.2.x", &first]);
    assert_eq!(resolved("release/1.2.x"), local("release/1.2.x", &first));
    sb.git(
        &root,
        &["update-ref", "refs/remotes/origin/release/1.2.x", &second],
    );
    assert_eq!(
        resolved("release/1.2.x"),
        tracking("origin/release/1.2.x", &second, "origin")
    );

    let err = resolve_base(&repo, "nope").expect_err("no such base");
    assert!(matches!(err, WorktreeError::BaseNotFound { .. }), "{err:?}");
}

#[test]
fn a_remote_is_fetched_at_most_once_per_interval() {
    let sb = Sandbox::new();
    let remote = Remote::new(&sb);
    let repo = open(&remote.proj);

    let first = fetch_if_due(&repo, "origin", &HOUR).expect("the fetch works");
    assert!(
        matches!(&first, FetchOutcome::Fetched { remote, .. } if remote == "origin"),
        "{first:?}"
    );
    assert_eq!(remote.fetches(), 1);

    let pushed = remote.push(&sb, "main", "new.txt", "new");
    let second = fetch_if_due(&repo, "origin", &HOUR).expect("skipping works");
    match &second {
        FetchOutcome::Skipped {
            remote,
            last_error,
            last_attempt,
        } => {
            assert_eq!(remote, "origin");
            assert_eq!(last_error, &None);
            let FetchOutcome::Fetched { at, .. } = first else {
                unreachable!()
            };
            assert_eq!(*last_attempt, at);
        }
        other => panic!("expected a skip, got {other:?}"),
    }
    assert_eq!(remote.fetches(), 1, "no second fetch within the interval");
    assert_ne!(sb.sha(&remote.proj, "origin/main"), pushed);

    // Freshness with the same interval does not fetch either.
    let path = lane(&repo, "a");
    let f = check_freshness(
        &path,
        "main",
        &FreshnessOptions {
            max_missing: 50,
            fetch: Some(HOUR),
            commit_graph: false,
        },
    );
    assert_eq!((f.state, f.behind), (FreshnessState::Fresh, Some(0)));
    assert_eq!(remote.fetches(), 1);

    // Once due (a zero interval), it fetches and sees the new commit.
    let third = fetch_if_due(
        &repo,
        "origin",
        &FetchOptions {
            min_interval: Duration::ZERO,
            ..HOUR
        },
    )
    .expect("the fetch works");
    assert!(matches!(third, FetchOutcome::Fetched { .. }), "{third:?}");
    assert_eq!(remote.fetches(), 2);
    assert_eq!(sb.sha(&remote.proj, "origin/main"), pushed);
    assert!(
        !repo.root().join(".git/FETCH_HEAD").exists(),
        "FETCH_HEAD is not written"
    );

    let err = fetch_if_due(&repo, "nowhere", &HOUR).expect_err("not a remote");
    assert!(
        matches!(&err, WorktreeError::UnknownRemote { remote, .. } if remote == "nowhere"),
        "{err:?}"
    );
}

#[test]
fn concurrent_callers_cause_one_fetch() {
    let sb = Sandbox::new();
    let remote = Remote::new(&sb);
    let repo = open(&remote.proj);
    remote.push(&sb, "main", "new.txt", "new");
    let lanes: Vec<PathBuf> = (0..4).map(|i| lane(&repo, &format!("l{i}"))).collect();

    let threads = 8;
    let barrier = Barrier::new(threads);
    let outcomes: Vec<FetchOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (repo, barrier) = (&repo, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    fetch_if_due(repo, "origin", &HOUR).expect("fetch or skip")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let fetched = outcomes
        .iter()
        .filter(|o| matches!(o, FetchOutcome::Fetched { .. }))
        .count();
    assert_eq!(fetched, 1, "{outcomes:?}");
    assert_eq!(remote.fetches(), 1);

    // Lanes checked at once, each with a fetch due after the interval: still one fetch, and
    // every lane sees what it brought.
    let pushed = remote.push(&sb, "main", "newer.txt", "newer");
    let stamps = repo.common_dir().join("clawpool/fetch-stamps");
    fs::remove_file(&stamps).expect("the stamps exist");
    let barrier = Barrier::new(lanes.len());
    let results: Vec<Freshness> = std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .iter()
            .map(|path| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let options = FreshnessOptions {
                        max_missing: 50,
                        fetch: Some(HOUR),
                        commit_graph: false,
                    };
                    check_freshness(path, "main", &options)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    assert_eq!(remote.fetches(), 2);
    for f in results {
        assert_eq!(f.base_sha.as_deref(), Some(pushed.as_str()), "{f:?}");
        assert_eq!(f.state, FreshnessState::Stale);
    }
}

#[test]
fn a_hanging_fetch_is_killed_recorded_and_makes_freshness_unknown() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    // A remote whose transport never answers (and would not for 30 s).
    sb.git(
        &root,
        &["remote", "add", "origin", "ssh://example.invalid/x.git"],
    );
    sb.git(&root, &["config", "ssh.variant", "simple"]);
    sb.git(&root, &["config", "core.sshCommand", "sh -c 'sleep 30' --"]);
    sb.git(&root, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
    let options = FetchOptions {
        min_interval: Duration::from_secs(3600),
        timeout: Duration::from_millis(300),
    };

    let started = Instant::now();
    let err = fetch_if_due(&repo, "origin", &options).expect_err("the fetch hangs");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "killed, not waited for"
    );
    assert!(
        matches!(&err, WorktreeError::TimedOut { after, .. } if *after == options.timeout),
        "{err:?}"
    );

    // Recorded: no second attempt within the interval, and the failure is told.
    let started = Instant::now();
    match fetch_if_due(&repo, "origin", &options).expect("skipped") {
        FetchOutcome::Skipped {
            last_error: Some(error),
            ..
        } => assert!(error.contains("did not finish"), "{error}"),
        other => panic!("expected a skip with the error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(1));

    let path = lane(&repo, "a");
    let f = check_freshness(
        &path,
        "main",
        &FreshnessOptions {
            max_missing: 50,
            fetch: Some(options),
            commit_graph: false,
        },
    );
    assert_eq!(f.state, FreshnessState::Unknown, "never fresh: {f:?}");
    assert!(
        f.error
            .as_deref()
            .is_some_and(|e| e.contains("fetch of origin failed")),
        "{f:?}"
    );
    // The comparison with the base as last fetched is still there to show.
    assert_eq!((f.ahead, f.behind), (Some(0), Some(0)));
    assert_eq!(f.base_ref, "origin/main");
}

// ---------------------------------------------------------------------------------------------
// Git operations

/// A lane whose `src/f1.txt` conflicts with main's: the lane's commit and main's.
fn conflicting_lane(sb: &Sandbox, root: &Path, repo: &Repo, name: &str) -> (PathBuf, String) {
    let path = lane(repo, name);
    commit(
        sb,
        &path,
        "src/f1.txt",
        &format!("lane {name}\n"),
        "lane edits f1",
    );
    let theirs = commit(
        sb,
        root,
        "src/f1.txt",
        &format!("main {name}\n"),
        &format!("main edits f1 ({name})"),
    );
    (path, theirs)
}

#[test]
fn a_paused_rebase_is_reported_and_blocks_the_verdict_and_the_merge() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let (path, _) = conflicting_lane(&sb, &root, &repo, "a");
    let other = lane(&repo, "b");
    assert!(!sb.git_ok(&path, &["rebase", "main"]), "the rebase stops");

    let rebase = GitOperation {
        kind: GitOperationKind::Rebase,
        paused: true,
    };
    let paused = Some(rebase);
    assert_eq!(git_operation(&path).expect("readable"), paused);
    // Only that worktree's: not the main worktree, not another lane.
    assert_eq!(git_operation(&root).expect("readable"), None);
    assert_eq!(git_operation(&other).expect("readable"), None);

    let f = check_freshness(&path, "main", &local());
    assert_eq!(f.state, FreshnessState::Unknown);
    assert_eq!(f.operation, paused);
    assert_eq!((f.ahead, f.behind), (None, None));
    assert!(
        f.error.as_deref().is_some_and(|e| e.contains("rebase")),
        "{f:?}"
    );
    assert!(matches!(
        head_state(&path).expect("a head"),
        HeadState::Detached { .. }
    ));

    let outcome = merge_forward(&repo, &path, "main", MergePolicy::MergeForward)
        .expect("merge-forward answers");
    assert_eq!(
        outcome,
        MergeOutcome::OperationInProgress { operation: rebase }
    );
    // Someone else's rebase is left as it was.
    assert_eq!(git_operation(&path).expect("readable"), paused);
}

#[test]
fn one_look_at_a_branch_says_what_its_three_separate_looks_say() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let (merge, _) = conflicting_lane(&sb, &root, &repo, "merge");
    let stale = lane(&repo, "stale");
    commit(&sb, &root, "m.txt", "m\n", "main moves on");
    assert!(!sb.git_ok(&merge, &["merge", "main"]));

    for (path, operation) in [(&merge, Some(GitOperationKind::Merge)), (&stale, None)] {
        let state = check_branch_state(path, "main", &[], &local());
        assert_eq!(state.head, Some(head_state(path).expect("readable")));
        assert_eq!(state.operation.map(|op| op.kind), operation);
        assert_eq!(state.operation, git_operation(path).expect("readable"));
        let alone = check_freshness(path, "main", &local());
        assert_eq!(
            Freshness {
                checked_at: 0,
                ..state.freshness
            },
            Freshness {
                checked_at: 0,
                ..alone
            }
        );
    }
    let state = check_branch_state(&stale, "main", &[], &local());
    assert_eq!(state.freshness.state, FreshnessState::Stale);

    // A folder that is no worktree: nothing read, and no verdict, with the reason.
    let nowhere = sb.path().join("nowhere");
    fs::create_dir(&nowhere).expect("creatable");
    let state = check_branch_state(&nowhere, "main", &[], &local());
    assert_eq!((state.head, state.operation), (None, None));
    assert_eq!(state.freshness.state, FreshnessState::Unknown);
    assert!(state.freshness.error.is_some());
}

#[test]
fn paused_merge_cherry_pick_revert_am_and_bisect_are_reported() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let op = |kind, paused| Some(GitOperation { kind, paused });

    let (merge, _) = conflicting_lane(&sb, &root, &repo, "merge");
    assert!(!sb.git_ok(&merge, &["merge", "main"]));
    assert_eq!(
        git_operation(&merge).expect("readable"),
        op(GitOperationKind::Merge, true)
    );

    let (pick, theirs) = conflicting_lane(&sb, &root, &repo, "pick");
    assert!(!sb.git_ok(&pick, &["cherry-pick", &theirs]));
    assert_eq!(
        git_operation(&pick).expect("readable"),
        op(GitOperationKind::CherryPick, true)
    );

    // A two-commit cherry-pick, its first conflict resolved and committed by hand: no
    // CHERRY_PICK_HEAD any more, but still in progress until `--continue`.
    let (sequence, theirs) = conflicting_lane(&sb, &root, &repo, "sequence");
    let next = commit(&sb, &root, "seq.txt", "s\n", "after");
    assert!(!sb.git_ok(&sequence, &["cherry-pick", &theirs, &next]));
    fs::write(sequence.join("src/f1.txt"), "resolved\n").expect("writable");
    sb.git(&sequence, &["add", "src/f1.txt"]);
    sb.git(&sequence, &["commit", "-q", "--no-edit"]);
    assert!(!sb.git_ok(
        &sequence,
        &["rev-parse", "-q", "--verify", "CHERRY_PICK_HEAD"]
    ));
    assert_eq!(
        git_operation(&sequence).expect("readable"),
        op(GitOperationKind::CherryPick, true)
    );

    let revert = lane(&repo, "revert");
    let x = commit(&sb, &revert, "src/f3.txt", "x\n", "x");
    commit(&sb, &revert, "src/f3.txt", "y\n", "y");
    assert!(!sb.git_ok(&revert, &["revert", "--no-edit", &x]));
    assert_eq!(
        git_operation(&revert).expect("readable"),
        op(GitOperationKind::Revert, true)
    );

    let (am, theirs) = conflicting_lane(&sb, &root, &repo, "am");
    let patch = sb.git(&root, &["format-patch", "-1", "--stdout", &theirs]);
    let patch_file = sb.path().join("am.patch");
    fs::write(&patch_file, format!("{patch}\n")).expect("writable");
    assert!(!sb.git_ok(&am, &["am", patch_file.to_str().expect("UTF-8")]));
    assert_eq!(
        git_operation(&am).expect("readable"),
        op(GitOperationKind::Am, true)
    );

    let bisect = lane(&repo, "bisect");
    let good = sb.sha(&bisect, "HEAD");
    for i in 0..4 {
        commit(&sb, &bisect, &format!("b{i}.txt"), "b\n", &format!("b{i}"));
    }
    sb.git(&bisect, &["bisect", "start", "HEAD", &good]);
    assert_eq!(
        git_operation(&bisect).expect("readable"),
        op(GitOperationKind::Bisect, false)
    );

    for path in [&merge, &pick, &sequence, &revert, &am, &bisect] {
        let f = check_freshness(path, "main", &local());
        assert_eq!(f.state, FreshnessState::Unknown, "{}", path.display());
        assert_eq!(f.operation, git_operation(path).expect("readable"));
    }
    assert_eq!(git_operation(&root).expect("readable"), None);
    let err = git_operation(&sb.path()).expect_err("not a worktree");
    assert!(
        matches!(err, WorktreeError::NotARepository { .. }),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Merge-forward

#[test]
fn merge_forward_brings_the_base_into_the_lane_and_nowhere_else() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    let other = lane(&repo, "b");
    let old_head = commit(&sb, &path, "lane.txt", "lane\n", "lane work");
    let fix = commit(&sb, &root, "fix.txt", "fix\n", "the fix");
    let main_before = snapshot(&sb, &root);
    let other_before = snapshot(&sb, &other);

    let outcome =
        merge_forward(&repo, &path, "main", MergePolicy::default()).expect("merge-forward works");
    let MergeOutcome::Merged {
        old_head: old,
        new_head,
        base_sha,
        method,
    } = outcome
    else {
        panic!("expected a merge, got {outcome:?}");
    };
    assert_eq!(
        (&old, &base_sha, method),
        (&old_head, &fix, MergeMethod::Merge)
    );
    assert_eq!(sb.sha(&path, "HEAD"), new_head);
    assert_eq!(sb.sha(&root, "lanes/a"), new_head);
    assert_eq!(parents(&sb, &path, &new_head), vec![old_head, fix.clone()]);
    assert_eq!(
        fs::read_to_string(path.join("fix.txt")).expect("merged in"),
        "fix\n"
    );
    assert!(clean(&sb, &path));
    assert_eq!(
        sb.git(&path, &["log", "-1", "--format=%s"]),
        "Merge main into lanes/a"
    );
    if std::env::var_os("GIT_AUTHOR_NAME").is_none() {
        assert_eq!(
            sb.git(&path, &["log", "-1", "--format=%an"]),
            "Lane Tester",
            "the repository's own identity is used"
        );
    }
    assert_eq!(snapshot(&sb, &root), main_before, "main worktree untouched");
    assert_eq!(snapshot(&sb, &other), other_before, "other lane untouched");

    let f = check_freshness(&path, "main", &local());
    assert_eq!(
        (f.state, f.ahead, f.behind),
        (FreshnessState::Fresh, Some(2), Some(0))
    );

    // Again: nothing to do, whatever the policy.
    for policy in [
        MergePolicy::MergeForward,
        MergePolicy::Rebase,
        MergePolicy::Warn,
        MergePolicy::Block,
    ] {
        assert_eq!(
            merge_forward(&repo, &path, "main", policy).expect("answers"),
            MergeOutcome::UpToDate {
                head: new_head.clone(),
                base_sha: fix.clone()
            }
        );
    }
}

#[test]
fn a_lane_without_commits_of_its_own_is_fast_forwarded_whatever_merge_ff_says() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    sb.git(&root, &["config", "merge.ff", "only"]);
    let repo = open(&root);
    let path = lane(&repo, "a");
    let old_head = sb.sha(&path, "HEAD");
    let fix = commit(&sb, &root, "fix.txt", "fix\n", "the fix");
    assert_eq!(
        merge_forward(&repo, &path, "main", MergePolicy::MergeForward).expect("works"),
        MergeOutcome::Merged {
            old_head,
            new_head: fix.clone(),
            base_sha: fix.clone(),
            method: MergeMethod::Merge
        }
    );

    // merge.ff=only would refuse a real merge; `--ff` makes one anyway.
    commit(&sb, &path, "lane.txt", "lane\n", "lane work");
    commit(&sb, &root, "fix2.txt", "fix\n", "another fix");
    let outcome = merge_forward(&repo, &path, "main", MergePolicy::MergeForward).expect("works");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(parents(&sb, &path, "HEAD").len(), 2);
}

#[test]
fn a_conflicting_merge_is_aborted_back_to_the_exact_previous_head() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    commit(&sb, &path, "src/f2.txt", "lane 2\n", "lane edits f2");
    commit(&sb, &path, "src/f1.txt", "lane 1\n", "lane edits f1");
    commit(&sb, &root, "src/f2.txt", "main 2\n", "main edits f2");
    commit(&sb, &root, "clean.txt", "no conflict\n", "main adds a file");
    let theirs = commit(&sb, &root, "src/f1.txt", "main 1\n", "main edits f1");
    let before = snapshot(&sb, &path);
    let old_head = sb.sha(&path, "HEAD");

    let outcome = merge_forward(&repo, &path, "main", MergePolicy::MergeForward)
        .expect("merge-forward answers");
    assert_eq!(
        outcome,
        MergeOutcome::Conflict {
            paths: vec!["src/f1.txt".into(), "src/f2.txt".into()],
            head: old_head.clone(),
            base_sha: theirs,
            method: MergeMethod::Merge,
        }
    );
    assert_eq!(sb.sha(&path, "HEAD"), old_head);
    assert_eq!(
        sb.git(&path, &["symbolic-ref", "--short", "HEAD"]),
        "lanes/a"
    );
    assert!(clean(&sb, &path));
    assert_eq!(git_operation(&path).expect("readable"), None);
    assert!(
        !path.join("clean.txt").exists(),
        "nothing of the merge stays"
    );
    assert_eq!(snapshot(&sb, &path), before);
}

#[test]
fn a_dirty_worktree_is_refused_and_left_byte_for_byte() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    let lone = lane(&repo, "b");
    commit(&sb, &root, "fix.txt", "fix\n", "the fix");
    // A modified tracked file, a staged one, an untracked file and an untracked folder.
    fs::write(path.join("src/f1.txt"), "edited, not staged\n").expect("writable");
    fs::write(path.join("src/f2.txt"), "edited and staged\n").expect("writable");
    sb.git(&path, &["add", "src/f2.txt"]);
    fs::write(path.join("notes.txt"), "untracked\n").expect("writable");
    fs::create_dir(path.join("scratch")).expect("creatable");
    fs::write(path.join("scratch/a.txt"), "untracked too\n").expect("writable");
    let before = snapshot(&sb, &path);

    for policy in [MergePolicy::MergeForward, MergePolicy::Rebase] {
        let outcome = merge_forward(&repo, &path, "main", policy).expect("answers");
        let MergeOutcome::Dirty { mut paths } = outcome else {
            panic!("expected a refusal, got {outcome:?}");
        };
        paths.sort();
        assert_eq!(
            paths,
            vec!["notes.txt", "scratch/", "src/f1.txt", "src/f2.txt"]
        );
        assert_eq!(snapshot(&sb, &path), before, "{policy:?}");
    }

    // Only an untracked file is enough to refuse.
    fs::write(lone.join("new.txt"), "untracked\n").expect("writable");
    let before = snapshot(&sb, &lone);
    assert_eq!(
        merge_forward(&repo, &lone, "main", MergePolicy::MergeForward).expect("answers"),
        MergeOutcome::Dirty {
            paths: vec!["new.txt".into()]
        }
    );
    assert_eq!(snapshot(&sb, &lone), before);
}

#[test]
fn rebase_policy_replays_the_lane_onto_the_base() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    commit(&sb, &path, "lane1.txt", "1\n", "lane 1");
    let old_head = commit(&sb, &path, "lane2.txt", "2\n", "lane 2");
    let fix = commit(&sb, &root, "fix.txt", "fix\n", "the fix");

    let outcome = merge_forward(&repo, &path, "main", MergePolicy::Rebase).expect("works");
    let MergeOutcome::Merged {
        old_head: old,
        new_head,
        base_sha,
        method,
    } = outcome
    else {
        panic!("expected a rebase, got {outcome:?}");
    };
    assert_eq!(
        (&old, &base_sha, method),
        (&old_head, &fix, MergeMethod::Rebase)
    );
    assert_eq!(sb.sha(&path, "HEAD"), new_head);
    assert_eq!(
        sb.sha(&path, "HEAD~2"),
        fix,
        "the lane's two commits on top"
    );
    assert_eq!(
        sb.git(&path, &["log", "-2", "--format=%s"]),
        "lane 2\nlane 1"
    );
    assert!(!sb.git_ok(&path, &["merge-base", "--is-ancestor", &old_head, "HEAD"]));
    assert!(path.join("fix.txt").is_file() && path.join("lane1.txt").is_file());
    assert!(clean(&sb, &path));
    assert_eq!(
        sb.git(&path, &["symbolic-ref", "--short", "HEAD"]),
        "lanes/a"
    );
}

#[test]
fn a_conflicting_rebase_is_aborted_back_to_the_exact_previous_head() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    commit(&sb, &path, "ok.txt", "fine\n", "lane commit that applies");
    commit(&sb, &path, "src/f1.txt", "lane\n", "lane edits f1");
    let theirs = commit(&sb, &root, "src/f1.txt", "main\n", "main edits f1");
    let before = snapshot(&sb, &path);
    let old_head = sb.sha(&path, "HEAD");

    let outcome = merge_forward(&repo, &path, "main", MergePolicy::Rebase).expect("answers");
    assert_eq!(
        outcome,
        MergeOutcome::Conflict {
            paths: vec!["src/f1.txt".into()],
            head: old_head.clone(),
            base_sha: theirs,
            method: MergeMethod::Rebase,
        }
    );
    assert_eq!(sb.sha(&path, "HEAD"), old_head);
    assert_eq!(sb.sha(&root, "lanes/a"), old_head);
    assert_eq!(
        sb.git(&path, &["symbolic-ref", "--short", "HEAD"]),
        "lanes/a"
    );
    assert!(clean(&sb, &path));
    assert_eq!(git_operation(&path).expect("readable"), None);
    assert_eq!(snapshot(&sb, &path), before);
}

#[test]
fn warn_and_block_leave_a_stale_lane_alone() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    let head = sb.sha(&path, "HEAD");
    let fix = commit(&sb, &root, "fix.txt", "fix\n", "the fix");
    // Dirty, too: warn and block do not look.
    fs::write(path.join("wip.txt"), "wip\n").expect("writable");
    let before = snapshot(&sb, &path);
    for policy in [MergePolicy::Warn, MergePolicy::Block] {
        assert_eq!(
            merge_forward(&repo, &path, "main", policy).expect("answers"),
            MergeOutcome::NotApplied {
                policy,
                head: head.clone(),
                base_sha: fix.clone()
            }
        );
        assert_eq!(snapshot(&sb, &path), before);
    }
}

#[test]
fn merge_forward_refuses_the_main_worktree_and_strangers() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let before = snapshot(&sb, &root);
    let err = merge_forward(&repo, &root, "main", MergePolicy::MergeForward)
        .expect_err("the main worktree is not a lane");
    assert!(
        matches!(err, WorktreeError::NotALaneWorktree { .. }),
        "{err:?}"
    );

    let stranger = sb.repo("stranger", "main");
    let strange_lane = sb.path().join("stranger-lane");
    sb.git(
        &stranger,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "x",
            strange_lane.to_str().expect("UTF-8"),
        ],
    );
    let err = merge_forward(&repo, &strange_lane, "main", MergePolicy::MergeForward)
        .expect_err("another repository's worktree is not a lane");
    assert!(
        matches!(err, WorktreeError::NotALaneWorktree { .. }),
        "{err:?}"
    );
    assert_eq!(snapshot(&sb, &root), before);
}

#[test]
fn without_an_identity_clawpool_signs_the_merge() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    // Empty values hide any global identity: git has none for this repository.
    sb.git(&root, &["config", "user.name", ""]);
    sb.git(&root, &["config", "user.email", ""]);
    let repo = open(&root);
    let path = lane(&repo, "a");
    commit(&sb, &path, "lane.txt", "lane\n", "lane work");
    commit(&sb, &root, "fix.txt", "fix\n", "the fix");

    let outcome = merge_forward(&repo, &path, "main", MergePolicy::MergeForward).expect("works");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    let identity_env = ["GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !identity_env {
        assert_eq!(
            sb.git(&path, &["log", "-1", "--format=%an <%ae> / %cn <%ce>"]),
            "clawpool <clawpool@localhost> / clawpool <clawpool@localhost>"
        );
    }
    assert_eq!(
        sb.git(&root, &["config", "--get", "user.name"]),
        "",
        "the configuration is not changed"
    );
}

#[test]
fn a_branch_and_a_base_with_dots_and_slashes_work_everywhere() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    sb.git(&root, &["branch", "release/1.2.x"]);
    let mut spec =
        clawpool_worktree::LaneWorktreeSpec::new(&repo, "feat.ui/x").expect("valid lane name");
    spec.base = "release/1.2.x".into();
    let path = prepare_lane_worktree(&repo, &spec)
        .expect("created")
        .path()
        .to_path_buf();
    let own = commit(&sb, &path, "ui.txt", "ui\n", "ui work");
    assert_eq!(
        head_state(&path).expect("a head"),
        HeadState::Branch {
            name: "lanes/feat.ui/x".into(),
            sha: own.clone()
        }
    );

    sb.git(&root, &["checkout", "-q", "release/1.2.x"]);
    let fix = commit(&sb, &root, "release.txt", "r\n", "release fix");
    let f = check_freshness(&path, "release/1.2.x", &local());
    assert_eq!(
        (f.state, f.ahead, f.behind),
        (FreshnessState::Stale, Some(1), Some(1))
    );
    assert_eq!(f.base_ref, "release/1.2.x");

    let outcome =
        merge_forward(&repo, &path, "release/1.2.x", MergePolicy::MergeForward).expect("works");
    assert!(
        matches!(&outcome, MergeOutcome::Merged { old_head, base_sha, .. }
            if *old_head == own && *base_sha == fix),
        "{outcome:?}"
    );
    assert_eq!(
        sb.git(&path, &["log", "-1", "--format=%s"]),
        "Merge release/1.2.x into lanes/feat.ui/x"
    );
    let f = check_freshness(&path, "release/1.2.x", &local());
    assert_eq!(f.state, FreshnessState::Fresh);
    assert_eq!(
        git_operation(&path).expect("readable"),
        None,
        "nothing left in progress"
    );
}

// ---------------------------------------------------------------------------------------------
// The state file's shapes

#[test]
fn results_serialise_as_the_state_file_expects() {
    let f = Freshness {
        state: FreshnessState::Stale,
        ahead: Some(2),
        behind: Some(1),
        base_ref: "origin/main".into(),
        base_sha: Some("b".into()),
        head: Some("h".into()),
        merge_base: Some("m".into()),
        missing: vec![MissingCommit {
            sha: "b".into(),
            subject: "fix".into(),
        }],
        checked_at: 1_700_000_000,
        operation: None,
        error: None,
        dropped: None,
    };
    let value = serde_json::to_value(&f).expect("serialisable");
    assert_eq!(
        value,
        serde_json::json!({
            "state": "stale", "ahead": 2, "behind": 1, "base_ref": "origin/main",
            "base_sha": "b", "head": "h", "merge_base": "m",
            "missing": [{"sha": "b", "subject": "fix"}], "checked_at": 1_700_000_000u64,
            "operation": null, "error": null,
        })
    );
    assert_eq!(
        serde_json::from_value::<Freshness>(value).expect("round trip"),
        f
    );
    // Older records without the optional fields still read.
    let minimal = serde_json::json!({
        "state": "unknown", "ahead": null, "behind": null, "base_ref": "main",
        "base_sha": null, "merge_base": null, "checked_at": 1,
    });
    let read: Freshness = serde_json::from_value(minimal).expect("minimal record reads");
    assert_eq!(
        (read.state, read.missing.len()),
        (FreshnessState::Unknown, 0)
    );

    assert_eq!(
        json(&FreshnessState::Diverged),
        serde_json::json!("diverged")
    );
    assert_eq!(
        json(&MergePolicy::default()),
        serde_json::json!("merge_forward")
    );
    assert_eq!(json(&MergePolicy::Block), serde_json::json!("block"));
    assert_eq!(
        json(&GitOperation {
            kind: GitOperationKind::CherryPick,
            paused: true
        }),
        serde_json::json!({"kind": "cherry_pick", "paused": true})
    );
    assert_eq!(
        json(&HeadState::Detached { sha: "d".into() }),
        serde_json::json!({"kind": "detached", "sha": "d"})
    );
    assert_eq!(
        json(&MergeOutcome::Conflict {
            paths: vec!["a".into()],
            head: "h".into(),
            base_sha: "b".into(),
            method: MergeMethod::Rebase
        }),
        serde_json::json!({"outcome": "conflict", "paths": ["a"], "head": "h",
            "base_sha": "b", "method": "rebase"})
    );
    assert_eq!(
        json(&FetchOutcome::Skipped {
            remote: "origin".into(),
            last_attempt: 5,
            last_error: None
        }),
        serde_json::json!({"outcome": "skipped", "remote": "origin", "last_attempt": 5,
            "last_error": null})
    );
    assert_eq!(
        serde_json::from_str::<MergePolicy>("\"rebase\"").expect("reads"),
        MergePolicy::Rebase
    );
}

/// A value as JSON.
fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("serialisable")
}

/// The chunk ids in a commit-graph file's table of contents (format: 8-byte header whose last
/// byte is the chunk count, then 12-byte entries of a 4-byte id and an 8-byte offset).
fn graph_chunks(file: &std::path::Path) -> Vec<String> {
    let bytes = fs::read(file).expect("the commit-graph is readable");
    assert_eq!(&bytes[..4], b"CGPH", "a commit-graph file");
    let count = usize::from(bytes[6]);
    (0..count)
        .map(|i| String::from_utf8_lossy(&bytes[8 + 12 * i..12 + 12 * i]).into_owned())
        .collect()
}

#[test]
fn a_check_writes_a_commit_graph_libgit2_reads_once_when_there_is_none() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    commit(&sb, &root, "m1.txt", "1\n", "one");
    let graph = repo.common_dir().join("objects/info/commit-graph");
    assert!(!clawpool_worktree::has_commit_graph(repo.common_dir()));

    // Asked not to, it writes nothing.
    let f = check_freshness(&path, "main", &local());
    assert_eq!(f.behind, Some(1));
    assert!(!graph.exists());

    let f = check_freshness(
        &path,
        "main",
        &FreshnessOptions {
            fetch: None,
            ..FreshnessOptions::default()
        },
    );
    assert_eq!((f.state, f.behind), (FreshnessState::Stale, Some(1)));
    assert!(graph.is_file(), "a commit-graph was written");
    let chunks = graph_chunks(&graph);
    assert!(chunks.contains(&"CDAT".to_owned()), "{chunks:?}");
    // Generation numbers v2 (`GDA2`) would make libgit2 1.9 ignore the whole file.
    assert!(!chunks.iter().any(|c| c.starts_with("GD")), "{chunks:?}");
    assert!(sb.git_ok(&root, &["commit-graph", "verify"]));
    // The repository's configuration is not changed.
    let config = fs::read_to_string(repo.common_dir().join("config")).expect("config");
    assert!(!config.contains("commitGraph"), "{config}");
    assert!(sb.git(&root, &["status", "--porcelain"]).is_empty());
}

#[test]
fn a_repository_with_a_commit_graph_of_its_own_keeps_it() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    commit(&sb, &root, "m1.txt", "1\n", "one");
    sb.git(&root, &["commit-graph", "write", "--reachable"]);
    let graph = repo.common_dir().join("objects/info/commit-graph");
    let before = fs::read(&graph).expect("git's graph");
    commit(&sb, &root, "m2.txt", "2\n", "two");
    let f = check_freshness(
        &path,
        "main",
        &FreshnessOptions {
            fetch: None,
            ..FreshnessOptions::default()
        },
    );
    assert_eq!(f.behind, Some(2), "{f:?}");
    assert_eq!(
        fs::read(&graph).expect("still there"),
        before,
        "left as it was"
    );
}

// ---------------------------------------------------------------------------------------------
// Commit-graphs libgit2 cannot read: the walk goes through the git CLI

/// Writes a commit object by hand, with a fixed date and the tree of the repository's HEAD,
/// so that the history (dates, merges, clock skew, odd messages) is exactly as a test says.
fn raw_commit(sb: &Sandbox, root: &Path, parents: &[&str], time: u64, message: &str) -> String {
    let tree = sb.git(root, &["rev-parse", "HEAD^{tree}"]);
    let mut text = format!("tree {tree}\n");
    for parent in parents {
        text.push_str(&format!("parent {parent}\n"));
    }
    let who = "Lane Tester <lanes@example.invalid>";
    text.push_str(&format!(
        "author {who} {time} +0000\ncommitter {who} {time} +0000\n\n{message}"
    ));
    let file = sb.path().join("raw-commit");
    fs::write(&file, text).expect("the commit text is writable");
    let file = file.to_str().expect("UTF-8 sandbox path");
    sb.git(root, &["hash-object", "-t", "commit", "-w", file])
}

/// A history with what can make two walks disagree: a merged side branch, a parent dated
/// after its child (clock skew), commits with the same date, subjects wrapped over several
/// lines, led by blank lines, or not ASCII, an unrelated history, and a criss-cross merge
/// (two best common ancestors). Every commit is a loose object with a branch on it, so
/// `git commit-graph write --reachable` covers them all. Returns each branch's commit by name.
fn tangled_history(sb: &Sandbox, root: &Path) -> BTreeMap<&'static str, String> {
    let c =
        |parents: &[&str], time: u64, message: &str| raw_commit(sb, root, parents, time, message);
    let mut b = BTreeMap::new();
    let r = c(&[], 1_000, "root\n");
    let m1 = c(&[&r], 1_100, "main one\n");
    // Dated after its child `side one` (clock skew at a fork: `git log` without
    // `--date-order` would list it before that child).
    let m2 = c(
        &[&m1],
        1_260,
        "fix: two\nwrapped onto a second line\n\nwith a body\n",
    );
    let f1 = c(&[&m2], 1_250, "side one\n");
    let f2 = c(&[&f1], 1_450, "side two, dated after main three\n");
    let m3 = c(&[&m2], 1_300, "\n\nled by blank lines\n");
    let m4 = c(&[&m3], 1_300, "same second as its parent\n");
    let merge = c(&[&m4, &f2], 1_500, "Merge branch 'side'\n");
    // Clock skew: dated before its parent.
    let m5 = c(&[&merge], 1_150, "ünïcode ✓ from a skewed clock\n");
    let mut tip = m5.clone();
    for i in 0..6 {
        tip = c(&[&tip], 1_600 + i * 10, &format!("main {}\n", 6 + i));
    }
    b.insert("main", tip.clone());
    // Lanes on main.
    let l1 = c(&[&m2], 1_700, "lane work one\n");
    b.insert("lane-stale", c(&[&l1], 1_710, "lane work two\n"));
    b.insert("lane-behind", m3.clone());
    b.insert("lane-fresh", tip.clone());
    b.insert("lane-ahead", c(&[&tip], 1_720, "lane ahead\n"));
    b.insert("lane-side", f2.clone());
    // Unrelated history.
    let u = c(&[], 1_050, "another root\n");
    b.insert("lane-unrelated", c(&[&u], 1_060, "another history\n"));
    // Criss-cross: x1 and y1 each merge the other's parent, so x0 and y0 are both best common
    // ancestors of x1 and y1.
    let x0 = c(&[&m1], 1_210, "x0\n");
    let y0 = c(&[&m1], 1_220, "y0\n");
    b.insert("cross-x", c(&[&x0, &y0], 1_230, "x1\n"));
    b.insert("cross-y", c(&[&y0, &x0], 1_240, "y1\n"));
    b.insert("cross-y-later", c(&[&b["cross-y"].clone()], 1_800, "y2\n"));
    for (name, sha) in &b {
        sb.git(root, &["update-ref", &format!("refs/heads/{name}"), sha]);
    }
    sb.git(root, &["reset", "-q", "--hard", "main"]);
    b
}

/// The comparisons made on [`tangled_history`]: (lane branch, base, max missing).
const TANGLED_CHECKS: [(&str, &str, usize); 9] = [
    ("lane-stale", "main", 50),
    ("lane-stale", "main", 3),
    ("lane-behind", "main", 50),
    ("lane-fresh", "main", 50),
    ("lane-ahead", "main", 50),
    ("lane-side", "main", 50),
    ("lane-unrelated", "main", 50),
    ("cross-x", "cross-y", 50),
    ("cross-x", "cross-y-later", 50),
];

/// `check_freshness` for each of [`TANGLED_CHECKS`], each in a worktree of its own (detached
/// at the lane's commit) made for this call, so that no walk remembered from another call is
/// reused; `checked_at` zeroed for comparing.
fn tangled_checks(sb: &Sandbox, root: &Path, label: &str) -> Vec<Freshness> {
    TANGLED_CHECKS
        .iter()
        .enumerate()
        .map(|(i, (lane, base, max_missing))| {
            let path = sb.path().join(format!("{label}-{i}"));
            let path_str = path.to_str().expect("UTF-8 sandbox path");
            sb.git(root, &["worktree", "add", "-q", "--detach", path_str, lane]);
            let options = FreshnessOptions {
                max_missing: *max_missing,
                ..local()
            };
            let f = check_freshness(&path, base, &options);
            assert_eq!(f.error, None, "{lane} against {base}: {f:?}");
            Freshness { checked_at: 0, ..f }
        })
        .collect()
}

#[test]
fn commit_graph_tells_the_graphs_libgit2_reads_from_those_it_cannot() {
    use clawpool_worktree::{CommitGraph, commit_graph, ensure_commit_graph};
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let common = repo.common_dir();
    commit(&sb, &root, "m1.txt", "1\n", "one");
    let info = common.join("objects/info");
    assert_eq!(commit_graph(common), CommitGraph::None);

    // clawpool's own: generation numbers v1.
    assert!(ensure_commit_graph(common, &root).expect("written"));
    assert_eq!(commit_graph(common), CommitGraph::Readable);

    // git's default (v2, a `GDA2` chunk), replacing it: noticed although the verdict is
    // remembered, because the file changed.
    sb.git(&root, &["commit-graph", "write", "--reachable"]);
    assert!(graph_chunks(&info.join("commit-graph")).contains(&"GDA2".to_owned()));
    assert_eq!(commit_graph(common), CommitGraph::Unreadable);

    // v1 with changed-path Bloom filters: chunks libgit2 knows and skips.
    sb.git(
        &root,
        &[
            "-c",
            "commitGraph.generationVersion=1",
            "commit-graph",
            "write",
            "--reachable",
            "--changed-paths",
        ],
    );
    let chunks = graph_chunks(&info.join("commit-graph"));
    assert!(chunks.contains(&"BIDX".to_owned()), "{chunks:?}");
    assert_eq!(commit_graph(common), CommitGraph::Readable);

    // Not a commit-graph libgit2 can parse at all.
    fs::write(info.join("commit-graph"), "not a graph").expect("writable");
    assert_eq!(commit_graph(common), CommitGraph::Unreadable);

    // Only a split chain (as `git maintenance` writes): libgit2 reads none of it.
    fs::remove_file(info.join("commit-graph")).expect("removable");
    assert_eq!(commit_graph(common), CommitGraph::None);
    sb.git(
        &root,
        &[
            "-c",
            "commitGraph.generationVersion=1",
            "commit-graph",
            "write",
            "--reachable",
            "--split",
        ],
    );
    assert!(!info.join("commit-graph").exists());
    assert!(info.join("commit-graphs/commit-graph-chain").is_file());
    assert_eq!(commit_graph(common), CommitGraph::Unreadable);
}

#[test]
fn with_a_graph_libgit2_cannot_read_git_walks_and_agrees_with_libgit2() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let b = tangled_history(&sb, &root);

    // No commit-graph: libgit2 walks.
    assert_eq!(
        clawpool_worktree::commit_graph(repo.common_dir()),
        clawpool_worktree::CommitGraph::None
    );
    let by_libgit2 = tangled_checks(&sb, &root, "libgit2");

    // git's default graph, which libgit2 cannot read: git walks.
    sb.git(&root, &["commit-graph", "write", "--reachable"]);
    assert_eq!(
        clawpool_worktree::commit_graph(repo.common_dir()),
        clawpool_worktree::CommitGraph::Unreadable
    );
    let by_git = tangled_checks(&sb, &root, "git");

    for (((lane, base, max), a), b) in TANGLED_CHECKS.iter().zip(&by_libgit2).zip(&by_git) {
        assert_eq!(a, b, "{lane} against {base}, {max} missing at most");
    }

    // And what they agree on is right (so both cannot be wrong the same way).
    let [
        stale,
        capped,
        behind,
        fresh,
        ahead,
        side,
        unrelated,
        cross,
        cross_later,
    ] = <[Freshness; 9]>::try_from(by_git).expect("one per check");
    let summary = |f: &Freshness| (f.state, f.ahead, f.behind);
    assert_eq!(summary(&stale), (FreshnessState::Stale, Some(2), Some(12)));
    assert_eq!(
        stale.merge_base.as_deref(),
        Some(sb.sha(&root, "main~10").as_str())
    );
    assert_eq!(stale.missing.len(), 12);
    assert_eq!(stale.missing[0].sha, b["main"]);
    assert_eq!(stale.missing[0].subject, "main 11");
    let subjects: Vec<&str> = stale.missing.iter().map(|m| m.subject.as_str()).collect();
    assert!(
        subjects.contains(&"ünïcode ✓ from a skewed clock"),
        "{subjects:?}"
    );
    assert!(subjects.contains(&"led by blank lines"), "{subjects:?}");
    // Never a parent before its child, whatever the dates say.
    let position = |subject: &str| subjects.iter().position(|s| *s == subject).expect("listed");
    assert!(position("ünïcode ✓ from a skewed clock") < position("Merge branch 'side'"));
    assert!(position("Merge branch 'side'") < position("side two, dated after main three"));
    assert_eq!(capped.missing, stale.missing[..3]);
    assert_eq!(capped.behind, Some(12));
    assert_eq!(summary(&behind), (FreshnessState::Stale, Some(0), Some(11)));
    assert_eq!(behind.merge_base, behind.head);
    assert_eq!(summary(&fresh), (FreshnessState::Fresh, Some(0), Some(0)));
    assert_eq!(summary(&ahead), (FreshnessState::Fresh, Some(1), Some(0)));
    assert_eq!(summary(&side), (FreshnessState::Stale, Some(0), Some(10)));
    assert_eq!(
        summary(&unrelated),
        (FreshnessState::Diverged, Some(2), Some(15))
    );
    assert_eq!(unrelated.merge_base, None);
    let listed: Vec<&str> = unrelated
        .missing
        .iter()
        .map(|m| m.subject.as_str())
        .collect();
    let at = |subject: &str| listed.iter().position(|s| *s == subject).expect("listed");
    assert!(
        at("side one") < at("fix: two wrapped onto a second line"),
        "{listed:?}"
    );
    assert_eq!(summary(&cross), (FreshnessState::Stale, Some(1), Some(1)));
    let bases = sb.git(&root, &["merge-base", "--all", "cross-x", "cross-y"]);
    assert_eq!(bases.lines().count(), 2, "a criss-cross: {bases}");
    assert!(
        bases
            .lines()
            .any(|base| Some(base) == cross.merge_base.as_deref())
    );
    assert_eq!(
        summary(&cross_later),
        (FreshnessState::Stale, Some(1), Some(2))
    );
}

#[test]
fn the_git_walk_uses_the_graph_and_is_reused_until_something_moves() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let path = lane(&repo, "a");
    commit(&sb, &path, "lane.txt", "l\n", "lane work");
    let m1 = commit(&sb, &root, "m1.txt", "1\n", "one");
    let m2 = commit(&sb, &root, "m2.txt", "2\n", "two");
    let m3 = commit(&sb, &root, "m3.txt", "3\n", "three");
    let m4 = commit(&sb, &root, "m4.txt", "4\n", "four");
    sb.git(&root, &["commit-graph", "write", "--reachable"]);
    let loose = |sha: &str| {
        repo.common_dir()
            .join("objects")
            .join(&sha[..2])
            .join(&sha[2..])
    };
    // The oldest missing commit is needed by a walk that reads objects (libgit2 with a graph
    // it cannot read), not by one that reads the graph (git), when only the newest three are
    // listed.
    fs::remove_file(loose(&m1)).expect("a loose object");
    let three = FreshnessOptions {
        max_missing: 3,
        ..local()
    };
    let first = check_freshness(&path, "main", &three);
    assert_eq!(first.error, None, "{first:?}");
    assert_eq!(
        (first.state, first.ahead, first.behind),
        (FreshnessState::Stale, Some(1), Some(4))
    );
    assert_eq!(
        first
            .missing
            .iter()
            .map(|m| m.sha.as_str())
            .collect::<Vec<_>>(),
        [m4.as_str(), m3.as_str(), m2.as_str()]
    );

    // The same check by libgit2 (the graph gone, another worktree at the same commit) needs
    // the missing object: the check above was not made by libgit2.
    let graph = repo.common_dir().join("objects/info/commit-graph");
    let aside = sb.path().join("commit-graph");
    fs::rename(&graph, &aside).expect("the graph moves");
    let other = sb.path().join("other");
    let other_str = other.to_str().expect("UTF-8 sandbox path");
    sb.git(
        &root,
        &["worktree", "add", "-q", "--detach", other_str, "lanes/a"],
    );
    let by_libgit2 = check_freshness(&other, "main", &three);
    assert_eq!(by_libgit2.state, FreshnessState::Unknown, "{by_libgit2:?}");
    assert!(by_libgit2.error.is_some());

    // Back to git's graph: a repeated check reuses the walk, even with a listed commit gone.
    fs::rename(&aside, &graph).expect("the graph moves back");
    fs::remove_file(loose(&m3)).expect("a loose object");
    let again = check_freshness(&path, "main", &three);
    assert_eq!(
        again,
        Freshness {
            checked_at: again.checked_at,
            ..first
        },
        "reused, not walked"
    );

    // The base moves: git walks again, cannot read the listed commit's subject, and the state
    // is unknown with git's message, never fresh.
    commit(&sb, &root, "m5.txt", "5\n", "five");
    let moved = check_freshness(&path, "main", &three);
    assert_eq!(moved.state, FreshnessState::Unknown, "{moved:?}");
    let error = moved.error.expect("says why");
    assert!(error.contains("git log"), "{error}");
}
