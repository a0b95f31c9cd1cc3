//! Recovery's rules decided with no process, file or clock: the time and the lane's facts
//! are inputs, and what recovery asks for comes back as a plan and effects.

use super::*;
use clawpool_lanes::FailureClass;
use clawpool_recovery::{DEFAULT_INTERRUPT_KEY, DEFAULT_NUDGE, Freshness, Green};

const T0: u64 = 1_800_000_000;

/// A lane whose profile can resume and which has a branch of its own.
fn abilities() -> LaneAbilities {
    LaneAbilities {
        profile: "claude".into(),
        resumable: true,
        has_branch: true,
    }
}

fn recovery_with(policy: Policy) -> Recovery {
    let (recovery, effects) = Recovery::new(
        Arc::new(policy),
        "l1",
        abilities(),
        RecoveryLedger::default(),
        T0,
    );
    assert!(effects.is_empty(), "{effects:?}");
    recovery
}

fn defaults() -> Recovery {
    recovery_with(Policy::defaults().expect("the shipped policy"))
}

fn ended(state: LaneState, next: Next) -> RunEnd {
    RunEnd {
        state,
        next,
        reached_ready: true,
        submitted: true,
        attempts: 1,
        sent_at: Some(T0),
        accepted_at: None,
        unsent: Vec::new(),
        trust_open: true,
        dialog: None,
    }
}

/// The next run on the same worker, carrying on from `state` with the prompt's receipt
/// of [`ended`], delivering `followups` first and watching for `watch`.
fn carrying_on(state: LaneState, followups: Vec<String>, watch: Watch) -> Plan {
    Plan::Run(NextRun {
        carry: Some(Resumed {
            state,
            attempts: 1,
            sent_at: Some(T0),
            accepted_at: None,
        }),
        followups,
        watch,
    })
}

/// The first run of a new worker.
fn new_worker_run(watch: Watch) -> Plan {
    Plan::Run(NextRun {
        carry: None,
        followups: Vec::new(),
        watch,
    })
}

/// The lane as the driver reads it after a run that left it in `state`.
fn read(state: LaneState) -> LaneFacts {
    let mut facts = LaneFacts::new("l1", state.status());
    facts.subphase = state.subphase();
    facts
}

/// The `lane.recovery.*` kinds among `effects`, in order.
fn recorded(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Record { payload } => Some(payload.kind().to_string()),
            _ => None,
        })
        .collect()
}

/// Whether `effects` record a failed attempt whose result says `why`.
fn failed_saying(effects: &[Effect], why: &str) -> bool {
    effects.iter().any(|effect| {
        matches!(effect, Effect::Record { payload: Payload::RecoveryFailed(failed) }
            if failed.entry.result.as_deref().is_some_and(|result| result.contains(why)))
    })
}

/// Recovery by the shipped policy for a lane that can do what `abilities` say.
fn able(abilities: LaneAbilities) -> Recovery {
    let policy = Policy::defaults().expect("the shipped policy");
    let (recovery, _) = Recovery::new(
        Arc::new(policy),
        "l1",
        abilities,
        RecoveryLedger::default(),
        T0,
    );
    recovery
}

/// The escalations among `effects`: the reason, and the state it moved the lane to.
fn escalations(effects: &[Effect]) -> Vec<(String, Option<LaneState>)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Report {
                payload: Payload::Escalated(e) | Payload::BlockedEscalated(e),
                to,
                ..
            } => Some((e.reason.clone(), *to)),
            _ => None,
        })
        .collect()
}

