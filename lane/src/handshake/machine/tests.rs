//! The machine on its own: real agents' screens from the corpus (`tests/fixtures/screens/`)
//! fed as looks, the effects it asks for checked, and every timing rule run on paused tokio
//! time — nothing here waits.
//!
//! The effects' results are given the way a healthy terminal gives them (every write goes
//! through, a dialog's keys are taken, no git operation is paused) unless a test says
//! otherwise.

use clawpool_lanes::LaneEventKind;
use std::path::PathBuf;
use std::time::Duration;

use clawpool_lanes::{BlockedSubphase, FailureClass, LaneState, LaneStatus, Payload};
use clawpool_pty::{ExitStatus, ScreenModel, ScreenOptions, ScreenSnapshot, TermSize};
use clawpool_recovery::Trigger;
use tokio::time::Instant;

use super::{Effect, HOOK_PERMISSION_GRACE, Input, Machine, Record};
use crate::handshake::{
    LaneContext, Next, OperatorCommand, OperatorRequest, PromptPlan, Settings, TrustGate, Verdict,
    VerdictReply,
};
use clawpool_agents::profiles::{Profile, ProfileSet};

mod adopted;
mod budget;
mod codex_notify;
mod protocol;
mod screen_lies;
mod turn_edges;

const PROMPT: &str = "create a file named hello.txt containing hi";

fn profile(name: &str) -> &'static Profile {
    static PROFILES: std::sync::OnceLock<ProfileSet> = std::sync::OnceLock::new();
    PROFILES
        .get_or_init(|| ProfileSet::builtin().expect("profiles"))
        .get(name)
        .expect("a built-in profile")
}

