//! Reading the policy file's `[permissions]` table: the default profile and the typed
//! `[[permissions.entries]]`, every problem named by its entry and key (`docs/permissions.md`).

use std::path::PathBuf;

use toml::{Table, Value};

use super::Location;
use super::parse::Parser;
use crate::permissions::{
    Effect, Entry, PermissionPolicy, PermissionSettings, Profile, Scope, Tool,
};

const PERMISSIONS_KEYS: [&str; 2] = ["default_profile", "entries"];
const ENTRY_KEYS: [&str; 4] = ["tool", "verb", "scope", "decision"];
const PROFILES: &str = "read-only, workspace-write, danger-full-access";

impl Parser {
    pub(super) fn permissions(&mut self, value: &Value) -> PermissionSettings {
        let mut settings = PermissionSettings::default();
        let at = Location::Table {
            name: "permissions".to_owned(),
        };
        let Some(table) = self.table(&at, "", value) else {
            return settings;
        };
        self.unknown_keys(&at, "", table, &PERMISSIONS_KEYS);
        if let Some(name) = self.string(&at, "default_profile", table.get("default_profile"), false)
        {
            match Profile::parse(&name) {
                Some(profile) => settings.default_profile = profile,
                None => self.problem(
                    &at,
                    "default_profile",
                    format!("unknown profile {name:?}; expected one of: {PROFILES}"),
                ),
            }
        }
        let entries = match table.get("entries") {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(other) => {
                self.problem(
                    &at,
                    "entries",
                    format!(
                        "must be an array of tables ([[permissions.entries]]), not {}",
                        other.type_str()
                    ),
                );
                Vec::new()
            }
            None => Vec::new(),
        };
        let mut policy = PermissionPolicy::default();
        for (i, entry) in entries.into_iter().enumerate() {
            let at = Location::PermissionEntry { index: i + 1 };
            let Value::Table(table) = entry else {
                self.problem(
                    &at,
                    "",
                    format!("must be a table, not {}", entry.type_str()),
                );
                continue;
            };
            if let Some(entry) = self.permission_entry(&at, table) {
                policy.entries.push(entry);
            }
        }
        settings.policy = policy;
        settings
    }

    fn permission_entry(&mut self, at: &Location, table: &Table) -> Option<Entry> {
        self.unknown_keys(at, "", table, &ENTRY_KEYS);
        let tool = match self.string(at, "tool", table.get("tool"), false).as_deref() {
            None | Some("*") => Some(None),
            Some(name) => match Tool::parse(name) {
                Some(tool) => Some(Some(tool)),
                None => {
                    self.problem(
                        at,
                        "tool",
                        format!("unknown tool {name:?}; expected one of: bash, write, edit, *"),
                    );
                    None
                }
            },
        };
        let verb = self.string(at, "verb", table.get("verb"), false);
        let verb = match (tool, verb) {
            (Some(Some(Tool::Write | Tool::Edit)), Some(verb)) if verb != "*" => {
                self.problem(
                    at,
                    "verb",
                    format!("{verb:?}: file tools have no verbs; leave it out or write \"*\""),
                );
                None
            }
            (_, Some(verb)) if !valid_verb(&verb) => {
                self.problem(
                    at,
                    "verb",
                    format!(
                        "{verb:?} is not a verb: one command name, or git and a subcommand \
                         (\"git push\"), or \"*\""
                    ),
                );
                None
            }
            (Some(Some(Tool::Bash)) | Some(None), None) => {
                self.problem(
                    at,
                    "verb",
                    "missing; name the command (\"cargo\", \"git push\") or \"*\"",
                );
                None
            }
            (_, verb) => Some(verb.unwrap_or_else(|| "*".to_owned())),
        };
        let scope = match self
            .string(at, "scope", table.get("scope"), true)
            .as_deref()
        {
            None => None,
            Some("lane") => Some(Scope::LaneWorktree),
            Some("repository") => Some(Scope::Repository),
            Some("anywhere") => Some(Scope::Anywhere),
            Some(path) if path.starts_with('/') => Some(Scope::Path(PathBuf::from(path))),
            Some(other) => {
                self.problem(
                    at,
                    "scope",
                    format!("{other:?}: expected lane, repository, anywhere, or an absolute path"),
                );
                None
            }
        };
        let effect = match self
            .string(at, "decision", table.get("decision"), true)
            .as_deref()
        {
            None => None,
            Some("allow") => Some(Effect::Allow),
            Some("deny") => Some(Effect::Deny),
            Some(other) => {
                self.problem(at, "decision", format!("{other:?}: expected allow or deny"));
                None
            }
        };
        Some(Entry {
            tool: tool?,
            verb: verb?,
            scope: scope?,
            effect: effect?,
        })
    }
}

/// One command name, or `git` and a subcommand, or `*`: what [`Entry::verb`] can match.
fn valid_verb(verb: &str) -> bool {
    let words: Vec<&str> = verb.split(' ').collect();
    let plain = |word: &str| {
        !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-/".contains(c))
    };
    match words.as_slice() {
        ["*"] => true,
        [word] => plain(word),
        ["git", sub] => plain(sub),
        _ => false,
    }
}
