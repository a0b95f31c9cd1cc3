//! The repository's event stream (`clawpool events --all`), `clawpool wait` on it, and
//! `clawpool spawn --name/--prompt`: real repositories, the scripted agent, the real daemon.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// A lane that stays at work long enough to be waited on (the test ends it).
const LONG_SCENARIO: &str = r#"
[[prompt]]
steps = [{ do = "sleep", ms = 600000 }]
"#;

/// Lanes that finish as soon as they are given their prompt.
const QUICK_SCENARIO: &str = r#"
[[prompt]]
steps = [{ do = "write_file", path = "out.txt", content = "done\n" }]
"#;

impl Setup {
    fn clawpool_in_repo(&self, args: &[&str]) -> Output {
        self.sandbox
            .clawpool()
            .args(args)
            .arg("--repo")
            .arg(&self.repo)
            .output()
            .expect("clawpool runs")
    }

    /// `clawpool spawn --name NAME --prompt TEXT --agent scripted` with `extra`.
    fn spawn_named(&self, name: &str, prompt: &str, extra: &[&str]) -> Output {
        self.sandbox
            .clawpool()
            .args([
                "spawn", "--name", name, "--prompt", prompt, "--agent", "scripted",
            ])
            .arg("--config")
            .arg(&self.config)
            .arg("--repo")
            .arg(&self.repo)
            .args(extra)
            .output()
            .expect("clawpool spawn runs")
    }

    fn stream(&self, extra: &[&str]) -> Vec<Value> {
        let out = self
            .clawpool_in_repo(&[&["events", "--all", "--output-format", "json"], extra].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        json_lines(&out.stdout)
    }

    fn lane_log(&self, lane: &str) -> Vec<Value> {
        let path = self
            .repo
            .join(".git/clawpool/lanes")
            .join(lane)
            .join("events.jsonl");
        json_lines(&std::fs::read(path).expect("lane log"))
    }

    fn wait(&self, lanes: &[&str], until: &str, extra: &[&str]) -> (Output, Value) {
        let out = self.clawpool_in_repo(
            &[
                &["wait"][..],
                lanes,
                &["--until", until, "--output-format", "json"],
                extra,
            ]
            .concat(),
        );
        let doc = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("one JSON document ({e}): {}", stderr(&out)));
        (out, doc)
    }

    fn scenario(&self, scenario: &str) {
        std::fs::write(self.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
    }
}

fn json_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("JSON line ({e}): {l}")))
        .collect()
}

/// The stream's lines: cursors strictly increase, and per lane they are exactly its own log
/// (the same events, each with the cursor its own line carries).
fn assert_stream_is_every_lane_log(s: &Setup, stream: &[Value], lanes: &[&str]) {
    let cursors: Vec<u64> = stream
        .iter()
        .map(|e| e["cursor"].as_u64().expect("cursor"))
        .collect();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "cursors increase: {cursors:?}"
    );
    let mut per_lane: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for event in stream {
        per_lane
            .entry(event["lane"].as_str().expect("lane").to_owned())
            .or_default()
            .push(event.clone());
    }
    assert_eq!(
        per_lane.keys().map(String::as_str).collect::<Vec<_>>(),
        lanes
    );
    for lane in lanes {
        assert_eq!(per_lane[*lane], s.lane_log(lane), "lane {lane}'s events");
    }
}

