//! Codex's app server as the lane's channel (`docs/events.md`, "Protocol facts"), with the
//! real Codex 0.169.0 against the scripted model server, offline, as in `real_agents.rs`: the
//! protocol decides prompt acceptance and the finish (the event's `source` says so), two
//! lanes' servers never cross, and the channel's first run loses no prompt — attached to its
//! app server the TUI shows no trust dialog, so clawpool's own trust gate is what holds an
//! untrusted lane, and its first prompt goes in once an operator trusts it. A lane adopted
//! after its supervisor was SIGKILLed reconnects to the app server that outlived it, and says
//! so when that server is gone. A lane whose app server does not start falls back to Codex's
//! notify program.

use clawpool_tests::{LaneRun, ModelServer, Sandbox, git_repo, real_agent, seed_codex_home};
use serde_json::{Value, json};

use crate::hooks::{state_file, transition_to};
use crate::real_agents::{
    PROMPT, assert_nothing_left, at_ms, codex_env, count_kind, finish, lanes_dir, launch_env,
    screen_report, start_lane, trust_lane, wait_kind, write_config, write_config_running,
};

/// A config tail (after the launch table) in which the screen's proof of acceptance waits 30 s
/// for the channel's report instead of 2 s: the tests that show the channel deciding must not
/// depend on how loaded the machine is, which can delay the report past the default grace.
pub(crate) const CHANNEL_DECIDES: &str = "\n[handshake]\nhook_grace_ms = 30000\n";

/// A Codex lane `name` in a new sandbox whose model serves `script`: trusted when
/// `trusted` (its lanes folder a trusted root), with `launch_extra` in its launch table.
fn start_codex(
    name: &str,
    script: Value,
    trusted: bool,
    launch_extra: &str,
) -> (Sandbox, std::path::PathBuf, ModelServer, LaneRun) {
    real_agent("codex");
    let sandbox = Sandbox::new();
    let lane = git_repo(&lanes_dir(&sandbox), name);
    let server = ModelServer::start(&sandbox.dir.path().join("model"), &script);
    seed_codex_home(&sandbox, &server.url(), "sk-fake");
    let root = trusted.then(|| lanes_dir(&sandbox));
    let config = write_config(&sandbox, root.as_deref(), "codex", launch_extra);
    let run = start_lane(
        &sandbox,
        &config,
        "codex",
        &lane,
        &codex_env(&sandbox),
        "pty",
    );
    (sandbox, lane, server, run)
}

/// The `lane.protocol` events.
fn protocol(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "lane.protocol")
        .collect()
}

/// Acceptance and finish came from the protocol: the thread turning active, then idle.
fn assert_decided_by_the_protocol(events: &[Value], report: &str) {
    let accepted = transition_to(events, "prompt_accepted");
    assert_eq!(accepted["source"], "protocol", "{report}");
    assert_eq!(accepted["evidence"]["region"], "protocol", "{report}");
    assert_eq!(accepted["evidence"]["matched"], "thread active", "{report}");
    assert_finished_by_the_protocol(events, report);
}

/// The finish came from the protocol: the lane's own thread turning idle.
fn assert_finished_by_the_protocol(events: &[Value], report: &str) {
    let finished = transition_to(events, "finished");
    assert_eq!(finished["source"], "protocol", "{report}");
    assert_eq!(
        finished["evidence"]["rule"], "thread/status/changed",
        "{report}"
    );
    assert_eq!(finished["evidence"]["matched"], "thread idle", "{report}");
}

/// The thread ids the lane's protocol events name.
fn threads(events: &[Value]) -> std::collections::BTreeSet<String> {
    protocol(events)
        .iter()
        .filter_map(|e| e["detail"]["thread_id"].as_str().map(str::to_owned))
        .collect()
}

/// The model the test's Codex configuration names (`clawpool_tests::seed_codex_home`).
const CODEX_MODEL: &str = "gpt-5";

