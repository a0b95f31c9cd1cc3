//! `clawpool init`: a repository's first ten minutes. Finds the agents installed on `PATH` (each
//! profile's launch command, its version against the one the profile was verified on), checks
//! each one's credentials are present (an environment variable or a credentials file, never
//! printing a secret), writes the user's configuration with the repository's lanes folder as a
//! trusted root (after asking on a terminal, or with `--yes`; an existing file only with
//! `--force`), and prints the one command that spawns a first lane.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clawpool_worktree::Repo;
use serde_json::{Value, json};

use crate::cli::{InitArgs, OutputFormat};
use crate::loaded::Loaded;
use crate::output::CommandError;

/// Where each agent keeps the credentials it starts with: environment variables any of which
/// is enough, and files (relative to HOME) it writes when a person logs in. Only their
/// presence is checked; nothing read from them is printed.
const CREDENTIALS: &[(&str, &[&str], &[&str])] = &[
    (
        "claude",
        &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ],
        &[".claude/.credentials.json"],
    ),
    ("codex", &["OPENAI_API_KEY"], &[".codex/auth.json"]),
    (
        "gemini",
        &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        &[".gemini/oauth_creds.json"],
    ),
    (
        "qwen",
        &["OPENAI_API_KEY", "DASHSCOPE_API_KEY"],
        &[".qwen/oauth_creds.json"],
    ),
    (
        "opencode",
        &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
        &[".local/share/opencode/auth.json"],
    ),
    ("aider", &["OPENAI_API_KEY", "ANTHROPIC_API_KEY"], &[]),
    ("claw", &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"], &[]),
];

/// The agents a first lane is suggested with, best first: the two the quickstart covers.
const PREFERRED: [&str; 2] = ["claude", "codex"];

/// One agent as `init` found it.
struct Found {
    name: String,
    program: PathBuf,
    version: Option<String>,
    verified: Option<String>,
    /// Where its credentials were found (`env ANTHROPIC_API_KEY`, a file), or `None`.
    credentials: Option<String>,
    /// Where they were looked for.
    looked_for: Vec<String>,
}

impl Found {
    fn to_json(&self) -> Value {
        json!({
            "agent": self.name,
            "program": self.program.display().to_string(),
            "version": self.version,
            "verified_version": self.verified,
            "version_verified": self.version.is_some() && self.version == self.verified,
            "credentials": self.credentials,
            "credentials_looked_for": self.looked_for,
        })
    }
}

pub fn run(args: &InitArgs) -> Result<ExitCode, CommandError> {
    let repo = Repo::open(&args.repo)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    let loaded = crate::loaded::load(&args.config, Some(repo.root()))?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| CommandError::invalid("no_home", "HOME is not set"))?;
    let config_file = loaded.sources.user.clone().ok_or_else(|| {
        CommandError::invalid("no_home", "no user configuration file can be named")
    })?;
    if config_file.exists() && !args.force {
        return Err(CommandError::invalid(
            "config_exists",
            format!(
                "{} exists; `clawpool init --force` replaces it (edit it instead to keep it: \
                 docs/config.md)",
                config_file.display()
            ),
        ));
    }
    let lanes = repo
        .default_worktree_path("lane")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| repo.root().to_owned());
    if !args.yes && !confirm(&config_file, &lanes)? {
        return Err(CommandError::invalid(
            "not_confirmed",
            "nothing written (run again and answer y, or pass --yes)",
        ));
    }
    let agents = find_agents(&loaded, &home);
    let text = config_text(&lanes);
    if let Some(dir) = config_file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CommandError::io(&format!("creating {}", dir.display()), e))?;
    }
    std::fs::write(&config_file, text)
        .map_err(|e| CommandError::io(&format!("writing {}", config_file.display()), e))?;
    let pick = PREFERRED
        .iter()
        .find_map(|name| {
            agents
                .iter()
                .find(|a| a.name == *name && a.credentials.is_some())
        })
        .or_else(|| agents.iter().find(|a| a.credentials.is_some()));
    let command = pick.map(|agent| {
        format!(
            "clawpool spawn --repo {} --agent {} --name first-lane --prompt {}",
            shell_quoted(&repo.root().display().to_string()),
            agent.name,
            shell_quoted("Read the README and list three things that could be clearer.")
        )
    });
    match args.output_format {
        OutputFormat::Json => println!(
            "{}",
            json!({
                "config": config_file.display().to_string(),
                "trusted_root": lanes.display().to_string(),
                "agents": agents.iter().map(Found::to_json).collect::<Vec<_>>(),
                "command": command,
            })
        ),
        OutputFormat::Text => print_text(&config_file, &lanes, &agents, command.as_deref()),
    }
    Ok(ExitCode::SUCCESS)
}

