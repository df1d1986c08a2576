//! The `:` command bar, as k9s users expect: every action and view switch as
//! a typed command, with Tab completion from what is on the cluster (job
//! ids, pools, tenants, alarms, disciplines). A parsed command becomes an
//! `Intent` for the App; actions still go through the confirmation dialog.
//!
//! Owns the command grammar and completion. Pure: it reads the `View` and
//! returns values; it never sends anything.
//!
//! Grammar (words; `[..]` optional, defaults to the selection):
//! `preempt|requeue|cancel [JOB]`, `migrate [JOB] [POOL]`,
//! `approve TENANT [AMOUNT] [for DURATION | until DATE] REASON…`,
//! `ack [ALARM|all]`, `discipline NAME`, `filter TEXT…`, `sort KEY [asc|desc]`,
//! `slurm [JOBID] VERB [partition=NAME] [exclude=NODE,…]` (a verb on a Slurm
//! job; `slurm` alone focuses the Slurm pane), `capacity approve [N]` (a
//! capacity proposal, the oldest by default; `capacity` alone focuses the
//! fleet), `whatif [FILE|DISCIPLINE|sim=FILE]…` (the recorded run re-run under other
//! policies, in the what-if pane), `pane NAME`, `help`, `quit`.

use chrono::TimeDelta;

use super::job_order::SortKey;
use super::pane_id::PaneId;
use crate::domain::event::Action;
use crate::domain::ids::{JobId, TenantId};
use crate::domain::job::PoolTarget;
use crate::domain::slurm::SlurmVerb;
use crate::domain::units::{At, Micros};
use crate::room::View;
use crate::sched::DisciplineKind;

pub const COMMAND_NAMES: [&str; 17] = [
    "preempt",
    "requeue",
    "migrate",
    "cancel",
    "approve",
    "ack",
    "discipline",
    "filter",
    "sort",
    "slurm",
    "capacity",
    "pane",
    "help",
    "quit",
    "fleet",
    "queue",
    "whatif",
];

/// What a command asks the App to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// An action for the engine (confirmed first where it must be).
    Act(Action),
    /// `migrate JOB` without a pool: open the pool picker.
    PickPool(JobId),
    /// `approve TENANT` alone: open the approval form.
    ApproveForm(TenantId),
    /// `ack` acknowledges every active alarm: one action per alarm.
    AckAll(Vec<String>),
    Filter(String),
    Sort(SortKey, bool),
    Focus(PaneId),
    /// Compare the recorded run with re-runs under these configuration
    /// files and disciplines (none: every discipline).
    WhatIf(Vec<String>),
    Help,
    /// `help CMD`: that command's syntax, said on the status line.
    Usage(String),
    Quit,
}

/// The syntax of each command, for `:help CMD`.
pub fn usage(command: &str) -> Option<&'static str> {
    Some(match command {
        "preempt" => "preempt [JOB] — save, stop and requeue the job (the selected one without JOB)",
        "requeue" => "requeue [JOB] — stop without saving and requeue from its last checkpoint",
        "migrate" => "migrate [JOB] [POOL] — move it to POOL (od|spot|res/TYPE/ZONE); without POOL, pick one",
        "cancel" => "cancel [JOB] — stop it for good, never queued again",
        "approve" => "approve TENANT [+AMOUNT] [for 6h | until DATE] REASON — e.g. approve nlp +50 for 6h paper deadline; TENANT alone opens the form",
        "ack" => "ack [all|ALARM] — acknowledge one alarm, or all (cleared unread ones leave the list)",
        "discipline" => "discipline fifo|priority|drf|mlfq — switch the queue's discipline",
        "filter" => "filter WORDS — show the jobs matching every word (id, name, tenant, project, model, state, node)",
        "sort" => "sort [waiting|engine|wait|cost|gpus|progress|eta|tenant|name] [asc|desc]",
        "slurm" => {
            "slurm [JOBID] preempt|requeue|suspend|resume|cancel|hold|release|signal [SIG]|migrate partition=P [exclude=N1,N2] — on the job named or selected"
        }
        "capacity" => "capacity approve [N] — approve capacity proposal N (the oldest without N)",
        "pane" => "pane fleet|memory|queue|market|budget|alarms|slurm — focus that pane",
        "help" => "help [CMD] — the keys and commands, or one command's syntax",
        "quit" => "quit — leave the console (asks first where it runs the engine)",
        "fleet" | "queue" => "fleet, queue — focus that pane",
        "whatif" => "whatif [CONFIG.toml ...] [DISCIPLINE ...] — this run again under other settings, side by side",
        _ => return None,
    })
}

