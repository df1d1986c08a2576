//! Tests of `App::on_key`: focus, selection, and the modal flows that end in
//! `Control::Send` (or do not).

use ratatui::crossterm::event::{KeyCode, KeyModifiers};

use super::*;
use crate::domain::job::Phase;
use crate::tui::fixture::demo_view;
use crate::tui::status::Tone;

fn press(app: &mut App, view: &View, code: KeyCode) -> Control {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE), view)
}

fn typed(app: &mut App, view: &View, text: &str) {
    for c in text.chars() {
        press(app, view, KeyCode::Char(c));
    }
}

#[test]
fn only_q_and_ctrl_c_quit() {
    let view = demo_view();
    let mut app = App::new();
    assert_eq!(press(&mut app, &view, KeyCode::Esc), Control::Continue);
    assert_eq!(press(&mut app, &view, KeyCode::Char('x')), Control::Continue);
    assert_eq!(press(&mut app, &view, KeyCode::Char('q')), Control::Quit);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(app.on_key(ctrl_c, &view), Control::Quit);
}

/// Issue 35, item 7: quitting a console that runs the engine stops the
/// engine, so q (or Ctrl-C) asks; only y or a second q stops it.
#[test]
fn quitting_the_console_that_runs_the_engine_asks_first() {
    let view = demo_view();
    let mut app = App::owning_engine();
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    for (open, cancel) in [(KeyCode::Char('q'), KeyCode::Char('n')), (KeyCode::Char('q'), KeyCode::Esc), (KeyCode::Char('q'), KeyCode::Enter)] {
        assert_eq!(press(&mut app, &view, open), Control::Continue);
        assert_eq!(app.mode, Mode::ConfirmQuit);
        assert_eq!(press(&mut app, &view, cancel), Control::Continue);
        if cancel == KeyCode::Enter {
            assert_eq!(app.mode, Mode::ConfirmQuit, "a stray Enter does not stop the engine");
            press(&mut app, &view, KeyCode::Esc);
        }
        assert_eq!(app.mode, Mode::Normal);
    }
    assert_eq!(app.on_key(ctrl_c, &view), Control::Continue);
    assert_eq!(app.mode, Mode::ConfirmQuit);
    assert_eq!(app.on_key(ctrl_c, &view), Control::Continue, "Ctrl-C in the dialog backs out");
    assert_eq!(app.mode, Mode::Normal);
    press(&mut app, &view, KeyCode::Char('q'));
    assert_eq!(press(&mut app, &view, KeyCode::Char('y')), Control::Quit);
    press(&mut app, &view, KeyCode::Char('q'));
    assert_eq!(press(&mut app, &view, KeyCode::Char('q')), Control::Quit, "q q quits");
}

/// Issue 35, item 7: speed keys change the simulated speed, on the console
/// that runs the simulation only.
#[test]
fn plus_and_minus_change_the_simulated_speed_where_this_console_runs_it() {
    let view = demo_view();
    let mut app = App::owning_simulation(60.0);
    assert_eq!(press(&mut app, &view, KeyCode::Char('+')), Control::Speed(120.0));
    assert_eq!(press(&mut app, &view, KeyCode::Char('=')), Control::Speed(240.0), "= is + without Shift");
    assert!(app.status.as_ref().is_some_and(|s| s.text == "speed ×240 (was ×120)"), "{:?}", app.status);
    for expected in [120.0, 60.0, 30.0, 15.0, 7.5, 3.75, 1.875, 0.9375, 0.46875, 0.25] {
        assert_eq!(press(&mut app, &view, KeyCode::Char('-')), Control::Speed(expected));
    }
    assert_eq!(press(&mut app, &view, KeyCode::Char('-')), Control::Continue, "not slower than ×0.25");
    assert!(app.status.as_ref().is_some_and(|s| s.text.contains("slowest")), "{:?}", app.status);
    let mut fast = App::owning_simulation(80_000.0);
    assert_eq!(press(&mut fast, &view, KeyCode::Char('+')), Control::Speed(100_000.0), "capped where --speed is");
    assert_eq!(press(&mut fast, &view, KeyCode::Char('+')), Control::Continue);
    // Attached, live, or over a dialog: no say in the engine's speed.
    for mut other in [App::owning_engine(), App::new()] {
        assert_eq!(press(&mut other, &view, KeyCode::Char('+')), Control::Continue);
        assert!(other.status.as_ref().is_some_and(|s| s.text.contains("only the console that runs a simulation")), "{:?}", other.status);
    }
    let mut wall = App::read_only();
    assert_eq!(press(&mut wall, &view, KeyCode::Char('+')), Control::Continue);
}

