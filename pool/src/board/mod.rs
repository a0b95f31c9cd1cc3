//! The board: every lane of a repository as a reader sees it now — its state record with ages
//! and liveness, its branch against its base as the base is now, and what the lanes cost
//! together. Read-only apart from the kept branch records of ended lanes (`branch.json` in
//! their registry folders, `clawpool_worktree::BranchesNow`) and the repository's kept summary
//! of ended lanes' rows ([`summary`], `board.json` beside the registry). The rows are typed
//! ([`BoardLane`]) and serialize straight to the documents `clawpool board --output-format
//! json` prints (docs/cli.md); the table, `clawpool ui` and the MCP server render the same
//! rows, so none of them disagree.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use clawpool_lane::registry::{RegistryFolder, lane_registry};
use clawpool_lanes::state_file::{GreenLevel, now_secs};
use clawpool_lanes::state_file::{Liveness, probe};
use clawpool_lanes::{StateFileError, StateView, read_lane_record};
use clawpool_worktree::{BranchesNow, FreshnessState, Repo};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::error::CommandError;

mod document;
pub mod printed;
pub mod summary;

use printed::PrintedRow;
use summary::{KeptRow, Look, RegistryStamps, RowKey, Sources, Summary};

/// Which lanes a board shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoardRequest {
    /// The lanes of the repository a folder is in.
    Repository(PathBuf),
    /// The lanes of every repository of the user's index ([`crate::known_repos`]).
    Known,
}

/// A board: one section per repository asked for.
pub struct BoardReply {
    /// Each repository with its lanes, in the index's order.
    pub sections: Vec<BoardSection>,
}

/// One repository's lanes on a board.
pub struct BoardSection {
    /// The repository.
    pub repo: Repo,
    /// Its registered lanes, by name.
    pub rows: Vec<BoardRow>,
}

impl BoardSection {
    /// What the section's lanes cost together.
    pub fn cost(&self) -> RepositoryCost {
        RepositoryCost::of(self.rows.iter().map(BoardRow::cost))
    }

    /// Its lanes, typed (a kept row's state document read).
    pub fn into_lanes(self) -> Vec<BoardLane> {
        let repo = self.repo;
        self.rows
            .into_iter()
            .map(|row| row.into_lane(&repo))
            .collect()
    }
}

/// One lane of a board as the board found it: worked out from its files, or an ended lane's
/// row kept in the repository's summary, whose files have not changed since.
pub enum BoardRow {
    /// Worked out now.
    Worked(Box<BoardLane>),
    /// Taken from the summary.
    Kept(KeptLane),
}

/// An ended lane's kept row as of the board that took it.
pub struct KeptLane {
    name: String,
    row: Box<KeptRow>,
    liveness: Liveness,
    now: u64,
}

impl BoardRow {
    /// The lane's name.
    pub fn name(&self) -> &str {
        match self {
            BoardRow::Worked(lane) => &lane.name,
            BoardRow::Kept(kept) => &kept.name,
        }
    }

    /// The lane's cost.
    pub fn cost(&self) -> LaneCost {
        match self {
            BoardRow::Worked(lane) => lane.cost(),
            BoardRow::Kept(kept) => kept.row.printed.cost,
        }
    }

    /// The lane typed: a kept row's state document read, or, should it not read, the lane
    /// worked out from its files.
    pub fn into_lane(self, repo: &Repo) -> BoardLane {
        match self {
            BoardRow::Worked(lane) => *lane,
            BoardRow::Kept(KeptLane {
                name,
                row,
                liveness,
                now,
            }) => match row.printed.doc() {
                Some(doc) => BoardLane {
                    name,
                    worktree: row.worktree,
                    state: Ok(StateView::probed(doc, liveness, now)),
                    board: row.board,
                },
                None => board_lane(repo, &name, now),
            },
        }
    }

