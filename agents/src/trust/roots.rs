//! Trusted and denied roots: which lane folders may be trusted, and what `clawpool doctor`
//! should say about the configured roots.
//!
//! Everything is compared as canonical paths (symlinks resolved) and by path components, so a
//! symlink cannot smuggle a lane into a trusted root or out of a denied one, and `/srv/repo`
//! does not contain `/srv/repo-evil`.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::TrustError;

/// The configured `trusted_roots` and `denied_roots`.
///
/// Roots must be absolute (expand `~/` first with [`expand_home`]). Roots that are relative,
/// missing or unresolvable never make a lane trusted; [`TrustRoots::warnings`] reports them.
/// No trusted roots at all is legal and is the safest default: no lane is trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustRoots {
    /// Folders whose contents (themselves included) may be trusted.
    pub trusted: Vec<PathBuf>,
    /// Folders whose contents (themselves included) are never trusted, whatever `trusted` says.
    pub denied: Vec<PathBuf>,
}

/// Which list a root comes from, for warnings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RootKind {
    /// A `trusted_roots` entry.
    Trusted,
    /// A `denied_roots` entry.
    Denied,
}

impl fmt::Display for RootKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RootKind::Trusted => "trusted",
            RootKind::Denied => "denied",
        })
    }
}

/// The outcome of [`TrustRoots::decide`] for one lane.
///
/// Every variant carries the lane's canonical path: that, not the path the lane was given as,
/// is what the agent will see as its working folder and what trust stores must be keyed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustDecision {
    /// Inside a trusted root and no denied root: clawpool may answer the trust dialog.
    Trusted {
        /// The lane's canonical path.
        lane: PathBuf,
        /// The trusted root that matched, as configured (the most specific one).
        root: PathBuf,
    },
    /// Inside a denied root. Denied wins, even over a more specific trusted root.
    Denied {
        /// The lane's canonical path.
        lane: PathBuf,
        /// The denied root that matched, as configured (the most specific one).
        root: PathBuf,
    },
    /// In no usable root: not trusted.
    NotListed {
        /// The lane's canonical path.
        lane: PathBuf,
    },
}

impl TrustDecision {
    /// The lane's canonical path (symlinks resolved).
    pub fn lane_path(&self) -> &Path {
        match self {
            TrustDecision::Trusted { lane, .. }
            | TrustDecision::Denied { lane, .. }
            | TrustDecision::NotListed { lane } => lane,
        }
    }

    /// Whether clawpool may answer the agent's trust dialog for this lane.
    pub fn is_trusted(&self) -> bool {
        matches!(self, TrustDecision::Trusted { .. })
    }
}

/// Something about the configured roots that `clawpool doctor` should report.
///
/// None of these is fatal: each only makes fewer lanes trusted, never more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustWarning {
    /// `trusted_roots` is empty. Legal, and the safest default; said so that a person who
    /// expected lanes to be trusted finds out why they are not.
    NoTrustedRoots,
    /// A root is a relative path. It is ignored: resolving it against whatever folder
    /// clawpool happens to run in would make trust depend on that folder.
    RootNotAbsolute {
        /// Which list it is in.
        kind: RootKind,
        /// The root as configured.
        root: PathBuf,
    },
    /// A root does not exist, so it contains nothing.
    RootNotFound {
        /// Which list it is in.
        kind: RootKind,
        /// The root as configured.
        root: PathBuf,
    },
    /// A root exists but is not a folder, so no lane can be inside it.
    RootNotADirectory {
        /// Which list it is in.
        kind: RootKind,
        /// The root as configured.
        root: PathBuf,
    },
    /// A root could not be resolved (e.g. permission denied on a parent folder). A trusted
    /// root like that is ignored; a denied one is still applied to its path as written.
    RootUnresolvable {
        /// Which list it is in.
        kind: RootKind,
        /// The root as configured.
        root: PathBuf,
        /// What the operating system said.
        error: String,
    },
    /// A trusted root is equal to or inside a denied root, so it can never apply.
    TrustedInsideDenied {
        /// The trusted root as configured.
        trusted: PathBuf,
        /// The denied root that contains it, as configured.
        denied: PathBuf,
    },
}

