//! A kept row as the board prints it: the row's JSON document as it was written when the row
//! was worked out, with the places of the two entries that move with the clock and the
//! supervisor's lock (`seconds_since_update`, `supervisor`) marked. A later board writes the
//! text as it is and only those two entries anew, so a steady board of ended lanes neither
//! parses their state documents nor serializes them again.
//!
//! Only an ended lane's row is printed so (its status is its own whatever its supervisor's
//! liveness, and `is_ready` stays as written); its text is the same serializer's output as a
//! row worked out now ([`super::document`]), so the two never differ but for the ages.

use std::cell::Cell;
use std::io::{self, Write};
use std::ops::Range;
use std::sync::Arc;

use clawpool_lanes::WorkerStateDoc;
use clawpool_lanes::state_file::{Liveness, Supervisor, supervisor_lost};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::document::{BOARD_ENTRY, ROW_ONLY_ENTRIES, ShownSupervisor, write_view};
use super::{BoardLane, LaneCost};

/// The key of the entry that counts from the lane's last progress.
const UPDATE_KEY: &str = "\"seconds_since_update\":";
/// The key of the entry that says whether the supervisor is gone.
const SUPERVISOR_KEY: &str = "\"supervisor\":";

/// A row's printed document and what its moving entries are made from.
#[derive(Debug, Clone)]
pub struct PrintedRow {
    /// The row's JSON document as the board printed it when it was worked out.
    row: RowText,
    /// Where in `row` the entry `seconds_since_update` is, its leading comma included.
    update: (usize, usize),
    /// Where in `row` the entry `supervisor` is, its leading comma included.
    supervisor: (usize, usize),
    /// The lane's last progress (epoch s), which `seconds_since_update` counts from.
    progress_at: u64,
    /// The supervisor as the state file has it.
    supervisor_file: Supervisor,
    /// The lane's cost, for the repository's total.
    pub cost: LaneCost,
}

/// A printed row's text: its own, or its place in the summary file a board read it from (the
/// file read once and shared: a steady board neither copies nor parses its rows, which the
/// file holds after its first line, outside its JSON).
#[derive(Debug, Clone)]
enum RowText {
    /// Printed by this board.
    Own(String),
    /// Read from the summary.
    InSummary { file: Arc<String>, at: Range<usize> },
}

impl RowText {
    fn get(&self) -> &str {
        match self {
            RowText::Own(text) => text,
            RowText::InSummary { file, at } => &file[at.clone()],
        }
    }
}

/// A [`PrintedRow`] as the summary file holds it: where its text is in the file's rows.
#[derive(Debug, Serialize, Deserialize)]
pub struct PrintedRowAt {
    /// Where the text is among the rows after the file's first line.
    text: (usize, usize),
    update: (usize, usize),
    supervisor: (usize, usize),
    progress_at: u64,
    supervisor_file: Supervisor,
    cost: LaneCost,
}

impl PrintedRowAt {
    /// The row, its text the place in `file` (the summary's text) `rows` bytes on, where its
    /// rows begin; `None` when that is not in the file.
    pub fn in_file(self, file: &Arc<String>, rows: usize) -> Option<PrintedRow> {
        let at = rows.checked_add(self.text.0)?..rows.checked_add(self.text.1)?;
        file.get(at.clone())?;
        Some(PrintedRow {
            row: RowText::InSummary {
                file: Arc::clone(file),
                at,
            },
            update: self.update,
            supervisor: self.supervisor,
            progress_at: self.progress_at,
            supervisor_file: self.supervisor_file,
            cost: self.cost,
        })
    }
}

/// Where the serializer is in the row's text, and where the moving entries went.
#[derive(Default)]
pub(super) struct Spans {
    written: Cell<usize>,
    update: Cell<Option<(usize, usize)>>,
    supervisor: Cell<Option<(usize, usize)>>,
}

impl Spans {
    /// Where the serializer is now.
    pub(super) fn at(&self) -> usize {
        self.written.get()
    }

    /// Marks the entry `key`, written from `start` to where the serializer is now, when it is
    /// one that moves.
    pub(super) fn entry(&self, key: &str, start: usize) {
        let span = Some((start, self.written.get()));
        match key {
            "seconds_since_update" => self.update.set(span),
            "supervisor" => self.supervisor.set(span),
            _ => {}
        }
    }
}

