//! The sandbox keys of a configuration file (`docs/sandbox.md`): `sandbox`, `network`,
//! `sandbox_rw` and `bwrap`, checked when a file is merged and kept with the file that set
//! each. `sandbox` and `network` come from the last file that sets them; `sandbox_rw` is the
//! union of every file's paths. A repository's own `.clawpool.toml` may set none of them
//! (`repository.rs`): a sandbox is the user's decision about the code, not the code's.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::error::ConfigError;
use super::locate::line_at;
use super::provenance::Sourced;
use crate::trust::expand_home;

/// The configured sandbox mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxSetting {
    /// `sandbox = "workspace"`: every lane's agent runs confined to its worktree.
    Workspace,
    /// `sandbox = "off"`: no lane's agent is confined unless its packet lane asks.
    Off,
}

impl SandboxSetting {
    /// Its name in a file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Off => "off",
        }
    }
}

/// The merged sandbox keys.
#[derive(Debug, Clone, Default)]
pub struct SandboxOptions {
    /// `sandbox`; unset, a lane's default follows its permission profile.
    pub mode: Option<Sourced<SandboxSetting>>,
    /// `network = "none"`: sandboxed lanes get no network but a loopback of their own.
    pub network_none: Option<Sourced<bool>>,
    /// `sandbox_rw`: extra paths every sandboxed lane may write (absolute, `~` expanded).
    pub rw: Vec<Sourced<PathBuf>>,
    /// `bwrap`: the bubblewrap program (default: `bwrap` on `PATH`).
    pub bwrap: Option<Sourced<PathBuf>>,
}

impl SandboxOptions {
    /// Merges the keys of `file` (text `text`) over these; nothing changes on an error.
    pub(crate) fn merge(
        &mut self,
        file: &Path,
        text: &str,
        home: &Path,
        keys: &super::ConfigFile,
    ) -> Result<(), ConfigError> {
        let invalid = |at: usize, key: &str, message: String| ConfigError::Invalid {
            file: file.to_path_buf(),
            line: Some(line_at(text, at)),
            key: Some(key.to_owned()),
            message,
        };
        let mode = match &keys.sandbox {
            Some(value) => Some(match value.get_ref().as_str() {
                "workspace" => SandboxSetting::Workspace,
                "off" => SandboxSetting::Off,
                other => {
                    return Err(invalid(
                        value.span().start,
                        "sandbox",
                        format!(
                            "{other:?} is not a sandbox mode; expected \"workspace\" or \"off\""
                        ),
                    ));
                }
            }),
            None => None,
        };
        let network_none = match &keys.network {
            Some(value) => Some(match value.get_ref().as_str() {
                "none" => true,
                "shared" => false,
                other => {
                    return Err(invalid(
                        value.span().start,
                        "network",
                        format!(
                            "{other:?} is not a sandbox network; expected \"shared\" or \"none\""
                        ),
                    ));
                }
            }),
            None => None,
        };
        let absolute = |value: &Spanned<String>, key: &str| {
            let path = expand_home(Path::new(value.get_ref()), home);
            if path.is_absolute() {
                Ok(path)
            } else {
                Err(invalid(
                    value.span().start,
                    key,
                    format!(
                        "{:?} is not absolute; write it as an absolute path or as ~/…",
                        value.get_ref()
                    ),
                ))
            }
        };
        let rw = keys
            .sandbox_rw
            .iter()
            .map(|value| absolute(value, "sandbox_rw"))
            .collect::<Result<Vec<_>, _>>()?;
        let bwrap = match &keys.bwrap {
            Some(value) => Some(absolute(value, "bwrap")?),
            None => None,
        };
        fn sourced<T>(value: T, file: &Path) -> Sourced<T> {
            Sourced {
                value,
                from: file.to_path_buf(),
            }
        }
        if let Some(mode) = mode {
            self.mode = Some(sourced(mode, file));
        }
        if let Some(none) = network_none {
            self.network_none = Some(sourced(none, file));
        }
        for path in rw {
            if !self.rw.iter().any(|known| known.value == path) {
                self.rw.push(sourced(path, file));
            }
        }
        if let Some(bwrap) = bwrap {
            self.bwrap = Some(sourced(bwrap, file));
        }
        Ok(())
    }
}
