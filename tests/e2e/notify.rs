//! Notifications (`[[notify]]`, `docs/notify.md`): real spawned lanes of the scripted agent, a
//! local HTTP receiver written here (the endpoint, a double at the edge), a command notifier,
//! a receiver that is down then up across a restart of the repository's notifier, and the
//! dashboard's bell in a real tmux terminal.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::spawn::{Setup, setup, stderr};

/// How long a notification has to arrive.
const PATIENCE: Duration = Duration::from_secs(30);

/// Part of the webhook's path that stands for its secret: never printed by clawpool.
const SECRET: &str = "s3cret-token";

/// A local HTTP endpoint: every POST's JSON body, in the order received; each answered 200.
struct Receiver {
    port: u16,
    bodies: mpsc::Receiver<(String, Value)>,
}

impl Receiver {
    fn start() -> Self {
        Self::on(TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
    }

    fn on(listener: TcpListener) -> Self {
        let port = listener.local_addr().expect("bound").port();
        let (tx, bodies) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let mut reader = BufReader::new(stream);
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                let mut length = 0;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                let _ = reader.get_mut().write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                if tx.send((request_line.trim().to_owned(), body)).is_err() {
                    return;
                }
            }
        });
        Self { port, bodies }
    }

    fn url(port: u16) -> String {
        format!("http://127.0.0.1:{port}/hooks/{SECRET}")
    }

    /// The next notification's body; its request must be a POST to the webhook's path.
    fn next(&self, what: &str) -> Value {
        let (request, body) = self
            .bodies
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("no notification: {what}"));
        assert_eq!(request, format!("POST /hooks/{SECRET} HTTP/1.1"));
        body
    }

    /// Nothing more arrived.
    fn assert_no_more(&self) {
        if let Ok((_, body)) = self.bodies.try_recv() {
            panic!("one notification too many: {body:#}");
        }
    }
}

/// The setup's configuration with `entries` appended.
fn with_notify(s: &Setup, entries: &str) {
    let mut config = std::fs::read_to_string(&s.config).expect("config");
    // At the end: keys after a `[[notify]]` header would belong to it.
    config.push_str(entries);
    std::fs::write(&s.config, config).expect("config");
}

fn scenario(s: &Setup, text: &str) {
    std::fs::write(s.sandbox.dir.path().join("scenario.toml"), text).expect("scenario");
}

/// `clawpool spawn --name solo --prompt work` in the foreground, its events on stdout.
fn spawn_solo(s: &Setup) -> clawpool_tests::LaneRun {
    let mut cmd = s.sandbox.clawpool();
    cmd.args([
        "spawn", "--name", "solo", "--prompt", "work", "--agent", "scripted",
    ])
    .args(["--output-format", "json", "--config"])
    .arg(&s.config)
    .arg("--repo")
    .arg(&s.repo);
    clawpool_tests::LaneRun::start(cmd, &s.sandbox.dir.path().join("spawn.stderr"))
}

fn answer_yes(s: &Setup, lane: &Path) {
    let out = s
        .sandbox
        .clawpool()
        .args(["answer", "--choice", "yes", "--output-format", "json"])
        .arg(lane)
        .output()
        .expect("clawpool answer");
    assert!(out.status.success(), "{}", stderr(&out));
}

