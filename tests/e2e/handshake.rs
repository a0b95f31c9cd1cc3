//! `clawpool run` driving the scripted agent through the boot handshake: trust resolution,
//! dialogs, verified prompt delivery, misdelivery into a shell, operator answers, and bad
//! input. The events asserted on are the ones clawpool prints and keeps in
//! `.claw/events.jsonl`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_tests::{
    LaneRun, Sandbox, TRUSTED_BOOT_TO_FINISHED, assert_kinds_in_order, git_repo, workspace_bin,
};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(30);

/// A `clawpool run` of the scripted agent in one lane folder.
pub(crate) struct Lane {
    run: LaneRun,
    repo: PathBuf,
}

impl Lane {
    pub(crate) fn start(
        sandbox: &Sandbox,
        repo: &Path,
        config: &Path,
        agent: &str,
        prompt: &str,
    ) -> Self {
        let mut cmd = sandbox.clawpool();
        cmd.args([
            "run",
            "--output-format",
            "json",
            "--agent",
            agent,
            "--config",
        ])
        .arg(config)
        .arg("--cwd")
        .arg(repo)
        .args(["--prompt", prompt]);
        let stderr = sandbox.dir.path().join(format!("clawpool-{agent}.stderr"));
        Self {
            run: LaneRun::start(cmd, &stderr),
            repo: repo.to_owned(),
        }
    }

    /// Waits for the first event (from now on) matching `pred` and returns it.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.run.wait_for(what, PATIENCE, pred, String::new)
    }

    pub(crate) fn wait_kind(&mut self, kind: &str) -> Value {
        self.wait_for(kind, |e| e["kind"] == kind)
    }

    /// Waits for clawpool to exit; returns its exit code, the outcome and every line.
    pub(crate) fn finish(mut self) -> (i32, Value, Vec<Value>) {
        let outcome = self.wait_for("the outcome", |e| e.get("outcome").is_some());
        let status = self.run.wait_exit(PATIENCE);
        (
            status.code().unwrap_or(-1),
            outcome["outcome"].clone(),
            std::mem::take(&mut self.run.seen),
        )
    }

    fn seen(&self) -> &[Value] {
        &self.run.seen
    }

    fn prompt_log(&self) -> Vec<Value> {
        prompt_log(&self.repo)
    }
}

fn prompt_log(repo: &Path) -> Vec<Value> {
    std::fs::read_to_string(repo.join(".prompts.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How many prompts reached the agent (its prompt log counts every submission it received).
pub(crate) fn prompts_delivered(repo: &Path) -> usize {
    prompt_log(repo)
        .iter()
        .filter(|e| e["event"] == "prompt")
        .count()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["kind"].as_str().map(str::to_owned))
        .collect()
}

/// A lane repository, a scenario for the scripted agent, and a config that points the
/// `scripted` profile at the built agent.
pub(crate) fn setup(
    sandbox: &Sandbox,
    scenario: &str,
    trusted: bool,
    extra_config: &str,
) -> (PathBuf, PathBuf) {
    let repo = git_repo(sandbox.dir.path(), "lane");
    let scenario_path = sandbox.dir.path().join("scenario.toml");
    std::fs::write(&scenario_path, scenario).expect("scenario");
    let roots = if trusted {
        format!(
            "trusted_roots = [{:?}]\n",
            sandbox.dir.path().display().to_string()
        )
    } else {
        String::new()
    };
    let config = sandbox.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "{roots}[handshake]\naccept_timeout_secs = 3\nfinish_idle_ms = 500\n\n[profiles.scripted.launch]\ncommand = {:?}\nenv = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n{extra_config}",
            workspace_bin("clawpool-scripted-agent").display().to_string(),
            scenario_path.display().to_string(),
        ),
    )
    .expect("config");
    (repo, config)
}

const WORK: &str = r#"
prompt_log = ".prompts.jsonl"
trust_dialog = true
boot_dialog = true
[[prompt]]
steps = [{ do = "sleep", ms = 300 }, { do = "write_file", path = "out.txt", content = "done\n" }]
"#;

#[test]
fn a_trusted_lane_is_driven_from_spawn_to_finished() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, WORK, true, "");
    let lane = Lane::start(&sandbox, &repo, &config, "scripted", "write the file");
    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 0, "{events:?}");
    assert_kinds_in_order(&events, TRUSTED_BOOT_TO_FINISHED);
    let resolved = events
        .iter()
        .find(|e| e["kind"] == "lane.trust_resolved")
        .expect("resolved");
    assert_eq!(resolved["detail"]["method"], "auto_allowlisted");
    // Every transition carries its state change and evidence, with increasing seq.
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let accepted = events
        .iter()
        .find(|e| e["kind"] == "lane.prompt_accepted")
        .expect("accepted");
    assert_eq!(accepted["from"]["status"], "ready_for_prompt");
    assert_eq!(accepted["to"]["status"], "prompt_accepted");
    assert!(
        accepted["evidence"]["matched"]
            .as_str()
            .unwrap_or("")
            .contains("write the file")
    );
    assert_eq!(outcome["receipt"]["attempts"], 1);
    assert!(outcome["receipt"]["accepted_at"].as_u64() >= outcome["receipt"]["sent_at"].as_u64());
    assert_eq!(
        std::fs::read_to_string(repo.join("out.txt")).expect("work done"),
        "done\n"
    );
    let log = prompt_log(&repo);
    assert_eq!(log.iter().filter(|e| e["event"] == "prompt").count(), 1);
    assert!(
        log.iter()
            .any(|e| e["event"] == "trust" && e["choice"] == "yes")
    );
    // The same events are on disk, and .claw stays out of git.
    let on_disk = std::fs::read_to_string(repo.join(".claw/events.jsonl")).expect("events file");
    assert_eq!(
        on_disk.lines().count(),
        events.iter().filter(|e| e.get("seq").is_some()).count()
    );
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&repo)
        .output()
        .expect("git status");
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(!status.contains(".claw"), "{status}");
    assert!(sandbox.leftover_processes().is_empty());
}

