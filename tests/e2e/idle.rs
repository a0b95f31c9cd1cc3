//! What lanes cost while nothing happens: the supervisor watches every lane of a repository
//! with one inotify instance (not one per lane: the kernel's per-user limit on instances
//! would cap the lanes one user can run), and a commit in a lane's worktree is noticed from
//! the filesystem as it lands, not by a timer reading HEAD.

use std::time::Duration;

use serde_json::Value;

use crate::spawn::setup;

/// Agents that work for a minute: the lanes are running, and quiet, whenever the test looks.
const QUIET_SCENARIO: &str = r#"
trust_dialog = true
[[prompt]]
steps = [{ do = "sleep", ms = 60000 }]
"#;

/// The inotify instances a process holds: its file descriptors that are
/// `anon_inode:inotify`.
fn inotify_instances(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the supervisor's fds")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.as_os_str() == "anon_inode:inotify")
        .count()
}

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn idle_lanes_share_one_inotify_instance_and_a_commit_is_noticed_by_the_watch() {
    let s = setup();
    let lanes = ["l0", "l1", "l2"];
    let mut run = s.spawn_until_running(
        QUIET_SCENARIO,
        r#"{"defaults": {"agent": "scripted"}, "lanes": [
            {"name": "l0", "prompt": "wait"}, {"name": "l1", "prompt": "wait"},
            {"name": "l2", "prompt": "wait"}]}"#,
    );
    for lane in lanes {
        if !run
            .seen
            .iter()
            .any(|e| e["kind"] == "lane.running" && e["lane"] == lane)
        {
            run.wait_for(
                &format!("{lane} running"),
                Duration::from_secs(30),
                |e| e["kind"] == "lane.running" && e["lane"] == lane,
                String::new,
            );
        }
    }

    // Three lanes of one repository, one watcher.
    assert_eq!(
        inotify_instances(run.pid()),
        1,
        "inotify instances of a supervisor with {} lanes of one repository",
        lanes.len()
    );

    // Someone commits in l1's worktree while its agent works: the watch tells the lane.
    let dir = s.lanes_dir().join("l1");
    std::fs::write(dir.join("by-hand.txt"), "by hand\n").expect("a file");
    git(&dir, &["add", "by-hand.txt"]);
    git(&dir, &["commit", "-q", "-m", "made by hand"]);
    let head = git(&dir, &["rev-parse", "HEAD"]);
    let commit: Value = run.wait_for(
        "l1's commit",
        Duration::from_secs(30),
        |e| e["kind"] == "lane.commit.created" && e["lane"] == "l1",
        String::new,
    );
    assert_eq!(commit["detail"]["sha"].as_str(), Some(head.as_str()));
    assert_eq!(commit["detail"]["subject"], "made by hand");
    assert_eq!(
        commit["detail"]["look"], "watch",
        "noticed by the repository's watch, not a sweep: {commit}"
    );
}

/// An agent that works for two seconds (long enough for the test to see its lane running),
/// then commits and is done.
const WORK_AND_COMMIT: &str = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "sleep", ms = 2000 },
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
"#;

/// The terminals a process holds open: its file descriptors on `/dev/ptmx` (a PTY worker's
/// master side).
fn open_terminals(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the supervisor's fds")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.as_os_str() == "/dev/ptmx")
        .count()
}

/// A named pipe at `path`.
fn fifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("a path");
    // SAFETY: mkfifo(3) on a NUL-terminated path we own; no memory is shared.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

#[test]
fn a_finished_lane_keeps_no_terminal_while_it_is_verified() {
    let s = setup();
    // The verification says it started through one pipe and waits on another: while it waits
    // the lane has finished and is being verified, and the test looks at the supervisor then.
    let started = s.sandbox.dir.path().join("started.fifo");
    let release = s.sandbox.dir.path().join("release.fifo");
    fifo(&started);
    fifo(&release);
    let mut run = s.spawn_until_running(
        WORK_AND_COMMIT,
        &format!(
            r#"{{"name": "done", "agent": "scripted", "prompt": "work", "verify_on_finish": "package",
                "verify_commands": {{"package": ["echo started > {}; cat {} > /dev/null"]}}}}"#,
            started.display(),
            release.display()
        ),
    );
    assert!(
        open_terminals(run.pid()) > 0,
        "a running PTY lane holds its terminal"
    );
    let (said, verifying) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = said.send(std::fs::read_to_string(&started));
    });
    let started_line = verifying
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the verification did not start\n{}", run.report()))
        .expect("the started pipe is read");
    assert_eq!(started_line.trim(), "started");
    assert_eq!(
        open_terminals(run.pid()),
        0,
        "the finished lane's terminal is closed before its verification"
    );
    std::fs::write(&release, "go\n").expect("the verification is released");
    let status = run.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", run.report());
    assert!(
        run.events()
            .iter()
            .any(|e| e["kind"] == "lane.verified" && e["lane"] == "done")
    );
}
