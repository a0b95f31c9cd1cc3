//! `clawpool policy explain`, `clawpool policy check` and `clawpool recover`: the recovery
//! policy as an operator sees it.
//!
//! `explain` rebuilds a lane's [`LaneFacts`] from its state file (status, subphase, failure
//! class, the trigger the state file lets us name, green level, freshness, the recovery ledger,
//! ages) and shows every rule of the policy against them. `check` loads a policy file and lists
//! every problem. `recover` runs a recipe by hand: the pool's ([`clawpool_pool::recover`]);
//! this file renders what it came to.

use std::process::ExitCode;
use std::sync::Arc;

use clawpool_lane::handshake::OperatorCommand;
use clawpool_lanes::WorkerStateDoc;
use clawpool_lanes::state_file::now_secs;
use clawpool_pool::observer::Silent;
use clawpool_pool::request::{LaneArg, RecipeRun, RecoverRefusal, RecoverReply, RecoverRequest};
use clawpool_pool::{Pool, PoolReply, PoolRequest};
use clawpool_recovery::{
    Action, AttemptDecision, LaneFacts, Ledger, Policy, Recipe, format_duration,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::board::FoundLane;
use crate::cli::{OutputFormat, PolicyCheckArgs, PolicyExplainArgs, RecoverArgs};
use crate::output::{CommandError, EXIT_FAILURE, EXIT_INVALID_INPUT};
use clawpool_lane::facts::lane_facts;

/// `clawpool policy explain LANE`.
pub fn run_explain(args: &PolicyExplainArgs) -> Result<ExitCode, CommandError> {
    let lane = crate::board::find_lane(&args.lane.lane)?;
    let doc = read_doc(&lane)?;
    let loaded = crate::loaded::load(&args.config, Some(&lane.dir))?;
    let policy = &loaded.policy;
    let facts = lane_facts(&doc, &lane.events, now_secs());
    let rules = policy.explain(&facts);
    let decisions = policy.evaluate(&facts);
    let decision = decisions
        .iter()
        .find(|d| !matches!(d.action, Action::Notify { .. }));
    let notifies: Vec<_> = decisions
        .iter()
        .filter(|d| matches!(d.action, Action::Notify { .. }))
        .collect();
    let ledger = match decision.map(|d| &d.action) {
        Some(Action::Recover { recipe }) => policy
            .recipes()
            .get(recipe)
            .map(|recipe| ledger_verdict(&doc, recipe, &facts.lane)),
        _ => None,
    };
    match args.lane.output_format {
        OutputFormat::Json => println!(
            "{}",
            json!({
                "lane": facts.lane,
                "state": doc.lane_state().to_string(),
                "facts": facts,
                "policy": policy.source_name(),
                "rules": rules,
                "notifies": notifies,
                "decision": decision,
                "ledger": ledger,
            })
        ),
        OutputFormat::Text => {
            println!("lane {}: {}", facts.lane, describe_facts(&doc, &facts));
            println!(
                "policy: {} ({} rule(s))",
                policy.source_name(),
                policy.rules().len()
            );
            for rule in &rules {
                println!("{rule}");
            }
            for notify in &notifies {
                println!("notifies: {} -> {}", notify.rule, notify.action);
            }
            match decision {
                Some(decision) => {
                    println!("decision: {} -> {}", decision.rule, decision.action);
                    if let Action::Escalate { next_action, .. } = &decision.action {
                        println!(
                            "next action: {}",
                            next_action.replace("{lane}", &facts.lane)
                        );
                    }
                    if let Some(ledger) = &ledger {
                        println!("ledger: {}", ledger.message());
                    }
                }
                None => println!("decision: none (no rule decides for this lane)"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `clawpool policy check FILE`.
pub fn run_check(args: &PolicyCheckArgs) -> Result<ExitCode, CommandError> {
    let name = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file).map_err(|e| {
        CommandError::invalid(
            "invalid_policy",
            format!("cannot read the policy file {name}: {e}"),
        )
    })?;
    match Policy::from_toml(&text, &name) {
        Ok(policy) => {
            let rules: Vec<&str> = policy.rules().iter().map(|r| r.name.as_str()).collect();
            let hooks: Vec<&str> = policy.hooks().iter().map(|h| h.name.as_str()).collect();
            match args.output_format {
                OutputFormat::Json => println!(
                    "{}",
                    json!({"valid": true, "policy": name, "rules": rules, "hooks": hooks})
                ),
                OutputFormat::Text => println!(
                    "{name}: ok ({} rule(s), {} hook(s))",
                    rules.len(),
                    hooks.len()
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            let problems: Vec<ProblemDoc<_>> = err
                .problems
                .iter()
                .map(|problem| ProblemDoc {
                    problem,
                    text: format!("{name}: {problem}"),
                })
                .collect();
            let message = format!("{name} has {} problem(s)\n{err}", err.problems.len());
            Ok(fail(
                args.output_format,
                "invalid_policy",
                &message,
                json!({"problems": problems}),
                EXIT_INVALID_INPUT,
            ))
        }
    }
}

/// A policy file's problem as `policy check` prints it: its fields, and `text`, the line a person
/// reads.
#[derive(Serialize)]
struct ProblemDoc<'a, P: Serialize> {
    #[serde(flatten)]
    problem: &'a P,
    text: String,
}

/// `clawpool recover LANE [--recipe NAME]`: the pool's request ([`clawpool_pool::recover`]), its
/// reply rendered.
pub async fn run_recover(args: &RecoverArgs) -> Result<ExitCode, CommandError> {
    let format = args.lane.output_format;
    let request = PoolRequest::Recover(RecoverRequest {
        lane: LaneArg::here(&args.lane.lane),
        recipe: args.recipe.clone(),
    });
    let reply = Pool::reading(crate::loaded::input(&args.config))
        .handle(request, Arc::new(Silent))
        .await?;
    let PoolReply::Recover(reply) = reply else {
        unreachable!("the pool answers a recover with the recipe run or refused")
    };
    let run = match reply {
        RecoverReply::Ran(run) => run,
        RecoverReply::Refused(refused) => {
            let extra = refusal_fields(&refused.why);
            return Ok(fail(
                format,
                refused.why.kind(),
                &refused.message,
                extra,
                refused.why.exit(),
            ));
        }
    };
    if let OutputFormat::Text = format
        && run.verdict.is_done()
    {
        let what = match &run.command {
            OperatorCommand::Restart(request) => format!(
                "restart (the lane's prompt delivered again: {})",
                if request.redeliver { "yes" } else { "no" }
            ),
            OperatorCommand::Trust => "trust (answer the trust dialog with yes)".to_owned(),
            other => other.describe(),
        };
        let decided = run
            .decided_by
            .as_ref()
            .map(|rule| format!(", as rule {rule} decides"))
            .unwrap_or_default();
        println!(
            "lane {}: running {} by hand{decided}: {what}",
            run.lane, run.recipe
        );
    }
    Ok(crate::operator_cmd::print_verdict(
        &run.lane,
        &run.command,
        &run.verdict,
        format,
        run_fields(&run),
    ))
}

/// The fields a recipe run adds to its verdict's document: `recipe`, `decided_by`, `command`.
pub fn run_fields(run: &RecipeRun) -> Value {
    json!({"recipe": run.recipe, "decided_by": run.decided_by, "command": run.command})
}

/// The fields a refused `recover`'s error document carries besides `kind` and `message`.
pub fn refusal_fields(why: &RecoverRefusal) -> Value {
    match why {
        RecoverRefusal::UnknownRecipe {
            recipes,
            runnable_by_hand,
        } => json!({"recipes": recipes, "runnable_by_hand": runnable_by_hand}),
        RecoverRefusal::NotRunnableByHand {
            recipe,
            decided_by,
            runnable_by_hand,
        } => {
            json!({"recipe": recipe, "decided_by": decided_by, "runnable_by_hand": runnable_by_hand})
        }
        RecoverRefusal::NoRecipe { decision } => json!({ "decision": decision }),
    }
}

/// What the lane's recovery ledger says to another automatic attempt of a recipe now
/// (`ledger` in `policy explain`'s document, docs/cli.md).
#[derive(Debug, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
enum LedgerVerdict {
    /// It would be made: attempt `attempt`.
    Attempt { attempt: u32, message: String },
    /// Not now: attempt `entry` is under way.
    Busy { entry: usize, message: String },
    /// Refused: the recipe's attempts are used up within its window.
    Exhausted { attempts: u32, message: String },
}

impl LedgerVerdict {
    /// The verdict in words.
    fn message(&self) -> &str {
        match self {
            LedgerVerdict::Attempt { message, .. }
            | LedgerVerdict::Busy { message, .. }
            | LedgerVerdict::Exhausted { message, .. } => message,
        }
    }
}

/// What the lane's recovery ledger says to another automatic attempt of `recipe` now.
fn ledger_verdict(doc: &WorkerStateDoc, recipe: &Recipe, lane: &str) -> LedgerVerdict {
    let ledger = Ledger::from_record(doc.recovery.clone());
    match ledger.decide(recipe, now_secs()) {
        AttemptDecision::Attempt { attempt } => LedgerVerdict::Attempt {
            attempt,
            message: format!(
                "allowed: it would be attempt {attempt} of {} (at most {} within {})",
                recipe.name,
                recipe.max_attempts,
                format_duration(recipe.window)
            ),
        },
        AttemptDecision::Busy { id } => LedgerVerdict::Busy {
            entry: id.0,
            message: format!("not now: attempt #{} is under way", id.0),
        },
        AttemptDecision::Exhausted {
            attempts, window, ..
        } => LedgerVerdict::Exhausted {
            attempts,
            message: format!(
                "refused: {} is exhausted ({attempts} of {} attempts used within {}); it stays so \
                 until an operator runs it (`clawpool recover {lane} --recipe {}`)",
                recipe.name,
                recipe.max_attempts,
                format_duration(window),
                recipe.name
            ),
        },
    }
}

fn read_doc(lane: &FoundLane) -> Result<WorkerStateDoc, CommandError> {
    lane.state().map_err(|err| CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit: EXIT_FAILURE,
    })
}

/// One line: the lane's state and the facts the rules read.
fn describe_facts(doc: &WorkerStateDoc, facts: &LaneFacts) -> String {
    let trigger = facts
        .trigger
        .map_or_else(|| "none".to_owned(), |t| t.to_string());
    let attempts = if facts.attempts.is_empty() {
        "none".to_owned()
    } else {
        facts
            .attempts
            .iter()
            .map(|(recipe, n)| format!("{recipe} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let secs = |s: u64| format_duration(std::time::Duration::from_secs(s));
    format!(
        "{}\n    trigger {trigger} · green {} · branch {} · recovery {} · attempts {attempts}\n    \
         in state for {} · no progress for {}",
        doc.lane_state(),
        facts.green,
        facts.freshness,
        facts.recovery,
        secs(facts.seconds_in_state),
        secs(facts.seconds_since_progress),
    )
}

/// Prints an error with extra fields (JSON: `{"error": {"kind", "message", …extra}}` on
/// stderr) and returns the exit code.
fn fail(format: OutputFormat, kind: &str, message: &str, extra: Value, exit: u8) -> ExitCode {
    match format {
        OutputFormat::Text => eprintln!("clawpool: error: {message}"),
        OutputFormat::Json => {
            let mut error = json!({"kind": kind, "message": message});
            if let (Some(error), Value::Object(extra)) = (error.as_object_mut(), extra) {
                error.extend(extra);
            }
            eprintln!("{}", json!({ "error": error }));
        }
    }
    ExitCode::from(exit)
}
