//! A lane's branch and verification, in the process that owns the lane: the freshness watch
//! (at start and every `freshness_check_secs`), `clawpool merge-forward` and `clawpool verify`
//! (through the lane's control socket while a supervisor drives it, directly otherwise), and
//! verification when the lane finishes (the packet's `verify_on_finish`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clawpool::lane_state::StateRecorder;
use clawpool::verify::{
    self, BranchCheck, FreshnessSettings, LaneVerifySpec, Verified, check_branch, merge_problem,
    record_branch, record_merge,
};
use clawpool_lanes::state_file::{GreenLevel, LaneOutcome};
use clawpool_lanes::{
    BlockedSubphase, EventLog, LaneState, LaneStatus, StateFileWriter, read_lane_state,
};
use clawpool_worktree::{Repo, merge_forward};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::cli::{MergeForwardArgs, OutputFormat, VerifyArgs};
use crate::control::{LaneOp, OpRequest};
use crate::output::CommandError;
use crate::registry::{RegistryEntry, RegistryFolder};

/// What a lane's branch work needs.
#[derive(Clone)]
pub struct LaneChecks {
    /// The repository's top folder.
    pub repo_root: PathBuf,
    /// The lane's worktree.
    pub dir: PathBuf,
    /// The lane's base ref.
    pub base: String,
    /// Its verification settings.
    pub spec: LaneVerifySpec,
    /// Where verification logs go.
    pub log_dir: PathBuf,
    /// Check and fetch intervals.
    pub freshness: FreshnessSettings,
}

impl LaneChecks {
    /// The checks of a lane from its registry entry.
    pub fn from_registry(
        entry: &RegistryEntry,
        repo: &Repo,
        dir: &Path,
        registry: &RegistryFolder,
        freshness: FreshnessSettings,
    ) -> LaneChecks {
        let base = entry
            .base
            .git_ref
            .clone()
            .unwrap_or_else(|| repo.main_branch().unwrap_or_else(|_| "main".into()));
        LaneChecks {
            repo_root: repo.root().to_owned(),
            dir: dir.to_owned(),
            base,
            spec: entry.verify.clone(),
            log_dir: registry.verify_logs(),
            freshness,
        }
    }

    /// Checks the branch and records it in the state file (and `branch.stale_against_main`
    /// when it just became stale).
    pub async fn check(&self, events: &EventLog, recorder: &StateRecorder) -> BranchCheck {
        let (dir, base, settings) = (self.dir.clone(), self.base.clone(), self.freshness);
        let check = tokio::task::spawn_blocking(move || check_branch(&dir, &base, &settings))
            .await
            .unwrap_or_else(|_| check_branch(&self.dir, &self.base, &self.freshness));
        let was = recorder.doc().freshness.map(|f| f.state);
        record_branch(events, &check, was);
        recorder.update(|doc| {
            doc.head = check.head.clone();
            doc.git_operation = check.operation;
            doc.freshness = Some(check.freshness.clone());
        });
        check
    }

