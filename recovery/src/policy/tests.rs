use std::time::Duration;

use clawpool_lanes::{BlockedSubphase, FailureClass, LaneStatus};

use super::*;
use crate::hooks::HookCommand;
use crate::recipe::{RecipeBook, Step, Trigger};
use crate::restart::RestartPolicy;

fn facts(status: LaneStatus) -> LaneFacts {
    LaneFacts::new("fix-login", status)
}

fn decided(policy: &Policy, facts: &LaneFacts) -> Option<Action> {
    policy.decide(facts).map(|d| d.action)
}

fn recover(recipe: &str) -> Option<Action> {
    Some(Action::Recover {
        recipe: recipe.to_owned(),
    })
}

fn policy(text: &str) -> Policy {
    match Policy::from_toml(text, "test.toml") {
        Ok(policy) => policy,
        Err(e) => panic!("{e}"),
    }
}

fn problems(text: &str) -> String {
    Policy::from_toml(text, "bad.toml")
        .expect_err("the policy is refused")
        .to_string()
}

#[test]
fn the_shipped_defaults_parse_and_match_the_built_in_parameters() {
    let defaults = Policy::defaults().expect("the shipped defaults parse");
    assert_eq!(defaults.source_name(), "docs/policy-defaults.toml");
    assert_eq!(defaults.stall_after(), crate::progress::DEFAULT_STALL_AFTER);
    assert_eq!(defaults.restart_policy(), &RestartPolicy::default());
    assert_eq!(defaults.recipes(), &RecipeBook::builtin());
    assert!(defaults.hooks().is_empty());
    assert!(defaults.rules().len() >= 8);
}

/// The lane a situation leaves behind, as the supervisor would describe it.
fn situation(trigger: Trigger, class: FailureClass) -> Vec<LaneFacts> {
    let blocked = |subphase| {
        let mut f = facts(LaneStatus::Blocked);
        f.subphase = Some(subphase);
        f
    };
    let mut lanes = match trigger {
        Trigger::TrustPromptPersists => vec![
            blocked(BlockedSubphase::TrustPrompt),
            facts(LaneStatus::TrustRequired),
        ],
        Trigger::UnknownDialog => vec![blocked(BlockedSubphase::UnknownDialog)],
        Trigger::PromptMisdelivered => vec![facts(LaneStatus::Failed)],
        Trigger::PromptNotAccepted => vec![blocked(BlockedSubphase::PromptDelivery)],
        Trigger::Stalled => vec![facts(LaneStatus::Running)],
        Trigger::WorkerExited => vec![facts(LaneStatus::Failed)],
        Trigger::ProviderDown => vec![blocked(BlockedSubphase::Provider)],
        Trigger::StaleBranch => {
            let mut finished = facts(LaneStatus::Finished);
            finished.freshness = crate::facts::Freshness::Stale;
            vec![blocked(BlockedSubphase::BranchFreshness), finished]
        }
    };
    for lane in &mut lanes {
        lane.failure = Some(class);
        lane.trigger = Some(trigger);
    }
    lanes
}

#[test]
fn the_defaults_recover_every_failure_class_that_has_a_recipe() {
    let defaults = Policy::defaults().expect("defaults");
    let book = defaults.recipes();
    let mut covered = Vec::new();
    for trigger in Trigger::ALL {
        let recipe = &book.for_trigger(trigger).expect("a recipe").name;
        for &class in trigger.classes() {
            for lane in situation(trigger, class) {
                assert_eq!(
                    decided(&defaults, &lane),
                    recover(recipe),
                    "{trigger} / {class:?} / {}",
                    status_text(&lane)
                );
            }
            covered.push(class);
        }
    }
    for class in [
        FailureClass::TrustGate,
        FailureClass::BootDialog,
        FailureClass::PromptDelivery,
        FailureClass::Stalled,
        FailureClass::WorkerCrashed,
        FailureClass::WorkerLost,
        FailureClass::Provider,
        FailureClass::BranchDivergence,
    ] {
        assert!(covered.contains(&class), "{class:?}");
    }
}

