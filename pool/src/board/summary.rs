//! The board's kept summary of a repository's ended lanes (`board.json` in clawpool's folder of
//! the common git dir, beside the lane registry: never in a worktree, and hidden whole from a
//! sandboxed agent). For each ended lane it holds the row a board worked out (the state
//! document with its branch facts, and the board's own facts) and the kernel's stamps (inode,
//! change time, size) of every file that row came from: the lane's registry folder (a file made
//! or removed there, such as the degraded mark), its entry, its state file, its worktree's
//! admin `gitdir` and `HEAD`, the branch's ref (or `packed-refs` when the ref is packed), the
//! worktree's index and top folder; and the base commit it was worked out against.
//!
//! The file is two parts: a first line, one JSON document of every row's stamps, board facts
//! and marks, and after it the rows' printed texts ([`super::printed`]) one after another,
//! each found by its place. A steady board parses the first line only: the texts are written
//! out as they are, never parsed or copied.
//!
//! A later board takes a row instead of reading those files only while every stamp is as kept
//! and the base still points to that commit: a change time is set by the kernel on every
//! change and no process can set it back, and git and clawpool replace these files by
//! renaming (a new inode). A file that changed within [`RACY`] of the look that read it is not
//! kept (git's "racy" rule: a second write in the same tick of the kernel's clock could leave
//! the same stamp). The summary is refused whole when its first line does not parse or is of
//! another version, and a row is refused when any stamp moved or its text's place or marks do
//! not hold; refused rows are worked out again from
//! the files and the summary written back whole (a temporary file renamed over it, so no
//! reader sees half of one; the last writer wins).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clawpool_worktree::Repo;
use clawpool_worktree::layout::{DEGRADED_MARKER, LANE_ENTRY, STATE_RECORD};
use serde::{Deserialize, Serialize};

use super::BoardFacts;
use super::printed::{PrintedRow, PrintedRowAt};

/// The summary's file name, in clawpool's folder of the common git dir.
pub const SUMMARY: &str = "board.json";
/// The summary's format; a summary of another is refused whole.
const VERSION: u32 = 4;
/// How long before a look a file must have last changed for a row read from it to be kept:
/// two ticks of the coarsest kernel clock (100 Hz), which stamps change times.
pub const RACY: Duration = Duration::from_millis(20);

/// A file's identity and last change as the kernel keeps them; in the summary an array
/// `[ino, ctime, ctime_nsec, size]` (a board parses thousands of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StampEntries", into = "StampEntries")]
pub struct FileStamp {
    /// The inode number.
    pub ino: u64,
    /// The change time, seconds.
    pub ctime: i64,
    /// The change time's nanoseconds.
    pub ctime_nsec: i64,
    /// The size in bytes.
    pub size: u64,
}

/// A [`FileStamp`]'s entries in the summary's order.
type StampEntries = (u64, i64, i64, u64);

impl From<StampEntries> for FileStamp {
    fn from((ino, ctime, ctime_nsec, size): StampEntries) -> FileStamp {
        FileStamp {
            ino,
            ctime,
            ctime_nsec,
            size,
        }
    }
}

impl From<FileStamp> for StampEntries {
    fn from(stamp: FileStamp) -> StampEntries {
        (stamp.ino, stamp.ctime, stamp.ctime_nsec, stamp.size)
    }
}

impl FileStamp {
    /// The stamp of `path` now (one `statx`, not following a last symbolic link); `None` when
    /// it does not exist or cannot be read.
    pub fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(FileStamp {
            ino: meta.ino(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
            size: meta.size(),
        })
    }

    /// Whether the file changed at or after `before` (so a change in the same clock tick as a
    /// read could leave the same stamp).
    fn changed_since(&self, before: Duration) -> bool {
        let changed = Duration::new(
            u64::try_from(self.ctime).unwrap_or(0),
            u32::try_from(self.ctime_nsec).unwrap_or(0),
        );
        self.ctime < 0 || changed >= before
    }
}

/// The stamps of a lane's registry files, taken before any of them is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryStamps {
    /// Its entry (`lane.json`).
    pub entry: FileStamp,
    /// Its state file (`state.json`).
    pub state: FileStamp,
    /// Its degraded mark (`state-degraded`), which a kept row never has: one made since moves
    /// the row.
    pub degraded: Option<FileStamp>,
}

