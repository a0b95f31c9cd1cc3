//! One configuration file as written: its schema, and parsing it with errors that point into
//! it.
//!
//! Every table denies unknown keys, so a typo is an error naming the file, key and line
//! instead of a setting that silently does nothing. Roots and handshake values keep their
//! position in the text ([`toml::Spanned`]) because they are checked after parsing (a root must
//! be absolute once `~` is expanded; a deadline must be in range) and those errors need a line
//! too.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::profiles::ManifestPatch;

use super::error::ConfigError;
use super::handshake::HandshakeKey;
use super::locate::line_at;

/// The contents of one configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Folders whose lanes may be trusted (`~/` allowed). Merged across files.
    #[serde(default)]
    pub trusted_roots: Vec<Spanned<String>>,
    /// Folders whose lanes are never trusted (`~/` allowed). Merged across files.
    #[serde(default)]
    pub denied_roots: Vec<Spanned<String>>,
    /// Handshake deadlines and thresholds; for each key the last file wins.
    #[serde(default)]
    pub handshake: HandshakeSection,
    /// Changes to profiles (or new profiles), by profile name.
    #[serde(default)]
    pub profiles: BTreeMap<String, ManifestPatch>,
    /// The recovery policy file (`docs/policy.md`): absolute, `~/…`, or relative to this
    /// file's folder. The last file that sets it wins; unset, the shipped defaults apply.
    #[serde(default)]
    pub policy: Option<Spanned<String>>,
    /// Whether lanes' agents run sandboxed: `workspace` or `off` (`docs/sandbox.md`).
    #[serde(default)]
    pub sandbox: Option<Spanned<String>>,
    /// A sandboxed lane's network: `shared` or `none`.
    #[serde(default)]
    pub network: Option<Spanned<String>>,
    /// Extra paths every sandboxed lane may write.
    #[serde(default)]
    pub sandbox_rw: Vec<Spanned<String>>,
    /// The bubblewrap program (default: `bwrap` on `PATH`).
    #[serde(default)]
    pub bwrap: Option<Spanned<String>>,
    /// Where to tell a person that a lane needs them (`docs/notify.md`). Entries of every
    /// file are kept, in file order.
    #[serde(default)]
    pub notify: Vec<Spanned<super::notify::NotifyEntry>>,
    /// Model prices (`[prices."MODEL"]`, `docs/config.md`), over the shipped defaults; for each
    /// model the last file wins.
    #[serde(default)]
    pub prices: BTreeMap<String, ModelPrice>,
    /// Where `clawpool pr` opens pull requests (`[forge]`); for each key the last file wins.
    #[serde(default)]
    pub forge: super::forge::ForgeSection,
}

/// One `[prices."MODEL"]` table: US dollars per million tokens, and the date they were read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Input tokens not read from the cache.
    pub input_per_mtok: f64,
    /// Output tokens.
    pub output_per_mtok: f64,
    /// Cache reads; unset, they cost what input does.
    #[serde(default)]
    pub cache_read_per_mtok: Option<f64>,
    /// Cache writes; unset, they cost what input does.
    #[serde(default)]
    pub cache_write_per_mtok: Option<f64>,
    /// When the prices were read (`YYYY-MM-DD`); unset, the file's entry says `configured`.
    #[serde(default)]
    pub as_of: Option<String>,
}

/// The `[handshake]` table of one file; see [`HandshakeKey`] for what each key means.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandshakeSection {
    /// Spawning → ready deadline, in seconds.
    #[serde(default)]
    pub boot_timeout_secs: Option<Spanned<u64>>,
    /// Prompt acceptance deadline, in seconds.
    #[serde(default)]
    pub accept_timeout_secs: Option<Spanned<u64>>,
    /// Submits of a draft still in the input line.
    #[serde(default)]
    pub max_submit_attempts: Option<Spanned<u64>>,
    /// Prompts longer than this (or multi-line) go to `.claw/task.md`.
    #[serde(default)]
    pub long_prompt_chars: Option<Spanned<u64>>,
    /// Provider retry text visible this long means the lane is blocked on the provider.
    #[serde(default)]
    pub provider_block_secs: Option<Spanned<u64>>,
    /// Idle input this long after working means the turn finished, in milliseconds.
    #[serde(default)]
    pub finish_idle_ms: Option<Spanned<u64>>,
    /// Idle input this long after acceptance, no work or reply seen, means the turn never
    /// started, in seconds.
    #[serde(default)]
    pub start_timeout_secs: Option<Spanned<u64>>,
    /// How often a running lane's freshness is checked, in seconds.
    #[serde(default)]
    pub freshness_check_secs: Option<Spanned<u64>>,
    /// The least time between fetches of a base's remote, in seconds.
    #[serde(default)]
    pub fetch_interval_secs: Option<Spanned<u64>>,
    /// A running lane on a screen no rule knows, without progress, this long is blocked.
    #[serde(default)]
    pub unknown_screen_secs: Option<Spanned<u64>>,
    /// An agent still booting this long after its trust dialog was answered is restarted once.
    #[serde(default)]
    pub trust_apply_secs: Option<Spanned<u64>>,
    /// The screen's proof of acceptance waits this long for the agent's own report, in
    /// milliseconds.
    #[serde(default)]
    pub hook_grace_ms: Option<Spanned<u64>>,
}

