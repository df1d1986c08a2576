//! A demo `View` built through the real core: a `Room` fed with events
//! (tenants, five nodes of every billing mode, a dozen jobs, telemetry, spot
//! prices, a lost node and an interruption notice, a tenant blocked past
//! 120% of its budget, an operator's approval of another's overrun and an
//! inference job's output), answered the way an executor would. Used by the
//! console's snapshot tests and for screenshots.
//!
//! Owns nothing the product runs on; it must not reach into `Room` internals,
//! only `Room::apply` and `Room::view`.

use std::collections::VecDeque;

use crate::core::cluster::BillingMode;
use crate::core::event::{Action, Actor, GpuSample, Role, TenantSpec};
use crate::core::ids::{GpuRef, JobId, NodeId, TenantId};
use crate::core::job::{JobClass, JobSpec, Phase, PoolPreference};
use crate::core::testkit::{job_spec, node_spec, t};
use crate::core::units::{Mib, Micros, MicrosPerHour};
use crate::core::{Effect, Event, Room, View};

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
        spec: TenantSpec { id: TenantId(id.into()), quota_gpus, monthly_budget: Micros(budget_dollars * 1_000_000), quota_gpu_mem: Mib(0), borrow_limit_gpus: 16 },
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
    let ana = Actor { user: "ana".into(), origin: "console".into(), role: Role::Operator };
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

fn on_demand(id: u32) -> crate::core::cluster::NodeSpec {
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
