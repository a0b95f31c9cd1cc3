//! A lane's cost (`cost_usd` in the state file, `docs/state-file.md`): the real Claude Code
//! 2.1.330 against the scripted model server, offline as in `real_agents.rs`, whose token
//! counts are known, priced with a configured `[prices."MODEL"]` entry — so the figure is
//! exact.

use serde_json::json;

use clawpool_tests::{ModelServer, Sandbox, real_agent, seed_claude_home};

use crate::hooks::state_file;
use crate::real_agents::{
    assert_nothing_left, claude_env, finish, lanes_dir, plain_lane, start_lane, write_config,
};

/// The model the lane's Claude Code asks for (the server answers as it), priced by the test.
const MODEL: &str = "claude-cost-test";

#[test]
fn claude_lane_cost_is_its_usage_at_the_configured_price() {
    real_agent("claude");
    let sandbox = Sandbox::new();
    seed_claude_home(
        &sandbox.home(),
        json!({"customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []}}),
    );
    let lane = plain_lane(&sandbox, "priced");
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &json!([{"text": "Nothing to change here."}]),
    );
    let config = write_config(&sandbox, Some(&lanes_dir(&sandbox)), "claude", "");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!(
        "\n[prices.{MODEL:?}]\ninput_per_mtok = 1000.0\noutput_per_mtok = 2000.0\n\
         cache_read_per_mtok = 100.0\ncache_write_per_mtok = 1250.0\nas_of = \"2026-11-01\"\n"
    ));
    std::fs::write(&config, text).expect("config");
    let mut env = claude_env(&sandbox, &server.url());
    env.push(format!("ANTHROPIC_MODEL={MODEL}"));
    let mut run = start_lane(&sandbox, &config, "claude", &lane, &env, "pty");
    let (code, outcome) = finish(&mut run, &lane);
    assert_eq!(code, 0, "{}", run.report());
    assert_eq!(outcome["state"]["status"], "finished", "{}", run.report());

    let state = state_file(&lane);
    let usage = &state["usage"];
    assert_eq!(usage["model"], MODEL, "{state:#}");
    // The server's token counts: 10 input tokens, nothing cached, the reply's output tokens.
    let tokens = &usage["total"];
    assert_eq!(tokens["input"], 10, "{usage}");
    let output = tokens["output"].as_u64().expect("output tokens");
    assert!(output > 0, "{usage}");
    let expected = (10.0 * 1000.0 + output as f64 * 2000.0) / 1e6;
    let cost = state["cost_usd"]
        .as_f64()
        .unwrap_or_else(|| panic!("no cost_usd: {state:#}"));
    assert!(
        (cost - expected).abs() < 1e-12,
        "{cost} != {expected}: {state:#}"
    );
    assert_eq!(state["cost"]["priced_as"], MODEL, "{state:#}");
    assert_eq!(state["cost"]["prices_as_of"], "2026-11-01", "{state:#}");
    drop(run);
    server.stop();
    assert_nothing_left(&sandbox);
}
