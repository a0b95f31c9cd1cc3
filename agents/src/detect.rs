//! Detection: what a screen snapshot says about an agent, according to its profile.
//!
//! [`observe`] takes a snapshot (never a live terminal) and a compiled profile and returns one
//! [`Observation`]: a dialog, a rule's signal (working, provider retry, shell, booting), or,
//! when no rule matches, what the input line shows (idle, or a draft). The highest priority
//! wins; dialogs win ties. [`explain`] evaluates every rule and dialog and reports each with
//! its evidence, and the near misses, for `clawpool explain`.

use std::borrow::Cow;

use clawpool_pty::ScreenSnapshot;
use serde::Serialize;

use crate::profiles::{Dialog, DialogKind, InputFinder, Matcher, Profile, Region, Rule, Signal};

/// What the screen shows, as far as the profile can tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Seen {
    /// A dialog the profile knows.
    Dialog {
        /// Its name.
        name: String,
        /// Its kind.
        dialog: DialogKind,
    },
    /// A rule's signal.
    Signal {
        /// The signal.
        signal: Signal,
    },
    /// An empty input line (or one showing a placeholder), nothing in the way.
    Idle,
    /// The input line holds a draft.
    Draft {
        /// The draft's text.
        text: String,
    },
    /// Nothing recognisable.
    Unknown,
}

/// One observation with its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// What was seen.
    pub seen: Seen,
    /// The rule or dialog that decided (`input_line` when the input line did).
    pub rule: String,
    /// Where it looked.
    pub region: String,
    /// The text that matched.
    pub evidence: String,
}

/// The rows of `region` on `snap`.
pub fn region_rows(snap: &ScreenSnapshot, input: &InputFinder, region: Region) -> Vec<String> {
    rows_in(snap, &Layout::of(snap, input), region).into_owned()
}

/// The rows of `region` on `snap`, whose input box is at `layout`: borrowed where they are a
/// run of the screen's rows.
fn rows_in<'s>(snap: &'s ScreenSnapshot, layout: &Layout, region: Region) -> Cow<'s, [String]> {
    match region {
        Region::Screen => Cow::Borrowed(&snap.rows),
        Region::Title => Cow::Owned(vec![snap.title.clone()]),
        Region::InputLine => layout.input.map_or(Cow::Owned(Vec::new()), |(start, end)| {
            Cow::Borrowed(&snap.rows[start..end])
        }),
        Region::AboveInput(n) => {
            let top = layout.box_top.unwrap_or(snap.rows.len());
            Cow::Owned(last_non_empty(&snap.rows[..top], n))
        }
        Region::BelowInput => match layout.box_bottom {
            Some(bottom) => Cow::Borrowed(&snap.rows[bottom.min(snap.rows.len())..]),
            None => Cow::Owned(Vec::new()),
        },
        Region::LastLines(n) => Cow::Owned(last_non_empty(&snap.rows, n)),
    }
}

fn last_non_empty(rows: &[String], n: usize) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .rev()
        .filter(|r| !r.trim().is_empty())
        .take(n)
        .cloned()
        .collect();
    out.reverse();
    out
}

/// Where the input box is on a screen.
struct Layout {
    /// The input line's rows (start, end exclusive).
    input: Option<(usize, usize)>,
    /// The first row of the input box (a rule, or the input line).
    box_top: Option<usize>,
    /// The first row after the input box.
    box_bottom: Option<usize>,
}

impl Layout {
    /// The input box the profile describes, if the screen shows it where the profile anchors
    /// it (`rows_below`).
    fn of(snap: &ScreenSnapshot, input: &InputFinder) -> Self {
        let layout = Self::found(snap, input);
        match (input.rows_below, layout.box_bottom) {
            (Some(allowed), Some(bottom)) => {
                let last = snap.rows.iter().rposition(|row| !row.trim().is_empty());
                let below = last.map_or(0, |last| (last + 1).saturating_sub(bottom));
                if below > allowed {
                    // More under it than the agent's status rows: a box drawn in the agent's
                    // output (a notice, a file, a tool's result), not its input line.
                    return Self::none();
                }
                layout
            }
            _ => layout,
        }
    }

