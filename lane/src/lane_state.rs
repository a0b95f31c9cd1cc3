//! Keeping a lane's state file in step with its events: every event is applied to the lane's
//! [`WorkerStateDoc`] and written at once (atomically). Nothing rewrites it while nothing
//! happens: pollers tell a live supervisor from a lost one by its lock
//! ([`clawpool_lanes::state_file::liveness`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{LaneEvent, LaneStatus, StateFileWriter, WorkerStateDoc};
use tokio::sync::watch;

/// A lane's state document and the writer of its file.
#[derive(Clone)]
pub struct StateRecorder {
    inner: Arc<Mutex<(WorkerStateDoc, StateFileWriter)>>,
    marker: Option<Arc<PathBuf>>,
    /// Whether the marker may be on disk (left by this or an earlier supervisor of the lane).
    marked: Arc<AtomicBool>,
    /// The lane's status after every update, for whoever waits for the lane to be idle.
    status: Arc<watch::Sender<LaneStatus>>,
}

/// The file, in a lane's registry folder, that says its state file could not be written.
pub use clawpool_worktree::layout::DEGRADED_MARKER;

impl StateRecorder {
    /// Starts recording `doc` through `writer`, writing it once now.
    pub fn new(doc: WorkerStateDoc, writer: StateFileWriter) -> Self {
        Self::with_marker(doc, writer, None)
    }

    /// Like [`new`](Self::new), keeping `marker` present exactly while the lane is degraded: it
    /// is written when a write fails and removed by the next write that succeeds, whoever left
    /// it (a supervisor that ended degraded leaves it for the next one to clear).
    pub fn with_marker(
        doc: WorkerStateDoc,
        writer: StateFileWriter,
        marker: Option<PathBuf>,
    ) -> Self {
        let status = Arc::new(watch::Sender::new(doc.status));
        let marked = marker.as_ref().is_some_and(|m| m.exists());
        let recorder = Self {
            inner: Arc::new(Mutex::new((doc, writer))),
            marker: marker.map(Arc::new),
            marked: Arc::new(AtomicBool::new(marked)),
            status,
        };
        recorder.update(|_| {});
        recorder
    }

    /// Applies an event and writes the file.
    pub fn on_event(&self, event: &LaneEvent) {
        self.update(|doc| doc.apply_event(event));
    }

    /// Changes the document and writes the file.
    pub fn update(&self, change: impl FnOnce(&mut WorkerStateDoc)) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (doc, writer) = &mut *guard;
        change(doc);
        doc.stamp(now_secs());
        self.status.send_if_modified(|status| {
            let changed = *status != doc.status;
            *status = doc.status;
            changed
        });
        let result = writer.write(doc);
        if let Err(err) = &result {
            // The previous file stays intact; the lane carries on and is reported degraded.
            tracing::warn!(error = %err, "could not write the lane's state file");
        }
        if let Some(marker) = &self.marker {
            match &result {
                Err(err) => {
                    self.marked.store(true, Ordering::SeqCst);
                    let _ = std::fs::write(marker.as_path(), format!("{err}\n"));
                }
                Ok(()) if self.marked.swap(false, Ordering::SeqCst) => {
                    let _ = std::fs::remove_file(marker.as_path());
                }
                Ok(()) => {}
            }
        }
    }

    /// A copy of the document as it is now.
    pub fn doc(&self) -> WorkerStateDoc {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.clone()
    }

    /// The lane's status, now and after every change.
    pub fn statuses(&self) -> watch::Receiver<LaneStatus> {
        self.status.subscribe()
    }

    /// The error of the last failed write, if the last write failed.
    pub fn degraded(&self) -> Option<String> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.1.degraded()
    }
}
