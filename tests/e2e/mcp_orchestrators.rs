//! `clawpool mcp` with the real orchestrators of issue #28 as its clients: Claude Code 2.1.330
//! (`claude -p --mcp-config`) and Codex 0.169.0 (`codex exec` with `[mcp_servers.clawpool]`),
//! fully offline against the scripted model server, which issues their MCP tool calls. The
//! lanes are scripted agents on a real repository with the real daemon. Everything asserted
//! comes from clawpool's own files (lane records, events, the scripted agent's prompt log) and
//! from the requests the model server recorded (that the tool results reached the model), never
//! from the orchestrator's prose. Set up as docs/mcp.md says; the agents as
//! docs/real-agents.md says.

use std::path::{Path, PathBuf};
use std::process::Output;

use clawpool_tests::{
    ModelServer, agent_path, real_agent, seed_claude_home, seed_codex_home, workspace_bin,
};
use serde_json::{Value, json};

use crate::spawn::{Setup, setup, stderr, stop_daemon};

/// Two turns, each leaving a file: the lane's first prompt, then a follow-up. The prompt log
/// records every prompt the agent received, so a test can count deliveries.
const TWO_TURNS: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "write_file", path = "first.txt", content = "first\n" }]
[[prompt]]
steps = [{ do = "write_file", path = "second.txt", content = "second\n" }]
"#;

const FOLLOW_UP: &str = "now the second part";

/// The setup with [`TWO_TURNS`] as every scripted lane's scenario.
fn two_turn_setup() -> Setup {
    let s = setup();
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), TWO_TURNS).expect("scenario");
    s
}

/// The environment `clawpool mcp` needs in the test besides what the orchestrator passes on:
/// the sandbox's tmux folder and marker (so the daemon it starts is found and stopped).
fn server_env(s: &Setup) -> Value {
    json!({
        "TMUX_TMPDIR": s.sandbox.tmux_dir().display().to_string(),
        "CLAWPOOL_TEST_MARKER": s.sandbox.marker,
    })
}

fn lane_dir(s: &Setup, lane: &str) -> PathBuf {
    s.repo.join(".git/clawpool/lanes").join(lane)
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The lane's event kinds, in order, from its own event log.
fn event_kinds(s: &Setup, lane: &str) -> Vec<String> {
    lines(&lane_dir(s, lane).join("events.jsonl"))
        .iter()
        .filter_map(|e| e["kind"].as_str().map(str::to_owned))
        .collect()
}

/// The prompts the lane's scripted agent received, from its prompt log in the lane's worktree.
fn prompts(s: &Setup, lane: &str) -> Vec<String> {
    let record = read_json(&lane_dir(s, lane).join("lane.json"));
    let worktree = PathBuf::from(record["worktree"].as_str().expect("worktree"));
    lines(&worktree.join(".prompts.jsonl"))
        .iter()
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().expect("text").to_owned())
        .collect()
}

/// The first JSON document of a tool result's text: the server's structured answer, which
/// an orchestrator may follow with notes of its own.
fn first_json(text: &str) -> Value {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("a JSON tool result: {text:?}"))
}

/// What Claude Code sent back to the model for the tool call `id` (Messages API `tool_result`).
fn claude_tool_result(model: &ModelServer, id: &str) -> Value {
    for request in model.main_requests() {
        for message in request["body"]["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" && block["tool_use_id"] == id {
                    let text = match &block["content"] {
                        Value::String(text) => text.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<String>(),
                        other => panic!("tool_result content {other}"),
                    };
                    return first_json(&text);
                }
            }
        }
    }
    panic!(
        "no tool_result for {id} reached the model; requests: {:?}",
        model.main_requests()
    );
}

/// What Codex sent back to the model for the call `call_id` (Responses API
/// `function_call_output`).
fn codex_tool_output(model: &ModelServer, call_id: &str) -> Value {
    for request in model.main_requests() {
        for item in request["body"]["input"].as_array().into_iter().flatten() {
            if item["type"] == "function_call_output" && item["call_id"] == call_id {
                let text = match &item["output"] {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<String>(),
                    other => panic!("function_call_output {other}"),
                };
                // Codex puts `Wall time: …\nOutput:\n` before the tool's text.
                let start = text.find('{').unwrap_or(0);
                return first_json(&text[start..]);
            }
        }
    }
    panic!(
        "no function_call_output for {call_id} reached the model; requests: {:?}",
        model.main_requests()
    );
}

