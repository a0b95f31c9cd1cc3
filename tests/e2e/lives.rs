//! Lanes' lives across runs are what happened (issue 27, "What to build" 6): a person's `stop`
//! is `stopped` everywhere a lane is read — not a failure, not re-run by a later spawn —, and
//! `send` to a stopped or finished lane starts its agent again with the profile's resume
//! arguments and delivers the text once, as the next turn of the same session.

use std::process::Output;
use std::time::Duration;

use clawpool_tests::LaneRun;
use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// Two turns: a first that works long enough to be stopped (or, `quick`, finishes at once),
/// and a second, run only by an agent that resumed the session (the scripted agent's
/// `--resume` counts the prompts in its log), that leaves `followup.txt`.
fn two_turns(quick: bool) -> String {
    let first = if quick {
        r#"{ do = "write_file", path = "out.txt", content = "done\n" }, { do = "git_commit", message = "lane work" }"#
    } else {
        r#"{ do = "sleep", ms = 60000 }"#
    };
    format!(
        r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{first}]
[[prompt]]
steps = [
  {{ do = "write_file", path = "followup.txt", content = "more\n" }},
  {{ do = "git_commit", message = "follow-up work" }},
]
"#
    )
}

const ALPHA: &str = r#"{"name": "alpha", "agent": "scripted", "prompt": "do alpha"}"#;

/// Runs `clawpool ARGS` in the repository with the test's configuration where it takes one.
fn clawpool(s: &Setup, args: &[&str]) -> Output {
    s.sandbox
        .clawpool()
        .args(args)
        .current_dir(&s.repo)
        .output()
        .expect("clawpool runs")
}

