//! Runs `gpuroom bench placement` (every policy × pod list × protocol ×
//! seed, on all cores) and the two replays with departures; the page is
//! `placement_page`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context, bail};

use super::machine::Machine;
use super::placement::{Curve, PodList, ReplayFigures, TimedJob, arrival_run, departure_replay, node_of, shape_of};
use super::placement_policies::{BenchPolicy, Protocol, Workloads, list_key};
use super::progress::progress;
use crate::sched::frag_gradient::{GpuFree, NodeFree, Shape};
use crate::sources::alibaba::{self, NODES, POD_LISTS};
use crate::sources::philly;

#[derive(Clone, Debug, Default)]
pub struct PlacementOptions {
    pub seeds: u64,
    /// A small cluster and one seed, for tests and smoke runs.
    pub quick: bool,
    /// Other pod lists of the 2023 trace to run too (any column subset).
    pub pods: Vec<PathBuf>,
    /// Only these policies (empty: all).
    pub policies: Vec<BenchPolicy>,
}

impl PlacementOptions {
    fn policies(&self) -> Vec<BenchPolicy> {
        BenchPolicy::ALL.into_iter().filter(|p| self.policies.is_empty() || self.policies.contains(p)).collect()
    }
}

/// The quick run's check that faithful FGD lands on its published figure:
/// the whole cluster, `default`, the reference's protocol, one seed.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedCheck {
    pub ours: f64,
    pub published: f64,
}

#[derive(Clone, Debug)]
pub struct PolicyRow {
    pub policy: BenchPolicy,
    pub curves: Vec<Curve>,
}

impl PolicyRow {
    pub fn mean_allocation(&self, step: usize) -> f64 {
        self.curves.iter().map(|c| c.allocation[step]).sum::<f64>() / self.curves.len().max(1) as f64
    }

    pub fn mean_fragmentation(&self) -> f64 {
        self.curves.iter().map(|c| c.fragmentation_at_80).sum::<f64>() / self.curves.len().max(1) as f64
    }
}

#[derive(Clone, Debug)]
pub struct ListResult {
    pub name: String,
    /// The list's name in the reference (`default`, `gpushare40` …): its published figures.
    pub key: String,
    pub pods: usize,
    /// Typical shapes by the reference's measure.
    pub shapes: usize,
    pub protocols: Vec<(Protocol, Vec<PolicyRow>)>,
}

impl ListResult {
    pub fn row(&self, protocol: Protocol, policy: BenchPolicy) -> Option<&PolicyRow> {
        self.protocols.iter().find(|(p, _)| *p == protocol)?.1.iter().find(|r| r.policy == policy)
    }
}

#[derive(Clone, Debug)]
pub struct PlacementReport {
    pub machine: Machine,
    pub nodes: usize,
    pub gpus: u64,
    pub seeds: u64,
    pub lists: Vec<ListResult>,
    pub alibaba_replay: Vec<(BenchPolicy, ReplayFigures)>,
    /// The nodes the Alibaba replay ran on (a prefix of the trace's).
    pub alibaba_nodes: usize,
    pub philly_replay: Vec<(BenchPolicy, ReplayFigures)>,
    pub philly_nodes: usize,
    pub philly_left_out: usize,
    /// In quick mode: faithful FGD on the whole cluster against its published figure.
    pub published_check: Option<PublishedCheck>,
    pub secs: f64,
}

/// Runs `work` items on every core, keeping their order.
fn on_all_cores<T: Sync, R: Send>(work: Vec<T>, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(work.len().max(1));
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..work.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                        *n += 1;
                        *n - 1
                    };
                    let Some(item) = work.get(i) else { break };
                    let r = f(item);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().flatten().collect()
}

