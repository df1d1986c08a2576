//! Ledger exports: the raw lines as CSV, and the FinOps FOCUS 1.2 columns so
//! that a cost tool can take gpuroom's spend next to the cloud bill.
//!
//! Reads ledger lines handed to it and writes CSV; knows no SQL and no Room.
//!
//! # FOCUS mapping
//!
//! gpuroom re-bills its cluster's cost to the tenants that used it: the
//! "internal infrastructure offering running on cloud (or on premises)" of
//! FOCUS's *Origination of cost data* appendix (scenario 5.1/5.2), so
//! **ProviderName, PublisherName and InvoiceIssuerName are all `gpuroom`**:
//! gpuroom makes the GPU time available, produces the service sold (GPU time
//! split per job and per second) and charges it. The cloud's own bill for the
//! same instances is a different dataset; adding the two counts them twice.
//!
//! The **billing account** is the gpuroom run the ledger belongs to (a site's
//! recorded log, or a simulation): BillingAccountId is the run's source as its
//! log records it (`live host=ip-10-0-1-7`, `sim seed=1 config=default`),
//! BillingAccountName a readable form of it ([`BillingAccount::of_run`]).
//!
//! Every line is a `Usage` charge, `Usage-Based` (it exists because a GPU ran or
//! a checkpoint was written, kept or read in that hour), with a null ChargeClass
//! (no line corrects an earlier period) and a null InvoiceId (gpuroom issues
//! no invoices; the file is a chargeback statement).
//!
//! Money: prices are amortized per second, so BilledCost = EffectiveCost =
//! what the line cost (the spot price in force, the on-demand price, or the
//! reservation's contract price). ListCost is the same usage at the on-demand
//! list price. gpuroom negotiates no discounts, so ContractedCost = ListCost
//! (FOCUS: "if negotiated discounts are not applicable, the Contracted Cost
//! defaults to the List Cost"); List − Effective is what spot and reservations
//! saved. No ListUnitPrice is written: gpuroom publishes no price list, and
//! the line's list price is its on-demand price per GPU-hour only up to the
//! ledger's rounding to the micro-unit.
//!
//! | Line kind      | ServiceName / Category / Subcategory                          | PricingQuantity, PricingUnit      |
//! |----------------|---------------------------------------------------------------|-----------------------------------|
//! | compute, idle  | gpuroom GPU compute / Compute / Virtual Machines              | GPU time, `GPU-Hours`             |
//! | checkpoint-io  | gpuroom checkpoint writes / Storage / Object Storage          | bytes written, `GiB`              |
//! | storage        | gpuroom checkpoint storage / Storage / Object Storage         | GiB held × months, `GiB-Months`   |
//! | network        | gpuroom checkpoint restores / Networking / Network Connectivity | bytes read back across zones, `GiB` |
//!
//! The prices are per GPU-hour (a node's hourly price over its GPUs), per GiB
//! written or read, and per GiB-month kept (a month being 730 hours, as the
//! cost engine prices it), so PricingQuantity × the price is the line's cost.
//! ConsumedQuantity/ConsumedUnit are the same measures, except for unused
//! reserved time (nothing consumed: null, as FOCUS requires).
//!
//! Pricing: on-demand GPU time is `Standard` pricing, spot `Dynamic`, reserved
//! `Committed`; checkpoint writes, storage and restores are `Standard` on
//! every node (the reservation covers the instance, not them).
//!
//! Commitments: each reserved node is a commitment discount of the run
//! (CommitmentDiscountId `<account>/reserved/<node>`, type `Reserved
//! Instance`, category `Usage`, measured in `GPU-Hours`). Its GPU time held by
//! jobs is `Used`, its idle GPU time `Unused`, CommitmentDiscountQuantity the
//! line's GPU-hours. The reservation is re-billed per second of the node
//! (unused time as its own lines), so there is no `Purchase` row.
//!
//! Resources: an instance line's resource is one GPU (`node/gpuN`, type
//! `GPU`), a service line's the node the job's checkpoint belongs to (type
//! `Checkpoint`). SkuId is the instance type for GPU time and the line kind
//! for the services. Tags: the owner's tenant, project, environment and
//! model, the job, and `idle` on idle lines.

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