impl RegistryStamps {
    /// The stamps of the registry folder `dir`'s files now; `None` when the entry or the state
    /// file is missing.
    pub fn of(dir: &Path) -> Option<RegistryStamps> {
        Some(RegistryStamps {
            entry: FileStamp::of(&dir.join(LANE_ENTRY))?,
            state: FileStamp::of(&dir.join(STATE_RECORD))?,
            degraded: FileStamp::of(&dir.join(DEGRADED_MARKER)),
        })
    }
}

/// Every file a kept row came from, as stamped before it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    /// The registry folder, entry and state file.
    pub registry: RegistryStamps,
    /// The worktree's admin folder's `gitdir` (which worktree the admin folder is).
    pub gitdir: FileStamp,
    /// The admin folder's `HEAD`.
    pub head: FileStamp,
    /// The branch `HEAD` names (`refs/heads/…`); `None` for a detached HEAD.
    pub head_ref: Option<String>,
    /// The branch's loose ref file; `None` when it is packed (or HEAD is detached).
    pub branch: Option<FileStamp>,
    /// The repository's `packed-refs`, when the branch's ref is read from it.
    pub packed: Option<FileStamp>,
    /// The worktree's index (in its admin folder).
    pub index: FileStamp,
    /// The worktree's top folder.
    pub top: FileStamp,
}

impl Sources {
    /// Whether any of the files changed at or after `before` (epoch time).
    fn racy(&self, before: Duration) -> bool {
        let r = &self.registry;
        [
            r.entry,
            r.state,
            self.gitdir,
            self.head,
            self.index,
            self.top,
        ]
        .iter()
        .chain(self.branch.iter())
        .chain(self.packed.iter())
        .any(|stamp| stamp.changed_since(before))
    }
}

/// One look at a repository's lanes: where their git files are, when it began, and the
/// `packed-refs` stamp, taken once. Shared by the threads that stamp the lanes.
pub struct Look {
    common: PathBuf,
    /// The look's start less [`RACY`], since the epoch.
    racy_before: Duration,
    /// The repository's `packed-refs` when the look began.
    packed: Option<FileStamp>,
}

impl Look {
    /// A look at `repo` beginning now.
    pub fn new(repo: &Repo) -> Look {
        Look::at(repo.common_dir(), SystemTime::now())
    }

    /// A look at the repository whose common git dir is `common`, beginning at `started`.
    fn at(common: &Path, started: SystemTime) -> Look {
        let started = started.duration_since(UNIX_EPOCH).unwrap_or_default();
        Look {
            common: common.to_owned(),
            racy_before: started.saturating_sub(RACY),
            packed: FileStamp::of(&common.join("packed-refs")),
        }
    }

    /// Whether every file `row` came from is stamped as kept: its registry folder's as
    /// `registry` stamped them, and its worktree's now.
    pub fn holds(&self, registry: RegistryStamps, row: &KeptRow) -> bool {
        registry == row.key.sources.registry
            && self.now(registry, &row.worktree, &row.key.sources).as_ref()
                == Some(&row.key.sources)
    }

    /// The admin folder of the linked worktree `worktree`, as `git worktree add` names it
    /// (a worktree whose admin folder is named otherwise is never kept).
    fn admin(&self, worktree: &Path) -> Option<PathBuf> {
        Some(self.common.join("worktrees").join(worktree.file_name()?))
    }

    /// The stamps of the files a row of the lane in `worktree` comes from, taken before the
    /// row is worked out (`registry` before its entry was read), and checked to be the files
    /// the row will be read from: the admin folder names `worktree`, its `HEAD` a commit or a
    /// branch. `None` when the lane cannot be kept (or a file changed within [`RACY`]).
    pub fn sources(&self, registry: RegistryStamps, worktree: &Path) -> Option<Sources> {
        if registry.degraded.is_some() {
            return None;
        }
        let admin = self.admin(worktree)?;
        let gitdir = FileStamp::of(&admin.join("gitdir"))?;
        let named = std::fs::read_to_string(admin.join("gitdir")).ok()?;
        if Path::new(named.trim_end()) != worktree.join(".git") {
            return None;
        }
        let head = FileStamp::of(&admin.join("HEAD"))?;
        let text = std::fs::read_to_string(admin.join("HEAD")).ok()?;
        let text = text.trim_end();
        let head_ref = match text.strip_prefix("ref: ") {
            Some(name) => Some(branch_ref(name)?.to_owned()),
            None if is_commit(text) => None,
            None => return None,
        };
        let sources = self.stamps(registry, gitdir, head, head_ref, &admin, worktree)?;
        // A loose ref that is itself symbolic would move with another ref's file: not kept.
        if let (Some(name), Some(_)) = (&sources.head_ref, sources.branch) {
            let text = std::fs::read_to_string(self.common.join(name)).ok()?;
            if !is_commit(text.trim_end()) {
                return None;
            }
        }
        (!sources.racy(self.racy_before)).then_some(sources)
    }

