//! `View`: an immutable snapshot of everything the console draws, built from
//! the `Room` by `Room::view()`. The TUI renders a `View` and nothing else.
//!
//! Every text that came from outside is cleaned here (see `text::clean`), so no
//! pane has to remember to. Rates derived for display (burn per hour,
//! projections) are computed here, not in the TUI.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::cluster::{BillingMode, NodeState};
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::{JobClass, Phase};
use super::{AuditEntry, LogLine, Room, Severity, Stats};
use crate::domain::text::clean;
use crate::domain::units::{start_of_next_month, At, Mib, Micros, MicrosPerHour, Secs};
use crate::cost::budget::{BudgetLevel, threshold};
use crate::market::Trend;
use crate::market::bid::{BidMode, Verdict};
use crate::sched::fragmentation::{self, ClusterFragmentation};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct View {
    pub at: Option<At>,
    pub events: u64,
    pub discipline: String,
    pub cluster: ClusterView,
    pub nodes: Vec<NodeView>,
    pub queue: QueueView,
    /// Jobs not finished: running first (by node), then queued in queue order.
    pub jobs: Vec<JobRow>,
    pub market: Vec<MarketRow>,
    /// Jobs holding GPUs on spot nodes, smallest headroom (closest to being
    /// moved) first; jobs with no known headroom last, then by id.
    #[serde(default)]
    pub spot_jobs: Vec<SpotJobRow>,
    pub budgets: Vec<BudgetRow>,
    pub alarms: Vec<AlarmRow>,
    /// Recent notable events, newest last.
    pub log: Vec<LogLine>,
    /// The last `AUDIT_SHOWN` operator actions (who, from where, what), newest last.
    #[serde(default)]
    pub audit: Vec<AuditEntry>,
    /// Every pool of the fleet (billing mode, instance type, zone) with its
    /// free capacity: where an operator can migrate a job to.
    #[serde(default)]
    pub pools: Vec<PoolRow>,
    /// Live sources (NVML, dcgm-exporter, EC2, IMDS, executors) and how each
    /// last answered; empty in simulation.
    #[serde(default)]
    pub sources: Vec<SourceView>,
    /// The Slurm cluster gpuroom reads (and drives), when one is attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<super::view_slurm::SlurmView>,
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceView {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub since: At,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolRow {
    pub target: crate::domain::job::PoolTarget,
    pub nodes_up: u32,
    pub nodes_total: u32,
    /// GPUs of up nodes with no allocation, and the largest count on one node.
    pub gpus_free: u32,
    pub gpus_free_one_node: u32,
    pub gpus_total: u32,
    /// Price per node-hour now (market price for spot).
    pub price: Option<MicrosPerHour>,
}

/// How many audit entries the `View` carries.
pub const AUDIT_SHOWN: usize = 20;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterView {
    pub nodes_up: u32,
    pub nodes_total: u32,
    pub gpus_total: u32,
    pub gpus_busy: u32,
    /// Mean utilization over GPUs of up nodes that have a sample.
    pub util_mean: f64,
    pub mem_total: u64,
    pub mem_allocated: u64,
    pub fragmentation: ClusterFragmentation,
    /// What the whole fleet costs per hour right now.
    pub burn: MicrosPerHour,
    /// GPUs whose source failed after their last sample.
    #[serde(default)]
    pub gpus_stale: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub id: NodeId,
    pub name: String,
    pub instance_type: String,
    pub zone: String,
    pub billing: BillingMode,
    pub gpu_model: String,
    pub state: String,
    pub up: bool,
    pub price: Option<MicrosPerHour>,
    pub max_price: Option<MicrosPerHour>,
    pub gpus: Vec<GpuView>,
}

impl NodeView {
    /// The pool the node belongs to (names as cleaned for the view).
    pub fn pool(&self) -> crate::domain::job::PoolTarget {
        crate::domain::job::PoolTarget { billing: self.billing, instance_type: self.instance_type.clone(), zone: self.zone.clone() }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuView {
    pub index: u8,
    pub util: Option<f32>,
    pub mem_total: Mib,
    pub mem_used: Option<Mib>,
    pub mem_allocated: Mib,
    pub largest_free: Mib,
    pub fragmentation: f64,
    pub jobs: Vec<JobId>,
    pub exclusive: bool,
    /// The figures are old: its source failed after the last sample.
    #[serde(default)]
    pub stale: bool,
    #[serde(default)]
    pub health: Option<crate::domain::event::GpuHealth>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub depth: u32,
    pub gpus_asked: u32,
    pub oldest_wait: Option<Secs>,
    pub oldest_job: Option<JobId>,
    pub by_tenant: Vec<TenantQueue>,
    pub running: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantQueue {
    pub tenant: String,
    pub queued: u32,
    pub gpus_asked: u32,
    pub running: u32,
    pub gpus_held: u32,
    /// Of `gpus_held`, those borrowed beyond the quota (preempted first).
    pub borrowed_gpus: u32,
    pub quota_gpus: u32,
    pub oldest_wait: Option<Secs>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub id: JobId,
    pub name: String,
    pub tenant: String,
    pub project: String,
    pub env: String,
    pub model: String,
    pub class: JobClass,
    pub phase: Phase,
    /// "requeued" for a queued job that ran before, else the phase label.
    pub state: String,
    pub gpus: u8,
    pub gpu_mem: Mib,
    pub node: Option<String>,
    pub billing: Option<BillingMode>,
    pub progress: f64,
    pub wait: Secs,
    pub eta: Option<Secs>,
    /// For a job not yet running: its predicted run time (from jobs like it).
    #[serde(default)]
    pub predicted_runtime: Option<Secs>,
    pub cost: Micros,
    pub attempts: u32,
    /// Runs on capacity borrowed beyond its tenant's quota.
    pub borrowed: bool,
    /// Waited past its class's limit and was escalated.
    pub escalated: bool,
    /// The pool an operator sent it to, until it is placed there.
    #[serde(default)]
    pub target: Option<crate::domain::job::PoolTarget>,
    /// Share of the job computed since its last checkpoint: what a stop
    /// without saving would lose.
    #[serde(default)]
    pub unsaved: f64,
    /// When it last saved, and how long its saves take (measured).
    #[serde(default)]
    pub last_save: Option<At>,
    #[serde(default)]
    pub save_secs: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MarketRow {
    pub zone: String,
    pub instance_type: String,
    pub price: Option<MicrosPerHour>,
    pub on_demand: MicrosPerHour,
    /// Max prices of the spot instances bought in this pool.
    pub max_prices: Vec<MicrosPerHour>,
    pub nodes_up: u32,
    pub nodes_total: u32,
    /// The last quote seen, and when the price last changed.
    pub updated_at: Option<At>,
    pub changed_at: Option<At>,
    pub change: i64,
    /// The least-squares trend's direction as of the last quote (what the
    /// max prices are rebased on); the change's direction when there is none.
    pub trend: Trend,
    /// That trend's slope as a fraction of the price per hour (+0.12 = +12%/h).
    #[serde(default)]
    pub trend_per_hour: Option<f64>,
    /// Next-minute interruption risk of a fresh instance of the type.
    #[serde(default)]
    pub hazard: Option<PoolHazard>,
    /// Price points over the history window, oldest first.
    pub history: Vec<(At, MicrosPerHour)>,
}

/// `HazardModel::view` for a pool's instance type, as of `View::at`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolHazard {
    /// The blended next-minute probability.
    pub p: f64,
    /// Interruptions of the type in the recent (5-minute) window.
    pub recent_events: u32,
    /// The long-run (Kaplan–Meier) next-minute probability, if the type has lifetimes.
    pub long_run: Option<f64>,
}

/// A job on a spot node: its max price against the market.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpotJobRow {
    pub id: JobId,
    pub name: String,
    pub node: String,
    pub zone: String,
    pub instance_type: String,
    pub phase: Phase,
    pub market: Option<MicrosPerHour>,
    /// The job's max price (`Bid::cap`).
    pub cap: Option<MicrosPerHour>,
    /// `cap / market − 1`: negative when the market is above the cap.
    pub headroom: Option<f64>,
    pub coefficient: Option<f64>,
    pub mode: Option<BidMode>,
    pub verdict: Option<Verdict>,
    /// The checkpoint interval set from the risk, and whether it was shortened.
    pub interval: Option<Secs>,
    pub shortened: bool,
    pub p_next_minute: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetRow {
    pub tenant: String,
    /// What the tenant's running work costs per hour now.
    pub burn: MicrosPerHour,
    pub month_to_date: Micros,
    pub budget: Micros,
    /// Month-to-date plus the current burn until the month ends.
    pub projected: Micros,
    pub gpus_held: u32,
    pub quota_gpus: u32,
    /// The step the room enforces (as of the last event).
    #[serde(default = "level_ok")]
    pub level: BudgetLevel,
    /// The notify, limit and block thresholds as amounts (`config.cost.budget`
    /// percentages of `budget`; all zero when no budget is set).
    #[serde(default)]
    pub notify_at: Micros,
    #[serde(default)]
    pub limit_at: Micros,
    #[serde(default)]
    pub block_at: Micros,
    /// The operator's approval of an overrun this month, if any.
    #[serde(default)]
    pub approval: Option<ApprovalView>,
    /// Total cost (instance time and services) per 1,000 requests and per
    /// 1,000,000 tokens, over the tenant's jobs that reported them.
    #[serde(default)]
    pub per_1k_requests: Option<Micros>,
    #[serde(default)]
    pub per_1m_tokens: Option<Micros>,
}

fn level_ok() -> BudgetLevel {
    BudgetLevel::Ok
}

/// A tenant's approval of an overrun (`cost::budget::Approval`), cleaned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalView {
    pub user: String,
    pub origin: String,
    pub at: At,
    pub reason: String,
    /// Extra spend allowed past the block threshold.
    pub amount: Option<Micros>,
    pub until: Option<At>,
    /// Still lifts the limit and the block now (not used up nor expired).
    pub in_force: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlarmRow {
    pub id: String,
    pub raised_at: At,
    pub text: String,
    /// Who acknowledged it and when; still active until its condition clears.
    #[serde(default)]
    pub acked_by: Option<String>,
    #[serde(default)]
    pub acked_at: Option<At>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub stats: Stats,
    pub spend_by_mode: [Micros; 3],
    pub idle_by_mode: [Micros; 3],
    pub gpu_hours_allocated: [f64; 3],
    pub gpu_hours_idle: [f64; 3],
    pub spend: Micros,
    pub mean_wait: Option<Secs>,
    /// Mean job completion time (submission to done) of finished jobs.
    pub mean_jct: Option<Secs>,
    /// Storage, checkpoint I/O and network, on top of `spend`.
    #[serde(default)]
    pub services: Micros,
    /// What the Holt-Winters day-ahead forecast says the rest of the month costs.
    #[serde(default)]
    pub forecast_rest_of_month: Option<Micros>,
}

impl Room {
    pub fn view(&self) -> View {
        let now = self.now;
        let mut view = View {
            at: now,
            events: self.stats.events,
            discipline: self.config.sched.discipline.discipline().name().to_string(),
            ..View::default()
        };
        self.fill_nodes(&mut view);
        self.fill_jobs(&mut view);
        self.fill_market(&mut view);
        self.fill_spot_jobs(&mut view);
        self.fill_budgets(&mut view);
        view.alarms = self
            .alarms
            .iter()
            .rev()
            .map(|(id, a)| AlarmRow {
                id: clean(id),
                raised_at: a.raised_at,
                text: clean(&a.text),
                acked_by: a.acked.as_ref().map(|k| clean(&k.user)),
                acked_at: a.acked.as_ref().map(|k| k.at),
            })
            .collect();
        view.alarms.sort_by(|a, b| b.raised_at.cmp(&a.raised_at).then(a.id.cmp(&b.id)));
        view.log = self.log.iter().cloned().collect();
        view.sources = self
            .sources
            .iter()
            .map(|(name, s)| SourceView { name: name.clone(), ok: s.ok, detail: s.detail.clone(), since: s.since })
            .collect();
        view.slurm = self.slurm_view();
        view.audit = self
            .audit
            .iter()
            .skip(self.audit.len().saturating_sub(AUDIT_SHOWN))
            .map(|a| AuditEntry { at: a.at, user: clean(&a.user), origin: clean(&a.origin), what: clean(&a.what) })
            .collect();
        view.totals = Totals {
            stats: self.stats.clone(),
            spend_by_mode: self.books.spend,
            idle_by_mode: self.books.idle_spend,
            gpu_hours_allocated: self.books.gpu_ms_allocated.map(|ms| ms as f64 / 3.6e6),
            gpu_hours_idle: self.books.gpu_ms_idle.map(|ms| ms as f64 / 3.6e6),
            spend: self.books.total(),
            mean_wait: (self.stats.wait_count > 0).then(|| Secs(self.stats.wait_secs_sum / self.stats.wait_count as i64)),
            mean_jct: (self.stats.done > 0).then(|| Secs(self.stats.jct_secs_sum / self.stats.done as i64)),
            services: self.books.services,
            forecast_rest_of_month: now.and_then(|at| self.projected_rest_of_month(at)),
        };
        view
    }

    fn fill_nodes(&self, view: &mut View) {
        let mut util_sum = 0.0;
        let mut util_n = 0u32;
        let cluster = &mut view.cluster;
        let mut burn = 0i64;
        for node in self.nodes.values() {
            cluster.nodes_total += 1;
            let up = node.is_up();
            if up {
                cluster.nodes_up += 1;
                burn += self.node_rate(node).map(|r| r.0).unwrap_or(0);
            }
            let gpus = node
                .gpus
                .iter()
                .map(|gpu| {
                    if up {
                        cluster.gpus_total += 1;
                        cluster.mem_total += u64::from(gpu.memory.0);
                        cluster.mem_allocated += u64::from(gpu.allocated().0);
                        if !gpu.allocations.is_empty() {
                            cluster.gpus_busy += 1;
                        }
                        if gpu.stale {
                            cluster.gpus_stale += 1;
                        }
                        if let Some(u) = gpu.util {
                            util_sum += f64::from(u);
                            util_n += 1;
                        }
                    }
                    GpuView {
                        index: gpu.index,
                        util: if up { gpu.util } else { None },
                        mem_total: gpu.memory,
                        mem_used: if up { gpu.mem_used } else { None },
                        mem_allocated: gpu.allocated(),
                        largest_free: if gpu.has_exclusive() { Mib(0) } else { gpu.largest_free_block() },
                        fragmentation: gpu.fragmentation(),
                        jobs: gpu.allocations.iter().map(|a| a.job).collect(),
                        exclusive: gpu.has_exclusive(),
                        stale: gpu.stale,
                        health: gpu.health.clone(),
                    }
                })
                .collect();
            let state = match &node.state {
                NodeState::Up => "up".to_string(),
                NodeState::Draining { deadline } => match self.now {
                    Some(now) => format!("draining {}s", (*deadline - now).num_seconds().max(0)),
                    None => "draining".to_string(),
                },
                NodeState::Down { .. } => "down".to_string(),
            };
            view.nodes.push(NodeView {
                id: node.spec.id,
                name: clean(&node.spec.name),
                instance_type: clean(&node.spec.instance_type),
                zone: clean(&node.spec.zone),
                billing: node.spec.billing,
                gpu_model: clean(&node.spec.gpu_model),
                state,
                up,
                price: self.node_rate(node),
                max_price: node.spec.max_price,
                gpus,
            });
        }
        cluster.util_mean = if util_n > 0 { util_sum / f64::from(util_n) } else { 0.0 };
        view.pools = self.pool_rows();
        cluster.fragmentation = fragmentation::measure(&self.nodes);
        cluster.burn = MicrosPerHour(burn);
    }

    fn pool_rows(&self) -> Vec<PoolRow> {
        let mut pools: BTreeMap<crate::domain::job::PoolTarget, PoolRow> = BTreeMap::new();
        for node in self.nodes.values() {
            let target = crate::domain::job::PoolTarget::of(&node.spec);
            let row = pools.entry(target.clone()).or_insert_with(|| PoolRow {
                target: crate::domain::job::PoolTarget {
                    billing: target.billing,
                    instance_type: clean(&target.instance_type),
                    zone: clean(&target.zone),
                },
                nodes_up: 0,
                nodes_total: 0,
                gpus_free: 0,
                gpus_free_one_node: 0,
                gpus_total: 0,
                price: None,
            });
            row.nodes_total += 1;
            row.gpus_total += node.gpus.len() as u32;
            if node.accepts_work() {
                row.nodes_up += 1;
                let free = node.gpus.iter().filter(|g| g.allocations.is_empty()).count() as u32;
                row.gpus_free += free;
                row.gpus_free_one_node = row.gpus_free_one_node.max(free);
            }
            row.price = row.price.or(self.node_rate(node));
        }
        pools.into_values().collect()
    }

    fn fill_jobs(&self, view: &mut View) {
        let now = self.now.unwrap_or_default();
        let borrowed = self.borrowed();
        let mut running = Vec::new();
        let mut queued = Vec::new();
        for job in self.active.iter().filter_map(|id| self.jobs.get(id)) {
            let phase = job.phase();
            let node = job.placement.as_ref().and_then(|p| self.nodes.get(&p.node));
            let eta = self
                .rates
                .get(&job.spec.id)
                .and_then(|r| r.remaining_secs(job.spec.steps_total.saturating_sub(job.steps_done)))
                .and_then(|(mean, _)| Secs::from_f64(mean));
            let row = JobRow {
                id: job.spec.id,
                name: clean(&job.spec.name),
                tenant: clean(&job.spec.tags.tenant.0),
                project: clean(&job.spec.tags.project),
                env: clean(&job.spec.tags.env),
                model: clean(&job.spec.tags.model),
                class: job.spec.class,
                phase,
                state: if phase == Phase::Queued && job.requeues > 0 { "requeued".into() } else { phase.label().into() },
                gpus: job.spec.gpus,
                gpu_mem: job.spec.gpu_mem,
                node: node.map(|n| clean(&n.spec.name)),
                billing: node.map(|n| n.spec.billing),
                progress: job.progress(),
                wait: Secs(job.wait_secs(now)),
                eta,
                predicted_runtime: (phase == Phase::Queued)
                    .then(|| self.predictor.predict(job))
                    .flatten()
                    // A handful of finished jobs say little; show it once there are enough.
                    .filter(|p| p.samples >= crate::predict::lifetime::MIN_RELIABLE_SAMPLES)
                    .and_then(|p| Secs::from_f64(p.mean_secs)),
                cost: job.cost,
                attempts: job.attempts,
                borrowed: borrowed.contains(&job.spec.id),
                escalated: job.escalated,
                target: job.target.as_deref().cloned(),
                unsaved: if job.spec.steps_total == 0 {
                    0.0
                } else {
                    (job.steps_done.saturating_sub(job.steps_saved) as f64 / job.spec.steps_total as f64).clamp(0.0, 1.0)
                },
                last_save: job.last_checkpoint_at,
                save_secs: job.checkpoint_secs,
            };
            if phase == Phase::Queued {
                queued.push((job, row));
            } else {
                running.push(row);
            }
        }
        let q = &mut view.queue;
        q.depth = queued.len() as u32;
        q.running = running.len() as u32;
        q.gpus_asked = queued.iter().map(|(j, _)| u32::from(j.spec.gpus)).sum();
        if let Some((job, row)) = queued.iter().max_by_key(|(j, r)| (r.wait, std::cmp::Reverse(j.spec.id))) {
            q.oldest_wait = Some(row.wait);
            q.oldest_job = Some(job.spec.id);
        }
        for (tenant, spec) in &self.tenants {
            let mine_q: Vec<_> = queued.iter().filter(|(j, _)| &j.spec.tags.tenant == tenant).collect();
            let held: Vec<&JobRow> = running.iter().filter(|r| r.tenant == clean(&tenant.0)).collect();
            q.by_tenant.push(TenantQueue {
                tenant: clean(&tenant.0),
                queued: mine_q.len() as u32,
                gpus_asked: mine_q.iter().map(|(j, _)| u32::from(j.spec.gpus)).sum(),
                running: held.len() as u32,
                gpus_held: held.iter().map(|r| u32::from(r.gpus)).sum(),
                borrowed_gpus: held.iter().filter(|r| r.borrowed).map(|r| u32::from(r.gpus)).sum(),
                quota_gpus: spec.quota_gpus,
                oldest_wait: mine_q.iter().map(|(_, r)| r.wait).max(),
            });
        }
        let position: std::collections::BTreeMap<JobId, usize> =
            self.ordered_queue(now).iter().enumerate().map(|(i, j)| (j.spec.id, i)).collect();
        queued.sort_by_key(|(j, _)| position.get(&j.spec.id).copied().unwrap_or(usize::MAX));
        running.sort_by(|a, b| a.node.cmp(&b.node).then(a.id.cmp(&b.id)));
        view.jobs = running;
        view.jobs.extend(queued.into_iter().map(|(_, r)| r));
    }

    fn fill_market(&self, view: &mut View) {
        let now = self.now.unwrap_or_default();
        for (key, pool) in &self.market.pools {
            let nodes: Vec<_> = self.nodes.values().filter(|n| n.spec.billing == BillingMode::Spot && n.spec.pool() == *key).collect();
            let (change, trend) = self.market.change_over(key, now, self.config.trend_window).unwrap_or((0, Trend::Flat));
            let trend = pool.trend.as_ref().map_or(trend, |tr| tr.direction);
            let hazard = self.now.map(|at| {
                let risk = self.hazard.view(&key.instance_type, at, self.spot_at_risk(&key.instance_type).max(1));
                PoolHazard { p: risk.p, recent_events: risk.recent_events as u32, long_run: risk.long_run }
            });
            view.market.push(MarketRow {
                zone: clean(&key.zone),
                instance_type: clean(&key.instance_type),
                price: pool.price,
                on_demand: pool.on_demand,
                max_prices: nodes.iter().filter_map(|n| n.spec.max_price).collect(),
                nodes_up: nodes.iter().filter(|n| n.is_up()).count() as u32,
                nodes_total: nodes.len() as u32,
                updated_at: pool.updated_at,
                changed_at: pool.changed_at,
                change,
                trend,
                trend_per_hour: pool.trend.as_ref().map(|tr| tr.relative).filter(|r| r.is_finite()),
                hazard,
                history: pool.history.iter().copied().collect(),
            });
        }
    }

    fn fill_spot_jobs(&self, view: &mut View) {
        for job in self.active.iter().filter_map(|id| self.jobs.get(id)) {
            let phase = job.phase();
            if !phase.holds_gpus() {
                continue;
            }
            let Some(node) = job.placement.as_ref().and_then(|p| self.nodes.get(&p.node)) else { continue };
            if node.spec.billing != BillingMode::Spot {
                continue;
            }
            let market = self.market.price(&node.spec.pool());
            let risk = job.risk.as_ref();
            let bid = risk.and_then(|r| r.bid);
            let cap = bid.map(|b| b.cap);
            let headroom = match (cap, market) {
                (Some(c), Some(m)) if m.0 > 0 => Some(c.0 as f64 / m.0 as f64 - 1.0),
                _ => None,
            };
            view.spot_jobs.push(SpotJobRow {
                id: job.spec.id,
                name: clean(&job.spec.name),
                node: clean(&node.spec.name),
                zone: clean(&node.spec.zone),
                instance_type: clean(&node.spec.instance_type),
                phase,
                market,
                cap,
                headroom,
                coefficient: bid.map(|b| b.coefficient),
                mode: bid.map(|b| b.mode),
                verdict: bid.map(|b| b.verdict),
                interval: risk.map(|r| r.interval),
                shortened: risk.is_some_and(|r| r.shortened),
                p_next_minute: risk.map(|r| r.p_next_minute),
            });
        }
        view.spot_jobs.sort_by(|a, b| match (a.headroom, b.headroom) {
            (Some(x), Some(y)) => x.total_cmp(&y).then(a.id.cmp(&b.id)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.id.cmp(&b.id),
        });
    }

    fn fill_budgets(&self, view: &mut View) {
        let now = self.now.unwrap_or_default();
        // Burn per tenant: each unit's hourly share of its instance (as the
        // accrual charges it: 1/gpus, or a MIG slice's memory share), split
        // over its jobs by memory.
        let mut burn: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
        let mut held: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
        for node in self.nodes.values().filter(|n| n.is_up()) {
            let Some(rate) = self.node_rate(node) else { continue };
            for gpu in &node.gpus {
                let (num, den) = node.spec.share_of(gpu.memory, gpu.mig);
                let per_gpu = rate.0 as f64 * num as f64 / den.max(1) as f64;
                let exclusive = gpu.has_exclusive();
                let total = if exclusive { gpu.allocated().0 } else { gpu.memory.0 };
                for alloc in &gpu.allocations {
                    if let Some(job) = self.jobs.get(&alloc.job) {
                        let share = f64::from(alloc.size.0) / f64::from(total.max(1));
                        *burn.entry(job.spec.tags.tenant.0.as_str()).or_default() += per_gpu * share;
                    }
                }
            }
        }
        for job in self.active.iter().filter_map(|id| self.jobs.get(id)) {
            if job.phase().holds_gpus() {
                *held.entry(job.spec.tags.tenant.0.as_str()).or_default() += u32::from(job.spec.gpus);
            }
        }
        // A tenant that is a Slurm account holds what its Slurm jobs hold
        // too: one quota, wherever its GPUs run.
        let slurm_held = self.slurm.snapshot.as_ref().map(crate::sched::slurm_advice::usage).unwrap_or_default();
        // Unit costs: (cost, requests) and (cost, tokens) over the jobs that
        // reported output: finished ones from the books, running ones live.
        let mut output: std::collections::BTreeMap<&str, [(i128, i128); 2]> = std::collections::BTreeMap::new();
        for (tenant, book) in &self.books.tenants {
            let d = book.done_output;
            output.insert(tenant.0.as_str(), [(d.request_cost.0.into(), d.requests.into()), (d.token_cost.0.into(), d.tokens.into())]);
        }
        for job in self.active.iter().filter_map(|id| self.jobs.get(id)).filter(|j| j.requests > 0 || j.tokens > 0) {
            let total = i128::from((job.cost + job.service_cost).0);
            let sums = output.entry(job.spec.tags.tenant.0.as_str()).or_default();
            for (sum, n) in sums.iter_mut().zip([job.requests, job.tokens]) {
                if n > 0 {
                    sum.0 += total;
                    sum.1 += i128::from(n);
                }
            }
        }
        let per = |(cost, n): (i128, i128), scale: i128| {
            (n > 0).then(|| Micros((cost * scale / n).clamp(i64::MIN.into(), i64::MAX.into()) as i64))
        };
        let policy = &self.config.cost.budget;
        let hours_left = (start_of_next_month(now) - now).num_seconds() as f64 / 3600.0;
        for (tenant, spec) in &self.tenants {
            let rate = burn.get(tenant.0.as_str()).copied().unwrap_or(0.0);
            let mtd = self.books.month_to_date(tenant, now);
            let budget = spec.monthly_budget;
            let at = |pct: u32| if budget.0 > 0 { threshold(budget, pct) } else { Micros::ZERO };
            let approval = self
                .approval(tenant)
                .filter(|a| crate::cost::books::month_of(a.at) == crate::cost::books::month_of(now))
                .map(|a| ApprovalView {
                    user: clean(&a.user),
                    origin: clean(&a.origin),
                    at: a.at,
                    reason: clean(&a.reason),
                    amount: a.amount,
                    until: a.until,
                    in_force: a.covers(budget, policy, mtd, now),
                });
            let [requests, tokens] = output.get(tenant.0.as_str()).copied().unwrap_or_default();
            view.budgets.push(BudgetRow {
                tenant: clean(&tenant.0),
                burn: MicrosPerHour(rate.round() as i64),
                month_to_date: mtd,
                budget: spec.monthly_budget,
                projected: mtd + Micros((rate * hours_left).round() as i64),
                gpus_held: held.get(tenant.0.as_str()).copied().unwrap_or(0).saturating_add(slurm_held.get(tenant.0.as_str()).copied().unwrap_or(0)),
                quota_gpus: spec.quota_gpus,
                level: self.budget_level_of(tenant),
                notify_at: at(policy.notify_pct),
                limit_at: at(policy.limit_pct),
                block_at: at(policy.block_pct),
                approval,
                per_1k_requests: per(requests, 1_000),
                per_1m_tokens: per(tokens, 1_000_000),
            });
        }
    }
}

impl View {
    pub fn severity_count(&self, severity: Severity) -> usize {
        self.log.iter().filter(|l| l.severity == severity).count()
    }
}
