//! The PTY transport: spawning, input, terminal queries, exit and stop semantics, process
//! groups, raw log, coalesced notifications.

use std::time::{Duration, Instant};

use clawpool_pty::{ExitStatus, Input, Key, RawLogConfig, SpawnError, SpawnSpec, TermSize, Worker};

use crate::support::{alive, assert_resize_reaches, exited, gone, pid_on_screen, screen_shows};

fn sh(script: &str) -> SpawnSpec {
    SpawnSpec::new("sh", std::env::temp_dir()).args(["-c", script])
}

async fn spawn(spec: SpawnSpec) -> Worker {
    Worker::spawn_pty(spec).await.expect("worker starts")
}

#[tokio::test]
async fn typed_text_and_enter_reach_the_program() {
    let worker = spawn(sh("printf 'name? '; read name; echo \"hello <$name>\"")).await;
    screen_shows(&worker, "name?").await;
    worker.send(&Input::Text("ada".into())).await.expect("type");
    worker.send(&Input::Key(Key::Enter)).await.expect("enter");
    screen_shows(&worker, "hello <ada>").await;
    assert_eq!(exited(&worker).await, ExitStatus::Exited(0));
}

#[tokio::test]
async fn exit_codes_and_signals_are_reported() {
    let worker = spawn(sh("exit 7")).await;
    assert_eq!(exited(&worker).await, ExitStatus::Exited(7));
    let worker = spawn(sh("kill -USR1 $$")).await;
    assert_eq!(exited(&worker).await, ExitStatus::Signaled(libc::SIGUSR1));
}

#[tokio::test]
async fn the_final_screen_holds_everything_written_before_exit() {
    let worker = spawn(sh(
        "i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; printf last",
    ))
    .await;
    exited(&worker).await;
    let snap = worker.snapshot();
    assert!(snap.contains("last"), "{}", snap.text());
    assert!(worker.scrollback().iter().any(|l| l == "line0"));
}

#[tokio::test]
async fn terminal_queries_are_answered() {
    // The reply to "where is the cursor" comes back on the program's input, as from xterm.
    let script = "stty raw -echo; printf 'ab\\033[6n'; r=$(dd bs=1 count=6 2>/dev/null); \
                  stty sane; printf '\\r\\nreply:%s\\r\\n' \"$(printf %s \"$r\" | tr '\\033' E)\"";
    let worker = spawn(sh(script)).await;
    screen_shows(&worker, "reply:E[1;3R").await;
    exited(&worker).await;
}

#[tokio::test]
async fn bracketed_paste_wraps_text_when_the_program_asked_for_it() {
    let worker = spawn(sh(
        "printf '\\033[?2004hready'; stty -icanon -echo; exec cat -v",
    ))
    .await;
    screen_shows(&worker, "ready").await;
    worker.send(&Input::Text("hi".into())).await.expect("paste");
    screen_shows(&worker, "^[[200~hi^[[201~").await;
    worker.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn clean_environment_has_only_what_was_given() {
    let mut spec = sh("echo \"[$FOO][$HOME][$TERM]\"").env("FOO", "bar");
    spec.clean_env = true;
    let worker = spawn(spec).await;
    exited(&worker).await;
    assert!(
        worker.snapshot().contains("[bar][][xterm-256color]"),
        "{}",
        worker.snapshot().text()
    );
}

#[tokio::test]
async fn the_worker_leads_its_own_session_on_its_terminal_and_inherits_nothing_else() {
    // A descriptor this process holds without close-on-exec, which the worker must not get
    // (`/dev/null`: a process another test starts meanwhile may inherit it harmlessly).
    // SAFETY: opens a file by a NUL-terminated path; closed below.
    let held = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
    assert!(held > 2, "open: {}", std::io::Error::last_os_error());
    // `/proc/PID/stat` fields 1 and 5-8: pid, process group, session, controlling tty, the
    // tty's foreground group.
    // The signal mask and ignored signals of the shell itself, read as its last command
    // replacing it (while the shell waits for a child it blocks every signal).
    let script = format!(
        "cut -d' ' -f1,5-8 /proc/$$/stat; \
         [ -e /proc/$$/fd/{held} ] && echo held=open || echo held=closed; \
         echo \"shell=[$SHELL]\"; exec grep -E '^Sig(Blk|Ign)' /proc/self/status"
    );
    let mut spec = sh(&script).env("PATH", std::env::var_os("PATH").unwrap_or_default());
    spec.clean_env = true;
    let worker = spawn(spec).await;
    exited(&worker).await;
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(held) };
    let text = worker.snapshot().text();
    let line = |start: &str| -> Vec<&str> {
        let found = text.lines().find(|l| l.starts_with(start));
        found
            .unwrap_or_else(|| panic!("no {start} line in {text}"))
            .split_whitespace()
            .collect()
    };
    let first = text.lines().next().unwrap_or_default();
    let stat: Vec<&str> = first.split_whitespace().collect();
    let [pid, group, session, tty, foreground] = stat[..] else {
        panic!("not a stat line: {text}");
    };
    assert_eq!((group, session, foreground), (pid, pid, pid), "{text}");
    assert_ne!(tty, "0", "no controlling terminal: {text}");
    // Nothing blocked, nothing ignored (Rust programs ignore SIGPIPE; the worker must not).
    assert_eq!(line("SigBlk:")[1], "0000000000000000", "{text}");
    assert_eq!(line("SigIgn:")[1], "0000000000000000", "{text}");
    assert_eq!(line("held=")[0], "held=closed", "{text}");
    // A worker whose environment has no SHELL gets the user's login shell.
    let shell = line("shell=")[0];
    assert!(shell.len() > "shell=[]".len(), "{text}");
}

