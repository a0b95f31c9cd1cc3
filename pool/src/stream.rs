//! Reading a repository's event stream (`<common>/clawpool/stream.jsonl`, `docs/events.md`):
//! from its start, after a cursor a reader saw, or from now; and following it as it grows,
//! woken by a `notify` watch on the journal rather than a timer.
//!
//! A reader holds its place as a byte offset just past the last whole line it read. A line
//! still being appended is left for the next read; a line that does not parse (one torn by a
//! process that died mid-write, which the writer closes off) is skipped — its event is
//! appended again by the writer's repair (`clawpool_lanes::stream`).

use std::fs::File;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawpool_lanes::stream::StreamEvent;
use clawpool_worktree::layout::StateDir;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;

/// Why the stream could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The journal (or its folder) could not be read or watched.
    #[error("event stream {}: {source}", path.display())]
    Io {
        /// The journal.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The journal could not be watched.
    #[error("watching the event stream {}: {source}", path.display())]
    Watch {
        /// The journal.
        path: PathBuf,
        /// The error.
        source: notify::Error,
    },
    /// `--since` named no event of this stream.
    #[error("cursor {cursor} is not an event of the stream at {} (a cursor is an event's `cursor`, as printed)", path.display())]
    UnknownCursor {
        /// The cursor asked for.
        cursor: u64,
        /// The journal.
        path: PathBuf,
    },
}

impl StreamError {
    /// A stable name for the error, for JSON consumers.
    pub fn kind(&self) -> &'static str {
        match self {
            StreamError::Io { .. } | StreamError::Watch { .. } => "stream_unreadable",
            StreamError::UnknownCursor { .. } => "unknown_cursor",
        }
    }
}

/// Where a reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// With the stream's first event.
    Beginning,
    /// With the event after the one at this cursor (resuming).
    After(u64),
    /// With the first event appended from now on.
    Now,
}

/// A reader of a repository's stream that can wait for more.
pub struct Follower {
    path: PathBuf,
    file: File,
    /// Just past the last whole line read.
    offset: u64,
    wake: Arc<Notify>,
    _watcher: RecommendedWatcher,
}

impl Follower {
    /// Opens the stream of the repository whose clawpool folder is `dir` (creating an empty
    /// journal when no lane has written one yet), watching it before anything is read so no
    /// append is missed between reading and waiting.
    pub fn open(dir: &StateDir, start: Start) -> Result<Self, StreamError> {
        let path = dir.stream();
        let io = |source| StreamError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir.root()).map_err(io)?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let wake = Arc::new(Notify::new());
        let woken = Arc::clone(&wake);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Any change, and an error (an overflowed queue) too: the reader reads what is
                // there, so a wake too many costs a read and a wake lost is never the case.
                if event.as_ref().map_or(true, |e| !e.kind.is_access()) {
                    woken.notify_one();
                }
            })
            .map_err(|source| StreamError::Watch {
                path: path.clone(),
                source,
            })?;
        watcher
            .watch(&path, RecursiveMode::NonRecursive)
            .map_err(|source| StreamError::Watch {
                path: path.clone(),
                source,
            })?;
        let file = File::open(&path).map_err(io)?;
        let offset = match start {
            Start::Beginning => 0,
            Start::Now => whole_lines_end(&file).map_err(io)?,
            Start::After(cursor) => {
                let line = clawpool_lanes::stream::read_at(&path, cursor).map_err(io)?;
                if line.is_none() {
                    return Err(StreamError::UnknownCursor { cursor, path });
                }
                let mut reader = &file;
                reader.seek(SeekFrom::Start(cursor)).map_err(io)?;
                let mut line = Vec::new();
                std::io::BufReader::new(reader)
                    .read_until(b'\n', &mut line)
                    .map_err(io)?;
                cursor + line.len() as u64
            }
        };
        Ok(Self {
            path,
            file,
            offset,
            wake,
            _watcher: watcher,
        })
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every whole event appended since the last read, in order; none when nothing was.
    pub fn read(&mut self) -> Result<Vec<StreamEvent>, StreamError> {
        let io = |source| StreamError::Io {
            path: self.path.clone(),
            source,
        };
        let mut bytes = Vec::new();
        let mut reader = &self.file;
        reader.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        reader.read_to_end(&mut bytes).map_err(io)?;
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.offset += whole as u64;
        Ok(bytes[..whole]
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect())
    }

    /// The next events: what was appended since the last read, or, when nothing was, the
    /// first events appended from now on (waiting for the journal's watch to say so).
    pub async fn next(&mut self) -> Result<Vec<StreamEvent>, StreamError> {
        loop {
            let events = self.read()?;
            if !events.is_empty() {
                return Ok(events);
            }
            self.wake.notified().await;
        }
    }
}

/// Just past the journal's last whole line: a line being appended right now is not yet an
/// event.
fn whole_lines_end(file: &File) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut end = file.metadata()?.len();
    let mut byte = [0u8];
    while end > 0 {
        file.read_exact_at(&mut byte, end - 1)?;
        if byte[0] == b'\n' {
            break;
        }
        end -= 1;
    }
    Ok(end)
}

#[cfg(test)]
mod tests;
