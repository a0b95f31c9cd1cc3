//! Running one prompt's step list: the [`Run`] (which step is next, what it waits for,
//! the spinner's clock) and the steps' side effects on the working folder (files, git).
//!
//! Nothing here blocks on time: waiting steps record a deadline or a state and the event
//! loop comes back, so keys (Esc, Ctrl-C) stay responsive while "working".

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::scenario::Step;
use crate::ui::{SPINNER_GLYPHS, Transcript};

/// How often the spinner redraws.
pub const SPINNER_TICK: Duration = Duration::from_millis(100);

/// What the current step waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wait {
    /// Nothing: run the next step.
    Ready,
    /// A `sleep` step, until then.
    Until(Instant),
    /// A `hang` step: forever.
    Hang,
    /// A `spinner_forever` step: forever, the spinner showing these seconds.
    Frozen(u64),
    /// A `permission` step: the answer.
    Permission {
        /// The tool asking.
        tool: String,
        /// The highlighted entry: 0 = Yes, 1 = No.
        selected: usize,
        /// What the question shows between the tool and the question (a command, a file).
        detail: Vec<String>,
    },
    /// A `provider_down` step: retrying, until `until`.
    Provider {
        /// When the first attempt failed.
        since: Instant,
        /// Time between attempts.
        every: Duration,
        /// When the provider is back.
        until: Instant,
    },
    /// A `notice` step: shown until `until`; keys pressed meanwhile are counted, not acted on.
    Notice {
        /// The notice's text.
        text: String,
        /// When it goes away by itself.
        until: Instant,
        /// Keys received while it showed.
        keys: u32,
    },
    /// An `output` step part-way through.
    Output {
        /// Lines written so far.
        done: u64,
        /// Lines to write.
        total: u64,
    },
}

/// What advancing a run led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Waiting for time or a key.
    Blocked,
    /// The step list ended.
    Finished,
    /// An `exit` step: say goodbye, exit with this code.
    Exit(u8),
    /// A `crash` step: exit at once with this code.
    Crash(u8),
    /// A `shell_error` step: become a shell.
    ShellError,
}

/// One prompt being worked on.
#[derive(Debug, Clone)]
pub struct Run {
    /// The prompt, as received.
    pub prompt: String,
    started: Instant,
    steps: Vec<Step>,
    next: usize,
    wait: Wait,
    /// A notice that went away: its text and the keys received while it showed.
    notice_gone: Option<(String, u32)>,
    /// Text a `raw` step wrote, not yet written to the terminal.
    raw: Vec<u8>,
}

impl Run {
    /// Starts working on `prompt` at `now`.
    pub fn new(prompt: String, steps: Vec<Step>, now: Instant) -> Self {
        Self {
            prompt,
            started: now,
            steps,
            next: 0,
            wait: Wait::Ready,
            notice_gone: None,
            raw: Vec::new(),
        }
    }

