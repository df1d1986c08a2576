//! Screenshots of a Slurm site's console, drawn by the code itself from a
//! room fed the way the live engine feeds it: a ParallelCluster-like
//! cluster's Slurm snapshots, dcgm-exporter readings and spot prices go
//! through `live::Translator` into `Room::apply`, hour after hour, and the
//! console is drawn from the resulting `View`.
//!
//! The site: partition `train` of two static on-demand p4d.24xlarge nodes,
//! partition `spot` of three dynamic g5.12xlarge spot nodes (one drained by
//! `gpuroom agent` for a spot notice, one powered down by Slurm), accounts
//! vision, nlp and speech with monthly budgets, control mode.
//!
//! `TUI_SHOTS=screenshots cargo test --release --test slurm_site_screens -- --ignored`
//! writes the SVGs (then `rsvg-convert` makes the PNGs). The smoke test
//! (not ignored) checks the same room's view, so the pictures cannot rot.

use gpuroom::domain::event::{Effect, Event, TenantSpec};
use gpuroom::domain::ids::TenantId;
use gpuroom::domain::slurm::{SlurmJob, SlurmMode, SlurmNode, SlurmPartition, SlurmSnapshot, SlurmState};
use gpuroom::domain::spot_drain;
use gpuroom::domain::units::{At, Mib, Micros, MicrosPerHour};
use gpuroom::live::catalogue::{Catalogue, NodeDecl};
use gpuroom::live::translate::Translator;
use gpuroom::room::{Room, RoomConfig, View};
use gpuroom::sources::report::{GpuReading, PricePoint, Report};
use gpuroom::tui::{App, DrawContext, PaneId};

fn start() -> At {
    chrono::DateTime::parse_from_rfc3339("2026-12-04T08:00:00Z").unwrap().with_timezone(&chrono::Utc)
}

fn node(name: &str, partition: &str, state: &str, gpus: u32, reason: &str) -> SlurmNode {
    SlurmNode {
        name: name.into(),
        state: state.into(),
        cpus: 96,
        gpus,
        gpu_type: Some("a100".into()),
        partitions: vec![partition.into()],
        reason: reason.into(),
        ..Default::default()
    }
}

fn job(id: u64, name: &str, account: &str, partition: &str, on: &[(&str, &[u32])], comment: &str, started: At) -> SlurmJob {
    let gpus = on.iter().map(|(_, idx)| idx.len() as u32).sum();
    SlurmJob {
        id,
        name: name.into(),
        user: format!("{account}-ci"),
        account: account.into(),
        partition: partition.into(),
        state: SlurmState::Running,
        reason: "None".into(),
        gpus,
        nodes: on.iter().map(|(n, _)| n.to_string()).collect(),
        gpu_idx: on.iter().map(|(n, idx)| (n.to_string(), idx.to_vec())).collect(),
        submitted: Some(started - chrono::TimeDelta::minutes(9)),
        started: Some(started),
        comment: comment.into(),
        ..Default::default()
    }
}

fn waiting(id: u64, name: &str, account: &str, gpus: u32, since: At) -> SlurmJob {
    SlurmJob {
        id,
        name: name.into(),
        user: format!("{account}-ci"),
        account: account.into(),
        partition: "train".into(),
        state: SlurmState::Pending,
        reason: "Resources".into(),
        gpus,
        submitted: Some(since),
        ..Default::default()
    }
}

/// When `gpuroom agent` on spot-dy-g5-2 drains it, and when EC2 takes it.
const DRAINED_AT: i64 = 11 * 60 + 50;
const RECLAIMED_AT: i64 = 11 * 60 + 52;

