//! The writer of a lane's state files: it owns the files and writes, on a thread of its own,
//! the latest document handed to it. A write of the record and its publication is two atomic,
//! fsync'd writes (about 12 ms each on a busy disk); done on the async runtime's threads, every
//! lane event would hold a thread that other lanes' screens, hooks and replies are waiting for.
//! So the recorder hands the document over and returns: documents handed while a write is in
//! flight replace each other (only the latest is written next), and the last one handed is
//! always written. [`LatestWriter::flush`] waits until it is on disk; dropping the writer
//! flushes it, so the last recorder of a lane to go leaves the lane's files as it left the
//! lane.
//!
//! No thread is kept while nothing is written: one is started when a document arrives with no
//! write in flight and ends once nothing is left to write.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Where the writer's documents go, and how.
pub(crate) trait Sink: Send + 'static {
    /// What is handed to the writer.
    type Item: Send + 'static;
    /// Writes `item` (each write is complete or leaves the previous one: see the files'
    /// atomic-write guarantee).
    fn write(&mut self, item: Self::Item);
}

/// Writes the latest item handed to it into its [`Sink`], off the caller's thread.
pub(crate) struct LatestWriter<S: Sink> {
    shared: Arc<Shared<S>>,
}

struct Shared<S: Sink> {
    slot: Mutex<Slot<S::Item>>,
    /// Signalled whenever `written` moves or the thread ends.
    progress: Condvar,
    sink: Mutex<S>,
}

struct Slot<T> {
    /// The latest item not yet taken by the thread.
    latest: Option<T>,
    /// How many items were handed.
    handed: u64,
    /// How many of the items handed are on disk or superseded by one that is.
    written: u64,
    /// Whether a thread is writing (or about to).
    running: bool,
}

impl<S: Sink> LatestWriter<S> {
    pub(crate) fn new(sink: S) -> Self {
        Self {
            shared: Arc::new(Shared {
                slot: Mutex::new(Slot {
                    latest: None,
                    handed: 0,
                    written: 0,
                    running: false,
                }),
                progress: Condvar::new(),
                sink: Mutex::new(sink),
            }),
        }
    }

    /// Hands `item` over to be written, replacing any not yet taken; returns at once.
    pub(crate) fn hand(&self, item: S::Item) {
        let mut slot = self.shared.slot();
        slot.latest = Some(item);
        slot.handed += 1;
        if slot.running {
            return;
        }
        slot.running = true;
        drop(slot);
        let shared = Arc::clone(&self.shared);
        let started = std::thread::Builder::new()
            .name("lane-state".to_owned())
            .spawn(move || shared.drain());
        if let Err(err) = started {
            // No thread to be had: the caller writes, as before there was a writer.
            tracing::warn!(error = %err, "could not start the state file's writer; writing inline");
            self.shared.drain();
        }
    }

    /// Waits until everything handed so far is written (or superseded by a written item).
    pub(crate) fn flush(&self) {
        self.shared.flush();
    }

    /// [`flush`](Self::flush) for async callers: the wait is on a blocking thread, never on
    /// the runtime's.
    pub(crate) async fn flushed(&self) {
        if self.shared.is_flushed() {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let _ = tokio::task::spawn_blocking(move || shared.flush()).await;
    }

    /// Runs `f` on the sink, between writes.
    pub(crate) fn with_sink<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.shared.sink())
    }
}

impl<S: Sink> Drop for LatestWriter<S> {
    /// The last document handed is on disk before its writer goes.
    fn drop(&mut self) {
        self.shared.flush();
    }
}

impl<S: Sink> Shared<S> {
    /// Writes items until none is left, then marks the thread gone.
    fn drain(&self) {
        loop {
            let (item, upto) = {
                let mut slot = self.slot();
                match slot.latest.take() {
                    Some(item) => (item, slot.handed),
                    None => {
                        slot.running = false;
                        self.progress.notify_all();
                        return;
                    }
                }
            };
            {
                let mut sink = self.sink();
                // A panicking write must not leave flushers waiting forever: it counts as
                // done (the files keep their previous, whole document).
                if catch_unwind(AssertUnwindSafe(|| sink.write(item))).is_err() {
                    tracing::error!("the state file's writer panicked");
                }
            }
            let mut slot = self.slot();
            slot.written = slot.written.max(upto);
            self.progress.notify_all();
        }
    }

