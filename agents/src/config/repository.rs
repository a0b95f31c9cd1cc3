//! What a repository's own `.clawpool.toml` may set.
//!
//! The file comes with the code being worked on, so whoever can push to the repository writes
//! it. It must not be able to vouch for that code: nothing in it may decide that a lane is
//! trusted, answer a question on the agent's screen, change what clawpool types or where, or
//! run a command. So this is an allow-list, not a list of refusals: a key is accepted only when
//! it can make clawpool wait longer, look harder or trust less, never act more.
//!
//! | may set | why it is harmless |
//! |---|---|
//! | `denied_roots` | can only trust fewer lanes |
//! | `[handshake]` timing keys | change when clawpool acts, never what it does |
//! | `[profiles.NAME].description` | text |
//! | new `[[profiles.NAME.rules]]` for a built-in profile | every signal a rule can give (`booting`, `working`, `provider_retry`, `shell`) makes clawpool hold back or fail the lane; none makes it type |
//!
//! Everything else is refused with the file, the key's full path and its line: `trusted_roots`,
//! `policy` (hooks run commands), the sandbox keys (`sandbox`, `network`, `sandbox_rw`,
//! `bwrap`: the sandbox confines the repository's code), `[[notify]]` (a webhook sends, a
//! command runs), `[forge]` (its API URL is sent the token), `launch` (the program and its environment), `input` (where
//! clawpool types), `dialogs` and `dialog_policy` (what is answered and with which keys), a rule
//! that replaces an existing rule of the same name (a repository could remove the rule that
//! keeps a prompt from being typed into a shell), and a profile clawpool does not have.

use std::collections::BTreeSet;
use std::path::Path;

use toml_edit::{ImDocument, Item, Table};

use super::error::ConfigError;
use super::locate::{Segment, join, line_at};

/// The rule names a repository's rule must not reuse: every rule of every profile as the
/// built-in profiles and the configuration files before the repository's define them.
pub(crate) type TakenRuleNames = BTreeSet<(String, String)>;

/// Checks a repository's `.clawpool.toml` against the allow-list in the module doc. `profiles`
/// are the profile names clawpool has before this file (built-in, or added by the user).
pub(crate) fn check_repository_file(
    path: &Path,
    text: &str,
    profiles: &BTreeSet<String>,
    taken: &TakenRuleNames,
) -> Result<(), ConfigError> {
    // Syntax errors, unknown keys and bad values first, with their own messages.
    super::ConfigFile::parse(path, text)?;
    let Ok(doc) = ImDocument::parse(text) else {
        return Ok(());
    };
    let refuse =
        |at: Option<std::ops::Range<usize>>, key: &[Segment], why: &str| ConfigError::Invalid {
            file: path.to_path_buf(),
            line: Some(at.map_or(1, |span| line_at(text, span.start))),
            key: Some(join(key)),
            message: format!(
                "a repository's .clawpool.toml cannot set this: {why}. A repository may set only \
                 denied_roots, [handshake] timing, and new detection rules (docs/config.md); set \
                 anything else in your user configuration or with --config"
            ),
        };
    let root = doc.as_table();
    for (key, item) in root.iter() {
        let at = key_span(root, key, item);
        let path = [Segment::Key(key.to_owned())];
        match key {
            "denied_roots" | "handshake" => {}
            "trusted_roots" => {
                return Err(refuse(at, &path, "it decides which lanes are trusted"));
            }
            "prices" => {
                return Err(refuse(
                    at,
                    &path,
                    "it decides what a lane's cost and budget are measured in",
                ));
            }
            "policy" => {
                return Err(refuse(
                    at,
                    &path,
                    "the recovery policy's hooks run commands",
                ));
            }
            "sandbox" | "network" | "sandbox_rw" | "bwrap" => {
                return Err(refuse(
                    at,
                    &path,
                    "the sandbox confines the repository's own code, so the user decides it",
                ));
            }
            "forge" => {
                return Err(refuse(
                    at,
                    &path,
                    "the forge's API URL is sent the token, and the remote is where branches are pushed",
                ));
            }
            "notify" => {
                return Err(refuse(
                    at,
                    &path,
                    "a webhook would send what the lanes do wherever the repository says, and a command runs a program",
                ));
            }
            "profiles" => {
                let Some(table) = item.as_table_like() else {
                    continue; // A type error the ordinary parse reports.
                };
                for (name, profile) in table.iter() {
                    check_profile(name, profile, profiles, taken, &refuse)?;
                }
            }
            // Unknown keys are reported by the ordinary parse.
            _ => {}
        }
    }
    Ok(())
}

