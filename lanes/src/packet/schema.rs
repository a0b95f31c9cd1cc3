//! The fields of a packet (a lane, or `defaults`): their types and per-value checks.
//!
//! Reading an object never stops at the first problem: every bad field is reported at its JSON
//! path and marked [`Slot::Invalid`], so later checks (a missing objective, a required
//! `scope_path`) do not pile further errors on a field that is already reported.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::json::{Json, index_path, key_path};
use super::names::{
    NAME_PATTERN, did_you_mean, is_valid_lane_name, own_branch_problem, ref_name_problem,
};
use super::paths::{PathRule, Roots};
use super::{PacketError, TaskResource, TaskScope};

/// A checked value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Text(String),
    Texts(Vec<String>),
    Path(PathBuf),
    Paths(Vec<PathBuf>),
    Scope(TaskScope),
    Resources(Vec<TaskResource>),
    Seconds(u64),
    Dollars(f64),
    LevelCommands(BTreeMap<String, Vec<String>>),
}

/// A field that was present in an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Slot {
    /// `null`: not set here (in a lane, it also cancels the value from `defaults`).
    Null,
    /// A valid value.
    Set(Val),
    /// Present but wrong; already reported.
    Invalid,
}

/// How a field's value is checked.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A lane name.
    LaneName,
    /// Free text that may end up in the prompt: not blank; newline and tab allowed.
    Text,
    /// One line of text: not blank, no control characters.
    Line,
    /// An agent (profile) name: not blank, no whitespace.
    Agent,
    /// A git branch name (a base).
    RefName,
    /// The lane's own branch: a branch name as `git branch` takes it, so not `HEAD` and not a
    /// full ref (`refs/heads/x` would make `refs/heads/refs/heads/x`).
    Branch,
    /// `workspace`, `module`, `single_file` or `custom`.
    Scope,
    /// A list of [`Kind::Text`].
    Texts,
    /// A list of `{kind, value}` objects.
    Resources,
    /// A path.
    Path(PathRule),
    /// A list of paths.
    Paths(PathRule),
    /// Free text that, read as a path, must also obey the path rules (`repo`).
    TextPath,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A whole number of seconds, at least 1.
    Seconds,
    /// `{level: [command, …]}` for the green levels.
    LevelCommands,
    /// An amount of US dollars, more than 0.
    Dollars,
}

/// The lane merge policies (`merge_policy`).
pub const MERGE_POLICIES: &[&str] = &["merge_forward", "rebase", "warn", "block"];

/// The permission profiles (`permission_profile`, claw-code's names; `docs/permissions.md`).
pub const PERMISSION_PROFILES: &[&str] = &["read-only", "workspace-write", "danger-full-access"];

/// The green levels, lowest first (`verify_on_finish`, the keys of `verify_commands`).
pub const GREEN_LEVELS: &[&str] = &["targeted", "package", "workspace", "merge_ready"];

struct FieldDef {
    name: &'static str,
    kind: Kind,
    /// Why it cannot be in `defaults`, when it cannot.
    lane_only: Option<&'static str>,
}

const PER_LANE: &str = "each lane needs its own";

/// Every field a packet or lane may have, in the order the docs list them.
const FIELDS: &[FieldDef] = &[
    field("name", Kind::LaneName, Some(PER_LANE)),
    field("prompt", Kind::Text, Some(PER_LANE)),
    field("objective", Kind::Text, Some(PER_LANE)),
    field("agent", Kind::Agent, None),
    field("base", Kind::RefName, None),
    field("branch", Kind::Branch, Some(PER_LANE)),
    field("worktree", Kind::Path(PathRule::BelowRoots), Some(PER_LANE)),
    field("trusted_roots", Kind::Paths(PathRule::InsideRoots), None),
    field("scope", Kind::Scope, None),
    field("scope_path", Kind::Path(PathRule::InsideRepo), None),
    field("repo", Kind::TextPath, None),
    field("branch_policy", Kind::Text, None),
    field("acceptance_tests", Kind::Texts, None),
    field("acceptance_criteria", Kind::Texts, None),
    field("resources", Kind::Resources, None),
    field("model", Kind::Line, None),
    field("provider", Kind::Line, None),
    field(
        "permission_profile",
        Kind::Choice(PERMISSION_PROFILES),
        None,
    ),
    field("commit_policy", Kind::Text, None),
    field("reporting_contract", Kind::Text, None),
    field("reporting_targets", Kind::Texts, None),
    field("escalation_policy", Kind::Text, None),
    field("recovery_policy", Kind::Text, None),
    field("verification_plan", Kind::Texts, None),
    field("merge_policy", Kind::Choice(MERGE_POLICIES), None),
    field("verify_commands", Kind::LevelCommands, None),
    field("verify_timeout_secs", Kind::Seconds, None),
    field("verify_on_finish", Kind::Choice(GREEN_LEVELS), None),
    field("sandbox", Kind::Choice(crate::sandbox::SANDBOX_MODES), None),
    field("budget_usd", Kind::Dollars, None),
];

