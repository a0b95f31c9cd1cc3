//! What counts as meaningful progress, and when a working lane is stalled.
//!
//! This module owns the stall rule's evidence. An agent that works redraws its screen all the
//! time — spinner frames, an elapsed-time counter, a token counter, a clock — without doing
//! anything; none of that is progress. [`ProgressTracker`] is fed every screen snapshot (its
//! rows, as text) and reports progress only when a line appears, after [normalisation](normalize_line),
//! that it has not seen before. Other signals the supervisor observes — files changing in the
//! worktree, new commits, lane events — are progress too ([`ProgressTracker::note`]). A lane
//! in `running` with no progress for [`DEFAULT_STALL_AFTER`] (configurable) is stalled.
//!
//! Times are Unix epoch seconds, passed in by the caller, so tests control the clock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How long a `running` lane may go without meaningful progress before it is stalled.
pub const DEFAULT_STALL_AFTER: Duration = Duration::from_secs(10 * 60);

/// How many distinct normalised lines a tracker remembers by default.
pub const DEFAULT_MEMORY: usize = 4096;

/// What showed the progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressSource {
    /// A new line on the agent's screen.
    Screen,
    /// A file changed in the lane's worktree.
    WorktreeChange,
    /// The lane's branch gained a commit.
    Commit,
    /// A lane event (the agent was accepted, went back to work, answered a dialog, …).
    AgentEvent,
}

/// Remembers which lines a worker's screen has shown and when the lane last made meaningful
/// progress.
///
/// "Seen" means seen at any time since the tracker was made (up to [`DEFAULT_MEMORY`] distinct
/// lines, oldest forgotten first), not only on the previous snapshot: a line that flickers in
/// and out — a footer hint, a spinner row that comes and goes — is progress once, not every
/// time it comes back.
#[derive(Debug, Clone)]
pub struct ProgressTracker {
    seen: HashSet<String>,
    order: VecDeque<String>,
    memory: usize,
    last_progress_at: u64,
    last_source: Option<ProgressSource>,
    /// The last screen's rows, each with its normalised line: a screen change redraws a few
    /// rows, and the others (wherever they moved) are not normalised again.
    normalised: HashMap<String, String>,
}

impl ProgressTracker {
    /// A tracker for a worker that started (or was taken over) at `now` (epoch s): the stall
    /// clock starts then.
    pub fn new(now: u64) -> Self {
        Self::with_memory(now, DEFAULT_MEMORY)
    }

    /// A tracker that remembers at most `memory` distinct lines (at least 1).
    pub fn with_memory(now: u64, memory: usize) -> Self {
        Self {
            seen: HashSet::new(),
            order: VecDeque::new(),
            memory: memory.max(1),
            last_progress_at: now,
            last_source: None,
            normalised: HashMap::new(),
        }
    }

    /// Feeds one screen snapshot (its rows as text) seen at `now`. Returns the normalised
    /// lines that are new — empty when the change was only spinners, counters and clocks (or
    /// nothing). Any new line is progress, recorded at `now`.
    pub fn observe_screen(&mut self, now: u64, rows: &[String]) -> Vec<String> {
        let mut new_lines = Vec::new();
        let mut last_screen = std::mem::take(&mut self.normalised);
        for row in rows {
            let line = match last_screen.remove_entry(row) {
                Some((row, line)) => self.normalised.entry(row).or_insert(line),
                None => self
                    .normalised
                    .entry(row.clone())
                    .or_insert_with(|| normalize_line(row)),
            };
            if line.is_empty() || self.seen.contains(line.as_str()) {
                continue;
            }
            let line = line.clone();
            self.remember(line.clone());
            new_lines.push(line);
        }
        if !new_lines.is_empty() {
            self.note(now, ProgressSource::Screen);
        }
        new_lines
    }

    /// Records progress the supervisor observed some other way (a worktree change, a commit, a
    /// lane event) at `now`. Never moves the progress time backwards.
    pub fn note(&mut self, now: u64, source: ProgressSource) {
        if now >= self.last_progress_at {
            self.last_progress_at = now;
            self.last_source = Some(source);
        }
    }

