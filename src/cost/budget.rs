//! Monthly budgets per tenant and their three steps (SPEC §5): at 80% the
//! tenant is told, at 100% its new work is limited (it queues, or runs on
//! spot only, by policy), at 120% nothing more of it runs until an operator
//! approves the overrun, with a reason, for an amount or until a time.
//!
//! This module turns "spent, budget, approval, now" into a level; the `Room`
//! acts on the level. No IO, no clock.

use serde::{Deserialize, Serialize};

use crate::domain::units::{At, Micros};

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetLevel {
    Ok,
    /// At or past the notify threshold (80%).
    Notify,
    /// At or past the budget: new work is limited.
    Limited,
    /// At or past the hard threshold (120%) and not approved: nothing runs.
    Blocked,
}

impl BudgetLevel {
    pub fn label(self) -> &'static str {
        match self {
            BudgetLevel::Ok => "ok",
            BudgetLevel::Notify => "80%",
            BudgetLevel::Limited => "limited",
            BudgetLevel::Blocked => "blocked",
        }
    }

    /// Whether a tenant at this level may start work, on spot (`on_spot`)
    /// or not, when "limited" means `at_limit`: the scheduler's rule, and
    /// what the console says of a waiting job.
    pub fn allows(self, at_limit: AtLimit, on_spot: bool) -> bool {
        match self {
            BudgetLevel::Ok | BudgetLevel::Notify => true,
            BudgetLevel::Limited => at_limit == AtLimit::Spot && on_spot,
            BudgetLevel::Blocked => false,
        }
    }
}

/// What "limited" means for new work.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AtLimit {
    /// New work waits in the queue.
    #[default]
    Queue,
    /// New work may run on spot capacity only.
    Spot,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetPolicy {
    pub notify_pct: u32,
    pub limit_pct: u32,
    pub block_pct: u32,
    pub at_limit: AtLimit,
}

impl Default for BudgetPolicy {
    fn default() -> Self {
        BudgetPolicy { notify_pct: 80, limit_pct: 100, block_pct: 120, at_limit: AtLimit::Queue }
    }
}

/// An operator's approval of a tenant's overrun: who, when, why, and how
/// far it goes (an amount over the hard threshold, or a time, or both; the
/// month's end always ends it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub user: String,
    pub origin: String,
    pub at: At,
    pub reason: String,
    /// Extra spend allowed past the hard threshold.
    pub amount: Option<Micros>,
    pub until: Option<At>,
}

impl Approval {
    /// Whether the approval still lifts the block at `now` with `spent`.
    pub fn covers(&self, budget: Micros, policy: &BudgetPolicy, spent: Micros, now: At) -> bool {
        if crate::cost::books::month_of(self.at) != crate::cost::books::month_of(now) {
            return false;
        }
        if self.until.is_some_and(|until| now >= until) {
            return false;
        }
        match self.amount {
            Some(extra) => spent.0 < threshold(budget, policy.block_pct).0.saturating_add(extra.0),
            None => true,
        }
    }

    /// An approval must say why and how far.
    pub fn problem(&self) -> Option<&'static str> {
        if self.reason.trim().is_empty() {
            return Some("an approval needs a reason");
        }
        if self.amount.is_none() && self.until.is_none() {
            return Some("an approval needs an amount or an expiry");
        }
        if self.amount.is_some_and(|a| a.0 <= 0) {
            return Some("an approved amount must be positive");
        }
        if self.until.is_some_and(|u| u <= self.at) {
            return Some("an approval's expiry must be in the future");
        }
        None
    }
}

/// `pct`% of `budget`, in micro-units (rounded down).
pub fn threshold(budget: Micros, pct: u32) -> Micros {
    Micros((i128::from(budget.0) * i128::from(pct) / 100) as i64)
}

impl BudgetPolicy {
    /// The level of a tenant that spent `spent` of `budget` this month. A
    /// budget of zero means none is set: always `Ok`.
    pub fn level(&self, budget: Micros, spent: Micros, approval: Option<&Approval>, now: At) -> BudgetLevel {
        if budget.0 <= 0 {
            return BudgetLevel::Ok;
        }
        let approved = approval.is_some_and(|a| a.covers(budget, self, spent, now));
        if spent >= threshold(budget, self.block_pct) && !approved {
            BudgetLevel::Blocked
        } else if spent >= threshold(budget, self.limit_pct) && !approved {
            BudgetLevel::Limited
        } else if spent >= threshold(budget, self.notify_pct) {
            BudgetLevel::Notify
        } else {
            BudgetLevel::Ok
        }
    }

    pub fn problem(&self) -> Option<String> {
        let (n, l, b) = (self.notify_pct, self.limit_pct, self.block_pct);
        (!(0 < n && n <= l && l <= b)).then(|| format!("budget thresholds must rise: notify {n}% ≤ limit {l}% ≤ block {b}%"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    fn approval(amount: Option<i64>, until: Option<At>) -> Approval {
        Approval { user: "ana".into(), origin: "console".into(), at: t(0), reason: "launch week".into(), amount: amount.map(Micros), until }
    }

    #[test]
    fn each_step_at_its_threshold() {
        let policy = BudgetPolicy::default();
        let budget = Micros(1_000_000_000);
        let at = |spent: i64| policy.level(budget, Micros(spent), None, t(0));
        assert_eq!(at(799_999_999), BudgetLevel::Ok);
        assert_eq!(at(800_000_000), BudgetLevel::Notify);
        assert_eq!(at(999_999_999), BudgetLevel::Notify);
        assert_eq!(at(1_000_000_000), BudgetLevel::Limited);
        assert_eq!(at(1_199_999_999), BudgetLevel::Limited);
        assert_eq!(at(1_200_000_000), BudgetLevel::Blocked);
        assert_eq!(policy.level(Micros(0), Micros(5), None, t(0)), BudgetLevel::Ok, "no budget set");
    }

    #[test]
    fn an_approval_lifts_the_block_for_its_amount_or_until_its_expiry() {
        let policy = BudgetPolicy::default();
        let budget = Micros(1_000_000_000);
        let by_amount = approval(Some(100_000_000), None);
        assert_eq!(policy.level(budget, Micros(1_250_000_000), Some(&by_amount), t(10)), BudgetLevel::Notify);
        assert_eq!(policy.level(budget, Micros(1_300_000_000), Some(&by_amount), t(10)), BudgetLevel::Blocked, "amount used up");
        let by_time = approval(None, Some(t(3600)));
        assert_eq!(policy.level(budget, Micros(2_000_000_000), Some(&by_time), t(3599)), BudgetLevel::Notify);
        assert_eq!(policy.level(budget, Micros(2_000_000_000), Some(&by_time), t(3600)), BudgetLevel::Blocked, "expired");
        // A new month: the approval is gone with the old month's spend.
        let next_month = t(0) + chrono::TimeDelta::days(40);
        assert!(!by_amount.covers(budget, &policy, Micros(0), next_month));
    }

    #[test]
    fn approvals_and_policies_must_make_sense() {
        assert!(approval(Some(1), None).problem().is_none());
        let mut blank = approval(Some(1), None);
        blank.reason = "  ".into();
        assert_eq!(blank.problem(), Some("an approval needs a reason"));
        assert!(approval(None, None).problem().unwrap().contains("amount or an expiry"));
        assert!(approval(Some(-5), None).problem().is_some());
        assert!(approval(None, Some(t(0))).problem().is_some());
        let bad = BudgetPolicy { notify_pct: 90, limit_pct: 80, ..BudgetPolicy::default() };
        assert!(bad.problem().is_some());
        assert!(BudgetPolicy::default().problem().is_none());
    }
}
