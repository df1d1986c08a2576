//! The console's modal states and their keys: the `:` command bar, the `/`
//! filter (live), the confirmation dialog, the approval form and the pool
//! picker for a migration; and the status line that reports what came of
//! the last action.
//!
//! Owns the state machines only. Every action leaves through
//! `Control::Send`, and every one that stops, moves or spends is shown in a
//! confirmation first (`confirm::describe`); only `y` says yes.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, Control};
use super::command_bar::{self, Intent};
use super::confirm::{self, Confirm};
use super::input::LineInput;
use super::pane_id::PaneId;
use super::status::Status;
use crate::domain::event::Action;
use crate::domain::ids::JobId;
use crate::domain::job::PoolTarget;
use crate::room::View;

#[derive(Clone, Debug, Default, PartialEq)]
pub enum Mode {
    #[default]
    Normal,
    Command { input: LineInput, options: Vec<String>, error: Option<String> },
    /// Typing a filter; `before` comes back on Esc.
    Filter { input: LineInput, before: String },
    Confirm(Box<Confirm>),
    Approve(Box<ApproveForm>),
    PickPool { job: JobId, options: Vec<PoolTarget>, cursor: usize },
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

    /// The pools a job can be sent to: every pool but the one it runs in.
    pub fn pick_pool(job: JobId, view: &View) -> Mode {
        let here = view.jobs.iter().find(|j| j.id == job).and_then(|j| j.node.clone());
        let current: Option<PoolTarget> = here.and_then(|name| view.nodes.iter().find(|n| n.name == name)).map(|n| n.pool());
        let options = view.pools.iter().map(|p| p.target.clone()).filter(|t| Some(t) != current.as_ref()).collect();
        Mode::PickPool { job, options, cursor: 0 }
    }
}

/// An action from a key or a command: confirmed first if it must be.
pub fn propose(app: &mut App, action: Action, view: &View) -> Control {
    if confirm::needs_confirmation(&action) {
        app.mode = Mode::Confirm(Box::new(confirm::describe(action, view)));
        Control::Continue
    } else {
        app.mode = Mode::Normal;
        Control::Send(vec![action])
    }
}

fn run_intent(app: &mut App, intent: Intent, view: &View) -> Control {
    app.mode = Mode::Normal;
    match intent {
        Intent::Act(action) => return propose(app, action, view),
        Intent::AckAll(ids) => return Control::Send(ids.into_iter().map(|id| Action::AcknowledgeAlarm { id }).collect()),
        Intent::PickPool(job) => app.mode = Mode::pick_pool(job, view),
        Intent::ApproveForm(tenant) => app.mode = Mode::approve(&tenant.0),
        Intent::Filter(text) => {
            app.order.set_filter(&text);
            app.focus = PaneId::Queue;
        }
        Intent::Sort(key, reversed) => {
            app.order.sort = key;
            app.order.reversed = reversed;
        }
        Intent::Focus(pane) => app.focus = pane,
        Intent::Help => app.help = true,
        Intent::Quit => return Control::Quit,
    }
    Control::Continue
}

fn is_esc(key: &KeyEvent) -> bool {
    key.code == KeyCode::Esc || (key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL))
}

/// Keys while a modal state is open. Esc (or Ctrl-C) always backs out
/// without doing anything.
pub fn on_key(app: &mut App, key: KeyEvent, view: &View) -> Control {
    let mode = std::mem::take(&mut app.mode);
    if is_esc(&key) {
        if let Mode::Filter { before, .. } = &mode {
            app.order.set_filter(before);
        }
        if matches!(mode, Mode::Confirm(_) | Mode::Approve(_) | Mode::PickPool { .. }) {
            app.status = Some(Status::hint("cancelled: nothing was sent"));
        }
        return Control::Continue;
    }
    match mode {
        Mode::Normal => Control::Continue,
        Mode::Command { mut input, mut options, mut error } => {
            match key.code {
                KeyCode::Enter => {
                    return match command_bar::parse_in(&input.text(), view, app.selected_job(view), app.selected_slurm_job(view)) {
                        Ok(intent) => run_intent(app, intent, view),
                        Err(e) => {
                            app.mode = Mode::Command { input, options: Vec::new(), error: Some(e) };
                            Control::Continue
                        }
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
            app.mode = Mode::Command { input, options, error };
            Control::Continue
        }
        Mode::Filter { mut input, before } => {
            if key.code == KeyCode::Enter {
                return Control::Continue;
            }
            input.edit(&key);
            app.order.set_filter(&input.text());
            app.mode = Mode::Filter { input, before };
            Control::Continue
        }
        Mode::Confirm(c) => match key.code {
            // Only an explicit yes sends; Enter alone does not, so a stray
            // double Enter cannot stop somebody's job.
            KeyCode::Char('y' | 'Y') => Control::Send(vec![c.action]),
            KeyCode::Char('n' | 'N') => {
                app.status = Some(Status::hint("cancelled: nothing was sent"));
                Control::Continue
            }
            _ => {
                app.mode = Mode::Confirm(c);
                Control::Continue
            }
        },
        Mode::Approve(mut form) => {
            match key.code {
                KeyCode::Tab | KeyCode::Down => form.focus = (form.focus + 1) % 3,
                KeyCode::BackTab | KeyCode::Up => form.focus = (form.focus + 2) % 3,
                KeyCode::Enter => {
                    let [amount, until, reason] = &form.fields;
                    match command_bar::approval(&form.tenant, &amount.text(), &until.text(), &reason.text(), view.at) {
                        Ok(action) => return propose(app, action, view),
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
            app.mode = Mode::Approve(form);
            Control::Continue
        }
        Mode::PickPool { job, options, mut cursor } => {
            match key.code {
                KeyCode::Down | KeyCode::Char('j') => cursor = (cursor + 1).min(options.len().saturating_sub(1)),
                KeyCode::Up | KeyCode::Char('k') => cursor = cursor.saturating_sub(1),
                KeyCode::Enter => {
                    if let Some(to) = options.get(cursor) {
                        return propose(app, Action::Migrate { job, to: to.clone() }, view);
                    }
                }
                _ => {}
            }
            app.mode = Mode::PickPool { job, options, cursor };
            Control::Continue
        }
    }
}
