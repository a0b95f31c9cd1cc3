//! Lane states as MCP resources, `clawpool://lanes/{name}/state` (`docs/mcp.md`, "Resources"):
//! their URIs, and one session's subscriptions with the watcher that turns the repository's
//! event stream into `notifications/resources/updated`.
//!
//! The stream is the source: a lane's state changes exactly when one of its events carries a
//! new state (`to`), so a subscriber is told on those events and reads the resource again. One
//! watcher per session, started at its first subscription, ended when the session is gone.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::{Peer, RoleServer};

use super::pool_api::PoolApi;

/// The URI template of a lane's state.
pub const TEMPLATE: &str = "clawpool://lanes/{name}/state";

/// The URI of lane `name`'s state.
pub fn uri(name: &str) -> String {
    format!("clawpool://lanes/{name}/state")
}

/// The lane a state URI names.
pub fn lane_of(uri: &str) -> Option<&str> {
    uri.strip_prefix("clawpool://lanes/")?
        .strip_suffix("/state")
        .filter(|name| clawpool_lanes::is_valid_lane_name(name))
}

/// One session's subscriptions.
#[derive(Debug, Clone, Default)]
pub struct Subscriptions {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    lanes: HashSet<String>,
    watching: bool,
}

impl Subscriptions {
    /// Subscribes to `lane`'s state; the first subscription starts the session's watcher.
    pub fn subscribe(
        &self,
        api: &PoolApi,
        peer: &Peer<RoleServer>,
        lane: &str,
    ) -> Result<(), String> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.lanes.insert(lane.to_owned());
        if inner.watching {
            return Ok(());
        }
        // From now: what happened before the subscription is in the resource already.
        let mut follower = api.follow_now().map_err(|e| e.message)?;
        inner.watching = true;
        let subscriptions = self.clone();
        let peer = peer.clone();
        tokio::spawn(async move {
            while let Ok(lines) = follower.next().await {
                for line in lines.iter().filter(|l| l.event.to.is_some()) {
                    if !subscriptions.has(&line.event.lane) {
                        continue;
                    }
                    if peer
                        .notify_resource_updated(
                            rmcp::model::ResourceUpdatedNotificationParam::new(uri(&line
                                .event
                                .lane)),
                        )
                        .await
                        .is_err()
                    {
                        // The session is gone.
                        return;
                    }
                }
            }
        });
        Ok(())
    }

    pub fn unsubscribe(&self, lane: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.lanes.remove(lane);
    }

    fn has(&self, lane: &str) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.lanes.contains(lane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_uri_names_its_lane_and_nothing_else_does() {
        assert_eq!(lane_of(&uri("alpha")), Some("alpha"));
        for other in [
            "clawpool://lanes/alpha/events",
            "clawpool://lanes/../x/state",
            "file:///etc/passwd",
            "clawpool://lanes//state",
        ] {
            assert_eq!(lane_of(other), None, "{other}");
        }
    }
}
