//! Agent profiles: how to start each agent and how to read its screen, as data.
//!
//! Built-in manifests (`agents/profiles/*.toml`, embedded at build time) cover `claude`,
//! `codex`, `opencode`, `gemini`, `qwen`, `aider`, `claw` and the `scripted` test agent. Every profile
//! also gets the rules in `common.toml` (a shell where the agent should be). Configuration
//! patches them ([`manifest::ManifestPatch`]) or adds new ones; [`ProfileSet`] holds the result,
//! compiled ([`Profile`]): regexes built, regions parsed, key names checked, so that a bad
//! profile fails at load with an error naming its file, rule and line, never mid-run.

pub mod manifest;

use std::collections::BTreeMap;
use std::time::Duration;

use clawpool_pty::Key;
use regex::Regex;

pub use manifest::{
    AgentHooks, DialogKind, Manifest, ManifestPatch, MatcherSpec, Policy, Signal, TrustStore,
};

use manifest::{DialogSpec, ENGINE_VERSION, RuleSpec, StepSpec};

/// The built-in manifests: (file name, text).
const BUILTIN: &[(&str, &str)] = &[
    ("claude.toml", include_str!("../../profiles/claude.toml")),
    ("codex.toml", include_str!("../../profiles/codex.toml")),
    (
        "opencode.toml",
        include_str!("../../profiles/opencode.toml"),
    ),
    ("gemini.toml", include_str!("../../profiles/gemini.toml")),
    ("qwen.toml", include_str!("../../profiles/qwen.toml")),
    ("aider.toml", include_str!("../../profiles/aider.toml")),
    ("claw.toml", include_str!("../../profiles/claw.toml")),
    (
        "scripted.toml",
        include_str!("../../profiles/scripted.toml"),
    ),
];

/// Rules every profile gets.
const COMMON: (&str, &str) = ("common.toml", include_str!("../../profiles/common.toml"));

/// A profile that cannot be loaded, with where the problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{}: {message}", file, line.map(|l| format!(":{l}")).unwrap_or_default(), rule.as_ref().map(|r| format!(" (rule {r:?})")).unwrap_or_default())]
pub struct ProfileError {
    /// The file the problem is in (`built-in claude.toml`, or a config file path).
    pub file: String,
    /// The line, when known.
    pub line: Option<usize>,
    /// The rule or dialog, when the problem is in one.
    pub rule: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// An agent name no profile has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown agent {name:?}; known agents: {}", known.join(", "))]
pub struct UnknownAgent {
    /// The name asked for.
    pub name: String,
    /// The names there are.
    pub known: Vec<String>,
}

/// Where a rule looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// Every row.
    Screen,
    /// The window title.
    Title,
    /// The input line (and its continuation rows).
    InputLine,
    /// The last N non-empty rows above the input box.
    AboveInput(usize),
    /// The rows below the input box (status lines).
    BelowInput,
    /// The last N non-empty rows of the screen.
    LastLines(usize),
}

impl Region {
    fn parse(text: &str) -> Result<Self, String> {
        let (name, count) =
            match text.split_once(':') {
                Some((name, n)) => (
                    name,
                    Some(n.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("region {text:?}: {n:?} is not a positive count")
                    })?),
                ),
                None => (text, None),
            };
        Ok(match (name, count) {
            ("screen", None) => Region::Screen,
            ("title", None) => Region::Title,
            ("input_line", None) => Region::InputLine,
            ("above_input", n) => Region::AboveInput(n.unwrap_or(3)),
            ("below_input", None) => Region::BelowInput,
            ("last_lines", Some(n)) => Region::LastLines(n),
            _ => {
                return Err(format!(
                    "unknown region {text:?}; regions: screen, title, input_line, above_input[:N], below_input, last_lines:N"
                ));
            }
        })
    }

    /// The region as written in a manifest.
    pub fn name(self) -> String {
        match self {
            Region::Screen => "screen".into(),
            Region::Title => "title".into(),
            Region::InputLine => "input_line".into(),
            Region::AboveInput(n) => format!("above_input:{n}"),
            Region::BelowInput => "below_input".into(),
            Region::LastLines(n) => format!("last_lines:{n}"),
        }
    }
}

/// A compiled matcher.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Substring.
    Contains(String),
    /// Regex over the region's text.
    Regex(Regex),
    /// Regex over each row.
    LineRegex(Regex),
    /// All of these.
    All(Vec<Matcher>),
    /// Any of these.
    Any(Vec<Matcher>),
    /// Not this.
    Not(Box<Matcher>),
}

