//! `clawpool doctor`: what lanes need before a batch starts, checked without changing
//! anything — tools, each agent in use and whether its version is the one its profile was
//! verified on, trusted roots, state folders, sandboxes, grants, channels, notifications.

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clawpool_agents::trust::{RootKind, TrustWarning};
use clawpool_lanes::WorkerStateDoc;
use serde_json::json;

use crate::cli::{DoctorArgs, OutputFormat};
use crate::loaded::Loaded;
use crate::output::CommandError;

/// One doctor finding.
struct Check {
    name: String,
    ok: bool,
    severity: &'static str,
    detail: String,
    fix: Option<String>,
}

pub fn run_doctor(loaded: &Loaded, args: &DoctorArgs) -> Result<ExitCode, CommandError> {
    let (profiles, roots, repo) = (&loaded.profiles, &loaded.roots, args.repo.as_path());
    let sources = loaded.source_files();
    let format = args.output_format;
    // Where a person's own settings go: a repository's .clawpool.toml may not set trusted
    // roots or launch commands, so a fix never points there.
    let own_config = loaded
        .sources
        .explicit
        .clone()
        .or_else(|| loaded.sources.user.clone())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "~/.config/clawpool/config.toml".into());
    let lanes_root = clawpool_worktree::Repo::open(repo).ok().and_then(|repo| {
        repo.default_worktree_path("lane")
            .parent()
            .map(Path::to_owned)
    });
    let mut checks = Vec::new();
    let path = std::env::var_os("PATH");
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let found =
        |program: &str| clawpool_pty::resolve_program(program.as_ref(), &cwd, path.as_deref()).ok();
    for (tool, fix) in [
        ("git", "apt-get install -y git"),
        (
            "tmux",
            "apt-get install -y tmux (needed for --transport tmux)",
        ),
    ] {
        let at = found(tool);
        checks.push(Check {
            name: tool.into(),
            ok: at.is_some(),
            severity: if tool == "git" { "error" } else { "warning" },
            detail: at
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| format!("{tool} not found on PATH")),
            fix: Some(fix.into()),
        });
    }
    let used = agents_in_use(loaded, args.packet.as_deref(), repo)?;
    for (agent, by) in &used {
        let Ok(profile) = profiles.get(agent) else {
            checks.push(Check {
                name: format!("agent {agent}"),
                ok: false,
                severity: "warning",
                detail: format!("{by} names agent {agent:?}, which no profile defines"),
                fix: Some(format!(
                    "name one of {} in {by}",
                    profiles
                        .iter()
                        .map(|p| p.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            });
            continue;
        };
        let command = &profile.manifest.launch.command;
        let at = found(command);
        checks.push(Check {
            name: format!("agent {agent}"),
            ok: at.is_some(),
            severity: "warning",
            detail: at
                .as_ref()
                .map(|p| format!("{} ({command}, used by {by})", p.display()))
                .unwrap_or_else(|| format!("{command:?} not found on PATH (used by {by})")),
            fix: Some(format!(
                "install {command} on PATH, or add [profiles.{agent}.launch] command = \"/path/to/{command}\" to {own_config}"
            )),
        });
        if let Some(program) = &at {
            checks.push(version_check(agent, program, &profile.manifest));
        }
    }
    let unused: Vec<&str> = profiles
        .iter()
        .map(|p| p.name())
        .filter(|name| !used.contains_key(*name))
        .collect();
    if !unused.is_empty() {
        checks.push(Check {
            name: "other agents".into(),
            ok: true,
            severity: "info",
            detail: format!(
                "not checked: {} (no configuration or packet uses them; pass --packet FILE to check a packet's)",
                unused.join(", ")
            ),
            fix: None,
        });
    }
    for warning in roots.warnings() {
        checks.push(root_check(&warning, lanes_root.as_deref(), &own_config));
    }
    checks.extend(state_folder_checks(repo));
    checks.extend(channel_checks(repo));
    checks.push(sandbox_check(loaded, &own_config));
    checks.push(unsandboxed_check(loaded, &own_config));
    checks.extend(grant_checks(repo));
    checks.extend(
        crate::notifying::checks(loaded, repo)
            .into_iter()
            .map(|c| Check {
                name: c.name,
                ok: c.ok,
                severity: "warning",
                detail: c.detail,
                fix: c.fix,
            }),
    );
    let failed_errors = checks.iter().any(|c| !c.ok && c.severity == "error");
    match format {
        OutputFormat::Json => println!(
            "{}",
            json!({
                "ok": !failed_errors,
                "config_files": sources,
                "checks": checks.iter().map(|c| json!({"name": c.name, "ok": c.ok, "severity": c.severity, "detail": c.detail, "fix": c.fix})).collect::<Vec<_>>(),
            })
        ),
        OutputFormat::Text => {
            println!(
                "config files: {}",
                if sources.is_empty() {
                    "none".to_owned()
                } else {
                    sources.join(", ")
                }
            );
            for c in &checks {
                let mark = if c.ok {
                    "ok  "
                } else if c.severity == "error" {
                    "FAIL"
                } else {
                    "warn"
                };
                println!("[{mark}] {}: {}", c.name, c.detail);
                if let (false, Some(fix)) = (c.ok, &c.fix) {
                    println!("       fix: {fix}");
                }
            }
        }
    }
    Ok(if failed_errors {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether lanes act without a person while nothing confines them: a lane's agent runs as the
/// user, with the user's files and network, so what the permission policy lets it do alone
/// (the default profile's allowance and every allow entry) it can be led to do by what it
/// reads. Lanes the configuration sandboxes (`sandbox = "workspace"`) are confined to their
/// worktree (`docs/sandbox.md`), so the warning is about the others.
fn unsandboxed_check(loaded: &Loaded, own_config: &str) -> Check {
    use clawpool_agents::config::SandboxSetting;
    use clawpool_recovery::permissions::{Effect, Profile};
    let settings = loaded.policy.permissions();
    if loaded.config.sandbox().mode.as_ref().map(|m| m.value) == Some(SandboxSetting::Workspace) {
        return Check {
            name: "permissions".into(),
            ok: true,
            severity: "info",
            detail: "lanes run sandboxed (sandbox = \"workspace\"): their agents write only \
                     their worktree, though they still read your files and use the network \
                     (docs/sandbox.md); a packet lane with sandbox \"off\" does not"
                .into(),
            fix: None,
        };
    }
    let profile = settings.default_profile;
    let allows: Vec<String> = settings
        .policy
        .entries
        .iter()
        .enumerate()
        .filter(|(_, entry)| entry.effect == Effect::Allow)
        .map(|(index, entry)| format!("#{} {} in {}", index + 1, entry.verb, entry.scope))
        .collect();
    let mut alone = Vec::new();
    match profile {
        Profile::ReadOnly => {}
        Profile::WorkspaceWrite => {
            alone.push("write files in their worktree (profile workspace-write)".to_owned())
        }
        Profile::DangerFullAccess => {
            alone.push("run any command (profile danger-full-access)".to_owned())
        }
    }
    if !allows.is_empty() {
        alone.push(format!("run the allowed commands ({})", allows.join(", ")));
    }
    if alone.is_empty() {
        return Check {
            name: "permissions".into(),
            ok: true,
            severity: "info",
            detail: "lanes run unsandboxed, and with profile read-only and no allow entry \
                     their agents act only on what a person answers (packets may name another \
                     profile)"
                .into(),
            fix: None,
        };
    }
    Check {
        name: "permissions".into(),
        ok: false,
        severity: "warning",
        detail: format!(
            "lanes run unsandboxed (as you, with your files and network), and their agents may \
             {} without a person: an agent led astray by what it reads can do that much, and a \
             command that runs the project's code (a build, its tests) runs whatever the agent \
             wrote (docs/trust.md, \"The permission policy\")",
            alone.join(" and ")
        ),
        fix: Some(format!(
            "sandbox the lanes: sandbox = \"workspace\" in {own_config} (docs/sandbox.md); \
             or run clawpool where a lane can harm nothing you keep (a container or VM); or have \
             a person answer everything: a policy file (policy = \"FILE\" in {own_config}, \
             a copy of docs/policy-defaults.toml) with [permissions] default_profile = \
             \"read-only\" and no allow entry"
        )),
    }
}

/// Whether sandboxed lanes can start on this machine: bubblewrap found and a trivial sandbox
/// run in it. An error when the configuration asks for sandboxes (those lanes would not
/// start), else a warning (`danger-full-access` lanes ask for one by default).
fn sandbox_check(loaded: &Loaded, own_config: &str) -> Check {
    use clawpool_agents::config::SandboxSetting;
    let mode = loaded.config.sandbox().mode.as_ref().map(|m| m.value);
    match clawpool_pool::sandboxing::doctor_finding(&loaded.config) {
        Ok(detail) => Check {
            name: "sandbox".into(),
            ok: true,
            severity: "info",
            detail,
            fix: None,
        },
        Err(why) => Check {
            name: "sandbox".into(),
            ok: false,
            severity: if mode == Some(SandboxSetting::Workspace) {
                "error"
            } else {
                "warning"
            },
            detail: format!("sandboxed lanes cannot start here: {why}"),
            fix: Some(format!(
                "apt-get install -y bubblewrap (or name it: bwrap = \"/path/to/bwrap\" in \
                 {own_config}), and allow unprivileged user namespaces; or sandbox = \"off\""
            )),
        },
    }
}

/// The grants in the repository's and the user's stores that clawpool did not write (no MAC
/// that verifies under the user's grant key): they are never honoured, and were probably
/// written by hand — by a person, or by a lane's agent.
fn grant_checks(repo: &Path) -> Vec<Check> {
    use clawpool_recovery::permissions::{GrantKey, GrantStore};
    let env = |key: &str| std::env::var(key).ok();
    let key = match GrantKey::user_path(env).map(|path| GrantKey::load(&path)) {
        Some(Ok(key)) => key,
        Some(Err(err)) => {
            return vec![Check {
                name: "grant key".into(),
                ok: false,
                severity: "warning",
                detail: format!("{err}: no grant is honoured"),
                fix: Some("remove it; the next `answer --remember` makes a new one".into()),
            }];
        }
        None => None,
    };
    let repository = clawpool_worktree::Repo::open(repo)
        .ok()
        .map(|repo| GrantStore::in_folder(repo.state_dir().root()));
    repository
        .into_iter()
        .chain(GrantStore::user(env))
        .filter_map(|store| {
            let loaded = match store.load(key.as_ref()) {
                Ok(loaded) => loaded,
                Err(err) => {
                    return Some(Check {
                        name: "grants".into(),
                        ok: false,
                        severity: "warning",
                        detail: err.to_string(),
                        fix: None,
                    });
                }
            };
            if loaded.ignored.is_empty() {
                return None;
            }
            let ignored: Vec<String> = loaded
                .ignored
                .iter()
                .map(|ignored| {
                    format!(
                        "{} ({} {}): {}",
                        ignored.grant.id, ignored.grant.tool, ignored.grant.verb, ignored.reason
                    )
                })
                .collect();
            Some(Check {
                name: "grants".into(),
                ok: false,
                severity: "warning",
                detail: format!(
                    "{} grant(s) in {} ignored: {}",
                    ignored.len(),
                    store.path().display(),
                    ignored.join("; ")
                ),
                fix: Some(format!(
                    "remove them from {} (a lane's agent may have written them); keep a grant \
                     with `clawpool answer LANE --choice yes --remember SCOPE`",
                    store.path().display()
                )),
            })
        })
        .collect()
}

/// How long an agent may take to print its version (aider needs seconds on a loaded machine).
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The doctor line comparing the installed agent's version with the one its profile was
/// verified on: a mismatch is a warning (its screens may have changed), an unreadable version
/// or an unverified profile only said.
fn version_check(
    agent: &str,
    program: &Path,
    manifest: &clawpool_agents::profiles::manifest::Manifest,
) -> Check {
    let name = format!("agent {agent} version");
    let Some(verified) = &manifest.verified_version else {
        return Check {
            name,
            ok: true,
            severity: "info",
            detail: format!("the {agent} profile is not verified on any version of the agent"),
            fix: None,
        };
    };
    match installed_version(program, &manifest.launch.env) {
        Ok(installed) if &installed == verified => Check {
            name,
            ok: true,
            severity: "warning",
            detail: format!("{installed}, the version the {agent} profile was verified on"),
            fix: None,
        },
        Ok(installed) => Check {
            name,
            ok: false,
            severity: "warning",
            detail: format!(
                "{} is {installed}, but the {agent} profile was verified on {verified}: its \
                 screens and dialogs may differ, and one the profile does not know blocks a lane",
                program.display()
            ),
            fix: Some(format!(
                "install {agent} {verified} (scripts/install-agents.sh pins it), or check the \
                 profile against {installed} (clawpool explain on its screens, docs/real-agents.md)"
            )),
        },
        Err(why) => Check {
            name,
            ok: true,
            severity: "info",
            detail: format!("{why}; the {agent} profile was verified on {verified}"),
            fix: None,
        },
    }
}

/// The first `N.N.N` that `program --version` prints (with the profile's launch environment),
/// or why there is none.
pub(crate) fn installed_version(
    program: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<String, String> {
    use std::io::Read;
    let mut child = Command::new(program)
        .arg("--version")
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not run {} --version: {e}", program.display()))?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    let Ok(text) = rx.recv_timeout(VERSION_TIMEOUT) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "{} --version printed nothing within {} s",
            program.display(),
            VERSION_TIMEOUT.as_secs()
        ));
    };
    let _ = child.wait();
    let version = regex::Regex::new(r"\d+\.\d+\.\d+").expect("a valid regex");
    version
        .find(&text)
        .map(|m| m.as_str().to_owned())
        .ok_or_else(|| {
            format!(
                "{} --version printed no version ({:?})",
                program.display(),
                text.trim()
            )
        })
}

/// The agents a doctor checks, each with what uses it: the profiles the configuration files
/// set up (`[profiles.NAME]`), and the agents of the packet's lanes (`--packet`).
fn agents_in_use(
    loaded: &Loaded,
    packet: Option<&Path>,
    repo: &Path,
) -> Result<std::collections::BTreeMap<String, String>, CommandError> {
    let mut used = std::collections::BTreeMap::new();
    for patch in loaded.config.profile_patches() {
        used.entry(patch.profile.clone())
            .or_insert_with(|| patch.file.clone());
    }
    let Some(packet) = packet else {
        return Ok(used);
    };
    let text = std::fs::read_to_string(packet).map_err(|e| {
        CommandError::invalid(
            "packet_not_found",
            format!("cannot read task packet {}: {e}", packet.display()),
        )
    })?;
    let repo_root = repo.canonicalize().unwrap_or_else(|_| repo.to_owned());
    let checked =
        clawpool_lanes::check_packet(&text, &clawpool_lanes::PacketContext::new(repo_root));
    for lane in &checked.lanes {
        if let Some(agent) = &lane.agent {
            used.insert(agent.clone(), packet.display().to_string());
        }
    }
    Ok(used)
}

/// A doctor line for a trusted-roots warning. A trusted root that does not exist yet where
/// `spawn` makes lane worktrees (the repository's lanes root, or a folder in it) is no
/// problem: its lanes are not created yet, and will be trusted once they are.
fn root_check(warning: &TrustWarning, lanes_root: Option<&Path>, own_config: &str) -> Check {
    if let TrustWarning::RootNotFound {
        kind: RootKind::Trusted,
        root,
    } = warning
        && lanes_root.is_some_and(|lanes| root.starts_with(lanes))
    {
        return Check {
            name: "trusted roots".into(),
            ok: true,
            severity: "info",
            detail: format!(
                "{} does not exist yet: lanes spawned there will be trusted once they are made",
                root.display()
            ),
            fix: None,
        };
    }
    let fix = match warning {
        TrustWarning::NoTrustedRoots => format!(
            "to have lanes trusted, add trusted_roots = [\"{}\"] to {own_config}",
            lanes_root.map_or("/path/to/lanes".into(), |p| p.display().to_string())
        ),
        _ => format!(
            "edit trusted_roots / denied_roots in the file that sets them (`clawpool config show` names it; yours is {own_config})"
        ),
    };
    Check {
        name: "trusted roots".into(),
        ok: false,
        severity: "warning",
        detail: warning.to_string(),
        fix: Some(fix),
    }
}

/// The agents' own channels of the repository's lanes (`hooks` in each state file): one
/// warning per lane whose channel lost reports (a hook that could not deliver, the app server
/// gone or never up), so the screen decided alone; one ok line when none did. Nothing when no
/// lane has a channel (or outside a repository).
fn channel_checks(repo: &Path) -> Vec<Check> {
    let Ok(repo) = clawpool_worktree::Repo::open(repo) else {
        return Vec::new();
    };
    let now = clawpool_lanes::state_file::now_secs();
    let lanes: Vec<(String, WorkerStateDoc)> = clawpool_lane::registry::registered_names(&repo)
        .into_iter()
        .filter_map(|name| {
            let row = clawpool_pool::board::board_lane(&repo, &name, now);
            row.state.ok().map(|view| (name, view.doc))
        })
        .filter(|(_, doc)| doc.hooks.channel.is_some() || doc.hooks.failed != 0)
        .collect();
    let failing: Vec<Check> = lanes
        .iter()
        .filter(|(_, doc)| doc.hooks.degraded)
        .map(|(name, doc)| {
            let worktree = &doc.worktree;
            Check {
                name: format!("lane {name} channel"),
                ok: false,
                severity: "warning",
                detail: format!(
                    "{} failed {} time(s) after {} report(s); the screen decided alone from \
                     then (its lane.channel.degraded events say why)",
                    doc.hooks
                        .channel
                        .as_deref()
                        .unwrap_or("the agent's channel"),
                    doc.hooks.failed,
                    doc.hooks.received,
                ),
                fix: Some(format!(
                    "see `clawpool events {name}` and {worktree}/.claw/hook-failures.jsonl \
                     (Claude Code's hooks) or {worktree}/.claw/codex-app-server.log (Codex's \
                     app server)"
                )),
            }
        })
        .collect();
    if lanes.is_empty() || !failing.is_empty() {
        return failing;
    }
    vec![Check {
        name: "agent channels".into(),
        ok: true,
        severity: "info",
        detail: format!(
            "{} lane(s) with an agent channel, none lost a report",
            lanes.len()
        ),
        fix: None,
    }]
}

/// The folders lanes write to, checked without creating anything (a doctor that leaves folders
/// behind would hide the very problem it looks for): the repository's `clawpool/` folder in
/// its common git dir (registry, events, locks) and the default lanes root, where `spawn`
/// makes worktrees.
fn state_folder_checks(repo: &Path) -> Vec<Check> {
    let repo = match clawpool_worktree::Repo::open(repo) {
        Ok(repo) => repo,
        Err(err) => {
            return vec![Check {
                name: "repository".into(),
                ok: false,
                severity: "warning",
                detail: format!("{}: {err}; its state folders were not checked", repo.display()),
                fix: Some(
                    "run clawpool doctor inside the repository lanes will work on, or pass --repo DIR"
                        .into(),
                ),
            }];
        }
    };
    let lanes_root = repo
        .default_worktree_path("lane")
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| repo.root().to_owned());
    [
        (
            "state folder",
            repo.state_dir().root().to_owned(),
            "the lane registry, event logs and locks",
        ),
        ("lanes root", lanes_root, "the lanes' worktrees"),
    ]
    .into_iter()
    .map(|(name, dir, holds)| {
        let (ok, detail, fix) = match folder_writable(&dir) {
            Ok(detail) => (true, format!("{detail} (for {holds})"), None),
            Err((detail, fix)) => (false, format!("{detail} (needed for {holds})"), Some(fix)),
        };
        Check {
            name: name.into(),
            ok,
            severity: "error",
            detail,
            fix,
        }
    })
    .collect()
}

/// Whether clawpool could write in `dir` without creating anything now: an existing folder
/// must be writable, a missing one makeable in its nearest existing ancestor. `Err` carries
/// the problem and how to fix it.
fn folder_writable(dir: &Path) -> Result<String, (String, String)> {
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Err((
                    format!("{} is not a folder", at.display()),
                    format!("move {} out of the way", at.display()),
                ));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => match at.parent() {
                Some(parent) => at = parent,
                None => break,
            },
            Err(err) => {
                return Err((
                    format!("{}: {err}", at.display()),
                    format!("make {} readable for this user", at.display()),
                ));
            }
        }
    }
    if let Err(err) = access_write(at) {
        return Err((
            format!("{} is not writable ({err})", at.display()),
            format!(
                "make {} writable for this user (chmod u+w, or run clawpool as its owner; a read-only or immutable folder cannot be written by anyone)",
                at.display()
            ),
        ));
    }
    Ok(if at == dir {
        format!("{} is writable", dir.display())
    } else {
        format!(
            "{} does not exist yet; it can be made in {}",
            dir.display(),
            at.display()
        )
    })
}

/// access(2) for writing and entering a folder: what the kernel would allow this process,
/// read-only file systems and immutable folders included, without writing a thing.
fn access_write(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: access only reads the NUL-terminated path, which outlives the call.
    if unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
