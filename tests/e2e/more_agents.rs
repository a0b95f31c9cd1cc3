//! `clawpool run` driving real agents fully offline against the scripted model server, from a
//! scratch HOME inside the test's sandbox, set up as docs/real-agents.md describes:
//! gemini-cli 0.61.0 through the server's Gemini API (`GOOGLE_GEMINI_BASE_URL`, a fake
//! `GEMINI_API_KEY`), opencode 1.18.33 and Qwen Code 0.24.4 through its Chat Completions API
//! (an OpenAI-compatible provider in opencode's config; `OPENAI_BASE_URL` for Qwen Code, run by
//! the pinned Node 22 in `.agents/`), aider 0.86.2 (its OpenAI base URL; aider offers no
//! tools, so the scripted reply is a whole-file listing and the server counts every request as
//! a task request), and claw 0.1.3 (built from claw-code's pinned source; its Anthropic base
//! URL).
//!
//! The agents are installed by `scripts/install-agents.sh` (CI runs it); without them these
//! tests fail and say so. Events are read from clawpool's stdout as they come; the only fixed
//! wait is the "nothing is typed for N seconds" window of the untrusted lanes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_pty::TermSize;
use clawpool_tests::{
    LaneRun, ModelServer, Sandbox, TRUSTED_BOOT_TO_FINISHED, agent_path, agents_dir,
    assert_kinds_in_order, git_repo, real_agent, transitions,
};
use serde_json::{Value, json};

/// How long any one awaited event may take: a real agent's boot is seconds of CPU on two
/// shared cores.
const PATIENCE: Duration = Duration::from_secs(60);

const PROMPT: &str = "create a file named hello.txt containing hi";

/// A git repository as the lane (gemini-cli asks about folder trust in any folder), canonical
/// as clawpool and the agent see it.
fn repo_lane(sandbox: &Sandbox, name: &str) -> PathBuf {
    let lanes = sandbox.dir.path().join("lanes");
    std::fs::create_dir_all(&lanes).expect("lanes folder");
    git_repo(&lanes.canonicalize().expect("canonical lanes"), name)
}

