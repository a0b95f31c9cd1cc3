//! `clawpool mcp`: the pool as an MCP server, driven by rmcp's own client over stdio with
//! `clawpool mcp` as a real child process, on a real repository with the scripted agent and the
//! real daemon (`docs/mcp.md`).

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam,
    ReadResourceRequestParams, Request, ResourceContents, ResourceUpdatedNotificationParam,
    ServerResult, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::spawn::{Setup, setup, stderr};

/// A client that keeps the progress notifications and resource updates it gets.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    updated: Arc<Mutex<Vec<String>>>,
    on_update: Arc<tokio::sync::Notify>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("progress").push(params);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().expect("updated").push(params.uri);
        self.on_update.notify_one();
    }
}

type Session = RunningService<RoleClient, Client>;

/// `clawpool mcp --tier TIER` on the setup's repository, connected.
async fn connect(s: &Setup, tier: &str) -> (Session, Client) {
    let mut cmd = s.sandbox.clawpool();
    cmd.args(["mcp", "--tier", tier, "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo);
    let transport =
        TokioChildProcess::new(tokio::process::Command::from(cmd)).expect("clawpool mcp");
    let client = Client::default();
    let session = client
        .clone()
        .serve(transport)
        .await
        .expect("MCP handshake");
    (session, client)
}

fn args(value: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("").with_arguments(value.as_object().expect("object").clone())
}

async fn call(session: &Session, tool: &'static str, arguments: Value) -> CallToolResult {
    let mut params = args(arguments);
    params.name = tool.into();
    session
        .call_tool(params)
        .await
        .expect("tools/call answered")
}

fn structured(result: &CallToolResult) -> &Value {
    result
        .structured_content
        .as_ref()
        .expect("structured content")
}

fn audit_lines(s: &Setup) -> Vec<Value> {
    std::fs::read_to_string(s.repo.join(".git/clawpool/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit JSON line"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_spawns_a_lane_waits_for_it_and_reads_its_state() {
    let s = setup();
    let (session, client) = connect(&s, "operate").await;
    let tools: Vec<String> = session
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for tool in [
        "spawn_lane",
        "wait_lanes",
        "lane_state",
        "lane_events",
        "send_to_lane",
        "answer_lane",
    ] {
        assert!(tools.iter().any(|t| t == tool), "{tool} in {tools:?}");
    }

    let spawned = call(
        &session,
        "spawn_lane",
        json!({"name": "alpha", "prompt": "do alpha", "agent": "scripted"}),
    )
    .await;
    assert_ne!(spawned.is_error, Some(true), "{spawned:?}");
    assert_eq!(structured(&spawned)["receipt"], "queued", "{spawned:?}");

    // wait_lanes with a progress token: progress arrives while it waits, then the outcome.
    let mut params = args(json!({"lanes": ["alpha"], "until": ["finished"], "timeout_s": 60}));
    params.name = "wait_lanes".into();
    let handle = session
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("wait_lanes sent");
    let ServerResult::CallToolResult(waited) = handle.await_response().await.expect("answered")
    else {
        panic!("a tool result");
    };
    let waited = structured(&waited).clone();
    assert_eq!(waited["outcome"], "reached", "{waited}");
    assert_eq!(
        waited["lanes"][0]["state"]["status"], "finished",
        "{waited}"
    );
    // The prompt's acceptance is reported while waiting: the lane finishes only after its
    // scenario's work and the configured idle hold, well after it. (The finishing event itself
    // ends the wait and may race its own progress note.)
    let progress = client.progress.lock().expect("progress").clone();
    assert!(
        progress.iter().any(|p| p
            .message
            .as_deref()
            .is_some_and(|m| m.contains("alpha lane.prompt_accepted -> prompt_accepted"))),
        "progress while waiting: {progress:?}"
    );

    // The lane's record, as `clawpool state` prints it. It is written just after the event
    // that ended the wait, so it may still say `running` for a moment (docs/mcp.md).
    let state = call(&session, "lane_state", json!({"lane": "alpha"})).await;
    let doc = &structured(&state)["state"];
    assert_eq!(doc["lane"], "alpha", "{state:?}");
    assert_eq!(doc["branch"], "lanes/alpha", "{state:?}");
    assert!(
        ["running", "finished"].contains(&doc["lane_status"].as_str().unwrap_or_default()),
        "{state:?}"
    );
    assert!(doc["prompt"]["accepted_at"].is_u64(), "{state:?}");
    let lanes = call(&session, "list_lanes", json!({})).await;
    assert_eq!(structured(&lanes)["lanes"][0]["lane"], "alpha", "{lanes:?}");
    let events = call(&session, "lane_events", json!({"lane": "alpha"})).await;
    let events = structured(&events);
    assert!(
        events["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["kind"] == "lane.finished" && e["cursor"].is_u64()),
        "{events}"
    );
    // From the last cursor on, only what was recorded after it: the lane may still record its
    // outcome after `lane.finished`, but nothing already read comes again.
    let last = events["next_cursor"].as_u64().expect("next_cursor");
    let after = call(&session, "lane_events", json!({"since": last})).await;
    let after = structured(&after);
    for event in after["events"].as_array().expect("events") {
        assert!(
            event["cursor"].as_u64().expect("cursor") > last,
            "{event} came again after cursor {last}"
        );
    }

    // An unknown lane is a tool error with the CLI's kind.
    let unknown = call(&session, "lane_state", json!({"lane": "nobody"})).await;
    assert_eq!(unknown.is_error, Some(true));
    assert_eq!(structured(&unknown)["kind"], "unknown_lane", "{unknown:?}");

    // The spawn is in the audit log: who, tier, tool, digest, verdict.
    let audit = audit_lines(&s);
    let spawn: Vec<&Value> = audit.iter().filter(|l| l["tool"] == "spawn_lane").collect();
    assert_eq!(spawn.len(), 2, "requested then done: {audit:?}");
    assert_eq!(spawn[1]["verdict"], "done");
    assert_eq!(spawn[1]["tier"], "operate");
    assert_eq!(spawn[1]["who"]["transport"], "stdio");
    assert_eq!(spawn[1]["args_sha256"].as_str().map(str::len), Some(64));
    assert!(
        !audit.iter().any(|l| l["tool"] == "lane_state"),
        "reads are not audited"
    );

    session.cancel().await.expect("close");
    crate::spawn::stop_daemon(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_tier_servers_stop_lane_is_refused_and_audited() {
    let s = setup();
    let (session, _) = connect(&s, "read").await;
    let stopped = call(&session, "stop_lane", json!({"lane": "alpha"})).await;
    assert_eq!(stopped.is_error, Some(true), "{stopped:?}");
    assert_eq!(structured(&stopped)["kind"], "tier_refused", "{stopped:?}");
    // Reads are allowed at read.
    let lanes = call(&session, "list_lanes", json!({})).await;
    assert_ne!(lanes.is_error, Some(true), "{lanes:?}");
    session.cancel().await.expect("close");

    let audit = audit_lines(&s);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["tool"], "stop_lane");
    assert_eq!(audit[0]["tier"], "read");
    assert_eq!(audit[0]["verdict"], "refused");
    assert_eq!(audit[0]["kind"], "tier_refused");
}

#[test]
fn mcp_started_inside_a_lane_refuses_to_start() {
    let s = setup();
    // The lane's mark, as clawpool puts it in every lane agent's environment: a process the
    // agent starts (here `clawpool mcp` itself) carries it.
    let out = s
        .sandbox
        .clawpool()
        .args([
            "mcp",
            "--tier",
            "admin",
            "--output-format",
            "json",
            "--repo",
        ])
        .arg(&s.repo)
        .env("CLAWPOOL_LANE_NAME", "alpha")
        .env(
            "CLAWPOOL_LANE_DIR",
            s.repo.join(".git/clawpool/lanes/alpha"),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .expect("clawpool mcp runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "no MCP session: {:?}", out.stdout);
    let error: Value = serde_json::from_slice(&out.stderr).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "caller_refused", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"alpha\"")),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trust_dialog_holds_a_spawned_prompt_and_a_send_and_trust_needs_admin() {
    let s = setup();
    // No trusted roots: the scripted agent's trust dialog waits for a person.
    let config = std::fs::read_to_string(&s.config).expect("config");
    let untrusted: String = config
        .lines()
        .filter(|l| !l.starts_with("trusted_roots"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&s.config, untrusted).expect("config");
    let (session, _) = connect(&s, "operate").await;

    let spawned = call(
        &session,
        "spawn_lane",
        json!({"name": "alpha", "prompt": "do alpha", "agent": "scripted", "await_delivery_s": 60}),
    )
    .await;
    let receipt = structured(&spawned);
    assert_eq!(receipt["receipt"], "held", "{spawned:?}");
    // The dialog, or (once it waited a moment) the lane's block on it.
    let held_by_trust = |by: &Value| {
        ["trust_required", "blocked{trust_prompt}"].contains(&by.as_str().unwrap_or_default())
    };
    assert!(held_by_trust(&receipt["by"]), "{spawned:?}");

    let sent = call(
        &session,
        "send_to_lane",
        json!({"lane": "alpha", "text": "and this"}),
    )
    .await;
    assert_eq!(sent.is_error, Some(true), "{sent:?}");
    assert_eq!(structured(&sent)["kind"], "lane_refused", "{sent:?}");
    assert_eq!(structured(&sent)["receipt"], "held", "{sent:?}");
    // By then the dialog unanswered is the lane's block (`blocked{...}`), or still the dialog.
    let by = structured(&sent)["by"].as_str().unwrap_or_default();
    assert!(
        by == "trust_required" || by.starts_with("blocked{"),
        "{sent:?}"
    );

    let trusted = call(&session, "trust_lane", json!({"lane": "alpha"})).await;
    assert_eq!(structured(&trusted)["kind"], "tier_refused", "{trusted:?}");

    session.cancel().await.expect("close");
    crate::spawn::stop_daemon(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribed_lane_state_resource_is_updated_when_the_lane_changes() {
    let s = setup();
    let (session, client) = connect(&s, "operate").await;
    let uri = "clawpool://lanes/alpha/state";
    let templates = session
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    assert_eq!(templates[0].uri_template, "clawpool://lanes/{name}/state");
    // Subscribed before the lane exists: every change of its state is announced.
    #[allow(deprecated)]
    // resources/subscribe is the protocol before 2026-07-28, which stdio speaks
    session
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .expect("resources/subscribe");
    assert!(client.updated.lock().expect("updated").is_empty());
    let spawned = call(
        &session,
        "spawn_lane",
        json!({"name": "alpha", "prompt": "do alpha", "agent": "scripted"}),
    )
    .await;
    assert_ne!(spawned.is_error, Some(true), "{spawned:?}");
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        client.on_update.notified(),
    )
    .await
    .expect("a resources/updated notification");
    assert_eq!(client.updated.lock().expect("updated")[0], uri);

    // Read after the notification, the resource is the lane's record.
    let read = session
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .expect("resources/read");
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a JSON text: {read:?}");
    };
    let doc: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(doc["lane"], "alpha", "{doc}");
    let listed = session.list_all_resources().await.expect("resources/list");
    assert!(listed.iter().any(|r| r.uri == uri), "{listed:?}");
    let unknown = session
        .read_resource(ReadResourceRequestParams::new(
            "clawpool://lanes/nobody/state",
        ))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");

    session.cancel().await.expect("close");
    crate::spawn::stop_daemon(&s);
}

/// A first turn that works a while (the follow-up sent during it waits), then a quick one.
const TWO_TURNS: &str = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "sleep", ms = 3000 }]
[[prompt]]
steps = [{ do = "write_file", path = "second.txt", content = "second\n" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_delivered_queued_then_delivered_and_refused_come_from_real_situations() {
    let s = setup();
    let scenario = s.sandbox.dir.path().join("scenario.toml");
    std::fs::write(&scenario, TWO_TURNS).expect("scenario");
    let (session, _) = connect(&s, "operate").await;

    // The prompt of a spawned lane, waited for: delivered, with the handshake's evidence.
    let spawned = call(
        &session,
        "spawn_lane",
        json!({"name": "alpha", "prompt": "work a while", "agent": "scripted", "await_delivery_s": 60}),
    )
    .await;
    let receipt = structured(&spawned);
    assert_eq!(receipt["receipt"], "delivered", "{spawned:?}");
    assert!(
        receipt["source"]
            .as_str()
            .is_some_and(|s| s.contains("lane.prompt_accepted")),
        "{spawned:?}"
    );

    // A text sent while the agent works its turn: queued behind it.
    let cursor = call(&session, "lane_events", json!({"lane": "alpha"})).await;
    let since = structured(&cursor)["next_cursor"].as_u64().expect("cursor");
    let sent = call(
        &session,
        "send_to_lane",
        json!({"lane": "alpha", "text": "and then this"}),
    )
    .await;
    assert_ne!(sent.is_error, Some(true), "{sent:?}");
    assert_eq!(structured(&sent)["receipt"], "queued", "{sent:?}");
    assert_eq!(structured(&sent)["place"], 1, "{sent:?}");
    // Its later delivery is on the stream: once the turn ends, the text is the lane's next
    // prompt, accepted (`lane.prompt_accepted` after `lane.send_queued`).
    let waited = call(
        &session,
        "wait_lanes",
        json!({"lanes": ["alpha"], "until": ["finished"], "timeout_s": 60}),
    )
    .await;
    assert_eq!(structured(&waited)["outcome"], "reached", "{waited:?}");
    let after = call(
        &session,
        "lane_events",
        json!({"lane": "alpha", "since": since}),
    )
    .await;
    let kinds: Vec<&str> = structured(&after)["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    let queued_at = kinds.iter().position(|k| *k == "lane.send_queued");
    let accepted_at = kinds.iter().rposition(|k| *k == "lane.prompt_accepted");
    assert!(
        queued_at.is_some() && accepted_at > queued_at,
        "queued, then accepted as the next prompt: {kinds:?}"
    );

    // A lane that is not there: refused, with why.
    let refused = call(
        &session,
        "send_to_lane",
        json!({"lane": "nobody", "text": "hello"}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert_eq!(structured(&refused)["receipt"], "refused", "{refused:?}");
    assert_eq!(structured(&refused)["kind"], "unknown_lane", "{refused:?}");

    session.cancel().await.expect("close");
    crate::spawn::stop_daemon(&s);
}

/// Issue #27: `send_to_lane` to a lane that finished is a follow-up the repository's daemon
/// runs (started by the server, none running before), not the server: delivered once as the
/// lane's next prompt, the lane driven by the daemon's process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_to_lane_to_a_finished_lane_is_followed_up_by_the_daemon() {
    let s = setup();
    let scenario = r#"
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [{ do = "write_file", path = "first.txt", content = "first\n" }]
[[prompt]]
steps = [{ do = "write_file", path = "second.txt", content = "second\n" }]
"#;
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
    let ran = s.spawn(
        r#"{"name": "alpha", "agent": "scripted", "prompt": "do alpha"}"#,
        &[],
    );
    assert!(ran.status.success(), "{}", stderr(&ran));
    let lock = s.repo.join(".git/clawpool/supervisor.lock");
    assert!(
        !std::fs::read_to_string(&lock).is_ok_and(|l| l.contains("daemon")),
        "no daemon yet"
    );
    let (session, _) = connect(&s, "operate").await;

    let sent = call(
        &session,
        "send_to_lane",
        json!({"lane": "alpha", "text": "now the second"}),
    )
    .await;
    assert_ne!(sent.is_error, Some(true), "{sent:?}");
    let receipt = structured(&sent);
    assert_eq!(receipt["receipt"], "delivered", "{sent:?}");
    assert_eq!(receipt["result"]["follow_up"], true, "{sent:?}");
    assert_eq!(receipt["result"]["state"]["status"], "finished", "{sent:?}");
    let alpha = s.lanes_dir().join("alpha");
    assert!(alpha.join("second.txt").is_file());

    // The lane's supervisor was the daemon the server started: the repository lock's holder.
    let holder = std::fs::read_to_string(&lock).expect("the daemon's lock");
    let mut lines = holder.lines();
    let daemon_pid: u32 = lines.next().and_then(|p| p.parse().ok()).expect("a pid");
    assert_eq!(lines.next(), Some("daemon"), "{holder}");
    let ended = clawpool_tests::published_state(&alpha);
    assert_eq!(ended["supervisor"]["pid"], daemon_pid, "{ended}");
    let log = std::fs::read_to_string(s.repo.join(".git/clawpool/daemon.log")).expect("log");
    assert!(log.contains("follow-up to lane alpha taken"), "{log}");
    let prompts: Vec<String> = std::fs::read_to_string(alpha.join(".prompts.jsonl"))
        .expect("prompts")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(prompts, ["do alpha", "now the second"]);

    session.cancel().await.expect("close");
    crate::spawn::stop_daemon(&s);
}
