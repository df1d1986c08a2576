//! Elastic capacity in the room: scenarios told event by event, and the
//! simulated cloud driving whole days under random settings while every
//! step is checked against what the room must never do — buy twice for the
//! same work, give back a node that holds a job or that it did not buy,
//! give back reserved capacity, buy for a tenant its budget blocks, pass a
//! pool's or the account's limit — and the recorded events replayed into a
//! fresh room give the same effects.

use proptest::prelude::*;

use crate::capacity::CapacityMode;
use crate::domain::capacity::{LaunchFailure, PoolSpec};
use crate::domain::cluster::{BillingMode, NodeState};
use crate::domain::event::{Effect, Event};
use crate::domain::ids::{JobId, NodeId};
use crate::domain::job::Phase;
use crate::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use crate::domain::units::{Micros, MicrosPerHour, Secs};
use crate::room::{Room, RoomConfig};
use crate::sim::config::SimConfig;
use crate::sim::{Simulation, Traces};

fn on_demand_pool(gpus: u8, max_nodes: u32) -> PoolSpec {
    let mut node = node_spec(0, BillingMode::OnDemand, gpus);
    node.instance_type = format!("p3.x{gpus}");
    node.name = String::new();
    PoolSpec { node, speed: 1.0, max_nodes, warm_min: 0, boot: Secs(90) }
}

fn room(mode: CapacityMode) -> Room {
    let mut config = RoomConfig::default();
    config.capacity.mode = mode;
    config.capacity.idle_release = Secs(300);
    config.capacity.plan_every = Secs(60);
    Room::new(config)
}

fn launches(effects: &[Effect]) -> Vec<&crate::domain::capacity::LaunchRequest> {
    effects.iter().filter_map(|e| if let Effect::Launch { request } = e { Some(request) } else { None }).collect()
}

fn releases(effects: &[Effect]) -> Vec<NodeId> {
    effects.iter().filter_map(|e| if let Effect::Release { node, .. } = e { Some(*node) } else { None }).collect()
}

/// Submits a job at `at` and returns the effects of the next plan (a minute on).
fn submit(room: &mut Room, at: i64, job: crate::domain::job::JobSpec) -> Vec<Effect> {
    let mut effects = room.apply(t(at), &Event::JobSubmitted { spec: job });
    effects.extend(room.apply(t(at + 60), &Event::Tick));
    effects
}

/// A launched node of `pool` with id `id`, as the world names it.
fn launched(pool: &PoolSpec, id: u32) -> crate::domain::cluster::NodeSpec {
    let mut spec = pool.node.clone();
    spec.id = NodeId(id);
    spec.name = format!("e{id}");
    spec
}

#[test]
fn a_waiting_job_buys_one_node_and_nothing_more_while_it_boots() {
    let mut room = room(CapacityMode::Control);
    let pool = on_demand_pool(4, 3);
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 16) });
    room.apply(t(0), &Event::PoolDefined { pool: pool.clone() });
    let effects = submit(&mut room, 1, job_spec(1, "a", 4));
    let asked = launches(&effects);
    assert_eq!(asked.len(), 1, "{effects:?}");
    assert_eq!((asked[0].count, asked[0].for_jobs.clone()), (1, vec![JobId(1)]));
    let request = asked[0].id;
    // Unanswered for ten plan periods: no second launch.
    for minute in 1..=10 {
        let effects = room.apply(t(61 + minute * 60), &Event::Tick);
        assert!(launches(&effects).is_empty(), "minute {minute}: {effects:?}");
    }
    // Launched and booting: still nothing more; ready: the job starts there.
    room.apply(t(700), &Event::Launched { request, spec: launched(&pool, 7) });
    assert!(matches!(room.fleet.nodes[&NodeId(7)].state, NodeState::Booting { .. }));
    for minute in 1..=3 {
        assert!(launches(&room.apply(t(700 + minute * 30), &Event::Tick)).is_empty());
    }
    let effects = room.apply(t(790), &Event::NodeUp { spec: launched(&pool, 7) });
    assert!(effects.iter().any(|e| matches!(e, Effect::StartJob { job: JobId(1), node: NodeId(7), .. })), "{effects:?}");
}

