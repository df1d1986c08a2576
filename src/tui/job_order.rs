//! The job table's order and filter, as the operator chose them: `/` text
//! matched against id, name, tenant, project, model, state and node; `s`
//! cycles the sort column, `S` flips its direction. The default puts the
//! jobs that wait on top (queued and requeued, longest current wait first),
//! then the jobs in motion (saving, stopping), then the running ones by
//! ETA, then the finished; the engine's own order is one `s` away.
//!
//! Owns presentation only: which rows of `View::jobs` show and in what
//! order. It never changes the `View`.

use crate::domain::job::Phase;
use crate::room::View;
use crate::room::view::JobRow;

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    /// What needs an eye first: waiting jobs by how long they have waited
    /// so far, then jobs saving or stopping, then running ones by ETA.
    #[default]
    Attention,
    /// As the engine lists them: running by node, then the queue in order.
    Queue,
    Wait,
    Cost,
    Gpus,
    Progress,
    Eta,
    Tenant,
    Name,
}

impl SortKey {
    pub const ALL: [SortKey; 9] =
        [SortKey::Attention, SortKey::Queue, SortKey::Wait, SortKey::Cost, SortKey::Gpus, SortKey::Progress, SortKey::Eta, SortKey::Tenant, SortKey::Name];

    pub fn name(self) -> &'static str {
        match self {
            SortKey::Attention => "waiting",
            SortKey::Queue => "engine",
            SortKey::Wait => "wait",
            SortKey::Cost => "cost",
            SortKey::Gpus => "gpus",
            SortKey::Progress => "progress",
            SortKey::Eta => "eta",
            SortKey::Tenant => "tenant",
            SortKey::Name => "name",
        }
    }

    pub fn parse(word: &str) -> Option<SortKey> {
        // "queue" was the engine's order's name before the waiting-first default.
        let word = if word.eq_ignore_ascii_case("queue") { "engine" } else { word };
        SortKey::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(word))
    }

    pub fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }

    /// Figures read best largest first; names A to Z.
    pub fn descending_by_default(self) -> bool {
        matches!(self, SortKey::Wait | SortKey::Cost | SortKey::Gpus | SortKey::Progress)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobOrder {
    /// Lower-case words; a job shows if it matches every one.
    filter: Vec<String>,
    filter_text: String,
    pub sort: SortKey,
    /// Reverse of the key's natural direction.
    pub reversed: bool,
}

impl JobOrder {
    pub fn filter_text(&self) -> &str {
        &self.filter_text
    }

    pub fn set_filter(&mut self, text: &str) {
        self.filter_text = text.trim().to_string();
        self.filter = self.filter_text.split_whitespace().map(str::to_lowercase).collect();
    }

    pub fn is_default(&self) -> bool {
        self.filter.is_empty() && self.sort == SortKey::Attention && !self.reversed
    }

    fn matches(&self, job: &JobRow) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let id = job.id.to_string();
        let fields = [id.as_str(), &job.name, &job.tenant, &job.project, &job.model, &job.state, job.node.as_deref().unwrap_or("")];
        self.filter.iter().all(|word| fields.iter().any(|f| f.to_lowercase().contains(word.as_str())))
    }

    /// Indices into `view.jobs` of the rows shown, in the order shown.
    pub fn rows(&self, view: &View) -> Vec<usize> {
        let mut rows: Vec<usize> = (0..view.jobs.len()).filter(|i| self.matches(&view.jobs[*i])).collect();
        let jobs = &view.jobs;
        let key = self.sort;
        match key {
            // The engine's order as it is.
            SortKey::Queue => {}
            // Its key is worked out once per row, not twice per comparison
            // (100,000 rows are 1.7 million comparisons a frame).
            SortKey::Attention => rows.sort_by_cached_key(|i| attention(&jobs[*i])),
            _ => self.sort_by_field(&mut rows, jobs),
        }
        if key.descending_by_default() != self.reversed {
            rows.reverse();
        }
        rows
    }

    fn sort_by_field(&self, rows: &mut [usize], jobs: &[JobRow]) {
        // A stable sort keeps the engine's order among equals.
        rows.sort_by(|a, b| {
            let (x, y) = (&jobs[*a], &jobs[*b]);
            match self.sort {
                SortKey::Attention | SortKey::Queue => std::cmp::Ordering::Equal,
                // A queued job's wait is now; a running job's is history: the waiting first.
                SortKey::Wait => waiting(x).cmp(&waiting(y)).then(x.wait.cmp(&y.wait)),
                SortKey::Cost => x.cost.cmp(&y.cost),
                SortKey::Gpus => x.gpus.cmp(&y.gpus),
                SortKey::Progress => x.progress.total_cmp(&y.progress),
                // Unknown ETAs last either way.
                SortKey::Eta => x.eta.is_none().cmp(&y.eta.is_none()).then(x.eta.cmp(&y.eta)),
                SortKey::Tenant => x.tenant.cmp(&y.tenant),
                SortKey::Name => x.name.cmp(&y.name),
            }
        });
    }

    /// "sort wait ↓", for the pane title; `None` for the default order.
    pub fn sort_label(&self) -> Option<String> {
        if self.sort == SortKey::Attention && !self.reversed {
            return None;
        }
        let down = self.sort.descending_by_default() != self.reversed;
        Some(format!("sort {} {}", self.sort.name(), if down { "↓" } else { "↑" }))
    }
}

