//! The notifier in the daemon (a foreground `spawn` starts its own in the pool,
//! `clawpool_pool::start::start_notifier`), and what `clawpool doctor` says of each
//! `[[notify]]` endpoint (`docs/notify.md`).
//! The notifier itself — following the stream, one notification per situation, retries — is
//! the pool's ([`clawpool_pool::notifier`]).

use std::path::Path;

use clawpool_agents::config::notify::{NotifySink, NotifyTarget};
use clawpool_pool::Notifier;
use clawpool_pool::notifier::NotifyRecord;
use clawpool_worktree::Repo;

use crate::loaded::Loaded;

/// Starts the repository's notifier when the configuration has endpoints. A notifier that
/// cannot start is said on stderr and the lanes run without it.
pub fn start(repo: &Repo, loaded: &Loaded) -> Option<Notifier> {
    let targets = loaded.config.notify_targets().to_vec();
    let prices = std::sync::Arc::clone(&loaded.prices);
    match Notifier::start(&repo.state_dir(), repo.root(), targets, prices) {
        Ok(notifier) => notifier,
        Err(e) => {
            eprintln!("clawpool: notifications are off: {e}");
            None
        }
    }
}

/// Lets the notifier send what the lanes' last events made, briefly.
pub async fn finish(notifier: Option<Notifier>) {
    if let Some(notifier) = notifier {
        notifier.finish(clawpool_pool::start::NOTIFY_GRACE).await;
    }
}

/// One `clawpool doctor` line about an endpoint.
pub struct EndpointCheck {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// One line per configured endpoint: whether it can be used here, and how its deliveries
/// went in the repository at `repo` (its record).
pub fn checks(loaded: &Loaded, repo: &Path) -> Vec<EndpointCheck> {
    let targets = loaded.config.notify_targets();
    if targets.is_empty() {
        return Vec::new();
    }
    let record = Repo::open(repo)
        .ok()
        .map(|repo| NotifyRecord::load(&repo.state_dir().notify_status()));
    targets
        .iter()
        .map(|target| {
            let name = format!("notify {}", target.name);
            let endpoint = match &record {
                Some(Ok(record)) => record.endpoints.get(&target.name).cloned(),
                _ => None,
            };
            if let Some(problem) = unusable(target) {
                return EndpointCheck {
                    name,
                    ok: false,
                    detail: format!("{}: {problem}", target.redacted()),
                    fix: Some(format!(
                        "fix or remove this [[notify]] entry in {}",
                        target.from.display()
                    )),
                };
            }
            match endpoint {
                Some(e) if e.failing() => EndpointCheck {
                    name,
                    ok: false,
                    detail: format!(
                        "{}: keeps failing: {} failed attempts, the last: {}; {} notifications waiting",
                        target.redacted(),
                        e.failures,
                        e.last_error.as_deref().unwrap_or("unknown"),
                        e.pending.len()
                    ),
                    fix: Some(
                        "make the endpoint reachable: the notifier of the repository's next spawn or daemon sends what waits, in order"
                            .into(),
                    ),
                },
                Some(e) => EndpointCheck {
                    name,
                    ok: true,
                    detail: format!(
                        "{}: {} delivered, {} waiting",
                        target.redacted(),
                        e.delivered,
                        e.pending.len()
                    ),
                    fix: None,
                },
                None => EndpointCheck {
                    name,
                    ok: true,
                    detail: format!("{}: nothing sent yet", target.redacted()),
                    fix: None,
                },
            }
        })
        .chain(match &record {
            Some(Err(e)) => Some(EndpointCheck {
                name: "notify record".into(),
                ok: false,
                detail: e.to_string(),
                fix: Some("remove the file: the notifier starts again from the stream's end".into()),
            }),
            _ => None,
        })
        .collect()
}

/// Why `target` cannot work on this machine, if it cannot: a command not found, no desktop.
fn unusable(target: &NotifyTarget) -> Option<String> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let path = std::env::var_os("PATH");
    let missing = |program: &str| {
        clawpool_pty::resolve_program(program.as_ref(), &cwd, path.as_deref())
            .err()
            .map(|_| format!("{program} not found on PATH"))
    };
    match &target.sink {
        NotifySink::Webhook { .. } => None,
        NotifySink::Command(argv) => missing(&argv[0]),
        NotifySink::Desktop if !clawpool_pool::notifier::session_bus() => {
            Some("no desktop session bus here (DBUS_SESSION_BUS_ADDRESS)".into())
        }
        NotifySink::Desktop => missing("notify-send"),
    }
}
