//! Drawing: the transcript, the screens (boot dialogs, the main screen with its input box,
//! spinner and permission prompt) laid out as rows of text, and the [`Renderer`] that turns
//! a screen into escape sequences, rewriting only the rows that changed.
//!
//! The exact strings here are a contract: the supervisor's detection rules match them
//! (see `docs/scripted-agent.md`), so change them only together with that page.

use std::collections::VecDeque;
use std::fmt::Write as _;

use crate::term::TermSize;

/// The first header row.
pub const HEADER: &str = "✻ Scripted Agent v0.1";
/// The input prompt, also the prefix of echoed prompts and of the selected menu entry.
pub const PROMPT_MARK: &str = "❯ ";
/// The status line under an idle input box.
pub const STATUS_IDLE: &str = "  ? for shortcuts";
/// The status line under the input box while working.
pub const STATUS_WORKING: &str = "  esc to interrupt";
/// The hint under a `notice` step's text.
pub const NOTICE_HINT: &str = "Enter to continue · Esc to cancel";
/// The spinner's glyphs, one per 100 ms.
pub const SPINNER_GLYPHS: [char; 5] = ['✢', '✳', '✶', '✻', '✽'];

/// How many transcript lines are kept; more than any screen shows.
const TRANSCRIPT_LINES: usize = 5000;

/// How a row is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Default colours.
    Plain,
    /// Bold (the header, dialog questions).
    Bold,
    /// The highlighted menu entry.
    Selected,
    /// Secondary text (cwd, hints, status line).
    Dim,
    /// The spinner.
    Accent,
}

impl Style {
    fn sgr(self) -> &'static str {
        match self {
            Style::Plain => "",
            Style::Bold => "\x1b[1m",
            Style::Selected => "\x1b[36m",
            Style::Dim => "\x1b[2m",
            Style::Accent => "\x1b[33m",
        }
    }
}

/// One screen row: text already cut to the screen width, and its style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The text, without escape sequences.
    pub text: String,
    /// Its colour.
    pub style: Style,
}

impl Line {
    fn new(text: impl Into<String>, style: Style) -> Self {
        Self {
            text: text.into(),
            style,
        }
    }

    fn blank() -> Self {
        Self::new("", Style::Plain)
    }
}

/// A whole screen: exactly one [`Line`] per terminal row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    /// The rows, top to bottom.
    pub lines: Vec<Line>,
    /// Where the cursor shows (row, column), or hidden.
    pub cursor: Option<(usize, usize)>,
    /// The spinner's row, which is rewritten on every tick even when unchanged.
    pub spinner_row: Option<usize>,
}

impl Screen {
    /// The rows as plain text, for tests.
    #[cfg(test)]
    pub fn text(&self) -> Vec<&str> {
        self.lines.iter().map(|l| l.text.as_str()).collect()
    }
}

/// What happened so far, newest last; the main screen shows its tail.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    lines: VecDeque<String>,
}

impl Transcript {
    /// Appends text, one transcript line per line of text.
    pub fn push(&mut self, text: &str) {
        for line in text.split('\n') {
            if self.lines.len() == TRANSCRIPT_LINES {
                self.lines.pop_front();
            }
            self.lines.push_back(line.to_owned());
        }
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The lines, oldest first.
    #[cfg(test)]
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }
}

/// What sits under the transcript on the main screen.
#[derive(Debug, Clone, Copy)]
pub enum Bottom<'a> {
    /// Nothing yet (during the startup delay).
    Nothing,
    /// The input box, with the spinner line above it while working.
    Input {
        /// The draft being typed.
        draft: &'a str,
        /// The spinner text, while working.
        spinner: Option<&'a str>,
    },
    /// A notice in place of the spinner and the input box.
    Notice {
        /// Its text.
        text: &'a str,
    },
    /// A permission prompt in place of the input box.
    Permission {
        /// The tool asking.
        tool: &'a str,
        /// The highlighted entry: 0 = Yes, 1 = No.
        selected: usize,
        /// What it shows about its command or file.
        detail: &'a [String],
    },
}

/// A boot dialog's content.
#[derive(Debug, Clone, Copy)]
pub struct Dialog<'a> {
    /// The question, first line of the dialog.
    pub question: &'a str,
    /// A line shown under the question (the folder, for the trust dialog).
    pub detail: Option<&'a str>,
    /// The entries, numbered from 1.
    pub options: &'a [&'a str],
    /// The highlighted entry (0-based).
    pub selected: usize,
    /// The hint under the entries.
    pub hint: &'a str,
}