/// gemini-cli 0.61.0 can save the trust clawpool gave it and lose the relaunch that applies it
/// (`docs/real-agents.md`); the scripted agent's `trust_needs_restart` does that every time.
/// The lane is restarted once, `trust_apply_secs` after the answer, comes up trusted from the
/// store and gets its prompt once; without the restart it would sit booting to its deadline.
#[test]
fn an_agent_that_saves_its_trust_without_applying_it_is_restarted_once_and_finishes() {
    let sandbox = Sandbox::new();
    let store = sandbox.dir.path().join("agent-trusted-folders.txt");
    let scenario = format!(
        "prompt_log = \".prompts.jsonl\"\ntrust_dialog = true\ntrust_store = {:?}\ntrust_needs_restart = true\n[[prompt]]\nsteps = [{{ do = \"write_file\", path = \"out.txt\", content = \"done\\n\" }}]\n",
        store.display().to_string()
    );
    let (repo, config) = setup(&sandbox, &scenario, true, "");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace("[handshake]\n", "[handshake]\ntrust_apply_secs = 2\n"),
    )
    .expect("config");
    let lane = Lane::start(&sandbox, &repo, &config, "scripted", "write the file");
    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 0, "{events:?}");
    assert_eq!(outcome["state"]["status"], "finished", "{events:?}");
    assert_kinds_in_order(
        &events,
        &[
            "lane.trust_required",
            "lane.dialog_answered",
            "lane.trust_resolved",
            "lane.restart_requested",
            "lane.restarted",
            "lane.ready",
            "lane.prompt_accepted",
            "lane.finished",
        ],
    );
    let requests: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "lane.restart_requested")
        .collect();
    assert_eq!(requests.len(), 1, "{events:?}");
    assert_eq!(requests[0]["detail"]["by"], "trust_not_applied");
    assert_eq!(requests[0]["evidence"]["rule"], "trust_not_applied");
    // Nothing was typed into the untrusted agent; the new one got the prompt once.
    assert_eq!(prompts_delivered(&repo), 1);
    assert_eq!(outcome["receipt"]["attempts"], 1);
    let log = prompt_log(&repo);
    assert_eq!(log.iter().filter(|e| e["event"] == "trust").count(), 1);
    assert_eq!(
        std::fs::read_to_string(&store).expect("the agent's store"),
        format!("{}\n", repo.display())
    );
    assert!(sandbox.leftover_processes().is_empty());
}

#[test]
fn an_untrusted_lane_blocks_types_nothing_and_waits_for_the_operator() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, WORK, false, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "write the file");
    lane.wait_kind("lane.trust_required");
    let blocked = lane.wait_kind("lane.blocked");
    assert_eq!(blocked["to"]["subphase"], "trust_prompt");
    assert!(
        !kinds(lane.seen())
            .iter()
            .any(|k| k == "lane.dialog_answered")
    );
    assert!(
        lane.prompt_log().is_empty(),
        "nothing reached the agent: {:?}",
        lane.prompt_log()
    );
    // The policy hands the question to a person, and the state file says what to do.
    let escalated = lane.wait_kind("lane.escalated");
    // The state file is written behind the event log: read once it holds the event.
    let state = || -> Value {
        clawpool_tests::state_file_at(
            &repo.join(".claw/worker-state.json"),
            escalated["seq"].as_u64().expect("seq"),
            PATIENCE,
        )
    };
    let next = escalated["detail"]["next_action"]
        .as_str()
        .unwrap_or_default();
    assert!(next.contains("clawpool trust lane"), "{escalated}");
    assert_eq!(state()["escalation"]["next_action"], next);

    let out = sandbox
        .clawpool()
        .arg("trust")
        .arg(&repo)
        .output()
        .expect("clawpool trust");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resolved = lane.wait_kind("lane.trust_resolved");
    assert_eq!(resolved["detail"]["method"], "manual");
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0);
    assert_kinds_in_order(
        &events,
        &[
            "lane.blocked",
            "lane.escalated",
            "lane.trust_resolved",
            "lane.ready",
            "lane.finished",
        ],
    );
    assert_eq!(prompts_delivered(&repo), 1);
    assert_eq!(state()["escalation"], Value::Null, "answered, it is past");
}

#[test]
fn enter_is_pressed_again_but_the_prompt_is_typed_once() {
    let sandbox = Sandbox::new();
    let scenario = "prompt_log = \".prompts.jsonl\"\nignore_first_enter = true\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let lane = Lane::start(&sandbox, &repo, &config, "scripted", "do it");
    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 0, "{events:?}");
    let sent: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "lane.prompt_sent")
        .collect();
    assert_eq!(sent.len(), 2, "Enter twice: {events:?}");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["kind"] == "lane.prompt_typed")
            .count(),
        1
    );
    assert_eq!(outcome["receipt"]["attempts"], 2);
    let prompts: Vec<Value> = prompt_log(&repo)
        .into_iter()
        .filter(|e| e["event"] == "prompt")
        .collect();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0]["text"], "do it");
}

#[test]
fn a_shell_is_never_typed_into() {
    let sandbox = Sandbox::new();
    for (ps1, target) in [
        ("$ ", "shell"),
        ("user@host:/somewhere/else$ ", "wrong_target"),
    ] {
        let extra = format!(
            "\n[profiles.fakeshell.launch]\ncommand = \"/bin/sh\"\nargs = [\"-i\"]\nenv = {{ PS1 = {ps1:?}, ENV = \"/dev/null\" }}\n"
        );
        let (repo, config) = setup(&sandbox, "", true, &extra);
        let lane = Lane::start(&sandbox, &repo, &config, "fakeshell", "rm -rf important");
        let (code, _, events) = lane.finish();
        assert_eq!(code, 1);
        let misdelivery = events
            .iter()
            .find(|e| e["kind"] == "lane.prompt_misdelivery")
            .unwrap_or_else(|| panic!("no misdelivery in {events:?}"));
        assert_eq!(misdelivery["detail"]["target"], target);
        let failed = events
            .iter()
            .find(|e| e["kind"] == "lane.failed")
            .expect("failed");
        assert_eq!(failed["to"]["failure"], "prompt_delivery");
        assert!(!kinds(&events).iter().any(|k| k == "lane.prompt_typed"));
        let raw = std::fs::read(repo.join(".claw/terminal.log")).expect("terminal log");
        assert!(
            !String::from_utf8_lossy(&raw).contains("important"),
            "the shell saw the prompt"
        );
        std::fs::remove_dir_all(&repo).expect("clean lane for the next case");
    }
}

#[test]
fn a_tool_permission_waits_for_the_operator() {
    let sandbox = Sandbox::new();
    let scenario = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "permission", tool = "Write(out.txt)" }, { do = "write_file", path = "out.txt", content = "ok\n" }]