fn report(out: &Output, model: &ModelServer) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}\nmodel server: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        stderr(out),
        std::fs::read_to_string(&model.log).unwrap_or_default()
    )
}

#[test]
fn claude_code_orchestrates_two_lanes_and_a_follow_up_through_clawpool_mcp() {
    let s = two_turn_setup();
    let tool = |id: &str, name: &str, input: Value| json!({"tool_use": {"id": id, "name": format!("mcp__clawpool__{name}"), "input": input}});
    let model = ModelServer::start(
        &s.sandbox.dir.path().join("model"),
        &json!([
            tool("toolu_spawn_alpha", "spawn_lane",
                json!({"name": "alpha", "prompt": "do alpha", "agent": "scripted"})),
            tool("toolu_spawn_beta", "spawn_lane",
                json!({"name": "beta", "prompt": "do beta", "agent": "scripted"})),
            tool("toolu_wait", "wait_lanes",
                json!({"lanes": ["alpha", "beta"], "until": ["finished"], "timeout_s": 60})),
            tool("toolu_send", "send_to_lane",
                json!({"lane": "alpha", "text": FOLLOW_UP, "await_delivery_s": 60})),
            {"text": "both lanes finished; alpha has its follow-up"},
        ]),
    );
    seed_claude_home(&s.sandbox.home(), json!({}));
    // The `--mcp-config` of docs/mcp.md, plus the sandbox's tmux folder and marker.
    let mcp_config = s.sandbox.dir.path().join("mcp.json");
    let config = json!({"mcpServers": {"clawpool": {
        "command": workspace_bin("clawpool"),
        "args": ["mcp", "--repo", s.repo, "--config", s.config],
        "env": server_env(&s),
    }}});
    std::fs::write(&mcp_config, config.to_string()).expect("mcp config");

    let out = s
        .sandbox
        .clean_command(real_agent("claude"))
        .env("PATH", agent_path())
        .env("TERM", "xterm-256color")
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("ANTHROPIC_BASE_URL", model.url())
        .env("DISABLE_AUTOUPDATER", "1")
        .arg("-p")
        .arg("run the two lanes")
        .arg("--mcp-config")
        .arg(&mcp_config)
        .args([
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__clawpool",
            "--output-format",
            "json",
        ])
        .current_dir(&s.repo)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("claude -p runs");
    assert!(out.status.success(), "{}", report(&out, &model));

    // Both lanes were spawned through the server (its audit log) and reached `finished`
    // (their own event logs and records).
    let audit = lines(&s.repo.join(".git/clawpool/audit.jsonl"));
    let done: Vec<&str> = audit
        .iter()
        .filter(|l| l["verdict"] == "done")
        .filter_map(|l| l["tool"].as_str())
        .collect();
    assert_eq!(
        done,
        ["spawn_lane", "spawn_lane", "send_to_lane"],
        "{audit:?}"
    );
    for lane in ["alpha", "beta"] {
        let kinds = event_kinds(&s, lane);
        assert!(
            kinds.iter().any(|k| k == "lane.finished"),
            "{lane}: {kinds:?}"
        );
        let record = read_json(&lane_dir(&s, lane).join("state.json"));
        assert_eq!(record["agent"], "scripted", "{lane}: {record}");
    }
    // The follow-up reached alpha once, as its second prompt; beta got only its own.
    assert_eq!(prompts(&s, "alpha"), ["do alpha", FOLLOW_UP]);
    assert_eq!(prompts(&s, "beta"), ["do beta"]);

    // The tool results reached Claude's model: the receipts and the wait's outcome.
    assert_eq!(
        claude_tool_result(&model, "toolu_spawn_alpha")["receipt"],
        "queued"
    );
    assert_eq!(
        claude_tool_result(&model, "toolu_spawn_beta")["lane"],
        "beta"
    );
    let waited = claude_tool_result(&model, "toolu_wait");
    assert_eq!(waited["outcome"], "reached", "{waited}");
    let sent = claude_tool_result(&model, "toolu_send");
    assert_eq!(sent["receipt"], "delivered", "{sent}");

    stop_daemon(&s);
}