impl fmt::Display for TrustWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrustWarning::NoTrustedRoots => f.write_str(
                "no trusted_roots configured: no lane is trusted and clawpool never answers a \
                 trust dialog (the safest default); add trusted_roots to change that",
            ),
            TrustWarning::RootNotAbsolute { kind, root } => write!(
                f,
                "{kind} root {} is not an absolute path and is ignored",
                root.display()
            ),
            TrustWarning::RootNotFound { kind, root } => write!(
                f,
                "{kind} root {} does not exist, so it contains no lane",
                root.display()
            ),
            TrustWarning::RootNotADirectory { kind, root } => write!(
                f,
                "{kind} root {} is not a folder, so it contains no lane",
                root.display()
            ),
            TrustWarning::RootUnresolvable { kind, root, error } => {
                write!(
                    f,
                    "{kind} root {} cannot be resolved ({error}); ",
                    root.display()
                )?;
                f.write_str(match kind {
                    RootKind::Trusted => "it is ignored",
                    RootKind::Denied => "it is applied to the path as written",
                })
            }
            TrustWarning::TrustedInsideDenied { trusted, denied } => write!(
                f,
                "trusted root {} is inside denied root {}, so it never applies (denied wins)",
                trusted.display(),
                denied.display()
            ),
        }
    }
}

/// A configured root, resolved for comparison.
enum Resolved {
    /// The canonical path.
    Canonical(PathBuf),
    /// Relative: never compared.
    NotAbsolute,
    /// Absolute, but canonicalizing failed (missing, or another error).
    Failed(io::Error),
}

fn resolve_root(root: &Path) -> Resolved {
    if !root.is_absolute() {
        return Resolved::NotAbsolute;
    }
    match std::fs::canonicalize(root) {
        Ok(canonical) => Resolved::Canonical(canonical),
        Err(error) => Resolved::Failed(error),
    }
}

/// The form of a root that lanes are compared against, if any.
///
/// A trusted root must resolve to count (fail closed). A denied root that cannot be resolved
/// still denies its path as written: that can only deny more, never trust more.
fn comparable(root: &Path, kind: RootKind) -> Option<PathBuf> {
    match (resolve_root(root), kind) {
        (Resolved::Canonical(canonical), _) => Some(canonical),
        (Resolved::Failed(_), RootKind::Denied) => Some(root.to_path_buf()),
        (Resolved::Failed(_), RootKind::Trusted) | (Resolved::NotAbsolute, _) => None,
    }
}

/// The most specific root of `roots` that contains `lane` (ties: the first listed).
fn best_match(roots: &[PathBuf], kind: RootKind, lane: &Path) -> Option<PathBuf> {
    let mut best: Option<(usize, &PathBuf)> = None;
    for root in roots {
        let Some(form) = comparable(root, kind) else {
            continue;
        };
        // `Path::starts_with` compares whole components: /srv/repo-evil is not in /srv/repo.
        if lane.starts_with(&form) {
            let depth = form.components().count();
            if best.is_none_or(|(best_depth, _)| depth > best_depth) {
                best = Some((depth, root));
            }
        }
    }
    best.map(|(_, root)| root.clone())
}