/// A crashed worker is restarted after the restart backoff, which doubles with each crash,
/// until the restart intensity (3 in 15 minutes) is used up; then the lane fails for a person,
/// and nothing is left to carry out. Every ledger change is saved before its event.
#[test]
fn a_crash_loop_backs_off_then_escalates_when_the_intensity_is_used_up() {
    let mut recovery = defaults();
    let crashed = LaneState::Failed(FailureClass::WorkerCrashed);
    let mut now = T0;
    let mut delays = Vec::new();
    let mut plan = recovery
        .after_run(ended(crashed, Next::Done), now, read(crashed), now)
        .next;
    while let Plan::Restart { delay, request } = plan.clone() {
        assert!(!request.resume && request.redeliver, "{plan:?}");
        assert_eq!(request.by, "restart_crashed_worker");
        delays.push(delay.as_secs());
        now += delay.as_secs();
        // The new worker started: the restart is saved, and the check runs on its handshake.
        let check = recovery.step_done(StepOutcome::Done, read(crashed), now);
        assert!(
            matches!(check.effects.as_slice(), [Effect::Save(r)] if !r.restart.restarts.is_empty()),
            "{:?}",
            check.effects
        );
        assert_eq!(
            check.next,
            new_worker_run(Watch::Check(Duration::from_secs(120)))
        );
        // The new worker crashes again within the check.
        now += 5;
        plan = recovery
            .after_run(ended(crashed, Next::Done), now - 5, read(crashed), now)
            .next;
        assert!(delays.len() < 10, "no end to the restarts: {delays:?}");
    }
    assert_eq!(delays, [2, 4, 8]);
    assert_eq!(
        plan,
        Plan::End(crashed),
        "a failed lane has no worker to watch"
    );
}

/// The whole crash loop's effects: queued, running, then failed for each restart that did not
/// heal, the recipe exhausted, and one escalation naming the recipe's reason, leaving the lane failed (its outcome
/// is `fail`, so it does not block the lane).
#[test]
fn a_used_up_restart_recipe_records_each_attempt_and_escalates_once() {
    let mut recovery = defaults();
    let crashed = LaneState::Failed(FailureClass::WorkerCrashed);
    let mut effects = Vec::new();
    let mut now = T0;
    let mut decision = recovery.after_run(ended(crashed, Next::Done), now, read(crashed), now);
    loop {
        effects.extend(decision.effects);
        let Plan::Restart { delay, .. } = decision.next else {
            break;
        };
        now += delay.as_secs();
        let check = recovery.step_done(StepOutcome::Done, read(crashed), now);
        effects.extend(check.effects);
        now += 5;
        decision = recovery.after_run(ended(crashed, Next::Done), now, read(crashed), now);
    }
    let kinds = recorded(&effects);
    let attempt = [
        "lane.recovery.queued",
        "lane.recovery.running",
        "lane.recovery.failed",
    ];
    // Three attempts (the recipe's limit is the restart intensity), then the fourth is
    // refused: the recipe is recorded exhausted.
    let mut expected = attempt.repeat(3);
    expected.push("lane.recovery.exhausted");
    assert_eq!(kinds, expected);
    let escalated = escalations(&effects);
    assert_eq!(escalated.len(), 1, "{escalated:?}");
    assert_eq!(escalated[0].1, None, "a failed lane stays failed");
    // Each event follows the save of the ledger it reports.
    for (i, effect) in effects.iter().enumerate() {
        if let Effect::Record { .. } = effect {
            assert!(
                matches!(effects.get(i.wrapping_sub(1)), Some(Effect::Save(_))),
                "event {i} without its save before it: {effects:?}"
            );
        }
    }
    assert_eq!(recovery.lane_state(), Some(crashed));
}

