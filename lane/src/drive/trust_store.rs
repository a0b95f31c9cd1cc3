//! The agent's own trust store as a lane sees it: where it is, and seeding it for a lane under
//! a trusted root.

use std::path::{Path, PathBuf};

use clawpool_agents::profiles::{Profile, TrustStore};
use clawpool_agents::trust::{
    claude_config_file, codex_config_file, gemini_trusted_folders_file, qwen_trusted_folders_file,
    seed_claude_trust, seed_codex_trust, seed_gemini_trust,
};
use clawpool_lanes::EventLog;
use clawpool_lanes::payload::{Payload, TrustStoreSeeded};
use clawpool_pty::SpawnSpec;

/// The agent's trust store file as the agent will find it (its HOME, `CLAUDE_CONFIG_DIR` or
/// `CODEX_HOME`, `GEMINI_CLI_HOME` or `GEMINI_CLI_TRUSTED_FOLDERS_PATH`, `QWEN_HOME` or
/// `QWEN_CODE_TRUSTED_FOLDERS_PATH` as the lane's environment sets them); `None` for an agent
/// without one.
pub(super) fn trust_store_file(
    profile: &Profile,
    spec: &SpawnSpec,
) -> Option<(TrustStore, PathBuf)> {
    let home = spec
        .env_value("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let store = profile.manifest.launch.trust_store;
    let file = match store {
        TrustStore::None => return None,
        TrustStore::Claude => claude_config_file(
            &home,
            spec.env_value("CLAUDE_CONFIG_DIR")
                .as_deref()
                .map(Path::new),
        ),
        TrustStore::Codex => codex_config_file(
            &home,
            spec.env_value("CODEX_HOME").as_deref().map(Path::new),
        ),
        TrustStore::Gemini => gemini_trusted_folders_file(
            &home,
            spec.env_value("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
                .as_deref()
                .map(Path::new),
            spec.env_value("GEMINI_CLI_HOME").as_deref().map(Path::new),
        ),
        TrustStore::Qwen => qwen_trusted_folders_file(
            &home,
            spec.env_value("QWEN_CODE_TRUSTED_FOLDERS_PATH")
                .as_deref()
                .map(Path::new),
            spec.env_value("QWEN_HOME").as_deref().map(Path::new),
        ),
    };
    Some((store, file))
}

/// Records the lane's folder as trusted in the agent's store before it starts.
pub(super) fn seed_trust_store(profile: &Profile, cwd: &Path, spec: &SpawnSpec, events: &EventLog) {
    let Some((kind, store)) = trust_store_file(profile, spec) else {
        return;
    };
    let result = match kind {
        TrustStore::Claude => seed_claude_trust(&store, cwd),
        TrustStore::Codex => seed_codex_trust(&store, cwd),
        TrustStore::Gemini | TrustStore::Qwen => seed_gemini_trust(&store, cwd),
        TrustStore::None => return,
    };
    let seeded = TrustStoreSeeded {
        store: store.display().to_string(),
        outcome: result.as_ref().ok().map(|outcome| format!("{outcome:?}")),
        error: result.err().map(|err| err.to_string()),
    };
    let _ = events.report(Payload::TrustStoreSeeded(seeded), None, None, None);
}