/// The words of a pool in commands: `od/p3.8xlarge/us-east-1a`.
pub fn pool_token(t: &PoolTarget) -> String {
    format!("{}/{}/{}", t.billing.short().to_lowercase(), t.instance_type, t.zone)
}

fn pool_of(view: &View, token: &str) -> Result<PoolTarget, String> {
    view.pools
        .iter()
        .map(|p| &p.target)
        .find(|t| pool_token(t).eq_ignore_ascii_case(token))
        .cloned()
        .ok_or_else(|| format!("no pool {token:?} (Tab lists them: billing/instance-type/zone)"))
}

fn job_of(view: &View, word: Option<&str>, selected: Option<JobId>) -> Result<JobId, String> {
    match word {
        None => selected.ok_or_else(|| "no job selected: name one (Tab lists them)".to_string()),
        Some(w) => {
            let digits = w.trim_start_matches(['j', 'J']);
            let n: u64 = digits.parse().map_err(|_| format!("{w:?} is not a job id (like j12)"))?;
            view.jobs.iter().find(|j| j.id.0 == n).map(|j| j.id).ok_or_else(|| format!("no unfinished job {w}"))
        }
    }
}

fn pane_of(word: &str) -> Option<PaneId> {
    let w = word.to_lowercase();
    PaneId::ALL.into_iter().find(|p| p.command_name() == w || p.title().to_lowercase().starts_with(&w))
}

/// An amount such as `50`, `+50`, `$1,200.50`.
pub fn parse_amount(word: &str) -> Result<Micros, String> {
    let digits: String = word.trim().trim_start_matches('+').trim_start_matches('$').chars().filter(|c| *c != ',').collect();
    let amount = Micros::parse_decimal(&digits).map_err(|_| format!("{word:?} is not an amount (like 50 or $1,200.50)"))?;
    if amount.0 <= 0 {
        return Err(format!("the amount must be above zero, got {word}"));
    }
    Ok(amount)
}

/// `6h`, `30m`, `2d` from `now`, or a date `2020-01-07` / `2020-01-07T18:00` (UTC).
pub fn parse_until(word: &str, now: Option<At>) -> Result<At, String> {
    let w = word.trim();
    let bad = || format!("{w:?} is not an expiry (like 6h, 30m, 2d, 2020-01-07 or 2020-01-07T18:00)");
    if let Some((n, unit)) = w.char_indices().last().map(|(i, u)| (&w[..i], u))
        && let Ok(n) = n.parse::<i64>()
        && matches!(unit, 'm' | 'h' | 'd')
    {
        let now = now.ok_or("no data yet: give a date instead")?;
        if !(1..=24 * 60 * 365).contains(&n) {
            return Err(bad());
        }
        let delta = match unit {
            'm' => TimeDelta::minutes(n),
            'h' => TimeDelta::hours(n),
            _ => TimeDelta::days(n),
        };
        return Ok(now + delta);
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(w, "%Y-%m-%dT%H:%M") {
        return Ok(t.and_utc());
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(w, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).ok_or_else(bad)?.and_utc());
    }
    Err(bad())
}

/// The approval action from the form's or the command's fields: a reason is
/// required, and an amount or an expiry (or both), as the engine demands.
pub fn approval(tenant: &str, amount: &str, until: &str, reason: &str, now: Option<At>) -> Result<Action, String> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err("a reason is required".into());
    }
    let amount = if amount.trim().is_empty() { None } else { Some(parse_amount(amount)?) };
    let until = if until.trim().is_empty() { None } else { Some(parse_until(until, now)?) };
    if amount.is_none() && until.is_none() {
        return Err("give an amount over the limit, an expiry, or both".into());
    }
    if let (Some(u), Some(n)) = (until, now)
        && u <= n
    {
        return Err("the expiry is in the past".into());
    }
    Ok(Action::ApproveOverrun { tenant: TenantId(tenant.to_string()), reason: reason.to_string(), amount, until })
}