#[test]
fn spawn_with_name_and_prompt_runs_one_lane_to_finished_and_the_stream_has_its_events() {
    let s = setup();
    // Refused by the packet's rules, before anything is created.
    let bad = s.spawn_named("Not A Name", "x", &["--output-format", "json"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    let error: Value = serde_json::from_slice(&bad.stderr).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "invalid_packet", "{error}");
    assert!(!s.lanes_dir().exists());

    let out = s.spawn_named("solo", "do the solo task", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let prompts =
        std::fs::read_to_string(s.lanes_dir().join("solo/.prompts.jsonl")).expect("prompts");
    assert!(prompts.contains("do the solo task"), "{prompts}");

    // Already finished: wait returns at once.
    let (waited, doc) = s.wait(&["solo"], "finished", &[]);
    assert!(waited.status.success(), "{doc}");
    assert_eq!(doc["kind"], "reached");
    assert_eq!(doc["lanes"][0]["state"]["status"], "finished", "{doc}");

    let stream = s.stream(&[]);
    assert_stream_is_every_lane_log(&s, &stream, &["solo"]);
    assert!(stream.iter().any(|e| e["kind"] == "lane.finished"));
    // The readable form: a line per event with its cursor.
    let text = s.clawpool_in_repo(&["events", "--all"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.lines().count(), stream.len());
    assert!(
        text.lines().last().expect("a line").contains("solo"),
        "{text}"
    );
}

#[test]
fn the_stream_resumes_across_a_daemon_restart_with_no_gap_and_no_duplicate() {
    let s = setup();
    // A follower from the start, reading line by line as events come.
    let mut follower = s
        .sandbox
        .clawpool()
        .args([
            "events",
            "--all",
            "--follow",
            "--output-format",
            "json",
            "--repo",
        ])
        .arg(&s.repo)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("events --all --follow");
    let mut lines = BufReader::new(follower.stdout.take().expect("stdout")).lines();

    // The first daemon runs alpha.
    let out = s.spawn_named("alpha", "first run", &["--detach"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The follower sees alpha's first events live, then disconnects part-way.
    let mut seen: Vec<Value> = Vec::new();
    while seen.len() < 3 {
        let line = lines.next().expect("a line while following").expect("read");
        seen.push(serde_json::from_str(&line).expect("JSON line"));
    }
    follower.kill().expect("disconnect the follower");
    let _ = follower.wait();
    let (waited, doc) = s.wait(&["alpha"], "ended", &["--timeout", "60"]);
    assert!(waited.status.success(), "{doc}");
    crate::spawn::stop_daemon(&s);

    // A second daemon (a new process) runs beta.
    let out = s.spawn_named("beta", "second run", &["--detach"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (waited, doc) = s.wait(&["beta"], "ended", &["--timeout", "60"]);
    assert!(waited.status.success(), "{doc}");
    crate::spawn::stop_daemon(&s);

    // Resumed after the last line the follower read: with what it saw, exactly the stream.
    let last = seen.last().expect("seen")["cursor"]
        .as_u64()
        .expect("cursor");
    let resumed = s.stream(&["--since", &last.to_string()]);
    let whole = s.stream(&[]);
    let joined: Vec<Value> = seen.iter().chain(&resumed).cloned().collect();
    assert_eq!(joined, whole, "no gap and no duplicate");
    assert_stream_is_every_lane_log(&s, &whole, &["alpha", "beta"]);
    assert!(
        resumed
            .iter()
            .any(|e| e["lane"] == "beta" && e["kind"] == "lane.finished")
    );

    // A cursor that is no event's is refused by name.
    let bad = s.clawpool_in_repo(&[
        "events",
        "--all",
        "--since",
        &(last + 1).to_string(),
        "--output-format",
        "json",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&bad.stderr).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "unknown_cursor", "{error}");
}

#[test]
fn wait_times_out_with_each_lanes_state_and_stops_when_a_lane_ends_elsewhere() {
    let s = setup();
    s.scenario(LONG_SCENARIO);
    let out = s.spawn_named("slow", "take your time", &["--detach"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Running is reached on the stream while waiting.
    let (waited, doc) = s.wait(&["slow"], "running", &["--timeout", "60"]);
    assert!(waited.status.success(), "{doc}");

    let (waited, doc) = s.wait(
        &["slow", "nobody"],
        "finished,failed",
        &["--timeout", "0.5"],
    );
    assert_eq!(waited.status.code(), Some(124), "{doc}");
    assert_eq!(doc["kind"], "timed_out");
    assert_eq!(doc["lanes"][0]["lane"], "nobody");
    assert_eq!(doc["lanes"][0]["state"], Value::Null, "{doc}");
    assert_eq!(doc["lanes"][1]["state"]["status"], "running", "{doc}");
    assert_eq!(doc["lanes"][1]["reached"], false);

    // Stopped: the lane ends, and a wait for `blocked` can never be met.
    let stop = s
        .sandbox
        .clawpool()
        .args(["stop", "slow"])
        .current_dir(&s.repo)
        .output()
        .expect("stop");
    assert!(stop.status.success(), "{}", stderr(&stop));
    let (waited, doc) = s.wait(&["slow"], "blocked", &["--timeout", "60"]);
    assert_eq!(waited.status.code(), Some(1), "{doc}");
    assert_eq!(doc["kind"], "ended_elsewhere", "{doc}");

    // A state that is none is refused before anything.
    let bad = s.clawpool_in_repo(&["wait", "slow", "--until", "done"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("\"done\""), "{}", stderr(&bad));
    let bad = s.clawpool_in_repo(&[
        "wait",
        "../x",
        "--until",
        "ended",
        "--output-format",
        "json",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&bad.stderr).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "invalid_argument", "{error}");
    crate::spawn::stop_daemon(&s);
}

#[test]
fn wait_on_200_lanes_at_once() {
    let s = setup();
    s.scenario(QUICK_SCENARIO);
    let names: Vec<String> = (0..200).map(|i| format!("w{i:03}")).collect();
    let lanes: Vec<Value> = names
        .iter()
        .map(|n| serde_json::json!({"name": n, "prompt": "go"}))
        .collect();
    let packet = serde_json::json!({"defaults": {"agent": "scripted"}, "lanes": lanes});
    // Waiting starts before any lane exists: every lane is awaited from its first event.
    let mut wait = s.sandbox.clawpool();
    wait.arg("wait")
        .args(&names)
        .args([
            "--until",
            "finished",
            "--timeout",
            "240",
            "--output-format",
            "json",
            "--repo",
        ])
        .arg(&s.repo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let wait = wait.spawn().expect("clawpool wait");
    let out = s.spawn(&packet.to_string(), &["--detach", "--concurrency", "50"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let waited = wait.wait_with_output().expect("wait ends");
    let doc: Value = serde_json::from_slice(&waited.stdout).expect("one JSON document");
    assert!(waited.status.success(), "{doc}");
    let reported = doc["lanes"].as_array().expect("lanes");
    assert_eq!(reported.len(), 200);
    assert!(
        reported
            .iter()
            .all(|l| l["state"]["status"] == "finished" && l["reached"] == true)
    );
    crate::spawn::stop_daemon(&s);
}
