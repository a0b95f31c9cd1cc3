//! Which stream events are a new situation for a person: the I/O-free half of the notifier.
//!
//! A *situation* is a lane entering a state with a reason. Per lane the tracker keeps the last
//! state it saw, the escalation it last reported while the lane stayed in that state, and the
//! head it last reported ready to land. An event makes a notification only when it changes one
//! of these: a lane that stays blocked (the same subphase reported again, a screen that keeps
//! showing the same dialog) makes none, and a lane that leaves and comes back (answered, then
//! blocked again) makes one each time it comes back. Entering a state is one situation, with
//! the reason and next action of the escalation that came with it, if one did (a recovery
//! recipe that blocks the lane); an escalation while the lane stays where it is (`lane.escalated`)
//! of a lane that is not blocked is another, once per reason (a blocked lane's escalation is part
//! of its blocked situation). The tracker is persisted with the
//! notifier's cursor, so a restarted notifier decides as the one before it would have.

use std::collections::BTreeMap;

use clawpool_agents::config::notify::NotifyEvent;
use clawpool_lanes::cost::{self, PriceTable};
use clawpool_lanes::state_file::{Usage, usage_from_protocol, usage_from_transcript};
use clawpool_lanes::stream::StreamEvent;
use clawpool_lanes::{BlockedSubphase, LaneState, Payload};
use serde::{Deserialize, Serialize};

use super::message::Notification;

/// What the tracker last told about one lane.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaneMark {
    /// The lane's state after its last transition seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<LaneState>,
    /// The reason of the escalation reported since the lane entered `state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<String>,
    /// The head last reported ready to land.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<String>,
    /// The lane's last event seen: an event seen again (a stream repair) is skipped.
    #[serde(default)]
    pub seq: u64,
    /// The tokens the lane's agent reported, from its usage events in the stream (as the
    /// state file counts them): what a notification's `cost_usd` is priced from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Every lane's mark, by lane name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Situations {
    lanes: BTreeMap<String, LaneMark>,
}