/// `num / den` in decimal, rounded half up to `places` digits, without
/// trailing zeros ("0.5", "12"). Exact where the quotient has that many
/// digits (bytes in GiB: 30 places).
fn decimal(num: u128, den: u128, places: usize) -> String {
    let den = den.max(1);
    let (mut whole, mut rest) = (num / den, num % den);
    let mut digits = Vec::with_capacity(places);
    for _ in 0..places {
        rest *= 10;
        digits.push((rest / den) as u8);
        rest %= den;
    }
    if rest * 2 >= den {
        // Round up, carrying through nines.
        let mut i = digits.len();
        loop {
            if i == 0 {
                whole += 1;
                break;
            }
            i -= 1;
            if digits[i] == 9 {
                digits[i] = 0;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    while digits.last() == Some(&0) {
        digits.pop();
    }
    let mut text = whole.to_string();
    if !digits.is_empty() {
        text.push('.');
        text.extend(digits.iter().map(|d| char::from(b'0' + d)));
    }
    text
}

const MS_PER_HOUR: u128 = 3_600_000;
const GIB: u128 = 1 << 30;
/// The month storage is priced by (`storage_per_gib_month`): 730 hours, as
/// the cost engine accrues it.
const STORAGE_MONTH_MS: u128 = 730 * MS_PER_HOUR;

/// The billing account of a FOCUS file: the gpuroom run (a site's recorded
/// log, or a simulation) whose ledger it exports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BillingAccount {
    /// The run's source as its log records it, e.g. `live host=ip-10-0-1-7`.
    pub id: String,
    /// The same, for people: "gpuroom site on ip-10-0-1-7".
    pub name: String,
}

impl BillingAccount {
    /// The account of the run whose log records `source` (`RunMeta::source`):
    /// `live host=H` (a site), `sim seed=S config=C` (a simulation) or another text.
    pub fn of_run(source: &str) -> BillingAccount {
        let source = source.trim();
        if source.is_empty() {
            return BillingAccount { id: "gpuroom".into(), name: "gpuroom".into() };
        }
        let name = if let Some(host) = source.strip_prefix("live host=") {
            format!("gpuroom site on {host}")
        } else if let Some(world) = source.strip_prefix("sim ") {
            format!("gpuroom simulation ({world})")
        } else {
            format!("gpuroom run ({source})")
        };
        BillingAccount { id: source.to_string(), name }
    }
}

/// One ledger line as a FOCUS row: what the columns are computed from.
struct Charge<'a> {
    line: &'a LedgerLine,
    account: &'a BillingAccount,
}

impl Charge<'_> {
    fn billing_period(&self) -> (At, At) {
        let start = self.line.start;
        let first = Utc.with_ymd_and_hms(start.year(), start.month(), 1, 0, 0, 0).single().unwrap_or(start);
        (first, crate::domain::units::start_of_next_month(first))
    }

    /// GPU time on a reserved node: drawn from (or left unused of) its reservation.
    fn committed(&self) -> bool {
        self.line.billing == BillingMode::Reserved && self.line.kind.is_instance()
    }

    fn pricing_category(&self) -> &'static str {
        match (self.line.kind.is_instance(), self.line.billing) {
            (false, _) | (true, BillingMode::OnDemand) => "Standard",
            (true, BillingMode::Spot) => "Dynamic",
            (true, BillingMode::Reserved) => "Committed",
        }
    }

    fn commitment_status(&self) -> &'static str {
        match (self.committed(), self.line.kind) {
            (false, _) => "",
            (true, LineKind::Idle) => "Unused",
            (true, _) => "Used",
        }
    }

    /// (PricingQuantity, PricingUnit): what the line's price is per.
    fn pricing(&self) -> (String, &'static str) {
        let quantity = u128::from(self.line.quantity.unsigned_abs());
        match self.line.kind {
            LineKind::Compute | LineKind::Idle => (decimal(quantity, MS_PER_HOUR, 9), "GPU-Hours"),
            LineKind::CheckpointIo | LineKind::Network => (decimal(quantity, GIB, 30), "GiB"),
            LineKind::Storage => {
                let held_ms = u128::from((self.line.end - self.line.start).num_milliseconds().unsigned_abs());
                (decimal(quantity * held_ms, GIB * STORAGE_MONTH_MS, 12), "GiB-Months")
            }
        }
    }

    /// (ConsumedQuantity, ConsumedUnit): null for unused reserved time.
    fn consumed(&self) -> (String, &'static str) {
        if self.commitment_status() == "Unused" { (String::new(), "") } else { self.pricing() }
    }

    fn service(&self) -> (&'static str, &'static str, &'static str) {
        match self.line.kind {
            LineKind::Compute | LineKind::Idle => ("gpuroom GPU compute", "Compute", "Virtual Machines"),
            LineKind::CheckpointIo => ("gpuroom checkpoint writes", "Storage", "Object Storage"),
            LineKind::Storage => ("gpuroom checkpoint storage", "Storage", "Object Storage"),
            LineKind::Network => ("gpuroom checkpoint restores", "Networking", "Network Connectivity"),
        }
    }

    fn resource(&self) -> String {
        match self.line.unit {
            Some(u) => format!("{}/gpu{u}", self.line.node_name),
            None => self.line.node_name.clone(),
        }
    }

    fn resource_type(&self) -> &'static str {
        match (self.line.kind.is_instance(), self.line.node_name.is_empty()) {
            (true, _) => "GPU",
            (false, false) => "Checkpoint",
            (false, true) => "",
        }
    }

    fn description(&self) -> String {
        let l = self.line;
        match (l.kind, &l.tags) {
            (LineKind::Idle, _) => format!("idle {} GPU time on {}", l.billing.label(), l.instance_type),
            (kind, Some(t)) => format!("{} for {}/{}/{}", kind.label(), t.tenant.0, t.project, t.model),
            (kind, None) => kind.label().to_string(),
        }
    }

    fn sku(&self) -> String {
        if self.line.kind.is_instance() { self.line.instance_type.clone() } else { self.line.kind.label().to_string() }
    }

    fn commitment_id(&self) -> String {
        if self.committed() { format!("{}/reserved/{}", self.account.id, self.line.node_name) } else { String::new() }
    }

    fn when_committed(&self, value: impl FnOnce() -> String) -> String {
        if self.committed() { value() } else { String::new() }
    }

    fn tags(&self) -> String {
        let line = self.line;
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
}

