//! Automatic recovery with the scripted agent: a stalled agent interrupted and nudged; one the
//! nudge does not move restarted with its resume option and nudged again; a stall that does
//! not heal escalated to a person and left blocked until they act; a crash loop restarted with
//! backoff until the restart intensity is used up; and a prompt misdelivered to a shell
//! restarted and delivered once more. Every attempt is checked in the lane's ledger and events.

use std::path::{Path, PathBuf};

use clawpool_tests::Sandbox;
use serde_json::Value;

use crate::handshake::{Lane, prompts_delivered, setup};

const DEFAULT_POLICY: &str = include_str!("../../docs/policy-defaults.toml");

/// The shipped policy with faster clocks: a stall after 2 s, a 1 s wait after the interrupt
/// and 2 s checks for progress after each nudge, restarts from 300 ms doubling.
fn fast_policy(sandbox: &Sandbox, config: &Path) -> PathBuf {
    use_policy(
        sandbox,
        config,
        DEFAULT_POLICY
            .replace("after = \"10m\"", "after = \"2s\"")
            .replace("initial = \"2s\"", "initial = \"300ms\"")
            + "\n[recipes.interrupt_and_nudge]\nwait = \"1s\"\nprogress_timeout = \"2s\"\n",
    )
}

/// Writes `policy` to a file named by the lane's config (a policy file replaces the defaults
/// as a whole, so the tests' policies start from them); returns the file.
fn use_policy(sandbox: &Sandbox, config: &Path, policy: String) -> PathBuf {
    let file = sandbox.dir.path().join("policy.toml");
    std::fs::write(&file, policy).expect("policy");
    let text = std::fs::read_to_string(config).expect("config");
    std::fs::write(
        config,
        format!("policy = {:?}\n{text}", file.display().to_string()),
    )
    .expect("config");
    file
}

fn state(repo: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(repo.join(".claw/worker-state.json")).expect("state file"),
    )
    .expect("state JSON")
}

/// The lane's state file once it holds `event` (it is written behind the event log).
fn state_at(repo: &Path, event: &Value) -> Value {
    clawpool_tests::state_file_at(
        &repo.join(".claw/worker-state.json"),
        event["seq"].as_u64().expect("the event's seq"),
        std::time::Duration::from_secs(30),
    )
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

#[test]
fn a_stalled_agent_is_interrupted_and_nudged_and_goes_on() {
    let sandbox = Sandbox::new();
    let scenario = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "hang" }]
[[prompt]]
steps = [{ do = "write_file", path = "done.txt", content = "done\n" }]
"#;
    let (repo, config) = setup(&sandbox, scenario, true, "");
    fast_policy(&sandbox, &config);
    let (code, _, events) = Lane::start(&sandbox, &repo, &config, "scripted", "work").finish();
    assert_eq!(code, 0, "{events:#?}");
    clawpool_tests::assert_kinds_in_order(
        &events,
        &[
            "lane.running",
            "lane.stalled",
            "lane.recovery.queued",
            "lane.recovery.running",
            "lane.prompt_round",
            "lane.prompt_accepted",
            "lane.recovery.succeeded",
        ],
    );
    let nudge = of_kind(&events, "lane.prompt_accepted")
        .last()
        .map(|e| e["evidence"]["matched"].to_string())
        .unwrap_or_default();
    assert!(nudge.contains("continue"), "the nudge was taken: {nudge}");
    assert!(
        repo.join("done.txt").exists(),
        "the agent went on after the nudge"
    );
    let prompts: Vec<Value> = std::fs::read_to_string(repo.join(".prompts.jsonl"))
        .expect("prompt log")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(prompts.len(), 2, "the prompt, then the nudge: {prompts:?}");
    let ledger = &state(&repo)["recovery"]["entries"];
    assert_eq!(ledger.as_array().map(Vec::len), Some(1), "{ledger}");
    assert_eq!(ledger[0]["recipe"], "interrupt_and_nudge");
    assert_eq!(ledger[0]["trigger"], "stalled");
    assert_eq!(ledger[0]["state"], "succeeded");
    assert!(ledger[0]["started_at"].is_u64() && ledger[0]["finished_at"].is_u64());
}

