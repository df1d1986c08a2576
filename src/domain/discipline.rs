//! Which queue discipline the scheduler runs: a name an operator switches at
//! run time (so a switch is an event). The disciplines themselves are
//! policies, in `sched::discipline`.

use serde::{Deserialize, Serialize};

/// The disciplines an operator can choose; serializable so a switch is an event.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DisciplineKind {
    #[default]
    Fifo,
    Priority,
    Drf,
    Mlfq,
}

impl DisciplineKind {
    /// Every discipline, in the order they are offered.
    pub const ALL: [DisciplineKind; 4] = [DisciplineKind::Fifo, DisciplineKind::Priority, DisciplineKind::Drf, DisciplineKind::Mlfq];

    /// The word for it in the configuration, the command bar and the log.
    pub fn name(self) -> &'static str {
        match self {
            DisciplineKind::Fifo => "fifo",
            DisciplineKind::Priority => "priority",
            DisciplineKind::Drf => "drf",
            DisciplineKind::Mlfq => "mlfq",
        }
    }

    /// The discipline of that name, as `name` spells it (lower case), if any.
    pub fn parse(name: &str) -> Option<DisciplineKind> {
        DisciplineKind::ALL.into_iter().find(|d| d.name() == name)
    }
}
