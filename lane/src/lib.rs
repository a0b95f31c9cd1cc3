//! The lane engine: one lane's life, from its agent's start to its close-out.
//!
//! # Theory of operation
//!
//! A lane is one agent in one folder (usually a git worktree made for it), in one terminal.
//! [`drive::drive`] owns it from the moment its worker starts until the lane is finished or
//! failed (or the supervisor is interrupted); `clawpool run` calls it for one folder, `clawpool
//! spawn` and the daemon once per lane of a packet, and `clawpool adopt` for a worker a dead
//! supervisor left behind ([`drive::Start::Adopt`]).
//!
//! ## The decisions: a state machine without I/O
//!
//! [`handshake::machine::Machine`] decides everything about the worker: it takes one typed
//! [`handshake::machine::Input`] at a time, with the time it is handled at — a look at the
//! screen (with the latest off-screen progress), the worker's exit, an operator's command,
//! the supervisor's interrupt, or the result of an effect it asked for — and returns typed
//! [`handshake::machine::Effect`]s: text or keys to send, a dialog to answer, an event to
//! record, a verdict to reply, the worker to stop, the trust store to guard or confine, the
//! task file to write, the worktree's git operation to look up, a tool-permission question to
//! put to the lane's [`permission_gate`] (whose verdict comes back as an input). It also says
//! when it next needs to look if nothing happens
//! ([`handshake::machine::Machine::next_deadline`]). Every
//! timing rule (boot timeout, finish-idle, provider block, submit retries, unknown screen,
//! stall, recovery check) is a comparison against the time passed in, so each is tested on
//! paused tokio time (`handshake/machine/tests.rs`) against real agents' recorded screens.
//!
//! ## The effects: a thin driver
//!
//! [`handshake::Handshake::run`] is the machine's driver for one run of the handshake. It
//! waits, in one `select!`, for: the screen changing (a `watch` channel fed by the worker's
//! transport, coalesced to at most one wake-up per 10 ms), the worker's exit, an operator's
//! command (an `mpsc` channel from the control socket), the supervisor's interrupt, the
//! lane's cost changing (a `watch` channel of the lane's state recorder, which prices each
//! usage event as it is recorded: the budget is checked as usage arrives, mid-turn), and the
//! machine's deadline. Each wake-up becomes one input; the effects are carried out in the
//! order given.
//!
//! Around it, [`drive::drive`] runs the lane in three calls: it opens the lane (lock, state
//! file, event log, watches, the agent's channel, control socket, worker), runs it — the
//! handshake, then [`recovering::Recovery`] (the recovery policy of `clawpool-recovery` applied
//! to the lane's facts, its recipe carried out step by step: keys, waits, restarts with backoff
//! or the profile's resume arguments, progress checks, escalation), starting the handshake
//! again on the same or a new worker as the recipe needs — and closes it: the worker stopped,
//! then the finishing stage (merge-forward, verification and close-out as the policy says,
//! [`checks::LaneChecks`]) and the last write.
//!
//! ## Tasks and channels per lane
//!
//! - the worker's transport (`clawpool-pty`: a PTY reader and exit task, or the tmux
//!   server's one control client) feeding the screen model;
//! - the handshake (above), in the lane's own task;
//! - the control socket listener ([`control::listen`]): operator commands to the handshake
//!   (each with a one-shot reply for its verdict), merge-forward and verify to
//!   [`checks::LaneChecks::serve`], screen requests answered from the worker's screen model;
//! - the lane's subscription to its repository's watcher ([`worktree_watch::LaneWatch`]:
//!   one inotify instance per repository in the process, shared by its lanes): a file
//!   changed in the worktree counts as progress, and a move of the lane's HEAD, branch or
//!   base ref wakes the two tasks below;
//! - the freshness watch ([`checks::LaneChecks::watch`]): the branch against its base at
//!   start, on each move, and every `freshness_check_secs`;
//! - the commit watch (one `lane.commit.created` per new commit, counted as progress): at
//!   start, on each move, and in a 60 s safety sweep — nothing polls HEAD while nothing
//!   happens;
//! - no heartbeat: the driver holds the lane's supervisor lock (`supervisor.lock` in its
//!   record folder, outside the worktree) for the lane's life, which readers and `gc` probe;
//!   nothing is rewritten while nothing happens;
//! - hooks ([`hooks`]): the policy's `run` hooks for each event, in their own tasks, bounded;
//! - the agent's hook channel ([`channel`]), for agents that report facts about themselves
//!   (Claude Code's hooks): reports arrive on the control socket with the lane's token, failed
//!   deliveries through a watched file, both into the handshake's channel as typed inputs;
//!   for Codex, the lane's own app server ([`app_server`]), whose protocol messages a task
//!   reading the lane's connection to it turns into typed inputs on the same channel.
//!
//! ## What is guaranteed
//!
//! - **One writer.** Every change of the lane's state is an event appended to its event log
//!   (`events.jsonl`, numbered) by [`clawpool_lanes::EventLog`]; the log's observer applies
//!   it to the state document before `record` returns, and hands the document to the lane's
//!   writer, which rewrites the lane's record (`state.json` in its record folder) and its
//!   publication `.claw/worker-state.json` atomically on a thread of its own
//!   ([`lane_state::StateRecorder`]): a write never holds the runtime's threads. The record
//!   never shows a state whose event is not in the log; it may be behind the log by the
//!   write in flight, never once the lane has ended (its close waits for the last write,
//!   before its supervisor lock goes), and a crash leaves the last complete file. The
//!   publication is put back whenever anyone else changes it.
//! - **Order.** Inputs reach the machine one at a time. An effect whose result matters is
//!   completed and its result fed back before any other input is handled; text that only
//!   makes sense once a write succeeded (the Enter after a prompt) is carried out only then.
//! - **Nothing typed blindly.** Text is sent only into an input line the profile reads as
//!   idle, or as a dialog's answer the lane's policy allows; nothing at all is typed into a
//!   lane whose folder nobody trusted.
//! - **Every operator command gets one verdict** (`done`, `ignored`, `refused`, `failed`),
//!   from the machine or, for a restart, from the driver.
//! - **Bounded.** Every wait has a deadline from the lane's settings; a lane always ends
//!   `finished` or `failed`, or stays `blocked` with an escalation naming the next action.
//!
//! - **One owner of the lane's state at a time.** During a run, the machine; between runs,
//!   recovery (the last run's state, moved only by an escalation that blocks); once no worker
//!   is driven, the finishing stage, which hands each check the state it may move and takes
//!   back where it leads ([`checks::LaneChecks::verify`], `owned`). None of them reads the
//!   state back from the state file. An interrupt (SIGINT, SIGTERM) is an input like any
//!   other: during a run the machine fails the lane with the signal as evidence
//!   ([`handshake::machine::Input::Interrupted`]); between runs the driver records the same
//!   failure from recovery's state ([`handshake::machine::interrupted`]).
//!
//! ## Recovery's decisions: a second core without I/O
//!
//! Between runs and in the finishing stage, [`recovering::Recovery`] decides: given how a run
//! ended ([`recovering::RunEnd`]), how a step went, or the state the finishing stage holds —
//! each with the time and the lane's facts as the driver read them (green level, freshness,
//! times: [`facts::lane_facts`]) — it returns the next step ([`recovering::Plan`]: a key,
//! Enter again, a wait, a restart with its request, a merge-forward, the worker stopped, the
//! next run of the handshake with what it carries on from, or the lane's end in its state;
//! [`recovering::Finishing`]) and [`recovering::Effect`]s (an escalation, ledger, prompt or
//! close-out event to record, the ledger to save, a `notify` hook to run), which the driver
//! carries out in order (`drive/recovery_effects.rs`). What the lane cannot do (a key for a
//! lane nobody trusted, a resume its profile has no arguments for, a merge without a branch)
//! recovery refuses itself, failing the step. What recovery owns it puts over the facts it is given: the
//! lane's state as the last run and its escalations left it, and its ledger. Its rules
//! (limits, restart backoff and intensity, escalation, `notify` once per situation, each
//! finishing action once) are tested with no process and no clock (`recovering/tests.rs`).
//!
//! What is not yet in the machine: recovery is a core of its own beside it, not inputs and
//! effects of the handshake's machine; the finishing stage's checks ([`checks`]) do their
//! git and verification work themselves.

pub mod app_server;
pub mod caller;
pub mod channel;
pub mod checks;
pub mod control;
pub mod drive;
pub mod error;
pub mod facts;
pub mod finishing;
pub mod handshake;
pub mod hooks;
pub mod interrupt;
pub mod lane_state;
pub mod permission_gate;
pub mod recovering;
pub mod registry;
pub mod sandbox;
pub mod verify;
pub mod worktree_watch;
