//! Lane worktrees in real repositories: creation, reuse and refusal, cleanup after failures,
//! parallel creation, names, the `.claw/` exclude rule, removal, and finding the repository
//! and its main branch.

mod support;

use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use clawpool_worktree::{
    LaneWorktreeSpec, Prepared, Repo, WorktreeError, prepare_lane_worktree, remove_lane_worktree,
    worktree_status,
};
use support::{Sandbox, open};

/// The defaults for `lane`, which the tests expect to hold.
fn spec(repo: &Repo, lane: &str) -> LaneWorktreeSpec {
    LaneWorktreeSpec::new(repo, lane).expect("the lane name is valid")
}

#[test]
fn creates_a_lane_branch_from_main_without_upstream_at_the_default_path() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    // Even with tracking forced on for every new branch, the lane's branch has none.
    sb.git(&root, &["config", "branch.autoSetupMerge", "always"]);
    let repo = open(&root);
    let main_sha = sb.sha(&root, "main");

    let spec = spec(&repo, "a");
    assert_eq!(spec.branch, "lanes/a");
    assert_eq!(spec.base, "main");
    assert_eq!(spec.path, sb.path().join("proj.lanes/a"));

    let prepared = prepare_lane_worktree(&repo, &spec).expect("the lane is created");
    let expected_path = sb.path().join("proj.lanes/a");
    assert_eq!(
        prepared,
        Prepared::Created {
            path: expected_path.clone(),
            branch: "lanes/a".into(),
            base_sha: main_sha.clone(),
            head_sha: main_sha.clone(),
            new_branch: true,
        }
    );
    assert_eq!(sb.sha(&root, "lanes/a"), main_sha);
    assert_eq!(
        sb.git(&expected_path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "lanes/a"
    );
    assert!(
        !sb.git_ok(&root, &["config", "--get", "branch.lanes/a.merge"]),
        "no upstream"
    );
    assert!(
        !sb.git_ok(&root, &["config", "--get", "branch.lanes/a.remote"]),
        "no upstream"
    );
    assert!(
        expected_path.join("src/f3.txt").is_file(),
        "the files are checked out"
    );
    assert_eq!(
        sb.worktrees(&root),
        vec![root.clone(), expected_path.clone()]
    );

    let status = worktree_status(&expected_path).expect("the lane has a status");
    assert_eq!(status.branch.as_deref(), Some("lanes/a"));
    assert_eq!(status.head, main_sha);
    assert!(!status.dirty);
}

#[test]
fn preparing_again_reuses_the_worktree_as_it_is() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let spec = spec(&repo, "a");
    let first = prepare_lane_worktree(&repo, &spec).expect("the lane is created");
    assert!(matches!(first, Prepared::Created { .. }));

    // Work done in the lane survives, uncommitted files included.
    fs::write(first.path().join("work.txt"), "done\n").expect("the lane is writable");
    sb.git(first.path(), &["add", "work.txt"]);
    sb.git(first.path(), &["commit", "-q", "-m", "lane work"]);
    fs::write(first.path().join("scratch.txt"), "wip\n").expect("the lane is writable");
    let lane_sha = sb.sha(first.path(), "HEAD");

    let second = prepare_lane_worktree(&repo, &spec).expect("the lane is reused");
    assert_eq!(
        second,
        Prepared::Reused {
            path: first.path().to_path_buf(),
            branch: "lanes/a".into(),
            head_sha: lane_sha,
        }
    );
    assert!(first.path().join("scratch.txt").is_file());
    assert_eq!(sb.worktrees(&root).len(), 2);
}

