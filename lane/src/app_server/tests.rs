//! What the app server's messages mean to the lane, on the message shapes Codex 0.169.0 sends
//! (recorded from a real `codex app-server` with its TUI attached).

use super::*;

const MAIN: &str = "01a20fe9-7ef8-7e01-a4f7-c6baf854d016";
const TITLE: &str = "01a20fe9-90b8-7372-bb8e-7313bf1934a9";

fn thread_started(id: &str, ephemeral: bool) -> Value {
    json!({"method": "thread/started", "params": {"thread": {
        "id": id, "ephemeral": ephemeral, "parentThreadId": null, "preview": ""}}})
}

fn status(thread: &str, kind: &str, flags: &[&str]) -> Value {
    let status = if kind == "active" {
        json!({"type": kind, "activeFlags": flags})
    } else {
        json!({"type": kind})
    };
    json!({"method": "thread/status/changed", "params": {"threadId": thread, "status": status}})
}

fn item(method: &str, kind: &str) -> Value {
    json!({"method": method, "params": {"threadId": MAIN, "turnId": "t1",
        "item": {"type": kind, "id": "i1", "command": "sleep 8"}}})
}

fn means(observer: &mut Observer, message: &Value) -> Option<String> {
    observer
        .on_message(message)
        .0
        .map(|fact| fact.fact.name().to_owned())
}

#[test]
fn a_turn_of_the_tuis_thread_reads_as_prompt_tool_and_stop() {
    let mut observer = Observer::default();
    let (started, request) = observer.on_message(&thread_started(MAIN, false));
    let started = started.expect("the TUI's thread is a fact");
    assert_eq!(started.fact.name(), "SessionStart");
    assert_eq!(started.fact.session_id.as_deref(), Some(MAIN));
    assert_eq!(request, None);

    // The thread turns active: a prompt taken, and the lane rejoins the thread to hear its
    // turns and items.
    let (active, resume) = observer.on_message(&status(MAIN, "active", &[]));
    assert_eq!(
        active.expect("a fact").fact.event,
        HookEvent::UserPromptSubmit {
            prompt: String::new()
        }
    );
    let resume = resume.expect("the lane rejoins the thread");
    assert_eq!(resume["method"], "thread/resume");
    assert_eq!(resume["params"]["threadId"], MAIN);
    // Rejoined: no second request on the next turn.
    let (_, none) = observer.on_message(
        &json!({"id": resume["id"], "result": {"thread": {}, "model": "gpt-5.1-codex"}}),
    );
    assert_eq!(none, None);
    // Its reply named the thread's model: the usage says what it is priced as.
    let usage = observer
        .on_message(&json!({"method": "thread/tokenUsage/updated", "params": {
            "threadId": MAIN, "turnId": "t1", "tokenUsage": {
                "total": {"inputTokens": 2, "cachedInputTokens": 0, "outputTokens": 1},
                "last": {"inputTokens": 2, "cachedInputTokens": 0, "outputTokens": 1}}}}))
        .0
        .expect("usage is a fact");
    assert_eq!(usage.detail()["model"], "gpt-5.1-codex");

    let tool = observer
        .on_message(&item("item/started", "commandExecution"))
        .0
        .expect("a tool item");
    assert_eq!(
        tool.fact.event,
        HookEvent::PreToolUse {
            tool_name: "commandExecution".into(),
            tool_input: json!("sleep 8"),
        }
    );
    assert_eq!(tool.detail()["command"], "sleep 8");
    assert_eq!(
        means(&mut observer, &item("item/completed", "commandExecution")).as_deref(),
        Some("PostToolUse")
    );
    // A message is not a tool: recorded, decides nothing.
    assert_eq!(
        means(&mut observer, &item("item/completed", "agentMessage")).as_deref(),
        Some("item/completed")
    );
    assert_eq!(
        means(&mut observer, &status(MAIN, "idle", &[])).as_deref(),
        Some("Stop")
    );
    // The next turn: no new rejoining.
    assert_eq!(observer.on_message(&status(MAIN, "active", &[])).1, None);
}

#[test]
fn approval_is_a_permission_request_once_and_side_threads_are_not_the_lanes() {
    let mut observer = Observer::default();
    observer.on_message(&thread_started(MAIN, false));
    observer.on_message(&status(MAIN, "active", &[]));
    assert_eq!(
        means(
            &mut observer,
            &status(MAIN, "active", &["waitingOnApproval"])
        )
        .as_deref(),
        Some("PermissionRequest")
    );
    // The same flag again, then the approval answered: recorded, no new request, no new turn.
    assert_eq!(
        means(
            &mut observer,
            &status(MAIN, "active", &["waitingOnApproval"])
        )
        .as_deref(),
        Some("thread/status/changed")
    );
    assert_eq!(
        means(&mut observer, &status(MAIN, "active", &[])).as_deref(),
        Some("thread/status/changed")
    );
    // Codex's title thread (ephemeral) and its status say nothing about the lane's turn.
    assert_eq!(means(&mut observer, &thread_started(TITLE, true)), None);
    assert_eq!(means(&mut observer, &status(TITLE, "idle", &[])), None);
    // The turn ends once: a second idle status is no second stop.
    assert_eq!(
        means(&mut observer, &status(MAIN, "idle", &[])).as_deref(),
        Some("Stop")
    );
    assert_eq!(
        means(&mut observer, &status(MAIN, "idle", &[])).as_deref(),
        Some("thread/status/changed")
    );
}

