//! The room's order as Slurm priorities: a band above what Slurm gives a
//! new job, numbers left apart so that a job ranked between two others takes
//! a free one, and only jobs out of place renumbered, so a new job costs a
//! command or two, not one per pending job.
//!
//! Pure arithmetic on job ids and priorities; `room::slurm_govern` sends
//! what it returns.

use std::collections::{BTreeMap, BTreeSet};

/// The room's band of Slurm priorities: above what Slurm gives a new job
/// under `priority/basic` (it counts down from 4,294,901,760), so a job the
/// room has not ranked yet never goes before one it has.
pub const BAND_TOP: u32 = 4_294_967_000;
/// Where a fresh order starts: the numbers above are for jobs that later
/// jump ahead of the whole queue.
pub const FIRST: u32 = BAND_TOP - 64 * GAP;
/// Room left between ranks, so that a job ranked between two others takes a
/// free number instead of moving every job after it.
pub const GAP: u32 = 64;

/// Priorities that make Slurm's order the room's: `order` is the room's
/// ranking, `current` the priority each job has in Slurm now. The longest run
/// of jobs already in the right relative order (within the band) keeps its
/// numbers; every other job gets a free number between its neighbours, and
/// only when there is none is the whole order renumbered. Returns the jobs
/// whose priority must change, with the new one.
pub fn priorities(order: &[u64], current: &BTreeMap<u64, u64>, floor: u32) -> BTreeMap<u64, u32> {
    let in_band = |p: u64| p > u64::from(floor) && p <= u64::from(BAND_TOP);
    let have: Vec<Option<u64>> = order.iter().map(|id| current.get(id).copied().filter(|p| in_band(*p))).collect();
    let keep = longest_decreasing(&have);
    let mut out = BTreeMap::new();
    let mut assigned: Vec<u64> = vec![0; order.len()];
    let mut i = 0;
    while i < order.len() {
        if keep.contains(&i) {
            assigned[i] = have[i].unwrap_or(0);
            i += 1;
            continue;
        }
        // A run of jobs to place between the kept neighbours.
        let start = i;
        while i < order.len() && !keep.contains(&i) {
            i += 1;
        }
        // Before the first kept job, the band's top is the limit; a fresh
        // queue starts lower, leaving room for jobs that jump ahead later.
        let above = if start == 0 { if i < order.len() { u64::from(BAND_TOP) + 1 } else { u64::from(FIRST) + u64::from(GAP) } } else { assigned[start - 1] };
        let below = if i < order.len() { have[i].unwrap_or(u64::from(floor)) } else { u64::from(floor) };
        let count = (i - start) as u64;
        if above <= below || above - below <= count {
            return renumber(order, current, floor);
        }
        let step = ((above - below) / (count + 1)).min(u64::from(GAP)).max(1);
        for (k, slot) in (start..i).enumerate() {
            let p = above - step * (k as u64 + 1);
            if p <= below {
                return renumber(order, current, floor);
            }
            assigned[slot] = p;
            out.insert(order[slot], p as u32);
        }
    }
    out
}

/// Every job a fresh number, `GAP` apart from `FIRST` down (closer when the
/// band is too narrow for that).
fn renumber(order: &[u64], current: &BTreeMap<u64, u64>, floor: u32) -> BTreeMap<u64, u32> {
    let top = if u64::from(FIRST.saturating_sub(floor)) > order.len() as u64 { FIRST } else { BAND_TOP };
    let span = u64::from(top - floor.min(top));
    let step = (span / (order.len() as u64 + 1)).clamp(1, u64::from(GAP));
    order.iter().enumerate().map(|(i, id)| (*id, (u64::from(top) - step * i as u64) as u32)).filter(|(id, p)| current.get(id) != Some(&u64::from(*p))).collect()
}

/// Positions of the longest strictly decreasing subsequence among the known
/// priorities (patience sorting, O(n log n)).
fn longest_decreasing(values: &[Option<u64>]) -> BTreeSet<usize> {
    // Decreasing in value = increasing in negated value.
    let mut tails: Vec<(i128, usize)> = Vec::new();
    let mut parent: Vec<Option<usize>> = vec![None; values.len()];
    for (i, v) in values.iter().enumerate() {
        let Some(v) = v else { continue };
        let key = -(*v as i128);
        let pos = tails.partition_point(|(k, _)| *k < key);
        parent[i] = if pos > 0 { Some(tails[pos - 1].1) } else { None };
        if pos == tails.len() {
            tails.push((key, i));
        } else {
            tails[pos] = (key, i);
        }
    }
    let mut keep = BTreeSet::new();
    let mut at = tails.last().map(|(_, i)| *i);
    while let Some(i) = at {
        keep.insert(i);
        at = parent[i];
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_move_only_the_jobs_out_of_place() {
        let top = u64::from(BAND_TOP);
        let floor = 1000;
        // A fresh queue: numbered from the top, GAP apart.
        let fresh = priorities(&[1, 2, 3], &BTreeMap::new(), floor);
        assert_eq!(fresh, BTreeMap::from([(1, FIRST), (2, FIRST - GAP), (3, FIRST - 2 * GAP)]));
        // Already in order: nothing to send.
        let current: BTreeMap<u64, u64> = fresh.iter().map(|(k, v)| (*k, u64::from(*v))).collect();
        assert!(priorities(&[1, 2, 3], &current, floor).is_empty());
        // A new job ranked second takes a number between 1 and 2; the others stay.
        let moved = priorities(&[1, 4, 2, 3], &current, floor);
        assert_eq!(moved.len(), 1);
        let p4 = moved[&4];
        assert!(p4 < FIRST && p4 > FIRST - GAP, "{p4}");
        // 3 jumps to the front: only 3 moves.
        let moved = priorities(&[3, 1, 2], &current, floor);
        assert_eq!(moved.keys().copied().collect::<Vec<_>>(), vec![3]);
        // No room left between neighbours: everything renumbered, and the result is in order.
        let tight: BTreeMap<u64, u64> = BTreeMap::from([(1, top), (2, top - 1)]);
        let moved = priorities(&[1, 5, 2], &tight, floor);
        let mut all = tight.clone();
        all.extend(moved.iter().map(|(k, v)| (*k, u64::from(*v))));
        assert!(all[&1] > all[&5] && all[&5] > all[&2], "{all:?}");
        // A priority below the floor (Slurm's own, or a job the room never ranked) is not kept.
        let low: BTreeMap<u64, u64> = BTreeMap::from([(1, 10), (2, 5)]);
        assert_eq!(priorities(&[1, 2], &low, floor).len(), 2);
    }

    #[test]
    fn priorities_keep_every_job_in_order_whatever_the_shuffle() {
        // Deterministic shuffles of a queue after earlier numbering.
        let floor = 4_294_000_000;
        let mut current: BTreeMap<u64, u64> = BTreeMap::new();
        let mut order: Vec<u64> = (1..=40).collect();
        for round in 0..30u64 {
            order.rotate_left((round % 7) as usize);
            order.swap((round * 3 % 40) as usize, (round * 11 % 40) as usize);
            if round % 4 == 0 {
                order.insert((round % 9) as usize, 100 + round);
            }
            let moved = priorities(&order, &current, floor);
            current.extend(moved.iter().map(|(k, v)| (*k, u64::from(*v))));
            let values: Vec<u64> = order.iter().map(|id| current[id]).collect();
            assert!(values.windows(2).all(|w| w[0] > w[1]), "round {round}: {values:?}");
            assert!(values.iter().all(|v| *v > u64::from(floor) && *v <= u64::from(BAND_TOP)));
        }
    }
}
