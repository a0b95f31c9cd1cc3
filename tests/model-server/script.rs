//! The script: what the fake model answers to each "main" request, in order.
//!
//! A script file is a JSON list of turns. Each turn is one of
//!
//! - `{"text": "..."}`: a plain assistant reply that ends the agent's turn;
//! - `{"tool_use": {"name": "Write", "input": {...}}}`: a tool call (optionally with a
//!   `"text"` said before it); the agent runs the tool and sends the result in its
//!   next request, which takes the next turn; `"namespace"` next to `"name"` puts the
//!   call in a tool namespace (Responses API only: Codex's MCP tools are `mcp__<server>`);
//! - `{"hang": true}`: start answering, then stall until the client disconnects;
//! - `{"refuse": true}`: close the connection without any response;
//! - `{"error": {"status": 529, "type": "overloaded_error", "message": "..."}}`.
//!
//! Every turn also takes `"delay_ms"` (pause before the content, so a test can watch
//! the agent in its working state) and `"repeat"` (serve this turn to that many
//! consecutive main requests, e.g. to outlast an agent's retries). When the script
//! runs out, every further main request gets the text `done`.

use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

/// The text served once the script is exhausted.
pub const EXHAUSTED_TEXT: &str = "done";

/// One turn as written in the script file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnSpec {
    text: Option<String>,
    tool_use: Option<ToolUse>,
    #[serde(default)]
    hang: bool,
    #[serde(default)]
    refuse: bool,
    error: Option<ErrorReply>,
    #[serde(default)]
    delay_ms: u64,
    repeat: Option<u32>,
}

/// A tool call the fake model makes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolUse {
    /// The tool's name as the agent declared it (`Write`, `Bash`, `shell`, ...).
    pub name: String,
    /// The tool's arguments, passed through verbatim.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// The call id; generated when absent.
    pub id: Option<String>,
    /// The tool's namespace, for agents that group tools under one (Codex 0.169 offers an MCP
    /// server's tools as the namespace `mcp__<server>` and runs a call only when the Responses
    /// API's `function_call` names it). Sent by the Responses API dialect only.
    pub namespace: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// An HTTP error the fake provider answers with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReply {
    /// The HTTP status, e.g. 529 (overloaded) or 429 (rate limited).
    pub status: u16,
    /// The provider's error type, e.g. `overloaded_error`.
    #[serde(rename = "type", default = "default_error_type")]
    pub kind: String,
    /// The human-readable message.
    #[serde(default = "default_error_message")]
    pub message: String,
}

fn default_error_type() -> String {
    "api_error".to_owned()
}

fn default_error_message() -> String {
    "scripted error".to_owned()
}

/// What to do with one main request.
#[derive(Debug, Clone)]
pub enum Action {
    /// Answer with optional text followed by an optional tool call.
    Reply {
        /// Text said first (may be absent for a bare tool call).
        text: Option<String>,
        /// The tool call that ends the reply, if any.
        tool_use: Option<ToolUse>,
    },
    /// Send the response head (and the stream's opening event) and never finish.
    Hang,
    /// Close the connection without responding.
    Refuse,
    /// Answer with an HTTP error.
    Error(ErrorReply),
}

/// One turn, ready to serve.
#[derive(Debug, Clone)]
pub struct Turn {
    /// What to answer.
    pub action: Action,
    /// Pause before the content.
    pub delay_ms: u64,
}

impl Turn {
    /// The reply used for side requests and once the script is exhausted.
    pub fn text(text: &str) -> Self {
        Self {
            action: Action::Reply {
                text: Some(text.to_owned()),
                tool_use: None,
            },
            delay_ms: 0,
        }
    }
}

impl TryFrom<TurnSpec> for (Turn, u32) {
    type Error = anyhow::Error;

