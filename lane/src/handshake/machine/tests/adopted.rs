//! A lane taken over from a supervisor that died mid-turn (`clawpool adopt`): no SessionStart
//! and no UserPromptSubmit reach the adopting supervisor, so the agent's first report is what
//! proves the channel, and the turn the earlier supervisor saw accepted is the one its Stop
//! ends.

use super::*;
use crate::handshake::Resumed;

/// A Claude Code lane adopted while its recorded state is `running`, its prompt accepted.
fn adopted_claude_lane() -> Lane {
    let mut machine = Machine::new(
        profile("claude"),
        LaneContext {
            name: "a".into(),
            cwd: PathBuf::from("/nonexistent/lane-a"),
            trust: TrustGate::AllowListed,
            store: None,
            prompt: PromptPlan::Typed {
                prompt: PROMPT.into(),
            },
            restarted_to_apply_trust: false,
            answered_outside: false,
            budget: Default::default(),
        },
        Settings::default(),
        Instant::now(),
        1_800_000_000_000,
    );
    machine.take_over(
        Resumed {
            state: LaneState::Running,
            attempts: 1,
            sent_at: Some(1_799_999_990),
            accepted_at: Some(1_799_999_991),
        },
        None,
    );
    Lane::opened(machine, true)
}

#[tokio::test(start_paused = true)]
async fn an_adopted_lanes_stop_finishes_the_turn_it_took_over() {
    let mut lane = adopted_claude_lane();
    lane.look(&claude("06-running-120x40"));
    lane.input(hook(
        "PostToolUse",
        serde_json::json!({"tool_name": "Bash"}),
    ));
    lane.input(hook("Stop", serde_json::json!({})));
    // The screen still showed work when the Stop came: the finish waits for its next look.
    assert_eq!(lane.state(), LaneState::Running);
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(lane.state(), LaneState::Finished, "{:?}", lane.kinds());
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Hook));
    assert_eq!(
        finished.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("Stop")
    );
}

/// The first report after the adoption proves the channel: a screen that goes idle with no
/// Stop reported finishes the lane, as the fallback, with the contradiction recorded.
#[tokio::test(start_paused = true)]
async fn an_adopted_lanes_first_report_proves_its_channel() {
    let mut lane = adopted_claude_lane();
    lane.input(hook(
        "PostToolUse",
        serde_json::json!({"tool_name": "Bash"}),
    ));
    let idle = claude("08-finished-120x40");
    lane.look(&idle);
    lane.after(Settings::default().finish_idle, &idle).await;
    assert_eq!(lane.state(), LaneState::Finished);
    let contradiction = lane
        .records
        .iter()
        .find(|r| r.payload.kind() == LaneEventKind::ChannelContradiction)
        .unwrap_or_else(|| panic!("no contradiction: {:?}", lane.kinds()));
    assert_eq!(
        contradiction.payload.detail()["channel"]["rule"],
        "turn_open"
    );
    assert_eq!(contradiction.payload.detail()["resolved"], "finished");
}
