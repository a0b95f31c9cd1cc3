//! The Anthropic Messages API (`POST /v1/messages`), as Claude Code uses it: the
//! streamed event sequence, the non-streamed message, and the error body.
//!
//! Only the fields Claude Code reads are filled in; ids and token counts are fake
//! but well-formed so its cost and context accounting do not trip over them.

use serde_json::{Value, json};

use crate::script::ToolUse;

fn usage(output_tokens: usize) -> Value {
    json!({
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    })
}

/// The first event of every stream, also the only one a `hang` turn sends.
pub fn message_start(message_id: &str, model: &str) -> Value {
    json!({
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage(1),
        }
    })
}

/// Splits text into a few pieces at spaces so the reply arrives as several
/// `text_delta`s, the way a real stream does.
fn pieces(text: &str, target: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for word in text.split_inclusive(' ') {
        current.push_str(word);
        if current.len() >= target {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() || out.is_empty() {
        out.push(current);
    }
    out
}

/// Everything after `message_start` for a reply: a text block and/or a tool-use
/// block, then `message_delta` with the stop reason and `message_stop`. Each item
/// is one event's data; [`crate::request::sse`] frames it.
pub fn reply_events(text: Option<&str>, tool_use: Option<(&ToolUse, &str)>) -> Vec<Value> {
    let mut events = Vec::new();
    let mut index = 0;
    let mut output_tokens = 0;
    if let Some(text) = text {
        events.push(json!({
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        }));
        for piece in pieces(text, 24) {
            events.push(json!({
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": piece},
            }));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        output_tokens += text.len() / 4 + 1;
        index += 1;
    }
    if let Some((tool, id)) = tool_use {
        events.push(json!({
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": tool.name, "input": {}},
        }));
        // The input arrives as JSON text split at arbitrary points; the client
        // concatenates `partial_json` and parses it at `content_block_stop`.
        let input = tool.input.to_string();
        let mid = input
            .char_indices()
            .nth(input.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        for part in [&input[..mid], &input[mid..]] {
            events.push(json!({
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": part},
            }));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        output_tokens += input.len() / 4 + 1;
    }
    let stop_reason = if tool_use.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    events.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens},
    }));
    events.push(json!({"type": "message_stop"}));
    events
}

/// The same reply as one JSON message, for `"stream": false` requests.
pub fn reply_message(
    message_id: &str,
    model: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Value {
    let mut content = Vec::new();
    if let Some(text) = text {
        content.push(json!({"type": "text", "text": text}));
    }
    if let Some((tool, id)) = tool_use {
        content.push(json!({"type": "tool_use", "id": id, "name": tool.name, "input": tool.input}));
    }
    let stop_reason = if tool_use.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    json!({
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage(1),
    })
}

/// The body of an error response, in the API's envelope.
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_use_reply_reassembles_input_and_stops_for_tool_use() {
        let tool = ToolUse {
            name: "Write".into(),
            input: json!({"file_path": "/tmp/cp/app/hello.txt", "content": "hi"}),
            id: None,
            namespace: None,
        };
        let events = reply_events(Some("Writing it."), Some((&tool, "toolu_1")));
        let partial: String = events
            .iter()
            .filter_map(|e| e["delta"]["partial_json"].as_str())
            .collect();
        let input: Value = serde_json::from_str(&partial).expect("partial_json pieces form JSON");
        assert_eq!(input, tool.input);
        let text: String = events
            .iter()
            .filter_map(|e| e["delta"]["text"].as_str())
            .collect();
        assert_eq!(text, "Writing it.");
        let stop = events
            .iter()
            .find(|e| e["type"] == "message_delta")
            .expect("a message_delta");
        assert_eq!(stop["delta"]["stop_reason"], "tool_use");
        assert_eq!(events.last().expect("events")["type"], "message_stop");
    }
}
