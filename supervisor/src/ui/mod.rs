//! `clawpool ui`: a live terminal dashboard of a repository's lanes, or with `--all` of every
//! repository in the user's index ([`crate::known_repos`]) (ratatui on crossterm).
//!
//! It owns the terminal while it runs (raw mode, the alternate screen, the cursor hidden) and
//! gives it back as it found it on every way out, a panic included. It reads what `board`,
//! `events` and `state` read (the pool's typed board rows, [`lanes`], [`row`]), asks the
//! selected lane's control socket for its live screen ([`screen`]), makes the pool's own
//! requests for the operator keys, in-process ([`actions`]), and wakes only when something
//! happens: a key, a resize, a file of a lane changing ([`watch`]), a command answering —
//! plus one tick a second that redraws the ages (no reads) and, every tenth, re-reads the
//! state files so a supervisor gone quiet shows as lost. It rings the terminal's bell when a
//! lane starts to need a person ([`bell`]).

mod actions;
mod bell;
mod diff;
mod lanes;
mod row;
mod screen;
mod view;
mod watch;

use std::collections::HashSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use clawpool_pool::config::ConfigInput;
use clawpool_worktree::Repo;
use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use futures_core::Stream;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::style::Style;
use tokio::sync::mpsc;

use crate::cli::UiArgs;
use crate::loaded::Loaded;
use crate::output::CommandError;
use actions::{Action, Outcome};
use lanes::{LaneKey, Lanes};
use screen::{LaneScreen, NoScreen};
use watch::{Change, Watch};

/// The green levels `v` offers, in order.
pub const VERIFY_LEVELS: [&str; 4] = ["targeted", "package", "workspace", "merge_ready"];

/// Re-read the state files every this many ticks.
const STATE_REREAD_TICKS: u32 = 10;

/// What the keys do right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Moving around, operator keys.
    Normal,
    /// The help overlay.
    Help,
    /// Typing the filter.
    Filter,
    /// Typing text to send.
    Send(String),
    /// Picking (or typing) a dialog's choice.
    Answer {
        /// The dialog's choices from the lane's profile (empty when unknown).
        choices: Vec<String>,
        /// What was typed, when there is no list.
        typed: String,
    },
    /// Picking a green level.
    Verify,
    /// Asking before a destructive command.
    Confirm(Action),
    /// The selected lane's diff (`App::diff`), whole-screen.
    Diff,
}

/// The dashboard's state.
pub struct App {
    lanes: Lanes,
    mode: Mode,
    /// The selected lane's screen, or why it has none (with the lane it is of).
    screen: Result<LaneScreen, (Option<LaneKey>, NoScreen)>,
    /// The last command's outcome (`true` when it did it), shown in the footer.
    status: Option<(bool, String)>,
    /// No colours (`NO_COLOR`, a dumb terminal).
    plain: bool,
    /// The repository shown (empty with `--all`, where the title counts the repositories).
    repo_label: String,
    /// Every repository of the user's index is shown (`--all`): the list labels each lane
    /// with its repository, and repositories the index gains appear.
    all: bool,
    loaded: Loaded,
    config: Option<PathBuf>,
    /// Why the lanes' files are not watched, when they are read every second instead.
    polling: Option<String>,
    /// Which lanes needed a person when last drawn.
    bell: bell::Bell,
    /// The diff view, while `Mode::Diff`.
    diff: Option<diff::DiffView>,
}

impl App {
    /// `style`, or nothing when the dashboard is plain.
    fn style(&self, style: Style) -> Style {
        if self.plain { Style::default() } else { style }
    }
}

/// What a key asks of the loop.
enum Next {
    Stay,
    Quit,
    /// Read the selected lane's screen again (the selection moved).
    Reselect,
    Run(Action),
    Attach,
}