/// gemini-cli's settings with the API-key login chosen, so its auth chooser and key entry
/// box never show (docs/real-agents.md); no folder is trusted.
fn seed_gemini_home(home: &Path) {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("~/.gemini");
    std::fs::write(
        dir.join("settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    )
    .expect("settings.json");
}

fn gemini_env(sandbox: &Sandbox, base_url: &str) -> Vec<String> {
    vec![
        "GEMINI_API_KEY=fake-gemini-key".into(),
        format!("GOOGLE_GEMINI_BASE_URL={base_url}"),
        format!("HOME={}", sandbox.home().display()),
        format!("PATH={}", agent_path()),
        "TERM=xterm-256color".into(),
    ]
}

/// How a trusted lane gets past gemini-cli's trust question.
#[derive(Clone, Copy)]
enum TrustBy {
    /// clawpool records the lane in `~/.gemini/trustedFolders.json` before launch (the
    /// profile's `trust_store = "gemini"`).
    PreSeeding,
    /// Pre-seeding off (`trust_store = "none"`): gemini-cli asks, and clawpool answers.
    AnsweringTheDialog,
}

/// A `--config` file pointing the gemini profile at the installed binary, with the lane's
/// parent folder trusted when `trusted_root` is given.
fn write_config(sandbox: &Sandbox, trusted_root: Option<&Path>, trust_by: TrustBy) -> PathBuf {
    let roots = trusted_root
        .map(|root| format!("trusted_roots = [{:?}]\n", root.display().to_string()))
        .unwrap_or_default();
    let store = match trust_by {
        TrustBy::PreSeeding => "",
        TrustBy::AnsweringTheDialog => "trust_store = \"none\"\n",
    };
    let text = format!(
        "{roots}\n[profiles.gemini.launch]\ncommand = {:?}\n{store}",
        real_agent("gemini").display().to_string()
    );
    let path = sandbox.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("config file");
    path
}

fn hello_script(lane: &Path) -> Value {
    json!([
        {"tool_use": {"name": "write_file", "input": {
            "file_path": lane.join("hello.txt").display().to_string(),
            "content": "hi"
        }}},
        {"text": "Done. Created hello.txt."}
    ])
}

fn start_lane(
    sandbox: &Sandbox,
    config: &Path,
    lane: &Path,
    server: &ModelServer,
    size: Option<&str>,
) -> LaneRun {
    let mut cmd = sandbox.clawpool_clean_env();
    cmd.args(["run", "--output-format", "json", "--agent", "gemini"])
        .args(["--transport", "tmux", "--config"])
        .arg(config)
        .arg("--cwd")
        .arg(lane)
        .args(["--prompt", PROMPT]);
    if let Some(size) = size {
        cmd.args(["--size", size]);
    }
    for var in gemini_env(sandbox, &server.url()) {
        cmd.arg("--env").arg(var);
    }
    LaneRun::start(cmd, &sandbox.dir.path().join("clawpool.stderr"))
}

fn screen_report(lane: &Path, size: TermSize) -> String {
    let bytes = std::fs::read(lane.join(".claw/terminal.log")).unwrap_or_default();
    let text = clawpool_pty::replay::final_screen(&bytes, size).text();
    let rows: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    format!("the agent's screen:\n{}", rows.join("\n"))
}

/// A model server that closes every connection without an answer: the provider is down.
fn refusing_provider_script() -> Value {
    json!([{"refuse": true, "repeat": 1000}])
}

/// Adds a `[handshake]` table to a `--config` file: the provider's retry text on screen for
/// 3 s makes the lane blocked on the provider (10 s by default), so a test takes seconds.
fn block_on_the_provider_after_3s(config: &Path) {
    let text = std::fs::read_to_string(config).expect("config file");
    std::fs::write(
        config,
        format!("{text}\n[handshake]\nprovider_block_secs = 3\n"),
    )
    .expect("config file");
}

/// Waits for a lane whose provider refuses every request to settle, and checks it is
/// `blocked{provider}` on the profile's `rule` (never `finished`), the agent having taken the
/// prompt and tried the provider with it.
fn assert_blocked_on_the_provider(
    run: &mut LaneRun,
    lane: &Path,
    term: TermSize,
    server: &ModelServer,
    rule: &str,
) {
    let report = || screen_report(lane, term);
    // Qwen Code takes ~4 min to give up (docs/real-agents.md); the others block in seconds.
    let settled = run.wait_for(
        "lane.blocked",
        Duration::from_secs(420),
        |e| {
            matches!(
                e["kind"].as_str(),
                Some("lane.blocked" | "lane.finished" | "lane.failed")
            )
        },
        report,
    );
    assert_eq!(
        settled["kind"],
        "lane.blocked",
        "{}\n{}",
        run.report(),
        report()
    );
    assert_eq!(settled["to"]["subphase"], "provider", "{}", run.report());
    assert_eq!(settled["evidence"]["rule"], rule, "{}", run.report());
    assert_eq!(
        transitions(&run.events()),
        [
            "spawning",
            "ready_for_prompt",
            "prompt_accepted",
            "running",
            "blocked/provider"
        ],
        "{}",
        run.report()
    );
    let refused = server.main_requests();
    assert!(!refused.is_empty(), "the agent never tried the provider");
    assert!(
        refused[0]["body"].to_string().contains(PROMPT),
        "{:#?}",
        refused[0]
    );
}

/// Ctrl-C to a lane blocked on the provider: clawpool stops the agent and exits 130, and the
/// lane was never `finished`.
fn interrupt_the_blocked_lane(mut run: LaneRun) {
    run.signal(libc::SIGINT);
    let status = run.wait_exit(PATIENCE);
    assert_eq!(status.code(), Some(130), "{}", run.report());
    assert!(
        !run.events().iter().any(|e| e["kind"] == "lane.finished"),
        "{}",
        run.report()
    );
}

/// gemini-cli's trusted-folders file, as an object (empty when there is none).
fn trusted_folders(sandbox: &Sandbox) -> Value {
    std::fs::read_to_string(sandbox.home().join(".gemini/trustedFolders.json"))
        .map(|text| serde_json::from_str(&text).expect("trustedFolders.json is JSON"))
        .unwrap_or_else(|_| json!({}))
}

/// Runs a trusted lane to its outcome and checks it finished its scripted task with one
/// delivery: the prompt typed once, reaching the model once, and the file written by the
/// agent's own tool. Either way, gemini-cli's store then trusts the lane and nothing else.
fn trusted_lane_finishes(size: Option<&str>, term: TermSize, trust_by: TrustBy) {
    real_agent("gemini");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "alpha");
    let mut server = ModelServer::start(&sandbox.dir.path().join("model"), &hello_script(&lane));
    seed_gemini_home(&sandbox.home());
    let config = write_config(&sandbox, lane.parent(), trust_by);

    let mut run = start_lane(&sandbox, &config, &lane, &server, size);
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        || screen_report(&lane, term),
    );
    let status = run.wait_exit(PATIENCE);
    let events = run.events();
    assert_eq!(
        status.code(),
        Some(0),
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    let outcome = &outcome["outcome"];
    assert_eq!(
        outcome["state"]["status"],
        "finished",
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    assert_eq!(outcome["receipt"]["attempts"], 1, "{}", run.report());
    match trust_by {
        TrustBy::AnsweringTheDialog => {
            // gemini-cli 0.61.0 can save the answer and lose the relaunch that applies it
            // (more often the busier the machine): clawpool then restarts it once, and the new
            // worker starts trusted from the store. Either way, one delivery.
            let restarts: Vec<&Value> = events
                .iter()
                .filter(|e| e["kind"] == "lane.restart_requested")
                .collect();
            let expected: &[&str] = match restarts.as_slice() {
                [] => &[
                    "spawning",
                    "trust_required",
                    "ready_for_prompt",
                    "prompt_accepted",
                    "running",
                    "finished",
                ],
                [restart] => {
                    assert_eq!(restart["detail"]["by"], "trust_not_applied", "{restart}");
                    assert_eq!(
                        restart["evidence"]["rule"], "folder_not_trusted_yet",
                        "{restart}"
                    );
                    &[
                        "spawning",
                        "trust_required",
                        "spawning",
                        "ready_for_prompt",
                        "prompt_accepted",
                        "running",
                        "finished",
                    ]
                }
                more => panic!("restarted {} times: {}", more.len(), run.report()),
            };
            assert_eq!(transitions(&events), expected, "{}", run.report());
            assert_kinds_in_order(&events, TRUSTED_BOOT_TO_FINISHED);
            // The live box is answered first, and completely. Between gemini-cli's old process
            // exiting and its new one drawing, the old box is left last on screen, identical to
            // the live one (docs/real-agents.md): a further attempt on it can follow, and its
            // Enter lands on an empty input line or nowhere. Not yet told apart (known gap).
            let answers: Vec<&Value> = events
                .iter()
                .filter(|e| e["kind"] == "lane.dialog_answered")
                .collect();
            assert!(answers.iter().all(|a| a["detail"]["dialog"] == "trust"));
            assert_eq!(answers[0]["detail"]["completed"], true, "{}", run.report());
        }
        TrustBy::PreSeeding => {
            assert_eq!(
                transitions(&events),
                [
                    "spawning",
                    "ready_for_prompt",
                    "prompt_accepted",
                    "running",
                    "finished"
                ],
                "{}",
                run.report()
            );
            let seeded = events
                .iter()
                .find(|e| e["kind"] == "lane.trust_store_seeded")
                .expect("the store seeded");
            assert_eq!(seeded["detail"]["outcome"], "Seeded", "{seeded}");
            assert_kinds_in_order(&events, &["lane.trust_store_seeded", "lane.started"]);
        }
    }
    assert_eq!(
        trusted_folders(&sandbox),
        json!({lane.display().to_string(): "TRUST_FOLDER"})
    );

    assert_eq!(
        std::fs::read_to_string(lane.join("hello.txt")).expect("hello.txt in the lane"),
        "hi"
    );
    // One delivery: the task request and the one after the tool ran, and the prompt appears
    // once in the conversation the model saw last.
    let main = server.main_requests();
    assert_eq!(main.len(), 2, "{main:#?}");
    let last = main[1]["body"]["contents"].to_string();
    assert_eq!(last.matches(PROMPT).count(), 1, "{last}");
    assert!(
        last.contains("functionResponse"),
        "the tool's result went back"
    );

    drop(run);
    server.stop();
}

#[test]
fn gemini_trusted_lane_answers_trust_and_finishes_with_one_delivery() {
    trusted_lane_finishes(None, TermSize::default(), TrustBy::AnsweringTheDialog);
}

/// At 80x12 the trust dialog's question has scrolled off; its options are what is left, and
/// that is what the profile matches.
#[test]
fn gemini_lane_in_an_80x12_terminal_reaches_ready_and_finishes() {
    trusted_lane_finishes(
        Some("80x12"),
        TermSize { cols: 80, rows: 12 },
        TrustBy::AnsweringTheDialog,
    );
}

/// With the profile's default `trust_store = "gemini"`, the lane's exact path is in
/// `~/.gemini/trustedFolders.json` before gemini-cli starts: it never asks.
#[test]
fn gemini_trusted_lane_is_pre_seeded_in_trusted_folders_and_shows_no_dialog() {
    trusted_lane_finishes(None, TermSize::default(), TrustBy::PreSeeding);
}

/// A provider that refuses every connection: gemini-cli retries silently behind its
/// `Thinking...` line (working), gives up after `general.maxAttempts` (2 here; 10 by default,
/// ~4 min) and goes back to an idle input line with `✕ [API Error: …]` and `ℹ This request
/// failed. … "Error Verbosity" to full …` above it: the lane is blocked on the provider, not
/// finished.
#[test]
fn gemini_with_a_refusing_provider_is_blocked_on_the_provider() {
    real_agent("gemini");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "offline");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &refusing_provider_script(),
    );
    // seed_gemini_home's settings, and gemini-cli gives up after its second attempt.
    std::fs::create_dir_all(sandbox.home().join(".gemini")).expect("~/.gemini");
    std::fs::write(
        sandbox.home().join(".gemini/settings.json"),
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"maxAttempts": 2}
        })
        .to_string(),
    )
    .expect("settings.json");
    let config = write_config(&sandbox, lane.parent(), TrustBy::PreSeeding);
    block_on_the_provider_after_3s(&config);

    let mut run = start_lane(&sandbox, &config, &lane, &server, None);
    assert_blocked_on_the_provider(
        &mut run,
        &lane,
        TermSize::default(),
        &server,
        "request_failed",
    );
    interrupt_the_blocked_lane(run);
    server.stop();
}

