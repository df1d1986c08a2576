//! What a Slurm site's what-if says beside its table: each account's mean
//! wait, recorded and per re-run, and how far the re-run under Slurm's own
//! defaults lands from what Slurm did (the model's error). Watches re-runs'
//! effects and formats; reads no log and runs nothing.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::Site;
use crate::domain::event::{Effect, Event};
use crate::domain::ids::JobId;
use crate::domain::units::{At, Micros, Secs};
use crate::whatif::outcome::{Outcome, Window};
use crate::whatif::table::Comparison;

/// Each account's queue waits (seconds) of jobs first placed in a window:
/// what a re-run's room did, watched as the `Scorer` watches it.
#[derive(Debug, Default)]
pub struct AccountWaits {
    window: Window,
    submitted: HashMap<JobId, (At, String)>,
    placed: HashSet<JobId>,
    pub waits: BTreeMap<String, Vec<i64>>,
}

impl AccountWaits {
    pub fn new(window: Window) -> AccountWaits {
        AccountWaits { window, ..AccountWaits::default() }
    }

    pub fn observe(&mut self, at: At, event: &Event, effects: &[Effect]) {
        for spec in event.submitted() {
            self.submitted.entry(spec.id).or_insert((at, spec.tags.tenant.0.clone()));
        }
        for effect in effects {
            if let Effect::StartJob { job, .. } = effect
                && self.placed.insert(*job)
                && self.window.holds(at)
                && let Some((submitted, account)) = self.submitted.get(job)
            {
                self.waits.entry(account.clone()).or_default().push((at - *submitted).num_seconds());
            }
        }
    }
}

impl Site {
    /// Keeps a re-run's waits by account for the notes.
    pub fn keep_waits(&self, name: &str, waits: AccountWaits) {
        if let Ok(mut kept) = self.rerun_waits.lock() {
            kept.insert(name.to_string(), waits.waits);
        }
    }

    /// Mean queue wait by account, what Slurm did beside each re-run (the
    /// eight accounts with the most jobs placed).
    pub fn waits_note(&self, columns: &[String]) -> Option<String> {
        let kept = self.rerun_waits.lock().ok()?;
        let mean = |w: Option<&Vec<i64>>| w.filter(|w| !w.is_empty()).map_or("-".into(), |w| Secs(w.iter().sum::<i64>() / w.len() as i64).to_string());
        let mut accounts: Vec<(&String, usize)> = self.slurm_waits.iter().map(|(a, w)| (a, w.len())).collect();
        accounts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let shown = accounts.iter().take(8).map(|(account, _)| {
            let rerun = columns.iter().map(|c| mean(kept.get(c).and_then(|w| w.get(*account))));
            format!("{account} {}", std::iter::once(mean(self.slurm_waits.get(*account))).chain(rerun).collect::<Vec<_>>().join(" · "))
        });
        let shown: Vec<String> = shown.collect();
        let more = if accounts.len() > 8 { format!("; and {} more accounts", accounts.len() - 8) } else { String::new() };
        (!shown.is_empty()).then(|| format!("mean queue wait by account (recorded · {}): {}{more}", columns.join(" · "), shown.join("; ")))
    }
}

/// How far the re-run closest to Slurm's defaults lands from what Slurm did.
pub fn model_error_note(slurm: &Outcome, model: &Outcome) -> String {
    let change = |a: f64, b: f64| Comparison::change(Some(a), Some(b)).unwrap_or_else(|| "-".into());
    let sign = |less: bool| if less { "-" } else { "+" };
    let secs = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{}{} ({})", sign(b < a), Secs((b - a).abs().round() as i64), change(a, b)),
        _ => "- (no figure on one side)".to_string(),
    };
    let (a, b) = (slurm.spend(), model.spend());
    let money = format!("{}{} ({})", sign(b < a), Micros((b.0 - a.0).abs()), change(a.as_f64(), b.as_f64()));
    format!(
        "model error against what Slurm did (the site re-run under FIFO, first fit and backfill, Slurm's defaults): mean wait {}, P95 wait {}, \
         mean JCT {}, instance spend {money}; differences of that size between columns are the model's, not the policies'",
        secs(slurm.mean_wait_secs(), model.mean_wait_secs()),
        secs(slurm.p95_wait_secs().map(|s| s as f64), model.p95_wait_secs().map(|s| s as f64)),
        secs(slurm.mean_jct_secs(), model.mean_jct_secs()),
    )
}
