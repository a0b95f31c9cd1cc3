//! Running the policy's hooks on lane events (`docs/recovery.md`, Hooks).
//!
//! Every lane event goes past [`with_hooks`]' observer; each `[[hooks]]` entry whose `events`
//! select the event's kind is started in a tokio task of its own with the event's JSON on its
//! stdin ([`clawpool_recovery::run_hook`]: its own process group, killed at its timeout). The
//! lane never waits for a hook. How each run went is appended as one JSON line to
//! `hooks.log` next to the lane's `events.jsonl` (its registry folder), and a hook that failed,
//! timed out or could not start is also a tracing warning.
//!
//! Hooks still running when the command is done are waited for by [`drain`] (each at most its
//! timeout), so a hook on `lane.finished` is not cut off by `clawpool run` exiting.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clawpool_lanes::{LaneEvent, now_ms};
use clawpool_recovery::{HookSpec, LaneFacts, Policy, hooks_for, run_hook};
use serde_json::json;
use tokio::task::JoinHandle;

/// The file, next to a lane's `events.jsonl`, that records every hook run.
pub const HOOKS_LOG: &str = "hooks.log";

/// Hook runs not known to be over.
static RUNNING: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// An event observer: `inner`, then the hooks of `policy` that select the event, run in the
/// background and logged to `hooks.log` in the folder of `events_path`.
pub fn with_hooks(
    inner: Box<dyn Fn(&LaneEvent) + Send + Sync>,
    policy: Arc<Policy>,
    events_path: &Path,
) -> Box<dyn Fn(&LaneEvent) + Send + Sync> {
    let log = events_path
        .parent()
        .map_or_else(|| PathBuf::from(HOOKS_LOG), |dir| dir.join(HOOKS_LOG));
    Box::new(move |event| {
        inner(event);
        run_hooks_for(&policy, event, &log);
    })
}

/// Starts every hook of `policy` that selects `event`, each in a task of its own; returns at
/// once. `log` is the `hooks.log` to append outcomes to.
pub fn run_hooks_for(policy: &Policy, event: &LaneEvent, log: &Path) {
    let mut hooks = hooks_for(policy.hooks(), event.kind.as_str()).peekable();
    if hooks.peek().is_none() {
        return;
    }
    let input = match serde_json::to_vec(event) {
        Ok(input) => Arc::new(input),
        Err(err) => {
            tracing::warn!(event = %event.kind, error = %err, "cannot serialise the event for hooks");
            return;
        }
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(event = %event.kind, "hooks not run: no async runtime on this thread");
        return;
    };
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    running.retain(|task| !task.is_finished());
    for spec in hooks {
        let run = Run {
            spec: spec.clone(),
            input: Arc::clone(&input),
            log: log.to_owned(),
            lane: event.lane.clone(),
            kind: event.kind.to_string(),
            seq: event.seq,
        };
        running.push(runtime.spawn(run.go()));
    }
}

/// Runs the hook a policy `notify` rule names, in a task of its own, with
/// `{"rule", "lane", "facts"}` on its stdin; returns at once. Logged to `log` like event hooks,
/// with `event` = `notify` and the rule's name.
pub fn notify(policy: &Policy, hook: &str, rule: &str, facts: &LaneFacts, log: &Path) {
    let Some(spec) = policy.hook(hook) else {
        return;
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(rule, "notify hook not run: no async runtime on this thread");
        return;
    };
    let input = json!({"rule": rule, "lane": facts.lane, "facts": facts});
    let run = Run {
        spec: spec.clone(),
        input: Arc::new(input.to_string().into_bytes()),
        log: log.to_owned(),
        lane: facts.lane.clone(),
        kind: format!("notify {rule}"),
        seq: 0,
    };
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    running.retain(|task| !task.is_finished());
    running.push(runtime.spawn(run.go()));
}

/// Waits for the hook runs started so far (each ends by its timeout at the latest).
pub async fn drain() {
    loop {
        let tasks = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|p| p.into_inner()));
        if tasks.is_empty() {
            return;
        }
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// One hook run for one event.
struct Run {
    spec: HookSpec,
    input: Arc<Vec<u8>>,
    log: PathBuf,
    lane: String,
    kind: String,
    seq: u64,
}

