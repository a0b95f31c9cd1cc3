//! What a lane's board row says in a table cell, read from the pool's typed row
//! ([`BoardLane`]): `clawpool board`'s table and the dashboard draw the same texts from the
//! same fields, so they never disagree (and neither reads a document back by key).

use clawpool_lanes::payload::LaneOutcome;
use clawpool_lanes::state_file::ShownStatus;
use clawpool_lanes::{WorkerStateDoc, wire_name};
use clawpool_pool::board::{BoardLane, LaneCost};
use clawpool_worktree::{FreshnessState, HeadState};

/// The row's state document, when its record could be read.
pub fn doc(lane: &BoardLane) -> Option<&WorkerStateDoc> {
    lane.state.as_ref().ok().map(|view| &view.doc)
}

/// The status's wire name: `running`, `supervisor_lost`, `unknown` (a record that cannot be
/// read), ….
pub fn status(lane: &BoardLane) -> String {
    lane.state.as_ref().map_or_else(
        |_| "unknown".to_owned(),
        |view| ShownStatus::name(view.status),
    )
}

/// The status with its subphase, failure class or `no_changes` outcome in braces:
/// `blocked{trust}`, `failed{worker_crashed}`, `running`.
pub fn status_cell(lane: &BoardLane) -> String {
    let status = status(lane);
    let Some(doc) = doc(lane) else {
        return status;
    };
    let detail = match (&doc.blocked, &doc.failure, doc.outcome) {
        (Some(blocked), _, _) => Some(wire_name(&blocked.subphase)),
        (None, Some(failure), _) => Some(wire_name(&failure.class)),
        (None, None, Some(LaneOutcome::NoChanges)) => Some(wire_name(&LaneOutcome::NoChanges)),
        _ => None,
    };
    match detail {
        Some(detail) => format!("{status}{{{detail}}}"),
        None => status,
    }
}

/// `fresh`, `stale -3`, `diverged`, `base_rewound +1` (the commits the branch would bring
/// back), `unknown`, the paused git operation, or `-` when never checked.
pub fn freshness_cell(lane: &BoardLane) -> String {
    let Some(doc) = doc(lane) else {
        return "-".into();
    };
    if let Some(operation) = &doc.git_operation {
        return format!("{} in progress", wire_name(&operation.kind));
    }
    if let Some(HeadState::Detached { sha }) = &doc.head {
        return format!("detached {}", &sha[..sha.len().min(8)]);
    }
    let Some(freshness) = &doc.freshness else {
        return "-".into();
    };
    match (freshness.state, freshness.behind, freshness.dropped) {
        (FreshnessState::Stale, Some(behind), _) => format!("stale -{behind}"),
        (FreshnessState::BaseRewound, _, Some(dropped)) => format!("base_rewound +{dropped}"),
        (state, _, _) => state.as_str().to_owned(),
    }
}

/// Its cost as `$0.0123`; `?` when its agent reported usage that could not be priced, `-`
/// when it reported none (unknown, never zero).
pub fn cost_cell(lane: &BoardLane) -> String {
    match lane.cost() {
        LaneCost::Priced(usd) => format!("${usd:.4}"),
        LaneCost::Unpriced => "?".into(),
        LaneCost::None => "-".into(),
    }
}

/// Its tokens as its agent reported them: `IN/OUT` in total, `-` when it reported none.
pub fn tokens_cell(lane: &BoardLane) -> String {
    doc(lane).and_then(|doc| doc.usage.as_ref()).map_or_else(
        || "-".into(),
        |usage| format!("{}/{}", usage.total.input, usage.total.output),
    )
}

/// Its permission questions as `allowed/denied/asked`, `-` when it had none.
pub fn permissions_cell(lane: &BoardLane) -> String {
    let counts = &lane.board.permissions;
    match (counts.allowed, counts.denied, counts.asked) {
        (0, 0, 0) => "-".into(),
        (allowed, denied, asked) => format!("{allowed}/{denied}/{asked}"),
    }
}

/// Its sandbox: `workspace`, `workspace/no-net` without a network, `off` when its agent runs
/// unconfined.
pub fn sandbox_cell(lane: &BoardLane) -> String {
    match doc(lane).and_then(|doc| doc.sandbox.as_ref()) {
        Some(sandbox) if sandbox.network == clawpool_lanes::sandbox::SandboxNetwork::None => {
            format!("{}/no-net", wire_name(&sandbox.mode))
        }
        Some(sandbox) => wire_name(&sandbox.mode),
        None => "off".into(),
    }
}