fn parse_approve(view: &View, words: &[&str]) -> Result<Intent, String> {
    let Some(tenant) = words.first() else { return Err("approve TENANT [AMOUNT] [for 6h | until DATE] REASON".into()) };
    if !view.budgets.iter().any(|b| b.tenant == *tenant) {
        return Err(format!("no tenant {tenant:?} (Tab lists them)"));
    }
    let mut rest = &words[1..];
    if rest.is_empty() {
        return Ok(Intent::ApproveForm(TenantId(tenant.to_string())));
    }
    let mut amount = "";
    let mut until = "";
    if let Some(first) = rest.first()
        && first.trim_start_matches(['+', '$']).starts_with(|c: char| c.is_ascii_digit())
    {
        amount = first;
        rest = &rest[1..];
    }
    if let [kw, when, tail @ ..] = rest
        && (*kw == "for" || *kw == "until")
    {
        until = when;
        rest = tail;
    }
    approval(tenant, amount, until, &rest.join(" "), view.at).map(Intent::Act)
}

/// `slurm [JOBID] VERB…`: the job named, or the one selected in the Slurm pane.
fn parse_slurm(view: &View, args: &[&str], selected: Option<u64>) -> Result<Intent, String> {
    if args.is_empty() {
        return Ok(Intent::Focus(PaneId::Slurm));
    }
    let cluster = view.slurm.as_ref().ok_or("no Slurm cluster is attached")?;
    let (job, words) = match args[0].parse::<u64>() {
        Ok(id) => (id, &args[1..]),
        Err(_) => (selected.ok_or("no Slurm job selected: slurm JOBID VERB (Tab lists them)")?, args),
    };
    if !cluster.jobs.iter().any(|j| j.id == job) {
        return Err(format!("no Slurm job {job} in the newest snapshot (Tab lists them)"));
    }
    let verb = SlurmVerb::parse(words)?;
    Ok(Intent::Act(Action::Slurm { job, verb }))
}

/// Parses a command line (without the `:`); a `slurm` verb without a job id
/// is for no job.
pub fn parse(line: &str, view: &View, selected: Option<JobId>) -> Result<Intent, String> {
    parse_in(line, view, selected, None)
}

