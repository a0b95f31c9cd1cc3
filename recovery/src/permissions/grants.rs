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
//!
//! It also owns the grants' provenance. A lane's agent runs as the same user as clawpool and
//! could write a store by hand; so every grant carries a MAC (HMAC-SHA256) over its fields and
//! its store's path, under the user's [`GrantKey`] — 32 random bytes in the user's state folder
//! (0600), made by the first `answer --remember`, a protected path the policy never lets a
//! lane read or write. A grant without a MAC that verifies is not honoured: it is kept in the
//! store, returned as [`IgnoredGrant`] and reported ("not written by clawpool"). Version-1
//! stores (before MACs) are read, and their grants ignored that way.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use super::policy::{Effect, Entry, Scope, Tool};

/// The store's file name, in its folder.
pub const GRANTS_FILE: &str = "permission-grants.json";
/// The version of the store's format this build writes: grants carry a MAC.
pub const GRANTS_VERSION: u64 = 2;
/// The version before MACs: read, every grant in it ignored.
const UNSIGNED_VERSION: u64 = 1;
/// The grant key's file name, in the user's clawpool state folder.
pub const GRANT_KEY_FILE: &str = "grant-key";
/// The grant key's length.
const KEY_BYTES: usize = 32;
/// What every ignored grant's reason starts with.
pub const NOT_WRITTEN_BY_CLAWPOOL: &str = "not written by clawpool";

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
    /// The MAC that says clawpool wrote it (hex HMAC-SHA256 under the user's [`GrantKey`]);
    /// none in a grant written before MACs or by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
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

/// A grant in a store that is not honoured: clawpool did not write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IgnoredGrant {
    /// The grant as the store holds it.
    pub grant: Grant,
    /// The store.
    pub store: PathBuf,
    /// Why (starts with [`NOT_WRITTEN_BY_CLAWPOOL`]).
    pub reason: String,
}

/// A store's grants, and the store set aside on the way, if one was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The grants clawpool wrote, in the order they were made.
    pub grants: Vec<Grant>,
    /// The grants in the store clawpool did not write (no MAC, or one that does not verify).
    pub ignored: Vec<IgnoredGrant>,
    /// The unreadable store renamed aside while loading.
    pub set_aside: Option<SetAside>,
}

/// The user's grant key: the secret that signs the grants clawpool writes. Its bytes are never
/// printed.
#[derive(Clone, PartialEq, Eq)]
pub struct GrantKey {
    bytes: [u8; KEY_BYTES],
}

impl std::fmt::Debug for GrantKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrantKey(..)")
    }
}

