//! Spot instance traces from "Can't Be Late" (NSDI'24): a spot instance probed
//! every `gap_seconds`, `1` while alive and `0` once preempted (or, in the
//! availability traces, the number of instances obtainable).
//!
//! A run of alive samples ending in a dead one is an interruption after the
//! run's length; a run that reaches the end of the file is censored.

use serde::Deserialize;

use super::ParseError;
use crate::domain::units::Secs;
/// Lifetimes are the hazard model's input; the type lives with the model so
/// the core does not depend on this adapter.
pub use crate::market::hazard::Lifetime;

#[derive(Deserialize)]
struct Raw {
    metadata: Metadata,
    data: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Metadata {
    gap_seconds: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpotTrace {
    pub gap: Secs,
    /// Instances obtainable at each sample (0 or 1 in preemption traces).
    pub samples: Vec<u32>,
}

/// A trace sampled less often than weekly says nothing about spot lifetimes;
/// the bound also keeps `run * gap` far from overflow.
const MAX_GAP_SECS: i64 = 7 * 86_400;

pub fn parse(source_name: &str, text: &str) -> Result<SpotTrace, ParseError> {
    let raw: Raw = serde_json::from_str(text).map_err(|e| ParseError::from_json(source_name, &e))?;
    if !(1..=MAX_GAP_SECS).contains(&raw.metadata.gap_seconds) {
        return Err(ParseError::new(
            source_name,
            "metadata",
            format!("gap_seconds must be between 1 and {MAX_GAP_SECS} (a week), got {}", raw.metadata.gap_seconds),
        ));
    }
    let mut samples = Vec::with_capacity(raw.data.len());
    for (i, value) in raw.data.iter().enumerate() {
        let n = value
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| ParseError::new(source_name, format!("sample {i}"), format!("expected a non-negative integer, got {value}")))?;
        samples.push(n);
    }
    if samples.is_empty() {
        return Err(ParseError::new(source_name, "data", "no samples"));
    }
    Ok(SpotTrace { gap: Secs(raw.metadata.gap_seconds), samples })
}

impl SpotTrace {
    pub fn alive(&self, i: usize) -> bool {
        self.samples[i % self.samples.len()] > 0
    }

    /// Lifetimes of every alive run, in order.
    pub fn lifetimes(&self) -> Vec<Lifetime> {
        let mut out = Vec::new();
        let mut run = 0i64;
        for &s in &self.samples {
            if s > 0 {
                run += 1;
            } else if run > 0 {
                out.push(Lifetime { secs: Secs(run.saturating_mul(self.gap.0)), interrupted: true });
                run = 0;
            }
        }
        if run > 0 {
            out.push(Lifetime { secs: Secs(run.saturating_mul(self.gap.0)), interrupted: false });
        }
        out
    }

    /// Fraction of samples with capacity.
    pub fn availability(&self) -> f64 {
        self.samples.iter().filter(|s| **s > 0).count() as f64 / self.samples.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_ending_in_zero_are_interruptions_and_the_last_is_censored() {
        let trace = parse("t.json", r#"{"metadata": {"gap_seconds": 32}, "data": [0, 1, 1, 0, 0, 1, 1, 1]}"#).unwrap();
        assert_eq!(trace.lifetimes(), vec![Lifetime { secs: Secs(64), interrupted: true }, Lifetime { secs: Secs(96), interrupted: false }]);
        assert!((trace.availability() - 5.0 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn bad_traces_are_refused_with_their_place() {
        let err = parse("t.json", r#"{"metadata": {"gap_seconds": 32}, "data": [1, -1]}"#).unwrap_err();
        assert_eq!(err.position, "sample 1");
        let err = parse("t.json", r#"{"metadata": {"gap_seconds": 0}, "data": [1]}"#).unwrap_err();
        assert_eq!(err.position, "metadata");
        assert!(parse("t.json", r#"{"metadata": {"gap_seconds": 32}, "data": []}"#).is_err());
        let err = parse("t.json", r#"{"metadata": {"gap_seconds": 9223372036854775807}, "data": [1, 1]}"#).unwrap_err();
        assert!(err.to_string().contains("a week"), "{err}");
        assert!(parse("t.json", "not json").unwrap_err().position.starts_with("line 1"));
    }
}
