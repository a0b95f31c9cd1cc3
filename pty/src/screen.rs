//! The screen model: what a worker's terminal shows, rebuilt from the raw bytes it wrote.
//!
//! The VT parsing is vt100's. This module adds what a supervisor needs on top: the window
//! title, a bounded text scrollback, plain-text snapshots, and the replies a real terminal gives
//! to the queries agents send while they start (without them, crossterm-based agents abort).
//!
//! A snapshot is taken on every screen change, and an agent redrawing its spinner changes one
//! or two rows of forty: each row's text is kept with the row as vt100 renders it (its
//! contents with attributes), and only the rows whose rendering changed are read again cell
//! by cell.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::num::NonZeroU16;

use crate::TermSize;

/// How many lines of scrollback a screen keeps unless told otherwise.
pub const DEFAULT_SCROLLBACK_LINES: usize = 1_000;

/// The version string a screen reports for `ESC[>0q` (XTVERSION).
const TERMINAL_VERSION: &str = concat!("clawpool(", env!("CARGO_PKG_VERSION"), ")");

/// A terminal screen fed with a worker's raw output.
pub struct ScreenModel {
    parser: vt100::Parser<Observer>,
    /// The visible rows as the last snapshot read them.
    rows: RefCell<VisibleRows>,
}

/// The visible rows as the last snapshot read them.
struct VisibleRows {
    texts: Vec<RowText>,
    /// Whether output was fed (or the screen resized) since they were read; until then they
    /// are read from here, not from vt100 (a lane also looks when a timer or the agent's
    /// hooks wake it).
    stale: bool,
}

/// One visible row's text, with the key it was read for.
#[derive(Default)]
struct RowText {
    /// The row as `vt100::Screen::rows_formatted` renders it: every cell's contents and
    /// attributes (dim, inverse) are in it, so while it is the same, so are the texts below.
    formatted: String,
    /// Trailing blanks removed, as [`ScreenSnapshot::rows`].
    text: String,
    /// As [`ScreenSnapshot::undimmed`].
    undimmed: String,
}

/// What the parser reports besides the grid: title changes, scrolled-off rows, and terminal
/// queries that need an answer.
struct Observer {
    title: String,
    scrollback: VecDeque<String>,
    scrollback_limit: usize,
    answers: QueryAnswers,
    replies: Vec<u8>,
}

/// Which terminal queries a [`ScreenModel`] answers, from fewest to most.
///
/// An answer is written to the application's input, as a real terminal's is: a query the
/// application did not send itself (one in a file it shows or a tool's output it prints raw)
/// makes the answer land where the application reads keys, and an agent that does not parse
/// it there takes it for typing. So a worker answers all of them while its agent starts
/// (when agents probe the terminal), and once a prompt is in only what its agent asks while it
/// works and reads as an answer (`docs/terminals.md`, "Queries").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum QueryAnswers {
    /// None: another terminal (tmux) answers them, or the agent needs none any more.
    None,
    /// Only the cursor position report (DSR 6): agents built on prompt_toolkit (aider) ask it
    /// each time they draw their prompt and read the reply as a reply.
    CursorPosition,
    /// Every query the model knows: an agent that is starting.
    All,
}

