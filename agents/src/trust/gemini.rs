//! Pre-seeding gemini-cli's trust store: `{"<path>": "TRUST_FOLDER"}` in its trusted-folders
//! file (`~/.gemini/trustedFolders.json`; `$GEMINI_CLI_HOME/.gemini/…` or
//! `$GEMINI_CLI_TRUSTED_FOLDERS_PATH` when those are set), as gemini-cli 0.61.0 itself writes it
//! when "1. Trust folder" is chosen. Qwen Code 0.24.4, a gemini-cli fork, keeps the same file
//! in the same format under `~/.qwen/` (`$QWEN_HOME/…`, or `$QWEN_CODE_TRUSTED_FOLDERS_PATH`).
//!
//! The file is one flat JSON object from folder path to `TRUST_FOLDER`, `TRUST_PARENT` (the
//! folder's parent) or `DO_NOT_TRUST`, the longest matching path deciding. Every other entry
//! and the key order are kept; it is written back the way gemini-cli writes it
//! (`JSON.stringify(config, null, 2)`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{SeedOutcome, TrustError, atomic, project_key};

/// The level gemini-cli records for "1. Trust folder": that folder and everything in it.
const TRUST_FOLDER: &str = "TRUST_FOLDER";
/// The level that trusts the entry's parent folder (and so the entry too).
const TRUST_PARENT: &str = "TRUST_PARENT";

/// The trusted-folders file as gemini-cli finds it: `GEMINI_CLI_TRUSTED_FOLDERS_PATH` when set
/// (and not empty), else `<GEMINI_CLI_HOME or home>/.gemini/trustedFolders.json`.
pub fn gemini_trusted_folders_file(
    home: &Path,
    env_trusted_folders_path: Option<&Path>,
    env_gemini_cli_home: Option<&Path>,
) -> PathBuf {
    match (env_trusted_folders_path, env_gemini_cli_home) {
        (Some(file), _) if !file.as_os_str().is_empty() => file.to_path_buf(),
        (_, Some(dir)) if !dir.as_os_str().is_empty() => dir.join(".gemini/trustedFolders.json"),
        _ => home.join(".gemini/trustedFolders.json"),
    }
}

/// Qwen Code's trusted-folders file: `QWEN_CODE_TRUSTED_FOLDERS_PATH` when set (and not empty),
/// else `<QWEN_HOME or home/.qwen>/trustedFolders.json`.
pub fn qwen_trusted_folders_file(
    home: &Path,
    env_trusted_folders_path: Option<&Path>,
    env_qwen_home: Option<&Path>,
) -> PathBuf {
    match (env_trusted_folders_path, env_qwen_home) {
        (Some(file), _) if !file.as_os_str().is_empty() => file.to_path_buf(),
        (_, Some(dir)) if !dir.as_os_str().is_empty() => dir.join("trustedFolders.json"),
        _ => home.join(".qwen/trustedFolders.json"),
    }
}

/// Marks `project` (an absolute path, used exactly as given, so pass the lane's canonical
/// path) as `TRUST_FOLDER` in the trusted-folders file `file`.
///
/// A missing file (and `.gemini` folder) is created. An entry for that exact path that already
/// trusts it (`TRUST_FOLDER`, or `TRUST_PARENT`, which trusts more) is left alone and
/// [`SeedOutcome::AlreadyTrusted`] returned; a `DO_NOT_TRUST` there is changed. A file that is
/// not a JSON object (gemini-cli also accepts comments in it; clawpool does not edit such a
/// file) is an error and is left untouched. Locked and atomic (see `docs/trust.md`).
pub fn seed_gemini_trust(file: &Path, project: &Path) -> Result<SeedOutcome, TrustError> {
    let key = project_key(project)?;
    let written = atomic::edit_locked(file, |existing| with_folder_trusted(file, existing, key))?;
    Ok(if written {
        SeedOutcome::Seeded
    } else {
        SeedOutcome::AlreadyTrusted
    })
}

