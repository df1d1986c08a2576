//! The ledger in a real SQLite file, written by a recorded simulated run:
//! append-only, rolled up by attribution level, and exported as FOCUS CSV
//! that reads back to the same totals.

use chrono::TimeDelta;
use gpuroom::cost::ledger::LineKind;
use gpuroom::domain::units::Micros;
use gpuroom::engine::Engine;
use gpuroom::export::{self, FOCUS_COLUMNS};
use gpuroom::room::{Room, RoomConfig};
use gpuroom::sim::config::SimConfig;
use gpuroom::sim::{Simulation, Traces};
use gpuroom::store::ledger::Level;
use gpuroom::store::{RunMeta, Store};

#[path = "support/focus.rs"]
mod focus;

fn cents(text: &str) -> i64 {
    let (whole, frac) = text.split_once('.').unwrap();
    let sign = if whole.starts_with('-') { -1 } else { 1 };
    sign * (whole.trim_start_matches('-').parse::<i64>().unwrap() * 1_000_000 + frac.parse::<i64>().unwrap())
}

#[test]
fn a_recorded_run_exports_focus_csv_that_reconciles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    let traces = Traces::embedded().unwrap();
    let config = SimConfig::default_embedded();
    let start = config.start;
    let meta = RunMeta { room_config: RoomConfig::default(), source: "export test".into(), created_with: "test".into(), world: None };
    let store = Store::create(&path, &meta).unwrap();
    let world = Simulation::new(config, &traces, 3).unwrap();
    let mut engine = Engine::new(Room::new(RoomConfig::default()), world, Some(store));
    for hour in 1..=30 {
        engine.run_until(start + TimeDelta::hours(hour)).unwrap();
    }
    let room = engine.room().clone();
    let open = room.open_period().total();
    let store = engine.take_store().unwrap();
    drop(store);

    let store = Store::open_read_only(&path).unwrap();
    // Everything the room charged is in the ledger or in the hour still open.
    let ledger = store.ledger_total().unwrap();
    assert_eq!(ledger + open, room.books().total() + room.books().services);
    let month = start.format("%Y-%m").to_string();
    let (from, to) = export::month_span(&month).unwrap();
    let lines = store.ledger_lines(from, to).unwrap();
    assert!(lines.len() > 1000, "{} lines", lines.len());
    assert!(lines.iter().any(|l| l.kind == LineKind::Idle) && lines.iter().any(|l| l.kind == LineKind::CheckpointIo));
    assert!(lines.iter().any(|l| l.kind == LineKind::Storage) && lines.iter().any(|l| l.kind == LineKind::Compute));
    let month_total: Micros = lines.iter().map(|l| l.amount).sum();
    assert_eq!(month_total, ledger, "the run lies inside one month");

    // Roll-ups at every level add up to the same total; drill-down reaches one GPU.
    for level in [Level::Tenant, Level::Project, Level::Env, Level::Model, Level::Gpu] {
        let rows = store.ledger_rollup(level, from, to).unwrap();
        assert_eq!(rows.iter().map(|(_, m)| *m).sum::<Micros>(), ledger, "{level:?}");
    }
    let by_gpu = store.ledger_rollup(Level::Gpu, from, to).unwrap();
    assert!(by_gpu.iter().any(|(k, _)| k == "n01:0"), "{by_gpu:?}");
    let by_tenant = store.ledger_rollup(Level::Tenant, from, to).unwrap();
    assert!(by_tenant.iter().any(|(k, _)| k == "(idle)"));

    // FOCUS: read back with a CSV reader, columns by name.
    let mut buf = Vec::new();
    let account = export::BillingAccount::of_run(&meta.source);
    export::write_focus(&mut buf, &lines, &account).unwrap();
    let mut reader = csv::Reader::from_reader(buf.as_slice());
    let headers = reader.headers().unwrap().clone();
    assert_eq!(headers.iter().collect::<Vec<_>>(), FOCUS_COLUMNS);
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (billed, list, pricing, tags, status) = (col("BilledCost"), col("ListCost"), col("PricingCategory"), col("Tags"), col("CommitmentDiscountStatus"));
    let mut total = 0i64;
    let mut list_total = 0i64;
    let mut categories = std::collections::BTreeSet::new();
    let mut unused = 0;
    for record in reader.records() {
        let r = record.unwrap();
        total += cents(&r[billed]);
        list_total += cents(&r[list]);
        categories.insert(r[pricing].to_string());
        let parsed: serde_json::Value = serde_json::from_str(&r[tags]).unwrap();
        assert!(parsed.is_object());
        unused += usize::from(&r[status] == "Unused");
    }
    assert_eq!(total, ledger.0, "BilledCost adds up to the ledger, to the micro-unit");
    assert!(list_total >= total, "list prices are on-demand's: {list_total} vs {total}");
    assert_eq!(categories.into_iter().collect::<Vec<_>>(), vec!["Committed", "Dynamic", "Standard"]);
    assert!(unused > 0, "idle reserved time is an unused commitment");

    let mut raw = Vec::new();
    export::write_csv(&mut raw, &lines).unwrap();
    assert_eq!(csv::Reader::from_reader(raw.as_slice()).records().count(), lines.len());

    // The weekly efficiency report over the same run, by replaying its log.
    let week = gpuroom::efficiency::weekly(&store, start).unwrap();
    println!("{week}");
    let gpu_hours = week.allocated_gpu_hours + week.idle_gpu_hours;
    let closed_hours = 29.0; // the 30th hour is still open
    assert!(gpu_hours > 0.0 && gpu_hours <= 60.0 * closed_hours + 1e-6, "{gpu_hours} GPU-h");
    assert!(week.utilization() > 0.3 && week.utilization() < 1.0, "{week}");
    assert!(week.busy_util_pct > 10.0 && week.busy_util_pct <= 100.0);
    assert!(week.zombie_gpu_hours >= 0.0 && week.zombie_gpu_hours < week.allocated_gpu_hours);
    assert!(week.requests > 0 && week.tokens > week.requests, "inference jobs report output");
    assert!(week.placements > 0 && week.jobs_done > 0);
    assert_eq!(week.spend, ledger, "the week covers the whole run");
}