    /// The stamps of `kept`'s worktree files now, where `kept` found them, with `registry`.
    fn now(&self, registry: RegistryStamps, worktree: &Path, kept: &Sources) -> Option<Sources> {
        if registry.degraded.is_some() {
            return None;
        }
        let admin = self.admin(worktree)?;
        let gitdir = FileStamp::of(&admin.join("gitdir"))?;
        let head = FileStamp::of(&admin.join("HEAD"))?;
        self.stamps(
            registry,
            gitdir,
            head,
            kept.head_ref.clone(),
            &admin,
            worktree,
        )
    }

    fn stamps(
        &self,
        registry: RegistryStamps,
        gitdir: FileStamp,
        head: FileStamp,
        head_ref: Option<String>,
        admin: &Path,
        worktree: &Path,
    ) -> Option<Sources> {
        let branch = head_ref
            .as_deref()
            .and_then(|name| FileStamp::of(&self.common.join(name)));
        // A branch without a loose ref is read from `packed-refs`; one that has both is the
        // loose one's (a loose ref made later moves the row as its stamp appears).
        let packed = if head_ref.is_some() && branch.is_none() {
            Some(self.packed?)
        } else {
            None
        };
        Some(Sources {
            registry,
            gitdir,
            head,
            head_ref,
            branch,
            packed,
            index: FileStamp::of(&admin.join("index"))?,
            top: FileStamp::of(worktree)?,
        })
    }
}

/// Whether `text` is a commit's hash (SHA-1 or SHA-256), as a detached HEAD or a loose ref
/// holds one.
fn is_commit(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `name` when it is a branch's ref that names a file under `refs/heads/` (no `..`, no
/// absolute part): the only refs a kept row is read through.
fn branch_ref(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("refs/heads/")?;
    Path::new(rest)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then_some(name)
}

/// What a row of an ended lane was worked out for, besides its files: its base, and the commit
/// that pointed to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowKey {
    /// The files' stamps.
    pub sources: Sources,
    /// The base's name.
    pub base: String,
    /// The commit it pointed to.
    pub base_sha: String,
}

/// A [`KeptRow`] as the summary file's first line holds it: its printed text is among the
/// rows after that line.
#[derive(Debug, Deserialize)]
struct KeptRowIn {
    key: RowKey,
    worktree: PathBuf,
    board: BoardFacts,
    printed: PrintedRowAt,
}

/// A [`KeptRow`] to write.
#[derive(Serialize)]
struct KeptRowOut<'a> {
    key: &'a RowKey,
    worktree: &'a Path,
    board: &'a BoardFacts,
    printed: PrintedRowAt,
}

/// A kept row: the lane's worktree, the board's facts, the row as printed (its state document
/// as the board showed it, branch facts applied; ages and liveness are worked out again at
/// each board), and what it was worked out for.
#[derive(Debug, Clone)]
pub struct KeptRow {
    /// What the row was worked out for.
    pub key: RowKey,
    /// The lane's worktree.
    pub worktree: PathBuf,
    /// The board's facts.
    pub board: BoardFacts,
    /// The row as printed.
    pub printed: PrintedRow,
}

/// The summary file's first line: a JSON document of the rows' stamps and marks. The rows'
/// printed texts follow it, one after another, read by place and never parsed.
#[derive(Deserialize)]
struct SummaryFile {
    version: u32,
    lanes: BTreeMap<String, KeptRowIn>,
}

#[derive(Serialize)]
struct SummaryToWrite<'a> {
    version: u32,
    lanes: BTreeMap<&'a str, KeptRowOut<'a>>,
}

/// A repository's summary as one board read it, and whether the board must write it back.
pub struct Summary {
    file: PathBuf,
    rows: BTreeMap<String, KeptRow>,
    /// Whether there was a file (kept or refused).
    existed: bool,
    /// A row was refused, dropped or worked out anew, or the file was refused or missing.
    pub changed: bool,
}