/// The lane named `untrusted` blocks on its trust prompt (held by `rule`, when given), is
/// escalated with `clawpool trust untrusted` as the next action, and nothing is typed into it;
/// its events.
fn held_untrusted(run: &mut LaneRun, lane: &Path, rule: Option<&str>) -> Vec<Value> {
    let report = || screen_report(lane, TermSize::default());
    let blocked = run.wait_for(
        "lane.blocked",
        PATIENCE,
        |e| e["kind"] == "lane.blocked",
        report,
    );
    assert_eq!(blocked["to"]["subphase"], "trust_prompt", "{blocked}");
    if let Some(rule) = rule {
        assert_eq!(blocked["evidence"]["rule"], rule, "{blocked}");
    }
    crate::real_agents::escalated_to_trust_then_quiet(
        run,
        report,
        "untrusted",
        Duration::from_secs(5),
    );
    let events = run.events();
    assert!(
        !events.iter().any(|e| matches!(
            e["kind"].as_str(),
            Some("lane.dialog_answered" | "lane.prompt_typed")
        )),
        "nothing typed: {}",
        run.report()
    );
    events
}

#[test]
fn gemini_untrusted_lane_is_held_at_the_trust_dialog_and_gets_no_keystroke() {
    real_agent("gemini");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "untrusted");
    let mut server = ModelServer::start(&sandbox.dir.path().join("model"), &hello_script(&lane));
    seed_gemini_home(&sandbox.home());
    let config = write_config(&sandbox, None, TrustBy::PreSeeding);

    let mut run = start_lane(&sandbox, &config, &lane, &server, None);
    let events = held_untrusted(&mut run, &lane, None);
    // Neither clawpool (no pre-seeding outside the allow-list) nor gemini-cli recorded any
    // trust, and no task reached the model.
    assert_eq!(trusted_folders(&sandbox), json!({}));
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "lane.trust_store_seeded"),
        "{}",
        run.report()
    );
    assert!(server.main_requests().is_empty());

    drop(run);
    server.stop();
}

/// opencode's config in `home`: the scripted model server as its only provider, and the
/// config folder's npm manifest already naming `@opencode-ai/plugin`, so opencode's start-up
/// install into that folder finds nothing to do and never reaches for the registry
/// (docs/real-agents.md).
fn seed_opencode_home(home: &Path, base_url: &str) {
    let dir = home.join(".config/opencode");
    std::fs::create_dir_all(dir.join("node_modules")).expect("~/.config/opencode");
    let config = json!({
        "autoupdate": false,
        "share": "disabled",
        "provider": {"scripted": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Scripted",
            "options": {"baseURL": format!("{base_url}/v1"), "apiKey": "fake"},
            "models": {"scripted-model": {"name": "Scripted Model", "tool_call": true}}
        }},
        "model": "scripted/scripted-model"
    });
    std::fs::write(dir.join("opencode.json"), config.to_string()).expect("opencode.json");
    let plugin = json!({"@opencode-ai/plugin": "1.18.33"});
    std::fs::write(
        dir.join("package.json"),
        json!({"dependencies": plugin}).to_string(),
    )
    .expect("package.json");
    std::fs::write(
        dir.join("package-lock.json"),
        json!({"lockfileVersion": 3, "packages": {"": {"dependencies": plugin}}}).to_string(),
    )
    .expect("package-lock.json");
}

/// A `--config` file pointing the opencode profile at the installed binary, with the lane's
/// parent folder trusted when `trusted_root` is given.
fn write_opencode_config(sandbox: &Sandbox, trusted_root: Option<&Path>) -> PathBuf {
    let roots = trusted_root
        .map(|root| format!("trusted_roots = [{:?}]\n", root.display().to_string()))
        .unwrap_or_default();
    let text = format!(
        "{roots}\n[profiles.opencode.launch]\ncommand = {:?}\n",
        real_agent("opencode").display().to_string()
    );
    let path = sandbox.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("config file");
    path
}

fn opencode_hello_script(lane: &Path) -> Value {
    json!([
        {"tool_use": {"name": "write", "input": {
            "filePath": lane.join("hello.txt").display().to_string(),
            "content": "hi"
        }}},
        {"text": "Done. Created hello.txt."}
    ])
}

fn start_opencode_lane(
    sandbox: &Sandbox,
    config: &Path,
    lane: &Path,
    size: Option<&str>,
) -> LaneRun {
    let mut cmd = sandbox.clawpool_clean_env();
    cmd.args(["run", "--output-format", "json", "--agent", "opencode"])
        .args(["--transport", "tmux", "--config"])
        .arg(config)
        .arg("--cwd")
        .arg(lane)
        .args(["--prompt", PROMPT]);
    if let Some(size) = size {
        cmd.args(["--size", size]);
    }
    for var in [
        format!("HOME={}", sandbox.home().display()),
        format!("PATH={}", agent_path()),
        "TERM=xterm-256color".into(),
        // The model list from models.dev is not needed with the provider in the config.
        "OPENCODE_DISABLE_MODELS_FETCH=1".into(),
    ] {
        cmd.arg("--env").arg(var);
    }
    LaneRun::start(cmd, &sandbox.dir.path().join("clawpool.stderr"))
}

