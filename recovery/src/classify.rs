//! The failure taxonomy: which one [`FailureClass`] a failed or blocked lane has, from
//! evidence.
//!
//! This module owns the decision. The supervisor gathers [`FailureEvidence`] — the lane's
//! status at the time, the worker's process state, whether it ever reached its input line, what
//! the screen shows (by profile rule, with an excerpt), the stall flag, verification and branch
//! results — and [`classify`] picks exactly one class, with a one-line reason and, when a
//! recipe can heal the situation, its [`Trigger`]. [`classify_stuck`] does the same for a lane
//! stuck in `spawning`, `trust_required` or `ready_for_prompt` past its deadline.
//!
//! The evidence is weighed in a fixed order, most immediate first (`docs/recovery.md` has the
//! table): a failure around the agent (infra); a shell on screen; the worker gone; what the
//! screen shows (trust prompt, tool permission, dialogs, provider retry text, an unaccepted
//! prompt); verification results; the branch; the stall; and last the lane's own subphase and
//! status. A worker that never reached its input line is a *failed start*, told apart from one
//! that crashed while working (`start_failed`, and the reason says so).

use clawpool_lanes::{BlockedSubphase, FailureClass, LaneStatus};
use serde::{Deserialize, Serialize};

use crate::facts::{Freshness, wire_name};
use crate::recipe::Trigger;

/// The worker's process, as the supervisor last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    /// Still running.
    Running,
    /// Exited with this status code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// Killed by this signal.
    Signalled {
        /// The signal number.
        signal: i32,
    },
    /// Gone, with its status unknown (a tmux pane that vanished, a pid that is no more).
    Gone,
}

/// What the screen shows, as the profile's detection read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScreenEvidence {
    /// Nothing that explains the failure (a blank screen, or the agent's ordinary screen).
    Nothing,
    /// The agent's trust dialog.
    TrustPrompt,
    /// A tool-permission question.
    ToolPermission,
    /// A dialog a profile rule knows (the rule names it), other than trust and tool
    /// permission.
    KnownDialog,
    /// Something dialog-like no profile rule recognises.
    UnknownDialog,
    /// A shell prompt: the agent is not there.
    ShellPrompt,
    /// The agent's provider-retry text ("retrying in 15s · attempt 6/10", "Reconnecting...").
    ProviderRetry,
    /// The prompt's draft is still in the input line after it was submitted.
    PromptNotAccepted,
}

/// A failed verification run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationFailure {
    /// The build failed.
    Compile,
    /// Tests failed.
    Test,
    /// A test command exceeded its timeout.
    TestHang,
}

/// Everything the supervisor knows about a lane that failed or is blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureEvidence {
    /// The lane's status when it happened.
    pub status: LaneStatus,
    /// Its subphase, if blocked.
    pub subphase: Option<BlockedSubphase>,
    /// The worker's process.
    pub process: ProcessState,
    /// The worker reached its input line at least once (`ready_for_prompt` or later).
    pub reached_ready: bool,
    /// The prompt was submitted (Enter pressed).
    pub prompt_sent: bool,
    /// The screen proved the prompt was taken.
    pub prompt_accepted: bool,
    /// The lane's folder is trusted (the trust dialog may be answered by policy).
    pub trusted: bool,
    /// What the screen shows.
    pub screen: ScreenEvidence,
    /// The profile rule (or dialog) that matched, if any.
    pub rule: Option<String>,
    /// The screen's relevant rows (the dialog, the last lines).
    pub excerpt: Option<String>,
    /// No meaningful progress for the stall time while running.
    pub stalled: bool,
    /// A failed verification run, if any.
    pub verification: Option<VerificationFailure>,
    /// How the branch stands against its base, if known.
    pub freshness: Option<Freshness>,
    /// A failure around the agent (disk, git, terminal, state file): its message.
    pub infra: Option<String>,
}

impl FailureEvidence {
    /// Evidence for a lane in `status` whose worker runs and shows nothing remarkable; fill in
    /// what is known.
    pub fn new(status: LaneStatus) -> Self {
        Self {
            status,
            subphase: None,
            process: ProcessState::Running,
            reached_ready: false,
            prompt_sent: false,
            prompt_accepted: false,
            trusted: false,
            screen: ScreenEvidence::Nothing,
            rule: None,
            excerpt: None,
            stalled: false,
            verification: None,
            freshness: None,
            infra: None,
        }
    }

