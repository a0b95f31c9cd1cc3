//! The request log: one JSON line per request, so end-to-end tests can assert what
//! the agent actually sent (the prompt, the tool results, the headers).
//!
//! Each line is written and flushed before the request is answered, so a test that
//! sees the agent react can already read the request that caused it, and a request
//! that is never answered (a `hang` turn) is still on record.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context;
use serde_json::Value;

/// Appends request records to a file.
pub struct Recorder {
    file: Mutex<File>,
}

impl Recorder {
    /// Creates (or truncates) the record file.
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let file = File::create(path)
            .with_context(|| format!("creating record file {}", path.display()))?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Writes one record as a single line. Failures are reported on stderr rather
    /// than failing the request: the agent under test should not see a log problem.
    pub fn write(&self, record: &Value) {
        let mut line = record.to_string();
        line.push('\n');
        // One write call per line under the lock keeps concurrent requests' lines
        // whole; a poisoned lock still guards a usable file.
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(err) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            eprintln!("model-server: cannot write record: {err}");
        }
    }
}
