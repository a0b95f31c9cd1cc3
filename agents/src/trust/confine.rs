//! Keeping what an agent writes into its trust store to the lane that was trusted.
//!
//! Answering an agent's trust dialog makes the agent record trust itself, and both agents key
//! that record more widely than the folder they were asked about: for a lane that is a linked
//! git worktree, Claude Code 2.1.330 writes `projects["<main worktree>"].hasTrustDialogAccepted`
//! and Codex 0.169.0 writes `[projects."<main worktree>"] trust_level = "trusted"` ("Trusting
//! will apply to the repository root"). Both then treat every other worktree of that
//! repository as trusted and never ask again, so one trusted lane would open every later lane
//! of the repository, allow-listed or not.
//!
//! [`StoreGuard`] undoes that: before clawpool answers a trust dialog it notes which projects
//! the store trusts ([`StoreGuard::before_answer`]); afterwards ([`StoreGuard::confine`]) every
//! project trusted since then other than the lane itself has its trust withdrawn (Claude
//! Code: the flag set back to `false`; Codex: the `trust_level` the agent added removed), and
//! the lane's own exact path is trusted instead, so the agent still knows its folder on a
//! restart. Trust that was there before clawpool answered — a person's own — is never touched.
//! Both agents read their store when they start and do not write the flag again, so the
//! running agent keeps working and the next lane is asked (checked with the real binaries:
//! `docs/trust.md`). The edit takes the same lock and atomic replace as pre-seeding.
//! gemini-cli 0.61.0 records exactly the folder it asked about (`"<lane>": "TRUST_FOLDER"` for
//! "1. Trust folder", the choice clawpool makes), so for it the guard only ever finds the lane;
//! an entry it added for anything else would be removed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::profiles::TrustStore;

use super::{TrustError, atomic, claude, codex, gemini, project_key};

/// One lane's agent trust store, as clawpool answers the lane's trust dialog.
#[derive(Debug, Clone)]
pub struct StoreGuard {
    store: TrustStore,
    file: PathBuf,
    lane: PathBuf,
    /// The projects the store trusted before clawpool answered, once it has.
    before: Option<BTreeSet<String>>,
}

/// What [`StoreGuard::confine`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confined {
    /// Projects whose trust the agent had recorded beyond the lane, now withdrawn.
    pub revoked: Vec<String>,
    /// Whether the file was rewritten (also when only the lane's own entry was added).
    pub written: bool,
}

impl StoreGuard {
    /// The guard of `lane` (canonical) for the agent store `store` kept in `file`; `None` for
    /// an agent without a store clawpool knows.
    pub fn new(store: TrustStore, file: PathBuf, lane: PathBuf) -> Option<Self> {
        (store != TrustStore::None).then_some(Self {
            store,
            file,
            lane,
            before: None,
        })
    }

    /// The store's file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Notes what the store trusts now, just before clawpool answers the trust dialog. Only
    /// the first answer counts: a dialog answered again must not take the agent's first
    /// record for a person's.
    pub fn before_answer(&mut self) -> Result<(), TrustError> {
        if self.before.is_none() {
            self.before = Some(self.read_trusted()?);
        }
        Ok(())
    }

    /// Whether clawpool answered a trust dialog of this lane (so there may be something to
    /// confine).
    pub fn answered(&self) -> bool {
        self.before.is_some()
    }

    /// Withdraws the trust the agent recorded since [`StoreGuard::before_answer`] for anything
    /// but the lane, and trusts the lane's own path. Does nothing before an answer.
    pub fn confine(&self) -> Result<Confined, TrustError> {
        let Some(before) = &self.before else {
            return Ok(Confined::default());
        };
        let lane = project_key(&self.lane)?.to_owned();
        let mut revoked = Vec::new();
        let written = atomic::edit_locked(&self.file, |text| {
            let now = trusted_in(self.store, &self.file, text)?;
            revoked = now
                .difference(before)
                .filter(|project| **project != lane)
                .cloned()
                .collect();
            match self.store {
                TrustStore::Claude => claude::confined(&self.file, text, &revoked, &lane),
                TrustStore::Codex => {
                    codex::confined(&self.file, text.unwrap_or(""), &revoked, &lane)
                }
                TrustStore::Gemini | TrustStore::Qwen => {
                    gemini::confined(&self.file, text, &revoked, &lane)
                }
                TrustStore::None => Ok(None),
            }
        })?;
        Ok(Confined { revoked, written })
    }

    fn read_trusted(&self) -> Result<BTreeSet<String>, TrustError> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(text) => Some(text),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(TrustError::Read {
                    file: self.file.clone(),
                    source,
                });
            }
        };
        trusted_in(self.store, &self.file, text.as_deref())
    }
}