    /// The input box as the profile's rules and prefix find it, wherever it is.
    fn found(snap: &ScreenSnapshot, input: &InputFinder) -> Self {
        let starts_with_prefix = |row: &String| {
            !input.prefix.is_empty() && row.trim_start().starts_with(input.prefix.as_str())
        };
        if let Some(rule) = input.bottom_rule {
            return Self::closed_at_bottom(snap, input, rule);
        }
        if let Some(rule) = input.rule {
            let is_rule = |row: &String| {
                let trimmed = row.trim();
                trimmed.chars().count() >= 10 && trimmed.chars().all(|c| c == rule)
            };
            let rules: Vec<usize> = (0..snap.rows.len())
                .filter(|&i| is_rule(&snap.rows[i]))
                .collect();
            let (top, bottom) = match rules[..] {
                [.., a, b] => (a, b),
                [a] => (
                    a,
                    (a + 1..snap.rows.len())
                        .find(|&i| snap.rows[i].trim().is_empty())
                        .unwrap_or(snap.rows.len()),
                ),
                [] => return Self::none(),
            };
            let line = (top + 1..bottom).find(|&i| starts_with_prefix(&snap.rows[i]));
            return match line {
                Some(line) => Self {
                    input: Some((line, bottom)),
                    box_top: Some(top),
                    box_bottom: Some(bottom + usize::from(rules.len() > 1)),
                },
                None => Self::none(),
            };
        }
        match (0..snap.rows.len())
            .rev()
            .find(|&i| starts_with_prefix(&snap.rows[i]))
        {
            Some(line) => Self {
                input: Some((line, line + 1)),
                box_top: Some(line),
                box_bottom: Some(line + 1),
            },
            None => Self::none(),
        }
    }

    /// A box with no top rule: the run of `prefix` rows right above the last row drawn with
    /// `rule` (at least 10 of it, after at most one corner glyph), less its status rows.
    fn closed_at_bottom(snap: &ScreenSnapshot, input: &InputFinder, rule: char) -> Self {
        let is_bottom_rule = |row: &String| {
            let trimmed = row.trim();
            let body = trimmed.strip_prefix(|c: char| c != rule).unwrap_or(trimmed);
            body.chars().count() >= 10 && body.chars().all(|c| c == rule)
        };
        let Some(bottom) = (0..snap.rows.len())
            .rev()
            .find(|&i| is_bottom_rule(&snap.rows[i]))
        else {
            return Self::none();
        };
        let top = (0..bottom)
            .rev()
            .take_while(|&i| {
                !input.prefix.is_empty() && snap.rows[i].trim_start().starts_with(&input.prefix)
            })
            .last();
        match top {
            Some(top) if bottom - top > input.status_rows => Self {
                input: Some((top, bottom - input.status_rows)),
                box_top: Some(top),
                box_bottom: Some(bottom + 1),
            },
            _ => Self::none(),
        }
    }

    fn none() -> Self {
        Self {
            input: None,
            box_top: None,
            box_bottom: None,
        }
    }
}

/// The text in the input line, without its prefix, placeholder or dim hint text; `None` when
/// the screen has no input line.
pub fn draft(snap: &ScreenSnapshot, input: &InputFinder) -> Option<String> {
    draft_in(snap, input, &Layout::of(snap, input))
}

/// As [`draft`], for a screen whose input box is at `layout`.
fn draft_in(snap: &ScreenSnapshot, input: &InputFinder, layout: &Layout) -> Option<String> {
    let (start, end) = layout.input?;
    let rows = if snap.undimmed.len() == snap.rows.len() {
        &snap.undimmed
    } else {
        &snap.rows
    };
    let mut text = String::new();
    for (i, row) in rows[start..end].iter().enumerate() {
        // A box closed only at the bottom draws its side glyph on every row.
        let row = if i == 0 || input.bottom_rule.is_some() {
            row.trim_start()
                .strip_prefix(input.prefix.as_str())
                .unwrap_or(row)
        } else {
            row.as_str()
        };
        // A zero-width space is no text: Qwen Code draws its cursor as a highlighted space
        // followed by one.
        let row = row.trim_matches(|c: char| c.is_whitespace() || c == '\u{200b}');
        if row.is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(row);
    }
    if input.placeholders.iter().any(|p| p.is_match(&text)) {
        text.clear();
    }
    Some(text)
}

/// A rule or dialog as evaluated by [`explain`].
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    /// Rule or dialog name.
    pub rule: String,
    /// `rule` or `dialog`.
    pub what: &'static str,
    /// What a match means.
    pub means: String,
    /// Its priority.
    pub priority: i32,
    /// The region.
    pub region: String,
    /// The evidence, when it matched.
    pub matched: Option<String>,
    /// When it did not match but came close: why it counts as a near miss.
    pub near_miss: Option<String>,
}

/// Every rule and dialog evaluated on one screen, and the observation that wins.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The winner.
    pub observation: Observation,
    /// What the input line holds (`null` when there is none).
    pub input_line: Option<String>,
    /// Every rule and dialog, highest priority first.
    pub evaluations: Vec<Evaluation>,
}

