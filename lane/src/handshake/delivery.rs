//! Prompt delivery: how a prompt reaches the agent, and the receipt that proves it did.
//!
//! Short single-line prompts are typed. Long or multi-line ones go into `.claw/task.md` in the
//! lane, and the agent is told in one short line to read it — or, when the profile says the
//! agent takes a prompt at launch, they are passed as a launch argument instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawpool_lanes::now_ms;
use clawpool_lanes::payload::PromptAccepted;
use clawpool_pty::ScreenSnapshot;
use serde::Serialize;
use tokio::time::Instant;

use super::Settings;
use clawpool_agents::detect::region_rows;
use clawpool_agents::profiles::{Profile, Region};

/// Where the long-prompt file goes, relative to the lane.
pub const TASK_FILE: &str = ".claw/task.md";

/// The one line typed for a prompt that went into [`TASK_FILE`].
pub const TASK_FILE_LINE: &str =
    "Read the task in .claw/task.md and carry it out; it is your instructions for this session.";

/// How the prompt will reach the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptPlan {
    /// No prompt: the lane only boots the agent to ready.
    None,
    /// Typed into the input line.
    Typed {
        /// The prompt.
        prompt: String,
    },
    /// Written to the task file; a short line pointing at it is typed.
    TaskFile {
        /// The prompt (the file's content).
        prompt: String,
        /// The file.
        file: PathBuf,
    },
    /// Passed as a launch argument (the agent submits it itself once it is up).
    LaunchArg {
        /// The prompt.
        prompt: String,
    },
}

/// A prompt that must not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the prompt contains a control character ({found}) at character {position}; only newline and tab are allowed, nothing was typed"
)]
pub struct PromptError {
    /// The character, escaped.
    pub found: String,
    /// Its position (0-based, in characters).
    pub position: usize,
}

/// Rejects prompts with control characters other than newline and tab: typed into a
/// terminal they would act as keys (Escape, Ctrl-C, Enter).
pub fn check_prompt(prompt: &str) -> Result<(), PromptError> {
    match prompt
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && *c != '\n' && *c != '\t')
    {
        Some((position, c)) => Err(PromptError {
            found: c.escape_default().to_string(),
            position,
        }),
        None => Ok(()),
    }
}

/// Decides how `prompt` goes to the agent of `profile` in `lane_dir`, writing the task file
/// when one is needed. `at_launch` allows passing it as a launch argument; it must be false
/// for a lane clawpool may not drive yet (its trust gate is closed), since an agent that
/// trusts the folder itself would act on a launch prompt before anyone trusted the lane.
pub fn plan_prompt(
    prompt: Option<&str>,
    settings: &Settings,
    profile: &Profile,
    lane_dir: &Path,
    at_launch: bool,
) -> Result<PromptPlan, std::io::Error> {
    let Some(prompt) = prompt.map(str::trim).filter(|p| !p.is_empty()) else {
        return Ok(PromptPlan::None);
    };
    let long = prompt.chars().count() > settings.long_prompt_chars || prompt.contains('\n');
    if long && at_launch && !profile.manifest.launch.prompt_args.is_empty() {
        return Ok(PromptPlan::LaunchArg {
            prompt: prompt.to_owned(),
        });
    }
    plan_followup(prompt, settings, lane_dir)
}

/// Decides how a text sent to a running agent reaches it, and writes its task file when it
/// goes through one (the lane's own prompt, planned before the agent starts).
pub fn plan_followup(
    prompt: &str,
    settings: &Settings,
    lane_dir: &Path,
) -> Result<PromptPlan, std::io::Error> {
    let plan = followup_plan(prompt, settings, lane_dir);
    if let PromptPlan::TaskFile { prompt, file } = &plan {
        write_task_file(file, prompt)?;
    }
    Ok(plan)
}

/// How a text sent to a running agent reaches it: typed, or through the task file when it is
/// long (never at launch: the agent is already running). Writes nothing.
pub fn followup_plan(prompt: &str, settings: &Settings, lane_dir: &Path) -> PromptPlan {
    let prompt = prompt.trim();
    let long = prompt.chars().count() > settings.long_prompt_chars || prompt.contains('\n');
    if !long {
        return PromptPlan::Typed {
            prompt: prompt.to_owned(),
        };
    }
    PromptPlan::TaskFile {
        prompt: prompt.to_owned(),
        file: lane_dir.join(TASK_FILE),
    }
}

/// Writes a prompt into its task file (and the file's folder).
pub fn write_task_file(file: &Path, prompt: &str) -> Result<(), std::io::Error> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(file, format!("{prompt}\n"))
}

