//! A Claude Code lane's token usage, read from the transcript its hooks name, and the reads
//! themselves, which the lane owns ([`UsageReads`]).
//!
//! After a `Stop`, and when a tool starts (`PreToolUse`), the lane reads the latest assistant
//! message's usage from the transcript ([`last_turn_usage`]) and records it as `lane.usage`.
//! Claude Code writes the turn's last assistant message to its transcript after the hook, so
//! the read polls for it ([`TRANSCRIPT_POLL`], at most [`TRANSCRIPT_WAIT`]) in a task of its
//! own and the hook is answered at once; a tool's start gives the cost mid-turn, which the
//! lane's budget is checked against.
//!
//! Every read is a task in the lane's [`UsageReads`], never a detached one: the lane's close
//! [settles](UsageReads::settle) them after its agent stopped and its control socket closed
//! (so no report can start another), giving the reads still polling a short grace and
//! cancelling what is left, before the lane's last state write. So every `lane.usage` a lane
//! records is in its event log before its last write, and nothing appends to the log after
//! the lane ended. A read given up records nothing: the usage is unknown, not zero.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawpool_lanes::EventLog;
use clawpool_lanes::payload::{Payload, UsageReported};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use tokio::task::JoinSet;

/// How much of a transcript's end is read for the turn's usage (a transcript grows with the
/// session, and holds whole API requests; its last lines are enough).
const TRANSCRIPT_TAIL: u64 = 4 << 20;
/// How long the turn's last assistant message may take to reach the transcript after `Stop`,
/// while the lane runs.
pub const TRANSCRIPT_WAIT: Duration = Duration::from_secs(10);
/// How often the transcript is read meanwhile (Claude Code writes it in bursts, and tells no
/// one).
pub const TRANSCRIPT_POLL: Duration = Duration::from_millis(100);

/// The transcript reads of one lane: each a task the lane owns, settled by its close.
#[derive(Clone)]
pub struct UsageReads {
    /// The lane's event log, where each read records its `lane.usage`.
    log: Arc<EventLog>,
    /// The reads not yet joined; `None` once settled: a read asked for after that (a hook
    /// report racing the close) is not started, so nothing outlives the lane.
    tasks: Arc<Mutex<Option<JoinSet<()>>>>,
}

/// What [`UsageReads::settle`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settled {
    /// Reads that were still polling when the close began.
    pub waited: usize,
    /// Of those, the reads whose usage never showed within the grace: cancelled, nothing
    /// recorded.
    pub given_up: usize,
}

impl UsageReads {
    /// No reads yet; each records into `log`.
    pub fn new(log: Arc<EventLog>) -> Self {
        Self {
            log,
            tasks: Arc::new(Mutex::new(Some(JoinSet::new()))),
        }
    }

    /// Starts reading the turn's usage from `transcript` (inside the runtime); nothing once
    /// the reads are settled.
    pub fn start(&self, transcript: PathBuf) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tasks) = tasks.as_mut() else {
            return;
        };
        // Reads that are over are joined here, so a long lane's set holds only live ones.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(record_turn_usage(transcript, Arc::clone(&self.log)));
    }

    /// Ends the reads: those still polling get `grace` to find their usage (each still within
    /// its own [`TRANSCRIPT_WAIT`]), the rest are cancelled and waited for. When this returns
    /// no read runs or starts any more: every `lane.usage` they recorded is in the log. A read
    /// is cancelled only between two looks at the transcript (its record is one synchronous
    /// append), so none is half-written.
    pub async fn settle(&self, grace: Duration) -> Settled {
        let taken = self.tasks.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(mut tasks) = taken else {
            return Settled::default();
        };
        while tasks.try_join_next().is_some() {}
        let waited = tasks.len();
        let _ =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        let given_up = tasks.len();
        tasks.shutdown().await;
        Settled { waited, given_up }
    }
}

/// Records the turn's usage (`lane.usage`) once the transcript holds it, within
/// [`TRANSCRIPT_WAIT`]; nothing when it never does (unknown, not zero).
async fn record_turn_usage(transcript: PathBuf, log: Arc<EventLog>) {
    let deadline = tokio::time::Instant::now() + TRANSCRIPT_WAIT;
    while tokio::time::Instant::now() < deadline {
        if let Some(read) = last_turn_usage(&transcript) {
            let reported = Payload::Usage(UsageReported {
                source: "claude_transcript".into(),
                usage: read.usage,
                transcript_path: Some(transcript.display().to_string()),
                model: read.model,
                message_id: read.message_id,
            });
            let _ = log.report(reported, None, None, None);
            return;
        }
        tokio::time::sleep(TRANSCRIPT_POLL).await;
    }
}

