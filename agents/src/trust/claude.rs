//! Pre-seeding Claude Code's trust store: `projects["<path>"].hasTrustDialogAccepted = true`
//! in its global config file (`~/.claude.json`, or `$CLAUDE_CONFIG_DIR/.claude.json`).
//!
//! The file also holds the person's account state, settings and every other project, so the
//! edit touches that one flag of that one project and keeps every other key, value and key
//! order (serde_json's `preserve_order`). It is written back the way Claude Code writes it:
//! pretty-printed with two-space indentation.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{SeedOutcome, TrustError, atomic, project_key};

/// The key Claude Code reads to skip its "Do you trust the files in this folder?" dialog.
const ACCEPTED_KEY: &str = "hasTrustDialogAccepted";

/// The Claude Code config file: `$CLAUDE_CONFIG_DIR/.claude.json` when that variable is set
/// (and not empty), else `<home>/.claude.json`.
pub fn claude_config_file(home: &Path, env_claude_config_dir: Option<&Path>) -> PathBuf {
    match env_claude_config_dir {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(".claude.json"),
        _ => home.join(".claude.json"),
    }
}

/// Marks `project` (an absolute path, used exactly as given, so pass the lane's canonical
/// path) as trusted in the Claude Code config file `config_file`.
///
/// A missing file is created (mode 0600) holding just that entry. A file that is not valid
/// JSON, or whose `projects` is not an object, is an error and is left untouched. The edit is
/// locked and atomic (see `docs/trust.md`); when the flag is already `true` the file is not
/// rewritten and [`SeedOutcome::AlreadyTrusted`] is returned.
pub fn seed_claude_trust(config_file: &Path, project: &Path) -> Result<SeedOutcome, TrustError> {
    let key = project_key(project)?;
    let written = atomic::edit_locked(config_file, |existing| {
        with_project_trusted(config_file, existing, key)
    })?;
    Ok(if written {
        SeedOutcome::Seeded
    } else {
        SeedOutcome::AlreadyTrusted
    })
}

/// The new file contents with `key` trusted, or `None` if it already is.
fn with_project_trusted(
    file: &Path,
    existing: Option<&str>,
    key: &str,
) -> Result<Option<String>, TrustError> {
    let shape = |what: &str| TrustError::UnexpectedShape {
        file: file.to_path_buf(),
        what: what.to_owned(),
    };
    // An empty file holds nothing to lose; treat it like a missing one.
    let mut root = match existing {
        Some(text) if !text.trim().is_empty() => {
            serde_json::from_str::<Value>(text).map_err(|source| TrustError::InvalidJson {
                file: file.to_path_buf(),
                line: source.line(),
                column: source.column(),
                source,
            })?
        }
        _ => Value::Object(Map::new()),
    };
    let root_object = root
        .as_object_mut()
        .ok_or_else(|| shape("the top level is not a JSON object"))?;
    let projects = root_object
        .entry("projects")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| shape("`projects` is not a JSON object"))?;
    let entry = projects
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| shape(&format!("`projects[{key:?}]` is not a JSON object")))?;
    if entry.get(ACCEPTED_KEY) == Some(&Value::Bool(true)) {
        return Ok(None);
    }
    entry.insert(ACCEPTED_KEY.to_owned(), Value::Bool(true));

    let mut text = serde_json::to_string_pretty(&root).expect("a JSON value always serializes");
    // Keep the original's final newline (or lack of one); new files get one.
    if existing.is_none_or(|text| text.ends_with('\n')) {
        text.push('\n');
    }
    Ok(Some(text))
}

/// The projects the file `text` of `file` marks as trusted (an empty or missing file: none).
pub(super) fn trusted_projects(
    file: &Path,
    text: Option<&str>,
) -> Result<std::collections::BTreeSet<String>, TrustError> {
    let Some(root) = parse(file, text)? else {
        return Ok(Default::default());
    };
    Ok(root
        .get("projects")
        .and_then(Value::as_object)
        .map(|projects| {
            projects
                .iter()
                .filter(|(_, entry)| entry.get(ACCEPTED_KEY) == Some(&Value::Bool(true)))
                .map(|(key, _)| key.clone())
                .collect()
        })
        .unwrap_or_default())
}

