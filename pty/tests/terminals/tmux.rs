//! The tmux transport, on private servers in throwaway socket folders: spawning, input,
//! exit status, re-attaching from a new server handle, a person attaching, cleanup.

use std::time::Duration;

use clawpool_pty::{
    AttachOptions, ExitStatus, Input, Key, RawLogConfig, SpawnError, SpawnSpec, TmuxConfig,
    TmuxError, TmuxServer, Worker,
};

use crate::support::{
    PrivateTmux, assert_resize_reaches, exited, gone, pid_on_screen, screen_shows,
};

fn sh(script: &str) -> SpawnSpec {
    SpawnSpec::new("sh", std::env::temp_dir()).args(["-c", script])
}

// tmux 3.3 can close a pane before reading what its process wrote in the instant before it
// exited (see docs/terminals.md), so these programs wait for a last Enter before exiting.

#[tokio::test]
async fn a_worker_in_tmux_takes_input_and_reports_its_exit_code() {
    let tmux = PrivateTmux::new("input");
    let server = tmux.connect().await;
    let worker = server
        .spawn(
            "w1",
            sh("printf 'name? '; read name; echo \"hello <$name>\"; read done; exit 5"),
        )
        .await
        .expect("spawn in tmux");
    assert_eq!(worker.tmux_session(), Some((server.socket_name(), "w1")));
    screen_shows(&worker, "name?").await;
    worker
        .send(&Input::Text("a 'quoted' $HOME ~ \"x\" ; {}".into()))
        .await
        .expect("type");
    worker.send(&Input::Key(Key::Enter)).await.expect("enter");
    screen_shows(&worker, "hello <a 'quoted' $HOME ~ \"x\" ; {}>").await;
    worker.send(&Input::Key(Key::Enter)).await.expect("enter");
    assert_eq!(exited(&worker).await, ExitStatus::Exited(5));
}

#[tokio::test]
async fn a_worker_in_tmux_gets_no_tmux_socket_in_its_environment() {
    // tmux sets TMUX and TMUX_PANE in every pane; with them, the worker could drive its own
    // pane and every other session on the server (`tmux send-keys`, `tmux ls`).
    let tmux = PrivateTmux::new("noenv");
    let server = tmux.connect().await;
    let probe = "echo \"tmux=<${TMUX-unset}> pane=<${TMUX_PANE-unset}> mine=<$MINE>\"; read x";
    for clean in [false, true] {
        let mut spec = sh(probe).env("MINE", "kept").env("TMUX", "/forced,1,0");
        spec.clean_env = clean;
        spec = spec.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        let name = if clean { "clean" } else { "inherited" };
        let worker = server.spawn(name, spec).await.expect("spawn");
        screen_shows(&worker, "tmux=<unset> pane=<unset> mine=<kept>").await;
        worker.stop(Duration::from_secs(2)).await;
    }
}

