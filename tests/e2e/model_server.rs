//! The scripted model server's Chat Completions and Gemini dialects, driven over real HTTP
//! (a plain HTTP/1.1 client on a TCP socket) against the built `clawpool-model-server`: the
//! same script turns (reply, tool call, error, refuse, hang) in each API's shape, and every
//! request on record with the turn it took.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use clawpool_tests::ModelServer;
use serde_json::{Value, json};

/// One HTTP answer, its body with chunked encoding removed.
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

/// Reads a response head: the status and the headers (names lower-cased).
fn read_head(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line, got {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header line");
        let line = line.trim_end();
        if line.is_empty() {
            return (status, headers);
        }
        let (name, value) = line.split_once(':').expect("name: value");
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
}

/// Reads one chunk of a chunked body; `None` at the last (empty) chunk.
fn read_chunk(reader: &mut impl BufRead) -> Option<String> {
    let mut size_line = String::new();
    reader.read_line(&mut size_line).expect("chunk size");
    let size = usize::from_str_radix(size_line.trim(), 16).expect("hex chunk size");
    let mut data = vec![0; size + 2];
    reader.read_exact(&mut data).expect("chunk data");
    data.truncate(size);
    (size > 0).then(|| String::from_utf8(data).expect("UTF-8 chunk"))
}

fn connect(server: &ModelServer) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect to the server");
    // A server that stops answering fails the test instead of hanging it.
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    stream
}

fn send_post(stream: &mut TcpStream, path: &str, body: &Value) {
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send request");
}

/// POSTs `body` as JSON and reads the whole answer.
fn post(server: &ModelServer, path: &str, body: &Value) -> Answer {
    let mut stream = connect(server);
    send_post(&mut stream, path, body);
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let body = if header("transfer-encoding").as_deref() == Some("chunked") {
        std::iter::from_fn(|| read_chunk(&mut reader)).collect()
    } else {
        let length: usize = header("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("body");
        String::from_utf8(body).expect("UTF-8 body")
    };
    Answer {
        status,
        content_type: header("content-type").unwrap_or_default(),
        body,
    }
}

/// The JSON of each `data:` line of a server-sent-event body, and whether the stream ended
/// with Chat Completions' `data: [DONE]`.
fn sse_data(body: &str) -> (Vec<Value>, bool) {
    let mut events = Vec::new();
    let mut done = false;
    for line in body.lines() {
        let Some(data) = line.trim_end_matches('\r').strip_prefix("data: ") else {
            continue;
        };
        assert!(!done, "nothing may follow data: [DONE], got {data}");
        if data == "[DONE]" {
            done = true;
        } else {
            events.push(serde_json::from_str(data).expect("each data line is JSON"));
        }
    }
    (events, done)
}

fn start_server(name: &str, script: Value) -> (tempfile::TempDir, ModelServer) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = ModelServer::start(&dir.path().join(name), &script);
    (dir, server)
}

fn turns_taken(server: &ModelServer) -> Vec<(String, Value)> {
    server
        .requests()
        .into_iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_owned(),
                r["turn"].clone(),
            )
        })
        .collect()
}

/// Waits until the server's log has a line containing `needle`.
fn wait_for_log(server: &ModelServer, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = std::fs::read_to_string(&server.log).unwrap_or_default();
        if log.contains(needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the server log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const WRITE_TOOL: &str = r#"{"filePath": "/tmp/app/hello.txt", "content": "hi"}"#;

fn chat_request(stream: bool) -> Value {
    json!({
        "model": "scripted-model",
        "stream": stream,
        "messages": [{"role": "user", "content": "create hello.txt"}],
        "tools": [{"type": "function", "function": {"name": "write", "parameters": {}}}],
    })
}

#[test]
fn chat_completions_streams_a_tool_call_then_text_and_ends_with_done() {
    let input: Value = serde_json::from_str(WRITE_TOOL).expect("JSON");
    let (_dir, server) = start_server(
        "chat",
        json!([
            {"tool_use": {"name": "write", "input": input}, "text": "Writing it."},
            {"text": "Created hello.txt."}
        ]),
    );

    let first = post(&server, "/v1/chat/completions", &chat_request(true));
    assert_eq!(first.status, 200);
    assert_eq!(first.content_type, "text/event-stream");
    let (chunks, done) = sse_data(&first.body);
    assert!(done, "the stream ends with data: [DONE]:\n{}", first.body);
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let deltas = |field: &str| -> String {
        chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"].pointer(field)?.as_str())
            .collect()
    };
    assert_eq!(deltas("/content"), "Writing it.");
    assert_eq!(deltas("/tool_calls/0/function/name"), "write");
    assert_eq!(deltas("/tool_calls/0/id"), "call_scripted_1");
    let arguments: Value =
        serde_json::from_str(&deltas("/tool_calls/0/function/arguments")).expect("JSON arguments");
    assert_eq!(arguments, input);
    assert_eq!(
        chunks.last().expect("chunks")["choices"][0]["finish_reason"],
        "tool_calls"
    );

    let second = post(&server, "/v1/chat/completions", &chat_request(false));
    assert_eq!(second.status, 200);
    let completion: Value = serde_json::from_str(&second.body).expect("a completion object");
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        "Created hello.txt."
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "stop");

    assert_eq!(
        turns_taken(&server),
        [("main".to_owned(), json!(0)), ("main".to_owned(), json!(1))]
    );
}

#[test]
fn chat_completions_side_requests_take_no_turn_and_fit_their_schema() {
    let (_dir, server) = start_server("chat-side", json!([{"text": "the task reply"}]));
    let title = post(
        &server,
        "/v1/chat/completions",
        &json!({
            "model": "small",
            "messages": [{"role": "user", "content": "title this"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {
                "type": "object", "properties": {"title": {"type": "string"}}}}},
        }),
    );
    let completion: Value = serde_json::from_str(&title.body).expect("a completion");
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        r#"{"title":"Scripted task"}"#
    );
    let task = post(&server, "/v1/chat/completions", &chat_request(false));
    let completion: Value = serde_json::from_str(&task.body).expect("a completion");
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        "the task reply"
    );
    assert_eq!(
        turns_taken(&server),
        [
            ("side".to_owned(), Value::Null),
            ("main".to_owned(), json!(0))
        ]
    );
}

