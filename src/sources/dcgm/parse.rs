//! One dcgm-exporter page (Prometheus text) → `GpuReading`s, one per
//! (Hostname, gpu, GPU_I_ID). The text format itself is the
//! `prometheus-parse` crate's business; this file only decides which samples
//! mean what, and says clearly when a page is not an exporter page at all.

use std::collections::BTreeMap;

use prometheus_parse::{LineInfo, Sample, Scrape, Value};

use crate::domain::units::Mib;
use crate::sources::ParseError;
use crate::sources::report::GpuReading;

/// A parsed page, with what was left out of it so that a half-broken
/// exporter is visible (in the source's health line) rather than silent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    /// Sorted by host, GPU index, then MIG instance (whole GPUs first).
    pub readings: Vec<GpuReading>,
    /// Samples of a mapped metric whose `gpu` (or `GPU_I_ID`) label was
    /// missing or not a number.
    pub skipped_samples: usize,
    /// Lines that are not Prometheus text (a body cut short, stray output).
    pub bad_lines: usize,
}

#[derive(Clone, Copy)]
enum Field {
    Util,
    FbUsed,
    FbFree,
    Power,
    SmClock,
    MemClock,
    Temp,
}

fn field(metric: &str) -> Option<Field> {
    Some(match metric {
        "DCGM_FI_DEV_GPU_UTIL" => Field::Util,
        "DCGM_FI_DEV_FB_USED" => Field::FbUsed,
        "DCGM_FI_DEV_FB_FREE" => Field::FbFree,
        "DCGM_FI_DEV_POWER_USAGE" => Field::Power,
        "DCGM_FI_DEV_SM_CLOCK" => Field::SmClock,
        "DCGM_FI_DEV_MEM_CLOCK" => Field::MemClock,
        "DCGM_FI_DEV_GPU_TEMP" => Field::Temp,
        _ => return None,
    })
}

/// The readings of one page; see `parse_page` for what is skipped.
pub fn parse(source: &str, text: &str) -> Result<Vec<GpuReading>, ParseError> {
    parse_page(source, text).map(|page| page.readings)
}

/// `source` names the page in errors (the URL); when it is a URL its host
/// stands in for a missing `Hostname` label (an exporter run with
/// `--no-hostname`), since that is how the head node knows the machine.
pub fn parse_page(source: &str, text: &str) -> Result<Page, ParseError> {
    let scrape = Scrape::parse(text.lines().map(|line| Ok(line.to_string()))).map_err(|e| ParseError::new(source, "body", e.to_string()))?;
    let fallback_host = host_of(source);
    let mut readings: BTreeMap<(String, u8, Option<u32>), GpuReading> = BTreeMap::new();
    let mut mapped = 0usize;
    let mut skipped_samples = 0usize;
    for sample in &scrape.samples {
        let Some(field) = field(&sample.metric) else { continue };
        mapped += 1;
        let (Some(value), Some((index, mig))) = (plain_value(sample), gpu_key(sample)) else {
            skipped_samples += 1;
            continue;
        };
        let host = label(sample, "Hostname").unwrap_or(&fallback_host).to_string();
        let reading = readings.entry((host.clone(), index, mig)).or_insert_with(|| GpuReading { host, index, mig_instance: mig, ..GpuReading::default() });
        if reading.uuid.is_none() {
            reading.uuid = label(sample, "UUID").map(str::to_string);
        }
        if reading.model.is_none() {
            reading.model = label(sample, "modelName").map(str::to_string);
        }
        // A figure an f32 cannot hold (1e39 W) is as meaningless as a negative one.
        let value = (value.is_finite() && value >= 0.0 && value <= f64::from(f32::MAX)).then_some(value);
        match field {
            Field::Util => reading.util_pct = value.filter(|v| *v <= 100.0).map(|v| v as f32),
            Field::FbUsed => reading.mem_used = value.and_then(whole).map(Mib),
            Field::FbFree => reading.mem_free = value.and_then(whole).map(Mib),
            Field::Power => reading.power_w = value.map(|v| v as f32),
            Field::SmClock => reading.sm_clock_mhz = value.and_then(whole),
            Field::MemClock => reading.mem_clock_mhz = value.and_then(whole),
            Field::Temp => reading.temp_c = value.map(|v| v as f32),
        }
    }
    let bad = bad_lines(text);
    if readings.is_empty() {
        return Err(nothing_usable(source, text, &scrape, mapped, &bad));
    }
    Ok(Page { readings: readings.into_values().collect(), skipped_samples, bad_lines: bad.len() })
}

