//! Driving one lane: start its agent in the lane's folder, run the boot handshake with its
//! prompt, keep its event log and state file, and listen for operator commands on the lane's
//! control socket. `clawpool run` drives one lane this way in the foreground; `clawpool spawn`
//! drives many, each in its own worktree.
//!
//! [`drive`] is three calls: `open` (everything the lane runs with, then its worker), `runs`
//! (the handshake, then what recovery asks for, until the lane ends), `finish` (the worker
//! stopped, the finishing stage, the last write). The worker itself is `worker`'s; the commit
//! watch `commits`'; the agent's trust store `trust_store`'s; what recovery decides is
//! carried out by `recovery_effects`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawpool_agents::profiles::Profile;
use clawpool_lanes::state_file;
use clawpool_lanes::{LaneEvent, LaneState, WorkerStateDoc};
use clawpool_pty::{RawLogConfig, SpawnSpec, TmuxServer, Worker};

use crate::checks::LaneChecks;
use crate::error::LaneError;
use crate::handshake::{Outcome, Settings, check_prompt};
use crate::interrupt::{Interrupt, StopSignal};
use crate::recovering::{LaneAbilities, Recovery};

mod commits;
mod finish;
mod open;
mod recovery_effects;
mod runs;
mod trust_store;
mod worker;

/// The folder inside a lane where clawpool keeps its files.
pub use clawpool_worktree::layout::LANE_DIR as STATE_DIR;

/// The tmux server `clawpool run` uses.
pub const RUN_SOCKET: &str = "clawpool-run";

/// Where a lane's worker runs.
#[derive(Clone)]
pub enum Terminal {
    /// A PTY this process owns.
    Pty,
    /// A session on this tmux server.
    Tmux(TmuxServer),
}

impl Terminal {
    /// Kills the tmux server once no lane runs on it any more (and removes its socket).
    pub async fn close_if_unused(&self) {
        if let Terminal::Tmux(server) = self
            && server.sessions().await.is_ok_and(|s| s.is_empty())
        {
            let _ = server.kill_server().await;
        }
    }
}

/// One lane, ready to be driven.
pub struct LaneJob {
    /// The lane's name.
    pub name: String,
    /// Its folder (canonical).
    pub dir: PathBuf,
    /// The agent's profile, shared by every lane of that agent: its compiled regexes are
    /// compiled once, and each copy of a regex would keep its own match caches (tens of KiB
    /// once used) per lane.
    pub profile: Arc<Profile>,
    /// Whether its folder is under a trusted root.
    pub trusted: bool,
    /// The handshake's timing.
    pub settings: Settings,
    /// The task.
    pub prompt: Option<String>,
    /// Where the worker runs.
    pub terminal: Terminal,
    /// Extra environment for the agent.
    pub env: Vec<(String, String)>,
    /// Terminal size.
    pub size: Option<clawpool_pty::TermSize>,
    /// The lane's event log file.
    pub events_path: PathBuf,
    /// The raw terminal log file.
    pub terminal_log: PathBuf,
    /// The lane's branch and base, for the state file.
    pub branch: Option<String>,
    /// The base ref and sha.
    pub base: Option<(String, String)>,
    /// Called with every event (to show progress).
    pub on_event: Box<dyn Fn(&LaneEvent) + Send + Sync>,
    /// The lane's branch checks and verification (lanes made by `clawpool spawn`).
    pub checks: Option<LaneChecks>,
    /// The recovery policy.
    pub policy: Arc<clawpool_recovery::Policy>,
    /// What the lane's usage is priced with (`cost_usd` in the state file).
    pub prices: Arc<clawpool_lanes::cost::PriceTable>,
    /// What the lane may cost (the packet's `budget_usd`); `None` keeps the budget its state
    /// file records (a lane adopted or taken up again).
    pub budget_usd: Option<f64>,
    /// SIGINT/SIGTERM to the supervisor: the lane's agent is stopped and the lane recorded as
    /// failed, with the signal as evidence.
    pub interrupt: Interrupt,
    /// The lane's supervisor lock when the caller already holds it (`spawn` takes it before it
    /// makes the worktree, so that nothing removes a lane being prepared); otherwise the
    /// driver takes it.
    pub lock: Option<state_file::SupervisorLock>,
    /// The lane's sandbox, when its agent runs in one (`docs/sandbox.md`): a lane that asks
    /// for one and cannot have it does not start.
    pub sandbox: Option<crate::sandbox::SandboxRequest>,
}

impl LaneJob {
    /// The lane's record folder: the folder of its event log — its registry folder, or the
    /// `.claw/` of a `clawpool run` lane ([`clawpool_worktree::layout`]).
    pub fn record(&self) -> PathBuf {
        self.events_path
            .parent()
            .map(Path::to_owned)
            .unwrap_or_default()
    }
}

