//! `squeue --json` and `sinfo --json`, read for what gpuroom shows. Both the
//! 22.05 shape (openapi v0.0.38: plain numbers and strings, `null` for no
//! limit) and the newer one (23.02+: `{set, infinite, number}` objects, states
//! as arrays of flags) are read, so one gpuroom works across Slurm upgrades.
//! A reply whose `errors` list is not empty is a failure: squeue exits 0
//! with an empty job list when the controller is down.

use serde_json::Value;

use super::gres;
use crate::core::slurm::{expand_hostlist, SlurmJob, SlurmNode, SlurmState};
use crate::core::units::{At, Secs};
use crate::sources::ParseError;

/// A number, or the newer `{set, infinite, number}`; `None` when unset,
/// infinite or absent.
fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::Object(o) => {
            if o.get("infinite").and_then(Value::as_bool) == Some(true) || o.get("set").and_then(Value::as_bool) == Some(false) {
                return None;
            }
            number(o.get("number"))
        }
        _ => None,
    }
}

/// A string, or the newer array of flags joined with '+'.
fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("+"),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(Value::String(s)) if !s.is_empty() => s.split(',').map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

fn epoch(v: Option<&Value>) -> Option<At> {
    number(v).filter(|s| *s > 0).and_then(|s| chrono::DateTime::from_timestamp(i64::try_from(s).ok()?, 0))
}

fn parse_doc(source: &str, body: &str) -> Result<Value, ParseError> {
    let doc: Value = serde_json::from_str(body).map_err(|e| ParseError::from_json(source, &e))?;
    if let Some(errors) = doc.get("errors").and_then(Value::as_array)
        && let Some(first) = errors.first()
    {
        let what = [first.get("description"), first.get("error"), first.get("source")]
            .into_iter()
            .map(|v| text(v))
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        return Err(ParseError::new(source, "errors", if what.is_empty() { first.to_string() } else { what }));
    }
    Ok(doc)
}

/// The Slurm release and cluster name in a reply's `meta`.
pub fn meta(doc_text: &str) -> (String, String) {
    let Ok(doc) = serde_json::from_str::<Value>(doc_text) else { return Default::default() };
    let meta = doc.get("meta");
    let slurm = meta.and_then(|m| m.get("Slurm").or_else(|| m.get("slurm")));
    let release = text(slurm.and_then(|s| s.get("release")));
    let cluster = text(slurm.and_then(|s| s.get("cluster")));
    (release, cluster)
}

/// Jobs from `squeue --json`.
pub fn jobs(source: &str, body: &str) -> Result<Vec<SlurmJob>, ParseError> {
    let doc = parse_doc(source, body)?;
    let list = doc.get("jobs").and_then(Value::as_array).ok_or_else(|| ParseError::new(source, "top level", "no \"jobs\" list"))?;
    list.iter().enumerate().map(|(i, j)| job(source, i, j)).collect()
}

