//! Operator grants: a person's yes to a tool-permission question, kept with a scope so the same
//! question is allowed without them next time (`docs/permissions.md`, "Grants").
//!
//! A grant allows one tool and verb (`bash` + `make`; a file tool + `*`) for paths inside the
//! asking lane's worktree, like an allow entry with scope `lane`; its scope says which lanes it
//! is for: `lane` (the lane it was made on), `repository` (every lane of the repository) or
//! `always` (every lane of every repository). `once` is the plain answer and keeps nothing.
//!
//! This module owns the store: one versioned JSON document per place — the repository's
//! common git dir for `lane` and `repository` grants, the user's state folder for `always` —
//! read and written only under an exclusive lock on a file beside it (an OS file lock, released
//! when its holder exits), written whole to a temporary file that is renamed over the store. A
//! store of another version, or one that does not read whole, is never half-read: it is renamed
//! aside (kept, next to it) and reported, and reading goes on from an empty store.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::policy::{Effect, Entry, Scope, Tool};

/// The store's file name, in its folder.
pub const GRANTS_FILE: &str = "permission-grants.json";
/// The version of the store's format this build reads and writes.
pub const GRANTS_VERSION: u64 = 1;

/// Which lanes a grant is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantScope {
    /// This answer only: nothing is kept.
    Once,
    /// The lane it was made on (its worktree).
    Lane,
    /// Every lane of the repository.
    Repository,
    /// Every lane anywhere.
    Always,
}

impl GrantScope {
    /// Parses a scope as the CLI writes it.
    pub fn parse(name: &str) -> Option<GrantScope> {
        match name {
            "once" => Some(Self::Once),
            "lane" => Some(Self::Lane),
            "repository" => Some(Self::Repository),
            "always" => Some(Self::Always),
            _ => None,
        }
    }

    /// The scope's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Lane => "lane",
            Self::Repository => "repository",
            Self::Always => "always",
        }
    }
}

/// One kept grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Its name in its store: the scope and a number (`repository#2`).
    pub id: String,
    /// Which lanes it is for (never `once`).
    pub scope: GrantScope,
    /// The tool: `bash`, `write` or `edit`.
    pub tool: String,
    /// The verb (`make`, `git push`); `*` for a file tool.
    pub verb: String,
    /// The lane's worktree, for a `lane` grant (and where any grant was made).
    pub worktree: PathBuf,
    /// The lane's name where it was made.
    pub lane: String,
    /// The question the person answered (at most 500 characters).
    pub question: String,
    /// When (epoch ms).
    pub granted_at_ms: u64,
}

impl Grant {
    /// The grant as the allow entry it acts as: its tool and verb, paths in the lane's worktree.
    pub fn entry(&self) -> Option<Entry> {
        Some(Entry {
            tool: Some(Tool::parse(&self.tool)?),
            verb: self.verb.clone(),
            scope: Scope::LaneWorktree,
            effect: Effect::Allow,
        })
    }

    /// Whether it is for the lane whose worktree is `worktree` (canonical).
    pub fn applies_to(&self, worktree: &Path) -> bool {
        match self.scope {
            GrantScope::Lane => self.worktree == worktree,
            GrantScope::Repository | GrantScope::Always => true,
            GrantScope::Once => false,
        }
    }

    /// Why a grant read from a store is not one this build can use, if it is not.
    fn problem(&self) -> Option<String> {
        if self.scope == GrantScope::Once {
            return Some(format!("grant {}: scope once is never kept", self.id));
        }
        if Tool::parse(&self.tool).is_none() {
            return Some(format!("grant {}: unknown tool {:?}", self.id, self.tool));
        }
        if self.verb.trim().is_empty() {
            return Some(format!("grant {}: empty verb", self.id));
        }
        None
    }
}

/// A store renamed aside because it could not be read whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetAside {
    /// The store.
    pub from: PathBuf,
    /// Where it is kept now.
    pub to: PathBuf,
    /// Why.
    pub reason: String,
}

/// A store's grants, and the store set aside on the way, if one was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The grants, in the order they were made.
    pub grants: Vec<Grant>,
    /// The unreadable store renamed aside while loading.
    pub set_aside: Option<SetAside>,
}

