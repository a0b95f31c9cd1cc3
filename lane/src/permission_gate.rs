//! A lane's tool-permission gate: reads the permission dialog on the agent's screen, asks the
//! permission policy (`clawpool_recovery::permissions`), and says what to answer and what to
//! record as `lane.permission.decided` (`docs/permissions.md`). The handshake asks it through
//! an effect and answers the dialog itself.

use std::path::{Path, PathBuf};

use clawpool_recovery::permissions::PermissionSettings;
use clawpool_recovery::permissions::{
    Decision, LaneContext, PartDecision, PermissionPolicy, Request, Verdict, read_dialog,
};
use clawpool_worktree::Repo;

use crate::error::LaneError;
use crate::registry::{lane_registry, registered_names};
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
    let worktree = worktree
        .canonicalize()
        .unwrap_or_else(|_| worktree.to_path_buf());
    let repo = Repo::open(&worktree).ok();
    let mut other_lanes = Vec::new();
    let mut packet_profile = None;
    if let Some(repo) = &repo {
        for name in registered_names(repo) {
            let Ok(entry) = lane_registry(repo, &name).entry() else {
                continue;
            };
            let lane = entry.worktree.canonicalize().unwrap_or(entry.worktree);
            if lane == worktree {
                packet_profile = entry.permission_profile;
            } else {
                other_lanes.push(lane);
            }
        }
    }
    let profile = settings
        .profile_for(packet_profile.as_deref())
        .map_err(|message| LaneError::invalid("invalid_permission_profile", message))?;
    Ok(LaneContext {
        repository: repo.map_or_else(|| worktree.clone(), |repo| repo.root().to_path_buf()),
        worktree,
        other_lanes,
        home: std::env::var_os("HOME").map(PathBuf::from),
        profile,
    })
}

/// The permission policy and the lane it decides for.
#[derive(Debug, Clone)]
pub struct PermissionGate {
    policy: PermissionPolicy,
    lane: LaneContext,
}

/// What the gate decided about the question on screen.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionAnswer {
    /// Allow (answer yes), deny (answer no) or ask (a person answers).
    pub verdict: Verdict,
    /// The question in one line (tool and command or file): the same question asked again
    /// after it was answered is this same text.
    pub question: String,
    /// The `lane.permission.decided` event's detail.
    pub detail: Value,
}

impl PermissionGate {
    /// A gate deciding with `policy` for `lane`.
    pub fn new(policy: PermissionPolicy, lane: LaneContext) -> Self {
        Self { policy, lane }
    }

    /// Decides the question the permission dialog on `rows` asks; a dialog it cannot read is
    /// an ask.
    pub fn decide(&self, rows: &[String]) -> PermissionAnswer {
        let Some(request) = read_dialog(rows, &self.lane.worktree) else {
            return PermissionAnswer {
                verdict: Verdict::Ask,
                question: String::new(),
                detail: json!({
                    "tool": null, "verb": null, "args": [], "cwd": self.lane.worktree,
                    "rule": "unreadable_dialog", "decision": "ask",
                    "reason": "the dialog's tool and command could not be read whole",
                    "profile": self.lane.profile,
                }),
            };
        };
        let decision = self.policy.decide(&self.lane, &request);
        let (tool, question) = match &request {
            Request::Command { command, .. } => ("bash", command.clone()),
            Request::File { tool, path } => (tool.name(), path.display().to_string()),
        };
        let detail = event_detail(tool, &question, &decision, &self.lane);
        PermissionAnswer {
            verdict: decision.verdict,
            question: format!("{tool}: {question}"),
            detail,
        }
    }
}

/// `tool`, `verb`, `args` (truncated) and `cwd` of the part that decided (the first part when
/// every part was allowed), `rule`, `decision`, `reason`, and the whole `command` (truncated)
/// with its number of `parts`.
fn event_detail(tool: &str, question: &str, decision: &Decision, lane: &LaneContext) -> Value {
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
    json!({
        "tool": tool,
        "verb": deciding.map(|part| part.verb.clone()),
        "args": args,
        "cwd": deciding.map_or(&lane.worktree, |part| &part.cwd),
        "rule": decision.rule,
        "decision": decision.verdict,
        "reason": decision.reason,
        "command": truncated(question, MAX_COMMAND_CHARS),
        "parts": decision.parts.len(),
        "profile": lane.profile,
    })
}

fn truncated(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
