//! The scenario: the TOML file that scripts what the agent does — which boot dialogs it
//! shows, how it treats Enter and the launch prompt, and the steps it runs for each prompt.
//!
//! Unknown keys are errors (every table denies unknown fields) so that a typo in a test's
//! scenario fails loudly instead of silently running the default behaviour.

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Everything a scenario file can set. Missing fields take the defaults of
/// [`Scenario::default`], which is also the behaviour without any scenario file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// Ask "Do you trust the files in this folder?" before anything else.
    pub trust_dialog: bool,
    /// A file of trusted folders, one per line (relative to the working folder): a folder
    /// listed there is not asked about, and answering the trust dialog yes adds it.
    pub trust_store: Option<PathBuf>,
    /// Answering the trust dialog yes only saves the trust: this process goes on untrusted,
    /// showing `Trust saved; restart to apply it` and taking no input until it is started
    /// again (gemini-cli 0.61.0 when it loses the relaunch that applies its trust).
    pub trust_needs_restart: bool,
    /// Ask "Use the custom API key from your environment?" after the trust dialog.
    pub boot_dialog: bool,
    /// Swallow the first Enter pressed on a non-empty draft (the draft stays), like an
    /// agent that was not ready for it yet.
    pub ignore_first_enter: bool,
    /// How long to wait, after the dialogs, before the ready screen appears.
    pub startup_delay_ms: u64,
    /// Exit 0 (printing `Goodbye`) once this many prompts have ended.
    pub exit_after_prompts: Option<NonZeroU64>,
    /// Where to log prompts and dialog answers, relative to the working folder. Defaults to
    /// the `CLAWPOOL_AGENT_PROMPT_LOG` environment variable; with neither, nothing is logged.
    pub prompt_log: Option<PathBuf>,
    /// Whether a prompt given on the command line (`--prompt TEXT` or a trailing
    /// argument) is honoured. When false it is silently ignored, like an agent that does
    /// not support launch prompts.
    pub launch_prompt_arg: bool,
    /// After an interrupt (Esc or Ctrl-C while working), put the interrupted prompt back into
    /// the input line this many milliseconds later, as Claude Code does — or, if a key
    /// arrives first, just before that key is handled: the agent finishes the interrupt
    /// before it reads more input, so text typed meanwhile lands after the prompt put back.
    /// Unset: an interrupted prompt is gone.
    pub restore_prompt_on_interrupt_ms: Option<u64>,
    /// The scripts for the prompts received, in order; the last one repeats. Empty means
    /// every prompt runs [`default_steps`].
    #[serde(rename = "prompt")]
    pub prompts: Vec<PromptScript>,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            trust_dialog: false,
            trust_store: None,
            trust_needs_restart: false,
            boot_dialog: false,
            ignore_first_enter: false,
            startup_delay_ms: 0,
            exit_after_prompts: None,
            prompt_log: None,
            launch_prompt_arg: true,
            restore_prompt_on_interrupt_ms: None,
            prompts: Vec::new(),
        }
    }
}

/// One `[[prompt]]` table: what to do for one prompt.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptScript {
    /// The steps, run in order.
    pub steps: Vec<Step>,
}

