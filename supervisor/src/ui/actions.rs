//! The operator commands the dashboard's keys run on the selected lane. Each is the CLI's own
//! command (`clawpool stop LANE --output-format json`, …) run as a child of the dashboard, so
//! its checks, its errors and its effect are exactly the CLI's; the dashboard shows the one
//! line it answers with.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// An operator command on one lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `clawpool trust`.
    Trust,
    /// `clawpool answer --choice CHOICE`.
    Answer(String),
    /// `clawpool send TEXT`.
    Send(String),
    /// `clawpool stop`.
    Stop,
    /// `clawpool restart --resume`.
    Restart,
    /// `clawpool merge-forward`.
    MergeForward,
    /// `clawpool verify --level LEVEL`.
    Verify(String),
    /// `clawpool recover` (the recipe the policy decides).
    Recover,
}

/// What a command answered: whether it did it, and its one line.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Exit 0.
    pub ok: bool,
    /// What it said: the lane's verdict, the merge's outcome, the error's message.
    pub message: String,
}

impl Action {
    /// The command as a person would type it (without the lane).
    pub fn describe(&self) -> String {
        match self {
            Action::Trust => "trust".into(),
            Action::Answer(choice) => format!("answer --choice {choice}"),
            Action::Send(text) => format!("send {text:?}"),
            Action::Stop => "stop".into(),
            Action::Restart => "restart --resume".into(),
            Action::MergeForward => "merge-forward".into(),
            Action::Verify(level) => format!("verify --level {level}"),
            Action::Recover => "recover".into(),
        }
    }

    fn args(&self, lane: &Path, config: Option<&Path>) -> Vec<OsString> {
        let mut args: Vec<OsString> = match self {
            Action::Trust => vec!["trust".into(), lane.into()],
            Action::Answer(choice) => vec![
                "answer".into(),
                lane.into(),
                "--choice".into(),
                choice.into(),
            ],
            Action::Send(text) => vec!["send".into(), lane.into(), text.into()],
            Action::Stop => vec!["stop".into(), lane.into()],
            Action::Restart => vec!["restart".into(), lane.into(), "--resume".into()],
            Action::MergeForward => vec!["merge-forward".into(), lane.into()],
            Action::Verify(level) => {
                vec!["verify".into(), lane.into(), "--level".into(), level.into()]
            }
            Action::Recover => {
                let mut args: Vec<OsString> = vec!["recover".into(), lane.into()];
                if let Some(config) = config {
                    args.extend(["--config".into(), config.into()]);
                }
                args
            }
        };
        args.extend(["--output-format".into(), "json".into()]);
        args
    }

    /// Runs the command on the lane in `lane_dir` and waits for its answer.
    pub async fn run(&self, lane_dir: &Path, config: Option<PathBuf>) -> Outcome {
        let program = match std::env::current_exe() {
            Ok(program) => program,
            Err(err) => {
                return Outcome {
                    ok: false,
                    message: format!("cannot find clawpool's own binary: {err}"),
                };
            }
        };
        let output = tokio::process::Command::new(program)
            .args(self.args(lane_dir, config.as_deref()))
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        match output {
            Ok(output) => Outcome {
                ok: output.status.success(),
                message: summary(
                    &String::from_utf8_lossy(&output.stdout),
                    &String::from_utf8_lossy(&output.stderr),
                ),
            },
            Err(err) => Outcome {
                ok: false,
                message: format!("cannot run clawpool {}: {err}", self.describe()),
            },
        }
    }
}

/// One line from a command's JSON output: the error's message (stderr), else the verdict's
/// reason, the merge's or the verification's outcome (stdout).
fn summary(stdout: &str, stderr: &str) -> String {
    let stderr_doc: Value = serde_json::from_str(stderr.trim()).unwrap_or_default();
    if let Some(message) = stderr_doc["error"]["message"].as_str() {
        return message.to_owned();
    }
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    if let Some(reason) = doc["reason"].as_str() {
        return reason.to_owned();
    }
    if let Some(outcome) = doc["outcome"].as_str() {
        return format!("merge-forward: {outcome}");
    }
    if let Some(result) = doc["verification"]["result"].as_str() {
        return format!(
            "verify {}: {result}",
            doc["verification"]["level"].as_str().unwrap_or_default()
        );
    }
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    text.trim().lines().next().unwrap_or("done").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_the_error_else_the_verdict() {
        assert_eq!(
            summary(
                "",
                r#"{"error": {"kind": "lane_not_running", "message": "no running lane"}}"#
            ),
            "no running lane"
        );
        assert_eq!(
            summary(r#"{"verdict": "done", "reason": "stopped"}"#, ""),
            "stopped"
        );
        assert_eq!(
            summary(r#"{"outcome": "merged"}"#, ""),
            "merge-forward: merged"
        );
    }
}