impl vt100::Callbacks for Observer {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        if self.answers == QueryAnswers::None {
            return;
        }
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        let cursor_position = (i1, c, first) == (None, 'n', 6);
        if self.answers == QueryAnswers::CursorPosition && !cursor_position {
            return;
        }
        match (i1, c, first) {
            // Cursor position report (DSR 6), 1-based.
            (None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
                self.replies
                    .extend_from_slice(format!("\x1b[{};{}R", row + 1, col + 1).as_bytes());
            }
            // Device status report (DSR 5): "terminal OK".
            (None, 'n', 5) => self.replies.extend_from_slice(b"\x1b[0n"),
            // Primary device attributes: a VT220 with ANSI colour, as xterm answers.
            (None, 'c', 0) => self.replies.extend_from_slice(b"\x1b[?62;22c"),
            // Secondary device attributes: terminal type 1 (VT220), firmware version, ROM 0.
            (Some(b'>'), 'c', 0) => self.replies.extend_from_slice(b"\x1b[>1;10;0c"),
            // XTVERSION: a DCS string naming the terminal.
            (Some(b'>'), 'q', 0) => {
                self.replies
                    .extend_from_slice(format!("\x1bP>|{TERMINAL_VERSION}\x1b\\").as_bytes());
            }
            _ => {}
        }
    }

    fn on_scroll(&mut self, contents: vt100::capture::RowContents<'_>, alternate_screen: bool) {
        // The alternate screen is a full-screen application's scratch space: what scrolls
        // off it is not history a person would scroll back to.
        if alternate_screen || self.scrollback_limit == 0 {
            return;
        }
        let mut formatted = String::new();
        let mut state = vt100::capture::BasicFormattedCaptureState::new();
        if contents
            .write_formatted_basic(&mut formatted, &mut state)
            .is_err()
        {
            return;
        }
        let plain: String = vt100::capture::basic_formatted_to_plain(&formatted).collect();
        if self.scrollback.len() == self.scrollback_limit {
            self.scrollback.pop_front();
        }
        self.scrollback.push_back(plain.trim_end().to_owned());
    }
}

/// Options for a new [`ScreenModel`].
#[derive(Debug, Clone, Copy)]
pub struct ScreenOptions {
    /// The size of the visible screen.
    pub size: TermSize,
    /// How many scrolled-off lines to keep as text.
    pub scrollback_lines: usize,
    /// Whether to answer terminal queries (cursor position, device attributes, version).
    /// A PTY we own must answer them; under tmux, tmux already does.
    pub answer_queries: bool,
}

impl ScreenOptions {
    /// Options for a screen of `size` with the default scrollback that answers queries.
    pub fn new(size: TermSize) -> Self {
        Self {
            size,
            scrollback_lines: DEFAULT_SCROLLBACK_LINES,
            answer_queries: true,
        }
    }
}

impl ScreenModel {
    /// A blank screen.
    pub fn new(options: ScreenOptions) -> Self {
        let (rows, cols) = options.size.non_zero();
        let observer = Observer {
            title: String::new(),
            scrollback: VecDeque::new(),
            scrollback_limit: options.scrollback_lines,
            answers: if options.answer_queries {
                QueryAnswers::All
            } else {
                QueryAnswers::None
            },
            replies: Vec::new(),
        };
        // vt100's own scrollback keeps whole cells (32 bytes each); the observer keeps text,
        // which is all a detector reads and a fraction of the memory.
        Self {
            parser: vt100::Parser::new_with_callbacks(rows, cols, 0, observer),
            rows: RefCell::new(VisibleRows {
                texts: Vec::new(),
                stale: true,
            }),
        }
    }

    /// Answers at most `answers` from now on: never more than it did (a model that answers
    /// none, because tmux does, stays so).
    pub fn limit_query_answers(&mut self, answers: QueryAnswers) {
        let observer = self.parser.callbacks_mut();
        observer.answers = observer.answers.min(answers);
    }

