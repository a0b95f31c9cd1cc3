//! A lane's tool-permission gate: reads the permission dialog on the agent's screen, asks the
//! permission policy (`clawpool_recovery::permissions`), and says what to answer and what to
//! record as `lane.permission.decided` (`docs/permissions.md`). The handshake asks it through
//! an effect and answers the dialog itself. It also decides the question Claude Code's
//! PermissionRequest hook carries ([`PermissionGate::decide_hook`]), with the tool's real input
//! and cwd, for the hook to answer before any dialog shows. It names the lane's protected
//! paths outside its worktree ([`protected_paths`]) and reads the grants with the user's grant
//! key: a grant clawpool did not sign is never honoured, and said so when it would have counted.

use std::path::{Path, PathBuf};

use clawpool_recovery::permissions::PermissionSettings;
use clawpool_recovery::permissions::{
    Decision, LaneContext, PartDecision, PermissionPolicy, Request, Tool, Verdict, read_dialog,
};
use clawpool_recovery::permissions::{Grant, GrantKey, GrantStore, IgnoredGrant, ProtectedPaths};
use clawpool_worktree::Repo;
use clawpool_worktree::layout::StateDir;

use crate::error::LaneError;
use crate::registry::{RegistryEntry, RegistryFolder, lane_registry, registered_names};
use clawpool_lanes::payload::PermissionDecided;
use clawpool_lanes::wire_name;
use serde_json::{Value, json};

/// Longest argument, and most arguments, recorded in an event (the decision saw them all).
const MAX_ARG_CHARS: usize = 200;
const MAX_ARGS: usize = 20;
/// Longest command text recorded in an event.
const MAX_COMMAND_CHARS: usize = 500;

/// The folders a permission question of the lane whose worktree is `worktree` is decided
/// against, with its profile: the registry entry's `permission_profile` (from its packet),
/// else the policy's default.
pub fn lane_context(
    worktree: &Path,
    settings: &PermissionSettings,
) -> Result<LaneContext, LaneError> {
    let (mut lane, _) = own_context(worktree, None, settings)?;
    lane.other_lanes = other_lanes(&lane.worktree);
    Ok(lane)
}

/// [`lane_context`] without the other lanes, and the lane's repository (opened once: each open
/// reads git's configuration). `registry` is the lane's own registry folder when the caller
/// knows it: its entry is then the only one read, where finding the entry by its worktree
/// reads every lane's (O(n) for each lane started, O(n²) for a spawn).
fn own_context(
    worktree: &Path,
    registry: Option<&RegistryFolder>,
    settings: &PermissionSettings,
) -> Result<(LaneContext, Option<Repo>), LaneError> {
    let worktree = worktree
        .canonicalize()
        .unwrap_or_else(|_| worktree.to_path_buf());
    let repo = Repo::open(&worktree).ok();
    let is_this_lane = |entry: &RegistryEntry| {
        let lane = entry.worktree.canonicalize();
        lane.as_deref().unwrap_or(&entry.worktree) == worktree
    };
    let own_entry = registry
        .and_then(|folder| folder.entry().ok())
        .filter(is_this_lane);
    let packet_profile = match own_entry {
        Some(entry) => entry.permission_profile,
        None => repo.as_ref().and_then(|repo| {
            registered_names(repo).into_iter().find_map(|name| {
                let entry = lane_registry(repo, &name).entry().ok()?;
                is_this_lane(&entry).then_some(entry.permission_profile)?
            })
        }),
    };
    let profile = settings
        .profile_for(packet_profile.as_deref())
        .map_err(|message| LaneError::invalid("invalid_permission_profile", message))?;
    let lane = LaneContext {
        repository: repo
            .as_ref()
            .map_or_else(|| worktree.clone(), |repo| repo.root().to_path_buf()),
        worktree,
        other_lanes: Vec::new(),
        home: std::env::var_os("HOME").map(PathBuf::from),
        profile,
        protected: protected_paths(repo.as_ref(), |key| std::env::var(key).ok()),
    };
    Ok((lane, repo))
}

/// clawpool's folders and secrets outside a lane's worktree, which no lane may write (nor
/// read, for the secrets): the repository's common git dir (the lane registry, the grants
/// store), the user's clawpool config and state folders (`env` looks a variable up), and the
/// grant key in the latter. `.claw/` and the agents' own settings are found by name.
pub fn protected_paths(
    repo: Option<&Repo>,
    env: impl Fn(&str) -> Option<String> + Copy,
) -> ProtectedPaths {
    let home = env("HOME").map(PathBuf::from);
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|dir| dir.is_absolute());
    let config = absolute("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let state =
        GrantStore::user(env).and_then(|store| store.path().parent().map(Path::to_path_buf));
    let control = repo
        .map(|repo| repo.common_dir().to_path_buf())
        .into_iter()
        .chain(config.map(|config| config.join("clawpool")))
        .chain(state)
        .collect();
    ProtectedPaths {
        control,
        secrets: GrantKey::user_path(env).into_iter().collect(),
    }
}

