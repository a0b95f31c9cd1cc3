//! `clawpool explain`: how a screen reads to an agent's profile (every rule, the deciding one,
//! the input line), and with a lane, its current screen rebuilt from its terminal log and what
//! each of its sources last told it.

use std::path::Path;
use std::process::ExitCode;

use clawpool_agents::detect::{Explanation, explain};
use clawpool_agents::profiles::ProfileSet;
use clawpool_lanes::{
    EventSource, Evidence, LaneEvent, LaneEventKind, LaneState, Payload, wire_name,
};
use clawpool_pty::{ScreenModel, ScreenOptions, TermSize};
use serde::Serialize;

use crate::cli::OutputFormat;
use crate::output::CommandError;

/// `explain`'s JSON document.
#[derive(Serialize)]
struct ExplainDoc<'a> {
    agent: &'a str,
    screen: &'a str,
    explanation: &'a Explanation,
    #[serde(skip_serializing_if = "Option::is_none")]
    facts: Option<&'a LaneFacts>,
}

/// Reads a screen file: a capture (rows separated by newlines, with or without SGR
/// attributes) is replayed row by row; its size is the file's widest row by its row count
/// unless given.
pub fn load_screen(
    path: &Path,
    size: Option<TermSize>,
) -> Result<clawpool_pty::ScreenSnapshot, CommandError> {
    let bytes = std::fs::read(path).map_err(|e| {
        CommandError::invalid(
            "screen_not_found",
            format!("cannot read screen file {}: {e}", path.display()),
        )
    })?;
    let rows: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let size = size.unwrap_or_else(|| {
        let mut probe = ScreenModel::new(ScreenOptions::new(TermSize {
            rows: 1,
            cols: 1000,
        }));
        let widest = rows
            .iter()
            .map(|row| {
                probe.feed(b"\r\x1b[2K");
                probe.feed(row);
                probe.snapshot().rows[0].chars().count()
            })
            .max()
            .unwrap_or(80);
        TermSize {
            rows: (rows.len() as u16).max(1),
            cols: (widest as u16).clamp(20, 1000),
        }
    });
    let mut model = ScreenModel::new(ScreenOptions {
        answer_queries: false,
        ..ScreenOptions::new(size)
    });
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            model.feed(b"\r\n");
        }
        model.feed(row);
        model.feed(b"\x1b[0m");
    }
    Ok(model.snapshot())
}

/// `clawpool explain LANE`: the lane's current screen, rebuilt from its raw terminal log.
pub fn run_explain_lane(
    profiles: &ProfileSet,
    lane: &Path,
    agent: Option<&str>,
    format: OutputFormat,
) -> Result<ExitCode, CommandError> {
    let found = crate::board::find_lane(lane)?;
    let doc = found.state().map_err(|err| CommandError {
        kind: err.kind(),
        message: err.to_string(),
        exit: crate::output::EXIT_FAILURE,
    })?;
    let log = found.events.with_file_name("terminal.log");
    let log = if log.is_file() {
        log
    } else {
        found
            .dir
            .join(clawpool_worktree::layout::LANE_DIR)
            .join("terminal.log")
    };
    let bytes =
        std::fs::read(&log).map_err(|e| CommandError::io("reading the lane's terminal log", e))?;
    let snap = clawpool_pty::replay::final_screen(&bytes, TermSize::default());
    let events = std::fs::read_to_string(&found.events).unwrap_or_default();
    run_explain(
        profiles,
        agent.unwrap_or(&doc.agent),
        &snap,
        &log.display().to_string(),
        Some(LaneFacts::of_log(&events)),
        format,
    )
}

/// How many of each source's last facts `explain LANE` shows.
const FACTS_PER_SOURCE: usize = 3;

/// The sources in the order `explain` shows them.
const SOURCES: [EventSource; 5] = [
    EventSource::Hook,
    EventSource::Protocol,
    EventSource::Screen,
    EventSource::Operator,
    EventSource::Process,
];

/// What each source last told the lane, from its event log: per source, its last events,
/// newest first; and the transition that decided the lane's current state (`facts` in
/// `explain LANE`'s document, docs/cli.md).
#[derive(Debug, Serialize)]
pub struct LaneFacts {
    #[serde(serialize_with = "sources_as_map")]
    sources: Vec<(EventSource, Vec<SourceFact>)>,
    state_decided_by: Option<DecidingEvent>,
}

/// One fact a source gave the lane.
#[derive(Debug, Serialize)]
struct SourceFact {
    seq: u64,
    at_ms: u64,
    kind: LaneEventKind,
    to: Option<LaneState>,
    evidence: Option<Evidence>,
    /// The hook's event or the protocol message the agent named itself.
    event: Option<String>,
    /// What the protocol message stands for.
    means: Option<String>,
}

/// The transition that decided the lane's current state.
#[derive(Debug, Serialize)]
struct DecidingEvent {
    seq: u64,
    kind: LaneEventKind,
    to: Option<LaneState>,
    source: Option<EventSource>,
    evidence: Option<Evidence>,
}