/// A label's value, `None` when absent or empty (the exporter prints
/// `pod=""` and the like when it has nothing to say).
fn label<'a>(sample: &'a Sample, name: &str) -> Option<&'a str> {
    sample.labels.get(name).map(str::trim).filter(|v| !v.is_empty())
}

fn plain_value(sample: &Sample) -> Option<f64> {
    match sample.value {
        Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => Some(v),
        Value::Histogram(_) | Value::Summary(_) => None,
    }
}

/// (GPU index, MIG instance); `None` when either label is there but unusable:
/// guessing would file one GPU's figures under another.
fn gpu_key(sample: &Sample) -> Option<(u8, Option<u32>)> {
    let index = label(sample, "gpu")?.parse::<u8>().ok()?;
    let mig = match label(sample, "GPU_I_ID") {
        None => None,
        Some(id) => Some(id.parse::<u32>().ok()?),
    };
    Some((index, mig))
}

fn whole(v: f64) -> Option<u32> {
    (v <= f64::from(u32::MAX)).then(|| v.round() as u32)
}

/// 1-based numbers and texts of the lines the crate could make nothing of.
/// It skips those silently, so without this an HTML error page would read
/// as "a valid page with no metrics".
fn bad_lines(text: &str) -> Vec<(usize, &str)> {
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let ok = match LineInfo::parse(trimmed) {
            LineInfo::Empty | LineInfo::Doc { .. } | LineInfo::Type { .. } => true,
            _ if trimmed.starts_with('#') => true,
            // A sample line is good when the crate yields a sample from it (its value is a number).
            LineInfo::Sample { .. } => Scrape::parse(std::iter::once(Ok(trimmed.to_string()))).is_ok_and(|s| !s.samples.is_empty()),
            LineInfo::Ignored => false,
        };
        if !ok {
            bad.push((i + 1, trimmed));
        }
    }
    bad
}

fn nothing_usable(source: &str, text: &str, scrape: &Scrape, mapped: usize, bad: &[(usize, &str)]) -> ParseError {
    if text.trim().is_empty() {
        return ParseError::new(source, "body", "empty page: no dcgm-exporter metrics");
    }
    if mapped > 0 {
        return ParseError::new(source, "body", format!("{mapped} DCGM GPU samples, none with a usable numeric `gpu` (and `GPU_I_ID`) label"));
    }
    if let Some((line, what)) = bad.first() {
        let shown: String = what.chars().take(60).collect();
        let cut = if shown.len() < what.len() { "…" } else { "" };
        return ParseError::new(source, format!("line {line}"), format!("not Prometheus exposition text: {shown:?}{cut} (is this dcgm-exporter's /metrics?)"));
    }
    let others = match scrape.samples.first() {
        Some(first) => format!("{} samples of other metrics, e.g. {}", scrape.samples.len(), first.metric),
        None => "only comments".to_string(),
    };
    ParseError::new(source, "body", format!("no DCGM GPU samples (DCGM_FI_DEV_GPU_UTIL, _FB_USED, …): {others}"))
}

