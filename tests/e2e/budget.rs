//! A lane's budget (`budget_usd`, `docs/task-packet.md`): a real spawned lane of the scripted
//! agent, started with Claude Code's hook settings (`--settings`), reports a tool's start
//! whose transcript line carries usage priced past its tiny budget; the lane interrupts the
//! agent mid-turn (its `hang` step, a tool call that would never end) and holds it
//! `blocked{budget}`, the notifier's `budget` notification goes out once, `send` is refused,
//! `clawpool budget` below its cost keeps it held, `stop` ends it, and a follow-up to the
//! stopped lane is refused.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// How long any one awaited thing may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// The model the transcript names, priced by the test: $10 / $20 per million tokens.
const MODEL: &str = "budget-test-model";

/// A tool call's usage line in the agent's transcript: 1,000 input and 1,000 output tokens,
/// $0.03 at the test's prices.
fn transcript_line() -> String {
    serde_json::json!({"type": "assistant", "message": {"id": "msg_1", "model": MODEL,
        "usage": {"input_tokens": 1000, "output_tokens": 1000}}})
    .to_string()
}

fn configure(s: &Setup, notified: &Path) {
    let config = std::fs::read_to_string(&s.config).expect("config");
    let config = config.replace(
        "[profiles.scripted.launch]\n",
        "[profiles.scripted.launch]\nhooks = \"claude\"\n",
    );
    let config = format!(
        "{config}[prices.{MODEL:?}]\ninput_per_mtok = 10.0\noutput_per_mtok = 20.0\nas_of = \"2026-11-01\"\n\
         [[notify]]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$0\\\"\", {:?}]\nevents = [\"budget\"]\n",
        notified.display().to_string()
    );
    std::fs::write(&s.config, config).expect("config");
}

fn scenario(s: &Setup, transcript: &Path) {
    let payload = serde_json::json!({"session_id": "s1",
        "transcript_path": transcript.display().to_string(),
        "tool_name": "Bash", "tool_input": {"command": "sleep 600"}})
    .to_string();
    let text = format!(
        "[[prompt]]\nsteps = [\n  {{ do = \"write_file\", path = {:?}, content = {:?} }},\n  \
         {{ do = \"hook\", event = \"PreToolUse\", payload = {:?} }},\n  \
         {{ do = \"say\", text = \"$ sleep 600\" }},\n  {{ do = \"hang\" }},\n]\n",
        transcript.display().to_string(),
        transcript_line(),
        payload
    );
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), text).expect("scenario");
}

fn clawpool_json(s: &Setup, args: &[&str]) -> std::process::Output {
    s.sandbox
        .clawpool()
        .args(args)
        .args(["--output-format", "json"])
        .output()
        .expect("clawpool runs")
}

/// `file`'s content once `ready` holds for it, within [`PATIENCE`].
fn file_when(file: &Path, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if ready(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what}: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_lane_past_its_budget_mid_turn_is_interrupted_held_notified_once_and_refuses_send() {
    let s = setup();
    let notified = s.sandbox.dir.path().join("notified.jsonl");
    let transcript = s.sandbox.dir.path().join("transcript.jsonl");
    configure(&s, &notified);
    scenario(&s, &transcript);
    let packet = s.sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"name": "pricey", "agent": "scripted", "prompt": "work", "budget_usd": 0.01}"#,
    )
    .expect("packet");
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo);
    let mut run = clawpool_tests::LaneRun::start(cmd, &s.sandbox.dir.path().join("spawn.stderr"));

    let blocked = run.wait_for(
        "the lane held on its budget",
        PATIENCE,
        |e| e["kind"] == "lane.blocked" && e["to"]["subphase"] == "budget",
        String::new,
    );
    assert_eq!(blocked["evidence"]["rule"], "budget", "{blocked:#}");
    // Its next action comes with it.
    run.wait_for(
        "the escalation",
        PATIENCE,
        |e| e["kind"] == "lane.escalated",
        String::new,
    );
    // The agent's own interrupt ended its tool call mid-turn.
    let terminal = s.repo.join(".git/clawpool/lanes/pricey/terminal.log");
    file_when(&terminal, "the agent interrupted", |t| {
        t.contains("Interrupted")
    });

    let lane = s.lanes_dir().join("pricey");
    let state: Value = clawpool_tests::published_state(&lane);
    assert_eq!(state["lane_status"], "blocked", "{state:#}");
    assert_eq!(state["blocked"]["subphase"], "budget", "{state:#}");
    assert_eq!(state["budget_usd"], 0.01, "{state:#}");
    let cost = state["cost_usd"].as_f64().expect("cost_usd");
    assert!((cost - 0.03).abs() < 1e-12, "{state:#}");
    assert!(
        state["escalation"]["next_action"]
            .as_str()
            .is_some_and(|a| a.contains("raise the budget or stop it")),
        "{state:#}"
    );

    // No text spends past the budget.
    let lane_arg = lane.display().to_string();
    let send = clawpool_json(&s, &["send", &lane_arg, "keep going"]);
    assert!(!send.status.success(), "send was taken");
    let error: Value = serde_json::from_str(stderr(&send).trim()).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "lane_over_budget", "{error:#}");

    // The budget notification, once.
    let text = file_when(&notified, "the budget notification", |t| t.ends_with('\n'));
    let note: Value = serde_json::from_str(text.lines().next().expect("a line")).expect("JSON");
    assert_eq!(note["event"], "budget", "{note:#}");
    assert_eq!(note["lane"], "pricey");
    assert_eq!(note["subphase"], "budget");
    assert!((note["cost_usd"].as_f64().expect("cost_usd") - 0.03).abs() < 1e-12);

    // Raised, but not past what it cost: still held. Then stopped by a person: stopped, not
    // failed — and a follow-up to the stopped lane is refused too.
    let raised = clawpool_json(&s, &["budget", &lane_arg, "0.02"]);
    assert!(raised.status.success(), "{}", stderr(&raised));
    let verdict: Value = serde_json::from_slice(&raised.stdout).expect("JSON");
    assert!(
        verdict["reason"]
            .as_str()
            .is_some_and(|r| r.contains("still past it")),
        "{verdict:#}"
    );
    let bad = clawpool_json(&s, &["budget", &lane_arg, "-3"]);
    assert!(!bad.status.success());
    let stop = clawpool_json(&s, &["stop", &lane_arg]);
    assert!(stop.status.success(), "{}", stderr(&stop));
    run.wait_exit(PATIENCE);
    let state: Value = clawpool_tests::published_state(&lane);
    assert_eq!(state["lane_status"], "stopped", "{state:#}");
    assert_eq!(state["budget_usd"], 0.02, "{state:#}");
    let follow_up = s
        .sandbox
        .clawpool()
        .args([
            "send",
            &lane_arg,
            "keep going",
            "--output-format",
            "json",
            "--config",
        ])
        .arg(&s.config)
        .output()
        .expect("clawpool send");
    assert_eq!(follow_up.status.code(), Some(2), "{}", stderr(&follow_up));
    let error: Value = serde_json::from_str(stderr(&follow_up).trim()).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "over_budget", "{error:#}");
    let text = std::fs::read_to_string(&notified).expect("notified");
    let notes = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(notes, 1, "exactly one budget notification: {text}");
}