/// Parses a command line with the console's selections: `selected` in the
/// job table, `slurm_selected` in the Slurm pane.
pub fn parse_in(line: &str, view: &View, selected: Option<JobId>, slurm_selected: Option<u64>) -> Result<Intent, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((&head, args)) = words.split_first() else { return Err("type a command; Tab completes".into()) };
    let lower = head.to_lowercase();
    let command = COMMAND_NAMES.iter().find(|c| **c == lower).copied().or(match head {
        "q" => Some("quit"),
        "?" => Some("help"),
        _ => None,
    });
    let arg = |i: usize| args.get(i).copied();
    match command {
        Some("preempt") => Ok(Intent::Act(Action::Preempt { job: job_of(view, arg(0), selected)? })),
        Some("requeue") => Ok(Intent::Act(Action::Requeue { job: job_of(view, arg(0), selected)? })),
        Some("cancel") => Ok(Intent::Act(Action::Cancel { job: job_of(view, arg(0), selected)? })),
        Some("migrate") => {
            // `migrate POOL` moves the selected job.
            let (job, pool) = match (arg(0), arg(1)) {
                (Some(a), None) if a.contains('/') => (job_of(view, None, selected)?, Some(a)),
                (a, p) => (job_of(view, a, selected)?, p),
            };
            match pool {
                None => Ok(Intent::PickPool(job)),
                Some(p) => Ok(Intent::Act(Action::Migrate { job, to: pool_of(view, p)? })),
            }
        }
        Some("approve") => parse_approve(view, args),
        Some("ack") => match arg(0) {
            None | Some("all") => {
                let ids: Vec<String> = view.alarms.iter().filter(|a| a.acked_by.is_none()).map(|a| a.id.clone()).collect();
                if ids.is_empty() {
                    return Err("no unacknowledged alarm (active or cleared unread)".into());
                }
                Ok(Intent::AckAll(ids))
            }
            Some(id) => view
                .alarms
                .iter()
                .find(|a| a.id == id)
                .map(|a| Intent::Act(Action::AcknowledgeAlarm { id: a.id.clone() }))
                .ok_or_else(|| format!("no listed alarm {id:?}")),
        },
        Some("discipline") => {
            let name = arg(0).ok_or("discipline fifo|priority|drf|mlfq")?;
            let d = DisciplineKind::parse(&name.to_lowercase()).ok_or_else(|| format!("unknown discipline {name:?} (fifo, priority, drf, mlfq)"))?;
            Ok(Intent::Act(Action::SetDiscipline { discipline: d }))
        }
        Some("filter") => Ok(Intent::Filter(args.join(" "))),
        Some("sort") => {
            let key = match arg(0) {
                None => SortKey::Queue,
                Some(k) => SortKey::parse(k).ok_or_else(|| format!("unknown sort key {k:?} ({})", SortKey::ALL.map(|k| k.name()).join(", ")))?,
            };
            let reversed = match arg(1) {
                None => false,
                // The key's own direction is its natural one; the other word flips it.
                Some(dir @ ("asc" | "desc")) => (dir == "desc") != key.descending_by_default(),
                Some(w) => return Err(format!("{w:?}: asc or desc")),
            };
            Ok(Intent::Sort(key, reversed))
        }
        Some("slurm") => parse_slurm(view, args, slurm_selected),
        Some("capacity") => parse_capacity(view, args),
        Some("pane") => arg(0).and_then(pane_of).map(Intent::Focus).ok_or_else(|| format!("pane {}", PaneId::ALL.map(|p| p.command_name()).join("|"))),
        Some("fleet") => Ok(Intent::Focus(PaneId::Fleet)),
        Some("queue") => Ok(Intent::Focus(PaneId::Queue)),
        Some("whatif") => Ok(Intent::WhatIf(args.iter().map(|a| a.to_string()).collect())),
        Some("help") => match arg(0) {
            None => Ok(Intent::Help),
            Some(cmd) => usage(&cmd.to_lowercase())
                .map(|u| Intent::Usage(format!(":{u}")))
                .ok_or_else(|| format!("no command {cmd:?} (:help lists them: {})", COMMAND_NAMES.join(", "))),
        },
        Some("quit") => Ok(Intent::Quit),
        _ => Err(format!("unknown command {head:?} (Tab completes: {})", COMMAND_NAMES.join(", "))),
    }
}

/// `capacity approve [N]`: approve a capacity proposal (the oldest when no
/// number is given); `capacity` alone shows the fleet, where they are listed.
fn parse_capacity(view: &View, args: &[&str]) -> Result<Intent, String> {
    match args {
        [] => Ok(Intent::Focus(PaneId::Fleet)),
        ["approve", rest @ ..] => {
            let proposals = view.capacity.as_ref().map(|c| c.proposals.as_slice()).unwrap_or_default();
            let id = match rest {
                [] => proposals.first().map(|p| p.id).ok_or("no capacity proposal waits (the room proposes in advisory mode)")?,
                [n] => n.trim_start_matches('#').parse::<u64>().map_err(|_| format!("{n:?} is not a proposal number"))?,
                _ => return Err("capacity approve [N]".into()),
            };
            Ok(Intent::Act(Action::ApproveCapacity { proposal: id }))
        }
        _ => Err("capacity approve [N]".into()),
    }
}

/// What Tab did: the new line, and the candidates when there is no single one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub line: String,
    pub options: Vec<String>,
}

