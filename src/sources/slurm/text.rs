//! Slurm's text outputs: `scontrol show partition --oneliner` (every version
//! has it; sinfo's JSON has no partitions before 23.02), and the parsable
//! `squeue -O …` / `sinfo -N -O …` lines gpuroom falls back to where
//! `--json` is missing (Slurm before 21.08, or built without the plugin).
//! The fallback has no GPU indices; its times are the controller's local
//! time, read here as UTC.

use std::collections::BTreeMap;

use super::gres;
use crate::domain::slurm::{SlurmJob, SlurmNode, SlurmPartition, SlurmState, expand_hostlist};
use crate::domain::units::{At, Secs};
use crate::sources::ParseError;

/// The squeue fields the fallback asks for, in order; the name goes last
/// because it may itself contain the separator.
pub const SQUEUE_FORMAT: &str = "JobID:|,UserName:|,Account:|,Partition:|,State:|,Reason:|,tres-per-node:|,NodeList:|,SubmitTime:|,StartTime:|,TimeLimit:|,PriorityLong:|,NumNodes:|,RestartCnt:|,Name:";
pub const SINFO_FORMAT: &str = "NodeList:|,StateLong:|,CPUs:|,CPUsState:|,Gres:|,GresUsed:|,Partition:|,Reason:";

/// `Key=Value` pairs of one `--oneliner` line.
fn pairs(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace().filter_map(|kv| kv.split_once('=')).collect()
}

pub fn partitions(source: &str, body: &str) -> Result<Vec<SlurmPartition>, ParseError> {
    body.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let kv = pairs(line);
            let name =
                kv.get("PartitionName").filter(|n| !n.is_empty()).ok_or_else(|| ParseError::new(source, format!("line {}", i + 1), "no PartitionName="))?;
            let nodes = kv.get("Nodes").copied().unwrap_or("");
            let nodes = if nodes == "(null)" {
                Vec::new()
            } else {
                expand_hostlist(nodes).ok_or_else(|| ParseError::new(source, format!("line {}", i + 1), format!("node list {nodes:?} does not parse")))?
            };
            Ok(SlurmPartition {
                name: name.to_string(),
                state: kv.get("State").copied().unwrap_or("").to_string(),
                nodes,
                default: kv.get("Default") == Some(&"YES"),
            })
        })
        .collect()
}

/// "2026-12-03T14:26:15" (no zone: the controller's local time), "N/A" → None.
fn time(text: &str) -> Option<At> {
    chrono::NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%dT%H:%M:%S").ok().map(|t| t.and_utc())
}

/// "UNLIMITED" → None; "1-02:03:04", "02:03:04", "03:04", "5" (minutes).
/// A figure too large for a duration is no limit we can read: None.
pub fn limit(text: &str) -> Option<Secs> {
    let text = text.trim();
    let (days, clock) = match text.split_once('-') {
        Some((d, c)) => (d.parse::<i64>().ok()?, c),
        None => (0, text),
    };
    let parts: Vec<i64> = clock.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let hms = |h: i64, m: i64, s: i64| h.checked_mul(3600)?.checked_add(m.checked_mul(60)?)?.checked_add(s);
    let secs = match parts.as_slice() {
        [m] if days == 0 => hms(0, *m, 0)?,
        [h] => hms(*h, 0, 0)?,
        [m, s] if days == 0 => hms(0, *m, *s)?,
        [h, m] => hms(*h, *m, 0)?,
        [h, m, s] => hms(*h, *m, *s)?,
        _ => return None,
    };
    days.checked_mul(86_400)?.checked_add(secs).filter(|s| *s >= 0).map(Secs)
}