fn job(source: &str, i: usize, j: &Value) -> Result<SlurmJob, ParseError> {
    let id = number(j.get("job_id")).ok_or_else(|| ParseError::new(source, format!("job {}", i + 1), "no job_id"))?;
    let nodes_text = text(j.get("nodes"));
    let nodes = expand_hostlist(&nodes_text).ok_or_else(|| ParseError::new(source, format!("job {id}"), format!("node list {nodes_text:?} does not parse")))?;
    // gres_detail: one entry per allocated node, in node-list order.
    let detail: Vec<gres::Gpus> = match j.get("gres_detail") {
        Some(Value::Array(a)) => a.iter().map(|d| gres::parse(&text(Some(d)))).collect(),
        _ => Vec::new(),
    };
    let gpu_idx: Vec<(String, Vec<u32>)> = nodes.iter().zip(&detail).filter(|(_, g)| !g.idx.is_empty()).map(|(n, g)| (n.clone(), g.idx.clone())).collect();
    let node_count = number(j.get("node_count")).unwrap_or(1).max(1) as u32;
    let allocated: u32 = detail.iter().map(|g| g.count).sum();
    let asked = [j.get("tres_per_job"), j.get("tres_per_node")]
        .into_iter()
        .enumerate()
        .map(|(k, v)| {
            let per = gres::parse(&text(v)).count;
            if k == 1 { per.saturating_mul(node_count) } else { per }
        })
        .find(|n| *n > 0)
        .or_else(|| gres::tres_gpus(&text(j.get("tres_alloc_str"))))
        .or_else(|| gres::tres_gpus(&text(j.get("tres_req_str"))))
        .unwrap_or(0);
    let state_text = text(j.get("job_state"));
    // Newer Slurm lists flags after the base state (RUNNING+...); the first is the state.
    let state = SlurmState::parse(state_text.split('+').next().unwrap_or(""));
    Ok(SlurmJob {
        id,
        name: text(j.get("name")),
        user: text(j.get("user_name")),
        account: text(j.get("account")),
        partition: text(j.get("partition")),
        reason: text(j.get("state_reason")),
        gpus: if allocated > 0 && state != SlurmState::Pending { allocated } else { asked },
        nodes: if state == SlurmState::Pending { Vec::new() } else { nodes },
        gpu_idx,
        submitted: epoch(j.get("submit_time")),
        started: if state == SlurmState::Pending { None } else { epoch(j.get("start_time")) },
        time_limit: number(j.get("time_limit")).map(|m| Secs((m as i64).saturating_mul(60))),
        priority: number(j.get("priority")).unwrap_or(0),
        restarts: number(j.get("restart_cnt")).unwrap_or(0) as u32,
        excluded: expand_hostlist(&text(j.get("excluded_nodes"))).unwrap_or_default(),
        state,
    })
}

