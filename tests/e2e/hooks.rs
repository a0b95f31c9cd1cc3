//! Claude Code's hooks reaching their lane (`docs/events.md`, "Hook facts"), with the real
//! Claude Code 2.1.330 against the scripted model server, offline, as in `real_agents.rs`:
//! the hooks decide what they cover (the event's `source` says so), a long tool call is not a
//! stall, two lanes' hooks never cross, and a lane whose hook endpoint is gone degrades to its
//! screen and still finishes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_tests::{LaneRun, ModelServer, Sandbox, real_agent, seed_claude_home};
use serde_json::{Value, json};

use crate::real_agents::{
    assert_nothing_left, claude_env, count_kind, finish, lanes_dir, launch_env, plain_lane,
    screen_report, start_lane, write_config,
};

/// How long any one awaited event may take (real agents on two shared cores).
const PATIENCE: Duration = Duration::from_secs(60);

/// A trusted Claude Code lane `name` in `sandbox` whose model serves `script`; `launch_extra`
/// and `config_extra` go into the config (the launch table, then top-level tables).
fn start_claude(
    sandbox: &Sandbox,
    name: &str,
    script: Value,
    launch_extra: &str,
    config_extra: &str,
) -> (PathBuf, ModelServer, LaneRun) {
    real_agent("claude");
    let lane = plain_lane(sandbox, name);
    let server = ModelServer::start(&sandbox.dir.path().join(format!("model-{name}")), &script);
    let config = write_config(sandbox, Some(&lanes_dir(sandbox)), "claude", launch_extra);
    let text = std::fs::read_to_string(&config).expect("config");
    let config_file = sandbox.dir.path().join(format!("config-{name}.toml"));
    std::fs::write(&config_file, format!("{config_extra}\n{text}")).expect("config");
    let run = start_lane(
        sandbox,
        &config_file,
        "claude",
        &lane,
        &claude_env(sandbox, &server.url()),
        "pty",
    );
    (lane, server, run)
}

fn seed(sandbox: &Sandbox) {
    seed_claude_home(
        &sandbox.home(),
        json!({"customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []}}),
    );
}

/// The lane's state file.
pub(crate) fn state_file(lane: &Path) -> Value {
    clawpool_tests::published_state(lane)
}

/// The transition to `status` (the first).
pub(crate) fn transition_to<'a>(events: &'a [Value], status: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["to"]["status"] == status && e.get("from").is_some())
        .unwrap_or_else(|| panic!("no transition to {status} in {events:#?}"))
}

/// Everything the lane's agent wrote to its terminal (`.claw/terminal.log`), its escape
/// sequences dropped: what it drew, in the order it drew it.
fn drawn_text(lane: &Path) -> String {
    let bytes = std::fs::read(lane.join(".claw/terminal.log")).expect(".claw/terminal.log");
    let escapes =
        regex::Regex::new(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-_])")
            .expect("regex");
    escapes
        .replace_all(&String::from_utf8_lossy(&bytes), "")
        .into_owned()
}

/// The `lane.hook` events, by hook event name.
fn hooks_named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "lane.hook" && e["detail"]["event"] == name)
        .collect()
}