fn candidates(view: &View, command: &str, position: usize) -> Vec<String> {
    let jobs = |running: bool| -> Vec<String> { view.jobs.iter().filter(|j| !running || j.node.is_some()).map(|j| j.id.to_string()).collect() };
    match (command, position) {
        ("preempt" | "requeue", 0) => jobs(true),
        ("cancel" | "migrate", 0) => jobs(false),
        ("migrate", 1) => view.pools.iter().map(|p| pool_token(&p.target)).collect(),
        ("approve", 0) => view.budgets.iter().map(|b| b.tenant.clone()).collect(),
        ("ack", 0) => std::iter::once("all".to_string()).chain(view.alarms.iter().map(|a| a.id.clone())).collect(),
        ("discipline", 0) => DisciplineKind::ALL.iter().map(|d| d.discipline().name().to_string()).collect(),
        ("sort", 0) => SortKey::ALL.iter().map(|k| k.name().to_string()).collect(),
        ("sort", 1) => vec!["asc".into(), "desc".into()],
        ("pane", 0) => PaneId::ALL.iter().map(|p| p.command_name().to_string()).collect(),
        ("capacity", 0) => vec!["approve".into()],
        ("capacity", 1) => view.capacity.iter().flat_map(|c| c.proposals.iter().map(|p| p.id.to_string())).collect(),
        _ => Vec::new(),
    }
}

/// Completion after `slurm`: job ids (or verbs, for the selected job), then
/// verbs, then a migration's `partition=` and `exclude=` words.
fn slurm_candidates(view: &View, args: &[&str]) -> Vec<String> {
    let Some(s) = view.slurm.as_ref() else { return Vec::new() };
    let verbs = || SlurmVerb::names().map(str::to_string);
    let numeric = args.first().is_some_and(|a| a.parse::<u64>().is_ok());
    let words = if numeric { &args[1..] } else { args };
    match words.first() {
        None if args.is_empty() => s.jobs.iter().map(|j| j.id.to_string()).chain(verbs()).collect(),
        None => verbs().collect(),
        Some(&"migrate") => {
            let parts = s.partitions.iter().map(|p| format!("partition={}", p.name));
            parts.chain(s.nodes.iter().map(|n| format!("exclude={}", n.name))).collect()
        }
        Some(_) => Vec::new(),
    }
}

fn common_prefix(options: &[String]) -> String {
    let Some(first) = options.first() else { return String::new() };
    let mut end = first.len();
    for o in options {
        end = end.min(first.char_indices().zip(o.chars()).take_while(|((_, a), b)| a == b).map(|((i, a), _)| i + a.len_utf8()).last().unwrap_or(0));
    }
    first[..end].to_string()
}

