//! What an operator action will do, in words, before it is sent: the
//! confirmation dialog's text. Every action that stops work, moves it, lets
//! money be spent or reorders the queue is confirmed; acknowledging an alarm
//! is not (it changes nothing but the alarm's mark, and lands in the audit log).
//!
//! Owns the wording only. It reads the `View` for names, places and figures
//! and never decides anything: the engine may still refuse (and says why).

use super::confirm_slurm;
pub use super::confirm_slurm::Confirm;
use crate::cost::budget::{AtLimit, BudgetLevel};
use crate::domain::cluster::BillingMode;
use crate::domain::event::Action;
use crate::domain::job::Phase;
use crate::domain::units::Secs;
use crate::room::View;
use crate::room::view::JobRow;

/// Whether the action is sent only after a yes.
pub fn needs_confirmation(action: &Action) -> bool {
    !matches!(action, Action::AcknowledgeAlarm { .. })
}

fn job<'a>(view: &'a View, action: &Action) -> Option<&'a JobRow> {
    action.job().and_then(|id| view.jobs.iter().find(|j| j.id == id))
}

fn placement(job: &JobRow) -> String {
    match (&job.node, job.billing) {
        (Some(node), Some(mode)) => format!("{} GPU(s) on {node} ({})", job.gpus, mode.label()),
        _ => format!("{} GPU(s)", job.gpus),
    }
}

/// "12% of the job (last save 14:02:11, 23m ago)" or "everything since it started".
fn unsaved(job: &JobRow, view: &View) -> String {
    let share = format!("{:.1}% of the job", job.unsaved * 100.0);
    match (job.last_save, view.at) {
        (Some(at), Some(now)) => format!("{share}, computed since its last save at {} ({} ago)", at.format("%H:%M:%S"), Secs((now - at).num_seconds().max(0))),
        _ => format!("{share}, everything since it started (it has never saved)"),
    }
}

fn save_time(job: &JobRow) -> String {
    match job.save_secs {
        Some(secs) if secs.is_finite() => format!("a checkpoint (its saves take about {})", Secs(secs.round() as i64)),
        _ => "a checkpoint".to_string(),
    }
}

/// What the tenant's budget does to a job sent back to the queue (`to_spot`:
/// whether the pool it is sent to is spot, when it is sent to one), or
/// `None` when the budget lets it run as before.
fn budget_wait(job: &JobRow, view: &View, to_spot: Option<bool>) -> Option<String> {
    let b = view.budgets.iter().find(|b| b.tenant == job.tenant)?;
    let who = &job.tenant;
    match b.level {
        BudgetLevel::Blocked => Some(format!(
            "{who} is past {} of its {} budget: it will NOT run again until an operator approves an overrun (budget pane, a).",
            b.block_at, b.budget
        )),
        BudgetLevel::Limited => Some(match (b.at_limit, to_spot) {
            (AtLimit::Queue, _) => format!("{who} is over its {} budget: it will wait in the queue for an approved overrun (or the new month).", b.budget),
            (AtLimit::Spot, Some(false)) => {
                format!("{who} is over its {} budget: only spot may run its work, so in this pool it waits for an approval.", b.budget)
            }
            (AtLimit::Spot, _) => format!("{who} is over its {} budget: it may run again on spot capacity only.", b.budget),
        }),
        BudgetLevel::Ok | BudgetLevel::Notify => None,
    }
}

