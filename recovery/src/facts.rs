//! The facts about a lane that policy rules read, and the names they are written with.
//!
//! This module owns [`LaneFacts`] — a plain snapshot the supervisor fills from the lane's state
//! file, its recovery ledger, its verification and its branch freshness — and the small
//! vocabularies that appear in it ([`Green`], [`Freshness`], [`RecoveryStatus`]), with
//! their wire names. It also lists every lane status, blocked subphase and failure class by
//! name, so that configuration errors can say what would have been accepted.

use std::collections::BTreeMap;
use std::fmt;

use clawpool_lanes::{BlockedSubphase, FailureClass, LaneStatus};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::recipe::Trigger;

/// The green levels: the state file's, one type for every crate.
pub use clawpool_lanes::state_file::GreenLevel;

/// How far verification has gone green for the lane's current work, as policy rules read it:
/// `none`, or one of the state file's [`GreenLevel`]s, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Green(pub Option<GreenLevel>);

impl Green {
    /// Nothing verified (or the last verification failed).
    pub const NONE: Green = Green(None);

    /// Every value, lowest first.
    pub const ALL: [Green; 5] = [
        Green(None),
        Green(Some(GreenLevel::Targeted)),
        Green(Some(GreenLevel::Package)),
        Green(Some(GreenLevel::Workspace)),
        Green(Some(GreenLevel::MergeReady)),
    ];

    /// The wire name: `none`, or the level's.
    pub fn as_str(self) -> &'static str {
        self.0.map_or("none", GreenLevel::as_str)
    }
}

impl From<GreenLevel> for Green {
    fn from(level: GreenLevel) -> Self {
        Green(Some(level))
    }
}

impl Serialize for Green {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Green {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        match name.as_str() {
            "none" => Ok(Green(None)),
            level => GreenLevel::parse(level)
                .map(Green::from)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown green level {level:?}"))),
        }
    }
}

/// How the lane's branch stands against its base: the freshness verdict the state file records
/// (one type, from `clawpool-worktree`).
pub use clawpool_lanes::state_file::FreshnessState as Freshness;

/// Where a lane's recovery stands, as its ledger says (`docs/recovery.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryStatus {
    /// No recovery was ever attempted on the lane.
    None,
    /// An attempt is queued or running.
    Active,
    /// The last attempt healed the lane.
    Succeeded,
    /// The last attempt did not heal the lane; the recipe may still have attempts left.
    Failed,
    /// The last word is a refusal: the recipe's attempts are used up.
    Exhausted,
}

impl RecoveryStatus {
    /// Every recovery status.
    pub const ALL: [RecoveryStatus; 5] = [
        RecoveryStatus::None,
        RecoveryStatus::Active,
        RecoveryStatus::Succeeded,
        RecoveryStatus::Failed,
        RecoveryStatus::Exhausted,
    ];
}

/// Every lane status.
pub const ALL_STATUSES: [LaneStatus; 10] = [
    LaneStatus::Spawning,
    LaneStatus::TrustRequired,
    LaneStatus::ToolPermissionRequired,
    LaneStatus::ReadyForPrompt,
    LaneStatus::PromptAccepted,
    LaneStatus::Running,
    LaneStatus::Blocked,
    LaneStatus::Finished,
    LaneStatus::Stopped,
    LaneStatus::Failed,
];

/// Every blocked subphase.
pub const ALL_SUBPHASES: [BlockedSubphase; 10] = [
    BlockedSubphase::TrustPrompt,
    BlockedSubphase::ToolPermission,
    BlockedSubphase::BootDialog,
    BlockedSubphase::UnknownDialog,
    BlockedSubphase::PromptDelivery,
    BlockedSubphase::Provider,
    BlockedSubphase::BranchFreshness,
    BlockedSubphase::TestHang,
    BlockedSubphase::Stalled,
    BlockedSubphase::Budget,
];

/// Every failure class.
pub const ALL_FAILURE_CLASSES: [FailureClass; 14] = [
    FailureClass::PromptDelivery,
    FailureClass::TrustGate,
    FailureClass::ToolPermission,
    FailureClass::BootDialog,
    FailureClass::Provider,
    FailureClass::BranchDivergence,
    FailureClass::Compile,
    FailureClass::Test,
    FailureClass::TestHang,
    FailureClass::WorkerCrashed,
    FailureClass::WorkerLost,
    FailureClass::Stalled,
    FailureClass::Infra,
    FailureClass::Budget,
];

/// The snake_case name a unit variant has on the wire (`worker_crashed`, `blocked`, …).
pub use clawpool_lanes::wire_name;

/// The value whose wire name is `name`, if any.
pub fn from_wire_name<T: DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// `a, b, c`: the wire names of `values`, for error messages.
pub fn wire_names<T: Serialize>(values: &[T]) -> String {
    values.iter().map(wire_name).collect::<Vec<_>>().join(", ")
}

macro_rules! display_as_wire_name {
    ($($ty:ty),*) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&wire_name(self))
            }
        }
    )*};
}

display_as_wire_name!(Green, RecoveryStatus);

