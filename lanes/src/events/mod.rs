//! Typed lane events and the append-only JSON-lines log they are written to; a registry
//! lane's log also writes its repository's stream ([`stream`]).

pub mod stream;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use self::stream::StreamWriter;
use crate::evidence::Evidence;
use crate::{LaneEventKind, LaneState, Payload};

/// Where the fact behind an event came from (`docs/events.md`, "Sources").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventSource {
    /// The agent said so itself, through its hook channel.
    Hook,
    /// The agent said so itself, through its app server's protocol (Codex).
    Protocol,
    /// clawpool read it off the agent's screen.
    Screen,
    /// An operator's command.
    Operator,
    /// The agent's process (its exit).
    Process,
}

/// One event in a lane's life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneEvent {
    /// Strictly increasing per lane, from 1.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened; on the wire its stable dotted name (`lane.trust_resolved`, …).
    pub kind: LaneEventKind,
    /// The lane.
    pub lane: String,
    /// The state before, for transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<LaneState>,
    /// The state after, for transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<LaneState>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// Anything else the event carries (e.g. `{"method": "auto_allowlisted"}`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
    /// Where the fact came from, for what the handshake decided; absent for events that are
    /// clawpool's own doing (commits seen, verification, recovery) and in older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<EventSource>,
}

