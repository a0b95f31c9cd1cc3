//! The state file's `usage` section: the tokens the lane's agent reported using, per turn and
//! in total, from what its channel carries (`docs/state-file.md`): Codex's
//! `thread/tokenUsage/updated` (`lane.protocol` events) and the usage of the turn's last
//! assistant message in Claude Code's transcript, read after its `Stop` hook (`lane.usage`
//! events). Absent while the agent reported none: unknown is not zero.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::payload::{ProtocolReported, UsageReported};

/// Tokens of one turn, or of all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens, as the agent counts them: Codex counts its cache reads in them, Claude
    /// Code does not ([`Usage::input_includes_cache_reads`]).
    pub input: u64,
    /// Input tokens read from the provider's cache, where the agent reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<u64>,
    /// Input tokens written to the provider's cache, where the agent reports them (Claude
    /// Code's `cache_creation_input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<u64>,
    /// Output tokens.
    pub output: u64,
}

impl Tokens {
    /// The tokens in `usage`, whose keys are `input`, `cached` and `output` (each agent's
    /// own names); `None` without input and output counts.
    fn read(usage: &Value, input: &str, cached: &str, output: &str) -> Option<Self> {
        Some(Self {
            input: usage.get(input)?.as_u64()?,
            cached_input: usage.get(cached).and_then(Value::as_u64),
            cache_write: None,
            output: usage.get(output)?.as_u64()?,
        })
    }

    fn plus(self, other: Self) -> Self {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Self {
            input: self.input + other.input,
            cached_input: sum(self.cached_input, other.cached_input),
            cache_write: sum(self.cache_write, other.cache_write),
            output: self.output + other.output,
        }
    }

    fn minus(self, other: Self) -> Self {
        Self {
            input: self.input.saturating_sub(other.input),
            cached_input: self
                .cached_input
                .map(|c| c.saturating_sub(other.cached_input.unwrap_or(0))),
            cache_write: self
                .cache_write
                .map(|c| c.saturating_sub(other.cache_write.unwrap_or(0))),
            output: self.output.saturating_sub(other.output),
        }
    }
}

/// The lane's token usage, as its agent reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Where it comes from: `codex_app_server` or `claude_transcript`.
    pub source: String,
    /// Turns reported.
    pub turns: u32,
    /// The latest turn's tokens.
    pub last_turn: Tokens,
    /// Every turn's, summed.
    pub total: Tokens,
    /// When it was last reported (epoch s).
    pub at: u64,
    /// The latest turn's id, where the agent names its turns (Codex reports running totals
    /// per update; an update of the same turn grows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The model the agent said answered (Claude Code's transcript names it per message), what
    /// the usage is priced as (`crate::cost`); absent when the agent does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The last assistant message counted, where the agent names it (Claude Code's transcript):
    /// the same message read again replaces its count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

impl Usage {
    /// Whether `input` counts the cache reads too (Codex's `inputTokens` does; Claude Code's
    /// `input_tokens` is only what was not cached).
    pub fn input_includes_cache_reads(&self) -> bool {
        self.source == CODEX_SOURCE
    }
}

/// The `source` of Codex's usage.
const CODEX_SOURCE: &str = "codex_app_server";

/// Applies a `lane.protocol` event to `usage`: Codex's running totals for its thread.
pub fn from_protocol(usage: &mut Option<Usage>, message: &ProtocolReported, at: u64) {
    if message.event != ProtocolReported::TOKEN_USAGE {
        return;
    }
    let field = |key: &str| message.fields.get(key).unwrap_or(&Value::Null);
    let read = |key: &str| {
        Tokens::read(
            &field("usage")[key],
            "inputTokens",
            "cachedInputTokens",
            "outputTokens",
        )
    };
    let Some(total) = read("total") else {
        return;
    };
    let turn_id = field("turn_id").as_str().unwrap_or_default().to_owned();
    let model = field("model").as_str().map(str::to_owned);
    let (turns, start, model) = match usage.take() {
        Some(before) if before.turn_id.as_deref() == Some(turn_id.as_str()) => (
            before.turns,
            before.total.minus(before.last_turn),
            model.or(before.model),
        ),
        Some(before) => (before.turns + 1, before.total, model.or(before.model)),
        None => (1, Tokens::default(), model),
    };
    *usage = Some(Usage {
        source: CODEX_SOURCE.into(),
        turns,
        last_turn: total.minus(start),
        total,
        at,
        turn_id: Some(turn_id),
        model,
        message_id: None,
    });
}

