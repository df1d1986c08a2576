//! Building the `View` from the `Room`: the one part of the room that reads
//! it whole, read-only, as a projection for the console. It cleans every
//! text that came from outside and derives the figures panes show (burn per
//! hour, projections, fragmentation), so panes only draw.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::Room;
use super::cost::node_rate;
use super::journal::AuditEntry;
use super::predict::{Likeness, Predictor};
use super::view::*;
use super::view_slurm::slurm_view;
use crate::cost::budget::threshold;
use crate::domain::cluster::{BillingMode, NodeState};
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::{Job, Phase};
use crate::domain::text::clean;
use crate::domain::units::{At, Mib, Micros, MicrosPerHour, Secs, start_of_next_month};
use crate::market::Trend;
use crate::sched::frag_gradient::{self, Shape};
use crate::sched::frag_measure::FleetMeasure;
use crate::sched::fragmentation::{self};
use crate::sched::quota::Held;

impl Room {
    pub fn view(&self) -> View {
        let now = self.now;
        let mut view =
            View { at: now, events: self.journal.stats.events, discipline: self.config.sched.discipline.discipline().name().to_string(), ..View::default() };
        self.fill_nodes(&mut view);
        // Read once: the job rows, spot rows and budgets each walk them, and a
        // walk of the job map costs a lookup per job (100,000 at scale).
        let active: Vec<&Job> = self.fleet.active_jobs().collect();
        self.fill_jobs(&mut view, &active);
        self.fill_market(&mut view);
        self.fill_spot_jobs(&mut view, &active);
        self.fill_budgets(&mut view, &active);
        view.alarms = self
            .journal
            .alarms
            .iter()
            .rev()
            .map(|(id, a)| AlarmRow {
                id: clean(id),
                raised_at: a.raised_at,
                text: clean(&a.text),
                acked_by: a.acked.as_ref().map(|k| clean(&k.user)),
                acked_at: a.acked.as_ref().map(|k| k.at),
                severity: a.severity,
                cleared_at: a.cleared_at,
            })
            .collect();
        sort_alarms(&mut view.alarms);
        view.log = self.journal.log.iter().cloned().collect();
        view.sources = self.sources.iter().map(|(name, s)| SourceView { name: name.clone(), ok: s.ok, detail: s.detail.clone(), since: s.since }).collect();
        view.slurm = slurm_view(&self.slurm, &self.config.slurm, &self.fleet.tenants, self.config.sched.discipline.name());
        view.capacity = self.capacity_view();
        view.audit = self
            .journal
            .audit
            .iter()
            .skip(self.journal.audit.len().saturating_sub(AUDIT_SHOWN))
            .map(|a| AuditEntry { at: a.at, user: clean(&a.user), origin: clean(&a.origin), what: clean(&a.what), refused: a.refused.as_deref().map(clean) })
            .collect();
        view.totals = Totals {
            stats: self.journal.stats.clone(),
            spend_by_mode: self.costs.books.spend,
            idle_by_mode: self.costs.books.idle_spend,
            gpu_hours_allocated: self.costs.books.gpu_ms_allocated.map(|ms| ms as f64 / 3.6e6),
            gpu_hours_idle: self.costs.books.gpu_ms_idle.map(|ms| ms as f64 / 3.6e6),
            spend: self.costs.books.total(),
            mean_wait: (self.journal.stats.wait_count > 0).then(|| Secs(self.journal.stats.wait_secs_sum / self.journal.stats.wait_count as i64)),
            mean_jct: (self.journal.stats.done > 0).then(|| Secs(self.journal.stats.jct_secs_sum / self.journal.stats.done as i64)),
            services: self.costs.books.services,
            forecast_rest_of_month: now.and_then(|at| self.forecast.projected_rest_of_month(at)),
        };
        view
    }

