//! The background supervisor: `clawpool daemon` holds the repository's supervisor lock and
//! listens on `<common git dir>/clawpool/daemon.sock` (mode 0600) for lanes to run.
//!
//! Protocol: [`protocol`], one typed JSON line each way. A spawn request validates the packet
//! exactly as `clawpool spawn` does (every problem at once, nothing created) and starts its
//! lanes in the daemon, with the configuration the request carries — the asking command's
//! flag and environment, loaded again for each request — so a configuration changed since the
//! daemon started reaches the lanes started from then on; a configuration that no longer loads
//! refuses the request by name. Lanes the daemon adopted keep the configuration the daemon
//! loaded when it started.
//!
//! On start, holding the lock, the daemon adopts every registered lane that has not ended:
//! a live tmux session is driven on from the lane's state file; a lane whose worker is gone
//! becomes `failed{worker_lost}`; a lane that cannot be taken over (an unreadable state file)
//! is left alone and named in the daemon's log.
//! Read-only commands never need the daemon: they read the lanes' files.
//!
//! A follow-up to a lane that ended (`clawpool send`, the MCP `send_to_lane`) is the daemon's
//! too when it runs ([`follow_up`]): it drives the lane as one of its own and answers once the
//! lane ended again, so the repository has one live owner of its running lanes.
//!
//! Requests are taken only from callers inside no lane, of the daemon's own user
//! ([`Caller::check_operator`]); a refused one is answered `caller_refused` and logged.

pub mod follow_up;
pub mod protocol;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clawpool_worktree::Repo;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::cli::{DaemonArgs, OutputFormat, SpawnArgs};
use crate::loaded::Loaded;
use crate::output::{CommandError, EXIT_FAILURE};
use crate::spawn::Board;
use clawpool_lane::caller::Caller;
use clawpool_lane::interrupt::Interrupt;
use clawpool_pool::adoption::adopt_lanes;
use clawpool_pool::observer::Observer;
use clawpool_pool::registry::registered_lanes;
use clawpool_pool::request::NotAdopted;
use clawpool_pool::request::SkippedLane;
use clawpool_pool::start::start_lanes;
use clawpool_pool::supervisor_lock::{
    LockHolder, SupervisorRole, hold_supervisor_lock, lock_path, supervisor_lock_holder,
};

/// How long `spawn --detach` waits for a daemon it started to listen.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How many daemons `spawn --detach` starts before giving up: one that exits without serving
/// was refused the lock (by another supervisor's probe of it, or a daemon that has since
/// stopped) or failed; beyond a few, it keeps failing and its log says why.
const MAX_STARTS: usize = 3;

use protocol::{
    DaemonError, DaemonErrorKind, DaemonReply, DaemonRequest, Reply, Request, SkippedEntry,
    SpawnRequest,
};

/// Where the daemon of a repository listens.
pub fn socket_path(repo: &Repo) -> PathBuf {
    repo.state_dir().daemon_socket()
}