"#;
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "write it");
    lane.wait_kind("lane.tool_permission_required");
    let blocked = lane.wait_kind("lane.blocked");
    assert_eq!(blocked["to"]["subphase"], "tool_permission");
    assert!(!repo.join("out.txt").exists());
    // The next action names the dialog's choices.
    let escalated = lane.wait_kind("lane.escalated");
    let next = escalated["detail"]["next_action"]
        .as_str()
        .unwrap_or_default();
    assert!(next.contains("choices: no, yes"), "{escalated}");

    // A choice the dialog does not have is refused, naming the ones it has; nothing pressed.
    let (code, refused) = verdict(&sandbox, &["answer", "--choice", "maybe"], &repo);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(refused["error"]["kind"], "lane_refused", "{refused}");
    assert_eq!(refused["error"]["verdict"], "refused");
    assert_eq!(
        refused["error"]["choices"],
        serde_json::json!(["no", "yes"])
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no choice \"maybe\"; its choices are: no, yes"),
        "{refused}"
    );
    // `trust` is for trust dialogs only.
    let (code, refused) = verdict(&sandbox, &["trust"], &repo);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(refused["error"]["kind"], "lane_refused", "{refused}");
    let refusal = lane.wait_kind("lane.operator_refused");
    assert_eq!(refusal["detail"]["command"], "answer --choice maybe");
    assert!(!repo.join("out.txt").exists());

    let (code, done) = verdict(&sandbox, &["answer", "--choice", "yes"], &repo);
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["verdict"], "done", "{done}");
    assert_eq!(done["command"], "answer --choice yes");
    assert_eq!(
        done["reason"],
        "answered dialog \"tool_permission\" with \"yes\""
    );
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:?}");
    assert_eq!(
        std::fs::read_to_string(repo.join("out.txt")).expect("written"),
        "ok\n"
    );
}

#[test]
fn a_screen_no_rule_knows_blocks_a_running_lane_until_it_goes_away() {
    let sandbox = Sandbox::new();
    let scenario = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "say", text = "Looking at the code" },
  { do = "sleep", ms = 500 },
  { do = "notice", text = "We're changing auto mode for everyone.\nRead more at example.com/auto-mode", ms = 8000 },
  { do = "write_file", path = "after.txt", content = "done\n" },
  { do = "sleep", ms = 300 },
]
"#;
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace("[handshake]\n", "[handshake]\nunknown_screen_secs = 1\n"),
    )
    .expect("config");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "do the work");
    lane.wait_kind("lane.running");
    // Mid-run, the notice: no rule knows it.
    let blocked = lane.wait_for("blocked on the notice", |e| {
        e["kind"] == "lane.blocked" && e["to"]["subphase"] == "unknown_dialog"
    });
    assert_eq!(blocked["evidence"]["rule"], "unknown_screen", "{blocked}");
    let excerpt = blocked["evidence"]["matched"].as_str().unwrap_or_default();
    assert!(
        excerpt.contains("We're changing auto mode for everyone.")
            && excerpt.contains("Enter to continue · Esc to cancel"),
        "{blocked}"
    );
    // The recovery policy hands it to a person with the excerpt.
    let escalated = lane.wait_for("the escalation", |e| {
        e["detail"]["recipe"] == "escalate_unknown_dialog" && e["detail"]["next_action"].is_string()
    });
    assert!(
        escalated["detail"]["next_action"]
            .as_str()
            .unwrap_or_default()
            .contains("screen excerpt"),
        "{escalated}"
    );
    assert!(!repo.join("after.txt").exists(), "still on the notice");
    // Once the notice goes away, the lane runs on and finishes.
    lane.wait_kind("lane.running");
    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 0, "{events:?}");
    assert_eq!(outcome["state"]["status"], "finished");
    assert!(repo.join("after.txt").exists());
    // Nothing was pressed while the notice showed.
    let notice = prompt_log(&repo)
        .into_iter()
        .find(|e| e["event"] == "notice")
        .expect("the notice went away");
    assert_eq!(notice["keys"], 0, "{notice}");
    assert!(!kinds(&events).iter().any(|k| k == "lane.dialog_answered"));
}

#[test]
fn long_prompts_go_to_a_launch_argument_or_the_task_file() {
    let sandbox = Sandbox::new();
    let long = format!("Please do the following carefully.\n{}", "step ".repeat(60));
    let scenario = "prompt_log = \".prompts.jsonl\"\n";

    // The scripted profile takes a prompt at launch.
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let (code, outcome, events) = Lane::start(&sandbox, &repo, &config, "scripted", &long).finish();
    assert_eq!(code, 0, "{events:?}");
    assert_eq!(outcome["receipt"]["method"], "launch_arg");
    let prompts: Vec<Value> = prompt_log(&repo)
        .into_iter()
        .filter(|e| e["event"] == "prompt")
        .collect();
    assert_eq!(prompts.len(), 1);
    assert_eq!(
        prompts[0]["text"].as_str().map(str::trim),
        Some(long.trim())
    );
    std::fs::remove_dir_all(&repo).expect("clean lane");

    // Without launch arguments the prompt goes to .claw/task.md and one line points at it.
    let (repo, config) = setup(&sandbox, scenario, true, "prompt_args = []\n");
    let (code, outcome, events) = Lane::start(&sandbox, &repo, &config, "scripted", &long).finish();
    assert_eq!(code, 0, "{events:?}");
    assert_eq!(outcome["receipt"]["method"], "task_file");
    assert_eq!(
        std::fs::read_to_string(repo.join(".claw/task.md"))
            .expect("task file")
            .trim(),
        long.trim()
    );
    let prompts: Vec<Value> = prompt_log(&repo)
        .into_iter()
        .filter(|e| e["event"] == "prompt")
        .collect();
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0]["text"]
            .as_str()
            .unwrap_or("")
            .contains(".claw/task.md")
    );
}

#[test]
fn a_crash_while_working_fails_the_lane_as_crashed() {
    let sandbox = Sandbox::new();
    let scenario =
        "[[prompt]]\nsteps = [{ do = \"sleep\", ms = 300 }, { do = \"crash\", code = 3 }]\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let (code, outcome, events) = Lane::start(&sandbox, &repo, &config, "scripted", "go").finish();
    assert_eq!(code, 1);
    assert_eq!(outcome["state"]["failure"], "worker_crashed", "{events:?}");
    let failed = events
        .iter()
        .find(|e| e["kind"] == "lane.failed")
        .expect("failed");
    assert_eq!(failed["evidence"]["rule"], "process_exit");
    assert_eq!(failed["evidence"]["matched"], "exit code 3");
}