/// Nodes from `sinfo --json`.
pub fn nodes(source: &str, body: &str) -> Result<Vec<SlurmNode>, ParseError> {
    let doc = parse_doc(source, body)?;
    let list = doc.get("nodes").and_then(Value::as_array).ok_or_else(|| ParseError::new(source, "top level", "no \"nodes\" list"))?;
    list.iter()
        .enumerate()
        .map(|(i, n)| {
            let name = text(n.get("name"));
            if name.is_empty() {
                return Err(ParseError::new(source, format!("node {}", i + 1), "no name"));
            }
            let total = gres::parse(&text(n.get("gres")));
            let used = gres::parse(&text(n.get("gres_used")));
            let mut state = text(n.get("state")).to_ascii_lowercase();
            for flag in strings(n.get("state_flags")) {
                state.push('+');
                state.push_str(&flag.to_ascii_lowercase());
            }
            Ok(SlurmNode {
                name,
                state,
                cpus: number(n.get("cpus")).unwrap_or(0) as u32,
                cpus_alloc: number(n.get("alloc_cpus")).unwrap_or(0) as u32,
                gpus: total.count,
                gpu_type: total.kind,
                gpus_used: used.count.min(total.count),
                gpus_used_idx: used.idx,
                partitions: strings(n.get("partitions")),
                reason: text(n.get("reason")),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = r#"{"meta":{"plugin":{"type":"openapi/v0.0.38"},"Slurm":{"version":{"major":22,"micro":8,"minor":5},"release":"22.05.8"}},"errors":[],
      "jobs":[{"job_id":7,"name":"train","user_name":"alice","account":"acme","partition":"gpu","job_state":"RUNNING","state_reason":"None",
        "nodes":"n[1-2]","node_count":2,"tres_per_node":"gres:gpu:2","gres_detail":["gpu:a100:2(IDX:0-1)","gpu:a100:2(IDX:2-3)"],
        "submit_time":1796307109,"start_time":1796307110,"time_limit":null,"priority":4294901759,"restart_cnt":1,"excluded_nodes":""},
        {"job_id":8,"name":"wait","user_name":"bob","account":"beta","partition":"gpu","job_state":"PENDING","state_reason":"Resources",
        "nodes":"","node_count":1,"tres_per_node":"gres:gpu:3","gres_detail":[],"submit_time":1796307111,"start_time":0,"time_limit":60,"priority":5,"restart_cnt":0}]}"#;

    const NEW: &str = r#"{"meta":{"slurm":{"release":"23.11.4","cluster":"big"}},"errors":[],
      "jobs":[{"job_id":9,"name":"x","user_name":"c","account":"acme","partition":"gpu","job_state":["RUNNING"],"state_reason":"None",
        "nodes":"n3","node_count":{"set":true,"infinite":false,"number":1},"tres_per_node":"gres/gpu:1","gres_detail":["gpu:1(IDX:3)"],
        "submit_time":{"set":true,"infinite":false,"number":1796307000},"start_time":{"set":true,"infinite":false,"number":1796307001},
        "time_limit":{"set":false,"infinite":true,"number":0},"priority":{"set":true,"infinite":false,"number":12},"restart_cnt":0}]}"#;

    #[test]
    fn jobs_read_in_the_22_05_shape_with_gpus_per_node_and_their_indices() {
        let jobs = jobs("squeue", OLD).unwrap();
        assert_eq!(jobs[0].gpus, 4);
        assert_eq!(jobs[0].gpu_idx, vec![("n1".into(), vec![0, 1]), ("n2".into(), vec![2, 3])]);
        assert_eq!((jobs[0].restarts, jobs[0].time_limit), (1, None));
        assert_eq!((jobs[1].state.clone(), jobs[1].gpus, jobs[1].time_limit), (SlurmState::Pending, 3, Some(Secs(3600))));
        assert!(jobs[1].nodes.is_empty() && jobs[1].started.is_none());
        assert_eq!(meta(OLD), ("22.05.8".to_string(), String::new()));
    }

    #[test]
    fn jobs_read_in_the_newer_shape_too() {
        let jobs = jobs("squeue", NEW).unwrap();
        assert_eq!((jobs[0].state.clone(), jobs[0].gpus, jobs[0].priority, jobs[0].time_limit), (SlurmState::Running, 1, 12, None));
        assert_eq!(jobs[0].gpu_idx, vec![("n3".into(), vec![3])]);
        assert_eq!(meta(NEW), ("23.11.4".to_string(), "big".to_string()));
    }

    #[test]
    fn a_reply_with_errors_or_garbage_is_a_failure_that_says_why() {
        let down = r#"{"meta":{},"errors":[{"description":"Failed while looking for jobs","error_number":-1,"error":"Unspecified error","source":"slurm_load_jobs"}],"jobs":[]}"#;
        let e = jobs("squeue", down).unwrap_err();
        assert!(e.to_string().contains("Failed while looking for jobs"), "{e}");
        assert!(jobs("squeue", "{\"jobs\": [").unwrap_err().to_string().starts_with("squeue: line 1"));
        assert!(jobs("squeue", r#"{"jobs":[{"name":"no id"}]}"#).unwrap_err().to_string().contains("no job_id"));
        assert!(jobs("squeue", r#"{"jobs":[{"job_id":1,"nodes":"n[1-"}]}"#).unwrap_err().to_string().contains("does not parse"));
    }

    #[test]
    fn nodes_read_with_their_gres_and_use_in_both_shapes() {
        let old = r#"{"errors":[],"nodes":[{"name":"n1","state":"mixed","state_flags":["DRAIN"],"cpus":4,"alloc_cpus":1,"gres":"gpu:fake:4","gres_used":"gpu:fake:2(IDX:0-1)","partitions":["gpu","spare"],"reason":"fan"}]}"#;
        let n = &nodes("sinfo", old).unwrap()[0];
        assert_eq!((n.state.as_str(), n.gpus, n.gpus_used, n.gpu_type.as_deref()), ("mixed+drain", 4, 2, Some("fake")));
        assert_eq!(n.gpus_used_idx, vec![0, 1]);
        assert!(n.unavailable());
        let new = r#"{"errors":[],"nodes":[{"name":"n2","state":["IDLE"],"cpus":8,"alloc_cpus":0,"gres":"gpu:2","gres_used":"gpu:0(IDX:N/A)","partitions":["gpu"]}]}"#;
        let n = &nodes("sinfo", new).unwrap()[0];
        assert_eq!((n.state.as_str(), n.gpus, n.gpus_used), ("idle", 2, 0));
        assert!(!n.unavailable());
    }
}
