//! Units that carry their meaning in the type: money in integer micro-units,
//! prices per hour, GPU memory in MiB, durations in whole seconds.
//!
//! Money is never a float here. Floats appear only where a value is a ratio
//! or a statistic (utilization, hazard), never where it is an amount owed.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

use serde::{Deserialize, Serialize};

/// A point in time. The core never reads a clock: every `At` comes in with an event.
pub type At = chrono::DateTime<chrono::Utc>;

/// An amount of money in millionths of the currency unit (1 USD = 1_000_000).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Micros(pub i64);

/// A price per hour, in micro-units of currency. Accrual divides it down to the
/// millisecond with an exact remainder (see `cost::accrual`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MicrosPerHour(pub i64);

/// GPU or host memory in mebibytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Mib(pub u32);

/// A duration in whole seconds, for configuration and events (chrono's
/// `TimeDelta` is used for arithmetic but is not serializable).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Secs(pub i64);

/// The longest duration the core reasons about (a century): beyond it,
/// durations are clamped so that date arithmetic can never overflow.
pub const HORIZON_SECS: i64 = 100 * 366 * 86_400;

impl Secs {
    /// As a `TimeDelta`, clamped to ±`HORIZON_SECS` so that adding it to a
    /// date of this era cannot overflow (input may carry any number).
    pub fn delta(self) -> chrono::TimeDelta {
        chrono::TimeDelta::seconds(self.0.clamp(-HORIZON_SECS, HORIZON_SECS))
    }

    /// Whole seconds from a float, `None` if not finite or past the horizon.
    pub fn from_f64(secs: f64) -> Option<Secs> {
        (secs.is_finite() && secs.abs() <= HORIZON_SECS as f64).then(|| Secs(secs.ceil() as i64))
    }
}

impl Micros {
    /// No money.
    pub const ZERO: Micros = Micros(0);

    /// Dollars as a float, for display and ratios only.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// Parses a decimal amount such as `"1.067100"` or `"7.2"` exactly.
    /// More than six decimals is an error rather than a silent rounding.
    pub fn parse_decimal(text: &str) -> Result<Micros, MoneyParseError> {
        let err = || MoneyParseError(text.to_string());
        let s = text.trim();
        let (negative, digits) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() && frac.is_empty() {
            return Err(err());
        }
        if !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let frac_trimmed = frac.trim_end_matches('0');
        if frac_trimmed.len() > 6 {
            return Err(err());
        }
        let whole_value: i64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| err())? };
        let mut frac_value: i64 = 0;
        for (i, b) in frac_trimmed.bytes().enumerate() {
            frac_value += i64::from(b - b'0') * 10i64.pow(5 - i as u32);
        }
        let value = whole_value.checked_mul(1_000_000).and_then(|w| w.checked_add(frac_value)).ok_or_else(err)?;
        Ok(Micros(if negative { -value } else { value }))
    }
}

impl MicrosPerHour {
    /// Dollars an hour as a float, for display and ratios only.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// The hourly price split evenly over `gpus` GPUs (rounded down; 0 counts as 1).
    pub fn per_gpu(self, gpus: u32) -> MicrosPerHour {
        MicrosPerHour(self.0 / i64::from(gpus.max(1)))
    }
}

/// A price text that is not a plain non-negative-or-negative decimal with at most six places.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a decimal amount with at most 6 decimals: {0:?}")]
pub struct MoneyParseError(pub String);

impl Add for Micros {
    type Output = Micros;
    fn add(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_add(rhs.0))
    }
}
impl AddAssign for Micros {
    fn add_assign(&mut self, rhs: Micros) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}
impl Sub for Micros {
    type Output = Micros;
    fn sub(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_sub(rhs.0))
    }
}
impl std::iter::Sum for Micros {
    fn sum<I: Iterator<Item = Micros>>(iter: I) -> Micros {
        iter.fold(Micros::ZERO, |a, b| a + b)
    }
}

impl fmt::Display for Micros {
    /// `$1,234.56`: cents are enough on a screen; the ledger keeps micros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cents = (self.0 as i128 + if self.0 >= 0 { 5_000 } else { -5_000 }) / 10_000;
        let sign = if cents < 0 { "-" } else { "" };
        let cents = cents.unsigned_abs();
        let dollars = cents / 100;
        let mut grouped = String::new();
        let digits = dollars.to_string();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        write!(f, "{sign}${grouped}.{:02}", cents % 100)
    }
}

