//! Running totals the console shows: spend per tenant this month, per billing
//! mode, and idle capacity, plus GPU-time by billing mode.

use std::collections::BTreeMap;

use chrono::Datelike;
use serde::{Deserialize, Serialize};

use crate::domain::cluster::BillingMode;
use crate::domain::ids::TenantId;
use crate::domain::units::{At, Micros};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantBook {
    /// (year, month) the month-to-date figure belongs to.
    pub month: (i32, u32),
    pub month_to_date: Micros,
    pub all_time: Micros,
    /// Finished jobs that reported output: what they cost and produced
    /// (running ones are added live), for unit costs.
    #[serde(default)]
    pub done_output: OutputSums,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSums {
    /// Cost of the jobs that reported requests, and the requests.
    pub request_cost: Micros,
    pub requests: u64,
    pub token_cost: Micros,
    pub tokens: u64,
}

impl OutputSums {
    pub fn add(&mut self, cost: Micros, requests: u64, tokens: u64) {
        if requests > 0 {
            self.request_cost += cost;
            self.requests = self.requests.saturating_add(requests);
        }
        if tokens > 0 {
            self.token_cost += cost;
            self.tokens = self.tokens.saturating_add(tokens);
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Books {
    pub tenants: BTreeMap<TenantId, TenantBook>,
    /// Indexed by `BillingMode::index()`.
    pub spend: [Micros; 3],
    pub idle_spend: [Micros; 3],
    pub gpu_ms_allocated: [i64; 3],
    pub gpu_ms_idle: [i64; 3],
    /// Spot time during which no market price was known (charged nothing; shown).
    pub unpriced_ms: i64,
    /// Storage, checkpoint I/O and network, on top of instance time.
    #[serde(default)]
    pub services: Micros,
}

pub fn month_of(at: At) -> (i32, u32) {
    (at.year(), at.month())
}

impl Books {
    pub fn charge_tenant(&mut self, tenant: &TenantId, at: At, amount: Micros) {
        let month = month_of(at);
        // Found before inserting: this runs for every job on every event, and
        // `entry` would allocate the key each time.
        let book = match self.tenants.get_mut(tenant) {
            Some(book) => book,
            None => self.tenants.entry(tenant.clone()).or_default(),
        };
        if book.month != month {
            book.month = month;
            book.month_to_date = Micros::ZERO;
        }
        book.month_to_date += amount;
        book.all_time += amount;
    }

    /// Month-to-date spend of `tenant` as of `at` (zero once a new month began).
    pub fn month_to_date(&self, tenant: &TenantId, at: At) -> Micros {
        match self.tenants.get(tenant) {
            Some(book) if book.month == month_of(at) => book.month_to_date,
            _ => Micros::ZERO,
        }
    }

    pub fn charge_mode(&mut self, mode: BillingMode, allocated: Micros, idle: Micros) {
        self.spend[mode.index()] += allocated + idle;
        self.idle_spend[mode.index()] += idle;
    }

    pub fn record_done_output(&mut self, tenant: &TenantId, cost: Micros, requests: u64, tokens: u64) {
        self.tenants.entry(tenant.clone()).or_default().done_output.add(cost, requests, tokens);
    }

    pub fn total(&self) -> Micros {
        self.spend.iter().copied().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn month_to_date_starts_again_each_month() {
        let mut books = Books::default();
        let tenant = TenantId("nlp".into());
        let jan = Utc.with_ymd_and_hms(2020, 1, 31, 23, 0, 0).unwrap();
        let feb = Utc.with_ymd_and_hms(2020, 2, 1, 1, 0, 0).unwrap();
        books.charge_tenant(&tenant, jan, Micros(5_000_000));
        assert_eq!(books.month_to_date(&tenant, jan), Micros(5_000_000));
        assert_eq!(books.month_to_date(&tenant, feb), Micros::ZERO);
        books.charge_tenant(&tenant, feb, Micros(1_000_000));
        assert_eq!(books.month_to_date(&tenant, feb), Micros(1_000_000));
        assert_eq!(books.tenants[&tenant].all_time, Micros(6_000_000));
    }
}
