//! `clawpool permissions check` through the built binary: the decision and the rule for lanes
//! a real `clawpool spawn` made (their worktrees, packet profiles and sibling lanes), the
//! policy file's `[permissions]`, and bad input refused with a clear error.

use std::process::Output;

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// Two lanes: `alpha` with the default profile, `beta` read-only by its packet.
const TWO_LANES: &str = r#"{"defaults": {"agent": "scripted"}, "lanes": [
  {"name": "alpha", "prompt": "do alpha"},
  {"name": "beta", "prompt": "do beta", "permission_profile": "read-only"}]}"#;

fn check(s: &Setup, args: &[&str]) -> Output {
    s.sandbox
        .clawpool()
        .args(["permissions", "check", "--config"])
        .arg(&s.config)
        .args(args)
        .current_dir(&s.repo)
        .output()
        .expect("clawpool permissions check runs")
}

fn decision(s: &Setup, lane: &str, command: &str) -> Value {
    let out = check(
        s,
        &[
            "--lane",
            lane,
            "--command",
            command,
            "--output-format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{command}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn json_error(out: &Output) -> Value {
    serde_json::from_slice(&out.stderr).expect("the error is one JSON document on stderr")
}

#[test]
fn check_decides_with_the_lanes_profile_worktree_and_siblings() {
    let s = setup();
    let out = s.spawn(TWO_LANES, &["--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let alpha = s.lanes_dir().join("alpha").canonicalize().expect("alpha");

    let write = "mkdir -p src && touch src/new.rs";
    let as_alpha = decision(&s, "alpha", write);
    assert_eq!(as_alpha["decision"], "allow", "{as_alpha:#}");
    assert_eq!(as_alpha["rule"], "compound");
    assert_eq!(as_alpha["profile"], "workspace-write");
    assert_eq!(as_alpha["worktree"], alpha.display().to_string());
    let parts = as_alpha["parts"].as_array().expect("parts");
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0]["verb"], "mkdir");
    assert_eq!(parts[0]["rule"], "profile:workspace-write");

    // The same question from the read-only lane goes to a person.
    let as_beta = decision(&s, "beta", write);
    assert_eq!(as_beta["decision"], "ask", "{as_beta:#}");
    assert_eq!(as_beta["rule"], "no_rule");
    assert_eq!(as_beta["profile"], "read-only");
    // A read inside its own worktree does not.
    assert_eq!(decision(&s, "beta", "cat out.txt")["rule"], "default_safe");

    let table = [
        ("cat ../beta/out.txt", "deny", "hard_block:other_lane"),
        ("ls; rm -rf ~", "deny", "hard_block:remove_root"),
        ("ls $(rm x)", "ask", "reader:command_substitution"),
        (
            "git -c core.pager='sh -c x' log",
            "ask",
            "reader:git_global_option",
        ),
        ("cat ../../etc/passwd", "ask", "no_rule"),
        // The shipped defaults deny pushing anywhere and allow cargo in the lane.
        (
            "git push origin lanes/alpha",
            "deny",
            "permissions.entry#1:deny",
        ),
        ("cargo test", "allow", "permissions.entry#2:allow"),
    ];
    for (command, verdict, rule) in table {
        let got = decision(&s, "alpha", command);
        assert_eq!(
            (got["decision"].as_str(), got["rule"].as_str()),
            (Some(verdict), Some(rule)),
            "{command}: {got:#}"
        );
    }

    // Text: the decision and rule first, then each part.
    let out = check(&s, &["--lane", "alpha", "--command", "ls && cat ../x"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("ask by no_rule: part `cat ../x`: a path or the cwd is outside the lane's worktree")
    );
    assert!(text.contains("allow ls  [default_safe]"), "{text}");

    // A file write is decided by the same scopes; --cwd moves the command.
    let out = check(
        &s,
        &[
            "--lane",
            "alpha",
            "--write",
            "src/lib.rs",
            "--output-format",
            "json",
        ],
    );
    let file: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(file["decision"], "allow", "{file:#}");
    assert_eq!(file["tool"], "write");
    let sibling = s.lanes_dir().join("beta");
    let out = check(
        &s,
        &[
            "--lane",
            "alpha",
            "--command",
            "ls",
            "--cwd",
            &sibling.display().to_string(),
            "--output-format",
            "json",
        ],
    );
    let moved: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(moved["rule"], "hard_block:other_lane", "{moved:#}");
}

#[test]
fn bad_input_is_a_clear_error_with_a_kind() {
    let s = setup();
    let cases: [(&[&str], &str, &str); 4] = [
        (
            &["--command", "ls", "--cwd", "/no/such/folder"],
            "cwd_not_found",
            "/no/such/folder",
        ),
        (
            &["--command", "ls", "--profile", "yolo"],
            "invalid_argument",
            "--profile \"yolo\"",
        ),
        (
            &["--command", "ls", "--lane", "nosuch"],
            "unknown_lane",
            "nosuch",
        ),
        (
            &["--command", "  "],
            "invalid_argument",
            "--command is empty",
        ),
    ];
    for (args, kind, names) in cases {
        let mut all = args.to_vec();
        all.extend(["--output-format", "json"]);
        let out = check(&s, &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        let error = json_error(&out);
        assert_eq!(error["error"]["kind"], kind, "{args:?}: {error:#}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(names), "{args:?}: {message}");
    }

    // A bad [permissions] entry: the policy is refused, naming the entry and its key, by
    // `policy check` and by `permissions check` alike.
    let policy = s.sandbox.dir.path().join("bad-policy.toml");
    std::fs::write(
        &policy,
        "[permissions]\n[[permissions.entries]]\nverb = \"ls\"\nscope = \"lane\"\ndecision = \"allow\"\n\n[[permissions.entries]]\nverb = \"rm\"\nscope = \"src\"\ndecision = \"deny\"\n",
    )
    .expect("policy");
    let out = s
        .sandbox
        .clawpool()
        .args(["policy", "check", "--output-format", "json"])
        .arg(&policy)
        .output()
        .expect("policy check runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let error = json_error(&out);
    assert_eq!(error["error"]["kind"], "invalid_policy");
    let problems = error["error"]["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(
        problems[0]["at"],
        serde_json::json!({"in": "permission_entry", "index": 2})
    );
    assert_eq!(problems[0]["key"], "scope");

    let config = s.sandbox.dir.path().join("bad-config.toml");
    std::fs::write(
        &config,
        format!("policy = {:?}\n", policy.display().to_string()),
    )
    .expect("config");
    let out = s
        .sandbox
        .clawpool()
        .args(["permissions", "check", "--command", "ls", "--config"])
        .arg(&config)
        .current_dir(&s.repo)
        .output()
        .expect("permissions check runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[[permissions.entries]] #2: scope: \"src\""),
        "{}",
        stderr(&out)
    );
}

/// The scripted agent asks to run a compound that stays in its worktree, to create a file in
/// it, and to push: the first two are answered yes and the push no, each by the policy.
const ASKS_ALLOWED_AND_DENIED: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "permission", tool = "Bash(mkdir -p src && touch src/a.rs)", command = "mkdir -p src && touch src/a.rs" },
  { do = "write_file", path = "src/a.rs", content = "// a\n" },
  { do = "permission", tool = "Write(notes.txt)", file = "notes.txt" },
  { do = "write_file", path = "notes.txt", content = "ok\n" },
  { do = "permission", tool = "Bash(git push origin main)", command = "git push origin main" },
  { do = "write_file", path = "pushed.txt", content = "never\n" },
]
"#;

fn decided(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "lane.permission.decided")
        .collect()
}

#[test]
fn the_policy_answers_the_agents_questions_on_screen() {
    let sandbox = clawpool_tests::Sandbox::new();
    let (repo, config) = crate::handshake::setup(&sandbox, ASKS_ALLOWED_AND_DENIED, true, "");
    let lane = crate::handshake::Lane::start(&sandbox, &repo, &config, "scripted", "work");
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:#?}");
    assert!(
        !events.iter().any(|e| e["kind"] == "lane.blocked"),
        "no person was needed: {events:#?}"
    );
    let decisions = decided(&events);
    let summary: Vec<(&str, &str, &str)> = decisions
        .iter()
        .map(|e| {
            let d = &e["detail"];
            (
                d["tool"].as_str().unwrap_or(""),
                d["decision"].as_str().unwrap_or(""),
                d["rule"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("bash", "allow", "compound"),
            ("write", "allow", "profile:workspace-write"),
            ("bash", "deny", "permissions.entry#1:deny"),
        ],
        "{decisions:#?}"
    );
    let push = &decisions[2]["detail"];
    assert_eq!(push["verb"], "git push");
    assert_eq!(push["args"], serde_json::json!(["origin", "main"]));
    let worktree = repo.canonicalize().expect("repo");
    assert_eq!(push["cwd"], worktree.display().to_string());
    let answers: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["kind"] == "lane.dialog_answered")
        .map(|e| {
            (
                e["detail"]["choice"].as_str().unwrap_or(""),
                e["detail"]["by"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        answers,
        [("yes", "policy"), ("yes", "policy"), ("no", "policy")]
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).expect("allowed write"),
        "ok\n"
    );
    assert!(repo.join("src/a.rs").is_file());
    assert!(
        !repo.join("pushed.txt").exists(),
        "the denied step never ran"
    );
    // The decisions are in the lane's own event log too, and counted in its state file.
    let logged = std::fs::read_to_string(repo.join(".claw/events.jsonl")).expect("events");
    assert_eq!(logged.matches("lane.permission.decided").count(), 3);
    let permissions = state_permissions(&repo);
    assert_eq!(
        (
            &permissions["allowed"],
            &permissions["denied"],
            &permissions["asked"]
        ),
        (&Value::from(2), &Value::from(1), &Value::from(0)),
        "{permissions:#}"
    );
    let recent = permissions["recent"].as_array().expect("recent");
    assert_eq!(recent.len(), 3);
    assert_eq!(recent[2]["rule"], "permissions.entry#1:deny");
}

/// The `permissions` section of the lane's state file.
fn state_permissions(lane: &std::path::Path) -> Value {
    clawpool_tests::published_state(lane)["permissions"].clone()
}

/// A read outside the worktree, then (after working a moment, so the first dialog is seen
/// gone) a compound whose mutating part leaves it.
const ASKS_WHAT_A_PERSON_DECIDES: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "permission", tool = "Bash(cat ../../etc/passwd)", command = "cat ../../etc/passwd" },
  { do = "sleep", ms = 300 },
  { do = "permission", tool = "Bash(ls && rm -rf ../elsewhere)", command = "ls && rm -rf ../elsewhere" },
  { do = "write_file", path = "out.txt", content = "done\n" },
]
"#;

#[test]
fn questions_the_policy_cannot_allow_wait_for_a_person() {
    let sandbox = clawpool_tests::Sandbox::new();
    let (repo, config) = crate::handshake::setup(&sandbox, ASKS_WHAT_A_PERSON_DECIDES, true, "");
    let mut lane = crate::handshake::Lane::start(&sandbox, &repo, &config, "scripted", "work");
    for command in ["cat ../../etc/passwd", "ls && rm -rf ../elsewhere"] {
        let decision = lane.wait_kind("lane.permission.decided");
        assert_eq!(decision["detail"]["decision"], "ask", "{decision:#}");
        assert_eq!(decision["detail"]["rule"], "no_rule");
        assert_eq!(decision["detail"]["command"], command);
        let blocked = lane.wait_kind("lane.blocked");
        assert_eq!(blocked["to"]["subphase"], "tool_permission");
        assert!(!repo.join("out.txt").exists());
        let out = sandbox
            .clawpool()
            .args(["answer", "--choice", "yes", "--output-format", "json"])
            .arg(&repo)
            .output()
            .expect("clawpool answer");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:#?}");
    let by: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "lane.dialog_answered")
        .map(|e| e["detail"]["by"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(by, ["operator", "operator"]);
    assert_eq!(state_permissions(&repo)["asked"], 2);
}

/// The real Claude Code 2.1.330 in its default permission mode (it asks before a write or a
/// mutating command), offline against the scripted model server, in a trusted lane.
fn claude_lane(
    sandbox: &clawpool_tests::Sandbox,
    script: &Value,
    policy: Option<&str>,
) -> (
    std::path::PathBuf,
    clawpool_tests::ModelServer,
    clawpool_tests::LaneRun,
) {
    use crate::real_agents::plain_lane;
    let lane = plain_lane(sandbox, "alpha");
    let config = claude_config(sandbox, policy);
    let (server, run) = start_claude(sandbox, &config, &lane, script);
    (lane, server, run)
}

/// A `--config` for the real Claude Code in its default permission mode, every lane under the
/// sandbox's `lanes` folder trusted, with `policy` (a policy file's text) when given.
fn claude_config(sandbox: &clawpool_tests::Sandbox, policy: Option<&str>) -> std::path::PathBuf {
    use crate::real_agents::{lanes_dir, write_config};
    clawpool_tests::real_agent("claude");
    clawpool_tests::seed_claude_home(&sandbox.home(), serde_json::json!({}));
    let config = write_config(
        sandbox,
        Some(&lanes_dir(sandbox)),
        "claude",
        "args = [\"--permission-mode\", \"default\"]\n",
    );
    if let Some(policy) = policy {
        let file = sandbox.dir.path().join("policy.toml");
        std::fs::write(&file, policy).expect("policy");
        let text = std::fs::read_to_string(&config).expect("config");
        let text = format!("policy = {:?}\n{text}", file.display().to_string());
        std::fs::write(&config, text).expect("config");
    }
    config
}

/// Starts `clawpool run` of the real Claude Code in `lane`, offline against a scripted model
/// server of its own serving `script`.
fn start_claude(
    sandbox: &clawpool_tests::Sandbox,
    config: &std::path::Path,
    lane: &std::path::Path,
    script: &Value,
) -> (clawpool_tests::ModelServer, clawpool_tests::LaneRun) {
    use crate::real_agents::{claude_env, start_lane};
    let name = lane.file_name().and_then(|n| n.to_str()).unwrap_or("lane");
    let server = clawpool_tests::ModelServer::start(
        &sandbox.dir.path().join(format!("model-{name}")),
        script,
    );
    let run = start_lane(
        sandbox,
        config,
        "claude",
        lane,
        &claude_env(sandbox, &server.url()),
        "pty",
    );
    (server, run)
}

/// The lane's first `lane.permission.decided` event.
fn first_decision(run: &mut clawpool_tests::LaneRun, lane: &std::path::Path) -> Value {
    run.wait_for(
        "the permission decision",
        std::time::Duration::from_secs(60),
        |e| e["kind"] == "lane.permission.decided",
        || crate::real_agents::screen_report(lane),
    )
}

/// The lane blocks on the question; a person says no through `clawpool answer`; the lane goes
/// on to its end and exits 0.
fn a_person_says_no(
    sandbox: &clawpool_tests::Sandbox,
    run: &mut clawpool_tests::LaneRun,
    lane: &std::path::Path,
) {
    use crate::real_agents::{finish, screen_report};
    let blocked = run.wait_for(
        "blocked",
        std::time::Duration::from_secs(60),
        |e| e["kind"] == "lane.blocked",
        || screen_report(lane),
    );
    assert_eq!(blocked["to"]["subphase"], "tool_permission");
    let out = sandbox
        .clawpool()
        .args(["answer", "--choice", "no", "--output-format", "json"])
        .arg(lane)
        .output()
        .expect("clawpool answer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, _) = finish(run, lane);
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(lane));
}

/// Claude Code's PermissionRequest hook answered the question: one decision recorded with
/// source `hook`, and no keystroke answered its dialog (which Claude Code 2.1.330 draws while
/// the hook runs, and takes down when the hook's answer comes).
fn answered_through_the_hook<'a>(events: &'a [Value], run: &clawpool_tests::LaneRun) -> &'a Value {
    let decided: Vec<&Value> = decided(events);
    assert_eq!(decided.len(), 1, "{decided:#?}");
    assert_eq!(decided[0]["source"], "hook", "{:#}", decided[0]);
    assert!(
        !events.iter().any(|e| {
            e["kind"] == "lane.dialog_answered" && e["detail"]["dialog"] == "tool_permission"
        }),
        "no keystroke answered the question: {}",
        run.report()
    );
    decided[0]
}

#[test]
fn claude_codes_file_write_in_its_worktree_is_approved_through_the_hook() {
    use crate::real_agents::{assert_nothing_left, count_kind, finish, screen_report};
    let sandbox = clawpool_tests::Sandbox::new();
    let lane = crate::real_agents::plain_lane(&sandbox, "alpha");
    let script = serde_json::json!([
        {"tool_use": {"name": "Write", "input": {
            "file_path": lane.join("hello.txt").display().to_string(),
            "content": "hi"
        }}},
        {"text": "Done. Created hello.txt."}
    ]);
    let (lane, mut server, mut run) = claude_lane(&sandbox, &script, None);
    let (code, outcome) = finish(&mut run, &lane);
    let events = run.events();
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(outcome["state"]["status"], "finished");
    let detail = &answered_through_the_hook(&events, &run)["detail"];
    assert_eq!(detail["tool"], "write", "{detail:#}");
    assert_eq!(detail["decision"], "allow");
    assert_eq!(detail["rule"], "profile:workspace-write");
    assert_eq!(
        detail["args"],
        serde_json::json!([lane.join("hello.txt").display().to_string()])
    );
    assert_eq!(count_kind(&events, "lane.blocked"), 0, "{}", run.report());
    assert_eq!(
        std::fs::read_to_string(lane.join("hello.txt")).expect("hello.txt in the lane"),
        "hi"
    );
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

#[test]
fn claude_codes_denied_command_is_denied_through_the_hook_and_never_runs() {
    use crate::real_agents::{assert_nothing_left, count_kind, finish, screen_report};
    let sandbox = clawpool_tests::Sandbox::new();
    let script = serde_json::json!([
        {"tool_use": {"name": "Bash", "input": {
            "command": "touch denied.txt",
            "description": "Create denied.txt"
        }}},
        {"text": "Done."}
    ]);
    let policy = "[[permissions.entries]]\ntool = \"bash\"\nverb = \"touch\"\nscope = \"anywhere\"\ndecision = \"deny\"\n";
    let (lane, mut server, mut run) = claude_lane(&sandbox, &script, Some(policy));
    let (code, outcome) = finish(&mut run, &lane);
    let events = run.events();
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(&lane));
    assert_eq!(outcome["state"]["status"], "finished");
    let detail = &answered_through_the_hook(&events, &run)["detail"];
    assert_eq!(detail["tool"], "bash", "{detail:#}");
    assert_eq!(detail["verb"], "touch");
    assert_eq!(detail["args"], serde_json::json!(["denied.txt"]));
    assert_eq!(detail["decision"], "deny");
    assert_eq!(detail["rule"], "permissions.entry#1:deny");
    // Decided in the folder Claude Code runs the command in, as its payload said.
    assert_eq!(
        detail["cwd"],
        lane.canonicalize().expect("lane").display().to_string()
    );
    assert_eq!(count_kind(&events, "lane.blocked"), 0, "{}", run.report());
    assert!(
        !lane.join("denied.txt").exists(),
        "the denied command never ran"
    );
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

#[test]
fn claude_codes_write_outside_its_worktree_waits_for_a_person() {
    use crate::real_agents::assert_nothing_left;
    let sandbox = clawpool_tests::Sandbox::new();
    let outside = sandbox.dir.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside folder");
    let target = outside.canonicalize().expect("outside").join("hello.txt");
    let script = serde_json::json!([
        {"tool_use": {"name": "Write", "input": {
            "file_path": target.display().to_string(),
            "content": "hi"
        }}},
        {"text": "Done."}
    ]);
    let (lane, mut server, mut run) = claude_lane(&sandbox, &script, None);
    let decision = first_decision(&mut run, &lane);
    assert_eq!(decision["detail"]["tool"], "write", "{decision:#}");
    assert_eq!(decision["detail"]["decision"], "ask");
    assert_eq!(decision["detail"]["rule"], "no_rule");
    assert_eq!(
        decision["source"], "hook",
        "decided from the hook's payload"
    );
    a_person_says_no(&sandbox, &mut run, &lane);
    let events = run.events();
    assert_eq!(
        decided(&events).len(),
        1,
        "the dialog the hook's ask let show is not decided again: {}",
        run.report()
    );
    let by: Vec<&str> = events
        .iter()
        .filter(|e| {
            e["kind"] == "lane.dialog_answered" && e["detail"]["dialog"] == "tool_permission"
        })
        .map(|e| e["detail"]["by"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(by, ["operator"]);
    assert!(
        !target.exists(),
        "nobody allowed the write outside the worktree"
    );
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

#[test]
fn claude_codes_compound_with_a_mutating_part_outside_waits_for_a_person() {
    use crate::real_agents::assert_nothing_left;
    let sandbox = clawpool_tests::Sandbox::new();
    let elsewhere = sandbox.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("a folder outside the lane");
    let script = serde_json::json!([
        {"tool_use": {"name": "Bash", "input": {
            "command": "ls && rm -rf ../../elsewhere",
            "description": "Clean up"
        }}},
        {"text": "Done."}
    ]);
    let (lane, mut server, mut run) = claude_lane(&sandbox, &script, None);
    let decision = first_decision(&mut run, &lane);
    let detail = &decision["detail"];
    assert_eq!(
        detail["command"], "ls && rm -rf ../../elsewhere",
        "{decision:#}"
    );
    assert_eq!(detail["decision"], "ask");
    assert_eq!(detail["verb"], "rm", "the part that decided");
    assert_eq!(detail["parts"], 2);
    a_person_says_no(&sandbox, &mut run, &lane);
    assert!(elsewhere.is_dir(), "nothing outside the lane was removed");
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// The scripted agent asks to run `make build` (no rule allows `make`), then writes a file.
const ASKS_TO_MAKE: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "permission", tool = "Bash(make build)", command = "make build" },
  { do = "write_file", path = "built.txt", content = "built\n" },
]
"#;

/// `clawpool answer` in JSON, with `args` after the lane; its exit code and the document it
/// printed (stdout, or the error on stderr).
fn answer(
    sandbox: &clawpool_tests::Sandbox,
    lane: &std::path::Path,
    args: &[&str],
) -> (i32, Value) {
    let out = sandbox
        .clawpool()
        .arg("answer")
        .arg(lane)
        .args(args)
        .args(["--output-format", "json"])
        .output()
        .expect("clawpool answer");
    let text = if out.status.success() {
        &out.stdout
    } else {
        &out.stderr
    };
    let document = serde_json::from_slice(text)
        .unwrap_or_else(|_| panic!("one JSON document: {}", String::from_utf8_lossy(text)));
    (out.status.code().unwrap_or(-1), document)
}

/// A `clawpool run` lane of the scripted agent asking [`ASKS_TO_MAKE`] in `folder`: waits until
/// it is blocked on the question the policy left to a person, and returns it.
fn blocked_on_make(
    sandbox: &clawpool_tests::Sandbox,
    folder: &std::path::Path,
    config: &std::path::Path,
) -> crate::handshake::Lane {
    let mut lane = crate::handshake::Lane::start(sandbox, folder, config, "scripted", "build it");
    let decision = lane.wait_kind("lane.permission.decided");
    assert_eq!(decision["detail"]["decision"], "ask", "{decision:#}");
    assert_eq!(decision["detail"]["rule"], "no_rule");
    assert_eq!(decision["detail"]["verb"], "make");
    let blocked = lane.wait_kind("lane.blocked");
    assert_eq!(blocked["to"]["subphase"], "tool_permission");
    lane
}

#[test]
fn an_always_here_grant_is_used_by_the_repositorys_other_lanes_only() {
    let sandbox = clawpool_tests::Sandbox::new();
    let (repo, config) = crate::handshake::setup(&sandbox, ASKS_TO_MAKE, true, "");
    // A second worktree of the same repository, and a lane in another repository.
    let second = sandbox.dir.path().join("second");
    let added = std::process::Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["worktree", "add", "-q", "-b", "second"])
        .arg(&second)
        .status()
        .expect("git worktree add");
    assert!(added.success());
    let other = clawpool_tests::git_repo(sandbox.dir.path(), "other");

    // Bad input is refused before anything is answered.
    let lane = blocked_on_make(&sandbox, &repo, &config);
    let (code, error) = answer(
        &sandbox,
        &repo,
        &["--choice", "yes", "--remember", "forever"],
    );
    assert_eq!(code, 2, "{error:#}");
    assert_eq!(error["error"]["kind"], "invalid_argument");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("\"forever\"")
    );
    let (code, error) = answer(
        &sandbox,
        &repo,
        &["--choice", "no", "--remember", "repository"],
    );
    assert_eq!(code, 2, "{error:#}");
    assert_eq!(error["error"]["kind"], "invalid_argument");

    // The operator's yes, always here.
    let (code, answered) = answer(
        &sandbox,
        &repo,
        &["--choice", "yes", "--remember", "repository"],
    );
    assert_eq!(code, 0, "{answered:#}");
    assert_eq!(answered["verdict"], "done");
    let grant = &answered["grant"];
    assert_eq!(grant["id"], "repository#1", "{answered:#}");
    assert_eq!(
        (&grant["scope"], &grant["tool"], &grant["verb"]),
        (
            &Value::from("repository"),
            &Value::from("bash"),
            &Value::from("make")
        )
    );
    let common = repo.join(".git/clawpool/permission-grants.json");
    assert_eq!(answered["store"], common.display().to_string());
    let store: Value =
        serde_json::from_str(&std::fs::read_to_string(&common).expect("the store")).expect("JSON");
    assert_eq!(store["version"], 2);
    assert_eq!(store["grants"][0]["id"], "repository#1");
    // Signed by the pool under the user's grant key, made on first use, private.
    assert_eq!(store["grants"][0]["mac"].as_str().map(str::len), Some(64));
    let key = sandbox.state_home().join("clawpool/grant-key");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&key).expect("grant key").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:#?}");
    assert!(repo.join("built.txt").is_file());
    // The question is answered: nothing is left to remember.
    let (code, error) = answer(&sandbox, &repo, &["--choice", "yes", "--remember", "lane"]);
    assert_eq!(code, 2, "{error:#}");
    assert_eq!(error["error"]["kind"], "no_permission_question");

    // The repository's second lane: the grant allows its `make` without a person.
    let lane = crate::handshake::Lane::start(&sandbox, &second, &config, "scripted", "build it");
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:#?}");
    let decisions = decided(&events);
    assert_eq!(decisions.len(), 1, "{decisions:#?}");
    assert_eq!(decisions[0]["detail"]["decision"], "allow");
    assert_eq!(decisions[0]["detail"]["rule"], "grant:repository#1");
    assert!(
        !events.iter().any(|e| e["kind"] == "lane.blocked"),
        "{events:#?}"
    );
    assert!(second.join("built.txt").is_file());
    let out = sandbox
        .clawpool()
        .args(["permissions", "explain", "--output-format", "json"])
        .arg(&second)
        .output()
        .expect("clawpool permissions explain");
    let explained: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let question = &explained["questions"][0];
    assert_eq!(question["grant"], "repository#1", "{explained:#}");
    assert_eq!(question["answered"], "answered yes by policy");
    let permissions = state_permissions(&second);
    assert_eq!(
        permissions["grants"][0]["grant"], "repository#1",
        "{permissions:#}"
    );
    assert_eq!(permissions["grants"][0]["allowed"], 1);

    // Another repository's lane: the grant is not its; a person answers, keeping this yes for
    // every lane anywhere, in the user's store.
    let lane = blocked_on_make(&sandbox, &other, &config);
    let (code, answered) = answer(
        &sandbox,
        &other,
        &["--choice", "yes", "--remember", "always"],
    );
    assert_eq!(code, 0, "{answered:#}");
    assert_eq!(answered["grant"]["id"], "always#1", "{answered:#}");
    let user_store = sandbox.state_home().join("clawpool/permission-grants.json");
    assert_eq!(answered["store"], user_store.display().to_string());
    let (code, _, _) = lane.finish();
    assert_eq!(code, 0);
    // Its next question is allowed by that grant.
    let lane = crate::handshake::Lane::start(&sandbox, &other, &config, "scripted", "again");
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:#?}");
    let decisions = decided(&events);
    assert_eq!(
        decisions[0]["detail"]["rule"], "grant:always#1",
        "{decisions:#?}"
    );
}

/// Claude Code asks to run `ln -s notes.txt link.txt` in its worktree: `ln` is neither a
/// default-safe nor a file-writing verb, so the default policy leaves it to a person, though
/// every path stays inside the lane's worktree — what a grant covers.
fn asks_to_link() -> Value {
    serde_json::json!([
        {"tool_use": {"name": "Bash", "input": {
            "command": "ln -s notes.txt link.txt",
            "description": "Link the notes"
        }}},
        {"text": "Done."}
    ])
}

/// Issue 15, with the real Claude Code 2.1.330 in its default permission mode, hooks on: an
/// operator's `always here` grant, made on one lane's question, allows the same question of the
/// repository's second lane through the hook without a person; a lane of another repository
/// is still asked.
#[test]
fn claude_codes_always_here_grant_is_used_by_the_repositorys_other_lane_only() {
    use crate::real_agents::{assert_nothing_left, count_kind, finish, lanes_dir, screen_report};
    let sandbox = clawpool_tests::Sandbox::new();
    let lanes = lanes_dir(&sandbox);
    let repo = clawpool_tests::git_repo(&lanes, "app");
    let second = lanes.join("second");
    let added = std::process::Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["worktree", "add", "-q", "-b", "second"])
        .arg(&second)
        .status()
        .expect("git worktree add");
    assert!(added.success());
    let other = clawpool_tests::git_repo(&lanes, "other");
    let config = claude_config(&sandbox, None);

    // The first lane's question goes to a person, who answers yes, always here.
    let (mut first_server, mut first_run) = start_claude(&sandbox, &config, &repo, &asks_to_link());
    let decision = first_decision(&mut first_run, &repo);
    let detail = &decision["detail"];
    assert_eq!(
        (
            &decision["source"],
            &detail["decision"],
            &detail["rule"],
            &detail["verb"]
        ),
        (
            &Value::from("hook"),
            &Value::from("ask"),
            &Value::from("no_rule"),
            &Value::from("ln")
        ),
        "{decision:#}"
    );
    let blocked = first_run.wait_for(
        "blocked",
        std::time::Duration::from_secs(60),
        |e| e["kind"] == "lane.blocked",
        || screen_report(&repo),
    );
    assert_eq!(blocked["to"]["subphase"], "tool_permission");
    let (code, answered) = answer(
        &sandbox,
        &repo,
        &["--choice", "yes", "--remember", "repository"],
    );
    assert_eq!(code, 0, "{answered:#}");
    let grant = &answered["grant"];
    assert_eq!(
        (&grant["id"], &grant["tool"], &grant["verb"]),
        (
            &Value::from("repository#1"),
            &Value::from("bash"),
            &Value::from("ln")
        ),
        "{answered:#}"
    );
    assert_eq!(
        answered["store"],
        repo.join(".git/clawpool/permission-grants.json")
            .display()
            .to_string()
    );

    // The repository's second lane and the other repository's lane ask the same question, at
    // the same time, while the first lane finishes.
    let (mut second_server, mut second_run) =
        start_claude(&sandbox, &config, &second, &asks_to_link());
    let (mut other_server, mut other_run) =
        start_claude(&sandbox, &config, &other, &asks_to_link());
    let (code, _) = finish(&mut first_run, &repo);
    assert_eq!(code, 0, "{}\n{}", first_run.report(), screen_report(&repo));
    assert!(
        repo.join("link.txt").is_symlink(),
        "the answered command ran"
    );

    // The other repository's lane: the grant is not its; its question waits for a person.
    let decision = first_decision(&mut other_run, &other);
    assert_eq!(decision["source"], "hook", "{decision:#}");
    assert_eq!(decision["detail"]["decision"], "ask");
    assert_eq!(decision["detail"]["rule"], "no_rule");
    a_person_says_no(&sandbox, &mut other_run, &other);
    assert!(
        !other.join("link.txt").exists(),
        "nothing ran in the other repository"
    );

    // The second lane: allowed by the grant through the hook, no person, no keystroke.
    let decision = first_decision(&mut second_run, &second);
    assert_eq!(
        decision["detail"]["rule"], "grant:repository#1",
        "{decision:#}"
    );
    let (code, outcome) = finish(&mut second_run, &second);
    let events = second_run.events();
    assert_eq!(
        code,
        0,
        "{}\n{}",
        second_run.report(),
        screen_report(&second)
    );
    assert_eq!(outcome["state"]["status"], "finished");
    let detail = &answered_through_the_hook(&events, &second_run)["detail"];
    assert_eq!(
        (&detail["decision"], &detail["rule"], &detail["verb"]),
        (
            &Value::from("allow"),
            &Value::from("grant:repository#1"),
            &Value::from("ln")
        ),
        "{detail:#}"
    );
    assert_eq!(
        count_kind(&events, "lane.blocked"),
        0,
        "{}",
        second_run.report()
    );
    assert!(
        second.join("link.txt").is_symlink(),
        "the granted command ran"
    );
    let permissions = state_permissions(&second);
    assert_eq!(
        (
            &permissions["grants"][0]["grant"],
            &permissions["grants"][0]["allowed"]
        ),
        (&Value::from("repository#1"), &Value::from(1)),
        "{permissions:#}"
    );

    drop((first_run, second_run, other_run));
    for server in [&mut first_server, &mut second_server, &mut other_server] {
        server.stop();
    }
    assert_nothing_left(&sandbox);
}

#[test]
fn explain_and_the_board_show_a_spawned_lanes_permission_questions() {
    let s = setup();
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        ASKS_ALLOWED_AND_DENIED,
    )
    .expect("scenario");
    let out = s.spawn(
        r#"{"name": "solo", "agent": "scripted", "prompt": "go"}"#,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let clawpool = |args: &[&str]| {
        s.sandbox
            .clawpool()
            .args(args)
            .current_dir(&s.repo)
            .output()
            .expect("clawpool runs")
    };

    let out = clawpool(&["permissions", "explain", "solo", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let explained: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(
        explained["counts"],
        serde_json::json!({"allowed": 2, "denied": 1, "asked": 0})
    );
    let questions = explained["questions"].as_array().expect("questions");
    let summary: Vec<(&str, &str, &str, &str)> = questions
        .iter()
        .map(|q| {
            (
                q["command"].as_str().unwrap_or(""),
                q["decision"].as_str().unwrap_or(""),
                q["rule"].as_str().unwrap_or(""),
                q["answered"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "mkdir -p src && touch src/a.rs",
                "allow",
                "compound",
                "answered yes by policy"
            ),
            (
                "notes.txt",
                "allow",
                "profile:workspace-write",
                "answered yes by policy"
            ),
            (
                "git push origin main",
                "deny",
                "permissions.entry#1:deny",
                "answered no by policy"
            ),
        ],
        "{explained:#}"
    );
    assert_eq!(questions[2]["source"], "screen");
    // --last keeps the latest; text leads with the counts.
    let out = clawpool(&["permissions", "explain", "solo", "--last", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("lane solo: 3 permission question(s): 2 allowed, 1 denied, 0 asked")
    );
    let last = lines.next().unwrap_or_default();
    assert!(
        last.contains("screen bash `git push origin main`: deny by permissions.entry#1:deny"),
        "{text}"
    );
    assert_eq!(lines.next(), None, "{text}");
    let out = clawpool(&[
        "permissions",
        "explain",
        "nosuch",
        "--output-format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json_error(&out)["error"]["kind"], "unknown_lane");

    let out = clawpool(&["board", "--output-format", "json"]);
    let board: Value = serde_json::from_slice(&out.stdout).expect("board JSON");
    assert_eq!(
        board["lanes"][0]["board"]["permissions"],
        serde_json::json!({"allowed": 2, "denied": 1, "asked": 0}),
        "{board:#}"
    );
    let out = clawpool(&["board"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let header = table.lines().next().unwrap_or_default();
    let row = table.lines().nth(1).unwrap_or_default();
    let column = header.find("perms a/d/?").expect("a permissions column");
    assert!(row[column..].starts_with("2/1/0 "), "{table}");
}

/// Codex 0.169.0 asks on screen (`-a on-request`, a command asking for escalation) to run a
/// command inside its worktree, then one the policy denies: the first is approved and runs, the
/// second is refused with Esc and never runs, each by the policy on screen.
#[test]
fn codex_asks_on_screen_and_the_policy_answers_yes_then_no() {
    use crate::real_agents::{
        assert_nothing_left, codex_env, finish, lanes_dir, plain_lane, screen_report, start_lane,
        write_config,
    };
    clawpool_tests::real_agent("codex");
    let sandbox = clawpool_tests::Sandbox::new();
    let lane = plain_lane(&sandbox, "alpha");
    let escalated = |cmd: &str| {
        serde_json::json!({"tool_use": {"name": "exec_command", "input": {
            "cmd": cmd,
            "sandbox_permissions": "require_escalated",
            "justification": "May I?"
        }}})
    };
    let script = serde_json::json!([
        escalated("mkdir made"),
        escalated("touch denied.txt"),
        {"text": "Done."}
    ]);
    let mut server = clawpool_tests::ModelServer::start(&sandbox.dir.path().join("model"), &script);
    clawpool_tests::seed_codex_home(&sandbox, &server.url(), "sk-fake");
    let config = write_config(
        &sandbox,
        Some(&lanes_dir(&sandbox)),
        "codex",
        "trust_store = \"none\"\nargs = [\"--no-daemon\", \"-a\", \"on-request\"]\n",
    );
    let policy = sandbox.dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[permissions.entries]]\ntool = \"bash\"\nverb = \"touch\"\nscope = \"anywhere\"\n\
         decision = \"deny\"\n",
    )
    .expect("policy");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        format!("policy = {:?}\n{text}", policy.display().to_string()),
    )
    .expect("config");
    let mut run = start_lane(
        &sandbox,
        &config,
        "codex",
        &lane,
        &codex_env(&sandbox),
        "pty",
    );
    let (code, _) = finish(&mut run, &lane);
    let events = run.events();
    assert_eq!(code, 0, "{}\n{}", run.report(), screen_report(&lane));
    let decisions = decided(&events);
    let summary: Vec<(&str, &str, &str, &str)> = decisions
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap_or(""),
                e["detail"]["command"].as_str().unwrap_or(""),
                e["detail"]["decision"].as_str().unwrap_or(""),
                e["detail"]["rule"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("screen", "mkdir made", "allow", "profile:workspace-write"),
            (
                "screen",
                "touch denied.txt",
                "deny",
                "permissions.entry#1:deny"
            ),
        ],
        "{}",
        run.report()
    );
    let answers: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| {
            e["kind"] == "lane.dialog_answered" && e["detail"]["dialog"] == "tool_permission"
        })
        .map(|e| {
            (
                e["detail"]["choice"].as_str().unwrap_or(""),
                e["detail"]["by"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(answers, [("yes", "policy"), ("no", "policy")]);
    assert!(lane.join("made").is_dir(), "the approved command ran");
    assert!(
        !lane.join("denied.txt").exists(),
        "the denied one never ran"
    );
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}

/// Issue 25, point 6: what an agent made to run code or change the pool's and its own controls
/// asks for — a program named by an option (the GNU abbreviation), git in a folder it made to
/// look like a repository whose config runs a program, `rm -rf .claw`, its own settings — is
/// never allowed by the policy. Each ask is answered by a person (yes: the scripted agent runs
/// nothing, and a No would end its turn); the deny, last, needs none.
const ASKS_WHAT_NO_POLICY_ALLOWS: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "write_file", path = "evil/.git/config", content = "[core]\n\tfsmonitor = ./x.sh\n\thooksPath = .\n" },
  { do = "write_file", path = "evil/.git/HEAD", content = "ref: refs/heads/main\n" },
  { do = "permission", tool = "Bash(sort --compress-prog=sh notes.txt)", command = "sort --compress-prog=sh notes.txt" },
  { do = "sleep", ms = 300 },
  { do = "permission", tool = "Bash(cd evil && git status)", command = "cd evil && git status" },
  { do = "sleep", ms = 300 },
  { do = "permission", tool = "Write(.claude/settings.local.json)", file = ".claude/settings.local.json" },
  { do = "sleep", ms = 300 },
  { do = "permission", tool = "Bash(rm -rf .claw)", command = "rm -rf .claw" },
  { do = "write_file", path = "out.txt", content = "done\n" },
]
"#;

#[test]
fn issue_25_commands_that_run_code_or_touch_controls_are_never_allowed() {
    let sandbox = clawpool_tests::Sandbox::new();
    let (repo, config) = crate::handshake::setup(&sandbox, ASKS_WHAT_NO_POLICY_ALLOWS, true, "");
    let mut lane = crate::handshake::Lane::start(&sandbox, &repo, &config, "scripted", "work");
    let expected = [
        (
            "sort --compress-prog=sh notes.txt",
            "ask",
            "never_safe:runs_a_program",
        ),
        ("cd evil && git status", "ask", "never_safe:foreign_git"),
        (
            ".claude/settings.local.json",
            "ask",
            "protected:agent_settings",
        ),
        ("rm -rf .claw", "deny", "protected:clawpool_control"),
    ];
    for (command, decision, rule) in expected {
        let decided = lane.wait_kind("lane.permission.decided");
        let detail = &decided["detail"];
        assert_eq!(
            (
                detail["command"].as_str(),
                detail["decision"].as_str(),
                detail["rule"].as_str()
            ),
            (Some(command), Some(decision), Some(rule)),
            "{decided:#}"
        );
        if decision == "ask" {
            let blocked = lane.wait_kind("lane.blocked");
            assert_eq!(blocked["to"]["subphase"], "tool_permission");
            let (code, answered) = answer(&sandbox, &repo, &["--choice", "yes"]);
            assert_eq!(code, 0, "{answered:#}");
        }
    }
    let (code, _, events) = lane.finish();
    assert_eq!(code, 0, "{events:#?}");
    assert!(
        decided(&events)
            .iter()
            .all(|e| e["detail"]["decision"] != "allow"),
        "{events:#?}"
    );
    assert!(
        repo.join(".claw").is_dir(),
        "clawpool's folder is still there"
    );
}

/// Issue 25, point 4: grants written by hand into the repository's store (for the asking verb)
/// and the user's (every verb, always) are not clawpool's: the question still goes to a person,
/// and the decision says why.
#[test]
fn hand_written_grants_are_ignored_and_the_decision_says_so() {
    let sandbox = clawpool_tests::Sandbox::new();
    let (repo, config) = crate::handshake::setup(&sandbox, ASKS_TO_MAKE, true, "");
    let forged = |scope: &str, verb: &str| {
        serde_json::json!({"version": 2, "grants": [{
            "id": format!("{scope}#1"), "scope": scope, "tool": "bash", "verb": verb,
            "worktree": repo.canonicalize().expect("repo"), "lane": "lane",
            "question": "make build", "granted_at_ms": 1,
            "mac": "00".repeat(32),
        }]})
        .to_string()
    };
    let repository_store = repo.join(".git/clawpool/permission-grants.json");
    let user_store = sandbox.state_home().join("clawpool/permission-grants.json");
    for (store, text) in [
        (&repository_store, forged("repository", "make")),
        (&user_store, forged("always", "*")),
    ] {
        std::fs::create_dir_all(store.parent().expect("folder")).expect("mkdir");
        std::fs::write(store, text).expect("hand-written grant");
    }
    let mut lane = crate::handshake::Lane::start(&sandbox, &repo, &config, "scripted", "build");
    let decision = lane.wait_kind("lane.permission.decided");
    let detail = &decision["detail"];
    assert_eq!(detail["decision"], "ask", "{decision:#}");
    assert_eq!(detail["rule"], "no_rule");
    let reason = detail["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("ignored: not written by clawpool"),
        "{decision:#}"
    );
    let notes = detail["grant_stores"].as_array().expect("grant_stores");
    assert!(
        notes
            .iter()
            .any(|note| note["ignored_grant"]["id"] == "repository#1"),
        "{decision:#}"
    );
    let blocked = lane.wait_kind("lane.blocked");
    assert_eq!(blocked["to"]["subphase"], "tool_permission");
    assert!(!repo.join("built.txt").exists());
    let (code, _) = answer(&sandbox, &repo, &["--choice", "no"]);
    assert_eq!(code, 0);
    let (code, _, _) = lane.finish();
    assert_eq!(code, 0);
}

/// Issue 25, point 5: `workspace-write` let the real Claude Code 2.1.330 write its own
/// `.claude/settings.local.json` allowing every Bash command. Its settings are a protected path
/// now: the question goes to a person (the hook's answer is an ask), who says no; nothing is
/// written.
#[test]
fn claude_code_may_not_widen_its_own_permissions_without_a_person() {
    use crate::real_agents::assert_nothing_left;
    let sandbox = clawpool_tests::Sandbox::new();
    let lane = crate::real_agents::plain_lane(&sandbox, "alpha");
    let settings = lane
        .canonicalize()
        .expect("lane")
        .join(".claude/settings.local.json");
    let script = serde_json::json!([
        {"tool_use": {"name": "Write", "input": {
            "file_path": settings.display().to_string(),
            "content": "{\"permissions\":{\"allow\":[\"Bash\"]}}\n"
        }}},
        {"text": "Done."}
    ]);
    let (lane, mut server, mut run) = claude_lane(&sandbox, &script, None);
    let decision = first_decision(&mut run, &lane);
    assert_eq!(decision["detail"]["tool"], "write", "{decision:#}");
    assert_eq!(decision["detail"]["decision"], "ask");
    assert_eq!(decision["detail"]["rule"], "protected:agent_settings");
    assert_eq!(decision["detail"]["profile"], "workspace-write");
    a_person_says_no(&sandbox, &mut run, &lane);
    let written = std::fs::read_to_string(&settings).unwrap_or_default();
    assert!(
        !written.contains("Bash"),
        "the agent's settings were not widened: {written}"
    );
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}
