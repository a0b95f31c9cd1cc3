//! The configuration as the commands use it: the pool loads it ([`clawpool_pool::config`]);
//! the binary turns its `--config` flag into the pool's [`ConfigInput`] and prints the merged
//! configuration for `clawpool config show`.

use std::path::Path;

use clawpool_agents::config::{show_json, show_text};
pub use clawpool_pool::config::{ConfigInput, Loaded};

use crate::cli::{ConfigFlag, OutputFormat};
use crate::output::CommandError;

/// This process's configuration input: its `--config` flag and its environment.
pub fn input(flag: &ConfigFlag) -> ConfigInput {
    ConfigInput::of_this_process(flag.config.as_deref())
}

/// Loads the user's, the repository's (for the repository containing `lane_dir`, or the
/// current folder) and the explicit configuration file.
pub fn load(flag: &ConfigFlag, lane_dir: Option<&Path>) -> Result<Loaded, CommandError> {
    Loaded::load_input(&input(flag), lane_dir)
}

/// Prints the merged configuration.
pub fn show(loaded: &Loaded, format: OutputFormat) {
    match format {
        OutputFormat::Text => print!("{}", show_text(&loaded.config, &loaded.profiles)),
        OutputFormat::Json => println!("{}", show_json(&loaded.config, &loaded.profiles)),
    }
}