    /// Checks now and then every interval, until aborted.
    pub fn watch(
        self,
        events: Arc<EventLog>,
        recorder: StateRecorder,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.freshness.check_interval);
            loop {
                tick.tick().await;
                self.check(&events, &recorder).await;
            }
        })
    }

    /// Brings the base in (`merge_forward`, or `rebase` when that is the lane's policy).
    /// When it could not (a dirty worktree, a conflict — aborted —, a detached HEAD, unrelated
    /// histories, a paused git operation, git failing) the lane is held as
    /// `blocked{branch_freshness}` with the reason, through `lane.branch_blocked`; the state
    /// changes only with `transition` (no worker driven any more), as for `verify`.
    pub async fn merge_forward(
        &self,
        events: &EventLog,
        recorder: &StateRecorder,
        transition: bool,
    ) -> Value {
        self.bring_base_in(events, recorder, transition).await.0
    }

    /// [`LaneChecks::merge_forward`], with why it did not bring the base in, if it did not.
    pub async fn bring_base_in(
        &self,
        events: &EventLog,
        recorder: &StateRecorder,
        transition: bool,
    ) -> (Value, Option<String>) {
        let policy = match self.spec.merge_policy {
            clawpool_worktree::MergePolicy::Rebase => clawpool_worktree::MergePolicy::Rebase,
            _ => clawpool_worktree::MergePolicy::MergeForward,
        };
        let (root, dir, base) = (self.repo_root.clone(), self.dir.clone(), self.base.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            Repo::open(&root).and_then(|repo| merge_forward(&repo, &dir, &base, policy))
        })
        .await;
        let (reply, problem, detail) = match outcome {
            Ok(Ok(outcome)) => {
                record_merge(events, &outcome);
                let detail = serde_json::to_value(&outcome).unwrap_or_default();
                (
                    json!({"ok": true, "merge": outcome}),
                    merge_problem(&outcome),
                    detail,
                )
            }
            Ok(Err(err)) => {
                let error = err.to_string();
                let _ = events.record(
                    "branch.merge_failed",
                    None,
                    None,
                    None,
                    json!({"error": error}),
                );
                (
                    json!({"ok": false, "error": error}),
                    Some(format!("merging the base failed: {error}")),
                    json!({"outcome": "failed", "error": error}),
                )
            }
            Err(err) => (
                json!({"ok": false, "error": err.to_string()}),
                None,
                json!({}),
            ),
        };
        if let Some(reason) = &problem {
            let current = recorder.doc().lane_state();
            let blocked = LaneState::blocked(BlockedSubphase::BranchFreshness);
            let to = (transition && current != blocked).then_some(blocked);
            let mut detail = detail;
            // `message` is what the state file shows as the failure's detail.
            detail["message"] = json!(reason);
            let _ = events.record("lane.branch_blocked", to.map(|_| current), to, None, detail);
        }
        self.check(events, recorder).await;
        (reply, problem)
    }

    /// Verifies `level`; `transition` when no worker is driven any more.
    pub async fn verify(
        &self,
        level: GreenLevel,
        events: &EventLog,
        recorder: &StateRecorder,
        transition: bool,
    ) -> Verified {
        let mut plan = self
            .spec
            .plan(level, &self.base, self.log_dir.clone(), self.freshness);
        let doc = recorder.doc();
        plan.last_freshness = doc.freshness.map(|f| f.state);
        plan.held = doc.green_level.zip(doc.verification.and_then(|v| v.head));
        let current = recorder.doc().lane_state();
        let verified = verify::verify(
            &self.repo_root,
            &self.dir,
            &plan,
            events,
            current,
            transition,
        )
        .await;
        if let Some(branch) = &verified.branch {
            recorder.update(|doc| {
                doc.head = branch.head.clone();
                doc.git_operation = branch.operation;
                doc.freshness = Some(branch.freshness.clone());
            });
        }
        verified
    }

    /// Records what the finished lane's work came to (`lane.outcome`): `no_changes` when its
    /// branch has no commits of its own since its base (`base_sha`, the sha it was made from,
    /// and the base ref's tip; merge commits bringing the base in are not its own) and its
    /// worktree is clean, `changed` otherwise. Nothing is recorded when git cannot tell.
    pub async fn record_outcome(&self, base_sha: Option<String>, events: &EventLog) {
        let (dir, base) = (self.dir.clone(), self.base.clone());
        let looked =
            tokio::task::spawn_blocking(move || own_work(&dir, &base, base_sha.as_deref())).await;
        let Ok(Some((commits, dirty))) = looked else {
            return;
        };
        let outcome = if commits == 0 && !dirty {
            LaneOutcome::NoChanges
        } else {
            LaneOutcome::Changed
        };
        let _ = events.record(
            "lane.outcome",
            None,
            None,
            None,
            json!({"outcome": outcome, "commits": commits, "dirty": dirty}),
        );
    }

    /// Serves branch requests for a lane being driven: each waits for the agent to be idle
    /// (ready or finished) — a merge or a test run never happens under an agent at work.
    pub fn serve(
        self,
        mut requests: mpsc::Receiver<OpRequest>,
        events: Arc<EventLog>,
        recorder: StateRecorder,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while let Some((op, reply)) = requests.recv().await {
                let mut statuses = recorder.statuses();
                let _ = statuses
                    .wait_for(|s| matches!(s, LaneStatus::ReadyForPrompt | LaneStatus::Finished))
                    .await;
                let result = match op {
                    LaneOp::MergeForward => self.merge_forward(&events, &recorder, false).await,
                    LaneOp::Verify { level } => {
                        let verified = self.verify(level, &events, &recorder, false).await;
                        verified_json(&verified)
                    }
                };
                let _ = reply.send(result);
            }
        })
    }
}

