//! The one list of console commands (gitui's `CommandInfo` idea): each entry
//! carries its key bindings, the label shown for them, its description and
//! where it applies. Key dispatch, the footer hints and the help overlay are
//! all generated from `COMMANDS`, so none of them can drift from the others.
//!
//! Owns the key table only, and judges it against a `KeyContext` (focus,
//! help, read-only), never the App itself. What a command does lives in
//! `app.rs` and in the focused pane's component; this file must not touch
//! the `View`.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::pane_id::PaneId;
use super::slurm_keys::SlurmKey;
use crate::domain::slurm::SlurmVerb;

/// What a key does.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Act {
    Quit,
    Help,
    Close,
    FocusNext,
    FocusPrev,
    Zoom,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    FocusPane,
    Enter,
    CommandBar,
    Filter,
    Sort,
    SortReverse,
    Preempt,
    Requeue,
    Migrate,
    Cancel,
    Approve,
    Acknowledge,
    /// Approve the oldest capacity proposal (the fleet pane, advisory mode).
    ApproveCapacity,
    ToggleAudit,
    /// Show or hide the what-if pane (the first time: compare every discipline).
    WhatIf,
    /// A verb on the selected job of the Slurm pane.
    Slurm(SlurmKey),
    /// Freeze the display (the engine goes on), or let it move again.
    Pause,
    /// Run the simulated engine this console owns twice as fast, or half.
    Faster,
    Slower,
}

impl Act {
    /// How far a movement key moves a list's selection; `None` for any other.
    pub fn step(self) -> Option<Step> {
        Some(match self {
            Act::Up => Step::Line(-1),
            Act::Down => Step::Line(1),
            Act::PageUp => Step::Page(-1),
            Act::PageDown => Step::Page(1),
            Act::Top => Step::End(-1),
            Act::Bottom => Step::End(1),
            _ => return None,
        })
    }
}

/// How far a movement key goes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Line(isize),
    Page(isize),
    End(isize),
}

impl Step {
    /// The move in items, given what a line and a page hold in the list at
    /// hand (a line of the fleet's grid holds several nodes).
    pub fn delta(self, line: isize, page: isize) -> isize {
        match self {
            Step::Line(d) => d * line,
            Step::Page(d) => d * page,
            Step::End(d) => d * (isize::MAX / 4),
        }
    }
}

/// What decides which commands apply: the App's focus, help overlay and
/// read-only flag, copied out (`App::keys`) so that the key table need not
/// import the App. `&App` converts into it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyContext {
    pub focus: PaneId,
    pub help: bool,
    pub read_only: bool,
}

/// Where a command applies.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Global,
    /// A pane with a selectable list has the focus: fleet, queue, budgets, alarms, Slurm.
    Lists,
    /// Only when the queue pane has the focus.
    Queue,
    Fleet,
    Budget,
    Alarms,
    /// Only when the Slurm pane has the focus.
    Slurm,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    /// Only `CONTROL` is matched; Shift is part of the character itself.
    pub ctrl: bool,
}

