//! The progress line of `spawn`, `verify` and `gc`: drawn on a terminal (a real PTY, made by
//! util-linux `script`, whose output is every byte written to it, a line cleared afterwards
//! included), never in JSON mode and never when stdout is not a terminal.

use std::process::Output;

use crate::spawn::{Setup, setup};

const TWO_LANES: &str = r#"{"defaults": {"agent": "scripted"}, "lanes": [
  {"name": "alpha", "prompt": "do alpha", "acceptance_tests": ["sleep 0.5"]},
  {"name": "beta", "prompt": "do beta", "acceptance_tests": ["sleep 0.5"]}]}"#;

/// What each command's progress line says.
const SPAWN_PROGRESS: &str = "lanes done";
const VERIFY_PROGRESS: &str = "verifying";
const GC_PROGRESS: &str = "lanes checked";

/// `clawpool ARGS` in the sandbox, stdout a pipe.
fn piped(s: &Setup, args: &[&str]) -> Output {
    s.sandbox
        .clawpool()
        .args(args)
        .current_dir(&s.repo)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("clawpool runs")
}

/// `clawpool ARGS` in the sandbox on a terminal: everything written to it.
fn on_a_terminal(s: &Setup, args: &[&str]) -> String {
    let command = std::iter::once(
        clawpool_tests::workspace_bin("clawpool")
            .display()
            .to_string(),
    )
    .chain(args.iter().map(|a| a.to_string()))
    .map(|word| format!("'{word}'"))
    .collect::<Vec<_>>()
    .join(" ");
    // A new PTY has no size (0×0); a person's terminal has one.
    let command = format!("stty cols 120 rows 40; exec {command}");
    let out = s
        .sandbox
        .clean_command("script")
        // A terminal that says what it is (indicatif draws nothing on a dumb one).
        .env("TERM", "xterm-256color")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .current_dir(&s.repo)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// No progress line: none of the lines' words, no carriage return, no escape sequence.
fn assert_no_progress(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for word in [SPAWN_PROGRESS, VERIFY_PROGRESS, GC_PROGRESS, "\r", "\x1b["] {
        assert!(!text.contains(word), "{what} has {word:?}:\n{text}");
    }
}

#[test]
fn progress_lines_are_drawn_on_a_terminal_only_and_never_in_json() {
    let s = setup();
    let packet = s.sandbox.dir.path().join("packet.json");
    std::fs::write(&packet, TWO_LANES).expect("packet");
    let packet = packet.display().to_string();
    let config = s.config.display().to_string();

    // spawn: JSON and text off a terminal have none; on a terminal the line counts lanes done.
    let json = piped(
        &s,
        &[
            "spawn",
            &packet,
            "--config",
            &config,
            "--output-format",
            "json",
        ],
    );
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    assert_no_progress("spawn's JSON", &json.stdout);
    let text = piped(&s, &["spawn", &packet, "--config", &config, "--rerun"]);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    assert_no_progress("spawn's text off a terminal", &text.stdout);
    let terminal = on_a_terminal(&s, &["spawn", &packet, "--config", &config, "--rerun"]);
    // (The line is redrawn at most 20 times a second: its last count may never be drawn.)
    assert!(terminal.contains("/2 lanes done"), "{terminal:?}");

    // verify: a spinner while the commands run.
    let json = piped(&s, &["verify", "alpha", "--output-format", "json"]);
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    assert_no_progress("verify's JSON", &json.stdout);
    let text = piped(&s, &["verify", "alpha"]);
    assert_no_progress("verify's text off a terminal", &text.stdout);
    let terminal = on_a_terminal(&s, &["verify", "alpha"]);
    assert!(
        terminal.contains("verifying alpha at targeted"),
        "{terminal:?}"
    );
    assert!(terminal.contains("targeted: green"), "{terminal:?}");

    // gc (the lanes' work is not merged: kept, so it can run again).
    let json = piped(&s, &["gc", "--output-format", "json"]);
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    assert_no_progress("gc's JSON", &json.stdout);
    let text = piped(&s, &["gc"]);
    assert_no_progress("gc's text off a terminal", &text.stdout);
    let terminal = on_a_terminal(&s, &["gc"]);
    assert!(terminal.contains("lanes checked"), "{terminal:?}");
    assert!(terminal.contains("kept"), "{terminal:?}");
}
