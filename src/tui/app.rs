//! UI state of the console — focus, selections (gpuroom's jobs, tenants,
//! alarms, Slurm jobs), the job table's order and filter, help, zoom, the modal states (command bar, filter, confirmation,
//! approval form, pool picker) and the status line — and what keys do to it
//! (`App::on_key`).
//!
//! Owns only presentation state. It reads the `View` to keep selections on
//! the same job, tenant or alarm as the tables change, and must never change
//! the `View` or decide anything about jobs: an operator action leaves as
//! `Control::Send` for the engine, which may refuse it.

use std::cell::Cell;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::commands::{self, Act};
use super::job_order::JobOrder;
use super::log::AlarmsUi;
use super::modes::Mode;
use super::pane_id::PaneId;
use super::selection::{Follow, Window};
use super::status::Status;
use crate::domain::event::Action;
use crate::domain::ids::JobId;
use crate::room::View;

/// What the run loop does after a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Control {
    Continue,
    Quit,
    /// Operator actions for the engine, in order (confirmed where they must be).
    Send(Vec<Action>),
}

#[derive(Clone, Debug, Default)]
pub struct App {
    pub focus: PaneId,
    pub help: bool,
    /// The focused pane fills the body.
    pub zoom: bool,
    /// A read-only console (the wall display): no key but quit does anything.
    pub read_only: bool,
    jobs: Follow<JobId>,
    tenants: Follow<String>,
    alarms: Follow<String>,
    /// Slurm pane: the selected Slurm job, by Slurm's job id.
    slurm_jobs: Follow<u64>,
    /// The alarms pane shows the audit trail instead of the event log.
    pub audit: bool,
    /// Order and filter of the job table.
    pub order: JobOrder,
    pub mode: Mode,
    /// The outcome of the last action, or a hint; cleared by the next key.
    pub status: Option<Status>,
    pub(crate) queue_window: Cell<Window>,
    pub(crate) slurm_window: Cell<Window>,
    /// Fleet pane: selected node and drill-down.
    pub fleet: super::panes::fleet_ui::FleetUi,
}

fn job_keys(view: &View, rows: &[usize]) -> Vec<JobId> {
    rows.iter().map(|i| view.jobs[*i].id).collect()
}

impl App {
    pub fn new() -> App {
        App::default()
    }

    /// A fresh console with the focus on `pane`.
    pub fn with_focus(pane: PaneId) -> App {
        App { focus: pane, ..App::default() }
    }

    /// The wall display's console: read-only.
    pub fn read_only() -> App {
        App { read_only: true, ..App::default() }
    }

    /// Rows of `view.jobs` shown, in order (filter and sort applied).
    pub fn job_rows(&self, view: &View) -> Vec<usize> {
        self.order.rows(view)
    }

    /// Position among `rows` of the selected job.
    pub fn selected_row(&self, view: &View, rows: &[usize]) -> Option<usize> {
        self.jobs.position(&job_keys(view, rows))
    }

    /// Index into `view.jobs` of the selected job, if any is shown.
    pub fn selected_index(&self, view: &View) -> Option<usize> {
        let rows = self.job_rows(view);
        self.selected_row(view, &rows).map(|p| rows[p])
    }

    /// The selected job's id, if any.
    pub fn selected_job(&self, view: &View) -> Option<JobId> {
        self.selected_index(view).map(|i| view.jobs[i].id)
    }

    /// Index into `view.budgets` of the selected tenant.
    pub fn selected_tenant(&self, view: &View) -> Option<usize> {
        self.tenants.position(&view.budgets.iter().map(|b| b.tenant.clone()).collect::<Vec<_>>())
    }

    /// Position in `view.slurm.jobs` of the selected Slurm job.
    pub fn selected_slurm_row(&self, view: &View) -> Option<usize> {
        self.slurm_jobs.position(&slurm_keys(view))
    }

    /// The selected Slurm job's id, if a cluster is attached and lists jobs.
    pub fn selected_slurm_job(&self, view: &View) -> Option<u64> {
        let keys = slurm_keys(view);
        self.slurm_jobs.position(&keys).map(|i| keys[i])
    }

    pub fn alarms_ui(&self, view: &View) -> AlarmsUi {
        AlarmsUi { selected: self.alarms.position(&alarm_keys(view)).filter(|_| self.focus == PaneId::Alarms), audit: self.audit }
    }

    fn page(&self) -> isize {
        let window = if self.focus == PaneId::Slurm { &self.slurm_window } else { &self.queue_window };
        window.get().rows.max(1) as isize
    }

