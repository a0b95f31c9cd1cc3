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
/// [`ECHO_SCRIPT`] writing what it read to `got.txt` in its folder instead of its screen.
const ECHO_TO_FILE_SCRIPT: &str = "echo ready; read x; echo got:$x > got.txt; read y; exit 3";

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
        .args(["--", "sh", "-c", ECHO_TO_FILE_SCRIPT])
        .output()
        .expect("clawpool runs");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("ready"), "{}", stdout(&out));
    // What the worker read, from a file: its last output before exiting can be missing under
    // tmux 3.3a (docs/terminals.md).
    assert_eq!(
        std::fs::read_to_string(sandbox.dir.path().join("got.txt")).expect("the worker's file"),
        "got:abc\n"
    );
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

/// The demo's lane log line of `lane` with `kind` whose detail names `text`.
fn logged(text: &str, lane: &str, kind: &str, detail: &str) -> Option<usize> {
    text.lines()
        .position(|l| l.starts_with(&format!("{lane} ")) && l.contains(kind) && l.contains(detail))
}

/// The folder `clawpool: demo repository FOLDER (…)` names on stderr.
fn demo_repository(stderr: &str) -> std::path::PathBuf {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("clawpool: demo repository "))
        .unwrap_or_else(|| panic!("the demo names its repository:\n{stderr}"));
    line.split(" (").next().expect("a path").into()
}

#[test]
fn the_demo_shows_each_lanes_own_work_a_merge_forward_and_an_escalation_then_cleans_up() {
    let sandbox = Sandbox::new();
    // Not a terminal, stdin at its end: the line log and the board, then the demo leaves.
    let out = sandbox
        .clawpool()
        .arg("demo")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("clawpool demo runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Each lane commits its own task's work.
    for (lane, subject) in [
        ("notes", "Write the project notes"),
        ("tests", "Add a test for add()"),
        ("greeting", "Make the greeting friendlier"),
    ] {
        assert!(
            logged(
                &text,
                lane,
                "lane.commit.created",
                &format!("\"subject\":\"{subject}\"")
            )
            .is_some(),
            "{lane} commits {subject:?}:\n{text}"
        );
        assert!(
            text.lines().any(|l| l.starts_with(lane)
                && l.contains("finished")
                && l.contains("merge_ready")),
            "{lane} finished and green on the board:\n{text}"
        );
    }
    // The base gained a fix while greeting worked: merged forward, then verified green.
    let merged = logged(
        &text,
        "greeting",
        "branch.merged_forward",
        "\"outcome\":\"merged\"",
    );
    let verified = logged(&text, "greeting", "lane.verified", "\"result\":\"green\"");
    assert!(
        logged(
            &text,
            "greeting",
            "branch.stale_against_main",
            "Fix the typo in build.sh"
        )
        .is_some(),
        "{text}"
    );
    assert!(
        merged.is_some() && verified.is_some() && merged < verified,
        "merged forward before verified:\n{text}"
    );
    // The trusted lanes' trust dialogs were answered; review, outside the trusted roots, waits
    // for a person with its next action.
    assert!(
        logged(&text, "notes", "lane.trust_resolved", "").is_some(),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("review") && l.contains("blocked{trust_prompt}")),
        "{text}"
    );
    assert!(
        text.contains("next: if you trust the lane's folder: `clawpool trust review`"),
        "{text}"
    );
    assert!(
        logged(&text, "review", "lane.commit.created", "").is_none(),
        "{text}"
    );
    // The repository was there, named, until the demo was left; then it is gone, and so is
    // every process.
    let err = stderr(&out);
    let repo = demo_repository(&err);
    assert!(err.contains("its repository removed"), "{err}");
    assert!(!repo.exists(), "{} is removed on leaving", repo.display());
    assert!(sandbox.leftover_processes().is_empty());
}

#[test]
fn the_demo_in_json_mode_prints_json_documents_only() {
    let sandbox = Sandbox::new();
    let out = sandbox
        .clawpool()
        .args(["demo", "--output-format", "json"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("clawpool demo runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let docs: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    let board = docs.last().expect("the board last");
    let lanes = board["lanes"].as_array().expect("the board's lanes");
    assert_eq!(lanes.len(), 4, "{board}");
    let notices: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each stderr line is JSON"))
        .collect();
    let kinds: Vec<&str> = notices
        .iter()
        .filter_map(|n| n["notice"]["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["demo_repository", "demo_waiting", "demo_left"]);
    assert!(sandbox.leftover_processes().is_empty());
}

#[test]
fn the_demos_tmux_attach_commands_are_real_and_work_while_it_runs() {
    use std::io::{BufRead, BufReader};
    let sandbox = Sandbox::new();
    let mut demo = sandbox
        .clawpool()
        .args(["demo", "--transport", "tmux"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("clawpool demo starts");
    let mut lines = BufReader::new(demo.stderr.take().expect("stderr")).lines();
    let mut attach = std::collections::BTreeMap::new();
    let mut repo = None;
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        if line.starts_with("clawpool: demo repository ") {
            repo = Some(demo_repository(&line));
        }
        if let Some((lane, command)) = line
            .strip_prefix("clawpool: lane ")
            .and_then(|rest| rest.split_once(": "))
        {
            attach.insert(lane.to_owned(), command.to_owned());
        }
        if line.contains("the demo's lanes wait in") {
            break;
        }
    }
    assert_eq!(
        attach.keys().collect::<Vec<_>>(),
        ["greeting", "notes", "review", "tests"]
    );
    // The printed command names a real session, there while the demo runs: the waiting lane's
    // shows its trust dialog.
    let words: Vec<&str> = attach["review"].split_whitespace().collect();
    assert!(
        matches!(
            words.as_slice(),
            ["tmux", "-L", _, "attach", "-t", "lane-review"]
        ),
        "{words:?}"
    );
    let capture = sandbox
        .tmux()
        .args(["-L", words[2], "capture-pane", "-p", "-t", "lane-review"])
        .output()
        .expect("tmux capture-pane");
    assert!(capture.status.success(), "{}", stderr(&capture));
    assert!(stdout(&capture).contains("trust"), "{}", stdout(&capture));
    let repo = repo.expect("the repository named");
    assert!(repo.join(".git").is_dir());

    // The end of stdin leaves: the lanes stop, the server and the repository go.
    drop(demo.stdin.take());
    for _ in lines.by_ref() {}
    assert!(demo.wait().expect("the demo ends").success());
    assert!(!repo.exists());
    assert!(
        sandbox.leftover_tmux_sockets().is_empty(),
        "{:?}",
        sandbox.leftover_tmux_sockets()
    );
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