    /// The worker reached its input line: by the flag, or because the status says so.
    fn ready_reached(&self) -> bool {
        self.reached_ready
            || matches!(
                self.status,
                LaneStatus::ReadyForPrompt
                    | LaneStatus::PromptAccepted
                    | LaneStatus::Running
                    | LaneStatus::ToolPermissionRequired
                    | LaneStatus::Finished
            )
            || self.prompt_accepted
    }

    /// `rule (screen): excerpt`, or what there is of it.
    fn seen(&self) -> String {
        match (&self.rule, &self.excerpt) {
            (Some(rule), Some(excerpt)) => format!("rule {rule}: {excerpt:?}"),
            (Some(rule), None) => format!("rule {rule}"),
            (None, Some(excerpt)) => format!("screen: {excerpt:?}"),
            (None, None) => "no rule matched".to_owned(),
        }
    }
}

/// The class a lane's failure belongs to, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    /// The one failure class.
    pub class: FailureClass,
    /// One line: the evidence that decided.
    pub reason: String,
    /// The worker never reached its input line (a failed start, not a crash while working).
    pub start_failed: bool,
    /// The recovery situation, when a recipe can heal it.
    pub trigger: Option<Trigger>,
}

/// The phases a lane can be stuck in past a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StuckPhase {
    /// The worker started but the agent never became recognisable.
    Spawning,
    /// The trust dialog was not passed.
    TrustRequired,
    /// The prompt was not delivered or not accepted.
    ReadyForPrompt,
}

impl StuckPhase {
    /// The lane status of the phase.
    pub fn status(self) -> LaneStatus {
        match self {
            StuckPhase::Spawning => LaneStatus::Spawning,
            StuckPhase::TrustRequired => LaneStatus::TrustRequired,
            StuckPhase::ReadyForPrompt => LaneStatus::ReadyForPrompt,
        }
    }
}

/// Classifies a lane stuck in `phase` past its deadline: the same evidence rules as
/// [`classify`], with the lane's status taken as `phase` and the reason saying it is stuck.
pub fn classify_stuck(phase: StuckPhase, evidence: &FailureEvidence) -> Classification {
    let evidence = FailureEvidence {
        status: phase.status(),
        subphase: None,
        stalled: false,
        ..evidence.clone()
    };
    let mut classification = classify(&evidence);
    classification.reason = format!(
        "stuck in {} past its deadline: {}",
        wire_name(&phase),
        classification.reason
    );
    classification
}