impl Summary {
    /// The repository's summary; empty (and to be written) when there is none or it is
    /// refused (not JSON of this shape, another version).
    pub fn read(repo: &Repo) -> Summary {
        let file = repo.state_dir().root().join(SUMMARY);
        let text = std::fs::read_to_string(&file).ok().map(Arc::new);
        let existed = text.is_some();
        let rows = text.as_ref().and_then(|text| {
            let (first_line, _) = text.split_once('\n')?;
            let rows_start = first_line.len() + 1;
            let summary = serde_json::from_str::<SummaryFile>(first_line).ok()?;
            (summary.version == VERSION).then(|| {
                summary
                    .lanes
                    .into_iter()
                    .filter_map(|(name, row)| {
                        let printed = row.printed.in_file(text, rows_start)?;
                        Some((
                            name,
                            KeptRow {
                                key: row.key,
                                worktree: row.worktree,
                                board: row.board,
                                printed,
                            },
                        ))
                    })
                    .collect::<BTreeMap<_, _>>()
            })
        });
        Summary {
            file,
            existed,
            changed: rows.is_none(),
            rows: rows.unwrap_or_default(),
        }
    }

    /// Lane `name`'s kept row, which leaves the summary (the board keeps it again or not);
    /// `None` when its printed row's marks do not hold together.
    pub fn remove(&mut self, name: &str) -> Option<KeptRow> {
        self.rows
            .remove(name)
            .filter(|row| row.printed.holds_together())
    }

