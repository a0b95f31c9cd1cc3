//! `clawpool spawn` on real git repositories: a packet of scripted-agent lanes, each in its own
//! worktree, bounded concurrency, the lane registry, board and events, and bad input that
//! creates nothing.

use std::path::PathBuf;
use std::process::Output;

use clawpool_tests::{Sandbox, git_log, git_repo, workspace_bin};
use serde_json::Value;

const SCENARIO: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "sleep", ms = 200 },
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
"#;

pub(crate) struct Setup {
    pub(crate) sandbox: Sandbox,
    pub(crate) repo: PathBuf,
    pub(crate) config: PathBuf,
}

pub(crate) fn setup() -> Setup {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    for (key, value) in [("user.name", "lane"), ("user.email", "lane@test")] {
        std::process::Command::new("git")
            .args(["config", key, value])
            .current_dir(&repo)
            .status()
            .expect("git config");
    }
    let scenario = sandbox.dir.path().join("scenario.toml");
    std::fs::write(&scenario, SCENARIO).expect("scenario");
    let config = sandbox.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "trusted_roots = [{:?}]\n[handshake]\nfinish_idle_ms = 400\n[profiles.scripted.launch]\ncommand = {:?}\nenv = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            sandbox.dir.path().display().to_string(),
            workspace_bin("clawpool-scripted-agent").display().to_string(),
            scenario.display().to_string(),
        ),
    )
    .expect("config");
    Setup {
        sandbox,
        repo,
        config,
    }
}

impl Setup {
    pub(crate) fn spawn(&self, packet: &str, extra: &[&str]) -> Output {
        let file = self.sandbox.dir.path().join("packet.json");
        std::fs::write(&file, packet).expect("packet");
        self.sandbox
            .clawpool()
            .arg("spawn")
            .arg(&file)
            .arg("--config")
            .arg(&self.config)
            .arg("--repo")
            .arg(&self.repo)
            .args(extra)
            .output()
            .expect("clawpool spawn runs")
    }

    pub(crate) fn lanes_dir(&self) -> PathBuf {
        self.sandbox.dir.path().join("repo.lanes")
    }

    /// Starts `clawpool spawn` (JSON) of `packet` with the agent scripted by `scenario`, and
    /// returns once a lane is running.
    pub(crate) fn spawn_until_running(
        &self,
        scenario: &str,
        packet: &str,
    ) -> clawpool_tests::LaneRun {
        std::fs::write(self.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
        let file = self.sandbox.dir.path().join("packet.json");
        std::fs::write(&file, packet).expect("packet");
        let mut cmd = self.sandbox.clawpool();
        cmd.arg("spawn")
            .arg(&file)
            .args(["--output-format", "json", "--config"])
            .arg(&self.config)
            .arg("--repo")
            .arg(&self.repo);
        let mut run =
            clawpool_tests::LaneRun::start(cmd, &self.sandbox.dir.path().join("run.stderr"));
        let running = run.wait_for(
            "running",
            std::time::Duration::from_secs(30),
            |e| e["kind"] == "lane.running",
            String::new,
        );
        self.state_files_hold(&running);
        run
    }

    /// Waits until the state files of `event`'s lane hold it (they are written behind the
    /// event log): the publication, written after the record.
    pub(crate) fn state_files_hold(&self, event: &Value) {
        let lane = event["lane"].as_str().expect("the event's lane");
        clawpool_tests::state_file_at(
            &self.lanes_dir().join(lane).join(".claw/worker-state.json"),
            event["seq"].as_u64().expect("the event's seq"),
            std::time::Duration::from_secs(30),
        );
    }

    /// The tmux target (`socket:session`) a lane's state file names.
    pub(crate) fn tmux_target(&self, lane: &str) -> String {
        let path = self.lanes_dir().join(lane).join(".claw/worker-state.json");
        let state: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("state")).expect("JSON");
        state["transport"]["session"]
            .as_str()
            .expect("tmux target")
            .to_owned()
    }

    fn branches(&self) -> Vec<String> {
        let out = std::process::Command::new("git")
            .args(["branch", "--format=%(refname:short)"])
            .current_dir(&self.repo)
            .output()
            .expect("git branch");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const THREE_LANES: &str = r#"{"defaults": {"agent": "scripted"}, "lanes": [
  {"name": "alpha", "prompt": "do alpha"},
  {"name": "beta", "prompt": "do beta"},
  {"name": "gamma", "prompt": "do gamma"}]}"#;

#[test]
fn a_packet_runs_every_lane_in_its_own_worktree() {
    let s = setup();
    let out = s.spawn(
        THREE_LANES,
        &["--concurrency", "2", "--output-format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let summary = events.last().expect("a summary");
    assert_eq!(summary["lanes"].as_array().map(Vec::len), Some(3));

    // Never more than two lanes between started and finished at once.
    let mut running = 0i32;
    let mut most = 0;
    for e in &events {
        match e["kind"].as_str() {
            Some("lane.started") => running += 1,
            Some("lane.finished" | "lane.failed") => running -= 1,
            _ => {}
        }
        most = most.max(running);
    }
    assert_eq!(most, 2, "concurrency bound");

    for lane in ["alpha", "beta", "gamma"] {
        let dir = s.lanes_dir().join(lane);
        assert_eq!(
            std::fs::read_to_string(dir.join("out.txt")).expect("lane's work"),
            "done\n"
        );
        assert_eq!(git_log(&dir)[0], "lane work");
        assert!(s.branches().contains(&format!("lanes/{lane}")));
        let state: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(".claw/worker-state.json")).expect("state file"),
        )
        .expect("JSON");
        assert_eq!(state["status"], "finished");
        assert_eq!(state["branch"], format!("lanes/{lane}"));
        assert_eq!(state["lane"], lane);
    }
    // The main worktree is untouched and .claw never shows in git.
    assert!(!s.repo.join("out.txt").exists());
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(s.lanes_dir().join("alpha"))
        .output()
        .expect("git status");
    assert!(String::from_utf8_lossy(&status.stdout).trim().is_empty());

    // Board and events read the lanes back, by name, from the repository.
    let board = s
        .sandbox
        .clawpool()
        .args(["board", "--output-format", "json", "--repo"])
        .arg(&s.repo)
        .output()
        .expect("board");
    let board: Value = serde_json::from_slice(&board.stdout).expect("board JSON");
    let lanes = board["lanes"].as_array().expect("lanes");
    assert_eq!(lanes.len(), 3);
    assert!(
        lanes
            .iter()
            .all(|l| l["status"] == "finished" && l["board"]["commits_ahead"] == 1)
    );
    let events = s
        .sandbox
        .clawpool()
        .args(["events", "beta"])
        .current_dir(&s.repo)
        .output()
        .expect("events");
    let events: Vec<Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    assert_eq!(
        events.first().map(|e| e["kind"].clone()),
        Some("lane.started".into())
    );
    assert!(events.iter().any(|e| e["kind"] == "lane.finished"));
    let commit = events
        .iter()
        .find(|e| e["kind"] == "lane.commit.created")
        .expect("the lane's commit is an event");
    assert_eq!(commit["detail"]["subject"], "lane work");
    assert_eq!(
        commit["detail"]["sha"].as_str(),
        Some(git_head(&s.lanes_dir().join("beta")).as_str())
    );
    assert!(s.sandbox.leftover_processes().is_empty());
}

/// The `lane.commit.created` events in a lane's event log, read back through `clawpool events`.
fn commit_events(s: &Setup, lane: &str) -> Vec<Value> {
    let out = s
        .sandbox
        .clawpool()
        .args(["events", lane])
        .current_dir(&s.repo)
        .output()
        .expect("events");
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "lane.commit.created")
        .collect()
}

