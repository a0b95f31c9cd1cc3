//! Safe edits of an agent's config file: a locked read-modify-write and an atomic replace.
//!
//! These files (`~/.claude.json`, `~/.codex/config.toml`) hold a person's settings and, for
//! Claude Code, their account state. An edit must therefore never lose what is in them:
//!
//! - An exclusive lock on a sibling `<file>.clawpool.lock` is held from before the read until
//!   after the rename, so two clawpool processes (or lanes) seeding at once serialize instead
//!   of one overwriting the other's entry. The lock file is left in place: removing it would
//!   race with a process that has just opened it.
//! - The new contents go to a unique temporary file in the same folder (same filesystem, so
//!   the rename is atomic), are fsynced, get the original's permissions and owner, and are
//!   renamed over the file; then the folder is fsynced so the rename itself survives a crash.
//!   Readers see the old file or the new one, never half of one. On any error the temporary
//!   file is removed and the original is untouched.
//! - A config file that is a symlink (dotfile managers do this) is edited where it points, so
//!   the link survives.

use std::fs::{self, File, Metadata, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::TrustError;

/// Mode for files and folders clawpool creates: these files can hold credentials.
const NEW_FILE_MODE: u32 = 0o600;
const NEW_DIR_MODE: u32 = 0o700;

/// Suffix of the sibling lock file.
pub(crate) const LOCK_SUFFIX: &str = ".clawpool.lock";
/// Suffix of temporary files, so a leftover one (after a crash) is recognizable.
pub(crate) const TEMP_SUFFIX: &str = ".clawpool-tmp";

/// Runs `edit` on the current contents of `file` (`None` when it does not exist) under the
/// lock, and writes what it returns atomically; `Ok(None)` from `edit` leaves the file as it
/// is. Returns whether the file was written.
pub(crate) fn edit_locked(
    file: &Path,
    edit: impl FnOnce(Option<&str>) -> Result<Option<String>, TrustError>,
) -> Result<bool, TrustError> {
    let target = resolve_target(file)?;
    let dir = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Codex's folder may not exist yet on a fresh machine.
    fs::DirBuilder::new()
        .recursive(true)
        .mode(NEW_DIR_MODE)
        .create(&dir)
        .map_err(|source| TrustError::Write {
            file: dir.clone(),
            source,
        })?;

    let lock_file = with_suffix(&target, LOCK_SUFFIX);
    let lock_error = |source| TrustError::Lock {
        lock_file: lock_file.clone(),
        source,
    };
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(NEW_FILE_MODE)
        .open(&lock_file)
        .map_err(lock_error)?;
    // `File::lock` is flock(2) on Linux: it belongs to the open file description, so two
    // lanes' threads in one process exclude each other too, and the kernel drops it if the
    // process dies.
    lock.lock().map_err(lock_error)?;

    let existing = read_existing(&target, file)?;
    let written = match edit(existing.as_ref().map(|(text, _)| text.as_str()))? {
        Some(contents) => {
            let original = existing.as_ref().map(|(_, metadata)| metadata);
            write_atomic(&target, &dir, contents.as_bytes(), original)?;
            true
        }
        None => false,
    };
    // Unlocking happens when `lock` is closed; keep it explicit that this is after the rename.
    drop(lock);
    Ok(written)
}

/// Where to write: the file itself, or what it links to.
fn resolve_target(file: &Path) -> Result<PathBuf, TrustError> {
    if file.file_name().is_none() {
        return Err(TrustError::Write {
            file: file.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
        });
    }
    match fs::symlink_metadata(file) {
        Ok(metadata) if metadata.file_type().is_symlink() => {
            fs::canonicalize(file).map_err(|source| {
                if source.kind() == io::ErrorKind::NotFound {
                    TrustError::DanglingSymlink {
                        file: file.to_path_buf(),
                    }
                } else {
                    TrustError::Read {
                        file: file.to_path_buf(),
                        source,
                    }
                }
            })
        }
        Ok(_) => Ok(file.to_path_buf()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(file.to_path_buf()),
        Err(source) => Err(TrustError::Read {
            file: file.to_path_buf(),
            source,
        }),
    }
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The file's text and metadata, or `None` if it does not exist. Errors name `shown`, the
/// path the caller gave.
fn read_existing(target: &Path, shown: &Path) -> Result<Option<(String, Metadata)>, TrustError> {
    let read_error = |source| TrustError::Read {
        file: shown.to_path_buf(),
        source,
    };
    let mut handle = match File::open(target) {
        Ok(handle) => handle,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(read_error(error)),
    };
    let metadata = handle.metadata().map_err(read_error)?;
    let mut bytes = Vec::new();
    handle.read_to_end(&mut bytes).map_err(read_error)?;
    let text = String::from_utf8(bytes).map_err(|_| TrustError::NotUtf8 {
        file: shown.to_path_buf(),
    })?;
    Ok(Some((text, metadata)))
}

/// Replaces `target` with `contents` atomically, keeping `original`'s mode and owner (a new
/// file gets 0600).
fn write_atomic(
    target: &Path,
    dir: &Path,
    contents: &[u8],
    original: Option<&Metadata>,
) -> Result<(), TrustError> {
    let write_error = |source| TrustError::Write {
        file: target.to_path_buf(),
        source,
    };
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    // `NamedTempFile` creates with O_EXCL and mode 0600 and deletes itself when dropped, so
    // every early return below cleans up.
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(write_error)?;
    temp.write_all(contents).map_err(write_error)?;
    let mode = original.map_or(NEW_FILE_MODE, |metadata| metadata.mode() & 0o7777);
    temp.as_file()
        .set_permissions(Permissions::from_mode(mode))
        .map_err(write_error)?;
    if let Some(original) = original {
        keep_owner(temp.as_file(), original).map_err(write_error)?;
    }
    temp.as_file().sync_all().map_err(write_error)?;
    // On failure the returned error owns the temporary file; dropping it removes the file.
    temp.persist(target)
        .map_err(|error| write_error(error.error))?;
    File::open(dir)
        .and_then(|folder| folder.sync_all())
        .map_err(write_error)?;
    Ok(())
}

/// Gives the new file the original's owner, which differs when root edits a user's file.
/// Failing to keep the group is tolerated (a user may not own the original's group); failing
/// to keep the user is not, since the owner could no longer read a 0600 file.
fn keep_owner(file: &File, original: &Metadata) -> io::Result<()> {
    let current = file.metadata()?;
    if current.uid() == original.uid() && current.gid() == original.gid() {
        return Ok(());
    }
    match std::os::unix::fs::fchown(file, Some(original.uid()), Some(original.gid())) {
        Ok(()) => Ok(()),
        Err(_) if current.uid() == original.uid() => Ok(()),
        Err(error) => Err(error),
    }
}

/// Sorted names of the entries in a folder, for tests that check nothing is left behind.
#[cfg(test)]
pub(crate) fn folder_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("test folder exists")
        .map(|entry| {
            entry
                .expect("test folder entries are readable")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_file_and_folder_are_private() {
        let dir = tempfile::tempdir().expect("scratch folder");
        let file = dir.path().join("new/deeper/config");
        let written = edit_locked(&file, |existing| {
            assert_eq!(existing, None);
            Ok(Some("x".to_owned()))
        })
        .expect("edit succeeds");
        assert!(written);
        assert_eq!(fs::read_to_string(&file).expect("written"), "x");
        let mode = |p: &Path| fs::metadata(p).expect("exists").mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&dir.path().join("new/deeper")), 0o700);
    }

    #[test]
    fn failed_edit_leaves_file_and_no_temp_file() {
        let dir = tempfile::tempdir().expect("scratch folder");
        let file = dir.path().join("config");
        fs::write(&file, "original").expect("scratch folder is writable");
        let result = edit_locked(&file, |_| {
            Err(TrustError::UnexpectedShape {
                file: file.clone(),
                what: "test".to_owned(),
            })
        });
        assert!(result.is_err());
        assert_eq!(fs::read_to_string(&file).expect("still there"), "original");
        let names = folder_names(dir.path());
        assert_eq!(names, vec!["config", "config.clawpool.lock"]);
    }

    #[test]
    fn unchanged_edit_does_not_rewrite() {
        let dir = tempfile::tempdir().expect("scratch folder");
        let file = dir.path().join("config");
        fs::write(&file, "same").expect("scratch folder is writable");
        let inode = fs::metadata(&file).expect("exists").ino();
        let written = edit_locked(&file, |_| Ok(None)).expect("edit succeeds");
        assert!(!written);
        assert_eq!(fs::metadata(&file).expect("exists").ino(), inode);
    }

    #[test]
    fn write_into_unwritable_folder_fails_cleanly() {
        // Root ignores folder permissions, so this only proves something for other users.
        if running_as_root() {
            return;
        }
        let dir = tempfile::tempdir().expect("scratch folder");
        let sub = dir.path().join("ro");
        fs::create_dir(&sub).expect("scratch folder is writable");
        let file = sub.join("config");
        fs::write(&file, "original").expect("scratch folder is writable");
        // The lock file must exist beforehand, or creating it is what fails.
        fs::write(sub.join("config.clawpool.lock"), "").expect("scratch folder is writable");
        fs::set_permissions(&sub, Permissions::from_mode(0o500)).expect("own folder");
        let result = edit_locked(&file, |_| Ok(Some("new".to_owned())));
        fs::set_permissions(&sub, Permissions::from_mode(0o700)).expect("own folder");
        assert!(matches!(result, Err(TrustError::Write { .. })));
        assert_eq!(fs::read_to_string(&file).expect("still there"), "original");
        assert_eq!(folder_names(&sub), vec!["config", "config.clawpool.lock"]);
    }

    #[test]
    fn owner_is_kept_when_root_edits_a_users_file() {
        // Only root can give a file away, which is the case this protects.
        if !running_as_root() {
            return;
        }
        let dir = tempfile::tempdir().expect("scratch folder");
        let file = dir.path().join("config");
        fs::write(&file, "original").expect("scratch folder is writable");
        std::os::unix::fs::chown(&file, Some(4242), Some(4243)).expect("root can chown");
        edit_locked(&file, |_| Ok(Some("new".to_owned()))).expect("edit succeeds");
        let metadata = fs::metadata(&file).expect("exists");
        assert_eq!((metadata.uid(), metadata.gid()), (4242, 4243));
        assert_eq!(fs::read_to_string(&file).expect("exists"), "new");
    }

    fn running_as_root() -> bool {
        // The owner of a file we just created is our effective uid; no libc call needed.
        let file = tempfile::NamedTempFile::new().expect("scratch file");
        file.as_file().metadata().expect("exists").uid() == 0
    }
}
