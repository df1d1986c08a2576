//! Scale up: which nodes to buy for the work that waits.
//!
//! The room hands in the waiting jobs it could not place (in queue order,
//! with where their budget and pool preference let them run and when, if
//! ever, they could start on the nodes already up), the pools on offer with
//! their risk-priced hourly cost, and the capacity already on its way. The
//! plan walks the jobs: one that would start on an existing node before a
//! new one could boot waits; one that fits on capacity already coming takes
//! it; any other gets a new node in the pool where its work is cheapest,
//! counting the other waiting jobs that could share that node.

use crate::domain::capacity::PoolSpec;
use crate::domain::cluster::BillingMode;
use crate::domain::ids::JobId;
use crate::domain::job::PoolTarget;
use crate::domain::units::{At, Mib};

use super::CapacityConfig;

/// A pool as the plan sees it now.
#[derive(Clone, Debug)]
pub struct Offer<'a> {
    pub pool: &'a PoolSpec,
    /// Its nodes up, booting or asked for.
    pub nodes: u32,
    /// One node-hour here, with spot's expected recompute, restart and
    /// checkpoint overhead priced in (currency per hour).
    pub effective_per_hour: f64,
    /// Launches may be tried (no recent capacity or price failure).
    pub open: bool,
}

/// A job waiting for capacity, and where it may run.
#[derive(Clone, Debug, PartialEq)]
pub struct Waiting {
    pub job: JobId,
    pub gpus: u8,
    /// Per GPU.
    pub gpu_mem: Mib,
    pub cpus: u32,
    pub host_mem: Mib,
    /// Its preference and its tenant's budget allow on-demand capacity…
    pub on_demand: bool,
    /// …and spot capacity.
    pub spot: bool,
    /// When it could start on the nodes up now, as running jobs are
    /// predicted to end (`None`: not within any prediction).
    pub starts_by: Option<At>,
    /// The one pool it may run in (an operator sent it there).
    pub only: Option<PoolTarget>,
    /// The GPU models it may run on (empty: any).
    pub models: Vec<String>,
}

impl Waiting {
    fn takes_model(&self, model: &str) -> bool {
        crate::domain::job::models_allow(&self.models, model)
    }
}

/// A node on its way (booting, or asked for and not yet answered), with
/// what is not yet promised to a job.
#[derive(Clone, Debug, PartialEq)]
pub struct Incoming {
    pub pool: PoolTarget,
    pub free_gpus: u32,
    pub gpu_mem: Mib,
    pub cpus_free: u32,
    pub host_mem_free: Mib,
    /// Its GPU model, where known (a model-bound job waits for its own).
    pub gpu_model: Option<String>,
    /// The plan's own new node (index into the result), or capacity the room already had coming.
    planned: Option<usize>,
}

impl Incoming {
    pub fn new(pool: PoolTarget, free_gpus: u32, gpu_mem: Mib, cpus_free: u32, host_mem_free: Mib) -> Incoming {
        Incoming { pool, free_gpus, gpu_mem, cpus_free, host_mem_free, gpu_model: None, planned: None }
    }

    /// The same, of GPU model `model`.
    pub fn of_model(self, model: &str) -> Incoming {
        Incoming { gpu_model: Some(model.to_string()), ..self }
    }

    fn fits(&self, job: &Waiting) -> bool {
        allows(job, self.pool.billing)
            && self.gpu_model.as_deref().is_none_or(|m| job.takes_model(m))
            && job.only.as_ref().is_none_or(|only| *only == self.pool)
            && u32::from(job.gpus) <= self.free_gpus
            && job.gpu_mem <= self.gpu_mem
            && job.cpus <= self.cpus_free
            && job.host_mem <= self.host_mem_free
    }

    fn take(&mut self, job: &Waiting) {
        self.free_gpus -= u32::from(job.gpus);
        self.cpus_free -= job.cpus;
        self.host_mem_free = Mib(self.host_mem_free.0 - job.host_mem.0);
    }
}

/// GPUs of the fleet, up or on their way, for the floor and the account limit.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetGpus {
    /// Reserved and on-demand.
    pub stable: u32,
    pub total: u32,
    /// In pools the room buys from (what the account limit counts).
    pub elastic: u32,
}

