//! A Slurm site as the room sees it: Slurm's nodes in the fleet with the
//! Slurm jobs on their GPUs, charged per second to the jobs' accounts and
//! tags (idle GPUs as idle lines), powered-down CLOUD nodes billed nothing,
//! budgets holding and releasing an account's jobs, and a spot drain turned
//! into a checkpoint signal, a requeue before the deadline and a recorded
//! interruption.

use crate::cost::ledger::LineKind;
use crate::domain::cluster::{BillingMode, NodeState};
use crate::domain::event::{Effect, Event, TenantSpec};
use crate::domain::ids::{JobId, NodeId, TenantId};
use crate::domain::ledger::LedgerLine;
use crate::domain::slurm::{SlurmJob, SlurmMode, SlurmNode, SlurmPartition, SlurmSnapshot, SlurmState, SlurmVerb};
use crate::domain::spot_drain;
use crate::domain::testkit::{node_spec, t};
use crate::domain::units::{Mib, Micros};
use crate::room::{Room, RoomConfig};

fn running(id: u64, account: &str, node: &str, idx: &[u32]) -> SlurmJob {
    SlurmJob {
        id,
        name: format!("train{id}"),
        user: "u".into(),
        account: account.into(),
        partition: "gpu".into(),
        state: SlurmState::Running,
        reason: "None".into(),
        gpus: idx.len() as u32,
        nodes: vec![node.into()],
        gpu_idx: vec![(node.into(), idx.to_vec())],
        comment: "project=detr,model=vit".into(),
        ..Default::default()
    }
}

fn pending(id: u64, account: &str) -> SlurmJob {
    SlurmJob {
        id,
        name: format!("wait{id}"),
        account: account.into(),
        partition: "gpu".into(),
        state: SlurmState::Pending,
        reason: "Resources".into(),
        gpus: 1,
        ..Default::default()
    }
}

fn node(name: &str, id: u32, state: &str, reason: &str) -> SlurmNode {
    SlurmNode {
        name: name.into(),
        state: state.into(),
        gpus: 4,
        node: Some(NodeId(id)),
        reason: reason.into(),
        partitions: vec!["gpu".into()],
        ..Default::default()
    }
}

fn snap(nodes: Vec<SlurmNode>, jobs: Vec<SlurmJob>) -> Event {
    let names = nodes.iter().map(|n| n.name.clone()).collect();
    Event::Slurm {
        snapshot: SlurmSnapshot {
            cluster: "site".into(),
            version: "22.05.8".into(),
            partitions: vec![SlurmPartition { name: "gpu".into(), state: "UP".into(), nodes: names, default: true }],
            nodes,
            jobs,
        },
    }
}

/// Two 4-GPU nodes Slurm schedules: n00 spot, n01 on demand; accounts a and b.
fn site(mode: SlurmMode, budget_a: i64) -> Room {
    let mut config = RoomConfig::default();
    config.slurm.mode = mode;
    config.slurm.checkpoint_grace = crate::domain::units::Secs(60);
    let mut room = Room::new(config);
    for (name, budget) in [("a", budget_a), ("b", 0)] {
        let spec = TenantSpec { id: TenantId(name.into()), quota_gpus: 8, monthly_budget: Micros(budget), quota_gpu_mem: Mib(0), borrow_limit_gpus: 0 };
        room.apply(t(0), &Event::TenantDefined { spec });
    }
    let mut spot = node_spec(0, BillingMode::Spot, 4);
    spot.name = "n00".into();
    room.apply(t(0), &Event::NodeUp { spec: spot });
    room.apply(
        t(0),
        &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: crate::domain::units::MicrosPerHour(7_200_000) },
    );
    let mut od = node_spec(1, BillingMode::OnDemand, 4);
    od.name = "n01".into();
    room.apply(t(0), &Event::NodeUp { spec: od });
    room
}

fn sent(effects: &[Effect]) -> Vec<(u64, SlurmVerb, String)> {
    effects
        .iter()
        .filter_map(|e| if let Effect::Slurm { command } = e { Some((command.job, command.verb.clone(), command.by.clone())) } else { None })
        .collect()
}

fn lines(effects: &[Effect]) -> Vec<LedgerLine> {
    effects.iter().filter_map(|e| if let Effect::Ledger { lines } = e { Some(lines.clone()) } else { None }).flatten().collect()
}