/// The cluster as Slurm reports it `minutes` into the day.
fn snapshot(minutes: i64) -> SlurmSnapshot {
    let t0 = start();
    let hour = minutes / 60;
    let drain = spot_drain::reason("terminate", Some(t0 + chrono::TimeDelta::minutes(RECLAIMED_AT)));
    let spot2 = if minutes >= DRAINED_AT { ("mixed+drain", drain.as_str()) } else { ("mixed", "") };
    let nodes = vec![
        node("train-st-p4d-1", "train", "mixed", 8, ""),
        node("train-st-p4d-2", "train", "allocated", 8, ""),
        node("spot-dy-g5-1", "spot", "mixed", 4, ""),
        node("spot-dy-g5-2", "spot", spot2.0, 4, spot2.1),
        node("spot-dy-g5-3", "spot", "idle+cloud+powered_down", 4, ""),
    ];
    let mut jobs = vec![
        job(
            4101,
            "llama-70b-sft",
            "nlp",
            "train",
            &[("train-st-p4d-2", &[0, 1, 2, 3, 4, 5, 6, 7]), ("train-st-p4d-1", &[0, 1, 2, 3])],
            "project=assistant,env=prod,model=llama-70b",
            t0,
        ),
        job(4102, "vit-h-pretrain", "vision", "train", &[("train-st-p4d-1", &[4, 5])], "project=detr,model=vit-h", t0),
        // whisper-eval saves when asked (saved=EPOCH in its comment, a few minutes ago); detr-sweep-3 never does.
        job(
            4107,
            "whisper-eval",
            "speech",
            "spot",
            &[("spot-dy-g5-1", &[0])],
            &format!("project=asr,env=dev,model=whisper-l,saved={}", (t0 + chrono::TimeDelta::minutes(minutes - minutes % 5)).timestamp()),
            t0,
        ),
        job(4108, "detr-sweep-3", "vision", "spot", &[("spot-dy-g5-1", &[2, 3])], "project=detr,model=detr-r101", t0),
    ];
    if minutes <= DRAINED_AT + 10 {
        jobs.push(job(4109, "clip-finetune", "vision", "spot", &[("spot-dy-g5-2", &[0, 1, 2, 3])], "project=clip,model=clip-l", t0));
    } else {
        let mut requeued = waiting(4109, "clip-finetune", "vision", 4, t0);
        requeued.restarts = 1;
        jobs.push(requeued);
    }
    jobs.push(waiting(4120, "rlhf-reward", "nlp", 8, t0 + chrono::TimeDelta::hours(2)));
    jobs.push(waiting(4121, "seg-ablation", "vision", 2, t0 + chrono::TimeDelta::hours(hour.max(1) - 1)));
    // What sinfo says each node has in use: the running jobs' GRES.
    let mut nodes = nodes;
    for n in &mut nodes {
        n.gpus_used_idx =
            jobs.iter().filter(|j| j.holds_gpus()).flat_map(|j| j.gpu_idx.iter().filter(|(on, _)| *on == n.name).flat_map(|(_, idx)| idx.clone())).collect();
        n.gpus_used = n.gpus_used_idx.len() as u32;
    }
    let partitions = vec![
        SlurmPartition { name: "train".into(), state: "UP".into(), nodes: vec!["train-st-p4d-1".into(), "train-st-p4d-2".into()], default: true },
        SlurmPartition {
            name: "spot".into(),
            state: "UP".into(),
            nodes: vec!["spot-dy-g5-1".into(), "spot-dy-g5-2".into(), "spot-dy-g5-3".into()],
            default: false,
        },
    ];
    SlurmSnapshot { cluster: "research".into(), version: "24.11.1".into(), partitions, nodes, jobs }
}