/// The row's text, counted as it is written.
struct Counting<'a> {
    text: Vec<u8>,
    written: &'a Cell<usize>,
}

impl Write for Counting<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.text.extend_from_slice(bytes);
        self.written.set(self.text.len());
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl PrintedRow {
    /// `lane`'s row printed, with its moving entries marked; `None` for a row whose record
    /// could not be read.
    pub fn of(lane: &BoardLane) -> Option<PrintedRow> {
        let view = lane.state.as_ref().ok()?;
        let spans = Spans::default();
        let mut serializer = serde_json::Serializer::new(Counting {
            text: Vec::with_capacity(4096),
            written: &spans.written,
        });
        let mut map = (&mut serializer).serialize_map(None).ok()?;
        write_view(view, &mut map, Some(&spans)).ok()?;
        map.serialize_entry(BOARD_ENTRY, &lane.board).ok()?;
        SerializeMap::end(map).ok()?;
        let text = String::from_utf8(serializer.into_inner().text).ok()?;
        let printed = PrintedRow {
            row: RowText::Own(text),
            update: spans.update.get()?,
            supervisor: spans.supervisor.get()?,
            progress_at: view.doc.progress_at,
            supervisor_file: view.doc.supervisor,
            cost: lane.cost(),
        };
        printed.holds_together().then_some(printed)
    }

    /// The row's text.
    pub fn text(&self) -> &str {
        self.row.get()
    }

    /// The row as the summary file holds it, its text at `text` among the file's rows.
    pub fn at(&self, text: (usize, usize)) -> PrintedRowAt {
        PrintedRowAt {
            text,
            update: self.update,
            supervisor: self.supervisor,
            progress_at: self.progress_at,
            supervisor_file: self.supervisor_file,
            cost: self.cost,
        }
    }

    /// The state document the row was printed from, for a reader that wants it typed: the
    /// row's entries but those only a row has (`last_status`, `board`); the supervisor's
    /// liveness and the ages are the reader's to work out again.
    pub fn doc(&self) -> Option<WorkerStateDoc> {
        let mut doc: WorkerStateDoc = serde_json::from_str(self.row.get()).ok()?;
        for key in ROW_ONLY_ENTRIES {
            doc.extra.remove(key);
        }
        Some(doc)
    }

    /// Whether the marks are where the entries are (a summary that says otherwise is
    /// refused, never sliced where it points).
    pub fn holds_together(&self) -> bool {
        let text = self.row.get();
        let entry = |(start, end): (usize, usize), key: &str| {
            start < end
                && end < text.len()
                && text.is_char_boundary(end)
                && matches!(text.as_bytes()[end], b',' | b'}')
                && text[start..]
                    .strip_prefix(',')
                    .unwrap_or(&text[start..])
                    .starts_with(key)
        };
        let (first, second) = if self.update.0 < self.supervisor.0 {
            (self.update, self.supervisor)
        } else {
            (self.supervisor, self.update)
        };
        text.ends_with('}')
            && first.1 <= second.0
            && entry(self.update, UPDATE_KEY)
            && entry(self.supervisor, SUPERVISOR_KEY)
    }

    /// Writes the row as of `now` (epoch s) with its supervisor's `liveness`, and, for a board
    /// of several repositories, its `repository` as a last entry.
    pub fn write(
        &self,
        out: &mut dyn Write,
        now: u64,
        liveness: Liveness,
        repository: Option<&str>,
    ) -> io::Result<()> {
        let text = self.row.get().as_bytes();
        let mut holes = [(self.update, true), (self.supervisor, false)];
        holes.sort_by_key(|((start, _), _)| *start);
        let mut at = 0;
        for ((start, end), is_update) in holes {
            out.write_all(&text[at..start])?;
            if text[start] == b',' {
                out.write_all(b",")?;
            }
            if is_update {
                write!(out, "{UPDATE_KEY}{}", now.saturating_sub(self.progress_at))?;
            } else {
                let seconds_since_heartbeat = now.saturating_sub(self.supervisor_file.heartbeat_at);
                out.write_all(SUPERVISOR_KEY.as_bytes())?;
                serde_json::to_writer(
                    &mut *out,
                    &ShownSupervisor {
                        file: &self.supervisor_file,
                        lost: supervisor_lost(liveness, seconds_since_heartbeat),
                        seconds_since_heartbeat,
                    },
                )?;
            }
            at = end;
        }
        match repository {
            Some(repository) => {
                out.write_all(&text[at..text.len() - 1])?;
                out.write_all(b",\"repository\":")?;
                serde_json::to_writer(&mut *out, repository)?;
                out.write_all(b"}")
            }
            None => out.write_all(&text[at..]),
        }
    }
}

