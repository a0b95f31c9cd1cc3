//! Shared helpers for clawpool's end-to-end tests: where the built binaries are, throwaway git
//! repositories, and an environment that keeps every test away from the developer's own HOME
//! and tmux server.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The path of a binary built from this workspace (`clawpool`, `clawpool-scripted-agent`,
/// `clawpool-model-server`), found next to the running test executable's target folder.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    // target/<profile>/deps/<test-binary> → target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binaries live in target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built; run `cargo build --workspace --bins` first (the README's test command does)",
        path.display()
    );
    path
}

/// A sandbox for one test: a temporary folder holding a fake HOME and the tmux socket folder,
/// and a marker every process started through it carries in its environment, so a test can
/// prove none of them is left behind.
pub struct Sandbox {
    /// The sandbox folder, removed when the sandbox is dropped.
    pub dir: tempfile::TempDir,
    /// The value of `CLAWPOOL_TEST_MARKER` in every process started through the sandbox.
    pub marker: String,
}

impl Sandbox {
    /// A new, empty sandbox.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("sandbox temp dir");
        std::fs::create_dir_all(dir.path().join("home")).expect("sandbox home");
        std::fs::create_dir_all(dir.path().join("tmux")).expect("sandbox tmux dir");
        let marker = format!(
            "clawpool-test-{}-{}",
            std::process::id(),
            dir.path()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("x")
        );
        Self { dir, marker }
    }

    /// The fake HOME.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The folder tmux keeps its sockets in (`TMUX_TMPDIR`).
    pub fn tmux_dir(&self) -> PathBuf {
        self.dir.path().join("tmux")
    }

    /// `clawpool` with HOME, XDG_CONFIG_HOME and TMUX_TMPDIR inside the sandbox.
    pub fn clawpool(&self) -> Command {
        let mut cmd = Command::new(workspace_bin("clawpool"));
        cmd.env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("TMUX_TMPDIR", self.tmux_dir())
            .env("CLAWPOOL_TEST_MARKER", &self.marker)
            .env_remove("TMUX");
        cmd
    }

    /// Processes still alive (not zombies) that carry this sandbox's marker.
    pub fn leftover_processes(&self) -> Vec<u32> {
        let needle = format!("CLAWPOOL_TEST_MARKER={}", self.marker);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let zombie = stat
                    .rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().next())
                    == Some("Z");
                !zombie
                    && environ
                        .split(|&b| b == 0)
                        .any(|var| var == needle.as_bytes())
            })
            .collect()
    }

    /// Live tmux server sockets left in the sandbox's socket folder.
    pub fn leftover_tmux_sockets(&self) -> Vec<PathBuf> {
        let Ok(dirs) = std::fs::read_dir(self.tmux_dir()) else {
            return Vec::new();
        };
        dirs.filter_map(|d| d.ok())
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten())
            .filter_map(|s| s.ok().map(|s| s.path()))
            .collect()
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh git repository with one commit on `main`.
pub fn git_repo(parent: &Path, name: &str) -> PathBuf {
    let repo = parent.join(name);
    std::fs::create_dir_all(&repo).expect("repo dir");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["commit", "-q", "--allow-empty", "-m", "Initial commit"][..],
    ] {
        let status = Command::new("git")
            .args(["-c", "user.name=test", "-c", "user.email=test@localhost"])
            .args(args)
            .current_dir(&repo)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?} failed");
    }
    repo
}

/// The subjects of a repository's commits, newest first.
pub fn git_log(repo: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["log", "--format=%s"])
        .current_dir(repo)
        .output()
        .expect("git log");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}
