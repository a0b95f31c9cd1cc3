//! Restarting a worker that crashed, exited non-zero or was lost: exponential backoff and a
//! restart-intensity limit.
//!
//! This module owns the pacing of automatic restarts. [`RestartPolicy`] says how long to wait
//! before each restart (2 s, doubling, capped at 5 min; back to 2 s once the worker was
//! healthy for 10 min) and how many restarts are allowed in a window (3 in 15 min).
//! [`RestartTracker`] applies it to one lane. Its whole state is a
//! [`RestartRecord`] kept in the lane's state file, so a supervisor that restarts — or takes
//! the lane over — continues the same sequence: it neither forgets a restart (which would
//! reset the backoff) nor decides one twice (which would restart twice).
//!
//! Exhaustion is sticky: once the intensity is exceeded, no automatic restart happens again —
//! not even after the window has passed — until an operator acts ([`RestartTracker::reset`],
//! done when they restart or recover the lane by hand). A worker that keeps crashing after
//! three quick restarts needs a person, and the window passing does not change that.
//!
//! Times are Unix epoch seconds, passed in by the caller.

use std::time::Duration;

pub use clawpool_lanes::state_file::RestartRecord;
use serde::{Deserialize, Serialize};

use crate::duration::format_duration;

/// How automatic restarts are paced and limited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartPolicy {
    /// The wait before the first restart.
    pub initial: Duration,
    /// Each further restart waits this many times longer than the one before (at least 1).
    pub factor: u32,
    /// The longest wait.
    pub max: Duration,
    /// A worker healthy (at its input line or working) this long starts the backoff over.
    pub reset_after_healthy: Duration,
    /// At most this many restarts …
    pub intensity: u32,
    /// … within this window; one more exit then exhausts recovery.
    pub intensity_window: Duration,
}

impl Default for RestartPolicy {
    /// 2 s doubling to at most 5 min, reset after 10 min healthy, at most 3 restarts in 15 min.
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(2),
            factor: 2,
            max: Duration::from_secs(5 * 60),
            reset_after_healthy: Duration::from_secs(10 * 60),
            intensity: 3,
            intensity_window: Duration::from_secs(15 * 60),
        }
    }
}

impl RestartPolicy {
    /// The wait before a restart that follows `consecutive` earlier ones (since the last
    /// reset): `initial × factor^consecutive`, at most `max`.
    pub fn delay(&self, consecutive: u32) -> Duration {
        let mut delay = self.initial.min(self.max);
        for _ in 0..consecutive {
            if delay >= self.max {
                break;
            }
            delay = delay.saturating_mul(self.factor.max(1)).min(self.max);
        }
        delay
    }
}

/// What to do about a worker that exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartDecision {
    /// Restart it after `delay`.
    RestartAfter {
        /// The backoff wait.
        delay: Duration,
        /// This restart's number within the intensity window, from 1.
        restart: u32,
        /// The worker never reached its input line: a failed start, not a crash while it
        /// worked.
        start_failed: bool,
    },
    /// Do not restart it: too many restarts in the window (or earlier exhaustion, which is
    /// sticky). The lane fails with `recovery_exhausted`.
    Exhausted {
        /// Restarts already made within the window.
        restarts: u32,
        /// The intensity window.
        window: Duration,
        /// The exit that found recovery exhausted was a failed start.
        start_failed: bool,
    },
}

impl RestartDecision {
    /// One line for people: `restart 2 of 3 in 4s (crashed while running)`,
    /// `recovery_exhausted: 3 restarts within 15m (failed start)`.
    pub fn describe(&self, policy: &RestartPolicy) -> String {
        let kind = |start_failed: bool| {
            if start_failed {
                "failed start: the worker never reached its input line"
            } else {
                "crashed after reaching its input line"
            }
        };
        match self {
            RestartDecision::RestartAfter {
                delay,
                restart,
                start_failed,
            } => format!(
                "restart {restart} of {} in {} ({})",
                policy.intensity,
                format_duration(*delay),
                kind(*start_failed)
            ),
            RestartDecision::Exhausted {
                restarts,
                window,
                start_failed,
            } => format!(
                "recovery_exhausted: {restarts} restarts within {} ({})",
                format_duration(*window),
                kind(*start_failed)
            ),
        }
    }
}

/// The restart bookkeeping of one lane: a [`RestartPolicy`] applied to the lane's
/// [`RestartRecord`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartTracker {
    policy: RestartPolicy,
    record: RestartRecord,
}

impl RestartTracker {
    /// A tracker for a lane with no restarts yet.
    pub fn new(policy: RestartPolicy) -> Self {
        Self::from_record(policy, RestartRecord::default())
    }

