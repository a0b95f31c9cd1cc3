//! What the pool tells whoever asked it to start, adopt or collect lanes while it works: the lanes it
//! is about to take, each lane's situation as it changes, every lane event, and notices for
//! people. The pool writes nothing to a terminal; the binary's live board and event lines,
//! or a daemon's log, implement [`Observer`] and render these.

use clawpool_lane::interrupt::StopSignal;
use clawpool_lanes::{LaneEvent, LaneState};

use crate::request::Skipped;

/// Receives the pool's progress. Called from the lanes' tasks: implementations are cheap and
/// never block on the lanes.
pub trait Observer: Send + Sync {
    /// The lanes this request takes, before any of them changes.
    fn starting(&self, lanes: &[String]);
    /// Lane `lane`'s situation changed (what a board shows against its name).
    fn lane(&self, lane: &str, note: LaneNote);
    /// Lane `event.lane` recorded `event`.
    fn event(&self, event: &LaneEvent);
    /// Something a person should know that is not one lane's situation.
    fn notice(&self, notice: Notice);
    /// Every lane of the request is over (ended, skipped, refused or not started).
    fn done(&self);
    /// A gc is judging lane `lane`, the `checked`-th of `of` (from 0). Only gc calls it, so
    /// an observer of starts needs none.
    fn judging(&self, lane: &str, checked: usize, of: usize) {
        let _ = (lane, checked, of);
    }
}

/// A lane's situation as the pool sees it outside its own events.
#[derive(Debug, Clone, PartialEq)]
pub enum LaneNote {
    /// An earlier run left it: it is not started again.
    Skipped(Skipped),
    /// The supervisor was stopped by a signal before the lane started.
    NotStarted(StopSignal),
    /// It has a concurrency slot; its worktree is being made or reused.
    PreparingWorktree,
    /// It could not be started or driven: the failure's message.
    Failed(String),
    /// It was not taken over and is left as it is: the error's stable kind and message.
    NotAdopted {
        /// Stable, snake_case (`invalid_state_file`, `lane_busy`, ...).
        kind: &'static str,
        /// For people.
        error: String,
    },
    /// Its registry folder has no entry: its supervisor died before registering it.
    NeverRegistered,
    /// Its worker was found gone (or never started) and recorded so.
    Lost(LaneState),
    /// It had ended before it was adopted; its files were caught up.
    AlreadyEnded(LaneState),
    /// It ended in `state`, which is in its event log but not its state file.
    Unrecorded {
        /// How it ended.
        state: LaneState,
        /// Why the state file could not be written.
        error: String,
    },
}

/// A notice for people, not tied to one lane's situation.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// A lane runs another agent than `--agent` because the packet names one: `--agent` is
    /// only the default for lanes that name none.
    AgentOverridden {
        /// The lane.
        lane: String,
        /// The agent the packet names for it.
        agent: String,
        /// The agent `--agent` asked for.
        cli_agent: String,
    },
    /// Lane `lane` runs in tmux: `command` attaches a person to it.
    Attach {
        /// The lane.
        lane: String,
        /// `tmux -L SOCKET attach -t SESSION`.
        command: String,
    },
    /// The repository's notifier could not start; the lanes run without it.
    NotificationsOff(String),
    /// The user's index of repositories with lanes was not updated; the lane runs without it.
    IndexNotUpdated(String),
}

/// The observer of a request that reports no progress (an operator command, a check) or of a
/// caller that shows none (the MCP server, which answers with the reply alone).
pub struct Silent;

impl Observer for Silent {
    fn starting(&self, _: &[String]) {}
    fn lane(&self, _: &str, _: LaneNote) {}
    fn event(&self, _: &LaneEvent) {}
    fn notice(&self, _: Notice) {}
    fn done(&self) {}
}