/// A restart intensity that recovers: a crash long after the last one (past the healthy
/// reset) starts the backoff from its first delay again.
#[test]
fn a_worker_healthy_long_enough_restarts_with_the_first_delay_again() {
    let mut recovery = defaults();
    let crashed = LaneState::Failed(FailureClass::WorkerCrashed);
    let first = recovery
        .after_run(ended(crashed, Next::Done), T0, read(crashed), T0)
        .next;
    assert!(matches!(first, Plan::Restart { delay, .. } if delay.as_secs() == 2));
    let _ = recovery.step_done(StepOutcome::Done, read(crashed), T0 + 2);
    // The new worker ran healthy for the whole check and made progress: the attempt succeeded.
    let running = LaneState::Running;
    let healed = recovery.after_run(
        ended(running, Next::Progressed("a commit".into())),
        T0 + 2,
        read(running),
        T0 + 60,
    );
    // The same worker carries on, watched for troubles again.
    assert!(
        matches!(&healed.next, Plan::Run(NextRun { carry: Some(carry), watch: Watch::Troubles, .. }) if carry.state == running),
        "{:?}",
        healed.next
    );
    assert_eq!(
        recorded(&healed.effects),
        ["lane.recovery.succeeded"],
        "{:?}",
        healed.effects
    );
    // Thirty minutes later, having been healthy since the restart, it crashes again.
    let later = T0 + 30 * 60;
    let again = recovery
        .after_run(ended(crashed, Next::Done), T0 + 2, read(crashed), later)
        .next;
    assert!(
        matches!(again, Plan::Restart { delay, .. } if delay.as_secs() == 2),
        "{again:?}"
    );
}

/// A stalled lane: interrupted, given time, nudged; still stalled, restarted with its resume
/// arguments and nudged again; still stalled, the attempt fails, the recipe (one attempt an
/// hour) is used up, and the lane is blocked as stalled for a person — recovery moves the
/// lane's state itself and says so, and the lane stays watched.
#[test]
fn a_lane_still_stalled_after_its_recipe_is_blocked_and_watched() {
    let mut recovery = defaults();
    let running = LaneState::Running;
    let stalled = Next::Recover(Trigger::Stalled);
    let mut now = T0;
    let plan = recovery
        .after_run(ended(running, stalled.clone()), now, read(running), now)
        .next;
    assert_eq!(
        plan,
        Plan::SendKey(DEFAULT_INTERRUPT_KEY.parse().expect("a key"))
    );
    let plan = recovery
        .step_done(StepOutcome::Done, read(running), now)
        .next;
    assert_eq!(plan, Plan::Wait(Duration::from_secs(3)));
    now += 3;
    let plan = recovery
        .step_done(StepOutcome::Done, read(running), now)
        .next;
    assert_eq!(
        plan,
        carrying_on(
            running,
            vec![DEFAULT_NUDGE.into()],
            Watch::Check(Duration::from_secs(120))
        )
    );
    now += 120;
    let plan = recovery
        .after_run(ended(running, Next::NoProgress), now, read(running), now)
        .next;
    assert!(
        matches!(&plan, Plan::Restart { request, .. } if request.resume && !request.redeliver),
        "{plan:?}"
    );
    let plan = recovery
        .step_done(StepOutcome::Done, read(running), now)
        .next;
    // The restarted worker's own handshake delivers the nudge.
    assert_eq!(
        plan,
        Plan::Run(NextRun {
            carry: None,
            followups: vec![DEFAULT_NUDGE.into()],
            watch: Watch::Check(Duration::from_secs(180)),
        })
    );
    now += 180;
    let last = recovery.after_run(ended(running, Next::NoProgress), now, read(running), now);
    let blocked = LaneState::Blocked(BlockedSubphase::Stalled);
    assert_eq!(
        last.next,
        carrying_on(blocked, Vec::new(), Watch::Escalated)
    );
    let moved: Vec<_> = last
        .effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Report {
                payload: Payload::BlockedEscalated(e),
                from,
                to,
            } => Some((e.recipe.clone(), *from, *to)),
            _ => None,
        })
        .collect();
    assert_eq!(
        moved,
        [(
            Some("interrupt_and_nudge".to_owned()),
            Some(running),
            Some(blocked)
        )]
    );
    assert_eq!(recovery.lane_state(), Some(blocked));
    assert_eq!(
        recorded(&last.effects),
        ["lane.recovery.failed", "lane.recovery.exhausted"],
        "{:?}",
        last.effects
    );
}

