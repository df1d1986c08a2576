//! The console's modal states and their keys: the `:` command bar, the `/`
//! filter (live), the confirmation dialog, the approval form and the pool
//! picker for a migration.
//!
//! Owns the state machines only: `on_key` takes the mode and a key and
//! returns the next mode and a `Request` for the App, which applies it; this
//! file never touches the App. Every action leaves as `Request::Send`, and
//! every one that stops, moves or spends is shown in a confirmation first
//! (`propose`, `confirm::describe`); only `y` says yes.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::command_bar;
use super::confirm::{self, Confirm};
use super::input::LineInput;
use super::request::Request;
use crate::domain::event::Action;
use crate::domain::ids::JobId;
use crate::domain::job::PoolTarget;
use crate::room::View;

#[derive(Clone, Debug, Default, PartialEq)]
pub enum Mode {
    #[default]
    Normal,
    Command {
        input: LineInput,
        options: Vec<String>,
        error: Option<String>,
    },
    /// Typing a filter; `before` comes back on Esc.
    Filter {
        input: LineInput,
        before: String,
    },
    Confirm(Box<Confirm>),
    /// Quitting a console that runs the engine stops the engine: asked first.
    ConfirmQuit,
    Approve(Box<ApproveForm>),
    PickPool {
        job: JobId,
        options: Vec<PoolTarget>,
        cursor: usize,
    },
}

/// The approval form: amount over the limit, expiry, and the reason.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApproveForm {
    pub tenant: String,
    /// Amount, until, reason.
    pub fields: [LineInput; 3],
    pub focus: usize,
    pub error: Option<String>,
}

impl ApproveForm {
    pub const LABELS: [&'static str; 3] = ["Amount over the limit ($)", "Until (6h, 2d, 2020-01-07T18:00)", "Reason (required)"];
}

impl Mode {
    pub fn command(text: &str) -> Mode {
        Mode::Command { input: LineInput::new(text), options: Vec::new(), error: None }
    }

    pub fn filter(current: &str) -> Mode {
        Mode::Filter { input: LineInput::new(current), before: current.to_string() }
    }

    pub fn approve(tenant: &str) -> Mode {
        Mode::Approve(Box::new(ApproveForm { tenant: tenant.to_string(), ..ApproveForm::default() }))
    }

    /// The pools a job can be sent to: every pool but the one it runs in,
    /// the cursor on the best (`best_pool`).
    pub fn pick_pool(job: JobId, view: &View) -> Mode {
        let here = view.jobs.iter().find(|j| j.id == job).and_then(|j| j.node.clone());
        let current: Option<PoolTarget> = here.and_then(|name| view.nodes.iter().find(|n| n.name == name)).map(|n| n.pool());
        let options: Vec<PoolTarget> = view.pools.iter().map(|p| p.target.clone()).filter(|t| Some(t) != current.as_ref()).collect();
        let gpus = view.jobs.iter().find(|j| j.id == job).map_or(1, |j| u32::from(j.gpus));
        let cursor = best_pool(&options, gpus, view).unwrap_or(0);
        Mode::PickPool { job, options, cursor }
    }
}

/// What the command bar fills in when a command names no job: the queue's
/// and the Slurm pane's selections, as the App has them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Selected {
    pub job: Option<JobId>,
    pub slurm_job: Option<u64>,
}

/// An action from a key, a form or a command: the confirmation dialog if it
/// must be confirmed, else straight out.
pub fn propose(action: Action, view: &View) -> (Mode, Request) {
    if confirm::needs_confirmation(&action) {
        (Mode::Confirm(Box::new(confirm::describe(action, view))), Request::Nothing)
    } else {
        (Mode::Normal, Request::Send(vec![action]))
    }
}

fn is_esc(key: &KeyEvent) -> bool {
    key.code == KeyCode::Esc || (key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL))
}