    /// Runs steps until one has to wait. An `output` step writes at most `chunk` lines per
    /// call so every screenful gets drawn.
    pub fn advance(
        &mut self,
        now: Instant,
        cwd: &Path,
        transcript: &mut Transcript,
        chunk: u64,
    ) -> Effect {
        loop {
            match &mut self.wait {
                Wait::Ready => {}
                Wait::Until(deadline) if now < *deadline => return Effect::Blocked,
                Wait::Until(_) => self.wait = Wait::Ready,
                Wait::Provider { until, .. } if now < *until => return Effect::Blocked,
                Wait::Provider { .. } => self.wait = Wait::Ready,
                Wait::Notice { until, .. } if now < *until => return Effect::Blocked,
                Wait::Notice { text, keys, .. } => {
                    self.notice_gone = Some((std::mem::take(text), *keys));
                    self.wait = Wait::Ready;
                }
                Wait::Hang | Wait::Frozen(_) | Wait::Permission { .. } => return Effect::Blocked,
                Wait::Output { done, total } => {
                    let (from, total) = (*done, *total);
                    let end = total.min(from.saturating_add(chunk.max(1)));
                    for n in from + 1..=end {
                        transcript.push(&format!("line {n}"));
                    }
                    *done = end;
                    if end < total {
                        return Effect::Blocked;
                    }
                    self.wait = Wait::Ready;
                    // Let this last screenful be drawn before the steps after it run.
                    return Effect::Blocked;
                }
            }
            let Some(step) = self.steps.get(self.next).cloned() else {
                return Effect::Finished;
            };
            self.next += 1;
            match step {
                Step::Say { text } => transcript.push(&text),
                Step::Raw { text } => {
                    transcript.push(&format!("Printed {} raw bytes", text.len()));
                    self.raw.extend_from_slice(text.as_bytes());
                }
                Step::WriteFile { path, content } => {
                    transcript.push(&write_file(cwd, &path, &content, false));
                }
                Step::AppendFile { path, content } => {
                    transcript.push(&write_file(cwd, &path, &content, true));
                }
                Step::GitCommit { message } => transcript.push(&git_commit(cwd, &message)),
                Step::Run { command } => transcript.push(&run_command(cwd, &command)),
                Step::Hook { event, payload } => {
                    transcript.push(&run_hooks(cwd, &event, &payload));
                }
                Step::Sleep { ms } => self.wait = Wait::Until(now + Duration::from_millis(ms)),
                Step::Hang {} => self.wait = Wait::Hang,
                Step::SpinnerForever {} => self.wait = Wait::Frozen(self.elapsed_secs(now)),
                Step::Permission {
                    tool,
                    command,
                    file,
                } => {
                    self.wait = Wait::Permission {
                        tool,
                        selected: 0,
                        detail: permission_detail(command, file),
                    }
                }
                Step::Notice { text, ms } => {
                    self.wait = Wait::Notice {
                        text,
                        until: now + Duration::from_millis(ms),
                        keys: 0,
                    }
                }
                Step::Output { lines } => {
                    self.wait = Wait::Output {
                        done: 0,
                        total: lines,
                    }
                }
                Step::ProviderDown { attempts, every_ms } => {
                    let every = Duration::from_millis(every_ms.max(1));
                    self.wait = Wait::Provider {
                        since: now,
                        every,
                        until: now + every * attempts,
                    };
                }
                Step::Crash { code } => return Effect::Crash(code),
                Step::Exit { code } => return Effect::Exit(code),
                Step::ShellError {} => return Effect::ShellError,
            }
        }
    }

    /// When the loop must come back even without input: the next spinner tick, the end of
    /// a sleep, or now while output is pending. `None` while asking for permission.
    pub fn deadline(&self, now: Instant) -> Option<Instant> {
        let tick = self.started + SPINNER_TICK * (self.ticks(now) + 1);
        match &self.wait {
            Wait::Permission { .. } => None,
            Wait::Output { .. } | Wait::Ready => Some(now),
            Wait::Until(deadline) => Some(tick.min(*deadline)),
            Wait::Provider { until, .. } => Some(tick.min(*until)),
            Wait::Notice { until, .. } => Some(*until),
            Wait::Hang | Wait::Frozen(_) => Some(tick),
        }
    }

    /// Spinner ticks since the start: the glyph changes, and the line is redrawn, on each.
    pub fn ticks(&self, now: Instant) -> u32 {
        let ms = now.saturating_duration_since(self.started).as_millis();
        u32::try_from(ms / SPINNER_TICK.as_millis()).unwrap_or(u32::MAX)
    }