    /// Feeds raw output. Returns the bytes the terminal must send back to the application in
    /// reply to queries found in `bytes` (empty when there were none or queries are not
    /// answered).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.rows.get_mut().stale = true;
        self.parser.process(bytes);
        std::mem::take(&mut self.parser.callbacks_mut().replies)
    }

    /// Changes the visible size.
    pub fn resize(&mut self, size: TermSize) {
        let (rows, cols) = size.non_zero();
        self.rows.get_mut().stale = true;
        self.parser.set_size(rows, cols);
    }

    /// The visible size.
    pub fn size(&self) -> TermSize {
        let (rows, cols) = self.parser.screen().size();
        TermSize {
            rows: rows.get(),
            cols: cols.get(),
        }
    }

    /// Whether the application asked for bracketed paste (`ESC[?2004h`).
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// Whether the application switched the cursor keys to application mode (`ESC[?1h`).
    pub fn application_cursor(&self) -> bool {
        self.parser.screen().application_cursor()
    }

    /// The scrolled-off lines, oldest first.
    pub fn scrollback(&self) -> Vec<String> {
        self.parser.callbacks().scrollback.iter().cloned().collect()
    }

    /// What the screen shows now.
    pub fn snapshot(&self) -> ScreenSnapshot {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let (cursor_row, cursor_col) = screen.cursor_position();
        let mut visible = self.rows.borrow_mut();
        if visible.stale {
            visible.read_changed_rows(screen);
        }
        let texts = &visible.texts;
        ScreenSnapshot {
            size: TermSize {
                rows: rows.get(),
                cols: cols.get(),
            },
            rows: texts.iter().map(|row| row.text.clone()).collect(),
            undimmed: texts.iter().map(|row| row.undimmed.clone()).collect(),
            cursor: (cursor_row, cursor_col),
            alternate_screen: screen.alternate_screen(),
            title: self.parser.callbacks().title.clone(),
            bracketed_paste: screen.bracketed_paste(),
        }
    }

    /// The screen with colours and attributes, as escape sequences that redraw it on another
    /// terminal (used to mirror a worker to the user's terminal).
    pub fn contents_formatted(&self) -> Vec<u8> {
        self.parser.screen().contents_formatted().into_bytes()
    }
}

/// A plain-text picture of a screen at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenSnapshot {
    /// The screen size.
    pub size: TermSize,
    /// One string per visible row, trailing blanks removed.
    pub rows: Vec<String>,
    /// The same rows with dim (faint) cells blanked: what is left once placeholder and hint
    /// text, which agents draw dim, is taken away.
    pub undimmed: Vec<String>,
    /// Cursor (row, column), 0-based.
    pub cursor: (u16, u16),
    /// Whether the alternate screen is active.
    pub alternate_screen: bool,
    /// The window title last set with OSC 0 or OSC 2.
    pub title: String,
    /// Whether bracketed paste is enabled.
    pub bracketed_paste: bool,
}

impl ScreenSnapshot {
    /// The visible rows joined with newlines, trailing empty rows removed: the same text
    /// `tmux capture-pane -p` prints for the screen.
    pub fn text(&self) -> String {
        let last = self
            .rows
            .iter()
            .rposition(|row| !row.is_empty())
            .map_or(0, |i| i + 1);
        let mut text = self.rows[..last].join("\n");
        text.push('\n');
        text
    }

    /// Whether any visible row contains `needle`.
    pub fn contains(&self, needle: &str) -> bool {
        self.rows.iter().any(|row| row.contains(needle))
    }
}

impl VisibleRows {
    /// Reads again the rows of `screen` whose rendering changed.
    fn read_changed_rows(&mut self, screen: &vt100::Screen) {
        let (rows, cols) = screen.size();
        if self.texts.len() != usize::from(rows.get()) {
            // A new size (or the first snapshot): every row is read.
            self.texts = (0..rows.get()).map(|_| RowText::unread()).collect();
        }
        for (row, (formatted, known)) in screen
            .rows_formatted(0, cols.get())
            .zip(self.texts.iter_mut())
            .enumerate()
        {
            if formatted != known.formatted {
                // `rows_formatted` yields one row per visible row, at most u16::MAX of them.
                let row = u16::try_from(row).unwrap_or(u16::MAX);
                *known = RowText::read(screen, row, formatted);
            }
        }
        self.stale = false;
    }
}

impl RowText {
    /// A row not read yet: its key matches no rendering (a rendering never starts with NUL).
    fn unread() -> Self {
        Self {
            formatted: "\0".to_owned(),
            ..Self::default()
        }
    }