impl Matcher {
    fn compile(spec: &MatcherSpec) -> Result<Self, String> {
        let regex = |pattern: &str| {
            Regex::new(pattern).map_err(|e| format!("invalid regex {pattern:?}: {e}"))
        };
        Ok(match spec {
            MatcherSpec::Contains(text) => Matcher::Contains(text.clone()),
            MatcherSpec::Regex(pattern) => Matcher::Regex(regex(pattern)?),
            MatcherSpec::LineRegex(pattern) => Matcher::LineRegex(regex(pattern)?),
            MatcherSpec::All(parts) => Matcher::All(
                parts
                    .iter()
                    .map(Matcher::compile)
                    .collect::<Result<_, _>>()?,
            ),
            MatcherSpec::Any(parts) => Matcher::Any(
                parts
                    .iter()
                    .map(Matcher::compile)
                    .collect::<Result<_, _>>()?,
            ),
            MatcherSpec::Not(inner) => Matcher::Not(Box::new(Matcher::compile(inner)?)),
        })
    }

    /// Matches against the rows of a region; returns the evidence (the matched text).
    pub fn find(&self, rows: &[String]) -> Option<String> {
        match self {
            Matcher::Contains(needle) => rows
                .iter()
                .find(|row| row.contains(needle.as_str()))
                .map(|row| row.trim().to_owned())
                .or_else(|| {
                    rows.join("\n")
                        .contains(needle.as_str())
                        .then(|| needle.clone())
                }),
            Matcher::Regex(re) => re.find(&rows.join("\n")).map(|m| m.as_str().to_owned()),
            Matcher::LineRegex(re) => rows
                .iter()
                .find(|row| re.is_match(row))
                .map(|row| row.trim().to_owned()),
            Matcher::All(parts) => {
                let found: Option<Vec<String>> = parts.iter().map(|p| p.find(rows)).collect();
                found.map(|parts| parts.join(" & "))
            }
            Matcher::Any(parts) => parts.iter().find_map(|p| p.find(rows)),
            Matcher::Not(inner) => match inner.find(rows) {
                Some(_) => None,
                None => Some(String::from("(absent)")),
            },
        }
    }

    /// For a matcher that did not match: how close it came (`k of n` conditions).
    pub fn partial(&self, rows: &[String]) -> Option<(usize, usize)> {
        match self {
            Matcher::All(parts) if parts.len() > 1 => {
                let matched = parts.iter().filter(|p| p.find(rows).is_some()).count();
                (matched > 0).then_some((matched, parts.len()))
            }
            _ => None,
        }
    }
}

/// A compiled detection rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its name.
    pub name: String,
    /// What a match means.
    pub signal: Signal,
    /// Higher wins.
    pub priority: i32,
    /// Where it looks.
    pub region: Region,
    /// What it looks for.
    pub matcher: Matcher,
}

/// One step of answering a dialog.
#[derive(Debug, Clone)]
pub enum Step {
    /// Press these keys.
    Keys(Vec<Key>),
    /// Type this text.
    Text(String),
    /// Wait until the matcher holds on the region for `stable`, at most `timeout`.
    Expect {
        /// What must show.
        matcher: Matcher,
        /// Where.
        region: Region,
        /// For how long without interruption.
        stable: Duration,
        /// Give up (and start the answer over) after this.
        timeout: Duration,
    },
}

/// A compiled dialog.
#[derive(Debug, Clone)]
pub struct Dialog {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: DialogKind,
    /// Higher wins.
    pub priority: i32,
    /// Where it is recognised.
    pub region: Region,
    /// How.
    pub matcher: Matcher,
    /// Who answers it.
    pub policy: Policy,
    /// The automatic answer.
    pub answer: Option<String>,
    /// The choices.
    pub choices: BTreeMap<String, Vec<Step>>,
}

/// How the input line is found.
#[derive(Debug, Clone)]
pub struct InputFinder {
    /// The rule character, if the agent draws its input box between rules.
    pub rule: Option<char>,
    /// The rule character closing a box drawn without a top rule.
    pub bottom_rule: Option<char>,
    /// Rows at the bottom of a `bottom_rule` box that are the agent's, not the draft's.
    pub status_rows: usize,
    /// At most this many rows under the input box: the agent's own box is anchored there.
    pub rows_below: Option<usize>,
    /// The input line's glyph.
    pub prefix: String,
    /// Placeholder texts (an input line showing one is empty).
    pub placeholders: Vec<Regex>,
    /// Keys that empty the input line (none: the profile knows no way).
    pub clear_keys: Vec<Key>,
}