pub fn jobs(source: &str, body: &str) -> Result<Vec<SlurmJob>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in body.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("line {}", i + 1);
        let f: Vec<&str> = line.splitn(15, '|').collect();
        if f.len() < 15 {
            return Err(ParseError::new(source, at(), format!("{} fields, 15 expected", f.len())));
        }
        let id = f[0].trim().parse::<u64>().map_err(|_| ParseError::new(source, at(), format!("job id {:?} is not a number", f[0])))?;
        let state = SlurmState::parse(f[4]);
        let nodes = if state == SlurmState::Pending {
            Vec::new()
        } else {
            expand_hostlist(f[7].trim()).ok_or_else(|| ParseError::new(source, at(), format!("node list {:?} does not parse", f[7])))?
        };
        let count = f[12].trim().parse::<u32>().unwrap_or(1).max(1);
        out.push(SlurmJob {
            id,
            user: f[1].to_string(),
            account: if f[2] == "(null)" { String::new() } else { f[2].to_string() },
            partition: f[3].to_string(),
            reason: f[5].to_string(),
            gpus: gres::parse(f[6]).count.saturating_mul(count),
            shards: gres::parse(f[6]).shards.saturating_mul(count),
            shard_idx: Vec::new(),
            cpus: 0,
            required: Vec::new(),
            node_count: count,
            nodes,
            gpu_idx: Vec::new(),
            submitted: time(f[8]),
            started: if state == SlurmState::Pending { None } else { time(f[9]) },
            time_limit: limit(f[10]),
            priority: f[11].trim().parse().unwrap_or(0),
            restarts: f[13].trim().parse().unwrap_or(0),
            excluded: Vec::new(),
            comment: String::new(),
            wckey: String::new(),
            gpu_type: gres::parse(f[6]).kind,
            saved_at: None,
            work_dir: String::new(),
            admin_comment: String::new(),
            name: f[14].to_string(),
            state,
        });
    }
    Ok(out)
}

