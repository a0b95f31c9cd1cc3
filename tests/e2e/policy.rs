//! The recovery policy as an operator uses it: `clawpool policy explain` on a lane that really
//! crashed, `clawpool policy check` on a bad file, `clawpool recover` refusing what it cannot
//! run, and hooks getting lane events (a hanging hook killed at its timeout, never holding the
//! lane up).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_tests::{LaneRun, Sandbox, git_repo, workspace_bin};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(30);

const DEFAULT_POLICY: &str = include_str!("../../docs/policy-defaults.toml");

/// It takes the prompt, works a little, and crashes.
const CRASH: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "sleep", ms = 300 }, { do = "crash", code = 3 }]
"#;

/// It takes the prompt, works a little, writes a file and is done.
const WORK: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "sleep", ms = 300 }, { do = "write_file", path = "out.txt", content = "done\n" }]
"#;

/// A policy that escalates a crash instead of restarting it (so the lane stays failed), with a
/// rule before it that does not match, a notify rule, and the restart rule after it.
const ESCALATE_CRASHES: &str = r#"
[[hooks]]
name = "noop"
command = "true"

[[rules]]
name = "interrupt-stalled"
when = { status = "running", trigger = "stalled" }
then = { action = "recover", recipe = "interrupt_and_nudge" }

[[rules]]
name = "tell-on-failure"
when = { status = "failed" }
then = { action = "notify", hook = "noop" }

[[rules]]
name = "escalate-crash"
description = "A crash goes to a person, never restarted."
when = { status = "failed", failure = ["worker_crashed", "worker_lost"], recovery = "none" }
then = { action = "escalate", reason = "the worker crashed", next_action = "read clawpool events {lane}" }

[[rules]]
name = "restart-crashed-worker"
when = { status = "failed", failure = ["worker_crashed", "worker_lost"] }
then = { action = "recover", recipe = "restart_crashed_worker" }
"#;

/// A trusted lane repository, the scenario, a policy file with `policy`, and a config that
/// points the `scripted` profile at the built agent and names the policy file.
fn setup(sandbox: &Sandbox, scenario: &str, policy: &str) -> (PathBuf, PathBuf) {
    let repo = git_repo(sandbox.dir.path(), "lane");
    let scenario_path = sandbox.dir.path().join("scenario.toml");
    std::fs::write(&scenario_path, scenario).expect("scenario");
    let policy_path = sandbox.dir.path().join("policy.toml");
    std::fs::write(&policy_path, policy).expect("policy");
    let config = sandbox.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "policy = {:?}\ntrusted_roots = [{:?}]\n[handshake]\naccept_timeout_secs = 3\nfinish_idle_ms = 500\n\n[profiles.scripted.launch]\ncommand = {:?}\nenv = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            policy_path.display().to_string(),
            sandbox.dir.path().display().to_string(),
            workspace_bin("clawpool-scripted-agent").display().to_string(),
            scenario_path.display().to_string(),
        ),
    )
    .expect("config");
    (repo, config)
}

/// Starts `clawpool run` of the scripted agent in `repo`.
fn start_lane(sandbox: &Sandbox, repo: &Path, config: &Path) -> (LaneRun, PathBuf) {
    let mut cmd = sandbox.clawpool();
    cmd.args(["run", "--output-format", "json", "--agent", "scripted"])
        .arg("--config")
        .arg(config)
        .arg("--cwd")
        .arg(repo)
        .args(["--prompt", "do the work"]);
    let stderr = sandbox.dir.path().join("clawpool-run.stderr");
    (LaneRun::start(cmd, &stderr), stderr)
}

/// `clawpool run` of the scripted agent in `repo` to its end: exit code, outcome, every line,
/// and the file with clawpool's stderr.
fn run_lane(
    sandbox: &Sandbox,
    repo: &Path,
    config: &Path,
    patience: Duration,
) -> (i32, Value, Vec<Value>, PathBuf) {
    let (mut run, stderr) = start_lane(sandbox, repo, config);
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        String::new,
    );
    let status = run.wait_exit(patience);
    (
        status.code().unwrap_or(-1),
        outcome["outcome"].clone(),
        std::mem::take(&mut run.seen),
        stderr,
    )
}