/// One step of a prompt's script, written as an inline table whose `do` key names it.
///
/// Steps without parameters are empty struct variants, not unit variants: serde ignores
/// extra keys next to the tag of a unit variant, and a misspelt parameter must fail.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Append text to the transcript (one transcript line per line of text).
    Say {
        /// The text.
        text: String,
    },
    /// Write text to the terminal as it is, escape sequences included (a tool's output printed
    /// raw, with whatever terminal queries it holds); the transcript gets `Printed N raw bytes`.
    Raw {
        /// The text.
        text: String,
    },
    /// Create or overwrite a file, creating its parent folders.
    WriteFile {
        /// The file, relative to the working folder or absolute.
        path: PathBuf,
        /// The whole new content.
        content: String,
    },
    /// Append to a file, creating it and its parent folders if needed.
    AppendFile {
        /// The file, relative to the working folder or absolute.
        path: PathBuf,
        /// The text appended.
        content: String,
    },
    /// `git add -A && git commit -m MESSAGE` in the working folder.
    GitCommit {
        /// The commit message.
        message: String,
    },
    /// Run a shell command (`sh -c`) in the working folder, as a child of the agent, the way
    /// a real agent's Bash tool does: its output goes to the transcript. The agent waits for
    /// it (keep it short, or send it to the background).
    Run {
        /// The command line.
        command: String,
    },
    /// Run the command hooks the `--settings` file declares for `event` (as Claude Code runs
    /// them: `sh -c COMMAND` in the working folder, `payload` on stdin, waited for); the
    /// transcript gets `Hook EVENT: N command(s)`.
    Hook {
        /// The hook event (`PreToolUse`, `Stop`, …).
        event: String,
        /// The hook's JSON input, as written.
        payload: String,
    },
    /// Keep working (spinner running) for a while.
    Sleep {
        /// How long, in milliseconds.
        ms: u64,
    },
    /// Work forever: the spinner's timer keeps counting, nothing else happens.
    Hang {},
    /// Work forever with a frozen timer: the spinner glyph rotates but the seconds shown
    /// never change.
    SpinnerForever {},
    /// Restore the terminal and exit at once, without a goodbye.
    Crash {
        /// The exit code (default 1).
        #[serde(default = "crash_code")]
        code: u8,
    },
    /// Print `Goodbye` and exit.
    Exit {
        /// The exit code (default 0).
        #[serde(default)]
        code: u8,
    },
    /// Turn into a shell that just received the prompt as commands.
    ShellError {},
    /// Ask "Do you want to proceed?"; No ends the step list.
    Permission {
        /// The tool asking, shown above the question, e.g. `Write(file)`.
        tool: String,
        /// A shell command shown between dashed rules under `Bash command`, as Claude Code
        /// shows the command it asks to run.
        #[serde(default)]
        command: Option<String>,
        /// A file shown under `Create file`, as Claude Code shows a file it asks to write.
        #[serde(default)]
        file: Option<String>,
    },
    /// Show a notice no detection rule knows in place of the spinner and the input box, with
    /// `Enter to continue · Esc to cancel` under it, for `ms`; keys pressed meanwhile are
    /// counted and otherwise ignored (the prompt log gets `{"event":"notice","keys":N}` when it
    /// goes away).
    Notice {
        /// The notice (line breaks allowed).
        text: String,
        /// How long it shows, in milliseconds.
        ms: u64,
    },
    /// Append numbered lines `line 1` … `line N` to the transcript, a screenful per frame.
    Output {
        /// How many lines.
        lines: u64,
    },
    /// The provider is unreachable: the line above the input shows a retry countdown
    /// (`⎿ API Error (Connection refused) · retrying in 2s · attempt 1/10`) instead of the
    /// spinner, one attempt every `every_ms`; after `attempts` attempts it is back.
    ProviderDown {
        /// Failed attempts before it is back (default 3).
        #[serde(default = "provider_attempts")]
        attempts: u32,
        /// Time between attempts, in milliseconds (default 1000).
        #[serde(default = "provider_every_ms")]
        every_ms: u64,
    },
}

fn crash_code() -> u8 {
    1
}

fn provider_attempts() -> u32 {
    3
}

fn provider_every_ms() -> u64 {
    1000
}

/// The steps of the default scenario: say `ok`, work for 300 ms.
pub fn default_steps() -> Vec<Step> {
    vec![
        Step::Say {
            text: "ok".to_owned(),
        },
        Step::Sleep { ms: 300 },
    ]
}