/// What was delivered, when, and how it was seen to be accepted.
#[derive(Debug, Clone, Serialize)]
pub struct Receipt {
    /// `typed`, `task_file`, `launch_arg` or `none`.
    pub method: &'static str,
    /// How many times Enter was pressed for the draft.
    pub attempts: u32,
    /// When Enter was first pressed (epoch ms).
    pub sent_at: Option<u64>,
    /// When acceptance was seen (epoch ms).
    pub accepted_at: Option<u64>,
    /// The evidence of acceptance (the echoed prompt or the working indicator).
    pub observed_prompt_preview: Option<String>,
    /// What is typed into the input line.
    #[serde(skip)]
    text: Option<String>,
    /// What the agent echoes once it took the prompt (the typed text, or the launch prompt).
    #[serde(skip)]
    echo: Option<String>,
    #[serde(skip)]
    typed: bool,
    /// Enter presses for this worker (`attempts` also counts earlier workers of the lane).
    #[serde(skip)]
    submits: u32,
    #[serde(skip)]
    retry_at: Option<Instant>,
    /// When Enter may first be pressed on our draft, once it has been seen (the profile's
    /// `input.submit_after_ms` after that).
    #[serde(skip)]
    submit_at: Option<Instant>,
    /// How many rows above the input showed the echo before the text could be taken
    /// ([`Receipt::note_echoes_before`]); `None` until counted.
    #[serde(skip)]
    echoes_before: Option<usize>,
}

impl Receipt {
    /// What `lane.prompt_accepted` records of it.
    pub fn as_payload(&self) -> PromptAccepted {
        PromptAccepted {
            method: self.method.to_owned(),
            attempts: self.attempts,
            sent_at: self.sent_at,
            accepted_at: self.accepted_at,
            observed_prompt_preview: self.observed_prompt_preview.clone(),
        }
    }

    /// A receipt for a plan, before anything was sent.
    pub fn new(plan: &PromptPlan) -> Self {
        let (method, text, echo) = match plan {
            PromptPlan::None => ("none", None, None),
            PromptPlan::Typed { prompt } => ("typed", Some(prompt.clone()), Some(prompt.clone())),
            PromptPlan::TaskFile { .. } => (
                "task_file",
                Some(TASK_FILE_LINE.to_owned()),
                Some(TASK_FILE_LINE.to_owned()),
            ),
            PromptPlan::LaunchArg { prompt } => ("launch_arg", None, Some(prompt.clone())),
        };
        Self {
            method,
            attempts: 0,
            sent_at: None,
            accepted_at: None,
            observed_prompt_preview: None,
            text,
            echo,
            typed: false,
            submits: 0,
            retry_at: None,
            submit_at: None,
            echoes_before: None,
        }
    }

    /// What an earlier supervisor recorded for this lane (times in epoch seconds): anything
    /// sent counts as typed, so the prompt is never typed a second time. With `retry_after`, a
    /// prompt sent and not accepted gets Enter again after it if its draft is still in the
    /// input line (the earlier supervisor may have died between recording the press and
    /// making it).
    pub fn resume(
        &mut self,
        attempts: u32,
        sent_at: Option<u64>,
        accepted_at: Option<u64>,
        retry_after: Option<Duration>,
    ) {
        self.attempts = attempts;
        self.submits = attempts;
        self.sent_at = sent_at.map(|s| s * 1000);
        self.accepted_at = accepted_at.map(|s| s * 1000);
        if attempts > 0 || accepted_at.is_some() {
            self.typed = true;
        }
        if attempts > 0 && accepted_at.is_none() {
            self.retry_at = retry_after.map(|after| Instant::now() + after);
        }
    }

    /// Counts on from an earlier worker's `attempts`, and types the prompt again.
    pub(super) fn continue_count(&mut self, attempts: u32) {
        self.attempts = attempts;
    }

    /// Whether `message`, a user message the agent reports it took, is the text this receipt
    /// delivered (its whitespace aside).
    pub(super) fn delivered(&self, message: &str) -> bool {
        self.echo
            .as_ref()
            .is_some_and(|echo| squash(echo) == squash(message))
    }

    /// The text still to be typed (nothing once it was typed, or for other methods).
    pub(super) fn text_to_type(&self) -> Option<String> {
        (!self.typed).then(|| self.text.clone()).flatten()
    }

    pub(super) fn typed(&mut self) {
        self.typed = true;
    }