/// Runs clawpool expecting bad input: exit 2, one JSON error naming the problem, nothing
/// started and nothing written in the lane.
fn bad_input(sandbox: &Sandbox, args: &[&str], config: &Path, repo: &Path) -> Value {
    let out = sandbox
        .clawpool()
        .args(args)
        .args(["--output-format", "json", "--config"])
        .arg(config)
        .arg("--cwd")
        .arg(repo)
        .output()
        .expect("clawpool runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !repo.join(".claw").exists(),
        "nothing written for bad input"
    );
    assert!(sandbox.leftover_processes().is_empty());
    serde_json::from_slice::<Value>(out.stderr.trim_ascii()).expect("one JSON error")["error"]
        .clone()
}

#[test]
fn bad_input_names_the_problem_and_starts_nothing() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, "", true, "");

    let err = bad_input(
        &sandbox,
        &["run", "--agent", "scripted", "--prompt", "fix\u{1b}[2J it"],
        &config,
        &repo,
    );
    assert_eq!(err["kind"], "invalid_prompt");
    assert!(
        err["message"]
            .as_str()
            .unwrap_or("")
            .contains("control character")
    );

    let err = bad_input(
        &sandbox,
        &["run", "--agent", "cursor", "--prompt", "x"],
        &config,
        &repo,
    );
    assert_eq!(err["kind"], "unknown_agent");
    assert!(err["message"].as_str().unwrap_or("").contains("claude"));

    let bad_regex = sandbox.dir.path().join("bad.toml");
    std::fs::write(
        &bad_regex,
        "[[profiles.scripted.rules]]\nname = \"broken\"\nsignal = \"working\"\nregion = \"screen\"\nmatch = { regex = \"(x\" }\n",
    )
    .expect("write");
    let err = bad_input(
        &sandbox,
        &["run", "--agent", "scripted", "--prompt", "x"],
        &bad_regex,
        &repo,
    );
    assert_eq!(err["kind"], "invalid_profile");
    let message = err["message"].as_str().unwrap_or("");
    assert!(
        message.contains("bad.toml:2") && message.contains("broken"),
        "{message}"
    );

    let unknown_region = sandbox.dir.path().join("region.toml");
    std::fs::write(
        &unknown_region,
        "[[profiles.scripted.rules]]\nname = \"where\"\nsignal = \"working\"\nregion = \"status_bar\"\nmatch = { contains = \"x\" }\n",
    )
    .expect("write");
    let err = bad_input(
        &sandbox,
        &["run", "--agent", "scripted", "--prompt", "x"],
        &unknown_region,
        &repo,
    );
    assert!(
        err["message"].as_str().unwrap_or("").contains("status_bar"),
        "{err}"
    );

    let typo = sandbox.dir.path().join("typo.toml");
    std::fs::write(&typo, "[profiles.scripted.launch]\ncomand = \"x\"\n").expect("write");
    let err = bad_input(
        &sandbox,
        &["run", "--agent", "scripted", "--prompt", "x"],
        &typo,
        &repo,
    );
    assert_eq!(err["kind"], "invalid_config");
    let message = err["message"].as_str().unwrap_or("");
    assert!(
        message.contains("typo.toml:2") && message.contains("comand"),
        "{message}"
    );
}

#[test]
fn explain_shows_the_deciding_rule_and_the_near_misses() {
    let sandbox = Sandbox::new();
    let screen = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/screens/codex-0.169.0/05-running-120x40.ansi");
    let out = sandbox
        .clawpool()
        .args([
            "explain",
            "--agent",
            "codex",
            "--output-format",
            "json",
            "--screen",
        ])
        .arg(&screen)
        .output()
        .expect("clawpool explain");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let obs = &doc["explanation"]["observation"];
    assert_eq!(obs["seen"]["signal"], "working", "{doc}");
    assert_eq!(obs["rule"], "working_indicator");
    assert!(
        obs["evidence"]
            .as_str()
            .unwrap_or("")
            .contains("esc to interrupt")
    );
    // The placeholder input line is visible, and it is not what decides.
    assert_eq!(doc["explanation"]["input_line"], "");

    let text = sandbox
        .clawpool()
        .args(["explain", "--agent", "claude", "--screen"])
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/screens/claude-2.1.330/14-provider_retry-120x40.txt"),
        )
        .output()
        .expect("clawpool explain");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("provider_retrying") && text.contains("MATCH"),
        "{text}"
    );
    assert!(text.contains("near miss"), "{text}");
}

