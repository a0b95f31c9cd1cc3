//! Keeping a lane's state in step with its events: every event is applied to the lane's
//! [`WorkerStateDoc`] at once, and the document is written (atomically) to the lane's record
//! (`state.json` in its record folder, which readers believe) and then to its publication in the
//! worktree (`.claw/worker-state.json`, for claw-code's `claw state`) by the lane's
//! [`writer`], off the async runtime's threads: the event log is the truth and is appended
//! first; the files follow within a write (documents that arrive while one is being written
//! coalesce into the latest). [`StateRecorder::flushed`] waits until the files hold the latest
//! document; the lane's close does, before it lets its supervisor lock go, and so does the
//! last recorder of a lane when it is dropped. The publication is only ever written, never read
//! back as truth: when the lane's repository watcher sees it changed by anyone else,
//! [`StateRecorder::check_publication`] puts it back. Nothing rewrites either while nothing
//! happens: pollers tell a live supervisor from a lost one by its lock
//! ([`clawpool_lanes::state_file::liveness`]).

mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawpool_lanes::payload::{PublicationFound, PublicationRestored};
use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{LaneEvent, LaneStatus, StateFileWriter, WorkerStateDoc};
use tokio::sync::watch;

use writer::{LatestWriter, Sink};

/// A lane's state document and the writer of its record and its publication.
#[derive(Clone)]
pub struct StateRecorder {
    doc: Arc<Mutex<WorkerStateDoc>>,
    /// Shared by every clone: the last one dropped flushes it.
    writer: Arc<LatestWriter<Files>>,
    /// The record's writer, also held by `writer`'s files: it says whether the last write
    /// failed without waiting for a write in flight.
    record: Arc<StateFileWriter>,
    /// The lane's status after every update, for whoever waits for the lane to be idle.
    status: Arc<watch::Sender<LaneStatus>>,
    /// The lane's cost after every update (`cost_usd`), for the handshake, which checks it
    /// against the lane's budget as usage arrives.
    cost: Arc<watch::Sender<Option<f64>>>,
}

/// The lane's files, owned by its writer.
struct Files {
    record: Arc<StateFileWriter>,
    publication: Option<Publication>,
    marker: Option<PathBuf>,
    /// Whether the marker may be on disk (left by this or an earlier supervisor of the lane).
    marked: bool,
}

/// The worktree's copy and the bytes last written to it, which tell the recorder's own writes
/// from anyone else's.
struct Publication {
    writer: StateFileWriter,
    written: Option<Vec<u8>>,
}

/// What a file found in the publication's place says the lane's status is: read for the record
/// of what was put back, whatever else is wrong with the file.
#[derive(serde::Deserialize)]
struct Claim {
    lane_status: Option<String>,
}

/// The file, in a lane's registry folder, that says its state file could not be written.
pub use clawpool_worktree::layout::DEGRADED_MARKER;

impl StateRecorder {
    /// Starts recording `doc` in the record folder `record`, published in `worktree` when
    /// given, writing both once now.
    pub fn new(doc: WorkerStateDoc, record: &Path, worktree: Option<&Path>) -> Self {
        Self::with_marker(doc, record, worktree, None)
    }

    /// Like [`new`](Self::new), keeping `marker` present exactly while the lane is degraded
    /// (its record cannot be written): it is written when a write fails and removed by the next
    /// write that succeeds, whoever left it (a supervisor that ended degraded leaves it for the
    /// next one to clear).
    pub fn with_marker(
        doc: WorkerStateDoc,
        record: &Path,
        worktree: Option<&Path>,
        marker: Option<PathBuf>,
    ) -> Self {
        let status = Arc::new(watch::Sender::new(doc.status));
        let cost = Arc::new(watch::Sender::new(doc.cost_usd));
        let marked = marker.as_ref().is_some_and(|m| m.exists());
        let record = Arc::new(StateFileWriter::for_record(record));
        let files = Files {
            record: Arc::clone(&record),
            publication: worktree.map(|worktree| Publication {
                writer: StateFileWriter::for_worktree(worktree),
                written: None,
            }),
            marker,
            marked,
        };
        let recorder = Self {
            doc: Arc::new(Mutex::new(doc)),
            writer: Arc::new(LatestWriter::new(files)),
            record,
            status,
            cost,
        };
        recorder.update(|_| {});
        recorder
    }

    /// The lane's cost (`cost_usd`) as it changes: unknown until its agent reports usage.
    pub fn cost(&self) -> watch::Receiver<Option<f64>> {
        self.cost.subscribe()
    }

    /// Applies an event and hands the document to the writer of the record and the
    /// publication.
    pub fn on_event(&self, event: &LaneEvent) {
        self.update(|doc| doc.apply_event(event));
    }

