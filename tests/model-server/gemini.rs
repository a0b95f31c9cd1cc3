//! The Gemini API's generate-content calls, as gemini-cli uses them:
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (a `data:` line per
//! `GenerateContentResponse`), `:generateContent` (one response object), and the error body
//! (`{"error": {"code", "message", "status"}}`).
//!
//! A function call is one `functionCall` part (name and arguments as an object, not a string,
//! unlike the OpenAI APIs); the last chunk carries `finishReason: "STOP"` and the usage.

use serde_json::{Value, json};

use crate::script::ToolUse;

/// Which generate-content call a path names, and for which model.
pub struct Call<'a> {
    /// The model segment of the path (`gemini-2.5-pro`).
    pub model: &'a str,
    /// `streamGenerateContent` rather than `generateContent`.
    pub stream: bool,
}

/// Reads `.../models/{model}:streamGenerateContent` or `.../models/{model}:generateContent`
/// (any API version prefix); `None` for every other path, including `:countTokens`.
pub fn call_of(path: &str) -> Option<Call<'_>> {
    let (_, rest) = path.rsplit_once("/models/")?;
    let (model, method) = rest.rsplit_once(':')?;
    let stream = match method {
        "streamGenerateContent" => true,
        "generateContent" => false,
        _ => return None,
    };
    Some(Call { model, stream })
}

fn usage() -> Value {
    json!({"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15})
}

fn response(model: &str, parts: Vec<Value>, finish_reason: Option<&str>) -> Value {
    let mut candidate = json!({
        "content": {"role": "model", "parts": parts},
        "index": 0,
    });
    let mut response = json!({"candidates": [candidate.take()], "modelVersion": model});
    if let Some(reason) = finish_reason {
        response["candidates"][0]["finishReason"] = json!(reason);
        response["usageMetadata"] = usage();
    }
    response
}

fn function_call_part(tool: &ToolUse, call_id: &str) -> Value {
    json!({"functionCall": {"id": call_id, "name": tool.name, "args": tool.input}})
}

/// The streamed reply: the text a few words per chunk, then the function call, and
/// `finishReason: "STOP"` with the usage on the last chunk.
pub fn reply_chunks(
    model: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::new();
    if let Some(text) = text {
        let mut current = String::new();
        for word in text.split_inclusive(' ') {
            current.push_str(word);
            if current.len() >= 16 {
                parts.push(json!({"text": std::mem::take(&mut current)}));
            }
        }
        if !current.is_empty() {
            parts.push(json!({"text": current}));
        }
    }
    if let Some((tool, call_id)) = tool_use {
        parts.push(function_call_part(tool, call_id));
    }
    if parts.is_empty() {
        parts.push(json!({"text": ""}));
    }
    let last = parts.len() - 1;
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| response(model, vec![part], (i == last).then_some("STOP")))
        .collect()
}

/// The same reply as one response object, for `:generateContent`.
pub fn reply_response(
    model: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Value {
    let mut parts = Vec::new();
    if let Some(text) = text {
        parts.push(json!({"text": text}));
    }
    if let Some((tool, call_id)) = tool_use {
        parts.push(function_call_part(tool, call_id));
    }
    response(model, parts, Some("STOP"))
}

/// The gRPC status name Google's APIs put next to an HTTP status.
fn status_name(http_status: u16) -> &'static str {
    match http_status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// The body of an error response, in Google's envelope.
pub fn error_body(http_status: u16, message: &str) -> Value {
    json!({"error": {"code": http_status, "message": message, "status": status_name(http_status)}})
}

/// Gemini streaming framing: a bare `data:` line per response (no `event:` name).
pub fn sse(chunk: &Value) -> String {
    format!("data: {chunk}\r\n\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_model_and_whether_to_stream() {
        let call = call_of("/v1beta/models/gemini-2.5-pro:streamGenerateContent").expect("a call");
        assert_eq!((call.model, call.stream), ("gemini-2.5-pro", true));
        let call = call_of("/v1beta/models/gemini-2.5-flash:generateContent").expect("a call");
        assert_eq!((call.model, call.stream), ("gemini-2.5-flash", false));
        assert!(call_of("/v1beta/models/gemini-2.5-pro:countTokens").is_none());
        assert!(call_of("/v1/chat/completions").is_none());
    }

    #[test]
    fn a_function_call_ends_the_stream_with_stop() {
        let tool = ToolUse {
            name: "write_file".into(),
            input: json!({"file_path": "/tmp/x", "content": "hi"}),
            id: None,
            namespace: None,
        };
        let chunks = reply_chunks("m", Some("Writing the file now."), Some((&tool, "c1")));
        let last = chunks.last().expect("chunks");
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert_eq!(
            last["candidates"][0]["content"]["parts"][0]["functionCall"]["args"],
            tool.input
        );
        let text: String = chunks
            .iter()
            .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str())
            .collect();
        assert_eq!(text, "Writing the file now.");
    }
}