#[test]
fn a_stall_a_nudge_does_not_move_is_restarted_with_resume_and_nudged_again() {
    let sandbox = Sandbox::new();
    // The prompt hangs, so does the first nudge; the nudge after resuming gets the work done.
    let scenario = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "hang" }]
[[prompt]]
steps = [{ do = "hang" }]
[[prompt]]
steps = [{ do = "write_file", path = "done.txt", content = "done\n" }]
"#;
    let (repo, config) = setup(&sandbox, scenario, true, "");
    fast_policy(&sandbox, &config);
    let (code, _, events) = Lane::start(&sandbox, &repo, &config, "scripted", "work").finish();
    assert_eq!(code, 0, "{events:#?}");
    clawpool_tests::assert_kinds_in_order(
        &events,
        &[
            "lane.stalled",
            "lane.recovery.running",
            "lane.prompt_round",
            "lane.prompt_accepted",
            "lane.restarted",
            "lane.started",
            "lane.prompt_round",
            "lane.prompt_accepted",
            "lane.finished",
            "lane.recovery.succeeded",
        ],
    );
    let restarted = of_kind(&events, "lane.restarted");
    assert_eq!(restarted.len(), 1);
    assert_eq!(restarted[0]["detail"]["by"], "interrupt_and_nudge");
    assert_eq!(restarted[0]["detail"]["resume"], true);
    assert_eq!(
        restarted[0]["detail"]["redeliver_prompt"], false,
        "a resumed agent has the prompt already"
    );
    assert_eq!(
        prompts_delivered(&repo),
        3,
        "the prompt, the nudge, the nudge after resuming"
    );
    assert!(repo.join("done.txt").exists());
    let entries = &state(&repo)["recovery"]["entries"];
    assert_eq!(entries.as_array().map(Vec::len), Some(1), "{entries}");
    assert_eq!(entries[0]["state"], "succeeded");
    let result = entries[0]["result"].as_str().unwrap_or_default();
    assert!(
        result.starts_with("step 7 (wait_for_progress 2s): progress"),
        "the last check saw the progress: {result}"
    );
}

#[test]
fn a_stall_that_does_not_heal_is_escalated_and_left_blocked_for_a_person() {
    let sandbox = Sandbox::new();
    let scenario = "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"hang\" }]\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    fast_policy(&sandbox, &config);
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "work");
    let escalation = lane.wait_kind("lane.blocked");
    assert_eq!(escalation["to"]["subphase"], "stalled");
    assert!(
        escalation["detail"]["next_action"]
            .as_str()
            .is_some_and(|a| a.contains("clawpool stop")),
        "{escalation}"
    );
    // Escalated, the lane is still supervised: blocked, its worker alive, for a person.
    let doc = state_at(&repo, &escalation);
    assert_eq!(doc["lane_status"], "blocked");
    assert_eq!(doc["failure"]["class"], "stalled");
    let entries = doc["recovery"]["entries"].as_array().expect("entries");
    let states: Vec<&str> = entries
        .iter()
        .map(|e| e["state"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(states, ["failed", "exhausted"], "{doc}");
    let failed = entries[0]["result"].as_str().unwrap_or_default();
    assert!(
        failed.contains("no progress; the recipe's steps ran out"),
        "{failed}"
    );
    // The person is told, in the state file and by `clawpool state`, what to do.
    assert_eq!(doc["escalation"]["recipe"], "interrupt_and_nudge");
    assert!(
        doc["escalation"]["next_action"]
            .as_str()
            .is_some_and(|a| a.contains("clawpool stop")),
        "{doc}"
    );
    let shown = sandbox
        .clawpool()
        .arg("state")
        .arg(&repo)
        .output()
        .expect("clawpool state");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("next      ") && shown.contains("clawpool stop"),
        "{shown}"
    );
    let agent = doc["pid"].as_u64().expect("the worker's pid");
    assert!(
        Path::new(&format!("/proc/{agent}")).exists(),
        "the agent is alive"
    );

    // The person gives up on it.
    crate::handshake::control(&sandbox, &["stop"], &repo);
    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 1, "{events:#?}");
    assert_eq!(outcome["state"]["status"], "failed");
    assert_eq!(outcome["state"]["failure"], "stalled");
    assert_eq!(of_kind(&events, "lane.stalled").len(), 1);
    assert_eq!(of_kind(&events, "lane.restarted").len(), 1);
    assert_eq!(
        prompts_delivered(&repo),
        3,
        "the prompt, a nudge, a nudge after resuming: nothing more"
    );
    assert!(sandbox.leftover_processes().is_empty());
}