    /// A tracker that continues from a record read back from the state file.
    pub fn from_record(policy: RestartPolicy, record: RestartRecord) -> Self {
        Self { policy, record }
    }

    /// The policy applied.
    pub fn policy(&self) -> &RestartPolicy {
        &self.policy
    }

    /// What the state file must store (write it after every call that changes it).
    pub fn record(&self) -> &RestartRecord {
        &self.record
    }

    /// The record, giving the tracker up.
    pub fn into_record(self) -> RestartRecord {
        self.record
    }

    /// The worker exited (crashed, exited non-zero, or was lost) at `now`; `reached_ready`
    /// says whether it ever reached its input line (a failed start when not).
    ///
    /// A restart already decided and not yet carried out (a repeated exit report, or a
    /// supervisor that took the lane over) is returned again with the time left, not counted
    /// twice.
    pub fn on_exit(&mut self, now: u64, reached_ready: bool) -> RestartDecision {
        let start_failed = !reached_ready;
        let window = self.policy.intensity_window;
        if self.record.exhausted_at.is_some() {
            return RestartDecision::Exhausted {
                restarts: count(self.record.restarts.len()),
                window,
                start_failed,
            };
        }
        if let Some(due) = self.record.pending_until {
            return RestartDecision::RestartAfter {
                delay: Duration::from_secs(due.saturating_sub(now)),
                restart: count(self.record.restarts.len()),
                start_failed,
            };
        }
        if let Some(since) = self.record.healthy_since.take()
            && now.saturating_sub(since) >= self.policy.reset_after_healthy.as_secs()
        {
            self.record.consecutive = 0;
        }
        let window_secs = window.as_secs();
        self.record
            .restarts
            .retain(|&at| now.saturating_sub(at) < window_secs);
        let made = count(self.record.restarts.len());
        if made >= self.policy.intensity {
            self.record.exhausted_at = Some(now);
            return RestartDecision::Exhausted {
                restarts: made,
                window,
                start_failed,
            };
        }
        let delay = self.policy.delay(self.record.consecutive);
        self.record.consecutive = self.record.consecutive.saturating_add(1);
        self.record.restarts.push(now);
        self.record.pending_until = Some(now.saturating_add(ceil_secs(delay)));
        RestartDecision::RestartAfter {
            delay,
            restart: made + 1,
            start_failed,
        }
    }

    /// The wait left, as of `now`, before a restart that was decided but not carried out
    /// (zero when it is due); `None` when none is pending.
    pub fn pending(&self, now: u64) -> Option<Duration> {
        self.record
            .pending_until
            .map(|due| Duration::from_secs(due.saturating_sub(now)))
    }

    /// The worker was started again: the pending restart is done.
    pub fn on_restarted(&mut self) {
        self.record.pending_until = None;
        self.record.healthy_since = None;
    }

    /// The worker is healthy at `now` (it reached its input line, or works). Call it on every
    /// such observation: the first one starts the healthy period, and once it has lasted
    /// `reset_after_healthy` the backoff starts over.
    pub fn on_healthy(&mut self, now: u64) {
        let since = *self.record.healthy_since.get_or_insert(now);
        if now.saturating_sub(since) >= self.policy.reset_after_healthy.as_secs() {
            self.record.consecutive = 0;
        }
    }

    /// Automatic restarts are exhausted (until [`reset`](Self::reset)).
    pub fn is_exhausted(&self) -> bool {
        self.record.exhausted_at.is_some()
    }

    /// An operator acted (restarted or recovered the lane by hand): exhaustion, the restart
    /// history and the backoff start over.
    pub fn reset(&mut self) {
        self.record = RestartRecord::default();
    }
}