#[test]
fn codex_protocol_decides_acceptance_and_the_finish() {
    let (sandbox, lane, mut server, mut run) = start_codex(
        "repo",
        json!([{"text": "Hello from the scripted model.", "delay_ms": 3000}]),
        true,
        CHANNEL_DECIDES,
    );
    let (code, outcome) = finish(&mut run, &lane);
    let events = run.events();
    let report = format!("{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(code, 0, "{report}");
    assert_eq!(outcome["state"]["status"], "finished", "{report}");

    // The channel was up before the agent started, and decided what it covers.
    let opened = events
        .iter()
        .position(|e| e["kind"] == "lane.channel.opened")
        .expect("lane.channel.opened");
    let started = events
        .iter()
        .position(|e| e["kind"] == "lane.started")
        .expect("lane.started");
    assert!(opened < started, "{report}");
    assert_eq!(events[opened]["detail"]["channel"], "codex_app_server");
    assert_decided_by_the_protocol(&events, &report);
    let stops = protocol(&events)
        .into_iter()
        .filter(|e| e["detail"]["means"] == "Stop")
        .count();
    assert_eq!(stops, 1, "{report}");
    // The lane rejoined the thread at its first turn: its items and usage came too.
    let usage = protocol(&events)
        .into_iter()
        .find(|e| e["detail"]["event"] == "thread/tokenUsage/updated")
        .unwrap_or_else(|| panic!("no token usage: {report}"));
    assert!(
        usage["detail"]["usage"]["total"]["outputTokens"].as_u64() > Some(0),
        "{usage}"
    );
    assert_eq!(threads(&events).len(), 1, "one thread: {report}");

    // Nothing of the first prompt was lost on the way: the model got it, once.
    let main = server.main_requests();
    assert_eq!(main.len(), 1, "{main:#?}");
    assert!(main[0]["body"].to_string().contains(PROMPT), "{main:#?}");

    let state = state_file(&lane);
    assert_eq!(state["hooks"]["channel"], "codex_app_server", "{state}");
    assert_eq!(state["hooks"]["degraded"], false, "{state}");
    assert_eq!(
        state["hooks"]["received"].as_u64(),
        Some(protocol(&events).len() as u64),
        "{state}"
    );
    // The turn's tokens, from Codex's running totals; `clawpool state` shows them.
    let usage = &state["usage"];
    assert_eq!(usage["source"], "codex_app_server", "{usage}");
    assert_eq!(usage["turns"], 1, "{usage}");
    assert_eq!(
        usage["total"]["output"], usage["last_turn"]["output"],
        "{usage}"
    );
    assert!(usage["total"]["output"].as_u64() > Some(0), "{usage}");
    // Priced: the thread's model from the lane's rejoining reply, at its shipped price.
    assert_eq!(usage["model"], CODEX_MODEL, "{usage}");
    assert_eq!(state["cost"]["priced_as"], CODEX_MODEL, "{state}");
    assert!(
        state["cost_usd"].as_f64().is_some_and(|usd| usd > 0.0),
        "{state}"
    );
    let shown = sandbox
        .clawpool_clean_env()
        .arg("state")
        .arg(&lane)
        .output()
        .expect("clawpool state");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("channel   codex_app_server"), "{shown}");
    assert!(shown.contains("tokens    "), "{shown}");
    // `clawpool explain` says which source decided, and what each said last.
    let explained = sandbox
        .clawpool_clean_env()
        .args(["explain", "--output-format", "json"])
        .arg(&lane)
        .output()
        .expect("clawpool explain");
    let explained: Value = serde_json::from_slice(&explained.stdout).expect("explain's JSON");
    let facts = &explained["facts"];
    assert_eq!(
        facts["state_decided_by"]["kind"], "lane.finished",
        "{facts}"
    );
    assert_eq!(facts["state_decided_by"]["source"], "protocol", "{facts}");
    assert_eq!(
        facts["sources"]["protocol"][0]["kind"], "lane.finished",
        "{facts}"
    );
    assert!(facts["sources"]["screen"].is_array(), "{facts}");
    // The lane's server went with the lane, its socket too.
    assert!(
        std::fs::symlink_metadata(lane.join(".claw/codex-app-server.sock")).is_err(),
        "the app server's socket is left"
    );
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// Two Codex lanes at once, each with its own app server and model: the quick one finishes
/// while the slow one still works, and each hears only its own thread.
#[test]
fn two_codex_lanes_hear_only_their_own_app_server() {
    let start = |name: &str, delay_ms: u64| {
        start_codex(
            name,
            json!([{"text": format!("Reply for {name}."), "delay_ms": delay_ms}]),
            true,
            "",
        )
    };
    let (slow_sandbox, slow, mut slow_server, mut slow_run) = start("slow", 10_000);
    let (quick_sandbox, quick, mut quick_server, mut quick_run) = start("quick", 0);
    // The slow lane's turn is under way before the quick one finishes.
    wait_kind(&mut slow_run, &slow, "lane.prompt_accepted");
    let (code, _) = finish(&mut quick_run, &quick);
    assert_eq!(code, 0, "{}", quick_run.report());
    let (code, _) = finish(&mut slow_run, &slow);
    assert_eq!(code, 0, "{}", slow_run.report());

    let quick_events = quick_run.events();
    let slow_events = slow_run.events();
    let reports = format!("{}\n{}", quick_run.report(), slow_run.report());
    // Which of the two lanes' acceptances the screen's echo wins over the thread turning active
    // depends on the machine's load (both are evidence of the same prompt); the finish has no
    // screen rival, and the other lane's idle thread must not be it.
    assert_finished_by_the_protocol(&quick_events, &reports);
    assert_finished_by_the_protocol(&slow_events, &reports);
    // The quick lane's idle thread did not finish the slow lane: it finished after its own
    // model's reply, which came 10 s after its prompt.
    let slow_finished = transition_to(&slow_events, "finished");
    let slow_accepted = transition_to(&slow_events, "prompt_accepted");
    assert!(
        at_ms(slow_finished) - at_ms(slow_accepted) >= 9_000,
        "{reports}"
    );
    assert!(
        at_ms(slow_finished) > at_ms(transition_to(&quick_events, "finished")),
        "{reports}"
    );
    // One thread each, not the same.
    let (quick_threads, slow_threads) = (threads(&quick_events), threads(&slow_events));
    assert_eq!(quick_threads.len(), 1, "{reports}");
    assert_eq!(slow_threads.len(), 1, "{reports}");
    assert!(quick_threads.is_disjoint(&slow_threads), "{reports}");
    for lane in [&quick, &slow] {
        let events = if lane == &quick {
            &quick_events
        } else {
            &slow_events
        };
        assert_eq!(
            state_file(lane)["hooks"]["received"].as_u64(),
            Some(protocol(events).len() as u64),
            "{reports}"
        );
    }
    drop((quick_run, slow_run));
    quick_server.stop();
    slow_server.stop();
    assert_nothing_left(&quick_sandbox);
    assert_nothing_left(&slow_sandbox);
}

/// A Codex lane outside the trusted roots: attached to its app server Codex 0.169.0 asks
/// nothing, so clawpool's own trust gate holds it — nothing typed, nothing reaches the model
/// — and once an operator trusts it the first prompt goes in, once, and the protocol reports
/// its turn. (Which side accepts and finishes it is not fixed: the escalation's watch is a run
/// of the handshake of its own, and the run after it did not see the thread start, so the
/// screen decides beside the channel there, as "Hook facts" says.)
#[test]
fn an_untrusted_codex_lane_is_held_at_the_gate_and_loses_no_prompt() {
    let (sandbox, lane, mut server, mut run) =
        start_codex("repo", json!([{"text": "Done."}]), false, "");
    let blocked = wait_kind(&mut run, &lane, "lane.blocked");
    assert_eq!(blocked["to"]["subphase"], "trust_prompt", "{blocked}");
    assert_eq!(
        blocked["evidence"]["rule"], "trust_gate",
        "the agent asked nothing; clawpool's gate held it: {blocked}"
    );
    let events = run.events();
    assert_eq!(
        count_kind(&events, "lane.prompt_typed"),
        0,
        "{}",
        run.report()
    );
    assert!(server.main_requests().is_empty());

    trust_lane(&sandbox, &lane);
    let (code, outcome) = finish(&mut run, &lane);
    let events = run.events();
    let report = format!("{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(code, 0, "{report}");
    assert_eq!(outcome["state"]["status"], "finished", "{report}");
    let trusted = events
        .iter()
        .position(|e| e["kind"] == "lane.trust_resolved")
        .expect("lane.trust_resolved");
    let reported: Vec<&Value> = events[trusted..]
        .iter()
        .filter(|e| e["kind"] == "lane.protocol")
        .map(|e| &e["detail"]["means"])
        .collect();
    for means in ["UserPromptSubmit", "Stop"] {
        assert!(reported.contains(&&json!(means)), "{means}: {report}");
    }
    let main = server.main_requests();
    assert_eq!(main.len(), 1, "{main:#?}");
    assert!(main[0]["body"].to_string().contains(PROMPT), "{main:#?}");
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// With the channel off (`hooks = "none"`), the same lane is the screen's alone: no channel,
/// no protocol events, and the finish waits for the idle screen.
#[test]
fn codex_with_the_channel_off_is_decided_by_its_screen() {
    let (sandbox, lane, mut server, mut run) = start_codex(
        "repo",
        json!([{"text": "Done."}]),
        true,
        "hooks = \"none\"\n",
    );
    let (code, _) = finish(&mut run, &lane);
    let events = run.events();
    assert_eq!(code, 0, "{}", run.report());
    assert!(protocol(&events).is_empty(), "{}", run.report());
    assert_eq!(transition_to(&events, "finished")["source"], "screen");
    let state = state_file(&lane);
    assert_eq!(state["hooks"]["channel"], Value::Null);
    assert!(state.get("usage").is_none(), "unknown is absent: {state}");
    assert!(std::fs::symlink_metadata(lane.join(".claw/codex-app-server.sock")).is_err());
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// The `lane.hook` events.
fn hook_reports(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["kind"] == "lane.hook").collect()
}

/// An app server that does not start (here: a Codex install whose `app-server` refuses to run,
/// a wrapper in front of the real 0.169.0): the lane says so before its agent starts and runs
/// the TUI on its own with its notify program, so the lane's channel is `codex_notify`; the
/// screen accepts the prompt, delivered once, and Codex's `agent-turn-complete` reaches the
/// lane and finishes it (`source: hook`) before the screen's idle could. `clawpool doctor`
/// names the lane and where to look.
#[test]
fn an_app_server_that_does_not_start_falls_back_to_codex_notify() {
    let codex = real_agent("codex");
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &json!([{"text": "Hello from the scripted model.", "delay_ms": 3000}]),
    );
    seed_codex_home(&sandbox, &server.url(), "sk-fake");
    let config = codex_config(&sandbox, &codex_without_app_server(&sandbox, &codex));
    let packet = sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        format!(r#"{{"lanes": [{{"name": "alpha", "agent": "codex", "prompt": {PROMPT:?}}}]}}"#),
    )
    .expect("packet");
    let spawn = sandbox
        .clawpool()
        .arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&repo)
        .output()
        .expect("clawpool spawn");
    let lane = repo.with_extension("lanes").join("alpha");
    let (events, log) = alpha_events(&repo);
    let report = format!(
        "{}{}\n{log}\n{}",
        String::from_utf8_lossy(&spawn.stdout),
        String::from_utf8_lossy(&spawn.stderr),
        screen_report(&lane)
    );
    assert!(spawn.status.success(), "{report}");

    // The app server's failure, then the fallback channel, both before the agent started.
    let position = |kind: &str| {
        events
            .iter()
            .position(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}: {report}"))
    };
    let (degraded, opened, started) = (
        position("lane.channel.degraded"),
        position("lane.channel.opened"),
        position("lane.started"),
    );
    let detail = &events[degraded]["detail"];
    assert_eq!(detail["channel"], "codex_app_server", "{detail}");
    assert_eq!(detail["event"], "start", "{detail}");
    assert!(
        detail["error"]
            .as_str()
            .is_some_and(|e| e.contains("exited")),
        "{detail}"
    );
    assert!(degraded < opened && opened < started, "{report}");
    assert_eq!(
        events[opened]["detail"]["channel"], "codex_notify",
        "{report}"
    );
    assert!(protocol(&events).is_empty(), "{report}");

    // The screen accepted; Codex's notification finished the turn.
    assert_eq!(
        transition_to(&events, "prompt_accepted")["source"],
        "screen",
        "{report}"
    );
    let finished = transition_to(&events, "finished");
    assert_eq!(finished["source"], "hook", "{report}");
    assert_eq!(
        finished["evidence"]["rule"], "agent-turn-complete",
        "{report}"
    );
    // Codex 0.169.0 notifies the end of its side turn naming the thread too, while the
    // lane's turn runs: quoting the prompt in a text of its own, it finished nothing.
    let reports = hook_reports(&events);
    assert_eq!(reports.len(), 2, "{report}");
    assert!(
        reports
            .iter()
            .all(|r| r["detail"]["event"] == "agent-turn-complete"),
        "{report}"
    );
    assert_ne!(
        reports[0]["detail"]["input_messages"],
        json!([PROMPT]),
        "{report}"
    );
    assert_eq!(
        reports[1]["detail"]["input_messages"],
        json!([PROMPT]),
        "{report}"
    );
    assert_eq!(
        reports[1]["detail"]["last_assistant_message"], "Hello from the scripted model.",
        "{report}"
    );
    assert!(at_ms(reports[0]) < at_ms(reports[1]), "{report}");
    assert_eq!(
        finished["seq"].as_u64(),
        reports[1]["seq"].as_u64().map(|seq| seq + 1),
        "{report}"
    );
    assert_eq!(count_kind(&events, "lane.finished"), 1, "{report}");
    let main = server.main_requests();
    assert_eq!(main.len(), 1, "{main:#?}");
    assert!(main[0]["body"].to_string().contains(PROMPT), "{main:#?}");

    // The lane says which channel it uses, and that the app server did not start.
    let state = state_file(&lane);
    assert_eq!(state["hooks"]["channel"], "codex_notify", "{state}");
    assert_eq!(state["hooks"]["received"], 2, "{state}");
    assert_eq!(
        state["hooks"]["last_event"], "agent-turn-complete",
        "{state}"
    );
    let doctor = sandbox
        .clawpool()
        .args(["doctor", "--output-format", "json", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&repo)
        .output()
        .expect("clawpool doctor");
    let doctor: Value = serde_json::from_slice(&doctor.stdout).expect("doctor's JSON");
    let check = doctor["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "lane alpha channel")
        .unwrap_or_else(|| panic!("no check for the lane's channel: {doctor:#}"));
    assert_eq!(check["ok"], false, "{check}");
    assert!(
        check["fix"]
            .as_str()
            .is_some_and(|f| f.contains("codex-app-server.log")),
        "{check}"
    );
    server.stop();
    assert_nothing_left(&sandbox);
}

/// The pids of the `codex app-server` processes listening on `lane`'s socket (Codex's Node
/// launcher and the server it runs).
fn app_servers_of(lane: &std::path::Path) -> Vec<u32> {
    let socket = lane.join(".claw/codex-app-server.sock");
    let socket = socket.display().to_string();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            args.contains(&&b"app-server"[..])
                && args
                    .iter()
                    .any(|arg| String::from_utf8_lossy(arg).ends_with(&socket))
        })
        .collect()
}

/// The channel a Codex lane reports on.
#[derive(Clone, Copy)]
enum CodexChannel {
    /// The lane's own app server.
    AppServer,
    /// The notify program, on an install whose app server does not start.
    Notify,
}

/// A `--config` file for Codex lanes in `sandbox`: its folder trusted, Codex started as
/// `command` with the sandbox's environment.
fn codex_config(sandbox: &Sandbox, command: &std::path::Path) -> std::path::PathBuf {
    write_config_running(
        sandbox,
        Some(sandbox.dir.path()),
        "codex",
        command,
        &launch_env(&codex_env(sandbox)),
    )
}

/// A wrapper of `codex` whose `app-server` fails to start, as on an install without one.
fn codex_without_app_server(sandbox: &Sandbox, codex: &std::path::Path) -> std::path::PathBuf {
    let wrapper = sandbox.dir.path().join("codex-without-app-server");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = app-server ]; then\n  echo 'no app server on this install' >&2\n  \
             exit 1\nfi\nexec {:?} \"$@\"\n",
            codex.display().to_string()
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("wrapper mode");
    wrapper
}