#[test]
fn a_launch_never_answered_is_given_up_and_bought_elsewhere() {
    let mut room = room(CapacityMode::Control);
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 16) });
    room.apply(t(0), &Event::PoolDefined { pool: on_demand_pool(4, 3) });
    let mut other = on_demand_pool(4, 3);
    other.node.zone = "us-east-1d".into();
    room.apply(t(0), &Event::PoolDefined { pool: other });
    let first = launches(&submit(&mut room, 1, job_spec(1, "a", 4)))[0].clone();
    let mut again = None;
    for minute in 1..=15 {
        if let Some(l) = launches(&room.apply(t(61 + minute * 60), &Event::Tick)).first() {
            again = Some((minute, (*l).clone()));
            break;
        }
    }
    let (minute, second) = again.expect("bought again once the first is given up");
    assert!(minute > 10, "not before ten minutes without an answer: {minute}");
    assert_ne!(second.pool, first.pool, "elsewhere");
    assert!(room.journal.log.iter().any(|l| l.text.contains("no answer in")), "said in the journal");
    // A late answer to the given-up launch is refused, not a second node.
    room.apply(t(2000), &Event::Launched { request: first.id, spec: launched(&on_demand_pool(4, 3), 9) });
    assert!(!room.fleet.nodes.contains_key(&NodeId(9)));
}

#[test]
fn an_idle_elastic_node_goes_back_after_idle_release_and_a_reserved_one_never() {
    let mut room = room(CapacityMode::Control);
    let pool = on_demand_pool(4, 3);
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 16) });
    room.apply(t(0), &Event::NodeUp { spec: node_spec(0, BillingMode::Reserved, 8) });
    room.apply(t(0), &Event::PoolDefined { pool: pool.clone() });
    let effects = room.apply(t(1), &Event::JobSubmitted { spec: job_spec(1, "a", 8) });
    assert!(effects.iter().any(|e| matches!(e, Effect::StartJob { job: JobId(1), .. })), "the reserved node takes it: {effects:?}");
    room.apply(t(2), &Event::JobStarted { job: JobId(1) });
    let effects = submit(&mut room, 3, job_spec(2, "a", 4));
    let request = launches(&effects)[0].id;
    room.apply(t(64), &Event::Launched { request, spec: launched(&pool, 5) });
    room.apply(t(154), &Event::NodeUp { spec: launched(&pool, 5) });
    room.apply(t(155), &Event::JobStarted { job: JobId(2) });
    // Both finish; the reserved node and the elastic one are empty from 1000 s.
    room.apply(t(1000), &Event::JobExited { job: JobId(2), ok: true, message: String::new() });
    room.apply(t(1000), &Event::JobExited { job: JobId(1), ok: true, message: String::new() });
    let mut given_back = Vec::new();
    for minute in 1..=30 {
        let effects = room.apply(t(1000 + minute * 60), &Event::Tick);
        for node in releases(&effects) {
            given_back.push((minute, node));
        }
    }
    assert_eq!(given_back.len(), 1, "{given_back:?}");
    let (minute, node) = given_back[0];
    assert_eq!(node, NodeId(5), "only the node the room bought");
    assert!((5..=7).contains(&minute), "after idle_release (300 s) and within a plan period or two: {minute}");
    assert!(matches!(room.fleet.nodes[&NodeId(5)].state, NodeState::Retiring { .. }), "no work goes to it while it goes");
    room.apply(t(3000), &Event::Released { node: NodeId(5) });
    assert!(!room.fleet.nodes[&NodeId(5)].is_up());
    assert!(room.fleet.nodes[&NodeId(0)].is_up(), "reserved stays");
}

#[test]
fn a_refused_release_leaves_the_node_working_and_it_is_tried_again_later() {
    let mut room = room(CapacityMode::Control);
    let pool = on_demand_pool(4, 3);
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 16) });
    room.apply(t(0), &Event::PoolDefined { pool: pool.clone() });
    let request = launches(&submit(&mut room, 1, job_spec(1, "a", 4)))[0].id;
    room.apply(t(62), &Event::Launched { request, spec: launched(&pool, 3) });
    room.apply(t(152), &Event::NodeUp { spec: launched(&pool, 3) });
    room.apply(t(153), &Event::JobStarted { job: JobId(1) });
    room.apply(t(200), &Event::JobExited { job: JobId(1), ok: true, message: String::new() });
    let mut when = None;
    for minute in 1..=10 {
        if releases(&room.apply(t(200 + minute * 60), &Event::Tick)).contains(&NodeId(3)) {
            when = Some(minute);
            break;
        }
    }
    let first = when.expect("given back once idle");
    let refused = Event::ReleaseFailed { node: NodeId(3), message: "UnauthorizedOperation: not allowed".into() };
    assert!(room.apply(t(200 + first * 60 + 1), &refused).is_empty());
    assert_eq!(room.fleet.nodes[&NodeId(3)].state, NodeState::Up, "it takes work again");
    assert!(room.journal.log.iter().any(|e| e.text.contains("could not give back e3")), "said in the journal");
    // A new job may run there at once, so it is not bought anew.
    let effects = room.apply(t(200 + first * 60 + 2), &Event::JobSubmitted { spec: job_spec(2, "a", 4) });
    assert!(launches(&effects).is_empty() && effects.iter().any(|e| matches!(e, Effect::StartJob { node: NodeId(3), .. })), "{effects:?}");
    // A second refusal of something not being given back is refused, and changes nothing.
    room.apply(t(2000), &refused);
    assert!(room.journal.log.iter().any(|e| e.text.contains("was not being given back")), "{:?}", room.journal.log);
    assert_eq!(room.fleet.nodes[&NodeId(3)].state, NodeState::Up);
}

