//! Tests of the state file as a whole: writing, reading, faults, views.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::*;
use crate::{BlockedSubphase, FailureClass, LaneEvent, LaneState, LaneStatus};

fn sample(now: u64) -> WorkerStateDoc {
    let mut doc = WorkerStateDoc::new(
        "fix-login-6a1f",
        "fix-login",
        "claude",
        "/work/lanes/fix-login",
        Transport {
            kind: TransportKind::Tmux,
            session: Some("clawpool-run:fix-login".into()),
        },
        now,
    );
    doc.pid = Some(4242);
    doc.branch = Some("clawpool/fix-login".into());
    doc.base = Some(Base {
        git_ref: "main".into(),
        sha: "0123456789abcdef0123456789abcdef01234567".into(),
    });
    doc.apply_event(&LaneEvent {
        seq: 7,
        at_ms: now * 1000 + 250,
        kind: "lane.ready".into(),
        lane: "fix-login".into(),
        from: Some(LaneState::Spawning),
        to: Some(LaneState::ReadyForPrompt),
        evidence: Some(crate::Evidence {
            rule: "input_line".into(),
            region: "input".into(),
            matched: "❯".into(),
        }),
        detail: Value::Null,
        source: None,
    });
    doc.stamp(now);
    doc
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn round_trip() {
    let dir = tempfile::tempdir().expect("temp dir");
    let writer = StateFileWriter::for_worktree(dir.path());
    let doc = sample(1_795_266_696);
    writer.write(&doc).expect("write");
    let path = dir.path().join(".claw/worker-state.json");
    assert_eq!(writer.path(), path);
    let back = read_state_file(&path).expect("read");
    assert_eq!(back, doc);
    // Every key is present, `null` when unknown.
    let raw: Value = serde_json::from_slice(&std::fs::read(&path).expect("raw")).expect("json");
    assert!(raw["blocked"].is_null() && raw["failure"].is_null());
    assert_eq!(
        raw["base"],
        json!({"ref": "main", "sha": doc.base.as_ref().expect("base").sha})
    );
    assert_eq!(raw["transport"]["kind"], "tmux");
    assert!(raw.get("extra").is_none());
}

/// The fields, JSON types and vocabularies of claw-code's `StateSnapshot` (claw-code
/// `rust/crates/runtime/src/worker_boot.rs`, `emit_state_file`).
#[test]
fn the_file_carries_claw_codes_snapshot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let writer = StateFileWriter::for_worktree(dir.path());
    writer.write(&sample(1_795_266_696)).expect("write");
    let raw: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(STATE_FILE)).expect("read"))
            .expect("json");
    assert!(raw["worker_id"].is_string());
    assert_eq!(raw["status"], "ready_for_prompt");
    assert_eq!(raw["is_ready"], true);
    assert_eq!(raw["trust_gate_cleared"], true);
    assert_eq!(raw["prompt_in_flight"], false);
    assert!(raw["updated_at"].is_u64() && raw["seconds_since_update"].is_u64());
    let claw_statuses = [
        "spawning",
        "trust_required",
        "tool_permission_required",
        "ready_for_prompt",
        "running",
        "finished",
        "failed",
    ];
    assert!(claw_statuses.contains(&raw["status"].as_str().expect("status")));
    assert_eq!(raw["lane_status"], "ready_for_prompt");
    let event = &raw["last_event"];
    assert!(event["seq"].is_u64() && event["kind"].is_string() && event["status"].is_string());
    assert!(claw_statuses.contains(&event["status"].as_str().expect("claw-code's status")));
    assert!(event["detail"].is_string() || event["detail"].is_null());
    assert!(event["payload"].is_object() || event["payload"].is_null());
    assert!(
        raw["lane_event"]["kind"]
            .as_str()
            .is_some_and(|k| k.starts_with("lane."))
    );
    // Epoch seconds, like claw-code, not milliseconds.
    assert_eq!(event["timestamp"], raw["updated_at"]);
    assert!(event["timestamp"].as_u64().expect("timestamp") < 10_000_000_000);
}

#[test]
fn writes_leave_no_temporary_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let writer = StateFileWriter::for_worktree(dir.path());
    let mut doc = sample(100);
    for i in 0..20 {
        doc.stamp(100 + i);
        writer.write(&doc).expect("write");
    }
    assert_eq!(
        files_in(&dir.path().join(".claw")),
        vec!["worker-state.json"]
    );
    assert_eq!(writer.degraded(), None);
}

