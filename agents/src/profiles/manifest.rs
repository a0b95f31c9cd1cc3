//! The on-disk shape of an agent profile (TOML), and of a patch to one from configuration.
//!
//! Every table denies unknown keys, so a typo is an error that names the key and its line
//! (the TOML parser carries the position). A [`ManifestPatch`] has the same shape with every
//! field optional; [`Manifest::apply`] lays one over a profile. Rules and dialogs are merged
//! by name (a patch entry with an existing name replaces it, a new name is added); every other
//! list (`args`, `placeholders`, …) is replaced as a whole; `env` tables are merged key by key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The rule-engine version this build understands; a manifest asking for a newer one is
/// refused rather than half-understood.
pub const ENGINE_VERSION: u32 = 1;

/// A complete profile manifest.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The rule-engine version the manifest was written for.
    pub engine: u32,
    /// The profile name (`claude`, `codex`, …).
    pub name: String,
    /// What the profile is for.
    #[serde(default)]
    pub description: String,
    /// The agent's version the profile was verified on (recordings and end-to-end tests with
    /// the real binary); `clawpool doctor` compares what `COMMAND --version` says with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_version: Option<String>,
    /// How to start the agent.
    pub launch: Launch,
    /// How to find the agent's input line.
    #[serde(default)]
    pub input: InputSpec,
    /// Detection rules.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// Dialogs the agent can show, how to recognise them, and how to answer them.
    #[serde(default)]
    pub dialogs: Vec<DialogSpec>,
}

/// How to start the agent.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The program: a name looked up in `PATH`, or a path.
    pub command: String,
    /// Arguments always passed.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for the agent.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Arguments that pass a task prompt at launch, with `{prompt}` standing for it; empty
    /// when the agent cannot take a prompt at launch (it is then typed).
    #[serde(default)]
    pub prompt_args: Vec<String>,
    /// Arguments that resume the previous session after a restart, when the agent has them.
    #[serde(default)]
    pub resume_args: Vec<String>,
    /// Which trust store to pre-seed for a trusted lane.
    #[serde(default)]
    pub trust_store: TrustStore,
    /// How the agent reports its own state to the lane, besides its screen.
    #[serde(default)]
    pub hooks: AgentHooks,
    /// What the agent must be able to write outside its worktree when it runs sandboxed
    /// (`docs/sandbox.md`): its own state, as `~/…` paths. A path ending in `/` is a folder,
    /// made before the agent starts if it is missing; any other is a file, writable when it
    /// exists.
    #[serde(default)]
    pub sandbox_writes: Vec<String>,
    /// Claude Code's `prefersReducedMotion`, set in the lane's `--settings` file, which its
    /// hooks come in (so with `hooks = "claude"` only; other channels have no such file): a
    /// spinner that does not animate. Nobody watches the animation but clawpool, and it made
    /// a working Claude Code spend three times the CPU (docs/performance.md).
    #[serde(default)]
    pub reduced_motion: bool,
}

/// The channel through which an agent reports facts about itself (`docs/profiles.md`).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum AgentHooks {
    /// None: the screen alone decides.
    #[default]
    None,
    /// Claude Code's hooks, declared in a per-lane `--settings` file (`docs/events.md`).
    Claude,
    /// Codex's app server, owned by the lane on a private Unix socket, the TUI attached to it
    /// with `--remote` and the lane a second client of it (`docs/events.md`).
    CodexAppServer,
}

/// An agent's own record of trusted folders.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum TrustStore {
    /// None: only the dialog is answered.
    #[default]
    None,
    /// Claude Code's `~/.claude.json` (`projects[path].hasTrustDialogAccepted`).
    Claude,
    /// Codex's `~/.codex/config.toml` (`[projects."path"] trust_level`).
    Codex,
    /// gemini-cli's `~/.gemini/trustedFolders.json` (`{"path": "TRUST_FOLDER"}`).
    Gemini,
    /// Qwen Code's `~/.qwen/trustedFolders.json`, in gemini-cli's format (it is a fork).
    Qwen,
}

