//! The screen hub: the one place a worker's output goes, whatever transport carried it.
//!
//! A transport hands every chunk of output to [`ScreenHub::feed`], which appends it to the raw
//! log, runs it through the screen model, and marks the screen dirty. A coalescing task turns
//! "dirty" into screen-changed notifications: the first change after a quiet spell is
//! announced at once, later ones at most once per [`COALESCE_WINDOW`], so a redraw storm costs
//! a watcher about a hundred wake-ups a second instead of one per byte. A watcher waiting for
//! one particular change (a prompt's acceptance, which a caller is waiting on) can ask for
//! every change meanwhile ([`ScreenChanges::set_urgent`]): while any watcher is urgent, no
//! window is held, and the notifications go as fast as the watcher takes them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::TermSize;
use crate::rawlog::RawLog;
use crate::screen::{ScreenModel, ScreenSnapshot};

/// The shortest gap between two screen-changed notifications.
pub const COALESCE_WINDOW: Duration = Duration::from_millis(10);

pub(crate) struct ScreenHub {
    state: Mutex<HubState>,
    /// Set by `feed`, consumed by the coalescing task.
    dirty: Notify,
    /// How many chunks have been fed, so a transport can tell when output has gone quiet.
    chunks: std::sync::atomic::AtomicU64,
    /// Set once the transport will feed no more output; the coalescing task then sends its
    /// last notification and drops the sender, which is how watchers learn the stream ended.
    finished: AtomicBool,
    /// A receiver kept only to hand out clones; the sender lives in the coalescing task.
    changes: watch::Receiver<u64>,
    /// Who wants every change announced at once.
    urgency: Arc<Urgency>,
}

/// The watchers that asked for every change ([`ScreenChanges::set_urgent`]).
#[derive(Default)]
struct Urgency {
    /// How many watchers are urgent now.
    watchers: AtomicUsize,
    /// Cuts a window being held short when a watcher becomes urgent.
    raised: Notify,
}

struct HubState {
    model: ScreenModel,
    log: Option<RawLog>,
    log_failed: bool,
}

impl ScreenHub {
    /// A hub around `model`, with its coalescing task spawned on the current runtime.
    pub(crate) fn start(model: ScreenModel, log: Option<RawLog>) -> Arc<Self> {
        let (tx, rx) = watch::channel(0u64);
        let hub = Arc::new(Self {
            state: Mutex::new(HubState {
                model,
                log,
                log_failed: false,
            }),
            dirty: Notify::new(),
            chunks: std::sync::atomic::AtomicU64::new(0),
            finished: AtomicBool::new(false),
            changes: rx,
            urgency: Arc::default(),
        });
        tokio::spawn(coalesce(Arc::clone(&hub), tx));
        hub
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // A panic while holding the lock leaves a screen that is at worst one chunk behind;
        // keep serving it rather than poisoning every later reader.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes one chunk of output. Returns the replies owed to terminal queries in it.
    pub(crate) fn feed(&self, bytes: &[u8]) -> Vec<u8> {
        let replies = {
            let mut state = self.lock();
            if let Some(log) = state.log.as_mut()
                && let Err(err) = log.append(bytes)
                && !state.log_failed
            {
                tracing::warn!(error = %err, "raw terminal log write failed; the screen model continues");
                state.log_failed = true;
            }
            state.model.feed(bytes)
        };
        self.chunks.fetch_add(1, Ordering::SeqCst);
        self.dirty.notify_one();
        replies
    }

    /// The screen model answers at most `answers` from now on.
    pub(crate) fn limit_query_answers(&self, answers: crate::QueryAnswers) {
        self.lock().model.limit_query_answers(answers);
    }

    /// Replaces the screen with a fresh model (used when re-attaching to a running worker,
    /// whose screen is rebuilt from one capture).
    pub(crate) fn reset(&self, model: ScreenModel) {
        self.lock().model = model;
        self.dirty.notify_one();
    }

    /// How many chunks of output have been fed so far.
    pub(crate) fn chunks_fed(&self) -> u64 {
        self.chunks.load(Ordering::SeqCst)
    }

    pub(crate) fn snapshot(&self) -> ScreenSnapshot {
        self.lock().model.snapshot()
    }

    pub(crate) fn scrollback(&self) -> Vec<String> {
        self.lock().model.scrollback()
    }

    pub(crate) fn contents_formatted(&self) -> Vec<u8> {
        self.lock().model.contents_formatted()
    }

    pub(crate) fn bracketed_paste(&self) -> bool {
        self.lock().model.bracketed_paste()
    }

    pub(crate) fn application_cursor(&self) -> bool {
        self.lock().model.application_cursor()
    }

    pub(crate) fn size(&self) -> TermSize {
        self.lock().model.size()
    }

    pub(crate) fn resize(&self, size: TermSize) {
        self.lock().model.resize(size);
        self.dirty.notify_one();
    }

    pub(crate) fn subscribe(&self) -> ScreenChanges {
        let mut rx = self.changes.clone();
        // "From now on": a change announced before this call is not news to the new stream.
        rx.mark_unchanged();
        ScreenChanges {
            rx,
            urgency: Arc::clone(&self.urgency),
            urgent: false,
        }
    }

    /// No more output will come: wake watchers one last time and end their stream.
    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.dirty.notify_one();
    }
}

