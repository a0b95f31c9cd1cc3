//! The recovery ledger as it is stored in the state file (`recovery` in
//! `<worktree>/.claw/worker-state.json`; `docs/recovery.md`).
//!
//! This module owns only the *shape*: what a supervisor must write down so that a reader sees
//! every recovery attempt, and so that a supervisor that restarts (or adopts the lane) neither
//! loses nor repeats an attempt. The logic that fills it — deciding whether an attempt may run,
//! counting attempts in a window, restart backoff and intensity — lives in the
//! `clawpool-recovery` crate, which sits above this one.
//!
//! All times are Unix epoch **seconds**, as everywhere in the state file.

use serde::{Deserialize, Serialize};

/// A lane's recovery ledger: every attempt made (or refused) to heal the lane, and the restart
/// bookkeeping. Empty `entries` means *no recovery attempted*; an entry in state
/// [`AttemptState::Exhausted`] means *recovery exhausted* for its recipe. The two are never
/// the same thing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryLedger {
    /// Every attempt, oldest first. Entries are updated in place as an attempt moves from
    /// `queued` to `running` to its end; they are never removed.
    #[serde(default)]
    pub entries: Vec<LedgerEntry>,
    /// The worker-restart bookkeeping (backoff and intensity), so that a supervisor restart
    /// continues the same sequence.
    #[serde(default)]
    pub restart: RestartRecord,
}

/// One recovery attempt (or one refusal because the recipe's attempts are used up).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The recipe (`restart_crashed_worker`, `interrupt_and_nudge`, …).
    pub recipe: String,
    /// What set it off: the trigger's name (`worker_exited`, `stalled`, …), or `operator` for a
    /// recipe run by hand.
    pub trigger: String,
    /// The attempt's number for this recipe on this lane, from 1. For an `exhausted` entry:
    /// the number the refused attempt would have had.
    pub attempt: u32,
    /// Where the attempt is.
    pub state: AttemptState,
    /// Who asked for it.
    #[serde(default)]
    pub origin: AttemptOrigin,
    /// When it was queued (or, for `exhausted`, refused).
    pub queued_at: u64,
    /// When its first step started; `null` while queued.
    pub started_at: Option<u64>,
    /// When it ended (`succeeded`, `failed`, `exhausted`); `null` before.
    pub finished_at: Option<u64>,
    /// One line: what happened (the step that healed the lane, why it failed, or why the
    /// recipe is exhausted); `null` before the end.
    pub result: Option<String>,
}

/// Where a recovery attempt is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptState {
    /// Decided, not started yet (e.g. waiting out a restart backoff).
    Queued,
    /// Its steps are being carried out.
    Running,
    /// A check step saw the lane heal.
    Succeeded,
    /// Its steps ran out without the lane healing, or a step could not be carried out.
    Failed,
    /// Refused: the recipe's attempts in its window are used up. Sticky until an operator runs
    /// the recipe by hand.
    Exhausted,
}

impl AttemptState {
    /// `succeeded`, `failed` or `exhausted`: the entry will not change again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            AttemptState::Succeeded | AttemptState::Failed | AttemptState::Exhausted
        )
    }
}

/// Who asked for a recovery attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOrigin {
    /// A policy rule (automatic recovery).
    #[default]
    Policy,
    /// An operator (`clawpool recover LANE --recipe NAME`). Not limited by the recipe's
    /// attempts, and it lifts the recipe's exhaustion.
    Operator,
}

/// The worker-restart bookkeeping: what a supervisor needs to continue the backoff sequence and
/// the restart-intensity count after it restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartRecord {
    /// When each automatic restart was decided (epoch s), oldest first; only those still
    /// inside the intensity window are kept.
    #[serde(default)]
    pub restarts: Vec<u64>,
    /// Restarts since the worker was last healthy for long enough: the backoff exponent.
    #[serde(default)]
    pub consecutive: u32,
    /// Since when the current worker has been healthy (reached its input line or working);
    /// `null` while it is not.
    #[serde(default)]
    pub healthy_since: Option<u64>,
    /// A restart was decided and is due at this time (epoch s) but was not carried out yet.
    /// A supervisor that takes the lane over carries it out instead of deciding again.
    #[serde(default)]
    pub pending_until: Option<u64>,
    /// When the restart intensity was exceeded (epoch s). Sticky: no automatic restart
    /// happens until an operator restarts or recovers the lane.
    #[serde(default)]
    pub exhausted_at: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_round_trips_in_snake_case() {
        let ledger = RecoveryLedger {
            entries: vec![LedgerEntry {
                recipe: "restart_crashed_worker".into(),
                trigger: "worker_exited".into(),
                attempt: 1,
                state: AttemptState::Succeeded,
                origin: AttemptOrigin::Policy,
                queued_at: 100,
                started_at: Some(102),
                finished_at: Some(130),
                result: Some("worker running again".into()),
            }],
            restart: RestartRecord {
                restarts: vec![100],
                consecutive: 1,
                healthy_since: Some(125),
                pending_until: None,
                exhausted_at: None,
            },
        };
        let json = serde_json::to_value(&ledger).expect("serialises");
        assert_eq!(json["entries"][0]["state"], "succeeded");
        assert_eq!(json["entries"][0]["origin"], "policy");
        assert_eq!(json["restart"]["pending_until"], serde_json::Value::Null);
        let back: RecoveryLedger = serde_json::from_value(json).expect("parses");
        assert_eq!(back, ledger);
    }

    #[test]
    fn a_missing_ledger_reads_as_no_recovery_attempted() {
        let ledger: RecoveryLedger = serde_json::from_str("{}").expect("parses");
        assert!(ledger.entries.is_empty());
        assert_eq!(ledger.restart, RestartRecord::default());
        assert!(AttemptState::Exhausted.is_final());
        assert!(!AttemptState::Running.is_final());
    }
}