    fn fill_nodes(&self, view: &mut View) {
        let mut util_sum = 0.0;
        let mut util_n = 0u32;
        // FGD's measure for the typical shapes of what is queued and running.
        let workload =
            frag_gradient::workload_of(self.fleet.queued_ids().chain(self.fleet.holding_ids()).filter_map(|id| self.fleet.jobs.get(&id)).map(|j| &j.spec));
        let time_sharing = self.config.sched.time_sharing;
        // Nodes in the same state measure the same: on a large fleet most
        // are (full, or empty), and each measure looks at every group of
        // typical shapes.
        let measure = FleetMeasure::new(&workload);
        let mut measured: HashMap<frag_gradient::NodeFree, f64> = HashMap::new();
        let mut free_units = 0u64;
        let mut workload_frag = 0.0;
        let cluster = &mut view.cluster;
        let mut burn = 0i64;
        for node in self.fleet.nodes.values() {
            cluster.nodes_total += 1;
            let up = node.is_up();
            if up {
                cluster.nodes_up += 1;
                burn += node_rate(&self.market, node).map(|r| r.0).unwrap_or(0);
            }
            let gpus = node
                .gpus
                .iter()
                .map(|gpu| {
                    if up {
                        cluster.gpus_total += 1;
                        cluster.mem_total += u64::from(gpu.memory.0);
                        cluster.mem_allocated += u64::from(held_memory(gpu).0);
                        if !gpu.allocations.is_empty() || gpu.slurm_job.is_some() {
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
                        mem_allocated: held_memory(gpu),
                        largest_free: if gpu.has_exclusive() || gpu.slurm_job.is_some() { Mib(0) } else { gpu.largest_free_block() },
                        fragmentation: gpu.fragmentation(),
                        jobs: gpu.allocations.iter().map(|a| a.job).chain(gpu.slurm_job.map(JobId::slurm)).collect(),
                        exclusive: gpu.has_exclusive() || gpu.slurm_job.is_some(),
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
                NodeState::Booting { ready_at } => match self.now {
                    Some(now) => format!("booting {}s", (*ready_at - now).num_seconds().max(0)),
                    None => "booting".to_string(),
                },
                NodeState::Retiring { .. } => "releasing".to_string(),
            };
            // Slurm's own word for its nodes: drained and down read as such.
            let state = match (&node.slurm, &node.state) {
                (Some(s), NodeState::Up) => format!("slurm {}", clean(&s.state)),
                (Some(s), NodeState::Down { .. }) if s.powered_down() => "powered down".to_string(),
                _ => state,
            };
            let free = node.accepts_work().then(|| frag_gradient::node_free(node, time_sharing));
            free_units += free.as_ref().map_or(0, frag_gradient::NodeFree::free_units);
            let node_frag = free.map(|f| *measured.entry(f).or_insert_with_key(|f| measure.fragmentation(f)));
            workload_frag += node_frag.unwrap_or(0.0);
            view.nodes.push(NodeView {
                id: node.spec.id,
                // On a Slurm site the on-call engineer knows nodes by Slurm's names.
                name: clean(node.slurm.as_ref().filter(|s| !s.name.is_empty()).map_or(&node.spec.name, |s| &s.name)),
                instance_type: clean(&node.spec.instance_type),
                zone: clean(&node.spec.zone),
                billing: node.spec.billing,
                gpu_model: clean(&node.spec.gpu_model),
                state,
                up,
                price: node_rate(&self.market, node),
                max_price: node.spec.max_price,
                gpus,
                workload_frag: node_frag.map(|f| Mib(f.round() as u32)),
            });
        }
        cluster.util_mean = if util_n > 0 { util_sum / f64::from(util_n) } else { 0.0 };
        view.pools = self.pool_rows();
        cluster.fragmentation = fragmentation::measure(&self.fleet.nodes);
        let frees: Vec<frag_gradient::NodeFree> = measured.into_keys().collect();
        cluster.fragmentation.workload = if free_units > 0 { workload_frag / free_units as f64 } else { 0.0 };
        cluster.fragmentation.typical_shapes = workload.shapes.len() as u32;
        // Shapes that differ only in CPUs read the same: name each once.
        let mut unplaceable: Vec<String> = Vec::new();
        for label in measure.unplaceable(&frees).into_iter().map(shape_label) {
            if !unplaceable.contains(&label) {
                unplaceable.push(label);
            }
        }
        cluster.fragmentation.unplaceable = unplaceable;
        cluster.burn = MicrosPerHour(burn);
    }

    fn pool_rows(&self) -> Vec<PoolRow> {
        let mut pools: BTreeMap<crate::domain::job::PoolTarget, PoolRow> = BTreeMap::new();
        for node in self.fleet.nodes.values() {
            let target = crate::domain::job::PoolTarget::of(&node.spec);
            let row = pools.entry(target.clone()).or_insert_with(|| PoolRow {
                target: crate::domain::job::PoolTarget { billing: target.billing, instance_type: clean(&target.instance_type), zone: clean(&target.zone) },
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
            row.price = row.price.or(node_rate(&self.market, node));
        }
        pools.into_values().collect()
    }

    fn fill_jobs(&self, view: &mut View, active: &[&Job]) {
        let now = self.now.unwrap_or_default();
        let mut rows = Rows { now, borrowed: self.fleet.borrowed(), held: self.fleet.holdings().1, predicted: HashMap::new() };
        // Queued jobs in the discipline's order, built in that order rather
        // than sorted into it (100,000 queued jobs cost a sort per view).
        let mut queued: Vec<(&Job, JobRow)> = self
            .fleet
            .ordered_queue(&self.config.sched, now)
            .into_iter()
            .filter(|j| j.phase() == Phase::Queued)
            .map(|j| (j, self.job_row(j, &mut rows)))
            .collect();
        let mut running = Vec::new();
        let mut waiting = 0;
        for job in active {
            if job.phase() == Phase::Queued {
                waiting += 1;
            } else {
                running.push(self.job_row(job, &mut rows));
            }
        }
        // A waiting job the order does not list (never, while the fleet's
        // queue set and the jobs' phases agree) still shows, last.
        if waiting != queued.len() {
            let listed: HashSet<JobId> = queued.iter().map(|(j, _)| j.spec.id).collect();
            for job in active.iter().filter(|j| j.phase() == Phase::Queued && !listed.contains(&j.spec.id)) {
                queued.push((job, self.job_row(job, &mut rows)));
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
        // One pass over each list, not one per tenant; tenants are few, so
        // a short list beats hashing every job's tenant name.
        let mut waiting: Vec<(&TenantId, TenantQueue)> = Vec::new();
        for (job, row) in &queued {
            let tenant = &job.spec.tags.tenant;
            let at = match waiting.iter().position(|(t, _)| *t == tenant) {
                Some(at) => at,
                None => {
                    waiting.push((tenant, TenantQueue::default()));
                    waiting.len() - 1
                }
            };
            let t = &mut waiting[at].1;
            t.queued += 1;
            t.gpus_asked += u32::from(job.spec.gpus);
            t.oldest_wait = t.oldest_wait.max(Some(row.wait));
        }
        let mut holding: Vec<(&str, TenantQueue)> = Vec::new();
        for row in &running {
            let at = match holding.iter().position(|(t, _)| *t == row.tenant) {
                Some(at) => at,
                None => {
                    holding.push((&row.tenant, TenantQueue::default()));
                    holding.len() - 1
                }
            };
            let t = &mut holding[at].1;
            t.running += 1;
            t.gpus_held += u32::from(row.gpus);
            t.borrowed_gpus += if row.borrowed { u32::from(row.gpus) } else { 0 };
        }
        for (tenant, spec) in &self.fleet.tenants {
            let name = clean(&tenant.0);
            let w = waiting.iter().find(|(t, _)| *t == tenant).map(|(_, q)| q.clone()).unwrap_or_default();
            let h = holding.iter().find(|(t, _)| *t == name).map(|(_, q)| q.clone()).unwrap_or_default();
            q.by_tenant.push(TenantQueue {
                tenant: name,
                queued: w.queued,
                gpus_asked: w.gpus_asked,
                running: h.running,
                gpus_held: h.gpus_held,
                borrowed_gpus: h.borrowed_gpus,
                quota_gpus: spec.quota_gpus,
                oldest_wait: w.oldest_wait,
            });
        }
        running.sort_by(|a, b| a.node.cmp(&b.node).then(a.id.cmp(&b.id)));
        view.jobs = running;
        view.jobs.extend(queued.into_iter().map(|(_, r)| r));
    }

    /// One job's row in the view.
    fn job_row<'j>(&self, job: &'j Job, rows: &mut Rows<'j>) -> JobRow {
        let now = rows.now;
        let phase = job.phase();
        let node = job.placement.as_ref().and_then(|p| self.fleet.nodes.get(&p.node));
        let eta = self
            .fleet
            .rates
            .get(&job.spec.id)
            .and_then(|r| r.remaining_secs(job.spec.steps_total.saturating_sub(job.steps_done)))
            .and_then(|(mean, _)| Secs::from_f64(mean));
        let predicted_runtime = match phase {
            Phase::Queued => *rows.predicted.entry(Predictor::likeness(job)).or_insert_with(|| {
                self.predictor
                    .predict(job)
                    // A handful of finished jobs say little; show it once there are enough.
                    .filter(|p| p.samples >= crate::predict::lifetime::MIN_RELIABLE_SAMPLES)
                    .and_then(|p| Secs::from_f64(p.mean_secs))
            }),
            _ => None,
        };
        JobRow {
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
            predicted_runtime,
            cost: job.cost,
            attempts: job.attempts,
            borrowed: rows.borrowed.contains(&job.spec.id),
            escalated: job.escalated,
            target: job.target.as_deref().cloned(),
            pool: job.spec.pool,
            unsaved: if job.spec.steps_total == 0 {
                0.0
            } else {
                (job.steps_done.saturating_sub(job.steps_saved) as f64 / job.spec.steps_total as f64).clamp(0.0, 1.0)
            },
            last_save: job.last_checkpoint_at,
            save_secs: job.checkpoint_secs,
            waits_for: (phase == Phase::Queued).then(|| self.waits_for(job, now, &rows.held)),
        }
    }

    fn fill_market(&self, view: &mut View) {
        let now = self.now.unwrap_or_default();
        for (key, pool) in &self.market.pools {
            let nodes: Vec<_> = self.fleet.nodes.values().filter(|n| n.spec.billing == BillingMode::Spot && n.spec.pool() == *key).collect();
            let (change, trend) = self.market.change_over(key, now, self.config.trend_window).unwrap_or((0, Trend::Flat));
            let trend = pool.trend.as_ref().map_or(trend, |tr| tr.direction);
            let hazard = self.now.map(|at| {
                let risk = self.hazard.view(&key.instance_type, at, self.fleet.spot_at_risk(&key.instance_type).max(1));
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

    fn fill_spot_jobs(&self, view: &mut View, active: &[&Job]) {
        for job in active {
            let phase = job.phase();
            if !phase.holds_gpus() {
                continue;
            }
            let Some(node) = job.placement.as_ref().and_then(|p| self.fleet.nodes.get(&p.node)) else { continue };
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
        // Slurm's jobs on spot nodes: the cap is the instance's max price
        // (what `gpuroom slurm-resume` asked EC2 for), the job has no bid of its own.
        let names: BTreeMap<u64, &str> = self.slurm.snapshot.iter().flat_map(|s| s.jobs.iter().map(|j| (j.id, j.name.as_str()))).collect();
        for node in self.fleet.nodes.values().filter(|n| n.slurm.is_some() && n.is_up() && n.spec.billing == BillingMode::Spot) {
            let mut held: Vec<u64> = node.gpus.iter().filter_map(|g| g.slurm_job).collect();
            held.sort_unstable();
            held.dedup();
            let market = self.market.price(&node.spec.pool());
            let cap = node.spec.max_price;
            let headroom = match (cap, market) {
                (Some(c), Some(m)) if m.0 > 0 => Some(c.0 as f64 / m.0 as f64 - 1.0),
                _ => None,
            };
            for id in held {
                view.spot_jobs.push(SpotJobRow {
                    id: JobId::slurm(id),
                    name: clean(names.get(&id).copied().unwrap_or("")),
                    node: clean(&node.spec.name),
                    zone: clean(&node.spec.zone),
                    instance_type: clean(&node.spec.instance_type),
                    phase: Phase::Running,
                    market,
                    cap,
                    headroom,
                    coefficient: None,
                    mode: None,
                    verdict: None,
                    interval: None,
                    shortened: false,
                    p_next_minute: None,
                });
            }
        }
        view.spot_jobs.sort_by(|a, b| match (a.headroom, b.headroom) {
            (Some(x), Some(y)) => x.total_cmp(&y).then(a.id.cmp(&b.id)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.id.cmp(&b.id),
        });
    }

    fn fill_budgets(&self, view: &mut View, active: &[&Job]) {
        let now = self.now.unwrap_or_default();
        // Burn per tenant: each unit's hourly share of its instance (as the
        // accrual charges it: 1/gpus, or a MIG slice's memory share), split
        // over its jobs by memory.
        let mut burn: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
        let mut held: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
        for node in self.fleet.nodes.values().filter(|n| n.is_up()) {
            let Some(rate) = node_rate(&self.market, node) else { continue };
            for gpu in &node.gpus {
                let (num, den) = node.spec.share_of(gpu.memory, gpu.mig);
                let per_gpu = rate.0 as f64 * num as f64 / den.max(1) as f64;
                let exclusive = gpu.has_exclusive();
                let total = if exclusive { gpu.allocated().0 } else { gpu.memory.0 };
                for alloc in &gpu.allocations {
                    if let Some(job) = self.fleet.jobs.get(&alloc.job) {
                        let share = f64::from(alloc.size.0) / f64::from(total.max(1));
                        *burn.entry(job.spec.tags.tenant.0.as_str()).or_default() += per_gpu * share;
                    }
                }
                // A Slurm job's GPU burns for its account, whole.
                if let Some(tags) = gpu.slurm_job.and_then(|id| self.costs.slurm_tags.get(&JobId::slurm(id))) {
                    *burn.entry(tags.tenant.0.as_str()).or_default() += per_gpu;
                }
            }
        }
        for job in active {
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
        for (tenant, book) in &self.costs.books.tenants {
            let d = book.done_output;
            output.insert(tenant.0.as_str(), [(d.request_cost.0.into(), d.requests.into()), (d.token_cost.0.into(), d.tokens.into())]);
        }
        for job in active.iter().filter(|j| j.requests > 0 || j.tokens > 0) {
            let total = i128::from((job.cost + job.service_cost).0);
            let sums = output.entry(job.spec.tags.tenant.0.as_str()).or_default();
            for (sum, n) in sums.iter_mut().zip([job.requests, job.tokens]) {
                if n > 0 {
                    sum.0 += total;
                    sum.1 += i128::from(n);
                }
            }
        }
        let per = |(cost, n): (i128, i128), scale: i128| (n > 0).then(|| Micros((cost * scale / n).clamp(i64::MIN.into(), i64::MAX.into()) as i64));
        let policy = &self.config.cost.budget;
        let hours_left = (start_of_next_month(now) - now).num_seconds() as f64 / 3600.0;
        for (tenant, spec) in &self.fleet.tenants {
            let rate = burn.get(tenant.0.as_str()).copied().unwrap_or(0.0);
            let mtd = self.costs.books.month_to_date(tenant, now);
            let budget = spec.monthly_budget;
            let at = |pct: u32| if budget.0 > 0 { threshold(budget, pct) } else { Micros::ZERO };
            let approval = self.approval(tenant).filter(|a| crate::cost::books::month_of(a.at) == crate::cost::books::month_of(now)).map(|a| ApprovalView {
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
                level: self.budgets.level(tenant),
                notify_at: at(policy.notify_pct),
                limit_at: at(policy.limit_pct),
                block_at: at(policy.block_pct),
                approval,
                at_limit: policy.at_limit,
                per_1k_requests: per(requests, 1_000),
                per_1m_tokens: per(tokens, 1_000_000),
                all_time: self.costs.books.tenants.get(tenant).map_or(Micros::ZERO, |b| b.all_time),
            });
        }
    }

    fn capacity_view(&self) -> Option<CapacityView> {
        let cap = &self.capacity;
        if cap.pools.is_empty() {
            return None;
        }
        let now = self.now.unwrap_or_default();
        let pools = cap
            .pools
            .iter()
            .map(|(target, pool)| {
                let mine = |n: &&crate::domain::cluster::Node| cap.elastic.contains(&n.spec.id) && target.holds(&n.spec);
                let nodes: Vec<_> = self.fleet.nodes.values().filter(mine).collect();
                ElasticPoolRow {
                    target: target.clone(),
                    up: nodes.iter().filter(|n| n.accepts_work()).count() as u32,
                    booting: nodes.iter().filter(|n| matches!(n.state, NodeState::Booting { .. })).count() as u32,
                    max_nodes: pool.max_nodes,
                    warm_min: pool.warm_min,
                    gpus_per_node: pool.node.gpu_count,
                    price: node_rate(&self.market, &crate::domain::cluster::Node::new(pool.node.clone(), now)),
                    backoff_until: cap.backoff.get(target).copied().filter(|until| *until > now),
                }
            })
            .collect();
        let launches = cap
            .launches
            .values()
            .map(|r| {
                let ready: Vec<At> = r
                    .nodes
                    .iter()
                    .filter_map(|id| match self.fleet.nodes.get(id).map(|n| &n.state) {
                        Some(NodeState::Booting { ready_at }) => Some(*ready_at),
                        _ => None,
                    })
                    .collect();
                LaunchRow {
                    id: r.request.id,
                    pool: r.request.pool.clone(),
                    count: r.request.count,
                    unanswered: r.unanswered,
                    booting: ready.len() as u32,
                    eta: ready.iter().max().map(|t| Secs((*t - now).num_seconds().max(0))),
                    max_price: r.request.max_price,
                    reason: clean(&r.request.reason),
                }
            })
            .collect();
        let releasing = cap.releasing.iter().chain(cap.retiring.iter()).map(|(id, why)| (self.fleet.node_name(*id), clean(why))).collect();
        let proposals = cap
            .proposals
            .iter()
            .map(|(id, (since, p))| ProposalRow { id: *id, since: *since, text: clean(&super::capacity::describe(p, &self.fleet)) })
            .collect();
        let (mut elastic_burn, mut fixed_burn) = (0i64, 0i64);
        for node in self.fleet.nodes.values().filter(|n| n.is_up()) {
            let rate = node_rate(&self.market, node).map_or(0, |r| r.0);
            if cap.elastic.contains(&node.spec.id) {
                elastic_burn += rate;
            } else {
                fixed_burn += rate;
            }
        }
        let s = &cap.stats;
        Some(CapacityView {
            mode: self.config.capacity.mode.label().to_string(),
            pools,
            launches,
            releasing,
            proposals,
            launch_requests: s.launch_requests,
            nodes_launched: s.nodes_launched,
            launch_failures: s.launch_failures,
            releases: s.releases,
            consolidations: s.consolidations,
            elastic_burn: MicrosPerHour(elastic_burn),
            fixed_burn: MicrosPerHour(fixed_burn),
        })
    }

    /// Why a queued job waits, in a few words.
    fn waits_for(&self, job: &Job, now: At, held: &BTreeMap<TenantId, Held>) -> String {
        let tenant = &job.spec.tags.tenant;
        let at_limit = self.config.cost.budget.at_limit;
        let anywhere = self.budgets.allows(at_limit, tenant, false);
        let on_spot = self.budgets.allows(at_limit, tenant, true);
        if !anywhere && !on_spot {
            return "budget: blocked until approved".into();
        }
        if !anywhere && job.spec.pool == crate::domain::job::PoolPreference::NoSpot {
            return "budget: spot only, and it may not run on spot".into();
        }
        let quota = self.fleet.tenants.get(tenant);
        if crate::sched::quota::admit(&job.spec, held.get(tenant).copied().unwrap_or_default(), quota) == crate::sched::quota::Admission::Refused {
            let (have, q) = (held.get(tenant).map_or(0, |h| h.gpus), quota.map_or(0, |q| q.quota_gpus));
            return format!("quota: {} holds {have} GPUs of {q} (+ borrowing)", clean(&tenant.0));
        }
        if let Some(launch) = self.capacity.launch_for(job.spec.id) {
            let ready = launch.nodes.iter().filter_map(|id| match self.fleet.nodes.get(id).map(|n| &n.state) {
                Some(NodeState::Booting { ready_at }) => Some(*ready_at),
                _ => None,
            });
            return match ready.max() {
                Some(t) => format!("capacity booting: {} up in {}", launch.request.pool, Secs((t - now).num_seconds().max(0))),
                None => format!("capacity launching: {} asked {} ago", launch.request.pool, Secs((now - launch.asked_at).num_seconds().max(0))),
            };
        }
        if let Some(to) = job.target.as_deref()
            && !self.capacity.pools.contains_key(to)
        {
            return format!("no fit: sent to {to}, waits for room there");
        }
        if job.spec.pool == crate::domain::job::PoolPreference::SpotOnly && !job.escalated && self.capacity.spot_unavailable(now) {
            return "spot capacity unavailable".into();
        }
        if self.capacity.pools.is_empty() || self.config.capacity.mode == crate::capacity::CapacityMode::Off {
            "no fit: waiting for GPUs to free".into()
        } else {
            "no fit: capacity is planned each minute".into()
        }
    }
}

/// What every job row of one view reads: the moment, who borrows, what
/// each tenant holds, and the predictions made so far, one per likeness.
struct Rows<'j> {
    now: At,
    borrowed: std::collections::BTreeSet<JobId>,
    held: BTreeMap<TenantId, Held>,
    predicted: HashMap<Likeness<'j>, Option<Secs>>,
}

/// What is allocated of a GPU: a Slurm job's GRES is the whole of it.
fn held_memory(gpu: &crate::domain::cluster::Gpu) -> Mib {
    if gpu.slurm_job.is_some() && gpu.allocations.is_empty() { gpu.memory } else { gpu.allocated() }
}

/// A job shape as the memory pane names it: `4×GPU` for whole GPUs,
/// `1×12.0G` for a share of one.
fn shape_label(shape: &Shape) -> String {
    if shape.whole { format!("{}×GPU", shape.gpus) } else { format!("{}×{}", shape.gpus, Mib(shape.per_gpu)) }
}

#[cfg(test)]
mod tests {
    use crate::domain::cluster::BillingMode;
    use crate::domain::event::{Effect, Event};
    use crate::domain::testkit::{job_spec, node_spec, t, tenant_spec};
    use crate::domain::units::Mib;
    use crate::room::{Room, RoomConfig};
    use crate::sched::FitPolicy;

    #[test]
    fn the_view_measures_fragmentation_for_the_jobs_shapes_and_names_what_fits_nowhere() {
        let mut config = RoomConfig::default();
        config.sched.fit = FitPolicy::Fragmentation;
        let mut room = Room::new(config);
        room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 64) });
        room.apply(t(0), &Event::NodeUp { spec: node_spec(1, BillingMode::Reserved, 2) });
        let started = room.apply(t(1), &Event::JobSubmitted { spec: job_spec(1, "a", 1) });
        assert!(started.iter().any(|e| matches!(e, Effect::StartJob { .. })), "placed under the fragmentation policy: {started:?}");
        room.apply(t(2), &Event::JobSubmitted { spec: job_spec(2, "a", 2) });
        let view = room.view();
        let f = &view.cluster.fragmentation;
        // M: one whole GPU (job 1) and two whole GPUs (job 2, waiting), half each.
        assert_eq!(f.typical_shapes, 2);
        assert_eq!(f.unplaceable, vec!["2×GPU".to_string()]);
        // The free GPU serves the 1-GPU shape but not the 2-GPU one: half of it is a fragment.
        assert_eq!(view.nodes[0].workload_frag, Some(Mib(16_384 / 2)));
        assert!((f.workload - 0.5).abs() < 1e-9, "{}", f.workload);
    }
}
