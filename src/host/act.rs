//! `gpuroom act`: one operator action sent to the engine running on a log,
//! from a shell or a script, the way the console's command bar sends it,
//! and the engine's answer printed. The engine records it under the OS user
//! of this process (the kernel's word), as for any attached console.
//!
//! Owns the command's wiring only: parsing is the command bar's, deciding
//! the room's.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::client::Client;
use crate::domain::event::Role;
use crate::domain::text::for_terminal;
use crate::store::CommandState;
use crate::tui::command_bar::{self, Intent};

pub fn run_act(db: &Path, line: &str, timeout_secs: u64) -> Result<()> {
    let limit = Duration::from_secs(timeout_secs.clamp(1, 3600));
    let claimed = crate::operator::actor_from_env(Role::Operator);
    let client = Client::connect(db, &claimed, true)?;
    // Job names, pools and tenants are read against the engine's view, as in the console.
    let deadline = Instant::now() + limit;
    let view = loop {
        if let Some(published) = client.latest_view(i64::MIN) {
            break published.view;
        }
        if let Some(why) = client.closed() {
            bail!("{}: {why}", db.display());
        }
        if Instant::now() > deadline {
            bail!("{}: the engine sent no view within {} s", db.display(), limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let action = match command_bar::parse(line, &view, None).map_err(|e| anyhow::anyhow!("{}", for_terminal(&e)))? {
        Intent::Act(action) => action,
        Intent::PickPool(job) => bail!("migrate {job} needs a pool: migrate {job} POOL (the pools are in the console's migrate picker)"),
        Intent::ApproveForm(tenant) => bail!("approve {tenant} needs an amount, an expiry or both, and a reason: approve {tenant} AMOUNT UNTIL REASON…"),
        _ => bail!("{:?} is a console command, not an action for the engine", for_terminal(line)),
    };
    let ticket = client.submit(&action)?;
    match client.wait_answer(&ticket, limit).map_err(|e| anyhow::anyhow!("{}", for_terminal(&e)))? {
        Some(CommandState::Applied { detail, .. }) => {
            println!("✓ {} (as {})", for_terminal(&detail), for_terminal(&client.actor.user));
            Ok(())
        }
        Some(CommandState::Refused { reason, .. }) => {
            eprintln!("✗ {} (as {})", for_terminal(&reason), for_terminal(&client.actor.user));
            std::process::exit(1);
        }
        Some(CommandState::Pending) | None => bail!("the engine did not decide command {ticket}"),
    }
}
