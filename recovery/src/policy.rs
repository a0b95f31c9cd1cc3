//! Executable policy: TOML rules that map a lane's conditions to actions.
//!
//! This module owns the policy file (`docs/policy.md`): parsing it, validating it at load —
//! every problem reported at once, each naming the rule (by index and name) or table and the
//! key — and evaluating it against [`LaneFacts`]. One file holds the whole recovery
//! configuration: `[[rules]]`, `[[hooks]]`, recipe parameters (`[recipes.NAME]`), restart
//! pacing (`[restart]`) and the stall time (`[stall]`). [`Policy::defaults`] is
//! `docs/policy-defaults.toml`, what a new user gets.
//!
//! **Evaluation order.** Rules are tried in file order. A matching rule whose action is
//! `notify` adds its decision and evaluation goes on; the first matching rule with any other
//! action decides, and evaluation stops there. So [`Policy::evaluate`] returns the notify
//! decisions met on the way, then at most one deciding action, last. The evaluation is pure:
//! the supervisor acts on a decision once per lane state (recover decisions are further
//! limited by the recovery ledger).

use std::fmt;
use std::time::Duration;

use clawpool_lanes::{BlockedSubphase, FailureClass, LaneStatus};
use serde::Serialize;

use crate::duration::format_duration;
use crate::facts::{
    Freshness, Green, GreenLevel, LaneFacts, RecoveryStatus, wire_name, wire_names,
};
use crate::hooks::HookSpec;
use crate::permissions::PermissionSettings;
use crate::recipe::{RecipeBook, Trigger};
use crate::restart::RestartPolicy;

mod parse;
mod parse_permissions;

/// The shipped default policy (`docs/policy-defaults.toml`).
pub const DEFAULT_POLICY: &str = include_str!("../../docs/policy-defaults.toml");

/// Where a problem in a policy file is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "in", rename_all = "snake_case")]
pub enum Location {
    /// The file as a whole (not TOML, an unknown top-level key).
    Document,
    /// A `[[rules]]` entry.
    Rule {
        /// Its position, from 1.
        index: usize,
        /// Its name, if it has a usable one.
        name: Option<String>,
    },
    /// A `[[hooks]]` entry.
    Hook {
        /// Its position, from 1.
        index: usize,
        /// Its name, if it has a usable one.
        name: Option<String>,
    },
    /// A `[recipes.NAME]` table.
    Recipe {
        /// The recipe's name as written.
        name: String,
    },
    /// Another table (`[restart]`, `[stall]`, `[permissions]`).
    Table {
        /// The table.
        name: String,
    },
    /// A `[[permissions.entries]]` entry.
    PermissionEntry {
        /// Its position, from 1.
        index: usize,
    },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entry = |f: &mut fmt::Formatter<'_>, kind, index, name: &Option<String>| match name {
            Some(name) => write!(f, "{kind} #{index} {name:?}"),
            None => write!(f, "{kind} #{index}"),
        };
        match self {
            Location::Document => f.write_str("policy"),
            Location::Rule { index, name } => entry(f, "rule", index, name),
            Location::Hook { index, name } => entry(f, "hook", index, name),
            Location::Recipe { name } => write!(f, "[recipes.{name}]"),
            Location::Table { name } => write!(f, "[{name}]"),
            Location::PermissionEntry { index } => write!(f, "[[permissions.entries]] #{index}"),
        }
    }
}

/// One problem found in a policy file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Where.
    pub at: Location,
    /// The key, dotted from the entry (`when.failure`, `then.recipe`, `timeout`); empty for the
    /// entry or file as a whole.
    pub key: String,
    /// What is wrong, and what would be accepted.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.at, self.message)
        } else {
            write!(f, "{}: {}: {}", self.at, self.key, self.message)
        }
    }
}

/// A policy file that cannot be used: every problem in it, each on its own line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct PolicyError {
    /// The file (or other source) the policy came from.
    pub source_name: String,
    /// Every problem, in file order.
    pub problems: Vec<Problem>,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}: {problem}", self.source_name)?;
        }
        Ok(())
    }
}

