//! How a lane argument — a name or a folder, as a person or a tool gave it — finds its lane:
//! by name in the lane registry of the repository the argument is resolved in, then by
//! folder (the registry entry whose worktree it is, or a `clawpool run` lane's own `.claw/`).
//! Every command on one lane, in the binary and in the pool's own requests, finds it here, so
//! they all agree on which lane an argument means.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use clawpool_lane::registry::lane_registry;
use clawpool_lanes::{StateFileError, WorkerStateDoc, read_lane_record, state_file_path};
use clawpool_worktree::Repo;
use clawpool_worktree::layout::LANE_DIR;

use crate::error::CommandError;
use crate::request::LaneArg;

/// A lane found from an argument.
pub struct FoundLane {
    /// The lane's folder (its worktree).
    pub dir: PathBuf,
    /// Its event log.
    pub events: PathBuf,
}

impl FoundLane {
    /// The lane's record folder, where its event log is: its registry folder (the `.claw/` of
    /// a `clawpool run` lane). Its state, supervisor lock and control socket are found here,
    /// never in the worktree.
    pub fn record(&self) -> PathBuf {
        self.events.parent().map(Path::to_owned).unwrap_or_default()
    }

    /// The lane's state as its record has it.
    pub fn state(&self) -> Result<WorkerStateDoc, StateFileError> {
        read_lane_record(&self.record(), &self.dir)
    }

    /// The lane's control socket.
    pub fn socket(&self) -> PathBuf {
        clawpool_worktree::layout::control_socket(&self.record())
    }
}

/// [`find_lane_arg`] for an argument of this process's command line.
pub fn find_lane(arg: &Path) -> Result<FoundLane, CommandError> {
    find_lane_arg(&LaneArg::here(arg))
}

/// Finds a lane: by name in the registry of `from`'s repository first (so a folder that
/// happens to share the lane's name does not shadow it), then by folder. A folder is matched
/// to the registry entry whose worktree it is — a packet's `worktree` may name the folder
/// otherwise than the lane — then to the entry named like the folder, and otherwise taken as
/// a lane of `clawpool run` (its log in its own `.claw/`).
pub fn find_lane_arg(lane: &LaneArg) -> Result<FoundLane, CommandError> {
    if let Some(found) = registered_name(lane) {
        return Ok(found);
    }
    let arg = folder(lane);
    if arg.is_dir() {
        let dir = arg.canonicalize().unwrap_or_else(|_| arg.to_path_buf());
        let registered = Repo::open(&dir).ok().and_then(|repo| {
            registered_by_worktree(&repo, &dir).or_else(|| {
                let name = dir.file_name()?.to_string_lossy().into_owned();
                registered(&repo, &name).filter(|found| found.events.is_file())
            })
        });
        return Ok(registered.unwrap_or_else(|| FoundLane {
            events: dir.join(LANE_DIR).join(clawpool_worktree::layout::EVENTS),
            dir,
        }));
    }
    Err(not_found(&lane.arg.to_string_lossy()))
}

/// As [`find_lane`], but a folder anywhere inside a lane's worktree stands for that lane, so
/// `clawpool state` works from any subfolder. A registered lane's name still wins over a
/// folder, as in `find_lane`.
pub fn find_enclosing_lane(arg: &Path) -> Result<FoundLane, CommandError> {
    let lane = LaneArg::here(arg);
    if let Some(found) = registered_name(&lane) {
        return Ok(found);
    }
    match enclosing_lane_folder(arg) {
        Some(top) => find_lane(&top),
        None => find_lane(arg),
    }
}

/// The lane the argument names when it is a plain name registered in `from`'s repository.
fn registered_name(lane: &LaneArg) -> Option<FoundLane> {
    let name = plain_name(&lane.arg)?;
    let repo = Repo::open(&lane.from).ok()?;
    registered(&repo, name)
}

/// The argument as a folder: taken from `from` when relative (as it is, from the current
/// folder, so that messages and paths stay as the person wrote them).
fn folder(lane: &LaneArg) -> Cow<'_, Path> {
    if lane.arg.is_absolute() || lane.from == Path::new(".") {
        Cow::Borrowed(&lane.arg)
    } else {
        Cow::Owned(lane.from.join(&lane.arg))
    }
}

/// The nearest folder from `dir` up that holds a lane's state file, looking no higher than the
/// top of the git worktree `dir` is in: a state file above it belongs to no lane of this
/// worktree (a lane's `.claw/` sits at its worktree's top, a `clawpool run` lane's in its DIR).
fn enclosing_lane_folder(dir: &Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    for folder in dir.ancestors() {
        if state_file_path(folder).is_file() {
            return Some(folder.to_owned());
        }
        // `.git` is a folder in a main worktree and a file in a linked one.
        if folder.join(".git").exists() {
            return None;
        }
    }
    None
}

/// The argument as a lane name: one plain path component.
fn plain_name(arg: &Path) -> Option<&str> {
    let mut components = arg.components();
    match (components.next(), components.next()) {
        (Some(std::path::Component::Normal(name)), None) => name.to_str(),
        _ => None,
    }
}

/// Lane `name` from the registry, when its entry is there and names a worktree.
pub fn registered(repo: &Repo, name: &str) -> Option<FoundLane> {
    let registry = lane_registry(repo, name);
    let entry = registry.entry().ok()?;
    Some(FoundLane {
        dir: entry.worktree,
        events: registry.events(),
    })
}

/// The registered lane whose worktree is `dir` (canonical).
fn registered_by_worktree(repo: &Repo, dir: &Path) -> Option<FoundLane> {
    let root = repo.state_dir().lanes();
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| registered(repo, &e.file_name().to_string_lossy()))
        .find(|found| found.dir.canonicalize().is_ok_and(|d| d == dir))
}

fn not_found(name: &str) -> CommandError {
    CommandError::invalid(
        "unknown_lane",
        format!("no lane {name:?}: not a lane folder, and no lane of that name in this repository"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller whose current folder is elsewhere (the MCP server) resolves a folder argument
    /// in the folder it names, not in its own current folder.
    #[test]
    fn a_relative_folder_is_resolved_in_the_argument_s_folder() {
        let top = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(top.path().join("lane-a")).expect("mkdir");
        let lane = LaneArg {
            from: top.path().to_owned(),
            arg: PathBuf::from("lane-a"),
        };
        let found = find_lane_arg(&lane).expect("found");
        let dir = top.path().join("lane-a").canonicalize().expect("canonical");
        assert_eq!(found.dir, dir);
        assert_eq!(found.events, dir.join(LANE_DIR).join("events.jsonl"));
    }

    #[test]
    fn an_argument_that_is_neither_a_lane_nor_a_folder_is_an_unknown_lane() {
        let top = tempfile::tempdir().expect("tempdir");
        let lane = LaneArg {
            from: top.path().to_owned(),
            arg: PathBuf::from("nowhere"),
        };
        let err = find_lane_arg(&lane).err().expect("refused");
        assert_eq!(err.kind, "unknown_lane");
        assert!(err.message.contains("\"nowhere\""), "{}", err.message);
    }
}