    /// Writes the lane's JSON document (docs/cli.md), with `repository` as a last entry for a
    /// board of several repositories: a kept row as printed, its ages and liveness as of now.
    pub fn write_json(&self, out: &mut dyn Write, repository: Option<&str>) -> io::Result<()> {
        #[derive(Serialize)]
        struct WithRepository<'a> {
            #[serde(flatten)]
            lane: &'a BoardLane,
            #[serde(skip_serializing_if = "Option::is_none")]
            repository: Option<&'a str>,
        }
        match self {
            BoardRow::Worked(lane) => {
                serde_json::to_writer(out, &WithRepository { lane, repository })?;
                Ok(())
            }
            BoardRow::Kept(kept) => {
                kept.row
                    .printed
                    .write(out, kept.now, kept.liveness, repository)
            }
        }
    }
}

/// One lane of a board.
#[derive(Debug)]
pub struct BoardLane {
    /// The lane's name (its registry folder's).
    pub name: String,
    /// Its worktree, as its registry entry names it (empty when the entry cannot be read).
    pub worktree: PathBuf,
    /// Its state as of the board: the record with ages and the supervisor's liveness, its
    /// freshness the branch's now and its green level no higher than that allows; or why
    /// the record could not be read (the lane is on the board all the same).
    pub state: Result<StateView, StateFileError>,
    /// What the board adds.
    pub board: BoardFacts,
}

/// What the board adds to a lane's state (`board` in its document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoardFacts {
    /// Whether the worktree has uncommitted work; `None` when it could not be read.
    pub dirty: Option<bool>,
    /// The lane's commits its base does not have; `None` when unknown.
    pub commits_ahead: Option<u32>,
    /// The error its supervisor could not write to its state file, if any.
    pub state_file_degraded: Option<String>,
    /// Its permission questions.
    pub permissions: PermissionCounts,
    /// The green level its record says, when the board shows a lower one because the branch
    /// is not known fresh now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_green_level: Option<GreenLevel>,
}

/// A lane's permission questions by answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionCounts {
    /// Answered yes by the policy.
    pub allowed: u32,
    /// Answered no by the policy.
    pub denied: u32,
    /// Left to a person.
    pub asked: u32,
}

/// A lane's cost as its state says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "usd")]
pub enum LaneCost {
    /// Priced, in US dollars.
    Priced(f64),
    /// Its agent reported usage that could not be priced.
    Unpriced,
    /// Its agent reported no usage (unknown, not zero).
    None,
}

impl BoardLane {
    /// The lane's cost.
    pub fn cost(&self) -> LaneCost {
        let Ok(view) = &self.state else {
            return LaneCost::None;
        };
        match (view.doc.cost_usd, &view.doc.cost) {
            (Some(usd), _) => LaneCost::Priced(usd),
            (None, Some(_)) => LaneCost::Unpriced,
            (None, None) => LaneCost::None,
        }
    }
}

/// What a repository's lanes cost together (the board's `cost`): the sum of the priced lanes,
/// and how many lanes reported usage that could not be priced (not in the sum).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RepositoryCost {
    /// The priced lanes' sum.
    pub total_usd: f64,
    /// How many lanes are priced.
    pub lanes_priced: usize,
    /// How many lanes reported usage without a price.
    pub lanes_unpriced: usize,
}

impl RepositoryCost {
    /// The sum of `costs`.
    pub fn of(costs: impl IntoIterator<Item = LaneCost>) -> Self {
        // From +0.0: an empty f64 sum is -0.0, printed `$-0.0000`.
        let mut cost = RepositoryCost {
            total_usd: 0.0,
            lanes_priced: 0,
            lanes_unpriced: 0,
        };
        for lane in costs {
            match lane {
                LaneCost::Priced(usd) => {
                    cost.total_usd += usd;
                    cost.lanes_priced += 1;
                }
                LaneCost::Unpriced => cost.lanes_unpriced += 1,
                LaneCost::None => {}
            }
        }
        cost
    }
}

/// Runs a board request.
pub fn board(request: &BoardRequest) -> Result<BoardReply, CommandError> {
    let repos = match request {
        BoardRequest::Repository(dir) => vec![
            Repo::open(dir)
                .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?,
        ],
        // Read again at each board (spawn and gc keep it current).
        BoardRequest::Known => {
            crate::known_repos::read().map_err(|e| CommandError::invalid("invalid_index", e))?
        }
    };
    let sections = repos
        .into_iter()
        .map(|repo| BoardSection {
            rows: collect(&repo),
            repo,
        })
        .collect();
    Ok(BoardReply { sections })
}

