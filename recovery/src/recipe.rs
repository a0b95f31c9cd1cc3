//! The recipe book: what the supervisor does, step by step, to heal a lane.
//!
//! This module owns the recipes as data. A [`Recipe`] is a sequence of real actions against
//! the worker ([`Step`]) that the supervisor carries out, with a limit on attempts in a window
//! and an [`Escalation`] for when the limit is reached. The [`RecipeBook`] holds the built-in
//! recipes (one per [`Trigger`]), with their parameters (nudge text, waits, attempts, window,
//! restart pacing) overridable from configuration. [`RecipeRun`] is the semantics of carrying
//! one attempt out, step by step, as a small state machine the supervisor drives.
//!
//! How an attempt runs: actions are carried out in order; [`Step::WaitForProgress`] is a
//! check — progress within its time ends the attempt as **succeeded** and skips the rest;
//! [`Step::Escalate`] ends it as failed and raises the recipe's escalation; a step that cannot
//! be carried out ends it as failed. When the steps run out, the attempt succeeded if the
//! recipe has no check at all (all its actions were done), and failed otherwise (its last
//! check did not see progress).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use clawpool_lanes::{BlockedSubphase, FailureClass, LaneState, wire_name};
use serde::{Deserialize, Serialize};

use crate::duration::format_duration;
use crate::restart::RestartPolicy;

/// The nudge typed into a stalled agent after interrupting it.
pub const DEFAULT_NUDGE: &str =
    "Please continue with the task. If something blocks you, say what it is.";

/// The key that interrupts a working agent (Claude Code and Codex both show "esc to
/// interrupt"). Key names are those of `clawpool-pty` (`Esc`, `C-c`, `Enter`, …).
pub const DEFAULT_INTERRUPT_KEY: &str = "Esc";

/// Key names a recipe may send: those `clawpool-pty` knows (`pty/src/keys.rs`), any case.
pub const KEY_NAMES: [&str; 18] = [
    "enter",
    "return",
    "tab",
    "esc",
    "escape",
    "up",
    "down",
    "left",
    "right",
    "backspace",
    "bspace",
    "c-c",
    "ctrl-c",
    "c-d",
    "ctrl-d",
    "c-u",
    "ctrl-u",
    "0-9",
];

/// `name` is a key a recipe may send (case-insensitive; a single digit is a key).
pub fn is_known_key(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (lower.len() == 1 && lower.as_bytes()[0].is_ascii_digit())
        || KEY_NAMES.iter().any(|k| *k != "0-9" && *k == lower)
}

/// The situation a recipe heals: [`Trigger::of`] names it from a lane's state, the one answer
/// to "what can recovery heal" that the supervisor, `clawpool policy explain` and `clawpool
/// recover` all use; policy rules may match on it (`trigger = "stalled"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The trust prompt is still on screen on a lane whose folder is trusted.
    TrustPromptPersists,
    /// A dialog no profile rule knows is on screen.
    UnknownDialog,
    /// The prompt went somewhere other than the agent: a shell, or the agent died after Enter
    /// and before accepting it.
    PromptMisdelivered,
    /// The prompt was typed and submitted but the agent did not take it.
    PromptNotAccepted,
    /// A running lane made no meaningful progress for too long.
    Stalled,
    /// The worker crashed, exited non-zero, or was lost.
    WorkerExited,
    /// The model provider is unreachable; the agent is retrying.
    ProviderDown,
    /// The lane's branch fell behind (or diverged from) its base.
    StaleBranch,
}

impl Trigger {
    /// Every trigger.
    pub const ALL: [Trigger; 8] = [
        Trigger::TrustPromptPersists,
        Trigger::UnknownDialog,
        Trigger::PromptMisdelivered,
        Trigger::PromptNotAccepted,
        Trigger::Stalled,
        Trigger::WorkerExited,
        Trigger::ProviderDown,
        Trigger::StaleBranch,
    ];