/// A compiled profile, ready for detection.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The manifest it was compiled from (after patches), for `config show`.
    pub manifest: Manifest,
    /// Rules, own and common.
    pub rules: Vec<Rule>,
    /// Dialogs.
    pub dialogs: Vec<Dialog>,
    /// The input line.
    pub input: InputFinder,
}

impl Profile {
    /// The profile's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// Compiles a manifest. `file` and `text` locate errors (the line of a rule is found by
    /// its name in the text).
    pub fn compile(manifest: Manifest, file: &str, text: &str) -> Result<Self, ProfileError> {
        let err = |rule: Option<&str>, message: String| ProfileError {
            file: file.to_owned(),
            line: rule.and_then(|r| line_of_name(text, r)),
            rule: rule.map(str::to_owned),
            message,
        };
        if manifest.engine > ENGINE_VERSION {
            return Err(err(
                None,
                format!(
                    "profile {:?} needs rule engine {}, this clawpool has {ENGINE_VERSION}",
                    manifest.name, manifest.engine
                ),
            ));
        }
        if manifest.launch.command.trim().is_empty() {
            return Err(err(
                None,
                format!("profile {:?} has no launch.command", manifest.name),
            ));
        }
        let common = common_rules()?;
        let mut rules = Vec::new();
        for spec in manifest.rules.iter().chain(common.iter()) {
            rules.push(compile_rule(spec).map_err(|m| err(Some(&spec.name), m))?);
        }
        let mut dialogs = Vec::new();
        for spec in &manifest.dialogs {
            dialogs.push(compile_dialog(spec).map_err(|m| err(Some(&spec.name), m))?);
        }
        let rule =
            rule_char("input.rule", manifest.input.rule.as_deref()).map_err(|m| err(None, m))?;
        let bottom_rule = rule_char("input.bottom_rule", manifest.input.bottom_rule.as_deref())
            .map_err(|m| err(None, m))?;
        if rule.is_some() && bottom_rule.is_some() {
            return Err(err(
                None,
                "input.rule and input.bottom_rule cannot both be set: a box has rules on both \
                 sides or only at the bottom"
                    .into(),
            ));
        }
        let placeholders = manifest
            .input
            .placeholders
            .iter()
            .map(|p| {
                Regex::new(p)
                    .map_err(|e| err(None, format!("invalid placeholder regex {p:?}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let clear_keys = manifest
            .input
            .clear_keys
            .iter()
            .map(|k| {
                k.parse::<Key>()
                    .map_err(|e| err(None, format!("input.clear_keys: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            input: InputFinder {
                rule,
                bottom_rule,
                status_rows: manifest.input.status_rows,
                rows_below: manifest.input.rows_below,
                prefix: manifest.input.prefix.clone(),
                placeholders,
                clear_keys,
            },
            manifest,
            rules,
            dialogs,
        })
    }

    /// The dialog called `name`.
    pub fn dialog(&self, name: &str) -> Option<&Dialog> {
        self.dialogs.iter().find(|d| d.name == name)
    }
}

/// The one character of a rule setting (`field`), or none when unset or empty.
fn rule_char(field: &str, text: Option<&str>) -> Result<Option<char>, String> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(Some(c)),
        _ => Err(format!("{field} must be one character, not {text:?}")),
    }
}

fn compile_rule(spec: &RuleSpec) -> Result<Rule, String> {
    Ok(Rule {
        name: spec.name.clone(),
        signal: spec.signal,
        priority: spec.priority,
        region: Region::parse(&spec.region)?,
        matcher: Matcher::compile(&spec.matcher)?,
    })
}

fn compile_dialog(spec: &DialogSpec) -> Result<Dialog, String> {
    let mut choices = BTreeMap::new();
    for (name, steps) in &spec.choices {
        let steps = steps
            .iter()
            .map(compile_step)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| format!("choice {name:?}: {m}"))?;
        choices.insert(name.clone(), steps);
    }
    if let Some(answer) = &spec.answer
        && !choices.contains_key(answer)
    {
        return Err(format!("answer {answer:?} is not one of its choices"));
    }
    if spec.policy == Policy::Auto && spec.answer.is_none() && spec.kind != DialogKind::Trust {
        return Err("policy \"auto\" needs an `answer`".into());
    }
    Ok(Dialog {
        name: spec.name.clone(),
        kind: spec.kind,
        priority: spec.priority,
        region: Region::parse(&spec.region)?,
        matcher: Matcher::compile(&spec.matcher)?,
        policy: spec.policy,
        answer: spec.answer.clone(),
        choices,
    })
}

fn compile_step(spec: &StepSpec) -> Result<Step, String> {
    let given = usize::from(!spec.keys.is_empty())
        + usize::from(spec.text.is_some())
        + usize::from(spec.expect.is_some());
    if given != 1 {
        return Err("a step has exactly one of `keys`, `text`, `expect`".into());
    }
    if let Some(text) = &spec.text {
        return Ok(Step::Text(text.clone()));
    }
    if let Some(expect) = &spec.expect {
        return Ok(Step::Expect {
            matcher: Matcher::compile(expect)?,
            region: Region::parse(spec.region.as_deref().unwrap_or("screen"))?,
            stable: Duration::from_millis(spec.stable_ms.unwrap_or(0)),
            timeout: Duration::from_millis(spec.timeout_ms.unwrap_or(3_000)),
        });
    }
    let keys = spec
        .keys
        .iter()
        .map(|k| k.parse::<Key>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    Ok(Step::Keys(keys))
}

fn common_rules() -> Result<Vec<RuleSpec>, ProfileError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Common {
        rules: Vec<RuleSpec>,
    }
    toml::from_str::<Common>(COMMON.1)
        .map(|c| c.rules)
        .map_err(|e| toml_error(&format!("built-in {}", COMMON.0), COMMON.1, &e))
}

/// The line of `name = "<name>"` in a manifest's text (1-based).
fn line_of_name(text: &str, name: &str) -> Option<usize> {
    let needle = format!("\"{name}\"");
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            line.starts_with("name") && line.contains(&needle)
        })
        .map(|i| i + 1)
}

/// A TOML parse error as a [`ProfileError`] with its line.
pub fn toml_error(file: &str, text: &str, err: &toml::de::Error) -> ProfileError {
    let line = err
        .span()
        .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    ProfileError {
        file: file.to_owned(),
        line,
        rule: None,
        message: err.message().to_owned(),
    }
}

/// Every profile clawpool knows, compiled.
#[derive(Debug, Clone)]
pub struct ProfileSet {
    profiles: BTreeMap<String, Profile>,
}

/// A patch from configuration, with where it came from.
#[derive(Debug, Clone)]
pub struct SourcedPatch {
    /// The profile it changes (or adds).
    pub profile: String,
    /// The patch.
    pub patch: ManifestPatch,
    /// The file it came from.
    pub file: String,
    /// That file's text, to locate errors.
    pub text: String,
}

impl ProfileSet {
    /// The built-in profiles.
    pub fn builtin() -> Result<Self, ProfileError> {
        Self::with_patches(&[])
    }

    /// The built-in profiles with configuration patches applied in order. A patch for a name
    /// no built-in has adds a profile (it must then say at least `launch.command`).
    pub fn with_patches(patches: &[SourcedPatch]) -> Result<Self, ProfileError> {
        let mut manifests: BTreeMap<String, (Manifest, String, String)> = BTreeMap::new();
        for (file, text) in BUILTIN {
            let label = format!("built-in {file}");
            let manifest: Manifest =
                toml::from_str(text).map_err(|e| toml_error(&label, text, &e))?;
            manifests.insert(manifest.name.clone(), (manifest, label, (*text).to_owned()));
        }
        for sourced in patches {
            let entry = manifests.entry(sourced.profile.clone()).or_insert_with(|| {
                (
                    Manifest {
                        engine: ENGINE_VERSION,
                        name: sourced.profile.clone(),
                        description: String::new(),
                        verified_version: None,
                        launch: manifest::Launch::default(),
                        input: manifest::InputSpec::default(),
                        rules: Vec::new(),
                        dialogs: Vec::new(),
                    },
                    sourced.file.clone(),
                    sourced.text.clone(),
                )
            });
            entry.0.apply(&sourced.patch).map_err(|e| ProfileError {
                file: sourced.file.clone(),
                line: None,
                rule: None,
                message: e.to_string(),
            })?;
            // Errors in what the patch brought are located in the patch's own file.
            entry.1 = sourced.file.clone();
            entry.2 = sourced.text.clone();
        }
        let mut profiles = BTreeMap::new();
        for (name, (manifest, file, text)) in manifests {
            profiles.insert(name, Profile::compile(manifest, &file, &text)?);
        }
        Ok(Self { profiles })
    }

    /// The profile called `name`.
    pub fn get(&self, name: &str) -> Result<&Profile, UnknownAgent> {
        self.profiles.get(name).ok_or_else(|| UnknownAgent {
            name: name.to_owned(),
            known: self.profiles.keys().cloned().collect(),
        })
    }

    /// Every profile, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.values()
    }
}

#[cfg(test)]
mod tests;
