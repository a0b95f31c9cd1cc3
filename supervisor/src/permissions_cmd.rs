//! `clawpool permissions check`: one permission question decided the way a lane would decide
//! it (`docs/permissions.md`); `clawpool permissions explain`: a lane's last questions and why
//! each was decided, from its events; `clawpool answer --remember SCOPE`: an operator's yes to the
//! question a lane waits on, kept as a grant. The lane's side (its worktree, repository,
//! sibling lanes, profile and grant stores) is `clawpool_lane::permission_gate`; the decision
//! and the store are `clawpool_recovery::permissions`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clawpool_lanes::payload::{DialogAnswered, PermissionDecided};
use clawpool_lanes::{EventSource, LaneEvent, Payload};
use clawpool_recovery::permissions::{
    Decision, Grant, GrantKey, GrantScope, GrantStore, LaneContext, Profile, Request, Tool,
};
use serde_json::json;

use crate::cli::{AnswerArgs, OutputFormat, PermissionsCheckArgs, PermissionsExplainArgs};
use crate::output::CommandError;
use clawpool_lane::permission_gate::lane_context;

/// `clawpool permissions check`.
pub fn run_check(args: &PermissionsCheckArgs) -> Result<ExitCode, CommandError> {
    let cwd = match &args.cwd {
        Some(cwd) if !cwd.is_dir() => {
            return Err(CommandError::invalid(
                "cwd_not_found",
                format!("--cwd {}: no such folder", cwd.display()),
            ));
        }
        Some(cwd) => Some(cwd.canonicalize().unwrap_or_else(|_| cwd.clone())),
        None => None,
    };
    let worktree = match &args.lane {
        Some(lane) => crate::board::find_lane(lane)?.dir,
        None => {
            let here = std::env::current_dir()
                .map_err(|e| CommandError::io("reading the current folder", e))?;
            worktree_top(cwd.as_deref().unwrap_or(&here))
        }
    };
    let loaded = crate::loaded::load(&args.config, Some(&worktree))?;
    let settings = loaded.policy.permissions();
    let mut lane = lane_context(&worktree, settings)?;
    if let Some(name) = &args.profile {
        lane.profile = Profile::parse(name).ok_or_else(|| {
            CommandError::invalid(
                "invalid_argument",
                format!(
                    "--profile {name:?}: expected read-only, workspace-write or \
                     danger-full-access"
                ),
            )
        })?;
    }
    let request = match (&args.command, &args.write, &args.edit) {
        (Some(command), _, _) if command.trim().is_empty() => {
            return Err(CommandError::invalid(
                "invalid_argument",
                "--command is empty: give the command the agent asks to run",
            ));
        }
        (Some(command), _, _) => Request::Command {
            command: command.clone(),
            cwd: cwd.unwrap_or_else(|| lane.worktree.clone()),
        },
        (None, Some(path), _) => Request::File {
            tool: Tool::Write,
            path: path.clone(),
        },
        (None, None, Some(path)) => Request::File {
            tool: Tool::Edit,
            path: path.clone(),
        },
        (None, None, None) => {
            return Err(CommandError::invalid(
                "invalid_argument",
                "give --command, --write or --edit",
            ));
        }
    };
    let decision = settings.policy.decide(&lane, &request);
    match args.output_format {
        OutputFormat::Json => println!("{}", check_json(&lane, &request, &decision)),
        OutputFormat::Text => print_check(&lane, &decision),
    }
    Ok(ExitCode::SUCCESS)
}

fn check_json(lane: &LaneContext, request: &Request, decision: &Decision) -> serde_json::Value {
    let (tool, question, cwd) = match request {
        Request::Command { command, cwd } => ("bash", command.clone(), cwd.clone()),
        Request::File { tool, path } => (
            tool.name(),
            path.display().to_string(),
            lane.worktree.clone(),
        ),
    };
    json!({
        "decision": decision.verdict,
        "rule": decision.rule,
        "reason": decision.reason,
        "tool": tool,
        "question": question,
        "cwd": cwd,
        "worktree": lane.worktree,
        "profile": lane.profile,
        "parts": decision.parts,
    })
}

