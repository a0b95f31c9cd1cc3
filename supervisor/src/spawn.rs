//! `clawpool spawn`: from one task packet to N supervised lanes, each in its own git worktree.
//!
//! Everything that can be checked is checked before anything is created: the packet (every
//! problem with its JSON path), each lane's agent and its binary, each lane's base branch, the
//! prompts. Then lanes start, at most `--concurrency` at once; each gets its worktree (made or
//! reused, serialised per repository by the worktree crate) under the lane's supervisor lock,
//! taken before the worktree is made, a registry entry in the common git dir
//! (`clawpool/lanes/<name>/`: `lane.json`, `state.json`, `events.jsonl`, `terminal.log`), its
//! state published in its worktree, and its agent driven through the handshake. One supervisor per
//! repository: a lock in the common git dir.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawpool_lane::handshake::check_prompt;
use clawpool_lanes::payload::{Payload, PreviousRun, Rerun};
use clawpool_lanes::{
    LaneEvent, LaneSpec, LaneState, PacketContext, PacketError, PacketErrors, check_packet,
};
use clawpool_pty::{TmuxConfig, TmuxServer};
use clawpool_worktree::{LaneWorktreeSpec, Repo, prepare_lane_worktree};
use serde_json::json;
use tokio::sync::Semaphore;

pub use clawpool_pool::tmux::{tmux_attach_command, tmux_socket_name};

use crate::cli::{AdoptArgs, OutputFormat, SpawnArgs, TransportKind};
use crate::loaded::Loaded;
use crate::output::{CommandError, EXIT_INVALID_INPUT};
use crate::progress::Progress;
use crate::run_lane::print_event;
use clawpool_lane::checks::LaneChecks;
use clawpool_lane::drive::{
    LaneJob, Start, Terminal, drive, preflight, session_name, transport_of,
};
use clawpool_lane::interrupt::Interrupt;
use clawpool_lane::registry::{RegisteredBase, RegistryEntry, lane_registry};

/// Lanes started at once when `--concurrency` is not given.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// One lane after validation: everything needed to start it.
pub struct PlannedLane {
    /// The lane as the packet gave it.
    pub spec: LaneSpec,
    profile: std::sync::Arc<clawpool_agents::profiles::Profile>,
    worktree: LaneWorktreeSpec,
    base_sha: String,
    /// The configured roots plus the lane's own; decided once the worktree exists.
    roots: clawpool_agents::trust::TrustRoots,
    /// The recovery policy.
    policy: std::sync::Arc<clawpool_recovery::Policy>,
    /// The prices the lane's usage is priced with.
    prices: std::sync::Arc<clawpool_lanes::cost::PriceTable>,
    /// The earlier run `--rerun` runs this lane again after (finished, or removed by gc).
    rerun_of: Option<Skipped>,
    /// The sandbox its agent runs in, its bubblewrap already found and tried.
    sandbox: Option<clawpool_lane::sandbox::SandboxRequest>,
}

/// Why a lane of the packet is not started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    /// Its last run finished (a close-out included): its prompt is not typed again.
    Finished,
    /// A person stopped its last run (`clawpool stop`): a spawn does not undo that by typing
    /// the task again; `clawpool send` continues the lane's session.
    Stopped,
    /// `clawpool gc` removed its worktree and registry entry: it is not re-created.
    RemovedByGc,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skipped::Finished => "finished",
            Skipped::Stopped => "stopped (`clawpool send` continues it)",
            Skipped::RemovedByGc => "removed by gc",
        })
    }
}

/// A lane of the packet left as an earlier run left it.
#[derive(Debug, Clone)]
pub struct SkippedLane {
    /// The lane's name.
    pub name: String,
    /// Why it was not started.
    pub why: Skipped,
    /// Its state as its state file has it (none for a lane gc removed).
    pub state: Option<LaneState>,
}

impl SkippedLane {
    /// `{"lane", "state", "skipped"}`, as spawn's final document lists it.
    pub fn to_json(&self) -> serde_json::Value {
        json!({"lane": self.name, "state": self.state, "skipped": self.why})
    }
}

/// What an earlier run left of lane `name` that keeps it from starting again: a registry
/// entry whose state file says finished or stopped, or gc's marker with no registry entry.
fn earlier_run(repo: &Repo, name: &str) -> Option<(Skipped, Option<LaneState>)> {
    let Ok(entry) = lane_registry(repo, name).entry() else {
        return repo
            .state_dir()
            .removed(name)
            .exists()
            .then_some((Skipped::RemovedByGc, None));
    };
    let doc =
        clawpool_lanes::read_lane_record(lane_registry(repo, name).dir(), &entry.worktree).ok()?;
    let why = match doc.status {
        clawpool_lanes::LaneStatus::Finished => Skipped::Finished,
        clawpool_lanes::LaneStatus::Stopped => Skipped::Stopped,
        _ => return None,
    };
    Some((why, Some(doc.lane_state())))
}

/// Sorts out the lanes an earlier run already dealt with: a finished lane, one a person
/// stopped, and one `gc` removed, are skipped; with `rerun` they run again (a fresh run of the task, recorded as
/// `lane.rerun`). Every other lane (never run, failed, or not ended) starts as before.
pub fn leave_earlier_runs(
    repo: &Repo,
    lanes: Vec<PlannedLane>,
    rerun: bool,
) -> (Vec<PlannedLane>, Vec<SkippedLane>) {
    let mut to_start = Vec::new();
    let mut skipped = Vec::new();
    for mut lane in lanes {
        match earlier_run(repo, &lane.spec.name) {
            Some((why, _)) if rerun => {
                lane.rerun_of = Some(why);
                to_start.push(lane);
            }
            Some((why, state)) => skipped.push(SkippedLane {
                name: lane.spec.name.clone(),
                why,
                state,
            }),
            None => to_start.push(lane),
        }
    }
    (to_start, skipped)
}

/// Reads and validates a packet against the repository and configuration: every problem at
/// once (the packet's own, then each lane's against the repository), nothing created.
pub fn prepare(
    repo: &Repo,
    loaded: &Loaded,
    packet: &Path,
    text: &str,
    agent: Option<&str>,
) -> Result<Vec<PlannedLane>, InvalidPacket> {
    let context = PacketContext {
        repo_root: repo.root().to_owned(),
        worktree_root: repo.default_worktree_path("x").parent().map(Path::to_owned),
        default_agent: agent.map(str::to_owned),
    };
    let checked = check_packet(text, &context);
    let mut problems = checked.problems;
    let lanes = plan(repo, loaded, checked.lanes, agent, &mut problems);
    if problems.is_empty() {
        Ok(lanes)
    } else {
        Err(InvalidPacket {
            file: packet.to_owned(),
            problems: PacketErrors(problems),
        })
    }
}

