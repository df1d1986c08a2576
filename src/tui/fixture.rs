//! A demo `View` built through the real core: a `Room` fed with events
//! (tenants, five nodes of every billing mode, a dozen jobs, telemetry, spot
//! prices, a lost node and an interruption notice, a tenant blocked past
//! 120% of its budget, an operator's approval of another's overrun and an
//! inference job's output), answered the way an executor would; and
//! `slurm_view`, the same with a Slurm cluster attached. Used by the
//! console's snapshot tests and for screenshots.
//!
//! Owns nothing the product runs on; it must not reach into `Room` internals,
//! only `Room::apply` and `Room::view`.

use std::collections::VecDeque;

use crate::domain::cluster::BillingMode;
use crate::domain::event::{Action, Actor, GpuSample, Role, TenantSpec};
use crate::domain::ids::{GpuRef, JobId, NodeId, TenantId};
use crate::domain::job::{JobClass, JobSpec, Phase, PoolPreference};
use crate::domain::slurm::{SlurmMode, SlurmState};
use crate::domain::testkit::{job_spec, node_spec, t};
use crate::domain::units::{Mib, Micros, MicrosPerHour, Secs};
use crate::domain::{Effect, Event};
use crate::room::view_slurm::{SlurmAccountRow, SlurmJobRow, SlurmNodeRow, SlurmPartitionRow, SlurmView};
use crate::room::{Room, View};

/// Feeds a room and plays the executor: starts what is placed, saves what is
/// asked to checkpoint (unless `hold_saves`), stops what is asked to stop.
struct Driver {
    room: Room,
    hold_saves: bool,
}

impl Driver {
    fn apply(&mut self, secs: i64, event: Event) {
        let at = t(secs);
        let mut pending = VecDeque::from([event]);
        while let Some(event) = pending.pop_front() {
            for effect in self.room.apply(at, &event) {
                match effect {
                    Effect::StartJob { job, .. } => pending.push_back(Event::JobStarted { job }),
                    Effect::Checkpoint { job, .. } if !self.hold_saves => {
                        let step = self.room.job(job).map(|j| j.steps_done).unwrap_or(0);
                        pending.push_back(Event::CheckpointDone { job, step, bytes: 2 << 30 });
                    }
                    Effect::StopJob { job } => pending.push_back(Event::JobStopped { job }),
                    _ => {}
                }
            }
        }
    }

    /// One telemetry sample for every GPU of up nodes and every running job.
    /// Utilization and memory use are made up per job; speeds are steps/hour.
    fn telemetry(&mut self, secs: i64, skip_nodes: &[u32]) {
        let mut gpus = Vec::new();
        let mut progress = Vec::new();
        for node_id in 1..=6u32 {
            let Some(node) = self.room.node(NodeId(node_id)) else { continue };
            if !node.is_up() || skip_nodes.contains(&node_id) {
                continue;
            }
            for gpu in &node.gpus {
                let jobs: Vec<u64> = gpu.allocations.iter().map(|a| a.job.0).collect();
                let util = jobs.iter().map(|j| busy(*j)).sum::<f32>().min(100.0) - f32::from(gpu.index % 3) * 1.5;
                let used: u32 = gpu.allocations.iter().map(|a| if a.exclusive { 13_900 } else { a.size.0 * 3 / 4 }).sum();
                gpus.push(GpuSample(GpuRef { node: NodeId(node_id), index: gpu.index }, util.max(0.0), Mib(used)));
            }
        }
        for job in self.room.jobs() {
            if matches!(job.phase(), Phase::Running | Phase::Checkpointing) {
                let per_tick = speed(job.spec.id.0) / 6;
                progress.push((job.spec.id, (job.steps_done + per_tick).min(job.spec.steps_total - 1)));
            }
        }
        self.apply(secs, Event::Telemetry { gpus, progress });
    }
}

/// Made-up utilization of one job on one GPU.
fn busy(job: u64) -> f32 {
    [0.0, 96.0, 88.0, 71.0, 93.0, 42.0, 18.0, 27.0, 83.0, 64.0, 90.0, 77.0, 50.0, 12.0][job as usize % 14]
}

/// Made-up speed of a job, steps per hour.
fn speed(job: u64) -> u64 {
    [0, 180, 240, 300, 150, 600, 200, 110, 150, 100, 200, 260, 400, 700][job as usize % 14]
}

fn tenant(id: &str, quota_gpus: u32, budget_dollars: i64) -> Event {
    Event::TenantDefined {
        spec: TenantSpec {
            id: TenantId(id.into()),
            quota_gpus,
            monthly_budget: Micros(budget_dollars * 1_000_000),
            quota_gpu_mem: Mib(0),
            borrow_limit_gpus: 16,
        },
    }
}

