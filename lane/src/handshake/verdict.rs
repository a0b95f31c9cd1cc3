//! What a lane did with an operator's command: the [`Verdict`] the handshake (or the lane's
//! driver, for a restart) decides, and the [`VerdictReply`] that carries it back to the control
//! socket connection of the `clawpool` command that is waiting for it.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::OperatorCommand;

/// What a lane did with an operator's command (the control socket's reply, one JSON line:
/// `{"verdict": "done" | "ignored" | "refused" | "over_budget" | "failed", "reason": …}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The lane did it.
    Done {
        /// What was done, in words.
        reason: String,
        /// For `send`: whether the text was delivered now or waits in the queue.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        send: Option<SendFate>,
        /// For a queued `send`: its place in the lane's queue when it was queued.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        queue: Option<QueuePlace>,
    },
    /// There was nothing for the command to act on (no dialog on screen); nothing was pressed.
    Ignored {
        /// Why, in words.
        reason: String,
    },
    /// The lane will not do it (a choice the dialog does not have, a dialog clawpool never
    /// answers, an input line that cannot be emptied); nothing was pressed or typed.
    Refused {
        /// Why, in words.
        reason: String,
        /// The choices of the dialog on screen, when the command named a choice.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        choices: Vec<String>,
    },
    /// The lane will not take a text: its cost is past its budget (`clawpool budget` raises
    /// it); nothing was typed.
    OverBudget {
        /// Why, in words, with the cost and the budget.
        reason: String,
        /// The lane's cost.
        cost_usd: clawpool_lanes::payload::Usd,
        /// Its budget.
        budget_usd: clawpool_lanes::payload::Usd,
    },
    /// The lane tried and it did not work (the dialog stayed after its keys were pressed, the
    /// worker could not be started again).
    Failed {
        /// What went wrong, in words.
        reason: String,
    },
}

/// A queued text's place: `place` of `of` texts waiting (1 is typed first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePlace {
    /// Its place, from 1.
    pub place: usize,
    /// How many texts wait, itself included.
    pub of: usize,
}

/// Where the text of a `send` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendFate {
    /// Typed into the agent's empty input line, verified and submitted.
    Delivered,
    /// Waiting until the agent is idle; it is then typed by the same rules.
    Queued,
}

impl Verdict {
    /// `done`, `ignored`, `refused` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Done { .. } => "done",
            Verdict::Ignored { .. } => "ignored",
            Verdict::Refused { .. } => "refused",
            Verdict::OverBudget { .. } => "over_budget",
            Verdict::Failed { .. } => "failed",
        }
    }

    /// Why, in words.
    pub fn reason(&self) -> &str {
        match self {
            Verdict::Done { reason, .. }
            | Verdict::Ignored { reason }
            | Verdict::Refused { reason, .. }
            | Verdict::OverBudget { reason, .. }
            | Verdict::Failed { reason } => reason,
        }
    }

    /// Whether the lane did what it was told.
    pub fn is_done(&self) -> bool {
        matches!(self, Verdict::Done { .. })
    }

    /// The lane did it.
    pub fn done(reason: impl Into<String>) -> Self {
        Verdict::Done {
            reason: reason.into(),
            send: None,
            queue: None,
        }
    }
}

impl OperatorCommand {
    /// The command as an operator typed it (`answer --choice yes`), for events and errors.
    pub fn describe(&self) -> String {
        match self {
            OperatorCommand::Trust => "trust".to_owned(),
            OperatorCommand::Answer { choice } => format!("answer --choice {choice}"),
            OperatorCommand::Send { .. } => "send".to_owned(),
            OperatorCommand::Stop => "stop".to_owned(),
            OperatorCommand::Budget { usd } => format!("budget {}", usd.0),
            OperatorCommand::Restart(request) => {
                let mut words = vec!["restart"];
                if request.resume {
                    words.push("--resume");
                }
                if request.redeliver {
                    words.push("--redeliver");
                }
                words.join(" ")
            }
        }
    }
}

/// The way back to whoever waits for a command's verdict. It is cloned into whatever finishes
/// the command (a queued text, a restart carried out by the lane's driver); the first verdict
/// sent is the one delivered, later ones are dropped. Dropped without a verdict, the waiting
/// connection is told the lane ended.
#[derive(Clone, Default)]
pub struct VerdictReply(Arc<Mutex<Option<oneshot::Sender<Verdict>>>>);

impl VerdictReply {
    /// A reply and the receiver its verdict arrives on.
    pub fn new() -> (Self, oneshot::Receiver<Verdict>) {
        let (tx, rx) = oneshot::channel();
        (Self(Arc::new(Mutex::new(Some(tx)))), rx)
    }

    /// Sends `verdict`, unless one was sent already.
    pub fn send(&self, verdict: Verdict) {
        let sender = self.0.lock().map(|mut slot| slot.take()).unwrap_or(None);
        if let Some(sender) = sender {
            let _ = sender.send(verdict);
        }
    }

    /// Whether a verdict is still owed.
    pub fn pending(&self) -> bool {
        self.0.lock().map(|slot| slot.is_some()).unwrap_or(false)
    }
}

impl std::fmt::Debug for VerdictReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerdictReply")
            .field("pending", &self.pending())
            .finish()
    }
}

/// An operator's command with the way back for its verdict (what the control socket hands the
/// lane's handshake).
#[derive(Debug)]
pub struct OperatorRequest {
    /// The command.
    pub command: OperatorCommand,
    /// Where its verdict goes.
    pub reply: VerdictReply,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_one_flat_json_document() {
        let refused = Verdict::Refused {
            reason: "dialog \"trust\" has no choice \"maybe\"".into(),
            choices: vec!["no".into(), "yes".into()],
        };
        let json = serde_json::to_value(&refused).expect("serialise");
        assert_eq!(json["verdict"], "refused");
        assert_eq!(json["choices"], serde_json::json!(["no", "yes"]));
        let queued = Verdict::Done {
            reason: "queued".into(),
            send: Some(SendFate::Queued),
            queue: Some(QueuePlace { place: 1, of: 2 }),
        };
        let json = serde_json::to_value(&queued).expect("serialise");
        assert_eq!(json["send"], "queued");
        assert_eq!(json["queue"], serde_json::json!({"place": 1, "of": 2}));
        assert_eq!(
            serde_json::from_value::<Verdict>(json).expect("parse"),
            queued
        );
        assert!(
            serde_json::to_value(Verdict::done("stopped"))
                .expect("serialise")
                .get("send")
                .is_none()
        );
    }

    #[test]
    fn only_the_first_verdict_is_delivered() {
        let (reply, mut rx) = VerdictReply::new();
        let copy = reply.clone();
        copy.send(Verdict::done("first"));
        reply.send(Verdict::done("second"));
        assert!(!reply.pending());
        assert_eq!(rx.try_recv().expect("a verdict"), Verdict::done("first"));
    }
}
