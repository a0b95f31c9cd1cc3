//! The recovery ledger's logic: recording attempts and deciding whether another may run.
//!
//! This module owns the rules over a lane's [`RecoveryLedger`] (whose shape lives in
//! `clawpool-lanes`, so the state file can embed it). Every attempt is an entry that moves
//! `queued → running → succeeded | failed`; a refused attempt is an `exhausted` entry. The
//! rules:
//!
//! - **One attempt at a time per lane.** While an entry is queued or running, nothing else is
//!   queued ([`AttemptDecision::Busy`]).
//! - **Limits.** A recipe gets at most `max_attempts` automatic attempts within its `window`
//!   (counted by when they were queued). One more is refused: an `exhausted` entry is
//!   recorded once, and the recipe's escalation is raised.
//! - **Exhaustion is sticky** — even after the window passed — until an operator runs the
//!   recipe by hand ([`AttemptOrigin::Operator`]). An operator attempt is never refused (except
//!   while another attempt is under way), and automatic attempts are counted afresh after it.
//! - **No recovery attempted ≠ recovery exhausted**: an empty ledger is
//!   [`RecoveryStatus::None`]; a ledger whose last word is a refusal is
//!   [`RecoveryStatus::Exhausted`].
//! - **A supervisor restart neither loses nor repeats an attempt** ([`Ledger::adopt`]): an
//!   attempt that was running when its supervisor died is closed as failed (its steps may have
//!   half happened, so they are not run again blindly), and queued ones are handed back to be
//!   carried out.
//!
//! Every change is also a lane event: [`Ledger::event`] gives its kind
//! (`lane.recovery.queued`, …) and detail. Times are Unix epoch seconds.

use clawpool_lanes::payload::{Payload, RecoveryAttempt};
use std::collections::BTreeMap;
use std::time::Duration;

pub use clawpool_lanes::state_file::{AttemptOrigin, AttemptState, LedgerEntry, RecoveryLedger};

use crate::facts::RecoveryStatus;
use crate::recipe::Recipe;

/// Identifies an entry of a [`Ledger`] (its index in `entries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttemptId(pub usize);

/// Whether another attempt of a recipe may run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptDecision {
    /// Yes: it would be attempt number `attempt` of the recipe.
    Attempt {
        /// Its number, from 1.
        attempt: u32,
    },
    /// No: another attempt on the lane is queued or running.
    Busy {
        /// That attempt.
        id: AttemptId,
    },
    /// No: the recipe's attempts are used up.
    Exhausted {
        /// Automatic attempts counted against the limit.
        attempts: u32,
        /// The recipe's window.
        window: Duration,
        /// The `exhausted` entry already recorded, if any (exhaustion is sticky).
        entry: Option<AttemptId>,
    },
}

/// What [`Ledger::queue`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queued {
    /// A `queued` entry was added: carry the attempt out.
    Attempt {
        /// The entry.
        id: AttemptId,
        /// Its attempt number.
        attempt: u32,
    },
    /// Nothing was added: another attempt is under way.
    Busy {
        /// That attempt.
        id: AttemptId,
    },
    /// The recipe is exhausted. `newly`: this call recorded the `exhausted` entry (raise the
    /// escalation now); otherwise it had been recorded before (do not escalate again).
    Exhausted {
        /// The `exhausted` entry.
        id: AttemptId,
        /// This call recorded it.
        newly: bool,
    },
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// The lane healed.
    Succeeded,
    /// It did not.
    Failed,
}

/// A ledger operation that does not fit the entry it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// No entry has this id.
    #[error("no recovery attempt #{0}")]
    UnknownAttempt(usize),
    /// The entry is not in a state that allows the change.
    #[error("recovery attempt #{id} is {from:?}; it cannot become {to:?}")]
    BadTransition {
        /// The entry.
        id: usize,
        /// Its state.
        from: AttemptState,
        /// The state asked for.
        to: AttemptState,
    },
}

/// A lane's recovery ledger with its rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    record: RecoveryLedger,
}

impl Ledger {
    /// An empty ledger: no recovery attempted.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ledger read back from the state file.
    pub fn from_record(record: RecoveryLedger) -> Self {
        Self { record }
    }

    /// What the state file stores (write it after every change).
    pub fn record(&self) -> &RecoveryLedger {
        &self.record
    }

    /// The record, for changing what this module does not own (the restart bookkeeping).
    pub fn record_mut(&mut self) -> &mut RecoveryLedger {
        &mut self.record
    }