/// The lane worktree `dir`'s own work: its commits that are not merges and not reachable from
/// its base (the ref, and the sha it was made from), and whether the worktree is dirty.
fn own_work(dir: &Path, base_ref: &str, base_sha: Option<&str>) -> Option<(u64, bool)> {
    let dirty = clawpool_worktree::worktree_status(dir).ok()?.dirty;
    let out = std::process::Command::new("git")
        .args([
            "rev-list",
            "--count",
            "--no-merges",
            "HEAD",
            "--not",
            base_ref,
        ])
        .args(base_sha)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let commits = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some((commits, dirty))
}

fn verified_json(verified: &Verified) -> Value {
    json!({
        "ok": true,
        "verification": verified.verification,
        "green_level": verified.green_level,
        "lane_state": verified.lane_state,
    })
}

/// The lane's registry entry and files, for the commands that act on a lane directly.
struct LaneOnDisk {
    checks: LaneChecks,
    events: PathBuf,
    name: String,
}

fn lane_on_disk(arg: &Path) -> Result<LaneOnDisk, CommandError> {
    let found = crate::board::find_lane(arg)?;
    let registry = RegistryFolder::of_events(&found.events);
    let entry = registry.entry().map_err(|_| {
            CommandError::invalid(
                "not_a_spawned_lane",
                format!(
                    "{} is not a lane made by `clawpool spawn` (no registry entry): it has no base to compare with",
                    found.dir.display()
                ),
            )
        })?;
    let repo = Repo::open(&found.dir)
        .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?;
    Ok(LaneOnDisk {
        checks: LaneChecks::from_registry(
            &entry,
            &repo,
            &found.dir,
            &registry,
            FreshnessSettings::default(),
        ),
        events: found.events,
        name: entry.name.clone(),
    })
}

/// Sends `op` to the supervisor driving the lane, if one is; `None` when none listens.
async fn through_supervisor(dir: &Path, op: &LaneOp) -> Option<Value> {
    let socket = clawpool_worktree::layout::control_socket(dir);
    let line = serde_json::to_string(op).ok()?;
    let reply = crate::control::request(&socket, &line).await.ok()?;
    serde_json::from_str(&reply).ok()
}

/// Runs `op` on a lane no supervisor drives: this process writes its events and state file.
async fn directly(lane: &LaneOnDisk, op: &LaneOp) -> Result<Value, CommandError> {
    let doc = read_lane_state(&lane.checks.dir).map_err(|e| CommandError {
        kind: e.kind(),
        message: e.to_string(),
        exit: crate::output::EXIT_FAILURE,
    })?;
    let recorder = StateRecorder::new(doc, StateFileWriter::for_worktree(&lane.checks.dir));
    let on_state = recorder.clone();
    let events = EventLog::open(&lane.name, &lane.events)
        .map_err(|e| CommandError::io("opening the lane's event log", e.source))?
        .observe(Box::new(move |event| on_state.on_event(event)));
    Ok(match op {
        LaneOp::MergeForward => lane.checks.merge_forward(&events, &recorder, true).await,
        LaneOp::Verify { level } => {
            verified_json(&lane.checks.verify(*level, &events, &recorder, true).await)
        }
    })
}

