//! What if, for a Slurm site, end to end: a small site recorded to a real
//! SQLite log as the engine records one (the Slurm nodes as nodes of the
//! room, a snapshot every 10 s), compared through the library and through
//! the `gpuroom whatif` binary. The figures themselves are checked in
//! `src/whatif/slurm_site_tests.rs`; here, that the columns and notes of a
//! Slurm site come out where a user reads them.

use std::path::Path;
use std::process::Command;

use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::event::Event;
use gpuroom::domain::ids::NodeId;
use gpuroom::domain::slurm::{SlurmJob, SlurmNode, SlurmPartition, SlurmSnapshot, SlurmState};
use gpuroom::domain::testkit::{node_spec, t};
use gpuroom::domain::units::MicrosPerHour;
use gpuroom::room::RoomConfig;
use gpuroom::store::{RunMeta, Store};
use gpuroom::whatif::{self, Model, Window};

/// (id, account, submitted, started, node): every job asks all 4 GPUs of a
/// node and runs 600 s; Slurm ran them first come, first served.
const JOBS: [(u64, &str, i64, i64, usize); 6] =
    [(1, "a", 0, 0, 0), (2, "a", 0, 0, 1), (3, "a", 0, 600, 0), (4, "a", 0, 600, 1), (5, "b", 60, 1200, 0), (6, "b", 60, 1200, 1)];
const NAMES: [&str; 2] = ["n1", "n2"];

fn record(db: &Path) {
    let meta = RunMeta { room_config: RoomConfig::default(), source: "slurm site".into(), created_with: "test".into(), world: None };
    let mut store = Store::create(db, &meta).unwrap();
    store.begin().unwrap();
    store.append(t(0), &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(7_200_000) }).unwrap();
    for (i, name) in NAMES.iter().enumerate() {
        let mut spec = node_spec(i as u32 + 1, if i == 0 { BillingMode::Spot } else { BillingMode::OnDemand }, 4);
        spec.name = name.to_string();
        store.append(t(0), &Event::NodeUp { spec }).unwrap();
    }
    for at in (0..=3700).step_by(10) {
        let jobs = JOBS
            .iter()
            .filter(|j| j.2 <= at && at < j.3 + 600)
            .map(|&(id, account, submitted, started, node)| {
                let running = at >= started;
                SlurmJob {
                    id,
                    account: account.into(),
                    partition: "gpu".into(),
                    gpus: 4,
                    state: if running { SlurmState::Running } else { SlurmState::Pending },
                    submitted: Some(t(submitted)),
                    started: running.then(|| t(started)),
                    nodes: if running { vec![NAMES[node].into()] } else { vec![] },
                    ..Default::default()
                }
            })
            .collect();
        let nodes = (0..2)
            .map(|i| SlurmNode { name: NAMES[i].into(), state: "allocated".into(), gpus: 4, node: Some(NodeId(i as u32 + 1)), ..Default::default() })
            .collect();
        let partitions = vec![SlurmPartition { name: "gpu".into(), state: "UP".into(), nodes: NAMES.map(String::from).to_vec(), default: true }];
        store.append(t(at), &Event::Slurm { snapshot: SlurmSnapshot { cluster: "site".into(), partitions, nodes, jobs, ..Default::default() } }).unwrap();
    }
    store.commit().unwrap();
}

#[test]
fn a_recorded_slurm_site_is_compared_with_what_slurm_did_in_the_library_and_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("site.db");
    record(&db);

    let store = Store::open_read_only(&db).unwrap();
    let comparison = whatif::compare(&store, "site.db", &[], Window::default(), Model::Auto, &mut |_| {}).unwrap();
    let slurm = &comparison.columns[0].outcome;
    assert_eq!(slurm.waits, [0, 0, 600, 600, 1140, 1140], "first start minus submission, as the snapshots say");
    assert_eq!((slurm.submitted, slurm.finished, slurm.queued_at_end), (6, 6, 0));
    assert!(comparison.model.starts_with("Slurm site re-run on the live model"), "{}", comparison.model);

    let out = Command::new(env!("CARGO_BIN_EXE_gpuroom")).args(["whatif", "--db"]).arg(&db).args(["--discipline", "drf"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let header = text.lines().find(|l| l.contains("recorded")).unwrap_or_default();
    assert!(header.contains("drf"), "{text}");
    for label in ["instance spend", "tenant a", "tenant b", "mean queue wait", "P95 queue wait", "mean JCT", "jobs finished", "requeues"] {
        assert!(text.contains(label), "no {label:?} in\n{text}");
    }
    assert!(text.contains("model error against what Slurm did"), "{text}");
    assert!(text.contains("mean queue wait by account (recorded · drf): a "), "{text}");
}
