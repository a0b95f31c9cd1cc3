//! The scripted agent driven through both transports the way the supervisor will drive a
//! real agent: answer its trust dialog, type a prompt, see it work, count deliveries.

use std::path::Path;
use std::time::Duration;

use clawpool_pty::{Input, Key, ScreenSnapshot, SpawnSpec, TmuxConfig, TmuxServer, Worker};
use clawpool_tests::{Sandbox, git_log, git_repo, workspace_bin};

const PATIENCE: Duration = Duration::from_secs(20);

async fn until(worker: &Worker, what: &str, pred: impl Fn(&ScreenSnapshot) -> bool) {
    let mut changes = worker.changes();
    let wait = async {
        while !pred(&worker.snapshot()) {
            assert!(changes.changed().await, "output ended before {what}");
        }
    };
    if tokio::time::timeout(PATIENCE, wait).await.is_err() {
        panic!(
            "timed out waiting for {what}:\n{}",
            worker.snapshot().text()
        );
    }
}

async fn shows(worker: &Worker, needle: &str) {
    until(worker, needle, |s| s.contains(needle)).await;
}

fn prompt_log(repo: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(repo.join(".prompts.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("prompt log lines are JSON"))
        .collect()
}

fn agent_spec(repo: &Path, scenario: &str) -> SpawnSpec {
    let scenario_path = repo.join(".git/scenario.toml");
    std::fs::write(&scenario_path, scenario).expect("write scenario");
    SpawnSpec::new(workspace_bin("clawpool-scripted-agent"), repo).args([
        std::ffi::OsStr::new("--scenario"),
        scenario_path.as_os_str(),
    ])
}

const TASK_SCENARIO: &str = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"

[[prompt]]
steps = [
  { do = "write_file", path = "src/fix.txt", content = "fixed\n" },
  { do = "git_commit", message = "Fix it" },
]
"#;

/// Trust dialog → Down, Enter → ready → prompt → working → done, with one delivery logged.
async fn drive_a_task(worker: &Worker, repo: &Path) {
    shows(worker, "Do you trust the files in this folder?").await;
    assert!(
        worker.snapshot().contains("❯ 1. No, exit"),
        "the unsafe choice is the default"
    );
    worker.send(&Input::Key(Key::Down)).await.expect("down");
    shows(worker, "❯ 2. Yes, I trust this folder").await;
    worker.send(&Input::Key(Key::Enter)).await.expect("enter");
    shows(worker, "? for shortcuts").await;
    worker
        .send(&Input::Text("fix the bug".into()))
        .await
        .expect("type");
    until(worker, "draft in the input line", |s| {
        s.rows.iter().any(|r| r == "❯ fix the bug")
    })
    .await;
    worker.send(&Input::Key(Key::Enter)).await.expect("submit");
    shows(worker, "Done in").await;
    assert_eq!(
        std::fs::read_to_string(repo.join("src/fix.txt")).expect("file written"),
        "fixed\n"
    );
    assert_eq!(git_log(repo)[0], "Fix it");
    let log = prompt_log(repo);
    let prompts: Vec<&serde_json::Value> = log.iter().filter(|e| e["event"] == "prompt").collect();
    assert_eq!(prompts.len(), 1, "{log:?}");
    assert_eq!(prompts[0]["text"], "fix the bug");
}

#[tokio::test]
async fn a_task_runs_end_to_end_in_a_pty() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let worker = Worker::spawn_pty(agent_spec(&repo, TASK_SCENARIO))
        .await
        .expect("agent starts");
    drive_a_task(&worker, &repo).await;
    worker.send(&Input::Key(Key::CtrlC)).await.expect("ctrl-c");
    assert_eq!(worker.wait().await.code(), 130);
}

#[tokio::test]
async fn a_task_runs_end_to_end_in_tmux() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let server = TmuxServer::connect(TmuxConfig {
        tmpdir: Some(sandbox.tmux_dir()),
        ..TmuxConfig::new("clawpool-e2e-task")
    })
    .await
    .expect("tmux server");
    let worker = server
        .spawn("lane-1", agent_spec(&repo, TASK_SCENARIO))
        .await
        .expect("agent starts");
    drive_a_task(&worker, &repo).await;
    worker.send(&Input::Key(Key::CtrlC)).await.expect("ctrl-c");
    assert_eq!(worker.wait().await.code(), 130);
    server.kill_server().await.expect("kill server");
    assert!(sandbox.leftover_tmux_sockets().is_empty());
}

#[tokio::test]
async fn a_bare_enter_on_the_trust_dialog_quits_the_agent() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let worker = Worker::spawn_pty(agent_spec(&repo, TASK_SCENARIO))
        .await
        .expect("agent starts");
    shows(&worker, "Do you trust the files in this folder?").await;
    worker.send(&Input::Key(Key::Enter)).await.expect("enter");
    assert_eq!(worker.wait().await.code(), 1);
    assert!(
        prompt_log(&repo)
            .iter()
            .any(|e| e["event"] == "trust" && e["choice"] == "no")
    );
}

#[tokio::test]
async fn a_prompt_delivered_into_a_shell_shows_shell_errors() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let scenario = "[[prompt]]\nsteps = [{ do = \"shell_error\" }]\n";
    let worker = Worker::spawn_pty(agent_spec(&repo, scenario).args(["--prompt", "fix the bug"]))
        .await
        .expect("agent starts");
    shows(&worker, "bash: fix: command not found").await;
    until(&worker, "a shell prompt", |s| {
        s.rows.iter().any(|r| r.trim_end() == "$")
    })
    .await;
    worker
        .send(&Input::Text("echo from-shell".into()))
        .await
        .expect("type");
    worker.send(&Input::Key(Key::Enter)).await.expect("enter");
    until(&worker, "the shell's echo", |s| {
        s.rows.iter().any(|r| r == "from-shell")
    })
    .await;
    worker.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_crash_step_exits_with_its_code() {
    let sandbox = Sandbox::new();
    let repo = git_repo(sandbox.dir.path(), "repo");
    let scenario = "[[prompt]]\nsteps = [{ do = \"crash\", code = 42 }]\n";
    let worker = Worker::spawn_pty(agent_spec(&repo, scenario).args(["--prompt", "go"]))
        .await
        .expect("agent starts");
    assert_eq!(
        tokio::time::timeout(PATIENCE, worker.wait())
            .await
            .expect("exits")
            .code(),
        42
    );
}
