//! The dashboard's diff view (`d`): the selected lane's change as `clawpool diff` computes it
//! ([`crate::handoff_cmd::lane_change`]: commits against the merge base with the base as it
//! is now, and apart from them what is not committed yet), shown whole-screen — the file list
//! on the left, the patch on the right, coloured (`+` green, `-` red, hunk headers cyan, file
//! headers bold) and scrolled with j/k, ↑/↓, PgUp/PgDn, g/G; Esc or q closes it. It is read
//! once when opened (`d` again reads it anew).

use std::cell::Cell;
use std::path::Path;

use clawpool_worktree::{FileChange, LaneDiff};
use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::App;
use crate::handoff_cmd::{file_line, lane_change};

/// What a line of the view is, which decides its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `committed` / `not committed`: where a patch starts.
    Section,
    /// `diff --git`, `index`, `---`, `+++` and the like, up to a file's first hunk.
    FileHeader,
    /// `@@ -a,b +c,d @@`.
    Hunk,
    /// A line added.
    Added,
    /// A line removed.
    Removed,
    /// Context, or anything else.
    Plain,
}

/// An open diff view.
#[derive(Debug)]
pub struct DiffView {
    /// The lane.
    lane: String,
    /// One line above everything: commits, base, merge base.
    summary: String,
    /// The file list: headings and one line per file.
    files: Vec<(Kind, String)>,
    /// The patches, committed first.
    lines: Vec<(Kind, String)>,
    /// The first patch line shown.
    scroll: usize,
    /// How many patch lines the last drawing showed: what PgUp/PgDn move by.
    page: Cell<usize>,
}

impl DiffView {
    /// The change of the lane in `dir` (event log `events`), read now.
    pub fn open(dir: &Path, events: &Path) -> Result<Self, String> {
        let (lane, diff) = lane_change(dir, events, true).map_err(|e| e.message)?;
        Ok(Self::of(lane, &diff))
    }

    fn of(lane: String, diff: &LaneDiff) -> Self {
        let short = |sha: &str| sha.chars().take(10).collect::<String>();
        let summary = format!(
            "{} commit(s) since {} · base {} at {}{}",
            diff.commits.len(),
            short(&diff.merge_base),
            diff.base,
            short(&diff.base_sha),
            diff.commits
                .first()
                .map(|c| format!(" · last: {} {}", short(&c.sha), c.summary))
                .unwrap_or_default()
        );
        let mut files = Vec::new();
        let mut list = |heading: &str, changes: &[FileChange]| {
            files.push((Kind::Section, format!("{heading} ({})", changes.len())));
            for file in changes {
                files.push((Kind::Plain, file_line(file)));
            }
        };
        list("committed", &diff.files);
        list("not committed", &diff.uncommitted);
        let mut lines = Vec::new();
        for (heading, patch) in [
            ("── committed ──", &diff.patch),
            ("── not committed ──", &diff.uncommitted_patch),
        ] {
            lines.push((Kind::Section, heading.to_owned()));
            match patch.as_deref() {
                Some(text) if !text.is_empty() => lines.extend(classify(text)),
                _ => lines.push((Kind::Plain, "(nothing)".to_owned())),
            }
        }
        Self {
            lane,
            summary,
            files,
            lines,
            scroll: 0,
            page: Cell::new(1),
        }
    }

    /// Scrolls for `key`; `false` when the key closes the view.
    pub fn on_key(&mut self, key: KeyCode) -> bool {
        let page = self.page.get().max(1);
        let last = self.lines.len().saturating_sub(page);
        self.scroll = match key {
            KeyCode::Esc | KeyCode::Char('q') => return false,
            KeyCode::Down | KeyCode::Char('j') => self.scroll + 1,
            KeyCode::Up | KeyCode::Char('k') => self.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.scroll + page,
            KeyCode::PageUp => self.scroll.saturating_sub(page),
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => last,
            _ => self.scroll,
        }
        .min(last);
        true
    }
}

/// The lines of a unified patch with what each is: a file's header runs from its
/// `diff --git` line to its first hunk, so a removed line that reads `--- x` is still a
/// removal.
fn classify(patch: &str) -> Vec<(Kind, String)> {
    let mut in_header = false;
    patch
        .lines()
        .map(|line| {
            let kind = if line.starts_with("diff --git ") {
                in_header = true;
                Kind::FileHeader
            } else if line.starts_with("@@") {
                in_header = false;
                Kind::Hunk
            } else if in_header {
                Kind::FileHeader
            } else if line.starts_with('+') {
                Kind::Added
            } else if line.starts_with('-') {
                Kind::Removed
            } else {
                Kind::Plain
            };
            (kind, line.to_owned())
        })
        .collect()
}

fn style(kind: Kind) -> Style {
    match kind {
        Kind::Section => Style::default()
            .fg(Color::Magenta)
            .add_modifier(Modifier::BOLD),
        Kind::FileHeader => Style::default().add_modifier(Modifier::BOLD),
        Kind::Hunk => Style::default().fg(Color::Cyan),
        Kind::Added => Style::default().fg(Color::Green),
        Kind::Removed => Style::default().fg(Color::Red),
        Kind::Plain => Style::default(),
    }
}

/// Draws the view over the whole dashboard.
pub fn draw(frame: &mut Frame<'_>, app: &App, view: &DiffView) {
    let area = frame.area();
    frame.render_widget(Clear, area);
    let shown = |lines: &[(Kind, String)]| -> Vec<Line<'static>> {
        lines
            .iter()
            .map(|(kind, text)| Line::from(Span::styled(text.clone(), app.style(style(*kind)))))
            .collect()
    };
    let [summary, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(format!("diff · {} · {}", view.lane, view.summary))
            .style(app.style(Style::default().add_modifier(Modifier::BOLD))),
        summary,
    );
    let [files, patch] =
        Layout::horizontal([Constraint::Percentage(35), Constraint::Percentage(65)]).areas(body);
    frame.render_widget(
        Paragraph::new(shown(&view.files))
            .block(Block::default().borders(Borders::ALL).title(" files ")),
        files,
    );
    let height = usize::from(patch.height.saturating_sub(2)).max(1);
    view.page.set(height);
    let end = (view.scroll + height).min(view.lines.len());
    frame.render_widget(
        Paragraph::new(shown(&view.lines[view.scroll.min(end)..end]))
            .block(Block::default().borders(Borders::ALL).title(" patch ")),
        patch,
    );
    frame.render_widget(
        Paragraph::new(format!(
            "lines {}-{} of {} · j/k ↑/↓ scroll · PgUp/PgDn page · g/G top/end · Esc/q close",
            (view.scroll + 1).min(view.lines.len()),
            end,
            view.lines.len()
        )),
        footer,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_line_that_looks_like_a_header_is_a_removal() {
        let patch = "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- old\n+new\n same\n";
        let kinds: Vec<Kind> = classify(patch).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            [
                Kind::FileHeader,
                Kind::FileHeader,
                Kind::FileHeader,
                Kind::FileHeader,
                Kind::Hunk,
                Kind::Removed,
                Kind::Added,
                Kind::Plain
            ]
        );
    }
}