/// How to find the input line on screen.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// The character a horizontal rule around the input box is drawn with (e.g. `─`). When
    /// set, the input box is the rows between the last two rules (or after the only one).
    #[serde(default)]
    pub rule: Option<String>,
    /// The character of the rule that closes an input box drawn without a top rule, as a
    /// column of rows each starting with `prefix` (opencode: `┃` rows over `╹▀▀▀…`; one corner
    /// glyph may lead the rule). When set, the input box is the run of `prefix` rows right
    /// above the last such rule.
    #[serde(default)]
    pub bottom_rule: Option<String>,
    /// How many rows at the bottom of a `bottom_rule` box belong to the agent (a model or
    /// mode line), not to the draft.
    #[serde(default)]
    pub status_rows: usize,
    /// At most how many rows (blank ones included) may follow the input box's last row down
    /// to the screen's last non-blank row. An agent that keeps its input box at the bottom of
    /// the screen, with only its status rows under it, anchors it there: a box drawn higher up
    /// — inside a notice, in the agent's output — is not its input line, however much it
    /// looks like it (`docs/trust.md`, "The screen"). Unset: the box may be anywhere.
    #[serde(default)]
    pub rows_below: Option<usize>,
    /// The glyph the input line starts with (e.g. `❯`, `›`). Without a rule, the input line is
    /// the last row that starts with it.
    #[serde(default)]
    pub prefix: String,
    /// Regexes for placeholder texts shown in an empty input line (besides dim text, which
    /// never counts as a draft).
    #[serde(default)]
    pub placeholders: Vec<String>,
    /// Keys that empty the input line. Used only to remove text of ours the agent put back
    /// there (Claude Code returns an interrupted prompt to its input line), before the next
    /// text is typed; without them such a lane cannot be given more text.
    #[serde(default)]
    pub clear_keys: Vec<String>,
    /// How long our draft must have been on screen before Enter is pressed (0: at once). For
    /// agents that read an Enter arriving right after pasted text as part of the paste.
    #[serde(default)]
    pub submit_after_ms: u64,
    /// The agent asks where the cursor is (DSR 6) each time it draws its input line, also
    /// after its boot, and its input parser reads the reply as a reply, never as typing
    /// (prompt_toolkit: aider). A PTY worker then keeps answering that one query once a
    /// prompt is in; every other query is answered only while the agent starts
    /// (`docs/terminals.md`, "Queries").
    #[serde(default)]
    pub cursor_reports: bool,
}

/// What a rule's match tells about the agent.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// Still starting up.
    Booting,
    /// Working on a prompt (a spinner, "esc to interrupt").
    Working,
    /// The provider is unreachable and the agent retries.
    ProviderRetry,
    /// The screen is a shell, not the agent.
    Shell,
}

/// One detection rule.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// A unique name, shown as evidence.
    pub name: String,
    /// What a match means.
    pub signal: Signal,
    /// Higher wins when several rules match.
    #[serde(default = "default_rule_priority")]
    pub priority: i32,
    /// Where to look: `screen`, `title`, `input_line`, `above_input[:N]`, `below_input`,
    /// `last_lines:N`.
    pub region: String,
    /// What to look for.
    #[serde(rename = "match")]
    pub matcher: MatcherSpec,
}

fn default_rule_priority() -> i32 {
    50
}

fn default_dialog_priority() -> i32 {
    100
}

/// What to look for in a region.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MatcherSpec {
    /// The region's text contains this.
    Contains(String),
    /// This regex matches the region's text (rows joined with newlines).
    Regex(String),
    /// This regex matches at least one row of the region.
    LineRegex(String),
    /// Every matcher matches.
    All(Vec<MatcherSpec>),
    /// At least one matcher matches.
    Any(Vec<MatcherSpec>),
    /// The matcher does not match.
    Not(Box<MatcherSpec>),
}

