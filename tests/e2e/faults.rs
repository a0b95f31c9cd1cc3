//! Faults probed from outside a running lane (issue #27, bite 8): its worktree deleted while
//! it runs.

use std::time::Duration;

use serde_json::Value;

use crate::spawn::setup;

/// The worktree deleted (moved away) mid-run: the lane ends failed (`infra`, evidence
/// `worktree_gone`) at once, never `finished`, and the spawn exits non-zero.
#[test]
fn a_worktree_deleted_mid_run_is_a_failure_with_evidence() {
    let s = setup();
    let slow = r#"
trust_dialog = true
[[prompt]]
steps = [{ do = "sleep", ms = 1500 }, { do = "say", text = "all done" }]
"#;
    let mut run = s.spawn_until_running(
        slow,
        r#"{"name": "gone", "agent": "scripted", "prompt": "work"}"#,
    );
    // Moved away in one step (a recursive delete races the lane's own writes into it).
    std::fs::rename(
        s.lanes_dir().join("gone"),
        s.sandbox.dir.path().join("gone-elsewhere"),
    )
    .expect("the worktree moved away");
    let status = run.wait_exit(Duration::from_secs(60));
    assert_ne!(status.code(), Some(0), "{}", run.report());

    let log = std::fs::read_to_string(s.repo.join(".git/clawpool/lanes/gone/events.jsonl"))
        .expect("events");
    let events: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // The lane fails as soon as its worktree is gone: never `finished` first, though the
    // agent ends its turn as usual.
    assert!(
        !events.iter().any(|e| e["kind"] == "lane.finished"),
        "{log}"
    );
    let failed = events
        .iter()
        .rfind(|e| e["to"]["status"].is_string())
        .unwrap_or_else(|| panic!("no move in {log}"));
    assert_eq!(failed["kind"], "lane.failed", "{log}");
    assert_eq!(failed["evidence"]["rule"], "worktree_gone", "{failed}");
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(s.repo.join(".git/clawpool/lanes/gone/state.json"))
            .expect("the lane's record"),
    )
    .expect("JSON");
    assert_eq!(state["status"], "failed", "{state}");
    assert_eq!(state["failure"]["class"], "infra", "{state}");
}

/// SIGTERM to a tmux spawn's whole process group (as a terminal or a service manager sends
/// it) ends its control client with it; the private tmux server (`clawpool-control`, `sleep
/// 2147483647`) must not outlive the spawn all the same.
#[test]
fn sigterm_to_a_tmux_spawns_process_group_leaves_no_tmux_server() {
    use std::os::unix::process::CommandExt;
    let s = setup();
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        "trust_dialog = true\n[[prompt]]\nsteps = [{ do = \"hang\" }]\n",
    )
    .expect("scenario");
    let packet = s.sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"name": "held", "agent": "scripted", "prompt": "work"}"#,
    )
    .expect("packet");
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--transport", "tmux", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .process_group(0);
    let mut run = clawpool_tests::LaneRun::start(cmd, &s.sandbox.dir.path().join("run.stderr"));
    run.wait_for(
        "running",
        Duration::from_secs(30),
        |e| e["kind"] == "lane.running",
        String::new,
    );
    let group = libc::pid_t::try_from(run.pid()).expect("a pid");
    // SAFETY: kill(2) on the process group of our own child, which leads it.
    assert_eq!(unsafe { libc::kill(-group, libc::SIGTERM) }, 0);
    let status = run.wait_exit(Duration::from_secs(30));
    assert_ne!(status.code(), Some(0), "{}", run.report());
    let sockets = s.sandbox.leftover_tmux_sockets();
    assert!(sockets.is_empty(), "tmux servers left: {sockets:?}");
    assert!(s.sandbox.leftover_processes().is_empty(), "processes left");
}
