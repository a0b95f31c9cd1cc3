//! A lane's facts for the recovery policy (`clawpool_recovery::LaneFacts`), read from its state
//! file and event log: what the driver decides with, and what `clawpool policy explain` and
//! `clawpool recover` show, so the three see the same lane.

use std::path::Path;

use clawpool_lanes::{LaneStatus, WorkerStateDoc};
use clawpool_recovery::{Freshness, Green, LaneFacts, Ledger, Trigger};
use serde_json::Value;

/// A lane's facts as its state file (and event log) has them at `now` (epoch s).
pub fn lane_facts(doc: &WorkerStateDoc, events: &Path, now: u64) -> LaneFacts {
    let state = doc.lane_state();
    let mut facts = LaneFacts::new(&doc.lane, doc.status);
    facts.subphase = state.subphase();
    facts.failure = doc
        .failure
        .as_ref()
        .filter(|_| matches!(doc.status, LaneStatus::Failed | LaneStatus::Blocked))
        .map(|f| f.class);
    facts.trigger = trigger_of(doc);
    facts.green = Green(doc.green_level);
    facts.freshness = doc
        .freshness
        .as_ref()
        .map_or(Freshness::Unknown, |f| f.state);
    let ledger = Ledger::from_record(doc.recovery.clone());
    facts.attempts = ledger.attempt_counts();
    facts.recovery = ledger.status();
    let entered = doc
        .blocked
        .map(|b| b.since)
        .or_else(|| entered_state_at(events))
        .or_else(|| doc.lane_event.as_ref().map(|e| e.timestamp))
        .unwrap_or(doc.updated_at);
    facts.seconds_in_state = now.saturating_sub(entered);
    facts.seconds_since_progress = now.saturating_sub(doc.progress_at);
    facts
}

/// What recovery can heal in the lane as its state file has it ([`Trigger::of`], as the
/// supervisor decides it).
fn trigger_of(doc: &WorkerStateDoc) -> Option<Trigger> {
    Trigger::of(
        doc.lane_state(),
        doc.prompt.sent_at.is_some() || doc.prompt.attempts > 0,
    )
}

/// When the lane entered its current state: the last transition in its event log (epoch s).
fn entered_state_at(events: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(events).ok()?;
    text.lines().rev().find_map(|line| {
        let event: Value = serde_json::from_str(line).ok()?;
        event.get("to")?;
        event["at_ms"].as_u64().map(|ms| ms / 1000)
    })
}