/// Runs a trusted opencode lane to its outcome and checks it finished its scripted task with
/// one delivery: the prompt typed once, reaching the model once, the file written by
/// opencode's own `write` tool, and nothing fetched from the npm registry.
fn opencode_trusted_lane_finishes(size: Option<&str>, term: TermSize) {
    real_agent("opencode");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "alpha");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &opencode_hello_script(&lane),
    );
    seed_opencode_home(&sandbox.home(), &server.url());
    let config = write_opencode_config(&sandbox, lane.parent());

    let mut run = start_opencode_lane(&sandbox, &config, &lane, size);
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        || screen_report(&lane, term),
    );
    let status = run.wait_exit(PATIENCE);
    let events = run.events();
    assert_eq!(
        status.code(),
        Some(0),
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    let outcome = &outcome["outcome"];
    assert_eq!(
        outcome["state"]["status"],
        "finished",
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    assert_eq!(outcome["receipt"]["attempts"], 1, "{}", run.report());
    // No dialog at all: straight from the start to ready. On a loaded machine the whole turn
    // can happen between two looks (seen once: accepted on the echo 5 s after Enter, the reply
    // already under it), which the machine finishes without a `running` it never saw; the
    // checks of the work below (the file, both requests, the prompt once) hold either way.
    let seen = transitions(&events);
    assert!(
        seen == [
            "spawning",
            "ready_for_prompt",
            "prompt_accepted",
            "running",
            "finished"
        ] || seen
            == [
                "spawning",
                "ready_for_prompt",
                "prompt_accepted",
                "finished"
            ],
        "{seen:?}\n{}",
        run.report()
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "lane.prompt_typed")
            .count(),
        1,
        "{}",
        run.report()
    );

    assert_eq!(
        std::fs::read_to_string(lane.join("hello.txt")).expect("hello.txt in the lane"),
        "hi"
    );
    // One delivery: the task request and the one after the tool ran (the session-title
    // request is a side request), and the prompt appears once in the conversation the model
    // saw last.
    let main = server.main_requests();
    assert_eq!(main.len(), 2, "{main:#?}");
    let last = main[1]["body"]["messages"].to_string();
    assert_eq!(last.matches(PROMPT).count(), 1, "{last}");
    assert!(
        last.contains("\"role\":\"tool\""),
        "the tool's result went back"
    );
    // The pre-seeded manifest kept opencode's npm away from the registry: no npm cache.
    assert!(
        !sandbox.home().join(".npm").exists(),
        "opencode ran npm against the registry"
    );

    drop(run);
    server.stop();
}

#[test]
fn opencode_trusted_lane_finishes_with_one_delivery() {
    opencode_trusted_lane_finishes(None, TermSize::default());
}

#[test]
fn opencode_lane_in_an_80x12_terminal_reaches_ready_and_finishes() {
    opencode_trusted_lane_finishes(Some("80x12"), TermSize { cols: 80, rows: 12 });
}

/// A provider that refuses every connection: opencode retries without end, saying so in its
/// footer (`Cannot connect to API: … [retrying in 13s attempt #4]`), and the lane is blocked on
/// the provider, not finished with an empty input box.
#[test]
fn opencode_with_a_refusing_provider_is_blocked_on_the_provider() {
    real_agent("opencode");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "offline");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &refusing_provider_script(),
    );
    seed_opencode_home(&sandbox.home(), &server.url());
    let config = write_opencode_config(&sandbox, lane.parent());
    block_on_the_provider_after_3s(&config);

    let mut run = start_opencode_lane(&sandbox, &config, &lane, None);
    assert_blocked_on_the_provider(
        &mut run,
        &lane,
        TermSize::default(),
        &server,
        "provider_retrying",
    );
    interrupt_the_blocked_lane(run);
    server.stop();
}

/// opencode never asks about folder trust, so it is clawpool's own gate that holds the lane:
/// ready, but nobody trusted it, so nothing is typed and no task reaches the model.
#[test]
fn opencode_untrusted_lane_is_blocked_at_the_trust_gate_and_gets_no_keystroke() {
    real_agent("opencode");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "untrusted");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &opencode_hello_script(&lane),
    );
    seed_opencode_home(&sandbox.home(), &server.url());
    let config = write_opencode_config(&sandbox, None);

    let mut run = start_opencode_lane(&sandbox, &config, &lane, None);
    held_untrusted(&mut run, &lane, Some("trust_gate"));
    assert!(!lane.join("hello.txt").exists());
    assert!(server.requests().is_empty(), "{:#?}", server.requests());

    drop(run);
    server.stop();
}

/// Qwen Code's settings in `home`: no update check (it would ask the npm registry) and no
/// follow-up suggestion (an extra model request after each turn).
fn seed_qwen_home(home: &Path) {
    let dir = home.join(".qwen");
    std::fs::create_dir_all(&dir).expect("~/.qwen");
    std::fs::write(
        dir.join("settings.json"),
        json!({
            "general": {"enableAutoUpdate": false},
            "ui": {"enableFollowupSuggestions": false}
        })
        .to_string(),
    )
    .expect("settings.json");
}

/// A `--config` file pointing the qwen profile at the installed binary, with the lane's
/// parent folder trusted when `trusted_root` is given, and `launch_extra` lines in its launch
/// table.
fn write_qwen_config(
    sandbox: &Sandbox,
    trusted_root: Option<&Path>,
    launch_extra: &str,
) -> PathBuf {
    let roots = trusted_root
        .map(|root| format!("trusted_roots = [{:?}]\n", root.display().to_string()))
        .unwrap_or_default();
    let text = format!(
        "{roots}\n[profiles.qwen.launch]\ncommand = {:?}\n{launch_extra}",
        real_agent("qwen").display().to_string()
    );
    let path = sandbox.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("config file");
    path
}

fn start_qwen_lane(
    sandbox: &Sandbox,
    config: &Path,
    lane: &Path,
    server: &ModelServer,
    size: Option<&str>,
) -> LaneRun {
    let mut cmd = sandbox.clawpool_clean_env();
    cmd.args(["run", "--output-format", "json", "--agent", "qwen"])
        .args(["--transport", "tmux", "--config"])
        .arg(config)
        .arg("--cwd")
        .arg(lane)
        .args(["--prompt", PROMPT]);
    if let Some(size) = size {
        cmd.args(["--size", size]);
    }
    // Qwen Code's launcher is `#!/usr/bin/env node` and needs Node 22: the pinned one first.
    let node = real_agent("node");
    let node_dir = node.parent().expect("node's folder");
    for var in [
        format!("HOME={}", sandbox.home().display()),
        format!("PATH={}:{}", node_dir.display(), agent_path()),
        "TERM=xterm-256color".into(),
        "OPENAI_API_KEY=fake".into(),
        format!("OPENAI_BASE_URL={}/v1", server.url()),
        "OPENAI_MODEL=scripted-model".into(),
    ] {
        cmd.arg("--env").arg(var);
    }
    LaneRun::start(cmd, &sandbox.dir.path().join("clawpool.stderr"))
}

