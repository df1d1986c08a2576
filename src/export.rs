//! Ledger exports: the raw lines as CSV, and the FinOps FOCUS columns (1.x)
//! so that a cost tool can take gpuroom's spend next to the cloud bill.
//!
//! Reads ledger lines handed to it and writes CSV; knows no SQL and no Room.
//!
//! FOCUS mapping: on-demand is `Standard` pricing, spot `Dynamic`, reserved
//! `Committed` (idle reserved time `CommitmentDiscountStatus = Unused`).
//! Prices are amortized per second, so BilledCost = EffectiveCost = what
//! the line cost; ListCost is the same usage at the on-demand list price.

use std::io::Write;

use chrono::{Datelike, TimeZone, Utc};

use crate::cost::ledger::{LedgerLine, LineKind};
use crate::domain::cluster::BillingMode;
use crate::domain::units::{At, Micros};

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// FinOps FOCUS columns.
    Focus,
    /// Every ledger column.
    Csv,
}

/// `[start, end)` of a month given as `YYYY-MM`.
pub fn month_span(text: &str) -> Result<(At, At), String> {
    let bad = || format!("--month {text:?}: expected YYYY-MM, e.g. 2020-01");
    let (y, m) = text.split_once('-').ok_or_else(bad)?;
    let (year, month): (i32, u32) = (y.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    let start = Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0).single().ok_or_else(bad)?;
    Ok((start, crate::domain::units::start_of_next_month(start)))
}

fn dollars(m: Micros) -> String {
    let sign = if m.0 < 0 { "-" } else { "" };
    format!("{sign}{}.{:06}", m.0.unsigned_abs() / 1_000_000, m.0.unsigned_abs() % 1_000_000)
}

fn time(at: At) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn pricing_category(mode: BillingMode) -> &'static str {
    match mode {
        BillingMode::OnDemand => "Standard",
        BillingMode::Spot => "Dynamic",
        BillingMode::Reserved => "Committed",
    }
}

fn service(kind: LineKind) -> (&'static str, &'static str, &'static str) {
    match kind {
        LineKind::Compute | LineKind::Idle => ("gpuroom GPU compute", "Compute", "GPU-Hours"),
        LineKind::CheckpointIo => ("gpuroom checkpoint writes", "Storage", "Bytes"),
        LineKind::Storage => ("gpuroom checkpoint storage", "Storage", "Bytes"),
        LineKind::Network => ("gpuroom checkpoint restores", "Networking", "Bytes"),
    }
}

fn tags_json(line: &LedgerLine) -> String {
    let mut tags = serde_json::Map::new();
    if let Some(t) = &line.tags {
        tags.insert("tenant".into(), t.tenant.0.clone().into());
        tags.insert("project".into(), t.project.clone().into());
        tags.insert("environment".into(), t.env.clone().into());
        tags.insert("model".into(), t.model.clone().into());
    }
    if let Some(job) = line.job {
        tags.insert("job".into(), job.to_string().into());
    }
    if line.kind == LineKind::Idle {
        tags.insert("idle".into(), "true".into());
    }
    serde_json::Value::Object(tags).to_string()
}

pub const FOCUS_COLUMNS: &[&str] = &[
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeDescription",
    "PricingCategory",
    "CommitmentDiscountStatus",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceName",
    "ServiceCategory",
    "ProviderName",
    "RegionId",
    "AvailabilityZone",
    "SkuId",
    "ConsumedQuantity",
    "ConsumedUnit",
    "Tags",
];

pub fn write_focus(out: impl Write, lines: &[LedgerLine]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(FOCUS_COLUMNS)?;
    for l in lines {
        let billing_start = Utc.with_ymd_and_hms(l.start.year(), l.start.month(), 1, 0, 0, 0).single().unwrap_or(l.start);
        let billing_end = crate::domain::units::start_of_next_month(billing_start);
        let (service_name, category, unit) = service(l.kind);
        let quantity = match l.kind {
            LineKind::Compute | LineKind::Idle => format!("{:.6}", l.quantity as f64 / 3_600_000.0),
            _ => l.quantity.to_string(),
        };
        let commitment = match (l.billing, l.kind) {
            (BillingMode::Reserved, LineKind::Idle) => "Unused",
            (BillingMode::Reserved, _) => "Used",
            _ => "",
        };
        let resource = match l.unit {
            Some(u) => format!("{}/gpu{u}", l.node_name),
            None => l.node_name.clone(),
        };
        let region = l.zone.trim_end_matches(|c: char| c.is_ascii_alphabetic()).to_string();
        let description = match (l.kind, &l.tags) {
            (LineKind::Idle, _) => format!("idle {} GPU time on {}", l.billing.label(), l.instance_type),
            (kind, Some(t)) => format!("{} for {}/{}/{}", kind.label(), t.tenant.0, t.project, t.model),
            (kind, None) => kind.label().to_string(),
        };
        w.write_record([
            dollars(l.amount),
            dollars(l.amount),
            dollars(l.list_amount),
            dollars(l.amount),
            "USD".to_string(),
            time(billing_start),
            time(billing_end),
            time(l.start),
            time(l.end),
            "Usage".to_string(),
            description,
            pricing_category(l.billing).to_string(),
            commitment.to_string(),
            resource.clone(),
            resource,
            if l.unit.is_some() { "GPU".to_string() } else { "Checkpoint".to_string() },
            service_name.to_string(),
            category.to_string(),
            "gpuroom".to_string(),
            region,
            l.zone.clone(),
            l.instance_type.clone(),
            quantity,
            unit.to_string(),
            tags_json(l),
        ])?;
    }
    w.flush()?;
    Ok(())
}

pub fn write_csv(out: impl Write, lines: &[LedgerLine]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "start",
        "end",
        "kind",
        "node",
        "unit",
        "job",
        "tenant",
        "project",
        "env",
        "model",
        "billing",
        "instance_type",
        "zone",
        "amount",
        "list_amount",
        "quantity",
    ])?;
    for l in lines {
        let t = l.tags.as_ref();
        w.write_record([
            time(l.start),
            time(l.end),
            l.kind.label().to_string(),
            l.node_name.clone(),
            l.unit.map(|u| u.to_string()).unwrap_or_default(),
            l.job.map(|j| j.to_string()).unwrap_or_default(),
            t.map(|t| t.tenant.0.clone()).unwrap_or_default(),
            t.map(|t| t.project.clone()).unwrap_or_default(),
            t.map(|t| t.env.clone()).unwrap_or_default(),
            t.map(|t| t.model.clone()).unwrap_or_default(),
            l.billing.label().to_string(),
            l.instance_type.clone(),
            l.zone.clone(),
            dollars(l.amount),
            dollars(l.list_amount),
            l.quantity.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_parse_and_money_prints_exactly() {
        let (a, b) = month_span("2020-12").unwrap();
        assert_eq!((time(a), time(b)), ("2020-12-01T00:00:00Z".to_string(), "2021-01-01T00:00:00Z".to_string()));
        for bad in ["2020-13", "2020", "20x0-01", ""] {
            assert!(month_span(bad).unwrap_err().contains("YYYY-MM"), "{bad}");
        }
        assert_eq!(dollars(Micros(3_051_500)), "3.051500");
        assert_eq!(dollars(Micros(-5)), "-0.000005");
    }
}
