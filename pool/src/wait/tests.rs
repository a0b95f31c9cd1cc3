use std::time::Duration;

use clawpool_lanes::{EventLog, FailureClass, LaneState, LaneStatus, Payload};
use clawpool_worktree::layout::{EVENTS, StateDir};

use super::*;

fn log(dir: &StateDir, lane: &str) -> EventLog {
    EventLog::open(lane, &dir.lane(lane).join(EVENTS)).expect("lane log")
}

fn to(events: &EventLog, from: LaneState, to: LaneState) {
    let payload = Payload::transition(to.status()).expect("a plain transition");
    events
        .report(payload, Some(from), Some(to), None)
        .expect("report");
}

const BOUND: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_lane_already_there_returns_at_once() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = StateDir::of(tmp.path());
    let a = log(&dir, "a");
    to(&a, LaneState::Spawning, LaneState::Running);
    let outcome = wait(
        &dir,
        &["a".into()],
        &[Until::Status(LaneStatus::Running)],
        None,
    )
    .await
    .expect("wait");
    assert!(
        matches!(outcome, WaitOutcome::Reached { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn waits_for_every_lane_on_the_stream() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = StateDir::of(tmp.path());
    let (a, b) = (log(&dir, "a"), log(&dir, "b"));
    to(&a, LaneState::Spawning, LaneState::Running);
    let lanes = ["a".to_owned(), "b".to_owned()];
    let waiting = wait(&dir, &lanes, &[Until::Ended], Some(BOUND));
    tokio::pin!(waiting);
    // Polled once: it has read the lanes' logs and follows the stream (b has no event yet:
    // it is waited for until it has).
    tokio::select! {
        biased;
        outcome = &mut waiting => panic!("decided before any lane ended: {outcome:?}"),
        () = std::future::ready(()) => {}
    }
    to(&a, LaneState::Running, LaneState::Finished);
    to(&b, LaneState::Spawning, LaneState::Running);
    to(
        &b,
        LaneState::Running,
        LaneState::Failed(FailureClass::Test),
    );
    let outcome = waiting.await.expect("wait");
    let WaitOutcome::Reached { lanes, cursor } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(cursor.is_some());
    assert_eq!(lanes[0].state, Some(LaneState::Finished));
    assert_eq!(lanes[1].state, Some(LaneState::Failed(FailureClass::Test)));
}

#[tokio::test]
async fn a_lane_ending_elsewhere_stops_the_wait() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = StateDir::of(tmp.path());
    let a = log(&dir, "a");
    to(
        &a,
        LaneState::Spawning,
        LaneState::Failed(FailureClass::Infra),
    );
    let outcome = wait(
        &dir,
        &["a".into()],
        &[Until::Status(LaneStatus::Finished)],
        None,
    )
    .await
    .expect("wait");
    assert!(
        matches!(outcome, WaitOutcome::EndedElsewhere { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_timeout_reports_each_lane() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = StateDir::of(tmp.path());
    to(&log(&dir, "a"), LaneState::Spawning, LaneState::Running);
    let outcome = wait(
        &dir,
        &["a".into(), "ghost".into()],
        &[Until::Ended],
        Some(Duration::from_millis(50)),
    )
    .await
    .expect("wait");
    let WaitOutcome::TimedOut { lanes, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(lanes[0].state, Some(LaneState::Running));
    assert_eq!(lanes[1].state, None);
}

#[test]
fn until_reads_statuses_and_ended() {
    assert_eq!(Until::parse("ended"), Ok(Until::Ended));
    assert_eq!(
        Until::parse("ready_for_prompt"),
        Ok(Until::Status(LaneStatus::ReadyForPrompt))
    );
    assert!(Until::parse("done").is_err_and(|e| e.contains("\"done\"")));
}
