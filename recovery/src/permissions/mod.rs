//! Tool-permission questions answered by a typed (verb, directory) policy (`docs/permissions.md`).
//!
//! An agent in its default permission mode asks before it runs a command or writes a file.
//! This module decides such a question for one lane: [`reader`] reads the command's text into
//! simple commands (or refuses it), [`safe_verbs`] is the curated list of verbs decided without
//! an entry, [`classes`] the protected paths and the commands never default safe, [`screen`]
//! reads the question off the agent's dialog, and [`policy`] applies the lane's profile and the
//! `[permissions]` entries in their order of precedence and says which rule decided.
//! [`grants`] keeps the grants operators made with their answers, each signed by the pool. It never answers a dialog itself; the supervisor does.

pub mod classes;
pub mod grants;
pub mod policy;
pub mod reader;
pub mod safe_verbs;
pub mod screen;

#[cfg(test)]
mod corpus;
#[cfg(test)]
mod tests;

pub use classes::{Protected, ProtectedPaths};
pub use grants::{
    Grant, GrantError, GrantKey, GrantScope, GrantStore, IgnoredGrant, Loaded, SetAside,
};
pub use policy::{
    Decision, Effect, Entry, HardBlock, LaneContext, NeverSafe, PartDecision, PermissionPolicy,
    PermissionSettings, Profile, Request, Rule, Scope, Tool, Verdict,
};
pub use reader::{CommandPart, Redirect, RedirectMode, Refusal, read_command};
pub use screen::read_dialog;
