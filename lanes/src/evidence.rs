//! [`Evidence`]: what a rule saw that justified a transition, carried by lane events and their
//! payloads alike.

use serde::{Deserialize, Serialize};

/// What a rule saw that justified a transition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The rule (or other source, e.g. `process_exit`) that decided.
    pub rule: String,
    /// Where it looked (a screen region, or `process`).
    pub region: String,
    /// The text it matched (or the exit status).
    pub matched: String,
}