    /// What recovery can heal in a lane in `state` (`prompt_sent`: a prompt was submitted to
    /// it): a worker that exited or was lost, a prompt that went to a shell, and the blocked
    /// subphases a recipe heals. A lane blocked on a question for a person (its trust prompt,
    /// a tool permission, a known boot dialog) has none: the policy hands it to a person.
    ///
    /// | state | trigger |
    /// |---|---|
    /// | `failed{worker_crashed}`, `failed{worker_lost}` | `worker_exited` |
    /// | `failed{prompt_delivery}` | `prompt_misdelivered` |
    /// | `blocked{stalled}` | `stalled` |
    /// | `blocked{unknown_dialog}` | `unknown_dialog` |
    /// | `blocked{provider}` | `provider_down` |
    /// | `blocked{branch_freshness}` | `stale_branch` |
    /// | `blocked{prompt_delivery}` after a prompt was submitted | `prompt_not_accepted` |
    /// | anything else | none |
    ///
    /// A running lane that stalls is `stalled` too, though not (yet) blocked: the handshake
    /// names that one itself, when it sees no progress.
    pub fn of(state: LaneState, prompt_sent: bool) -> Option<Trigger> {
        match state {
            LaneState::Failed(FailureClass::WorkerCrashed | FailureClass::WorkerLost) => {
                Some(Trigger::WorkerExited)
            }
            LaneState::Failed(FailureClass::PromptDelivery) => Some(Trigger::PromptMisdelivered),
            LaneState::Blocked(subphase) => match subphase {
                BlockedSubphase::Stalled => Some(Trigger::Stalled),
                BlockedSubphase::UnknownDialog => Some(Trigger::UnknownDialog),
                BlockedSubphase::Provider => Some(Trigger::ProviderDown),
                BlockedSubphase::BranchFreshness => Some(Trigger::StaleBranch),
                BlockedSubphase::PromptDelivery if prompt_sent => Some(Trigger::PromptNotAccepted),
                BlockedSubphase::PromptDelivery
                | BlockedSubphase::TrustPrompt
                | BlockedSubphase::ToolPermission
                | BlockedSubphase::BootDialog
                | BlockedSubphase::TestHang
                | BlockedSubphase::Budget => None,
            },
            _ => None,
        }
    }

    /// The failure classes this situation is classified as.
    pub fn classes(self) -> &'static [FailureClass] {
        match self {
            Trigger::TrustPromptPersists => &[FailureClass::TrustGate],
            Trigger::UnknownDialog => &[FailureClass::BootDialog],
            Trigger::PromptMisdelivered | Trigger::PromptNotAccepted => {
                &[FailureClass::PromptDelivery]
            }
            Trigger::Stalled => &[FailureClass::Stalled],
            Trigger::WorkerExited => &[FailureClass::WorkerCrashed, FailureClass::WorkerLost],
            Trigger::ProviderDown => &[FailureClass::Provider],
            Trigger::StaleBranch => &[FailureClass::BranchDivergence],
        }
    }

    /// The subphase a lane is blocked with when this situation escalates; `None` for a worker
    /// that exited, whose recipe fails the lane instead of blocking it.
    pub fn subphase(self) -> Option<BlockedSubphase> {
        match self {
            Trigger::TrustPromptPersists => Some(BlockedSubphase::TrustPrompt),
            Trigger::UnknownDialog => Some(BlockedSubphase::UnknownDialog),
            Trigger::PromptMisdelivered | Trigger::PromptNotAccepted => {
                Some(BlockedSubphase::PromptDelivery)
            }
            Trigger::ProviderDown => Some(BlockedSubphase::Provider),
            Trigger::StaleBranch => Some(BlockedSubphase::BranchFreshness),
            Trigger::Stalled => Some(BlockedSubphase::Stalled),
            Trigger::WorkerExited => None,
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&wire_name(self))
    }
}

impl FromStr for Trigger {
    type Err = RecipeError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Trigger::ALL
            .into_iter()
            .find(|t| t.to_string() == name)
            .ok_or_else(|| RecipeError::UnknownTrigger {
                name: name.to_owned(),
            })
    }
}

/// One real action against the worker, or a wait, or a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Answer the trust dialog on screen with the profile's "yes" (only on a lane whose folder
    /// is trusted; never anything else).
    AnswerTrust,
    /// Press Enter again on the draft already in the input line (never retyping it).
    Resubmit,
    /// Send one named key (`Esc`, `C-c`, …; `clawpool-pty`'s key names).
    SendKey(String),
    /// Pause.
    Wait(Duration),
    /// A check: wait up to this long for meaningful progress (a new screen line, a worktree
    /// change, a commit, or a lane event such as the prompt being accepted). Progress ends the
    /// attempt as succeeded.
    WaitForProgress(Duration),
    /// Type this text into the agent's idle input line and submit it, by the prompt's rules
    /// (waiting for the input line to be idle, verified as accepted); never into anything else.
    SendText(String),
    /// Stop the worker and start it again in the same worktree. `resume`: with the profile's
    /// resume arguments (the attempt fails if the profile has none). `redeliver_prompt`:
    /// deliver the lane's prompt again once it is ready.
    Restart {
        /// Start with the profile's resume arguments.
        resume: bool,
        /// Deliver the lane's prompt again.
        redeliver_prompt: bool,
    },
    /// Merge the lane's base into its branch (fails on conflicts or a dirty worktree).
    MergeForward,
    /// Stop and raise the recipe's escalation (no keys are pressed).
    Escalate,
}

