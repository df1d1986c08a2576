//! Budgets through `Room::apply`: each step at its threshold (80% notify,
//! 100% limit, 120% stop), the approval path with its audit record, and the
//! ledger lines that carry the money, attributed down to one GPU.

use gpuroom::cost::budget::{AtLimit, BudgetLevel};
use gpuroom::cost::ledger::{LedgerLine, LineKind};
use gpuroom::domain::cluster::BillingMode;
use gpuroom::domain::event::{Action, Actor, Effect, Event, Role};
use gpuroom::domain::ids::{JobId, NodeId, TenantId};
use gpuroom::domain::job::Phase;
use gpuroom::domain::testkit::{job_spec, node_spec, t, tenant_spec};
use gpuroom::domain::units::{Micros, MicrosPerHour};
use gpuroom::room::{Room, RoomConfig};

const HOUR: i64 = 3600;

/// One on-demand 8-GPU node at $24.48/h and a spot one; tenant "nlp" with a
/// $100 monthly budget. One 8-GPU job costs $24.48 an hour.
fn room(at_limit: AtLimit) -> Room {
    let mut config = RoomConfig::default();
    config.cost.budget.at_limit = at_limit;
    let mut room = Room::new(config);
    let mut nlp = tenant_spec("nlp", 16);
    nlp.monthly_budget = Micros(100_000_000);
    room.apply(t(0), &Event::TenantDefined { spec: nlp });
    room.apply(t(0), &Event::NodeUp { spec: node_spec(1, BillingMode::OnDemand, 8) });
    room
}

fn operator(role: Role) -> Actor {
    Actor { user: "ana".into(), origin: "10.0.0.7".into(), role, account: None }
}

fn alarm_text(room: &Room) -> String {
    room.view().alarms.iter().find(|a| a.id == "budget:nlp").map(|a| a.text.clone()).unwrap_or_default()
}

fn level(room: &Room) -> BudgetLevel {
    room.budget_level_of(&TenantId("nlp".into()))
}

