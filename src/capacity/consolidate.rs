//! Consolidation: move a small job off a node so the node can be given back.
//!
//! The move is a checkpoint, a stop and a restart elsewhere: the job's GPUs
//! pay for the save and the restart twice over (the node keeps running
//! while the job saves, the target's GPUs wait while it restores), and the
//! job loses nothing it saved. The node, given back, stops costing its
//! hourly price for as long as the job would otherwise have kept it.
//! Proposed only when the saving clearly beats the cost.

/// What a move would save and cost.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct MoveCase {
    /// The node to give back, per hour.
    pub node_per_hour: f64,
    /// How long the job would keep the node (its predicted remaining time,
    /// capped: predictions far out are the least sure).
    pub remaining_hours: f64,
    /// Save plus restore and restart, seconds.
    pub move_secs: f64,
    /// What the job's GPUs cost an hour where it goes.
    pub target_per_hour: f64,
}

/// How much more the saving must be than the cost: a move disturbs a
/// running job, so a marginal gain is not worth it.
pub const MARGIN: f64 = 2.0;

/// The saving and the cost of a move, currency.
pub fn saving_and_cost(case: &MoveCase) -> (f64, f64) {
    let hours = case.move_secs.max(0.0) / 3600.0;
    let saving = case.node_per_hour.max(0.0) * case.remaining_hours.clamp(0.0, 24.0);
    let cost = hours * (case.node_per_hour.max(0.0) + case.target_per_hour.max(0.0));
    (saving, cost)
}

/// Whether the move is worth making.
pub fn worth_moving(case: &MoveCase) -> bool {
    let (saving, cost) = saving_and_cost(case);
    saving.is_finite() && cost.is_finite() && saving > MARGIN * cost
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_job_alone_on_a_big_node_is_worth_moving_a_nearly_done_one_is_not() {
        let long = MoveCase { node_per_hour: 24.48, remaining_hours: 3.0, move_secs: 120.0, target_per_hour: 3.06 };
        assert!(worth_moving(&long));
        let (saving, cost) = saving_and_cost(&long);
        assert!((saving - 73.44).abs() < 1e-9 && (cost - 120.0 / 3600.0 * 27.54).abs() < 1e-9);
        let nearly_done = MoveCase { remaining_hours: 0.02, ..long };
        assert!(!worth_moving(&nearly_done));
        let nan = MoveCase { remaining_hours: f64::NAN, ..long };
        assert!(!worth_moving(&nan), "an unknown remaining time moves nothing");
    }
}
