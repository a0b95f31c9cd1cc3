//! Where each effective value came from, so `clawpool config show` can answer "why is it
//! this?" without the user diffing three files.
//!
//! Profile values are tracked by dotted path (`launch.command`, `launch.env.FOO`,
//! `rules.my_rule`, `dialogs.trust.policy`) following the merge rules of
//! [`crate::profiles::Manifest::apply`]: a later file's path replaces an earlier one's, and
//! replacing a whole dialog drops an earlier file's policy for it, because the replacement
//! carries its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::profiles::ManifestPatch;
use crate::profiles::manifest::{InputPatch, LaunchPatch};

use super::locate::quote_key;

/// A value and the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// The config file that set it.
    pub from: PathBuf,
}

/// For one profile: each dotted path a config file set, and the last file that set it.
pub type ProfileOrigins = BTreeMap<String, PathBuf>;

/// Records, in `origins`, every path `patch` (from `file`) sets.
pub(crate) fn record_patch(origins: &mut ProfileOrigins, patch: &ManifestPatch, file: &Path) {
    // Destructured in full so that a field added to the patch types fails to compile here
    // instead of silently going untracked.
    let ManifestPatch {
        description,
        launch,
        input,
        rules,
        dialogs,
        dialog_policy,
    } = patch;
    let mut set = |path: String| {
        origins.insert(path, file.to_path_buf());
    };
    if description.is_some() {
        set("description".into());
    }
    if let Some(LaunchPatch {
        command,
        args,
        env,
        prompt_args,
        resume_args,
        trust_store,
        hooks,
        sandbox_writes,
        reduced_motion,
    }) = launch
    {
        let scalars = [
            ("command", command.is_some()),
            ("args", args.is_some()),
            ("prompt_args", prompt_args.is_some()),
            ("resume_args", resume_args.is_some()),
            ("trust_store", trust_store.is_some()),
            ("hooks", hooks.is_some()),
            ("sandbox_writes", sandbox_writes.is_some()),
            ("reduced_motion", reduced_motion.is_some()),
        ];
        for (name, given) in scalars {
            if given {
                set(format!("launch.{name}"));
            }
        }
        for key in env.keys() {
            set(format!("launch.env.{}", quote_key(key)));
        }
    }
    if let Some(InputPatch {
        rule,
        bottom_rule,
        status_rows,
        rows_below,
        prefix,
        placeholders,
        clear_keys,
        submit_after_ms,
    }) = input
    {
        let fields = [
            ("rule", rule.is_some()),
            ("bottom_rule", bottom_rule.is_some()),
            ("status_rows", status_rows.is_some()),
            ("rows_below", rows_below.is_some()),
            ("prefix", prefix.is_some()),
            ("placeholders", placeholders.is_some()),
            ("clear_keys", clear_keys.is_some()),
            ("submit_after_ms", submit_after_ms.is_some()),
        ];
        for (name, given) in fields {
            if given {
                set(format!("input.{name}"));
            }
        }
    }
    for rule in rules {
        set(format!("rules.{}", quote_key(&rule.name)));
    }
    for dialog in dialogs {
        let name = quote_key(&dialog.name);
        // The new dialog brings its own policy; an earlier `dialog_policy` no longer applies.
        origins.remove(&format!("dialogs.{name}.policy"));
        origins.insert(format!("dialogs.{name}"), file.to_path_buf());
    }
    for dialog in dialog_policy.keys() {
        origins.insert(
            format!("dialogs.{}.policy", quote_key(dialog)),
            file.to_path_buf(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(text: &str) -> ManifestPatch {
        toml::from_str(text).expect("test patch parses")
    }

    #[test]
    fn every_set_path_is_recorded_and_later_files_win() {
        let mut origins = ProfileOrigins::new();
        let first = patch(
            r#"
launch = { command = "a", env = { FOO = "1", "X.Y" = "2" } }
dialog_policy = { trust = "ask" }
"#,
        );
        record_patch(&mut origins, &first, Path::new("/one.toml"));
        let second = patch(
            r#"
launch = { env = { FOO = "3" }, args = [] }
input = { prefix = ">" }
[[dialogs]]
name = "trust"
kind = "trust"
region = "screen"
match = { contains = "trust?" }
"#,
        );
        record_patch(&mut origins, &second, Path::new("/two.toml"));
        let got: Vec<(&str, &str)> = origins
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_str().expect("utf-8 test path")))
            .collect();
        assert_eq!(
            got,
            vec![
                ("dialogs.trust", "/two.toml"),
                ("input.prefix", "/two.toml"),
                ("launch.args", "/two.toml"),
                ("launch.command", "/one.toml"),
                ("launch.env.\"X.Y\"", "/one.toml"),
                ("launch.env.FOO", "/two.toml"),
            ]
        );
    }
}