/// Picks the one failure class the evidence supports (see the module docs for the order).
pub fn classify(evidence: &FailureEvidence) -> Classification {
    let reached = evidence.ready_reached();
    let start_failed = !reached;
    let made = |class, trigger: Option<Trigger>, reason: String| Classification {
        class,
        reason,
        start_failed,
        trigger,
    };
    let start = if reached {
        "after reaching its input line"
    } else {
        "failed start: before reaching its input line"
    };

    if let Some(message) = &evidence.infra {
        return made(
            FailureClass::Infra,
            None,
            format!("failure around the agent: {message}"),
        );
    }
    if evidence.screen == ScreenEvidence::ShellPrompt {
        return made(
            FailureClass::PromptDelivery,
            Some(Trigger::PromptMisdelivered),
            format!(
                "a shell prompt is on screen ({}); nothing is typed into it",
                evidence.seen()
            ),
        );
    }
    if evidence.process != ProcessState::Running {
        if evidence.prompt_sent && !evidence.prompt_accepted {
            return made(
                FailureClass::PromptDelivery,
                Some(Trigger::PromptMisdelivered),
                format!(
                    "the agent {} after the prompt was submitted and before it was accepted",
                    describe_exit(evidence.process)
                ),
            );
        }
        let class = if evidence.process == ProcessState::Gone {
            FailureClass::WorkerLost
        } else {
            FailureClass::WorkerCrashed
        };
        return made(
            class,
            Some(Trigger::WorkerExited),
            format!(
                "the worker {} ({start}) while {}",
                describe_exit(evidence.process),
                wire_name(&evidence.status)
            ),
        );
    }
    match evidence.screen {
        ScreenEvidence::TrustPrompt => return trust(evidence, start_failed),
        ScreenEvidence::ToolPermission => {
            return made(
                FailureClass::ToolPermission,
                None,
                format!(
                    "a tool-permission question waits for an answer ({})",
                    evidence.seen()
                ),
            );
        }
        ScreenEvidence::KnownDialog => {
            return made(
                FailureClass::BootDialog,
                None,
                format!("a known dialog waits for an operator ({})", evidence.seen()),
            );
        }
        ScreenEvidence::UnknownDialog => {
            return made(
                FailureClass::BootDialog,
                Some(Trigger::UnknownDialog),
                format!(
                    "a dialog no profile rule knows is on screen ({})",
                    evidence.seen()
                ),
            );
        }
        ScreenEvidence::ProviderRetry => {
            return made(
                FailureClass::Provider,
                Some(Trigger::ProviderDown),
                format!(
                    "the agent is retrying its model provider ({})",
                    evidence.seen()
                ),
            );
        }
        ScreenEvidence::PromptNotAccepted => {
            return made(
                FailureClass::PromptDelivery,
                Some(Trigger::PromptNotAccepted),
                format!(
                    "the prompt's draft is still in the input line after submitting ({})",
                    evidence.seen()
                ),
            );
        }
        ScreenEvidence::Nothing | ScreenEvidence::ShellPrompt => {}
    }
    if let Some(failure) = evidence.verification {
        let (class, what) = match failure {
            VerificationFailure::Compile => (FailureClass::Compile, "the build failed"),
            VerificationFailure::Test => (FailureClass::Test, "tests failed"),
            VerificationFailure::TestHang => (
                FailureClass::TestHang,
                "a test command exceeded its timeout",
            ),
        };
        return made(class, None, format!("verification: {what}"));
    }
    if evidence.subphase == Some(BlockedSubphase::TestHang) {
        return made(
            FailureClass::TestHang,
            None,
            "blocked: a test command exceeded its timeout".to_owned(),
        );
    }
    if let Some(freshness @ (Freshness::Stale | Freshness::Diverged)) = evidence.freshness {
        return made(
            FailureClass::BranchDivergence,
            Some(Trigger::StaleBranch),
            format!("the lane's branch is {freshness} against its base"),
        );
    }
    if evidence.stalled {
        return made(
            FailureClass::Stalled,
            Some(Trigger::Stalled),
            format!(
                "no meaningful progress while {}",
                wire_name(&evidence.status)
            ),
        );
    }
    if let Some(subphase) = evidence.subphase {
        let (trigger, what) = match subphase {
            BlockedSubphase::TrustPrompt => return trust(evidence, start_failed),
            BlockedSubphase::ToolPermission => (None, "a tool-permission question"),
            BlockedSubphase::BootDialog => (None, "a known dialog"),
            BlockedSubphase::UnknownDialog => (
                Some(Trigger::UnknownDialog),
                "a dialog no profile rule knows",
            ),
            BlockedSubphase::PromptDelivery if evidence.prompt_sent => (
                Some(Trigger::PromptNotAccepted),
                "the prompt was submitted but not accepted",
            ),
            BlockedSubphase::PromptDelivery => {
                (None, "the agent never offered an input line (blank screen)")
            }
            BlockedSubphase::Provider => (
                Some(Trigger::ProviderDown),
                "the model provider is unreachable",
            ),
            BlockedSubphase::BranchFreshness => {
                (Some(Trigger::StaleBranch), "the branch needs attention")
            }
            BlockedSubphase::TestHang => (None, "a test command exceeded its timeout"),
            BlockedSubphase::Stalled => (
                Some(Trigger::Stalled),
                "no meaningful progress while working",
            ),
        };
        return made(
            subphase.failure_class(),
            trigger,
            format!("blocked{{{}}}: {what}", wire_name(&subphase)),
        );
    }
    match evidence.status {
        LaneStatus::Spawning => made(
            FailureClass::PromptDelivery,
            None,
            format!("the agent never showed an input line ({})", evidence.seen()),
        ),
        LaneStatus::TrustRequired => trust(evidence, start_failed),
        LaneStatus::ToolPermissionRequired => made(
            FailureClass::ToolPermission,
            None,
            "a tool-permission question waits for an answer".to_owned(),
        ),
        LaneStatus::ReadyForPrompt if evidence.prompt_sent => made(
            FailureClass::PromptDelivery,
            Some(Trigger::PromptNotAccepted),
            "the prompt was submitted but not accepted".to_owned(),
        ),
        LaneStatus::ReadyForPrompt => made(
            FailureClass::PromptDelivery,
            None,
            "the prompt was never delivered to the idle input line".to_owned(),
        ),
        LaneStatus::PromptAccepted
        | LaneStatus::Running
        | LaneStatus::Blocked
        | LaneStatus::Finished
        | LaneStatus::Failed => made(
            FailureClass::Infra,
            None,
            format!(
                "no evidence explains the failure while {} ({})",
                wire_name(&evidence.status),
                evidence.seen()
            ),
        ),
    }
}

