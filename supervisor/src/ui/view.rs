//! Drawing the dashboard: the lane list (the board's columns), the selected lane's screen, its
//! status, escalation and last events, the footer, and the overlays (help, prompts). Colours
//! follow the usual conventions — green working, yellow waiting for a person, red failed, blue
//! finished — and are left out entirely when the dashboard is plain (`NO_COLOR`, a dumb
//! terminal).

use clawpool_lane::verify::merge_problem;
use clawpool_lanes::state_file::ShownStatus;
use clawpool_lanes::state_file::now_secs;
use clawpool_lanes::{LaneEvent, LaneStatus, Payload, wire_name};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, TableState, Wrap};
use serde_json::Value;

use super::row::LaneRow;
use super::{App, Mode, VERIFY_LEVELS};

/// The lane list's column headers.
const HEADER: [&str; 10] = [
    "LANE",
    "AGENT",
    "STATUS",
    "IN STATE",
    "PROGRESS",
    "FRESHNESS",
    "GREEN",
    "COMMITS",
    "COST",
    "ESC",
];

/// The repository column's header, shown with `--all`.
const REPOSITORY_HEADER: &str = "REPOSITORY";

/// The key map, as the help overlay and `docs/ui.md` show it.
pub const KEY_MAP: &[(&str, &str)] = &[
    ("↑ ↓  j k", "select a lane"),
    (
        "Enter",
        "attach (tmux: take over; PTY: mirror); the dashboard comes back after",
    ),
    ("s", "send text to the agent (clawpool send)"),
    (
        "a",
        "answer the dialog on screen, from its choices (clawpool answer)",
    ),
    ("t", "trust the lane (clawpool trust)"),
    ("x", "stop the lane, after confirming (clawpool stop)"),
    (
        "r",
        "restart with resume, after confirming (clawpool restart --resume)",
    ),
    (
        "m",
        "merge the base forward, after confirming (clawpool merge-forward)",
    ),
    ("v", "verify a green level (clawpool verify --level)"),
    (
        "d",
        "the lane's diff: files, commits and uncommitted work apart (clawpool diff); j/k PgUp/PgDn scroll, Esc closes",
    ),
    (
        "R",
        "run the recovery recipe the policy decides (clawpool recover)",
    ),
    ("/", "filter lanes by name, agent or status (Esc clears)"),
    ("?", "this help"),
    ("q", "quit"),
];

/// Draws the whole dashboard.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let [title, list, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(list_height(app, frame.area())),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    draw_title(frame, app, title);
    draw_list(frame, app, list);
    let [screen, details] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(body);
    draw_screen(frame, app, screen);
    draw_details(frame, app, details);
    draw_footer(frame, app, footer);
    match &app.mode {
        Mode::Help => draw_help(frame, app),
        Mode::Diff => {
            if let Some(view) = &app.diff {
                super::diff::draw(frame, app, view);
            }
        }
        Mode::Normal | Mode::Filter => {}
        prompt => draw_prompt(frame, app, prompt),
    }
}

/// The list takes the rows it needs (with its header and borders), at most half the screen.
fn list_height(app: &App, area: Rect) -> u16 {
    let wanted = app.lanes.visible().len().max(1) as u16 + 3;
    wanted.min(area.height / 2).max(4)
}

fn draw_title(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let count = app.lanes.visible().len();
    let shown = if app.all {
        format!("all repositories ({})", app.lanes.repos().len())
    } else {
        app.repo_label.clone()
    };
    let mut text = format!(
        "clawpool ui · {shown} · {count} lane{}",
        if count == 1 { "" } else { "s" }
    );
    if !app.lanes.filter.is_empty() || app.mode == Mode::Filter {
        text.push_str(&format!(" · filter: {}", app.lanes.filter));
        if app.mode == Mode::Filter {
            text.push('▏');
        }
    }
    // What the lanes shown cost together (the board's `cost`), once any reported usage.
    let cost = clawpool_pool::board::RepositoryCost::of(
        app.lanes.visible().into_iter().map(LaneRow::cost),
    );
    if cost.lanes_priced > 0 || cost.lanes_unpriced > 0 {
        text.push_str(&format!(" · cost ${:.4}", cost.total_usd));
        if cost.lanes_unpriced > 0 {
            text.push_str(" + ?");
        }
    }
    if let Some(why) = &app.polling {
        text.push_str(&format!(" · reading every second (not watching: {why})"));
    }
    text.push_str(" · ? help");
    frame.render_widget(Paragraph::new(text).style(app.style(bold())), area);
}

