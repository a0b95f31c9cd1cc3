//! Codex's notify program as the machine's input (`docs/events.md`, "Channels"): the channel
//! reports turn ends only, so the screen accepts the prompt, and a turn-complete of the text
//! the lane delivered finishes the turn the screen saw accepted. The screens are the corpus's.

use super::*;
use crate::handshake::machine::CONTRADICTION_BOUND;
use serde_json::json;

fn codex(file: &str) -> ScreenSnapshot {
    corpus("codex-0.169.0", file)
}

/// The notification Codex 0.169.0 hands its notify program at the end of a turn whose user
/// input was `input`.
fn turn_ended(input: &str, last_message: &str) -> Input {
    hook(
        crate::channel::codex_notify::EVENT,
        json!({"type": "agent-turn-complete", "thread-id": "01a20fe9", "turn-id": "1",
               "cwd": "/lane", "client": "codex-tui", "input-messages": [input],
               "last-assistant-message": last_message}),
    )
}

/// The end of the lane's turn.
fn turn_complete() -> Input {
    turn_ended(PROMPT, "Done.")
}

/// The end of Codex's side turn naming the thread, which 0.169.0 notifies while the lane's
/// turn still runs.
fn title_turn_complete() -> Input {
    turn_ended(
        &format!("Generate a concise, single-line task title.\n\nUser prompt:\n{PROMPT}"),
        r#"{"title":"Create hello file"}"#,
    )
}

/// A Codex lane booted, its prompt typed and Enter pressed; the draft still shows.
async fn submitted() -> Lane {
    let mut lane = Lane::new("codex", TrustGate::AllowListed, Some(PROMPT));
    lane.look(&codex("01-booting-120x40"));
    lane.look(&codex("03-ready_for_prompt-120x40"));
    assert_eq!(lane.texts_typed(), vec![PROMPT.to_owned()]);
    lane.look(&codex("04-draft_typed-120x40"));
    let settle = Duration::from_millis(profile("codex").manifest.input.submit_after_ms);
    lane.after(settle, &codex("04-draft_typed-120x40")).await;
    assert_eq!(lane.enters(), 1, "{:?}", lane.kinds());
    lane
}

#[tokio::test(start_paused = true)]
async fn a_turn_complete_finishes_the_turn_the_screen_saw_accepted() {
    let mut lane = submitted().await;
    // Before the screen shows the prompt taken, a turn-complete is no finish.
    lane.input(turn_complete());
    assert_eq!(
        lane.state(),
        LaneState::ReadyForPrompt,
        "{:?}",
        lane.kinds()
    );
    // The channel reports no acceptance: the screen's decides at once, no grace.
    lane.look(&codex("05-running-120x40"));
    assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Screen));
    // The screen idle, not yet for finish_idle: Codex's side turn ending is not the lane's,
    // and the lane's own notification finishes it at once.
    lane.look(&codex("06-finished-120x40"));
    lane.input(title_turn_complete());
    assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
    lane.input(turn_complete());
    assert_eq!(lane.state(), LaneState::Finished, "{:?}", lane.kinds());
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Hook));
    let evidence = finished.evidence.as_ref().expect("evidence");
    assert_eq!(
        (evidence.rule.as_str(), evidence.region.as_str()),
        ("agent-turn-complete", "hook")
    );
    // The screen's late idle and a repeated notification add no second finish.
    lane.input(turn_complete());
    lane.after(
        Settings::default().finish_idle,
        &codex("06-finished-120x40"),
    )
    .await;
    assert_eq!(lane.count("lane.finished"), 1, "{:?}", lane.kinds());
    assert_eq!(lane.count("lane.hook"), 4, "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn a_turn_complete_over_a_working_screen_waits_for_the_bound() {
    let mut lane = submitted().await;
    let working = codex("05-running-120x40");
    lane.look(&working);
    assert_eq!(lane.state(), LaneState::Running);
    lane.input(turn_complete());
    assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
    lane.after(CONTRADICTION_BOUND, &working).await;
    assert_eq!(lane.state(), LaneState::Finished, "{:?}", lane.kinds());
    assert_eq!(lane.count("lane.channel.contradiction"), 1);
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Hook));
}