    fn try_from(spec: TurnSpec) -> anyhow::Result<Self> {
        let kinds = [
            spec.text.is_some() || spec.tool_use.is_some(),
            spec.hang,
            spec.refuse,
            spec.error.is_some(),
        ];
        let count = kinds.iter().filter(|k| **k).count();
        if count != 1 {
            bail!(
                "a turn needs exactly one of text/tool_use (together allowed), hang, refuse, error; found {count}"
            );
        }
        let action = if spec.hang {
            Action::Hang
        } else if spec.refuse {
            Action::Refuse
        } else if let Some(error) = spec.error {
            Action::Error(error)
        } else {
            Action::Reply {
                text: spec.text,
                tool_use: spec.tool_use,
            }
        };
        let repeat = spec.repeat.unwrap_or(1);
        if repeat == 0 {
            bail!("\"repeat\" must be at least 1");
        }
        Ok((
            Turn {
                action,
                delay_ms: spec.delay_ms,
            },
            repeat,
        ))
    }
}

struct Cursor {
    /// Each turn with how many requests it serves.
    turns: Vec<(Turn, u32)>,
    /// Index of the turn serving the next main request.
    next: usize,
    /// How many requests the turn at `next` has served already.
    served: u32,
}

/// The script, shared by all connections: main requests take turns in arrival order.
pub struct Script {
    cursor: Mutex<Cursor>,
}

impl Script {
    /// Parses a script from its JSON text.
    pub fn parse(json: &str) -> anyhow::Result<Self> {
        let specs: Vec<TurnSpec> =
            serde_json::from_str(json).context("a script is a JSON list of turn objects")?;
        let turns = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| <(Turn, u32)>::try_from(spec).with_context(|| format!("turn {i}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self::from_turns(turns))
    }

    /// Reads and parses a script file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let json = std::fs::read_to_string(path)
            .with_context(|| format!("reading script {}", path.display()))?;
        Self::parse(&json).with_context(|| format!("parsing script {}", path.display()))
    }

    /// A script with no turns: every main request gets `done`.
    pub fn empty() -> Self {
        Self::from_turns(Vec::new())
    }

    fn from_turns(turns: Vec<(Turn, u32)>) -> Self {
        Self {
            cursor: Mutex::new(Cursor {
                turns,
                next: 0,
                served: 0,
            }),
        }
    }

    /// Takes the turn for the next main request: its index in the script (`None`
    /// once exhausted) and the turn itself.
    pub fn next_turn(&self) -> (Option<usize>, Turn) {
        // A poisoned lock means a handler panicked mid-update; the cursor is still
        // a plain pair of counters, so carrying on is safe.
        let mut cursor = self
            .cursor
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = cursor.next;
        let Some((turn, repeat)) = cursor.turns.get(index).cloned() else {
            return (None, Turn::text(EXHAUSTED_TEXT));
        };
        cursor.served += 1;
        if cursor.served >= repeat {
            cursor.next += 1;
            cursor.served = 0;
        }
        (Some(index), turn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_served_in_order_with_repeats_then_done() {
        let script = Script::parse(
            r#"[
                {"tool_use": {"name": "Write", "input": {"file_path": "/tmp/x", "content": "hi"}}},
                {"error": {"status": 529, "type": "overloaded_error"}, "repeat": 2},
                {"text": "ok", "delay_ms": 5}
            ]"#,
        )
        .expect("valid script");
        let kinds: Vec<_> = (0..5)
            .map(|_| {
                let (index, turn) = script.next_turn();
                let kind = match turn.action {
                    Action::Reply {
                        tool_use: Some(_), ..
                    } => "tool",
                    Action::Reply { text: Some(t), .. } => {
                        if t == "ok" {
                            "ok"
                        } else {
                            "done"
                        }
                    }
                    Action::Error(_) => "error",
                    _ => "other",
                };
                (index, kind)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (Some(0), "tool"),
                (Some(1), "error"),
                (Some(1), "error"),
                (Some(2), "ok"),
                (None, "done"),
            ]
        );
    }

    #[test]
    fn rejects_ambiguous_or_unknown_turns() {
        assert!(Script::parse(r#"[{"text": "a", "hang": true}]"#).is_err());
        assert!(Script::parse(r#"[{}]"#).is_err());
        assert!(Script::parse(r#"[{"txt": "a"}]"#).is_err());
    }
}