#[test]
fn claude_hooks_open_the_turn_and_its_stop_finishes_it() {
    let sandbox = Sandbox::new();
    seed(&sandbox);
    // The answer takes a moment, long enough for an animated spinner to draw frames.
    let (lane, mut server, mut run) = start_claude(
        &sandbox,
        "hooked",
        json!([{"text": "Hello from the scripted model.", "delay_ms": 1500}]),
        crate::codex_channel::CHANNEL_DECIDES,
        "",
    );
    let (code, outcome) = finish(&mut run, &lane);
    let events = run.events();
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(outcome["state"]["status"], "finished");

    let submitted = hooks_named(&events, "UserPromptSubmit");
    assert_eq!(submitted.len(), 1, "{}", run.report());
    assert!(
        submitted[0]["detail"]["prompt"]
            .as_str()
            .is_some_and(|p| p.contains("hello.txt")),
        "{}",
        submitted[0]
    );
    // Accepted by whichever came first: UserPromptSubmit, or the screen showing this prompt's
    // echo drawn with Claude Code at work (which it draws before it runs the hook); once.
    let accepted = transition_to(&events, "prompt_accepted");
    let by = (
        accepted["source"].as_str().unwrap_or_default(),
        accepted["evidence"]["rule"].as_str().unwrap_or_default(),
    );
    assert!(
        matches!(by, ("hook", "UserPromptSubmit") | ("screen", "prompt_echo")),
        "{accepted}\n{}",
        run.report()
    );
    assert_eq!(count_kind(&events, "lane.prompt_accepted"), 1);
    let finished = transition_to(&events, "finished");
    assert_eq!(finished["source"], "hook", "{}", run.report());
    assert_eq!(finished["evidence"]["rule"], "Stop");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "lane.finished")
            .count(),
        1
    );
    assert_eq!(hooks_named(&events, "SessionStart").len(), 1);

    // The lane's own settings file, the user's untouched; the state file counts every report.
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(lane.join(".claw/hooks.json")).expect(".claw/hooks.json"),
    )
    .expect("JSON");
    assert!(settings["hooks"]["Stop"].is_array(), "{settings:#}");
    assert!(!sandbox.home().join(".claude/settings.json").exists());
    // The profile's reduced motion reached Claude Code: its spinner was drawn still and whole
    // ("● Verb…"), never one of its animated frames.
    assert_eq!(settings["prefersReducedMotion"], true, "{settings:#}");
    let drawn = drawn_text(&lane);
    let still = regex::Regex::new(r"● [A-Z][\p{L}'-]+…").expect("regex");
    assert!(still.is_match(&drawn), "no still spinner in:\n{drawn}");
    assert!(
        !drawn.contains(['✢', '✶', '✽']),
        "an animated spinner in:\n{drawn}"
    );
    let hooks = &state_file(&lane)["hooks"];
    let received = events.iter().filter(|e| e["kind"] == "lane.hook").count();
    assert_eq!(hooks["received"], received as u64, "{hooks}");
    assert_eq!(hooks["failed"], 0, "{hooks}");
    assert_eq!(hooks["channel"], "claude_hooks", "{hooks}");
    // The turn's tokens, from the last assistant message of the transcript the Stop hook named.
    let usage = events
        .iter()
        .find(|e| e["kind"] == "lane.usage")
        .unwrap_or_else(|| panic!("no lane.usage: {}", run.report()));
    assert_eq!(
        usage["detail"]["transcript_path"],
        hooks_named(&events, "Stop")[0]["detail"]["transcript_path"]
    );
    let output = &usage["detail"]["usage"]["output_tokens"];
    assert!(output.as_u64() > Some(0), "{usage}");
    let state = &state_file(&lane)["usage"];
    assert_eq!(state["source"], "claude_transcript", "{state}");
    assert_eq!(state["turns"], 1, "{state}");
    assert_eq!(&state["total"]["output"], output, "{state}");

    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// A policy file: the shipped one with the stall time `stall_after`; the config line naming it.
fn policy_with_stall(sandbox: &Sandbox, stall_after: &str) -> String {
    let policy = include_str!("../../docs/policy-defaults.toml")
        .replace("after = \"10m\"", &format!("after = {stall_after:?}"));
    let file = sandbox.dir.path().join("policy.toml");
    std::fs::write(&file, policy).expect("policy");
    format!("policy = {:?}", file.display().to_string())
}

