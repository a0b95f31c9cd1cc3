//! `recover`: a recovery recipe run by hand (`docs/recovery.md`) — the one named, or the one
//! the lane's policy decides for its state — by sending the lane's control socket the
//! operator command that carries it out. Only recipes an existing operator command carries out
//! honestly are run (a restart, answering the trust dialog); the others are refused with what
//! to do instead, before anything is sent.

use clawpool_lane::facts::lane_facts;
use clawpool_lane::handshake::{OperatorCommand, RestartRequest};
use clawpool_lanes::state_file::now_secs;
use clawpool_recovery::{Action, Recipe, RecipeBook, Step};

use crate::config::Loaded;
use crate::error::{CommandError, EXIT_FAILURE};
use crate::lane_lookup::{FoundLane, find_lane_arg};
use crate::request::{
    DecidedRecipe, RecipeRun, RecoverRefusal, RecoverRefused, RecoverReply, RecoverRequest,
};

/// Runs the recipe `request` names, or the one the lane's policy decides; `loaded` gives the
/// policy, read for the lane's folder.
pub(crate) async fn recover<L: std::ops::Deref<Target = Loaded>>(
    request: RecoverRequest,
    loaded: impl FnOnce(&FoundLane) -> Result<L, CommandError>,
) -> Result<RecoverReply, CommandError> {
    // The recipe names are the built-in book's (a policy file only changes their parameters):
    // an unknown name is refused before anything is looked up.
    if let Some(name) = &request.recipe
        && RecipeBook::builtin().get(name).is_none()
    {
        let recipes = RecipeBook::builtin()
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        return Ok(RecoverReply::Refused(RecoverRefused {
            message: format!("unknown recipe {name:?}; recipes: {}", recipes.join(", ")),
            why: RecoverRefusal::UnknownRecipe {
                recipes,
                runnable_by_hand: runnable_names(),
            },
        }));
    }
    if let Some(name) = &request.recipe
        && let Some(Err(why)) = RecipeBook::builtin()
            .get(name)
            .map(|recipe| by_hand(recipe, &request.lane.label()))
    {
        return Ok(RecoverReply::Refused(not_by_hand(name, None, &why)));
    }
    let lane = find_lane_arg(&request.lane)?;
    let loaded = loaded(&lane)?;
    let policy = &loaded.policy;
    let doc = lane.state().map_err(|err| CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit: EXIT_FAILURE,
    });
    let lane_name = doc
        .as_ref()
        .map_or_else(|_| lane.dir.display().to_string(), |doc| doc.lane.clone());
    let (recipe_name, decided_by) = match &request.recipe {
        Some(name) => (name.clone(), None),
        None => {
            let doc = doc.as_ref().map_err(|err| CommandError {
                kind: err.kind,
                message: err.message.clone(),
                exit: err.exit,
            })?;
            let facts = lane_facts(doc, &lane.events, now_secs());
            match policy.decide(&facts) {
                Some(decision) => match decision.action {
                    Action::Recover { recipe } => (recipe, Some(decision.rule)),
                    other => {
                        return Ok(RecoverReply::Refused(RecoverRefused {
                            message: format!(
                                "the policy decides no recipe for lane {lane_name} ({}): rule {} -> {other}; \
                                 give one with --recipe (`clawpool policy explain` shows why)",
                                doc.lane_state(),
                                decision.rule
                            ),
                            why: RecoverRefusal::NoRecipe {
                                decision: Some(DecidedRecipe {
                                    rule: decision.rule,
                                    action: other,
                                }),
                            },
                        }));
                    }
                },
                None => {
                    return Ok(RecoverReply::Refused(RecoverRefused {
                        message: format!(
                            "no policy rule decides a recipe for lane {lane_name} ({}); \
                             give one with --recipe (`clawpool policy explain` shows why)",
                            doc.lane_state()
                        ),
                        why: RecoverRefusal::NoRecipe { decision: None },
                    }));
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
            return Ok(RecoverReply::Refused(not_by_hand(
                &recipe_name,
                decided_by.as_deref(),
                &why,
            )));
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
    Ok(RecoverReply::Ran(RecipeRun {
        lane: lane_name,
        recipe: recipe_name,
        decided_by,
        command,
        verdict,
    }))
}

/// The refusal of a recipe `recover` cannot carry out.
fn not_by_hand(recipe: &str, rule: Option<&str>, why: &str) -> RecoverRefused {
    let decided = rule
        .map(|rule| format!(" (decided by rule {rule})"))
        .unwrap_or_default();
    RecoverRefused {
        message: format!(
            "recipe {recipe}{decided} cannot be run by hand: {why}; `clawpool recover` runs: {}",
            runnable_names().join(", ")
        ),
        why: RecoverRefusal::NotRunnableByHand {
            recipe: recipe.to_owned(),
            decided_by: rule.map(str::to_owned),
            runnable_by_hand: runnable_names(),
        },
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

/// The recipes `recover` can run by hand, in book order.
fn runnable_names() -> Vec<String> {
    RecipeBook::builtin()
        .recipes()
        .iter()
        .filter(|r| by_hand(r, "LANE").is_ok())
        .map(|r| r.name.clone())
        .collect()
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
