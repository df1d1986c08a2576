use std::collections::BTreeMap;

use super::*;
use crate::domain::slurm::SlurmJob;
use crate::domain::testkit::t;
use crate::domain::units::Secs;
use crate::sched::slurm_shards::NodeSpare;

fn node(name: &str, partition: &str, free: u32, billing: BillingMode, kind: &str) -> SiteNode {
    let spare = NodeSpare { gpus: free, ..NodeSpare::default() };
    SiteNode { name: name.into(), partitions: vec![partition.into()], gpus: 4, spare, gpu_type: Some(kind.into()), billing, usable: true, asleep: false }
}

fn pending(id: u64, account: &str, gpus: u32, partition: &str, comment: &str, submitted: i64) -> SlurmJob {
    SlurmJob {
        id,
        name: format!("j{id}"),
        user: "u".into(),
        account: account.into(),
        partition: partition.into(),
        state: SlurmState::Pending,
        reason: "Resources".into(),
        gpus,
        submitted: Some(t(submitted)),
        comment: comment.into(),
        ..Default::default()
    }
}

fn running(id: u64, account: &str, gpus: u32, node: &str) -> SlurmJob {
    SlurmJob { state: SlurmState::Running, reason: "None".into(), nodes: vec![node.into()], ..pending(id, account, gpus, "spot", "", 0) }
}

fn site() -> Vec<SiteNode> {
    vec![
        node("n1", "spot", 4, BillingMode::Spot, "a10g"),
        node("n2", "spot", 2, BillingMode::Spot, "a10g"),
        node("n3", "od", 4, BillingMode::OnDemand, "a10g"),
        node("n4", "od", 4, BillingMode::OnDemand, "l4"),
    ]
}

fn plan_of(jobs: Vec<SlurmJob>, discipline: DisciplineKind, fit: FitPolicy) -> Vec<Planned> {
    plan_on(jobs, site(), discipline, fit)
}

fn plan_on(jobs: Vec<SlurmJob>, nodes: Vec<SiteNode>, discipline: DisciplineKind, fit: FitPolicy) -> Vec<Planned> {
    let snapshot = SlurmSnapshot { jobs, ..Default::default() };
    let sched = SchedConfig { fit, ..SchedConfig::default() };
    let tenants = BTreeMap::new();
    let input =
        PlanInput { now: t(100), discipline, sched: &sched, tenants: &tenants, nodes, uninterruptible_partitions: &[], stopped_accounts: Default::default() };
    plan(&snapshot, &input)
}

fn target(p: &[Planned], job: u64) -> Target {
    p.iter().find(|x| x.job == job).unwrap().target.clone()
}

#[test]
fn drf_puts_the_account_holding_least_first_and_fifo_keeps_arrival() {
    let jobs =
        vec![running(1, "a", 4, "n3"), pending(10, "a", 1, "spot,od", "", 1), pending(11, "a", 1, "spot,od", "", 2), pending(12, "b", 1, "spot,od", "", 3)];
    let drf: Vec<u64> = plan_of(jobs.clone(), DisciplineKind::Drf, FitPolicy::BestFit).iter().map(|p| p.job).collect();
    assert_eq!(drf, vec![12, 10, 11], "b holds nothing: it goes first");
    let fifo: Vec<u64> = plan_of(jobs, DisciplineKind::Fifo, FitPolicy::BestFit).iter().map(|p| p.job).collect();
    assert_eq!(fifo, vec![10, 11, 12]);
}

#[test]
fn spot_comes_before_on_demand_and_the_fullest_spot_node_first() {
    let p = plan_of(vec![pending(10, "a", 2, "spot,od", "", 1)], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Node { node: "n2".into(), partition: "spot".into() });
    let p = plan_of(vec![pending(10, "a", 3, "spot,od", "", 1)], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Node { node: "n1".into(), partition: "spot".into() });
}

