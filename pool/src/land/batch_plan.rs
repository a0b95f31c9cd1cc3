//! The decisions of the batched merge queue (`clawpool land --batch N`), bors-style, with no
//! I/O: which lanes are tried together next, and what a candidate's result means for them.
//!
//! Lanes are taken in the order given, up to `N` at a time. The driver builds a candidate of
//! the base as it stands and the batch's lanes merged together, telling the plan of each lane
//! that cannot be merged ([`BatchPlan::conflicts`]: with the base alone it is left out, with an
//! earlier lane of the batch it is put back to be the first of a later batch), then verifies
//! the candidate and reports the result ([`BatchPlan::verified`]). A green candidate lands
//! every lane in it at once; a red (or hung) one is split in halves, each tried again on its
//! own on the base as it then stands (the first half first, so a green first half has landed
//! before the second is tried), until the lanes that turn it red are alone and left out. A
//! base that moved before a green candidate could be put on it is tried again from the new
//! base, up to the run's attempts. The driver carries the decisions out in the order given.

use std::collections::VecDeque;

/// What a candidate's verification came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trial {
    /// Every command passed: the candidate may become the base.
    Green,
    /// A command failed.
    Red,
    /// A command hung past its timeout.
    Hung,
    /// Green, but the base moved before the candidate could be put on it (the
    /// compare-and-swap found another commit): nothing was written.
    BaseMoved,
}

/// Why the plan left a lane out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// It conflicts with the base on its own.
    Conflict,
    /// Alone on the base, its candidate was red.
    Red,
    /// Alone on the base, its candidate hung.
    Hung,
    /// Its batch was green each time, but the base moved every time before it could land.
    BaseKeptMoving,
}

/// What the driver does with lanes after a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<L> {
    /// Put the green candidate on the base: these lanes land together.
    Land(Vec<L>),
    /// Leave this lane out, for this reason.
    LeaveOut(L, Exclusion),
    /// The batch was red: these halves are tried one after the other (nothing to do now;
    /// said so that the driver can tell).
    Split(Vec<L>, Vec<L>),
    /// The base moved under a green candidate: the batch is tried again from the new base.
    Retry(Vec<L>),
    /// The lane conflicts with an earlier lane of its batch, not with the base: it is tried
    /// later, as the first lane of a batch.
    Defer(L),
}

/// A batch being tried, and how many times it was tried on a base that then moved.
#[derive(Debug, Clone)]
struct Batch<L> {
    lanes: Vec<L>,
    tries: u32,
}

/// The plan of one batched land run (see the module's documentation).
#[derive(Debug, Clone)]
pub struct BatchPlan<L> {
    /// The most lanes in one candidate.
    size: usize,
    /// How many times one batch is tried on a base that keeps moving.
    attempts: u32,
    /// Lanes not yet in any batch, in order.
    queue: VecDeque<L>,
    /// Batches waiting (halves of a red batch, a batch to try again), next first.
    pending: VecDeque<Batch<L>>,
    /// The batch handed to the driver and not yet reported.
    current: Option<Batch<L>>,
}

impl<L: Clone + PartialEq> BatchPlan<L> {
    /// A plan for `lanes`, in that order, at most `size` (at least 1) in a candidate, a batch
    /// tried at most `attempts` (at least 1) times on a moving base.
    pub fn new(lanes: impl IntoIterator<Item = L>, size: usize, attempts: u32) -> Self {
        BatchPlan {
            size: size.max(1),
            attempts: attempts.max(1),
            queue: lanes.into_iter().collect(),
            pending: VecDeque::new(),
            current: None,
        }
    }

    /// The next batch to build a candidate of, or `None` when every lane is decided. A batch
    /// not reported on yet is handed out again.
    pub fn next_batch(&mut self) -> Option<Vec<L>> {
        if self.current.is_none() {
            self.current = self.pending.pop_front().or_else(|| {
                let n = self.size.min(self.queue.len());
                (n > 0).then(|| Batch {
                    lanes: self.queue.drain(..n).collect(),
                    tries: 0,
                })
            });
        }
        self.current.as_ref().map(|batch| batch.lanes.clone())
    }

    /// `lane` of the current batch could not be merged into the candidate: with the base
    /// alone (`with_base`) it is left out, else it is deferred to the front of the queue. It
    /// leaves the current batch either way.
    pub fn conflicts(&mut self, lane: &L, with_base: bool) -> Decision<L> {
        if let Some(batch) = &mut self.current {
            batch.lanes.retain(|l| l != lane);
        }
        if with_base {
            Decision::LeaveOut(lane.clone(), Exclusion::Conflict)
        } else {
            self.queue.push_front(lane.clone());
            Decision::Defer(lane.clone())
        }
    }

