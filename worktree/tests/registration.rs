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

/// Every file under `dir` but `.git`, with its kind, executable bit and bytes (a symlink's
/// target), keyed by its path relative to `dir`.
fn tree_of(dir: &Path) -> std::collections::BTreeMap<PathBuf, (String, bool, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).expect("the folder is readable") {
            let entry = entry.expect("the entry is readable");
            let path = entry.path();
            let relative = path.strip_prefix(dir).expect("inside dir").to_path_buf();
            if relative == Path::new(".git") {
                continue;
            }
            let meta = fs::symlink_metadata(&path).expect("the entry exists");
            let executable = meta.permissions().mode() & 0o111 != 0;
            let described = if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).expect("the link is readable");
                (
                    "symlink".to_owned(),
                    false,
                    target.as_os_str().as_bytes().to_vec(),
                )
            } else if meta.is_dir() {
                pending.push(path.clone());
                ("folder".to_owned(), false, Vec::new())
            } else {
                let bytes = fs::read(&path).expect("the file is readable");
                ("file".to_owned(), executable, bytes)
            };
            files.insert(relative, described);
        }
    }
    files
}

/// A repository whose tree has what a checkout must get right: nested folders, an executable,
/// a symlink, line endings converted by `.gitattributes` (`eol=crlf`) and an `ident` keyword.
fn varied_repo(sb: &Sandbox) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let root = sb.repo("proj", "main");
    fs::create_dir_all(root.join("deep/er/still")).expect("writable");
    fs::write(root.join("deep/er/still/leaf.txt"), "leaf\n").expect("writable");
    let script = root.join("run.sh");
    fs::write(&script, "#!/bin/sh\necho run\n").expect("writable");
    let mut perms = fs::metadata(&script).expect("exists").permissions();
    perms.set_mode(0o755);
    fs::set_permissions(&script, perms).expect("chmod");
    std::os::unix::fs::symlink("deep/er/still/leaf.txt", root.join("link")).expect("symlink");
    fs::write(
        root.join(".gitattributes"),
        "*.bat text eol=crlf\nversion.c ident\n",
    )
    .expect("writable");
    fs::write(root.join("build.bat"), "echo one\necho two\n").expect("writable");
    fs::write(root.join("version.c"), "/* $Id$ */\n").expect("writable");
    sb.git(&root, &["add", "."]);
    sb.git(&root, &["commit", "-q", "-m", "varied"]);
    root
}

#[test]
fn a_lane_made_in_process_is_what_git_worktree_add_makes() {
    let sb = Sandbox::new();
    let root = varied_repo(&sb);
    let repo = open(&root);
    let main_sha = sb.sha(&root, "main");
    let by_git = sb.path().join("by-git");
    sb.git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "--no-track",
            "-b",
            "by-git",
            by_git.to_str().expect("UTF-8"),
            "main",
        ],
    );

    let prepared = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect("the lane is created");
    let path = prepared.path().to_path_buf();

    assert_eq!(
        tree_of(&path),
        tree_of(&by_git),
        "the same files, modes, links and bytes"
    );
    assert_eq!(
        fs::read(path.join("build.bat")).expect("checked out"),
        b"echo one\r\necho two\r\n"
    );
    // The same index: entries, modes, blobs and stages.
    assert_eq!(
        sb.git(&path, &["ls-files", "--stage"]),
        sb.git(&by_git, &["ls-files", "--stage"])
    );
    assert_eq!(sb.git(&path, &["status", "--porcelain"]), "");
    assert_eq!(
        sb.git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "lanes/a"
    );
    assert_eq!(sb.sha(&path, "HEAD"), main_sha);
    assert!(
        !sb.git_ok(&root, &["rev-parse", "--abbrev-ref", "lanes/a@{upstream}"]),
        "no upstream"
    );
    let listed = porcelain(&sb, &root);
    let lane = listed
        .iter()
        .find(|w| w["worktree"] == path.display().to_string())
        .expect("git worktree list has the lane");
    assert_eq!(lane["HEAD"], main_sha);
    assert_eq!(lane["branch"], "refs/heads/lanes/a");
    assert!(
        !lane.contains_key("locked") && !lane.contains_key("prunable"),
        "{lane:?}"
    );

    sb.git(&root, &["worktree", "prune"]);
    assert_eq!(porcelain(&sb, &root).len(), 3, "prune kept both");
    sb.git(
        &root,
        &["worktree", "remove", path.to_str().expect("UTF-8")],
    );
    assert!(!path.exists(), "the folder is gone");
    assert!(
        !repo.common_dir().join("worktrees/a").exists(),
        "the registration is gone"
    );
    assert_eq!(porcelain(&sb, &root).len(), 2, "main and git's worktree");
}

/// Set for the child process of [`a_lane_in_a_plain_repository_is_made_without_any_git_process`]:
/// the repository to make lane `a` in, with a recording `git` first on `PATH`.
const CREATE_IN_CHILD: &str = "CLAWPOOL_TEST_CREATE_LANE_IN";

