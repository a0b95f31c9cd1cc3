//! The permission policy: profiles, typed `(tool, verb, directory)` entries, and the decision
//! for one tool-permission question with the rule that decided it.
//!
//! Precedence, first that applies wins (`docs/permissions.md`): hard blocks and denied
//! protected paths > deny entries > asked protected paths, then what is never default safe
//! (a program named by the command, git outside the lane's repository) > split compounds
//! (every part must pass on its own) > allow entries, then operators' grants > default safe
//! (and the profile's own allowance) > ask. The reader's refusals are asks. Paths are resolved
//! against the real file system (symlinks followed), so this module reads the disk but never
//! writes.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::classes::{self, Protected, ProtectedPaths};
use super::grants::Grant;
use super::reader::{CommandPart, RedirectMode, Refusal, read_command};
use super::safe_verbs::{self, Arguments, Tier};

/// How far a lane's agent may go without a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Only the default-safe reads.
    ReadOnly,
    /// Also writes, edits and file-writing commands whose every path stays in the worktree.
    WorkspaceWrite,
    /// Everything but the hard blocks and deny entries (what the reader refuses still asks).
    DangerFullAccess,
}

impl Profile {
    /// The profile for a lane whose packet names none: the ordinary coding case.
    pub const DEFAULT: Profile = Profile::WorkspaceWrite;

    /// Parses a profile's name as packets and policy files write it.
    pub fn parse(name: &str) -> Option<Profile> {
        match name {
            "read-only" => Some(Self::ReadOnly),
            "workspace-write" => Some(Self::WorkspaceWrite),
            "danger-full-access" => Some(Self::DangerFullAccess),
            _ => None,
        }
    }

    /// The profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

/// The tool an agent asks to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// Run a shell command (Claude Code's Bash, Codex's shell).
    Bash,
    /// Create or overwrite a file.
    Write,
    /// Change a file (Edit, MultiEdit, apply_patch).
    Edit,
}

impl Tool {
    /// Parses a tool's name as policy files and the CLI write it.
    pub fn parse(name: &str) -> Option<Tool> {
        match name.to_ascii_lowercase().as_str() {
            "bash" | "shell" => Some(Self::Bash),
            "write" => Some(Self::Write),
            "edit" | "multiedit" | "apply_patch" => Some(Self::Edit),
            _ => None,
        }
    }

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bash => "bash",
            Self::Write => "write",
            Self::Edit => "edit",
        }
    }
}

/// Where an entry applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The lane's own worktree.
    LaneWorktree,
    /// The repository: its main worktree and every lane's.
    Repository,
    /// A listed folder (absolute).
    Path(PathBuf),
    /// Anywhere.
    Anywhere,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LaneWorktree => write!(f, "lane"),
            Self::Repository => write!(f, "repository"),
            Self::Path(path) => write!(f, "{}", path.display()),
            Self::Anywhere => write!(f, "anywhere"),
        }
    }
}

/// What an entry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Answer yes.
    Allow,
    /// Answer no.
    Deny,
}

/// One typed entry of `[permissions]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The tool it is about; `None` for any tool.
    pub tool: Option<Tool>,
    /// The verb (`cargo`, `git push`), `*` for any. Only shell commands have verbs.
    pub verb: String,
    /// Where it applies.
    pub scope: Scope,
    /// Allow or deny.
    pub effect: Effect,
}

impl Entry {
    fn matches_tool_and_verb(&self, tool: Tool, part: Option<&CommandPart>) -> bool {
        if self.tool.is_some_and(|wanted| wanted != tool) {
            return false;
        }
        if self.verb == "*" {
            return true;
        }
        part.is_some_and(|part| safe_verbs::verb_matches(&self.verb, part))
    }
}

/// The permission policy: the entries, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermissionPolicy {
    /// The entries.
    pub entries: Vec<Entry>,
}

/// The `[permissions]` table of the policy file: the profile of a lane whose packet names
/// none, and the entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionSettings {
    /// The profile of a lane whose task packet names no `permission_profile`.
    pub default_profile: Profile,
    /// The entries.
    pub policy: PermissionPolicy,
}

impl Default for PermissionSettings {
    fn default() -> Self {
        PermissionSettings {
            default_profile: Profile::DEFAULT,
            policy: PermissionPolicy::default(),
        }
    }
}

