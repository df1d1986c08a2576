//! Spend forecasting inside the `Room`: the hourly spend of every closed
//! charge period, a Holt-Winters forecast made once a day for the day ahead
//! (daily season), and an alarm when actual spend stays off that forecast
//! for several hours running. The forecast also projects the month's end.
//!
//! The model and the detector live in `cost::forecast`.

use std::collections::VecDeque;

use chrono::Timelike;

use serde::{Deserialize, Serialize};

use crate::domain::event::Effect;
use super::{Room, Severity};
use crate::domain::units::{At, Micros};
use crate::cost::forecast::{Alarm, AnomalyDetector, forecast_spend};
use crate::cost::ledger::LedgerLine;

const SEASON: usize = 24;
/// Four weeks of hours: enough for the model, bounded in the snapshot.
const KEEP_HOURS: usize = 24 * 28;
/// The model needs a few days before its forecast means anything.
const MIN_HOURS: usize = 3 * SEASON;
const ALARM: &str = "spend-anomaly";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForecastConfig {
    /// Relative deviation from the forecast that counts as off.
    pub threshold: f64,
    /// Consecutive hours off before the alarm.
    pub periods: u32,
}

impl Default for ForecastConfig {
    fn default() -> Self {
        ForecastConfig { threshold: 0.25, periods: 3 }
    }
}

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
}

impl Room {
    /// Feeds each closed hour's spend; forecasts at each day's start; checks
    /// the hour against the day's forecast.
    pub(crate) fn on_periods_closed(&mut self, at: At, lines: &[LedgerLine], effects: &mut Vec<Effect>) {
        let mut hours: Vec<(At, At, Micros)> = Vec::new();
        for l in lines {
            match hours.last_mut() {
                Some((start, _, total)) if *start == l.start => *total += l.amount,
                _ => hours.push((l.start, l.end, l.amount)),
            }
        }
        for (start, end, spend) in hours {
            let expected = self.forecast.expected(start);
            self.forecast.hourly.push_back(spend);
            while self.forecast.hourly.len() > KEEP_HOURS {
                self.forecast.hourly.pop_front();
            }
            self.forecast.last_end = Some(end);
            if let Some(expected) = expected {
                self.check_spend(at, start, spend, expected, effects);
            }
            if end.hour() == 0 {
                self.forecast_day(end);
            }
        }
    }

    fn forecast_day(&mut self, from: At) {
        if self.forecast.hourly.len() < MIN_HOURS {
            return;
        }
        let history: Vec<Micros> = self.forecast.hourly.iter().copied().collect();
        if let Ok(day) = forecast_spend(&history, SEASON, SEASON) {
            self.forecast.day_ahead = day;
            self.forecast.made_at = Some(from);
        }
    }

    fn check_spend(&mut self, at: At, start: At, actual: Micros, expected: Micros, effects: &mut Vec<Effect>) {
        let config = &self.config.forecast;
        let detector = match &mut self.forecast.detector {
            Some(d) => d,
            None => match AnomalyDetector::new(config.threshold, config.periods) {
                Ok(d) => self.forecast.detector.insert(d),
                Err(_) => return,
            },
        };
        match detector.observe_spend(actual, expected) {
            Ok(Alarm::Raised { run }) => {
                let text = format!(
                    "spend off its forecast for {run} h: {actual} in the hour from {} against {expected} expected",
                    start.format("%H:%M")
                );
                self.raise(at, ALARM.to_string(), text, effects);
            }
            Ok(Alarm::Cleared { run }) => {
                self.clear(ALARM, effects);
                self.note(at, Severity::Info, format!("spend back on its forecast after {run} h"));
            }
            _ => {}
        }
    }

    /// Spend projected from now to the month's end: the day-ahead forecast,
    /// repeated by its daily shape; `None` until the model has a forecast.
    pub fn projected_rest_of_month(&self, now: At) -> Option<Micros> {
        let made = self.forecast.made_at?;
        if self.forecast.day_ahead.len() != SEASON {
            return None;
        }
        let end = crate::domain::units::start_of_next_month(now);
        let hours = (end - now).num_hours().max(0);
        let from = (now - made).num_hours().max(0);
        Some((from..from + hours).map(|k| self.forecast.day_ahead[k as usize % SEASON]).sum())
    }
}