impl TrustRoots {
    /// Decides whether the lane at `lane_path` is trusted.
    ///
    /// The lane path is canonicalized (so it must exist: a missing one is
    /// [`TrustError::LaneNotFound`]), then compared by components with each usable root.
    /// Denied wins over trusted, even when the trusted root is more specific.
    pub fn decide(&self, lane_path: &Path) -> Result<TrustDecision, TrustError> {
        let lane = std::fs::canonicalize(lane_path).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                TrustError::LaneNotFound {
                    path: lane_path.to_path_buf(),
                }
            } else {
                TrustError::LanePath {
                    path: lane_path.to_path_buf(),
                    source,
                }
            }
        })?;
        if let Some(root) = best_match(&self.denied, RootKind::Denied, &lane) {
            return Ok(TrustDecision::Denied { lane, root });
        }
        if let Some(root) = best_match(&self.trusted, RootKind::Trusted, &lane) {
            return Ok(TrustDecision::Trusted { lane, root });
        }
        Ok(TrustDecision::NotListed { lane })
    }

    /// What `clawpool doctor` should report about these roots, in config order: the empty
    /// trusted list first, then each root's own problem, then trusted roots that a denied
    /// root makes useless.
    pub fn warnings(&self) -> Vec<TrustWarning> {
        let mut warnings = Vec::new();
        if self.trusted.is_empty() {
            warnings.push(TrustWarning::NoTrustedRoots);
        }
        let all = self
            .trusted
            .iter()
            .map(|root| (RootKind::Trusted, root))
            .chain(self.denied.iter().map(|root| (RootKind::Denied, root)));
        for (kind, root) in all {
            let root_owned = root.to_path_buf();
            match resolve_root(root) {
                Resolved::NotAbsolute => warnings.push(TrustWarning::RootNotAbsolute {
                    kind,
                    root: root_owned,
                }),
                Resolved::Failed(error) if error.kind() == io::ErrorKind::NotFound => warnings
                    .push(TrustWarning::RootNotFound {
                        kind,
                        root: root_owned,
                    }),
                Resolved::Failed(error) => warnings.push(TrustWarning::RootUnresolvable {
                    kind,
                    root: root_owned,
                    error: error.to_string(),
                }),
                Resolved::Canonical(canonical) if !canonical.is_dir() => {
                    warnings.push(TrustWarning::RootNotADirectory {
                        kind,
                        root: root_owned,
                    })
                }
                Resolved::Canonical(_) => {}
            }
        }
        for trusted in &self.trusted {
            // Compare the forms `decide` would use; a missing trusted root is compared as
            // written, since it would be shadowed as soon as it is created.
            let trusted_form = match resolve_root(trusted) {
                Resolved::Canonical(canonical) => canonical,
                Resolved::Failed(_) => trusted.clone(),
                Resolved::NotAbsolute => continue,
            };
            if let Some(denied) = best_match(&self.denied, RootKind::Denied, &trusted_form) {
                warnings.push(TrustWarning::TrustedInsideDenied {
                    trusted: trusted.clone(),
                    denied,
                });
            }
        }
        warnings
    }
}