/// `clawpool ui`.
pub async fn run(args: UiArgs) -> Result<ExitCode, CommandError> {
    let repos = if args.all {
        crate::known_repos::read().map_err(|e| CommandError::invalid("invalid_index", e))?
    } else {
        vec![
            Repo::open(&args.repo)
                .map_err(|e| CommandError::invalid("not_a_repository", e.to_string()))?,
        ]
    };
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(CommandError::invalid(
            "not_a_terminal",
            "clawpool ui draws on a terminal: run it in one (`clawpool board` prints the same lanes as text or JSON)",
        ));
    }
    let loaded = crate::loaded::load(&args.config, Some(&args.repo))?;
    if !args.all {
        // The registry folder is where the first lane appears; watching needs it to exist.
        for repo in &repos {
            std::fs::create_dir_all(repo.state_dir().lanes())
                .map_err(|e| CommandError::io("creating the lane registry folder", e))?;
        }
    }
    let (changes_tx, mut changes) = mpsc::unbounded_channel();
    // Without inotify (the user's instances all taken) the dashboard still works: it reads
    // every lane again each second instead, and says so in its title.
    let (mut watch, mut polling) = match Watch::start(changes_tx) {
        Ok(watch) => (Some(watch), None),
        Err(err) => (None, Some(err.to_string())),
    };
    if args.all
        && let (Some(w), Some(index)) = (watch.as_mut(), crate::known_repos::index_path())
        && let Err(err) = index
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(notify::Error::io)
            .and_then(|()| w.follow_index(&index))
    {
        polling = Some(err.to_string());
    }
    let repo_label = match repos.as_slice() {
        [repo] if !args.all => repo.root().display().to_string(),
        _ => String::new(),
    };
    let plain = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
        || std::env::var("TERM").map_or(true, |term| term == "dumb" || term.is_empty());
    let lanes = Lanes::read(repos);
    let mut app = App {
        bell: bell::Bell::new(&lanes),
        lanes,
        mode: Mode::Normal,
        screen: Err((None, String::new())),
        status: None,
        plain,
        repo_label,
        all: args.all,
        loaded,
        config: args.config.config.clone(),
        polling,
        diff: None,
    };
    follow_lanes(&mut app, &mut watch);
    // Ctrl-C is a key while the dashboard runs (raw mode); while a lane is attached it goes to
    // the attached program, and must not end the dashboard waiting behind it.
    let _interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| CommandError::io("listening for Ctrl-C", e))?;

    let mut terminal = enter().map_err(|e| CommandError::io("taking the terminal", e))?;
    let restore_on_panic = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        leave();
        restore_on_panic(info);
    }));
    let result = event_loop(&mut terminal, &mut app, &mut watch, &mut changes).await;
    leave();
    result.map_err(|e| CommandError::io("drawing the dashboard", e))?;
    Ok(ExitCode::SUCCESS)
}

type Screen = Terminal<CrosstermBackend<std::io::Stdout>>;

/// Takes the terminal and makes the dashboard's screen on it.
fn enter() -> std::io::Result<Screen> {
    take_terminal()?;
    Terminal::new(CrosstermBackend::new(std::io::stdout()))
}

/// Raw mode, the alternate screen (cleared), the cursor hidden.
fn take_terminal() -> std::io::Result<()> {
    crossterm::terminal::enable_raw_mode()?;
    crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::EnterAlternateScreen,
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All),
        crossterm::cursor::Hide
    )
}

/// Gives the terminal back as it was: cooked mode, the main screen, the cursor shown.
fn leave() {
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

async fn event_loop(
    terminal: &mut Screen,
    app: &mut App,
    watch: &mut Option<Watch>,
    changes: &mut mpsc::UnboundedReceiver<Change>,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Asked to end, or the terminal hung up: leave as after `q`, the terminal restored.
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let (outcomes_tx, mut outcomes) = mpsc::unbounded_channel::<(String, Outcome)>();
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut ticks = 0u32;
    refresh_screen(app).await;
    show_screen_of(app, watch);
    terminal.draw(|frame| view::draw(frame, app))?;
    loop {
        let redraw = tokio::select! {
            event = next_input(&mut input) => {
                match event {
                    Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                        match on_key(app, key) {
                            Next::Stay => {}
                            Next::Quit => return Ok(()),
                            Next::Reselect => {
                                refresh_screen(app).await;
                                show_screen_of(app, watch);
                            }
                            Next::Run(action) => start(app, action, &outcomes_tx),
                            // The input stream is kept across the attach, not dropped and
                            // made again: dropping a crossterm `EventStream` wakes crossterm's
                            // one (process-wide) reader, and a key typed as the dashboard came
                            // back (`q` right after detaching) could be taken by that wake and
                            // not reported. Nothing reads the terminal during the attach: the
                            // stream reads only when polled, and the next poll comes after it.
                            Next::Attach => attach(app, terminal).await?,
                        }
                    }
                    Some(Ok(_)) => {}
                    // The terminal is gone: nothing left to draw on.
                    Some(Err(_)) | None => return Ok(()),
                }
                true
            }
            _ = terminate.recv() => return Ok(()),
            _ = hangup.recv() => return Ok(()),
            Some(change) = changes.recv() => {
                // Take every change already waiting, so a burst is read once.
                let mut pending = HashSet::from([change]);
                while let Ok(change) = changes.try_recv() {
                    pending.insert(change);
                }
                apply(app, watch, pending).await;
                show_screen_of(app, watch);
                true
            }
            Some((lane, outcome)) = outcomes.recv() => {
                app.status = Some((outcome.ok, format!("{lane}: {}", outcome.message)));
                true
            }
            _ = tick.tick() => {
                ticks += 1;
                if app.polling.is_some() {
                    app.lanes.reload_all();
                    refresh_screen(app).await;
                } else if ticks.is_multiple_of(STATE_REREAD_TICKS) {
                    app.lanes.refresh_states();
                }
                // Only the ages move with time: nothing to redraw without lanes.
                !app.lanes.visible().is_empty()
            }
        };
        if redraw {
            terminal.draw(|frame| view::draw(frame, app))?;
            if app.bell.rings(&app.lanes) {
                bell::ring();
            }
        }
    }
}

