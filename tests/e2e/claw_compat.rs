//! The state file as claw-code's own types read it (issue #11, point 6): an orchestrator
//! written against claw-code's `WorkerStatus` and `WorkerEvent`
//! (`rust/crates/runtime/src/worker_boot.rs` of the pinned claw-code archive in
//! `../shared/claw-code/`) deserializes the fields claw-code itself writes — `worker_id`,
//! `status`, `is_ready`, `trust_gate_cleared`, `prompt_in_flight`, `last_event`, `updated_at`,
//! `seconds_since_update` — from clawpool's state file in every state a lane can be in.
//!
//! The reader is a small program built here against the archive's `runtime` crate (a
//! test-only build in the test's scratch folder, never a dependency of clawpool), run on state
//! files made through `clawpool_lanes` for every status, subphase and failure class, and on
//! one a real lane wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

use clawpool_lanes::state_file::{Transport, TransportKind};
use clawpool_lanes::{
    EventLog, Evidence, LaneEventKind, LaneState, StateFileWriter, WorkerStateDoc,
};
use clawpool_recovery::facts::{ALL_FAILURE_CLASSES, ALL_STATUSES, ALL_SUBPHASES};

use crate::spawn::{setup, stderr};

/// The pinned claw-code source archive, beside the project checkout.
fn claw_code_archive() -> PathBuf {
    let archive = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/claw-code/claw-code-08106b0c.tar.gz");
    assert!(
        archive.is_file(),
        "the claw-code archive is missing at {} (it comes with shared/, beside the checkout)",
        archive.display()
    );
    archive
}

/// The reader: claw-code's `runtime` crate, and a struct of the fields claw-code's own
/// `emit_state_file` writes, typed as claw-code types them.
const READER: &str = r#"
use runtime::worker_boot::{WorkerEvent, WorkerStatus};
use serde::Deserialize;

#[allow(dead_code)]
#[derive(Debug, Deserialize)]
struct ClawSnapshot {
    worker_id: String,
    status: WorkerStatus,
    is_ready: bool,
    trust_gate_cleared: bool,
    prompt_in_flight: bool,
    last_event: Option<WorkerEvent>,
    updated_at: u64,
    seconds_since_update: u64,
}

