//! `clawpool mcp`: the repository's pool as an MCP server on stdio, or over Streamable HTTP
//! with `--listen` (`docs/mcp.md`), for an orchestrating agent (Claude Code, Codex, any MCP
//! client); and `clawpool mcp token`, the HTTP server's bearer tokens.
//!
//! - [`server`]: the tools, their schemas, tiers, audit lines and receipts.
//! - [`access`]: the permission tiers and the audit log.
//! - [`http`]: the HTTP listener and its gate (Origin, bearer token).
//! - [`tokens`]: the token file.
//! - [`resources`]: lane states as resources, and their subscriptions.
//! - [`pool_api`]: the one adapter to the pool every tool goes through.
//!
//! The rule that a lane never drives the pool (`docs/trust.md`) covers this entry point too:
//! a server started inside a lane — itself, an ancestor, its session or process-group leader
//! carrying a lane's mark, as `clawpool_lane::caller` reads them — refuses to start, whatever
//! its tier. A refusal at start, not per tool: a lane's agent gets no server at all, so no
//! tool (read ones neither) can be used to probe or to wait on other lanes.

mod access;
mod http;
mod pool_api;
mod resources;
mod server;
mod tokens;

use std::process::ExitCode;

use clawpool_lane::caller::{Caller, ProcFs};
use rmcp::ServiceExt;

use crate::cli::{McpAction, McpArgs, McpTokenArgs, OutputFormat};
use crate::output::{CommandError, EXIT_FAILURE};

/// Runs the server until the client closes its end (stdio) or a signal (HTTP).
pub async fn run(args: &McpArgs) -> Result<ExitCode, CommandError> {
    if let Some(McpAction::Token(token)) = &args.action {
        return make_token(token);
    }
    let listen = match &args.listen {
        Some(addr) => Some(
            http::Listen::parse(addr).map_err(|m| CommandError::invalid("invalid_argument", m))?,
        ),
        None => None,
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if let Err(refusal) = Caller::identify(std::process::id(), uid, &ProcFs).check_operator() {
        return Err(CommandError {
            kind: "caller_refused",
            message: format!("clawpool mcp: {}", refusal.reason),
            exit: crate::output::EXIT_INVALID_INPUT,
        });
    }
    let api = pool_api::PoolApi::open(&args.repo, args.config.config.clone()).map_err(|e| {
        CommandError {
            kind: if e.kind == "not_a_repository" {
                "not_a_repository"
            } else {
                "io"
            },
            message: e.message,
            exit: crate::output::EXIT_INVALID_INPUT,
        }
    })?;
    if let Some(listen) = listen {
        let format = args.output_format;
        http::serve(api, &listen, |url| match format {
            OutputFormat::Json => println!("{}", serde_json::json!({ "listening": url })),
            OutputFormat::Text => println!("clawpool mcp: listening on {url}"),
        })
        .await
        .map_err(|e| CommandError::io("clawpool mcp --listen", e))?;
        return Ok(ExitCode::SUCCESS);
    }
    let service = server::PoolServer::new(api, server::Access::Launch(args.tier))
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| CommandError {
            kind: "mcp_failed",
            message: format!("starting the MCP session: {e}"),
            exit: EXIT_FAILURE,
        })?;
    service.waiting().await.map_err(|e| CommandError {
        kind: "mcp_failed",
        message: format!("the MCP session: {e}"),
        exit: EXIT_FAILURE,
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `clawpool mcp token`: a new token, printed once; or, with `--revoke ID`, one fewer.
fn make_token(args: &McpTokenArgs) -> Result<ExitCode, CommandError> {
    let repo = clawpool_worktree::Repo::open(&args.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let dir = clawpool_worktree::layout::StateDir::of(repo.common_dir());
    let tokens = tokens::Tokens::in_dir(dir.root());
    if let Some(id) = &args.revoke {
        return revoke_token(&tokens, id, args.output_format);
    }
    // clap requires --tier unless --revoke is given.
    let Some(tier) = args.tier else {
        return Err(CommandError::invalid(
            "invalid_argument",
            "clawpool mcp token needs --tier or --revoke ID",
        ));
    };
    let (token, entry) = tokens
        .create(tier, args.label.clone())
        .map_err(|e| CommandError::io("writing the token file", e))?;
    match args.output_format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({
                "token": token,
                "id": entry.id,
                "tier": entry.tier,
                "file": tokens.path(),
            })
        ),
        OutputFormat::Text => {
            println!("{token}");
            eprintln!(
                "a {} token (id {}); only its digest is kept in {}: it is not shown again",
                entry.tier.as_str(),
                entry.id,
                tokens.path().display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `clawpool mcp token --revoke ID`: removes the token from the file, which every request reads,
/// so a running server refuses it from its next request on.
fn revoke_token(
    tokens: &tokens::Tokens,
    id: &str,
    format: OutputFormat,
) -> Result<ExitCode, CommandError> {
    let entry = tokens
        .revoke(id)
        .map_err(|e| CommandError::io("revoking a token", e))?
        .ok_or_else(|| {
            CommandError::invalid(
                "unknown_token",
                format!("no token with id {id:?} in {}", tokens.path().display()),
            )
        })?;
    match format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({"revoked": entry.id, "tier": entry.tier, "file": tokens.path()})
        ),
        OutputFormat::Text => println!(
            "revoked the {} token {}{}",
            entry.tier.as_str(),
            entry.id,
            entry
                .label
                .as_deref()
                .map(|l| format!(" ({l})"))
                .unwrap_or_default()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