    /// Changes the document and hands it to the writer of the record and the publication;
    /// the status and cost watchers see the change at once, the files within a write
    /// ([`flushed`](Self::flushed)).
    pub fn update(&self, change: impl FnOnce(&mut WorkerStateDoc)) {
        let mut doc = self.lock_doc();
        change(&mut doc);
        doc.stamp(now_secs());
        self.status.send_if_modified(|status| {
            let changed = *status != doc.status;
            *status = doc.status;
            changed
        });
        self.cost.send_if_modified(|cost| {
            let changed = *cost != doc.cost_usd;
            *cost = doc.cost_usd;
            changed
        });
        // Handed under the document's lock, so the writer receives documents in the order
        // they were made: the latest it holds is the latest there is.
        self.writer.hand(doc.clone());
    }

    /// Waits until the record and the publication hold the latest document (or its write
    /// failed: [`degraded`](Self::degraded)). The wait is off the runtime's threads.
    pub async fn flushed(&self) {
        self.writer.flushed().await;
    }

    /// Like [`flushed`](Self::flushed), blocking the calling thread.
    pub fn flush(&self) {
        self.writer.flush();
    }

    /// Looks at the published state file: when it is not what this recorder last wrote (the
    /// agent, or anyone, rewrote or removed it), writes it again from the record and says what
    /// was found, for the caller to record as `lane.publication_restored` (not here: recording
    /// an event updates this recorder). `None` when it is as written, or when nothing was
    /// published yet.
    /// The check runs between two writes of the writer; one still to come writes the newer
    /// document over what is put back.
    pub fn check_publication(&self) -> Option<PublicationRestored> {
        self.writer.with_sink(Files::check_publication)
    }

    fn lock_doc(&self) -> std::sync::MutexGuard<'_, WorkerStateDoc> {
        self.doc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the document as it is now.
    pub fn doc(&self) -> WorkerStateDoc {
        self.lock_doc().clone()
    }

    /// The lane's status, now and after every change.
    pub fn statuses(&self) -> watch::Receiver<LaneStatus> {
        self.status.subscribe()
    }

    /// The error of the last failed write of the record, if the last write failed (a write
    /// still in flight is not waited for: [`flushed`](Self::flushed) first).
    pub fn degraded(&self) -> Option<String> {
        self.record.degraded()
    }
}

impl Sink for Files {
    type Item = WorkerStateDoc;

    /// Writes the record, then the publication, and keeps the degraded marker in step with
    /// the record's write.
    fn write(&mut self, doc: WorkerStateDoc) {
        let bytes = StateFileWriter::render(&doc);
        let result = self.record.write_rendered(&bytes);
        if let Err(err) = &result {
            // The previous record stays intact; the lane carries on and is reported degraded.
            tracing::warn!(error = %err, "could not write the lane's state record");
        }
        if let Some(publication) = &mut self.publication {
            publication.publish(&bytes);
        }
        if let Some(marker) = &self.marker {
            match &result {
                Err(err) => {
                    self.marked = true;
                    let _ = std::fs::write(marker, format!("{err}\n"));
                }
                Ok(()) if self.marked => {
                    self.marked = false;
                    let _ = std::fs::remove_file(marker);
                }
                Ok(()) => {}
            }
        }
    }
}

impl Files {
    /// [`StateRecorder::check_publication`], between writes.
    fn check_publication(&mut self) -> Option<PublicationRestored> {
        let publication = self.publication.as_mut()?;
        let written = publication.written.clone()?;
        let restored = match std::fs::read(publication.writer.path()) {
            Ok(found) if found == written => return None,
            Ok(found) => PublicationRestored {
                found: PublicationFound::Changed,
                claimed_status: serde_json::from_slice::<Claim>(&found)
                    .ok()
                    .and_then(|claim| claim.lane_status),
            },
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => PublicationRestored {
                found: PublicationFound::Removed,
                claimed_status: None,
            },
            // Unreadable (a folder in its place, say): writing replaces what can be replaced.
            Err(_) => PublicationRestored {
                found: PublicationFound::Changed,
                claimed_status: None,
            },
        };
        publication.publish(&written);
        Some(restored)
    }
}

/// Makes the publication in `worktree` the record in `record` again, byte for byte, when it is
/// not: a supervisor killed between the two writes of a change left it one change behind, and
/// an ended lane has no supervisor left to put it back. Best effort, like every publication.
pub fn republish(record: &Path, worktree: &Path) {
    let Ok(bytes) = std::fs::read(clawpool_worktree::layout::state_record(record)) else {
        return;
    };
    let publication = StateFileWriter::for_worktree(worktree);
    if std::fs::read(publication.path()).is_ok_and(|found| found == bytes) {
        return;
    }
    if let Err(err) = publication.write_rendered(&bytes) {
        tracing::warn!(error = %err, "could not publish the lane's state file");
    }
}

impl Publication {
    /// Writes the publication; a failure is logged, never the lane's degradation (the record
    /// is what clawpool believes, and the watcher tries again on the next change).
    fn publish(&mut self, bytes: &[u8]) {
        match self.writer.write_rendered(bytes) {
            Ok(()) => self.written = Some(bytes.to_vec()),
            Err(err) => tracing::warn!(error = %err, "could not publish the lane's state file"),
        }
    }
}
