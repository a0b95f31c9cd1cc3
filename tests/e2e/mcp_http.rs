//! `clawpool mcp --listen`: the MCP server over Streamable HTTP on loopback, driven by rmcp's
//! own HTTP client with bearer tokens from `clawpool mcp token`, and by plain HTTP requests for
//! what a client must not get through (no token, a wrong one, a foreign Origin)
//! (`docs/mcp.md`, "Over HTTP").

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::spawn::{Setup, setup, stderr};

/// `clawpool mcp --listen 127.0.0.1:0`, killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn listen(s: &Setup) -> Server {
    let mut child = s
        .sandbox
        .clawpool()
        .args([
            "mcp",
            "--listen",
            "127.0.0.1:0",
            "--output-format",
            "json",
            "--config",
        ])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("clawpool mcp --listen");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let ready: Value = serde_json::from_str(&line).expect("one JSON line");
    let url = ready["listening"].as_str().expect("listening").to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    Server { child, url }
}

/// A new token at `tier`: the token, and its id.
fn token(s: &Setup, tier: &str) -> (String, String) {
    let out = s
        .sandbox
        .clawpool()
        .args([
            "mcp",
            "token",
            "--tier",
            tier,
            "--output-format",
            "json",
            "--repo",
        ])
        .arg(&s.repo)
        .output()
        .expect("clawpool mcp token");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    (
        doc["token"].as_str().expect("token").to_owned(),
        doc["id"].as_str().expect("id").to_owned(),
    )
}

async fn connect(server: &Server, token: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.url.as_str()).auth_header(token),
    );
    ().serve(transport).await.expect("MCP handshake over HTTP")
}