#[test]
fn a_crash_loop_is_restarted_with_backoff_until_the_intensity_is_used_up() {
    let sandbox = Sandbox::new();
    // It takes the prompt, works a little, and crashes.
    let scenario = "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"sleep\", ms = 300 }, { do = \"crash\", code = 3 }]\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    fast_policy(&sandbox, &config);
    let (code, outcome, events) =
        Lane::start(&sandbox, &repo, &config, "scripted", "work").finish();
    assert_eq!(code, 1);
    assert_eq!(outcome["state"]["failure"], "worker_crashed");
    // Three restarts (the intensity), the fourth crash is recovery exhausted.
    let restarted = of_kind(&events, "lane.restarted");
    assert_eq!(restarted.len(), 3, "{events:#?}");
    let failed = of_kind(&events, "lane.failed");
    assert_eq!(failed.len(), 4);
    // Each restart waits its backoff after the crash before it: 300 ms, 600 ms, 1200 ms.
    for (n, (crash, restart)) in failed.iter().zip(&restarted).enumerate() {
        let waited = restart["at_ms"].as_u64().unwrap_or(0) - crash["at_ms"].as_u64().unwrap_or(0);
        let backoff = 300 << n;
        assert!(
            waited >= backoff,
            "restart {} after {waited} ms, backoff {backoff} ms",
            n + 1
        );
    }
    assert_eq!(
        prompts_delivered(&repo),
        4,
        "the prompt delivered again to every worker"
    );
    let escalated = of_kind(&events, "lane.escalated");
    assert!(
        escalated.iter().any(|e| e["detail"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("recovery_exhausted")),
        "{escalated:?}"
    );
    let doc = state(&repo);
    let entries = doc["recovery"]["entries"].as_array().expect("entries");
    let states: Vec<&str> = entries
        .iter()
        .map(|e| e["state"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(states, ["failed", "failed", "failed", "exhausted"], "{doc}");
    assert_eq!(
        doc["recovery"]["restart"]["restarts"]
            .as_array()
            .map(Vec::len),
        Some(3),
        "{doc}"
    );
    assert!(
        sandbox.leftover_processes().is_empty(),
        "nothing restarted after exhaustion"
    );
}

#[test]
fn a_notify_rule_runs_its_hook_once_when_the_lane_gets_where_it_matches() {
    let sandbox = Sandbox::new();
    let scenario =
        "[[prompt]]\nsteps = [{ do = \"sleep\", ms = 300 }, { do = \"crash\", code = 3 }]\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let policy = fast_policy(&sandbox, &config);
    let pages = sandbox.dir.path().join("pages.jsonl");
    let text = std::fs::read_to_string(&policy).expect("policy");
    let first_rule = text.find("[[rules]]").expect("a rule");
    let text = format!(
        "{}[[hooks]]\nname = \"pager\"\ncommand = [\"sh\", \"-c\", \"cat >> {}; echo >> {}\"]\n\n\
         [[rules]]\nname = \"page-on-exhaustion\"\nwhen = {{ recovery = \"exhausted\" }}\n\
         then = {{ action = \"notify\", hook = \"pager\" }}\n\n{}",
        &text[..first_rule],
        pages.display(),
        pages.display(),
        &text[first_rule..]
    );
    std::fs::write(&policy, text).expect("policy");
    let (code, _, events) = Lane::start(&sandbox, &repo, &config, "scripted", "work").finish();
    assert_eq!(code, 1, "{events:#?}");
    assert_eq!(of_kind(&events, "lane.restarted").len(), 3);
    // One page, for the exhausted lane, though the lane was looked at after every crash.
    let pages: Vec<Value> = std::fs::read_to_string(&pages)
        .expect("the pager ran")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(pages.len(), 1, "{pages:#?}");
    assert_eq!(pages[0]["rule"], "page-on-exhaustion");
    assert_eq!(pages[0]["facts"]["recovery"], "exhausted");
    assert_eq!(pages[0]["facts"]["status"], "failed");
    assert_eq!(pages[0]["facts"]["failure"], "worker_crashed");
    let log = std::fs::read_to_string(repo.join(".claw/hooks.log")).expect("hooks.log");
    let run: Value = serde_json::from_str(log.lines().next().expect("a run")).expect("JSON");
    assert_eq!(run["hook"], "pager");
    assert_eq!(run["event"], "notify page-on-exhaustion");
    assert_eq!(run["outcome"], "succeeded");
}

#[test]
fn a_prompt_misdelivered_to_a_shell_is_delivered_once_more_to_a_restarted_worker() {
    let sandbox = Sandbox::new();
    // The first worker turns into a shell when the prompt arrives; the second works.
    let scenario_dir = sandbox.dir.path();
    std::fs::write(
        scenario_dir.join("shell.toml"),
        "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"shell_error\" }]\n",
    )
    .expect("scenario");
    std::fs::write(
        scenario_dir.join("work.toml"),
        "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"write_file\", path = \"done.txt\", content = \"done\\n\" }]\n",
    )
    .expect("scenario");
    let marker = scenario_dir.join("first-run-done");
    let agent = clawpool_tests::workspace_bin("clawpool-scripted-agent");
    let script = scenario_dir.join("flaky-agent.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ -e {m} ]; then exec {a} --scenario {w}; else touch {m}; exec {a} --scenario {s}; fi\n",
            m = marker.display(),
            a = agent.display(),
            w = scenario_dir.join("work.toml").display(),
            s = scenario_dir.join("shell.toml").display(),
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let (repo, config) = setup(&sandbox, "", true, "");
    // The scripted profile, launched through the wrapper.
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text.replace(
        &format!("{:?}", agent.display().to_string()),
        &format!("{:?}", script.display().to_string()),
    );
    std::fs::write(&config, text).expect("config");
    fast_policy(&sandbox, &config);
    let (code, _, events) = Lane::start(&sandbox, &repo, &config, "scripted", "fix it").finish();
    assert_eq!(code, 0, "{events:#?}");
    assert_eq!(of_kind(&events, "lane.prompt_misdelivery").len(), 1);
    let restarted = of_kind(&events, "lane.restarted");
    assert_eq!(restarted.len(), 1);
    assert_eq!(restarted[0]["detail"]["by"], "restart_after_misdelivery");
    assert_eq!(restarted[0]["detail"]["redeliver_prompt"], true);
    assert_eq!(
        prompts_delivered(&repo),
        2,
        "once to each worker, never to the shell"
    );
    assert!(repo.join("done.txt").exists());
    let sent = of_kind(&events, "lane.prompt_sent");
    assert_eq!(
        sent.last().map(|e| e["detail"]["attempt"].clone()),
        Some(2.into())
    );
    let doc = state(&repo);
    assert_eq!(doc["status"], "finished");
    assert_eq!(
        doc["recovery"]["entries"][0]["recipe"],
        "restart_after_misdelivery"
    );
    assert_eq!(doc["recovery"]["entries"][0]["state"], "succeeded");
}

/// A lane whose agent shows provider retries for `attempts` seconds, then writes a file; the
/// lane blocks on its provider after 1 s of retries.
fn provider_down_lane(sandbox: &Sandbox, attempts: u32) -> (PathBuf, PathBuf) {
    let (repo, config) = setup(sandbox, &provider_down_for(attempts), true, "");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace("[handshake]\n", "[handshake]\nprovider_block_secs = 1\n"),
    )
    .expect("config");
    (repo, config)
}

/// Retries shown for `attempts` seconds, then the work: a file written.
fn provider_down_for(attempts: u32) -> String {
    format!(
        "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{{ do = \"provider_down\", attempts = {attempts}, every_ms = 1000 }}, {{ do = \"write_file\", path = \"done.txt\", content = \"done\\n\" }}]\n"
    )
}

#[test]
fn a_provider_that_comes_back_while_the_lane_waits_lets_it_finish() {
    let sandbox = Sandbox::new();
    let (repo, config) = provider_down_lane(&sandbox, 4);
    fast_policy(&sandbox, &config);
    let (code, _, events) = Lane::start(&sandbox, &repo, &config, "scripted", "work").finish();
    assert_eq!(code, 0, "{events:#?}");
    clawpool_tests::assert_kinds_in_order(
        &events,
        &[
            "lane.running",
            "lane.blocked",
            "lane.recovery.queued",
            "lane.recovery.running",
            "lane.recovery.succeeded",
            "lane.finished",
        ],
    );
    let blocked = of_kind(&events, "lane.blocked");
    assert_eq!(blocked.len(), 1, "{blocked:#?}");
    assert_eq!(blocked[0]["to"]["subphase"], "provider");
    assert!(of_kind(&events, "lane.escalated").is_empty());
    assert!(repo.join("done.txt").exists());
    assert_eq!(
        prompts_delivered(&repo),
        1,
        "nothing typed while it retried"
    );
    let entries = &state(&repo)["recovery"]["entries"];
    assert_eq!(entries.as_array().map(Vec::len), Some(1), "{entries}");
    assert_eq!(entries[0]["recipe"], "wait_for_provider");
    assert_eq!(entries[0]["trigger"], "provider_down");
    assert_eq!(entries[0]["state"], "succeeded");
}

#[test]
fn a_provider_down_past_the_wait_is_escalated_and_the_lane_resumes_when_it_is_back() {
    let sandbox = Sandbox::new();
    let (repo, config) = provider_down_lane(&sandbox, 8);
    let policy = fast_policy(&sandbox, &config);
    let text = std::fs::read_to_string(&policy).expect("policy");
    std::fs::write(
        &policy,
        text + "\n[recipes.wait_for_provider]\nprogress_timeout = \"2s\"\n",
    )
    .expect("policy");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "work");
    // The wait is over and the provider still down: the attempt fails by escalating.
    let escalated = lane.wait_kind("lane.recovery.failed");
    assert_eq!(escalated["detail"]["recipe"], "wait_for_provider");
    let doc = state(&repo);
    assert_eq!(doc["lane_status"], "blocked");
    assert_eq!(doc["blocked"]["subphase"], "provider");
    assert_eq!(doc["failure"]["class"], "provider");
    let (code, _, events) = lane.finish();
    assert_eq!(
        code, 0,
        "the lane went on once the provider was back: {events:#?}"
    );
    let blocked = of_kind(&events, "lane.blocked");
    let escalation = blocked
        .iter()
        .find(|e| e["detail"]["recipe"] == "wait_for_provider")
        .expect("the escalation");
    assert!(
        escalation["detail"]["next_action"].is_string(),
        "{escalation}"
    );
    assert!(repo.join("done.txt").exists());
    let entries = state(&repo)["recovery"]["entries"].clone();
    let states: Vec<&str> = entries
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["state"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(states, ["failed"], "{entries}");
    assert!(
        entries[0]["result"]
            .as_str()
            .is_some_and(|r| r.contains("escalated")),
        "{entries}"
    );
}

/// The shipped policy with a stall after 2 s and a long wait after the interrupt, so a test
/// can kill the supervisor in the middle of the attempt. The "interrupt" is a key the scripted
/// agent ignores while working (Up), so the agent still works when the supervisor dies.
fn slow_nudge_policy(sandbox: &Sandbox, config: &Path) {
    use_policy(
        sandbox,
        config,
        DEFAULT_POLICY.replace("after = \"10m\"", "after = \"2s\"")
            + "\n[recipes.interrupt_and_nudge]\ninterrupt_key = \"Up\"\nwait = \"30s\"\nprogress_timeout = \"2s\"\n",
    );
}

#[test]
fn an_attempt_under_way_when_the_supervisor_dies_is_neither_lost_nor_repeated() {
    use crate::spawn::{setup as spawn_setup, stderr};
    let s = spawn_setup();
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"hang\" }]\n",
    )
    .expect("scenario");
    slow_nudge_policy(&s.sandbox, &s.config);
    let packet = s.sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"name": "stuck", "agent": "scripted", "prompt": "work"}"#,
    )
    .expect("packet");
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&packet)
        .args(["--transport", "tmux", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo);
    let mut first = clawpool_tests::LaneRun::start(cmd, &s.sandbox.dir.path().join("first.stderr"));
    // Stalled; the interrupt is sent and the recipe waits 30 s before its nudge.
    let attempt = first.wait_for(
        "the attempt running",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.recovery.running",
        String::new,
    );
    // Killed once the state file holds the attempt (it is written behind the event log).
    let lane = s.lanes_dir().join("stuck");
    state_at(&lane, &attempt);
    first.signal(libc::SIGKILL);
    first.wait_exit(std::time::Duration::from_secs(10));
    assert_eq!(state(&lane)["recovery"]["entries"][0]["state"], "running");

    let mut cmd = s.sandbox.clawpool();
    cmd.args(["adopt", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo);
    let mut second =
        clawpool_tests::LaneRun::start(cmd, &s.sandbox.dir.path().join("second.stderr"));
    // The new supervisor closes the attempt it found under way, and when the lane stalls
    // again the recipe's one attempt in the hour is used: escalated, not carried out again.
    let closed = second.wait_for(
        "the interrupted attempt closed",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.recovery.failed",
        String::new,
    );
    assert!(
        closed["detail"]["result"]
            .as_str()
            .is_some_and(|r| r.contains("interrupted")),
        "{closed}"
    );
    second.wait_for(
        "the recipe used up",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.recovery.exhausted",
        String::new,
    );
    // The escalation that follows (the lane blocked with the next action) is what the board
    // shows.
    second.wait_for(
        "the escalation",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.blocked" && e["detail"]["next_action"].is_string(),
        String::new,
    );
    // The board says what a person should do. It reads the lane's state file, which is
    // written just after the event (a write no event announces): read until it shows it.
    let says_what_to_do = |board: &str| {
        board.contains("stuck: ") && board.contains("    next: ") && board.contains("clawpool stop")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let board = s
            .sandbox
            .clawpool()
            .arg("board")
            .current_dir(&s.repo)
            .output()
            .expect("clawpool board");
        let board = String::from_utf8_lossy(&board.stdout).into_owned();
        if says_what_to_do(&board) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{board}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stop = s
        .sandbox
        .clawpool()
        .args(["stop", "stuck"])
        .current_dir(&s.repo)
        .output()
        .expect("clawpool stop");
    assert!(stop.status.success(), "{}", stderr(&stop));
    second.wait_exit(std::time::Duration::from_secs(30));

    let doc = state(&lane);
    let states: Vec<&str> = doc["recovery"]["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["state"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(states, ["failed", "exhausted"], "{doc}");
    assert_eq!(
        prompts_delivered(&lane),
        1,
        "the nudge the first supervisor was waiting to send was never sent"
    );
    let events: Vec<Value> =
        std::fs::read_to_string(s.repo.join(".git/clawpool/lanes/stuck/events.jsonl"))
            .expect("events")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
    let adopted = events
        .iter()
        .position(|e| e["kind"] == "lane.adopted")
        .expect("adopted");
    assert!(
        !events[adopted..]
            .iter()
            .any(|e| e["kind"] == "lane.prompt_typed" || e["kind"] == "lane.recovery.running"),
        "nothing typed, no attempt carried out after the adoption"
    );
    assert!(s.sandbox.leftover_processes().is_empty());
}

#[test]
fn files_the_agent_writes_are_progress_even_when_its_screen_shows_nothing_new() {
    let sandbox = Sandbox::new();
    let scenario = "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"hang\" }]\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    fast_policy(&sandbox, &config);
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "work");
    lane.wait_kind("lane.running");
    // The agent's spinner turns and its timer counts, nothing else on screen: what a quiet
    // tool writing files looks like. Files change in the worktree for 5 s, past the 2 s stall
    // time twice over.
    let mut last_write = 0;
    for n in 0..10 {
        std::fs::write(repo.join("build.log"), format!("step {n}\n")).expect("write");
        last_write = clawpool_tests::now_ms();
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // Once the writes stop, the lane stalls: 2 s after the last one, not before.
    let stalled = lane.wait_kind("lane.stalled");
    let at = stalled["at_ms"].as_u64().expect("at_ms");
    assert!(
        at >= last_write + 1000,
        "stalled {} ms after the last write",
        at.saturating_sub(last_write)
    );
    crate::handshake::control(&sandbox, &["stop"], &repo);
    let (code, _, _) = lane.finish();
    assert_eq!(code, 1);
}

#[test]
fn a_prompt_not_taken_is_submitted_once_more_and_never_typed_again() {
    let sandbox = Sandbox::new();
    // The agent swallows the first Enter; the handshake may press it only once, so the lane
    // blocks on prompt delivery and recovery presses Enter again.
    let scenario = "prompt_log = \".prompts.jsonl\"\nignore_first_enter = true\n[[prompt]]\nsteps = [{ do = \"write_file\", path = \"done.txt\", content = \"done\\n\" }]\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace("[handshake]\n", "[handshake]\nmax_submit_attempts = 1\n"),
    )
    .expect("config");
    fast_policy(&sandbox, &config);
    let (code, _, events) = Lane::start(&sandbox, &repo, &config, "scripted", "work").finish();
    assert_eq!(code, 0, "{events:#?}");
    clawpool_tests::assert_kinds_in_order(
        &events,
        &[
            "lane.prompt_typed",
            "lane.prompt_sent",
            "lane.blocked",
            "lane.recovery.running",
            "lane.prompt_sent",
            "lane.prompt_accepted",
            "lane.finished",
            "lane.recovery.succeeded",
        ],
    );
    let blocked = of_kind(&events, "lane.blocked");
    assert_eq!(blocked[0]["to"]["subphase"], "prompt_delivery");
    assert_eq!(
        of_kind(&events, "lane.prompt_typed").len(),
        1,
        "never retyped"
    );
    assert_eq!(of_kind(&events, "lane.restarted").len(), 0);
    let resent = of_kind(&events, "lane.prompt_sent");
    assert_eq!(resent[1]["detail"]["attempt"], 2);
    assert_eq!(resent[1]["detail"]["by"], "resubmit_prompt");
    assert_eq!(prompts_delivered(&repo), 1);
    assert!(repo.join("done.txt").exists());
    let entries = &state(&repo)["recovery"]["entries"];
    assert_eq!(entries.as_array().map(Vec::len), Some(1), "{entries}");
    assert_eq!(entries[0]["recipe"], "resubmit_prompt");
    assert_eq!(entries[0]["state"], "succeeded");
}