/// Every lane in the repository's registry (a folder with an entry), each as [`board_lane`]
/// shows it; the bases are resolved once for the whole board.
///
/// An ended lane nobody holds is taken from the repository's kept summary
/// ([`summary`]) while every file its row came from is stamped as kept and its base points
/// where it did: its stamps and its supervisor's liveness are all the board reads of it.
/// Any other lane is worked out from its files, and the summary written back when a row
/// was refused, dropped or worked out anew.
pub fn collect(repo: &Repo) -> Vec<BoardRow> {
    let now = now_secs();
    let look = Look::new(repo);
    let names = crate::registry::registered_lanes(repo);
    // Each lane's supervisor lock and registry stamps need nothing from the summary or the
    // bases: another thread takes them while this one reads those, then joins in.
    let (lanes_now, (mut summary, mut branches)) = shared_with_another_thread(
        &names,
        |name| {
            let dir = repo.state_dir().lane(name);
            (probe(&dir), RegistryStamps::of(&dir))
        },
        || {
            let summary = Summary::read(repo);
            let branches = BranchesNow::open(repo).ok();
            (summary, branches)
        },
    );
    let lanes: Vec<FirstLook> = names
        .into_iter()
        .zip(lanes_now)
        .map(|(name, (liveness, stamps))| FirstLook {
            kept: summary.remove(&name),
            name,
            liveness,
            stamps,
        })
        .collect();
    // The stamps of each kept row's worktree files, on two threads: with the lock and the
    // registry stamps, all a board reads of an ended lane whose row holds (a lane somebody
    // holds is driven: worked out now, never taken from a kept row).
    let holding = on_two_threads(&lanes, |lane| {
        lane.liveness != Liveness::Alive
            && lane
                .kept
                .as_ref()
                .zip(lane.stamps)
                .is_some_and(|(kept, stamps)| look.holds(stamps, kept))
    });
    // Each row, and the kept row it is (taken as it was, or worked out and to be kept).
    let rows: Vec<(BoardRow, Option<KeptRow>)> = lanes
        .into_iter()
        .zip(holding)
        .filter_map(|(lane, holds)| {
            let FirstLook {
                name,
                kept,
                liveness,
                stamps,
            } = lane;
            if let Some(kept) = kept {
                let base_holds = branches.as_mut().is_some_and(|branches| {
                    branches.base_sha(&kept.key.base).as_deref() == Some(kept.key.base_sha.as_str())
                });
                if holds && base_holds {
                    let lane = KeptLane {
                        name,
                        row: Box::new(kept),
                        liveness,
                        now,
                    };
                    return Some((BoardRow::Kept(lane), None));
                }
                summary.changed = true;
            }
            // The stamps were taken before anything of the lane was read: a change while the
            // board runs makes its row old.
            let registry = lane_registry(repo, &name);
            // Read once: a folder without an entry (a lane whose supervisor died before it
            // registered it) is no lane of the board, as `registered_names` has it.
            let entry = match registry.entry() {
                Err(err) if err.missing => return None,
                entry => entry.ok(),
            };
            let key = match (stamps, &entry) {
                (Some(stamps), Some(entry)) if liveness != Liveness::Alive => look
                    .sources(stamps, &entry.worktree)
                    .zip(entry.base.git_ref.clone()),
                _ => None,
            };
            let lane = lane_row(
                repo,
                branches.as_mut(),
                name,
                &registry,
                entry,
                liveness,
                now,
            );
            let kept = key
                .and_then(|(sources, base)| row_key(&lane, sources, base, branches.as_mut()?))
                .and_then(|key| kept_row(&lane, key));
            summary.changed |= kept.is_some();
            Some((BoardRow::Worked(Box::new(lane)), kept))
        })
        .collect();
    summary.write_back(rows.iter().filter_map(|(row, kept)| {
        let kept = match row {
            BoardRow::Kept(lane) => &lane.row,
            BoardRow::Worked(_) => kept.as_ref()?,
        };
        Some((row.name(), kept))
    }));
    rows.into_iter().map(|(row, _)| row).collect()
}

