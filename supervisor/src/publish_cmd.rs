//! `clawpool push LANE` and `clawpool pr LANE`: flags and configuration in, the pool's
//! publishing (`clawpool_pool::publish`) run, its typed report out (text or JSON). The token
//! is read here from the variable `[forge] token_env` names, and goes nowhere but the forge.
//! Both refuse to run inside a lane (its agent's processes carry the lane's mark, as
//! `clawpool_lane::caller` reads it): publishing is a person's decision, not the agent's.

use std::process::ExitCode;

use clawpool_lane::caller::{Caller, ProcFs};
use clawpool_pool::publish::{self, LaneToPublish, PublishError};
use clawpool_worktree::Repo;

use crate::cli::{OutputFormat, PublishArgs};
use crate::output::{CommandError, EXIT_FAILURE, EXIT_INVALID_INPUT};

/// The lane, its repository and the `[forge]` settings.
fn prepare(
    args: &PublishArgs,
) -> Result<(LaneToPublish, Repo, clawpool_agents::config::ForgeSettings), CommandError> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if let Err(refusal) = Caller::identify(std::process::id(), uid, &ProcFs).check_operator() {
        return Err(CommandError::invalid(
            "caller_refused",
            format!("a lane may not publish: {}", refusal.reason),
        ));
    }
    let found = crate::board::find_lane(&args.lane)?;
    let loaded = crate::loaded::load(&args.config, Some(&found.dir))?;
    let repo = Repo::open(&found.dir)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let mut forge = loaded.config.forge();
    if let Some(remote) = &args.remote {
        forge.remote = remote.clone();
    }
    Ok((
        LaneToPublish {
            dir: found.dir,
            events: found.events,
        },
        repo,
        forge,
    ))
}

fn failed(err: PublishError) -> CommandError {
    let exit = match err {
        PublishError::NotALane(_)
        | PublishError::NoBranch(_)
        | PublishError::NoRepository
        | PublishError::NoToken(_) => EXIT_INVALID_INPUT,
        _ => EXIT_FAILURE,
    };
    CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit,
    }
}

/// `clawpool push LANE`.
pub async fn run_push(args: &PublishArgs) -> Result<ExitCode, CommandError> {
    let (lane, repo, forge) = prepare(args)?;
    let report = publish::push(&repo, &lane, &forge.remote)
        .await
        .map_err(failed)?;
    match args.output_format {
        OutputFormat::Json => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
        OutputFormat::Text => {
            let pushed = &report.pushed;
            let what = if pushed.up_to_date {
                "already on"
            } else {
                "pushed to"
            };
            println!(
                "{} {what} {}: {} at {}",
                report.lane,
                pushed.remote,
                pushed.branch,
                short(&pushed.head)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `clawpool pr LANE`.
pub async fn run_pr(args: &PublishArgs) -> Result<ExitCode, CommandError> {
    let (lane, repo, forge) = prepare(args)?;
    let token = std::env::var(&forge.token_env).unwrap_or_default();
    let progress = crate::progress::Progress::spinner(
        args.output_format,
        "pushing and asking the forge".to_owned(),
    );
    let report = publish::pull_request(&repo, &lane, &forge, token).await;
    progress.clear();
    let report = report.map_err(failed)?;
    match args.output_format {
        OutputFormat::Json => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
        OutputFormat::Text => {
            let what = if report.existing {
                "already has"
            } else {
                "opened"
            };
            println!(
                "{} {what} pull request #{} on {} ({} into {}): {}",
                report.lane,
                report.number,
                report.repository,
                report.push.branch,
                report.base,
                report.url
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn short(sha: &str) -> String {
    sha.chars().take(10).collect()
}