#[test]
fn config_show_and_doctor_report_sources_and_problems() {
    let sandbox = Sandbox::new();
    let config = sandbox.dir.path().join("config.toml");
    std::fs::write(
        &config,
        "trusted_roots = [\"/no/such/root\"]\n[profiles.claude.launch]\ncommand = \"/opt/claude/bin/claude\"\n",
    )
    .expect("write");
    let out = sandbox
        .clawpool()
        .args(["config", "show", "--output-format", "json", "--config"])
        .arg(&config)
        .output()
        .expect("config show");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let from = config.display().to_string();
    assert_eq!(
        doc["profiles"]["claude"]["from"]["launch.command"],
        from.as_str()
    );
    assert_eq!(doc["trusted_roots"][0]["from"], from.as_str());

    let out = sandbox
        .clawpool()
        .args(["doctor", "--output-format", "json", "--config"])
        .arg(&config)
        .current_dir(sandbox.dir.path())
        .output()
        .expect("doctor");
    // Missing agents and trusted roots are warnings, as is running outside a repository.
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let repository = check(&doc, "repository");
    assert_eq!(repository["ok"], false, "{doc}");
    assert_eq!(repository["severity"], "warning", "{doc}");
    assert!(
        !sandbox.dir.path().join(".claw").exists(),
        "doctor creates nothing"
    );
    let details: Vec<String> = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| c["detail"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        details.iter().any(|d| d.contains("/no/such/root")),
        "{details:?}"
    );
    assert!(
        details.iter().any(|d| d.contains("/opt/claude/bin/claude")),
        "{details:?}"
    );

    let repo = git_repo(sandbox.dir.path(), "repo");
    let out = sandbox
        .clawpool()
        .args(["doctor", "--output-format", "json"])
        .current_dir(&repo)
        .output()
        .expect("doctor");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["ok"], true, "{doc}");
    assert!(
        doc["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .any(|c| c["detail"]
                .as_str()
                .unwrap_or("")
                .to_lowercase()
                .contains("no trusted_roots")),
        "{doc}"
    );
    for (name, severity) in [("git", "error"), ("tmux", "warning")] {
        let tool = check(&doc, name);
        assert_eq!(tool["ok"], true, "{doc}");
        assert_eq!(tool["severity"], severity, "{doc}");
    }
    // The registry's folder in the common git dir and the lanes root beside the repository:
    // both can be made, and neither is made by looking.
    let registry = repo.join(".git/clawpool");
    let lanes_root = sandbox.dir.path().join("repo.lanes");
    for (name, folder) in [("state folder", &registry), ("lanes root", &lanes_root)] {
        let found = check(&doc, name);
        assert_eq!(found["ok"], true, "{doc}");
        assert_eq!(found["severity"], "error", "{doc}");
        assert!(
            found["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&folder.display().to_string())),
            "{doc}"
        );
        assert!(!folder.exists(), "doctor made {}", folder.display());
    }
    assert!(!repo.join(".claw").exists(), "doctor creates nothing");

    // A file where the lanes root should be: an error, with the fix, and exit 1.
    std::fs::write(&lanes_root, "in the way").expect("file in the way");
    let out = sandbox
        .clawpool()
        .args(["doctor", "--repo"])
        .arg(&repo)
        .current_dir(sandbox.dir.path())
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "[FAIL] lanes root: {} is not a folder",
            lanes_root.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "fix: move {} out of the way",
            lanes_root.display()
        )),
        "{text}"
    );
    assert!(text.contains("[ok  ] state folder"), "{text}");
}

/// The doctor check named `name`.
fn check(doc: &Value, name: &str) -> Value {
    doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} check: {doc}"))
}

#[test]
fn the_state_file_follows_the_lane_and_reads_back_with_ages() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, WORK, true, "");
    let (code, _, _) = Lane::start(&sandbox, &repo, &config, "scripted", "write the file").finish();
    assert_eq!(code, 0);
    let out = sandbox
        .clawpool()
        .args(["state", "--output-format", "json"])
        .arg(&repo)
        .output()
        .expect("clawpool state");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["status"], "finished");
    assert_eq!(doc["lane_status"], "finished");
    assert_eq!(doc["agent"], "scripted");
    assert_eq!(doc["trust_gate_cleared"], true);
    assert_eq!(doc["prompt"]["attempts"], 1);
    assert_eq!(doc["lane_event"]["kind"], "lane.finished");
    assert_eq!(doc["last_event"]["kind"], "finished");
    assert!(doc["seconds_since_update"].as_u64().is_some());
    // No temporary files are left next to the state file.
    let leftovers: Vec<_> = std::fs::read_dir(repo.join(".claw"))
        .expect(".claw")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());

    let missing = sandbox
        .clawpool()
        .args(["state", "--output-format", "json"])
        .arg(sandbox.dir.path())
        .output()
        .expect("clawpool state");
    assert_eq!(missing.status.code(), Some(1));
    let err: Value = serde_json::from_slice(missing.stderr.trim_ascii()).expect("JSON error");
    assert_eq!(err["error"]["kind"], "missing_worker_state");

    // A state record cut off mid-write (a `clawpool run` lane keeps its record in its own
    // `.claw/`): an error a program can match on, never a crash.
    let state_file = repo.join(".claw/state.json");
    std::fs::write(&state_file, "{\"schema_version\": 1, \"status\": \"runn").expect("corrupt");
    let corrupted = sandbox
        .clawpool()
        .args(["state", "--output-format", "json"])
        .arg(&repo)
        .output()
        .expect("clawpool state");
    assert_eq!(corrupted.status.code(), Some(1));
    assert!(corrupted.stdout.is_empty(), "nothing on stdout");
    let err: Value = serde_json::from_slice(corrupted.stderr.trim_ascii()).expect("JSON error");
    assert_eq!(err["error"]["kind"], "invalid_state_file", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&state_file.display().to_string())),
        "{err}"
    );
}

#[test]
fn packet_validate_lists_every_problem_with_its_path() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let packet = sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"lanes": [{"name": "Bad Name", "prompt": "x"}, {"name": "ok", "prompt": "y", "worktree": "../../etc"}, {"name": "ok", "prompt": "z"}]}"#,
    )
    .expect("write packet");
    let out = sandbox
        .clawpool()
        .args(["packet", "validate", "--output-format", "json", "--repo"])
        .arg(&repo)
        .arg(&packet)
        .output()
        .expect("clawpool packet validate");
    assert_eq!(out.status.code(), Some(2));
    let err: Value = serde_json::from_slice(out.stderr.trim_ascii()).expect("JSON error");
    assert_eq!(err["error"]["kind"], "invalid_packet");
    let paths: Vec<&str> = err["error"]["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(|p| p["path"].as_str())
        .collect();
    assert!(paths.contains(&"$.lanes[0].name"), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.starts_with("$.lanes[1].worktree")),
        "{paths:?}"
    );
    assert!(
        paths.iter().any(|p| p.starts_with("$.lanes[2]")),
        "{paths:?}"
    );

    std::fs::write(
        &packet,
        r#"{"name": "fix-login", "prompt": "fix the login bug"}"#,
    )
    .expect("write");
    let out = sandbox
        .clawpool()
        .args(["packet", "validate", "--repo"])
        .arg(&repo)
        .arg(&packet)
        .output()
        .expect("clawpool packet validate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("fix-login"));
}

#[test]
fn attach_mirrors_a_pty_lane_read_only_until_it_ends() {
    let sandbox = Sandbox::new();
    let scenario = "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"say\", text = \"halfway there\" }, { do = \"sleep\", ms = 1500 }]\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "work slowly");
    lane.wait_kind("lane.running");
    let attach = sandbox
        .clawpool()
        .arg("attach")
        .arg(&repo)
        .output()
        .expect("clawpool attach");
    assert!(
        attach.status.success(),
        "{}",
        String::from_utf8_lossy(&attach.stderr)
    );
    let shown = String::from_utf8_lossy(&attach.stdout);
    assert!(
        shown.contains("halfway there"),
        "the mirror shows the lane's screen"
    );
    assert!(shown.contains("the lane has ended"));
    let (code, _, _) = lane.finish();
    assert_eq!(code, 0);
    // Read-only: the agent got exactly one prompt.
    assert_eq!(prompts_delivered(&repo), 1);
}

