//! Spend forecasting inside the `Room`: the hourly spend of every closed
//! charge period, a Holt-Winters forecast made once a day for the day ahead
//! (daily season), and an alarm when actual spend stays off that forecast
//! for several hours running. The forecast also projects the month's end.
//!
//! The model and the detector live in `cost::forecast`.

use std::collections::VecDeque;

use chrono::Timelike;

use serde::{Deserialize, Serialize};

use super::config::ForecastConfig;
use super::journal::{Journal, Severity};
use crate::cost::forecast::{Alarm, AnomalyDetector, forecast_spend};
use crate::cost::ledger::LedgerLine;
use crate::domain::event::Effect;
use crate::domain::units::{At, Micros};

const SEASON: usize = 24;
/// Four weeks of hours: enough for the model, bounded in the snapshot.
const KEEP_HOURS: usize = 24 * 28;
/// The model needs a few days before its forecast means anything.
const MIN_HOURS: usize = 3 * SEASON;
const ALARM: &str = "spend-anomaly";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendForecast {
    /// Hourly spend of closed periods, oldest first, and the hour the last one ended.
    pub hourly: VecDeque<Micros>,
    pub last_end: Option<At>,
    /// Made at the start of the current day: its hours, from `made_at`.
    pub day_ahead: Vec<Micros>,
    pub made_at: Option<At>,
    pub detector: Option<AnomalyDetector>,
}

impl SpendForecast {
    /// The forecast for the period that started at `start`, if one covers it.
    pub fn expected(&self, start: At) -> Option<Micros> {
        let made = self.made_at?;
        let k = (start - made).num_hours();
        (k >= 0).then(|| self.day_ahead.get(k as usize).copied()).flatten()
    }

    /// Feeds each closed hour's spend; forecasts at each day's start; checks
    /// the hour against the day's forecast.
    fn on_periods_closed(&mut self, config: &ForecastConfig, at: At, lines: &[LedgerLine], journal: &mut Journal, effects: &mut Vec<Effect>) {
        let mut hours: Vec<(At, At, Micros)> = Vec::new();
        for l in lines {
            match hours.last_mut() {
                Some((start, _, total)) if *start == l.start => *total += l.amount,
                _ => hours.push((l.start, l.end, l.amount)),
            }
        }
        for (start, end, spend) in hours {
            let expected = self.expected(start);
            self.hourly.push_back(spend);
            while self.hourly.len() > KEEP_HOURS {
                self.hourly.pop_front();
            }
            self.last_end = Some(end);
            if let Some(expected) = expected {
                self.check_spend(config, at, Hour { start, spend, expected }, journal, effects);
            }
            if end.hour() == 0 {
                self.forecast_day(end);
            }
        }
    }

    fn forecast_day(&mut self, from: At) {
        if self.hourly.len() < MIN_HOURS {
            return;
        }
        let history: Vec<Micros> = self.hourly.iter().copied().collect();
        if let Ok(day) = forecast_spend(&history, SEASON, SEASON) {
            self.day_ahead = day;
            self.made_at = Some(from);
        }
    }

    fn check_spend(&mut self, config: &ForecastConfig, at: At, hour: Hour, journal: &mut Journal, effects: &mut Vec<Effect>) {
        let Hour { start, spend: actual, expected } = hour;
        let detector = match &mut self.detector {
            Some(d) => d,
            None => match AnomalyDetector::new(config.threshold, config.periods) {
                Ok(d) => self.detector.insert(d),
                Err(_) => return,
            },
        };
        match detector.observe_spend(actual, expected) {
            Ok(Alarm::Raised { run }) => {
                let text = format!("spend off its forecast for {run} h: {actual} in the hour from {} against {expected} expected", start.format("%H:%M"));
                journal.raise(at, ALARM.to_string(), text, effects);
            }
            Ok(Alarm::Cleared { run }) => {
                journal.clear(at, ALARM, effects);
                journal.note(at, Severity::Info, format!("spend back on its forecast after {run} h"));
            }
            _ => {}
        }
    }

    /// Spend projected from now to the month's end: the day-ahead forecast,
    /// repeated by its daily shape; `None` until the model has a forecast.
    pub fn projected_rest_of_month(&self, now: At) -> Option<Micros> {
        let made = self.made_at?;
        if self.day_ahead.len() != SEASON {
            return None;
        }
        let end = crate::domain::units::start_of_next_month(now);
        let hours = (end - now).num_hours().max(0);
        let from = (now - made).num_hours().max(0);
        Some((from..from + hours).map(|k| self.day_ahead[k as usize % SEASON]).sum())
    }
}

/// One closed hour's spend against what the forecast expected of it.
struct Hour {
    start: At,
    spend: Micros,
    expected: Micros,
}

/// The parts the spend forecast touches when hours close.
pub struct SpendWatch<'a> {
    pub forecast: &'a mut SpendForecast,
    pub config: &'a ForecastConfig,
    pub journal: &'a mut Journal,
}

impl SpendWatch<'_> {
    /// The hours that closed (the ledger lines of each), fed to the model.
    pub fn on_periods_closed(&mut self, at: At, lines: &[LedgerLine], effects: &mut Vec<Effect>) {
        self.forecast.on_periods_closed(self.config, at, lines, self.journal, effects);
    }
}
