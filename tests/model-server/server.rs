//! Connections and routing: reads requests off each connection, records them,
//! decides which script turn (if any) answers them, and writes the answer in the
//! dialect of the API that was called (Anthropic Messages, OpenAI Responses, OpenAI Chat
//! Completions, Gemini generate-content).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncReadExt, AsyncWrite, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::http::{self, Chunked, Request};
use crate::record::Recorder;
use crate::script::{Action, Script, ToolUse, Turn};
use crate::{anthropic, chat, gemini, openai, request, side};

/// Everything the connections share.
pub struct Server {
    /// The turns main requests consume.
    pub script: Script,
    /// Where requests are logged, if anywhere.
    pub recorder: Option<Recorder>,
    /// The reply to side requests (title generation and the like).
    pub side_text: String,
    /// Every request is a task request, tools or not: aider offers the model no tools (its
    /// edits are file listings in the reply) and sends no side requests in a task.
    pub every_request_is_a_task: bool,
    /// Numbers requests, for the record and for unique ids.
    pub seq: AtomicU64,
    /// Where the moment each task request's answer was written out is logged, if anywhere.
    pub timings: Option<Recorder>,
}

/// Which provider API a request speaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Api {
    Anthropic,
    OpenAi,
    ChatCompletions,
    /// Gemini's generate-content; `stream` comes from the path, not the body.
    Gemini {
        stream: bool,
    },
}

/// What to do with the connection after a request.
enum After {
    /// Read the next request from it (if the client allows).
    KeepOpen,
    /// Close it.
    Close,
}

/// Accepts connections forever, one task each.
pub async fn serve(listener: TcpListener, server: Arc<Server>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(handle_connection(stream, Arc::clone(&server)));
            }
            Err(err) => {
                // Accept errors (e.g. too many open files) are transient; back off
                // instead of spinning.
                eprintln!("model-server: accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn handle_connection(stream: TcpStream, server: Arc<Server>) {
    // Answers are tiny and latency matters for SSE: send each write at once.
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let request = match http::read_request(&mut reader).await {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(err) => {
                eprintln!("model-server: bad request: {err}");
                let body = anthropic::error_body("invalid_request_error", &err.to_string());
                let _ = http::write_full(
                    &mut write,
                    400,
                    "application/json",
                    &[("connection", "close".into())],
                    body.to_string().as_bytes(),
                    true,
                )
                .await;
                return;
            }
        };
        let keep_alive = request.keep_alive;
        match server.respond(request, &mut reader, &mut write).await {
            Ok(After::KeepOpen) if keep_alive => continue,
            Ok(_) => return,
            Err(err) => {
                // Usually the client hung up mid-answer, which agents do when the
                // user interrupts; nothing to answer any more.
                eprintln!("model-server: connection ended: {err}");
                return;
            }
        }
    }
}

impl Server {
    async fn respond<R, W>(
        &self,
        request: Request,
        reader: &mut R,
        writer: &mut W,
    ) -> std::io::Result<After>
    where
        R: AsyncBufRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let body: Option<Value> = serde_json::from_slice(&request.body).ok();
        let path = request.path().to_owned();
        let is_post = request.method == "POST";

        let api = if !is_post {
            None
        } else if path.ends_with("/messages") {
            Some(Api::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Api::OpenAi)
        } else if path.ends_with("/chat/completions") {
            Some(Api::ChatCompletions)
        } else {
            gemini::call_of(&path).map(|call| Api::Gemini {
                stream: call.stream,
            })
        };
        let null = Value::Null;
        let body_ref = body.as_ref().unwrap_or(&null);
        let main = api.is_some() && (self.every_request_is_a_task || request::is_main(body_ref));
        let (turn_index, turn) = if main {
            self.script.next_turn()
        } else {
            (
                None,
                Turn::text(&side::reply_text(body_ref, &self.side_text)),
            )
        };
        let kind = match (api, main) {
            (None, _) => "other",
            (Some(_), true) => "main",
            (Some(_), false) => "side",
        };

        self.record(seq, &request, kind, turn_index, body.as_ref());
        eprintln!(
            "model-server: #{seq} {} {} -> {kind}{}",
            request.method,
            request.target,
            turn_index.map_or(String::new(), |i| format!(" turn {i}")),
        );

