//! The pool's input: the configuration and profiles, loaded once from the layered files
//! (user, repository, `--config`, `CLAWPOOL_CONFIG`) into what lanes are planned, started and
//! adopted with. Where the files are is the caller's ([`ConfigInput`]); printing them is the
//! binary's.

use std::path::{Path, PathBuf};

use clawpool_agents::config::{Config, ConfigSources};
use clawpool_agents::profiles::ProfileSet;
use clawpool_agents::trust::TrustRoots;
use clawpool_lane::handshake::Settings;

use crate::error::CommandError;

/// The merged configuration and what it resolves to.
pub struct Loaded {
    /// The merged configuration, each value with the file it came from.
    pub config: Config,
    /// The files it was read from (those that exist and those that would have been).
    pub sources: ConfigSources,
    /// The agent profiles: the shipped ones, the configured ones over them.
    pub profiles: ProfileSet,
    /// The trusted and denied folders.
    pub roots: TrustRoots,
    /// The handshake's timings and limits.
    pub settings: Settings,
    /// The recovery policy: the configured file, or the shipped defaults.
    pub policy: std::sync::Arc<clawpool_recovery::Policy>,
    /// What lanes price their agents' usage with: the shipped prices, the configured ones
    /// over them.
    pub prices: std::sync::Arc<clawpool_lanes::cost::PriceTable>,
}

/// Where a command's configuration comes from: its `--config` flag and the environment that
/// locates the others. A `spawn` handed to the daemon sends its own, so the daemon starts the
/// lanes with the configuration the command was given, not the one the daemon started with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigInput {
    /// `--config`, made absolute against the command's folder.
    pub explicit: Option<PathBuf>,
    /// `CLAWPOOL_CONFIG`, made absolute the same way.
    pub env_config: Option<PathBuf>,
    /// `HOME`: the user's configuration is under it.
    pub home: PathBuf,
    /// `XDG_CONFIG_HOME`, when set.
    pub xdg: Option<PathBuf>,
}

impl ConfigInput {
    /// This process's: its `--config` flag (`explicit`) and its environment.
    pub fn of_this_process(explicit: Option<&Path>) -> Self {
        let absolute = |path: PathBuf| std::path::absolute(&path).unwrap_or(path);
        let set = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| !p.as_os_str().is_empty())
        };
        Self {
            explicit: explicit.map(Path::to_owned).map(absolute),
            env_config: set("CLAWPOOL_CONFIG").map(absolute),
            home: set("HOME").unwrap_or_else(|| PathBuf::from("/")),
            xdg: set("XDG_CONFIG_HOME"),
        }
    }
}

impl Loaded {
    /// Loads the user's, the repository's (for the repository containing `lane_dir`, or the
    /// current folder) and the explicit configuration file, as `input` locates them.
    pub fn load_input(input: &ConfigInput, lane_dir: Option<&Path>) -> Result<Self, CommandError> {
        let repo = repo_root(lane_dir.unwrap_or(Path::new(".")));
        let sources = ConfigSources::discover(
            &input.home,
            input.xdg.as_deref(),
            repo.as_deref(),
            input.explicit.as_deref(),
            input.env_config.as_deref(),
        );
        let config = Config::load(&sources)
            .map_err(|e| CommandError::invalid("invalid_config", e.to_string()))?;
        let profiles = config
            .profiles()
            .map_err(|e| CommandError::invalid("invalid_profile", e.to_string()))?;
        let (trusted, denied) = config.trust_roots();
        let settings = config.handshake();
        let policy = match config.policy_file() {
            None => clawpool_recovery::Policy::defaults()
                .map_err(|e| CommandError::invalid("invalid_policy", e.to_string()))?,
            Some(file) => {
                let text = std::fs::read_to_string(&file.value).map_err(|e| {
                    CommandError::invalid(
                        "invalid_policy",
                        format!(
                            "cannot read the policy file {} (named in {}): {e}",
                            file.value.display(),
                            file.from.display()
                        ),
                    )
                })?;
                clawpool_recovery::Policy::from_toml(&text, &file.value.display().to_string())
                    .map_err(|e| CommandError::invalid("invalid_policy", e.to_string()))?
            }
        };
        let mut prices = clawpool_lanes::cost::PriceTable::shipped();
        for (model, price) in config.prices() {
            let price = &price.value;
            prices.set(
                model.clone(),
                clawpool_lanes::cost::Price {
                    input_per_mtok: price.input_per_mtok,
                    output_per_mtok: price.output_per_mtok,
                    cache_read_per_mtok: price.cache_read_per_mtok,
                    cache_write_per_mtok: price.cache_write_per_mtok,
                    as_of: price.as_of.clone().unwrap_or_else(|| "configured".into()),
                },
            );
        }
        Ok(Self {
            prices: std::sync::Arc::new(prices),
            policy: std::sync::Arc::new(policy),
            config,
            sources,
            profiles,
            roots: TrustRoots { trusted, denied },
            settings,
        })
    }

    /// The configuration files that exist, in the order they were read.
    pub fn source_files(&self) -> Vec<String> {
        [
            &self.sources.user,
            &self.sources.repo,
            &self.sources.explicit,
        ]
        .into_iter()
        .flatten()
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .collect()
    }
}

fn repo_root(dir: &Path) -> Option<PathBuf> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}