/// A Bash `sleep 8` with a 3 s stall time: Claude Code's screen shows nothing new for seconds
/// (its spinner and timer are not progress), but the lane knows the tool is running from
/// PreToolUse until PostToolUse, so it is not stalled, and it finishes after the tool.
#[test]
fn claude_long_tool_call_reported_by_hooks_is_not_a_stall() {
    let sandbox = Sandbox::new();
    seed(&sandbox);
    let policy = policy_with_stall(&sandbox, "3s");
    let (lane, mut server, mut run) = start_claude(
        &sandbox,
        "sleeper",
        json!([
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 8", "description": "Wait"}}},
            {"text": "Done waiting."}
        ]),
        "args = [\"--allowedTools\", \"Bash(sleep 8)\"]\n",
        &policy,
    );
    let (code, outcome) = finish(&mut run, &lane);
    let events = run.events();
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(outcome["state"]["status"], "finished");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "lane.stalled")
            .count(),
        0,
        "{}",
        run.report()
    );
    let started = hooks_named(&events, "PreToolUse");
    let done = hooks_named(&events, "PostToolUse");
    assert_eq!((started.len(), done.len()), (1, 1), "{}", run.report());
    assert_eq!(started[0]["detail"]["tool"], "Bash");
    assert_eq!(started[0]["detail"]["tool_input"]["command"], "sleep 8");
    let took = done[0]["at_ms"].as_u64().unwrap_or(0) - started[0]["at_ms"].as_u64().unwrap_or(0);
    assert!(took >= 8000, "the tool ran its 8 s: {took} ms");
    assert_eq!(transition_to(&events, "finished")["source"], "hook");
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// Two lanes at once, each with its own Claude Code: each lane receives exactly its own
/// session's reports (one SessionStart, one UserPromptSubmit, one Stop each), and the two
/// sessions differ.
#[test]
fn two_claude_lanes_each_receive_only_their_own_hooks() {
    let sandbox = Sandbox::new();
    seed(&sandbox);
    let script = json!([{"text": "Hello from the scripted model."}]);
    let (left, mut left_server, mut left_run) =
        start_claude(&sandbox, "left", script.clone(), "", "");
    let (right, mut right_server, mut right_run) = start_claude(&sandbox, "right", script, "", "");
    let mut sessions = Vec::new();
    for (lane, run) in [(&left, &mut left_run), (&right, &mut right_run)] {
        let (code, outcome) = finish(run, lane);
        assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(lane));
        assert_eq!(outcome["state"]["status"], "finished");
        let events = run.events();
        let hooks: Vec<&Value> = events.iter().filter(|e| e["kind"] == "lane.hook").collect();
        for name in ["SessionStart", "UserPromptSubmit", "Stop"] {
            assert_eq!(
                hooks_named(&events, name).len(),
                1,
                "{name} in {}",
                run.report()
            );
        }
        let session = hooks[0]["detail"]["session_id"].clone();
        assert!(session.is_string(), "{}", hooks[0]);
        assert!(
            hooks.iter().all(|h| h["detail"]["session_id"] == session),
            "one session per lane: {hooks:#?}"
        );
        let state = state_file(lane);
        assert_eq!(state["hooks"]["received"], hooks.len() as u64);
        assert_eq!(state["hooks"]["failed"], 0);
        sessions.push(session);
    }
    assert_ne!(sessions[0], sessions[1]);
    drop(left_run);
    drop(right_run);
    left_server.stop();
    right_server.stop();
    assert_nothing_left(&sandbox);
}