/// The real Claude Code 2.1.330 against the scripted model server (offline, as in
/// `real_agents.rs`): its model asks for a Bash `sleep 8` (Claude Code refuses a longer
/// standalone sleep); the lane reads the turn's usage
/// from the transcript when the tool starts (`PreToolUse`), prices it past the lane's budget
/// and presses Esc while the tool runs: the lane is held `blocked{budget}` long before the
/// tool would have ended, and the tool's end is never reported.
#[test]
fn claude_lane_past_its_budget_is_interrupted_in_its_long_tool_call() {
    use crate::real_agents::{
        assert_nothing_left, claude_env, finish, lanes_dir, plain_lane, screen_report, start_lane,
        wait_kind, write_config,
    };
    clawpool_tests::real_agent("claude");
    let sandbox = clawpool_tests::Sandbox::new();
    clawpool_tests::seed_claude_home(
        &sandbox.home(),
        serde_json::json!({"customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []}}),
    );
    let lane = plain_lane(&sandbox, "pricey");
    let mut server = clawpool_tests::ModelServer::start(
        &sandbox.dir.path().join("model"),
        &serde_json::json!([
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 8", "description": "Wait"}}},
            {"text": "Done waiting."}
        ]),
    );
    let config = write_config(
        &sandbox,
        Some(&lanes_dir(&sandbox)),
        "claude",
        "args = [\"--allowedTools\", \"Bash(sleep 8)\"]\n",
    );
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!(
        "\n[prices.{MODEL:?}]\ninput_per_mtok = 1000.0\noutput_per_mtok = 2000.0\nas_of = \"2026-11-01\"\n"
    ));
    std::fs::write(&config, text).expect("config");
    let mut env = claude_env(&sandbox, &server.url());
    env.push(format!("ANTHROPIC_MODEL={MODEL}"));
    let mut run = start_lane(&sandbox, &config, "claude", &lane, &env, "pty");
    // A budget no usage fits in, set before the agent's first answer.
    wait_kind(&mut run, &lane, "lane.started");
    let set = sandbox
        .clawpool()
        .args(["budget", "--output-format", "json"])
        .arg(&lane)
        .arg("0.000001")
        .output()
        .expect("clawpool budget");
    assert!(set.status.success(), "{}", stderr(&set));

    let blocked = run.wait_for(
        "the lane held on its budget",
        PATIENCE,
        |e| e["kind"] == "lane.blocked" && e["to"]["subphase"] == "budget",
        || screen_report(&lane),
    );
    assert_eq!(blocked["evidence"]["rule"], "budget", "{blocked:#}");
    // The tool's start is what had the usage read. The read records `lane.usage` itself, so
    // the budget's hold can be in the log before the handshake records the hook that started
    // it: the hook is looked for among the events on either side of the hold.
    let tool_started = |e: &Value| e["kind"] == "lane.hook" && e["detail"]["event"] == "PreToolUse";
    if !run.events().iter().any(tool_started) {
        run.wait_for("the PreToolUse hook", PATIENCE, tool_started, || {
            screen_report(&lane)
        });
    }
    // Claude Code took the Esc: the tool call was interrupted.
    let deadline = Instant::now() + PATIENCE;
    while !screen_report(&lane).contains("Interrupted") {
        assert!(Instant::now() < deadline, "{}", screen_report(&lane));
        std::thread::sleep(Duration::from_millis(100));
    }
    let stop = sandbox
        .clawpool()
        .args(["stop", "--output-format", "json"])
        .arg(&lane)
        .output()
        .expect("clawpool stop");
    assert!(stop.status.success(), "{}", stderr(&stop));
    let (_, outcome) = finish(&mut run, &lane);
    assert_eq!(outcome["state"]["status"], "stopped", "{outcome:#}");
    assert!(
        !run.events()
            .iter()
            .any(|e| e["kind"] == "lane.hook" && e["detail"]["event"] == "PostToolUse"),
        "the tool ran to its end: {}",
        run.report()
    );
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}
