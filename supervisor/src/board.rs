//! Reading lanes back: `clawpool board` (every lane of a repository) and `clawpool events`
//! (how a lane argument finds its lane is the pool's). Read-only: these work from the
//! lanes' records (`state.json` in each registry folder, never the worktree's published copy)
//! and event logs alone, with or without a supervisor running.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{read_lane_record, with_ages};
use clawpool_worktree::{BranchesNow, Repo};
use serde_json::{Value, json};

use crate::cli::OutputFormat;
use crate::output::{CommandError, EXIT_FAILURE};
use clawpool_lane::registry::{lane_registry, registered_names};
use clawpool_worktree::layout::LANE_DIR;

/// How a lane argument finds its lane is the pool's ([`clawpool_pool::lane_lookup`]).
pub use clawpool_pool::lane_lookup::{FoundLane, find_enclosing_lane, find_lane};

/// Every lane in the repository's registry, each as [`board_lane`] shows it; the bases are
/// resolved once for the whole board.
fn collect(repo: &Repo) -> Vec<Value> {
    let now = now_secs();
    let mut branches = BranchesNow::open(repo).ok();
    registered_names(repo)
        .into_iter()
        .map(|name| lane_row(repo, branches.as_mut(), &name, now))
        .collect()
}

/// One lane of the board: its state document with ages as of `now` (or the error reading it),
/// plus commits ahead of base and whether the worktree is dirty (`board`). `clawpool ui` reads
/// lanes through this too, so the dashboard and the board never disagree.
pub fn board_lane(repo: &Repo, name: &str, now: u64) -> Value {
    lane_row(repo, BranchesNow::open(repo).ok().as_mut(), name, now)
}

/// [`board_lane`] with the repository's bases as `branches` resolved them.
///
/// The branch facts are the base's as it is now, whoever last wrote the record: a finished
/// lane has no owner left to check it, so its record's freshness, its commits ahead and its
/// `merge_ready` are taken as they are only while its HEAD and its base have not moved since
/// that check (`BranchesNow`). Otherwise the branch is checked again here (no fetch) and the
/// row shows that; a `merge_ready` green then stands only on a branch still `fresh` (else the
/// row shows `workspace`, the most a branch not known fresh reaches, and
/// `board.recorded_green_level` keeps what the record says). The state record itself is left
/// to its owner; what was worked out for an ended lane is kept in its `branch.json` (see
/// `BranchesNow::lane_kept`) so that the next board reads it instead of the worktree.
fn lane_row(repo: &Repo, branches: Option<&mut BranchesNow>, name: &str, now: u64) -> Value {
    let registry = lane_registry(repo, name);
    let entry = registry.entry().ok();
    let dir = entry
        .as_ref()
        .map(|e| e.worktree.clone())
        .unwrap_or_default();
    let record = read_lane_record(registry.dir(), &dir);
    let mut doc = match &record {
        Ok(doc) => with_ages(doc, registry.dir(), now).to_json(),
        // A lane whose state cannot be read is still on the board, with why.
        Err(err) => {
            json!({"lane": name, "worktree": dir, "lane_status": "unknown", "error": err.to_json()["error"]})
        }
    };
    // As the lane's own checks: its recorded base, else the repository's main branch.
    let base = entry
        .as_ref()
        .and_then(|e| e.base.git_ref.clone().or_else(|| repo.main_branch().ok()));
    let recorded = record.as_ref().ok().and_then(|d| d.freshness.as_ref());
    let known: Vec<&str> = entry
        .iter()
        .filter_map(|e| e.base.sha.as_deref())
        .chain(recorded.and_then(|f| f.base_sha.as_deref()))
        .collect();
    // A lane that has not ended may have an agent at work (its supervisor's, or one whose
    // supervisor was lost): its files change without its HEAD moving, so it is worked out
    // now. An ended one is taken from its kept branch record while that is current, and the
    // record is written back whenever the worktree had to be opened, so the next board of
    // it reads files only.
    let owned = !record.as_ref().is_ok_and(|doc| doc.status.is_terminal());
    let branch = match (branches, base) {
        (Some(branches), Some(base)) => {
            let kept = if owned {
                None
            } else {
                registry.branch_record()
            };
            let (lane, fresh) =
                branches.lane_kept(&dir, &base, &known, recorded, kept.as_ref(), owned);
            if let Some(fresh) = fresh.filter(|f| kept.as_ref() != Some(f)) {
                registry.keep_branch_record(&fresh);
            }
            Some(lane)
        }
        _ => None,
    };
    let mut recorded_green = Value::Null;
    if let Some(branch) = &branch {
        doc["freshness"] = serde_json::to_value(&branch.freshness).unwrap_or(Value::Null);
        if doc["green_level"] == "merge_ready"
            && branch.freshness.state != clawpool_worktree::FreshnessState::Fresh
        {
            recorded_green = doc["green_level"].take();
            doc["green_level"] = "workspace".into();
        }
    }
    let degraded = registry.degraded();
    let count = |key: &str| doc["permissions"][key].as_u64().unwrap_or(0);
    let permissions = json!({
        "allowed": count("allowed"),
        "denied": count("denied"),
        "asked": count("asked"),
    });
    doc["board"] = json!({
        "dirty": branch.as_ref().and_then(|b| b.dirty),
        "commits_ahead": branch.as_ref().and_then(|b| b.freshness.ahead),
        "state_file_degraded": degraded,
        "permissions": permissions,
    });
    if !recorded_green.is_null() {
        doc["board"]["recorded_green_level"] = recorded_green;
    }
    doc
}