        match api {
            Some(api) => {
                let after = self
                    .answer(api, seq, &path, body_ref, &turn, reader, writer)
                    .await;
                if let (Some(timings), Some(turn)) = (&self.timings, turn_index) {
                    let last_byte_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64);
                    timings.write(&json!({"seq": seq, "turn": turn, "last_byte_ms": last_byte_ms}));
                }
                after
            }
            None => answer_other(&request, &path, writer).await,
        }
    }

    fn record(
        &self,
        seq: u64,
        request: &Request,
        kind: &str,
        turn: Option<usize>,
        body: Option<&Value>,
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        let headers: serde_json::Map<String, Value> = request
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), Value::String(value.clone())))
            .collect();
        let mut record = json!({
            "seq": seq,
            "method": request.method,
            "path": request.target,
            "kind": kind,
            "turn": turn,
            "headers": headers,
            "body": body,
        });
        if body.is_none() && !request.body.is_empty() {
            // Not JSON (or compressed): keep what we can for debugging.
            record["body_text"] = json!(String::from_utf8_lossy(&request.body));
        }
        recorder.write(&record);
    }

    /// Answers a model call in its API's dialect with the given turn.
    #[allow(clippy::too_many_arguments)]
    async fn answer<R, W>(
        &self,
        api: Api,
        seq: u64,
        path: &str,
        body: &Value,
        turn: &Turn,
        reader: &mut R,
        writer: &mut W,
    ) -> std::io::Result<After>
    where
        R: AsyncBufRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let delay = Duration::from_millis(turn.delay_ms);
        let stream = match api {
            Api::Gemini { stream } => stream,
            _ => request::wants_stream(body),
        };
        let model = match api {
            Api::Anthropic => request::model_of(body, "claude-scripted"),
            Api::OpenAi | Api::ChatCompletions => request::model_of(body, "gpt-scripted"),
            Api::Gemini { .. } => gemini::call_of(path)
                .map_or("gemini-scripted", |call| call.model)
                .to_owned(),
        };
        let (message_id, request_id_header) = match api {
            Api::Anthropic => (format!("msg_scripted_{seq}"), "request-id"),
            Api::OpenAi => (format!("resp_scripted_{seq}"), "x-request-id"),
            Api::ChatCompletions => (format!("chatcmpl_scripted_{seq}"), "x-request-id"),
            Api::Gemini { .. } => (format!("gen_scripted_{seq}"), "x-request-id"),
        };
        let headers = [(request_id_header, format!("req_scripted_{seq}"))];
        let sse_headers = [
            (request_id_header, format!("req_scripted_{seq}")),
            ("cache-control", "no-cache".to_owned()),
        ];
        // The stream's opening frame, also all a `hang` turn sends. Gemini has none: its
        // first chunk already carries content.
        let start_frame = match api {
            Api::Anthropic => Some(request::sse(&anthropic::message_start(&message_id, &model))),
            Api::OpenAi => Some(request::sse(&openai::created(&message_id, &model))),
            Api::ChatCompletions => Some(chat::sse(&chat::role_chunk(&message_id, &model))),
            Api::Gemini { .. } => None,
        };

        match &turn.action {
            Action::Refuse => {
                tokio::time::sleep(delay).await;
                Ok(After::Close)
            }
            Action::Error(error) => {
                tokio::time::sleep(delay).await;
                let body = match api {
                    Api::Anthropic => anthropic::error_body(&error.kind, &error.message),
                    Api::OpenAi | Api::ChatCompletions => {
                        openai::error_body(&error.kind, &error.message)
                    }
                    Api::Gemini { .. } => gemini::error_body(error.status, &error.message),
                };
                http::write_full(
                    writer,
                    error.status,
                    "application/json",
                    &headers,
                    body.to_string().as_bytes(),
                    true,
                )
                .await?;
                Ok(After::KeepOpen)
            }
            Action::Hang => {
                if stream {
                    let mut chunked =
                        Chunked::start(writer, 200, "text/event-stream", &sse_headers).await?;
                    if let Some(frame) = &start_frame {
                        chunked.send(frame.as_bytes()).await?;
                    }
                }
                wait_for_hangup(reader).await;
                eprintln!("model-server: #{seq} client hung up during a hang turn");
                Ok(After::Close)
            }
            Action::Reply { text, tool_use } => {
                let tool_id = tool_use.as_ref().map(|tool| {
                    tool.id.clone().unwrap_or_else(|| match api {
                        Api::Anthropic => format!("toolu_scripted_{seq}"),
                        _ => format!("call_scripted_{seq}"),
                    })
                });
                let tool: Option<(&ToolUse, &str)> = tool_use.as_ref().zip(tool_id.as_deref());
                let text = text.as_deref();
                if stream {
                    let mut chunked =
                        Chunked::start(writer, 200, "text/event-stream", &sse_headers).await?;
                    if let Some(frame) = &start_frame {
                        chunked.send(frame.as_bytes()).await?;
                    }
                    tokio::time::sleep(delay).await;
                    let frames: Vec<String> = match api {
                        Api::Anthropic => anthropic::reply_events(text, tool)
                            .iter()
                            .map(request::sse)
                            .collect(),
                        Api::OpenAi => openai::reply_events(&message_id, &model, text, tool)
                            .iter()
                            .map(request::sse)
                            .collect(),
                        Api::ChatCompletions => chat::reply_chunks(&message_id, &model, text, tool)
                            .iter()
                            .map(chat::sse)
                            .chain([chat::DONE.to_owned()])
                            .collect(),
                        Api::Gemini { .. } => gemini::reply_chunks(&model, text, tool)
                            .iter()
                            .map(gemini::sse)
                            .collect(),
                    };
                    for frame in &frames {
                        chunked.send(frame.as_bytes()).await?;
                    }
                    chunked.finish().await?;
                } else {
                    tokio::time::sleep(delay).await;
                    let reply = match api {
                        Api::Anthropic => anthropic::reply_message(&message_id, &model, text, tool),
                        Api::OpenAi => openai::reply_response(&message_id, &model, text, tool),
                        Api::ChatCompletions => {
                            chat::reply_completion(&message_id, &model, text, tool)
                        }
                        Api::Gemini { .. } => gemini::reply_response(&model, text, tool),
                    };
                    http::write_full(
                        writer,
                        200,
                        "application/json",
                        &headers,
                        reply.to_string().as_bytes(),
                        true,
                    )
                    .await?;
                }
                Ok(After::KeepOpen)
            }
        }
    }
}

