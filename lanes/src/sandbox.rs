//! What a lane's sandbox is (`docs/sandbox.md`): its mode, its network and the extra folders
//! it may write. The same shape is in the lane's registry entry (so a supervisor that adopts
//! the lane, or resumes it, starts its agent again in the same sandbox) and in its state file
//! (so the board and `clawpool state` say which lanes are sandboxed). Building the sandbox is
//! the lane engine's (`clawpool_lane::sandbox`); this crate only names it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The sandbox modes a configuration or a packet lane may ask for.
pub const SANDBOX_MODES: &[&str] = &["workspace", "off"];

/// Whether a lane's agent runs in a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Today's behaviour: the agent runs as the user, with the user's every right.
    #[default]
    Off,
    /// Under bubblewrap: everything read-only but the lane's worktree, what git needs to
    /// commit from it, the agent's own state, and a private `/tmp`.
    Workspace,
}

impl SandboxMode {
    /// The mode of its wire name (`workspace`, `off`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "workspace" => Some(Self::Workspace),
            "off" => Some(Self::Off),
            _ => None,
        }
    }

    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Workspace => "workspace",
        }
    }
}

/// A sandboxed lane's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxNetwork {
    /// The machine's network, shared: the agent reaches its model (and anything else).
    #[default]
    Shared,
    /// A network namespace of its own with only a loopback of its own: for agents whose model
    /// is local to the sandbox, or that need none.
    None,
}

impl SandboxNetwork {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::None => "none",
        }
    }
}

/// A lane's sandbox: set when the lane's agent runs in one, absent when it does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneSandbox {
    /// Always [`SandboxMode::Workspace`] today; named so that a reader need not infer it.
    pub mode: SandboxMode,
    /// Its network.
    #[serde(default)]
    pub network: SandboxNetwork,
    /// Folders or files the configuration lets this lane write besides its own
    /// (`sandbox_rw`), absolute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rw: Vec<PathBuf>,
}