const fn key(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

pub struct Command {
    pub act: Act,
    /// How the keys are written in the help overlay.
    pub keys: &'static str,
    pub desc: &'static str,
    /// Footer hint `(keys, word)`; `None` keeps it out of the footer.
    pub hint: Option<(&'static str, &'static str)>,
    pub scope: Scope,
    pub bindings: &'static [Key],
}

pub const COMMANDS: &[Command] = &[
    Command {
        act: Act::FocusNext,
        keys: "Tab",
        desc: "focus the next pane",
        hint: Some(("Tab", "pane")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Tab)],
    },
    Command { act: Act::FocusPrev, keys: "Shift-Tab", desc: "focus the previous pane", hint: None, scope: Scope::Global, bindings: &[key(KeyCode::BackTab)] },
    Command {
        act: Act::Down,
        keys: "↓ j",
        desc: "select the next row (job, node, tenant, alarm)",
        hint: Some(("↑↓", "select")),
        scope: Scope::Lists,
        bindings: &[key(KeyCode::Down), key(KeyCode::Char('j'))],
    },
    Command {
        act: Act::Up,
        keys: "↑ k",
        desc: "select the previous row",
        hint: None,
        scope: Scope::Lists,
        bindings: &[key(KeyCode::Up), key(KeyCode::Char('k'))],
    },
    Command { act: Act::PageDown, keys: "PgDn", desc: "one page down", hint: None, scope: Scope::Lists, bindings: &[key(KeyCode::PageDown)] },
    Command { act: Act::PageUp, keys: "PgUp", desc: "one page up", hint: None, scope: Scope::Lists, bindings: &[key(KeyCode::PageUp)] },
    Command { act: Act::Top, keys: "Home g", desc: "first row", hint: None, scope: Scope::Lists, bindings: &[key(KeyCode::Home), key(KeyCode::Char('g'))] },
    Command { act: Act::Bottom, keys: "End G", desc: "last row", hint: None, scope: Scope::Lists, bindings: &[key(KeyCode::End), key(KeyCode::Char('G'))] },
    Command {
        act: Act::FocusPane,
        keys: "1-7",
        desc: "focus fleet, memory, queue, market, budgets, alarms, Slurm",
        hint: None,
        scope: Scope::Global,
        bindings: &[
            key(KeyCode::Char('1')),
            key(KeyCode::Char('2')),
            key(KeyCode::Char('3')),
            key(KeyCode::Char('4')),
            key(KeyCode::Char('5')),
            key(KeyCode::Char('6')),
            key(KeyCode::Char('7')),
        ],
    },
    Command {
        act: Act::CommandBar,
        keys: ":",
        desc: "command bar (Tab completes; :help lists commands)",
        hint: Some((":", "cmd")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char(':'))],
    },
    Command {
        act: Act::Filter,
        keys: "/",
        desc: "filter jobs by id, name, tenant, project, model, state, node",
        hint: Some(("/", "filter")),
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Char('/'))],
    },
    Command {
        act: Act::Sort,
        keys: "s",
        desc: "sort jobs by the next column",
        hint: Some(("s", "sort")),
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Char('s'))],
    },
    Command { act: Act::SortReverse, keys: "S", desc: "reverse the sort", hint: None, scope: Scope::Queue, bindings: &[key(KeyCode::Char('S'))] },
    Command {
        act: Act::Preempt,
        keys: "p",
        desc: "preempt the job: save, stop, requeue (asks first)",
        hint: Some(("p", "preempt")),
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Char('p'))],
    },
    Command {
        act: Act::Requeue,
        keys: "r",
        desc: "requeue the job now, without saving (asks first)",
        hint: Some(("r", "requeue")),
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Char('r'))],
    },
    Command {
        act: Act::Migrate,
        keys: "m",
        desc: "migrate the job to a pool you choose (asks first)",
        hint: Some(("m", "migrate")),
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Char('m'))],
    },
    Command {
        act: Act::Cancel,
        keys: "X",
        desc: "cancel the job for good (asks first)",
        hint: None,
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Char('X'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Verb(&SlurmVerb::Preempt)),
        keys: "p",
        desc: "preempt the Slurm job: requeue or suspend, as the site's policy says (asks first)",
        hint: Some(("p", "preempt")),
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('p'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Verb(&SlurmVerb::Requeue)),
        keys: "r",
        desc: "requeue the Slurm job: its GPUs are freed, it starts again later (asks first)",
        hint: Some(("r", "requeue")),
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('r'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Verb(&SlurmVerb::Suspend)),
        keys: "s",
        desc: "suspend the Slurm job: it stops but keeps its GPUs and memory (asks first)",
        hint: Some(("s S", "suspend/resume")),
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('s'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Verb(&SlurmVerb::Resume)),
        keys: "S",
        desc: "resume the suspended Slurm job (asks first)",
        hint: None,
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('S'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Migrate),
        keys: "m",
        desc: "migrate the Slurm job: type the partition or nodes to avoid in the command bar",
        hint: Some(("m", "migrate")),
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('m'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Verb(&SlurmVerb::Hold)),
        keys: "h",
        desc: "hold the pending Slurm job: Slurm will not start it (asks first)",
        hint: Some(("h H", "hold/release")),
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('h'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Verb(&SlurmVerb::Release)),
        keys: "H",
        desc: "release the held Slurm job (asks first)",
        hint: None,
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('H'))],
    },
    Command {
        act: Act::Slurm(SlurmKey::Verb(&SlurmVerb::Cancel)),
        keys: "X",
        desc: "cancel the Slurm job for good: scancel (asks first)",
        hint: None,
        scope: Scope::Slurm,
        bindings: &[key(KeyCode::Char('X'))],
    },
    Command {
        act: Act::Enter,
        keys: "Enter",
        desc: "drill into the node / back with Esc",
        hint: Some(("Enter", "node")),
        scope: Scope::Fleet,
        bindings: &[key(KeyCode::Enter)],
    },
    Command {
        act: Act::Enter,
        keys: "Enter",
        desc: "the selected job's detail (history, waits, checkpoint, price) / back with Esc",
        hint: Some(("Enter", "detail")),
        scope: Scope::Queue,
        bindings: &[key(KeyCode::Enter)],
    },
    Command {
        act: Act::ApproveCapacity,
        keys: "a",
        desc: "approve the oldest capacity proposal",
        hint: Some(("a", "approve")),
        scope: Scope::Fleet,
        bindings: &[key(KeyCode::Char('a'))],
    },
    Command {
        act: Act::Approve,
        keys: "a",
        desc: "approve a budget overrun for the tenant (reason required)",
        hint: Some(("a", "approve")),
        scope: Scope::Budget,
        bindings: &[key(KeyCode::Char('a'))],
    },
    Command {
        act: Act::Acknowledge,
        keys: "a",
        desc: "acknowledge the selected alarm",
        hint: Some(("a", "ack")),
        scope: Scope::Alarms,
        bindings: &[key(KeyCode::Char('a'))],
    },
    Command {
        act: Act::ToggleAudit,
        keys: "l",
        desc: "event log / audit trail of operator actions",
        hint: Some(("l", "audit")),
        scope: Scope::Alarms,
        bindings: &[key(KeyCode::Char('l'))],
    },
    Command {
        act: Act::Zoom,
        keys: "z",
        desc: "zoom the focused pane / back",
        hint: Some(("z", "zoom")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char('z'))],
    },
    Command {
        act: Act::WhatIf,
        keys: "W",
        desc: "what if: this run under each discipline, side by side",
        hint: None,
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char('W'))],
    },
    Command { act: Act::Help, keys: "?", desc: "show / hide this help", hint: Some(("?", "help")), scope: Scope::Global, bindings: &[key(KeyCode::Char('?'))] },
    Command {
        act: Act::Pause,
        keys: "Space",
        desc: "freeze the display; the engine goes on (Space resumes)",
        hint: None,
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char(' '))],
    },
    Command {
        act: Act::Faster,
        keys: "+",
        desc: "simulated speed ×2 (on the console that runs the simulation)",
        hint: None,
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char('+')), key(KeyCode::Char('='))],
    },
    Command { act: Act::Slower, keys: "-", desc: "simulated speed ÷2", hint: None, scope: Scope::Global, bindings: &[key(KeyCode::Char('-'))] },
    Command {
        act: Act::Close,
        keys: "Esc",
        desc: "back out: help, node, filter, zoom (never quits)",
        hint: None,
        scope: Scope::Global,
        bindings: &[key(KeyCode::Esc)],
    },
    Command {
        act: Act::Quit,
        keys: "q Ctrl-C",
        desc: "quit the console",
        hint: Some(("q", "quit")),
        scope: Scope::Global,
        bindings: &[key(KeyCode::Char('q')), Key { code: KeyCode::Char('c'), ctrl: true }],
    },
];

