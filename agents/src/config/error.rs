//! Configuration errors. Every one names the file, and the line and key when there is one,
//! because a config mistake should be fixable without guessing which of three files it is in.

use std::io;
use std::path::{Path, PathBuf};

use super::locate::{key_path_at, line_at};

/// A configuration that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file given by `--config` or `CLAWPOOL_CONFIG` does not exist.
    #[error("config file {} does not exist (given by --config or CLAWPOOL_CONFIG)", file.display())]
    NotFound {
        /// The file asked for.
        file: PathBuf,
    },
    /// A file exists but cannot be read (permissions, a folder, not UTF-8).
    #[error("cannot read config file {}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A key no configuration has (usually a typo).
    #[error("{}: unknown key `{key}` ({message})", location(file, *line))]
    UnknownKey {
        /// The file.
        file: PathBuf,
        /// The key's line, when known.
        line: Option<usize>,
        /// The key's dotted path (`handshake.boot_timeout`), or its bare name when the path
        /// cannot be recovered.
        key: String,
        /// The parser's message, which lists the keys allowed there.
        message: String,
    },
    /// Not valid TOML, a value of the wrong type, or a value out of range.
    #[error("{}: {}{message}", location(file, *line), key_prefix(key.as_deref()))]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// The key the bad value belongs to, when known.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
}

fn location(file: &Path, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{}:{line}", file.display()),
        None => file.display().to_string(),
    }
}

/// "`key`: " before a message, when the key is known.
fn key_prefix(key: Option<&str>) -> String {
    key.map(|k| format!("`{k}`: ")).unwrap_or_default()
}

impl ConfigError {
    /// A stable name for the kind of error, for `--output-format json` (`error.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            ConfigError::NotFound { .. } => "config_not_found",
            ConfigError::Read { .. } => "io",
            ConfigError::UnknownKey { .. } => "unknown_key",
            ConfigError::Invalid { .. } => "invalid_config",
        }
    }

    /// The file the problem is in.
    pub fn file(&self) -> &Path {
        match self {
            ConfigError::NotFound { file }
            | ConfigError::Read { file, .. }
            | ConfigError::UnknownKey { file, .. }
            | ConfigError::Invalid { file, .. } => file,
        }
    }

    /// The line the problem is on, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::NotFound { .. } | ConfigError::Read { .. } => None,
            ConfigError::UnknownKey { line, .. } | ConfigError::Invalid { line, .. } => *line,
        }
    }

    /// A TOML error (syntax, type, or an unknown key refused by `deny_unknown_fields`) located
    /// in `file`.
    pub(crate) fn from_toml(file: &Path, text: &str, err: &toml::de::Error) -> Self {
        let offset = err.span().map(|span| span.start);
        let line = offset.map(|offset| line_at(text, offset));
        let path = offset.and_then(|offset| key_path_at(text, offset));
        let message = err.message().trim_end().to_owned();
        match unknown_field(&message) {
            Some(name) => ConfigError::UnknownKey {
                file: file.to_path_buf(),
                line,
                key: path.unwrap_or_else(|| name.to_owned()),
                message,
            },
            None => ConfigError::Invalid {
                file: file.to_path_buf(),
                line,
                key: path,
                message,
            },
        }
    }
}

/// The field name in serde's "unknown field `x`, expected …" message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_name_is_extracted() {
        assert_eq!(
            unknown_field("unknown field `bogus`, expected `a` or `b`"),
            Some("bogus")
        );
        assert_eq!(unknown_field("invalid type: string"), None);
    }

    #[test]
    fn display_names_file_line_and_key() {
        let err = ConfigError::UnknownKey {
            file: PathBuf::from("/c.toml"),
            line: Some(3),
            key: "handshake.x".into(),
            message: "unknown field `x`".into(),
        };
        assert_eq!(
            err.to_string(),
            "/c.toml:3: unknown key `handshake.x` (unknown field `x`)"
        );
        let err = ConfigError::Invalid {
            file: PathBuf::from("/c.toml"),
            line: None,
            key: None,
            message: "bad".into(),
        };
        assert_eq!(err.to_string(), "/c.toml: bad");
    }
}