    /// Writes `rows` as the summary when it changed (or a lane it had is gone), replacing the
    /// file whole. A failed write only leaves the next board to work the rows out again.
    pub fn write_back<'a>(self, rows: impl Iterator<Item = (&'a str, &'a KeptRow)>) {
        if !self.changed && self.rows.is_empty() {
            return;
        }
        let mut texts = String::new();
        let lanes: BTreeMap<&str, KeptRowOut> = rows
            .map(|(name, row)| {
                let start = texts.len();
                texts.push_str(row.printed.text());
                let out = KeptRowOut {
                    key: &row.key,
                    worktree: &row.worktree,
                    board: &row.board,
                    printed: row.printed.at((start, texts.len())),
                };
                (name, out)
            })
            .collect();
        // A board of lanes none of which is kept leaves no file where there was none.
        if lanes.is_empty() && !self.existed {
            return;
        }
        let summary = SummaryToWrite {
            version: VERSION,
            lanes,
        };
        let Ok(mut bytes) = serde_json::to_vec(&summary) else {
            return;
        };
        // Compact JSON has no line break of its own (one in a string is written `\n`).
        bytes.push(b'\n');
        bytes.extend_from_slice(texts.as_bytes());
        let _ = clawpool_worktree::replace::replace_file(&self.file, &bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A linked worktree's files as a kept row reads them: a registry folder, the admin
    /// folder in a common git dir, a loose branch ref, the worktree.
    struct Lane {
        _root: tempfile::TempDir,
        common: PathBuf,
        registry: PathBuf,
        worktree: PathBuf,
    }

    impl Lane {
        fn new() -> Lane {
            let root = tempfile::tempdir().expect("temp dir");
            let common = root.path().join("repo.git");
            let registry = common.join("clawpool/lanes/alpha");
            let worktree = root.path().join("lanes/alpha");
            let admin = common.join("worktrees/alpha");
            for dir in [
                &registry,
                &worktree,
                &admin,
                &common.join("refs/heads/lanes"),
            ] {
                std::fs::create_dir_all(dir).expect("folder");
            }
            let lane = Lane {
                _root: root,
                common,
                registry,
                worktree,
            };
            lane.replace(&lane.registry.join(LANE_ENTRY), "{}");
            lane.replace(&lane.registry.join(STATE_RECORD), "{}");
            let dot_git = format!("{}\n", lane.worktree.join(".git").display());
            lane.replace(&admin.join("gitdir"), &dot_git);
            lane.replace(&admin.join("HEAD"), "ref: refs/heads/lanes/alpha\n");
            lane.replace(&admin.join("index"), "index");
            lane.replace(&lane.common.join("refs/heads/lanes/alpha"), &"a".repeat(40));
            lane
        }

        /// Replaces `path` as git does: a new file renamed over it.
        fn replace(&self, path: &Path, text: &str) {
            let temp = path.with_extension("lock");
            std::fs::write(&temp, text).expect("write");
            std::fs::rename(&temp, path).expect("rename");
        }

        /// A look that began a second after the files were written (none of them racy).
        fn look(&self) -> Look {
            Look::at(&self.common, SystemTime::now() + Duration::from_secs(1))
        }

        fn sources(&self, look: &Look) -> Option<Sources> {
            let stamps = RegistryStamps::of(&self.registry)?;
            look.sources(stamps, &self.worktree)
        }

        fn now(&self, look: &Look, kept: &Sources) -> Option<Sources> {
            look.now(RegistryStamps::of(&self.registry)?, &self.worktree, kept)
        }
    }

    /// A change made to a lane's files.
    type Change<'a> = Box<dyn Fn() + 'a>;

    #[test]
    fn a_rows_stamps_hold_until_one_of_its_files_is_replaced_or_made() {
        let lane = Lane::new();
        let kept = lane.sources(&lane.look()).expect("kept");
        assert_eq!(kept.head_ref.as_deref(), Some("refs/heads/lanes/alpha"));
        assert!(kept.branch.is_some() && kept.packed.is_none());
        assert_eq!(lane.now(&lane.look(), &kept), Some(kept.clone()));
        let admin = lane.common.join("worktrees/alpha");
        let moves: [(&str, Change); 6] = [
            (
                "the branch",
                Box::new(|| {
                    lane.replace(&lane.common.join("refs/heads/lanes/alpha"), &"b".repeat(40))
                }),
            ),
            (
                "HEAD",
                Box::new(|| lane.replace(&admin.join("HEAD"), "ref: refs/heads/lanes/alpha\n")),
            ),
            (
                "the index",
                Box::new(|| lane.replace(&admin.join("index"), "index")),
            ),
            (
                "the state file",
                Box::new(|| lane.replace(&lane.registry.join(STATE_RECORD), "{}")),
            ),
            (
                "a file made in the worktree's top folder",
                Box::new(|| std::fs::write(lane.worktree.join("new.txt"), "x").expect("write")),
            ),
            (
                "the degraded mark made",
                Box::new(|| {
                    std::fs::write(lane.registry.join("state-degraded"), "no space").expect("mark")
                }),
            ),
        ];
        let mut before = kept;
        for (what, change) in moves {
            change();
            let after = lane.now(&lane.look(), &before);
            assert_ne!(
                after.as_ref(),
                Some(&before),
                "{what} moved and the row was still taken"
            );
            // A degraded mark refuses every row of the lane (the last change).
            before = after.unwrap_or(before);
        }
    }

    #[test]
    fn a_file_written_in_the_tick_of_the_look_is_not_kept() {
        let lane = Lane::new();
        // A look that began as the files were written: the kernel could stamp a second write
        // in the same tick the same.
        let look = Look::at(&lane.common, SystemTime::now());
        assert_eq!(lane.sources(&look), None);
        assert!(lane.sources(&lane.look()).is_some());
    }

    #[test]
    fn a_packed_branch_is_stamped_by_packed_refs_and_a_loose_one_made_later_moves_it() {
        let lane = Lane::new();
        let loose = lane.common.join("refs/heads/lanes/alpha");
        std::fs::remove_file(&loose).expect("unpack");
        // No ref at all: nothing to keep.
        assert_eq!(lane.sources(&lane.look()), None);
        lane.replace(
            &lane.common.join("packed-refs"),
            &format!("{} refs/heads/lanes/alpha\n", "a".repeat(40)),
        );
        let kept = lane.sources(&lane.look()).expect("kept");
        assert!(kept.branch.is_none() && kept.packed.is_some());
        assert_eq!(lane.now(&lane.look(), &kept), Some(kept.clone()));
        lane.replace(&loose, &"b".repeat(40));
        assert_ne!(lane.now(&lane.look(), &kept), Some(kept));
    }

    #[test]
    fn an_admin_folder_of_another_worktree_a_head_outside_the_branches_or_a_symbolic_ref_is_not_kept()
     {
        let lane = Lane::new();
        let admin = lane.common.join("worktrees/alpha");
        lane.replace(&admin.join("HEAD"), "ref: refs/heads/../../config\n");
        assert_eq!(lane.sources(&lane.look()), None);
        lane.replace(&admin.join("HEAD"), "ref: refs/remotes/origin/main\n");
        assert_eq!(lane.sources(&lane.look()), None);
        lane.replace(&admin.join("HEAD"), &format!("{}\n", "c".repeat(40)));
        let detached = lane.sources(&lane.look()).expect("a detached HEAD is kept");
        assert_eq!(detached.head_ref, None);
        lane.replace(&admin.join("HEAD"), "ref: refs/heads/lanes/alpha\n");
        lane.replace(
            &lane.common.join("refs/heads/lanes/alpha"),
            "ref: refs/heads/main\n",
        );
        assert_eq!(lane.sources(&lane.look()), None, "a symbolic loose ref");
        lane.replace(&lane.common.join("refs/heads/lanes/alpha"), &"a".repeat(40));
        lane.replace(&admin.join("gitdir"), "/elsewhere/.git\n");
        assert_eq!(lane.sources(&lane.look()), None);
    }
}
