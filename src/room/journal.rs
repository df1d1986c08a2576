//! What happened, for people: the recent-events log, the active alarms,
//! the operator audit trail and the run's counters. Every part of the room
//! writes here; nothing here decides anything about jobs or money.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::domain::event::{Actor, Effect};
use crate::domain::text::clean;
use crate::domain::units::At;

/// Operator actions kept in the room (the event log keeps them all).
const AUDIT_KEPT: usize = 500;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Info,
    Warn,
    Alarm,
    Action,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub at: At,
    pub severity: Severity,
    pub text: String,
}

/// Who did what, from where, and when (operator actions), and whether the
/// room refused it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at: At,
    pub user: String,
    pub origin: String,
    pub what: String,
    /// Why the room refused the action; `None` when it was carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Cleared alarms nobody acknowledged, kept listed (the oldest go first).
const UNREAD_KEPT: usize = 100;

/// How loud an alarm is: critical pages (the engine itself, a budget, a
/// spot storm, a missed save), a warning waits for someone to look.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlarmSeverity {
    #[default]
    Warning,
    Critical,
}

impl AlarmSeverity {
    /// The severity of an alarm by its id's kind (the text before the first `:`).
    pub fn of(id: &str) -> AlarmSeverity {
        match alarm_kind(id) {
            "engine" | "budget" | "storm" | "save" => AlarmSeverity::Critical,
            _ => AlarmSeverity::Warning,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            AlarmSeverity::Warning => "warning",
            AlarmSeverity::Critical => "critical",
        }
    }
}

/// An alarm's kind: the part of its id before the first `:` (`wait`, `notice`, `budget`, …).
pub fn alarm_kind(id: &str) -> &str {
    id.split(':').next().unwrap_or("other")
}

/// An alarm's life: raised → (acknowledged) → cleared. A cleared alarm
/// that nobody acknowledged stays listed, "fired and cleared at T", until
/// someone does (a pager's missed calls); an acknowledged one leaves when
/// it clears.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alarm {
    pub raised_at: At,
    pub text: String,
    /// Who acknowledged it, if anyone; kept while the alarm is re-raised.
    #[serde(default)]
    pub acked: Option<Ack>,
    /// When its condition cleared; `None` while it is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared_at: Option<At>,
    /// How loud it is (set when raised; a budget's 80% is a warning, its
    /// limit and its block are critical).
    #[serde(default)]
    pub severity: AlarmSeverity,
    /// An alarm about an event (a storm, a missed save) rather than a
    /// standing condition clears itself at this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clears_at: Option<At>,
}

impl Alarm {
    /// Its condition holds (raised and not cleared).
    pub fn is_active(&self) -> bool {
        self.cleared_at.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    pub at: At,
    pub user: String,
}

/// Counters for the summary and the header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub events: u64,
    pub rejected: u64,
    pub submitted: u64,
    pub placements: u64,
    pub done: u64,
    pub failed: u64,
    pub notices: u64,
    pub nodes_lost: u64,
    pub operator_actions: u64,
    pub requeues: u64,
    pub lost_steps: u64,
    pub checkpoints: u64,
    pub checkpoint_bytes: u64,
    /// Interruption saves that finished before the instance went away, and those that did not.
    pub notice_saves_in_time: u64,
    pub notice_saves_missed: u64,
    /// Queue waits of placements (sum and count, seconds).
    pub wait_secs_sum: i64,
    pub wait_count: u64,
    /// Job completion times (submission to done) of finished jobs, seconds.
    #[serde(default)]
    pub jct_secs_sum: i64,
    #[serde(default)]
    pub preemptions_by_scheduler: u64,
    #[serde(default)]
    pub idle_reclaims: u64,
    #[serde(default)]
    pub escalations: u64,
    /// Jobs saved and moved because the market passed their max price.
    #[serde(default)]
    pub price_moves: u64,
    /// Placements that left the pool a job was interrupted in or moved from.
    #[serde(default)]
    pub migrations: u64,
}

impl Stats {
    /// Share of notice saves that did not finish before the instance went
    /// (with one miss and one success assumed, so no history reads as 50%).
    pub fn notice_miss_share(&self) -> f64 {
        let (ok, missed) = (self.notice_saves_in_time, self.notice_saves_missed);
        (missed as f64 + 1.0) / ((ok + missed) as f64 + 2.0)
    }
}

fn default_log_capacity() -> usize {
    200
}

/// The room's journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    /// Operator actions, newest last (the event log keeps them all).
    #[serde(default)]
    pub audit: VecDeque<AuditEntry>,
    pub alarms: BTreeMap<String, Alarm>,
    pub log: VecDeque<LogLine>,
    pub stats: Stats,
    /// Lines of the recent-events log kept (`RoomConfig::log_capacity`).
    #[serde(default = "default_log_capacity")]
    pub log_capacity: usize,
}

impl Journal {
    pub fn new(log_capacity: usize) -> Journal {
        Journal { audit: VecDeque::new(), alarms: BTreeMap::new(), log: VecDeque::new(), stats: Stats::default(), log_capacity }
    }

