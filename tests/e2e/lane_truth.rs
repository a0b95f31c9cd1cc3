//! What clawpool believes about a lane comes from its own record (the registry folder) and its
//! processes, never from files in the worktree the lane's agent writes: a rewritten or deleted
//! `.claw/worker-state.json` is put back and not believed, deleting the lane's `.claw/` changes
//! nothing about how it is driven, and `gc --force` never removes a lane that a spawn prepares
//! or a supervisor runs (issue 25 point 10, issue 27 point 8).

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

const PATIENCE: Duration = Duration::from_secs(30);

/// The agent works forever on uncommitted work, its provider unreachable: the lane is
/// `blocked{provider}` for as long as the test needs.
const BLOCKED: &str = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "write_file", path = "work.txt", content = "uncommitted\n" },
  { do = "provider_down", attempts = 100000, every_ms = 1000 },
]
"#;

/// The agent works forever on uncommitted work.
const HANGING: &str = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "write_file", path = "work.txt", content = "uncommitted\n" },
  { do = "hang" },
]
"#;

const ALPHA: &str = r#"{"name": "alpha", "agent": "scripted", "prompt": "do alpha"}"#;

fn run_json(s: &Setup, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = s
        .sandbox
        .clawpool()
        .args(args)
        .current_dir(&s.repo)
        .output()
        .expect("clawpool runs");
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), doc, stderr(&out))
}

/// `clawpool gc --force --output-format json` on the test's repository.
fn gc_force(s: &Setup) -> (Option<i32>, Value, String) {
    let repo = s.repo.to_str().expect("utf-8 path");
    run_json(
        s,
        &["gc", "--force", "--output-format", "json", "--repo", repo],
    )
}

fn shown_status(s: &Setup) -> (String, String) {
    let (_, state, err) = run_json(s, &["state", "alpha", "--output-format", "json"]);
    let (_, board, _) = run_json(
        s,
        &[
            "board",
            "--output-format",
            "json",
            "--repo",
            s.repo.to_str().expect("utf-8 path"),
        ],
    );
    (
        state["lane_status"].as_str().unwrap_or(&err).to_owned(),
        board["lanes"][0]["lane_status"]
            .as_str()
            .unwrap_or("none")
            .to_owned(),
    )
}

fn publication(lane: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(lane.join(".claw/worker-state.json")).expect("publication"),
    )
    .expect("publication JSON")
}

#[test]
fn a_state_file_the_agent_rewrites_is_put_back_and_never_believed() {
    let s = setup();
    let mut run = s.spawn_until_running(BLOCKED, ALPHA);
    run.wait_for(
        "blocked",
        PATIENCE,
        |e| e["kind"] == "lane.blocked",
        String::new,
    );
    // The policy's wait for the provider is the last thing that happens while it stays down:
    // from then on, nothing the supervisor writes hides the forgery.
    let waiting = run.wait_for(
        "the wait for the provider",
        PATIENCE,
        |e| e["kind"] == "lane.recovery.running",
        String::new,
    );
    // The forgery replaces the file the supervisor wrote for that event, not one before it.
    s.state_files_hold(&waiting);
    let lane = s.lanes_dir().join("alpha");
    // What an agent told to "mark the task done" writes: its lane's state file, finished.
    let mut forged = publication(&lane);
    assert_eq!(forged["lane_status"], "blocked", "{forged}");
    forged["lane_status"] = "finished".into();
    forged["status"] = "finished".into();
    // Written whole (a temporary file renamed over it, as editors write), so that what the
    // supervisor finds is the forgery itself, not a half-written file.
    let forge = |forged: &Value| {
        let temp = lane.join(".claw/forged.tmp");
        std::fs::write(&temp, forged.to_string()).expect("forge");
        std::fs::rename(&temp, lane.join(".claw/worker-state.json")).expect("forge");
    };
    forge(&forged);
    let restored = run.wait_for(
        "the publication put back",
        PATIENCE,
        |e| e["kind"] == "lane.publication_restored",
        String::new,
    );
    assert_eq!(restored["detail"]["found"], "changed", "{restored}");
    assert_eq!(
        restored["detail"]["claimed_status"], "finished",
        "{restored}"
    );
    assert_eq!(publication(&lane)["lane_status"], "blocked");
    assert_eq!(
        shown_status(&s),
        ("blocked".to_owned(), "blocked".to_owned()),
        "state and board show the record"
    );

    // Deleted: put back too. The deletion removes the file written for the event just seen:
    // deleted before that write, the file would be put back by the write itself, with nothing
    // left for the supervisor to find (seen once under load).
    s.state_files_hold(&restored);
    std::fs::remove_file(lane.join(".claw/worker-state.json")).expect("delete");
    let restored = run.wait_for(
        "the publication put back after its deletion",
        PATIENCE,
        |e| e["kind"] == "lane.publication_restored" && e["detail"]["found"] == "removed",
        String::new,
    );
    assert!(
        restored["detail"].get("claimed_status").is_none(),
        "{restored}"
    );
    assert_eq!(publication(&lane)["lane_status"], "blocked");

    // Stopped by a person: not finished. A forgery after the supervisor is gone is not read
    // back by the next spawn, which runs the task again instead of skipping it.
    let (code, _, err) = run_json(&s, &["stop", "alpha"]);
    assert_eq!(code, Some(0), "{err}");
    run.wait_exit(PATIENCE);
    forge(&forged);
    let (_, state, _) = run_json(&s, &["state", "alpha", "--output-format", "json"]);
    assert_ne!(state["lane_status"], "finished", "{state}");
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        "trust_dialog = true\nprompt_log = \".prompts.jsonl\"\n[[prompt]]\nsteps = [{ do = \"write_file\", path = \"out.txt\", content = \"done\\n\" }, { do = \"git_commit\", message = \"lane work\" }]\n",
    )
    .expect("scenario");
    let again = s.spawn(ALPHA, &[]);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{text}\n{}", stderr(&again));
    assert!(!text.contains("skipped"), "{text}");
    assert_eq!(
        std::fs::read_to_string(lane.join("out.txt")).expect("the task was done"),
        "done\n"
    );
}

