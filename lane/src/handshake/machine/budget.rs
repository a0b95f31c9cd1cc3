//! The lane's budget, decided in the machine: the lane's cost as its agent's usage arrives
//! ([`Input::Cost`](super::Input::Cost), mid-turn), checked against its `budget_usd`
//! ([`super::super::LaneBudget`]). A cost past the budget interrupts the agent's turn with its
//! own interrupt key and holds the lane `blocked{budget}`, with an escalation saying what to
//! do; while held nothing is typed (no prompt, no recovery nudge) and the agent going idle or
//! reporting its turn's end moves the lane nowhere. An operator's text is refused while the
//! cost is past the budget; once the budget is raised (`clawpool budget`,
//! [`OperatorCommand::Budget`](super::OperatorCommand::Budget)) a text releases the hold.

use clawpool_lanes::payload::Usd;
use clawpool_lanes::payload::{BudgetSet, Escalated, Payload};
use clawpool_lanes::{BlockedSubphase, Evidence, LaneState};
use clawpool_pty::Key;

use super::{Effect, Machine, Verdict};

/// The key that interrupts the agent's turn: the recovery's interrupt
/// ([`clawpool_recovery::recipe::DEFAULT_INTERRUPT_KEY`]; Claude Code and Codex both show "esc
/// to interrupt").
const INTERRUPT: Key = Key::Esc;

/// The held lane's state.
const HELD: LaneState = LaneState::Blocked(BlockedSubphase::Budget);

impl Machine<'_> {
    /// The lane's cost is `usd` now: past its budget, the lane is held.
    pub(super) fn on_cost(&mut self, usd: f64) {
        self.cost_usd = Some(usd);
        if self.over_budget() && !self.lane.budget.held && !self.state.is_terminal() {
            self.hold_over_budget();
        }
    }

    /// Whether the lane's cost is past its budget.
    pub(super) fn over_budget(&self) -> bool {
        matches!(
            (self.cost_usd, self.lane.budget.usd),
            (Some(cost), Some(budget)) if cost > budget
        )
    }

    /// Whether the lane is held on its budget: nothing is typed into it.
    pub(super) fn held_on_budget(&self) -> bool {
        self.lane.budget.held
    }

    /// Whether a move of the lane to `to` is one its budget hold keeps it from: while held
    /// only its worker's end (an exit) or a person's stop moves it; the agent's idle screen or
    /// its report of the turn's end does not finish an interrupted turn.
    pub(super) fn budget_holds_from(&self, to: LaneState) -> bool {
        self.lane.budget.held
            && self.state == HELD
            && match to {
                LaneState::Failed(_) | LaneState::Stopped => false,
                LaneState::Finished => self.source != Some(clawpool_lanes::EventSource::Process),
                _ => true,
            }
    }

    fn hold_over_budget(&mut self) {
        let (cost, budget) = (
            Usd(self.cost_usd.unwrap_or_default()),
            Usd(self.lane.budget.usd.unwrap_or_default()),
        );
        // In a turn, or a text submitted whose turn the screen has not shown yet (an agent
        // reporting usage before its screen caught up): the turn spends; it stops first,
        // before anything is recorded.
        if self.state.in_turn() || self.receipt.submitted() {
            self.out.push(Effect::Send {
                input: clawpool_pty::Input::Key(INTERRUPT),
                on_sent: Vec::new(),
                fatal: false,
            });
        }
        self.idle_since = None;
        self.hooks.held_stop = None;
        let evidence = Evidence {
            rule: "budget".into(),
            region: "usage".into(),
            matched: format!("the lane's cost {cost} passed its budget {budget}"),
        };
        // Not recovery's: the machine keeps the lane held, and the escalation below is its
        // next action.
        let next = self.next.clone();
        self.transition(HELD, Some(evidence));
        self.next = next;
        self.lane.budget.held = true;
        let name = &self.lane.name;
        let escalated = Escalated {
            reason: format!(
                "lane {name} cost {cost}, past its budget of {budget}: its turn was interrupted"
            ),
            next_action: format!(
                "raise the budget or stop it: `clawpool budget {name} USD`, then `clawpool send \
                 {name} TEXT` to carry on; or `clawpool stop {name}`"
            ),
            recipe: None,
        };
        self.report(Payload::Escalated(escalated), None, None, None);
    }

    /// Why an operator's text is refused, when the lane's cost is past its budget.
    pub(super) fn send_over_budget(&self) -> Option<Verdict> {
        if !self.over_budget() {
            return None;
        }
        let name = &self.lane.name;
        let cost = Usd(self.cost_usd.unwrap_or_default());
        let budget = Usd(self.lane.budget.usd.unwrap_or_default());
        Some(Verdict::OverBudget {
            reason: format!(
                "over budget: lane {name} cost {cost}, past its budget of {budget}; nothing more \
                 is sent to it until the budget is raised (`clawpool budget {name} USD`)"
            ),
            cost_usd: cost,
            budget_usd: budget,
        })
    }

    /// An operator's text was taken: a person acting on a lane within its budget releases
    /// its hold.
    pub(super) fn release_budget_hold(&mut self) {
        self.lane.budget.held = false;
    }

    /// `clawpool budget`: the lane's budget is `usd` from now on.
    pub(super) fn set_budget(&mut self, usd: Usd) -> Verdict {
        let was = self.lane.budget.usd.map(Usd);
        self.lane.budget.usd = Some(usd.0);
        let cost = self.cost_usd.map(Usd);
        let set = BudgetSet {
            budget_usd: usd,
            was_usd: was,
            cost_usd: cost,
        };
        self.report(Payload::BudgetSet(set), None, None, None);
        let spent = cost.map_or_else(
            || "no cost known yet".to_owned(),
            |c| format!("cost so far {c}"),
        );
        let name = self.lane.name.clone();
        if self.over_budget() {
            if !self.lane.budget.held && !self.state.is_terminal() {
                self.hold_over_budget();
            }
            return Verdict::done(format!(
                "budget {usd} ({spent}): still past it, the lane is held blocked{{budget}}"
            ));
        }
        if self.lane.budget.held {
            return Verdict::done(format!(
                "budget {usd} ({spent}): the lane stays held until a text goes in: `clawpool \
                 send {name} TEXT`"
            ));
        }
        Verdict::done(format!("budget {usd} ({spent})"))
    }
}