#[test]
fn slurm_nodes_take_no_room_work_and_their_gpus_are_charged_to_the_slurm_jobs_accounts() {
    let mut room = site(SlurmMode::Advisory, 0);
    let nodes = || vec![node("n00", 0, "mixed", ""), node("n01", 1, "idle", "")];
    room.apply(t(0), &snap(nodes(), vec![running(7, "a", "n00", &[0, 1]), running(8, "b", "n00", &[3])]));
    let view = room.view();
    let n00 = view.nodes.iter().find(|n| n.name == "n00").unwrap();
    assert_eq!(n00.state, "slurm mixed");
    let jobs: Vec<Vec<String>> = n00.gpus.iter().map(|g| g.jobs.iter().map(|j| j.to_string()).collect()).collect();
    assert_eq!(jobs, [vec!["slurm-7".to_string()], vec!["slurm-7".into()], vec![], vec!["slurm-8".into()]]);
    assert_eq!(view.cluster.gpus_busy, 3);
    assert!(room.fleet.nodes.values().all(|n| !n.accepts_work()), "the room places nothing on Slurm's nodes");

    // Job 8 ends at 30 min; the hour closes at one hour.
    room.apply(t(1800), &snap(nodes(), vec![running(7, "a", "n00", &[0, 1])]));
    let effects = room.apply(t(3600), &Event::Tick);
    let ledger = lines(&effects);
    let of = |job: u64| ledger.iter().filter(|l| l.job == Some(JobId::slurm(job))).collect::<Vec<_>>();
    let seven = of(7);
    assert_eq!(seven.len(), 2, "one line per GPU: {seven:#?}");
    let tags = seven[0].tags.as_ref().unwrap();
    assert_eq!((tags.tenant.0.as_str(), tags.project.as_str(), tags.env.as_str(), tags.model.as_str()), ("a", "detr", "gpu", "vit"));
    // A quarter of a $7.20/h spot node for an hour: $1.80 per GPU.
    assert_eq!(seven.iter().map(|l| l.amount.0).sum::<i64>(), 3_600_000);
    assert_eq!(of(8).iter().map(|l| l.amount.0).sum::<i64>(), 900_000, "job 8: one GPU for half an hour");
    assert!(seven.iter().all(|l| l.kind == LineKind::Compute && l.billing == BillingMode::Spot));
    let idle: i64 = ledger.iter().filter(|l| l.kind == LineKind::Idle).map(|l| l.amount.0).sum();
    let all: i64 = ledger.iter().map(|l| l.amount.0).sum();
    assert_eq!(all, 7_200_000 + 24_480_000, "both nodes, whole, for the hour");
    assert_eq!(idle, all - 3_600_000 - 900_000, "what no job held is idle");
    assert_eq!(room.costs.books.month_to_date(&TenantId("a".into()), t(3600)), Micros(3_600_000), "the account's books, for its budget");
}

#[test]
fn a_machine_seen_first_by_its_host_name_is_shown_by_slurms_name_and_billed_by_its_own() {
    let mut room = site(SlurmMode::Advisory, 0);
    let mut ip = node_spec(2, BillingMode::OnDemand, 4);
    ip.name = "ip-10-0-1-7".into();
    room.apply(t(0), &Event::NodeUp { spec: ip });
    let mut queue = node("queue-st-g5-1", 2, "mixed", "");
    queue.hostname = "ip-10-0-1-7".into();
    room.apply(t(0), &snap(vec![queue], vec![running(7, "a", "queue-st-g5-1", &[0])]));
    let view = room.view();
    let shown = view.nodes.iter().find(|n| n.id == NodeId(2)).unwrap();
    assert_eq!((shown.name.as_str(), shown.state.as_str()), ("queue-st-g5-1", "slurm mixed"));
    assert_eq!(shown.gpus[0].jobs, [JobId::slurm(7)]);
    let ledger = lines(&room.apply(t(3600), &Event::Tick));
    assert!(ledger.iter().filter(|l| l.node == NodeId(2)).all(|l| l.node_name == "ip-10-0-1-7"), "the ledger keeps the machine's name");
}

#[test]
fn a_powered_down_cloud_node_costs_nothing_until_slurm_powers_it_up() {
    let mut room = site(SlurmMode::Advisory, 0);
    room.apply(t(0), &snap(vec![node("n00", 0, "idle", ""), node("n01", 1, "idle+cloud+powered_down", "")], vec![]));
    assert_eq!(room.view().nodes.iter().find(|n| n.name == "n01").unwrap().state, "powered down");
    room.apply(t(1800), &snap(vec![node("n00", 0, "idle", ""), node("n01", 1, "idle+cloud", "")], vec![]));
    assert!(matches!(room.fleet.nodes[&NodeId(1)].state, NodeState::Up));
    let ledger = lines(&room.apply(t(3600), &Event::Tick));
    let n01: i64 = ledger.iter().filter(|l| l.node == NodeId(1)).map(|l| l.amount.0).sum();
    assert_eq!(n01, 24_480_000 / 2, "billed only for the half hour it was up");
}

