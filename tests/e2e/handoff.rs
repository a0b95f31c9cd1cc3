//! Hand-off of finished lanes: `clawpool diff` (committed and uncommitted apart) and
//! `clawpool land`, the merge queue — only green commits reach the base, a conflicting or red
//! lane is left out with its reason and the queue goes on, a dirty base checkout is refused.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

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

fn commit(dir: &Path, file: &str, content: &str, subject: &str) -> String {
    std::fs::write(dir.join(file), content).expect("write");
    git(dir, &["add", file]);
    git(dir, &["commit", "-qm", subject]);
    git(dir, &["rev-parse", "HEAD"])
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

/// Three lanes, each committing `out.txt` (and its prompt log): `clean` (its tests pass on
/// top of the base), `clash` (then given a commit that conflicts with a later base commit) and
/// `red` (its test fails once its change is there). They land as red, clean, clash: red is
/// verified and left out, clean lands, clash conflicts with the base (its later commit, and
/// the prompt log clean brought).
const PACKET: &str = r#"{"defaults": {"agent": "scripted"}, "lanes": [
  {"name": "clean", "prompt": "work", "acceptance_tests": ["test -f out.txt"]},
  {"name": "clash", "prompt": "work", "acceptance_tests": ["true"]},
  {"name": "red", "prompt": "work", "acceptance_tests": ["test ! -f out.txt"]}
]}"#;

#[test]
fn diff_shows_commits_and_uncommitted_work_and_land_moves_the_base_only_to_green_work() {
    let s = setup();
    let out = s.spawn(PACKET, &["--output-format", "json"]);
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    let lanes = s.lanes_dir();
    let clash = lanes.join("clash");
    commit(&clash, "shared.txt", "lane\n", "lane edits shared.txt");
    let base_before = commit(&s.repo, "shared.txt", "main\n", "main edits shared.txt");

    // diff: the lane's commit and, apart, a file not committed yet.
    std::fs::write(lanes.join("clean").join("pending.txt"), "later\n").expect("write");
    let out = clawpool(&s, &["diff", "clean", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let diff = json(&out);
    assert_eq!(diff["commits"][0]["summary"], "lane work", "{diff}");
    let files = diff["files"].as_array().expect("files");
    let out_txt = files
        .iter()
        .find(|f| f["path"] == "out.txt")
        .unwrap_or_else(|| panic!("out.txt in {diff}"));
    assert_eq!(out_txt["status"], "added");
    assert_eq!(out_txt["insertions"], 1);
    // The base's later commit is not the lane's change.
    assert!(files.iter().all(|f| f["path"] != "shared.txt"), "{diff}");
    assert_eq!(diff["uncommitted"][0]["path"], "pending.txt");
    assert_eq!(diff["uncommitted"][0]["status"], "untracked");
    let out = clawpool(&s, &["diff", "clean", "--stat"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not committed:") && text.contains("pending.txt"),
        "{text}"
    );
    std::fs::remove_file(lanes.join("clean").join("pending.txt")).expect("rm");

    // A dirty base checkout refuses the run before anything moves, naming it.
    std::fs::write(s.repo.join("notes.txt"), "mine\n").expect("write");
    let out = clawpool(&s, &["land", "clean", "--output-format", "json"]);
    assert_ne!(out.status.code(), Some(0));
    let error: Value = serde_json::from_slice(&out.stderr).expect("one JSON error");
    let error = &error["error"];
    assert_eq!(error["kind"], "dirty_base_checkout", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("notes.txt")
    );
    assert_eq!(git(&s.repo, &["rev-parse", "main"]), base_before);
    std::fs::remove_file(s.repo.join("notes.txt")).expect("rm");

    let out = clawpool(
        &s,
        &[
            "land",
            "red",
            "clean",
            "clash",
            "--level",
            "package",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json(&out);
    let verdicts = report["lanes"].as_array().expect("verdicts");
    assert_eq!(verdicts[1]["verdict"], "landed", "{report}");
    assert_eq!(verdicts[2]["verdict"], "left_out");
    assert_eq!(verdicts[2]["failure"], "conflict");
    assert!(
        verdicts[2]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("shared.txt")
    );
    assert_eq!(verdicts[0]["verdict"], "left_out");
    assert_eq!(verdicts[0]["failure"], "red", "{report}");
    assert!(!verdicts[0]["logs"].as_array().expect("logs").is_empty());

    // Only the clean lane's verified work is on the base; the checkout came along.
    let main = git(&s.repo, &["rev-parse", "main"]);
    assert_eq!(report["base_after"], main.as_str());
    assert_eq!(verdicts[1]["new_base"], main.as_str());
    assert_eq!(git(&lanes.join("clean"), &["rev-parse", "HEAD"]), main);
    let red_head = git(&lanes.join("red"), &["rev-parse", "HEAD"]);
    let clash_head = git(&clash, &["rev-parse", "HEAD"]);
    for left in [&red_head, &clash_head] {
        let reachable = std::process::Command::new("git")
            .args(["merge-base", "--is-ancestor", left, "main"])
            .current_dir(&s.repo)
            .status()
            .expect("git");
        assert!(!reachable.success(), "{left} must not be on the base");
    }
    assert_eq!(
        std::fs::read_to_string(s.repo.join("out.txt")).expect("brought along"),
        "done\n"
    );
    assert!(git(&s.repo, &["status", "--porcelain"]).is_empty());

    let landed = events(&s, "clean");
    let event = landed
        .iter()
        .find(|e| e["kind"] == "lane.landed")
        .expect("lane.landed");
    assert_eq!(event["detail"]["new_base"], main.as_str());
    assert_eq!(event["detail"]["old_base"], base_before.as_str());
    let failed = events(&s, "red");
    let event = failed
        .iter()
        .find(|e| e["kind"] == "lane.land_failed")
        .expect("lane.land_failed");
    assert_eq!(event["detail"]["failure"], "red");
    assert!(
        !event["detail"]["next_action"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
}
