//! Who may call what on `clawpool mcp`: the permission tiers, and the audit log of every call
//! that changes something (`docs/mcp.md`, "Tiers" and "Audit log").
//!
//! A server is launched with one tier (`--tier`); each tool needs one. `read` sees (state,
//! events, board, wait), `operate` also acts on lanes (spawn, send, stop, restart, recover,
//! verify, merge-forward), `admin` also answers for a person (trust a folder, answer a dialog
//! or a permission question): the calls that widen what a lane's agent may do.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;
use sha2::{Digest, Sha256};

pub use crate::cli::Tier;

/// One line of the audit log.
#[derive(Debug, Serialize)]
pub struct AuditEntry<'a> {
    /// When, in milliseconds since the epoch.
    pub at_ms: u64,
    /// The client: its name and version from the MCP handshake, and the process that launched
    /// this server (for stdio, the client itself) or the token it presented (HTTP).
    pub who: &'a Who,
    /// The caller's tier (`null`: an HTTP request without a token's).
    pub tier: Option<Tier>,
    /// The tool called.
    pub tool: &'a str,
    /// SHA-256 of the call's arguments as JSON (the arguments themselves may hold a prompt).
    pub args_sha256: String,
    /// `done`, `refused` (the tier, or the lane said no) or `failed`.
    pub verdict: &'a str,
    /// The error's `kind` when not done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'a str>,
}

/// Who calls.
#[derive(Debug, Clone, Serialize)]
pub struct Who {
    pub client: Option<String>,
    pub client_version: Option<String>,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Stdio: the process that launched the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_pid: Option<u32>,
    /// HTTP: the bearer token's id (`mcp-tokens.json`), never the token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// HTTP on a Unix socket: the peer process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_pid: Option<u32>,
    /// The server's user.
    pub uid: u32,
}

/// The repository's audit log: `<git common dir>/clawpool/audit.jsonl`, one JSON line per call.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// Appends `entry` as one line. A log that cannot be written refuses the call: a change
    /// that leaves no record is not made (the caller checks this before acting).
    pub fn append(&self, entry: &AuditEntry<'_>) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // O_APPEND: each line lands whole at the end, whatever other servers write.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?
            .write_all(&line)
    }
}

/// The SHA-256 of `args` as JSON, in hex.
pub fn digest(args: &impl Serialize) -> String {
    let json = serde_json::to_vec(args).unwrap_or_default();
    Sha256::digest(&json)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_are_ordered_read_operate_admin() {
        assert!(Tier::Read < Tier::Operate && Tier::Operate < Tier::Admin);
    }

    #[test]
    fn the_digest_is_sha256_of_the_json() {
        assert_eq!(
            digest(&serde_json::json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