/// What a rule does when it matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Run a recovery recipe (subject to the ledger's limits).
    Recover {
        /// The recipe.
        recipe: String,
    },
    /// Merge the lane's base into its branch.
    MergeForward,
    /// Run verification up to a level.
    Verify {
        /// The level (`targeted`, `package`, `workspace`, `merge_ready`).
        level: GreenLevel,
    },
    /// Run a hook with the lane's facts (does not decide; evaluation goes on).
    Notify {
        /// The hook's name (a `[[hooks]]` entry).
        hook: String,
    },
    /// Close the lane out: stop its worker and mark it done.
    CloseOut,
    /// Hand the lane to a person: `lane.blocked` with the reason and next action.
    Escalate {
        /// Why.
        reason: String,
        /// What the person should do; `{lane}` stands for the lane's name.
        next_action: String,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Recover { recipe } => write!(f, "recover with {recipe}"),
            Action::MergeForward => f.write_str("merge_forward"),
            Action::Verify { level } => write!(f, "verify up to {level}"),
            Action::Notify { hook } => write!(f, "notify {hook}"),
            Action::CloseOut => f.write_str("close_out"),
            Action::Escalate { reason, .. } => write!(f, "escalate: {reason}"),
        }
    }
}

/// The conditions of a rule (`when`); every one given must hold. An absent condition holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions {
    /// The lane's status is one of these.
    pub status: Option<Vec<LaneStatus>>,
    /// Its subphase is one of these (so it is blocked).
    pub subphase: Option<Vec<BlockedSubphase>>,
    /// Its failure class is one of these.
    pub failure: Option<Vec<FailureClass>>,
    /// The classified recovery situation is one of these.
    pub trigger: Option<Vec<Trigger>>,
    /// Its green level is one of these.
    pub green: Option<Vec<Green>>,
    /// Its green level is at least this.
    pub green_at_least: Option<Green>,
    /// Its green level is below this.
    pub green_below: Option<Green>,
    /// Its branch freshness is one of these.
    pub freshness: Option<Vec<Freshness>>,
    /// Its recovery status is one of these.
    pub recovery: Option<Vec<RecoveryStatus>>,
    /// The recipe whose attempts `attempts_*` count (default: the rule's `recover` recipe).
    pub attempts_recipe: Option<String>,
    /// Fewer attempts than this.
    pub attempts_below: Option<u32>,
    /// At least this many attempts.
    pub attempts_at_least: Option<u32>,
    /// In its current state at least this long.
    pub age_at_least: Option<Duration>,
    /// In its current state less than this long.
    pub age_below: Option<Duration>,
    /// Without progress at least this long.
    pub idle_at_least: Option<Duration>,
    /// Without progress less than this long.
    pub idle_below: Option<Duration>,
}

/// The keys a rule's `when` may have.
pub const WHEN_KEYS: [&str; 16] = [
    "status",
    "subphase",
    "failure",
    "trigger",
    "green",
    "green_at_least",
    "green_below",
    "freshness",
    "recovery",
    "attempts_recipe",
    "attempts_below",
    "attempts_at_least",
    "age_at_least",
    "age_below",
    "idle_at_least",
    "idle_below",
];

/// One condition checked against a lane, for `clawpool policy explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConditionCheck {
    /// The condition as written (`failure = worker_crashed`, `idle_at_least = 10m`).
    pub condition: String,
    /// It holds.
    pub met: bool,
    /// The lane's value that decided (`failure is worker_crashed`, `idle for 2m`).
    pub why: String,
}

impl fmt::Display for ConditionCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.met { "met    " } else { "not met" };
        write!(f, "{mark} {} ({})", self.condition, self.why)
    }
}

/// A policy rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Its position in the file, from 1.
    pub index: usize,
    /// Its name (unique in the file).
    pub name: String,
    /// What it is for, if the file says.
    pub description: Option<String>,
    /// When it applies.
    pub when: Conditions,
    /// What it does.
    pub then: Action,
}

impl Rule {
    /// The recipe whose attempts the rule's `attempts_*` conditions count.
    pub fn attempts_recipe(&self) -> Option<&str> {
        self.when.attempts_recipe.as_deref().or(match &self.then {
            Action::Recover { recipe } => Some(recipe.as_str()),
            _ => None,
        })
    }