    pub fn note(&mut self, at: At, severity: Severity, text: String) {
        if self.log.len() >= self.log_capacity.max(1) {
            self.log.pop_front();
        }
        self.log.push_back(LogLine { at, severity, text });
    }

    /// Raises (or re-raises, keeping who acknowledged it) an alarm, and logs
    /// it. An alarm that had cleared unread fires again as a new one.
    pub fn raise(&mut self, at: At, id: String, text: String, effects: &mut Vec<Effect>) {
        let severity = AlarmSeverity::of(&id);
        self.raise_with(at, id, text, severity, None, effects);
    }

    /// Raises an alarm quieter (or louder) than its kind's severity.
    pub fn raise_as(&mut self, at: At, id: String, text: String, severity: AlarmSeverity, effects: &mut Vec<Effect>) {
        self.raise_with(at, id, text, severity, None, effects);
    }

    /// Raises an alarm about an event, which clears itself at `clears_at`
    /// (and stays listed unread after that until acknowledged).
    pub fn raise_until(&mut self, at: At, id: String, text: String, clears_at: Option<At>, effects: &mut Vec<Effect>) {
        let severity = AlarmSeverity::of(&id);
        self.raise_with(at, id, text, severity, clears_at, effects);
    }

    fn raise_with(&mut self, at: At, id: String, text: String, severity: AlarmSeverity, clears_at: Option<At>, effects: &mut Vec<Effect>) {
        self.note(at, Severity::Alarm, text.clone());
        let acked = self.alarms.get(&id).filter(|a| a.is_active()).and_then(|a| a.acked.clone());
        self.alarms.insert(id.clone(), Alarm { raised_at: at, text: text.clone(), acked, cleared_at: None, severity, clears_at });
        effects.push(Effect::AlarmRaised { id, text });
    }

    /// An alarm that grows in place while its cause goes on (a backlog, a
    /// storm): raised once (one log line), then its text (and the time it
    /// clears itself, for an event's) updated without a line each time.
    pub fn raise_or_update(&mut self, at: At, id: &str, text: String, clears_at: Option<At>, effects: &mut Vec<Effect>) {
        match self.alarms.get_mut(id).filter(|a| a.is_active()) {
            Some(alarm) => {
                alarm.text = text;
                alarm.clears_at = clears_at;
            }
            None => self.raise_until(at, id.to_string(), text, clears_at, effects),
        }
    }

    /// The alarm is active (raised, its condition not cleared).
    pub fn is_active(&self, id: &str) -> bool {
        self.alarms.get(id).is_some_and(Alarm::is_active)
    }

    /// The alarm's condition cleared: an acknowledged alarm leaves, one
    /// nobody acknowledged stays listed as cleared until someone does.
    pub fn clear(&mut self, at: At, id: &str, effects: &mut Vec<Effect>) {
        let Some(alarm) = self.alarms.get_mut(id).filter(|a| a.is_active()) else {
            return;
        };
        if alarm.acked.is_some() {
            self.alarms.remove(id);
        } else {
            alarm.cleared_at = Some(at);
            alarm.clears_at = None;
            self.forget_oldest_unread();
        }
        effects.push(Effect::AlarmCleared { id: id.to_string() });
    }

    /// Event alarms whose time is up clear themselves.
    pub fn expire(&mut self, at: At, effects: &mut Vec<Effect>) {
        let due: Vec<String> = self.alarms.iter().filter(|(_, a)| a.is_active() && a.clears_at.is_some_and(|t| t <= at)).map(|(id, _)| id.clone()).collect();
        for id in due {
            self.clear(at, &id, effects);
        }
    }

    fn forget_oldest_unread(&mut self) {
        let unread = self.alarms.values().filter(|a| !a.is_active()).count();
        if unread <= UNREAD_KEPT {
            return;
        }
        let oldest = self.alarms.iter().filter(|(_, a)| !a.is_active()).min_by_key(|(id, a)| (a.cleared_at, (*id).clone())).map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            self.alarms.remove(&id);
        }
    }

    pub fn audit_action(&mut self, at: At, actor: &Actor, what: &str) {
        self.audit_entry(AuditEntry { at, user: clean(&actor.user), origin: clean(&actor.origin), what: what.to_string(), refused: None });
    }

    /// An action the room refused: on screen beside the ones it carried out,
    /// so an operator sees who tried what and why it did not happen.
    pub fn audit_refusal(&mut self, at: At, actor: &Actor, what: &str, why: &str) {
        self.audit_entry(AuditEntry { at, user: clean(&actor.user), origin: clean(&actor.origin), what: clean(what), refused: Some(clean(why)) });
    }

    fn audit_entry(&mut self, entry: AuditEntry) {
        if self.audit.len() >= AUDIT_KEPT {
            self.audit.pop_front();
        }
        self.audit.push_back(entry);
    }

    /// An event the room refused: counted, logged, and said back to its source.
    pub fn reject(&mut self, at: At, reason: String) -> Vec<Effect> {
        self.stats.rejected += 1;
        let reason = clean(&reason);
        self.note(at, Severity::Warn, format!("rejected: {reason}"));
        vec![Effect::Rejected { reason }]
    }
}
