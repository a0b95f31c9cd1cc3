//! Configuration: TOML files merged in order, with the file each value came from.
//!
//! The files ([`ConfigSources`]) are, in order, `$XDG_CONFIG_HOME/clawpool/config.toml`,
//! `<repo>/.clawpool.toml`, and `--config FILE` (or `CLAWPOOL_CONFIG`); later files win.
//! [`Config::load`] reads and merges them:
//!
//! - `trusted_roots` and `denied_roots` are merged (union, in file order, `~` expanded; each
//!   must then be absolute);
//! - each `[handshake]` key is taken from the last file that sets it;
//! - `[[notify]]` entries are kept from every file, in file order ([`notify`]);
//! - `[profiles.NAME]` tables are [`crate::profiles::ManifestPatch`]es, applied to the
//!   built-in profiles in file order by [`Config::profiles`].
//!
//! Unknown keys are errors naming the file, key and line ([`ConfigError`]). Every effective
//! value keeps the file it came from ([`provenance`]), which is what `clawpool config show`
//! prints ([`show_text`], [`show_json`]). The user-facing description is `docs/config.md`.

mod error;
pub mod file;
pub mod forge;
pub mod handshake;
mod locate;
pub mod notify;
pub mod provenance;
mod repository;
pub mod sandbox;
mod show;
mod sources;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::profiles::{ProfileError, ProfileSet, SourcedPatch};
use crate::trust::expand_home;

pub use error::ConfigError;
pub use file::ConfigFile;
pub use forge::{ForgeOptions, ForgeSettings};
pub use handshake::{HandshakeKey, HandshakeOptions, HandshakeSettings};
pub use provenance::{ProfileOrigins, Sourced};
pub use sandbox::{SandboxOptions, SandboxSetting};
pub use show::{show_json, show_text};
pub use sources::ConfigSources;

use locate::line_at;
use repository::TakenRuleNames;

/// The merged configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The files that were read, in order.
    files: Vec<PathBuf>,
    trusted_roots: Vec<Sourced<PathBuf>>,
    denied_roots: Vec<Sourced<PathBuf>>,
    handshake: HandshakeOptions,
    /// Every `[profiles.NAME]` table, in file order (then by name within a file).
    patches: Vec<SourcedPatch>,
    /// Per profile, which file set each dotted path.
    origins: BTreeMap<String, ProfileOrigins>,
    /// The recovery policy file, with the configuration file that named it.
    policy: Option<Sourced<PathBuf>>,
    /// The sandbox keys (`docs/sandbox.md`).
    sandbox: SandboxOptions,
    /// Every `[[notify]]` entry, in file order.
    notify: Vec<notify::NotifyTarget>,
    /// `[prices."MODEL"]` entries, each from the last file that set it.
    prices: BTreeMap<String, Sourced<file::ModelPrice>>,
    /// The `[forge]` keys.
    forge: ForgeOptions,
}

