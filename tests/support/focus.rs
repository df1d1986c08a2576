//! The FinOps Foundation's FOCUS validator (`focus-validator`, installed in a
//! Python venv by `.ci/focus-up DIR`) run on an exported FOCUS file: the
//! file must pass every rule of the FOCUS version gpuroom claims (1.2, rule
//! set 1.2.0.1). Shared by the export tests.
//!
//! The venv is `GPUROOM_FOCUS_VENV`; without it the check is skipped, saying
//! so, unless `GPUROOM_REQUIRE_FOCUS` is set, where a missing validator fails.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The rule set of the FOCUS version gpuroom's export claims.
pub const RULE_SET: &str = "1.2.0.1";

/// Rules the validator reports on their own although they are the branches
/// of an "either … or …" rule: (the OR rule, its branches). Exactly one
/// branch fails on any file (InvoiceId-C-004-C when every InvoiceId is set,
/// -C-005-C when none is), so a branch's failure counts only when its OR
/// rule fails too.
const OR_BRANCHES: &[(&str, &[&str])] = &[("InvoiceId-C-003-C", &["InvoiceId-C-004-C", "InvoiceId-C-005-C"])];

/// What the validator said: its summary counts, each rule's status, and the
/// failures section (each failing rule with its message and sample rows).
#[derive(Debug)]
pub struct Report {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// (rule id, "PASS" | "FAIL" | "SKIPPED").
    pub rules: Vec<(String, String)>,
    pub failures: String,
    pub output: String,
}

impl Report {
    pub fn status(&self, rule: &str) -> Option<&str> {
        self.rules.iter().find(|(id, _)| id == rule).map(|(_, s)| s.as_str())
    }

    /// The failed rules that count: all but an OR rule's branches when the OR rule passed.
    pub fn real_failures(&self) -> Vec<&str> {
        self.rules
            .iter()
            .filter(|(_, s)| s == "FAIL")
            .map(|(id, _)| id.as_str())
            .filter(|id| !OR_BRANCHES.iter().any(|(or, branches)| branches.contains(id) && self.status(or) == Some("PASS")))
            .collect()
    }
}

/// The venv of `GPUROOM_FOCUS_VENV`, or `None` (skipped, saying so) unless
/// `GPUROOM_REQUIRE_FOCUS` is set, where a missing validator fails.
pub fn venv() -> Option<PathBuf> {
    let required = std::env::var_os("GPUROOM_REQUIRE_FOCUS").is_some();
    match std::env::var_os("GPUROOM_FOCUS_VENV") {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            assert!(!required, "the FOCUS validator is required (GPUROOM_REQUIRE_FOCUS is set) but GPUROOM_FOCUS_VENV is not; make one with .ci/focus-up DIR");
            println!("skipped: set GPUROOM_FOCUS_VENV (a venv made by .ci/focus-up DIR) to run the FOCUS validator");
            None
        }
    }
}

/// The venv's site-packages folder: the validator reads its rules and
/// currency codes relative to the working directory, so it runs from there.
fn site_packages(venv: &Path) -> PathBuf {
    let lib = venv.join("lib");
    let entries = std::fs::read_dir(&lib).unwrap_or_else(|e| panic!("{}: {e} (is GPUROOM_FOCUS_VENV a venv?)", lib.display()));
    entries
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("focus_validator").is_dir())
        .unwrap_or_else(|| panic!("no focus_validator under {}/python*/site-packages: run .ci/focus-up", lib.display()))
}

/// Runs the validator of `venv` on `csv` and reads its console report.
pub fn run(venv: &Path, csv: &Path) -> Report {
    let csv = std::path::absolute(csv).unwrap();
    let program = venv.join("bin/focus-validator");
    let out = Command::new(&program)
        .arg("--data-file")
        .arg(&csv)
        .args(["--validate-version", RULE_SET, "--block-download", "--show-violations"])
        .current_dir(site_packages(venv))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    parse(&output).unwrap_or_else(|| panic!("no summary from {} ({}):\n{output}", program.display(), out.status))
}

/// The console report: "Total: N | Pass: P | Fail: F | Skipped: S", a line
/// per rule ("✅ RULE: PASS  (…)"), then "--- Failures ---".
pub fn parse(output: &str) -> Option<Report> {
    let summary = output.lines().find(|l| l.starts_with("Total: "))?;
    let count = |label: &str| -> Option<usize> {
        let field = summary.split('|').map(str::trim).find(|f| f.starts_with(label))?;
        field[label.len()..].trim().parse().ok()
    };
    let (passed, failed, skipped) = (count("Pass:")?, count("Fail:")?, count("Skipped:")?);
    let mut rules = Vec::new();
    for line in output.lines() {
        // An icon ("✅", or "[PASS]" where the console cannot print it), "RULE:", the status.
        let words: Vec<&str> = line.split_whitespace().take(3).collect();
        if let [_, id, status @ ("PASS" | "FAIL" | "SKIPPED")] = words[..]
            && let Some(id) = id.strip_suffix(':')
        {
            rules.push((id.to_string(), status.to_string()));
        }
    }
    let failures = output.split_once("--- Failures ---").map(|(_, f)| f.trim().to_string()).unwrap_or_default();
    Some(Report { passed, failed, skipped, rules, failures, output: output.to_string() })
}

/// The validator accepts `csv`: no rule fails (skipped with a message
/// without a validator, see `venv`). Prints the validator's summary.
pub fn assert_valid(csv: &Path) {
    let Some(venv) = venv() else { return };
    let report = run(&venv, csv);
    println!("FOCUS {RULE_SET} validator on {}: {} passed, {} failed, {} skipped", csv.display(), report.passed, report.failed, report.skipped);
    assert_eq!(report.rules.len(), report.passed + report.failed + report.skipped, "every rule's line read:\n{}", report.output);
    let failures = report.real_failures();
    assert!(failures.is_empty(), "the FOCUS validator rejects {}: {failures:?} failed\n{}", csv.display(), report.failures);
    for (or, branches) in OR_BRANCHES {
        for branch in branches.iter().filter(|b| report.status(b) == Some("FAIL")) {
            println!("({branch} failed as a branch of {or}, which passed)");
        }
    }
}