#[test]
fn a_lanes_claw_folder_deleted_mid_run_changes_nothing_about_how_it_is_driven() {
    let s = setup();
    let mut run = s.spawn_until_running(HANGING, ALPHA);
    let lane = s.lanes_dir().join("alpha");
    // The lane's socket and lock are not the worktree's to delete.
    for file in ["control.sock", "supervisor.lock"] {
        assert!(
            !lane.join(".claw").join(file).exists(),
            "{file} in the worktree"
        );
        assert!(
            s.repo.join(".git/clawpool/lanes/alpha").join(file).exists(),
            "{file} in the registry folder"
        );
    }
    // `.claw` taken away at once (moved out and removed), as an agent may do it.
    let gone = s.sandbox.dir.path().join("claw-gone");
    std::fs::rename(lane.join(".claw"), &gone).expect("mv .claw");
    std::fs::remove_dir_all(&gone).expect("rm -rf");
    run.wait_for(
        "the publication put back",
        PATIENCE,
        |e| e["kind"] == "lane.publication_restored" && e["detail"]["found"] == "removed",
        String::new,
    );
    assert_eq!(
        shown_status(&s),
        ("running".to_owned(), "running".to_owned()),
        "never supervisor_lost under a live supervisor"
    );

    let (code, gc, err) = gc_force(&s);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(gc["lanes"][0]["removed"], false, "{gc}");
    assert!(
        gc["lanes"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("held by a live clawpool")),
        "{gc}"
    );
    assert_eq!(
        std::fs::read_to_string(lane.join("work.txt")).expect("the uncommitted work survives"),
        "uncommitted\n"
    );

    // The control socket still answers: an answer with no question pending is the lane's
    // verdict, not "no running lane".
    let (_, _, err) = run_json(&s, &["answer", "alpha", "--choice", "yes"]);
    assert!(
        !err.contains("lane_not_running") && !err.contains("no running lane"),
        "{err}"
    );
    let (code, _, err) = run_json(&s, &["stop", "alpha"]);
    assert_eq!(code, Some(0), "{err}");
    run.wait_exit(PATIENCE);
}

/// A post-checkout hook that tells the test the worktree is being made (by writing to the
/// FIFO `ready`) and waits for the test's word (read from the FIFO `go`) before it lets git go
/// on: the spawn is held in its preparation for as long as the test needs, with no timing.
fn hold_worktree_creation(repo: &Path, ready: &Path, go: &Path) {
    for fifo in [ready, go] {
        let path = std::ffi::CString::new(fifo.to_str().expect("utf-8 path")).expect("path");
        // SAFETY: mkfifo(3) with a valid NUL-terminated path.
        let rc = unsafe { libc::mkfifo(path.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo {}", fifo.display());
    }
    let hook = repo.join(".git/hooks/post-checkout");
    std::fs::create_dir_all(hook.parent().expect("hooks folder")).expect("hooks folder");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho preparing > '{}'\nread go < '{}'\n",
            ready.display(),
            go.display()
        ),
    )
    .expect("hook");
    let mut permissions = std::fs::metadata(&hook).expect("hook").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&hook, permissions).expect("hook executable");
}

#[test]
fn gc_force_during_a_spawn_never_removes_the_lane_being_prepared() {
    let s = setup();
    let ready = s.sandbox.dir.path().join("ready.fifo");
    let go = s.sandbox.dir.path().join("go.fifo");
    hold_worktree_creation(&s.repo, &ready, &go);
    let packet = s.sandbox.dir.path().join("packet.json");
    std::fs::write(&packet, ALPHA).expect("packet");
    let spawn = s
        .sandbox
        .clawpool()
        .arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("clawpool spawn");
    // Blocks until the hook runs: alpha's worktree is being made.
    let mut line = String::new();
    std::io::BufReader::new(std::fs::File::open(&ready).expect("ready fifo"))
        .read_line(&mut line)
        .expect("the hook's word");
    assert_eq!(line.trim(), "preparing");

    let gc = gc_force(&s);
    // Let the spawn go on before asserting, so that a failure leaves nothing hanging.
    writeln!(std::fs::File::create(&go).expect("go fifo"), "go").expect("the test's word");
    let out = spawn.wait_with_output().expect("spawn ends");

    let (code, gc, err) = gc;
    assert_eq!(code, Some(0), "{err}");
    let alpha = gc["lanes"]
        .as_array()
        .and_then(|lanes| lanes.iter().find(|l| l["lane"] == "alpha"))
        .cloned()
        .unwrap_or_else(|| panic!("alpha judged: {gc}"));
    assert_eq!(alpha["removed"], false, "{gc}");
    assert!(
        alpha["reason"]
            .as_str()
            .is_some_and(|r| r.contains("held by a live clawpool")),
        "{gc}"
    );
    assert!(
        !s.repo.join(".git/clawpool/removed/alpha.json").exists(),
        "no removed marker"
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(s.lanes_dir().join("alpha/out.txt")).expect("alpha's work"),
        "done\n"
    );
}
