//! Codex's app-server protocol as the machine's input (`docs/events.md`, "Protocol facts"):
//! the messages are the ones a real 0.169.0 sends, read by the lane's [`Observer`], and the
//! screens are the corpus's.

use super::*;
use crate::app_server::Observer;
use serde_json::{Value, json};

const THREAD: &str = "01a20fe9-7ef8-7e01-a4f7-c6baf854d016";

fn codex(file: &str) -> ScreenSnapshot {
    corpus("codex-0.169.0", file)
}

/// A Codex lane with a prompt to type, fed the protocol through a real observer.
struct CodexLane {
    lane: Lane,
    observer: Observer,
}

impl CodexLane {
    fn new() -> Self {
        Self {
            lane: Lane::new("codex", TrustGate::AllowListed, Some(PROMPT)),
            observer: Observer::default(),
        }
    }

    /// The server sends `message`; what the observer makes of it reaches the machine.
    fn message(&mut self, message: Value) {
        if let Some(fact) = self.observer.on_message(&message).0 {
            self.lane.input(Input::Protocol(fact));
        }
    }

    fn status(&mut self, status: Value) {
        self.message(json!({"method": "thread/status/changed",
            "params": {"threadId": THREAD, "status": status}}));
    }

    /// Booted with its thread started, the prompt typed and Enter pressed; the draft still
    /// shows.
    async fn submitted(&mut self) {
        self.lane.look(&codex("01-booting-120x40"));
        self.message(json!({"method": "thread/started",
            "params": {"thread": {"id": THREAD, "ephemeral": false, "parentThreadId": null}}}));
        self.lane.look(&codex("03-ready_for_prompt-120x40"));
        assert_eq!(self.lane.texts_typed(), vec![PROMPT.to_owned()]);
        self.lane.look(&codex("04-draft_typed-120x40"));
        let settle = Duration::from_millis(profile("codex").manifest.input.submit_after_ms);
        self.lane
            .after(settle, &codex("04-draft_typed-120x40"))
            .await;
        assert_eq!(self.lane.enters(), 1, "{:?}", self.lane.kinds());
    }
}

#[tokio::test(start_paused = true)]
async fn the_thread_turning_active_accepts_and_idle_again_finishes() {
    let mut codex_lane = CodexLane::new();
    codex_lane.submitted().await;
    assert_eq!(codex_lane.lane.state(), LaneState::ReadyForPrompt);
    codex_lane.status(json!({"type": "active", "activeFlags": []}));
    let lane = &mut codex_lane.lane;
    assert_eq!(lane.state(), LaneState::PromptAccepted);
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Protocol));
    let evidence = accepted.evidence.as_ref().expect("evidence");
    assert_eq!(
        (evidence.rule.as_str(), evidence.region.as_str()),
        ("thread/status/changed", "protocol")
    );
    lane.look(&codex("05-running-120x40"));
    assert_eq!(lane.state(), LaneState::Running);
    // The screen idle, not yet for finish_idle: the protocol's idle finishes at once.
    lane.look(&codex("06-finished-120x40"));
    assert_eq!(lane.state(), LaneState::Running);
    codex_lane.status(json!({"type": "idle"}));
    let lane = &mut codex_lane.lane;
    assert_eq!(lane.state(), LaneState::Finished);
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Protocol));
    // The screen's late idle adds no second finish.
    lane.after(
        Settings::default().finish_idle,
        &codex("06-finished-120x40"),
    )
    .await;
    assert_eq!(lane.count("lane.finished"), 1, "{:?}", lane.kinds());
    assert_eq!(lane.count("lane.protocol"), 3, "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn a_command_item_running_is_no_stall_and_no_idle() {
    let mut codex_lane = CodexLane::new();
    let stall = Duration::from_secs(120);
    codex_lane.lane.machine.stall_after(stall);
    codex_lane.submitted().await;
    codex_lane.status(json!({"type": "active", "activeFlags": []}));
    codex_lane.lane.look(&codex("05-running-120x40"));
    codex_lane.message(
        json!({"method": "item/started", "params": {"threadId": THREAD,
        "item": {"type": "commandExecution", "id": "c1", "command": "sleep 800"}}}),
    );
    let idle = codex("06-finished-120x40");
    for _ in 0..3 {
        codex_lane.lane.after(stall, &idle).await;
    }
    let lane = &codex_lane.lane;
    assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
    assert_eq!(lane.count("lane.stalled"), 0, "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn a_lost_connection_leaves_the_lane_to_its_screen() {
    let mut codex_lane = CodexLane::new();
    codex_lane.submitted().await;
    codex_lane.status(json!({"type": "active", "activeFlags": []}));
    codex_lane.lane.look(&codex("05-running-120x40"));
    codex_lane.lane.input(Input::ProtocolLost {
        error: "the app server closed the connection".into(),
    });
    let degraded = codex_lane
        .lane
        .records
        .iter()
        .find(|r| r.payload.kind() == LaneEventKind::ChannelDegraded)
        .expect("the loss is recorded");
    assert_eq!(degraded.payload.detail()["channel"], "codex_app_server");
    assert_eq!(degraded.payload.detail()["decides"], "screen");
    // What it says after that decides nothing; the screen's idle does, after finish_idle.
    codex_lane.status(json!({"type": "idle"}));
    let lane = &mut codex_lane.lane;
    assert_eq!(lane.state(), LaneState::Running);
    let idle = codex("06-finished-120x40");
    lane.look(&idle);
    lane.after(Settings::default().finish_idle, &idle).await;
    assert_eq!(lane.state(), LaneState::Finished);
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Screen));
}

