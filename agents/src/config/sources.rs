//! Which configuration files there are, and in which order they are merged.
//!
//! Discovery is pure: it only builds paths from the values it is given (home, environment,
//! flags), so callers pass the process environment in and tests never race on it. Whether a
//! file exists is decided when it is read ([`super::Config::load`]), so a file removed between
//! the two steps is handled the same way as one that was never there.

use std::path::{Path, PathBuf};

/// The configuration files to merge, in order: user, repository, explicit (later wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSources {
    /// `$XDG_CONFIG_HOME/clawpool/config.toml` (default `~/.config/clawpool/config.toml`);
    /// skipped when missing.
    pub user: Option<PathBuf>,
    /// `<repo>/.clawpool.toml`; skipped when missing.
    pub repo: Option<PathBuf>,
    /// `--config FILE`, else `CLAWPOOL_CONFIG`; an error when missing, since it was asked for.
    pub explicit: Option<PathBuf>,
    /// The home folder a leading `~` in a root expands to.
    pub home: PathBuf,
}

/// One file to read: its path and whether it must exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate<'a> {
    pub path: &'a Path,
    pub required: bool,
}

impl ConfigSources {
    /// Finds the configuration files from the given values (no environment is read here).
    ///
    /// - `xdg_config_home`: the value of `XDG_CONFIG_HOME`; empty or relative values are
    ///   ignored (the XDG spec says so), and `home/.config` is used instead.
    /// - `repo_root`: the repository clawpool works on, if any.
    /// - `explicit` (`--config`) beats `env_clawpool_config` (`CLAWPOOL_CONFIG`); an empty
    ///   value counts as unset, as shells export empty variables easily.
    pub fn discover(
        home: &Path,
        xdg_config_home: Option<&Path>,
        repo_root: Option<&Path>,
        explicit: Option<&Path>,
        env_clawpool_config: Option<&Path>,
    ) -> Self {
        let config_home = xdg_config_home
            .filter(|dir| dir.is_absolute())
            .map_or_else(|| home.join(".config"), Path::to_path_buf);
        Self {
            user: Some(config_home.join("clawpool").join("config.toml")),
            repo: repo_root.map(|root| root.join(".clawpool.toml")),
            explicit: given(explicit)
                .or(given(env_clawpool_config))
                .map(Path::to_path_buf),
            home: home.to_path_buf(),
        }
    }

    /// The files in merge order, each with whether it must exist.
    pub(crate) fn candidates(&self) -> Vec<Candidate<'_>> {
        let optional = [&self.user, &self.repo]
            .into_iter()
            .flatten()
            .map(|path| Candidate {
                path,
                required: false,
            });
        let explicit = self.explicit.iter().map(|path| Candidate {
            path,
            required: true,
        });
        optional.chain(explicit).collect()
    }
}

/// `path` unless it is empty.
fn given(path: Option<&Path>) -> Option<&Path> {
    path.filter(|p| !p.as_os_str().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_default_is_dot_config_under_home() {
        let s = ConfigSources::discover(Path::new("/home/u"), None, None, None, None);
        assert_eq!(
            s.user.as_deref(),
            Some(Path::new("/home/u/.config/clawpool/config.toml"))
        );
        assert_eq!(s.repo, None);
        assert_eq!(s.explicit, None);
        assert_eq!(s.home, PathBuf::from("/home/u"));
    }

    #[test]
    fn xdg_config_home_is_used_when_absolute() {
        let s = ConfigSources::discover(
            Path::new("/home/u"),
            Some(Path::new("/xdg")),
            Some(Path::new("/repo")),
            None,
            None,
        );
        assert_eq!(
            s.user.as_deref(),
            Some(Path::new("/xdg/clawpool/config.toml"))
        );
        assert_eq!(s.repo.as_deref(), Some(Path::new("/repo/.clawpool.toml")));
        for ignored in ["", "relative/xdg"] {
            let s = ConfigSources::discover(
                Path::new("/home/u"),
                Some(Path::new(ignored)),
                None,
                None,
                None,
            );
            assert_eq!(
                s.user.as_deref(),
                Some(Path::new("/home/u/.config/clawpool/config.toml")),
                "{ignored:?} is ignored"
            );
        }
    }

    #[test]
    fn flag_beats_environment_and_empty_counts_as_unset() {
        let home = Path::new("/home/u");
        let flag = Some(Path::new("/flag.toml"));
        let env = Some(Path::new("/env.toml"));
        let pick = |explicit, env| ConfigSources::discover(home, None, None, explicit, env);
        assert_eq!(
            pick(flag, env).explicit.as_deref(),
            Some(Path::new("/flag.toml"))
        );
        assert_eq!(
            pick(None, env).explicit.as_deref(),
            Some(Path::new("/env.toml"))
        );
        assert_eq!(
            pick(Some(Path::new("")), env).explicit.as_deref(),
            Some(Path::new("/env.toml"))
        );
        assert_eq!(pick(None, Some(Path::new(""))).explicit, None);
    }

    #[test]
    fn candidates_are_in_merge_order_and_only_explicit_is_required() {
        let s = ConfigSources::discover(
            Path::new("/h"),
            None,
            Some(Path::new("/r")),
            Some(Path::new("/x.toml")),
            None,
        );
        let got: Vec<_> = s
            .candidates()
            .into_iter()
            .map(|c| (c.path.to_path_buf(), c.required))
            .collect();
        assert_eq!(
            got,
            vec![
                (PathBuf::from("/h/.config/clawpool/config.toml"), false),
                (PathBuf::from("/r/.clawpool.toml"), false),
                (PathBuf::from("/x.toml"), true),
            ]
        );
    }
}