/// A registered lane as a board first looks at it: its kept row, its supervisor's liveness
/// and its registry folder's stamps (`None` when its entry or state file is missing).
struct FirstLook {
    name: String,
    kept: Option<KeptRow>,
    liveness: Liveness,
    stamps: Option<RegistryStamps>,
}

/// `lane`'s row to keep, worked out for `key`.
fn kept_row(lane: &BoardLane, key: RowKey) -> Option<KeptRow> {
    Some(KeptRow {
        key,
        worktree: lane.worktree.clone(),
        board: lane.board.clone(),
        printed: PrintedRow::of(lane)?,
    })
}

/// `f` of each of `items`, in their order, on this thread and another (a few lanes are not
/// worth a thread).
fn on_two_threads<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    shared_with_another_thread(items, f, || ()).0
}

/// `f` of each of `items`, in their order, and `first()`: another thread starts on the items
/// while this one runs `first`, then joins in, each taking the next item left, so that
/// neither idles while items are left. A board's hundreds of lanes are worth a thread.
fn shared_with_another_thread<T: Sync, R: Send, F>(
    items: &[T],
    f: impl Fn(&T) -> R + Sync,
    first: impl FnOnce() -> F,
) -> (Vec<R>, F) {
    if items.len() < 64 {
        let value = first();
        return (items.iter().map(f).collect(), value);
    }
    let next = AtomicUsize::new(0);
    let take = || {
        let mut done = Vec::new();
        loop {
            let at = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(at) else {
                return done;
            };
            done.push((at, f(item)));
        }
    };
    std::thread::scope(|scope| {
        let other = scope.spawn(take);
        let value = first();
        let mut done = take();
        match other.join() {
            Ok(theirs) => done.extend(theirs),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        done.sort_unstable_by_key(|(at, _)| *at);
        (done.into_iter().map(|(_, result)| result).collect(), value)
    })
}

/// What `lane`'s row, worked out from the files `sources` stamps, is kept for: only the row
/// of an ended lane (its record says finished or failed), with no degraded mark, whose branch
/// was worked out against `base` as it points now.
fn row_key(
    lane: &BoardLane,
    sources: Sources,
    base: String,
    branches: &mut BranchesNow,
) -> Option<RowKey> {
    let view = lane.state.as_ref().ok()?;
    let freshness = view.doc.freshness.as_ref()?;
    let base_sha = branches.base_sha(&base)?;
    let keep = view.doc.status.is_terminal()
        && lane.board.state_file_degraded.is_none()
        && freshness.state != FreshnessState::Unknown
        && freshness.base_sha.as_deref() == Some(base_sha.as_str());
    keep.then_some(RowKey {
        sources,
        base,
        base_sha,
    })
}

/// One lane of the board as of `now` (epoch s). `clawpool ui` and the MCP server read lanes
/// through this too, so they never disagree with the board.
pub fn board_lane(repo: &Repo, name: &str, now: u64) -> BoardLane {
    let registry = lane_registry(repo, name);
    let entry = registry.entry().ok();
    let mut branches = BranchesNow::open(repo).ok();
    lane_row(
        repo,
        branches.as_mut(),
        name.to_owned(),
        &registry,
        entry,
        probe(registry.dir()),
        now,
    )
}

/// [`board_lane`] with the repository's bases as `branches` resolved them and the lane's
/// supervisor lock probed (`liveness`).
///
/// The branch facts are the base's as it is now, whoever last wrote the record: a finished
/// lane has no owner left to check it, so its record's freshness, its commits ahead and its
/// `merge_ready` are taken as they are only while its HEAD and its base have not moved since
/// that check (`BranchesNow`). Otherwise the branch is checked again here (no fetch) and the
/// row shows that; a `merge_ready` green then stands only on a branch still `fresh` (else the
/// row shows `workspace`, the most a branch not known fresh reaches, and
/// `board.recorded_green_level` keeps what the record says). The state record itself is left
/// to its owner; what was worked out for an ended lane is kept in its `branch.json` (see
/// `BranchesNow::lane_kept`) so that the next board reads it instead of the worktree.
#[allow(clippy::too_many_arguments)]
fn lane_row(
    repo: &Repo,
    branches: Option<&mut BranchesNow>,
    name: String,
    registry: &RegistryFolder,
    entry: Option<clawpool_lane::registry::RegistryEntry>,
    liveness: Liveness,
    now: u64,
) -> BoardLane {
    let worktree = entry
        .as_ref()
        .map(|e| e.worktree.clone())
        .unwrap_or_default();
    let record = read_lane_record(registry.dir(), &worktree);
    // As the lane's own checks: its recorded base, else the repository's main branch.
    let base = entry
        .as_ref()
        .and_then(|e| e.base.git_ref.clone().or_else(|| repo.main_branch().ok()));
    let recorded = record.as_ref().ok().and_then(|d| d.freshness.as_ref());
    let known: Vec<&str> = entry
        .iter()
        .filter_map(|e| e.base.sha.as_deref())
        .chain(recorded.and_then(|f| f.base_sha.as_deref()))
        .collect();
    // A lane that has not ended may have an agent at work (its supervisor's, or one whose
    // supervisor was lost): its files change without its HEAD moving, so it is worked out
    // now. An ended one is taken from its kept branch record while that is current, and the
    // record is written back whenever the worktree had to be opened, so the next board of
    // it reads files only.
    let owned = !record.as_ref().is_ok_and(|doc| doc.status.is_terminal());
    let branch = match (branches, base) {
        (Some(branches), Some(base)) => Some(branch_now(
            branches, registry, &worktree, &base, &known, recorded, owned,
        )),
        _ => None,
    };
    let mut recorded_green_level = None;
    let state = record.map(|doc| {
        let mut view = StateView::probed(doc, liveness, now);
        if let Some(branch) = &branch {
            view.doc.freshness = Some(branch.freshness.clone());
            if view.doc.green_level == Some(GreenLevel::MergeReady)
                && branch.freshness.state != FreshnessState::Fresh
            {
                recorded_green_level = view.doc.green_level.replace(GreenLevel::Workspace);
            }
        }
        view
    });
    let permissions = state
        .as_ref()
        .map(|view| {
            let p = &view.doc.permissions;
            PermissionCounts {
                allowed: p.allowed,
                denied: p.denied,
                asked: p.asked,
            }
        })
        .unwrap_or_default();
    let board = BoardFacts {
        dirty: branch.as_ref().and_then(|b| b.dirty),
        commits_ahead: branch.as_ref().and_then(|b| b.freshness.ahead),
        state_file_degraded: registry.degraded(),
        permissions,
        recorded_green_level,
    };
    BoardLane {
        name,
        worktree,
        state,
        board,
    }
}

/// The lane's branch now: from its kept record while that is current (an ended lane), else
/// worked out and, for an ended lane, kept for the next board.
#[allow(clippy::too_many_arguments)]
fn branch_now(
    branches: &mut BranchesNow,
    registry: &RegistryFolder,
    worktree: &Path,
    base: &str,
    known: &[&str],
    recorded: Option<&clawpool_worktree::Freshness>,
    owned: bool,
) -> clawpool_worktree::LaneNow {
    let kept = if owned {
        None
    } else {
        registry.branch_record()
    };
    let (lane, fresh) = branches.lane_kept(worktree, base, known, recorded, kept.as_ref(), owned);
    if let Some(fresh) = fresh.filter(|f| kept.as_ref() != Some(f)) {
        registry.keep_branch_record(&fresh);
    }
    lane
}

/// The lane's document: its state as `clawpool state` prints it (`StateView`) with `board`
/// added, or, for a lane whose state cannot be read, `{"lane", "worktree", "lane_status":
/// "unknown", "error": {"kind", "message", "path"}, "board"}`.
impl Serialize for BoardLane {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.state {
            Ok(view) => {
                let mut map = serializer.serialize_map(None)?;
                document::write_view(view, &mut map, None)?;
                map.serialize_entry(document::BOARD_ENTRY, &self.board)?;
                map.end()
            }
            Err(err) => {
                let mut map = serializer.serialize_map(Some(5))?;
                map.serialize_entry("lane", &self.name)?;
                map.serialize_entry("worktree", &self.worktree)?;
                map.serialize_entry("lane_status", "unknown")?;
                map.serialize_entry(
                    "error",
                    &ErrorDoc {
                        kind: err.kind(),
                        message: err.to_string(),
                        path: err.path().display().to_string(),
                    },
                )?;
                map.serialize_entry(document::BOARD_ENTRY, &self.board)?;
                map.end()
            }
        }
    }
}