    /// The record, giving the ledger up.
    pub fn into_record(self) -> RecoveryLedger {
        self.record
    }

    /// The entry `id`.
    pub fn entry(&self, id: AttemptId) -> Option<&LedgerEntry> {
        self.record.entries.get(id.0)
    }

    /// The attempt under way (queued or running), if any.
    pub fn in_progress(&self) -> Option<AttemptId> {
        self.record
            .entries
            .iter()
            .position(|e| !e.state.is_final())
            .map(AttemptId)
    }

    /// Whether an automatic attempt of `recipe` may run at `now`.
    pub fn decide(&self, recipe: &Recipe, now: u64) -> AttemptDecision {
        if let Some(id) = self.in_progress() {
            return AttemptDecision::Busy { id };
        }
        let counted = self.counted_since_operator(&recipe.name);
        if let Some(id) = counted
            .iter()
            .rev()
            .find(|(_, e)| e.state == AttemptState::Exhausted)
            .map(|(i, _)| AttemptId(*i))
        {
            return AttemptDecision::Exhausted {
                attempts: self.in_window(&counted, recipe.window, now),
                window: recipe.window,
                entry: Some(id),
            };
        }
        let in_window = self.in_window(&counted, recipe.window, now);
        if in_window >= recipe.max_attempts {
            return AttemptDecision::Exhausted {
                attempts: in_window,
                window: recipe.window,
                entry: None,
            };
        }
        AttemptDecision::Attempt {
            attempt: self.next_number(&recipe.name),
        }
    }

    /// Queues an attempt of `recipe` set off by `trigger` (a trigger's name, or `operator`)
    /// at `now`, if the rules allow it; records the refusal (once) if the recipe is exhausted.
    /// An operator's attempt is refused only while another attempt is under way.
    pub fn queue(
        &mut self,
        recipe: &Recipe,
        trigger: &str,
        origin: AttemptOrigin,
        now: u64,
    ) -> Queued {
        let decision = match origin {
            AttemptOrigin::Operator => match self.in_progress() {
                Some(id) => AttemptDecision::Busy { id },
                None => AttemptDecision::Attempt {
                    attempt: self.next_number(&recipe.name),
                },
            },
            AttemptOrigin::Policy => self.decide(recipe, now),
        };
        match decision {
            AttemptDecision::Busy { id } => Queued::Busy { id },
            AttemptDecision::Attempt { attempt } => {
                let id = self.push(LedgerEntry {
                    recipe: recipe.name.clone(),
                    trigger: trigger.to_owned(),
                    attempt,
                    state: AttemptState::Queued,
                    origin,
                    queued_at: now,
                    started_at: None,
                    finished_at: None,
                    result: None,
                });
                Queued::Attempt { id, attempt }
            }
            AttemptDecision::Exhausted {
                entry: Some(id), ..
            } => Queued::Exhausted { id, newly: false },
            AttemptDecision::Exhausted {
                attempts, window, ..
            } => {
                let result = format!(
                    "{attempts} of {} attempts used within {}: {}",
                    recipe.max_attempts,
                    crate::duration::format_duration(window),
                    recipe.escalation.reason
                );
                let id = self.record_exhausted(recipe, trigger, now, result);
                Queued::Exhausted { id, newly: true }
            }
        }
    }

    /// Records that `recipe` is exhausted at `now` (for a refusal decided elsewhere, e.g. the
    /// restart intensity), once: an `exhausted` entry already in force is returned instead.
    pub fn record_exhausted(
        &mut self,
        recipe: &Recipe,
        trigger: &str,
        now: u64,
        result: String,
    ) -> AttemptId {
        if let Some((i, _)) = self
            .counted_since_operator(&recipe.name)
            .into_iter()
            .rev()
            .find(|(_, e)| e.state == AttemptState::Exhausted)
        {
            return AttemptId(i);
        }
        let attempt = self.next_number(&recipe.name);
        self.push(LedgerEntry {
            recipe: recipe.name.clone(),
            trigger: trigger.to_owned(),
            attempt,
            state: AttemptState::Exhausted,
            origin: AttemptOrigin::Policy,
            queued_at: now,
            started_at: None,
            finished_at: Some(now),
            result: Some(result),
        })
    }

    /// The attempt's first step starts at `now`: `queued → running`.
    pub fn start(&mut self, id: AttemptId, now: u64) -> Result<(), LedgerError> {
        let entry = self.entry_mut(id)?;
        if entry.state != AttemptState::Queued {
            return Err(LedgerError::BadTransition {
                id: id.0,
                from: entry.state,
                to: AttemptState::Running,
            });
        }
        entry.state = AttemptState::Running;
        entry.started_at = Some(now);
        Ok(())
    }

