//! `PaneId`: the seven panes by name, their titles, their words in the
//! command bar and the Tab order.
//!
//! Owns the names only, so that panes, keys and layout can all say which
//! pane they mean without importing the App. It reads the `View` only to
//! know whether a Slurm cluster is attached.

use crate::room::View;

/// The seven panes, in the order of their digit keys (`1`–`7`). The Slurm
/// pane is there only while a Slurm cluster is attached (`View::slurm`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum PaneId {
    #[default]
    Fleet,
    Memory,
    Queue,
    Market,
    Budget,
    Alarms,
    Slurm,
}

impl PaneId {
    pub const ALL: [PaneId; 7] = [PaneId::Fleet, PaneId::Memory, PaneId::Queue, PaneId::Market, PaneId::Budget, PaneId::Alarms, PaneId::Slurm];

    /// Tab order, as the panes sit on screen: the Slurm pane holds the
    /// queue's place, so it comes just before the queue.
    const TAB: [PaneId; 7] = [PaneId::Fleet, PaneId::Memory, PaneId::Slurm, PaneId::Queue, PaneId::Market, PaneId::Budget, PaneId::Alarms];

    pub fn title(self) -> &'static str {
        match self {
            PaneId::Fleet => "Fleet",
            PaneId::Memory => "GPU memory",
            PaneId::Queue => "Queue",
            PaneId::Market => "Spot market",
            PaneId::Budget => "Budgets",
            PaneId::Alarms => "Alarms & log",
            PaneId::Slurm => "Slurm",
        }
    }

    /// The word for it in the command bar (`:pane market`).
    pub fn command_name(self) -> &'static str {
        match self {
            PaneId::Fleet => "fleet",
            PaneId::Memory => "memory",
            PaneId::Queue => "queue",
            PaneId::Market => "market",
            PaneId::Budget => "budget",
            PaneId::Alarms => "alarms",
            PaneId::Slurm => "slurm",
        }
    }

    /// Whether the pane can have the focus: the Slurm pane only with a cluster.
    pub fn available(self, view: &View) -> bool {
        self != PaneId::Slurm || view.slurm.is_some()
    }

    fn step(self, view: &View, by: usize) -> PaneId {
        let n = PaneId::TAB.len();
        let mut i = PaneId::TAB.iter().position(|p| *p == self).unwrap_or(0);
        for _ in 0..n {
            i = (i + by) % n;
            if PaneId::TAB[i].available(view) {
                break;
            }
        }
        PaneId::TAB[i]
    }

    /// The next pane in Tab order that `view` has.
    pub fn next(self, view: &View) -> PaneId {
        self.step(view, 1)
    }

    /// The previous pane in Tab order that `view` has.
    pub fn prev(self, view: &View) -> PaneId {
        self.step(view, PaneId::TAB.len() - 1)
    }
}
