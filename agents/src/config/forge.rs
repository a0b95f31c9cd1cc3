//! `[forge]`: where `clawpool pr` opens pull requests (`docs/config.md`, `docs/handoff.md`):
//! a GitHub-compatible REST API (GitHub, GitHub Enterprise, Gitea, Forgejo), the repository
//! on it, the git remote the branches are pushed to, and the environment variable holding the
//! token. Each key comes from the last file that sets it. A repository's own `.clawpool.toml`
//! may set none of them (`repository.rs`): the API URL receives the token.
//!
//! The token itself is never in a file: only the name of the variable that holds it.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::locate::line_at;
use super::provenance::Sourced;

/// The `[forge]` table of one file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeSection {
    /// The forge's API: only `github` (GitHub's REST API, which Gitea and Forgejo serve too).
    #[serde(default)]
    pub kind: Option<Spanned<String>>,
    /// The API's root URL (default `https://api.github.com`).
    #[serde(default)]
    pub api_url: Option<Spanned<String>>,
    /// `owner/name` on the forge.
    #[serde(default)]
    pub repository: Option<Spanned<String>>,
    /// The git remote lane branches are pushed to (default `origin`).
    #[serde(default)]
    pub remote: Option<Spanned<String>>,
    /// The environment variable holding the token (default `GITHUB_TOKEN`).
    #[serde(default)]
    pub token_env: Option<Spanned<String>>,
}

/// The merged `[forge]` keys, each with the file that set it last.
#[derive(Debug, Clone, Default)]
pub struct ForgeOptions {
    /// `api_url`, without a trailing `/`.
    pub api_url: Option<Sourced<String>>,
    /// `repository` as `(owner, name)`.
    pub repository: Option<Sourced<(String, String)>>,
    /// `remote`.
    pub remote: Option<Sourced<String>>,
    /// `token_env`.
    pub token_env: Option<Sourced<String>>,
}

/// What `push` and `pr` use: the merged keys with their defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeSettings {
    /// The API's root URL, without a trailing `/`.
    pub api_url: String,
    /// `(owner, name)`; `None` when no file names the repository (`push` needs none).
    pub repository: Option<(String, String)>,
    /// The git remote.
    pub remote: String,
    /// The variable holding the token.
    pub token_env: String,
}

/// GitHub's API, the default `api_url`.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

impl ForgeOptions {
    /// Merges the `[forge]` table of `file` (text `text`) over these; nothing changes on an
    /// error.
    pub(crate) fn merge(
        &mut self,
        file: &Path,
        text: &str,
        section: &ForgeSection,
    ) -> Result<(), ConfigError> {
        let invalid = |value: &Spanned<String>, key: &str, message: String| ConfigError::Invalid {
            file: file.to_path_buf(),
            line: Some(line_at(text, value.span().start)),
            key: Some(format!("forge.{key}")),
            message,
        };
        let sourced = |value| Sourced {
            value,
            from: file.to_path_buf(),
        };
        if let Some(kind) = &section.kind
            && kind.get_ref() != "github"
        {
            return Err(invalid(
                kind,
                "kind",
                format!(
                    "{:?} is not a forge kind; expected \"github\" (GitHub's REST API, which GitHub Enterprise, Gitea and Forgejo serve)",
                    kind.get_ref()
                ),
            ));
        }
        let api_url = match &section.api_url {
            Some(url) => {
                let value = url.get_ref().trim_end_matches('/');
                if !(value.starts_with("https://") || value.starts_with("http://")) {
                    return Err(invalid(
                        url,
                        "api_url",
                        format!("{:?} is not an http(s) URL", url.get_ref()),
                    ));
                }
                Some(sourced(value.to_owned()))
            }
            None => None,
        };
        let repository = match &section.repository {
            Some(named) => match named.get_ref().split_once('/') {
                Some((owner, name))
                    if !owner.is_empty() && !name.is_empty() && !name.contains('/') =>
                {
                    Some(Sourced {
                        value: (owner.to_owned(), name.to_owned()),
                        from: file.to_path_buf(),
                    })
                }
                _ => {
                    return Err(invalid(
                        named,
                        "repository",
                        format!("{:?} is not owner/name", named.get_ref()),
                    ));
                }
            },
            None => None,
        };
        let word = |value: &Option<Spanned<String>>, key: &str| match value {
            Some(v) if v.get_ref().is_empty() || v.get_ref().starts_with('-') => {
                Err(invalid(v, key, format!("{:?} is not a name", v.get_ref())))
            }
            Some(v) => Ok(Some(sourced(v.get_ref().clone()))),
            None => Ok(None),
        };
        let remote = word(&section.remote, "remote")?;
        let token_env = word(&section.token_env, "token_env")?;
        if api_url.is_some() {
            self.api_url = api_url;
        }
        if repository.is_some() {
            self.repository = repository;
        }
        if remote.is_some() {
            self.remote = remote;
        }
        if token_env.is_some() {
            self.token_env = token_env;
        }
        Ok(())
    }

    /// The keys with their defaults.
    pub fn resolve(&self) -> ForgeSettings {
        ForgeSettings {
            api_url: self
                .api_url
                .as_ref()
                .map_or_else(|| DEFAULT_API_URL.to_owned(), |u| u.value.clone()),
            repository: self.repository.as_ref().map(|r| r.value.clone()),
            remote: self
                .remote
                .as_ref()
                .map_or_else(|| "origin".to_owned(), |r| r.value.clone()),
            token_env: self
                .token_env
                .as_ref()
                .map_or_else(|| "GITHUB_TOKEN".to_owned(), |t| t.value.clone()),
        }
    }
}
