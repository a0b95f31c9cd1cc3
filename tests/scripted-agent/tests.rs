//! Whole-agent tests without a terminal: sessions driven key by key through [`App`] with a
//! made-up clock, checking the screens (as text) and the prompt log. The PTY end-to-end
//! tests live in `tests/e2e`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::app::{App, BOOT_QUESTION, Control, TRUST_NOT_APPLIED, TRUST_QUESTION};
use crate::input::Decoder;
use crate::prompt_log::PromptLog;
use crate::scenario::Scenario;
use crate::term::TermSize;
use crate::ui::{HEADER, STATUS_IDLE, STATUS_WORKING};

const SIZE: TermSize = TermSize { rows: 20, cols: 60 };

/// An app in a temp folder with a prompt log, and a clock the test moves.
struct Session {
    app: App,
    now: Instant,
    dir: tempfile::TempDir,
}

impl Session {
    fn new(scenario: &str) -> Self {
        Self::with(scenario, None, false)
    }

    fn with(scenario: &str, launch: Option<&str>, line_feed_submits: bool) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let scenario = Scenario::parse(scenario).expect("test scenarios are valid");
        let now = Instant::now();
        let app = App::new(
            scenario,
            dir.path().to_owned(),
            PromptLog::new(Some(dir.path().join("log.jsonl"))),
            launch.map(str::to_owned),
            line_feed_submits,
            now,
        );
        let mut session = Self { app, now, dir };
        session.tick(0);
        session
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Moves the clock and lets the app catch up, like the event loop does.
    fn tick(&mut self, ms: u64) -> Control {
        self.now += Duration::from_millis(ms);
        let mut control = self.app.advance(self.now);
        // Output steps come back "now" until done.
        while control == Control::Continue && self.app.deadline(self.now) == Some(self.now) {
            control = self.app.advance(self.now);
        }
        control
    }

    /// Types raw bytes as a terminal would send them.
    fn type_bytes(&mut self, bytes: &[u8]) -> Control {
        let mut decoder = Decoder::new();
        let mut keys = decoder.feed(bytes);
        keys.extend(decoder.flush());
        let mut control = Control::Continue;
        for key in keys {
            control = self.app.key(key, self.now);
            if control != Control::Continue {
                break;
            }
        }
        control
    }

    fn screen(&self) -> Vec<String> {
        let screen = self.app.screen(self.now, SIZE);
        screen.text().into_iter().map(str::to_owned).collect()
    }

    fn shows(&self, text: &str) -> bool {
        self.screen().iter().any(|line| line == text)
    }

    fn log(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.path().join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("log lines are JSON"))
            .collect()
    }

    fn transcript(&self) -> Vec<String> {
        self.app.transcript().lines().map(str::to_owned).collect()
    }
}

fn dump(session: &Session) -> String {
    session.screen().join("\n")
}

#[test]
fn trust_dialog_then_a_prompt() {
    let mut s = Session::new(
        "trust_dialog = true\n[[prompt]]\nsteps = [{ do = \"say\", text = \"hi there\" }, { do = \"sleep\", ms = 1500 }]",
    );
    let screen = s.screen();
    assert_eq!(screen[0], HEADER);
    assert_eq!(screen[1], format!("  cwd: {}", s.path().display()));
    assert!(s.shows(TRUST_QUESTION), "{}", dump(&s));
    assert!(s.shows(&s.path().display().to_string()));
    assert!(s.shows("❯ 1. No, exit"));
    assert!(s.shows("  2. Yes, I trust this folder"));
    assert!(s.shows("Enter to confirm · Esc to exit"));

    s.type_bytes(b"\x1b[B");
    assert!(s.shows("  1. No, exit"));
    assert!(s.shows("❯ 2. Yes, I trust this folder"));
    assert_eq!(s.type_bytes(b"\r"), Control::Continue);
    s.tick(0);
    assert!(s.shows(STATUS_IDLE), "{}", dump(&s));
    assert!(s.shows("❯ "));

    s.type_bytes(b"fix the bug");
    assert!(s.shows("❯ fix the bug"));
    s.type_bytes(b"\r");
    assert!(s.shows(STATUS_WORKING), "{}", dump(&s));
    assert!(s.shows("❯ "), "the draft left the input line");
    let screen = s.screen();
    let rule = "─".repeat(60);
    let top_rule = screen
        .iter()
        .position(|l| *l == rule)
        .expect("the input box shows");
    assert_eq!(screen[top_rule - 1], "✢ Working… (0s · esc to interrupt)");
    assert_eq!(s.transcript(), vec!["❯ fix the bug", "hi there"]);

    s.tick(1100);
    assert!(
        s.shows("✳ Working… (1s · esc to interrupt)"),
        "{}",
        dump(&s)
    );
    s.tick(400);
    assert!(s.shows(STATUS_IDLE));
    assert_eq!(
        s.transcript().last().map(String::as_str),
        Some("✻ Done in 1s")
    );

    let log = s.log();
    assert_eq!(log.len(), 2);
    assert_eq!(
        (log[0]["event"].as_str(), log[0]["choice"].as_str()),
        (Some("trust"), Some("yes"))
    );
    assert_eq!(
        (log[1]["event"].as_str(), log[1]["text"].as_str()),
        (Some("prompt"), Some("fix the bug"))
    );
}