/// A screen of the corpus, replayed through the screen model as the corpus test does.
fn corpus(agent: &str, file: &str) -> ScreenSnapshot {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/screens")
        .join(agent)
        .join(format!("{file}.ansi"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (w, h) = file
        .rsplit_once('-')
        .and_then(|(_, size)| size.split_once('x'))
        .expect("NN-state-WxH");
    let size = TermSize {
        cols: w.parse().expect("width"),
        rows: h.parse().expect("height"),
    };
    clawpool_pty::replay::capture_screen(&bytes, size)
}

fn claude(file: &str) -> ScreenSnapshot {
    corpus("claude-2.1.330", file)
}

/// A screen showing `text` (rows separated by newlines) and nothing else.
fn text_screen(text: &str) -> ScreenSnapshot {
    let mut model = ScreenModel::new(ScreenOptions {
        answer_queries: false,
        ..ScreenOptions::new(TermSize {
            cols: 120,
            rows: 40,
        })
    });
    model.feed(text.replace('\n', "\r\n").as_bytes());
    model.snapshot()
}

/// `file` with its rows `at..` pushed down by `rows` (the screen keeps its 40 rows).
fn with_rows(file: &str, at: usize, rows: &[&str]) -> ScreenSnapshot {
    let text = corpus_text(file);
    let mut lines: Vec<&str> = text.lines().collect();
    for (i, row) in rows.iter().enumerate() {
        lines.insert(at + i, row);
    }
    lines.truncate(40);
    text_screen(&lines.join("\n"))
}

/// `file` with every row that holds `needle` blanked.
fn without(file: &str, needle: &str) -> ScreenSnapshot {
    let text = corpus_text(file);
    let lines: Vec<&str> = text
        .lines()
        .map(|line| if line.contains(needle) { "" } else { line })
        .collect();
    text_screen(&lines.join("\n"))
}

/// A Claude Code screen of the corpus as its text (`.txt`) holds it.
fn corpus_text(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/screens/claude-2.1.330")
        .join(format!("{file}.txt"));
    std::fs::read_to_string(&path).expect("corpus screen")
}

/// A Claude Code screen of the corpus from its text alone (screens kept without a recording).
fn text_file(file: &str) -> ScreenSnapshot {
    text_screen(&corpus_text(file))
}

/// A notice no profile knows.
fn notice() -> ScreenSnapshot {
    text_screen("A new notice nobody has seen before\n\n  Press any key to carry on")
}

/// A blank screen of the usual size.
fn blank() -> ScreenSnapshot {
    ScreenModel::new(ScreenOptions::new(TermSize {
        cols: 120,
        rows: 40,
    }))
    .snapshot()
}

/// A machine, the records and writes it asked for, and the verdicts it sent.
struct Lane {
    machine: Machine<'static>,
    records: Vec<Record>,
    sent: Vec<clawpool_pty::Input>,
    stops: u32,
    answers: Vec<String>,
    /// When set, the next terminal write fails with this.
    fail_next_write: Option<String>,
    /// The permission gate [`Effect::DecidePermission`] asks, when the lane has one.
    gate: Option<crate::permission_gate::PermissionGate>,
    /// When set, the next dialog answer's check fails with this (its keys went out).
    fail_next_answer: Option<String>,
    /// How often the machine said the agent's boot is over.
    boot_overs: u32,
}

impl Lane {
    fn new(agent: &str, trust: TrustGate, prompt: Option<&str>) -> Self {
        Self::with_context(agent, trust, prompt, |_| {})
    }

    /// A lane whose context `edit` changed from the usual one.
    fn with_context(
        agent: &str,
        trust: TrustGate,
        prompt: Option<&str>,
        edit: impl FnOnce(&mut LaneContext),
    ) -> Self {
        let mut lane = LaneContext {
            name: "a".into(),
            cwd: PathBuf::from("/nonexistent/lane-a"),
            trust,
            store: None,
            prompt: match prompt {
                Some(p) => PromptPlan::Typed { prompt: p.into() },
                None => PromptPlan::None,
            },
            restarted_to_apply_trust: false,
            answered_outside: false,
            budget: Default::default(),
        };
        edit(&mut lane);
        let machine = Machine::new(
            profile(agent),
            lane,
            Settings::default(),
            Instant::now(),
            1_800_000_000_000,
        );
        Self::opened(machine, false)
    }

    /// Drives `machine` from its opening event (`lane.adopted` when `adopted`, else
    /// `lane.started`).
    fn opened(mut machine: Machine<'static>, adopted: bool) -> Self {
        let opening = machine.open(adopted, Some(42));
        let mut lane = Self {
            machine,
            records: Vec::new(),
            sent: Vec::new(),
            stops: 0,
            answers: Vec::new(),
            fail_next_write: None,
            gate: None,
            fail_next_answer: None,
            boot_overs: 0,
        };
        lane.carry_out(opening);
        lane
    }

    fn claude(prompt: Option<&str>) -> Self {
        Self::new("claude", TrustGate::AllowListed, prompt)
    }

    fn look(&mut self, screen: &ScreenSnapshot) {
        self.input(Input::Look {
            screen: screen.clone(),
            external: None,
        });
    }

    fn input(&mut self, input: Input) {
        let effects = self.machine.handle(input, Instant::now());
        self.carry_out(effects);
    }

    /// What a healthy driver does with each effect, results fed straight back.
    fn carry_out(&mut self, effects: Vec<Effect>) {
        let mut queue: std::collections::VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            let result = match effect {
                Effect::Record(record) => {
                    self.records.push(record);
                    None
                }
                Effect::Send {
                    input,
                    on_sent,
                    fatal,
                } => match self.fail_next_write.take() {
                    Some(error) => Some(Input::SendFailed { error, fatal }),
                    None => {
                        self.sent.push(input);
                        for effect in on_sent.into_iter().rev() {
                            queue.push_front(effect);
                        }
                        None
                    }
                },
                Effect::Answer { dialog, choice } => {
                    self.answers.push(format!("{}={choice}", dialog.name));
                    Some(Input::Answered(match self.fail_next_answer.take() {
                        Some(error) => Err(error),
                        None => Ok(()),
                    }))
                }
                Effect::StopWorker => {
                    self.stops += 1;
                    None
                }
                Effect::BootOver => {
                    self.boot_overs += 1;
                    None
                }
                Effect::ProbeGitOperation => Some(Input::GitOperation(None)),
                Effect::GuardTrustStore => Some(Input::StoreGuarded(true)),
                Effect::ConfineTrustStore => None,
                Effect::WriteTaskFile { .. } => Some(Input::TaskFileWritten(Ok(()))),
                Effect::DecidePermission { rows } => self
                    .gate
                    .as_ref()
                    .map(|gate| Input::PermissionDecided(gate.decide(&rows))),
                Effect::Reply { to, verdict } => {
                    to.send(verdict);
                    None
                }
            };
            if let Some(input) = result {
                let next = self.machine.handle(input, Instant::now());
                for effect in next.into_iter().rev() {
                    queue.push_front(effect);
                }
            }
        }
    }

    fn state(&self) -> LaneState {
        self.machine.state()
    }

    fn kinds(&self) -> Vec<String> {
        self.records
            .iter()
            .map(|r| r.payload.kind().to_string())
            .collect()
    }

    fn count(&self, kind: &str) -> usize {
        self.records
            .iter()
            .filter(|r| r.payload.kind().as_str() == kind)
            .count()
    }

    fn texts_typed(&self) -> Vec<String> {
        self.sent
            .iter()
            .filter_map(|input| match input {
                clawpool_pty::Input::Text(text) => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    fn enters(&self) -> usize {
        self.sent
            .iter()
            .filter(|input| matches!(input, clawpool_pty::Input::Key(clawpool_pty::Key::Enter)))
            .count()
    }

    /// Advances paused time by `by` and looks at `screen` again (what the driver does when the
    /// machine's deadline comes).
    async fn after(&mut self, by: Duration, screen: &ScreenSnapshot) {
        tokio::time::advance(by).await;
        self.look(screen);
    }

    /// Sends an operator command; its verdict (a text's once the next look saw where it goes).
    fn operator(&mut self, command: OperatorCommand, screen: &ScreenSnapshot) -> Verdict {
        let (reply, mut rx) = VerdictReply::new();
        let send = matches!(command, OperatorCommand::Send { .. });
        self.input(Input::Operator {
            request: OperatorRequest { command, reply },
            screen: screen.clone(),
        });
        if send && rx.is_empty() {
            self.look(screen);
        }
        rx.try_recv().expect("a verdict")
    }

    /// The deadline the driver would sleep until after a look at `now`.
    fn deadline(&self) -> Duration {
        let now = Instant::now();
        self.machine.next_deadline(now, now) - now
    }

    /// Drives the lane from boot to its prompt taken (`running`), on Claude Code's screens.
    async fn drive_to_running(&mut self) {
        self.look(&claude("01-booting-120x40"));
        self.look(&claude("04-ready_for_prompt-120x40"));
        assert_eq!(self.texts_typed(), vec![PROMPT.to_owned()]);
        self.look(&claude("05-draft_typed-120x40"));
        let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
        if !settle.is_zero() {
            self.after(settle, &claude("05-draft_typed-120x40")).await;
        }
        assert_eq!(self.enters(), 1, "{:?}", self.kinds());
        self.look(&claude("06-running-120x40"));
        assert_eq!(self.state(), LaneState::Running);
    }
}

/// Real screens in order, and the states they lead to: the handshake read off a recording.
#[tokio::test(start_paused = true)]
async fn claude_code_recorded_session_walks_the_handshake() {
    let mut lane = Lane::claude(Some(PROMPT));
    let table: &[(&str, LaneState)] = &[
        ("01-booting-120x40", LaneState::Spawning),
        ("04-ready_for_prompt-120x40", LaneState::ReadyForPrompt),
    ];
    for (screen, state) in table {
        lane.look(&claude(screen));
        assert_eq!(lane.state(), *state, "after {screen}");
    }
    assert_eq!(lane.texts_typed(), vec![PROMPT.to_owned()]);
    assert_eq!(lane.count("lane.prompt_typed"), 1);
    lane.look(&claude("05-draft_typed-120x40"));
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &claude("05-draft_typed-120x40")).await;
    assert_eq!(lane.enters(), 1);
    // Recorded before the press, so an adopter never types the prompt twice.
    let sent = lane.kinds().iter().position(|k| *k == "lane.prompt_sent");
    assert!(sent.is_some(), "{:?}", lane.kinds());
    lane.look(&claude("06-running-120x40"));
    assert_eq!(lane.state(), LaneState::Running);
    let accepted = lane
        .records
        .iter()
        .find(|r| r.to == Some(LaneState::PromptAccepted))
        .expect("prompt_accepted recorded");
    assert_eq!(
        accepted.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("prompt_echo")
    );
    // Nothing typed twice, whatever else is seen.
    lane.look(&claude("07-running-120x40"));
    assert_eq!(lane.texts_typed().len(), 1);
    assert_eq!(lane.enters(), 1);
}

#[tokio::test(start_paused = true)]
async fn finished_only_after_the_idle_input_stays_idle_for_finish_idle() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let finish_idle = Settings::default().finish_idle;
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(lane.state(), LaneState::Running);
    assert_eq!(lane.deadline(), finish_idle, "woken when finish_idle is up");
    lane.after(
        finish_idle - Duration::from_millis(1),
        &claude("08-finished-120x40"),
    )
    .await;
    assert_eq!(lane.state(), LaneState::Running);
    lane.after(Duration::from_millis(1), &claude("08-finished-120x40"))
        .await;
    assert_eq!(lane.state(), LaneState::Finished);
    assert!(lane.machine.is_over());
}

/// Claude Code's finished screen with its turn taken out: the prompt's echo over the idle
/// input and nothing between them, as Claude Code shows it after the Enter and before its
/// spinner (seconds, with many agents booting at once on few cores).
fn claude_echo_only() -> ScreenSnapshot {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/screens/claude-2.1.330/08-finished-120x40.txt");
    let text = std::fs::read_to_string(&path).expect("corpus screen");
    let mut rows: Vec<&str> = text.lines().collect();
    let echo = rows
        .iter()
        .position(|r| r.contains(PROMPT))
        .expect("echo row");
    let rule = rows[echo..]
        .iter()
        .position(|r| r.starts_with('─'))
        .expect("input box")
        + echo;
    rows.drain(echo + 1..rule);
    let screen = text_screen(&rows.join("\n"));
    assert!(!screen.text().contains("Done."), "the reply is gone");
    screen
}

/// Drives the lane through its prompt's Enter on Claude Code's screens, up to the look that
/// would show the agent taking it.
async fn drive_to_enter(lane: &mut Lane) {
    lane.look(&claude("01-booting-120x40"));
    lane.look(&claude("04-ready_for_prompt-120x40"));
    lane.look(&claude("05-draft_typed-120x40"));
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &claude("05-draft_typed-120x40")).await;
    assert_eq!(lane.enters(), 1, "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn a_turn_never_seen_working_and_without_a_reply_is_not_finished_by_finish_idle() {
    let mut lane = Lane::claude(Some(PROMPT));
    drive_to_enter(&mut lane).await;
    let settings = Settings::default();
    let echo_only = claude_echo_only();
    lane.look(&echo_only);
    assert_eq!(lane.state(), LaneState::PromptAccepted);
    // The old rule ended the turn here, before the agent had started it.
    lane.after(settings.finish_idle * 2, &echo_only).await;
    assert_eq!(lane.state(), LaneState::PromptAccepted);
    assert_eq!(
        lane.deadline(),
        settings.start_timeout - settings.finish_idle * 2,
        "woken when start_timeout is up"
    );
    // The spinner shows late: the turn is seen, and its end is the ordinary one.
    lane.after(Duration::from_secs(5), &claude("06-running-120x40"))
        .await;
    assert_eq!(lane.state(), LaneState::Running);
    lane.after(Duration::from_secs(1), &claude("08-finished-120x40"))
        .await;
    lane.after(settings.finish_idle, &claude("08-finished-120x40"))
        .await;
    assert_eq!(lane.state(), LaneState::Finished);
}

#[tokio::test(start_paused = true)]
async fn a_turn_that_never_starts_blocks_on_prompt_delivery_after_start_timeout() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.machine.recover_blocked();
    drive_to_enter(&mut lane).await;
    let settings = Settings::default();
    let echo_only = claude_echo_only();
    lane.look(&echo_only);
    lane.after(
        settings.start_timeout - Duration::from_millis(1),
        &echo_only,
    )
    .await;
    assert_eq!(lane.state(), LaneState::PromptAccepted);
    lane.after(Duration::from_millis(1), &echo_only).await;
    // Never finished without a sign of work: blocked, and recovery may press Enter again.
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::PromptDelivery)
    );
    let blocked = lane.records.last().expect("a record");
    assert_eq!(
        blocked.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("turn_not_started")
    );
    let (_, ended) = lane.machine.finish();
    assert_eq!(ended.next, Next::Recover(Trigger::PromptNotAccepted));
}