async fn run_op(lane_arg: &Path, op: LaneOp) -> Result<Value, CommandError> {
    let lane = lane_on_disk(lane_arg)?;
    match through_supervisor(&lane.checks.dir, &op).await {
        Some(reply) => Ok(reply),
        None => directly(&lane, &op).await,
    }
}

/// `clawpool merge-forward LANE`.
pub async fn run_merge_forward(args: MergeForwardArgs) -> Result<ExitCode, CommandError> {
    let reply = run_op(&args.lane, LaneOp::MergeForward).await?;
    if reply["ok"] != true {
        return Err(CommandError {
            kind: "merge_forward_failed",
            message: reply["error"].as_str().unwrap_or_default().to_owned(),
            exit: crate::output::EXIT_FAILURE,
        });
    }
    let merge = &reply["merge"];
    match args.output_format {
        OutputFormat::Json => println!("{merge}"),
        OutputFormat::Text => println!("{}", describe_merge(merge)),
    }
    Ok(match merge["outcome"].as_str() {
        Some("merged" | "up_to_date") => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

fn describe_merge(merge: &Value) -> String {
    let text = |key: &str| merge[key].as_str().unwrap_or_default().to_owned();
    let paths = || {
        merge["paths"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    match merge["outcome"].as_str().unwrap_or_default() {
        "merged" => format!(
            "merged {} forward: {} -> {}",
            text("base_sha"),
            text("old_head"),
            text("new_head")
        ),
        "up_to_date" => format!("up to date with {}", text("base_sha")),
        "dirty" => format!("refused: uncommitted changes in {}", paths()),
        "conflict" => format!(
            "conflict in {}; aborted, the lane is back at {}",
            paths(),
            text("head")
        ),
        "detached" => format!("refused: HEAD is detached at {}", text("sha")),
        "diverged" => "refused: the branch shares no history with its base".into(),
        "operation_in_progress" => format!("refused: a git operation is in progress ({merge})"),
        other => format!("{other}: {merge}"),
    }
}

/// `clawpool verify LANE [--level LEVEL]`.
pub async fn run_verify(args: VerifyArgs) -> Result<ExitCode, CommandError> {
    let level = GreenLevel::parse(&args.level).ok_or_else(|| {
        CommandError::invalid(
            "invalid_level",
            format!(
                "unknown level {:?}: expected targeted, package, workspace or merge_ready",
                args.level
            ),
        )
    })?;
    let progress = crate::progress::Progress::spinner(
        args.output_format,
        format!("verifying {} at {}", args.lane.display(), args.level),
    );
    let reply = run_op(&args.lane, LaneOp::Verify { level }).await;
    progress.clear();
    let reply = reply?;
    let verification = &reply["verification"];
    match args.output_format {
        OutputFormat::Json => println!("{reply}"),
        OutputFormat::Text => {
            for command in verification["commands"].as_array().into_iter().flatten() {
                println!(
                    "{:<7} {:>7} ms  {}  (log: {})",
                    command["outcome"].as_str().unwrap_or_default(),
                    command["duration_ms"],
                    command["command"].as_str().unwrap_or_default(),
                    command["log"].as_str().unwrap_or_default()
                );
            }
            let reason = verification["reason"]
                .as_str()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            println!(
                "{}: {}{reason}; green level: {}",
                verification["level"].as_str().unwrap_or_default(),
                verification["result"].as_str().unwrap_or_default(),
                reply["green_level"].as_str().unwrap_or("none")
            );
        }
    }
    Ok(if verification["result"] == "green" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