impl Key {
    fn matches(&self, event: &KeyEvent) -> bool {
        let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl != self.ctrl || event.modifiers.contains(KeyModifiers::ALT) {
            return false;
        }
        match (self.code, event.code) {
            (KeyCode::Char(a), KeyCode::Char(b)) if self.ctrl => a.eq_ignore_ascii_case(&b),
            (a, b) => a == b,
        }
    }
}

impl Command {
    /// Whether the command does something where the keys are now (`&App`
    /// or its `KeyContext`).
    pub fn enabled(&self, keys: impl Into<KeyContext>) -> bool {
        let keys: KeyContext = keys.into();
        if keys.read_only {
            return matches!(self.act, Act::Quit);
        }
        let here = |pane: PaneId| keys.focus == pane && !keys.help;
        match self.scope {
            Scope::Global => true,
            // The help overlay is a list too: the movement keys scroll it.
            Scope::Lists => keys.help || matches!(keys.focus, PaneId::Fleet | PaneId::Queue | PaneId::Budget | PaneId::Alarms | PaneId::Slurm),
            Scope::Queue => here(PaneId::Queue),
            Scope::Fleet => here(PaneId::Fleet),
            Scope::Budget => here(PaneId::Budget),
            Scope::Alarms => here(PaneId::Alarms),
            Scope::Slurm => here(PaneId::Slurm),
        }
    }
}