pub async fn run(args: DaemonArgs, loaded: Loaded) -> Result<ExitCode, CommandError> {
    let repo = Repo::open(&args.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let socket = socket_path(&repo);
    if args.stop {
        let reply = request(&socket, Request::Stop).await.map_err(|e| {
            CommandError::invalid(
                "daemon_not_running",
                format!("no daemon for this repository ({e})"),
            )
        })?;
        return match reply {
            Reply::Stopping => {
                println!("{}", json!({"ok": true, "stopping": true}));
                Ok(ExitCode::SUCCESS)
            }
            other => Err(refusal(other, "the daemon refused to stop")),
        };
    }
    let _lock = hold_supervisor_lock(&lock_path(&repo), SupervisorRole::Daemon)?;
    // The daemon owns the repository's lanes: it tells people about them.
    let notifier = crate::notifying::start(&repo, &loaded);
    // Holding the lock, any socket file left here belongs to a daemon that died.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .map_err(|e| CommandError::io("listening on the daemon socket", e))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| CommandError::io("securing the daemon socket", e))?;
    eprintln!(
        "clawpool: daemon for {} listening on {}",
        repo.root().display(),
        socket.display()
    );
    let running = Arc::new(AtomicUsize::new(0));
    // Holding the lock, every lane that has not ended lost its supervisor: take them over.
    let names = registered_lanes(&repo);
    let board = Board::new(OutputFormat::Json);
    board.starting(&names);
    let board: Arc<dyn Observer> = Arc::new(board);
    // The daemon is stopped with `clawpool daemon --stop`, not by a signal to its lanes.
    let adoptions = adopt_lanes(&repo, names, &loaded, &board, &Interrupt::never());
    // The board prints nothing for these in JSON: the log must say which lanes were left alone.
    for refused in &adoptions.not_adopted {
        log_not_adopted(refused);
    }
    running.fetch_add(adoptions.tasks.len(), Ordering::SeqCst);
    let adopted: Vec<_> = adoptions
        .tasks
        .into_iter()
        .map(|task| {
            let running = Arc::clone(&running);
            tokio::spawn(async move {
                if let Ok((_, Err(refused))) = task.await {
                    log_not_adopted(&refused);
                }
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    // Once every adopted lane is over, a tmux server none of them (nor a lane started since)
    // runs on any more goes.
    let servers = adoptions.servers;
    tokio::spawn(async move {
        for task in adopted {
            let _ = task.await;
        }
        servers.close_unused().await;
    });
    let root = repo.root().to_owned();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        // Only from outside every lane: a lane's agent starts no lanes and stops no daemon.
        let admitted = Caller::of(&stream).and_then(Caller::check_operator);
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        if BufReader::new(read).read_line(&mut line).await.is_err() {
            continue;
        }
        let request = match admitted {
            Err(refused) => {
                eprintln!("clawpool: daemon request refused: {}", refused.reason);
                Err(DaemonError::new(
                    DaemonErrorKind::CallerRefused,
                    format!("refused: {}", refused.reason),
                ))
            }
            Ok(_) => DaemonRequest::parse(&line).map(|parsed| parsed.request),
        };
        let reply = match request {
            Err(err) => Reply::Error(err),
            // Answered once its lane ended, from a task of its own: the daemon goes on serving
            // meanwhile.
            Ok(Request::FollowUp(request)) => {
                follow_up::serve(root.clone(), request, &running, write);
                continue;
            }
            Ok(Request::Stop) => Reply::Stopping,
            Ok(Request::Status) => Reply::Status {
                running: running.load(Ordering::SeqCst),
            },
            Ok(Request::Spawn(spawn)) => match start(&root, &spawn, &running).await {
                Ok((lanes, skipped)) => Reply::Spawned {
                    lanes,
                    skipped: skipped
                        .into_iter()
                        .map(|lane| SkippedEntry {
                            lane: lane.name,
                            state: lane.state,
                            skipped: lane.why,
                        })
                        .collect(),
                },
                Err(err) => Reply::Error(err),
            },
        };
        let stop = reply == Reply::Stopping;
        let line = serde_json::to_string(&DaemonReply::new(reply)).unwrap_or_default();
        let _ = write.write_all(format!("{line}\n").as_bytes()).await;
        if stop {
            let _ = std::fs::remove_file(&socket);
            crate::notifying::finish(notifier).await;
            // Lanes in tmux keep running and can be adopted; a server none runs on goes.
            if running.load(Ordering::SeqCst) == 0 {
                clawpool_pool::gc::end_idle_tmux_server(&repo).await;
            }
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// One line in the daemon's log (its stderr) for a lane it could not take over.
fn log_not_adopted(refused: &NotAdopted) {
    eprintln!(
        "clawpool: lane {} not adopted ({}): {}",
        refused.lane, refused.kind, refused.error
    );
}

/// Starts the lanes of `spawn` with the configuration it carries.
async fn start(
    root: &Path,
    spawn: &SpawnRequest,
    running: &Arc<AtomicUsize>,
) -> Result<(Vec<String>, Vec<SkippedLane>), DaemonError> {
    let repo = Repo::open(root)
        .map_err(|e| DaemonError::new(DaemonErrorKind::SpawnRefused, e.to_string()))?;
    let loaded = Loaded::load_input(&spawn.config, Some(root)).map_err(|err| {
        DaemonError::new(
            DaemonErrorKind::InvalidConfig,
            format!("the configuration this spawn was given: {}", err.message),
        )
    })?;
    let request = clawpool_pool::request::SpawnRequest {
        repo: root.to_owned(),
        packet: spawn.packet.clone(),
        packet_name: spawn.packet_name.clone(),
        transport: spawn.transport.into(),
        concurrency: spawn.concurrency,
        agent: spawn.agent.clone(),
        rerun: spawn.rerun,
        detach: false,
    };
    // The daemon has no terminal of its own: progress goes to its log as event lines.
    let board = Arc::new(Board::new(OutputFormat::Json));
    let started = start_lanes(&repo, &loaded, &request, board)
        .await
        .map_err(|err| {
            DaemonError::new(
                DaemonErrorKind::SpawnRefused,
                format!("{} ({})", err.message, err.kind),
            )
        })?;
    running.fetch_add(started.names.len(), Ordering::SeqCst);
    for task in started.tasks {
        let running = Arc::clone(running);
        tokio::spawn(async move {
            let _ = task.await;
            running.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok((started.names, started.skipped))
}

/// Why a request to the daemon got no reply.
#[derive(Debug)]
enum Unanswered {
    /// Nothing listens on the socket: the request was not sent.
    Unreachable(std::io::Error),
    /// The daemon took the request, but no reply came (it ended meanwhile) or none could be
    /// read: what it did with the request is not known here.
    Broken(std::io::Error),
}

impl Unanswered {
    fn into_io(self) -> std::io::Error {
        match self {
            Unanswered::Unreachable(e) | Unanswered::Broken(e) => e,
        }
    }

    /// The error a client reports for a request the daemon took and never answered.
    fn broken(err: std::io::Error, repo: &Repo) -> CommandError {
        CommandError {
            kind: "daemon_stopped",
            message: format!(
                "the daemon took the request and ended without answering it ({err}); see {} and \
                 `clawpool board` for what became of its lanes",
                repo.state_dir().daemon_log().display()
            ),
            exit: EXIT_FAILURE,
        }
    }
}

async fn request(socket: &Path, request: Request) -> std::io::Result<Reply> {
    exchange(socket, request).await.map_err(Unanswered::into_io)
}

/// Sends `request` to the daemon on `socket` and reads its reply.
async fn exchange(socket: &Path, request: Request) -> Result<Reply, Unanswered> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(Unanswered::Unreachable)?;
    let (read, mut write) = stream.into_split();
    let line = serde_json::to_string(&DaemonRequest::new(request))
        .map_err(|e| Unanswered::Unreachable(e.into()))?;
    write
        .write_all(format!("{line}\n").as_bytes())
        .await
        .map_err(Unanswered::Broken)?;
    let mut reply = String::new();
    let read = BufReader::new(read)
        .read_line(&mut reply)
        .await
        .map_err(Unanswered::Broken)?;
    if read == 0 {
        return Err(Unanswered::Broken(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the connection closed before a reply",
        )));
    }
    let reply: DaemonReply =
        serde_json::from_str(&reply).map_err(|e| Unanswered::Broken(std::io::Error::other(e)))?;
    Ok(reply.reply)
}

/// Sends `message` to the repository's daemon, starting one (with `--config config`) first
/// when `start` and none listens, and returns its reply. `Ok(None)`: none listens and `start`
/// is false; nothing was sent.
async fn ask(
    repo: &Repo,
    message: &Request,
    config: Option<&Path>,
    start: bool,
) -> Result<Option<Reply>, CommandError> {
    let socket = socket_path(repo);
    if start {
        return start_and_reach(repo, config, &socket, message)
            .await
            .map(Some);
    }
    match exchange(&socket, message.clone()).await {
        Ok(reply) => Ok(Some(reply)),
        Err(Unanswered::Unreachable(_)) => Ok(None),
        Err(Unanswered::Broken(e)) => Err(Unanswered::broken(e, repo)),
    }
}

/// The error a client reports for a reply that is not the one it asked for.
fn refusal(reply: Reply, otherwise: &str) -> CommandError {
    match reply {
        Reply::Error(err) => CommandError {
            kind: err.kind.cli_kind(),
            message: err.message,
            exit: err.kind.exit(),
        },
        other => CommandError {
            kind: "daemon_bad_reply",
            message: format!("{otherwise}: it answered {other:?}"),
            exit: EXIT_FAILURE,
        },
    }
}

/// Hands a validated packet to the repository's daemon, starting one first when `start` and
/// none is running. Fails (so the caller can refuse) when no daemon takes it.
pub async fn hand_over(
    repo: &Repo,
    args: &SpawnArgs,
    packet: &str,
    start: bool,
) -> Result<ExitCode, CommandError> {
    let message = SpawnRequest {
        packet: packet.to_owned(),
        packet_name: args.packet_name(),
        transport: args.transport,
        concurrency: args.concurrency,
        agent: args.agent.clone(),
        rerun: args.rerun,
        config: crate::loaded::input(&args.config),
    };
    let handed = hand_to_daemon(repo, message, args.config.config.as_deref(), start).await?;
    match args.output_format {
        OutputFormat::Json => println!("{}", handed.document()),
        OutputFormat::Text => {
            for entry in &handed.skipped {
                println!("{} skipped: {}", entry.lane, entry.skipped);
            }
            println!(
                "clawpool: {} lane(s) handed to the background supervisor ({}): follow them with `clawpool board --watch`",
                handed.lanes.len(),
                handed.socket.display()
            )
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What the daemon took of a packet handed to it.
pub struct Handed {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The lanes it started.
    pub lanes: Vec<String>,
    /// Those an earlier run left, not started.
    pub skipped: Vec<SkippedEntry>,
}

impl Handed {
    /// `spawn --detach --output-format json`'s document (also the MCP spawn tools' `result`).
    pub fn document(&self) -> serde_json::Value {
        json!({"handed_to_daemon": true, "socket": self.socket, "lanes": self.lanes, "skipped": self.skipped})
    }
}

/// Hands `message` to the repository's daemon — starting one (with `--config config`) when
/// `start` and none listens — and answers what it took.
pub async fn hand_to_daemon(
    repo: &Repo,
    message: SpawnRequest,
    config: Option<&Path>,
    start: bool,
) -> Result<Handed, CommandError> {
    let socket = socket_path(repo);
    let reply = ask(repo, &Request::Spawn(message), config, start)
        .await?
        .ok_or_else(|| {
            CommandError::invalid(
                "daemon_not_running",
                format!("no daemon listens on {}", socket.display()),
            )
        })?;
    let Reply::Spawned { lanes, skipped } = reply else {
        return Err(refusal(reply, "the daemon did not take the lanes"));
    };
    Ok(Handed {
        socket,
        lanes,
        skipped,
    })
}

/// Starts a daemon when none holds the lock and hands it `message`, waiting until a daemon
/// (ours, or one another `spawn --detach` started at the same moment) answers on `socket`
/// (a follow-up's answer comes once its lane ended).
/// A foreground supervisor holding the lock is refused at once: it never listens, and a
/// daemon started now could not take the lock.
async fn start_and_reach(
    repo: &Repo,
    config: Option<&Path>,
    socket: &Path,
    message: &Request,
) -> Result<Reply, CommandError> {
    let lock = lock_path(repo);
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    let mut ours: Option<std::process::Child> = None;
    let mut starts = 0;
    loop {
        // Only a daemon that never took the request is reached again: one that took it and
        // went away may have acted on it.
        let unreachable = match exchange(socket, message.clone()).await {
            Ok(reply) => return Ok(reply),
            Err(Unanswered::Unreachable(e)) => e,
            Err(Unanswered::Broken(e)) => return Err(Unanswered::broken(e, repo)),
        };
        match supervisor_lock_holder(&lock)? {
            LockHolder::Foreground(refused) => return Err(refused),
            LockHolder::Free => {
                // Ours may still be on its way to the lock; only one that exited is replaced.
                let on_its_way = ours
                    .as_mut()
                    .is_some_and(|child| matches!(child.try_wait(), Ok(None)));
                if !on_its_way {
                    if starts == MAX_STARTS {
                        return Err(CommandError::io(
                            "starting the daemon",
                            std::io::Error::other(format!(
                                "it exited without listening {MAX_STARTS} times; see {}",
                                repo.state_dir().daemon_log().display()
                            )),
                        ));
                    }
                    ours = Some(start_daemon(repo, config)?);
                    starts += 1;
                }
            }
            // It listens right after taking the lock.
            LockHolder::DaemonOrStarting => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CommandError::io(
                "reaching the daemon it started",
                unreachable,
            ));
        }
        // Bounded polling: a daemon in another process group gives no event to await.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts `clawpool daemon` for the repository, detached: its own session, output to
/// `<common>/clawpool/daemon.log`.
fn start_daemon(repo: &Repo, config: Option<&Path>) -> Result<std::process::Child, CommandError> {
    use std::os::unix::process::CommandExt;
    let exe =
        std::env::current_exe().map_err(|e| CommandError::io("finding the clawpool binary", e))?;
    let log_path = repo.state_dir().daemon_log();
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CommandError::io("creating clawpool's folder", e))?;
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| CommandError::io("opening the daemon log", e))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("daemon").arg("--repo").arg(repo.root());
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    cmd.stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| CommandError::io("opening the daemon log", e))?,
        )
        .stderr(log)
        .process_group(0);
    cmd.spawn()
        .map_err(|e| CommandError::io("starting the daemon", e))
}
