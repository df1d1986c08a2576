//! Fuzzing of every parser of outside text (proptest, bounded): AWS spot price
//! dumps, spot preemption traces, the Philly, Alibaba and Helios traces,
//! dcgm-exporter pages, IMDS notices, the local executor's progress lines,
//! Slurm's squeue/sinfo JSON (22.05 and 24.11 shapes) and parsable text and
//! its partition lines, GRES strings and host lists, the engine, simulator,
//! jobs and theme TOML files, and money amounts.
//!
//! Each parser is fed two kinds of input:
//!
//! * arbitrary text: random bytes (made UTF-8 lossily), random Unicode, and a
//!   soup of the real file's own words, junk values and punctuation;
//! * mutations of real input (the project's fixtures, copied unchanged from
//!   the shared data, cut to their first rows where large): one to four of
//!   truncation, byte flips, inserted or deleted bytes, duplicated, deleted
//!   or swapped lines, a word replaced with junk (`NaN`, `-1`, `1e309`, ``, a
//!   huge number, a control character...) or with another word of the file.
//!
//! and must never panic. An error must say something and name its source (the
//! name passed in; IMDS parsers name their metadata path, money errors quote
//! the text; progress lines have no source, so only a message is required).
//! A value parsed must keep the promises its parser documents (prices not
//! negative, a page newest first, utilization within 0..=100...). The
//! unmodified real inputs must parse, so mutations start from valid input.
//!
//! Bounded: `GPUROOM_FUZZ_CASES` cases per property (default 256). Longer:
//!
//! ```sh
//! GPUROOM_FUZZ_CASES=100000 cargo test --release --test fuzz_parsers
//! ```
//!
//! Bugs found so far, now fixed and kept as properties: a trace `gap_seconds`
//! large enough to overflow lifetimes, dcgm figures above `f32::MAX` turning
//! into `inf`, TOML errors that named the line before the one at fault, and
//! in Slurm's outputs nameless nodes and partitions taken as real, a host
//! list's second bracket group kept as text, and a pending job keeping GPU
//! indices from an earlier run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::ops::Range;

use gpuroom::config::EngineConfig;
use gpuroom::domain::slurm::{SlurmJob, SlurmNode, SlurmState, expand_hostlist};
use gpuroom::domain::units::Micros;
use gpuroom::live::config::JobsFile;
use gpuroom::sim::config::SimConfig;
use gpuroom::sources::slurm::{gres, json as slurm_json, text as slurm_text};
use gpuroom::sources::{alibaba, dcgm, helios, imds, local, philly, price_history, spot_trace};
use gpuroom::tui::theme_file;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};

/// The source name passed to every parser that takes one.
const SOURCE: &str = "fuzz-source.txt";
/// dcgm sources are URLs (their host stands in for a missing `Hostname`).
const DCGM_SOURCE: &str = "http://fuzz-node:9400/metrics";

