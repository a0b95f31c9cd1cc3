//! Reading a policy file: TOML to [`Policy`], every problem collected with its location and
//! key instead of stopping at the first.

use std::time::Duration;

use clawpool_lanes::LaneStatus;
use serde::Serialize;
use serde::de::DeserializeOwned;
use toml::{Table, Value};

use super::{Action, Conditions, Location, Policy, Problem, Rule, WHEN_KEYS};
use crate::duration::parse_duration;
use crate::facts::{
    ALL_FAILURE_CLASSES, ALL_STATUSES, ALL_SUBPHASES, Freshness, Green, GreenLevel, RecoveryStatus,
    from_wire_name, wire_names,
};
use crate::hooks::{DEFAULT_HOOK_TIMEOUT, EventSelector, HookCommand, HookSpec};
use crate::permissions::PermissionSettings;
use crate::progress::DEFAULT_STALL_AFTER;
use crate::recipe::{RecipeBook, RecipeError, RecipeOverride, Trigger};
use crate::restart::RestartPolicy;

/// The policy file's parser: collects every problem instead of stopping at the first.
#[derive(Default)]
pub(super) struct Parser {
    pub(super) problems: Vec<Problem>,
}

/// Top-level keys of a policy file.
const TOP_KEYS: [&str; 6] = [
    "rules",
    "hooks",
    "recipes",
    "restart",
    "stall",
    "permissions",
];
const RULE_KEYS: [&str; 4] = ["name", "description", "when", "then"];
const HOOK_KEYS: [&str; 4] = ["name", "command", "timeout", "events"];
const RECIPE_KEYS: [&str; 6] = [
    "max_attempts",
    "window",
    "nudge",
    "interrupt_key",
    "wait",
    "progress_timeout",
];
const RESTART_KEYS: [&str; 6] = [
    "initial",
    "factor",
    "max",
    "reset_after_healthy",
    "intensity",
    "intensity_window",
];
const ACTIONS: [&str; 6] = [
    "recover",
    "merge_forward",
    "verify",
    "notify",
    "close_out",
    "escalate",
];

impl Parser {
    pub(super) fn problem(
        &mut self,
        at: &Location,
        key: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.problems.push(Problem {
            at: at.clone(),
            key: key.into(),
            message: message.into(),
        });
    }

    /// Reports keys of `table` not in `known` (prefixing them with `prefix`).
    pub(super) fn unknown_keys(
        &mut self,
        at: &Location,
        prefix: &str,
        table: &Table,
        known: &[&str],
    ) {
        for key in table.keys() {
            if !known.contains(&key.as_str()) {
                self.problem(
                    at,
                    format!("{prefix}{key}"),
                    format!("unknown key; expected one of: {}", known.join(", ")),
                );
            }
        }
    }

    pub(super) fn document(&mut self, text: &str) -> Option<Policy> {
        let doc = match text.parse::<Table>() {
            Ok(doc) => doc,
            Err(e) => {
                self.problem(
                    &Location::Document,
                    "",
                    format!("not valid TOML: {}", e.to_string().trim()),
                );
                return None;
            }
        };
        self.unknown_keys(&Location::Document, "", &doc, &TOP_KEYS);

        let mut restart = RestartPolicy::default();
        let mut restart_intensity_set = false;
        if let Some(value) = doc.get("restart") {
            restart_intensity_set = self.restart(value, &mut restart);
        }
        let mut recipes = RecipeBook::with_restart_policy(restart);
        if let Some(value) = doc.get("recipes") {
            self.recipes(value, &mut recipes, restart_intensity_set);
        }
        let mut stall_after = DEFAULT_STALL_AFTER;
        if let Some(value) = doc.get("stall") {
            let at = Location::Table {
                name: "stall".to_owned(),
            };
            if let Some(table) = self.table(&at, "", value) {
                self.unknown_keys(&at, "", table, &["after"]);
                if let Some(after) = self.duration(&at, "after", table.get("after")) {
                    if after.is_zero() {
                        self.problem(&at, "after", "must be longer than 0s");
                    } else {
                        stall_after = after;
                    }
                }
            }
        }
        let hooks = match doc.get("hooks") {
            Some(value) => self.hooks(value),
            None => Vec::new(),
        };
        let rules = match doc.get("rules") {
            Some(value) => self.rules(value, &recipes, &hooks),
            None => Vec::new(),
        };
        let permissions = match doc.get("permissions") {
            Some(value) => self.permissions(value),
            None => PermissionSettings::default(),
        };
        Some(Policy {
            source_name: String::new(),
            rules,
            hooks,
            recipes,
            stall_after,
            permissions,
        })
    }