#[test]
fn a_worktree_on_another_branch_is_refused_and_left_alone() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let spec = spec(&repo, "a");
    let path = spec
        .path
        .to_str()
        .expect("the sandbox path is UTF-8")
        .to_owned();
    sb.git(
        &root,
        &["worktree", "add", "-q", "-b", "other", &path, "main"],
    );

    let err = prepare_lane_worktree(&repo, &spec).expect_err("another branch is refused");
    match &err {
        WorktreeError::WrongBranch {
            path: p,
            expected,
            found,
        } => {
            assert_eq!(p, &spec.path);
            assert_eq!(expected, "lanes/a");
            assert_eq!(found.as_deref(), Some("other"));
        }
        other => panic!("expected WrongBranch, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&path) && message.contains("\"other\"") && message.contains("lanes/a"),
        "{message}"
    );
    assert!(!repo.branch_exists("lanes/a"), "no branch was made");
    assert_eq!(
        sb.git(&spec.path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "other"
    );

    // A detached HEAD is another branch too.
    sb.git(&spec.path, &["checkout", "-q", "--detach"]);
    let err = prepare_lane_worktree(&repo, &spec).expect_err("a detached HEAD is refused");
    assert!(
        matches!(err, WorktreeError::WrongBranch { found: None, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("detached"), "{err}");
}

#[test]
fn a_missing_base_is_refused_and_nothing_is_made() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let mut spec = spec(&repo, "a");
    spec.base = "no-such-branch".into();

    let err = prepare_lane_worktree(&repo, &spec).expect_err("the base is missing");
    assert!(
        matches!(&err, WorktreeError::BaseNotFound { base, .. } if base == "no-such-branch"),
        "{err:?}"
    );
    assert!(err.to_string().contains("no-such-branch"), "{err}");
    assert!(!repo.branch_exists("lanes/a"));
    assert!(!sb.path().join("proj.lanes").exists(), "no folder was made");
    assert_eq!(sb.worktrees(&root).len(), 1);
}

#[test]
fn an_occupied_folder_is_refused_and_no_branch_is_left() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let spec = spec(&repo, "a");
    fs::create_dir_all(&spec.path).expect("the folder is creatable");
    fs::write(spec.path.join("precious.txt"), "keep me\n").expect("the file is writable");

    let err = prepare_lane_worktree(&repo, &spec).expect_err("the folder is occupied");
    assert!(
        matches!(&err, WorktreeError::PathOccupied { path } if *path == spec.path),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(spec.path.to_str().expect("UTF-8")),
        "{err}"
    );
    assert!(
        !repo.branch_exists("lanes/a"),
        "git would have made the branch before failing"
    );
    assert_eq!(
        fs::read_to_string(spec.path.join("precious.txt")).expect("still there"),
        "keep me\n"
    );

    // Another repository there, and the main worktree itself, are occupied too.
    let other = sb.repo("other", "main");
    let mut at_other = spec.clone();
    at_other.path = other;
    assert!(matches!(
        prepare_lane_worktree(&repo, &at_other),
        Err(WorktreeError::PathOccupied { .. })
    ));
    let mut at_main = spec.clone();
    at_main.path = root.clone();
    assert!(matches!(
        prepare_lane_worktree(&repo, &at_main),
        Err(WorktreeError::PathOccupied { .. })
    ));
    assert!(!repo.branch_exists("lanes/a"));
}

#[test]
fn an_empty_folder_at_the_path_is_used() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let spec = spec(&repo, "a");
    fs::create_dir_all(&spec.path).expect("the folder is creatable");
    let prepared = prepare_lane_worktree(&repo, &spec).expect("an empty folder is fine");
    assert!(matches!(prepared, Prepared::Created { .. }));
}

#[test]
fn a_failure_inside_git_leaves_no_branch_folder_or_registration() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    // A post-checkout hook that fails makes `git worktree add` fail after it has made the
    // branch, the folder and the registration: the worst case to clean up after.
    let hooks = sb.path().join("hooks");
    fs::create_dir(&hooks).expect("the hooks folder is creatable");
    let hook = hooks.join("post-checkout");
    fs::write(&hook, "#!/bin/sh\necho 'hook says no' >&2\nexit 1\n").expect("the hook is writable");
    let mut perms = fs::metadata(&hook).expect("the hook exists").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(&hook, perms).expect("the hook is executable");
    sb.git(
        &root,
        &["config", "core.hooksPath", hooks.to_str().expect("UTF-8")],
    );

    let repo = open(&root);
    let spec = spec(&repo, "a");
    let err = prepare_lane_worktree(&repo, &spec).expect_err("the hook fails the creation");
    match &err {
        WorktreeError::Git { command, stderr } => {
            assert!(command.contains("post-checkout"), "{command}");
            assert!(stderr.contains("hook says no"), "{stderr}");
        }
        other => panic!("expected a git error, got {other:?}"),
    }
    assert!(
        !repo.branch_exists("lanes/a"),
        "the half-made branch is gone"
    );
    assert!(
        !sb.path().join("proj.lanes").exists(),
        "the folders are gone"
    );
    assert_eq!(
        sb.worktrees(&root),
        vec![root.clone()],
        "the registration is gone"
    );

    // Nothing stale is in the way of the next attempt.
    sb.git(&root, &["config", "--unset", "core.hooksPath"]);
    let prepared = prepare_lane_worktree(&repo, &spec).expect("the retry succeeds");
    assert!(matches!(
        prepared,
        Prepared::Created {
            new_branch: true,
            ..
        }
    ));
}