impl Step {
    /// `wait_for_progress` and the like: the step's name as written in docs and events.
    pub fn name(&self) -> &'static str {
        match self {
            Step::AnswerTrust => "answer_trust",
            Step::Resubmit => "resubmit",
            Step::SendKey(_) => "send_key",
            Step::Wait(_) => "wait",
            Step::WaitForProgress(_) => "wait_for_progress",
            Step::SendText(_) => "send_text",
            Step::Restart { .. } => "restart",
            Step::MergeForward => "merge_forward",
            Step::Escalate => "escalate",
        }
    }

    fn is_check(&self) -> bool {
        matches!(self, Step::WaitForProgress(_))
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::SendKey(key) => write!(f, "send_key {key}"),
            Step::Wait(d) => write!(f, "wait {}", format_duration(*d)),
            Step::WaitForProgress(d) => write!(f, "wait_for_progress {}", format_duration(*d)),
            Step::SendText(text) => write!(f, "send_text {text:?}"),
            Step::Restart {
                resume,
                redeliver_prompt,
            } => {
                f.write_str("restart")?;
                if *resume {
                    f.write_str(" --resume")?;
                }
                if *redeliver_prompt {
                    f.write_str(" --redeliver-prompt")?;
                }
                Ok(())
            }
            other => f.write_str(other.name()),
        }
    }
}

/// What happens to the lane when a recipe's attempts are used up (or it escalates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EscalationOutcome {
    /// `lane.blocked` with the reason and next action: a person can still save the lane.
    Block,
    /// The lane fails (`recovery_exhausted` in the failure's detail).
    Fail,
}

/// What a recipe says when it gives up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    /// Why the lane needs a person (one line).
    pub reason: String,
    /// What the person should do next; `{lane}` stands for the lane's name.
    pub next_action: String,
    /// Whether the lane is blocked or failed.
    pub outcome: EscalationOutcome,
}

impl Escalation {
    /// The next action for `lane`, with `{lane}` filled in.
    pub fn next_action_for(&self, lane: &str) -> String {
        self.next_action.replace("{lane}", lane)
    }
}

/// A recovery recipe: steps, limits and escalation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// Its name (`restart_crashed_worker`, …), as policy rules and the ledger write it.
    pub name: String,
    /// One line: what it does.
    pub summary: String,
    /// The situation it heals.
    pub trigger: Trigger,
    /// What the supervisor does, in order.
    pub steps: Vec<Step>,
    /// At most this many automatic attempts …
    pub max_attempts: u32,
    /// … within this window; then the recipe is exhausted and escalates.
    pub window: Duration,
    /// Attempts wait out the restart backoff first, and `max_attempts`/`window` are the
    /// restart intensity ([`RestartPolicy`]).
    pub backoff: bool,
    /// What happens when attempts are used up.
    pub escalation: Escalation,
}

impl Recipe {
    /// The recipe has a [`Step::WaitForProgress`] check.
    pub fn has_check(&self) -> bool {
        self.steps.iter().any(Step::is_check)
    }
}

/// Why a recipe could not be found or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecipeError {
    /// No recipe has this name.
    #[error("unknown recipe {name:?}; recipes: {known}")]
    UnknownRecipe {
        /// The name given.
        name: String,
        /// Every recipe's name.
        known: String,
    },
    /// No trigger has this name.
    #[error("unknown trigger {name:?}; triggers: {}", Trigger::ALL.map(|t| t.to_string()).join(", "))]
    UnknownTrigger {
        /// The name given.
        name: String,
    },
    /// The override does not apply to this recipe, or its value is out of range.
    #[error("recipe {recipe}: {key}: {problem}")]
    BadOverride {
        /// The recipe.
        recipe: String,
        /// The parameter.
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// Configured changes to one recipe's parameters (`[recipes.NAME]` in the policy file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecipeOverride {
    /// Replaces `max_attempts` (at least 1).
    pub max_attempts: Option<u32>,
    /// Replaces `window`.
    pub window: Option<Duration>,
    /// Replaces the text of every [`Step::SendText`].
    pub nudge: Option<String>,
    /// Replaces the key of every [`Step::SendKey`].
    pub interrupt_key: Option<String>,
    /// Replaces the length of every [`Step::Wait`].
    pub wait: Option<Duration>,
    /// Replaces the time of every [`Step::WaitForProgress`].
    pub progress_timeout: Option<Duration>,
}

/// The recipes the supervisor knows, by name and by trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeBook {
    recipes: Vec<Recipe>,
    restart: RestartPolicy,
}

impl Default for RecipeBook {
    fn default() -> Self {
        Self::builtin()
    }
}

impl RecipeBook {
    /// The built-in recipes with their default parameters and the default restart policy.
    pub fn builtin() -> Self {
        Self::with_restart_policy(RestartPolicy::default())
    }

