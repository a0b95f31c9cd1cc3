//! Task packets: the JSON a run of lanes is described in (see `docs/task-packet.md`).
//!
//! [`parse_packet`] accepts three forms — one packet (claw-code's `TaskPacket` fields plus
//! clawpool's lane fields), an array of packets, or a batch `{"defaults": {…}, "lanes": […]}`
//! — and turns it into a [`Batch`] of [`LaneSpec`]s, or reports **every** problem at once as
//! [`PacketErrors`], each at its JSON path (`$.lanes[2].name`). Nothing is created here and
//! nothing on disk is read: paths are checked lexically against the [`PacketContext`]'s roots.

mod json;
mod names;
mod paths;
mod prompt;
mod schema;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use json::{Json, index_path, key_path};
pub use names::is_valid_lane_name;
use paths::Roots;
use schema::{Fields, read_object};
pub use schema::{GREEN_LEVELS, MERGE_POLICIES};

/// A lane without `branch` works on branch `lanes/<name>` (the worktree crate's default), so
/// its name must make a valid branch name that way.
const DEFAULT_BRANCH_PREFIX: &str = "lanes/";

/// What a packet is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketContext {
    /// The repository the lanes work on. Relative paths in the packet resolve against it.
    pub repo_root: PathBuf,
    /// Where lane worktrees live, when that is outside the repository. Paths may point inside
    /// it too.
    pub worktree_root: Option<PathBuf>,
    /// The agent of lanes that name none (neither themselves nor in `defaults`).
    pub default_agent: Option<String>,
}

impl PacketContext {
    /// A context with only a repository root.
    pub fn new(repo_root: impl Into<PathBuf>) -> Self {
        Self {
            repo_root: repo_root.into(),
            worktree_root: None,
            default_agent: None,
        }
    }
}

/// claw-code's task scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskScope {
    /// The whole workspace.
    Workspace,
    /// One module or crate (`scope_path` names it).
    Module,
    /// One file (`scope_path` names it).
    SingleFile,
    /// Anything else (`scope_path` says what).
    Custom,
}

impl TaskScope {
    /// Every scope.
    pub const ALL: [TaskScope; 4] = [
        TaskScope::Workspace,
        TaskScope::Module,
        TaskScope::SingleFile,
        TaskScope::Custom,
    ];

    /// The name on the wire: `workspace`, `module`, `single_file`, `custom`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskScope::Workspace => "workspace",
            TaskScope::Module => "module",
            TaskScope::SingleFile => "single_file",
            TaskScope::Custom => "custom",
        }
    }

    /// Whether claw-code requires a `scope_path` with this scope.
    pub fn needs_path(self) -> bool {
        !matches!(self, TaskScope::Workspace)
    }
}

impl fmt::Display for TaskScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// claw-code's `TaskResource`: something the task may touch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskResource {
    /// `file`, `directory`, `service`, … (`file`, `dir`, `directory` and `path` values are
    /// checked as paths).
    pub kind: String,
    /// What it is, as given.
    pub value: String,
}

/// Which of the three forms a packet was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacketForm {
    /// One packet object.
    Single,
    /// An array of packet objects.
    Array,
    /// `{"defaults": {…}, "lanes": […]}`.
    Batch,
}

/// A valid packet: the lanes to start, in packet order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Batch {
    /// The form it was written in.
    pub form: PacketForm,
    /// One spec per lane, `defaults` applied.
    pub lanes: Vec<LaneSpec>,
}