#[test]
fn at_its_budget_an_accounts_pending_jobs_are_held_and_an_approval_releases_them() {
    // a's budget: $2; one GPU of the spot node costs $1.80/h.
    let mut room = site(SlurmMode::Control, 2_000_000);
    let nodes = || vec![node("n00", 0, "mixed", ""), node("n01", 1, "idle", "")];
    room.apply(t(0), &snap(nodes(), vec![running(7, "a", "n00", &[0]), pending(9, "a"), pending(10, "b")]));
    // 70 minutes: $2.10 spent, past 100% but not 120%.
    let effects = room.apply(t(4200), &Event::Tick);
    assert_eq!(sent(&effects), [(9, SlurmVerb::Hold, "budget".to_string())], "only a's pending job, held, as the level moves");
    assert!(sent(&room.apply(t(4201), &snap(nodes(), vec![running(7, "a", "n00", &[0]), pending(9, "a"), pending(10, "b")]))).is_empty(), "sent once");
    let id = room.slurm.in_flight.keys().next().copied().unwrap();
    room.apply(t(4202), &Event::SlurmDone { command: id, ok: true, message: "scontrol hold 9".into() });
    let mut nine = pending(9, "a");
    nine.reason = "JobHeldAdmin".into();
    assert!(sent(&room.apply(t(4205), &snap(nodes(), vec![running(7, "a", "n00", &[0]), nine.clone(), pending(10, "b")]))).is_empty(), "held once");

    let alice = crate::domain::event::Actor { user: "alice".into(), origin: "console".into(), role: crate::domain::event::Role::Operator, account: None };
    let approve =
        crate::domain::event::Action::ApproveOverrun { tenant: TenantId("a".into()), reason: "deadline".into(), amount: Some(Micros(50_000_000)), until: None };
    let effects = room.apply(t(4300), &Event::Operator { actor: alice, action: approve });
    assert_eq!(sent(&effects), [(9, SlurmVerb::Release, "budget".to_string())], "the approval releases what the budget held, at once");
    assert!(sent(&room.apply(t(4305), &snap(nodes(), vec![running(7, "a", "n00", &[0]), nine, pending(10, "b")]))).is_empty(), "once");
}

#[test]
fn past_the_hard_limit_running_jobs_are_signalled_then_requeued_and_advisory_mode_only_proposes() {
    for mode in [SlurmMode::Control, SlurmMode::Advisory] {
        let mut room = site(mode, 1_000_000);
        let nodes = || vec![node("n00", 0, "mixed", ""), node("n01", 1, "idle", "")];
        let jobs = || vec![running(7, "a", "n00", &[0]), running(8, "b", "n00", &[1])];
        room.apply(t(0), &snap(nodes(), jobs()));
        let effects = room.apply(t(3600), &Event::Tick);
        if mode == SlurmMode::Advisory {
            assert!(sent(&effects).is_empty());
            let row = room.view().slurm.unwrap().jobs.into_iter().find(|j| j.id == 7).unwrap();
            assert!(row.advice.as_deref().is_some_and(|a| a.starts_with("signal USR1: account a passed its hard budget limit")), "{row:?}");
            continue;
        }
        assert_eq!(sent(&effects), [(7, SlurmVerb::Signal { signal: "USR1".into() }, "budget".to_string())]);
        let id = room.slurm.in_flight.keys().next().copied().unwrap();
        room.apply(t(3602), &Event::SlurmDone { command: id, ok: true, message: String::new() });
        assert!(sent(&room.apply(t(3630), &snap(nodes(), jobs()))).is_empty(), "the grace period runs");
        assert!(sent(&room.apply(t(3659), &Event::Tick)).is_empty());
        assert_eq!(sent(&room.apply(t(3660), &Event::Tick)), [(7, SlurmVerb::Requeue, "budget".to_string())], "when due (signal + 60 s), not at the next poll");
    }
}

#[test]
fn a_spot_drain_from_the_agent_is_signalled_requeued_before_the_deadline_and_recorded() {
    let mut room = site(SlurmMode::Control, 0);
    let jobs = || vec![running(7, "a", "n00", &[0, 1])];
    room.apply(t(0), &snap(vec![node("n00", 0, "mixed", ""), node("n01", 1, "idle", "")], jobs()));
    let reason = spot_drain::reason("terminate", Some(t(680)));
    let drained = || vec![node("n00", 0, "mixed+drain", &reason), node("n01", 1, "idle", "")];
    let effects = room.apply(t(600), &snap(drained(), jobs()));
    assert_eq!(sent(&effects), [(7, SlurmVerb::Signal { signal: "USR1".into() }, "spot notice".to_string())]);
    assert!(matches!(room.fleet.nodes[&NodeId(0)].state, NodeState::Draining { deadline } if deadline == t(680)));
    assert_eq!(room.journal.stats.notices, 1, "the room's own notice path ran");
    assert!(room.hazard.get("p3.16xlarge").is_some_and(|r| r.recent().count(t(600)) == 1), "the hazard model saw it");
    let id = room.slurm.in_flight.keys().next().copied().unwrap();
    room.apply(t(601), &Event::SlurmDone { command: id, ok: true, message: String::new() });
    // Grace is 60 s, but the requeue must land 30 s before the deadline: at 650.
    assert!(sent(&room.apply(t(645), &snap(drained(), jobs()))).is_empty());
    assert_eq!(sent(&room.apply(t(651), &snap(drained(), jobs()))), [(7, SlurmVerb::Requeue, "spot notice".to_string())]);
    assert_eq!(room.journal.stats.notices, 1, "recorded once");
}
