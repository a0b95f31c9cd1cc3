//! Hand-off of finished lanes: `clawpool diff` (committed and uncommitted apart) and
//! `clawpool land`, the merge queue — only green commits reach the base, a conflicting or red
//! lane is left out with its reason and the queue goes on, a dirty base checkout is refused, a
//! hanging verification is left out past `--timeout`, a base that moves during the run is
//! re-done and kept, batch mode bisects a red candidate, and a lane committed by the real
//! Claude Code lands; after each, no red commit on the base's first-parent line.

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

/// Each lane writes `<its folder's name>.txt` and commits it: lanes never touch each other's
/// files (no prompt log).
const OWN_FILE: &str = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "run", command = 'n=$(basename "$PWD"); echo "$n" > "$n.txt"' },
  { do = "git_commit", message = "lane work" },
]
"#;

/// Spawns `packet`'s lanes with the [`OWN_FILE`] agent; returns the base before any lands.
fn spawn_own_files(s: &Setup, packet: &str) -> String {
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), OWN_FILE).expect("scenario");
    let out = s.spawn(packet, &["--concurrency", "3", "--output-format", "json"]);
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    git(&s.repo, &["rev-parse", "main"])
}

/// The commits on main's first-parent line since `start` whose tree holds a file of a lane
/// whose verification fails or hangs once its change is in (`red*.txt`, `hang*.txt`): what
/// would be a red commit on the base.
fn red_commits(s: &Setup, start: &str) -> Vec<String> {
    let range = format!("{start}..main");
    git(&s.repo, &["rev-list", "--first-parent", &range])
        .lines()
        .filter(|sha| {
            git(&s.repo, &["ls-tree", "--name-only", sha])
                .lines()
                .any(|f| f.starts_with("red") || f.starts_with("hang"))
        })
        .map(str::to_owned)
        .collect()
}

fn is_on_main(s: &Setup, sha: &str) -> bool {
    std::process::Command::new("git")
        .args(["merge-base", "--is-ancestor", sha, "main"])
        .current_dir(&s.repo)
        .status()
        .expect("git")
        .success()
}