fn config() -> ProptestConfig {
    let cases = match std::env::var("GPUROOM_FUZZ_CASES") {
        Ok(n) => n.trim().parse().expect("GPUROOM_FUZZ_CASES must be a whole number of cases"),
        Err(_) => 256,
    };
    ProptestConfig { cases, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------- real input

fn fixture(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The first `lines` lines of a line-based file (a CSV's header and rows).
fn first_lines(path: &str, lines: usize) -> String {
    fixture(path).lines().take(lines).map(|l| format!("{l}\n")).collect()
}

/// A spot trace cut after `samples` samples, still a whole JSON document.
fn trace_prefix(path: &str, samples: usize) -> String {
    let text = fixture(path);
    match text.match_indices(", ").nth(samples) {
        Some((cut, _)) => format!("{}]}}\n", &text[..cut]),
        None => text,
    }
}

fn price_seeds() -> Vec<String> {
    ["us-west-2/2020-03-23.p2.8xlarge.json", "us-east-1/2020-03-05.p3.2xlarge.json"].map(|f| fixture(&format!("fixtures/spot-prices/aws/{f}"))).into()
}

fn trace_seeds() -> Vec<String> {
    ["us-east-1f", "us-west-2b"].map(|zone| trace_prefix(&format!("fixtures/spot-traces/preemption/aws-04-22-2023/{zone}_v100_1.json"), 400)).into()
}

fn philly_seeds() -> Vec<String> {
    vec![first_lines("fixtures/jobs/philly-pollux.csv", 80)]
}

fn alibaba_node_seeds() -> Vec<String> {
    vec![first_lines("fixtures/cluster/alibaba-2023-gpu-nodes.csv", 80)]
}

fn alibaba_pod_seeds() -> Vec<String> {
    vec![first_lines("fixtures/jobs/alibaba-2023-pods-default.csv", 80)]
}

fn helios_seeds() -> Vec<String> {
    vec![first_lines("fixtures/series/helios-earth-vc6YE-minutely.csv", 60)]
}

fn dcgm_seeds() -> Vec<String> {
    ["a100-8gpu", "a100-mig", "a10g-4gpu-k8s"].map(|f| first_lines(&format!("fixtures/dcgm/{f}.prom"), 60)).into()
}

/// Bodies as IMDS answers them (there is no recorded file; these are the
/// documented shapes the IMDS tests serve).
fn instance_action_seeds() -> Vec<String> {
    ["terminate", "stop", "hibernate"].map(|a| format!(r#"{{"action": "{a}", "time": "2026-12-02T21:00:00Z"}}"#)).into()
}

fn rebalance_seeds() -> Vec<String> {
    vec![r#"{"noticeTime": "2026-12-02T20:55:00Z"}"#.to_string()]
}

/// What examples/jobs/train.sh writes.
fn progress_seeds() -> Vec<String> {
    vec!["progress 42".into(), "checkpoint 42 104857600".into()]
}

fn engine_seeds() -> Vec<String> {
    vec![fixture("fixtures/fuzz/engine.toml")]
}

fn sim_seeds() -> Vec<String> {
    ["default", "philly-64", "large-1000"].map(|f| fixture(&format!("fixtures/sim/{f}.toml"))).into()
}

fn theme_seeds() -> Vec<String> {
    theme_file::BUILT_IN.iter().map(|(_, (path, _))| fixture(path)).collect()
}

fn jobs_seeds() -> Vec<String> {
    vec![fixture("fixtures/fuzz/jobs.toml")]
}

fn squeue_json_seeds() -> Vec<String> {
    ["squeue-22.05.json", "squeue-24.11.json"].map(|f| fixture(&format!("fixtures/slurm/{f}"))).into()
}

fn sinfo_json_seeds() -> Vec<String> {
    ["sinfo-22.05.json", "sinfo-24.11.json"].map(|f| fixture(&format!("fixtures/slurm/{f}"))).into()
}

fn squeue_text_seeds() -> Vec<String> {
    vec![fixture("fixtures/slurm/squeue-22.05.txt")]
}

fn sinfo_text_seeds() -> Vec<String> {
    vec![fixture("fixtures/slurm/sinfo-22.05.txt")]
}

fn partition_seeds() -> Vec<String> {
    vec![fixture("fixtures/slurm/scontrol-partition-22.05.txt")]
}

/// GRES and host lists in the shapes Slurm writes them (from the fixtures and its manuals).
fn gres_seeds() -> Vec<String> {
    ["gpu:fake:3(IDX:0-2)", "gpu:h100:8(S:0-1),tmpsize:7T", "gpu:2(IDX:0,2),mps:100", "gres/gpu:a100:3", "gpu:fake:0(IDX:N/A)"].map(String::from).into()
}

fn hostlist_seeds() -> Vec<String> {
    ["gpu[01-03,07],cpu1", "localhost", "n[1-2]-ib", "gpu-a[01-02]"].map(String::from).into()
}

/// Money as the files write it: dump prices, list prices, budgets.
fn money_seeds() -> Vec<String> {
    ["4.234200", "0.9183", "19.22", "2000", "12500.50", "0"].map(String::from).into()
}

// ------------------------------------------------------------------ mutation

/// Values that break parsers: not-a-number spellings, out-of-range and
/// overflowing numbers, empty text, control and multi-byte characters,
/// structure characters, impossible and extreme dates.
const JUNK: &[&str] = &[
    "",
    "NaN",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "-1",
    "-0",
    "0",
    "1e309",
    "1e300",
    "-1e300",
    "1e39",
    "1e-320",
    "0.0000001",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "256",
    "1001",
    "99999999999999999999999999999999",
    "0x10",
    "+1",
    "1_000",
    ".",
    "-",
    "\0",
    "\u{7}",
    "\u{1b}[2J",
    "\u{7f}",
    "\r",
    "\t",
    "\n",
    "\u{feff}",
    "é",
    "💥",
    "\u{202e}",
    "\"",
    "'",
    "\\",
    ",",
    "{",
    "}",
    "[",
    "]",
    "=",
    "#",
    "\"\"\"",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "2020-02-30T25:61:61Z",
    "2020-13-01 00:00:00",
    "9999-12-31",
    "true",
    "null",
    "[]",
    "{}",
];

#[derive(Clone, Debug)]
enum Mutation {
    Truncate(Index),
    /// XOR one byte with a non-zero mask.
    FlipByte(Index, u8),
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    DuplicateLine(Index),
    DeleteLine(Index),
    SwapLines(Index, Index),
    /// Replace one word (see `words`) with junk.
    ReplaceWord(Index, &'static str),
    /// Replace one occurrence of one of the text's distinct words with junk,
    /// so that a rare word (a key, the one `gap_seconds`) is as likely a
    /// target as the thousand `1`s around it.
    ReplaceDistinctWord(Index, Index, &'static str),
    /// Replace one word with another word of the text (a time where a price goes...).
    CopyWord(Index, Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let insert = prop_oneof![vec(any::<u8>(), 1..8), select(JUNK).prop_map(|j| j.as_bytes().to_vec())];
    prop_oneof![
        4 => (any::<Index>(), select(JUNK)).prop_map(|(i, junk)| Mutation::ReplaceWord(i, junk)),
        4 => (any::<Index>(), any::<Index>(), select(JUNK)).prop_map(|(w, i, junk)| Mutation::ReplaceDistinctWord(w, i, junk)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, j)| Mutation::CopyWord(i, j)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        2 => (any::<Index>(), 1u8..=255).prop_map(|(i, mask)| Mutation::FlipByte(i, mask)),
        2 => (any::<Index>(), insert).prop_map(|(i, bytes)| Mutation::Insert(i, bytes)),
        1 => (any::<Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => any::<Index>().prop_map(Mutation::DuplicateLine),
        1 => any::<Index>().prop_map(Mutation::DeleteLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(i, j)| Mutation::SwapLines(i, j)),
    ]
}

/// Maximal runs of letters, digits and `._:+-`: numbers, times, names, keys.
fn words(bytes: &[u8]) -> Vec<Range<usize>> {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b"._:+-".contains(&b);
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in bytes.iter().enumerate() {
        match (is_word(b), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    out.extend(start.map(|s| s..bytes.len()));
    out
}

/// Applies `f` to the lines of `bytes` (split on `\n`, joined back).
fn with_lines(bytes: &mut Vec<u8>, f: impl FnOnce(&mut Vec<Vec<u8>>)) {
    let mut lines: Vec<Vec<u8>> = bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    f(&mut lines);
    *bytes = lines.join(&b'\n');
}

impl Mutation {
    fn apply(&self, bytes: &mut Vec<u8>) {
        // A point in 0..=len, so that an empty text can still grow.
        let point = |i: &Index, len: usize| i.index(len + 1);
        match self {
            Mutation::Truncate(i) => bytes.truncate(point(i, bytes.len())),
            Mutation::FlipByte(i, mask) => {
                if !bytes.is_empty() {
                    let at = i.index(bytes.len());
                    bytes[at] ^= mask;
                }
            }
            Mutation::Insert(i, new) => {
                let at = point(i, bytes.len());
                bytes.splice(at..at, new.iter().copied());
            }
            Mutation::Delete(i, n) => {
                let at = point(i, bytes.len());
                bytes.drain(at..(at + n).min(bytes.len()));
            }
            Mutation::DuplicateLine(i) => with_lines(bytes, |lines| {
                let at = i.index(lines.len());
                lines.insert(at, lines[at].clone());
            }),
            Mutation::DeleteLine(i) => with_lines(bytes, |lines| {
                lines.remove(i.index(lines.len()));
            }),
            Mutation::SwapLines(i, j) => with_lines(bytes, |lines| {
                let n = lines.len();
                lines.swap(i.index(n), j.index(n));
            }),
            Mutation::ReplaceWord(i, junk) => {
                let words = words(bytes);
                if !words.is_empty() {
                    bytes.splice(i.get(&words).clone(), junk.bytes());
                }
            }
            Mutation::ReplaceDistinctWord(w, i, junk) => {
                let mut distinct: BTreeMap<&[u8], Vec<Range<usize>>> = BTreeMap::new();
                for r in words(bytes) {
                    distinct.entry(&bytes[r.clone()]).or_default().push(r);
                }
                let chosen: Vec<Vec<Range<usize>>> = distinct.into_values().collect();
                if !chosen.is_empty() {
                    let occurrences: &Vec<Range<usize>> = w.get(&chosen);
                    let at = i.get(occurrences).clone();
                    bytes.splice(at, junk.bytes());
                }
            }
            Mutation::CopyWord(i, j) => {
                let words = words(bytes);
                if !words.is_empty() {
                    let other = bytes[j.get(&words).clone()].to_vec();
                    bytes.splice(i.get(&words).clone(), other);
                }
            }
        }
    }
}

/// One of `seeds`, mutated one to four times.
fn mutated(seeds: Vec<String>) -> impl Strategy<Value = String> {
    (any::<Index>(), vec(mutation(), 1..=4)).prop_map(move |(which, mutations)| {
        let mut bytes = which.get(&seeds).as_bytes().to_vec();
        for m in &mutations {
            m.apply(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Random bytes, random Unicode, or a soup of the seeds' words, junk and
/// punctuation (closer to what a parser reads past its first byte).
fn arbitrary_text(seeds: &[String]) -> impl Strategy<Value = String> {
    let mut tokens: BTreeSet<String> = seeds.iter().flat_map(|s| words(s.as_bytes()).into_iter().map(move |r| s[r].to_string())).take(2000).collect();
    tokens.extend(JUNK.iter().chain(&[" ", "\n", ":", "{\"", "\": ", "\"", "[[", "]]", " = ", "{", "}"]).map(|s| s.to_string()));
    let tokens: Vec<String> = tokens.into_iter().collect();
    prop_oneof![
        vec(any::<u8>(), 0..512).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        any::<String>(),
        vec(select(tokens), 0..80).prop_map(|t| t.concat()),
    ]
}

// ------------------------------------------------------------------- checks

/// The contract every parser shares. An error says something besides the
/// name of its source, and names it (`names`; `None` where the parser is
/// given no source). A value passes `sane`. `Ok(true)`: parsed.
fn verdict<T, E: Display>(result: Result<T, E>, names: Option<&str>, sane: impl FnOnce(T) -> Result<(), TestCaseError>) -> Result<bool, TestCaseError> {
    match result {
        Ok(value) => sane(value).map(|()| true),
        Err(e) => {
            let shown = e.to_string();
            let rest = names.map_or(shown.as_str(), |n| shown.strip_prefix(n).unwrap_or(&shown));
            prop_assert!(rest.chars().any(char::is_alphanumeric), "error says nothing: {shown:?}");
            if let Some(name) = names {
                prop_assert!(shown.contains(name), "error does not name {name:?}: {shown:?}");
            }
            Ok(false)
        }
    }
}

fn check_prices(text: &str) -> Result<bool, TestCaseError> {
    verdict(price_history::parse(SOURCE, text), Some(SOURCE), |page| {
        for (i, p) in page.points.iter().enumerate() {
            prop_assert!(p.price.0 >= 0, "entry {i}: negative price {:?}", p.price);
            prop_assert!(!p.zone.is_empty() && !p.instance_type.is_empty(), "entry {i}: empty zone or type");
        }
        prop_assert!(page.points.windows(2).all(|w| w[0].at >= w[1].at), "page not newest first");
        prop_assert!(page.next_token.as_deref() != Some(""), "an empty NextToken is no token");
        Ok(())
    })
}

fn check_trace(text: &str) -> Result<bool, TestCaseError> {
    verdict(spot_trace::parse(SOURCE, text), Some(SOURCE), |trace| {
        prop_assert!(trace.gap.0 > 0, "gap {:?}", trace.gap);
        prop_assert!(!trace.samples.is_empty());
        Ok(())
    })
}

/// The parsed trace's lifetimes, the hazard model's input: every run has a
/// positive length, and they add up to the alive samples.
fn check_trace_lifetimes(text: &str) -> Result<bool, TestCaseError> {
    verdict(spot_trace::parse(SOURCE, text), Some(SOURCE), |trace| {
        let lifetimes = trace.lifetimes();
        prop_assert!(lifetimes.iter().all(|l| l.secs.0 > 0), "{lifetimes:?}");
        let alive = trace.samples.iter().filter(|s| **s > 0).count() as f64;
        prop_assert!((trace.availability() - alive / trace.samples.len() as f64).abs() < 1e-12);
        Ok(())
    })
}

fn check_philly(text: &str) -> Result<bool, TestCaseError> {
    verdict(philly::parse(SOURCE, text), Some(SOURCE), |jobs| {
        for j in &jobs {
            prop_assert!(j.gpus >= 1 && j.duration.0 >= 0, "{j:?}");
        }
        Ok(())
    })
}

fn check_alibaba_nodes(text: &str) -> Result<bool, TestCaseError> {
    verdict(alibaba::parse_nodes(SOURCE, text), Some(SOURCE), |_| Ok(()))
}

fn check_alibaba_pods(text: &str) -> Result<bool, TestCaseError> {
    verdict(alibaba::parse_pods(SOURCE, text), Some(SOURCE), |pods| {
        for p in &pods {
            prop_assert!(p.gpu_milli <= 1000 && p.lifetime().is_none_or(|(c, d)| d >= c), "{p:?}");
            prop_assert!(p.num_gpu == 0 || p.gpu_milli > 0, "{p:?}");
        }
        Ok(())
    })
}

fn check_helios(text: &str) -> Result<bool, TestCaseError> {
    verdict(helios::parse(SOURCE, text), Some(SOURCE), |samples| {
        prop_assert!(samples.windows(2).all(|w| w[0].at < w[1].at), "rows not strictly increasing in time");
        for s in &samples {
            prop_assert!((0.0..=1.0).contains(&s.gpu_utilization), "{s:?}");
            prop_assert!(s.running_gpus <= s.total_gpus, "{s:?}");
        }
        Ok(())
    })
}

fn check_dcgm(text: &str) -> Result<bool, TestCaseError> {
    verdict(dcgm::parse_page(DCGM_SOURCE, text), Some(DCGM_SOURCE), |page| {
        prop_assert!(!page.readings.is_empty(), "an Ok page has readings");
        let keys: Vec<_> = page.readings.iter().map(|r| (&r.host, r.index, r.mig_instance)).collect();
        prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "readings not sorted and unique: {keys:?}");
        for r in &page.readings {
            prop_assert!(!r.host.is_empty(), "{r:?}");
            prop_assert!(r.util_pct.is_none_or(|u| (0.0..=100.0).contains(&u)), "utilization {:?}", r.util_pct);
            for v in [r.temp_c, r.power_w].into_iter().flatten() {
                prop_assert!(v >= 0.0, "negative or NaN figure in {r:?}");
            }
            let _ = r.mem_total();
        }
        Ok(())
    })
}

/// The figures a reading carries as floats are finite (the parser drops
/// non-finite samples, so an infinite one is a conversion leak).
fn check_dcgm_finite(text: &str) -> Result<bool, TestCaseError> {
    verdict(dcgm::parse_page(DCGM_SOURCE, text), Some(DCGM_SOURCE), |page| {
        for r in &page.readings {
            for v in [r.util_pct, r.temp_c, r.power_w].into_iter().flatten() {
                prop_assert!(v.is_finite(), "non-finite figure in {r:?}");
            }
        }
        Ok(())
    })
}

fn check_instance_action(text: &str) -> Result<bool, TestCaseError> {
    verdict(imds::parse_instance_action(text), Some("spot/instance-action"), |_| Ok(()))
}

fn check_rebalance(text: &str) -> Result<bool, TestCaseError> {
    verdict(imds::parse_rebalance(text), Some("events/recommendations/rebalance"), |_| Ok(()))
}

fn check_progress(text: &str) -> Result<bool, TestCaseError> {
    verdict(local::parse_line(text), None, |_| Ok(()))
}

fn check_engine(text: &str) -> Result<bool, TestCaseError> {
    verdict(EngineConfig::parse(SOURCE, text), Some(SOURCE), |c| {
        let b = &c.spot.bids;
        prop_assert!(b.start.is_finite() && b.top.is_finite() && 1.0 <= b.start && b.start <= b.top, "{b:?}");
        let f = &c.forecast;
        prop_assert!(f.threshold.is_finite() && f.threshold > 0.0 && f.periods >= 1, "{f:?}");
        let _ = c.room_config();
        Ok(())
    })
}

fn check_sim(text: &str) -> Result<bool, TestCaseError> {
    verdict(SimConfig::parse(SOURCE, text), Some(SOURCE), |c| {
        // Every price validated, so every node becomes a spec.
        prop_assert_eq!(c.node_specs().len(), c.nodes.len());
        prop_assert_eq!(c.tenant_specs().len(), c.tenants.len());
        prop_assert!(c.target_load > 0.0 && c.target_load <= 2.0, "target_load {}", c.target_load);
        prop_assert!(c.telemetry_secs > 0);
        let unit = |v: f64| (0.0..=1.0).contains(&v);
        prop_assert!(c.tenants.iter().all(|t| unit(t.share)) && c.tenants.iter().map(|t| t.share).sum::<f64>() > 0.0);
        prop_assert!(c.instance_types.iter().all(|t| t.gpus > 0 && t.speed > 0.0), "{:?}", c.instance_types);
        let w = &c.workload;
        prop_assert!([w.shared_fraction, w.no_spot_fraction, w.spot_only_fraction, w.failure_rate, w.hang_rate].into_iter().all(unit));
        prop_assert!(w.max_gpus >= 1 && 1 <= w.min_duration_secs && w.min_duration_secs <= w.max_duration_secs);
        Ok(())
    })
}

fn check_theme(text: &str) -> Result<bool, TestCaseError> {
    verdict(theme_file::parse(SOURCE, text), Some(SOURCE), |_| Ok(()))
}

fn check_jobs(text: &str) -> Result<bool, TestCaseError> {
    verdict(JobsFile::parse(SOURCE, text), Some(SOURCE), |file| {
        let declared: BTreeSet<&str> = file.tenant.iter().map(|t| t.id.as_str()).collect();
        for t in &file.tenant {
            prop_assert!(Micros::parse_decimal(&t.monthly_budget).is_ok(), "{t:?}");
        }
        prop_assert_eq!(file.tenants().len(), file.tenant.len());
        let jobs = file.jobs(1);
        prop_assert_eq!(jobs.len(), file.job.len());
        for (spec, _) in &jobs {
            prop_assert!(spec.gpus >= 1 && spec.steps_total >= 1, "{spec:?}");
            prop_assert!(declared.contains(spec.tags.tenant.0.as_str()), "{spec:?}");
        }
        Ok(())
    })
}

/// A Slurm job as read: placed on nodes only once it runs, GPU indices only
/// on its own nodes.
fn slurm_job_sane(j: &SlurmJob) -> Result<(), TestCaseError> {
    if j.state == SlurmState::Pending {
        prop_assert!(j.nodes.is_empty() && j.started.is_none(), "a pending job is nowhere: {j:?}");
    }
    for (node, _) in &j.gpu_idx {
        prop_assert!(j.nodes.contains(node), "GPU indices on a node the job is not on: {j:?}");
    }
    Ok(())
}

/// Nodes as read: named, once each, using no more GPUs than they have.
fn slurm_nodes_sane(nodes: &[SlurmNode]) -> Result<(), TestCaseError> {
    let mut names = BTreeSet::new();
    for n in nodes {
        prop_assert!(!n.name.is_empty() && names.insert(n.name.as_str()), "nameless or repeated node: {n:?}");
        prop_assert!(n.gpus_used <= n.gpus, "{n:?}");
    }
    Ok(())
}

fn check_squeue_json(text: &str) -> Result<bool, TestCaseError> {
    verdict(slurm_json::jobs(SOURCE, text), Some(SOURCE), |jobs| jobs.iter().try_for_each(slurm_job_sane))
}

fn check_sinfo_json(text: &str) -> Result<bool, TestCaseError> {
    verdict(slurm_json::nodes(SOURCE, text), Some(SOURCE), |nodes| slurm_nodes_sane(&nodes))
}

fn check_squeue_text(text: &str) -> Result<bool, TestCaseError> {
    verdict(slurm_text::jobs(SOURCE, text), Some(SOURCE), |jobs| jobs.iter().try_for_each(slurm_job_sane))
}

fn check_sinfo_text(text: &str) -> Result<bool, TestCaseError> {
    verdict(slurm_text::nodes(SOURCE, text), Some(SOURCE), |nodes| slurm_nodes_sane(&nodes))
}

fn check_partitions(text: &str) -> Result<bool, TestCaseError> {
    verdict(slurm_text::partitions(SOURCE, text), Some(SOURCE), |parts| {
        prop_assert!(parts.iter().all(|p| !p.name.is_empty()), "{parts:?}");
        Ok(())
    })
}

/// GRES text never fails (what is not a GPU counts as none), and a time
/// limit read is never negative.
fn check_gres(text: &str) -> Result<bool, TestCaseError> {
    let gpus = gres::parse(text);
    prop_assert!(gpus.kind.as_deref() != Some(""), "{gpus:?}");
    let _ = gres::tres_gpus(text);
    prop_assert!(slurm_text::limit(text).is_none_or(|l| l.0 >= 0), "{text:?}");
    Ok(true)
}

/// A host list expands to names that are not empty, or is refused.
fn check_hostlist(text: &str) -> Result<bool, TestCaseError> {
    match expand_hostlist(text) {
        Some(names) => {
            prop_assert!(names.iter().all(|n| !n.is_empty() && !n.contains([',', '[', ']']) && !n.contains(char::is_whitespace)), "{names:?}");
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The line a configuration error names (`line N: ...`, made by
/// `sources::toml_message` for the engine, simulator and jobs files) is the
/// line where the TOML error's span starts.
fn check_toml_error_line(text: &str) -> Result<bool, TestCaseError> {
    let Err(e) = toml::from_str::<EngineConfig>(text) else { return Ok(true) };
    let message = gpuroom::sources::toml_message(text, &e);
    if let Some(span) = e.span() {
        let line = 1 + text.as_bytes()[..span.start.min(text.len())].iter().filter(|b| **b == b'\n').count();
        prop_assert!(message.starts_with(&format!("line {line}: ")), "an error on line {line} reads {message:?}");
    }
    Ok(false)
}

/// An amount parsed is what the text says: digits with at most one point and
/// a leading minus, equal (to float precision) to the text read as a float.
fn check_money(text: &str) -> Result<bool, TestCaseError> {
    verdict(Micros::parse_decimal(text), Some(&format!("{text:?}")), |m| {
        let s = text.trim();
        let digits = s.strip_prefix('-').unwrap_or(s);
        prop_assert!(digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') && digits.matches('.').count() <= 1, "{s:?}");
        let float: f64 = s.parse().map_err(|e| TestCaseError::fail(format!("{s:?} parsed to {m:?} but is no number: {e}")))?;
        prop_assert!((float - m.0 as f64 / 1e6).abs() <= 1e-6 + float.abs() * 1e-12, "{s:?} parsed to {m:?}");
        Ok(())
    })
}

// ------------------------------------------------------------------- targets

/// For one parser: the real inputs parse; arbitrary and mutated input keep
/// the contract. Attributes go on the two fuzzing properties.
macro_rules! fuzz_target {
    ($(#[$attr:meta])* $name:ident: $seeds:ident => $check:ident) => {
        mod $name {
            use super::*;

            #[test]
            fn real_input_parses() {
                for (i, seed) in $seeds().iter().enumerate() {
                    match $check(seed) {
                        Ok(true) => {}
                        Ok(false) => panic!("seed {i} of {} is refused", stringify!($seeds)),
                        Err(e) => panic!("seed {i} of {}: {e}", stringify!($seeds)),
                    }
                }
            }

            proptest! {
                #![proptest_config(config())]

                $(#[$attr])*
                #[test]
                fn arbitrary_input(text in arbitrary_text(&$seeds())) {
                    $check(&text)?;
                }

                $(#[$attr])*
                #[test]
                fn mutated_real_input(text in mutated($seeds())) {
                    $check(&text)?;
                }
            }
        }
    };
}

fuzz_target!(price_history_dump: price_seeds => check_prices);
fuzz_target!(spot_trace_file: trace_seeds => check_trace);
fuzz_target!(spot_trace_lifetimes: trace_seeds => check_trace_lifetimes);
fuzz_target!(philly_trace: philly_seeds => check_philly);
fuzz_target!(alibaba_nodes: alibaba_node_seeds => check_alibaba_nodes);
fuzz_target!(alibaba_pods: alibaba_pod_seeds => check_alibaba_pods);
fuzz_target!(helios_series: helios_seeds => check_helios);
fuzz_target!(dcgm_page: dcgm_seeds => check_dcgm);
fuzz_target!(dcgm_finite_figures: dcgm_seeds => check_dcgm_finite);
fuzz_target!(imds_instance_action: instance_action_seeds => check_instance_action);
fuzz_target!(imds_rebalance: rebalance_seeds => check_rebalance);
fuzz_target!(progress_line: progress_seeds => check_progress);
fuzz_target!(slurm_squeue_json: squeue_json_seeds => check_squeue_json);
fuzz_target!(slurm_sinfo_json: sinfo_json_seeds => check_sinfo_json);
fuzz_target!(slurm_squeue_text: squeue_text_seeds => check_squeue_text);
fuzz_target!(slurm_sinfo_text: sinfo_text_seeds => check_sinfo_text);
fuzz_target!(slurm_partitions: partition_seeds => check_partitions);
fuzz_target!(slurm_gres: gres_seeds => check_gres);
fuzz_target!(slurm_hostlist: hostlist_seeds => check_hostlist);
fuzz_target!(engine_config: engine_seeds => check_engine);
fuzz_target!(sim_config: sim_seeds => check_sim);
fuzz_target!(theme_toml: theme_seeds => check_theme);
fuzz_target!(jobs_file: jobs_seeds => check_jobs);
fuzz_target!(toml_error_line: engine_seeds => check_toml_error_line);
fuzz_target!(money_amount: money_seeds => check_money);

proptest! {
    #![proptest_config(config())]

    /// Every amount with at most six decimals reads back exactly.
    #[test]
    fn money_round_trips(micros in (i64::MIN + 1)..=i64::MAX, pad in 0usize..3) {
        let sign = if micros < 0 { "-" } else { "" };
        let abs = micros.unsigned_abs();
        let text = format!("{sign}{}.{:06}{}", abs / 1_000_000, abs % 1_000_000, "0".repeat(pad));
        prop_assert_eq!(Micros::parse_decimal(&text), Ok(Micros(micros)), "{}", text);
    }
}