/// One lane, checked and with `defaults` applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneSpec {
    /// The lane's name (given, or derived: see [`LaneSpec::name_derived`]); unique in the batch.
    pub name: String,
    /// Whether `name` was derived from the objective (or prompt) or the position.
    pub name_derived: bool,
    /// Where the lane is in the packet: `$`, `$[1]` or `$.lanes[1]`.
    pub source: String,
    /// The agent profile: the lane's, else `defaults`', else the context's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// What to send: `prompt` verbatim, or the text built from `objective` and the packet's
    /// fields.
    pub prompt: String,
    /// claw-code's objective, when the lane gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// The branch the lane starts from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The lane's own branch; unique in the batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The lane's worktree: absolute, normalised, below the repository or the worktree root,
    /// unique and not nested in another lane's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<PathBuf>,
    /// Folders this lane may be trusted in: absolute, normalised, inside the roots.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted_roots: Vec<PathBuf>,
    /// claw-code's scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<TaskScope>,
    /// What the scope covers, relative to the repository (`.` for all of it), normalised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope_path: Option<PathBuf>,
    /// claw-code's `repo`, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// claw-code's `branch_policy` (free text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_policy: Option<String>,
    /// Commands that must pass.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acceptance_tests: Vec<String>,
    /// Human-readable acceptance criteria.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acceptance_criteria: Vec<String>,
    /// Things the task may touch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<TaskResource>,
    /// claw-code's `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// claw-code's `provider`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// claw-code's `permission_profile`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_profile: Option<String>,
    /// claw-code's `commit_policy` (free text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_policy: Option<String>,
    /// claw-code's `reporting_contract` (free text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reporting_contract: Option<String>,
    /// claw-code's `reporting_targets`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reporting_targets: Vec<String>,
    /// claw-code's `escalation_policy` (free text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
    /// claw-code's `recovery_policy` (free text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_policy: Option<String>,
    /// claw-code's `verification_plan`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verification_plan: Vec<String>,
    /// How the lane's branch takes in its base before broad verification: `merge_forward`
    /// (the default when unset), `rebase`, `warn` or `block`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_policy: Option<String>,
    /// Verification commands per green level; a level without its own runs
    /// `acceptance_tests`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub verify_commands: std::collections::BTreeMap<String, Vec<String>>,
    /// How long each verification command may run before it counts as hung.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_timeout_secs: Option<u64>,
    /// The green level to verify at once the lane finishes, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_on_finish: Option<String>,
    /// The lane's sandbox (`workspace` or `off`; `docs/sandbox.md`), over the configuration's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// What the lane may cost, in US dollars: past it (its `cost_usd`, checked as usage
    /// arrives) its turn is interrupted and the lane held `blocked{budget}`.
    pub budget_usd: Option<f64>,
}

/// One problem, at its JSON path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketError {
    /// Where: `$` for the whole document, `$.lanes[2].name`, `$[0].acceptance_tests[1]`, …
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl PacketError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for PacketError {}

/// Every problem found in a packet (never empty), in document order as far as possible:
/// each lane's own problems, then problems between lanes (duplicates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PacketErrors(pub Vec<PacketError>);

impl PacketErrors {
    /// The problems.
    pub fn errors(&self) -> &[PacketError] {
        &self.0
    }
}

impl fmt::Display for PacketErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "invalid task packet ({n} problem{}):",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PacketErrors {}

/// Parses and checks a task packet, reporting every problem at once.
pub fn parse_packet(text: &str, ctx: &PacketContext) -> Result<Batch, PacketErrors> {
    let checked = check_packet(text, ctx);
    if checked.problems.is_empty() {
        Ok(Batch {
            form: checked.form.unwrap_or(PacketForm::Single),
            lanes: checked.lanes,
        })
    } else {
        Err(PacketErrors(checked.problems))
    }
}

/// A packet checked as far as it can be, problems or not: see [`check_packet`].
#[derive(Debug, Clone)]
pub struct CheckedPacket {
    /// The packet's form, when the document had one.
    pub form: Option<PacketForm>,
    /// The lanes none of `problems` is about (nothing at or under their path, nothing in the
    /// batch's `defaults`): whatever else a caller checks about them is worth reporting too.
    pub lanes: Vec<LaneSpec>,
    /// Every problem, as [`parse_packet`] reports them.
    pub problems: Vec<PacketError>,
}

