//! Configuration and profiles as the commands use them: loaded once from the layered files.

use std::path::{Path, PathBuf};

use clawpool_agents::config::{Config, ConfigSources, show_json, show_text};
use clawpool_agents::profiles::ProfileSet;
use clawpool_agents::trust::TrustRoots;
use clawpool_lane::handshake::Settings;

use crate::cli::{ConfigFlag, OutputFormat};
use crate::output::CommandError;

/// The merged configuration and what it resolves to.
pub struct Loaded {
    pub config: Config,
    pub sources: ConfigSources,
    pub profiles: ProfileSet,
    pub roots: TrustRoots,
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
    /// This process's: its flag and its environment.
    pub fn of_this_process(flag: &ConfigFlag) -> Self {
        let absolute = |path: PathBuf| std::path::absolute(&path).unwrap_or(path);
        let set = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| !p.as_os_str().is_empty())
        };
        Self {
            explicit: flag.config.clone().map(absolute),
            env_config: set("CLAWPOOL_CONFIG").map(absolute),
            home: set("HOME").unwrap_or_else(|| PathBuf::from("/")),
            xdg: set("XDG_CONFIG_HOME"),
        }
    }
}

impl Loaded {
    /// Loads the user's, the repository's (for the repository containing `lane_dir`, or the
    /// current folder) and the explicit configuration file.
    pub fn load(flag: &ConfigFlag, lane_dir: Option<&Path>) -> Result<Self, CommandError> {
        Self::load_input(&ConfigInput::of_this_process(flag), lane_dir)
    }

    /// [`Loaded::load`] from `input` rather than this process's flag and environment.
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

    /// Prints the merged configuration.
    pub fn show(&self, format: OutputFormat) {
        match format {
            OutputFormat::Text => print!("{}", show_text(&self.config, &self.profiles)),
            OutputFormat::Json => println!("{}", show_json(&self.config, &self.profiles)),
        }
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