fn status_text(facts: &LaneFacts) -> String {
    match facts.subphase {
        Some(s) => format!("{}{{{}}}", wire_name(&facts.status), wire_name(&s)),
        None => wire_name(&facts.status),
    }
}

#[test]
fn the_defaults_never_press_keys_without_the_right_evidence() {
    let defaults = Policy::defaults().expect("defaults");
    // A trust prompt on a lane that is not trusted: no trigger, so a person decides.
    let mut untrusted = facts(LaneStatus::Blocked);
    untrusted.subphase = Some(BlockedSubphase::TrustPrompt);
    untrusted.failure = Some(FailureClass::TrustGate);
    assert!(matches!(
        decided(&defaults, &untrusted),
        Some(Action::Escalate { .. })
    ));
    // A blank screen or a line holding text nobody here typed (blocked on delivery with
    // nothing submitted): nothing is re-submitted, a person is told.
    let mut blank = facts(LaneStatus::Blocked);
    blank.subphase = Some(BlockedSubphase::PromptDelivery);
    blank.failure = Some(FailureClass::PromptDelivery);
    assert!(matches!(
        decided(&defaults, &blank),
        Some(Action::Escalate { .. })
    ));
    // A running lane that is making progress: nothing.
    assert_eq!(decided(&defaults, &facts(LaneStatus::Running)), None);
}

#[test]
fn the_defaults_take_a_finished_lane_to_done() {
    let defaults = Policy::defaults().expect("defaults");
    let mut lane = facts(LaneStatus::Finished);
    lane.freshness = crate::facts::Freshness::Diverged;
    assert_eq!(
        decided(&defaults, &lane),
        recover("merge_forward_stale_branch")
    );
    lane.freshness = crate::facts::Freshness::Fresh;
    lane.green = GreenLevel::Package.into();
    assert_eq!(
        decided(&defaults, &lane),
        Some(Action::Verify {
            level: GreenLevel::MergeReady
        })
    );
    lane.green = GreenLevel::MergeReady.into();
    assert_eq!(decided(&defaults, &lane), Some(Action::CloseOut));
    let mut failed = facts(LaneStatus::Failed);
    failed.failure = Some(FailureClass::Test);
    assert!(matches!(
        decided(&defaults, &failed),
        Some(Action::Escalate { reason, .. }) if reason == "verification failed"
    ));
}

const EXAMPLE: &str = r#"
[[hooks]]
name = "pager"
command = ["page", "--team", "infra"]
events = ["lane.blocked", "lane.recovery.*"]

[[hooks]]
name = "log"
command = "cat >> /tmp/clawpool-events.jsonl"
timeout = "2s"

[[rules]]
name = "page-on-failure"
when = { status = "failed" }
then = { action = "notify", hook = "pager" }

[[rules]]
name = "restart-crashed"
when = { status = "failed", failure = "worker_crashed", attempts_below = 3 }
then = { action = "recover", recipe = "restart_crashed_worker" }

[[rules]]
name = "give-up"
when = { status = "failed", failure = "worker_crashed" }
then = { action = "escalate", reason = "it keeps crashing", next_action = "look at {lane}" }

[[rules]]
name = "log-everything"
when = {}
then = { action = "notify", hook = "log" }
"#;

#[test]
fn the_first_deciding_rule_wins_and_notify_rules_let_evaluation_go_on() {
    let policy = policy(EXAMPLE);
    let mut crashed = facts(LaneStatus::Failed);
    crashed.failure = Some(FailureClass::WorkerCrashed);
    crashed.attempts.insert("restart_crashed_worker".into(), 2);
    let decisions = policy.evaluate(&crashed);
    let rules: Vec<&str> = decisions.iter().map(|d| d.rule.as_str()).collect();
    assert_eq!(rules, ["page-on-failure", "restart-crashed"]);
    assert_eq!(
        decided(&policy, &crashed),
        recover("restart_crashed_worker")
    );

    crashed.attempts.insert("restart_crashed_worker".into(), 3);
    let rules: Vec<String> = policy
        .evaluate(&crashed)
        .into_iter()
        .map(|d| d.rule)
        .collect();
    assert_eq!(rules, ["page-on-failure", "give-up"]);

    let running = facts(LaneStatus::Running);
    assert_eq!(
        policy.evaluate(&running),
        [Decision {
            rule: "log-everything".into(),
            action: Action::Notify { hook: "log".into() }
        }]
    );
    assert_eq!(policy.decide(&running), None);
}