impl PermissionSettings {
    /// The profile of a lane: the one its packet names, else the default.
    pub fn profile_for(&self, packet_profile: Option<&str>) -> Result<Profile, String> {
        match packet_profile {
            None => Ok(self.default_profile),
            Some(name) => Profile::parse(name).ok_or_else(|| {
                format!(
                    "unknown permission_profile {name:?}; expected one of: read-only, \
                     workspace-write, danger-full-access"
                )
            }),
        }
    }
}

/// Where a question is asked: the lane's folders, as the supervisor knows them.
#[derive(Debug, Clone)]
pub struct LaneContext {
    /// The lane's own worktree.
    pub worktree: PathBuf,
    /// The repository's main worktree (its top level).
    pub repository: PathBuf,
    /// Every other lane's worktree in the repository.
    pub other_lanes: Vec<PathBuf>,
    /// The home folder, for `~`; `None` makes every `~` path outside everything.
    pub home: Option<PathBuf>,
    /// The lane's profile.
    pub profile: Profile,
    /// clawpool's folders and secrets outside the worktree (the common git dir, the user's
    /// clawpool folders, the grant key); `.claw/` and the agents' settings are found by name.
    pub protected: ProtectedPaths,
}

/// One tool-permission question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Run a shell command in a folder.
    Command {
        /// The command's text.
        command: String,
        /// The folder it runs in.
        cwd: PathBuf,
    },
    /// Create, overwrite or change a file.
    File {
        /// Write or Edit.
        tool: Tool,
        /// The file (absolute, or relative to the worktree).
        path: PathBuf,
    },
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Answer yes without a person.
    Allow,
    /// Answer no without a person.
    Deny,
    /// Escalate to a person.
    Ask,
}

impl Verdict {
    /// The verdict's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }
}

/// A built-in block no entry or profile overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardBlock {
    /// Writing inside a `.git` folder (the repository's internals).
    GitInternals,
    /// `rm -r` of `/`, the home folder, the worktree or the repository itself.
    RemoveRoot,
    /// A download piped into a shell or interpreter.
    DownloadIntoShell,
    /// A path or cwd inside another lane's worktree.
    OtherLane,
}

/// Why a command is never default safe, whatever allows it: a person answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeverSafe {
    /// An option or verb that names a program it runs (`sort --compress-program`, `xargs`).
    RunsAProgram,
    /// git would find a repository other than the lane's own (`cd sub && git status` where
    /// `sub` holds a `.git`), and run that repository's configuration.
    ForeignGit,
}

impl NeverSafe {
    fn code(self) -> &'static str {
        match self {
            Self::RunsAProgram => "runs_a_program",
            Self::ForeignGit => "foreign_git",
        }
    }
}

impl HardBlock {
    fn code(self) -> &'static str {
        match self {
            Self::GitInternals => "git_internals",
            Self::RemoveRoot => "remove_root",
            Self::DownloadIntoShell => "download_into_shell",
            Self::OtherLane => "other_lane",
        }
    }
}

/// The rule that decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// A built-in hard block.
    HardBlock(HardBlock),
    /// A protected path: denied or asked by its class, whatever the profile or entries.
    Protected(Protected),
    /// Never default safe: asked, whatever entry or grant would allow it (but in
    /// `danger-full-access`).
    NeverSafe(NeverSafe),
    /// A deny entry (0-based position in `[[permissions.entries]]`; shown from 1).
    DenyEntry(usize),
    /// An allow entry.
    AllowEntry(usize),
    /// An operator's grant (its id), acting as an allow entry just below the file's.
    Grant(String),
    /// A curated read-only verb, every path inside the worktree.
    DefaultSafe,
    /// The profile's own allowance (`workspace-write`'s file writes, `danger-full-access`).
    Profile(Profile),
    /// Every part of a compound passed; each part's rule is in the decision's parts.
    Compound,
    /// The reader refused the command.
    Reader(Refusal),
    /// Nothing allowed it.
    NoRule,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::HardBlock(block) => write!(f, "hard_block:{}", block.code()),
            Self::Protected(class) => write!(f, "protected:{}", class.code()),
            Self::NeverSafe(class) => write!(f, "never_safe:{}", class.code()),
            Self::DenyEntry(index) => write!(f, "permissions.entry#{}:deny", index + 1),
            Self::AllowEntry(index) => write!(f, "permissions.entry#{}:allow", index + 1),
            Self::Grant(id) => write!(f, "grant:{id}"),
            Self::DefaultSafe => write!(f, "default_safe"),
            Self::Profile(profile) => write!(f, "profile:{}", profile.name()),
            Self::Compound => write!(f, "compound"),
            Self::Reader(refusal) => write!(f, "reader:{}", refusal.code()),
            Self::NoRule => write!(f, "no_rule"),
        }
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What was decided about one simple command of a compound (or the one file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartDecision {
    /// The verb (`ls`, `git status`, or the file tool's name).
    pub verb: String,
    /// Its arguments (the file, for a file tool).
    pub args: Vec<String>,
    /// The folder it runs in.
    pub cwd: PathBuf,
    /// Its verdict.
    pub verdict: Verdict,
    /// The rule that decided it.
    pub rule: Rule,
    /// Why, in words.
    pub reason: String,
}

/// The policy's answer to one question, with the rule that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Allow, deny or ask.
    pub verdict: Verdict,
    /// The deciding rule.
    pub rule: Rule,
    /// Why, in words.
    pub reason: String,
    /// Each simple command (one for a file), as decided on its own; empty when the reader
    /// refused the command.
    pub parts: Vec<PartDecision>,
}

