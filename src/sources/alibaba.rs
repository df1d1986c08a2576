//! Alibaba's 2023 GPU cluster trace (cluster-trace-gpu-v2023, Weng et al.,
//! "Beware of Fragmentation", ATC'23): GPU nodes, and pods that may ask a
//! fraction of a GPU (`gpu_milli`, thousandths of one GPU).

use serde::Deserialize;

use super::ParseError;

/// The trace's node list and its two published pod lists, as shipped in
/// `fixtures/` (name under `fixtures/`, text): the placement bench and the
/// console's trace room read them without a file system.
pub const NODES: (&str, &str) = ("cluster/alibaba-2023-gpu-nodes.csv", include_str!("../../fixtures/cluster/alibaba-2023-gpu-nodes.csv"));
pub const POD_LISTS: [(&str, &str); 2] = [
    ("jobs/alibaba-2023-pods-default.csv", include_str!("../../fixtures/jobs/alibaba-2023-pods-default.csv")),
    ("jobs/alibaba-2023-pods-gpushare40.csv", include_str!("../../fixtures/jobs/alibaba-2023-pods-gpushare40.csv")),
];

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AlibabaNode {
    pub sn: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpu: u32,
    pub model: String,
}

/// One pod. The trace's pod lists differ in columns (some have no
/// `gpu_spec`, `qos` or times): what a list lacks reads as empty.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AlibabaPod {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub num_gpu: u32,
    /// Thousandths of each GPU asked (1000: whole GPUs).
    pub gpu_milli: u32,
    /// GPU models the pod may run on, `|`-separated; empty: any.
    #[serde(default)]
    pub gpu_spec: String,
    #[serde(default)]
    pub qos: String,
    #[serde(default)]
    pub pod_phase: String,
    /// Seconds from the trace's start (absent in lists without times).
    #[serde(default)]
    pub creation_time: Option<i64>,
    #[serde(default)]
    pub deletion_time: Option<i64>,
    /// Empty for pods that were never scheduled (pending at the trace's end).
    #[serde(default)]
    pub scheduled_time: Option<i64>,
}

impl AlibabaPod {
    /// The GPU models named by `gpu_spec` (empty: any model).
    pub fn gpu_models(&self) -> Vec<String> {
        self.gpu_spec.split('|').map(str::trim).filter(|m| !m.is_empty()).map(String::from).collect()
    }

    /// When the pod was created and deleted, if the list has times.
    pub fn lifetime(&self) -> Option<(i64, i64)> {
        Some((self.creation_time?, self.deletion_time?))
    }
}

fn rows<T: for<'de> Deserialize<'de>>(source_name: &str, text: &str) -> Result<Vec<T>, ParseError> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    reader.deserialize::<T>().enumerate().map(|(i, r)| r.map_err(|e| ParseError::new(source_name, format!("line {}", i + 2), e.to_string()))).collect()
}

pub fn parse_nodes(source_name: &str, text: &str) -> Result<Vec<AlibabaNode>, ParseError> {
    rows(source_name, text)
}

pub fn parse_pods(source_name: &str, text: &str) -> Result<Vec<AlibabaPod>, ParseError> {
    let pods: Vec<AlibabaPod> = rows(source_name, text)?;
    for (i, pod) in pods.iter().enumerate() {
        let backwards = pod.lifetime().is_some_and(|(created, deleted)| deleted < created);
        if pod.gpu_milli > 1000 || backwards {
            return Err(ParseError::new(source_name, format!("line {}", i + 2), format!("pod {}: gpu_milli over 1000 or deleted before created", pod.name)));
        }
        if pod.num_gpu > 0 && pod.gpu_milli == 0 {
            return Err(ParseError::new(source_name, format!("line {}", i + 2), format!("pod {}: asks {} GPUs of 0 milli each", pod.name, pod.num_gpu)));
        }
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\nopenb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\nopenb-pod-0002,6000,12288,1,460,,LS,Pending,5,12902960,\n";

    #[test]
    fn parses_pods_and_nodes_and_names_bad_lines() {
        let pods = parse_pods("p.csv", PODS).unwrap();
        assert_eq!((pods[0].num_gpu, pods[0].gpu_milli, pods[0].scheduled_time), (1, 460, Some(427061)));
        assert_eq!(pods[1].scheduled_time, None, "never scheduled");
        let bad = format!("{PODS}openb-pod-0002,6000,12288,1,1460,,LS,Running,0,10,0\n");
        assert_eq!(parse_pods("p.csv", &bad).unwrap_err().position, "line 4");
        let bad = format!("{PODS}openb-pod-0003,six,12288,1,460,,LS,Running,0,10,0\n");
        assert_eq!(parse_pods("p.csv", &bad).unwrap_err().position, "line 4");
        // Lists without gpu_spec, qos, phase or times parse too.
        let short = parse_pods("s.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,4000,8192,2,1000\n").unwrap();
        assert_eq!((short[0].num_gpu, short[0].lifetime(), short[0].gpu_models()), (2, None, Vec::<String>::new()));
        let typed = parse_pods("t.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nopenb-pod-0000,4000,8192,1,500,V100M16|V100M32\n").unwrap();
        assert_eq!(typed[0].gpu_models(), vec!["V100M16".to_string(), "V100M32".to_string()]);
        let bad = format!("{PODS}openb-pod-0004,6000,12288,1,0,,LS,Running,0,10,0\n");
        assert!(parse_pods("p.csv", &bad).unwrap_err().to_string().contains("0 milli"));
        let nodes = parse_nodes("n.csv", "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\n").unwrap();
        assert_eq!(nodes[0].model, "P100");
    }
}