/// What policy rules know about a lane when they are evaluated: a plain snapshot the
/// supervisor fills from the state file, the recovery ledger, verification and freshness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneFacts {
    /// The lane's name.
    pub lane: String,
    /// Its status.
    pub status: LaneStatus,
    /// Its subphase, when blocked.
    pub subphase: Option<BlockedSubphase>,
    /// Its failure class: the state file's (for a blocked lane, the class its subphase heads
    /// for).
    pub failure: Option<FailureClass>,
    /// What recovery can heal in it ([`Trigger::of`]), if anything.
    pub trigger: Option<Trigger>,
    /// How far verification has gone green.
    pub green: Green,
    /// How its branch stands against its base.
    pub freshness: Freshness,
    /// Attempts per recipe since an operator last ran that recipe by hand
    /// ([`Ledger::attempt_counts`](crate::ledger::Ledger::attempt_counts)); a recipe not in the
    /// map had none.
    pub attempts: BTreeMap<String, u32>,
    /// Where its recovery stands.
    pub recovery: RecoveryStatus,
    /// Seconds since it entered its current status (and subphase).
    pub seconds_in_state: u64,
    /// Seconds since it last made meaningful progress.
    pub seconds_since_progress: u64,
}

impl LaneFacts {
    /// Facts for a lane in `status`, with nothing else known: no subphase, failure or
    /// trigger, nothing green, freshness unknown, no recovery, no time elapsed.
    pub fn new(lane: impl Into<String>, status: LaneStatus) -> Self {
        Self {
            lane: lane.into(),
            status,
            subphase: None,
            failure: None,
            trigger: None,
            green: Green::NONE,
            freshness: Freshness::Unknown,
            attempts: BTreeMap::new(),
            recovery: RecoveryStatus::None,
            seconds_in_state: 0,
            seconds_since_progress: 0,
        }
    }

    /// Attempts of `recipe` (0 when none).
    pub fn attempts_of(&self, recipe: &str) -> u32 {
        self.attempts.get(recipe).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails to compile when lanes gains a status, subphase or class the lists above miss.
    fn listed(status: LaneStatus, subphase: BlockedSubphase, class: FailureClass) -> [bool; 3] {
        let s = match status {
            LaneStatus::Spawning
            | LaneStatus::TrustRequired
            | LaneStatus::ToolPermissionRequired
            | LaneStatus::ReadyForPrompt
            | LaneStatus::PromptAccepted
            | LaneStatus::Running
            | LaneStatus::Blocked
            | LaneStatus::Finished
            | LaneStatus::Stopped
            | LaneStatus::Failed => ALL_STATUSES.contains(&status),
        };
        let p = match subphase {
            BlockedSubphase::TrustPrompt
            | BlockedSubphase::ToolPermission
            | BlockedSubphase::BootDialog
            | BlockedSubphase::UnknownDialog
            | BlockedSubphase::PromptDelivery
            | BlockedSubphase::Provider
            | BlockedSubphase::BranchFreshness
            | BlockedSubphase::TestHang
            | BlockedSubphase::Stalled
            | BlockedSubphase::Budget => ALL_SUBPHASES.contains(&subphase),
        };
        let c = match class {
            FailureClass::PromptDelivery
            | FailureClass::TrustGate
            | FailureClass::ToolPermission
            | FailureClass::BootDialog
            | FailureClass::Provider
            | FailureClass::BranchDivergence
            | FailureClass::Compile
            | FailureClass::Test
            | FailureClass::TestHang
            | FailureClass::WorkerCrashed
            | FailureClass::WorkerLost
            | FailureClass::Stalled
            | FailureClass::Infra
            | FailureClass::Budget => ALL_FAILURE_CLASSES.contains(&class),
        };
        [s, p, c]
    }

    #[test]
    fn every_name_round_trips() {
        for status in ALL_STATUSES {
            assert_eq!(from_wire_name(&wire_name(&status)), Some(status));
        }
        for subphase in ALL_SUBPHASES {
            assert_eq!(from_wire_name(&wire_name(&subphase)), Some(subphase));
            assert_eq!(
                listed(LaneStatus::Blocked, subphase, FailureClass::Infra),
                [true; 3]
            );
        }
        for class in ALL_FAILURE_CLASSES {
            assert_eq!(from_wire_name(&wire_name(&class)), Some(class));
            assert_eq!(
                listed(LaneStatus::Failed, BlockedSubphase::TestHang, class),
                [true; 3]
            );
        }
        for green in Green::ALL {
            assert_eq!(from_wire_name(&green.to_string()), Some(green));
        }
        for freshness in Freshness::ALL {
            assert_eq!(from_wire_name(&freshness.to_string()), Some(freshness));
        }
        for status in RecoveryStatus::ALL {
            assert_eq!(from_wire_name(&status.to_string()), Some(status));
        }
        assert_eq!(GreenLevel::MergeReady.to_string(), "merge_ready");
        assert_eq!(from_wire_name::<FailureClass>("worker_crash"), None);
        assert!(wire_names(&ALL_FAILURE_CLASSES).starts_with("prompt_delivery, trust_gate"));
    }

    #[test]
    fn green_levels_are_ordered() {
        assert!(Green::NONE < Green::from(GreenLevel::Targeted));
        assert!(Green::from(GreenLevel::Workspace) < Green::from(GreenLevel::MergeReady));
        for green in Green::ALL {
            assert_eq!(from_wire_name::<Green>(&wire_name(&green)), Some(green));
        }
        let facts = LaneFacts::new("a", LaneStatus::Running);
        assert_eq!(facts.attempts_of("interrupt_and_nudge"), 0);
    }
}