/// dcgm-exporter on every node that is up: busy where jobs run, some waste.
fn readings(hour: i64) -> Vec<GpuReading> {
    let mut out = Vec::new();
    for (host, gpus, memory, busy) in [
        ("train-st-p4d-1", 8u8, 40_960u32, [93.0, 95.0, 91.0, 94.0, 12.0, 9.0, 0.0, 0.0].as_slice()),
        ("train-st-p4d-2", 8, 40_960, &[97.0, 96.0, 98.0, 95.0, 97.0, 96.0, 94.0, 97.0]),
        ("spot-dy-g5-1", 4, 24_576, &[71.0, 0.0, 64.0, 58.0]),
        ("spot-dy-g5-2", 4, 24_576, &[88.0, 90.0, 87.0, 89.0]),
    ] {
        for index in 0..gpus {
            let util = busy[index as usize] + (hour % 3) as f32;
            let used = if util > 5.0 { memory * 7 / 10 } else { 600 };
            out.push(GpuReading {
                host: host.into(),
                index,
                util_pct: Some(util.min(100.0)),
                mem_used: Some(Mib(used)),
                mem_free: Some(Mib(memory - used)),
                temp_c: Some(48.0 + util / 3.0),
                power_w: Some(90.0 + util * 3.0),
                ..GpuReading::default()
            });
        }
    }
    out
}

/// Eleven hours of the site, as the live engine would have applied them;
/// `govern`: the room is Slurm's policy (DRF order, placement, saves).
fn site(govern: bool) -> Room {
    let decls = vec![
        NodeDecl {
            host: "train-st-p4d-*".into(),
            instance_type: Some("p4d.24xlarge".into()),
            zone: Some("us-east-1a".into()),
            billing: Some(gpuroom::domain::cluster::BillingMode::OnDemand),
            ..NodeDecl::default()
        },
        NodeDecl {
            partition: Some("spot".into()),
            instance_type: Some("g5.12xlarge".into()),
            zone: Some("us-east-1a".into()),
            billing: Some(gpuroom::domain::cluster::BillingMode::Spot),
            ..NodeDecl::default()
        },
    ];
    let mut translator = Translator::new(Catalogue::new(Vec::new(), decls));
    let mut config = RoomConfig::default();
    config.slurm.mode = SlurmMode::Control;
    config.slurm.govern = govern;
    config.sched.discipline = gpuroom::sched::DisciplineKind::Drf;
    let mut room = Room::new(config);
    for (tenant, budget) in [("nlp", 9_000_000_000), ("vision", 1_500_000_000), ("speech", 400_000_000)] {
        let spec = TenantSpec { id: TenantId(tenant.into()), quota_gpus: 16, monthly_budget: Micros(budget), quota_gpu_mem: Mib(0), borrow_limit_gpus: 8 };
        room.apply(start(), &Event::TenantDefined { spec });
    }
    // The month so far, as the books carried it into the day.
    for hour in 0..=11 {
        for minute in (0..60).step_by(10) {
            let at = start() + chrono::TimeDelta::minutes(hour * 60 + minute);
            let price = MicrosPerHour(2_300_000 + 40_000 * ((hour + minute / 10) % 5));
            let mut reports = vec![Report::Prices { points: vec![PricePoint { zone: "us-east-1a".into(), instance_type: "g5.12xlarge".into(), at, price }] }];
            reports.push(Report::Slurm { snapshot: snapshot(hour * 60 + minute) });
            reports.push(Report::Gpus { source: "dcgm".into(), readings: readings(hour) });
            for report in reports {
                for event in translator.translate(at, report) {
                    let effects = room.apply(at, &event);
                    // Slurm carries out what the room sends, a moment later.
                    for effect in effects {
                        if let Effect::Slurm { command } = effect {
                            let message = format!("{} {}", command.verb, command.job);
                            room.apply(at, &Event::SlurmDone { command: command.id, ok: true, message });
                        }
                    }
                }
            }
        }
    }
    room
}