    /// When the lane last made progress (epoch s); the tracker's start if never.
    pub fn last_progress_at(&self) -> u64 {
        self.last_progress_at
    }

    /// What showed the last progress; `None` if there was none since the tracker started.
    pub fn last_source(&self) -> Option<ProgressSource> {
        self.last_source
    }

    /// How long the lane has gone without progress, as of `now`.
    pub fn idle_for(&self, now: u64) -> Duration {
        Duration::from_secs(now.saturating_sub(self.last_progress_at))
    }

    /// No progress for at least `after` as of `now` (use [`DEFAULT_STALL_AFTER`] unless
    /// configured). Only meaningful for a lane in `running`; the caller checks the status.
    pub fn is_stalled(&self, now: u64, after: Duration) -> bool {
        self.idle_for(now) >= after
    }

    fn remember(&mut self, line: String) {
        if self.order.len() >= self.memory
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        self.seen.insert(line.clone());
        self.order.push_back(line);
    }
}

/// The regular expressions normalisation uses. Built once; `None` only if one of them does not
/// compile, which the tests rule out (normalisation then only strips glyphs and spaces).
struct Patterns {
    /// A lone spinner verb: `Onioning…`, `Thinking… (esc to interrupt · 3s)`.
    spinner_verb: Regex,
    /// A status line whose every number is a counter: it mentions interrupting or retrying.
    status_line: Regex,
    /// `12:34`, `12:34:56` (not `file.rs:12:34`: a clock follows a space, a bracket or nothing).
    clock: Regex,
    /// `12s`, `3m 05s`, `1h2m`, `1.5s`, `250ms`.
    elapsed: Regex,
    /// `1.2k tokens`, `↑ 7 tokens`, `↓ 12 tokens`.
    tokens: Regex,
    /// Any run of digits (used inside status lines only).
    digits: Regex,
    /// A provider-retry status line, whatever its error text (`API error · retrying in 1s ·
    /// attempt 1/10`, `Connection dropped (ECONNRESET) · retrying… · attempt 6/10`,
    /// `Reconnecting... 1/5`): the same retrying, never progress.
    provider_retry: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static PATTERNS: LazyLock<Option<Patterns>> = LazyLock::new(|| {
        Some(Patterns {
            spinner_verb: Regex::new(r"^\p{Lu}[\p{L}'-]*(?:…|\.\.\.)\s*(?:\(.*\))?$").ok()?,
            status_line: Regex::new(
                r"(?i)(?:esc|ctrl\+c|ctrl-c|c-c) to (?:interrupt|cancel)|retrying in|reconnecting|\battempt \d+/\d+",
            )
            .ok()?,
            clock: Regex::new(r"(?P<pre>^|[\s(\[])\d{1,2}:\d{2}(?::\d{2})?\b").ok()?,
            elapsed: Regex::new(
                r"\b\d+(?:\.\d+)?(?:ms|[dhms])\b(?:\s+\d+(?:\.\d+)?(?:ms|[dhms])\b)*",
            )
            .ok()?,
            tokens: Regex::new(r"(?i)(?:[↑↓]\s*)?\b\d+(?:\.\d+)?[km]?\s+tokens?\b").ok()?,
            digits: Regex::new(r"\d+").ok()?,
            provider_retry: Regex::new(
                r"(?i)\bretrying\b.*\battempt\s+\d+/\d+|^reconnecting\b.*\d+/\d+",
            )
            .ok()?,
        })
    });
    PATTERNS.as_ref()
}

/// Spinner glyphs that may lead a working line.
fn is_spinner_glyph(c: char) -> bool {
    matches!(
        c,
        '\u{2800}'
            ..='\u{28FF}' // braille spinners
            | '✻' | '✶' | '✳' | '✢' | '✽' | '✺' | '✷' | '✸' | '✹' | '*'
            | '·' | '•' | '◦' | '●' | '⏺' | '◐' | '◓' | '◑' | '◒'
    )
}