#[test]
fn codex_spawns_waits_for_and_reads_a_lane_through_clawpool_mcp() {
    let s = two_turn_setup();
    // Codex offers an MCP server's tools to the model as the namespace `mcp__<server>`, and
    // runs a `function_call` only when it names that namespace.
    let call = |id: &str, name: &str, input: Value| json!({"tool_use": {"id": id, "namespace": "mcp__clawpool", "name": name, "input": input}});
    let model = ModelServer::start(
        &s.sandbox.dir.path().join("model"),
        &json!([
            call("call_spawn", "spawn_lane",
                json!({"name": "alpha", "prompt": "do alpha", "agent": "scripted"})),
            call("call_wait", "wait_lanes",
                json!({"lanes": ["alpha"], "until": ["finished"], "timeout_s": 50})),
            call("call_state", "lane_state", json!({"lane": "alpha"})),
            {"text": "alpha finished"},
        ]),
    );
    seed_codex_home(&s.sandbox, &model.url(), "sk-fake");
    // docs/mcp.md's `[mcp_servers.clawpool]`, plus the sandbox's tmux folder and marker (Codex
    // starts MCP servers with a minimal environment of its own). Without the approval mode,
    // `codex exec` (approval `never`) fails every call of a tool not marked read-only:
    // "MCP tool call requires approval, but approval policy is never".
    let config = s.sandbox.home().join(".codex/config.toml");
    let mut text = std::fs::read_to_string(&config).expect("codex config");
    let env = server_env(&s);
    text.push_str(&format!(
        "\n[mcp_servers.clawpool]\ncommand = {:?}\nargs = [\"mcp\", \"--repo\", {:?}, \"--config\", {:?}]\n\
         tool_timeout_sec = 600\ndefault_tools_approval_mode = \"approve\"\nenv = {{ TMUX_TMPDIR = {}, CLAWPOOL_TEST_MARKER = {} }}\n",
        workspace_bin("clawpool").display().to_string(),
        s.repo.display().to_string(),
        s.config.display().to_string(),
        env["TMUX_TMPDIR"],
        env["CLAWPOOL_TEST_MARKER"],
    ));
    std::fs::write(&config, text).expect("codex config");

    let out = s
        .sandbox
        .clean_command(real_agent("codex"))
        .env("PATH", agent_path())
        .env("TERM", "xterm-256color")
        .env("OPENAI_API_KEY", "sk-fake")
        .args(["exec", "run lane alpha"])
        .current_dir(&s.repo)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("codex exec runs");
    assert!(out.status.success(), "{}", report(&out, &model));

    // The lane was spawned through the server and finished: its own files say so.
    let audit = lines(&s.repo.join(".git/clawpool/audit.jsonl"));
    assert!(
        audit
            .iter()
            .any(|l| l["tool"] == "spawn_lane" && l["verdict"] == "done"),
        "{audit:?}"
    );
    let kinds = event_kinds(&s, "alpha");
    assert!(kinds.iter().any(|k| k == "lane.finished"), "{kinds:?}");
    assert_eq!(prompts(&s, "alpha"), ["do alpha"]);

    // The results reached Codex's model.
    assert_eq!(codex_tool_output(&model, "call_spawn")["receipt"], "queued");
    let waited = codex_tool_output(&model, "call_wait");
    assert_eq!(waited["outcome"], "reached", "{waited}");
    assert_eq!(
        waited["lanes"][0]["state"]["status"], "finished",
        "{waited}"
    );
    let state = codex_tool_output(&model, "call_state");
    assert_eq!(state["state"]["lane"], "alpha", "{state}");
    assert_eq!(state["state"]["branch"], "lanes/alpha", "{state}");

    stop_daemon(&s);
}