/// A FOCUS column: its name and its value for a line (empty: null).
type Column = (&'static str, fn(&Charge) -> String);

/// The FOCUS columns written, in order, each with how its value is made.
const FOCUS: &[Column] = &[
    ("BillingAccountId", |c| c.account.id.clone()),
    ("BillingAccountName", |c| c.account.name.clone()),
    ("BillingCurrency", |_| "USD".into()),
    ("BillingPeriodStart", |c| time(c.billing_period().0)),
    ("BillingPeriodEnd", |c| time(c.billing_period().1)),
    ("ChargePeriodStart", |c| time(c.line.start)),
    ("ChargePeriodEnd", |c| time(c.line.end)),
    ("BilledCost", |c| dollars(c.line.amount)),
    ("EffectiveCost", |c| dollars(c.line.amount)),
    ("ListCost", |c| dollars(c.line.list_amount)),
    ("ContractedCost", |c| dollars(c.line.list_amount)),
    ("ChargeCategory", |_| "Usage".into()),
    ("ChargeClass", |_| String::new()),
    ("ChargeFrequency", |_| "Usage-Based".into()),
    ("ChargeDescription", |c| c.description()),
    ("InvoiceId", |_| String::new()),
    ("InvoiceIssuerName", |_| "gpuroom".into()),
    ("ProviderName", |_| "gpuroom".into()),
    ("PublisherName", |_| "gpuroom".into()),
    ("PricingCategory", |c| c.pricing_category().into()),
    ("PricingQuantity", |c| c.pricing().0),
    ("PricingUnit", |c| c.pricing().1.into()),
    ("ConsumedQuantity", |c| c.consumed().0),
    ("ConsumedUnit", |c| c.consumed().1.into()),
    ("CommitmentDiscountId", |c| c.commitment_id()),
    ("CommitmentDiscountName", |c| c.when_committed(|| format!("reserved {} {}", c.line.instance_type, c.line.node_name))),
    ("CommitmentDiscountType", |c| c.when_committed(|| "Reserved Instance".into())),
    ("CommitmentDiscountCategory", |c| c.when_committed(|| "Usage".into())),
    ("CommitmentDiscountStatus", |c| c.commitment_status().into()),
    ("CommitmentDiscountQuantity", |c| c.when_committed(|| c.pricing().0)),
    ("CommitmentDiscountUnit", |c| c.when_committed(|| c.pricing().1.into())),
    ("ResourceId", |c| c.resource()),
    ("ResourceName", |c| c.resource()),
    ("ResourceType", |c| c.resource_type().into()),
    ("ServiceName", |c| c.service().0.into()),
    ("ServiceCategory", |c| c.service().1.into()),
    ("ServiceSubcategory", |c| c.service().2.into()),
    ("RegionId", |c| c.line.zone.trim_end_matches(|ch: char| ch.is_ascii_alphabetic()).to_string()),
    ("AvailabilityZone", |c| c.line.zone.clone()),
    ("SkuId", |c| c.sku()),
    ("Tags", |c| c.tags()),
];

/// The FOCUS columns, in the order written: the one list of them.
pub const FOCUS_COLUMNS: [&str; FOCUS.len()] = {
    let mut names = [""; FOCUS.len()];
    let mut i = 0;
    while i < FOCUS.len() {
        names[i] = FOCUS[i].0;
        i += 1;
    }
    names
};

/// `lines` as FOCUS 1.2 rows of `account`.
pub fn write_focus(out: impl Write, lines: &[LedgerLine], account: &BillingAccount) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(FOCUS_COLUMNS)?;
    for line in lines {
        let charge = Charge { line, account };
        w.write_record(FOCUS.iter().map(|(_, value)| value(&charge)))?;
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

    #[test]
    fn quantities_print_in_decimal_rounded_half_up() {
        assert_eq!(decimal(1, 3, 3), "0.333");
        assert_eq!(decimal(2, 3, 3), "0.667");
        assert_eq!(decimal(999_999, 1_000_000, 3), "1", "the carry reaches the whole part");
        assert_eq!(decimal(1_999_500, 1_000_000, 3), "2");
        assert_eq!(decimal(5, 1, 9), "5");
        assert_eq!(decimal(0, 7, 9), "0");
        assert_eq!(decimal(1, 1 << 30, 30), "0.000000000931322574615478515625", "a byte in GiB, exactly");
        assert_eq!(decimal(7, 0, 2), "7", "a zero denominator is taken as one, never a panic");
    }

    #[test]
    fn the_billing_account_is_the_run() {
        let site = BillingAccount::of_run("live host=ip-10-0-1-7");
        assert_eq!((site.id.as_str(), site.name.as_str()), ("live host=ip-10-0-1-7", "gpuroom site on ip-10-0-1-7"));
        assert_eq!(BillingAccount::of_run("sim seed=1 config=default").name, "gpuroom simulation (seed=1 config=default)");
        assert_eq!(BillingAccount::of_run("export test").name, "gpuroom run (export test)");
        assert_eq!(BillingAccount::of_run("  ").id, "gpuroom", "never an empty (null) account");
    }

    /// One line of each kind as FOCUS rows, read back by column name.
    fn rows(lines: &[LedgerLine]) -> Vec<std::collections::BTreeMap<String, String>> {
        let mut out = Vec::new();
        write_focus(&mut out, lines, &BillingAccount::of_run("live host=h")).unwrap();
        let mut reader = csv::Reader::from_reader(out.as_slice());
        let headers = reader.headers().unwrap().clone();
        reader.records().map(|r| headers.iter().map(String::from).zip(r.unwrap().iter().map(String::from)).collect()).collect()
    }

    #[test]
    fn each_line_kind_is_priced_per_its_unit_and_the_quantity_times_the_price_is_its_cost() {
        use crate::domain::ids::{JobId, NodeId, TenantId};
        use crate::domain::job::Tags;
        let at = |text: &str| chrono::DateTime::parse_from_rfc3339(text).unwrap().to_utc();
        let line = |kind, billing, quantity, end: &str| LedgerLine {
            start: at("2020-01-06T13:00:00Z"),
            end: at(end),
            kind,
            node: NodeId(1),
            node_name: "n01".into(),
            unit: kind.is_instance().then_some(3),
            job: (kind != LineKind::Idle).then_some(JobId(7)),
            tags: (kind != LineKind::Idle).then(|| Tags { tenant: TenantId("nlp".into()), project: "p".into(), env: "prod".into(), model: "bert".into() }),
            billing,
            instance_type: "p3.16xlarge".into(),
            zone: "us-west-2c".into(),
            amount: Micros(1_530_000),
            list_amount: Micros(3_060_000),
            quantity,
        };
        let rows = rows(&[
            line(LineKind::Compute, BillingMode::Spot, 1_800_000, "2020-01-06T13:30:00Z"),
            line(LineKind::Idle, BillingMode::Reserved, 3_600_000, "2020-01-06T14:00:00Z"),
            line(LineKind::Compute, BillingMode::Reserved, 900_000, "2020-01-06T13:15:00Z"),
            line(LineKind::CheckpointIo, BillingMode::Reserved, 3 << 29, "2020-01-06T14:00:00Z"),
            line(LineKind::Storage, BillingMode::Spot, 1 << 30, "2020-01-06T14:00:00Z"),
            line(LineKind::Network, BillingMode::OnDemand, 1 << 31, "2020-01-06T14:00:00Z"),
        ]);
        let get = |row: usize, col: &str| rows[row][col].clone();
        // Half an hour of one spot GPU: dynamic pricing, no commitment.
        assert_eq!((get(0, "PricingQuantity"), get(0, "PricingUnit"), get(0, "PricingCategory")), ("0.5".into(), "GPU-Hours".into(), "Dynamic".into()));
        assert_eq!((get(0, "ConsumedQuantity"), get(0, "CommitmentDiscountId")), ("0.5".into(), String::new()));
        assert_eq!((get(0, "ResourceId"), get(0, "ResourceType"), get(0, "SkuId")), ("n01/gpu3".into(), "GPU".into(), "p3.16xlarge".into()));
        // An idle reserved hour: an unused commitment, nothing consumed.
        assert_eq!((get(1, "CommitmentDiscountStatus"), get(1, "ConsumedQuantity"), get(1, "ConsumedUnit")), ("Unused".into(), String::new(), String::new()));
        assert_eq!((get(1, "CommitmentDiscountQuantity"), get(1, "CommitmentDiscountId")), ("1".into(), "live host=h/reserved/n01".into()));
        assert_eq!(get(1, "Tags"), r#"{"idle":"true"}"#);
        assert_eq!(
            (get(2, "CommitmentDiscountStatus"), get(2, "ConsumedQuantity"), get(2, "PricingCategory")),
            ("Used".into(), "0.25".into(), "Committed".into())
        );
        // Services on a reserved node are standard pricing, outside the reservation.
        assert_eq!((get(3, "PricingQuantity"), get(3, "PricingUnit"), get(3, "PricingCategory")), ("1.5".into(), "GiB".into(), "Standard".into()));
        assert_eq!(
            (get(3, "CommitmentDiscountStatus"), get(3, "ServiceSubcategory"), get(3, "ResourceType")),
            (String::new(), "Object Storage".into(), "Checkpoint".into())
        );
        // A GiB held for an hour is 1/730 of a GiB-month.
        assert_eq!((get(4, "PricingQuantity"), get(4, "PricingUnit")), ("0.001369863014".into(), "GiB-Months".into()));
        assert_eq!(
            (get(5, "PricingQuantity"), get(5, "ServiceCategory"), get(5, "ServiceSubcategory")),
            ("2".into(), "Networking".into(), "Network Connectivity".into())
        );
        for row in &rows {
            assert_eq!((row["BilledCost"].as_str(), row["EffectiveCost"].as_str()), ("1.530000", "1.530000"));
            assert_eq!((row["ListCost"].as_str(), row["ContractedCost"].as_str()), ("3.060000", "3.060000"), "no negotiated discount");
            assert_eq!((row["ChargeCategory"].as_str(), row["ChargeFrequency"].as_str(), row["ChargeClass"].as_str()), ("Usage", "Usage-Based", ""));
            assert_eq!((row["RegionId"].as_str(), row["AvailabilityZone"].as_str()), ("us-west-2", "us-west-2c"));
            assert_eq!((row["BillingPeriodStart"].as_str(), row["BillingPeriodEnd"].as_str()), ("2020-01-01T00:00:00Z", "2020-02-01T00:00:00Z"));
        }
    }
}