fn waiting(job: &JobRow) -> bool {
    job.phase == Phase::Queued
}

/// The default order's key, smallest first: waiting jobs longest wait
/// first, then jobs saving or stopping (something is happening to them),
/// then running ones soonest to finish first (unknown ETA after), then
/// finished ones; the id breaks ties, so `e102` never sorts before `e41`
/// as text would.
fn attention(job: &JobRow) -> (u8, std::cmp::Reverse<i64>, bool, Option<i64>, u64) {
    let rank = match job.phase {
        Phase::Queued => 0,
        Phase::Checkpointing | Phase::Preempted => 1,
        Phase::Placed | Phase::Running => 2,
        Phase::Done | Phase::Failed => 3,
    };
    let wait = if rank == 0 { job.wait.0 } else { 0 };
    let eta = if rank == 2 { job.eta.map(|e| e.0) } else { None };
    (rank, std::cmp::Reverse(wait), rank == 2 && eta.is_none(), eta, job.id.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::units::Secs;
    use crate::tui::fixture::demo_view;

    #[test]
    fn filter_matches_every_word_in_any_field() {
        let view = demo_view();
        let mut order = JobOrder::default();
        assert_eq!(order.rows(&view).len(), view.jobs.len());
        order.set_filter("NLP");
        let rows = order.rows(&view);
        assert!(!rows.is_empty() && rows.len() < view.jobs.len());
        assert!(rows.iter().all(|i| view.jobs[*i].tenant == "nlp"));
        order.set_filter("nlp queued");
        assert!(order.rows(&view).iter().all(|i| view.jobs[*i].tenant == "nlp" && view.jobs[*i].state.contains("queued")));
        order.set_filter("no-such-job");
        assert!(order.rows(&view).is_empty());
        order.set_filter("  ");
        assert!(order.is_default());
    }

    #[test]
    fn by_default_the_jobs_that_wait_are_on_top_longest_wait_first() {
        let mut view = demo_view();
        // Node names that sort wrongly as text: the order must not use them.
        for (i, job) in view.jobs.iter_mut().enumerate() {
            job.node = job.node.as_ref().map(|_| if i % 2 == 0 { "e102".to_string() } else { "e41".to_string() });
        }
        let order = JobOrder::default();
        assert_eq!(order.sort_label(), None, "the default needs no label");
        let rows: Vec<&JobRow> = order.rows(&view).into_iter().map(|i| &view.jobs[i]).collect();
        let rank = |j: &JobRow| match j.phase {
            Phase::Queued => 0,
            Phase::Checkpointing | Phase::Preempted => 1,
            Phase::Placed | Phase::Running => 2,
            Phase::Done | Phase::Failed => 3,
        };
        assert!(rows.windows(2).all(|w| rank(w[0]) <= rank(w[1])), "waiting, then in motion, then running");
        let queued: Vec<i64> = rows.iter().filter(|j| j.phase == Phase::Queued).map(|j| j.wait.0).collect();
        assert!(queued.len() >= 3 && queued.windows(2).all(|w| w[0] >= w[1]), "longest current wait first: {queued:?}");
        let etas: Vec<i64> = rows.iter().filter(|j| j.phase == Phase::Running).filter_map(|j| j.eta.map(|e| e.0)).collect();
        assert!(etas.windows(2).all(|w| w[0] <= w[1]), "running: soonest to finish first: {etas:?}");
        // Sorting by wait: a queued job's wait now before a running job's past wait.
        let mut past = view.clone();
        past.jobs.iter_mut().filter(|j| j.phase == Phase::Running).for_each(|j| j.wait = Secs(99_999));
        let by_wait = JobOrder { sort: SortKey::Wait, ..JobOrder::default() };
        let first = &past.jobs[by_wait.rows(&past)[0]];
        assert_eq!(first.phase, Phase::Queued, "{first:?}");
        assert_eq!(SortKey::parse("queue"), Some(SortKey::Queue), "the old name still works");
    }

    #[test]
    fn sorting_by_cost_puts_the_dearest_first_and_s_flips_it() {
        let view = demo_view();
        let mut order = JobOrder { sort: SortKey::Cost, ..JobOrder::default() };
        let costs: Vec<i64> = order.rows(&view).iter().map(|i| view.jobs[*i].cost.0).collect();
        assert!(costs.windows(2).all(|w| w[0] >= w[1]), "{costs:?}");
        assert_eq!(order.sort_label().as_deref(), Some("sort cost ↓"));
        order.reversed = true;
        let costs: Vec<i64> = order.rows(&view).iter().map(|i| view.jobs[*i].cost.0).collect();
        assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
        let mut by_name = JobOrder { sort: SortKey::Name, ..JobOrder::default() };
        let names: Vec<&str> = by_name.rows(&view).iter().map(|i| view.jobs[*i].name.as_str()).collect();
        assert!(names.windows(2).all(|w| w[0] <= w[1]));
        by_name.sort = by_name.sort.next();
        assert_eq!(by_name.sort, SortKey::Attention, "the cycle comes back to the default order");
        assert_eq!(SortKey::parse("ETA"), Some(SortKey::Eta));
    }
}
