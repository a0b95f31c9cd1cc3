//! How long a running lane has shown a screen no rule knows (a notice, a new dialog), and when
//! that makes it `blocked{unknown_dialog}`: after `unknown_screen_secs` of that screen with no
//! meaningful progress. Pure timing, so it is tested without waiting.

use std::time::Duration;

use tokio::time::Instant;

/// The current spell of an unrecognised screen, if there is one.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct UnknownScreen {
    since: Option<Instant>,
}

impl UnknownScreen {
    /// Records one look at the screen: an unrecognised one starts (or continues) the spell,
    /// anything known ends it.
    pub(super) fn observe(&mut self, unrecognised: bool, now: Instant) {
        if !unrecognised {
            self.since = None;
        } else if self.since.is_none() {
            self.since = Some(now);
        }
    }

    /// Whether the spell has lasted `bound` and the lane made no progress for as long
    /// (`without_progress`: the time since its last meaningful progress).
    pub(super) fn is_due(&self, now: Instant, bound: Duration, without_progress: Duration) -> bool {
        self.since
            .is_some_and(|since| now.duration_since(since) >= bound && without_progress >= bound)
    }

    /// When to look again even if nothing changes: when the spell will have lasted `bound`
    /// and the lane will have been without progress for as long.
    pub(super) fn deadline(
        &self,
        now: Instant,
        bound: Duration,
        without_progress: Duration,
    ) -> Option<Instant> {
        let since = self.since?;
        Some((since + bound).max(now + bound.saturating_sub(without_progress)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(5);

    #[test]
    fn an_unrecognised_screen_is_due_after_the_bound_without_progress() {
        let start = Instant::now();
        let mut screen = UnknownScreen::default();
        screen.observe(true, start);
        let later = start + Duration::from_secs(3);
        screen.observe(true, later);
        assert!(!screen.is_due(later, BOUND, Duration::from_secs(3)));
        assert_eq!(
            screen.deadline(later, BOUND, Duration::from_secs(3)),
            Some(start + BOUND)
        );
        let at_bound = start + BOUND;
        assert!(screen.is_due(at_bound, BOUND, BOUND));
    }

    #[test]
    fn progress_on_an_unrecognised_screen_holds_it_off() {
        let start = Instant::now();
        let mut screen = UnknownScreen::default();
        screen.observe(true, start);
        let at_bound = start + BOUND;
        // New lines a second ago: not yet.
        assert!(!screen.is_due(at_bound, BOUND, Duration::from_secs(1)));
        assert_eq!(
            screen.deadline(at_bound, BOUND, Duration::from_secs(1)),
            Some(at_bound + Duration::from_secs(4))
        );
    }

    #[test]
    fn a_known_screen_ends_the_spell() {
        let start = Instant::now();
        let mut screen = UnknownScreen::default();
        screen.observe(true, start);
        screen.observe(false, start + Duration::from_secs(4));
        let after = start + Duration::from_secs(10);
        assert!(!screen.is_due(after, BOUND, after - start));
        assert_eq!(screen.deadline(after, BOUND, after - start), None);
        // A new spell counts from its own start.
        screen.observe(true, after);
        assert!(!screen.is_due(after + Duration::from_secs(4), BOUND, BOUND * 3));
        assert!(screen.is_due(after + BOUND, BOUND, BOUND * 3));
    }
}