#[test]
fn the_quit_dialog_names_what_stops() {
    let view = demo_view();
    let mut app = App::owning_engine();
    press(&mut app, &view, KeyCode::Char('q'));
    let area = ratatui::layout::Rect::new(0, 0, 80, 24);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    crate::tui::draw_buffer(&app, &view, &crate::tui::DrawContext::new("SIM"), area, &mut buf);
    let screen: String = buf.content().chunks(80).map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n").collect();
    for needle in ["Quit and stop the engine?", "nothing is scheduled,", "held to its budget", "gpuroom --db LOG", "keep running"] {
        assert!(screen.contains(needle), "{needle}:\n{screen}");
    }
}

#[test]
fn tab_cycles_focus_both_ways_and_digits_jump() {
    let view = demo_view();
    let mut app = App::new();
    let mut seen = vec![app.focus];
    for _ in 0..6 {
        press(&mut app, &view, KeyCode::Tab);
        seen.push(app.focus);
    }
    assert_eq!(seen, [PaneId::Fleet, PaneId::Memory, PaneId::Queue, PaneId::Market, PaneId::Budget, PaneId::Alarms, PaneId::Fleet]);
    app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT), &view);
    assert_eq!(app.focus, PaneId::Alarms);
    press(&mut app, &view, KeyCode::Char('3'));
    assert_eq!(app.focus, PaneId::Queue);
}

#[test]
fn down_moves_the_selection_and_stops_at_the_end() {
    let view = demo_view();
    let n = view.jobs.len();
    assert!(n >= 3);
    let mut app = App::with_focus(PaneId::Queue);
    assert_eq!(row(&app, &view), Some(0));
    press(&mut app, &view, KeyCode::Down);
    assert_eq!(row(&app, &view), Some(1));
    press(&mut app, &view, KeyCode::Char('j'));
    assert_eq!(row(&app, &view), Some(2));
    for _ in 0..n + 5 {
        press(&mut app, &view, KeyCode::Down);
    }
    assert_eq!(row(&app, &view), Some(n - 1));
    press(&mut app, &view, KeyCode::Home);
    assert_eq!(row(&app, &view), Some(0));
    press(&mut app, &view, KeyCode::Up);
    assert_eq!(row(&app, &view), Some(0));
    press(&mut app, &view, KeyCode::End);
    assert_eq!(app.selected_job(&view), Some(view.jobs[*app.job_rows(&view).last().unwrap()].id));
}

#[test]
fn selection_keys_move_only_the_focused_list() {
    let view = demo_view();
    let mut app = App::with_focus(PaneId::Market);
    press(&mut app, &view, KeyCode::Down);
    assert_eq!(row(&app, &view), Some(0));
    app.focus = PaneId::Budget;
    press(&mut app, &view, KeyCode::Down);
    assert_eq!(app.selected_tenant(&view), Some(1));
    assert_eq!(row(&app, &view), Some(0), "the job selection did not move");
}

