//! A simulated run re-run exactly: the same seeded world from the log's
//! meta, answering another room, with the engine's own events (ticks and
//! operator actions) put back at their recorded times.
//!
//! The world's events at a time come before a recorded tick or action at
//! that time, as they did in the engine (`Engine::run_toward` feeds the
//! world up to a time, then ticks). Does no IO.

use std::collections::VecDeque;

use crate::domain::event::{Effect, Event};
use crate::domain::units::At;
use crate::engine::World;
use crate::sim::Simulation;

pub struct Rerun {
    sim: Simulation,
    controls: VecDeque<(At, Event)>,
}

impl Rerun {
    pub fn new(sim: Simulation, controls: Vec<(At, Event)>) -> Rerun {
        Rerun { sim, controls: controls.into() }
    }
}

impl World for Rerun {
    fn next_event(&mut self, until: At) -> Option<(At, Event)> {
        let control_at = self.controls.front().map(|(at, _)| *at).filter(|at| *at <= until);
        if let Some(found) = self.sim.next_event(control_at.unwrap_or(until)) {
            return Some(found);
        }
        control_at.and_then(|_| self.controls.pop_front())
    }

    fn handle(&mut self, at: At, effects: &[Effect]) {
        self.sim.handle(at, effects);
    }

    fn start(&self) -> At {
        self.sim.config().start
    }
}