    /// Whether the prompt was passed at launch and has not been seen accepted yet.
    pub(super) fn awaiting_launch_prompt(&self) -> bool {
        self.method == "launch_arg" && self.accepted_at.is_none()
    }

    /// Whether Enter has been pressed (by this worker's handshake, or before an adoption).
    pub fn submitted(&self) -> bool {
        self.submits > 0
    }

    /// Enter presses for the draft in this worker.
    pub(super) fn submits(&self) -> u32 {
        self.submits
    }

    pub(super) fn submitted_now(&mut self, retry_after: Duration) {
        self.attempts += 1;
        self.submits += 1;
        self.sent_at.get_or_insert_with(now_ms);
        self.retry_at = Some(Instant::now() + retry_after);
    }

    /// When Enter may be pressed again for a draft still in the input line.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry_at.filter(|_| self.accepted_at.is_none())
    }

    pub(super) fn retry_due(&self) -> bool {
        self.retry_at().is_some_and(|at| Instant::now() >= at)
    }

    pub(super) fn accept(&mut self, preview: &str) {
        self.accepted_at = Some(now_ms());
        self.observed_prompt_preview = Some(preview.chars().take(120).collect());
        self.retry_at = None;
    }

    /// Whether the input line's draft is exactly our text: nothing before or after it (its
    /// tail must be there, and what shows must be the end of ours: an input box that shows
    /// only the end of a long draft still shows how it ends).
    pub(super) fn matches_draft(&self, draft: &str) -> bool {
        let Some(text) = &self.text else {
            return false;
        };
        let ours = squash(text);
        let seen = squash(draft);
        let tail: String = {
            let chars: Vec<char> = ours.chars().collect();
            chars[chars.len().saturating_sub(24)..].iter().collect()
        };
        !seen.is_empty() && seen.ends_with(&tail) && ours.ends_with(&seen)
    }

    /// Whether the draft is the start of our text: typing is still arriving.
    pub(super) fn draft_arriving(&self, draft: &str) -> bool {
        self.text
            .as_ref()
            .is_some_and(|text| squash(text).starts_with(&squash(draft)))
    }

    /// The line was emptied of a draft that was not (only) ours: type the text again.
    pub(super) fn retype(&mut self) {
        self.typed = false;
        self.submit_at = None;
    }

    /// Whether Enter must still wait for our draft, which is on screen now, to have shown for
    /// `settle` (the first call starts that wait).
    pub(super) fn draft_settling(&mut self, settle: Duration) -> bool {
        let at = *self
            .submit_at
            .get_or_insert_with(|| Instant::now() + settle);
        Instant::now() < at
    }

    /// Notes how many rows above the input showed this text's echo before the agent could
    /// have taken it (when Enter is pressed on it; a launch prompt's, at the run's first
    /// look), so that an echo of an earlier turn with the same text is not taken for it.
    pub(super) fn note_echoes_before(&mut self, rows: usize) {
        self.echoes_before = Some(rows);
    }

    /// Whether the rows showing this text's echo before it could be taken were counted.
    pub(super) fn echoes_counted(&self) -> bool {
        self.echoes_before.is_some()
    }

    /// When a settling draft may be submitted (none once Enter was pressed).
    pub(super) fn submit_at(&self) -> Option<Instant> {
        self.submit_at.filter(|_| self.submits == 0)
    }
}