/// Expands a leading `~` component to `home`: `~` → `home`, `~/src` → `home/src`.
///
/// Anything else, including `~user/...`, is returned unchanged (and, being relative, is then
/// reported by [`TrustRoots::warnings`]). Config loading calls this on every root.
pub fn expand_home(path: &Path, home: &Path) -> PathBuf {
    let mut components = path.components();
    match components.next() {
        Some(Component::Normal(first)) if first == "~" => {
            let rest = components.as_path();
            if rest.as_os_str().is_empty() {
                home.to_path_buf()
            } else {
                home.join(rest)
            }
        }
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// A scratch tree: `<tmp>/srv/repo/{a/b/c,sub}`, `<tmp>/srv/repo-evil`, `<tmp>/outside`.
    /// The tempdir itself is canonicalized since it may sit behind a symlink (e.g. macOS /tmp).
    struct Tree {
        _dir: tempfile::TempDir,
        base: PathBuf,
    }

    impl Tree {
        fn new() -> Tree {
            let dir = tempfile::tempdir().expect("a temporary folder is needed for the tree");
            let base = fs::canonicalize(dir.path()).expect("the tempdir exists");
            for sub in ["srv/repo/a/b/c", "srv/repo/sub", "srv/repo-evil", "outside"] {
                fs::create_dir_all(base.join(sub)).expect("tempdir is writable");
            }
            Tree { _dir: dir, base }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.base.join(rel)
        }
    }

    fn roots(trusted: &[PathBuf], denied: &[PathBuf]) -> TrustRoots {
        TrustRoots {
            trusted: trusted.to_vec(),
            denied: denied.to_vec(),
        }
    }

    #[test]
    fn compares_components_not_string_prefixes() {
        let t = Tree::new();
        let r = roots(&[t.path("srv/repo")], &[]);
        let evil = r.decide(&t.path("srv/repo-evil")).expect("lane exists");
        assert_eq!(
            evil,
            TrustDecision::NotListed {
                lane: t.path("srv/repo-evil")
            }
        );
        assert!(r.decide(&t.path("srv/repo")).expect("exists").is_trusted());
        assert_eq!(
            r.decide(&t.path("srv/repo/sub")).expect("exists"),
            TrustDecision::Trusted {
                lane: t.path("srv/repo/sub"),
                root: t.path("srv/repo"),
            }
        );
        // A trailing slash or `.` in the configured root changes nothing.
        let r = roots(
            &[PathBuf::from(format!(
                "{}/./",
                t.path("srv/repo").display()
            ))],
            &[],
        );
        assert!(
            !r.decide(&t.path("srv/repo-evil"))
                .expect("exists")
                .is_trusted()
        );
        assert!(
            r.decide(&t.path("srv/repo/sub"))
                .expect("exists")
                .is_trusted()
        );
    }

    #[test]
    fn symlinked_lane_resolves_into_trusted_root() {
        let t = Tree::new();
        let link = t.path("outside/link-to-sub");
        symlink(t.path("srv/repo/sub"), &link).expect("symlink");
        let r = roots(&[t.path("srv/repo")], &[]);
        assert_eq!(
            r.decide(&link).expect("exists"),
            TrustDecision::Trusted {
                lane: t.path("srv/repo/sub"),
                root: t.path("srv/repo"),
            }
        );
    }

    #[test]
    fn symlink_escaping_trusted_root_is_not_trusted() {
        let t = Tree::new();
        let escape = t.path("srv/repo/escape");
        symlink(t.path("outside"), &escape).expect("symlink");
        let r = roots(&[t.path("srv/repo")], &[]);
        let decision = r.decide(&escape).expect("exists");
        assert_eq!(
            decision,
            TrustDecision::NotListed {
                lane: t.path("outside")
            }
        );
        // `..` through the symlink leads elsewhere too; canonicalization follows it.
        let dotdot = escape.join("..").join("srv");
        assert!(!r.decide(&dotdot).expect("exists").is_trusted());
    }

    #[test]
    fn symlinked_root_matches_real_lane_path() {
        let t = Tree::new();
        let root_link = t.path("outside/repo-link");
        symlink(t.path("srv/repo"), &root_link).expect("symlink");
        let r = roots(std::slice::from_ref(&root_link), &[]);
        assert_eq!(
            r.decide(&t.path("srv/repo/a")).expect("exists"),
            TrustDecision::Trusted {
                lane: t.path("srv/repo/a"),
                root: root_link,
            }
        );
    }

    #[test]
    fn denied_wins_even_over_more_specific_trusted_root() {
        let t = Tree::new();
        let r = roots(&[t.path("srv/repo/a/b")], &[t.path("srv/repo")]);
        assert_eq!(
            r.decide(&t.path("srv/repo/a/b/c")).expect("exists"),
            TrustDecision::Denied {
                lane: t.path("srv/repo/a/b/c"),
                root: t.path("srv/repo"),
            }
        );
        // Same root in both lists: denied.
        let r = roots(&[t.path("srv/repo")], &[t.path("srv/repo")]);
        assert!(matches!(
            r.decide(&t.path("srv/repo")).expect("exists"),
            TrustDecision::Denied { .. }
        ));
    }

    #[test]
    fn denied_through_symlink_still_denied() {
        let t = Tree::new();
        let link = t.path("outside/alias");
        symlink(t.path("srv/repo/a"), &link).expect("symlink");
        // Denied configured through the alias, lane given by its real path, and vice versa.
        let r = roots(&[t.path("srv")], std::slice::from_ref(&link));
        assert!(matches!(
            r.decide(&t.path("srv/repo/a/b")).expect("exists"),
            TrustDecision::Denied { .. }
        ));
        let r = roots(&[t.path("srv")], &[t.path("srv/repo/a")]);
        assert!(matches!(
            r.decide(&link.join("b")).expect("exists"),
            TrustDecision::Denied { .. }
        ));
    }

    #[test]
    fn nested_roots_pick_most_specific_and_carve_outs_apply() {
        let t = Tree::new();
        let r = roots(
            &[t.path("srv"), t.path("srv/repo/a")],
            &[t.path("srv/repo/a/b")],
        );
        assert_eq!(
            r.decide(&t.path("srv/repo/a")).expect("exists"),
            TrustDecision::Trusted {
                lane: t.path("srv/repo/a"),
                root: t.path("srv/repo/a"),
            }
        );
        assert_eq!(
            r.decide(&t.path("srv/repo/sub")).expect("exists"),
            TrustDecision::Trusted {
                lane: t.path("srv/repo/sub"),
                root: t.path("srv"),
            }
        );
        assert_eq!(
            r.decide(&t.path("srv/repo/a/b/c")).expect("exists"),
            TrustDecision::Denied {
                lane: t.path("srv/repo/a/b/c"),
                root: t.path("srv/repo/a/b"),
            }
        );
        assert!(!r.decide(&t.path("outside")).expect("exists").is_trusted());
    }

    #[test]
    fn missing_lane_is_an_error_naming_it() {
        let t = Tree::new();
        let missing = t.path("srv/repo/nope");
        let r = roots(&[t.path("srv")], &[]);
        let error = r.decide(&missing).expect_err("lane does not exist");
        assert!(matches!(&error, TrustError::LaneNotFound { path } if *path == missing));
        assert!(error.to_string().contains(&missing.display().to_string()));
    }

    #[test]
    fn nonexistent_and_relative_roots_trust_nothing_and_are_warned() {
        let t = Tree::new();
        let missing = t.path("srv/not-there");
        let relative = PathBuf::from("srv/repo");
        let r = roots(&[missing.clone(), relative.clone()], &[]);
        assert!(!r.decide(&t.path("srv/repo")).expect("exists").is_trusted());
        assert_eq!(
            r.warnings(),
            vec![
                TrustWarning::RootNotFound {
                    kind: RootKind::Trusted,
                    root: missing,
                },
                TrustWarning::RootNotAbsolute {
                    kind: RootKind::Trusted,
                    root: relative,
                },
            ]
        );
    }

    #[test]
    fn missing_denied_root_is_warned_and_file_root_too() {
        let t = Tree::new();
        let file = t.path("srv/file.txt");
        fs::write(&file, "x").expect("tempdir is writable");
        let missing = t.path("gone");
        let r = roots(
            &[t.path("srv"), file.clone()],
            std::slice::from_ref(&missing),
        );
        assert_eq!(
            r.warnings(),
            vec![
                TrustWarning::RootNotADirectory {
                    kind: RootKind::Trusted,
                    root: file,
                },
                TrustWarning::RootNotFound {
                    kind: RootKind::Denied,
                    root: missing,
                },
            ]
        );
    }

    #[test]
    fn no_roots_is_legal_trusts_nothing_and_says_so() {
        let t = Tree::new();
        let r = TrustRoots::default();
        assert_eq!(
            r.decide(&t.path("srv/repo")).expect("exists"),
            TrustDecision::NotListed {
                lane: t.path("srv/repo")
            }
        );
        let warnings = r.warnings();
        assert_eq!(warnings, vec![TrustWarning::NoTrustedRoots]);
        assert!(warnings[0].to_string().contains("safest default"));
    }

    #[test]
    fn trusted_root_inside_denied_root_is_warned() {
        let t = Tree::new();
        let r = roots(
            &[t.path("srv/repo/a"), t.path("outside")],
            &[t.path("srv/repo")],
        );
        assert_eq!(
            r.warnings(),
            vec![TrustWarning::TrustedInsideDenied {
                trusted: t.path("srv/repo/a"),
                denied: t.path("srv/repo"),
            }]
        );
        // The other way round (a carve-out) is normal and not warned.
        let r = roots(&[t.path("srv/repo")], &[t.path("srv/repo/a")]);
        assert!(r.warnings().is_empty());
    }

    #[test]
    fn expand_home_only_expands_a_leading_tilde() {
        let home = Path::new("/home/me");
        assert_eq!(expand_home(Path::new("~"), home), PathBuf::from("/home/me"));
        assert_eq!(
            expand_home(Path::new("~/"), home),
            PathBuf::from("/home/me")
        );
        assert_eq!(
            expand_home(Path::new("~/src/x"), home),
            PathBuf::from("/home/me/src/x")
        );
        assert_eq!(
            expand_home(Path::new("~other/src"), home),
            PathBuf::from("~other/src")
        );
        assert_eq!(
            expand_home(Path::new("/srv/~"), home),
            PathBuf::from("/srv/~")
        );
        assert_eq!(expand_home(Path::new("src"), home), PathBuf::from("src"));
    }
}