/// Makes lane `a` in `root` in a child process (this test binary, running only `test`) whose
/// `git` writes each command line to the returned file before running the real git.
fn git_calls_of_a_creation_in(sb: &Sandbox, root: &Path, test: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let wrapper_dir = sb.path().join("recording-git");
    let calls = sb.path().join("git-calls");
    // Each child's calls alone: an earlier child's record goes.
    if calls.exists() {
        fs::remove_file(&calls).expect("the record is removable");
    }
    fs::create_dir_all(&wrapper_dir).expect("writable");
    let real_git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .expect("sh runs")
            .stdout,
    )
    .expect("UTF-8");
    let wrapper = wrapper_dir.join("git");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            calls.display(),
            real_git.trim()
        ),
    )
    .expect("writable");
    let mut perms = fs::metadata(&wrapper).expect("exists").permissions();
    perms.set_mode(0o755);
    fs::set_permissions(&wrapper, perms).expect("chmod");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut search = std::ffi::OsString::from(wrapper_dir.as_os_str());
    search.push(":");
    search.push(path);
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(CREATE_IN_CHILD, root)
        .env("PATH", search)
        // The developer's own configuration (a global `core.hooksPath`, say) stays out of it.
        .env("HOME", sb.path().join("home"))
        .env("XDG_CONFIG_HOME", sb.path().join("home/.config"))
        .output()
        .expect("the test binary runs");
    assert!(
        out.status.success(),
        "the child failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    fs::read_to_string(&calls).unwrap_or_default()
}

#[test]
fn a_lane_in_a_plain_repository_is_made_without_any_git_process() {
    const TEST: &str = "a_lane_in_a_plain_repository_is_made_without_any_git_process";
    if let Some(root) = std::env::var_os(CREATE_IN_CHILD) {
        let repo = open(Path::new(&root));
        prepare_lane_worktree(&repo, &spec(&repo, "a")).expect("the lane is created");
        return;
    }
    let sb = Sandbox::new();
    let plain = sb.repo("plain", "main");
    assert_eq!(git_calls_of_a_creation_in(&sb, &plain, TEST), "");
    let lane = sb.path().join("plain.lanes/a");
    assert_eq!(sb.git(&lane, &["status", "--porcelain"]), "");
    assert_eq!(sb.sha(&lane, "HEAD"), sb.sha(&plain, "main"));

    // A filter driver configured but named by no attribute (as git-lfs configures its own for
    // every repository) changes nothing in the checkout: still no git.
    let plain_b = sb.repo("plain-b", "main");
    sb.git(&plain_b, &["config", "filter.pass.smudge", "cat"]);
    assert_eq!(git_calls_of_a_creation_in(&sb, &plain_b, TEST), "");

    // Where git has to run something on the way (here a filter an attribute names), git is
    // what makes the lane; that the recording sees it shows the empty records above are not an
    // accident.
    let filtered = sb.repo("filtered", "main");
    sb.git(&filtered, &["config", "filter.pass.smudge", "cat"]);
    fs::write(filtered.join(".gitattributes"), "*.txt filter=pass\n").expect("writable");
    sb.git(&filtered, &["add", "."]);
    sb.git(&filtered, &["commit", "-q", "-m", "filtered"]);
    let calls = git_calls_of_a_creation_in(&sb, &filtered, TEST);
    assert!(calls.contains("reset --hard"), "{calls}");
    let lane = sb.path().join("filtered.lanes/a");
    assert_eq!(sb.git(&lane, &["status", "--porcelain"]), "");

    // So is a `working-tree-encoding` libgit2 would not apply, even in a nested
    // `.gitattributes`.
    let encoded = sb.repo("encoded", "main");
    fs::write(
        encoded.join("src/.gitattributes"),
        "f1.txt working-tree-encoding=UTF-16LE\n",
    )
    .expect("writable");
    sb.git(&encoded, &["add", "."]);
    sb.git(&encoded, &["commit", "-q", "-m", "encoding"]);
    let calls = git_calls_of_a_creation_in(&sb, &encoded, TEST);
    assert!(calls.contains("reset --hard"), "{calls}");
    let lane = sb.path().join("encoded.lanes/a");
    assert_eq!(sb.git(&lane, &["status", "--porcelain"]), "");
}

#[test]
fn a_checkout_failing_in_process_leaves_no_registration_folder_or_branch() {
    let sb = Sandbox::new();
    let root = sb.repo("proj", "main");
    let repo = open(&root);
    // A blob the base's tree names but the object store has lost: the checkout fails after
    // the branch, the admin folder and the `.git` file exist.
    let blob = sb.git(&root, &["rev-parse", "main:src/f3.txt"]);
    fs::remove_file(
        repo.common_dir()
            .join("objects")
            .join(&blob[..2])
            .join(&blob[2..]),
    )
    .expect("the blob is a loose object");

    let err = prepare_lane_worktree(&repo, &spec(&repo, "a")).expect_err("the checkout fails");

    assert!(
        matches!(
            err,
            clawpool_worktree::WorktreeError::Write {
                what: "check out",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        !sb.git_ok(&root, &["rev-parse", "--verify", "refs/heads/lanes/a"]),
        "the branch is gone"
    );
    assert!(
        !sb.path().join("proj.lanes").exists(),
        "the folders are gone"
    );
    let registrations = fs::read_dir(repo.common_dir().join("worktrees"))
        .map(|entries| entries.count())
        .unwrap_or(0);
    assert_eq!(registrations, 0, "the registration is gone");
    assert_eq!(porcelain(&sb, &root).len(), 1, "only the main worktree");
}