#[test]
fn a_tenant_its_budget_blocks_never_makes_the_room_buy() {
    let mut room = room(CapacityMode::Control);
    let pool = on_demand_pool(4, 4);
    let mut poor = tenant_spec("poor", 16);
    poor.monthly_budget = Micros(1_000_000);
    room.apply(t(0), &Event::TenantDefined { spec: poor });
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("rich", 16) });
    room.apply(t(0), &Event::NodeUp { spec: node_spec(0, BillingMode::Reserved, 8) });
    room.apply(t(0), &Event::PoolDefined { pool });
    room.apply(t(1), &Event::JobSubmitted { spec: job_spec(1, "poor", 8) });
    room.apply(t(2), &Event::JobStarted { job: JobId(1) });
    // Two hours of a $15.91/h node on a $1 budget: far past blocking.
    room.apply(t(7200), &Event::Tick);
    assert!(!room.budgets.allows(room.config.cost.budget.at_limit, &crate::domain::ids::TenantId("poor".into()), false), "blocked");
    let mut bought_for = Vec::new();
    let effects = room.apply(t(7201), &Event::JobSubmitted { spec: job_spec(2, "poor", 4) });
    bought_for.extend(launches(&effects).iter().flat_map(|l| l.for_jobs.clone()));
    let effects = submit(&mut room, 7202, job_spec(3, "rich", 4));
    bought_for.extend(launches(&effects).iter().flat_map(|l| l.for_jobs.clone()));
    for minute in 1..=5 {
        bought_for.extend(launches(&room.apply(t(7262 + minute * 60), &Event::Tick)).iter().flat_map(|l| l.for_jobs.clone()));
    }
    assert_eq!(bought_for, vec![JobId(3)], "only the tenant whose budget allows it");
}

#[test]
fn advisory_mode_proposes_and_an_operator_approval_launches() {
    let mut room = room(CapacityMode::Advisory);
    let pool = on_demand_pool(4, 3);
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 16) });
    room.apply(t(0), &Event::PoolDefined { pool });
    let effects = submit(&mut room, 1, job_spec(1, "a", 4));
    assert!(launches(&effects).is_empty(), "advisory: nothing bought unasked");
    let (id, _) = room.capacity.proposals.iter().next().map(|(id, p)| (*id, p.clone())).expect("a proposal");
    let view = room.view();
    let cap = view.capacity.expect("the capacity pane");
    assert!(cap.proposals.iter().any(|p| p.text.contains("launch 1 × OD p3.x4") && p.text.contains("for j1")), "{:?}", cap.proposals);
    let actor = crate::domain::event::Actor { user: "ops".into(), origin: "console".into(), role: crate::domain::event::Role::Operator, account: None };
    let action = crate::domain::event::Action::ApproveCapacity { proposal: id };
    let effects = room.apply(t(90), &Event::Operator { actor, action });
    assert_eq!(launches(&effects).len(), 1, "{effects:?}");
    assert!(room.capacity.proposals.is_empty());
}

