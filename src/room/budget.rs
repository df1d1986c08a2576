//! Budgets as the `Room` enforces them: each tenant's level (80% notify,
//! 100% limited, 120% blocked) after every event, the alarms and stops a
//! change of level brings, what a level allows the scheduler to place, and
//! operators' approvals of an overrun (who, why, how far), kept for audit.
//!
//! The thresholds and the approval rules live in `cost::budget`.

use crate::domain::event::{Actor, Effect};
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::StopReason;
use super::{Room, Severity};
use crate::domain::text::clean;
use crate::domain::units::{At, Micros};
use crate::cost::budget::{Approval, AtLimit, BudgetLevel, threshold};

impl Room {
    pub(crate) fn any_budget_limited(&self) -> bool {
        self.budget_limiting
    }

    pub(crate) fn budget_level(&self, tenant: &TenantId) -> BudgetLevel {
        self.budget_levels.get(tenant).copied().unwrap_or(BudgetLevel::Ok)
    }

    /// Re-derives every tenant's level; acts on the changes.
    pub(crate) fn check_budgets(&mut self, at: At, effects: &mut Vec<Effect>) {
        let policy = self.config.cost.budget.clone();
        let changes: Vec<(TenantId, BudgetLevel, BudgetLevel, Micros, Micros)> = self
            .tenants
            .iter()
            .filter_map(|(id, spec)| {
                let spent = self.books.month_to_date(id, at);
                let level = policy.level(spec.monthly_budget, spent, self.approvals.get(id), at);
                let before = self.budget_level(id);
                (level != before).then(|| (id.clone(), before, level, spent, spec.monthly_budget))
            })
            .collect();
        if changes.is_empty() {
            return;
        }
        for (tenant, before, level, spent, budget) in changes {
            self.budget_levels.insert(tenant.clone(), level);
            self.queue_dirty = true;
            let name = clean(&tenant.0);
            let alarm = format!("budget:{name}");
            let pct = if budget.0 > 0 { spent.0 as f64 * 100.0 / budget.0 as f64 } else { 0.0 };
            match level {
                BudgetLevel::Ok => {
                    self.clear(&alarm, effects);
                    self.note(at, Severity::Info, format!("{name} budget back under {}%", policy.notify_pct));
                }
                BudgetLevel::Notify => {
                    self.clear(&alarm, effects);
                    self.raise(at, alarm, format!("{name} has spent {pct:.0}% of its {budget} budget"), effects);
                }
                BudgetLevel::Limited => {
                    let what = match policy.at_limit {
                        AtLimit::Queue => "new work waits",
                        AtLimit::Spot => "new work runs on spot only",
                    };
                    self.clear(&alarm, effects);
                    self.raise(at, alarm, format!("{name} is over its {budget} budget ({pct:.0}%): {what}"), effects);
                }
                BudgetLevel::Blocked => {
                    self.clear(&alarm, effects);
                    let limit = threshold(budget, policy.block_pct);
                    self.raise(at, alarm, format!("{name} passed {}% of its budget ({limit}): stopped until an operator approves", policy.block_pct), effects);
                    let running: Vec<JobId> = self
                        .holding
                        .iter()
                        .copied()
                        .filter(|id| self.jobs.get(id).is_some_and(|j| j.spec.tags.tenant == tenant))
                        .collect();
                    for id in running {
                        self.stop_job(id, StopReason::Budget, true, effects);
                    }
                }
            }
            if level < before && before == BudgetLevel::Blocked {
                self.note(at, Severity::Info, format!("{name} may run again"));
            }
        }
        // Cached for the scheduler, which asks for every queued job.
        self.budget_limiting = self.budget_levels.values().any(|l| *l >= BudgetLevel::Limited);
    }

    /// Whether the scheduler may place this tenant's work, and where.
    pub(crate) fn budget_allows(&self, tenant: &TenantId, on_spot: bool) -> bool {
        // The common case, asked for every queued job of every pass: nobody is limited.
        if !self.any_budget_limited() {
            return true;
        }
        match self.budget_level(tenant) {
            BudgetLevel::Ok | BudgetLevel::Notify => true,
            BudgetLevel::Limited => self.config.cost.budget.at_limit == AtLimit::Spot && on_spot,
            BudgetLevel::Blocked => false,
        }
    }

    pub(crate) fn on_approve(
        &mut self,
        at: At,
        actor: &Actor,
        tenant: &TenantId,
        reason: &str,
        amount: Option<Micros>,
        until: Option<At>,
    ) -> Result<String, String> {
        let name = clean(&tenant.0);
        if !self.tenants.contains_key(tenant) {
            return Err(format!("{} asked to approve an overrun of unknown tenant {name:?}", clean(&actor.user)));
        }
        let approval = Approval { user: actor.user.clone(), origin: actor.origin.clone(), at, reason: clean(reason), amount, until };
        if let Some(problem) = approval.problem() {
            return Err(format!("approval of {name}'s overrun refused: {problem}"));
        }
        let how_far = match (amount, until) {
            (Some(a), Some(u)) => format!("+{a} until {}", u.format("%Y-%m-%d %H:%M")),
            (Some(a), None) => format!("+{a}"),
            (None, Some(u)) => format!("until {}", u.format("%Y-%m-%d %H:%M")),
            (None, None) => String::new(),
        };
        self.approvals.insert(tenant.clone(), approval);
        self.queue_dirty = true;
        Ok(format!("approve the overrun of {name} {how_far}: {}", clean(reason)))
    }
}