/// One node to buy.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub pool: PoolTarget,
    pub for_jobs: Vec<JobId>,
    /// Of its GPUs, how many the jobs it is bought for use.
    pub gpus_used: u32,
    pub gpus: u32,
}

fn allows(job: &Waiting, billing: BillingMode) -> bool {
    match billing {
        BillingMode::Spot => job.spot,
        BillingMode::OnDemand | BillingMode::Reserved => job.on_demand,
    }
}

fn fits_new(job: &Waiting, pool: &PoolSpec) -> bool {
    let n = &pool.node;
    allows(job, n.billing)
        && job.takes_model(&n.gpu_model)
        && job.only.as_ref().is_none_or(|only| *only == pool.target())
        && job.gpus <= n.gpu_count
        && job.gpu_mem <= n.gpu_memory
        && job.cpus <= n.cpus
        && job.host_mem <= n.host_memory
}

/// The nodes to buy for `waiting` (in queue order; the first
/// `config.lookahead_jobs` are looked at).
pub fn scale_up(now: At, config: &CapacityConfig, offers: &[Offer<'_>], waiting: &[Waiting], incoming: &[Incoming], fleet: FleetGpus) -> Vec<Planned> {
    let waiting = &waiting[..waiting.len().min(config.lookahead_jobs)];
    let mut spare: Vec<Incoming> = incoming.to_vec();
    let mut planned: Vec<Planned> = Vec::new();
    let mut nodes: Vec<u32> = offers.iter().map(|o| o.nodes).collect();
    let mut fleet = fleet;
    // A job that would start on an existing node before a new one could be up waits for it.
    let eligible: Vec<usize> = (0..waiting.len())
        .filter(|&i| {
            let job = &waiting[i];
            let fastest_boot = offers.iter().filter(|o| fits_new(job, o.pool)).map(|o| o.pool.boot).min();
            !matches!((job.starts_by, fastest_boot), (Some(start), Some(boot)) if start <= now + boot.delta())
        })
        .collect();
    let covered = cover_with_incoming(waiting, &eligible, &mut spare);
    for &i in &eligible {
        let job = &waiting[i];
        if covered[i] {
            continue;
        }
        let compatible: Vec<usize> = (0..offers.len()).filter(|&p| fits_new(job, offers[p].pool)).collect();
        if let Some(s) = spare.iter_mut().find(|s| s.fits(job)) {
            s.take(job);
            if let Some(p) = s.planned {
                planned[p].for_jobs.push(job.job);
                planned[p].gpus_used += u32::from(job.gpus);
            }
            continue;
        }
        let open: Vec<usize> = compatible
            .into_iter()
            .filter(|&p| offers[p].open && nodes[p] < offers[p].pool.max_nodes)
            .filter(|&p| fleet.elastic + offers[p].pool.gpus() <= config.account_gpu_limit)
            .collect();
        // The SLA floor: spot only while the stable share stays above it.
        let floor_ok = |p: usize| {
            let gpus = offers[p].pool.gpus();
            offers[p].pool.node.billing != BillingMode::Spot || f64::from(fleet.stable) >= config.min_stable_share * f64::from(fleet.total + gpus)
        };
        let any_stable = open.iter().any(|&p| offers[p].pool.node.billing != BillingMode::Spot);
        let rest: Vec<Waiting> = eligible.iter().filter(|&&j| j >= i && !covered[j]).map(|&j| waiting[j].clone()).collect();
        let rest = &rest[..];
        let best = open
            .iter()
            .copied()
            .filter(|&p| floor_ok(p) || !any_stable)
            .map(|p| (p, cost_per_work(&offers[p], rest)))
            .min_by(|(pa, a), (pb, b)| a.total_cmp(b).then(offers[*pa].effective_per_hour.total_cmp(&offers[*pb].effective_per_hour)).then(pa.cmp(pb)));
        let Some((p, _)) = best else { continue };
        let pool = offers[p].pool;
        nodes[p] += 1;
        fleet.total += pool.gpus();
        fleet.elastic += pool.gpus();
        if pool.node.billing != BillingMode::Spot {
            fleet.stable += pool.gpus();
        }
        let n = &pool.node;
        let mut node = Incoming::new(pool.target(), pool.gpus(), n.gpu_memory, n.cpus, n.host_memory).of_model(&n.gpu_model);
        node.take(job);
        node.planned = Some(planned.len());
        spare.push(node);
        planned.push(Planned { pool: pool.target(), for_jobs: vec![job.job], gpus_used: u32::from(job.gpus), gpus: pool.gpus() });
    }
    planned
}

/// Capacity already coming goes to the jobs it can serve, the most
/// constrained first (a job only on-demand may run on before one that may
/// run anywhere), each taking the node the fewest others could use: queue
/// order would let a flexible job take the one node a picky one fits, and
/// the picky one would be bought a node of its own while a spare one boots.
/// Returns, per waiting job, whether it is covered.
fn cover_with_incoming(waiting: &[Waiting], eligible: &[usize], spare: &mut [Incoming]) -> Vec<bool> {
    let mut covered = vec![false; waiting.len()];
    if spare.is_empty() {
        return covered;
    }
    let mut order: Vec<usize> = eligible.to_vec();
    order.sort_by_key(|&i| (spare.iter().filter(|s| s.fits(&waiting[i])).count(), i));
    for i in order {
        let job = &waiting[i];
        let others = |s: &Incoming| eligible.iter().filter(|&&j| j != i && !covered[j] && s.fits(&waiting[j])).count();
        let best = spare.iter().enumerate().filter(|(_, s)| s.fits(job)).min_by_key(|(k, s)| (others(s), *k)).map(|(k, _)| k);
        if let Some(k) = best {
            spare[k].take(job);
            covered[i] = true;
        }
    }
    covered
}

/// What a GPU-hour of work costs on a new node of this pool, if the waiting
/// jobs that could share the node fill what they can of it.
fn cost_per_work(offer: &Offer<'_>, rest: &[Waiting]) -> f64 {
    let gpus = offer.pool.gpus();
    let demand: u32 = rest.iter().filter(|j| fits_new(j, offer.pool)).map(|j| u32::from(j.gpus)).sum();
    let fill = demand.min(gpus).max(1);
    offer.effective_per_hour / (f64::from(fill) * offer.pool.speed.max(1e-3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::NodeId;
    use crate::domain::testkit::{node_spec, t};
    use crate::domain::units::Secs;

    fn pool(billing: BillingMode, instance_type: &str, gpus: u8, price: f64, max_nodes: u32) -> PoolSpec {
        let mut node = node_spec(0, billing, gpus);
        node.id = NodeId(0);
        node.instance_type = instance_type.to_string();
        node.zone = "z1".to_string();
        node.on_demand_price = crate::domain::units::MicrosPerHour((price * 1e6) as i64);
        PoolSpec { node, speed: 1.0, max_nodes, warm_min: 0, boot: Secs(90) }
    }

    fn offer(pool: &PoolSpec) -> Offer<'_> {
        Offer { pool, nodes: 0, effective_per_hour: pool.node.on_demand_price.0 as f64 / 1e6, open: true }
    }

    fn job(id: u64, gpus: u8) -> Waiting {
        Waiting {
            job: JobId(id),
            gpus,
            gpu_mem: Mib(8000),
            cpus: 1,
            host_mem: Mib(1000),
            on_demand: true,
            spot: true,
            starts_by: None,
            only: None,
            models: Vec::new(),
        }
    }

    const FLEET: FleetGpus = FleetGpus { stable: 16, total: 16, elastic: 0 };

    #[test]
    fn one_small_job_gets_the_small_instance_and_eight_get_the_big_one() {
        let small = pool(BillingMode::OnDemand, "one", 1, 3.0, 10);
        let big = pool(BillingMode::OnDemand, "eight", 8, 24.0, 10);
        let offers = [offer(&small), offer(&big)];
        let cfg = CapacityConfig::default();
        let one = scale_up(t(0), &cfg, &offers, &[job(1, 1)], &[], FLEET);
        assert_eq!(one.iter().map(|p| p.pool.instance_type.as_str()).collect::<Vec<_>>(), ["one"]);
        let eight: Vec<Waiting> = (1..=8).map(|i| job(i, 8)).collect();
        let plan = scale_up(t(0), &cfg, &offers, &eight, &[], FLEET);
        assert!(plan.iter().all(|p| p.pool.instance_type == "eight" && p.for_jobs.len() == 1), "an 8-GPU job needs the big one");
        // Cheaper per GPU on the big node once its GPUs are filled: four 2-GPU jobs share one.
        let cheap_big = pool(BillingMode::OnDemand, "eight", 8, 16.0, 10);
        let offers = [offer(&small), offer(&cheap_big)];
        let four: Vec<Waiting> = (1..=4).map(|i| job(i, 2)).collect();
        let plan = scale_up(t(0), &cfg, &offers, &four, &[], FLEET);
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert_eq!((plan[0].pool.instance_type.as_str(), plan[0].for_jobs.len(), plan[0].gpus_used), ("eight", 4, 8));
        // One 2-GPU job alone would leave six GPUs idle there: two small nodes are not possible (one GPU each), so big it is.
        assert_eq!(scale_up(t(0), &cfg, &offers, &four[..1], &[], FLEET)[0].pool.instance_type, "eight");
        // But one 1-GPU job alone pays for one GPU, not eight.
        assert_eq!(scale_up(t(0), &cfg, &offers, &[job(9, 1)], &[], FLEET)[0].pool.instance_type, "one");
    }

    #[test]
    fn a_job_bound_to_gpu_models_is_bought_a_node_of_its_model_or_none() {
        let mut t4 = pool(BillingMode::OnDemand, "t4", 1, 1.0, 10);
        t4.node.gpu_model = "T4".into();
        let mut a100 = pool(BillingMode::OnDemand, "a100", 1, 4.0, 10);
        a100.node.gpu_model = "A100".into();
        let cfg = CapacityConfig::default();
        let bound = Waiting { models: vec!["A100".into()], ..job(1, 1) };
        // The T4 is cheaper, but the job cannot run there.
        let plan = scale_up(t(0), &cfg, &[offer(&t4), offer(&a100)], std::slice::from_ref(&bound), &[], FLEET);
        assert_eq!(plan.iter().map(|p| p.pool.instance_type.as_str()).collect::<Vec<_>>(), ["a100"]);
        assert!(scale_up(t(0), &cfg, &[offer(&t4)], std::slice::from_ref(&bound), &[], FLEET).is_empty(), "no pool of its model");
        // A T4 on its way does not serve it either.
        let coming = [Incoming::new(t4.target(), 1, Mib(16384), 8, Mib(60_000)).of_model("T4")];
        assert_eq!(scale_up(t(0), &cfg, &[offer(&t4), offer(&a100)], std::slice::from_ref(&bound), &coming, FLEET).len(), 1);
    }

    #[test]
    fn capacity_on_its_way_is_not_bought_twice() {
        let big = pool(BillingMode::OnDemand, "eight", 8, 24.0, 10);
        let offers = [offer(&big)];
        let cfg = CapacityConfig::default();
        let booting = Incoming::new(big.target(), 8, Mib(16384), 64, Mib(500_000));
        let plan = scale_up(t(0), &cfg, &offers, &[job(1, 4), job(2, 4)], &[booting], FLEET);
        assert!(plan.is_empty(), "the booting node holds both: {plan:?}");
        let booting = Incoming::new(big.target(), 4, Mib(16384), 64, Mib(500_000));
        let plan = scale_up(t(0), &cfg, &offers, &[job(1, 4), job(2, 4), job(3, 2)], &[booting], FLEET);
        assert_eq!(plan.len(), 1, "one more node for the second and third: {plan:?}");
        assert_eq!(plan[0].for_jobs, [JobId(2), JobId(3)]);
    }

    #[test]
    fn capacity_on_its_way_goes_to_the_job_that_can_only_use_it() {
        let spot = pool(BillingMode::Spot, "one", 1, 1.0, 10);
        let od = pool(BillingMode::OnDemand, "one", 1, 3.0, 10);
        let offers = [offer(&spot), offer(&od)];
        let cfg = CapacityConfig::default();
        let coming = [Incoming::new(od.target(), 1, Mib(16384), 8, Mib(60_000)), Incoming::new(spot.target(), 1, Mib(16384), 8, Mib(60_000))];
        // In queue order the flexible job would take the on-demand node and
        // the one that must not run on spot would be bought another.
        let anywhere = job(1, 1);
        let no_spot = Waiting { spot: false, ..job(2, 1) };
        let plan = scale_up(t(0), &cfg, &offers, &[anywhere, no_spot], &coming, FLEET);
        assert!(plan.is_empty(), "both are served by what is coming: {plan:?}");
    }

    #[test]
    fn limits_floor_backoff_and_a_job_that_will_start_soon() {
        let spot = pool(BillingMode::Spot, "eight", 8, 8.0, 1);
        let od = pool(BillingMode::OnDemand, "eight", 8, 24.0, 1);
        let cfg = CapacityConfig::default();
        // Spot is cheaper: it is bought first; its max_nodes is 1, so the second goes on-demand.
        let offers = [offer(&spot), offer(&od)];
        let plan = scale_up(t(0), &cfg, &offers, &[job(1, 8), job(2, 8), job(3, 8)], &[], FLEET);
        let billing: Vec<BillingMode> = plan.iter().map(|p| p.pool.billing).collect();
        assert_eq!(billing, [BillingMode::Spot, BillingMode::OnDemand], "the third waits: both pools are full");
        // A spot pool that just failed is skipped.
        let closed = [Offer { open: false, ..offer(&spot) }, offer(&od)];
        assert_eq!(scale_up(t(0), &cfg, &closed, &[job(1, 8)], &[], FLEET)[0].pool.billing, BillingMode::OnDemand);
        // Below the floor of stable capacity spot is not bought while a stable pool fits.
        let low = FleetGpus { stable: 0, total: 64, elastic: 0 };
        assert_eq!(scale_up(t(0), &cfg, &offers, &[job(1, 8)], &[], low)[0].pool.billing, BillingMode::OnDemand);
        // The account limit.
        let full = FleetGpus { elastic: cfg.account_gpu_limit, ..FLEET };
        assert!(scale_up(t(0), &cfg, &offers, &[job(1, 8)], &[], full).is_empty());
        // Freed within the boot time: waits instead of buying.
        let soon = Waiting { starts_by: Some(t(60)), ..job(1, 8) };
        assert!(scale_up(t(0), &cfg, &offers, std::slice::from_ref(&soon), &[], FLEET).is_empty());
        let late = Waiting { starts_by: Some(t(600)), ..soon };
        assert_eq!(scale_up(t(0), &cfg, &offers, &[late], &[], FLEET).len(), 1);
    }

    #[test]
    fn preferences_and_budgets_choose_the_billing() {
        let spot = pool(BillingMode::Spot, "eight", 8, 8.0, 5);
        let od = pool(BillingMode::OnDemand, "eight", 8, 24.0, 5);
        let offers = [offer(&spot), offer(&od)];
        let cfg = CapacityConfig::default();
        let no_spot = Waiting { spot: false, ..job(1, 8) };
        assert_eq!(scale_up(t(0), &cfg, &offers, &[no_spot], &[], FLEET)[0].pool.billing, BillingMode::OnDemand);
        let spot_only = Waiting { on_demand: false, ..job(1, 8) };
        assert_eq!(scale_up(t(0), &cfg, &offers, &[spot_only], &[], FLEET)[0].pool.billing, BillingMode::Spot);
        let blocked = Waiting { on_demand: false, spot: false, ..job(1, 8) };
        assert!(scale_up(t(0), &cfg, &offers, &[blocked], &[], FLEET).is_empty(), "a budget-blocked tenant never buys");
        let too_big = Waiting { gpu_mem: Mib(80_000), ..job(1, 1) };
        assert!(scale_up(t(0), &cfg, &offers, &[too_big], &[], FLEET).is_empty());
        // An operator's migration target is the only pool bought in, dearer or not.
        let sent = Waiting { only: Some(od.target()), ..job(1, 8) };
        assert_eq!(scale_up(t(0), &cfg, &offers, &[sent], &[], FLEET)[0].pool, od.target());
    }
}