/// Applies a `lane.usage` event to `usage`: the usage of an assistant message in Claude Code's
/// transcript — read when a tool starts (mid-turn) and at the turn's end. Each message counts
/// once: the message counted last, read again, replaces its count (`turns` counts messages).
pub fn from_transcript(usage: &mut Option<Usage>, reported: &UsageReported, at: u64) {
    let Some(mut turn) = Tokens::read(
        &reported.usage,
        "input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    ) else {
        return;
    };
    turn.cache_write = reported
        .usage
        .get("cache_creation_input_tokens")
        .and_then(Value::as_u64);
    let again = |u: &Usage| reported.message_id.is_some() && u.message_id == reported.message_id;
    let (turns, total, model) = match usage.as_ref() {
        Some(u) if again(u) => (u.turns, u.total.minus(u.last_turn), u.model.clone()),
        Some(u) => (u.turns + 1, u.total, u.model.clone()),
        None => (1, Tokens::default(), None),
    };
    *usage = Some(Usage {
        source: "claude_transcript".into(),
        turns,
        last_turn: turn,
        total: total.plus(turn),
        at,
        turn_id: None,
        model: reported.model.clone().or(model),
        message_id: reported.message_id.clone(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A `lane.protocol` event's payload as its detail has it.
    fn message(detail: Value) -> ProtocolReported {
        serde_json::from_value(detail).expect("a lane.protocol detail")
    }

    fn codex(turn: &str, input: u64, cached: u64, output: u64) -> ProtocolReported {
        message(
            json!({"event": "thread/tokenUsage/updated", "means": "Usage",
            "thread_id": "th1", "turn_id": turn, "usage": {
            "last": {"inputTokens": 1, "cachedInputTokens": 0, "outputTokens": 1},
            "total": {"inputTokens": input, "cachedInputTokens": cached, "outputTokens": output}}}),
        )
    }

    #[test]
    fn codex_running_totals_become_turns() {
        let mut usage = None;
        let completed = json!({"event": "turn/completed", "means": "Stop", "thread_id": "th1"});
        from_protocol(&mut usage, &message(completed), 1);
        assert_eq!(usage, None, "nothing reported is absent, not zero");
        from_protocol(&mut usage, &codex("t1", 10, 0, 5), 1);
        // A second update in the same turn (another model call) grows that turn.
        from_protocol(&mut usage, &codex("t1", 25, 4, 9), 2);
        from_protocol(&mut usage, &codex("t2", 40, 10, 12), 3);
        let usage = usage.expect("usage");
        assert_eq!(usage.source, "codex_app_server");
        assert_eq!(usage.turns, 2);
        assert_eq!(
            usage.last_turn,
            Tokens {
                input: 15,
                cached_input: Some(6),
                cache_write: None,
                output: 3
            }
        );
        assert_eq!(usage.total.input, 40);
        assert_eq!(usage.at, 3);
    }

    #[test]
    fn claude_turns_add_up() {
        let mut usage = None;
        let turn = |usage: Value| UsageReported {
            source: "claude_transcript".into(),
            usage,
            transcript_path: None,
            model: None,
            message_id: None,
        };
        from_transcript(&mut usage, &turn(json!({})), 1);
        assert_eq!(usage, None);
        let turn = |input: u64, output: u64| {
            turn(json!({"input_tokens": input, "output_tokens": output,
                        "cache_read_input_tokens": 100}))
        };
        from_transcript(&mut usage, &turn(3, 7), 1);
        from_transcript(&mut usage, &turn(4, 2), 2);
        let usage = usage.expect("usage");
        assert_eq!(usage.source, "claude_transcript");
        assert_eq!(usage.turns, 2);
        assert_eq!(usage.last_turn.output, 2);
        assert_eq!(
            usage.total,
            Tokens {
                input: 7,
                cached_input: Some(200),
                cache_write: None,
                output: 9
            }
        );
    }

    #[test]
    fn a_message_read_again_replaces_its_count() {
        let mut usage = None;
        let read = |id: &str, output: u64| UsageReported {
            source: "claude_transcript".into(),
            usage: json!({"input_tokens": 10, "output_tokens": output}),
            transcript_path: None,
            model: Some("m".into()),
            message_id: Some(id.into()),
        };
        // A tool's start reads the message that called it; the turn's end reads it again
        // (its output complete), then the answer after the tool.
        from_transcript(&mut usage, &read("m1", 3), 1);
        from_transcript(&mut usage, &read("m1", 5), 2);
        from_transcript(&mut usage, &read("m2", 7), 3);
        let usage = usage.expect("usage");
        assert_eq!(usage.turns, 2);
        assert_eq!(usage.total.input, 20);
        assert_eq!(usage.total.output, 12);
        assert_eq!(usage.message_id.as_deref(), Some("m2"));
    }
}
