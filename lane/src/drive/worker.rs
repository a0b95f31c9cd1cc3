//! The lane's worker: starting it on the lane's terminal (with the prompt at launch when that
//! is how it goes in), replacing a session an earlier supervisor left, and starting it again
//! for a restart, with what a restart must carry (the prompt again or not, resume arguments).

use std::sync::Arc;

use clawpool_agents::profiles::Profile;
use clawpool_lanes::payload::{Payload, Restarted, SessionReplaced};
use clawpool_lanes::{EventLog, LaneState};
use clawpool_pty::{SpawnSpec, Worker};

use super::Terminal;
use crate::channel::ClaudeSettings;
use crate::handshake::{LaneContext, Next, Outcome, PromptPlan, RestartRequest, machine};
use crate::lane_state::StateRecorder;
use crate::sandbox::Sandbox;

/// The spawn spec with the prompt passed at launch, when that is how it goes in.
pub(super) fn with_prompt(spec: SpawnSpec, profile: &Profile, plan: &PromptPlan) -> SpawnSpec {
    match plan {
        PromptPlan::LaunchArg { prompt } => spec.args(
            profile
                .manifest
                .launch
                .prompt_args
                .iter()
                .map(|a| a.replace("{prompt}", prompt)),
        ),
        _ => spec,
    }
}

/// What starting a lane's worker again needs.
pub(super) struct Rig {
    pub(super) name: String,
    pub(super) profile: Arc<Profile>,
    pub(super) terminal: Terminal,
    /// The lane as the next handshake sees it (its prompt: none once taken, unless delivered
    /// again).
    pub(super) lane: LaneContext,
    /// How the lane's prompt goes in.
    pub(super) plan: PromptPlan,
    /// The agent's spawn spec without the prompt.
    pub(super) base_spec: SpawnSpec,
    pub(super) session: String,
    pub(super) events: Arc<EventLog>,
    pub(super) recorder: StateRecorder,
    pub(super) restarts: u32,
    /// The last restart dropped the turn the agent was in (taken, not delivered again).
    pub(super) dropped_turn: bool,
    /// The sandbox every worker of the lane starts in.
    pub(super) sandbox: Option<Arc<Sandbox>>,
    /// Claude Code's settings file, written anew before each start.
    pub(super) claude_settings: Option<ClaudeSettings>,
}

impl Rig {
    /// Starts a new worker in the lane's folder after `outcome`'s has stopped; the lane fails
    /// (and that is the `Err`) when it cannot be started.
    pub(super) async fn restart(
        &mut self,
        outcome: &Outcome,
        request: &RestartRequest,
    ) -> Result<Worker, Outcome> {
        self.restarts += 1;
        let accepted = outcome.receipt.accepted_at.is_some();
        self.lane.prompt = if request.redeliver || !accepted {
            self.plan.clone()
        } else {
            PromptPlan::None
        };
        // A turn the agent was in is dropped with its worker unless its prompt goes in again;
        // one dropped earlier stays dropped while the lane sits idle.
        let mid_turn = outcome.state.in_turn();
        let redelivered = !matches!(self.lane.prompt, PromptPlan::None);
        self.dropped_turn = !redelivered
            && accepted
            && (mid_turn || (self.dropped_turn && outcome.state == LaneState::ReadyForPrompt));
        let mut spec = with_prompt(self.base_spec.clone(), &self.profile, &self.lane.prompt);
        let resume_args = &self.profile.manifest.launch.resume_args;
        let resume = request.resume && !resume_args.is_empty();
        if resume {
            spec = spec.args(resume_args.iter());
        }
        if let Terminal::Tmux(server) = &self.terminal {
            let _ = server.kill_session(&self.session).await;
        }
        let worker_id = format!("{}-{}-r{}", self.name, std::process::id(), self.restarts);
        self.recorder
            .update(|doc| doc.worker_id = worker_id.clone());
        let restarted = Restarted {
            by: request.by.clone(),
            restart: self.restarts,
            worker_id,
            resume,
            redeliver_prompt: !matches!(self.lane.prompt, PromptPlan::None),
            dropped_turn: self.dropped_turn,
            previous: outcome.state.to_string(),
            previous_exit: outcome.exit.clone(),
        };
        let _ = self
            .events
            .report(Payload::Restarted(restarted), None, None, None);
        let written = self.claude_settings.as_ref().map(ClaudeSettings::write);
        let started = match written.transpose() {
            Ok(_) => start_worker(&self.terminal, &self.session, spec, self.sandbox.as_deref())
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("writing the lane's hook settings: {e}")),
        };
        match started {
            Ok(worker) => Ok(worker),
            Err(err) => {
                let failed = machine::start_failed(outcome.state, err);
                let state = failed.to.unwrap_or(outcome.state);
                let _ = failed.append_to(&self.events);
                Err(Outcome {
                    state,
                    next: Next::Done,
                    ..outcome.clone()
                })
            }
        }
    }
}

/// How many times the lane's worker was started again, from its worker id (`-rN` is the
/// N-th restart, whichever supervisor made it); 0 for a worker never restarted.
pub(super) fn restarts_of(worker_id: &str) -> u32 {
    worker_id
        .rsplit_once("-r")
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// Starts the lane's agent on its terminal, in the lane's sandbox when it has one.
pub(super) async fn start_worker(
    terminal: &Terminal,
    session: &str,
    spec: SpawnSpec,
    sandbox: Option<&Sandbox>,
) -> Result<Worker, clawpool_pty::SpawnError> {
    let spec = match sandbox {
        Some(sandbox) => sandbox.wrap(spec),
        None => spec,
    };
    match terminal {
        Terminal::Pty => Worker::spawn_pty(spec).await,
        Terminal::Tmux(server) => server.spawn(session, spec).await,
    }
}

/// A session of the lane's name already on the server was left by a supervisor that ended
/// (killed, or the machine went down) while the lane ran: its agent is stopped with it and the
/// replacement recorded, so the lane starts afresh and no agent is left working unwatched.
pub(super) async fn replace_leftover_session(
    terminal: &Terminal,
    session: &str,
    events: &EventLog,
) {
    let Terminal::Tmux(server) = terminal else {
        return;
    };
    let leftover = server
        .sessions()
        .await
        .is_ok_and(|sessions| sessions.iter().any(|s| s == session));
    if !leftover {
        return;
    }
    let killed = server.kill_session(session).await;
    let replaced = SessionReplaced {
        session: format!("{}:{session}", server.socket_name()),
        killed: killed.is_ok(),
        error: killed.err().map(|e| e.to_string()),
    };
    let _ = events.report(Payload::SessionReplaced(replaced), None, None, None);
}