/// What the screen shows: what [`explain`] would say wins, found without evaluating the rules
/// and dialogs below the winner or looking for near misses (a lane observes every screen
/// change). Every dialog counts: the screen of an agent that is starting ([`Phase::Boot`]).
pub fn observe(profile: &Profile, snap: &ScreenSnapshot) -> Observation {
    observe_in(profile, snap, Phase::Boot).observation
}

/// Which of a profile's dialogs a screen can show: where the agent is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The agent is starting: nothing was typed into it, no prompt is in. Every dialog counts.
    Boot,
    /// A prompt is in (typed, or taken from the command line and worked on): trust and boot
    /// dialogs ([`DialogKind::boot_only`]) are questions only a starting agent asks, so text
    /// that looks like one is the agent's output and is not a dialog.
    Turn,
}

/// What [`observe_in`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// What the screen shows in the phase.
    pub observation: Observation,
    /// A boot-only dialog's look-alike the phase left out, with its evidence: the profile's
    /// matcher holds on the screen, but the agent is past the point where it asks that.
    pub ignored: Option<Observation>,
}

/// What the screen shows in `phase`, and the look-alike of a dialog the phase does not admit.
pub fn observe_in(profile: &Profile, snap: &ScreenSnapshot, phase: Phase) -> Sighting {
    let input = &profile.input;
    let layout = Layout::of(snap, input);
    let mut candidates: Vec<Candidate<'_>> = profile
        .dialogs
        .iter()
        .map(Candidate::Dialog)
        .chain(profile.rules.iter().map(Candidate::Rule))
        .collect();
    // The order explain ranks them in: highest priority first; among equals, dialogs before
    // rules, then file order (the sort is stable).
    candidates.sort_by_key(|c| (std::cmp::Reverse(c.priority()), !c.is_dialog()));
    let found = |candidate: &Candidate<'_>| {
        let (region, matcher) = candidate.looks_for();
        let rows = rows_in(snap, &layout, region);
        matcher.find(&rows).map(|evidence| Observation {
            seen: candidate.seen(),
            rule: candidate.name().to_owned(),
            region: region.name(),
            evidence,
        })
    };
    let (admitted, left_out): (Vec<_>, Vec<_>) = candidates
        .into_iter()
        .partition(|candidate| phase == Phase::Boot || !candidate.boot_only());
    let winner = admitted.iter().find_map(found);
    let observation = winner.unwrap_or_else(|| {
        input_line_observation(draft_in(snap, input, &layout).as_deref(), || {
            rows_in(snap, &layout, Region::InputLine).join("\n")
        })
    });
    Sighting {
        observation,
        ignored: left_out.iter().find_map(found),
    }
}

/// A dialog or rule as [`observe`] tries it.
#[derive(Clone, Copy)]
enum Candidate<'p> {
    Dialog(&'p Dialog),
    Rule(&'p Rule),
}

impl Candidate<'_> {
    fn name(&self) -> &str {
        match self {
            Candidate::Dialog(dialog) => &dialog.name,
            Candidate::Rule(rule) => &rule.name,
        }
    }

    fn priority(&self) -> i32 {
        match self {
            Candidate::Dialog(dialog) => dialog.priority,
            Candidate::Rule(rule) => rule.priority,
        }
    }

    fn is_dialog(&self) -> bool {
        matches!(self, Candidate::Dialog(_))
    }

    /// A dialog only a starting agent shows.
    fn boot_only(&self) -> bool {
        matches!(self, Candidate::Dialog(dialog) if dialog.kind.boot_only())
    }

    fn looks_for(&self) -> (Region, &Matcher) {
        match self {
            Candidate::Dialog(dialog) => (dialog.region, &dialog.matcher),
            Candidate::Rule(rule) => (rule.region, &rule.matcher),
        }
    }

    /// What a match means.
    fn seen(&self) -> Seen {
        match self {
            Candidate::Dialog(dialog) => Seen::Dialog {
                name: dialog.name.clone(),
                dialog: dialog.kind,
            },
            Candidate::Rule(rule) => Seen::Signal {
                signal: rule.signal,
            },
        }
    }
}

/// What the input line says when no rule or dialog matched: idle (its rows as evidence),
/// a draft, or, with no input line, nothing recognisable.
fn input_line_observation(
    input_line: Option<&str>,
    input_rows: impl FnOnce() -> String,
) -> Observation {
    match input_line {
        Some("") => Observation {
            seen: Seen::Idle,
            rule: "input_line".into(),
            region: "input_line".into(),
            evidence: input_rows(),
        },
        Some(text) => Observation {
            seen: Seen::Draft {
                text: text.to_owned(),
            },
            rule: "input_line".into(),
            region: "input_line".into(),
            evidence: text.to_owned(),
        },
        None => Observation {
            seen: Seen::Unknown,
            rule: "none".into(),
            region: "screen".into(),
            evidence: String::new(),
        },
    }
}

