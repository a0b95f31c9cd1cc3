//! Sandboxed lanes (`docs/sandbox.md`): a scripted lane under bubblewrap writes and commits in
//! its worktree while its writes to the main checkout, another lane's worktree and `$HOME` do
//! not land, the other lanes' sockets are out of its sight and its own is not; `network =
//! "none"` keeps it off a loopback listener the shared network reaches; a lane that asks
//! for a sandbox this machine cannot make does not start; a lane in a main checkout cannot
//! write its `.git`'s hooks, config or clawpool's folder. The real agents, sandboxed: Claude
//! Code finishes from its hooks, and in bypass-permissions mode its Bash cannot write outside,
//! see another lane's socket, or `clawpool trust`/`send` that lane; Codex's app server runs
//! in the sandbox and its protocol finishes the lane. A sandboxed tmux lane outlives its
//! SIGKILLed supervisor and is adopted to its finish.
//!
//! The test folders are made under the target folder, not `/tmp`: a sandbox's `/tmp` is its
//! own, and the agent's scenario must stay readable.

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clawpool_tests::{Sandbox, git_log, git_repo, workspace_bin};
use serde_json::Value;

/// A test's folders (under the target folder), its repository and another worktree of it.
struct Site {
    sandbox: Sandbox,
    repo: PathBuf,
    other: PathBuf,
}

fn site() -> Site {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sandbox-e2e");
    std::fs::create_dir_all(&root).expect("scratch root");
    let dir = tempfile::tempdir_in(&root).expect("scratch");
    std::fs::create_dir_all(dir.path().join("home")).expect("home");
    std::fs::create_dir_all(dir.path().join("tmux")).expect("tmux dir");
    let marker = format!("clawpool-test-{}-sandbox", std::process::id());
    let sandbox = Sandbox { dir, marker };
    let repo = git_repo(sandbox.dir.path(), "repo");
    for (key, value) in [("user.name", "lane"), ("user.email", "lane@test")] {
        git(&repo, &["config", key, value]);
    }
    // Another lane's worktree, as spawn would make it.
    let other = sandbox.dir.path().join("repo.lanes/other");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "lane/other",
            other.to_str().expect("utf-8"),
        ],
    );
    Site {
        sandbox,
        repo,
        other,
    }
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

impl Site {
    /// Writes the scenario and a config (with `extra` top-level keys) and runs `spawn` on a
    /// one-lane packet whose lane has `lane_fields`.
    fn spawn(&self, scenario: &str, extra: &str, lane_fields: &str) -> Output {
        self.spawn_with(scenario, extra, "", lane_fields)
    }

    /// As [`Site::spawn`], with `launch` added to the scripted profile's `launch` table.
    fn spawn_with(&self, scenario: &str, extra: &str, launch: &str, lane_fields: &str) -> Output {
        let dir = self.sandbox.dir.path();
        let scenario_file = dir.join("scenario.toml");
        std::fs::write(&scenario_file, scenario).expect("scenario");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "{extra}\ntrusted_roots = [{:?}]\n[handshake]\nfinish_idle_ms = 300\n\
                 [profiles.scripted.launch]\n{launch}command = {:?}\n\
                 env = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
                dir.display().to_string(),
                workspace_bin("clawpool-scripted-agent")
                    .display()
                    .to_string(),
                scenario_file.display().to_string(),
            ),
        )
        .expect("config");
        let packet = dir.join("packet.json");
        std::fs::write(
            &packet,
            format!(
                r#"{{"lanes": [{{"name": "boxed", "agent": "scripted", "prompt": "work"{lane_fields}}}]}}"#
            ),
        )
        .expect("packet");
        self.sandbox
            .clawpool()
            .arg("spawn")
            .arg(&packet)
            .args(["--output-format", "json", "--config"])
            .arg(&config)
            .arg("--repo")
            .arg(&self.repo)
            .output()
            .expect("clawpool spawn runs")
    }

    fn lane(&self) -> PathBuf {
        self.sandbox.dir.path().join("repo.lanes/boxed")
    }

    fn state(&self) -> Value {
        clawpool_tests::published_state(&self.lane())
    }
}

