//! Waiting for lanes to reach a state (`clawpool wait`, `docs/cli.md`): on the repository's
//! stream, never on a timer.
//!
//! The order is what makes it race-free: the stream is opened at its end first, then each
//! lane's state is read from its own log. A lane's line is written before its stream line,
//! under the stream's lock (`clawpool_lanes::stream`), so every event before that end is in
//! the lane logs read, and every event after it comes through the stream; an event seen both
//! ways is applied once (by its `seq`).
//!
//! A lane *reached* the states asked for once its state was one of them, at the start or
//! later, and stays so; a lane that ends (finished, failed) in another state before reaching
//! them stops the wait.

use std::collections::BTreeMap;
use std::time::Duration;

use clawpool_lanes::stream::StreamEvent;
use clawpool_lanes::{LaneEvent, LaneState, LaneStatus};
use clawpool_worktree::layout::{EVENTS, StateDir};
use serde::Serialize;

use crate::stream::{Follower, Start, StreamError};

/// A state to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The lane's status is this one.
    Status(LaneStatus),
    /// The lane ended, however (`finished`, `failed`).
    Ended,
}

impl Until {
    /// Reads one state as `wait --until` takes it: a `lane_status` value or `ended`.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text == "ended" {
            return Ok(Until::Ended);
        }
        serde_json::from_value(serde_json::Value::String(text.to_owned()))
            .map(Until::Status)
            .map_err(|_| {
                format!(
                    "unknown state {text:?}: a lane_status (spawning, trust_required, tool_permission_required, ready_for_prompt, prompt_accepted, running, blocked, finished, failed) or ended"
                )
            })
    }

    fn matches(self, state: LaneState) -> bool {
        match self {
            Until::Status(status) => state.status() == status,
            Until::Ended => state.is_terminal(),
        }
    }
}

/// Where one lane stands in a wait.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneProgress {
    /// The lane.
    pub lane: String,
    /// Its state now (`None`: no event yet — not started, or no such lane).
    pub state: Option<LaneState>,
    /// Whether it reached one of the states asked for.
    pub reached: bool,
    /// The seq of its last event seen.
    pub seq: u64,
}

impl LaneProgress {
    fn apply(&mut self, event: &LaneEvent, until: &[Until]) {
        if event.seq <= self.seq {
            return;
        }
        self.seq = event.seq;
        if let Some(to) = event.to {
            self.state = Some(to);
            self.reached |= until.iter().any(|u| u.matches(to));
        }
    }

    /// Ended in a state not asked for, before reaching one that was.
    fn ended_elsewhere(&self) -> bool {
        !self.reached && self.state.is_some_and(LaneState::is_terminal)
    }
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaitOutcome {
    /// Every lane reached one of the states.
    Reached {
        /// Each lane.
        lanes: Vec<LaneProgress>,
        /// The stream's cursor of the last event the wait read (resume a follower after it).
        cursor: Option<u64>,
    },
    /// A lane ended in a state not asked for.
    EndedElsewhere {
        /// Each lane.
        lanes: Vec<LaneProgress>,
        /// The stream's cursor of the last event the wait read.
        cursor: Option<u64>,
    },
    /// The time ran out first.
    TimedOut {
        /// Each lane.
        lanes: Vec<LaneProgress>,
        /// The stream's cursor of the last event the wait read.
        cursor: Option<u64>,
    },
}

/// Why a wait could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The stream could not be read.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// A lane's own log could not be read.
    #[error("lane {lane}'s event log: {source}")]
    LaneLog {
        /// The lane.
        lane: String,
        /// The error.
        source: std::io::Error,
    },
}

impl WaitError {
    /// A stable name for the error, for JSON consumers.
    pub fn kind(&self) -> &'static str {
        match self {
            WaitError::Stream(e) => e.kind(),
            WaitError::LaneLog { .. } => "lane_log_unreadable",
        }
    }
}

/// Waits until every lane in `lanes` of the repository whose clawpool folder is `dir` reached
/// one of `until`, one ended elsewhere, or `timeout` passed.
pub async fn wait(
    dir: &StateDir,
    lanes: &[String],
    until: &[Until],
    timeout: Option<Duration>,
) -> Result<WaitOutcome, WaitError> {
    // The stream first, then the lanes' logs (see the module's doc).
    let mut follower = Follower::open(dir, Start::Now)?;
    let mut progress: BTreeMap<&str, LaneProgress> = BTreeMap::new();
    for lane in lanes {
        let mut lane_progress = LaneProgress {
            lane: lane.clone(),
            state: None,
            reached: false,
            seq: 0,
        };
        for event in lane_log(dir, lane)? {
            lane_progress.apply(&event, until);
        }
        progress.insert(lane, lane_progress);
    }
    let mut cursor = None;
    let waiting = async {
        let outcome: Result<Decided, StreamError> = loop {
            if let Some(outcome) = decided(&progress) {
                break Ok(outcome);
            }
            let events = match follower.next().await {
                Ok(events) => events,
                Err(e) => break Err(e),
            };
            for StreamEvent { event, cursor: at } in events {
                cursor = Some(at);
                if let Some(lane) = progress.get_mut(event.lane.as_str()) {
                    lane.apply(&event, until);
                }
            }
        };
        outcome
    };
    let result = match timeout {
        Some(timeout) => tokio::time::timeout(timeout, waiting).await.ok(),
        None => Some(waiting.await),
    };
    let lanes = progress.into_values().collect();
    Ok(match result.transpose()? {
        Some(Decided::Reached) => WaitOutcome::Reached { lanes, cursor },
        Some(Decided::EndedElsewhere) => WaitOutcome::EndedElsewhere { lanes, cursor },
        None => WaitOutcome::TimedOut { lanes, cursor },
    })
}

/// What the lanes' states decide already, if anything.
enum Decided {
    Reached,
    EndedElsewhere,
}

fn decided(progress: &BTreeMap<&str, LaneProgress>) -> Option<Decided> {
    if progress.values().any(LaneProgress::ended_elsewhere) {
        Some(Decided::EndedElsewhere)
    } else if progress.values().all(|lane| lane.reached) {
        Some(Decided::Reached)
    } else {
        None
    }
}

/// A lane's events so far, from its own log (none when it has none yet).
fn lane_log(dir: &StateDir, lane: &str) -> Result<Vec<LaneEvent>, WaitError> {
    let text = match std::fs::read_to_string(dir.lane(lane).join(EVENTS)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(WaitError::LaneLog {
                lane: lane.to_owned(),
                source,
            });
        }
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

#[cfg(test)]
mod tests;