#[test]
fn stale_temporary_files_are_swept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let claw = dir.path().join(".claw");
    std::fs::create_dir_all(&claw).expect("mkdir");
    let stale = claw.join(".worker-state.json.1.0.tmp");
    std::fs::write(&stale, b"{\"half").expect("stale temp");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .and_then(|f| f.set_modified(old))
        .expect("age it");
    let fresh = claw.join(".worker-state.json.2.0.tmp");
    std::fs::write(&fresh, b"{").expect("fresh temp");
    StateFileWriter::for_worktree(dir.path())
        .write(&sample(100))
        .expect("write");
    assert_eq!(
        files_in(&claw),
        vec![".worker-state.json.2.0.tmp", "worker-state.json"],
        "only the old leftover is removed: a fresh one may belong to a live writer"
    );
}

/// A reader polling in a loop while a writer rewrites the file 1000 times never sees a
/// missing, partial or inconsistent document.
#[test]
fn readers_never_see_a_partial_file() {
    const WRITES: u64 = 1000;
    let dir = tempfile::tempdir().expect("temp dir");
    let writer = StateFileWriter::for_worktree(dir.path());
    let path = writer.path().to_owned();
    // Sizes vary from write to write, so a torn or truncated file could not pass as whole.
    let doc_for = |i: u64| {
        let mut doc = sample(1_000 + i);
        doc.set_state(
            LaneState::Failed(FailureClass::Test),
            1_000 + i,
            Some("x".repeat(((i * 7919) % 97 * 113) as usize)),
        );
        doc.updated_at = i;
        doc.stamp(1_000 + i);
        doc
    };
    writer.write(&doc_for(0)).expect("first write");
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let done = Arc::clone(&done);
        let path = path.clone();
        std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut last = 0;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let doc = read_state_file(&path).unwrap_or_else(|e| panic!("read {reads}: {e}"));
                let i = doc.updated_at;
                assert!(i >= last, "went back from {last} to {i}");
                let detail = doc.failure.and_then(|f| f.detail).unwrap_or_default();
                assert_eq!(detail.len() as u64, (i * 7919) % 97 * 113, "document {i}");
                assert_eq!(doc.supervisor.heartbeat_at, 1_000 + i);
                last = i;
                reads += 1;
                if finished {
                    return (reads, last);
                }
            }
        })
    };
    for i in 1..=WRITES {
        writer.write(&doc_for(i)).expect("write");
    }
    done.store(true, Ordering::SeqCst);
    let (reads, last) = reader.join().expect("reader");
    assert_eq!(last, WRITES);
    assert!(reads >= 10, "the reader read only {reads} times");
    assert_eq!(
        files_in(path.parent().expect("dir")),
        vec!["worker-state.json"]
    );
}

/// Makes a folder unwritable for this process, even as root, and undoes it on drop.
///
/// As a normal user, mode 0555 is enough. Root ignores directory permissions
/// (CAP_DAC_OVERRIDE), so as root the folder is made immutable (`chattr +i`, which needs
/// CAP_LINUX_IMMUTABLE and a file system with the flag: ext4, xfs, btrfs): the kernel then
/// refuses to create, rename or remove entries in it for everyone, root included. Each
/// method is checked with a probe file; `None` when neither works here.
struct Unwritable {
    dir: PathBuf,
    immutable: bool,
}

impl Unwritable {
    fn make(dir: &Path) -> Option<Self> {
        use std::os::unix::fs::PermissionsExt;
        let writable = || {
            let probe = dir.join("probe");
            let created = std::fs::write(&probe, b"x").is_ok();
            let _ = std::fs::remove_file(&probe);
            created
        };
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).ok()?;
        let mut guard = Unwritable {
            dir: dir.to_owned(),
            immutable: false,
        };
        if !writable() {
            return Some(guard);
        }
        guard.immutable = Command::new("chattr")
            .arg("+i")
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        (guard.immutable && !writable()).then_some(guard)
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.immutable {
            let _ = Command::new("chattr").arg("-i").arg(&self.dir).status();
        }
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn a_read_only_folder_fails_the_write_and_keeps_the_previous_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let writer = StateFileWriter::for_worktree(dir.path());
    let previous = sample(100);
    writer.write(&previous).expect("first write");
    let before = std::fs::read(writer.path()).expect("read");
    let claw = dir.path().join(".claw");
    let Some(guard) = Unwritable::make(&claw) else {
        eprintln!("skipped: cannot make a folder unwritable here (root without chattr +i)");
        return;
    };
    let mut next = previous.clone();
    next.set_state(LaneState::Running, 101, None);
    next.stamp(101);
    let err = writer.write(&next).expect_err("the folder is read-only");
    assert_eq!(err.kind(), "state_file_write_failed");
    assert!(matches!(
        err,
        StateFileError::WriteFailed {
            stage: "create temporary file",
            ..
        }
    ));
    assert!(err.to_string().contains("worker-state.json"), "{err}");
    assert!(writer.degraded().is_some(), "the lane is reported degraded");
    drop(guard);
    assert_eq!(std::fs::read(writer.path()).expect("read"), before);
    assert_eq!(read_state_file(writer.path()).expect("read"), previous);
    assert_eq!(files_in(&claw), vec!["worker-state.json"]);
    // Writable again: the next write succeeds and the writer is healthy.
    writer.write(&next).expect("write");
    assert_eq!(writer.degraded(), None);
}