/// Runs a trusted Qwen Code lane to its outcome and checks it finished its scripted task with
/// one delivery: the prompt typed once, reaching the model once, and the file written by Qwen
/// Code's own `write_file` tool.
fn qwen_trusted_lane_finishes(size: Option<&str>, term: TermSize) {
    real_agent("qwen");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "alpha");
    let mut server = ModelServer::start(&sandbox.dir.path().join("model"), &hello_script(&lane));
    seed_qwen_home(&sandbox.home());
    let config = write_qwen_config(&sandbox, lane.parent(), "");

    let mut run = start_qwen_lane(&sandbox, &config, &lane, &server, size);
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        || screen_report(&lane, term),
    );
    let status = run.wait_exit(PATIENCE);
    let events = run.events();
    assert_eq!(
        status.code(),
        Some(0),
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    let outcome = &outcome["outcome"];
    assert_eq!(
        outcome["state"]["status"],
        "finished",
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    assert_eq!(outcome["receipt"]["attempts"], 1, "{}", run.report());
    assert_eq!(
        transitions(&events),
        [
            "spawning",
            "ready_for_prompt",
            "prompt_accepted",
            "running",
            "finished"
        ],
        "{}",
        run.report()
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "lane.prompt_typed")
            .count(),
        1,
        "{}",
        run.report()
    );

    assert_eq!(
        std::fs::read_to_string(lane.join("hello.txt")).expect("hello.txt in the lane"),
        "hi"
    );
    // One delivery: the task request and the one after the tool ran, and the prompt appears
    // once in the conversation the model saw last.
    let main = server.main_requests();
    assert_eq!(main.len(), 2, "{main:#?}");
    let last = main[1]["body"]["messages"].to_string();
    assert_eq!(last.matches(PROMPT).count(), 1, "{last}");
    assert!(
        last.contains("\"role\":\"tool\""),
        "the tool's result went back"
    );

    drop(run);
    server.stop();
}

#[test]
fn qwen_trusted_lane_finishes_with_one_delivery() {
    qwen_trusted_lane_finishes(None, TermSize::default());
}

#[test]
fn qwen_lane_in_an_80x12_terminal_reaches_ready_and_finishes() {
    qwen_trusted_lane_finishes(Some("80x12"), TermSize { cols: 80, rows: 12 });
}

/// A provider that refuses every connection: Qwen Code retries silently behind its spinner
/// line (working) and, when its retries run out (~4 min here, with the OpenAI client's own
/// retries off: `model.generationConfig.maxRetries = 0`), goes back to an idle input box with
/// `✕ [API Error: Connection error. …]` and `(Press Ctrl+Y to retry)` above it: the lane is
/// blocked on the provider, not finished. In an 80x12 terminal.
#[test]
fn qwen_with_a_refusing_provider_is_blocked_on_the_provider() {
    real_agent("qwen");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "offline");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &refusing_provider_script(),
    );
    // seed_qwen_home's settings, and no retries by the OpenAI client under Qwen Code's own.
    std::fs::create_dir_all(sandbox.home().join(".qwen")).expect("~/.qwen");
    std::fs::write(
        sandbox.home().join(".qwen/settings.json"),
        json!({
            "general": {"enableAutoUpdate": false},
            "ui": {"enableFollowupSuggestions": false},
            "model": {"generationConfig": {"maxRetries": 0}}
        })
        .to_string(),
    )
    .expect("settings.json");
    let config = write_qwen_config(&sandbox, lane.parent(), "");
    block_on_the_provider_after_3s(&config);

    let mut run = start_qwen_lane(&sandbox, &config, &lane, &server, Some("80x12"));
    assert_blocked_on_the_provider(
        &mut run,
        &lane,
        TermSize { cols: 80, rows: 12 },
        &server,
        "request_failed",
    );
    interrupt_the_blocked_lane(run);
    server.stop();
}

/// How a trusted Qwen Code lane with folder trust on gets past its trust question.
#[derive(Clone, Copy, PartialEq)]
enum QwenTrustBy {
    /// clawpool records the lane in `~/.qwen/trustedFolders.json` before launch (the
    /// profile's `trust_store = "qwen"`), so no dialog shows.
    PreSeeding,
    /// Pre-seeding off (`trust_store = "none"`): Qwen Code asks, and clawpool answers.
    AnsweringTheDialog,
}

/// Runs a trusted Qwen Code lane with `security.folderTrust.enabled` on in an 80x12 pane,
/// where the trust dialog's box is taller than the pane (the question off screen, the first
/// option's row garbled by the redraw). Either way the lane finishes and Qwen Code's store
/// trusts the lane and nothing else.
fn qwen_with_folder_trust_on_finishes(trust_by: QwenTrustBy) {
    real_agent("qwen");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "alpha");
    let mut server = ModelServer::start(&sandbox.dir.path().join("model"), &hello_script(&lane));
    let home = sandbox.home();
    std::fs::create_dir_all(home.join(".qwen")).expect("~/.qwen");
    std::fs::write(
        home.join(".qwen/settings.json"),
        json!({
            "general": {"enableAutoUpdate": false},
            "ui": {"enableFollowupSuggestions": false},
            "security": {"folderTrust": {"enabled": true}}
        })
        .to_string(),
    )
    .expect("settings.json");
    let store_off = match trust_by {
        QwenTrustBy::PreSeeding => "",
        QwenTrustBy::AnsweringTheDialog => "trust_store = \"none\"\n",
    };
    let config = write_qwen_config(&sandbox, lane.parent(), store_off);
    let term = TermSize { cols: 80, rows: 12 };

    let mut run = start_qwen_lane(&sandbox, &config, &lane, &server, Some("80x12"));
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        || screen_report(&lane, term),
    );
    let status = run.wait_exit(PATIENCE);
    let events = run.events();
    assert_eq!(
        status.code(),
        Some(0),
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    assert_eq!(
        outcome["outcome"]["state"]["status"],
        "finished",
        "{}",
        run.report()
    );
    let trust_answers: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "lane.dialog_answered" && e["detail"]["dialog"] == "trust")
        .collect();
    let seeded: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "lane.trust_store_seeded")
        .collect();
    match trust_by {
        QwenTrustBy::PreSeeding => {
            assert_eq!(
                transitions(&events),
                [
                    "spawning",
                    "ready_for_prompt",
                    "prompt_accepted",
                    "running",
                    "finished"
                ],
                "{}",
                run.report()
            );
            assert!(trust_answers.is_empty(), "{trust_answers:#?}");
            assert_eq!(seeded.len(), 1, "{}", run.report());
            assert_eq!(seeded[0]["detail"]["outcome"], "Seeded", "{}", seeded[0]);
        }
        QwenTrustBy::AnsweringTheDialog => {
            assert_eq!(
                transitions(&events),
                [
                    "spawning",
                    "trust_required",
                    "ready_for_prompt",
                    "prompt_accepted",
                    "running",
                    "finished"
                ],
                "{}",
                run.report()
            );
            assert!(seeded.is_empty(), "pre-seeding is off: {seeded:#?}");
            assert_eq!(trust_answers.len(), 1, "{}", run.report());
            assert_eq!(trust_answers[0]["detail"]["choice"], "yes");
            assert_eq!(trust_answers[0]["detail"]["completed"], true);
        }
    }
    let store: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".qwen/trustedFolders.json"))
            .expect("Qwen Code's trusted-folders file"),
    )
    .expect("trustedFolders.json is JSON");
    assert_eq!(
        store,
        json!({lane.display().to_string(): "TRUST_FOLDER"}),
        "the lane and nothing else"
    );
    assert_eq!(
        std::fs::read_to_string(lane.join("hello.txt")).expect("hello.txt in the lane"),
        "hi"
    );

    drop(run);
    server.stop();
}

