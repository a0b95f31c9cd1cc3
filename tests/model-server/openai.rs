//! The OpenAI Responses API (`POST /v1/responses`), as Codex uses it: the streamed
//! event sequence, the non-streamed response object, and the error body.
//!
//! Codex builds its transcript from `response.output_item.done` items and finishes
//! the turn on `response.completed`; the `added`/`delta` events make the text
//! appear progressively, as with a real provider.

use serde_json::{Value, json};

use crate::script::ToolUse;

fn response_object(response_id: &str, model: &str, status: &str, output: Vec<Value>) -> Value {
    json!({
        "id": response_id,
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    })
}

/// The first event of every stream, also the only one a `hang` turn sends.
pub fn created(response_id: &str, model: &str) -> Value {
    json!({
        "type": "response.created",
        "response": response_object(response_id, model, "in_progress", Vec::new()),
    })
}

fn message_item(item_id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

fn function_call_item(item_id: &str, tool: &ToolUse, call_id: &str) -> Value {
    let mut item = json!({
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": tool.name,
        // The Responses API carries arguments as a JSON-encoded string.
        "arguments": tool.input.to_string(),
        "status": "completed",
    });
    if let Some(namespace) = &tool.namespace {
        item["namespace"] = json!(namespace);
    }
    item
}

/// The output items of a reply: an assistant message and/or a function call.
fn output_items(
    response_id: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(text) = text {
        items.push(message_item(
            &format!("msg_{response_id}"),
            text,
            "completed",
        ));
    }
    if let Some((tool, call_id)) = tool_use {
        items.push(function_call_item(
            &format!("fc_{response_id}"),
            tool,
            call_id,
        ));
    }
    items
}

/// Everything after `response.created` for a reply, ending in `response.completed`.
pub fn reply_events(
    response_id: &str,
    model: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Vec<Value> {
    let items = output_items(response_id, text, tool_use);
    let mut events = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let item_id = item["id"].as_str().unwrap_or_default();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item["type"] == "message" {
            added["content"] = json!([]);
        }
        events.push(json!({
            "type": "response.output_item.added",
            "output_index": index,
            "item": added,
        }));
        if let Some(text) = item["content"][0]["text"].as_str() {
            events.push(json!({
                "type": "response.content_part.added",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            }));
            for piece in text.split_inclusive(' ') {
                events.push(json!({
                    "type": "response.output_text.delta",
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "delta": piece,
                }));
            }
            events.push(json!({
                "type": "response.output_text.done",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "text": text,
            }));
            events.push(json!({
                "type": "response.content_part.done",
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": {"type": "output_text", "text": text, "annotations": []},
            }));
        }
        events.push(json!({
            "type": "response.output_item.done",
            "output_index": index,
            "item": item,
        }));
    }
    events.push(json!({
        "type": "response.completed",
        "response": response_object(response_id, model, "completed", items),
    }));
    events
}

/// The same reply as one response object, for `"stream": false` requests.
pub fn reply_response(
    response_id: &str,
    model: &str,
    text: Option<&str>,
    tool_use: Option<(&ToolUse, &str)>,
) -> Value {
    response_object(
        response_id,
        model,
        "completed",
        output_items(response_id, text, tool_use),
    )
}

/// The body of an error response, in the API's envelope.
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"error": {"type": kind, "code": kind, "message": message, "param": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reply_streams_deltas_and_completes() {
        let events = reply_events("resp_1", "gpt-5", Some("Hello there"), None);
        let text: String = events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .filter_map(|e| e["delta"].as_str())
            .collect();
        assert_eq!(text, "Hello there");
        let done = events
            .iter()
            .find(|e| e["type"] == "response.output_item.done")
            .expect("an output_item.done");
        assert_eq!(done["item"]["content"][0]["text"], "Hello there");
        assert_eq!(events.last().expect("events")["type"], "response.completed");
    }

    #[test]
    fn a_namespaced_tool_call_names_its_namespace() {
        let tool = ToolUse {
            name: "spawn_lane".into(),
            input: json!({"name": "alpha"}),
            id: None,
            namespace: Some("mcp__clawpool".into()),
        };
        let items = output_items("resp_1", None, Some((&tool, "call_1")));
        assert_eq!(items[0]["name"], "spawn_lane");
        assert_eq!(items[0]["namespace"], "mcp__clawpool");
        let plain = ToolUse {
            namespace: None,
            ..tool
        };
        let items = output_items("resp_1", None, Some((&plain, "call_1")));
        assert!(items[0].get("namespace").is_none(), "{}", items[0]);
    }
}
