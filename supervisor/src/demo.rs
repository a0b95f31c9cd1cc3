//! `clawpool demo`: the main job on an embedded default, kept running until the person leaves.
//! A throwaway git repository and a task packet of four scripted-agent lanes, each doing its
//! own task: two answered through their trust dialogs, one whose base gains a fix while it
//! works (merged forward before it is verified), and one outside the trusted roots, left
//! waiting with its escalation. The lanes run under `clawpool spawn` as a child in its own
//! process group; on a terminal the demo opens `clawpool ui` on them, otherwise it prints the
//! spawn's line log and the board. Leaving (quitting the ui, Ctrl-C, SIGTERM, or the end of a
//! non-terminal stdin) stops the lanes and removes the repository.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clawpool_lanes::LaneStatus;
use clawpool_lanes::state_file::{ShownStatus, now_secs};
use clawpool_worktree::Repo;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::cli::{ConfigFlag, DemoArgs, OutputFormat, TransportKind, UiArgs};
use crate::output::CommandError;
use clawpool_lane::registry::{lane_registry, registered_names};

/// One lane of the demo: its name, its task, what its scripted agent does for it, how it is
/// checked, and whether its folder is under a trusted root.
struct DemoLane {
    name: &'static str,
    prompt: &'static str,
    /// The scenario's steps (TOML inline tables).
    steps: &'static str,
    acceptance: &'static str,
    trusted: bool,
}

/// The lane whose base gains a fix while it works.
const STALE_LANE: &str = "greeting";

const LANES: [DemoLane; 4] = [
    DemoLane {
        name: "notes",
        prompt: "Write the project notes",
        steps: r##"
  { do = "say", text = "Reading the repository…" },
  { do = "sleep", ms = 800 },
  { do = "write_file", path = "NOTES.md", content = "# Notes\n\nadd.sh adds two numbers; build.sh checks every script.\n" },
  { do = "git_commit", message = "Write the project notes" },"##,
        acceptance: "test -s NOTES.md",
        trusted: true,
    },
    DemoLane {
        name: "tests",
        prompt: "Add a test for add()",
        steps: r#"
  { do = "say", text = "Looking at add.sh" },
  { do = "sleep", ms = 1200 },
  { do = "write_file", path = "tests/add_test.sh", content = ". ./add.sh\n[ \"$(add 2 3)\" = 5 ]\n" },
  { do = "git_commit", message = "Add a test for add()" },"#,
        acceptance: "sh tests/add_test.sh",
        trusted: true,
    },
    DemoLane {
        name: STALE_LANE,
        prompt: "Make the greeting friendlier",
        // Long enough for the base to gain its fix meanwhile.
        steps: r#"
  { do = "say", text = "Rewriting hello.sh" },
  { do = "sleep", ms = 4000 },
  { do = "write_file", path = "hello.sh", content = "echo \"Hello, and welcome!\"\n" },
  { do = "git_commit", message = "Make the greeting friendlier" },"#,
        acceptance: "sh build.sh",
        trusted: true,
    },
    DemoLane {
        name: "review",
        prompt: "Review the deploy script",
        steps: r#"
  { do = "say", text = "Reading deploy.sh" },
  { do = "write_file", path = "REVIEW.md", content = "deploy.sh: fine, but it should stop on the first error (set -e).\n" },
  { do = "git_commit", message = "Review the deploy script" },"#,
        acceptance: "test -s REVIEW.md",
        trusted: false,
    },
];

/// The repository the lanes start from: a build script with a typo, which the base fixes
/// while `greeting` works.
const FILES: [(&str, &str); 5] = [
    (
        "README.md",
        "# demo\n\nA small repository for `clawpool demo`.\n",
    ),
    ("add.sh", "add() { echo $(($1 + $2)); }\n"),
    ("hello.sh", "echo hello\n"),
    ("deploy.sh", "cp -r . /srv/demo\n"),
    ("build.sh", BROKEN_BUILD),
];
const BROKEN_BUILD: &str = "for f in *.sh; do sh -n \"$f\" || exit 1; done\nexti 0\n";
const FIXED_BUILD: &str = "for f in *.sh; do sh -n \"$f\" || exit 1; done\nexit 0\n";

