//! Reading the state file, and the errors of reading and writing it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{SCHEMA_VERSION, WorkerStateDoc};

/// Why a state file could not be read or written. Every error names the file.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// There is no state file (kind `missing_worker_state`).
    #[error("no worker state file found at {}", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a state file this version can read: not JSON, not the right shape, or
    /// a schema version it does not know (kind `invalid_state_file`).
    #[error("invalid state file {}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The file exists but could not be read (kind `state_file_unreadable`).
    #[error("cannot read state file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file belongs to another workspace: its `worktree` is not the folder it was read
    /// from, as when a lane's `.claw/` was copied into another clone (kind
    /// `foreign_state_file`).
    #[error(
        "the state file {} belongs to the lane in {} (its `worktree`), not to {}; it was copied or moved here and is not this folder's lane",
        path.display(),
        belongs_to.display(),
        found_in.display()
    )]
    Foreign {
        /// The file.
        path: PathBuf,
        /// The worktree the file says it belongs to.
        belongs_to: PathBuf,
        /// The folder it was read from.
        found_in: PathBuf,
    },
    /// The file could not be written; the previous file is intact (kind
    /// `state_file_write_failed`).
    #[error("cannot write state file {} ({stage}): {source}", path.display())]
    WriteFailed {
        /// The file.
        path: PathBuf,
        /// The step that failed: `create folder`, `create temporary file`,
        /// `write`, `fsync`, `rename`, `fsync folder`.
        stage: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

impl StateFileError {
    /// The stable name JSON consumers match on: `missing_worker_state`, `invalid_state_file`,
    /// `state_file_unreadable`, `foreign_state_file` or `state_file_write_failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            StateFileError::Missing { .. } => "missing_worker_state",
            StateFileError::Invalid { .. } => "invalid_state_file",
            StateFileError::Unreadable { .. } => "state_file_unreadable",
            StateFileError::Foreign { .. } => "foreign_state_file",
            StateFileError::WriteFailed { .. } => "state_file_write_failed",
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            StateFileError::Missing { path }
            | StateFileError::Invalid { path, .. }
            | StateFileError::Unreadable { path, .. }
            | StateFileError::Foreign { path, .. }
            | StateFileError::WriteFailed { path, .. } => path,
        }
    }

    /// The error as the CLI prints it in JSON mode:
    /// `{"error": {"kind", "message", "path"}}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "error": {
                "kind": self.kind(),
                "message": self.to_string(),
                "path": self.path().display().to_string(),
            }
        })
    }
}

/// Reads and checks a state file.
///
/// Errors: `missing_worker_state` when there is no file; `invalid_state_file` when it is empty,
/// not JSON, not an object, has no or a bad `schema_version`, a `schema_version` newer than
/// [`SCHEMA_VERSION`], or a field of the wrong type; `state_file_unreadable` for other I/O
/// errors. Fields this version does not know are kept in [`WorkerStateDoc::extra`].
pub fn read_state_file(path: &Path) -> Result<WorkerStateDoc, StateFileError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(StateFileError::Missing {
                path: path.to_owned(),
            });
        }
        Err(source) => {
            return Err(StateFileError::Unreadable {
                path: path.to_owned(),
                source,
            });
        }
    };
    parse_state(path, &bytes)
}

/// Reads the state of the lane in `worktree` from its record folder `record`
/// ([`clawpool_worktree::layout::state_record`]: the registry folder of a spawned lane, the
/// `.claw/` of a `clawpool run` lane) — the pool's own record, never the worktree's published
/// copy, which the lane's agent can rewrite. The record must be that lane's: its `worktree`
/// must be `worktree` (both resolved through symbolic links), or it is
/// [`StateFileError::Foreign`] (a `.claw/` copied into another clone, a folder that was moved;
/// claw-code binds a session to its canonical workspace path for the same reason). Every reader
/// that decides or shows something about a lane reads it through this.
pub fn read_lane_record(record: &Path, worktree: &Path) -> Result<WorkerStateDoc, StateFileError> {
    let path = clawpool_worktree::layout::state_record(record);
    let doc = read_state_file(&path)?;
    // The same path needs no resolving (a spawned lane's record names its worktree as the
    // registry does): the board reads a thousand of them.
    if Path::new(&doc.worktree) == worktree {
        return Ok(doc);
    }
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let belongs_to = PathBuf::from(&doc.worktree);
    let found_in = canonical(worktree);
    if canonical(&belongs_to) != found_in {
        return Err(StateFileError::Foreign {
            path,
            belongs_to,
            found_in,
        });
    }
    Ok(doc)
}

