//! What both APIs have in common: whether a request belongs to the agent's task, which model
//! it names, whether it wants a stream, and how a streamed event is framed.

use serde_json::Value;

/// Whether a request is part of the agent's task (it offers the model tools) rather than a
/// side request such as title generation, which the agents send with no tools. Only task
/// requests consume script turns.
pub fn is_main(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty())
}

/// The model name to echo back: whatever the client asked for, else `default`.
pub fn model_of(body: &Value, default: &str) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_owned()
}

/// Whether the client asked for a streamed answer.
pub fn wants_stream(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

/// Server-sent-event framing, as both APIs use it: the event name repeats the data's `type`.
pub fn sse(event: &Value) -> String {
    let name = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    format!("event: {name}\ndata: {event}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_requests_offering_tools_are_task_requests() {
        assert!(!is_main(&json!({"tools": [], "messages": []})));
        assert!(!is_main(&json!({"messages": []})));
        assert!(is_main(&json!({"tools": [{"name": "Write"}]})));
    }
}