impl HandshakeSection {
    /// The value this file gives `key`, with its position.
    pub fn get(&self, key: HandshakeKey) -> Option<&Spanned<u64>> {
        match key {
            HandshakeKey::BootTimeoutSecs => self.boot_timeout_secs.as_ref(),
            HandshakeKey::AcceptTimeoutSecs => self.accept_timeout_secs.as_ref(),
            HandshakeKey::MaxSubmitAttempts => self.max_submit_attempts.as_ref(),
            HandshakeKey::LongPromptChars => self.long_prompt_chars.as_ref(),
            HandshakeKey::ProviderBlockSecs => self.provider_block_secs.as_ref(),
            HandshakeKey::FinishIdleMs => self.finish_idle_ms.as_ref(),
            HandshakeKey::StartTimeoutSecs => self.start_timeout_secs.as_ref(),
            HandshakeKey::FreshnessCheckSecs => self.freshness_check_secs.as_ref(),
            HandshakeKey::FetchIntervalSecs => self.fetch_interval_secs.as_ref(),
            HandshakeKey::UnknownScreenSecs => self.unknown_screen_secs.as_ref(),
            HandshakeKey::TrustApplySecs => self.trust_apply_secs.as_ref(),
            HandshakeKey::HookGraceMs => self.hook_grace_ms.as_ref(),
        }
    }
}

impl ConfigFile {
    /// Parses the text of `file` and checks what the schema alone cannot (handshake ranges).
    /// Roots are checked when merged, since `~` expansion needs the home folder.
    pub fn parse(file: &Path, text: &str) -> Result<Self, ConfigError> {
        let parsed: ConfigFile =
            toml::from_str(text).map_err(|err| ConfigError::from_toml(file, text, &err))?;
        for (model, price) in &parsed.prices {
            let rates = [
                Some(price.input_per_mtok),
                Some(price.output_per_mtok),
                price.cache_read_per_mtok,
                price.cache_write_per_mtok,
            ];
            if rates
                .into_iter()
                .flatten()
                .any(|r| !r.is_finite() || r < 0.0)
            {
                return Err(ConfigError::Invalid {
                    file: file.to_path_buf(),
                    line: None,
                    key: Some(format!("prices.\"{model}\"")),
                    message: "a price must be a number of dollars, zero or more".into(),
                });
            }
        }
        for key in HandshakeKey::ALL {
            let Some(value) = parsed.handshake.get(key) else {
                continue;
            };
            let allowed = key.allowed();
            if !allowed.contains(value.get_ref()) {
                return Err(ConfigError::Invalid {
                    file: file.to_path_buf(),
                    line: Some(line_at(text, value.span().start)),
                    key: Some(format!("handshake.{}", key.name())),
                    message: format!(
                        "{} is out of range ({}..={})",
                        value.get_ref(),
                        allowed.start(),
                        allowed.end()
                    ),
                });
            }
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_an_empty_config() {
        let parsed = ConfigFile::parse(Path::new("/c.toml"), "").expect("empty parses");
        assert!(parsed.trusted_roots.is_empty());
        assert!(parsed.profiles.is_empty());
        assert!(
            parsed
                .handshake
                .get(HandshakeKey::BootTimeoutSecs)
                .is_none()
        );
    }

    #[test]
    fn out_of_range_handshake_values_name_key_and_line() {
        let text = "[handshake]\nboot_timeout_secs = 5\nmax_submit_attempts = 0\n";
        let err = ConfigFile::parse(Path::new("/c.toml"), text).expect_err("0 attempts");
        match err {
            ConfigError::Invalid { line, key, .. } => {
                assert_eq!(line, Some(3));
                assert_eq!(key.as_deref(), Some("handshake.max_submit_attempts"));
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_wrong_type_names_key_and_line() {
        let text = "\n[handshake]\nfinish_idle_ms = \"fast\"\n";
        let err = ConfigFile::parse(Path::new("/c.toml"), text).expect_err("string");
        assert_eq!(err.kind(), "invalid_config");
        assert_eq!(err.line(), Some(3));
        assert!(
            err.to_string()
                .starts_with("/c.toml:3: `handshake.finish_idle_ms`: invalid type"),
            "{err}"
        );
    }

    #[test]
    fn a_syntax_error_names_the_line() {
        let err = ConfigFile::parse(Path::new("/c.toml"), "a = 1\nb = = 2\n").expect_err("syntax");
        assert_eq!(err.line(), Some(2));
        assert_eq!(err.file(), Path::new("/c.toml"));
    }
}