    /// The current batch's candidate (its lanes still in it) was verified with `trial`: what
    /// becomes of them. A batch left empty by conflicts needs no report (an empty candidate
    /// decides nothing).
    pub fn verified(&mut self, trial: Trial) -> Vec<Decision<L>> {
        let Some(mut batch) = self.current.take() else {
            return Vec::new();
        };
        if batch.lanes.is_empty() {
            return Vec::new();
        }
        match trial {
            Trial::Green => vec![Decision::Land(batch.lanes)],
            Trial::BaseMoved => {
                batch.tries += 1;
                if batch.tries < self.attempts {
                    let lanes = batch.lanes.clone();
                    self.pending.push_front(batch);
                    vec![Decision::Retry(lanes)]
                } else {
                    batch
                        .lanes
                        .into_iter()
                        .map(|lane| Decision::LeaveOut(lane, Exclusion::BaseKeptMoving))
                        .collect()
                }
            }
            Trial::Red | Trial::Hung if batch.lanes.len() == 1 => {
                let why = if trial == Trial::Red {
                    Exclusion::Red
                } else {
                    Exclusion::Hung
                };
                batch
                    .lanes
                    .into_iter()
                    .map(|lane| Decision::LeaveOut(lane, why))
                    .collect()
            }
            Trial::Red | Trial::Hung => {
                let second = batch.lanes.split_off(batch.lanes.len().div_ceil(2));
                let first = batch.lanes;
                self.pending.push_front(Batch {
                    lanes: second.clone(),
                    tries: 0,
                });
                self.pending.push_front(Batch {
                    lanes: first.clone(),
                    tries: 0,
                });
                vec![Decision::Split(first, second)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Runs a plan to its end against a world where the lanes in `red` turn any candidate
    /// holding them red and `conflicts(lane, earlier)` says whether a lane conflicts with the
    /// base (`earlier` empty) or with the lanes merged before it; returns the decisions and
    /// the candidates verified.
    fn run(
        lanes: &[u32],
        size: usize,
        red: &[u32],
        conflicts: impl Fn(u32, &[u32]) -> bool,
    ) -> (Vec<Decision<u32>>, Vec<Vec<u32>>) {
        let mut plan = BatchPlan::new(lanes.iter().copied(), size, 3);
        let mut decisions = Vec::new();
        let mut candidates = Vec::new();
        while let Some(batch) = plan.next_batch() {
            let mut merged: Vec<u32> = Vec::new();
            for lane in batch {
                if conflicts(lane, &[]) {
                    decisions.push(plan.conflicts(&lane, true));
                } else if conflicts(lane, &merged) {
                    decisions.push(plan.conflicts(&lane, false));
                } else {
                    merged.push(lane);
                }
            }
            let trial = if merged.iter().any(|l| red.contains(l)) {
                Trial::Red
            } else {
                Trial::Green
            };
            if !merged.is_empty() {
                candidates.push(merged);
            }
            decisions.extend(plan.verified(trial));
        }
        (decisions, candidates)
    }

    fn landed(decisions: &[Decision<u32>]) -> BTreeSet<u32> {
        decisions
            .iter()
            .flat_map(|d| match d {
                Decision::Land(lanes) => lanes.clone(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn left_out(decisions: &[Decision<u32>]) -> Vec<(u32, Exclusion)> {
        decisions
            .iter()
            .filter_map(|d| match d {
                Decision::LeaveOut(lane, why) => Some((*lane, *why)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_green_batch_lands_all_its_lanes_in_one_candidate() {
        let (decisions, candidates) = run(&[1, 2, 3, 4, 5], 4, &[], |_, _| false);
        assert_eq!(candidates, vec![vec![1, 2, 3, 4], vec![5]]);
        assert_eq!(
            decisions,
            vec![Decision::Land(vec![1, 2, 3, 4]), Decision::Land(vec![5])]
        );
    }

    #[test]
    fn a_red_batch_is_bisected_to_the_lane_that_turns_it_red() {
        let (decisions, candidates) = run(&[1, 2, 3, 4], 4, &[3], |_, _| false);
        assert_eq!(landed(&decisions), BTreeSet::from([1, 2, 4]));
        assert_eq!(left_out(&decisions), vec![(3, Exclusion::Red)]);
        // Whole, halves, then the red half's halves: the first half lands before the second
        // is tried.
        assert_eq!(
            candidates,
            vec![vec![1, 2, 3, 4], vec![1, 2], vec![3, 4], vec![3], vec![4]]
        );
    }

    #[test]
    fn two_red_lanes_in_different_halves_are_both_found() {
        let (decisions, _) = run(&[1, 2, 3, 4, 5, 6, 7, 8], 8, &[2, 7], |_, _| false);
        assert_eq!(landed(&decisions), BTreeSet::from([1, 3, 4, 5, 6, 8]));
        assert_eq!(
            left_out(&decisions),
            vec![(2, Exclusion::Red), (7, Exclusion::Red)]
        );
    }

    #[test]
    fn every_lane_is_decided_once_and_no_red_lane_lands() {
        // Every red set of a batch of 6, with batch sizes 1 to 7.
        for size in 1..=7 {
            for mask in 0u32..64 {
                let red: Vec<u32> = (0..6).filter(|i| mask & (1 << i) != 0).collect();
                let lanes: Vec<u32> = (0..6).collect();
                let (decisions, candidates) = run(&lanes, size, &red, |_, _| false);
                let landed = landed(&decisions);
                let out: BTreeSet<u32> = left_out(&decisions).iter().map(|(l, _)| *l).collect();
                assert_eq!(landed.len() + out.len(), 6, "size {size} red {red:?}");
                assert!(landed.is_disjoint(&out));
                assert_eq!(out, red.iter().copied().collect(), "size {size}");
                // Never more candidates than one per lane and per split.
                assert!(candidates.len() <= 2 * 6, "{candidates:?}");
            }
        }
    }

    #[test]
    fn a_batch_of_one_is_one_at_a_time() {
        let (decisions, candidates) = run(&[1, 2, 3], 1, &[2], |_, _| false);
        assert_eq!(candidates, vec![vec![1], vec![2], vec![3]]);
        assert_eq!(
            decisions,
            vec![
                Decision::Land(vec![1]),
                Decision::LeaveOut(2, Exclusion::Red),
                Decision::Land(vec![3])
            ]
        );
    }

    #[test]
    fn conflicts_are_taken_out_before_verification() {
        // 2 conflicts with the base; 4 with 3 (only when 3 was merged before it).
        let (decisions, candidates) = run(&[1, 2, 3, 4, 5], 5, &[], |lane, earlier| {
            lane == 2 || (lane == 4 && earlier.contains(&3))
        });
        assert_eq!(candidates, vec![vec![1, 3, 5], vec![4]]);
        assert_eq!(
            decisions,
            vec![
                Decision::LeaveOut(2, Exclusion::Conflict),
                Decision::Defer(4),
                Decision::Land(vec![1, 3, 5]),
                Decision::Land(vec![4]),
            ]
        );
    }

    #[test]
    fn a_base_that_moves_under_a_green_batch_is_retried_then_given_up() {
        let mut plan = BatchPlan::new([1, 2], 2, 2);
        assert_eq!(plan.next_batch(), Some(vec![1, 2]));
        assert_eq!(
            plan.verified(Trial::BaseMoved),
            vec![Decision::Retry(vec![1, 2])]
        );
        assert_eq!(plan.next_batch(), Some(vec![1, 2]));
        assert_eq!(
            plan.verified(Trial::BaseMoved),
            vec![
                Decision::LeaveOut(1, Exclusion::BaseKeptMoving),
                Decision::LeaveOut(2, Exclusion::BaseKeptMoving)
            ]
        );
        assert_eq!(plan.next_batch(), None);
    }

    #[test]
    fn a_hung_lane_alone_is_left_out_as_hung() {
        let mut plan = BatchPlan::new([1, 2], 2, 1);
        plan.next_batch();
        assert_eq!(
            plan.verified(Trial::Hung),
            vec![Decision::Split(vec![1], vec![2])]
        );
        assert_eq!(plan.next_batch(), Some(vec![1]));
        assert_eq!(
            plan.verified(Trial::Hung),
            vec![Decision::LeaveOut(1, Exclusion::Hung)]
        );
        assert_eq!(plan.next_batch(), Some(vec![2]));
        assert_eq!(plan.verified(Trial::Green), vec![Decision::Land(vec![2])]);
        assert_eq!(plan.next_batch(), None);
    }
}