/// What driving a lane ended with.
pub struct LaneResult {
    /// The handshake's outcome (`None` when the supervisor was interrupted).
    pub outcome: Option<Outcome>,
    /// The signal that stopped the lane, and the state it was recorded in.
    pub interrupted: Option<(StopSignal, LaneState)>,
    /// The state file's last write error, if the last write failed (after retries): the lane's
    /// outcome is in its event log but not in its state file.
    pub degraded: Option<String>,
}

impl LaneResult {
    /// The state the lane ended in, however it ended.
    pub fn final_state(&self) -> Option<LaneState> {
        self.outcome
            .as_ref()
            .map(|o| o.state)
            .or(self.interrupted.map(|(_, state)| state))
    }
}

/// How many times the last write of a lane's state file is tried before the lane is reported as
/// not persisted, and how long apart: a disk that is full for a moment (a log rotated, a
/// build's temporary files removed) gets a chance to take the lane's outcome.
const FINAL_WRITE_TRIES: u32 = 5;
const FINAL_WRITE_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// Builds the worker's spawn spec from the profile, refusing an agent that is not installed
/// before anything is written. The agent is started with the lane's mark
/// ([`crate::caller::LaneMark`]), set last so nothing overrides it: whatever it runs is known
/// to run inside the lane.
fn spawn_spec(job: &LaneJob) -> Result<SpawnSpec, LaneError> {
    let launch = &job.profile.manifest.launch;
    let mut spec = SpawnSpec::new(&launch.command, &job.dir);
    let mark = crate::caller::LaneMark::new(&job.name, &job.dir);
    for (key, value) in launch
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain(job.env.iter().cloned())
        .chain(mark.env())
    {
        spec = spec.env(key, value);
    }
    clawpool_pty::resolve_program(
        spec.program.as_ref(),
        &job.dir,
        spec.env_value("PATH").as_deref(),
    )
    .map_err(LaneError::from)?;
    spec = spec.args(launch.args.iter());
    if let Some(size) = job.size {
        spec.size = size;
    }
    spec.raw_log = Some(RawLogConfig::new(&job.terminal_log));
    Ok(spec)
}

/// Checks what can be checked before anything is created: the prompt and the agent binary.
pub fn preflight(job: &LaneJob) -> Result<(), LaneError> {
    if let Some(prompt) = &job.prompt {
        check_prompt(prompt)
            .map_err(|e| LaneError::invalid("invalid_prompt", format!("lane {}: {e}", job.name)))?;
    }
    spawn_spec(job).map(drop)
}

/// How a lane's worker comes to be driven.
pub enum Start {
    /// Start the agent.
    Spawn,
    /// Carry on with a worker an earlier supervisor started (a tmux session that outlived
    /// it), from the lane's recorded state.
    Adopt {
        /// The re-attached worker.
        worker: Worker,
        /// The lane's state file as the earlier supervisor left it.
        doc: Box<WorkerStateDoc>,
    },
    /// Start the agent again in a lane that ended (stopped or finished), with the profile's
    /// resume arguments, so that its session goes on: the job's prompt is a follow-up, typed
    /// (never at launch) and verified as a new turn of that session, never the lane's task
    /// again. Recorded as `lane.restarted{by: "send", resume: true}`.
    Resume {
        /// The lane's state file as its last run left it.
        doc: Box<WorkerStateDoc>,
    },
}

/// Drives one lane to finished or failed (or until Ctrl-C).
pub async fn drive(job: LaneJob, start: Start) -> Result<LaneResult, LaneError> {
    let mut lane = open::open(job, start).await?;
    let abilities = LaneAbilities {
        profile: lane.job.profile.name().to_owned(),
        resumable: !lane.job.profile.manifest.launch.resume_args.is_empty(),
        has_branch: lane.job.checks.is_some(),
    };
    let (mut recovery, effects) = Recovery::new(
        Arc::clone(&lane.job.policy),
        &lane.job.name,
        abilities,
        lane.recorder.doc().recovery,
        state_file::now_secs(),
    );
    recovery_effects::carry_out(effects, &lane.job, &lane.events, &lane.recorder);
    let ended = lane.run(&mut recovery).await;
    Ok(lane.close(ended, &mut recovery).await)
}

/// The tmux session a lane's worker runs in: `lane-<name>`, with anything tmux cannot take in a
/// session name replaced.
pub fn session_name(lane: &str) -> String {
    format!("lane-{lane}").replace(
        |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
        "_",
    )
}

/// What the state file says about the lane's terminal: for tmux, the `SOCKET:SESSION` target.
pub fn transport_of(terminal: &Terminal, session: &str) -> state_file::Transport {
    match terminal {
        Terminal::Pty => state_file::Transport {
            kind: state_file::TransportKind::Pty,
            session: None,
        },
        Terminal::Tmux(server) => state_file::Transport {
            kind: state_file::TransportKind::Tmux,
            session: Some(format!("{}:{session}", server.socket_name())),
        },
    }
}

/// Keeps `.claw/` out of git through the repository's own exclude file, never a tracked file.
pub fn exclude_from_git(cwd: &Path) {
    if let Ok(repo) = clawpool_worktree::Repo::open(cwd) {
        let _ = repo.exclude_claw();
    }
}