    fn flush(&self) {
        let mut slot = self.slot();
        let target = slot.handed;
        while slot.written < target {
            slot = self
                .progress
                .wait(slot)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn is_flushed(&self) -> bool {
        let slot = self.slot();
        slot.written == slot.handed
    }

    fn slot(&self) -> MutexGuard<'_, Slot<S::Item>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sink(&self) -> MutexGuard<'_, S> {
        self.sink.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Records what it writes; when gated, tells the test a write started and waits for the
    /// test to let it finish.
    type Written = Arc<Mutex<Vec<u32>>>;

    struct Log {
        written: Written,
        gate: Option<(mpsc::Sender<u32>, mpsc::Receiver<()>)>,
    }

    impl Sink for Log {
        type Item = u32;
        fn write(&mut self, item: u32) {
            if let Some((started, go)) = &self.gate {
                started.send(item).expect("the test listens");
                go.recv().expect("the writer's word");
            }
            self.written.lock().expect("the log").push(item);
        }
    }

    /// A gated [`Log`], what it wrote, and the test's ends of its gate: the item of each write
    /// as it starts, and the word that lets it finish.
    fn gated_log() -> (Written, Log, mpsc::Receiver<u32>, mpsc::Sender<()>) {
        let written = Arc::new(Mutex::new(Vec::new()));
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let log = Log {
            written: Arc::clone(&written),
            gate: Some((started_tx, go_rx)),
        };
        (written, log, started, go)
    }

    #[test]
    fn documents_handed_during_a_write_coalesce_into_the_latest() {
        let (written, log, started, go) = gated_log();
        let writer = LatestWriter::new(log);
        writer.hand(1);
        // The first write is in flight: everything handed now waits for it.
        assert_eq!(started.recv().expect("the writer's word"), 1);
        for doc in 2..=5 {
            writer.hand(doc);
        }
        go.send(()).expect("the writer waits");
        // Only the latest of those is written next, and nothing after it.
        assert_eq!(started.recv().expect("the writer's word"), 5);
        go.send(()).expect("the writer waits");
        writer.flush();
        assert_eq!(*written.lock().expect("the log"), vec![1, 5]);
        assert!(started.try_recv().is_err());
    }

    #[test]
    fn flush_waits_for_the_write_in_flight_and_the_one_after_it() {
        let (written, log, started, go) = gated_log();
        let writer = Arc::new(LatestWriter::new(log));
        writer.hand(1);
        assert_eq!(started.recv().expect("the writer's word"), 1);
        writer.hand(2);
        let flusher = {
            let writer = Arc::clone(&writer);
            let written = Arc::clone(&written);
            std::thread::spawn(move || {
                writer.flush();
                written.lock().expect("the log").last().copied()
            })
        };
        go.send(()).expect("the writer waits");
        assert_eq!(started.recv().expect("the writer's word"), 2);
        go.send(()).expect("the writer waits");
        assert_eq!(flusher.join().expect("the flusher"), Some(2));
    }

    #[test]
    fn dropping_the_writer_leaves_the_latest_document_written() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let writer = LatestWriter::new(Log {
            written: Arc::clone(&written),
            gate: None,
        });
        for doc in 1..=50 {
            writer.hand(doc);
        }
        drop(writer);
        let written = written.lock().expect("the log");
        assert_eq!(written.last(), Some(&50));
        assert!(written.windows(2).all(|w| w[0] < w[1]), "{written:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn flushed_waits_off_the_runtime_thread() {
        let (written, log, started, go) = gated_log();
        let writer = LatestWriter::new(log);
        writer.hand(7);
        assert_eq!(started.recv().expect("the writer's word"), 7);
        // The one runtime thread stays free while the write is held: the task that lets it
        // finish runs beside the flush.
        let release = tokio::spawn(async move { go.send(()).expect("the writer waits") });
        writer.flushed().await;
        release.await.expect("the release");
        assert_eq!(*written.lock().expect("the log"), vec![7]);
    }
}