    /// Reads row `row` of `screen`, rendered as `formatted`.
    fn read(screen: &vt100::Screen, row: u16, formatted: String) -> Self {
        let (_, cols) = screen.size();
        // One lookup per cell: vt100 finds a cell's row again on every lookup.
        let cells: Vec<Option<&vt100::Cell>> =
            (0..cols.get()).map(|col| screen.cell(row, col)).collect();
        Self {
            formatted,
            text: plain_text(&cells),
            undimmed: undimmed_text(&cells),
        }
    }
}

/// A row's text as vt100 writes it (`Screen::rows`), trailing blanks removed: blank cells
/// between contents are spaces, the cell after a wide one is its continuation.
fn plain_text(cells: &[Option<&vt100::Cell>]) -> String {
    let mut text = String::new();
    let mut written_to = 0;
    let mut continuation = false;
    for (col, cell) in cells.iter().enumerate() {
        let Some(cell) = cell else { continue };
        if std::mem::take(&mut continuation) {
            continue;
        }
        continuation = cell.is_wide();
        if cell.has_contents() {
            text.extend(std::iter::repeat_n(' ', col - written_to));
            text.push_str(cell.contents());
            written_to = col + if cell.is_wide() { 2 } else { 1 };
        }
    }
    text.truncate(text.trim_end().len());
    text
}

/// A row's text with dim (faint) cells blanked, trailing blanks removed.
fn undimmed_text(cells: &[Option<&vt100::Cell>]) -> String {
    let dim = |col: usize| {
        cells
            .get(col)
            .copied()
            .flatten()
            .is_some_and(|cell| cell.dim())
    };
    let mut text = String::new();
    for (col, cell) in cells.iter().enumerate() {
        match cell {
            Some(cell) if cell.is_wide_continuation() => {}
            Some(cell) if cell.dim() || !cell.has_contents() => text.push(' '),
            // An inverse cell right before dim text is a block cursor an application
            // drew on its own placeholder: it belongs to the placeholder.
            Some(cell) if cell.inverse() && dim(col + 1) => text.push(' '),
            Some(cell) => text.push_str(cell.contents()),
            None => {}
        }
    }
    text.truncate(text.trim_end().len());
    text
}

