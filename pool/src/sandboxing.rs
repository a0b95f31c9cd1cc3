//! Which lanes run sandboxed (`docs/sandbox.md`, "Which lanes"): a packet lane's `sandbox`,
//! else the configuration's, else `workspace` for a lane whose permission profile lets its
//! agent act without a person (`danger-full-access`) and `off` for the others — and the
//! doctor's finding on whether bubblewrap can make a sandbox on this machine.

use std::ffi::OsString;

use clawpool_agents::config::{Config, SandboxSetting};
use clawpool_lane::sandbox::{DEFAULT_BWRAP, SandboxRequest, probe};
use clawpool_lanes::{LaneSandbox, SandboxMode, SandboxNetwork};
use clawpool_recovery::permissions::Profile;

/// The sandbox a lane runs in, from its packet's `sandbox` (already checked to be a known
/// mode), the configuration and its permission profile; `None` when it runs unconfined.
pub fn lane_request(
    config: &Config,
    packet: Option<&str>,
    profile: Profile,
) -> Option<SandboxRequest> {
    let options = config.sandbox();
    let mode = match packet.and_then(SandboxMode::parse) {
        Some(mode) => mode,
        None => match options.mode.as_ref().map(|m| m.value) {
            Some(SandboxSetting::Workspace) => SandboxMode::Workspace,
            Some(SandboxSetting::Off) => SandboxMode::Off,
            None if profile == Profile::DangerFullAccess => SandboxMode::Workspace,
            None => SandboxMode::Off,
        },
    };
    if mode == SandboxMode::Off {
        return None;
    }
    Some(request_for(
        config,
        LaneSandbox {
            mode,
            network: if options.network_none.as_ref().is_some_and(|n| n.value) {
                SandboxNetwork::None
            } else {
                SandboxNetwork::Shared
            },
            rw: options.rw.iter().map(|p| p.value.clone()).collect(),
        },
    ))
}

/// The request that builds `lane` (as a registry entry recorded it) with the configured
/// bubblewrap: what a supervisor that adopts or resumes the lane starts its agent in.
pub fn request_for(config: &Config, lane: LaneSandbox) -> SandboxRequest {
    SandboxRequest {
        lane,
        bwrap: bwrap(config),
    }
}

/// The configured bubblewrap program, else `bwrap` on `PATH`.
pub fn bwrap(config: &Config) -> OsString {
    config.sandbox().bwrap.as_ref().map_or_else(
        || DEFAULT_BWRAP.into(),
        |b| b.value.clone().into_os_string(),
    )
}

/// Whether sandboxed lanes can start here: the bubblewrap found and a trivial sandbox run in
/// it, or why not.
pub fn doctor_finding(config: &Config) -> Result<String, String> {
    let path = std::env::var_os("PATH");
    probe(&bwrap(config), path.as_deref()).map(|program| {
        format!(
            "{} makes sandboxes here (user namespaces allowed; docs/sandbox.md)",
            program.display()
        )
    })
}
