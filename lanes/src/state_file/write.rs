//! Writing the state file atomically.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::{StateFileError, WorkerStateDoc};

/// Temporary files of this name pattern older than this are left over from a writer that
/// died between creating and renaming them; the next writer removes them.
const STALE_TEMP_AGE: Duration = Duration::from_secs(60);

/// Writes one lane's state file so that readers only ever see a whole document.
///
/// Each [`write`](Self::write) serializes the document, writes it to a new temporary file with
/// a unique name in the same folder (`.worker-state.json.<pid>.<n>.tmp`, created exclusively),
/// fsyncs it, renames it over the state file, and fsyncs the folder. If any step fails the
/// temporary file is removed and the previous state file is left exactly as it was; the writer
/// then reports itself [`degraded`](Self::degraded) until a write succeeds again.
///
/// One writer per lane, written from one task: concurrent writes are each atomic, but which
/// of them lands last is not defined.
#[derive(Debug)]
pub struct StateFileWriter {
    path: PathBuf,
    dir: PathBuf,
    temp_prefix: String,
    counter: AtomicU64,
    health: Mutex<Health>,
}

#[derive(Debug, Default)]
struct Health {
    error: Option<String>,
    swept: bool,
}

impl StateFileWriter {
    /// A writer for the state file at `path` (its folder is created on the first write).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_owned();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "worker-state.json".to_owned());
        Self {
            path,
            dir,
            temp_prefix: format!(".{name}."),
            counter: AtomicU64::new(0),
            health: Mutex::new(Health::default()),
        }
    }

    /// A writer for the published state file of the lane in `worktree`
    /// (`.claw/worker-state.json`).
    pub fn for_worktree(worktree: &Path) -> Self {
        Self::new(super::state_file_path(worktree))
    }

    /// A writer for the lane's own record in its record folder `record` (`state.json`).
    pub fn for_record(record: &Path) -> Self {
        Self::new(clawpool_worktree::layout::state_record(record))
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the state file with `doc`, atomically (see the type's documentation).
    /// Call [`WorkerStateDoc::stamp`] first so the heartbeat and ages are current.
    pub fn write(&self, doc: &WorkerStateDoc) -> Result<(), StateFileError> {
        self.write_rendered(&Self::render(doc))
    }

    /// The bytes [`write`](Self::write) writes for `doc`: pretty JSON and a newline.
    pub fn render(doc: &WorkerStateDoc) -> Vec<u8> {
        // A document of plain fields and string-keyed maps always serializes.
        let mut bytes = serde_json::to_vec_pretty(doc).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Replaces the state file with `bytes` (a [`render`](Self::render)ed document), atomically.
    pub fn write_rendered(&self, bytes: &[u8]) -> Result<(), StateFileError> {
        let result = self.write_bytes(bytes);
        let mut health = self.health();
        match &result {
            Ok(()) => health.error = None,
            Err(e) => health.error = Some(e.to_string()),
        }
        result
    }

    /// The error of the last write when it failed: the lane's state file is stale and the
    /// lane should be reported degraded. `None` once a write succeeds again.
    pub fn degraded(&self) -> Option<String> {
        self.health().error.clone()
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn failed(&self, stage: &'static str, source: std::io::Error) -> StateFileError {
        StateFileError::WriteFailed {
            path: self.path.clone(),
            stage,
            source,
        }
    }

    fn write_bytes(&self, bytes: &[u8]) -> Result<(), StateFileError> {
        if !self.dir.is_dir() {
            std::fs::create_dir_all(&self.dir).map_err(|e| self.failed("create folder", e))?;
            // Make the new folder's own entry durable too (best effort).
            if let Some(parent) = self.dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                let _ = File::open(parent).and_then(|d| d.sync_all());
            }
        }
        self.sweep_stale_temps_once();
        let (temp, mut file) = self.create_temp()?;
        let fail = |stage, err| {
            let _ = std::fs::remove_file(&temp);
            self.failed(stage, err)
        };
        if let Err(e) = file.write_all(bytes) {
            drop(file);
            return Err(fail("write", e));
        }
        if let Err(e) = file.sync_all() {
            drop(file);
            return Err(fail("fsync", e));
        }
        drop(file);
        if let Err(e) = std::fs::rename(&temp, &self.path) {
            return Err(fail("rename", e));
        }
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.failed("fsync folder", e))
    }

    /// A new temporary file next to the state file, never one that already exists.
    fn create_temp(&self) -> Result<(PathBuf, File), StateFileError> {
        let pid = std::process::id();
        let mut attempts = 0;
        loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let temp = self.dir.join(format!("{}{pid}.{n}.tmp", self.temp_prefix));
            match OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => return Ok((temp, file)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 64 => {
                    attempts += 1;
                }
                Err(e) => return Err(self.failed("create temporary file", e)),
            }
        }
    }

    /// Removes temporary files a dead writer left behind (once per writer, best effort).
    fn sweep_stale_temps_once(&self) {
        {
            let mut health = self.health();
            if health.swept {
                return;
            }
            health.swept = true;
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(&self.temp_prefix) && name.ends_with(".tmp")) {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|modified| now.duration_since(modified).ok())
                .is_some_and(|age| age >= STALE_TEMP_AGE);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}