    /// The built-in recipes, with `restart_crashed_worker` paced by `restart`.
    pub fn with_restart_policy(restart: RestartPolicy) -> Self {
        let mins = |m: u64| Duration::from_secs(m * 60);
        let secs = Duration::from_secs;
        let block = |reason: &str, next_action: &str| Escalation {
            reason: reason.to_owned(),
            next_action: next_action.to_owned(),
            outcome: EscalationOutcome::Block,
        };
        let recipe = |name: &str, summary: &str, trigger, steps, window, escalation| Recipe {
            name: name.to_owned(),
            summary: summary.to_owned(),
            trigger,
            steps,
            max_attempts: 1,
            window,
            backoff: false,
            escalation,
        };
        let recipes = vec![
            recipe(
                "answer_trust_again",
                "answer the trust prompt of a trusted lane once more",
                Trigger::TrustPromptPersists,
                vec![Step::AnswerTrust, Step::WaitForProgress(secs(30))],
                mins(30),
                block(
                    "the trust prompt is still showing after answering it again",
                    "attach to the lane and answer the trust dialog (`clawpool trust {lane}`), \
                     or check the agent's trust store",
                ),
            ),
            recipe(
                "escalate_unknown_dialog",
                "hand a dialog no profile knows to a person, with the screen excerpt; no keys \
                 are pressed",
                Trigger::UnknownDialog,
                vec![Step::Escalate],
                mins(30),
                block(
                    "a dialog no profile rule knows is on screen; nothing was pressed",
                    "read the screen excerpt, answer the dialog in the lane's terminal \
                     (`clawpool answer {lane} --choice CHOICE` when it is a known dialog), then add a dialog rule to \
                     the agent's profile",
                ),
            ),
            recipe(
                "restart_after_misdelivery",
                "the prompt went to a shell: never type into it; restart the worker in the \
                 same worktree and deliver the prompt again",
                Trigger::PromptMisdelivered,
                vec![
                    Step::Restart {
                        resume: false,
                        redeliver_prompt: true,
                    },
                    Step::WaitForProgress(mins(2)),
                ],
                mins(30),
                block(
                    "the prompt was misdelivered again after restarting the worker",
                    "check the agent profile's launch command and the lane's terminal \
                     (`clawpool state {lane}`); nothing was typed into the shell",
                ),
            ),
            recipe(
                "resubmit_prompt",
                "press Enter once more on the prompt's draft; if it is still not taken, \
                 restart the worker and deliver the prompt again",
                Trigger::PromptNotAccepted,
                vec![
                    Step::Resubmit,
                    Step::WaitForProgress(secs(30)),
                    Step::Restart {
                        resume: false,
                        redeliver_prompt: true,
                    },
                    Step::WaitForProgress(mins(2)),
                ],
                mins(30),
                block(
                    "the prompt was not accepted after re-submitting it and restarting the \
                     worker",
                    "attach to the lane and look at its input line; deliver the prompt with \
                     `clawpool send {lane} TEXT`",
                ),
            ),
            recipe(
                "interrupt_and_nudge",
                "interrupt a stalled agent, wait, nudge it to continue; if it is still \
                 stalled, restart it with its resume option and nudge again",
                Trigger::Stalled,
                vec![
                    Step::SendKey(DEFAULT_INTERRUPT_KEY.to_owned()),
                    Step::Wait(secs(3)),
                    Step::SendText(DEFAULT_NUDGE.to_owned()),
                    Step::WaitForProgress(mins(2)),
                    Step::Restart {
                        resume: true,
                        redeliver_prompt: false,
                    },
                    Step::SendText(DEFAULT_NUDGE.to_owned()),
                    Step::WaitForProgress(mins(3)),
                ],
                mins(60),
                block(
                    "still no progress after interrupting, nudging and restarting with resume",
                    "attach to the lane and see what the agent is doing; stop it \
                     (`clawpool stop {lane}`) if it is going nowhere",
                ),
            ),
            Recipe {
                max_attempts: restart.intensity,
                window: restart.intensity_window,
                backoff: true,
                ..recipe(
                    "restart_crashed_worker",
                    "restart a worker that crashed, exited non-zero or was lost, in the same \
                     worktree, after the restart backoff, and deliver the prompt again",
                    Trigger::WorkerExited,
                    vec![
                        Step::Restart {
                            resume: false,
                            redeliver_prompt: true,
                        },
                        Step::WaitForProgress(mins(2)),
                    ],
                    restart.intensity_window,
                    Escalation {
                        reason: "recovery_exhausted: the worker kept exiting after restarts"
                            .to_owned(),
                        next_action: "read the lane's events and raw log (`clawpool events \
                                      {lane}`), fix the cause, then `clawpool recover {lane} \
                                      --recipe restart_crashed_worker`"
                            .to_owned(),
                        outcome: EscalationOutcome::Fail,
                    },
                )
            },
            recipe(
                "wait_for_provider",
                "the provider is down: let the agent retry by itself, escalate after a limit",
                Trigger::ProviderDown,
                vec![Step::WaitForProgress(mins(15)), Step::Escalate],
                mins(60),
                block(
                    "the model provider is still unreachable; the agent keeps retrying",
                    "check the provider's status, the network and the credentials; the lane \
                     goes back to running by itself when the agent gets through",
                ),
            ),
            recipe(
                "merge_forward_stale_branch",
                "merge the lane's base into its stale branch",
                Trigger::StaleBranch,
                vec![Step::MergeForward],
                mins(60),
                block(
                    "merging the base into the lane's branch failed (conflicts or a dirty \
                     worktree)",
                    "resolve it in the lane's worktree and commit, then `clawpool recover \
                     {lane} --recipe merge_forward_stale_branch`",
                ),
            ),
        ];
        Self { recipes, restart }
    }