const FSIZE_CHILD: &str = "CLAWPOOL_TEST_STATE_FILE_FSIZE_CHILD";

/// A full disk, simulated with a file-size limit (RLIMIT_FSIZE), which binds root too: the
/// write of the temporary file fails part-way with EFBIG, the temporary file is removed, and
/// the previous state file is intact. The limit is set on a child process (this same test
/// binary running only this test), never on the test process.
#[test]
fn a_full_disk_fails_the_write_and_keeps_the_previous_file() {
    if let Ok(dir) = std::env::var(FSIZE_CHILD) {
        let writer = StateFileWriter::for_worktree(Path::new(&dir));
        let mut big = sample(200);
        big.set_state(
            LaneState::Failed(FailureClass::Infra),
            200,
            Some("y".repeat(64 * 1024)),
        );
        big.stamp(200);
        let err = writer
            .write(&big)
            .expect_err("the file size limit is exceeded");
        assert_eq!(err.kind(), "state_file_write_failed");
        assert!(
            matches!(err, StateFileError::WriteFailed { stage: "write", .. }),
            "{err}"
        );
        assert!(writer.degraded().is_some());
        return;
    }
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: prlimit (util-linux) is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let writer = StateFileWriter::for_worktree(dir.path());
    let previous = sample(100);
    writer.write(&previous).expect("first write");
    let before = std::fs::read(writer.path()).expect("read");
    assert!(before.len() < 16 * 1024);
    let exe = std::env::current_exe().expect("test binary");
    // SIGXFSZ would kill the child; an ignored signal stays ignored across exec.
    let output = Command::new("sh")
        .arg("-c")
        .arg(r#"trap "" XFSZ; exec prlimit --fsize=16384 "$@""#)
        .arg("sh")
        .arg(exe)
        .args([
            "--exact",
            "state_file::tests::a_full_disk_fails_the_write_and_keeps_the_previous_file",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FSIZE_CHILD, dir.path())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(std::fs::read(writer.path()).expect("read"), before);
    assert_eq!(
        files_in(&dir.path().join(".claw")),
        vec!["worker-state.json"]
    );
}

#[test]
fn a_failed_rename_removes_the_temporary_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state/worker-state.json");
    // A non-empty folder where the file should be: rename cannot replace it, root or not.
    std::fs::create_dir_all(path.join("occupied")).expect("mkdir");
    let writer = StateFileWriter::new(&path);
    let err = writer
        .write(&sample(100))
        .expect_err("rename over a folder");
    assert!(
        matches!(
            err,
            StateFileError::WriteFailed {
                stage: "rename",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        files_in(&dir.path().join("state")),
        vec!["worker-state.json"]
    );
    assert!(path.join("occupied").is_dir());
}

#[test]
fn a_file_in_place_of_the_folder_fails_cleanly() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(".claw"), b"not a folder").expect("file");
    let writer = StateFileWriter::for_worktree(dir.path());
    let err = writer.write(&sample(100)).expect_err("no folder");
    assert_eq!(err.kind(), "state_file_write_failed");
    assert_eq!(
        std::fs::read(dir.path().join(".claw")).expect("read"),
        b"not a folder"
    );
    // A reader sees an unreadable (not missing, not invalid) file.
    let err = read_state_file(writer.path()).expect_err("not a folder");
    assert_eq!(err.kind(), "state_file_unreadable");
}

#[test]
fn a_missing_file_is_missing_worker_state() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = state_file_path(dir.path());
    let err = read_state_file(&path).expect_err("missing");
    assert_eq!(err.kind(), "missing_worker_state");
    assert_eq!(err.path(), path);
    assert!(err.to_string().contains(&path.display().to_string()));
    assert_eq!(err.to_json()["error"]["kind"], "missing_worker_state");
}