pub fn run(opts: &PlacementOptions) -> anyhow::Result<PlacementReport> {
    let started = Instant::now();
    let machine = Machine::detect();
    let all_nodes: Vec<NodeFree> = alibaba::parse_nodes(NODES.0, NODES.1)?.iter().map(node_of).collect();
    let mut nodes = all_nodes.clone();
    if opts.quick {
        nodes.truncate(120);
    }
    let policies = opts.policies();
    let gpus = nodes.iter().map(|n| n.gpus.len() as u64).sum();
    let seeds = if opts.quick { 1 } else { opts.seeds.max(1) };
    let mut lists: Vec<(String, Vec<alibaba::AlibabaPod>)> = Vec::new();
    for (name, text) in POD_LISTS {
        lists.push((name.to_string(), alibaba::parse_pods(name, text)?));
    }
    for path in &opts.pods {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let pods = alibaba::parse_pods(&path.display().to_string(), &text)?;
        if pods.is_empty() {
            bail!("{}: no pods", path.display());
        }
        lists.push((path.display().to_string(), pods));
    }
    let mut results = Vec::new();
    for (name, pods) in &lists {
        let list = PodList::of(pods);
        let workloads = Workloads::of(&list.shapes, &nodes);
        let work: Vec<(Protocol, BenchPolicy, u64)> =
            Protocol::BOTH.iter().flat_map(|&q| policies.iter().flat_map(move |&p| (1..=seeds).map(move |s| (q, p, s)))).collect();
        progress(format_args!("{name}: {} policies × 2 protocols × {seeds} seeds on {} nodes", policies.len(), nodes.len()));
        let curves = on_all_cores(work.clone(), |(q, p, s)| arrival_run(&nodes, &list, &workloads, *p, *q, *s));
        let protocols = Protocol::BOTH
            .iter()
            .map(|&q| {
                let rows = policies
                    .iter()
                    .map(|&policy| PolicyRow {
                        policy,
                        curves: work.iter().zip(&curves).filter(|((wq, p, _), _)| *wq == q && *p == policy).map(|(_, c)| c.clone()).collect(),
                    })
                    .collect();
                (q, rows)
            })
            .collect();
        results.push(ListResult { name: name.clone(), key: list_key(name), pods: pods.len(), shapes: workloads.reference.shapes.len(), protocols });
    }
    let published_check = opts.quick.then(|| {
        progress(format_args!("published-figure check: faithful FGD on all {} nodes, default", all_nodes.len()));
        let list = PodList::of(&lists[0].1);
        let curve = arrival_run(&all_nodes, &list, &Workloads::of(&list.shapes, &all_nodes), BenchPolicy::Fgd, Protocol::Reference, 1);
        PublishedCheck { ours: curve.allocation[super::placement::STEPS - 1] * 100.0, published: BenchPolicy::Fgd.published("default").unwrap_or(0.0) }
    });
    progress(format_args!("replays with departures"));
    let (alibaba_replay, (philly_replay, philly_nodes, philly_left_out)) = std::thread::scope(|s| {
        let a = s.spawn(|| alibaba_departures(&nodes, &lists[0].1, opts.quick, &policies));
        let p = philly_departures(opts.quick, &policies);
        (a.join().unwrap_or_default(), p)
    });
    let (alibaba_replay, alibaba_nodes) = alibaba_replay;
    Ok(PlacementReport {
        machine,
        nodes: nodes.len(),
        gpus,
        seeds,
        lists: results,
        alibaba_replay,
        alibaba_nodes,
        philly_replay: philly_replay?,
        philly_nodes,
        philly_left_out,
        published_check,
        secs: started.elapsed().as_secs_f64(),
    })
}

const REPLAY_POLICIES: [BenchPolicy; 4] = [BenchPolicy::FirstFit, BenchPolicy::BestFit, BenchPolicy::Fgd, BenchPolicy::Gradient];

fn replay_policies(chosen: &[BenchPolicy]) -> impl Iterator<Item = BenchPolicy> + '_ {
    REPLAY_POLICIES.into_iter().filter(|p| chosen.contains(p))
}