/// The host part of a URL (`http://gpu-a:9400/metrics` → `gpu-a`); a
/// source that is not a URL is its own name.
pub(crate) fn host_of(url: &str) -> String {
    reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_else(|| url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/fixtures/dcgm/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn one(readings: &[GpuReading], index: u8, mig: Option<u32>) -> &GpuReading {
        readings.iter().find(|r| r.index == index && r.mig_instance == mig).unwrap_or_else(|| panic!("no reading for gpu {index} mig {mig:?}"))
    }

    #[test]
    fn eight_gpu_a100_node() {
        let page = parse_page("http://node-a:9400/metrics", &fixture("a100-8gpu.prom")).unwrap();
        assert_eq!((page.skipped_samples, page.bad_lines), (0, 0));
        let r = &page.readings;
        assert_eq!(r.iter().map(|g| g.index).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
        assert!(r.iter().all(|g| g.host == "node-a" && g.mig_instance.is_none()));
        assert!(r.iter().all(|g| g.model.as_deref() == Some("NVIDIA A100-SXM4-40GB")));
        assert!(r.iter().all(|g| g.mem_total() == Some(Mib(40536)) && g.mem_clock_mhz == Some(1215)));
        assert!(r.iter().all(|g| g.processes.is_empty()));
        let g0 = one(r, 0, None);
        assert_eq!(g0.uuid.as_deref(), Some("GPU-6513270e-269e-0d37-f2a7-4de452e6b438"));
        assert_eq!(
            (g0.util_pct, g0.mem_used, g0.mem_free, g0.power_w, g0.sm_clock_mhz, g0.temp_c),
            (Some(98.0), Some(Mib(23038)), Some(Mib(17498)), Some(315.023), Some(1410), Some(71.0))
        );
        let g7 = one(r, 7, None);
        assert_eq!(g7.uuid.as_deref(), Some("GPU-3f63af83-bd05-61e6-211c-70cf49952399"));
        assert_eq!(
            (g7.util_pct, g7.mem_used, g7.mem_free, g7.power_w, g7.sm_clock_mhz, g7.temp_c),
            (Some(0.0), Some(Mib(0)), Some(Mib(40536)), Some(57.501), Some(210), Some(32.0))
        );
    }

    #[test]
    fn four_gpu_node_under_kubernetes() {
        let r = parse("http://node-b:9400/metrics", &fixture("a10g-4gpu-k8s.prom")).unwrap();
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|g| g.host == "node-b" && g.model.as_deref() == Some("NVIDIA A10G")));
        let g2 = one(&r, 2, None);
        assert_eq!(g2.uuid.as_deref(), Some("GPU-99c94309-570d-c195-1c24-42f9298cb3a5"));
        assert_eq!(
            (g2.util_pct, g2.mem_used, g2.mem_free, g2.power_w, g2.sm_clock_mhz, g2.mem_clock_mhz, g2.temp_c),
            (Some(95.0), Some(Mib(20272)), Some(Mib(2459)), Some(279.948), Some(1710), Some(6250), Some(70.0))
        );
        assert_eq!(one(&r, 3, None).util_pct, Some(0.0));
    }

    #[test]
    fn mig_instances_are_separate_readings() {
        let r = parse("http://node-c:9400/metrics", &fixture("a100-mig.prom")).unwrap();
        let keys: Vec<(u8, Option<u32>)> = r.iter().map(|g| (g.index, g.mig_instance)).collect();
        assert_eq!(keys, [(0, Some(1)), (0, Some(2)), (1, Some(1)), (1, Some(5)), (1, Some(13)), (2, None), (3, None)]);
        let slice = one(&r, 1, Some(5));
        assert_eq!(slice.uuid.as_deref(), Some("GPU-bd685167-6693-4036-d17e-44973d4882a5"));
        assert_eq!(slice.host, "node-c");
        assert_eq!((slice.mem_used, slice.mem_free, slice.mem_total()), (Some(Mib(5793)), Some(Mib(3935)), Some(Mib(9728))));
        // DCGM has no utilization for a GPU instance: unknown, not 0 %.
        assert_eq!(slice.util_pct, None);
        assert_eq!((slice.power_w, slice.sm_clock_mhz, slice.temp_c), (Some(308.989), Some(1410), Some(66.0)));
        let idle_slice = one(&r, 1, Some(13));
        assert_eq!((idle_slice.mem_used, idle_slice.mem_free), (Some(Mib(0)), Some(Mib(4864))));
        let whole_gpu = one(&r, 2, None);
        assert_eq!((whole_gpu.util_pct, whole_gpu.mem_used), (Some(97.0), Some(Mib(35026))));
    }

    #[test]
    fn an_html_page_is_refused_naming_source_and_line() {
        let err = parse("http://node-x:9400/metrics", &fixture("proxy-502.html")).unwrap_err();
        assert_eq!(err.source_name, "http://node-x:9400/metrics");
        assert_eq!(err.position, "line 1");
        assert!(err.message.contains("not Prometheus exposition text") && err.message.contains("<html>"), "{err}");
    }

    #[test]
    fn empty_and_foreign_pages_are_clear_errors() {
        for empty in ["", "\n\n  \n"] {
            let err = parse("n", empty).unwrap_err();
            assert!(err.to_string().starts_with("n: body: empty page"), "{err}");
        }
        let node_exporter = "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 12\n";
        let err = parse("http://n:9100/metrics", node_exporter).unwrap_err();
        assert!(err.message.contains("no DCGM GPU samples") && err.message.contains("go_goroutines"), "{err}");
        let comments = parse("n", "# just a comment\n").unwrap_err();
        assert!(comments.message.contains("only comments"), "{comments}");
        // A plain-text error that happens to look like one sample line is still not a page.
        let err = parse("n", "404 page not found\n").unwrap_err();
        assert_eq!(err.position, "line 1", "{err}");
    }

    #[test]
    fn samples_without_a_usable_gpu_label_are_skipped_and_counted() {
        let text = concat!(
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h\"} 50\n",
            "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-b\",Hostname=\"h\"} 60\n",
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"\",Hostname=\"h\"} 61\n",
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"one\",Hostname=\"h\"} 62\n",
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"300\",Hostname=\"h\"} 63\n",
            "DCGM_FI_DEV_FB_USED{gpu=\"1\",GPU_I_ID=\"x\",Hostname=\"h\"} 64\n",
            "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h\"} 1024\n",
            "DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h\"} 3072\n",
            "DCGM_FI_DEV_XID_ERRORS{Hostname=\"h\"} 0\n",
            "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h\"} 1410\n",
            "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-a\",Hostn", // the body was cut off mid-line
        );
        let page = parse_page("src", text).unwrap();
        assert_eq!((page.skipped_samples, page.bad_lines), (5, 1));
        assert_eq!(page.readings.len(), 1);
        let g = &page.readings[0];
        assert_eq!((g.index, g.util_pct, g.mem_total(), g.sm_clock_mhz), (0, Some(50.0), Some(Mib(4096)), Some(1410)));

        let none_usable = "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-b\"} 60\nDCGM_FI_DEV_FB_USED{gpu=\"-1\"} 3\n";
        let err = parse("src", none_usable).unwrap_err();
        assert!(err.message.contains("2 DCGM GPU samples, none with a usable"), "{err}");
    }

    #[test]
    fn nan_negative_and_absurd_values_are_unknown() {
        let text = concat!(
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"h\"} NaN\n",
            "DCGM_FI_DEV_FB_USED{gpu=\"0\",Hostname=\"h\"} -1\n",
            "DCGM_FI_DEV_FB_FREE{gpu=\"0\",Hostname=\"h\"} 1e20\n",
            "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",Hostname=\"h\"} +Inf\n",
            "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"h\"} -4\n",
            "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",Hostname=\"h\"} nan\n",
            "DCGM_FI_DEV_MEM_CLOCK{gpu=\"0\",Hostname=\"h\"} 1215.4\n",
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",Hostname=\"h\"} 250\n",
        );
        let r = parse("src", text).unwrap();
        let g = one(&r, 0, None);
        assert_eq!((g.util_pct, g.mem_used, g.mem_free, g.power_w, g.temp_c, g.sm_clock_mhz), (None, None, None, None, None, None));
        assert_eq!(g.mem_clock_mhz, Some(1215));
        assert_eq!(one(&r, 1, None).util_pct, None);
    }

    #[test]
    fn hosts_are_kept_apart_and_a_missing_hostname_is_the_urls_host() {
        let text = concat!(
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"b\"} 1\n",
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"a\"} 2\n",
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 3\n",
        );
        let r = parse("http://10.0.0.7:9400/metrics", text).unwrap();
        let hosts: Vec<(&str, Option<f32>)> = r.iter().map(|g| (g.host.as_str(), g.util_pct)).collect();
        assert_eq!(hosts, [("10.0.0.7", Some(3.0)), ("a", Some(2.0)), ("b", Some(1.0))]);
        assert_eq!(parse("recorded.prom", "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 3\n").unwrap()[0].host, "recorded.prom");
    }

    #[test]
    fn host_part_of_urls() {
        assert_eq!(host_of("http://node-a:9400/metrics"), "node-a");
        assert_eq!(host_of("http://10.1.2.3/metrics"), "10.1.2.3");
        assert_eq!(host_of("fixtures/dcgm/a100-8gpu.prom"), "fixtures/dcgm/a100-8gpu.prom");
    }
}
