//! The bearer tokens of `clawpool mcp --listen` (`docs/mcp.md`, "Over HTTP"): the token file
//! `<git common dir>/clawpool/mcp-tokens.json`, its one writer (`clawpool mcp token`, which
//! makes and revokes) and the lookup a request's `Authorization` goes through.
//!
//! The file holds each token's SHA-256, never the token: every lane's worktree shares the git
//! common dir, so a lane's agent can read the file, and must find nothing there that lets it in.
//! The token itself is printed once, to whoever ran `clawpool mcp token`. The file is written
//! whole (a temporary file renamed over it) with mode 0600.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::access::Tier;

/// The token file's name in the repository's clawpool folder.
pub const TOKEN_FILE: &str = "mcp-tokens.json";

/// What a token starts with, so a leaked one is recognisable.
const PREFIX: &str = "clawpool_";

/// The token file.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct TokenFile {
    pub tokens: Vec<TokenEntry>,
}

/// One token: its tier and digest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenEntry {
    /// Names the token in the audit log (the first 12 hex digits of its digest).
    pub id: String,
    pub tier: Tier,
    /// SHA-256 of the token, in hex.
    pub sha256: String,
    /// Whatever the person called it (`--label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub created_at_ms: u64,
}

/// What a request's token grants: put in the HTTP request's extensions by the listener, read by
/// each tool (`server.rs`).
#[derive(Debug, Clone)]
pub struct Grant {
    pub tier: Tier,
    /// The token's id.
    pub token: String,
    /// The peer's pid, on a Unix socket.
    pub peer_pid: Option<u32>,
}

/// The repository's token file.
#[derive(Debug, Clone)]
pub struct Tokens {
    path: PathBuf,
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Tokens {
    /// The token file in the clawpool folder `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            path: dir.join(TOKEN_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's tokens; no file is no tokens.
    pub fn read(&self) -> std::io::Result<TokenFile> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::other(format!("{} is not a token file: {e}", self.path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TokenFile::default()),
            Err(e) => Err(e),
        }
    }

    /// The grant of `token`, if it is one of the file's. The file is read at each request, so a
    /// token removed from it stops working at once.
    pub fn check(&self, token: &str) -> Option<TokenEntry> {
        let digest = hex_sha256(token.as_bytes());
        self.read()
            .ok()?
            .tokens
            .into_iter()
            .find(|t| t.sha256 == digest)
    }

    /// Makes a new token at `tier`, records its digest, and answers the token and its entry.
    pub fn create(
        &self,
        tier: Tier,
        label: Option<String>,
    ) -> std::io::Result<(String, TokenEntry)> {
        let mut secret = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut secret)?;
        let token = format!(
            "{PREFIX}{}",
            secret
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let sha256 = hex_sha256(token.as_bytes());
        let entry = TokenEntry {
            id: sha256[..12].to_owned(),
            tier,
            sha256,
            label,
            created_at_ms: clawpool_lanes::now_ms(),
        };
        let mut file = self.read()?;
        file.tokens.push(entry.clone());
        self.write(&file)?;
        Ok((token, entry))
    }

    /// Removes the token whose id is `id`, answering its entry; `None` when no token has it
    /// (the file is then left as it was).
    pub fn revoke(&self, id: &str) -> std::io::Result<Option<TokenEntry>> {
        let mut file = self.read()?;
        let Some(at) = file.tokens.iter().position(|t| t.id == id) else {
            return Ok(None);
        };
        let entry = file.tokens.remove(at);
        self.write(&file)?;
        Ok(Some(entry))
    }

    fn write(&self, file: &TokenFile) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".{TOKEN_FILE}.{}", std::process::id()));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        // An older file of another mode: the rename below replaces it, mode and all.
        out.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        let mut json = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
        json.push(b'\n');
        out.write_all(&json)?;
        out.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_token_is_checked_by_its_digest_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokens = Tokens::in_dir(dir.path());
        let (token, entry) = tokens.create(Tier::Read, None).expect("created");
        assert!(token.starts_with(PREFIX) && token.len() == PREFIX.len() + 64);
        let text = std::fs::read_to_string(tokens.path()).expect("file");
        assert!(!text.contains(&token), "the token itself is not stored");
        let mode = std::fs::metadata(tokens.path())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(tokens.check(&token).map(|e| e.id), Some(entry.id));
        assert!(tokens.check("clawpool_wrong").is_none());
        assert!(
            tokens.check(&entry.sha256).is_none(),
            "the digest is no token"
        );
    }

    #[test]
    fn a_revoked_token_no_longer_checks_and_the_others_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokens = Tokens::in_dir(dir.path());
        let (gone, gone_entry) = tokens.create(Tier::Operate, None).expect("created");
        let (kept, kept_entry) = tokens.create(Tier::Read, None).expect("created");
        let revoked = tokens.revoke(&gone_entry.id).expect("revoked");
        assert_eq!(revoked.map(|e| e.id), Some(gone_entry.id.clone()));
        assert!(tokens.check(&gone).is_none());
        assert_eq!(tokens.check(&kept).map(|e| e.id), Some(kept_entry.id));
        assert!(tokens.revoke(&gone_entry.id).expect("read").is_none());
    }
}
