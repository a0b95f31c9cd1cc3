//! The notification as it is sent (`docs/notify.md`, "The notification"): one JSON object,
//! the same for a webhook in `json` format, a command's stdin and the notifier's record of
//! what it still has to send; and the one-line text Slack, Discord and the desktop show.

use clawpool_agents::config::notify::{NotifyEvent, WebhookFormat};
use clawpool_lanes::payload::Escalated;
use clawpool_lanes::stream::StreamEvent;
use clawpool_lanes::{BlockedSubphase, FailureClass, LaneState, LaneStatus};
use serde::{Deserialize, Serialize};

/// One notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// The situation (`blocked`, `tool_permission`, …).
    pub event: NotifyEvent,
    /// The repository's folder.
    pub repository: String,
    /// The lane.
    pub lane: String,
    /// The lane's status, when the notifier has seen one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_status: Option<LaneStatus>,
    /// Why it is blocked, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subphase: Option<BlockedSubphase>,
    /// The failure class: why it failed, or what a blocked lane is heading for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureClass>,
    /// Why, in words.
    pub reason: String,
    /// What a person can do next (a command naming the lane).
    pub next_action: String,
    /// When the lane's event happened: milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The same time, RFC 3339 in UTC.
    pub at: String,
    /// The lane event's cursor in the repository's stream.
    pub cursor: u64,
    /// The lane event's `seq` in the lane's own log.
    pub seq: u64,
    /// What the lane cost so far, in US dollars (its agent's usage at the configured prices,
    /// as the state file's `cost_usd`); absent when unknown, never 0 for unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Notification {
    /// The notification of situation `event` for the stream line `line`, the lane in `state`.
    pub fn new(
        repository: &str,
        line: &StreamEvent,
        event: NotifyEvent,
        state: Option<LaneState>,
    ) -> Self {
        let lane = &line.event.lane;
        let subphase = state.and_then(LaneState::subphase);
        let failure = state
            .and_then(LaneState::failure)
            .or(subphase.map(BlockedSubphase::failure_class));
        let seen = line
            .event
            .evidence
            .as_ref()
            .map(|e| format!("{} ({})", clip(e.matched.trim()), e.rule));
        let (reason, next_action) = match (event, state) {
            (NotifyEvent::ToolPermission, _) => (
                seen.unwrap_or_else(|| "a tool's permission question waits for a person".into()),
                format!(
                    "see the question with `clawpool attach {lane}`, then `clawpool answer --choice yes|no` in the lane's folder"
                ),
            ),
            (NotifyEvent::Finished, _) => (
                "the agent finished its turn".to_owned(),
                format!("check the lane's work: `clawpool verify {lane}`"),
            ),
            (NotifyEvent::Failed, _) => (
                seen.unwrap_or_else(|| "the lane failed".into()),
                format!("see why: `clawpool events {lane}`"),
            ),
            (NotifyEvent::Budget, _) => (
                seen.unwrap_or_else(|| "the lane's cost passed its budget".into()),
                format!(
                    "raise the budget or stop it: `clawpool budget {lane} USD`, then `clawpool send {lane} TEXT`; or `clawpool stop {lane}`"
                ),
            ),
            (NotifyEvent::Landed, _) => (
                "green at merge_ready on a fresh branch".to_owned(),
                format!("merge lane {lane}'s branch"),
            ),
            _ => (
                seen.unwrap_or_else(|| "the lane waits for something outside its agent".into()),
                format!("`clawpool recover {lane}` shows what the policy would do"),
            ),
        };
        Notification {
            event,
            repository: repository.to_owned(),
            lane: lane.clone(),
            lane_status: state.map(LaneState::status),
            subphase,
            failure,
            reason,
            next_action,
            at_ms: line.event.at_ms,
            at: rfc3339(line.event.at_ms),
            cursor: line.cursor,
            seq: line.event.seq,
            cost_usd: None,
        }
    }

    /// With the lane's cost, when known.
    pub fn costing(mut self, cost_usd: Option<f64>) -> Self {
        self.cost_usd = cost_usd;
        self
    }

    /// With the reason and next action of the escalation that came with it, if one did.
    pub fn explained(mut self, escalation: Option<&Escalated>) -> Self {
        if let Some(escalated) = escalation {
            self.reason.clone_from(&escalated.reason);
            self.next_action.clone_from(&escalated.next_action);
        }
        self
    }

    /// One line for a person.
    pub fn text(&self) -> String {
        let state = match (self.lane_status, self.subphase, self.failure) {
            (_, Some(subphase), _) => format!("blocked ({})", wire(&subphase)),
            (Some(LaneStatus::Failed), _, Some(failure)) => format!("failed ({})", wire(&failure)),
            (Some(status), _, _) => wire(&status),
            (None, _, _) => self.event.name().to_owned(),
        };
        let repository = std::path::Path::new(&self.repository)
            .file_name()
            .map_or_else(
                || self.repository.clone(),
                |n| n.to_string_lossy().into_owned(),
            );
        format!(
            "clawpool {repository}: lane {} {}: {}. Next: {}",
            self.lane, state, self.reason, self.next_action
        )
    }

    /// The body a webhook of `format` is sent.
    pub fn body(&self, format: WebhookFormat) -> serde_json::Value {
        match format {
            WebhookFormat::Json => serde_json::to_value(self).unwrap_or_default(),
            WebhookFormat::Slack => serde_json::json!({ "text": self.text() }),
            // Discord refuses content over 2,000 characters.
            WebhookFormat::Discord => serde_json::json!({ "content": clip_to(&self.text(), 1900) }),
        }
    }
}

fn wire(value: &impl Serialize) -> String {
    clawpool_lanes::wire_name(value)
}

/// A screen's text, kept short enough for a notification.
fn clip(text: &str) -> String {
    clip_to(&text.split_whitespace().collect::<Vec<_>>().join(" "), 200)
}

fn clip_to(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for milliseconds since the Unix epoch.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    fn slack_and_discord_get_the_shape_they_take() {
        let note = Notification {
            event: NotifyEvent::Blocked,
            repository: "/src/app".into(),
            lane: "a".into(),
            lane_status: Some(LaneStatus::Blocked),
            subphase: Some(BlockedSubphase::Provider),
            failure: Some(FailureClass::Provider),
            reason: "API Error: 529".into(),
            next_action: "`clawpool recover a`".into(),
            at_ms: 0,
            at: rfc3339(0),
            cursor: 0,
            seq: 1,
            cost_usd: Some(0.42),
        };
        let text =
            "clawpool app: lane a blocked (provider): API Error: 529. Next: `clawpool recover a`";
        assert_eq!(
            note.body(WebhookFormat::Slack),
            serde_json::json!({ "text": text })
        );
        assert_eq!(
            note.body(WebhookFormat::Discord),
            serde_json::json!({ "content": text })
        );
        let json = note.body(WebhookFormat::Json);
        assert_eq!(json["lane_status"], "blocked");
        assert_eq!(json["subphase"], "provider");
        assert_eq!(json["event"], "blocked");
        assert_eq!(json["cost_usd"], 0.42);
        let unknown = Notification {
            cost_usd: None,
            ..note
        };
        let json = unknown.body(WebhookFormat::Json);
        assert!(
            json.get("cost_usd").is_none(),
            "absent when unknown: {json}"
        );
    }
}
