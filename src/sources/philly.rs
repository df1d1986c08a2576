//! The Microsoft Philly job trace as published with Pollux (OSDI'21):
//! `timestamp,duration,num_gpus,gpu_time,cluster`, one job per line.

use chrono::NaiveDateTime;
use serde::Deserialize;

use super::ParseError;
use crate::domain::units::Secs;

#[derive(Deserialize)]
struct Row {
    timestamp: String,
    duration: f64,
    num_gpus: u32,
    #[allow(dead_code)]
    gpu_time: f64,
    cluster: String,
}

pub use crate::domain::trace::PhillyJob;

pub fn parse(source_name: &str, text: &str) -> Result<Vec<PhillyJob>, ParseError> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut jobs = Vec::new();
    for (i, record) in reader.deserialize::<Row>().enumerate() {
        // Line 1 is the header.
        let line = format!("line {}", i + 2);
        let row = record.map_err(|e| ParseError::new(source_name, line.clone(), e.to_string()))?;
        let submitted = NaiveDateTime::parse_from_str(&row.timestamp, "%Y-%m-%d %H:%M:%S")
            .map_err(|e| ParseError::new(source_name, line.clone(), format!("timestamp {:?}: {e}", row.timestamp)))?
            .and_utc();
        if !row.duration.is_finite() || row.duration < 0.0 {
            return Err(ParseError::new(source_name, line, format!("duration {} is not a non-negative number", row.duration)));
        }
        if row.num_gpus == 0 {
            return Err(ParseError::new(source_name, line, "num_gpus is 0"));
        }
        jobs.push(PhillyJob { submitted, duration: Secs(row.duration.round() as i64), gpus: row.num_gpus, cluster: row.cluster });
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_and_names_bad_lines() {
        let text = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,4,11804.0,6214e9\n";
        let jobs = parse("philly.csv", text).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].gpus, 4);
        assert_eq!(jobs[1].duration, Secs(2951));

        let bad = format!("{text}2017-10-09 06:13:03,NaN,1,0,x\n");
        assert_eq!(parse("p.csv", &bad).unwrap_err().position, "line 4");
        let bad = format!("{text}2017-13-45 06:13:03,5,1,5,x\n");
        assert_eq!(parse("p.csv", &bad).unwrap_err().position, "line 4");
        let bad = format!("{text}2017-10-09 06:13:03,5,zero,5,x\n");
        assert_eq!(parse("p.csv", &bad).unwrap_err().position, "line 4");
        let bad = format!("{text}2017-10-09 06:13:03,5,0,5,x\n");
        assert!(parse("p.csv", &bad).unwrap_err().message.contains("num_gpus"));
    }
}