impl Situations {
    /// The notification `line` makes for repository `repository`, if it is a new situation,
    /// with the lane's cost priced with `prices` (absent while unknown).
    pub fn observe(
        &mut self,
        repository: &str,
        line: &StreamEvent,
        prices: &PriceTable,
    ) -> Option<Notification> {
        let event = &line.event;
        let mark = self.lanes.entry(event.lane.clone()).or_default();
        if event.seq <= mark.seq {
            return None;
        }
        mark.seq = event.seq;
        let payload = event.payload();
        let at = event.at_ms / 1000;
        match &payload {
            Some(Payload::Usage(reported)) => usage_from_transcript(&mut mark.usage, reported, at),
            Some(Payload::Protocol(message)) => usage_from_protocol(&mut mark.usage, message, at),
            _ => {}
        }
        let cost_usd = mark
            .usage
            .as_ref()
            .and_then(|usage| cost::price(usage, prices).0);
        let escalation = match &payload {
            Some(Payload::Escalated(e) | Payload::BlockedEscalated(e)) => Some(e),
            _ => None,
        };
        let note = |kind: NotifyEvent, state: Option<LaneState>| {
            Notification::new(repository, line, kind, state).costing(cost_usd)
        };
        if let Some(to) = event.to.filter(|to| mark.state != Some(*to)) {
            mark.state = Some(to);
            mark.escalation = escalation.map(|e| e.reason.clone());
            let kind = match to {
                LaneState::Blocked(BlockedSubphase::ToolPermission) => NotifyEvent::ToolPermission,
                LaneState::Blocked(BlockedSubphase::Budget) => NotifyEvent::Budget,
                LaneState::Blocked(_) => NotifyEvent::Blocked,
                LaneState::Finished => NotifyEvent::Finished,
                LaneState::Failed(_) => NotifyEvent::Failed,
                _ => return None,
            };
            return Some(note(kind, Some(to)).explained(escalation));
        }
        if let Some(escalated) = escalation {
            // A blocked lane's escalation is part of its blocked situation: the person was
            // told when it blocked.
            let blocked = matches!(mark.state, Some(LaneState::Blocked(_)));
            if blocked || mark.escalation.as_ref() == Some(&escalated.reason) {
                return None;
            }
            mark.escalation = Some(escalated.reason.clone());
            return Some(note(NotifyEvent::Escalated, mark.state).explained(Some(escalated)));
        }
        if let Some(Payload::MergeReady(ready)) = &payload {
            if ready.head.is_some() && mark.landed == ready.head {
                return None;
            }
            mark.landed.clone_from(&ready.head);
            return Some(note(NotifyEvent::Landed, mark.state));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawpool_lanes::payload::Escalated;
    use clawpool_lanes::{Evidence, LaneEvent, LaneEventKind};

    struct Lane {
        seq: u64,
        cursor: u64,
    }

    impl Lane {
        fn event(
            &mut self,
            kind: LaneEventKind,
            to: Option<LaneState>,
            payload: Option<Payload>,
        ) -> StreamEvent {
            self.seq += 1;
            self.cursor += 100;
            StreamEvent {
                event: LaneEvent {
                    seq: self.seq,
                    at_ms: 1_700_000_000_000,
                    kind,
                    lane: "a".into(),
                    from: None,
                    to,
                    evidence: Some(Evidence {
                        rule: "permission_dialog".into(),
                        region: "screen".into(),
                        matched: "Do you want to proceed?".into(),
                    }),
                    detail: payload.map_or(serde_json::Value::Null, |p| p.detail()),
                    source: None,
                },
                cursor: self.cursor,
            }
        }

        fn to(&mut self, state: LaneState) -> StreamEvent {
            self.event(state.status().transition_kind(), Some(state), None)
        }
    }

    fn escalated(lane: &mut Lane, reason: &str) -> StreamEvent {
        lane.event(
            LaneEventKind::Escalated,
            None,
            Some(Payload::Escalated(Escalated {
                reason: reason.into(),
                next_action: "clawpool attach a".into(),
                recipe: None,
            })),
        )
    }

    fn kinds(situations: &mut Situations, events: &[StreamEvent]) -> Vec<&'static str> {
        events
            .iter()
            .filter_map(|e| situations.observe("/repo", e, &PriceTable::shipped()))
            .map(|n| n.event.name())
            .collect()
    }

    #[test]
    fn one_notification_per_situation_and_none_while_it_stays() {
        let mut lane = Lane { seq: 0, cursor: 0 };
        let permission = LaneState::Blocked(BlockedSubphase::ToolPermission);
        let events = [
            lane.to(LaneState::Running),
            lane.to(permission),
            // The same state reported again, and an unrelated event: nothing new.
            lane.to(permission),
            lane.event(LaneEventKind::Hook, None, None),
            lane.to(LaneState::Running),
            lane.to(permission),
            // Escalated while blocked: part of the blocked situation.
            escalated(&mut lane, "nobody answered"),
            lane.to(LaneState::Running),
            // Escalated while working: once per reason.
            escalated(&mut lane, "no progress"),
            escalated(&mut lane, "no progress"),
            lane.to(LaneState::Blocked(BlockedSubphase::Provider)),
            lane.to(LaneState::Finished),
            lane.to(LaneState::Finished),
        ];
        let mut situations = Situations::default();
        assert_eq!(
            kinds(&mut situations, &events),
            [
                "tool_permission",
                "tool_permission",
                "escalated",
                "blocked",
                "finished"
            ]
        );
        // The same events again (a repaired stream, a notifier resumed too early): nothing.
        assert!(kinds(&mut situations, &events).is_empty());
    }

    #[test]
    fn a_recipes_blocking_escalation_is_one_blocked_with_its_next_action() {
        let mut lane = Lane { seq: 0, cursor: 0 };
        let blocked = lane.event(
            LaneEventKind::Blocked,
            Some(LaneState::Blocked(BlockedSubphase::Stalled)),
            Some(Payload::BlockedEscalated(Escalated {
                reason: "no progress after two nudges".into(),
                next_action: "clawpool attach a".into(),
                recipe: Some("nudge_stalled".into()),
            })),
        );
        let note = Situations::default()
            .observe("/repo", &blocked, &PriceTable::shipped())
            .expect("a notification");
        assert_eq!(note.event, NotifyEvent::Blocked);
        assert_eq!(note.subphase, Some(BlockedSubphase::Stalled));
        assert_eq!(note.reason, "no progress after two nudges");
        assert_eq!(note.next_action, "clawpool attach a");
    }

    #[test]
    fn a_lane_held_on_its_budget_is_one_budget_notification_with_its_cost() {
        let mut lane = Lane { seq: 0, cursor: 0 };
        let running = lane.to(LaneState::Running);
        let usage = lane.event(
            LaneEventKind::Usage,
            None,
            Some(Payload::Usage(clawpool_lanes::payload::UsageReported {
                source: "claude_transcript".into(),
                usage: serde_json::json!({"input_tokens": 1_000_000, "output_tokens": 0}),
                transcript_path: None,
                model: Some("claude-sonnet-4-5-20250929".into()),
                message_id: Some("m1".into()),
            })),
        );
        let held = LaneState::Blocked(BlockedSubphase::Budget);
        let events = [running, usage, lane.to(held), lane.to(held)];
        let mut situations = Situations::default();
        let notes: Vec<Notification> = events
            .iter()
            .filter_map(|e| situations.observe("/repo", e, &PriceTable::shipped()))
            .collect();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].event, NotifyEvent::Budget);
        // A million input tokens at claude-sonnet-4-5's $3.
        assert_eq!(notes[0].cost_usd, Some(3.0));
        assert!(
            notes[0].next_action.contains("clawpool budget a"),
            "{notes:?}"
        );
    }
}