/// An assistant message's usage, as the transcript has it.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptUsage {
    /// The message's `usage`, in Claude Code's vocabulary.
    pub usage: Value,
    /// The model the message names.
    pub model: Option<String>,
    /// The message's id (one API response; its content blocks are separate lines).
    pub message_id: Option<String>,
}

/// One line of Claude Code's transcript, as far as the turn's usage goes: an assistant
/// message, a user line (a prompt or a tool's result: the answer after it is not written yet),
/// or anything else (system lines, summaries, a newer version's kinds).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TranscriptLine {
    Assistant {
        #[serde(default)]
        message: AssistantMessage,
    },
    User,
    #[serde(other)]
    Other,
}

/// An assistant line's `message`: the fields the usage is recorded with. A field of another
/// type reads as absent, as when the line was read by key.
#[derive(Default, Deserialize)]
struct AssistantMessage {
    #[serde(default, deserialize_with = "text_or_none")]
    id: Option<String>,
    #[serde(default, deserialize_with = "text_or_none")]
    model: Option<String>,
    /// Kept in the agent's vocabulary; only an object is a usage.
    #[serde(default)]
    usage: Option<Value>,
}

fn text_or_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => Some(text),
        _ => None,
    })
}

/// The `usage` of the last assistant message in Claude Code's transcript (JSON lines:
/// `{"type": "assistant", "message": {"id": …, "model": …, "usage": {…}}}`), read from its
/// last [`TRANSCRIPT_TAIL`] bytes: the last assistant line, if no `user` line (a prompt or a
/// tool's result) follows it — else the turn's answer is not written yet. Lines that are not
/// JSON, or of no kind the read knows, are skipped.
pub fn last_turn_usage(transcript: &Path) -> Option<TranscriptUsage> {
    let mut file = std::fs::File::open(transcript).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TRANSCRIPT_TAIL)))
        .ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    let last = String::from_utf8_lossy(&tail)
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<TranscriptLine>(line).ok())
        .find(|line| !matches!(line, TranscriptLine::Other))?;
    let TranscriptLine::Assistant { message } = last else {
        return None;
    };
    let usage = message.usage.filter(Value::is_object)?;
    Some(TranscriptUsage {
        usage,
        model: message.model,
        message_id: message.id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_turns_usage_is_its_last_assistant_message_once_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let transcript = dir.path().join("session.jsonl");
        let write = |lines: &[Value]| {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            std::fs::write(&transcript, text).expect("transcript");
        };
        let prompt = json!({"type": "user", "message": {"content": "hi"}});
        let answer = |output: u64| {
            json!({"type": "assistant", "message": {"usage": {"input_tokens": 3,
                   "output_tokens": output, "cache_read_input_tokens": 5}}})
        };
        // The turn's prompt is the last word: its answer is not written yet.
        write(&[answer(1), prompt.clone()]);
        assert_eq!(last_turn_usage(&transcript), None);
        write(&[
            answer(1),
            prompt,
            answer(4),
            json!({"type": "system", "subtype": "stop_hook_summary"}),
        ]);
        let usage = last_turn_usage(&transcript).expect("usage").usage;
        assert_eq!(usage["output_tokens"], 4);
        assert_eq!(usage["cache_read_input_tokens"], 5);
        assert_eq!(last_turn_usage(&dir.path().join("none.jsonl")), None);
    }

    #[test]
    fn a_transcript_line_is_read_by_its_type_with_odd_fields_as_absent() {
        let dir = tempfile::tempdir().expect("temp dir");
        let transcript = dir.path().join("session.jsonl");
        let lines = [
            json!({"type": "assistant", "message": {"id": "msg_1", "model": "m",
                   "usage": {"output_tokens": 2}}}),
            // Not JSON, no type, a kind of a newer version: skipped.
            json!("not an object"),
            json!({"message": {}}),
            json!({"type": "summary", "summary": "…"}),
        ];
        let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        text.push_str("{half a line\n");
        std::fs::write(&transcript, &text).expect("transcript");
        let read = last_turn_usage(&transcript).expect("usage");
        assert_eq!(
            read,
            TranscriptUsage {
                usage: json!({"output_tokens": 2}),
                model: Some("m".into()),
                message_id: Some("msg_1".into()),
            }
        );
        // A model or id that is no string reads as none; a usage that is no object is none.
        let odd = json!({"type": "assistant", "message": {"id": 7, "model": null,
                         "usage": {"output_tokens": 3}}});
        std::fs::write(&transcript, format!("{text}{odd}\n")).expect("transcript");
        let read = last_turn_usage(&transcript).expect("usage");
        assert_eq!((read.model, read.message_id), (None, None));
        let no_usage = json!({"type": "assistant", "message": {"usage": 3}});
        std::fs::write(&transcript, format!("{text}{no_usage}\n")).expect("transcript");
        assert_eq!(last_turn_usage(&transcript), None);
    }

    /// A lane's reads in `dir`, one started on a transcript holding `text`: the reads, the
    /// transcript and the event log's file.
    fn reading(dir: &Path, text: &str) -> (UsageReads, PathBuf, PathBuf) {
        let path = dir.join("events.jsonl");
        let log = EventLog::open("lane", &path).expect("the event log");
        let transcript = dir.join("session.jsonl");
        std::fs::write(&transcript, text).expect("transcript");
        let reads = UsageReads::new(Arc::new(log));
        reads.start(transcript.clone());
        (reads, transcript, path)
    }

    fn usage_events(log: &Path) -> usize {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.contains("\"lane.usage\""))
            .count()
    }

    fn answer() -> String {
        format!(
            "{}\n",
            json!({"type": "assistant", "message": {"id": "msg_9", "model": "m",
                   "usage": {"input_tokens": 1, "output_tokens": 2}}})
        )
    }

    /// The race of issue 27: the turn's answer reaches the transcript after the lane began to
    /// close. Settling waits for it (no longer), so its `lane.usage` is in the log before the
    /// lane's last write.
    #[tokio::test(start_paused = true)]
    async fn settling_waits_for_a_usage_written_after_the_close_began() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (reads, transcript, path) = reading(dir.path(), "{\"type\": \"user\"}\n");
        let late = tokio::spawn({
            let transcript = transcript.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(700)).await;
                let mut text = std::fs::read_to_string(&transcript).expect("transcript");
                text.push_str(&answer());
                std::fs::write(&transcript, text).expect("transcript");
            }
        });
        let began = tokio::time::Instant::now();
        let settled = reads.settle(Duration::from_secs(2)).await;
        assert_eq!(
            settled,
            Settled {
                waited: 1,
                given_up: 0
            }
        );
        assert_eq!(usage_events(&path), 1, "recorded before settle returned");
        // It returned with the read, not at the grace's end.
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "{:?}",
            began.elapsed()
        );
        late.await.expect("the late write");
    }

    /// A usage that never shows is given up at the grace's end: nothing recorded (unknown, not
    /// zero), and nothing later — no read left running, none started after.
    #[tokio::test(start_paused = true)]
    async fn a_usage_that_never_shows_is_given_up_and_nothing_writes_after() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (reads, transcript, path) = reading(dir.path(), "{\"type\": \"user\"}\n");
        let began = tokio::time::Instant::now();
        let settled = reads.settle(Duration::from_secs(2)).await;
        assert_eq!(
            settled,
            Settled {
                waited: 1,
                given_up: 1
            }
        );
        assert!(began.elapsed() >= Duration::from_secs(2));
        assert!(began.elapsed() < TRANSCRIPT_WAIT);
        // The answer shows after all, and a hook report asks for another read: the lane has
        // ended, and its log takes neither.
        std::fs::write(&transcript, answer()).expect("transcript");
        reads.start(transcript);
        tokio::time::sleep(TRANSCRIPT_WAIT * 2).await;
        assert_eq!(usage_events(&path), 0);
        assert_eq!(
            reads.settle(Duration::from_secs(2)).await,
            Settled::default()
        );
    }

    /// Reads already over when the lane closes cost it no wait.
    #[tokio::test(start_paused = true)]
    async fn reads_already_over_are_not_waited_for() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (reads, transcript, path) = reading(dir.path(), &answer());
        reads.start(transcript);
        tokio::time::sleep(TRANSCRIPT_POLL).await;
        let began = tokio::time::Instant::now();
        assert_eq!(
            reads.settle(Duration::from_secs(2)).await,
            Settled::default()
        );
        assert_eq!(began.elapsed(), Duration::ZERO);
        assert_eq!(usage_events(&path), 2);
    }
}