/// Runs `clawpool ARGS`: exit code, stdout, stderr.
fn clawpool(sandbox: &Sandbox, args: &[&str]) -> (i32, String, String) {
    let out = sandbox
        .clawpool()
        .args(args)
        .output()
        .expect("clawpool runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_error(stderr: &str) -> Value {
    serde_json::from_str(stderr.trim())
        .unwrap_or_else(|e| panic!("one JSON document on stderr ({e}): {stderr}"))
}

fn rule<'a>(explained: &'a Value, name: &str) -> &'a Value {
    explained["rules"]
        .as_array()
        .and_then(|rules| rules.iter().find(|r| r["rule"] == name))
        .unwrap_or_else(|| panic!("rule {name} explained: {explained:#}"))
}

#[test]
fn policy_explain_shows_which_rule_decides_for_a_crashed_lane() {
    let sandbox = Sandbox::new();
    let (repo, config) = setup(&sandbox, CRASH, ESCALATE_CRASHES);
    let (code, outcome, lines, _) = run_lane(&sandbox, &repo, &config, PATIENCE);
    assert_eq!(code, 1, "{lines:#?}");
    assert_eq!(outcome["state"]["failure"], "worker_crashed", "{outcome}");
    // The lane ran with this policy: escalated, never restarted.
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["kind"].as_str()).collect();
    assert!(kinds.contains(&"lane.escalated"), "{kinds:?}");
    assert!(!kinds.contains(&"lane.restarted"), "{kinds:?}");

    let repo_arg = repo.display().to_string();
    let config_arg = config.display().to_string();
    let (code, stdout, stderr) = clawpool(
        &sandbox,
        &[
            "policy",
            "explain",
            &repo_arg,
            "--config",
            &config_arg,
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let explained: Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(explained["lane"], "lane");
    assert_eq!(explained["state"], "failed{worker_crashed}");
    let policy_file = sandbox.dir.path().join("policy.toml");
    assert_eq!(explained["policy"], policy_file.display().to_string());
    let facts = &explained["facts"];
    assert_eq!(facts["status"], "failed", "{facts}");
    assert_eq!(facts["failure"], "worker_crashed");
    assert_eq!(facts["trigger"], "worker_exited");
    assert_eq!(facts["subphase"], Value::Null);
    assert_eq!(facts["green"], "none");
    assert_eq!(facts["freshness"], "unknown");
    assert_eq!(facts["recovery"], "none");
    assert_eq!(facts["attempts"], serde_json::json!({}));
    assert!(facts["seconds_in_state"].is_u64() && facts["seconds_since_progress"].is_u64());

    let names: Vec<&str> = explained["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["rule"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "interrupt-stalled",
            "tell-on-failure",
            "escalate-crash",
            "restart-crashed-worker"
        ]
    );
    let stalled = rule(&explained, "interrupt-stalled");
    assert_eq!(stalled["outcome"], "not_matched");
    assert_eq!(stalled["matched"], false);
    assert_eq!(
        stalled["reasons"][0],
        serde_json::json!({"condition": "status = running", "met": false, "why": "lane is failed"})
    );
    assert_eq!(stalled["reasons"][1]["why"], "trigger is worker_exited");
    assert_eq!(rule(&explained, "tell-on-failure")["outcome"], "notifies");
    let deciding = rule(&explained, "escalate-crash");
    assert_eq!(deciding["outcome"], "decides");
    assert_eq!(deciding["index"], 3);
    assert_eq!(deciding["action"]["action"], "escalate");
    let conditions: Vec<(&str, bool)> = deciding["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .map(|r| (r["condition"].as_str().unwrap_or(""), r["met"] == true))
        .collect();
    assert_eq!(
        conditions,
        [
            ("status = failed", true),
            ("failure in [worker_crashed, worker_lost]", true),
            ("recovery = none", true)
        ]
    );
    let shadowed = rule(&explained, "restart-crashed-worker");
    assert_eq!(
        (shadowed["matched"].clone(), shadowed["outcome"].clone()),
        (Value::Bool(true), "shadowed".into())
    );
    assert_eq!(explained["decision"]["rule"], "escalate-crash");
    assert_eq!(
        explained["ledger"],
        Value::Null,
        "an escalation is not limited by the ledger"
    );
    assert_eq!(
        explained["decision"]["action"]["reason"],
        "the worker crashed"
    );
    assert_eq!(explained["notifies"][0]["rule"], "tell-on-failure");

    // The same for people.
    let (code, text, stderr) = clawpool(
        &sandbox,
        &["policy", "explain", &repo_arg, "--config", &config_arg],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        text.starts_with("lane lane: failed{worker_crashed}"),
        "{text}"
    );
    assert!(
        text.contains("#3 escalate-crash: DECIDES -> escalate: the worker crashed\n    met     status = failed (lane is failed)"),
        "{text}"
    );
    assert!(
        text.contains("#1 interrupt-stalled: does not match"),
        "{text}"
    );
    assert!(
        text.contains("decision: escalate-crash -> escalate: the worker crashed"),
        "{text}"
    );
    assert!(
        text.contains("next action: read clawpool events lane"),
        "{text}"
    );

    // With the shipped defaults (a config naming no policy file) the restart rule decides.
    let defaults = sandbox.dir.path().join("defaults.toml");
    std::fs::write(&defaults, "").expect("config");
    let defaults_arg = defaults.display().to_string();
    let (code, stdout, stderr) = clawpool(
        &sandbox,
        &[
            "policy",
            "explain",
            &repo_arg,
            "--config",
            &defaults_arg,
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let explained: Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(explained["policy"], "docs/policy-defaults.toml");
    assert_eq!(explained["ledger"]["verdict"], "attempt", "{explained:#}");
    assert_eq!(explained["ledger"]["attempt"], 1);
    assert_eq!(explained["decision"]["rule"], "restart-crashed-worker");
    assert_eq!(
        explained["decision"]["action"],
        serde_json::json!({"action": "recover", "recipe": "restart_crashed_worker"})
    );

    // `recover` without --recipe takes the policy's decision: an escalation is not a recipe…
    let (code, _, stderr) = clawpool(
        &sandbox,
        &[
            "recover",
            &repo_arg,
            "--config",
            &config_arg,
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    let error = json_error(&stderr);
    assert_eq!(error["error"]["kind"], "no_recipe", "{error}");
    assert_eq!(error["error"]["decision"]["rule"], "escalate-crash");
    // … and the defaults' restart cannot reach a lane nothing drives any more.
    let (code, _, stderr) = clawpool(
        &sandbox,
        &[
            "recover",
            &repo_arg,
            "--config",
            &defaults_arg,
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    let error = json_error(&stderr);
    assert_eq!(error["error"]["kind"], "lane_not_running", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the lane has ended (failed{worker_crashed})")),
        "{error}"
    );
    assert!(sandbox.leftover_processes().is_empty());
}

#[test]
fn policy_check_lists_every_problem_with_its_rule_and_key() {
    let sandbox = Sandbox::new();
    let bad = sandbox.dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        r#"
[[rules]]
name = "first"
when = {}
then = { action = "close_out" }

[[rules]]
name = "restart-crashed"
when = { status = "failed", failure = ["worker_crash"] }
then = { action = "recover", recipe = "restart" }

[restart]
factor = 0
"#,
    )
    .expect("policy");
    let bad_arg = bad.display().to_string();
    let (code, stdout, stderr) = clawpool(
        &sandbox,
        &["policy", "check", &bad_arg, "--output-format", "json"],
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let error = json_error(&stderr);
    assert_eq!(error["error"]["kind"], "invalid_policy");
    let problems = error["error"]["problems"].as_array().expect("problems");
    let found: Vec<(Value, &str)> = problems
        .iter()
        .map(|p| (p["at"].clone(), p["key"].as_str().unwrap_or("")))
        .collect();
    let rule2 = serde_json::json!({"in": "rule", "index": 2, "name": "restart-crashed"});
    assert!(
        found.contains(&(rule2.clone(), "when.failure")),
        "{problems:#?}"
    );
    assert!(found.contains(&(rule2, "then.recipe")), "{problems:#?}");
    assert!(
        found.contains(&(
            serde_json::json!({"in": "table", "name": "restart"}),
            "factor"
        )),
        "{problems:#?}"
    );
    assert_eq!(problems.len(), 3, "{problems:#?}");

    let (code, _, stderr) = clawpool(&sandbox, &["policy", "check", &bad_arg]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(&format!(
            "{bad_arg}: rule #2 \"restart-crashed\": when.failure: unknown failure class \"worker_crash\""
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{bad_arg}: rule #2 \"restart-crashed\": then.recipe: unknown recipe \"restart\""
        )),
        "{stderr}"
    );

    // The shipped defaults, and the file once fixed, are fine.
    let defaults = sandbox.dir.path().join("defaults.toml");
    std::fs::write(&defaults, DEFAULT_POLICY).expect("policy");
    let defaults_arg = defaults.display().to_string();
    let (code, stdout, stderr) = clawpool(&sandbox, &["policy", "check", &defaults_arg]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.trim(),
        format!("{defaults_arg}: ok (16 rule(s), 0 hook(s))")
    );
    let (code, stdout, stderr) = clawpool(
        &sandbox,
        &["policy", "check", &defaults_arg, "--output-format", "json"],
    );
    assert_eq!(code, 0, "{stderr}");
    let ok: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(ok["valid"], true);
    assert_eq!(ok["rules"][0], "answer-trust-again");
    // A file that is not there is the same kind of error.
    let missing = sandbox.dir.path().join("missing.toml");
    let (code, _, stderr) = clawpool(
        &sandbox,
        &[
            "policy",
            "check",
            &missing.display().to_string(),
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 2);
    assert_eq!(json_error(&stderr)["error"]["kind"], "invalid_policy");
}

#[test]
fn recover_refuses_unknown_recipes_and_recipes_it_cannot_run_by_hand() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "lane");
    let repo_arg = repo.display().to_string();
    let (code, stdout, stderr) = clawpool(
        &sandbox,
        &[
            "recover",
            &repo_arg,
            "--recipe",
            "restart",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    let error = json_error(&stderr);
    assert_eq!(error["error"]["kind"], "unknown_recipe");
    assert_eq!(
        error["error"]["recipes"],
        serde_json::json!([
            "answer_trust_again",
            "escalate_unknown_dialog",
            "restart_after_misdelivery",
            "resubmit_prompt",
            "interrupt_and_nudge",
            "restart_crashed_worker",
            "wait_for_provider",
            "merge_forward_stale_branch"
        ])
    );
    let (code, _, stderr) = clawpool(&sandbox, &["recover", &repo_arg, "--recipe", "restart"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(
            "unknown recipe \"restart\"; recipes: answer_trust_again, escalate_unknown_dialog"
        ),
        "{stderr}"
    );

    // Interrupting and nudging needs a key press no operator command makes: refused.
    let (code, _, stderr) = clawpool(
        &sandbox,
        &[
            "recover",
            &repo_arg,
            "--recipe",
            "interrupt_and_nudge",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    let error = json_error(&stderr);
    assert_eq!(error["error"]["kind"], "recipe_not_runnable_by_hand");
    assert_eq!(
        error["error"]["runnable_by_hand"],
        serde_json::json!([
            "answer_trust_again",
            "restart_after_misdelivery",
            "restart_crashed_worker"
        ])
    );

    // A recipe it can run, on a folder where no lane runs.
    let (code, _, stderr) = clawpool(
        &sandbox,
        &[
            "recover",
            &repo_arg,
            "--recipe",
            "restart_crashed_worker",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(json_error(&stderr)["error"]["kind"], "lane_not_running");
}

#[test]
fn recover_restarts_a_running_lane_through_its_control_socket() {
    let sandbox = Sandbox::new();
    // The first worker hangs at work. The agent reads its scenario when it starts: the one
    // started again (once the scenario is rewritten below) does the work.
    let scenario = "prompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"hang\" }]\n";
    let (repo, config) = setup(&sandbox, scenario, DEFAULT_POLICY);
    let (mut run, _) = start_lane(&sandbox, &repo, &config);
    run.wait_for(
        "lane.running",
        PATIENCE,
        |e| e["kind"] == "lane.running",
        String::new,
    );
    std::fs::write(sandbox.dir.path().join("scenario.toml"), WORK).expect("scenario");
    let repo_arg = repo.display().to_string();
    let config_arg = config.display().to_string();
    // A healthy running lane: no rule decides a recipe, so nothing is sent.
    let (code, stdout, stderr) = clawpool(
        &sandbox,
        &[
            "recover",
            &repo_arg,
            "--config",
            &config_arg,
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let error = json_error(&stderr);
    assert_eq!(error["error"]["kind"], "no_recipe", "{error}");
    assert_eq!(error["error"]["decision"], Value::Null);

    let (code, stdout, stderr) = clawpool(
        &sandbox,
        &[
            "recover",
            &repo_arg,
            "--config",
            &config_arg,
            "--recipe",
            "restart_crashed_worker",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let sent: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(sent["recipe"], "restart_crashed_worker");
    // The lane's verdict: done once the new worker runs.
    assert_eq!(sent["verdict"], "done", "{sent}");
    assert!(
        sent["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("restarted: a new worker"),
        "{sent}"
    );
    assert_eq!(
        sent["command"],
        serde_json::json!({"command": "restart", "by": "operator:restart_crashed_worker",
                           "resume": false, "redeliver": true})
    );
    let requested = run.wait_for(
        "lane.restart_requested",
        PATIENCE,
        |e| e["kind"] == "lane.restart_requested",
        String::new,
    );
    assert_eq!(requested["detail"]["by"], "operator:restart_crashed_worker");
    let restarted = run.wait_for(
        "lane.restarted",
        PATIENCE,
        |e| e["kind"] == "lane.restarted",
        String::new,
    );
    assert_eq!(restarted["detail"]["redeliver_prompt"], true, "{restarted}");
    let outcome = run.wait_for(
        "the outcome",
        PATIENCE,
        |e| e.get("outcome").is_some(),
        String::new,
    );
    assert_eq!(run.wait_exit(PATIENCE).code(), Some(0), "{}", run.report());
    assert_eq!(outcome["outcome"]["state"]["status"], "finished");
    // The restarted worker got the prompt again and did the work.
    let prompts = std::fs::read_to_string(repo.join(".prompts.jsonl")).expect("prompt log");
    assert_eq!(prompts.lines().count(), 2, "{prompts}");
    assert_eq!(
        std::fs::read_to_string(repo.join("out.txt")).expect("the work"),
        "done\n"
    );
    assert!(sandbox.leftover_processes().is_empty());
}

/// Runs once `run_lane::drive` hands every lane event to `hooks::with_hooks`.
#[test]
fn hooks_get_their_events_and_a_hanging_hook_never_holds_the_lane_up() {
    let sandbox = Sandbox::new();
    let got = sandbox.dir.path().join("got.jsonl");
    let policy = format!(
        r#"{DEFAULT_POLICY}
[[hooks]]
name = "record"
command = ["/bin/sh", "-c", "{{ cat; echo; }} >> \"$0\"", {got:?}]
events = ["lane.finished"]

[[hooks]]
name = "hang"
command = "cat > /dev/null; echo 'still waiting' >&2; exec sleep 300"
timeout = "8s"
events = ["lane.started"]
"#,
        got = got.display().to_string()
    );
    let (repo, config) = setup(&sandbox, WORK, &policy);
    let (code, _, lines, stderr) = run_lane(&sandbox, &repo, &config, Duration::from_secs(60));
    assert_eq!(code, 0, "{lines:#?}");
    let finished = lines
        .iter()
        .find(|l| l["kind"] == "lane.finished")
        .expect("the lane finished");
    let started = lines
        .iter()
        .find(|l| l["kind"] == "lane.started")
        .expect("the lane started");

    // The record hook got the lane.finished event's JSON on its stdin, once.
    let received: Vec<Value> = std::fs::read_to_string(&got)
        .expect("the record hook ran")
        .lines()
        .map(|l| serde_json::from_str(l).expect("the event JSON"))
        .collect();
    assert_eq!(received, std::slice::from_ref(finished));

    // Every run is in hooks.log next to the lane's events.jsonl.
    let log: Vec<Value> = std::fs::read_to_string(repo.join(".claw/hooks.log"))
        .expect("hooks.log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON document per line"))
        .collect();
    let record = log
        .iter()
        .find(|l| l["hook"] == "record")
        .expect("the record hook is logged");
    assert_eq!(record["outcome"], "succeeded", "{record}");
    assert_eq!(record["event"], "lane.finished");
    assert_eq!(record["seq"], finished["seq"]);
    let hang = log
        .iter()
        .find(|l| l["hook"] == "hang")
        .expect("the hanging hook is logged");
    assert_eq!(hang["outcome"], "timed_out", "{hang}");
    assert_eq!(hang["event"], "lane.started");
    assert_eq!(hang["signal"], libc::SIGKILL);
    assert!(hang["duration_ms"].as_u64() >= Some(8000), "{hang}");
    assert!(hang["stderr_tail"] == "still waiting\n", "{hang}");
    // The lane went on while the hook hung: it finished before the hook was killed.
    assert!(
        hang["started_at_ms"].as_u64() >= started["at_ms"].as_u64()
            && finished["at_ms"].as_u64() < hang["ended_at_ms"].as_u64(),
        "finished at {}, hook killed at {}",
        finished["at_ms"],
        hang["ended_at_ms"]
    );
    let warnings = std::fs::read_to_string(stderr).unwrap_or_default();
    assert!(warnings.contains("hook hang on lane.started"), "{warnings}");
    // The hook's process group is gone with it.
    assert!(sandbox.leftover_processes().is_empty());
}
