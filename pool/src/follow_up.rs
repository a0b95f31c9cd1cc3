//! A send to a lane that ended (`clawpool send`, the MCP `send_to_lane`): a follow-up. A
//! stopped or finished lane has no process to take the text, so the process that runs the
//! request becomes that process (the repository's daemon, when the asker handed it over;
//! `OperateReply::HandOver`) — it takes the lane's own
//! supervisor lock (refused while anyone else holds it), starts the agent again with the
//! profile's resume arguments (`drive::Start::Resume`), and drives the lane to its new end,
//! the text typed and verified as a new turn of the same session, never the lane's task again.
//!
//! Which lanes: those whose record says `stopped` or `finished`. A failed lane is left
//! to `restart`/`spawn --rerun`: its session may be what failed. A lane whose recorded cost is
//! past its budget is refused (`over_budget`): no follow-up spends past it.

use std::path::Path;

use clawpool_lane::checks::LaneChecks;
use clawpool_lane::drive::{LaneJob, LaneResult, Start, drive};
use clawpool_lane::interrupt::Interrupt;
use clawpool_lane::registry::lane_registry;
use clawpool_lanes::{LaneStatus, WorkerStateDoc};
use clawpool_worktree::Repo;

use crate::config::Loaded;
use crate::error::CommandError;
use crate::lane_lookup::FoundLane;
use crate::start::terminal_for;

/// The lane's recorded state when a follow-up may start it again: stopped or finished, with
/// no supervisor driving it. `None` for a lane in any other state.
pub(crate) fn ended_lane(lane: &FoundLane) -> Option<WorkerStateDoc> {
    let doc = lane.state().ok()?;
    matches!(doc.status, LaneStatus::Stopped | LaneStatus::Finished).then_some(doc)
}

/// Starts the ended lane's agent again with its resume arguments and drives the lane, `text`
/// its new turn, until it ends again (or, when `stops_on_signals`, SIGINT/SIGTERM stop it, as
/// they stop `run`).
pub(crate) async fn run(
    lane: &FoundLane,
    doc: WorkerStateDoc,
    text: String,
    loaded: &Loaded,
    stops_on_signals: bool,
) -> Result<LaneResult, CommandError> {
    if let (Some(cost), Some(budget)) = (doc.cost_usd, doc.budget_usd)
        && cost > budget
    {
        // The follow-up would spend past the lane's budget: nothing is started.
        return Err(CommandError::invalid(
            "over_budget",
            format!(
                "lane {} is over its budget: it cost {}, past its budget of {}; nothing is sent \
                 to it (a new packet with a larger `budget_usd`, or `spawn --rerun`, starts it \
                 again)",
                doc.lane,
                clawpool_lanes::payload::Usd(cost),
                clawpool_lanes::payload::Usd(budget)
            ),
        ));
    }
    let profile = loaded
        .profiles
        .get(&doc.agent)
        .map_err(|e| CommandError::invalid("unknown_agent", e.to_string()))?
        .clone();
    if profile.manifest.launch.resume_args.is_empty() {
        return Err(CommandError::invalid(
            "not_resumable",
            format!(
                "lane {}: the {} profile has no resume arguments, so its session cannot go on; \
                 `clawpool spawn --rerun` starts the task afresh",
                doc.lane,
                profile.name()
            ),
        ));
    }
    let dir = lane.dir.clone();
    let repo = Repo::open(&dir).ok();
    let registry = repo.as_ref().map(|repo| lane_registry(repo, &doc.lane));
    let entry = registry.as_ref().and_then(|r| r.entry().ok());
    let transport = doc.transport.kind.into();
    let terminal = match &repo {
        Some(repo) => terminal_for(repo, transport).await?,
        None => clawpool_lane::drive::Terminal::Pty,
    };
    let checks = match (&repo, &registry, &entry) {
        (Some(repo), Some(registry), Some(entry)) => Some(LaneChecks::from_registry(
            entry,
            repo,
            &dir,
            registry,
            (&loaded.settings).into(),
        )),
        _ => None,
    };
    let trusted = loaded
        .roots
        .decide(&dir)
        .map(|d| d.is_trusted())
        .unwrap_or(false);
    let terminal_log = terminal_log(&lane.events);
    let interrupt = if stops_on_signals {
        Interrupt::listen().map_err(|e| CommandError::io("listening for SIGINT/SIGTERM", e))?
    } else {
        Interrupt::never()
    };
    let job = LaneJob {
        checks,
        policy: std::sync::Arc::clone(&loaded.policy),
        prices: std::sync::Arc::clone(&loaded.prices),
        budget_usd: None,
        name: doc.lane.clone(),
        dir,
        profile: std::sync::Arc::new(profile),
        trusted,
        settings: loaded.settings,
        prompt: Some(text),
        terminal,
        env: Vec::new(),
        size: None,
        events_path: lane.events.clone(),
        terminal_log,
        branch: doc.branch.clone(),
        base: doc.base.clone().map(|b| (b.git_ref, b.sha)),
        on_event: Box::new(|_| {}),
        interrupt,
        lock: None,
        // Resumed in the sandbox its first supervisor made, as its registry entry records it.
        sandbox: entry.as_ref().and_then(|e| e.sandbox_request()),
    };
    let closing = job.terminal.clone();
    let result = drive(job, Start::Resume { doc: Box::new(doc) }).await;
    // The lane's tmux server goes with its last lane.
    closing.close_if_unused().await;
    Ok(result?)
}

/// The raw terminal log beside the lane's event log.
fn terminal_log(events: &Path) -> std::path::PathBuf {
    events.with_file_name("terminal.log")
}