/// The next key or resize from the terminal.
async fn next_input(input: &mut EventStream) -> Option<std::io::Result<Event>> {
    std::future::poll_fn(|cx| Pin::new(&mut *input).poll_next(cx)).await
}

/// Reads again what `pending` names; the selected lane's screen when it changed.
async fn apply(app: &mut App, watch: &mut Option<Watch>, pending: HashSet<Change>) {
    let selected = app.lanes.selected_key().cloned();
    let mut screen_changed = false;
    if pending.contains(&Change::Repositories) {
        // Repositories the index gained are shown too; one it lost keeps its rows until its
        // lanes go (gc removes it once they have).
        if let Ok(repos) = crate::known_repos::read() {
            for repo in repos {
                app.lanes.add_repo(repo);
            }
        }
    }
    if pending
        .iter()
        .any(|change| matches!(change, Change::Registry(_) | Change::Repositories))
    {
        app.lanes.reload_all();
        follow_lanes(app, watch);
    }
    for change in &pending {
        match change {
            Change::Lane(lane) => {
                app.lanes.reload_lane(lane);
                follow_lane(app, watch, lane);
                screen_changed |= selected.as_ref() == Some(lane);
            }
            Change::State(lane) => app.lanes.refresh_lane_state(lane),
            Change::Screen(lane) => screen_changed |= selected.as_ref() == Some(lane),
            Change::Registry(_) | Change::Repositories => {}
        }
    }
    if screen_changed || app.lanes.selected_key() != selected.as_ref() {
        refresh_screen(app).await;
    }
}

/// Tells the watch whose screen changes to report: the selected lane's.
fn show_screen_of(app: &App, watch: &mut Option<Watch>) {
    if let Some(watch) = watch {
        watch.show_screen_of(app.lanes.selected_key());
    }
}

/// Watches the registry of every repository shown, every lane folder in it (a lane being
/// registered has a folder before it has an entry, and shows up when the entry is written),
/// and the `.claw/` folder of every lane shown. A registry that cannot be watched is read
/// every second instead, as the title says.
fn follow_lanes(app: &mut App, watch: &mut Option<Watch>) {
    let Some(watch) = watch else {
        return;
    };
    for (at, repo) in app.lanes.repos().iter().enumerate() {
        let registry = repo.state_dir().lanes();
        if let Err(err) = watch.follow_registry(at, &registry) {
            app.polling = Some(err.to_string());
        }
        for folder in std::fs::read_dir(&registry).into_iter().flatten().flatten() {
            let key = LaneKey {
                repo: at,
                name: folder.file_name().to_string_lossy().into_owned(),
            };
            watch.follow_lane(&key, &folder.path());
        }
    }
    for lane in app.lanes.visible() {
        watch.follow_state(&lane.key, lane.worktree());
    }
}

/// After lane `key` changed: what is watched of it (its event log may have appeared, its
/// worktree become known).
fn follow_lane(app: &App, watch: &mut Option<Watch>, key: &LaneKey) {
    let (Some(watch), Some(repo)) = (watch, app.lanes.repos().get(key.repo)) else {
        return;
    };
    watch.follow_lane(key, &repo.state_dir().lane(&key.name));
    let worktree = app
        .lanes
        .visible()
        .into_iter()
        .find(|row| row.key == *key)
        .map(|row| row.worktree().to_owned());
    if let Some(worktree) = worktree {
        watch.follow_state(key, &worktree);
    }
}