#[test]
fn the_site_room_shows_slurms_nodes_jobs_costs_and_the_spot_drain() {
    let view: View = site(false).view();
    let names: Vec<(&str, &str)> = view.nodes.iter().map(|n| (n.name.as_str(), n.state.as_str())).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.contains(&("train-st-p4d-2", "slurm allocated")) && names.contains(&("spot-dy-g5-3", "powered down")), "{names:?}");
    assert!(names.iter().any(|(n, s)| *n == "spot-dy-g5-2" && s.contains("drain")), "{names:?}");
    let vision = view.budgets.iter().find(|b| b.tenant == "vision").unwrap();
    assert!(vision.month_to_date > Micros(0) && vision.burn > MicrosPerHour(0), "{vision:?}");
    let on_spot: Vec<String> = view.spot_jobs.iter().map(|j| format!("{} {}", j.id, j.name)).collect();
    assert!(
        on_spot.contains(&"slurm-4107 whisper-eval".to_string()) && !on_spot.iter().any(|j| j.contains("llama")),
        "Slurm's jobs on spot nodes, with the instance's max price: {on_spot:?}"
    );
    assert!(view.spot_jobs.iter().all(|j| j.cap.is_some() && j.market.is_some()));
    let log: Vec<&str> = view.log.iter().map(|l| l.text.as_str()).collect();
    assert!(log.iter().any(|l| l.contains("spot interruption")), "{log:#?}");
}

#[test]
#[ignore]
fn write_slurm_site_screenshots() {
    let dir = std::env::var("TUI_SHOTS").unwrap_or_else(|_| "/tmp/tui-shots".into());
    std::fs::create_dir_all(&dir).unwrap();
    let view = site(false).view();
    let mut ctx = DrawContext::new("LIVE slurm research · dcgm ×4");
    ctx.data_age = Some(std::time::Duration::from_millis(700));
    let console = App::with_focus(PaneId::Fleet);
    let mut drilled = App::with_focus(PaneId::Fleet);
    drilled.drill_into(view.nodes.iter().find(|n| n.name == "train-st-p4d-1").map(|n| n.id));
    drilled.show(PaneId::Fleet, true);
    for (name, app, w, h) in
        [("console-slurm-site-160x48", &console, 160, 48), ("console-slurm-site-120x40", &console, 120, 40), ("pane-fleet-slurm-node", &drilled, 120, 30)]
    {
        let buf = gpuroom::tui::render_to_buffer(&view, app, &ctx, w, h);
        std::fs::write(format!("{dir}/{name}.svg"), gpuroom::tui::buffer_to_svg(&buf)).unwrap();
    }
    let governed = site(true).view();
    let mut slurm = App::with_focus(PaneId::Slurm);
    slurm.show(PaneId::Slurm, true);
    for (name, w, h) in [("pane-slurm-governed-160x40", 160, 40), ("pane-slurm-governed-100x30", 100, 30)] {
        let buf = gpuroom::tui::render_to_buffer(&governed, &slurm, &ctx, w, h);
        std::fs::write(format!("{dir}/{name}.svg"), gpuroom::tui::buffer_to_svg(&buf)).unwrap();
    }
}

#[test]
fn the_governed_site_shows_the_rooms_order_the_nodes_and_each_spot_jobs_saves() {
    let view = site(true).view();
    let slurm = view.slurm.expect("the Slurm view");
    assert_eq!(slurm.governs.as_deref(), Some("drf"));
    let row = |id: u64| slurm.jobs.iter().find(|j| j.id == id).unwrap_or_else(|| panic!("job {id}"));
    // Pending: ranked, with where they go or why they wait.
    let ranks: Vec<Option<u32>> = [4120, 4121].iter().map(|id| row(*id).rank).collect();
    assert!(ranks.iter().all(Option::is_some), "{ranks:?}");
    assert!(row(4120).plan.as_deref().is_some_and(|p| p.starts_with('#')), "{:?}", row(4120).plan);
    // On spot: one saving on the room's schedule, one that never answers.
    let saving = row(4107).plan.clone().unwrap_or_default();
    assert!(saving.contains("saved ") && saving.contains("cap ") && !row(4107).plan_alarm, "{saving}");
    let silent = row(4108);
    assert!(silent.plan_alarm && silent.plan.as_deref().unwrap_or_default().contains("not checkpointing"), "{silent:?}");
}