/// A store could not be read or written (the disk, not its content: content that does not read
/// is set aside).
#[derive(Debug, thiserror::Error)]
#[error("permission grants {path}: {action}: {source}")]
pub struct GrantError {
    /// The file.
    pub path: PathBuf,
    /// What was being done.
    pub action: &'static str,
    /// The OS error.
    pub source: std::io::Error,
}

/// One grants store: a JSON document `{"version": 1, "grants": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantStore {
    path: PathBuf,
}

#[derive(Serialize)]
struct Document<'a> {
    version: u64,
    grants: &'a [Grant],
}

impl GrantStore {
    /// The store in `folder` (`<common git dir>/clawpool/`, or the user's state folder).
    pub fn in_folder(folder: &Path) -> Self {
        Self {
            path: folder.join(GRANTS_FILE),
        }
    }

    /// The user-level store, for `always` grants: `$XDG_STATE_HOME/clawpool/`, else
    /// `$HOME/.local/state/clawpool/` (`env` looks a variable up); none without either.
    pub fn user(env: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let state = env("XDG_STATE_HOME")
            .filter(|dir| Path::new(dir).is_absolute())
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|home| Path::new(&home).join(".local/state")))?;
        Some(Self::in_folder(&state.join("clawpool")))
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The grants in the store (none when it does not exist).
    pub fn load(&self) -> Result<Loaded, GrantError> {
        if !self.path.exists() {
            return Ok(Loaded::default());
        }
        let _lock = self.lock()?;
        self.read_locked()
    }

    /// Adds `grant` (its scope not `once`), named after its scope and numbered after the
    /// store's others (its `id` is set here); the grant as kept, and the store set aside on the
    /// way, if one was.
    pub fn add(&self, mut grant: Grant) -> Result<(Grant, Option<SetAside>), GrantError> {
        let _lock = self.lock()?;
        let mut loaded = self.read_locked()?;
        let next = loaded
            .grants
            .iter()
            .filter_map(|grant| grant.id.rsplit_once('#')?.1.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
            + 1;
        grant.id = format!("{}#{next}", grant.scope.name());
        grant.question = grant.question.chars().take(500).collect();
        loaded.grants.push(grant.clone());
        self.write_locked(&loaded.grants)?;
        Ok((grant, loaded.set_aside))
    }

    /// Holds the store's lock (`<store>.lock`) until dropped, creating its folder if needed.
    fn lock(&self) -> Result<File, GrantError> {
        let failed = |action| {
            let path = self.path.clone();
            move |source| GrantError {
                path,
                action,
                source,
            }
        };
        if let Some(folder) = self.path.parent() {
            std::fs::create_dir_all(folder).map_err(failed("creating its folder"))?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path.with_extension("json.lock"))
            .map_err(failed("opening its lock"))?;
        file.lock().map_err(failed("locking it"))?;
        Ok(file)
    }

    /// Reads the store, the lock held; a store that does not read whole is set aside.
    fn read_locked(&self) -> Result<Loaded, GrantError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Loaded::default());
            }
            Err(source) if source.kind() == std::io::ErrorKind::InvalidData => {
                return self.set_aside("unreadable", "not UTF-8 text".to_owned());
            }
            Err(source) => {
                return Err(GrantError {
                    path: self.path.clone(),
                    action: "reading it",
                    source,
                });
            }
        };
        let document: Value = match serde_json::from_str(&text) {
            Ok(document) => document,
            Err(err) => return self.set_aside("unreadable", format!("not JSON: {err}")),
        };
        match document.get("version").and_then(Value::as_u64) {
            Some(GRANTS_VERSION) => {}
            Some(version) => {
                return self.set_aside(
                    &format!("v{version}"),
                    format!("version {version}; this clawpool reads version {GRANTS_VERSION}"),
                );
            }
            None => return self.set_aside("unreadable", "no version".to_owned()),
        }
        let grants: Vec<Grant> =
            match serde_json::from_value(document.get("grants").cloned().unwrap_or(Value::Null)) {
                Ok(grants) => grants,
                Err(err) => return self.set_aside("unreadable", format!("grants: {err}")),
            };
        if let Some(problem) = grants.iter().find_map(Grant::problem) {
            return self.set_aside("unreadable", problem);
        }
        Ok(Loaded {
            grants,
            set_aside: None,
        })
    }

    /// Renames the store aside (`<store>.<label>.<ms>.aside`), kept; reading goes on empty.
    fn set_aside(&self, label: &str, reason: String) -> Result<Loaded, GrantError> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        let name = format!("{GRANTS_FILE}.{label}.{stamp}.aside");
        let to = self.path.with_file_name(name);
        std::fs::rename(&self.path, &to).map_err(|source| GrantError {
            path: self.path.clone(),
            action: "setting it aside",
            source,
        })?;
        Ok(Loaded {
            grants: Vec::new(),
            set_aside: Some(SetAside {
                from: self.path.clone(),
                to,
                reason,
            }),
        })
    }

    /// Writes `grants` whole: a temporary file, synced, renamed over the store.
    fn write_locked(&self, grants: &[Grant]) -> Result<(), GrantError> {
        let failed = |action| {
            let path = self.path.clone();
            move |source| GrantError {
                path,
                action,
                source,
            }
        };
        let text = serde_json::to_vec_pretty(&Document {
            version: GRANTS_VERSION,
            grants,
        })
        .map_err(|err| std::io::Error::other(err.to_string()))
        .map_err(failed("serialising it"))?;
        let temp = self.path.with_extension("json.tmp");
        let mut file = File::create(&temp).map_err(failed("writing it"))?;
        file.write_all(&text).map_err(failed("writing it"))?;
        file.sync_all().map_err(failed("writing it"))?;
        std::fs::rename(&temp, &self.path).map_err(failed("writing it"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(store: &GrantStore, scope: GrantScope, verb: &str) -> Grant {
        let grant = Grant {
            id: String::new(),
            scope,
            tool: "bash".into(),
            verb: verb.into(),
            worktree: "/w/alpha".into(),
            lane: "alpha".into(),
            question: verb.into(),
            granted_at_ms: 1,
        };
        store.add(grant).expect("added").0
    }

    #[test]
    fn grants_are_kept_numbered_and_read_back() {
        let dir = tempfile::tempdir().expect("dir");
        let store = GrantStore::in_folder(&dir.path().join("clawpool"));
        assert_eq!(store.load().expect("empty"), Loaded::default());
        let first = add(&store, GrantScope::Repository, "make");
        let second = add(&store, GrantScope::Lane, "cargo");
        assert_eq!(
            (first.id.as_str(), second.id.as_str()),
            ("repository#1", "lane#2")
        );
        let loaded = store.load().expect("loaded");
        assert_eq!(loaded.grants, [first.clone(), second.clone()]);
        assert!(loaded.set_aside.is_none());
        let text = std::fs::read_to_string(store.path()).expect("store");
        let document: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(document["version"], GRANTS_VERSION);
        // A lane grant is for its own worktree only.
        assert!(second.applies_to(Path::new("/w/alpha")));
        assert!(!second.applies_to(Path::new("/w/beta")));
        assert!(first.applies_to(Path::new("/w/beta")));
        assert_eq!(first.entry().expect("entry").scope, Scope::LaneWorktree);
    }

    #[test]
    fn a_store_of_another_version_or_unreadable_is_set_aside_and_kept() {
        let cases = [
            (r#"{"version": 0, "grants": []}"#, "v0", "version 0"),
            (
                r#"{"version": 2, "grants": [{"new": 1}]}"#,
                "v2",
                "version 2",
            ),
            (r#"{"grants": []}"#, "unreadable", "no version"),
            ("{\"version\": 1, \"grants\": [", "unreadable", "not JSON"),
            (
                r#"{"version": 1, "grants": [{"id": "x#1", "scope": "repository", "tool": "curl",
                    "verb": "a", "worktree": "/w", "lane": "a", "question": "q",
                    "granted_at_ms": 1}]}"#,
                "unreadable",
                "unknown tool",
            ),
            (
                r#"{"version": 1, "grants": [{"id": "x#1", "scope": "forever"}]}"#,
                "unreadable",
                "grants:",
            ),
        ];
        for (text, label, reason) in cases {
            let dir = tempfile::tempdir().expect("dir");
            let store = GrantStore::in_folder(dir.path());
            std::fs::write(store.path(), text).expect("store");
            let loaded = store.load().expect("loaded");
            assert!(loaded.grants.is_empty(), "{text}: never half-read");
            let aside = loaded.set_aside.expect("set aside");
            assert!(aside.reason.contains(reason), "{text}: {}", aside.reason);
            let name = aside
                .to
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            assert!(
                name.starts_with(&format!("{GRANTS_FILE}.{label}.")) && name.ends_with(".aside"),
                "{name}"
            );
            assert_eq!(std::fs::read_to_string(&aside.to).expect("kept"), text);
            assert!(!store.path().exists());
            // Adding to it starts a new store of this version.
            let grant = add(&store, GrantScope::Repository, "make");
            assert_eq!(grant.id, "repository#1");
            assert_eq!(store.load().expect("loaded").grants, [grant]);
        }
    }

    #[test]
    fn concurrent_writers_lose_no_grant() {
        let dir = tempfile::tempdir().expect("dir");
        let store = GrantStore::in_folder(dir.path());
        let writers: Vec<_> = (0..8)
            .map(|writer| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for n in 0..10 {
                        add(&store, GrantScope::Repository, &format!("verb{writer}-{n}"));
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer");
        }
        let loaded = store.load().expect("loaded");
        assert_eq!(loaded.grants.len(), 80);
        let mut ids: Vec<&str> = loaded.grants.iter().map(|g| g.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 80, "every grant has its own number");
    }

    #[test]
    fn a_grant_allows_like_an_allow_entry_below_blocks_and_denies() {
        use crate::permissions::{LaneContext, PermissionPolicy, Profile, Request, Verdict};
        let dir = tempfile::tempdir().expect("dir");
        let worktree = dir.path().canonicalize().expect("worktree");
        let lane = LaneContext {
            worktree: worktree.clone(),
            repository: worktree.clone(),
            other_lanes: Vec::new(),
            home: None,
            profile: Profile::ReadOnly,
        };
        let grant = |verb: &str, tool: &str| Grant {
            id: "repository#1".into(),
            scope: GrantScope::Repository,
            tool: tool.into(),
            verb: verb.into(),
            worktree: worktree.clone(),
            lane: "alpha".into(),
            question: String::new(),
            granted_at_ms: 1,
        };
        let policy: PermissionPolicy = PermissionPolicy {
            entries: vec![Entry {
                tool: Some(Tool::Bash),
                verb: "make".into(),
                scope: Scope::Path(worktree.join("secret")),
                effect: Effect::Deny,
            }],
        };
        let grants = [grant("make", "bash"), grant("*", "write")];
        let decide = |command: &str| {
            let request = Request::Command {
                command: command.into(),
                cwd: worktree.clone(),
            };
            let decision = policy.decide_with_grants(&lane, &request, &grants);
            (decision.verdict, decision.rule.to_string())
        };
        let granted = (Verdict::Allow, "grant:repository#1".to_owned());
        assert_eq!(decide("make all"), granted);
        assert_eq!(
            decide("ls && make all"),
            (Verdict::Allow, "compound".into())
        );
        // Inside the lane's worktree only, never past a deny entry or a hard block.
        assert_eq!(decide("make -C ../other").0, Verdict::Ask);
        assert_eq!(
            decide("make -C secret"),
            (Verdict::Deny, "permissions.entry#1:deny".into())
        );
        assert_eq!(
            decide("make .git/config").1,
            "hard_block:git_internals".to_owned()
        );
        assert_eq!(decide("cargo build").0, Verdict::Ask, "another verb");
        let write = Request::File {
            tool: Tool::Write,
            path: worktree.join("a.txt"),
        };
        let decision = policy.decide_with_grants(&lane, &write, &grants);
        assert_eq!((decision.verdict, decision.rule.to_string()), granted);
        // Without the grants, the read-only lane asks.
        assert_eq!(policy.decide(&lane, &write).verdict, Verdict::Ask);
    }

    #[test]
    fn the_user_store_is_in_the_state_folder() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                vars.iter()
                    .find(|(name, _)| *name == key)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        let xdg = GrantStore::user(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")]));
        assert_eq!(
            xdg.expect("store").path(),
            Path::new("/s/clawpool/permission-grants.json")
        );
        let home = GrantStore::user(env(&[("HOME", "/h")]));
        assert_eq!(
            home.expect("store").path(),
            Path::new("/h/.local/state/clawpool/permission-grants.json")
        );
        assert!(GrantStore::user(env(&[])).is_none());
    }
}
