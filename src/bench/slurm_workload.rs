//! The job set of `gpuroom bench slurm`: sizes and durations drawn from the
//! Philly trace (the embedded Pollux copy), compressed to tens of seconds,
//! for three accounts that arrive one after the other (a floods the queue
//! first, b and c come later: where FIFO and DRF part), a quarter of them
//! unable to checkpoint; and the batch script every job runs.
//!
//! Owns the draw and the script; submits nothing.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::sim::data::PHILLY_JOBS;
use crate::sources::philly;

/// One job of the set.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchJob {
    pub name: String,
    pub account: String,
    pub gpus: u32,
    /// Seconds of work (one unit of progress a second).
    pub work_secs: u32,
    /// False: `--comment=ckpt=no`; it never saves and restarts from zero.
    pub checkpointable: bool,
    /// Seconds after the run starts at which it is submitted.
    pub submit_at: f64,
}

/// The accounts, their part of the set and when they arrive (seconds).
const ACCOUNTS: [(&str, f64, (f64, f64)); 3] = [("a", 0.5, (0.0, 8.0)), ("b", 0.3, (6.0, 24.0)), ("c", 0.2, (18.0, 36.0))];

/// Philly's durations (seconds) map log-linearly onto the bench's.
const TRACE_SPAN: (f64, f64) = (60.0, 3.0 * 86_400.0);

/// `count` jobs drawn with `seed`; `quick` shortens every job (a smoke run).
pub fn draw(seed: u64, count: usize, quick: bool) -> anyhow::Result<Vec<BenchJob>> {
    let trace = philly::parse(PHILLY_JOBS.0, PHILLY_JOBS.1)?;
    // One node holds a job: Philly's 1-, 2- and 4-GPU jobs (most of the trace).
    let pool: Vec<_> = trace.iter().filter(|j| matches!(j.gpus, 1 | 2 | 4) && j.duration.0 > 0).collect();
    anyhow::ensure!(!pool.is_empty(), "the Philly trace has no 1-, 2- or 4-GPU job");
    let (short, long) = if quick { (8.0, 30.0) } else { (20.0, 120.0) };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut jobs = Vec::with_capacity(count);
    let mut counts = [0_usize; 3];
    for i in 0..count {
        // Accounts in proportion, interleaved so that a short set still has all three.
        let k = (0..3).min_by(|x, y| (counts[*x] as f64 / ACCOUNTS[*x].1).total_cmp(&(counts[*y] as f64 / ACCOUNTS[*y].1))).unwrap_or(0);
        counts[k] += 1;
        let (account, _, (from, to)) = ACCOUNTS[k];
        let sample = pool[rng.random_range(0..pool.len())];
        let span = (sample.duration.0 as f64).clamp(TRACE_SPAN.0, TRACE_SPAN.1);
        let x = (span.ln() - TRACE_SPAN.0.ln()) / (TRACE_SPAN.1.ln() - TRACE_SPAN.0.ln());
        let work = (short + x * (long - short)).round() as u32;
        let checkpointable = rng.random_range(0..4) != 0;
        let submit_at = if quick { from / 4.0 } else { rng.random_range(from..to) };
        jobs.push(BenchJob { name: format!("bench-{account}-{i:02}"), account: account.into(), gpus: sample.gpus, work_secs: work, checkpointable, submit_at });
    }
    jobs.sort_by(|x, y| x.submit_at.total_cmp(&y.submit_at));
    Ok(jobs)
}

/// The batch script: `WORK EVERY CKPT` (seconds of work, its own checkpoint
/// period, `yes`/`no`). It works in its directory one second at a time
/// (`progress`), saves to `ckpt` every EVERY seconds and on SIGUSR1 (and
/// says so in its comment, `saved=EPOCH`: the room's acknowledgement), and
/// on a restart after an interruption adds the work it lost to `lost`.
pub const SCRIPT: &str = r#"#!/bin/bash
# gpuroom bench slurm: one job of the set (src/bench/slurm_workload.rs).
work=$1; every=$2; ckpt=$3
saved=0; [ -f ckpt ] && saved=$(cat ckpt)
if [ -f progress ]; then
    lost=$(( $(cat progress) - saved ))
    [ "$lost" -gt 0 ] && echo "$lost" >> lost
fi
p=$saved; echo "$p" > progress
save() {
    [ "$ckpt" = yes ] || return 0
    echo "$p" > ckpt; saved=$p
    scontrol update JobId="$SLURM_JOB_ID" Comment="saved=$(date +%s)" >/dev/null 2>&1
}
trap save USR1
while [ "$p" -lt "$work" ]; do
    sleep 1 & s=$!
    # A signal ends `wait` early: wait again until the second is over.
    while kill -0 "$s" 2>/dev/null; do wait "$s"; done
    p=$((p + 1)); echo "$p" > progress
    if [ "$every" -gt 0 ] && [ $((p % every)) -eq 0 ]; then save; fi
done
echo done > finished
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_is_drawn_from_philly_the_same_for_a_seed_and_every_account_is_in_it() {
        let jobs = draw(7, 24, false).unwrap();
        assert_eq!(jobs, draw(7, 24, false).unwrap());
        assert_eq!(jobs.len(), 24);
        for account in ["a", "b", "c"] {
            assert!(jobs.iter().any(|j| j.account == account), "{account} has jobs");
        }
        assert_eq!(jobs.iter().filter(|j| j.account == "a").count(), 12);
        assert!(jobs.iter().all(|j| matches!(j.gpus, 1 | 2 | 4) && (20..=120).contains(&j.work_secs)), "{jobs:#?}");
        assert!(jobs.iter().any(|j| !j.checkpointable) && jobs.iter().any(|j| j.checkpointable));
        assert!(jobs.windows(2).all(|w| w[0].submit_at <= w[1].submit_at));
        // a floods first: its jobs all arrive before c's.
        let last_a = jobs.iter().filter(|j| j.account == "a").map(|j| j.submit_at).fold(0.0, f64::max);
        let first_c = jobs.iter().filter(|j| j.account == "c").map(|j| j.submit_at).fold(f64::INFINITY, f64::min);
        assert!(last_a < first_c);
    }
}
