//! The commit watch: one `lane.commit.created` per commit the lane's branch gains, looked for
//! at start, whenever the repository's watch says the lane's HEAD, branch or base moved, in a
//! slow safety sweep, and once more when the lane ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawpool_lanes::payload::{CommitCreated, CommitsSkipped, Payload};
use clawpool_lanes::{EventLog, LaneEvent};

/// How often a spawned lane's branch is looked at when nothing told it that it moved: a
/// safety sweep for what the repository's watch can miss (an inotify queue that overflowed, a
/// repository that could not be watched). Moves are noticed from the filesystem as they happen
/// ([`LaneWatch`]), so this can be slow.
const COMMIT_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// What made the commit watch look (`look` in `lane.commit.created`).
#[derive(Clone, Copy)]
pub(super) enum Look {
    /// When the lane starts (commits made while no supervisor ran).
    Start,
    /// The repository's watch said the lane's HEAD, branch or base moved.
    Watch,
    /// The slow safety sweep.
    Sweep,
    /// When the lane ends.
    Last,
}

impl Look {
    fn name(self) -> &'static str {
        match self {
            Look::Start => "start",
            Look::Watch => "watch",
            Look::Sweep => "sweep",
            Look::Last => "last",
        }
    }
}

/// At most this many `lane.commit.created` per look; older new commits are summed up in one
/// `lane.commits.skipped`, so a history imported at once cannot flood the log.
const MAX_COMMIT_EVENTS: usize = 50;

/// Records one `lane.commit.created` per commit the lane's branch gains.
///
/// A look walks from HEAD back to what is already accounted for: the last commit reported
/// (read back from the lane's event log when the watch starts, so commits made while no
/// supervisor ran are reported once on adoption, and none twice), the base sha the branch was
/// made from, and the base ref's current tip. Commits reachable from the base are not the
/// lane's own work: a merge of the base forward reports the merge commit, not the base commits
/// it brought in.
#[derive(Clone)]
pub(super) struct CommitWatch {
    dir: PathBuf,
    events: Arc<EventLog>,
    /// The base ref and the sha it resolved to when the branch was made.
    base: Option<(String, String)>,
    /// The last commit accounted for; held across a whole look so that the final look after
    /// the periodic task is aborted cannot report a commit twice.
    last: Arc<tokio::sync::Mutex<Option<String>>>,
}

impl CommitWatch {
    pub(super) fn start(
        dir: PathBuf,
        events: Arc<EventLog>,
        events_path: &Path,
        base: Option<(String, String)>,
    ) -> Self {
        Self {
            dir,
            events,
            base,
            last: Arc::new(tokio::sync::Mutex::new(last_reported_commit(events_path))),
        }
    }

    /// Looks once; records an event per commit HEAD gained since the last look.
    pub(super) async fn check(&self, look: Look) {
        let mut last = self.last.lock().await;
        let mut known: Vec<String> = last.iter().cloned().collect();
        if let Some((git_ref, sha)) = &self.base {
            known.push(sha.clone());
            known.push(git_ref.clone());
        }
        let dir = self.dir.clone();
        let walked = tokio::task::spawn_blocking(move || {
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            clawpool_worktree::new_commits(&dir, &known, MAX_COMMIT_EVENTS)
        })
        .await;
        // No HEAD to read (the folder is mid-rewrite, or gone): the next look tries again.
        let Ok(Ok(new)) = walked else {
            return;
        };
        if new.left_out > 0 {
            let skipped = Payload::CommitsSkipped(CommitsSkipped {
                count: new.left_out,
                oldest: new.oldest_left_out.clone(),
                newest_reported: new.commits.first().map(|c| c.sha.clone()),
                look: look.name().to_owned(),
            });
            let _ = self.events.report(skipped, None, None, None);
        }
        for commit in &new.commits {
            let created = Payload::CommitCreated(CommitCreated {
                sha: commit.sha.clone(),
                subject: commit.subject.clone(),
                look: look.name().to_owned(),
            });
            let _ = self.events.report(created, None, None, None);
        }
        *last = Some(new.head);
    }

    /// Looks at start, then whenever `moves` says the lane's HEAD, branch or base moved, and
    /// every [`COMMIT_SWEEP_INTERVAL`] besides, until aborted.
    pub(super) fn spawn(
        &self,
        mut moves: tokio::sync::watch::Receiver<u64>,
    ) -> tokio::task::JoinHandle<()> {
        let watch = self.clone();
        tokio::spawn(async move {
            watch.check(Look::Start).await;
            let mut sweep = tokio::time::interval_at(
                tokio::time::Instant::now() + COMMIT_SWEEP_INTERVAL,
                COMMIT_SWEEP_INTERVAL,
            );
            let mut watched = true;
            loop {
                let look = tokio::select! {
                    changed = moves.changed(), if watched => {
                        // The watch is gone only with the lane; the sweep carries on until then.
                        watched = changed.is_ok();
                        Look::Watch
                    }
                    _ = sweep.tick() => Look::Sweep,
                };
                watch.check(look).await;
            }
        })
    }
}

/// The sha of the last `lane.commit.created` in a lane's event log, if any.
fn last_reported_commit(events_path: &Path) -> Option<String> {
    std::fs::read_to_string(events_path)
        .ok()?
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<LaneEvent>(line).ok())
        .find_map(|event| match event.payload() {
            Some(Payload::CommitCreated(commit)) => Some(commit.sha),
            _ => None,
        })
}