impl PermissionPolicy {
    /// The first entry with `effect` for `tool` (and the command part's verb, when there is
    /// one) whose scope `covers`, with its index in the file.
    fn first_entry(
        &self,
        effect: Effect,
        tool: Tool,
        part: Option<&CommandPart>,
        covers: impl Fn(&Entry) -> bool,
    ) -> Option<(usize, &Entry)> {
        self.entries.iter().enumerate().find(|(_, entry)| {
            entry.effect == effect && entry.matches_tool_and_verb(tool, part) && covers(entry)
        })
    }

    /// Decides one question for one lane.
    pub fn decide(&self, lane: &LaneContext, request: &Request) -> Decision {
        self.decide_with_grants(lane, request, &[])
    }

    /// Decides one question for one lane, with the operators' grants for it (each acting as
    /// an allow entry below the policy file's: [`Rule::Grant`]).
    pub fn decide_with_grants(
        &self,
        lane: &LaneContext,
        request: &Request,
        grants: &[Grant],
    ) -> Decision {
        let mut folders = Folders::new(lane);
        folders.grants = grants
            .iter()
            .filter_map(|grant| Some((grant.id.clone(), grant.entry()?)))
            .collect();
        match request {
            Request::Command { command, cwd } => self.decide_command(&folders, command, cwd),
            Request::File { tool, path } => {
                let part = self.decide_file(&folders, *tool, path);
                Decision {
                    verdict: part.verdict,
                    rule: part.rule.clone(),
                    reason: part.reason.clone(),
                    parts: vec![part],
                }
            }
        }
    }

    /// [`Self::decide_with_grants`]; and when a grant clawpool did not write (`ignored`: no
    /// MAC that verifies) would have allowed what was not allowed, the reason says so
    /// ("grant ID ignored: not written by clawpool"). Also returns those grants' ids.
    pub fn decide_noting_ignored(
        &self,
        lane: &LaneContext,
        request: &Request,
        grants: &[Grant],
        ignored: &[Grant],
    ) -> (Decision, Vec<String>) {
        let mut decision = self.decide_with_grants(lane, request, grants);
        if decision.verdict == Verdict::Allow || ignored.is_empty() {
            return (decision, Vec::new());
        }
        let all: Vec<Grant> = grants.iter().chain(ignored).cloned().collect();
        let would = self.decide_with_grants(lane, request, &all);
        let mut ids: Vec<String> = std::iter::once(&would.rule)
            .chain(would.parts.iter().map(|part| &part.rule))
            .filter_map(|rule| match rule {
                Rule::Grant(id) if ignored.iter().any(|grant| grant.id == *id) => Some(id.clone()),
                _ => None,
            })
            .collect();
        ids.dedup();
        if !ids.is_empty() {
            decision.reason = format!(
                "{}; grant {} ignored: {}",
                decision.reason,
                ids.join(", "),
                super::grants::NOT_WRITTEN_BY_CLAWPOOL
            );
        }
        (decision, ids)
    }