#[test]
fn work_that_cannot_be_interrupted_never_gets_a_spot_node_even_if_it_asked_only_for_spot() {
    let p = plan_of(vec![pending(10, "a", 2, "spot,od", "ckpt=no", 1)], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Node { node: "n3".into(), partition: "od".into() });
    assert!(p[0].why.contains("cannot be interrupted"), "{}", p[0].why);
    // Nothing free off spot: it waits, moved to the stable partition, spot nodes excluded.
    let mut jobs = vec![pending(10, "a", 4, "spot", "project=x;ckpt=no", 1)];
    jobs.push(pending(9, "b", 4, "od", "", 0));
    jobs.push(pending(8, "b", 4, "od", "", 0));
    let p = plan_of(jobs, DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Wait { partitions: Some(vec!["od".into()]), exclude: vec!["n1".into(), "n2".into()] });
}

#[test]
fn a_typed_ask_goes_only_to_its_type_and_a_job_ahead_takes_its_gpus_first() {
    let p = plan_of(vec![pending(10, "a", 1, "od", "", 1)], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Node { node: "n3".into(), partition: "od".into() });
    let mut typed = pending(10, "a", 1, "od", "", 1);
    typed.gpu_type = Some("l4".into());
    let p = plan_of(vec![typed], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Node { node: "n4".into(), partition: "od".into() });
    let p = plan_of(
        vec![pending(10, "a", 4, "od", "", 1), pending(11, "a", 4, "od", "", 2), pending(12, "a", 4, "od", "", 3)],
        DisciplineKind::Fifo,
        FitPolicy::BestFit,
    );
    assert!(matches!(target(&p, 10), Target::Node { .. }) && matches!(target(&p, 11), Target::Node { .. }));
    assert!(matches!(target(&p, 12), Target::Wait { .. }), "two od nodes, three 4-GPU jobs");
}

#[test]
fn the_first_blocked_job_holds_a_node_that_only_jobs_ending_before_its_turn_may_use() {
    // n1: 2 of 4 GPUs free, a's job on the other 2 ends at its limit (300 s).
    let mut holder = running(1, "a", 2, "n1");
    (holder.started, holder.time_limit) = (Some(t(0)), Some(Secs(300)));
    let limited = |id: u64, submitted: i64, limit: i64| SlurmJob { time_limit: Some(Secs(limit)), ..pending(id, "a", 1, "spot", "", submitted) };
    let jobs = vec![holder, pending(10, "b", 4, "spot", "", 1), limited(11, 2, 600), limited(12, 3, 100)];
    let p = plan_on(jobs, vec![node("n1", "spot", 2, BillingMode::Spot, "a10g")], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert!(matches!(target(&p, 10), Target::Wait { .. }));
    assert!(p[0].why.contains("n1 held for it"), "{}", p[0].why);
    assert!(matches!(target(&p, 11), Target::Wait { .. }), "it fits, but would still run when job 10's turn comes");
    assert!(p[1].why.contains("held for job 10"), "{}", p[1].why);
    assert_eq!(target(&p, 12), Target::Node { node: "n1".into(), partition: "spot".into() }, "it ends (100 s from now) before the hold falls due");
    // With a node to spare elsewhere, the later jobs go there instead.
    let mut holder = running(1, "a", 2, "n1");
    (holder.started, holder.time_limit) = (Some(t(0)), Some(Secs(300)));
    let nodes = vec![node("n1", "spot", 2, BillingMode::Spot, "a10g"), node("n2", "spot", 1, BillingMode::Spot, "a10g")];
    let p = plan_on(vec![holder, pending(10, "b", 4, "spot", "", 1), limited(11, 2, 600)], nodes, DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 11), Target::Node { node: "n2".into(), partition: "spot".into() });
}

#[test]
fn fragmentation_keeps_a_whole_node_for_the_large_asks_waiting() {
    // n1 4 free, n2 2 free; the queue asks 4s: a 2-GPU job on n1 would leave
    // 2 that no 4-GPU job can use, on n2 it leaves nothing.
    let jobs = vec![pending(10, "a", 2, "spot", "", 1), pending(11, "a", 4, "spot", "", 2), pending(12, "a", 4, "spot", "", 3)];
    let p = plan_of(jobs, DisciplineKind::Fifo, FitPolicy::Fragmentation);
    assert_eq!(target(&p, 10), Target::Node { node: "n2".into(), partition: "spot".into() });
    assert_eq!(target(&p, 11), Target::Node { node: "n1".into(), partition: "spot".into() });
}

