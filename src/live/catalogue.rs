//! What a live node is: the GPU shapes and list prices of EC2's GPU instance
//! types (built in, extendable in the configuration), and the nodes an
//! operator declares by host name (on-premises machines, or to say what a
//! dcgm-exporter endpoint's machine costs). Owns no state; builds `NodeSpec`s.

use serde::Deserialize;

use crate::domain::cluster::{BillingMode, NodeSpec};
use crate::domain::ids::NodeId;
use crate::domain::units::{Mib, Micros, MicrosPerHour};

/// One instance type's GPUs, host and on-demand list price.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceShape {
    pub name: String,
    pub gpu_model: String,
    pub gpus: u8,
    #[serde(rename = "gpu_memory_mib")]
    pub gpu_memory: Mib,
    pub cpus: u32,
    #[serde(rename = "host_memory_mib")]
    pub host_memory: Mib,
    /// Dollars per hour, as a decimal string ("3.06").
    #[serde(deserialize_with = "dollars")]
    pub on_demand: MicrosPerHour,
}

/// A node declared by host name; every field is optional and fills in what
/// the GPUs themselves cannot say (what it is and what it costs). `host` may
/// be a pattern (`gpu-st-p4d-*`, `n?1`), and `partition` names a Slurm
/// partition whose nodes it describes; a declaration with both needs both.
/// The first that matches wins: an exact host name before any pattern.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeDecl {
    pub host: String,
    pub partition: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub billing: Option<BillingMode>,
    /// What the machine costs per hour when not spot ("1.20"); default: the
    /// instance type's list price, or 0 for a machine of unknown type.
    #[serde(deserialize_with = "optional_dollars")]
    pub price: Option<MicrosPerHour>,
    pub gpu_model: Option<String>,
    pub gpus: Option<u8>,
    pub gpu_memory_mib: Option<u32>,
}

fn dollars<'de, D: serde::Deserializer<'de>>(d: D) -> Result<MicrosPerHour, D::Error> {
    let text = String::deserialize(d)?;
    Micros::parse_decimal(&text).map(|m| MicrosPerHour(m.0)).map_err(serde::de::Error::custom)
}

fn optional_dollars<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<MicrosPerHour>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    text.map(|t| Micros::parse_decimal(&t).map(|m| MicrosPerHour(m.0)).map_err(serde::de::Error::custom)).transpose()
}

/// EC2 GPU instance types with us-east-1 on-demand Linux list prices
/// (dollars per hour), GPU memory as the driver reports it.
const BUILT_IN: &[(&str, &str, u8, u32, u32, u32, i64)] = &[
    ("p2.xlarge", "K80-12GB", 1, 12_288, 4, 62_464, 900_000),
    ("p2.8xlarge", "K80-12GB", 8, 12_288, 32, 499_712, 7_200_000),
    ("p2.16xlarge", "K80-12GB", 16, 12_288, 64, 749_568, 14_400_000),
    ("p3.2xlarge", "V100-16GB", 1, 16_384, 8, 62_464, 3_060_000),
    ("p3.8xlarge", "V100-16GB", 4, 16_384, 32, 249_856, 12_240_000),
    ("p3.16xlarge", "V100-16GB", 8, 16_384, 64, 499_712, 24_480_000),
    ("p3dn.24xlarge", "V100-32GB", 8, 32_768, 96, 786_432, 31_212_000),
    ("p4d.24xlarge", "A100-40GB", 8, 40_960, 96, 1_179_648, 32_772_600),
    ("p5.48xlarge", "H100-80GB", 8, 81_920, 192, 2_097_152, 98_320_000),
    ("g4dn.xlarge", "T4-16GB", 1, 16_384, 4, 16_384, 526_000),
    ("g4dn.12xlarge", "T4-16GB", 4, 16_384, 48, 196_608, 3_912_000),
    ("g5.xlarge", "A10G-24GB", 1, 24_576, 4, 16_384, 1_006_000),
    ("g5.12xlarge", "A10G-24GB", 4, 24_576, 48, 196_608, 5_672_000),
    ("g5.48xlarge", "A10G-24GB", 8, 24_576, 192, 786_432, 16_288_000),
];

#[derive(Clone, Debug, PartialEq)]
pub struct Catalogue {
    shapes: Vec<InstanceShape>,
    nodes: Vec<NodeDecl>,
}

impl Default for Catalogue {
    fn default() -> Catalogue {
        Catalogue::new(Vec::new(), Vec::new())
    }
}

impl Catalogue {
    /// The built-in shapes, with `extra` added (a name given again replaces the built-in).
    pub fn new(extra: Vec<InstanceShape>, nodes: Vec<NodeDecl>) -> Catalogue {
        let mut shapes: Vec<InstanceShape> = BUILT_IN
            .iter()
            .filter(|(name, ..)| !extra.iter().any(|e| e.name == *name))
            .map(|&(name, model, gpus, mem, cpus, host, price)| InstanceShape {
                name: name.into(),
                gpu_model: model.into(),
                gpus,
                gpu_memory: Mib(mem),
                cpus,
                host_memory: Mib(host),
                on_demand: MicrosPerHour(price),
            })
            .collect();
        shapes.extend(extra);
        Catalogue { shapes, nodes }
    }

