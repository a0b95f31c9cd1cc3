//! Comparable paths.
//!
//! git records a worktree's path with symlinks resolved, and a lane's path may not exist yet
//! (or may no longer exist), so plain `canonicalize` is not enough to compare them: the
//! existing part of a path is canonicalised and the rest is appended as written, with `.` and
//! `..` worked out by hand.

use std::io;
use std::path::{Component, Path, PathBuf};

/// `path` made absolute, with its longest existing prefix canonicalised.
pub(crate) fn normalize(path: &Path) -> io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let base = loop {
        match existing.canonicalize() {
            Ok(canonical) => break canonical,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                // An absolute path always ends in an existing root, so this loop ends.
                let Some(parent) = existing.parent() else {
                    return Err(err);
                };
                rest.push(existing.file_name().map(PathBuf::from));
                existing = parent;
            }
            Err(err) => return Err(err),
        }
    };
    let mut out = base;
    for part in rest.into_iter().rev() {
        match part {
            // `file_name` is `None` only for a trailing `..`.
            None => {
                out.pop();
            }
            Some(name) => {
                for component in name.components() {
                    match component {
                        Component::ParentDir => {
                            out.pop();
                        }
                        Component::CurDir => {}
                        other => out.push(other),
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The outermost ancestor of `path` (or `path` itself) that does not exist, if any: what a
/// failed creation has to remove to leave nothing behind.
pub(crate) fn first_missing(path: &Path) -> Option<PathBuf> {
    let mut missing = None;
    let mut current = Some(path);
    while let Some(p) = current {
        if p.symlink_metadata().is_ok() {
            break;
        }
        missing = Some(p.to_path_buf());
        current = p.parent();
    }
    missing
}

/// Whether `path` is a folder with nothing in it.
pub(crate) fn is_empty_dir(path: &Path) -> io::Result<bool> {
    Ok(path.read_dir()?.next().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_the_existing_part_and_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let real = dir.path().canonicalize().expect("the temp dir exists");
        let got = normalize(&dir.path().join("a/./b/../c")).expect("normalizes");
        assert_eq!(got, real.join("a/c"));
        assert_eq!(normalize(dir.path()).expect("normalizes"), real);
    }

    #[test]
    fn first_missing_is_the_outermost_missing_ancestor() {
        let dir = tempfile::tempdir().expect("a temp dir");
        assert_eq!(
            first_missing(&dir.path().join("a/b/c")),
            Some(dir.path().join("a"))
        );
        assert_eq!(first_missing(dir.path()), None);
    }
}
