//! Branch freshness before blame, on real repositories: merge-forward before broad tests,
//! conflicts aborted back to the previous commit, dirty worktrees left alone, hung test
//! commands, and a paused rebase, a detached HEAD and a branch named `feat.ui/x` reported as
//! they are.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// Runs git in `dir`, asserting it succeeds unless `may_fail`; returns stdout.
fn git(dir: &Path, args: &[&str], may_fail: bool) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        may_fail || out.status.success(),
        "git {args:?}: {}",
        stderr(&out)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Commits `files` on the repository's main branch, in its main worktree.
fn commit_on_main(s: &Setup, files: &[(&str, &str)], subject: &str) -> String {
    for (path, content) in files {
        std::fs::write(s.repo.join(path), content).expect("write");
        git(&s.repo, &["add", path], false);
    }
    git(&s.repo, &["commit", "-qm", subject], false);
    git(&s.repo, &["rev-parse", "HEAD"], false)
}

/// `clawpool ARGS…` run from the repository (so lanes are found by name).
fn clawpool(s: &Setup, args: &[&str]) -> Output {
    s.sandbox
        .clawpool()
        .args(args)
        .current_dir(&s.repo)
        .output()
        .expect("clawpool")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

fn state(s: &Setup, lane: &str) -> Value {
    clawpool_tests::published_state(&s.lanes_dir().join(lane))
}

fn events(s: &Setup, lane: &str) -> Vec<Value> {
    std::fs::read_to_string(
        s.repo
            .join(format!(".git/clawpool/lanes/{lane}/events.jsonl")),
    )
    .expect("events")
    .lines()
    .filter_map(|l| serde_json::from_str(l).ok())
    .collect()
}

fn find<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {events:#?}"))
}

/// Spawns `packet` (one lane whose agent works 1.5 s, then commits `out.txt`); while the lane
/// works, main gets `fix.txt` (the fix its tests need). Waits for the batch to end with exit 0
/// and returns the fix's sha.
fn spawn_while_main_gets_the_fix(s: &Setup, packet: &str) -> String {
    let slow = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "sleep", ms = 1500 },
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
"#;
    let mut run = s.spawn_until_running(slow, packet);
    let fix = commit_on_main(s, &[("fix.txt", "fixed\n")], "the fix");
    let status = run.wait_exit(std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", run.report());
    fix
}

/// Spawns `packet` and waits for the batch to end; asserts the exit code.
fn spawn_to_end(s: &Setup, packet: &str, code: i32) {
    let out = s.spawn(packet, &["--output-format", "json"]);
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
}

#[test]
fn a_stale_lane_gets_the_fix_by_merge_forward_before_verification_and_goes_green() {
    let s = setup();
    let fix = spawn_while_main_gets_the_fix(
        &s,
        r#"{"name": "fix", "agent": "scripted", "prompt": "work",
            "acceptance_tests": ["test -f fix.txt"], "verify_on_finish": "package"}"#,
    );

    let events = events(&s, "fix");
    let stale = find(&events, "branch.stale_against_main");
    assert_eq!(stale["detail"]["behind"], 1);
    assert_eq!(stale["detail"]["missing"][0]["subject"], "the fix");
    let merged = find(&events, "branch.merged_forward");
    assert_eq!(merged["detail"]["base_sha"], fix.as_str());
    assert_ne!(merged["detail"]["old_head"], merged["detail"]["new_head"]);
    assert_eq!(find(&events, "lane.green")["detail"]["level"], "package");
    // The base moving makes the lane stale as soon as the repository's watch sees it (while
    // the agent works, or at the verification after it finished, whichever look comes first);
    // the base is brought in once the lane finished.
    clawpool_tests::assert_kinds_in_order(&events, &["lane.finished", "branch.merged_forward"]);
    // Then the default policy takes the finished, fresh lane on up to merge_ready, and
    // closes it out.
    clawpool_tests::assert_kinds_in_order(
        &events,
        &[
            "branch.stale_against_main",
            "branch.merged_forward",
            "lane.green",
            "lane.verified",
            "lane.green",
            "lane.merge.ready",
            "lane.closed_out",
        ],
    );
    assert_eq!(
        find(&events, "lane.closed_out")["detail"]["rule"],
        "close-out-merge-ready"
    );
    let lane = s.lanes_dir().join("fix");
    assert!(lane.join("fix.txt").exists() && lane.join("out.txt").exists());
    let doc = state(&s, "fix");
    assert_eq!(doc["status"], "finished");
    assert_eq!(doc["green_level"], "merge_ready");
    assert_eq!(doc["freshness"]["state"], "fresh");
    // The last verification is the policy's, on the branch the first one had merged forward.
    assert_eq!(doc["verification"]["level"], "merge_ready");
    assert_eq!(doc["verification"]["result"], "green");
    assert_eq!(doc["verification"]["commands"][0]["exit_code"], 0);
    // Nothing touched the main worktree.
    assert_eq!(git(&s.repo, &["rev-parse", "HEAD"], false), fix);
    assert!(git(&s.repo, &["status", "--porcelain"], false).is_empty());
}