/// Text without any whitespace, so wrapping and indentation do not matter when comparing.
fn squash(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The prompt as echoed above the input box, if it is there.
pub(super) fn echoed(
    snap: &ScreenSnapshot,
    profile: &Profile,
    receipt: &Receipt,
) -> Option<String> {
    let text = receipt.echo.as_ref()?;
    // Agents echo a prompt one line per row (and wrap long rows), so look for the start of its
    // first line within one row.
    let first_line = text.lines().find(|l| !l.trim().is_empty())?;
    let head: String = squash(first_line).chars().take(32).collect();
    region_rows(snap, &profile.input, Region::AboveInput(usize::MAX))
        .into_iter()
        .find(|row| squash(row).contains(&head))
        .map(|row| row.trim().to_owned())
}

/// How many rows above the input show the start of the prompt's first line (0 for a receipt
/// with nothing to echo).
pub(super) fn echo_rows(snap: &ScreenSnapshot, profile: &Profile, receipt: &Receipt) -> usize {
    let Some(head) = echo_head(receipt) else {
        return 0;
    };
    region_rows(snap, &profile.input, Region::AboveInput(usize::MAX))
        .into_iter()
        .filter(|row| squash(row).contains(&head))
        .count()
}

/// The prompt's echo drawn since it could be taken: more rows show it than before
/// ([`Receipt::note_echoes_before`]), the newest of them returned. `None` when they were
/// never counted, or no new one shows (an echo of an earlier turn with the same text is not
/// this one).
pub(super) fn echoed_anew(
    snap: &ScreenSnapshot,
    profile: &Profile,
    receipt: &Receipt,
) -> Option<String> {
    let before = receipt.echoes_before?;
    let head = echo_head(receipt)?;
    let rows: Vec<String> = region_rows(snap, &profile.input, Region::AboveInput(usize::MAX))
        .into_iter()
        .filter(|row| squash(row).contains(&head))
        .collect();
    (rows.len() > before)
        .then(|| rows.last().map(|row| row.trim().to_owned()))
        .flatten()
}

/// What an echo of the prompt starts with, squashed: its first line's first 32 characters.
fn echo_head(receipt: &Receipt) -> Option<String> {
    let text = receipt.echo.as_ref()?;
    let first_line = text.lines().find(|l| !l.trim().is_empty())?;
    Some(squash(first_line).chars().take(32).collect())
}

/// Whether the agent has drawn anything under the prompt's echo: the rows above the input
/// after the echo's own rows (the prompt, wrapped) hold text. An echo no longer on screen
/// has been pushed off by what came after it.
pub(super) fn replied(snap: &ScreenSnapshot, profile: &Profile, receipt: &Receipt) -> bool {
    let Some(text) = receipt.echo.as_ref() else {
        return true;
    };
    let prompt = squash(text);
    let Some(first_line) = text.lines().find(|l| !l.trim().is_empty()) else {
        return true;
    };
    let head: String = squash(first_line).chars().take(32).collect();
    let rows = region_rows(snap, &profile.input, Region::AboveInput(usize::MAX));
    let Some(echo_at) = rows.iter().rposition(|row| squash(row).contains(&head)) else {
        return true;
    };
    rows[echo_at + 1..]
        .iter()
        .map(|row| squash(row))
        .skip_while(|row| !row.is_empty() && prompt.contains(row.as_str()))
        .any(|row| !row.is_empty())
}

/// `shell`, or `wrong_target` when the shell prompt shows a folder other than the lane's.
pub(super) fn misdelivery_target(evidence: &str, lane_dir: &Path) -> &'static str {
    let shown = evidence
        .split(|c: char| c.is_whitespace() || c == ':' || c == '$' || c == '#')
        .find(|word| word.starts_with('/') || word.starts_with('~'));
    match shown {
        Some(dir)
            if !lane_dir.ends_with(dir.trim_start_matches('~').trim_start_matches('/'))
                && Path::new(dir) != lane_dir =>
        {
            "wrong_target"
        }
        _ => "shell",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_other_than_newline_and_tab_are_refused() {
        assert!(check_prompt("fix it\n\tplease").is_ok());
        let err = check_prompt("fix\u{1b}[2J it").expect_err("escape refused");
        assert_eq!(err.position, 3);
        assert!(err.to_string().contains("\\u{1b}"), "{err}");
        assert!(check_prompt("a\rb").is_err());
    }

    #[test]
    fn a_draft_matches_only_when_all_of_it_has_arrived() {
        let receipt = Receipt::new(&PromptPlan::Typed {
            prompt: "create a file named hello.txt containing hi".into(),
        });
        assert!(receipt.matches_draft("create a file named hello.txt containing hi"));
        assert!(receipt.matches_draft("create a file named\n  hello.txt containing hi"));
        assert!(!receipt.matches_draft("create a file named hel"));
        assert!(!receipt.matches_draft("something else"));
        // Text glued before or after ours is not our draft.
        assert!(
            !receipt.matches_draft("Add a div functioncreate a file named hello.txt containing hi")
        );
        assert!(
            !receipt.matches_draft("create a file named hello.txt containing hiAdd a div function")
        );
        assert!(receipt.draft_arriving("create a file named hel"));
        assert!(!receipt.draft_arriving("Add a div functioncreate"));
    }

    #[test]
    fn a_shell_prompt_in_another_folder_is_the_wrong_target() {
        let lane = Path::new("/srv/lanes/a");
        assert_eq!(
            misdelivery_target("bash: fix: command not found", lane),
            "shell"
        );
        assert_eq!(misdelivery_target("user@host:/srv/lanes/a$", lane), "shell");
        assert_eq!(
            misdelivery_target("user@host:/home/user$", lane),
            "wrong_target"
        );
    }
}