    /// Whole seconds since the prompt was received.
    pub fn elapsed_secs(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.started).as_secs()
    }

    /// The spinner line: `✢ Working… (Ns · esc to interrupt)`; while the provider is down,
    /// its retry line instead.
    pub fn spinner(&self, now: Instant) -> String {
        if let Wait::Provider { since, every, .. } = self.wait {
            let waited = now.saturating_duration_since(since);
            let attempt = waited.as_millis() / every.as_millis().max(1) + 1;
            let next = every.saturating_sub(Duration::from_millis(
                u64::try_from(waited.as_millis() % every.as_millis().max(1)).unwrap_or(0),
            ));
            return format!(
                "⎿ API Error (Connection refused) · retrying in {}s · attempt {attempt}/10",
                next.as_secs().max(1)
            );
        }
        let glyph = SPINNER_GLYPHS[self.ticks(now) as usize % SPINNER_GLYPHS.len()];
        let secs = match self.wait {
            Wait::Frozen(secs) => secs,
            _ => self.elapsed_secs(now),
        };
        format!("{glyph} Working… ({secs}s · esc to interrupt)")
    }

    /// The permission being asked (tool, highlighted entry), if any.
    pub fn permission(&self) -> Option<(&str, usize)> {
        match &self.wait {
            Wait::Permission { tool, selected, .. } => Some((tool, *selected)),
            _ => None,
        }
    }

    /// What the permission being asked shows about its command or file, if any.
    pub fn permission_detail(&self) -> &[String] {
        match &self.wait {
            Wait::Permission { detail, .. } => detail,
            _ => &[],
        }
    }

    /// The notice showing, if any.
    pub fn notice(&self) -> Option<&str> {
        match &self.wait {
            Wait::Notice { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Counts a key received while a notice shows; `false` when none does.
    pub fn notice_key(&mut self) -> bool {
        match &mut self.wait {
            Wait::Notice { keys, .. } => {
                *keys += 1;
                true
            }
            _ => false,
        }
    }

    /// The notice that went away since the last call: its text and the keys it received.
    /// What `raw` steps wrote since the last call, for the terminal as it is.
    pub fn take_raw(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.raw)
    }

    pub fn take_notice_gone(&mut self) -> Option<(String, u32)> {
        self.notice_gone.take()
    }

    /// Highlights Yes (0) or No (1) while asking.
    pub fn select(&mut self, entry: usize) {
        if let Wait::Permission { selected, .. } = &mut self.wait {
            *selected = entry.min(1);
        }
    }

    /// Answers the permission prompt: Yes carries on; No writes `Permission denied` and
    /// ends the step list.
    pub fn answer(&mut self, yes: bool, transcript: &mut Transcript) {
        if self.permission().is_none() {
            return;
        }
        if !yes {
            transcript.push("Permission denied");
            self.next = self.steps.len();
        }
        self.wait = Wait::Ready;
    }
}

/// Writes or appends a file under `cwd`, creating its folders; returns the transcript line.
fn write_file(cwd: &Path, path: &Path, content: &str, append: bool) -> String {
    let full = cwd.join(path);
    let result = (|| {
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&full)?;
        file.write_all(content.as_bytes())
    })();
    let verb = if append { "append_file" } else { "write_file" };
    match result {
        Ok(()) if append => format!("Appended to {}", path.display()),
        Ok(()) => format!("Wrote {}", path.display()),
        Err(e) => format!("{verb} failed: {}: {e}", path.display()),
    }
}

/// `git add -A && git commit -m MESSAGE` in `cwd`; returns the transcript line. Git's own
/// output is captured: it would scribble over the screen.
/// `$ COMMAND`, then what it printed (stdout, then stderr) and, when it failed, its status.
/// The `--settings` file the agent was started with, set once at start.
static SETTINGS: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Takes `file` as the settings whose hooks `hook` steps run.
pub fn use_settings(file: std::path::PathBuf) {
    let _ = SETTINGS.set(file);
}

/// Runs the command hooks the settings declare for `event`, each given `payload` on stdin:
/// what a `hook` step shows in the transcript.
fn run_hooks(cwd: &Path, event: &str, payload: &str) -> String {
    let Some(file) = SETTINGS.get() else {
        return format!("Hook {event}: no --settings");
    };
    let settings: serde_json::Value = match std::fs::read(file)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
    {
        Ok(settings) => settings,
        Err(e) => return format!("Hook {event}: {}: {e}", file.display()),
    };
    let commands: Vec<String> = settings["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|entry| entry["hooks"].as_array().into_iter().flatten())
        .filter(|hook| hook["type"] == "command")
        .filter_map(|hook| hook["command"].as_str().map(str::to_owned))
        .collect();
    for command in &commands {
        let child = Command::new("sh")
            .args(["-c", command])
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(mut child) = child {
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(payload.as_bytes());
            }
            let _ = child.wait();
        }
    }
    format!("Hook {event}: {} command(s)", commands.len())
}

