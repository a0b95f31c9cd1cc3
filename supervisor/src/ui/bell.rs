//! The dashboard's bell: a BEL to the terminal when a lane starts to need a person (blocked,
//! or escalated), once per lane each time it starts to — not while it stays so, and not for
//! the lanes already waiting when the dashboard opened.

use std::collections::HashSet;
use std::io::Write;

use super::lanes::{LaneKey, Lanes};

/// The lanes that needed a person when last looked at.
pub struct Bell {
    needing: HashSet<LaneKey>,
}

impl Bell {
    /// Quiet about the lanes that already need a person.
    pub fn new(lanes: &Lanes) -> Self {
        Self {
            needing: needing(lanes),
        }
    }

    /// Whether a lane started to need a person since the last look; remembers this look.
    pub fn rings(&mut self, lanes: &Lanes) -> bool {
        let now = needing(lanes);
        let rings = now.iter().any(|key| !self.needing.contains(key));
        self.needing = now;
        rings
    }
}

/// Rings the terminal's bell.
pub fn ring() {
    let mut out = std::io::stdout();
    let _ = out.write_all(b"\x07");
    let _ = out.flush();
}

fn needing(lanes: &Lanes) -> HashSet<LaneKey> {
    lanes
        .rows()
        .iter()
        .filter(|row| row.needs_person())
        .map(|row| row.key.clone())
        .collect()
}
