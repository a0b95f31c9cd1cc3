//! `clawpool mcp`: the repository's pool as an MCP server on stdio (`docs/mcp.md`), for an
//! orchestrating agent (Claude Code, Codex, any MCP client).
//!
//! - [`server`]: the tools, their schemas, tiers, audit lines and receipts.
//! - [`access`]: the permission tiers and the audit log.
//! - [`pool_api`]: the one adapter to the pool every tool goes through.
//!
//! The rule that a lane never drives the pool (`docs/trust.md`) covers this entry point too:
//! a server started inside a lane — itself, an ancestor, its session or process-group leader
//! carrying a lane's mark, as `clawpool_lane::caller` reads them — refuses to start, whatever
//! its tier. A refusal at start, not per tool: a lane's agent gets no server at all, so no
//! tool (read ones neither) can be used to probe or to wait on other lanes.

mod access;
mod pool_api;
mod server;

use std::process::ExitCode;

use clawpool_lane::caller::{Caller, ProcFs};
use rmcp::ServiceExt;

use crate::cli::McpArgs;
use crate::output::{CommandError, EXIT_FAILURE};

/// Runs the server until the client closes its end.
pub async fn run(args: &McpArgs) -> Result<ExitCode, CommandError> {
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
    let service = server::PoolServer::new(api, args.tier)
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