/// A Codex lane `alpha` on `channel`, spawned in tmux from a new sandbox's repository, its
/// model answering after `delay_ms`, and its supervisor SIGKILLed once the turn is under way
/// (the app server's thread active, or the screen working): the sandbox, the repository, the
/// lane's folder, the model and the config to adopt it with.
fn codex_lane_whose_supervisor_died_mid_turn(
    delay_ms: u64,
    channel: CodexChannel,
) -> (
    Sandbox,
    std::path::PathBuf,
    std::path::PathBuf,
    ModelServer,
    std::path::PathBuf,
) {
    let codex = real_agent("codex");
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &json!([{"text": "Hello after the adoption.", "delay_ms": delay_ms}]),
    );
    seed_codex_home(&sandbox, &server.url(), "sk-fake");
    let config = match channel {
        CodexChannel::AppServer => codex_config(&sandbox, &codex),
        CodexChannel::Notify => codex_config(&sandbox, &codex_without_app_server(&sandbox, &codex)),
    };
    let packet = sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"defaults": {"agent": "codex"}, "lanes": [{"name": "alpha", "prompt": "say hello"}]}"#,
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
    let lane = repo.with_extension("lanes").join("alpha");
    let mut run = LaneRun::start(spawn, &sandbox.dir.path().join("spawn.stderr"));
    run.wait_for(
        "the turn under way",
        std::time::Duration::from_secs(60),
        |e| match channel {
            CodexChannel::AppServer => {
                e["kind"] == "lane.protocol" && e["detail"]["means"] == "UserPromptSubmit"
            }
            CodexChannel::Notify => e["kind"] == "lane.running",
        },
        || screen_report(&lane),
    );
    run.signal(libc::SIGKILL);
    run.wait_exit(std::time::Duration::from_secs(60));
    (sandbox, repo, lane, server, config)
}