/// The kinds of dialog, which decide who may answer.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum DialogKind {
    /// "Do you trust this folder?": answered only for lanes under a trusted root.
    Trust,
    /// Any other dialog before the agent is ready (API key, login, update, …).
    Boot,
    /// A permission question while the agent works.
    ToolPermission,
}

impl DialogKind {
    /// Whether only an agent that is starting asks it: a trust or boot dialog. Once a prompt
    /// is in, text that looks like one is the agent's output (a file it shows, a tool's
    /// result), never a question clawpool answers (`docs/trust.md`, "The screen").
    pub fn boot_only(self) -> bool {
        matches!(self, DialogKind::Trust | DialogKind::Boot)
    }
}

/// Who answers a dialog.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// clawpool answers with the dialog's `answer` choice.
    Auto,
    /// The lane blocks until an operator answers.
    #[default]
    Ask,
    /// Never answered: the lane blocks, and clawpool will not answer it even when asked.
    Never,
}

/// A dialog the agent can show.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DialogSpec {
    /// A unique name.
    pub name: String,
    /// What kind of dialog.
    pub kind: DialogKind,
    /// Higher wins when several rules match.
    #[serde(default = "default_dialog_priority")]
    pub priority: i32,
    /// Where to look.
    pub region: String,
    /// How to recognise it.
    #[serde(rename = "match")]
    pub matcher: MatcherSpec,
    /// Who answers it (for trust dialogs the lane's trusted roots decide instead).
    #[serde(default)]
    pub policy: Policy,
    /// The choice an automatic answer picks.
    #[serde(default)]
    pub answer: Option<String>,
    /// Each choice as a list of steps.
    #[serde(default)]
    pub choices: BTreeMap<String, Vec<StepSpec>>,
}

/// One step of answering a dialog: press keys, type text, or wait for the screen.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// Keys to press, by name (`Down`, `Enter`, `1`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// Text to type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Wait until this matches (on `region`, default `screen`)…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<MatcherSpec>,
    /// …in this region…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// …and keeps matching for this long (some agents redraw a dialog and reset its
    /// highlight just after it first appears)…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_ms: Option<u64>,
    /// …giving up (and starting the answer over) after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A change to a profile from configuration: every field optional.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ManifestPatch {
    /// Replaces the description.
    #[serde(default)]
    pub description: Option<String>,
    /// Changes to how the agent is started.
    #[serde(default)]
    pub launch: Option<LaunchPatch>,
    /// Changes to how the input line is found.
    #[serde(default)]
    pub input: Option<InputPatch>,
    /// Rules added, or replacing the rule of the same name.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// Dialogs added, or replacing the dialog of the same name.
    #[serde(default)]
    pub dialogs: Vec<DialogSpec>,
    /// Policy per dialog name, without restating the dialog.
    #[serde(default)]
    pub dialog_policy: BTreeMap<String, Policy>,
}

/// Changes to [`Launch`].
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct LaunchPatch {
    /// Replaces the command.
    #[serde(default)]
    pub command: Option<String>,
    /// Replaces the arguments.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Merged into the environment, key by key.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Replaces the prompt arguments.
    #[serde(default)]
    pub prompt_args: Option<Vec<String>>,
    /// Replaces the resume arguments.
    #[serde(default)]
    pub resume_args: Option<Vec<String>>,
    /// Replaces the trust store.
    #[serde(default)]
    pub trust_store: Option<TrustStore>,
    /// Replaces the hook channel (`"none"` turns an agent's hooks off).
    #[serde(default)]
    pub hooks: Option<AgentHooks>,
    /// Replaces what the agent may write outside its worktree when sandboxed.
    #[serde(default)]
    pub sandbox_writes: Option<Vec<String>>,
    /// Turns Claude Code's reduced motion on or off.
    #[serde(default)]
    pub reduced_motion: Option<bool>,
}