    /// Every condition of the rule checked against `facts`, in `when` key order.
    pub fn check(&self, facts: &LaneFacts) -> Vec<ConditionCheck> {
        let c = &self.when;
        let mut checks = Vec::new();
        set_check(&mut checks, "status", &c.status, facts.status, "lane is");
        match &c.subphase {
            None => {}
            Some(wanted) => checks.push(match facts.subphase {
                Some(s) => ConditionCheck {
                    condition: set_text("subphase", wanted),
                    met: wanted.contains(&s),
                    why: format!("subphase is {}", wire_name(&s)),
                },
                None => ConditionCheck {
                    condition: set_text("subphase", wanted),
                    met: false,
                    why: "no subphase (not blocked)".to_owned(),
                },
            }),
        }
        option_check(&mut checks, "failure", &c.failure, facts.failure, "failure");
        option_check(&mut checks, "trigger", &c.trigger, facts.trigger, "trigger");
        set_check(
            &mut checks,
            "green",
            &c.green,
            facts.green,
            "green level is",
        );
        if let Some(level) = c.green_at_least {
            checks.push(ConditionCheck {
                condition: format!("green_at_least = {level}"),
                met: facts.green >= level,
                why: format!("green level is {}", facts.green),
            });
        }
        if let Some(level) = c.green_below {
            checks.push(ConditionCheck {
                condition: format!("green_below = {level}"),
                met: facts.green < level,
                why: format!("green level is {}", facts.green),
            });
        }
        set_check(
            &mut checks,
            "freshness",
            &c.freshness,
            facts.freshness,
            "branch is",
        );
        set_check(
            &mut checks,
            "recovery",
            &c.recovery,
            facts.recovery,
            "recovery is",
        );
        if c.attempts_below.is_some() || c.attempts_at_least.is_some() {
            let recipe = self.attempts_recipe().unwrap_or_default();
            let n = facts.attempts_of(recipe);
            let why = format!("{recipe} has had {n} attempt(s)");
            if let Some(below) = c.attempts_below {
                checks.push(ConditionCheck {
                    condition: format!("attempts_below = {below}"),
                    met: n < below,
                    why: why.clone(),
                });
            }
            if let Some(at_least) = c.attempts_at_least {
                checks.push(ConditionCheck {
                    condition: format!("attempts_at_least = {at_least}"),
                    met: n >= at_least,
                    why,
                });
            }
        }
        let age = facts.seconds_in_state;
        let idle = facts.seconds_since_progress;
        let in_state = format!("in state for {}", format_duration(Duration::from_secs(age)));
        let no_progress = format!(
            "no progress for {}",
            format_duration(Duration::from_secs(idle))
        );
        for (key, bound, value, why, at_least) in [
            ("age_at_least", c.age_at_least, age, &in_state, true),
            ("age_below", c.age_below, age, &in_state, false),
            ("idle_at_least", c.idle_at_least, idle, &no_progress, true),
            ("idle_below", c.idle_below, idle, &no_progress, false),
        ] {
            if let Some(bound) = bound {
                let secs = bound.as_secs();
                checks.push(ConditionCheck {
                    condition: format!("{key} = {}", format_duration(bound)),
                    met: if at_least {
                        value >= secs
                    } else {
                        value < secs
                    },
                    why: why.clone(),
                });
            }
        }
        checks
    }

    /// Every condition holds for `facts`.
    pub fn matches(&self, facts: &LaneFacts) -> bool {
        self.check(facts).iter().all(|c| c.met)
    }
}

fn set_text<T: Serialize>(key: &str, wanted: &[T]) -> String {
    match wanted {
        [one] => format!("{key} = {}", wire_name(one)),
        many => format!("{key} in [{}]", wire_names(many)),
    }
}

fn set_check<T: Serialize + PartialEq>(
    checks: &mut Vec<ConditionCheck>,
    key: &str,
    wanted: &Option<Vec<T>>,
    value: T,
    what: &str,
) {
    if let Some(wanted) = wanted {
        checks.push(ConditionCheck {
            condition: set_text(key, wanted),
            met: wanted.contains(&value),
            why: format!("{what} {}", wire_name(&value)),
        });
    }
}

fn option_check<T: Serialize + PartialEq>(
    checks: &mut Vec<ConditionCheck>,
    key: &str,
    wanted: &Option<Vec<T>>,
    value: Option<T>,
    what: &str,
) {
    if let Some(wanted) = wanted {
        checks.push(match value {
            Some(value) => ConditionCheck {
                condition: set_text(key, wanted),
                met: wanted.contains(&value),
                why: format!("{what} is {}", wire_name(&value)),
            },
            None => ConditionCheck {
                condition: set_text(key, wanted),
                met: false,
                why: format!("no {what}"),
            },
        });
    }
}

/// What a matching rule contributes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The rule's name.
    pub rule: String,
    /// Its action.
    pub action: Action,
}

/// What became of a rule in an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleOutcome {
    /// It matched and its action decides.
    Decides,
    /// It matched and notifies; evaluation went on.
    Notifies,
    /// It matched, but an earlier rule had already decided.
    Shadowed,
    /// A condition does not hold.
    NotMatched,
}