#[tokio::test(start_paused = true)]
async fn a_reply_drawn_between_two_looks_finishes_after_finish_idle() {
    let mut lane = Lane::claude(Some(PROMPT));
    drive_to_enter(&mut lane).await;
    let finish_idle = Settings::default().finish_idle;
    // The agent worked and answered between two looks: no spinner seen, the reply is there.
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(lane.state(), LaneState::PromptAccepted);
    lane.after(finish_idle, &claude("08-finished-120x40")).await;
    assert_eq!(lane.state(), LaneState::Finished);
}

#[tokio::test(start_paused = true)]
async fn working_again_restarts_the_finish_idle_time() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let finish_idle = Settings::default().finish_idle;
    lane.look(&claude("08-finished-120x40"));
    lane.after(finish_idle / 2, &claude("07-running-120x40"))
        .await;
    lane.after(finish_idle / 2, &claude("08-finished-120x40"))
        .await;
    assert_eq!(lane.state(), LaneState::Running);
    lane.after(finish_idle, &claude("08-finished-120x40")).await;
    assert_eq!(lane.state(), LaneState::Finished);
}

#[tokio::test(start_paused = true)]
async fn a_screen_no_rule_knows_past_the_boot_timeout_blocks_on_an_unknown_dialog() {
    let mut lane = Lane::claude(Some(PROMPT));
    let boot = Settings::default().boot_timeout;
    let odd = notice();
    lane.look(&odd);
    assert_eq!(lane.deadline(), boot);
    lane.after(boot - Duration::from_millis(1), &odd).await;
    assert_eq!(lane.state(), LaneState::Spawning);
    lane.after(Duration::from_millis(1), &odd).await;
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::UnknownDialog)
    );
    assert!(lane.sent.is_empty(), "nothing pressed: {:?}", lane.sent);
}

#[tokio::test(start_paused = true)]
async fn a_blank_screen_past_the_boot_timeout_blocks_on_prompt_delivery() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.look(&blank());
    lane.after(Settings::default().boot_timeout, &blank()).await;
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::PromptDelivery)
    );
}

#[tokio::test(start_paused = true)]
async fn provider_retries_block_the_lane_after_provider_block_and_go_to_recovery() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.machine.recover_blocked();
    lane.drive_to_running().await;
    let block = Settings::default().provider_block;
    let retry = claude("14-provider_retry-120x40");
    lane.look(&retry);
    assert_eq!(lane.deadline(), block);
    lane.after(block - Duration::from_millis(1), &retry).await;
    assert_eq!(lane.state(), LaneState::Running);
    assert!(!lane.machine.is_over());
    lane.after(Duration::from_millis(1), &retry).await;
    assert_eq!(lane.state(), LaneState::Blocked(BlockedSubphase::Provider));
    let (_, ended) = lane.machine.finish();
    assert_eq!(ended.next, Next::Recover(Trigger::ProviderDown));
}

/// An agent's retry loop shows its working indicator for each attempt (aider's `Waiting for
/// <model>` between `Retrying in N seconds...`): a lane blocked on its provider is running
/// again only once the agent has worked without retry text for `PROVIDER_BACK_HOLD`.
#[tokio::test(start_paused = true)]
async fn a_lane_blocked_on_its_provider_runs_again_only_after_working_for_the_hold() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let block = Settings::default().provider_block;
    let retry = claude("14-provider_retry-120x40");
    let working = claude("07-running-120x40");
    lane.look(&retry);
    lane.after(block, &retry).await;
    assert_eq!(lane.state(), LaneState::Blocked(BlockedSubphase::Provider));
    // A glimpse of work between two failures.
    lane.after(Duration::from_secs(1), &working).await;
    assert_eq!(lane.deadline(), super::PROVIDER_BACK_HOLD);
    lane.after(
        super::PROVIDER_BACK_HOLD - Duration::from_millis(1),
        &working,
    )
    .await;
    lane.after(Duration::ZERO, &retry).await;
    assert_eq!(lane.state(), LaneState::Blocked(BlockedSubphase::Provider));
    // Back for good: running once the work held without retry text.
    lane.after(Duration::from_secs(1), &working).await;
    lane.after(
        super::PROVIDER_BACK_HOLD - Duration::from_millis(1),
        &working,
    )
    .await;
    assert_eq!(lane.state(), LaneState::Blocked(BlockedSubphase::Provider));
    lane.after(Duration::from_millis(1), &working).await;
    assert_eq!(lane.state(), LaneState::Running);
}

#[tokio::test(start_paused = true)]
async fn a_retry_spell_broken_by_work_counts_again_from_its_start() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let block = Settings::default().provider_block;
    let retry = claude("14-provider_retry-120x40");
    lane.look(&retry);
    lane.after(block - Duration::from_secs(1), &claude("07-running-120x40"))
        .await;
    lane.after(Duration::from_secs(1), &retry).await;
    lane.after(block - Duration::from_secs(1), &retry).await;
    assert_eq!(lane.state(), LaneState::Running);
    lane.after(Duration::from_secs(1), &retry).await;
    assert_eq!(lane.state(), LaneState::Blocked(BlockedSubphase::Provider));
}

#[tokio::test(start_paused = true)]
async fn a_draft_left_in_the_input_gets_enter_again_then_blocks_after_max_submit_attempts() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.machine.recover_blocked();
    let settings = Settings::default();
    let retry = settings.accept_timeout / settings.max_submit_attempts;
    let draft = claude("05-draft_typed-120x40");
    lane.look(&claude("04-ready_for_prompt-120x40"));
    lane.look(&draft);
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &draft).await;
    assert_eq!(lane.enters(), 1);
    assert_eq!(lane.deadline(), retry);
    lane.after(retry - Duration::from_millis(1), &draft).await;
    assert_eq!(lane.enters(), 1, "not before its time");
    for attempt in 2..=settings.max_submit_attempts {
        lane.after(retry, &draft).await;
        assert_eq!(lane.enters() as u32, attempt);
    }
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
    lane.after(retry, &draft).await;
    assert_eq!(lane.enters() as u32, settings.max_submit_attempts);
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::PromptDelivery)
    );
    let (_, ended) = lane.machine.finish();
    assert_eq!(ended.next, Next::Recover(Trigger::PromptNotAccepted));
    assert_eq!(lane.texts_typed().len(), 1, "typed once, never again");
}

#[tokio::test(start_paused = true)]
async fn enter_waits_for_the_draft_to_settle_when_the_profile_says_so() {
    let mut lane = Lane::new("gemini", TrustGate::AllowListed, Some(PROMPT));
    let settle = Duration::from_millis(profile("gemini").manifest.input.submit_after_ms);
    assert!(!settle.is_zero(), "gemini's profile waits before Enter");
    let ready = corpus("gemini-0.61.0", &gemini_file("ready_for_prompt"));
    lane.look(&ready);
    assert_eq!(lane.texts_typed().len(), 1);
    let draft = corpus("gemini-0.61.0", &gemini_file("draft_typed"));
    if !lane.machine.receipt.matches_draft(&draft_text(&draft)) {
        // The recording's draft is another prompt: the settle rule is checked on its own text.
        lane = Lane::new("gemini", TrustGate::AllowListed, Some(&draft_text(&draft)));
        lane.look(&ready);
    }
    lane.look(&draft);
    assert_eq!(lane.enters(), 0);
    lane.after(settle - Duration::from_millis(1), &draft).await;
    assert_eq!(lane.enters(), 0);
    lane.after(Duration::from_millis(1), &draft).await;
    assert_eq!(lane.enters(), 1);
}