type Refuse<'a> = dyn Fn(Option<std::ops::Range<usize>>, &[Segment], &str) -> ConfigError + 'a;

fn check_profile(
    name: &str,
    item: &Item,
    profiles: &BTreeSet<String>,
    taken: &TakenRuleNames,
    refuse: &Refuse<'_>,
) -> Result<(), ConfigError> {
    let prefix = || {
        vec![
            Segment::Key("profiles".into()),
            Segment::Key(name.to_owned()),
        ]
    };
    let Some(table) = item.as_table_like() else {
        return Ok(());
    };
    if !profiles.contains(name) {
        let at = table.iter().next().and_then(|(_, item)| item.span());
        return Err(refuse(
            at,
            &prefix(),
            "it adds an agent profile (a new agent must come from your own configuration)",
        ));
    }
    for (key, value) in table.iter() {
        let mut path = prefix();
        path.push(Segment::Key(key.to_owned()));
        let at = table
            .key(key)
            .and_then(toml_edit::Key::span)
            .or_else(|| value.span());
        let why = match key {
            "description" => continue,
            "rules" => {
                check_rules(name, value, &path, taken, refuse)?;
                continue;
            }
            "launch" => "it decides which program runs and with what environment",
            "input" => "it decides where clawpool types",
            "dialogs" => "it decides which questions clawpool answers, and with which keys",
            "dialog_policy" => "it decides which questions clawpool answers by itself",
            _ => continue, // Unknown keys are reported by the ordinary parse.
        };
        return Err(refuse(at, &path, why));
    }
    Ok(())
}

fn check_rules(
    profile: &str,
    rules: &Item,
    path: &[Segment],
    taken: &TakenRuleNames,
    refuse: &Refuse<'_>,
) -> Result<(), ConfigError> {
    // Each rule's position and name, whichever way the array is written.
    let named: Vec<(Option<std::ops::Range<usize>>, Option<String>)> = match rules {
        Item::ArrayOfTables(tables) => tables
            .iter()
            .map(|t| {
                (
                    t.span(),
                    t.get("name").and_then(Item::as_str).map(str::to_owned),
                )
            })
            .collect(),
        Item::Value(toml_edit::Value::Array(array)) => array
            .iter()
            .map(|v| {
                let name = v
                    .as_inline_table()
                    .and_then(|t| t.get("name"))
                    .and_then(toml_edit::Value::as_str);
                (v.span(), name.map(str::to_owned))
            })
            .collect(),
        _ => return Ok(()),
    };
    for (i, (at, name)) in named.into_iter().enumerate() {
        if let Some(name) = name
            && taken.contains(&(profile.to_owned(), name.clone()))
        {
            let mut path = path.to_vec();
            path.push(Segment::Index(i));
            return Err(refuse(
                at,
                &path,
                &format!(
                    "rule {name:?} already exists in profile {profile}, and replacing it could \
                     remove a rule that keeps clawpool from typing (give the new rule a name of \
                     its own)"
                ),
            ));
        }
    }
    Ok(())
}

/// Where a top-level key is: its key in a `key = value` line, or its `[table]` header.
fn key_span(table: &Table, key: &str, item: &Item) -> Option<std::ops::Range<usize>> {
    table
        .key(key)
        .and_then(toml_edit::Key::span)
        .or_else(|| item.span())
}