    /// The attempt ended at `now` with `result` (one line). A queued attempt may end without
    /// starting (failed: the lane was stopped, the worker went away).
    pub fn finish(
        &mut self,
        id: AttemptId,
        end: AttemptEnd,
        now: u64,
        result: impl Into<String>,
    ) -> Result<(), LedgerError> {
        let to = match end {
            AttemptEnd::Succeeded => AttemptState::Succeeded,
            AttemptEnd::Failed => AttemptState::Failed,
        };
        let entry = self.entry_mut(id)?;
        let allowed = match entry.state {
            AttemptState::Running => true,
            AttemptState::Queued => to == AttemptState::Failed,
            _ => false,
        };
        if !allowed {
            return Err(LedgerError::BadTransition {
                id: id.0,
                from: entry.state,
                to,
            });
        }
        entry.state = to;
        entry.finished_at = Some(now);
        entry.result = Some(result.into());
        Ok(())
    }

    /// For a supervisor taking the lane over at `now`: closes attempts that were running as
    /// failed (their steps may have half happened) and returns the queued ones, to be carried
    /// out.
    pub fn adopt(&mut self, now: u64) -> Vec<AttemptId> {
        let mut queued = Vec::new();
        for (i, entry) in self.record.entries.iter_mut().enumerate() {
            match entry.state {
                AttemptState::Running => {
                    entry.state = AttemptState::Failed;
                    entry.finished_at = Some(now);
                    entry.result =
                        Some("interrupted: the supervisor stopped during the attempt".to_owned());
                }
                AttemptState::Queued => queued.push(AttemptId(i)),
                _ => {}
            }
        }
        queued
    }

    /// Where the lane's recovery stands: the state of its last entry.
    pub fn status(&self) -> RecoveryStatus {
        self.record
            .entries
            .last()
            .map_or(RecoveryStatus::None, |e| status_of(e.state))
    }

    /// Where recovery with `recipe` stands: the state of its last entry.
    pub fn recipe_status(&self, recipe: &str) -> RecoveryStatus {
        self.record
            .entries
            .iter()
            .rfind(|e| e.recipe == recipe)
            .map_or(RecoveryStatus::None, |e| status_of(e.state))
    }

    /// `recipe` is exhausted (sticky until an operator runs it).
    pub fn is_exhausted(&self, recipe: &str) -> bool {
        self.counted_since_operator(recipe)
            .iter()
            .any(|(_, e)| e.state == AttemptState::Exhausted)
    }

    /// Automatic attempts of `recipe` since an operator last ran it (refusals not counted),
    /// whatever their age.
    pub fn attempts(&self, recipe: &str) -> u32 {
        count(
            self.counted_since_operator(recipe)
                .iter()
                .filter(|(_, e)| e.state != AttemptState::Exhausted)
                .count(),
        )
    }

    /// [`attempts`](Self::attempts) for every recipe in the ledger (for policy facts).
    pub fn attempt_counts(&self) -> BTreeMap<String, u32> {
        let mut counts = BTreeMap::new();
        for entry in &self.record.entries {
            counts
                .entry(entry.recipe.clone())
                .or_insert_with(|| self.attempts(&entry.recipe));
        }
        counts
    }

    /// The lane event for entry `id` as it is now: `lane.recovery.<state>` with the entry
    /// (and `id`).
    pub fn event(&self, id: AttemptId) -> Option<Payload> {
        let entry = self.entry(id)?;
        Some(event_payload(RecoveryAttempt {
            id: id.0,
            entry: entry.clone(),
        }))
    }

    fn push(&mut self, entry: LedgerEntry) -> AttemptId {
        self.record.entries.push(entry);
        AttemptId(self.record.entries.len() - 1)
    }

    fn entry_mut(&mut self, id: AttemptId) -> Result<&mut LedgerEntry, LedgerError> {
        self.record
            .entries
            .get_mut(id.0)
            .ok_or(LedgerError::UnknownAttempt(id.0))
    }

    /// The automatic entries of `recipe` after its last operator entry, with their indices.
    fn counted_since_operator(&self, recipe: &str) -> Vec<(usize, &LedgerEntry)> {
        let entries = self.record.entries.iter().enumerate();
        let since = entries
            .clone()
            .rfind(|(_, e)| e.recipe == recipe && e.origin == AttemptOrigin::Operator)
            .map_or(0, |(i, _)| i + 1);
        entries
            .skip(since)
            .filter(|(_, e)| e.recipe == recipe && e.origin == AttemptOrigin::Policy)
            .collect()
    }