    /// The recipe called `name`.
    pub fn get(&self, name: &str) -> Option<&Recipe> {
        self.recipes.iter().find(|r| r.name == name)
    }

    /// The recipe called `name`, or an error listing every recipe.
    pub fn require(&self, name: &str) -> Result<&Recipe, RecipeError> {
        self.get(name).ok_or_else(|| RecipeError::UnknownRecipe {
            name: name.to_owned(),
            known: self.names().join(", "),
        })
    }

    /// The recipe that heals `trigger`.
    pub fn for_trigger(&self, trigger: Trigger) -> Option<&Recipe> {
        self.recipes.iter().find(|r| r.trigger == trigger)
    }

    /// Every recipe's name, in book order.
    pub fn names(&self) -> Vec<&str> {
        self.recipes.iter().map(|r| r.name.as_str()).collect()
    }

    /// Every recipe, in book order.
    pub fn recipes(&self) -> &[Recipe] {
        &self.recipes
    }

    /// How worker restarts are paced.
    pub fn restart_policy(&self) -> &RestartPolicy {
        &self.restart
    }

    /// Replaces the restart policy; the backoff recipe's attempts and window follow its
    /// intensity.
    pub fn set_restart_policy(&mut self, restart: RestartPolicy) {
        for recipe in self.recipes.iter_mut().filter(|r| r.backoff) {
            recipe.max_attempts = restart.intensity;
            recipe.window = restart.intensity_window;
        }
        self.restart = restart;
    }

    /// Applies configured parameters to the recipe called `name`. A parameter the recipe has
    /// no step for (a nudge for a recipe that types nothing) is an error, as is an unknown
    /// key name or zero attempts. For the backoff recipe, `max_attempts` and `window` set the
    /// restart intensity.
    pub fn apply_override(
        &mut self,
        name: &str,
        change: &RecipeOverride,
    ) -> Result<(), RecipeError> {
        let known = self.names().join(", ");
        let recipe = self
            .recipes
            .iter_mut()
            .find(|r| r.name == name)
            .ok_or_else(|| RecipeError::UnknownRecipe {
                name: name.to_owned(),
                known,
            })?;
        let bad = |key, problem: &str| RecipeError::BadOverride {
            recipe: name.to_owned(),
            key,
            problem: problem.to_owned(),
        };
        if change.max_attempts == Some(0) {
            return Err(bad("max_attempts", "must be at least 1"));
        }
        if change.window == Some(Duration::ZERO) {
            return Err(bad("window", "must be longer than 0s"));
        }
        if let Some(key) = &change.interrupt_key
            && !is_known_key(key)
        {
            return Err(bad(
                "interrupt_key",
                &format!("unknown key name {key:?} (Esc, C-c, Enter, Tab, …)"),
            ));
        }
        if let Some(text) = &change.nudge
            && text.trim().is_empty()
        {
            return Err(bad("nudge", "must not be empty"));
        }
        let has = |pred: fn(&Step) -> bool| recipe.steps.iter().any(pred);
        let checks: [(&'static str, bool, bool); 4] = [
            (
                "nudge",
                change.nudge.is_some(),
                has(|s| matches!(s, Step::SendText(_))),
            ),
            (
                "interrupt_key",
                change.interrupt_key.is_some(),
                has(|s| matches!(s, Step::SendKey(_))),
            ),
            (
                "wait",
                change.wait.is_some(),
                has(|s| matches!(s, Step::Wait(_))),
            ),
            (
                "progress_timeout",
                change.progress_timeout.is_some(),
                has(|s| matches!(s, Step::WaitForProgress(_))),
            ),
        ];
        for (key, given, applies) in checks {
            if given && !applies {
                return Err(bad(key, "this recipe has no such step"));
            }
        }
        for step in &mut recipe.steps {
            match step {
                Step::SendText(text) => {
                    if let Some(nudge) = &change.nudge {
                        text.clone_from(nudge);
                    }
                }
                Step::SendKey(key) => {
                    if let Some(k) = &change.interrupt_key {
                        key.clone_from(k);
                    }
                }
                Step::Wait(d) => *d = change.wait.unwrap_or(*d),
                Step::WaitForProgress(d) => *d = change.progress_timeout.unwrap_or(*d),
                _ => {}
            }
        }
        if let Some(n) = change.max_attempts {
            recipe.max_attempts = n;
        }
        if let Some(window) = change.window {
            recipe.window = window;
        }
        if recipe.backoff {
            let (intensity, intensity_window) = (recipe.max_attempts, recipe.window);
            self.restart.intensity = intensity;
            self.restart.intensity_window = intensity_window;
        }
        Ok(())
    }
}

/// How a step went, as the supervisor reports it to [`RecipeRun::advance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// An action or a wait was carried out.
    Done,
    /// A check saw meaningful progress (what it was, for the ledger).
    Progress(String),
    /// A check's time ran out without progress.
    NoProgress,
    /// The step could not be carried out (why: the worker is gone, the profile has no resume
    /// option, the merge conflicted, …).
    Failed(String),
}