#[test]
fn every_commit_a_lane_makes_is_its_own_event_even_between_two_looks() {
    let s = setup();
    // Three commits back to back: all land well within one 2 s look of the commit watcher.
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "write_file", path = "a.txt", content = "a\n" },
  { do = "git_commit", message = "first" },
  { do = "write_file", path = "b.txt", content = "b\n" },
  { do = "git_commit", message = "second" },
  { do = "write_file", path = "c.txt", content = "c\n" },
  { do = "git_commit", message = "third" },
]
"#,
    )
    .expect("scenario");
    let out = s.spawn(
        r#"{"name": "solo", "agent": "scripted", "prompt": "go"}"#,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let dir = s.lanes_dir().join("solo");
    assert_eq!(git_log(&dir)[..3], ["third", "second", "first"]);
    let commits = commit_events(&s, "solo");
    let subjects: Vec<&str> = commits
        .iter()
        .map(|e| e["detail"]["subject"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(subjects, ["first", "second", "third"], "{commits:?}");
    assert_eq!(
        commits[2]["detail"]["sha"].as_str(),
        Some(git_head(&dir).as_str())
    );
}

#[test]
fn a_lane_in_a_folder_named_otherwise_is_found_by_name_and_by_folder() {
    let s = setup();
    let folder = s.lanes_dir().join("somewhere-else");
    let out = s.spawn(
        &format!(
            r#"{{"name": "custom", "agent": "scripted", "prompt": "go", "worktree": {:?}}}"#,
            folder.display().to_string()
        ),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(git_log(&folder)[0], "lane work");
    // A folder in the current one that shares the lane's name does not shadow the lane.
    std::fs::create_dir_all(s.repo.join("custom")).expect("a folder named like the lane");
    let events_of = |arg: &std::path::Path, cwd: &std::path::Path| -> Vec<Value> {
        let out = s
            .sandbox
            .clawpool()
            .arg("events")
            .arg(arg)
            .current_dir(cwd)
            .output()
            .expect("events");
        assert!(out.status.success(), "{arg:?} in {cwd:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    };
    for (arg, cwd) in [
        (std::path::Path::new("custom"), s.repo.as_path()),
        (folder.as_path(), s.repo.as_path()),
        (std::path::Path::new("."), folder.as_path()),
    ] {
        let events = events_of(arg, cwd);
        assert!(
            events
                .iter()
                .any(|e| e["kind"] == "lane.finished" && e["lane"] == "custom"),
            "{arg:?} in {cwd:?}: {events:?}"
        );
    }
    for arg in [std::path::Path::new("custom"), folder.as_path()] {
        let state = s
            .sandbox
            .clawpool()
            .arg("state")
            .arg(arg)
            .args(["--output-format", "json"])
            .current_dir(&s.repo)
            .output()
            .expect("state");
        assert!(state.status.success(), "{arg:?}: {}", stderr(&state));
        let state: Value = serde_json::from_slice(&state.stdout).expect("state JSON");
        assert_eq!(state["lane"], "custom", "{arg:?}");
        assert_eq!(state["status"], "finished", "{arg:?}");
    }
}

#[test]
fn state_inside_a_lane_worktree_finds_the_lane_from_any_subfolder() {
    let s = setup();
    let out = s.spawn(
        r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "alpha", "prompt": "a"}, {"name": "beta", "prompt": "b"}]}"#,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let state_in = |cwd: &std::path::Path| {
        s.sandbox
            .clawpool()
            .args(["state", "--output-format", "json"])
            .current_dir(cwd)
            .output()
            .expect("state")
    };
    // Deep in alpha's worktree, and in a folder of it named like the other lane.
    let alpha = s.lanes_dir().join("alpha");
    for sub in ["src/deep/er", "src/beta"] {
        let cwd = alpha.join(sub);
        std::fs::create_dir_all(&cwd).expect("subfolder");
        let out = state_in(&cwd);
        assert!(out.status.success(), "{sub}: {}", stderr(&out));
        let state: Value = serde_json::from_slice(&out.stdout).expect("state JSON");
        assert_eq!(state["lane"], "alpha", "{sub}");
        assert_eq!(state["status"], "finished", "{sub}");
    }
    // No higher than the worktree's top: a state file above the main worktree is no lane of it.
    let above = s.sandbox.dir.path().join(".claw");
    std::fs::create_dir_all(&above).expect(".claw above the repository");
    std::fs::copy(
        alpha.join(".claw/worker-state.json"),
        above.join("worker-state.json"),
    )
    .expect("a state file above the repository");
    let cwd = s.repo.join("docs");
    std::fs::create_dir_all(&cwd).expect("a folder of the main worktree");
    let out = state_in(&cwd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err: Value = serde_json::from_slice(out.stderr.trim_ascii()).expect("one JSON error");
    assert_eq!(err["error"]["kind"], "missing_worker_state", "{err}");
}

/// The (seq, kind) of every event in a lane's event log.
fn logged_events(s: &Setup, lane: &str) -> Vec<(u64, String)> {
    std::fs::read_to_string(
        s.repo
            .join(format!(".git/clawpool/lanes/{lane}/events.jsonl")),
    )
    .expect("event log")
    .lines()
    .map(|l| {
        let e: Value = serde_json::from_str(l).expect("an event");
        (
            e["seq"].as_u64().expect("seq"),
            e["kind"].as_str().expect("kind").to_owned(),
        )
    })
    .collect()
}

#[test]
fn spawn_without_a_terminal_logs_every_event_as_a_line_prefixed_with_its_lane() {
    let s = setup();
    // Text output to a pipe: not a terminal, so no live lines, the plain line log instead.
    let out = s.spawn(
        r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "alpha", "prompt": "a"}, {"name": "be", "prompt": "b"}]}"#,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        !text.contains('\x1b'),
        "no terminal control in a log: {text:?}"
    );
    let (log, board) = text.rsplit_once("\n\n").expect("the log, then the board");
    // The board at the end: one line per lane, its final state.
    assert_eq!(
        board.lines().collect::<Vec<_>>(),
        ["lane   state", "alpha  finished", "be     finished"]
    );
    // Every line of the log starts with its lane's name, padded to the longest name (the
    // column is at least 4 wide); an event line then has `#SEQ KIND`.
    let mut printed: std::collections::BTreeMap<&str, Vec<(u64, String)>> = Default::default();
    for line in log.lines() {
        let (lane, rest) = ["alpha", "be"]
            .iter()
            .find_map(|lane| Some((*lane, line.strip_prefix(&format!("{lane:<5} "))?)))
            .unwrap_or_else(|| panic!("a line without its lane: {line:?}"));
        let Some(event) = rest.strip_prefix('#') else {
            // A state the lane reached outside its events (its worktree being prepared).
            assert_eq!(rest, "preparing worktree", "{line:?}");
            continue;
        };
        let mut words = event.split_whitespace();
        let seq = words.next().and_then(|w| w.parse().ok()).expect("a seq");
        let kind = words.next().expect("a kind").to_owned();
        printed.entry(lane).or_default().push((seq, kind));
    }
    // Exactly the lanes' events, each once, in the order of their logs.
    for lane in ["alpha", "be"] {
        let logged = logged_events(&s, lane);
        assert!(
            logged.iter().any(|(_, k)| k == "lane.finished"),
            "{logged:?}"
        );
        assert_eq!(printed.get(lane), Some(&logged), "{lane}:\n{text}");
    }
}

