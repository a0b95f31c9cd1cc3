//! Replacing one of clawpool's small files whole: written aside and renamed over it, so a
//! reader sees the old file or the new one, never half of one, and a writer killed mid-write
//! leaves the old one.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes`. The file aside is always a new one (`create_new`), so a link
/// someone put at its name — an agent, where the folder is in its worktree — is never written
/// through; the rename replaces a link at `path` itself, it does not follow it.
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_with_mode(path, bytes, 0o666)
}

/// [`replace_file`] for a secret: the new file is readable and writable by its owner only,
/// from its creation on, whatever the file it replaces allowed.
pub fn replace_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_with_mode(path, bytes, 0o600)
}

/// [`replace_file`], the file aside created with `mode` (less the umask).
fn replace_with_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let aside = aside(path);
    // One left by a dead thread that had this thread's id.
    let _ = std::fs::remove_file(&aside);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&aside)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&aside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

/// `.NAME.TID.tmp` beside `path`: named by the writing thread (its id is unique among the
/// system's live threads), so that two writers of one file, in one process or two, never share
/// a file aside (each would remove or rename the other's).
fn aside(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // SAFETY: gettid has no preconditions and cannot fail.
    let thread = unsafe { libc::gettid() };
    path.with_file_name(format!(".{name}.{thread}.tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_a_link_at_its_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("settings.json");
        replace_file(&file, b"one").expect("first");
        replace_file(&file, b"two").expect("second");
        assert_eq!(std::fs::read(&file).expect("read"), b"two");

        let target = dir.path().join("target");
        std::fs::write(&target, "kept").expect("target");
        // A link at the file's name and one at the name written aside.
        let linked = dir.path().join("linked.json");
        std::os::unix::fs::symlink(&target, &linked).expect("link");
        let next_aside = aside(&linked);
        std::os::unix::fs::symlink(&target, &next_aside).expect("aside link");
        replace_file(&linked, b"new").expect("replace");
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "kept");
        assert!(
            !std::fs::symlink_metadata(&linked)
                .expect("meta")
                .is_symlink()
        );
        assert_eq!(std::fs::read(&linked).expect("read"), b"new");
        assert!(!next_aside.exists());
    }

    #[test]
    fn threads_replacing_one_file_at_once_each_write_it_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("entry.json");
        std::thread::scope(|scope| {
            for writer in 0..8u8 {
                let file = &file;
                scope.spawn(move || {
                    for _ in 0..50 {
                        replace_file(file, &[writer; 4096]).expect("every write succeeds");
                    }
                });
            }
        });
        let last = std::fs::read(&file).expect("read");
        assert_eq!(last.len(), 4096);
        assert!(last.iter().all(|&b| b == last[0]), "a mixed file");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("entry.json")]);
    }

    #[test]
    fn a_private_file_is_its_owners_only_even_over_an_open_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "old").expect("open file");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        replace_private_file(&file, b"secret").expect("replace");
        let meta = std::fs::metadata(&file).expect("meta");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&file).expect("read"), b"secret");
    }
}
