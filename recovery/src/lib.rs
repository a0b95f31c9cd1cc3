//! Recovery for clawpool: what recovery can heal, recovery recipes, the recovery ledger,
//! restart backoff, executable policy and hooks (`docs/recovery.md`, `docs/policy.md`).
//!
//! This crate decides; the supervisor acts. Everything here is pure logic over values the
//! supervisor passes in — screens as rows of text, lane states and facts, the ledger from the
//! state file, the current time as Unix epoch seconds — except [`run_hook`], which runs a
//! configured command. Nothing here touches a terminal, a worktree or a file. (The failure
//! class of a failed or blocked lane is set where its state changes, in the supervisor; this
//! crate reads it.)
//!
//! # Theory of operation
//!
//! 1. **Watch.** While a lane runs, the supervisor feeds every screen snapshot to a
//!    [`ProgressTracker`] ([`progress`]), and notes worktree changes, commits and lane events.
//!    Spinners, timers, clocks and token counters are not progress; new lines are. A running
//!    lane without progress for the policy's stall time is stalled.
//! 2. **Name.** When a lane fails, blocks or stalls, [`Trigger::of`] names what a recipe can
//!    heal from its state (its [`FailureClass`] or blocked subphase): the one answer the
//!    supervisor, `clawpool policy explain` and `clawpool recover` all use.
//! 3. **Decide.** The supervisor fills [`LaneFacts`] ([`facts`]) and evaluates the
//!    [`Policy`] ([`policy`]): rules in file order, `notify` rules along the way, the first
//!    other matching rule decides (recover with a recipe, merge forward, verify, close out,
//!    escalate). [`Policy::explain`] shows why.
//! 4. **Limit.** A `recover` decision goes through the lane's [`Ledger`] ([`ledger`]): one
//!    attempt at a time, at most `max_attempts` per window, then one `exhausted` entry and the
//!    recipe's escalation. Worker restarts are paced by a [`RestartTracker`] ([`restart`]):
//!    exponential backoff and a restart-intensity limit. Both live in the state file, so a
//!    supervisor restart neither loses nor repeats an attempt.
//! 5. **Act.** The supervisor carries the [`Recipe`]'s steps out against the worker
//!    ([`recipe`]), reporting each to a [`RecipeRun`], which says when the attempt succeeded,
//!    failed or escalated; every ledger change is a `lane.recovery.*` event.
//! 6. **Tell.** Configured hooks ([`hooks`]) get selected events as JSON on stdin; a hook
//!    that fails or hangs is reported and never holds a lane up.

pub mod duration;
pub mod facts;
pub mod hooks;
pub mod ledger;
pub mod permissions;
pub mod policy;
pub mod progress;
pub mod recipe;
pub mod restart;

pub use clawpool_lanes::FailureClass;
pub use duration::{DurationError, format_duration, parse_duration};
pub use facts::{Freshness, Green, GreenLevel, LaneFacts, RecoveryStatus};
pub use hooks::{
    DEFAULT_HOOK_TIMEOUT, EventSelector, HookCommand, HookError, HookOutcome, HookSpec, hooks_for,
    run_hook,
};
pub use ledger::{
    AttemptDecision, AttemptEnd, AttemptId, AttemptOrigin, AttemptState, Ledger, LedgerEntry,
    LedgerError, Queued, RecoveryLedger, event_payload,
};
pub use policy::{
    Action, ConditionCheck, Conditions, DEFAULT_POLICY, Decision, Location, Policy, PolicyError,
    Problem, Rule, RuleExplanation, RuleOutcome,
};
pub use progress::{DEFAULT_STALL_AFTER, ProgressSource, ProgressTracker, normalize_line};
pub use recipe::{
    DEFAULT_INTERRUPT_KEY, DEFAULT_NUDGE, Escalation, EscalationOutcome, Recipe, RecipeBook,
    RecipeError, RecipeOverride, RecipeRun, RunState, Step, StepOutcome, Trigger,
};
pub use restart::{RestartDecision, RestartPolicy, RestartRecord, RestartTracker};