/// Checks a task packet and keeps the lanes that have no problem of their own, so that a
/// caller checking lanes further (against a repository, say) can report its problems together
/// with the packet's, all at once.
pub fn check_packet(text: &str, ctx: &PacketContext) -> CheckedPacket {
    match check(text, ctx) {
        Ok(batch) => CheckedPacket {
            form: Some(batch.form),
            lanes: batch.lanes,
            problems: Vec::new(),
        },
        Err((form, lanes, problems)) => {
            let about = |path: &str, at: &str| {
                path == at
                    || path
                        .strip_prefix(at)
                        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
            };
            // A problem in the defaults may be in any lane's merged fields.
            let defaults_bad = problems.iter().any(|p| about(&p.path, "$.defaults"));
            let lanes = if defaults_bad {
                Vec::new()
            } else {
                lanes
                    .into_iter()
                    .filter(|lane| !problems.iter().any(|p| about(&p.path, &lane.source)))
                    .collect()
            };
            CheckedPacket {
                form,
                lanes,
                problems,
            }
        }
    }
}

/// The lanes read so far with every problem, when there is any.
type Checked = Result<Batch, (Option<PacketForm>, Vec<LaneSpec>, Vec<PacketError>)>;

fn check(text: &str, ctx: &PacketContext) -> Checked {
    let doc = json::parse(text).map_err(|m| (None, Vec::new(), vec![PacketError::new("$", m)]))?;
    let roots = Roots::new(&ctx.repo_root, ctx.worktree_root.as_deref());
    let mut errors = Vec::new();

    // The lanes and the problems of the document's structure, in document order.
    let mut items: Vec<Item<'_>> = Vec::new();
    let mut defaults: Option<Fields> = None;
    let form = match &doc {
        Json::Object(entries) if entries.iter().any(|(k, _)| k == "lanes" || k == "defaults") => {
            defaults = read_defaults(entries, &roots, &mut errors);
            items = batch_items(entries);
            PacketForm::Batch
        }
        Json::Object(entries) => {
            items.push(Item::Lane("$".to_owned(), entries));
            PacketForm::Single
        }
        Json::Array(packets) => {
            if packets.is_empty() {
                errors.push(PacketError::new("$", "the array has no packets"));
            }
            for (i, packet) in packets.iter().enumerate() {
                let at = index_path("$", i);
                items.push(match packet {
                    Json::Object(entries) => Item::Lane(at, entries),
                    other => Item::Problem(PacketError::new(
                        at,
                        format!("expected a packet (an object), found {}", other.kind()),
                    )),
                });
            }
            PacketForm::Array
        }
        other => {
            errors.push(PacketError::new(
                "$",
                format!(
                    "expected a task packet (an object), an array of packets, or a batch \
                     {{\"defaults\": {{…}}, \"lanes\": […]}}; found {}",
                    other.kind()
                ),
            ));
            return Err((None, Vec::new(), errors));
        }
    };

    let mut lanes: Vec<Draft> = Vec::new();
    for item in items {
        match item {
            Item::Lane(at, entries) => {
                let own = read_object(entries, &at, false, &roots, &mut errors);
                let fields = own.over(defaults.as_ref());
                lanes.push(build_lane(at, &fields, ctx, &mut errors));
            }
            Item::Problem(e) => errors.push(e),
        }
    }

    check_unique(&lanes, &mut errors);
    let lanes = name_lanes(lanes);

    if errors.is_empty() {
        Ok(Batch { form, lanes })
    } else {
        Err((Some(form), lanes, errors))
    }
}

/// A lane object to read, or a problem with the document's structure.
enum Item<'a> {
    /// A lane at its path.
    Lane(String, &'a [(String, Json)]),
    /// Something that is not a lane where one should be, or an unknown top-level key.
    Problem(PacketError),
}

/// The batch's `defaults`, read first so that every lane can use them wherever they are.
fn read_defaults(
    entries: &[(String, Json)],
    roots: &Roots,
    errors: &mut Vec<PacketError>,
) -> Option<Fields> {
    let (_, value) = entries.iter().find(|(k, _)| k == "defaults")?;
    let at = key_path("$", "defaults");
    match value {
        Json::Object(d) => Some(read_object(d, &at, true, roots, errors)),
        Json::Null => None,
        other => {
            errors.push(PacketError::new(
                at,
                format!("expected an object, found {}", other.kind()),
            ));
            None
        }
    }
}

