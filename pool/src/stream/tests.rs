use std::time::Duration;

use clawpool_lanes::payload::PromptSent;
use clawpool_lanes::{EventLog, Payload};
use clawpool_worktree::layout::{EVENTS, StateDir};

use super::*;

fn state_dir(tmp: &std::path::Path) -> StateDir {
    StateDir::of(tmp)
}

fn log(dir: &StateDir, lane: &str) -> EventLog {
    EventLog::open(lane, &dir.lane(lane).join(EVENTS)).expect("lane log")
}

fn sent(attempt: u32) -> Payload {
    Payload::PromptSent(PromptSent { attempt, by: None })
}

fn keys(events: &[StreamEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .map(|e| (e.event.lane.clone(), e.event.seq))
        .collect()
}

/// A bound on a wait that an append ends at once, so a broken watch fails rather than hangs.
const BOUND: Duration = Duration::from_secs(10);

#[tokio::test]
async fn reads_from_the_start_after_a_cursor_and_from_now() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = state_dir(tmp.path());
    let (a, b) = (log(&dir, "a"), log(&dir, "b"));
    a.report(sent(1), None, None, None).expect("a1");
    b.report(sent(1), None, None, None).expect("b1");
    a.report(sent(2), None, None, None).expect("a2");

    let all = Follower::open(&dir, Start::Beginning)
        .expect("open")
        .read()
        .expect("read");
    assert_eq!(
        keys(&all),
        [("a".into(), 1), ("b".into(), 1), ("a".into(), 2)]
    );
    assert!(all.windows(2).all(|w| w[0].cursor < w[1].cursor));

    let after = Follower::open(&dir, Start::After(all[0].cursor))
        .expect("open after")
        .read()
        .expect("read");
    assert_eq!(after, all[1..]);

    let mut now = Follower::open(&dir, Start::Now).expect("open now");
    assert!(now.read().expect("read").is_empty());
    b.report(sent(2), None, None, None).expect("b2");
    assert_eq!(keys(&now.read().expect("read")), [("b".into(), 2)]);
}

#[tokio::test]
async fn a_cursor_that_is_no_event_is_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = state_dir(tmp.path());
    log(&dir, "a")
        .report(sent(1), None, None, None)
        .expect("a1");
    for cursor in [1, 10_000] {
        match Follower::open(&dir, Start::After(cursor)) {
            Err(StreamError::UnknownCursor { cursor: c, .. }) => assert_eq!(c, cursor),
            Err(other) => panic!("cursor {cursor}: {other}"),
            Ok(_) => panic!("cursor {cursor} accepted"),
        }
    }
}

#[tokio::test]
async fn a_follower_is_woken_by_an_append_from_another_thread() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = state_dir(tmp.path());
    let mut follower = Follower::open(&dir, Start::Now).expect("open");
    let writer_dir = dir.clone();
    let writer = std::thread::spawn(move || {
        let a = log(&writer_dir, "a");
        for attempt in 1..=3 {
            a.report(sent(attempt), None, None, None).expect("report");
        }
    });
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let events = tokio::time::timeout(BOUND, follower.next())
            .await
            .expect("woken by the appends")
            .expect("read");
        seen.extend(events);
    }
    writer.join().expect("writer");
    assert_eq!(
        keys(&seen),
        [("a".into(), 1), ("a".into(), 2), ("a".into(), 3)]
    );
}
