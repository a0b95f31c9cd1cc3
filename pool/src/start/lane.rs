//! One lane's start: under its own supervisor lock, taken before its worktree is made (so
//! `gc`, whatever `--force` says, never removes a lane being prepared), its worktree made or
//! reused, its registry entry written, a `--rerun` recorded, and its agent driven through the
//! handshake to the lane's end.

use std::path::PathBuf;
use std::sync::Arc;

use clawpool_lane::checks::LaneChecks;
use clawpool_lane::drive::{LaneJob, Start, Terminal, drive, session_name, transport_of};
use clawpool_lane::interrupt::Interrupt;
use clawpool_lane::registry::{RegisteredBase, RegistryEntry, lane_registry};
use clawpool_lanes::LaneState;
use clawpool_worktree::{Repo, prepare_lane_worktree};

use super::PlannedLane;
use super::earlier::record_rerun;
use crate::error::CommandError;
use crate::observer::{LaneNote, Notice, Observer};
use crate::registry::write_entry;

pub(super) async fn start_lane(
    repo: &Repo,
    lane: PlannedLane,
    terminal: Terminal,
    settings: clawpool_lane::handshake::Settings,
    observer: Arc<dyn Observer>,
    interrupt: Interrupt,
) -> Result<Option<LaneState>, CommandError> {
    let name = lane.spec.name.clone();
    let registry = lane_registry(repo, &name);
    // Held from before the worktree exists until the lane's last write (the driver takes it
    // over): `clawpool gc`, whatever `--force` says, never removes a lane someone holds.
    let lock =
        clawpool_lanes::state_file::SupervisorLock::hold(registry.dir()).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::WouldBlock => CommandError::invalid("lane_busy", e.to_string()),
                _ => CommandError::io("taking the lane's supervisor lock", e),
            }
        })?;
    let worktree_spec = lane.worktree.clone();
    let root = repo.root().to_owned();
    let prepared = tokio::task::spawn_blocking(move || {
        let repo = Repo::open(&root)?;
        prepare_lane_worktree(&repo, &worktree_spec)
    })
    .await
    .map_err(|e| CommandError::io("preparing a worktree", std::io::Error::other(e)))?
    .map_err(|e| CommandError {
        kind: "worktree_failed",
        message: e.to_string(),
        exit: 1,
    })?;
    if let Some(signal) = interrupt.received() {
        observer.lane(&name, LaneNote::NotStarted(signal));
        return Ok(None);
    }
    let dir = prepared.path().to_owned();
    let trusted = lane
        .roots
        .decide(&dir)
        .map(|d| d.is_trusted())
        .unwrap_or(false);
    std::fs::create_dir_all(registry.dir())
        .map_err(|e| CommandError::io("creating the lane's registry folder", e))?;
    let verify_spec = clawpool_lane::verify::LaneVerifySpec::from_lane(&lane.spec);
    let checks = LaneChecks {
        repo_root: repo.root().to_owned(),
        dir: dir.clone(),
        base: lane.worktree.base.clone(),
        known_base: Some(lane.base_sha.clone()),
        spec: verify_spec.clone(),
        log_dir: registry.verify_logs(),
        freshness: (&settings).into(),
        sandbox: None,
    };
    let entry = RegistryEntry {
        name: name.clone(),
        worktree: dir.clone(),
        branch: Some(prepared.branch().to_owned()),
        base: RegisteredBase {
            git_ref: Some(lane.worktree.base.clone()),
            sha: Some(lane.base_sha.clone()),
        },
        agent: lane.profile.name().to_owned(),
        prompt: Some(lane.spec.prompt.clone()),
        supervisor_pid: std::process::id(),
        verify: verify_spec,
        transport: Some(transport_of(&terminal, &session_name(&name))),
        permission_profile: lane.spec.permission_profile.clone(),
        sandbox: lane.sandbox.as_ref().map(|r| r.lane.clone()),
        bwrap: lane.sandbox.as_ref().map(|r| PathBuf::from(&r.bwrap)),
    };
    write_entry(&registry, &entry)
        .map_err(|e| CommandError::io("writing the lane's registry entry", e))?;
    // The user's index is what `ui --all` finds the repository by; a lane runs without it.
    if let Err(err) = crate::known_repos::add(repo) {
        observer.notice(Notice::IndexNotUpdated(err));
    }
    if let Some(earlier) = lane.rerun_of {
        let event = record_rerun(repo, &name, &registry, earlier)?;
        observer.event(&event);
    }
    let on_event = Arc::clone(&observer);
    let job = LaneJob {
        name: name.clone(),
        dir: dir.clone(),
        profile: lane.profile,
        trusted,
        settings,
        prompt: Some(lane.spec.prompt),
        terminal,
        env: Vec::new(),
        size: None,
        events_path: registry.events(),
        terminal_log: registry.dir().join("terminal.log"),
        branch: Some(prepared.branch().to_owned()),
        base: Some((lane.worktree.base.clone(), lane.base_sha.clone())),
        on_event: Box::new(move |event| on_event.event(event)),
        checks: Some(checks),
        policy: lane.policy,
        prices: lane.prices,
        budget_usd: lane.spec.budget_usd,
        interrupt,
        lock: Some(lock),
        sandbox: lane.sandbox,
    };
    let result = drive(job, Start::Spawn).await?;
    let state = result.final_state();
    if let (Some(err), Some(state)) = (&result.degraded, state) {
        observer.lane(
            &name,
            LaneNote::Unrecorded {
                state,
                error: err.to_string(),
            },
        );
    }
    Ok(state)
}
