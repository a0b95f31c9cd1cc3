//! Lanes reach neither the pool nor each other (issue #25, points 1–3), with scripted-agent
//! lanes whose agent runs commands the way a real agent's Bash tool does (step `run`): from
//! inside a lane, `clawpool answer`, `trust` and `send` are refused, on another lane and on its
//! own, and nothing changes there; a hook from another lane is refused even with the target's
//! token; a tmux lane's agent has no tmux socket, and a permission question answered by keys
//! typed from outside clawpool is recorded so and holds the lane. The same operator commands
//! from the test process, outside every lane, still work.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_tests::{LaneRun, workspace_bin};
use serde_json::Value;

use crate::spawn::{Setup, setup};

const PATIENCE: Duration = Duration::from_secs(30);

/// A permission question the default policy leaves to a person (a path outside the worktree).
const ASK: &str = r#"{ do = "permission", tool = "Bash(touch /tmp/elsewhere.txt)", command = "touch /tmp/elsewhere.txt" }"#;

/// One scenario for every lane of the packet: the `run` step acts only in the lane named
/// `attacker` (the lane's own mark says which), then every lane asks a question for a person
/// and writes `after.txt` once it is allowed.
fn scenario(attack: &str) -> String {
    let script = format!("if [ \"$CLAWPOOL_LANE_NAME\" = attacker ]; then\n{attack}\nfi");
    format!(
        "trust_dialog = true\nprompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [\n  {{ do = \"run\", command = {script:?} }},\n  {ASK},\n  {{ do = \"write_file\", path = \"after.txt\", content = \"allowed\\n\" }},\n]\n"
    )
}

/// `s`'s config with `scenario`, the trusted roots `trusted`, the agent `command` (the scripted
/// agent, or a wrapper of it) and `launch_extra` in its launch table.
fn config(
    s: &Setup,
    scenario: &str,
    trusted: &[PathBuf],
    command: &Path,
    launch_extra: &str,
) -> PathBuf {
    let file = s.sandbox.dir.path().join("callers-scenario.toml");
    std::fs::write(&file, scenario).expect("scenario");
    let roots: Vec<String> = trusted
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    let config = s.sandbox.dir.path().join("callers.toml");
    std::fs::write(
        &config,
        format!(
            "trusted_roots = [{}]\n[handshake]\nfinish_idle_ms = 400\n[profiles.scripted.launch]\ncommand = {:?}\n{launch_extra}env = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            roots.join(", "),
            command.display().to_string(),
            file.display().to_string(),
        ),
    )
    .expect("config");
    config
}

fn spawn(s: &Setup, config: &Path, transport: &str) -> LaneRun {
    let packet = s.sandbox.dir.path().join("callers-packet.json");
    std::fs::write(
        &packet,
        r#"{"defaults": {"agent": "scripted"}, "lanes": [
            {"name": "victim", "prompt": "do the victim's work"},
            {"name": "attacker", "prompt": "do the attacker's work"}]}"#,
    )
    .expect("packet");
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&packet)
        .args([
            "--output-format",
            "json",
            "--transport",
            transport,
            "--config",
        ])
        .arg(config)
        .arg("--repo")
        .arg(&s.repo);
    LaneRun::start(cmd, &s.sandbox.dir.path().join("callers.stderr"))
}

fn wait(run: &mut LaneRun, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    run.wait_for(what, PATIENCE, pred, attack_files)
}

