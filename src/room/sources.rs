//! Live sources as the room sees them: which answered and which failed, the
//! GPUs a failed source leaves stale, and health figures (temperature, power,
//! clocks, processes) per GPU. A failed source raises one alarm, named after
//! it, that clears when it answers again.
//!
//! Owns the room's `sources` and the `stale` and `health` fields of GPUs; touches
//! nothing the scheduler or the cost engine decide on (a stale GPU keeps
//! its allocations: its jobs are not known to have stopped).

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::fleet::Fleet;
use super::journal::{Journal, Severity};
use crate::domain::event::{Effect, GpuHealth};
use crate::domain::ids::GpuRef;
use crate::domain::text::clean;
use crate::domain::units::At;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceState {
    pub ok: bool,
    pub detail: String,
    /// Since when it has been in this state.
    pub since: At,
}

/// The alarm a failed source raises.
pub fn source_alarm_id(source: &str) -> String {
    format!("source:{source}")
}

/// A status report, named: where the status goes and what it says.
pub struct Status<'a> {
    pub source: &'a str,
    pub ok: bool,
    pub detail: &'a str,
    pub stale: &'a [GpuRef],
}

pub fn on_gpu_health(fleet: &mut Fleet, readings: &[GpuHealth]) -> Result<(), String> {
    let mut unknown = 0usize;
    for reading in readings {
        match fleet.gpu_mut(reading.gpu) {
            Some(gpu) => gpu.health = Some(reading.clone()),
            None => unknown += 1,
        }
    }
    if unknown > 0 {
        return Err(format!("gpu health: {unknown} readings for GPUs not in the cluster"));
    }
    Ok(())
}

/// Records a source's status. Returns, for a failed Slurm poll, why it failed
/// (the Slurm mirror is then kept but marked stale).
pub fn on_source_status(
    sources: &mut BTreeMap<String, SourceState>,
    fleet: &mut Fleet,
    journal: &mut Journal,
    at: At,
    status: Status<'_>,
    effects: &mut Vec<Effect>,
) -> Result<Option<String>, String> {
    let Status { source, ok, detail, stale } = status;
    let name = clean(source).trim().to_string();
    if name.is_empty() {
        return Err("source status without a source name".to_string());
    }
    let detail = clean(detail);
    for gpu in stale {
        if let Some(gpu) = fleet.gpu_mut(*gpu) {
            gpu.stale = true;
        }
    }
    let changed = sources.get(&name).is_none_or(|s| s.ok != ok);
    let since = if changed { at } else { sources.get(&name).map(|s| s.since).unwrap_or(at) };
    sources.insert(name.clone(), SourceState { ok, detail: detail.clone(), since });
    let slurm_down = (name == "slurm" && !ok).then(|| detail.clone());
    let id = source_alarm_id(&name);
    match (ok, changed) {
        (false, true) => {
            let gpus = if stale.is_empty() { String::new() } else { format!(" ({} GPUs stale)", stale.len()) };
            journal.raise(at, id, format!("{name}: {detail}{gpus}"), effects);
        }
        (true, true) => {
            journal.clear(at, &id, effects);
            journal.note(at, Severity::Info, format!("{name}: {detail}"));
        }
        _ => {}
    }
    Ok(slurm_down)
}

#[cfg(test)]
mod tests {
    use crate::domain::cluster::BillingMode;
    use crate::domain::event::{Effect, Event, GpuHealth, GpuSample};
    use crate::domain::ids::{GpuRef, NodeId};
    use crate::domain::testkit::{node_spec, t};
    use crate::domain::units::Mib;
    use crate::room::Room;

    fn room_with_node() -> Room {
        let mut room = Room::default();
        room.apply(t(0), &Event::NodeUp { spec: node_spec(0, BillingMode::OnDemand, 4) });
        room
    }

    fn gpu(index: u8) -> GpuRef {
        GpuRef { node: NodeId(0), index }
    }

    #[test]
    fn a_failed_source_raises_one_alarm_marks_its_gpus_stale_and_clears_on_recovery() {
        let mut room = room_with_node();
        room.apply(t(1), &Event::Telemetry { gpus: vec![GpuSample(gpu(0), 50.0, Mib(100))], progress: vec![] });
        let down = Event::SourceStatus { source: "dcgm http://n0:9400/metrics".into(), ok: false, detail: "timed out".into(), stale: vec![gpu(0), gpu(1)] };
        let effects = room.apply(t(2), &down);
        assert!(effects.iter().any(|e| matches!(e, Effect::AlarmRaised { id, .. } if id == "source:dcgm http://n0:9400/metrics")));
        // The same failure again is not a new alarm.
        let again = room.apply(t(3), &down);
        assert!(!again.iter().any(|e| matches!(e, Effect::AlarmRaised { .. })));
        let view = room.view();
        let gpus = &view.nodes[0].gpus;
        assert!(gpus[0].stale && gpus[1].stale && !gpus[2].stale);
        assert_eq!(gpus[0].util, Some(50.0), "the last figures are kept, marked stale");
        assert_eq!(view.sources.len(), 1);
        assert!(!view.sources[0].ok);
        assert_eq!(view.sources[0].since, t(2));
        assert_eq!(view.cluster.gpus_stale, 2);

        room.apply(t(4), &Event::Telemetry { gpus: vec![GpuSample(gpu(0), 40.0, Mib(100))], progress: vec![] });
        assert!(!room.view().nodes[0].gpus[0].stale, "a fresh sample is not stale");
        let up = Event::SourceStatus { source: "dcgm http://n0:9400/metrics".into(), ok: true, detail: "4 GPUs".into(), stale: vec![] };
        let effects = room.apply(t(5), &up);
        assert!(effects.iter().any(|e| matches!(e, Effect::AlarmCleared { .. })));
        assert!(room.view().sources[0].ok);
    }

    #[test]
    fn health_figures_reach_the_view_and_unknown_gpus_are_refused() {
        let mut room = room_with_node();
        let h = GpuHealth {
            gpu: gpu(2),
            temp_c: Some(61.0),
            power_w: Some(312.5),
            sm_clock_mhz: Some(1410),
            mem_clock_mhz: None,
            processes: Some(1),
            mig_instances: 0,
        };
        assert!(room.apply(t(1), &Event::GpuHealth { readings: vec![h.clone()] }).is_empty());
        assert_eq!(room.view().nodes[0].gpus[2].health, Some(h.clone()));
        let stray = GpuHealth { gpu: GpuRef { node: NodeId(9), index: 0 }, ..h };
        let effects = room.apply(t(2), &Event::GpuHealth { readings: vec![stray] });
        assert!(matches!(&effects[..], [Effect::Rejected { .. }]));
        let nameless = Event::SourceStatus { source: " ".into(), ok: false, detail: "x".into(), stale: vec![] };
        assert!(matches!(&room.apply(t(3), &nameless)[..], [Effect::Rejected { .. }]));
    }
}