/// The worktrees of the repository's lanes other than the one in `worktree` (canonical), as
/// its registry lists them now.
fn other_lanes(worktree: &Path) -> Vec<PathBuf> {
    let Ok(repo) = Repo::open(worktree) else {
        return Vec::new();
    };
    registered_names(&repo)
        .into_iter()
        .filter_map(|name| lane_registry(&repo, &name).entry().ok())
        .map(|entry| entry.worktree.canonicalize().unwrap_or(entry.worktree))
        .filter(|lane| lane != worktree)
        .collect()
}

/// The grant stores a lane's questions read: the repository's (lane and repository grants,
/// in the common git dir next to the lane registry) and the user's (`always` grants).
fn grant_stores(repo: Option<&Repo>) -> Vec<GrantStore> {
    let repository = repo.map(|repo| GrantStore::in_folder(StateDir::of(repo.common_dir()).root()));
    repository
        .into_iter()
        .chain(GrantStore::user(|key| std::env::var(key).ok()))
        .collect()
}

/// The permission policy and the lane it decides for.
#[derive(Debug, Clone)]
pub struct PermissionGate {
    policy: PermissionPolicy,
    lane: LaneContext,
    /// Where the operators' grants for the lane are read, at each question (a grant made while
    /// the lane runs counts from its next question).
    grant_stores: Vec<GrantStore>,
    /// The other lanes are read from the registry when a question comes, not kept: each of N
    /// lanes keeping the N - 1 others' folders would be N² paths in the supervisor for
    /// questions that come at a person's pace, and lanes registered later are known too.
    others_from_registry: bool,
}

/// What the gate decided about the question on screen.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAnswer {
    /// Allow (answer yes), deny (answer no) or ask (a person answers).
    pub verdict: Verdict,
    /// The question in one line (tool and command or file): the same question asked again
    /// after it was answered is this same text.
    pub question: String,
    /// What the `lane.permission.decided` event records.
    pub decided: PermissionDecided,
}

impl PermissionGate {
    /// A gate deciding with `policy` for `lane`, as given.
    pub fn new(policy: PermissionPolicy, lane: LaneContext) -> Self {
        Self {
            policy,
            lane,
            grant_stores: Vec::new(),
            others_from_registry: false,
        }
    }

    /// A gate deciding with `policy` for the lane in `worktree` ([`lane_context`]), whose own
    /// registry folder is `registry`; it reads the repository's other lanes when a question
    /// comes.
    pub fn for_worktree(
        policy: PermissionPolicy,
        worktree: &Path,
        registry: &RegistryFolder,
        settings: &PermissionSettings,
    ) -> Result<Self, LaneError> {
        let (lane, repo) = own_context(worktree, Some(registry), settings)?;
        Ok(Self {
            policy,
            grant_stores: grant_stores(repo.as_ref()),
            lane,
            others_from_registry: true,
        })
    }

    /// Decides the question the permission dialog on `rows` asks; a dialog it cannot read is
    /// an ask.
    pub fn decide(&self, rows: &[String]) -> PermissionAnswer {
        let Some(request) = read_dialog(rows, &self.lane.worktree) else {
            return PermissionAnswer {
                verdict: Verdict::Ask,
                question: String::new(),
                decided: unread(
                    None,
                    Some(&self.lane.worktree.display().to_string()),
                    "unreadable_dialog",
                    "the dialog's tool and command could not be read whole".into(),
                    &self.lane,
                ),
            };
        };
        self.decide_request(&request)
    }

    /// Decides the question a PermissionRequest hook carries: the tool (`Bash`; `Write`;
    /// `Edit`, `MultiEdit`, `NotebookEdit`) with its input (`command`; `file_path` or
    /// `notebook_path`) in the agent's `cwd` (the worktree when the payload names none). A
    /// tool the policy does not know, or an input without its command or file, is an ask.
    pub fn decide_hook(
        &self,
        tool_name: &str,
        tool_input: &Value,
        cwd: Option<&str>,
    ) -> PermissionAnswer {
        let text = |key: &str| tool_input.get(key).and_then(Value::as_str);
        let request = match tool_name {
            "Bash" => text("command").map(|command| Request::Command {
                command: command.to_owned(),
                cwd: cwd.map_or_else(|| self.lane.worktree.clone(), PathBuf::from),
            }),
            "Write" => text("file_path").map(|path| Request::File {
                tool: Tool::Write,
                path: PathBuf::from(path),
            }),
            "Edit" | "MultiEdit" | "NotebookEdit" => text("file_path")
                .or_else(|| text("notebook_path"))
                .map(|path| Request::File {
                    tool: Tool::Edit,
                    path: PathBuf::from(path),
                }),
            _ => None,
        };
        match request {
            Some(request) => self.decide_request(&request),
            None => PermissionAnswer {
                verdict: Verdict::Ask,
                question: format!("{tool_name}: {}", tool_input),
                decided: unread(
                    Some(tool_name),
                    cwd,
                    "unreadable_request",
                    format!("no policy reads the {tool_name} tool's input"),
                    &self.lane,
                ),
            },
        }
    }