#[test]
fn sixteen_lanes_prepared_from_threads_all_succeed() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let main_sha = sb.sha(&root, "main");
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let repo = &repo;
                scope.spawn(move || prepare_lane_worktree(repo, &spec(repo, &format!("lane-{i}"))))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no thread panics"))
            .collect()
    });
    for (i, result) in results.into_iter().enumerate() {
        let prepared = result.unwrap_or_else(|err| panic!("lane {i} failed: {err}"));
        assert!(
            matches!(prepared, Prepared::Created { .. }),
            "lane {i}: {prepared:?}"
        );
        assert_eq!(prepared.head_sha(), main_sha);
        assert_eq!(sb.sha(&root, &format!("lanes/lane-{i}")), main_sha);
    }
    assert_eq!(sb.worktrees(&root).len(), 17);
    let exclude =
        fs::read_to_string(repo.common_dir().join("info/exclude")).expect("exclude exists");
    assert_eq!(
        exclude.lines().filter(|l| *l == ".claw/").count(),
        1,
        "{exclude}"
    );
}

#[test]
fn the_lock_file_in_the_common_dir_serialises_creation() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let lock_path = repo.common_dir().join("clawpool/worktree.lock");
    // Another process holding the lock looks exactly like this: the same file, locked.
    fs::create_dir_all(lock_path.parent().expect("has a parent"))
        .expect("the lock folder is creatable");
    let held = fs::File::create(&lock_path).expect("the lock file is creatable");
    held.lock().expect("the test takes the lock");

    let (done_tx, done_rx) = mpsc::channel();
    std::thread::scope(|scope| {
        let repo = &repo;
        scope.spawn(move || {
            let result = prepare_lane_worktree(repo, &spec(repo, "a"));
            done_tx
                .send(result.map(|p| p.path().to_path_buf()))
                .expect("the test is listening");
        });
        assert!(
            done_rx.recv_timeout(Duration::from_millis(500)).is_err(),
            "creation waits while the lock is held"
        );
        assert!(!repo.branch_exists("lanes/a"));
        drop(held);
        let path = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("creation proceeds once the lock is free")
            .expect("creation succeeds");
        assert!(path.is_dir());
    });
}

#[test]
fn branch_and_lane_names_with_dots_and_slashes_work() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);

    let lane = spec(&repo, "feat.ui/x");
    assert_eq!(lane.branch, "lanes/feat.ui/x");
    assert_eq!(lane.path, sb.path().join("proj.lanes/feat.ui/x"));
    let prepared = prepare_lane_worktree(&repo, &lane).expect("dots and slashes are fine");
    assert_eq!(prepared.branch(), "lanes/feat.ui/x");
    assert_eq!(
        sb.git(prepared.path(), &["rev-parse", "--abbrev-ref", "HEAD"]),
        "lanes/feat.ui/x"
    );

    let explicit = LaneWorktreeSpec {
        lane: "y".into(),
        branch: "feat.ui/x".into(),
        base: "main".into(),
        path: sb.path().join("elsewhere/y.v2"),
    };
    let prepared = prepare_lane_worktree(&repo, &explicit).expect("an explicit branch is fine");
    assert_eq!(prepared.path(), sb.path().join("elsewhere/y.v2"));
    assert!(repo.branch_exists("feat.ui/x"));
    assert!(matches!(
        prepare_lane_worktree(&repo, &explicit),
        Ok(Prepared::Reused { .. })
    ));
}

#[test]
fn invalid_names_are_refused_before_anything_is_made() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    for lane in ["", "../x", "a//b", "a/./b", "x..y", "a b", "a~1", "x.lock"] {
        let err = LaneWorktreeSpec::new(&repo, lane).expect_err(lane);
        assert!(
            matches!(&err, WorktreeError::InvalidName { what: "lane", name } if name == lane),
            "{err:?}"
        );
    }
    let mut bad = spec(&repo, "a");
    for branch in ["-x", "HEAD", "a..b", "a:b", ""] {
        bad.branch = branch.into();
        let err = prepare_lane_worktree(&repo, &bad).expect_err(branch);
        assert!(
            matches!(&err, WorktreeError::InvalidName { what: "branch", .. }),
            "{err:?}"
        );
    }
    assert!(!sb.path().join("proj.lanes").exists());
}