/// The new file contents with `key` trusted, or `None` if it already is.
fn with_folder_trusted(
    file: &Path,
    existing: Option<&str>,
    key: &str,
) -> Result<Option<String>, TrustError> {
    let mut folders = parse(file, existing)?.unwrap_or_default();
    if matches!(
        folders.get(key).and_then(Value::as_str),
        Some(TRUST_FOLDER | TRUST_PARENT)
    ) {
        return Ok(None);
    }
    folders.insert(key.to_owned(), Value::String(TRUST_FOLDER.to_owned()));
    Ok(Some(render(&folders)))
}

/// The folders the file `text` of `file` trusts by an entry of their own (an empty or missing
/// file: none).
pub(super) fn trusted_projects(
    file: &Path,
    text: Option<&str>,
) -> Result<BTreeSet<String>, TrustError> {
    Ok(parse(file, text)?
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, level)| matches!(level.as_str(), Some(TRUST_FOLDER | TRUST_PARENT)))
        .map(|(key, _)| key)
        .collect())
}

/// The file's text with the entries of `revoke` removed (a `DO_NOT_TRUST` instead would make
/// gemini-cli start untrusted without asking) and `keep` trusted. `None` when nothing changes.
pub(super) fn confined(
    file: &Path,
    text: Option<&str>,
    revoke: &[String],
    keep: &str,
) -> Result<Option<String>, TrustError> {
    let mut folders = parse(file, text)?.unwrap_or_default();
    let before = folders.len();
    folders.retain(|key, _| !revoke.contains(key));
    let changed = folders.len() != before;
    let text_now = if changed {
        Some(render(&folders))
    } else {
        text.map(str::to_owned)
    };
    match with_folder_trusted(file, text_now.as_deref(), keep)? {
        Some(seeded) => Ok(Some(seeded)),
        None if changed => Ok(text_now),
        None => Ok(None),
    }
}

fn render(folders: &Map<String, Value>) -> String {
    serde_json::to_string_pretty(folders).expect("a JSON object always serializes")
}