/// The batch's lanes and top-level problems, in document order.
fn batch_items(entries: &[(String, Json)]) -> Vec<Item<'_>> {
    let mut items = Vec::new();
    let mut saw_lanes = false;
    for (key, value) in entries {
        let at = key_path("$", key);
        match (key.as_str(), value) {
            ("defaults", _) => {}
            ("lanes", Json::Array(lanes)) => {
                saw_lanes = true;
                if lanes.is_empty() {
                    items.push(Item::Problem(PacketError::new(
                        at.clone(),
                        "the batch has no lanes",
                    )));
                }
                for (i, lane) in lanes.iter().enumerate() {
                    let lane_at = index_path(&at, i);
                    items.push(match lane {
                        Json::Object(lane) => Item::Lane(lane_at, lane),
                        other => Item::Problem(PacketError::new(
                            lane_at,
                            format!("expected a lane (an object), found {}", other.kind()),
                        )),
                    });
                }
            }
            ("lanes", other) => {
                saw_lanes = true;
                items.push(Item::Problem(PacketError::new(
                    at,
                    format!("expected an array of lanes, found {}", other.kind()),
                )));
            }
            _ => {
                let hint = names::did_you_mean(key, &["defaults", "lanes"])
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                items.push(Item::Problem(PacketError::new(
                    at,
                    format!(
                        "unknown field `{key}`{hint} (a batch has only `defaults` and `lanes`)"
                    ),
                )));
            }
        }
    }
    if !saw_lanes {
        items.push(Item::Problem(PacketError::new(
            "$",
            "missing field `lanes`",
        )));
    }
    items
}

/// A lane before naming: its spec, and whether its name field was present but invalid.
struct Draft {
    spec: LaneSpec,
    /// The `name` field was given but invalid (reported): no name is derived for it.
    bad_name: bool,
}

/// Checks what needs the merged fields, and builds the spec.
fn build_lane(
    at: String,
    fields: &Fields,
    ctx: &PacketContext,
    errors: &mut Vec<PacketError>,
) -> Draft {
    let prompt = fields.text("prompt");
    let objective = fields.text("objective");
    let prompt_bad = fields.is_invalid("prompt") || fields.is_invalid("objective");
    match (&prompt, &objective) {
        (Some(_), Some(_)) => errors.push(PacketError::new(
            at.clone(),
            "give `prompt` or `objective`, not both (`prompt` is sent as written; `objective` \
             is sent with the packet's other fields)",
        )),
        (None, None) if !prompt_bad => errors.push(PacketError::new(
            at.clone(),
            "missing field `prompt` or `objective`: a lane needs something to do",
        )),
        _ => {}
    }

    let scope = fields.scope();
    let scope_path = fields.path("scope_path");
    if let Some(scope) = scope
        && scope.needs_path()
        && scope_path.is_none()
        && !fields.is_invalid("scope_path")
    {
        errors.push(PacketError::new(
            at.clone(),
            format!("missing field `scope_path`: it is required when `scope` is `{scope}`"),
        ));
    }

    let agent = fields.text("agent").or_else(|| ctx.default_agent.clone());

    let mut spec = LaneSpec {
        name: fields.text("name").unwrap_or_default(),
        name_derived: false,
        source: at,
        agent,
        prompt: String::new(),
        objective,
        base: fields.text("base"),
        branch: fields.text("branch"),
        worktree: fields.path("worktree"),
        trusted_roots: fields.paths("trusted_roots"),
        scope,
        scope_path,
        repo: fields.text("repo"),
        branch_policy: fields.text("branch_policy"),
        acceptance_tests: fields.texts("acceptance_tests"),
        acceptance_criteria: fields.texts("acceptance_criteria"),
        resources: fields.resources(),
        model: fields.text("model"),
        provider: fields.text("provider"),
        permission_profile: fields.text("permission_profile"),
        commit_policy: fields.text("commit_policy"),
        reporting_contract: fields.text("reporting_contract"),
        reporting_targets: fields.texts("reporting_targets"),
        escalation_policy: fields.text("escalation_policy"),
        recovery_policy: fields.text("recovery_policy"),
        verification_plan: fields.texts("verification_plan"),
        merge_policy: fields.text("merge_policy"),
        verify_commands: fields.level_commands("verify_commands"),
        verify_timeout_secs: fields.seconds("verify_timeout_secs"),
        verify_on_finish: fields.text("verify_on_finish"),
        sandbox: fields.text("sandbox"),
        budget_usd: fields.dollars("budget_usd"),
    };
    if spec.branch.is_none() && !spec.name.is_empty() {
        let branch = format!("{DEFAULT_BRANCH_PREFIX}{}", spec.name);
        if let Some(why) = names::ref_name_problem(&branch) {
            errors.push(PacketError::new(
                key_path(&spec.source, "name"),
                format!(
                    "lane name `{}` would make the default branch `{branch}`, which git refuses \
                     ({why}); rename the lane or set `branch`",
                    spec.name
                ),
            ));
        }
    }
    spec.prompt = match prompt {
        Some(p) => p,
        None if spec.objective.is_some() => prompt::packet_prompt(&spec),
        None => String::new(),
    };
    Draft {
        spec,
        bad_name: fields.is_invalid("name"),
    }
}