#[test]
fn explain_says_which_rules_matched_and_why() {
    let policy = policy(EXAMPLE);
    let mut crashed = facts(LaneStatus::Failed);
    crashed.failure = Some(FailureClass::WorkerCrashed);
    crashed.attempts.insert("restart_crashed_worker".into(), 3);
    let explained = policy.explain(&crashed);
    let outcomes: Vec<(&str, RuleOutcome)> = explained
        .iter()
        .map(|e| (e.rule.as_str(), e.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("page-on-failure", RuleOutcome::Notifies),
            ("restart-crashed", RuleOutcome::NotMatched),
            ("give-up", RuleOutcome::Decides),
            ("log-everything", RuleOutcome::Shadowed),
        ]
    );
    let restart = &explained[1];
    assert!(!restart.matched);
    let reasons: Vec<String> = restart.reasons.iter().map(ToString::to_string).collect();
    assert_eq!(
        reasons,
        [
            "met     status = failed (lane is failed)",
            "met     failure = worker_crashed (failure is worker_crashed)",
            "not met attempts_below = 3 (restart_crashed_worker has had 3 attempt(s))",
        ]
    );
    assert_eq!(
        explained[2].to_string(),
        "#3 give-up: DECIDES -> escalate: it keeps crashing\n    \
         met     status = failed (lane is failed)\n    \
         met     failure = worker_crashed (failure is worker_crashed)"
    );
    assert!(
        explained[3]
            .to_string()
            .contains("no conditions: always matches")
    );
    let json = serde_json::to_value(&explained[1]).expect("serialises");
    assert_eq!(json["outcome"], "not_matched");
    assert_eq!(json["action"]["action"], "recover");
    assert_eq!(json["reasons"][2]["met"], false);
}

#[test]
fn times_and_levels_are_compared_as_written() {
    let policy = policy(
        r#"
[[rules]]
name = "long-stall"
when = { status = ["running", "prompt_accepted"], idle_at_least = "10m", age_below = "1h", green_at_least = "targeted", freshness = ["fresh", "unknown"], recovery = "none" }
then = { action = "recover", recipe = "interrupt_and_nudge" }
"#,
    );
    let mut lane = facts(LaneStatus::Running);
    lane.green = GreenLevel::Package.into();
    lane.seconds_since_progress = 599;
    lane.seconds_in_state = 3_000;
    assert_eq!(decided(&policy, &lane), None);
    lane.seconds_since_progress = 600;
    assert_eq!(decided(&policy, &lane), recover("interrupt_and_nudge"));
    lane.seconds_in_state = 3_600;
    assert_eq!(decided(&policy, &lane), None);
    let why: Vec<String> = policy.explain(&lane)[0]
        .reasons
        .iter()
        .filter(|c| !c.met)
        .map(ToString::to_string)
        .collect();
    assert_eq!(why, ["not met age_below = 1h (in state for 1h)"]);
}