fn header(cwd: &str) -> Vec<Line> {
    vec![
        Line::new(HEADER, Style::Bold),
        Line::new(format!("  cwd: {cwd}"), Style::Dim),
        Line::blank(),
    ]
}

fn menu(options: &[&str], selected: usize) -> Vec<Line> {
    options
        .iter()
        .enumerate()
        .map(|(i, label)| {
            if i == selected {
                Line::new(format!("{PROMPT_MARK}{}. {label}", i + 1), Style::Selected)
            } else {
                Line::new(format!("  {}. {label}", i + 1), Style::Plain)
            }
        })
        .collect()
}

/// A boot dialog under the header, top-aligned.
pub fn dialog_screen(size: TermSize, cwd: &str, dialog: &Dialog<'_>) -> Screen {
    let mut lines = header(cwd);
    lines.push(Line::new(dialog.question, Style::Bold));
    lines.push(Line::blank());
    if let Some(detail) = dialog.detail {
        lines.push(Line::new(detail, Style::Plain));
        lines.push(Line::blank());
    }
    lines.extend(menu(dialog.options, dialog.selected));
    lines.push(Line::blank());
    lines.push(Line::new(dialog.hint, Style::Dim));
    finish(size, lines, None, None)
}

/// The main screen: header, transcript tail, and `bottom` at the bottom of the screen.
pub fn main_screen(
    size: TermSize,
    cwd: &str,
    transcript: &Transcript,
    bottom: Bottom<'_>,
) -> Screen {
    let cols = usize::from(size.cols);
    let rows = usize::from(size.rows);
    let rule = Line::new("─".repeat(cols), Style::Plain);

    let mut block = Vec::new();
    let mut spinner_at = None;
    let mut cursor_at = None;
    match bottom {
        Bottom::Nothing => {}
        Bottom::Input { draft, spinner } => {
            if let Some(spinner) = spinner {
                spinner_at = Some(block.len());
                block.push(Line::new(spinner, Style::Accent));
            }
            block.push(rule.clone());
            // A long draft must not push the transcript off the screen entirely.
            let max_input = (rows.saturating_sub(8) / 2).max(1);
            let wrapped = wrap(draft, PROMPT_MARK, "  ", cols);
            let shown = &wrapped[wrapped.len().saturating_sub(max_input)..];
            for row in shown {
                block.push(Line::new(row.as_str(), Style::Plain));
            }
            let last = shown.last().map_or(0, |r| text_width(r));
            cursor_at = Some((block.len() - 1, last.min(cols.saturating_sub(1))));
            block.push(rule);
            let status = if spinner.is_some() {
                STATUS_WORKING
            } else {
                STATUS_IDLE
            };
            block.push(Line::new(status, Style::Dim));
        }
        Bottom::Notice { text } => {
            block.extend(text.lines().map(|l| Line::new(l, Style::Bold)));
            block.push(Line::blank());
            block.push(Line::new(NOTICE_HINT, Style::Dim));
        }
        Bottom::Permission {
            tool,
            selected,
            detail,
        } => {
            block.push(Line::new(
                format!("Permission requested: {tool}"),
                Style::Bold,
            ));
            block.extend(
                detail
                    .iter()
                    .map(|line| Line::new(line.clone(), Style::Plain)),
            );
            block.push(Line::new("Do you want to proceed?", Style::Plain));
            block.extend(menu(&["Yes", "No"], selected));
        }
    }

    // The bottom block wins over the transcript, then the header, when rows are scarce.
    let dropped = block.len().saturating_sub(rows);
    let block = &block[dropped..];
    let mut header = header(cwd);
    header.truncate(rows - block.len());
    let body_rows = rows - block.len() - header.len();

    let mut body = transcript_tail(transcript, cols, body_rows);
    body.resize(body_rows, Line::blank());
    let top = header.len() + body_rows;

    let mut lines = header;
    lines.extend(body);
    lines.extend(block.iter().cloned());
    let spinner_row = spinner_at
        .and_then(|i| i.checked_sub(dropped))
        .map(|i| top + i);
    let cursor = cursor_at.and_then(|(r, c)| r.checked_sub(dropped).map(|r| (top + r, c)));
    finish(size, lines, cursor, spinner_row)
}

