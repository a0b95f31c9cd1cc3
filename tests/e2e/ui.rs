//! `clawpool ui` as a person uses it: the dashboard started in a real terminal (a shell in a
//! private tmux server), driven with keys (`send-keys`), its screen read back (`capture-pane`)
//! and checked against `clawpool board --output-format json`, the lanes' own screens and
//! event logs, and the terminal it leaves behind.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::spawn::{Setup, setup};

/// A lane that commits, says one thing, says another a while later, then works forever.
const SCENARIO: &str = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
  { do = "say", text = "step one" },
  { do = "sleep", ms = 5000 },
  { do = "say", text = "step two" },
  { do = "hang" },
]
"#;

const TWO_LANES: &str = r#"{"defaults": {"agent": "scripted"}, "lanes": [
  {"name": "alpha", "prompt": "do alpha"}, {"name": "beta", "prompt": "do beta"}]}"#;

/// How long the dashboard has to show something.
const PATIENCE: Duration = Duration::from_secs(20);

/// A shell in its own tmux server, where the dashboard runs.
struct Term<'a> {
    setup: &'a Setup,
    /// The tmux server's socket name.
    socket: &'static str,
}

impl<'a> Term<'a> {
    /// A 140×40 shell in the repository that prints a line, then runs `clawpool ui`.
    fn start_ui(setup: &'a Setup) -> Self {
        Self::start_ui_with(setup, "ui", "", "")
    }

    /// [`Term::start_ui`] on the tmux server `socket`, with `env` (`NAME=value `) before the
    /// command and `args` after it.
    fn start_ui_with(setup: &'a Setup, socket: &'static str, env: &str, args: &str) -> Self {
        let command = format!(
            "{env}{:?} ui --config {:?}{args}",
            clawpool_tests::workspace_bin("clawpool")
                .display()
                .to_string(),
            setup.config.display().to_string()
        );
        Self::start_command(setup, socket, &command)
    }

    /// A 140×40 shell in the repository on the tmux server `socket` that prints a line, then
    /// runs `command`.
    fn start_command(setup: &'a Setup, socket: &'static str, command: &str) -> Self {
        let term = Term { setup, socket };
        let shell = format!(
            "cd {:?} && exec bash --norc --noprofile",
            setup.repo.display().to_string()
        );
        term.tmux(&[
            "new-session",
            "-d",
            "-s",
            "ui-test",
            "-x",
            "140",
            "-y",
            "40",
            &shell,
        ]);
        term.wait_for("the shell", |screen| {
            screen.contains('$') || screen.contains('#')
        });
        term.type_text(&format!("echo PRIOR-CONTENT; {command}"));
        term.keys(&["Enter"]);
        term
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = self
            .setup
            .sandbox
            .tmux()
            .args(["-L", self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "ui-test"];
        args.extend(keys);
        self.tmux(&args);
    }

    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "ui-test", "-l", text]);
    }

    /// The screen with its colours and attributes, as escape sequences.
    fn screen_with_colours(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-t", "ui-test"])
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "ui-test"])
    }

    /// Polls the screen until `ready` holds; fails with the last screen after [`PATIENCE`].
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Term<'_> {
    fn drop(&mut self) {
        let _ = self
            .setup
            .sandbox
            .tmux()
            .args(["-L", self.socket, "kill-server"])
            .status();
    }
}

/// Spawns alpha and beta (on `transport`), and returns once both are running.
fn spawn_two(setup: &Setup, transport: &str) -> clawpool_tests::LaneRun {
    std::fs::write(setup.sandbox.dir.path().join("scenario.toml"), SCENARIO).expect("scenario");
    let packet = setup.sandbox.dir.path().join("packet.json");
    std::fs::write(&packet, TWO_LANES).expect("packet");
    let mut cmd = setup.sandbox.clawpool();
    cmd.arg("spawn")
        .arg(&packet)
        .args([
            "--transport",
            transport,
            "--output-format",
            "json",
            "--config",
        ])
        .arg(&setup.config)
        .arg("--repo")
        .arg(&setup.repo);
    let mut run =
        clawpool_tests::LaneRun::start(cmd, &setup.sandbox.dir.path().join("spawn.stderr"));
    for lane in ["alpha", "beta"] {
        let running = |e: &Value| e["kind"] == "lane.running" && e["lane"] == lane;
        if !run.seen.iter().any(running) {
            run.wait_for(&format!("{lane} running"), PATIENCE, running, String::new);
        }
    }
    run
}

fn board(setup: &Setup) -> Vec<Value> {
    let out = setup
        .sandbox
        .clawpool()
        .args(["board", "--output-format", "json", "--repo"])
        .arg(&setup.repo)
        .output()
        .expect("clawpool board");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("board JSON");
    doc["lanes"].as_array().expect("lanes").clone()
}

