//! What clawpool knows about each coding agent, and what the user has configured about them.
//!
//! - [`profiles`]: one TOML profile per agent (shipped in `agents/profiles/`, patchable by the
//!   user's configuration): how to start it, and the rules that read its screen — which
//!   dialog is up and how to answer it, when it is ready for a prompt, working, finished, or
//!   blocked by its provider.
//! - [`detect`]: those rules applied to one screen snapshot, with the evidence that matched.
//! - [`trust`]: which folders may be trusted (the allow-list of roots), and the agents' own
//!   trust stores (Claude Code's `~/.claude.json`, Codex's `config.toml`, gemini-cli's trusted
//!   folders), edited atomically under a lock and only for allow-listed folders.
//! - [`config`]: the user's and the repository's configuration files, merged in a stated order,
//!   each value remembering where it came from.
//!
//! Nothing here starts a process or owns a lane; the lane engine (`clawpool-lane`) and the
//! `clawpool` binary use it.

pub mod config;
pub mod detect;
pub mod profiles;
pub mod trust;
