//! Publishing a lane's work: [`push`] pushes its branch to the configured remote, [`pull_request`]
//! pushes it and finds or opens its pull request on the forge ([`crate::forge`]), with a title
//! and a description made from the lane's task and outcome ([`describe`]), and records
//! `lane.pr.opened` in the lane's event log, which the lane's record (`pull_request`) follows.
//!
//! What it reads of the lane is clawpool's own: the registry entry (branch, base, task) and
//! the lane's record (green level, the last verification's commands); the commits are read
//! from git. Recording takes the lane's supervisor lock, as every writer of a lane's record
//! does: a lane a supervisor still drives is refused (its supervisor owns the record).

use std::path::PathBuf;

use clawpool_agents::config::ForgeSettings;
use clawpool_lane::lane_state::StateRecorder;
use clawpool_lane::registry::{RegistryEntry, RegistryFolder};
use clawpool_lanes::payload::PrOpened;
use clawpool_lanes::state_file::SupervisorLock;
use clawpool_lanes::{EventLog, Payload, WorkerStateDoc, read_lane_record, wire_name};
use clawpool_worktree::{LaneCommit, Pushed, Repo, lane_diff, push_branch};
use serde::Serialize;

use crate::forge::{Forge, ForgeError, NewPull};

/// A lane to publish, as the caller found it.
#[derive(Debug, Clone)]
pub struct LaneToPublish {
    /// Its worktree.
    pub dir: PathBuf,
    /// Its event log (in its registry folder).
    pub events: PathBuf,
}

/// Why a lane was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Its registry entry cannot be read: not a lane `clawpool spawn` made.
    #[error("{0} is not a lane made by `clawpool spawn` (no readable registry entry)")]
    NotALane(String),
    /// Its registry entry names no branch (a lane on a detached HEAD).
    #[error("lane {0} has no branch to push")]
    NoBranch(String),
    /// `git push` failed.
    #[error("pushing lane {lane}'s branch {branch} to {remote} failed: {message}")]
    Push {
        /// The lane.
        lane: String,
        /// Its branch.
        branch: String,
        /// The remote.
        remote: String,
        /// git's message.
        message: String,
    },
    /// `[forge] repository` is not set.
    #[error(
        "no forge repository is configured: set [forge] repository = \"owner/name\" (docs/config.md)"
    )]
    NoRepository,
    /// The token's variable is unset or empty.
    #[error("no forge token: the variable {0} is unset or empty ([forge] token_env names it)")]
    NoToken(String),
    /// A supervisor drives the lane: it owns the lane's record.
    #[error("a supervisor drives lane {lane} ({reason}): stop it or let it finish")]
    LaneBusy {
        /// The lane.
        lane: String,
        /// Why its lock could not be taken.
        reason: String,
    },
    /// The lane's record or log could not be read or opened.
    #[error("lane {lane}: {message}")]
    Record {
        /// The lane.
        lane: String,
        /// What went wrong.
        message: String,
    },
    /// The forge refused or could not be reached.
    #[error(transparent)]
    Forge(#[from] ForgeError),
}

impl PublishError {
    /// Its kind in JSON errors.
    pub fn kind(&self) -> &'static str {
        match self {
            PublishError::NotALane(_) => "not_a_spawned_lane",
            PublishError::NoBranch(_) => "no_branch",
            PublishError::Push { .. } => "push_failed",
            PublishError::NoRepository => "forge_not_configured",
            PublishError::NoToken(_) => "forge_token_missing",
            PublishError::LaneBusy { .. } => "lane_busy",
            PublishError::Record { .. } => "lane_record",
            PublishError::Forge(e) => e.kind(),
        }
    }
}

/// What `clawpool push` did.
#[derive(Debug, Clone, Serialize)]
pub struct PushReport {
    /// The lane.
    pub lane: String,
    /// The push.
    #[serde(flatten)]
    pub pushed: Pushed,
}