/// The file's text with trust withdrawn from `revoke` (the flag set back to `false`; the rest
/// of each project's entry, which Claude Code keeps there too, stays) and given to `keep`.
/// `None` when nothing changes.
pub(super) fn confined(
    file: &Path,
    text: Option<&str>,
    revoke: &[String],
    keep: &str,
) -> Result<Option<String>, TrustError> {
    let mut root = parse(file, text)?.unwrap_or_else(|| Value::Object(Map::new()));
    let mut changed = false;
    if let Some(projects) = root.get_mut("projects").and_then(Value::as_object_mut) {
        for key in revoke {
            if let Some(entry) = projects.get_mut(key).and_then(Value::as_object_mut)
                && entry.get(ACCEPTED_KEY) == Some(&Value::Bool(true))
            {
                entry.insert(ACCEPTED_KEY.to_owned(), Value::Bool(false));
                changed = true;
            }
        }
    }
    let mut text_now = text.map(str::to_owned);
    if changed {
        let mut out = serde_json::to_string_pretty(&root).expect("a JSON value always serializes");
        if text.is_none_or(|t| t.ends_with('\n')) {
            out.push('\n');
        }
        text_now = Some(out);
    }
    match with_project_trusted(file, text_now.as_deref(), keep)? {
        Some(seeded) => Ok(Some(seeded)),
        None if changed => Ok(text_now),
        None => Ok(None),
    }
}

