//! The writing side of a repository's event stream (`<common>/clawpool/stream.jsonl`,
//! `docs/events.md`, "The repository's stream"): every event of every registry lane, whichever
//! process records it, appended with a repository-wide cursor. Reading and following the
//! stream, and waiting on it, are the pool's (`clawpool-pool`); this module is here because
//! the stream is written where a lane's own log is, by [`crate::EventLog`].
//!
//! A cursor is the byte offset of the event's line in the journal, taken under an exclusive
//! lock on the journal (`flock`) held across the lane log's append and the journal's, so the
//! order of the stream is the order of appends across processes, each lane's events are in
//! its `seq` order, and a cursor is never given twice.
//!
//! The lane's own line is written first, with the cursor in it; the journal's line is the
//! same bytes. A process that dies between the two leaves its lane's last event out of the
//! stream: the next [`crate::EventLog`] opened on that lane (a restarted or adopting
//! supervisor, an operator command) finds it missing at the cursor its line names and
//! appends it again ([`StreamWriter::repair`]). Nothing else can be missing: a lane's next
//! event is only written by a log opened after that check.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::LaneEvent;

/// One line of the stream: the lane event as in the lane's own log, with its cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEvent {
    /// The event (its `lane`, `seq`, `kind`, … at the top level of the line).
    #[serde(flatten)]
    pub event: LaneEvent,
    /// The event's place in the repository's stream: strictly increasing, the byte offset of
    /// its line in the journal.
    pub cursor: u64,
}

/// A lane log's line as the stream's writer reads it back: the event and, for lines written
/// since the stream exists, its cursor.
#[derive(Deserialize)]
struct LaneLine {
    #[serde(flatten)]
    event: LaneEvent,
    #[serde(default)]
    cursor: Option<u64>,
}

/// The journal, open for appending.
pub struct StreamWriter {
    path: PathBuf,
    file: File,
}

impl StreamWriter {
    /// Opens (or creates) the journal at `path`.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `event` with the next cursor, after `before` has written the same line
    /// elsewhere (the lane's own log), all under the journal's lock. Returns the line.
    pub fn append(
        &self,
        event: &LaneEvent,
        before: impl FnOnce(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<StreamEvent> {
        self.file.lock()?;
        let appended = self.append_locked(event, before);
        let unlocked = self.file.unlock();
        let line = appended?;
        unlocked?;
        Ok(line)
    }

    fn append_locked(
        &self,
        event: &LaneEvent,
        before: impl FnOnce(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<StreamEvent> {
        let mut len = self.file.metadata()?.len();
        // A line torn by a process that died mid-write is closed off, so the next one starts
        // a line of its own; readers skip the torn one and the repair appends its event again.
        if len > 0 {
            let mut last = [0u8];
            self.file.read_exact_at(&mut last, len - 1)?;
            if last[0] != b'\n' {
                (&self.file).write_all(b"\n")?;
                len += 1;
            }
        }
        let line = StreamEvent {
            event: event.clone(),
            cursor: len,
        };
        let mut bytes = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        before(&bytes)?;
        // One write with O_APPEND, under the lock: the line lands at `len`.
        (&self.file).write_all(&bytes)?;
        Ok(line)
    }

    /// Puts the last event of the lane log at `lane_log` into the stream if a process died
    /// between writing it there and here. Returns whether it had to.
    pub fn repair(&self, lane_log: &Path) -> std::io::Result<bool> {
        let Some(last) = last_line(lane_log)? else {
            return Ok(false);
        };
        // A line from before the stream existed has no cursor, and no place in it.
        let Some(cursor) = last.cursor else {
            return Ok(false);
        };
        let event = last.event;
        let same =
            |line: &StreamEvent| line.event.lane == event.lane && line.event.seq == event.seq;
        if read_at(&self.path, cursor)?.is_some_and(|line| same(&line)) {
            return Ok(false);
        }
        // Not where it was meant to land: an earlier repair may have appended it since.
        let mut reader = BufReader::new(File::open(&self.path)?);
        reader.seek(SeekFrom::Start(cursor))?;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            if serde_json::from_slice::<StreamEvent>(&buf).is_ok_and(|line| same(&line)) {
                return Ok(false);
            }
        }
        self.append(&event, |_| Ok(()))?;
        Ok(true)
    }
}

/// The stream's line that starts at byte `cursor` of the journal at `path`, if a whole event
/// starts there.
pub fn read_at(path: &Path, cursor: u64) -> std::io::Result<Option<StreamEvent>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if cursor > 0 {
        // A cursor is the start of a line: the byte before it ends the previous one.
        let mut before = [0u8];
        if file.read_exact_at(&mut before, cursor - 1).is_err() || before[0] != b'\n' {
            return Ok(None);
        }
    }
    file.seek(SeekFrom::Start(cursor))?;
    let mut line = Vec::new();
    BufReader::new(file).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') {
        return Ok(None);
    }
    Ok(serde_json::from_slice::<StreamEvent>(&line)
        .ok()
        .filter(|event| event.cursor == cursor))
}

/// The last whole line of a lane's log, read back.
fn last_line(path: &Path) -> std::io::Result<Option<LaneLine>> {
    let mut text = String::new();
    match File::open(path) {
        Ok(mut file) => file.read_to_string(&mut text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str::<LaneLine>(line).ok()))
}

#[cfg(test)]
mod tests;