    pub fn instance_type(&self, name: &str) -> Option<&InstanceShape> {
        self.shapes.iter().find(|s| s.name == name)
    }

    pub fn node(&self, host: &str) -> Option<&NodeDecl> {
        self.node_in(host, &[])
    }

    /// The declaration of `host`, a node of these Slurm `partitions`.
    pub fn node_in(&self, host: &str, partitions: &[String]) -> Option<&NodeDecl> {
        let in_partition = |d: &NodeDecl| d.partition.as_ref().is_none_or(|p| partitions.contains(p));
        self.nodes.iter().find(|d| d.host == host && in_partition(d)).or_else(|| {
            self.nodes.iter().find(|d| {
                let named = !d.host.is_empty() || d.partition.is_some();
                named && (d.host.is_empty() || crate::domain::text::glob(&d.host, host)) && in_partition(d)
            })
        })
    }

    /// The spec of the machine `host`, from what its GPUs said (`count`,
    /// `model`, `memory`), its declaration and its instance type's shape.
    /// A machine of no known type is on-premises: paid for whether used or
    /// not (reserved), at its declared price or 0.
    pub fn host_spec(&self, id: NodeId, host: &str, decl: Option<&NodeDecl>, count: u8, model: Option<String>, memory: Option<Mib>) -> NodeSpec {
        let decl = decl.cloned().unwrap_or_default();
        let shape = decl.instance_type.as_deref().and_then(|t| self.instance_type(t));
        let billing = decl.billing.unwrap_or(if shape.is_some() { BillingMode::OnDemand } else { BillingMode::Reserved });
        let on_demand = shape.map(|s| s.on_demand).or(decl.price).unwrap_or(MicrosPerHour(0));
        let gpu_memory = memory.filter(|m| m.0 > 0).or(decl.gpu_memory_mib.map(Mib)).or(shape.map(|s| s.gpu_memory)).unwrap_or(Mib(0));
        NodeSpec {
            id,
            name: host.to_string(),
            instance_type: decl.instance_type.clone().unwrap_or_else(|| "on-prem".into()),
            zone: decl.zone.clone().unwrap_or_else(|| "local".into()),
            billing,
            gpu_model: model.or(decl.gpu_model.clone()).or(shape.map(|s| s.gpu_model.clone())).unwrap_or_else(|| "GPU".into()),
            gpu_count: if count > 0 { count } else { decl.gpus.or(shape.map(|s| s.gpus)).unwrap_or(0) },
            gpu_memory,
            mig_capable: false,
            cpus: shape.map_or(0, |s| s.cpus),
            host_memory: shape.map_or(Mib(0), |s| s.host_memory),
            on_demand_price: on_demand,
            contract_price: decl.price.unwrap_or(on_demand),
            max_price: (billing == BillingMode::Spot).then_some(on_demand),
            mig_slices: Vec::new(),
            mig_gpus: 0,
        }
    }

    /// A declared node's spec without any GPU report (the local executor's
    /// machine when NVML is absent): only when it declares its GPUs.
    pub fn declared_spec(&self, id: NodeId, host: &str) -> Option<NodeSpec> {
        let decl = self.node(host)?;
        let spec = self.host_spec(id, host, Some(decl), 0, None, None);
        (spec.problem().is_none()).then_some(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::text::glob;

    #[test]
    fn a_declaration_matches_by_exact_name_then_by_pattern_and_partition() {
        let decl = |host: &str, partition: Option<&str>, t: &str| NodeDecl {
            host: host.into(),
            partition: partition.map(Into::into),
            instance_type: Some(t.into()),
            ..NodeDecl::default()
        };
        let c = Catalogue::new(
            Vec::new(),
            vec![
                decl("gpu-st-*", None, "p4d.24xlarge"),
                decl("", Some("spot"), "g5.12xlarge"),
                decl("gpu-st-7", None, "p5.48xlarge"),
                decl("n?", Some("dev"), "g4dn.xlarge"),
            ],
        );
        let t = |host: &str, parts: &[&str]| c.node_in(host, &parts.iter().map(|p| p.to_string()).collect::<Vec<_>>()).and_then(|d| d.instance_type.clone());
        assert_eq!(t("gpu-st-7", &[]).as_deref(), Some("p5.48xlarge"), "the exact name first");
        assert_eq!(t("gpu-st-1", &["spot"]).as_deref(), Some("p4d.24xlarge"), "then the first that matches");
        assert_eq!(t("other", &["spot"]).as_deref(), Some("g5.12xlarge"));
        assert_eq!(t("n1", &["dev"]).as_deref(), Some("g4dn.xlarge"));
        assert_eq!(t("n1", &["prod"]), None, "a pattern with a partition needs both");
        assert_eq!(t("n12", &["dev"]), None);
        assert!(glob("a*b*c", "axxbyyc") && glob("*", "") && !glob("a*b", "ac") && glob("**x", "x"));
        assert!(!glob(&"*a".repeat(30), &"a".repeat(29)), "no blow-up on a hostile pattern");
    }
}
