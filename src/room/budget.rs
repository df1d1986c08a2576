//! Budgets as the `Room` enforces them: each tenant's level (80% notify,
//! 100% limited, 120% blocked) after every event, the alarms and stops a
//! change of level brings, what a level allows the scheduler to place, and
//! operators' approvals of an overrun (who, why, how far), kept for audit.
//!
//! The thresholds and the approval rules live in `cost::budget`.

//!
//! Owns `Budgets`; reads the books and the fleet it is handed, and stops a
//! blocked tenant's running jobs through the fleet.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fleet::Fleet;
use super::journal::{AlarmSeverity, Journal, Severity};
use crate::ckpt::CheckpointPolicy;
use crate::cost::Books;
use crate::cost::budget::{Approval, AtLimit, BudgetLevel, BudgetPolicy, threshold};
use crate::domain::event::{Actor, Effect};
use crate::domain::ids::TenantId;
use crate::domain::job::StopReason;
use crate::domain::text::clean;
use crate::domain::units::{At, Micros};

/// Each tenant's budget level and the overruns operators approved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Each tenant's budget level as last derived, and standing approvals.
    #[serde(default, with = "crate::domain::serde_pairs")]
    pub levels: BTreeMap<TenantId, BudgetLevel>,
    #[serde(default, with = "crate::domain::serde_pairs")]
    pub approvals: BTreeMap<TenantId, Approval>,
    /// Whether any tenant is limited or blocked (asked for every queued job).
    #[serde(default)]
    pub limiting: bool,
}

/// What a budget check reads, and the fleet it stops a blocked tenant's jobs in.
pub struct Check<'a> {
    pub policy: &'a BudgetPolicy,
    pub books: &'a Books,
    pub fleet: &'a mut Fleet,
    pub now: Option<At>,
    pub checkpoint: &'a CheckpointPolicy,
}

/// The parts a budget check touches: the budgets, what the check reads
/// and stops jobs in, the journal. Lent by `Room::budget_desk`.
pub struct Desk<'a> {
    pub budgets: &'a mut Budgets,
    pub check: Check<'a>,
    pub journal: &'a mut Journal,
}

impl Desk<'_> {
    /// Re-derives every tenant's level and acts on the changes; returns
    /// whether any level moved.
    pub fn check(self, at: At, effects: &mut Vec<Effect>) -> bool {
        self.budgets.check(at, self.check, self.journal, effects)
    }
}

/// An operator's approval of an overrun, as asked.
pub struct Overrun<'a> {
    pub tenant: &'a TenantId,
    pub reason: &'a str,
    pub amount: Option<Micros>,
    pub until: Option<At>,
}

impl Budgets {
    pub fn any_limited(&self) -> bool {
        self.limiting
    }

    pub fn level(&self, tenant: &TenantId) -> BudgetLevel {
        self.levels.get(tenant).copied().unwrap_or(BudgetLevel::Ok)
    }

    /// Re-derives every tenant's level; acts on the changes. Returns whether
    /// any level moved (the queue must be looked at again).
    pub fn check(&mut self, at: At, check: Check<'_>, journal: &mut Journal, effects: &mut Vec<Effect>) -> bool {
        let Check { policy, books, fleet, now, checkpoint } = check;
        let changes: Vec<(TenantId, BudgetLevel, BudgetLevel, Micros, Micros)> = fleet
            .tenants
            .iter()
            .filter_map(|(id, spec)| {
                let spent = books.month_to_date(id, at);
                let level = policy.level(spec.monthly_budget, spent, self.approvals.get(id), at);
                let before = self.level(id);
                (level != before).then(|| (id.clone(), before, level, spent, spec.monthly_budget))
            })
            .collect();
        if changes.is_empty() {
            return false;
        }
        for (tenant, before, level, spent, budget) in changes {
            self.levels.insert(tenant.clone(), level);
            let name = clean(&tenant.0);
            let alarm = format!("budget:{name}");
            let pct = if budget.0 > 0 { spent.0 as f64 * 100.0 / budget.0 as f64 } else { 0.0 };
            match level {
                BudgetLevel::Ok => {
                    journal.clear(at, &alarm, effects);
                    journal.note(at, Severity::Info, format!("{name} budget back under {}%", policy.notify_pct));
                }
                BudgetLevel::Notify => {
                    journal.clear(at, &alarm, effects);
                    // A heads-up, not a page: work still runs as before.
                    journal.raise_as(at, alarm, format!("{name} has spent {pct:.0}% of its {budget} budget"), AlarmSeverity::Warning, effects);
                }
                BudgetLevel::Limited => {
                    let what = match policy.at_limit {
                        AtLimit::Queue => "new work waits",
                        AtLimit::Spot => "new work runs on spot only",
                    };
                    journal.clear(at, &alarm, effects);
                    journal.raise(at, alarm, format!("{name} is over its {budget} budget ({pct:.0}%): {what}"), effects);
                }
                BudgetLevel::Blocked => {
                    journal.clear(at, &alarm, effects);
                    let limit = threshold(budget, policy.block_pct);
                    journal.raise(
                        at,
                        alarm,
                        format!("{name} passed {}% of its budget ({limit}): stopped until an operator approves", policy.block_pct),
                        effects,
                    );
                    for id in fleet.holding_of(&tenant) {
                        fleet.stop_job(now, checkpoint, id, StopReason::Budget, true, effects);
                    }
                }
            }
            if level < before && before == BudgetLevel::Blocked {
                journal.note(at, Severity::Info, format!("{name} may run again"));
            }
        }
        // Cached for the scheduler, which asks for every queued job.
        self.limiting = self.levels.values().any(|l| *l >= BudgetLevel::Limited);
        true
    }

    /// Whether the scheduler may place this tenant's work, and where.
    pub fn allows(&self, at_limit: AtLimit, tenant: &TenantId, on_spot: bool) -> bool {
        // The common case, asked for every queued job of every pass: nobody is limited.
        if !self.any_limited() {
            return true;
        }
        self.level(tenant).allows(at_limit, on_spot)
    }

    /// An operator approves a tenant's overrun. Returns the audit text.
    pub fn approve(
        &mut self,
        tenants: &BTreeMap<TenantId, crate::domain::event::TenantSpec>,
        at: At,
        actor: &Actor,
        ask: Overrun<'_>,
    ) -> Result<String, String> {
        let Overrun { tenant, reason, amount, until } = ask;
        let name = clean(&tenant.0);
        if !tenants.contains_key(tenant) {
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
        Ok(format!("approve the overrun of {name} {how_far}: {}", clean(reason)))
    }
}