/// The last `rows` rows of the transcript, wrapped.
fn transcript_tail(transcript: &Transcript, cols: usize, rows: usize) -> Vec<Line> {
    let mut tail: Vec<String> = Vec::new();
    for line in transcript.lines.iter().rev() {
        if tail.len() >= rows {
            break;
        }
        let mut wrapped = wrap(line, "", "", cols);
        wrapped.reverse();
        tail.extend(wrapped);
    }
    tail.truncate(rows);
    tail.reverse();
    tail.into_iter()
        .map(|t| Line::new(t, Style::Plain))
        .collect()
}

/// Cuts every line to the width and pads or cuts to exactly the screen's rows.
fn finish(
    size: TermSize,
    mut lines: Vec<Line>,
    cursor: Option<(usize, usize)>,
    spinner_row: Option<usize>,
) -> Screen {
    let cols = usize::from(size.cols);
    lines.resize(usize::from(size.rows), Line::blank());
    for line in &mut lines {
        line.text = fit(&line.text, cols);
    }
    Screen {
        lines,
        cursor,
        spinner_row,
    }
}

/// Terminal cells a character takes: 0 for combining marks, 2 for wide (CJK, emoji), else
/// 1. Approximate, but right for everything this agent draws itself.
pub fn char_width(c: char) -> usize {
    match u32::from(c) {
        0x0300..=0x036f | 0x200b..=0x200f | 0xfe00..=0xfe0f => 0,
        0x1100..=0x115f
        | 0x2e80..=0x303e
        | 0x3041..=0xa4cf
        | 0xac00..=0xd7a3
        | 0xf900..=0xfaff
        | 0xfe30..=0xfe4f
        | 0xff00..=0xff60
        | 0xffe0..=0xffe6
        | 0x1f300..=0x1f64f
        | 0x1f900..=0x1f9ff
        | 0x20000..=0x3fffd => 2,
        _ => 1,
    }
}

/// Terminal cells a string takes.
pub fn text_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// Control characters must never reach the terminal as text: tabs become spaces, the rest
/// go.
fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\t' => out.push_str("    "),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `text` cut to at most `cols` cells.
fn fit(text: &str, cols: usize) -> String {
    let mut out = String::new();
    let mut width = 0;
    for c in printable(text).chars() {
        width += char_width(c);
        if width > cols {
            break;
        }
        out.push(c);
    }
    out
}

/// Wraps each line of `text` at `cols` cells (by character, not word). The first row gets
/// `first_prefix`, every other row `next_prefix`.
pub fn wrap(text: &str, first_prefix: &str, next_prefix: &str, cols: usize) -> Vec<String> {
    let mut rows = Vec::new();
    for line in printable_lines(text) {
        let mut row = String::from(if rows.is_empty() {
            first_prefix
        } else {
            next_prefix
        });
        let mut width = text_width(&row);
        let mut has_content = false;
        for c in line.chars() {
            let w = char_width(c);
            if has_content && width + w > cols {
                rows.push(std::mem::replace(&mut row, next_prefix.to_owned()));
                width = text_width(next_prefix);
            }
            row.push(c);
            width += w;
            has_content = true;
        }
        rows.push(row);
    }
    rows
}

fn printable_lines(text: &str) -> Vec<String> {
    text.split('\n').map(printable).collect()
}

/// Turns screens into terminal output, writing only rows that differ from what is shown.
#[derive(Debug, Default)]
pub struct Renderer {
    shown: Vec<Line>,
    shown_cursor: Option<(usize, usize)>,
    /// The size the shown rows were drawn at; `None` forces a full redraw.
    size: Option<TermSize>,
}

impl Renderer {
    /// A renderer that will clear and draw everything on its first frame.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets what is shown, so the next frame clears and redraws everything (after a
    /// SIGWINCH, when the terminal may have reflowed or cleared the screen).
    pub fn invalidate(&mut self) {
        self.size = None;
    }

