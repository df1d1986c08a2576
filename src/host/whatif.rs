//! `gpuroom whatif`: the policies to try, read from the command line and
//! configuration files, and the comparison printed or written; and the
//! console's what-if thread (`console_link`), which does the same for `W`
//! and `:whatif`.
//!
//! Reads files; the re-runs are `whatif::compare`'s.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::domain::discipline::DisciplineKind;
use crate::domain::text::for_terminal;
use crate::room::RoomConfig;
use crate::sim::config::SimConfig;
use crate::store::Store;
use crate::tui::whatif::{WhatIfAsk, WhatIfLink, WhatIfUpdate};
use crate::whatif::{self, Format, Model, Scenario, Window};

/// What `gpuroom whatif` was asked.
#[derive(Clone, Debug, Default)]
pub struct WhatIfArgs {
    pub db: PathBuf,
    pub configs: Vec<PathBuf>,
    pub disciplines: Vec<DisciplineKind>,
    /// Other simulated clusters (a simulated run only).
    pub fleets: Vec<PathBuf>,
    pub window: Window,
    pub model: Model,
    pub format: Option<Format>,
    pub out: Option<PathBuf>,
}

/// A column's name for a configuration file: its file name without `.toml`.
fn file_label(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
    name.strip_suffix(".toml").map(str::to_string).unwrap_or(name)
}

/// The scenarios: each configuration file (or, with none, the recorded
/// policy), under each discipline asked (or its own), on each simulated
/// cluster asked (or the recorded one). With none of these, the recorded
/// policy itself: the re-run's own error.
pub fn scenarios(recorded: &RoomConfig, configs: &[PathBuf], disciplines: &[DisciplineKind], fleets: &[PathBuf]) -> Result<Vec<Scenario>> {
    let mut policies: Vec<(Option<String>, RoomConfig)> = Vec::new();
    for path in configs {
        let policy = super::settings::Policy { config: Some(path.clone()), ..Default::default() };
        policies.push((Some(file_label(path)), super::settings::room_config(&policy)?));
    }
    if policies.is_empty() {
        policies.push((None, recorded.clone()));
    }
    let mut worlds: Vec<(Option<String>, Option<Box<SimConfig>>)> = Vec::new();
    for path in fleets {
        let sim = super::settings::load_sim(Some(path))?;
        worlds.push((Some(file_label(path)), Some(Box::new(sim.config))));
    }
    if worlds.is_empty() {
        worlds.push((None, None));
    }
    let kinds: Vec<Option<DisciplineKind>> = if disciplines.is_empty() { vec![None] } else { disciplines.iter().copied().map(Some).collect() };
    let mut out = Vec::new();
    for (policy_name, policy) in &policies {
        for d in &kinds {
            for (world_name, fleet) in &worlds {
                let mut config = policy.clone();
                if let Some(d) = d {
                    config.sched.discipline = *d;
                }
                let parts: Vec<&str> = [policy_name.as_deref(), d.map(DisciplineKind::name), world_name.as_deref()].into_iter().flatten().collect();
                let name = if parts.is_empty() { "same policy".to_string() } else { parts.join(" ") };
                out.push(Scenario { name, config, fleet: fleet.clone() });
            }
        }
    }
    Ok(out)
}

/// The format a file name asks for, when `--format` is not given.
fn format_for(out: Option<&Path>) -> Format {
    match out.and_then(|p| p.extension()).and_then(|e| e.to_str()) {
        Some("md") => Format::Markdown,
        Some("csv") => Format::Csv,
        _ => Format::Text,
    }
}

pub fn run_whatif(args: &WhatIfArgs) -> Result<()> {
    if let (Some(from), Some(until)) = (args.window.from, args.window.until)
        && from >= until
    {
        bail!("--from ({from}) must come before --until ({until})");
    }
    let store = Store::open_read_only(&args.db)?;
    if let Some(note) = store.note() {
        eprintln!("gpuroom: {}", for_terminal(note));
    }
    let meta = store.meta()?;
    let scenarios = scenarios(&meta.room_config, &args.configs, &args.disciplines, &args.fleets)?;
    let shown = super::runs::shown(&args.db);
    let mut last_shown = -1;
    let comparison = whatif::compare(&store, &shown, &scenarios, args.window, args.model, &mut |p| {
        let pct = (p.done * 100.0) as i32;
        if pct / 10 != last_shown / 10 {
            last_shown = pct;
            eprintln!("whatif: {pct:>3}% {}", for_terminal(&p.stage));
        }
    })?;
    let format = args.format.unwrap_or_else(|| format_for(args.out.as_deref()));
    let text = comparison.render(format);
    match &args.out {
        Some(path) => {
            super::output::write_bytes(path, Some(&args.db), text.as_bytes())?;
            eprintln!("whatif: written to {}", super::runs::shown(path));
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// The scenarios of the console's words: discipline names, `sim=FILE` for
/// another simulated cluster, and anything else a configuration file;
/// none, every discipline.
fn scenarios_of_words(recorded: &RoomConfig, words: &[String]) -> Result<Vec<Scenario>> {
    let mut configs = Vec::new();
    let mut disciplines = Vec::new();
    let mut fleets = Vec::new();
    for word in words {
        match (DisciplineKind::parse(&word.to_lowercase()), word.strip_prefix("sim=")) {
            (Some(d), _) => disciplines.push(d),
            (None, Some(fleet)) => fleets.push(PathBuf::from(fleet)),
            (None, None) => configs.push(PathBuf::from(word)),
        }
    }
    if words.is_empty() {
        disciplines = DisciplineKind::ALL.to_vec();
    }
    scenarios(recorded, &configs, &disciplines, &fleets)
}

fn console_comparison(log: &Path, words: &[String], updates: &tokio::sync::mpsc::Sender<WhatIfUpdate>) -> Result<whatif::Comparison> {
    let store = Store::open_read_only(log)?;
    let scenarios = scenarios_of_words(&store.meta()?.room_config, words)?;
    let mut last = -1.0;
    let comparison = whatif::compare(&store, &super::runs::shown(log), &scenarios, Window::default(), Model::Auto, &mut |p| {
        // A bar moves in whole percents; the console drops what it cannot take.
        if p.done - last >= 0.01 || p.done >= 1.0 {
            last = p.done;
            let _ = updates.try_send(WhatIfUpdate::Progress { stage: p.stage, done: p.done });
        }
    })?;
    Ok(comparison)
}

/// The console's what-if thread: it re-runs `log` (as committed when asked)
/// for each ask, apart from the engine's loop and the terminal's, and ends
/// with the console. No log (`--no-log`), no thread: the pane says so.
pub fn console_link(log: Option<PathBuf>) -> Option<WhatIfLink> {
    let log = log?;
    let (asks, mut asked) = tokio::sync::mpsc::unbounded_channel::<WhatIfAsk>();
    let (updates_tx, updates) = tokio::sync::mpsc::channel(64);
    let spawned = std::thread::Builder::new().name("whatif".into()).spawn(move || {
        while let Some(ask) = asked.blocking_recv() {
            let update = match console_comparison(&log, &ask.words, &updates_tx) {
                Ok(c) => WhatIfUpdate::Done(Box::new(c)),
                Err(e) => WhatIfUpdate::Failed(for_terminal(&format!("{e:#}"))),
            };
            if updates_tx.blocking_send(update).is_err() {
                return;
            }
        }
    });
    spawned.ok().map(|_| WhatIfLink { asks, updates })
}