/// The event log of the lane `alpha` spawned in `repo`: its events, and its text for reports.
fn alpha_events(repo: &std::path::Path) -> (Vec<Value>, String) {
    let log = std::fs::read_to_string(repo.join(".git/clawpool/lanes/alpha/events.jsonl"))
        .expect("the lane's events");
    let events = log
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    (events, log)
}

/// Runs `clawpool adopt` on `repo` to its end: its output, the lane's events and a report of
/// them with its stderr and the lane's screen.
fn adopt(
    sandbox: &Sandbox,
    config: &std::path::Path,
    repo: &std::path::Path,
    lane: &std::path::Path,
) -> (std::process::Output, Vec<Value>, String) {
    let adopt = sandbox
        .clawpool()
        .args(["adopt", "--output-format", "json", "--config"])
        .arg(config)
        .arg("--repo")
        .arg(repo)
        .output()
        .expect("clawpool adopt");
    let (events, log) = alpha_events(repo);
    let report = format!(
        "{}\n{log}\n{}",
        String::from_utf8_lossy(&adopt.stderr),
        screen_report(lane)
    );
    (adopt, events, report)
}

/// A supervisor SIGKILLed while Codex works on its turn leaves the lane's app server running
/// (its own process group) with the TUI attached in tmux; `clawpool adopt` reconnects to it,
/// rejoins the TUI's thread (still active), and the turn's end reaches the adopter through
/// the protocol: the lane's finish is the protocol's. Once the lane is over, no app server of
/// the lane is left.
#[test]
fn an_adopted_codex_lane_reconnects_to_its_app_server() {
    // Long enough for the supervisor to be killed and the adopter to reconnect mid-turn.
    let (sandbox, repo, lane, mut server, config) =
        codex_lane_whose_supervisor_died_mid_turn(10_000, CodexChannel::AppServer);
    assert!(
        !app_servers_of(&lane).is_empty(),
        "the app server outlives its supervisor"
    );

    let (adopt, events, report) = adopt(&sandbox, &config, &repo, &lane);
    assert!(adopt.status.success(), "{report}");
    // The adopter reconnects, then takes the lane over.
    let reopened = events
        .iter()
        .position(|e| {
            e["kind"] == "lane.channel.opened"
                && e["detail"]["channel"] == "codex_app_server"
                && e["detail"]["adopted"] == true
        })
        .unwrap_or_else(|| panic!("the channel was not reopened: {report}"));
    let after = &events[reopened..];
    assert_eq!(after[1]["kind"], "lane.adopted", "{report}");
    // The TUI's thread, rejoined mid-turn, and its end heard through the protocol.
    let rejoined = protocol(after)
        .into_iter()
        .find(|e| e["detail"]["event"] == "thread/resume")
        .unwrap_or_else(|| panic!("the thread was not rejoined: {report}"));
    assert_eq!(rejoined["detail"]["status"], "active", "{report}");
    assert_eq!(
        threads(&events).len(),
        1,
        "the same thread before and after: {report}"
    );
    let finished = transition_to(after, "finished");
    assert_eq!(finished["source"], "protocol", "{report}");
    assert_eq!(finished["evidence"]["matched"], "thread idle", "{report}");
    assert!(
        !after.iter().any(|e| e["kind"] == "lane.channel.degraded"),
        "{report}"
    );
    // Nothing was asked of the model again.
    assert_eq!(server.main_requests().len(), 1, "{report}");
    // Signalled as the lane ended, the server exits on its own time: a few seconds for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut left = app_servers_of(&lane);
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = app_servers_of(&lane);
    }
    assert!(left.is_empty(), "app servers left: {left:?}");
    server.stop();
    assert_nothing_left(&sandbox);
}