#[test]
fn the_ledger_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    let meta = RunMeta { room_config: RoomConfig::default(), source: "t".into(), created_with: "t".into(), world: None };
    drop(Store::create(&path, &meta).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO ledger (start, start_ms, end, kind, node, node_name, tenant, project, env, model, billing, instance_type, zone, amount, list_amount, quantity) VALUES ('a', 0, 'b', 'compute', 1, 'n01', 't', 'p', 'e', 'm', 'spot', 'x', 'z', 5, 5, 1)",
        [],
    )
    .unwrap();
    let err = conn.execute("UPDATE ledger SET amount = 0", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    let err = conn.execute("DELETE FROM ledger", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    // Nor may the tables behind the view be rewritten.
    for table in ["ledger_rows", "ledger_kinds", "ledger_places", "ledger_owners"] {
        let err = conn.execute(&format!("DELETE FROM {table}"), []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{table}: {err}");
        let err = conn.execute(&format!("UPDATE {table} SET id = id + 100"), []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{table}: {err}");
    }
    let (start, end): (String, String) = conn.query_row("SELECT start, end FROM ledger", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!((start.as_str(), end.as_str()), ("a", "b"), "a hand-written line reads back as written");
}

#[test]
fn ledger_lines_read_back_exactly_as_written() {
    use gpuroom::domain::cluster::BillingMode;
    use gpuroom::domain::ids::{JobId, NodeId, TenantId};
    use gpuroom::domain::job::Tags;
    use gpuroom::domain::ledger::LedgerLine;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.db");
    let meta = RunMeta { room_config: RoomConfig::default(), source: "t".into(), created_with: "t".into(), world: None };
    let mut store = Store::create(&path, &meta).unwrap();
    let at = |text: &str| chrono::DateTime::parse_from_rfc3339(text).unwrap().to_utc();
    let line = |start: &str, end: &str, kind, tags: Option<(&str, &str)>, node: u32, billing| LedgerLine {
        start: at(start),
        end: at(end),
        kind,
        node: NodeId(node),
        node_name: format!("n{node:03}"),
        unit: (kind == LineKind::Compute).then_some(3),
        job: tags.map(|_| JobId(u64::from(node) * 1_000_000_007)),
        tags: tags.map(|(tenant, model)| Tags { tenant: TenantId(tenant.into()), project: "p".into(), env: "prod".into(), model: model.into() }),
        billing,
        instance_type: "p3.16xlarge".into(),
        zone: "us-west-2c".into(),
        amount: Micros(-5 + i64::from(node)),
        list_amount: Micros(i64::MAX),
        quantity: 3_600_000,
    };
    // Whole seconds (kept as milliseconds, up to the year 9999), fractions
    // down to the nanosecond and times before 1970 (kept as text), the same
    // words again (filed once) and new ones.
    let lines = vec![
        line("2020-01-06T13:00:00Z", "2020-01-06T14:00:00Z", LineKind::Compute, Some(("nlp", "bert")), 1, BillingMode::Spot),
        line("2020-01-06T13:00:00.25Z", "2020-01-06T13:59:59.123456789Z", LineKind::Idle, None, 1, BillingMode::Spot),
        line("1969-12-31T23:59:59Z", "1970-01-01T00:00:01Z", LineKind::Storage, Some(("nlp", "bert")), 2, BillingMode::OnDemand),
        line("2020-01-06T13:00:00Z", "9999-12-31T23:59:59Z", LineKind::Compute, Some(("vision", "vit")), 1, BillingMode::Reserved),
        line("2020-01-06T14:00:00Z", "2020-01-06T15:00:00Z", LineKind::Compute, Some(("nlp", "bert")), 1, BillingMode::Spot),
    ];
    // Tags are the submitter's text: two owners that a joined key would mix up stay apart.
    let mut lines = lines;
    for (project, env) in [("x\u{1f}y", "z"), ("x", "y\u{1f}z")] {
        let mut l = lines[0].clone();
        l.tags = Some(Tags { tenant: TenantId("nlp".into()), project: project.into(), env: env.into(), model: "bert".into() });
        lines.push(l);
    }
    store.append_ledger(&lines).unwrap();
    drop(store);
    let store = Store::open_read_only(&path).unwrap();
    let back = store.ledger_lines(chrono::DateTime::<chrono::Utc>::MIN_UTC, chrono::DateTime::<chrono::Utc>::MAX_UTC).unwrap();
    assert_eq!(back, lines);
    let conn = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT COUNT(*) FROM ledger_places"), 3, "one place per node and price");
    assert_eq!(count("SELECT COUNT(*) FROM ledger_owners"), 4);
    assert_eq!(count("SELECT COUNT(*) FROM ledger_rows WHERE start_text IS NULL AND end_text IS NULL"), 5);
}

/// The FinOps Foundation's validator reads a simulated month's export, made
/// as a user makes it (`gpuroom sim --db`, then `gpuroom export`), and
/// fails no rule of the FOCUS version the export claims.
#[test]
fn the_focus_validator_accepts_a_simulated_month() {
    // The month is a minute of a debug build's time; without a validator it is not run.
    if focus::venv().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("month.db");
    let gpuroom = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuroom")).args(args).output().unwrap();
        assert!(out.status.success(), "gpuroom {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    // The embedded traces start on 2020-01-06: 26 days of January, then February's first five.
    gpuroom(&["sim", "--hours", "744", "--seed", "1", "--db", db.to_str().unwrap()]);
    let csv = dir.path().join("focus-2020-01.csv");
    let out = gpuroom(&["export", "--db", db.to_str().unwrap(), "--format", "focus", "--month", "2020-01", "--out", csv.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert!(rows > 100_000 && said.contains(&format!("{rows} lines")), "{rows} rows; {said}");
    focus::assert_valid(&csv);
}
