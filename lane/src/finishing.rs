//! Where a lane that no worker drives any more is led by its checks: the state a
//! verification's result moves it to, and the state a base that could not be brought in holds
//! it in. Rules only, without I/O: `verify` and the branch checks record the move these
//! return (the `from`/`to` of `lane.verified` and `lane.branch_blocked`), and the finishing
//! stage (`drive/finish.rs`) carries the state from one check to the next. While a worker is
//! still driven its machine owns the state, and a check moves nothing.

use clawpool_lanes::state_file::VerifyResult;
use clawpool_lanes::{BlockedSubphase, FailureClass, LaneState};

/// The state a lane whose base could not be brought in is held in.
pub const HELD: LaneState = LaneState::Blocked(BlockedSubphase::BranchFreshness);

/// The state a verification with `result` (and the failure `class` of a red) leads a lane in
/// `current` to. A green proves the work: a lane that verification had failed or held is
/// finished again; any other state stays as it is.
pub fn after_verification(
    current: LaneState,
    result: VerifyResult,
    class: Option<FailureClass>,
) -> LaneState {
    match result {
        VerifyResult::Green
            if matches!(
                current,
                LaneState::Failed(_)
                    | LaneState::Blocked(
                        BlockedSubphase::BranchFreshness | BlockedSubphase::TestHang
                    )
            ) =>
        {
            LaneState::Finished
        }
        VerifyResult::Green => current,
        VerifyResult::Red => LaneState::Failed(class.unwrap_or(FailureClass::Test)),
        VerifyResult::StaleRed | VerifyResult::Blocked => HELD,
        VerifyResult::Hung => LaneState::Blocked(BlockedSubphase::TestHang),
    }
}

/// The move a base that could not be brought in makes for a lane in `current`: to [`HELD`],
/// or none when it is held already.
pub fn after_refused_merge(current: LaneState) -> Option<(LaneState, LaneState)> {
    (current != HELD).then_some((current, HELD))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FINISHED: LaneState = LaneState::Finished;
    const RED: LaneState = LaneState::Failed(FailureClass::Test);
    const HUNG: LaneState = LaneState::Blocked(BlockedSubphase::TestHang);

    /// Every verification result from the states a finished lane's checks meet: the state it
    /// leads to.
    #[test]
    fn a_verification_leads_the_lane_by_its_result() {
        let compile = Some(FailureClass::Compile);
        let table = [
            (FINISHED, VerifyResult::Green, None, FINISHED),
            (RED, VerifyResult::Green, None, FINISHED),
            (HELD, VerifyResult::Green, None, FINISHED),
            (HUNG, VerifyResult::Green, None, FINISHED),
            (
                LaneState::Blocked(BlockedSubphase::Provider),
                VerifyResult::Green,
                None,
                LaneState::Blocked(BlockedSubphase::Provider),
            ),
            (FINISHED, VerifyResult::Red, None, RED),
            (
                FINISHED,
                VerifyResult::Red,
                compile,
                LaneState::Failed(FailureClass::Compile),
            ),
            (FINISHED, VerifyResult::StaleRed, None, HELD),
            (FINISHED, VerifyResult::Blocked, None, HELD),
            (RED, VerifyResult::Blocked, None, HELD),
            (FINISHED, VerifyResult::Hung, None, HUNG),
        ];
        for (current, result, class, expected) in table {
            assert_eq!(
                after_verification(current, result, class),
                expected,
                "{current} after {result:?}"
            );
        }
    }

    #[test]
    fn a_refused_merge_holds_the_lane_once() {
        assert_eq!(after_refused_merge(FINISHED), Some((FINISHED, HELD)));
        assert_eq!(after_refused_merge(RED), Some((RED, HELD)));
        assert_eq!(after_refused_merge(HELD), None);
    }
}