/// A packet refused before anything was created, with every problem found.
#[derive(Debug)]
pub struct InvalidPacket {
    /// The packet file, as given.
    pub file: PathBuf,
    /// Every problem, each with its JSON path.
    pub problems: PacketErrors,
}

impl InvalidPacket {
    /// The JSON error document's `error` object: `kind`, `message` (every problem, as text
    /// shows it) and `problems` (`[{path, message}]`), as `clawpool packet validate` gives it.
    pub fn error_json(&self) -> serde_json::Value {
        let err = CommandError::from(self);
        json!({"kind": err.kind, "message": err.message, "problems": self.problems})
    }

    /// Prints the refusal on stderr in the chosen format; exit 2.
    pub fn report(&self, format: OutputFormat) -> ExitCode {
        match format {
            OutputFormat::Json => eprintln!("{}", json!({"error": self.error_json()})),
            OutputFormat::Text => {
                eprintln!("clawpool: error: {}", CommandError::from(self).message);
            }
        }
        ExitCode::from(EXIT_INVALID_INPUT)
    }
}

impl From<&InvalidPacket> for CommandError {
    fn from(invalid: &InvalidPacket) -> Self {
        invalid_packet(&invalid.file, &invalid.problems)
    }
}

impl From<InvalidPacket> for CommandError {
    fn from(invalid: InvalidPacket) -> Self {
        Self::from(&invalid)
    }
}

/// The terminal lanes of this repository run in.
pub async fn terminal_for(repo: &Repo, transport: TransportKind) -> Result<Terminal, CommandError> {
    Ok(match transport {
        TransportKind::Pty => Terminal::Pty,
        TransportKind::Tmux => {
            Terminal::Tmux(TmuxServer::connect(TmuxConfig::new(tmux_socket_name(repo))).await?)
        }
    })
}

/// The supervisor lock's path for a repository.
pub fn lock_path(repo: &Repo) -> PathBuf {
    repo.state_dir().supervisor_lock()
}

/// How `clawpool spawn` ended: it ran the packet itself, or the repository's background
/// supervisor is to take it (`--detach`, or a daemon already holds the lock). Handing over is
/// the caller's (`daemon::hand_over`), so that spawning never depends on the daemon's code.
pub enum Spawned {
    /// The packet ran here; the exit code says how.
    Ran(ExitCode),
    /// The daemon is to take the packet.
    HandOver {
        /// The repository.
        repo: Repo,
        /// The packet's text.
        packet: String,
        /// Start a daemon if none runs (`--detach`); otherwise only hand over to a running one.
        start: bool,
        /// Why this process could not run it itself, when handing over is the fallback: the
        /// error to report if no daemon takes it.
        refused: Option<CommandError>,
    },
}

pub async fn run(args: &SpawnArgs, loaded: Loaded) -> Result<Spawned, CommandError> {
    let repo = Repo::open(&args.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let text = match args.inline_packet() {
        Some(text) => text,
        None => std::fs::read_to_string(args.packet_name()).map_err(|e| {
            CommandError::invalid(
                "packet_not_found",
                format!(
                    "cannot read task packet {}: {e}",
                    args.packet_name().display()
                ),
            )
        })?,
    };
    let lanes = match prepare(
        &repo,
        &loaded,
        &args.packet_name(),
        &text,
        args.agent.as_deref(),
    ) {
        Ok(lanes) => lanes,
        Err(invalid) => return Ok(Spawned::Ran(invalid.report(args.output_format))),
    };
    if let Some(cli_agent) = &args.agent {
        report_agent_overrides(&lanes, cli_agent, args.output_format);
    }
    if args.detach {
        return Ok(Spawned::HandOver {
            repo,
            packet: text,
            start: true,
            refused: None,
        });
    }
    let (lanes, skipped) = leave_earlier_runs(&repo, lanes, args.rerun);

    // One supervisor per repository: a running daemon takes the lanes; anyone else refuses.
    let _lock = match hold_supervisor_lock(&lock_path(&repo), SupervisorRole::Spawn) {
        Ok(lock) => lock,
        Err(refused) => {
            return Ok(Spawned::HandOver {
                repo,
                packet: text,
                start: false,
                refused: Some(refused),
            });
        }
    };

    let interrupt =
        Interrupt::listen().map_err(|e| CommandError::io("listening for SIGINT and SIGTERM", e))?;
    // This process owns the repository's lanes now: it tells people about them.
    let notifier = crate::notifying::start(&repo, &loaded);
    let terminal = terminal_for(&repo, args.transport).await?;
    if let (Terminal::Tmux(server), OutputFormat::Text) = (&terminal, args.output_format) {
        for lane in &lanes {
            eprintln!(
                "clawpool: lane {}: {}",
                lane.spec.name,
                tmux_attach_command(server.socket_name(), &lane.spec.name)
            );
        }
    }
    let board = Board::new(
        lanes
            .iter()
            .map(|l| l.spec.name.clone())
            .chain(skipped.iter().map(|s| s.name.clone()))
            .collect(),
        args.output_format,
    );
    for lane in &skipped {
        board.set(&lane.name, &format!("skipped: {}", lane.why), None);
    }
    let painter = board.paint_live();
    let tasks = start_all(
        repo.root(),
        lanes,
        &terminal,
        loaded.settings,
        args.concurrency,
        &board,
        &interrupt,
    );
    let mut results: BTreeMap<String, Option<LaneState>> = BTreeMap::new();
    for task in tasks {
        if let Ok((name, state)) = task.await {
            results.insert(name, state);
        }
    }
    if let Some(painter) = painter {
        painter.abort();
    }
    board.paint_final();
    crate::notifying::finish(notifier).await;
    terminal.close_if_unused().await;
    let all_finished = results
        .values()
        .all(|s| s.is_some_and(|s| s == LaneState::Finished));
    let unpersisted = unpersisted_outcomes(&repo, results.keys());
    let interrupted = interrupt.received();
    match args.output_format {
        OutputFormat::Json => {
            let ran = results.iter().map(|(name, state)| {
                json!({
                    "lane": name,
                    "state": state,
                    "state_file_degraded": unpersisted.get(name),
                })
            });
            let lanes: Vec<_> = ran
                .chain(skipped.iter().map(SkippedLane::to_json))
                .collect();
            println!(
                "{}",
                json!({
                    "lanes": lanes,
                    "interrupted": interrupted.map(|signal| json!({"signal": signal.name(), "exit": signal.exit_code()})),
                })
            );
        }
        OutputFormat::Text => {
            for (name, err) in &unpersisted {
                eprintln!(
                    "clawpool: lane {name}: its outcome is in its event log but could not be written to its state file ({err}); `clawpool adopt` writes it once the file can be written"
                );
            }
            if let Some(signal) = interrupted {
                eprintln!(
                    "clawpool: interrupted by {}: every started lane's agent was stopped and the lane recorded as failed, queued lanes were not started; exit {}",
                    signal.name(),
                    signal.exit_code()
                );
            }
        }
    }
    Ok(Spawned::Ran(match interrupted {
        Some(signal) => ExitCode::from(signal.exit_code()),
        None if all_finished && unpersisted.is_empty() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    }))
}

/// Says, on stderr, which lanes run another agent than `--agent` because the packet names
/// one (a lane's own `agent` or the packet's `defaults`): `--agent` is only the default for
/// lanes that name none. JSON: one document per lane, `{"notice": {"kind":
/// "agent_overridden", "lane", "agent", "cli_agent", "message"}}`.
fn report_agent_overrides(lanes: &[PlannedLane], cli_agent: &str, format: OutputFormat) {
    for lane in lanes {
        let Some(agent) = lane.spec.agent.as_deref().filter(|a| *a != cli_agent) else {
            continue;
        };
        let message = format!(
            "lane {} runs agent {agent}, as the packet names it: --agent {cli_agent} applies only to lanes that name no agent",
            lane.spec.name
        );
        match format {
            OutputFormat::Json => eprintln!(
                "{}",
                json!({"notice": {"kind": "agent_overridden", "lane": lane.spec.name,
                    "agent": agent, "cli_agent": cli_agent, "message": message}})
            ),
            OutputFormat::Text => eprintln!("clawpool: notice: {message}"),
        }
    }
}

/// The lanes among `names` whose state file could not be written at their end (their degraded
/// marker is still there), with the write's error: their outcome is only in their event log.
fn unpersisted_outcomes<'a>(
    repo: &Repo,
    names: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    names
        .filter_map(|name| {
            let err = lane_registry(repo, name).degraded()?;
            Some((name.clone(), err))
        })
        .collect()
}

