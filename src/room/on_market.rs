//! The room's handler for `Event::PriceTick`: a spot pool's new price,
//! charged from now on (the pool's nodes settled at the old one first),
//! noted when it moves by a tenth, and put to the spot watcher for the jobs
//! whose max price it may cross.
//!
//! An `impl Room`; the parts come through `Room`'s lenders.

use super::Room;
use super::journal::Severity;
use crate::domain::event::Effect;
use crate::domain::ids::PoolKey;
use crate::domain::text::clean;
use crate::domain::units::{At, MicrosPerHour};

impl Room {
    pub(super) fn on_price(&mut self, at: At, zone: &str, instance_type: &str, price: MicrosPerHour, effects: &mut Vec<Effect>) -> Result<(), String> {
        let key = PoolKey { zone: zone.to_string(), instance_type: instance_type.to_string() };
        let before = self.market.price(&key);
        if before != Some(price) {
            // Spot nodes of this pool were charged at the old price until now.
            self.settle_all(at);
        }
        self.market.observe(key.clone(), at, price)?;
        if let Some(before) = before
            && before.0 > 0
            && (price.0 - before.0).abs() * 10 >= before.0
        {
            self.journal.note(at, Severity::Info, format!("spot {} {before} → {price}", clean(&key.to_string())));
        }
        let jobs = self.fleet.spot_jobs(Some(&key), None);
        self.watch().judge(at, jobs, effects);
        Ok(())
    }
}