#[test]
fn every_problem_names_its_rule_and_key() {
    let text = r#"
colour = "blue"

[[hooks]]
name = "pager"
timeout = "soon"

[[rules]]
name = "a"
whenn = { status = "failed" }
then = { action = "close_out" }

[[rules]]
name = "b"
when = { failure = "worker_crash", idle_at_least = "10", attempts_below = -1 }
then = { action = "recover", recipe = "restart" }

[[rules]]
name = "a"
when = { status = "blocked", subphase = "provider", attempts_below = 2 }
then = { action = "notify", hook = "slack" }

[[rules]]
when = { status = "running" }
then = { action = "reboot" }

[[rules]]
name = "c"
when = { status = "running", subphase = "provider", green = [] }
then = { action = "verify", level = "none", extra = 1 }

[recipes.nope]
max_attempts = 2

[recipes.answer_trust_again]
nudge = "hello"

[restart]
factor = 0
initial = "10m"
"#;
    let message = problems(text);
    let expected = [
        "bad.toml: policy: colour: unknown key; expected one of: rules, hooks, recipes, restart, stall",
        "bad.toml: [restart]: factor: must be at least 1",
        "bad.toml: [restart]: initial: is longer than max",
        "bad.toml: [recipes.answer_trust_again]: nudge: this recipe has no such step",
        "bad.toml: [recipes.nope]: unknown recipe; recipes: answer_trust_again, ",
        "bad.toml: hook #1 \"pager\": command: missing",
        "bad.toml: hook #1 \"pager\": timeout: bad duration \"soon\"",
        "bad.toml: rule #1 \"a\": whenn: unknown key; expected one of: name, description, when, then",
        "bad.toml: rule #1 \"a\": when: missing",
        "bad.toml: rule #2 \"b\": then.recipe: unknown recipe \"restart\"; recipes: answer_trust_again",
        "bad.toml: rule #2 \"b\": when.failure: unknown failure class \"worker_crash\"; expected one of: prompt_delivery, ",
        "bad.toml: rule #2 \"b\": when.attempts_below: must be from 0 to 4294967295, not -1",
        "bad.toml: rule #2 \"b\": when.idle_at_least: bad duration \"10\": a number needs a unit",
        "bad.toml: rule #3: name: \"a\" is already the name of rule #1",
        "bad.toml: rule #3 \"a\": then.hook: no hook \"slack\": the file defines no [[hooks]]",
        "bad.toml: rule #4: name: missing",
        "bad.toml: rule #4: then.action: unknown action \"reboot\"; expected one of: recover, merge_forward, verify, notify, close_out, escalate",
        "bad.toml: rule #5 \"c\": then.extra: not a parameter of verify; it takes: level",
        "bad.toml: rule #5 \"c\": then.level: unknown level \"none\"; expected one of: targeted, package, workspace, merge_ready",
        "bad.toml: rule #5 \"c\": when.green: an empty list never matches",
        "bad.toml: rule #5 \"c\": when.subphase: only blocked lanes have a subphase",
    ];
    for line in expected {
        assert!(
            message.lines().any(|l| l.starts_with(line)),
            "missing {line:?} in:\n{message}"
        );
    }
    // Rule #3's attempts condition counts nothing only if its action parsed; it did not.
    assert!(
        !message.contains("rule #3 \"a\": when.attempts_below"),
        "{message}"
    );
}

#[test]
fn an_attempts_condition_must_count_a_known_recipe() {
    let message = problems(
        r#"
[[rules]]
name = "x"
when = { status = "failed", attempts_at_least = 2 }
then = { action = "close_out" }

[[rules]]
name = "y"
when = { status = "failed", attempts_recipe = "restart_worker", attempts_at_least = 2 }
then = { action = "close_out" }

[[rules]]
name = "z"
when = { attempts_at_least = 3, attempts_below = 3, age_at_least = "1h", age_below = "30m" }
then = { action = "recover", recipe = "resubmit_prompt" }
"#,
    );
    for line in [
        "bad.toml: rule #1 \"x\": when.attempts_at_least: counts no recipe",
        "bad.toml: rule #2 \"y\": when.attempts_recipe: unknown recipe \"restart_worker\"",
        "bad.toml: rule #3 \"z\": when.attempts_below: never holds together with attempts_at_least",
        "bad.toml: rule #3 \"z\": when.age_below: never holds together with age_at_least",
    ] {
        assert!(
            message.lines().any(|l| l.starts_with(line)),
            "missing {line:?} in:\n{message}"
        );
    }
    assert_eq!(message.lines().count(), 4, "{message}");
    let ok = policy(
        r#"
[[rules]]
name = "y"
when = { status = "failed", attempts_recipe = "restart_crashed_worker", attempts_at_least = 3 }
then = { action = "close_out" }
"#,
    );
    let mut lane = facts(LaneStatus::Failed);
    lane.attempts.insert("restart_crashed_worker".into(), 3);
    assert_eq!(decided(&ok, &lane), Some(Action::CloseOut));
}