fn count(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Whole seconds, rounded up, so that a due time is never early.
fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(decision: &RestartDecision) -> u64 {
        match decision {
            RestartDecision::RestartAfter { delay, .. } => delay.as_secs(),
            RestartDecision::Exhausted { .. } => panic!("unexpected exhaustion: {decision:?}"),
        }
    }

    /// Exit at `now`, then restart right when the backoff is over; returns the delay.
    fn crash(tracker: &mut RestartTracker, now: u64) -> u64 {
        let delay = after(&tracker.on_exit(now, true));
        assert_eq!(tracker.pending(now), Some(Duration::from_secs(delay)));
        tracker.on_restarted();
        delay
    }

    #[test]
    fn backoff_doubles_from_2s_and_is_capped_at_5min() {
        let policy = RestartPolicy {
            intensity: 100,
            ..RestartPolicy::default()
        };
        let mut tracker = RestartTracker::new(policy);
        let delays: Vec<u64> = (0..11).map(|i| crash(&mut tracker, 1_000 + i)).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    }

    #[test]
    fn ten_minutes_healthy_starts_the_backoff_over() {
        let mut tracker = RestartTracker::new(RestartPolicy::default());
        assert_eq!(crash(&mut tracker, 0), 2);
        tracker.on_healthy(10);
        // Healthy for only 5 minutes: the backoff goes on.
        assert_eq!(crash(&mut tracker, 310), 4);
        tracker.on_healthy(320);
        tracker.on_healthy(920);
        assert_eq!(tracker.record().consecutive, 0);
        assert_eq!(crash(&mut tracker, 1_500), 2);
    }

    #[test]
    fn a_fourth_exit_within_15_minutes_exhausts_and_stays_exhausted() {
        let mut tracker = RestartTracker::new(RestartPolicy::default());
        assert_eq!(crash(&mut tracker, 0), 2);
        assert_eq!(crash(&mut tracker, 60), 4);
        assert_eq!(crash(&mut tracker, 120), 8);
        let fourth = tracker.on_exit(180, true);
        assert_eq!(
            fourth,
            RestartDecision::Exhausted {
                restarts: 3,
                window: Duration::from_secs(900),
                start_failed: false
            }
        );
        assert_eq!(
            fourth.describe(tracker.policy()),
            "recovery_exhausted: 3 restarts within 15m (crashed after reaching its input line)"
        );
        assert!(tracker.is_exhausted());
        assert_eq!(tracker.pending(180), None);
        // Long after the window: still nothing is restarted.
        assert!(matches!(
            tracker.on_exit(10_000, true),
            RestartDecision::Exhausted { .. }
        ));
        // Until an operator acts.
        tracker.reset();
        assert_eq!(crash(&mut tracker, 10_100), 2);
    }

    #[test]
    fn restarts_older_than_the_window_do_not_count() {
        let mut tracker = RestartTracker::new(RestartPolicy::default());
        crash(&mut tracker, 0);
        crash(&mut tracker, 100);
        crash(&mut tracker, 200);
        // 901 s after the first: only two restarts are inside the window.
        let decision = tracker.on_exit(901, true);
        assert!(
            matches!(decision, RestartDecision::RestartAfter { restart: 3, .. }),
            "{decision:?}"
        );
        assert!(!tracker.is_exhausted());
    }

    #[test]
    fn a_failed_start_is_told_apart_from_a_crash() {
        let mut tracker = RestartTracker::new(RestartPolicy::default());
        let decision = tracker.on_exit(0, false);
        assert_eq!(
            decision,
            RestartDecision::RestartAfter {
                delay: Duration::from_secs(2),
                restart: 1,
                start_failed: true
            }
        );
        assert_eq!(
            decision.describe(tracker.policy()),
            "restart 1 of 3 in 2s (failed start: the worker never reached its input line)"
        );
    }

    #[test]
    fn a_supervisor_restart_neither_loses_nor_repeats_a_restart() {
        let mut first = RestartTracker::new(RestartPolicy::default());
        crash(&mut first, 0);
        let decided = first.on_exit(50, true);
        assert_eq!(after(&decided), 4);
        // The supervisor dies before carrying the restart out; another one reads the file.
        let json = serde_json::to_string(first.record()).expect("serialises");
        let record: RestartRecord = serde_json::from_str(&json).expect("parses");
        let mut second = RestartTracker::from_record(RestartPolicy::default(), record);
        assert_eq!(second.pending(51), Some(Duration::from_secs(3)));
        // The exit is reported again: the same restart, not a new one.
        let again = second.on_exit(52, true);
        assert_eq!(
            again,
            RestartDecision::RestartAfter {
                delay: Duration::from_secs(2),
                restart: 2,
                start_failed: false
            }
        );
        assert_eq!(second.record().restarts, vec![0, 50]);
        second.on_restarted();
        // The next exit continues the sequence: 8 s, the third restart.
        assert_eq!(
            second.on_exit(60, true),
            RestartDecision::RestartAfter {
                delay: Duration::from_secs(8),
                restart: 3,
                start_failed: false
            }
        );
    }

    #[test]
    fn delays_follow_the_configured_policy() {
        let policy = RestartPolicy {
            initial: Duration::from_millis(500),
            factor: 3,
            max: Duration::from_secs(10),
            ..RestartPolicy::default()
        };
        let delays: Vec<u128> = (0..5).map(|n| policy.delay(n).as_millis()).collect();
        assert_eq!(delays, [500, 1_500, 4_500, 10_000, 10_000]);
        let mut tracker = RestartTracker::new(policy);
        tracker.on_exit(100, true);
        assert_eq!(tracker.record().pending_until, Some(101));
    }
}
