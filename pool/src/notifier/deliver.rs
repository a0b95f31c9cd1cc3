//! Sending one notification to one endpoint: a webhook's POST, a command's stdin, or
//! `notify-send`. Each attempt is bounded in time; what to do after a failure (back off, try
//! again) is the notifier's.

use std::process::Stdio;
use std::time::Duration;

use clawpool_agents::config::notify::{NotifySink, NotifyTarget};
use tokio::io::AsyncWriteExt;

use super::message::Notification;

/// How long one webhook request, one command or one `notify-send` may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `note` to `target`. The error never holds a webhook's URL.
pub async fn deliver(
    client: &reqwest::Client,
    target: &NotifyTarget,
    note: &Notification,
) -> Result<(), String> {
    match &target.sink {
        NotifySink::Webhook { url, format } => {
            let body = serde_json::to_vec(&note.body(*format)).map_err(|e| e.to_string())?;
            let response = client
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body)
                .timeout(ATTEMPT_TIMEOUT)
                .send()
                .await
                .map_err(|e| e.without_url().to_string())?;
            let status = response.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("HTTP {status}"))
            }
        }
        NotifySink::Command(argv) => {
            let json = serde_json::to_vec(note).map_err(|e| e.to_string())?;
            run(argv, Some(json)).await
        }
        NotifySink::Desktop => {
            if !session_bus() {
                return Err("no desktop session bus (DBUS_SESSION_BUS_ADDRESS unset, no $XDG_RUNTIME_DIR/bus)".into());
            }
            let argv = [
                "notify-send".to_owned(),
                "--app-name=clawpool".to_owned(),
                format!("clawpool: lane {} {}", note.lane, note.event.name()),
                note.text(),
            ];
            run(&argv, None).await
        }
    }
}

/// Whether a desktop session bus is there to show a notification on.
pub fn session_bus() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR")
            .is_some_and(|dir| std::path::Path::new(&dir).join("bus").exists())
}

/// Runs `argv` with `stdin` written to it and closed; fails on a non-zero exit, with the end
/// of what it wrote on stderr.
async fn run(argv: &[String], stdin: Option<Vec<u8>>) -> Result<(), String> {
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    let input = child.stdin.take();
    let attempt = async move {
        if let (Some(bytes), Some(mut input)) = (stdin, input) {
            // A program that does not read its stdin is not a failure of ours.
            let _ = input.write_all(&bytes).await;
            let _ = input.write_all(b"\n").await;
        }
        child.wait_with_output().await
    };
    let output = tokio::time::timeout(ATTEMPT_TIMEOUT, attempt)
        .await
        .map_err(|_| {
            format!(
                "{} did not exit within {}s",
                argv[0],
                ATTEMPT_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!(
        "{} exited with {}: {}",
        argv[0],
        output.status,
        last.trim()
    ))
}