    fn decide_command(&self, folders: &Folders, command: &str, cwd: &Path) -> Decision {
        let parts = match read_command(command) {
            Ok(parts) => parts,
            Err(refusal) => {
                return Decision {
                    verdict: Verdict::Ask,
                    reason: format!("the reader refuses it: {refusal}"),
                    rule: Rule::Reader(refusal),
                    parts: Vec::new(),
                };
            }
        };
        // Where each part may run. A `cd` may fail, or run in a pipeline's subshell, so the
        // folders before it stay possible after it: a part must pass in every one of them.
        let mut cwds = vec![folders.resolve(folders.worktree.as_path(), cwd)];
        let mut decided = Vec::with_capacity(parts.len());
        for (index, part) in parts.iter().enumerate() {
            let mut decision = cwds
                .iter()
                .map(|cwd| self.decide_part(folders, part, cwd.as_deref()))
                .reduce(|worst, next| {
                    if worst.verdict == Verdict::Allow {
                        next
                    } else {
                        worst
                    }
                })
                .expect("at least one cwd");
            if decision.verdict != Verdict::Deny && downloads_into_shell(&parts, index) {
                decision.verdict = Verdict::Deny;
                decision.rule = Rule::HardBlock(HardBlock::DownloadIntoShell);
                decision.reason = "a download piped into a shell or interpreter".to_string();
            }
            if part.verb() == "cd" {
                // `cd -` goes back to a folder the text does not show.
                let target = part.args().first().map_or("~", String::as_str);
                let entered: Vec<Option<PathBuf>> = cwds
                    .iter()
                    .map(|from| {
                        let from = from.as_deref().filter(|_| target != "-");
                        from.and_then(|from| folders.resolve_word(from, target))
                    })
                    .collect();
                cwds.extend(entered);
                cwds.dedup();
                if cwds.len() > MAX_POSSIBLE_CWDS {
                    cwds = vec![None];
                }
            }
            decided.push(decision);
        }
        combine(decided)
    }