#[test]
fn when_the_selected_job_leaves_an_action_key_says_so_and_acts_on_nothing() {
    let view = demo_view();
    let mut app = App::with_focus(PaneId::Queue);
    press(&mut app, &view, KeyCode::Down);
    let id = app.selected_job(&view).unwrap();
    let mut gone = view.clone();
    gone.jobs.retain(|j| j.id != id);
    for key in ['p', 'r', 'X', 'm'] {
        assert_eq!(press(&mut app, &gone, KeyCode::Char(key)), Control::Continue, "{key}: nothing is proposed");
        assert!(matches!(app.mode, Mode::Normal), "{key}: no dialog opens on a job the operator did not pick");
        let said = app.status.as_ref().map(|s| s.text.clone()).unwrap_or_default();
        assert!(said.contains(&format!("{id} left the table")), "{key}: {said}");
    }
    let area = ratatui::layout::Rect::new(0, 0, 120, 40);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    crate::tui::draw::draw_buffer(&app, &gone, &crate::tui::context::DrawContext::new("test"), area, &mut buf);
    let shown: String = buf.content.iter().map(|c| c.symbol()).collect();
    assert!(shown.contains(&format!("▷ {id} left")), "the queue's title says it: {shown}");
    // Moving picks the row under the cursor; then the key acts on it.
    press(&mut app, &gone, KeyCode::Up);
    press(&mut app, &gone, KeyCode::Char('p'));
    assert!(matches!(app.mode, Mode::Confirm(_)), "{:?}", app.mode);
}

#[test]
fn the_pool_picker_starts_on_the_cheapest_pool_that_fits_now() {
    let mut view = demo_view();
    // Room everywhere, so that price decides.
    for p in &mut view.pools {
        p.gpus_free_one_node = p.gpus_free_one_node.max(1);
    }
    let small = view.jobs.iter().find(|j| j.phase == Phase::Running && j.gpus == 1).expect("a one-GPU job");
    let Mode::PickPool { options, cursor, .. } = Mode::pick_pool(small.id, &view) else { unreachable!() };
    let per_gpu = |t: &crate::domain::job::PoolTarget| {
        let p = view.pools.iter().find(|p| &p.target == t).unwrap();
        (p.gpus_free_one_node >= 1).then(|| p.price.map(|x| x.0 / i64::from((p.gpus_total / p.nodes_total.max(1)).max(1)))).flatten()
    };
    let fitting: Vec<i64> = options.iter().filter_map(per_gpu).collect();
    assert!(fitting.len() >= 2, "the demo has a choice: {options:?}");
    assert_eq!(per_gpu(&options[cursor]), fitting.iter().min().copied(), "{options:?} cursor {cursor}");
    assert!(cursor > 0 || per_gpu(&options[0]) == fitting.iter().min().copied());
    // A job that fits nowhere: the list's own order, from the top.
    let view = demo_view();
    let big = view.jobs.iter().find(|j| j.gpus == 8 && j.phase == Phase::Running).unwrap();
    let Mode::PickPool { cursor, .. } = Mode::pick_pool(big.id, &view) else { unreachable!() };
    assert_eq!(cursor, 0);
}

#[test]
fn selection_follows_the_job_and_survives_an_empty_view() {
    let view = demo_view();
    let mut app = App::with_focus(PaneId::Queue);
    press(&mut app, &view, KeyCode::Down);
    let id = app.selected_job(&view).unwrap();
    let mut moved = view.clone();
    moved.jobs.remove(0);
    assert_eq!(app.selected_job(&moved), Some(id));
    let empty = View::default();
    assert_eq!(app.selected_index(&empty), None);
    press(&mut app, &empty, KeyCode::Down);
    assert_eq!(app.selected_index(&empty), None);
    assert_eq!(press(&mut app, &empty, KeyCode::Char('p')), Control::Continue);
    assert!(app.status.is_some(), "p with no job says so");
}

#[test]
fn help_and_zoom_close_with_esc() {
    let view = demo_view();
    let mut app = App::new();
    press(&mut app, &view, KeyCode::Char('z'));
    press(&mut app, &view, KeyCode::Char('?'));
    assert!(app.help && app.zoom);
    press(&mut app, &view, KeyCode::Tab);
    assert_eq!(app.focus, PaneId::Fleet, "keys under the help overlay do nothing");
    press(&mut app, &view, KeyCode::Esc);
    assert!(!app.help && app.zoom);
    press(&mut app, &view, KeyCode::Esc);
    assert!(!app.zoom);
    assert_eq!(press(&mut app, &view, KeyCode::Esc), Control::Continue);
    press(&mut app, &view, KeyCode::Char('?'));
    press(&mut app, &view, KeyCode::Char('?'));
    assert!(!app.help);
}