fn draw_list(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let now = now_secs();
    let rows: Vec<Row<'_>> = app
        .lanes
        .visible()
        .into_iter()
        .map(|lane| {
            let status = lane.status_cell();
            let status_style = app.style(Style::default().fg(status_colour(lane)));
            let mut cells = vec![
                Span::raw(repository_cell(lane)),
                Span::raw(lane.name().to_owned()),
                Span::raw(text(lane.agent())),
                Span::styled(status, status_style),
                Span::raw(age(lane.in_state_since(), now)),
                Span::raw(age(lane.progress_at(), now)),
                Span::raw(lane.freshness_cell()),
                Span::raw(text(lane.green_level().as_deref())),
                Span::raw(lane.commits_cell()),
                Span::raw(lane.cost_cell()),
                Span::styled(
                    if lane.escalation().is_some() { "!" } else { "" },
                    app.style(
                        Style::default()
                            .fg(Color::Yellow)
                            .add_modifier(Modifier::BOLD),
                    ),
                ),
            ];
            // One repository needs no label; with `--all` each lane is labelled with its own.
            if !app.all {
                cells.remove(0);
            }
            Row::new(cells)
        })
        .collect();
    let empty = rows.is_empty();
    // The name and status columns are as wide as their longest cell; the rest are fixed.
    let widest = |cell: &dyn Fn(&LaneRow) -> String, header: &str| {
        let longest = app
            .lanes
            .visible()
            .iter()
            .map(|lane| cell(lane).chars().count())
            .max();
        longest.unwrap_or(0).max(header.len()) as u16
    };
    let mut widths = vec![
        Constraint::Length(widest(&repository_cell, REPOSITORY_HEADER)),
        Constraint::Length(widest(&|lane| lane.name().to_owned(), HEADER[0])),
        Constraint::Length(9),
        Constraint::Length(widest(&LaneRow::status_cell, HEADER[2])),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(11),
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(3),
    ];
    let mut header = HEADER.to_vec();
    if app.all {
        header.insert(0, REPOSITORY_HEADER);
    } else {
        widths.remove(0);
    }
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(app.style(bold())))
        .block(Block::default().borders(Borders::ALL).title(" lanes "))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state = TableState::default().with_selected(app.lanes.selected_index());
    frame.render_stateful_widget(table, area, &mut state);
    if empty {
        let inner = Rect {
            x: area.x + 2,
            y: area.y + 2,
            width: area.width.saturating_sub(4),
            height: 1.min(area.height.saturating_sub(3)),
        };
        let message = if !app.lanes.filter.is_empty() {
            "(no lane matches the filter)"
        } else if app.all {
            "(no repository with lanes in the index)"
        } else {
            "(no lanes in this repository)"
        };
        frame.render_widget(Paragraph::new(message), inner);
    }
}

