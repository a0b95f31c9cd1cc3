//! Answers to side requests: the calls an agent makes besides the task itself, such
//! as Claude Code's session-title request. They never consume script turns.
//!
//! Some side requests ask for structured output (a JSON schema in
//! `output_config.format` for Anthropic, `text.format` for OpenAI Responses,
//! `response_format` for Chat Completions, `generationConfig.responseJsonSchema` or
//! `responseSchema` for Gemini) and discard a reply that does not parse, so the reply is
//! shaped to the schema when there is one.

use serde_json::{Map, Value, json};

/// The reply text for a side request whose body is `body`: `text` itself, or a JSON
/// document that fits the requested schema with every string field set to `text`.
pub fn reply_text(body: &Value, text: &str) -> String {
    let schema = body
        .pointer("/output_config/format")
        .or_else(|| body.pointer("/text/format"))
        .filter(|format| format.get("type").and_then(Value::as_str) == Some("json_schema"))
        .and_then(|format| format.get("schema"))
        .or_else(|| {
            body.get("response_format")
                .filter(|format| format.get("type").and_then(Value::as_str) == Some("json_schema"))
                .and_then(|format| format.pointer("/json_schema/schema"))
        })
        .or_else(|| body.pointer("/generationConfig/responseJsonSchema"))
        .or_else(|| body.pointer("/generationConfig/responseSchema"));
    match schema {
        Some(schema) => fill(schema, text).to_string(),
        None => text.to_owned(),
    }
}

/// A value that satisfies the common subset of JSON schema agents use for side
/// requests: objects with required properties, strings, numbers, booleans, arrays.
fn fill(schema: &Value, text: &str) -> Value {
    // Gemini's `responseSchema` spells types in capitals (`OBJECT`, `STRING`).
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    match kind.as_deref() {
        Some("object") => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            if let Some(properties) = properties {
                for (name, property) in properties {
                    out.insert(name.clone(), fill(property, text));
                }
            }
            Value::Object(out)
        }
        Some("array") => json!([]),
        Some("boolean") => json!(false),
        Some("integer" | "number") => json!(0),
        Some("null") => Value::Null,
        _ => {
            // Enumerations must pick one of their values.
            match schema
                .get("enum")
                .and_then(Value::as_array)
                .and_then(|e| e.first())
            {
                Some(first) => first.clone(),
                None => json!(text),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_request_gets_schema_shaped_json() {
        let body = json!({"output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}},
            "required": ["title"],
            "additionalProperties": false,
        }}}});
        assert_eq!(
            reply_text(&body, "Scripted task"),
            r#"{"title":"Scripted task"}"#
        );
        assert_eq!(reply_text(&json!({}), "Scripted task"), "Scripted task");
    }

    #[test]
    fn chat_and_gemini_schemas_are_filled_too() {
        let chat = json!({"response_format": {"type": "json_schema", "json_schema": {
            "name": "title",
            "schema": {"type": "object", "properties": {"title": {"type": "string"}}},
        }}});
        assert_eq!(reply_text(&chat, "T"), r#"{"title":"T"}"#);
        let gemini = json!({"generationConfig": {"responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT", "properties": {"next_speaker": {
                "type": "STRING", "enum": ["user", "model"]}}}}});
        assert_eq!(reply_text(&gemini, "T"), r#"{"next_speaker":"user"}"#);
    }
}