impl GrantKey {
    /// The key's file: `grant-key` in the user's clawpool state folder, beside the user's
    /// store (`$XDG_STATE_HOME/clawpool/`, else `$HOME/.local/state/clawpool/`).
    pub fn user_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
        let store = GrantStore::user(env)?;
        Some(store.path.with_file_name(GRANT_KEY_FILE))
    }

    /// The key in `path`; `None` when there is none yet (then no grant verifies).
    pub fn load(path: &Path) -> Result<Option<GrantKey>, GrantError> {
        let failed = |action| {
            let path = path.to_path_buf();
            move |source| GrantError {
                path,
                action,
                source,
            }
        };
        let metadata = match std::fs::symlink_metadata(path) {
            Ok(metadata) => metadata,
            Err(source) if source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(failed("reading the grant key")(source)),
        };
        if !metadata.is_file() || metadata.len() != KEY_BYTES as u64 {
            return Err(failed("reading the grant key")(std::io::Error::other(
                format!("not a regular file of {KEY_BYTES} bytes"),
            )));
        }
        let bytes = std::fs::read(path).map_err(failed("reading the grant key"))?;
        let bytes: [u8; KEY_BYTES] = bytes.try_into().map_err(|_| {
            failed("reading the grant key")(std::io::Error::other("changed while read"))
        })?;
        Ok(Some(GrantKey { bytes }))
    }

    /// The key in `path`, made first (random bytes, mode 0600, its folder created) when there
    /// is none. Two makers at once agree on one key: each links its own whole file into place
    /// and only the first link succeeds.
    pub fn load_or_create(path: &Path) -> Result<GrantKey, GrantError> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(key) = Self::load(path)? {
            return Ok(key);
        }
        let failed = |action| {
            let path = path.to_path_buf();
            move |source| GrantError {
                path,
                action,
                source,
            }
        };
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|err| {
            failed("making the grant key")(std::io::Error::other(err.to_string()))
        })?;
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(failed("creating its folder"))?;
        }
        let temp = path.with_extension(format!("{}.tmp", std::process::id()));
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(failed("making the grant key"))?;
        let written = file
            .write_all(&bytes)
            .and_then(|()| file.sync_all())
            .map_err(failed("making the grant key"));
        let linked = written.and_then(|()| match std::fs::hard_link(&temp, path) {
            Err(source) if source.kind() != std::io::ErrorKind::AlreadyExists => {
                Err(failed("making the grant key")(source))
            }
            _ => Ok(()),
        });
        let _ = std::fs::remove_file(&temp);
        linked?;
        Self::load(path)?.ok_or_else(|| {
            failed("making the grant key")(std::io::Error::other("gone after it was made"))
        })
    }

    /// The MAC of `grant` kept in the store at `store`: over a canonical encoding (a JSON
    /// array, in a fixed order) of every field but the MAC, and the store's path, so a grant
    /// copied into another store does not verify.
    fn mac(&self, store: &Path, grant: &Grant) -> Hmac<Sha256> {
        let fields = (
            "clawpool grant v2",
            store.to_string_lossy(),
            &grant.id,
            grant.scope.name(),
            &grant.tool,
            &grant.verb,
            grant.worktree.to_string_lossy(),
            &grant.lane,
            &grant.question,
            grant.granted_at_ms,
        );
        let encoded = serde_json::to_vec(&fields).expect("strings and a number always encode");
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.bytes).expect("HMAC takes any key length");
        mac.update(&encoded);
        mac
    }

    fn sign(&self, store: &Path, grant: &Grant) -> String {
        let bytes = self.mac(store, grant).finalize().into_bytes();
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// Why `grant` in the store at `store` is not clawpool's, if it is not.
    fn check(&self, store: &Path, grant: &Grant) -> Option<String> {
        let Some(mac) = &grant.mac else {
            return Some(format!("{NOT_WRITTEN_BY_CLAWPOOL} (it carries no MAC)"));
        };
        let verifies = decode_hex(mac)
            .is_some_and(|bytes| self.mac(store, grant).verify_slice(&bytes).is_ok());
        (!verifies).then(|| format!("{NOT_WRITTEN_BY_CLAWPOOL} (its MAC does not verify)"))
    }
}

