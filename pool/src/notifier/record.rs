//! The notifier's record, `<common>/clawpool/notify.json` (`docs/notify.md`, "The record"):
//! how far it read the stream, every lane's last situation, and per endpoint what it still has
//! to send and how its deliveries went. One file, replaced whole (written aside, then renamed)
//! after every change, so a notifier that restarts neither sends a situation twice nor loses
//! one; `clawpool doctor` reads it to show an endpoint that keeps failing.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::message::Notification;
use super::situation::Situations;

/// The record's format version; a newer one is not read (nor overwritten).
pub const VERSION: u32 = 1;

/// The whole record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NotifyRecord {
    /// [`VERSION`].
    pub version: u32,
    /// The cursor of the last stream event read; absent before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// Every lane's last situation.
    #[serde(default)]
    pub lanes: Situations,
    /// Per endpoint (by its name in the configuration), its deliveries.
    #[serde(default)]
    pub endpoints: BTreeMap<String, EndpointRecord>,
}

/// One endpoint's deliveries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointRecord {
    /// What it sends to, as safe to print (a webhook's scheme and host only).
    pub target: String,
    /// Notifications not yet delivered, oldest first.
    #[serde(default)]
    pub pending: VecDeque<Notification>,
    /// Notifications delivered, ever.
    #[serde(default)]
    pub delivered: u64,
    /// Failed attempts since the last delivery: 0 when the last attempt went through.
    #[serde(default)]
    pub failures: u32,
    /// Why the last attempt failed, while `failures` is not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the last attempt failed (epoch seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_at: Option<u64>,
    /// When a notification last went through (epoch seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivered_at: Option<u64>,
}

impl EndpointRecord {
    /// Its last attempt failed and notifications wait: what `doctor` warns about.
    pub fn failing(&self) -> bool {
        self.failures > 0 && !self.pending.is_empty()
    }
}

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Reading or writing the file failed.
    #[error("notifier record {}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a record this build reads.
    #[error("notifier record {}: {message}", path.display())]
    Unreadable {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl NotifyRecord {
    /// The record at `path`; a new one when there is none.
    pub fn load(path: &Path) -> Result<Self, RecordError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(NotifyRecord {
                    version: VERSION,
                    ..NotifyRecord::default()
                });
            }
            Err(source) => {
                return Err(RecordError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let record: NotifyRecord =
            serde_json::from_str(&text).map_err(|e| RecordError::Unreadable {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        if record.version > VERSION {
            return Err(RecordError::Unreadable {
                path: path.to_owned(),
                message: format!(
                    "written by a newer clawpool (version {}; this one reads {VERSION})",
                    record.version
                ),
            });
        }
        Ok(record)
    }

    /// Replaces the file at `path` with this record.
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        let io = |source| RecordError::Io {
            path: path.to_owned(),
            source,
        };
        let mut bytes =
            serde_json::to_vec_pretty(self).map_err(|e| io(std::io::Error::other(e)))?;
        bytes.push(b'\n');
        clawpool_worktree::replace::replace_file(path, &bytes).map_err(io)
    }
}
