//! Alibaba's 2023 GPU cluster trace (cluster-trace-gpu-v2023, Weng et al.,
//! "Beware of Fragmentation", ATC'23): GPU nodes, and pods that may ask a
//! fraction of a GPU (`gpu_milli`, thousandths of one GPU).

use serde::Deserialize;

use super::ParseError;

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AlibabaNode {
    pub sn: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpu: u32,
    pub model: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AlibabaPod {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub num_gpu: u32,
    /// Thousandths of each GPU asked (1000: whole GPUs).
    pub gpu_milli: u32,
    pub gpu_spec: String,
    pub qos: String,
    pub pod_phase: String,
    /// Seconds from the trace's start.
    pub creation_time: i64,
    pub deletion_time: i64,
    /// Empty for pods that were never scheduled (pending at the trace's end).
    pub scheduled_time: Option<i64>,
}

fn rows<T: for<'de> Deserialize<'de>>(source_name: &str, text: &str) -> Result<Vec<T>, ParseError> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    reader
        .deserialize::<T>()
        .enumerate()
        .map(|(i, r)| r.map_err(|e| ParseError::new(source_name, format!("line {}", i + 2), e.to_string())))
        .collect()
}

pub fn parse_nodes(source_name: &str, text: &str) -> Result<Vec<AlibabaNode>, ParseError> {
    rows(source_name, text)
}

pub fn parse_pods(source_name: &str, text: &str) -> Result<Vec<AlibabaPod>, ParseError> {
    let pods: Vec<AlibabaPod> = rows(source_name, text)?;
    for (i, pod) in pods.iter().enumerate() {
        if pod.gpu_milli > 1000 || pod.deletion_time < pod.creation_time {
            return Err(ParseError::new(source_name, format!("line {}", i + 2), format!("pod {}: gpu_milli over 1000 or deleted before created", pod.name)));
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
        let nodes = parse_nodes("n.csv", "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\n").unwrap();
        assert_eq!(nodes[0].model, "P100");
    }
}