/// Starts every lane, at most `concurrency` at once; each task ends with the lane's final state.
pub fn start_all(
    repo_root: &Path,
    lanes: Vec<PlannedLane>,
    terminal: &Terminal,
    settings: clawpool_lane::handshake::Settings,
    concurrency: Option<usize>,
    board: &Board,
    interrupt: &Interrupt,
) -> Vec<tokio::task::JoinHandle<(String, Option<LaneState>)>> {
    let concurrency = Arc::new(Semaphore::new(
        concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1),
    ));
    lanes
        .into_iter()
        .map(|lane| {
            let concurrency = Arc::clone(&concurrency);
            let board = board.clone();
            let root = repo_root.to_owned();
            let terminal = terminal.clone();
            let interrupt = interrupt.clone();
            tokio::spawn(async move {
                let name = lane.spec.name.clone();
                let permit = tokio::select! {
                    permit = concurrency.acquire_owned() => permit,
                    signal = interrupt.wait() => {
                        board.set(&name, &format!("not started: interrupted by {}", signal.name()), None);
                        return (name, None);
                    }
                };
                board.set(&name, "preparing worktree", None);
                let result = match Repo::open(&root) {
                    Ok(repo) => {
                        start_lane(&repo, lane, terminal, settings, board.clone(), interrupt).await
                    }
                    Err(e) => Err(CommandError::invalid("not_a_repository", e.to_string())),
                };
                drop(permit);
                let final_state = match result {
                    Ok(state) => state,
                    Err(err) => {
                        board.set(&name, &format!("failed: {}", err.message), None);
                        None
                    }
                };
                (name, final_state)
            })
        })
        .collect()
}

