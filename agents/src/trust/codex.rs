//! Pre-seeding Codex's trust store: `[projects."<path>"] trust_level = "trusted"` in
//! `~/.codex/config.toml` (or `$CODEX_HOME/config.toml`).
//!
//! People edit this file by hand, so the edit goes through `toml_edit`: comments, blank lines,
//! key order, quoting and every other table stay as they were, and only the one project's
//! table (or its `trust_level` value) changes.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, TomlError, Value};

use super::{SeedOutcome, TrustError, atomic, project_key};

/// The value Codex reads as "trusted" (it writes `"untrusted"` when a person declines).
const TRUSTED: &str = "trusted";

/// The Codex config file: `$CODEX_HOME/config.toml` when that variable is set (and not
/// empty), else `<home>/.codex/config.toml`.
pub fn codex_config_file(home: &Path, env_codex_home: Option<&Path>) -> PathBuf {
    match env_codex_home {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join("config.toml"),
        _ => home.join(".codex").join("config.toml"),
    }
}

/// Sets `trust_level = "trusted"` for `project` (an absolute path, used exactly as given, so
/// pass the lane's canonical path) in the Codex config file `config_file`.
///
/// A missing file (and folder, mode 0700) is created. A file that is not valid TOML is an
/// error naming the file and line, and is left untouched; so is one whose `projects` is not a
/// table. An existing entry with another trust level (e.g. `"untrusted"`) is changed, keeping
/// its comment. The edit is locked and atomic (see `docs/trust.md`); when the project is
/// already trusted the file is not rewritten and [`SeedOutcome::AlreadyTrusted`] is returned.
pub fn seed_codex_trust(config_file: &Path, project: &Path) -> Result<SeedOutcome, TrustError> {
    let key = project_key(project)?;
    let written = atomic::edit_locked(config_file, |existing| {
        with_project_trusted(config_file, existing.unwrap_or(""), key)
    })?;
    Ok(if written {
        SeedOutcome::Seeded
    } else {
        SeedOutcome::AlreadyTrusted
    })
}

/// The new file contents with `key` trusted, or `None` if it already is.
fn with_project_trusted(file: &Path, text: &str, key: &str) -> Result<Option<String>, TrustError> {
    let shape = |what: String| TrustError::UnexpectedShape {
        file: file.to_path_buf(),
        what,
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|error: TomlError| invalid_toml(file, text, &error))?;

    let root = doc.as_table_mut();
    if !root.contains_key("projects") {
        // Implicit: no bare `[projects]` header, just `[projects."<path>"]`, as Codex writes.
        let mut projects = Table::new();
        projects.set_implicit(true);
        root.insert("projects", Item::Table(projects));
    }
    let projects = root
        .get_mut("projects")
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| shape("`projects` is not a table".to_owned()))?;

    let Some(entry) = projects.get_mut(key) else {
        let mut entry = Table::new();
        entry.insert("trust_level", toml_edit::value(TRUSTED));
        projects.insert(key, Item::Table(entry));
        return Ok(Some(doc.to_string()));
    };
    let entry = entry
        .as_table_like_mut()
        .ok_or_else(|| shape(format!("`projects.{key:?}` is not a table")))?;
    match entry.get_mut("trust_level") {
        None => {
            entry.insert("trust_level", toml_edit::value(TRUSTED));
        }
        Some(Item::Value(level)) => {
            if level.as_str() == Some(TRUSTED) {
                return Ok(None);
            }
            // Keep the spacing and any trailing comment of the old value.
            let decor = level.decor().clone();
            *level = Value::from(TRUSTED);
            *level.decor_mut() = decor;
        }
        Some(_) => {
            return Err(shape(format!(
                "`projects.{key:?}.trust_level` is not a value"
            )));
        }
    }
    Ok(Some(doc.to_string()))
}

/// The projects the file `text` of `file` marks as trusted.
pub(super) fn trusted_projects(
    file: &Path,
    text: &str,
) -> Result<std::collections::BTreeSet<String>, TrustError> {
    let doc: DocumentMut = text
        .parse()
        .map_err(|error: TomlError| invalid_toml(file, text, &error))?;
    Ok(doc
        .get("projects")
        .and_then(Item::as_table_like)
        .map(|projects| {
            projects
                .iter()
                .filter(|(_, entry)| {
                    entry
                        .as_table_like()
                        .and_then(|t| t.get("trust_level"))
                        .and_then(Item::as_str)
                        == Some(TRUSTED)
                })
                .map(|(key, _)| key.to_owned())
                .collect()
        })
        .unwrap_or_default())
}