/// One rule as `clawpool policy explain` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleExplanation {
    /// The rule's name.
    pub rule: String,
    /// Its position, from 1.
    pub index: usize,
    /// Every condition holds.
    pub matched: bool,
    /// What became of it.
    pub outcome: RuleOutcome,
    /// Each condition: met or not, and the lane's value that decided.
    pub reasons: Vec<ConditionCheck>,
    /// Its action.
    pub action: Action,
}

impl fmt::Display for RuleExplanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            RuleOutcome::Decides => "DECIDES",
            RuleOutcome::Notifies => "notifies",
            RuleOutcome::Shadowed => "matched, but an earlier rule decided",
            RuleOutcome::NotMatched => "does not match",
        };
        write!(
            f,
            "#{} {}: {outcome} -> {}",
            self.index, self.rule, self.action
        )?;
        if self.reasons.is_empty() {
            f.write_str("\n    (no conditions: always matches)")?;
        }
        for reason in &self.reasons {
            write!(f, "\n    {reason}")?;
        }
        Ok(())
    }
}

/// A loaded, validated policy: rules, hooks, recipe parameters, restart pacing, stall time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    source_name: String,
    rules: Vec<Rule>,
    hooks: Vec<HookSpec>,
    recipes: RecipeBook,
    stall_after: Duration,
    permissions: PermissionSettings,
}

impl Policy {
    /// The shipped defaults, `docs/policy-defaults.toml` (what a new user gets).
    pub fn defaults() -> Result<Self, PolicyError> {
        Self::from_toml(DEFAULT_POLICY, "docs/policy-defaults.toml")
    }

    /// Reads and validates a policy file's text; `source_name` names it in errors. Every
    /// problem is reported at once.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Self, PolicyError> {
        let mut p = parse::Parser::default();
        let policy = p.document(text);
        match policy {
            Some(policy) if p.problems.is_empty() => Ok(Self {
                source_name: source_name.to_owned(),
                ..policy
            }),
            _ => Err(PolicyError {
                source_name: source_name.to_owned(),
                problems: p.problems,
            }),
        }
    }

    /// Where the policy came from.
    pub fn source_name(&self) -> &str {
        &self.source_name
    }

    /// The rules, in evaluation order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The hooks.
    pub fn hooks(&self) -> &[HookSpec] {
        &self.hooks
    }

    /// The hook called `name`.
    pub fn hook(&self, name: &str) -> Option<&HookSpec> {
        self.hooks.iter().find(|h| h.name == name)
    }

    /// The recipes, with the file's parameters applied.
    pub fn recipes(&self) -> &RecipeBook {
        &self.recipes
    }

    /// How worker restarts are paced.
    pub fn restart_policy(&self) -> &RestartPolicy {
        self.recipes.restart_policy()
    }

    /// How long a running lane may go without progress before it is stalled.
    pub fn stall_after(&self) -> Duration {
        self.stall_after
    }

    /// The tool-permission policy (`[permissions]`, `docs/permissions.md`).
    pub fn permissions(&self) -> &PermissionSettings {
        &self.permissions
    }

    /// The decisions for `facts`: the matching `notify` rules met on the way, then the first
    /// matching rule with any other action (last), if any.
    pub fn evaluate(&self, facts: &LaneFacts) -> Vec<Decision> {
        let mut decisions = Vec::new();
        for rule in &self.rules {
            if rule.matches(facts) {
                decisions.push(Decision {
                    rule: rule.name.clone(),
                    action: rule.then.clone(),
                });
                if !matches!(rule.then, Action::Notify { .. }) {
                    break;
                }
            }
        }
        decisions
    }

    /// The deciding decision for `facts` (not a notify), if any rule decides.
    pub fn decide(&self, facts: &LaneFacts) -> Option<Decision> {
        self.evaluate(facts)
            .into_iter()
            .find(|d| !matches!(d.action, Action::Notify { .. }))
    }

    /// Every rule checked against `facts`: whether it matched, why (condition by condition),
    /// and what became of it.
    pub fn explain(&self, facts: &LaneFacts) -> Vec<RuleExplanation> {
        let mut decided = false;
        self.rules
            .iter()
            .map(|rule| {
                let reasons = rule.check(facts);
                let matched = reasons.iter().all(|c| c.met);
                let outcome = match (matched, decided, &rule.then) {
                    (false, _, _) => RuleOutcome::NotMatched,
                    (true, true, _) => RuleOutcome::Shadowed,
                    (true, false, Action::Notify { .. }) => RuleOutcome::Notifies,
                    (true, false, _) => {
                        decided = true;
                        RuleOutcome::Decides
                    }
                };
                RuleExplanation {
                    rule: rule.name.clone(),
                    index: rule.index,
                    matched,
                    outcome,
                    reasons,
                    action: rule.then.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