impl Scenario {
    /// Parses a scenario from TOML text.
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Reads and parses a scenario file; the error names the file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("bad scenario {}: {e}", path.display()))
    }

    /// The steps for the prompt with this 0-based index among those received.
    pub fn steps_for(&self, index: usize) -> Vec<Step> {
        match self.prompts.get(index).or(self.prompts.last()) {
            Some(script) => script.steps.clone(),
            None => default_steps(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_default_scenario() {
        let scenario = Scenario::parse("").expect("empty TOML is valid");
        assert_eq!(scenario, Scenario::default());
        assert!(scenario.launch_prompt_arg);
        assert_eq!(scenario.steps_for(0), default_steps());
    }

    #[test]
    fn parses_every_field_and_step() {
        let scenario = Scenario::parse(
            r#"
            trust_dialog = true
            boot_dialog = true
            ignore_first_enter = true
            startup_delay_ms = 250
            exit_after_prompts = 2
            prompt_log = "log/prompts.jsonl"
            launch_prompt_arg = false
            restore_prompt_on_interrupt_ms = 300

            [[prompt]]
            steps = [
              { do = "say", text = "hello" },
              { do = "write_file", path = "a/b.txt", content = "x" },
              { do = "append_file", path = "a/b.txt", content = "y" },
              { do = "git_commit", message = "m" },
              { do = "sleep", ms = 5 },
              { do = "permission", tool = "Write(file)" },
              { do = "output", lines = 3 },
              { do = "hang" },
              { do = "spinner_forever" },
              { do = "shell_error" },
              { do = "crash", code = 9 },
              { do = "crash" },
              { do = "exit", code = 3 },
              { do = "exit" },
            ]

            [[prompt]]
            steps = []
            "#,
        )
        .expect("the scenario is valid");
        assert!(scenario.trust_dialog && scenario.boot_dialog && scenario.ignore_first_enter);
        assert!(!scenario.launch_prompt_arg);
        assert_eq!(scenario.startup_delay_ms, 250);
        assert_eq!(scenario.restore_prompt_on_interrupt_ms, Some(300));
        assert_eq!(scenario.exit_after_prompts.map(NonZeroU64::get), Some(2));
        assert_eq!(
            scenario.prompt_log.as_deref(),
            Some(Path::new("log/prompts.jsonl"))
        );
        let steps = scenario.steps_for(0);
        assert_eq!(steps.len(), 14);
        assert_eq!(
            steps[1],
            Step::WriteFile {
                path: "a/b.txt".into(),
                content: "x".into()
            }
        );
        assert_eq!(steps[10], Step::Crash { code: 9 });
        assert_eq!(steps[11], Step::Crash { code: 1 });
        assert_eq!(steps[13], Step::Exit { code: 0 });
        // The last script repeats for every later prompt.
        assert!(scenario.steps_for(1).is_empty());
        assert!(scenario.steps_for(7).is_empty());
    }

    #[test]
    fn unknown_top_level_key_is_named() {
        let err = Scenario::parse("trust_dialgo = true").expect_err("typo must be rejected");
        assert!(err.contains("trust_dialgo"), "{err}");
    }

    #[test]
    fn unknown_key_in_a_step_is_named() {
        let err = Scenario::parse(
            r#"[[prompt]]
            steps = [{ do = "say", text = "x", colour = "red" }]"#,
        )
        .expect_err("unknown step key must be rejected");
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn unknown_key_in_a_unit_step_is_named() {
        let err = Scenario::parse(r#"prompt = [{ steps = [{ do = "hang", ms = 1 }] }]"#)
            .expect_err("unknown step key must be rejected");
        assert!(err.contains("ms"), "{err}");
    }

    #[test]
    fn unknown_step_kind_is_named() {
        let err = Scenario::parse(r#"prompt = [{ steps = [{ do = "dance" }] }]"#)
            .expect_err("unknown step must be rejected");
        assert!(err.contains("dance"), "{err}");
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(Scenario::parse("exit_after_prompts = 0").is_err());
        assert!(
            Scenario::parse(r#"prompt = [{ steps = [{ do = "exit", code = 300 }] }]"#).is_err()
        );
        assert!(Scenario::parse(r#"prompt = [{ steps = [{ do = "say" }] }]"#).is_err());
        assert!(Scenario::parse("[[prompt]]").is_err(), "steps is required");
    }
}
