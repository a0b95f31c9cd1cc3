//! What the dashboard shows, read from the same files as `clawpool board` and `clawpool
//! events` (through [`board_lane`], so the two never disagree): one row per registered lane of
//! each repository shown (one, or every one in the user's index with `--all`), the selection
//! and the filter, and the selected lane's last events.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{LaneEvent, read_lane_record, with_ages};
use clawpool_worktree::Repo;
use serde_json::Value;

use crate::board::board_lane;
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
    /// Every lane's board document (`clawpool board --output-format json`) with its
    /// repository's position (`repo_index`) and root (`repository`) added, sorted by
    /// repository, then name.
    rows: Vec<Value>,
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
            self.rows.retain(|r| !is_lane(r, key));
        } else {
            let row = self.row(key, now_secs());
            match self.rows.iter_mut().find(|r| is_lane(r, key)) {
                Some(old) => *old = row,
                None => {
                    self.rows.push(row);
                    self.rows.sort_by(|a, b| {
                        (a["repo_index"].as_u64(), a["lane"].as_str())
                            .cmp(&(b["repo_index"].as_u64(), b["lane"].as_str()))
                    });
                }
            }
        }
        self.keep_selection();
        if self.selected.as_ref() == Some(key) {
            self.read_events();
        }
    }

    /// Lane `key`'s board document, with its repository added.
    fn row(&self, key: &LaneKey, now: u64) -> Value {
        let repo = &self.repos[key.repo];
        let mut row = board_lane(repo, &key.name, now);
        row["repo_index"] = key.repo.into();
        row["repository"] = repo.root().display().to_string().into();
        row
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
        if let Some(row) = self.rows.iter_mut().find(|r| is_lane(r, key)) {
            refresh_state(row, &self.repos, now_secs());
        }
    }

    /// Every lane's row, the filter aside.
    pub fn rows(&self) -> &[Value] {
        &self.rows
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
        let key = self.selected.as_ref()?;
        self.visible().into_iter().find(|r| is_lane(r, key))
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
        self.visible().iter().position(|r| is_lane(r, key))
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
        self.visible().into_iter().filter_map(key_of).collect()
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

/// Whether `row` is lane `key`'s.
fn is_lane(row: &Value, key: &LaneKey) -> bool {
    row["repo_index"].as_u64() == Some(key.repo as u64) && row["lane"] == key.name.as_str()
}

/// The lane `row` is of.
pub fn key_of(row: &Value) -> Option<LaneKey> {
    Some(LaneKey {
        repo: usize::try_from(row["repo_index"].as_u64()?).ok()?,
        name: row["lane"].as_str()?.to_owned(),
    })
}

/// `row` (a lane of one of `repos`) with its state document read again from its record as of
/// `now`, its `board` facts and repository kept.
fn refresh_state(row: &mut Value, repos: &[Repo], now: u64) {
    let Some(dir) = row["worktree"].as_str().map(PathBuf::from) else {
        return;
    };
    let Some(record) =
        key_of(row).and_then(|key| Some(repos.get(key.repo)?.state_dir().record(&key.name)))
    else {
        return;
    };
    if let Ok(doc) = read_lane_record(&record, &dir) {
        let mut fresh = with_ages(&doc, &record, now).to_json();
        for kept in ["board", "repo_index", "repository"] {
            fresh[kept] = row[kept].take();
        }
        *row = fresh;
    }
}