/// The first corpus file of gemini-cli showing `state` at 120x40.
fn gemini_file(state: &str) -> String {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/screens/gemini-0.61.0");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("gemini corpus")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(&format!("-{state}-120x40.ansi")))
        .collect();
    names.sort();
    names
        .first()
        .unwrap_or_else(|| panic!("no gemini {state} screen at 120x40"))
        .trim_end_matches(".ansi")
        .to_owned()
}

/// The draft the profile reads on a screen.
fn draft_text(screen: &ScreenSnapshot) -> String {
    match clawpool_agents::detect::observe(profile("gemini"), screen).seen {
        clawpool_agents::detect::Seen::Draft { text } => text,
        other => panic!("not a draft: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_running_lane_without_progress_for_the_stall_time_goes_to_recovery() {
    let mut lane = Lane::claude(Some(PROMPT));
    let stall = Duration::from_secs(120);
    lane.machine.stall_after(stall);
    lane.drive_to_running().await;
    let working = claude("06-running-120x40");
    lane.after(stall / 2, &working).await;
    assert!(!lane.machine.is_over());
    lane.after(stall / 2 + Duration::from_secs(1), &working)
        .await;
    assert_eq!(lane.count("lane.stalled"), 1, "{:?}", lane.kinds());
    let (_, ended) = lane.machine.finish();
    assert_eq!(ended.next, Next::Recover(Trigger::Stalled));
}

#[tokio::test(start_paused = true)]
async fn progress_off_screen_holds_a_stall_off() {
    let mut lane = Lane::claude(Some(PROMPT));
    let stall = Duration::from_secs(120);
    lane.machine.stall_after(stall);
    lane.drive_to_running().await;
    let working = claude("06-running-120x40");
    tokio::time::advance(stall - Duration::from_secs(10)).await;
    // A file changed in the worktree just now (wall time as the machine counts it).
    let now_ms = lane.machine.wall_ms_at(Instant::now());
    lane.input(Input::Look {
        screen: working.clone(),
        external: Some((now_ms, clawpool_recovery::ProgressSource::WorktreeChange)),
    });
    lane.after(Duration::from_secs(20), &working).await;
    assert_eq!(lane.count("lane.stalled"), 0);
    assert!(!lane.machine.is_over());
}

#[tokio::test(start_paused = true)]
async fn an_unknown_screen_while_running_blocks_after_unknown_screen_without_progress() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let bound = Settings::default().unknown_screen;
    // Progress stops at the moment the odd screen appears.
    let odd = notice();
    lane.look(&odd);
    lane.after(bound - Duration::from_millis(1), &odd).await;
    assert_eq!(lane.state(), LaneState::Running);
    lane.after(Duration::from_millis(1), &odd).await;
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::UnknownDialog)
    );
    let blocked = lane.records.last().expect("the transition");
    assert_eq!(
        blocked.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("unknown_screen")
    );
}

#[tokio::test(start_paused = true)]
async fn a_lane_outside_the_trusted_roots_gets_no_keystroke_even_when_the_agent_is_ready() {
    let mut lane = Lane::new("claude", TrustGate::Closed, Some(PROMPT));
    lane.look(&claude("02-trust_required-120x40"));
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::TrustPrompt)
    );
    lane.look(&claude("04-ready_for_prompt-120x40"));
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::TrustPrompt)
    );
    assert!(lane.sent.is_empty(), "{:?}", lane.sent);
    assert!(lane.answers.is_empty());
    // An operator's text is refused, not queued.
    let verdict = lane.operator(
        OperatorCommand::Send {
            text: "hello".into(),
        },
        &claude("04-ready_for_prompt-120x40"),
    );
    assert_eq!(verdict.name(), "refused");
    // Trusted by an operator: the gate opens and the prompt goes in at the next look.
    let verdict = lane.operator(
        OperatorCommand::Trust,
        &claude("04-ready_for_prompt-120x40"),
    );
    assert!(verdict.is_done(), "{verdict:?}");
    lane.look(&claude("04-ready_for_prompt-120x40"));
    assert_eq!(lane.texts_typed(), vec![PROMPT.to_owned()]);
}

#[tokio::test(start_paused = true)]
async fn an_allow_listed_lane_answers_its_trust_dialog_with_the_store_noted_first() {
    let mut lane = Lane::claude(Some(PROMPT));
    let effects = lane.machine.handle(
        Input::Look {
            screen: claude("02-trust_required-120x40"),
            external: None,
        },
        Instant::now(),
    );
    let guard = effects
        .iter()
        .position(|e| matches!(e, Effect::GuardTrustStore));
    let answer = effects
        .iter()
        .position(|e| matches!(e, Effect::Answer { .. }));
    assert!(
        guard.is_some() && guard < answer,
        "the store is noted before the answer: {effects:?}"
    );
    lane.carry_out(effects);
    assert_eq!(lane.state(), LaneState::TrustRequired);
    assert_eq!(lane.count("lane.dialog_answered"), 1);
    assert_eq!(lane.count("lane.trust_resolved"), 1);
    // Once the dialog is gone, the store is confined to the lane.
    let effects = lane.machine.handle(
        Input::Look {
            screen: claude("04-ready_for_prompt-120x40"),
            external: None,
        },
        Instant::now(),
    );
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::ConfineTrustStore))
    );
}

#[tokio::test(start_paused = true)]
async fn a_dialog_that_does_not_go_away_is_answered_three_times_then_blocks() {
    let mut lane = Lane::claude(Some(PROMPT));
    let dialog = claude("02-trust_required-120x40");
    for _ in 0..4 {
        lane.look(&dialog);
    }
    assert_eq!(lane.answers.len(), 3, "{:?}", lane.answers);
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::TrustPrompt)
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_of_the_prompt_fails_the_lane_and_records_no_typing() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.fail_next_write = Some("the terminal is gone".into());
    lane.look(&claude("04-ready_for_prompt-120x40"));
    assert_eq!(
        lane.state(),
        LaneState::Failed(FailureClass::PromptDelivery)
    );
    assert_eq!(lane.count("lane.prompt_typed"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_git_operation_paused_in_the_worktree_holds_delivery_until_it_is_gone() {
    let mut lane = Lane::claude(Some(PROMPT));
    let paused = clawpool_worktree::GitOperation {
        kind: clawpool_worktree::GitOperationKind::Rebase,
        paused: true,
    };
    let effects = lane.machine.handle(
        Input::Look {
            screen: claude("04-ready_for_prompt-120x40"),
            external: None,
        },
        Instant::now(),
    );
    assert!(
        matches!(effects.last(), Some(Effect::ProbeGitOperation)),
        "{effects:?}"
    );
    lane.carry_out(
        effects
            .into_iter()
            .filter(|e| !matches!(e, Effect::ProbeGitOperation))
            .collect(),
    );
    lane.input(Input::GitOperation(Some(paused)));
    assert_eq!(lane.count("lane.delivery_held"), 1);
    assert!(lane.texts_typed().is_empty());
    // Not looked up again before the recheck time.
    let effects = lane.machine.handle(
        Input::Look {
            screen: claude("04-ready_for_prompt-120x40"),
            external: None,
        },
        Instant::now(),
    );
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::ProbeGitOperation))
    );
    assert_eq!(lane.deadline(), Duration::from_secs(2));
    lane.after(
        Duration::from_secs(2),
        &claude("04-ready_for_prompt-120x40"),
    )
    .await;
    assert_eq!(lane.count("lane.delivery_resumed"), 1);
    assert_eq!(lane.texts_typed(), vec![PROMPT.to_owned()]);
}

#[tokio::test(start_paused = true)]
async fn how_the_worker_exits_decides_how_the_lane_ends() {
    let cases = [
        (ExitStatus::Exited(0), LaneState::Finished),
        (
            ExitStatus::Exited(3),
            LaneState::Failed(FailureClass::WorkerCrashed),
        ),
        (
            ExitStatus::Lost,
            LaneState::Failed(FailureClass::WorkerLost),
        ),
    ];
    for (exit, state) in cases {
        let mut lane = Lane::claude(None);
        lane.look(&claude("04-ready_for_prompt-120x40"));
        lane.input(Input::Exited(exit, claude("04-ready_for_prompt-120x40")));
        assert_eq!(lane.state(), state, "{exit:?}");
    }
    // A worker gone after Enter and before the prompt was seen taken: the prompt went
    // somewhere else.
    let mut lane = Lane::claude(Some(PROMPT));
    lane.look(&claude("04-ready_for_prompt-120x40"));
    lane.look(&claude("05-draft_typed-120x40"));
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &claude("05-draft_typed-120x40")).await;
    lane.input(Input::Exited(
        ExitStatus::Exited(1),
        claude("05-draft_typed-120x40"),
    ));
    assert_eq!(
        lane.state(),
        LaneState::Failed(FailureClass::PromptDelivery)
    );
    assert_eq!(lane.count("lane.prompt_misdelivery"), 1);
}