impl Config {
    /// Reads and merges the files of `sources`. A missing user or repository file is skipped;
    /// a missing explicit file is [`ConfigError::NotFound`].
    pub fn load(sources: &ConfigSources) -> Result<Self, ConfigError> {
        let mut config = Config::default();
        for candidate in sources.candidates() {
            let path = candidate.path;
            let text = match fs::read_to_string(path) {
                Ok(text) => text,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    if candidate.required {
                        return Err(ConfigError::NotFound {
                            file: path.to_path_buf(),
                        });
                    }
                    continue;
                }
                Err(source) => {
                    return Err(ConfigError::Read {
                        file: path.to_path_buf(),
                        source,
                    });
                }
            };
            if sources.repo.as_deref() == Some(path) {
                let (profiles, rules) = known_profiles_and_rules(&config.patches);
                repository::check_repository_file(path, &text, &profiles, &rules)?;
            }
            config.merge_text(path, &text, &sources.home)?;
        }
        Ok(config)
    }

    /// Parses `text` as the file `path` and merges it over what is already loaded, as if it
    /// were the next file in order. `home` is what a leading `~` in a root expands to.
    pub fn merge_text(&mut self, path: &Path, text: &str, home: &Path) -> Result<(), ConfigError> {
        let file = ConfigFile::parse(path, text)?;
        // Check every root before changing anything, so a failed merge leaves `self` as it was.
        let trusted = expand_roots(path, text, home, "trusted_roots", &file.trusted_roots)?;
        let denied = expand_roots(path, text, home, "denied_roots", &file.denied_roots)?;
        let mut sandbox = self.sandbox.clone();
        sandbox.merge(path, text, home, &file)?;
        let notify = notify::parse_entries(path, text, &file.notify, self.notify.len())?;
        let mut forge = self.forge.clone();
        forge.merge(path, text, &file.forge)?;
        self.forge = forge;
        self.sandbox = sandbox;
        self.notify.extend(notify);
        add_roots(&mut self.trusted_roots, trusted);
        add_roots(&mut self.denied_roots, denied);
        for key in HandshakeKey::ALL {
            if let Some(value) = file.handshake.get(key) {
                self.handshake.set(
                    key,
                    Sourced {
                        value: *value.get_ref(),
                        from: path.to_path_buf(),
                    },
                );
            }
        }
        if let Some(policy) = &file.policy {
            let named = expand_home(Path::new(policy.get_ref()), home);
            let value = match path.parent() {
                Some(dir) if named.is_relative() => dir.join(named),
                _ => named,
            };
            self.policy = Some(Sourced {
                value,
                from: path.to_path_buf(),
            });
        }
        for (model, price) in file.prices {
            self.prices.insert(
                model,
                Sourced {
                    value: price,
                    from: path.to_path_buf(),
                },
            );
        }
        for (name, patch) in file.profiles {
            provenance::record_patch(self.origins.entry(name.clone()).or_default(), &patch, path);
            self.patches.push(SourcedPatch {
                profile: name,
                patch,
                file: path.display().to_string(),
                text: text.to_owned(),
            });
        }
        self.files.push(path.to_path_buf());
        Ok(())
    }

    /// The recovery policy file the configuration names, if any (else the defaults apply).
    pub fn policy_file(&self) -> Option<&Sourced<PathBuf>> {
        self.policy.as_ref()
    }

    /// The sandbox keys, each with the file that set it (`docs/sandbox.md`).
    pub fn sandbox(&self) -> &SandboxOptions {
        &self.sandbox
    }

    /// The `[forge]` keys with their defaults (`clawpool push`, `clawpool pr`).
    pub fn forge(&self) -> ForgeSettings {
        self.forge.resolve()
    }

    /// Every `[[notify]]` entry of every file, in file order.
    pub fn notify_targets(&self) -> &[notify::NotifyTarget] {
        &self.notify
    }

    /// The configured model prices (`[prices."MODEL"]`), each with the file that set it last;
    /// the shipped defaults are not among them.
    pub fn prices(&self) -> &BTreeMap<String, Sourced<file::ModelPrice>> {
        &self.prices
    }

    /// The files that were read, in merge order (missing optional files are not listed).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The trusted roots (absolute, `~` expanded), each with the first file that listed it.
    pub fn trusted_roots(&self) -> &[Sourced<PathBuf>] {
        &self.trusted_roots
    }

    /// The denied roots (absolute, `~` expanded), each with the first file that listed it.
    pub fn denied_roots(&self) -> &[Sourced<PathBuf>] {
        &self.denied_roots
    }

    /// `(trusted, denied)` roots, as [`crate::trust::TrustRoots`] takes them.
    pub fn trust_roots(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let paths = |roots: &[Sourced<PathBuf>]| roots.iter().map(|r| r.value.clone()).collect();
        (paths(&self.trusted_roots), paths(&self.denied_roots))
    }

    /// The handshake settings: each key from the last file that set it, else its default.
    pub fn handshake(&self) -> HandshakeSettings {
        self.handshake.resolve()
    }

    /// The merged `[handshake]` keys with the file each came from.
    pub fn handshake_options(&self) -> &HandshakeOptions {
        &self.handshake
    }

    /// Every `[profiles.NAME]` table, in file order.
    pub fn profile_patches(&self) -> &[SourcedPatch] {
        &self.patches
    }

    /// For profile `name`, the dotted paths configuration set (`launch.command`,
    /// `launch.env.FOO`, `rules.my_rule`, `dialogs.trust.policy`, …) and the file that set
    /// each last. `None` when no file mentions the profile: all of it is built-in.
    pub fn profile_origins(&self, name: &str) -> Option<&ProfileOrigins> {
        self.origins.get(name)
    }

    /// The built-in profiles with every `[profiles.NAME]` table applied in file order, and
    /// compiled. Errors in what a file brought (a bad regex, an unknown dialog) name that file.
    pub fn profiles(&self) -> Result<ProfileSet, ProfileError> {
        ProfileSet::with_patches(&self.patches)
    }
}

/// `roots` of one file with `~` expanded; each must then be absolute.
fn expand_roots(
    file: &Path,
    text: &str,
    home: &Path,
    key: &str,
    roots: &[toml::Spanned<String>],
) -> Result<Vec<Sourced<PathBuf>>, ConfigError> {
    roots
        .iter()
        .map(|root| {
            let expanded = expand_home(Path::new(root.get_ref()), home);
            if !expanded.is_absolute() {
                return Err(ConfigError::Invalid {
                    file: file.to_path_buf(),
                    line: Some(line_at(text, root.span().start)),
                    key: Some(key.to_owned()),
                    message: format!(
                        "root {:?} is not absolute; write it as an absolute path or as ~/…",
                        root.get_ref()
                    ),
                });
            }
            Ok(Sourced {
                value: expanded,
                from: file.to_path_buf(),
            })
        })
        .collect()
}

/// Appends the roots not already listed; a root listed again keeps its first file.
fn add_roots(list: &mut Vec<Sourced<PathBuf>>, roots: Vec<Sourced<PathBuf>>) {
    for root in roots {
        // `Path` equality compares components, so `/a/b/` and `/a/b` are one root.
        if !list.iter().any(|known| known.value == root.value) {
            list.push(root);
        }
    }
}

/// The profiles and rule names a repository's file is checked against: the built-in ones and
/// whatever the configuration files before it added.
fn known_profiles_and_rules(patches: &[SourcedPatch]) -> (BTreeSet<String>, TakenRuleNames) {
    let mut profiles = BTreeSet::new();
    let mut rules = TakenRuleNames::new();
    if let Ok(builtin) = ProfileSet::builtin() {
        for profile in builtin.iter() {
            profiles.insert(profile.name().to_owned());
            for rule in &profile.manifest.rules {
                rules.insert((profile.name().to_owned(), rule.name.clone()));
            }
        }
    }
    for sourced in patches {
        profiles.insert(sourced.profile.clone());
        for rule in &sourced.patch.rules {
            rules.insert((sourced.profile.clone(), rule.name.clone()));
        }
    }
    (profiles, rules)
}
