//! The typed fields of every lane event: one variant of [`Payload`] per kind (`docs/events.md`),
//! each with its own struct, written and read through it, so a writer cannot pair a kind with a
//! detail of another shape and a writer and its readers cannot disagree on a key.
//!
//! On the wire the fields stay where they always were, in the event's `detail` object;
//! [`LaneEvent::payload`](crate::LaneEvent::payload) reads them back as the variant of the
//! event's kind. A kind with no fields of its own (most transitions) is a variant without data,
//! written as no `detail`. A field a writer leaves out reads as absent, and an event whose
//! detail does not have its kind's shape (a log written by another version) reads as no
//! payload: reading a log never fails on it.
//!
//! A new kind: its [`LaneEventKind`] variant and wire name, a struct here (in the submodule of
//! its area) unless it has no fields, and one line in the `payloads!` table below; the tests then
//! want a written example of it in `every_payload`.

use serde::Deserialize;
use serde_json::Value;

use crate::verification::MergeOutcome;
use crate::{LaneEventKind, LaneStatus};

mod branch;
mod channel;
mod delivery;
mod handoff;
mod run;
mod trust;

pub use branch::{
    BranchBlocked, BranchStale, CommitCreated, CommitsSkipped, GitFailed, Green, MergeAttempt,
    MergeReady, Red, StaleRed, TestHung, Verified, VerifyBlocked,
};
pub use channel::{
    BudgetSet, ChannelContradiction, ChannelDegraded, ChannelOpened, HookReported,
    ProtocolReported, UsageReported, Usd,
};
pub use delivery::{
    DeliveryHeld, ErrorReport, InputCleared, PromptAccepted, PromptMisdelivery, PromptRound,
    PromptSent, PromptTyped, SendQueued, SendRefused,
};
pub use handoff::{LandFailed, LandFailure, Landed, PrOpened};
pub use run::{
    ClosedOut, Escalated, LaneFailed, LaneOutcome, OutcomeReported, PreviousRun, PublicationFound,
    PublicationRestored, RecoveryAttempt, Rerun, RestartRequest, Restarted, SessionReplaced,
    Stalled, WorkerStarted,
};
pub use trust::{
    CallerLane, CallerRefused, DialogAnswered, DialogAnsweredOutside, DialogIgnored,
    OperatorDeclined, PermissionDecided, TrustResolved, TrustStoreConfined, TrustStoreSeeded,
};