/// Checks and parses the bytes of a state file (`path` only names it in errors).
pub fn parse_state(path: &Path, bytes: &[u8]) -> Result<WorkerStateDoc, StateFileError> {
    let invalid = |reason: String| StateFileError::Invalid {
        path: path.to_owned(),
        reason,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid("the file is empty".into()));
    }
    // A file of this version, well formed: parsed once, straight into the document. Anything
    // else (an older or newer version, a wrong shape) takes the checks below, which say what
    // is wrong.
    if let Ok(doc) = serde_json::from_slice::<WorkerStateDoc>(bytes)
        && doc.schema_version == SCHEMA_VERSION
        && doc.incoherence().is_none()
    {
        return Ok(doc);
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(invalid("not a JSON object".into()));
    };
    match object.get("schema_version") {
        None => {
            return Err(invalid(
                "no schema_version: not written by clawpool (claw-code's own state files have \
                 none)"
                    .into(),
            ));
        }
        Some(version) => match version.as_u64() {
            Some(v) if v > u64::from(SCHEMA_VERSION) => {
                return Err(invalid(format!(
                    "schema_version {v} is newer than this clawpool understands \
                     ({SCHEMA_VERSION}); upgrade clawpool to read it"
                )));
            }
            Some(0) | None => {
                return Err(invalid(format!(
                    "schema_version {version} is not a version (expected 1..={SCHEMA_VERSION})"
                )));
            }
            Some(_) => {}
        },
    }
    let version_1 = object.get("schema_version").and_then(Value::as_u64) == Some(1);
    let mut value = value;
    if version_1 {
        migrate_v1(&mut value).map_err(|e| invalid(format!("wrong shape: {e}")))?;
    }
    let doc: WorkerStateDoc =
        serde_json::from_value(value).map_err(|e| invalid(format!("wrong shape: {e}")))?;
    match doc.incoherence() {
        Some(wrong) => Err(invalid(format!("wrong shape: {wrong}"))),
        None => Ok(doc),
    }
}

/// A version 1 document as version 2: `status` (clawpool's vocabulary then) becomes
/// `lane_status`, `claw_status` becomes `status`, `last_event` (any lane event then) becomes
/// `lane_event`, and `last_event` is that event in claw-code's vocabulary when claw-code has a
/// kind for it.
fn migrate_v1(value: &mut Value) -> Result<(), serde_json::Error> {
    let Some(object) = value.as_object_mut() else {
        return Ok(());
    };
    let lane_status = object.remove("status").unwrap_or(Value::Null);
    let claw_status = object.remove("claw_status").unwrap_or(Value::Null);
    let lane_event = object.remove("last_event").unwrap_or(Value::Null);
    let claw: Option<super::ClawStatus> = serde_json::from_value(claw_status.clone())?;
    let event: Option<super::LastEvent> = serde_json::from_value(lane_event.clone())?;
    let worktree = object
        .get("worktree")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let last_event = match (event, claw) {
        (Some(event), Some(claw)) => {
            let to = event
                .payload
                .as_ref()
                .and_then(|p| p.get("to"))
                .and_then(|to| serde_json::from_value(to.clone()).ok());
            super::claw_event_kind(&event.kind, to)
                .map(|kind| super::ClawEvent::from_lane_event(&event, kind, claw, &worktree))
        }
        _ => None,
    };
    object.insert("schema_version".into(), Value::from(super::SCHEMA_VERSION));
    object.insert("status".into(), claw_status);
    object.insert("lane_status".into(), lane_status);
    object.insert("last_event".into(), serde_json::to_value(last_event)?);
    object.insert("lane_event".into(), lane_event);
    Ok(())
}
