//! The notifier (`docs/notify.md`): tells the `[[notify]]` endpoints of the configuration when
//! a lane of the repository enters a situation a person wants to hear about, once per
//! situation, following the repository's event stream.
//!
//! # Theory of operation
//!
//! The notifier runs in the process that owns the repository's lanes — a foreground `spawn` or
//! the daemon, whichever holds the supervisor lock, so there is one per repository — beside the
//! lanes, never on their path: a lane records its events as it always does and nothing it does
//! waits on a notification.
//!
//! - The **reader** task follows the stream ([`crate::Follower`]) from the cursor the record
//!   says it read last (from now on, the first time). Each event goes through
//!   [`Situations::observe`]; a new situation is queued for every endpoint that wants it. The
//!   cursor, the situations and the queues are written to the record ([`NotifyRecord`]) in one
//!   file replacement, then each sender is woken.
//! - One **sender** task per endpoint sends its queue in order: on success the notification
//!   leaves the queue; on failure it stays, the failure is recorded, and the sender waits
//!   (0.5 s, doubling to 60 s) before trying again. A failing endpoint holds up only itself.
//! - [`Notifier::finish`], when the owner is done: the reader reads the stream once more, and
//!   the senders get a short grace to empty their queues. What is still queued stays in the
//!   record, sent by the next notifier of the repository — as is what happened while none ran.
//!
//! Delivery is at least once: a notification sent just before its process died, before the
//! record said so, is sent again by the next notifier.

mod deliver;
pub mod message;
pub mod record;
pub mod situation;

use clawpool_lanes::cost::PriceTable;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawpool_agents::config::notify::NotifyTarget;
use clawpool_worktree::layout::StateDir;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub use deliver::session_bus;
pub use message::Notification;
pub use record::{EndpointRecord, NotifyRecord, RecordError};
pub use situation::Situations;

use crate::{Follower, Start, StreamError};

/// The first wait after a failed attempt; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Why the notifier could not start.
#[derive(Debug, thiserror::Error)]
pub enum NotifierError {
    /// Its record could not be read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The stream could not be followed.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// The HTTP client could not be built.
    #[error("notifier: {0}")]
    Client(String),
}

/// What the tasks share.
struct Shared {
    /// The record, as last written; every change is written before the lock is let go.
    record: Mutex<NotifyRecord>,
    path: PathBuf,
    /// Wakes the sender of the same index: its queue grew, or the notifier is finishing.
    wakes: Vec<Notify>,
    /// Wakes [`Notifier::finish`] when a queue shrank.
    sent: Notify,
    /// Tells the reader to read once more and stop.
    stop: Notify,
}

impl Shared {
    /// Changes the record and writes it. A record that cannot be written is said on stderr
    /// and kept in memory: notifications still go out, a restart may repeat or miss some.
    fn change<T>(&self, f: impl FnOnce(&mut NotifyRecord) -> T) -> T {
        let mut record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        let out = f(&mut record);
        if let Err(e) = record.save(&self.path) {
            eprintln!("clawpool: {e}");
        }
        out
    }
}

/// The running notifier of one repository.
pub struct Notifier {
    shared: Arc<Shared>,
    reader: JoinHandle<()>,
    senders: Vec<JoinHandle<()>>,
}

impl Notifier {
    /// Starts notifying `targets` of the lanes of the repository at `repository`, whose
    /// clawpool folder is `dir`, each notification with the lane's cost priced with `prices`.
    /// `None` when there are no targets.
    pub fn start(
        dir: &StateDir,
        repository: &Path,
        targets: Vec<NotifyTarget>,
        prices: Arc<PriceTable>,
    ) -> Result<Option<Self>, NotifierError> {
        if targets.is_empty() {
            return Ok(None);
        }
        let path = dir.notify_status();
        std::fs::create_dir_all(dir.root()).map_err(|source| RecordError::Io {
            path: path.clone(),
            source,
        })?;
        let mut record = NotifyRecord::load(&path)?;
        // Endpoints are kept by name; one no longer configured takes its queue with it.
        record
            .endpoints
            .retain(|name, _| targets.iter().any(|t| &t.name == name));
        for target in &targets {
            record
                .endpoints
                .entry(target.name.clone())
                .or_default()
                .target = target.redacted();
        }
        let start = record.cursor.map_or(Start::Now, Start::After);
        let follower = match Follower::open(dir, start) {
            Err(StreamError::UnknownCursor { .. }) => Follower::open(dir, Start::Now)?,
            other => other?,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| NotifierError::Client(e.to_string()))?;
        let shared = Arc::new(Shared {
            record: Mutex::new(record),
            path,
            wakes: targets.iter().map(|_| Notify::new()).collect(),
            sent: Notify::new(),
            stop: Notify::new(),
        });
        shared.change(|_| ());
        let targets = Arc::new(targets);
        let senders = (0..targets.len())
            .map(|i| {
                tokio::spawn(send(
                    Arc::clone(&shared),
                    Arc::clone(&targets),
                    i,
                    client.clone(),
                ))
            })
            .collect();
        let repository = repository.display().to_string();
        let reader = tokio::spawn(read(
            Arc::clone(&shared),
            targets,
            follower,
            (repository, prices),
        ));
        Ok(Some(Notifier {
            shared,
            reader,
            senders,
        }))
    }

