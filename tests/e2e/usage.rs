//! A Claude Code lane's usage (`lane.usage`, `docs/events.md`) and its last state write: a
//! real spawned lane of the scripted agent, started with Claude Code's hook settings, whose
//! turn's answer reaches the transcript only after the agent is gone — as Claude Code writes
//! the turn's last assistant message after its `Stop` hook. Issue 27: the lane used to end
//! without waiting for that read, so its last write missed the usage (or the log grew after
//! it).

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// The model the transcript names, priced by the test: $10 / $20 per million tokens.
const MODEL: &str = "late-usage-model";

/// The turn's answer as the transcript records it: 1,000 input and 2,000 output tokens,
/// $0.05 at the test's prices.
fn answer_line() -> String {
    serde_json::json!({"type": "assistant", "message": {"id": "msg_late", "model": MODEL,
        "usage": {"input_tokens": 1000, "output_tokens": 2000}}})
    .to_string()
}

fn configure(s: &Setup) {
    let config = std::fs::read_to_string(&s.config).expect("config");
    let config = config.replace(
        "[profiles.scripted.launch]\n",
        "[profiles.scripted.launch]\nhooks = \"claude\"\n",
    );
    let config = format!(
        "{config}[prices.{MODEL:?}]\ninput_per_mtok = 10.0\noutput_per_mtok = 20.0\nas_of = \"2026-11-01\"\n"
    );
    std::fs::write(&s.config, config).expect("config");
}

/// The agent's turn: its transcript holds the prompt only; a writer of its own session (out
/// of the agent's process group, so stopping the agent does not stop it) waits until the agent
/// has exited, then half a second more — well inside the close's grace for the reads, well
/// after a close that does not wait — and appends the answer; then the `Stop` hook.
fn scenario(s: &Setup, transcript: &std::path::Path, answer: &std::path::Path) {
    let payload = serde_json::json!({"session_id": "s1",
        "transcript_path": transcript.display().to_string(),
        "last_assistant_message": "Done.", "background_tasks": []})
    .to_string();
    let writer = format!(
        "setsid sh -c 'while kill -0 \"$0\" 2>/dev/null; do sleep 0.05; done; sleep 0.5; \
         cat \"$1\" >> \"$2\"' \"$PPID\" {:?} {:?} </dev/null >/dev/null 2>&1 &",
        answer.display().to_string(),
        transcript.display().to_string()
    );
    let prompt_line = serde_json::json!({"type": "user", "message": {"content": "work"}});
    let text = format!(
        "[[prompt]]\nsteps = [\n  {{ do = \"write_file\", path = {:?}, content = {:?} }},\n  \
         {{ do = \"run\", command = {:?} }},\n  {{ do = \"say\", text = \"Done.\" }},\n  \
         {{ do = \"hook\", event = \"Stop\", payload = {:?} }},\n]\n",
        transcript.display().to_string(),
        format!("{prompt_line}\n"),
        writer,
        payload
    );
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), text).expect("scenario");
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn a_usage_written_after_the_agent_stopped_is_in_the_lanes_last_state_write() {
    let s = setup();
    configure(&s);
    let transcript = s.sandbox.dir.path().join("transcript.jsonl");
    let answer = s.sandbox.dir.path().join("answer.jsonl");
    std::fs::write(&answer, format!("{}\n", answer_line())).expect("answer");
    scenario(&s, &transcript, &answer);
    let out = s.spawn(
        r#"{"name": "late", "agent": "scripted", "prompt": "work"}"#,
        &["--output-format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // The spawn is over: its lane's files are as it left them.
    let log = s.repo.join(".git/clawpool/lanes/late/events.jsonl");
    let events = json_lines(&std::fs::read_to_string(&log).expect("the event log"));
    let seq_of = |kind: &str| {
        events
            .iter()
            .find(|e| e["kind"] == kind)
            .and_then(|e| e["seq"].as_u64())
            .unwrap_or_else(|| panic!("no {kind}: {events:#?}"))
    };
    let finished = seq_of("lane.finished");
    let usage = seq_of("lane.usage");
    assert!(
        usage > finished,
        "the usage came after the lane finished: {events:#?}"
    );
    let last = events
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .expect("events");
    for file in [
        s.repo.join(".git/clawpool/lanes/late/state.json"),
        s.lanes_dir().join("late/.claw/worker-state.json"),
    ] {
        let state: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("state")).expect("JSON");
        assert_eq!(
            state["lane_event"]["seq"],
            last,
            "{}: {state:#}",
            file.display()
        );
        assert_eq!(state["lane_status"], "finished", "{state:#}");
        assert_eq!(state["usage"]["turns"], 1, "{state:#}");
        assert_eq!(state["usage"]["total"]["output"], 2000, "{state:#}");
        let cost = state["cost_usd"].as_f64().expect("cost_usd");
        assert!((cost - 0.05).abs() < 1e-12, "{state:#}");
    }
}