#[test]
fn a_refused_rejoining_is_asked_again_at_the_next_turn_and_usage_is_kept() {
    let mut observer = Observer::default();
    observer.on_message(&thread_started(MAIN, false));
    let (_, first) = observer.on_message(&status(MAIN, "active", &[]));
    let first = first.expect("rejoining");
    observer.on_message(&json!({"id": first["id"],
        "error": {"code": -32600, "message": "no rollout found"}}));
    observer.on_message(&status(MAIN, "idle", &[]));
    let (_, second) = observer.on_message(&status(MAIN, "active", &[]));
    assert_ne!(second.expect("asked again")["id"], first["id"]);

    let usage = observer
        .on_message(&json!({"method": "thread/tokenUsage/updated", "params": {
            "threadId": MAIN, "turnId": "t2", "tokenUsage": {
                "total": {"inputTokens": 20, "cachedInputTokens": 4, "outputTokens": 10},
                "last": {"inputTokens": 10, "cachedInputTokens": 2, "outputTokens": 5}}}}))
        .0
        .expect("usage is a fact");
    let detail = usage.detail();
    assert_eq!(detail["event"], "thread/tokenUsage/updated");
    assert_eq!(detail["usage"]["last"]["inputTokens"], 10);
    assert_eq!(detail["usage"]["total"]["outputTokens"], 10);
    // A request meant for the TUI (an approval) is never the lane's to answer.
    let request = json!({"id": 7, "method": "item/commandExecution/requestApproval",
        "params": {"threadId": MAIN}});
    assert_eq!(observer.on_message(&request), (None, None));
}

/// Reconnected to a server whose TUI's thread is mid-turn (as after `clawpool adopt`): the
/// lane lists the loaded threads, rejoins them in order until one is the TUI's (Codex's title
/// thread has no rollout and is refused), and that thread's status is its first fact — active,
/// a turn running — then the turn's messages reach it, and the thread idle again is the Stop.
#[test]
fn a_reconnecting_observer_rejoins_the_tuis_thread_and_reports_its_status() {
    let (mut observer, list) = Observer::reconnecting();
    assert_eq!(list["method"], "thread/loaded/list");
    // A message of the thread before the lane knows it is the TUI's decides nothing.
    assert_eq!(
        observer.on_message(&status(MAIN, "active", &[])),
        (None, None)
    );
    // Another reply than the one asked for is not the list.
    assert_eq!(
        observer.on_message(&json!({"id": 99, "result": {"data": [MAIN]}})),
        (None, None)
    );
    let (none, title) =
        observer.on_message(&json!({"id": list["id"], "result": {"data": [TITLE, MAIN]}}));
    assert_eq!(none, None);
    let title = title.expect("the first loaded thread is tried");
    assert_eq!(title["method"], "thread/resume");
    assert_eq!(title["params"]["threadId"], TITLE);
    let (none, main) = observer.on_message(&json!({"id": title["id"],
        "error": {"code": -32600, "message": format!("no rollout found for thread id {TITLE}")}}));
    assert_eq!(none, None);
    let main = main.expect("then the next");
    assert_eq!(main["params"]["threadId"], MAIN);
    let (rejoined, request) = observer.on_message(&json!({"id": main["id"], "result": {"thread": {
        "id": MAIN, "ephemeral": false, "parentThreadId": null,
        "status": {"type": "active", "activeFlags": []}}}}));
    assert_eq!(request, None, "rejoined: nothing more to ask");
    let rejoined = rejoined.expect("the thread's status is a fact");
    assert_eq!(rejoined.message, "thread/resume");
    assert_eq!(rejoined.fact.session_id.as_deref(), Some(MAIN));
    assert_eq!(
        rejoined.fact.event,
        HookEvent::UserPromptSubmit {
            prompt: String::new()
        }
    );
    assert_eq!(rejoined.detail()["status"], "active");
    assert_eq!(
        means(&mut observer, &item("item/completed", "commandExecution")).as_deref(),
        Some("PostToolUse")
    );
    assert_eq!(
        means(&mut observer, &status(MAIN, "idle", &[])).as_deref(),
        Some("Stop")
    );
}

/// A thread already idle when the lane rejoins it is recorded and ends no turn (the screen
/// decides a turn that ended while no supervisor listened); a server with no thread of the
/// TUI's leaves the lane waiting for one to start.
#[test]
fn a_reconnecting_observer_reports_an_idle_thread_as_no_stop() {
    let (mut observer, list) = Observer::reconnecting();
    let (_, main) = observer.on_message(&json!({"id": list["id"], "result": {"data": [MAIN]}}));
    let main = main.expect("rejoined");
    let rejoined = observer
        .on_message(&json!({"id": main["id"], "result": {"thread": {
            "id": MAIN, "ephemeral": false, "parentThreadId": null, "status": {"type": "idle"}}}}))
        .0
        .expect("a fact");
    assert_eq!(rejoined.fact.name(), "thread/resume");
    assert_eq!(rejoined.detail()["status"], "idle");

    let (mut observer, list) = Observer::reconnecting();
    assert_eq!(
        observer.on_message(&json!({"id": list["id"], "result": {"data": []}})),
        (None, None)
    );
    assert_eq!(
        means(&mut observer, &thread_started(MAIN, false)).as_deref(),
        Some("SessionStart")
    );
}
