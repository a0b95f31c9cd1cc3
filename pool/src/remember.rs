//! `answer --remember`: an operator's yes to the tool-permission question a lane waits on,
//! kept as a grant of its tool and verb (`docs/permissions.md`) — in the repository's store
//! (scope `lane`, `repository`) or the user's (`always`), signed with clawpool's key so that a
//! grant nobody kept through here is never honoured. The question is read from the lane's
//! own events; the answer goes to the lane like any operator command ([`crate::operator`]),
//! and the grant is kept only once the lane did it.

use std::path::Path;

use clawpool_lane::handshake::{OperatorCommand, Verdict};
use clawpool_lanes::payload::{DialogAnswered, PermissionDecided};
use clawpool_lanes::{LaneEvent, Payload};
use clawpool_recovery::permissions::{Grant, GrantKey, GrantScope, GrantStore, Tool};

use crate::error::CommandError;
use crate::lane_lookup::find_lane_arg;
use crate::request::{KeptGrant, RememberReply, RememberRequest};

/// Answers the question the lane waits on with `request.choice` and, when the lane did it and
/// the scope keeps one, keeps its grant.
pub(crate) async fn answer_remembering(
    request: RememberRequest,
) -> Result<RememberReply, CommandError> {
    let lane = find_lane_arg(&request.lane)?;
    let worktree = lane.dir.canonicalize().unwrap_or(lane.dir.clone());
    let name = worktree
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let scope = request.scope;
    let grant = match scope {
        GrantScope::Once => None,
        _ => Some(grant_for_waiting_question(
            &lane.events,
            scope,
            &worktree,
            &name,
        )?),
    };
    let command = OperatorCommand::Answer {
        choice: request.choice.clone(),
    };
    let verdict: Verdict = crate::operator::send_operator(&request.lane, &command).await?;
    let Some(grant) = grant.filter(|_| verdict.is_done()) else {
        return Ok(RememberReply {
            verdict,
            kept: None,
        });
    };
    let store = match scope {
        GrantScope::Always => GrantStore::user(|key| std::env::var(key).ok()).ok_or_else(|| {
            CommandError::invalid(
                "no_state_dir",
                "the question was answered, but an always grant needs XDG_STATE_HOME or HOME",
            )
        })?,
        _ => repository_grant_store(&worktree)?,
    };
    // The pool signs what it keeps: a grant without clawpool's MAC is never honoured.
    let key = GrantKey::user_path(|key| std::env::var(key).ok())
        .ok_or_else(|| {
            CommandError::invalid(
                "no_state_dir",
                "the question was answered, but keeping a grant needs XDG_STATE_HOME or HOME \
                 (for the grant key)",
            )
        })
        .and_then(|path| {
            GrantKey::load_or_create(&path).map_err(|err| {
                CommandError::invalid(
                    "grant_not_kept",
                    format!("the question was answered, but its grant was not kept: {err}"),
                )
            })
        })?;
    let (kept, set_aside) = store.add(grant, &key).map_err(|err| {
        CommandError::invalid(
            "grant_not_kept",
            format!("the question was answered, but its grant was not kept: {err}"),
        )
    })?;
    Ok(RememberReply {
        verdict,
        kept: Some(KeptGrant {
            grant: kept,
            store: store.path().to_owned(),
            set_aside,
            lane: name,
        }),
    })
}

/// The repository's grants store for the lane in `worktree`.
fn repository_grant_store(worktree: &Path) -> Result<GrantStore, CommandError> {
    let repo = clawpool_worktree::Repo::open(worktree).map_err(|err| {
        CommandError::invalid("not_a_repository", format!("{}: {err}", worktree.display()))
    })?;
    Ok(GrantStore::in_folder(
        clawpool_worktree::layout::StateDir::of(repo.common_dir()).root(),
    ))
}

/// The grant (not yet numbered) of the question the lane waits on: its latest
/// `lane.permission.decided` was an ask, with no tool-permission dialog answered since.
fn grant_for_waiting_question(
    events: &Path,
    scope: GrantScope,
    worktree: &Path,
    lane: &str,
) -> Result<Grant, CommandError> {
    let events = read_events(events);
    let decided = permission_questions(&events);
    let asked = decided
        .last()
        .filter(|(at, asked)| asked.decision == "ask" && !answered(&events[*at..]))
        .map(|(_, asked)| asked)
        .ok_or_else(|| {
            CommandError::invalid(
                "no_permission_question",
                format!(
                    "lane {lane} is not waiting on a tool-permission question the policy asked                      a person about; nothing was answered (answer without --remember)"
                ),
            )
        })?;
    let not_grantable = |why: &str| {
        CommandError::invalid(
            "not_grantable",
            format!(
                "the question of lane {lane} ({}) cannot be kept as a grant: {why}; nothing was                  answered (answer without --remember)",
                asked.command.as_deref().unwrap_or_default()
            ),
        )
    };
    let tool = asked
        .tool
        .as_deref()
        .and_then(Tool::parse)
        .ok_or_else(|| not_grantable("its tool could not be read"))?;
    let verb = match tool {
        Tool::Bash => asked
            .verb
            .as_deref()
            .filter(|verb| !verb.is_empty())
            .ok_or_else(|| not_grantable("the command could not be read into verbs"))?,
        Tool::Write | Tool::Edit => "*",
    };
    Ok(Grant {
        id: String::new(),
        scope,
        tool: tool.name().to_owned(),
        verb: verb.to_owned(),
        worktree: worktree.to_path_buf(),
        lane: lane.to_owned(),
        question: asked.command.clone().unwrap_or_default(),
        granted_at_ms: clawpool_lanes::now_ms(),
        mac: None,
    })
}

/// A lane's events, as its log holds them (none when it has no log yet).
pub fn read_events(file: &Path) -> Vec<LaneEvent> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The lane's permission questions: where each `lane.permission.decided` is in `events`, and
/// what it recorded.
pub fn permission_questions(events: &[LaneEvent]) -> Vec<(usize, PermissionDecided)> {
    events
        .iter()
        .enumerate()
        .filter_map(|(at, event)| match event.payload() {
            Some(Payload::PermissionDecided(decided)) => Some((at, decided)),
            _ => None,
        })
        .collect()
}

/// Whether a tool-permission dialog was answered among `events`.
fn answered(events: &[LaneEvent]) -> bool {
    dialog_answer(events).is_some()
}

/// The first answer to a tool-permission dialog among `events`.
pub fn dialog_answer(events: &[LaneEvent]) -> Option<DialogAnswered> {
    events.iter().find_map(|event| match event.payload() {
        Some(Payload::DialogAnswered(answer))
            if answer.dialog == DialogAnswered::TOOL_PERMISSION =>
        {
            Some(answer)
        }
        _ => None,
    })
}
