//! Lane worktrees registered without `git worktree add` (`docs/worktrees.md`, "Creating"), in
//! real repositories: creating a lane reads nothing of the other worktrees (which is what keeps
//! its cost flat), and git agrees that the result is a worktree — `git worktree list`,
//! `git status`, `git worktree prune` and `git worktree remove` — also after a failure midway
//! and after creations racing for the lock.

mod support;

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clawpool_worktree::{LaneWorktreeSpec, Prepared, Repo, prepare_lane_worktree};
use support::{Sandbox, open};

/// The defaults for `lane`.
fn spec(repo: &Repo, lane: &str) -> LaneWorktreeSpec {
    LaneWorktreeSpec::new(repo, lane).expect("the lane name is valid")
}

/// The files opened inside `dirs` while `action` ran, as the kernel reported them (inotify
/// `IN_OPEN`: every open, by any process, is queued before `open` returns, so reading the
/// queue after `action` sees all of them).
fn files_opened_in<T>(dirs: &[PathBuf], action: impl FnOnce() -> T) -> (T, Vec<String>) {
    // SAFETY: plain system calls on a descriptor this function owns and closes; the buffer
    // outlives every read into it, and events are parsed within the bytes read.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
        assert!(fd >= 0, "inotify is available");
        let mut names = std::collections::HashMap::new();
        for dir in dirs {
            let c = CString::new(dir.as_os_str().as_bytes()).expect("no NUL in the path");
            let wd = libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN);
            assert!(wd >= 0, "{} can be watched", dir.display());
            names.insert(wd, dir.clone());
        }
        let result = action();
        let mut opened = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at < n as usize {
                let event = buf
                    .as_ptr()
                    .add(at)
                    .cast::<libc::inotify_event>()
                    .read_unaligned();
                let name_bytes =
                    &buf[at + size_of::<libc::inotify_event>()..][..event.len as usize];
                let name = String::from_utf8_lossy(name_bytes)
                    .trim_end_matches('\0')
                    .to_owned();
                let dir = names
                    .get(&event.wd)
                    .map_or_else(String::new, |d| d.display().to_string());
                opened.push(format!("{dir}/{name}"));
                at += size_of::<libc::inotify_event>() + event.len as usize;
            }
        }
        libc::close(fd);
        (result, opened)
    }
}

/// `git worktree list --porcelain`, one map per worktree (`worktree`, `HEAD`, `branch`,
/// `locked`, `prunable`, …).
fn porcelain(sb: &Sandbox, root: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    sb.git(root, &["worktree", "list", "--porcelain"])
        .split("\n\n")
        .map(|block| {
            block
                .lines()
                .map(|line| {
                    let (key, value) = line.split_once(' ').unwrap_or((line, ""));
                    (key.to_owned(), value.to_owned())
                })
                .collect()
        })
        .collect()
}

#[test]
fn a_new_lane_opens_nothing_in_the_other_worktrees_admin_folders() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    for lane in ["first", "second", "third"] {
        prepare_lane_worktree(&repo, &spec(&repo, lane)).expect("the lane is created");
    }
    let admin = repo.common_dir().join("worktrees");
    let others: Vec<PathBuf> = ["first", "second", "third"]
        .iter()
        .map(|id| admin.join(id))
        .collect();

    let (prepared, opened) = files_opened_in(&others, || {
        prepare_lane_worktree(&repo, &spec(&repo, "fourth"))
    });

    let prepared = prepared.expect("the fourth lane is created");
    assert!(matches!(
        prepared,
        Prepared::Created {
            new_branch: true,
            ..
        }
    ));
    // `git worktree add` reads every other worktree's HEAD, gitdir and commondir (several
    // times each): its cost grows with the number of worktrees.
    assert_eq!(
        opened,
        Vec::<String>::new(),
        "other worktrees' files were read"
    );
}

