//! The console's state and its key router: focus, help, zoom, the modal
//! state (`Mode`), the status line, the job table's order and filter, and
//! the panes' components (fleet, queue, budgets, alarms, Slurm), each owning
//! its selection. `App::on_key` routes a key to the open mode or to the
//! focused component, which hands back a `Request`; the App applies it.
//!
//! Owns only presentation state. It reads the `View` to keep selections on
//! the same job, tenant or alarm as the tables change, and must never change
//! the `View` or decide anything about jobs: an operator action leaves as
//! `Control::Send` for the engine, which may refuse it. It must not import
//! the drawing code (draw, chrome, dialog, help, layout, svg, wall, run):
//! that sits above it and reads it.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::command_bar::Intent;
use super::commands::{self, Act, KeyContext};
use super::job_order::JobOrder;
use super::modes::{self, Mode, Selected};
use super::pane_id::PaneId;
use super::panes::alarm_list::{AlarmList, AlarmsUi};
use super::panes::budget_list::BudgetList;
use super::panes::fleet_ui::FleetUi;
use super::panes::queue_list::QueueList;
use super::panes::slurm_list::SlurmList;
use super::panes::{KeyInput, KeyPane};
use super::request::Request;
use super::status::Status;
use super::whatif::WhatIfPane;
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
    /// Run the simulated engine at this many simulated seconds per second.
    Speed(f64),
    /// A what-if comparison for the host's thread: configuration files and disciplines.
    WhatIf(Vec<String>),
}

#[derive(Clone, Debug, Default)]
pub struct App {
    pub(super) focus: PaneId,
    pub(super) help: bool,
    /// The focused pane fills the body.
    pub(super) zoom: bool,
    /// A read-only console (the wall display): no key but quit does anything.
    pub(super) read_only: bool,
    /// This console runs the engine (it is not attached to another's):
    /// quitting stops the engine, so `q` asks first.
    pub(super) owns_engine: bool,
    /// The display is frozen on the view it showed (the engine goes on).
    pub(super) paused: bool,
    /// The first line of `?` shown, where the help is longer than the
    /// screen; drawing clamps it to the help's length.
    pub(super) help_scroll: std::cell::Cell<usize>,
    /// The simulated speed of the engine this console runs; `None` where
    /// the speed is not this console's to change (attached, live, wall).
    pub(super) speed: Option<f64>,
    /// Order and filter of the job table. The App's, not the queue's: the
    /// command bar, the filter mode and Esc from any pane change it.
    pub(super) order: JobOrder,
    pub(super) mode: Mode,
    /// The outcome of the last action, or a hint; cleared by the next key.
    pub(super) status: Option<Status>,
    /// Fleet pane: selected node and drill-down.
    pub(super) fleet: FleetUi,
    /// Queue pane: selected job and scroll window.
    pub(super) queue: QueueList,
    /// Budgets pane: selected tenant.
    pub(super) budget: BudgetList,
    /// Alarms pane: selected alarm, and the audit trail toggle.
    pub(super) alarms: AlarmList,
    /// Slurm pane: selected Slurm job and scroll window.
    pub(super) slurm: SlurmList,
    /// The what-if pane over the console: progress, then the comparison.
    pub(super) whatif: WhatIfPane,
}

/// The speeds `+` and `-` move between (what `--speed` accepts).
pub const MAX_SPEED: f64 = 100_000.0;
pub const MIN_SPEED: f64 = 0.25;