const fn field(name: &'static str, kind: Kind, lane_only: Option<&'static str>) -> FieldDef {
    FieldDef {
        name,
        kind,
        lane_only,
    }
}

/// Every field name, for "did you mean" hints.
pub(crate) fn field_names() -> Vec<&'static str> {
    FIELDS.iter().map(|f| f.name).collect()
}

/// Resource kinds whose `value` is a path and follows the path rules.
pub(crate) const PATH_RESOURCE_KINDS: &[&str] = &["file", "dir", "directory", "path"];

/// The fields of one object (a lane or `defaults`), by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields {
    pub(crate) map: BTreeMap<&'static str, Slot>,
}

impl Fields {
    /// This object's fields with `defaults` under them: a field the lane has (even `null`)
    /// wins; lists are replaced, not appended.
    pub(crate) fn over(mut self, defaults: Option<&Fields>) -> Fields {
        if let Some(defaults) = defaults {
            for (name, slot) in &defaults.map {
                self.map.entry(name).or_insert_with(|| slot.clone());
            }
        }
        self
    }

    pub(crate) fn is_invalid(&self, name: &str) -> bool {
        matches!(self.map.get(name), Some(Slot::Invalid))
    }

    pub(crate) fn text(&self, name: &str) -> Option<String> {
        match self.map.get(name) {
            Some(Slot::Set(Val::Text(t))) => Some(t.clone()),
            _ => None,
        }
    }

    pub(crate) fn texts(&self, name: &str) -> Vec<String> {
        match self.map.get(name) {
            Some(Slot::Set(Val::Texts(t))) => t.clone(),
            _ => Vec::new(),
        }
    }

    pub(crate) fn path(&self, name: &str) -> Option<PathBuf> {
        match self.map.get(name) {
            Some(Slot::Set(Val::Path(p))) => Some(p.clone()),
            _ => None,
        }
    }

    pub(crate) fn paths(&self, name: &str) -> Vec<PathBuf> {
        match self.map.get(name) {
            Some(Slot::Set(Val::Paths(p))) => p.clone(),
            _ => Vec::new(),
        }
    }