/// A trust prompt on screen (or the lane stuck on one).
fn trust(evidence: &FailureEvidence, start_failed: bool) -> Classification {
    let (trigger, what) = if evidence.trusted {
        (
            Some(Trigger::TrustPromptPersists),
            "the folder is trusted: answer it again",
        )
    } else {
        (
            None,
            "the folder is not under a trusted root: an operator decides",
        )
    };
    Classification {
        class: FailureClass::TrustGate,
        reason: format!("the trust prompt is showing ({}); {what}", evidence.seen()),
        start_failed,
        trigger,
    }
}

fn describe_exit(process: ProcessState) -> String {
    match process {
        ProcessState::Running => "is running".to_owned(),
        ProcessState::Exited { code } => format!("exited with status {code}"),
        ProcessState::Signalled { signal } => format!("was killed by signal {signal}"),
        ProcessState::Gone => "is gone with its exit status unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Case {
        name: &'static str,
        evidence: FailureEvidence,
        class: FailureClass,
        trigger: Option<Trigger>,
        start_failed: bool,
        reason_has: &'static str,
    }

    fn at(status: LaneStatus) -> FailureEvidence {
        FailureEvidence::new(status)
    }

    fn working() -> FailureEvidence {
        FailureEvidence {
            reached_ready: true,
            prompt_sent: true,
            prompt_accepted: true,
            ..at(LaneStatus::Running)
        }
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "shell on screen after submitting",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::ShellPrompt,
                    prompt_sent: true,
                    rule: Some("shell_prompt".into()),
                    excerpt: Some("dev@box:~/app$".into()),
                    ..at(LaneStatus::ReadyForPrompt)
                },
                class: FailureClass::PromptDelivery,
                trigger: Some(Trigger::PromptMisdelivered),
                start_failed: false,
                reason_has: "a shell prompt is on screen (rule shell_prompt: \"dev@box:~/app$\")",
            },
            Case {
                name: "agent died after Enter, before acceptance",
                evidence: FailureEvidence {
                    process: ProcessState::Exited { code: 1 },
                    prompt_sent: true,
                    ..at(LaneStatus::ReadyForPrompt)
                },
                class: FailureClass::PromptDelivery,
                trigger: Some(Trigger::PromptMisdelivered),
                start_failed: false,
                reason_has: "exited with status 1 after the prompt was submitted",
            },
            Case {
                name: "trusted lane, trust prompt still there",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::TrustPrompt,
                    trusted: true,
                    rule: Some("trust".into()),
                    ..at(LaneStatus::TrustRequired)
                },
                class: FailureClass::TrustGate,
                trigger: Some(Trigger::TrustPromptPersists),
                start_failed: true,
                reason_has: "the folder is trusted: answer it again",
            },
            Case {
                name: "untrusted lane on the trust prompt",
                evidence: FailureEvidence {
                    subphase: Some(BlockedSubphase::TrustPrompt),
                    ..at(LaneStatus::Blocked)
                },
                class: FailureClass::TrustGate,
                trigger: None,
                start_failed: true,
                reason_has: "not under a trusted root",
            },
            Case {
                name: "tool permission question while working",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::ToolPermission,
                    rule: Some("tool_permission".into()),
                    ..working()
                },
                class: FailureClass::ToolPermission,
                trigger: None,
                start_failed: false,
                reason_has: "tool-permission question",
            },
            Case {
                name: "known boot dialog",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::KnownDialog,
                    rule: Some("api_key".into()),
                    ..at(LaneStatus::Blocked)
                },
                class: FailureClass::BootDialog,
                trigger: None,
                start_failed: true,
                reason_has: "rule api_key",
            },
            Case {
                name: "unknown dialog at boot",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::UnknownDialog,
                    excerpt: Some("Choose a theme: 1. Dark 2. Light".into()),
                    ..at(LaneStatus::Spawning)
                },
                class: FailureClass::BootDialog,
                trigger: Some(Trigger::UnknownDialog),
                start_failed: true,
                reason_has: "screen: \"Choose a theme: 1. Dark 2. Light\"",
            },
            Case {
                name: "unknown dialog while working",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::UnknownDialog,
                    ..working()
                },
                class: FailureClass::BootDialog,
                trigger: Some(Trigger::UnknownDialog),
                start_failed: false,
                reason_has: "a dialog no profile rule knows",
            },
            Case {
                name: "provider retry text",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::ProviderRetry,
                    rule: Some("provider_retrying".into()),
                    ..working()
                },
                class: FailureClass::Provider,
                trigger: Some(Trigger::ProviderDown),
                start_failed: false,
                reason_has: "retrying its model provider (rule provider_retrying)",
            },
            Case {
                name: "draft still in the input line",
                evidence: FailureEvidence {
                    screen: ScreenEvidence::PromptNotAccepted,
                    prompt_sent: true,
                    reached_ready: true,
                    subphase: Some(BlockedSubphase::PromptDelivery),
                    ..at(LaneStatus::Blocked)
                },
                class: FailureClass::PromptDelivery,
                trigger: Some(Trigger::PromptNotAccepted),
                start_failed: false,
                reason_has: "draft is still in the input line",
            },
            Case {
                name: "branch diverged",
                evidence: FailureEvidence {
                    freshness: Some(Freshness::Diverged),
                    subphase: Some(BlockedSubphase::BranchFreshness),
                    ..FailureEvidence {
                        status: LaneStatus::Blocked,
                        ..working()
                    }
                },
                class: FailureClass::BranchDivergence,
                trigger: Some(Trigger::StaleBranch),
                start_failed: false,
                reason_has: "branch is diverged",
            },
            Case {
                name: "build failed",
                evidence: FailureEvidence {
                    verification: Some(VerificationFailure::Compile),
                    process: ProcessState::Running,
                    ..FailureEvidence {
                        status: LaneStatus::Finished,
                        ..working()
                    }
                },
                class: FailureClass::Compile,
                trigger: None,
                start_failed: false,
                reason_has: "the build failed",
            },
            Case {
                name: "tests failed",
                evidence: FailureEvidence {
                    verification: Some(VerificationFailure::Test),
                    ..working()
                },
                class: FailureClass::Test,
                trigger: None,
                start_failed: false,
                reason_has: "tests failed",
            },
            Case {
                name: "test hang",
                evidence: FailureEvidence {
                    subphase: Some(BlockedSubphase::TestHang),
                    ..FailureEvidence {
                        status: LaneStatus::Blocked,
                        ..working()
                    }
                },
                class: FailureClass::TestHang,
                trigger: None,
                start_failed: false,
                reason_has: "exceeded its timeout",
            },
            Case {
                name: "crashed while working",
                evidence: FailureEvidence {
                    process: ProcessState::Exited { code: 101 },
                    ..working()
                },
                class: FailureClass::WorkerCrashed,
                trigger: Some(Trigger::WorkerExited),
                start_failed: false,
                reason_has: "exited with status 101 (after reaching its input line) while running",
            },
            Case {
                name: "failed start: killed while booting",
                evidence: FailureEvidence {
                    process: ProcessState::Signalled { signal: 9 },
                    ..at(LaneStatus::Spawning)
                },
                class: FailureClass::WorkerCrashed,
                trigger: Some(Trigger::WorkerExited),
                start_failed: true,
                reason_has: "killed by signal 9 (failed start: before reaching its input line)",
            },
            Case {
                name: "worker lost",
                evidence: FailureEvidence {
                    process: ProcessState::Gone,
                    ..working()
                },
                class: FailureClass::WorkerLost,
                trigger: Some(Trigger::WorkerExited),
                start_failed: false,
                reason_has: "gone with its exit status unknown",
            },
            Case {
                name: "stalled while running",
                evidence: FailureEvidence {
                    stalled: true,
                    ..working()
                },
                class: FailureClass::Stalled,
                trigger: Some(Trigger::Stalled),
                start_failed: false,
                reason_has: "no meaningful progress while running",
            },
            Case {
                name: "blocked as stalled after recovery did not help",
                evidence: FailureEvidence {
                    subphase: Some(BlockedSubphase::Stalled),
                    ..FailureEvidence {
                        status: LaneStatus::Blocked,
                        ..working()
                    }
                },
                class: FailureClass::Stalled,
                trigger: Some(Trigger::Stalled),
                start_failed: false,
                reason_has: "blocked{stalled}",
            },
            Case {
                name: "infra wins over everything",
                evidence: FailureEvidence {
                    infra: Some("state_file_write_failed: disk full".into()),
                    process: ProcessState::Gone,
                    stalled: true,
                    ..working()
                },
                class: FailureClass::Infra,
                trigger: None,
                start_failed: false,
                reason_has: "disk full",
            },
        ]
    }

    #[test]
    fn each_case_gets_its_one_class() {
        for case in cases() {
            let got = classify(&case.evidence);
            assert_eq!(got.class, case.class, "{}: {}", case.name, got.reason);
            assert_eq!(got.trigger, case.trigger, "{}: {}", case.name, got.reason);
            assert_eq!(got.start_failed, case.start_failed, "{}", case.name);
            assert!(
                got.reason.contains(case.reason_has),
                "{}: {:?} lacks {:?}",
                case.name,
                got.reason,
                case.reason_has
            );
        }
    }

    #[test]
    fn every_failure_class_is_reachable() {
        let classes: Vec<FailureClass> = cases().iter().map(|c| c.class).collect();
        for class in crate::facts::ALL_FAILURE_CLASSES {
            assert!(classes.contains(&class), "no case yields {class:?}");
        }
    }

    #[test]
    fn triggers_agree_with_their_classes() {
        for case in cases() {
            let got = classify(&case.evidence);
            if let Some(trigger) = got.trigger {
                assert!(
                    trigger.classes().contains(&got.class),
                    "{}: {trigger} with {:?}",
                    case.name,
                    got.class
                );
            }
        }
    }

    #[test]
    fn stuck_phases_are_classified_from_the_screen_and_the_process() {
        let stuck = |phase, evidence: FailureEvidence| {
            let got = classify_stuck(phase, &evidence);
            (got.class, got.trigger, got.start_failed, got.reason)
        };
        let (class, trigger, start_failed, reason) = stuck(
            StuckPhase::TrustRequired,
            FailureEvidence {
                screen: ScreenEvidence::TrustPrompt,
                trusted: true,
                ..at(LaneStatus::Running)
            },
        );
        assert_eq!(
            (class, trigger, start_failed),
            (
                FailureClass::TrustGate,
                Some(Trigger::TrustPromptPersists),
                true
            )
        );
        assert!(
            reason.starts_with("stuck in trust_required past its deadline: the trust prompt"),
            "{reason}"
        );
        let (class, trigger, ..) = stuck(
            StuckPhase::Spawning,
            FailureEvidence {
                screen: ScreenEvidence::KnownDialog,
                rule: Some("theme".into()),
                ..at(LaneStatus::Spawning)
            },
        );
        assert_eq!((class, trigger), (FailureClass::BootDialog, None));
        let (class, trigger, start_failed, reason) = stuck(
            StuckPhase::Spawning,
            FailureEvidence {
                process: ProcessState::Exited { code: 127 },
                ..at(LaneStatus::Spawning)
            },
        );
        assert_eq!(
            (class, trigger, start_failed),
            (
                FailureClass::WorkerCrashed,
                Some(Trigger::WorkerExited),
                true
            )
        );
        assert!(reason.contains("failed start"), "{reason}");
        let (class, trigger, ..) = stuck(
            StuckPhase::ReadyForPrompt,
            FailureEvidence {
                screen: ScreenEvidence::ProviderRetry,
                ..at(LaneStatus::ReadyForPrompt)
            },
        );
        assert_eq!(
            (class, trigger),
            (FailureClass::Provider, Some(Trigger::ProviderDown))
        );
        let (class, trigger, start_failed, _) = stuck(
            StuckPhase::ReadyForPrompt,
            FailureEvidence {
                prompt_sent: true,
                ..at(LaneStatus::ReadyForPrompt)
            },
        );
        assert_eq!(
            (class, trigger, start_failed),
            (
                FailureClass::PromptDelivery,
                Some(Trigger::PromptNotAccepted),
                false
            )
        );
        let (class, trigger, start_failed, reason) =
            stuck(StuckPhase::Spawning, at(LaneStatus::Spawning));
        assert_eq!(
            (class, trigger, start_failed),
            (FailureClass::PromptDelivery, None, true)
        );
        assert!(reason.contains("never showed an input line"), "{reason}");
    }

    #[test]
    fn a_failed_start_and_a_crash_while_working_read_differently() {
        let crash = classify(&FailureEvidence {
            process: ProcessState::Exited { code: 2 },
            ..working()
        });
        let failed_start = classify(&FailureEvidence {
            process: ProcessState::Exited { code: 2 },
            ..at(LaneStatus::Spawning)
        });
        assert_eq!(crash.class, failed_start.class);
        assert!(!crash.start_failed && failed_start.start_failed);
        assert!(failed_start.reason.contains("failed start"));
        assert!(!crash.reason.contains("failed start"));
    }
}