/// A question only a person may answer: escalated with the dialog's choices in the next
/// action, the lane left as it is and watched until it moves.
#[test]
fn a_blocked_question_is_escalated_with_its_dialogs_choices() {
    let mut recovery = defaults();
    let blocked = LaneState::Blocked(BlockedSubphase::ToolPermission);
    let mut run = ended(blocked, Next::Blocked);
    run.dialog = Some(WaitingDialog {
        name: "bash_permission".into(),
        choices: vec!["yes".into(), "no".into()],
    });
    let decision = recovery.after_run(run, T0, read(blocked), T0);
    assert_eq!(
        decision.next,
        carrying_on(blocked, Vec::new(), Watch::Escalated)
    );
    let next_actions: Vec<_> = decision
        .effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Report {
                payload: Payload::Escalated(e),
                from: None,
                to: None,
            } => Some(e.next_action.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(next_actions.len(), 1, "{:?}", decision.effects);
    assert!(
        next_actions[0].contains("clawpool answer l1")
            && next_actions[0].contains("\"bash_permission\"")
            && next_actions[0].contains("yes, no"),
        "{}",
        next_actions[0]
    );
    assert_eq!(recovery.lane_state(), Some(blocked));
}

/// `notify` rules run their hook once per situation: the same blocked lane after another run
/// asks for nothing more; a lane blocked on something else again asks.
#[test]
fn a_notify_rule_runs_once_per_situation() {
    let policy = Policy::from_toml(
        r#"
[[hooks]]
name = "pager"
command = ["page"]

[[rules]]
name = "page-blocked"
when = { status = "blocked" }
then = { action = "notify", hook = "pager" }
"#,
        "test.toml",
    )
    .expect("a valid policy");
    let mut recovery = recovery_with(policy);
    let notified = |effects: &[Effect]| -> Vec<(String, Option<BlockedSubphase>)> {
        effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Notify { hook, facts, .. } => Some((hook.clone(), facts.subphase)),
                _ => None,
            })
            .collect()
    };
    let question = LaneState::Blocked(BlockedSubphase::ToolPermission);
    let first = recovery.after_run(ended(question, Next::Blocked), T0, read(question), T0);
    assert_eq!(
        notified(&first.effects),
        [("pager".to_owned(), Some(BlockedSubphase::ToolPermission))]
    );
    let again = recovery.after_run(ended(question, Next::Blocked), T0, read(question), T0 + 60);
    assert_eq!(notified(&again.effects), []);
    let boot = LaneState::Blocked(BlockedSubphase::BootDialog);
    let other = recovery.after_run(ended(boot, Next::Blocked), T0, read(boot), T0 + 90);
    assert_eq!(
        notified(&other.effects),
        [("pager".to_owned(), Some(BlockedSubphase::BootDialog))]
    );
}

/// The finishing stage: a fresh finished lane below merge_ready is verified once (the same
/// facts again ask for nothing), one proven merge_ready is closed out once, and a lane the
/// finishing stage no longer holds as finished gets nothing.
#[test]
fn a_finished_lane_is_verified_then_closed_out_each_once() {
    let mut recovery = defaults();
    let finished = LaneState::Finished;
    let _ = recovery.after_run(ended(finished, Next::Done), T0, read(finished), T0);
    let mut fresh = read(finished);
    fresh.freshness = Freshness::Fresh;
    let all_levels = |_| true;
    let verify = recovery
        .finishing(finished, all_levels, fresh.clone(), T0)
        .next;
    assert_eq!(verify, Finishing::Verify(GreenLevel::MergeReady));
    let again = recovery
        .finishing(finished, all_levels, fresh.clone(), T0)
        .next;
    assert_eq!(again, Finishing::Nothing);
    let mut proven = fresh;
    proven.green = Green(Some(GreenLevel::MergeReady));
    let failed = LaneState::Failed(FailureClass::Test);
    assert_eq!(
        recovery
            .finishing(failed, all_levels, proven.clone(), T0)
            .next,
        Finishing::Nothing
    );
    let close = recovery
        .finishing(finished, all_levels, proven.clone(), T0)
        .next;
    assert_eq!(
        close,
        Finishing::CloseOut {
            rule: "close-out-merge-ready".into()
        }
    );
    assert_eq!(
        recovery.finishing(finished, all_levels, proven, T0).next,
        Finishing::Nothing
    );
}