/// The app server gone too when the lane is adopted: the adopter says so before it takes the
/// lane over (`lane.channel.degraded`, `event: adopt`, the screen deciding), and the lane is
/// driven on its screen alone. The TUI of a dead server counts its attempts to reconnect over
/// an idle input line: the lane is blocked on its provider (rule `server_lost`), never
/// finished, until a person stops it.
#[test]
fn an_adopted_codex_lane_whose_app_server_is_gone_is_blocked_not_finished() {
    let (sandbox, repo, lane, mut server, config) =
        codex_lane_whose_supervisor_died_mid_turn(3_000, CodexChannel::AppServer);
    for pid in app_servers_of(&lane) {
        // SAFETY: kill(2) on a process of this test's sandbox; no memory is involved.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }

    let mut adopt = sandbox.clawpool();
    adopt
        .args(["adopt", "--output-format", "json", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&repo);
    let mut run = LaneRun::start(adopt, &sandbox.dir.path().join("adopt.err"));
    let screen = || screen_report(&lane);
    let blocked = run.wait_for(
        "the lane blocked on its lost server",
        std::time::Duration::from_secs(60),
        |e| e["kind"] == "lane.blocked" && e["to"]["subphase"] == "provider",
        screen,
    );
    assert_eq!(
        blocked["evidence"]["rule"],
        "server_lost",
        "{}",
        run.report()
    );
    let stop = sandbox
        .clawpool()
        .args(["stop", "--output-format", "json"])
        .arg(&lane)
        .output()
        .expect("clawpool stop");
    assert_eq!(stop.status.code(), Some(0), "{}", run.report());
    let failed = run.wait_for(
        "the stopped lane's end",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.failed",
        screen,
    );
    assert_eq!(failed["to"]["failure"], "provider", "{}", run.report());
    run.wait_exit(std::time::Duration::from_secs(30));

    let (events, log) = alpha_events(&repo);
    let report = format!("{log}\n{}", screen_report(&lane));
    let lost = events
        .iter()
        .position(|e| e["kind"] == "lane.channel.degraded")
        .unwrap_or_else(|| panic!("no lane.channel.degraded: {report}"));
    let detail = &events[lost]["detail"];
    assert_eq!(detail["channel"], "codex_app_server", "{report}");
    assert_eq!(detail["event"], "adopt", "{report}");
    assert_eq!(detail["decides"], "screen", "{report}");
    assert!(
        detail["error"]
            .as_str()
            .is_some_and(|e| e.contains("codex-app-server.sock")),
        "{report}"
    );
    assert_eq!(events[lost + 1]["kind"], "lane.adopted", "{report}");
    assert!(
        !events.iter().any(|e| e["kind"] == "lane.finished"
            || (e["kind"] == "lane.channel.opened" && e["detail"]["adopted"] == true)),
        "{report}"
    );
    server.stop();
    assert_nothing_left(&sandbox);
}

/// A Codex lane on its notify channel whose supervisor was SIGKILLed mid-turn keeps the
/// channel when adopted: the TUI notifies with the token kept in the lane, the adopter records
/// the channel opened again (`adopted: true`, before `lane.adopted`) instead of looking for an
/// app server, and the turn's end finishes the lane (`source: hook`).
#[test]
fn an_adopted_codex_notify_lane_keeps_its_channel() {
    let (sandbox, repo, lane, mut server, config) =
        codex_lane_whose_supervisor_died_mid_turn(10_000, CodexChannel::Notify);
    let (adopt, events, report) = adopt(&sandbox, &config, &repo, &lane);
    assert!(adopt.status.success(), "{report}");
    let adopted = events
        .iter()
        .position(|e| e["kind"] == "lane.adopted")
        .unwrap_or_else(|| panic!("no lane.adopted: {report}"));
    let reopened = events
        .iter()
        .position(|e| e["kind"] == "lane.channel.opened" && e["detail"]["adopted"] == true)
        .unwrap_or_else(|| panic!("the channel was not opened again: {report}"));
    assert!(reopened < adopted, "{report}");
    assert_eq!(
        events[reopened]["detail"]["channel"], "codex_notify",
        "{report}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "lane.channel.degraded" && e["detail"]["event"] == "adopt"),
        "{report}"
    );
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "lane.finished")
        .collect();
    assert_eq!(finished.len(), 1, "{report}");
    assert_eq!(finished[0]["source"], "hook", "{report}");
    assert_eq!(
        finished[0]["evidence"]["rule"], "agent-turn-complete",
        "{report}"
    );
    server.stop();
    assert_nothing_left(&sandbox);
}
