//! Errors as people and programs read them: a message and an exit code, or in JSON mode one
//! JSON document on stderr with a stable `kind`.

use std::process::ExitCode;

pub use clawpool_pool::error::{CommandError, EXIT_FAILURE, EXIT_INVALID_INPUT};
use serde_json::json;

use crate::cli::OutputFormat;

/// Prints the error on stderr in the chosen format and returns the exit code.
pub fn report(err: &CommandError, format: OutputFormat) -> ExitCode {
    match format {
        OutputFormat::Text => eprintln!("clawpool: error: {}", err.message),
        OutputFormat::Json => eprintln!(
            "{}",
            json!({"error": {"kind": err.kind, "message": err.message}})
        ),
    }
    ExitCode::from(err.exit)
}
