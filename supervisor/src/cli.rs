//! Command-line flags: parsed and checked here without touching the system.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clawpool_pty::TermSize;

/// A worker-pool supervisor for interactive CLI coding agents.
#[derive(Debug, Parser)]
#[command(name = "clawpool", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start one worker in a terminal, show its screen, and exit with its status.
    RunOne(RunOneArgs),
    /// The main job on an embedded default: a throwaway repository and a packet of scripted
    /// agent lanes, spawned and shown live, ending with the board.
    Demo(DemoArgs),
    /// Run one lane in the foreground: start an agent, drive its boot handshake, deliver the
    /// prompt, and follow it to finished or failed, printing every lane event.
    Run(RunArgs),
    /// Resolve a lane blocked on a trust dialog: answer it with yes.
    Trust(LaneArgs),
    /// Answer the dialog a lane is blocked on with one of its choices.
    Answer(AnswerArgs),
    /// Deliver more text to a running lane's agent, by the prompt's rules: typed only into
    /// its idle input line (queued while it works) and verified as accepted.
    Send(SendArgs),
    /// Stop a lane's worker and end the lane (finished if it was idle with its work done).
    Stop(LaneArgs),
    /// Stop a lane's worker and start it again in the same worktree.
    Restart(RestartArgs),
    /// Bring the lane's base into its branch, in its worktree, only when the worktree is
    /// clean; a conflict is aborted back to the previous commit.
    MergeForward(MergeForwardArgs),
    /// Run a lane's verification commands for a green level (merge-forward first for
    /// package and up) and record the result.
    Verify(VerifyArgs),
    /// Show which rule reads a screen as what, with the evidence and the near misses.
    Explain(ExplainArgs),
    /// Configuration.
    Config(ConfigArgs),
    /// Check what lanes need: git, tmux, the agents' binaries, trusted roots, and the
    /// repository's state folders (nothing is created).
    Doctor(DoctorArgs),
    /// Print a lane's state (its record in the registry, never the worktree's copy) with its
    /// ages computed now.
    State(LaneArgs),
    /// Task packets.
    Packet(PacketArgs),
    /// Take over the live tmux lanes of a supervisor that died, from their state files and
    /// tmux sessions, and drive them to the end.
    Adopt(AdoptArgs),
    /// Remove the worktrees of lanes that are over (finished or failed) and whose work is
    /// merged or empty, and prune git's entries for vanished worktrees; uncommitted or unmerged
    /// work, and lanes whose supervisor was lost before they ended, only with --force.
    Gc(GcArgs),
    /// The repository's background supervisor: lanes handed to it with `spawn --detach` (or by
    /// a second `spawn`) run there; it listens on a Unix socket in the common git dir.
    Daemon(DaemonArgs),
    /// Every lane of the repository: status, time in state, progress, branch, commits, last event.
    Board(BoardArgs),
    /// A live terminal dashboard of the repository's lanes: the board, the selected lane's
    /// screen and events, and keys for the operator commands (`docs/ui.md`).
    Ui(UiArgs),
    /// Print a lane's events (JSON lines), or with --all every lane's, in the repository's
    /// order, each with its cursor; with --follow keep printing new ones.
    Events(EventsArgs),
    /// Wait until every lane named reached one of the states (a lane_status, or ended), on
    /// the repository's event stream; exit non-zero with each lane's state when one ends
    /// elsewhere or the time runs out.
    Wait(WaitArgs),
    /// Deliver an agent's hook report (JSON on stdin, or as the argument after EVENT) to the
    /// lane that started the agent, named by the environment it was given
    /// (`CLAWPOOL_LANE_SOCKET`, `CLAWPOOL_LANE_TOKEN`); always exits 0, within 2 s. Run by the agent's hooks, not by people (`docs/cli.md`).
    #[command(hide = true)]
    Hook(HookArgs),
    /// Watch a lane: attach to its tmux session (and take over), or mirror a PTY lane
    /// read-only from its terminal log.
    Attach(LaneArgs),
    /// Run a task packet: one lane per task, each in its own git worktree, at most N at once,
    /// until every lane is finished or failed.
    Spawn(SpawnArgs),
    /// Set up clawpool for a repository: find the installed agents and their credentials,
    /// write the user's configuration trusting the repository's lanes folder, and print the
    /// command that spawns a first lane (docs/quickstart.md).
    Init(InitArgs),
    /// The recovery policy: which rules match a lane and why; check a policy file.
    Policy(PolicyArgs),
    /// Run a recovery recipe on a lane by hand, through its control socket (the recipe the
    /// policy decides for the lane, or --recipe NAME).
    Recover(RecoverArgs),
    /// Tool-permission questions: what the permission policy decides (docs/permissions.md).
    Permissions(PermissionsArgs),
    /// A lane's change against its merge base with the base as it is now: its commits and
    /// the files they change, and apart from them what is not committed yet.
    Diff(DiffArgs),
    /// Land lanes on their base one at a time (a merge queue): each merged forward onto the
    /// base as it stands, verified in its own worktree, and the base moved only on green.
    Land(LandArgs),
    /// Serve the repository's pool as an MCP server on stdio, for an orchestrating agent
    /// (docs/mcp.md); refuses to start inside a lane.
    Mcp(McpArgs),
    /// Push a lane's branch to the configured remote ([forge] remote, default origin).
    Push(PublishArgs),
    /// Push a lane's branch and open its pull request on the forge ([forge], docs/handoff.md),
    /// or find the one already open for the branch.
    Pr(PublishArgs),
    /// Set a running lane's budget in US dollars (`budget_usd`): a lane held over its old one
    /// takes a text again (`clawpool send`) once its cost is within the new one.
    Budget(BudgetArgs),
}