#[test]
fn a_failed_spot_launch_tries_on_demand_at_once_and_spot_again_after_the_backoff() {
    let mut room = room(CapacityMode::Control);
    // No floor of stable capacity here (with none at all, the floor would buy on-demand first).
    room.config.capacity.min_stable_share = 0.0;
    let od = on_demand_pool(4, 3);
    let mut spot = on_demand_pool(4, 3);
    spot.node.billing = BillingMode::Spot;
    spot.node.max_price = Some(spot.node.on_demand_price);
    room.apply(t(0), &Event::TenantDefined { spec: tenant_spec("a", 16) });
    room.apply(t(0), &Event::PoolDefined { pool: od });
    room.apply(t(0), &Event::PoolDefined { pool: spot.clone() });
    room.apply(t(0), &Event::PriceTick { zone: spot.node.zone.clone(), instance_type: spot.node.instance_type.clone(), price: MicrosPerHour(3_000_000) });
    let first = launches(&submit(&mut room, 1, job_spec(1, "a", 4))).into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].pool.billing, BillingMode::Spot, "spot is cheaper, risk priced in: {first:?}");
    assert!(first[0].max_price.is_some(), "a spot launch carries a max price");
    let failed = Event::LaunchFailed { request: first[0].id, count: 1, failure: LaunchFailure::InsufficientCapacity, message: "ICE".into() };
    let effects = room.apply(t(63), &failed);
    let second = launches(&effects);
    assert_eq!(second.len(), 1, "planned again at once: {effects:?}");
    assert_eq!(second[0].pool.billing, BillingMode::OnDemand);
    let request = second[0].id;
    room.apply(t(64), &Event::LaunchFailed { request, count: 1, failure: LaunchFailure::InsufficientCapacity, message: "ICE".into() });
    // Both pools left alone: nothing until the backoff (900 s) ends, then spot again.
    let mut next = None;
    for minute in 1..=20 {
        if let Some(l) = launches(&room.apply(t(64 + minute * 60), &Event::Tick)).first() {
            next = Some((minute, l.pool.billing));
            break;
        }
    }
    let (minute, billing) = next.expect("tried again");
    assert!(minute >= 15, "not before the backoff: {minute}");
    assert_eq!(billing, BillingMode::Spot);
}

// ---- whole simulated days, checked at every step -----------------------

struct Checked {
    events: Vec<(crate::domain::units::At, Event)>,
    effects: Vec<Vec<Effect>>,
    launched: u64,
    released: u64,
}

fn traces() -> &'static Traces {
    static TRACES: std::sync::OnceLock<Traces> = std::sync::OnceLock::new();
    TRACES.get_or_init(|| Traces::embedded().expect("the embedded traces"))
}

/// Runs the default elastic world for `hours`, checking every step.
fn run_checked(seed: u64, hours: i64, idle_release: i64, min_stable_share: f64) -> Checked {
    let sim_config = SimConfig::default_embedded();
    let mut config = RoomConfig::default();
    config.capacity.idle_release = Secs(idle_release);
    config.capacity.min_stable_share = min_stable_share;
    let limits: std::collections::BTreeMap<_, _> = sim_config.pool_specs().into_iter().map(|p| (p.target(), p.max_nodes)).collect();
    let account = config.capacity.account_gpu_limit;
    let mut sim = Simulation::new(sim_config, traces(), seed).expect("the simulation");
    let mut room = Room::new(config);
    let end = sim.config().start + chrono::TimeDelta::hours(hours);
    let mut out = Checked { events: Vec::new(), effects: Vec::new(), launched: 0, released: 0 };
    while let Some((at, event)) = sim.next_event(end) {
        let effects = room.apply(at, &event);
        for effect in &effects {
            match effect {
                Effect::Release { node, .. } => {
                    out.released += 1;
                    let n = &room.fleet.nodes[node];
                    assert_ne!(n.spec.billing, BillingMode::Reserved, "{at}: reserved {} given back", n.spec.name);
                    assert!(room.capacity.elastic.contains(node), "{at}: {} was not bought by the room", n.spec.name);
                    assert!(super::life::jobs_on(n).is_empty(), "{at}: {} given back with jobs on it", n.spec.name);
                }
                Effect::Launch { request } => {
                    out.launched += 1;
                    assert!(request.count as usize <= request.for_jobs.len(), "{at}: {} nodes for {:?}", request.count, request.for_jobs);
                    for job in &request.for_jobs {
                        assert!(room.fleet.jobs.get(job).is_some_and(|j| j.phase() == Phase::Queued), "{at}: bought for {job}, which does not wait");
                        let tenant = &room.fleet.jobs[job].spec.tags.tenant;
                        let at_limit = room.config.cost.budget.at_limit;
                        let spot = request.pool.billing == BillingMode::Spot;
                        assert!(room.budgets.allows(at_limit, tenant, spot), "{at}: bought for {job} of {tenant:?}, which its budget blocks");
                    }
                }
                _ => {}
            }
        }
        // No double buying: each node a launch adds serves a waiting job that
        // no capacity already on its way could serve (a maximum matching of
        // nodes to jobs grows by one per node bought).
        let new_nodes: Vec<crate::domain::cluster::NodeSpec> =
            launches(&effects).iter().flat_map(|l| std::iter::repeat_n(room.capacity.pools[&l.pool].node.clone(), l.count as usize)).collect();
        if !new_nodes.is_empty() {
            let at_limit = room.config.cost.budget.at_limit;
            let waiting: Vec<&crate::domain::job::Job> =
                room.fleet.jobs.values().filter(|j| j.phase() == Phase::Queued && room.budgets.allows(at_limit, &j.spec.tags.tenant, true)).collect();
            let fresh: std::collections::BTreeSet<u64> = launches(&effects).iter().map(|l| l.id).collect();
            let mut coming: Vec<crate::domain::cluster::NodeSpec> =
                room.fleet.nodes.values().filter(|n| matches!(n.state, NodeState::Booting { .. })).map(|n| n.spec.clone()).collect();
            for r in room.capacity.launches.values().filter(|r| !fresh.contains(&r.request.id)) {
                coming.extend(std::iter::repeat_n(room.capacity.pools[&r.request.pool].node.clone(), r.unanswered as usize));
            }
            let before = max_matching(&coming, &waiting);
            coming.extend(new_nodes.iter().cloned());
            let after = max_matching(&coming, &waiting);
            assert_eq!(after, before + new_nodes.len(), "{at}: bought {} nodes, {} serve work nothing coming could", new_nodes.len(), after - before);
        }
        for (target, max) in &limits {
            let held = room.capacity.elastic.iter().filter(|id| room.fleet.nodes.get(id).is_some_and(|n| target.holds(&n.spec))).count() as u32;
            let pending: u32 = room.capacity.launches.values().filter(|r| r.request.pool == *target).map(|r| r.unanswered).sum();
            assert!(held + pending <= *max, "{at}: pool {target}: {held} + {pending} over its {max}");
        }
        let elastic_gpus: u32 = room.capacity.elastic.iter().filter_map(|id| room.fleet.nodes.get(id)).map(|n| u32::from(n.spec.gpu_count)).sum();
        assert!(elastic_gpus <= account, "{at}: {elastic_gpus} elastic GPUs over the account's {account}");
        sim.handle(at, &effects);
        out.events.push((at, event));
        out.effects.push(effects);
    }
    out
}

