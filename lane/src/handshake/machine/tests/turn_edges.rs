//! A turn's two edges with Claude Code's hooks, as soon as the evidence suffices and never
//! sooner (`docs/events.md`, "Hook facts" and "Contradictions"): a Stop that names the turn's
//! last reply finishes over a screen not yet repainted, any other Stop waits for the screen;
//! the screen's proof of *this* prompt taken (its echo drawn anew, the agent at work) accepts
//! before UserPromptSubmit, and nothing weaker does.

use super::*;
use crate::handshake::machine::CONTRADICTION_BOUND;

/// Claude Code's Stop as 2.1.330 sends it: the turn's last reply and the background work in
/// flight (`background_tasks`, here `in_flight` entries).
fn stop(reply: Option<&str>, in_flight: usize) -> Input {
    let tasks: Vec<serde_json::Value> = (0..in_flight)
        .map(|i| serde_json::json!({"id": format!("b{i}"), "status": "running"}))
        .collect();
    let mut payload = serde_json::json!({
        "session_id": "s1",
        "stop_hook_active": false,
        "background_tasks": tasks,
    });
    if let Some(reply) = reply {
        payload["last_assistant_message"] = reply.into();
    }
    super::hook("Stop", payload)
}

fn contradictions(lane: &Lane) -> usize {
    lane.count("lane.channel.contradiction")
}

/// A hooked lane working on its prompt, the turn opened by UserPromptSubmit, its screen
/// still showing the spinner.
async fn hooked_and_working() -> Lane {
    let mut lane = super::hooked_lane_to_enter().await;
    lane.input(super::hook(
        "UserPromptSubmit",
        serde_json::json!({"prompt": PROMPT}),
    ));
    lane.look(&claude("06-running-120x40"));
    assert_eq!(lane.state(), LaneState::Running);
    lane
}

