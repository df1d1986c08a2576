//! What a new user waits through before the console opens, and what is
//! shipped: a clean `cargo build --release` of this source tree (into a
//! throwaway target folder, with the crates already fetched, so that the
//! network is not timed) and the size of the release binary. Starts cargo
//! and reads the file system; asserts nothing about time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::progress::progress;

/// The build's figures; each says why where it could not be measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildFigures {
    /// Wall seconds of a clean release build.
    pub clean_build_secs: Result<f64, String>,
    /// The release binary measured, and its size in bytes.
    pub binary: Result<(String, u64), String>,
}

/// Where this binary was built from (the source tree, if it is still there).
fn source_tree() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    (dir.join("Cargo.toml").is_file() && dir.join("src").is_dir()).then_some(dir)
}

/// Measures the first build when `clean_build`, and the binary's size: the
/// one that build made, else this very binary when it is a release build.
pub fn measure(clean_build: bool) -> BuildFigures {
    if !clean_build {
        return BuildFigures { clean_build_secs: Err("not measured (run without --no-build)".into()), binary: this_binary() };
    }
    let Some(tree) = source_tree() else {
        return BuildFigures { clean_build_secs: Err(format!("no source tree at {}", env!("CARGO_MANIFEST_DIR"))), binary: this_binary() };
    };
    let target = std::env::temp_dir().join(format!("gpuroom-bench-build-{}", std::process::id()));
    let figures = timed_build(&tree, &target);
    let _ = std::fs::remove_dir_all(&target);
    figures
}

fn timed_build(tree: &Path, target: &Path) -> BuildFigures {
    progress(format_args!("build: a clean `cargo build --release` of {} (minutes)", tree.display()));
    let started = Instant::now();
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--locked", "--offline", "--quiet"])
        .current_dir(tree)
        .env("CARGO_TARGET_DIR", target)
        .stdin(Stdio::null())
        .status();
    let secs = started.elapsed().as_secs_f64();
    match status {
        Ok(s) if s.success() => {
            progress(format_args!("build: done in {secs:.0} s"));
            let binary = target.join("release").join("gpuroom");
            let size = std::fs::metadata(&binary).map(|m| ("a fresh release build".to_string(), m.len())).map_err(|e| format!("{}: {e}", binary.display()));
            BuildFigures { clean_build_secs: Ok(secs), binary: size }
        }
        Ok(s) => BuildFigures { clean_build_secs: Err(format!("cargo failed ({s}); are the crates fetched? (cargo fetch)")), binary: this_binary() },
        Err(e) => BuildFigures { clean_build_secs: Err(format!("could not start cargo: {e}")), binary: this_binary() },
    }
}

/// This binary's size, if it is the release build.
fn this_binary() -> Result<(String, u64), String> {
    if cfg!(debug_assertions) {
        return Err("not measured (a debug build; run the bench from a release build)".into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let size = std::fs::metadata(&exe).map_err(|e| format!("{}: {e}", exe.display()))?.len();
    Ok(("this binary".into(), size))
}