    pub(super) fn table<'v>(
        &mut self,
        at: &Location,
        key: &str,
        value: &'v Value,
    ) -> Option<&'v Table> {
        match value {
            Value::Table(table) => Some(table),
            other => {
                self.problem(
                    at,
                    key,
                    format!("must be a table, not {}", other.type_str()),
                );
                None
            }
        }
    }

    /// The array of tables at `value` (`[[rules]]`, `[[hooks]]`).
    fn entries<'v>(&mut self, key: &str, value: &'v Value) -> Vec<&'v Value> {
        match value {
            Value::Array(items) => items.iter().collect(),
            other => {
                self.problem(
                    &Location::Document,
                    key,
                    format!(
                        "must be an array of tables ([[{key}]]), not {}",
                        other.type_str()
                    ),
                );
                Vec::new()
            }
        }
    }

    /// The entry's `name`: a non-empty string, unique among `seen`.
    fn entry_name(
        &mut self,
        kind: &str,
        index: usize,
        table: &Table,
        seen: &mut Vec<String>,
    ) -> Option<String> {
        let unnamed = match kind {
            "hook" => Location::Hook { index, name: None },
            _ => Location::Rule { index, name: None },
        };
        match table.get("name") {
            None => {
                self.problem(&unnamed, "name", "missing; every entry needs a name");
                None
            }
            Some(Value::String(name)) if !name.trim().is_empty() => {
                if let Some(first) = seen.iter().position(|n| n == name) {
                    self.problem(
                        &unnamed,
                        "name",
                        format!("{name:?} is already the name of {kind} #{}", first + 1),
                    );
                }
                seen.push(name.clone());
                Some(name.clone())
            }
            Some(other) => {
                self.problem(
                    &unnamed,
                    "name",
                    format!("must be a non-empty string, not {other}"),
                );
                None
            }
        }
    }

    fn rules(&mut self, value: &Value, recipes: &RecipeBook, hooks: &[HookSpec]) -> Vec<Rule> {
        let mut rules = Vec::new();
        let mut seen = Vec::new();
        for (i, entry) in self.entries("rules", value).into_iter().enumerate() {
            let index = i + 1;
            let Value::Table(table) = entry else {
                self.problem(
                    &Location::Rule { index, name: None },
                    "",
                    format!("must be a table, not {}", entry.type_str()),
                );
                continue;
            };
            let name = self.entry_name("rule", index, table, &mut seen);
            let at = Location::Rule {
                index,
                name: name.clone(),
            };
            self.unknown_keys(&at, "", table, &RULE_KEYS);
            let description = match table.get("description") {
                None => None,
                Some(Value::String(text)) => Some(text.clone()),
                Some(other) => {
                    self.problem(
                        &at,
                        "description",
                        format!("must be a string, not {}", other.type_str()),
                    );
                    None
                }
            };
            let then = match table.get("then") {
                None => {
                    self.problem(&at, "then", "missing; say what the rule does");
                    None
                }
                Some(value) => self
                    .table(&at, "then", value)
                    .and_then(|t| self.action(&at, t, recipes, hooks)),
            };
            let when = match table.get("when") {
                None => {
                    self.problem(
                        &at,
                        "when",
                        "missing; give conditions (when = {} matches every lane)",
                    );
                    None
                }
                Some(value) => self
                    .table(&at, "when", value)
                    .map(|t| self.conditions(&at, t, recipes, then.as_ref())),
            };
            if let (Some(name), Some(when), Some(then)) = (name, when, then) {
                rules.push(Rule {
                    index,
                    name,
                    description,
                    when,
                    then,
                });
            }
        }
        rules
    }

    fn action(
        &mut self,
        at: &Location,
        table: &Table,
        recipes: &RecipeBook,
        hooks: &[HookSpec],
    ) -> Option<Action> {
        let kind = self.string(at, "then.action", table.get("action"), true)?;
        let allowed: &[&str] = match kind.as_str() {
            "recover" => &["action", "recipe"],
            "verify" => &["action", "level"],
            "notify" => &["action", "hook"],
            "escalate" => &["action", "reason", "next_action"],
            "merge_forward" | "close_out" => &["action"],
            other => {
                self.problem(
                    at,
                    "then.action",
                    format!(
                        "unknown action {other:?}; expected one of: {}",
                        ACTIONS.join(", ")
                    ),
                );
                return None;
            }
        };
        for key in table.keys() {
            if !allowed.contains(&key.as_str()) {
                self.problem(
                    at,
                    format!("then.{key}"),
                    if allowed.len() > 1 {
                        format!(
                            "not a parameter of {kind}; it takes: {}",
                            allowed[1..].join(", ")
                        )
                    } else {
                        format!("not a parameter of {kind}; it takes none")
                    },
                );
            }
        }
        match kind.as_str() {
            "recover" => {
                let recipe = self.string(at, "then.recipe", table.get("recipe"), true)?;
                if recipes.get(&recipe).is_none() {
                    self.problem(
                        at,
                        "then.recipe",
                        format!(
                            "unknown recipe {recipe:?}; recipes: {}",
                            recipes.names().join(", ")
                        ),
                    );
                    return None;
                }
                Some(Action::Recover { recipe })
            }
            "verify" => {
                let level = self.string(at, "then.level", table.get("level"), true)?;
                match from_wire_name::<GreenLevel>(&level) {
                    Some(level) => Some(Action::Verify { level }),
                    _ => {
                        self.problem(
                            at,
                            "then.level",
                            format!(
                                "unknown level {level:?}; expected one of: {}",
                                wire_names(&GreenLevel::ALL)
                            ),
                        );
                        None
                    }
                }
            }
            "notify" => {
                let hook = self.string(at, "then.hook", table.get("hook"), true)?;
                if !hooks.iter().any(|h| h.name == hook) {
                    let known: Vec<&str> = hooks.iter().map(|h| h.name.as_str()).collect();
                    self.problem(
                        at,
                        "then.hook",
                        if known.is_empty() {
                            format!("no hook {hook:?}: the file defines no [[hooks]]")
                        } else {
                            format!("no hook {hook:?}; hooks: {}", known.join(", "))
                        },
                    );
                    return None;
                }
                Some(Action::Notify { hook })
            }
            "escalate" => {
                let reason = self.string(at, "then.reason", table.get("reason"), true);
                let next_action =
                    self.string(at, "then.next_action", table.get("next_action"), true);
                Some(Action::Escalate {
                    reason: reason?,
                    next_action: next_action?,
                })
            }
            "merge_forward" => Some(Action::MergeForward),
            _ => Some(Action::CloseOut),
        }
    }

    fn conditions(
        &mut self,
        at: &Location,
        table: &Table,
        recipes: &RecipeBook,
        then: Option<&Action>,
    ) -> Conditions {
        self.unknown_keys(at, "when.", table, &WHEN_KEYS);
        let get = |key: &str| table.get(key);
        let mut c = Conditions {
            status: self.name_set(at, "when.status", get("status"), &ALL_STATUSES, "status"),
            subphase: self.name_set(
                at,
                "when.subphase",
                get("subphase"),
                &ALL_SUBPHASES,
                "subphase",
            ),
            failure: self.name_set(
                at,
                "when.failure",
                get("failure"),
                &ALL_FAILURE_CLASSES,
                "failure class",
            ),
            trigger: self.name_set(at, "when.trigger", get("trigger"), &Trigger::ALL, "trigger"),
            green: self.name_set(at, "when.green", get("green"), &Green::ALL, "green level"),
            green_at_least: self.name_one(
                at,
                "when.green_at_least",
                get("green_at_least"),
                &Green::ALL,
                "green level",
            ),
            green_below: self.name_one(
                at,
                "when.green_below",
                get("green_below"),
                &Green::ALL,
                "green level",
            ),
            freshness: self.name_set(
                at,
                "when.freshness",
                get("freshness"),
                &Freshness::ALL,
                "freshness",
            ),
            recovery: self.name_set(
                at,
                "when.recovery",
                get("recovery"),
                &RecoveryStatus::ALL,
                "recovery status",
            ),
            attempts_recipe: self.string(at, "when.attempts_recipe", get("attempts_recipe"), false),
            attempts_below: self.count(at, "when.attempts_below", get("attempts_below")),
            attempts_at_least: self.count(at, "when.attempts_at_least", get("attempts_at_least")),
            age_at_least: self.duration(at, "when.age_at_least", get("age_at_least")),
            age_below: self.duration(at, "when.age_below", get("age_below")),
            idle_at_least: self.duration(at, "when.idle_at_least", get("idle_at_least")),
            idle_below: self.duration(at, "when.idle_below", get("idle_below")),
        };
        if let Some(recipe) = &c.attempts_recipe
            && recipes.get(recipe).is_none()
        {
            self.problem(
                at,
                "when.attempts_recipe",
                format!(
                    "unknown recipe {recipe:?}; recipes: {}",
                    recipes.names().join(", ")
                ),
            );
            c.attempts_recipe = None;
        }
        let counts_a_recipe = c.attempts_recipe.is_some()
            || matches!(then, Some(Action::Recover { .. }))
            || table.contains_key("attempts_recipe");
        for key in ["attempts_below", "attempts_at_least"] {
            if table.contains_key(key) && !counts_a_recipe && then.is_some() {
                self.problem(
                    at,
                    format!("when.{key}"),
                    "counts no recipe: add attempts_recipe, or use it with action = \"recover\"",
                );
            }
        }
        let never = "never holds together with";
        if let (Some(low), Some(high)) = (c.attempts_at_least, c.attempts_below)
            && low >= high
        {
            self.problem(
                at,
                "when.attempts_below",
                format!("{never} attempts_at_least"),
            );
        }
        if let (Some(low), Some(high)) = (c.green_at_least, c.green_below)
            && low >= high
        {
            self.problem(at, "when.green_below", format!("{never} green_at_least"));
        }
        if let (Some(low), Some(high)) = (c.age_at_least, c.age_below)
            && low >= high
        {
            self.problem(at, "when.age_below", format!("{never} age_at_least"));
        }
        if let (Some(low), Some(high)) = (c.idle_at_least, c.idle_below)
            && low >= high
        {
            self.problem(at, "when.idle_below", format!("{never} idle_at_least"));
        }
        if let (Some(statuses), Some(_)) = (&c.status, &c.subphase)
            && !statuses.contains(&LaneStatus::Blocked)
        {
            self.problem(
                at,
                "when.subphase",
                "only blocked lanes have a subphase; add \"blocked\" to status",
            );
        }
        c
    }

    /// A string value (`required`: report it missing).
    pub(super) fn string(
        &mut self,
        at: &Location,
        key: &str,
        value: Option<&Value>,
        required: bool,
    ) -> Option<String> {
        match value {
            None => {
                if required {
                    self.problem(at, key, "missing");
                }
                None
            }
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(other) => {
                self.problem(at, key, format!("must be a non-empty string, not {other}"));
                None
            }
        }
    }

    /// One name or a list of names, each of `all`.
    fn name_set<T: Serialize + DeserializeOwned + Copy + PartialEq>(
        &mut self,
        at: &Location,
        key: &str,
        value: Option<&Value>,
        all: &[T],
        what: &str,
    ) -> Option<Vec<T>> {
        let value = value?;
        let names: Vec<&Value> = match value {
            Value::Array(items) if items.is_empty() => {
                self.problem(at, key, "an empty list never matches");
                return None;
            }
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        let mut out = Vec::new();
        let mut ok = true;
        for name in names {
            match name
                .as_str()
                .and_then(|n| from_wire_name::<T>(n).filter(|v| all.contains(v)))
            {
                Some(v) => out.push(v),
                None => {
                    ok = false;
                    self.problem(
                        at,
                        key,
                        format!(
                            "unknown {what} {name}; expected one of: {}",
                            wire_names(all)
                        ),
                    );
                }
            }
        }
        ok.then_some(out)
    }

    /// Exactly one name of `all`.
    fn name_one<T: Serialize + DeserializeOwned + Copy + PartialEq>(
        &mut self,
        at: &Location,
        key: &str,
        value: Option<&Value>,
        all: &[T],
        what: &str,
    ) -> Option<T> {
        match value? {
            Value::String(_) => self
                .name_set(at, key, value, all, what)
                .and_then(|v| v.first().copied()),
            other => {
                self.problem(
                    at,
                    key,
                    format!("must be one {what} name, not {}", other.type_str()),
                );
                None
            }
        }
    }

    /// A non-negative integer that fits 32 bits.
    fn count(&mut self, at: &Location, key: &str, value: Option<&Value>) -> Option<u32> {
        match value? {
            Value::Integer(n) => match u32::try_from(*n) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.problem(at, key, format!("must be from 0 to {}, not {n}", u32::MAX));
                    None
                }
            },
            other => {
                self.problem(
                    at,
                    key,
                    format!("must be an integer, not {}", other.type_str()),
                );
                None
            }
        }
    }

    fn duration(&mut self, at: &Location, key: &str, value: Option<&Value>) -> Option<Duration> {
        match value? {
            Value::String(text) => match parse_duration(text) {
                Ok(d) => Some(d),
                Err(e) => {
                    self.problem(at, key, e.to_string());
                    None
                }
            },
            other => {
                self.problem(
                    at,
                    key,
                    format!(
                        "must be a duration string like \"10m\", not {}",
                        other.type_str()
                    ),
                );
                None
            }
        }
    }

    fn hooks(&mut self, value: &Value) -> Vec<HookSpec> {
        let mut hooks = Vec::new();
        let mut seen = Vec::new();
        for (i, entry) in self.entries("hooks", value).into_iter().enumerate() {
            let index = i + 1;
            let Value::Table(table) = entry else {
                self.problem(
                    &Location::Hook { index, name: None },
                    "",
                    format!("must be a table, not {}", entry.type_str()),
                );
                continue;
            };
            let name = self.entry_name("hook", index, table, &mut seen);
            let at = Location::Hook {
                index,
                name: name.clone(),
            };
            self.unknown_keys(&at, "", table, &HOOK_KEYS);
            let command = match table.get("command") {
                None => {
                    self.problem(&at, "command", "missing");
                    None
                }
                Some(Value::String(line)) if !line.trim().is_empty() => {
                    Some(HookCommand::Shell(line.clone()))
                }
                Some(Value::Array(items))
                    if !items.is_empty() && items.iter().all(Value::is_str) =>
                {
                    Some(HookCommand::Argv(
                        items
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect(),
                    ))
                }
                Some(other) => {
                    self.problem(
                        &at,
                        "command",
                        format!(
                            "must be a shell command line or a non-empty list of strings, not {other}"
                        ),
                    );
                    None
                }
            };
            let timeout = match self.duration(&at, "timeout", table.get("timeout")) {
                Some(d) if d.is_zero() => {
                    self.problem(&at, "timeout", "must be longer than 0s");
                    None
                }
                Some(d) => Some(d),
                None if table.contains_key("timeout") => None,
                None => Some(DEFAULT_HOOK_TIMEOUT),
            };
            let patterns: Option<Vec<String>> = match table.get("events") {
                None => Some(Vec::new()),
                Some(Value::String(one)) => Some(vec![one.clone()]),
                Some(Value::Array(items)) if items.iter().all(Value::is_str) => Some(
                    items
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect(),
                ),
                Some(other) => {
                    self.problem(
                        &at,
                        "events",
                        format!("must be a list of event kinds like \"lane.*\", not {other}"),
                    );
                    None
                }
            };
            let events = patterns.and_then(|p| match EventSelector::new(p) {
                Ok(events) => Some(events),
                Err(e) => {
                    self.problem(&at, "events", e.to_string());
                    None
                }
            });
            if let (Some(name), Some(command), Some(timeout), Some(events)) =
                (name, command, timeout, events)
            {
                hooks.push(HookSpec {
                    name,
                    command,
                    timeout,
                    events,
                });
            }
        }
        hooks
    }

    /// Reads `[restart]` into `restart`; returns whether it sets the intensity.
    fn restart(&mut self, value: &Value, restart: &mut RestartPolicy) -> bool {
        let at = Location::Table {
            name: "restart".to_owned(),
        };
        let Some(table) = self.table(&at, "", value) else {
            return false;
        };
        self.unknown_keys(&at, "", table, &RESTART_KEYS);
        let mut set = RestartPolicy::default();
        if let Some(d) = self.duration(&at, "initial", table.get("initial")) {
            set.initial = d;
        }
        if let Some(d) = self.duration(&at, "max", table.get("max")) {
            set.max = d;
        }
        if let Some(d) = self.duration(&at, "reset_after_healthy", table.get("reset_after_healthy"))
        {
            set.reset_after_healthy = d;
        }
        if let Some(d) = self.duration(&at, "intensity_window", table.get("intensity_window")) {
            set.intensity_window = d;
        }
        for (key, target) in [
            ("factor", &mut set.factor),
            ("intensity", &mut set.intensity),
        ] {
            match self.count(&at, key, table.get(key)) {
                Some(0) => self.problem(&at, key, "must be at least 1"),
                Some(n) => *target = n,
                None => {}
            }
        }
        for key in ["initial", "max", "intensity_window"] {
            let zero = match key {
                "initial" => set.initial.is_zero(),
                "max" => set.max.is_zero(),
                _ => set.intensity_window.is_zero(),
            };
            if zero {
                self.problem(&at, key, "must be longer than 0s");
            }
        }
        if set.initial > set.max {
            self.problem(&at, "initial", "is longer than max");
        }
        *restart = set;
        table.contains_key("intensity") || table.contains_key("intensity_window")
    }

    fn recipes(&mut self, value: &Value, book: &mut RecipeBook, restart_intensity_set: bool) {
        let Some(table) = self.table(
            &Location::Table {
                name: "recipes".to_owned(),
            },
            "",
            value,
        ) else {
            return;
        };
        for (name, value) in table {
            let at = Location::Recipe { name: name.clone() };
            let Some(params) = self.table(&at, "", value) else {
                continue;
            };
            let Some(recipe) = book.get(name) else {
                self.problem(
                    &at,
                    "",
                    format!("unknown recipe; recipes: {}", book.names().join(", ")),
                );
                continue;
            };
            let backoff = recipe.backoff;
            self.unknown_keys(&at, "", params, &RECIPE_KEYS);
            let change = RecipeOverride {
                max_attempts: self.count(&at, "max_attempts", params.get("max_attempts")),
                window: self.duration(&at, "window", params.get("window")),
                nudge: self.string(&at, "nudge", params.get("nudge"), false),
                interrupt_key: self.string(
                    &at,
                    "interrupt_key",
                    params.get("interrupt_key"),
                    false,
                ),
                wait: self.duration(&at, "wait", params.get("wait")),
                progress_timeout: self.duration(
                    &at,
                    "progress_timeout",
                    params.get("progress_timeout"),
                ),
            };
            if backoff
                && restart_intensity_set
                && (change.max_attempts.is_some() || change.window.is_some())
            {
                self.problem(
                    &at,
                    "max_attempts",
                    "this recipe's attempts and window are the restart intensity, already set \
                     in [restart]: set them in one place",
                );
                continue;
            }
            if let Err(e) = book.apply_override(name, &change) {
                let key = match &e {
                    RecipeError::BadOverride { key, .. } => (*key).to_owned(),
                    _ => String::new(),
                };
                let message = match e {
                    RecipeError::BadOverride { problem, .. } => problem,
                    other => other.to_string(),
                };
                self.problem(&at, key, message);
            }
        }
    }
}