#[test]
fn events_follow_prints_events_as_they_come_and_goes_on_after_the_lane_ends() {
    let s = setup();
    let spawn = spawn_slow_alpha(&s, "packet.json");
    // LANE by name needs its registry entry.
    let registry = s.repo.join(".git/clawpool/lanes/alpha");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !registry.join("lane.json").is_file() {
        assert!(
            std::time::Instant::now() < deadline,
            "alpha never registered"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut follower = s
        .sandbox
        .clawpool()
        .args(["events", "alpha", "--follow"])
        .current_dir(&s.repo)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("events --follow");
    // Lines as the follower prints them, read on a thread so each can be awaited with a bound.
    let (lines, printed) = std::sync::mpsc::channel::<String>();
    let stdout = follower.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next = || -> Value {
        let line = printed
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| {
                let log = std::fs::read_to_string(registry.join("events.jsonl"));
                panic!("the follower printed no next event in 30 s; the lane's log: {log:?}")
            });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    };
    let mut seen = Vec::new();
    loop {
        let event = next();
        seen.push(event["kind"].as_str().unwrap_or("").to_owned());
        assert_eq!(event["seq"], seen.len(), "in order, none missed: {seen:?}");
        if event["kind"] == "lane.running" {
            // Printed while the lane is still at work (8 s): as it comes, not at the end.
            let log = std::fs::read_to_string(registry.join("events.jsonl")).expect("log");
            assert!(!log.contains("lane.finished"), "{log}");
        }
        if event["kind"] == "lane.finished" {
            break;
        }
    }
    assert!(seen.contains(&"lane.running".to_owned()), "{seen:?}");
    let done = spawn.wait_with_output().expect("spawn");
    assert!(done.status.success(), "{}", stderr(&done));
    // Whatever the lane recorded after finishing (its last commit) comes too.
    let logged = logged_events(&s, "alpha");
    while seen.len() < logged.len() {
        let event = next();
        seen.push(event["kind"].as_str().unwrap_or("").to_owned());
    }
    assert_eq!(seen, logged.into_iter().map(|(_, k)| k).collect::<Vec<_>>());
    // The lane has ended and its supervisor exited, yet the follower follows on: an event
    // recorded later still reaches it.
    assert!(follower.try_wait().expect("try_wait").is_none());
    let later =
        serde_json::json!({"seq": seen.len() + 1, "kind": "lane.appended_later", "lane": "alpha"});
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(registry.join("events.jsonl"))
        .expect("event log");
    std::io::Write::write_all(&mut log, format!("{later}\n").as_bytes()).expect("append");
    assert_eq!(next()["kind"], "lane.appended_later");
    // Ctrl-C ends it, successfully.
    // SAFETY: kill only sends a signal to the follower, a child of this test.
    assert_eq!(unsafe { libc::kill(follower.id() as i32, libc::SIGINT) }, 0);
    let status = follower.wait().expect("follower");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn spawn_exits_1_when_a_lane_fails() {
    let s = setup();
    // The agent takes its prompt, works a little (so the prompt is seen accepted), and
    // crashes; a policy without rules restarts nothing, so the lane ends failed at once.
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        "trust_dialog = true\n[[prompt]]\nsteps = [{ do = \"sleep\", ms = 300 }, { do = \"crash\", code = 3 }]\n",
    )
    .expect("scenario");
    let policy = s.sandbox.dir.path().join("policy.toml");
    std::fs::write(&policy, "").expect("policy");
    let config = std::fs::read_to_string(&s.config).expect("config");
    std::fs::write(
        &s.config,
        format!("policy = {:?}\n{config}", policy.display().to_string()),
    )
    .expect("config");
    let out = s.spawn(
        r#"{"name": "solo", "agent": "scripted", "prompt": "do it"}"#,
        &["--output-format", "json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let summary: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|doc| doc.get("lanes").is_some())
        .expect("the final lanes document");
    assert_eq!(summary["lanes"][0]["lane"], "solo", "{summary}");
    assert_eq!(
        summary["lanes"][0]["state"]["status"], "failed",
        "{summary}"
    );
    assert_eq!(
        summary["lanes"][0]["state"]["failure"], "worker_crashed",
        "{summary}"
    );
}

#[test]
fn spawning_again_with_rerun_reuses_the_lane_worktrees() {
    let s = setup();
    let packet = r#"{"name": "solo", "agent": "scripted", "prompt": "once"}"#;
    assert!(s.spawn(packet, &[]).status.success());
    let out = s.spawn(packet, &["--rerun"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        git_log(&s.lanes_dir().join("solo"))[..2],
        ["lane work", "lane work"]
    );
    // The second supervisor starts from the last commit the log reported: each commit once.
    let commits = commit_events(&s, "solo");
    assert_eq!(commits.len(), 2, "{commits:?}");
    assert_ne!(commits[0]["detail"]["sha"], commits[1]["detail"]["sha"]);
}

/// The prompts a lane's scripted agent was given, from its prompt log in the worktree.
fn prompts_given(s: &Setup, lane: &str) -> usize {
    std::fs::read_to_string(s.lanes_dir().join(lane).join(".prompts.jsonl"))
        .map(|log| {
            log.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|entry| entry["event"] == "prompt")
                .count()
        })
        .unwrap_or(0)
}

/// The event kinds in a lane's event log, in order.
fn event_kinds(s: &Setup, lane: &str) -> Vec<String> {
    let log = s
        .repo
        .join(".git/clawpool/lanes")
        .join(lane)
        .join("events.jsonl");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn spawning_again_skips_finished_lanes_and_lanes_gc_removed_unless_rerun() {
    let s = setup();
    let packet = r#"{"defaults": {"agent": "scripted"}, "lanes": [
      {"name": "alpha", "prompt": "do alpha"}, {"name": "beta", "prompt": "do beta"}]}"#;
    // alpha ran and gc removed it (--force: its work is on its branch only); beta then ran
    // and stays, finished.
    let out = s.spawn(
        r#"{"name": "alpha", "agent": "scripted", "prompt": "do alpha"}"#,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let gc = s
        .sandbox
        .clawpool()
        .args(["gc", "--force", "--repo"])
        .arg(&s.repo)
        .output()
        .expect("gc");
    assert!(gc.status.success(), "{}", stderr(&gc));
    let out = s.spawn(
        r#"{"name": "beta", "agent": "scripted", "prompt": "do beta"}"#,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!s.lanes_dir().join("alpha").exists());

    // Plain log and board: each lane skipped, and why; nothing typed, nothing re-created.
    let again = s.spawn(packet, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("alpha skipped: removed by gc"), "{text}");
    assert!(text.contains("beta  skipped: finished"), "{text}");
    let board = text.split("\nlane").nth(1).expect("the final board");
    assert!(board.contains("alpha  skipped: removed by gc"), "{board}");
    assert!(board.contains("beta   skipped: finished"), "{board}");
    assert!(!s.lanes_dir().join("alpha").exists(), "gc's removal stands");
    assert_eq!(prompts_given(&s, "beta"), 1, "no prompt typed again");
    assert!(!event_kinds(&s, "beta").contains(&"lane.rerun".to_owned()));

    // JSON: the final document names each skipped lane.
    let json = s.spawn(packet, &["--output-format", "json"]);
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let summary: Value = String::from_utf8_lossy(&json.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|doc| doc.get("lanes").is_some())
        .expect("the final lanes document");
    let lane = |name: &str| {
        summary["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .find(|l| l["lane"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} listed: {summary}"))
    };
    assert_eq!(lane("alpha")["skipped"], "removed_by_gc", "{summary}");
    assert_eq!(lane("alpha")["state"], Value::Null, "{summary}");
    assert_eq!(lane("beta")["skipped"], "finished", "{summary}");
    assert_eq!(lane("beta")["state"]["status"], "finished", "{summary}");
    assert_eq!(prompts_given(&s, "beta"), 1);

    // --rerun: beta runs its task again in its worktree, alpha is made again; both recorded.
    let rerun = s.spawn(packet, &["--rerun"]);
    assert_eq!(rerun.status.code(), Some(0), "{}", stderr(&rerun));
    assert_eq!(prompts_given(&s, "beta"), 2);
    // Its branch kept the first run's prompt log; the new worktree's agent adds one.
    assert_eq!(prompts_given(&s, "alpha"), 2, "alpha re-created and run");
    let beta = event_kinds(&s, "beta");
    let rerun_at = beta
        .iter()
        .position(|k| k == "lane.rerun")
        .expect("lane.rerun");
    assert_eq!(
        beta.iter().filter(|k| *k == "lane.started").count(),
        2,
        "{beta:?}"
    );
    assert_eq!(beta[rerun_at + 1], "lane.started", "{beta:?}");
    assert_eq!(
        event_kinds(&s, "alpha").first().map(String::as_str),
        Some("lane.rerun")
    );
    assert!(!s.repo.join(".git/clawpool/removed/alpha.json").exists());
}

fn assert_nothing_created(s: &Setup) {
    assert!(!s.lanes_dir().exists(), "no lane folder made");
    assert_eq!(s.branches(), vec!["main".to_owned()], "no branch made");
    assert!(s.sandbox.leftover_processes().is_empty());
}

fn json_error(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    serde_json::from_slice::<Value>(out.stderr.trim_ascii()).expect("one JSON error")["error"]
        .clone()
}

#[test]
fn bad_input_is_refused_before_anything_is_created() {
    let s = setup();
    let json = ["--output-format", "json"];

    let err = json_error(&s.spawn(
        r#"{"lanes": [{"name": "UP", "prompt": "x"}, {"name": "b"}]}"#,
        &json,
    ));
    assert_eq!(err["kind"], "invalid_packet");
    let message = err["message"].as_str().unwrap_or("");
    assert!(
        message.contains("$.lanes[0].name") && message.contains("$.lanes[1]"),
        "{message}"
    );
    assert_nothing_created(&s);

    let err = json_error(&s.spawn(
        r#"{"lanes": [{"name": "a", "agent": "scripted", "prompt": "x", "base": "no-such-branch"}]}"#,
        &json,
    ));
    assert!(
        err["message"]
            .as_str()
            .unwrap_or("")
            .contains("no-such-branch"),
        "{err}"
    );
    assert_nothing_created(&s);

    let err = json_error(&s.spawn(
        r#"{"lanes": [{"name": "a", "agent": "nope", "prompt": "x"}]}"#,
        &json,
    ));
    assert!(
        err["message"].as_str().unwrap_or("").contains("nope"),
        "{err}"
    );
    assert_nothing_created(&s);

    let not_repo = s.sandbox.dir.path().join("plain");
    std::fs::create_dir_all(&not_repo).expect("plain folder");
    let file = s.sandbox.dir.path().join("packet.json");
    let out = s
        .sandbox
        .clawpool()
        .arg("spawn")
        .arg(&file)
        .args(["--output-format", "json", "--repo"])
        .arg(&not_repo)
        .output()
        .expect("clawpool spawn");
    assert_eq!(json_error(&out)["kind"], "not_a_repository");
}

#[test]
fn every_problem_in_a_packet_and_its_lanes_is_reported_at_once() {
    let s = setup();
    // An agent whose binary is not there.
    let config = std::fs::read_to_string(&s.config).expect("config");
    std::fs::write(
        &s.config,
        format!("{config}[profiles.codex.launch]\ncommand = \"/nonexistent/codex-binary\"\n"),
    )
    .expect("config");
    // A lane folder that already holds a worktree on another branch.
    std::fs::create_dir_all(s.lanes_dir()).expect("lanes dir");
    let status = std::process::Command::new("git")
        .args(["worktree", "add", "-q", "-b", "other"])
        .arg(s.lanes_dir().join("taken"))
        .current_dir(&s.repo)
        .status()
        .expect("git worktree add");
    assert!(status.success());

    let out = s.spawn(
        r#"{"lanes": [
          {"name": "UP", "prompt": "x"},
          {"name": "b", "agent": "nope", "prompt": "x", "base": "no-such-branch"},
          {"name": "c", "agent": "codex", "prompt": "x"},
          {"name": "taken", "agent": "scripted", "prompt": "x"},
          {"name": "fine", "agent": "scripted", "prompt": "x"}]}"#,
        &["--output-format", "json"],
    );
    let err = json_error(&out);
    assert_eq!(err["kind"], "invalid_packet", "{err}");
    let problems = err["problems"].as_array().expect("problems");
    let at = |path: &str| -> String {
        problems
            .iter()
            .filter(|p| p["path"] == path)
            .map(|p| p["message"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let mut paths: Vec<&str> = problems.iter().filter_map(|p| p["path"].as_str()).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "$.lanes[0].name",
            "$.lanes[1].agent",
            "$.lanes[1].base",
            "$.lanes[2].agent",
            "$.lanes[3].worktree",
        ],
        "{err}"
    );
    assert!(at("$.lanes[1].agent").contains("nope"), "{err}");
    assert!(at("$.lanes[1].base").contains("no-such-branch"), "{err}");
    assert!(
        at("$.lanes[2].agent").contains("/nonexistent/codex-binary"),
        "{err}"
    );
    assert!(at("$.lanes[3].worktree").contains("other"), "{err}");
    // The text message lists them too.
    let message = err["message"].as_str().unwrap_or("");
    assert!(message.contains("5 problems"), "{message}");

    // Nothing made: no lane folder but the one that was there, no branch, no registry.
    let folders: Vec<_> = std::fs::read_dir(s.lanes_dir())
        .expect("lanes dir")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(folders, ["taken"]);
    assert_eq!(s.branches(), ["main", "other"]);
    assert!(!s.repo.join(".git/clawpool/lanes").exists());
    assert!(s.sandbox.leftover_processes().is_empty());
}

#[test]
fn a_lane_folder_on_another_branch_is_refused() {
    let s = setup();
    let folder = s.lanes_dir().join("taken");
    std::fs::create_dir_all(s.lanes_dir()).expect("lanes dir");
    let status = std::process::Command::new("git")
        .args(["worktree", "add", "-q", "-b", "other"])
        .arg(&folder)
        .current_dir(&s.repo)
        .status()
        .expect("git worktree add");
    assert!(status.success());
    let out = s.spawn(
        r#"{"lanes": [{"name": "taken", "agent": "scripted", "prompt": "x"}]}"#,
        &["--output-format", "json"],
    );
    let err = json_error(&out);
    assert!(
        err["message"].as_str().unwrap_or("").contains("other"),
        "{err}"
    );
    assert!(!folder.join("out.txt").exists());
}

#[test]
fn a_second_supervisor_for_the_same_repository_is_refused() {
    let s = setup();
    let common = s.repo.join(".git/clawpool");
    std::fs::create_dir_all(&common).expect("clawpool dir");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(common.join("supervisor.lock"))
        .expect("lock file");
    lock.lock()
        .expect("hold the lock as another supervisor would");
    let out = s.spawn(
        r#"{"lanes": [{"name": "a", "agent": "scripted", "prompt": "x"}]}"#,
        &["--output-format", "json"],
    );
    assert_eq!(json_error(&out)["kind"], "supervisor_running");
    assert_nothing_created(&s);
    drop(lock);
}

fn git_head(dir: &std::path::Path) -> String {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(dir)
        .output()
        .expect("git rev-parse");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn explain_reads_a_lanes_current_screen_with_its_own_profile() {
    let s = setup();
    assert!(
        s.spawn(
            r#"{"name": "solo", "agent": "scripted", "prompt": "once"}"#,
            &[]
        )
        .status
        .success()
    );
    let out = s
        .sandbox
        .clawpool()
        .args(["explain", "solo", "--output-format", "json"])
        .current_dir(&s.repo)
        .output()
        .expect("clawpool explain LANE");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["agent"], "scripted");
    assert_eq!(
        doc["explanation"]["observation"]["seen"]["kind"], "idle",
        "{doc}"
    );
}

/// Each prompt works 2.5 s, then commits.
const SLOW_SCENARIO: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "sleep", ms = 2500 },
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
"#;

/// [`SLOW_SCENARIO`] with 8 s of work: long enough that the tests using
/// [`spawn_slow_alpha`] act while the lane is still at work on a loaded machine (the
/// scripted agent's `run` step would block its screen, so no gate file can stand in for it).
const SLOWER_SCENARIO: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "sleep", ms = 8000 },
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
"#;