#[tokio::test]
async fn resize_reaches_the_program() {
    let worker = spawn(sh("read x; stty size")).await;
    assert_resize_reaches(&worker).await;
    assert_eq!(
        worker.snapshot().size,
        TermSize {
            rows: 30,
            cols: 100
        }
    );
}

#[tokio::test]
async fn stop_terminates_the_whole_process_group_then_kills_it() {
    // The shell ignores SIGTERM, so only the SIGKILL after the grace period ends it; its
    // child must go too.
    let worker = spawn(sh("trap '' TERM; sleep 1000 & echo child=$!; wait")).await;
    let snap = screen_shows(&worker, "child=").await;
    let child = pid_on_screen(&snap, "child");
    assert!(alive(child));
    let status = worker.stop(Duration::from_millis(300)).await;
    assert_eq!(status, ExitStatus::Signaled(libc::SIGKILL));
    gone(child).await;
}

#[tokio::test]
async fn a_grandchild_holding_the_terminal_does_not_hold_up_the_exit() {
    // The grandchild ignores SIGHUP and keeps the terminal open after its parent exits: the
    // parent's exit is still reported, and the grandchild does not survive as an orphan.
    let started = Instant::now();
    let worker = spawn(sh(
        "(trap '' HUP; exec sleep 1000) & echo grandchild=$!; exit 3",
    ))
    .await;
    assert_eq!(exited(&worker).await, ExitStatus::Exited(3));
    assert!(started.elapsed() < Duration::from_secs(10));
    let grandchild = pid_on_screen(&worker.snapshot(), "grandchild");
    gone(grandchild).await;
}

#[tokio::test]
async fn no_task_outlives_a_finished_worker() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let worker = spawn(sh("echo hi")).await;
    let mut changes = worker.changes();
    exited(&worker).await;
    // The stream of changes ends when the coalescing task, the last one, returns.
    while changes.changed().await {}
    drop(worker);
    for _ in 0..100 {
        if metrics.num_alive_tasks() == before {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(metrics.num_alive_tasks(), before);
}

#[tokio::test]
async fn dropping_a_worker_kills_its_process_group() {
    let worker = spawn(sh("sleep 1000")).await;
    let pid = worker.pid().expect("pid");
    drop(worker);
    gone(pid).await;
}

#[tokio::test]
async fn notifications_are_coalesced_during_a_redraw_storm() {
    // Thousands of separate writes; watchers hear about them roughly once per 10 ms.
    let worker = spawn(sh(
        "i=0; while [ $i -lt 3000 ]; do printf x; i=$((i+1)); done",
    ))
    .await;
    let started = Instant::now();
    let mut changes = worker.changes();
    let mut notifications = 0u64;
    while changes.changed().await {
        notifications += 1;
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    assert!(worker.snapshot().text().matches('x').count() == 3000);
    assert!(
        notifications <= elapsed_ms / 10 + 2,
        "{notifications} notifications in {elapsed_ms} ms"
    );
    assert!(notifications >= 1);
}

#[tokio::test]
async fn raw_output_is_logged_byte_for_byte() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("worker/raw.log");
    let mut spec = sh("printf 'one\\033[1mtwo'");
    spec.raw_log = Some(RawLogConfig::new(&log));
    let worker = spawn(spec).await;
    exited(&worker).await;
    assert_eq!(std::fs::read(&log).expect("raw log"), b"one\x1b[1mtwo");
}

#[tokio::test]
async fn window_title_is_tracked() {
    let worker = spawn(sh("printf '\\033]0;agent-title\\007'; printf done")).await;
    exited(&worker).await;
    assert_eq!(worker.snapshot().title, "agent-title");
}

#[tokio::test]
async fn typing_into_an_exited_worker_is_an_error() {
    let worker = spawn(sh("exit 0")).await;
    exited(&worker).await;
    let err = worker
        .send(&Input::Text("x".into()))
        .await
        .expect_err("nothing to type into");
    assert!(err.to_string().contains("exited"), "{err}");
}

#[tokio::test]
async fn a_missing_program_or_folder_is_named_in_the_error() {
    let err = Worker::spawn_pty(SpawnSpec::new("no-such-agent-xyz", std::env::temp_dir()))
        .await
        .err()
        .expect("no such program");
    assert!(matches!(err, SpawnError::ProgramNotFound { .. }));
    assert!(err.to_string().contains("no-such-agent-xyz"), "{err}");

    let err = Worker::spawn_pty(SpawnSpec::new("sh", "/no/such/dir"))
        .await
        .err()
        .expect("no such folder");
    assert!(matches!(err, SpawnError::CwdNotFound { .. }));
    assert!(err.to_string().contains("/no/such/dir"), "{err}");
}