async fn call(
    session: &RunningService<RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> CallToolResult {
    let params =
        CallToolRequestParams::new(tool).with_arguments(args.as_object().expect("object").clone());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_read_token_lists_lanes_and_its_stop_lane_is_refused_and_audited() {
    let s = setup();
    let server = listen(&s);
    let (operate, _) = token(&s, "operate");
    let (read, read_id) = token(&s, "read");

    // An operate token starts a lane; a read token sees it and may not stop it.
    let operator = connect(&server, &operate).await;
    // A packet with a problem is refused whole, with the problem's JSON path.
    let bad = call(&operator, "spawn_packet", json!({"packet": {"lanes": []}})).await;
    assert_eq!(bad.is_error, Some(true), "{bad:?}");
    assert_eq!(structured(&bad)["kind"], "invalid_packet", "{bad:?}");
    assert_eq!(
        structured(&bad)["problems"][0]["path"],
        "$.lanes",
        "{bad:?}"
    );
    let spawned = call(
        &operator,
        "spawn_packet",
        json!({"packet": {"lanes": [{"name": "alpha", "prompt": "do alpha", "agent": "scripted"}]}}),
    )
    .await;
    assert_ne!(spawned.is_error, Some(true), "{spawned:?}");
    assert_eq!(structured(&spawned)["receipt"], "queued", "{spawned:?}");
    operator.cancel().await.expect("close");

    let reader = connect(&server, &read).await;
    // The daemon registers the lane as it starts it; waiting is a read.
    let waited = call(
        &reader,
        "wait_lanes",
        json!({"lanes": ["alpha"], "until": ["prompt_accepted", "running", "ended"], "timeout_s": 60}),
    )
    .await;
    assert_eq!(structured(&waited)["outcome"], "reached", "{waited:?}");
    let lanes = call(&reader, "list_lanes", json!({})).await;
    assert_ne!(lanes.is_error, Some(true), "{lanes:?}");
    assert_eq!(structured(&lanes)["lanes"][0]["lane"], "alpha", "{lanes:?}");
    let stopped = call(&reader, "stop_lane", json!({"lane": "alpha"})).await;
    assert_eq!(stopped.is_error, Some(true), "{stopped:?}");
    assert_eq!(structured(&stopped)["kind"], "tier_refused", "{stopped:?}");
    reader.cancel().await.expect("close");

    let audit: Vec<Value> = std::fs::read_to_string(s.repo.join(".git/clawpool/audit.jsonl"))
        .expect("audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit JSON line"))
        .collect();
    let refused: Vec<&Value> = audit.iter().filter(|l| l["tool"] == "stop_lane").collect();
    assert_eq!(refused.len(), 1, "{audit:?}");
    assert_eq!(refused[0]["verdict"], "refused");
    assert_eq!(refused[0]["kind"], "tier_refused");
    assert_eq!(refused[0]["tier"], "read");
    assert_eq!(refused[0]["who"]["transport"], "http");
    assert_eq!(refused[0]["who"]["token"], read_id.as_str());
    assert!(
        audit.iter().any(|l| l["tool"] == "spawn_packet"
            && l["verdict"] == "done"
            && l["tier"] == "operate"),
        "{audit:?}"
    );
    // The token file keeps digests only, readable by its owner alone.
    let file = s.repo.join(".git/clawpool/mcp-tokens.json");
    let text = std::fs::read_to_string(&file).expect("token file");
    assert!(!text.contains(&read) && !text.contains(&operate), "{text}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file).expect("meta").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    drop(server);
    crate::spawn::stop_daemon(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_no_token_a_wrong_token_and_a_foreign_origin_are_refused() {
    let s = setup();
    let server = listen(&s);
    let (read, _) = token(&s, "read");
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}
    });
    let http = reqwest::Client::new();
    let post = |auth: Option<&str>, origin: Option<&str>| {
        let mut request = http
            .post(&server.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(initialize.to_string());
        if let Some(auth) = auth {
            request = request.header("Authorization", auth);
        }
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        request.send()
    };

    for auth in [
        None,
        Some("Bearer clawpool_wrong".to_owned()),
        Some(read.clone()),
    ] {
        // No header, a token not in the file, the right token without `Bearer `.
        let response = post(auth.as_deref(), None).await.expect("answered");
        assert_eq!(response.status(), 401, "{auth:?}");
        assert!(response.headers().contains_key("www-authenticate"));
        let body: Value =
            serde_json::from_slice(&response.bytes().await.expect("body")).expect("JSON");
        assert_eq!(body["error"]["kind"], "unauthorized", "{body}");
    }
    let bearer = format!("Bearer {read}");
    // A web page elsewhere, even with the token (a rebinding page has none anyway).
    let foreign = post(Some(&bearer), Some("https://evil.example"))
        .await
        .expect("answered");
    assert_eq!(foreign.status(), 403);
    let body: Value = serde_json::from_slice(&foreign.bytes().await.expect("body")).expect("JSON");
    assert_eq!(body["error"]["kind"], "origin_refused", "{body}");
    // The same request from a page on this machine, and with no Origin (not a browser), is served.
    for origin in [Some("http://localhost:3000"), None] {
        let served = post(Some(&bearer), origin).await.expect("answered");
        assert_eq!(served.status(), 200, "{origin:?}");
    }

    // A listening address off this machine is refused at start.
    let out = s
        .sandbox
        .clawpool()
        .args([
            "mcp",
            "--listen",
            "0.0.0.0:0",
            "--output-format",
            "json",
            "--repo",
        ])
        .arg(&s.repo)
        .stdin(Stdio::null())
        .output()
        .expect("clawpool mcp runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let error: Value = serde_json::from_slice(&out.stderr).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "invalid_argument", "{error}");
}

/// `clawpool mcp token --revoke ID` as the person runs it.
fn revoke(s: &Setup, id: &str) -> std::process::Output {
    s.sandbox
        .clawpool()
        .args([
            "mcp",
            "token",
            "--revoke",
            id,
            "--output-format",
            "json",
            "--repo",
        ])
        .arg(&s.repo)
        .output()
        .expect("clawpool mcp token --revoke")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_by_the_running_server_and_the_others_still_work() {
    let s = setup();
    let server = listen(&s);
    let (gone, gone_id) = token(&s, "operate");
    let (kept, _) = token(&s, "read");
    let session = connect(&server, &gone).await;
    let lanes = call(&session, "list_lanes", json!({})).await;
    assert_ne!(lanes.is_error, Some(true), "{lanes:?}");

    let out = revoke(&s, &gone_id);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["revoked"], gone_id, "{doc}");
    assert_eq!(doc["tier"], "operate", "{doc}");

    // The same session's next request carries the revoked token: refused, no restart needed.
    let params = CallToolRequestParams::new("list_lanes");
    assert!(
        session.call_tool(params).await.is_err(),
        "a revoked token's call was answered"
    );
    let file =
        std::fs::read_to_string(s.repo.join(".git/clawpool/mcp-tokens.json")).expect("token file");
    assert!(!file.contains(&gone_id), "{file}");
    // The other token still lets its holder in.
    let other = connect(&server, &kept).await;
    let lanes = call(&other, "list_lanes", json!({})).await;
    assert_ne!(lanes.is_error, Some(true), "{lanes:?}");

    // An id that is no token's: a clear error, the file untouched.
    let out = revoke(&s, "nosuchtoken0");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let error: Value = serde_json::from_slice(&out.stderr).expect("one JSON error");
    assert_eq!(error["error"]["kind"], "unknown_token", "{error}");
    assert_eq!(
        std::fs::read_to_string(s.repo.join(".git/clawpool/mcp-tokens.json")).expect("file"),
        file
    );
}