/// What `clawpool pr` did.
#[derive(Debug, Clone, Serialize)]
pub struct PrReport {
    /// The lane.
    pub lane: String,
    /// The push that came first.
    pub push: Pushed,
    /// The forge's repository, `owner/name`.
    pub repository: String,
    /// The pull request's base branch.
    pub base: String,
    /// Its number.
    pub number: u64,
    /// Its page.
    pub url: String,
    /// Whether it was open already (`clawpool pr` found it instead of opening another).
    pub existing: bool,
    /// Its title (as sent when it was opened).
    pub title: String,
}

/// The lane's registry entry and branch.
fn lane_entry(lane: &LaneToPublish) -> Result<(RegistryEntry, String), PublishError> {
    let entry = RegistryFolder::of_events(&lane.events)
        .entry()
        .map_err(|_| PublishError::NotALane(lane.dir.display().to_string()))?;
    let branch = entry
        .branch
        .clone()
        .ok_or_else(|| PublishError::NoBranch(entry.name.clone()))?;
    Ok((entry, branch))
}

/// Pushes the lane's branch to `remote`.
pub async fn push(
    repo: &Repo,
    lane: &LaneToPublish,
    remote: &str,
) -> Result<PushReport, PublishError> {
    let (entry, branch) = lane_entry(lane)?;
    let pushed = push_blocking(repo, &entry.name, remote, &branch).await?;
    Ok(PushReport {
        lane: entry.name,
        pushed,
    })
}

async fn push_blocking(
    repo: &Repo,
    lane: &str,
    remote: &str,
    branch: &str,
) -> Result<Pushed, PublishError> {
    let (owned, remote_name, branch_name) = (repo.clone(), remote.to_owned(), branch.to_owned());
    tokio::task::spawn_blocking(move || push_branch(&owned, &remote_name, &branch_name))
        .await
        .map_err(|e| e.to_string())
        .and_then(|pushed| pushed.map_err(|e| e.to_string()))
        .map_err(|message| PublishError::Push {
            lane: lane.to_owned(),
            branch: branch.to_owned(),
            remote: remote.to_owned(),
            message,
        })
}

/// Pushes the lane's branch to the forge's remote and finds its open pull request or opens
/// one; records `lane.pr.opened` unless the lane's record already has this pull request at
/// this HEAD. `token` is the forge's token.
pub async fn pull_request(
    repo: &Repo,
    lane: &LaneToPublish,
    forge: &ForgeSettings,
    token: String,
) -> Result<PrReport, PublishError> {
    let (entry, branch) = lane_entry(lane)?;
    let name = entry.name.clone();
    let (owner, repository) = forge.repository.clone().ok_or(PublishError::NoRepository)?;
    if token.is_empty() {
        return Err(PublishError::NoToken(forge.token_env.clone()));
    }
    let record_dir = RegistryFolder::of_events(&lane.events).dir().to_owned();
    let record_error = |message: String| PublishError::Record {
        lane: name.clone(),
        message,
    };
    // Held to the end: nobody starts driving the lane while its record is written here.
    let _lock = SupervisorLock::hold(&record_dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            PublishError::LaneBusy {
                lane: name.clone(),
                reason: e.to_string(),
            }
        } else {
            record_error(format!("taking its supervisor lock: {e}"))
        }
    })?;
    let doc = read_lane_record(&record_dir, &entry.worktree)
        .map_err(|e| record_error(format!("reading its state: {e}")))?;
    let pushed = push_blocking(repo, &name, &forge.remote, &branch).await?;
    let base = forge_base(&entry, repo, &forge.remote);
    let commits = lane_diff(&entry.worktree, &base_rev(&entry, repo), false)
        .map(|d| d.commits)
        .unwrap_or_default();
    let (title, body) = describe(&entry, &doc, &commits);
    let client = Forge::new(&forge.api_url, &owner, &repository, token)?;
    let opened = client
        .find_or_open(&NewPull {
            branch: pushed.branch.clone(),
            base: base.clone(),
            title: title.clone(),
            body,
        })
        .await?;
    let known = doc
        .pull_request
        .as_ref()
        .is_some_and(|pr| pr.number == opened.number && pr.head == pushed.head);
    if !known {
        let recorder = StateRecorder::new(doc, &record_dir, Some(&entry.worktree));
        let log = EventLog::open(name.clone(), &lane.events)
            .map_err(|e| record_error(format!("opening its event log: {}", e.source)))?
            .observe(Box::new(move |event| recorder.on_event(event)));
        log.report(
            Payload::PrOpened(PrOpened {
                number: opened.number,
                url: opened.url.clone(),
                branch: pushed.branch.clone(),
                base: base.clone(),
                repository: client.repository(),
                head: pushed.head.clone(),
                existing: opened.existing,
            }),
            None,
            None,
            None,
        )
        .map_err(|e| record_error(format!("recording lane.pr.opened: {}", e.source)))?;
    }
    Ok(PrReport {
        lane: name,
        push: pushed,
        repository: client.repository(),
        base,
        number: opened.number,
        url: opened.url,
        existing: opened.existing,
        title,
    })
}

