//! What the dashboard shows, read from the same files as `clawpool board` and `clawpool
//! events` (through [`board_lane`], so the two never disagree): one row per registered lane,
//! the selection and the filter, and the selected lane's last events.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{read_lane_state, with_ages};
use clawpool_worktree::Repo;
use serde_json::Value;

use crate::board::board_lane;
use clawpool_lane::registry::{lane_registry, registered_names};

/// How many of the selected lane's events are shown.
const EVENTS_SHOWN: usize = 12;
/// How much of the end of an event log is read for them.
const EVENTS_TAIL_BYTES: u64 = 64 * 1024;

/// The lanes of one repository, as the board shows them.
pub struct Lanes {
    repo: Repo,
    /// Every lane's board document (`clawpool board --output-format json`), sorted by name.
    rows: Vec<Value>,
    /// The selected lane's name.
    selected: Option<String>,
    /// Lanes shown: those whose name, agent or status contains this.
    pub filter: String,
    /// The selected lane's last events, oldest first.
    pub events: Vec<Value>,
}

impl Lanes {
    /// Every lane of `repo`, read now; the first one selected.
    pub fn read(repo: Repo) -> Self {
        let mut lanes = Self {
            repo,
            rows: Vec::new(),
            selected: None,
            filter: String::new(),
            events: Vec::new(),
        };
        lanes.reload_all();
        lanes
    }

    /// Reads every lane again (a lane appeared or went away).
    pub fn reload_all(&mut self) {
        let now = now_secs();
        self.rows = registered_names(&self.repo)
            .iter()
            .map(|name| board_lane(&self.repo, name, now))
            .collect();
        self.keep_selection();
    }

    /// Reads lane `name` again: its row, and its events when it is the selected one.
    pub fn reload_lane(&mut self, name: &str) {
        let row = board_lane(&self.repo, name, now_secs());
        if !lane_registry(&self.repo, name).entry_file().is_file() {
            self.rows.retain(|r| r["lane"] != name);
        } else {
            match self.rows.iter_mut().find(|r| r["lane"] == name) {
                Some(old) => *old = row,
                None => {
                    self.rows.push(row);
                    self.rows
                        .sort_by(|a, b| a["lane"].as_str().cmp(&b["lane"].as_str()));
                }
            }
        }
        self.keep_selection();
        if self.selected.as_deref() == Some(name) {
            self.read_events();
        }
    }

    /// Reads only the state files again, keeping each lane's branch facts: what time alone
    /// changes (a supervisor gone quiet shows as lost) without running git.
    pub fn refresh_states(&mut self) {
        let now = now_secs();
        for row in &mut self.rows {
            refresh_state(row, now);
        }
    }

    /// Reads lane `name`'s state file again, keeping its branch facts (no git): a state file
    /// rewritten by a heartbeat, or by an event whose own log change reads the whole row.
    pub fn refresh_lane_state(&mut self, name: &str) {
        if let Some(row) = self.rows.iter_mut().find(|r| r["lane"] == name) {
            refresh_state(row, now_secs());
        }
    }

    /// The lanes the filter lets through.
    pub fn visible(&self) -> Vec<&Value> {
        let needle = self.filter.to_lowercase();
        self.rows
            .iter()
            .filter(|row| {
                needle.is_empty()
                    || ["lane", "agent", "lane_status"].iter().any(|key| {
                        row[*key]
                            .as_str()
                            .is_some_and(|v| v.to_lowercase().contains(&needle))
                    })
            })
            .collect()
    }

    /// The selected lane's row, if it is shown.
    pub fn selected(&self) -> Option<&Value> {
        let name = self.selected.as_deref()?;
        self.visible().into_iter().find(|r| r["lane"] == name)
    }

    /// The selected lane's name.
    pub fn selected_name(&self) -> Option<&str> {
        self.selected.as_deref()
    }

    /// The selected lane's position among the shown lanes.
    pub fn selected_index(&self) -> Option<usize> {
        let name = self.selected.as_deref()?;
        self.visible().iter().position(|r| r["lane"] == name)
    }

    /// Moves the selection `by` rows among the shown lanes (clamped).
    pub fn move_selection(&mut self, by: isize) {
        let names: Vec<String> = self.visible_names();
        if names.is_empty() {
            return;
        }
        let at = self.selected_index().unwrap_or(0) as isize;
        let to = (at + by).clamp(0, names.len() as isize - 1) as usize;
        self.select(names[to].clone());
    }

    /// After the rows or the filter changed: the selection stays on its lane while it is
    /// shown, else goes to the first lane shown.
    pub fn keep_selection(&mut self) {
        if self.selected().is_some() {
            return;
        }
        match self.visible_names().into_iter().next() {
            Some(first) => self.select(first),
            None => {
                self.selected = None;
                self.events.clear();
            }
        }
    }

    fn visible_names(&self) -> Vec<String> {
        self.visible()
            .iter()
            .filter_map(|r| r["lane"].as_str().map(str::to_owned))
            .collect()
    }

    fn select(&mut self, name: String) {
        if self.selected.as_ref() != Some(&name) {
            self.selected = Some(name);
            self.read_events();
        }
    }

    /// The selected lane's last events, from the end of its event log.
    fn read_events(&mut self) {
        self.events.clear();
        let Some(name) = self.selected.as_deref() else {
            return;
        };
        let Ok(mut file) = std::fs::File::open(lane_registry(&self.repo, name).events()) else {
            return;
        };
        let start = file
            .metadata()
            .map_or(0, |m| m.len().saturating_sub(EVENTS_TAIL_BYTES));
        let mut text = String::new();
        if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_string(&mut text).is_err() {
            return;
        }
        // Reading from the middle of the log: the first line may be cut, and a line being
        // appended right now is not complete yet; neither parses.
        let events: Vec<Value> = text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let skip = events.len().saturating_sub(EVENTS_SHOWN);
        self.events = events.into_iter().skip(skip).collect();
    }
}

/// `row` with its state document read again as of `now`, its `board` facts kept.
fn refresh_state(row: &mut Value, now: u64) {
    let Some(dir) = row["worktree"].as_str().map(PathBuf::from) else {
        return;
    };
    if let Ok(doc) = read_lane_state(&dir) {
        let board = row["board"].take();
        *row = with_ages(&doc, now).to_json();
        row["board"] = board;
    }
}
