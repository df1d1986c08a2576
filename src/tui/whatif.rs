//! The what-if pane's state (`W`, or `:whatif [FILE|DISCIPLINE]…`): the
//! recorded run compared with its re-runs under other policies. The
//! comparison runs on a thread of the host's (`WhatIfLink`), never in the
//! engine's loop or the draw; the pane (`whatif_draw`) shows its progress
//! bar, then its table, or why it could not be made.
//!
//! Owns the pane's state and the words to and from that thread; draws
//! nothing and computes nothing of the comparison.

use tokio::sync::mpsc;

use crate::whatif::Comparison;

/// What the console asks: configuration files and discipline names, as typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhatIfAsk {
    pub words: Vec<String>,
}

/// What the comparison's thread says back.
#[derive(Clone, Debug, PartialEq)]
pub enum WhatIfUpdate {
    Progress { stage: String, done: f64 },
    Done(Box<Comparison>),
    Failed(String),
}

/// The console's line to the thread that makes comparisons.
pub struct WhatIfLink {
    pub asks: mpsc::UnboundedSender<WhatIfAsk>,
    pub updates: mpsc::Receiver<WhatIfUpdate>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub enum PaneState {
    #[default]
    Idle,
    Running {
        stage: String,
        done: f64,
    },
    Done(Box<Comparison>),
    Failed(String),
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct WhatIfPane {
    pub shown: bool,
    /// What was asked, in words, for the title.
    pub asked: String,
    pub state: PaneState,
}

impl WhatIfPane {
    pub fn running(&self) -> bool {
        matches!(self.state, PaneState::Running { .. })
    }

    /// A new comparison was asked for: shown at once, with an empty bar.
    pub fn start(&mut self, words: &[String]) {
        self.asked = if words.is_empty() { "every discipline".to_string() } else { words.join(" ") };
        self.state = PaneState::Running { stage: "starting".into(), done: 0.0 };
        self.shown = true;
    }

    pub fn update(&mut self, update: WhatIfUpdate) {
        self.state = match update {
            WhatIfUpdate::Progress { stage, done } => PaneState::Running { stage, done },
            WhatIfUpdate::Done(c) => PaneState::Done(c),
            WhatIfUpdate::Failed(why) => PaneState::Failed(why),
        };
    }
}