/// The first running job: its row as the default order shows it, and its id.
fn first_running(view: &View) -> (usize, JobId) {
    let rows = App::new().job_rows(view);
    let i = rows.iter().position(|r| view.jobs[*r].phase == Phase::Running).unwrap();
    (i, view.jobs[rows[i]].id)
}

/// The selected job's row, as shown.
fn row(app: &App, view: &View) -> Option<usize> {
    app.selected_row(view, &app.job_rows(view))
}

#[test]
fn preempt_asks_first_and_only_y_sends() {
    let view = demo_view();
    let (i, id) = first_running(&view);
    let mut app = App::with_focus(PaneId::Queue);
    for _ in 0..i {
        press(&mut app, &view, KeyCode::Down);
    }
    assert_eq!(press(&mut app, &view, KeyCode::Char('p')), Control::Continue);
    assert!(matches!(&app.mode, Mode::Confirm(c) if c.action == Action::Preempt { job: id }));
    // Neither Enter nor another key says yes.
    assert_eq!(press(&mut app, &view, KeyCode::Enter), Control::Continue);
    assert_eq!(press(&mut app, &view, KeyCode::Char('p')), Control::Continue);
    assert_eq!(press(&mut app, &view, KeyCode::Char('y')), Control::Send(vec![Action::Preempt { job: id }]));
    assert_eq!(app.mode, Mode::Normal);
    // n and Esc back out, and say nothing was sent.
    press(&mut app, &view, KeyCode::Char('r'));
    assert_eq!(press(&mut app, &view, KeyCode::Char('n')), Control::Continue);
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.status.as_ref().map(|s| &s.tone), Some(&Tone::Hint));
    press(&mut app, &view, KeyCode::Char('X'));
    assert!(matches!(&app.mode, Mode::Confirm(c) if c.action == Action::Cancel { job: id }));
    assert_eq!(press(&mut app, &view, KeyCode::Esc), Control::Continue);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn migrate_picks_a_pool_other_than_the_current_one() {
    let view = demo_view();
    let (i, id) = first_running(&view);
    let mut app = App::with_focus(PaneId::Queue);
    for _ in 0..i {
        press(&mut app, &view, KeyCode::Down);
    }
    press(&mut app, &view, KeyCode::Char('m'));
    let Mode::PickPool { options, cursor, .. } = &app.mode else { panic!("{:?}", app.mode) };
    assert_eq!(options.len(), view.pools.len() - 1, "the job's own pool is not offered");
    let gpus = view.jobs.iter().find(|j| j.id == id).map_or(1, |j| u32::from(j.gpus));
    assert_eq!(*cursor, crate::tui::modes::best_pool(options, gpus, &view).unwrap_or(0), "the cursor starts on the cheapest pool that fits");
    let second = options[(*cursor + 1).min(options.len() - 1)].clone();
    press(&mut app, &view, KeyCode::Down);
    press(&mut app, &view, KeyCode::Enter);
    assert!(matches!(&app.mode, Mode::Confirm(c) if c.action == Action::Migrate { job: id, to: second.clone() }));
    assert_eq!(press(&mut app, &view, KeyCode::Char('y')), Control::Send(vec![Action::Migrate { job: id, to: second }]));
}

#[test]
fn the_approval_form_insists_on_a_reason() {
    let view = demo_view();
    let mut app = App::with_focus(PaneId::Budget);
    let tenant = view.budgets[0].tenant.clone();
    press(&mut app, &view, KeyCode::Char('a'));
    assert!(matches!(&app.mode, Mode::Approve(f) if f.tenant == tenant));
    typed(&mut app, &view, "50");
    press(&mut app, &view, KeyCode::Enter);
    let Mode::Approve(form) = &app.mode else { panic!() };
    assert_eq!(form.error.as_deref(), Some("a reason is required"));
    press(&mut app, &view, KeyCode::Tab);
    press(&mut app, &view, KeyCode::Tab);
    typed(&mut app, &view, "paper deadline");
    press(&mut app, &view, KeyCode::Enter);
    let Mode::Confirm(c) = &app.mode else { panic!("{:?}", app.mode) };
    let Action::ApproveOverrun { amount, reason, .. } = &c.action else { panic!() };
    assert_eq!((amount.map(|a| a.0), reason.as_str()), (Some(50_000_000), "paper deadline"));
    assert!(matches!(press(&mut app, &view, KeyCode::Char('y')), Control::Send(v) if v.len() == 1));
}