#[test]
fn each_budget_step_at_its_threshold_and_the_approval_path() {
    let mut room = room(AtLimit::Queue);
    room.apply(t(1), &Event::JobSubmitted { spec: job_spec(1, "nlp", 8) });
    room.apply(t(2), &Event::JobStarted { job: JobId(1) });
    // $24.48/h: 80% of $100 at 3.27 h, 100% at 4.085 h, 120% at 4.90 h.
    room.apply(t(3 * HOUR), &Event::Tick);
    assert_eq!(level(&room), BudgetLevel::Ok);
    room.apply(t(3 * HOUR + 1200), &Event::Tick);
    assert_eq!(level(&room), BudgetLevel::Notify);
    assert!(alarm_text(&room).contains("of its $100.00 budget"), "{}", alarm_text(&room));

    room.apply(t(4 * HOUR + 600), &Event::Tick);
    assert_eq!(level(&room), BudgetLevel::Limited);
    assert!(alarm_text(&room).contains("new work waits"));
    // Running work goes on; new work of the tenant waits though GPUs are free.
    room.apply(t(4 * HOUR + 601), &Event::NodeUp { spec: node_spec(2, BillingMode::OnDemand, 8) });
    let fx = room.apply(t(4 * HOUR + 602), &Event::JobSubmitted { spec: job_spec(2, "nlp", 1) });
    assert!(!fx.iter().any(|e| matches!(e, Effect::StartJob { .. })), "{fx:?}");
    assert_eq!(room.job(JobId(1)).unwrap().phase(), Phase::Running);
    assert_eq!(room.job(JobId(2)).unwrap().phase(), Phase::Queued);

    // Past 120%: the running job is saved and stopped; nothing of nlp runs.
    let fx = room.apply(t(5 * HOUR), &Event::Tick);
    assert_eq!(level(&room), BudgetLevel::Blocked);
    assert!(fx.iter().any(|e| matches!(e, Effect::Checkpoint { job: JobId(1), .. })), "{fx:?}");
    assert!(alarm_text(&room).contains("until an operator approves"));
    room.apply(t(5 * HOUR + 30), &Event::CheckpointDone { job: JobId(1), step: 500, bytes: 1 << 30 });
    let fx = room.apply(t(5 * HOUR + 40), &Event::JobStopped { job: JobId(1) });
    assert!(!fx.iter().any(|e| matches!(e, Effect::StartJob { .. })), "blocked: {fx:?}");
    assert_eq!(room.job(JobId(1)).unwrap().phase(), Phase::Queued);

    // A viewer may not approve; an approval needs a reason and a bound.
    let approve = |reason: &str, amount: Option<i64>| Action::ApproveOverrun {
        tenant: TenantId("nlp".into()),
        reason: reason.into(),
        amount: amount.map(Micros),
        until: None,
    };
    let at = t(5 * HOUR + 300);
    let refused = room.apply(at, &Event::Operator { actor: operator(Role::Viewer), action: approve("deadline", Some(50_000_000)) });
    assert!(refused.iter().any(|e| matches!(e, Effect::Rejected { reason } if reason.contains("read-only"))));
    let refused = room.apply(at, &Event::Operator { actor: operator(Role::Operator), action: approve("  ", Some(50_000_000)) });
    assert!(refused.iter().any(|e| matches!(e, Effect::Rejected { reason } if reason.contains("needs a reason"))), "{refused:?}");
    let refused = room.apply(at, &Event::Operator { actor: operator(Role::Operator), action: approve("deadline", None) });
    assert!(refused.iter().any(|e| matches!(e, Effect::Rejected { reason } if reason.contains("amount or an expiry"))));
    assert_eq!(level(&room), BudgetLevel::Blocked);
    // Each refusal is on the audit with its reason; none is an approval.
    let refusals: Vec<_> = room.audit().collect();
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    assert!(refusals.iter().all(|a| a.refused.is_some()), "refused actions are not approvals: {refusals:?}");
    assert!(refusals[1].refused.as_deref().unwrap_or_default().contains("needs a reason"), "{refusals:?}");

    // Approved for $50 more past 120%: both jobs run again.
    let fx = room.apply(at, &Event::Operator { actor: operator(Role::Operator), action: approve("paper deadline", Some(50_000_000)) });
    let started: Vec<JobId> = fx.iter().filter_map(|e| if let Effect::StartJob { job, .. } = e { Some(*job) } else { None }).collect();
    assert_eq!(started, vec![JobId(1), JobId(2)], "{fx:?}");
    assert_eq!(level(&room), BudgetLevel::Notify);
    let audit: Vec<_> = room.audit().filter(|a| a.refused.is_none()).collect();
    assert_eq!(audit.len(), 1);
    assert_eq!((audit[0].user.as_str(), audit[0].origin.as_str(), audit[0].at), ("ana", "10.0.0.7", at));
    assert!(audit[0].what.contains("paper deadline") && audit[0].what.contains("$50.00"), "{:?}", audit[0]);
    assert!(room.view().log.iter().any(|l| l.text.contains("ana@10.0.0.7: approve the overrun of nlp")));

    // The approved amount runs out: blocked again.
    room.apply(t(5 * HOUR + 310), &Event::JobStarted { job: JobId(1) });
    room.apply(t(5 * HOUR + 310), &Event::JobStarted { job: JobId(2) });
    room.apply(t(7 * HOUR), &Event::Tick);
    assert_eq!(level(&room), BudgetLevel::Blocked);
    let spent = room.books().month_to_date(&TenantId("nlp".into()), t(7 * HOUR));
    assert!(spent >= Micros(170_000_000), "{spent}");
}

#[test]
fn over_budget_work_may_be_downgraded_to_spot() {
    let mut room = room(AtLimit::Spot);
    room.apply(t(0), &Event::PriceTick { zone: "us-east-1c".into(), instance_type: "p3.16xlarge".into(), price: MicrosPerHour(7_344_000) });
    room.apply(t(1), &Event::JobSubmitted { spec: job_spec(1, "nlp", 8) });
    room.apply(t(2), &Event::JobStarted { job: JobId(1) });
    room.apply(t(4 * HOUR + 600), &Event::Tick);
    assert_eq!(level(&room), BudgetLevel::Limited);
    room.apply(t(4 * HOUR + 601), &Event::NodeUp { spec: node_spec(2, BillingMode::OnDemand, 8) });
    let fx = room.apply(t(4 * HOUR + 602), &Event::JobSubmitted { spec: job_spec(2, "nlp", 1) });
    assert!(!fx.iter().any(|e| matches!(e, Effect::StartJob { .. })), "on-demand is free but not allowed: {fx:?}");
    let fx = room.apply(t(4 * HOUR + 603), &Event::NodeUp { spec: node_spec(3, BillingMode::Spot, 8) });
    assert!(fx.iter().any(|e| matches!(e, Effect::StartJob { job: JobId(2), node: NodeId(3), .. })), "{fx:?}");
    assert!(alarm_text(&room).contains("spot only"));
}