/// Whether a job could run on a node of this kind at all (size and billing; not budget).
fn could_run_on(job: &crate::domain::job::Job, spec: &crate::domain::cluster::NodeSpec) -> bool {
    use crate::domain::job::PoolPreference;
    let billing_ok = match job.spec.pool {
        PoolPreference::Any => true,
        PoolPreference::NoSpot => spec.billing != BillingMode::Spot,
        PoolPreference::SpotOnly => spec.billing == BillingMode::Spot || job.escalated,
    };
    billing_ok && job.spec.gpus <= spec.gpu_count && job.spec.gpu_mem <= spec.gpu_memory
}

/// The most jobs that nodes could take at once, one job per node (Kuhn's augmenting paths).
fn max_matching(nodes: &[crate::domain::cluster::NodeSpec], jobs: &[&crate::domain::job::Job]) -> usize {
    fn augment(
        j: usize,
        nodes: &[crate::domain::cluster::NodeSpec],
        jobs: &[&crate::domain::job::Job],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for (n, spec) in nodes.iter().enumerate() {
            if seen[n] || !could_run_on(jobs[j], spec) {
                continue;
            }
            seen[n] = true;
            if owner[n].is_none_or(|other| augment(other, nodes, jobs, seen, owner)) {
                owner[n] = Some(j);
                return true;
            }
        }
        false
    }
    let mut owner = vec![None; nodes.len()];
    (0..jobs.len()).filter(|&j| augment(j, nodes, jobs, &mut vec![false; nodes.len()], &mut owner)).count()
}

#[test]
fn a_simulated_day_buys_gives_back_and_replays_identically() {
    let run = run_checked(1, 24, 300, 0.2);
    assert!(run.launched >= 5 && run.released >= 3, "launched {} released {}", run.launched, run.released);
    let mut again = Room::new({
        let mut c = RoomConfig::default();
        c.capacity.idle_release = Secs(300);
        c
    });
    for (i, (at, event)) in run.events.iter().enumerate() {
        let effects = again.apply(*at, event);
        assert_eq!(effects, run.effects[i], "event {i} ({} at {at}) gave other effects on replay", event.kind());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn elastic_days_under_random_settings_keep_every_rule(seed in 1u64..1000, idle in 60i64..1800, stable in 0.0f64..0.6) {
        let run = run_checked(seed, 8, idle, stable);
        prop_assert!(run.launched > 0, "a day's morning buys something");
    }
}
