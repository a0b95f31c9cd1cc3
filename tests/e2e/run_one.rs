//! `clawpool run-one` and `clawpool demo`: exit codes, snapshots, JSON output, bad input, and
//! nothing left behind.

use std::process::Output;

use clawpool_tests::Sandbox;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const ECHO_SCRIPT: &str = "echo ready; read x; echo got:$x; read y; exit 3";

#[test]
fn run_one_in_a_pty_scripts_input_and_exits_with_the_workers_code() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .clawpool()
        .args(["run-one", "--snapshots", "--cwd"])
        .arg(sandbox.dir.path())
        .args(["--send-text", "abc", "--keys", "Enter", "--keys", "Enter"])
        .args(["--", "sh", "-c", ECHO_SCRIPT])
        .output()
        .expect("clawpool runs");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("got:abc"), "{}", stdout(&out));
    assert!(stderr(&out).contains("worker ended: exit code 3"));
    assert!(sandbox.leftover_processes().is_empty());
}

#[test]
fn run_one_in_tmux_leaves_no_server_or_process_behind() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .clawpool()
        .args(["run-one", "--transport", "tmux", "--snapshots", "--cwd"])
        .arg(sandbox.dir.path())
        .args(["--send-text", "abc", "--keys", "Enter,Enter"])
        .args(["--", "sh", "-c", ECHO_SCRIPT])
        .output()
        .expect("clawpool runs");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("got:abc"), "{}", stdout(&out));
    assert!(stderr(&out).contains("tmux -L clawpool-run-one attach -t run-"));
    assert_eq!(
        sandbox.leftover_processes_after(std::time::Duration::from_secs(5)),
        Vec::<u32>::new()
    );
    assert_eq!(
        sandbox.leftover_tmux_sockets(),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn json_snapshots_are_one_document_per_line() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .clawpool()
        .args(["run-one", "--snapshots", "--output-format", "json", "--cwd"])
        .arg(sandbox.dir.path())
        .args(["--", "sh", "-c", "printf '\\033]0;t\\007hello'; exit 0"])
        .output()
        .expect("clawpool runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let docs: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    assert!(
        docs.iter()
            .any(|d| d["rows"][0] == "hello" && d["title"] == "t")
    );
    assert_eq!(docs.last().expect("an exit document")["exit"]["code"], 0);
}

#[test]
fn the_demo_runs_a_batch_of_lanes_and_ends_with_the_board() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .clawpool()
        .arg("demo")
        .output()
        .expect("clawpool demo runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for lane in ["docs", "tests", "cleanup"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(lane) && l.contains("finished") && l.contains("+1 clean")),
            "{lane} on the board:\n{text}"
        );
    }
    assert!(sandbox.leftover_processes().is_empty());
}

/// Runs clawpool expecting bad input: exit 2 and one JSON error document naming the thing.
fn json_error(sandbox: &Sandbox, args: &[&str]) -> serde_json::Value {
    let out = sandbox
        .clawpool()
        .arg("run-one")
        .args(["--output-format", "json"])
        .args(args)
        .output()
        .expect("clawpool runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stdout(&out).is_empty(),
        "nothing on stdout: {}",
        stdout(&out)
    );
    let err: serde_json::Value =
        serde_json::from_str(stderr(&out).trim()).expect("one JSON document on stderr");
    assert!(sandbox.leftover_processes().is_empty());
    err["error"].clone()
}

#[test]
fn bad_input_is_a_clear_error_that_starts_nothing() {
    let sandbox = Sandbox::new();
    let cwd = sandbox
        .dir
        .path()
        .to_str()
        .expect("utf-8 temp path")
        .to_owned();

    let err = json_error(&sandbox, &["--cwd", &cwd, "--", "no-such-agent-xyz"]);
    assert_eq!(err["kind"], "program_not_found");
    assert!(
        err["message"]
            .as_str()
            .unwrap_or("")
            .contains("no-such-agent-xyz")
    );

    let err = json_error(&sandbox, &["--cwd", "/no/such/dir", "--", "sh"]);
    assert_eq!(err["kind"], "cwd_not_found");
    assert!(
        err["message"]
            .as_str()
            .unwrap_or("")
            .contains("/no/such/dir")
    );

    let err = json_error(
        &sandbox,
        &["--cwd", &cwd, "--keys", "Enter,F13", "--", "sh"],
    );
    assert_eq!(err["kind"], "unknown_key");
    assert!(err["message"].as_str().unwrap_or("").contains("F13"));

    let out = sandbox
        .clawpool()
        .env("PATH", "/nonexistent")
        .args([
            "run-one",
            "--transport",
            "tmux",
            "--output-format",
            "json",
            "--cwd",
            &cwd,
        ])
        .args(["--", "/bin/sh", "-c", "true"])
        .output()
        .expect("clawpool runs");
    assert_eq!(out.status.code(), Some(2));
    let err: serde_json::Value = serde_json::from_str(stderr(&out).trim()).expect("JSON error");
    assert_eq!(err["error"]["kind"], "tmux_not_installed");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("tmux")
    );
}

#[test]
fn text_errors_name_the_thing_and_exit_non_zero() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .clawpool()
        .args(["run-one", "--cwd", "/no/such/dir", "--", "sh"])
        .output()
        .expect("clawpool runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim(),
        "clawpool: error: working directory does not exist: /no/such/dir"
    );
}