#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// The lane: its folder, or its name in this repository.
    pub lane: PathBuf,
    /// The new budget in US dollars (a number above 0).
    #[arg(value_parser = parse_usd)]
    pub usd: f64,
    /// Output format for the reply and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// An amount of US dollars above 0 (`1.5`, `0.25`).
fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!(
            "`{text}` is not an amount of US dollars above 0 (e.g. 2.50)"
        )),
    }
}

#[derive(Debug, Args)]
pub struct PermissionsArgs {
    #[command(subcommand)]
    pub command: PermissionsCommand,
}

#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// What the policy would decide for a command or a file write in a lane, and the rule that
    /// decides (nothing is run or written).
    Check(PermissionsCheckArgs),
    /// The lane's last permission questions and why each was decided: the rule or grant, how
    /// the question came (hook or screen), and who answered it.
    Explain(PermissionsExplainArgs),
}

#[derive(Debug, Args)]
pub struct PermissionsExplainArgs {
    /// The lane: its name in this repository, or its folder.
    #[arg(default_value = ".")]
    pub lane: PathBuf,
    /// How many of the latest questions to show.
    #[arg(long, default_value_t = 10)]
    pub last: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
#[group(id = "question", required = true, multiple = false, args = ["command", "write", "edit"])]
pub struct PermissionsCheckArgs {
    /// The shell command the agent asks to run.
    #[arg(long)]
    pub command: Option<String>,
    /// A file the agent asks to create or overwrite (the Write tool).
    #[arg(long)]
    pub write: Option<PathBuf>,
    /// A file the agent asks to change (the Edit tool, apply_patch).
    #[arg(long)]
    pub edit: Option<PathBuf>,
    /// The folder the command runs in (default: the lane's worktree).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// The lane: its name in this repository, or its folder (default: the git worktree the
    /// current folder is in).
    #[arg(long)]
    pub lane: Option<PathBuf>,
    /// Decide with this profile instead of the lane's (read-only, workspace-write,
    /// danger-full-access).
    #[arg(long)]
    pub profile: Option<String>,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Every policy rule against a lane's current facts: matched or not, condition by
    /// condition, and which rule decides.
    Explain(PolicyExplainArgs),
    /// Load a policy file and list every problem in it (exit 2), or say it is ok.
    Check(PolicyCheckArgs),
}

#[derive(Debug, Args)]
pub struct PolicyExplainArgs {
    #[command(flatten)]
    pub lane: LaneArgs,
    #[command(flatten)]
    pub config: ConfigFlag,
}

#[derive(Debug, Args)]
pub struct PolicyCheckArgs {
    /// The policy file (TOML; see docs/policy.md).
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub lane: LaneArgs,
    /// The recipe (default: the one the policy decides for the lane's facts).
    #[arg(long)]
    pub recipe: Option<String>,
    #[command(flatten)]
    pub config: ConfigFlag,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Write the configuration without asking.
    #[arg(long)]
    pub yes: bool,
    /// Replace an existing user configuration file.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SpawnArgs {
    /// The task packet (JSON; see docs/task-packet.md); or one lane given by --name and
    /// --prompt.
    #[arg(required_unless_present = "name", conflicts_with = "name")]
    pub packet: Option<PathBuf>,
    /// One lane without a packet file: its name (a packet lane's `name`, checked by the
    /// packet's rules). Needs --prompt.
    #[arg(long, requires = "prompt")]
    pub name: Option<String>,
    /// The lane's prompt, with --name (a packet lane's `prompt`).
    #[arg(long, requires = "name")]
    pub prompt: Option<String>,
    /// The branch the lane starts from, with --name (a packet lane's `base`).
    #[arg(long, requires = "name")]
    pub base: Option<String>,
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// How many lanes run at once (default 4); the rest queue.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// The terminal lanes run in.
    #[arg(long, value_enum, default_value_t = TransportKind::Pty)]
    pub transport: TransportKind,
    /// The agent for lanes that do not name one.
    #[arg(long)]
    pub agent: Option<String>,
    /// Hand the lanes to the repository's background supervisor (started if needed) and
    /// return at once.
    #[arg(long)]
    pub detach: bool,
    /// Run again the lanes an earlier run finished (a fresh run of the task in the same
    /// worktree) and re-create those `clawpool gc` removed; without it they are skipped.
    #[arg(long)]
    pub rerun: bool,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format for progress and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Stop the repository's running daemon instead of starting one.
    #[arg(long)]
    pub stop: bool,
    #[command(flatten)]
    pub config: ConfigFlag,
}

#[derive(Debug, Args)]
pub struct PacketArgs {
    #[command(subcommand)]
    pub command: PacketCommand,
}

#[derive(Debug, Subcommand)]
pub enum PacketCommand {
    /// Check a task packet and list every problem with its JSON path.
    Validate(PacketValidateArgs),
}

#[derive(Debug, Args)]
pub struct PacketValidateArgs {
    /// The packet (JSON).
    pub file: PathBuf,
    /// The repository the packet's paths are relative to (default: the current one).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

impl SpawnArgs {
    /// What the packet is called in messages: its file, or the lane given by --name.
    pub fn packet_name(&self) -> PathBuf {
        match (&self.packet, &self.name) {
            (Some(file), _) => file.clone(),
            (None, name) => PathBuf::from(format!("--name {}", name.as_deref().unwrap_or(""))),
        }
    }