/// The pods' own lifetimes on the smallest prefix of the trace's nodes with
/// GPUs for 75% of the peak concurrent GPU demand (with all 1,213 nodes the
/// trace never fills the cluster, and nothing would wait).
fn alibaba_departures(nodes: &[NodeFree], pods: &[alibaba::AlibabaPod], quick: bool, policies: &[BenchPolicy]) -> (Vec<(BenchPolicy, ReplayFigures)>, usize) {
    let mut jobs: Vec<TimedJob> = pods
        .iter()
        .filter_map(|p| {
            let (created, deleted) = p.lifetime()?;
            let started = p.scheduled_time.unwrap_or(created).max(created);
            Some(TimedJob { arrive: created, runs: (deleted - started).max(1), shape: shape_of(p) })
        })
        .collect();
    jobs.sort_by_key(|j| j.arrive);
    if quick {
        jobs.truncate(1500);
    }
    let peak = peak_demand(&jobs);
    let mut subset = Vec::new();
    for node in nodes {
        if subset.iter().map(NodeFree::capacity_units).sum::<u64>() * 4 >= peak * 3 {
            break;
        }
        subset.push(node.clone());
    }
    let workloads = Workloads::of(&jobs.iter().map(|j| j.shape.clone()).collect::<Vec<_>>(), &subset);
    (replay_policies(policies).map(|p| (p, departure_replay(&subset, &jobs, &workloads, p))).collect(), subset.len())
}

/// The most GPU units the jobs ask at once, had each started on arrival.
fn peak_demand(jobs: &[TimedJob]) -> u64 {
    let mut changes: Vec<(i64, i64)> = jobs.iter().flat_map(|j| [(j.arrive, j.shape.units() as i64), (j.arrive + j.runs, -(j.shape.units() as i64))]).collect();
    changes.sort_unstable_by_key(|&(at, delta)| (at, delta));
    let mut now = 0i64;
    changes
        .iter()
        .map(|(_, delta)| {
            now += delta;
            now
        })
        .max()
        .unwrap_or(0)
        .max(0) as u64
}

type PhillyOutcome = (anyhow::Result<Vec<(BenchPolicy, ReplayFigures)>>, usize, usize);

/// The Philly trace's whole-GPU jobs on 8-GPU nodes, as many as carry the
/// mean load at 85% between the 10th and 90th percentile arrival (the
/// trace's sparse tails would understate it); jobs over 8 GPUs span nodes
/// and are left out.
fn philly_departures(quick: bool, policies: &[BenchPolicy]) -> PhillyOutcome {
    let (name, text) = crate::sim::data::PHILLY_JOBS;
    let parsed = match philly::parse(name, text) {
        Ok(p) => p,
        Err(e) => return (Err(e.into()), 0, 0),
    };
    let left_out = parsed.iter().filter(|j| j.gpus > 8).count();
    let first = parsed.iter().map(|j| j.submitted).min();
    let Some(first) = first else { return (Ok(Vec::new()), 0, left_out) };
    let mut jobs: Vec<TimedJob> = parsed
        .iter()
        .filter(|j| j.gpus <= 8)
        .map(|j| TimedJob {
            arrive: (j.submitted - first).num_seconds(),
            runs: j.duration.0.max(1),
            shape: Shape { gpus: j.gpus as u8, per_gpu: 1000, whole: true, cpu: 0, mem: 0, models: Vec::new() },
        })
        .collect();
    jobs.sort_by_key(|j| j.arrive);
    if quick {
        jobs.truncate(3000);
    }
    let (from, until) = (jobs.len() / 10, jobs.len() * 9 / 10);
    let middle = &jobs[from..until.max(from)];
    let span = (middle.last().map_or(0, |j| j.arrive) - middle.first().map_or(0, |j| j.arrive)).max(1) as f64;
    let gpu_secs: f64 = middle.iter().map(|j| f64::from(j.shape.gpus) * j.runs as f64).sum();
    let nodes_needed = ((gpu_secs / span / 0.85) / 8.0).ceil().max(2.0) as usize;
    let nodes: Vec<NodeFree> = (0..nodes_needed).map(|_| NodeFree { model: "P40".into(), cpu: 0, mem: 0, gpus: vec![GpuFree::whole(1000); 8] }).collect();
    let workloads = Workloads::of(&jobs.iter().map(|j| j.shape.clone()).collect::<Vec<_>>(), &nodes);
    let rows = replay_policies(policies).map(|p| (p, departure_replay(&nodes, &jobs, &workloads, p))).collect();
    (Ok(rows), nodes_needed, left_out)
}