fn gemini_request() -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": "create hello.txt"}]}],
        "tools": [{"functionDeclarations": [{"name": "write_file", "parameters": {}}]}],
    })
}

#[test]
fn gemini_streams_a_function_call_then_text() {
    let input = json!({"file_path": "/tmp/app/hello.txt", "content": "hi"});
    let (_dir, server) = start_server(
        "gemini",
        json!([
            {"tool_use": {"name": "write_file", "input": input}},
            {"text": "Created hello.txt for you."}
        ]),
    );
    let path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";

    let first = post(&server, path, &gemini_request());
    assert_eq!(first.status, 200);
    assert_eq!(first.content_type, "text/event-stream");
    let (chunks, done) = sse_data(&first.body);
    assert!(!done, "Gemini streams have no [DONE] line");
    let last = chunks.last().expect("chunks");
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["modelVersion"], "gemini-2.5-pro");
    let call = &last["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "write_file");
    assert_eq!(call["args"], input);

    let second = post(&server, path, &gemini_request());
    let (chunks, _) = sse_data(&second.body);
    let text: String = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "Created hello.txt for you.");
    assert!(chunks.len() > 1, "the text arrives in several chunks");

    // Side calls: a schema-shaped generateContent without tools, and a token count.
    let side = post(
        &server,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        &json!({
            "contents": [{"role": "user", "parts": [{"text": "who speaks next?"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
                "type": "object", "properties": {"next_speaker": {"type": "string", "enum": ["user", "model"]}}}},
        }),
    );
    let response: Value = serde_json::from_str(&side.body).expect("a response object");
    assert_eq!(
        response["candidates"][0]["content"]["parts"][0]["text"],
        r#"{"next_speaker":"user"}"#
    );
    let count = post(
        &server,
        "/v1beta/models/gemini-2.5-pro:countTokens",
        &gemini_request(),
    );
    let count: Value = serde_json::from_str(&count.body).expect("a count");
    assert!(count["totalTokens"].as_u64().is_some_and(|n| n > 0));

    assert_eq!(
        turns_taken(&server),
        [
            ("main".to_owned(), json!(0)),
            ("main".to_owned(), json!(1)),
            ("side".to_owned(), Value::Null),
            ("other".to_owned(), Value::Null),
        ]
    );
}

#[test]
fn errors_come_in_each_apis_envelope() {
    let (_dir, server) = start_server(
        "errors",
        json!([{"error": {"status": 429, "type": "rate_limit_error", "message": "slow down"}, "repeat": 2}]),
    );
    let chat = post(&server, "/v1/chat/completions", &chat_request(true));
    assert_eq!(chat.status, 429);
    let body: Value = serde_json::from_str(&chat.body).expect("JSON error");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(body["error"]["message"], "slow down");

    let gemini = post(
        &server,
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        &gemini_request(),
    );
    assert_eq!(gemini.status, 429);
    let body: Value = serde_json::from_str(&gemini.body).expect("JSON error");
    assert_eq!(
        body["error"],
        json!({"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"})
    );
}

#[test]
fn refuse_closes_without_an_answer_in_both_new_dialects() {
    let (_dir, server) = start_server("refuse", json!([{"refuse": true, "repeat": 2}]));
    for path in [
        "/v1/chat/completions",
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
    ] {
        let mut stream = connect(&server);
        send_post(&mut stream, path, &chat_request(true));
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("the server closes");
        assert!(answer.is_empty(), "{path}: no bytes, got {answer:?}");
    }
    assert_eq!(turns_taken(&server).len(), 2);
}

#[test]
fn hang_opens_the_stream_and_holds_it_until_the_client_leaves() {
    let (_dir, server) = start_server("hang", json!([{"hang": true}, {"hang": true}]));

    let mut stream = connect(&server);
    send_post(&mut stream, "/v1/chat/completions", &chat_request(true));
    let mut reader = BufReader::new(stream);
    let (status, _) = read_head(&mut reader);
    assert_eq!(status, 200);
    let first = read_chunk(&mut reader).expect("the role chunk");
    let (chunks, done) = sse_data(&first);
    assert!(!done);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    drop(reader);
    wait_for_log(&server, "#1 client hung up during a hang turn");

    let mut stream = connect(&server);
    send_post(
        &mut stream,
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        &gemini_request(),
    );
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-type".to_owned(), "text/event-stream".to_owned())));
    drop(reader);
    wait_for_log(&server, "#2 client hung up during a hang turn");
}