fn draw_screen(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let title = match app.lanes.selected_name() {
        Some(name) => format!(" {name} · screen "),
        None => " screen ".to_owned(),
    };
    let block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let selected = app.lanes.selected_key();
    let lines = match &app.screen {
        Ok(screen) if Some(&screen.lane) == selected => {
            screen.lines(inner.width, inner.height, app.plain)
        }
        Err((lane, why)) if lane.is_some() && lane.as_ref() == selected => {
            vec![Line::raw(format!("(no live screen: {why})"))]
        }
        _ => Vec::new(),
    };
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_details(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let block = Block::default().borders(Borders::ALL).title(" lane ");
    let Some(lane) = app.lanes.selected() else {
        frame.render_widget(block, area);
        return;
    };
    let label = |name: &str| Span::styled(format!("{name:<10}"), app.style(bold()));
    let mut lines = vec![
        Line::from(vec![
            label("status"),
            Span::styled(
                lane.status_cell(),
                app.style(Style::default().fg(status_colour(lane))),
            ),
        ]),
        Line::from(vec![
            label("branch"),
            Span::raw(format!(
                "{} (base {})",
                text(lane.branch()),
                text(lane.base_ref())
            )),
        ]),
    ];
    if let Some(detail) = lane.failure_detail() {
        lines.push(Line::from(vec![
            label("reason"),
            Span::raw(detail.to_owned()),
        ]));
    }
    // What blocked it: the newest event with evidence (an escalation after it has none).
    let evidence = app
        .lanes
        .events
        .iter()
        .rev()
        .find_map(|event| event.evidence.as_ref());
    if let (true, Some(evidence)) = (lane.is_waiting(), evidence) {
        lines.push(Line::from(vec![
            label("evidence"),
            Span::raw(format!("{}: {}", evidence.rule, evidence.matched)),
        ]));
    }
    if let Some(escalation) = lane.escalation() {
        let warn = app.style(Style::default().fg(Color::Yellow));
        lines.push(Line::from(vec![
            label("escalated"),
            Span::styled(escalation.reason.clone(), warn),
        ]));
        lines.push(Line::from(vec![
            label("next"),
            Span::styled(escalation.next_action.clone(), warn),
        ]));
    }
    lines.push(Line::from(Span::styled("events", app.style(bold()))));
    for event in app.lanes.events.iter().rev() {
        lines.push(Line::raw(event_line(event)));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn draw_footer(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let line = match &app.status {
        Some((ok, message)) => {
            let colour = if *ok { Color::Green } else { Color::Red };
            Line::styled(message.clone(), app.style(Style::default().fg(colour)))
        }
        None => Line::raw(
            "Enter attach · s send · a answer · t trust · x stop · r restart · m merge-forward · v verify · d diff · R recover · / filter · ? help · q quit",
        ),
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_help(frame: &mut Frame<'_>, app: &App) {
    let mut lines = vec![Line::styled("keys", app.style(bold())), Line::raw("")];
    for (keys, what) in KEY_MAP {
        lines.push(Line::from(vec![
            Span::styled(format!("{keys:<10} "), app.style(bold())),
            Span::raw(*what),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::raw("any key closes this help"));
    let area = centred(frame.area(), 84, lines.len() as u16 + 2);
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" help ")),
        area,
    );
}

fn draw_prompt(frame: &mut Frame<'_>, app: &App, mode: &Mode) {
    let lane = app.lanes.selected_name().unwrap_or("-");
    let lines: Vec<Line<'_>> = match mode {
        Mode::Send(text) => vec![
            Line::raw(format!("send to {lane}:")),
            Line::raw(format!("{text}▏")),
            Line::raw("Enter sends · Esc cancels"),
        ],
        Mode::Answer { choices, typed } if choices.is_empty() => vec![
            Line::raw(format!("answer the dialog on {lane} with:")),
            Line::raw(format!("{typed}▏")),
            Line::raw("Enter answers · Esc cancels"),
        ],
        Mode::Answer { choices, .. } => {
            let mut lines = vec![Line::raw(format!("answer the dialog on {lane}:"))];
            lines.extend(
                choices
                    .iter()
                    .enumerate()
                    .map(|(i, choice)| Line::raw(format!("  {}  {choice}", i + 1))),
            );
            lines.push(Line::raw("a number answers · Esc cancels"));
            lines
        }
        Mode::Verify => {
            let mut lines = vec![Line::raw(format!("verify {lane} at level:"))];
            lines.extend(
                VERIFY_LEVELS
                    .iter()
                    .enumerate()
                    .map(|(i, level)| Line::raw(format!("  {}  {level}", i + 1))),
            );
            lines.push(Line::raw("a number verifies · Esc cancels"));
            lines
        }
        Mode::Confirm(action) => vec![
            Line::raw(format!("clawpool {} {lane}?", action.describe())),
            Line::raw("y runs it · any other key cancels"),
        ],
        Mode::Normal | Mode::Filter | Mode::Help | Mode::Diff => return,
    };
    let area = centred(frame.area(), 60, lines.len() as u16 + 2);
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL)),
        area,
    );
}

fn centred(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// Working is green, waiting for a person yellow, failed red, finished blue, stopped by a
/// person grey; a lost supervisor or an unreadable record red.
fn status_colour(lane: &LaneRow) -> Color {
    match lane.shown_status() {
        Some(ShownStatus::Lane(status)) => match status {
            LaneStatus::Spawning
            | LaneStatus::ReadyForPrompt
            | LaneStatus::PromptAccepted
            | LaneStatus::Running => Color::Green,
            LaneStatus::TrustRequired
            | LaneStatus::ToolPermissionRequired
            | LaneStatus::Blocked => Color::Yellow,
            LaneStatus::Finished => Color::Blue,
            LaneStatus::Stopped => Color::Gray,
            LaneStatus::Failed => Color::Red,
        },
        Some(ShownStatus::SupervisorLost) | None => Color::Red,
    }
}

/// The lane's repository: the name of its main worktree's folder.
fn repository_cell(lane: &LaneRow) -> String {
    lane.repository.file_name().map_or_else(
        || lane.repository.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// A text the row may not have, `-` when it has none.
fn text(value: Option<&str>) -> String {
    value.unwrap_or("-").to_owned()
}

/// Seconds since `since`: `42s`, `3m07s`, `2h05m`.
fn age(since: Option<u64>, now: u64) -> String {
    let Some(since) = since else {
        return "-".into();
    };
    let secs = now.saturating_sub(since);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs / 60 % 60),
    }
}

/// `12:04:31 lane.running  prompt_accepted -> running`: the event's time (UTC), kind, and
/// where it took the lane or its detail.
fn event_line(event: &LaneEvent) -> String {
    let secs = event.at_ms / 1000;
    let clock = format!(
        "{:02}:{:02}:{:02}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    );
    let kind = event.kind.as_str();
    let kind = kind.strip_prefix("lane.").unwrap_or(kind);
    let what = match (event.from, event.to) {
        (Some(from), Some(to)) => {
            format!(
                "{} -> {}",
                wire_name(&from.status()),
                wire_name(&to.status())
            )
        }
        _ => event
            .payload()
            .as_ref()
            .and_then(headline)
            .unwrap_or_default(),
    };
    format!("{clock} {kind} {what}")
}

/// What the line of an event that is no transition says after its kind: why, the commit's
/// subject, what came of it, or the command concerned.
fn headline(payload: &Payload) -> Option<String> {
    match payload {
        Payload::Escalated(escalated) | Payload::BlockedEscalated(escalated) => {
            Some(escalated.reason.clone())
        }
        Payload::OperatorIgnored(declined) | Payload::OperatorRefused(declined) => {
            Some(declined.reason.clone())
        }
        Payload::SendRefused(refused) => Some(refused.reason.clone()),
        Payload::PermissionDecided(decided) => Some(decided.reason.clone()),
        Payload::PromptMisdelivery(misdelivery) => misdelivery.reason.clone(),
        Payload::Green(green) => green.reason.clone(),
        Payload::Red(red) => red.reason.clone(),
        Payload::StaleRed(red) => red.reason.clone(),
        Payload::VerifyBlocked(blocked) => blocked.reason.clone(),
        Payload::BranchBlocked(blocked) => Some(blocked.message.clone()),
        Payload::MergeConflict(outcome) | Payload::MergeRefused(outcome) => merge_problem(outcome),
        Payload::SendFailed(failed) | Payload::MergeFailed(failed) => Some(failed.error.clone()),
        Payload::CommitCreated(commit) => Some(commit.subject.clone()),
        Payload::Outcome(reported) => Some(wire_name(&reported.outcome)),
        Payload::TrustStoreSeeded(seeded) => seeded.outcome.clone(),
        Payload::TestHung(hung) => Some(hung.command.clone()),
        // The agent's own fields, in its vocabulary.
        Payload::Hook(hook) => agent_field(&hook.fields, "reason"),
        Payload::Protocol(message) => agent_field(&message.fields, "command"),
        _ => None,
    }
}

fn agent_field(fields: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    fields.get(key)?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawpool_lanes::payload::Escalated;

    #[test]
    fn ages_read_at_a_glance() {
        assert_eq!(age(Some(100), 142), "42s");
        assert_eq!(age(Some(100), 100 + 187), "3m07s");
        assert_eq!(age(Some(0), 2 * 3600 + 5 * 60 + 9), "2h05m");
        assert_eq!(age(None, 5), "-");
        assert_eq!(age(Some(10), 5), "0s");
    }

    #[test]
    fn an_event_line_names_its_transition() {
        let event = serde_json::json!({"seq": 4, "at_ms": 3_723_000u64, "kind": "lane.running",
            "lane": "a", "from": {"status": "prompt_accepted"}, "to": {"status": "running"}});
        let event = serde_json::from_value(event).expect("an event");
        assert_eq!(
            event_line(&event),
            "01:02:03 running prompt_accepted -> running"
        );
    }

    #[test]
    fn an_event_line_says_why_from_its_payload() {
        let escalated = Payload::Escalated(Escalated {
            reason: "stalled twice".into(),
            next_action: "clawpool attach a".into(),
            recipe: None,
        });
        let event = LaneEvent {
            seq: 9,
            at_ms: 3_723_000,
            kind: escalated.kind(),
            lane: "a".into(),
            from: None,
            to: None,
            evidence: None,
            detail: escalated.detail(),
            source: None,
        };
        assert_eq!(event_line(&event), "01:02:03 escalated stalled twice");
    }
}
