//! Exact division of a price over time and over shares.

use serde::{Deserialize, Serialize};

use crate::domain::units::{Micros, MicrosPerHour};

const MS_PER_HOUR: i128 = 3_600_000;

/// Turns a price per hour into whole micro-units over successive intervals,
/// carrying the sub-micro remainder so that no fraction is ever lost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accrual {
    /// Remainder in micro-units × milliseconds per hour × parts (always below one micro-unit).
    carry: i64,
}

impl Accrual {
    pub fn accrue(&mut self, rate: MicrosPerHour, millis: i64) -> Micros {
        self.accrue_share(rate, millis, 1)
    }

    /// Accrues one of `parts` equal shares of `rate` (one GPU of an instance),
    /// with its own remainder, so no share is favoured by rounding.
    pub fn accrue_share(&mut self, rate: MicrosPerHour, millis: i64, parts: u32) -> Micros {
        self.accrue_fraction(rate, millis, 1, u64::from(parts.max(1)))
    }

    /// Accrues the fraction `num / den` of `rate` (a MIG slice's share of its
    /// instance), with its own remainder.
    pub fn accrue_fraction(&mut self, rate: MicrosPerHour, millis: i64, num: u64, den: u64) -> Micros {
        if rate.0 <= 0 || millis <= 0 || num == 0 {
            return Micros::ZERO;
        }
        let divisor = MS_PER_HOUR * i128::from(den.max(1));
        let numerator = i128::from(rate.0) * i128::from(millis) * i128::from(num) + i128::from(self.carry);
        self.carry = (numerator % divisor) as i64;
        Micros((numerator / divisor) as i64)
    }
}

/// Splits `total` in proportion to `weights` so that the parts sum to `total`
/// exactly (largest remainder; ties go to the earlier weight). All-zero
/// weights give all-zero parts except that nothing can be lost: the whole goes
/// to the last part.
pub fn split_exact(total: i64, weights: &[u64]) -> Vec<i64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let sum: u128 = weights.iter().map(|w| u128::from(*w)).sum();
    if sum == 0 {
        let mut parts = vec![0; weights.len()];
        *parts.last_mut().expect("not empty") = total;
        return parts;
    }
    let magnitude = u128::from(total.unsigned_abs());
    let mut parts: Vec<u128> = Vec::with_capacity(weights.len());
    let mut remainders: Vec<(u128, usize)> = Vec::with_capacity(weights.len());
    for (i, w) in weights.iter().enumerate() {
        let exact = magnitude * u128::from(*w);
        parts.push(exact / sum);
        remainders.push((exact % sum, i));
    }
    let handed_out: u128 = parts.iter().sum();
    let mut left = magnitude - handed_out;
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in remainders {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    let sign = if total < 0 { -1 } else { 1 };
    parts.into_iter().map(|p| sign * p as i64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accrual_over_many_small_intervals_equals_one_large_one() {
        // p3.2xlarge spot at $0.9183/h, accrued every 7 ms for an hour.
        let rate = MicrosPerHour(918_300);
        let mut step = Accrual::default();
        let mut total = Micros::ZERO;
        for _ in 0..(3_600_000 / 7) {
            total += step.accrue(rate, 7);
        }
        total += step.accrue(rate, 3_600_000 % 7);
        assert_eq!(total, Micros(918_300));
    }

    #[test]
    fn equal_shares_accrue_alike_whatever_the_rounding() {
        // $7.0/h over 3 GPUs does not divide evenly; each share keeps its own remainder.
        let rate = MicrosPerHour(7_000_000);
        let mut shares = [Accrual::default(), Accrual::default(), Accrual::default()];
        let mut totals = [0i64; 3];
        for _ in 0..1000 {
            for (share, total) in shares.iter_mut().zip(totals.iter_mut()) {
                *total += share.accrue_share(rate, 3_607, 3).0;
            }
        }
        let exact = 7_000_000i128 * 3_607_000 / (3_600_000 * 3);
        assert!(totals.iter().all(|t| i128::from(*t) == exact), "{totals:?} vs {exact}");
    }

    #[test]
    fn split_is_exact_and_proportional() {
        assert_eq!(split_exact(100, &[1, 1, 1]), vec![34, 33, 33]);
        assert_eq!(split_exact(10, &[3, 1]), vec![8, 2]); // 7.5 / 2.5: tie to the first
        assert_eq!(split_exact(-7, &[1, 1]), vec![-4, -3]);
        assert_eq!(split_exact(5, &[0, 0]), vec![0, 5]);
        assert_eq!(split_exact(0, &[4, 4]), vec![0, 0]);
        let parts = split_exact(1_000_003, &[16_384, 4_000, 2_500, 0, 9_884]);
        assert_eq!(parts.iter().sum::<i64>(), 1_000_003);
    }
}