/// Validates every lane against the repository and configuration, adding every problem found
/// to `problems` (each check that does not depend on an earlier one runs whatever that one
/// found); returns the lanes that passed.
fn plan(
    repo: &Repo,
    loaded: &Loaded,
    specs: Vec<LaneSpec>,
    default_agent: Option<&str>,
    problems: &mut Vec<PacketError>,
) -> Vec<PlannedLane> {
    let mut planned = Vec::new();
    // One copy of each agent's profile for all its lanes (`LaneJob::profile`).
    let mut shared_profiles = std::collections::HashMap::new();
    for spec in specs {
        let at = |field: &str| format!("{}.{field}", spec.source);
        let before = problems.len();
        let profile = match spec
            .agent
            .clone()
            .or_else(|| default_agent.map(str::to_owned))
        {
            None => {
                problems.push(PacketError::new(
                    at("agent"),
                    "no agent: give the lane an `agent` or pass --agent",
                ));
                None
            }
            Some(agent) => match loaded.profiles.get(&agent) {
                Ok(profile) => Some(std::sync::Arc::clone(
                    shared_profiles
                        .entry(agent)
                        .or_insert_with(|| std::sync::Arc::new(profile.clone())),
                )),
                Err(err) => {
                    problems.push(PacketError::new(at("agent"), err.to_string()));
                    None
                }
            },
        };
        if let Err(e) = check_prompt(&spec.prompt) {
            problems.push(PacketError::new(
                spec.source.clone(),
                format!("lane {}: {e}", spec.name),
            ));
        }
        let worktree = match LaneWorktreeSpec::new(repo, &spec.name) {
            Ok(mut worktree) => {
                if let Some(base) = &spec.base {
                    worktree.base = base.clone();
                }
                if let Some(branch) = &spec.branch {
                    worktree.branch = branch.clone();
                }
                if let Some(path) = &spec.worktree {
                    worktree.path = path.clone();
                }
                Some(worktree)
            }
            Err(err) => {
                problems.push(PacketError::new(at("name"), err.to_string()));
                None
            }
        };
        let base_sha = worktree
            .as_ref()
            .and_then(|worktree| match repo.resolve(&worktree.base) {
                Ok(sha) => Some(sha),
                Err(err) => {
                    problems.push(PacketError::new(at("base"), err.to_string()));
                    None
                }
            });
        if let Some(existing) = worktree.as_ref().and_then(existing_folder_on_other_branch) {
            problems.push(PacketError::new(at("worktree"), existing));
        }
        if let Some(profile) = &profile {
            // The binary only: the prompt was checked above.
            let probe = LaneJob {
                checks: None,
                policy: std::sync::Arc::clone(&loaded.policy),
                prices: std::sync::Arc::clone(&loaded.prices),
                budget_usd: None,
                name: spec.name.clone(),
                dir: repo.root().to_owned(),
                profile: std::sync::Arc::clone(profile),
                trusted: false,
                settings: loaded.settings,
                prompt: None,
                terminal: Terminal::Pty,
                env: Vec::new(),
                size: None,
                events_path: PathBuf::new(),
                terminal_log: PathBuf::new(),
                branch: None,
                base: None,
                on_event: Box::new(|_| {}),
                interrupt: Interrupt::never(),
                lock: None,
                sandbox: None,
            };
            if let Err(err) = preflight(&probe) {
                problems.push(PacketError::new(at("agent"), err.to_string()));
            }
        }
        // A lane that asks for a sandbox this machine cannot make is refused with the rest:
        // it never starts unconfined.
        let permission_profile = loaded
            .policy
            .permissions()
            .profile_for(spec.permission_profile.as_deref())
            .unwrap_or(loaded.policy.permissions().default_profile);
        let mut sandbox = crate::sandboxing::lane_request(
            &loaded.config,
            spec.sandbox.as_deref(),
            permission_profile,
        );
        if let Some(request) = &mut sandbox {
            let path = std::env::var_os("PATH");
            match clawpool_lane::sandbox::probe(&request.bwrap, path.as_deref()) {
                Ok(program) => request.bwrap = program.into_os_string(),
                Err(why) => problems.push(PacketError::new(
                    at("sandbox"),
                    format!("the lane asks for a sandbox (docs/sandbox.md): {why}"),
                )),
            }
        }
        let (Some(profile), Some(worktree), Some(base_sha)) = (profile, worktree, base_sha) else {
            continue;
        };
        if problems.len() > before {
            continue;
        }
        let mut roots = loaded.roots.clone();
        roots.trusted.extend(spec.trusted_roots.iter().cloned());
        planned.push(PlannedLane {
            spec,
            profile,
            worktree,
            base_sha,
            roots,
            policy: std::sync::Arc::clone(&loaded.policy),
            prices: std::sync::Arc::clone(&loaded.prices),
            rerun_of: None,
            sandbox,
        });
    }
    planned
}

/// A lane folder that is already a worktree on another branch is refused before anything is
/// created (the worktree crate would refuse it too, but only once earlier lanes had started).
fn existing_folder_on_other_branch(spec: &LaneWorktreeSpec) -> Option<String> {
    let status = clawpool_worktree::worktree_status(&spec.path).ok()?;
    match status.branch {
        Some(branch) if branch == spec.branch => None,
        other => Some(format!(
            "lane folder {} exists with {} checked out, not {}",
            spec.path.display(),
            other.map_or("a detached HEAD".to_owned(), |b| format!("branch {b}")),
            spec.branch
        )),
    }
}

async fn start_lane(
    repo: &Repo,
    lane: PlannedLane,
    terminal: Terminal,
    settings: clawpool_lane::handshake::Settings,
    board: Board,
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
        board.set(
            &name,
            &format!("not started: interrupted by {}", signal.name()),
            None,
        );
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
    let text = serde_json::to_string_pretty(&entry).expect("a registry entry serializes");
    write_atomically(&registry.entry_file(), format!("{text}\n").as_bytes())
        .map_err(|e| CommandError::io("writing the lane's registry entry", e))?;
    // The user's index is what `ui --all` finds the repository by; a lane runs without it.
    if let Err(err) = crate::known_repos::add(repo) {
        tracing::warn!("the index of repositories with lanes was not updated: {err}");
    }
    if let Some(earlier) = lane.rerun_of {
        record_rerun(repo, &name, &registry, earlier, &board)?;
    }
    let on_board = board.clone();
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
        on_event: Box::new(move |event| on_board.on_event(event)),
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
        board.set(
            &name,
            &format!("{state} (not in its state file: {err})"),
            None,
        );
    }
    Ok(state)
}

/// Writes `bytes` to `path` through a temporary file renamed over it: a supervisor killed
/// mid-write leaves the previous file or none, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// Records in the lane's event log that `--rerun` starts a fresh run of its task after an
/// earlier run that finished (in the same worktree) or that gc removed (re-created: gc's
/// marker goes). The new run's state file starts afresh; its event log goes on.
fn record_rerun(
    repo: &Repo,
    name: &str,
    registry: &clawpool_lane::registry::RegistryFolder,
    earlier: Skipped,
    board: &Board,
) -> Result<(), CommandError> {
    let events = clawpool_lanes::EventLog::open(name, &registry.events())
        .map_err(|e| CommandError::io("opening the lane's event log", e.source))?;
    let rerun = Rerun {
        by: "spawn --rerun".into(),
        previous: match earlier {
            Skipped::Finished => PreviousRun::Finished,
            Skipped::Stopped => PreviousRun::Stopped,
            Skipped::RemovedByGc => PreviousRun::RemovedByGc,
        },
    };
    let event = events
        .report(Payload::Rerun(rerun), None, None, None)
        .map_err(|e| CommandError::io("writing the lane's event log", e.source))?;
    board.on_event(&event);
    if earlier == Skipped::RemovedByGc {
        let _ = std::fs::remove_file(repo.state_dir().removed(name));
    }
    Ok(())
}

fn invalid_packet(file: &Path, errors: &PacketErrors) -> CommandError {
    CommandError {
        kind: "invalid_packet",
        message: format!("{}: {errors}", file.display()),
        exit: EXIT_INVALID_INPUT,
    }
}