    /// Attempts (not refusals) among `counted` queued within `window` before `now`.
    fn in_window(&self, counted: &[(usize, &LedgerEntry)], window: Duration, now: u64) -> u32 {
        let window = window.as_secs();
        count(
            counted
                .iter()
                .filter(|(_, e)| {
                    e.state != AttemptState::Exhausted && now.saturating_sub(e.queued_at) < window
                })
                .count(),
        )
    }

    /// The number the next attempt of `recipe` gets: one more than its attempts so far.
    fn next_number(&self, recipe: &str) -> u32 {
        count(
            self.record
                .entries
                .iter()
                .filter(|e| e.recipe == recipe && e.state != AttemptState::Exhausted)
                .count(),
        )
        .saturating_add(1)
    }
}

/// The lane event of an attempt in its state: `lane.recovery.queued`, `lane.recovery.running`,
/// `lane.recovery.succeeded`, `lane.recovery.failed`, `lane.recovery.exhausted`.
pub fn event_payload(attempt: RecoveryAttempt) -> Payload {
    match attempt.entry.state {
        AttemptState::Queued => Payload::RecoveryQueued(attempt),
        AttemptState::Running => Payload::RecoveryRunning(attempt),
        AttemptState::Succeeded => Payload::RecoverySucceeded(attempt),
        AttemptState::Failed => Payload::RecoveryFailed(attempt),
        AttemptState::Exhausted => Payload::RecoveryExhausted(attempt),
    }
}

fn status_of(state: AttemptState) -> RecoveryStatus {
    match state {
        AttemptState::Queued | AttemptState::Running => RecoveryStatus::Active,
        AttemptState::Succeeded => RecoveryStatus::Succeeded,
        AttemptState::Failed => RecoveryStatus::Failed,
        AttemptState::Exhausted => RecoveryStatus::Exhausted,
    }
}

