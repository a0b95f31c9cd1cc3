//! Finished lanes read back as they stand now (issue #27, "where that bites" 4, 5 and 8): the
//! board's freshness, commits and `merge_ready` against the base as it is now, after a commit
//! on the base and after the base moved backwards; a manual `verify` on a finished lane with
//! uncommitted work, and `recover`'s advice for it.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// The agent commits one file and ends.
const COMMITS_ONCE: &str = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
"#;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn commit_on_main(s: &Setup, file: &str, subject: &str) {
    std::fs::write(s.repo.join(file), format!("{subject}\n")).expect("write");
    git(&s.repo, &["add", file]);
    git(&s.repo, &["commit", "-qm", subject]);
}

fn clawpool(s: &Setup, args: &[&str]) -> Output {
    s.sandbox
        .clawpool()
        .args(args)
        .current_dir(&s.repo)
        .output()
        .expect("clawpool")
}

/// Spawns one lane `name` (agent scripted by `scenario`, acceptance test `true`) to its end.
fn spawn_one(s: &Setup, scenario: &str, name: &str) {
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
    let packet = format!(
        r#"{{"name": "{name}", "agent": "scripted", "prompt": "work", "acceptance_tests": ["true"]}}"#
    );
    let out = s.spawn(&packet, &["--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Lane `name` as `board --output-format json` shows it.
fn board_row(s: &Setup, name: &str) -> Value {
    let out = clawpool(s, &["board", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let board: Value = serde_json::from_slice(&out.stdout).expect("board JSON");
    board["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .find(|l| l["lane"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no lane {name} on {board}"))
}

fn board_text(s: &Setup) -> String {
    String::from_utf8_lossy(&clawpool(s, &["board"]).stdout).into_owned()
}

/// Bite 4: after a commit on main a finished lane is `stale -1` on the board, its commits are
/// counted against main as it is now, and it is no longer shown `merge_ready`.
#[test]
fn a_finished_lane_goes_stale_on_the_board_when_main_moves_on() {
    let s = setup();
    spawn_one(&s, COMMITS_ONCE, "done");
    let row = board_row(&s, "done");
    assert_eq!(row["lane_status"], "finished", "{row}");
    assert_eq!(row["green_level"], "merge_ready", "{row}");
    assert_eq!(row["freshness"]["state"], "fresh", "{row}");
    assert_eq!(row["board"]["commits_ahead"], 1, "{row}");

    commit_on_main(&s, "fix.txt", "the fix");
    let row = board_row(&s, "done");
    assert_eq!(row["freshness"]["state"], "stale", "{row}");
    assert_eq!(row["freshness"]["behind"], 1, "{row}");
    assert_eq!(
        row["freshness"]["missing"][0]["subject"], "the fix",
        "{row}"
    );
    assert_eq!(row["board"]["commits_ahead"], 1, "{row}");
    assert_eq!(row["green_level"], "workspace", "{row}");
    assert_eq!(row["board"]["recorded_green_level"], "merge_ready", "{row}");
    let text = board_text(&s);
    assert!(text.contains("stale -1"), "{text}");
    assert!(!text.contains("merge_ready"), "{text}");

    // Merged forward by hand: the lane is fresh again, and its commits are its own plus the
    // merge, counted against main as it is now.
    let out = clawpool(&s, &["merge-forward", "done"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let row = board_row(&s, "done");
    assert_eq!(row["freshness"]["state"], "fresh", "{row}");
    assert_eq!(row["board"]["commits_ahead"], 2, "{row}");
}

/// Bite 8: main reset below a commit the lane was made from: the lane would bring the dropped
/// commit back, so it says `base_rewound` and is never `merge_ready`, on the board and when
/// verified again.
#[test]
fn a_base_moved_backwards_makes_a_finished_lane_base_rewound_never_merge_ready() {
    let s = setup();
    commit_on_main(&s, "extra.txt", "later dropped");
    spawn_one(&s, COMMITS_ONCE, "old");
    assert_eq!(board_row(&s, "old")["green_level"], "merge_ready");

    git(&s.repo, &["reset", "-q", "--hard", "HEAD~1"]);
    let row = board_row(&s, "old");
    assert_eq!(row["freshness"]["state"], "base_rewound", "{row}");
    assert_eq!(row["freshness"]["dropped"], 1, "{row}");
    assert_ne!(row["green_level"], "merge_ready", "{row}");
    let text = board_text(&s);
    assert!(text.contains("base_rewound +1"), "{text}");
    assert!(!text.contains("merge_ready"), "{text}");

    let out = clawpool(
        &s,
        &[
            "verify",
            "old",
            "--level",
            "merge_ready",
            "--output-format",
            "json",
        ],
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let reply: Value = serde_json::from_slice(&out.stdout).expect("verify JSON");
    assert_eq!(reply["verification"]["result"], "blocked", "{reply}");
    let reason = reply["verification"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("moved backwards") && reason.contains("bring back 1 commit"),
        "{reply}"
    );
    let row = board_row(&s, "old");
    assert_ne!(row["lane_status"], "supervisor_lost", "{row}");
    assert_ne!(row["green_level"], "merge_ready", "{row}");
}

/// Bite 5: `verify --level package` on a finished lane whose base moved on and whose worktree
/// has uncommitted work: it says what is missing where (a commit of main, missing from the
/// lane's branch), holds the lane as `blocked{branch_freshness}` — never
/// `supervisor_lost{branch_freshness}` — with its green level kept (nothing ran); `recover`
/// names the lane in the command it advises; once the worktree is clean a merge-forward makes
/// it fresh again and a green verification finishes it.
#[test]
fn a_manual_verify_of_a_dirty_finished_lane_says_what_is_missing_where_and_never_loses_it() {
    let s = setup();
    spawn_one(&s, COMMITS_ONCE, "notes");
    commit_on_main(&s, "fix.txt", "the fix");
    let lane = s.lanes_dir().join("notes");
    std::fs::write(lane.join("draft.txt"), "not committed\n").expect("write");

    let out = clawpool(
        &s,
        &[
            "verify",
            "notes",
            "--level",
            "package",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let reply: Value = serde_json::from_slice(&out.stdout).expect("verify JSON");
    assert_eq!(reply["verification"]["result"], "blocked", "{reply}");
    let reason = reply["verification"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("1 commit of main missing from the lane's branch")
            && reason.contains("uncommitted changes")
            && reason.contains("draft.txt"),
        "{reply}"
    );
    assert_eq!(reply["green_level"], "merge_ready", "{reply}");

    // Held for a person, as it is: never a lost supervisor (none was needed).
    let state = clawpool(&s, &["state", "notes", "--output-format", "json"]);
    let state: Value = serde_json::from_slice(&state.stdout).expect("state JSON");
    assert_eq!(state["lane_status"], "blocked", "{state}");
    assert_eq!(state["blocked"]["subphase"], "branch_freshness", "{state}");
    assert_eq!(state["green_level"], "merge_ready", "{state}");
    let row = board_row(&s, "notes");
    assert_eq!(row["lane_status"], "blocked", "{row}");
    assert_eq!(row["freshness"]["state"], "stale", "{row}");
    let text = board_text(&s);
    assert!(!text.contains("supervisor_lost"), "{text}");

    let out = clawpool(&s, &["recover", "notes"]);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(!said.contains("LANE"), "{said}");
    assert!(
        !said.contains("merge-forward") || said.contains("clawpool merge-forward notes"),
        "{said}"
    );

    std::fs::remove_file(lane.join("draft.txt")).expect("clean");
    let out = clawpool(&s, &["merge-forward", "notes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let row = board_row(&s, "notes");
    assert_eq!(row["freshness"]["state"], "fresh", "{row}");
    assert_ne!(row["lane_status"], "supervisor_lost", "{row}");
    // Verified on the merged branch, the lane is finished again.
    let out = clawpool(&s, &["verify", "notes", "--level", "package"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(board_row(&s, "notes")["lane_status"], "finished");
}

/// Issue #27's board at scale: a board keeps what it worked out for an ended lane in the lane's
/// registry folder (`branch.json`, beside its state, never in the worktree) and a later board
/// reads it instead of opening the worktree — yet each change made by hand since is on the
/// next board: a file made in the worktree, a commit, and a commit on the base.
#[test]
fn a_finished_lanes_kept_branch_record_is_read_back_only_while_it_is_current() {
    let s = setup();
    spawn_one(&s, COMMITS_ONCE, "kept");
    let lane = s.lanes_dir().join("kept");
    let record = s.repo.join(".git/clawpool/lanes/kept/branch.json");
    let row = board_row(&s, "kept");
    assert_eq!(row["board"]["dirty"], false, "{row}");
    assert_eq!(row["board"]["commits_ahead"], 1, "{row}");
    let kept = std::fs::read_to_string(&record).expect("the board kept the lane's branch");
    let stamp = std::fs::metadata(&record)
        .expect("record")
        .modified()
        .expect("mtime");

    // Nothing moved: read back, not written again.
    assert_eq!(board_row(&s, "kept")["board"]["commits_ahead"], 1);
    assert_eq!(std::fs::read_to_string(&record).expect("record"), kept);
    assert_eq!(
        std::fs::metadata(&record)
            .expect("record")
            .modified()
            .expect("mtime"),
        stamp,
        "a board of an unchanged lane wrote its record again"
    );

    std::fs::write(lane.join("draft.txt"), "by hand\n").expect("write");
    let row = board_row(&s, "kept");
    assert_eq!(row["board"]["dirty"], true, "{row}");

    git(&lane, &["add", "draft.txt"]);
    commit_by_hand(&lane);
    let row = board_row(&s, "kept");
    assert_eq!(row["board"]["dirty"], false, "{row}");
    assert_eq!(row["board"]["commits_ahead"], 2, "{row}");

    commit_on_main(&s, "fix.txt", "the fix");
    let row = board_row(&s, "kept");
    assert_eq!(row["freshness"]["state"], "stale", "{row}");
    assert_eq!(row["board"]["commits_ahead"], 2, "{row}");
}

/// The board's kept summary of ended lanes (`board.json` in clawpool's folder of the common git
/// dir, issue #27): a later board takes a lane's row from it only while every file the row
/// came from is stamped as kept and the base has not moved. A summary that does not parse or
/// is of another version, a row whose stamps do not match (as one written by an agent would
/// be), a row for a lane the registry does not have, a commit in the lane and a commit on the
/// base: the board shows the truth each time. A lane `gc` removes leaves the board and the
/// summary.
#[test]
fn the_boards_kept_summary_is_refused_when_stale_or_tampered_with() {
    let s = setup();
    spawn_one(&s, COMMITS_ONCE, "kept");
    let summary = s.repo.join(".git/clawpool/board.json");
    // Its first line is a JSON document of the rows' stamps; the rows' printed texts follow.
    let read_summary = || -> Value {
        let text = std::fs::read_to_string(&summary).expect("the board kept its summary");
        serde_json::from_str(text.split_once('\n').expect("two parts").0).expect("summary JSON")
    };
    let printed_rows = || -> String {
        let text = std::fs::read_to_string(&summary).expect("the board kept its summary");
        text.split_once('\n').expect("two parts").1.to_owned()
    };
    // A row is kept only from files that last changed more than 20 ms before the board began
    // (a second change in the same tick of the kernel's clock could leave the same stamps).
    let settle = || std::thread::sleep(std::time::Duration::from_millis(50));
    settle();
    let truth = board_row(&s, "kept");
    assert_eq!(truth["board"]["commits_ahead"], 1, "{truth}");
    assert_eq!(truth["board"]["dirty"], false, "{truth}");
    let kept = read_summary();
    let row = &kept["lanes"]["kept"];
    assert_eq!(row["board"]["commits_ahead"], 1, "{kept}");

    // The kept row is what the board shows while its files hold: its printed text, nothing
    // read but the stamps (a change of the same length keeps the marks of its moving entries
    // where they are, as a writer of the summary would).
    let text = std::fs::read_to_string(&summary).expect("summary");
    assert!(text.contains("\"agent\":\"scripted\""), "{text}");
    std::fs::write(
        &summary,
        text.replace("\"agent\":\"scripted\"", "\"agent\":\"scriptee\""),
    )
    .expect("write");
    let shown = board_row(&s, "kept");
    assert_eq!(shown["agent"], "scriptee", "{shown}");
    assert!(shown["seconds_since_update"].is_u64(), "{shown}");
    assert_eq!(shown["supervisor"]["lost"], true, "{shown}");

    // Rows written by someone else: stamps that are not the files', and a lane the registry
    // does not have. Both refused; the file is written back with the truth.
    // A stamp is `[ino, ctime, ctime_nsec, size]`.
    let ino = row["key"]["sources"]["registry"]["state"][0]
        .as_u64()
        .expect("the state file's inode");
    let forged = text
        .replace("\"commits_ahead\":1", "\"commits_ahead\":4")
        .replace(
            &format!("\"state\":[{ino},"),
            &format!("\"state\":[{},", ino ^ 1),
        );
    assert!(
        forged.contains(&format!("\"state\":[{},", ino ^ 1)),
        "{forged}"
    );
    let (first_line, rows) = forged.split_once('\n').expect("two parts");
    let kept_row = first_line
        .split_once("\"lanes\":{\"kept\":")
        .map(|(_, row)| &row[..row.len() - 2])
        .expect("one kept row");
    let forged = format!(
        "{}\n{rows}",
        first_line.replace(
            "\"lanes\":{\"kept\":",
            &format!("\"lanes\":{{\"ghost\":{kept_row},\"kept\":"),
        )
    );
    std::fs::write(&summary, &forged).expect("write");
    let out = clawpool(&s, &["board", "--output-format", "json"]);
    let board: Value = serde_json::from_slice(&out.stdout).expect("board JSON");
    let lanes = board["lanes"].as_array().expect("lanes");
    assert_eq!(lanes.len(), 1, "{board}");
    assert_eq!(lanes[0]["board"]["commits_ahead"], 1, "{board}");
    assert_eq!(lanes[0]["agent"], "scripted", "{board}");
    let rewritten = read_summary();
    assert_eq!(rewritten["lanes"]["kept"]["board"]["commits_ahead"], 1);
    assert!(rewritten["lanes"].get("ghost").is_none(), "{rewritten}");

    // A summary that does not parse, of another version, or whose marks are not where its
    // moving entries are: refused whole, or the row refused.
    let text = std::fs::read_to_string(&summary).expect("summary");
    let update = &rewritten["lanes"]["kept"]["printed"]["update"];
    let (start, end) = (
        update[0].as_u64().expect("start"),
        update[1].as_u64().expect("end"),
    );
    for bad in [
        "{\"version\": 4, \"lanes\": {\"kept\": ".to_owned(),
        text.replace("\"version\":4", "\"version\":99")
            .replace("\"commits_ahead\":1", "\"commits_ahead\":4"),
        text.replace(
            &format!("\"update\":[{start},{end}]"),
            &format!("\"update\":[{},{}]", start + 5, end + 5),
        )
        .replace("\"commits_ahead\":1", "\"commits_ahead\":4"),
    ] {
        std::fs::write(&summary, &bad).expect("write");
        let shown = board_row(&s, "kept");
        assert_eq!(shown["board"]["commits_ahead"], 1, "{bad}");
        assert!(shown["seconds_since_update"].is_u64(), "{shown}");
        assert_eq!(read_summary()["version"], 4);
    }

    // The lane's HEAD moves (a commit by hand), then its base (a commit on main).
    let lane = s.lanes_dir().join("kept");
    std::fs::write(lane.join("more.txt"), "more\n").expect("write");
    git(&lane, &["add", "more.txt"]);
    commit_by_hand(&lane);
    settle();
    assert_eq!(board_row(&s, "kept")["board"]["commits_ahead"], 2);
    commit_on_main(&s, "fix.txt", "the fix");
    let row = board_row(&s, "kept");
    assert_eq!(row["freshness"]["state"], "stale", "{row}");
    assert_eq!(row["board"]["commits_ahead"], 2, "{row}");
    assert!(
        printed_rows().contains("\"freshness\":{\"state\":\"stale\""),
        "{}",
        printed_rows()
    );

    // gc removes the lane: off the board, and out of the summary.
    let out = clawpool(&s, &["gc", "--force", "--output-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = clawpool(&s, &["board", "--output-format", "json"]);
    let board: Value = serde_json::from_slice(&out.stdout).expect("board JSON");
    assert_eq!(board["lanes"], serde_json::json!([]), "{board}");
    assert!(read_summary()["lanes"].get("kept").is_none());
}

/// Commits what is staged in `lane` as a person would, outside clawpool.
fn commit_by_hand(lane: &Path) {
    git(
        lane,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "by hand",
        ],
    );
}
