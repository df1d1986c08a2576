//! The Helios cluster-state series (Hu et al., SC'21; S-Lab-System-Group/
//! HeliosArtifact): one row per minute with 24 columns of job and GPU counts
//! for one virtual cluster, `time` like `2020-05-01 00:00:00` (UTC assumed;
//! the artifact gives no zone).
//!
//! Owns: parsing the file as published into [`HeliosSample`]s, and the pure
//! roll-up of minutely samples into hourly means that the forecast consumes.
//! It must not touch the `Room` or decide what the numbers are used for.

use std::collections::BTreeMap;

use chrono::{DurationRound, NaiveDateTime, TimeDelta};
use serde::{Deserialize, Serialize};

use super::ParseError;
use crate::domain::units::At;

/// The columns we keep; the others (the `_noless_8` / `_less_8` splits and
/// GPU-job counts) are derivable or unused, and serde skips them by name.
#[derive(Deserialize)]
struct Row {
    time: String,
    total_job_num: u32,
    running_job_num: u32,
    pending_job_num: u32,
    total_gpu_num: u32,
    running_gpu_num: u32,
    pending_gpu_num: u32,
    idle_gpu_num: u32,
    gpu_utilization: f64,
}

/// One minute of one virtual cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeliosSample {
    pub at: At,
    pub total_jobs: u32,
    pub running_jobs: u32,
    pub pending_jobs: u32,
    pub total_gpus: u32,
    pub running_gpus: u32,
    /// GPUs asked for by queued jobs (demand not served).
    pub pending_gpus: u32,
    pub idle_gpus: u32,
    /// Fraction of the cluster's GPUs busy, 0..=1.
    pub gpu_utilization: f64,
}

/// Parses the whole file. Rows must be strictly increasing in time: the file
/// is a series, and a repeated or backward stamp means it was spliced wrongly.
pub fn parse(source_name: &str, text: &str) -> Result<Vec<HeliosSample>, ParseError> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| ParseError::new(source_name, "line 1", e.to_string()))?.clone();
    let mut samples: Vec<HeliosSample> = Vec::new();
    for (i, record) in reader.deserialize::<Row>().enumerate() {
        // Line 1 is the header.
        let line = format!("line {}", i + 2);
        let row = record.map_err(|e| ParseError::new(source_name, line.clone(), csv_message(&headers, &e)))?;
        let at = NaiveDateTime::parse_from_str(&row.time, "%Y-%m-%d %H:%M:%S")
            .map_err(|e| ParseError::new(source_name, line.clone(), format!("time {:?}: {e}", row.time)))?
            .and_utc();
        if let Some(prev) = samples.last()
            && at <= prev.at
        {
            return Err(ParseError::new(source_name, line, format!("time {} is not after the previous row's {}", row.time, prev.at)));
        }
        if !row.gpu_utilization.is_finite() || !(0.0..=1.0).contains(&row.gpu_utilization) {
            return Err(ParseError::new(source_name, line, format!("gpu_utilization {} is not a number in 0..=1", row.gpu_utilization)));
        }
        if row.running_gpu_num > row.total_gpu_num {
            return Err(ParseError::new(source_name, line, format!("running_gpu_num {} exceeds total_gpu_num {}", row.running_gpu_num, row.total_gpu_num)));
        }
        samples.push(HeliosSample {
            at,
            total_jobs: row.total_job_num,
            running_jobs: row.running_job_num,
            pending_jobs: row.pending_job_num,
            total_gpus: row.total_gpu_num,
            running_gpus: row.running_gpu_num,
            pending_gpus: row.pending_gpu_num,
            idle_gpus: row.idle_gpu_num,
            gpu_utilization: row.gpu_utilization,
        });
    }
    Ok(samples)
}

/// The csv crate names a bad field by its index; the reader wants its name.
fn csv_message(headers: &csv::StringRecord, err: &csv::Error) -> String {
    if let csv::ErrorKind::Deserialize { err, .. } = err.kind()
        && let Some(index) = err.field()
        && let Some(name) = usize::try_from(index).ok().and_then(|i| headers.get(i))
    {
        return format!("column {name}: {}", err.kind());
    }
    err.to_string()
}

/// The means of one clock hour's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HourlyMean {
    /// The start of the hour.
    pub hour: At,
    pub running_gpus: f64,
    pub total_gpus: f64,
    pub pending_gpus: f64,
    pub gpu_utilization: f64,
    /// How many minutes the means are over; 0 marks an hour with no samples
    /// at all, whose values are carried from the hour before.
    pub minutes: u32,
}