/// `trust_needs_restart`: the yes is saved in the store, this process stays untrusted and
/// takes no prompt; the next start in the same folder is trusted without asking.
#[test]
fn trust_saved_but_not_applied_until_the_agent_starts_again() {
    const SCENARIO: &str =
        "trust_dialog = true\ntrust_store = \"trusted.txt\"\ntrust_needs_restart = true";
    let mut s = Session::new(SCENARIO);
    s.type_bytes(b"\x1b[B\r");
    s.tick(0);
    assert!(s.shows(TRUST_NOT_APPLIED), "{}", dump(&s));
    s.type_bytes(b"a prompt\r");
    s.tick(1000);
    assert!(s.shows(TRUST_NOT_APPLIED), "{}", dump(&s));
    assert!(!s.shows(STATUS_IDLE));
    assert_eq!(
        std::fs::read_to_string(s.path().join("trusted.txt")).expect("the store"),
        format!("{}\n", s.path().display())
    );
    assert!(s.log().iter().all(|e| e["event"] != "prompt"));

    let again = App::new(
        Scenario::parse(SCENARIO).expect("valid"),
        s.path().to_owned(),
        PromptLog::new(None),
        None,
        false,
        s.now,
    );
    let screen = again.screen(s.now, SIZE).text().join("\n");
    assert!(!screen.contains(TRUST_QUESTION), "{screen}");
    assert!(!screen.contains(TRUST_NOT_APPLIED), "{screen}");
}

#[test]
fn trust_dialog_enter_on_default_exits_1() {
    let mut s = Session::new("trust_dialog = true");
    assert_eq!(
        s.type_bytes(b"\r"),
        Control::Exit {
            code: 1,
            goodbye: false
        }
    );
    assert_eq!(s.log()[0]["choice"], "no");
    let mut s = Session::new("trust_dialog = true");
    assert_eq!(
        s.type_bytes(b"\x1b"),
        Control::Exit {
            code: 1,
            goodbye: false
        }
    );
    let mut s = Session::new("trust_dialog = true");
    assert_eq!(s.type_bytes(b"2"), Control::Continue);
}

#[test]
fn boot_dialog_records_the_choice_and_continues() {
    let mut s = Session::new("trust_dialog = true\nboot_dialog = true\nstartup_delay_ms = 500");
    s.type_bytes(b"2");
    assert!(s.shows(BOOT_QUESTION), "{}", dump(&s));
    assert!(s.shows("❯ 1. No (recommended)"));
    assert!(s.shows("  2. Yes"));
    s.type_bytes(b"\x1bOB\x1bOA\r");
    assert!(!s.shows(BOOT_QUESTION));
    s.type_bytes(b"early");
    s.tick(499);
    assert!(!s.shows(STATUS_IDLE), "not ready during the startup delay");
    s.tick(1);
    assert!(s.shows(STATUS_IDLE));
    assert!(s.shows("❯ "), "keys typed before ready are lost");
    let log = s.log();
    assert_eq!(log[1]["event"], "boot_dialog");
    assert_eq!(log[1]["choice"], "no");
}

#[test]
fn paste_multiline_prompt_and_backspace() {
    let mut s = Session::new("");
    s.type_bytes(b"\x1b[200~first line\rsecond line\x1b[201~!\x7f?");
    assert!(s.shows("❯ first line"), "{}", dump(&s));
    assert!(s.shows("  second line?"));
    s.type_bytes(b"\r");
    assert_eq!(s.transcript()[..2], ["❯ first line", "  second line?"]);
    assert_eq!(s.log()[0]["text"], "first line\nsecond line?");
    s.tick(300);
    assert_eq!(
        s.transcript().last().map(String::as_str),
        Some("✻ Done in 0s")
    );
}

