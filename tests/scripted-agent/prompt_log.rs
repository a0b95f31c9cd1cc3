//! The prompt log: one JSON line per prompt received and per dialog answered, which tests
//! read to count deliveries.
//!
//! Every line is its own open (append) – write – close: a test may read the file at any
//! moment, and the agent may be killed at any moment, so nothing may sit in a buffer.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Where events are logged; logging is a no-op without a path.
#[derive(Debug, Clone, Default)]
pub struct PromptLog {
    path: Option<PathBuf>,
}

impl PromptLog {
    /// A log writing to `path` (absolute), or nowhere.
    pub fn new(path: Option<PathBuf>) -> Self {
        Self { path }
    }

    /// Logs `{"event":"prompt","text":...,"at_ms":...}`.
    pub fn prompt(&self, text: &str) -> io::Result<()> {
        self.append(&Event {
            event: "prompt",
            text: Some(text),
            choice: None,
            keys: None,
            at_ms: now_ms(),
        })
    }

    /// How many prompts the log holds (a resumed session goes on after them); 0 without a log.
    pub fn prompts(&self) -> usize {
        let Some(path) = &self.path else {
            return 0;
        };
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|event| event["event"] == "prompt")
            .count()
    }

    /// Logs a notice that went away: `{"event":"notice","text":...,"keys":N,"at_ms":...}`,
    /// `keys` counting the keys received while it showed.
    pub fn notice(&self, text: &str, keys: u32) -> io::Result<()> {
        self.append(&Event {
            event: "notice",
            text: Some(text),
            choice: None,
            keys: Some(keys),
            at_ms: now_ms(),
        })
    }

    /// Logs a dialog answer: `{"event":EVENT,"choice":"yes"|"no","at_ms":...}`.
    pub fn choice(&self, event: &str, yes: bool) -> io::Result<()> {
        let choice = if yes { "yes" } else { "no" };
        self.append(&Event {
            event,
            text: None,
            choice: Some(choice),
            keys: None,
            at_ms: now_ms(),
        })
    }

    fn append(&self, event: &Event<'_>) -> io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut line = serde_json::to_string(event).map_err(io::Error::other)?;
        line.push('\n');
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        // One write call for the whole line, so concurrent readers never see half of it.
        file.write_all(line.as_bytes())
    }
}

/// One log line; a struct rather than a JSON map so the keys keep this order.
#[derive(Serialize)]
struct Event<'a> {
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    choice: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<u32>,
    at_ms: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_one_json_line_per_event() {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let path = dir.path().join("log.jsonl");
        let log = PromptLog::new(Some(path.clone()));
        log.choice("trust", true).expect("log is writable");
        log.prompt("two\nlines \"quoted\"")
            .expect("log is writable");
        let text = std::fs::read_to_string(&path).expect("log exists");
        assert!(
            text.starts_with(r#"{"event":"trust","choice":"yes","at_ms":"#),
            "{text}"
        );
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "trust");
        assert_eq!(lines[0]["choice"], "yes");
        assert_eq!(lines[1]["event"], "prompt");
        assert_eq!(lines[1]["text"], "two\nlines \"quoted\"");
        assert!(lines[1]["at_ms"].as_u64().expect("at_ms is a number") > 1_600_000_000_000);
    }

    #[test]
    fn no_path_logs_nothing() {
        PromptLog::new(None)
            .prompt("x")
            .expect("a disabled log never fails");
    }
}