/// The file's JSON, `None` when it is missing or empty.
fn parse(file: &Path, text: Option<&str>) -> Result<Option<Value>, TrustError> {
    match text {
        Some(text) if !text.trim().is_empty() => serde_json::from_str::<Value>(text)
            .map(Some)
            .map_err(|source| TrustError::InvalidJson {
                file: file.to_path_buf(),
                line: source.line(),
                column: source.column(),
                source,
            }),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::atomic::folder_names;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    use std::sync::{Arc, Barrier};

    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a scratch folder is needed");
        let file = dir.path().join(".claude.json");
        (dir, file)
    }

    fn read_json(file: &Path) -> Value {
        let text = fs::read_to_string(file).expect("config file exists");
        serde_json::from_str(&text).expect("config file is JSON")
    }

    /// A file as Claude Code writes it: two-space indentation, keys in no sorted order.
    const ORIGINAL: &str = r#"{
  "numStartups": 12,
  "zeta": {
    "b": 1,
    "a": [
      1.5,
      "two",
      null
    ]
  },
  "projects": {
    "/srv/b": {
      "allowedTools": [],
      "hasTrustDialogAccepted": false,
      "lastCost": 0.25
    },
    "/srv/a": {
      "history": []
    }
  },
  "alpha": "ünïcode / slash",
  "oauthAccount": {
    "emailAddress": "me@example.com"
  }
}
"#;

    #[test]
    fn config_file_location() {
        let home = Path::new("/home/me");
        assert_eq!(
            claude_config_file(home, None),
            PathBuf::from("/home/me/.claude.json")
        );
        assert_eq!(
            claude_config_file(home, Some(Path::new("/cfg/claude"))),
            PathBuf::from("/cfg/claude/.claude.json")
        );
        assert_eq!(
            claude_config_file(home, Some(Path::new(""))),
            PathBuf::from("/home/me/.claude.json")
        );
    }

    #[test]
    fn missing_file_is_created_private_with_just_the_entry() {
        let (_dir, file) = scratch();
        let outcome = seed_claude_trust(&file, Path::new("/srv/repo")).expect("seeds");
        assert_eq!(outcome, SeedOutcome::Seeded);
        assert_eq!(
            read_json(&file),
            serde_json::json!({"projects": {"/srv/repo": {"hasTrustDialogAccepted": true}}})
        );
        assert_eq!(fs::metadata(&file).expect("exists").mode() & 0o777, 0o600);
    }

    #[test]
    fn existing_project_flag_flipped_everything_else_byte_identical() {
        let (_dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        let outcome = seed_claude_trust(&file, Path::new("/srv/b")).expect("seeds");
        assert_eq!(outcome, SeedOutcome::Seeded);
        let expected = ORIGINAL.replace(
            "\"hasTrustDialogAccepted\": false",
            "\"hasTrustDialogAccepted\": true",
        );
        assert_eq!(fs::read_to_string(&file).expect("exists"), expected);
    }

    #[test]
    fn new_project_is_appended_and_other_projects_untouched() {
        let (_dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        seed_claude_trust(&file, Path::new("/srv/new")).expect("seeds");
        let expected = ORIGINAL.replace(
            "      \"history\": []\n    }\n  },",
            "      \"history\": []\n    },\n    \"/srv/new\": {\n      \"hasTrustDialogAccepted\": true\n    }\n  },",
        );
        assert_eq!(fs::read_to_string(&file).expect("exists"), expected);
        // Key order at every level is the original's.
        let json = read_json(&file);
        let top: Vec<&str> = json
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            top,
            ["numStartups", "zeta", "projects", "alpha", "oauthAccount"]
        );
        let projects: Vec<&str> = json["projects"]
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(projects, ["/srv/b", "/srv/a", "/srv/new"]);
    }

    #[test]
    fn second_call_is_already_trusted_and_does_not_rewrite() {
        let (_dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        let project = Path::new("/srv/a");
        assert_eq!(
            seed_claude_trust(&file, project).expect("seeds"),
            SeedOutcome::Seeded
        );
        let before = fs::read_to_string(&file).expect("exists");
        let inode = fs::metadata(&file).expect("exists").ino();
        assert_eq!(
            seed_claude_trust(&file, project).expect("seeds"),
            SeedOutcome::AlreadyTrusted
        );
        assert_eq!(fs::read_to_string(&file).expect("exists"), before);
        assert_eq!(fs::metadata(&file).expect("exists").ino(), inode);
    }

    #[test]
    fn invalid_json_is_an_error_naming_the_file_and_left_untouched() {
        let (dir, file) = scratch();
        let broken = "{\n  \"projects\": {\n    \"/srv/a\": [1 2]\n  }\n}\n";
        fs::write(&file, broken).expect("scratch folder is writable");
        let error = seed_claude_trust(&file, Path::new("/srv/a")).expect_err("invalid JSON");
        assert!(
            matches!(&error, TrustError::InvalidJson { file: f, line: 3, .. } if *f == file),
            "{error:?}"
        );
        assert!(error.to_string().contains(&file.display().to_string()));
        assert_eq!(fs::read_to_string(&file).expect("exists"), broken);
        assert_eq!(
            folder_names(dir.path()),
            [".claude.json", ".claude.json.clawpool.lock"]
        );
    }

    #[test]
    fn unexpected_shapes_are_errors_and_left_untouched() {
        let (_dir, file) = scratch();
        for text in [
            "[1, 2]\n",
            "{\"projects\": \"nope\"}\n",
            "{\"projects\": {\"/srv/a\": 3}}\n",
        ] {
            fs::write(&file, text).expect("scratch folder is writable");
            let error = seed_claude_trust(&file, Path::new("/srv/a")).expect_err("bad shape");
            assert!(
                matches!(error, TrustError::UnexpectedShape { .. }),
                "{error:?}"
            );
            assert_eq!(fs::read_to_string(&file).expect("exists"), text);
        }
    }

    #[test]
    fn empty_file_is_treated_as_empty_config() {
        let (_dir, file) = scratch();
        fs::write(&file, "").expect("scratch folder is writable");
        assert_eq!(
            seed_claude_trust(&file, Path::new("/srv/a")).expect("seeds"),
            SeedOutcome::Seeded
        );
        assert_eq!(read_json(&file)["projects"]["/srv/a"][ACCEPTED_KEY], true);
    }

    #[test]
    fn permissions_are_kept() {
        let (_dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).expect("own file");
        seed_claude_trust(&file, Path::new("/srv/new")).expect("seeds");
        assert_eq!(fs::metadata(&file).expect("exists").mode() & 0o777, 0o640);
    }

    #[test]
    fn symlinked_config_file_stays_a_symlink() {
        let (dir, file) = scratch();
        let real = dir.path().join("dotfiles-claude.json");
        fs::write(&real, ORIGINAL).expect("scratch folder is writable");
        symlink(&real, &file).expect("symlink");
        seed_claude_trust(&file, Path::new("/srv/new")).expect("seeds");
        assert!(
            fs::symlink_metadata(&file)
                .expect("exists")
                .file_type()
                .is_symlink()
        );
        assert_eq!(read_json(&real)["projects"]["/srv/new"][ACCEPTED_KEY], true);

        let dangling = dir.path().join("dangling.json");
        symlink(dir.path().join("nowhere.json"), &dangling).expect("symlink");
        let error = seed_claude_trust(&dangling, Path::new("/srv/a")).expect_err("dangling");
        assert!(
            matches!(error, TrustError::DanglingSymlink { .. }),
            "{error:?}"
        );
    }

    #[test]
    fn relative_project_path_is_rejected() {
        let (_dir, file) = scratch();
        let error = seed_claude_trust(&file, Path::new("srv/a")).expect_err("relative");
        assert!(matches!(error, TrustError::ProjectNotAbsolute { .. }));
        assert!(!file.exists());
    }

    #[test]
    fn concurrent_seeds_all_land_and_leave_no_temp_files() {
        let (dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        let threads = 16;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let barrier = Arc::clone(&barrier);
                let file = file.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let project = PathBuf::from(format!("/srv/lane-{i}"));
                    seed_claude_trust(&file, &project)
                })
            })
            .collect();
        for handle in handles {
            let outcome = handle.join().expect("seeding thread does not panic");
            assert_eq!(outcome.expect("seeds"), SeedOutcome::Seeded);
        }
        let json = read_json(&file);
        for i in 0..threads {
            assert_eq!(
                json["projects"][format!("/srv/lane-{i}")][ACCEPTED_KEY],
                true
            );
        }
        // The original content is still there too.
        assert_eq!(json["oauthAccount"]["emailAddress"], "me@example.com");
        assert_eq!(json["projects"]["/srv/b"]["lastCost"], 0.25);
        assert_eq!(
            folder_names(dir.path()),
            [".claude.json", ".claude.json.clawpool.lock"]
        );
    }
}
