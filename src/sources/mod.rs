//! Adapters from the outside world to the core's types: the real data files
//! the simulator replays (AWS spot price-history dumps, spot preemption
//! traces, the Philly, Alibaba and Helios traces), and the live sources and
//! executors (NVML, dcgm-exporter, EC2, IMDS, local processes, Slurm).
//!
//! Parsers take text and a source name and return domain values or an error
//! that names the source and the line or entry; live adapters are tokio tasks
//! that send `report::Report`s down a channel. None of them touches the `Room`.

pub mod alibaba;
pub mod aws;
pub mod dcgm;
pub mod ec2_capacity;
pub mod helios;
pub mod imds;
pub mod local;
pub mod nvml;
pub mod philly;
pub mod price_history;
pub mod report;
pub mod slurm;
pub mod spot_trace;

/// A parse failure that says where: the file (or source) and the position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {position}: {message}")]
pub struct ParseError {
    pub source_name: String,
    /// "line 12", "entry 7", "line 3 column 14"...
    pub position: String,
    pub message: String,
}

/// A TOML error as `line N: message`, the line found from the error's span
/// (configuration and theme files report their errors this way).
pub fn toml_message(text: &str, err: &toml::de::Error) -> String {
    // Count newlines before the span: `lines()` would miss the line a span starts.
    let line = err.span().map(|span| 1 + text.as_bytes()[..span.start.min(text.len())].iter().filter(|b| **b == b'\n').count());
    let at = line.map(|l| format!("line {l}: ")).unwrap_or_default();
    format!("{at}{}", err.message())
}

impl ParseError {
    pub fn new(source_name: &str, position: impl Into<String>, message: impl Into<String>) -> ParseError {
        ParseError { source_name: source_name.to_string(), position: position.into(), message: message.into() }
    }

    pub(crate) fn from_json(source_name: &str, err: &serde_json::Error) -> ParseError {
        ParseError::new(source_name, format!("line {} column {}", err.line(), err.column()), err.to_string())
    }
}
