//! The raw byte log: every byte a worker wrote to its terminal, appended to a file on disk,
//! size-capped and rotated. It is the ground truth for replay and debugging.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where and how much raw output to keep.
#[derive(Debug, Clone)]
pub struct RawLogConfig {
    /// The live log file; rotated files get `.1`, `.2`, … appended.
    pub path: PathBuf,
    /// Rotate when the live file would grow past this many bytes.
    pub max_bytes: u64,
    /// How many rotated files to keep besides the live one.
    pub keep: usize,
}

impl RawLogConfig {
    /// A log at `path` capped at 8 MiB per file, keeping two rotated files.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            max_bytes: 8 * 1024 * 1024,
            keep: 2,
        }
    }
}

/// An open raw log.
pub struct RawLog {
    config: RawLogConfig,
    file: File,
    written: u64,
}

impl RawLog {
    /// Opens (appending to) the log, creating its folder when missing.
    pub fn open(config: RawLogConfig) -> io::Result<Self> {
        if let Some(dir) = config.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_append(&config.path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            config,
            file,
            written,
        })
    }

    /// Appends `bytes`, rotating first when they would push the file past its cap.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.written > 0 && self.written + bytes.len() as u64 > self.config.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        let numbered = |n: usize| {
            let mut name = self.config.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        if self.config.keep == 0 {
            self.file.set_len(0)?;
        } else {
            for n in (1..self.config.keep).rev() {
                let from = numbered(n);
                if from.exists() {
                    std::fs::rename(&from, numbered(n + 1))?;
                }
            }
            std::fs::rename(&self.config.path, numbered(1))?;
            self.file = open_append(&self.config.path)?;
        }
        self.written = 0;
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_at_the_cap_and_keeps_a_bounded_number_of_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("raw.log");
        let mut log = RawLog::open(RawLogConfig {
            path: path.clone(),
            max_bytes: 10,
            keep: 2,
        })
        .expect("open log");
        for chunk in [b"aaaaaa", b"bbbbbb", b"cccccc", b"dddddd"] {
            log.append(chunk).expect("append");
        }
        let read = |suffix: &str| {
            std::fs::read_to_string(format!("{}{suffix}", path.display())).expect("read log")
        };
        assert_eq!(read(""), "dddddd");
        assert_eq!(read(".1"), "cccccc");
        assert_eq!(read(".2"), "bbbbbb");
        assert!(!Path::new(&format!("{}.3", path.display())).exists());
    }

    #[test]
    fn appends_to_an_existing_log() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("nested/raw.log");
        RawLog::open(RawLogConfig::new(&path))
            .and_then(|mut l| l.append(b"one "))
            .expect("first writer");
        RawLog::open(RawLogConfig::new(&path))
            .and_then(|mut l| l.append(b"two"))
            .expect("second writer");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "one two");
    }
}
