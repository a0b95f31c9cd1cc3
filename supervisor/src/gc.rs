//! `clawpool gc`: its flags turned into the pool's [`GcRequest`] and its typed verdicts
//! rendered (a line per lane, or one JSON document), with a progress bar while the pool judges
//! the lanes. What is removed, when and why — the locks, the git checks, the removal and the
//! `removed` marker, idle tmux servers — is the pool's (`clawpool_pool::gc`).

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clawpool_pool::gc::{Because, GcReply, GcRequest};
use clawpool_pool::{LaneNote, Notice, Observer, Pool, PoolReply, PoolRequest};

use crate::cli::{GcArgs, OutputFormat};
use crate::output::CommandError;
use crate::progress::Progress;

pub async fn run(args: &GcArgs) -> Result<ExitCode, CommandError> {
    let request = GcRequest {
        repo: args.repo.clone(),
        force: args.force,
    };
    let observer = Arc::new(GcProgress {
        format: args.output_format,
        bar: Mutex::new(None),
    });
    let reply = Pool::reader()
        .handle(PoolRequest::Gc(request), observer.clone())
        .await;
    observer.clear();
    let PoolReply::Gc(reply) = reply? else {
        unreachable!("the pool answers a gc request with gc's verdicts")
    };
    if let Some(err) = &reply.index_not_updated {
        tracing::warn!("the index of repositories with lanes was not updated: {err}");
    }
    match args.output_format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string(&reply)
                .map_err(|e| CommandError::io("writing gc's verdicts", std::io::Error::other(e)))?
        ),
        OutputFormat::Text => print_text(&reply),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(reply: &GcReply) {
    for v in &reply.lanes {
        let what = if v.removed { "removed" } else { "kept   " };
        println!("{what} {:<24} {}", v.lane, v.reason);
    }
    if reply.lanes.is_empty() {
        println!("(no lanes in this repository)");
    }
    let unsafe_work: Vec<&str> = reply
        .lanes
        .iter()
        .filter(|v| matches!(v.because, Because::Uncommitted | Because::Unpublished))
        .map(|v| v.lane.as_str())
        .collect();
    if !unsafe_work.is_empty() {
        println!(
            "kept {} lane(s) whose work is neither landed nor pushed: {} (`clawpool land`, `clawpool push`, or gc --force to drop it)",
            unsafe_work.len(),
            unsafe_work.join(", ")
        );
    }
}

/// gc's progress bar, made when the pool says how many lanes it judges.
struct GcProgress {
    format: OutputFormat,
    bar: Mutex<Option<Progress>>,
}

impl GcProgress {
    fn clear(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.clear();
        }
    }
}

impl Observer for GcProgress {
    fn starting(&self, _: &[String]) {}
    fn lane(&self, _: &str, _: LaneNote) {}
    fn event(&self, _: &clawpool_lanes::LaneEvent) {}
    fn notice(&self, _: Notice) {}
    fn done(&self) {}
    fn judging(&self, lane: &str, checked: usize, of: usize) {
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        bar.get_or_insert_with(|| {
            Progress::bar(
                self.format,
                of as u64,
                "gc {bar:30} {pos}/{len} lanes checked · {msg}",
            )
        })
        .set(checked as u64, lane.to_owned());
    }
}