    pub(crate) fn seconds(&self, name: &str) -> Option<u64> {
        match self.map.get(name) {
            Some(Slot::Set(Val::Seconds(n))) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn dollars(&self, name: &str) -> Option<f64> {
        match self.map.get(name) {
            Some(Slot::Set(Val::Dollars(n))) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn level_commands(&self, name: &str) -> BTreeMap<String, Vec<String>> {
        match self.map.get(name) {
            Some(Slot::Set(Val::LevelCommands(m))) => m.clone(),
            _ => BTreeMap::new(),
        }
    }

    pub(crate) fn scope(&self) -> Option<TaskScope> {
        match self.map.get("scope") {
            Some(Slot::Set(Val::Scope(s))) => Some(*s),
            _ => None,
        }
    }

    pub(crate) fn resources(&self) -> Vec<TaskResource> {
        match self.map.get("resources") {
            Some(Slot::Set(Val::Resources(r))) => r.clone(),
            _ => Vec::new(),
        }
    }
}

/// Reads one object's fields, reporting every problem at its path. `in_defaults` refuses
/// the fields each lane must set itself.
pub(crate) fn read_object(
    entries: &[(String, Json)],
    path: &str,
    in_defaults: bool,
    roots: &Roots,
    errors: &mut Vec<PacketError>,
) -> Fields {
    let mut fields = Fields::default();
    for (key, value) in entries {
        let at = key_path(path, key);
        let Some(def) = FIELDS.iter().find(|f| f.name == key) else {
            let hint = did_you_mean(key, &field_names())
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            errors.push(PacketError::new(at, format!("unknown field `{key}`{hint}")));
            continue;
        };
        if in_defaults && let Some(why) = def.lane_only {
            errors.push(PacketError::new(
                at,
                format!("`{key}` cannot be set in `defaults`: {why}"),
            ));
            continue;
        }
        let slot = match value {
            Json::Null => Slot::Null,
            _ => match read_value(def.kind, value, &at, roots, errors) {
                Some(val) => Slot::Set(val),
                None => Slot::Invalid,
            },
        };
        fields.map.insert(def.name, slot);
    }
    fields
}

/// Checks one non-null value; `None` when it was reported as wrong.
fn read_value(
    kind: Kind,
    value: &Json,
    at: &str,
    roots: &Roots,
    errors: &mut Vec<PacketError>,
) -> Option<Val> {
    match kind {
        Kind::LaneName => {
            let s = expect_string(value, at, errors)?;
            if is_valid_lane_name(s) {
                Some(Val::Text(s.to_owned()))
            } else {
                fail(
                    errors,
                    at,
                    format!(
                        "invalid lane name {s:?}: it must match {NAME_PATTERN} (lowercase letters, \
                     digits, `.`, `_`, `-`; starting with a letter or digit; at most 63 \
                     characters)"
                    ),
                )
            }
        }
        Kind::Text => read_text(value, at, errors).map(Val::Text),
        Kind::Line => {
            let s = expect_string(value, at, errors)?;
            if s.trim().is_empty() {
                fail(errors, at, "must not be empty".to_owned())
            } else if let Some(c) = s.chars().find(|c| c.is_control()) {
                fail(
                    errors,
                    at,
                    format!(
                        "must be one line without control characters (found {})",
                        c.escape_default()
                    ),
                )
            } else {
                Some(Val::Text(s.to_owned()))
            }
        }
        Kind::Agent => {
            let s = expect_string(value, at, errors)?;
            if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
                fail(
                    errors,
                    at,
                    format!(
                        "invalid agent {s:?}: an agent is a profile name such as `claude`, without \
                     spaces"
                    ),
                )
            } else {
                Some(Val::Text(s.to_owned()))
            }
        }
        Kind::RefName => {
            let s = expect_string(value, at, errors)?;
            match ref_name_problem(s) {
                None => Some(Val::Text(s.to_owned())),
                Some(why) => fail(errors, at, format!("invalid branch name {s:?}: {why}")),
            }
        }
        Kind::Branch => {
            let s = expect_string(value, at, errors)?;
            match ref_name_problem(s).or_else(|| own_branch_problem(s)) {
                None => Some(Val::Text(s.to_owned())),
                Some(why) => fail(errors, at, format!("invalid branch name {s:?}: {why}")),
            }
        }
        Kind::Scope => {
            let s = expect_string(value, at, errors)?;
            match TaskScope::ALL.iter().find(|scope| scope.as_str() == s) {
                Some(scope) => Some(Val::Scope(*scope)),
                None => {
                    let names: Vec<&str> = TaskScope::ALL.iter().map(|s| s.as_str()).collect();
                    let hint = did_you_mean(s, &names)
                        .map(|n| format!("; did you mean `{n}`?"))
                        .unwrap_or_default();
                    fail(
                        errors,
                        at,
                        format!(
                            "invalid scope {s:?}: expected one of `workspace`, `module`, \
                         `single_file`, `custom`{hint}"
                        ),
                    )
                }
            }
        }
        Kind::Texts => {
            let items = expect_array(value, at, errors)?;
            let mut out = Vec::new();
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                match read_text(item, &index_path(at, i), errors) {
                    Some(t) => out.push(t),
                    None => ok = false,
                }
            }
            ok.then_some(Val::Texts(out))
        }
        Kind::Resources => {
            let items = expect_array(value, at, errors)?;
            let mut out = Vec::new();
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                match read_resource(item, &index_path(at, i), roots, errors) {
                    Some(r) => out.push(r),
                    None => ok = false,
                }
            }
            ok.then_some(Val::Resources(out))
        }
        Kind::Path(rule) => {
            let s = expect_string(value, at, errors)?;
            match roots.resolve(s, rule) {
                Ok(p) => Some(Val::Path(p)),
                Err(message) => fail(errors, at, message),
            }
        }
        Kind::Paths(rule) => {
            let items = expect_array(value, at, errors)?;
            let mut out = Vec::new();
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                let item_at = index_path(at, i);
                let Some(s) = expect_string(item, &item_at, errors) else {
                    ok = false;
                    continue;
                };
                match roots.resolve(s, rule) {
                    Ok(p) => out.push(p),
                    Err(message) => {
                        errors.push(PacketError::new(item_at, message));
                        ok = false;
                    }
                }
            }
            ok.then_some(Val::Paths(out))
        }
        Kind::Choice(words) => {
            let s = expect_string(value, at, errors)?;
            if words.contains(&s) {
                Some(Val::Text(s.to_owned()))
            } else {
                fail(
                    errors,
                    at,
                    format!("invalid value {s:?}: expected one of {}", quoted(words)),
                )
            }
        }
        Kind::Seconds => match value {
            Json::Number(n) if n.as_u64().is_some_and(|n| n >= 1) => n.as_u64().map(Val::Seconds),
            other => fail(
                errors,
                at,
                format!(
                    "expected a whole number of seconds (at least 1), found {}",
                    other.kind()
                ),
            ),
        },
        Kind::Dollars => match value {
            Json::Number(n) if n.as_f64().is_some_and(|n| n > 0.0 && n.is_finite()) => {
                n.as_f64().map(Val::Dollars)
            }
            other => fail(
                errors,
                at,
                format!(
                    "expected an amount of US dollars (a number above 0), found {}",
                    describe_number(other)
                ),
            ),
        },
        Kind::LevelCommands => {
            let Json::Object(entries) = value else {
                return fail(
                    errors,
                    at,
                    format!(
                        "expected an object {{level: [command, …]}}, found {}",
                        value.kind()
                    ),
                );
            };
            let mut out = BTreeMap::new();
            let mut ok = true;
            for (level, commands) in entries {
                let level_at = key_path(at, level);
                if !GREEN_LEVELS.contains(&level.as_str()) {
                    errors.push(PacketError::new(
                        level_at,
                        format!(
                            "unknown level `{level}`: expected one of {}",
                            quoted(GREEN_LEVELS)
                        ),
                    ));
                    ok = false;
                    continue;
                }
                match read_value(Kind::Texts, commands, &level_at, roots, errors) {
                    Some(Val::Texts(list)) => {
                        out.insert(level.clone(), list);
                    }
                    _ => ok = false,
                }
            }
            ok.then_some(Val::LevelCommands(out))
        }
        Kind::TextPath => {
            let s = read_text(value, at, errors)?;
            match roots.resolve(&s, PathRule::InsideRoots) {
                Ok(_) => Some(Val::Text(s)),
                Err(message) => fail(errors, at, message),
            }
        }
    }
}