async fn coalesce(hub: Arc<ScreenHub>, tx: watch::Sender<u64>) {
    loop {
        hub.dirty.notified().await;
        tx.send_modify(|generation| *generation += 1);
        if hub.finished.load(Ordering::SeqCst) {
            return;
        }
        // Listening before the count is read: a watcher turning urgent in between still cuts
        // the window short.
        let raised = hub.urgency.raised.notified();
        tokio::pin!(raised);
        raised.as_mut().enable();
        if hub.urgency.watchers.load(Ordering::SeqCst) == 0 {
            tokio::select! {
                _ = tokio::time::sleep(COALESCE_WINDOW) => {}
                _ = raised => {}
            }
        }
    }
}

/// A stream of screen-changed notifications for one worker.
pub struct ScreenChanges {
    rx: watch::Receiver<u64>,
    urgency: Arc<Urgency>,
    /// Whether this stream counts among the urgent watchers.
    urgent: bool,
}

impl Clone for ScreenChanges {
    /// A clone sees the same notifications, and is not urgent until it says so.
    fn clone(&self) -> Self {
        Self {
            rx: self.rx.clone(),
            urgency: Arc::clone(&self.urgency),
            urgent: false,
        }
    }
}

impl Drop for ScreenChanges {
    fn drop(&mut self) {
        self.set_urgent(false);
    }
}

impl ScreenChanges {
    /// Asks for every change to be announced at once (`true`) instead of at most once per
    /// [`COALESCE_WINDOW`], until set back to `false` (or the stream is dropped). For the
    /// short spells in which one change is awaited: the window would add up to its length to
    /// when that change is seen.
    pub fn set_urgent(&mut self, urgent: bool) {
        if urgent == self.urgent {
            return;
        }
        self.urgent = urgent;
        if urgent {
            self.urgency.watchers.fetch_add(1, Ordering::SeqCst);
            self.urgency.raised.notify_waiters();
        } else {
            self.urgency.watchers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Waits until the screen changed since this stream last looked. Returns `false` once the
    /// worker's output has ended and no further change will come.
    pub async fn changed(&mut self) -> bool {
        self.rx.changed().await.is_ok()
    }

    /// How many notifications have been sent so far (a generation counter).
    pub fn generation(&self) -> u64 {
        *self.rx.borrow()
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::screen::ScreenOptions;

    fn hub() -> Arc<ScreenHub> {
        let size = TermSize { rows: 4, cols: 20 };
        ScreenHub::start(ScreenModel::new(ScreenOptions::new(size)), None)
    }

    /// Feeds a first change and waits until it was announced: the window is then being held.
    async fn inside_the_window(hub: &ScreenHub, changes: &mut ScreenChanges) {
        hub.feed(b"first");
        assert!(changes.changed().await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_inside_the_window_waits_for_its_end() {
        let hub = hub();
        let mut changes = hub.subscribe();
        inside_the_window(&hub, &mut changes).await;
        let fed = Instant::now();
        hub.feed(b" second");
        assert!(changes.changed().await);
        assert_eq!(fed.elapsed(), COALESCE_WINDOW);
    }

    #[tokio::test(start_paused = true)]
    async fn an_urgent_watcher_hears_a_change_inside_the_window_at_once() {
        let hub = hub();
        let mut changes = hub.subscribe();
        inside_the_window(&hub, &mut changes).await;
        changes.set_urgent(true);
        let fed = Instant::now();
        hub.feed(b" second");
        assert!(changes.changed().await);
        assert_eq!(fed.elapsed(), Duration::ZERO);
        assert!(hub.snapshot().text().contains("first second"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_window_comes_back_once_no_watcher_is_urgent() {
        let hub = hub();
        let mut changes = hub.subscribe();
        let mut other = changes.clone();
        other.set_urgent(true);
        drop(other);
        changes.set_urgent(true);
        changes.set_urgent(false);
        inside_the_window(&hub, &mut changes).await;
        let fed = Instant::now();
        hub.feed(b" second");
        assert!(changes.changed().await);
        assert_eq!(fed.elapsed(), COALESCE_WINDOW);
    }
}