#[tokio::test(start_paused = true)]
async fn an_operator_stop_finishes_a_lane_done_with_its_work_and_stops_a_working_one() {
    let mut idle = Lane::claude(None);
    idle.look(&claude("04-ready_for_prompt-120x40"));
    let verdict = idle.operator(OperatorCommand::Stop, &claude("04-ready_for_prompt-120x40"));
    assert!(verdict.is_done());
    assert_eq!(idle.state(), LaneState::Finished);
    assert_eq!(idle.stops, 1);

    let mut working = Lane::claude(Some(PROMPT));
    working.drive_to_running().await;
    working.operator(OperatorCommand::Stop, &claude("06-running-120x40"));
    assert_eq!(working.state(), LaneState::Stopped);
    assert_eq!(working.stops, 1);
    let stopped = working.records.last().expect("a record");
    assert_eq!(stopped.payload.kind(), LaneEventKind::Stopped);
    assert_eq!(
        stopped.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("operator_stop")
    );
}

/// The supervisor told to stop: the machine stops the worker and fails the lane with the
/// signal as evidence — as what a block was heading for, `infra` for a working lane — and the
/// run is over.
#[tokio::test(start_paused = true)]
async fn an_interrupt_fails_the_lane_as_its_block_was_heading_and_ends_the_run() {
    let mut working = Lane::claude(Some(PROMPT));
    working.drive_to_running().await;
    working.input(Input::Interrupted("SIGTERM"));
    assert_eq!(working.state(), LaneState::Failed(FailureClass::Infra));
    assert_eq!(working.stops, 1);
    assert!(working.machine.is_over());
    let failed = working.records.last().expect("a record");
    assert_eq!(failed.payload.kind(), LaneEventKind::Failed);
    assert_eq!(failed.from, Some(LaneState::Running));
    assert_eq!(failed.payload.detail()["signal"], "SIGTERM");
    let evidence = failed.evidence.as_ref().expect("evidence");
    assert_eq!(evidence.rule, "supervisor_interrupted");
    assert_eq!(evidence.matched, "interrupted by SIGTERM while running");

    let mut asking = Lane::claude(Some(PROMPT));
    asking.drive_to_running().await;
    asking.look(&claude("19-tool_permission-120x40"));
    assert_eq!(
        asking.state(),
        LaneState::Blocked(BlockedSubphase::ToolPermission)
    );
    asking.input(Input::Interrupted("SIGINT"));
    assert_eq!(
        asking.state(),
        LaneState::Failed(FailureClass::ToolPermission)
    );
}

/// The worktree gone under a working lane: the worker is stopped and the lane fails `infra`
/// with the folder as evidence, at once — an idle screen afterwards finishes nothing.
#[tokio::test(start_paused = true)]
async fn a_worktree_gone_fails_the_lane_at_once_and_ends_the_run() {
    let mut working = Lane::claude(Some(PROMPT));
    working.drive_to_running().await;
    working.input(Input::WorktreeGone("/lanes/gone".into()));
    assert_eq!(working.state(), LaneState::Failed(FailureClass::Infra));
    assert_eq!(working.stops, 1);
    assert!(working.machine.is_over());
    let failed = working.records.last().expect("a record");
    assert_eq!(failed.payload.kind(), LaneEventKind::Failed);
    assert_eq!(failed.from, Some(LaneState::Running));
    let evidence = failed.evidence.as_ref().expect("evidence");
    assert_eq!(evidence.rule, "worktree_gone");
    assert_eq!(evidence.matched, "/lanes/gone does not exist");
    working.look(&claude("04-ready_for_prompt-120x40"));
    assert_eq!(working.state(), LaneState::Failed(FailureClass::Infra));
}

#[tokio::test(start_paused = true)]
async fn a_text_sent_while_the_agent_works_is_queued_and_typed_when_it_is_idle() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let verdict = lane.operator(
        OperatorCommand::Send {
            text: "and a second file".into(),
        },
        &claude("06-running-120x40"),
    );
    assert!(verdict.is_done());
    assert_eq!(lane.texts_typed().len(), 1, "not typed while working");
    lane.look(&claude("07-running-120x40"));
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(
        lane.texts_typed(),
        vec![PROMPT.to_owned(), "and a second file".to_owned()]
    );
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
}

#[tokio::test(start_paused = true)]
async fn a_recovery_check_without_progress_ends_when_its_time_is_up() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let within = Duration::from_secs(30);
    lane.machine.check_progress(Some(within));
    let working = claude("06-running-120x40");
    lane.look(&working);
    assert_eq!(lane.deadline(), within);
    lane.after(within - Duration::from_millis(1), &working)
        .await;
    assert!(!lane.machine.is_over());
    lane.after(Duration::from_millis(1), &working).await;
    let (_, ended) = lane.machine.finish();
    assert_eq!(ended.next, Next::NoProgress);
}

#[tokio::test(start_paused = true)]
async fn a_recovery_check_ends_at_the_first_new_line_once_armed() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    lane.machine.check_progress(Some(Duration::from_secs(30)));
    lane.look(&claude("06-running-120x40"));
    assert!(!lane.machine.is_over(), "the first look arms the check");
    lane.after(Duration::from_secs(1), &claude("18-running-120x40"))
        .await;
    let (_, ended) = lane.machine.finish();
    assert!(
        matches!(ended.next, Next::Progressed(ref what) if what.starts_with("a new line")),
        "{:?}",
        ended.next
    );
}

/// A lane on Claude Code whose permission questions go to the policy's gate, deciding for a
/// worktree in `dir` with `profile`.
fn lane_with_gate(dir: &std::path::Path, profile: clawpool_recovery::permissions::Profile) -> Lane {
    use clawpool_recovery::permissions::{LaneContext as Folders, PermissionPolicy};
    let mut lane = Lane::claude(Some(PROMPT));
    lane.machine.decide_permissions();
    lane.gate = Some(crate::permission_gate::PermissionGate::new(
        PermissionPolicy::default(),
        Folders {
            worktree: dir.to_path_buf(),
            repository: dir.to_path_buf(),
            other_lanes: Vec::new(),
            home: None,
            profile,
            protected: Default::default(),
        },
    ));
    lane
}

