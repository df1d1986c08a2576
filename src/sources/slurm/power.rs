//! The `[sources.slurm.power]` table: what gpuroom launches when Slurm's
//! power saving resumes a CLOUD node (`gpuroom slurm-resume`, Slurm's
//! ResumeProgram), chosen by node name.
//!
//! ```toml
//! [sources.slurm.power]
//! cluster = "research"          # optional: the instances' cluster tag (default: Slurm's ClusterName)
//! [[sources.slurm.power.nodes]] # the first whose pattern matches a node's name is used
//! pattern = "cloud-*"           # glob on node names: * any run of characters, ? one
//! instance_type = "g5.xlarge"
//! image = "ami-0123456789abcdef0"
//! zones = ["us-east-1a", "us-east-1b"]
//! billing = "auto"              # "spot" | "on-demand" | "auto" (default: the capacity policy chooses)
//! max_price = "0.60"            # optional: the most a spot node may cost an hour
//! ```
//!
//! Owns parsing, validation and the name matching only; it must not talk to
//! Slurm or EC2 (that is `live::slurm_power`) nor choose what to buy.

use serde::Deserialize;

use crate::domain::text::glob;
use crate::domain::units::{Micros, MicrosPerHour};

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PowerConfig {
    /// The value of the instances' cluster tag; none: Slurm's ClusterName.
    pub cluster: Option<String>,
    pub nodes: Vec<PowerNode>,
}

/// What a node whose name matches `pattern` is launched as.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerNode {
    pub pattern: String,
    pub instance_type: String,
    /// The AMI.
    pub image: String,
    /// Where it may be launched; the policy chooses among them.
    pub zones: Vec<String>,
    #[serde(default)]
    pub billing: PowerBilling,
    /// Dollars per hour ("0.60"): spot is not bought when the market is at
    /// or above it, and a spot launch asks at most this.
    #[serde(default, deserialize_with = "optional_dollars")]
    pub max_price: Option<MicrosPerHour>,
}

/// How a node may be paid for.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerBilling {
    Spot,
    OnDemand,
    /// Either: the capacity policy chooses.
    #[default]
    Auto,
}

impl PowerBilling {
    pub fn label(self) -> &'static str {
        match self {
            PowerBilling::Spot => "spot",
            PowerBilling::OnDemand => "on-demand",
            PowerBilling::Auto => "auto",
        }
    }
}

fn optional_dollars<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<MicrosPerHour>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    text.map(|t| {
        Micros::parse_decimal(&t)
            .map(|m| MicrosPerHour(m.0))
            .map_err(|_| serde::de::Error::custom(format!("max_price {t:?} is not an amount of dollars (like \"0.60\")")))
    })
    .transpose()
}

fn plain(text: &str, extra: &[char]) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || extra.contains(&c))
}

impl PowerConfig {
    /// What is wrong with the table, naming the entry and the field.
    pub fn problem(&self) -> Option<String> {
        if let Some(c) = &self.cluster
            && !plain(c, &[])
        {
            return Some(format!("[sources.slurm.power] cluster {c:?}: letters, digits, '-', '_' and '.' only"));
        }
        if self.nodes.is_empty() {
            return Some("[sources.slurm.power] has no [[sources.slurm.power.nodes]]: nothing says what to launch".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let at = |field: &str, why: String| Some(format!("[[sources.slurm.power.nodes]] {} (pattern {:?}): {field}: {why}", i + 1, n.pattern));
            if !plain(&n.pattern, &['*', '?']) {
                return at("pattern", "a glob of node-name characters, * and ? (like \"cloud-*\")".into());
            }
            if !plain(&n.instance_type, &[]) {
                return at("instance_type", format!("{:?} is not an instance type", n.instance_type));
            }
            if !plain(&n.image, &[]) {
                return at("image", format!("{:?} is not an AMI id", n.image));
            }
            if n.zones.is_empty() {
                return at("zones", "empty: which zones may it be launched in?".into());
            }
            if let Some(z) = n.zones.iter().find(|z| !plain(z, &[])) {
                return at("zones", format!("{z:?} is not a zone"));
            }
            if let Some(p) = n.max_price
                && p.0 <= 0
            {
                return at("max_price", "must be above 0".into());
            }
            if n.billing == PowerBilling::OnDemand && n.max_price.is_some() {
                return at("max_price", "only spot has a max price, and billing is \"on-demand\"".into());
            }
        }
        None
    }

    /// The first entry whose pattern matches `node`, with its number (from 1).
    pub fn template_for(&self, node: &str) -> Option<(usize, &PowerNode)> {
        self.nodes.iter().enumerate().find(|(_, n)| glob(&n.pattern, node)).map(|(i, n)| (i + 1, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "[[nodes]]\npattern = \"cloud-*\"\ninstance_type = \"g5.xlarge\"\nimage = \"ami-1\"\nzones = [\"us-east-1a\"]\n";

    #[test]
    fn globs_match_node_names() {
        assert!(glob("cloud-*", "cloud-1"));
        assert!(glob("cloud-*", "cloud-"));
        assert!(!glob("cloud-*", "cloud1"));
        assert!(glob("*-st-*", "gpu-st-p4d-1"));
        assert!(glob("n??", "n01"));
        assert!(!glob("n??", "n1"));
        assert!(glob("a*b*c", "axxbyybc"));
        assert!(!glob("a*b*c", "axxbyyb"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exact2"));
        assert!(glob("*", "anything"));
    }

    #[test]
    fn the_table_parses_with_defaults_and_the_first_match_wins() {
        let text = format!(
            "cluster = \"c1\"\n[[nodes]]\npattern = \"cloud-2\"\ninstance_type = \"p3.2xlarge\"\nimage = \"ami-2\"\nzones = [\"z\"]\nbilling = \"spot\"\nmax_price = \"1.20\"\n{ONE}"
        );
        let c: PowerConfig = toml::from_str(&text).unwrap();
        assert_eq!(c.problem(), None);
        assert_eq!(c.template_for("cloud-2").map(|(i, n)| (i, n.instance_type.as_str(), n.max_price)), Some((1, "p3.2xlarge", Some(MicrosPerHour(1_200_000)))));
        assert_eq!(c.template_for("cloud-1").map(|(i, n)| (i, n.billing)), Some((2, PowerBilling::Auto)));
        assert!(c.template_for("gpu-1").is_none());
    }

    #[test]
    fn mistakes_are_named_by_field() {
        let err = |text: &str| match toml::from_str::<PowerConfig>(text) {
            Err(e) => e.to_string(),
            Ok(c) => c.problem().unwrap_or_else(|| panic!("accepted: {text}")),
        };
        assert!(err(&format!("{ONE}subnet = \"s\"\n")).contains("subnet"));
        assert!(err(&ONE.replace("image = \"ami-1\"\n", "")).contains("image"));
        assert!(err(&format!("{ONE}billing = \"cheap\"\n")).contains("cheap"));
        assert!(err(&format!("{ONE}max_price = \"-1\"\n")).contains("max_price"));
        assert!(err(&format!("{ONE}max_price = \"0\"\n")).contains("max_price: must be above 0"));
        assert!(err(&format!("{ONE}max_price = \"1\"\nbilling = \"on-demand\"\n")).contains("max_price: only spot"));
        assert!(err(&ONE.replace("[\"us-east-1a\"]", "[]")).contains("zones: empty"));
        assert!(err(&ONE.replace("cloud-*", "cloud [1]")).contains("pattern"));
        assert!(err("").contains("no [[sources.slurm.power.nodes]]"));
        assert!(err(&format!("cluster = \"a b\"\n{ONE}")).contains("cluster"));
    }
}
