//! Codex's `notify` program as a lane's channel: the fallback when the lane's app server does
//! not start (`docs/events.md`, "Codex's notify program").
//!
//! The TUI is started with `-c notify=[PROGRAM, "hook", "agent-turn-complete"]`; at the end of
//! each turn Codex runs that command with one more argument, the notification's JSON
//! (`{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd", "input-messages",
//! "last-assistant-message"}`), and goes on without waiting for it. `clawpool hook` delivers it
//! like a Claude Code hook's payload — bound to the lane by the environment set at spawn, the
//! lane's token checked, bounded, exit 0 — and the lane reads it as a
//! [`super::HookEvent::TurnComplete`]. The channel reports nothing else: the screen decides
//! the rest.

use std::path::Path;

use super::ChannelSetup;

/// The channel's name in `lane.channel.*` events and the state file's `hooks.channel`.
pub const CHANNEL: &str = "codex_notify";
/// The notification Codex sends at a turn's end, and the hook event it is delivered as.
pub const EVENT: &str = "agent-turn-complete";

/// Sets up the `notify` channel for the Codex lane in `dir`, whose record folder is `record` and
/// whose control socket is `socket`: a new token, and the `-c notify=[…]` override naming
/// `program` (the clawpool binary).
pub fn set_up(
    dir: &Path,
    record: &Path,
    socket: &Path,
    program: &Path,
) -> std::io::Result<ChannelSetup> {
    let state_dir = dir.join(clawpool_worktree::layout::LANE_DIR);
    std::fs::create_dir_all(&state_dir)?;
    super::bind_to_lane(
        &state_dir,
        record,
        socket,
        vec!["-c".into(), notify_override(program)],
    )
}

/// The notify channel of a TUI an earlier supervisor started (`super::resume_reports`): its
/// restarts get the same notify program and token.
pub fn resume(dir: &Path, record: &Path, socket: &Path, program: &Path) -> Option<ChannelSetup> {
    super::resume_reports(
        dir,
        record,
        socket,
        vec!["-c".into(), notify_override(program)],
    )
}

/// `notify=[PROGRAM, "hook", "agent-turn-complete"]`, a TOML value as Codex's `-c` reads it
/// (a JSON string is a TOML basic string).
fn notify_override(program: &Path) -> String {
    let command = [program.display().to_string(), "hook".into(), EVENT.into()];
    format!(
        "notify={}",
        serde_json::to_string(&command).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{HookEvent, HookFact, SOCKET_ENV, TOKEN_ENV, TOKEN_FILE};
    use serde_json::json;

    #[test]
    fn the_override_names_the_program_and_the_event() {
        assert_eq!(
            notify_override(Path::new("/opt/a \"b\"/clawpool")),
            r#"notify=["/opt/a \"b\"/clawpool","hook","agent-turn-complete"]"#
        );
    }

    #[test]
    fn set_up_binds_the_lane_and_keeps_its_token() {
        let dir = tempfile::tempdir().expect("temp dir");
        let record = tempfile::tempdir().expect("record folder");
        let socket = dir.path().join(".claw/control.sock");
        let setup = set_up(
            dir.path(),
            record.path(),
            &socket,
            Path::new("/bin/clawpool"),
        )
        .expect("set up");
        assert_eq!(setup.args[0], "-c");
        assert!(setup.args[1].starts_with("notify=["), "{:?}", setup.args);
        let kept = std::fs::read_to_string(record.path().join(TOKEN_FILE)).expect("token file");
        assert_eq!(kept, setup.token);
        assert!(!dir.path().join(".claw").join(TOKEN_FILE).exists());
        let env: std::collections::HashMap<_, _> = setup.env.iter().cloned().collect();
        assert_eq!(env[SOCKET_ENV], socket.display().to_string());
        assert_eq!(env[TOKEN_ENV], setup.token);
    }

    #[test]
    fn the_notification_is_a_typed_turn_end() {
        let fact = HookFact::from_report(
            EVENT,
            &json!({"type": "agent-turn-complete", "thread-id": "t1", "turn-id": "7",
                    "cwd": "/lane", "input-messages": ["say hello"],
                    "last-assistant-message": "Hello."}),
        );
        assert_eq!(fact.session_id.as_deref(), Some("t1"));
        assert_eq!(
            fact.event,
            HookEvent::TurnComplete {
                turn_id: Some("7".into()),
                input_messages: vec!["say hello".into()],
                last_message: Some("Hello.".into())
            }
        );
        assert_eq!(fact.name(), EVENT);
        assert_eq!(fact.detail()["turn_id"], "7");
        assert_eq!(fact.detail()["last_assistant_message"], "Hello.");
    }
}