#[tokio::test(start_paused = true)]
async fn a_permission_the_policy_allows_is_answered_yes_and_an_ask_waits_for_a_person() {
    use clawpool_recovery::permissions::Profile as Permissions;
    let dir = tempfile::tempdir().expect("a worktree");
    // Claude Code asks to create hello.txt in its folder: workspace-write allows it.
    let mut lane = lane_with_gate(dir.path(), Permissions::WorkspaceWrite);
    lane.drive_to_running().await;
    lane.look(&claude("19-tool_permission-120x40"));
    assert_eq!(lane.answers, vec!["tool_permission=yes".to_owned()]);
    let decided = lane
        .records
        .iter()
        .find(|r| r.payload.kind() == LaneEventKind::PermissionDecided)
        .expect("the decision is recorded");
    assert_eq!(decided.payload.detail()["tool"], "write");
    assert_eq!(decided.payload.detail()["decision"], "allow");
    assert_eq!(decided.payload.detail()["rule"], "profile:workspace-write");
    assert_eq!(lane.count("lane.blocked"), 0, "{:?}", lane.kinds());

    // The same question in a read-only lane is a person's to answer: nothing is pressed.
    let mut lane = lane_with_gate(dir.path(), Permissions::ReadOnly);
    lane.drive_to_running().await;
    lane.look(&claude("19-tool_permission-120x40"));
    assert!(lane.answers.is_empty(), "{:?}", lane.answers);
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::ToolPermission)
    );
    assert_eq!(lane.count("lane.permission.decided"), 1);
    // Looking again while it waits asks nothing more.
    lane.look(&claude("19-tool_permission-120x40"));
    assert_eq!(lane.count("lane.permission.decided"), 1);

    // Without a gate the lane waits for a person, as before.
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    lane.look(&claude("19-tool_permission-120x40"));
    assert!(lane.answers.is_empty());
    assert_eq!(lane.count("lane.permission.decided"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_question_the_permission_hook_decided_is_not_answered_again_on_screen() {
    use clawpool_recovery::permissions::Profile as Permissions;
    let dir = tempfile::tempdir().expect("a worktree");
    let write = serde_json::json!({"file_path": dir.path().join("hello.txt"), "content": "hi"});
    let hook_answer = |lane: &Lane, tool: &str| {
        let gate = lane.gate.as_ref().expect("gate");
        let cwd = dir.path().display().to_string();
        Input::HookPermissionDecided(gate.decide_hook(tool, &write, Some(&cwd)))
    };
    // The hook allowed the write: the dialog Claude Code draws meanwhile is left alone.
    let mut lane = lane_with_gate(dir.path(), Permissions::WorkspaceWrite);
    lane.drive_to_running().await;
    lane.input(hook(
        "SessionStart",
        serde_json::json!({"source": "startup"}),
    ));
    lane.input(hook(
        "PermissionRequest",
        serde_json::json!({"tool_name": "Write", "tool_input": write}),
    ));
    let decided = hook_answer(&lane, "Write");
    lane.input(decided);
    lane.look(&claude("19-tool_permission-120x40"));
    lane.after(
        HOOK_PERMISSION_GRACE * 2,
        &claude("19-tool_permission-120x40"),
    )
    .await;
    assert!(lane.answers.is_empty(), "{:?}", lane.answers);
    let decisions: Vec<&Record> = lane
        .records
        .iter()
        .filter(|r| r.payload.kind() == LaneEventKind::PermissionDecided)
        .collect();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].source, Some(clawpool_lanes::EventSource::Hook));
    assert_eq!(decisions[0].payload.detail()["decision"], "allow");

    // The hook's ask: the dialog waits for a person, decided once.
    let mut lane = lane_with_gate(dir.path(), Permissions::ReadOnly);
    lane.drive_to_running().await;
    lane.input(hook(
        "SessionStart",
        serde_json::json!({"source": "startup"}),
    ));
    let decided = hook_answer(&lane, "Write");
    lane.input(decided);
    lane.look(&claude("19-tool_permission-120x40"));
    assert!(lane.answers.is_empty(), "{:?}", lane.answers);
    assert_eq!(
        lane.state(),
        LaneState::Blocked(BlockedSubphase::ToolPermission)
    );
    assert_eq!(lane.count("lane.permission.decided"), 1);

    // No decision from the hook within its grace: the screen's gate answers.
    let mut lane = lane_with_gate(dir.path(), Permissions::WorkspaceWrite);
    lane.drive_to_running().await;
    lane.input(hook(
        "SessionStart",
        serde_json::json!({"source": "startup"}),
    ));
    lane.look(&claude("19-tool_permission-120x40"));
    assert!(
        lane.answers.is_empty(),
        "waits for the hook: {:?}",
        lane.answers
    );
    lane.after(HOOK_PERMISSION_GRACE, &claude("19-tool_permission-120x40"))
        .await;
    assert_eq!(lane.answers, vec!["tool_permission=yes".to_owned()]);
}

/// A hook report, as the lane's channel hands it to the machine.
fn hook(event: &str, payload: serde_json::Value) -> Input {
    Input::Hook(crate::channel::HookFact::from_report(event, &payload))
}

impl Lane {
    /// The records that moved the lane to `status`.
    fn transitions_to(&self, status: LaneStatus) -> Vec<&Record> {
        self.records
            .iter()
            .filter(|r| r.to.map(|to| to.status()) == Some(status) && r.from.is_some())
            .collect()
    }
}

#[tokio::test(start_paused = true)]
async fn user_prompt_submit_decides_acceptance_before_the_screen_shows_it() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.look(&claude("01-booting-120x40"));
    lane.look(&claude("04-ready_for_prompt-120x40"));
    lane.look(&claude("05-draft_typed-120x40"));
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &claude("05-draft_typed-120x40")).await;
    assert_eq!(lane.enters(), 1);
    // The draft is still on screen: the screen alone would not accept yet.
    lane.input(hook(
        "UserPromptSubmit",
        serde_json::json!({"session_id": "s1", "prompt": PROMPT}),
    ));
    assert_eq!(lane.state(), LaneState::PromptAccepted);
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Hook));
    let evidence = accepted.evidence.as_ref().expect("evidence");
    assert_eq!(
        (evidence.rule.as_str(), evidence.region.as_str()),
        ("UserPromptSubmit", "hook")
    );
    // The screen catching up moves it on, and says so.
    lane.look(&claude("06-running-120x40"));
    let running = lane.transitions_to(LaneStatus::Running)[0];
    assert_eq!(running.source, Some(clawpool_lanes::EventSource::Screen));
    assert_eq!(lane.count("lane.prompt_accepted"), 1);
    assert_eq!(lane.count("lane.hook"), 1);
}

