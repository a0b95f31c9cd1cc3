use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::payload::PromptSent;
use crate::{EventLog, LaneState, Payload};

/// A repository's clawpool folder in a temp dir, as the layout names it.
fn clawpool_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("clawpool");
    std::fs::create_dir_all(dir.join("lanes")).expect("registry folder");
    dir
}

fn lane_log(dir: &Path, lane: &str) -> PathBuf {
    dir.join("lanes").join(lane).join("events.jsonl")
}

fn sent(attempt: u32) -> Payload {
    Payload::PromptSent(PromptSent { attempt, by: None })
}

fn stream_lines(dir: &Path) -> Vec<StreamEvent> {
    std::fs::read_to_string(dir.join("stream.jsonl"))
        .expect("read the stream")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a stream line"))
        .collect()
}

/// Where the child processes of [`two_processes_appending_at_once`] write.
const CHILD_ENV: &str = "CLAWPOOL_STREAM_TEST_CHILD";
const EVENTS_PER_LANE: u32 = 150;

/// The child side of [`two_processes_appending_at_once`]: when run by it, appends to three
/// lanes of its own from three threads; run by itself, does nothing.
#[test]
fn appending_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, who) = spec.rsplit_once('|').expect("dir|who");
    let dir = PathBuf::from(dir);
    let who = who.to_owned();
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let name = format!("{who}-{i}");
            let log = lane_log(&dir, &name);
            std::thread::spawn(move || {
                let events = EventLog::open(name, &log).expect("open");
                for attempt in 0..EVENTS_PER_LANE {
                    events
                        .report(sent(attempt), None, None, None)
                        .expect("report");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("writer thread");
    }
}

#[test]
fn two_processes_appending_at_once() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = clawpool_dir(tmp.path());
    let exe = std::env::current_exe().expect("the test binary");
    let children: Vec<_> = ["p", "q"]
        .iter()
        .map(|who| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "events::stream::tests::appending_child",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, format!("{}|{who}", dir.display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("start a writer process")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("writer process").success());
    }
    let lines = stream_lines(&dir);
    assert_eq!(
        lines.len(),
        6 * EVENTS_PER_LANE as usize,
        "every event once"
    );
    // Cursors strictly increase, each is its line's offset, and each lane's seqs come in order.
    let mut offset = 0u64;
    let mut last_seq: BTreeMap<String, u64> = BTreeMap::new();
    let text = std::fs::read_to_string(dir.join("stream.jsonl")).expect("stream");
    for (line, raw) in lines.iter().zip(text.lines()) {
        assert_eq!(line.cursor, offset, "the cursor is the line's offset");
        offset += raw.len() as u64 + 1;
        let seq = last_seq.entry(line.event.lane.clone()).or_default();
        assert_eq!(
            line.event.seq,
            *seq + 1,
            "lane {} in seq order",
            line.event.lane
        );
        *seq = line.event.seq;
    }
    // Each lane's own log carries the cursor the stream gave its line.
    let by_key: BTreeMap<(String, u64), u64> = lines
        .iter()
        .map(|l| ((l.event.lane.clone(), l.event.seq), l.cursor))
        .collect();
    for lane in last_seq.keys() {
        let own = std::fs::read_to_string(lane_log(&dir, lane)).expect("lane log");
        for raw in own.lines() {
            let line: StreamEvent = serde_json::from_str(raw).expect("lane line with a cursor");
            assert_eq!(by_key[&(lane.clone(), line.event.seq)], line.cursor);
        }
    }
}

#[test]
fn an_event_left_out_by_a_crash_is_put_back_once() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = clawpool_dir(tmp.path());
    let a = lane_log(&dir, "a");
    let log = EventLog::open("a", &a).expect("open a");
    log.report(
        Payload::Ready,
        Some(LaneState::Spawning),
        Some(LaneState::ReadyForPrompt),
        None,
    )
    .expect("report");
    // The crash: lane a's next line reached its own log, with the cursor it was given, and
    // the process died before the stream's line.
    let writer = StreamWriter::open(&dir.join("stream.jsonl")).expect("stream");
    let mut lost = stream_lines(&dir)[0].event.clone();
    lost.seq = 2;
    lost.kind = crate::LaneEventKind::PromptSent;
    lost.from = None;
    lost.to = None;
    lost.detail = serde_json::json!({"attempt": 1});
    let cursor = std::fs::metadata(dir.join("stream.jsonl"))
        .expect("stream")
        .len();
    let mut line = serde_json::to_vec(&StreamEvent {
        event: lost.clone(),
        cursor,
    })
    .expect("line");
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .open(&a)
        .and_then(|mut f| f.write_all(&line))
        .expect("append to a's log");
    drop(log);
    // Another lane then takes that cursor.
    EventLog::open("b", &lane_log(&dir, "b"))
        .expect("open b")
        .report(sent(1), None, None, None)
        .expect("report b");
    assert!(
        !writer.repair(&lane_log(&dir, "b")).expect("repair b"),
        "b is whole"
    );

    // Whoever opens lane a next puts its lost event back, after b's.
    let reopened = EventLog::open("a", &a).expect("reopen a");
    let keys = |lines: &[StreamEvent]| {
        lines
            .iter()
            .map(|l| (l.event.lane.clone(), l.event.seq))
            .collect::<Vec<_>>()
    };
    let expected = vec![
        ("a".to_owned(), 1),
        ("b".to_owned(), 1),
        ("a".to_owned(), 2),
    ];
    assert_eq!(keys(&stream_lines(&dir)), expected);
    assert_eq!(stream_lines(&dir)[2].event, lost);
    // Opening it again finds it there: no duplicate.
    drop(reopened);
    let again = EventLog::open("a", &a).expect("open a again");
    assert_eq!(keys(&stream_lines(&dir)), expected);
    // And a's numbering goes on after it.
    let next = again.report(sent(2), None, None, None).expect("report");
    assert_eq!(next.seq, 3);
}

#[test]
fn a_torn_line_is_closed_off_and_skipped() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = clawpool_dir(tmp.path());
    let path = dir.join("stream.jsonl");
    std::fs::write(&path, b"{\"seq\":1,\"kind\":\"lane.rea").expect("torn line");
    let torn = std::fs::metadata(&path).expect("stream").len();
    let log = EventLog::open("a", &lane_log(&dir, "a")).expect("open");
    let event = log.report(sent(1), None, None, None).expect("report");
    let line = read_at(&path, torn + 1)
        .expect("read")
        .expect("a line at its cursor");
    assert_eq!(line.event, event);
    assert_eq!(line.cursor, torn + 1);
    assert!(
        read_at(&path, 0).expect("read").is_none(),
        "the torn line is no event"
    );
    assert!(
        read_at(&path, 5).expect("read").is_none(),
        "mid-line is no cursor"
    );
}

#[test]
fn a_log_outside_a_registry_has_no_stream() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let log = EventLog::open("a", &tmp.path().join(".claw/events.jsonl")).expect("open");
    log.report(sent(1), None, None, None).expect("report");
    assert!(!tmp.path().join(".claw/stream.jsonl").exists());
    let own = std::fs::read_to_string(tmp.path().join(".claw/events.jsonl")).expect("log");
    assert!(!own.contains("cursor"), "{own}");
}
