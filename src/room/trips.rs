//! Fleet-level alarms: what one log line does not show but several events
//! together do — a spot storm (several nodes lost within a short window), an
//! interruption save that did not finish, a pool refusing launch after
//! launch, jobs failing in a burst. These are alarms about events, not
//! standing conditions: each clears itself after `AlarmRules::event_hold`
//! and then stays listed, unread, until someone acknowledges it.
//!
//! Owns the recent windows (`Trips`, a part of the room) and the rules'
//! reading; raises through the journal. Must not decide anything about jobs,
//! nodes or money.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::journal::Journal;
use crate::domain::event::Effect;
use crate::domain::ids::JobId;
use crate::domain::text::clean;
use crate::domain::units::{At, Secs};

/// When events together make an alarm (`[alarms]` in the engine's config).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlarmRules {
    /// Nodes lost within `storm_window` that make a storm.
    pub storm_nodes: u32,
    pub storm_window: Secs,
    /// Jobs failed within `failure_window` that make a burst.
    pub failure_burst: u32,
    pub failure_window: Secs,
    /// Launches one pool refuses in a row before it is an alarm.
    pub launch_refusals: u32,
    /// How long an alarm about an event stays active before it clears itself.
    pub event_hold: Secs,
}

impl Default for AlarmRules {
    fn default() -> Self {
        AlarmRules { storm_nodes: 3, storm_window: Secs(600), failure_burst: 5, failure_window: Secs(600), launch_refusals: 3, event_hold: Secs(900) }
    }
}

/// The recent events the rules count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trips {
    /// Nodes lost, with when, inside the storm window.
    losses: VecDeque<(At, String)>,
    /// Jobs failed, with when, inside the failure window.
    failures: VecDeque<(At, JobId)>,
    /// Launches each pool refused since its last good answer.
    refusals: BTreeMap<String, u32>,
}

/// The id of the storm alarm: one for the fleet, updated as losses add up.
pub const STORM_ALARM: &str = "storm:fleet";
/// The id of the failing-jobs alarm.
pub const FAILURES_ALARM: &str = "failures:jobs";

/// The rules, the windows and the journal, lent together.
pub struct Tripwires<'a> {
    pub rules: &'a AlarmRules,
    pub trips: &'a mut Trips,
    pub journal: &'a mut Journal,
}

impl Tripwires<'_> {
    /// A node was lost: counted; enough of them inside the window are a storm.
    pub fn node_lost(&mut self, at: At, name: &str, effects: &mut Vec<Effect>) {
        let rules = self.rules;
        let Some(names) = count_in(&mut self.trips.losses, at, clean(name), rules.storm_window, rules.storm_nodes) else { return };
        let text = format!("storm: {} nodes lost within {} ({})", names.len(), rules.storm_window, listed(names.iter()));
        self.raise_or_update(at, STORM_ALARM, text, effects);
    }

    /// A job's interruption save did not finish before its node went: its
    /// work since the last checkpoint is lost.
    pub fn save_missed(&mut self, at: At, job: JobId, name: &str, node: &str, effects: &mut Vec<Effect>) {
        let text = format!("{job} {}: its save did not finish before {} went; it restarts from its last checkpoint", clean(name), clean(node));
        let hold = at + self.rules.event_hold.delta();
        self.journal.raise_until(at, format!("save:{job}"), text, Some(hold), effects);
    }

    /// A job failed on its own (not cancelled): enough inside the window are a burst.
    pub fn job_failed(&mut self, at: At, job: JobId, effects: &mut Vec<Effect>) {
        let rules = self.rules;
        let Some(jobs) = count_in(&mut self.trips.failures, at, job, rules.failure_window, rules.failure_burst) else { return };
        let text = format!("{} jobs failed within {} ({})", jobs.len(), rules.failure_window, listed(jobs.iter().map(JobId::to_string)));
        self.raise_or_update(at, FAILURES_ALARM, text, effects);
    }

    /// A pool refused a launch (or never answered): enough in a row are an
    /// alarm. It holds while the refusals go on and clears when the pool
    /// launches again, or `event_hold` after the last refusal (the room has
    /// stopped asking that pool), then waits unread.
    pub fn launch_refused(&mut self, at: At, pool: &str, why: &str, effects: &mut Vec<Effect>) {
        let pool = clean(pool);
        let count = self.trips.refusals.entry(pool.clone()).or_default();
        *count += 1;
        let count = *count;
        if self.rules.launch_refusals == 0 || count < self.rules.launch_refusals {
            return;
        }
        let text = format!("{pool} refused {count} launches in a row (last: {})", clean(why));
        self.raise_or_update(at, &format!("launch:{pool}"), text, effects);
    }

    /// A pool launched: its refusals are forgotten and its alarm clears.
    pub fn launch_answered(&mut self, at: At, pool: &str, effects: &mut Vec<Effect>) {
        let pool = clean(pool);
        if self.trips.refusals.remove(&pool).is_some() {
            self.journal.clear(at, &format!("launch:{pool}"), effects);
        }
    }

    /// A storm or a burst grows in place (one line in the log when it
    /// starts, not one per loss), and holds on while it lasts.
    fn raise_or_update(&mut self, at: At, id: &str, text: String, effects: &mut Vec<Effect>) {
        let hold = at + self.rules.event_hold.delta();
        self.journal.raise_or_update(at, id, text, Some(hold), effects);
    }
}