/// Which kind of supervisor holds the repository's lock, written in the lock file after its
/// pid: `spawn --detach` must tell a daemon that is about to listen (wait for its socket) from
/// a foreground supervisor that will never take lanes from anyone (refuse at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupervisorRole {
    /// `clawpool spawn` without `--detach`: runs its own packet and nothing else.
    Spawn,
    /// `clawpool adopt`: drives the lanes it took over and nothing else.
    Adopt,
    /// `clawpool daemon`: takes lanes through its socket.
    Daemon,
}

impl SupervisorRole {
    fn name(self) -> &'static str {
        match self {
            SupervisorRole::Spawn => "spawn",
            SupervisorRole::Adopt => "adopt",
            SupervisorRole::Daemon => "daemon",
        }
    }
}

/// Takes the repository's supervisor lock for `role`, or refuses with `supervisor_running`
/// naming the pid that holds it. The lock file then reads `PID\nROLE\n`.
pub fn hold_supervisor_lock(path: &Path, role: SupervisorRole) -> Result<File, CommandError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CommandError::io("creating clawpool's folder in the git dir", e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| CommandError::io("opening the supervisor lock", e))?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.set_len(0);
            // One write, so a reader sees the pid and the role together or nothing.
            let _ = file.write_all(format!("{}\n{}\n", std::process::id(), role.name()).as_bytes());
            Ok(file)
        }
        Err(_) => Err(supervisor_running(path)),
    }
}

/// The refusal for a lock someone else holds, naming the holder's pid when the file has it.
fn supervisor_running(path: &Path) -> CommandError {
    // The holder writes its pid just after taking the lock: a supervisor started at the same
    // moment may find the file still empty.
    let holder = std::fs::read_to_string(path).unwrap_or_default();
    let holder = match holder.lines().next().map(str::trim) {
        None | Some("") => String::new(),
        Some(pid) => format!(" (pid {pid})"),
    };
    CommandError::invalid(
        "supervisor_running",
        format!(
            "another clawpool supervisor{holder} is running lanes for this repository; wait for it to finish or stop it"
        ),
    )
}

/// Who holds the supervisor lock right now.
#[derive(Debug)]
pub enum LockHolder {
    /// Nobody: a daemon started now would get it.
    Free,
    /// A daemon, or a holder that has not written its role yet (it does so right after taking
    /// the lock): worth waiting for its socket.
    DaemonOrStarting,
    /// A foreground `spawn` or `adopt`: it takes no lanes; the refusal names its pid.
    Foreground(CommandError),
}

/// Looks at the supervisor lock without creating anything. Testing whether it is free takes it
/// for an instant when it is: a supervisor trying at that instant is refused, as one started at
/// the same moment as another is; `spawn --detach` then starts its daemon again.
pub fn supervisor_lock_holder(path: &Path) -> Result<LockHolder, CommandError> {
    let file = match std::fs::OpenOptions::new().read(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockHolder::Free),
        Err(e) => return Err(CommandError::io("opening the supervisor lock", e)),
    };
    match file.try_lock() {
        Ok(()) => Ok(LockHolder::Free),
        Err(std::fs::TryLockError::WouldBlock) => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            Ok(match text.lines().nth(1).map(str::trim) {
                Some("spawn") | Some("adopt") => LockHolder::Foreground(supervisor_running(path)),
                _ => LockHolder::DaemonOrStarting,
            })
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(CommandError::io("testing the supervisor lock", e))
        }
    }
}

/// What the user sees while lanes run: on a terminal, one live line per lane; otherwise (or
/// with JSON output) the events as a plain line log.
#[derive(Clone)]
pub struct Board {
    inner: Arc<Mutex<BoardState>>,
    format: OutputFormat,
    live: bool,
    /// Under the live lane lines: how many lanes are done (`crate::progress`).
    progress: Arc<Progress>,
}

struct BoardState {
    lanes: BTreeMap<String, LaneLine>,
    painted_rows: usize,
    width: usize,
}

struct LaneLine {
    state: String,
    since: Instant,
    last_event: String,
}

impl LaneLine {
    /// Whether the lane is over for this batch: ended, skipped or never started.
    fn is_done(&self) -> bool {
        ["finished", "stopped", "failed", "skipped", "not started"]
            .iter()
            .any(|done| self.state.starts_with(done))
    }
}

impl Board {
    pub fn new(names: Vec<String>, format: OutputFormat) -> Self {
        let live = format == OutputFormat::Text && crate::mirror::can_mirror();
        let total = names.len() as u64;
        let width = names.iter().map(String::len).max().unwrap_or(4).max(4);
        let lanes = names
            .into_iter()
            .map(|n| {
                (
                    n,
                    LaneLine {
                        state: "queued".into(),
                        since: Instant::now(),
                        last_event: String::new(),
                    },
                )
            })
            .collect();
        Self {
            inner: Arc::new(Mutex::new(BoardState {
                lanes,
                painted_rows: 0,
                width,
            })),
            format,
            live,
            progress: Arc::new(if live {
                Progress::bar(
                    format,
                    total,
                    "{bar:30} {pos}/{len} lanes done · {msg} · {elapsed}",
                )
            } else {
                Progress::none()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BoardState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, lane: &str, state: &str, event: Option<&str>) {
        let width = {
            let mut inner = self.lock();
            let width = inner.width;
            if let Some(line) = inner.lanes.get_mut(lane) {
                if line.state != state {
                    line.state = state.to_owned();
                    line.since = Instant::now();
                }
                if let Some(event) = event {
                    line.last_event = event.to_owned();
                }
            }
            width
        };
        if !self.live && self.format == OutputFormat::Text && event.is_none() {
            println!("{lane:<width$} {state}");
        }
    }

    fn on_event(&self, event: &LaneEvent) {
        if let Some(to) = &event.to {
            self.set(&event.lane, &to.to_string(), Some(event.kind.as_str()));
        } else {
            let state = self
                .lock()
                .lanes
                .get(&event.lane)
                .map(|l| l.state.clone())
                .unwrap_or_default();
            self.set(&event.lane, &state, Some(event.kind.as_str()));
        }
        if !self.live {
            let width = self.lock().width;
            print_event(event, self.format, Some(width));
        }
    }

    /// On a terminal, redraws the lane lines four times a second.
    fn paint_live(&self) -> Option<tokio::task::JoinHandle<()>> {
        if !self.live {
            return None;
        }
        let board = self.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                board.paint();
            }
        }))
    }

    fn paint(&self) {
        let mut inner = self.lock();
        let mut out = String::new();
        if inner.painted_rows > 0 {
            out.push_str(&format!("\x1b[{}A", inner.painted_rows));
        }
        let width = inner.width;
        for (name, line) in &inner.lanes {
            out.push_str(&format!(
                "\r\x1b[2K{name:<width$}  {:<32} {:>5}s  {}\n",
                line.state,
                line.since.elapsed().as_secs(),
                line.last_event
            ));
        }
        inner.painted_rows = inner.lanes.len();
        let done = inner.lanes.values().filter(|l| l.is_done()).count();
        let queued = inner.lanes.values().filter(|l| l.state == "queued").count();
        let working = inner.lanes.len() - done - queued;
        self.progress
            .set(done as u64, format!("{working} working · {queued} queued"));
        // The progress line sits under the lane lines: out of the way while they are redrawn.
        self.progress.suspend(|| {
            print!("{out}");
            let _ = std::io::stdout().flush();
        });
    }

    fn paint_final(&self) {
        if self.live {
            self.paint();
            self.progress.clear();
        } else if self.format == OutputFormat::Text {
            let inner = self.lock();
            let width = inner.width;
            println!("\n{:<width$}  state", "lane");
            for (name, line) in &inner.lanes {
                println!("{name:<width$}  {}", line.state);
            }
        }
    }
}