fn run_command(cwd: &Path, command: &str) -> String {
    let output = Command::new("sh")
        .args(["-c", command])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output();
    let mut text = format!("$ {command}");
    match output {
        Err(e) => text.push_str(&format!("\ncannot run sh: {e}")),
        Ok(out) => {
            for stream in [&out.stdout, &out.stderr] {
                let printed = String::from_utf8_lossy(stream);
                if !printed.trim().is_empty() {
                    text.push('\n');
                    text.push_str(printed.trim_end());
                }
            }
            if !out.status.success() {
                text.push_str(&format!("\n({})", out.status));
            }
        }
    }
    text
}

fn git_commit(cwd: &Path, message: &str) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .output()
    };
    for args in [&["add", "-A"][..], &["commit", "-q", "-m", message][..]] {
        match git(args) {
            Err(e) => return format!("git commit failed: cannot run git: {e}"),
            Ok(out) if !out.status.success() => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let stdout = String::from_utf8_lossy(&out.stdout);
                let why = stderr
                    .lines()
                    .chain(stdout.lines())
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("no output")
                    .to_owned();
                return format!("git commit failed: git {}: {why}", args[0]);
            }
            Ok(_) => {}
        }
    }
    format!("Committed: {}", message.lines().next().unwrap_or(""))
}

