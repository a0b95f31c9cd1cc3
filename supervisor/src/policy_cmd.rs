//! `clawpool policy explain`, `clawpool policy check` and `clawpool recover`: the recovery
//! policy as an operator sees it.
//!
//! `explain` rebuilds a lane's [`LaneFacts`] from its state file (status, subphase, failure
//! class, the trigger the state file lets us name, green level, freshness, the recovery ledger,
//! ages) and shows every rule of the policy against them. `check` loads a policy file and lists
//! every problem. `recover` runs a recipe by hand by sending the lane's control socket the
//! operator command that carries the recipe out; only recipes an existing operator command
//! carries out honestly are run, the others are refused with what to do instead.

use std::process::ExitCode;

use clawpool_lane::handshake::{OperatorCommand, RestartRequest};
use clawpool_lanes::WorkerStateDoc;
use clawpool_lanes::state_file::now_secs;
use clawpool_recovery::{
    Action, AttemptDecision, LaneFacts, Ledger, Policy, Recipe, RecipeBook, Step, format_duration,
};
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
                        println!("ledger: {}", ledger["message"].as_str().unwrap_or_default());
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
            let problems: Vec<Value> = err
                .problems
                .iter()
                .map(|p| {
                    let mut value = serde_json::to_value(p).unwrap_or_default();
                    value["text"] = format!("{name}: {p}").into();
                    value
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

/// `clawpool recover LANE [--recipe NAME]`.
pub async fn run_recover(args: &RecoverArgs) -> Result<ExitCode, CommandError> {
    let format = args.lane.output_format;
    // The recipe names are the built-in book's (a policy file only changes their parameters):
    // an unknown name is refused before anything is looked up.
    if let Some(name) = &args.recipe
        && RecipeBook::builtin().get(name).is_none()
    {
        let names = RecipeBook::builtin()
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        return Ok(fail(
            format,
            "unknown_recipe",
            &format!("unknown recipe {name:?}; recipes: {}", names.join(", ")),
            json!({"recipes": names, "runnable_by_hand": runnable_names()}),
            EXIT_INVALID_INPUT,
        ));
    }
    if let Some(name) = &args.recipe
        && let Some(Err(why)) = RecipeBook::builtin()
            .get(name)
            .map(|recipe| by_hand(recipe, &args.lane.lane.display().to_string()))
    {
        return Ok(not_by_hand(format, name, None, &why));
    }
    let lane = crate::board::find_lane(&args.lane.lane)?;
    let loaded = crate::loaded::load(&args.config, Some(&lane.dir))?;
    let policy = &loaded.policy;
    let doc = read_doc(&lane);
    let lane_name = doc
        .as_ref()
        .map_or_else(|_| lane.dir.display().to_string(), |doc| doc.lane.clone());
    let (recipe_name, decided_by) = match &args.recipe {
        Some(name) => (name.clone(), None),
        None => {
            let doc = doc.as_ref().map_err(clone_error)?;
            let facts = lane_facts(doc, &lane.events, now_secs());
            match policy.decide(&facts) {
                Some(decision) => match decision.action {
                    Action::Recover { recipe } => (recipe, Some(decision.rule)),
                    other => {
                        return Ok(fail(
                            format,
                            "no_recipe",
                            &format!(
                                "the policy decides no recipe for lane {lane_name} ({}): rule {} -> {other}; \
                                 give one with --recipe (`clawpool policy explain` shows why)",
                                doc.lane_state(),
                                decision.rule
                            ),
                            json!({"decision": {"rule": decision.rule, "action": other}}),
                            EXIT_FAILURE,
                        ));
                    }
                },
                None => {
                    return Ok(fail(
                        format,
                        "no_recipe",
                        &format!(
                            "no policy rule decides a recipe for lane {lane_name} ({}); \
                             give one with --recipe (`clawpool policy explain` shows why)",
                            doc.lane_state()
                        ),
                        json!({"decision": null}),
                        EXIT_FAILURE,
                    ));
                }
            }
        }
    };
    let recipe = policy
        .recipes()
        .require(&recipe_name)
        .map_err(|e| CommandError::invalid("unknown_recipe", e.to_string()))?;
    let command = match by_hand(recipe, &lane_name) {
        Ok(command) => command,
        Err(why) => {
            return Ok(not_by_hand(
                format,
                &recipe_name,
                decided_by.as_deref(),
                &why,
            ));
        }
    };
    let socket = lane.socket();
    let verdict = match clawpool_lane::control::operator_verdict(&socket, &command).await {
        Ok(verdict) => verdict,
        Err(err) => {
            let hint = match &doc {
                Ok(doc) if doc.status.is_terminal() => format!(
                    "the lane has ended ({}) and nothing drives it any more: start it again with \
                     `clawpool spawn`",
                    doc.lane_state()
                ),
                _ => "is `clawpool run` or `clawpool spawn` running there?".to_owned(),
            };
            return Err(CommandError::invalid(
                "lane_not_running",
                format!("no running lane at {} ({err}); {hint}", lane.dir.display()),
            ));
        }
    };
    if let OutputFormat::Text = format
        && verdict.is_done()
    {
        let what = match &command {
            OperatorCommand::Restart(request) => format!(
                "restart (the lane's prompt delivered again: {})",
                if request.redeliver { "yes" } else { "no" }
            ),
            OperatorCommand::Trust => "trust (answer the trust dialog with yes)".to_owned(),
            other => other.describe(),
        };
        let decided = decided_by
            .as_ref()
            .map(|rule| format!(", as rule {rule} decides"))
            .unwrap_or_default();
        println!("lane {lane_name}: running {recipe_name} by hand{decided}: {what}");
    }
    Ok(crate::operator_cmd::print_verdict(
        &lane_name,
        &command,
        &verdict,
        format,
        json!({"recipe": recipe_name, "decided_by": decided_by, "command": command}),
    ))
}

/// What the lane's recovery ledger says to another automatic attempt of `recipe` now:
/// `{"verdict": "attempt" | "busy" | "exhausted", "message", …}`.
fn ledger_verdict(doc: &WorkerStateDoc, recipe: &Recipe, lane: &str) -> Value {
    let ledger = Ledger::from_record(doc.recovery.clone());
    match ledger.decide(recipe, now_secs()) {
        AttemptDecision::Attempt { attempt } => json!({
            "verdict": "attempt",
            "attempt": attempt,
            "message": format!(
                "allowed: it would be attempt {attempt} of {} (at most {} within {})",
                recipe.name,
                recipe.max_attempts,
                format_duration(recipe.window)
            ),
        }),
        AttemptDecision::Busy { id } => json!({
            "verdict": "busy",
            "entry": id.0,
            "message": format!("not now: attempt #{} is under way", id.0),
        }),
        AttemptDecision::Exhausted {
            attempts, window, ..
        } => json!({
            "verdict": "exhausted",
            "attempts": attempts,
            "message": format!(
                "refused: {} is exhausted ({attempts} of {} attempts used within {}); it stays so \
                 until an operator runs it (`clawpool recover {lane} --recipe {}`)",
                recipe.name,
                recipe.max_attempts,
                format_duration(window),
                recipe.name
            ),
        }),
    }
}

/// The operator command that carries `recipe` out on `lane`, or why none does (the commands
/// it names, for `lane`). A recipe is run by hand when its one action is a restart
/// (`Restart`) or answering the trust dialog (`Trust`); its checks (`wait_for_progress`) are
/// what the lane's supervisor watches anyway. Every other action has no operator command that
/// does exactly it.
fn by_hand(recipe: &Recipe, lane: &str) -> Result<OperatorCommand, String> {
    let actions: Vec<&Step> = recipe
        .steps
        .iter()
        .filter(|s| !matches!(s, Step::WaitForProgress(_)))
        .collect();
    match actions.as_slice() {
        [
            Step::Restart {
                resume,
                redeliver_prompt,
            },
        ] => Ok(OperatorCommand::Restart(RestartRequest {
            by: format!("operator:{}", recipe.name),
            resume: *resume,
            redeliver: *redeliver_prompt,
        })),
        [Step::AnswerTrust] => Ok(OperatorCommand::Trust),
        steps => {
            let listed = recipe
                .steps
                .iter()
                .map(Step::name)
                .collect::<Vec<_>>()
                .join(", ");
            let instead = match steps.first() {
                Some(Step::SendKey(_)) => format!(
                    "no operator command presses the interrupt key before a nudge; \
                     `clawpool send {lane} TEXT` queues text, `clawpool restart {lane} --resume` \
                     restarts"
                ),
                Some(Step::Resubmit) => format!(
                    "no operator command presses Enter on the draft; `clawpool restart {lane} \
                     --redeliver` starts the worker again and delivers the prompt"
                ),
                Some(Step::MergeForward) => format!(
                    "`clawpool merge-forward {lane}` merges the base forward (outside the ledger)"
                ),
                // What the recipe hands a person is its own escalation's next action (a
                // provider's outage is not a dialog to answer).
                Some(Step::Escalate) => format!(
                    "it only hands the lane to a person: {}",
                    recipe.escalation.next_action_for(lane)
                ),
                _ => "no operator command carries these steps out".to_owned(),
            };
            Err(format!("its steps are {listed}: {instead}"))
        }
    }
}

/// Refuses a recipe `recover` cannot carry out (exit 2).
fn not_by_hand(format: OutputFormat, recipe: &str, rule: Option<&str>, why: &str) -> ExitCode {
    let decided = rule
        .map(|rule| format!(" (decided by rule {rule})"))
        .unwrap_or_default();
    fail(
        format,
        "recipe_not_runnable_by_hand",
        &format!(
            "recipe {recipe}{decided} cannot be run by hand: {why}; `clawpool recover` runs: {}",
            runnable_names().join(", ")
        ),
        json!({"recipe": recipe, "decided_by": rule, "runnable_by_hand": runnable_names()}),
        EXIT_INVALID_INPUT,
    )
}

/// The recipes `recover` can run by hand, in book order.
fn runnable_names() -> Vec<String> {
    RecipeBook::builtin()
        .recipes()
        .iter()
        .filter(|r| by_hand(r, "LANE").is_ok())
        .map(|r| r.name.clone())
        .collect()
}

fn read_doc(lane: &FoundLane) -> Result<WorkerStateDoc, CommandError> {
    lane.state().map_err(|err| CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit: EXIT_FAILURE,
    })
}

fn clone_error(err: &CommandError) -> CommandError {
    CommandError {
        kind: err.kind,
        message: err.message.clone(),
        exit: err.exit,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_restarts_and_answering_trust_run_by_hand() {
        assert_eq!(
            runnable_names(),
            [
                "answer_trust_again",
                "restart_after_misdelivery",
                "restart_crashed_worker"
            ]
        );
        let book = RecipeBook::builtin();
        let restart = by_hand(book.get("restart_crashed_worker").expect("recipe"), "a");
        assert_eq!(
            restart,
            Ok(OperatorCommand::Restart(RestartRequest {
                by: "operator:restart_crashed_worker".into(),
                resume: false,
                redeliver: true,
            }))
        );
        assert_eq!(
            by_hand(book.get("answer_trust_again").expect("recipe"), "a"),
            Ok(OperatorCommand::Trust)
        );
        let nudge = by_hand(book.get("interrupt_and_nudge").expect("recipe"), "a")
            .expect_err("needs the interrupt");
        assert!(nudge.contains("interrupt key"), "{nudge}");
        assert!(nudge.contains("`clawpool send a TEXT`"), "{nudge}");
        // Every command it names is for the lane, never a placeholder.
        let merge = by_hand(
            book.get("merge_forward_stale_branch").expect("recipe"),
            "notes",
        )
        .expect_err("no operator command");
        assert!(merge.contains("`clawpool merge-forward notes`"), "{merge}");
        let provider = by_hand(book.get("wait_for_provider").expect("recipe"), "notes")
            .expect_err("only escalates");
        assert!(
            !provider.contains("LANE") && !provider.contains("answer the dialog"),
            "{provider}"
        );
        assert!(provider.contains("provider"), "{provider}");
    }
}