/// Given names, branches and worktrees must not collide.
fn check_unique(lanes: &[Draft], errors: &mut Vec<PacketError>) {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut branches: HashMap<&str, &str> = HashMap::new();
    for lane in lanes {
        let spec = &lane.spec;
        if !spec.name.is_empty() {
            if let Some(first) = names.get(spec.name.as_str()) {
                errors.push(PacketError::new(
                    key_path(&spec.source, "name"),
                    format!(
                        "duplicate lane name `{}` (already used by {first})",
                        spec.name
                    ),
                ));
            } else {
                names.insert(&spec.name, &spec.source);
            }
        }
        if let Some(branch) = &spec.branch {
            if let Some(first) = branches.get(branch.as_str()) {
                errors.push(PacketError::new(
                    key_path(&spec.source, "branch"),
                    format!("duplicate branch `{branch}` (already used by {first})"),
                ));
            } else {
                branches.insert(branch, &spec.source);
            }
        }
    }
    for (i, lane) in lanes.iter().enumerate() {
        let Some(mine) = &lane.spec.worktree else {
            continue;
        };
        for earlier in &lanes[..i] {
            let Some(theirs) = &earlier.spec.worktree else {
                continue;
            };
            let problem = if mine == theirs {
                "is the same as"
            } else if mine.starts_with(theirs) {
                "is inside"
            } else if theirs.starts_with(mine) {
                "contains"
            } else {
                continue;
            };
            errors.push(PacketError::new(
                key_path(&lane.spec.source, "worktree"),
                format!(
                    "worktree `{}` {problem} the worktree of {} (`{}`); each lane needs its own",
                    mine.display(),
                    earlier.spec.source,
                    theirs.display()
                ),
            ));
            break;
        }
    }
}

/// Gives every unnamed lane a name: the slug of its objective (or prompt), else `lane-N`
/// (N its 1-based position), with `-2`, `-3`, … added until it is unique. Given names are
/// never changed and are reserved first.
fn name_lanes(drafts: Vec<Draft>) -> Vec<LaneSpec> {
    let mut taken: std::collections::HashSet<String> = drafts
        .iter()
        .filter(|d| !d.spec.name.is_empty())
        .map(|d| d.spec.name.clone())
        .collect();
    drafts
        .into_iter()
        .enumerate()
        .map(|(index, draft)| {
            let mut spec = draft.spec;
            if spec.name.is_empty() && !draft.bad_name {
                let text = spec.objective.as_deref().unwrap_or(&spec.prompt);
                let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                let mut base = names::slug(first_line);
                if base.is_empty() {
                    base = format!("lane-{}", index + 1);
                }
                let mut name = base.clone();
                let mut n = 2;
                while taken.contains(&name) {
                    name = format!("{base}-{n}");
                    n += 1;
                }
                taken.insert(name.clone());
                spec.name = name;
                spec.name_derived = true;
            }
            spec
        })
        .collect()
}