pub fn describe(action: Action, view: &View) -> Confirm {
    let title_job = |verb: &str| match job(view, &action) {
        Some(j) => format!("{verb} {} {} ({})?", j.id, j.name, j.tenant),
        None => format!("{verb} {}?", action.job().map(|j| j.to_string()).unwrap_or_default()),
    };
    let mut c = Confirm { action: action.clone(), title: String::new(), lines: Vec::new(), warning: None, yes: "yes" };
    match &action {
        Action::Preempt { .. } => {
            c.title = title_job("Preempt");
            c.yes = "preempt";
            if let Some(j) = job(view, &action) {
                c.lines.push(format!("1. It writes {}, at {:.0}% done.", save_time(j), j.progress * 100.0));
                c.lines.push(format!("2. Then it stops and frees {}.", placement(j)));
                c.lines.push("3. It goes back to the queue and resumes from that checkpoint when placed.".into());
                c.lines.extend(budget_wait(j, view, None));
                c.lines.push(format!("Nothing computed is lost; it has cost {} so far.", j.cost));
                if j.phase == Phase::Queued {
                    c.warning = Some("It is queued, not running: the engine will refuse this.".into());
                }
            }
        }
        Action::Requeue { .. } => {
            c.title = title_job("Requeue");
            c.yes = "requeue";
            if let Some(j) = job(view, &action) {
                c.lines.push(format!("1. It stops now, WITHOUT saving, and frees {}.", placement(j)));
                c.lines.push("2. It goes back to the queue and restarts from its last checkpoint.".into());
                c.lines.extend(budget_wait(j, view, None));
                c.warning = Some(format!("Lost: {}.", unsaved(j, view)));
            }
        }
        Action::Cancel { .. } => {
            c.title = title_job("Cancel");
            c.yes = "cancel the job";
            if let Some(j) = job(view, &action) {
                if j.phase == Phase::Queued {
                    c.lines.push("It leaves the queue for good and never runs.".into());
                } else {
                    c.lines.push(format!("It stops now, without saving, frees {} and is NOT queued again.", placement(j)));
                }
                c.warning = Some(format!("This cannot be undone; resubmitting starts it again. It has cost {} so far.", j.cost));
            }
        }
        Action::Migrate { to, .. } => {
            c.title = title_job("Migrate");
            c.yes = "migrate";
            let pool = view.pools.iter().find(|p| &p.target == to);
            if let Some(j) = job(view, &action) {
                if j.phase == Phase::Queued {
                    c.lines.push(format!("It stays queued and will be placed only in {to}."));
                } else {
                    c.lines.push(format!("1. It writes {} and stops, freeing {}.", save_time(j), placement(j)));
                    c.lines.push(format!("2. It waits in the queue for room in {to}, and only there."));
                    c.lines.push("3. It resumes from that checkpoint on the new node.".into());
                }
                c.lines.extend(budget_wait(j, view, pool.map(|p| p.target.billing == BillingMode::Spot)));
                if let Some(p) = pool {
                    let price = p.price.map(|x| format!(", {x} per node")).unwrap_or_default();
                    c.lines.push(format!(
                        "{to}: {} of {} node(s) up, {} GPU(s) free (at most {} on one node){price}.",
                        p.nodes_up, p.nodes_total, p.gpus_free, p.gpus_free_one_node
                    ));
                    if !p.fits(u32::from(j.gpus)) {
                        c.warning = Some(format!(
                            "It needs {} GPUs on one node and that pool has {} free on any node now: it will wait there.",
                            j.gpus, p.gpus_free_one_node
                        ));
                    }
                }
            }
        }
        Action::SetDiscipline { discipline } => {
            let name = discipline.discipline().name();
            c.title = format!("Switch the queue discipline from {} to {name}?", view.discipline);
            c.yes = "switch";
            c.lines.push(format!("The {} queued job(s) are ordered by {name} from the next scheduling pass.", view.queue.depth));
            c.lines.push("No running job is stopped by the switch itself.".into());
        }
        Action::ApproveOverrun { tenant, reason, amount, until } => {
            c.title = format!("Approve a budget overrun for {}?", tenant.0);
            c.yes = "approve";
            let row = view.budgets.iter().find(|b| b.tenant == tenant.0);
            if let Some(b) = row {
                c.lines.push(format!("{} has spent {} of {} this month ({}).", b.tenant, b.month_to_date, b.budget, b.level.label()));
            }
            match (amount, until) {
                (Some(a), Some(u)) => c.lines.push(format!("It may spend up to {a} past its hard limit, until {} UTC.", u.format("%Y-%m-%d %H:%M"))),
                (Some(a), None) => c.lines.push(format!("It may spend up to {a} past its hard limit, for the rest of the month.")),
                (None, Some(u)) => c.lines.push(format!("It may spend past its hard limit until {} UTC, with no amount cap.", u.format("%Y-%m-%d %H:%M"))),
                (None, None) => c.warning = Some("Neither an amount nor an expiry: the engine will refuse this.".into()),
            }
            c.lines.push("Its stopped jobs may be placed again; the approval is in the audit log under your name.".into());
            c.lines.push(format!("Reason: {reason}"));
        }
        Action::Slurm { job, verb } => confirm_slurm::describe(*job, verb, view, &mut c),
        Action::ApproveCapacity { proposal } => {
            c.yes = "approve";
            match view.capacity.as_ref().and_then(|cap| cap.proposals.iter().find(|p| p.id == *proposal)) {
                Some(p) => {
                    c.title = format!("Approve capacity proposal #{proposal}?");
                    c.lines.push(format!("It will {}.", p.text));
                    c.lines.push(format!(
                        "Proposed at {} UTC by the elastic-capacity policy; the approval is in the audit log under your name.",
                        p.since.format("%H:%M:%S")
                    ));
                    if p.text.starts_with("launch") {
                        c.lines.push("The instances are billed from their launch, booting included.".into());
                    }
                }
                None => {
                    c.title = format!("Approve capacity proposal #{proposal}?");
                    c.warning = Some("No such proposal stands now (the plan may have changed): the engine will refuse it.".into());
                }
            }
        }
        Action::AcknowledgeAlarm { id } => {
            c.title = "Acknowledge the alarm?".into();
            c.yes = "acknowledge";
            if let Some(a) = view.alarms.iter().find(|a| &a.id == id) {
                c.lines.push(a.text.clone());
                if let Some(cleared) = a.cleared_at {
                    c.title = "Mark the cleared alarm read?".into();
                    c.lines.push(format!(
                        "It fired at {} and cleared at {}; acknowledged, it leaves the list.",
                        crate::tui::fmt::time_of_day(a.raised_at),
                        crate::tui::fmt::time_of_day(cleared)
                    ));
                }
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::TenantId;
    use crate::domain::units::Micros;
    use crate::tui::fixture::demo_view;

    #[test]
    fn preempt_and_requeue_say_what_is_saved_and_what_is_lost() {
        let view = demo_view();
        let running = view.jobs.iter().find(|j| j.phase == Phase::Running).unwrap();
        let c = describe(Action::Preempt { job: running.id }, &view);
        assert!(c.title.contains(&running.name), "{c:?}");
        assert!(c.lines.iter().any(|l| l.contains("checkpoint")) && c.lines.iter().any(|l| l.contains("frees")));
        assert!(c.warning.is_none());
        let c = describe(Action::Requeue { job: running.id }, &view);
        assert!(c.lines[0].contains("WITHOUT saving"));
        assert!(c.warning.as_deref().unwrap().starts_with("Lost: "), "{c:?}");
        let queued = view.jobs.iter().find(|j| j.phase == Phase::Queued).unwrap();
        assert!(describe(Action::Preempt { job: queued.id }, &view).warning.is_some(), "a queued job cannot be preempted");
    }

    #[test]
    fn requeue_and_migrate_say_that_an_over_budget_job_waits_for_an_approval() {
        let mut view = demo_view();
        let running = view.jobs.iter().find(|j| j.phase == Phase::Running).unwrap().clone();
        let row = view.budgets.iter_mut().find(|b| b.tenant == running.tenant).unwrap();
        row.level = BudgetLevel::Ok;
        let calm = describe(Action::Requeue { job: running.id }, &view);
        assert!(!calm.lines.iter().any(|l| l.contains("budget")), "{calm:?}");
        for (level, at_limit, needle) in [
            (BudgetLevel::Blocked, AtLimit::Queue, "will NOT run again until an operator approves"),
            (BudgetLevel::Limited, AtLimit::Queue, "wait in the queue for an approved overrun"),
            (BudgetLevel::Limited, AtLimit::Spot, "on spot capacity only"),
        ] {
            let row = view.budgets.iter_mut().find(|b| b.tenant == running.tenant).unwrap();
            (row.level, row.at_limit) = (level, at_limit);
            let c = describe(Action::Requeue { job: running.id }, &view);
            assert!(c.lines.iter().any(|l| l.contains(needle)), "{level:?}: {c:?}");
        }
        let stable = view.pools.iter().find(|p| p.target.billing != BillingMode::Spot).unwrap().target.clone();
        let c = describe(Action::Migrate { job: running.id, to: stable }, &view);
        assert!(c.lines.iter().any(|l| l.contains("only spot may run its work")), "{c:?}");
    }

    #[test]
    fn migrate_names_the_pool_and_warns_when_it_has_no_room() {
        let view = demo_view();
        let big = view.jobs.iter().find(|j| j.phase == Phase::Running && j.gpus == 8).unwrap();
        let small_pool = view.pools.iter().find(|p| p.gpus_free_one_node < 8).unwrap();
        let c = describe(Action::Migrate { job: big.id, to: small_pool.target.clone() }, &view);
        assert!(c.lines.iter().any(|l| l.contains(&small_pool.target.to_string())));
        assert!(c.warning.as_deref().unwrap().contains("will wait"), "{c:?}");
    }

    #[test]
    fn an_approval_without_amount_or_expiry_is_flagged_before_sending() {
        let view = demo_view();
        let tenant = TenantId(view.budgets[0].tenant.clone());
        let c = describe(Action::ApproveOverrun { tenant: tenant.clone(), reason: "deadline".into(), amount: None, until: None }, &view);
        assert!(c.warning.is_some());
        let c = describe(Action::ApproveOverrun { tenant, reason: "deadline".into(), amount: Some(Micros(50_000_000)), until: None }, &view);
        assert!(c.warning.is_none() && c.lines.iter().any(|l| l.contains("$50.00")) && c.lines.iter().any(|l| l.contains("Reason: deadline")));
        assert!(!needs_confirmation(&Action::AcknowledgeAlarm { id: "x".into() }));
    }
}