/// `clawpool adopt`: after a supervisor died (even with SIGKILL), take over every live lane it
/// left in tmux — re-attached from its state file (caught up with its event log) and its tmux
/// session, with no worktree made again and nothing it already sent sent again. A lane whose
/// worker is gone, or whose agent was still being started, is `failed{worker_lost}` naming its
/// terminal; a lane that cannot be taken over (its state file or registry entry unreadable) is
/// reported in every output format, left alone, and makes the exit code 1.
pub async fn adopt(args: AdoptArgs, loaded: Loaded) -> Result<ExitCode, CommandError> {
    let repo = Repo::open(&args.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let _lock = hold_supervisor_lock(&lock_path(&repo), SupervisorRole::Adopt)?;
    let interrupt =
        Interrupt::listen().map_err(|e| CommandError::io("listening for SIGINT and SIGTERM", e))?;
    let names = registered_lanes(&repo);
    let board = Board::new(names.clone(), args.output_format);
    let Adoptions {
        tasks,
        mut not_adopted,
        cleanups,
        servers,
    } = adopt_lanes(&repo, names, &loaded, &board, &interrupt);
    for cleanup in cleanups {
        let _ = cleanup.await;
    }
    let mut adopted = BTreeMap::new();
    for task in tasks {
        match task.await {
            Ok((name, Ok(state))) => {
                adopted.insert(name, state);
            }
            Ok((_, Err(refused))) => not_adopted.push(refused),
            // A lane task that panicked: its lane is not driven any more.
            Err(_) => {}
        }
    }
    // Every lane is over: a server nothing runs on any more goes, with its socket — the
    // repository's own too, which a supervisor killed before any lane recorded it started.
    let _ = servers.get(&tmux_socket_name(&repo)).await;
    servers.close_unused().await;
    board.paint_final();
    let all_finished = adopted
        .values()
        .all(|s| s.is_some_and(|s| s == LaneState::Finished));
    let interrupted = interrupt.received();
    match args.output_format {
        OutputFormat::Json => println!(
            "{}",
            json!({
                "lanes": adopted.iter().map(|(name, state)| json!({"lane": name, "state": state})).collect::<Vec<_>>(),
                "not_adopted": not_adopted,
                "interrupted": interrupted.map(|signal| json!({"signal": signal.name(), "exit": signal.exit_code()})),
            })
        ),
        OutputFormat::Text => {
            if let Some(signal) = interrupted {
                eprintln!(
                    "clawpool: interrupted by {}: every adopted lane's agent was stopped and the lane recorded as failed; exit {}",
                    signal.name(),
                    signal.exit_code()
                );
            }
        }
    }
    Ok(match interrupted {
        Some(signal) => ExitCode::from(signal.exit_code()),
        None if all_finished && not_adopted.is_empty() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}

/// The names of the lanes registered in the repository's common git dir, sorted.
pub fn registered_lanes(repo: &Repo) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo.state_dir().lanes())
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A lane that could not be taken over, and why: `kind` is the error's stable name
/// (`invalid_state_file`, `missing_worker_state`, `invalid_registry_entry`, `unknown_agent`,
/// or the kind of the error that stopped it, e.g. `tmux_failed`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct NotAdopted {
    pub lane: String,
    pub kind: &'static str,
    pub error: String,
}

/// One adopted lane's task: it ends with the lane's final state, or why it could not be driven
/// after all.
pub type AdoptionTask = tokio::task::JoinHandle<(String, Result<Option<LaneState>, NotAdopted>)>;

/// The outcome of [`adopt_lanes`]: a task per lane taken over, and the lanes refused at once.
pub struct Adoptions {
    /// One per lane taken over (or recorded as lost).
    pub tasks: Vec<AdoptionTask>,
    /// Lanes that were not taken over (their state file or registry entry unreadable, their
    /// agent unknown): nothing was done to them.
    pub not_adopted: Vec<NotAdopted>,
    /// Ending the tmux sessions lanes that had already ended left behind (their supervisor was
    /// killed between recording the end and closing the session).
    pub cleanups: Vec<tokio::task::JoinHandle<()>>,
    /// The tmux servers the lanes were found on.
    pub servers: TmuxServers,
}

/// The tmux servers adopted lanes run on: each connected once (never started: a server that
/// is not running has no lane to adopt) and shared by its lanes, so that one lane's end never
/// closes a server under another.
#[derive(Clone, Default)]
pub struct TmuxServers(Arc<tokio::sync::Mutex<BTreeMap<String, Option<TmuxServer>>>>);

impl TmuxServers {
    /// The running server on `socket`, if there is one.
    async fn get(&self, socket: &str) -> Result<Option<TmuxServer>, CommandError> {
        let mut servers = self.0.lock().await;
        if let Some(server) = servers.get(socket) {
            return Ok(server.clone());
        }
        let server = TmuxServer::connect_existing(TmuxConfig::new(socket)).await?;
        servers.insert(socket.to_owned(), server.clone());
        Ok(server)
    }

    /// Kills each server no lane runs on any more (and removes its socket).
    pub async fn close_unused(&self) {
        let servers: Vec<TmuxServer> = self.0.lock().await.values().flatten().cloned().collect();
        for server in servers {
            Terminal::Tmux(server).close_if_unused().await;
        }
    }
}

/// Takes over every lane among `names` that has not ended: its state file is first caught up
/// with its event log (a supervisor killed between the two, or one that could not write the
/// file, left it behind), then its live tmux session is driven on, and a lane whose worker is
/// gone is recorded as `failed{worker_lost}`. A registry folder without its `lane.json` is a
/// lane whose supervisor died before registering it: nothing of it ever ran. The caller must
/// hold the repository's supervisor lock, so no other supervisor owns them. A lane that cannot
/// be taken over is left as it is and returned in `not_adopted`; the caller reports it (the
/// board shows it only in text output).
pub fn adopt_lanes(
    repo: &Repo,
    names: Vec<String>,
    loaded: &Loaded,
    board: &Board,
    interrupt: &Interrupt,
) -> Adoptions {
    let mut tasks = Vec::new();
    let mut cleanups = Vec::new();
    // One copy of each agent's profile for all its lanes (`LaneJob::profile`).
    let mut shared_profiles = std::collections::HashMap::new();
    let servers = TmuxServers::default();
    let mut not_adopted = Vec::new();
    let mut refuse = |lane: &str, kind: &'static str, error: String| {
        board.set(lane, &format!("not adopted: {kind} ({error})"), None);
        not_adopted.push(NotAdopted {
            lane: lane.to_owned(),
            kind,
            error,
        });
    };
    for name in names {
        let registry = lane_registry(repo, &name);
        let entry = match registry.entry() {
            Ok(entry) => entry,
            Err(err) if err.missing => {
                board.set(&name, "never started (not registered)", None);
                continue;
            }
            Err(err) => {
                refuse(&name, "invalid_registry_entry", err.message);
                continue;
            }
        };
        let dir = entry.worktree.clone();
        let events_path = registry.events();
        let marker = registry.degraded_marker();
        // Whoever holds the lane (a `gc`, a `verify` on it) is left to it; held from here,
        // nobody else changes the lane while it is recorded or adopted.
        let lock = match clawpool_lanes::state_file::SupervisorLock::hold(registry.dir()) {
            Ok(lock) => lock,
            Err(err) => {
                refuse(&name, "lane_busy", err.to_string());
                continue;
            }
        };
        let mut doc = match clawpool_lanes::read_lane_record(registry.dir(), &dir) {
            Ok(doc) => doc,
            Err(err @ clawpool_lanes::StateFileError::Missing { .. }) => {
                // The state file is written before the agent starts: none ever ran.
                match never_started(&name, (registry.dir(), &dir), &entry, &events_path, &marker) {
                    Ok(lost) => {
                        board.set(&name, &lost.to_string(), None);
                        tasks.push(tokio::spawn(async move { (name, Ok(Some(lost))) }));
                    }
                    Err(_) => refuse(&name, err.kind(), err.to_string()),
                }
                continue;
            }
            Err(err) => {
                refuse(&name, err.kind(), err.to_string());
                continue;
            }
        };
        let behind = std::fs::read_to_string(&events_path)
            .map(|log| doc.catch_up(&log))
            .unwrap_or(0);
        if doc.status.is_terminal() {
            if behind > 0 || marker.exists() {
                // The outcome was only in the event log: it goes into the state file now.
                let _ = clawpool_lane::lane_state::StateRecorder::with_marker(
                    doc.clone(),
                    registry.dir(),
                    Some(&dir),
                    Some(marker),
                );
            } else {
                clawpool_lane::lane_state::republish(registry.dir(), &dir);
            }
            if let Some(target) = doc.transport.session.clone() {
                cleanups.push(tokio::spawn(end_leftover_session(target, servers.clone())));
            }
            board.set(
                &name,
                &format!("{} (already ended)", doc.lane_state()),
                None,
            );
            continue;
        }
        let profile = match loaded.profiles.get(&doc.agent) {
            Ok(profile) => std::sync::Arc::clone(
                shared_profiles
                    .entry(doc.agent.clone())
                    .or_insert_with(|| std::sync::Arc::new(profile.clone())),
            ),
            Err(err) => {
                refuse(&name, "unknown_agent", err.to_string());
                continue;
            }
        };
        let board = board.clone();
        let settings = loaded.settings;
        let roots = loaded.roots.clone();
        let policy = std::sync::Arc::clone(&loaded.policy);
        let prices = std::sync::Arc::clone(&loaded.prices);
        let interrupt = interrupt.clone();
        let servers = servers.clone();
        tasks.push(tokio::spawn(async move {
            let state = adopt_lane(
                (&name, lock),
                &registry,
                &dir,
                entry,
                doc,
                profile,
                (settings, policy, prices, interrupt),
                roots,
                (board.clone(), servers),
            )
            .await;
            let state = state.map_err(|err| {
                board.set(&name, &format!("failed: {}", err.message), None);
                NotAdopted {
                    lane: name.clone(),
                    kind: err.kind,
                    error: err.message,
                }
            });
            (name, state)
        }));
    }
    Adoptions {
        tasks,
        not_adopted,
        cleanups,
        servers,
    }
}