async fn refresh_screen(app: &mut App) {
    let Some(key) = app.lanes.selected().map(|row| row.key.clone()) else {
        app.screen = Err((None, String::new()));
        return;
    };
    let Some(record) = app
        .lanes
        .repos()
        .get(key.repo)
        .map(|repo| repo.state_dir().record(&key.name))
    else {
        app.screen = Err((None, String::new()));
        return;
    };
    app.screen = screen::fetch(&key, &record)
        .await
        .map_err(|why| (Some(key), why));
}

fn on_key(app: &mut App, key: KeyEvent) -> Next {
    let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl_c {
        return Next::Quit;
    }
    match std::mem::replace(&mut app.mode, Mode::Normal) {
        Mode::Normal => on_normal_key(app, key),
        Mode::Help => Next::Stay,
        Mode::Diff => {
            let open = app.diff.as_mut().is_some_and(|view| view.on_key(key.code));
            if open {
                app.mode = Mode::Diff;
            } else {
                app.diff = None;
            }
            Next::Stay
        }
        Mode::Filter => {
            match key.code {
                KeyCode::Enter => {}
                KeyCode::Esc => app.lanes.filter.clear(),
                KeyCode::Backspace => {
                    app.lanes.filter.pop();
                    app.mode = Mode::Filter;
                }
                KeyCode::Char(c) => {
                    app.lanes.filter.push(c);
                    app.mode = Mode::Filter;
                }
                _ => app.mode = Mode::Filter,
            }
            let before = app.lanes.selected_name().map(str::to_owned);
            app.lanes.keep_selection();
            if app.lanes.selected_name().map(str::to_owned) != before {
                return Next::Reselect;
            }
            Next::Stay
        }
        Mode::Send(mut text) => match key.code {
            KeyCode::Enter => Next::Run(Action::Send(text)),
            KeyCode::Esc => Next::Stay,
            KeyCode::Backspace => {
                text.pop();
                app.mode = Mode::Send(text);
                Next::Stay
            }
            KeyCode::Char(c) => {
                text.push(c);
                app.mode = Mode::Send(text);
                Next::Stay
            }
            _ => {
                app.mode = Mode::Send(text);
                Next::Stay
            }
        },
        Mode::Answer { choices, mut typed } => match key.code {
            KeyCode::Esc => Next::Stay,
            KeyCode::Char(c) if !choices.is_empty() => {
                let picked = c
                    .to_digit(10)
                    .and_then(|n| choices.get((n as usize).checked_sub(1)?));
                match picked {
                    Some(choice) => Next::Run(Action::Answer(choice.clone())),
                    None => {
                        app.mode = Mode::Answer { choices, typed };
                        Next::Stay
                    }
                }
            }
            KeyCode::Enter if choices.is_empty() => Next::Run(Action::Answer(typed)),
            KeyCode::Backspace => {
                typed.pop();
                app.mode = Mode::Answer { choices, typed };
                Next::Stay
            }
            KeyCode::Char(c) => {
                typed.push(c);
                app.mode = Mode::Answer { choices, typed };
                Next::Stay
            }
            _ => {
                app.mode = Mode::Answer { choices, typed };
                Next::Stay
            }
        },
        Mode::Verify => {
            let level = match key.code {
                KeyCode::Char(c) => c
                    .to_digit(10)
                    .and_then(|n| VERIFY_LEVELS.get((n as usize).checked_sub(1)?)),
                _ => None,
            };
            match level {
                Some(level) => Next::Run(Action::Verify((*level).to_owned())),
                None if key.code == KeyCode::Esc => Next::Stay,
                None => {
                    app.mode = Mode::Verify;
                    Next::Stay
                }
            }
        }
        Mode::Confirm(action) => match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Next::Run(action),
            _ => {
                app.status = Some((true, format!("not run: clawpool {}", action.describe())));
                Next::Stay
            }
        },
    }
}