fn print_check(lane: &LaneContext, decision: &Decision) {
    println!(
        "{} by {}: {}",
        decision.verdict.name(),
        decision.rule,
        decision.reason
    );
    println!(
        "lane: {} (profile {})",
        lane.worktree.display(),
        lane.profile.name()
    );
    for part in &decision.parts {
        let text = std::iter::once(part.verb.as_str())
            .chain(part.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        println!(
            "  {:<5} {text}  [{}] in {}",
            part.verdict.name(),
            part.rule,
            part.cwd.display()
        );
    }
}

/// The top of the git worktree `dir` is in (the first folder up with a `.git`), else `dir`.
fn worktree_top(dir: &Path) -> PathBuf {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.ancestors()
        .find(|folder| folder.join(".git").exists())
        .unwrap_or(&dir)
        .to_path_buf()
}

/// `clawpool answer LANE --choice yes --remember SCOPE`: answers the tool-permission question
/// the lane waits on, then keeps a grant of its tool and verb with SCOPE (`once` keeps none) in
/// the repository's store (`lane`, `repository`) or the user's (`always`).
pub async fn run_answer_remembering(args: &AnswerArgs) -> Result<ExitCode, CommandError> {
    let remember = args.remember.as_deref().unwrap_or("once");
    let scope = GrantScope::parse(remember).ok_or_else(|| {
        CommandError::invalid(
            "invalid_argument",
            format!("--remember {remember:?}: expected once, lane, repository or always"),
        )
    })?;
    if scope != GrantScope::Once && args.choice != "yes" {
        return Err(CommandError::invalid(
            "invalid_argument",
            format!(
                "--remember {remember} keeps a yes; --choice {:?} is answered without --remember",
                args.choice
            ),
        ));
    }
    let lane = crate::board::find_lane(&args.lane.lane)?;
    let worktree = lane.dir.canonicalize().unwrap_or(lane.dir.clone());
    let name = worktree
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let grant = match scope {
        GrantScope::Once => None,
        _ => Some(grant_for_waiting_question(
            &lane.events,
            scope,
            &worktree,
            &name,
        )?),
    };
    let command = clawpool_lane::handshake::OperatorCommand::Answer {
        choice: args.choice.clone(),
    };
    let verdict = clawpool_pool::operator::send_operator(
        &clawpool_pool::request::LaneArg::here(&args.lane.lane),
        &command,
    )
    .await?;
    let lane_label = args.lane.lane.display().to_string();
    let Some(grant) = grant.filter(|_| verdict.is_done()) else {
        return Ok(crate::operator_cmd::print_verdict(
            &lane_label,
            &command,
            &verdict,
            args.lane.output_format,
            serde_json::Value::Null,
        ));
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
    if let Some(aside) = &set_aside {
        eprintln!(
            "clawpool: warning: the grants store {} was set aside as {} ({}); a new one was started",
            aside.from.display(),
            aside.to.display(),
            aside.reason
        );
    }
    let extra = json!({"grant": kept, "store": store.path(), "set_aside": set_aside});
    if args.lane.output_format == OutputFormat::Text {
        println!(
            "grant {}: {} {} for {} (kept in {})",
            kept.id,
            kept.tool,
            kept.verb,
            match scope {
                GrantScope::Lane => format!("lane {name}"),
                GrantScope::Repository => "every lane of this repository".to_owned(),
                _ => "every lane".to_owned(),
            },
            store.path().display()
        );
    }
    Ok(crate::operator_cmd::print_verdict(
        &lane_label,
        &command,
        &verdict,
        args.lane.output_format,
        extra,
    ))
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
fn read_events(file: &Path) -> Vec<LaneEvent> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The lane's permission questions: where each `lane.permission.decided` is in `events`, and
/// what it recorded.
fn permission_questions(events: &[LaneEvent]) -> Vec<(usize, PermissionDecided)> {
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
fn dialog_answer(events: &[LaneEvent]) -> Option<DialogAnswered> {
    events.iter().find_map(|event| match event.payload() {
        Some(Payload::DialogAnswered(answer))
            if answer.dialog == DialogAnswered::TOOL_PERMISSION =>
        {
            Some(answer)
        }
        _ => None,
    })
}

/// `clawpool permissions explain LANE`: the lane's last `--last` permission questions, oldest
/// first, each with its decision, the rule or grant that decided, how it came (`hook`,
/// `screen`) and how it was answered (`policy`, `operator`, the hook, or waiting), and the
/// counts over the lane's whole log.
pub fn run_explain(args: &PermissionsExplainArgs) -> Result<ExitCode, CommandError> {
    let lane = crate::board::find_lane(&args.lane)?;
    let events = read_events(&lane.events);
    let decided = permission_questions(&events);
    let count = |verdict: &str| {
        decided
            .iter()
            .filter(|(_, decided)| decided.decision == verdict)
            .count()
    };
    let counts = json!({"allowed": count("allow"), "denied": count("deny"), "asked": count("ask")});
    let questions: Vec<serde_json::Value> = decided
        .iter()
        .enumerate()
        .skip(decided.len().saturating_sub(args.last))
        .map(|(index, (at, question))| {
            let until = decided
                .get(index + 1)
                .map_or(events.len(), |(next, _)| *next);
            explained(&events[*at], question, &events[*at..until])
        })
        .collect();
    let name = args.lane.display().to_string();
    match args.output_format {
        OutputFormat::Json => println!(
            "{}",
            json!({"lane": name, "worktree": lane.dir, "counts": counts, "questions": questions})
        ),
        OutputFormat::Text => {
            println!(
                "lane {name}: {} permission question(s): {} allowed, {} denied, {} asked",
                decided.len(),
                counts["allowed"],
                counts["denied"],
                counts["asked"]
            );
            for question in &questions {
                let text = |key: &str| question[key].as_str().unwrap_or("-").to_owned();
                println!(
                    "{} {} {} `{}`: {} by {} — {}; {}",
                    question["at_ms"],
                    text("source"),
                    text("tool"),
                    text("command"),
                    text("decision"),
                    text("rule"),
                    text("reason"),
                    text("answered")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One question (`event`, its `lane.permission.decided`, which recorded `decided`) with what
/// followed it until the next question (`after`): who answered, and how.
fn explained(
    event: &LaneEvent,
    decided: &PermissionDecided,
    after: &[LaneEvent],
) -> serde_json::Value {
    let source = event.source.unwrap_or(EventSource::Screen);
    let answered = match (dialog_answer(after), decided.decision.as_str(), source) {
        (Some(answer), _, _) => format!("answered {} by {}", answer.choice, answer.by),
        (None, "allow" | "deny", EventSource::Hook) => "answered through the hook".to_owned(),
        (None, "ask", _) => "left to a person; not answered yet".to_owned(),
        (None, _, _) => "not answered".to_owned(),
    };
    json!({
        "at_ms": event.at_ms,
        "source": source,
        "tool": decided.tool,
        "command": decided.command,
        "verb": decided.verb,
        "args": decided.args,
        "cwd": decided.cwd,
        "decision": decided.decision,
        "rule": decided.rule,
        "grant": decided.grant(),
        "reason": decided.reason,
        "profile": decided.profile,
        "answered": answered,
    })
}