/// The dashboard's row of `lane`: the line of the lane list that names it.
fn row<'s>(screen: &'s str, lane: &str) -> Option<&'s str> {
    screen.lines().find(|line| {
        line.trim_start_matches(['│', ' ', '>'])
            .split_whitespace()
            .next()
            == Some(lane)
    })
}

fn lane_state(setup: &Setup, lane: &str) -> Value {
    let path = setup.lanes_dir().join(lane).join(".claw/worker-state.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("state file")).expect("JSON")
}

fn events(setup: &Setup, lane: &str) -> Vec<Value> {
    let path = setup
        .repo
        .join(".git/clawpool/lanes")
        .join(lane)
        .join("events.jsonl");
    std::fs::read_to_string(path)
        .expect("event log")
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn terminal_log_has(setup: &Setup, lane: &str, text: &str) -> bool {
    let log = setup
        .repo
        .join(".git/clawpool/lanes")
        .join(lane)
        .join("terminal.log");
    String::from_utf8_lossy(&std::fs::read(Path::new(&log)).unwrap_or_default()).contains(text)
}

#[test]
fn the_dashboard_shows_the_boards_lanes_and_the_selected_lanes_live_screen() {
    let s = setup();
    let _run = spawn_two(&s, "pty");
    let term = Term::start_ui(&s);
    let screen = term.wait_for("both lanes", |screen| {
        row(screen, "alpha").is_some() && row(screen, "beta").is_some()
    });
    // The same lanes as the board, with the board's own cells.
    let lanes = board(&s);
    assert_eq!(lanes.len(), 2);
    for lane in &lanes {
        let name = lane["lane"].as_str().expect("name");
        let line = row(&screen, name).unwrap_or_else(|| panic!("no row for {name}:\n{screen}"));
        let status = lane["lane_status"].as_str().expect("status");
        let ahead = format!("+{}", lane["board"]["commits_ahead"]);
        for cell in ["scripted", status, "fresh", ahead.as_str()] {
            assert!(line.contains(cell), "{name}'s row lacks {cell:?}: {line}");
        }
    }
    // alpha is selected first: its screen is shown, as its lane's screen model has it.
    let screen = term.wait_for("alpha's screen with its first step", |screen| {
        screen.contains("alpha · screen")
            && screen.contains("❯ do alpha")
            && screen.contains("step one")
    });
    // The screen is live: what the agent says later shows without a key pressed.
    if !terminal_log_has(&s, "alpha", "step two") {
        assert!(!screen.contains("step two"), "{screen}");
    }
    term.wait_for("alpha's later output", |screen| screen.contains("step two"));
    // Selecting beta shows beta's screen.
    term.keys(&["Down"]);
    term.wait_for("beta's screen", |screen| {
        screen.contains("beta · screen") && screen.contains("❯ do beta")
    });
    // `/` narrows the list; Esc shows every lane again.
    term.keys(&["/"]);
    term.type_text("alp");
    term.wait_for("only alpha", |screen| {
        screen.contains("filter: alp")
            && row(screen, "alpha").is_some()
            && row(screen, "beta").is_none()
    });
    term.keys(&["Enter", "Escape"]);
    term.wait_for("both lanes again", |screen| {
        row(screen, "alpha").is_some() && row(screen, "beta").is_some()
    });
    // `?` shows the key map; any key closes it.
    term.keys(&["?"]);
    term.wait_for("the help", |screen| {
        screen.contains("stop the lane, after confirming (clawpool stop)")
    });
    term.keys(&["Space"]);
    term.wait_for("the help closed", |screen| {
        !screen.contains("after confirming (clawpool stop)")
    });

    // A resize redraws at the new size: the lane list's frame is as wide as the window.
    term.tmux(&["resize-window", "-t", "ui-test", "-x", "100", "-y", "30"]);
    let screen = term.wait_for("the list redrawn 100 wide", |screen| {
        screen
            .lines()
            .find(|line| line.starts_with("┌ lanes"))
            .is_some_and(|line| line.chars().count() == 100 && line.ends_with('┐'))
    });
    assert!(row(&screen, "beta").is_some(), "{screen}");

    // q gives the terminal back as it was: the shell's own screen, the cursor shown, no
    // alternate screen, the line discipline cooked again.
    term.keys(&["q"]);
    term.wait_for("the shell again", |screen| screen.contains("PRIOR-CONTENT"));
    assert_eq!(
        term.tmux(&[
            "display-message",
            "-p",
            "-t",
            "ui-test",
            "#{alternate_on} #{cursor_flag}"
        ])
        .trim(),
        "0 1"
    );
    term.type_text("stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo");
    term.keys(&["Enter"]);
    let screen = term.wait_for("stty's answer", |screen| {
        screen
            .lines()
            .any(|line| line == "icanon" || line == "-icanon")
    });
    let lines: Vec<&str> = screen.lines().collect();
    assert!(
        lines.contains(&"icanon") && lines.contains(&"echo"),
        "{screen}"
    );
}

/// A resize and a key that arrive together are both read. crossterm's default reader drops the
/// readiness of every source but the first it takes from one wake; a `q` after a resize once
/// left the dashboard running on a loaded CI machine (the race is rare; this test repeats it).
#[test]
fn a_key_arriving_with_a_resize_is_read_without_another_key() {
    let s = setup();
    let term = Term::start_ui(&s);
    term.wait_for("the dashboard", |screen| screen.contains("clawpool ui"));
    for round in 0..12 {
        let width = if round % 2 == 0 { "110" } else { "120" };
        // Two resizes, then the key: it comes while the dashboard is still taking the first.
        let args = format!(
            "resize-window -t ui-test -x {width} -y 30 ; resize-window -t ui-test -x {width} -y 31 ; send-keys -t ui-test ?"
        );
        term.tmux(&args.split(' ').collect::<Vec<_>>());
        term.wait_for(&format!("the help, round {round}"), |screen| {
            screen.contains("stop the lane, after confirming (clawpool stop)")
        });
        term.keys(&["Space"]);
        term.wait_for(&format!("the help closed, round {round}"), |screen| {
            !screen.contains("after confirming (clawpool stop)")
        });
    }
}

#[test]
fn stop_and_send_from_the_dashboard_do_what_the_cli_does_on_tmux_lanes() {
    let s = setup();
    let _run = spawn_two(&s, "tmux");
    let term = Term::start_ui(&s);
    // A tmux lane's screen comes from its screen model too, without attaching.
    term.wait_for("alpha's screen", |screen| {
        screen.contains("alpha · screen") && screen.contains("❯ do alpha")
    });

    // Send: typed into a prompt, run by Enter; the lane queues it as `clawpool send` would.
    term.keys(&["s"]);
    term.wait_for("the send prompt", |screen| {
        screen.contains("send to alpha:")
    });
    term.type_text("check the tests");
    term.keys(&["Enter"]);
    let screen = term.wait_for("the send's verdict", |screen| {
        screen.contains("alpha: queued (1 of 1)")
    });
    assert!(!screen.contains("send to alpha:"), "{screen}");
    assert!(
        events(&s, "alpha")
            .iter()
            .any(|e| e["kind"] == "lane.send_queued" && e["detail"]["queued"] == 1),
        "{:?}",
        events(&s, "alpha")
    );

    // Stop asks first; anything but y leaves the lane alone.
    term.keys(&["Down", "x"]);
    term.wait_for("the stop confirmation", |screen| {
        screen.contains("clawpool stop beta?")
    });
    term.keys(&["n"]);
    term.wait_for("the stop not run", |screen| {
        screen.contains("not run: clawpool stop")
    });
    assert_eq!(lane_state(&s, "beta")["lane_status"], "running");
    // y stops it, as `clawpool stop beta` does: the worker ends and the lane with it.
    term.keys(&["x"]);
    term.wait_for("the stop confirmation", |screen| {
        screen.contains("clawpool stop beta?")
    });
    term.keys(&["y"]);
    let screen = term.wait_for("the stop's verdict and beta's new status", |screen| {
        screen.contains("beta: stopped: the worker ended")
            && row(screen, "beta").is_some_and(|row| row.contains("stopped"))
    });
    assert_eq!(lane_state(&s, "beta")["lane_status"], "stopped");
    assert!(
        events(&s, "beta")
            .iter()
            .any(|e| e["kind"] == "lane.stopped" && e["evidence"]["rule"] == "operator_stop"),
        "{screen}"
    );
    // The other lane was not touched.
    assert_eq!(lane_state(&s, "alpha")["lane_status"], "running");

    // Enter attaches to the lane's own tmux session (the dashboard leaves the screen to it);
    // detaching comes back to the dashboard.
    term.keys(&["Up", "Enter"]);
    term.wait_for("alpha's own session, full screen", |screen| {
        // The inner tmux may draw the agent's ✻ as `_`, without a UTF-8 locale.
        screen
            .lines()
            .next()
            .is_some_and(|top| top.ends_with(" Scripted Agent v0.1"))
    });
    term.keys(&["C-b", "d"]);
    term.wait_for("the dashboard again", |screen| {
        screen.contains("┌ lanes") && screen.contains("alpha · screen")
    });
    term.keys(&["q"]);
    term.wait_for("the shell again", |screen| screen.contains("PRIOR-CONTENT"));
}

/// The state letter of process `pid` (`R`, `S`, `T` stopped, `Z`, …), `None` once it is gone.
fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Sends `signal` to process `pid`.
fn signal(pid: i32, signal: i32) {
    // SAFETY: kill has no memory preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "signal {signal} to {pid}");
}

/// A key typed while the dashboard is not yet back from an attach is the dashboard's: made
/// certain here by holding the dashboard up, as a busy machine sometimes did (the dashboard
/// then came back and never read the `q`).
#[test]
fn q_typed_while_the_dashboard_comes_back_from_an_attach_quits_it() {
    let s = setup();
    let _run = spawn_two(&s, "tmux");
    // The shell runs the dashboard without job control: a stopped dashboard is then not a
    // stopped job the shell takes the terminal back from (and tmux, which continues a pane's
    // own process when it stops, sees only the shell).
    let term = Term::start_command(
        &s,
        "ui-typeahead",
        &format!(
            "set +m; {:?} ui --config {:?}; echo \"ui exited with $?\"",
            clawpool_tests::workspace_bin("clawpool")
                .display()
                .to_string(),
            s.config.display().to_string()
        ),
    );
    term.wait_for("alpha's screen", |screen| {
        screen.contains("alpha · screen") && screen.contains("❯ do alpha")
    });
    let shell = term.tmux(&["display-message", "-p", "-t", "ui-test", "#{pane_pid}"]);
    let shell = shell.trim();
    let dashboard: i32 = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .expect("the shell's children")
        .trim()
        .parse()
        .expect("one child: the dashboard");
    term.keys(&["Enter"]);
    term.wait_for("alpha's own session", |screen| {
        screen
            .lines()
            .next()
            .is_some_and(|top| top.ends_with(" Scripted Agent v0.1"))
    });
    // The person detaches and presses q at once, before the dashboard is back on the screen:
    // it is held up (as on a busy machine) from before the detach until after the q.
    signal(dashboard, libc::SIGSTOP);
    let deadline = Instant::now() + PATIENCE;
    while process_state(dashboard) != Some('T') {
        assert!(Instant::now() < deadline, "the dashboard never stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
    term.keys(&["C-b", "d"]);
    term.wait_for("tmux detached", |screen| screen.contains("[detached"));
    term.keys(&["q"]);
    signal(dashboard, libc::SIGCONT);
    // The q typed ahead is taken: the dashboard ends, as after a q pressed on it.
    term.wait_for("the dashboard's exit", |screen| {
        screen.contains("ui exited with 0")
    });
}

#[test]
fn a_dialog_is_answered_from_the_dashboard_with_one_of_its_choices() {
    let s = setup();
    let scenario = r#"
trust_dialog = true
[[prompt]]
steps = [
  { do = "permission", tool = "Write(out.txt)" },
  { do = "write_file", path = "out.txt", content = "ok\n" },
  { do = "git_commit", message = "lane work" },
  { do = "hang" },
]
"#;
    let mut run = s.spawn_until_running(
        scenario,
        r#"{"name": "gamma", "agent": "scripted", "prompt": "write it"}"#,
    );
    run.wait_for(
        "gamma blocked on its dialog",
        PATIENCE,
        |e| e["kind"] == "lane.blocked",
        String::new,
    );
    run.wait_for(
        "gamma escalated to a person",
        PATIENCE,
        |e| e["kind"] == "lane.escalated",
        String::new,
    );
    let term = Term::start_ui(&s);
    // The lane waits for a person: its row says so, and the panel has the dialog and the next
    // action.
    let screen = term.wait_for("gamma blocked, with its next action", |screen| {
        row(screen, "gamma").is_some_and(|row| row.contains("blocked{tool_permission}"))
            && screen.contains("evidence  tool_permission")
            && screen.contains("Do you want to proceed?")
    });
    assert!(
        screen.contains("│escalated") && screen.contains("│next     "),
        "{screen}"
    );
    assert!(
        row(&screen, "gamma").is_some_and(|row| row.trim_end_matches([' ', '│']).ends_with('!')),
        "the row marks the escalation: {screen}"
    );
    // `a` lists the dialog's choices from the lane's profile; a number answers.
    term.keys(&["a"]);
    term.wait_for("the dialog's choices", |screen| {
        screen.contains("answer the dialog on gamma:")
            && screen.contains("1  no")
            && screen.contains("2  yes")
    });
    term.keys(&["2"]);
    term.wait_for("the answer's verdict", |screen| {
        screen.contains(r#"gamma: answered dialog "tool_permission" with "yes""#)
    });
    // The lane goes on as after `clawpool answer --choice yes`: its agent writes and commits.
    run.wait_for(
        "gamma's commit",
        PATIENCE,
        |e| e["kind"] == "lane.commit.created" && e["lane"] == "gamma",
        String::new,
    );
    assert_eq!(
        std::fs::read_to_string(s.lanes_dir().join("gamma/out.txt")).expect("written"),
        "ok\n"
    );
    term.keys(&["q"]);
    term.wait_for("the shell again", |screen| screen.contains("PRIOR-CONTENT"));
}

#[test]
fn the_dashboard_refuses_to_run_without_a_terminal() {
    let s = setup();
    let out = s
        .sandbox
        .clawpool()
        .args(["ui", "--output-format", "json", "--repo"])
        .arg(&s.repo)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("clawpool ui");
    assert_eq!(out.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&out.stderr).expect("one JSON document");
    assert_eq!(error["error"]["kind"], "not_a_terminal", "{error}");
    assert!(out.stdout.is_empty());
}

#[test]
fn statuses_are_coloured_unless_no_color_is_set() {
    let s = setup();
    let _run = spawn_two(&s, "pty");
    let coloured = Term::start_ui(&s);
    coloured.wait_for("both lanes", |screen| {
        row(screen, "alpha").is_some() && row(screen, "beta").is_some()
    });
    // Working is green.
    let screen = coloured.screen_with_colours();
    assert!(
        screen.contains("\x1b[32mrunning") || screen.contains("\x1b[38;5;2mrunning"),
        "{screen:?}"
    );
    coloured.keys(&["q"]);
    coloured.wait_for("the shell again", |screen| screen.contains("PRIOR-CONTENT"));
    drop(coloured);

    let plain = Term::start_ui_with(&s, "ui-plain", "NO_COLOR=1 ", "");
    plain.wait_for("both lanes and alpha's screen", |screen| {
        row(screen, "alpha").is_some() && screen.contains("❯ do alpha")
    });
    let screen = plain.screen_with_colours();
    // No colour at all: only the resets to the default colours (39, 49) tmux writes anyway.
    let colours = (0..8)
        .flat_map(|n| [format!("\x1b[3{n}m"), format!("\x1b[4{n}m")])
        .chain(["38;".to_owned(), "48;".to_owned()]);
    for colour in colours {
        assert!(
            !screen.contains(&colour),
            "a colour ({colour:?}) in {screen:?}"
        );
    }
}

/// A second repository in `setup`'s sandbox (the same HOME, so the same index of repositories).
fn second_repo(setup: &Setup, name: &str) -> std::path::PathBuf {
    let repo = clawpool_tests::git_repo(setup.sandbox.dir.path(), name);
    for (key, value) in [("user.name", "lane"), ("user.email", "lane@test")] {
        std::process::Command::new("git")
            .args(["config", key, value])
            .current_dir(&repo)
            .status()
            .expect("git config");
    }
    repo
}

/// Runs one lane `name` of the scripted agent in `repo` to its end.
fn spawn_lane_in(setup: &Setup, repo: &Path, name: &str) {
    let packet = setup.sandbox.dir.path().join(format!("{name}.json"));
    std::fs::write(
        &packet,
        format!(
            r#"{{"lanes": [{{"name": "{name}", "agent": "scripted", "prompt": "do {name}"}}]}}"#
        ),
    )
    .expect("packet");
    let out = setup
        .sandbox
        .clawpool()
        .arg("spawn")
        .arg(&packet)
        .args(["--output-format", "json", "--config"])
        .arg(&setup.config)
        .arg("--repo")
        .arg(repo)
        .output()
        .expect("clawpool spawn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `clawpool board --all --output-format json`: (repository, lane) of every lane.
fn board_all(setup: &Setup) -> Vec<(String, String)> {
    let out = setup
        .sandbox
        .clawpool()
        .args(["board", "--all", "--output-format", "json"])
        .current_dir(setup.sandbox.dir.path())
        .output()
        .expect("clawpool board --all");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("board JSON");
    doc["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .map(|lane| {
            let repo = lane["repository"].as_str().expect("repository");
            let repo = Path::new(repo).file_name().expect("a folder name");
            (
                repo.to_string_lossy().into_owned(),
                lane["lane"].as_str().expect("lane").to_owned(),
            )
        })
        .collect()
}

/// The repositories in the user's index (the sandbox's), by folder name.
fn indexed_repos(setup: &Setup) -> Vec<String> {
    let index = setup
        .sandbox
        .state_home()
        .join("clawpool/repositories.json");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&index).expect("the index")).expect("JSON");
    doc["repositories"]
        .as_array()
        .expect("repositories")
        .iter()
        .map(|r| {
            Path::new(r["root"].as_str().expect("root"))
                .file_name()
                .expect("a folder name")
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn with_all_the_dashboard_and_the_board_show_the_lanes_of_every_repository() {
    let s = setup();
    let other = second_repo(&s, "other");
    spawn_lane_in(&s, &s.repo, "alpha");
    spawn_lane_in(&s, &other, "omega");
    assert_eq!(indexed_repos(&s), ["repo", "other"]);
    // The board of every repository, run from outside both, labels each lane with its own.
    assert_eq!(
        board_all(&s),
        [
            ("repo".to_owned(), "alpha".to_owned()),
            ("other".to_owned(), "omega".to_owned())
        ]
    );

    // The dashboard started in one repository shows the other's lane too, each row labelled
    // with its repository.
    let term = Term::start_ui_with(&s, "ui-all", "", " --all");
    let screen = term.wait_for("both repositories' lanes", |screen| {
        screen.contains("all repositories (2)")
            && screen
                .lines()
                .any(|l| l.contains("repo ") && l.contains("alpha"))
            && screen
                .lines()
                .any(|l| l.contains("other") && l.contains("omega"))
    });
    assert!(screen.contains("REPOSITORY"), "{screen}");
    // Selecting the other repository's lane shows its panel.
    term.keys(&["Down"]);
    term.wait_for("omega's panel", |screen| {
        screen.contains("omega · screen") && screen.contains("lanes/omega (base main)")
    });
    // A repository that gets its first lane while the dashboard runs appears in it.
    let third = second_repo(&s, "third");
    spawn_lane_in(&s, &third, "newcomer");
    term.wait_for("the third repository's lane", |screen| {
        screen.contains("all repositories (3)")
            && screen
                .lines()
                .any(|l| l.contains("third") && l.contains("newcomer"))
    });
    term.keys(&["q"]);
    term.wait_for("the shell again", |screen| screen.contains("PRIOR-CONTENT"));
}

#[test]
fn gc_of_its_last_lane_takes_a_repository_out_of_the_index() {
    let s = setup();
    let other = second_repo(&s, "other");
    spawn_lane_in(&s, &s.repo, "alpha");
    spawn_lane_in(&s, &other, "omega");
    assert_eq!(indexed_repos(&s), ["repo", "other"]);
    let gc = s
        .sandbox
        .clawpool()
        .args(["gc", "--force", "--repo"])
        .arg(&other)
        .output()
        .expect("gc");
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert_eq!(indexed_repos(&s), ["repo"]);
    assert_eq!(board_all(&s), [("repo".to_owned(), "alpha".to_owned())]);

    // A repository deleted behind clawpool's back is left out quietly.
    std::fs::remove_dir_all(&s.repo).expect("remove the repository");
    assert_eq!(board_all(&s), []);
}

#[test]
fn the_demo_in_a_terminal_opens_the_dashboard_on_its_lanes_until_the_person_leaves() {
    let s = setup();
    let clawpool = clawpool_tests::workspace_bin("clawpool");
    let term = Term::start_command(
        &s,
        "ui-demo",
        &format!("{:?} demo", clawpool.display().to_string()),
    );
    // The dashboard, on the demo's own repository: the lanes' own work done, the untrusted one
    // waiting for a person.
    let screen = term.wait_for("the demo's lanes settled on the dashboard", |screen| {
        ["notes", "tests", "greeting"]
            .iter()
            .all(|lane| row(screen, lane).is_some_and(|row| row.contains("finished")))
            && row(screen, "review").is_some_and(|row| row.contains("blocked{trust_prompt}"))
    });
    let title = screen.lines().next().unwrap_or_default().to_owned();
    let repo = title
        .strip_prefix("clawpool ui · ")
        .and_then(|rest| rest.split(" · ").next())
        .unwrap_or_else(|| panic!("the title names the repository: {title}"));
    let repo = std::path::PathBuf::from(repo);
    assert!(repo.join(".git").is_dir(), "{screen}");
    // Leaving the dashboard leaves the demo: its lanes stop, its repository goes.
    term.keys(&["q"]);
    term.wait_for("the demo ended", |screen| {
        screen.contains("left the demo: its lanes are stopped and its repository removed")
    });
    assert!(!repo.exists());
}

/// Issue #27, bite 6: log lines never reach the dashboard's screen. With every level on
/// (`CLAWPOOL_LOG=trace`: the `notify` watcher's own inotify lines among them) the lines go to
/// `ui.log` in the repository's clawpool folder, and the screen shows none of them.
#[test]
fn log_lines_go_to_a_file_never_onto_the_dashboard() {
    let setup = setup();
    let term = Term::start_ui_with(&setup, "ui-log", "CLAWPOOL_LOG=trace ", "");
    term.wait_for("the empty dashboard", |screen| {
        screen.contains("(no lanes in this repository)")
    });
    // A lane's registry folder appearing wakes the dashboard's watch (and its log lines).
    let state = setup.repo.join(".git/clawpool");
    std::fs::create_dir_all(state.join("lanes/ghost")).expect("registry folder");
    let log = state.join("ui.log");
    let deadline = Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&log).is_ok_and(|text| text.contains("TRACE")) {
        assert!(
            Instant::now() < deadline,
            "no log lines in {}:\n{}",
            log.display(),
            term.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let screen = term.screen();
    for level in ["TRACE", "DEBUG", "INFO", "WARN"] {
        assert!(
            !screen.contains(level),
            "a log line on the dashboard:\n{screen}"
        );
    }
}

/// `d` opens the selected lane's diff whole-screen, as `clawpool diff` computes it: the file
/// list with commits and uncommitted work apart, the patch coloured (`+` green, `-` red, hunk
/// headers cyan), scrolled with j/k and PgUp/PgDn; Esc closes it back to the lane list.
#[test]
fn d_shows_the_selected_lanes_diff_scrollable_and_coloured() {
    let s = setup();
    let out = s.spawn(
        r#"{"name": "alpha", "agent": "scripted", "prompt": "a"}"#,
        &[],
    );
    assert!(out.status.success(), "{}", crate::spawn::stderr(&out));
    let lane = s.lanes_dir().join("alpha");
    // Not committed: the lane's committed line changed, and a new file far longer than the
    // screen.
    std::fs::write(lane.join("out.txt"), "redone\n").expect("write");
    let long: String = (1..=120).map(|n| format!("pending {n}\n")).collect();
    std::fs::write(lane.join("pending.txt"), long).expect("write");
    let term = Term::start_ui(&s);
    term.wait_for("alpha's row", |screen| row(screen, "alpha").is_some());
    term.keys(&["d"]);
    let parts = [
        "diff · alpha",
        "1 commit(s)",
        "lane work",
        "committed (",
        "out.txt",
        "not committed (",
        "pending.txt",
        "── not committed ──",
        "+redone",
        "── committed ──",
        "+done",
        "pending 1",
    ];
    // The whole frame, not its first lines: a capture can land while tmux is still drawing it.
    let screen = term.wait_for("the diff view", |screen| {
        parts.iter().all(|part| screen.contains(part))
    });
    assert!(!screen.contains("pending 120"), "{screen}");
    let coloured = term.screen_with_colours();
    // tmux writes the 8 basic colours as `3N` or `38;5;N` depending on its version.
    let in_colour = |n: u8, text: &str| {
        coloured.contains(&format!("\u{1b}[3{n}m{text}"))
            || coloured.contains(&format!("\u{1b}[38;5;{n}m{text}"))
    };
    assert!(in_colour(2, "+done"), "added lines green: {coloured:?}");
    assert!(in_colour(6, "@@"), "hunk headers cyan: {coloured:?}");
    assert!(in_colour(1, "-done"), "removed lines red: {coloured:?}");
    // Down a page at a time to the end, one back up, then the top and a line down.
    for _ in 0..6 {
        term.keys(&["NPage"]);
    }
    // Scrolled past the start: its first lines gone (waited for, not read from a capture
    // that may land while the new page is still being drawn over the old).
    term.wait_for("the end of the patch, its start scrolled away", |screen| {
        screen.contains("+pending 120") && !screen.contains("+done")
    });
    term.keys(&["PPage"]);
    term.wait_for("a page back up", |screen| !screen.contains("+pending 120"));
    term.keys(&["g"]);
    term.wait_for("the top again", |screen| screen.contains("+done"));
    term.keys(&["j"]);
    term.wait_for("one line down", |screen| screen.contains("lines 2-"));
    term.keys(&["Escape"]);
    term.wait_for("the lane list back", |screen| {
        !screen.contains("diff · alpha") && row(screen, "alpha").is_some()
    });
}

/// The processes whose parent is `pid` (any of its threads), each with the program it runs.
fn children(pid: i32) -> Vec<(i32, std::path::PathBuf)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<i32>>()
        })
        .map(|child| {
            let exe = std::fs::read_link(format!("/proc/{child}/exe")).unwrap_or_default();
            (child, exe)
        })
        .collect()
}

/// Issue #27: an operator key is the pool's request made by the dashboard itself, never a
/// child `clawpool` whose output it reads. While `verify` runs a finished lane's check (held
/// here on a FIFO until the test lets it go) the dashboard has no `clawpool` child, it stays
/// live (its help opens and closes), and the verification's result comes to its footer in
/// green; a command the lane cannot take shows the pool's error in red.
#[test]
fn an_operator_key_runs_in_the_dashboard_itself_which_stays_live_meanwhile() {
    let s = setup();
    let gate = s.sandbox.dir.path().join("gate");
    // The check waits on the gate only once the test has made it: the lane's own end is not
    // held up.
    let packet = format!(
        r#"{{"name": "alpha", "agent": "scripted", "prompt": "work", "verify_commands": {{"targeted": ["test ! -p '{gate}' || cat '{gate}' > /dev/null"]}}}}"#,
        gate = gate.display()
    );
    let out = s.spawn(&packet, &["--output-format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fifo = std::ffi::CString::new(gate.display().to_string()).expect("a path");
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");

    let term = Term::start_ui(&s);
    term.wait_for("alpha finished", |screen| {
        row(screen, "alpha").is_some_and(|row| row.contains("finished"))
    });
    let shell = term.tmux(&["display-message", "-p", "-t", "ui-test", "#{pane_pid}"]);
    let shell: i32 = shell.trim().parse().expect("the pane's shell");
    let dashboard = children(shell)
        .into_iter()
        .map(|(pid, _)| pid)
        .next()
        .expect("the shell's child: the dashboard");

    term.keys(&["v"]);
    term.wait_for("the level prompt", |screen| {
        screen.contains("verify alpha at level:")
    });
    term.keys(&["1"]);
    term.wait_for("the verify under way", |screen| {
        screen.contains("alpha: clawpool verify --level targeted …")
    });
    // The check has the gate open once opening its other end returns.
    let (opened_tx, opened) = std::sync::mpsc::channel();
    let writer_gate = gate.clone();
    std::thread::spawn(move || {
        let writer = std::fs::OpenOptions::new().write(true).open(writer_gate);
        let _ = opened_tx.send(writer);
    });
    let writer = opened
        .recv_timeout(PATIENCE)
        .expect("the check never opened the gate")
        .expect("the gate opened for writing");

    let clawpool = std::fs::canonicalize(clawpool_tests::workspace_bin("clawpool"))
        .expect("the clawpool binary");
    let running = children(dashboard);
    assert!(
        running.iter().all(|(_, exe)| *exe != clawpool),
        "the dashboard runs a child clawpool for the verify: {running:?}"
    );
    term.keys(&["?"]);
    term.wait_for("the help, the verify still under way", |screen| {
        screen.contains("stop the lane, after confirming (clawpool stop)")
    });
    term.keys(&["Escape"]);
    term.wait_for("the help closed", |screen| {
        !screen.contains("after confirming (clawpool stop)")
    });

    // The check ends (its input closed): green, in the footer, in green.
    drop(writer);
    term.wait_for("the verification's result", |screen| {
        screen.contains("alpha: verify targeted: green")
    });
    let coloured = term.screen_with_colours();
    assert!(
        coloured.contains("\x1b[32malpha: verify targeted: green")
            || coloured.contains("\x1b[38;5;2malpha: verify targeted: green"),
        "{coloured:?}"
    );
    // A command the lane cannot take: the pool's error, as `clawpool trust` says it, in red.
    term.keys(&["t"]);
    term.wait_for("trust refused for the ended lane", |screen| {
        screen.contains("alpha: lane alpha ended") && screen.contains("nothing to answer")
    });
    let coloured = term.screen_with_colours();
    assert!(
        coloured.contains("\x1b[31malpha: lane alpha ended")
            || coloured.contains("\x1b[38;5;1malpha: lane alpha ended"),
        "{coloured:?}"
    );
    term.keys(&["q"]);
    term.wait_for("the shell again", |screen| screen.contains("PRIOR-CONTENT"));
}

/// `s` on a lane that finished is a follow-up: the lane's agent takes the text as the next turn
/// of its session and the lane runs to its new end — driven by `clawpool send`, not by the
/// dashboard — and the footer says so in green.
#[test]
fn send_to_a_finished_lane_from_the_dashboard_is_a_follow_up_to_its_new_end() {
    let s = setup();
    // Two turns: the task, then one only an agent that resumed its session runs (the
    // scripted agent's `--resume` counts the prompts in its log).
    let scenario = r#"
trust_dialog = true
prompt_log = ".prompts.jsonl"
[[prompt]]
steps = [
  { do = "write_file", path = "out.txt", content = "done\n" },
  { do = "git_commit", message = "lane work" },
]
[[prompt]]
steps = [
  { do = "write_file", path = "followup.txt", content = "more\n" },
  { do = "git_commit", message = "follow-up work" },
]
"#;
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), scenario).expect("scenario");
    let out = s.spawn(
        r#"{"name": "alpha", "agent": "scripted", "prompt": "do alpha"}"#,
        &["--output-format", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let term = Term::start_ui(&s);
    term.wait_for("alpha finished", |screen| {
        row(screen, "alpha").is_some_and(|row| row.contains("finished"))
    });
    term.keys(&["s"]);
    term.wait_for("the send prompt", |screen| {
        screen.contains("send to alpha:")
    });
    term.type_text("now add a test");
    term.keys(&["Enter"]);
    term.wait_for("the follow-up's verdict", |screen| {
        screen.contains("alpha: follow-up delivered as a new turn of the lane's session; the lane ended finished")
    });
    assert!(s.lanes_dir().join("alpha/followup.txt").is_file());
    assert_eq!(lane_state(&s, "alpha")["lane_status"], "finished");
    assert!(
        events(&s, "alpha")
            .iter()
            .any(|e| e["kind"] == "lane.restarted" && e["detail"]["by"] == "send"),
        "{:?}",
        events(&s, "alpha")
    );
    // The follow-up's owner was the repository's daemon, started for it, never the dashboard.
    let holder = std::fs::read_to_string(s.repo.join(".git/clawpool/supervisor.lock"))
        .expect("the daemon's lock");
    let mut lines = holder.lines();
    let daemon_pid: u32 = lines.next().and_then(|p| p.parse().ok()).expect("a pid");
    assert_eq!(lines.next(), Some("daemon"), "{holder}");
    let ended = clawpool_tests::published_state(&s.lanes_dir().join("alpha"));
    assert_eq!(ended["supervisor"]["pid"], daemon_pid, "{ended}");
    term.keys(&["q"]);
    term.wait_for("the shell again", |screen| screen.contains("PRIOR-CONTENT"));
    drop(term);
    crate::spawn::stop_daemon(&s);
}