#[test]
fn qwen_with_folder_trust_on_in_an_80x12_terminal_answers_the_trust_dialog_and_finishes() {
    qwen_with_folder_trust_on_finishes(QwenTrustBy::AnsweringTheDialog);
}

#[test]
fn qwen_with_folder_trust_on_is_pre_seeded_in_trusted_folders_and_shows_no_dialog() {
    qwen_with_folder_trust_on_finishes(QwenTrustBy::PreSeeding);
}

/// Qwen Code does not ask about folder trust by default, so clawpool's own gate holds the
/// lane: ready, but nobody trusted it, so nothing is typed and no task reaches the model.
#[test]
fn qwen_untrusted_lane_is_blocked_at_the_trust_gate_and_gets_no_keystroke() {
    real_agent("qwen");
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "untrusted");
    let mut server = ModelServer::start(&sandbox.dir.path().join("model"), &hello_script(&lane));
    seed_qwen_home(&sandbox.home());
    let config = write_qwen_config(&sandbox, None, "");

    let mut run = start_qwen_lane(&sandbox, &config, &lane, &server, None);
    held_untrusted(&mut run, &lane, Some("trust_gate"));
    assert!(!lane.join("hello.txt").exists());
    assert!(server.requests().is_empty(), "{:#?}", server.requests());

    drop(run);
    server.stop();
}

/// aider, from its virtual environment under `.agents/`.
fn aider_binary() -> PathBuf {
    let path = agents_dir().join("aider-venv/bin/aider");
    assert!(
        path.is_file(),
        "aider is not installed at {}: run `scripts/install-agents.sh`",
        path.display()
    );
    path
}

/// A `--config` file pointing the aider profile at the installed binary, with the lane's
/// parent folder trusted when `trusted_root` is given.
fn write_aider_config(sandbox: &Sandbox, trusted_root: Option<&Path>) -> PathBuf {
    let roots = trusted_root
        .map(|root| format!("trusted_roots = [{:?}]\n", root.display().to_string()))
        .unwrap_or_default();
    let text = format!(
        "{roots}\n[profiles.aider.launch]\ncommand = {:?}\n",
        aider_binary().display().to_string()
    );
    let path = sandbox.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("config file");
    path
}

/// aider's reply to the task in its `whole` edit format: the file's name, then its content
/// fenced.
fn aider_hello_script() -> Value {
    json!([{"text": "hello.txt\n```\nhi\n```\n"}])
}

fn start_aider_lane(
    sandbox: &Sandbox,
    config: &Path,
    lane: &Path,
    server: &ModelServer,
    size: Option<&str>,
) -> LaneRun {
    // The scripted model's context window and prices, so aider neither fetches litellm's
    // model list from the network nor warns about an unknown model.
    let metadata = sandbox.dir.path().join("model-metadata.json");
    std::fs::write(
        &metadata,
        json!({"openai/scripted-model": {
            "max_input_tokens": 128000, "max_output_tokens": 8192,
            "input_cost_per_token": 0, "output_cost_per_token": 0,
            "litellm_provider": "openai", "mode": "chat"
        }})
        .to_string(),
    )
    .expect("model metadata");
    let mut cmd = sandbox.clawpool_clean_env();
    cmd.args(["run", "--output-format", "json", "--agent", "aider"])
        .args(["--transport", "tmux", "--config"])
        .arg(config)
        .arg("--cwd")
        .arg(lane)
        .args(["--prompt", PROMPT]);
    if let Some(size) = size {
        cmd.args(["--size", size]);
    }
    for var in [
        format!("HOME={}", sandbox.home().display()),
        format!("PATH={}", agent_path()),
        "TERM=xterm-256color".into(),
        "OPENAI_API_KEY=fake".into(),
        format!("OPENAI_API_BASE={}/v1", server.url()),
        "AIDER_MODEL=openai/scripted-model".into(),
        format!("AIDER_MODEL_METADATA_FILE={}", metadata.display()),
    ] {
        cmd.arg("--env").arg(var);
    }
    LaneRun::start(cmd, &sandbox.dir.path().join("clawpool.stderr"))
}

/// Runs a trusted aider lane to its outcome and checks it finished its scripted task with one
/// delivery: the prompt typed once, one request to the model, and the file written by aider
/// from the reply after clawpool answered its "Create new file?" (the profile's policy).
fn aider_trusted_lane_finishes(size: Option<&str>, term: TermSize) {
    aider_binary();
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "alpha");
    let mut server = ModelServer::start_with(
        &sandbox.dir.path().join("model"),
        &aider_hello_script(),
        &["--every-request-is-a-task"],
    );
    let config = write_aider_config(&sandbox, lane.parent());

    let mut run = start_aider_lane(&sandbox, &config, &lane, &server, size);
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        || screen_report(&lane, term),
    );
    let status = run.wait_exit(PATIENCE);
    let events = run.events();
    assert_eq!(
        status.code(),
        Some(0),
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    let outcome = &outcome["outcome"];
    assert_eq!(
        outcome["state"]["status"],
        "finished",
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    assert_eq!(outcome["receipt"]["attempts"], 1, "{}", run.report());
    assert_kinds_in_order(
        &events,
        &[
            "lane.started",
            "lane.ready",
            "lane.prompt_typed",
            "lane.prompt_accepted",
            "lane.running",
            "lane.dialog_answered",
            "lane.finished",
        ],
    );
    let answered = events
        .iter()
        .find(|e| e["kind"] == "lane.dialog_answered")
        .expect("the question answered");
    assert_eq!(
        answered["detail"]["dialog"], "create_new_file",
        "{answered}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "lane.prompt_typed")
            .count(),
        1,
        "{}",
        run.report()
    );

    assert_eq!(
        std::fs::read_to_string(lane.join("hello.txt")).expect("hello.txt in the lane"),
        "hi\n"
    );
    // One delivery: one request, the prompt in it once.
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let messages = requests[0]["body"]["messages"].to_string();
    assert_eq!(messages.matches(PROMPT).count(), 1, "{messages}");

    drop(run);
    server.stop();
}

#[test]
fn aider_trusted_lane_finishes_with_one_delivery() {
    aider_trusted_lane_finishes(None, TermSize::default());
}

#[test]
fn aider_lane_in_an_80x12_terminal_reaches_ready_and_finishes() {
    aider_trusted_lane_finishes(Some("80x12"), TermSize { cols: 80, rows: 12 });
}

/// A provider that refuses every connection: aider prints each failure and `Retrying in N
/// seconds...` (waits doubling from 0.25 s), and the lane is blocked on the provider while it
/// retries. Past a 60 s wait aider gives up and shows an empty `>` prompt under the failure
/// (~80 s after the first): the lane stays blocked, never `finished`. In an 80x12 terminal.
#[test]
fn aider_with_a_refusing_provider_is_blocked_on_the_provider() {
    aider_binary();
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "offline");
    let mut server = ModelServer::start_with(
        &sandbox.dir.path().join("model"),
        &refusing_provider_script(),
        &["--every-request-is-a-task"],
    );
    let config = write_aider_config(&sandbox, lane.parent());
    block_on_the_provider_after_3s(&config);
    let term = TermSize { cols: 80, rows: 12 };

    let mut run = start_aider_lane(&sandbox, &config, &lane, &server, Some("80x12"));
    assert_blocked_on_the_provider(&mut run, &lane, term, &server, "provider_retrying");

    // aider's retries run out within ~80 s of the first failure; the lane stays as it is.
    let meanwhile = run.lines_within(Duration::from_secs(100));
    assert!(
        !meanwhile.iter().any(|e| e.get("from").is_some()),
        "the blocked lane changed state: {meanwhile:#?}"
    );
    let screen = screen_report(&lane, term);
    assert!(
        screen.contains("The API provider's servers are down or overloaded.")
            && screen.trim_end().ends_with('>'),
        "aider has not given up yet: {screen}"
    );
    interrupt_the_blocked_lane(run);
    server.stop();
}