fn quoted(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fail<T>(errors: &mut Vec<PacketError>, at: &str, message: String) -> Option<T> {
    errors.push(PacketError::new(at, message));
    None
}

/// A `{kind, value}` resource.
fn read_resource(
    value: &Json,
    at: &str,
    roots: &Roots,
    errors: &mut Vec<PacketError>,
) -> Option<TaskResource> {
    let Json::Object(entries) = value else {
        errors.push(PacketError::new(
            at,
            format!(
                "expected an object {{\"kind\", \"value\"}}, found {}",
                value.kind()
            ),
        ));
        return None;
    };
    let mut kind = None;
    let mut val = None;
    let mut ok = true;
    for (key, v) in entries {
        let key_at = key_path(at, key);
        match key.as_str() {
            "kind" => match read_text(v, &key_at, errors) {
                Some(k) => kind = Some(k),
                None => ok = false,
            },
            "value" => match read_text(v, &key_at, errors) {
                Some(t) => val = Some((t, key_at)),
                None => ok = false,
            },
            _ => {
                let hint = did_you_mean(key, &["kind", "value"])
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                errors.push(PacketError::new(
                    key_at,
                    format!("unknown field `{key}`{hint}"),
                ));
                ok = false;
            }
        }
    }
    for (name, present) in [("kind", kind.is_some()), ("value", val.is_some())] {
        let reported = entries.iter().any(|(k, _)| k == name);
        if !present && !reported {
            errors.push(PacketError::new(at, format!("missing field `{name}`")));
            ok = false;
        }
    }
    let (kind, (val, val_at)) = (kind?, val?);
    if PATH_RESOURCE_KINDS.contains(&kind.as_str())
        && let Err(message) = roots.resolve(&val, PathRule::InsideRoots)
    {
        errors.push(PacketError::new(val_at, message));
        ok = false;
    }
    ok.then_some(TaskResource { kind, value: val })
}

/// Free text: a string, not blank, no control characters but newline and tab.
fn read_text(value: &Json, at: &str, errors: &mut Vec<PacketError>) -> Option<String> {
    let s = expect_string(value, at, errors)?;
    if s.trim().is_empty() {
        errors.push(PacketError::new(at, "must not be empty"));
        return None;
    }
    if let Some((i, c)) = s
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && *c != '\n' && *c != '\t')
    {
        errors.push(PacketError::new(
            at,
            format!(
                "contains a control character ({}) at character {i}; only newline and tab are \
                 allowed",
                c.escape_default()
            ),
        ));
        return None;
    }
    Some(s.to_owned())
}

fn expect_string<'a>(value: &'a Json, at: &str, errors: &mut Vec<PacketError>) -> Option<&'a str> {
    match value {
        Json::String(s) => Some(s),
        other => {
            errors.push(PacketError::new(
                at,
                format!("expected a string, found {}", other.kind()),
            ));
            None
        }
    }
}

fn expect_array<'a>(
    value: &'a Json,
    at: &str,
    errors: &mut Vec<PacketError>,
) -> Option<&'a [Json]> {
    match value {
        Json::Array(items) => Some(items),
        other => {
            errors.push(PacketError::new(
                at,
                format!("expected an array, found {}", other.kind()),
            ));
            None
        }
    }
}

/// A value that is not a budget, as the error names it: the number itself, or its kind.
fn describe_number(value: &Json) -> String {
    match value {
        Json::Number(n) => n.to_string(),
        other => other.kind().to_owned(),
    }
}
