//! The tmux servers adopted lanes run on: each connected once (never started: a server that
//! is not running has no lane to adopt) and shared by its lanes, so that one lane's end never
//! closes a server under another.

use std::collections::BTreeMap;
use std::sync::Arc;

use clawpool_lane::drive::Terminal;
use clawpool_pty::{TmuxConfig, TmuxServer};

use crate::error::CommandError;

/// The servers found so far, by socket name (`None`: no server runs on that socket).
#[derive(Clone, Default)]
pub struct TmuxServers(Arc<tokio::sync::Mutex<BTreeMap<String, Option<TmuxServer>>>>);

impl TmuxServers {
    /// The running server on `socket`, if there is one.
    pub async fn get(&self, socket: &str) -> Result<Option<TmuxServer>, CommandError> {
        let mut servers = self.0.lock().await;
        if let Some(server) = servers.get(socket) {
            return Ok(server.clone());
        }
        let server = TmuxServer::connect_existing(TmuxConfig::new(socket)).await?;
        servers.insert(socket.to_owned(), server.clone());
        Ok(server)
    }

    /// Kills each server no lane runs on any more (and removes its socket).
    pub async fn close_unused(&self) {
        let servers: Vec<TmuxServer> = self.0.lock().await.values().flatten().cloned().collect();
        for server in servers {
            Terminal::Tmux(server).close_if_unused().await;
        }
    }
}
