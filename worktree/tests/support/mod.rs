//! Real git repositories in temporary folders, and a git that never reads or writes the
//! developer's own configuration: every command run here gets a HOME and a global config inside
//! the test's temporary folder, and a fixed identity for commits.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clawpool_worktree::Repo;
use tempfile::TempDir;

/// A temporary folder holding a fake HOME and one or more repositories. Lane worktrees made
/// at their default path land in here too (`<tmp>/<repo>.lanes/`), so dropping it removes
/// everything.
pub struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    /// A fresh sandbox with an empty global git config.
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("tests need a temporary folder");
        std::fs::create_dir(dir.path().join("home")).expect("the fake HOME is creatable");
        std::fs::write(dir.path().join("home/.gitconfig"), "")
            .expect("the fake global config is writable");
        Sandbox { dir }
    }

    /// The sandbox folder, symlinks resolved (so it compares equal to what the crate returns).
    pub fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("the sandbox exists")
    }

    /// A repository at `<sandbox>/<name>` on branch `branch`, with one commit (a README and a
    /// few files in a folder) and an identity in its own config, so commits in its worktrees
    /// work without a global identity.
    pub fn repo(&self, name: &str, branch: &str) -> PathBuf {
        let root = self.path().join(name);
        std::fs::create_dir(&root).expect("the repository folder is creatable");
        self.git(&root, &["init", "-q", "-b", branch]);
        self.git(&root, &["config", "user.name", "Lane Tester"]);
        self.git(&root, &["config", "user.email", "lanes@example.invalid"]);
        std::fs::write(root.join("README.md"), "# test\n").expect("README is writable");
        std::fs::create_dir(root.join("src")).expect("src is creatable");
        for i in 0..5 {
            std::fs::write(root.join(format!("src/f{i}.txt")), format!("{i}\n"))
                .expect("files are writable");
        }
        self.git(&root, &["add", "."]);
        self.git(&root, &["commit", "-q", "-m", "initial"]);
        root
    }

    /// Runs git in `dir` and returns its output, whatever the exit status.
    pub fn git_output(&self, dir: &Path, args: &[&str]) -> Output {
        let home = self.path().join("home");
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(dir).args(args);
        for var in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_COMMON_DIR",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"))
            .env("GIT_AUTHOR_NAME", "Lane Tester")
            .env("GIT_AUTHOR_EMAIL", "lanes@example.invalid")
            .env("GIT_COMMITTER_NAME", "Lane Tester")
            .env("GIT_COMMITTER_EMAIL", "lanes@example.invalid")
            .env("GIT_TERMINAL_PROMPT", "0");
        cmd.output().expect("git is installed")
    }

    /// Runs git in `dir`, expecting success, and returns its trimmed standard output.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git_output(dir, args);
        assert!(
            out.status.success(),
            "git {args:?} in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Whether `git <args>` succeeds in `dir`.
    pub fn git_ok(&self, dir: &Path, args: &[&str]) -> bool {
        self.git_output(dir, args).status.success()
    }

    /// The sha `rev` resolves to in `dir`.
    pub fn sha(&self, dir: &Path, rev: &str) -> String {
        self.git(dir, &["rev-parse", "--verify", rev])
    }

    /// The worktree folders git has registered for the repository at `dir` (main first).
    pub fn worktrees(&self, dir: &Path) -> Vec<PathBuf> {
        self.git(dir, &["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|line| line.strip_prefix("worktree "))
            .map(PathBuf::from)
            .collect()
    }
}

/// Opens the repository at `path`, which the test just made.
pub fn open(path: &Path) -> Repo {
    Repo::open(path).expect("the test repository opens")
}
