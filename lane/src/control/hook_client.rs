//! `clawpool hook`'s side of the control socket: a hook's report delivered to the lane named
//! by the agent's environment, as one [`Request::Hook`], and its failures recorded where the
//! lane watches them ([`crate::channel`] owns the lane's side: the token, the inbox, the watch).

use std::path::Path;

use serde_json::{Value, json};

use super::protocol::{ControlReply, Request};
use crate::channel::{
    DELIVERY_TIMEOUT, FAILURES_ENV, HookReport, MAX_PAYLOAD, SOCKET_ENV, TOKEN_ENV,
};

/// `clawpool hook EVENT`: reads the hook's payload from `payload` and delivers it to the lane
/// named by the environment (`env` looks a variable up), within [`DELIVERY_TIMEOUT`]; the
/// lane's answer for the agent, if it gave one (a PermissionRequest's decision), to print as
/// the hook's output. A failure is appended to the lane's failures file (when the environment
/// names one) and returned; the caller prints nothing then and exits 0 either way.
pub async fn deliver(
    event: &str,
    payload: impl tokio::io::AsyncRead + Unpin,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Value>, String> {
    let outcome =
        match tokio::time::timeout(DELIVERY_TIMEOUT, send_report(event, payload, &env)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "not delivered within {} s",
                DELIVERY_TIMEOUT.as_secs()
            )),
        };
    if let (Err(error), Some(file)) = (&outcome, env(FAILURES_ENV)) {
        record_failure(Path::new(&file), event, error);
    }
    outcome
}

async fn send_report(
    event: &str,
    payload: impl tokio::io::AsyncRead + Unpin,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<Value>, String> {
    let socket = env(SOCKET_ENV).ok_or(format!("{SOCKET_ENV} is not set"))?;
    let token = env(TOKEN_ENV).ok_or(format!("{TOKEN_ENV} is not set"))?;
    let mut text = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(
        &mut tokio::io::AsyncReadExt::take(payload, MAX_PAYLOAD),
        &mut text,
    )
    .await
    .map_err(|e| format!("reading the hook's payload: {e}"))?;
    let report = HookReport {
        token,
        event: event.to_owned(),
        payload: serde_json::from_slice(&text).unwrap_or(Value::Null),
    };
    let reply = super::ask(Path::new(&socket), Request::Hook(report))
        .await
        .map_err(|e| format!("{socket}: {e}"))?;
    match reply {
        ControlReply::HookTaken { decision } => {
            Ok(decision.map(|decision| json!({"hookSpecificOutput": decision})))
        }
        ControlReply::Error(error) => Err(error.message),
        other => Err(format!("a reply that is not the hook's: {other:?}")),
    }
}

/// Appends one failure line; a file that cannot be written loses it (the hook must not fail).
fn record_failure(file: &Path, event: &str, error: &str) {
    use std::io::Write;
    let line = json!({"event": event, "error": error, "at_ms": clawpool_lanes::now_ms()});
    if let Ok(mut out) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
    {
        let _ = out.write_all(format!("{line}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{FAILURES_FILE, new_failures};

    #[tokio::test]
    async fn a_failed_delivery_is_recorded_and_read_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let failures = dir.path().join(FAILURES_FILE);
        let socket = dir.path().join("gone.sock");
        let env = |key: &str| match key {
            SOCKET_ENV => Some(socket.display().to_string()),
            TOKEN_ENV => Some("t".to_owned()),
            FAILURES_ENV => Some(failures.display().to_string()),
            _ => None,
        };
        let error = deliver("Stop", &b"{}"[..], env)
            .await
            .expect_err("no socket");
        assert!(error.contains("gone.sock"), "{error}");
        let mut offset = 0;
        let read = new_failures(&failures, &mut offset);
        assert_eq!(read, [("Stop".to_owned(), error)]);
        assert!(new_failures(&failures, &mut offset).is_empty());
    }
}