#[tokio::test]
async fn multi_line_text_is_pasted_with_bracketed_paste_markers() {
    let tmux = PrivateTmux::new("paste");
    let server = tmux.connect().await;
    let worker = server
        .spawn(
            "w1",
            sh("printf '\\033[?2004hready'; stty -icanon -echo; exec cat -v"),
        )
        .await
        .expect("spawn");
    screen_shows(&worker, "ready").await;
    worker
        .send(&Input::Text("one\ntwo".into()))
        .await
        .expect("paste");
    screen_shows(&worker, "^[[201~").await;
    let text = worker.snapshot().text();
    assert!(text.contains("^[[200~one"), "{text}");
    assert!(text.contains("two^[[201~"), "{text}");
    worker.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn output_is_seen_from_the_first_byte() {
    let tmux = PrivateTmux::new("firstbyte");
    let server = tmux.connect().await;
    let log = tmux.dir.path().join("raw.log");
    let mut spec = sh("printf 'first-byte\\033]2;t1\\007'; read x");
    spec.raw_log = Some(RawLogConfig::new(&log));
    let worker = server.spawn("w1", spec).await.expect("spawn");
    screen_shows(&worker, "first-byte").await;
    let raw = std::fs::read(&log).expect("raw log");
    assert!(
        raw.starts_with(b"first-byte"),
        "{:?}",
        String::from_utf8_lossy(&raw)
    );
    assert_eq!(worker.snapshot().title, "t1");
    worker.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn workers_outlive_the_supervisor_and_are_adopted_again() {
    let tmux = PrivateTmux::new("adopt");
    let first = tmux.connect().await;
    let worker = first
        .spawn("lane-a", sh("echo booted; read x; echo got:$x; read y"))
        .await
        .expect("spawn");
    screen_shows(&worker, "booted").await;
    let pid = worker.pid().expect("pid");
    // The supervisor goes away: its control client dies, the worker does not.
    drop(worker);
    drop(first);

    let second = tmux.connect().await;
    assert_eq!(second.sessions().await.expect("sessions"), vec!["lane-a"]);
    let adopted = second
        .attach("lane-a", AttachOptions::default())
        .await
        .expect("adopt");
    assert_eq!(adopted.pid(), Some(pid));
    assert!(
        adopted.snapshot().contains("booted"),
        "{}",
        adopted.snapshot().text()
    );
    adopted
        .send(&Input::Text("again".into()))
        .await
        .expect("type");
    adopted.send(&Input::Key(Key::Enter)).await.expect("enter");
    screen_shows(&adopted, "got:again").await;
    adopted.stop(Duration::from_secs(2)).await;
    gone(pid).await;
}

#[tokio::test]
async fn a_person_can_attach_and_watch() {
    let tmux = PrivateTmux::new("person");
    let server = tmux.connect().await;
    let worker = server
        .spawn("watched", sh("echo visible-to-people; sleep 1000"))
        .await
        .expect("spawn");
    screen_shows(&worker, "visible-to-people").await;
    // tmux takes keys that come within `assume-paste-time` (1 ms) of the last activity, the
    // attach included, for a paste and passes them to the pane. A person's keys are far slower
    // than this test's, which types the moment the screen is drawn: without this the prefix
    // was taken and `d` went to the pane in about one run in six.
    let paste_heuristic_off = server
        .command()
        .args(["set-option", "-g", "assume-paste-time", "0"])
        .status()
        .expect("tmux set-option runs");
    assert!(paste_heuristic_off.success());
    // The person's terminal is itself a real PTY running `tmux attach`.
    let person = Worker::spawn_pty(
        SpawnSpec::new("tmux", std::env::temp_dir())
            .args(["-L", server.socket_name(), "attach", "-t", "watched"])
            .env("TMUX_TMPDIR", tmux.dir.path()),
    )
    .await
    .expect("tmux attach starts");
    screen_shows(&person, "visible-to-people").await;
    person
        .send(&Input::Text("\x02d".into()))
        .await
        .expect("detach keys");
    assert!(exited(&person).await.success());
    worker.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn resize_reaches_a_worker_in_tmux() {
    let tmux = PrivateTmux::new("resize");
    let server = tmux.connect().await;
    let worker = server
        .spawn("w1", sh("read x; stty size; read y"))
        .await
        .expect("spawn");
    assert_resize_reaches(&worker).await;
    worker.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn stopping_a_tmux_worker_kills_its_group() {
    let tmux = PrivateTmux::new("stop");
    let server = tmux.connect().await;
    let worker = server
        .spawn("w1", sh("trap '' TERM; sleep 1000 & echo child=$!; wait"))
        .await
        .expect("spawn");
    let snap = screen_shows(&worker, "child=").await;
    let child = pid_on_screen(&snap, "child");
    assert_eq!(
        worker.stop(Duration::from_millis(300)).await,
        ExitStatus::Signaled(libc::SIGKILL)
    );
    gone(child).await;
}

#[tokio::test]
async fn killing_the_server_leaves_nothing_behind() {
    let tmux = PrivateTmux::new("cleanup");
    let server = tmux.connect().await;
    let worker = server.spawn("w1", sh("sleep 1000")).await.expect("spawn");
    let pid = worker.pid().expect("pid");
    assert!(tmux.socket_path().exists());
    server.kill_server().await.expect("kill server");
    gone(pid).await;
    exited(&worker).await;
    assert!(!tmux.socket_path().exists(), "socket left behind");
}

#[tokio::test]
async fn bad_names_missing_tmux_and_duplicate_sessions_are_clear_errors() {
    let tmux = PrivateTmux::new("errors");
    let server = tmux.connect().await;
    let err = server
        .spawn("bad:name", sh("true"))
        .await
        .err()
        .expect("bad name");
    assert!(err.to_string().contains("bad:name"), "{err}");

    let _first = server.spawn("dup", sh("sleep 1000")).await.expect("spawn");
    let err = server
        .spawn("dup", sh("true"))
        .await
        .err()
        .expect("duplicate");
    assert!(
        matches!(err, SpawnError::Tmux(TmuxError::SessionExists { .. })),
        "{err}"
    );

    let err = server
        .spawn(
            "w2",
            SpawnSpec::new("no-such-agent-xyz", std::env::temp_dir()),
        )
        .await
        .err()
        .expect("missing program");
    assert!(err.to_string().contains("no-such-agent-xyz"), "{err}");
    assert!(
        !server
            .sessions()
            .await
            .expect("sessions")
            .contains(&"w2".to_owned())
    );

    let err = server
        .attach("nobody", AttachOptions::default())
        .await
        .err()
        .expect("no such session");
    assert!(err.to_string().contains("nobody"), "{err}");

    let missing = TmuxServer::connect(TmuxConfig {
        program: "/no/such/tmux".into(),
        ..tmux.config.clone()
    })
    .await
    .err()
    .expect("tmux missing");
    assert!(
        matches!(missing, TmuxError::NotInstalled { .. }),
        "{missing}"
    );
    assert!(missing.to_string().contains("/no/such/tmux"));
}

#[tokio::test]
async fn raw_bytes_reach_the_program_untranslated() {
    let tmux = PrivateTmux::new("bytes");
    let server = tmux.connect().await;
    let worker = server
        .spawn(
            "w1",
            sh("stty -icanon -echo; printf 'ready\\n'; exec cat -v"),
        )
        .await
        .expect("spawn");
    screen_shows(&worker, "ready").await;
    worker
        .send(&Input::Bytes(b"\x1b[A\x01z".to_vec()))
        .await
        .expect("bytes");
    screen_shows(&worker, "^[[A^Az").await;
    worker.stop(Duration::from_secs(2)).await;
}
