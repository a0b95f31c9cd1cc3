//! A state file as a reader shows it: ages recomputed, a lost supervisor made visible.

use std::path::Path;

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::LaneStatus;

use super::{Liveness, SUPERVISOR_LOST_AFTER, WorkerStateDoc, probe};

/// The status a reader shows for a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShownStatus {
    /// The lane's own status, as written.
    Lane(LaneStatus),
    /// The lane is not finished or failed, and its supervisor is gone.
    SupervisorLost,
}

impl ShownStatus {
    /// The wire name: the lane status's, or `supervisor_lost`.
    pub fn name(self) -> String {
        match self {
            ShownStatus::Lane(status) => crate::state::wire_name(&status),
            ShownStatus::SupervisorLost => "supervisor_lost".to_owned(),
        }
    }
}

impl Serialize for ShownStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

/// A state file as of a moment: what `clawpool state LANE` prints.
#[derive(Debug, Clone, PartialEq)]
pub struct StateView {
    /// The document, with `seconds_since_update` recomputed.
    pub doc: WorkerStateDoc,
    /// The status to show: the lane's, or `supervisor_lost`.
    pub status: ShownStatus,
    /// Whether the supervisor is gone: its lock is free, or (a lane without a lock) its
    /// last write is older than [`SUPERVISOR_LOST_AFTER`].
    pub supervisor_lost: bool,
    /// Seconds since the supervisor last wrote the file.
    pub seconds_since_heartbeat: u64,
}

/// The state document `doc`, read from the lane's record folder `record`, as of `now` (epoch s).
///
/// - `seconds_since_update` becomes `now - progress_at` (0 if `progress_at` is in the future).
/// - The supervisor is lost when the lane's supervisor lock (in `record`, never in the
///   worktree, where the agent could delete it) is free, or, for a lane without one, when `supervisor.heartbeat_at` is more than
///   [`SUPERVISOR_LOST_AFTER`] before `now`. Then a lane that is not `finished` or `failed`
///   shows `status` `supervisor_lost` (and `is_ready` false); a finished or failed lane keeps
///   its status, since nothing more was going to happen to it.
pub fn with_ages(doc: &WorkerStateDoc, record: &Path, now: u64) -> StateView {
    StateView::of(doc.clone(), record, now)
}

impl StateView {
    /// [`with_ages`] of a document the caller no longer needs (no copy of it is made).
    pub fn of(doc: WorkerStateDoc, record: &Path, now: u64) -> StateView {
        StateView::probed(doc, probe(record), now)
    }

    /// [`StateView::of`] with the lane's supervisor lock already probed (`liveness`): a reader
    /// that needs the liveness before it reads the record (the board's kept rows) probes once.
    pub fn probed(mut doc: WorkerStateDoc, liveness: Liveness, now: u64) -> StateView {
        doc.seconds_since_update = now.saturating_sub(doc.progress_at);
        let seconds_since_heartbeat = now.saturating_sub(doc.supervisor.heartbeat_at);
        let supervisor_lost = supervisor_lost(liveness, seconds_since_heartbeat);
        let status =
            if supervisor_lost && !doc.status.is_terminal() && !held_by_checks(doc.lane_state()) {
                ShownStatus::SupervisorLost
            } else {
                ShownStatus::Lane(doc.status)
            };
        StateView {
            doc,
            status,
            supervisor_lost,
            seconds_since_heartbeat,
        }
    }
}

/// Whether a lane's supervisor is gone: its lock is free, or, with no lock to probe, its last
/// write is older than [`SUPERVISOR_LOST_AFTER`].
pub fn supervisor_lost(liveness: Liveness, seconds_since_heartbeat: u64) -> bool {
    match liveness {
        Liveness::Alive => false,
        Liveness::Gone => true,
        Liveness::Unknown => seconds_since_heartbeat > SUPERVISOR_LOST_AFTER.as_secs(),
    }
}

/// A lane its checks hold for a person (`blocked{branch_freshness}`: a base that could not be
/// brought in; `blocked{test_hang}`: a verification command that hung). Only a lane whose worker
/// is no longer driven is moved there (while one is, its machine owns the state), so no
/// supervisor is missing from it: a manual `verify` or `merge-forward` after the supervisor
/// ended leaves it so, and it reads as what it is, never `supervisor_lost`.
fn held_by_checks(state: crate::LaneState) -> bool {
    matches!(
        state,
        crate::LaneState::Blocked(
            crate::BlockedSubphase::BranchFreshness | crate::BlockedSubphase::TestHang
        )
    )
}

impl StateView {
    /// The JSON document: the state file with `seconds_since_update` recomputed, `lane_status`
    /// as shown (the lane's, or `supervisor_lost`), `last_status` (the lane's own status,
    /// always present), `is_ready` false when the status shown is `supervisor_lost`, and
    /// `supervisor.lost` and `supervisor.seconds_since_heartbeat` added. `status` stays
    /// claw-code's, as in the file.
    pub fn to_json(&self) -> Value {
        let mut value = serde_json::to_value(&self.doc).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.insert("last_status".into(), Value::String(self.doc.status_str()));
            object.insert("lane_status".into(), Value::String(self.status.name()));
            if self.status == ShownStatus::SupervisorLost {
                object.insert("is_ready".into(), Value::Bool(false));
            }
            if let Some(supervisor) = object.get_mut("supervisor").and_then(Value::as_object_mut) {
                supervisor.insert("lost".into(), Value::Bool(self.supervisor_lost));
                supervisor.insert(
                    "seconds_since_heartbeat".into(),
                    Value::from(self.seconds_since_heartbeat),
                );
            }
        }
        value
    }
}

impl Serialize for StateView {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl WorkerStateDoc {
    fn status_str(&self) -> String {
        crate::state::wire_name(&self.status)
    }
}