fn job(id: u64, tenant: &str, name: &str, gpus: u8) -> JobSpec {
    JobSpec { name: name.into(), ..job_spec(id, tenant, gpus) }
}

fn shared(id: u64, tenant: &str, name: &str, mem: u32) -> JobSpec {
    JobSpec { exclusive: false, gpu_mem: Mib(mem), class: JobClass::BatchInference, ..no_spot(job(id, tenant, name, 1)) }
}

fn price(zone: &str, dollars_milli: i64) -> Event {
    Event::PriceTick { zone: zone.into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(dollars_milli * 1_000) }
}

const H: i64 = 3600;

/// The room behind `demo_view`, three hours into a Monday.
pub fn demo_room() -> Room {
    let mut d = Driver { room: Room::default(), hold_saves: false };
    d.apply(0, tenant("vision", 12, 20_000));
    d.apply(0, tenant("nlp", 8, 55));
    d.apply(0, tenant("speech", 6, 12));
    d.apply(0, price("us-east-1c", 7_344));
    d.apply(0, price("us-east-1d", 7_210));
    d.apply(0, Event::NodeUp { spec: node_spec(1, BillingMode::Reserved, 8) });
    d.apply(0, Event::NodeUp { spec: on_demand(2) });
    d.apply(0, Event::NodeUp { spec: node_spec(3, BillingMode::Spot, 8) });
    for id in [4, 5] {
        let mut spec = node_spec(id, BillingMode::Spot, 8);
        spec.zone = "us-east-1d".into();
        spec.max_price = Some(MicrosPerHour(8_000_000));
        d.apply(0, Event::NodeUp { spec });
    }
    // Placement is reserved first, then spot, then on-demand, tightest fit:
    // n01 j1 | n03 j4 | n04 j2 j3 j8 | n05 j12 | n02 j5 j9 and the shared GPU.
    let first = [
        job(1, "vision", "resnet50-imagenet", 8),
        job(4, "nlp", "llama-7b-sft", 8),
        job(2, "vision", "vit-l16-pretrain", 4),
        job(12, "nlp", "mixtral-distill", 8),
        job(3, "vision", "detr-finetune", 2),
        job(8, "speech", "whisper-large-ft", 2),
        no_spot(job(5, "nlp", "bert-large-eval", 1)),
        no_spot(job(9, "speech", "tts-eval", 1)),
        shared(6, "nlp", "tokenizer-bench", 3_000),
        shared(13, "nlp", "rerank-eval", 4_000),
        shared(7, "nlp", "embed-batch", 5_000),
    ];
    for spec in first {
        d.apply(60, Event::JobSubmitted { spec });
    }
    let ticks = [(0, 7_344, 7_210), (100 * 60, 7_580, 7_420), (130 * 60, 8_120, 7_650), (150 * 60, 9_180, 7_790)];
    for tick in 1..=17 {
        let secs = tick * 600;
        for (at, c, dd) in ticks {
            if at == secs {
                d.apply(secs, price("us-east-1c", c));
                d.apply(secs, price("us-east-1d", dd));
            }
        }
        match secs {
            2400 => {
                d.apply(secs, Event::JobSubmitted { spec: job(10, "vision", "sam-huge-train", 8) });
                d.apply(secs, Event::JobSubmitted { spec: job(11, "speech", "conformer-train", 4) });
            }
            5400 => d.apply(secs, Event::NodeLost { node: NodeId(5), reason: "spot capacity reclaimed".into() }),
            7200 => {
                d.apply(secs, Event::JobExited { job: JobId(13), ok: true, message: String::new() });
                d.apply(secs, Event::JobSubmitted { spec: job(14, "nlp", "llava-13b-ft", 8) });
            }
            9000 => d.apply(secs, Event::JobExited { job: JobId(5), ok: true, message: String::new() }),
            _ => {}
        }
        d.telemetry(secs, &[]);
    }
    // nlp's month-end projection is far past its budget: an operator lets it
    // run $50 past the block threshold ahead of time (not needed yet: 87%).
    let ana = Actor { user: "ana".into(), origin: "console".into(), role: Role::Operator, account: None };
    let approve = Action::ApproveOverrun { tenant: TenantId("nlp".into()), reason: "paper deadline".into(), amount: Some(Micros(50_000_000)), until: None };
    d.apply(2 * H + 52 * 60, Event::Operator { actor: ana, action: approve });
    // The embedding batch reports what it has served: unit costs.
    d.apply(2 * H + 55 * 60, Event::JobOutput { job: JobId(7), requests: 41_800, tokens: 26_500_000 });
    // A fresh on-demand node joins and gets the 4-GPU job: no sample yet.
    let mut late = on_demand(6);
    late.name = "n06".into();
    d.apply(2 * H + 58 * 60, Event::NodeUp { spec: late });
    d.telemetry(2 * H + 58 * 60 + 30, &[6]);
    // The market in us-east-1d passes n04's max price: AWS sends the notice.
    d.hold_saves = true;
    d.apply(2 * H + 59 * 60 + 20, price("us-east-1d", 8_450));
    d.apply(2 * H + 59 * 60 + 27, Event::InterruptionNotice { node: NodeId(4), deadline: t(3 * H + 87) });
    d.apply(3 * H, Event::Tick);
    d.room
}