/// The lane with its turn open and the screen showing the agent at work.
async fn working_codex_lane() -> CodexLane {
    let mut codex_lane = CodexLane::new();
    codex_lane.submitted().await;
    codex_lane.status(json!({"type": "active", "activeFlags": []}));
    codex_lane.lane.look(&codex("05-running-120x40"));
    assert_eq!(codex_lane.lane.state(), LaneState::Running);
    codex_lane
}

fn contradictions(lane: &Lane) -> Vec<&Record> {
    lane.records
        .iter()
        .filter(|r| r.payload.kind() == LaneEventKind::ChannelContradiction)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_finish_reported_under_a_working_screen_waits_for_it_and_a_late_redraw_is_no_contradiction()
 {
    let mut codex_lane = working_codex_lane().await;
    codex_lane.status(json!({"type": "idle"}));
    let lane = &mut codex_lane.lane;
    assert_eq!(lane.state(), LaneState::Running, "held for the screen");
    let working = codex("05-running-120x40");
    lane.after(crate::handshake::machine::CONTRADICTION_BOUND / 2, &working)
        .await;
    assert_eq!(lane.state(), LaneState::Running);
    // The screen catches up: finished at once, as the channel said, no contradiction.
    lane.look(&codex("06-finished-120x40"));
    assert_eq!(lane.state(), LaneState::Finished);
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Protocol));
    assert_eq!(
        finished.evidence.as_ref().map(|e| e.matched.as_str()),
        Some("thread idle")
    );
    assert!(contradictions(lane).is_empty(), "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn a_finish_the_screen_contradicts_past_the_bound_is_recorded_and_the_report_wins() {
    let mut codex_lane = working_codex_lane().await;
    codex_lane.status(json!({"type": "idle"}));
    let lane = &mut codex_lane.lane;
    let working = codex("05-running-120x40");
    lane.after(crate::handshake::machine::CONTRADICTION_BOUND, &working)
        .await;
    assert_eq!(lane.state(), LaneState::Finished);
    let found = contradictions(lane);
    assert_eq!(found.len(), 1, "{:?}", lane.kinds());
    let detail = found[0].payload.detail();
    assert_eq!(detail["channel"]["rule"], "thread/status/changed");
    assert_eq!(detail["channel"]["matched"], "thread idle");
    assert_eq!(detail["screen"]["rule"], "working_indicator");
    assert!(
        detail["screen"]["matched"]
            .as_str()
            .is_some_and(|m| m.contains("esc to interrupt")),
        "{detail}"
    );
    assert_eq!(detail["resolved"], "finished");
    assert_eq!(found[0].source, Some(clawpool_lanes::EventSource::Protocol));
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Protocol));
    assert_eq!(lane.count("lane.finished"), 1);
}

#[tokio::test(start_paused = true)]
async fn an_idle_screen_does_not_end_a_turn_the_channel_opened_and_left_open() {
    let mut codex_lane = working_codex_lane().await;
    let idle = codex("06-finished-120x40");
    {
        let lane = &mut codex_lane.lane;
        lane.look(&idle);
        lane.after(Settings::default().finish_idle, &idle).await;
        lane.after(Settings::default().finish_idle * 4, &idle).await;
        // The channel decides the turn's end: an idle-looking screen (which the agent can
        // draw itself) is a contradiction on the record, once, and nothing more.
        assert_eq!(lane.state(), LaneState::Running, "{:?}", lane.kinds());
        let found = contradictions(lane);
        assert_eq!(found.len(), 1, "{:?}", lane.kinds());
        assert_eq!(found[0].payload.detail()["channel"]["rule"], "turn_open");
        assert_eq!(found[0].payload.detail()["screen"]["rule"], "input_line");
        assert_eq!(found[0].payload.detail()["resolved"], "channel_waits");
    }
    // The channel's finish ends it.
    codex_lane.status(json!({"type": "idle"}));
    let lane = &mut codex_lane.lane;
    lane.look(&idle);
    assert_eq!(lane.state(), LaneState::Finished, "{:?}", lane.kinds());
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Protocol));
}