impl LaneEvent {
    /// The event's typed fields ([`Payload::read`]).
    pub fn payload(&self) -> Option<Payload> {
        Payload::read(&self.kind, &self.detail)
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Why the event log could not be written.
#[derive(Debug, thiserror::Error)]
#[error("event log {}: {source}", path.display())]
pub struct EventLogError {
    /// The log file.
    pub path: PathBuf,
    /// The error.
    pub source: std::io::Error,
}

/// Called with every event as it is recorded (to show progress live), in the events' order:
/// it must not record events in the same log itself.
pub type EventObserver = Box<dyn Fn(&LaneEvent) + Send + Sync>;

/// A lane's events: numbered and, when a file is given, appended to it as JSON lines. They are
/// not kept in memory: the file is the record (readers read it), and a long lane's history
/// would otherwise grow in the supervisor for as long as the lane lives.
///
/// A registry lane's log (`<common>/clawpool/lanes/<name>/events.jsonl`) also feeds the
/// repository's stream ([`crate::stream`]): each event is appended there with its cursor, and
/// the lane's own line carries the same cursor.
pub struct EventLog {
    lane: String,
    inner: Mutex<Inner>,
    /// Held from an event's line to its observer's return, so the observer sees the log's
    /// events in their order whichever task records them: a lane's state file follows its
    /// observer, and an older event handed over after a newer one would set it back (the
    /// transcript's usage, read on its own task, recorded as the lane finishes).
    observed_in_order: Mutex<()>,
    observer: Option<EventObserver>,
}

struct Inner {
    seq: u64,
    file: Option<(PathBuf, File)>,
    /// The repository's stream, for a registry lane's log.
    stream: Option<StreamWriter>,
}

impl EventLog {
    /// A log for `lane` that numbers its events and writes them nowhere.
    pub fn in_memory(lane: impl Into<String>) -> Self {
        Self {
            lane: lane.into(),
            inner: Mutex::new(Inner {
                seq: 0,
                file: None,
                stream: None,
            }),
            observed_in_order: Mutex::new(()),
            observer: None,
        }
    }

    /// A log for `lane` also appended to `path` (created with its folder). Numbering continues
    /// after the last event already in the file, so a restarted supervisor never reuses a seq.
    /// A registry lane's log also writes the repository's stream, and first puts back there
    /// the lane's last event if the process that wrote it died before it reached the stream.
    pub fn open(lane: impl Into<String>, path: &Path) -> Result<Self, EventLogError> {
        let err = |source| EventLogError {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let last_seq = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<LaneEvent>(line).ok())
            .map(|e| e.seq)
            .max()
            .unwrap_or(0);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        let stream = match clawpool_worktree::layout::StateDir::of_lane_events(path) {
            Some(dir) => {
                let stream_err = |source| EventLogError {
                    path: dir.stream(),
                    source,
                };
                let stream = StreamWriter::open(&dir.stream()).map_err(stream_err)?;
                stream.repair(path).map_err(stream_err)?;
                Some(stream)
            }
            None => None,
        };
        Ok(Self {
            lane: lane.into(),
            inner: Mutex::new(Inner {
                seq: last_seq,
                file: Some((path.to_owned(), file)),
                stream,
            }),
            observed_in_order: Mutex::new(()),
            observer: None,
        })
    }

    /// Also calls `observer` with every event recorded from now on, in the order of their seq
    /// whichever tasks append them, each before its append returns. The observer must not
    /// append to this log itself (it is called while the next append waits).
    pub fn observe(mut self, observer: EventObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Appends an event with these typed fields, giving it the payload's kind, the next seq
    /// and the current time. Returns it.
    pub fn report(
        &self,
        payload: Payload,
        from: Option<LaneState>,
        to: Option<LaneState>,
        evidence: Option<Evidence>,
    ) -> Result<LaneEvent, EventLogError> {
        self.report_from(None, payload, from, to, evidence)
    }

    /// [`EventLog::report`], with the source of the fact behind the event.
    pub fn report_from(
        &self,
        source: Option<EventSource>,
        payload: Payload,
        from: Option<LaneState>,
        to: Option<LaneState>,
        evidence: Option<Evidence>,
    ) -> Result<LaneEvent, EventLogError> {
        let detail = payload.detail();
        self.append(source, payload.kind(), from, to, evidence, detail)
    }

    /// Appends an event of `kind` with `detail` as given, whatever its shape. Every writer in
    /// clawpool reports through [`EventLog::report`], whose payload fixes the kind and the
    /// detail's shape; this is for what writes a log as another version or a test fixture
    /// would (a detail that is not its kind's shape, a kind this build does not know).
    pub fn record(
        &self,
        kind: LaneEventKind,
        from: Option<LaneState>,
        to: Option<LaneState>,
        evidence: Option<Evidence>,
        detail: serde_json::Value,
    ) -> Result<LaneEvent, EventLogError> {
        self.append(None, kind, from, to, evidence, detail)
    }

    /// Appends the events of `reports` in order, each with its own seq and time, and only
    /// then calls the observer with each of them, in the same order: what the observer does
    /// for one (a lane's state file written and synced, milliseconds a write) does not delay
    /// the next one's line. One decision's events — a hook's record and the finish it decides —
    /// reach the log and the stream together. Each append's result, in order.
    pub fn report_all(&self, reports: Vec<EventReport>) -> Vec<Result<LaneEvent, EventLogError>> {
        let _in_order = self.in_order();
        let written: Vec<_> = reports
            .into_iter()
            .map(|report| {
                let detail = report.payload.detail();
                self.write(
                    report.source,
                    report.payload.kind(),
                    report.from,
                    report.to,
                    report.evidence,
                    detail,
                )
            })
            .collect();
        for event in written.iter().flatten() {
            self.notify(event);
        }
        written
    }

    fn append(
        &self,
        source: Option<EventSource>,
        kind: LaneEventKind,
        from: Option<LaneState>,
        to: Option<LaneState>,
        evidence: Option<Evidence>,
        detail: serde_json::Value,
    ) -> Result<LaneEvent, EventLogError> {
        let _in_order = self.in_order();
        let event = self.write(source, kind, from, to, evidence, detail)?;
        self.notify(&event);
        Ok(event)
    }

    /// The turn to record: waits for the event recorded before to reach the observer.
    fn in_order(&self) -> std::sync::MutexGuard<'_, ()> {
        self.observed_in_order
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn notify(&self, event: &LaneEvent) {
        if let Some(observer) = &self.observer {
            observer(event);
        }
    }

    /// Numbers the event and writes its line (and the stream's), without the observer.
    fn write(
        &self,
        source: Option<EventSource>,
        kind: LaneEventKind,
        from: Option<LaneState>,
        to: Option<LaneState>,
        evidence: Option<Evidence>,
        detail: serde_json::Value,
    ) -> Result<LaneEvent, EventLogError> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        inner.seq += 1;
        let event = LaneEvent {
            seq: inner.seq,
            at_ms: now_ms(),
            kind,
            lane: self.lane.clone(),
            from,
            to,
            evidence,
            detail,
            source,
        };
        let Inner { file, stream, .. } = &mut *inner;
        if let (Some((_, file)), Some(stream)) = (file.as_mut(), stream.as_ref()) {
            // The lane's line, then the stream's, under the stream's lock (`crate::stream`).
            stream
                .append(&event, |line| file.write_all(line))
                .map_err(|source| EventLogError {
                    path: stream.path().to_owned(),
                    source,
                })?;
        } else if let Some((path, file)) = file.as_mut() {
            let mut line = serde_json::to_vec(&event).map_err(|e| EventLogError {
                path: path.clone(),
                source: std::io::Error::other(e),
            })?;
            line.push(b'\n');
            // One write per line with O_APPEND: readers never see half an event.
            file.write_all(&line).map_err(|source| EventLogError {
                path: path.clone(),
                source,
            })?;
        }
        drop(inner);
        Ok(event)
    }
}

/// One event for [`EventLog::report_all`]: what [`EventLog::report_from`] takes.
#[derive(Debug)]
pub struct EventReport {
    /// Where the fact came from.
    pub source: Option<EventSource>,
    /// The event's payload (its kind and detail).
    pub payload: Payload,
    /// The state it left.
    pub from: Option<LaneState>,
    /// The state it entered.
    pub to: Option<LaneState>,
    /// What was seen.
    pub evidence: Option<Evidence>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LaneState;

    #[test]
    fn seq_increases_and_survives_reopening() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("lanes/a/events.jsonl");
        let log = EventLog::open("a", &path).expect("open");
        let first = log
            .report(
                Payload::Ready,
                Some(LaneState::Spawning),
                Some(LaneState::ReadyForPrompt),
                None,
            )
            .expect("record");
        assert_eq!(first.seq, 1);
        drop(log);
        let log = EventLog::open("a", &path).expect("reopen");
        let sent = crate::payload::PromptSent {
            attempt: 1,
            by: None,
        };
        let second = log
            .report(Payload::PromptSent(sent), None, None, None)
            .expect("record");
        assert_eq!(second.seq, 2);
        let lines: Vec<LaneEvent> = std::fs::read_to_string(&path)
            .expect("read")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(lines.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(lines[0].detail, serde_json::Value::Null);
        assert_eq!(lines[1].detail["attempt"], 1);
    }

    /// Two tasks record at once: the second's event is not handed to the observer while the
    /// first's observer is still at work, so the observer (a lane's state file) never sees
    /// an older event after a newer one.
    #[test]
    fn the_observer_sees_events_in_their_order_whichever_thread_records_them() {
        let (first_observing, first_is_observed) = std::sync::mpsc::channel();
        let (later_observed, later_seen) = std::sync::mpsc::channel();
        let later_seen = Mutex::new(later_seen);
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let observed = std::sync::Arc::clone(&order);
        let log = std::sync::Arc::new(EventLog::in_memory("a").observe(Box::new(move |event| {
            if event.seq == 1 {
                first_observing.send(()).expect("the test waits");
                // The other thread's event, if it could overtake this one, arrives now.
                let overtaken = later_seen
                    .lock()
                    .expect("lock")
                    .recv_timeout(std::time::Duration::from_millis(300));
                observed.lock().expect("lock").push((1, overtaken.is_ok()));
            } else {
                let _ = later_observed.send(());
                observed.lock().expect("lock").push((event.seq, false));
            }
        })));
        let first = {
            let log = std::sync::Arc::clone(&log);
            std::thread::spawn(move || log.report(Payload::Ready, None, None, None))
        };
        first_is_observed
            .recv()
            .expect("the first event reaches the observer");
        let later = log
            .report(Payload::Ready, None, None, None)
            .expect("record");
        first.join().expect("thread").expect("record");
        assert_eq!(later.seq, 2);
        assert_eq!(*order.lock().expect("lock"), vec![(1, false), (2, false)]);
    }

    #[test]
    fn a_batch_is_written_before_the_observer_sees_any_of_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("lanes/a/events.jsonl");
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let observed = std::sync::Arc::clone(&seen);
        let file = path.clone();
        let log = EventLog::open("a", &path)
            .expect("open")
            .observe(Box::new(move |event| {
                // What the file holds when the observer is called for this event.
                let lines = std::fs::read_to_string(&file)
                    .expect("read")
                    .lines()
                    .count();
                observed.lock().expect("lock").push((event.seq, lines));
            }));
        let report = |payload, to| EventReport {
            source: Some(EventSource::Hook),
            payload,
            from: Some(LaneState::Running),
            to,
            evidence: None,
        };
        let written = log.report_all(vec![
            report(Payload::Ready, None),
            report(
                Payload::transition(LaneState::Finished.status()).expect("a transition"),
                Some(LaneState::Finished),
            ),
        ]);
        let seqs: Vec<u64> = written
            .iter()
            .map(|r| r.as_ref().expect("ok").seq)
            .collect();
        assert_eq!(seqs, vec![1, 2]);
        assert_eq!(*seen.lock().expect("lock"), vec![(1, 2), (2, 2)]);
    }
}