/// aider never asks about folder trust, so clawpool's own gate holds the lane: ready, but
/// nobody trusted it, so nothing is typed and no task reaches the model.
#[test]
fn aider_untrusted_lane_is_blocked_at_the_trust_gate_and_gets_no_keystroke() {
    aider_binary();
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "untrusted");
    let mut server = ModelServer::start_with(
        &sandbox.dir.path().join("model"),
        &aider_hello_script(),
        &["--every-request-is-a-task"],
    );
    let config = write_aider_config(&sandbox, None);

    let mut run = start_aider_lane(&sandbox, &config, &lane, &server, None);
    held_untrusted(&mut run, &lane, Some("trust_gate"));
    assert!(!lane.join("hello.txt").exists());
    assert!(server.requests().is_empty(), "{:#?}", server.requests());

    drop(run);
    server.stop();
}

/// claw, built from claw-code's pinned source archive into `.agents/claw-code/` by
/// `scripts/install-agents.sh`.
fn claw_binary() -> PathBuf {
    let path = agents_dir().join("claw-code/bin/claw");
    assert!(
        path.is_file(),
        "claw is not built at {}: run `scripts/install-agents.sh` (it builds claw from \
         ../shared/claw-code/)",
        path.display()
    );
    path
}

/// A `--config` file pointing the claw profile at the built binary, with the lane's parent
/// folder trusted when `trusted_root` is given.
fn write_claw_config(sandbox: &Sandbox, trusted_root: Option<&Path>) -> PathBuf {
    let roots = trusted_root
        .map(|root| format!("trusted_roots = [{:?}]\n", root.display().to_string()))
        .unwrap_or_default();
    let text = format!(
        "{roots}\n[profiles.claw.launch]\ncommand = {:?}\n",
        claw_binary().display().to_string()
    );
    let path = sandbox.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("config file");
    path
}

/// claw's `write_file` tool twice, then a closing reply that takes a while: two tool boxes
/// push the turn's "Thinking..." row up, and the submitted prompt's "> …" row stays the last
/// one starting with ">" until the reply is in.
fn claw_hello_script(lane: &Path) -> Value {
    json!([
        {"tool_use": {"name": "write_file", "input": {
            "path": lane.join("hello.txt").display().to_string(),
            "content": "hi"
        }}},
        {"tool_use": {"name": "write_file", "input": {
            "path": lane.join("bye.txt").display().to_string(),
            "content": "bye"
        }}},
        {"text": "Done. Created hello.txt and bye.txt.", "delay_ms": 3000}
    ])
}

fn start_claw_lane(
    sandbox: &Sandbox,
    config: &Path,
    lane: &Path,
    server: &ModelServer,
    size: Option<&str>,
) -> LaneRun {
    start_claw_lane_on(sandbox, config, lane, server, size, "tmux")
}

fn start_claw_lane_on(
    sandbox: &Sandbox,
    config: &Path,
    lane: &Path,
    server: &ModelServer,
    size: Option<&str>,
    transport: &str,
) -> LaneRun {
    let mut cmd = sandbox.clawpool_clean_env();
    cmd.args(["run", "--output-format", "json", "--agent", "claw"])
        .args(["--transport", transport, "--config"])
        .arg(config)
        .arg("--cwd")
        .arg(lane)
        .args(["--prompt", PROMPT]);
    if let Some(size) = size {
        cmd.args(["--size", size]);
    }
    for var in [
        format!("HOME={}", sandbox.home().display()),
        format!("PATH={}", agent_path()),
        "TERM=xterm-256color".into(),
        "ANTHROPIC_API_KEY=sk-ant-fake".into(),
        format!("ANTHROPIC_BASE_URL={}", server.url()),
    ] {
        cmd.arg("--env").arg(var);
    }
    LaneRun::start(cmd, &sandbox.dir.path().join("clawpool.stderr"))
}