#[test]
fn the_command_bar_completes_parses_and_reports_errors_in_place() {
    let view = demo_view();
    let (_, id) = first_running(&view);
    let mut app = App::new();
    press(&mut app, &view, KeyCode::Char(':'));
    typed(&mut app, &view, "pre");
    press(&mut app, &view, KeyCode::Tab);
    typed(&mut app, &view, &id.to_string());
    press(&mut app, &view, KeyCode::Enter);
    assert!(matches!(&app.mode, Mode::Confirm(c) if c.action == Action::Preempt { job: id }), "{:?}", app.mode);
    press(&mut app, &view, KeyCode::Esc);
    press(&mut app, &view, KeyCode::Char(':'));
    typed(&mut app, &view, "bogus");
    press(&mut app, &view, KeyCode::Enter);
    assert!(matches!(&app.mode, Mode::Command { error: Some(e), .. } if e.contains("unknown command")));
    press(&mut app, &view, KeyCode::Esc);
    assert_eq!(app.mode, Mode::Normal);
    // Acknowledging needs no confirmation.
    press(&mut app, &view, KeyCode::Char(':'));
    typed(&mut app, &view, "ack");
    assert!(matches!(press(&mut app, &view, KeyCode::Enter), Control::Send(v) if v.len() == view.alarms.len()));
}

#[test]
fn the_filter_applies_while_typing_and_esc_restores_it() {
    let view = demo_view();
    let mut app = App::with_focus(PaneId::Queue);
    press(&mut app, &view, KeyCode::Char('/'));
    typed(&mut app, &view, "speech");
    let rows = app.job_rows(&view);
    assert!(!rows.is_empty() && rows.iter().all(|i| view.jobs[*i].tenant == "speech"));
    press(&mut app, &view, KeyCode::Enter);
    assert_eq!(app.order.filter_text(), "speech");
    press(&mut app, &view, KeyCode::Char('/'));
    typed(&mut app, &view, "zzz");
    assert!(app.job_rows(&view).is_empty());
    press(&mut app, &view, KeyCode::Esc);
    assert_eq!(app.order.filter_text(), "speech", "Esc while typing restores the filter before");
    press(&mut app, &view, KeyCode::Esc);
    assert_eq!(app.order.filter_text(), "", "Esc in the pane clears it");
    // The selection is within the filtered rows.
    app.order.set_filter("speech");
    let id = app.selected_job(&view).unwrap();
    assert_eq!(view.jobs.iter().find(|j| j.id == id).unwrap().tenant, "speech");
}

#[test]
fn the_wall_console_ignores_every_key_but_quit() {
    let view = demo_view();
    let mut app = App::read_only();
    app.focus = PaneId::Queue;
    for code in [KeyCode::Char('p'), KeyCode::Char('y'), KeyCode::Char(':'), KeyCode::Char('a'), KeyCode::Enter, KeyCode::Tab, KeyCode::Char('r')] {
        assert_eq!(press(&mut app, &view, code), Control::Continue);
    }
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.focus, PaneId::Queue);
    // A wall is left running: a stray Ctrl-C does not take it down; q does, without asking.
    assert_eq!(app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL), &view), Control::Continue);
    assert_eq!(press(&mut app, &view, KeyCode::Char('q')), Control::Quit);
}

mod slurm {
    use super::*;
    use crate::domain::slurm::SlurmVerb;
    use crate::tui::fixture::slurm_view;

    fn slurm_ids(view: &View) -> Vec<u64> {
        view.slurm.as_ref().unwrap().jobs.iter().map(|j| j.id).collect()
    }