/// Verification only to a level the lane has commands for.
#[test]
fn a_finished_lane_without_commands_for_the_level_is_not_verified() {
    let mut recovery = defaults();
    let finished = LaneState::Finished;
    let _ = recovery.after_run(ended(finished, Next::Done), T0, read(finished), T0);
    let mut fresh = read(finished);
    fresh.freshness = Freshness::Fresh;
    let decision = recovery.finishing(finished, |_| false, fresh, T0);
    assert_eq!(decision.next, Finishing::Nothing);
}

/// An attempt a dead supervisor was carrying out is closed as failed when the lane is
/// adopted (none of its steps is replayed), and recorded; it counts against the recipe.
#[test]
fn an_attempt_left_running_by_a_dead_supervisor_is_closed_as_failed() {
    let policy = Policy::defaults().expect("the shipped policy");
    let recipe = policy
        .recipes()
        .require("restart_crashed_worker")
        .expect("a shipped recipe")
        .clone();
    let mut ledger = Ledger::from_record(RecoveryLedger::default());
    let Queued::Attempt { id, .. } =
        ledger.queue(&recipe, "worker_exited", AttemptOrigin::Policy, T0)
    else {
        panic!("not queued");
    };
    ledger.start(id, T0).expect("a queued attempt starts");
    let (recovery, effects) = Recovery::new(
        Arc::new(policy),
        "l1",
        abilities(),
        ledger.record().clone(),
        T0 + 10,
    );
    assert_eq!(recorded(&effects), ["lane.recovery.failed"]);
    let Some(Effect::Save(saved)) = effects.first() else {
        panic!("{effects:?}");
    };
    assert_eq!(saved.entries[0].state, AttemptState::Failed);
    assert_eq!(
        recovery.ledger.attempt_counts()["restart_crashed_worker"],
        1
    );
}

/// A recipe's key is not typed into a lane nobody trusted: the step fails at once, the
/// attempt with it, and the lane is handed to a person — no key reaches the driver.
#[test]
fn a_key_for_a_lane_nobody_trusted_fails_its_step_and_nothing_is_typed() {
    let mut recovery = defaults();
    let running = LaneState::Running;
    let mut run = ended(running, Next::Recover(Trigger::Stalled));
    run.trust_open = false;
    let decision = recovery.after_run(run, T0, read(running), T0);
    let blocked = LaneState::Blocked(BlockedSubphase::Stalled);
    assert_eq!(
        decision.next,
        carrying_on(blocked, Vec::new(), Watch::Escalated)
    );
    assert!(
        failed_saying(&decision.effects, "nobody trusted"),
        "{:?}",
        decision.effects
    );
}

/// A restart with resume arguments the profile does not have fails its step; the worker is
/// left as it is.
#[test]
fn a_resume_the_profile_cannot_do_fails_its_step() {
    let mut recovery = able(LaneAbilities {
        resumable: false,
        ..abilities()
    });
    let running = LaneState::Running;
    let _ = recovery.after_run(
        ended(running, Next::Recover(Trigger::Stalled)),
        T0,
        read(running),
        T0,
    );
    let _ = recovery.step_done(StepOutcome::Done, read(running), T0);
    let _ = recovery.step_done(StepOutcome::Done, read(running), T0 + 3);
    // Still stalled after the nudge: the recipe's next step is a restart with resume.
    let decision = recovery.after_run(
        ended(running, Next::NoProgress),
        T0 + 3,
        read(running),
        T0 + 123,
    );
    assert!(
        !matches!(decision.next, Plan::Restart { .. }),
        "{:?}",
        decision.next
    );
    assert!(
        failed_saying(
            &decision.effects,
            "the claude profile has no resume arguments"
        ),
        "{:?}",
        decision.effects
    );
}