pub async fn run(args: DemoArgs) -> Result<ExitCode, CommandError> {
    let agent = scripted_agent()?;
    let exe = std::env::current_exe()
        .map_err(|err| CommandError::io("finding the clawpool binary", err))?;
    // Removed when the demo ends (dropped), after its lanes have stopped.
    let work = tempfile::Builder::new()
        .prefix("clawpool-demo-")
        .tempdir()
        .map_err(|err| CommandError::io("creating a temporary folder", err))?;
    let repo = work.path().join("repo");
    init_repo(&repo)?;
    let config = write_lanes(work.path(), &agent)?;
    let interactive = args.output_format == OutputFormat::Text
        && std::io::stdout().is_terminal()
        && std::io::stdin().is_terminal();

    notice(
        args.output_format,
        "demo_repository",
        &repo,
        format!(
            "demo repository {} (kept until you leave the demo)",
            repo.display()
        ),
    );
    // Off a terminal the spawn's own stderr, passed on, names the same commands.
    if interactive && args.transport == TransportKind::Tmux {
        let repo = Repo::open(&repo)
            .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
        let socket = crate::spawn::tmux_socket_name(&repo);
        for lane in &LANES {
            eprintln!(
                "clawpool: lane {}: {}",
                lane.name,
                crate::spawn::tmux_attach_command(&socket, lane.name)
            );
        }
    }

    let mut spawn = tokio::process::Command::new(&exe);
    spawn
        .arg("spawn")
        .arg(work.path().join("packet.json"))
        .arg("--repo")
        .arg(&repo)
        .arg("--config")
        .arg(&config)
        .args([
            "--transport",
            match args.transport {
                TransportKind::Pty => "pty",
                TransportKind::Tmux => "tmux",
            },
        ])
        .args([
            "--output-format",
            match args.output_format {
                OutputFormat::Text => "text",
                OutputFormat::Json => "json",
            },
        ])
        .stdin(Stdio::null())
        // Its own process group: a Ctrl-C meant for the demo (or for a lane attached from the
        // ui) does not reach it; the demo stops it when the person leaves.
        .process_group(0)
        .kill_on_drop(true);
    if interactive {
        let log = std::fs::File::create(work.path().join("spawn.log"))
            .map_err(|err| CommandError::io("creating the demo's log", err))?;
        let log_err = log
            .try_clone()
            .map_err(|err| CommandError::io("creating the demo's log", err))?;
        spawn.stdout(log).stderr(log_err);
    } else {
        spawn.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = spawn
        .spawn()
        .map_err(|err| CommandError::io("starting clawpool spawn", err))?;
    let fix = tokio::spawn(fix_base_while_lane_works(repo.clone()));

    let code = if interactive {
        let ui = UiArgs {
            repo: repo.clone(),
            all: false,
            config: ConfigFlag {
                config: Some(config),
            },
            output_format: args.output_format,
        };
        crate::ui::run(ui).await
    } else {
        // The spawn's line log is the demo's until the lanes have settled; what the spawn says
        // while it is stopped is not.
        let forwarding = Arc::new(AtomicBool::new(true));
        if let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) {
            tokio::spawn(forward(out, tokio::io::stdout(), Arc::clone(&forwarding)));
            tokio::spawn(forward(err, tokio::io::stderr(), Arc::clone(&forwarding)));
        }
        let outcome = wait_until_settled(&repo, &mut child).await;
        forwarding.store(false, Ordering::SeqCst);
        match outcome {
            Ok(()) => {
                if args.output_format == OutputFormat::Text {
                    println!();
                }
                let shown = crate::board::run_board(&repo, false, false, args.output_format).await;
                notice(
                    args.output_format,
                    "demo_waiting",
                    &repo,
                    format!(
                        "the demo's lanes wait in {}: `clawpool ui --repo {}` shows them; Ctrl-C (or the end of stdin) leaves, stopping them and removing the repository",
                        repo.display(),
                        repo.display()
                    ),
                );
                wait_for_leave().await;
                shown
            }
            Err(err) => Err(err),
        }
    };

    fix.abort();
    stop(&mut child).await;
    drop(work);
    notice(
        args.output_format,
        "demo_left",
        &repo,
        "left the demo: its lanes are stopped and its repository removed".into(),
    );
    code
}

/// Tells the person what the demo is doing, on stderr: a `clawpool: ` line, or in JSON one
/// `{"notice": {"kind", "message", "repository"}}` document.
fn notice(format: OutputFormat, kind: &str, repo: &Path, message: String) {
    match format {
        OutputFormat::Text => eprintln!("clawpool: {message}"),
        OutputFormat::Json => eprintln!(
            "{}",
            serde_json::json!({"notice": {"kind": kind, "message": message, "repository": repo}})
        ),
    }
}

/// Writes each lane's scenario, the packet and the configuration into `work`; returns the
/// configuration's path. Each lane's worktree is `repo.lanes/LANE/worktree`, its scenario
/// `repo.lanes/LANE/scenario.toml` beside it (the agent finds it by a path relative to its
/// worktree), and only the trusted lanes' folders are trusted roots.
fn write_lanes(work: &Path, agent: &Path) -> Result<PathBuf, CommandError> {
    let write = |path: PathBuf, text: String| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| CommandError::io("writing the demo's files", err))?;
        }
        std::fs::write(&path, text)
            .map(|()| path)
            .map_err(|err| CommandError::io("writing the demo's files", err))
    };
    let lanes_root = work.join("repo.lanes");
    let mut packet_lanes = Vec::new();
    let mut trusted = Vec::new();
    for lane in &LANES {
        let folder = lanes_root.join(lane.name);
        write(
            folder.join("scenario.toml"),
            format!(
                "trust_dialog = true\nstartup_delay_ms = 300\n\n[[prompt]]\nsteps = [{}\n]\n",
                lane.steps
            ),
        )?;
        if lane.trusted {
            trusted.push(folder.display().to_string());
        }
        packet_lanes.push(serde_json::json!({
            "name": lane.name,
            "prompt": lane.prompt,
            "worktree": folder.join("worktree"),
            "acceptance_tests": [lane.acceptance],
        }));
    }
    write(
        work.join("packet.json"),
        serde_json::json!({"defaults": {"agent": "scripted"}, "lanes": packet_lanes}).to_string(),
    )?;
    write(
        work.join("config.toml"),
        format!(
            "trusted_roots = {trusted:?}\n\n[profiles.scripted.launch]\ncommand = {:?}\nenv = {{ CLAWPOOL_AGENT_SCENARIO = \"../scenario.toml\" }}\n",
            agent.display().to_string(),
        ),
    )
}