    /// Reads the stream to its end, then waits at most `grace` for every queue to empty;
    /// what is left is sent by the repository's next notifier.
    pub async fn finish(self, grace: Duration) {
        self.shared.stop.notify_one();
        let _ = self.reader.await;
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let sent = self.shared.sent.notified();
            let empty = {
                let record = self.shared.record.lock().unwrap_or_else(|p| p.into_inner());
                record.endpoints.values().all(|e| e.pending.is_empty())
            };
            if empty {
                break;
            }
            if tokio::time::timeout_at(deadline, sent).await.is_err() {
                break;
            }
        }
        for sender in &self.senders {
            sender.abort();
        }
    }
}

/// The reader: stream events in, queued notifications out.
async fn read(
    shared: Arc<Shared>,
    targets: Arc<Vec<NotifyTarget>>,
    mut follower: Follower,
    (repository, prices): (String, Arc<PriceTable>),
) {
    let mut stopping = false;
    loop {
        let events = if stopping {
            follower.read()
        } else {
            tokio::select! {
                events = follower.next() => events,
                () = shared.stop.notified() => {
                    stopping = true;
                    follower.read()
                }
            }
        };
        let events = match events {
            Ok(events) => events,
            Err(e) => {
                eprintln!("clawpool: notifier: {e}");
                return;
            }
        };
        if let Some(last) = events.last() {
            let grew = shared.change(|record| {
                record.cursor = Some(last.cursor);
                let mut grew = vec![false; targets.len()];
                for line in &events {
                    let Some(note) = record.lanes.observe(&repository, line, &prices) else {
                        continue;
                    };
                    for (i, target) in targets.iter().enumerate() {
                        if target.wants(note.event) {
                            let endpoint = record.endpoints.entry(target.name.clone()).or_default();
                            endpoint.pending.push_back(note.clone());
                            grew[i] = true;
                        }
                    }
                }
                grew
            });
            for (i, grew) in grew.into_iter().enumerate() {
                if grew {
                    shared.wakes[i].notify_one();
                }
            }
        }
        if stopping {
            return;
        }
    }
}

/// The sender of endpoint `i`: its queue, in order, retried with backoff.
async fn send(
    shared: Arc<Shared>,
    targets: Arc<Vec<NotifyTarget>>,
    i: usize,
    client: reqwest::Client,
) {
    let target = &targets[i];
    loop {
        let next = {
            let record = shared.record.lock().unwrap_or_else(|p| p.into_inner());
            record
                .endpoints
                .get(&target.name)
                .and_then(|e| e.pending.front().cloned())
        };
        let Some(note) = next else {
            shared.wakes[i].notified().await;
            continue;
        };
        let outcome = deliver::deliver(&client, target, &note).await;
        let now = clawpool_lanes::now_ms() / 1000;
        let failures = shared.change(|record| {
            let endpoint = record.endpoints.entry(target.name.clone()).or_default();
            match &outcome {
                Ok(()) => {
                    if endpoint.pending.front() == Some(&note) {
                        endpoint.pending.pop_front();
                    }
                    endpoint.delivered += 1;
                    endpoint.failures = 0;
                    endpoint.last_error = None;
                    endpoint.last_delivered_at = Some(now);
                }
                Err(error) => {
                    endpoint.failures = endpoint.failures.saturating_add(1);
                    endpoint.last_error = Some(error.clone());
                    endpoint.last_failure_at = Some(now);
                }
            }
            endpoint.failures
        });
        shared.sent.notify_waiters();
        if failures > 0 {
            let backoff = FIRST_BACKOFF
                .saturating_mul(1 << (failures - 1).min(16))
                .min(MAX_BACKOFF);
            tokio::time::sleep(backoff).await;
        }
    }
}
