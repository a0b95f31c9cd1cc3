//! One live owner per repository (issue #27): with the repository's daemon serving, `clawpool
//! send` to a lane that ended hands the follow-up to the daemon, which drives the lane as one
//! of its own; the `send` only waits for its end (same document, same exit code), and ending
//! the `send` ends the waiting, never the lane (the daemon's `status` counts it), nor does
//! `daemon --stop` end a tmux one.

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

const PATIENCE: Duration = Duration::from_secs(30);

const ALPHA: &str = r#"{"name": "alpha", "agent": "scripted", "prompt": "do alpha"}"#;

/// A first turn that finishes at once, and a second (run only by an agent that resumed the
/// session) that leaves `followup.txt` — once `gate` exists, when one is given.
fn two_turns(gate: Option<&Path>) -> String {
    let wait = gate.map_or_else(String::new, |gate| {
        let command = format!("until [ -e {} ]; do sleep 0.05; done", gate.display());
        // Working first, so that the turn is seen taken before the gate holds the screen.
        format!("{{ do = \"sleep\", ms = 300 }}, {{ do = \"run\", command = {command:?} }},")
    });
    format!(
        r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  {{ do = "write_file", path = "out.txt", content = "done\n" }},
  {{ do = "git_commit", message = "lane work" }},
]
[[prompt]]
steps = [
  {wait}
  {{ do = "write_file", path = "followup.txt", content = "more\n" }},
  {{ do = "git_commit", message = "follow-up work" }},
]
"#
    )
}