    /// Moves the selection of the focused pane's list.
    fn move_selection(&mut self, view: &View, step: Step) {
        // A page is what the pane shows; in the fleet's grid a line holds several nodes.
        let (line, page) = match self.focus {
            PaneId::Fleet => (self.fleet.line_len(), self.fleet.page_len()),
            _ => (1, self.page()),
        };
        let delta = match step {
            Step::Line(d) => d * line,
            Step::Page(d) => d * page,
            Step::End(d) => d * (isize::MAX / 4),
        };
        match self.focus {
            PaneId::Queue => {
                let keys = job_keys(view, &self.job_rows(view));
                self.jobs.move_by(&keys, delta);
            }
            PaneId::Budget => self.tenants.move_by(&view.budgets.iter().map(|b| b.tenant.clone()).collect::<Vec<_>>(), delta),
            PaneId::Alarms => self.alarms.move_by(&alarm_keys(view), delta),
            PaneId::Fleet => self.fleet.move_by(view, delta),
            PaneId::Slurm => self.slurm_jobs.move_by(&slurm_keys(view), delta),
            PaneId::Memory | PaneId::Market => {}
        }
    }

    pub fn on_key(&mut self, key: KeyEvent, view: &View) -> Control {
        if key.kind == KeyEventKind::Release {
            return Control::Continue;
        }
        if self.read_only {
            let quit = matches!(key.code, KeyCode::Char('q')) || (key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL));
            return if quit { Control::Quit } else { Control::Continue };
        }
        if !matches!(self.mode, Mode::Normal) {
            return super::modes::on_key(self, key, view);
        }
        self.status = None;
        let Some(command) = commands::lookup(&key, self) else { return Control::Continue };
        if self.help && !matches!(command.act, Act::Help | Act::Close | Act::Quit) {
            return Control::Continue;
        }
        let step = match command.act {
            Act::Up => Some(Step::Line(-1)),
            Act::Down => Some(Step::Line(1)),
            Act::PageUp => Some(Step::Page(-1)),
            Act::PageDown => Some(Step::Page(1)),
            Act::Top => Some(Step::End(-1)),
            Act::Bottom => Some(Step::End(1)),
            _ => None,
        };
        if let Some(step) = step {
            self.move_selection(view, step);
            return Control::Continue;
        }
        match command.act {
            Act::Quit => return Control::Quit,
            Act::Help => self.help = !self.help,
            Act::Close => {
                if self.help {
                    self.help = false;
                } else if self.focus == PaneId::Fleet && self.fleet.leave() {
                } else if !self.order.filter_text().is_empty() {
                    self.order.set_filter("");
                } else {
                    self.zoom = false;
                }
            }
            Act::FocusNext => self.focus = self.focus.next(view),
            Act::FocusPrev => self.focus = self.focus.prev(view),
            Act::FocusPane => {
                if let KeyCode::Char(c @ '1'..='7') = key.code {
                    let pane = PaneId::ALL[(c as u8 - b'1') as usize];
                    if pane.available(view) {
                        self.focus = pane;
                    } else {
                        self.status = Some(Status::hint("no Slurm cluster is attached"));
                    }
                }
            }
            Act::Zoom => self.zoom = !self.zoom,
            Act::Enter => self.fleet.enter(view),
            Act::CommandBar => self.mode = Mode::command(""),
            Act::Filter => self.mode = Mode::filter(self.order.filter_text()),
            Act::Sort => self.order.sort = self.order.sort.next(),
            Act::SortReverse => self.order.reversed = !self.order.reversed,
            Act::ToggleAudit => self.audit = !self.audit,
            Act::Preempt | Act::Requeue | Act::Cancel | Act::Migrate => {
                let Some(job) = self.selected_job(view) else {
                    self.status = Some(Status::hint("no job selected"));
                    return Control::Continue;
                };
                let action = match command.act {
                    Act::Preempt => Action::Preempt { job },
                    Act::Requeue => Action::Requeue { job },
                    Act::Cancel => Action::Cancel { job },
                    _ => {
                        self.mode = Mode::pick_pool(job, view);
                        return Control::Continue;
                    }
                };
                return super::modes::propose(self, action, view);
            }
            Act::Slurm(key) => return super::slurm_keys::on_key(self, key, view),
            Act::Approve => match self.selected_tenant(view) {
                Some(i) => self.mode = Mode::approve(&view.budgets[i].tenant),
                None => self.status = Some(Status::hint("no tenant")),
            },
            Act::Acknowledge => match self.alarms.position(&alarm_keys(view)) {
                Some(i) => return super::modes::propose(self, Action::AcknowledgeAlarm { id: view.alarms[i].id.clone() }, view),
                None => self.status = Some(Status::hint("no active alarm")),
            },
            Act::Up | Act::Down | Act::PageUp | Act::PageDown | Act::Top | Act::Bottom => {}
        }
        Control::Continue
    }

    /// Applies what the run loop learned: the engine's answer to an action.
    pub fn on_outcome(&mut self, outcome: Result<String, String>) {
        self.status = Some(match outcome {
            Ok(done) => Status::done(done),
            Err(why) => Status::refused(why),
        });
    }
}

/// How far a movement key goes.
#[derive(Copy, Clone, Debug)]
enum Step {
    Line(isize),
    Page(isize),
    End(isize),
}

fn slurm_keys(view: &View) -> Vec<u64> {
    view.slurm.as_ref().map(|s| s.jobs.iter().map(|j| j.id).collect()).unwrap_or_default()
}

fn alarm_keys(view: &View) -> Vec<String> {
    view.alarms.iter().map(|a| a.id.clone()).collect()
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