fn count(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::RecipeBook;
    use clawpool_lanes::LaneEventKind;

    fn recipe(name: &str) -> Recipe {
        RecipeBook::builtin().get(name).expect("recipe").clone()
    }

    /// Queues, starts and finishes one automatic attempt; returns its id.
    fn attempt(ledger: &mut Ledger, recipe: &Recipe, now: u64, end: AttemptEnd) -> AttemptId {
        let Queued::Attempt { id, .. } =
            ledger.queue(recipe, "stalled", AttemptOrigin::Policy, now)
        else {
            panic!("not queued at {now}: {:?}", ledger.decide(recipe, now));
        };
        ledger.start(id, now).expect("starts");
        ledger.finish(id, end, now + 10, "done").expect("finishes");
        id
    }

    #[test]
    fn an_attempt_moves_through_its_states_and_each_is_an_event() {
        let nudge = recipe("interrupt_and_nudge");
        let mut ledger = Ledger::new();
        assert_eq!(ledger.status(), RecoveryStatus::None);
        let Queued::Attempt { id, attempt } =
            ledger.queue(&nudge, "stalled", AttemptOrigin::Policy, 1_000)
        else {
            panic!("queued");
        };
        assert_eq!(attempt, 1);
        assert_eq!(ledger.status(), RecoveryStatus::Active);
        let queued = ledger.event(id).expect("event");
        assert_eq!(queued.kind(), LaneEventKind::RecoveryQueued);
        let detail = queued.detail();
        assert_eq!(detail["recipe"], "interrupt_and_nudge");
        assert_eq!(detail["trigger"], "stalled");
        assert_eq!(detail["id"], 0);
        ledger.start(id, 1_001).expect("starts");
        assert_eq!(
            ledger.event(id).as_ref().map(Payload::kind),
            Some(LaneEventKind::RecoveryRunning)
        );
        ledger
            .finish(id, AttemptEnd::Succeeded, 1_090, "progress: new output")
            .expect("finishes");
        let entry = ledger.entry(id).expect("entry");
        assert_eq!(
            (entry.started_at, entry.finished_at, entry.result.as_deref()),
            (Some(1_001), Some(1_090), Some("progress: new output"))
        );
        assert_eq!(
            ledger.event(id).as_ref().map(Payload::kind),
            Some(LaneEventKind::RecoverySucceeded)
        );
        assert_eq!(ledger.status(), RecoveryStatus::Succeeded);
        assert_eq!(
            ledger.finish(id, AttemptEnd::Failed, 1_100, "again"),
            Err(LedgerError::BadTransition {
                id: 0,
                from: AttemptState::Succeeded,
                to: AttemptState::Failed
            })
        );
        assert_eq!(
            ledger.start(AttemptId(9), 1_100),
            Err(LedgerError::UnknownAttempt(9))
        );
    }

    #[test]
    fn one_attempt_at_a_time() {
        let nudge = recipe("interrupt_and_nudge");
        let provider = recipe("wait_for_provider");
        let mut ledger = Ledger::new();
        let Queued::Attempt { id, .. } = ledger.queue(&nudge, "stalled", AttemptOrigin::Policy, 0)
        else {
            panic!("queued");
        };
        assert_eq!(
            ledger.queue(&provider, "provider_down", AttemptOrigin::Policy, 5),
            Queued::Busy { id }
        );
        assert_eq!(
            ledger.queue(&provider, "operator", AttemptOrigin::Operator, 5),
            Queued::Busy { id }
        );
    }

    #[test]
    fn attempts_are_limited_within_the_window_then_exhausted_once() {
        let nudge = recipe("interrupt_and_nudge"); // 1 attempt per hour
        let mut ledger = Ledger::new();
        attempt(&mut ledger, &nudge, 0, AttemptEnd::Succeeded);
        // An hour later the window has passed: another attempt is allowed.
        attempt(&mut ledger, &nudge, 3_600, AttemptEnd::Failed);
        assert_eq!(ledger.attempts("interrupt_and_nudge"), 2);
        // Within the hour: refused, recorded once.
        assert_eq!(
            ledger.decide(&nudge, 3_700),
            AttemptDecision::Exhausted {
                attempts: 1,
                window: Duration::from_secs(3_600),
                entry: None
            }
        );
        let Queued::Exhausted { id, newly: true } =
            ledger.queue(&nudge, "stalled", AttemptOrigin::Policy, 3_700)
        else {
            panic!("exhausted");
        };
        let entry = ledger.entry(id).expect("entry");
        assert_eq!((entry.state, entry.attempt), (AttemptState::Exhausted, 3));
        assert!(
            entry
                .result
                .as_deref()
                .is_some_and(|r| r.starts_with("1 of 1 attempts used within 1h: still no progress")),
            "{entry:?}"
        );
        assert_eq!(
            ledger.event(id).as_ref().map(Payload::kind),
            Some(LaneEventKind::RecoveryExhausted)
        );
        assert_eq!(
            ledger.queue(&nudge, "stalled", AttemptOrigin::Policy, 3_800),
            Queued::Exhausted { id, newly: false }
        );
        assert_eq!(ledger.status(), RecoveryStatus::Exhausted);
        assert!(ledger.is_exhausted("interrupt_and_nudge"));
        // Sticky: long after the window, still exhausted; refusals are not attempts.
        assert!(matches!(
            ledger.decide(&nudge, 100_000),
            AttemptDecision::Exhausted { entry: Some(e), .. } if e == id
        ));
        assert_eq!(ledger.attempts("interrupt_and_nudge"), 2);
    }

    #[test]
    fn an_operator_run_lifts_exhaustion_and_restarts_the_count() {
        let nudge = recipe("interrupt_and_nudge");
        let mut ledger = Ledger::new();
        attempt(&mut ledger, &nudge, 0, AttemptEnd::Failed);
        ledger.queue(&nudge, "stalled", AttemptOrigin::Policy, 60);
        assert!(ledger.is_exhausted("interrupt_and_nudge"));
        let Queued::Attempt { id, attempt: 2 } =
            ledger.queue(&nudge, "operator", AttemptOrigin::Operator, 120)
        else {
            panic!("an operator attempt is never refused");
        };
        ledger.start(id, 120).expect("starts");
        ledger
            .finish(id, AttemptEnd::Succeeded, 200, "progress")
            .expect("finishes");
        assert!(!ledger.is_exhausted("interrupt_and_nudge"));
        assert_eq!(ledger.attempts("interrupt_and_nudge"), 0);
        assert_eq!(
            ledger.decide(&nudge, 300),
            AttemptDecision::Attempt { attempt: 3 }
        );
    }

    #[test]
    fn no_recovery_attempted_and_recovery_exhausted_are_distinct() {
        let restart = recipe("restart_crashed_worker");
        let untouched = Ledger::new();
        let mut exhausted = Ledger::new();
        exhausted.record_exhausted(&restart, "worker_exited", 50, "3 restarts in 15m".into());
        assert_eq!(untouched.status(), RecoveryStatus::None);
        assert_eq!(exhausted.status(), RecoveryStatus::Exhausted);
        assert_eq!(
            untouched.recipe_status("restart_crashed_worker"),
            RecoveryStatus::None
        );
        assert_eq!(
            exhausted.recipe_status("restart_crashed_worker"),
            RecoveryStatus::Exhausted
        );
        assert_ne!(untouched.record(), exhausted.record());
        // Recording it again changes nothing.
        let again = exhausted.record_exhausted(&restart, "worker_exited", 60, "again".into());
        assert_eq!(again, AttemptId(0));
        assert_eq!(exhausted.record().entries.len(), 1);
    }

    #[test]
    fn the_restart_recipe_allows_three_in_fifteen_minutes() {
        let restart = recipe("restart_crashed_worker");
        let mut ledger = Ledger::new();
        for at in [0, 100, 200] {
            attempt(&mut ledger, &restart, at, AttemptEnd::Succeeded);
        }
        assert!(matches!(
            ledger.decide(&restart, 300),
            AttemptDecision::Exhausted { attempts: 3, .. }
        ));
        assert_eq!(
            ledger.decide(&restart, 900),
            AttemptDecision::Attempt { attempt: 4 }
        );
    }

    #[test]
    fn a_supervisor_restart_neither_loses_nor_repeats_an_attempt() {
        let nudge = recipe("interrupt_and_nudge");
        let restart = recipe("restart_crashed_worker");
        let mut ledger = Ledger::new();
        let Queued::Attempt { id: running, .. } =
            ledger.queue(&nudge, "stalled", AttemptOrigin::Policy, 0)
        else {
            panic!("queued");
        };
        ledger.start(running, 1).expect("starts");
        // Written to the state file, read back by the next supervisor.
        let json = serde_json::to_string(ledger.record()).expect("serialises");
        let mut adopted = Ledger::from_record(serde_json::from_str(&json).expect("parses"));
        assert!(adopted.adopt(50).is_empty());
        let entry = adopted.entry(running).expect("entry");
        assert_eq!(entry.state, AttemptState::Failed);
        assert_eq!(entry.finished_at, Some(50));
        // It counted: the recipe is not attempted again within its window.
        assert!(matches!(
            adopted.decide(&nudge, 60),
            AttemptDecision::Exhausted { attempts: 1, .. }
        ));
        // A queued attempt (waiting out a backoff) is handed back, not dropped or doubled.
        let Queued::Attempt { id: queued, .. } =
            adopted.queue(&restart, "worker_exited", AttemptOrigin::Policy, 70)
        else {
            panic!("queued");
        };
        let json = serde_json::to_string(adopted.record()).expect("serialises");
        let mut again = Ledger::from_record(serde_json::from_str(&json).expect("parses"));
        assert_eq!(again.adopt(80), vec![queued]);
        assert_eq!(
            again.queue(&restart, "worker_exited", AttemptOrigin::Policy, 80),
            Queued::Busy { id: queued }
        );
        again.start(queued, 80).expect("the queued attempt runs");
    }

    #[test]
    fn counts_per_recipe_feed_the_policy() {
        let nudge = recipe("interrupt_and_nudge");
        let restart = recipe("restart_crashed_worker");
        let mut ledger = Ledger::new();
        attempt(&mut ledger, &restart, 0, AttemptEnd::Succeeded);
        attempt(&mut ledger, &restart, 100, AttemptEnd::Failed);
        attempt(&mut ledger, &nudge, 200, AttemptEnd::Succeeded);
        let counts = ledger.attempt_counts();
        assert_eq!(counts.get("restart_crashed_worker"), Some(&2));
        assert_eq!(counts.get("interrupt_and_nudge"), Some(&1));
        assert_eq!(
            ledger.recipe_status("restart_crashed_worker"),
            RecoveryStatus::Failed
        );
        // A queued attempt that never started may be closed as failed, not as succeeded.
        let Queued::Attempt { id, .. } =
            ledger.queue(&nudge, "stalled", AttemptOrigin::Policy, 9_000)
        else {
            panic!("queued");
        };
        assert!(
            ledger
                .finish(id, AttemptEnd::Succeeded, 9_001, "x")
                .is_err()
        );
        ledger
            .finish(id, AttemptEnd::Failed, 9_001, "lane stopped")
            .expect("finishes");
    }
}
