//! What the dashboard shows, read from the same files as `clawpool board` and `clawpool
//! events` (the pool's typed board rows, [`board_lane`], so the two never disagree): one
//! [`LaneRow`] per registered lane of each repository shown (one, or every one in the user's
//! index with `--all`), the selection and the filter, and the selected lane's last events.

use std::io::{Read, Seek, SeekFrom};

use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{LaneEvent, StateView, read_lane_record};
use clawpool_pool::board::board_lane;
use clawpool_worktree::Repo;

use super::row::LaneRow;
use clawpool_lane::registry::{lane_registry, registered_names};

/// How many of the selected lane's events are shown.
const EVENTS_SHOWN: usize = 12;
/// How much of the end of an event log is read for them.
const EVENTS_TAIL_BYTES: u64 = 64 * 1024;

/// A lane among those shown: lanes of different repositories may share a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaneKey {
    /// The repository's position in [`Lanes::repos`].
    pub repo: usize,
    /// The lane's name in it.
    pub name: String,
}

/// The lanes of the repositories shown, as the board shows them.
pub struct Lanes {
    repos: Vec<Repo>,
    /// Every lane's board row, sorted by repository, then name.
    rows: Vec<LaneRow>,
    /// The selected lane.
    selected: Option<LaneKey>,
    /// Lanes shown: those whose name, agent or status contains this.
    pub filter: String,
    /// The selected lane's last events, oldest first.
    pub events: Vec<LaneEvent>,
}

impl Lanes {
    /// Every lane of `repos`, read now; the first one selected.
    pub fn read(repos: Vec<Repo>) -> Self {
        let mut lanes = Self {
            repos,
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
        self.rows = (0..self.repos.len())
            .flat_map(|repo| {
                registered_names(&self.repos[repo])
                    .into_iter()
                    .map(move |name| LaneKey { repo, name })
            })
            .map(|key| self.row(&key, now))
            .collect();
        self.keep_selection();
    }

    /// Reads lane `key` again: its row, and its events when it is the selected one.
    pub fn reload_lane(&mut self, key: &LaneKey) {
        let Some(repo) = self.repos.get(key.repo) else {
            return;
        };
        if !lane_registry(repo, &key.name).entry_file().is_file() {
            self.rows.retain(|r| r.key != *key);
        } else {
            let row = self.row(key, now_secs());
            match self.rows.iter_mut().find(|r| r.key == *key) {
                Some(old) => *old = row,
                None => {
                    self.rows.push(row);
                    self.rows
                        .sort_by(|a, b| (a.key.repo, &a.key.name).cmp(&(b.key.repo, &b.key.name)));
                }
            }
        }
        self.keep_selection();
        if self.selected.as_ref() == Some(key) {
            self.read_events();
        }
    }

    /// Lane `key`'s board row, with its repository.
    fn row(&self, key: &LaneKey, now: u64) -> LaneRow {
        let repo = &self.repos[key.repo];
        LaneRow {
            key: key.clone(),
            repository: repo.root().to_owned(),
            lane: board_lane(repo, &key.name, now),
        }
    }

    /// The repositories shown.
    pub fn repos(&self) -> &[Repo] {
        &self.repos
    }

    /// Shows `repo` too (a repository the index gained while the dashboard runs); its
    /// position, or the one it already has.
    pub fn add_repo(&mut self, repo: Repo) -> usize {
        if let Some(at) = self.repos.iter().position(|r| *r == repo) {
            return at;
        }
        self.repos.push(repo);
        self.repos.len() - 1
    }

    /// Reads only the state files again, keeping each lane's branch facts: what time alone
    /// changes (a supervisor gone quiet shows as lost) without running git.
    pub fn refresh_states(&mut self) {
        let now = now_secs();
        for row in &mut self.rows {
            refresh_state(row, &self.repos, now);
        }
    }

    /// Reads lane `name`'s state file again, keeping its branch facts (no git): a state file
    /// rewritten by the lane's supervisor, or by an event whose own log change reads the whole row.
    pub fn refresh_lane_state(&mut self, key: &LaneKey) {
        if let Some(row) = self.rows.iter_mut().find(|r| r.key == *key) {
            refresh_state(row, &self.repos, now_secs());
        }
    }

    /// Every lane's row, the filter aside.
    pub fn rows(&self) -> &[LaneRow] {
        &self.rows
    }

    /// The lanes the filter lets through.
    pub fn visible(&self) -> Vec<&LaneRow> {
        let needle = self.filter.to_lowercase();
        self.rows
            .iter()
            .filter(|row| row.matches(&needle))
            .collect()
    }

    /// The selected lane's row, if it is shown.
    pub fn selected(&self) -> Option<&LaneRow> {
        let key = self.selected.as_ref()?;
        self.visible().into_iter().find(|r| r.key == *key)
    }

    /// The selected lane.
    pub fn selected_key(&self) -> Option<&LaneKey> {
        self.selected.as_ref()
    }

    /// The selected lane's name.
    pub fn selected_name(&self) -> Option<&str> {
        self.selected.as_ref().map(|key| key.name.as_str())
    }

    /// The selected lane's position among the shown lanes.
    pub fn selected_index(&self) -> Option<usize> {
        let key = self.selected.as_ref()?;
        self.visible().iter().position(|r| r.key == *key)
    }

    /// Moves the selection `by` rows among the shown lanes (clamped).
    pub fn move_selection(&mut self, by: isize) {
        let keys = self.visible_keys();
        if keys.is_empty() {
            return;
        }
        let at = self.selected_index().unwrap_or(0) as isize;
        let to = (at + by).clamp(0, keys.len() as isize - 1) as usize;
        self.select(keys[to].clone());
    }

    /// After the rows or the filter changed: the selection stays on its lane while it is
    /// shown, else goes to the first lane shown.
    pub fn keep_selection(&mut self) {
        if self.selected().is_some() {
            return;
        }
        match self.visible_keys().into_iter().next() {
            Some(first) => self.select(first),
            None => {
                self.selected = None;
                self.events.clear();
            }
        }
    }

    fn visible_keys(&self) -> Vec<LaneKey> {
        self.visible().into_iter().map(|r| r.key.clone()).collect()
    }

    fn select(&mut self, key: LaneKey) {
        if self.selected.as_ref() != Some(&key) {
            self.selected = Some(key);
            self.read_events();
        }
    }

    /// The selected lane's last events, from the end of its event log.
    fn read_events(&mut self) {
        self.events.clear();
        let Some(key) = self.selected.as_ref() else {
            return;
        };
        let Some(repo) = self.repos.get(key.repo) else {
            return;
        };
        let Ok(mut file) = std::fs::File::open(lane_registry(repo, &key.name).events()) else {
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
        let events: Vec<LaneEvent> = text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let skip = events.len().saturating_sub(EVENTS_SHOWN);
        self.events = events.into_iter().skip(skip).collect();
    }
}

/// `row` (a lane of one of `repos`) with its state read again from its record as of `now`,
/// its board facts kept.
fn refresh_state(row: &mut LaneRow, repos: &[Repo], now: u64) {
    let Some(repo) = repos.get(row.key.repo) else {
        return;
    };
    let record = repo.state_dir().record(&row.key.name);
    if let Ok(doc) = read_lane_record(&record, row.worktree()) {
        row.lane.state = Ok(StateView::of(doc, &record, now));
    }
}