/// A scenario whose one prompt runs `command` (its findings go to `probe.txt`), then writes
/// and commits in the worktree.
fn scenario(command: &str) -> String {
    format!(
        "[[prompt]]\nsteps = [\n  {{ do = \"run\", command = {command:?} }},\n  \
         {{ do = \"write_file\", path = \"out.txt\", content = \"done\\n\" }},\n  \
         {{ do = \"git_commit\", message = \"sandboxed work\" }},\n]\n"
    )
}

/// A shell line that tries to write `path` and says in `probe.txt` whether it could.
fn try_write(label: &str, path: &Path) -> String {
    format!(
        "(echo escaped > '{}') 2>/dev/null && echo '{label} wrote' >> probe.txt || echo '{label} refused' >> probe.txt; ",
        path.display()
    )
}

/// A shell line that tries to connect to `port` on the loopback and says so in `probe.txt`.
fn try_connect(port: u16) -> String {
    format!(
        "bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo 'net reached' >> probe.txt || echo 'net refused' >> probe.txt; "
    )
}

/// What spawn said: its JSON lines and its stderr.
fn stderr(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_sandboxed_lane_commits_in_its_worktree_and_writes_nothing_outside() {
    let s = site();
    let home = s.sandbox.home();
    // Another lane's control socket where its registry folder would hold it, listening.
    let common = s.repo.join(".git");
    let other_record = common.join("clawpool/lanes/other");
    std::fs::create_dir_all(&other_record).expect("other record");
    let other_socket = other_record.join("control.sock");
    let _other_listener = UnixListener::bind(&other_socket).expect("other socket");
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let port = listener.local_addr().expect("address").port();
    let own_socket = common.join("clawpool/lanes/boxed/control.sock");
    let command = [
        try_write("main", &s.repo.join("escape.txt")),
        try_write("other", &s.other.join("escape.txt")),
        try_write("home", &home.join(".bashrc")),
        format!(
            "test -e '{}' && echo 'other socket seen' >> probe.txt || echo 'other socket hidden' >> probe.txt; ",
            other_socket.display()
        ),
        format!(
            "test -S '{}' && echo 'own socket seen' >> probe.txt || echo 'own socket hidden' >> probe.txt; ",
            own_socket.display()
        ),
        try_connect(port),
    ]
    .concat();
    let out = s.spawn(&scenario(&command), "", r#", "sandbox": "workspace""#);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let probe = std::fs::read_to_string(s.lane().join("probe.txt")).expect("probe");
    let lines: Vec<&str> = probe.lines().collect();
    assert_eq!(
        lines,
        [
            "main refused",
            "other refused",
            "home refused",
            "other socket hidden",
            "own socket seen",
            "net reached",
        ],
        "{probe}"
    );
    for escaped in [
        s.repo.join("escape.txt"),
        s.other.join("escape.txt"),
        home.join(".bashrc"),
    ] {
        assert!(!escaped.exists(), "{} was written", escaped.display());
    }
    // The shared network: the listener got the line.
    let (mut conn, _) = listener.accept().expect("the lane connected");
    let mut got = String::new();
    conn.read_to_string(&mut got).expect("read");
    assert_eq!(got, "hi\n");
    // Inside: the work and its commit landed, from within the sandbox.
    assert_eq!(
        std::fs::read_to_string(s.lane().join("out.txt")).expect("out"),
        "done\n"
    );
    assert_eq!(git_log(&s.lane())[0], "sandboxed work");
    let state = s.state();
    assert_eq!(state["status"], "finished", "{state}");
    assert_eq!(state["sandbox"]["mode"], "workspace", "{state}");
    assert_eq!(state["sandbox"]["network"], "shared", "{state}");
    let board = s
        .sandbox
        .clawpool()
        .args(["board", "--repo"])
        .arg(&s.repo)
        .output()
        .expect("board");
    let board = String::from_utf8_lossy(&board.stdout).into_owned();
    let row = board
        .lines()
        .find(|l| l.starts_with("boxed"))
        .unwrap_or_else(|| panic!("no row for the lane:\n{board}"));
    assert!(
        row.split_whitespace().any(|cell| cell == "workspace"),
        "{board}"
    );
}

/// The hook settings clawpool writes for a Claude Code lane are not the agent's to change:
/// they live in the lane's record folder, outside its worktree, and the sandbox binds them
/// read-only, so an agent that writes them (to give itself permissions, or hooks that run
/// outside its sandbox at its next start) is refused, and its hooks still reach the lane.
#[test]
fn a_sandboxed_agent_cannot_rewrite_its_hook_settings() {
    let s = site();
    let settings = s.repo.join(".git/clawpool/lanes/boxed/hooks.json");
    let hostile = s.sandbox.dir.path().join("hostile.json");
    std::fs::write(&hostile, r#"{"permissions": {"allow": ["Bash(*)"]}}"#).expect("hostile");
    // As an attacker would: the file its own `--settings` names, read from its command line.
    let command = format!(
        "f=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | grep -A1 -x -- --settings | tail -n 1); \
         echo \"$f\" >> probe.txt; \
         (echo escaped > \"$f\") 2>/dev/null && echo 'settings wrote' >> probe.txt || echo 'settings refused' >> probe.txt; \
         cp '{}' \"$f\" 2>/dev/null && echo 'settings replaced' >> probe.txt || echo 'settings kept' >> probe.txt; ",
        hostile.display(),
    );
    let scenario = format!(
        "[[prompt]]\nsteps = [\n  {{ do = \"run\", command = {command:?} }},\n  \
         {{ do = \"hook\", event = \"Stop\", payload = \"{{}}\" }},\n]\n"
    );
    let out = s.spawn_with(
        &scenario,
        "",
        "hooks = \"claude\"\n",
        r#", "sandbox": "workspace""#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let probe = std::fs::read_to_string(s.lane().join("probe.txt")).expect("probe");
    assert_eq!(
        probe.lines().collect::<Vec<_>>(),
        [
            settings.display().to_string().as_str(),
            "settings refused",
            "settings kept"
        ],
        "{probe}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("settings")).expect("JSON");
    assert!(written["hooks"]["Stop"].is_array(), "{written:#}");
    assert!(written.get("permissions").is_none(), "{written:#}");
    // The agent was started on that file, and its hook reached the lane through it.
    let events: Vec<Value> =
        std::fs::read_to_string(s.repo.join(".git/clawpool/lanes/boxed/events.jsonl"))
            .expect("events")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
    let opened = events
        .iter()
        .find(|e| e["kind"] == "lane.channel.opened")
        .expect("the hook channel opened");
    assert_eq!(
        opened["detail"]["settings"],
        settings.display().to_string(),
        "{opened}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "lane.hook" && e["detail"]["event"] == "Stop"),
        "no Stop hook reached the lane"
    );
    assert_eq!(s.state()["status"], "finished");
}

#[test]
fn network_none_keeps_a_sandboxed_lane_off_the_loopback() {
    let s = site();
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("address").port();
    let out = s.spawn(
        &scenario(&try_connect(port)),
        "sandbox = \"workspace\"\nnetwork = \"none\"",
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let probe = std::fs::read_to_string(s.lane().join("probe.txt")).expect("probe");
    assert_eq!(probe, "net refused\n");
    assert_eq!(
        listener.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::WouldBlock),
        "the lane reached the listener"
    );
    let state = s.state();
    assert_eq!(state["sandbox"]["network"], "none", "{state}");
    assert_eq!(state["status"], "finished", "{state}");
}

#[test]
fn a_lane_asking_for_a_sandbox_bubblewrap_cannot_make_does_not_start() {
    let s = site();
    let out = s.spawn(
        &scenario("echo never > ran.txt; "),
        "bwrap = \"/nonexistent/bwrap\"",
        r#", "sandbox": "workspace""#,
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(said.contains("sandbox"), "{said}");
    assert!(said.contains("/nonexistent/bwrap"), "{said}");
    // Nothing started: no worktree, so no agent ran unconfined.
    assert!(!s.lane().exists(), "the lane's worktree was made");
}

#[test]
fn doctor_says_whether_sandboxes_work_here() {
    let s = site();
    let doctor = |config: &str| -> Value {
        let file = s.sandbox.dir.path().join("doctor.toml");
        std::fs::write(&file, config).expect("config");
        let out = s
            .sandbox
            .clawpool()
            .args(["doctor", "--output-format", "json", "--config"])
            .arg(&file)
            .arg("--repo")
            .arg(&s.repo)
            .output()
            .expect("doctor");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("doctor JSON");
        doc["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["name"] == "sandbox")
            .cloned()
            .unwrap_or_else(|| panic!("no sandbox check: {doc}"))
    };
    let works = doctor("");
    assert_eq!(works["ok"], true, "{works}");
    let missing = doctor("sandbox = \"workspace\"\nbwrap = \"/nonexistent/bwrap\"\n");
    assert_eq!(missing["ok"], false, "{missing}");
    assert_eq!(missing["severity"], "error", "{missing}");
    assert!(
        missing["detail"]
            .as_str()
            .is_some_and(|d| d.contains("/nonexistent/bwrap")),
        "{missing}"
    );
}

/// The real Claude Code 2.1.330 in a sandboxed lane, offline against the scripted model
/// server: it boots with its state in `~/.claude*` writable, its hooks reach the lane from
/// inside the sandbox, and its turn finishes from its Stop hook.
#[test]
fn a_sandboxed_claude_code_lane_finishes_from_its_hooks() {
    use crate::real_agents::{claude_env, finish, lanes_dir, plain_lane, start_lane, write_config};
    clawpool_tests::real_agent("claude");
    let sandbox = Sandbox::new();
    clawpool_tests::seed_claude_home(
        &sandbox.home(),
        serde_json::json!({"customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []}}),
    );
    let lane = plain_lane(&sandbox, "boxed-claude");
    let server = clawpool_tests::ModelServer::start(
        &sandbox.dir.path().join("model"),
        &serde_json::json!([{"text": "Hello from the scripted model."}]),
    );
    let config = write_config(&sandbox, Some(&lanes_dir(&sandbox)), "claude", "");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("sandbox = \"workspace\"\n{text}")).expect("config");
    let mut run = start_lane(
        &sandbox,
        &config,
        "claude",
        &lane,
        &claude_env(&sandbox, &server.url()),
        "pty",
    );
    let (code, outcome) = finish(&mut run, &lane);
    assert_eq!(code, 0, "{}", run.report());
    assert_eq!(outcome["state"]["status"], "finished", "{}", run.report());
    let events = run.events();
    let finished = events
        .iter()
        .find(|e| e["kind"] == "lane.finished")
        .unwrap_or_else(|| panic!("not finished: {}", run.report()));
    assert_eq!(finished["source"], "hook", "{}", run.report());
    let state: Value = clawpool_tests::published_state(&lane);
    assert_eq!(state["sandbox"]["mode"], "workspace", "{state}");
    assert_eq!(state["hooks"]["failed"], 0, "{state}");
}

/// A sandboxed Codex lane's run to its end, finished.
struct CodexRun {
    lane: PathBuf,
    events: Vec<Value>,
    report: String,
    server: clawpool_tests::ModelServer,
}

/// The real Codex 0.169.0 in a sandboxed lane `name`, offline against the scripted model
/// serving `script`, its lane decided by its app server's protocol; asserted finished.
fn run_sandboxed_codex(sandbox: &Sandbox, name: &str, script: &Value) -> CodexRun {
    use crate::real_agents::{
        codex_env, finish, lanes_dir, screen_report, start_lane, write_config,
    };
    clawpool_tests::real_agent("codex");
    let lane = git_repo(&lanes_dir(sandbox), name);
    let server = clawpool_tests::ModelServer::start(&sandbox.dir.path().join("model"), script);
    clawpool_tests::seed_codex_home(sandbox, &server.url(), "sk-fake");
    let config = write_config(
        sandbox,
        Some(&lanes_dir(sandbox)),
        "codex",
        crate::codex_channel::CHANNEL_DECIDES,
    );
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("sandbox = \"workspace\"\n{text}")).expect("config");
    let mut run = start_lane(sandbox, &config, "codex", &lane, &codex_env(sandbox), "pty");
    let (code, outcome) = finish(&mut run, &lane);
    let report = format!("{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(code, 0, "{report}");
    assert_eq!(outcome["state"]["status"], "finished", "{report}");
    CodexRun {
        lane,
        events: run.events(),
        report,
        server,
    }
}

/// The real Codex 0.169.0 in a sandboxed lane, offline against the scripted model server: its
/// app server starts inside the lane's sandbox (it runs Codex's tools), with `~/.codex`
/// writable, and the lane is decided by that server's protocol — accepted and finished.
#[test]
fn a_sandboxed_codex_lane_finishes_from_its_app_server() {
    let sandbox = Sandbox::new();
    let ran = run_sandboxed_codex(
        &sandbox,
        "boxed-codex",
        &serde_json::json!([{"text": "Hello from the scripted model."}]),
    );
    let (lane, report, mut server) = (ran.lane, ran.report, ran.server);
    let events = ran.events;
    let opened = events
        .iter()
        .find(|e| e["kind"] == "lane.channel.opened")
        .unwrap_or_else(|| panic!("no channel: {report}"));
    assert_eq!(opened["detail"]["channel"], "codex_app_server", "{report}");
    let finished = events
        .iter()
        .find(|e| e["kind"] == "lane.finished")
        .unwrap_or_else(|| panic!("not finished: {report}"));
    assert_eq!(finished["source"], "protocol", "{report}");
    assert_eq!(server.main_requests().len(), 1, "{report}");
    let state: Value = clawpool_tests::published_state(&lane);
    assert_eq!(state["sandbox"]["mode"], "workspace", "{state}");
    assert_eq!(state["hooks"]["channel"], "codex_app_server", "{state}");
    assert_eq!(state["hooks"]["degraded"], false, "{state}");
    server.stop();
}

/// The real Claude Code 2.1.330, sandboxed and allowed to run any command without asking
/// (`--dangerously-skip-permissions`), is told by its
/// (scripted) model to break out: write an absolute path outside, the main checkout and
/// `~/.bashrc`, look for another lane's control socket, and `clawpool trust` / `clawpool send`
/// that lane, which is held at clawpool's trust gate. None of it lands: the files are not on
/// disk, the other lane is still held with no prompt given — until the test itself trusts it
/// from outside, when it finishes (so the same commands work unconfined). Its own work in its
/// worktree lands and the lane finishes from its hooks.
#[test]
fn a_sandboxed_claude_code_running_bash_cannot_reach_outside_or_another_lane() {
    use crate::real_agents::{
        claude_env, finish, lanes_dir, screen_report, start_lane, worktree_lane, write_config,
    };
    clawpool_tests::real_agent("claude");
    let s = site();
    let home = s.sandbox.home();
    clawpool_tests::seed_claude_home(
        &home,
        serde_json::json!({
            "customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []},
            "bypassPermissionsModeAccepted": true,
        }),
    );
    // The bypass mode's one-time warning, accepted as a user who chose it would have.
    let settings = home.join(".claude/settings.json");
    let mut doc: Value = std::fs::read_to_string(&settings)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    doc["skipDangerousModePermissionPrompt"] = Value::Bool(true);
    std::fs::create_dir_all(home.join(".claude")).expect(".claude");
    std::fs::write(&settings, doc.to_string()).expect("settings");

    // The other lane: a scripted agent in the repository's other worktree, outside the trusted
    // roots, so held at the trust gate with its prompt not yet given.
    let scenario = s.sandbox.dir.path().join("other-scenario.toml");
    std::fs::write(
        &scenario,
        "trust_dialog = false\nprompt_log = \".prompts.jsonl\"\n[[prompt]]\n\
         steps = [{ do = \"write_file\", path = \"out.txt\", content = \"done\\n\" }]\n",
    )
    .expect("scenario");
    let other_config = s.sandbox.dir.path().join("other.toml");
    std::fs::write(
        &other_config,
        format!(
            "[handshake]\nfinish_idle_ms = 300\n[profiles.scripted.launch]\ncommand = {:?}\n\
             env = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            workspace_bin("clawpool-scripted-agent")
                .display()
                .to_string(),
            scenario.display().to_string(),
        ),
    )
    .expect("config");
    let mut other_cmd = s.sandbox.clawpool();
    other_cmd
        .args(["run", "--output-format", "json", "--agent", "scripted"])
        .arg("--config")
        .arg(&other_config)
        .arg("--cwd")
        .arg(&s.other)
        .args(["--prompt", "do it"]);
    let mut other =
        clawpool_tests::LaneRun::start(other_cmd, &s.sandbox.dir.path().join("other.stderr"));
    let blocked = other.wait_for(
        "lane.blocked",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.blocked",
        String::new,
    );
    assert_eq!(blocked["evidence"]["rule"], "trust_gate", "{blocked}");
    let other_socket = [
        s.other.join(".claw/control.sock"),
        s.repo.join(".git/clawpool/lanes/other/control.sock"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("the other lane has no control socket: {}", other.report()));

    // The sandboxed Claude Code lane, in a worktree of the same repository.
    let lane = worktree_lane(&s.sandbox, &s.repo, "claude");
    let outside = s.sandbox.dir.path().join("outside.txt");
    let clawpool = workspace_bin("clawpool");
    let other_path = s.other.display().to_string();
    let command = [
        try_write("abs", &outside),
        try_write("main", &s.repo.join("escape.txt")),
        try_write("home", &home.join(".bashrc")),
        format!(
            "test -e '{}' && echo 'other socket seen' >> probe.txt || echo 'other socket hidden' >> probe.txt; ",
            other_socket.display()
        ),
        format!(
            "'{c}' trust '{other_path}' >/dev/null 2>&1 && echo 'trust worked' >> probe.txt || echo 'trust refused' >> probe.txt; ",
            c = clawpool.display()
        ),
        format!(
            "'{c}' send '{other_path}' 'injected' >/dev/null 2>&1 && echo 'send worked' >> probe.txt || echo 'send refused' >> probe.txt; ",
            c = clawpool.display()
        ),
        "echo inside > inside.txt".to_owned(),
    ]
    .concat();
    let mut server = clawpool_tests::ModelServer::start(
        &s.sandbox.dir.path().join("model"),
        &serde_json::json!([
            {"tool_use": {"name": "Bash", "input": {"command": command, "description": "Probe"}}},
            {"text": "Done."}
        ]),
    );
    let config = write_config(
        &s.sandbox,
        Some(&lanes_dir(&s.sandbox)),
        "claude",
        "args = [\"--dangerously-skip-permissions\"]\n",
    );
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("sandbox = \"workspace\"\n{text}")).expect("config");
    // The yolo mode a sandbox is for; IS_SANDBOX lets Claude Code take it as root (CI's user).
    let mut env = claude_env(&s.sandbox, &server.url());
    env.push("IS_SANDBOX=1".into());
    let mut run = start_lane(&s.sandbox, &config, "claude", &lane, &env, "pty");
    let (code, outcome) = finish(&mut run, &lane);
    let report = format!("{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(code, 0, "{report}");
    assert_eq!(outcome["state"]["status"], "finished", "{report}");

    let probe = std::fs::read_to_string(lane.join("probe.txt"))
        .unwrap_or_else(|e| panic!("no probe ({e}): {report}"));
    assert_eq!(
        probe.lines().collect::<Vec<_>>(),
        [
            "abs refused",
            "main refused",
            "home refused",
            "other socket hidden",
            "trust refused",
            "send refused",
        ],
        "{probe}"
    );
    assert_eq!(
        std::fs::read_to_string(lane.join("inside.txt")).expect("the lane's work"),
        "inside\n"
    );
    for escaped in [outside, s.repo.join("escape.txt"), home.join(".bashrc")] {
        assert!(!escaped.exists(), "{} was written", escaped.display());
    }
    // The other lane is as it was: held, untrusted, given nothing.
    let other_state: Value = clawpool_tests::published_state(&s.other);
    assert_eq!(other_state["lane_status"], "blocked", "{other_state}");
    assert_eq!(other_state["trust_gate_cleared"], false, "{other_state}");
    assert!(
        !s.other.join(".prompts.jsonl").exists(),
        "a prompt reached it"
    );
    let events = other.events();
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "lane.trust_resolved" || e["kind"] == "lane.prompt_typed"),
        "{}",
        other.report()
    );
    // From outside the sandbox the same trust goes through, and that lane finishes.
    let out = s
        .sandbox
        .clawpool()
        .arg("trust")
        .arg(&s.other)
        .output()
        .expect("clawpool trust");
    assert!(out.status.success(), "{}", stderr(&out));
    let status = other.wait_exit(std::time::Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", other.report());
    assert_eq!(
        std::fs::read_to_string(s.other.join("out.txt")).expect("the other lane's work"),
        "done\n"
    );
    drop(run);
    server.stop();
}

/// A sandboxed lane in a main checkout (`clawpool run`): its worktree holds `.git`, yet the
/// repository's hooks and config (which clawpool's own git commands would run outside the
/// sandbox) and clawpool's folder stay out of its reach, while its commit lands.
#[test]
fn a_sandboxed_lane_in_a_main_checkout_cannot_touch_git_hooks_config_or_clawpool() {
    let s = site();
    let git_dir = s.repo.join(".git");
    let config_before = std::fs::read_to_string(git_dir.join("config")).expect("config");
    let command = [
        try_write("hook", &git_dir.join("hooks/post-commit")),
        format!(
            "(echo '[alias]' >> '{}') 2>/dev/null && echo 'config wrote' >> probe.txt || echo 'config refused' >> probe.txt; ",
            git_dir.join("config").display()
        ),
        try_write("clawpool", &git_dir.join("clawpool/escape.txt")),
    ]
    .concat();
    let scenario_file = s.sandbox.dir.path().join("scenario.toml");
    std::fs::write(&scenario_file, scenario(&command)).expect("scenario");
    let config = s.sandbox.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "sandbox = \"workspace\"\ntrusted_roots = [{:?}]\n[handshake]\nfinish_idle_ms = 300\n\
             [profiles.scripted.launch]\ncommand = {:?}\n\
             env = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            s.sandbox.dir.path().display().to_string(),
            workspace_bin("clawpool-scripted-agent")
                .display()
                .to_string(),
            scenario_file.display().to_string(),
        ),
    )
    .expect("config");
    let out = s
        .sandbox
        .clawpool()
        .args(["run", "--output-format", "json", "--agent", "scripted"])
        .arg("--config")
        .arg(&config)
        .arg("--cwd")
        .arg(&s.repo)
        .args(["--prompt", "work"])
        .output()
        .expect("clawpool run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let probe = std::fs::read_to_string(s.repo.join("probe.txt")).expect("probe");
    assert_eq!(
        probe.lines().collect::<Vec<_>>(),
        ["hook refused", "config refused", "clawpool refused"],
        "{probe}"
    );
    assert!(
        !git_dir.join("hooks/post-commit").exists(),
        "a hook was written"
    );
    assert!(!git_dir.join("clawpool/escape.txt").exists());
    assert_eq!(
        std::fs::read_to_string(git_dir.join("config")).expect("config"),
        config_before
    );
    assert_eq!(git_log(&s.repo)[0], "sandboxed work");
}

/// A sandboxed tmux lane whose supervisor is SIGKILLed mid-turn: the state file's pid is the
/// sandbox's leader (bubblewrap, leading the process group the agent is in), alive in the
/// tmux pane; `clawpool adopt` takes the lane over and it finishes, its commit made inside.
#[test]
fn a_sandboxed_tmux_lane_is_adopted_after_its_supervisor_is_killed() {
    let s = site();
    let dir = s.sandbox.dir.path();
    // The turn waits for the test's go-ahead file, so the kill lands mid-turn.
    std::fs::write(
        dir.join("scenario.toml"),
        scenario("while [ ! -e go ]; do sleep 0.05; done; ").replace(
            "steps = [\n",
            "steps = [\n  { do = \"sleep\", ms = 500 },\n",
        ),
    )
    .expect("scenario");
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "sandbox = \"workspace\"\ntrusted_roots = [{:?}]\n[handshake]\nfinish_idle_ms = 300\n\
             [profiles.scripted.launch]\ncommand = {:?}\n\
             env = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            dir.display().to_string(),
            workspace_bin("clawpool-scripted-agent")
                .display()
                .to_string(),
            dir.join("scenario.toml").display().to_string(),
        ),
    )
    .expect("config");
    let packet = dir.join("packet.json");
    std::fs::write(
        &packet,
        r#"{"lanes": [{"name": "boxed", "agent": "scripted", "prompt": "work"}]}"#,
    )
    .expect("packet");
    let mut cmd = s.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--transport", "tmux", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&s.repo);
    let mut first = clawpool_tests::LaneRun::start(cmd, &dir.join("first.stderr"));
    first.wait_for(
        "lane.running",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "lane.running",
        || crate::real_agents::screen_report(&s.lane()),
    );
    first.signal(libc::SIGKILL);
    first.wait_exit(std::time::Duration::from_secs(10));

    // The file as the killed supervisor left it (it may be behind its log until adoption
    // repairs it): the lane's pid and sandbox are in it from the lane's start.
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(s.lane().join(".claw/worker-state.json")).expect("state file"),
    )
    .expect("JSON");
    assert_eq!(state["sandbox"]["mode"], "workspace", "{state}");
    let pid = state["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no pid: {state}"));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("the lane's pid is alive");
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    assert!(
        args[0].ends_with(b"bwrap"),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    assert!(
        args.iter().any(|a| a.ends_with(b"clawpool-scripted-agent")),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    // It leads the group clawpool signals: the agent inside is in it.
    let pgid = unsafe { libc::getpgid(pid as i32) };
    assert_eq!(pgid, pid as i32);

    std::fs::write(s.lane().join("go"), "").expect("go");
    let out = s
        .sandbox
        .clawpool()
        .args(["adopt", "--output-format", "json", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("clawpool adopt");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let state = s.state();
    assert_eq!(state["status"], "finished", "{state}");
    assert_eq!(
        std::fs::read_to_string(s.lane().join("out.txt")).expect("out"),
        "done\n"
    );
    assert_eq!(git_log(&s.lane())[0], "sandboxed work");
}

/// Codex 0.169.0's own sandbox nested in the lane's: its model asks it to run a command
/// (`exec_command`, no escalation) that writes in the worktree and to an absolute path outside.
/// Codex runs it under its own `workspace-write` sandbox (bubblewrap) inside the lane's: the
/// inside write lands, the outside one is refused, and the lane finishes from Codex's protocol.
/// HOME is outside `/tmp`: Codex's sandbox gives the command a fresh `/tmp`, and its helper
/// (`codex-linux-sandbox`, linked under `~/.codex/tmp`) must still be found there.
#[test]
fn a_sandboxed_codex_runs_a_command_in_its_own_sandbox_nested_in_the_lanes() {
    let sandbox = Sandbox::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let outside = sandbox.dir.path().join("outside-by-codex.txt");
    let command = format!(
        "printf inside > inside.txt; printf outside > {}",
        outside.display()
    );
    let ran = run_sandboxed_codex(
        &sandbox,
        "nested-codex",
        &serde_json::json!([
            {"tool_use": {"name": "exec_command", "input": {"cmd": command}}},
            {"text": "Done."}
        ]),
    );
    let (lane, report, mut server) = (ran.lane, ran.report, ran.server);
    // What Codex sent its model back as the command's output: the command ran (no sandbox
    // set-up error from the inner bubblewrap) and its outside write was refused.
    let outputs: Vec<String> = server
        .main_requests()
        .iter()
        .flat_map(|r| r["body"]["input"].as_array().cloned().unwrap_or_default())
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(outputs.len(), 1, "{outputs:?}\n{report}");
    assert!(!outputs[0].contains("bwrap:"), "{outputs:?}");
    assert!(outputs[0].contains("Read-only file system"), "{outputs:?}");
    assert_eq!(
        std::fs::read_to_string(lane.join("inside.txt"))
            .ok()
            .as_deref(),
        Some("inside"),
        "{outputs:?}\n{report}"
    );
    assert!(!outside.exists(), "{report}");
    server.stop();
}