#[test]
fn ledger_lines_close_every_hour_attributed_down_to_one_gpu() {
    let mut room = room(AtLimit::Queue);
    let mut spec = job_spec(1, "nlp", 2);
    spec.tags.project = "llm".into();
    spec.tags.env = "prod".into();
    spec.tags.model = "llama-70b".into();
    room.apply(t(10), &Event::JobSubmitted { spec });
    room.apply(t(20), &Event::JobStarted { job: JobId(1) });
    let mut lines: Vec<LedgerLine> = Vec::new();
    let mut collect = |fx: Vec<Effect>| {
        for e in fx {
            if let Effect::Ledger { lines: l } = e {
                lines.extend(l);
            }
        }
    };
    collect(room.apply(t(1800), &Event::Tick));
    collect(room.apply(t(HOUR + 5), &Event::Tick));
    // One hour closed: the job on 2 GPUs (from t = 10 s), and idle lines for
    // all 8 (the job's two were idle for their first 10 seconds).
    let compute: Vec<&LedgerLine> = lines.iter().filter(|l| l.kind == LineKind::Compute).collect();
    let idle: Vec<&LedgerLine> = lines.iter().filter(|l| l.kind == LineKind::Idle).collect();
    assert_eq!((compute.len(), idle.len()), (2, 8), "{lines:#?}");
    assert_eq!(idle.iter().filter(|l| l.amount == Micros(8_500)).count(), 2, "10 s of $3.06/h: {idle:#?}");
    assert!(compute.iter().all(|l| l.start == t(0) && l.end == t(HOUR) && l.node == NodeId(1)));
    let tags = compute[0].tags.as_ref().unwrap();
    assert_eq!((tags.tenant.0.as_str(), tags.project.as_str(), tags.env.as_str(), tags.model.as_str()), ("nlp", "llm", "prod", "llama-70b"));
    // $24.48/h over 8 GPUs: $3.06 a GPU-hour; the job from t=10 s.
    let per_gpu: Vec<Micros> = compute.iter().map(|l| l.amount).collect();
    assert_eq!(per_gpu, vec![Micros(3_051_500), Micros(3_051_500)]);
    let hour_total: Micros = lines.iter().filter(|l| l.kind.is_instance()).map(|l| l.amount).sum();
    assert_eq!(hour_total, Micros(24_480_000), "the hour's lines are the instance's hour");
    assert_eq!(compute[0].list_amount, compute[0].amount, "on-demand pays list price");
    assert_eq!(compute[0].unit, Some(0));
}

#[test]
fn spend_off_its_forecast_for_three_hours_raises_an_alarm() {
    let mut room = room(AtLimit::Queue);
    // Four quiet days: one node, $24.48 every hour.
    for h in 1..=96 {
        room.apply(t(h * HOUR), &Event::Tick);
    }
    let forecast = room.spend_forecast();
    assert_eq!(forecast.hourly.len(), 96);
    let expected = forecast.expected(t(96 * HOUR)).expect("a day-ahead forecast was made at midnight");
    assert!((expected.0 - 24_480_000).abs() < 10_000, "{expected}");
    let rest = room.projected_rest_of_month(t(96 * HOUR)).unwrap();
    assert!(rest > Micros(0));
    // A second node doubles the spend: off by 100% for 3 hours → alarm; back → cleared.
    room.apply(t(96 * HOUR), &Event::NodeUp { spec: node_spec(2, BillingMode::OnDemand, 8) });
    for h in 97..=98 {
        room.apply(t(h * HOUR), &Event::Tick);
        assert!(!room.view().alarms.iter().any(|a| a.id == "spend-anomaly"), "not yet at hour {h}");
    }
    room.apply(t(99 * HOUR), &Event::Tick);
    let alarm = room.view().alarms.iter().find(|a| a.id == "spend-anomaly").map(|a| a.text.clone());
    assert!(alarm.as_deref().is_some_and(|t| t.contains("off its forecast for 3 h")), "{alarm:?}");
    room.apply(t(99 * HOUR + 1), &Event::NodeLost { node: NodeId(2), reason: "released".into() });
    room.apply(t(100 * HOUR), &Event::Tick);
    room.apply(t(101 * HOUR), &Event::Tick);
    // Cleared, and still listed (unread) until someone acknowledges it.
    let cleared = room.view().alarms.iter().find(|a| a.id == "spend-anomaly").map(|a| a.cleared_at);
    assert!(matches!(cleared, Some(Some(_))), "{cleared:?}");
}
