//! Trust that cannot leak (issue #10, points 1–4), with the scripted agent: a lane outside the
//! trusted roots is held at clawpool's own gate even when its agent does not ask; a
//! repository's `.clawpool.toml` cannot turn the trust question into one clawpool answers;
//! packet paths are checked where they lead; a state file is read only in its own workspace,
//! and one lane-name rule holds for `clawpool run` too. (The real Claude Code side of point 1
//! is in `real_agents.rs`.)

use std::path::Path;
use std::time::Duration;

use clawpool_tests::{LaneRun, workspace_bin};
use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// A scripted agent that does not ask about the folder (as Claude Code does not when its own
/// store already trusts it), and writes a file if it is ever given a prompt.
const NO_QUESTION: &str = r#"
trust_dialog = false
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "write_file", path = "out.txt", content = "done\n" }]
"#;

/// A scripted agent that asks about the folder first.
const ASKS: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "write_file", path = "out.txt", content = "done\n" }]
"#;

/// `s`'s configuration without any trusted root, for `scenario`.
fn untrusted_config(s: &Setup, scenario: &str) -> std::path::PathBuf {
    let scenario_file = s.sandbox.dir.path().join("untrusted-scenario.toml");
    std::fs::write(&scenario_file, scenario).expect("scenario");
    let config = s.sandbox.dir.path().join("untrusted.toml");
    std::fs::write(
        &config,
        format!(
            "[handshake]\nfinish_idle_ms = 400\n[profiles.scripted.launch]\ncommand = {:?}\nenv = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            workspace_bin("clawpool-scripted-agent").display().to_string(),
            scenario_file.display().to_string(),
        ),
    )
    .expect("config");
    config
}

fn packet_file(s: &Setup, text: &str) -> std::path::PathBuf {
    let file = s.sandbox.dir.path().join("trust-packet.json");
    std::fs::write(&file, text).expect("packet");
    file
}

const ONE_LANE: &str =
    r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "solo", "prompt": "do it"}]}"#;

fn start_spawn(s: &Setup, config: &Path, packet: &str) -> LaneRun {
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(packet_file(s, packet))
        .args(["--output-format", "json", "--config"])
        .arg(config)
        .arg("--repo")
        .arg(&s.repo);
    LaneRun::start(cmd, &s.sandbox.dir.path().join("trust-spawn.stderr"))
}

fn wait_kind(run: &mut LaneRun, kind: &str) -> Value {
    run.wait_for(
        kind,
        Duration::from_secs(30),
        |e| e["kind"] == kind,
        String::new,
    )
}

/// #10.1: an agent that does not ask proves nothing. The lane is held before anything is
/// typed, escalated with `clawpool trust` as the next action, and driven only once an
/// operator trusts it.
#[test]
fn a_lane_outside_the_trusted_roots_is_held_even_when_its_agent_does_not_ask() {
    let s = setup();
    let config = untrusted_config(&s, NO_QUESTION);
    let mut run = start_spawn(&s, &config, ONE_LANE);
    let blocked = wait_kind(&mut run, "lane.blocked");
    assert_eq!(blocked["to"]["subphase"], "trust_prompt", "{blocked}");
    assert_eq!(blocked["evidence"]["rule"], "trust_gate", "{blocked}");
    let escalated = wait_kind(&mut run, "lane.escalated");
    assert!(
        escalated["detail"]["next_action"]
            .as_str()
            .is_some_and(|a| a.contains("clawpool trust solo")),
        "{escalated}"
    );
    let lane = s.lanes_dir().join("solo");
    assert!(
        run.lines_within(Duration::from_secs(2)).is_empty(),
        "nothing happens while the lane is held"
    );
    let events = run.events();
    for kind in ["lane.ready", "lane.prompt_typed", "lane.prompt_sent"] {
        assert!(
            !events.iter().any(|e| e["kind"] == kind),
            "{kind} on a held lane: {}",
            run.report()
        );
    }
    assert!(
        !lane.join(".prompts.jsonl").exists(),
        "no prompt reached the agent"
    );
    assert!(!lane.join("out.txt").exists());
    // The state file says so too.
    let state: Value = clawpool_tests::published_state(&lane);
    assert_eq!(state["lane_status"], "blocked");
    assert_eq!(state["trust_gate_cleared"], false);

    let out = s
        .sandbox
        .clawpool()
        .args(["trust", "solo"])
        .current_dir(&s.repo)
        .output()
        .expect("clawpool trust");
    assert!(out.status.success(), "{}", stderr(&out));
    let resolved = wait_kind(&mut run, "lane.trust_resolved");
    assert_eq!(resolved["detail"]["method"], "manual");
    wait_kind(&mut run, "lane.finished");
    let status = run.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", run.report());
    assert_eq!(
        std::fs::read_to_string(lane.join("out.txt")).expect("the lane's work"),
        "done\n"
    );
    let state: Value = clawpool_tests::published_state(&lane);
    assert_eq!(state["trusted_by_operator"], true, "{state}");
}

