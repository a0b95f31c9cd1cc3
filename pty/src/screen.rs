//! The screen model: what a worker's terminal shows, rebuilt from the raw bytes it wrote.
//!
//! The VT parsing is vt100's. This module adds what a supervisor needs on top: the window
//! title, a bounded text scrollback, plain-text snapshots, and the replies a real terminal gives
//! to the queries agents send while they start (without them, crossterm-based agents abort).

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
}

/// What the parser reports besides the grid: title changes, scrolled-off rows, and terminal
/// queries that need an answer.
struct Observer {
    title: String,
    scrollback: VecDeque<String>,
    scrollback_limit: usize,
    answer_queries: bool,
    replies: Vec<u8>,
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
        if !self.answer_queries {
            return;
        }
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
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
            answer_queries: options.answer_queries,
            replies: Vec::new(),
        };
        // vt100's own scrollback keeps whole cells (32 bytes each); the observer keeps text,
        // which is all a detector reads and a fraction of the memory.
        Self {
            parser: vt100::Parser::new_with_callbacks(rows, cols, 0, observer),
        }
    }

    /// Feeds raw output. Returns the bytes the terminal must send back to the application in
    /// reply to queries found in `bytes` (empty when there were none or queries are not
    /// answered).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.parser.process(bytes);
        std::mem::take(&mut self.parser.callbacks_mut().replies)
    }

    /// Changes the visible size.
    pub fn resize(&mut self, size: TermSize) {
        let (rows, cols) = size.non_zero();
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
        ScreenSnapshot {
            size: TermSize {
                rows: rows.get(),
                cols: cols.get(),
            },
            rows: screen
                .rows(0, cols.get())
                .map(|row| row.trim_end().to_owned())
                .collect(),
            undimmed: undimmed_rows(screen),
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

fn undimmed_rows(screen: &vt100::Screen) -> Vec<String> {
    let (rows, cols) = screen.size();
    (0..rows.get())
        .map(|row| {
            let mut text = String::new();
            for col in 0..cols.get() {
                let dim = |col: u16| screen.cell(row, col).is_some_and(|c| c.dim());
                match screen.cell(row, col) {
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
        })
        .collect()
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
    fn snapshot_text_matches_capture_pane_layout() {
        let mut s = screen(4, 10);
        s.feed(b"a  \r\n\r\nb");
        assert_eq!(s.snapshot().text(), "a\n\nb\n");
    }
}