/// Changes to [`InputSpec`].
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct InputPatch {
    /// Replaces the rule character.
    #[serde(default)]
    pub rule: Option<String>,
    /// Replaces the bottom rule character.
    #[serde(default)]
    pub bottom_rule: Option<String>,
    /// Replaces the number of status rows in a bottom-ruled box.
    #[serde(default)]
    pub status_rows: Option<usize>,
    /// Replaces the rows allowed under the input box.
    #[serde(default)]
    pub rows_below: Option<usize>,
    /// Replaces the prefix.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Replaces the placeholders.
    #[serde(default)]
    pub placeholders: Option<Vec<String>>,
    /// Replaces the keys that empty the input line.
    #[serde(default)]
    pub clear_keys: Option<Vec<String>>,
    /// Replaces how long the draft must show before Enter.
    #[serde(default)]
    pub submit_after_ms: Option<u64>,
}

/// A patch that names a dialog the profile does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("dialog_policy names dialog {dialog:?}, which profile {profile:?} does not have")]
pub struct UnknownDialog {
    /// The profile.
    pub profile: String,
    /// The dialog name given.
    pub dialog: String,
}

impl Manifest {
    /// Lays `patch` over this manifest.
    pub fn apply(&mut self, patch: &ManifestPatch) -> Result<(), UnknownDialog> {
        if let Some(description) = &patch.description {
            self.description = description.clone();
        }
        if let Some(launch) = &patch.launch {
            let target = &mut self.launch;
            if let Some(command) = &launch.command {
                target.command = command.clone();
            }
            if let Some(args) = &launch.args {
                target.args = args.clone();
            }
            target
                .env
                .extend(launch.env.iter().map(|(k, v)| (k.clone(), v.clone())));
            if let Some(prompt_args) = &launch.prompt_args {
                target.prompt_args = prompt_args.clone();
            }
            if let Some(resume_args) = &launch.resume_args {
                target.resume_args = resume_args.clone();
            }
            if let Some(store) = launch.trust_store {
                target.trust_store = store;
            }
            if let Some(hooks) = launch.hooks {
                target.hooks = hooks;
            }
            if let Some(writes) = &launch.sandbox_writes {
                target.sandbox_writes = writes.clone();
            }
            if let Some(reduced) = launch.reduced_motion {
                target.reduced_motion = reduced;
            }
        }
        if let Some(input) = &patch.input {
            if let Some(rule) = &input.rule {
                self.input.rule = Some(rule.clone()).filter(|r| !r.is_empty());
            }
            if let Some(bottom_rule) = &input.bottom_rule {
                self.input.bottom_rule = Some(bottom_rule.clone()).filter(|r| !r.is_empty());
            }
            if let Some(status_rows) = input.status_rows {
                self.input.status_rows = status_rows;
            }
            if let Some(rows_below) = input.rows_below {
                self.input.rows_below = Some(rows_below);
            }
            if let Some(prefix) = &input.prefix {
                self.input.prefix = prefix.clone();
            }
            if let Some(placeholders) = &input.placeholders {
                self.input.placeholders = placeholders.clone();
            }
            if let Some(clear_keys) = &input.clear_keys {
                self.input.clear_keys = clear_keys.clone();
            }
            if let Some(submit_after_ms) = input.submit_after_ms {
                self.input.submit_after_ms = submit_after_ms;
            }
        }
        merge_by_name(&mut self.rules, &patch.rules, |r| &r.name);
        merge_by_name(&mut self.dialogs, &patch.dialogs, |d| &d.name);
        for (dialog, policy) in &patch.dialog_policy {
            let target = self
                .dialogs
                .iter_mut()
                .find(|d| &d.name == dialog)
                .ok_or_else(|| UnknownDialog {
                    profile: self.name.clone(),
                    dialog: dialog.clone(),
                })?;
            target.policy = *policy;
        }
        Ok(())
    }
}

fn merge_by_name<T: Clone>(target: &mut Vec<T>, patch: &[T], name: impl Fn(&T) -> &String) {
    for entry in patch {
        match target.iter_mut().find(|t| name(t) == name(entry)) {
            Some(existing) => *existing = entry.clone(),
            None => target.push(entry.clone()),
        }
    }
}