#[test]
fn a_sharing_job_packs_onto_a_gpu_already_shared_and_whole_gpus_stay_whole() {
    // n3 and n4 carry 4 shards a GPU; n4 has one GPU half shared already.
    let shared = |name: &str, shard_gpus: Vec<u32>| {
        let spare = NodeSpare { gpus: shard_gpus.iter().filter(|f| **f == 4).count() as u32, shard_gpus, per_gpu: 4, cpus: None };
        SiteNode { spare, ..node(name, "od", 0, BillingMode::OnDemand, "l4") }
    };
    let nodes = vec![shared("n3", vec![4, 4, 4, 4]), shared("n4", vec![2, 4, 4, 4])];
    let share = |id: u64, shards: u32| SlurmJob { shards, ..pending(id, "a", 0, "od", "", id as i64) };
    let p = plan_on(vec![share(10, 2), share(11, 2), pending(12, "a", 4, "od", "", 12)], nodes.clone(), DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Node { node: "n4".into(), partition: "od".into() }, "onto the GPU n4 already shares");
    assert_eq!(target(&p, 11), Target::Node { node: "n4".into(), partition: "od".into() }, "a fresh GPU of n4: n3 stays whole");
    assert_eq!(target(&p, 12), Target::Node { node: "n3".into(), partition: "od".into() }, "four whole GPUs are only on n3");
    assert!(p[0].why.contains("2 GPU shard(s)"), "{}", p[0].why);
    // An ask larger than one GPU's shards fits nowhere (Slurm gives a job's shards on one GPU).
    let p = plan_on(vec![share(20, 5)], nodes.clone(), DisciplineKind::Fifo, FitPolicy::BestFit);
    assert!(matches!(target(&p, 20), Target::Wait { .. }));
    // Once n3 takes a whole GPU job, its shards shrink with it.
    let p = plan_on(
        vec![pending(30, "a", 3, "od", "", 1), share(31, 4), share(32, 4)],
        vec![shared("n3", vec![4, 4, 4, 4])],
        DisciplineKind::Fifo,
        FitPolicy::BestFit,
    );
    assert_eq!(
        (target(&p, 31), target(&p, 32)),
        (Target::Node { node: "n3".into(), partition: "od".into() }, Target::Wait { partitions: None, exclude: vec![] })
    );
}

#[test]
fn a_job_over_nodes_gets_them_all_in_one_partition_or_waits_for_slurm() {
    // -N 2 --gres=gpu:4: spot has one node with 4 free, so both go on demand.
    let two = SlurmJob { node_count: 2, ..pending(10, "a", 8, "spot,od", "", 1) };
    let p = plan_of(vec![two.clone(), pending(11, "a", 4, "spot,od", "", 2)], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 10), Target::Span { nodes: vec!["n3".into(), "n4".into()], partitions: None, exclude: vec![] });
    assert_eq!(target(&p, 11), Target::Node { node: "n1".into(), partition: "spot".into() }, "the GPUs the span took are gone");
    // -N 2 --gres=gpu:1: two GPUs in all, but on two nodes, never one.
    let thin = SlurmJob { node_count: 2, ..pending(12, "a", 2, "spot", "", 1) };
    assert_eq!(
        target(&plan_of(vec![thin], DisciplineKind::Fifo, FitPolicy::BestFit), 12),
        Target::Span { nodes: vec!["n2".into(), "n1".into()], partitions: None, exclude: vec![] }
    );
    // Three nodes of 4 asked, nowhere to be had at once: Slurm spreads it when they free.
    let three = SlurmJob { node_count: 3, ..pending(13, "a", 12, "spot,od", "", 1) };
    let p = plan_of(vec![three], DisciplineKind::Fifo, FitPolicy::BestFit);
    assert_eq!(target(&p, 13), Target::Span { nodes: vec![], partitions: None, exclude: vec![] });
    assert!(p[0].why.contains("Slurm spreads it"), "{}", p[0].why);
}