fn trusted_in(
    store: TrustStore,
    file: &Path,
    text: Option<&str>,
) -> Result<BTreeSet<String>, TrustError> {
    match store {
        TrustStore::Claude => claude::trusted_projects(file, text),
        TrustStore::Codex => codex::trusted_projects(file, text.unwrap_or("")),
        TrustStore::Gemini | TrustStore::Qwen => gemini::trusted_projects(file, text),
        TrustStore::None => Ok(BTreeSet::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn guard(store: TrustStore, file: &Path, lane: &str) -> StoreGuard {
        StoreGuard::new(store, file.to_path_buf(), PathBuf::from(lane)).expect("a store")
    }

    #[test]
    fn claude_keeps_a_persons_trust_and_withdraws_what_the_agent_added() {
        let dir = tempfile::tempdir().expect("scratch");
        let file = dir.path().join(".claude.json");
        let original = json!({
            "numStartups": 3,
            "projects": {
                "/home/me/own": {"hasTrustDialogAccepted": true, "allowedTools": []},
                "/srv/repo": {"hasTrustDialogAccepted": false, "lastCost": 1}
            }
        });
        std::fs::write(
            &file,
            serde_json::to_string_pretty(&original).expect("json"),
        )
        .expect("write");
        let mut guard = guard(TrustStore::Claude, &file, "/srv/lanes/a");
        guard.before_answer().expect("read");
        // What Claude Code 2.1.330 does on "Yes, I trust this folder" in a linked worktree.
        let mut after = original.clone();
        after["projects"]["/srv/repo"]["hasTrustDialogAccepted"] = json!(true);
        after["projects"]["/srv/other"] = json!({"hasTrustDialogAccepted": true});
        std::fs::write(&file, serde_json::to_string_pretty(&after).expect("json")).expect("write");

        let confined = guard.confine().expect("confine");
        assert_eq!(confined.revoked, ["/srv/other", "/srv/repo"]);
        assert!(confined.written);
        let now: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
        let projects = &now["projects"];
        assert_eq!(projects["/srv/repo"]["hasTrustDialogAccepted"], false);
        assert_eq!(
            projects["/srv/repo"]["lastCost"], 1,
            "the rest of the entry stays"
        );
        assert_eq!(projects["/srv/other"]["hasTrustDialogAccepted"], false);
        assert_eq!(projects["/home/me/own"]["hasTrustDialogAccepted"], true);
        assert_eq!(projects["/srv/lanes/a"]["hasTrustDialogAccepted"], true);
        assert_eq!(now["numStartups"], 3);
        // Done once, nothing more to do.
        assert_eq!(
            guard.confine().expect("again"),
            Confined {
                revoked: vec![],
                written: false
            }
        );
    }

    #[test]
    fn codex_removes_the_repository_root_entry_it_added_and_keeps_comments() {
        let dir = tempfile::tempdir().expect("scratch");
        let file = dir.path().join("config.toml");
        let original =
            "model = \"gpt-5\" # mine\n\n[projects.\"/home/me/own\"]\ntrust_level = \"trusted\"\n";
        std::fs::write(&file, original).expect("write");
        let mut guard = guard(TrustStore::Codex, &file, "/srv/lanes/a");
        guard.before_answer().expect("read");
        // What Codex 0.169.0 does on "Trust and continue" in a linked worktree.
        let after = format!("{original}\n[projects.\"/srv/repo\"]\ntrust_level = \"trusted\"\n");
        std::fs::write(&file, after).expect("write");

        let confined = guard.confine().expect("confine");
        assert_eq!(confined.revoked, ["/srv/repo"]);
        let now = std::fs::read_to_string(&file).expect("read");
        assert!(!now.contains("/srv/repo\""), "{now}");
        assert!(now.starts_with("model = \"gpt-5\" # mine\n"), "{now}");
        assert!(now.contains("[projects.\"/home/me/own\"]\ntrust_level = \"trusted\""));
        assert!(now.contains("[projects.\"/srv/lanes/a\"]\ntrust_level = \"trusted\""));
    }

    #[test]
    fn nothing_is_touched_before_an_answer_or_without_a_store() {
        let dir = tempfile::tempdir().expect("scratch");
        let file = dir.path().join(".claude.json");
        std::fs::write(
            &file,
            "{\"projects\": {\"/srv/repo\": {\"hasTrustDialogAccepted\": true}}}",
        )
        .expect("write");
        let guard = guard(TrustStore::Claude, &file, "/srv/lanes/a");
        assert_eq!(guard.confine().expect("confine"), Confined::default());
        assert!(StoreGuard::new(TrustStore::None, file, PathBuf::from("/x")).is_none());
    }
}