/// Runs a trusted claw lane to its outcome and checks it finished its scripted task with one
/// delivery: the prompt typed once, reaching the model once, and the files written by claw's
/// own `write_file` tool. Then `claw state`, run by claw itself in the lane, prints the state
/// file clawpool wrote there.
fn claw_trusted_lane_finishes(size: Option<&str>, term: TermSize) {
    let claw = claw_binary();
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "alpha");
    let mut server =
        ModelServer::start(&sandbox.dir.path().join("model"), &claw_hello_script(&lane));
    let config = write_claw_config(&sandbox, lane.parent());

    let mut run = start_claw_lane(&sandbox, &config, &lane, &server, size);
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        || screen_report(&lane, term),
    );
    let status = run.wait_exit(PATIENCE);
    let events = run.events();
    assert_eq!(
        status.code(),
        Some(0),
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    let outcome = &outcome["outcome"];
    assert_eq!(
        outcome["state"]["status"],
        "finished",
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    assert_eq!(outcome["receipt"]["attempts"], 1, "{}", run.report());
    assert_eq!(
        transitions(&events),
        [
            "spawning",
            "ready_for_prompt",
            "prompt_accepted",
            "running",
            "finished"
        ],
        "{}",
        run.report()
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "lane.prompt_typed")
            .count(),
        1,
        "{}",
        run.report()
    );

    assert_eq!(
        std::fs::read_to_string(lane.join("hello.txt")).expect("hello.txt in the lane"),
        "hi"
    );
    assert_eq!(
        std::fs::read_to_string(lane.join("bye.txt")).expect("bye.txt in the lane"),
        "bye"
    );
    // One delivery: the task request and one after each tool ran (claw's token counts are
    // "other" requests); the prompt appears once in the conversation the model saw last.
    let main = server.main_requests();
    assert_eq!(main.len(), 3, "{main:#?}");
    let last = main[2]["body"]["messages"].to_string();
    assert_eq!(last.matches(PROMPT).count(), 1, "{last}");
    assert!(last.contains("tool_result"), "the tools' results went back");

    // claw's own reader of `.claw/worker-state.json` prints what clawpool wrote.
    let state = std::process::Command::new(&claw)
        .args(["state", "--output-format", "json"])
        .current_dir(&lane)
        .env_clear()
        .env("HOME", sandbox.home())
        .env("PATH", agent_path())
        .output()
        .expect("claw state runs");
    assert!(
        state.status.success(),
        "claw state: {}",
        String::from_utf8_lossy(&state.stderr)
    );
    let printed: Value = serde_json::from_slice(&state.stdout).expect("claw state prints JSON");
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(lane.join(".claw/worker-state.json")).expect("the state file"),
    )
    .expect("the state file is JSON");
    assert_eq!(printed["status"], "finished", "{printed:#}");
    assert_eq!(
        printed["status"], written["status"],
        "{printed:#}\n{written:#}"
    );
    assert_eq!(printed["worker_id"], written["worker_id"], "{printed:#}");

    drop(run);
    server.stop();
}

#[test]
fn claw_trusted_lane_finishes_with_one_delivery() {
    claw_trusted_lane_finishes(None, TermSize::default());
}

#[test]
fn claw_lane_in_an_80x12_terminal_reaches_ready_and_finishes() {
    claw_trusted_lane_finishes(Some("80x12"), TermSize { cols: 80, rows: 12 });
}

/// claw does not wait for a provider that fails: an error it does not retry (529 here), or a
/// refusing provider once its 9 attempts ran out (~5 min, `docs/real-agents.md`), ends claw
/// itself with `✘ ❌ Request failed` and `error: api …` on its last screen and exit status 1.
/// The lane is `failed{provider}` on that screen (rule `request_failed`), not a crash; there is
/// no worker left to be `blocked`.
#[test]
fn claw_that_gives_up_on_its_provider_fails_the_lane_on_the_provider() {
    claw_binary();
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "offline");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &json!([{"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}]),
    );
    let config = write_claw_config(&sandbox, lane.parent());
    let term = TermSize { cols: 80, rows: 12 };

    // On the PTY transport: claw prints its failure and exits at once, and tmux 3.3a can close
    // a pane before it read a program's very last output (docs/terminals.md).
    let mut run = start_claw_lane_on(&sandbox, &config, &lane, &server, Some("80x12"), "pty");
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        || screen_report(&lane, term),
    );
    let outcome = &outcome["outcome"];
    assert_eq!(
        outcome["state"],
        json!({"status": "failed", "failure": "provider"}),
        "{}\n{}",
        run.report(),
        screen_report(&lane, term)
    );
    let events = run.events();
    let failed = events
        .iter()
        .find(|e| e["kind"] == "lane.failed")
        .expect("lane.failed");
    assert_eq!(failed["evidence"]["rule"], "request_failed", "{failed}");
    assert!(
        failed["evidence"]["matched"]
            .as_str()
            .is_some_and(|m| m.contains("exited")),
        "{failed}"
    );
    assert_eq!(server.main_requests().len(), 1);
    drop(run);
    server.stop();
}

/// claw asks nothing about folder trust, so clawpool's own gate holds the lane: ready, but
/// nobody trusted it, so nothing is typed and no task reaches the model.
#[test]
fn claw_untrusted_lane_is_blocked_at_the_trust_gate_and_gets_no_keystroke() {
    claw_binary();
    let sandbox = Sandbox::new();
    let lane = repo_lane(&sandbox, "untrusted");
    let mut server =
        ModelServer::start(&sandbox.dir.path().join("model"), &claw_hello_script(&lane));
    let config = write_claw_config(&sandbox, None);

    let mut run = start_claw_lane(&sandbox, &config, &lane, &server, None);
    held_untrusted(&mut run, &lane, Some("trust_gate"));
    assert!(!lane.join("hello.txt").exists());
    assert!(
        server.main_requests().is_empty(),
        "{:#?}",
        server.requests()
    );

    drop(run);
    server.stop();
}

/// `clawpool doctor` runs each agent in use with `--version` and compares it with the version
/// its profile was verified on: the pinned installs match, and the codex profile pointed at
/// gemini-cli's binary (0.61.0, not Codex's 0.169.0) is a warning with a fix.
#[test]
fn doctor_reports_each_agent_version_against_its_profile_and_warns_on_a_mismatch() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let config = sandbox.dir.path().join("config.toml");
    let command = |path: PathBuf| format!("command = {:?}\n", path.display().to_string());
    std::fs::write(
        &config,
        format!(
            "[profiles.gemini.launch]\n{}[profiles.opencode.launch]\n{}\
             [profiles.aider.launch]\n{}[profiles.codex.launch]\n{}",
            command(real_agent("gemini")),
            command(real_agent("opencode")),
            command(aider_binary()),
            command(real_agent("gemini")),
        ),
    )
    .expect("config");
    let out = sandbox
        .clawpool_clean_env()
        .args(["doctor", "--output-format", "json", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&repo)
        .output()
        .expect("doctor");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
    let check = |name: &str| -> Value {
        doc["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name:?} check in {doc:#}"))
    };
    for (agent, version) in [
        ("gemini", "0.61.0"),
        ("opencode", "1.18.33"),
        ("aider", "0.86.2"),
    ] {
        let found = check(&format!("agent {agent} version"));
        assert_eq!(found["ok"], true, "{found}");
        assert_eq!(
            found["detail"],
            format!("{version}, the version the {agent} profile was verified on"),
            "{found}"
        );
    }
    let mismatch = check("agent codex version");
    assert_eq!(mismatch["ok"], false, "{mismatch}");
    assert_eq!(mismatch["severity"], "warning", "{mismatch}");
    let detail = mismatch["detail"].as_str().expect("detail");
    assert!(
        detail.contains("is 0.61.0, but the codex profile was verified on 0.169.0"),
        "{detail}"
    );
    let fix = mismatch["fix"].as_str().expect("a fix");
    assert!(
        fix.starts_with("install codex 0.169.0 (scripts/install-agents.sh pins it)"),
        "{fix}"
    );
}