/// Every profile whose launch command is on `PATH` (the scripted test agent left out), with its
/// version and credentials.
fn find_agents(loaded: &Loaded, home: &Path) -> Vec<Found> {
    let path = std::env::var_os("PATH");
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let installed: Vec<_> = loaded
        .profiles
        .iter()
        .map(|profile| &profile.manifest)
        .filter(|manifest| manifest.name != "scripted")
        .filter_map(|manifest| {
            let command = &manifest.launch.command;
            clawpool_pty::resolve_program(command.as_ref(), &cwd, path.as_deref())
                .ok()
                .map(|program| (manifest, program))
        })
        .collect();
    // Each `--version` starts a runtime (node, python): asked all at once, not one by one.
    std::thread::scope(|scope| {
        let asked: Vec<_> = installed
            .iter()
            .map(|(manifest, program)| {
                scope.spawn(move || {
                    crate::doctor::installed_version(program, &manifest.launch.env).ok()
                })
            })
            .collect();
        installed
            .iter()
            .zip(asked)
            .map(|((manifest, program), version)| {
                let version = version.join().unwrap_or(None);
                found(manifest, program.clone(), version, home)
            })
            .collect()
    })
}

/// What `init` says of one installed agent: its version and where its credentials are.
fn found(
    manifest: &clawpool_agents::profiles::manifest::Manifest,
    program: PathBuf,
    version: Option<String>,
    home: &Path,
) -> Found {
    let (vars, files) = CREDENTIALS
        .iter()
        .find(|(name, _, _)| *name == manifest.name)
        .map_or((&[][..], &[][..]), |(_, vars, files)| (*vars, *files));
    let from_env = vars.iter().find(|var| {
        manifest.launch.env.contains_key(**var)
            || std::env::var_os(var).is_some_and(|v| !v.is_empty())
    });
    let from_file = files.iter().map(|f| home.join(f)).find(|f| f.is_file());
    let credentials = match (from_env, from_file) {
        (Some(var), _) => Some(format!("environment variable {var}")),
        (None, Some(file)) => Some(format!("file {}", file.display())),
        (None, None) => None,
    };
    let looked_for = vars
        .iter()
        .map(|v| format!("${v}"))
        .chain(files.iter().map(|f| format!("~/{f}")))
        .collect();
    Found {
        name: manifest.name.clone(),
        program,
        version,
        verified: manifest.verified_version.clone(),
        credentials,
        looked_for,
    }
}

/// Asks on the terminal; without one, `--yes` is needed.
fn confirm(config: &Path, lanes: &Path) -> Result<bool, CommandError> {
    if !std::io::stdin().is_terminal() {
        return Err(CommandError::invalid(
            "confirmation_needed",
            format!(
                "init writes {} trusting {}: confirm on a terminal, or pass --yes",
                config.display(),
                lanes.display()
            ),
        ));
    }
    print!(
        "Write {} with {} as a trusted root (agents in lanes there are driven without asking)? [y/N] ",
        config.display(),
        lanes.display()
    );
    std::io::stdout()
        .flush()
        .map_err(|e| CommandError::io("asking", e))?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CommandError::io("reading the answer", e))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// The configuration `init` writes.
fn config_text(lanes: &Path) -> String {
    format!(
        "# Written by `clawpool init` (docs/quickstart.md, every key: docs/config.md).\n\
         # Lanes under these folders are driven without asking (docs/trust.md).\n\
         trusted_roots = [{:?}]\n",
        lanes.display().to_string()
    )
}

fn print_text(config: &Path, lanes: &Path, agents: &[Found], command: Option<&str>) {
    println!("wrote {}", config.display());
    println!("trusted root: {}", lanes.display());
    if agents.is_empty() {
        println!("agents: none found on PATH (install Claude Code or Codex: docs/quickstart.md)");
    }
    for agent in agents {
        let version = match (&agent.version, &agent.verified) {
            (Some(v), Some(verified)) if v == verified => format!("{v} (verified)"),
            (Some(v), Some(verified)) => format!("{v} (profile verified on {verified})"),
            (Some(v), None) => v.clone(),
            (None, _) => "version unknown".into(),
        };
        let credentials = agent.credentials.clone().unwrap_or_else(|| {
            format!(
                "no credentials found (looked for {})",
                agent.looked_for.join(", ")
            )
        });
        println!(
            "agent {}: {} {version}; {credentials}",
            agent.name,
            agent.program.display()
        );
    }
    match command {
        Some(command) => println!("first lane:\n  {command}"),
        None => println!(
            "no agent with credentials: log in to one (docs/quickstart.md), then run init again"
        ),
    }
}

/// `text` quoted for a POSIX shell.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