/// The revision the lane's commits are counted from: its base as registered (else the main
/// branch).
fn base_rev(entry: &RegistryEntry, repo: &Repo) -> String {
    entry
        .base
        .git_ref
        .clone()
        .unwrap_or_else(|| repo.main_branch().unwrap_or_else(|_| "main".into()))
}

/// The base as a branch name on the forge: `refs/heads/main`, `main` and `REMOTE/main` are
/// all `main` there.
fn forge_base(entry: &RegistryEntry, repo: &Repo, remote: &str) -> String {
    let rev = base_rev(entry, repo);
    let rev = rev.strip_prefix("refs/heads/").unwrap_or(&rev);
    let rev = rev.strip_prefix("refs/remotes/").unwrap_or(rev);
    rev.strip_prefix(&format!("{remote}/"))
        .unwrap_or(rev)
        .to_owned()
}

/// A pull request's title and description from the lane's task and outcome: the task's first
/// line as the title; the task, the lane's status and green level, the last verification's
/// commands and the lane's commits as the description.
pub fn describe(
    entry: &RegistryEntry,
    doc: &WorkerStateDoc,
    commits: &[LaneCommit],
) -> (String, String) {
    let task = entry.prompt.as_deref().unwrap_or_default().trim();
    let first = task.lines().map(str::trim).find(|l| !l.is_empty());
    let title = match first {
        Some(line) if line.chars().count() > 72 => {
            format!("{}…", line.chars().take(71).collect::<String>())
        }
        Some(line) => line.to_owned(),
        None => format!("lane {}", entry.name),
    };
    let mut body = format!(
        "Work of clawpool lane `{}` ({}).\n\n",
        entry.name, entry.agent
    );
    if !task.is_empty() {
        body.push_str("## Task\n\n");
        for line in task.lines() {
            body.push_str(&format!("> {line}\n"));
        }
        body.push('\n');
    }
    body.push_str("## Outcome\n\n");
    body.push_str(&format!("- status: {}\n", wire_name(&doc.status)));
    body.push_str(&format!(
        "- green level: {}\n",
        doc.green_level.map_or("none", |l| l.as_str())
    ));
    match &doc.verification {
        Some(v) if !v.commands.is_empty() => {
            body.push_str(&format!(
                "- tests run (level {}, {}):\n",
                v.level.as_str(),
                wire_name(&v.result)
            ));
            for command in &v.commands {
                body.push_str(&format!(
                    "  - `{}`: {}\n",
                    command.command,
                    wire_name(&command.outcome)
                ));
            }
        }
        _ => body.push_str("- tests run: none\n"),
    }
    body.push_str(&format!("\n## Commits ({})\n\n", commits.len()));
    for commit in commits {
        body.push_str(&format!(
            "- {} {}\n",
            commit.sha.chars().take(10).collect::<String>(),
            commit.summary
        ));
    }
    (title, body)
}