/// What the attacks left in `attacks/`, for a failure message.
fn attack_files() -> String {
    ATTACKS.with(|dir| {
        let Some(dir) = dir.borrow().clone() else {
            return String::new();
        };
        std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| {
                format!(
                    "{}:\n{}",
                    entry.path().display(),
                    std::fs::read_to_string(entry.path()).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

thread_local! {
    /// The folder the current test's attacks write to.
    static ATTACKS: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

fn is(event: &Value, lane: &str, kind: &str) -> bool {
    event["lane"] == lane && event["kind"] == kind
}

fn blocked_on(event: &Value, lane: &str, subphase: &str) -> bool {
    is(event, lane, "lane.blocked") && event["to"]["subphase"] == subphase
}

fn events_of(run: &LaneRun, lane: &str, kind: &str) -> Vec<Value> {
    run.events()
        .into_iter()
        .filter(|e| is(e, lane, kind))
        .collect()
}

/// The lane's published state file once it holds every event of its log so far.
fn state(lane: &Path) -> Value {
    clawpool_tests::published_state(lane)
}

/// `sh` words for `clawpool ARGS`, its output and exit status into `out`.
fn attempt(clawpool: &Path, args: &str, out: &Path) -> String {
    format!(
        "{} {args} > {} 2>&1; echo \"exit=$?\" >> {}",
        clawpool.display(),
        out.display(),
        out.display()
    )
}

/// Waits until a background attempt wrote its exit status into `file`.
fn finished(file: &Path) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !std::fs::read_to_string(file).is_ok_and(|text| text.contains("exit=")) {
        assert!(
            std::time::Instant::now() < deadline,
            "{} has no exit status",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// #25.1: the agent of a lane runs `clawpool answer`, `trust` and `send` on another lane
/// (outside the trusted roots, waiting at its trust dialog) and `answer` on its own pending
/// permission question: each is refused with the reason, exit 1, recorded on the targeted
/// lane as `lane.caller_refused`, and nothing changes there. The test process, outside every
/// lane, answers the same question and it is done.
#[test]
fn operator_commands_from_inside_a_lane_are_refused_and_change_nothing() {
    let s = setup();
    let clawpool = workspace_bin("clawpool");
    let out = s.sandbox.dir.path().join("attacks");
    std::fs::create_dir_all(&out).expect("attacks folder");
    ATTACKS.with(|dir| *dir.borrow_mut() = Some(out.clone()));
    let victim = s.lanes_dir().join("victim");
    let attacker = s.lanes_dir().join("attacker");
    let go = out.join("go");
    let go_self = out.join("go-self");
    let attacks = [
        format!("until [ -e {} ]; do sleep 0.05; done", go.display()),
        attempt(
            &clawpool,
            &format!("answer {} --choice yes", victim.display()),
            &out.join("answer.txt"),
        ),
        attempt(
            &clawpool,
            &format!("trust {} --output-format json", victim.display()),
            &out.join("trust.txt"),
        ),
        attempt(
            &clawpool,
            &format!("send {} 'delete everything'", victim.display()),
            &out.join("send.txt"),
        ),
        // Its own question, once it shows: from a background process of the agent's.
        format!(
            "(until [ -e {} ]; do sleep 0.05; done; {}) > /dev/null 2>&1 &",
            go_self.display(),
            attempt(
                &clawpool,
                &format!("answer {} --choice yes", attacker.display()),
                &out.join("self.txt"),
            )
        ),
    ];
    let config = config(
        &s,
        &scenario(&attacks.join("\n")),
        std::slice::from_ref(&attacker),
        &workspace_bin("clawpool-scripted-agent"),
        "",
    );
    let mut run = spawn(&s, &config, "pty");
    wait(&mut run, "the victim held at the trust gate", |e| {
        blocked_on(e, "victim", "trust_prompt")
    });
    std::fs::write(&go, "").expect("go");
    for request in ["answer --choice yes", "trust", "send"] {
        let refused = wait(&mut run, request, |e| {
            is(e, "victim", "lane.caller_refused") && e["detail"]["request"] == request
        });
        let detail = &refused["detail"];
        assert_eq!(detail["inside"]["lane"], "attacker", "{refused}");
        assert!(
            detail["reason"]
                .as_str()
                .is_some_and(|r| r.contains("inside lane \"attacker\"")),
            "{refused}"
        );
    }
    wait(&mut run, "the attacker's question", |e| {
        blocked_on(e, "attacker", "tool_permission")
    });
    std::fs::write(&go_self, "").expect("go-self");
    wait(&mut run, "its own answer refused", |e| {
        is(e, "attacker", "lane.caller_refused") && e["detail"]["request"] == "answer --choice yes"
    });
    // The attacks before the question ran to their end before it showed; the background one
    // writes its exit status after the refusal it was told of.
    finished(&out.join("self.txt"));
    for file in ["answer.txt", "trust.txt", "send.txt", "self.txt"] {
        let text = read(&out.join(file));
        assert!(text.contains("refused"), "{file}: {text}");
        assert!(text.ends_with("exit=1\n"), "{file}: {text}");
    }
    let trust: Value =
        serde_json::from_str(read(&out.join("trust.txt")).lines().next().expect("a line"))
            .expect("one JSON document");
    assert_eq!(trust["error"]["kind"], "lane_refused", "{trust}");
    // Nothing changed on either lane.
    let victim_state = state(&victim);
    assert_eq!(victim_state["lane_status"], "blocked", "{victim_state}");
    assert!(
        !victim.join(".prompts.jsonl").exists(),
        "the victim got no prompt"
    );
    for kind in [
        "lane.trust_resolved",
        "lane.dialog_answered",
        "lane.send_queued",
    ] {
        assert!(
            events_of(&run, "victim", kind).is_empty(),
            "{kind}: {}",
            run.report()
        );
    }
    assert!(
        !events_of(&run, "attacker", "lane.dialog_answered")
            .iter()
            .any(|e| e["detail"]["dialog"] != "trust"),
        "only its trust dialog was answered: {}",
        run.report()
    );
    assert!(!attacker.join("after.txt").exists());

    // The same answer from outside every lane (this test process) is taken.
    let answered = s
        .sandbox
        .clawpool()
        .args(["answer"])
        .arg(&attacker)
        .args(["--choice", "yes"])
        .output()
        .expect("clawpool answer");
    assert!(
        answered.status.success(),
        "{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    wait(&mut run, "the operator's answer", |e| {
        is(e, "attacker", "lane.dialog_answered") && e["detail"]["by"] == "operator"
    });
}

/// A wrapper that drops Claude Code's `--settings FILE` (the lane's hook settings) and runs
/// the scripted agent, so a scripted lane gets the hook channel a Claude Code lane has.
fn hooked_agent(s: &Setup) -> PathBuf {
    let wrapper = s.sandbox.dir.path().join("hooked-agent.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a do shift; if [ -n \"$skip\" ]; then skip=; continue; fi; if [ \"$a\" = --settings ]; then skip=1; continue; fi; set -- \"$@\" \"$a\"; done\nexec {} \"$@\"\n",
            workspace_bin("clawpool-scripted-agent").display()
        ),
    )
    .expect("wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    wrapper
}

/// #25.3: lane B's agent, with lane A's control socket and token read from A's registry folder
/// (and A's mark put in its own environment), reports `Stop` to lane A, which
/// waits for a person's answer: refused, recorded on A, and A stays blocked.
#[test]
fn a_hook_from_another_lane_is_refused_even_with_its_token() {
    let s = setup();
    let clawpool = workspace_bin("clawpool");
    let victim = s.lanes_dir().join("victim");
    let go = s.sandbox.dir.path().join("go-hook");
    let victim_socket = s.repo.join(".git/clawpool/lanes/victim/control.sock");
    let victim_token = s.repo.join(".git/clawpool/lanes/victim/hook-token");
    let attack = format!(
        "until [ -e {go} ]; do sleep 0.05; done; CLAWPOOL_LANE_SOCKET={sock} \
         CLAWPOOL_LANE_TOKEN=$(cat {token}) CLAWPOOL_LANE_NAME=victim \
         CLAWPOOL_LANE_DIR={v} {c} hook Stop < /dev/null",
        go = go.display(),
        sock = victim_socket.display(),
        token = victim_token.display(),
        v = victim.display(),
        c = clawpool.display()
    );
    // The scripted agent behind the wrapper, with the hook channel of a Claude Code lane.
    let config = config(
        &s,
        &scenario(&attack),
        &[s.lanes_dir()],
        &hooked_agent(&s),
        "hooks = \"claude\"\n",
    );
    let mut run = spawn(&s, &config, "pty");
    wait(&mut run, "the victim waiting for a person", |e| {
        blocked_on(e, "victim", "tool_permission")
    });
    assert!(victim_token.is_file());
    assert!(
        victim_socket.exists(),
        "the victim's socket is where the attack aims"
    );
    std::fs::write(&go, "").expect("go");
    let refused = wait(&mut run, "the hook refused", |e| {
        is(e, "victim", "lane.caller_refused")
    });
    assert_eq!(refused["detail"]["request"], "hook Stop", "{refused}");
    assert_eq!(refused["detail"]["inside"]["lane"], "attacker", "{refused}");
    // Refused at the socket: it never reached the lane, which still waits.
    assert!(events_of(&run, "victim", "lane.hook").is_empty());
    assert!(events_of(&run, "victim", "lane.finished").is_empty());
    let victim_state = state(&victim);
    assert_eq!(victim_state["lane_status"], "blocked", "{victim_state}");
}

/// #25.2: a tmux lane's agent finds no tmux socket in its environment, and keys typed into
/// its permission question from outside clawpool (`tmux send-keys`, as the agent did with the
/// `TMUX` it had) are `lane.dialog_answered_outside`: the lane stays blocked for a person with
/// an escalation, and is not finished when the agent goes idle.
#[test]
fn a_tmux_lane_has_no_tmux_socket_and_an_answer_typed_outside_clawpool_is_recorded() {
    let s = setup();
    let env_file = s.sandbox.dir.path().join("agent-env.txt");
    let probe = format!(
        "echo \"TMUX=<${{TMUX-unset}}> TMUX_PANE=<${{TMUX_PANE-unset}}>\" > {}",
        env_file.display()
    );
    let config = config(
        &s,
        &scenario(&probe),
        &[s.lanes_dir()],
        &workspace_bin("clawpool-scripted-agent"),
        "",
    );
    let mut run = spawn(&s, &config, "tmux");
    wait(&mut run, "the attacker's question", |e| {
        blocked_on(e, "attacker", "tool_permission")
    });
    assert_eq!(
        read(&env_file).trim(),
        "TMUX=<unset> TMUX_PANE=<unset>",
        "the agent's environment"
    );
    let attacker = s.lanes_dir().join("attacker");
    let target = state(&attacker)["transport"]["session"]
        .as_str()
        .expect("a tmux lane's session")
        .to_owned();
    let (socket, session) = target.split_once(':').expect("SOCKET:SESSION");
    let sent = s
        .sandbox
        .tmux()
        .args(["-L", socket, "send-keys", "-t", session, "1"])
        .output()
        .expect("tmux send-keys");
    assert!(sent.status.success(), "{sent:?}");
    let outside = wait(&mut run, "the answer typed outside", |e| {
        is(e, "attacker", "lane.dialog_answered_outside")
    });
    assert_eq!(
        outside["detail"]["dialog_kind"], "tool_permission",
        "{outside}"
    );
    wait(&mut run, "the escalation", |e| {
        is(e, "attacker", "lane.escalated")
    });
    // The agent carries on and goes idle: finish-idle (400 ms) passes several times over and
    // the lane is still held.
    let later = run.lines_within(Duration::from_secs(3));
    assert!(
        !later.iter().any(|e| e["lane"] == "attacker"
            && matches!(e["kind"].as_str(), Some("lane.finished" | "lane.running"))),
        "{}",
        run.report()
    );
    assert!(attacker.join("after.txt").exists(), "the agent did go on");
    assert!(
        !events_of(&run, "attacker", "lane.dialog_answered")
            .iter()
            .any(|e| e["detail"]["dialog"] != "trust"),
        "only the trust dialog was clawpool's to answer: {}",
        run.report()
    );
    let held = state(&attacker);
    assert_eq!(held["lane_status"], "blocked", "{held}");
}

/// #25.1 with the real Claude Code 2.1.330 (offline, against the scripted model server), where
/// the issue saw it: Claude, allowed by a person to run Bash, runs `clawpool answer victim
/// --choice yes; clawpool trust victim` on a lane outside the trusted roots. Both are refused
/// and recorded on the victim, which stays held at the trust gate with no prompt.
#[test]
fn claude_allowed_to_run_bash_cannot_answer_or_trust_another_lane() {
    use crate::real_agents::{
        assert_nothing_left, claude_env, finish, lanes_dir, plain_lane, screen_report, start_lane,
        write_config,
    };
    let sandbox = clawpool_tests::Sandbox::new();
    clawpool_tests::real_agent("claude");
    clawpool_tests::seed_claude_home(&sandbox.home(), serde_json::json!({}));
    // The victim: a scripted lane outside every trusted root, held at its trust dialog.
    let victim = sandbox.dir.path().join("outside").join("victim");
    std::fs::create_dir_all(&victim).expect("victim folder");
    let scenario = sandbox.dir.path().join("victim-scenario.toml");
    std::fs::write(
        &scenario,
        "trust_dialog = true\nprompt_log = \".prompts.jsonl\"\n",
    )
    .expect("scenario");
    let victim_config = sandbox.dir.path().join("victim-config.toml");
    std::fs::write(
        &victim_config,
        format!(
            "[profiles.scripted.launch]\ncommand = {:?}\nenv = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            workspace_bin("clawpool-scripted-agent").display().to_string(),
            scenario.display().to_string()
        ),
    )
    .expect("victim config");
    let mut victim_run = start_lane(&sandbox, &victim_config, "scripted", &victim, &[], "pty");
    wait(&mut victim_run, "the victim held at the trust gate", |e| {
        e["kind"] == "lane.blocked" && e["to"]["subphase"] == "trust_prompt"
    });
    // The attacker: Claude Code in a trusted lane, told to drive the victim.
    let clawpool = workspace_bin("clawpool");
    let command = format!(
        "{c} answer {v} --choice yes; {c} trust {v}",
        c = clawpool.display(),
        v = victim.display()
    );
    let script = serde_json::json!([
        {"tool_use": {"name": "Bash", "input": {"command": command, "description": "Approve"}}},
        {"text": "Done."}
    ]);
    let attacker = plain_lane(&sandbox, "attacker");
    let config = write_config(
        &sandbox,
        Some(&lanes_dir(&sandbox)),
        "claude",
        "args = [\"--permission-mode\", \"default\"]\n",
    );
    let mut server =
        clawpool_tests::ModelServer::start(&sandbox.dir.path().join("model-attacker"), &script);
    let mut run = start_lane(
        &sandbox,
        &config,
        "claude",
        &attacker,
        &claude_env(&sandbox, &server.url()),
        "pty",
    );
    // Its Bash is a person's to allow; a person (this test, outside every lane) allows it.
    run.wait_for(
        "the question",
        Duration::from_secs(90),
        |e| e["kind"] == "lane.blocked" && e["to"]["subphase"] == "tool_permission",
        || screen_report(&attacker),
    );
    let allowed = sandbox
        .clawpool()
        .arg("answer")
        .arg(&attacker)
        .args(["--choice", "yes"])
        .output()
        .expect("clawpool answer");
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    for request in ["answer --choice yes", "trust"] {
        let refused = victim_run.wait_for(
            request,
            Duration::from_secs(90),
            |e| e["kind"] == "lane.caller_refused" && e["detail"]["request"] == request,
            || screen_report(&attacker),
        );
        assert_eq!(refused["detail"]["inside"]["lane"], "attacker", "{refused}");
    }
    let (code, _) = finish(&mut run, &attacker);
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(&attacker));
    // The victim is as it was: held, untrusted, no prompt.
    let events = victim_run.events();
    for kind in ["lane.trust_resolved", "lane.dialog_answered", "lane.ready"] {
        assert!(
            !events.iter().any(|e| e["kind"] == kind),
            "{kind}: {}",
            victim_run.report()
        );
    }
    assert!(!victim.join(".prompts.jsonl").exists());
    assert_eq!(state(&victim)["lane_status"], "blocked");
    drop(victim_run);
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// #25.1, the daemon's socket: a lane's agent asking the repository's background supervisor to
/// stop is refused (`caller_refused`, exit 1), and the daemon goes on serving; the same request
/// from outside every lane stops it.
#[test]
fn a_lanes_agent_cannot_stop_the_daemon() {
    let s = setup();
    let out = s.sandbox.dir.path().join("attacks");
    std::fs::create_dir_all(&out).expect("attacks folder");
    ATTACKS.with(|dir| *dir.borrow_mut() = Some(out.clone()));
    let stop = out.join("stop.txt");
    let attack = attempt(
        &workspace_bin("clawpool"),
        &format!("daemon --stop --repo {}", s.repo.display()),
        &stop,
    );
    let config = config(
        &s,
        &scenario(&attack),
        &[s.lanes_dir()],
        &workspace_bin("clawpool-scripted-agent"),
        "",
    );
    let packet = s.sandbox.dir.path().join("callers-packet.json");
    std::fs::write(
        &packet,
        r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "attacker", "prompt": "stop it"}]}"#,
    )
    .expect("packet");
    let handed = s
        .sandbox
        .clawpool()
        .arg("spawn")
        .arg(&packet)
        .args(["--detach", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("spawn --detach");
    assert!(
        handed.status.success(),
        "{}",
        String::from_utf8_lossy(&handed.stderr)
    );
    finished(&stop);
    let text = read(&stop);
    assert!(text.contains("refused: "), "{text}");
    assert!(text.contains("inside lane \"attacker\""), "{text}");
    assert!(text.ends_with("exit=1\n"), "{text}");
    // Still serving: the operator stops it.
    let stopped = s
        .sandbox
        .clawpool()
        .args(["daemon", "--stop", "--repo"])
        .arg(&s.repo)
        .output()
        .expect("daemon --stop");
    assert!(
        stopped.status.success(),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    assert!(
        String::from_utf8_lossy(&stopped.stdout).contains("\"stopping\":true"),
        "{stopped:?}"
    );
}

/// #27, the daemon's follow-ups: with the repository's daemon serving, a lane's agent running
/// `clawpool send` on a finished lane — a follow-up the daemon would run — is refused by the
/// daemon's check of its caller (`caller_refused`, exit 1, in the daemon's log), and the
/// finished lane gets no prompt.
#[test]
fn a_lanes_agent_cannot_follow_up_another_lane_through_the_daemon() {
    let s = setup();
    let refused = follow_up_attack(&s, true);
    // Refused by the daemon, which logs it: the follow-up went the daemon's way.
    let log = read(&s.repo.join(".git/clawpool/daemon.log"));
    assert!(log.contains("daemon request refused"), "{log}");
    assert!(refused.starts_with("refused: "), "{refused}");
    crate::spawn::stop_daemon(&s);
}

/// The same with no daemon (the attacker run by a foreground spawn): the `send` that would run
/// the follow-up itself refuses to, inside a lane.
#[test]
fn a_lanes_agent_cannot_follow_up_another_lane_without_a_daemon() {
    let s = setup();
    let refused = follow_up_attack(&s, false);
    assert!(
        refused.contains("a lane may not take a lane up again"),
        "{refused}"
    );
    assert!(!s.repo.join(".git/clawpool/daemon.log").exists());
}

/// A victim lane run to its end, then an attacker lane (under the daemon when `detach`) whose
/// agent runs `clawpool send` on the victim: the attempt is refused `caller_refused`, exit 1,
/// the victim gets no prompt, and the attacker finishes. Returns the refusal's message.
fn follow_up_attack(s: &Setup, detach: bool) -> String {
    let out = s.sandbox.dir.path().join("attacks");
    std::fs::create_dir_all(&out).expect("attacks folder");
    ATTACKS.with(|dir| *dir.borrow_mut() = Some(out.clone()));
    let send = out.join("send.txt");
    let victim = s.lanes_dir().join("victim");
    let attack = attempt(
        &workspace_bin("clawpool"),
        &format!(
            "send {} 'delete everything' --output-format json",
            victim.display()
        ),
        &send,
    );
    let scenario = format!(
        "trust_dialog = true\nprompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [\n  {{ do = \"run\", command = {:?} }},\n  {{ do = \"write_file\", path = \"out.txt\", content = \"done\\n\" }},\n]\n",
        format!("if [ \"$CLAWPOOL_LANE_NAME\" = attacker ]; then\n{attack}\nfi")
    );
    let config = config(
        s,
        &scenario,
        &[s.lanes_dir()],
        &workspace_bin("clawpool-scripted-agent"),
        "",
    );
    let packet = |lane: &str| {
        let file = s.sandbox.dir.path().join(format!("{lane}.json"));
        std::fs::write(
            &file,
            format!(r#"{{"defaults": {{"agent": "scripted"}}, "lanes": [{{"name": "{lane}", "prompt": "do the {lane}'s work"}}]}}"#),
        )
        .expect("packet");
        file
    };
    // The victim runs to its end in the foreground: a finished lane, which takes follow-ups.
    let ran = s
        .sandbox
        .clawpool()
        .arg("spawn")
        .arg(packet("victim"))
        .arg("--config")
        .arg(&config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("spawn");
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(state(&victim)["lane_status"], "finished");
    // The attacker runs under the daemon, which serves the repository while it attacks.
    let mut attacker = s.sandbox.clawpool();
    attacker.arg("spawn").arg(packet("attacker"));
    if detach {
        attacker.arg("--detach");
    }
    let handed = attacker
        .arg("--config")
        .arg(&config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("spawn");
    assert!(
        handed.status.success(),
        "{}",
        String::from_utf8_lossy(&handed.stderr)
    );
    finished(&send);
    let text = read(&send);
    assert!(text.ends_with("exit=1\n"), "{text}");
    let refused: Value =
        serde_json::from_str(text.lines().next().expect("a line")).expect("one JSON document");
    assert_eq!(refused["error"]["kind"], "caller_refused", "{refused}");
    let message = refused["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("inside lane \"attacker\""), "{refused}");
    let prompts = read(&victim.join(".prompts.jsonl"));
    assert!(!prompts.contains("delete everything"), "{prompts}");
    assert_eq!(state(&victim)["lane_status"], "finished");
    // The attacker's lane ends under the daemon before it is stopped.
    let events = s.repo.join(".git/clawpool/lanes/attacker/events.jsonl");
    let deadline = std::time::Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&events).is_ok_and(|log| log.contains("\"lane.finished\"")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the attacker did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    message
}