fn on_demand(id: u32) -> crate::domain::cluster::NodeSpec {
    let mut spec = node_spec(id, BillingMode::OnDemand, 4);
    spec.instance_type = "p3.8xlarge".into();
    spec.zone = "us-east-1a".into();
    spec.on_demand_price = MicrosPerHour(12_240_000);
    spec.contract_price = MicrosPerHour(12_240_000);
    spec
}

fn no_spot(spec: JobSpec) -> JobSpec {
    JobSpec { pool: PoolPreference::NoSpot, ..spec }
}

/// The demo view: what the console shows three hours into the demo.
pub fn demo_view() -> View {
    demo_room().view()
}

/// A small Slurm cluster as the room mirrors it, seen 3 s before `at`: two
/// partitions (gpu, the default, and spare) over two nodes of four A100s,
/// n2 draining for ECC errors; jobs running, suspended, pending and held,
/// one finished with an error, one with gpuroom's advice to requeue it, one
/// whose last command failed, one with a cancel on its way and one whose
/// name has odd and wide characters.
pub fn slurm_cluster(at: Option<crate::domain::units::At>) -> SlurmView {
    let part = |name: &str, default: bool, nodes: usize, gpus: u32, gpus_used: u32, running: usize, pending: usize, pending_gpus: u32| SlurmPartitionRow {
        name: name.into(),
        state: "up".into(),
        default,
        nodes,
        gpus,
        gpus_used,
        running,
        pending,
        pending_gpus,
    };
    let node = |name: &str, state: &str, reason: &str, cpus_alloc: u32, gpu_jobs: Vec<Option<u64>>| SlurmNodeRow {
        name: name.into(),
        state: state.into(),
        unavailable: !reason.is_empty(),
        reason: reason.into(),
        cpus: 64,
        cpus_alloc,
        gpus: gpu_jobs.len() as u32,
        gpu_type: Some("a100".into()),
        gpus_used: gpu_jobs.iter().flatten().count() as u32,
        gpu_jobs,
    };
    let job = |id: u64, name: &str, user: &str, account: &str, partition: &str, state: SlurmState, gpus: u32, placement: &str, secs: i64| SlurmJobRow {
        id,
        name: name.into(),
        user: user.into(),
        account: account.into(),
        partition: partition.into(),
        reason: if state == SlurmState::Running || state == SlurmState::Suspended { "None".into() } else { String::new() },
        waited: (state == SlurmState::Pending).then_some(Secs(secs)),
        ran: matches!(state, SlurmState::Running | SlurmState::Suspended).then_some(Secs(secs)),
        state,
        gpus,
        placement: placement.into(),
        ..SlurmJobRow::default()
    };
    let jobs = vec![
        SlurmJobRow {
            advice: Some(
                "requeue for job 48240: account vision borrows beyond its quota of 3 GPU(s); job 48240 of nlp waits for 4 GPU(s) within its quota of 8 on n1"
                    .into(),
            ),
            ..job(48213, "llama-70b-sft", "alice", "vision", "gpu", SlurmState::Running, 2, "n1[0-1]", 5 * H + 12 * 60)
        },
        SlurmJobRow {
            command: Some("suspend by carol@console: failed: Access/permission denied".into()),
            command_failed: true,
            ..job(48217, "bert-large-eval", "bob", "nlp", "gpu", SlurmState::Running, 1, "n1[2]", 42 * 60 + 7)
        },
        SlurmJobRow { restarts: 2, ..job(48219, "sweep «lr=3e-4» 模型/α", "gus", "speech", "gpu", SlurmState::Running, 1, "n1[3]", H + 3 * 60) },
        SlurmJobRow {
            restarts: 1,
            command: Some("suspend by ana@console: done".into()),
            ..job(48201, "vit-l16-pretrain", "carol", "vision", "gpu", SlurmState::Suspended, 2, "n2[0-1]", 2 * H + 40 * 60)
        },
        job(48225, "whisper-large-ft", "dave", "speech", "spare", SlurmState::Running, 1, "n2[2]", 18 * 60 + 30),
        SlurmJobRow { reason: "Resources".into(), ..job(48240, "mixtral-distill", "erin", "nlp", "gpu", SlurmState::Pending, 4, "", 47 * 60 + 12) },
        SlurmJobRow {
            reason: "Priority".into(),
            command: Some("cancel by bob@console: on its way".into()),
            in_flight: true,
            ..job(48236, "tts-eval", "bob", "nlp", "gpu", SlurmState::Pending, 1, "", 12 * 60 + 40)
        },
        SlurmJobRow {
            held: true,
            reason: "JobHeldUser".into(),
            ..job(48242, "nightly-ci", "ci-bot", "ext", "spare", SlurmState::Pending, 1, "", 2 * H + 5 * 60)
        },
        SlurmJobRow { reason: "NonZeroExitCode".into(), ..job(48190, "data-prep", "alice", "vision", "gpu", SlurmState::Failed, 1, "n1", 0) },
    ];
    let account =
        |account: &str, quota: Option<u32>, holding: u32, pending_gpus: u32| SlurmAccountRow { account: account.into(), quota, holding, pending_gpus };
    SlurmView {
        cluster: "gpuroom-ci".into(),
        version: "22.05.8".into(),
        mode: SlurmMode::Advisory,
        preempt_by: "requeue".into(),
        seen_at: at.map(|at| at - chrono::TimeDelta::seconds(3)),
        stale: None,
        partitions: vec![part("gpu", true, 2, 8, 7, 4, 2, 5), part("spare", false, 1, 4, 3, 1, 1, 1)],
        nodes: vec![
            node("n1", "allocated", "", 56, vec![Some(48213), Some(48213), Some(48217), Some(48219)]),
            node("n2", "mixed+drain", "ECC errors on GPU 3 (OPS-1142)", 24, vec![Some(48201), Some(48201), Some(48225), None]),
        ],
        jobs,
        accounts: vec![account("ext", None, 0, 1), account("nlp", Some(8), 1, 5), account("speech", Some(2), 2, 0), account("vision", Some(3), 4, 0)],
        commands_in_flight: 1,
        governs: None,
        followed: 0,
        out_of_order: 0,
    }
}