#[tokio::test(start_paused = true)]
async fn stop_finishes_at_once_and_duplicates_collapse_to_one_finished() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    lane.input(hook(
        "UserPromptSubmit",
        serde_json::json!({"prompt": PROMPT}),
    ));
    lane.look(&claude("08-finished-120x40"));
    assert_eq!(lane.state(), LaneState::Running, "not yet finish_idle");
    lane.input(hook("Stop", serde_json::json!({"session_id": "s1"})));
    assert_eq!(lane.state(), LaneState::Finished);
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Hook));
    assert_eq!(
        finished.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("Stop")
    );
    // A second Stop and the screen's late idle change nothing.
    lane.input(hook("Stop", serde_json::json!({})));
    lane.after(
        Settings::default().finish_idle,
        &claude("08-finished-120x40"),
    )
    .await;
    assert_eq!(lane.count("lane.finished"), 1, "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn a_stop_for_no_turn_the_lane_saw_start_decides_nothing() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    lane.input(hook("Stop", serde_json::json!({})));
    assert_eq!(lane.state(), LaneState::Running);
    assert_eq!(lane.count("lane.hook"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_tool_reported_running_is_not_a_stall_until_it_is_reported_done() {
    let mut lane = Lane::claude(Some(PROMPT));
    let stall = Duration::from_secs(120);
    lane.machine.stall_after(stall);
    lane.drive_to_running().await;
    lane.input(hook(
        "PreToolUse",
        serde_json::json!({"tool_name": "Bash", "tool_input": {"command": "sleep 800"}}),
    ));
    let working = claude("06-running-120x40");
    for _ in 0..3 {
        lane.after(stall, &working).await;
    }
    assert_eq!(lane.count("lane.stalled"), 0, "{:?}", lane.kinds());
    lane.input(hook(
        "PostToolUse",
        serde_json::json!({"tool_name": "Bash"}),
    ));
    lane.after(stall / 2, &working).await;
    assert_eq!(lane.count("lane.stalled"), 0, "the tool's end is progress");
    lane.after(stall / 2 + Duration::from_secs(1), &working)
        .await;
    assert_eq!(lane.count("lane.stalled"), 1, "{:?}", lane.kinds());
}

#[tokio::test(start_paused = true)]
async fn an_idle_screen_does_not_overrule_a_tool_reported_running() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    lane.input(hook("PreToolUse", serde_json::json!({"tool_name": "Bash"})));
    let idle = claude("08-finished-120x40");
    lane.look(&idle);
    lane.after(Settings::default().finish_idle * 3, &idle).await;
    assert_eq!(lane.state(), LaneState::Running);
    // Reported done: the screen's idle counts again, from then.
    lane.input(hook(
        "PostToolUse",
        serde_json::json!({"tool_name": "Bash"}),
    ));
    lane.look(&idle);
    lane.after(Settings::default().finish_idle, &idle).await;
    assert_eq!(lane.state(), LaneState::Finished);
    let finished = lane.transitions_to(LaneStatus::Finished)[0];
    assert_eq!(finished.source, Some(clawpool_lanes::EventSource::Screen));
}

/// A lane running its prompt, with the turn and a Bash tool reported by the agent's hooks.
async fn running_with_a_reported_tool() -> Lane {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    lane.input(hook(
        "UserPromptSubmit",
        serde_json::json!({"prompt": PROMPT}),
    ));
    lane.input(hook("PreToolUse", serde_json::json!({"tool_name": "Bash"})));
    lane
}

#[tokio::test(start_paused = true)]
async fn a_failed_delivery_degrades_the_channel_and_the_screen_decides() {
    let mut lane = running_with_a_reported_tool().await;
    lane.input(Input::HookFailed {
        event: "PostToolUse".into(),
        error: "connecting to /lane/.claw/control.sock: No such file".into(),
    });
    let degraded = lane
        .records
        .iter()
        .find(|r| r.payload.kind() == LaneEventKind::ChannelDegraded)
        .expect("lane.channel.degraded");
    assert_eq!(degraded.payload.detail()["failed"], 1);
    assert_eq!(degraded.payload.detail()["event"], "PostToolUse");
    // What the channel said no longer holds (the tool's end was lost), and what it says now
    // decides nothing: the screen's idle finishes the lane after finish_idle.
    lane.input(hook("Stop", serde_json::json!({})));
    assert_eq!(lane.state(), LaneState::Running);
    let idle = claude("08-finished-120x40");
    lane.look(&idle);
    lane.after(Settings::default().finish_idle, &idle).await;
    assert_eq!(lane.state(), LaneState::Finished);
    assert_eq!(lane.count("lane.finished"), 1);
}

/// Drives a lane whose hooks proved to work (SessionStart) to its Enter on the prompt.
async fn hooked_lane_to_enter() -> Lane {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.input(hook(
        "SessionStart",
        serde_json::json!({"source": "startup"}),
    ));
    lane.look(&claude("01-booting-120x40"));
    lane.look(&claude("04-ready_for_prompt-120x40"));
    lane.look(&claude("05-draft_typed-120x40"));
    let settle = Duration::from_millis(profile("claude").manifest.input.submit_after_ms);
    lane.after(settle, &claude("05-draft_typed-120x40")).await;
    assert_eq!(lane.enters(), 1);
    lane
}

#[tokio::test(start_paused = true)]
async fn with_working_hooks_a_working_screen_without_the_echo_waits_for_user_prompt_submit() {
    let mut lane = hooked_lane_to_enter().await;
    // Work on screen, but not this prompt's echo: the hook decides (turn_edges.rs has the
    // screen that shows the prompt taken).
    let working = without("06-running-120x40", "hello.txt");
    lane.look(&working);
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
    assert_eq!(
        lane.deadline(),
        Settings::default().hook_grace,
        "woken when the grace is up"
    );
    lane.after(Duration::from_millis(300), &working).await;
    lane.input(hook(
        "UserPromptSubmit",
        serde_json::json!({"prompt": PROMPT}),
    ));
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Hook));
    lane.look(&working);
    assert_eq!(lane.state(), LaneState::Running);
}

#[tokio::test(start_paused = true)]
async fn with_a_silent_hook_the_screen_accepts_after_the_grace() {
    let mut lane = hooked_lane_to_enter().await;
    let working = without("06-running-120x40", "hello.txt");
    lane.look(&working);
    lane.after(
        Settings::default().hook_grace - Duration::from_millis(1),
        &working,
    )
    .await;
    assert_eq!(lane.state(), LaneState::ReadyForPrompt);
    lane.after(Duration::from_millis(1), &working).await;
    assert_eq!(lane.state(), LaneState::Running);
    let accepted = lane.transitions_to(LaneStatus::PromptAccepted)[0];
    assert_eq!(accepted.source, Some(clawpool_lanes::EventSource::Screen));
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_asks_permission_is_not_running_and_the_idle_screen_finishes_the_turn() {
    let mut lane = running_with_a_reported_tool().await;
    lane.input(hook(
        "PermissionRequest",
        serde_json::json!({"tool_name": "Bash"}),
    ));
    // Refused: Claude Code interrupts the turn and reports neither the tool's end nor Stop.
    let idle = claude("08-finished-120x40");
    lane.look(&idle);
    lane.after(Settings::default().finish_idle, &idle).await;
    assert_eq!(lane.state(), LaneState::Finished);
}

#[tokio::test(start_paused = true)]
async fn a_tool_whose_end_is_never_reported_counts_as_running_only_for_its_bound() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.machine.stall_after(Duration::from_secs(120));
    lane.drive_to_running().await;
    lane.input(hook("PreToolUse", serde_json::json!({"tool_name": "Bash"})));
    let working = claude("06-running-120x40");
    let bound = super::TOOL_RUNNING_BOUND;
    lane.after(bound - Duration::from_secs(1), &working).await;
    assert_eq!(lane.count("lane.stalled"), 0);
    lane.after(Duration::from_secs(121), &working).await;
    assert_eq!(lane.count("lane.stalled"), 1, "{:?}", lane.kinds());
}

fn gemini(file: &str) -> ScreenSnapshot {
    corpus("gemini-0.61.0", file)
}

/// gemini-cli's screen just after the trust answer ("Gemini CLI is restarting to apply the
/// trust changes..." under the answered box), kept in the corpus as text only.
fn gemini_restarting() -> ScreenSnapshot {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/screens/gemini-0.61.0/38-booting-120x40.txt");
    text_screen(
        std::fs::read_to_string(&path)
            .expect("the corpus screen")
            .trim_end(),
    )
}

/// A gemini-cli lane whose trust dialog clawpool answered, still showing the default-mode
/// footer of a folder it does not trust (`folder_not_trusted_yet`).
fn gemini_answered_but_untrusted(restarted_before: bool) -> Lane {
    let mut lane = Lane::with_context("gemini", TrustGate::AllowListed, Some(PROMPT), |lane| {
        lane.restarted_to_apply_trust = restarted_before;
    });
    lane.look(&gemini("26-trust_required-120x40"));
    assert_eq!(lane.answers, ["trust=yes"]);
    assert_eq!(lane.count("lane.trust_resolved"), 1, "{:?}", lane.kinds());
    lane.look(&gemini("25-booting-120x40"));
    lane
}

/// gemini-cli can save the trust and lose the relaunch that applies it: still untrusted
/// `trust_apply` after the answer, it is restarted once, and nothing was typed into it.
#[tokio::test(start_paused = true)]
async fn an_agent_still_untrusted_after_its_trust_answer_is_restarted_after_trust_apply() {
    let mut lane = gemini_answered_but_untrusted(false);
    let trust_apply = Settings::default().trust_apply;
    assert_eq!(lane.deadline(), trust_apply, "woken when trust_apply is up");
    lane.after(
        trust_apply - Duration::from_millis(1),
        &gemini("25-booting-120x40"),
    )
    .await;
    assert_eq!(lane.stops, 0);
    assert!(!lane.machine.is_over());
    lane.after(Duration::from_millis(1), &gemini("25-booting-120x40"))
        .await;
    assert_eq!(lane.stops, 1);
    assert!(lane.texts_typed().is_empty());
    let request = lane
        .records
        .iter()
        .find(|r| r.payload.kind() == LaneEventKind::RestartRequested)
        .expect("a restart requested");
    assert_eq!(
        request.payload.detail()["by"],
        crate::handshake::TRUST_NOT_APPLIED
    );
    assert_eq!(
        request.evidence.as_ref().map(|e| e.rule.as_str()),
        Some("folder_not_trusted_yet")
    );
    let (_, ended) = lane.machine.finish();
    assert!(
        matches!(&ended.next, Next::Restart(r) if r.by == crate::handshake::TRUST_NOT_APPLIED && !r.resume),
        "{:?}",
        ended.next
    );
}

/// The usual path: gemini-cli relaunches itself and comes up trusted; no restart, ever.
#[tokio::test(start_paused = true)]
async fn an_agent_that_applies_its_trust_is_not_restarted() {
    let mut lane = gemini_answered_but_untrusted(false);
    lane.look(&gemini_restarting());
    lane.look(&gemini("27-ready_for_prompt-120x40"));
    assert_eq!(lane.texts_typed(), [PROMPT]);
    lane.after(
        Settings::default().trust_apply * 2,
        &gemini("27-ready_for_prompt-120x40"),
    )
    .await;
    assert_eq!(lane.stops, 0);
    assert_eq!(lane.count("lane.restart_requested"), 0);
}