/// Hex to bytes; `None` for anything else (a MAC that is not hex does not verify).
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
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

    /// The grants in the store (none when it does not exist): those whose MAC verifies under
    /// `key`, and the others, ignored (all of them without a key).
    pub fn load(&self, key: Option<&GrantKey>) -> Result<Loaded, GrantError> {
        if !self.path.exists() {
            return Ok(Loaded::default());
        }
        let _lock = self.lock()?;
        let (grants, set_aside) = self.read_locked()?;
        let store = self.bound_path();
        let mut loaded = Loaded {
            set_aside,
            ..Loaded::default()
        };
        for grant in grants {
            let problem = match key {
                Some(key) => key.check(&store, &grant),
                None => Some(format!(
                    "{NOT_WRITTEN_BY_CLAWPOOL} (there is no grant key to check it with)"
                )),
            };
            match problem {
                None => loaded.grants.push(grant),
                Some(reason) => loaded.ignored.push(IgnoredGrant {
                    grant,
                    store: self.path.clone(),
                    reason,
                }),
            }
        }
        Ok(loaded)
    }

    /// Adds `grant` (its scope not `once`), named after its scope and numbered after the
    /// store's others (its `id` is set here), signed with `key`; the grant as kept, and the
    /// store set aside on the way, if one was. Grants already in the store are kept as they
    /// are (an unsigned one stays ignored).
    pub fn add(
        &self,
        mut grant: Grant,
        key: &GrantKey,
    ) -> Result<(Grant, Option<SetAside>), GrantError> {
        let _lock = self.lock()?;
        let (mut grants, set_aside) = self.read_locked()?;
        let next = grants
            .iter()
            .filter_map(|grant| grant.id.rsplit_once('#')?.1.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
            + 1;
        grant.id = format!("{}#{next}", grant.scope.name());
        grant.question = grant.question.chars().take(500).collect();
        grant.mac = Some(key.sign(&self.bound_path(), &grant));
        grants.push(grant.clone());
        self.write_locked(&grants)?;
        Ok((grant, set_aside))
    }

    /// The store's path as its MACs bind it: its folder canonical (it exists once the store
    /// was locked), so that every writer and reader names it alike.
    fn bound_path(&self) -> PathBuf {
        let folder = self.path.parent().unwrap_or(Path::new("/"));
        let folder = folder
            .canonicalize()
            .unwrap_or_else(|_| folder.to_path_buf());
        folder.join(GRANTS_FILE)
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

    /// Reads the store's grants, the lock held; a store that does not read whole is set aside.
    fn read_locked(&self) -> Result<(Vec<Grant>, Option<SetAside>), GrantError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), None));
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
            // A version-1 store reads as this one: its grants carry no MAC, so each is ignored.
            Some(GRANTS_VERSION | UNSIGNED_VERSION) => {}
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
        Ok((grants, None))
    }

    /// Renames the store aside (`<store>.<label>.<ms>.aside`), kept; reading goes on empty.
    fn set_aside(
        &self,
        label: &str,
        reason: String,
    ) -> Result<(Vec<Grant>, Option<SetAside>), GrantError> {
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
        Ok((
            Vec::new(),
            Some(SetAside {
                from: self.path.clone(),
                to,
                reason,
            }),
        ))
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

    /// A key of fixed bytes: tests need no randomness.
    const KEY: GrantKey = GrantKey {
        bytes: [7; KEY_BYTES],
    };

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
            mac: None,
        };
        store.add(grant, &KEY).expect("added").0
    }

    #[test]
    fn grants_are_kept_numbered_and_read_back() {
        let dir = tempfile::tempdir().expect("dir");
        let store = GrantStore::in_folder(&dir.path().join("clawpool"));
        assert_eq!(store.load(Some(&KEY)).expect("empty"), Loaded::default());
        let first = add(&store, GrantScope::Repository, "make");
        let second = add(&store, GrantScope::Lane, "cargo");
        assert_eq!(
            (first.id.as_str(), second.id.as_str()),
            ("repository#1", "lane#2")
        );
        let loaded = store.load(Some(&KEY)).expect("loaded");
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
                r#"{"version": 3, "grants": [{"new": 1}]}"#,
                "v3",
                "version 3",
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
            let loaded = store.load(Some(&KEY)).expect("loaded");
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
            assert_eq!(store.load(Some(&KEY)).expect("loaded").grants, [grant]);
        }
    }

    #[test]
    fn a_grant_clawpool_did_not_sign_is_ignored_and_reported() {
        let dir = tempfile::tempdir().expect("dir");
        let store = GrantStore::in_folder(&dir.path().join("repo"));
        let signed = add(&store, GrantScope::Repository, "make");
        assert!(signed.mac.as_deref().is_some_and(|mac| mac.len() == 64));
        // A lane's agent appends grants by hand: one without a MAC, one with a made-up MAC,
        // one whose verb it changed after copying a signed grant's MAC.
        let text = std::fs::read_to_string(store.path()).expect("store");
        let mut document: Value = serde_json::from_str(&text).expect("JSON");
        let mut forged = |id: &str, verb: &str, mac: Option<&str>| {
            let mut grant = serde_json::to_value(&signed).expect("grant");
            grant["id"] = id.into();
            grant["verb"] = verb.into();
            grant["scope"] = "always".into();
            match mac {
                Some(mac) => grant["mac"] = mac.into(),
                None => drop(grant.as_object_mut().expect("object").remove("mac")),
            }
            document["grants"]
                .as_array_mut()
                .expect("grants")
                .push(grant);
        };
        forged("always#2", "*", None);
        forged("always#3", "python3", Some(&"ab".repeat(32)));
        forged("always#4", "sh", signed.mac.as_deref());
        std::fs::write(store.path(), document.to_string()).expect("hand-written");
        let loaded = store.load(Some(&KEY)).expect("loaded");
        assert_eq!(
            loaded.grants,
            std::slice::from_ref(&signed),
            "only clawpool's grant counts"
        );
        let ignored: Vec<(&str, &str)> = loaded
            .ignored
            .iter()
            .map(|ignored| (ignored.grant.id.as_str(), ignored.reason.as_str()))
            .collect();
        assert_eq!(
            ignored,
            [
                ("always#2", "not written by clawpool (it carries no MAC)"),
                (
                    "always#3",
                    "not written by clawpool (its MAC does not verify)"
                ),
                (
                    "always#4",
                    "not written by clawpool (its MAC does not verify)"
                ),
            ]
        );
        // Another key (another user's, or none yet) verifies nothing.
        let other = GrantKey {
            bytes: [8; KEY_BYTES],
        };
        assert!(store.load(Some(&other)).expect("loaded").grants.is_empty());
        assert_eq!(store.load(None).expect("loaded").ignored.len(), 4);
        // A signed grant copied into another repository's store does not verify there.
        let elsewhere = GrantStore::in_folder(&dir.path().join("other"));
        add(&elsewhere, GrantScope::Lane, "ls");
        let text = std::fs::read_to_string(elsewhere.path()).expect("store");
        let mut copied: Value = serde_json::from_str(&text).expect("JSON");
        copied["grants"]
            .as_array_mut()
            .expect("grants")
            .push(serde_json::to_value(&signed).expect("grant"));
        std::fs::write(elsewhere.path(), copied.to_string()).expect("copied");
        let loaded = elsewhere.load(Some(&KEY)).expect("loaded");
        assert_eq!(loaded.grants.len(), 1);
        assert_eq!(loaded.ignored[0].grant.id, signed.id);
    }

    #[test]
    fn a_version_1_store_is_read_and_its_unsigned_grants_ignored_then_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let store = GrantStore::in_folder(dir.path());
        let v1 = r#"{"version": 1, "grants": [{"id": "always#1", "scope": "always",
            "tool": "bash", "verb": "*", "worktree": "/w", "lane": "a", "question": "q",
            "granted_at_ms": 1}]}"#;
        std::fs::write(store.path(), v1).expect("store");
        let loaded = store.load(Some(&KEY)).expect("loaded");
        assert!(
            loaded.set_aside.is_none(),
            "a version-1 store is not set aside"
        );
        assert!(loaded.grants.is_empty());
        assert_eq!(loaded.ignored.len(), 1);
        // The next grant rewrites it as this version, the old grant kept and still ignored.
        let grant = add(&store, GrantScope::Repository, "make");
        assert_eq!(grant.id, "repository#2");
        let loaded = store.load(Some(&KEY)).expect("loaded");
        assert_eq!((loaded.grants.len(), loaded.ignored.len()), (1, 1));
        let text = std::fs::read_to_string(store.path()).expect("store");
        let document: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(document["version"], GRANTS_VERSION);
    }

    #[test]
    fn the_grant_key_is_made_once_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("state/clawpool").join(GRANT_KEY_FILE);
        assert_eq!(GrantKey::load(&path).expect("no key"), None);
        let key = GrantKey::load_or_create(&path).expect("made");
        let mode = std::fs::metadata(&path).expect("key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(GrantKey::load_or_create(&path).expect("read"), key);
        assert_ne!(key.bytes, [0; KEY_BYTES]);
        assert_eq!(
            format!("{key:?}"),
            "GrantKey(..)",
            "its bytes are never printed"
        );
        // A key that is not 32 bytes is an error, not a key.
        std::fs::write(&path, "short").expect("write");
        assert!(GrantKey::load(&path).is_err());
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
        let loaded = store.load(Some(&KEY)).expect("loaded");
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
            protected: crate::permissions::ProtectedPaths::default(),
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
            mac: None,
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