/// Commits the fix of `build.sh` to the base (`main`) once the stale lane is at work, so its
/// branch is behind when it finishes and is merged forward before it is verified.
async fn fix_base_while_lane_works(repo: PathBuf) {
    let Ok(opened) = Repo::open(&repo) else {
        return;
    };
    let events = lane_registry(&opened, STALE_LANE).events();
    // The demo's own wait, once: the lane's log is read a few times a second until it runs.
    loop {
        let log = std::fs::read_to_string(&events).unwrap_or_default();
        if log.contains("\"lane.running\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if std::fs::write(repo.join("build.sh"), FIXED_BUILD).is_ok() {
        let _ = git(&repo, &["commit", "-q", "-am", "Fix the typo in build.sh"]);
    }
}

/// Waits until every lane has come to where the demo leaves it: closed out (merged forward,
/// verified, done), failed, or escalated to a person. Ends early with the spawn's failure if
/// it exits first.
async fn wait_until_settled(
    repo: &Path,
    child: &mut tokio::process::Child,
) -> Result<(), CommandError> {
    let opened =
        Repo::open(repo).map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    loop {
        if settled(&opened) {
            return Ok(());
        }
        tokio::select! {
            status = child.wait() => {
                return match status {
                    Ok(status) if status.success() => Ok(()),
                    _ if settled(&opened) => Ok(()),
                    _ => Err(CommandError {
                        kind: "demo_failed",
                        message: format!("clawpool spawn ended before the demo's lanes settled ({status:?})"),
                        exit: crate::output::EXIT_FAILURE,
                    }),
                };
            }
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

fn settled(repo: &Repo) -> bool {
    let names = registered_names(repo);
    names.len() == LANES.len()
        && names.iter().all(|name| {
            let lane = clawpool_pool::board::board_lane(repo, name, now_secs());
            let log =
                std::fs::read_to_string(lane_registry(repo, name).events()).unwrap_or_default();
            lane.state.is_ok_and(|view| {
                view.doc.escalation.is_some()
                    || view.status == ShownStatus::Lane(LaneStatus::Failed)
            }) || log.contains("\"lane.closed_out\"")
        })
}

/// Copies lines from `from` to `to` while `forwarding` holds, and drains the rest.
async fn forward(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    forwarding: Arc<AtomicBool>,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if forwarding.load(Ordering::SeqCst) {
            let _ = to.write_all(format!("{line}\n").as_bytes()).await;
            let _ = to.flush().await;
        }
    }
}

/// Until the person leaves: Ctrl-C, SIGTERM, or the end of stdin.
async fn wait_for_leave() {
    use tokio::signal::unix::{SignalKind, signal};
    let stdin_ends = tokio::task::spawn_blocking(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    });
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
        _ = stdin_ends => {}
    }
}

/// Stops the spawn (SIGINT: it stops every lane and records it) and waits for it.
async fn stop(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGINT);
        }
    }
    let _ = child.wait().await;
}

/// The scripted agent ships next to the `clawpool` binary.
fn scripted_agent() -> Result<PathBuf, CommandError> {
    let exe = std::env::current_exe()
        .map_err(|err| CommandError::io("finding the clawpool binary", err))?;
    let agent = exe.with_file_name("clawpool-scripted-agent");
    if agent.is_file() {
        Ok(agent)
    } else {
        Err(CommandError::invalid(
            "program_not_found",
            format!(
                "the scripted agent is not built: {} is missing (run `cargo build --workspace`)",
                agent.display()
            ),
        ))
    }
}

fn init_repo(dir: &Path) -> Result<(), CommandError> {
    std::fs::create_dir_all(dir)
        .map_err(|err| CommandError::io("creating the demo repository", err))?;
    for (name, text) in FILES {
        std::fs::write(dir.join(name), text)
            .map_err(|err| CommandError::io("writing the demo repository", err))?;
    }
    // The agents commit too, so the identity goes in the repository's own config.
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.name", "clawpool demo"][..],
        &["config", "user.email", "demo@clawpool.invalid"][..],
        &["add", "."][..],
        &["commit", "-q", "-m", "Initial commit"][..],
    ] {
        git(dir, args)?;
    }
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<(), CommandError> {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .map_err(|err| CommandError::io("running git", err))?;
    if status.success() {
        Ok(())
    } else {
        Err(CommandError {
            kind: "git_failed",
            message: format!("git {} failed in {}", args.join(" "), dir.display()),
            exit: crate::output::EXIT_FAILURE,
        })
    }
}