    /// Decides one question for the lane.
    fn decide_request(&self, request: &Request) -> PermissionAnswer {
        let with_others;
        let lane = if self.others_from_registry {
            with_others = LaneContext {
                other_lanes: other_lanes(&self.lane.worktree),
                ..self.lane.clone()
            };
            &with_others
        } else {
            &self.lane
        };
        let (grants, ignored, mut store_notes) = self.grants();
        let ignored_grants: Vec<Grant> = ignored.iter().map(|i| i.grant.clone()).collect();
        let (decision, would_have) =
            self.policy
                .decide_noting_ignored(lane, request, &grants, &ignored_grants);
        for ignored in ignored.iter().filter(|i| would_have.contains(&i.grant.id)) {
            tracing::warn!(grant = %ignored.grant.id, store = %ignored.store.display(), reason = %ignored.reason, "permission grant ignored");
            store_notes.push(json!({"ignored_grant": {
                "id": ignored.grant.id, "store": ignored.store, "reason": ignored.reason,
            }}));
        }
        let (tool, question) = match request {
            Request::Command { command, .. } => ("bash", command.clone()),
            Request::File { tool, path } => (tool.name(), path.display().to_string()),
        };
        let mut decided = recorded(tool, &question, &decision, &self.lane);
        decided.grant_stores = store_notes;
        PermissionAnswer {
            verdict: decision.verdict,
            question: format!("{tool}: {question}"),
            decided,
        }
    }
}

impl PermissionGate {
    /// The grants for this lane from its stores — those clawpool wrote, and those it did not
    /// (ignored) — and what to report about the stores: one set aside (unreadable, or of
    /// another version), one that could not be read, or a grant key that could not be read
    /// (no grant counts this time).
    fn grants(&self) -> (Vec<Grant>, Vec<IgnoredGrant>, Vec<Value>) {
        let mut grants = Vec::new();
        let mut ignored = Vec::new();
        let mut notes = Vec::new();
        if self.grant_stores.is_empty() {
            return (grants, ignored, notes);
        }
        let key = match GrantKey::user_path(|key| std::env::var(key).ok()) {
            Some(path) => GrantKey::load(&path).unwrap_or_else(|err| {
                tracing::warn!(error = %err, "grant key not read: no grant counts");
                notes.push(json!({"error": err.to_string()}));
                None
            }),
            None => None,
        };
        for store in &self.grant_stores {
            match store.load(key.as_ref()) {
                Ok(loaded) => {
                    if let Some(aside) = loaded.set_aside {
                        tracing::warn!(store = %aside.from.display(), kept = %aside.to.display(), reason = %aside.reason, "permission grants store set aside");
                        notes.push(json!({"set_aside": aside}));
                    }
                    grants.extend(
                        loaded
                            .grants
                            .into_iter()
                            .filter(|grant| grant.applies_to(&self.lane.worktree)),
                    );
                    ignored.extend(
                        loaded
                            .ignored
                            .into_iter()
                            .filter(|ignored| ignored.grant.applies_to(&self.lane.worktree)),
                    );
                }
                Err(err) => {
                    tracing::warn!(error = %err, "permission grants not read");
                    notes.push(json!({"error": err.to_string()}));
                }
            }
        }
        (grants, ignored, notes)
    }
}

/// `tool`, `verb`, `args` (truncated) and `cwd` of the part that decided (the first part when
/// every part was allowed), `rule`, `decision`, `reason`, and the whole `command` (truncated)
/// with its number of `parts`.
fn recorded(
    tool: &str,
    question: &str,
    decision: &Decision,
    lane: &LaneContext,
) -> PermissionDecided {
    let deciding: Option<&PartDecision> = decision
        .parts
        .iter()
        .find(|part| part.verdict == decision.verdict && part.rule == decision.rule)
        .or(decision.parts.first());
    let args: Vec<String> = deciding
        .map(|part| {
            part.args
                .iter()
                .take(MAX_ARGS)
                .map(|arg| truncated(arg, MAX_ARG_CHARS))
                .collect()
        })
        .unwrap_or_default();
    PermissionDecided {
        tool: Some(tool.to_owned()),
        verb: deciding.map(|part| part.verb.clone()),
        args,
        cwd: Some(
            deciding
                .map_or(&lane.worktree, |part| &part.cwd)
                .display()
                .to_string(),
        ),
        rule: decision.rule.to_string(),
        decision: wire_name(&decision.verdict),
        reason: decision.reason.clone(),
        command: Some(truncated(question, MAX_COMMAND_CHARS)),
        parts: Some(decision.parts.len()),
        profile: wire_name(&lane.profile),
        grant_stores: Vec::new(),
    }
}

/// An ask for a question no policy could read.
fn unread(
    tool: Option<&str>,
    cwd: Option<&str>,
    rule: &str,
    reason: String,
    lane: &LaneContext,
) -> PermissionDecided {
    PermissionDecided {
        tool: tool.map(str::to_owned),
        verb: None,
        args: Vec::new(),
        cwd: cwd.map(str::to_owned),
        rule: rule.to_owned(),
        decision: wire_name(&Verdict::Ask),
        reason,
        command: None,
        parts: None,
        profile: wire_name(&lane.profile),
        grant_stores: Vec::new(),
    }
}

fn truncated(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