/// Once per lane: a worker restarted for this before is left to the boot deadline.
#[tokio::test(start_paused = true)]
async fn an_agent_restarted_once_to_apply_trust_is_not_restarted_again() {
    let mut lane = gemini_answered_but_untrusted(true);
    let settings = Settings::default();
    lane.after(settings.trust_apply, &gemini("25-booting-120x40"))
        .await;
    assert_eq!(lane.stops, 0);
    lane.after(settings.boot_timeout, &gemini("25-booting-120x40"))
        .await;
    assert_eq!(lane.stops, 0);
    assert_eq!(lane.state().status(), LaneStatus::Blocked);
}

/// Under load the answer's expected highlight can come after its check gave up while its keys
/// still worked: the dialog gone and a screen the profile knows is the proof, recorded then, once.
#[tokio::test(start_paused = true)]
async fn a_trust_answer_whose_check_timed_out_is_resolved_once_the_dialog_is_gone() {
    let mut lane = Lane::new("gemini", TrustGate::AllowListed, Some(PROMPT));
    lane.fail_next_answer = Some("the expected highlight did not come within 2000 ms".into());
    lane.look(&gemini("26-trust_required-120x40"));
    assert_eq!(lane.answers, ["trust=yes"]);
    assert_eq!(lane.count("lane.trust_resolved"), 0);
    // A screen no rule knows proves nothing (a redraw can blank the live dialog).
    lane.look(&gemini_restarting());
    assert_eq!(lane.count("lane.trust_resolved"), 0);
    lane.look(&gemini("27-ready_for_prompt-120x40"));
    let resolved: Vec<&Record> = lane
        .records
        .iter()
        .filter(|r| r.payload.kind() == LaneEventKind::TrustResolved)
        .collect();
    assert_eq!(resolved.len(), 1, "{:?}", lane.kinds());
    assert_eq!(resolved[0].payload.detail()["method"], "auto_allowlisted");
    lane.look(&gemini("27-ready_for_prompt-120x40"));
    assert_eq!(lane.count("lane.trust_resolved"), 1);
    assert_eq!(lane.texts_typed(), [PROMPT]);
}

/// claw 0.1.3 gives up on a refusing provider after 9 attempts (~5 min), prints the failure
/// and exits 1: the lane failed on the provider. Killed by a signal, it crashed.
#[tokio::test(start_paused = true)]
async fn an_agent_that_exits_after_giving_up_on_its_provider_failed_on_the_provider() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/screens/claw-0.1.3/25-provider_retry-80x12.txt");
    let gave_up = text_screen(std::fs::read_to_string(&path).expect("corpus").trim_end());
    let cases = [
        (
            ExitStatus::Exited(1),
            LaneState::Failed(FailureClass::Provider),
            "request_failed",
        ),
        (
            ExitStatus::Signaled(9),
            LaneState::Failed(FailureClass::WorkerCrashed),
            "process_exit",
        ),
    ];
    for (exit, state, rule) in cases {
        let mut lane = Lane::new("claw", TrustGate::AllowListed, None);
        lane.input(Input::Exited(exit, gave_up.clone()));
        assert_eq!(lane.state(), state, "{exit:?}");
        let failed = lane.transitions_to(LaneStatus::Failed)[0];
        let evidence = failed.evidence.as_ref().expect("evidence");
        assert_eq!(evidence.rule, rule, "{exit:?}");
        assert!(evidence.matched.contains(&exit.to_string()), "{evidence:?}");
    }
}

/// The two ends recorded with no worker to run the machine on: a restart whose new worker
/// cannot start, and a lane whose worker an adopting supervisor finds gone.
#[test]
fn a_lane_without_a_worker_fails_as_its_end_says() {
    let failed = super::start_failed(LaneState::Running, "no such program".into());
    assert_eq!(failed.from, Some(LaneState::Running));
    assert_eq!(
        failed.to,
        Some(LaneState::Failed(FailureClass::WorkerCrashed))
    );
    let Payload::Failed(detail) = &failed.payload else {
        panic!("{:?}", failed.payload)
    };
    assert!(
        detail
            .error
            .as_deref()
            .is_some_and(|e| e.contains("no such program")),
        "{detail:?}"
    );

    let lost = super::worker_lost("pid 42 is gone".into());
    assert_eq!(lost.from, None);
    assert_eq!(lost.to, Some(LaneState::Failed(FailureClass::WorkerLost)));
    let evidence = lost.evidence.expect("evidence");
    assert_eq!(
        (evidence.rule.as_str(), evidence.matched.as_str()),
        ("worker_gone", "pid 42 is gone")
    );
}

/// A permission question answered by keys clawpool never sent (the agent itself through tmux,
/// issue #25) is recorded as answered outside and holds the lane for a person: neither the
/// agent working nor its idle input moves it on, until an operator's text goes in.
#[tokio::test(start_paused = true)]
async fn a_permission_question_answered_outside_clawpool_holds_the_lane_for_a_person() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    lane.look(&claude("19-tool_permission-120x40"));
    let held = LaneState::Blocked(BlockedSubphase::ToolPermission);
    assert_eq!(lane.state(), held);
    assert!(lane.answers.is_empty());
    // The dialog goes, with no answer of clawpool's: the agent carries on working.
    lane.look(&claude("06-running-120x40"));
    assert_eq!(
        lane.count("lane.dialog_answered_outside"),
        1,
        "{:?}",
        lane.kinds()
    );
    let outside = lane
        .records
        .iter()
        .find(|r| r.payload.kind() == LaneEventKind::DialogAnsweredOutside)
        .expect("recorded");
    assert_eq!(outside.payload.detail()["dialog"], "tool_permission");
    assert_eq!(outside.payload.detail()["dialog_kind"], "tool_permission");
    assert_eq!(lane.count("lane.escalated"), 1);
    assert_eq!(lane.state(), held, "{:?}", lane.kinds());
    // Idle for longer than finish-idle: still held, never finished.
    let idle = claude("08-finished-120x40");
    lane.look(&idle);
    lane.after(Settings::default().finish_idle * 2, &idle).await;
    assert_eq!(lane.state(), held, "{:?}", lane.kinds());
    assert_eq!(lane.count("lane.dialog_answered_outside"), 1);
    // A new question is not answered, even were a policy to allow it.
    lane.look(&claude("19-tool_permission-120x40"));
    assert!(lane.answers.is_empty());
    lane.look(&idle);
    assert_eq!(lane.count("lane.dialog_answered_outside"), 2);
    // An operator's text releases it: it is typed at the idle input.
    let (reply, _verdict) = VerdictReply::new();
    lane.input(Input::Operator {
        request: OperatorRequest {
            command: OperatorCommand::Send {
                text: "carry on".into(),
            },
            reply,
        },
        screen: idle.clone(),
    });
    lane.look(&idle);
    assert_eq!(
        lane.state(),
        LaneState::ReadyForPrompt,
        "{:?}",
        lane.kinds()
    );
    assert!(lane.texts_typed().contains(&"carry on".to_owned()));
}

/// An operator's own answer is not "outside": the dialog going after `clawpool answer` is
/// recorded as answered by the operator only.
#[tokio::test(start_paused = true)]
async fn a_permission_question_answered_with_clawpool_answer_is_not_outside() {
    let mut lane = Lane::claude(Some(PROMPT));
    lane.drive_to_running().await;
    let dialog = claude("19-tool_permission-120x40");
    lane.look(&dialog);
    let verdict = lane.operator(
        OperatorCommand::Answer {
            choice: "yes".into(),
        },
        &dialog,
    );
    assert!(verdict.is_done(), "{verdict:?}");
    lane.look(&claude("06-running-120x40"));
    assert_eq!(
        lane.count("lane.dialog_answered_outside"),
        0,
        "{:?}",
        lane.kinds()
    );
    assert_eq!(lane.state(), LaneState::Running);
}
