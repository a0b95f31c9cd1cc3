//! The names that tie a repository to its private tmux server and a lane to its session there,
//! the same for every process that starts, adopts, attaches to or cleans up a tmux lane.

use clawpool_lane::drive::session_name;
use clawpool_worktree::Repo;

/// The command that attaches a person to lane `name`'s session on the tmux server `socket`.
pub fn tmux_attach_command(socket: &str, name: &str) -> String {
    format!("tmux -L {socket} attach -t {}", session_name(name))
}

/// A short, stable tmux socket name for a repository: `clawpool-<hash of its common dir>`.
pub fn tmux_socket_name(repo: &Repo) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    repo.common_dir().hash(&mut hasher);
    format!("clawpool-{:08x}", hasher.finish() as u32)
}