/// Records a registered lane whose state file was never written as `failed{worker_lost}`: its
/// supervisor died after registering it and before starting its agent. Its state file is made
/// from the registry entry, naming the terminal the lane was to run in.
fn never_started(
    name: &str,
    (record, dir): (&Path, &Path),
    entry: &RegistryEntry,
    events_path: &Path,
    marker: &Path,
) -> Result<LaneState, CommandError> {
    let transport = entry.transport.clone().ok_or_else(|| {
        CommandError::invalid(
            "invalid_registry_entry",
            "transport: the entry does not say where the lane was to run",
        )
    })?;
    let terminal = match (&transport.kind, &transport.session) {
        (_, Some(target)) => format!("tmux session {target}"),
        (_, None) => "a PTY".to_owned(),
    };
    let mut doc = clawpool_lanes::WorkerStateDoc::new(
        format!("{name}-{}", std::process::id()),
        name,
        &entry.agent,
        dir.display().to_string(),
        transport,
        clawpool_lanes::state_file::now_secs(),
    );
    doc.branch = entry.branch.clone();
    let recorder = clawpool_lane::lane_state::StateRecorder::with_marker(
        doc,
        record,
        Some(dir),
        Some(marker.to_owned()),
    );
    record_lost(
        name,
        events_path,
        recorder,
        format!("the supervisor ended before it started the lane's agent in {terminal}"),
    )
}

