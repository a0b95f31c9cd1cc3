//! The agent's state machine: boot dialogs, startup delay, idle with a draft, working on a
//! prompt. It takes keys and the current time and says what the screen shows and when it
//! must be woken; it never touches the terminal or sleeps, so tests can drive it with a
//! made-up clock.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::input::Key;
use crate::prompt_log::PromptLog;
use crate::scenario::Scenario;
use crate::steps::{Effect, Run};
use crate::term::TermSize;
use crate::ui::{self, Bottom, Dialog, Screen, Transcript};

/// The trust dialog's question.
pub const TRUST_QUESTION: &str = "Do you trust the files in this folder?";
const TRUST_OPTIONS: [&str; 2] = ["No, exit", "Yes, I trust this folder"];
const TRUST_HINT: &str = "Enter to confirm · Esc to exit";
/// The boot dialog's question.
pub const BOOT_QUESTION: &str = "Use the custom API key from your environment?";
const BOOT_OPTIONS: [&str; 2] = ["No (recommended)", "Yes"];
const BOOT_HINT: &str = "Enter to confirm · Esc to cancel";
/// What an agent that saved its trust without applying it shows (`trust_needs_restart`).
pub const TRUST_NOT_APPLIED: &str = "Trust saved; restart to apply it";

/// Lines an `output` step writes per frame: about a screenful, so every line is drawn
/// once without a frame per line.
const OUTPUT_CHUNK: u64 = 50;

/// What the event loop must do after the app handled something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Carry on.
    Continue,
    /// Restore the terminal and exit.
    Exit {
        /// The exit code.
        code: i32,
        /// Draw the last frame and print `Goodbye` first (a normal exit, not a crash).
        goodbye: bool,
    },
    /// Restore the terminal, print shell errors for this prompt, and become a shell.
    ShellError {
        /// The prompt the "shell" received.
        prompt: String,
    },
}

/// Where the agent is in its life.
#[derive(Debug)]
enum Mode {
    /// The trust dialog, with the highlighted entry (0 = No).
    Trust(usize),
    /// The API key dialog, with the highlighted entry (0 = No).
    Boot(usize),
    /// Trust saved, not applied: nothing happens until the agent is started again.
    TrustNotApplied,
    /// Dialogs done, the ready screen comes at this instant.
    Starting(Instant),
    /// Ready, waiting for a prompt.
    Idle,
    /// Working on a prompt.
    Working(Run),
}

/// The whole agent, minus the terminal.
#[derive(Debug)]
pub struct App {
    scenario: Scenario,
    cwd: PathBuf,
    cwd_shown: String,
    log: PromptLog,
    /// A bare line feed submits (stdin is not a terminal, so lines end with `\n`) rather
    /// than starting a new line in the draft (Ctrl-J in a terminal).
    line_feed_submits: bool,
    mode: Mode,
    draft: String,
    transcript: Transcript,
    launch_prompt: Option<String>,
    prompts_received: usize,
    prompts_ended: u64,
    first_enter_swallowed: bool,
    stdin_closed: bool,
    /// An interrupted prompt waiting to go back into the input line, and when it goes
    /// (`restore_prompt_on_interrupt_ms`; sooner if a key comes first).
    restore: Option<(String, Instant)>,
    /// What `raw` steps wrote, for the terminal as it is, before the next frame.
    raw: Vec<u8>,
}

impl App {
    /// The agent as it starts at `now`, in `cwd` (where relative paths resolve).
    pub fn new(
        scenario: Scenario,
        cwd: PathBuf,
        log: PromptLog,
        launch_prompt: Option<String>,
        line_feed_submits: bool,
        now: Instant,
    ) -> Self {
        let launch_prompt = launch_prompt.filter(|_| scenario.launch_prompt_arg);
        let mut app = Self {
            cwd_shown: cwd.display().to_string(),
            cwd,
            log,
            line_feed_submits,
            mode: Mode::Idle,
            draft: String::new(),
            transcript: Transcript::default(),
            launch_prompt,
            prompts_received: 0,
            prompts_ended: 0,
            first_enter_swallowed: false,
            stdin_closed: false,
            restore: None,
            raw: Vec::new(),
            scenario,
        };
        app.mode = if app.scenario.trust_dialog && !app.trusted_in_store() {
            Mode::Trust(0)
        } else {
            app.after_trust(now)
        };
        app
    }