/// The command a key is bound to where the app is now (a key may mean
/// different things in different panes, never two things in one).
pub fn lookup(event: &KeyEvent, keys: impl Into<KeyContext>) -> Option<&'static Command> {
    let keys = keys.into();
    COMMANDS.iter().filter(|c| c.bindings.iter().any(|k| k.matches(event))).find(|c| c.enabled(keys))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::App;

    #[test]
    fn no_key_means_two_things_in_one_pane() {
        for pane in PaneId::ALL {
            let app = App::with_focus(pane);
            let all: Vec<Key> = COMMANDS.iter().filter(|c| c.enabled(&app)).flat_map(|c| c.bindings.iter().copied()).collect();
            for (i, a) in all.iter().enumerate() {
                assert!(!all[i + 1..].contains(a), "{a:?} bound twice in {pane:?}");
            }
        }
    }

    #[test]
    fn ctrl_c_is_quit_but_c_is_nothing() {
        let app = App::with_focus(PaneId::Queue);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(lookup(&ctrl_c, &app).map(|c| c.act), Some(Act::Quit));
        assert!(lookup(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE), &app).is_none());
        // Shift comes with some characters; it does not change the binding.
        let shift_g = KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT);
        assert_eq!(lookup(&shift_g, &app).map(|c| c.act), Some(Act::Bottom));
        let back_tab = KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT);
        assert_eq!(lookup(&back_tab, &app).map(|c| c.act), Some(Act::FocusPrev));
    }

    #[test]
    fn a_approves_in_budgets_and_acknowledges_in_alarms() {
        let a = KeyEvent::new(KeyCode::Char('a'), KeyModifiers::NONE);
        assert_eq!(lookup(&a, &App::with_focus(PaneId::Budget)).map(|c| c.act), Some(Act::Approve));
        assert_eq!(lookup(&a, &App::with_focus(PaneId::Alarms)).map(|c| c.act), Some(Act::Acknowledge));
        assert!(lookup(&a, &App::with_focus(PaneId::Queue)).is_none());
        let p = KeyEvent::new(KeyCode::Char('p'), KeyModifiers::NONE);
        assert!(lookup(&p, &App::read_only()).is_none(), "nothing but quit on the wall");
    }

    #[test]
    fn the_slurm_pane_has_its_own_verbs_and_the_queue_keeps_its_own() {
        let at = |c: char, pane: PaneId| lookup(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), &App::with_focus(pane)).map(|c| c.act);
        let slurm = [
            ('p', SlurmKey::Verb(&SlurmVerb::Preempt)),
            ('r', SlurmKey::Verb(&SlurmVerb::Requeue)),
            ('s', SlurmKey::Verb(&SlurmVerb::Suspend)),
            ('S', SlurmKey::Verb(&SlurmVerb::Resume)),
            ('h', SlurmKey::Verb(&SlurmVerb::Hold)),
            ('H', SlurmKey::Verb(&SlurmVerb::Release)),
            ('m', SlurmKey::Migrate),
            ('X', SlurmKey::Verb(&SlurmVerb::Cancel)),
        ];
        for (c, k) in slurm {
            assert_eq!(at(c, PaneId::Slurm), Some(Act::Slurm(k)), "{c}");
        }
        assert_eq!(at('p', PaneId::Queue), Some(Act::Preempt));
        assert_eq!(at('s', PaneId::Queue), Some(Act::Sort));
        assert_eq!(at('j', PaneId::Slurm), Some(Act::Down), "the Slurm pane is a list");
        assert_eq!(at('7', PaneId::Fleet), Some(Act::FocusPane));
        assert!(at('h', PaneId::Fleet).is_none() && at('/', PaneId::Slurm).is_none());
    }
}