/// Rolls minutely samples up into one mean per clock hour, for every hour
/// from the first sample's to the last's, so the result is a regular series
/// a seasonal model can index by position.
///
/// Gaps: a partly covered hour is the mean of the minutes present (`minutes`
/// says how many; a gauge's missing minutes are assumed to look like the ones
/// seen). An hour with no sample repeats the previous hour's means with
/// `minutes: 0`, as a gauge holds its last value until read again; the first
/// hour always has a sample. Input order does not matter.
pub fn hourly_means(samples: &[HeliosSample]) -> Vec<HourlyMean> {
    // Sums of running, total, pending, utilization, and the count.
    let mut buckets: BTreeMap<At, ([f64; 4], u32)> = BTreeMap::new();
    for s in samples {
        let Ok(hour) = s.at.duration_trunc(TimeDelta::hours(1)) else { continue };
        let (sums, n) = buckets.entry(hour).or_insert(([0.0; 4], 0));
        sums[0] += f64::from(s.running_gpus);
        sums[1] += f64::from(s.total_gpus);
        sums[2] += f64::from(s.pending_gpus);
        sums[3] += s.gpu_utilization;
        *n += 1;
    }
    let (Some(&first), Some(&last)) = (buckets.keys().next(), buckets.keys().next_back()) else { return Vec::new() };
    let mut out: Vec<HourlyMean> = Vec::new();
    let mut hour = first;
    while hour <= last {
        match buckets.get(&hour) {
            Some((sums, n)) => {
                let n_f = f64::from(*n);
                out.push(HourlyMean {
                    hour,
                    running_gpus: sums[0] / n_f,
                    total_gpus: sums[1] / n_f,
                    pending_gpus: sums[2] / n_f,
                    gpu_utilization: sums[3] / n_f,
                    minutes: *n,
                });
            }
            None => {
                if let Some(prev) = out.last() {
                    let filled = HourlyMean { hour, minutes: 0, ..prev.clone() };
                    out.push(filled);
                }
            }
        }
        hour += TimeDelta::hours(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "time,total_job_num,running_job_num,pending_job_num,total_gpujob_num,running_gpujob_num,pending_gpujob_num,total_gpu_num,running_gpu_num,pending_gpu_num,idle_gpu_num,gpu_utilization,running_gpu_num_noless_8,running_gpu_num_less_8,pending_gpu_num_noless_8,pending_gpu_num_less_8,total_gpu_num_noless_8,total_gpu_num_less_8,running_job_num_noless_8,running_job_num_less_8,pending_job_num_noless_8,pending_job_num_less_8,total_job_num_noless_8,total_job_num_less_8";

    fn row(time: &str, running: &str, util: &str) -> String {
        format!("{time},7,7,0,6,6,0,208,{running},0,46,{util},160,2,0,0,160,2,5,1,0,0,5,1")
    }

    fn text(rows: &[String]) -> String {
        format!("{HEADER}\n{}\n", rows.join("\n"))
    }

    #[test]
    fn parses_the_published_layout() {
        let t = text(&[row("2020-05-01 00:00:00", "162", "0.779"), row("2020-05-01 00:01:00", "160", "0.769")]);
        let s = parse("helios.csv", &t).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].running_gpus, 162);
        assert_eq!(s[0].total_gpus, 208);
        assert_eq!(s[0].idle_gpus, 46);
        assert_eq!(s[1].gpu_utilization, 0.769);
        assert_eq!(s[1].at.to_rfc3339(), "2020-05-01T00:01:00+00:00");
    }

    #[test]
    fn bad_rows_are_named_by_line_with_a_reason() {
        let good = row("2020-05-01 00:00:00", "162", "0.779");
        let cases = [
            (row("2020-05-01 00:01:00", "16x", "0.7"), "running_gpu_num"),
            (row("2020-05-01 00:01:00", "162", "NaN"), "gpu_utilization"),
            (row("2020-05-01 00:01:00", "162", "1.5"), "gpu_utilization"),
            (row("2020-05-01 00:01:00", "300", "0.7"), "exceeds total_gpu_num"),
            (row("2020-04-30 23:59:00", "162", "0.7"), "not after"),
            (row("2020-05-01 00:00:00", "162", "0.7"), "not after"),
            (row("2020-05-01 25:00:00", "162", "0.7"), "time"),
        ];
        for (bad, why) in cases {
            let err = parse("helios.csv", &text(&[good.clone(), bad.clone()])).unwrap_err();
            assert_eq!(err.source_name, "helios.csv");
            assert_eq!(err.position, "line 3", "{bad}");
            assert!(err.message.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn a_missing_column_is_named() {
        let header = HEADER.replace("running_gpu_num,", "");
        let body = "2020-05-01 00:00:00,7,7,0,6,6,0,208,0,46,0.779,160,2,0,0,160,2,5,1,0,0,5,1";
        let err = parse("h.csv", &format!("{header}\n{body}\n")).unwrap_err();
        assert!(err.message.contains("missing field `running_gpu_num`"), "{err}");
        assert_eq!(err.position, "line 2");
    }

    #[test]
    fn hourly_means_average_partial_hours_and_carry_empty_ones() {
        let rows = [
            row("2020-05-01 00:00:00", "100", "0.5"),
            row("2020-05-01 00:30:00", "200", "1.0"),
            // 01:00 has no sample at all.
            row("2020-05-01 02:59:00", "50", "0.25"),
        ];
        let s = parse("h.csv", &text(&rows)).unwrap();
        let h = hourly_means(&s);
        assert_eq!(h.len(), 3);
        assert_eq!((h[0].running_gpus, h[0].gpu_utilization, h[0].minutes), (150.0, 0.75, 2));
        assert_eq!((h[1].running_gpus, h[1].minutes), (150.0, 0));
        assert_eq!(h[1].hour.to_rfc3339(), "2020-05-01T01:00:00+00:00");
        assert_eq!((h[2].running_gpus, h[2].minutes), (50.0, 1));
        assert!(hourly_means(&[]).is_empty());
    }
}