    fn decide_part(
        &self,
        folders: &Folders,
        part: &CommandPart,
        cwd: Option<&Path>,
    ) -> PartDecision {
        let mut decision = PartDecision {
            verb: verb_of(part),
            args: part
                .argv
                .get(verb_of(part).split(' ').count()..)
                .unwrap_or(&[])
                .to_vec(),
            cwd: cwd.map(Path::to_path_buf).unwrap_or_default(),
            verdict: Verdict::Ask,
            rule: Rule::NoRule,
            reason: String::new(),
        };
        let classified = safe_verbs::classify(part);
        let arguments = classified.map_or(Arguments::Paths, |(_, arguments)| arguments);
        let touched = touched_paths(folders, part, cwd, arguments);
        let writes = part
            .redirects
            .iter()
            .any(|redirect| redirect.mode == RedirectMode::Write && redirect.target != "/dev/null");
        let is_git = |path: &Option<PathBuf>| path.as_deref().is_some_and(in_git_internals);
        let read_only = matches!(classified, Some((Tier::ReadOnly, _)));
        let writes_git = touched.written.iter().any(is_git)
            || (!read_only && touched.read_or_written.iter().any(is_git));
        let protected = protected_touched(folders, &touched, read_only);

        // 1. Hard blocks.
        let block = if touched
            .all()
            .any(|path| folders.in_other_lane(path.as_deref()))
        {
            Some((
                HardBlock::OtherLane,
                "a path or the cwd is in another lane's worktree",
            ))
        } else if writes_git {
            Some((HardBlock::GitInternals, "it writes inside a .git folder"))
        } else if removes_a_root(folders, part, &touched) {
            Some((HardBlock::RemoveRoot, "a recursive rm of a root folder"))
        } else {
            None
        };
        if let Some((block, reason)) = block {
            decision.verdict = Verdict::Deny;
            decision.rule = Rule::HardBlock(block);
            decision.reason = reason.to_string();
            return decision;
        }
        if let Some(class) = protected.filter(|class| class.denies()) {
            decision.verdict = Verdict::Deny;
            decision.rule = Rule::Protected(class);
            decision.reason = class.reason().to_string();
            return decision;
        }

        // 2. Deny entries: the verb matches and the cwd or any path is in the scope.
        let deny = self.first_entry(Effect::Deny, Tool::Bash, Some(part), |entry| {
            touched
                .all()
                .any(|path| folders.in_scope(&entry.scope, path.as_deref()))
        });
        if let Some((index, entry)) = deny {
            decision.verdict = Verdict::Deny;
            decision.rule = Rule::DenyEntry(index);
            decision.reason = format!("denied: {} in {}", entry.verb, entry.scope);
            return decision;
        }

        // 3. Protected paths a person answers for, and what is never default safe.
        if let Some(class) = protected {
            decision.rule = Rule::Protected(class);
            decision.reason = class.reason().to_string();
            return decision;
        }
        if folders.profile != Profile::DangerFullAccess {
            if let Some(named) = classes::runs_a_program(part) {
                decision.rule = Rule::NeverSafe(NeverSafe::RunsAProgram);
                decision.reason = format!("`{named}` names a program to run");
                return decision;
            }
            let foreign = (part.verb() == "git")
                .then(|| classes::foreign_git(cwd, &folders.worktree))
                .flatten();
            if let Some(found) = foreign {
                decision.rule = Rule::NeverSafe(NeverSafe::ForeignGit);
                decision.reason = format!(
                    "git would use a repository other than the lane's own ({}), and its \
                     configuration may run programs",
                    found.display()
                );
                return decision;
            }
        }

        // 4. Allow entries: the verb matches and every path it names is in the scope (the
        // cwd, for a command that names none).
        let allow = self.first_entry(Effect::Allow, Tool::Bash, Some(part), |entry| {
            touched
                .named_or_cwd()
                .all(|path| folders.in_scope(&entry.scope, path.as_deref()))
        });
        if let Some((index, entry)) = allow {
            decision.verdict = Verdict::Allow;
            decision.rule = Rule::AllowEntry(index);
            decision.reason = format!("allowed: {} in {}", entry.verb, entry.scope);
            return decision;
        }
        let granted = folders.grants.iter().find(|(_, entry)| {
            entry.matches_tool_and_verb(Tool::Bash, Some(part))
                && touched
                    .named_or_cwd()
                    .all(|path| folders.in_scope(&entry.scope, path.as_deref()))
        });
        if let Some((id, entry)) = granted {
            decision.verdict = Verdict::Allow;
            decision.rule = Rule::Grant(id.clone());
            decision.reason = format!("granted by an operator: {} in the lane", entry.verb);
            return decision;
        }

        // 5. Default safe, and the profile's own allowance.
        let all_inside = touched
            .all()
            .all(|path| folders.in_worktree(path.as_deref()));
        let profile = folders.profile;
        if profile == Profile::DangerFullAccess {
            decision.verdict = Verdict::Allow;
            decision.rule = Rule::Profile(profile);
            decision.reason = "danger-full-access allows what nothing blocks".to_string();
            return decision;
        }
        match classified {
            Some((Tier::ReadOnly, _)) if all_inside && !writes => {
                decision.verdict = Verdict::Allow;
                decision.rule = Rule::DefaultSafe;
                decision.reason = "a read-only verb, every path inside the worktree".to_string();
            }
            Some((Tier::ReadOnly | Tier::WorkspaceWrite, _))
                if all_inside && profile == Profile::WorkspaceWrite =>
            {
                decision.verdict = Verdict::Allow;
                decision.rule = Rule::Profile(profile);
                decision.reason =
                    "workspace-write: a file-writing verb, every path inside the worktree"
                        .to_string();
            }
            Some(_) if !all_inside => {
                decision.reason = "a path or the cwd is outside the lane's worktree".to_string();
            }
            Some(_) => {
                decision.reason = format!("{} does not allow writing", profile.name());
            }
            None => {
                decision.reason = format!("no entry allows {}", decision.verb);
            }
        }
        decision
    }

