//! The state file's `hooks` section: which channel of its own the agent reports through
//! (`lane.channel.opened`), what it delivered to the lane (`lane.hook` and `lane.protocol`
//! events) and how often a delivery failed (`lane.channel.degraded`), so that a channel that
//! does not work is visible without reading the event log.

use serde::{Deserialize, Serialize};

use crate::payload::{ChannelDegraded, ChannelOpened};

/// The lane's hook channel, as its events recorded it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HookChannel {
    /// The agent's channel (`claude_hooks`, `codex_app_server`), or null: the screen alone.
    #[serde(default)]
    pub channel: Option<String>,
    /// Hook reports the lane received.
    pub received: u32,
    /// Hook reports that never reached the lane (the hook said so), or that it refused.
    pub failed: u32,
    /// The last hook event received (`Stop`, `PreToolUse`, …), or null.
    pub last_event: Option<String>,
    /// When it was received (epoch s), or null.
    pub last_at: Option<u64>,
    /// Whether the channel failed and the screen decides alone.
    pub degraded: bool,
}

impl HookChannel {
    /// Notes a `lane.channel.opened` event.
    pub fn opened(&mut self, opened: ChannelOpened) {
        self.channel = Some(opened.channel);
    }

    /// Counts a `lane.hook` or `lane.protocol` event.
    pub fn received(&mut self, event: &str, at: u64) {
        self.received += 1;
        self.last_event = Some(event.to_owned());
        self.last_at = Some(at);
    }

    /// Counts a `lane.channel.degraded` event.
    pub fn degraded(&mut self, degraded: &ChannelDegraded) {
        self.degraded = true;
        self.failed = self.failed.max(degraded.failed);
    }
}
