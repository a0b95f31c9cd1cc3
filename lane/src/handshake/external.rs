//! Progress a lane makes off its screen: files changing in its worktree, commits on its
//! branch. Whoever sees it (a worktree watcher, the commit watcher) records it here; the
//! handshake reads the latest when it judges a stall or runs a recovery check, so an agent that
//! works quietly (writing files, committing, its screen unchanged) is not taken for stalled.

use std::sync::{Arc, Mutex};

use clawpool_lanes::now_ms;
use clawpool_recovery::ProgressSource;

/// The latest off-screen progress of one lane, shared between its watchers and its handshake.
#[derive(Debug, Clone, Default)]
pub struct ExternalProgress {
    latest: Arc<Mutex<Option<(u64, ProgressSource)>>>,
}

impl ExternalProgress {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records progress from `source` now.
    pub fn record(&self, source: ProgressSource) {
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        *latest = Some((now_ms(), source));
    }

    /// The latest progress recorded: when (epoch ms) and what.
    pub fn latest(&self) -> Option<(u64, ProgressSource)> {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_record_wins_and_clones_share_it() {
        let progress = ExternalProgress::new();
        assert_eq!(progress.latest(), None);
        let watcher = progress.clone();
        watcher.record(ProgressSource::WorktreeChange);
        watcher.record(ProgressSource::Commit);
        let (at, source) = progress.latest().expect("recorded");
        assert_eq!(source, ProgressSource::Commit);
        assert!(at > 0);
    }
}