    fn decide_file(&self, folders: &Folders, tool: Tool, path: &Path) -> PartDecision {
        let resolved = folders.resolve(folders.worktree.as_path(), path);
        let mut decision = PartDecision {
            verb: tool.name().to_string(),
            args: vec![path.display().to_string()],
            cwd: folders.worktree.clone(),
            verdict: Verdict::Ask,
            rule: Rule::NoRule,
            reason: String::new(),
        };
        let target = resolved.as_deref();
        let block = if folders.in_other_lane(target) {
            Some((
                HardBlock::OtherLane,
                "the file is in another lane's worktree",
            ))
        } else if target.is_some_and(in_git_internals) {
            Some((HardBlock::GitInternals, "the file is inside a .git folder"))
        } else {
            None
        };
        if let Some((block, reason)) = block {
            decision.verdict = Verdict::Deny;
            decision.rule = Rule::HardBlock(block);
            decision.reason = reason.to_string();
            return decision;
        }
        // A path that cannot be resolved is no protected path's, and asks below anyway.
        let protected = target.and_then(|target| classes::protected(target, &folders.protected));
        if let Some(class) = protected.filter(|class| class.denies()) {
            decision.verdict = Verdict::Deny;
            decision.rule = Rule::Protected(class);
            decision.reason = class.reason().to_string();
            return decision;
        }
        for effect in [Effect::Deny, Effect::Allow] {
            let found = self.first_entry(effect, tool, None, |entry| {
                folders.in_scope(&entry.scope, target)
            });
            if let Some((index, entry)) = found {
                decision.verdict = match effect {
                    Effect::Deny => Verdict::Deny,
                    Effect::Allow => Verdict::Allow,
                };
                decision.rule = match effect {
                    Effect::Deny => Rule::DenyEntry(index),
                    Effect::Allow => Rule::AllowEntry(index),
                };
                decision.reason = format!("{} in {}", tool.name(), entry.scope);
                return decision;
            }
            if let Some(class) = protected.filter(|_| effect == Effect::Deny) {
                decision.rule = Rule::Protected(class);
                decision.reason = class.reason().to_string();
                return decision;
            }
        }
        let granted = folders.grants.iter().find(|(_, entry)| {
            entry.matches_tool_and_verb(tool, None) && folders.in_scope(&entry.scope, target)
        });
        if let Some((id, _)) = granted {
            decision.verdict = Verdict::Allow;
            decision.rule = Rule::Grant(id.clone());
            decision.reason = format!("granted by an operator: {} in the lane", tool.name());
            return decision;
        }
        let profile = folders.profile;
        let allowed = match profile {
            Profile::DangerFullAccess => true,
            Profile::WorkspaceWrite => folders.in_worktree(target),
            Profile::ReadOnly => false,
        };
        if allowed {
            decision.verdict = Verdict::Allow;
            decision.rule = Rule::Profile(profile);
            decision.reason = format!("{}: the file is inside the worktree", profile.name());
        } else if profile == Profile::ReadOnly {
            decision.reason = "read-only does not allow writing".to_string();
        } else {
            decision.reason = "the file is outside the lane's worktree".to_string();
        }
        decision
    }
}

/// The compound's decision from its parts': any deny denies, any ask asks, all allowed allows.
fn combine(parts: Vec<PartDecision>) -> Decision {
    let deciding = parts
        .iter()
        .find(|part| part.verdict == Verdict::Deny)
        .or_else(|| parts.iter().find(|part| part.verdict == Verdict::Ask));
    let (verdict, rule, reason) = match deciding {
        Some(part) => {
            let reason = if parts.len() > 1 {
                format!("part `{}`: {}", part_text(part), part.reason)
            } else {
                part.reason.clone()
            };
            (part.verdict, part.rule.clone(), reason)
        }
        None if parts.len() == 1 => (
            Verdict::Allow,
            parts[0].rule.clone(),
            parts[0].reason.clone(),
        ),
        None => (
            Verdict::Allow,
            Rule::Compound,
            format!("each of its {} parts is allowed on its own", parts.len()),
        ),
    };
    Decision {
        verdict,
        rule,
        reason,
        parts,
    }
}