#[test]
fn text_that_is_not_toml_is_one_problem() {
    let message = problems("[[rules]\nname = ");
    assert!(
        message.starts_with("bad.toml: policy: not valid TOML: "),
        "{message}"
    );
    assert_eq!(
        Policy::from_toml("", "empty.toml").map(|p| p.rules().len()),
        Ok(0)
    );
}

#[test]
fn hooks_recipes_restart_and_stall_come_from_the_file() {
    let policy = policy(
        r#"
[stall]
after = "20m"

[restart]
initial = "1s"
max = "1m"
intensity = 5

[recipes.interrupt_and_nudge]
nudge = "Keep going."
interrupt_key = "C-c"
max_attempts = 2
window = "2h"

[[hooks]]
name = "pager"
command = ["page", "--team", "infra"]
events = ["lane.blocked", "lane.recovery.*"]

[[hooks]]
name = "log"
command = "cat >> events.jsonl"
timeout = "2s"
"#,
    );
    assert_eq!(policy.stall_after(), Duration::from_secs(1_200));
    let restart = policy.restart_policy();
    assert_eq!(
        (
            restart.initial,
            restart.max,
            restart.intensity,
            restart.factor
        ),
        (Duration::from_secs(1), Duration::from_secs(60), 5, 2)
    );
    assert_eq!(
        policy
            .recipes()
            .get("restart_crashed_worker")
            .map(|r| r.max_attempts),
        Some(5)
    );
    let nudge = policy.recipes().get("interrupt_and_nudge").expect("recipe");
    assert_eq!(nudge.steps[0], Step::SendKey("C-c".into()));
    assert_eq!(nudge.steps[2], Step::SendText("Keep going.".into()));
    assert_eq!((nudge.max_attempts, nudge.window.as_secs()), (2, 7_200));
    let pager = policy.hook("pager").expect("hook");
    assert_eq!(
        pager.command,
        HookCommand::Argv(vec!["page".into(), "--team".into(), "infra".into()])
    );
    assert_eq!(pager.timeout, crate::hooks::DEFAULT_HOOK_TIMEOUT);
    assert!(pager.events.matches("lane.recovery.exhausted"));
    assert!(!pager.events.matches("lane.ready"));
    let log = policy.hook("log").expect("hook");
    assert_eq!(
        log.command,
        HookCommand::Shell("cat >> events.jsonl".into())
    );
    assert_eq!(log.timeout, Duration::from_secs(2));
    assert!(log.events.patterns().is_empty());
}

#[test]
fn the_restart_intensity_is_set_in_one_place() {
    let message = problems(
        r#"
[restart]
intensity = 4

[recipes.restart_crashed_worker]
max_attempts = 2
"#,
    );
    assert!(
        message.starts_with(
            "bad.toml: [recipes.restart_crashed_worker]: max_attempts: this recipe's attempts \
             and window are the restart intensity"
        ),
        "{message}"
    );
}

const POLICY_DOC: &str = include_str!("../../../docs/policy.md");

#[test]
fn the_example_in_the_policy_doc_loads() {
    let start = POLICY_DOC.find("```toml\n").expect("a toml example") + "```toml\n".len();
    let end = start + POLICY_DOC[start..].find("```").expect("its end");
    let example = policy(&POLICY_DOC[start..end]);
    assert_eq!(example.rules().len(), 2);
    assert_eq!(example.hook("pager").map(|h| h.timeout.as_secs()), Some(10));
    let mut exhausted = facts(LaneStatus::Failed);
    exhausted.recovery = RecoveryStatus::Exhausted;
    assert_eq!(
        example.evaluate(&exhausted),
        [Decision {
            rule: "page-on-exhaustion".into(),
            action: Action::Notify {
                hook: "pager".into()
            }
        }]
    );
}