#[test]
fn a_launch_prompt_finished_between_two_looks_is_still_accepted() {
    let sandbox = Sandbox::new();
    // No steps: the agent takes the launch prompt and is done before any working screen.
    let scenario = "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = []\n";
    let (repo, config) = setup(&sandbox, scenario, true, "");
    let long = format!("Do this at once.\n{}", "quick ".repeat(50));
    let (code, outcome, events) = Lane::start(&sandbox, &repo, &config, "scripted", &long).finish();
    assert_eq!(code, 0, "{events:?}");
    assert_eq!(outcome["receipt"]["method"], "launch_arg");
    assert!(
        outcome["receipt"]["accepted_at"].as_u64().is_some(),
        "{outcome}"
    );
    assert_kinds_in_order(
        &events,
        &["lane.ready", "lane.prompt_accepted", "lane.finished"],
    );
}

/// Runs `clawpool ARGS... LANE --output-format json` (`clawpool send LANE ARGS...` for `send`);
/// returns the exit code and the one JSON document it printed (the verdict on stdout, or the
/// error on stderr).
fn verdict(sandbox: &Sandbox, args: &[&str], repo: &Path) -> (i32, Value) {
    let mut cmd = sandbox.clawpool();
    match args {
        ["send", text @ ..] => cmd.arg("send").arg(repo).args(text),
        _ => cmd.args(args).arg(repo),
    };
    let out = cmd
        .args(["--output-format", "json"])
        .output()
        .expect("clawpool operator command");
    let printed = if out.status.success() {
        &out.stdout
    } else {
        &out.stderr
    };
    let document = serde_json::from_slice(printed).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not one JSON document ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), document)
}

#[test]
fn operator_commands_say_what_the_lane_did_with_them() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, LONG_TASK, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "long task");
    let started = lane.wait_kind("lane.started");
    lane.wait_kind("lane.running");

    // No dialog on screen: answering or trusting is ignored, with the reason, and fails.
    for args in [&["answer", "--choice", "yes"][..], &["trust"]] {
        let (code, ignored) = verdict(&sandbox, args, &repo);
        assert_eq!(code, 1, "{args:?}: {ignored}");
        assert_eq!(ignored["error"]["kind"], "lane_ignored", "{ignored}");
        assert_eq!(ignored["error"]["verdict"], "ignored", "{ignored}");
        assert!(
            ignored["error"]["reason"]
                .as_str()
                .unwrap_or_default()
                .starts_with("no dialog on screen"),
            "{ignored}"
        );
    }
    let out = sandbox
        .clawpool()
        .args(["answer", "--choice", "yes"])
        .arg(&repo)
        .output()
        .expect("clawpool answer");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ignored `clawpool answer --choice yes`: no dialog on screen"),
        "{stderr}"
    );
    // The event says it in words, not as a Rust value.
    let ignored = lane.wait_kind("lane.operator_ignored");
    assert_eq!(
        ignored["detail"]["command"], "answer --choice yes",
        "{ignored}"
    );

    // Text sent to a working agent waits, and says so.
    let (code, queued) = verdict(&sandbox, &["send", "later"], &repo);
    assert_eq!(code, 0, "{queued}");
    assert_eq!(queued["verdict"], "done", "{queued}");
    assert_eq!(queued["send"], "queued", "{queued}");

    // A restart is done once the new worker runs; a stop once the worker ended.
    let (code, restarted) = verdict(&sandbox, &["restart"], &repo);
    assert_eq!(code, 0, "{restarted}");
    let again = lane.wait_kind("lane.started");
    let pid = again["detail"]["pid"].as_u64().expect("a pid");
    assert_ne!(again["detail"]["pid"], started["detail"]["pid"]);
    assert!(
        restarted["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("pid {pid}")),
        "{restarted}"
    );
    lane.wait_kind("lane.ready");
    let (code, stopped) = verdict(&sandbox, &["stop"], &repo);
    assert_eq!(code, 0, "{stopped}");
    assert_eq!(stopped["verdict"], "done", "{stopped}");
    let (code, _, _) = lane.finish();
    assert_eq!(code, 1, "stopped before the queued text was done");
    // Nothing drives the lane any more: a clear error.
    let (code, gone) = verdict(&sandbox, &["stop"], &repo);
    assert_eq!(code, 2, "{gone}");
    assert_eq!(gone["error"]["kind"], "lane_not_running", "{gone}");
}

/// Runs `clawpool ARGS... LANE` against a running lane and checks it took the command.
/// `clawpool send LANE TEXT` for the lane in `repo`; asserts it was taken.
fn send_text(sandbox: &Sandbox, repo: &Path, text: &str) {
    let out = sandbox
        .clawpool()
        .arg("send")
        .arg(repo)
        .arg(text)
        .output()
        .expect("clawpool send");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn control(sandbox: &Sandbox, args: &[&str], repo: &Path) {
    let out = sandbox
        .clawpool()
        .args(args)
        .arg(repo)
        .output()
        .expect("clawpool control command");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const TWO_TASKS: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "sleep", ms = 1500 }, { do = "write_file", path = "first.txt", content = "1\n" }]
[[prompt]]
steps = [{ do = "write_file", path = "second.txt", content = "2\n" }]
"#;

#[test]
fn text_sent_to_a_working_lane_is_delivered_when_it_is_idle_again() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, TWO_TASKS, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "first task");
    lane.wait_kind("lane.running");
    send_text(&sandbox, &repo, "second task");
    lane.wait_kind("lane.send_queued");
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:?}");
    // The second text waited for the first task to end, then went through the same delivery.
    let order = assert_kinds_in_order(
        &events,
        &[
            "lane.prompt_accepted",
            "lane.send_queued",
            "lane.prompt_round",
            "lane.prompt_sent",
            "lane.prompt_accepted",
            "lane.finished",
        ],
    );
    assert!(
        events[order[4]]["evidence"]["matched"]
            .as_str()
            .unwrap_or_default()
            .contains("second task"),
        "{:?}",
        events[order[4]]
    );
    let prompts: Vec<String> = prompt_log(&repo)
        .iter()
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(prompts, ["first task", "second task"]);
    assert!(repo.join("first.txt").exists() && repo.join("second.txt").exists());
    let finished = events
        .iter()
        .filter(|e| e["kind"] == "lane.finished")
        .count();
    assert_eq!(finished, 1, "finished only after the second text");
}