/// #10.2: a repository that redefines the trust question as a boot dialog clawpool answers
/// by itself (or adds a dialog matching it) is refused with the file, key and line, and
/// nothing is created.
#[test]
fn a_repository_cannot_make_clawpool_answer_its_own_trust_question() {
    let s = setup();
    let config = untrusted_config(&s, ASKS);
    for (attack, key, line) in [
        (
            "[handshake]\nfinish_idle_ms = 300\n\n[[profiles.scripted.dialogs]]\nname = \"trust\"\nkind = \"boot\"\nregion = \"screen\"\nmatch = { contains = \"Do you trust\" }\npolicy = \"auto\"\nanswer = \"yes\"\nchoices = { yes = [{ keys = [\"Down\"] }, { keys = [\"Enter\"] }] }\n",
            "profiles.scripted.dialogs",
            4,
        ),
        (
            "[profiles.scripted.dialog_policy]\napi_key = \"auto\"\n",
            "profiles.scripted.dialog_policy",
            1,
        ),
    ] {
        std::fs::write(s.repo.join(".clawpool.toml"), attack).expect("repo config");
        let out = s
            .sandbox
            .clawpool()
            .arg("spawn")
            .arg(packet_file(&s, ONE_LANE))
            .args(["--output-format", "json", "--config"])
            .arg(&config)
            .arg("--repo")
            .arg(&s.repo)
            .output()
            .expect("clawpool spawn");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err: Value = serde_json::from_slice(out.stderr.trim_ascii()).expect("one JSON error");
        assert_eq!(err["error"]["kind"], "invalid_config", "{err}");
        let message = err["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains(&format!(".clawpool.toml:{line}")) && message.contains(key),
            "{message}"
        );
        assert!(!s.lanes_dir().exists(), "nothing created");
    }
}

/// #10.3: a link inside the repository that points outside cannot carry a lane's worktree or
/// a trusted root out of it.
#[test]
fn packet_paths_through_a_link_out_of_the_repository_are_refused() {
    let s = setup();
    let elsewhere = s.sandbox.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, s.repo.join("lnk")).expect("link");
    let out = s.spawn(
        r#"{"defaults": {"agent": "scripted"}, "lanes": [
            {"name": "solo", "prompt": "x", "trusted_roots": ["lnk"], "worktree": "lnk/wt"}]}"#,
        &["--output-format", "json"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(message.contains("trusted_roots[0]"), "{message}");
    assert!(message.contains("$.lanes[0].worktree"), "{message}");
    assert!(message.contains("through a symbolic link"), "{message}");
    assert!(
        !elsewhere.join("wt").exists(),
        "no worktree outside the repository"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).expect("elsewhere").count(),
        0,
        "nothing written outside"
    );
}

/// #10.4: a state file copied into another clone is not that clone's lane; `clawpool run`
/// takes the packets' lane-name rule.
#[test]
fn a_state_file_is_read_only_in_its_own_workspace() {
    let s = setup();
    let out = s.spawn(ONE_LANE, &["--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lane = s.lanes_dir().join("solo");
    let state = s
        .sandbox
        .clawpool()
        .args(["state", "--output-format", "json"])
        .current_dir(&lane)
        .output()
        .expect("clawpool state");
    assert!(state.status.success(), "{}", stderr(&state));

    let clone = s.sandbox.dir.path().join("clone");
    let cloned = std::process::Command::new("git")
        .arg("clone")
        .arg("-q")
        .arg(&s.repo)
        .arg(&clone)
        .status()
        .expect("git clone");
    assert!(cloned.success());
    // A lane's state as a `clawpool run` lane keeps it in its own `.claw/` (its record),
    // copied into the clone.
    std::fs::create_dir_all(clone.join(".claw")).expect(".claw");
    for (from, to) in [
        (lane.join(".claw/worker-state.json"), "worker-state.json"),
        (
            s.repo.join(".git/clawpool/lanes/solo/state.json"),
            "state.json",
        ),
    ] {
        std::fs::copy(from, clone.join(".claw").join(to)).expect("copy the state file");
    }
    let out = s
        .sandbox
        .clawpool()
        .args(["state", "--output-format", "json"])
        .current_dir(&clone)
        .output()
        .expect("clawpool state");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err: Value = serde_json::from_slice(out.stderr.trim_ascii()).expect("one JSON error");
    assert_eq!(err["error"]["kind"], "foreign_state_file", "{err}");
    let message = err["error"]["message"].as_str().unwrap_or("");
    let lane = lane.canonicalize().expect("canonical lane");
    let clone = clone.canonicalize().expect("canonical clone");
    assert!(
        message.contains(&lane.display().to_string())
            && message.contains(&clone.display().to_string()),
        "names both folders: {message}"
    );

    let out = s
        .sandbox
        .clawpool()
        .args(["run", "--output-format", "json", "--agent", "scripted"])
        .args(["--lane", "a/b", "--prompt", "x", "--config"])
        .arg(&s.config)
        .arg("--cwd")
        .arg(&clone)
        .output()
        .expect("clawpool run");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err: Value = serde_json::from_slice(out.stderr.trim_ascii()).expect("one JSON error");
    assert_eq!(err["error"]["kind"], "invalid_lane_name", "{err}");
    assert!(s.sandbox.leftover_processes().is_empty());
}
