//! The lane's budget (`budget_usd`): a cost past it, reported mid-turn, interrupts the turn
//! and holds the lane `blocked{budget}`; nothing is typed into a held lane, its idle screen
//! does not finish it, `send` is refused until the budget is raised, and a text then releases
//! it. All on paused time, on Claude Code's recorded screens.

use super::*;
use crate::handshake::LaneBudget;
use clawpool_lanes::payload::Usd;

fn budgeted(usd: f64) -> Lane {
    Lane::with_context("claude", TrustGate::AllowListed, Some(PROMPT), |lane| {
        lane.budget = LaneBudget {
            usd: Some(usd),
            held: false,
        };
    })
}

fn escs(lane: &Lane) -> usize {
    lane.sent
        .iter()
        .filter(|input| matches!(input, clawpool_pty::Input::Key(clawpool_pty::Key::Esc)))
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_cost_past_the_budget_mid_turn_interrupts_the_turn_and_holds_the_lane() {
    let mut lane = budgeted(0.01);
    lane.drive_to_running().await;
    // Usage within the budget changes nothing.
    lane.input(Input::Cost(0.005));
    assert_eq!(lane.state(), LaneState::Running);
    assert_eq!(escs(&lane), 0);
    // Past it, while the agent works: its own interrupt, then the hold and its next action.
    lane.input(Input::Cost(0.02));
    let held = LaneState::Blocked(BlockedSubphase::Budget);
    assert_eq!(lane.state(), held);
    assert_eq!(escs(&lane), 1, "{:?}", lane.sent);
    let blocked = lane
        .records
        .iter()
        .find(|r| r.to == Some(held))
        .expect("lane.blocked");
    assert!(
        blocked
            .evidence
            .as_ref()
            .expect("evidence")
            .matched
            .contains("$0.020000"),
        "{blocked:?}"
    );
    let escalated = lane
        .records
        .iter()
        .find_map(|r| match &r.payload {
            Payload::Escalated(e) => Some(e.clone()),
            _ => None,
        })
        .expect("an escalation");
    assert!(
        escalated
            .next_action
            .contains("raise the budget or stop it")
    );
    assert!(
        !lane.machine.is_over(),
        "the machine keeps holding the lane"
    );
    // More usage, the agent idle after the interrupt, long past finish_idle: still held, and
    // interrupted only once.
    lane.input(Input::Cost(0.03));
    lane.look(&claude("08-finished-120x40"));
    lane.after(Duration::from_secs(120), &claude("08-finished-120x40"))
        .await;
    assert_eq!(lane.state(), held);
    assert_eq!(escs(&lane), 1);
    assert_eq!(lane.count("lane.blocked"), 1);

    // A text is refused while the cost is past the budget; nothing is typed.
    let typed = lane.texts_typed().len();
    let verdict = lane.operator(
        OperatorCommand::Send {
            text: "keep going".into(),
        },
        &claude("08-finished-120x40"),
    );
    assert!(
        matches!(&verdict, Verdict::OverBudget { reason, .. } if reason.contains("over budget")),
        "{verdict:?}"
    );
    assert_eq!(lane.texts_typed().len(), typed);

    // Raised: recorded, still held until a text goes in; the text then goes in.
    let verdict = lane.operator(
        OperatorCommand::Budget { usd: Usd(1.0) },
        &claude("08-finished-120x40"),
    );
    assert!(matches!(verdict, Verdict::Done { .. }), "{verdict:?}");
    assert_eq!(lane.count("lane.budget_set"), 1);
    assert_eq!(lane.state(), held);
    // (Its verdict comes once the text is submitted; what matters here is that it is typed.)
    let (reply, _verdict) = VerdictReply::new();
    lane.input(Input::Operator {
        request: OperatorRequest {
            command: OperatorCommand::Send {
                text: "keep going".into(),
            },
            reply,
        },
        screen: claude("08-finished-120x40"),
    });
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(
        lane.texts_typed().last().map(String::as_str),
        Some("keep going"),
        "{:?}",
        lane.kinds()
    );
}

#[tokio::test(start_paused = true)]
async fn a_lane_past_its_budget_before_its_prompt_is_held_without_typing_it() {
    let mut lane = budgeted(0.01);
    lane.input(Input::Cost(0.5));
    lane.look(&claude("01-booting-120x40"));
    lane.look(&claude("04-ready_for_prompt-120x40"));
    assert_eq!(lane.state(), LaneState::Blocked(BlockedSubphase::Budget));
    assert!(
        lane.texts_typed().is_empty(),
        "nothing typed: {:?}",
        lane.sent
    );
    assert_eq!(escs(&lane), 0, "no turn to interrupt");
}

#[tokio::test(start_paused = true)]
async fn a_held_lane_stopped_by_a_person_is_stopped_not_failed() {
    let mut lane = budgeted(0.01);
    lane.drive_to_running().await;
    lane.input(Input::Cost(0.02));
    lane.operator(OperatorCommand::Stop, &claude("08-finished-120x40"));
    assert_eq!(lane.state(), LaneState::Stopped);
}