#[test]
fn bad_text_is_refused_before_it_reaches_the_lane() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "lane");
    let out = sandbox
        .clawpool()
        .args(["send", "--output-format", "json"])
        .arg(&repo)
        .arg("clear\u{1b}[2J")
        .output()
        .expect("clawpool send");
    assert_eq!(out.status.code(), Some(2));
    let err: Value = serde_json::from_slice(&out.stderr).expect("one JSON error");
    assert_eq!(err["error"]["kind"], "invalid_text");
    // No lane runs there: a clear error, not a hang.
    let out = sandbox
        .clawpool()
        .args(["stop", "--output-format", "json"])
        .arg(&repo)
        .output()
        .expect("clawpool stop");
    assert_ne!(out.status.code(), Some(0));
    let err: Value = serde_json::from_slice(&out.stderr).expect("one JSON error");
    assert_eq!(err["error"]["kind"], "lane_not_running", "{err}");
}

/// A first prompt that hangs until interrupted, after which the agent puts it back into its
/// input line (before any key typed meanwhile, as if typed into the restored line); the second
/// prompt writes a file.
const INTERRUPTED_THEN_MORE: &str = r#"
prompt_log = ".prompts.jsonl"
restore_prompt_on_interrupt_ms = 2000
[[prompt]]
steps = [{ do = "hang" }]
[[prompt]]
steps = [{ do = "write_file", path = "tests.txt", content = "added\n" }]
"#;

#[test]
fn text_sent_after_an_interrupt_reaches_the_agent_as_exactly_the_sent_text() {
    const FIRST: &str = "add a div function";
    const FOLLOWUP: &str = "please also add tests";
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, INTERRUPTED_THEN_MORE, true, "");
    let mut cmd = sandbox.clawpool();
    cmd.args(["run", "--output-format", "json", "--agent", "scripted"])
        .args(["--transport", "tmux", "--config"])
        .arg(&config)
        .arg("--cwd")
        .arg(&repo)
        .args(["--prompt", FIRST]);
    let mut lane = Lane {
        run: LaneRun::start(cmd, &sandbox.dir.path().join("clawpool-run.stderr")),
        repo: repo.clone(),
    };
    lane.wait_kind("lane.running");
    // The operator queues more for the lane, then presses Esc in its terminal to stop the
    // hanging turn. The agent's line looks empty while it finishes the interrupt, but the
    // prompt goes back in before anything typed now, so the text typed lands after it.
    send_text(&sandbox, &repo, FOLLOWUP);
    lane.wait_kind("lane.send_queued");
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join(".claw/worker-state.json")).expect("state file"),
    )
    .expect("state JSON");
    let target = state["transport"]["session"].as_str().expect("tmux target");
    let (socket, session) = target.split_once(':').expect("socket:session");
    let esc = sandbox
        .tmux()
        .args(["-L", socket, "send-keys", "-t", session, "Escape"])
        .status()
        .expect("tmux send-keys");
    assert!(esc.success());

    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 0, "{events:?}");
    assert_eq!(outcome["state"]["status"], "finished", "{outcome}");
    // What reached the agent: each prompt exactly as sent, nothing glued before or after.
    let prompts: Vec<String> = prompt_log(&repo)
        .iter()
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(prompts, [FIRST, FOLLOWUP]);
    let order = assert_kinds_in_order(
        &events,
        &[
            "lane.send_queued",
            "lane.prompt_round",
            "lane.input_cleared",
            "lane.prompt_sent",
            "lane.prompt_accepted",
            "lane.finished",
        ],
    );
    // What the line held when it was emptied: the prompt put back with the text typed after it.
    let cleared = events[order[2]]["detail"]["draft"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        cleared.contains(FIRST) && cleared.contains(FOLLOWUP),
        "{:?}",
        events[order[2]]
    );
    assert!(repo.join("tests.txt").exists());
}

const LONG_TASK: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "sleep", ms = 60000 }]
"#;

#[test]
fn a_restarted_lane_runs_a_new_worker_in_the_same_folder_and_redelivers_only_when_asked() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, LONG_TASK, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "long task");
    let started = lane.wait_kind("lane.started");
    lane.wait_kind("lane.running");

    // The prompt was taken: a plain restart starts the agent again and sends nothing.
    control(&sandbox, &["restart"], &repo);
    lane.wait_kind("lane.restart_requested");
    let restarted = lane.wait_kind("lane.restarted");
    assert_eq!(
        restarted["detail"]["redeliver_prompt"], false,
        "{restarted}"
    );
    let again = lane.wait_kind("lane.started");
    assert_ne!(again["detail"]["pid"], started["detail"]["pid"]);
    lane.wait_kind("lane.ready");
    assert_eq!(prompts_delivered(&repo), 1);

    // Asked to, it delivers the prompt again, counting on from the first delivery.
    control(&sandbox, &["restart", "--redeliver"], &repo);
    let restarted = lane.wait_kind("lane.restarted");
    assert_eq!(restarted["detail"]["redeliver_prompt"], true, "{restarted}");
    let sent = lane.wait_kind("lane.prompt_sent");
    assert_eq!(sent["detail"]["attempt"], 2, "{sent}");
    lane.wait_kind("lane.running");
    control(&sandbox, &["stop"], &repo);
    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 1, "stopped while working: {events:?}");
    assert_eq!(outcome["receipt"]["attempts"], 2);
    assert_eq!(prompts_delivered(&repo), 2);
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join(".claw/worker-state.json")).expect("state file"),
    )
    .expect("state JSON");
    assert_eq!(state["prompt"]["attempts"], 2);
    assert!(
        state["worker_id"]
            .as_str()
            .unwrap_or_default()
            .ends_with("-r2"),
        "{state}"
    );
    assert!(sandbox.leftover_processes().is_empty());
}

