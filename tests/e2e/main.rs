//! End-to-end tests: the built `clawpool` binary and the scripted agent, on real PTYs, real
//! private tmux servers and real git repositories made in the test.

mod callers;
mod claw_compat;
mod codex_channel;
mod crashes;
mod freshness;
mod handshake;
mod hooks;
mod idle;
mod lane_truth;
mod layering;
mod lives;
mod mcp;
mod model_server;
mod more_agents;
mod permissions;
mod policy;
mod progress;
mod real_agents;
mod recovery;
mod run_one;
mod screen_lies;
mod scripted_agent;
mod spawn;
mod stream;
mod trust;
mod ui;