impl TermSize {
    fn non_zero(self) -> (NonZeroU16, NonZeroU16) {
        (
            NonZeroU16::new(self.rows).unwrap_or(NonZeroU16::MIN),
            NonZeroU16::new(self.cols).unwrap_or(NonZeroU16::MIN),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(rows: u16, cols: u16) -> ScreenModel {
        ScreenModel::new(ScreenOptions::new(TermSize { rows, cols }))
    }

    #[test]
    fn answers_cursor_position_device_attributes_and_version() {
        let mut s = screen(24, 80);
        assert_eq!(s.feed(b"ab\x1b[6n"), b"\x1b[1;3R");
        assert_eq!(s.feed(b"\x1b[c"), b"\x1b[?62;22c");
        assert_eq!(s.feed(b"\x1b[>c"), b"\x1b[>1;10;0c");
        let version = s.feed(b"\x1b[>0q");
        assert!(version.starts_with(b"\x1bP>|clawpool("), "{version:?}");
        assert!(s.feed(b"plain text").is_empty());
    }

    #[test]
    fn does_not_answer_when_another_terminal_does() {
        let mut s = ScreenModel::new(ScreenOptions {
            answer_queries: false,
            ..ScreenOptions::new(TermSize { rows: 24, cols: 80 })
        });
        assert!(s.feed(b"\x1b[6n\x1b[c").is_empty());
    }

    #[test]
    fn tracks_title_cursor_alternate_screen_and_bracketed_paste() {
        let mut s = screen(5, 20);
        s.feed(b"\x1b]0;first\x07\x1b]2;second\x1b\\hello\r\nworld");
        let snap = s.snapshot();
        assert_eq!(snap.title, "second");
        assert_eq!(snap.rows[0], "hello");
        assert_eq!(snap.rows[1], "world");
        assert_eq!(snap.cursor, (1, 5));
        assert!(!snap.alternate_screen && !snap.bracketed_paste);
        s.feed(b"\r\n\x1b[2mhint\x1b[0m typed");
        assert_eq!(s.snapshot().rows[2], "hint typed");
        assert_eq!(s.snapshot().undimmed[2], "     typed");
        s.feed(b"\r\n\x1b[7mR\x1b[0;2mesend\x1b[0m");
        assert_eq!(s.snapshot().rows[3], "Resend");
        assert_eq!(
            s.snapshot().undimmed[3],
            "",
            "a drawn cursor on a placeholder is placeholder"
        );
        s.feed(b"\x1b[?1049h\x1b[?2004h");
        let snap = s.snapshot();
        assert!(snap.alternate_screen && snap.bracketed_paste);
        assert_eq!(snap.rows[0], "");
    }

    #[test]
    fn scrollback_is_bounded_and_keeps_the_newest_lines() {
        let mut s = ScreenModel::new(ScreenOptions {
            scrollback_lines: 3,
            ..ScreenOptions::new(TermSize { rows: 2, cols: 10 })
        });
        for i in 0..10 {
            s.feed(format!("line{i}\r\n").as_bytes());
        }
        assert_eq!(s.scrollback(), vec!["line6", "line7", "line8"]);
        assert_eq!(s.snapshot().rows, vec!["line9", ""]);
    }

    #[test]
    fn a_row_whose_attributes_alone_change_is_read_again() {
        let mut s = screen(3, 20);
        s.feed(b"\x1b[2mAsk anything\x1b[0m");
        assert_eq!(s.snapshot().undimmed[0], "");
        // The same text redrawn without dim: a draft that happens to read like the hint.
        s.feed(b"\r\x1b[0mAsk anything");
        let snap = s.snapshot();
        assert_eq!(snap.rows[0], "Ask anything");
        assert_eq!(snap.undimmed[0], "Ask anything");
        // A block cursor on a dim placeholder, then the same letter drawn plain: only its
        // inverse attribute changes.
        s.feed(b"\r\n\x1b[7mX\x1b[0;2mhint\x1b[0m");
        assert_eq!(s.snapshot().undimmed[1], "");
        s.feed(b"\rX");
        let snap = s.snapshot();
        assert_eq!(snap.rows[1], "Xhint");
        assert_eq!(snap.undimmed[1], "X");
    }

    #[test]
    fn snapshots_after_every_change_equal_a_snapshot_of_a_fresh_screen() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recordings");
        let size = TermSize {
            rows: 40,
            cols: 120,
        };
        for recording in [
            "claude-2.1.330-120x40",
            "claude-2.1.330-provider-down-120x40",
            "codex-0.169.0-120x40",
        ] {
            let stream = std::fs::read(root.join(recording).join("stream.bin")).expect("recording");
            let mut incremental = ScreenModel::new(ScreenOptions::new(size));
            let mut fed = 0;
            for (i, change) in stream.chunks(97).enumerate() {
                incremental.feed(change);
                fed += change.len();
                let kept = incremental.snapshot();
                // Every few changes (a fresh screen replays the whole prefix), compare with a
                // screen that never took a snapshot before.
                if i % 7 == 0 || fed == stream.len() {
                    let mut fresh = ScreenModel::new(ScreenOptions::new(size));
                    fresh.feed(&stream[..fed]);
                    assert_eq!(kept, fresh.snapshot(), "{recording} after {fed} bytes");
                }
            }
        }
    }

    #[test]
    fn a_resized_screen_is_read_whole() {
        let mut s = screen(3, 10);
        s.feed(b"abcdefghij\r\nline two");
        s.snapshot();
        s.resize(TermSize { rows: 4, cols: 5 });
        let snap = s.snapshot();
        assert_eq!(snap.rows, ["abcde", "line", "", ""]);
        assert_eq!(snap.rows.len(), snap.undimmed.len());
    }

    #[test]
    fn snapshot_text_matches_capture_pane_layout() {
        let mut s = screen(4, 10);
        s.feed(b"a  \r\n\r\nb");
        assert_eq!(s.snapshot().text(), "a\n\nb\n");
    }
}