/// Records `failed{worker_lost}` with `why` in the lane's event log and state file.
fn record_lost(
    name: &str,
    events_path: &Path,
    recorder: clawpool_lane::lane_state::StateRecorder,
    why: String,
) -> Result<LaneState, CommandError> {
    let events = clawpool_lanes::EventLog::open(name, events_path)
        .map_err(|e| CommandError::io("opening the lane's event log", e.source))?
        .observe(Box::new(move |event| recorder.on_event(event)));
    let lost = clawpool_lane::handshake::machine::worker_lost(why);
    let state = lost
        .to
        .unwrap_or(LaneState::Failed(clawpool_lanes::FailureClass::WorkerLost));
    let _ = lost.append_to(&events);
    Ok(state)
}

/// Ends the tmux session `target` (`SOCKET:SESSION`) of a lane that has already ended, if it
/// is still there.
async fn end_leftover_session(target: String, servers: TmuxServers) {
    let Some((socket, session)) = target.split_once(':') else {
        return;
    };
    if let Ok(Some(server)) = servers.get(socket).await
        && server
            .sessions()
            .await
            .is_ok_and(|sessions| sessions.iter().any(|s| s == session))
    {
        let _ = server.kill_session(session).await;
    }
}

/// What became of an unfinished lane's worker while no supervisor watched it.
enum Found {
    /// Its tmux session is live, with its agent started: it can be driven on.
    Live(TmuxServer, String),
    /// It is gone (or was never fully started, and its session was ended): why.
    Gone(String),
}

/// Looks for the worker of a lane that has not ended where its state file says it runs.
async fn find_worker(
    doc: &clawpool_lanes::WorkerStateDoc,
    servers: &TmuxServers,
) -> Result<Found, CommandError> {
    let target = match (&doc.transport.kind, doc.transport.session.as_deref()) {
        (clawpool_lanes::state_file::TransportKind::Pty, _) => {
            // A PTY is owned by its supervisor: its worker ended with it.
            return Ok(Found::Gone(
                "its terminal was a PTY owned by the supervisor that ended".to_owned(),
            ));
        }
        (_, target) => target.and_then(|t| t.split_once(':')),
    };
    let Some((socket, session)) = target else {
        return Ok(Found::Gone(
            "its state file names no tmux session (written by an older clawpool)".to_owned(),
        ));
    };
    let Some(server) = servers.get(socket).await? else {
        return Ok(Found::Gone(format!(
            "tmux server {socket} is not running: session {session} is gone with it"
        )));
    };
    let live = server
        .sessions()
        .await
        .is_ok_and(|sessions| sessions.iter().any(|s| s == session));
    if !live {
        return Ok(Found::Gone(format!(
            "tmux session {socket}:{session} is gone"
        )));
    }
    if doc.pid.is_none() {
        // Killed while starting the agent: the session may hold the placeholder or an agent
        // whose start was never recorded. Neither can be driven on from the state file.
        let _ = server.kill_session(session).await;
        let why = format!(
            "the supervisor ended while starting the agent in tmux session {socket}:{session}; the session was ended"
        );
        return Ok(Found::Gone(why));
    }
    Ok(Found::Live(server, session.to_owned()))
}

#[allow(clippy::too_many_arguments)]
async fn adopt_lane(
    (name, lock): (&str, clawpool_lanes::state_file::SupervisorLock),
    registry: &clawpool_lane::registry::RegistryFolder,
    dir: &Path,
    entry: RegistryEntry,
    doc: clawpool_lanes::WorkerStateDoc,
    profile: std::sync::Arc<clawpool_agents::profiles::Profile>,
    (settings, policy, prices, interrupt): (
        clawpool_lane::handshake::Settings,
        std::sync::Arc<clawpool_recovery::Policy>,
        std::sync::Arc<clawpool_lanes::cost::PriceTable>,
        Interrupt,
    ),
    roots: clawpool_agents::trust::TrustRoots,
    (board, servers): (Board, TmuxServers),
) -> Result<Option<LaneState>, CommandError> {
    let (server, session) = match find_worker(&doc, &servers).await? {
        Found::Live(server, session) => (server, session),
        Found::Gone(why) => {
            // The worker is gone: record that, once, in the lane's own files.
            let recorder = clawpool_lane::lane_state::StateRecorder::with_marker(
                doc,
                registry.dir(),
                Some(dir),
                Some(registry.degraded_marker()),
            );
            let lost = record_lost(name, &registry.events(), recorder, why)?;
            board.set(name, &lost.to_string(), None);
            return Ok(Some(lost));
        }
    };
    let worker = server
        .attach(
            &session,
            clawpool_pty::AttachOptions {
                raw_log: Some(clawpool_pty::RawLogConfig::new(
                    registry.dir().join("terminal.log"),
                )),
                scrollback_lines: 0,
            },
        )
        .await?;
    let trusted = roots.decide(dir).map(|d| d.is_trusted()).unwrap_or(false);
    let on_board = board.clone();
    let checks = Repo::open(dir)
        .ok()
        .map(|repo| LaneChecks::from_registry(&entry, &repo, dir, registry, (&settings).into()));
    let job = LaneJob {
        checks,
        policy,
        prices,
        budget_usd: None,
        name: name.to_owned(),
        dir: dir.to_owned(),
        profile,
        trusted,
        settings,
        prompt: entry.prompt.clone(),
        terminal: Terminal::Tmux(server),
        env: Vec::new(),
        size: None,
        events_path: registry.events(),
        terminal_log: registry.dir().join("terminal.log"),
        branch: doc.branch.clone(),
        base: doc.base.clone().map(|b| (b.git_ref, b.sha)),
        on_event: Box::new(move |event| on_board.on_event(event)),
        interrupt,
        lock: Some(lock),
        sandbox: entry.sandbox_request(),
    };
    let result = drive(
        job,
        Start::Adopt {
            worker,
            doc: Box::new(doc),
        },
    )
    .await?;
    Ok(result.final_state())
}