/// A state file error as the CLI prints it in JSON mode.
#[derive(Serialize)]
struct ErrorDoc {
    kind: &'static str,
    message: String,
    path: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_total_never_counts_unknown_as_zero() {
        let total = RepositoryCost::of([
            LaneCost::Priced(0.5),
            LaneCost::Unpriced,
            LaneCost::None,
            LaneCost::Priced(0.5),
        ]);
        assert_eq!(total.total_usd, 1.0);
        assert_eq!(total.lanes_priced, 2);
        assert_eq!(total.lanes_unpriced, 1);
        let none = RepositoryCost::of([]);
        assert!(none.total_usd.is_sign_positive());
    }

    /// Every item is worked out once and the results come back in the items' order, with
    /// `first`'s value, however the two threads shared them.
    #[test]
    fn work_shared_with_another_thread_comes_back_once_per_item_in_order() {
        use std::sync::atomic::AtomicU32;
        for count in [0, 10, 64, 1_000] {
            let items: Vec<usize> = (0..count).collect();
            let calls: Vec<AtomicU32> = items.iter().map(|_| AtomicU32::new(0)).collect();
            let (results, first) = shared_with_another_thread(
                &items,
                |&item| {
                    calls[item].fetch_add(1, Ordering::Relaxed);
                    item * 2
                },
                || "first",
            );
            assert_eq!(first, "first");
            assert_eq!(results, items.iter().map(|i| i * 2).collect::<Vec<_>>());
            assert!(calls.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        }
    }

    /// The row written field by field is `clawpool state`'s document (`StateView::to_json`)
    /// with `board` added, for a lane shown as it is and for one whose supervisor is lost
    /// (`lane_status`, `is_ready` and the supervisor's liveness replaced), a field of a newer
    /// writer included.
    #[test]
    fn a_row_is_the_state_document_with_board_added() {
        use clawpool_lanes::state_file::{Transport, TransportKind};
        use clawpool_lanes::{LaneStatus, WorkerStateDoc, with_ages};
        let record = tempfile::tempdir().expect("temp dir");
        let transport = Transport {
            kind: TransportKind::Tmux,
            session: Some("s:l".into()),
        };
        let mut doc = WorkerStateDoc::new("w1", "alpha", "scripted", "/tmp/w", transport, 100);
        doc.extra
            .insert("from_a_newer_writer".into(), serde_json::json!({"x": 1}));
        let board = BoardFacts {
            dirty: Some(true),
            commits_ahead: Some(2),
            state_file_degraded: None,
            permissions: PermissionCounts::default(),
            recorded_green_level: Some(GreenLevel::MergeReady),
        };
        for (status, heartbeat) in [(LaneStatus::Running, 0), (LaneStatus::Running, 1_000)] {
            doc.status = status;
            doc.supervisor.heartbeat_at = heartbeat;
            // No lock in `record`: the supervisor is lost when its heartbeat is old.
            let view = with_ages(&doc, record.path(), 1_000);
            let row = BoardLane {
                name: "alpha".into(),
                worktree: "/tmp/w".into(),
                state: Ok(view.clone()),
                board: board.clone(),
            };
            let mut expected = view.to_json();
            expected["board"] = serde_json::to_value(&board).expect("board");
            assert_eq!(serde_json::to_value(&row).expect("row"), expected);
        }
        let lost = with_ages(&doc, record.path(), 1_000_000);
        assert_eq!(
            lost.status,
            clawpool_lanes::state_file::ShownStatus::SupervisorLost
        );
    }
}