/// Keys while a modal state is open: the mode they leave and what the App
/// should do besides. Esc (or Ctrl-C) always backs out without doing
/// anything. `selected` is asked only when a command line is run.
pub fn on_key(mode: Mode, key: KeyEvent, view: &View, selected: impl FnOnce() -> Selected) -> (Mode, Request) {
    if is_esc(&key) {
        let request = match &mode {
            Mode::Filter { before, .. } => Request::Filter(before.clone()),
            Mode::Confirm(_) | Mode::Approve(_) | Mode::PickPool { .. } => Request::hint("cancelled: nothing was sent"),
            Mode::ConfirmQuit => Request::hint("still running"),
            Mode::Normal | Mode::Command { .. } => Request::Nothing,
        };
        return (Mode::Normal, request);
    }
    match mode {
        Mode::Normal => (Mode::Normal, Request::Nothing),
        Mode::Command { mut input, mut options, mut error } => {
            match key.code {
                KeyCode::Enter => {
                    let Selected { job, slurm_job } = selected();
                    return match command_bar::parse_in(&input.text(), view, job, slurm_job) {
                        Ok(intent) => (Mode::Normal, Request::Run(intent)),
                        Err(e) => (Mode::Command { input, options: Vec::new(), error: Some(e) }, Request::Nothing),
                    };
                }
                KeyCode::Tab => {
                    let c = command_bar::complete(&input.text(), view);
                    input.set(&c.line);
                    options = c.options;
                    error = None;
                }
                _ => {
                    if input.edit(&key) {
                        options.clear();
                        error = None;
                    }
                }
            }
            (Mode::Command { input, options, error }, Request::Nothing)
        }
        Mode::Filter { mut input, before } => {
            if key.code == KeyCode::Enter {
                return (Mode::Normal, Request::Nothing);
            }
            input.edit(&key);
            let text = input.text();
            (Mode::Filter { input, before }, Request::Filter(text))
        }
        Mode::Confirm(c) => match key.code {
            // Only an explicit yes sends; Enter alone does not, so a stray
            // double Enter cannot stop somebody's job.
            KeyCode::Char('y' | 'Y') => (Mode::Normal, Request::Send(vec![c.action])),
            KeyCode::Char('n' | 'N') => (Mode::Normal, Request::hint("cancelled: nothing was sent")),
            _ => (Mode::Confirm(c), Request::Nothing),
        },
        // q again, or y, stops; Enter alone does not (a stray Enter after q).
        Mode::ConfirmQuit => match key.code {
            KeyCode::Char('y' | 'Y' | 'q') => (Mode::Normal, Request::Quit),
            KeyCode::Char('n' | 'N') => (Mode::Normal, Request::hint("still running")),
            _ => (Mode::ConfirmQuit, Request::Nothing),
        },
        Mode::Approve(mut form) => {
            match key.code {
                KeyCode::Tab | KeyCode::Down => form.focus = (form.focus + 1) % 3,
                KeyCode::BackTab | KeyCode::Up => form.focus = (form.focus + 2) % 3,
                KeyCode::Enter => {
                    let [amount, until, reason] = &form.fields;
                    match command_bar::approval(&form.tenant, &amount.text(), &until.text(), &reason.text(), view.at) {
                        Ok(action) => return (Mode::Normal, Request::Propose(action)),
                        Err(e) => form.error = Some(e),
                    }
                }
                _ => {
                    let focus = form.focus;
                    if form.fields[focus].edit(&key) {
                        form.error = None;
                    }
                }
            }
            (Mode::Approve(form), Request::Nothing)
        }
        Mode::PickPool { job, options, mut cursor } => {
            match key.code {
                KeyCode::Down | KeyCode::Char('j') => cursor = (cursor + 1).min(options.len().saturating_sub(1)),
                KeyCode::Up | KeyCode::Char('k') => cursor = cursor.saturating_sub(1),
                KeyCode::Enter => {
                    if let Some(to) = options.get(cursor) {
                        return (Mode::Normal, Request::Propose(Action::Migrate { job, to: to.clone() }));
                    }
                }
                _ => {}
            }
            (Mode::PickPool { job, options, cursor }, Request::Nothing)
        }
    }
}

/// Of `options`, the cheapest per GPU among the pools with room for `gpus`
/// on one node now; `None` when none has (then the list's order stands).
pub fn best_pool(options: &[PoolTarget], gpus: u32, view: &View) -> Option<usize> {
    let per_gpu = |target: &PoolTarget| {
        let pool = view.pools.iter().find(|p| &p.target == target)?;
        if !pool.fits(gpus) {
            return None;
        }
        let per_node = (pool.gpus_total / pool.nodes_total.max(1)).max(1);
        Some(pool.price?.0 / i64::from(per_node))
    };
    options.iter().enumerate().filter_map(|(i, t)| per_gpu(t).map(|p| (p, i))).min().map(|(_, i)| i)
}
