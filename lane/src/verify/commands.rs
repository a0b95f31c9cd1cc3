//! Running verification commands: each with `sh -c` in the lane's worktree, in a process
//! group of its own, its output to a log file, and a timeout after which the whole group is
//! killed and the command counts as hung.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use clawpool_lanes::state_file::{CommandOutcome, CommandResult};

/// Runs `command` with `sh -c` in `dir`, writing its output to `log`, for at most `timeout`;
/// inside `sandbox` when the lane has one (a command is the agent's code at work).
pub async fn run_command(
    command: &str,
    dir: &Path,
    log: &Path,
    timeout: Duration,
    sandbox: Option<&crate::sandbox::Sandbox>,
) -> CommandResult {
    let started = Instant::now();
    let result = |outcome, exit_code| CommandResult {
        command: command.to_owned(),
        outcome,
        exit_code,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        log: log.display().to_string(),
    };
    let output = match open_log(log) {
        Ok(file) => file,
        Err(_) => return result(CommandOutcome::Error, None),
    };
    let Ok(errors) = output.try_clone() else {
        return result(CommandOutcome::Error, None);
    };
    let mut child = match sandbox {
        Some(sandbox) => {
            let mut child = tokio::process::Command::new(sandbox.program());
            child.args(sandbox.args_for(dir)).arg("sh");
            child
        }
        None => tokio::process::Command::new("sh"),
    };
    child
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(errors)
        // Its own group: a timeout kills the test runner and everything it started.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(err) => {
            let _ = std::fs::write(log, format!("could not start `sh -c {command}`: {err}\n"));
            return result(CommandOutcome::Error, None);
        }
    };
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) if status.success() => result(CommandOutcome::Passed, Some(0)),
        Ok(Ok(status)) => result(CommandOutcome::Failed, status.code()),
        Ok(Err(_)) => result(CommandOutcome::Error, None),
        Err(_) => {
            if let Some(pid) = child.id().and_then(|p| libc::pid_t::try_from(p).ok()) {
                // SAFETY: killpg only sends a signal; the group is the child's own (pgid = pid),
                // and the child is not reaped yet, so the id cannot have been reused.
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
            let _ = child.wait().await;
            result(CommandOutcome::Hung, None)
        }
    }
}

fn open_log(log: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::File::create(log)
}

/// Whether a failed command's log reads as a build failure rather than failing tests.
pub fn looks_like_compile_failure(log: &Path) -> bool {
    const MARKERS: &[&str] = &[
        "could not compile",
        "error[E",
        "error: linking with",
        "compilation failed",
        "compilation terminated",
        "SyntaxError:",
        "error TS",
        "cannot find symbol",
    ];
    std::fs::read_to_string(log).is_ok_and(|text| MARKERS.iter().any(|m| text.contains(m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_passing_a_failing_and_a_hanging_command() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = dir.path().join("logs");
        let ok = run_command(
            "echo fine",
            dir.path(),
            &logs.join("ok.log"),
            Duration::from_secs(10),
            None,
        )
        .await;
        assert_eq!(ok.outcome, CommandOutcome::Passed);
        assert_eq!(std::fs::read_to_string(&ok.log).expect("log"), "fine\n");

        let bad = run_command(
            "echo oops >&2; exit 3",
            dir.path(),
            &logs.join("bad.log"),
            Duration::from_secs(10),
            None,
        )
        .await;
        assert_eq!(
            (bad.outcome, bad.exit_code),
            (CommandOutcome::Failed, Some(3))
        );
        assert_eq!(std::fs::read_to_string(&bad.log).expect("log"), "oops\n");

        // The hung command's child must die with it: it would otherwise write its pid file late.
        let pid_file = dir.path().join("child.pid");
        let hung = run_command(
            &format!(
                "sh -c 'echo $$ > {}; exec sleep 60' & wait",
                pid_file.display()
            ),
            dir.path(),
            &logs.join("hung.log"),
            Duration::from_millis(500),
            None,
        )
        .await;
        assert_eq!(hung.outcome, CommandOutcome::Hung);
        assert!(hung.duration_ms >= 500);
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .expect("pid")
            .trim()
            .parse()
            .expect("a pid");
        // SIGKILL went to its group; on a loaded machine the kernel may take a moment to carry
        // it out, so wait (boundedly) for the child to be gone or a zombie.
        let dead = || {
            // SAFETY: signal 0 only checks whether the process exists.
            let alive = unsafe { libc::kill(pid, 0) } == 0;
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"));
            !alive || zombie
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !dead() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(dead(), "the hung command's child {pid} survived");
    }

    #[test]
    fn compile_failures_are_told_from_test_failures() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("a.log");
        std::fs::write(
            &log,
            "error[E0425]: cannot find value `x`\nerror: could not compile `a`\n",
        )
        .expect("log");
        assert!(looks_like_compile_failure(&log));
        std::fs::write(&log, "test tests::it_works ... FAILED\n").expect("log");
        assert!(!looks_like_compile_failure(&log));
    }

    #[tokio::test]
    async fn a_sandboxed_command_writes_its_worktree_and_nothing_outside() {
        let lane = tempfile::tempdir().expect("lane");
        let outside = tempfile::tempdir().expect("outside");
        let request = crate::sandbox::SandboxRequest {
            lane: clawpool_lanes::LaneSandbox {
                mode: clawpool_lanes::SandboxMode::Workspace,
                network: clawpool_lanes::SandboxNetwork::Shared,
                rw: Vec::new(),
            },
            bwrap: crate::sandbox::DEFAULT_BWRAP.into(),
        };
        let path = std::env::var_os("PATH");
        let site = crate::sandbox::SandboxSite {
            dir: lane.path(),
            record: None,
            socket: &lane.path().join(".claw/control.sock"),
            home: None,
            agent_writes: &[],
            path_var: path.as_deref(),
            codex_daemon: None,
            agent_settings: None,
        };
        let sandbox = crate::sandbox::Sandbox::build(&request, &site).expect("bwrap works here");
        let logs = lane.path().join("logs");
        let inside = run_command(
            "echo in > inside.txt",
            lane.path(),
            &logs.join("in.log"),
            Duration::from_secs(10),
            Some(&sandbox),
        )
        .await;
        assert_eq!(inside.outcome, CommandOutcome::Passed);
        assert_eq!(
            std::fs::read_to_string(lane.path().join("inside.txt")).expect("written"),
            "in\n"
        );
        let escape = outside.path().join("escape.txt");
        let out = run_command(
            &format!("echo out > {}", escape.display()),
            lane.path(),
            &logs.join("out.log"),
            Duration::from_secs(10),
            Some(&sandbox),
        )
        .await;
        assert_eq!(out.outcome, CommandOutcome::Failed);
        assert!(!escape.exists(), "the command wrote outside its worktree");
    }
}