#[test]
fn ignore_first_enter_keeps_the_draft() {
    let mut s = Session::new("ignore_first_enter = true");
    s.type_bytes(b"\r");
    s.type_bytes(b"hello\r");
    assert!(s.shows("❯ hello"));
    assert!(s.log().is_empty());
    s.type_bytes(b"\r");
    assert!(s.shows(STATUS_WORKING));
    assert_eq!(s.log().len(), 1);
}

#[test]
fn enter_while_working_is_not_queued() {
    let mut s = Session::new("");
    s.type_bytes(b"one\r");
    s.type_bytes(b"two\r");
    assert!(s.shows("❯ two"));
    s.tick(300);
    assert!(s.shows("❯ two"));
    assert_eq!(s.log().len(), 1);
}

#[test]
fn esc_interrupts_a_hang_and_ctrl_c_idle_exits_130() {
    let mut s = Session::new("[[prompt]]\nsteps = [{ do = \"hang\" }]");
    s.type_bytes(b"go\r");
    s.tick(5000);
    assert!(
        s.shows("✢ Working… (5s · esc to interrupt)"),
        "{}",
        dump(&s)
    );
    assert_eq!(s.type_bytes(b"\x1b"), Control::Continue);
    assert_eq!(
        s.transcript().last().map(String::as_str),
        Some("Interrupted")
    );
    assert!(s.shows(STATUS_IDLE));
    s.type_bytes(b"again\r");
    assert_eq!(s.type_bytes(b"\x03"), Control::Continue);
    assert!(s.shows(STATUS_IDLE));
    assert_eq!(
        s.type_bytes(b"\x03"),
        Control::Exit {
            code: 130,
            goodbye: false
        }
    );
}

#[test]
fn an_interrupted_prompt_goes_back_into_the_input_line() {
    let mut s = Session::new(
        "restore_prompt_on_interrupt_ms = 300\n[[prompt]]\nsteps = [{ do = \"hang\" }]",
    );
    s.type_bytes(b"add div\r");
    s.type_bytes(b"\x1b");
    assert!(s.shows("❯ "), "the line is empty at first\n{}", dump(&s));
    s.tick(299);
    assert!(s.shows("❯ "), "{}", dump(&s));
    s.tick(1);
    assert!(
        s.shows("❯ add div"),
        "put back after the delay\n{}",
        dump(&s)
    );
    // Ctrl-U empties the line.
    s.type_bytes(b"\x15");
    assert!(s.shows("❯ "), "{}", dump(&s));
    s.type_bytes(b"add div again\r");
    // A key before the delay is over lands after the prompt put back.
    s.type_bytes(b"\x1b");
    s.type_bytes(b"tests\r");
    let prompts: Vec<_> = s.log().iter().map(|e| e["text"].clone()).collect();
    assert_eq!(prompts, ["add div", "add div again", "add div againtests"]);
    s.tick(1000);
    assert_eq!(s.log().len(), 3, "put back once only");
}

#[test]
fn without_the_option_an_interrupted_prompt_is_gone() {
    let mut s = Session::new("[[prompt]]\nsteps = [{ do = \"hang\" }]");
    s.type_bytes(b"add div\r\x1b");
    s.tick(10_000);
    assert!(s.shows("❯ "), "{}", dump(&s));
}

#[test]
fn spinner_forever_keeps_the_seconds() {
    let mut s = Session::new(
        "[[prompt]]\nsteps = [{ do = \"sleep\", ms = 1000 }, { do = \"spinner_forever\" }]",
    );
    s.type_bytes(b"go\r");
    s.tick(1000);
    s.tick(9000);
    assert!(
        s.shows("✢ Working… (1s · esc to interrupt)"),
        "{}",
        dump(&s)
    );
    s.tick(100);
    assert!(
        s.shows("✳ Working… (1s · esc to interrupt)"),
        "{}",
        dump(&s)
    );
}