#[test]
fn exclude_claw_is_idempotent_and_hides_claw_in_every_worktree() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let exclude = repo.common_dir().join("info/exclude");
    fs::create_dir_all(exclude.parent().expect("has a parent")).expect("info is creatable");
    fs::write(&exclude, "*.bak").expect("exclude is writable"); // no final newline
    repo.exclude_claw().expect("the rule is added");
    repo.exclude_claw().expect("adding it again is a no-op");
    let text = fs::read_to_string(&exclude).expect("exclude exists");
    assert!(
        text.starts_with("*.bak\n"),
        "the old content is kept: {text:?}"
    );
    assert_eq!(
        text.lines().filter(|l| *l == ".claw/").count(),
        1,
        "{text:?}"
    );
    let tracked_before = sb.git(&root, &["ls-files"]);

    let prepared = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect("the lane is created");
    assert_eq!(
        fs::read_to_string(&exclude).expect("exclude exists"),
        text,
        "prepare adds nothing more"
    );
    fs::create_dir(prepared.path().join(".claw")).expect(".claw is creatable");
    fs::write(prepared.path().join(".claw/worker-state.json"), "{}").expect("state is writable");
    assert_eq!(
        sb.git(
            prepared.path(),
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
    assert!(!worktree_status(prepared.path()).expect("status").dirty);
    fs::create_dir(root.join(".claw")).expect(".claw is creatable in main");
    assert_eq!(
        sb.git(&root, &["status", "--porcelain"]),
        "",
        "the main worktree too"
    );
    assert_eq!(
        sb.git(&root, &["ls-files"]),
        tracked_before,
        "no tracked file was touched"
    );

    // An equivalent line written by someone else counts.
    let sb2 = Sandbox::new();
    let repo2 = open(&sb2.repo("proj", "main"));
    let exclude2 = repo2.common_dir().join("info/exclude");
    fs::write(&exclude2, "/.claw\n").expect("exclude is writable");
    repo2.exclude_claw().expect("nothing to add");
    assert_eq!(
        fs::read_to_string(&exclude2).expect("exclude exists"),
        "/.claw\n"
    );
}

#[test]
fn a_path_outside_any_repository_is_named_in_the_error() {
    let sb = Sandbox::new();
    let plain = sb.path().join("plain");
    fs::create_dir(&plain).expect("the folder is creatable");
    for path in [plain.clone(), sb.path().join("does-not-exist")] {
        let err = Repo::open(&path).expect_err("not a repository");
        assert!(
            matches!(&err, WorktreeError::NotARepository { path: p } if *p == path),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(path.to_str().expect("UTF-8")),
            "{err}"
        );
    }
    let err = worktree_status(&plain).expect_err("not a worktree");
    assert!(
        matches!(err, WorktreeError::NotARepository { .. }),
        "{err:?}"
    );
}

#[test]
fn the_repository_is_found_from_any_path_in_it_or_its_worktrees() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root.join("src"));
    assert_eq!(repo.root(), root);
    assert_eq!(repo.common_dir(), root.join(".git"));
    let prepared = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect("the lane is created");
    let from_lane = open(&prepared.path().join("src"));
    assert_eq!(from_lane, repo);
    assert_eq!(
        repo.default_worktree_path("b"),
        sb.path().join("proj.lanes/b")
    );
}

#[test]
fn the_main_branch_is_found() {
    let sb = Sandbox::new();
    let main = open(&sb.repo("a", "main"));
    assert_eq!(main.main_branch().expect("found"), "main");
    let master = open(&sb.repo("b", "master"));
    assert_eq!(master.main_branch().expect("found"), "master");

    // With a remote, its HEAD wins over whatever the main worktree has checked out.
    let upstream = sb.repo("upstream", "trunk");
    let clone = sb.path().join("clone");
    sb.git(
        &sb.path(),
        &["clone", "-q", upstream.to_str().expect("UTF-8"), "clone"],
    );
    sb.git(&clone, &["checkout", "-q", "-b", "feature"]);
    let cloned = open(&clone);
    assert_eq!(cloned.main_branch().expect("found"), "trunk");

    // A base that exists only as origin/<name> resolves to it.
    sb.git(&clone, &["branch", "-q", "-D", "trunk"]);
    assert_eq!(
        cloned.resolve("trunk").expect("resolves"),
        sb.sha(&upstream, "trunk")
    );
    let spec = spec(&cloned, "x");
    assert_eq!(spec.base, "trunk");
    let prepared = prepare_lane_worktree(&cloned, &spec).expect("the lane is created");
    assert_eq!(prepared.head_sha(), sb.sha(&upstream, "trunk"));
    assert!(
        !sb.git_ok(&clone, &["config", "--get", "branch.lanes/x.remote"]),
        "no upstream"
    );
}

