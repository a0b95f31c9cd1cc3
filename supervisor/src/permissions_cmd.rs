//! `clawpool permissions check`: one permission question decided the way a lane would decide
//! it (`docs/permissions.md`); `clawpool permissions explain`: a lane's last questions and why
//! each was decided, from its events; `clawpool answer --remember SCOPE`: an operator's yes to the
//! question a lane waits on, kept as a grant. The lane's side (its worktree, repository,
//! sibling lanes, profile and grant stores) is `clawpool_lane::permission_gate`; the decision
//! and the store are `clawpool_recovery::permissions`; answering and keeping the grant is the
//! pool's (`clawpool_pool::remember`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clawpool_lanes::payload::PermissionDecided;
use clawpool_lanes::{EventSource, LaneEvent, wire_name};
use clawpool_pool::config::ConfigInput;
use clawpool_pool::observer::Silent;
use clawpool_pool::request::{LaneArg, RememberRequest};
use clawpool_pool::{Pool, PoolReply, PoolRequest};
use clawpool_recovery::permissions::{Decision, GrantScope, LaneContext, Profile, Request, Tool};
use serde::Serialize;
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

/// `clawpool answer LANE --choice yes --remember SCOPE`: the flags checked and handed to the
/// pool ([`clawpool_pool::remember`]: the question the lane waits on answered, then a grant of
/// its tool and verb kept with SCOPE, `once` keeping none), its reply rendered.
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
    let request = PoolRequest::AnswerRemembering(RememberRequest {
        lane: LaneArg::here(&args.lane.lane),
        choice: args.choice.clone(),
        scope,
    });
    let reply = Pool::reading(ConfigInput::of_this_process(None))
        .handle(request, Arc::new(Silent))
        .await?;
    let PoolReply::AnswerRemembering(reply) = reply else {
        unreachable!("the pool answers an answer --remember with its verdict and grant")
    };
    let command = clawpool_lane::handshake::OperatorCommand::Answer {
        choice: args.choice.clone(),
    };
    let lane_label = args.lane.lane.display().to_string();
    let Some(kept) = reply.kept else {
        return Ok(crate::operator_cmd::print_verdict(
            &lane_label,
            &command,
            &reply.verdict,
            args.lane.output_format,
            serde_json::Value::Null,
        ));
    };
    if let Some(aside) = &kept.set_aside {
        eprintln!(
            "clawpool: warning: the grants store {} was set aside as {} ({}); a new one was started",
            aside.from.display(),
            aside.to.display(),
            aside.reason
        );
    }
    let extra = json!({"grant": kept.grant, "store": kept.store, "set_aside": kept.set_aside});
    if args.lane.output_format == OutputFormat::Text {
        println!(
            "grant {}: {} {} for {} (kept in {})",
            kept.grant.id,
            kept.grant.tool,
            kept.grant.verb,
            match scope {
                GrantScope::Lane => format!("lane {}", kept.lane),
                GrantScope::Repository => "every lane of this repository".to_owned(),
                _ => "every lane".to_owned(),
            },
            kept.store.display()
        );
    }
    Ok(crate::operator_cmd::print_verdict(
        &lane_label,
        &command,
        &reply.verdict,
        args.lane.output_format,
        extra,
    ))
}

/// `clawpool permissions explain LANE`: the lane's last `--last` permission questions, oldest
/// first, each with its decision, the rule or grant that decided, how it came (`hook`,
/// `screen`) and how it was answered (`policy`, `operator`, the hook, or waiting), and the
/// counts over the lane's whole log.
pub fn run_explain(args: &PermissionsExplainArgs) -> Result<ExitCode, CommandError> {
    let lane = crate::board::find_lane(&args.lane)?;
    let events = clawpool_pool::remember::read_events(&lane.events);
    let decided = clawpool_pool::remember::permission_questions(&events);
    let count = |verdict: &str| {
        decided
            .iter()
            .filter(|(_, decided)| decided.decision == verdict)
            .count()
    };
    let counts = QuestionCounts {
        allowed: count("allow"),
        denied: count("deny"),
        asked: count("ask"),
    };
    let questions: Vec<ExplainedQuestion> = decided
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
                counts.allowed,
                counts.denied,
                counts.asked
            );
            for question in &questions {
                let text = |field: Option<&String>| field.map_or("-", String::as_str).to_owned();
                println!(
                    "{} {} {} `{}`: {} by {} — {}; {}",
                    question.at_ms,
                    wire_name(&question.source),
                    text(question.tool),
                    text(question.command),
                    question.decision,
                    question.rule,
                    question.reason,
                    question.answered
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How a lane's permission questions were decided, over its whole log.
#[derive(Debug, Serialize)]
struct QuestionCounts {
    allowed: usize,
    denied: usize,
    asked: usize,
}

/// One permission question as `permissions explain` shows it (docs/cli.md).
#[derive(Debug, Serialize)]
struct ExplainedQuestion<'a> {
    at_ms: u64,
    source: EventSource,
    tool: Option<&'a String>,
    command: Option<&'a String>,
    verb: Option<&'a String>,
    args: &'a [String],
    cwd: Option<&'a String>,
    decision: &'a str,
    rule: &'a str,
    grant: Option<&'a str>,
    reason: &'a str,
    profile: &'a str,
    /// Who answered, and how.
    answered: String,
}

/// One question (`event`, its `lane.permission.decided`, which recorded `decided`) with what
/// followed it until the next question (`after`): who answered, and how.
fn explained<'a>(
    event: &LaneEvent,
    decided: &'a PermissionDecided,
    after: &[LaneEvent],
) -> ExplainedQuestion<'a> {
    let source = event.source.unwrap_or(EventSource::Screen);
    let answered = match (
        clawpool_pool::remember::dialog_answer(after),
        decided.decision.as_str(),
        source,
    ) {
        (Some(answer), _, _) => format!("answered {} by {}", answer.choice, answer.by),
        (None, "allow" | "deny", EventSource::Hook) => "answered through the hook".to_owned(),
        (None, "ask", _) => "left to a person; not answered yet".to_owned(),
        (None, _, _) => "not answered".to_owned(),
    };
    ExplainedQuestion {
        at_ms: event.at_ms,
        source,
        tool: decided.tool.as_ref(),
        command: decided.command.as_ref(),
        verb: decided.verb.as_ref(),
        args: &decided.args,
        cwd: decided.cwd.as_ref(),
        decision: &decided.decision,
        rule: &decided.rule,
        grant: decided.grant(),
        reason: &decided.reason,
        profile: &decided.profile,
        answered,
    }
}