/// One at a time, merge commits: a lane whose verification hangs (only once its change is in)
/// is left out as `hung` past `--timeout` and the queue goes on; a lane whose verification
/// commits to the base in the main checkout while it runs (the base moves under the queue) is
/// merged and verified again and lands on top of that commit, which stays; 0 red commits.
#[test]
fn land_leaves_a_hanging_lane_out_and_redoes_a_lane_whose_base_moved() {
    let s = setup();
    // Armed only for the land run (not when the lane finished), and once.
    let armed = s.sandbox.dir.path().join("armed");
    let moved = s.sandbox.dir.path().join("moved");
    let mover = format!(
        "! test -e {a} || test -e {m} || {{ touch {m} && git -C {r} commit -q --allow-empty -m 'base moved'; }}",
        a = armed.display(),
        m = moved.display(),
        r = s.repo.display()
    );
    let hang = format!(
        "! test -e {a} || test ! -f hang.txt || sleep 30",
        a = armed.display()
    );
    let packet = serde_json::json!({"defaults": {"agent": "scripted"}, "lanes": [
        {"name": "hang", "prompt": "work", "acceptance_tests": [hang]},
        {"name": "mover", "prompt": "work", "acceptance_tests": [mover]},
        {"name": "clean", "prompt": "work", "acceptance_tests": ["test -f clean.txt"]},
    ]});
    let start = spawn_own_files(&s, &packet.to_string());
    std::fs::write(&armed, "").expect("arm");
    let out = clawpool(
        &s,
        &[
            "land",
            "hang",
            "mover",
            "clean",
            "--level",
            "package",
            "--method",
            "merge-commit",
            "--timeout",
            "1",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json(&out);
    let verdicts = report["lanes"].as_array().expect("verdicts");
    assert_eq!(verdicts[0]["verdict"], "left_out", "{report}");
    assert_eq!(verdicts[0]["failure"], "hung", "{report}");
    assert!(
        verdicts[0]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("hung past 1 s"),
        "{report}"
    );
    assert_eq!(verdicts[1]["verdict"], "landed", "{report}");
    assert_eq!(verdicts[1]["attempts"], 2, "the base moved once: {report}");
    assert_eq!(verdicts[2]["verdict"], "landed", "{report}");
    // The commit made on the base meanwhile was kept, not overwritten.
    let subjects = git(&s.repo, &["log", "--format=%s", "main"]);
    assert!(subjects.lines().any(|l| l == "base moved"), "{subjects}");
    assert!(is_on_main(&s, verdicts[1]["head"].as_str().expect("head")));
    assert!(!is_on_main(
        &s,
        &git(&s.lanes_dir().join("hang"), &["rev-parse", "HEAD"])
    ));
    assert_eq!(red_commits(&s, &start), Vec::<String>::new());
    let failed = events(&s, "hang");
    assert!(
        failed
            .iter()
            .any(|e| e["kind"] == "lane.land_failed" && e["detail"]["failure"] == "hung")
    );
}

/// Batch mode: five lanes in one batch, one conflicting with the base (taken out before
/// verification), one red. The candidate of the four is red and is bisected: the first half
/// lands together, the red lane is found alone and left out, the rest lands; one commit per
/// green candidate on the base's first-parent line, and 0 red commits.
#[test]
fn land_batch_verifies_lanes_together_and_bisects_a_red_candidate() {
    let s = setup();
    let packet = r#"{"defaults": {"agent": "scripted"}, "lanes": [
      {"name": "l1", "prompt": "work", "acceptance_tests": ["test ! -f red.txt"]},
      {"name": "l2", "prompt": "work", "acceptance_tests": ["test ! -f red.txt"]},
      {"name": "l3", "prompt": "work", "acceptance_tests": ["test ! -f red.txt"]},
      {"name": "red", "prompt": "work", "acceptance_tests": ["test ! -f red.txt"]},
      {"name": "l4", "prompt": "work", "acceptance_tests": ["true"]}
    ]}"#;
    spawn_own_files(&s, packet);
    let start = commit(&s.repo, "l4.txt", "the base's own\n", "base adds l4.txt");
    let out = clawpool(
        &s,
        &[
            "land",
            "l1",
            "l2",
            "l3",
            "red",
            "l4",
            "--batch",
            "8",
            "--level",
            "package",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json(&out);
    let verdicts = report["lanes"].as_array().expect("verdicts");
    let verdict = |n: usize| verdicts[n]["verdict"].as_str().unwrap_or_default();
    assert_eq!(
        (0..5).map(verdict).collect::<Vec<_>>(),
        ["landed", "landed", "landed", "left_out", "left_out"],
        "{report}"
    );
    assert_eq!(
        verdicts[0]["batch"],
        serde_json::json!(["l1", "l2"]),
        "{report}"
    );
    assert_eq!(verdicts[3]["failure"], "red", "{report}");
    assert!(!verdicts[3]["logs"].as_array().expect("logs").is_empty());
    assert_eq!(verdicts[4]["failure"], "conflict", "{report}");
    let results: Vec<(&Value, &Value)> = report["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| (&c["lanes"], &c["result"]))
        .collect();
    let expected = [
        (serde_json::json!(["l1", "l2", "l3", "red"]), "red"),
        (serde_json::json!(["l1", "l2"]), "green"),
        (serde_json::json!(["l3", "red"]), "red"),
        (serde_json::json!(["l3"]), "green"),
        (serde_json::json!(["red"]), "red"),
    ];
    assert_eq!(results.len(), expected.len(), "{report}");
    for ((lanes, result), (want_lanes, want)) in results.iter().zip(&expected) {
        assert_eq!(
            (*lanes, result.as_str()),
            (want_lanes, Some(*want)),
            "{report}"
        );
    }
    // Two green candidates: two commits on the first-parent line, neither red; every landed
    // lane's commit is on the base, the red one's is not; the checkout came along.
    let range = format!("{start}..main");
    assert_eq!(
        git(&s.repo, &["rev-list", "--first-parent", &range])
            .lines()
            .count(),
        2
    );
    assert_eq!(red_commits(&s, &start), Vec::<String>::new());
    for (n, lane) in ["l1", "l2", "l3"].into_iter().enumerate() {
        assert!(is_on_main(&s, verdicts[n]["head"].as_str().expect("head")));
        assert!(s.repo.join(format!("{lane}.txt")).exists(), "{lane}");
        let landed = events(&s, lane);
        assert!(landed.iter().any(|e| e["kind"] == "lane.landed"), "{lane}");
    }
    assert!(!is_on_main(
        &s,
        &git(&s.lanes_dir().join("red"), &["rev-parse", "HEAD"])
    ));
    assert!(git(&s.repo, &["status", "--porcelain"]).is_empty());
    // No candidate worktree is left behind.
    assert_eq!(
        git(&s.repo, &["worktree", "list"])
            .lines()
            .filter(|l| l.contains("candidate"))
            .count(),
        0
    );
}

/// A lane that commits with the real Claude Code (2.1.330, against the scripted model server,
/// offline): its model writes `hello.txt` and commits it with git through the Bash tool; the
/// lane lands (merge commit) and the base gets exactly its verified work, 0 red commits.
#[test]
fn land_a_lane_committed_by_the_real_claude_code() {
    use crate::real_agents::{claude_env, launch_env, write_config};
    clawpool_tests::real_agent("claude");
    let sandbox = clawpool_tests::Sandbox::new();
    clawpool_tests::seed_claude_home(
        &sandbox.home(),
        serde_json::json!({"customApiKeyResponses": {"approved": ["sk-ant-fake"], "rejected": []}}),
    );
    let repo = clawpool_tests::git_repo(sandbox.dir.path(), "repo");
    for (key, value) in [("user.name", "lane"), ("user.email", "lane@test")] {
        git(&repo, &["config", key, value]);
    }
    let lane = repo.with_extension("lanes").join("claude");
    let mut server = clawpool_tests::ModelServer::start(
        &sandbox.dir.path().join("model"),
        &serde_json::json!([
            {"tool_use": {"name": "Write", "input": {
                "file_path": lane.join("hello.txt").display().to_string(),
                "content": "hi\n"
            }}},
            {"tool_use": {"name": "Bash", "input": {"command": "git add hello.txt", "description": "Stage"}}},
            {"tool_use": {"name": "Bash", "input": {"command": "git commit -qm 'claude work'", "description": "Commit"}}},
            {"text": "Done. Committed hello.txt."}
        ]),
    );
    let config = write_config(
        &sandbox,
        Some(sandbox.dir.path()),
        "claude",
        &format!(
            "args = [\"--allowedTools\", \"Write,Bash(git add:*),Bash(git commit:*)\"]\n{}",
            launch_env(&claude_env(&sandbox, &server.url()))
        ),
    );
    let packet = sandbox.dir.path().join("packet.json");
    std::fs::write(
        &packet,
        r#"{"defaults": {"agent": "claude"}, "lanes": [{"name": "claude", "prompt": "write hello.txt and commit it", "acceptance_tests": ["test \"$(cat hello.txt)\" = hi"]}]}"#,
    )
    .expect("packet");
    let out = sandbox
        .clawpool()
        .arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(&repo)
        .output()
        .expect("clawpool spawn");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(clawpool_tests::git_log(&lane)[0], "claude work");
    let start = git(&repo, &["rev-parse", "main"]);
    let out = sandbox
        .clawpool()
        .args([
            "land",
            "claude",
            "--level",
            "package",
            "--method",
            "merge-commit",
        ])
        .args(["--output-format", "json"])
        .current_dir(&repo)
        .output()
        .expect("clawpool land");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["lanes"][0]["verdict"], "landed", "{report}");
    let main = git(&repo, &["rev-parse", "main"]);
    assert_eq!(report["base_after"], main.as_str());
    let range = format!("{start}..main");
    let first_parent = git(&repo, &["rev-list", "--first-parent", &range]);
    assert_eq!(first_parent.lines().count(), 1, "one landing commit");
    // The one commit on the base is the verified tree: its check passes there.
    assert_eq!(git(&repo, &["show", "main:hello.txt"]), "hi");
    assert_eq!(
        std::fs::read_to_string(repo.join("hello.txt")).expect("brought along"),
        "hi\n"
    );
    server.stop();
    crate::real_agents::assert_nothing_left(&sandbox);
}

/// Batch mode on a base that moves while a candidate is verified (its command commits to the
/// base in the main checkout, once): the green candidate is not put on the base; the batch is
/// made again on the new base, verified and landed, and the commit made meanwhile stays.
#[test]
fn land_batch_redoes_a_candidate_whose_base_moved() {
    let s = setup();
    let armed = s.sandbox.dir.path().join("armed");
    let moved = s.sandbox.dir.path().join("moved");
    let mover = format!(
        "! test -e {a} || test -e {m} || {{ touch {m} && git -C {r} commit -q --allow-empty -m 'base moved'; }}",
        a = armed.display(),
        m = moved.display(),
        r = s.repo.display()
    );
    let packet = serde_json::json!({"defaults": {"agent": "scripted"}, "lanes": [
        {"name": "b1", "prompt": "work", "acceptance_tests": [mover]},
        {"name": "b2", "prompt": "work", "acceptance_tests": ["test -f b2.txt"]},
    ]});
    let start = spawn_own_files(&s, &packet.to_string());
    std::fs::write(&armed, "").expect("arm");
    let out = clawpool(
        &s,
        &[
            "land",
            "b1",
            "b2",
            "--batch",
            "2",
            "--level",
            "package",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json(&out);
    let results: Vec<&str> = report["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| c["result"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(results, ["base_moved", "green"], "{report}");
    for verdict in report["lanes"].as_array().expect("verdicts") {
        assert_eq!(verdict["verdict"], "landed", "{report}");
        assert_eq!(verdict["attempts"], 2, "{report}");
    }
    let main = git(&s.repo, &["rev-parse", "main"]);
    let moved_commit = git(&s.repo, &["rev-parse", "main^1"]);
    assert_eq!(
        git(&s.repo, &["log", "-1", "--format=%s", &moved_commit]),
        "base moved",
        "the candidate sits on the commit made meanwhile"
    );
    assert_eq!(report["base_after"], main.as_str());
    assert_eq!(red_commits(&s, &start), Vec::<String>::new());
}