#[test]
fn a_directly_registered_lane_is_a_worktree_to_list_status_prune_and_remove() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let main_sha = sb.sha(&root, "main");
    let prepared = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect("the lane is created");
    let path = prepared.path().to_path_buf();

    // The admin folder has git's layout, and nothing still marks it as being made.
    let admin_dir = repo.common_dir().join("worktrees/a");
    assert_eq!(
        fs::read_to_string(path.join(".git")).expect("the .git file exists"),
        format!("gitdir: {}\n", admin_dir.display())
    );
    assert_eq!(
        fs::read_to_string(admin_dir.join("gitdir")).expect("gitdir exists"),
        format!("{}\n", path.join(".git").display())
    );
    assert!(!admin_dir.join("locked").exists(), "still locked");

    let listed = porcelain(&sb, &root);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let lane = &listed[1];
    assert_eq!(lane["worktree"], path.display().to_string());
    assert_eq!(lane["HEAD"], main_sha);
    assert_eq!(lane["branch"], "refs/heads/lanes/a");
    assert!(
        !lane.contains_key("locked") && !lane.contains_key("prunable"),
        "{lane:?}"
    );

    assert_eq!(
        sb.git(&path, &["status", "--porcelain"]),
        "",
        "the lane is clean"
    );
    assert_eq!(
        sb.git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "lanes/a"
    );
    assert_eq!(
        fs::read_to_string(path.join("src/f3.txt")).expect("files are checked out"),
        "3\n"
    );
    // A commit in the lane moves its branch, not main.
    fs::write(path.join("new.txt"), "new\n").expect("the lane is writable");
    sb.git(&path, &["add", "new.txt"]);
    sb.git(&path, &["commit", "-q", "-m", "lane work"]);
    assert_ne!(sb.sha(&root, "lanes/a"), main_sha);
    assert_eq!(sb.sha(&root, "main"), main_sha);

    sb.git(&root, &["worktree", "prune"]);
    assert_eq!(
        sb.worktrees(&root),
        vec![root.clone(), path.clone()],
        "prune kept the lane"
    );

    sb.git(
        &root,
        &["worktree", "remove", path.to_str().expect("UTF-8")],
    );
    assert!(!path.exists(), "the folder is gone");
    assert!(!admin_dir.exists(), "the registration is gone");
    assert_eq!(porcelain(&sb, &root).len(), 1);
    assert!(
        repo.branch_exists("lanes/a"),
        "the branch keeps the lane's commit"
    );
}

#[test]
fn a_checkout_failing_after_the_registration_leaves_no_registration_folder_or_branch() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    // A required smudge filter that fails makes the checkout (`git reset --hard` in the new
    // worktree) fail after the branch, the admin folder and the `.git` file exist.
    fs::write(root.join(".gitattributes"), "*.txt filter=boom\n").expect("writable");
    sb.git(&root, &["add", ".gitattributes"]);
    sb.git(&root, &["commit", "-q", "-m", "attributes"]);
    sb.git(&root, &["config", "filter.boom.smudge", "false"]);
    sb.git(&root, &["config", "filter.boom.required", "true"]);
    let repo = open(&root);
    prepare_lane_worktree(&repo, &spec(&repo, "kept")).expect_err("the filter fails");
    // (That first failure is undone too; this lane is for the counts below.)
    sb.git(&root, &["config", "--unset", "filter.boom.required"]);
    sb.git(&root, &["config", "filter.boom.smudge", "cat"]);
    prepare_lane_worktree(&repo, &spec(&repo, "kept")).expect("the lane is created");
    sb.git(&root, &["config", "filter.boom.smudge", "false"]);
    sb.git(&root, &["config", "filter.boom.required", "true"]);

    let err = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect_err("the filter fails");
    assert!(err.to_string().contains("boom"), "{err}");

    assert!(
        !sb.git_ok(&root, &["rev-parse", "--verify", "refs/heads/lanes/a"]),
        "the branch is gone"
    );
    assert!(
        !sb.path().join("proj.lanes/a").exists(),
        "the folder is gone"
    );
    let admin: BTreeSet<String> = fs::read_dir(repo.common_dir().join("worktrees"))
        .expect("the kept lane's registration is there")
        .map(|e| {
            e.expect("readable")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        admin,
        BTreeSet::from(["kept".to_owned()]),
        "the registration is gone"
    );
    assert_eq!(porcelain(&sb, &root).len(), 2, "main and the kept lane");
    assert!(
        sb.path().join("proj.lanes/kept").exists(),
        "the other lane is untouched"
    );
}