/// Starts `clawpool spawn` (JSON, stdout discarded, stderr piped) of one lane, alpha, whose
/// agent works 8 s; the packet is written to `file` in the sandbox.
fn spawn_slow_alpha(s: &Setup, file: &str) -> std::process::Child {
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), SLOWER_SCENARIO).expect("scenario");
    let file = s.sandbox.dir.path().join(file);
    std::fs::write(
        &file,
        r#"{"name": "alpha", "agent": "scripted", "prompt": "do alpha"}"#,
    )
    .expect("packet");
    s.sandbox
        .clawpool()
        .arg("spawn")
        .arg(&file)
        .args(["--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("clawpool spawn")
}

/// Spawns lanes alpha and beta on tmux with `scenario`, and SIGKILLs the supervisor once both
/// run: their agents live on in tmux with nobody watching.
pub(crate) fn kill_supervisor_while_lanes_run(s: &Setup, scenario: &str) {
    kill_supervisor_while_lanes_run_after(s, scenario, |_| {});
}

/// As [`kill_supervisor_while_lanes_run`], doing `before` with the lanes running first.
pub(crate) fn kill_supervisor_while_lanes_run_after(
    s: &Setup,
    scenario: &str,
    before: impl FnOnce(&Setup),
) {
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
    let file = s.sandbox.dir.path().join("packet.json");
    std::fs::write(
        &file,
        r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "alpha", "prompt": "do alpha"}, {"name": "beta", "prompt": "do beta"}]}"#,
    )
    .expect("packet");
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&file)
        .args(["--transport", "tmux", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo);
    let mut first = clawpool_tests::LaneRun::start(cmd, &s.sandbox.dir.path().join("first.stderr"));
    for lane in ["alpha", "beta"] {
        // Lanes start in either order; one may already have been read while waiting for the other.
        let running = match first
            .seen
            .iter()
            .find(|e| e["kind"] == "lane.running" && e["lane"] == lane)
        {
            Some(seen) => seen.clone(),
            None => first.wait_for(
                &format!("{lane} running"),
                std::time::Duration::from_secs(30),
                |e| e["kind"] == "lane.running" && e["lane"] == lane,
                String::new,
            ),
        };
        // Killed once its state files say so: what the killed supervisor leaves is a record of
        // a running lane.
        s.state_files_hold(&running);
    }
    before(s);
    // The supervisor dies without a chance to clean up; the agents live on in tmux.
    first.signal(libc::SIGKILL);
    first.wait_exit(std::time::Duration::from_secs(10));
}