#[tokio::test(start_paused = true)]
async fn a_stop_naming_its_reply_finishes_at_once_over_a_screen_not_yet_repainted() {
    let mut lane = hooked_and_working().await;
    lane.input(stop(Some("Done. Created hello.txt."), 0));
    assert_eq!(lane.state(), LaneState::Finished, "{:?}", lane.kinds());
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Hook));
    assert_eq!(
        finished.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("Stop")
    );
    // The indicator still on screen is the stale side: no contradiction, no second finish
    // when the idle screen comes.
    assert_eq!(contradictions(&lane), 0);
    lane.look(&claude("08-finished-120x40"));
    lane.after(CONTRADICTION_BOUND, &claude("06-running-120x40"))
        .await;
    assert_eq!(lane.count("lane.finished"), 1, "{:?}", lane.kinds());
    // The hook's record carries the reply the finish rests on.
    let hook = lane
        .records
        .iter()
        .rfind(|r| r.payload.kind() == LaneEventKind::Hook)
        .expect("lane.hook");
    assert_eq!(
        hook.payload.detail()["last_assistant_message"],
        "Done. Created hello.txt."
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_without_its_reply_waits_for_the_screen_to_stop_showing_work() {
    let mut lane = hooked_and_working().await;
    lane.input(stop(None, 0));
    assert_eq!(lane.state(), LaneState::Running, "held for the screen");
    assert_eq!(lane.deadline(), CONTRADICTION_BOUND);
    lane.after(CONTRADICTION_BOUND / 2, &claude("06-running-120x40"))
        .await;
    assert_eq!(lane.state(), LaneState::Running);
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(lane.state(), LaneState::Finished);
    assert_eq!(contradictions(&lane), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stop_with_background_work_in_flight_waits_for_the_screen_and_its_bound() {
    let mut lane = hooked_and_working().await;
    lane.input(stop(Some("Started the build in the background."), 1));
    assert_eq!(lane.state(), LaneState::Running, "held for the screen");
    lane.after(
        CONTRADICTION_BOUND - Duration::from_millis(1),
        &claude("06-running-120x40"),
    )
    .await;
    assert_eq!(lane.state(), LaneState::Running);
    lane.after(Duration::from_millis(1), &claude("06-running-120x40"))
        .await;
    assert_eq!(lane.state(), LaneState::Finished);
    assert_eq!(contradictions(&lane), 1, "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn a_stop_naming_a_reply_for_no_turn_the_lane_saw_open_decides_nothing() {
    // Hooks live, the prompt accepted by the screen, and no UserPromptSubmit: a Stop is not
    // this turn's end (it may be an earlier session's, or sent by anyone with the token).
    let mut lane = super::hooked_lane_to_enter().await;
    lane.look(&claude("06-running-120x40"));
    assert_eq!(lane.state(), LaneState::Running);
    lane.input(stop(Some("Done."), 0));
    assert_eq!(lane.state(), LaneState::Running);
    assert_eq!(lane.count("lane.finished"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stop_naming_its_reply_with_a_text_queued_delivers_the_text_instead() {
    let mut lane = hooked_and_working().await;
    let verdict = lane.operator(
        OperatorCommand::Send {
            text: "and a second file".into(),
        },
        &claude("06-running-120x40"),
    );
    assert!(verdict.is_done(), "{verdict:?}");
    lane.input(stop(Some("Done."), 0));
    assert_ne!(lane.state(), LaneState::Finished);
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(
        lane.texts_typed(),
        vec![PROMPT.to_owned(), "and a second file".to_owned()]
    );
    assert_eq!(lane.count("lane.finished"), 0);
}

/// An earlier turn of the same text, above the input (its echo and its reply).
const EARLIER_TURN: [&str; 3] = [
    "❯ create a file named hello.txt containing hi",
    "",
    "● Done. Created hello.txt.",
];

#[tokio::test(start_paused = true)]
async fn the_screen_showing_this_prompt_taken_accepts_before_user_prompt_submit() {
    let mut lane = super::hooked_lane_to_enter().await;
    lane.look(&claude("06-running-120x40"));
    assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Screen));
    let evidence = accepted.evidence.as_ref().expect("evidence");
    assert_eq!(evidence.rule, "prompt_echo");
    assert!(evidence.matched.contains("hello.txt"), "{evidence:?}");
    // The hook, second, opens the turn and accepts nothing again; its Stop ends it.
    lane.input(super::hook(
        "UserPromptSubmit",
        serde_json::json!({"prompt": PROMPT}),
    ));
    assert_eq!(lane.count("lane.prompt_accepted"), 1);
    lane.input(stop(Some("Done."), 0));
    assert_eq!(lane.state(), LaneState::Finished);
}

#[tokio::test(start_paused = true)]
async fn a_prompt_is_awaited_from_its_enter_to_its_acceptance_and_no_longer() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.input(super::hook(
        "SessionStart",
        serde_json::json!({"source": "startup"}),
    ));
    lane.look(&claude("01-booting-120x40"));
    lane.look(&claude("04-ready_for_prompt-120x40"));
    // Typed, not yet entered: nothing to accept yet.
    assert_eq!(lane.texts_typed(), vec![PROMPT.to_owned()]);
    assert_eq!(lane.enters(), 0);
    assert!(!lane.machine.awaits_acceptance());
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &claude("05-draft_typed-120x40")).await;
    assert_eq!(lane.enters(), 1);
    assert!(lane.machine.awaits_acceptance());
    lane.look(&claude("06-running-120x40"));
    assert_eq!(lane.count("lane.prompt_accepted"), 1);
    assert!(!lane.machine.awaits_acceptance());
}

#[tokio::test(start_paused = true)]
async fn a_working_indicator_without_this_prompts_echo_waits_for_the_hook() {
    let mut lane = super::hooked_lane_to_enter().await;
    let working = super::without("06-running-120x40", "hello.txt");
    lane.look(&working);
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
    lane.after(Duration::from_millis(500), &working).await;
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
    lane.input(super::hook(
        "UserPromptSubmit",
        serde_json::json!({"prompt": PROMPT}),
    ));
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Hook));
}

#[tokio::test(start_paused = true)]
async fn this_prompts_echo_on_an_idle_screen_waits_for_the_hook() {
    // The echo with the input idle again and no work seen: not proof enough while the hook
    // may still say (a prompt the agent refused, a turn that never started).
    let mut lane = super::hooked_lane_to_enter().await;
    let idle = super::without("08-finished-120x40", "Done.");
    lane.look(&idle);
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
    lane.after(
        Settings::default().hook_grace - Duration::from_millis(1),
        &idle,
    )
    .await;
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
    assert_eq!(lane.count("lane.prompt_accepted"), 0);
}

#[tokio::test(start_paused = true)]
async fn an_earlier_turns_echo_of_the_same_text_is_not_this_prompt_taken() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.input(super::hook(
        "SessionStart",
        serde_json::json!({"source": "resume"}),
    ));
    lane.look(&claude("01-booting-120x40"));
    // The session shows an earlier turn of the same text above its idle input.
    lane.look(&super::with_rows(
        "04-ready_for_prompt-120x40",
        9,
        &EARLIER_TURN,
    ));
    assert_eq!(lane.texts_typed(), vec![PROMPT.to_owned()]);
    let draft = super::with_rows("05-draft_typed-120x40", 9, &EARLIER_TURN);
    lane.look(&draft);
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &draft).await;
    assert_eq!(lane.enters(), 1, "{:?}", lane.kinds());
    // Working, with only the earlier echo: whatever it works on, this text is not shown taken.
    let stale = super::with_rows("06-running-120x40", 9, &["● Done. Created hello.txt.", ""]);
    lane.look(&stale);
    assert_eq!(
        lane.state(),
        LaneState::ReadyForPrompt,
        "{:?}",
        lane.kinds()
    );
    // A second echo drawn under it is this one.
    let taken = super::with_rows("06-running-120x40", 9, &EARLIER_TURN);
    lane.look(&taken);
    assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Screen));
}

