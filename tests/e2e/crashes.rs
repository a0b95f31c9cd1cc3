//! A foreground `clawpool spawn` interrupted (SIGINT, SIGTERM), killed (SIGKILL at any
//! moment) or left without a writable state file: every lane ends recorded as what happened —
//! finished, or failed naming why and where its worker ran —, `clawpool adopt` takes over or
//! cleanly fails whatever a killed supervisor left, a spawn run again replaces a leftover tmux
//! session, and no agent, tmux server or prompt is left over or doubled.

use std::time::Duration;

use clawpool_tests::LaneRun;
use serde_json::Value;

use crate::spawn::{Setup, make_immutable, setup, stderr};

/// An agent that works for a minute: lanes are still running whenever the test acts.
const LONG_SCENARIO: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "sleep", ms = 60000 }]
"#;

/// An agent that works briefly and commits.
const SHORT_SCENARIO: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "sleep", ms = 300 },
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
"#;

/// A packet of `count` scripted lanes named `l00`, `l01`, …, each prompted `do lNN`.
fn packet(count: usize) -> String {
    let lanes: Vec<String> = (0..count)
        .map(|i| format!(r#"{{"name": "l{i:02}", "prompt": "do l{i:02}"}}"#))
        .collect();
    format!(
        r#"{{"defaults": {{"agent": "scripted"}}, "lanes": [{}]}}"#,
        lanes.join(", ")
    )
}

/// Starts `clawpool spawn` (JSON) of `packet` with the agent scripted by `scenario`.
fn start_spawn(s: &Setup, scenario: &str, packet: &str, extra: &[&str], run: &str) -> LaneRun {
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
    let file = s.sandbox.dir.path().join("packet.json");
    std::fs::write(&file, packet).expect("packet");
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&file)
        .args(["--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .args(extra);
    LaneRun::start(cmd, &s.sandbox.dir.path().join(format!("{run}.stderr")))
}

/// Waits until every lane of `lanes` has reached `lane.running`.
fn wait_running(run: &mut LaneRun, lanes: &[&str]) {
    for lane in lanes {
        if run
            .seen
            .iter()
            .any(|e| e["kind"] == "lane.running" && e["lane"] == *lane)
        {
            continue;
        }
        run.wait_for(
            &format!("{lane} running"),
            Duration::from_secs(30),
            |e| e["kind"] == "lane.running" && e["lane"] == *lane,
            String::new,
        );
    }
}

fn state_file(s: &Setup, lane: &str) -> Option<Value> {
    let text =
        std::fs::read_to_string(s.lanes_dir().join(lane).join(".claw/worker-state.json")).ok()?;
    Some(serde_json::from_str(&text).expect("state file JSON"))
}

/// The lane's record (what clawpool believes), in its registry folder.
fn state_record(s: &Setup, lane: &str) -> Option<Value> {
    let record = s
        .repo
        .join(".git/clawpool/lanes")
        .join(lane)
        .join("state.json");
    let text = std::fs::read_to_string(record).ok()?;
    Some(serde_json::from_str(&text).expect("state record JSON"))
}

fn lane_events(s: &Setup, lane: &str) -> Vec<Value> {
    std::fs::read_to_string(
        s.repo
            .join(format!(".git/clawpool/lanes/{lane}/events.jsonl")),
    )
    .unwrap_or_default()
    .lines()
    .filter_map(|l| serde_json::from_str(l).ok())
    .collect()
}

fn adopt(s: &Setup) -> std::process::Output {
    s.sandbox
        .clawpool()
        .args(["adopt", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("clawpool adopt")
}

/// SIGINT or SIGTERM to a foreground spawn of three lanes, two at a time: both running lanes
/// have their agents stopped and are recorded as failed with the signal as evidence, the
/// queued one is not started, the exit code names the signal, and nothing is left to adopt
/// — no agent, no tmux server, not even one `adopt` would start.
fn a_signal_stops_every_lane_and_records_why(transport: &str, signal: i32, name: &str) {
    let s = setup();
    let mut run = start_spawn(
        &s,
        LONG_SCENARIO,
        &packet(3),
        &["--concurrency", "2", "--transport", transport],
        "spawn",
    );
    // Lanes take the two places in either order.
    let running = std::cell::RefCell::new(std::collections::BTreeSet::new());
    run.wait_for(
        "two lanes running",
        Duration::from_secs(30),
        |e| {
            if e["kind"] == "lane.running" {
                running
                    .borrow_mut()
                    .insert(e["lane"].as_str().unwrap_or_default().to_owned());
            }
            running.borrow().len() == 2
        },
        String::new,
    );
    let running = running.into_inner();
    run.signal(signal);
    let status = run.wait_exit(Duration::from_secs(30));
    assert_eq!(
        status.code(),
        Some(128 + signal),
        "exit 128 + {name}\n{}",
        run.report()
    );
    let summary = run
        .seen
        .iter()
        .find(|l| l.get("interrupted").is_some())
        .cloned()
        .unwrap_or_else(|| panic!("a summary naming the signal\n{}", run.report()));
    assert_eq!(summary["interrupted"]["signal"], name, "{summary}");
    for lane in &running {
        let state = state_file(&s, lane).expect("state file");
        assert_eq!(state["status"], "failed", "{lane}: {state}");
        assert_eq!(state["failure"]["class"], "infra", "{lane}: {state}");
        let detail = state["failure"]["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(&format!("interrupted by {name}")),
            "{lane}: {state}"
        );
        let failed = lane_events(&s, lane)
            .into_iter()
            .find(|e| e["kind"] == "lane.failed")
            .expect("lane.failed in the event log");
        assert_eq!(failed["evidence"]["rule"], "supervisor_interrupted");
    }
    let queued = ["l00", "l01", "l02"]
        .into_iter()
        .find(|lane| !running.contains(*lane))
        .expect("a queued lane");
    assert!(
        state_file(&s, queued).is_none(),
        "the queued lane never started"
    );
    let summary_lanes = summary["lanes"].as_array().expect("lanes");
    assert_eq!(summary_lanes.len(), 3, "{summary}");
    assert!(s.sandbox.leftover_processes().is_empty(), "no agent left");
    assert!(s.sandbox.leftover_tmux_sockets().is_empty(), "no tmux left");

    // Nothing was left running: adopt has nothing to take over and starts nothing.
    let adopted = adopt(&s);
    assert_eq!(adopted.status.code(), Some(0), "{}", stderr(&adopted));
    for lane in &running {
        assert_eq!(
            state_file(&s, lane).expect("state file")["status"],
            "failed"
        );
    }
    assert!(s.sandbox.leftover_tmux_sockets().is_empty());
    assert!(s.sandbox.leftover_processes().is_empty());
}

#[test]
fn ctrl_c_on_a_pty_spawn_stops_every_lane_and_records_why() {
    a_signal_stops_every_lane_and_records_why("pty", libc::SIGINT, "SIGINT");
}

#[test]
fn ctrl_c_on_a_tmux_spawn_stops_every_lane_and_records_why() {
    a_signal_stops_every_lane_and_records_why("tmux", libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_on_a_spawn_stops_every_lane_and_records_why() {
    a_signal_stops_every_lane_and_records_why("tmux", libc::SIGTERM, "SIGTERM");
}

/// A spawn SIGKILLed while its tmux lane works, then run again: the lane's leftover session
/// (with its agent) is ended and the replacement recorded, and the lane runs to the end.
#[test]
fn spawning_again_after_a_killed_supervisor_replaces_the_lanes_leftover_session() {
    let s = setup();
    let mut first = start_spawn(&s, LONG_SCENARIO, &packet(1), &["--transport", "tmux"], "1");
    wait_running(&mut first, &["l00"]);
    first.signal(libc::SIGKILL);
    first.wait_exit(Duration::from_secs(10));
    let target = state_file(&s, "l00").expect("state file")["transport"]["session"]
        .as_str()
        .expect("the tmux target")
        .to_owned();

    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), SHORT_SCENARIO).expect("scenario");
    let again = s.spawn(
        &packet(1),
        &["--transport", "tmux", "--output-format", "json"],
    );
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let replaced = lane_events(&s, "l00")
        .into_iter()
        .find(|e| e["kind"] == "lane.session_replaced")
        .expect("the replacement is recorded");
    assert_eq!(replaced["detail"]["session"], target.as_str());
    assert_eq!(replaced["detail"]["killed"], true);
    assert_eq!(
        state_file(&s, "l00").expect("state file")["status"],
        "finished"
    );
    assert!(s.sandbox.leftover_processes().is_empty(), "no agent left");
    assert!(s.sandbox.leftover_tmux_sockets().is_empty());
}

/// A lane's first state write is handed to the state files' writer before its agent starts,
/// and reaches the disk behind: a supervisor killed in between leaves a registered lane, its
/// tmux session and agent, and no state file. Removing the lane's state files after a kill
/// makes that moment: `adopt` records the lane lost from its registry entry, ends its session
/// with the agent in it, and then the server. (Seen once at eight tests at a time in the
/// crash-injection test below: the server, its placeholder and a lane's placeholder stayed.)
#[test]
fn adopt_ends_the_session_of_a_lane_killed_before_its_state_file_was_written() {
    let s = setup();
    let mut run = start_spawn(
        &s,
        LONG_SCENARIO,
        &packet(1),
        &["--transport", "tmux"],
        "spawn",
    );
    wait_running(&mut run, &["l00"]);
    run.signal(libc::SIGKILL);
    run.wait_exit(Duration::from_secs(10));
    let record = s.repo.join(".git/clawpool/lanes/l00/state.json");
    std::fs::remove_file(&record).expect("the lane's record");
    std::fs::remove_file(s.lanes_dir().join("l00/.claw/worker-state.json"))
        .expect("the lane's publication");
    assert!(
        !s.sandbox.leftover_processes().is_empty(),
        "the agent and its tmux server outlive the supervisor"
    );

    let adopted = adopt(&s);
    assert_eq!(
        adopted.status.code(),
        Some(1),
        "a lane failed: {}",
        stderr(&adopted)
    );
    let state = state_record(&s, "l00").expect("the lane recorded from its registry entry");
    assert_eq!(state["status"], "failed", "{state}");
    assert_eq!(state["failure"]["class"], "worker_lost", "{state}");
    let orphans = s.sandbox.leftover_processes();
    assert!(orphans.is_empty(), "left running: {orphans:?}");
    assert!(s.sandbox.leftover_tmux_sockets().is_empty(), "tmux left");
}

/// A lane that finishes while its state file cannot be written: spawn exits 1 and says the
/// outcome is only in the event log; once the folder is writable again, adopt writes the
/// outcome from the event log (never `worker_lost`) and the degraded mark goes.
#[test]
fn a_lane_that_finishes_while_its_state_file_cannot_be_written_loses_nothing() {
    let s = setup();
    let slow = r#"
trust_dialog = true
[[prompt]]
steps = [{ do = "sleep", ms = 1500 }, { do = "write_file", path = "out.txt", content = "done\n" }]
"#;
    let mut run = start_spawn(&s, slow, &packet(1), &[], "spawn");
    wait_running(&mut run, &["l00"]);
    // The lane's record, which an immutable file cannot be renamed over.
    let record = s.repo.join(".git/clawpool/lanes/l00/state.json");
    if !make_immutable(&record, true) {
        make_immutable(&record, false);
        eprintln!("skipped: cannot make a folder unwritable here");
        return;
    }
    let status = run.wait_exit(Duration::from_secs(30));
    let stuck = state_record(&s, "l00").expect("state record");
    make_immutable(&record, false);
    assert_eq!(status.code(), Some(1), "{}", run.report());
    let summary = run.seen.last().cloned().expect("a summary");
    assert_eq!(
        summary["lanes"][0]["state"]["status"], "finished",
        "{summary}"
    );
    assert!(
        summary["lanes"][0]["state_file_degraded"].is_string(),
        "{summary}"
    );
    assert_ne!(stuck["status"], "finished", "the file could not take it");
    let marker = s.repo.join(".git/clawpool/lanes/l00/state-degraded");
    assert!(marker.exists());

    let adopted = adopt(&s);
    assert_eq!(adopted.status.code(), Some(0), "{}", stderr(&adopted));
    let state = state_record(&s, "l00").expect("state record");
    assert_eq!(state["status"], "finished", "{state}");
    assert!(
        lane_events(&s, "l00")
            .iter()
            .all(|e| e["to"]["failure"] != "worker_lost"),
        "a finished lane is never rewritten as lost"
    );
    assert!(!marker.exists(), "the successful write clears the mark");
}

/// Every lane of a crash-injection round, after `adopt`: finished, or failed as lost naming its
/// tmux session, or never registered (the kill came before it was); its agent got its prompt
/// at most once, exactly as sent.
fn assert_every_lane_accounted_for(s: &Setup, lanes: usize, at: &str) {
    for i in 0..lanes {
        let lane = format!("l{i:02}");
        let dir = s.lanes_dir().join(&lane);
        let prompts: Vec<Value> = std::fs::read_to_string(dir.join(".prompts.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["event"] == "prompt")
            .collect();
        let history = || {
            lane_events(s, &lane)
                .iter()
                .map(|e| format!("{} {} {} {}", e["seq"], e["kind"], e["to"], e["detail"]))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(
            prompts.len() <= 1,
            "{at}: {lane} prompted twice: {prompts:?}\n{}",
            history()
        );
        if let Some(prompt) = prompts.first() {
            assert_eq!(prompt["text"], format!("do {lane}"), "{at}: {lane}");
        }
        let registered = s
            .repo
            .join(format!(".git/clawpool/lanes/{lane}/lane.json"))
            .exists();
        let Some(state) = state_file(s, &lane) else {
            assert!(!registered, "{at}: {lane} registered without a state file");
            assert!(prompts.is_empty(), "{at}: {lane} unregistered but prompted");
            continue;
        };
        match state["status"].as_str() {
            Some("finished") => {}
            Some("failed") => {
                assert_eq!(state["failure"]["class"], "worker_lost", "{at}: {state}");
                let detail = state["failure"]["detail"].as_str().unwrap_or_default();
                assert!(
                    detail.contains("tmux"),
                    "{at}: the transport named: {state}"
                );
                assert!(!detail.contains("PTY"), "{at}: {state}");
            }
            _ => panic!(
                "{at}: {lane} neither finished nor failed: {state}\n{}",
                history()
            ),
        }
    }
}

/// The repository's stream after a crash and `adopt`: every event of every lane's own log,
/// once, in each lane's order, cursors strictly increasing — an event the killed supervisor
/// wrote to its lane's log but not to the stream was put back when `adopt` opened the lane.
fn assert_stream_holds_every_lane_event_once(s: &Setup, lanes: usize, at: &str) {
    let stream: Vec<Value> = std::fs::read_to_string(s.repo.join(".git/clawpool/stream.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let cursors: Vec<u64> = stream.iter().filter_map(|e| e["cursor"].as_u64()).collect();
    assert_eq!(cursors.len(), stream.len(), "{at}: every line has a cursor");
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "{at}: cursors increase"
    );
    let key = |e: &Value| format!("{} {}", e["seq"], e["kind"]);
    for i in 0..lanes {
        let lane = format!("l{i:02}");
        let own: Vec<String> = lane_events(s, &lane).iter().map(key).collect();
        let streamed: Vec<String> = stream
            .iter()
            .filter(|e| e["lane"] == lane.as_str())
            .map(key)
            .collect();
        assert_eq!(streamed, own, "{at}: {lane}'s events on the stream");
    }
}

/// When a crash-injection round kills the supervisor.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// This long after it started (the first moments: worktrees, registry, tmux server).
    After(Duration),
    /// On reading the k-th event line it printed (the handshake, delivery, work, the end).
    Event(usize),
}

/// One crash-injection round: a tmux spawn of `lanes` lanes (all at once) SIGKILLed at `kill`,
/// then `clawpool adopt`.
fn kill_and_adopt(lanes: usize, kill: KillAt) {
    let at = format!("{lanes} lanes killed at {kill:?}");
    let s = setup();
    let concurrency = lanes.to_string();
    let mut run = start_spawn(
        &s,
        SHORT_SCENARIO,
        &packet(lanes),
        &["--transport", "tmux", "--concurrency", &concurrency],
        "spawn",
    );
    match kill {
        // The kill lands at this moment of the batch, whatever it is doing: the delay is the
        // point of injection, not a wait for something.
        KillAt::After(delay) => std::thread::sleep(delay),
        KillAt::Event(k) => {
            let seen = std::cell::Cell::new(0);
            run.wait_for(
                &format!("event line {k}"),
                Duration::from_secs(30),
                |_| {
                    seen.set(seen.get() + 1);
                    seen.get() >= k
                },
                String::new,
            );
        }
    }
    run.signal(libc::SIGKILL);
    run.wait_exit(Duration::from_secs(10));

    let adopted = adopt(&s);
    let summary: Value = String::from_utf8_lossy(&adopted.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|doc| doc.get("not_adopted").is_some())
        .unwrap_or_else(|| panic!("{at}: no adopt summary: {}", stderr(&adopted)));
    assert_eq!(
        summary["not_adopted"].as_array().map(Vec::len),
        Some(0),
        "{at}: {summary}"
    );
    assert_every_lane_accounted_for(&s, lanes, &at);
    assert_stream_holds_every_lane_event_once(&s, lanes, &at);
    let orphans: Vec<String> = s
        .sandbox
        .leftover_processes()
        .iter()
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            )
        })
        .collect();
    assert!(orphans.is_empty(), "{at}: orphans {orphans:?}");
    assert!(
        s.sandbox.leftover_tmux_sockets().is_empty(),
        "{at}: tmux left"
    );
    assert!(
        !s.repo.join(".prompts.jsonl").exists(),
        "{at}: the main worktree never gets a lane's work"
    );
}

/// SIGKILL at 20 moments of a tmux batch of scripted lanes — seven in its first 100 ms, the
/// others on the k-th event line, ten lanes at once for half of them — then `clawpool adopt`:
/// no orphan agent, no prompt delivered twice, every lane finished or cleanly failed naming its
/// tmux session.
#[test]
fn a_supervisor_killed_at_any_moment_leaves_lanes_adopt_finishes_or_cleanly_fails() {
    let ms = |ms| KillAt::After(Duration::from_millis(ms));
    let points = [
        (10, ms(0)),
        (10, ms(20)),
        (10, ms(50)),
        (10, ms(100)),
        (10, KillAt::Event(1)),
        (10, KillAt::Event(8)),
        (10, KillAt::Event(20)),
        (10, KillAt::Event(40)),
        (10, KillAt::Event(70)),
        (10, KillAt::Event(100)),
        (3, ms(10)),
        (3, ms(35)),
        (3, ms(70)),
        (3, KillAt::Event(2)),
        (3, KillAt::Event(5)),
        (3, KillAt::Event(9)),
        (3, KillAt::Event(13)),
        (3, KillAt::Event(18)),
        (3, KillAt::Event(24)),
        (3, KillAt::Event(30)),
    ];
    for (lanes, kill) in points {
        kill_and_adopt(lanes, kill);
    }
}