/// The lines a permission question shows about its command (between dashed rules under
/// `Bash command`) or file (under `Create file`), laid out as Claude Code 2.1.330 does.
fn permission_detail(command: Option<String>, file: Option<String>) -> Vec<String> {
    let rule = "╌".repeat(40);
    let mut lines = Vec::new();
    if let Some(command) = command {
        lines.push(" Bash command".to_owned());
        lines.push(rule.clone());
        lines.extend(command.lines().map(|line| format!(" {line}")));
        lines.push(rule);
    }
    if let Some(file) = file {
        lines.push(" Create file".to_owned());
        lines.push(format!(" {file}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(steps: Vec<Step>, now: Instant) -> Run {
        Run::new("p".to_owned(), steps, now)
    }

    #[test]
    fn sleep_blocks_until_its_deadline() {
        let t0 = Instant::now();
        let dir = std::env::temp_dir();
        let mut transcript = Transcript::default();
        let mut r = run(
            vec![
                Step::Sleep { ms: 250 },
                Step::Say {
                    text: "after".into(),
                },
            ],
            t0,
        );
        assert_eq!(r.advance(t0, &dir, &mut transcript, 10), Effect::Blocked);
        assert_eq!(r.deadline(t0), Some(t0 + SPINNER_TICK));
        let t = t0 + Duration::from_millis(210);
        assert_eq!(r.deadline(t), Some(t0 + Duration::from_millis(250)));
        let t = t0 + Duration::from_millis(250);
        assert_eq!(r.advance(t, &dir, &mut transcript, 10), Effect::Finished);
        assert_eq!(transcript.lines().collect::<Vec<_>>(), vec!["after"]);
    }

    #[test]
    fn spinner_rotates_and_freezes() {
        let t0 = Instant::now();
        let dir = std::env::temp_dir();
        let mut transcript = Transcript::default();
        let mut r = run(vec![Step::Sleep { ms: 2500 }, Step::SpinnerForever {}], t0);
        r.advance(t0, &dir, &mut transcript, 10);
        assert_eq!(r.spinner(t0), "✢ Working… (0s · esc to interrupt)");
        let t = t0 + Duration::from_millis(1100);
        assert_eq!(r.spinner(t), "✳ Working… (1s · esc to interrupt)");
        let t = t0 + Duration::from_millis(2600);
        assert_eq!(r.advance(t, &dir, &mut transcript, 10), Effect::Blocked);
        let later = t0 + Duration::from_secs(60);
        assert!(r.spinner(later).contains("(2s ·"), "{}", r.spinner(later));
    }

    #[test]
    fn output_comes_in_chunks() {
        let t0 = Instant::now();
        let dir = std::env::temp_dir();
        let mut transcript = Transcript::default();
        let mut r = run(
            vec![Step::Output { lines: 5 }, Step::Say { text: "end".into() }],
            t0,
        );
        assert_eq!(r.advance(t0, &dir, &mut transcript, 2), Effect::Blocked);
        assert_eq!(r.deadline(t0), Some(t0));
        r.advance(t0, &dir, &mut transcript, 2);
        r.advance(t0, &dir, &mut transcript, 2);
        assert_eq!(r.advance(t0, &dir, &mut transcript, 2), Effect::Finished);
        let lines: Vec<_> = transcript.lines().collect();
        assert_eq!(
            lines,
            vec!["line 1", "line 2", "line 3", "line 4", "line 5", "end"]
        );
    }

    #[test]
    fn permission_no_ends_the_list() {
        let t0 = Instant::now();
        let dir = std::env::temp_dir();
        let mut transcript = Transcript::default();
        let mut r = run(
            vec![
                Step::Permission {
                    tool: "Write(f)".into(),
                    command: None,
                    file: None,
                },
                Step::Say {
                    text: "never".into(),
                },
            ],
            t0,
        );
        assert_eq!(r.advance(t0, &dir, &mut transcript, 10), Effect::Blocked);
        assert_eq!(r.permission(), Some(("Write(f)", 0)));
        assert_eq!(r.deadline(t0), None);
        r.select(1);
        assert_eq!(r.permission(), Some(("Write(f)", 1)));
        r.answer(false, &mut transcript);
        assert_eq!(r.advance(t0, &dir, &mut transcript, 10), Effect::Finished);
        assert_eq!(
            transcript.lines().collect::<Vec<_>>(),
            vec!["Permission denied"]
        );
    }

    #[test]
    fn files_are_written_under_cwd_with_parents() {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let mut transcript = Transcript::default();
        let t0 = Instant::now();
        let mut r = run(
            vec![
                Step::WriteFile {
                    path: "a/b/c.txt".into(),
                    content: "one\n".into(),
                },
                Step::AppendFile {
                    path: "a/b/c.txt".into(),
                    content: "two\n".into(),
                },
                Step::AppendFile {
                    path: "new/d.txt".into(),
                    content: "x".into(),
                },
            ],
            t0,
        );
        assert_eq!(
            r.advance(t0, dir.path(), &mut transcript, 10),
            Effect::Finished
        );
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).expect("file was written");
        assert_eq!(read("a/b/c.txt"), "one\ntwo\n");
        assert_eq!(read("new/d.txt"), "x");
        assert_eq!(
            transcript.lines().collect::<Vec<_>>(),
            vec![
                "Wrote a/b/c.txt",
                "Appended to a/b/c.txt",
                "Appended to new/d.txt"
            ]
        );
    }

    #[test]
    fn a_run_step_shows_the_command_its_output_and_a_failure() {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let text = run_command(dir.path(), "pwd; echo oops >&2; exit 3");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "$ pwd; echo oops >&2; exit 3");
        let name = dir.path().file_name().expect("a temp dir has a name");
        assert!(lines[1].ends_with(&*name.to_string_lossy()));
        assert_eq!(lines[2], "oops");
        assert!(lines[3].contains('3'), "{text}");
    }

    #[test]
    fn git_commit_outside_a_repository_reports_failure() {
        let dir = tempfile::tempdir().expect("a temp dir can be created");
        let line = git_commit(dir.path(), "msg");
        assert!(line.starts_with("git commit failed"), "{line}");
    }
}