#[test]
fn stop_ends_a_working_lane_as_stopped_and_an_idle_one_as_finished() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, LONG_TASK, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "long task");
    lane.wait_kind("lane.running");
    control(&sandbox, &["stop"], &repo);
    let (code, outcome, events) = lane.finish();
    // A person ended it: not finished (exit 1), and not a failure either.
    assert_eq!(code, 1, "{events:?}");
    assert_eq!(outcome["state"]["status"], "stopped", "{outcome}");
    assert!(outcome["state"].get("failure").is_none(), "{outcome}");
    assert!(
        !events.iter().any(|e| e["kind"] == "lane.failed"),
        "{events:?}"
    );
    let stopped = events
        .iter()
        .find(|e| e["kind"] == "lane.stopped")
        .expect("stopped");
    assert_eq!(stopped["evidence"]["rule"], "operator_stop");
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join(".claw/worker-state.json")).expect("state file"),
    )
    .expect("state JSON");
    assert_eq!(state["lane_status"], "stopped", "{state}");
    // claw-code's vocabulary has no such status: its control plane's `terminate` is `finished`.
    assert_eq!(state["status"], "finished", "{state}");
    assert_eq!(state["last_event"]["kind"], "finished", "{state}");
    assert_eq!(state["failure"], Value::Null, "{state}");
    assert!(sandbox.leftover_processes().is_empty());

    // A lane with nothing to do (no prompt) is idle and done: stopping it finishes it.
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, LONG_TASK, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "");
    lane.wait_kind("lane.ready");
    control(&sandbox, &["stop"], &repo);
    let (code, outcome, _) = lane.finish();
    assert_eq!(code, 0);
    assert_eq!(outcome["state"]["status"], "finished");
}

/// A restart that drops the turn the agent was in (taken, not delivered again) leaves the new
/// agent idle with the work undone: stopping it then is `stopped`, not `finished`.
#[test]
fn stopping_a_lane_whose_restart_dropped_the_turn_in_flight_does_not_finish_it() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, LONG_TASK, true, "");
    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "long task");
    lane.wait_kind("lane.running");
    control(&sandbox, &["restart", "--resume"], &repo);
    let restarted = lane.wait_kind("lane.restarted");
    assert_eq!(restarted["detail"]["resume"], true, "{restarted}");
    assert_eq!(
        restarted["detail"]["redeliver_prompt"], false,
        "{restarted}"
    );
    lane.wait_kind("lane.ready");
    // Idle with its work not done, it would wait for ever: a person gets a next action.
    let escalated = lane.wait_kind("lane.escalated");
    assert!(
        escalated["detail"]["next_action"]
            .as_str()
            .unwrap_or_default()
            .contains("clawpool send"),
        "{escalated}"
    );
    // The state file is written behind the event log: read once it holds the event.
    let waiting = clawpool_tests::state_file_at(
        &repo.join(".claw/worker-state.json"),
        escalated["seq"].as_u64().expect("seq"),
        PATIENCE,
    );
    assert_eq!(waiting["lane_status"], "ready_for_prompt", "{waiting}");
    assert!(
        waiting["escalation"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("dropped the turn in flight"),
        "{waiting}"
    );
    control(&sandbox, &["stop"], &repo);
    let (code, outcome, events) = lane.finish();
    assert_eq!(code, 1, "{events:?}");
    assert_eq!(outcome["state"]["status"], "stopped", "{outcome}");
    let stopped = events
        .iter()
        .find(|e| e["kind"] == "lane.stopped")
        .expect("stopped");
    assert_eq!(stopped["evidence"]["rule"], "operator_stop");
    assert!(
        stopped["evidence"]["matched"]
            .as_str()
            .unwrap_or_default()
            .contains("dropped the turn in flight"),
        "{stopped}"
    );
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join(".claw/worker-state.json")).expect("state file"),
    )
    .expect("state JSON");
    assert_eq!(state["lane_status"], "stopped", "{state}");
    assert!(
        state["lane_event"]["payload"]["evidence"]["matched"]
            .as_str()
            .unwrap_or_default()
            .contains("dropped the turn in flight"),
        "{state}"
    );
    assert!(sandbox.leftover_processes().is_empty());
}

/// Runs git in `repo` with a test identity; panics when it fails unless `may_fail`.
fn git_in(repo: &Path, args: &[&str], may_fail: bool) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=test", "-c", "user.email=test@localhost"])
        .args(args)
        .current_dir(repo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(may_fail || status.success(), "git {args:?} failed");
}

/// A merge stopped on a conflict in the lane's worktree holds delivery: the text an operator
/// sends waits, with `lane.delivery_held` naming the operation, until the merge is aborted;
/// then it goes in as usual.
#[test]
fn nothing_is_typed_while_a_git_operation_is_paused_in_the_worktree() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, TWO_TASKS, true, "");
    // Two branches that change one file differently, merged while the agent works.
    git_in(&repo, &["checkout", "-q", "-b", "other"], false);
    std::fs::write(repo.join("c.txt"), "theirs\n").expect("c.txt");
    git_in(&repo, &["add", "c.txt"], false);
    git_in(&repo, &["commit", "-q", "-m", "theirs"], false);
    git_in(&repo, &["checkout", "-q", "main"], false);
    std::fs::write(repo.join("c.txt"), "ours\n").expect("c.txt");
    git_in(&repo, &["add", "c.txt"], false);
    git_in(&repo, &["commit", "-q", "-m", "ours"], false);

    let mut lane = Lane::start(&sandbox, &repo, &config, "scripted", "first task");
    lane.wait_kind("lane.running");
    git_in(&repo, &["merge", "other"], true);
    assert!(
        repo.join(".git/MERGE_HEAD").exists(),
        "the merge stopped on its conflict"
    );
    send_text(&sandbox, &repo, "second task");
    let held = lane.wait_kind("lane.delivery_held");
    assert_eq!(held["detail"]["operation"]["kind"], "merge");
    assert_eq!(prompts_delivered(&repo), 1, "the second text waits");

    git_in(&repo, &["merge", "--abort"], false);
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:#?}");
    assert_kinds_in_order(
        &events,
        &[
            "lane.send_queued",
            "lane.prompt_round",
            "lane.delivery_held",
            "lane.delivery_resumed",
            "lane.prompt_typed",
            "lane.prompt_accepted",
            "lane.finished",
        ],
    );
    assert_eq!(prompts_delivered(&repo), 2);
    assert!(repo.join("second.txt").exists());
}