/// The file's text with trust withdrawn from `revoke` (their `trust_level` removed, and a
/// project table left empty by that removed too, so the file is as it was before the agent
/// wrote the entry) and given to `keep`. `None` when nothing changes.
pub(super) fn confined(
    file: &Path,
    text: &str,
    revoke: &[String],
    keep: &str,
) -> Result<Option<String>, TrustError> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|error: TomlError| invalid_toml(file, text, &error))?;
    let mut changed = false;
    if let Some(projects) = doc.get_mut("projects").and_then(Item::as_table_like_mut) {
        for key in revoke {
            let Some(entry) = projects.get_mut(key).and_then(Item::as_table_like_mut) else {
                continue;
            };
            if entry.get("trust_level").and_then(Item::as_str) != Some(TRUSTED) {
                continue;
            }
            entry.remove("trust_level");
            changed = true;
            if entry.is_empty() {
                projects.remove(key);
            }
        }
    }
    let text_now = if changed {
        doc.to_string()
    } else {
        text.to_owned()
    };
    match with_project_trusted(file, &text_now, keep)? {
        Some(seeded) => Ok(Some(seeded)),
        None if changed => Ok(Some(text_now)),
        None => Ok(None),
    }
}

/// A parse error with the 1-based line and column of where it starts.
fn invalid_toml(file: &Path, text: &str, error: &TomlError) -> TrustError {
    let offset = error.span().map_or(0, |span| span.start).min(text.len());
    // Spans are byte offsets; step back to a char boundary before slicing.
    let offset = (0..=offset)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |line_text| line_text.chars().count())
        + 1;
    TrustError::InvalidToml {
        file: file.to_path_buf(),
        line,
        column,
        message: error.message().trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::atomic::folder_names;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::sync::{Arc, Barrier};

    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a scratch folder is needed");
        let file = dir.path().join("config.toml");
        (dir, file)
    }

    fn trust_level(file: &Path, project: &str) -> Option<String> {
        let text = fs::read_to_string(file).expect("config file exists");
        let doc: DocumentMut = text.parse().expect("config file is TOML");
        doc.get("projects")?
            .get(project)?
            .get("trust_level")?
            .as_str()
            .map(str::to_owned)
    }

    /// A hand-edited config: comments, odd spacing, literal strings, other tables.
    const ORIGINAL: &str = r#"# my codex settings
model = "o3"   # the good one
approval_policy = 'on-request'

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server"]  # keep me

# trusted by hand
[projects."/srv/other"]
trust_level = "trusted"