#[test]
fn a_killed_supervisors_tmux_lanes_are_adopted_without_sending_anything_twice() {
    let s = setup();
    kill_supervisor_while_lanes_run(&s, SLOW_SCENARIO);
    let target = s.tmux_target("beta");
    let (socket, session) = target.split_once(':').expect("socket:session");
    // beta's worker is lost while no supervisor watches.
    let killed = s
        .sandbox
        .tmux()
        .args(["-L", socket, "kill-session", "-t", session])
        .status()
        .expect("tmux kill-session");
    assert!(killed.success());

    let out = s
        .sandbox
        .clawpool()
        .args(["adopt", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("clawpool adopt");
    assert_eq!(out.status.code(), Some(1), "beta failed: {}", stderr(&out));

    let alpha = s.lanes_dir().join("alpha");
    assert_eq!(
        std::fs::read_to_string(alpha.join("out.txt")).expect("alpha finished its work"),
        "done\n"
    );
    let prompts = std::fs::read_to_string(alpha.join(".prompts.jsonl")).expect("prompt log");
    assert_eq!(
        prompts.lines().filter(|l| l.contains("\"prompt\"")).count(),
        1,
        "{prompts}"
    );
    let events = |lane: &str| -> Vec<Value> {
        std::fs::read_to_string(
            s.repo
                .join(format!(".git/clawpool/lanes/{lane}/events.jsonl")),
        )
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
    };
    let alpha_events = events("alpha");
    let kinds: Vec<&str> = alpha_events
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    let adopted = kinds
        .iter()
        .position(|k| *k == "lane.adopted")
        .expect("adopted");
    assert!(kinds[adopted..].contains(&"lane.finished"), "{kinds:?}");
    assert!(
        !kinds[adopted..].contains(&"lane.prompt_typed"),
        "nothing typed again: {kinds:?}"
    );
    let seqs: Vec<u64> = alpha_events
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "seq continues: {seqs:?}"
    );
    let beta_failed = events("beta")
        .into_iter()
        .find(|e| e["kind"] == "lane.failed")
        .expect("beta failed");
    assert_eq!(beta_failed["to"]["failure"], "worker_lost");
    assert_eq!(
        s.branches().len(),
        3,
        "no branch made again: {:?}",
        s.branches()
    );
    assert!(s.sandbox.leftover_tmux_sockets().is_empty());
    assert!(s.sandbox.leftover_processes().is_empty());
}

#[test]
fn a_lane_with_a_corrupted_state_file_is_reported_not_adopted_and_the_others_are_adopted() {
    let s = setup();
    kill_supervisor_while_lanes_run(&s, SLOW_SCENARIO);
    // Keep the tmux target before beta's state record is spoiled, to clean up afterwards.
    let target = s.tmux_target("alpha");
    let beta_record = s.repo.join(".git/clawpool/lanes/beta/state.json");
    std::fs::write(&beta_record, "{\"lane\": \"beta\", trunc").expect("corrupt beta's record");

    let out = s
        .sandbox
        .clawpool()
        .args(["adopt", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("clawpool adopt");
    assert_eq!(
        out.status.code(),
        Some(1),
        "a lane was not adopted: {}",
        stderr(&out)
    );
    let summary: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|doc| doc.get("not_adopted").is_some())
        .expect("a summary document with not_adopted");
    let refused = summary["not_adopted"].as_array().expect("not_adopted");
    assert_eq!(refused.len(), 1, "{summary}");
    assert_eq!(refused[0]["lane"], "beta", "{summary}");
    assert_eq!(refused[0]["kind"], "invalid_state_file", "{summary}");
    assert!(
        refused[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("state.json")),
        "{summary}"
    );
    let adopted = summary["lanes"].as_array().expect("lanes");
    assert_eq!(adopted.len(), 1, "{summary}");
    assert_eq!(adopted[0]["lane"], "alpha", "{summary}");
    assert_eq!(adopted[0]["state"]["status"], "finished", "{summary}");
    assert_eq!(
        std::fs::read_to_string(s.lanes_dir().join("alpha/out.txt")).expect("alpha's work"),
        "done\n"
    );
    // beta is left exactly as it was found.
    assert_eq!(
        std::fs::read_to_string(&beta_record).expect("beta's record"),
        "{\"lane\": \"beta\", trunc"
    );

    let (socket, _) = target.split_once(':').expect("socket:session");
    let killed = s
        .sandbox
        .tmux()
        .args(["-L", socket, "kill-server"])
        .status()
        .expect("tmux kill-server");
    assert!(killed.success(), "beta's session was still there");
}

#[test]
fn gc_removes_only_lanes_whose_work_is_merged_or_empty_unless_forced() {
    let s = setup();
    let out = s.spawn(
        r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "alpha", "prompt": "a"}, {"name": "beta", "prompt": "b"}, {"name": "delta", "prompt": "d"}]}"#,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // gamma's agent commits nothing and writes nothing into its worktree.
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        "[[prompt]]\nsteps = [{ do = \"say\", text = \"nothing to change\" }]\n",
    )
    .expect("scenario");
    let out = s.spawn(
        r#"{"name": "gamma", "agent": "scripted", "prompt": "g"}"#,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let merged = std::process::Command::new("git")
        .args(["merge", "-q", "--no-edit", "lanes/alpha"])
        .current_dir(&s.repo)
        .status()
        .expect("git merge");
    assert!(merged.success());
    std::fs::write(s.lanes_dir().join("beta/uncommitted.txt"), "wip\n").expect("dirty beta");

    let gc = |force: bool| -> Value {
        let mut cmd = s.sandbox.clawpool();
        cmd.args(["gc", "--output-format", "json", "--repo"])
            .arg(&s.repo);
        if force {
            cmd.arg("--force");
        }
        let out = cmd.output().expect("clawpool gc");
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let first = gc(false);
    let verdict = |doc: &Value, lane: &str| {
        doc["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .find(|l| l["lane"] == lane)
            .cloned()
            .expect("lane listed")
    };
    let reason = |doc: &Value, lane: &str| {
        verdict(doc, lane)["reason"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(verdict(&first, "alpha")["removed"], true, "{first}");
    assert_eq!(verdict(&first, "alpha")["status"], "finished", "{first}");
    assert_eq!(verdict(&first, "beta")["removed"], false, "{first}");
    assert!(reason(&first, "beta").contains("uncommitted"), "{first}");
    // Committed, neither landed nor pushed, with a clean tree: kept all the same.
    assert_eq!(verdict(&first, "delta")["removed"], false, "{first}");
    assert!(
        reason(&first, "delta").contains("neither landed"),
        "{first}"
    );
    // Finished with no commits of its own: nothing to lose.
    assert_eq!(verdict(&first, "gamma")["removed"], true, "{first}");
    assert_eq!(reason(&first, "gamma"), "no commits of its own", "{first}");
    assert!(!s.lanes_dir().join("alpha").exists());
    assert!(!s.lanes_dir().join("gamma").exists());
    assert!(
        !s.repo.join(".git/clawpool/lanes/gamma").exists(),
        "registry entry removed"
    );
    assert!(
        s.lanes_dir().join("beta/uncommitted.txt").exists(),
        "uncommitted work kept"
    );
    assert!(
        s.lanes_dir().join("delta/out.txt").exists(),
        "unmerged work kept"
    );

    let forced = gc(true);
    assert_eq!(verdict(&forced, "beta")["removed"], true, "{forced}");
    assert_eq!(verdict(&forced, "delta")["removed"], true, "{forced}");
    assert!(!s.lanes_dir().join("beta").exists());
    assert!(!s.lanes_dir().join("delta").exists());
    // Branches stay: gc removes worktrees, not history.
    assert!(s.branches().contains(&"lanes/beta".to_owned()));
}

/// A lane whose supervisor was SIGKILLed while its tmux worker works on is not over (`clawpool
/// adopt` can take it over): gc keeps its worktree, clean and without commits as it is,
/// unless `--force`. A lane whose supervisor still holds its lock is kept even with `--force`.
#[test]
fn gc_keeps_a_lane_whose_supervisor_was_lost_before_it_ended() {
    let s = setup();
    // No prompt log and no commit: the worktrees stay clean and empty while the agents work.
    kill_supervisor_while_lanes_run(
        &s,
        "trust_dialog = true\n[[prompt]]\nsteps = [{ do = \"hang\" }]\n",
    );
    let state_path = s.lanes_dir().join("alpha/.claw/worker-state.json");
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).expect("state")).expect("JSON");
    let target = state["transport"]["session"]
        .as_str()
        .expect("tmux target")
        .to_owned();
    // alpha's supervisor is gone at once, as its free lock says (its last write is recent);
    // beta's lock is held here, as a live supervisor holds it.
    let _beta_supervisor =
        clawpool_lanes::state_file::SupervisorLock::hold(&s.repo.join(".git/clawpool/lanes/beta"))
            .expect("beta's lock is free once its supervisor was killed");
    // Its record has not been written for a minute, which no longer means anything: nothing
    // rewrites the record of a lane where nothing happens.
    let beta_state = s.repo.join(".git/clawpool/lanes/beta/state.json");
    let mut beta: Value =
        serde_json::from_str(&std::fs::read_to_string(&beta_state).expect("state")).expect("JSON");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    beta["supervisor"]["heartbeat_at"] = (now - 60).into();
    std::fs::write(&beta_state, beta.to_string()).expect("age beta's last write");
    let shown = s
        .sandbox
        .clawpool()
        .args(["state", "alpha", "--output-format", "json"])
        .current_dir(&s.repo)
        .output()
        .expect("clawpool state");
    let shown: Value = serde_json::from_slice(&shown.stdout).expect("state JSON");
    assert_eq!(shown["lane_status"], "supervisor_lost", "{shown}");
    assert_eq!(shown["last_status"], "running", "{shown}");

    let gc = |force: bool| -> Value {
        let mut cmd = s.sandbox.clawpool();
        cmd.args(["gc", "--output-format", "json", "--repo"])
            .arg(&s.repo);
        if force {
            cmd.arg("--force");
        }
        let out = cmd.output().expect("clawpool gc");
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let verdict = |doc: &Value, lane: &str| {
        doc["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .find(|l| l["lane"] == lane)
            .cloned()
            .expect("lane listed")
    };
    let first = gc(false);
    let alpha = verdict(&first, "alpha");
    assert_eq!(alpha["removed"], false, "{first}");
    assert_eq!(alpha["status"], "supervisor_lost", "{first}");
    assert!(
        alpha["reason"]
            .as_str()
            .is_some_and(|r| r.contains("supervisor_lost") && r.contains("--force")),
        "{first}"
    );
    assert!(
        s.lanes_dir().join("alpha").exists(),
        "alpha's worktree kept"
    );
    assert_eq!(verdict(&first, "beta")["removed"], false, "{first}");

    let forced = gc(true);
    assert_eq!(verdict(&forced, "alpha")["removed"], true, "{forced}");
    assert!(!s.lanes_dir().join("alpha").exists());
    let beta = verdict(&forced, "beta");
    assert_eq!(beta["removed"], false, "{forced}");
    assert!(
        beta["reason"]
            .as_str()
            .is_some_and(|r| r.contains("held by a live clawpool")),
        "{forced}"
    );
    assert!(s.lanes_dir().join("beta").exists());

    let (socket, _) = target.split_once(':').expect("socket:session");
    let killed = s
        .sandbox
        .tmux()
        .args(["-L", socket, "kill-server"])
        .status()
        .expect("tmux kill-server");
    assert!(killed.success());
}

/// Reads `clawpool board` until every lane is over (the supervisor is another process whose
/// only output is the lanes' files).
fn board_when_all_ended(s: &Setup, lanes: usize) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = s
            .sandbox
            .clawpool()
            .args(["board", "--output-format", "json", "--repo"])
            .arg(&s.repo)
            .output()
            .expect("board");
        let board: Value = serde_json::from_slice(&out.stdout).expect("board JSON");
        let all = board["lanes"].as_array().cloned().unwrap_or_default();
        if all.len() == lanes
            && all
                .iter()
                .all(|l| l["status"] == "finished" || l["status"] == "failed")
        {
            return board;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "lanes did not end: {board}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `clawpool daemon` on the test's configuration and repository, its stdout dropped.
pub(crate) fn daemon_command(s: &Setup) -> std::process::Command {
    let mut cmd = s.sandbox.clawpool();
    cmd.args(["daemon", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .stdout(std::process::Stdio::null());
    cmd
}

/// The repository's daemon, started on the test's configuration, its output dropped.
pub(crate) fn start_daemon(s: &Setup) -> std::process::Child {
    daemon_command(s)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("clawpool daemon")
}

pub(crate) fn stop_daemon(s: &Setup) {
    ask_daemon_to_stop(s);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !s.sandbox.leftover_processes().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not exit"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!s.repo.join(".git/clawpool/daemon.sock").exists());
}

#[test]
fn a_daemon_started_after_a_killed_supervisor_adopts_its_live_lanes() {
    let s = setup();
    kill_supervisor_while_lanes_run(&s, SLOW_SCENARIO);
    let mut daemon = daemon_command(&s);
    daemon.stderr(std::process::Stdio::null());
    // A commit made while no supervisor runs (plumbing only: the agent, still working, may
    // take the index lock at any moment).
    let alpha = s.lanes_dir().join("alpha");
    let git = |args: &[&str]| -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&alpha)
            .output()
            .expect("git");
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let unsupervised = git(&[
        "commit-tree",
        "HEAD^{tree}",
        "-p",
        "HEAD",
        "-m",
        "unsupervised",
    ]);
    git(&[
        "update-ref",
        "refs/heads/lanes/alpha",
        &unsupervised,
        "HEAD",
    ]);
    let mut daemon = daemon.spawn().expect("clawpool daemon");
    let board = board_when_all_ended(&s, 2);
    let subjects = |lane: &str| -> Vec<String> {
        commit_events(&s, lane)
            .iter()
            .map(|e| e["detail"]["subject"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    // The last look for commits comes after the lane is seen finished.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while (subjects("alpha").len() < 2 || subjects("beta").is_empty())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(subjects("alpha"), ["unsupervised", "lane work"]);
    assert_eq!(subjects("beta"), ["lane work"]);
    for lane in board["lanes"].as_array().expect("lanes") {
        assert_eq!(lane["status"], "finished", "{lane}");
        let ahead = if lane["lane"] == "alpha" { 2 } else { 1 };
        assert_eq!(lane["board"]["commits_ahead"], ahead, "{lane}");
        assert_eq!(lane["supervisor"]["pid"], daemon.id(), "{lane}");
    }
    for lane in ["alpha", "beta"] {
        let prompts = std::fs::read_to_string(s.lanes_dir().join(lane).join(".prompts.jsonl"))
            .expect("prompt log");
        assert_eq!(
            prompts.lines().filter(|l| l.contains("\"prompt\"")).count(),
            1,
            "{lane}: {prompts}"
        );
    }
    stop_daemon(&s);
    let _ = daemon.wait();
}

#[test]
fn a_daemon_names_in_its_log_the_lanes_it_could_not_adopt() {
    let s = setup();
    kill_supervisor_while_lanes_run(&s, SLOW_SCENARIO);
    let beta_state = s.repo.join(".git/clawpool/lanes/beta/state.json");
    let target = s.tmux_target("beta");
    std::fs::write(&beta_state, "not json").expect("corrupt beta's state record");
    let log_path = s.sandbox.dir.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).expect("log");
    let mut daemon = daemon_command(&s);
    daemon.stdout(log.try_clone().expect("log")).stderr(log);
    let mut daemon = daemon.spawn().expect("clawpool daemon");
    // The daemon is another process whose only output is its log and the lanes' files.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let alpha_state = s.lanes_dir().join("alpha/.claw/worker-state.json");
    loop {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let alpha: Value = std::fs::read_to_string(&alpha_state)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        if text.contains("lane beta not adopted (invalid_state_file)")
            && alpha["status"] == "finished"
            && alpha["supervisor"]["pid"] == daemon.id()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "log: {text}\nalpha: {alpha}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        daemon.try_wait().expect("try_wait").is_none(),
        "the daemon runs on"
    );
    assert_eq!(
        std::fs::read_to_string(&beta_state).expect("beta's state file"),
        "not json",
        "beta left as it was"
    );
    let (socket, _) = target.split_once(':').expect("socket:session");
    let _ = s
        .sandbox
        .tmux()
        .args(["-L", socket, "kill-server"])
        .status();
    stop_daemon(&s);
    let _ = daemon.wait();
}

#[test]
fn detached_lanes_run_in_the_daemon_and_a_second_spawn_hands_its_lanes_over() {
    let s = setup();
    let handed = |packet: &str, extra: &[&str]| -> Value {
        let out = s.spawn(packet, &[extra, &["--output-format", "json"]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("one JSON document")
    };
    let first = handed(
        r#"{"name": "alpha", "agent": "scripted", "prompt": "a"}"#,
        &["--detach"],
    );
    assert_eq!(first["handed_to_daemon"], true);
    assert_eq!(first["lanes"], serde_json::json!(["alpha"]));
    // Not detached, but the repository's supervisor is the daemon: the lanes go to it.
    let second = handed(
        r#"{"name": "beta", "agent": "scripted", "prompt": "b"}"#,
        &[],
    );
    assert_eq!(second["handed_to_daemon"], true);

    let board = board_when_all_ended(&s, 2);
    assert!(
        board["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .all(|l| l["status"] == "finished"),
        "{board}"
    );
    assert!(
        board["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .all(|l| l["board"]["commits_ahead"] == 1)
    );
    stop_daemon(&s);
}

/// The daemon starts lanes with the configuration the spawn that hands them over was given, not
/// the one it started with: a config changed since (the scripted agent's scenario, as an
/// `ANTHROPIC_BASE_URL` would be) reaches the next lanes, never silently the old one; a config
/// that no longer loads refuses the spawn by name, with nothing created.
#[test]
fn a_daemon_starts_lanes_with_the_configuration_the_spawn_was_given() {
    let s = setup();
    let handed =
        |packet: &str| -> Output { s.spawn(packet, &["--detach", "--output-format", "json"]) };
    let first = handed(r#"{"name": "alpha", "agent": "scripted", "prompt": "a"}"#);
    assert!(first.status.success(), "{}", stderr(&first));
    // The agent's scenario changes in the configuration after the daemon started.
    let scenario = s.sandbox.dir.path().join("scenario-2.toml");
    std::fs::write(
        &scenario,
        SCENARIO.replace(r#"content = "done\n""#, r#"content = "second config\n""#),
    )
    .expect("scenario");
    let config = std::fs::read_to_string(&s.config).expect("config");
    let original = s.sandbox.dir.path().join("scenario.toml");
    std::fs::write(
        &s.config,
        config.replace(
            &format!("{:?}", original.display().to_string()),
            &format!("{:?}", scenario.display().to_string()),
        ),
    )
    .expect("config");
    let second = handed(r#"{"name": "beta", "agent": "scripted", "prompt": "b"}"#);
    assert!(second.status.success(), "{}", stderr(&second));
    board_when_all_ended(&s, 2);
    let lanes = s.lanes_dir();
    assert_eq!(
        std::fs::read_to_string(lanes.join("alpha/out.txt")).expect("alpha's file"),
        "done\n"
    );
    assert_eq!(
        std::fs::read_to_string(lanes.join("beta/out.txt")).expect("beta's file"),
        "second config\n",
        "beta ran with the configuration its spawn was given"
    );

    // A configuration that no longer loads: refused by name, nothing created.
    std::fs::write(&s.config, "trusted_roots = 7\n").expect("config");
    let refused = handed(r#"{"name": "gamma", "agent": "scripted", "prompt": "c"}"#);
    assert!(!refused.status.success());
    let error: Value = serde_json::from_slice(&refused.stderr).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "invalid_config", "{error}");
    assert!(!lanes.join("gamma").exists());
    stop_daemon(&s);
}

/// Waits (at most `within`) for one of `children` to exit; returns its index and status.
fn first_exit(
    children: &mut [std::process::Child],
    within: std::time::Duration,
) -> (usize, std::process::ExitStatus) {
    let deadline = std::time::Instant::now() + within;
    loop {
        for (i, child) in children.iter_mut().enumerate() {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return (i, status);
            }
        }
        assert!(std::time::Instant::now() < deadline, "no process exited");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The pids of the sandbox's processes that are `clawpool daemon`s.
fn daemons(s: &Setup) -> Vec<u32> {
    s.sandbox
        .leftover_processes()
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            args.first().is_some_and(|a| a.ends_with(b"clawpool")) && args.contains(&&b"daemon"[..])
        })
        .collect()
}

#[test]
fn two_daemons_started_at_the_same_moment_leave_exactly_one_serving() {
    let s = setup();
    let daemon = || {
        let mut cmd = daemon_command(&s);
        cmd.stderr(std::process::Stdio::piped());
        cmd
    };
    let (mut first, mut second) = (daemon(), daemon());
    let mut both = vec![
        first.spawn().expect("first daemon"),
        second.spawn().expect("second daemon"),
    ];
    let (lost, status) = first_exit(&mut both, std::time::Duration::from_secs(15));
    let mut loser = both.remove(lost);
    let mut winner = both.remove(0);
    let mut why = String::new();
    std::io::Read::read_to_string(loser.stderr.as_mut().expect("stderr"), &mut why)
        .expect("the loser's stderr");
    // Already reaped by `first_exit`; this only hands back the status it kept.
    loser.wait().expect("wait");
    assert_eq!(status.code(), Some(2), "{why}");
    assert!(
        why.contains("another clawpool supervisor") && why.contains("this repository"),
        "{why}"
    );
    // The winner serves: it holds the lock (its pid in the file) and its socket answers.
    let common = s.repo.join(".git/clawpool");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !common.join("daemon.sock").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the winner never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read_to_string(common.join("supervisor.lock")).expect("lock file"),
        format!("{}\ndaemon\n", winner.id())
    );
    assert!(winner.try_wait().expect("try_wait").is_none());
    assert_eq!(daemons(&s), [winner.id()]);
    stop_daemon(&s);
    assert!(winner.wait().expect("wait").success());
}

#[test]
fn two_detached_spawns_at_the_same_moment_share_one_daemon() {
    let s = setup();
    let detached = |name: &str| {
        let file = s.sandbox.dir.path().join(format!("{name}.json"));
        std::fs::write(
            &file,
            format!(r#"{{"name": "{name}", "agent": "scripted", "prompt": "do {name}"}}"#),
        )
        .expect("packet");
        let mut cmd = s.sandbox.clawpool();
        cmd.arg("spawn")
            .arg(&file)
            .args(["--detach", "--output-format", "json", "--config"])
            .arg(&s.config)
            .arg("--repo")
            .arg(&s.repo)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    let (mut alpha, mut beta) = (detached("alpha"), detached("beta"));
    let spawns = [
        alpha.spawn().expect("spawn alpha"),
        beta.spawn().expect("spawn beta"),
    ];
    // Each returns once a daemon took its lanes (or after its own 15 s start timeout).
    for spawn in spawns {
        let out = spawn.wait_with_output().expect("spawn --detach");
        assert!(out.status.success(), "{}", stderr(&out));
        let reply: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(reply["handed_to_daemon"], true, "{reply}");
    }
    // A daemon started by the spawn that lost may still be on its way to the lock; it then
    // exits, refused, with a line in the daemon log.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let running = loop {
        let running = daemons(&s);
        if running.len() == 1 {
            break running;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "daemons: {running:?}\n{}",
            std::fs::read_to_string(s.repo.join(".git/clawpool/daemon.log")).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let log = std::fs::read_to_string(s.repo.join(".git/clawpool/daemon.log")).expect("log");
    let started = log.matches("clawpool: daemon for").count();
    let refused = log.matches("another clawpool supervisor").count();
    // One daemon served; at most the other spawn's daemon was refused (when the first one's
    // socket was up before it looked, the second spawn started none).
    assert_eq!(started, 1, "{log}");
    assert!(refused <= 1, "{log}");
    let board = board_when_all_ended(&s, 2);
    for lane in board["lanes"].as_array().expect("lanes") {
        assert_eq!(lane["status"], "finished", "{lane}");
        assert_eq!(lane["supervisor"]["pid"], running[0], "{lane}");
    }
    stop_daemon(&s);
}

#[test]
fn a_detached_spawn_while_a_foreground_spawn_runs_is_refused_at_once() {
    let s = setup();
    let foreground = spawn_slow_alpha(&s, "foreground.json");
    // The foreground spawn holds the lock once its pid and role are in the lock file.
    let lock = s.repo.join(".git/clawpool/supervisor.lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while std::fs::read_to_string(&lock).unwrap_or_default()
        != format!("{}\nspawn\n", foreground.id())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the foreground spawn never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let asked = std::time::Instant::now();
    let out = s.spawn(
        r#"{"name": "beta", "agent": "scripted", "prompt": "do beta"}"#,
        &["--detach", "--output-format", "json"],
    );
    let waited = asked.elapsed();
    let err = json_error(&out);
    assert_eq!(err["kind"], "supervisor_running", "{err}");
    let message = err["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("(pid {})", foreground.id())),
        "{message}"
    );
    // Refused without waiting out the 15 s a starting daemon gets to listen.
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    // No daemon started (none runs, none logged), nothing of beta's made.
    assert!(daemons(&s).is_empty());
    assert!(!s.repo.join(".git/clawpool/daemon.log").exists());
    assert!(!s.repo.join(".git/clawpool/lanes/beta").exists());
    assert!(!s.lanes_dir().join("beta").exists());
    assert!(!s.branches().contains(&"lanes/beta".to_owned()));

    // The foreground spawn was not disturbed.
    let done = foreground.wait_with_output().expect("foreground spawn");
    assert!(done.status.success(), "{}", stderr(&done));
    assert_eq!(
        std::fs::read_to_string(s.lanes_dir().join("alpha/out.txt")).expect("alpha's work"),
        "done\n"
    );
}

/// `chattr +i` on a folder (root ignores permissions, not the immutable flag); `false` when
/// this machine cannot (no CAP_LINUX_IMMUTABLE, or a file system without the flag).
pub(crate) fn make_immutable(dir: &std::path::Path, on: bool) -> bool {
    let flag = if on { "+i" } else { "-i" };
    let done = std::process::Command::new("chattr")
        .arg(flag)
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    done && (!on || std::fs::write(dir.join("probe"), b"x").is_err())
}

#[test]
fn a_lane_whose_state_file_cannot_be_written_shows_as_degraded_on_the_board() {
    let s = setup();
    let long = "[[prompt]]\nsteps = [{ do = \"sleep\", ms = 60000 }]\n";
    let mut run = s.spawn_until_running(
        long,
        r#"{"name": "solo", "agent": "scripted", "prompt": "work"}"#,
    );
    let lane = s.lanes_dir().join("solo");
    // The lane's record (what clawpool believes), which an immutable file cannot be renamed over.
    let record = s.repo.join(".git/clawpool/lanes/solo/state.json");
    let before = std::fs::read(&record).expect("state record");
    if !make_immutable(&record, true) {
        make_immutable(&record, false);
        eprintln!("skipped: cannot make a folder unwritable here");
        return;
    }
    let board = || -> Value {
        let out = s
            .sandbox
            .clawpool()
            .args(["board", "--output-format", "json", "--repo"])
            .arg(&s.repo)
            .output()
            .expect("board");
        serde_json::from_slice::<Value>(&out.stdout).expect("board JSON")["lanes"][0].clone()
    };
    // An event makes the supervisor write the state file; the write fails.
    let sent = s
        .sandbox
        .clawpool()
        .arg("send")
        .arg(&lane)
        .arg("more")
        .output()
        .expect("send");
    assert!(sent.status.success(), "{}", stderr(&sent));
    run.wait_for(
        "queued",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.send_queued",
        String::new,
    );
    let degraded = board();
    make_immutable(&record, false);
    assert!(
        degraded["board"]["state_file_degraded"].is_string(),
        "{degraded}"
    );
    assert_eq!(
        std::fs::read(&record).expect("state record"),
        before,
        "the previous file stays intact"
    );
    // Writable again: the next write succeeds and the mark goes.
    let stop = s
        .sandbox
        .clawpool()
        .arg("stop")
        .arg(&lane)
        .output()
        .expect("stop");
    assert!(stop.status.success(), "{}", stderr(&stop));
    run.wait_exit(std::time::Duration::from_secs(30));
    let after = board();
    assert!(after["board"]["state_file_degraded"].is_null(), "{after}");
    assert_eq!(after["lane_status"], "stopped", "{after}");
}

#[test]
fn packet_validate_refuses_an_unknown_agent_as_spawn_does() {
    let s = setup();
    let packet = r#"{"lanes": [{"name": "alpha", "agent": "scripted", "prompt": "a"},
      {"name": "beta", "agent": "claud", "prompt": "b"}]}"#;
    let file = s.sandbox.dir.path().join("packet.json");
    std::fs::write(&file, packet).expect("packet");
    let out = s
        .sandbox
        .clawpool()
        .args(["packet", "validate", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .arg(&file)
        .output()
        .expect("packet validate");
    let validated = json_error(&out);
    assert_eq!(validated["kind"], "invalid_packet", "{validated}");
    let problems = validated["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{validated}");
    assert_eq!(problems[0]["path"], "$.lanes[1].agent", "{validated}");

    let spawned = json_error(&s.spawn(packet, &["--output-format", "json"]));
    assert_eq!(
        problems[0]["message"], spawned["problems"][0]["message"],
        "validate words it as spawn does: {spawned}"
    );
    assert_nothing_created(&s);
}

#[test]
fn an_agent_given_on_the_command_line_that_the_packet_overrides_is_reported() {
    let s = setup();
    // alpha names its own agent, beta the packet's default: neither runs --agent's.
    let packet = r#"{"defaults": {"agent": "scripted"}, "lanes": [
      {"name": "alpha", "agent": "scripted", "prompt": "a"}, {"name": "beta", "prompt": "b"}]}"#;
    let out = s.spawn(packet, &["--agent", "claude"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stderr(&out);
    for lane in ["alpha", "beta"] {
        assert!(
            text.contains(&format!("clawpool: notice: lane {lane} runs agent scripted, as the packet names it: --agent claude applies only to lanes that name no agent")),
            "{text}"
        );
    }
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(s.lanes_dir().join("alpha/.claw/worker-state.json"))
            .expect("state"),
    )
    .expect("JSON");
    assert_eq!(state["agent"], "scripted");

    let out = s.spawn(
        packet,
        &["--agent", "claude", "--output-format", "json", "--rerun"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let notices: Vec<Value> = stderr(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|doc| doc.get("notice").cloned())
        .collect();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert_eq!(notices[0]["kind"], "agent_overridden", "{notices:?}");
    assert_eq!(notices[0]["lane"], "alpha", "{notices:?}");
    assert_eq!(notices[0]["agent"], "scripted", "{notices:?}");
    assert_eq!(notices[0]["cli_agent"], "claude", "{notices:?}");

    // A lane that names the same agent as --agent is not overridden.
    let same = s.spawn(packet, &["--agent", "scripted", "--rerun"]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert!(!stderr(&same).contains("notice"), "{}", stderr(&same));
}

/// The doctor checks on a fresh repository, read as a new user would, and each fix it gives
/// applied as written: the warning it was for is gone.
#[test]
fn doctor_warns_only_about_what_is_used_and_its_fixes_fix_the_warnings() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let doctor = |extra: &[&str]| -> Value {
        let out = sandbox
            .clawpool()
            .args(["doctor", "--output-format", "json", "--repo"])
            .arg(&repo)
            .args(extra)
            .output()
            .expect("doctor");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("doctor JSON")
    };
    // The permissions warning (lanes unsandboxed, acting without a person) stays with the
    // shipped policy; `doctor_warns_when_unsandboxed_lanes_act_without_a_person` follows its fix.
    let warnings = |doc: &Value| -> Vec<Value> {
        doc["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["ok"] == false && c["name"] != "permissions")
            .cloned()
            .collect()
    };
    // No configuration and no packet: no agent is anyone's concern yet.
    let fresh = doctor(&[]);
    let problems = warnings(&fresh);
    assert_eq!(problems.len(), 1, "only the trusted roots: {fresh}");
    assert_eq!(problems[0]["name"], "trusted roots", "{fresh}");
    let fix = problems[0]["fix"].as_str().expect("a fix").to_owned();
    let lanes_root = sandbox.dir.path().join("repo.lanes");
    let user_config = sandbox.home().join(".config/clawpool/config.toml");
    assert_eq!(
        fix,
        format!(
            "to have lanes trusted, add trusted_roots = [\"{}\"] to {}",
            lanes_root.display(),
            user_config.display()
        )
    );

    // The fix as written: the lanes root does not exist yet, which is no problem.
    std::fs::create_dir_all(user_config.parent().expect("folder")).expect("config folder");
    std::fs::write(
        &user_config,
        format!("trusted_roots = [{:?}]\n", lanes_root.display().to_string()),
    )
    .expect("user config");
    let trusted = doctor(&[]);
    assert!(warnings(&trusted).is_empty(), "{trusted}");
    assert!(!lanes_root.exists(), "doctor makes nothing");

    // A packet's agent is checked, and its fix, applied, makes it found.
    let packet = sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"name": "alpha", "agent": "gemini", "prompt": "a"}"#,
    )
    .expect("packet");
    let packet_arg = packet.display().to_string();
    let with_packet = doctor(&["--packet", &packet_arg]);
    let problems = warnings(&with_packet);
    assert_eq!(problems.len(), 1, "{with_packet}");
    assert_eq!(problems[0]["name"], "agent gemini", "{with_packet}");
    let fix = problems[0]["fix"].as_str().expect("a fix");
    let expected = format!(
        "install gemini on PATH, or add [profiles.gemini.launch] command = \"/path/to/gemini\" to {}",
        user_config.display()
    );
    assert_eq!(fix, expected, "{with_packet}");
    let agent = workspace_bin("clawpool-scripted-agent");
    let config = std::fs::read_to_string(&user_config).expect("config");
    std::fs::write(
        &user_config,
        format!(
            "{config}[profiles.gemini.launch]\ncommand = {:?}\n",
            agent.display().to_string()
        ),
    )
    .expect("user config");
    let fixed = doctor(&["--packet", &packet_arg]);
    assert!(warnings(&fixed).is_empty(), "{fixed}");
}

/// Issue 25: `clawpool doctor` warns that lanes run unsandboxed while the shipped policy lets
/// their agents act without a person, and stops once a person answers everything; it reports
/// grants no clawpool wrote, which no lane honours.
#[test]
fn doctor_warns_when_unsandboxed_lanes_act_without_a_person() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let doctor = || -> Value {
        let out = sandbox
            .clawpool()
            .args(["doctor", "--output-format", "json", "--repo"])
            .arg(&repo)
            .output()
            .expect("doctor");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("doctor JSON")
    };
    let check = |doc: &Value, name: &str| -> Option<Value> {
        doc["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
    };
    let shipped = doctor();
    let permissions = check(&shipped, "permissions").expect("a permissions check");
    assert_eq!(permissions["ok"], false, "{permissions}");
    let detail = permissions["detail"].as_str().expect("detail");
    assert!(detail.contains("unsandboxed"), "{detail}");
    assert!(detail.contains("workspace-write"), "{detail}");
    assert!(detail.contains("#2 cargo in lane"), "{detail}");
    assert!(check(&shipped, "grants").is_none(), "{shipped}");

    // The fix as written: a policy file where a person answers everything.
    let policy = sandbox.dir.path().join("policy.toml");
    std::fs::write(&policy, "[permissions]\ndefault_profile = \"read-only\"\n").expect("policy");
    let user_config = sandbox.home().join(".config/clawpool/config.toml");
    std::fs::create_dir_all(user_config.parent().expect("folder")).expect("config folder");
    std::fs::write(
        &user_config,
        format!("policy = {:?}\n", policy.display().to_string()),
    )
    .expect("user config");
    let asking = doctor();
    let permissions = check(&asking, "permissions").expect("a permissions check");
    assert_eq!(permissions["ok"], true, "{permissions}");

    // A grant written by hand into the repository's store is reported, never honoured.
    let store = repo.join(".git/clawpool/permission-grants.json");
    std::fs::create_dir_all(store.parent().expect("folder")).expect("store folder");
    std::fs::write(
        &store,
        r#"{"version": 1, "grants": [{"id": "repository#1", "scope": "repository",
            "tool": "bash", "verb": "*", "worktree": "/w", "lane": "a", "question": "q",
            "granted_at_ms": 1}]}"#,
    )
    .expect("hand-written grant");
    let forged = doctor();
    let grants = check(&forged, "grants").expect("a grants check");
    assert_eq!(grants["ok"], false, "{grants}");
    let detail = grants["detail"].as_str().expect("detail");
    assert!(
        detail.contains("repository#1 (bash *): not written by clawpool"),
        "{detail}"
    );
}

/// The lane's state files are written off the supervisor's runtime threads, behind its event
/// log: the lane's close waits for the last write, so once `spawn` has exited the record and
/// its publication hold the lane's last event, the same bytes.
#[test]
fn once_spawn_exits_the_state_files_hold_each_lanes_last_event() {
    let s = setup();
    let out = s.spawn(THREE_LANES, &["--concurrency", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for lane in ["alpha", "beta", "gamma"] {
        let (seq, kind) = logged_events(&s, lane).pop().expect("events");
        let record = std::fs::read(
            s.repo
                .join(format!(".git/clawpool/lanes/{lane}/state.json")),
        )
        .expect("record");
        let publication = std::fs::read(s.lanes_dir().join(lane).join(".claw/worker-state.json"))
            .expect("publication");
        assert_eq!(record, publication, "{lane}: the publication is the record");
        let state: Value = serde_json::from_slice(&record).expect("JSON");
        assert_eq!(state["lane_status"], "finished", "{lane}");
        assert_eq!(state["lane_event"]["seq"], seq, "{lane}");
        assert_eq!(state["lane_event"]["kind"], kind, "{lane}");
    }
}

/// `clawpool daemon --stop` for the setup's repository, which must succeed; what the daemon
/// leaves running (its tmux lanes) is the caller's to look at.
pub(crate) fn ask_daemon_to_stop(s: &Setup) {
    let stop = s
        .sandbox
        .clawpool()
        .args(["daemon", "--stop", "--repo"])
        .arg(&s.repo)
        .output()
        .expect("daemon --stop");
    assert!(stop.status.success(), "{}", stderr(&stop));
}