/// ASCII spinner frames: only a spinner when a space (or nothing) follows.
fn is_ascii_spinner(c: char) -> bool {
    matches!(c, '|' | '/' | '-' | '\\')
}

/// Box-drawing and block characters: borders, rules and logos, whose width follows the
/// terminal's, never content.
fn is_frame_char(c: char) -> bool {
    matches!(c, '\u{2500}'..='\u{259F}')
}

/// One screen row as it counts for progress: frames and leading spinner glyphs removed,
/// elapsed times, clocks and token counters replaced with placeholders, whitespace collapsed.
/// Lines that only say "the agent is working" (`✻ Onioning… (2s · ↓ 7 tokens)`,
/// `• Working (3m 05s • esc to interrupt)`) normalise to a fixed text, so they are progress at
/// most once. Returns an empty string for a row with nothing left.
pub fn normalize_line(row: &str) -> String {
    let framed: String = row.chars().filter(|c| !is_frame_char(*c)).collect();
    let mut line = framed.trim();
    loop {
        let mut chars = line.chars();
        match chars.next() {
            Some(c) if is_spinner_glyph(c) => line = chars.as_str().trim_start(),
            Some(c) if is_ascii_spinner(c) => {
                let rest = chars.as_str();
                if rest.is_empty() || rest.starts_with(char::is_whitespace) {
                    line = rest.trim_start();
                } else {
                    break;
                }
            }
            _ => break,
        }
    }
    let Some(p) = patterns() else {
        return line.split_whitespace().collect::<Vec<_>>().join(" ");
    };
    if p.spinner_verb.is_match(line) {
        return "<working>".to_owned();
    }
    if p.provider_retry.is_match(line) {
        return "<provider retry>".to_owned();
    }
    let status = p.status_line.is_match(line);
    let mut line = p.clock.replace_all(line, "${pre}<clock>").into_owned();
    line = p.tokens.replace_all(&line, "<tokens>").into_owned();
    line = p.elapsed.replace_all(&line, "<time>").into_owned();
    if status {
        line = p.digits.replace_all(&line, "#").into_owned();
    }
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAUDE_06: &str =
        include_str!("../../tests/fixtures/screens/claude-2.1.330/06-running-120x40.txt");
    const CLAUDE_07: &str =
        include_str!("../../tests/fixtures/screens/claude-2.1.330/07-running-120x40.txt");
    const CLAUDE_17: &str =
        include_str!("../../tests/fixtures/screens/claude-2.1.330/17-provider_retry-80x24.txt");
    const CODEX_05: &str =
        include_str!("../../tests/fixtures/screens/codex-0.169.0/05-running-120x40.txt");
    const CODEX_10: &str =
        include_str!("../../tests/fixtures/screens/codex-0.169.0/10-running-80x24.txt");
    const CODEX_12: &str =
        include_str!("../../tests/fixtures/screens/codex-0.169.0/12-provider_retry-120x40.txt");

    fn rows(screen: &str) -> Vec<String> {
        screen.lines().map(str::to_owned).collect()
    }

    /// `screen` with the first row containing `from` replaced by `to`.
    fn with_row(screen: &str, from: &str, to: &str) -> Vec<String> {
        let mut rows = rows(screen);
        let row = rows
            .iter_mut()
            .find(|r| r.contains(from))
            .expect("the fixture has the row");
        *row = to.to_owned();
        rows
    }

    #[test]
    fn the_patterns_compile() {
        assert!(patterns().is_some());
    }

    #[test]
    fn working_lines_normalise_to_one_text() {
        let working = [
            "✻ Onioning…",
            "· Onioning… (2s · ↓ 7 tokens)",
            "✶ Waddling… (1m 12s · ↑ 1.2k tokens · esc to interrupt)",
            "⠙ Thinking…",
            "* Reticulating... (12s)",
        ];
        for line in working {
            assert_eq!(normalize_line(line), "<working>", "{line}");
        }
        assert_eq!(
            normalize_line("• Working (0s • esc to interrupt)"),
            normalize_line("◦ Working (3m 05s • esc to interrupt)")
        );
        assert_eq!(
            normalize_line("◦ Reconnecting... 1/5 (3s • esc to interrupt)"),
            normalize_line("• Reconnecting... 4/5 (41s • esc to interrupt)")
        );
        assert_eq!(
            normalize_line("✻ API error · retrying in 1s · attempt 1/10"),
            normalize_line("✻ API error · retrying in 15s · attempt 6/10")
        );
        // Seen on Claude Code 2.1.330 as its retries went on: another error, the same retrying.
        assert_eq!(
            normalize_line("✻ API error · retrying in 1s · attempt 1/10"),
            normalize_line("✻ Connection dropped (ECONNRESET) · retrying… · attempt 2/10")
        );
        assert_eq!(
            normalize_line("last update 12:34:56, 1.2k tokens"),
            normalize_line("last update 12:35:02, 1.3k tokens")
        );
    }

    #[test]
    fn rows_left_on_screen_are_judged_again_not_skipped() {
        // Normalisation is reused for rows the last screen showed, not the verdict: with room
        // for one line, each of two rows pushes the other out, so both are new every time.
        let mut tracker = ProgressTracker::with_memory(0, 1);
        let screen = rows("● Write(a.txt)\n● Write(b.txt)");
        assert_eq!(tracker.observe_screen(1, &screen).len(), 2);
        assert_eq!(
            tracker.observe_screen(2, &screen),
            ["Write(a.txt)", "Write(b.txt)"]
        );
        // A row that scrolled up one line is the same line, not progress.
        let mut tracker = ProgressTracker::new(0);
        tracker.observe_screen(1, &rows("one\ntwo\n✻ Onioning… (2s)"));
        assert_eq!(
            tracker.observe_screen(2, &rows("two\n✻ Onioning… (3s)\nthree")),
            ["three"]
        );
    }

    #[test]
    fn content_lines_keep_their_content() {
        assert_eq!(normalize_line("● Write(hello.txt)"), "Write(hello.txt)");
        assert_eq!(
            normalize_line("  ⎿  Wrote 1 line to hello.txt"),
            "⎿ Wrote 1 line to hello.txt"
        );
        assert_eq!(normalize_line("/tmp/cp/app"), "/tmp/cp/app");
        assert_eq!(normalize_line("- a list item"), "a list item");
        assert_eq!(normalize_line("──────────"), "");
        assert_eq!(normalize_line("│ 3 tests passed │"), "3 tests passed");
        assert_ne!(
            normalize_line("test result: ok. 3 passed"),
            normalize_line("test result: ok. 4 passed")
        );
    }

    #[test]
    fn a_claude_spinner_and_timer_change_is_not_progress() {
        let mut tracker = ProgressTracker::new(1_000);
        assert!(!tracker.observe_screen(1_000, &rows(CLAUDE_06)).is_empty());
        for (at, frame) in [
            (1_010, "· Onioning… (2s · ↓ 7 tokens)"),
            (1_020, "✶ Onioning… (14s · ↓ 310 tokens)"),
            (
                1_030,
                "✳ Onioning… (1m 2s · ↑ 1.2k tokens · esc to interrupt)",
            ),
        ] {
            let new = tracker.observe_screen(at, &with_row(CLAUDE_06, "Onioning", frame));
            assert!(new.is_empty(), "{frame}: {new:?}");
        }
        assert_eq!(tracker.last_progress_at(), 1_000);
        assert!(tracker.is_stalled(1_600, DEFAULT_STALL_AFTER));
        assert!(!tracker.is_stalled(1_599, DEFAULT_STALL_AFTER));
    }

    #[test]
    fn a_new_claude_output_line_is_progress() {
        let mut tracker = ProgressTracker::new(1_000);
        tracker.observe_screen(1_000, &rows(CLAUDE_06));
        let new = tracker.observe_screen(1_200, &rows(CLAUDE_07));
        assert!(new.contains(&"Write(hello.txt)".to_owned()), "{new:?}");
        assert!(!new.iter().any(|l| l.contains("Onioning")), "{new:?}");
        assert_eq!(tracker.last_progress_at(), 1_200);
        assert_eq!(tracker.last_source(), Some(ProgressSource::Screen));
        assert_eq!(tracker.idle_for(1_300), Duration::from_secs(100));
    }

    #[test]
    fn a_codex_timer_change_is_not_progress_but_a_command_is() {
        let mut tracker = ProgressTracker::new(0);
        tracker.observe_screen(0, &rows(CODEX_05));
        for (at, frame) in [
            (5, "◦ Working (5s • esc to interrupt)"),
            (65, "• Working (1m 05s • esc to interrupt)"),
        ] {
            let new = tracker.observe_screen(at, &with_row(CODEX_05, "Working (", frame));
            assert!(new.is_empty(), "{frame}: {new:?}");
        }
        let new = tracker.observe_screen(70, &rows(CODEX_10));
        assert!(
            new.contains(&"Ran printf hi > hello.txt".to_owned()),
            "{new:?}"
        );
        assert_eq!(tracker.last_progress_at(), 70);
    }

    #[test]
    fn provider_retry_counters_are_not_progress() {
        let mut tracker = ProgressTracker::new(0);
        tracker.observe_screen(0, &rows(CODEX_12));
        let new = tracker.observe_screen(
            30,
            &with_row(
                CODEX_12,
                "Reconnecting",
                "• Reconnecting... 3/5 (27s • esc to interrupt)",
            ),
        );
        assert!(new.is_empty(), "{new:?}");
        tracker.observe_screen(40, &rows(CLAUDE_17));
        let new = tracker.observe_screen(
            70,
            &with_row(
                CLAUDE_17,
                "retrying in",
                "✻ Connection dropped (ECONNRESET) · retrying in 30s · attempt 7/10",
            ),
        );
        assert!(new.is_empty(), "{new:?}");
        assert_eq!(tracker.last_progress_at(), 40);
    }

    #[test]
    fn a_line_that_comes_back_is_progress_only_once() {
        let mut tracker = ProgressTracker::new(0);
        let with = vec!["hello".to_owned(), "tip: press ? for help".to_owned()];
        let without = vec!["hello".to_owned()];
        assert_eq!(tracker.observe_screen(1, &with).len(), 2);
        assert!(tracker.observe_screen(2, &without).is_empty());
        assert!(tracker.observe_screen(3, &with).is_empty());
        assert_eq!(tracker.last_progress_at(), 1);
    }

    #[test]
    fn memory_is_bounded_and_forgets_the_oldest() {
        let mut tracker = ProgressTracker::with_memory(0, 2);
        tracker.observe_screen(1, &["a".to_owned(), "b".to_owned()]);
        tracker.observe_screen(2, &["c".to_owned()]);
        assert_eq!(tracker.observe_screen(3, &["a".to_owned()]), vec!["a"]);
        assert!(tracker.observe_screen(4, &["a".to_owned()]).is_empty());
    }

    #[test]
    fn other_signals_are_progress_and_time_never_goes_back() {
        let mut tracker = ProgressTracker::new(100);
        tracker.note(400, ProgressSource::Commit);
        assert_eq!(tracker.last_progress_at(), 400);
        assert_eq!(tracker.last_source(), Some(ProgressSource::Commit));
        tracker.note(300, ProgressSource::WorktreeChange);
        assert_eq!(tracker.last_progress_at(), 400);
        assert_eq!(tracker.last_source(), Some(ProgressSource::Commit));
        assert!(!tracker.is_stalled(999, DEFAULT_STALL_AFTER));
        assert!(tracker.is_stalled(1_000, DEFAULT_STALL_AFTER));
    }
}