pub async fn run_board(
    repo_dir: &Path,
    all: bool,
    watch: bool,
    format: OutputFormat,
) -> Result<ExitCode, CommandError> {
    let repo = if all {
        None
    } else {
        Some(
            Repo::open(repo_dir)
                .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?,
        )
    };
    loop {
        // `--all`: every repository of the user's index, read again each round (spawn and gc
        // keep it current), each lane labelled with its repository.
        let repos = match &repo {
            Some(repo) => vec![repo.clone()],
            None => {
                crate::known_repos::read().map_err(|e| CommandError::invalid("invalid_index", e))?
            }
        };
        let sections: Vec<(&Repo, Vec<Value>)> =
            repos.iter().map(|repo| (repo, collect(repo))).collect();
        match format {
            OutputFormat::Json => {
                let lanes: Vec<Value> = sections
                    .iter()
                    .flat_map(|(repo, lanes)| {
                        lanes.iter().cloned().map(move |mut lane| {
                            if all {
                                lane["repository"] = repo.root().display().to_string().into();
                            }
                            lane
                        })
                    })
                    .collect();
                let cost: Vec<Value> = sections
                    .iter()
                    .map(|(repo, lanes)| {
                        let mut cost = repository_cost(lanes);
                        cost["repository"] = repo.root().display().to_string().into();
                        cost
                    })
                    .collect();
                println!("{}", json!({"lanes": lanes, "cost": cost}));
            }
            OutputFormat::Text => {
                if watch {
                    print!("\x1b[H\x1b[2J");
                }
                for (repo, lanes) in &sections {
                    if all {
                        println!("repository {}", repo.root().display());
                    }
                    print_table(lanes);
                }
                if all && sections.is_empty() {
                    println!("(no repository with lanes in the index)");
                }
            }
        }
        if !watch {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// A lane's permission questions as `allowed/denied/asked`, `-` when it had none.
fn permissions_cell(counts: &Value) -> String {
    let count = |key: &str| counts[key].as_u64().unwrap_or(0);
    match (count("allowed"), count("denied"), count("asked")) {
        (0, 0, 0) => "-".into(),
        (allowed, denied, asked) => format!("{allowed}/{denied}/{asked}"),
    }
}

/// The lane's tokens as its agent reported them (`usage` in the state file): `IN/OUT` in
/// total, `-` when it reported none (unknown, not zero).
pub fn tokens_cell(usage: &Value) -> String {
    match (
        usage["total"]["input"].as_u64(),
        usage["total"]["output"].as_u64(),
    ) {
        (Some(input), Some(output)) => format!("{input}/{output}"),
        _ => "-".into(),
    }
}

/// The lane's sandbox (`sandbox` in the state file): `workspace`, `workspace/no-net` without a
/// network, `off` when its agent runs unconfined.
fn sandbox_cell(sandbox: &Value) -> String {
    match (sandbox["mode"].as_str(), sandbox["network"].as_str()) {
        (Some(mode), Some("none")) => format!("{mode}/no-net"),
        (Some(mode), _) => mode.to_owned(),
        _ => "off".into(),
    }
}

/// The lane's cost (`cost_usd` in the state file) as `$0.0123`; `?` when its agent reported
/// usage that could not be priced (`cost.unknown_because` says why), `-` when it reported none.
pub fn cost_cell(lane: &Value) -> String {
    match lane["cost_usd"].as_f64() {
        Some(usd) => format!("${usd:.4}"),
        None if lane["cost"].is_object() => "?".into(),
        None => "-".into(),
    }
}

/// What a repository's lanes cost together (the board's `cost`): the sum of the lanes with a
/// `cost_usd`, and how many lanes reported usage that could not be priced (not in the sum).
pub fn repository_cost(lanes: &[Value]) -> Value {
    let priced: Vec<f64> = lanes
        .iter()
        .filter_map(|l| l["cost_usd"].as_f64())
        .collect();
    let unpriced = lanes
        .iter()
        .filter(|l| l["cost_usd"].is_null() && l["cost"].is_object())
        .count();
    json!({
        // Folded from +0.0: an empty f64 sum is -0.0, printed `$-0.0000`.
        "total_usd": priced.iter().fold(0.0, |total, cost| total + cost),
        "lanes_priced": priced.len(),
        "lanes_unpriced": unpriced,
    })
}

fn print_table(lanes: &[Value]) {
    let text = |v: &Value| {
        v.as_str().map(str::to_owned).unwrap_or_else(|| {
            if v.is_null() {
                "-".into()
            } else {
                v.to_string()
            }
        })
    };
    let rows: Vec<[String; 15]> = lanes
        .iter()
        .map(|l| {
            let status = status_cell(l);
            let status = match l["board"]["state_file_degraded"].as_str() {
                Some(_) => format!("{status} (state file degraded)"),
                None => status,
            };
            let in_state = l["lane_event"]["timestamp"]
                .as_u64()
                .map(|t| format!("{}s", now_secs().saturating_sub(t)))
                .unwrap_or_else(|| "-".into());
            let ahead = l["board"]["commits_ahead"]
                .as_u64()
                .map(|n| format!("+{n}"))
                .unwrap_or_else(|| "-".into());
            let dirty = match l["board"]["dirty"].as_bool() {
                Some(true) => "dirty",
                Some(false) => "clean",
                None => "-",
            };
            [
                text(&l["lane"]),
                text(&l["agent"]),
                status,
                in_state,
                l["seconds_since_update"]
                    .as_u64()
                    .map(|s| format!("{s}s"))
                    .unwrap_or_else(|| "-".into()),
                text(&l["branch"]),
                format!("{ahead} {dirty}"),
                freshness_cell(l),
                text(&l["green_level"]),
                permissions_cell(&l["board"]["permissions"]),
                tokens_cell(&l["usage"]),
                cost_cell(l),
                l["lane_event"]["kind"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| l["error"]["kind"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "-".into()),
                sandbox_cell(&l["sandbox"]),
                l["pull_request"]["number"]
                    .as_u64()
                    .map_or_else(|| "-".into(), |n| format!("#{n}")),
            ]
        })
        .collect();
    let header = [
        "lane",
        "agent",
        "status",
        "in state",
        "progress",
        "branch",
        "commits",
        "freshness",
        "green",
        "perms a/d/?",
        "tokens",
        "cost",
        "last event",
        "sandbox",
        "pr",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", line(&header.map(str::to_owned)));
    for row in &rows {
        println!("{}", line(row));
    }
    if rows.is_empty() {
        println!("(no lanes in this repository)");
    } else {
        let cost = repository_cost(lanes);
        let unpriced = cost["lanes_unpriced"].as_u64().unwrap_or(0);
        println!(
            "cost: ${:.4} over {} priced lane(s){}",
            cost["total_usd"].as_f64().unwrap_or(0.0),
            cost["lanes_priced"],
            match unpriced {
                0 => String::new(),
                n => format!(", {n} lane(s) with usage that has no price (cost `?`)"),
            }
        );
    }
    for l in lanes {
        if let (Some(reason), Some(next)) = (
            l["escalation"]["reason"].as_str(),
            l["escalation"]["next_action"].as_str(),
        ) {
            println!("{}: {reason}\n    next: {next}", text(&l["lane"]));
        }
    }
}

/// The lane's status with its subphase, failure class or `no_changes` outcome in braces:
/// `blocked{trust}`, `failed{worker_crashed}`, `running`.
pub fn status_cell(lane: &Value) -> String {
    let status = lane["lane_status"].as_str().unwrap_or("-");
    match lane["blocked"]["subphase"].as_str() {
        Some(sub) => format!("{status}{{{sub}}}"),
        None => match lane["failure"]["class"]
            .as_str()
            .or(lane["outcome"].as_str().filter(|o| *o == "no_changes"))
        {
            Some(class) => format!("{status}{{{class}}}"),
            None => status.to_owned(),
        },
    }
}

/// `fresh`, `stale -3`, `diverged`, `base_rewound +1` (the commits the branch would bring
/// back), `unknown`, or the paused git operation.
pub fn freshness_cell(lane: &Value) -> String {
    if let Some(kind) = lane["git_operation"]["kind"].as_str() {
        return format!("{kind} in progress");
    }
    if lane["head"]["kind"] == "detached" {
        let sha = lane["head"]["sha"].as_str().unwrap_or_default();
        return format!("detached {}", &sha[..sha.len().min(8)]);
    }
    let freshness = &lane["freshness"];
    match (freshness["state"].as_str(), freshness["behind"].as_u64()) {
        (Some("stale"), Some(behind)) => format!("stale -{behind}"),
        (Some("base_rewound"), _) => match freshness["dropped"].as_u64() {
            Some(dropped) => format!("base_rewound +{dropped}"),
            None => "base_rewound".into(),
        },
        (Some(state), _) => state.to_owned(),
        (None, _) => "-".into(),
    }
}

pub async fn run_events(lane: &Path, follow: bool) -> Result<ExitCode, CommandError> {
    let found = find_lane(lane)?;
    // One listener for the whole run: a `ctrl_c()` made anew each round misses a Ctrl-C that
    // arrives while the log is being read. Only when following: a plain read stays
    // interruptible by the default action.
    let mut interrupt = if follow {
        Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .map_err(|e| CommandError::io("listening for Ctrl-C", e))?,
        )
    } else {
        None
    };
    let mut offset = 0usize;
    loop {
        let text = match std::fs::read_to_string(&found.events) {
            Ok(text) => text,
            Err(e) if offset == 0 && !follow => {
                return Err(CommandError {
                    kind: "missing_events",
                    message: format!("no event log at {}: {e}", found.events.display()),
                    exit: EXIT_FAILURE,
                });
            }
            Err(_) => String::new(),
        };
        // Only whole lines: a line being appended right now is printed on the next round.
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        if complete > offset {
            print!("{}", &text[offset..complete]);
            offset = complete;
        }
        let Some(interrupt) = interrupt.as_mut() else {
            return Ok(ExitCode::SUCCESS);
        };
        // Following never ends by itself, not even when the lane does: events still come
        // after it (its last commits, verification, merge-forward). Ctrl-C ends it, exit 0.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// `clawpool attach`: a tmux lane is attached for real (a person can take over); a PTY lane is
/// mirrored read-only from its raw terminal log until it ends or Ctrl-C.
pub async fn run_attach(lane: &Path) -> Result<ExitCode, CommandError> {
    let found = find_lane(lane)?;
    let doc = found.state().map_err(|err| CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit: EXIT_FAILURE,
    })?;
    if let Some(target) = &doc.transport.session {
        let (socket, session) = target.split_once(':').unwrap_or(("", target));
        let err = std::os::unix::process::CommandExt::exec(
            std::process::Command::new("tmux")
                .args(["-L", socket, "attach", "-t", session])
                .env_remove("TMUX"),
        );
        return Err(CommandError::io("running tmux attach", err));
    }
    let log = found.events.with_file_name("terminal.log");
    let log = if log.is_file() {
        log
    } else {
        found.dir.join(LANE_DIR).join("terminal.log")
    };
    // Lanes run at the default size; the mirror replays at that size.
    let mut model = clawpool_pty::ScreenModel::new(clawpool_pty::ScreenOptions {
        answer_queries: false,
        ..clawpool_pty::ScreenOptions::new(clawpool_pty::TermSize::default())
    });
    let mut offset = 0usize;
    let mut out = std::io::stdout();
    loop {
        let bytes = std::fs::read(&log)
            .map_err(|e| CommandError::io("reading the lane's terminal log", e))?;
        if bytes.len() < offset {
            offset = 0; // rotated
        }
        if bytes.len() > offset {
            model.feed(&bytes[offset..]);
            offset = bytes.len();
            let mut frame = b"\x1b[H\x1b[2J".to_vec();
            frame.extend_from_slice(&model.contents_formatted());
            std::io::Write::write_all(&mut out, &frame)
                .map_err(|e| CommandError::io("writing to the terminal", e))?;
            std::io::Write::flush(&mut out)
                .map_err(|e| CommandError::io("writing to the terminal", e))?;
        }
        let ended = found
            .state()
            .map(|d| d.status.is_terminal())
            .unwrap_or(true);
        if ended {
            println!("\r\nclawpool: the lane has ended");
            return Ok(ExitCode::SUCCESS);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_cells_and_the_repository_total_never_count_unknown_as_zero() {
        let priced = json!({"cost_usd": 0.5, "cost": {"model": "m"}});
        let unpriced = json!({"cost": {"model": "x", "unknown_because": "no price"}});
        let no_usage = json!({"lane": "quiet"});
        assert_eq!(cost_cell(&priced), "$0.5000");
        assert_eq!(cost_cell(&unpriced), "?");
        assert_eq!(cost_cell(&no_usage), "-");
        let total = repository_cost(&[priced.clone(), unpriced, no_usage, priced]);
        assert_eq!(total["total_usd"], 1.0);
        assert_eq!(total["lanes_priced"], 2);
        assert_eq!(total["lanes_unpriced"], 1);
    }
}