/// `sinfo -N` prints a node once per partition: merged here.
pub fn nodes(source: &str, body: &str) -> Result<Vec<SlurmNode>, ParseError> {
    let mut by_name: BTreeMap<String, SlurmNode> = BTreeMap::new();
    for (i, line) in body.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = line.splitn(8, '|').collect();
        if f.len() < 8 {
            return Err(ParseError::new(source, format!("line {}", i + 1), format!("{} fields, 8 expected", f.len())));
        }
        if f[0].trim().is_empty() {
            return Err(ParseError::new(source, format!("line {}", i + 1), "no node name"));
        }
        let total = gres::parse(f[4]);
        let used = gres::parse(f[5]);
        // CPUsState is allocated/idle/other/total.
        let alloc = f[3].split('/').next().and_then(|a| a.parse().ok()).unwrap_or(0);
        let partition = f[6].trim_end_matches('*').to_string();
        let node = by_name.entry(f[0].trim().to_string()).or_insert_with(|| SlurmNode {
            name: f[0].trim().to_string(),
            // `~` marks a powered-down CLOUD node: kept, as the JSON's flag says it.
            state: format!(
                "{}{}",
                f[1].trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']),
                if f[1].trim_end().ends_with('~') { "+powered_down" } else { "" }
            ),
            cpus: f[2].trim().parse().unwrap_or(0),
            cpus_alloc: alloc,
            gpus: total.count,
            gpu_type: total.kind,
            gpus_used: used.count.min(total.count),
            gpus_used_idx: used.idx,
            shards: total.shards,
            shards_used: used.shards.min(total.shards),
            partitions: Vec::new(),
            reason: if f[7] == "none" { String::new() } else { f[7].to_string() },
            hostname: String::new(),
            node: None,
        });
        node.partitions.push(partition);
    }
    Ok(by_name.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_from_scontrol_oneliners() {
        let body = "PartitionName=gpu AllowGroups=ALL Default=YES Nodes=n[1-2] State=UP\nPartitionName=spare Default=NO Nodes=(null) State=DOWN\n";
        let p = partitions("scontrol", body).unwrap();
        assert_eq!((p[0].name.as_str(), p[0].default, p[0].nodes.len()), ("gpu", true, 2));
        assert_eq!((p[1].state.as_str(), p[1].nodes.len()), ("DOWN", 0));
        assert!(partitions("scontrol", "Nodes=x\n").unwrap_err().to_string().contains("line 1"));
    }

    #[test]
    fn recorded_22_05_text_says_what_its_json_says() {
        let jobs = jobs("squeue -O", include_str!("../../../fixtures/slurm/squeue-22.05.txt")).unwrap();
        let from_json = super::super::json::jobs("squeue --json", include_str!("../../../fixtures/slurm/squeue-22.05.json")).unwrap();
        assert_eq!(jobs.len(), 5);
        for j in &from_json {
            let t = jobs.iter().find(|t| t.id == j.id).unwrap_or_else(|| panic!("job {} in the text", j.id));
            assert_eq!(
                (&t.name, &t.account, &t.partition, &t.state, t.gpus, &t.nodes, t.held(), t.time_limit),
                (&j.name, &j.account, &j.partition, &j.state, j.gpus, &j.nodes, j.held(), j.time_limit),
                "job {}",
                j.id
            );
        }
        let nodes = nodes("sinfo -O", include_str!("../../../fixtures/slurm/sinfo-22.05.txt")).unwrap();
        assert_eq!((nodes.len(), nodes[0].gpus, nodes[0].gpus_used, nodes[0].gpus_used_idx.clone()), (1, 4, 3, vec![0, 1, 2]));
        assert_eq!(nodes[0].partitions, ["gpu", "spare"]);
        let parts = partitions("scontrol show partition", include_str!("../../../fixtures/slurm/scontrol-partition-22.05.txt")).unwrap();
        assert_eq!(
            parts.iter().map(|p| (p.name.as_str(), p.default, p.state.as_str(), p.nodes.clone())).collect::<Vec<_>>(),
            [("gpu", true, "UP", vec!["localhost".to_string()]), ("spare", false, "UP", vec!["localhost".to_string()])]
        );
    }

    #[test]
    fn a_limit_too_large_for_a_duration_is_unread_not_a_panic() {
        assert_eq!(limit("99999999999999999-00:00:00"), None);
        assert_eq!(limit("9223372036854775807:00"), None);
        assert_eq!(limit("-5"), None);
    }

    #[test]
    fn squeue_and_sinfo_fallback_lines_as_22_05_prints_them() {
        let body = "3|root|beta|gpu|RUNNING|None|gres:gpu:1|localhost|2026-12-03T14:26:15|2026-12-03T14:26:16|365-00:00:00|4294901755|1|0|a|pipe|name\n\
                    1|root|(null)|spare|PENDING|BadConstraints|gres:gpu:2||2026-12-03T14:12:11|N/A|UNLIMITED|0|1|1|train1\n";
        let j = jobs("squeue", body).unwrap();
        assert_eq!((j[0].name.as_str(), j[0].gpus, j[0].nodes.clone()), ("a|pipe|name", 1, vec!["localhost".to_string()]));
        assert_eq!(j[0].time_limit, Some(Secs(365 * 86_400)));
        assert_eq!((j[1].account.as_str(), j[1].restarts, j[1].time_limit, j[1].started), ("", 1, None, None));
        assert!(jobs("squeue", "x|y\n").unwrap_err().to_string().contains("15 expected"));
        assert!(jobs("squeue", "x|a|b|c|d|e|f|g|h|i|j|k|l|m|n\n").unwrap_err().to_string().contains("not a number"));
        let nodes = nodes(
            "sinfo",
            "localhost|mixed|4|1/3/0/4|gpu:fake:4|gpu:fake:1(IDX:0)|gpu*|none\nlocalhost|mixed|4|1/3/0/4|gpu:fake:4|gpu:fake:1(IDX:0)|spare|none\n",
        )
        .unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(
            (nodes[0].gpus, nodes[0].gpus_used, nodes[0].cpus_alloc, nodes[0].partitions.clone()),
            (4, 1, 1, vec!["gpu".to_string(), "spare".to_string()])
        );
        assert_eq!(limit("30:00"), Some(Secs(1800)));
        assert_eq!(limit("2-12"), Some(Secs(2 * 86_400 + 12 * 3600)));
    }
}
