//! The pool: a repository's lanes taken together, above any one lane's engine.
//!
//! What it owns today is the repository's **event stream** as its readers see it: every event
//! of every lane, in one order, each with a cursor ([`stream`]: read from a cursor, follow as
//! it grows, resume after a disconnect with no gap and no duplicate), and **waiting** on it
//! for lanes to reach a state ([`wait`]); and **notifying** people of what the stream says
//! (`[[notify]]` endpoints, [`notifier`]), once per situation, off every lane's path.
//!
//! What it leaves to others: the stream is *written* where each lane's own log is, by
//! `clawpool_lanes::EventLog` (`clawpool_lanes::stream`: the cursor, its lock, and the repair
//! after a crash), because every process that records a lane event — a foreground `spawn`,
//! the daemon, `adopt`, an operator command — writes through it. A lane's life is the lane
//! engine's (`clawpool-lane`).
//!
//! It owns **starting and adopting lanes** behind one typed request API: a [`PoolRequest`]
//! (`request`) runs through [`Pool::handle`] (`service`) with the configuration the pool was
//! given ([`config`]) and comes back as a typed [`PoolReply`]; progress goes to the caller's
//! [`Observer`] (`observer`), and the pool writes nothing to a terminal. Planning and starting
//! with bounded concurrency are [`start`]; the registry's writes [`registry`]; one supervisor
//! per repository [`supervisor_lock`]; taking over a dead supervisor's lanes [`adoption`].
//! Reading every lane back as typed rows — the **board** that `clawpool board`, `clawpool ui`
//! and the MCP server show — is [`board`]; removing lanes whose work is safe elsewhere and
//! ending idle tmux servers (**gc**) is [`gc`]; both run behind the same request API.
//!
//! It owns **operating on one lane** behind the same API: which lane a name or folder means
//! ([`lane_lookup`]), an operator's command carried to the lane's control socket and its
//! verdict back ([`operator`]), a follow-up to a lane that ended ([`follow_up`]), and
//! merge-forward and verify through the lane's supervisor or directly ([`lane_checks`]), and an
//! operator's yes kept as a grant ([`remember`]), and a recovery recipe run by hand
//! ([`recover`]).
//!
//! It also owns **hand-off** of finished lanes to their base: the merge queue ([`land`]) that
//! moves the base only to verified commits — and **publishing** a lane's branch: [`publish`]
//! pushes it and finds or opens its pull request on a GitHub-compatible forge ([`forge`]).
//!
//! Following never polls: a `notify` watch on the journal (inotify) wakes the reader, which
//! reads what was appended since its last whole line.

pub mod adoption;
pub mod board;
pub mod config;
pub mod error;
pub mod follow_up;
pub mod forge;
pub mod gc;
pub mod known_repos;
pub mod land;
pub mod lane_checks;
pub mod lane_lookup;
pub mod notifier;
pub mod observer;
pub mod operator;
pub mod publish;
pub mod recover;
pub mod registry;
pub mod remember;
pub mod request;
pub mod sandboxing;
pub mod service;
pub mod start;
pub mod stream;
pub mod supervisor_lock;
pub mod tmux;
pub mod tmux_servers;
pub mod wait;

pub use land::{LandError, LandOptions, LandReport, LaneToLand, LaneVerdict, land};
pub use notifier::{Notifier, NotifierError};
pub use observer::{LaneNote, Notice, Observer};
pub use request::{PoolReply, PoolRequest};
pub use service::Pool;
pub use stream::{Follower, Start, StreamError};
pub use wait::{LaneProgress, Until, WaitError, WaitOutcome, wait};