fn write_raw(dir: &Path, bytes: &[u8]) -> PathBuf {
    let path = state_file_path(dir);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    std::fs::write(&path, bytes).expect("write");
    path
}

fn invalid_reason(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_raw(dir.path(), bytes);
    let err = read_state_file(&path).expect_err("invalid");
    assert_eq!(err.kind(), "invalid_state_file", "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    err.to_string()
}

#[test]
fn a_corrupted_file_is_invalid_state_file() {
    let whole = serde_json::to_vec_pretty(&sample(100)).expect("json");
    assert!(invalid_reason(&whole[..whole.len() / 2]).contains("not JSON"));
    assert!(invalid_reason(b"").contains("empty"));
    assert!(invalid_reason(b"\0\0\0\0").contains("not JSON"));
    assert!(invalid_reason(b"[1, 2]").contains("not a JSON object"));
    // claw-code's own snapshot has no schema_version.
    let claw = json!({"worker_id": "worker_1", "status": "running", "is_ready": false,
        "trust_gate_cleared": true, "prompt_in_flight": false, "last_event": null,
        "updated_at": 1, "seconds_since_update": 0});
    assert!(invalid_reason(claw.to_string().as_bytes()).contains("no schema_version"));
    let mut wrong = serde_json::to_value(sample(100)).expect("json");
    wrong["status"] = json!("dancing");
    assert!(invalid_reason(wrong.to_string().as_bytes()).contains("wrong shape"));
    wrong["status"] = json!("running");
    wrong["schema_version"] = json!("1");
    assert!(invalid_reason(wrong.to_string().as_bytes()).contains("schema_version"));
}

#[test]
fn a_lane_status_without_the_data_it_needs_is_invalid() {
    let mut blocked = sample(100);
    blocked.set_state(LaneState::Blocked(BlockedSubphase::Provider), 100, None);
    let coherent = serde_json::to_value(&blocked).expect("json");
    let mut no_subphase = coherent.clone();
    no_subphase
        .as_object_mut()
        .expect("object")
        .remove("blocked");
    let reason = invalid_reason(no_subphase.to_string().as_bytes());
    assert!(
        reason.contains("lane_status blocked without `blocked`"),
        "{reason}"
    );
    let mut running_but_blocked = coherent;
    running_but_blocked["lane_status"] = json!("running");
    let reason = invalid_reason(running_but_blocked.to_string().as_bytes());
    assert!(
        reason.contains("lane_status running with `blocked`"),
        "{reason}"
    );
    let mut failed = sample(100);
    failed.set_state(LaneState::Failed(FailureClass::Test), 100, None);
    let mut no_class = serde_json::to_value(&failed).expect("json");
    no_class.as_object_mut().expect("object").remove("failure");
    let reason = invalid_reason(no_class.to_string().as_bytes());
    assert!(
        reason.contains("lane_status failed without `failure`"),
        "{reason}"
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let mut newer = serde_json::to_value(sample(100)).expect("json");
    newer["schema_version"] = json!(SCHEMA_VERSION + 1);
    let reason = invalid_reason(newer.to_string().as_bytes());
    assert!(reason.contains("schema_version 3 is newer"), "{reason}");
}

#[test]
fn unknown_fields_are_tolerated_and_kept() {
    let mut newer = serde_json::to_value(sample(100)).expect("json");
    newer["tokens"] = json!({"input": 10, "output": 20});
    newer["prompt"]["echo_rows"] = json!(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write_raw(dir.path(), newer.to_string().as_bytes());
    let doc = read_state_file(&path).expect("read");
    assert_eq!(doc.extra["tokens"]["output"], 20);
    let shown = with_ages(&doc, Path::new("/no-record"), 100).to_json();
    assert_eq!(shown["tokens"]["input"], 10);
}

#[test]
fn ages_are_recomputed_from_progress() {
    let mut doc = sample(1_000);
    doc.record_progress(1_010);
    doc.stamp(1_012);
    assert_eq!(doc.seconds_since_update, 2);
    // A heartbeat rewrite does not count as progress.
    doc.stamp(1_014);
    assert_eq!(doc.seconds_since_update, 4);
    assert_eq!(doc.progress_at, 1_010);
    let view = with_ages(&doc, Path::new("/no-record"), 1_020);
    assert_eq!(view.doc.seconds_since_update, 10);
    assert_eq!(view.seconds_since_heartbeat, 6);
    assert!(!view.supervisor_lost);
    let json = view.to_json();
    assert_eq!(json["seconds_since_update"], 10);
    assert_eq!(json["status"], "ready_for_prompt");
    assert_eq!(json["last_status"], "ready_for_prompt");
    assert_eq!(json["supervisor"]["lost"], false);
    assert_eq!(json["supervisor"]["seconds_since_heartbeat"], 6);
    // A clock that went backwards gives 0, never a panic.
    assert_eq!(
        with_ages(&doc, Path::new("/no-record"), 900)
            .doc
            .seconds_since_update,
        0
    );
}

#[test]
fn a_silent_supervisor_is_lost_after_fifteen_seconds() {
    let mut doc = sample(1_000);
    doc.set_state(LaneState::Blocked(BlockedSubphase::Provider), 1_000, None);
    doc.stamp(1_000);
    let at_15 = with_ages(&doc, Path::new("/no-record"), 1_015);
    assert!(!at_15.supervisor_lost);
    assert_eq!(at_15.status, ShownStatus::Lane(LaneStatus::Blocked));
    let at_16 = with_ages(&doc, Path::new("/no-record"), 1_016);
    assert!(at_16.supervisor_lost);
    assert_eq!(at_16.status, ShownStatus::SupervisorLost);
    let json = at_16.to_json();
    assert_eq!(json["lane_status"], "supervisor_lost");
    assert_eq!(
        json["status"], "spawning",
        "claw-code's status, as in the file"
    );
    assert_eq!(json["last_status"], "blocked");
    assert_eq!(json["blocked"]["subphase"], "provider");
    assert_eq!(json["supervisor"]["lost"], true);
    assert_eq!(json["supervisor"]["seconds_since_heartbeat"], 16);

    // A ready lane without supervisor is not ready.
    let mut ready = sample(1_000);
    ready.stamp(1_000);
    let json = with_ages(&ready, Path::new("/no-record"), 1_100).to_json();
    assert_eq!(
        (json["lane_status"].as_str(), json["is_ready"].as_bool()),
        (Some("supervisor_lost"), Some(false))
    );

    // Finished and failed lanes keep their status: nothing more was going to happen.
    let mut finished = sample(1_000);
    finished.set_state(LaneState::Finished, 1_000, None);
    finished.stamp(1_000);
    let view = with_ages(&finished, Path::new("/no-record"), 2_000);
    assert!(view.supervisor_lost);
    assert_eq!(view.to_json()["lane_status"], "finished");

    // So do lanes their checks hold for a person: no worker was being driven.
    for held in [BlockedSubphase::BranchFreshness, BlockedSubphase::TestHang] {
        let mut doc = sample(1_000);
        doc.set_state(LaneState::Blocked(held), 1_000, None);
        doc.stamp(1_000);
        let view = with_ages(&doc, Path::new("/no-record"), 2_000);
        assert!(view.supervisor_lost);
        assert_eq!(view.status, ShownStatus::Lane(LaneStatus::Blocked));
    }
}

/// The example in `docs/state-file.md` is a valid state file, and its keys are exactly the
/// ones this version writes.
#[test]
fn the_documented_example_is_a_state_file() {
    let page = include_str!("../../../docs/state-file.md");
    let start = page.find("```json\n").expect("a json block") + "```json\n".len();
    let end = start + page[start..].find("```").expect("its end");
    let example = &page[start..end];
    let doc = parse_state(Path::new("docs/state-file.md"), example.as_bytes()).expect("parses");
    assert!(doc.extra.is_empty(), "unknown keys: {:?}", doc.extra.keys());
    let written = serde_json::to_value(&doc).expect("json");
    let documented: Value = serde_json::from_str(example).expect("json");
    assert_eq!(written, documented);
}

/// A version 1 file (the example the page showed for version 1, kept as a fixture) is read:
/// clawpool's status and event move to `lane_status` and `lane_event`, claw-code's take
/// `status` and `last_event`, and it is written back as version 2.
#[test]
fn a_version_1_file_is_read_as_version_2() {
    let v1 = include_str!("../../tests/fixtures/state-file-v1-running.json");
    let doc = parse_state(Path::new("v1.json"), v1.as_bytes()).expect("a version 1 file reads");
    assert!(doc.extra.is_empty(), "unknown keys: {:?}", doc.extra.keys());
    assert_eq!(doc.schema_version, SCHEMA_VERSION);
    assert_eq!(doc.status, LaneStatus::Running);
    assert_eq!(doc.claw_status, crate::state_file::ClawStatus::Running);
    assert_eq!(
        doc.lane_event.as_ref().map(|e| e.kind.as_str()),
        Some("lane.running")
    );
    let claw = doc.last_event.as_ref().expect("claw-code's event");
    assert_eq!(claw.kind, crate::state_file::ClawEventKind::Running);
    assert_eq!(claw.seq, 10);
    // The same document as the page shows for version 2.
    let page = include_str!("../../../docs/state-file.md");
    let start = page.find("```json\n").expect("a json block") + "```json\n".len();
    let end = start + page[start..].find("```").expect("its end");
    let documented: Value = serde_json::from_str(&page[start..end]).expect("json");
    assert_eq!(serde_json::to_value(&doc).expect("json"), documented);
}

#[test]
fn a_state_file_behind_its_event_log_catches_up_with_the_events_after_its_last_one() {
    let now = 1_795_266_697;
    let mut doc = sample(now);
    let event = |seq: u64, kind: &str, to: LaneState| LaneEvent {
        seq,
        at_ms: now * 1000 + seq,
        kind: kind.into(),
        lane: "fix-login".into(),
        from: None,
        to: Some(to),
        evidence: None,
        detail: Value::Null,
        source: None,
    };
    let finished = event(9, "lane.finished", LaneState::Finished);
    let log = [
        serde_json::to_string(&event(
            6,
            "lane.failed",
            LaneState::Failed(FailureClass::Infra),
        ))
        .expect("event JSON"),
        serde_json::to_string(&event(7, "lane.ready", LaneState::ReadyForPrompt))
            .expect("event JSON"),
        serde_json::to_string(&event(8, "lane.running", LaneState::Running)).expect("event JSON"),
        serde_json::to_string(&finished).expect("event JSON"),
        "{\"seq\": 10, \"kind\": \"lane.fai".to_owned(),
    ]
    .join("\n");

    assert_eq!(doc.catch_up(&log), 2, "only the events after seq 7");
    assert_eq!(doc.status, LaneStatus::Finished);
    assert_eq!(doc.lane_event.as_ref().map(|e| e.seq), Some(9));
    assert_eq!(doc.catch_up(&log), 0, "nothing twice");

    let mut fresh = WorkerStateDoc::new(
        "w",
        "fix-login",
        "claude",
        "/work/lanes/fix-login",
        Transport {
            kind: TransportKind::Pty,
            session: None,
        },
        now,
    );
    assert_eq!(
        fresh.catch_up(&log),
        0,
        "an earlier run's events are not this run's"
    );
    assert_eq!(fresh.status, LaneStatus::Spawning);
}

/// Every `lane.permission.decided` is counted by its decision, and the latest are kept.
#[test]
fn permission_decisions_are_counted_and_the_latest_kept() {
    let mut doc = sample(1_795_266_690);
    for (seq, decision) in (1..).zip(["allow", "deny", "ask"].iter().cycle().take(25)) {
        let detail = serde_json::json!({
            "tool": "bash", "verb": "ls", "args": ["-la"], "cwd": "/w",
            "rule": "default_safe", "decision": decision, "reason": "a read",
            "profile": "workspace-write",
        });
        doc.apply_event(&LaneEvent {
            seq,
            at_ms: 1_795_266_700_000 + seq * 1000,
            kind: "lane.permission.decided".into(),
            lane: "a".into(),
            from: None,
            to: None,
            evidence: None,
            detail,
            source: None,
        });
    }
    let permissions = &doc.permissions;
    assert_eq!(
        (permissions.allowed, permissions.denied, permissions.asked),
        (9, 8, 8)
    );
    assert_eq!(permissions.recent.len(), RECENT_PERMISSION_DECISIONS);
    let last = permissions.recent.last().expect("a decision");
    assert_eq!(last.decision, "allow");
    assert_eq!(last.at, 1_795_266_725);
    assert_eq!(last.args, ["-la"]);
    let json = serde_json::to_value(&doc).expect("json");
    assert_eq!(json["permissions"]["allowed"], 9);
}
