//! Replay: run a recorded byte stream through a screen model and look at the screen at chosen
//! offsets. Detectors are tested this way against real agent recordings.

use crate::TermSize;
use crate::screen::{ScreenModel, ScreenOptions, ScreenSnapshot};

/// Replays `stream` on a screen of `size` and returns the screen after each offset in
/// `offsets` (byte counts into the stream; values past the end give the final screen).
/// Offsets are taken in ascending order; the result follows the order given.
pub fn screens_at(stream: &[u8], size: TermSize, offsets: &[usize]) -> Vec<ScreenSnapshot> {
    let mut order: Vec<usize> = (0..offsets.len()).collect();
    order.sort_by_key(|&i| offsets[i]);
    let mut model = ScreenModel::new(ScreenOptions {
        answer_queries: false,
        ..ScreenOptions::new(size)
    });
    let mut fed = 0;
    let mut screens: Vec<Option<ScreenSnapshot>> = vec![None; offsets.len()];
    for i in order {
        let upto = offsets[i].min(stream.len());
        if upto > fed {
            model.feed(&stream[fed..upto]);
            fed = upto;
        }
        screens[i] = Some(model.snapshot());
    }
    screens.into_iter().flatten().collect()
}

/// Replays the whole of `stream` and returns the final screen.
pub fn final_screen(stream: &[u8], size: TermSize) -> ScreenSnapshot {
    let mut model = ScreenModel::new(ScreenOptions {
        answer_queries: false,
        ..ScreenOptions::new(size)
    });
    model.feed(stream);
    model.snapshot()
}

/// The screen a `tmux capture-pane -p [-e]` capture shows, replayed through the screen model:
/// capture-pane separates rows with bare newlines and ends each with the row's last cell, so
/// each row is fed on a new line with its attributes reset (dim placeholder text stays dim).
/// The newline closing the last row starts no row of its own: on a full-height capture it
/// would scroll the top row off.
pub fn capture_screen(capture: &[u8], size: TermSize) -> ScreenSnapshot {
    let capture = capture.strip_suffix(b"\n").unwrap_or(capture);
    let mut fed = Vec::with_capacity(capture.len() + size.rows as usize * 6);
    for (i, row) in capture.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            fed.extend_from_slice(b"\r\n");
        }
        fed.extend_from_slice(row);
        fed.extend_from_slice(b"\x1b[0m");
    }
    final_screen(&fed, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_height_capture_keeps_its_top_row() {
        let capture = b"top\nmiddle\nbottom\n";
        let screen = capture_screen(capture, TermSize { rows: 3, cols: 10 });
        assert_eq!(screen.rows, ["top", "middle", "bottom"]);
    }

    #[test]
    fn screens_follow_the_requested_offsets_in_any_order() {
        let stream = b"one\r\ntwo\r\nthree";
        let size = TermSize { rows: 5, cols: 10 };
        let screens = screens_at(stream, size, &[usize::MAX, 3, 8]);
        assert_eq!(screens[0].rows[..3], ["one", "two", "three"]);
        assert_eq!(screens[1].rows[..2], ["one", ""]);
        assert_eq!(screens[2].rows[..2], ["one", "two"]);
        assert_eq!(final_screen(stream, size), screens[0]);
    }
}
