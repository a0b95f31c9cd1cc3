//! `clawpool init` (`docs/quickstart.md`): on a fresh HOME with the real Claude Code 2.1.330
//! on `PATH` and a (fake) API key, it finds the agent, its verified version and where its
//! credentials are without printing them, writes the user's configuration trusting the
//! repository's lanes folder, refuses to overwrite it without `--force`, and the command it
//! prints runs a first lane to finished — offline, against the scripted model server, whose
//! address is the one line the test adds to the configuration.

use std::process::Command;

use serde_json::{Value, json};

use clawpool_tests::{ModelServer, Sandbox, agent_path, real_agent, seed_claude_home};

use crate::real_agents::{assert_nothing_left, claude_env, launch_env};

#[test]
fn init_then_its_printed_command_runs_a_claude_lane_to_finished() {
    let claude = real_agent("claude");
    let sandbox = Sandbox::new();
    seed_claude_home(
        &sandbox.home(),
        json!({"customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []}}),
    );
    let repo = clawpool_tests::git_repo(sandbox.dir.path(), "repo");
    let bins = clawpool_tests::workspace_bin("clawpool");
    let path = format!(
        "{}:{}:{}",
        bins.parent().expect("bin folder").display(),
        claude.parent().expect("agent folder").display(),
        agent_path()
    );
    let init = |extra: &[&str]| {
        let mut cmd = sandbox.clawpool();
        cmd.args(["init", "--output-format", "json", "--repo"])
            .arg(&repo)
            .args(extra)
            .env("PATH", &path)
            .env("ANTHROPIC_API_KEY", "sk-ant-fake")
            .stdin(std::process::Stdio::null());
        cmd.output().expect("clawpool init")
    };

    // Without a terminal to ask on, nothing is written without --yes.
    let refused = init(&[]);
    let error: Value = serde_json::from_slice(&refused.stderr).expect("JSON");
    assert_eq!(error["error"]["kind"], "confirmation_needed", "{error}");
    let config = sandbox.home().join(".config/clawpool/config.toml");
    assert!(!config.exists());

    let out = init(&["--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("sk-ant-fake"),
        "a secret printed: {stdout}"
    );
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["config"], config.display().to_string(), "{report:#}");
    let lanes = repo.with_file_name("repo.lanes");
    assert_eq!(report["trusted_root"], lanes.display().to_string());
    let agent = report["agents"]
        .as_array()
        .and_then(|agents| agents.iter().find(|a| a["agent"] == "claude"))
        .unwrap_or_else(|| panic!("claude not found: {report:#}"));
    assert_eq!(agent["version"], "2.1.330", "{agent}");
    assert_eq!(agent["version_verified"], true, "{agent}");
    assert_eq!(
        agent["credentials"],
        "environment variable ANTHROPIC_API_KEY"
    );
    let text = std::fs::read_to_string(&config).expect("the written config");
    assert!(
        text.contains(&format!("{:?}", lanes.display().to_string())),
        "{text}"
    );

    // A second init names the file it will not overwrite.
    let again = init(&["--yes"]);
    assert!(!again.status.success());
    let error: Value = serde_json::from_slice(&again.stderr).expect("JSON");
    assert_eq!(error["error"]["kind"], "config_exists", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&config.display().to_string())),
        "{error}"
    );

    // Offline: the lane's Claude Code talks to the scripted model server.
    let mut server = ModelServer::start(
        &sandbox.dir.path().join("model"),
        &json!([{"text": "Three things: the install, the usage, the license."}]),
    );
    // The lane keeps the PATH init found the agent on.
    let offline: Vec<String> = claude_env(&sandbox, &server.url())
        .into_iter()
        .filter(|var| !var.starts_with("PATH="))
        .collect();
    let offline = launch_env(&offline);
    std::fs::write(
        &config,
        format!("{text}\n[profiles.claude.launch]\n{offline}"),
    )
    .expect("config");
    let command = report["command"].as_str().expect("the printed command");
    assert!(command.starts_with("clawpool spawn "), "{command}");
    let mut spawn = sandbox.clawpool();
    let envs: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> = spawn
        .get_envs()
        .map(|(k, v)| (k.to_owned(), v.map(ToOwned::to_owned)))
        .collect();
    let mut shell = Command::new("sh");
    shell.args(["-c", &format!("exec {command} --output-format json")]);
    for (key, value) in envs {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    shell
        .env("PATH", &path)
        .env("ANTHROPIC_API_KEY", "sk-ant-fake");
    spawn = shell;
    let ran = spawn.output().expect("the printed command");
    assert!(
        ran.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join(".git/clawpool/lanes/first-lane/state.json"))
            .expect("the lane's record"),
    )
    .expect("JSON");
    assert_eq!(state["lane_status"], "finished", "{state:#}");
    assert_eq!(state["agent"], "claude", "{state:#}");
    server.stop();
    assert_nothing_left(&sandbox);
}