    #[test]
    fn tab_visits_the_slurm_pane_only_with_a_cluster() {
        let view = slurm_view();
        let mut app = App::new();
        let mut seen = vec![app.focus];
        for _ in 0..7 {
            press(&mut app, &view, KeyCode::Tab);
            seen.push(app.focus);
        }
        use PaneId::*;
        assert_eq!(seen, [Fleet, Memory, Slurm, Queue, Market, Budget, Alarms, Fleet]);
        app.focus = Queue;
        app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT), &view);
        assert_eq!(app.focus, Slurm);
        press(&mut app, &view, KeyCode::Char('1'));
        press(&mut app, &view, KeyCode::Char('7'));
        assert_eq!(app.focus, Slurm);
        // Without a cluster Tab and Shift-Tab skip it and 7 says why.
        let bare = demo_view();
        let mut app = App::with_focus(Memory);
        press(&mut app, &bare, KeyCode::Tab);
        assert_eq!(app.focus, Queue);
        app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT), &bare);
        assert_eq!(app.focus, Memory);
        press(&mut app, &bare, KeyCode::Char('7'));
        assert_eq!(app.focus, Memory);
        assert!(app.status.as_ref().is_some_and(|s| s.text.contains("no Slurm cluster")));
    }

    #[test]
    fn every_verb_key_asks_first_then_sends_the_verb_for_the_selected_job() {
        let view = slurm_view();
        let ids = slurm_ids(&view);
        let keys = [
            ('p', SlurmVerb::Preempt),
            ('r', SlurmVerb::Requeue),
            ('s', SlurmVerb::Suspend),
            ('S', SlurmVerb::Resume),
            ('h', SlurmVerb::Hold),
            ('H', SlurmVerb::Release),
            ('X', SlurmVerb::Cancel),
        ];
        for (key, verb) in keys {
            let mut app = App::with_focus(PaneId::Slurm);
            press(&mut app, &view, KeyCode::Down);
            let action = Action::Slurm { job: ids[1], verb };
            assert_eq!(press(&mut app, &view, KeyCode::Char(key)), Control::Continue, "{key} sends nothing yet");
            assert!(matches!(&app.mode, Mode::Confirm(c) if c.action == action), "{key}: {:?}", app.mode);
            assert_eq!(press(&mut app, &view, KeyCode::Enter), Control::Continue, "Enter is no yes");
            assert_eq!(press(&mut app, &view, KeyCode::Char('y')), Control::Send(vec![action]), "{key}");
        }
        // n backs out.
        let mut app = App::with_focus(PaneId::Slurm);
        press(&mut app, &view, KeyCode::Char('r'));
        assert_eq!(press(&mut app, &view, KeyCode::Char('n')), Control::Continue);
        assert_eq!(app.mode, Mode::Normal);
    }

    #[test]
    fn migrate_opens_the_command_bar_for_the_partition() {
        let view = slurm_view();
        let ids = slurm_ids(&view);
        let mut app = App::with_focus(PaneId::Slurm);
        press(&mut app, &view, KeyCode::End);
        press(&mut app, &view, KeyCode::Up);
        let job = ids[ids.len() - 2];
        press(&mut app, &view, KeyCode::Char('m'));
        assert!(matches!(&app.mode, Mode::Command { input, .. } if input.text() == format!("slurm {job} migrate partition=")), "{:?}", app.mode);
        typed(&mut app, &view, "sp");
        press(&mut app, &view, KeyCode::Tab);
        typed(&mut app, &view, "exclude=n2");
        press(&mut app, &view, KeyCode::Enter);
        let verb = SlurmVerb::Migrate { partition: Some("spare".into()), exclude: vec!["n2".into()] };
        let action = Action::Slurm { job, verb };
        assert!(matches!(&app.mode, Mode::Confirm(c) if c.action == action), "{:?}", app.mode);
        assert_eq!(press(&mut app, &view, KeyCode::Char('y')), Control::Send(vec![action]));
    }

    #[test]
    fn the_command_bar_takes_slurm_verbs_and_reports_errors_in_place() {
        let view = slurm_view();
        let ids = slurm_ids(&view);
        let mut app = App::with_focus(PaneId::Slurm);
        press(&mut app, &view, KeyCode::Down);
        press(&mut app, &view, KeyCode::Char(':'));
        typed(&mut app, &view, "slurm hold");
        press(&mut app, &view, KeyCode::Enter);
        assert!(matches!(&app.mode, Mode::Confirm(c) if c.action == Action::Slurm { job: ids[1], verb: SlurmVerb::Hold }), "the selected Slurm job");
        press(&mut app, &view, KeyCode::Esc);
        press(&mut app, &view, KeyCode::Char(':'));
        typed(&mut app, &view, &format!("slurm {} migrate nowhere", ids[0]));
        press(&mut app, &view, KeyCode::Enter);
        assert!(matches!(&app.mode, Mode::Command { error: Some(e), .. } if e.contains("partition=NAME")), "{:?}", app.mode);
        press(&mut app, &view, KeyCode::Esc);
        app.focus = PaneId::Fleet;
        press(&mut app, &view, KeyCode::Char(':'));
        typed(&mut app, &view, "pane slurm");
        press(&mut app, &view, KeyCode::Enter);
        assert_eq!(app.focus, PaneId::Slurm);
    }

    #[test]
    fn the_selection_follows_the_slurm_job_and_none_says_so() {
        let view = slurm_view();
        let mut app = App::with_focus(PaneId::Slurm);
        for _ in 0..3 {
            press(&mut app, &view, KeyCode::Char('j'));
        }
        let id = app.selected_slurm_job(&view).unwrap();
        assert_eq!(id, slurm_ids(&view)[3]);
        let mut moved = view.clone();
        moved.slurm.as_mut().unwrap().jobs.remove(0);
        assert_eq!(app.selected_slurm_job(&moved), Some(id), "follows the id, not the row");
        assert_eq!(app.selected_job(&view), Some(view.jobs[App::new().job_rows(&view)[0]].id), "the queue's selection did not move");
        let mut empty = view.clone();
        empty.slurm.as_mut().unwrap().jobs.clear();
        assert_eq!(press(&mut app, &empty, KeyCode::Char('r')), Control::Continue);
        assert_eq!(app.mode, Mode::Normal);
        assert_eq!(app.status.as_ref().map(|s| s.text.as_str()), Some("no Slurm job selected"));
    }

    #[test]
    fn the_wall_ignores_the_slurm_keys() {
        let view = slurm_view();
        let mut app = App::read_only();
        app.focus = PaneId::Slurm;
        for c in ['p', 'r', 's', 'S', 'h', 'H', 'm', 'X', '7', 'y'] {
            assert_eq!(press(&mut app, &view, KeyCode::Char(c)), Control::Continue);
        }
        assert_eq!(app.mode, Mode::Normal);
    }
}