/// The demo view with `slurm_cluster` attached.
pub fn slurm_view() -> View {
    let mut view = demo_view();
    view.slurm = Some(slurm_cluster(view.at));
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::budget::BudgetLevel;

    #[test]
    fn the_demo_has_what_the_panes_need() {
        let v = demo_view();
        assert_eq!(v.nodes.len(), 6);
        assert!(v.nodes.iter().any(|n| !n.up), "a down node");
        assert!(v.nodes.iter().any(|n| n.state.starts_with("draining")), "a draining node");
        assert!(v.nodes.iter().flat_map(|n| &n.gpus).any(|g| g.util.is_none() && g.mem_total.0 > 0), "a GPU without sample");
        assert!(v.jobs.iter().any(|j| j.phase == Phase::Queued), "queued jobs");
        assert!(v.jobs.iter().any(|j| j.state == "requeued"), "a requeued job");
        assert!(v.nodes.iter().flat_map(|n| &n.gpus).any(|g| g.fragmentation > 0.0), "a fragmented GPU");
        assert!(!v.alarms.is_empty(), "an alarm");
        assert_eq!(v.market.len(), 2);
        assert!(v.market.iter().any(|m| m.price.is_some_and(|p| m.max_prices.iter().any(|mp| p > *mp))));
        assert_eq!(v.budgets.len(), 3);
        let budget = |name: &str| v.budgets.iter().find(|b| b.tenant == name).unwrap();
        assert_eq!(budget("speech").level, BudgetLevel::Blocked, "a blocked tenant");
        assert_eq!(budget("nlp").level, BudgetLevel::Notify, "a tenant told at 80%");
        assert!(budget("nlp").approval.as_ref().is_some_and(|a| a.in_force && a.user == "ana"), "a standing approval");
        assert!(budget("nlp").per_1k_requests.is_some() && budget("nlp").per_1m_tokens.is_some(), "unit costs");
        assert!(v.audit.iter().any(|a| a.what.contains("paper deadline")), "the approval audited");
        assert!(v.spot_jobs.iter().any(|j| j.p_next_minute.is_some() && j.cap.is_some()), "a spot job with a risk and a max price");
        assert!(v.market.iter().all(|m| m.hazard.is_some()), "pool hazards");
    }
}
