//! `gpuroom doctor` as a user runs it on a head node: one line per configured
//! source, ok or why not, and a failing exit status when any source is down.
//! Here (no GPU) NVML must say "no NVIDIA driver"; a dcgm-exporter served by
//! a real loopback server answers; a port nobody listens on is refused; and
//! a bad configuration file is a clear error naming the file and line.

#[path = "support/loopback.rs"]
mod loopback;

use std::process::{Command, Output};

use loopback::{Loopback, Reply};

const EXPORTER: &str = "\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-1\",device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"gpu-a\"} 87
DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-2\",device=\"nvidia1\",modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"gpu-a\"} 12
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-1\",device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"gpu-a\"} 30000
DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-2\",device=\"nvidia1\",modelName=\"NVIDIA A100-SXM4-40GB\",Hostname=\"gpu-a\"} 100
";

fn doctor(config: &str) -> Output {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).expect("write the config");
    Command::new(env!("CARGO_BIN_EXE_gpuroom")).args(["doctor", "--config"]).arg(&path).env("XDG_CONFIG_HOME", dir.path()).output().expect("run gpuroom doctor")
}

fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("an address").port()
}

#[test]
fn doctor_names_each_source_and_why_it_does_not_answer() {
    let exporter = Loopback::start(|_| Reply::ok("text/plain; version=0.0.4", EXPORTER));
    let work = tempfile::tempdir().expect("a temp dir");
    let dead = format!("http://127.0.0.1:{}/metrics", dead_port());
    let config = format!(
        "[sources.dcgm]\nurls = [{:?}, {:?}]\ntimeout_ms = 2000\n[sources.local]\nwork_dir = {:?}\n",
        exporter.url("/metrics"),
        dead,
        work.path().display().to_string()
    );
    let out = doctor(&config);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = |needle: &str| text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no line for {needle}:\n{text}")).to_string();
    let exporter_line = line(&exporter.url("/metrics"));
    assert!(exporter_line.starts_with("ok") && exporter_line.contains("2 GPU readings from gpu-a"), "{exporter_line}");
    let dead_line = line(&dead);
    assert!(dead_line.starts_with("FAIL"), "{dead_line}");
    assert!(line("local executor").starts_with("ok"), "{text}");
    if std::path::Path::new("/dev/nvidiactl").exists() {
        assert!(line("nvml").starts_with("ok"), "{text}");
    } else {
        let nvml = line("nvml");
        assert!(nvml.starts_with("FAIL") && nvml.contains("no NVIDIA driver"), "{nvml}");
    }
    assert!(!out.status.success(), "a source is down: the exit status says so");
    assert!(err.contains("sources did not answer"), "{err}");
}

#[test]
fn a_bad_sources_table_is_an_error_with_the_file_and_line() {
    let out = doctor("[sources.dcgm]\nurls = [\"http://x:9400/metrics\"]\ntimeuot_ms = 5\n");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    assert!(err.contains("config.toml") && err.contains("line ") && err.contains("unknown field `timeuot_ms`"), "{err}");
}