/// Completes the word being typed at the end of `line`.
pub fn complete(line: &str, view: &View) -> Completion {
    let ends_in_space = line.is_empty() || line.ends_with(' ');
    let mut words: Vec<&str> = line.split_whitespace().collect();
    let partial = if ends_in_space { "" } else { words.pop().unwrap_or("") };
    let options: Vec<String> = match words.split_first() {
        None => COMMAND_NAMES.iter().map(|c| c.to_string()).collect(),
        Some((&"slurm", args)) => slurm_candidates(view, args),
        Some((command, args)) => {
            let mut position = args.len();
            // `migrate POOL` (the selected job) completes pools in the first place too.
            if *command == "migrate" && position == 0 && partial.contains('/') {
                position = 1;
            }
            candidates(view, command, position)
        }
    };
    let lower = partial.to_lowercase();
    let mut matching: Vec<String> = options.into_iter().filter(|o| o.to_lowercase().starts_with(&lower)).collect();
    matching.dedup();
    let head: String = words.iter().map(|w| format!("{w} ")).collect();
    match matching.len() {
        0 => Completion { line: line.to_string(), options: Vec::new() },
        1 => Completion { line: format!("{head}{} ", matching[0]), options: Vec::new() },
        _ => {
            let prefix = common_prefix(&matching);
            let line = if prefix.len() > partial.len() { format!("{head}{prefix}") } else { line.to_string() };
            Completion { line, options: matching }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::Phase;
    use crate::tui::fixture::demo_view;

    #[test]
    fn help_with_a_command_gives_its_syntax_for_every_command() {
        let view = demo_view();
        for name in COMMAND_NAMES {
            match parse(&format!("help {name}"), &view, None) {
                Ok(Intent::Usage(text)) => assert!(text.starts_with(&format!(":{name}")) || name == "queue", "{name}: {text}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!(parse("help", &view, None), Ok(Intent::Help));
        let err = parse("help frobnicate", &view, None).unwrap_err();
        assert!(err.contains("no command \"frobnicate\"") && err.contains("preempt"), "{err}");
    }

    #[test]
    fn job_actions_default_to_the_selection_and_name_bad_ids() {
        let view = demo_view();
        let id = view.jobs[0].id;
        assert_eq!(parse("preempt", &view, Some(id)), Ok(Intent::Act(Action::Preempt { job: id })));
        assert_eq!(parse(&format!("requeue {id}"), &view, None), Ok(Intent::Act(Action::Requeue { job: id })));
        assert_eq!(parse("cancel 1", &view, None), Ok(Intent::Act(Action::Cancel { job: JobId(1) })));
        assert!(parse("preempt", &view, None).unwrap_err().contains("no job selected"));
        assert!(parse("preempt j999", &view, None).unwrap_err().contains("no unfinished job"));
        assert!(parse("preempt banana", &view, None).unwrap_err().contains("not a job id"));
        assert!(parse("frobnicate", &view, None).unwrap_err().contains("unknown command"));
        assert!(parse("   ", &view, None).is_err());
    }

    #[test]
    fn migrate_opens_the_picker_or_takes_a_pool() {
        let view = demo_view();
        let running = view.jobs.iter().find(|j| j.phase == Phase::Running).unwrap().id;
        assert_eq!(parse(&format!("migrate {running}"), &view, None), Ok(Intent::PickPool(running)));
        let pool = &view.pools[0].target;
        let token = pool_token(pool);
        let expected = Ok(Intent::Act(Action::Migrate { job: running, to: pool.clone() }));
        assert_eq!(parse(&format!("migrate {running} {token}"), &view, None), expected);
        assert_eq!(parse(&format!("migrate {token}"), &view, Some(running)), expected);
        assert!(parse(&format!("migrate {running} spot/nowhere/zz"), &view, None).unwrap_err().contains("no pool"));
    }

    #[test]
    fn approve_needs_a_reason_and_an_amount_or_expiry() {
        let view = demo_view();
        let tenant = view.budgets[0].tenant.clone();
        assert_eq!(parse(&format!("approve {tenant}"), &view, None), Ok(Intent::ApproveForm(TenantId(tenant.clone()))));
        match parse(&format!("approve {tenant} +50 for 6h paper deadline"), &view, None) {
            Ok(Intent::Act(Action::ApproveOverrun { amount, until, reason, .. })) => {
                assert_eq!(amount, Some(Micros(50_000_000)));
                assert_eq!(until, Some(view.at.unwrap() + TimeDelta::hours(6)));
                assert_eq!(reason, "paper deadline");
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&format!("approve {tenant} 50"), &view, None).unwrap_err().contains("reason"));
        assert!(parse(&format!("approve {tenant} because"), &view, None).unwrap_err().contains("amount"));
        assert!(parse(&format!("approve {tenant} -5 x"), &view, None).is_err());
        assert!(parse("approve nobody 50 x", &view, None).unwrap_err().contains("no tenant"));
        assert!(approval(&tenant, "", "2000-01-01", "late", view.at).unwrap_err().contains("past"));
        assert!(parse_until("soon", view.at).is_err());
        assert_eq!(parse_amount("$1,200.50"), Ok(Micros(1_200_500_000)));
    }

    #[test]
    fn discipline_sort_pane_and_ack() {
        let view = demo_view();
        assert_eq!(parse("discipline drf", &view, None), Ok(Intent::Act(Action::SetDiscipline { discipline: DisciplineKind::Drf })));
        assert!(parse("discipline lottery", &view, None).is_err());
        assert_eq!(parse("sort cost", &view, None), Ok(Intent::Sort(SortKey::Cost, false)));
        assert_eq!(parse("sort cost asc", &view, None), Ok(Intent::Sort(SortKey::Cost, true)));
        assert_eq!(parse("sort name desc", &view, None), Ok(Intent::Sort(SortKey::Name, true)));
        assert_eq!(parse("pane market", &view, None), Ok(Intent::Focus(PaneId::Market)));
        assert_eq!(parse("q", &view, None), Ok(Intent::Quit));
        match parse("ack", &view, None) {
            Ok(Intent::AckAll(ids)) => assert_eq!(ids.len(), view.alarms.len()),
            other => panic!("{other:?}"),
        }
        let id = view.alarms[0].id.clone();
        assert_eq!(parse(&format!("ack {id}"), &view, None), Ok(Intent::Act(Action::AcknowledgeAlarm { id })));
    }

    #[test]
    fn slurm_verbs_name_a_job_or_take_the_selected_one() {
        use crate::tui::fixture::slurm_view;
        let view = slurm_view();
        let id = view.slurm.as_ref().unwrap().jobs[0].id;
        let act = |verb| Ok(Intent::Act(Action::Slurm { job: id, verb }));
        assert_eq!(parse_in(&format!("slurm {id} requeue"), &view, None, None), act(SlurmVerb::Requeue));
        assert_eq!(parse_in("slurm hold", &view, None, Some(id)), act(SlurmVerb::Hold));
        let migrate = SlurmVerb::Migrate { partition: Some("spare".into()), exclude: vec!["n1".into(), "n2".into()] };
        assert_eq!(parse_in(&format!("slurm {id} migrate partition=spare exclude=n1,n2"), &view, None, None), act(migrate));
        assert_eq!(parse_in("slurm", &view, None, None), Ok(Intent::Focus(PaneId::Slurm)));
        assert_eq!(parse("pane slurm", &view, None), Ok(Intent::Focus(PaneId::Slurm)));
        // SlurmVerb::parse's own words come back as the error.
        assert!(parse_in(&format!("slurm {id} migrate"), &view, None, None).unwrap_err().contains("partition=NAME"));
        assert!(parse_in(&format!("slurm {id} frobnicate"), &view, None, None).unwrap_err().contains("unknown Slurm verb"));
        assert!(parse_in(&format!("slurm {id}"), &view, None, None).unwrap_err().contains("verb is needed"));
        assert!(parse_in("slurm 1 cancel", &view, None, None).unwrap_err().contains("no Slurm job 1"));
        assert!(parse_in("slurm cancel", &view, None, None).unwrap_err().contains("no Slurm job selected"));
        assert!(parse_in("slurm 1 cancel", &demo_view(), None, None).unwrap_err().contains("no Slurm cluster"));
    }

    #[test]
    fn slurm_completes_jobs_verbs_and_partitions() {
        use crate::tui::fixture::slurm_view;
        let view = slurm_view();
        let id = view.slurm.as_ref().unwrap().jobs[0].id;
        let c = complete("slurm ", &view);
        assert!(c.options.contains(&id.to_string()) && c.options.contains(&"requeue".to_string()), "{c:?}");
        assert_eq!(complete(&format!("slurm {id} req"), &view).line, format!("slurm {id} requeue "));
        assert_eq!(complete(&format!("slurm {id} migrate partition=sp"), &view).line, format!("slurm {id} migrate partition=spare "));
        let c = complete(&format!("slurm {id} migrate partition=spare ex"), &view);
        assert!(c.options.iter().all(|o| o.starts_with("exclude=")) && c.options.len() == 2, "{c:?}");
    }

    #[test]
    fn tab_completes_commands_then_arguments() {
        let view = demo_view();
        assert_eq!(complete("pre", &view).line, "preempt ");
        let c = complete("", &view);
        assert_eq!(c.options.len(), COMMAND_NAMES.len());
        assert_eq!(complete("disc", &view).line, "discipline ");
        assert_eq!(complete("discipline d", &view).line, "discipline drf ");
        let c = complete("migrate j1 ", &view);
        assert_eq!(c.options.len(), view.pools.len(), "{c:?}");
        let c = complete("migrate j1 sp", &view);
        assert!(c.line.starts_with("migrate j1 spot/"), "{c:?}");
        let tenant = &view.budgets[0].tenant;
        assert_eq!(complete(&format!("approve {}", &tenant[..2]), &view).line, format!("approve {tenant} "));
        assert_eq!(complete("zzz", &view), Completion { line: "zzz".into(), options: vec![] });
    }
}