#[test]
fn a_conflict_during_package_verification_blocks_the_lane_and_runs_no_broad_command() {
    let s = setup();
    let ran = s.sandbox.dir.path().join("ran.log");
    spawn_to_end(
        &s,
        &format!(
            r#"{{"name": "clash", "agent": "scripted", "prompt": "work",
                "verify_commands": {{"package": ["echo ran >> {}", "test -f fix.txt"]}}}}"#,
            ran.display()
        ),
        0,
    );
    let lane = s.lanes_dir().join("clash");
    let head = git(&lane, &["rev-parse", "HEAD"], false);
    assert_eq!(state(&s, "clash")["status"], "finished");
    // Main changes the file the lane wrote (a conflict) and adds the fix its tests need.
    commit_on_main(
        &s,
        &[("out.txt", "other\n"), ("fix.txt", "fixed\n")],
        "main changes out.txt",
    );

    let verify_package = || {
        clawpool(
            &s,
            &[
                "verify",
                "clash",
                "--level",
                "package",
                "--output-format",
                "json",
            ],
        )
    };
    let out = verify_package();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let verified = json(&out);
    let verification = &verified["verification"];
    assert_eq!(verification["result"], "blocked", "{verified}");
    assert_eq!(verified["green_level"], Value::Null);
    assert_eq!(verification["merge"]["outcome"], "conflict");
    assert_eq!(
        verification["merge"]["paths"],
        serde_json::json!(["out.txt"])
    );
    assert_eq!(verification["merge"]["head"], head.as_str());
    assert_eq!(verification["freshness"]["state"], "stale");
    assert_eq!(verification["commands"], serde_json::json!([]));
    let reason = verification["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("conflicts in out.txt"), "{reason}");
    assert!(!ran.exists(), "no broad command runs on a stale branch");

    // The worktree is exactly where it was: same commit, same branch, nothing in progress.
    assert_eq!(git(&lane, &["rev-parse", "HEAD"], false), head);
    assert_eq!(
        git(&lane, &["symbolic-ref", "--short", "HEAD"], false),
        "lanes/clash"
    );
    assert!(git(&lane, &["status", "--porcelain"], false).is_empty());
    assert_eq!(
        std::fs::read_to_string(lane.join("out.txt")).expect("out"),
        "done\n"
    );

    let doc = state(&s, "clash");
    assert_eq!(doc["lane_status"], "blocked");
    assert_eq!(doc["blocked"]["subphase"], "branch_freshness");
    assert!(
        doc["failure"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("out.txt"),
        "{doc}"
    );
    assert_eq!(doc["freshness"]["state"], "stale");
    assert_eq!(doc["verification"]["result"], "blocked");
    let events = events(&s, "clash");
    assert_eq!(
        find(&events, "branch.merge_conflict")["detail"]["paths"],
        serde_json::json!(["out.txt"])
    );
    let blocked = find(&events, "lane.verify_blocked");
    assert_eq!(blocked["detail"]["level"], "package");
    assert_eq!(
        blocked["detail"]["merge"]["paths"],
        serde_json::json!(["out.txt"])
    );
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "lane.green" || e["kind"] == "lane.red"),
        "nothing ran, so nothing is green or red"
    );
    let verified_event = find(&events, "lane.verified");
    assert_eq!(verified_event["to"]["subphase"], "branch_freshness");

    // `clawpool merge-forward` meets the same conflict and aborts it the same way.
    let out = clawpool(&s, &["merge-forward", "clash", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let merge = json(&out);
    assert_eq!(merge["outcome"], "conflict");
    assert_eq!(merge["paths"], serde_json::json!(["out.txt"]));
    assert_eq!(git(&lane, &["rev-parse", "HEAD"], false), head);
    assert!(git(&lane, &["status", "--porcelain"], false).is_empty());

    // Verifying again blocks again; the lane did not *become* stale again, so it is not
    // reported stale again.
    let out = verify_package();
    assert_eq!(json(&out)["verification"]["result"], "blocked");
    let events = self::events(&s, "clash");
    let stale_reports = events
        .iter()
        .filter(|e| e["kind"] == "branch.stale_against_main")
        .count();
    assert_eq!(stale_reports, 1, "{events:#?}");
    assert!(!ran.exists());

    // Resolved by hand, the lane verifies green and is finished again.
    git(&lane, &["merge", "-q", "--no-edit", "main"], true);
    std::fs::write(lane.join("out.txt"), "resolved\n").expect("resolve");
    git(&lane, &["add", "out.txt"], false);
    git(&lane, &["commit", "-q", "--no-edit"], false);
    let out = verify_package();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let verified = json(&out);
    assert_eq!(verified["verification"]["result"], "green");
    assert_eq!(verified["green_level"], "package");
    assert!(ran.exists());
    let doc = state(&s, "clash");
    assert_eq!(doc["status"], "finished");
    assert_eq!(doc["green_level"], "package");
    let green = find(&self::events(&s, "clash"), "lane.green").clone();
    assert_eq!(green["detail"]["stale"], false);
    assert_eq!(green["detail"]["freshness"], "fresh");
}

#[test]
fn red_on_a_fresh_branch_is_a_regression_stale_red_only_on_a_stale_one_and_merge_ready_is_announced()
 {
    let s = setup();
    // `warn`: the lane is verified as it is, stale or not, and told apart.
    spawn_to_end(
        &s,
        r#"{"name": "warned", "agent": "scripted", "prompt": "work", "merge_policy": "warn",
            "verify_commands": {"package": ["test -f fix.txt"], "workspace": ["test -f out.txt"],
                                "merge_ready": ["test -f out.txt"]}}"#,
        0,
    );
    let lane = s.lanes_dir().join("warned");
    let head = git(&lane, &["rev-parse", "HEAD"], false);
    let verify = |level: &str| {
        let out = clawpool(
            &s,
            &[
                "verify",
                "warned",
                "--level",
                level,
                "--output-format",
                "json",
            ],
        );
        (out.status.code(), json(&out))
    };
    let count = |kind: &str| {
        events(&s, "warned")
            .iter()
            .filter(|e| e["kind"] == kind)
            .count()
    };

    // Finished on a fresh branch, the lane was verified by the default policy up to
    // merge_ready (every command passes), announced merge-ready, and closed out.
    let events_now = events(&s, "warned");
    let ready = find(&events_now, "lane.merge.ready");
    assert_eq!(ready["detail"]["head"], head.as_str());
    assert_eq!(
        find(&events_now, "lane.green")["detail"]["level"],
        "merge_ready"
    );
    assert_eq!(
        find(&events_now, "lane.closed_out")["detail"]["rule"],
        "close-out-merge-ready"
    );
    let doc = state(&s, "warned");
    assert_eq!(doc["green_level"], "merge_ready");
    assert_eq!(doc["status"], "finished");

    // Fresh branch, a real failing command: a regression (`lane.red`), not `stale_red`.
    let (code, verified) = verify("package");
    assert_eq!(code, Some(1));
    assert_eq!(verified["verification"]["result"], "red", "{verified}");
    assert_eq!(verified["verification"]["class"], "test");
    assert_eq!(verified["verification"]["freshness"]["state"], "fresh");
    let events_now = events(&s, "warned");
    let red = find(&events_now, "lane.red");
    assert_eq!(red["detail"]["level"], "package");
    assert_eq!(red["detail"]["class"], "test");
    assert_eq!(red["detail"]["failed"][0]["command"], "test -f fix.txt");
    assert_eq!(red["detail"]["failed"][0]["exit_code"], 1);
    assert_eq!(count("lane.stale_red"), 0);
    let doc = state(&s, "warned");
    assert_eq!(doc["status"], "failed");
    assert_eq!(doc["failure"]["class"], "test");

    // Main gets the fix; `warn` does not bring it in: the same red is now `stale_red`.
    commit_on_main(&s, &[("fix.txt", "fixed\n")], "the fix");
    let (code, verified) = verify("package");
    assert_eq!(code, Some(1));
    assert_eq!(
        verified["verification"]["result"], "stale_red",
        "{verified}"
    );
    assert_eq!(verified["verification"]["merge"]["outcome"], "not_applied");
    let events_now = events(&s, "warned");
    let stale_red = find(&events_now, "lane.stale_red");
    assert_eq!(stale_red["detail"]["behind"], 1);
    assert_eq!(stale_red["detail"]["missing"][0]["subject"], "the fix");
    assert_eq!(
        count("lane.red"),
        1,
        "a red on a stale branch is not a regression"
    );
    let doc = state(&s, "warned");
    assert_eq!(doc["lane_status"], "blocked");
    assert_eq!(doc["blocked"]["subphase"], "branch_freshness");
    assert_eq!(git(&lane, &["rev-parse", "HEAD"], false), head);

    // A green on the stale branch says so, and never reaches merge_ready.
    let (code, verified) = verify("workspace");
    assert_eq!(code, Some(0), "{verified}");
    assert_eq!(verified["green_level"], "workspace");
    assert!(
        verified["verification"]["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("stale: 1 commit of main missing from the lane's branch"),
        "{verified}"
    );
    let events_now = events(&s, "warned");
    let green = events_now
        .iter()
        .rev()
        .find(|e| e["kind"] == "lane.green")
        .expect("lane.green");
    assert_eq!(green["detail"]["stale"], true);
    assert_eq!(green["detail"]["missing"][0]["subject"], "the fix");
    let (code, verified) = verify("merge_ready");
    assert_eq!(code, Some(0), "{verified}");
    assert_eq!(verified["green_level"], "workspace");
    assert_eq!(
        count("lane.merge.ready"),
        1,
        "merge-ready only on the fresh branch"
    );
    assert_eq!(git(&lane, &["rev-parse", "HEAD"], false), head);
}

#[test]
fn the_freshness_watch_reports_a_running_lane_going_stale() {
    let s = setup();
    let config = std::fs::read_to_string(&s.config).expect("config");
    std::fs::write(
        &s.config,
        config.replace("[handshake]\n", "[handshake]\nfreshness_check_secs = 1\n"),
    )
    .expect("config");
    // The agent works until it is stopped: main moves while the lane is running.
    let mut run = s.spawn_until_running(
        "trust_dialog = true\n[[prompt]]\nsteps = [{ do = \"hang\" }]\n",
        r#"{"name": "watched", "agent": "scripted", "prompt": "work"}"#,
    );
    let fix = commit_on_main(&s, &[("fix.txt", "fixed\n")], "the fix");
    let stale = run.wait_for(
        "branch.stale_against_main",
        std::time::Duration::from_secs(30),
        |e| e["kind"] == "branch.stale_against_main",
        String::new,
    );
    assert_eq!(stale["detail"]["behind"], 1);
    assert_eq!(stale["detail"]["base_sha"], fix.as_str());
    assert_eq!(stale["detail"]["missing"][0]["subject"], "the fix");
    let kinds: Vec<Value> = run.events();
    assert!(
        !kinds
            .iter()
            .any(|e| e["kind"] == "lane.finished" || e["kind"] == "lane.failed"),
        "the lane was still running: {kinds:#?}"
    );
    // The watch keeps checking; the lane stays stale and is not reported stale again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let checked_at = loop {
        let doc = state(&s, "watched");
        if doc["freshness"]["state"] == "stale"
            && doc["freshness"]["checked_at"].as_u64()
                >= stale["at_ms"].as_u64().map(|ms| ms / 1000 + 2)
        {
            break doc["freshness"]["checked_at"].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no later freshness check: {doc}\n{}",
            run.report()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let reports = events(&s, "watched")
        .iter()
        .filter(|e| e["kind"] == "branch.stale_against_main")
        .count();
    assert_eq!(
        reports, 1,
        "checked again at {checked_at} and reported once"
    );
    assert!(
        git(
            &s.lanes_dir().join("watched"),
            &["status", "--porcelain"],
            false
        )
        .is_empty()
    );
}

#[test]
fn a_dirty_worktree_is_never_changed() {
    let s = setup();
    spawn_to_end(
        &s,
        r#"{"name": "dirty", "agent": "scripted", "prompt": "work",
            "acceptance_tests": ["true"]}"#,
        0,
    );
    let lane = s.lanes_dir().join("dirty");
    let head = git(&lane, &["rev-parse", "HEAD"], false);
    commit_on_main(&s, &[("fix.txt", "fixed\n")], "the fix");
    std::fs::write(lane.join("out.txt"), "edited, not committed\n").expect("edit");
    std::fs::write(lane.join("notes.txt"), "untracked\n").expect("untracked");
    let before = git(&lane, &["status", "--porcelain"], false);

    let out = clawpool(&s, &["merge-forward", "dirty", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let merge = json(&out);
    assert_eq!(merge["outcome"], "dirty");
    // The refusal holds the lane, with the reason, in the state file and as an event.
    let doc = state(&s, "dirty");
    assert_eq!(doc["lane_status"], "blocked", "{doc}");
    assert_eq!(doc["blocked"]["subphase"], "branch_freshness");
    let detail = doc["failure"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("uncommitted") && detail.contains("notes.txt"),
        "{doc}"
    );
    let events = events(&s, "dirty");
    let blocked = find(&events, "lane.branch_blocked");
    assert_eq!(blocked["from"]["status"], "finished");
    assert_eq!(blocked["to"]["subphase"], "branch_freshness");
    assert_eq!(blocked["detail"]["outcome"], "dirty");
    let out = clawpool(
        &s,
        &[
            "verify",
            "dirty",
            "--level",
            "package",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json(&out)["verification"]["result"], "blocked");
    let doc = state(&s, "dirty");
    assert_eq!(doc["blocked"]["subphase"], "branch_freshness");
    assert!(
        doc["verification"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("uncommitted"),
        "{doc}"
    );

    assert_eq!(git(&lane, &["rev-parse", "HEAD"], false), head);
    assert_eq!(git(&lane, &["status", "--porcelain"], false), before);
    assert_eq!(
        std::fs::read_to_string(lane.join("out.txt")).expect("out"),
        "edited, not committed\n"
    );
    assert_eq!(
        std::fs::read_to_string(lane.join("notes.txt")).expect("notes"),
        "untracked\n"
    );
    assert!(
        git(&lane, &["stash", "list"], false).is_empty(),
        "nothing stashed"
    );
}

#[test]
fn a_hung_command_is_test_hung_and_the_next_command_still_runs() {
    let s = setup();
    spawn_to_end(
        &s,
        r#"{"name": "slow", "agent": "scripted", "prompt": "work", "verify_timeout_secs": 1,
            "verify_commands": {"targeted": ["sleep 30", "echo second > second.txt"]}}"#,
        0,
    );
    let out = clawpool(&s, &["verify", "slow", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let verified = json(&out);
    let commands = &verified["verification"]["commands"];
    assert_eq!(commands[0]["outcome"], "hung");
    assert!(commands[0]["duration_ms"].as_u64() >= Some(1000));
    assert_eq!(commands[1]["outcome"], "passed");
    assert!(s.lanes_dir().join("slow/second.txt").exists());
    assert_eq!(verified["verification"]["result"], "hung");
    assert_eq!(verified["verification"]["class"], "test_hang");
    let events = events(&s, "slow");
    assert_eq!(find(&events, "test.hung")["detail"]["command"], "sleep 30");
    let doc = state(&s, "slow");
    assert_eq!(doc["blocked"]["subphase"], "test_hang");
    let log = commands[1]["log"].as_str().expect("log path");
    assert!(Path::new(log).is_file());
}

#[test]
fn a_paused_rebase_a_detached_head_and_a_dotted_branch_are_reported_as_they_are() {
    let s = setup();
    spawn_to_end(
        &s,
        r#"{"name": "ui", "agent": "scripted", "prompt": "work", "branch": "feat.ui/x"}"#,
        0,
    );
    let doc = state(&s, "ui");
    assert_eq!(doc["branch"], "feat.ui/x");
    assert_eq!(doc["head"]["kind"], "branch");
    assert_eq!(doc["head"]["name"], "feat.ui/x");
    assert_eq!(doc["freshness"]["state"], "fresh");

    let lane = s.lanes_dir().join("ui");
    commit_on_main(&s, &[("out.txt", "other\n")], "main changes out.txt");
    git(&lane, &["rebase", "main"], true);
    let out = clawpool(&s, &["merge-forward", "ui", "--output-format", "json"]);
    assert_eq!(
        json(&out)["outcome"],
        "operation_in_progress",
        "{}",
        stderr(&out)
    );
    let doc = state(&s, "ui");
    assert_eq!(doc["git_operation"]["kind"], "rebase");
    assert_eq!(doc["git_operation"]["paused"], true);
    assert_eq!(doc["freshness"]["state"], "unknown");
    let board = json(&clawpool(&s, &["board", "--output-format", "json"]));
    assert_eq!(board["lanes"][0]["git_operation"]["kind"], "rebase");

    git(&lane, &["rebase", "--abort"], false);
    git(&lane, &["checkout", "-q", "--detach", "HEAD"], false);
    let sha = git(&lane, &["rev-parse", "HEAD"], false);
    let out = clawpool(&s, &["merge-forward", "ui", "--output-format", "json"]);
    let merge = json(&out);
    assert_eq!(merge["outcome"], "detached");
    assert_eq!(merge["sha"], sha.as_str());
    let doc = state(&s, "ui");
    assert_eq!(doc["head"]["kind"], "detached");
    assert_eq!(doc["head"]["sha"], sha.as_str());
    assert!(doc["git_operation"].is_null());
}

/// No `verify_on_finish`: the shipped policy alone takes a finished lane on. Main gained the
/// fix while the lane worked, so the lane is stale when it finishes: the policy merges the
/// base forward (the `merge_forward_stale_branch` recipe, in the ledger), then verifies up to
/// merge_ready, then closes the lane out.
#[test]
fn the_default_policy_merges_forward_verifies_and_closes_out_a_finished_lane() {
    let s = setup();
    let fix = spawn_while_main_gets_the_fix(
        &s,
        r#"{"name": "auto", "agent": "scripted", "prompt": "work",
            "acceptance_tests": ["test -f fix.txt", "test -f out.txt"]}"#,
    );

    let events = events(&s, "auto");
    clawpool_tests::assert_kinds_in_order(
        &events,
        &[
            "lane.finished",
            "lane.recovery.running",
            "branch.merged_forward",
            "lane.recovery.succeeded",
            "lane.green",
            "lane.merge.ready",
            "lane.closed_out",
        ],
    );
    assert_eq!(
        find(&events, "branch.merged_forward")["detail"]["base_sha"],
        fix.as_str()
    );
    assert_eq!(
        find(&events, "lane.green")["detail"]["level"],
        "merge_ready"
    );
    let doc = state(&s, "auto");
    assert_eq!(doc["status"], "finished");
    assert_eq!(doc["green_level"], "merge_ready");
    assert_eq!(doc["freshness"]["state"], "fresh");
    let entries = doc["recovery"]["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{doc}");
    assert_eq!(entries[0]["recipe"], "merge_forward_stale_branch");
    assert_eq!(entries[0]["state"], "succeeded");
}

/// An agent that answers and changes nothing leaves a lane with no commits of its own and a
/// clean worktree: its tests pass on the unchanged code, which proves nothing, so it is
/// `finished` with a `no_changes` outcome and never `merge_ready`. A lane that commits is
/// `changed` and reaches `merge_ready` the same way.
#[test]
fn a_lane_that_changed_nothing_is_finished_with_no_changes_and_never_merge_ready() {
    let s = setup();
    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        "trust_dialog = true\n[[prompt]]\nsteps = [{ do = \"say\", text = \"nothing to change\" }]\n",
    )
    .expect("scenario");
    spawn_to_end(
        &s,
        r#"{"name": "idle", "agent": "scripted", "prompt": "look", "acceptance_tests": ["true"]}"#,
        0,
    );
    let doc = state(&s, "idle");
    assert_eq!(doc["status"], "finished", "{doc}");
    assert_eq!(doc["outcome"], "no_changes", "{doc}");
    assert_ne!(doc["green_level"], "merge_ready", "{doc}");
    let idle = events(&s, "idle");
    assert!(
        !idle.iter().any(|e| e["kind"] == "lane.merge.ready"),
        "{idle:#?}"
    );
    let outcome = find(&idle, "lane.outcome");
    assert_eq!(outcome["detail"]["commits"], 0, "{outcome}");
    assert_eq!(outcome["detail"]["dirty"], false, "{outcome}");
    let asked = idle
        .iter()
        .filter(|e| e["kind"] == "lane.verified")
        .find(|e| e["detail"]["verification"]["level"] == "merge_ready")
        .expect("the policy verified up to merge_ready");
    assert!(
        asked["detail"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no commits of its own"),
        "{asked}"
    );
    let board = clawpool(&s, &["board"]);
    let board = String::from_utf8_lossy(&board.stdout);
    assert!(board.contains("finished{no_changes}"), "{board}");

    std::fs::write(
        s.sandbox.dir.path().join("scenario.toml"),
        "trust_dialog = true\n[[prompt]]\nsteps = [{ do = \"write_file\", path = \"out.txt\", content = \"done\\n\" }, { do = \"git_commit\", message = \"lane work\" }]\n",
    )
    .expect("scenario");
    spawn_to_end(
        &s,
        r#"{"name": "busy", "agent": "scripted", "prompt": "work", "acceptance_tests": ["true"]}"#,
        0,
    );
    let doc = state(&s, "busy");
    assert_eq!(doc["outcome"], "changed", "{doc}");
    assert_eq!(doc["green_level"], "merge_ready", "{doc}");
}

/// `clawpool verify` without a level (targeted) after a merge_ready green on the same HEAD
/// keeps merge_ready; once the branch moves on, the level is what the new HEAD reached.
#[test]
fn verify_without_a_level_never_lowers_a_higher_green_on_the_same_head() {
    let s = setup();
    spawn_to_end(
        &s,
        r#"{"name": "held", "agent": "scripted", "prompt": "work", "acceptance_tests": ["true"]}"#,
        0,
    );
    assert_eq!(state(&s, "held")["green_level"], "merge_ready");

    let out = clawpool(&s, &["verify", "held", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reply = json(&out);
    assert_eq!(reply["verification"]["level"], "targeted", "{reply}");
    assert_eq!(reply["green_level"], "merge_ready", "{reply}");
    let doc = state(&s, "held");
    assert_eq!(doc["green_level"], "merge_ready", "{doc}");
    assert_eq!(doc["verification"]["level"], "targeted", "{doc}");
    // The targeted run says what it reached itself, and announces no merge-readiness again.
    let held = events(&s, "held");
    let greens: Vec<&Value> = held.iter().filter(|e| e["kind"] == "lane.green").collect();
    assert_eq!(greens.last().expect("green")["detail"]["level"], "targeted");
    assert_eq!(
        held.iter()
            .filter(|e| e["kind"] == "lane.merge.ready")
            .count(),
        1
    );

    // A new commit: the merge_ready green was for another HEAD.
    let dir = s.lanes_dir().join("held");
    std::fs::write(dir.join("more.txt"), "more\n").expect("write");
    git(&dir, &["add", "more.txt"], false);
    git(
        &dir,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "more",
        ],
        false,
    );
    let out = clawpool(&s, &["verify", "held", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json(&out)["green_level"], "targeted");
    assert_eq!(state(&s, "held")["green_level"], "targeted");
}
