//! `clawpool demo`: the main job on an embedded default. For now: the scripted agent in a
//! throwaway git repository, given a task at launch, its screen shown until it is done.

use std::process::ExitCode;

use clawpool_pty::SpawnSpec;

use crate::cli::DemoArgs;
use crate::mirror;
use crate::output::CommandError;
use crate::run_one::run_worker;

/// The scripted agent's scenario for the demo: it takes the task, writes a file, commits it.
const DEMO_SCENARIO: &str = r#"
startup_delay_ms = 300
exit_after_prompts = 1

[[prompt]]
steps = [
  { do = "say", text = "Reading the task…" },
  { do = "sleep", ms = 600 },
  { do = "write_file", path = "hello.txt", content = "hello from a lane\n" },
  { do = "sleep", ms = 400 },
  { do = "git_commit", message = "Add hello.txt" },
  { do = "sleep", ms = 600 },
]
"#;

pub async fn run(args: DemoArgs) -> Result<ExitCode, CommandError> {
    let agent = scripted_agent()?;
    let repo = tempfile::Builder::new()
        .prefix("clawpool-demo-")
        .tempdir()
        .map_err(|err| CommandError::io("creating a temporary repository", err))?;
    init_repo(repo.path())?;
    let scenario = repo.path().join(".git/clawpool-demo-scenario.toml");
    std::fs::write(&scenario, DEMO_SCENARIO)
        .map_err(|err| CommandError::io("writing the demo scenario", err))?;

    let live = !args.snapshots && mirror::can_mirror();
    let mut spec = SpawnSpec::new(agent, repo.path())
        .args(["--scenario"])
        .args([scenario.as_os_str()])
        .args(["--prompt", "Add a hello.txt file and commit it"]);
    if let Some(size) = live.then(mirror::terminal_size).flatten() {
        spec.size = size;
    }
    let code = run_worker(spec, args.transport, live, args.output_format, Vec::new()).await?;
    let log = std::process::Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(repo.path())
        .output()
        .map_err(|err| CommandError::io("reading the demo repository's log", err))?;
    eprintln!(
        "clawpool: the demo repository's history:\n{}",
        String::from_utf8_lossy(&log.stdout)
    );
    Ok(code)
}

/// The scripted agent ships next to the `clawpool` binary.
fn scripted_agent() -> Result<std::path::PathBuf, CommandError> {
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

fn init_repo(dir: &std::path::Path) -> Result<(), CommandError> {
    // The agent commits too, so the identity goes in the repository's own config.
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.name", "clawpool demo"][..],
        &["config", "user.email", "demo@clawpool.invalid"][..],
        &["commit", "-q", "--allow-empty", "-m", "Initial commit"][..],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .status()
            .map_err(|err| CommandError::io("running git", err))?;
        if !status.success() {
            return Err(CommandError {
                kind: "git_failed",
                message: format!("git {} failed in {}", args.join(" "), dir.display()),
                exit: crate::output::EXIT_FAILURE,
            });
        }
    }
    Ok(())
}
