//! `clawpool demo`: the main job on an embedded default. A throwaway git repository and a task
//! packet of a few lanes of the scripted agent, spawned and shown live, ending with the board.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::{ConfigFlag, DemoArgs, SpawnArgs};
use crate::output::CommandError;

/// What each demo lane's scripted agent does: trust dialog, some work, a file, a commit.
const DEMO_SCENARIO: &str = r#"
trust_dialog = true
startup_delay_ms = 300

[[prompt]]
steps = [
  { do = "say", text = "Reading the task…" },
  { do = "sleep", ms = 800 },
  { do = "write_file", path = "NOTES.md", content = "work done by this lane\n" },
  { do = "sleep", ms = 600 },
  { do = "git_commit", message = "Add NOTES.md" },
  { do = "sleep", ms = 400 },
]
"#;

const DEMO_PACKET: &str = r#"{
  "defaults": {"agent": "scripted"},
  "lanes": [
    {"name": "docs", "prompt": "Write the project notes"},
    {"name": "tests", "prompt": "Add the missing tests"},
    {"name": "cleanup", "prompt": "Tidy up the build scripts"}
  ]
}"#;

pub async fn run(args: DemoArgs) -> Result<ExitCode, CommandError> {
    let agent = scripted_agent()?;
    let work = tempfile::Builder::new()
        .prefix("clawpool-demo-")
        .tempdir()
        .map_err(|err| CommandError::io("creating a temporary folder", err))?;
    let repo = work.path().join("repo");
    std::fs::create_dir_all(&repo)
        .map_err(|err| CommandError::io("creating the demo repository", err))?;
    init_repo(&repo)?;
    let write = |name: &str, text: String| {
        let path = work.path().join(name);
        std::fs::write(&path, text)
            .map(|()| path)
            .map_err(|err| CommandError::io("writing the demo's files", err))
    };
    let scenario = write("scenario.toml", DEMO_SCENARIO.to_owned())?;
    let packet = write("packet.json", DEMO_PACKET.to_owned())?;
    let config = write(
        "config.toml",
        format!(
            "trusted_roots = [{:?}]\n\n[profiles.scripted.launch]\ncommand = {:?}\nenv = {{ CLAWPOOL_AGENT_SCENARIO = {:?} }}\n",
            work.path().display().to_string(),
            agent.display().to_string(),
            scenario.display().to_string(),
        ),
    )?;
    eprintln!("clawpool: demo repository {}", repo.display());
    let flag = ConfigFlag {
        config: Some(config),
    };
    let loaded = crate::loaded::Loaded::load(&flag, Some(&repo))?;
    let spawn = SpawnArgs {
        packet,
        repo: repo.clone(),
        concurrency: None,
        transport: args.transport,
        agent: None,
        detach: false,
        rerun: false,
        config: flag,
        output_format: args.output_format,
    };
    let code = match crate::spawn::run(&spawn, loaded).await? {
        crate::spawn::Spawned::Ran(code) => code,
        // The demo's repository is its own and new: no other supervisor can hold it.
        crate::spawn::Spawned::HandOver { refused, .. } => {
            return Err(refused.unwrap_or_else(|| {
                CommandError::invalid("supervisor_running", "the demo repository is busy")
            }));
        }
    };
    println!();
    crate::board::run_board(&repo, false, false, args.output_format).await?;
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

fn init_repo(dir: &Path) -> Result<(), CommandError> {
    // The agents commit too, so the identity goes in the repository's own config.
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