/// Every rule and dialog evaluated, the winner, and the near misses.
pub fn explain(profile: &Profile, snap: &ScreenSnapshot) -> Explanation {
    let input = &profile.input;
    let screen_rows = &snap.rows;
    let evaluate = |name: &str,
                    what: &'static str,
                    means: String,
                    priority: i32,
                    region: Region,
                    matcher: &Matcher| {
        let rows = region_rows(snap, input, region);
        let matched = matcher.find(&rows);
        let near_miss = match &matched {
            Some(_) => None,
            None => near_miss(matcher, &rows, screen_rows, region),
        };
        Evaluation {
            rule: name.to_owned(),
            what,
            means,
            priority,
            region: region.name(),
            matched,
            near_miss,
        }
    };
    let mut evaluations: Vec<(Evaluation, Seen)> = Vec::new();
    for dialog in &profile.dialogs {
        let seen = Seen::Dialog {
            name: dialog.name.clone(),
            dialog: dialog.kind,
        };
        let means = format!("dialog ({})", wire(&dialog.kind));
        evaluations.push((
            evaluate(
                &dialog.name,
                "dialog",
                means,
                dialog.priority,
                dialog.region,
                &dialog.matcher,
            ),
            seen,
        ));
    }
    for rule in &profile.rules {
        let seen = Seen::Signal {
            signal: rule.signal,
        };
        let means = wire(&rule.signal);
        evaluations.push((
            evaluate(
                &rule.name,
                "rule",
                means,
                rule.priority,
                rule.region,
                &rule.matcher,
            ),
            seen,
        ));
    }
    // Highest priority first; among equals, dialogs before rules, then file order.
    evaluations.sort_by_key(|(e, _)| (std::cmp::Reverse(e.priority), e.what != "dialog"));
    let input_line = draft(snap, input);
    let winner = evaluations
        .iter()
        .find(|(e, _)| e.matched.is_some())
        .map(|(e, seen)| Observation {
            seen: seen.clone(),
            rule: e.rule.clone(),
            region: e.region.clone(),
            evidence: e.matched.clone().unwrap_or_default(),
        });
    let observation = winner.unwrap_or_else(|| {
        input_line_observation(input_line.as_deref(), || {
            region_rows(snap, input, Region::InputLine).join("\n")
        })
    });
    Explanation {
        observation,
        input_line,
        evaluations: evaluations.into_iter().map(|(e, _)| e).collect(),
    }
}

fn near_miss(
    matcher: &Matcher,
    rows: &[String],
    screen: &[String],
    region: Region,
) -> Option<String> {
    if let Some((matched, of)) = matcher.partial(rows) {
        return Some(format!("{matched} of {of} conditions matched"));
    }
    if region != Region::Screen
        && let Some(found) = matcher.find(screen)
    {
        return Some(format!(
            "matches elsewhere on screen ({found:?}), not in {}",
            region.name()
        ));
    }
    None
}

fn wire(value: &impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clawpool_pty::{ScreenModel, ScreenOptions, TermSize};

    use super::*;
    use crate::profiles::ProfileSet;

    /// `observe` skips what `explain` evaluates below the winner; on every screen of every
    /// recorded session (each replayed change by change) it must still say what `explain`
    /// says wins.
    #[test]
    fn observe_agrees_with_explain_on_every_recorded_screen() {
        let profiles = ProfileSet::builtin().expect("profiles");
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recordings");
        let mut screens = 0;
        for entry in std::fs::read_dir(&root).expect("recordings").flatten() {
            let folder = entry.file_name().to_string_lossy().into_owned();
            let agent = folder.split('-').next().unwrap_or_default();
            let size = folder.rsplit('-').next().unwrap_or_default();
            let (Some((cols, rows)), Ok(stream)) = (
                size.split_once('x'),
                std::fs::read(entry.path().join("stream.bin")),
            ) else {
                continue;
            };
            let profile = profiles
                .get(agent)
                .expect("a profile for every recorded agent");
            let mut model = ScreenModel::new(ScreenOptions::new(TermSize {
                rows: rows.parse().expect("rows"),
                cols: cols.parse().expect("cols"),
            }));
            for change in stream.chunks(421) {
                model.feed(change);
                let snap = model.snapshot();
                assert_eq!(
                    observe(profile, &snap),
                    explain(profile, &snap).observation,
                    "{folder}:\n{}",
                    snap.text()
                );
                screens += 1;
            }
        }
        assert!(screens > 1_000, "only {screens} screens replayed");
    }
}