/// `60`, `7.5`, `0.25`: a speed without needless decimals.
pub fn speed_text(speed: f64) -> String {
    let text = format!("{speed:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl From<&App> for KeyContext {
    fn from(app: &App) -> KeyContext {
        app.keys()
    }
}

impl App {
    pub fn new() -> App {
        App::default()
    }

    /// The console with `pane` focused, filling the body when `zoom`
    /// (a screenshot's starting point; what the number keys and `z` do).
    pub fn show(&mut self, pane: PaneId, zoom: bool) {
        self.focus = pane;
        self.zoom = zoom;
    }

    /// Focus on `pane`, the zoom as it is.
    pub fn focus_on(&mut self, pane: PaneId) {
        self.focus = pane;
    }

    /// The fleet pane drilled into one node (what Enter on its row does).
    pub fn drill_into(&mut self, node: Option<crate::domain::ids::NodeId>) {
        self.fleet.drill = node;
    }

    /// A what-if comparison shown over the console (screenshots of it).
    pub fn set_whatif(&mut self, pane: WhatIfPane) {
        self.whatif = pane;
    }

    /// A fresh console with the focus on `pane`.
    pub fn with_focus(pane: PaneId) -> App {
        App { focus: pane, ..App::default() }
    }

    /// The wall display's console: read-only.
    pub fn read_only() -> App {
        App { read_only: true, ..App::default() }
    }

    /// The display is frozen (Space): the loop keeps showing the view it had.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// The console of a process that runs the engine: `q` asks before stopping it.
    pub fn owning_engine() -> App {
        App { owns_engine: true, ..App::default() }
    }

    /// The console that runs a simulated engine at `speed`: `+` and `-` change it.
    pub fn owning_simulation(speed: f64) -> App {
        App { speed: Some(speed), ..App::owning_engine() }
    }

    /// Twice or half the simulated speed, within what `--speed` takes.
    fn change_speed(&mut self, faster: bool) -> Control {
        let Some(speed) = self.speed else {
            self.status = Some(Status::hint("the speed is the engine's: only the console that runs a simulation changes it"));
            return Control::Continue;
        };
        let next = if faster { (speed * 2.0).min(MAX_SPEED) } else { (speed / 2.0).max(MIN_SPEED) };
        if next == speed {
            let edge = if faster { "fastest" } else { "slowest" };
            self.status = Some(Status::hint(format!("already at the {edge} speed, ×{}", speed_text(speed))));
            return Control::Continue;
        }
        self.speed = Some(next);
        self.status = Some(Status::hint(format!("speed ×{} (was ×{})", speed_text(next), speed_text(speed))));
        Control::Speed(next)
    }

    /// What the key table needs to know to judge which commands apply.
    pub fn keys(&self) -> KeyContext {
        KeyContext { focus: self.focus, help: self.help, read_only: self.read_only }
    }

    /// Rows of `view.jobs` shown, in order (filter and sort applied).
    pub fn job_rows(&self, view: &View) -> Vec<usize> {
        self.order.rows(view)
    }

    /// Position among `rows` of the selected job.
    pub fn selected_row(&self, view: &View, rows: &[usize]) -> Option<usize> {
        self.queue.selected_row(view, rows)
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
        self.budget.selected(view)
    }

    /// Position in `view.slurm.jobs` of the selected Slurm job.
    pub fn selected_slurm_row(&self, view: &View) -> Option<usize> {
        self.slurm.selected_row(view)
    }

    /// The selected Slurm job's id, if a cluster is attached and lists jobs.
    pub fn selected_slurm_job(&self, view: &View) -> Option<u64> {
        self.slurm.selected_job(view)
    }

    pub fn alarms_ui(&self, view: &View) -> AlarmsUi {
        self.alarms.ui(view, self.focus == PaneId::Alarms)
    }

    pub fn on_key(&mut self, key: KeyEvent, view: &View) -> Control {
        if key.kind == KeyEventKind::Release {
            return Control::Continue;
        }
        if self.read_only {
            // Only q: a wall is left running, and a stray Ctrl-C must not take it down.
            let quit = key.code == KeyCode::Char('q') && !key.modifiers.contains(KeyModifiers::CONTROL);
            return if quit { Control::Quit } else { Control::Continue };
        }
        if !matches!(self.mode, Mode::Normal) {
            let mode = std::mem::take(&mut self.mode);
            let (mode, request) = modes::on_key(mode, key, view, || Selected { job: self.selected_job(view), slurm_job: self.selected_slurm_job(view) });
            self.mode = mode;
            return self.apply(request, view);
        }
        self.status = None;
        let Some(command) = commands::lookup(&key, self.keys()) else { return Control::Continue };
        if self.help && !matches!(command.act, Act::Help | Act::Close | Act::Quit) {
            // Over the help only its own scrolling moves (clamped to its length when drawn).
            if let Some(step) = command.act.step() {
                let first = (self.help_scroll.get() as isize).saturating_add(step.delta(1, 10)).clamp(0, 10_000);
                self.help_scroll.set(first as usize);
            }
            return Control::Continue;
        }
        // Over the panes, the what-if pane takes no pane's keys.
        if self.whatif.shown && !matches!(command.act, Act::WhatIf | Act::Close | Act::Quit | Act::CommandBar | Act::Help) {
            return Control::Continue;
        }
        let request = match command.act {
            Act::Quit if self.owns_engine => {
                self.mode = Mode::ConfirmQuit;
                Request::Nothing
            }
            Act::Quit => Request::Quit,
            Act::Faster | Act::Slower => return self.change_speed(command.act == Act::Faster),
            Act::Pause => {
                self.paused = !self.paused;
                Request::hint(if self.paused { "display paused: the engine goes on (Space resumes)" } else { "display live again" })
            }
            Act::Help => {
                self.help = !self.help;
                self.help_scroll.set(0);
                Request::Nothing
            }
            Act::Close => self.close(view),
            Act::FocusNext => {
                self.focus = self.focus.next(view);
                Request::Nothing
            }
            Act::FocusPrev => {
                self.focus = self.focus.prev(view);
                Request::Nothing
            }
            Act::FocusPane => self.focus_digit(key.code, view),
            Act::Zoom => {
                self.zoom = !self.zoom;
                Request::Nothing
            }
            Act::CommandBar => Request::Command(String::new()),
            Act::WhatIf if self.whatif.shown => {
                self.whatif.shown = false;
                Request::Nothing
            }
            Act::WhatIf if self.whatif.state == super::whatif::PaneState::Idle => Request::Run(Intent::WhatIf(Vec::new())),
            Act::WhatIf => {
                self.whatif.shown = true;
                Request::Nothing
            }
            Act::Filter => {
                self.mode = Mode::filter(self.order.filter_text());
                Request::Nothing
            }
            Act::Sort => {
                self.order.sort = self.order.sort.next();
                Request::Nothing
            }
            Act::SortReverse => {
                self.order.reversed = !self.order.reversed;
                Request::Nothing
            }
            act => self.route(act, view).unwrap_or(Request::Nothing),
        };
        self.apply(request, view)
    }

    /// Hands a key to the focused pane's component; `None` when it is not
    /// that pane's key.
    fn route(&mut self, act: Act, view: &View) -> Option<Request> {
        // Budgets and alarms keep no scroll window: a page there is the job
        // table's, as drawn last.
        let input = KeyInput { act, page: self.queue.page(), order: &self.order, view };
        let pane: &mut dyn KeyPane = match self.focus {
            PaneId::Fleet => &mut self.fleet,
            PaneId::Queue => &mut self.queue,
            PaneId::Budget => &mut self.budget,
            PaneId::Alarms => &mut self.alarms,
            PaneId::Slurm => &mut self.slurm,
            PaneId::Memory | PaneId::Market => return None,
        };
        pane.on_key(input)
    }

    /// Esc backs out of one thing: help, then whatever the focused pane has
    /// open (the fleet's drill-down), then the filter, then zoom.
    fn close(&mut self, view: &View) -> Request {
        if self.help {
            self.help = false;
        } else if self.whatif.shown {
            self.whatif.shown = false;
        } else if let Some(request) = self.route(Act::Close, view) {
            return request;
        } else if !self.order.filter_text().is_empty() {
            self.order.set_filter("");
        } else {
            self.zoom = false;
        }
        Request::Nothing
    }

    /// `1`–`7`: the pane of that digit, if the view has it.
    fn focus_digit(&mut self, code: KeyCode, view: &View) -> Request {
        if let KeyCode::Char(c @ '1'..='7') = code {
            let pane = PaneId::ALL[(c as u8 - b'1') as usize];
            if !pane.available(view) {
                return Request::hint("no Slurm cluster is attached");
            }
            self.focus = pane;
        }
        Request::Nothing
    }

    /// Does what a mode or a component asked for.
    fn apply(&mut self, request: Request, view: &View) -> Control {
        match request {
            Request::Nothing => {}
            Request::Send(actions) => return Control::Send(actions),
            Request::Propose(action) => {
                let (mode, then) = modes::propose(action, view);
                self.mode = mode;
                return self.apply(then, view);
            }
            Request::Run(intent) => return self.run(intent, view),
            Request::Command(line) => self.mode = Mode::command(&line),
            Request::Filter(text) => self.order.set_filter(&text),
            Request::Status(status) => self.status = Some(status),
            Request::Quit => return Control::Quit,
        }
        Control::Continue
    }

    /// What a command-bar line (or a key that asks in its words) wants.
    fn run(&mut self, intent: Intent, view: &View) -> Control {
        self.mode = Mode::Normal;
        match intent {
            Intent::Act(action) => return self.apply(Request::Propose(action), view),
            Intent::AckAll(ids) => return Control::Send(ids.into_iter().map(|id| Action::AcknowledgeAlarm { id }).collect()),
            Intent::PickPool(job) => self.mode = Mode::pick_pool(job, view),
            Intent::ApproveForm(tenant) => self.mode = Mode::approve(&tenant.0),
            Intent::Filter(text) => {
                self.order.set_filter(&text);
                self.focus = PaneId::Queue;
            }
            Intent::Sort(key, reversed) => {
                self.order.sort = key;
                self.order.reversed = reversed;
            }
            Intent::Focus(pane) => self.focus = pane,
            Intent::WhatIf(_) if self.whatif.running() => {
                self.whatif.shown = true;
                self.status = Some(Status::hint("a comparison is already running; its table comes here"));
            }
            Intent::WhatIf(words) => {
                self.whatif.start(&words);
                return Control::WhatIf(words);
            }
            Intent::Help => self.help = true,
            Intent::Usage(text) => self.status = Some(Status::hint(text)),
            Intent::Quit => return Control::Quit,
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

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