/// The file's object, `None` when it is missing or empty.
fn parse(file: &Path, text: Option<&str>) -> Result<Option<Map<String, Value>>, TrustError> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(folders)) => Ok(Some(folders)),
        Ok(_) => Err(TrustError::UnexpectedShape {
            file: file.to_path_buf(),
            what: "the top level is not a JSON object".into(),
        }),
        Err(source) => Err(TrustError::InvalidJson {
            file: file.to_path_buf(),
            line: source.line(),
            column: source.column(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a scratch folder is needed");
        let file = dir.path().join(".gemini/trustedFolders.json");
        (dir, file)
    }

    #[test]
    fn the_file_is_found_where_gemini_cli_looks() {
        let home = Path::new("/home/me");
        assert_eq!(
            gemini_trusted_folders_file(home, None, None),
            Path::new("/home/me/.gemini/trustedFolders.json")
        );
        assert_eq!(
            gemini_trusted_folders_file(home, None, Some(Path::new("/g"))),
            Path::new("/g/.gemini/trustedFolders.json")
        );
        assert_eq!(
            gemini_trusted_folders_file(home, Some(Path::new("/t.json")), Some(Path::new("/g"))),
            Path::new("/t.json")
        );
        assert_eq!(
            gemini_trusted_folders_file(home, Some(Path::new("")), None),
            Path::new("/home/me/.gemini/trustedFolders.json")
        );
    }

    #[test]
    fn qwen_codes_file_is_found_where_qwen_code_looks() {
        let home = Path::new("/home/me");
        assert_eq!(
            qwen_trusted_folders_file(home, None, None),
            Path::new("/home/me/.qwen/trustedFolders.json")
        );
        assert_eq!(
            qwen_trusted_folders_file(home, None, Some(Path::new("/q"))),
            Path::new("/q/trustedFolders.json")
        );
        assert_eq!(
            qwen_trusted_folders_file(home, Some(Path::new("/t.json")), Some(Path::new("/q"))),
            Path::new("/t.json")
        );
        assert_eq!(
            qwen_trusted_folders_file(home, Some(Path::new("")), Some(Path::new(""))),
            Path::new("/home/me/.qwen/trustedFolders.json")
        );
    }

    #[test]
    fn a_missing_file_is_created_with_only_the_lane() {
        let (_dir, file) = scratch();
        let outcome = seed_gemini_trust(&file, Path::new("/srv/lanes/a")).expect("seeded");
        assert_eq!(outcome, SeedOutcome::Seeded);
        assert_eq!(
            fs::read_to_string(&file).expect("written"),
            "{\n  \"/srv/lanes/a\": \"TRUST_FOLDER\"\n}"
        );
    }

    #[test]
    fn other_entries_and_their_order_are_kept_and_a_distrust_of_the_lane_is_changed() {
        let (_dir, file) = scratch();
        fs::create_dir_all(file.parent().expect("folder")).expect("folder");
        fs::write(
            &file,
            "{\n  \"/z\": \"DO_NOT_TRUST\",\n  \"/srv/lanes/a\": \"DO_NOT_TRUST\",\n  \"/b\": \"TRUST_PARENT\"\n}",
        )
        .expect("written");
        seed_gemini_trust(&file, Path::new("/srv/lanes/a")).expect("seeded");
        assert_eq!(
            fs::read_to_string(&file).expect("written"),
            "{\n  \"/z\": \"DO_NOT_TRUST\",\n  \"/srv/lanes/a\": \"TRUST_FOLDER\",\n  \"/b\": \"TRUST_PARENT\"\n}"
        );
    }

    #[test]
    fn a_lane_already_trusted_is_not_rewritten_nor_its_parent_trust_narrowed() {
        let (_dir, file) = scratch();
        fs::create_dir_all(file.parent().expect("folder")).expect("folder");
        for level in [TRUST_FOLDER, TRUST_PARENT] {
            let text = format!("{{\"/srv/lanes/a\": \"{level}\"}}");
            fs::write(&file, &text).expect("written");
            let outcome = seed_gemini_trust(&file, Path::new("/srv/lanes/a")).expect("read");
            assert_eq!(outcome, SeedOutcome::AlreadyTrusted);
            assert_eq!(fs::read_to_string(&file).expect("kept"), text);
        }
    }

    #[test]
    fn a_file_that_is_not_a_json_object_is_left_untouched() {
        let (_dir, file) = scratch();
        fs::create_dir_all(file.parent().expect("folder")).expect("folder");
        for text in ["// a comment\n{}", "[]"] {
            fs::write(&file, text).expect("written");
            let err = seed_gemini_trust(&file, Path::new("/srv/lanes/a")).expect_err("refused");
            assert!(err.to_string().contains("trustedFolders.json"), "{err}");
            assert_eq!(fs::read_to_string(&file).expect("kept"), text);
        }
    }

    #[test]
    fn a_relative_project_is_refused() {
        let (_dir, file) = scratch();
        assert!(seed_gemini_trust(&file, Path::new("lanes/a")).is_err());
        assert!(!file.exists());
    }

    #[test]
    fn confinement_removes_what_was_trusted_since_and_trusts_the_lane() {
        let text = "{\"/mine\": \"TRUST_FOLDER\", \"/srv\": \"TRUST_PARENT\"}";
        let out = confined(Path::new("f"), Some(text), &["/srv".to_owned()], "/srv/a")
            .expect("parsed")
            .expect("changed");
        assert_eq!(
            out,
            "{\n  \"/mine\": \"TRUST_FOLDER\",\n  \"/srv/a\": \"TRUST_FOLDER\"\n}"
        );
        assert_eq!(
            trusted_projects(Path::new("f"), Some(&out)).expect("parsed"),
            BTreeSet::from(["/mine".to_owned(), "/srv/a".to_owned()])
        );
    }
}