/// Counts `item` at `at` in a window `span` long; the items in it when they
/// are `threshold` or more (0 turns the rule off).
fn count_in<T: Clone>(window: &mut VecDeque<(At, T)>, at: At, item: T, span: Secs, threshold: u32) -> Option<Vec<T>> {
    window.push_back((at, item));
    while window.front().is_some_and(|(t, _)| at - *t > span.delta()) {
        window.pop_front();
    }
    (threshold > 0 && window.len() >= threshold as usize).then(|| window.iter().map(|(_, x)| x.clone()).collect())
}

/// The first few names, and how many more.
fn listed<S: AsRef<str>>(names: impl Iterator<Item = S>) -> String {
    let names: Vec<S> = names.collect();
    let shown: Vec<&str> = names.iter().take(4).map(AsRef::as_ref).collect();
    match names.len().saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testkit::t;

    fn wires<'a>(rules: &'a AlarmRules, (trips, journal): &'a mut (Trips, Journal)) -> Tripwires<'a> {
        Tripwires { rules, trips, journal }
    }

    #[test]
    fn three_losses_in_ten_minutes_are_a_storm_two_are_not() {
        let (rules, mut room, mut fx) = (AlarmRules::default(), (Trips::default(), Journal::new(50)), Vec::new());
        wires(&rules, &mut room).node_lost(t(0), "s1", &mut fx);
        wires(&rules, &mut room).node_lost(t(700), "s2", &mut fx);
        wires(&rules, &mut room).node_lost(t(800), "s3", &mut fx);
        assert!(!room.1.is_active(STORM_ALARM), "the first loss left the window");
        wires(&rules, &mut room).node_lost(t(900), "s4", &mut fx);
        let storm = &room.1.alarms[STORM_ALARM];
        assert!(storm.text.contains("3 nodes lost within 10m") && storm.text.contains("s2, s3, s4"), "{}", storm.text);
        wires(&rules, &mut room).node_lost(t(950), "s5", &mut fx);
        assert!(room.1.alarms[STORM_ALARM].text.contains("4 nodes"), "it grows in place");
        assert_eq!(room.1.log.iter().filter(|l| l.text.starts_with("storm")).count(), 1, "one log line per storm");
        // It holds for event_hold after the last loss, then stays listed, unread.
        room.1.expire(t(950 + 899), &mut fx);
        assert!(room.1.is_active(STORM_ALARM));
        room.1.expire(t(950 + 900), &mut fx);
        assert!(!room.1.is_active(STORM_ALARM));
        assert_eq!(room.1.alarms[STORM_ALARM].cleared_at, Some(t(1850)));
    }

    #[test]
    fn a_pool_that_refuses_three_in_a_row_alarms_until_it_launches() {
        let (rules, mut room, mut fx) = (AlarmRules::default(), (Trips::default(), Journal::new(50)), Vec::new());
        for i in 0..2 {
            wires(&rules, &mut room).launch_refused(t(i), "p4d spot us-east-1a", "ICE", &mut fx);
        }
        assert!(room.1.alarms.is_empty());
        wires(&rules, &mut room).launch_refused(t(3), "p4d spot us-east-1a", "InsufficientInstanceCapacity", &mut fx);
        let id = "launch:p4d spot us-east-1a";
        assert!(room.1.alarms[id].text.contains("refused 3 launches in a row (last: InsufficientInstanceCapacity)"));
        wires(&rules, &mut room).launch_answered(t(9), "p4d spot us-east-1a", &mut fx);
        assert!(!room.1.is_active(id) && room.1.alarms.contains_key(id), "cleared, listed until read");
        // Refusals that stop (the room no longer asks that pool): it clears itself.
        for i in 10..13 {
            wires(&rules, &mut room).launch_refused(t(i), "p3 spot us-west-2c", "ICE", &mut fx);
        }
        room.1.expire(t(12 + 899), &mut fx);
        assert!(room.1.is_active("launch:p3 spot us-west-2c"));
        room.1.expire(t(12 + 900), &mut fx);
        assert!(!room.1.is_active("launch:p3 spot us-west-2c"));
    }

    #[test]
    fn five_failures_in_the_window_are_a_burst_and_zero_turns_a_rule_off() {
        let (rules, mut room, mut fx) = (AlarmRules::default(), (Trips::default(), Journal::new(50)), Vec::new());
        for i in 1..=5 {
            wires(&rules, &mut room).job_failed(t(i * 60), JobId(i as u64), &mut fx);
        }
        assert!(
            room.1.alarms[FAILURES_ALARM].text.starts_with("5 jobs failed within 10m00s (j1, j2, j3, j4, and 1 more)"),
            "{}",
            room.1.alarms[FAILURES_ALARM].text
        );
        let off = AlarmRules { failure_burst: 0, storm_nodes: 0, ..AlarmRules::default() };
        let mut quiet = (Trips::default(), Journal::new(50));
        for i in 1..=9 {
            wires(&off, &mut quiet).job_failed(t(i), JobId(i as u64), &mut fx);
            wires(&off, &mut quiet).node_lost(t(i), "n", &mut fx);
        }
        assert!(quiet.1.alarms.is_empty());
    }
}