    /// The bytes that turn what is shown into `screen`; `force_row` is rewritten even if
    /// unchanged. Empty when there is nothing to do.
    pub fn frame(&mut self, screen: &Screen, size: TermSize, force_row: Option<usize>) -> String {
        let mut out = String::new();
        if self.size != Some(size) {
            out.push_str("\x1b[0m\x1b[2J");
            self.shown.clear();
            self.shown_cursor = None;
            self.size = Some(size);
        }
        for (row, line) in screen.lines.iter().enumerate() {
            if self.shown.get(row) == Some(line) && force_row != Some(row) {
                continue;
            }
            // Clear the whole row first: erasing to the end of the row after the text
            // would eat the last cell of a full-width row (pending wrap).
            let _ = write!(out, "\x1b[{};1H\x1b[2K", row + 1);
            if line.style == Style::Plain {
                out.push_str(&line.text);
            } else {
                let _ = write!(out, "{}{}\x1b[0m", line.style.sgr(), line.text);
            }
        }
        if out.is_empty() && screen.cursor == self.shown_cursor {
            return out;
        }
        let mut framed = String::from("\x1b[?25l");
        framed.push_str(&out);
        if let Some((row, col)) = screen.cursor {
            let _ = write!(framed, "\x1b[{};{}H\x1b[?25h", row + 1, col + 1);
        }
        self.shown.clone_from(&screen.lines);
        self.shown_cursor = screen.cursor;
        framed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: TermSize = TermSize { rows: 12, cols: 30 };

    #[test]
    fn wrap_prefixes_and_breaks() {
        assert_eq!(wrap("", "❯ ", "  ", 10), vec!["❯ "]);
        assert_eq!(
            wrap("abcdefghij", "❯ ", "  ", 6),
            vec!["❯ abcd", "  efgh", "  ij"]
        );
        assert_eq!(wrap("a\nb\tc", "❯ ", "  ", 20), vec!["❯ a", "  b    c"]);
        assert_eq!(wrap("日本語", "", "", 4), vec!["日本", "語"]);
    }

    #[test]
    fn idle_main_screen_layout() {
        let mut transcript = Transcript::default();
        transcript.push("one\ntwo");
        let screen = main_screen(
            SIZE,
            "/w",
            &transcript,
            Bottom::Input {
                draft: "hi",
                spinner: None,
            },
        );
        let text = screen.text();
        assert_eq!(text.len(), 12);
        assert_eq!(&text[..5], &[HEADER, "  cwd: /w", "", "one", "two"]);
        assert_eq!(text[8], "─".repeat(30));
        assert_eq!(text[9], "❯ hi");
        assert_eq!(text[10], "─".repeat(30));
        assert_eq!(text[11], STATUS_IDLE);
        assert_eq!(screen.cursor, Some((9, 4)));
        assert_eq!(screen.spinner_row, None);
    }

    #[test]
    fn working_screen_has_spinner_above_rule() {
        let screen = main_screen(
            SIZE,
            "/w",
            &Transcript::default(),
            Bottom::Input {
                draft: "",
                spinner: Some("✢ Working… (3s · esc to interrupt)"),
            },
        );
        let text = screen.text();
        assert_eq!(screen.spinner_row, Some(7));
        assert!(text[7].starts_with("✢ Working… (3s"));
        assert_eq!(text[9], "❯ ");
        assert_eq!(text[11], STATUS_WORKING);
    }

    #[test]
    fn transcript_scrolls_to_newest() {
        let mut transcript = Transcript::default();
        for i in 1..=100 {
            transcript.push(&format!("line {i}"));
        }
        let screen = main_screen(SIZE, "/w", &transcript, Bottom::Nothing);
        let text = screen.text();
        assert_eq!(text[3], "line 92");
        assert_eq!(text[11], "line 100");
    }

    #[test]
    fn tiny_screen_keeps_the_input_box() {
        let size = TermSize { rows: 3, cols: 5 };
        let screen = main_screen(
            size,
            "/a/long/path",
            &Transcript::default(),
            Bottom::Input {
                draft: "abc",
                spinner: None,
            },
        );
        assert_eq!(screen.text(), vec!["❯ abc", "─────", "  ? f"]);
        assert_eq!(screen.cursor, Some((0, 4)));
    }

    #[test]
    fn renderer_rewrites_only_changed_rows() {
        let mut renderer = Renderer::new();
        let mut transcript = Transcript::default();
        let draw = |t: &Transcript| main_screen(SIZE, "/w", t, Bottom::Nothing);
        let first = renderer.frame(&draw(&transcript), SIZE, None);
        assert!(first.contains("\x1b[2J"));
        assert!(first.contains(HEADER));
        assert_eq!(renderer.frame(&draw(&transcript), SIZE, None), "");
        transcript.push("new");
        let second = renderer.frame(&draw(&transcript), SIZE, None);
        assert!(!second.contains(HEADER));
        assert!(second.contains("\x1b[4;1H\x1b[2Knew"));
        let forced = renderer.frame(&draw(&transcript), SIZE, Some(3));
        assert!(forced.contains("\x1b[4;1H\x1b[2Knew"));
    }
}