#[test]
fn lanes_racing_for_the_lock_with_one_folder_name_get_numbered_registrations() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let main_sha = sb.sha(&root, "main");
    // Eight lanes whose folders are all called `x` (`proj.lanes/<i>/x`): git numbers their
    // admin folders `x`, `x1`, … and so must the direct registration.
    let lanes: Vec<String> = (0..8).map(|i| format!("g{i}/x")).collect();
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .iter()
            .map(|lane| {
                let repo = &repo;
                scope.spawn(move || prepare_lane_worktree(repo, &spec(repo, lane)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no thread panics"))
            .collect()
    });
    for (lane, result) in lanes.iter().zip(results) {
        let prepared = result.unwrap_or_else(|err| panic!("lane {lane} failed: {err}"));
        assert_eq!(prepared.head_sha(), main_sha);
        assert_eq!(sb.git(prepared.path(), &["status", "--porcelain"]), "");
    }
    let listed = porcelain(&sb, &root);
    assert_eq!(listed.len(), 9, "{listed:?}");
    let branches: BTreeSet<&str> = listed[1..].iter().map(|w| w["branch"].as_str()).collect();
    let expected: BTreeSet<String> = lanes
        .iter()
        .map(|l| format!("refs/heads/lanes/{l}"))
        .collect();
    assert_eq!(
        branches,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    let admin: BTreeSet<String> = fs::read_dir(repo.common_dir().join("worktrees"))
        .expect("registrations exist")
        .map(|e| {
            e.expect("readable")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let numbered: BTreeSet<String> = std::iter::once("x".to_owned())
        .chain((1..8).map(|i| format!("x{i}")))
        .collect();
    assert_eq!(admin, numbered);
    // Each worktree's `.git` file and its admin folder's `gitdir` point at each other.
    for worktree in &listed[1..] {
        let path = Path::new(&worktree["worktree"]);
        let dot_git = fs::read_to_string(path.join(".git")).expect("the .git file exists");
        let admin_dir = PathBuf::from(dot_git.trim_end().trim_start_matches("gitdir: "));
        assert_eq!(
            fs::read_to_string(admin_dir.join("gitdir")).expect("gitdir exists"),
            format!("{}\n", path.join(".git").display())
        );
    }
    sb.git(&root, &["worktree", "prune"]);
    assert_eq!(porcelain(&sb, &root).len(), 9, "prune kept every lane");
}

#[test]
fn the_post_checkout_hook_in_the_repositorys_hooks_folder_runs_as_git_worktree_add_runs_it() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    let main_sha = sb.sha(&root, "main");
    let record = sb.path().join("hook-ran");
    let hook = repo.common_dir().join("hooks/post-checkout");
    fs::create_dir_all(hook.parent().expect("has a parent")).expect("the hooks folder");
    fs::write(
        &hook,
        format!("#!/bin/sh\necho \"$(pwd) $*\" >> {}\n", record.display()),
    )
    .expect("the hook is writable");
    let mut perms = fs::metadata(&hook).expect("the hook exists").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(&hook, perms).expect("the hook is executable");

    let prepared = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect("the lane is created");

    assert_eq!(
        fs::read_to_string(&record).expect("the hook ran"),
        format!(
            "{} {} {main_sha} 1\n",
            prepared.path().display(),
            "0".repeat(main_sha.len())
        )
    );
}