    /// The packet given by --name, --prompt and --base: one lane, as a packet file would
    /// give it, so it is checked and run by the same rules. `None` when a file is given.
    pub fn inline_packet(&self) -> Option<String> {
        let name = self.name.as_ref()?;
        let mut lane = serde_json::Map::new();
        lane.insert("name".into(), name.clone().into());
        lane.insert(
            "prompt".into(),
            self.prompt.clone().unwrap_or_default().into(),
        );
        if let Some(base) = &self.base {
            lane.insert("base".into(), base.clone().into());
        }
        Some(serde_json::Value::Object(lane).to_string())
    }
}

impl Command {
    pub fn output_format(&self) -> OutputFormat {
        match self {
            Command::RunOne(args) => args.output_format,
            Command::Demo(args) => args.output_format,
            Command::Run(args) => args.output_format,
            Command::Trust(args) => args.output_format,
            Command::Answer(args) => args.lane.output_format,
            Command::Send(args) => args.output_format,
            Command::Stop(args) => args.output_format,
            Command::Restart(args) => args.lane.output_format,
            Command::MergeForward(args) => args.output_format,
            Command::Verify(args) => args.output_format,
            Command::Explain(args) => args.output_format,
            Command::Config(ConfigArgs {
                command: ConfigCommand::Show(args),
            }) => args.output_format,
            Command::Doctor(args) => args.output_format,
            Command::Mcp(args) => match &args.action {
                Some(McpAction::Token(token)) => token.output_format,
                None => args.output_format,
            },
            Command::State(args) => args.output_format,
            Command::Spawn(args) => args.output_format,
            Command::Init(args) => args.output_format,
            Command::Board(args) => args.output_format,
            Command::Ui(args) => args.output_format,
            Command::Adopt(args) => args.output_format,
            Command::Gc(args) => args.output_format,
            Command::Daemon(_) => OutputFormat::Text,
            Command::Events(args) => args.output_format,
            Command::Wait(args) => args.output_format,
            Command::Hook(_) => OutputFormat::Text,
            Command::Attach(args) => args.output_format,
            Command::Packet(PacketArgs {
                command: PacketCommand::Validate(args),
            }) => args.output_format,
            Command::Policy(PolicyArgs {
                command: PolicyCommand::Explain(args),
            }) => args.lane.output_format,
            Command::Policy(PolicyArgs {
                command: PolicyCommand::Check(args),
            }) => args.output_format,
            Command::Recover(args) => args.lane.output_format,
            Command::Permissions(PermissionsArgs {
                command: PermissionsCommand::Check(args),
            }) => args.output_format,
            Command::Permissions(PermissionsArgs {
                command: PermissionsCommand::Explain(args),
            }) => args.output_format,
            Command::Diff(args) => args.output_format,
            Command::Land(args) => args.output_format,
            Command::Push(args) | Command::Pr(args) => args.output_format,
            Command::Budget(args) => args.output_format,
        }
    }
}

/// Where configuration comes from, besides the user and repository files.
#[derive(Debug, Args, Clone, Default)]
pub struct ConfigFlag {
    /// A configuration file read after the user's and the repository's (also CLAWPOOL_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The agent profile (claude, codex, opencode, gemini, qwen, aider, claw, scripted, or one from
    /// configuration).
    #[arg(long)]
    pub agent: String,
    /// The lane's folder (default: the current folder).
    #[arg(long, default_value = ".")]
    pub cwd: PathBuf,
    /// The lane's name (default: the folder's name).
    #[arg(long)]
    pub lane: Option<String>,
    /// The task prompt.
    #[arg(long, conflicts_with = "prompt_file")]
    pub prompt: Option<String>,
    /// Read the task prompt from a file.
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// The terminal to run the agent in.
    #[arg(long, value_enum, default_value_t = TransportKind::Pty)]
    pub transport: TransportKind,
    /// Terminal size as COLSxROWS (default 120x40).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<TermSize>,
    /// Set an environment variable for the agent (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format for events and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The hook event (`SessionStart`, `UserPromptSubmit`, `PreToolUse`, `PostToolUse`,
    /// `PermissionRequest`, `Notification`, `Stop`, `SessionEnd`; Codex's notify program:
    /// `agent-turn-complete`).
    pub event: String,
    /// The payload, when the agent passes it as an argument (Codex's notify program) rather
    /// than on stdin; stdin is then not read.
    pub payload: Option<String>,
}

#[derive(Debug, Args)]
pub struct LaneArgs {
    /// The lane: its folder (default: the current folder), or its name in this repository.
    #[arg(default_value = ".")]
    pub lane: PathBuf,
    /// Output format for the reply and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    #[command(flatten)]
    pub lane: LaneArgs,
    /// The choice, as the agent's profile names it (e.g. yes, no).
    #[arg(long)]
    pub choice: String,
    /// Keep a yes to a tool-permission question as a grant for its tool and verb: once (keep
    /// nothing), lane (this lane), repository (every lane here), always (every lane anywhere).
    #[arg(long, value_name = "SCOPE")]
    pub remember: Option<String>,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The lane: its folder, or its name in this repository.
    pub lane: PathBuf,
    /// The text (newlines and tabs allowed; no other control characters).
    pub text: String,
    /// For a follow-up to a stopped or finished lane: the configuration its agent starts with.
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format for the reply and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct MergeForwardArgs {
    /// The lane: its folder, or its name in this repository.
    pub lane: PathBuf,
    /// Output format for the result and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The lane: its folder, or its name in this repository.
    pub lane: PathBuf,
    /// The green level: targeted, package, workspace or merge_ready.
    #[arg(long, default_value = "targeted")]
    pub level: String,
    /// Output format for the result and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct RestartArgs {
    #[command(flatten)]
    pub lane: LaneArgs,
    /// Start the agent with its profile's resume arguments (e.g. claude --continue).
    #[arg(long)]
    pub resume: bool,
    /// Deliver the lane's prompt again even if the previous worker had taken it (by default
    /// it is delivered again only if it was never accepted).
    #[arg(long)]
    pub redeliver: bool,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A lane (its name or folder): explain its current screen, rebuilt from its terminal log,
    /// with its own agent's profile.
    #[arg(conflicts_with_all = ["screen"], required_unless_present = "screen")]
    pub lane: Option<PathBuf>,
    /// The agent profile to read the screen with (default for a lane: its own agent).
    #[arg(long, required_unless_present = "lane")]
    pub agent: Option<String>,
    /// A screen: plain text (`tmux capture-pane -p`) or with attributes (`capture-pane -p -e`).
    #[arg(long)]
    pub screen: Option<PathBuf>,
    /// The screen's size as COLSxROWS (default: taken from the file).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<TermSize>,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the merged configuration with the file each value came from.
    Show(ConfigShowArgs),
}

#[derive(Debug, Args)]
pub struct ConfigShowArgs {
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The repository whose state folders are checked (default: the one containing the
    /// current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// A task packet whose agents are checked too (without it, only agents the configuration
    /// sets up are).
    #[arg(long)]
    pub packet: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// Which terminal a worker runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// A pseudo-terminal owned by this process.
    Pty,
    /// A session on a private tmux server (`tmux -L clawpool-run-one`), which a person can attach to.
    Tmux,
}

/// How results and errors are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    /// For people.
    #[default]
    Text,
    /// One JSON document per screen snapshot and per error (JSON lines on stdout).
    Json,
}

#[derive(Debug, Args)]
pub struct RunOneArgs {
    /// The folder the worker starts in.
    #[arg(long)]
    pub cwd: PathBuf,
    /// The terminal to run it in.
    #[arg(long, value_enum, default_value_t = TransportKind::Pty)]
    pub transport: TransportKind,
    /// Print a snapshot of the screen each time it changes instead of mirroring it live.
    #[arg(long)]
    pub snapshots: bool,
    /// Terminal size as COLSxROWS (default: your terminal's size when mirroring, else 120x40).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<TermSize>,
    /// Set an environment variable for the worker (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Start the worker with only the variables given by --env.
    #[arg(long)]
    pub clean_env: bool,
    /// Append the worker's raw output to this file.
    #[arg(long)]
    pub raw_log: Option<PathBuf>,
    /// Type this text once the worker has drawn its first screen (repeatable, in order with --keys).
    #[arg(long = "send-text", value_name = "TEXT")]
    pub send_text: Vec<String>,
    /// Press these keys, comma-separated (Enter, Tab, Esc, Up, Down, Left, Right, Backspace,
    /// C-c, C-d, 0-9), once the worker has drawn its first screen (repeatable).
    #[arg(long = "keys", value_name = "KEY[,KEY...]")]
    pub keys: Vec<String>,
    /// Output format for snapshots and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The terminal the lanes run in.
    #[arg(long, value_enum, default_value_t = TransportKind::Pty)]
    pub transport: TransportKind,
    /// Output format for progress and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

fn parse_size(text: &str) -> Result<TermSize, String> {
    let (cols, rows) = text
        .split_once('x')
        .ok_or_else(|| format!("size {text:?} is not COLSxROWS, e.g. 120x40"))?;
    let number = |n: &str| {
        n.parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("size {text:?}: {n:?} is not a positive number"))
    };
    Ok(TermSize {
        cols: number(cols)?,
        rows: number(rows)?,
    })
}

fn parse_env(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Every repository with lanes on this machine (the user's index of them), not only this
    /// one.
    #[arg(long, conflicts_with = "repo")]
    pub all: bool,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format for errors (the dashboard itself is for people).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct BoardArgs {
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Every repository with lanes on this machine (the user's index of them), not only this
    /// one.
    #[arg(long, conflicts_with = "repo")]
    pub all: bool,
    /// Redraw every second until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The lane: its name in this repository, or its folder.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub lane: Option<PathBuf>,
    /// Every lane's events: the repository's stream, in the order they were recorded, each
    /// with its `cursor`.
    #[arg(long)]
    pub all: bool,
    /// Keep printing new events as they are appended.
    #[arg(long)]
    pub follow: bool,
    /// With --all: start after the event with this cursor (resuming where a reader stopped).
    #[arg(long, requires = "all")]
    pub since: Option<u64>,
    /// With --all: the repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Output format (--all): JSON lines, or a line of text per event. A lane's own events
    /// are JSON lines either way.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The lanes, by name.
    #[arg(required = true)]
    pub lanes: Vec<String>,
    /// The states to wait for, comma-separated: lane_status values (running, finished, …)
    /// or `ended` for any end.
    #[arg(long, required = true, value_delimiter = ',', value_parser = clawpool_pool::Until::parse)]
    pub until: Vec<clawpool_pool::Until>,
    /// Give up after this many seconds (exit 124 with each lane's state).
    #[arg(long, value_parser = parse_seconds)]
    pub timeout: Option<std::time::Duration>,
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Output format for the result and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|secs| std::time::Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| format!("{text:?} is not a number of seconds"))
}

#[derive(Debug, Args)]
pub struct AdoptArgs {
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format for progress and errors.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Also remove worktrees with uncommitted or unmerged work, and those of lanes whose
    /// supervisor was lost before they ended (never a lane's under a live supervisor).
    #[arg(long)]
    pub force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The lane: its folder, or its name in this repository.
    pub lane: PathBuf,
    /// Only the list of files with their line counts, no patch.
    #[arg(long)]
    pub stat: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// How `land` moves the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LandMethodArg {
    /// The base moves to the lane's verified HEAD.
    FastForward,
    /// A merge commit of the base and the lane's verified HEAD, with that HEAD's tree.
    MergeCommit,
}

#[derive(Debug, Args)]
pub struct LandArgs {
    /// The lanes, in the order they land: folders, or names in this repository.
    #[arg(required_unless_present = "ready", conflicts_with = "ready")]
    pub lanes: Vec<PathBuf>,
    /// Every finished lane of the repository that is green at merge_ready, by name.
    #[arg(long)]
    pub ready: bool,
    /// The repository (for --ready; default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// The green level each lane must reach on top of the base: package, workspace or
    /// merge_ready.
    #[arg(long, default_value = "merge_ready")]
    pub level: String,
    /// How the base moves.
    #[arg(long, value_enum, default_value_t = LandMethodArg::FastForward)]
    pub method: LandMethodArg,
    /// How many times a lane is merged forward and verified again when the base moved while
    /// it was verified, before it is left out.
    #[arg(long, default_value_t = 3)]
    pub attempts: u32,
    /// At most this many seconds for each verification command (a lane's own
    /// `verify_timeout_secs` applies when it is shorter); a command still running then hangs
    /// and its lane is left out as `hung`.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Batch mode (bors-style): merge up to N lanes together into one candidate commit, verify
    /// it once, land them all when green, bisect when red. Lands merge commits.
    #[arg(long, value_name = "N", conflicts_with = "method")]
    pub batch: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub action: Option<McpAction>,
    /// Serve over Streamable HTTP instead of stdio: 127.0.0.1:PORT, [::1]:PORT (loopback
    /// only; port 0 picks one) or a Unix socket's path. Each request needs a bearer token
    /// (`clawpool mcp token`), whose tier replaces --tier.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// What its tools may do: read (state, events, board, wait), operate (also spawn, send,
    /// stop, restart, recover, verify, merge-forward) or admin (also trust and answer).
    #[arg(long, value_enum, default_value_t = Tier::Operate)]
    pub tier: Tier,
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format for an error at start (the MCP session itself is on stdin/stdout).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// `clawpool mcp token`.
#[derive(Debug, clap::Subcommand)]
pub enum McpAction {
    /// Make a bearer token for `clawpool mcp --listen`; printed once, only its digest is kept.
    /// `--revoke ID` removes one instead.
    Token(McpTokenArgs),
}

#[derive(Debug, Args)]
pub struct McpTokenArgs {
    /// What the token's calls may do.
    #[arg(long, value_enum, required_unless_present = "revoke")]
    pub tier: Option<Tier>,
    /// Revoke the token with this id (as the token file and the audit log name it) instead of
    /// making one: it stops working at the next request.
    #[arg(long, value_name = "ID", conflicts_with_all = ["tier", "label"])]
    pub revoke: Option<String>,
    /// A name for it, shown in the token file.
    #[arg(long)]
    pub label: Option<String>,
    /// The repository (default: the one containing the current folder).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}

/// `clawpool mcp --tier`: here, not in `mcp/`, so the flags need nothing of the server.
/// A server's, or a tool's, permission tier; each includes the ones below it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// State, events, the board, waiting.
    Read,
    /// Also spawn, send, stop, restart, recover, verify, merge-forward.
    Operate,
    /// Also trust and answer.
    Admin,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Read => "read",
            Tier::Operate => "operate",
            Tier::Admin => "admin",
        }
    }
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The lane: its folder, or its name in this repository.
    pub lane: PathBuf,
    /// The git remote to push to (default: [forge] remote, else origin).
    #[arg(long)]
    pub remote: Option<String>,
    #[command(flatten)]
    pub config: ConfigFlag,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
}