impl fmt::Display for MicrosPerHour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/h", Micros(self.0))
    }
}

impl fmt::Display for Mib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1024 { write!(f, "{:.1}G", f64::from(self.0) / 1024.0) } else { write!(f, "{}M", self.0) }
    }
}

impl fmt::Display for Secs {
    /// Compact human duration: `45s`, `12m`, `3h07m`, `2d04h`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.max(0);
        match s {
            0..60 => write!(f, "{s}s"),
            60..3600 => write!(f, "{}m{:02}s", s / 60, s % 60),
            3600..86400 => write!(f, "{}h{:02}m", s / 3600, (s % 3600) / 60),
            // Past a hundred days an estimate says "not in any useful time".
            8_640_000.. => write!(f, ">99d"),
            _ => write!(f, "{}d{:02}h", s / 86400, (s % 86400) / 3600),
        }
    }
}

/// The next whole hour after `at` (a charge period's end).
pub fn start_of_next_hour(at: At) -> At {
    let secs = at.timestamp().div_euclid(3600) * 3600 + 3600;
    chrono::DateTime::from_timestamp(secs, 0).unwrap_or(at)
}

/// The first instant of the month after the one `at` is in (UTC): where a
/// monthly budget and billing period end.
pub fn start_of_next_month(at: At) -> At {
    use chrono::{Datelike, TimeZone};
    let (year, month) = if at.month() == 12 { (at.year() + 1, 1) } else { (at.year(), at.month() + 1) };
    chrono::Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0).single().unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_aws_price_texts_exactly() {
        assert_eq!(Micros::parse_decimal("1.067100"), Ok(Micros(1_067_100)));
        assert_eq!(
            (Secs(100 * 86_400).to_string(), Secs(i64::MAX).to_string(), Secs(99 * 86_400).to_string()),
            (">99d".into(), ">99d".into(), "99d00h".into())
        );
        assert_eq!(Micros::parse_decimal("7.2"), Ok(Micros(7_200_000)));
        assert_eq!(Micros::parse_decimal("0.00001"), Ok(Micros(10)));
        assert_eq!(Micros::parse_decimal("24"), Ok(Micros(24_000_000)));
        assert_eq!(Micros::parse_decimal(".5"), Ok(Micros(500_000)));
        assert_eq!(Micros::parse_decimal("-0.25"), Ok(Micros(-250_000)));
    }

    #[test]
    fn rejects_what_is_not_an_amount() {
        for bad in ["", ".", "abc", "1.2.3", "1e3", "NaN", "0.0000001", "1,5", "99999999999999999"] {
            assert!(Micros::parse_decimal(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn displays_money_with_grouping_and_cents() {
        assert_eq!(Micros(1_234_567_891).to_string(), "$1,234.57");
        assert_eq!(Micros(0).to_string(), "$0.00");
        assert_eq!(Micros(-2_500_000).to_string(), "-$2.50");
        assert_eq!(MicrosPerHour(24_480_000).to_string(), "$24.48/h");
    }

    #[test]
    fn durations_never_overflow_date_arithmetic() {
        let at = chrono::DateTime::parse_from_rfc3339("2020-01-06T00:00:00Z").unwrap().to_utc();
        let far = at + Secs(i64::MAX).delta();
        assert!(far > at);
        assert!(at + Secs(i64::MIN).delta() < at);
        assert_eq!(Secs::from_f64(f64::INFINITY), None);
        assert_eq!(Secs::from_f64(f64::NAN), None);
        assert_eq!(Secs::from_f64(1e30), None);
        assert_eq!(Secs::from_f64(12.2), Some(Secs(13)));
    }

    #[test]
    fn displays_durations_compactly() {
        assert_eq!(Secs(45).to_string(), "45s");
        assert_eq!(Secs(125).to_string(), "2m05s");
        assert_eq!(Secs(3 * 3600 + 7 * 60).to_string(), "3h07m");
        assert_eq!(Secs(2 * 86400 + 4 * 3600).to_string(), "2d04h");
    }
}