/// Where an attempt is after a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Carry out [`RecipeRun::current`] next.
    Continue,
    /// The lane healed: the attempt succeeded (the ledger's `result`).
    Succeeded(String),
    /// The attempt failed (the ledger's `result`).
    Failed(String),
    /// The recipe escalated: the attempt failed, and the recipe's [`Escalation`] is raised now.
    Escalated(String),
}

/// One attempt of a recipe being carried out: which step is next, and what the attempt's end
/// is once the steps say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeRun {
    recipe: Recipe,
    next: usize,
    over: bool,
}

impl RecipeRun {
    /// An attempt of `recipe`, at its first step.
    pub fn new(recipe: Recipe) -> Self {
        Self {
            recipe,
            next: 0,
            over: false,
        }
    }

    /// The recipe.
    pub fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    /// The step to carry out now (with its index, from 0); `None` once the attempt is over.
    pub fn current(&self) -> Option<(usize, &Step)> {
        if self.over {
            return None;
        }
        self.recipe.steps.get(self.next).map(|s| (self.next, s))
    }

    /// Reports how the current step went and moves on.
    pub fn advance(&mut self, outcome: StepOutcome) -> RunState {
        let Some((index, step)) = self.current() else {
            return RunState::Failed("the attempt is already over".to_owned());
        };
        let label = format!("step {} ({step})", index + 1);
        let state = match (step, outcome) {
            (_, StepOutcome::Failed(why)) => {
                RunState::Failed(format!("{label} could not be carried out: {why}"))
            }
            (Step::Escalate, _) => RunState::Escalated(format!(
                "{label}: escalated: {}",
                self.recipe.escalation.reason
            )),
            (_, StepOutcome::Progress(what)) => {
                RunState::Succeeded(format!("{label}: progress: {what}"))
            }
            (_, StepOutcome::NoProgress | StepOutcome::Done) => {
                self.next += 1;
                if self.next < self.recipe.steps.len() {
                    RunState::Continue
                } else if self.recipe.has_check() {
                    RunState::Failed(format!("{label}: no progress; the recipe's steps ran out"))
                } else {
                    RunState::Succeeded(format!("{label}: done"))
                }
            }
        };
        if state != RunState::Continue {
            self.over = true;
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state a lane can be in, and what recovery can heal there: the one table the
    /// driver, `policy explain` and `recover` share.
    #[test]
    fn what_recovery_can_heal_in_every_state() {
        use crate::facts::{ALL_FAILURE_CLASSES, ALL_STATUSES, ALL_SUBPHASES};
        for status in ALL_STATUSES {
            if let Some(state) = LaneState::of_plain(status) {
                for sent in [false, true] {
                    assert_eq!(Trigger::of(state, sent), None, "{status:?}");
                }
            }
        }
        for class in ALL_FAILURE_CLASSES {
            let expected = match class {
                FailureClass::WorkerCrashed | FailureClass::WorkerLost => {
                    Some(Trigger::WorkerExited)
                }
                FailureClass::PromptDelivery => Some(Trigger::PromptMisdelivered),
                _ => None,
            };
            assert_eq!(
                Trigger::of(LaneState::Failed(class), true),
                expected,
                "{class:?}"
            );
        }
        for subphase in ALL_SUBPHASES {
            let (before, after) = match subphase {
                BlockedSubphase::Stalled => (Some(Trigger::Stalled), Some(Trigger::Stalled)),
                BlockedSubphase::UnknownDialog => {
                    (Some(Trigger::UnknownDialog), Some(Trigger::UnknownDialog))
                }
                BlockedSubphase::Provider => {
                    (Some(Trigger::ProviderDown), Some(Trigger::ProviderDown))
                }
                BlockedSubphase::BranchFreshness => {
                    (Some(Trigger::StaleBranch), Some(Trigger::StaleBranch))
                }
                BlockedSubphase::PromptDelivery => (None, Some(Trigger::PromptNotAccepted)),
                _ => (None, None),
            };
            let state = LaneState::Blocked(subphase);
            assert_eq!(
                Trigger::of(state, false),
                before,
                "{subphase:?} before a prompt"
            );
            assert_eq!(
                Trigger::of(state, true),
                after,
                "{subphase:?} after a prompt"
            );
            // Every trigger named for a blocked lane blocks it with that same subphase when it
            // escalates.
            if let Some(trigger) = after {
                assert_eq!(trigger.subphase(), Some(subphase));
                assert!(trigger.classes().contains(&subphase.failure_class()));
            }
        }
    }

    #[test]
    fn every_trigger_has_exactly_one_builtin_recipe() {
        let book = RecipeBook::builtin();
        for trigger in Trigger::ALL {
            let recipes: Vec<_> = book
                .recipes()
                .iter()
                .filter(|r| r.trigger == trigger)
                .collect();
            assert_eq!(recipes.len(), 1, "{trigger}");
            assert_eq!(book.for_trigger(trigger), Some(recipes[0]));
            assert_eq!(trigger.to_string().parse::<Trigger>(), Ok(trigger));
            assert!(!trigger.classes().is_empty());
        }
        assert_eq!(
            book.names(),
            [
                "answer_trust_again",
                "escalate_unknown_dialog",
                "restart_after_misdelivery",
                "resubmit_prompt",
                "interrupt_and_nudge",
                "restart_crashed_worker",
                "wait_for_provider",
                "merge_forward_stale_branch"
            ]
        );
    }

    #[test]
    fn builtin_recipes_have_their_documented_shape() {
        let book = RecipeBook::builtin();
        let steps = |name: &str| {
            book.get(name)
                .expect("recipe")
                .steps
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            steps("resubmit_prompt"),
            [
                "resubmit",
                "wait_for_progress 30s",
                "restart --redeliver-prompt",
                "wait_for_progress 2m"
            ]
        );
        assert_eq!(
            steps("interrupt_and_nudge")[..5],
            [
                "send_key Esc".to_owned(),
                "wait 3s".to_owned(),
                format!("send_text {DEFAULT_NUDGE:?}"),
                "wait_for_progress 2m".to_owned(),
                "restart --resume".to_owned(),
            ]
        );
        assert_eq!(steps("escalate_unknown_dialog"), ["escalate"]);
        assert!(
            !steps("restart_after_misdelivery")
                .iter()
                .any(|s| s.starts_with("send_text") || s == "resubmit"),
            "nothing is ever typed into a shell"
        );
        let restart = book.get("restart_crashed_worker").expect("recipe");
        assert!(restart.backoff);
        assert_eq!((restart.max_attempts, restart.window.as_secs()), (3, 900));
        assert_eq!(restart.escalation.outcome, EscalationOutcome::Fail);
        for recipe in book.recipes().iter().filter(|r| !r.backoff) {
            assert_eq!(recipe.max_attempts, 1, "{}", recipe.name);
            assert_eq!(recipe.escalation.outcome, EscalationOutcome::Block);
        }
        assert_eq!(
            restart.escalation.next_action_for("fix-login"),
            "read the lane's events and raw log (`clawpool events fix-login`), fix the \
             cause, then `clawpool recover fix-login --recipe restart_crashed_worker`"
        );
    }

    #[test]
    fn overrides_change_parameters_and_refuse_what_does_not_apply() {
        let mut book = RecipeBook::builtin();
        book.apply_override(
            "interrupt_and_nudge",
            &RecipeOverride {
                nudge: Some("go on".into()),
                interrupt_key: Some("C-c".into()),
                wait: Some(Duration::from_secs(5)),
                progress_timeout: Some(Duration::from_secs(90)),
                max_attempts: Some(2),
                window: Some(Duration::from_secs(7200)),
            },
        )
        .expect("applies");
        let recipe = book.get("interrupt_and_nudge").expect("recipe");
        assert_eq!(recipe.steps[0], Step::SendKey("C-c".into()));
        assert_eq!(recipe.steps[1], Step::Wait(Duration::from_secs(5)));
        assert_eq!(recipe.steps[2], Step::SendText("go on".into()));
        assert_eq!(recipe.steps[5], Step::SendText("go on".into()));
        assert_eq!(
            recipe.steps[6],
            Step::WaitForProgress(Duration::from_secs(90))
        );
        assert_eq!((recipe.max_attempts, recipe.window.as_secs()), (2, 7200));

        let refused = [
            (
                "answer_trust_again",
                RecipeOverride {
                    nudge: Some("hi".into()),
                    ..RecipeOverride::default()
                },
                "recipe answer_trust_again: nudge: this recipe has no such step",
            ),
            (
                "interrupt_and_nudge",
                RecipeOverride {
                    interrupt_key: Some("F13".into()),
                    ..RecipeOverride::default()
                },
                "recipe interrupt_and_nudge: interrupt_key: unknown key name \"F13\"",
            ),
            (
                "resubmit_prompt",
                RecipeOverride {
                    max_attempts: Some(0),
                    ..RecipeOverride::default()
                },
                "recipe resubmit_prompt: max_attempts: must be at least 1",
            ),
            (
                "no_such_recipe",
                RecipeOverride::default(),
                "unknown recipe \"no_such_recipe\"; recipes: answer_trust_again, ",
            ),
        ];
        for (name, change, message) in refused {
            let err = book.apply_override(name, &change).expect_err(name);
            assert!(err.to_string().starts_with(message), "{err}");
        }
    }

    #[test]
    fn the_backoff_recipe_follows_the_restart_intensity() {
        let mut book = RecipeBook::builtin();
        book.apply_override(
            "restart_crashed_worker",
            &RecipeOverride {
                max_attempts: Some(5),
                window: Some(Duration::from_secs(1800)),
                ..RecipeOverride::default()
            },
        )
        .expect("applies");
        assert_eq!(book.restart_policy().intensity, 5);
        assert_eq!(book.restart_policy().intensity_window.as_secs(), 1800);
        book.set_restart_policy(RestartPolicy::default());
        let recipe = book.get("restart_crashed_worker").expect("recipe");
        assert_eq!((recipe.max_attempts, recipe.window.as_secs()), (3, 900));
    }

    #[test]
    fn progress_at_a_check_ends_the_attempt_as_succeeded() {
        let book = RecipeBook::builtin();
        let mut run = RecipeRun::new(book.get("resubmit_prompt").expect("recipe").clone());
        assert_eq!(run.current(), Some((0, &Step::Resubmit)));
        assert_eq!(run.advance(StepOutcome::Done), RunState::Continue);
        assert_eq!(
            run.advance(StepOutcome::Progress("prompt accepted".into())),
            RunState::Succeeded("step 2 (wait_for_progress 30s): progress: prompt accepted".into())
        );
        assert_eq!(run.current(), None);
    }

    #[test]
    fn a_check_without_progress_moves_on_and_the_last_one_fails_the_attempt() {
        let book = RecipeBook::builtin();
        let mut run = RecipeRun::new(book.get("resubmit_prompt").expect("recipe").clone());
        for outcome in [
            StepOutcome::Done,
            StepOutcome::NoProgress,
            StepOutcome::Done,
        ] {
            assert_eq!(run.advance(outcome), RunState::Continue);
        }
        assert_eq!(
            run.advance(StepOutcome::NoProgress),
            RunState::Failed(
                "step 4 (wait_for_progress 2m): no progress; the recipe's steps ran out".into()
            )
        );
    }

    #[test]
    fn a_step_that_cannot_be_done_fails_and_escalate_escalates() {
        let book = RecipeBook::builtin();
        let mut run = RecipeRun::new(book.get("interrupt_and_nudge").expect("recipe").clone());
        for outcome in [
            StepOutcome::Done,
            StepOutcome::Done,
            StepOutcome::Done,
            StepOutcome::NoProgress,
        ] {
            assert_eq!(run.advance(outcome), RunState::Continue);
        }
        assert_eq!(
            run.advance(StepOutcome::Failed(
                "the profile has no resume option".into()
            )),
            RunState::Failed(
                "step 5 (restart --resume) could not be carried out: the profile has no \
                 resume option"
                    .into()
            )
        );

        let mut run = RecipeRun::new(book.get("wait_for_provider").expect("recipe").clone());
        assert_eq!(run.advance(StepOutcome::NoProgress), RunState::Continue);
        assert!(matches!(
            run.advance(StepOutcome::Done),
            RunState::Escalated(reason) if reason.contains("still unreachable")
        ));

        let mut run = RecipeRun::new(
            book.get("merge_forward_stale_branch")
                .expect("recipe")
                .clone(),
        );
        assert_eq!(
            run.advance(StepOutcome::Done),
            RunState::Succeeded("step 1 (merge_forward): done".into())
        );
        assert_eq!(
            run.advance(StepOutcome::Done),
            RunState::Failed("the attempt is already over".into())
        );
    }

    #[test]
    fn key_names_follow_the_terminal_crate() {
        for key in ["Esc", "escape", "C-c", "Ctrl-C", "Enter", "7"] {
            assert!(is_known_key(key), "{key}");
        }
        for key in ["F13", "0-9", "", "ctrl-z"] {
            assert!(!is_known_key(key), "{key}");
        }
    }
}
