//! The `gpuroom` binary as a user runs it: a headless simulated day with its
//! summary, a recorded run replayed to the same figures, and clear errors for
//! bad input.

use std::process::{Command, Output};

fn gpuroom(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuroom")).args(args).output().expect("run gpuroom")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The summary without the lines that carry wall-clock timings.
fn figures(text: &str) -> String {
    text.lines().filter(|l| !l.starts_with("simulated ") && !l.starts_with("replayed ") && !l.starts_with("event log ")).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_simulated_day_prints_its_summary_and_is_reproducible() {
    let out = gpuroom(&["sim", "--hours", "24", "--seed", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in ["jobs ", "submitted", "done", "mean wait", "reserved", "on-demand", "spot", "spend", "tenant nlp", "interruption notices"] {
        assert!(text.contains(needle), "summary lacks {needle:?}:\n{text}");
    }
    let again = gpuroom(&["sim", "--hours", "24", "--seed", "1"]);
    assert_eq!(figures(&text), figures(&stdout(&again)), "same seed, same day");
    let other = gpuroom(&["sim", "--hours", "24", "--seed", "2"]);
    assert_ne!(figures(&text), figures(&stdout(&other)));
}

#[test]
fn a_recorded_run_replays_to_the_same_summary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("day.db");
    let db = db.to_str().unwrap();
    let live = gpuroom(&["sim", "--hours", "6", "--seed", "4", "--db", db]);
    assert!(live.status.success(), "{}", stderr(&live));
    assert!(stdout(&live).contains("replay with: gpuroom replay"));
    let replayed = gpuroom(&["replay", db]);
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    // The world's own line is only known live; everything else must match.
    let live_figures: String = figures(&stdout(&live)).lines().filter(|l| !l.starts_with("world ")).collect::<Vec<_>>().join("\n");
    assert_eq!(live_figures, figures(&stdout(&replayed)));
    // Recording twice into one file is refused and the first run is kept.
    let again = gpuroom(&["sim", "--hours", "1", "--db", db]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("refusing to overwrite"), "{}", stderr(&again));
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, "start = \"2020-01-06T00:00:00Z\"\ntelemetry_secs = -5\n").unwrap();
    let out = gpuroom(&["sim", "--hours", "1", "--sim-config", config.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("cluster.toml"), "{err}");

    let out = gpuroom(&["replay", dir.path().join("nope.db").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("nope.db: no such file"), "{}", stderr(&out));

    let out = gpuroom(&["sim", "--hours", "-3"]);
    assert!(!out.status.success());
    let out = gpuroom(&["--speed", "0"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--speed"), "{}", stderr(&out));
}

#[test]
fn help_lists_the_commands() {
    let out = gpuroom(&["--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for needle in ["sim", "replay", "screenshot", "--speed", "--seed", "--db"] {
        assert!(text.contains(needle), "--help lacks {needle:?}:\n{text}");
    }
}

#[test]
fn a_recorded_run_exports_its_ledger_and_its_week() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let db = db.to_str().unwrap();
    assert!(gpuroom(&["sim", "--hours", "5", "--seed", "2", "--db", db]).status.success());
    let focus = dir.path().join("focus.csv");
    let out = gpuroom(&["export", "--db", db, "--format", "focus", "--month", "2020-01", "--out", focus.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("lines,"), "{}", stderr(&out));
    let text = std::fs::read_to_string(&focus).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    for column in ["BilledCost", "BillingAccountId", "ChargePeriodStart", "PricingQuantity", "PricingUnit", "InvoiceIssuerName"] {
        assert!(header.contains(&column), "no {column} in {header:?}");
    }
    let out = gpuroom(&["export", "--db", db, "--format", "csv", "--month", "2020-01"]);
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("start,end,kind,node"));
    let out = gpuroom(&["efficiency", "--db", db]);
    assert!(out.status.success(), "{}", stderr(&out));
    for needle in ["GPU time", "zombie", "per held GPU-hour", "mean wait"] {
        assert!(stdout(&out).contains(needle), "{needle}: {}", stdout(&out));
    }
    // Bad input: a month that is not one, a month with no ledger, no such file.
    let out = gpuroom(&["export", "--db", db, "--month", "2020-13"]);
    assert!(!out.status.success() && stderr(&out).contains("YYYY-MM"), "{}", stderr(&out));
    let out = gpuroom(&["export", "--db", db, "--month", "2019-12"]);
    assert!(!out.status.success() && stderr(&out).contains("no ledger lines in 2019-12: the run's ledger covers 2020-01"), "{}", stderr(&out));
    let out = gpuroom(&["export", "--db", dir.path().join("none.db").to_str().unwrap(), "--month", "2020-01"]);
    assert!(!out.status.success() && stderr(&out).contains("no such file"));
}

#[test]
fn the_mix_command_shows_the_curve_and_refuses_nonsense() {
    let out = gpuroom(&["mix", "--utilization", "0.8"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in ["break-even at 65%", "◀ here", "interruptions/h", "Cheapest split", "5% grid", "spot 100%"] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    let out = gpuroom(&["mix", "--sla-floor", "1.5"]);
    assert!(!out.status.success());
    assert!(stderr(&out).to_lowercase().contains("floor"), "{}", stderr(&out));
}

/// `gpuroom bench --quick` as a user runs it: every figure with its target,
/// the console measured in its own child process (`bench --probe-memory`),
/// and the page written where `--out` says. No time is asserted.
#[test]
fn the_quick_bench_prints_figures_and_writes_its_page() {
    let dir = std::env::temp_dir().join(format!("gpuroom-cli-bench-{}", std::process::id()));
    let page = dir.join("benchmarks.md");
    let out = gpuroom(&["bench", "--quick", "--out", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "Room::apply",
        "events/s",
        "simulated day",
        "event log on disk",
        "console's room",
        "frame 120×40",
        "VmRSS",
        "per event",
        "first cargo build --release",
        "release binary size",
        "ratio",
        "child process that does nothing else",
    ] {
        assert!(text.contains(needle), "bench output lacks {needle:?}:\n{text}");
    }
    let md = std::fs::read_to_string(&page).expect("the page was written");
    assert!(md.starts_with("# Benchmarks") && md.contains("## Machine"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `gpuroom bench queue --quick`: the queue-scale rows alone, per event at
/// two queue sizes under each discipline, the growth, and the two rates.
#[test]
fn the_queue_bench_prints_each_discipline_and_the_rates() {
    let out = gpuroom(&["bench", "queue", "--quick"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 20, "{text}");
    for discipline in ["fifo", "priority", "drf", "mlfq"] {
        assert_eq!(
            text.lines().filter(|l| l.starts_with("`Room::apply` per event") && l.contains(&format!("queued, {discipline} |"))).count(),
            2,
            "{discipline}:\n{text}"
        );
        assert!(text.contains(&format!("÷ at 157 queued, {discipline} |")), "{discipline}:\n{text}");
    }
    assert_eq!(text.lines().filter(|l| l.contains("jobs/s") && l.contains("≥ 1,000 jobs/s")).count(), 4, "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("starts/s") && l.contains("≥ 500 starts/s")).count(), 4, "{text}");
}

/// `gpuroom bench placement --quick` with an extra pod list that has only
/// some of the trace's columns (no gpu_spec, qos, phase or times, as some of
/// the 2023 trace's lists): every policy is printed under both protocols
/// next to the published figures and the targets; faithful FGD on the whole
/// cluster lands within half a point of its published figure (the quick
/// run's published-figure check); a bad list and an unknown policy are
/// refused by name.
#[test]
fn the_placement_bench_runs_every_policy_on_any_pod_list() {
    let dir = std::env::temp_dir().join(format!("gpuroom-cli-placement-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let short = dir.join("openb_pod_list_short.csv");
    let mut text = String::from("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n");
    for i in 0..300 {
        let (gpus, milli) = [(1, 1000), (1, 500), (1, 250), (2, 1000), (0, 0)][i % 5];
        text.push_str(&format!("openb-pod-{i:04},4000,8192,{gpus},{milli}\n"));
    }
    std::fs::write(&short, text).unwrap();
    let page = dir.join("placement.md");
    let out = gpuroom(&["bench", "placement", "--quick", "--pods", short.to_str().unwrap(), "--out", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "random",
        "dot-product",
        "packing",
        "best fit",
        "first fit",
        "FGD",
        "gradient (gpuroom)",
        "95.39",
        "94.15",
        "the reference's protocol",
        "random draws",
        "gradient (gpuroom) against faithful FGD",
        "8f3d6417353c5083c6d56617f255fadd8dc306bc",
        "openb_pod_list_short.csv",
        "Philly",
    ] {
        assert!(text.contains(needle), "placement output lacks {needle:?}:\n{text}");
    }
    let check = text.lines().find(|l| l.starts_with("Published-figure check")).expect("the quick run checks FGD's published figure");
    assert!(check.contains("against the published 95.39%") && check.contains(", reproduced within 0.5 points"), "{check}");
    assert_eq!(std::fs::read_to_string(&page).expect("the page was written"), text);
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,4000,8192,1,1500\n").unwrap();
    let out = gpuroom(&["bench", "placement", "--quick", "--pods", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("bad.csv") && stderr(&out).contains("line 2"), "{}", stderr(&out));
    let out = gpuroom(&["bench", "placement", "--quick", "--policy", "tetris"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no placement policy \"tetris\"") && stderr(&out).contains("gradient"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 35, item 5: an option before the subcommand is never dropped. The
/// world and policy ones apply to a subcommand that takes them, as if given
/// after it; the console's own ones are refused, saying where they belong.
#[test]
fn options_before_a_subcommand_apply_to_it_or_are_refused() {
    // Applied: the run is the one the option asks for.
    let before = gpuroom(&["--discipline", "mlfq", "sim", "--hours", "1"]);
    assert!(before.status.success(), "{}", stderr(&before));
    assert!(stdout(&before).contains("discipline mlfq"), "{}", stdout(&before));
    let after = gpuroom(&["sim", "--discipline", "mlfq", "--hours", "1"]);
    assert_eq!(figures(&stdout(&before)), figures(&stdout(&after)));
    let seeded = gpuroom(&["--seed", "7", "sim", "--hours", "2"]);
    assert_eq!(figures(&stdout(&seeded)), figures(&stdout(&gpuroom(&["sim", "--seed", "7", "--hours", "2"]))));
    assert_ne!(figures(&stdout(&seeded)), figures(&stdout(&gpuroom(&["sim", "--hours", "2"]))), "the seed changes the run");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let out = gpuroom(&["--config", missing.to_str().unwrap(), "engine", "--db", dir.path().join("e.db").to_str().unwrap(), "--until-hours", "1"]);
    assert!(!out.status.success() && stderr(&out).contains("missing.toml"), "the engine reads the config given before it: {}", stderr(&out));

    // Refused, each with where it belongs.
    for (args, said) in [
        (
            &["--theme", "BAD", "screenshot", "--out", "x.txt"][..],
            "`gpuroom screenshot` has a --theme of its own: give it after the subcommand (gpuroom screenshot --theme",
        ),
        (&["--speed", "5", "sim", "--hours", "1"][..], "`gpuroom sim` does not take it"),
        (&["--metrics", "127.0.0.1:9999", "export", "--db", "x.db", "--month", "2020-01"][..], "`gpuroom export` does not take it"),
        (&["--config", "c.toml", "whatif", "--db", "x.db"][..], "`gpuroom whatif` has a --config of its own"),
        (&["--seed", "3", "sim", "--seed", "4"][..], "--seed is given both before and after `sim`: give it once"),
    ] {
        let out = gpuroom(args);
        assert!(!out.status.success(), "{args:?} ran");
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
        assert!(!dir.path().join("x.txt").exists());
    }
}

/// Issue 35, item 6: a mistyped `--db` folder is an error, not a new tree
/// with a look-alike run in it; the console refuses before it opens.
#[test]
fn a_db_in_a_folder_that_does_not_exist_is_refused_and_nothing_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo").join("room.db");
    for args in [&["sim", "--hours", "1", "--db"][..], &["engine", "--until-hours", "1", "--db"]] {
        let mut all: Vec<&str> = args.to_vec();
        all.push(missing.to_str().unwrap());
        let out = gpuroom(&all);
        assert!(!out.status.success(), "{all:?} ran");
        assert!(stderr(&out).contains("the folder") && stderr(&out).contains("does not exist"), "{all:?}: {}", stderr(&out));
    }
    // The console, too, before it takes the terminal.
    let out = Command::new(env!("CARGO_BIN_EXE_gpuroom"))
        .args(["--warmup", "0", "--db", missing.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success() && stderr(&out).contains("does not exist"), "{}", stderr(&out));
    assert!(!dir.path().join("typo").exists(), "no folder was made");
}

/// Issue 35, item 6: `--attach` never starts or resumes an engine: a log
/// that does not exist, or one no engine runs on, is refused with why, and
/// nothing is written.
#[test]
fn attach_refuses_a_missing_log_and_one_no_engine_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let console = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_gpuroom")).args(args).stdin(std::process::Stdio::null()).output().unwrap();
    let missing = dir.path().join("room.db");
    let out = console(&["--attach", "--db", missing.to_str().unwrap()]);
    assert!(!out.status.success(), "attached to nothing");
    assert!(stderr(&out).contains("no such log; --attach never starts a run"), "{}", stderr(&out));
    assert!(!missing.exists(), "no log was made");
    // A log whose engine has stopped: not resumed, not touched.
    let done = dir.path().join("done.db");
    assert!(gpuroom(&["sim", "--hours", "1", "--db", done.to_str().unwrap()]).status.success());
    let before = std::fs::read(&done).unwrap();
    let out = console(&["--attach", "--db", done.to_str().unwrap()]);
    assert!(!out.status.success() && stderr(&out).contains("no engine runs on this log now; --attach never resumes one"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&done).unwrap(), before, "the log is as it was");
    // It needs a log, and it is the console's.
    let out = console(&["--attach"]);
    assert!(!out.status.success() && stderr(&out).contains("--db"), "{}", stderr(&out));
    let out = gpuroom(&["--attach", "sim", "--hours", "1"]);
    assert!(!out.status.success() && stderr(&out).contains("--attach"), "{}", stderr(&out));
}