    /// Continues an earlier session that had received `prompts` prompts: the next prompt
    /// runs the scenario's steps for the one after them, and the transcript says so.
    pub fn resumed(mut self, prompts: usize) -> Self {
        if prompts > 0 {
            self.prompts_received = prompts;
            self.transcript.push(&format!(
                "Resumed the earlier session ({prompts} prompt(s))"
            ));
        }
        self
    }

    /// The scenario's trust store, resolved against the working folder.
    fn trust_store(&self) -> Option<PathBuf> {
        self.scenario
            .trust_store
            .as_ref()
            .map(|store| self.cwd.join(store))
    }

    /// Whether the trust store lists the working folder.
    fn trusted_in_store(&self) -> bool {
        self.trust_store()
            .and_then(|store| std::fs::read_to_string(store).ok())
            .is_some_and(|text| text.lines().any(|line| line == self.cwd_shown))
    }

    fn after_trust(&self, now: Instant) -> Mode {
        if self.scenario.boot_dialog {
            Mode::Boot(0)
        } else {
            Mode::Starting(now + Duration::from_millis(self.scenario.startup_delay_ms))
        }
    }

    /// Stdin reached its end: from now on, wherever the agent would wait for a key it exits
    /// instead (0 when idle, 1 in a dialog or permission prompt).
    pub fn stdin_closed(&mut self) {
        self.stdin_closed = true;
    }

    /// Moves time forward to `now`: the startup delay, the launch prompt, the steps.
    pub fn advance(&mut self, now: Instant) -> Control {
        if self.restore.as_ref().is_some_and(|(_, at)| now >= *at) {
            self.restore_interrupted_prompt();
        }
        if let Mode::Starting(ready_at) = self.mode {
            if now < ready_at {
                return Control::Continue;
            }
            self.mode = Mode::Idle;
            if let Some(prompt) = self.launch_prompt.take() {
                self.submit(prompt, now);
            }
        }
        if let Mode::Working(run) = &mut self.mode {
            let effect = run.advance(now, &self.cwd, &mut self.transcript, OUTPUT_CHUNK);
            self.raw.extend(run.take_raw());
            if let Some((text, keys)) = run.take_notice_gone() {
                let logged = self.log.notice(&text, keys);
                self.log_event(logged);
            }
            let Mode::Working(run) = &mut self.mode else {
                return Control::Continue;
            };
            match effect {
                Effect::Blocked => {}
                Effect::Finished => {
                    let secs = run.elapsed_secs(now);
                    self.transcript.push(&format!("✻ Done in {secs}s"));
                    let control = self.end_run();
                    if control != Control::Continue {
                        return control;
                    }
                }
                Effect::Exit(code) => {
                    // The goodbye frame shows the agent at rest, not mid-spin.
                    self.mode = Mode::Idle;
                    return Control::Exit {
                        code: i32::from(code),
                        goodbye: true,
                    };
                }
                Effect::Crash(code) => {
                    return Control::Exit {
                        code: i32::from(code),
                        goodbye: false,
                    };
                }
                Effect::ShellError => {
                    return Control::ShellError {
                        prompt: run.prompt.clone(),
                    };
                }
            }
        }
        if self.stdin_closed {
            let code = match &self.mode {
                Mode::Idle => 0,
                Mode::Trust(_) | Mode::Boot(_) | Mode::TrustNotApplied => 1,
                Mode::Working(run) if run.permission().is_some() => 1,
                Mode::Starting(_) | Mode::Working(_) => return Control::Continue,
            };
            return Control::Exit {
                code,
                goodbye: false,
            };
        }
        Control::Continue
    }