#[test]
fn the_explain_sample_in_the_policy_doc_is_what_explain_prints() {
    let defaults = Policy::defaults().expect("defaults");
    let mut crashed = facts(LaneStatus::Failed);
    crashed.failure = Some(FailureClass::WorkerCrashed);
    crashed.trigger = Some(Trigger::WorkerExited);
    let explained = defaults.explain(&crashed);
    for shown in [&explained[4], &explained[5]] {
        let text = shown.to_string();
        assert!(POLICY_DOC.contains(&text), "docs/policy.md lacks:\n{text}");
    }
}

#[test]
fn permissions_come_from_the_file_and_default_to_workspace_write() {
    use crate::permissions::{Effect, Entry, Profile, Scope, Tool};
    let defaults = Policy::defaults().expect("the shipped defaults parse");
    assert_eq!(
        defaults.permissions().default_profile,
        Profile::WorkspaceWrite
    );
    assert!(!defaults.permissions().policy.entries.is_empty());
    let empty = policy("");
    assert_eq!(empty.permissions().default_profile, Profile::WorkspaceWrite);
    assert!(empty.permissions().policy.entries.is_empty());

    let file = policy(
        r#"
[permissions]
default_profile = "read-only"

[[permissions.entries]]
tool = "bash"
verb = "git push"
scope = "anywhere"
decision = "deny"

[[permissions.entries]]
tool = "write"
scope = "/srv/shared"
decision = "allow"

[[permissions.entries]]
verb = "npm"
scope = "repository"
decision = "allow"
"#,
    );
    let settings = file.permissions();
    assert_eq!(settings.default_profile, Profile::ReadOnly);
    assert_eq!(
        settings.policy.entries,
        vec![
            Entry {
                tool: Some(Tool::Bash),
                verb: "git push".to_owned(),
                scope: Scope::Anywhere,
                effect: Effect::Deny,
            },
            Entry {
                tool: Some(Tool::Write),
                verb: "*".to_owned(),
                scope: Scope::Path("/srv/shared".into()),
                effect: Effect::Allow,
            },
            Entry {
                tool: None,
                verb: "npm".to_owned(),
                scope: Scope::Repository,
                effect: Effect::Allow,
            },
        ]
    );
    assert_eq!(settings.profile_for(None), Ok(Profile::ReadOnly));
    assert_eq!(
        settings.profile_for(Some("danger-full-access")),
        Ok(Profile::DangerFullAccess)
    );
    assert!(settings.profile_for(Some("yolo")).is_err());
}

#[test]
fn every_permission_problem_names_its_entry_and_key() {
    let text = problems(
        r#"
[permissions]
default_profile = "yolo"
colour = "red"

[[permissions.entries]]
tool = "bash"
verb = "git push"
scope = "anywhere"
decision = "deny"

[[permissions.entries]]
tool = "browser"
verb = "rm -rf"
scope = "src"
decision = "maybe"
extra = 1

[[permissions.entries]]
tool = "write"
verb = "cat"
scope = "lane"
decision = "allow"

[[permissions.entries]]
tool = "bash"
scope = "lane"
"#,
    );
    let expected = [
        "bad.toml: [permissions]: colour: unknown key",
        "bad.toml: [permissions]: default_profile: unknown profile \"yolo\"",
        "bad.toml: [[permissions.entries]] #2: extra: unknown key",
        "bad.toml: [[permissions.entries]] #2: tool: unknown tool \"browser\"",
        "bad.toml: [[permissions.entries]] #2: verb: \"rm -rf\" is not a verb",
        "bad.toml: [[permissions.entries]] #2: scope: \"src\": expected lane, repository, anywhere, or an absolute path",
        "bad.toml: [[permissions.entries]] #2: decision: \"maybe\": expected allow or deny",
        "bad.toml: [[permissions.entries]] #3: verb: \"cat\": file tools have no verbs",
        "bad.toml: [[permissions.entries]] #4: verb: missing",
        "bad.toml: [[permissions.entries]] #4: decision: missing",
    ];
    for line in expected {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    assert_eq!(text.lines().count(), expected.len(), "{text}");
}
