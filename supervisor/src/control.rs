//! A lane's control socket (`.claw/control.sock`, mode 0600): how `clawpool trust`, `answer`,
//! `send`, `stop` and `restart` reach the process running the lane. One JSON line in (an
//! [`OperatorCommand`]), one JSON line out.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use clawpool::handshake::OperatorCommand;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::checks::{LaneOp, OpRequest};
use tokio::task::JoinHandle;

/// Listens on `socket`: operator commands go to the handshake, branch requests
/// ([`LaneOp`]) to `ops`, whose reply is sent back when the work is done.
pub fn listen(
    socket: &Path,
    commands: mpsc::Sender<OperatorCommand>,
    ops: mpsc::Sender<OpRequest>,
) -> std::io::Result<JoinHandle<()>> {
    // A socket file left by a lane that died is stale: nobody can be listening on it.
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let commands = commands.clone();
            let ops = ops.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                let read = BufReader::new(read).read_line(&mut line).await;
                if let Ok(op) = serde_json::from_str::<LaneOp>(&line) {
                    let (tx, rx) = oneshot::channel();
                    let reply = match ops.send((op, tx)).await {
                        Ok(()) => rx.await.unwrap_or_else(
                            |_| serde_json::json!({"ok": false, "error": "the lane has ended"}),
                        ),
                        Err(_) => serde_json::json!({"ok": false, "error": "the lane has ended"}),
                    };
                    let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
                    return;
                }
                let reply = match read {
                    Ok(_) => match serde_json::from_str::<OperatorCommand>(&line) {
                        Ok(command) => match commands.send(command).await {
                            Ok(()) => serde_json::json!({"ok": true}),
                            Err(_) => {
                                serde_json::json!({"ok": false, "error": "the lane has ended"})
                            }
                        },
                        Err(err) => serde_json::json!({"ok": false, "error": err.to_string()}),
                    },
                    Err(err) => serde_json::json!({"ok": false, "error": err.to_string()}),
                };
                let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
            });
        }
    }))
}

/// Sends one command to the lane listening on `socket`; returns its reply.
pub async fn send(socket: &Path, command: &OperatorCommand) -> std::io::Result<String> {
    request(socket, &serde_json::to_string(command)?).await
}

/// Sends one JSON line to the lane listening on `socket`; returns its reply line.
pub async fn request(socket: &Path, line: &str) -> std::io::Result<String> {
    let stream = UnixStream::connect(socket).await?;
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{line}\n").as_bytes()).await?;
    let mut reply = String::new();
    BufReader::new(read).read_line(&mut reply).await?;
    Ok(reply.trim().to_owned())
}