/// Declares [`Payload`] from its table: each variant with fields, with its type and the kind
/// that carries it, then each variant without. A kind may have more than one variant
/// (`lane.blocked`): reading tries them in the table's order.
macro_rules! payloads {
    (
        fields { $( $(#[$doc:meta])* $variant:ident($fields:ty) => $kind:ident, )* }
        none { $( $(#[$bare_doc:meta])* $bare:ident => $bare_kind:ident, )* }
    ) => {
        /// The typed fields of an event, as the variant of its kind.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Payload {
            $( $(#[$doc])* $variant($fields), )*
            $( $(#[$bare_doc])* $bare, )*
        }

        impl Payload {
            /// The kind of event that carries it.
            pub fn kind(&self) -> LaneEventKind {
                match self {
                    $( Payload::$variant(_) => LaneEventKind::$kind, )*
                    $( Payload::$bare => LaneEventKind::$bare_kind, )*
                }
            }

            /// Its fields as the event's `detail`: null (no `detail` on the wire) when it has
            /// none.
            pub fn detail(&self) -> Value {
                let value = match self {
                    $( Payload::$variant(fields) => serde_json::to_value(fields), )*
                    $( Payload::$bare => return Value::Null, )*
                };
                match value.expect("payloads are plain data") {
                    Value::Object(map) if map.is_empty() => Value::Null,
                    value => value,
                }
            }

            /// The payload of an event of `kind` with this `detail`; `None` for a kind this
            /// build does not know or a detail that does not have its kind's shape.
            pub fn read(kind: &LaneEventKind, detail: &Value) -> Option<Payload> {
                // A kind without fields has none to read, whatever an older writer put there.
                let no_fields = detail.is_null() || detail.is_object();
                let empty = Value::Object(serde_json::Map::new());
                let detail = if detail.is_null() { &empty } else { detail };
                $(
                    if *kind == LaneEventKind::$kind
                        && let Ok(fields) = <$fields as Deserialize>::deserialize(detail)
                    {
                        return Some(Payload::$variant(fields));
                    }
                )*
                $(
                    if *kind == LaneEventKind::$bare_kind && no_fields {
                        return Some(Payload::$bare);
                    }
                )*
                None
            }
        }
    };
}

payloads! {
    fields {
        /// `lane.started`.
        Started(WorkerStarted) => Started,
        /// `lane.adopted`.
        Adopted(WorkerStarted) => Adopted,
        /// `lane.session_replaced`.
        SessionReplaced(SessionReplaced) => SessionReplaced,
        /// `lane.trust_store_seeded`.
        TrustStoreSeeded(TrustStoreSeeded) => TrustStoreSeeded,
        /// `lane.trust_store_confined`.
        TrustStoreConfined(TrustStoreConfined) => TrustStoreConfined,
        /// `lane.trust_resolved`.
        TrustResolved(TrustResolved) => TrustResolved,
        /// `lane.dialog_answered`.
        DialogAnswered(DialogAnswered) => DialogAnswered,
        /// `lane.dialog_ignored`.
        DialogIgnored(DialogIgnored) => DialogIgnored,
        /// `lane.permission.decided`.
        PermissionDecided(PermissionDecided) => PermissionDecided,
        /// `lane.delivery_held`.
        DeliveryHeld(DeliveryHeld) => DeliveryHeld,
        /// `lane.prompt_typed`.
        PromptTyped(PromptTyped) => PromptTyped,
        /// `lane.prompt_sent`.
        PromptSent(PromptSent) => PromptSent,
        /// `lane.prompt_misdelivery`.
        PromptMisdelivery(PromptMisdelivery) => PromptMisdelivery,
        /// `lane.prompt_accepted`.
        PromptAccepted(PromptAccepted) => PromptAccepted,
        /// `lane.prompt_round`.
        PromptRound(PromptRound) => PromptRound,
        /// `lane.input_cleared`.
        InputCleared(InputCleared) => InputCleared,
        /// `lane.send_queued`.
        SendQueued(SendQueued) => SendQueued,
        /// `lane.send_refused`.
        SendRefused(SendRefused) => SendRefused,
        /// `lane.send_failed`.
        SendFailed(ErrorReport) => SendFailed,
        /// `lane.stalled`.
        Stalled(Stalled) => Stalled,
        /// `lane.hook`.
        Hook(HookReported) => Hook,
        /// `lane.channel.degraded`.
        ChannelDegraded(ChannelDegraded) => ChannelDegraded,
        /// `lane.protocol`.
        Protocol(ProtocolReported) => Protocol,
        /// `lane.channel.opened`.
        ChannelOpened(ChannelOpened) => ChannelOpened,
        /// `lane.channel.contradiction`.
        ChannelContradiction(ChannelContradiction) => ChannelContradiction,
        /// `lane.usage`.
        Usage(UsageReported) => Usage,
        /// `lane.blocked` by a recipe's escalation (read before [`Payload::Blocked`]).
        BlockedEscalated(Escalated) => Blocked,
        /// `lane.escalated`.
        Escalated(Escalated) => Escalated,
        /// `lane.operator_ignored`.
        OperatorIgnored(OperatorDeclined) => OperatorIgnored,
        /// `lane.operator_refused`.
        OperatorRefused(OperatorDeclined) => OperatorRefused,
        /// `lane.caller_refused`.
        CallerRefused(CallerRefused) => CallerRefused,
        /// `lane.dialog_answered_outside`.
        DialogAnsweredOutside(DialogAnsweredOutside) => DialogAnsweredOutside,
        /// `lane.restart_requested`.
        RestartRequested(RestartRequest) => RestartRequested,
        /// `lane.restarted`.
        Restarted(Restarted) => Restarted,
        /// `lane.commit.created`.
        CommitCreated(CommitCreated) => CommitCreated,
        /// `lane.commits.skipped`.
        CommitsSkipped(CommitsSkipped) => CommitsSkipped,
        /// `lane.branch_blocked`.
        BranchBlocked(BranchBlocked) => BranchBlocked,
        /// `lane.stale_red`.
        StaleRed(StaleRed) => StaleRed,
        /// `branch.stale_against_main`.
        BranchStale(BranchStale) => BranchStaleAgainstMain,
        /// `branch.merged_forward`.
        MergedForward(MergeOutcome) => BranchMergedForward,
        /// `branch.merge_conflict`.
        MergeConflict(MergeOutcome) => BranchMergeConflict,
        /// `branch.merge_refused`.
        MergeRefused(MergeOutcome) => BranchMergeRefused,
        /// `branch.merge_failed`.
        MergeFailed(ErrorReport) => BranchMergeFailed,
        /// `test.hung`.
        TestHung(TestHung) => TestHung,
        /// `lane.green`.
        Green(Green) => Green,
        /// `lane.red`.
        Red(Red) => Red,
        /// `lane.verify_blocked`.
        VerifyBlocked(VerifyBlocked) => VerifyBlocked,
        /// `lane.verified` (boxed: a verification with its commands is large).
        Verified(Box<Verified>) => Verified,
        /// `lane.merge.ready`.
        MergeReady(MergeReady) => MergeReady,
        /// `lane.recovery.queued`.
        RecoveryQueued(RecoveryAttempt) => RecoveryQueued,
        /// `lane.recovery.running`.
        RecoveryRunning(RecoveryAttempt) => RecoveryRunning,
        /// `lane.recovery.succeeded`.
        RecoverySucceeded(RecoveryAttempt) => RecoverySucceeded,
        /// `lane.recovery.failed`.
        RecoveryFailed(RecoveryAttempt) => RecoveryFailed,
        /// `lane.recovery.exhausted`.
        RecoveryExhausted(RecoveryAttempt) => RecoveryExhausted,
        /// `lane.failed` (its fields are there only for some causes).
        Failed(LaneFailed) => Failed,
        /// `lane.outcome`.
        Outcome(OutcomeReported) => Outcome,
        /// `lane.closed_out`.
        ClosedOut(ClosedOut) => ClosedOut,
        /// `lane.rerun`.
        Rerun(Rerun) => Rerun,
        /// `lane.publication_restored`.
        PublicationRestored(PublicationRestored) => PublicationRestored,
        /// `lane.landed`.
        Landed(Landed) => Landed,
        /// `lane.land_failed`.
        LandFailed(LandFailed) => LandFailed,
        /// `lane.pr.opened`.
        PrOpened(PrOpened) => PrOpened,
        /// `lane.budget_set`.
        BudgetSet(BudgetSet) => BudgetSet,
    }
    none {
        /// `lane.spawning`.
        Spawning => Spawning,
        /// `lane.trust_required`.
        TrustRequired => TrustRequired,
        /// `lane.tool_permission_required`.
        ToolPermissionRequired => ToolPermissionRequired,
        /// `lane.ready`.
        Ready => Ready,
        /// `lane.delivery_resumed`.
        DeliveryResumed => DeliveryResumed,
        /// `lane.running`.
        Running => Running,
        /// `lane.blocked` that no escalation made.
        Blocked => Blocked,
        /// `lane.finished`.
        Finished => Finished,
        /// `lane.stopped`.
        Stopped => Stopped,
    }
}

impl Payload {
    /// The payload of a transition to `status` that carries nothing but its states and
    /// evidence; `None` for `prompt_accepted`, whose delivery receipt only its writer has.
    pub fn transition(status: LaneStatus) -> Option<Payload> {
        Some(match status {
            LaneStatus::Spawning => Payload::Spawning,
            LaneStatus::TrustRequired => Payload::TrustRequired,
            LaneStatus::ToolPermissionRequired => Payload::ToolPermissionRequired,
            LaneStatus::ReadyForPrompt => Payload::Ready,
            LaneStatus::PromptAccepted => return None,
            LaneStatus::Running => Payload::Running,
            LaneStatus::Blocked => Payload::Blocked,
            LaneStatus::Finished => Payload::Finished,
            LaneStatus::Stopped => Payload::Stopped,
            LaneStatus::Failed => Payload::Failed(LaneFailed::default()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LaneEvent;
    use crate::state_file::{AttemptOrigin, AttemptState, LedgerEntry};
    use crate::verification::{
        CommandOutcome, CommandResult, FreshnessState, GitOperation, GreenLevel, MergeOutcome,
        Verification, VerifyResult,
    };
    use crate::{Evidence, FailureClass};
    use clawpool_worktree::{GitOperationKind, MergeMethod, MissingCommit};

    fn every_payload() -> Vec<Payload> {
        let started = WorkerStarted {
            agent: "claude".into(),
            pid: Some(42),
        };
        let escalated = Escalated {
            reason: "stalled twice".into(),
            next_action: "clawpool attach a".into(),
            recipe: Some("interrupt_and_nudge".into()),
        };
        vec![
            Payload::Started(started.clone()),
            Payload::Adopted(WorkerStarted {
                pid: None,
                ..started
            }),
            Payload::TrustResolved(TrustResolved {
                method: TrustResolved::MANUAL.into(),
            }),
            Payload::PromptSent(PromptSent {
                attempt: 2,
                by: Some("resubmit_prompt".into()),
            }),
            Payload::PromptAccepted(PromptAccepted {
                method: "typed".into(),
                attempts: 1,
                sent_at: Some(1_000),
                accepted_at: Some(2_000),
                observed_prompt_preview: Some("fix the bug".into()),
            }),
            Payload::Escalated(Escalated {
                recipe: None,
                ..escalated.clone()
            }),
            Payload::BlockedEscalated(escalated),
            Payload::Outcome(OutcomeReported {
                outcome: LaneOutcome::NoChanges,
                commits: 0,
                dirty: false,
            }),
            Payload::PermissionDecided(PermissionDecided {
                tool: Some("bash".into()),
                verb: Some("cargo".into()),
                args: vec!["test".into()],
                cwd: Some("/work/lanes/a".into()),
                rule: "grant:g1".into(),
                decision: "allow".into(),
                reason: "granted for this repository".into(),
                command: Some("cargo test".into()),
                parts: Some(1),
                profile: "workspace-write".into(),
                grant_stores: vec![serde_json::json!({"store": "x", "set_aside": true})],
            }),
            Payload::ChannelOpened(ChannelOpened {
                channel: "codex_app_server".into(),
                settings: None,
                socket: Some(".claw/codex-app-server.sock".into()),
                adopted: true,
            }),
            Payload::ChannelDegraded(ChannelDegraded {
                channel: "claude_hooks".into(),
                event: "Stop".into(),
                error: "the control socket is gone".into(),
                failed: 2,
                decides: ChannelDegraded::SCREEN.into(),
            }),
            Payload::Verified(Box::new(Verified {
                verification: Verification {
                    level: GreenLevel::Targeted,
                    result: VerifyResult::Green,
                    class: None,
                    commands: Vec::new(),
                    merge: None,
                    freshness: None,
                    reason: None,
                    head: Some("abc123".into()),
                    started_at: 1,
                    finished_at: 2,
                },
                green_level: Some(GreenLevel::Targeted),
                message: None,
            })),
            Payload::DialogAnswered(DialogAnswered {
                dialog: DialogAnswered::TOOL_PERMISSION.into(),
                choice: "no".into(),
                by: DialogAnswered::BY_OPERATOR.into(),
                attempt: 1,
                completed: false,
                error: Some("the dialog did not go".into()),
            }),
            Payload::DialogIgnored(DialogIgnored {
                dialog: "trust".into(),
                reason: DialogIgnored::AFTER_BOOT.into(),
            }),
            Payload::CommitCreated(CommitCreated {
                sha: "abc123".into(),
                subject: "Fix the login bug".into(),
                look: "watch".into(),
            }),
            Payload::CommitsSkipped(CommitsSkipped {
                count: 3,
                oldest: Some("aaa111".into()),
                newest_reported: Some("bbb222".into()),
                look: "start".into(),
            }),
            Payload::ClosedOut(ClosedOut {
                rule: "close-out-merge-ready".into(),
            }),
            Payload::Hook(HookReported {
                event: "PreToolUse".into(),
                session_id: Some("s1".into()),
                transcript_path: None,
                fields: serde_json::json!({"tool": "Bash", "tool_input": {"command": "ls"}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            }),
            Payload::Protocol(ProtocolReported {
                event: ProtocolReported::TOKEN_USAGE.into(),
                means: "Usage".into(),
                thread_id: Some("t1".into()),
                fields: serde_json::json!({"turn_id": "7", "usage": {"total": {"inputTokens": 3}}})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            }),
            Payload::Usage(UsageReported {
                source: "claude_transcript".into(),
                usage: serde_json::json!({"input_tokens": 3, "output_tokens": 5}),
                transcript_path: Some("/tmp/t.jsonl".into()),
                model: Some("claude-sonnet-4-5-20250929".into()),
                message_id: Some("msg_01".into()),
            }),
            Payload::SessionReplaced(SessionReplaced {
                session: "clawpool:a".into(),
                killed: false,
                error: Some("no such session".into()),
            }),
            Payload::TrustStoreSeeded(TrustStoreSeeded {
                store: "/home/u/.claude.json".into(),
                outcome: Some("Seeded".into()),
                error: None,
            }),
            Payload::TrustStoreConfined(TrustStoreConfined {
                store: "/home/u/.claude.json".into(),
                revoked: Some(vec!["/elsewhere".into()]),
                error: None,
            }),
            Payload::DeliveryHeld(DeliveryHeld {
                operation: GitOperation {
                    kind: GitOperationKind::Rebase,
                    paused: true,
                },
            }),
            Payload::PromptTyped(PromptTyped {
                chars: 18,
                method: "typed".into(),
            }),
            Payload::PromptMisdelivery(PromptMisdelivery {
                target: "shell".into(),
                prompt_sent: Some(true),
                reason: None,
            }),
            Payload::PromptRound(PromptRound {
                method: "task_file".into(),
                chars: 4_000,
            }),
            Payload::InputCleared(InputCleared {
                draft: "half a prompt".into(),
                keys: vec!["ctrl-u".into()],
            }),
            Payload::SendQueued(SendQueued { queued: 2 }),
            Payload::SendRefused(SendRefused {
                chars: Some(5),
                draft: "stuck".into(),
                reason: "the input line is not empty".into(),
            }),
            Payload::SendFailed(ErrorReport {
                error: "writing the task file: disk full".into(),
            }),
            Payload::Stalled(Stalled {
                seconds_without_progress: 300,
                stall_after_secs: 300,
            }),
            Payload::ChannelContradiction(ChannelContradiction {
                channel: evidence("Stop"),
                screen: evidence("working"),
                for_ms: 5_000,
                resolved: ChannelContradiction::FINISHED.into(),
            }),
            Payload::OperatorIgnored(OperatorDeclined {
                command: "trust".into(),
                reason: "no dialog on screen".into(),
                choices: Vec::new(),
            }),
            Payload::OperatorRefused(OperatorDeclined {
                command: "answer --choice maybe".into(),
                reason: "the dialog has no such choice".into(),
                choices: vec!["no".into(), "yes".into()],
            }),
            Payload::CallerRefused(CallerRefused {
                request: "answer --choice yes".into(),
                reason: "the caller (pid 4242) runs inside lane \"b\"".into(),
                pid: Some(4242),
                uid: Some(1000),
                inside: Some(CallerLane {
                    lane: "b".into(),
                    dir: "/repo/.worktrees/b".into(),
                    pid: 4100,
                    relation: "ancestor".into(),
                }),
            }),
            Payload::DialogAnsweredOutside(DialogAnsweredOutside {
                dialog: "tool_permission".into(),
                dialog_kind: "tool_permission".into(),
            }),
            Payload::RestartRequested(RestartRequest {
                by: "operator".into(),
                resume: true,
                redeliver: false,
            }),
            Payload::Restarted(Restarted {
                by: "restart_crashed_worker".into(),
                restart: 1,
                worker_id: "a-1-r1".into(),
                resume: false,
                redeliver_prompt: true,
                dropped_turn: false,
                previous: "failed{worker_crashed}".into(),
                previous_exit: None,
            }),
            Payload::BranchBlocked(BranchBlocked {
                merge: MergeAttempt::Outcome(MergeOutcome::Dirty {
                    paths: vec!["src/lib.rs".into()],
                }),
                message: "the worktree has uncommitted changes".into(),
            }),
            Payload::BranchBlocked(BranchBlocked {
                merge: MergeAttempt::Failed(GitFailed::Failed {
                    error: "git exited 128".into(),
                }),
                message: "merging the base failed: git exited 128".into(),
            }),
            Payload::StaleRed(StaleRed {
                level: GreenLevel::Package,
                class: Some(FailureClass::Test),
                failed: vec![command("cargo test", CommandOutcome::Failed)],
                hung: Vec::new(),
                missing: Some(vec![missing()]),
                behind: Some(1),
                reason: Some("stale".into()),
            }),
            Payload::BranchStale(BranchStale {
                base_ref: "origin/main".into(),
                base_sha: Some("ccc333".into()),
                behind: Some(1),
                ahead: Some(2),
                missing: vec![missing()],
            }),
            Payload::MergedForward(MergeOutcome::Merged {
                old_head: "aaa111".into(),
                new_head: "bbb222".into(),
                base_sha: "ccc333".into(),
                method: MergeMethod::Merge,
            }),
            Payload::MergeConflict(MergeOutcome::Conflict {
                paths: vec!["src/lib.rs".into()],
                head: "aaa111".into(),
                base_sha: "ccc333".into(),
                method: MergeMethod::Rebase,
            }),
            Payload::MergeRefused(MergeOutcome::Detached {
                sha: "aaa111".into(),
            }),
            Payload::MergeFailed(ErrorReport {
                error: "git exited 128".into(),
            }),
            Payload::TestHung(TestHung {
                command: "cargo test".into(),
                timeout_secs: 60,
                log: "/tmp/1-targeted-1.log".into(),
            }),
            Payload::Green(Green {
                level: Some(GreenLevel::Workspace),
                asked: GreenLevel::MergeReady,
                freshness: Some(FreshnessState::Unknown),
                stale: false,
                behind: None,
                missing: Some(Vec::new()),
                reason: Some("freshness unknown".into()),
            }),
            Payload::Red(Red {
                level: GreenLevel::Targeted,
                class: Some(FailureClass::Compile),
                failed: vec![command("cargo build", CommandOutcome::Failed)],
                hung: Vec::new(),
                freshness: Some(None),
                reason: None,
            }),
            // A run that only hung says nothing of freshness.
            Payload::Red(Red {
                level: GreenLevel::Targeted,
                class: Some(FailureClass::TestHang),
                failed: Vec::new(),
                hung: vec![command("cargo test", CommandOutcome::Hung)],
                freshness: None,
                reason: Some("`cargo test` hung".into()),
            }),
            Payload::VerifyBlocked(VerifyBlocked {
                level: GreenLevel::MergeReady,
                reason: Some("a git rebase is in progress".into()),
                merge: None,
                behind: Some(3),
                missing: None,
            }),
            Payload::MergeReady(MergeReady {
                head: Some("abc123".into()),
            }),
            Payload::RecoveryQueued(attempt(0, AttemptState::Queued)),
            Payload::RecoveryRunning(attempt(1, AttemptState::Running)),
            Payload::RecoverySucceeded(attempt(1, AttemptState::Succeeded)),
            Payload::RecoveryFailed(attempt(2, AttemptState::Failed)),
            Payload::RecoveryExhausted(attempt(3, AttemptState::Exhausted)),
            Payload::Failed(LaneFailed {
                signal: Some("SIGTERM".into()),
                error: None,
            }),
            Payload::Failed(LaneFailed::default()),
            Payload::Rerun(Rerun {
                by: "spawn --rerun".into(),
                previous: PreviousRun::RemovedByGc,
            }),
            Payload::PublicationRestored(PublicationRestored {
                found: PublicationFound::Changed,
                claimed_status: Some("finished".into()),
            }),
            Payload::Landed(Landed {
                base_ref: "refs/heads/main".into(),
                old_base: "aaa111".into(),
                new_base: "bbb222".into(),
                head: "bbb222".into(),
                method: "fast_forward".into(),
                attempts: 1,
            }),
            Payload::LandFailed(LandFailed {
                failure: LandFailure::Red,
                reason: "`cargo test` failed".into(),
                base_sha: Some("aaa111".into()),
                head: Some("ccc333".into()),
                logs: vec!["/tmp/1.log".into()],
                next_action: "read the log, send a follow-up, then land again".into(),
            }),
            Payload::PrOpened(PrOpened {
                number: 7,
                url: "https://github.com/acme/widgets/pull/7".into(),
                branch: "lanes/a".into(),
                base: "main".into(),
                repository: "acme/widgets".into(),
                head: "ccc333".into(),
                existing: false,
            }),
            Payload::BudgetSet(BudgetSet {
                budget_usd: Usd(2.5),
                was_usd: Some(Usd(1.0)),
                cost_usd: Some(Usd(1.25)),
            }),
            Payload::Spawning,
            Payload::TrustRequired,
            Payload::ToolPermissionRequired,
            Payload::Ready,
            Payload::DeliveryResumed,
            Payload::Running,
            Payload::Blocked,
            Payload::Finished,
            Payload::Stopped,
        ]
    }

    fn evidence(rule: &str) -> Evidence {
        Evidence {
            rule: rule.into(),
            region: "screen".into(),
            matched: rule.into(),
        }
    }

    fn command(line: &str, outcome: CommandOutcome) -> CommandResult {
        CommandResult {
            command: line.into(),
            outcome,
            exit_code: Some(101),
            duration_ms: 1_200,
            log: "/tmp/1.log".into(),
        }
    }

    fn missing() -> MissingCommit {
        MissingCommit {
            sha: "ccc333".into(),
            subject: "Bump the base".into(),
        }
    }

    fn attempt(id: usize, state: AttemptState) -> RecoveryAttempt {
        RecoveryAttempt {
            id,
            entry: LedgerEntry {
                recipe: "interrupt_and_nudge".into(),
                trigger: "stalled".into(),
                attempt: 1,
                state,
                origin: AttemptOrigin::Policy,
                queued_at: 10,
                started_at: Some(11),
                finished_at: None,
                result: None,
            },
        }
    }

    #[test]
    fn every_kind_has_a_payload() {
        let written: Vec<LaneEventKind> = every_payload()
            .iter()
            .filter(|payload| Payload::read(&payload.kind(), &payload.detail()).is_some())
            .map(Payload::kind)
            .collect();
        let missing: Vec<&str> = LaneEventKind::ALL
            .iter()
            .filter(|kind| !written.contains(kind))
            .map(LaneEventKind::as_str)
            .collect();
        assert!(missing.is_empty(), "kinds without a payload: {missing:?}");
    }

    #[test]
    fn a_payload_without_fields_is_written_as_no_detail() {
        for payload in [
            Payload::Ready,
            Payload::Failed(LaneFailed::default()),
            Payload::DeliveryResumed,
        ] {
            assert_eq!(payload.detail(), Value::Null, "{}", payload.kind());
        }
        assert_eq!(
            Payload::transition(LaneStatus::Blocked),
            Some(Payload::Blocked)
        );
        assert_eq!(Payload::transition(LaneStatus::PromptAccepted), None);
    }

    #[test]
    fn every_payload_reads_back_as_written_under_its_kind() {
        for payload in every_payload() {
            let read = Payload::read(&payload.kind(), &payload.detail());
            assert_eq!(read.as_ref(), Some(&payload), "{}", payload.kind());
        }
    }

    #[test]
    fn the_documented_example_event_reads_as_its_payload() {
        let doc = include_str!("../../../docs/events.md");
        let example = doc
            .split("```json\n")
            .nth(1)
            .and_then(|rest| rest.split("\n```").next())
            .expect("docs/events.md opens with an example event");
        let event: LaneEvent = serde_json::from_str(example).expect("the example is an event");
        assert_eq!(
            event.payload(),
            Some(Payload::PromptAccepted(PromptAccepted {
                method: "typed".into(),
                attempts: 1,
                sent_at: Some(1_795_266_696_326),
                accepted_at: Some(1_795_266_696_338),
                observed_prompt_preview: Some("❯ fix the login bug".into()),
            }))
        );
    }

    #[test]
    fn a_detail_without_its_kinds_shape_has_no_payload() {
        assert_eq!(
            Payload::read(
                &LaneEventKind::PromptSent,
                &serde_json::json!({"attempt": "one"})
            ),
            None
        );
        assert_eq!(
            Payload::read(
                &LaneEventKind::Restarted,
                &serde_json::json!({"by": "operator"})
            ),
            None
        );
        // A kind without fields has no payload in a detail that is not an object.
        assert_eq!(
            Payload::read(&LaneEventKind::Running, &serde_json::json!("running")),
            None
        );
        assert_eq!(
            Payload::read(
                &LaneEventKind::Other("lane.from_the_future".into()),
                &Value::Null
            ),
            None
        );
        // A transition to blocked that no escalation made is a plain `lane.blocked`.
        assert_eq!(
            Payload::read(&LaneEventKind::Blocked, &Value::Null),
            Some(Payload::Blocked)
        );
    }
}