#[test]
fn permission_yes_and_no() {
    let scenario = "[[prompt]]\nsteps = [{ do = \"permission\", tool = \"Write(file)\" }, { do = \"say\", text = \"went ahead\" }]";
    let mut s = Session::new(scenario);
    s.type_bytes(b"go\r");
    assert!(s.shows("Do you want to proceed?"), "{}", dump(&s));
    assert!(s.shows("Permission requested: Write(file)"));
    assert!(s.shows("❯ 1. Yes"));
    assert!(s.shows("  2. No"));
    assert!(!s.shows(STATUS_WORKING), "the input box is hidden");
    s.type_bytes(b"\r");
    s.tick(0);
    assert!(s.transcript().contains(&"went ahead".to_owned()));

    let mut s = Session::new(scenario);
    s.type_bytes(b"go\r\x1b[B");
    assert!(s.shows("❯ 2. No"));
    s.type_bytes(b"\r");
    s.tick(0);
    let transcript = s.transcript();
    assert!(transcript.contains(&"Permission denied".to_owned()));
    assert!(!transcript.contains(&"went ahead".to_owned()));
    assert!(s.shows(STATUS_IDLE));
}

#[test]
fn files_commit_and_output() {
    let mut s = Session::new(
        "[[prompt]]\nsteps = [\n  { do = \"write_file\", path = \"src/a.txt\", content = \"A\" },\n  { do = \"git_commit\", message = \"m\" },\n  { do = \"output\", lines = 120 },\n]",
    );
    s.type_bytes(b"go\r");
    s.tick(0);
    assert_eq!(
        std::fs::read_to_string(s.path().join("src/a.txt")).expect("written"),
        "A"
    );
    let transcript = s.transcript();
    assert!(
        transcript
            .iter()
            .any(|l| l.starts_with("git commit failed")),
        "not a repository"
    );
    assert!(transcript.contains(&"line 120".to_owned()));
    assert_eq!(transcript.last().map(String::as_str), Some("✻ Done in 0s"));
}

#[test]
fn exits_crashes_and_shell() {
    let mut s = Session::new("[[prompt]]\nsteps = [{ do = \"exit\", code = 4 }]");
    assert_eq!(
        s.type_bytes(b"go\r"),
        Control::Exit {
            code: 4,
            goodbye: true
        }
    );
    let mut s = Session::new("[[prompt]]\nsteps = [{ do = \"crash\", code = 9 }]");
    assert_eq!(
        s.type_bytes(b"go\r"),
        Control::Exit {
            code: 9,
            goodbye: false
        }
    );
    let mut s = Session::new("[[prompt]]\nsteps = [{ do = \"shell_error\" }]");
    assert_eq!(
        s.type_bytes(b"ls -la\r"),
        Control::ShellError {
            prompt: "ls -la".to_owned()
        }
    );
}

#[test]
fn exit_after_prompts_and_repeating_last_script() {
    let mut s = Session::new(
        "exit_after_prompts = 2\n[[prompt]]\nsteps = [{ do = \"say\", text = \"first\" }]\n[[prompt]]\nsteps = [{ do = \"say\", text = \"later\" }]",
    );
    assert_eq!(s.type_bytes(b"a\r"), Control::Continue);
    assert_eq!(
        s.type_bytes(b"b\r"),
        Control::Exit {
            code: 0,
            goodbye: true
        }
    );
    let transcript = s.transcript();
    assert!(transcript.contains(&"first".to_owned()) && transcript.contains(&"later".to_owned()));
}

#[test]
fn launch_prompt_runs_once_ready_unless_disabled() {
    let mut s = Session::with("startup_delay_ms = 100", Some("from argv"), false);
    assert!(s.log().is_empty());
    s.tick(100);
    assert_eq!(s.log()[0]["text"], "from argv");
    assert!(s.shows(STATUS_WORKING));

    let s = Session::with("launch_prompt_arg = false", Some("from argv"), false);
    assert!(s.log().is_empty());
    assert!(s.shows(STATUS_IDLE));
}

#[test]
fn piped_stdin_line_feed_submits_and_eof_exits() {
    let mut s = Session::with("", None, true);
    s.type_bytes(b"hello\n");
    assert_eq!(s.log()[0]["text"], "hello");
    s.app.stdin_closed();
    assert_eq!(s.tick(0), Control::Continue, "finishes the prompt first");
    assert_eq!(
        s.tick(300),
        Control::Exit {
            code: 0,
            goodbye: false
        }
    );
}

#[test]
fn line_feed_in_a_terminal_starts_a_new_draft_line() {
    let mut s = Session::new("");
    s.type_bytes(b"a\nb");
    assert!(s.shows("❯ a") && s.shows("  b"), "{}", dump(&s));
}