fn main() {
    let mut failed = false;
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).expect("state file");
        match serde_json::from_str::<ClawSnapshot>(&text) {
            Ok(snapshot) => println!(
                "ok {path} {} {:?}",
                snapshot.status,
                snapshot.last_event.map(|e| e.kind)
            ),
            Err(err) => {
                println!("error {path}: {err}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
"#;

/// Builds the reader (once per test binary's scratch folder; later runs reuse the build).
fn build_reader() -> PathBuf {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("claw-code-reader");
    let workspace = scratch.join("claw-code/rust");
    if !workspace.is_dir() {
        std::fs::create_dir_all(&scratch).expect("scratch folder");
        let status = Command::new("tar")
            .arg("-xzf")
            .arg(claw_code_archive())
            .arg("-C")
            .arg(&scratch)
            .status()
            .expect("tar runs");
        assert!(status.success(), "unpacking the claw-code archive");
    }
    // A member of claw-code's own workspace, so its lock file pins the dependencies.
    let crate_dir = workspace.join("crates/clawpool-state-reader");
    std::fs::create_dir_all(crate_dir.join("src")).expect("reader crate");
    std::fs::write(
        crate_dir.join("Cargo.toml"),
        "[package]\nname = \"clawpool-state-reader\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nruntime = { path = \"../runtime\" }\nserde = { version = \"1\", features = [\"derive\"] }\nserde_json = \"1\"\n",
    )
    .expect("reader manifest");
    std::fs::write(crate_dir.join("src/main.rs"), READER).expect("reader source");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // The outer build's settings are not the reader's.
    for (key, _) in std::env::vars_os() {
        if key
            .to_str()
            .is_some_and(|k| k.starts_with("CARGO_") && k != "CARGO_HOME")
            || key == "RUSTFLAGS"
        {
            cargo.env_remove(&key);
        }
    }
    let out = cargo
        .args(["build", "--quiet", "-p", "clawpool-state-reader"])
        .arg("--target-dir")
        .arg(scratch.join("target"))
        .current_dir(&workspace)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building the claw-code reader failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    scratch.join("target/debug/clawpool-state-reader")
}

/// A state file after `events` (kind, target state) on a fresh lane document.
fn state_after(dir: &Path, name: &str, events: &[(LaneEventKind, Option<LaneState>)]) -> PathBuf {
    let worktree = dir.join(name);
    let mut doc = WorkerStateDoc::new(
        format!("{name}-1"),
        name,
        "claude",
        worktree.display().to_string(),
        Transport {
            kind: TransportKind::Tmux,
            session: Some(format!("clawpool-x:{name}")),
        },
        1_795_000_000,
    );
    let log = EventLog::in_memory(name);
    let mut from = Some(doc.lane_state());
    for (kind, to) in events {
        let evidence = to.map(|_| Evidence {
            rule: "rule".into(),
            region: "screen".into(),
            matched: "text".into(),
        });
        let detail = match kind {
            LaneEventKind::TrustResolved => serde_json::json!({"method": "manual"}),
            LaneEventKind::PromptSent => serde_json::json!({"attempt": 1}),
            _ => serde_json::Value::Null,
        };
        let event = log
            .record(kind.clone(), to.and(from), *to, evidence, detail)
            .expect("in-memory log");
        doc.apply_event(&event);
        from = Some(doc.lane_state());
    }
    StateFileWriter::for_worktree(&worktree)
        .write(&doc)
        .expect("state file written");
    clawpool_lanes::state_file_path(&worktree)
}

#[test]
fn claw_codes_own_types_read_the_state_file_in_every_state() {
    let reader = build_reader();
    let dir = tempfile::tempdir().expect("scratch");
    let mut states: Vec<LaneState> = ALL_STATUSES
        .iter()
        .filter_map(|s| LaneState::of_plain(*s))
        .collect();
    states.extend(ALL_SUBPHASES.iter().map(|s| LaneState::Blocked(*s)));
    states.extend(ALL_FAILURE_CLASSES.iter().map(|c| LaneState::Failed(*c)));
    let mut files = Vec::new();
    for (i, state) in states.iter().enumerate() {
        // Each state reached before and after a prompt was sent, and followed by events
        // claw-code has no kind for (the last event it has one for stays).
        let to = Some(*state);
        let before = format!("lane-{i}-before");
        files.push(state_after(
            dir.path(),
            &before,
            &[
                (LaneEventKind::Started, Some(LaneState::Spawning)),
                (state.status().transition_kind(), to),
            ],
        ));
        let after = format!("lane-{i}-after");
        files.push(state_after(
            dir.path(),
            &after,
            &[
                (LaneEventKind::Started, Some(LaneState::Spawning)),
                (LaneEventKind::TrustResolved, None),
                (LaneEventKind::Ready, Some(LaneState::ReadyForPrompt)),
                (LaneEventKind::PromptSent, None),
                (state.status().transition_kind(), to),
                (LaneEventKind::CommitCreated, None),
            ],
        ));
    }
    // A lane that has had no event yet.
    files.push(state_after(dir.path(), "fresh", &[]));
    // And a state file a real lane wrote.
    let s = setup();
    let out = s.spawn(
        r#"{"defaults": {"agent": "scripted"}, "lanes": [{"name": "real", "prompt": "do it"}]}"#,
        &["--output-format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    files.push(clawpool_lanes::state_file_path(&s.lanes_dir().join("real")));

    let out = Command::new(&reader)
        .args(&files)
        .output()
        .expect("the reader runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claw-code's types refused some files:\n{report}"
    );
    assert_eq!(
        report.lines().filter(|l| l.starts_with("ok ")).count(),
        files.len(),
        "{report}"
    );
    // The real lane finished, as claw-code says it.
    let real = report.lines().last().unwrap_or_default();
    assert!(real.ends_with("finished Some(Finished)"), "{real}");
}