/// alpha run to its end by a foreground spawn, then the repository's daemon started (its log
/// in `daemon.log`) and listening.
fn finished_lane_and_daemon(s: &Setup, scenario: &str) -> Child {
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
    let out = s.spawn(ALPHA, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = std::fs::File::create(daemon_log(s)).expect("daemon log");
    let daemon = crate::spawn::daemon_command(s)
        .stderr(log)
        .spawn()
        .expect("clawpool daemon");
    // It announces itself once it listens.
    until(s, "the daemon listening", || {
        std::fs::read_to_string(daemon_log(s)).is_ok_and(|log| log.contains("listening on"))
    });
    daemon
}

fn daemon_log(s: &Setup) -> PathBuf {
    s.sandbox.dir.path().join("daemon.log")
}

/// Waits (at most [`PATIENCE`]) until `done`; bounded polling of files another process
/// writes, which give no event to await. A failure shows alpha's log and the daemon's.
fn until(s: &Setup, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "waited for {what}: alpha's events {:?}; the daemon's log:\n{}",
            events(s)
                .iter()
                .map(|e| e["kind"].clone())
                .collect::<Vec<_>>(),
            std::fs::read_to_string(daemon_log(s)).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn send(s: &Setup, text: &str) -> std::process::Command {
    let mut cmd = s.sandbox.clawpool();
    cmd.args(["send", "alpha", text, "--output-format", "json", "--config"])
        .arg(&s.config)
        .current_dir(&s.repo);
    cmd
}

/// The daemon's answer to a `status` request on its socket (`docs/control-protocol.md`).
fn daemon_status(s: &Setup) -> Value {
    use std::io::{BufRead, Write};
    let mut socket =
        std::os::unix::net::UnixStream::connect(s.repo.join(".git/clawpool/daemon.sock"))
            .expect("the daemon's socket");
    socket
        .write_all(b"{\"v\": 1, \"request\": {\"type\": \"status\"}}\n")
        .expect("status asked");
    let mut line = String::new();
    std::io::BufReader::new(socket)
        .read_line(&mut line)
        .expect("status answered");
    serde_json::from_str(&line).expect("one JSON reply")
}

fn events(s: &Setup) -> Vec<Value> {
    std::fs::read_to_string(s.repo.join(".git/clawpool/lanes/alpha/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The texts alpha's scripted agent took as prompts, in order.
fn prompts(s: &Setup) -> Vec<String> {
    std::fs::read_to_string(s.lanes_dir().join("alpha/.prompts.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// alpha's published state file once it holds its whole log.
fn state(s: &Setup) -> Value {
    clawpool_tests::published_state(&s.lanes_dir().join("alpha"))
}

#[test]
fn a_follow_up_sent_while_a_daemon_serves_is_run_by_the_daemon_and_reported_as_before() {
    let s = setup();
    let mut daemon = finished_lane_and_daemon(&s, &two_turns(None));
    let before = events(&s).len();

    let out: Output = send(&s, "now add a test").output().expect("clawpool send");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let verdict: Value = serde_json::from_slice(&out.stdout).expect("verdict JSON");
    assert_eq!(verdict["verdict"], "done", "{verdict}");
    assert_eq!(verdict["send"], "delivered", "{verdict}");
    assert_eq!(verdict["follow_up"], true, "{verdict}");
    assert_eq!(verdict["state"]["status"], "finished", "{verdict}");

    // Delivered once, as the session's next prompt.
    assert_eq!(prompts(&s), ["do alpha", "now add a test"]);
    assert!(s.lanes_dir().join("alpha/followup.txt").is_file());
    let after = &events(&s)[before..];
    clawpool_tests::assert_kinds_in_order(
        after,
        &[
            "lane.restarted",
            "lane.prompt_sent",
            "lane.prompt_accepted",
            "lane.finished",
        ],
    );
    // The daemon drove it, not the `send` process.
    let ended = state(&s);
    assert_eq!(ended["lane_status"], "finished", "{ended}");
    assert_eq!(ended["supervisor"]["pid"], daemon.id(), "{ended}");
    let log = std::fs::read_to_string(daemon_log(&s)).expect("daemon log");
    assert!(log.contains("follow-up to lane alpha taken"), "{log}");

    crate::spawn::stop_daemon(&s);
    let _ = daemon.wait();
}

#[test]
fn a_send_ended_while_it_waits_leaves_the_follow_up_running_to_its_end_under_the_daemon() {
    let s = setup();
    let gate = s.sandbox.dir.path().join("go");
    let mut daemon = finished_lane_and_daemon(&s, &two_turns(Some(&gate)));
    let before = events(&s).len();
    let waiting = send_until_accepted(&s, before, "now add a test");
    // The agent holds its turn at the gate: the lane runs, the `send` waits.
    // SAFETY: kill has no preconditions; the pid is our child's, not yet waited for.
    assert_eq!(
        unsafe { libc::kill(waiting.id() as i32, libc::SIGTERM) },
        0,
        "SIGTERM to send"
    );
    let out = waiting.wait_with_output().expect("send ended");
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{out:?}");
    let said = stderr(&out);
    assert!(said.contains("\"kind\":\"interrupted\""), "{said}");
    assert!(
        said.contains("goes on under the repository's daemon"),
        "{said}"
    );
    assert!(!s.lanes_dir().join("alpha/followup.txt").exists());
    // Still the daemon's lane, held at the gate: its `status` counts it.
    assert_eq!(daemon_status(&s)["reply"]["running"], 1);

    std::fs::write(&gate, "").expect("gate");
    until(&s, "alpha finished again", || {
        events(&s)
            .iter()
            .skip(before)
            .any(|e| e["kind"] == "lane.finished")
    });
    assert!(s.lanes_dir().join("alpha/followup.txt").is_file());
    assert_eq!(prompts(&s), ["do alpha", "now add a test"]);
    let ended = state(&s);
    assert_eq!(ended["lane_status"], "finished", "{ended}");
    assert_eq!(ended["supervisor"]["pid"], daemon.id(), "{ended}");

    crate::spawn::stop_daemon(&s);
    let _ = daemon.wait();
}

/// A follow-up in tmux is kept over `daemon --stop` as the daemon's other tmux lanes are: the
/// waiting `send` is told the daemon ended (`daemon_stopped`), the lane's agent works on, and
/// the next daemon adopts the lane and drives it to its end.
#[test]
fn a_tmux_follow_up_outlives_daemon_stop_and_the_next_daemon_adopts_it() {
    let s = setup();
    let gate = s.sandbox.dir.path().join("go");
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        two_turns(Some(&gate)),
    )
    .expect("scenario");
    let out = s.spawn(ALPHA, &["--transport", "tmux"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let start_daemon = || {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(daemon_log(&s))
            .expect("daemon log");
        crate::spawn::daemon_command(&s)
            .stderr(log)
            .spawn()
            .expect("clawpool daemon")
    };
    let mut first = start_daemon();
    until(&s, "the daemon listening", || {
        std::fs::read_to_string(daemon_log(&s)).is_ok_and(|log| log.contains("listening on"))
    });
    let before = events(&s).len();
    let waiting = send_until_accepted(&s, before, "now add a test");

    crate::spawn::ask_daemon_to_stop(&s);
    let _ = first.wait();
    let out = waiting.wait_with_output().expect("send ended");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr(&out).contains("\"kind\":\"daemon_stopped\""),
        "{}",
        stderr(&out)
    );
    assert!(
        !events(&s)
            .iter()
            .skip(before)
            .any(|e| e["kind"] == "lane.finished" || e["kind"] == "lane.stopped"),
        "the lane did not end with the daemon"
    );

    let mut second = start_daemon();
    until(&s, "alpha adopted", || {
        events(&s)
            .iter()
            .skip(before)
            .any(|e| e["kind"] == "lane.adopted")
    });
    std::fs::write(&gate, "").expect("gate");
    until(&s, "alpha finished under the next daemon", || {
        events(&s)
            .iter()
            .skip(before)
            .any(|e| e["kind"] == "lane.finished")
    });
    assert!(s.lanes_dir().join("alpha/followup.txt").is_file());
    assert_eq!(prompts(&s), ["do alpha", "now add a test"]);
    assert_eq!(state(&s)["supervisor"]["pid"], second.id());
    crate::spawn::stop_daemon(&s);
    let _ = second.wait();
}

/// `clawpool send LANE TEXT` to alpha, started and left waiting (its output piped), once the
/// lane took the text: a `lane.prompt_accepted` past the log's first `before` events.
fn send_until_accepted(s: &Setup, before: usize, text: &str) -> std::process::Child {
    let waiting = send(s, text)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("clawpool send");
    until(s, "the follow-up accepted", || {
        events(s)
            .iter()
            .skip(before)
            .any(|e| e["kind"] == "lane.prompt_accepted")
    });
    waiting
}
