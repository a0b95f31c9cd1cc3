//! End-to-end tests: the built `clawpool` binary and the scripted agent, on real PTYs, real
//! private tmux servers and real git repositories made in the test.

mod callers;
mod claw_compat;
mod codex_channel;
mod cost;
mod crashes;
mod faults;
mod finished_lanes;
mod freshness;
mod handoff;
mod handshake;
mod hooks;
mod idle;
mod init;
mod lane_truth;
mod layering;
mod lives;
mod mcp;
mod mcp_http;
mod model_server;
mod more_agents;
mod notify;
mod packet_rules;
mod permissions;
mod policy;
mod progress;
mod real_agents;
mod recovery;
mod run_one;
mod sandbox;
mod screen_lies;
mod scripted_agent;
mod spawn;
mod stream;
mod trust;
mod ui;