[profiles.fast]
model = "o4-mini"
"#;

    #[test]
    fn config_file_location() {
        let home = Path::new("/home/me");
        assert_eq!(
            codex_config_file(home, None),
            PathBuf::from("/home/me/.codex/config.toml")
        );
        assert_eq!(
            codex_config_file(home, Some(Path::new("/cfg/codex"))),
            PathBuf::from("/cfg/codex/config.toml")
        );
        assert_eq!(
            codex_config_file(home, Some(Path::new(""))),
            PathBuf::from("/home/me/.codex/config.toml")
        );
    }

    #[test]
    fn missing_file_and_folder_are_created() {
        let dir = tempfile::tempdir().expect("a scratch folder is needed");
        let file = codex_config_file(dir.path(), None);
        let outcome = seed_codex_trust(&file, Path::new("/srv/repo")).expect("seeds");
        assert_eq!(outcome, SeedOutcome::Seeded);
        assert_eq!(
            fs::read_to_string(&file).expect("created"),
            "[projects.\"/srv/repo\"]\ntrust_level = \"trusted\"\n"
        );
        assert_eq!(fs::metadata(&file).expect("exists").mode() & 0o777, 0o600);
    }

    #[test]
    fn everything_else_is_byte_identical_except_the_added_table() {
        let (_dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        seed_codex_trust(&file, Path::new("/srv/new")).expect("seeds");
        let text = fs::read_to_string(&file).expect("exists");
        let added = "\n[projects.\"/srv/new\"]\ntrust_level = \"trusted\"\n";
        assert!(text.contains(added), "{text}");
        assert_eq!(text.replacen(added, "", 1), ORIGINAL, "{text}");
        assert_eq!(trust_level(&file, "/srv/new").as_deref(), Some("trusted"));
    }

    #[test]
    fn untrusted_project_is_updated_in_place() {
        let (_dir, file) = scratch();
        let original = ORIGINAL.replace(
            "[profiles.fast]",
            "[projects.\"/srv/mine\"]\ntrust_level   =  \"untrusted\"  # said no once\nnote = 1\n\n[profiles.fast]",
        );
        fs::write(&file, &original).expect("scratch folder is writable");
        let outcome = seed_codex_trust(&file, Path::new("/srv/mine")).expect("seeds");
        assert_eq!(outcome, SeedOutcome::Seeded);
        assert_eq!(
            fs::read_to_string(&file).expect("exists"),
            original.replace("\"untrusted\"", "\"trusted\"")
        );
    }

    #[test]
    fn existing_table_without_trust_level_gets_one() {
        let (_dir, file) = scratch();
        fs::write(&file, "[projects.\"/srv/a\"]\nnote = 1\n").expect("writable");
        seed_codex_trust(&file, Path::new("/srv/a")).expect("seeds");
        assert_eq!(
            fs::read_to_string(&file).expect("exists"),
            "[projects.\"/srv/a\"]\nnote = 1\ntrust_level = \"trusted\"\n"
        );
    }

    #[test]
    fn inline_and_dotted_forms_are_understood() {
        let (_dir, file) = scratch();
        fs::write(
            &file,
            "projects = { \"/srv/a\" = { trust_level = \"untrusted\" } }\n",
        )
        .expect("writable");
        seed_codex_trust(&file, Path::new("/srv/a")).expect("seeds");
        assert_eq!(
            fs::read_to_string(&file).expect("exists"),
            "projects = { \"/srv/a\" = { trust_level = \"trusted\" } }\n"
        );
        fs::write(&file, "projects.\"/srv/b\".trust_level = \"trusted\"\n").expect("writable");
        assert_eq!(
            seed_codex_trust(&file, Path::new("/srv/b")).expect("seeds"),
            SeedOutcome::AlreadyTrusted
        );
    }

    #[test]
    fn second_call_is_already_trusted_and_does_not_rewrite() {
        let (_dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        assert_eq!(
            seed_codex_trust(&file, Path::new("/srv/other")).expect("seeds"),
            SeedOutcome::AlreadyTrusted
        );
        assert_eq!(fs::read_to_string(&file).expect("exists"), ORIGINAL);
        assert_eq!(
            seed_codex_trust(&file, Path::new("/srv/new")).expect("seeds"),
            SeedOutcome::Seeded
        );
        let inode = fs::metadata(&file).expect("exists").ino();
        assert_eq!(
            seed_codex_trust(&file, Path::new("/srv/new")).expect("seeds"),
            SeedOutcome::AlreadyTrusted
        );
        assert_eq!(fs::metadata(&file).expect("exists").ino(), inode);
    }

    #[test]
    fn invalid_toml_is_an_error_with_file_and_line_and_left_untouched() {
        let (dir, file) = scratch();
        let broken = "model = \"o3\"\n\n[projects.\"/srv/a\"\ntrust_level = \"trusted\"\n";
        fs::write(&file, broken).expect("scratch folder is writable");
        let error = seed_codex_trust(&file, Path::new("/srv/a")).expect_err("invalid TOML");
        assert!(
            matches!(&error, TrustError::InvalidToml { file: f, line: 3, .. } if *f == file),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains(&file.display().to_string()), "{message}");
        assert!(message.contains("line 3"), "{message}");
        assert_eq!(fs::read_to_string(&file).expect("exists"), broken);
        assert_eq!(
            folder_names(dir.path()),
            ["config.toml", "config.toml.clawpool.lock"]
        );
    }

    #[test]
    fn unexpected_shapes_are_errors_and_left_untouched() {
        let (_dir, file) = scratch();
        for text in [
            "projects = \"nope\"\n",
            "[[projects]]\nx = 1\n",
            "[projects]\n\"/srv/a\" = 3\n",
            "[projects.\"/srv/a\".trust_level]\nx = 1\n",
        ] {
            fs::write(&file, text).expect("scratch folder is writable");
            let error = seed_codex_trust(&file, Path::new("/srv/a")).expect_err("bad shape");
            assert!(
                matches!(error, TrustError::UnexpectedShape { .. }),
                "{error:?}"
            );
            assert_eq!(fs::read_to_string(&file).expect("exists"), text);
        }
    }

    #[test]
    fn awkward_paths_are_quoted_correctly() {
        let (_dir, file) = scratch();
        let project = "/srv/we\"ird \\ päth";
        seed_codex_trust(&file, Path::new(project)).expect("seeds");
        assert_eq!(trust_level(&file, project).as_deref(), Some("trusted"));
    }

    #[test]
    fn permissions_are_kept() {
        let (_dir, file) = scratch();
        fs::write(&file, ORIGINAL).expect("scratch folder is writable");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).expect("own file");
        seed_codex_trust(&file, Path::new("/srv/new")).expect("seeds");
        assert_eq!(fs::metadata(&file).expect("exists").mode() & 0o777, 0o644);
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
                    seed_codex_trust(&file, &PathBuf::from(format!("/srv/lane-{i}")))
                })
            })
            .collect();
        for handle in handles {
            let outcome = handle.join().expect("seeding thread does not panic");
            assert_eq!(outcome.expect("seeds"), SeedOutcome::Seeded);
        }
        for i in 0..threads {
            let project = format!("/srv/lane-{i}");
            assert_eq!(trust_level(&file, &project).as_deref(), Some("trusted"));
        }
        let text = fs::read_to_string(&file).expect("exists");
        assert!(text.starts_with("# my codex settings\nmodel = \"o3\"   # the good one\n"));
        assert_eq!(
            folder_names(dir.path()),
            ["config.toml", "config.toml.clawpool.lock"]
        );
    }
}