fn record(s: &Setup) -> Value {
    let path = s.repo.join(".git/clawpool/notify.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("notify.json")).expect("JSON")
}

/// Two questions only a person may answer, each answered; then the lane finishes.
const ASKS_TWICE: &str = r#"
[[prompt]]
steps = [
  { do = "permission", tool = "Bash(cat ../../etc/passwd)", command = "cat ../../etc/passwd" },
  { do = "sleep", ms = 300 },
  { do = "permission", tool = "Bash(ls && rm -rf ../elsewhere)", command = "ls && rm -rf ../elsewhere" },
  { do = "write_file", path = "out.txt", content = "done\n" },
]
"#;

#[test]
fn one_notification_per_situation_across_blocks_answers_and_the_finish() {
    let s = setup();
    let receiver = Receiver::start();
    with_notify(
        &s,
        &format!("[[notify]]\nwebhook = {:?}\n", Receiver::url(receiver.port)),
    );
    scenario(&s, ASKS_TWICE);
    let mut run = spawn_solo(&s);
    let lane = s.lanes_dir().join("solo");
    let mut cursors = Vec::new();
    for question in ["cat ../../etc/passwd", "rm -rf ../elsewhere"] {
        let note = receiver.next(question);
        assert_eq!(note["event"], "tool_permission", "{note:#}");
        assert_eq!(note["lane"], "solo");
        assert_eq!(note["lane_status"], "blocked");
        assert_eq!(note["subphase"], "tool_permission");
        assert_eq!(note["failure"], "tool_permission");
        assert_eq!(
            note["repository"],
            s.repo.canonicalize().expect("repo").display().to_string()
        );
        assert!(
            note["next_action"]
                .as_str()
                .is_some_and(|a| a.contains("solo")),
            "{note:#}"
        );
        assert!(note["at"].as_str().is_some_and(|t| t.ends_with('Z')));
        // The scripted agent reports no usage: the cost is unknown, so absent (never 0).
        assert!(note.get("cost_usd").is_none(), "{note:#}");
        cursors.push(note["cursor"].as_u64().expect("cursor"));
        // The lane stays blocked (and escalates) until answered: nothing more meanwhile.
        run.wait_for(
            "the escalation",
            PATIENCE,
            |e| e["kind"] == "lane.escalated",
            String::new,
        );
        receiver.assert_no_more();
        answer_yes(&s, &lane);
    }
    let status = run.wait_exit(PATIENCE);
    assert!(status.success(), "{}", run.report());
    let finished = receiver.next("finished");
    assert_eq!(finished["event"], "finished", "{finished:#}");
    assert_eq!(finished["lane_status"], "finished");
    cursors.push(finished["cursor"].as_u64().expect("cursor"));
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    receiver.assert_no_more();
    // Each was the stream event that entered the situation.
    let stream =
        std::fs::read_to_string(s.repo.join(".git/clawpool/stream.jsonl")).expect("stream");
    let kinds: Vec<String> = stream
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|e| cursors.contains(&e["cursor"].as_u64().unwrap_or(u64::MAX)))
        .map(|e| e["kind"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(kinds, ["lane.blocked", "lane.blocked", "lane.finished"]);
    let endpoint = &record(&s)["endpoints"]["notify#1"];
    assert_eq!(endpoint["delivered"], 3, "{endpoint:#}");
    assert_eq!(endpoint["pending"], serde_json::json!([]));
    assert_eq!(
        endpoint["target"],
        format!("http://127.0.0.1:{}/…", receiver.port)
    );
    assert!(!run.report().contains(SECRET));
}

/// A lane that finishes as soon as it has its prompt.
const QUICK: &str = r#"
[[prompt]]
steps = [{ do = "write_file", path = "out.txt", content = "done\n" }]
"#;

#[test]
fn a_receiver_that_is_down_gets_the_notification_once_after_it_comes_up() {
    let s = setup();
    let down = clawpool_tests::ClosedPort::new();
    let port = down.port;
    with_notify(
        &s,
        &format!(
            "[[notify]]\nname = \"team\"\nwebhook = {:?}\nevents = [\"finished\"]\n",
            Receiver::url(port)
        ),
    );
    scenario(&s, QUICK);
    // The lane runs to its end while nobody listens: delivery is not on its path.
    let mut run = spawn_solo(&s);
    let status = run.wait_exit(PATIENCE);
    assert!(status.success(), "{}", run.report());
    let endpoint = &record(&s)["endpoints"]["team"];
    assert!(
        endpoint["failures"].as_u64().unwrap_or(0) >= 1,
        "{endpoint:#}"
    );
    assert_eq!(endpoint["delivered"], 0);
    assert_eq!(endpoint["pending"].as_array().map(Vec::len), Some(1));
    assert!(
        endpoint["last_error"]
            .as_str()
            .is_some_and(|e| !e.contains(SECRET)),
        "{endpoint:#}"
    );
    // `doctor` says so, without the URL's secret.
    let doctor = s
        .sandbox
        .clawpool()
        .args(["doctor", "--output-format", "json", "--config"])
        .arg(&s.config)
        .arg("--repo")
        .arg(&s.repo)
        .output()
        .expect("doctor");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(!text.contains(SECRET), "{text}");
    let doc: Value = serde_json::from_str(&text).expect("doctor JSON");
    let check = doc["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "notify team"))
        .unwrap_or_else(|| panic!("a notify check: {doc:#}"));
    assert_eq!(check["ok"], false, "{check:#}");
    assert_eq!(check["severity"], "warning");
    assert!(
        check["detail"]
            .as_str()
            .is_some_and(|d| d.contains("keeps failing") && d.contains("1 notifications waiting")),
        "{check:#}"
    );

    // Up: the repository's next owner of lanes (its daemon) sends what waited, once.
    drop(down);
    let up_at = now_ms();
    let receiver = Receiver::on(TcpListener::bind(("127.0.0.1", port)).expect("the same port"));
    let mut daemon = crate::spawn::start_daemon(&s);
    let note = receiver.next("the finished lane, once the receiver is up");
    assert_eq!(note["event"], "finished", "{note:#}");
    assert_eq!(note["lane"], "solo");
    assert!(
        note["at_ms"].as_u64().expect("at_ms") < up_at,
        "the lane finished before the receiver came up: {note:#}"
    );
    crate::spawn::ask_daemon_to_stop(&s);
    let _ = daemon.wait();
    receiver.assert_no_more();
    let endpoint = &record(&s)["endpoints"]["team"];
    assert_eq!(endpoint["delivered"], 1, "{endpoint:#}");
    assert_eq!(endpoint["failures"], 0);
    assert_eq!(endpoint["pending"], serde_json::json!([]));
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

#[test]
fn a_command_notifier_gets_the_notification_on_its_stdin() {
    let s = setup();
    let out = s.sandbox.dir.path().join("notified.jsonl");
    with_notify(
        &s,
        &format!(
            "[[notify]]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$0\\\"\", {:?}]\nevents = [\"finished\"]\n",
            out.display().to_string()
        ),
    );
    scenario(&s, QUICK);
    let mut run = spawn_solo(&s);
    assert!(run.wait_exit(PATIENCE).success(), "{}", run.report());
    let text = std::fs::read_to_string(&out).expect("the command ran");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON document a line"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["event"], "finished");
    assert_eq!(lines[0]["lane"], "solo");
    assert_eq!(lines[0]["lane_status"], "finished");
    assert!(
        lines[0]["next_action"]
            .as_str()
            .is_some_and(|a| a.contains("solo"))
    );
}

/// The lane blocks on a question before the dashboard opens (no bell), then, answered, on
/// another while it shows (one bell).
#[test]
fn the_dashboard_rings_the_bell_when_a_lane_starts_to_need_a_person() {
    let s = setup();
    scenario(&s, ASKS_TWICE);
    let mut run = spawn_solo(&s);
    run.wait_for(
        "the first question",
        PATIENCE,
        |e| e["kind"] == "lane.escalated",
        String::new,
    );
    let term = Tmux::start(&s);
    // What the dashboard writes to its terminal, byte for byte.
    let bytes = s.sandbox.dir.path().join("pane.bytes");
    term.run(&[
        "pipe-pane",
        "-o",
        "-t",
        "bell",
        &format!("cat >> {:?}", bytes.display().to_string()),
    ]);
    term.run(&[
        "send-keys",
        "-t",
        "bell",
        "-l",
        &format!(
            "{:?} ui --config {:?}",
            clawpool_tests::workspace_bin("clawpool")
                .display()
                .to_string(),
            s.config.display().to_string()
        ),
    ]);
    term.run(&["send-keys", "-t", "bell", "Enter"]);
    term.wait_screen("the blocked lane", |screen| {
        screen.contains("solo") && screen.contains("blocked{tool_permission}")
    });
    // Already waiting when the dashboard opened: no bell.
    let bells = || {
        std::fs::read(&bytes)
            .unwrap_or_default()
            .iter()
            .filter(|b| **b == 0x07)
            .count()
    };
    assert_eq!(bells(), 0);
    answer_yes(&s, &s.lanes_dir().join("solo"));
    run.wait_for(
        "the second question",
        PATIENCE,
        |e| e["kind"] == "lane.blocked",
        String::new,
    );
    let deadline = Instant::now() + PATIENCE;
    while bells() == 0 {
        assert!(Instant::now() < deadline, "no bell:\n{}", term.screen());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(bells(), 1);
    term.run(&["send-keys", "-t", "bell", "q"]);
    answer_yes(&s, &s.lanes_dir().join("solo"));
    assert!(run.wait_exit(PATIENCE).success(), "{}", run.report());
}

/// A shell in a private tmux server.
struct Tmux<'a> {
    setup: &'a Setup,
}

impl<'a> Tmux<'a> {
    fn start(setup: &'a Setup) -> Self {
        let term = Tmux { setup };
        let shell = format!(
            "cd {:?} && exec bash --norc --noprofile",
            setup.repo.display().to_string()
        );
        term.run(&[
            "new-session",
            "-d",
            "-s",
            "bell",
            "-x",
            "140",
            "-y",
            "40",
            &shell,
        ]);
        term
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self
            .setup
            .sandbox
            .tmux()
            .args(["-L", "notify-bell"])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(out.status.success(), "tmux {args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "bell"])
    }

    fn wait_screen(&self, what: &str, ready: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return;
            }
            assert!(Instant::now() < deadline, "never showed {what}:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux<'_> {
    fn drop(&mut self) {
        let _ = self
            .setup
            .sandbox
            .tmux()
            .args(["-L", "notify-bell", "kill-server"])
            .status();
    }
}
