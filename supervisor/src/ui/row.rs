//! One lane row of the dashboard: the pool's typed board row ([`BoardLane`], the one
//! `clawpool board` prints) with the repository it is of, and what the dashboard draws from it,
//! read from the typed fields — its cells are the board table's own (`crate::cells`), so the
//! dashboard and the board never disagree.

use std::path::{Path, PathBuf};

use clawpool_lanes::state_file::{Escalation, ShownStatus};
use clawpool_lanes::{LaneStatus, StateView, WorkerStateDoc, wire_name};
use clawpool_pool::board::{BoardLane, LaneCost};

use super::lanes::LaneKey;
use crate::cells;

/// A lane of one of the repositories shown.
#[derive(Debug)]
pub struct LaneRow {
    /// Which lane it is.
    pub key: LaneKey,
    /// Its repository's top folder.
    pub repository: PathBuf,
    /// The pool's board row.
    pub lane: BoardLane,
}

impl LaneRow {
    /// Its state, when its record could be read.
    pub fn view(&self) -> Option<&StateView> {
        self.lane.state.as_ref().ok()
    }

    fn doc(&self) -> Option<&WorkerStateDoc> {
        self.view().map(|view| &view.doc)
    }

    /// The lane's name (its registry folder's).
    pub fn name(&self) -> &str {
        &self.key.name
    }

    /// Its worktree: as its record says, else as its registry entry does (empty when neither
    /// can be read).
    pub fn worktree(&self) -> &Path {
        match self.doc() {
            Some(doc) => Path::new(&doc.worktree),
            None => &self.lane.worktree,
        }
    }

    /// Its agent profile, when its record says.
    pub fn agent(&self) -> Option<&str> {
        self.doc().map(|doc| doc.agent.as_str())
    }

    /// The status shown; `None` when its record cannot be read (shown `unknown`).
    pub fn shown_status(&self) -> Option<ShownStatus> {
        self.view().map(|view| view.status)
    }

    /// The status's wire name: `running`, `supervisor_lost`, `unknown`, ….
    pub fn status(&self) -> String {
        cells::status(&self.lane)
    }

    /// The status with its subphase, failure class or `no_changes` outcome in braces.
    pub fn status_cell(&self) -> String {
        cells::status_cell(&self.lane)
    }

    /// When the lane entered its status (its last lane event, epoch s).
    pub fn in_state_since(&self) -> Option<u64> {
        self.doc()?.lane_event.as_ref().map(|event| event.timestamp)
    }

    /// When it last made progress (epoch s).
    pub fn progress_at(&self) -> Option<u64> {
        self.doc().map(|doc| doc.progress_at)
    }

    /// `fresh`, `stale -3`, …, or `-` when never checked.
    pub fn freshness_cell(&self) -> String {
        cells::freshness_cell(&self.lane)
    }

    /// Its green level's wire name, when it reached one.
    pub fn green_level(&self) -> Option<String> {
        self.doc()?.green_level.map(|level| wire_name(&level))
    }

    /// `+2`, `+2 dirty`, or `-` when unknown.
    pub fn commits_cell(&self) -> String {
        let board = &self.lane.board;
        match (board.commits_ahead, board.dirty) {
            (Some(ahead), Some(true)) => format!("+{ahead} dirty"),
            (Some(ahead), _) => format!("+{ahead}"),
            (None, _) => "-".into(),
        }
    }

    /// Its cost, as the board sums it.
    pub fn cost(&self) -> LaneCost {
        self.lane.cost()
    }

    /// Its cost as `$0.0123`, `?` or `-`.
    pub fn cost_cell(&self) -> String {
        cells::cost_cell(&self.lane)
    }

    /// What a person must do for it, when recovery handed it over.
    pub fn escalation(&self) -> Option<&Escalation> {
        self.doc()?.escalation.as_ref()
    }

    /// Its branch, when known.
    pub fn branch(&self) -> Option<&str> {
        self.doc()?.branch.as_deref()
    }

    /// The ref its branch was made from, when known.
    pub fn base_ref(&self) -> Option<&str> {
        self.doc()?.base.as_ref().map(|base| base.git_ref.as_str())
    }

    /// Why it failed or is blocked, in words, when its record says.
    pub fn failure_detail(&self) -> Option<&str> {
        self.doc()?.failure.as_ref()?.detail.as_deref()
    }

    /// The lane's status as written, unless a lost supervisor or an unreadable record hides
    /// it.
    fn lane_status(&self) -> Option<LaneStatus> {
        match self.shown_status()? {
            ShownStatus::Lane(status) => Some(status),
            ShownStatus::SupervisorLost => None,
        }
    }

    /// It waits for a person: blocked, or at a dialog.
    pub fn is_waiting(&self) -> bool {
        matches!(
            self.lane_status(),
            Some(
                LaneStatus::TrustRequired
                    | LaneStatus::ToolPermissionRequired
                    | LaneStatus::Blocked
            )
        )
    }

    /// It needs a person (the bell): blocked, or escalated.
    pub fn needs_person(&self) -> bool {
        self.lane_status() == Some(LaneStatus::Blocked) || self.escalation().is_some()
    }

    /// Whether the filter `needle` (lower case) lets it through: its name, agent or status
    /// contains it.
    pub fn matches(&self, needle: &str) -> bool {
        needle.is_empty()
            || [
                Some(self.name().to_owned()),
                self.agent().map(str::to_owned),
                Some(self.status()),
            ]
            .into_iter()
            .flatten()
            .any(|text| text.to_lowercase().contains(needle))
    }
}