/// The texts the lane's scripted agent took as prompts, in order, from its prompt log.
fn prompts(s: &Setup) -> Vec<String> {
    std::fs::read_to_string(s.lanes_dir().join("alpha/.prompts.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn events(s: &Setup) -> Vec<Value> {
    std::fs::read_to_string(s.repo.join(".git/clawpool/lanes/alpha/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn state(s: &Setup) -> Value {
    let out = clawpool(s, &["state", "alpha", "--output-format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("state JSON")
}

fn send(s: &Setup, text: &str) -> Output {
    let config = s.config.display().to_string();
    clawpool(
        s,
        &[
            "send",
            "alpha",
            text,
            "--config",
            &config,
            "--output-format",
            "json",
        ],
    )
}

#[test]
fn stop_makes_a_lane_stopped_everywhere_it_is_read_and_a_later_spawn_leaves_it() {
    let s = setup();
    let mut run = s.spawn_until_running(&two_turns(false), ALPHA);
    let stop = clawpool(&s, &["stop", "alpha", "--output-format", "json"]);
    assert!(stop.status.success(), "{}", stderr(&stop));
    let verdict: Value = serde_json::from_slice(&stop.stdout).expect("verdict JSON");
    assert!(
        verdict["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("the lane is stopped"),
        "{verdict}"
    );
    // Not finished: spawn says so by its exit.
    assert_eq!(
        run.wait_exit(std::time::Duration::from_secs(30)).code(),
        Some(1)
    );

    let stopped = state(&s);
    assert_eq!(stopped["lane_status"], "stopped", "{stopped}");
    assert_eq!(
        stopped["status"], "finished",
        "claw-code's nearest: {stopped}"
    );
    assert_eq!(stopped["failure"], Value::Null, "{stopped}");
    assert_eq!(stopped["escalation"], Value::Null, "{stopped}");
    let board = clawpool(&s, &["board", "--output-format", "json"]);
    let board: Value = serde_json::from_slice(&board.stdout).expect("board JSON");
    assert_eq!(board["lanes"][0]["lane_status"], "stopped", "{board}");
    let text_board = String::from_utf8_lossy(&clawpool(&s, &["board"]).stdout).into_owned();
    assert!(text_board.contains("stopped"), "{text_board}");
    let config = s.config.display().to_string();
    let explain = clawpool(&s, &["policy", "explain", "alpha", "--config", &config]);
    let explained = String::from_utf8_lossy(&explain.stdout);
    // No rule decides for it: no "fix the environment" of a failure that never was.
    assert!(explained.contains("decision: none"), "{explained}");
    assert!(!explained.contains("infra-failure: matches"), "{explained}");

    // A later spawn of the same packet does not type the task into it again.
    let again = s.spawn(ALPHA, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let log = String::from_utf8_lossy(&again.stdout);
    assert!(log.contains("alpha skipped: stopped"), "{log}");
    assert_eq!(prompts(&s), ["do alpha"]);

    // A follow-up takes the stopped lane up again: the same session's next turn, not the task.
    let follow = send(&s, "please go on");
    assert!(follow.status.success(), "{}", stderr(&follow));
    assert_eq!(prompts(&s), ["do alpha", "please go on"]);
    assert!(s.lanes_dir().join("alpha/followup.txt").is_file());
    assert_eq!(state(&s)["lane_status"], "finished");
    assert!(s.sandbox.leftover_processes().is_empty());
}

#[test]
fn a_follow_up_to_a_finished_lane_is_delivered_once_as_the_second_prompt_of_its_session() {
    let s = setup();
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), two_turns(true)).expect("scenario");
    let out = s.spawn(ALPHA, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(state(&s)["lane_status"], "finished");
    let before = events(&s).len();

    let follow = send(&s, "now add a test");
    assert!(follow.status.success(), "{}", stderr(&follow));
    let verdict: Value = serde_json::from_slice(&follow.stdout).expect("verdict JSON");
    assert_eq!(verdict["verdict"], "done", "{verdict}");
    assert_eq!(verdict["send"], "delivered", "{verdict}");
    assert_eq!(verdict["state"]["status"], "finished", "{verdict}");

    // Exactly once, as the second prompt; the task never again.
    assert_eq!(prompts(&s), ["do alpha", "now add a test"]);
    // The agent resumed its session: it ran the scenario's second turn.
    assert!(s.lanes_dir().join("alpha/followup.txt").is_file());
    let after = &events(&s)[before..];
    let restarted = after
        .iter()
        .find(|e| e["kind"] == "lane.restarted")
        .expect("lane.restarted");
    assert_eq!(restarted["detail"]["by"], "send", "{restarted}");
    assert_eq!(restarted["detail"]["resume"], true, "{restarted}");
    assert_eq!(restarted["detail"]["previous"], "finished", "{restarted}");
    clawpool_tests::assert_kinds_in_order(
        after,
        &[
            "lane.restarted",
            "lane.started",
            "lane.prompt_sent",
            "lane.prompt_accepted",
            "lane.finished",
        ],
    );
    assert_eq!(
        after
            .iter()
            .filter(|e| e["kind"] == "lane.prompt_sent")
            .count(),
        1,
        "{after:?}"
    );
    assert_eq!(state(&s)["lane_status"], "finished");
    assert!(s.sandbox.leftover_processes().is_empty());

    // Commands on the ended lane answer from its record, not from a socket it no longer has.
    let stop = clawpool(&s, &["stop", "alpha"]);
    assert_eq!(stop.status.code(), Some(2));
    let said = stderr(&stop);
    assert!(
        said.contains("lane alpha ended finished") && said.contains("nothing to stop"),
        "{said}"
    );
    assert!(!said.contains("os error"), "{said}");
}

/// The lane's worker id as its state file has it.
fn worker_id(s: &Setup, lane: &str) -> String {
    let path = s.lanes_dir().join(lane).join(".claw/worker-state.json");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("state")).expect("JSON");
    doc["worker_id"].as_str().unwrap_or_default().to_owned()
}

/// Issue 27, point 1: a restart under a daemon that adopted the lane counted from 1 again
/// (`-r1` twice). The count goes on from the lane's earlier workers, whoever started them.
#[test]
fn a_restart_after_a_daemon_adopted_the_lane_counts_on_from_its_earlier_restarts() {
    let s = setup();
    let restart = |s: &Setup| {
        let out = clawpool(s, &["restart", "alpha", "--output-format", "json"]);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    // alpha is restarted once under the spawn that made it, then that spawn dies.
    crate::spawn::kill_supervisor_while_lanes_run_after(&s, &two_turns(false), |s| {
        restart(s);
        assert!(
            worker_id(s, "alpha").ends_with("-r1"),
            "{}",
            worker_id(s, "alpha")
        );
    });
    let mut daemon = crate::spawn::start_daemon(&s);
    // The daemon holds the lane once it records the adoption.
    wait_for_event(&s, "lane.adopted");
    restart(&s);
    assert!(
        worker_id(&s, "alpha").ends_with("-r2"),
        "{}",
        worker_id(&s, "alpha")
    );
    let restarts: Vec<Value> = events(&s)
        .into_iter()
        .filter(|e| e["kind"] == "lane.restarted")
        .map(|e| e["detail"]["restart"].clone())
        .collect();
    assert_eq!(restarts, [1, 2]);
    for lane in ["alpha", "beta"] {
        let out = clawpool(&s, &["stop", lane]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    crate::spawn::stop_daemon(&s);
    let _ = daemon.wait();
}

/// The repository's events as `clawpool events --all --follow` prints them: those recorded so
/// far, then each as it is appended (from before a lane exists, too), so a test awaits them
/// instead of reading a log again and again.
fn follow(s: &Setup) -> LaneRun {
    let mut cmd = s.sandbox.clawpool();
    cmd.args(["events", "--all", "--follow", "--output-format", "json"])
        .current_dir(&s.repo);
    LaneRun::start(cmd, &s.sandbox.dir.path().join("follow.stderr"))
}

/// Waits for alpha's first event `what` (recorded already, or within 30 s) on `events`.
fn alpha_event(events: &mut LaneRun, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    events.wait_for(
        what,
        Duration::from_secs(30),
        |e| e["lane"] == "alpha" && pred(e),
        String::new,
    )
}

/// alpha's first event that is `what` (recorded already, or within 30 s).
fn wait_until(s: &Setup, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    alpha_event(&mut follow(s), what, pred)
}

/// The first of alpha's events of `kind` (recorded already, or within 30 s).
fn wait_for_event(s: &Setup, kind: &str) -> Value {
    wait_until(s, kind, |e| e["kind"] == kind)
}

/// Whether `event` is the lane's record of the agent's hook `name`.
fn hook(event: &Value, name: &str) -> bool {
    event["kind"] == "lane.hook" && event["detail"]["event"] == name
}

/// Issue 27, point 2: a turn cut by `restart --resume` and then a daemon adopting the lane:
/// `stop` recorded `finished{no_changes}`, the dropped turn forgotten with the supervisor that
/// knew it. The lane's record keeps it (`prompt.turn_dropped`), so the adopting daemon's `stop`
/// makes the lane `stopped`, never `finished`.
#[test]
fn a_turn_a_restart_dropped_is_never_finished_after_a_daemon_adopted_the_lane() {
    let s = setup();
    crate::spawn::kill_supervisor_while_lanes_run_after(&s, &two_turns(false), |s| {
        let out = clawpool(
            s,
            &["restart", "alpha", "--resume", "--output-format", "json"],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        wait_for_event(s, "lane.escalated");
    });
    assert_eq!(state(&s)["prompt"]["turn_dropped"], true, "{}", state(&s));
    let mut daemon = crate::spawn::start_daemon(&s);
    wait_for_event(&s, "lane.adopted");
    // Adopted, it still says what a person must do: the adopting daemon escalates again right
    // after its `lane.adopted`, and writes the state file after that event.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let adopted = loop {
        let now = state(&s);
        let escalations = events(&s)
            .iter()
            .filter(|e| e["kind"] == "lane.escalated")
            .count();
        if escalations >= 2 && now["escalation"]["reason"].is_string() {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no escalation after adoption: {now}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(adopted["prompt"]["turn_dropped"], true, "{adopted}");
    assert!(
        adopted["escalation"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("dropped the turn in flight"),
        "{adopted}"
    );
    let out = clawpool(&s, &["stop", "alpha", "--output-format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stopped = state(&s);
    assert_eq!(stopped["lane_status"], "stopped", "{stopped}");
    assert!(
        stopped["lane_event"]["payload"]["evidence"]["matched"]
            .as_str()
            .unwrap_or_default()
            .contains("dropped the turn in flight"),
        "{stopped}"
    );
    assert!(!events(&s).iter().any(|e| e["kind"] == "lane.finished"));
    let out = clawpool(&s, &["stop", "beta"]);
    assert!(out.status.success(), "{}", stderr(&out));
    crate::spawn::stop_daemon(&s);
    let _ = daemon.wait();
}

/// Issue 27, point 7: the repository's private tmux server (`clawpool-control` and its
/// placeholder `sleep`) outlived every lane and `daemon --stop`.
#[test]
fn daemon_stop_leaves_no_tmux_server_once_its_lanes_ended() {
    let s = setup();
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), two_turns(true)).expect("scenario");
    let out = s.spawn(ALPHA, &["--detach", "--transport", "tmux"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for_event(&s, "lane.finished");
    crate::spawn::stop_daemon(&s);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !s.sandbox.leftover_tmux_sockets().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "a tmux server outlived its lanes and the daemon: {:?}",
            s.sandbox.leftover_tmux_sockets()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The test's scripted profile reporting through Claude Code's hooks (`hooks = "claude"`).
fn with_claude_hooks(s: &Setup) {
    let config = std::fs::read_to_string(&s.config).expect("config");
    std::fs::write(
        &s.config,
        config.replace(
            "[profiles.scripted.launch]\n",
            "[profiles.scripted.launch]\nhooks = \"claude\"\n",
        ),
    )
    .expect("config");
}

/// The hook settings clawpool gives Claude Code are written anew before every start of the
/// agent: a restart under a daemon that adopted the lane starts it on the profile's settings,
/// never on what was put in the file while it ran (here a hook command of the agent's own,
/// which would run at its next start, outside clawpool's rules).
#[test]
fn a_restart_after_adoption_starts_the_agent_on_hook_settings_written_anew() {
    let s = setup();
    with_claude_hooks(&s);
    // Each time the prompt goes in, the agent runs its UserPromptSubmit hooks as the settings
    // file says then, and works on.
    let scenario = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "hook", event = "UserPromptSubmit", payload = "{\"prompt\": \"do alpha\"}" },
  { do = "sleep", ms = 60000 },
]
"#;
    crate::spawn::kill_supervisor_while_lanes_run_after(&s, scenario, |s| {
        wait_until(s, "the first start's hook", |e| hook(e, "UserPromptSubmit"));
    });
    let mut daemon = crate::spawn::start_daemon(&s);
    wait_for_event(&s, "lane.adopted");
    // The file the agent was started on, wherever the lane keeps it.
    let settings = events(&s)
        .iter()
        .find_map(|e| {
            (e["kind"] == "lane.channel.opened")
                .then(|| {
                    e["detail"]["settings"]
                        .as_str()
                        .map(std::path::PathBuf::from)
                })
                .flatten()
        })
        .expect("the hook channel's settings file");
    let profile_settings = std::fs::read_to_string(&settings).expect("the lane's settings");
    let planted = s.sandbox.dir.path().join("planted");
    let hostile = serde_json::json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": format!("touch {}", planted.display())}]}]}});
    std::fs::write(&settings, hostile.to_string()).expect("tampered settings");
    let out = clawpool(
        &s,
        &["restart", "alpha", "--redeliver", "--output-format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mut hooks = follow(&s);
    for start in ["the first start's hook", "the restarted agent's hook"] {
        alpha_event(&mut hooks, start, |e| hook(e, "UserPromptSubmit"));
    }
    drop(hooks);
    assert!(!planted.exists(), "the planted hook ran");
    assert_eq!(
        std::fs::read_to_string(&settings).expect("settings"),
        profile_settings
    );
    for lane in ["alpha", "beta"] {
        let out = clawpool(&s, &["stop", lane]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    crate::spawn::stop_daemon(&s);
    let _ = daemon.wait();
}

/// The agent itself writes a token of its own into its worktree's `.claw/hook-token` (where a
/// clawpool that kept the token there read it back at adoption) while its supervisor dies. The
/// daemon that adopts the lane takes the token kept in the lane's record folder, so the agent's
/// real Stop hook, reported after the adoption, is taken and finishes the lane.
#[test]
fn a_token_the_agent_plants_in_its_worktree_is_not_the_one_an_adopter_takes() {
    let s = setup();
    with_claude_hooks(&s);
    let go = s.sandbox.dir.path().join("go");
    let wait_for_go = format!("until [ -e '{}' ]; do sleep 0.05; done", go.display());
    // The planting is a tool call the agent reports, so the test awaits its end as an event.
    let scenario = format!(
        r#"
trust_dialog = true
[[prompt]]
steps = [
  {{ do = "hook", event = "UserPromptSubmit", payload = "{{\"prompt\": \"do alpha\"}}" }},
  {{ do = "hook", event = "PreToolUse", payload = "{{\"tool_name\": \"Bash\"}}" }},
  {{ do = "run", command = "printf planted > .claw/hook-token" }},
  {{ do = "hook", event = "PostToolUse", payload = "{{\"tool_name\": \"Bash\"}}" }},
  {{ do = "run", command = {wait_for_go:?} }},
  {{ do = "hook", event = "Stop", payload = "{{}}" }},
]
"#
    );
    let planted = s.lanes_dir().join("alpha/.claw/hook-token");
    crate::spawn::kill_supervisor_while_lanes_run_after(&s, &scenario, |s| {
        wait_until(s, "the planting tool's end", |e| hook(e, "PostToolUse"));
    });
    assert_eq!(
        std::fs::read_to_string(&planted).expect("the planted token"),
        "planted"
    );
    let mut daemon = crate::spawn::start_daemon(&s);
    wait_for_event(&s, "lane.adopted");
    std::fs::write(&go, "").expect("go");
    let finished = wait_for_event(&s, "lane.finished");
    assert_eq!(finished["source"], "hook", "{finished}");
    assert_eq!(finished["evidence"]["rule"], "Stop", "{finished}");
    assert!(
        !events(&s)
            .iter()
            .any(|e| e["kind"] == "lane.caller_refused"),
        "{:#?}",
        events(&s)
    );
    crate::spawn::stop_daemon(&s);
    let _ = daemon.wait();
}
