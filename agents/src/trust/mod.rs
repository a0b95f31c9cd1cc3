//! Trust resolution: whether a lane's folder may be trusted, and telling the agent so.
//!
//! Agents ask before working in a folder they have not seen ("Do you trust the files in this
//! folder?"). clawpool answers that question from configuration, never by default:
//!
//! - [`roots`] decides: a lane is trusted only when its canonical path is equal to or inside a
//!   configured trusted root and not inside a denied root (denied wins). It also lists what
//!   `clawpool doctor` should warn about.
//! - [`claude`], [`codex`] and [`gemini`] (also Qwen Code's store) pre-seed the agents' own trust stores for one exact path, so a
//!   trusted lane usually never shows the dialog (the handshake still answers it if it does).
//! - [`confine`] keeps what an agent records when clawpool answers its trust dialog to that
//!   one lane (agents record trust for the whole repository).
//! - `atomic` (private) is how those stores are edited: locked read-modify-write, atomic
//!   replace, permissions kept.
//!
//! The rules are described for users in `docs/trust.md`.

mod atomic;
pub mod claude;
pub mod codex;
pub mod confine;
mod error;
pub mod gemini;
pub mod roots;

pub use claude::{claude_config_file, seed_claude_trust};
pub use codex::{codex_config_file, seed_codex_trust};
pub use confine::{Confined, StoreGuard};
pub use error::TrustError;
pub use gemini::{gemini_trusted_folders_file, qwen_trusted_folders_file, seed_gemini_trust};
pub use roots::{RootKind, TrustDecision, TrustRoots, TrustWarning, expand_home};

use std::path::Path;

/// What seeding an agent's trust store did, so callers can record it (events, doctor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeedOutcome {
    /// The store already trusted that exact path; the file was not rewritten.
    AlreadyTrusted,
    /// The entry was added or changed, and the file rewritten.
    Seeded,
}

/// The string a project path is stored under; trust stores only know absolute UTF-8 paths.
pub(crate) fn project_key(project: &Path) -> Result<&str, TrustError> {
    if !project.is_absolute() {
        return Err(TrustError::ProjectNotAbsolute {
            path: project.to_path_buf(),
        });
    }
    project.to_str().ok_or_else(|| TrustError::ProjectNotUtf8 {
        path: project.to_path_buf(),
    })
}