fn part_text(part: &PartDecision) -> String {
    std::iter::once(part.verb.clone())
        .chain(part.args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The verb as entries name it: `git` with its subcommand, otherwise the command's name.
fn verb_of(part: &CommandPart) -> String {
    match (part.verb(), part.args().first()) {
        ("git", Some(sub)) => format!("git {sub}"),
        (verb, _) => verb.to_string(),
    }
}

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "perl", "ruby", "node",
    "sudo", "eval", "source",
];
const DOWNLOADERS: &[&str] = &["curl", "wget", "fetch"];

/// Whether part `index` is a shell fed by a download earlier in the same pipeline.
fn downloads_into_shell(parts: &[CommandPart], index: usize) -> bool {
    let part = &parts[index];
    SHELLS.contains(&part.verb())
        && parts[..index].iter().any(|earlier| {
            earlier.pipeline == part.pipeline && DOWNLOADERS.contains(&earlier.verb())
        })
}

fn removes_a_root(folders: &Folders, part: &CommandPart, touched: &Touched) -> bool {
    if part.verb() != "rm" {
        return false;
    }
    let recursive = part.args().iter().any(|arg| {
        arg == "--recursive"
            || (arg.starts_with('-') && !arg.starts_with("--") && arg.contains(['r', 'R']))
    });
    recursive
        && touched.read_or_written.iter().any(|path| match path {
            // A path that cannot be resolved (`~` without a home) is taken as a root.
            None => true,
            Some(path) => {
                path.parent().is_none()
                    || folders.home.as_deref() == Some(path.as_path())
                    || *path == folders.worktree
                    || *path == folders.repository
            }
        })
}

/// The protected class of what a part touches, the denying classes first: every path it
/// writes (a redirection's file; for a verb not on the read-only list, every path it names and
/// its cwd) and every path it reads, for secrets.
fn protected_touched(folders: &Folders, touched: &Touched, read_only: bool) -> Option<Protected> {
    let class = |path: &Option<PathBuf>| {
        let path = path.as_deref()?;
        classes::protected(path, &folders.protected)
    };
    let mut written: Vec<&Option<PathBuf>> = touched.written.iter().collect();
    if !read_only {
        written.extend(&touched.read_or_written);
        written.push(&touched.cwd);
    }
    let mut found: Vec<Protected> = written.into_iter().filter_map(class).collect();
    found.extend(
        touched
            .read_or_written
            .iter()
            .filter_map(class)
            .filter(|class| *class == Protected::Secret),
    );
    found
        .iter()
        .copied()
        .find(|class| class.denies())
        .or(found.first().copied())
}

/// Whether a resolved path is inside a `.git` folder (or is one).
fn in_git_internals(path: &Path) -> bool {
    path.components()
        .any(|component| component.as_os_str() == ".git")
}

/// The paths a part touches, resolved (`None`: cannot be resolved, taken as outside
/// everything).
struct Touched {
    /// The cwd.
    cwd: Option<PathBuf>,
    /// Argument paths and read redirections.
    read_or_written: Vec<Option<PathBuf>>,
    /// Write redirections (other than `/dev/null`).
    written: Vec<Option<PathBuf>>,
}

impl Touched {
    /// The cwd and every path.
    fn all(&self) -> impl Iterator<Item = &Option<PathBuf>> {
        std::iter::once(&self.cwd)
            .chain(&self.read_or_written)
            .chain(&self.written)
    }

    /// The paths the command names, or its cwd when it names none: what an allow entry's
    /// scope must hold (a relative path already carries the cwd in it).
    fn named_or_cwd(&self) -> impl Iterator<Item = &Option<PathBuf>> {
        let named = self.read_or_written.iter().chain(&self.written);
        let cwd = (self.read_or_written.is_empty() && self.written.is_empty()).then_some(&self.cwd);
        named.chain(cwd)
    }
}

fn touched_paths(
    folders: &Folders,
    part: &CommandPart,
    cwd: Option<&Path>,
    arguments: Arguments,
) -> Touched {
    let mut touched = Touched {
        cwd: cwd.map(Path::to_path_buf),
        read_or_written: Vec::new(),
        written: Vec::new(),
    };
    let resolve = |word: &str| cwd.and_then(|cwd| folders.resolve_word(cwd, word));
    if arguments == Arguments::Paths {
        let skip = verb_of(part).split(' ').count();
        for arg in part.argv.get(skip..).unwrap_or(&[]) {
            if let Some(path) = path_in_argument(arg) {
                touched.read_or_written.push(resolve(path));
            }
        }
    }
    for redirect in &part.redirects {
        if redirect.target == "/dev/null" {
            continue;
        }
        let path = resolve(&redirect.target);
        match redirect.mode {
            RedirectMode::Read => touched.read_or_written.push(path),
            RedirectMode::Write => touched.written.push(path),
        }
    }
    touched
}

/// The part of an argument that may name a path: the whole of a plain argument, the value of
/// `--option=value`, what follows a short option's letter (`-f../x`); nothing for `--long`.
fn path_in_argument(arg: &str) -> Option<&str> {
    if let Some(long) = arg.strip_prefix("--") {
        return long.split_once('=').map(|(_, value)| value);
    }
    if let Some(short) = arg.strip_prefix('-') {
        if let Some((_, value)) = short.split_once('=') {
            return Some(value);
        }
        return short.char_indices().nth(1).map(|(at, _)| &short[at..]);
    }
    Some(arg)
}

/// The lane's folders, canonical, for resolving and comparing paths.
struct Folders {
    worktree: PathBuf,
    repository: PathBuf,
    other_lanes: Vec<PathBuf>,
    home: Option<PathBuf>,
    profile: Profile,
    /// The operators' grants for the lane, each as its id and allow entry.
    grants: Vec<(String, Entry)>,
    /// clawpool's folders and secrets outside the worktree, canonical.
    protected: ProtectedPaths,
}

/// Most folders a compound's `cd`s may leave a part in before the policy stops following
/// them (and takes the cwd as unknown: outside everything).
const MAX_POSSIBLE_CWDS: usize = 16;

/// Most symlinks followed while resolving one path (as the kernel's limit).
const MAX_SYMLINKS: usize = 40;

impl Folders {
    fn new(lane: &LaneContext) -> Folders {
        let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        Folders {
            worktree: canonical(&lane.worktree),
            repository: canonical(&lane.repository),
            other_lanes: lane
                .other_lanes
                .iter()
                .map(|lane| canonical(lane))
                .collect(),
            home: lane.home.as_deref().map(canonical),
            profile: lane.profile,
            grants: Vec::new(),
            protected: ProtectedPaths {
                control: lane
                    .protected
                    .control
                    .iter()
                    .map(|p| canonical(p))
                    .collect(),
                secrets: lane
                    .protected
                    .secrets
                    .iter()
                    .map(|p| canonical(p))
                    .collect(),
            },
        }
    }

    /// Resolves a word as the shell would open it from `cwd`: `~` is the home folder.
    fn resolve_word(&self, cwd: &Path, word: &str) -> Option<PathBuf> {
        if word == "~" || word.starts_with("~/") {
            let home = self.home.as_deref()?;
            return self.resolve(home, Path::new(word.get(2..).unwrap_or("")));
        }
        self.resolve(cwd, Path::new(word))
    }

    /// Resolves `path` (relative to `base`) to the real path it names: every `..` applied to
    /// the real folder and every symlink followed, parts that do not exist kept as written.
    /// `None` when resolving takes too many symlinks.
    fn resolve(&self, base: &Path, path: &Path) -> Option<PathBuf> {
        let mut pending: Vec<std::ffi::OsString> = Vec::new();
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            base.join(path)
        };
        push_components(&mut pending, &joined);
        let mut resolved = PathBuf::from("/");
        let mut links = 0;
        while let Some(component) = pending.pop() {
            if component == ".." {
                resolved.pop();
                continue;
            }
            let candidate = resolved.join(&component);
            match std::fs::read_link(&candidate) {
                Ok(target) => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return None;
                    }
                    if target.is_absolute() {
                        resolved = PathBuf::from("/");
                    }
                    push_components(&mut pending, &target);
                }
                Err(_) => resolved = candidate,
            }
        }
        Some(resolved)
    }

    fn in_worktree(&self, path: Option<&Path>) -> bool {
        path.is_some_and(|path| path.starts_with(&self.worktree))
    }

    fn in_other_lane(&self, path: Option<&Path>) -> bool {
        path.is_some_and(|path| {
            !path.starts_with(&self.worktree)
                && self.other_lanes.iter().any(|lane| path.starts_with(lane))
        })
    }

    fn in_scope(&self, scope: &Scope, path: Option<&Path>) -> bool {
        match scope {
            Scope::Anywhere => true,
            Scope::LaneWorktree => self.in_worktree(path),
            Scope::Repository => path.is_some_and(|path| {
                path.starts_with(&self.repository) || path.starts_with(&self.worktree)
            }),
            Scope::Path(listed) => path.is_some_and(|path| {
                let listed = listed.canonicalize().unwrap_or_else(|_| listed.clone());
                path.starts_with(listed)
            }),
        }
    }
}

/// Pushes a path's components onto a stack so that popping yields them in order (`.` dropped).
fn push_components(pending: &mut Vec<std::ffi::OsString>, path: &Path) {
    let components: Vec<_> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(components.into_iter().rev());
}