/// A draft the agent did not take gets Enter once more: its `lane.prompt_sent` (the next
/// attempt, by the recipe) comes before the press, and the next run carries on as ready for
/// the prompt, watching it being taken.
#[test]
fn a_resubmitted_prompt_is_recorded_before_enter_and_watched_taken() {
    let mut recovery = defaults();
    let stuck = LaneState::Blocked(BlockedSubphase::PromptDelivery);
    let decision = recovery.after_run(
        ended(stuck, Next::Recover(Trigger::PromptNotAccepted)),
        T0,
        read(stuck),
        T0,
    );
    assert_eq!(decision.next, Plan::PressEnter);
    let sent = decision.effects.iter().find_map(|effect| match effect {
        Effect::Report {
            payload: Payload::PromptSent(sent),
            ..
        } => Some(sent.clone()),
        _ => None,
    });
    assert_eq!(
        sent,
        Some(PromptSent {
            attempt: 2,
            by: Some("resubmit_prompt".into())
        })
    );
    let next = recovery.step_done(StepOutcome::Done, read(stuck), T0).next;
    assert_eq!(
        next,
        Plan::Run(NextRun {
            carry: Some(Resumed {
                state: LaneState::ReadyForPrompt,
                attempts: 2,
                sent_at: Some(T0),
                accepted_at: None,
            }),
            followups: Vec::new(),
            watch: Watch::Check(Duration::from_secs(30)),
        })
    );
}

/// The policy's close-out of a lane whose worker is alive: the worker stopped first, then
/// `lane.closed_out` from the lane's state to finished, and the lane ends finished.
#[test]
fn a_close_out_stops_the_worker_then_records_it_and_ends_the_lane_finished() {
    let policy = Policy::from_toml(
        r#"
[[rules]]
name = "close-questions"
when = { status = "blocked", subphase = "tool_permission" }
then = { action = "close_out" }
"#,
        "test.toml",
    )
    .expect("a valid policy");
    let mut recovery = recovery_with(policy);
    let question = LaneState::Blocked(BlockedSubphase::ToolPermission);
    let stop = recovery.after_run(ended(question, Next::Blocked), T0, read(question), T0);
    assert_eq!(stop.next, Plan::StopWorker);
    assert!(stop.effects.is_empty(), "{:?}", stop.effects);
    let ended_lane = recovery.step_done(StepOutcome::Done, read(question), T0);
    assert_eq!(ended_lane.next, Plan::End(LaneState::Finished));
    assert_eq!(
        ended_lane.effects,
        [Effect::Report {
            payload: Payload::ClosedOut(ClosedOut {
                rule: "close-questions".into()
            }),
            from: Some(question),
            to: Some(LaneState::Finished),
        }]
    );
    assert_eq!(recovery.lane_state(), Some(LaneState::Finished));
}

/// What the last run did not deliver (an operator's queued text) goes before a recipe's
/// nudge.
#[test]
fn texts_the_last_run_did_not_deliver_go_before_the_nudge() {
    let mut recovery = defaults();
    let running = LaneState::Running;
    let mut run = ended(running, Next::Recover(Trigger::Stalled));
    run.unsent = vec!["also fix the docs".into()];
    let _ = recovery.after_run(run, T0, read(running), T0);
    let _ = recovery.step_done(StepOutcome::Done, read(running), T0);
    let nudge = recovery
        .step_done(StepOutcome::Done, read(running), T0 + 3)
        .next;
    assert_eq!(
        nudge,
        carrying_on(
            running,
            vec!["also fix the docs".into(), DEFAULT_NUDGE.into()],
            Watch::Check(Duration::from_secs(120))
        )
    );
}

/// A merge-forward for a lane without a branch of its own fails its step.
#[test]
fn a_merge_forward_for_a_lane_without_a_branch_fails_its_step() {
    let mut recovery = able(LaneAbilities {
        has_branch: false,
        ..abilities()
    });
    let stale = LaneState::Blocked(BlockedSubphase::BranchFreshness);
    let decision = recovery.after_run(
        ended(stale, Next::Recover(Trigger::StaleBranch)),
        T0,
        read(stale),
        T0,
    );
    assert_ne!(decision.next, Plan::MergeForward);
    assert!(
        failed_saying(&decision.effects, "no branch of its own"),
        "{:?}",
        decision.effects
    );
}
