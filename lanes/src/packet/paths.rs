//! Where a packet's paths may point: inside the repository or the worktree root.
//!
//! A path is checked twice. First as written, lexically (`..` and `.` resolved, nothing needs
//! to exist yet), which gives the clearest message for a path that plainly points outside.
//! Then where it really leads: every part of it that exists is resolved through symbolic links,
//! as the kernel (and the trust decision) will resolve it, and the result must still be inside
//! the roots, themselves resolved the same way. Without the second check a link inside the
//! repository (`lnk → /elsewhere`) would let `lnk/wt` create a worktree, or name a trusted
//! root, outside the repository.

use std::path::{Component, Path, PathBuf};

/// What a path field may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathRule {
    /// Inside (or equal to) the repository root or the worktree root.
    InsideRoots,
    /// Strictly below the repository root or the worktree root (a lane's worktree).
    BelowRoots,
    /// Inside (or equal to) the repository root; given back relative to it (`scope_path`).
    InsideRepo,
}

/// The two roots, absolute and normalised.
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    repo: PathBuf,
    worktree_root: Option<PathBuf>,
}

impl Roots {
    pub(crate) fn new(repo_root: &Path, worktree_root: Option<&Path>) -> Self {
        let repo = absolute(repo_root, None);
        let worktree_root = worktree_root.map(|w| absolute(w, Some(&repo)));
        Self {
            repo,
            worktree_root,
        }
    }

    /// Resolves `raw` (relative paths against the repository root) and checks it against
    /// `rule`. The error is the message for the field's JSON path.
    pub(crate) fn resolve(&self, raw: &str, rule: PathRule) -> Result<PathBuf, String> {
        if raw.trim().is_empty() {
            return Err("the path is empty".to_owned());
        }
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return Err(format!(
                "the path {raw:?} contains a control character ({})",
                c.escape_default()
            ));
        }
        if raw == "~" || raw.starts_with("~/") {
            return Err(format!(
                "`{raw}`: `~` is not expanded in a task packet; write the path relative to the \
                 repository or absolute"
            ));
        }
        let given = Path::new(raw);
        let resolved = if given.is_absolute() {
            normalize(given)
        } else {
            normalize(&self.repo.join(given))
        };
        let climbs = given.components().any(|c| c == Component::ParentDir);

        let in_repo = resolved.starts_with(&self.repo);
        let in_worktrees = self
            .worktree_root
            .as_ref()
            .is_some_and(|w| resolved.starts_with(w));

        if !rule.allows(in_repo, in_worktrees) {
            let roots = self.describe(rule);
            let resolved_note = if Path::new(raw) == resolved {
                String::new()
            } else {
                format!(" (it resolves to `{}`)", resolved.display())
            };
            let why = if rule == PathRule::InsideRepo {
                "; a scope is a part of the repository"
            } else {
                ""
            };
            let what = if climbs {
                format!("escapes {roots} through `..`")
            } else if given.is_absolute() {
                format!("is an absolute path outside {roots}")
            } else {
                format!("is outside {roots}")
            };
            return Err(format!("`{raw}` {what}{resolved_note}{why}"));
        }
        self.check_where_it_leads(raw, &resolved, rule)?;

        match rule {
            PathRule::BelowRoots => {
                // git's own folder is no place for a worktree (and `.git/x` would put the
                // lane's files among the repository's objects and refs).
                if resolved
                    .components()
                    .any(|c| c == Component::Normal(std::ffi::OsStr::new(".git")))
                {
                    return Err(format!(
                        "`{raw}` is inside a `.git` folder (`{}`); a lane's worktree must be a \
                         folder of its own",
                        resolved.display()
                    ));
                }
                let is_root =
                    resolved == self.repo || self.worktree_root.as_ref() == Some(&resolved);
                if is_root {
                    return Err(format!(
                        "`{raw}` is a root itself (`{}`); a lane's worktree must be a folder \
                         below the repository or the worktree root",
                        resolved.display()
                    ));
                }
                Ok(resolved)
            }
            PathRule::InsideRoots => Ok(resolved),
            PathRule::InsideRepo => {
                let relative = resolved
                    .strip_prefix(&self.repo)
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                Ok(if relative.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    relative
                })
            }
        }
    }
}

impl Roots {
    /// The second check (see the module doc): `resolved` as the file system resolves it must
    /// stay inside the roots as the file system resolves them.
    fn check_where_it_leads(
        &self,
        raw: &str,
        resolved: &Path,
        rule: PathRule,
    ) -> Result<(), String> {
        let leads_to = physical(resolved);
        let repo = physical(&self.repo);
        let in_repo = leads_to.starts_with(&repo);
        let in_worktrees = self
            .worktree_root
            .as_deref()
            .map(physical)
            .is_some_and(|w| leads_to.starts_with(w));
        if rule.allows(in_repo, in_worktrees) {
            return Ok(());
        }
        Err(format!(
            "`{raw}` leads outside {} through a symbolic link: it resolves to `{}`",
            self.describe(rule),
            leads_to.display()
        ))
    }

    /// The roots a path under `rule` must be in, for messages.
    fn describe(&self, rule: PathRule) -> String {
        match (rule, &self.worktree_root) {
            (PathRule::InsideRepo, _) | (_, None) => {
                format!("the repository `{}`", self.repo.display())
            }
            (_, Some(w)) => format!(
                "the repository `{}` and the worktree root `{}`",
                self.repo.display(),
                w.display()
            ),
        }
    }
}

impl PathRule {
    /// Whether a path inside the repository (`in_repo`) or the worktree root (`in_worktrees`)
    /// may be named under this rule.
    fn allows(self, in_repo: bool, in_worktrees: bool) -> bool {
        match self {
            PathRule::InsideRepo => in_repo,
            PathRule::InsideRoots | PathRule::BelowRoots => in_repo || in_worktrees,
        }
    }
}

/// `path` (absolute, normalised) as the file system resolves it: the longest part of it that
/// exists is resolved through symbolic links, one component at a time so that a `..` after a
/// link climbs from where the link leads; the rest, which does not exist yet, is appended.
fn physical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut components = path.components();
    for component in components.by_ref() {
        match component {
            Component::Normal(name) => {
                let next = out.join(name);
                match next.canonicalize() {
                    Ok(real) => out = real,
                    Err(_) => {
                        out = next;
                        break;
                    }
                }
            }
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    normalize(&out.join(components.as_path()))
}

/// `path` made absolute (against `base`, else the current folder) and normalised.
fn absolute(path: &Path, base: Option<&Path>) -> PathBuf {
    if path.is_absolute() {
        return normalize(path);
    }
    match base {
        Some(base) => normalize(&base.join(path)),
        None => normalize(&std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())),
    }
}

/// Lexical normalisation: `.` dropped, `..` removes the previous component (never above the
/// root). Symbolic links are not followed.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other),
        }
    }
    out
}