#[cfg(test)]
mod tests {
    use clawpool_lanes::state_file::{Transport, TransportKind};
    use clawpool_lanes::{LaneStatus, StateView, WorkerStateDoc};

    use super::*;
    use crate::board::{BoardFacts, PermissionCounts};

    fn lane(doc: &WorkerStateDoc, liveness: Liveness, now: u64) -> BoardLane {
        BoardLane {
            name: "alpha".into(),
            worktree: "/tmp/w".into(),
            state: Ok(StateView::probed(doc.clone(), liveness, now)),
            board: BoardFacts {
                dirty: Some(false),
                commits_ahead: Some(1),
                state_file_degraded: None,
                permissions: PermissionCounts::default(),
                recorded_green_level: None,
            },
        }
    }

    fn finished_doc() -> WorkerStateDoc {
        let transport = Transport {
            kind: TransportKind::Pty,
            session: None,
        };
        let mut doc = WorkerStateDoc::new("w1", "alpha", "scripted", "/tmp/w", transport, 100);
        doc.status = LaneStatus::Finished;
        doc.progress_at = 150;
        doc.supervisor.heartbeat_at = 160;
        doc.extra
            .insert("from_a_newer_writer".into(), serde_json::json!({"x": 1}));
        doc
    }

    /// A printed row written later is, byte for byte, the row worked out then: the ages and
    /// the supervisor's liveness as of that board, everything else as printed.
    #[test]
    fn a_printed_row_is_the_row_worked_out_at_any_later_board() {
        let doc = finished_doc();
        let printed = PrintedRow::of(&lane(&doc, Liveness::Gone, 200)).expect("printed");
        for (now, liveness) in [
            (200, Liveness::Gone),
            (5_000, Liveness::Gone),
            (170, Liveness::Unknown),
            (100_000, Liveness::Unknown),
        ] {
            let mut written = Vec::new();
            printed
                .write(&mut written, now, liveness, None)
                .expect("write");
            let worked_out = serde_json::to_string(&lane(&doc, liveness, now)).expect("serialize");
            assert_eq!(String::from_utf8(written).expect("utf-8"), worked_out);
        }
        let mut shown = doc.clone();
        shown.seconds_since_update = 50;
        assert_eq!(
            printed.doc(),
            Some(shown),
            "the document it was printed from"
        );
        let mut with_repository = Vec::new();
        printed
            .write(&mut with_repository, 300, Liveness::Gone, Some("/r"))
            .expect("write");
        let row: serde_json::Value = serde_json::from_slice(&with_repository).expect("JSON");
        assert_eq!(row["repository"], "/r");
        assert_eq!(row["seconds_since_update"], 150);
        assert_eq!(row["supervisor"]["seconds_since_heartbeat"], 140);
    }

    /// Marks that are not where the moving entries are, as a hand-edited summary could hold,
    /// are refused (never sliced where they point).
    #[test]
    fn marks_off_their_entries_are_refused() {
        let printed = PrintedRow::of(&lane(&finished_doc(), Liveness::Gone, 200)).expect("printed");
        assert!(printed.holds_together());
        let len = printed.row.get().len();
        let (start, end) = printed.update;
        for update in [
            (start + 5, end + 5),
            (start, end - 1),
            (end, start),
            (start, len),
            (start, len + 10),
            printed.supervisor,
        ] {
            let moved = PrintedRow {
                update,
                ..printed.clone()
            };
            assert!(!moved.holds_together(), "{update:?}");
        }
    }
}
