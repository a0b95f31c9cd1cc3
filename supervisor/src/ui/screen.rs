//! The selected lane's live screen: asked of the lane's control socket (a `screen` request,
//! `docs/control-protocol.md`, answered from the screen model the lane's handshake watches, PTY and tmux lanes
//! alike) and turned into lines the dashboard draws, in the worker's colours or plain.

use std::num::NonZeroU16;
use std::path::Path;
use std::time::Duration;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::lanes::LaneKey;
use clawpool_lane::control::{self, ControlReply, Request};

/// How long a lane has to answer: it answers from memory, at once, unless it is gone.
const SCREEN_PATIENCE: Duration = Duration::from_millis(500);

/// One lane's screen as its control socket sent it.
pub struct LaneScreen {
    /// The lane it is of.
    pub lane: LaneKey,
    /// The visible rows as text.
    pub text: String,
    /// The screen redrawn with its colours (a terminal model fed the lane's formatted
    /// contents); `None` when the lane sent none.
    model: Option<vt100::Parser>,
}

/// Why there is no screen to show.
pub type NoScreen = String;

/// Asks the lane whose record folder (its registry folder) is `record` for its screen.
pub async fn fetch(lane: &LaneKey, record: &Path) -> Result<LaneScreen, NoScreen> {
    let socket = clawpool_worktree::layout::control_socket(record);
    let reply = tokio::time::timeout(SCREEN_PATIENCE, control::ask(&socket, Request::Screen))
        .await
        .map_err(|_| "the lane did not answer".to_owned())?
        .map_err(|e| format!("no running lane ({e})"))?;
    let snapshot = match reply {
        ControlReply::Screen(snapshot) => snapshot,
        ControlReply::Error(error) => return Err(error.message),
        other => return Err(format!("a reply that is not a screen: {other:?}")),
    };
    let model = match (
        NonZeroU16::new(snapshot.rows),
        NonZeroU16::new(snapshot.cols),
    ) {
        (Some(rows), Some(cols)) => {
            let mut parser = vt100::Parser::new(rows, cols, 0);
            parser.process(snapshot.formatted.as_bytes());
            Some(parser)
        }
        _ => None,
    };
    Ok(LaneScreen {
        lane: lane.clone(),
        text: snapshot.text,
        model,
    })
}

impl LaneScreen {
    /// The screen in `height` rows of at most `width` columns: coloured as the worker drew
    /// them, or plain text when `plain`. A screen taller than that loses its runs of blank rows
    /// first (agents draw their header at the top and their input box and dialogs at the
    /// bottom, with nothing between), then its top rows.
    pub fn lines(&self, width: u16, height: u16, plain: bool) -> Vec<Line<'static>> {
        let rows = shown_rows(&self.text, usize::from(height));
        match (&self.model, plain) {
            (Some(model), false) => coloured_lines(model.screen(), &rows, width),
            _ => {
                let text: Vec<&str> = self.text.lines().collect();
                rows.iter()
                    .map(|&row| {
                        let row = text[usize::from(row)];
                        Line::raw(row.chars().take(usize::from(width)).collect::<String>())
                    })
                    .collect()
            }
        }
    }
}

/// Which rows of a screen whose rows are `text` fit in `height`: all of them when they fit;
/// else without the second and later blank rows of each run, and then the last `height`.
fn shown_rows(text: &str, height: usize) -> Vec<u16> {
    let rows: Vec<&str> = text.lines().collect();
    let mut shown: Vec<u16> = (0..rows.len() as u16).collect();
    if shown.len() > height {
        shown.retain(|&row| {
            let row = usize::from(row);
            row == 0 || !(rows[row].trim().is_empty() && rows[row - 1].trim().is_empty())
        });
    }
    let first = shown.len().saturating_sub(height);
    shown.split_off(first)
}

fn coloured_lines(screen: &vt100::Screen, rows: &[u16], width: u16) -> Vec<Line<'static>> {
    let cols = screen.size().1.get().min(width);
    rows.iter()
        .map(|&row| {
            let mut spans: Vec<Span<'static>> = Vec::new();
            let mut run = String::new();
            let mut run_style = Style::default();
            for col in 0..cols {
                let Some(cell) = screen.cell(row, col) else {
                    continue;
                };
                if cell.is_wide_continuation() {
                    continue;
                }
                let style = cell_style(cell);
                if style != run_style && !run.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut run), run_style));
                }
                run_style = style;
                match cell.contents() {
                    "" => run.push(' '),
                    text => run.push_str(text),
                }
            }
            let trimmed = run.trim_end().len();
            // Trailing blanks in the default style are nothing; coloured ones are drawn.
            if run_style == Style::default() {
                run.truncate(trimmed);
            }
            if !run.is_empty() {
                spans.push(Span::styled(run, run_style));
            }
            Line::from(spans)
        })
        .collect()
}

fn cell_style(cell: &vt100::Cell) -> Style {
    let mut style = Style::default();
    if let Some(fg) = colour(cell.fgcolor()) {
        style = style.fg(fg);
    }
    if let Some(bg) = colour(cell.bgcolor()) {
        style = style.bg(bg);
    }
    for (on, modifier) in [
        (cell.bold(), Modifier::BOLD),
        (cell.dim(), Modifier::DIM),
        (cell.italic(), Modifier::ITALIC),
        (cell.underline(), Modifier::UNDERLINED),
        (cell.inverse(), Modifier::REVERSED),
    ] {
        if on {
            style = style.add_modifier(modifier);
        }
    }
    style
}

fn colour(colour: vt100::Color) -> Option<Color> {
    match colour {
        vt100::Color::Default => None,
        vt100::Color::Idx(index) => Some(Color::Indexed(index)),
        vt100::Color::Rgb(r, g, b) => Some(Color::Rgb(r, g, b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tall_screen_keeps_its_header_and_its_bottom() {
        let text = "header\n\n\n\n\nprompt\n\n\n\ndialog\nchoices\n";
        assert_eq!(shown_rows(text, 20), (0..11).collect::<Vec<u16>>());
        assert_eq!(shown_rows(text, 6), vec![0, 1, 5, 6, 9, 10]);
        assert_eq!(shown_rows(text, 3), vec![6, 9, 10]);
    }
}
