//! The state file's `permissions` section: the tool-permission questions the permission
//! policy decided for the lane (`lane.permission.decided`, `docs/permissions.md`) — how many
//! were allowed, denied and left to a person, the latest ones, and the operators' grants that
//! decided any.

use crate::payload::PermissionDecided;
use serde::{Deserialize, Serialize};

/// How many of the latest decisions the state file keeps.
pub const RECENT_PERMISSION_DECISIONS: usize = 20;

/// The lane's tool-permission decisions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PermissionDecisions {
    /// Questions answered yes by the policy.
    pub allowed: u32,
    /// Questions answered no by the policy.
    pub denied: u32,
    /// Questions left to a person.
    pub asked: u32,
    /// The latest decisions, oldest first, at most [`RECENT_PERMISSION_DECISIONS`].
    pub recent: Vec<PermissionDecision>,
    /// The operators' grants that allowed the lane's questions (rule `grant:ID`), in the order
    /// each first did.
    #[serde(default)]
    pub grants: Vec<GrantUse>,
}

/// One grant's use by the lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantUse {
    /// The grant's id (`repository#1`).
    pub grant: String,
    /// How many questions it allowed.
    pub allowed: u32,
    /// When it last did (epoch s).
    pub last_at: u64,
}

/// One decision, as its event recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionDecision {
    /// `bash`, `write`, `edit`, or null when the question could not be read.
    pub tool: Option<String>,
    /// The verb of the part that decided.
    pub verb: Option<String>,
    /// Its arguments (truncated).
    pub args: Vec<String>,
    /// The folder it runs in.
    pub cwd: Option<String>,
    /// The rule that decided.
    pub rule: String,
    /// `allow`, `deny` or `ask`.
    pub decision: String,
    /// When (epoch s).
    pub at: u64,
}

impl PermissionDecisions {
    /// Counts and keeps the decision a `lane.permission.decided` event records.
    pub fn record(&mut self, decided: PermissionDecided, at: u64) {
        match decided.decision.as_str() {
            "allow" => self.allowed += 1,
            "deny" => self.denied += 1,
            _ => self.asked += 1,
        }
        if let Some(grant) = decided.grant() {
            match self.grants.iter_mut().find(|used| used.grant == grant) {
                Some(used) => {
                    used.allowed += 1;
                    used.last_at = at;
                }
                None => self.grants.push(GrantUse {
                    grant: grant.to_owned(),
                    allowed: 1,
                    last_at: at,
                }),
            }
        }
        self.recent.push(PermissionDecision {
            tool: decided.tool,
            verb: decided.verb,
            args: decided.args,
            cwd: decided.cwd,
            rule: decided.rule,
            decision: decided.decision,
            at,
        });
        let excess = self
            .recent
            .len()
            .saturating_sub(RECENT_PERMISSION_DECISIONS);
        self.recent.drain(..excess);
    }
}