fn on_normal_key(app: &mut App, key: KeyEvent) -> Next {
    let selected = app.lanes.selected().is_some();
    let on_lane = |mode: Mode, app: &mut App| {
        if selected {
            app.mode = mode;
        }
        Next::Stay
    };
    match key.code {
        KeyCode::Char('q') => Next::Quit,
        KeyCode::Char('?') => {
            app.mode = Mode::Help;
            Next::Stay
        }
        KeyCode::Char('/') => {
            app.mode = Mode::Filter;
            Next::Stay
        }
        KeyCode::Esc => {
            app.status = None;
            if app.lanes.filter.is_empty() {
                return Next::Stay;
            }
            app.lanes.filter.clear();
            app.lanes.keep_selection();
            Next::Reselect
        }
        KeyCode::Down | KeyCode::Char('j') => {
            app.lanes.move_selection(1);
            Next::Reselect
        }
        KeyCode::Up | KeyCode::Char('k') => {
            app.lanes.move_selection(-1);
            Next::Reselect
        }
        KeyCode::Enter if selected => Next::Attach,
        KeyCode::Char('s') => on_lane(Mode::Send(String::new()), app),
        KeyCode::Char('a') => {
            let choices = dialog_choices(app);
            on_lane(
                Mode::Answer {
                    choices,
                    typed: String::new(),
                },
                app,
            )
        }
        KeyCode::Char('t') if selected => Next::Run(Action::Trust),
        KeyCode::Char('x') => on_lane(Mode::Confirm(Action::Stop), app),
        KeyCode::Char('r') => on_lane(Mode::Confirm(Action::Restart), app),
        KeyCode::Char('m') => on_lane(Mode::Confirm(Action::MergeForward), app),
        KeyCode::Char('v') => on_lane(Mode::Verify, app),
        KeyCode::Char('R') => on_lane(Mode::Confirm(Action::Recover), app),
        KeyCode::Char('d') if selected => {
            open_diff(app);
            Next::Stay
        }
        _ => Next::Stay,
    }
}

/// Opens the diff view of the selected lane; when its change cannot be read, says why in the
/// footer instead.
fn open_diff(app: &mut App) {
    let Some(lane) = app.lanes.selected() else {
        return;
    };
    let name = lane.name().to_owned();
    let Some(repo) = app.lanes.repos().get(lane.key.repo) else {
        return;
    };
    let events = clawpool_lane::registry::lane_registry(repo, &lane.key.name).events();
    match diff::DiffView::open(lane.worktree(), &events) {
        Ok(view) => {
            app.diff = Some(view);
            app.mode = Mode::Diff;
        }
        Err(why) => app.status = Some((false, format!("{name}: no diff: {why}"))),
    }
}

/// The choices of the dialog on the selected lane's screen: the newest of its events whose
/// evidence names a dialog of the lane's agent profile (a later escalation names none);
/// empty when none does.
fn dialog_choices(app: &App) -> Vec<String> {
    let Some(lane) = app.lanes.selected() else {
        return Vec::new();
    };
    let Some(profile) = lane
        .agent()
        .and_then(|agent| app.loaded.profiles.get(agent).ok())
    else {
        return Vec::new();
    };
    app.lanes
        .events
        .iter()
        .rev()
        .filter_map(|event| Some(event.evidence.as_ref()?.rule.as_str()))
        .find_map(|rule| profile.dialogs.iter().find(|dialog| dialog.name == rule))
        .map(|dialog| dialog.choices.keys().cloned().collect())
        .unwrap_or_default()
}

/// Runs `action` on the selected lane in a task of its own, so the dashboard stays live while
/// it runs; its outcome comes back on `outcomes`.
fn start(app: &mut App, action: Action, outcomes: &mpsc::UnboundedSender<(String, Outcome)>) {
    let Some(lane) = app.lanes.selected() else {
        return;
    };
    let name = lane.name().to_owned();
    let target = actions::lane_arg(&lane.repository, lane.worktree());
    app.status = Some((true, format!("{name}: clawpool {} …", action.describe())));
    let outcomes = outcomes.clone();
    let config = ConfigInput::of_this_process(app.config.as_deref());
    tokio::spawn(async move {
        let outcome = action.run(target, config).await;
        let _ = outcomes.send((name, outcome));
    });
}

/// Leaves the dashboard for `clawpool attach` on the selected lane, and comes back when it
/// ends (detached from tmux, or Ctrl-C out of a PTY lane's mirror).
async fn attach(app: &mut App, terminal: &mut Screen) -> std::io::Result<()> {
    let Some(dir) = app.lanes.selected().map(|l| l.worktree().to_owned()) else {
        return Ok(());
    };
    leave();
    let status = match std::env::current_exe() {
        Ok(program) => tokio::process::Command::new(program)
            .arg("attach")
            .arg(&dir)
            .status()
            .await
            .map(|status| status.success()),
        Err(err) => Err(err),
    };
    // A new screen, drawn whole (ratatui's `clear` would ask the terminal where its cursor is:
    // a round trip through the input a new screen does not need).
    *terminal = enter()?;
    if !matches!(status, Ok(true)) {
        app.status = Some((false, "attach did not work (see above)".into()));
    }
    refresh_screen(app).await;
    Ok(())
}
