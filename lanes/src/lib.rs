//! Lanes: task packets, the lane lifecycle, typed lane events, and the per-lane state file.
//!
//! A lane is one agent working in one git worktree. A task packet ([`parse_packet`]) says
//! which lanes to run; every problem in it is reported at once with its JSON path. A lane's
//! state is a [`LaneState`]: its [`LaneStatus`] with the data only that status has (the
//! [`BlockedSubphase`] of a blocked lane, the [`FailureClass`] of a failed one); every change of state is a [`LaneEvent`] with a per-lane,
//! strictly increasing `seq`, appended to the lane's [`EventLog`] (JSON lines). The lane's
//! public state is the [`WorkerStateDoc`] in `<worktree>/.claw/worker-state.json`, written
//! atomically ([`StateFileWriter`]) and read with ages recomputed ([`with_ages`]). A registry
//! lane's events also go to its repository's stream, each with a cursor ([`stream`]).
//!
//! This crate decides nothing about screens or terminals: the supervisor's handshake observes
//! the worker and reports transitions; this crate gives them a shape that other tools can read.

mod event_kind;
mod events;
mod evidence;
mod ledger;
mod packet;
pub mod payload;
pub mod sandbox;
mod state;
pub mod state_file;

mod verification;

pub use event_kind::LaneEventKind;
pub use events::stream;
pub use events::{
    EventLog, EventLogError, EventObserver, EventReport, EventSource, LaneEvent, now_ms,
};
pub use evidence::Evidence;
pub use packet::{
    Batch, CheckedPacket, GREEN_LEVELS, LaneSpec, MERGE_POLICIES, PacketContext, PacketError,
    PacketErrors, PacketForm, TaskResource, TaskScope, check_packet, is_valid_lane_name,
    parse_packet,
};
pub use payload::Payload;
pub use sandbox::{LaneSandbox, SANDBOX_MODES, SandboxMode, SandboxNetwork};
pub use state::{BlockedSubphase, FailureClass, LaneState, LaneStatus, wire_name};
pub use state_file::cost;
pub use state_file::{
    StateFileError, StateFileWriter, StateView, WorkerStateDoc, read_lane_record, read_state_file,
    state_file_path, with_ages,
};