#[test]
fn an_existing_branch_gets_its_worktree_back() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let spec = spec(&repo, "a");
    let first = prepare_lane_worktree(&repo, &spec).expect("the lane is created");
    fs::write(first.path().join("work.txt"), "done\n").expect("the lane is writable");
    sb.git(first.path(), &["add", "work.txt"]);
    sb.git(first.path(), &["commit", "-q", "-m", "lane work"]);
    let lane_sha = sb.sha(first.path(), "HEAD");

    // Removed properly: the branch stays, and preparing checks it out again.
    remove_lane_worktree(&repo, first.path(), false).expect("a clean lane is removed");
    assert!(!first.path().exists());
    assert!(repo.branch_exists("lanes/a"));
    let again = prepare_lane_worktree(&repo, &spec).expect("the lane is made again");
    assert!(
        matches!(
            &again,
            Prepared::Created { new_branch: false, head_sha, .. } if *head_sha == lane_sha
        ),
        "{again:?}"
    );

    // Deleted by hand: git's stale registration is cleared and the worktree made again.
    fs::remove_dir_all(again.path()).expect("the folder is removable");
    let third = prepare_lane_worktree(&repo, &spec).expect("the stale registration is cleared");
    assert!(
        matches!(
            &third,
            Prepared::Created {
                new_branch: false,
                ..
            }
        ),
        "{third:?}"
    );
    assert_eq!(third.head_sha(), lane_sha);
    assert_eq!(sb.worktrees(&root).len(), 2);
}

#[test]
fn removal_refuses_a_dirty_worktree_unless_forced() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let prepared = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect("the lane is created");
    let path = prepared.path();

    // State in .claw/ is ignored, so it does not make the worktree dirty.
    fs::create_dir(path.join(".claw")).expect(".claw is creatable");
    fs::write(path.join(".claw/worker-state.json"), "{}").expect("state is writable");
    fs::write(path.join("README.md"), "changed\n").expect("the lane is writable");
    assert!(worktree_status(path).expect("status").dirty);
    let err = remove_lane_worktree(&repo, path, false).expect_err("dirty is refused");
    assert!(
        matches!(&err, WorktreeError::Dirty { path: p } if p == path),
        "{err:?}"
    );
    assert!(path.join("README.md").is_file(), "nothing was removed");

    // Untracked files count as well.
    sb.git(path, &["checkout", "-q", "--", "README.md"]);
    assert!(!worktree_status(path).expect("status").dirty);
    fs::write(path.join("new.txt"), "new\n").expect("the lane is writable");
    assert!(matches!(
        remove_lane_worktree(&repo, path, false),
        Err(WorktreeError::Dirty { .. })
    ));

    remove_lane_worktree(&repo, path, true).expect("forced removal works");
    assert!(!path.exists());
    assert_eq!(sb.worktrees(&root), vec![root.clone()]);
    assert!(repo.branch_exists("lanes/a"), "the branch is kept");

    // Neither the main worktree nor a plain folder is a lane.
    let err =
        remove_lane_worktree(&repo, &root, true).expect_err("the main worktree is not a lane");
    assert!(
        matches!(err, WorktreeError::NotALaneWorktree { .. }),
        "{err:?}"
    );
    assert!(root.join("README.md").is_file());
    assert!(matches!(
        remove_lane_worktree(&repo, &sb.path().join("nothing"), false),
        Err(WorktreeError::NotALaneWorktree { .. })
    ));
}

#[test]
fn status_reports_a_detached_head() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    sb.git(&root, &["checkout", "-q", "--detach"]);
    let status = worktree_status(&root).expect("status");
    assert_eq!(status.branch, None);
    assert_eq!(status.head, sb.sha(&root, "HEAD"));
    assert!(!status.dirty);
    assert!(Path::new(&root).join(".git").is_dir());
}

#[test]
fn a_repository_libgit2_cannot_read_is_a_query_error_not_a_missing_one() {
    let sb = Sandbox::new();
    let dir = sb.path().join("reftable");
    fs::create_dir(&dir).expect("the folder is creatable");
    // The reftable ref format needs git 2.45; older git cannot make one, so there is nothing
    // to check.
    if !sb.git_ok(&dir, &["init", "-q", "--ref-format=reftable"]) {
        eprintln!("git cannot make a reftable repository here; skipped");
        return;
    }
    let err = Repo::open(&dir).expect_err("libgit2 does not read reftable");
    assert!(
        matches!(&err, WorktreeError::Query { path, .. } if *path == dir),
        "{err:?}"
    );
}