/// The lane's control socket removed once the prompt's hook has reached it: the Stop
/// hook cannot deliver, says so, the lane records `lane.channel.degraded` and its screen
/// finishes it after `finish_idle`.
#[test]
fn a_lane_whose_hook_endpoint_is_gone_degrades_to_the_screen_and_finishes() {
    let sandbox = Sandbox::new();
    seed(&sandbox);
    let (lane, mut server, mut run) = start_claude(
        &sandbox,
        "cutoff",
        json!([{"text": "Hello after a pause.", "delay_ms": 4000}]),
        "",
        "",
    );
    // The channel works (the prompt's hook arrived; the screen may have accepted the prompt
    // before it, which it may), then its endpoint goes.
    run.wait_for(
        "the UserPromptSubmit hook",
        PATIENCE,
        |e| e["kind"] == "lane.hook" && e["detail"]["event"] == "UserPromptSubmit",
        || screen_report(&lane),
    );
    std::fs::remove_file(lane.join(".claw/control.sock")).expect("remove the control socket");
    let degraded = run.wait_for(
        "lane.channel.degraded",
        PATIENCE,
        |e| e["kind"] == "lane.channel.degraded",
        || screen_report(&lane),
    );
    assert_eq!(degraded["detail"]["event"], "Stop", "{degraded}");
    assert!(
        degraded["detail"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("control.sock")),
        "{degraded}"
    );
    let (code, outcome) = finish(&mut run, &lane);
    let events = run.events();
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(outcome["state"]["status"], "finished");
    let finished = transition_to(&events, "finished");
    assert_eq!(finished["source"], "screen", "{}", run.report());
    let state = state_file(&lane);
    assert!(state["hooks"]["failed"].as_u64() >= Some(1), "{state:#}");
    assert_eq!(state["hooks"]["degraded"], true);
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// A supervisor SIGKILLed while Claude Code runs a tool, and `clawpool adopt`: the running agent
/// keeps reporting with the token it was started with (kept in the lane's record folder, owner
/// only), and its reports after the adoption reach the adopting supervisor — the tool's end
/// and the turn's Stop are in the lane's log after `lane.adopted`, none of them failed, and
/// the Stop finishes the lane. A token put in the worktree meanwhile (where the agent can
/// write; the test stands in for it) is not the one the adopter takes.
#[test]
fn an_adopted_claude_lane_keeps_its_hook_channel() {
    let sandbox = Sandbox::new();
    seed(&sandbox);
    let repo = clawpool_tests::git_repo(sandbox.dir.path(), "repo");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &json!([
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 8", "description": "Wait"}}},
            {"text": "Done waiting."}
        ]),
    );
    let config = write_config(
        &sandbox,
        Some(sandbox.dir.path()),
        "claude",
        &format!(
            "args = [\"--allowedTools\", \"Bash(sleep 8)\"]\n{}",
            launch_env(&claude_env(&sandbox, &server.url()))
        ),
    );
    let packet = sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"defaults": {"agent": "claude"}, "lanes": [{"name": "alpha", "prompt": "wait a little"}]}"#,
    )
    .expect("packet");
    let mut spawn = sandbox.clawpool();
    spawn
        .arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--transport", "tmux", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&repo);
    let mut run = LaneRun::start(spawn, &sandbox.dir.path().join("spawn.stderr"));
    run.wait_for(
        "the tool reported started",
        PATIENCE,
        |e| e["kind"] == "lane.hook" && e["detail"]["event"] == "PreToolUse",
        String::new,
    );
    run.signal(libc::SIGKILL);
    run.wait_exit(PATIENCE);
    let lane = repo.with_extension("lanes").join("alpha");
    std::fs::write(lane.join(".claw/hook-token"), "planted").expect("a planted token");

    let adopt = sandbox
        .clawpool()
        .args(["adopt", "--output-format", "json", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&repo)
        .output()
        .expect("clawpool adopt");
    let log = std::fs::read_to_string(repo.join(".git/clawpool/lanes/alpha/events.jsonl"))
        .expect("the lane's events");
    let events: Vec<Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert!(
        adopt.status.success(),
        "{}\n{log}",
        String::from_utf8_lossy(&adopt.stderr)
    );
    // The adopter opens the channel, then takes the lane over.
    let reopened = events
        .iter()
        .position(|e| e["kind"] == "lane.channel.opened" && e["detail"]["adopted"] == true)
        .unwrap_or_else(|| panic!("the channel was not kept: {log}"));
    let after = &events[reopened..];
    assert_eq!(after[1]["kind"], "lane.adopted", "{log}");
    for name in ["PostToolUse", "Stop"] {
        assert_eq!(hooks_named(after, name).len(), 1, "{name}: {log}");
    }
    // No SessionStart and no UserPromptSubmit reach the adopter: the first report proves the
    // channel, and the Stop ends the turn the earlier supervisor saw accepted.
    let finished = transition_to(after, "finished");
    assert_eq!(finished["source"], "hook", "{log}");
    assert_eq!(finished["evidence"]["rule"], "Stop", "{log}");
    let failures =
        std::fs::read_to_string(lane.join(".claw/hook-failures.jsonl")).unwrap_or_default();
    assert!(failures.is_empty(), "{failures}");
    use std::os::unix::fs::PermissionsExt;
    let token = std::fs::metadata(repo.join(".git/clawpool/lanes/alpha/hook-token"))
        .expect("the token file");
    assert_eq!(token.permissions().mode() & 0o777, 0o600);
    server.stop();
    assert_nothing_left(&sandbox);
}