    /// Bytes `raw` steps wrote since the last call, to go to the terminal unchanged.
    pub fn take_raw(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.raw)
    }

    /// When [`advance`](Self::advance) must run next even if no key comes.
    pub fn deadline(&self, now: Instant) -> Option<Instant> {
        let mode = match &self.mode {
            Mode::Starting(ready_at) => Some(*ready_at),
            Mode::Working(run) => run.deadline(now),
            Mode::Trust(_) | Mode::Boot(_) | Mode::TrustNotApplied | Mode::Idle => None,
        };
        let restore = self.restore.as_ref().map(|(_, at)| *at);
        mode.into_iter().chain(restore).min()
    }

    /// Handles one key at `now`.
    pub fn key(&mut self, key: Key, now: Instant) -> Control {
        // The interrupt is finished before the next key is read: a prompt still to be put
        // back goes in first, and the key lands after it.
        self.restore_interrupted_prompt();
        let exit = |code| Control::Exit {
            code,
            goodbye: false,
        };
        match &mut self.mode {
            // Both boot dialogs list No first, Yes second; Esc means No.
            Mode::Trust(selected) => match menu_key(&key, selected) {
                Some(MenuKey::Picked(entry)) => self.answer_trust(entry == 1, now),
                Some(MenuKey::Cancel) => self.answer_trust(false, now),
                Some(MenuKey::Quit) => exit(130),
                None => Control::Continue,
            },
            Mode::Boot(selected) => match menu_key(&key, selected) {
                Some(MenuKey::Picked(entry)) => self.answer_boot(entry == 1, now),
                Some(MenuKey::Cancel) => self.answer_boot(false, now),
                Some(MenuKey::Quit) => exit(130),
                None => Control::Continue,
            },
            // Keys typed before the ready screen are lost, as with an agent whose input box
            // does not exist yet: whoever types must wait for the ready screen.
            Mode::Starting(_) | Mode::TrustNotApplied if key == Key::CtrlC => exit(130),
            Mode::Starting(_) | Mode::TrustNotApplied => Control::Continue,
            Mode::Idle => match key {
                Key::CtrlC => exit(130),
                Key::Enter => self.enter(now),
                Key::LineFeed if self.line_feed_submits => self.enter(now),
                other => {
                    self.edit(other);
                    Control::Continue
                }
            },
            Mode::Working(run) => {
                // A notice takes no keys: they are only counted.
                if run.notice_key() {
                    return Control::Continue;
                }
                if matches!(key, Key::Esc | Key::CtrlC) {
                    if let Some(ms) = self.scenario.restore_prompt_on_interrupt_ms {
                        self.restore = Some((run.prompt.clone(), now + Duration::from_millis(ms)));
                    }
                    self.transcript.push("Interrupted");
                    return self.end_run();
                }
                if let Some((_, mut selected)) = run.permission() {
                    // The permission menu lists Yes first.
                    match menu_key(&key, &mut selected) {
                        Some(MenuKey::Picked(entry)) => {
                            run.answer(entry == 0, &mut self.transcript)
                        }
                        _ => run.select(selected),
                    }
                    return Control::Continue;
                }
                // Typing ahead edits the draft, but Enter does not queue it: a prompt sent
                // while the agent works stays visibly undelivered in the input box.
                match key {
                    Key::Enter => {}
                    Key::LineFeed if self.line_feed_submits => {}
                    other => self.edit(other),
                }
                Control::Continue
            }
        }
    }

    fn answer_trust(&mut self, yes: bool, now: Instant) -> Control {
        self.log_event(self.log.choice("trust", yes));
        if !yes {
            return Control::Exit {
                code: 1,
                goodbye: false,
            };
        }
        if let Some(store) = self.trust_store() {
            let saved = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&store)
                .and_then(|mut file| {
                    std::io::Write::write_all(&mut file, format!("{}\n", self.cwd_shown).as_bytes())
                });
            if let Err(e) = saved {
                self.transcript
                    .push(&format!("trust store {}: {e}", store.display()));
            }
        }
        self.mode = if self.scenario.trust_needs_restart {
            Mode::TrustNotApplied
        } else {
            self.after_trust(now)
        };
        Control::Continue
    }

    fn answer_boot(&mut self, yes: bool, now: Instant) -> Control {
        self.log_event(self.log.choice("boot_dialog", yes));
        self.mode = Mode::Starting(now + Duration::from_millis(self.scenario.startup_delay_ms));
        Control::Continue
    }

    fn edit(&mut self, key: Key) {
        match key {
            Key::Char(c) => self.draft.push(c),
            Key::Paste(text) => self.draft.push_str(&text),
            Key::LineFeed => self.draft.push('\n'),
            Key::Backspace => {
                self.draft.pop();
            }
            Key::CtrlU => self.draft.clear(),
            _ => {}
        }
    }

    /// Puts an interrupted prompt waiting to go back into the input line, at the cursor (the
    /// end of the draft), as Claude Code does after Esc.
    fn restore_interrupted_prompt(&mut self) {
        if let Some((prompt, _)) = self.restore.take() {
            self.draft.push_str(&prompt);
        }
    }

    fn enter(&mut self, now: Instant) -> Control {
        if self.draft.trim().is_empty() {
            return Control::Continue;
        }
        if self.scenario.ignore_first_enter && !self.first_enter_swallowed {
            self.first_enter_swallowed = true;
            return Control::Continue;
        }
        let prompt = std::mem::take(&mut self.draft);
        self.submit(prompt, now);
        // Instant steps (say, write_file…) show in the same frame as the echo.
        self.advance(now)
    }

    fn submit(&mut self, prompt: String, now: Instant) {
        let prompt = prompt.trim().to_owned();
        self.log_event(self.log.prompt(&prompt));
        if !self.transcript.is_empty() {
            self.transcript.push("");
        }
        self.transcript
            .push(&ui::wrap(&prompt, ui::PROMPT_MARK, "  ", usize::MAX).join("\n"));
        let steps = self.scenario.steps_for(self.prompts_received);
        self.prompts_received += 1;
        self.mode = Mode::Working(Run::new(prompt, steps, now));
    }

    /// Back to idle after a prompt ended (done, denied or interrupted); maybe exit.
    fn end_run(&mut self) -> Control {
        self.mode = Mode::Idle;
        self.prompts_ended += 1;
        match self.scenario.exit_after_prompts {
            Some(n) if self.prompts_ended >= n.get() => Control::Exit {
                code: 0,
                goodbye: true,
            },
            _ => Control::Continue,
        }
    }

    /// A failed log write shows in the transcript: a test counting deliveries would
    /// otherwise be left guessing.
    fn log_event(&mut self, result: std::io::Result<()>) {
        if let Err(e) = result {
            self.transcript.push(&format!("prompt log error: {e}"));
        }
    }

    /// The screen at `now` for a terminal of `size`.
    pub fn screen(&self, now: Instant, size: TermSize) -> Screen {
        let cwd = &self.cwd_shown;
        match &self.mode {
            Mode::Trust(selected) => ui::dialog_screen(
                size,
                cwd,
                &Dialog {
                    question: TRUST_QUESTION,
                    detail: Some(cwd),
                    options: &TRUST_OPTIONS,
                    selected: *selected,
                    hint: TRUST_HINT,
                },
            ),
            Mode::Boot(selected) => ui::dialog_screen(
                size,
                cwd,
                &Dialog {
                    question: BOOT_QUESTION,
                    detail: None,
                    options: &BOOT_OPTIONS,
                    selected: *selected,
                    hint: BOOT_HINT,
                },
            ),
            Mode::Starting(_) => ui::main_screen(size, cwd, &self.transcript, Bottom::Nothing),
            Mode::TrustNotApplied => ui::main_screen(
                size,
                cwd,
                &self.transcript,
                Bottom::Notice {
                    text: TRUST_NOT_APPLIED,
                },
            ),
            Mode::Idle => ui::main_screen(
                size,
                cwd,
                &self.transcript,
                Bottom::Input {
                    draft: &self.draft,
                    spinner: None,
                },
            ),
            Mode::Working(run) if run.notice().is_some() => ui::main_screen(
                size,
                cwd,
                &self.transcript,
                Bottom::Notice {
                    text: run.notice().unwrap_or_default(),
                },
            ),
            Mode::Working(run) => match run.permission() {
                Some((tool, selected)) => ui::main_screen(
                    size,
                    cwd,
                    &self.transcript,
                    Bottom::Permission {
                        tool,
                        selected,
                        detail: run.permission_detail(),
                    },
                ),
                None => {
                    let spinner = run.spinner(now);
                    ui::main_screen(
                        size,
                        cwd,
                        &self.transcript,
                        Bottom::Input {
                            draft: &self.draft,
                            spinner: Some(&spinner),
                        },
                    )
                }
            },
        }
    }

    /// The spinner's tick count while it shows, so the loop can redraw it on every tick.
    pub fn spinner_tick(&self, now: Instant) -> Option<u32> {
        match &self.mode {
            Mode::Working(run) if run.permission().is_none() && run.notice().is_none() => {
                Some(run.ticks(now))
            }
            _ => None,
        }
    }

    /// The transcript, for tests.
    #[cfg(test)]
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }
}

/// What a key does in a two-entry menu.
enum MenuKey {
    /// An entry was chosen (0-based): by its digit, or Enter on the highlighted one.
    Picked(usize),
    /// Esc.
    Cancel,
    /// Ctrl-C.
    Quit,
}

/// Applies a key to a two-entry menu: arrows move the highlight, the rest may decide.
fn menu_key(key: &Key, selected: &mut usize) -> Option<MenuKey> {
    match key {
        Key::Up => *selected = 0,
        Key::Down => *selected = 1,
        Key::Char('1') => return Some(MenuKey::Picked(0)),
        Key::Char('2') => return Some(MenuKey::Picked(1)),
        Key::Enter => return Some(MenuKey::Picked(*selected)),
        Key::Esc => return Some(MenuKey::Cancel),
        Key::CtrlC => return Some(MenuKey::Quit),
        _ => {}
    }
    None
}