#[test]
fn w_asks_for_every_discipline_then_shows_and_hides_the_pane() {
    let view = demo_view();
    let mut app = App::new();
    assert_eq!(press(&mut app, &view, KeyCode::Char('W')), Control::WhatIf(Vec::new()));
    assert!(app.whatif.shown && app.whatif.running());
    // While it runs, a second ask is not sent: the pane says one runs.
    typed(&mut app, &view, ":whatif drf");
    assert_eq!(press(&mut app, &view, KeyCode::Enter), Control::Continue);
    assert!(app.status.as_ref().is_some_and(|s| s.text.contains("already running")), "{:?}", app.status);
    // Pane keys do nothing under it; Esc closes it, W opens it again without a new ask.
    let focus = app.focus;
    press(&mut app, &view, KeyCode::Tab);
    assert_eq!(app.focus, focus);
    press(&mut app, &view, KeyCode::Esc);
    assert!(!app.whatif.shown);
    assert_eq!(press(&mut app, &view, KeyCode::Char('W')), Control::Continue);
    assert!(app.whatif.shown);
    app.whatif.update(crate::tui::whatif::WhatIfUpdate::Failed("no".into()));
    press(&mut app, &view, KeyCode::Char('W'));
    assert!(!app.whatif.shown);
    // Once done, `:whatif` with words asks again, with those words.
    typed(&mut app, &view, ":whatif drf mlfq other.toml");
    assert_eq!(press(&mut app, &view, KeyCode::Enter), Control::WhatIf(vec!["drf".into(), "mlfq".into(), "other.toml".into()]));
    assert_eq!(app.whatif.asked, "drf mlfq other.toml");
}