impl Run {
    async fn go(self) {
        let started_at_ms = now_ms();
        let result = run_hook(&self.spec, &self.input).await;
        let ended_at_ms = now_ms();
        let mut line = json!({
            "hook": self.spec.name,
            "lane": self.lane,
            "event": self.kind,
            "seq": self.seq,
            "started_at_ms": started_at_ms,
            "ended_at_ms": ended_at_ms,
            "timeout_ms": u64::try_from(self.spec.timeout.as_millis()).unwrap_or(u64::MAX),
        });
        let failed = match &result {
            Ok(outcome) => {
                let status = if outcome.timed_out {
                    "timed_out"
                } else if outcome.succeeded() {
                    "succeeded"
                } else {
                    "failed"
                };
                line["outcome"] = status.into();
                line["exit"] = outcome.exit.into();
                line["signal"] = outcome.signal.into();
                line["timed_out"] = outcome.timed_out.into();
                line["duration_ms"] = u64::try_from(outcome.duration.as_millis())
                    .unwrap_or(u64::MAX)
                    .into();
                line["stderr_tail"] = outcome.stderr_tail.clone().into();
                line["stdin_error"] = outcome.stdin_error.clone().into();
                line["message"] = outcome.describe().into();
                (!outcome.succeeded()).then(|| outcome.describe())
            }
            Err(err) => {
                line["outcome"] = "error".into();
                line["message"] = err.to_string().into();
                Some(err.to_string())
            }
        };
        if let Some(why) = failed {
            tracing::warn!(
                hook = %self.spec.name,
                lane = %self.lane,
                event = %self.kind,
                seq = self.seq,
                "hook {} on {} #{}: {why}",
                self.spec.name,
                self.kind,
                self.seq
            );
        }
        if let Err(err) = append_line(&self.log, &line.to_string()) {
            tracing::warn!(
                hook = %self.spec.name,
                file = %self.log.display(),
                error = %err,
                "cannot append to the hooks log"
            );
        }
    }
}

/// Appends `line` and a newline to `file` in one write.
fn append_line(file: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    f.write_all(format!("{line}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, seq: u64) -> LaneEvent {
        LaneEvent {
            seq,
            at_ms: now_ms(),
            kind: clawpool_lanes::LaneEventKind::parse(kind),
            lane: "fix-login".to_owned(),
            from: None,
            to: None,
            evidence: None,
            detail: json!({"n": seq}),
            source: None,
        }
    }

    fn log_lines(file: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON document per line"))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn selected_events_reach_their_hooks_and_every_run_is_logged() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("got.jsonl");
        let policy = Policy::from_toml(
            &format!(
                r#"
[[hooks]]
name = "record"
command = ["/bin/sh", "-c", "cat >> \"$0\"; echo >> \"$0\"", {out:?}]
events = ["lane.finished"]

[[hooks]]
name = "broken"
command = "echo 'pager: 401 unauthorized' >&2; exit 3"
events = ["lane.*"]

[[hooks]]
name = "missing"
command = ["/nonexistent/clawpool-hook"]
events = ["lane.finished"]
"#,
                out = out.display().to_string()
            ),
            "test-policy.toml",
        )
        .expect("policy");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let inner_seen = Arc::clone(&seen);
        let observer = with_hooks(
            Box::new(move |e: &LaneEvent| {
                inner_seen
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(e.seq)
            }),
            Arc::new(policy),
            &dir.path().join("events.jsonl"),
        );
        let finished = event("lane.finished", 2);
        observer(&event("lane.ready", 1));
        observer(&finished);
        drain().await;
        assert_eq!(*seen.lock().unwrap_or_else(|p| p.into_inner()), [1, 2]);
        let got: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&out)
                .expect("the record hook ran")
                .trim(),
        )
        .expect("the event JSON");
        assert_eq!(got, serde_json::to_value(&finished).expect("event"));
        let log = log_lines(&dir.path().join(HOOKS_LOG));
        let runs = |hook: &str| {
            log.iter()
                .filter(|l| l["hook"] == hook)
                .map(|l| (l["seq"].as_u64().unwrap_or(0), l["outcome"].to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(runs("record"), [(2, "\"succeeded\"".to_owned())], "{log:?}");
        let mut broken = runs("broken");
        broken.sort();
        assert_eq!(
            broken,
            [(1, "\"failed\"".to_owned()), (2, "\"failed\"".to_owned())]
        );
        assert_eq!(runs("missing"), [(2, "\"error\"".to_owned())]);
        let failed = log.iter().find(|l| l["hook"] == "broken").expect("logged");
        assert_eq!(failed["exit"], 3);
        assert!(
            failed["message"]
                .as_str()
                .is_some_and(|m| m.ends_with(": pager: 401 unauthorized")),
            "{failed}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_no_hook_selects_start_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let policy = Policy::defaults().expect("defaults");
        run_hooks_for(
            &policy,
            &event("lane.finished", 1),
            &dir.path().join(HOOKS_LOG),
        );
        drain().await;
        assert!(!dir.path().join(HOOKS_LOG).exists());
    }
}