/// The sources as one JSON object, in [`SOURCES`]' order.
fn sources_as_map<S: serde::Serializer>(
    sources: &[(EventSource, Vec<SourceFact>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(sources.iter().map(|(source, facts)| (source, facts)))
}

impl LaneFacts {
    /// The facts of a lane's event log (`events`, JSON lines; a line that is not an event is
    /// passed over).
    fn of_log(events: &str) -> LaneFacts {
        let events: Vec<LaneEvent> = events
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let sources = SOURCES
            .into_iter()
            .map(|source| {
                let last: Vec<SourceFact> = events
                    .iter()
                    .rev()
                    .filter(|e| e.source == Some(source))
                    .take(FACTS_PER_SOURCE)
                    .map(SourceFact::of)
                    .collect();
                (source, last)
            })
            .filter(|(_, last)| !last.is_empty())
            .collect();
        let state_decided_by = events
            .iter()
            .rev()
            .find(|e| e.to.is_some() && e.from.is_some())
            .map(|e| DecidingEvent {
                seq: e.seq,
                kind: e.kind.clone(),
                to: e.to,
                source: e.source,
                evidence: e.evidence.clone(),
            });
        LaneFacts {
            sources,
            state_decided_by,
        }
    }

    /// The text `explain LANE` prints after the screen's.
    fn print(&self) {
        if let Some(decided) = &self.state_decided_by {
            let evidence = decided.evidence.as_ref();
            let field = |text: Option<&String>| text.map_or("-", String::as_str).to_owned();
            println!(
                "\nstate {} decided by #{} {} (source {}): {} in {}: {:?}",
                decided
                    .to
                    .map_or_else(|| "-".to_owned(), |to| wire_name(&to.status())),
                decided.seq,
                decided.kind,
                decided
                    .source
                    .map_or_else(|| "-".to_owned(), |s| wire_name(&s)),
                field(evidence.map(|e| &e.rule)),
                field(evidence.map(|e| &e.region)),
                field(evidence.map(|e| &e.matched)),
            );
        }
        println!("\nlast facts by source (newest first):");
        for (source, last) in &self.sources {
            let source = wire_name(source);
            for fact in last {
                let what = match (&fact.event, &fact.means) {
                    (Some(event), Some(means)) if means != event => format!("{event} ({means})"),
                    (Some(event), _) => event.clone(),
                    _ => fact
                        .evidence
                        .as_ref()
                        .map_or_else(|| "-".to_owned(), |e| e.rule.clone()),
                };
                println!("  {source:<9} #{:<5} {:<28} {what}", fact.seq, fact.kind);
            }
        }
    }
}

impl SourceFact {
    fn of(event: &LaneEvent) -> SourceFact {
        let (named, means) = match event.payload() {
            Some(Payload::Hook(hook)) => (Some(hook.event), None),
            Some(Payload::Protocol(message)) => (Some(message.event), Some(message.means)),
            _ => (None, None),
        };
        SourceFact {
            seq: event.seq,
            at_ms: event.at_ms,
            kind: event.kind.clone(),
            to: event.to,
            evidence: event.evidence.clone(),
            event: named,
            means,
        }
    }
}

pub fn run_explain(
    profiles: &ProfileSet,
    agent: &str,
    snap: &clawpool_pty::ScreenSnapshot,
    screen: &str,
    lane_facts: Option<LaneFacts>,
    format: OutputFormat,
) -> Result<ExitCode, CommandError> {
    let profile = profiles
        .get(agent)
        .map_err(|e| CommandError::invalid("unknown_agent", e.to_string()))?;
    let explanation = explain(profile, snap);
    match format {
        OutputFormat::Json => {
            let doc = ExplainDoc {
                agent,
                screen,
                explanation: &explanation,
                facts: lane_facts.as_ref(),
            };
            println!("{}", serde_json::to_string(&doc).unwrap_or_default());
        }
        OutputFormat::Text => {
            let obs = &explanation.observation;
            println!("screen: {} ({}x{})", screen, snap.size.cols, snap.size.rows);
            println!(
                "reads as: {}",
                serde_json::to_string(&obs.seen).unwrap_or_default()
            );
            println!(
                "decided by: {} in {}: {:?}",
                obs.rule, obs.region, obs.evidence
            );
            match &explanation.input_line {
                Some(text) if text.is_empty() => println!("input line: empty"),
                Some(text) => println!("input line: draft {text:?}"),
                None => println!("input line: not found"),
            }
            println!("\nrules (highest priority first):");
            for e in &explanation.evaluations {
                let verdict = match (&e.matched, &e.near_miss) {
                    (Some(m), _) => format!("MATCH {m:?}"),
                    (None, Some(near)) => format!("near miss: {near}"),
                    (None, None) => "no".into(),
                };
                println!(
                    "  {:>4}  {:<6} {:<28} {:<22} {:<16} {verdict}",
                    e.priority, e.what, e.rule, e.means, e.region
                );
            }
            if let Some(facts) = &lane_facts {
                facts.print();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
