//! The OpenAI Chat Completions API (`POST /v1/chat/completions`), as OpenAI-compatible
//! providers serve it to opencode, Qwen Code and aider: the streamed chunk sequence
//! (`data:` lines ending in `data: [DONE]`), the non-streamed completion, and the error body
//! (the same envelope as the Responses API, [`crate::openai::error_body`]).
//!
//! A streamed tool call arrives the way real providers send it: the call's id and name in
//! the first `tool_calls` delta, its JSON arguments in the following ones, and
//! `finish_reason: "tool_calls"` in the last chunk.

use serde_json::{Value, json};

use crate::script::ToolUse;

fn chunk(completion_id: &str, model: &str, delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

fn usage() -> Value {
    json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
}

/// The first chunk of every stream (the assistant role, no content), also the only one a
/// `hang` turn sends.
pub fn role_chunk(completion_id: &str, model: &str) -> Value {
    chunk(
        completion_id,
        model,
        json!({"role": "assistant", "content": ""}),
        None,
    )
}

/// Splits a string into pieces of at most `size` bytes on character boundaries, so text and
/// tool arguments arrive as several deltas.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// Everything after the role chunk for a reply, ending with the chunk that carries the
/// finish reason and usage. The caller sends `data: [DONE]` after them.
pub fn reply_chunks(
    completion_id: &str,
    model: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Vec<Value> {
    let mut chunks = Vec::new();
    if let Some(text) = text {
        for piece in text.split_inclusive(' ') {
            chunks.push(chunk(completion_id, model, json!({"content": piece}), None));
        }
    }
    if let Some((tool, call_id)) = tool_use {
        chunks.push(chunk(
            completion_id,
            model,
            json!({"tool_calls": [{
                "index": 0,
                "id": call_id,
                "type": "function",
                "function": {"name": tool.name, "arguments": ""},
            }]}),
            None,
        ));
        let arguments = tool.input.to_string();
        for piece in pieces(&arguments, 32) {
            chunks.push(chunk(
                completion_id,
                model,
                json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    let finish = if tool_use.is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    let mut last = chunk(completion_id, model, json!({}), Some(finish));
    last["usage"] = usage();
    chunks.push(last);
    chunks
}

/// The same reply as one `chat.completion` object, for `"stream": false` requests.
pub fn reply_completion(
    completion_id: &str,
    model: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Value {
    let mut message = json!({"role": "assistant", "content": text});
    if let Some((tool, call_id)) = tool_use {
        message["tool_calls"] = json!([{
            "id": call_id,
            "type": "function",
            "function": {"name": tool.name, "arguments": tool.input.to_string()},
        }]);
    }
    json!({
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": if tool_use.is_some() { "tool_calls" } else { "stop" },
        }],
        "usage": usage(),
    })
}

/// Chat Completions framing: a bare `data:` line per chunk (no `event:` name).
pub fn sse(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

/// The line that ends every Chat Completions stream.
pub const DONE: &str = "data: [DONE]\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_arguments_reassemble_from_their_deltas() {
        let tool = ToolUse {
            name: "write".into(),
            input: json!({"filePath": "/tmp/é/hello.txt", "content": "hi there, this is long"}),
            id: None,
            namespace: None,
        };
        let chunks = reply_chunks("c1", "m", Some("Writing it."), Some((&tool, "call_1")));
        let arguments: String = chunks
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&arguments).expect("JSON"),
            tool.input
        );
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, "Writing it.");
        let last = chunks.last().expect("chunks");
        assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    }
}
