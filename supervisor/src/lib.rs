//! The clawpool supervisor: what turns a worker's screen into a lane's state.
//!
//! This library holds the parts of the `clawpool` binary that deserve tests of their own:
//! agent profiles and their detection rules, configuration, trust resolution, and the boot
//! handshake that drives a worker from "process started" to "prompt accepted". The binary
//! (`main.rs`) only parses flags and wires these together.

pub mod config;
pub mod detect;
pub mod handshake;
pub mod lane_state;
pub mod permission_gate;
pub mod profiles;
pub mod trust;
pub mod verify;