#[tokio::test(start_paused = true)]
async fn text_typed_into_a_dialog_is_never_accepted() {
    // The Enter went to a dialog no rule knows that came up over the input: no echo, no
    // work, nothing taken (a tool's permission question would be: the agent is in a turn).
    let mut lane = super::hooked_lane_to_enter().await;
    let dialog = notice();
    lane.look(&dialog);
    lane.after(Settings::default().hook_grace * 2, &dialog)
        .await;
    assert_eq!(lane.count("lane.prompt_accepted"), 0, "{:?}", lane.kinds());
}

fn launch_lane() -> Lane {
    Lane::with_context("claude", TrustGate::AllowListed, None, |lane| {
        lane.prompt = PromptPlan::LaunchArg {
            prompt: "say done".into(),
        };
    })
}

#[tokio::test(start_paused = true)]
async fn a_launch_prompt_drawn_taken_accepts_before_user_prompt_submit() {
    let mut lane = launch_lane();
    lane.look(&claude("01-booting-120x40"));
    lane.input(super::hook(
        "SessionStart",
        serde_json::json!({"source": "startup"}),
    ));
    // `❯ say done` over the spinner (49-running: a launch prompt's first paint).
    lane.look(&text_file("49-running-120x40"));
    assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Screen));
}

#[tokio::test(start_paused = true)]
async fn a_launch_prompts_echo_already_on_the_first_screen_waits_for_the_hook() {
    // A resumed session showing the same text from before: the run's first look counts it.
    let mut lane = launch_lane();
    lane.input(super::hook(
        "SessionStart",
        serde_json::json!({"source": "resume"}),
    ));
    lane.look(&text_file("49-running-120x40"));
    assert_eq!(lane.count("lane.prompt_accepted"), 0, "{:?}", lane.kinds());
    lane.after(Duration::from_millis(300), &text_file("49-running-120x40"))
        .await;
    assert_eq!(lane.count("lane.prompt_accepted"), 0);
    lane.input(super::hook(
        "UserPromptSubmit",
        serde_json::json!({"prompt": "say done"}),
    ));
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Hook));
}