/// Answers everything that is not a model call, so an agent's incidental requests
/// (token counting, model lists, reachability checks) get a quick, harmless answer
/// instead of hanging.
async fn answer_other<W: AsyncWrite + Unpin>(
    request: &Request,
    path: &str,
    writer: &mut W,
) -> std::io::Result<After> {
    let with_body = request.method != "HEAD";
    let (status, body) = if request.method == "POST" && path.ends_with("/messages/count_tokens") {
        // A rough count is enough: the agent only uses it for context accounting.
        (200, json!({"input_tokens": request.body.len() / 4 + 1}))
    } else if request.method == "POST" && path.ends_with(":countTokens") {
        // Gemini's token count, as rough as Anthropic's.
        (200, json!({"totalTokens": request.body.len() / 4 + 1}))
    } else if path.ends_with("/models") {
        // Both dialects' list shapes, empty: agents fall back to their built-in lists.
        (200, json!({"object": "list", "data": [], "models": []}))
    } else if request.method == "GET" || request.method == "HEAD" {
        (200, json!({}))
    } else {
        (
            404,
            anthropic::error_body("not_found_error", &format!("no route for {path}")),
        )
    };
    http::write_full(
        writer,
        status,
        "application/json",
        &[],
        body.to_string().as_bytes(),
        with_body,
    )
    .await?;
    Ok(After::KeepOpen)
}

/// Waits until the client closes its side of the connection (or it breaks),
/// discarding anything it sends meanwhile. This is how a `hang` turn ends: the
/// agent gives up, or the user interrupts it.
async fn wait_for_hangup<R: AsyncBufRead + Unpin>(reader: &mut R) {
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
