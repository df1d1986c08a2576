//! One frame: lays out the screen and has each part draw itself — header,
//! alarm strip, the panes, footer (or the command bar, filter or status
//! line), the help overlay and the dialog of the current mode.
//!
//! Pure: it draws the `View` and the `App` it is handed, with the caller's
//! `DrawContext` (source label, data age, theme). It reads no clock and
//! changes nothing but the frame (and the queue's scroll window in `App`).

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::app::App;
use super::context::DrawContext;
use super::pane_id::PaneId;
use super::panes::queue::QueueUi;
use super::panes::slurm::SlurmUi;
use super::panes::{self, PaneProps};
use super::{chrome, dialog, help, layout, log};
use crate::room::View;

/// Draws the whole console into `frame`.
pub fn draw(frame: &mut Frame<'_>, app: &App, view: &View, ctx: &DrawContext) {
    let area = frame.area();
    draw_buffer(app, view, ctx, area, frame.buffer_mut());
}

/// The same, into any buffer (for tests and screenshots).
pub fn draw_buffer(app: &App, view: &View, ctx: &DrawContext, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let a = layout::compute(area, app, view);
    if !a.header.is_empty() {
        chrome::header(view, ctx, t, a.header, buf);
    }
    if !a.strip.is_empty() {
        chrome::alarm_strip(view, chrome::is_stale(ctx), t, a.strip, buf);
    }
    for id in PaneId::ALL {
        let r = a.pane(id);
        if r.is_empty() {
            continue;
        }
        let props = PaneProps { theme: t, focused: app.focus == id };
        match id {
            PaneId::Fleet => panes::fleet::render(view, &app.fleet, props, r, buf),
            PaneId::Memory => panes::memory::render(view, props, r, buf),
            PaneId::Queue if let Some(id) = app.queue.detail(view, &app.order) => panes::job_detail::render(view, id, props, r, buf),
            PaneId::Queue => {
                let rows = app.job_rows(view);
                let ui = QueueUi {
                    selected: app.selected_row(view, &rows),
                    window: app.queue.window(),
                    rows: Some(&rows),
                    filter: app.order.filter_text(),
                    sort: app.order.sort_label(),
                    left: app.queue.left_job(view, &rows),
                };
                panes::queue::render(view, &ui, props, r, buf)
            }
            PaneId::Market => panes::market::render(view, props, r, buf),
            PaneId::Budget => panes::budget::render_selected(view, app.selected_tenant(view).filter(|_| props.focused), props, r, buf),
            PaneId::Alarms => log::render_pane(view, &app.alarms_ui(view), props, r, buf),
            PaneId::Slurm => {
                let ui = SlurmUi { selected: app.selected_slurm_row(view), window: app.slurm.window() };
                panes::slurm::render(view, &ui, props, r, buf)
            }
        }
    }
    if !a.footer.is_empty() {
        if dialog::owns_footer(app) {
            dialog::footer(app, t, a.footer, buf);
        } else {
            chrome::footer(app, view, t, a.footer, buf);
        }
    }
    if app.help {
        help::render(app, ctx.log_path.as_deref(), t, area, buf);
    } else {
        if app.whatif.shown {
            super::whatif_draw::render(&app.whatif, t, area, buf);
        }
        dialog::render(app, view, t, area, buf);
    }
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::*;
    use crate::tui::commands::COMMANDS;
    use crate::tui::fixture::demo_view;
    use crate::tui::theme::Theme;

    fn ctx() -> DrawContext {
        DrawContext { theme: Theme::dark(), ..DrawContext::new("SIM seed 1 ×60") }
    }

    fn screen(w: u16, h: u16, app: &App, view: &View, ctx: &DrawContext) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal.draw(|f| draw(f, app, view, ctx)).unwrap();
        terminal
    }

    fn text(terminal: &Terminal<TestBackend>) -> String {
        terminal.backend().buffer().content.iter().map(|c| c.symbol()).collect()
    }

    #[test]
    fn full_screen_120x40() {
        let view = demo_view();
        let app = App::with_focus(PaneId::Queue);
        insta::assert_snapshot!(screen(120, 40, &app, &view, &ctx()).backend());
    }

    /// Live: the header counts sources that answer, and a failed source is an
    /// alarm by name in the strip.
    #[test]
    fn full_screen_live_with_a_failed_source_120x40() {
        let view = crate::tui::panes::fleet_detail::tests::live_view();
        let ctx = DrawContext::new("LIVE nvml·dcgm ×1".to_string());
        let terminal = screen(120, 40, &App::default(), &view, &ctx);
        insta::assert_snapshot!(terminal.backend());
        let shown = text(&terminal);
        assert!(shown.contains("src 1/2"), "{shown}");
        assert!(shown.contains("dcgm http://n01:9400/metrics: timed out after 2 s"), "{shown}");
    }

    #[test]
    fn full_screen_80x24() {
        let view = demo_view();
        insta::assert_snapshot!(screen(80, 24, &App::default(), &view, &ctx()).backend());
    }

    #[test]
    fn full_screen_200x60_stale() {
        let view = demo_view();
        let ctx = DrawContext { data_age: Some(std::time::Duration::from_secs(42)), ..ctx() };
        insta::assert_snapshot!(screen(200, 60, &App::default(), &view, &ctx).backend());
    }

    #[test]
    fn zoomed_queue_80x24() {
        let view = demo_view();
        let mut app = App::with_focus(PaneId::Queue);
        app.zoom = true;
        insta::assert_snapshot!(screen(80, 24, &app, &view, &ctx()).backend());
    }

    #[test]
    fn full_screen_with_slurm_160x48() {
        let view = crate::tui::fixture::slurm_view();
        let terminal = screen(160, 48, &App::with_focus(PaneId::Slurm), &view, &ctx());
        insta::assert_snapshot!(terminal.backend());
        let shown = text(&terminal);
        for needle in [" Slurm ", "cluster gpuroom-ci", "[13 13 17 19]", "⚑ requeue", "p preempt", "r requeue"] {
            assert!(shown.contains(needle), "{needle:?} missing:\n{shown}");
        }
        assert!(!shown.contains(" Queue "), "the Slurm pane holds the queue's place");
        let queue = text(&screen(160, 48, &App::with_focus(PaneId::Queue), &view, &ctx()));
        assert!(queue.contains(" Queue ") && !queue.contains("cluster gpuroom-ci"), "the focused queue takes it back");
    }

    #[test]
    fn slurm_at_80x24_and_zoomed() {
        let view = crate::tui::fixture::slurm_view();
        let app = App::with_focus(PaneId::Slurm);
        insta::assert_snapshot!("slurm_80x24", screen(80, 24, &app, &view, &ctx()).backend());
        let mut zoomed = app.clone();
        zoomed.zoom = true;
        insta::assert_snapshot!("slurm_zoomed_80x24", screen(80, 24, &zoomed, &view, &ctx()).backend());
    }

    #[test]
    fn help_overlay_lists_every_command_of_the_pane() {
        let view = demo_view();
        let mut app = App::new();
        app.help = true;
        let terminal = screen(80, 24, &app, &view, &ctx());
        insta::assert_snapshot!(terminal.backend());
        for pane in PaneId::ALL {
            let mut app = App::with_focus(pane);
            let shown_for = app.clone();
            app.help = true;
            let shown = text(&screen(120, 40, &app, &crate::tui::fixture::slurm_view(), &ctx()));
            for c in COMMANDS.iter().filter(|c| c.enabled(&shown_for)) {
                assert!(shown.contains(c.keys), "help in {pane:?} lacks the keys {:?}", c.keys);
                assert!(shown.contains(c.desc), "help in {pane:?} lacks {:?}", c.desc);
            }
        }
    }

    #[test]
    fn footer_hints_come_from_the_command_list_and_help_and_quit_always_show() {
        let view = demo_view();
        for (w, pane) in [(120, PaneId::Queue), (80, PaneId::Queue), (80, PaneId::Budget), (60, PaneId::Alarms)] {
            let app = App::with_focus(pane);
            let terminal = screen(w, 40, &app, &view, &ctx());
            let buf = terminal.backend().buffer();
            let footer: String = (0..w).map(|x| buf[(x, 39)].symbol().to_string()).collect();
            assert!(footer.contains("? help") && footer.contains("q quit"), "{footer}");
            let hints: Vec<String> = COMMANDS.iter().filter(|c| c.enabled(&app)).filter_map(|c| c.hint).map(|(k, w)| format!("{k} {w}")).collect();
            assert!(footer.contains(&hints[0]), "the first hint shows: {footer}");
        }
    }

    #[test]
    fn the_monochrome_theme_uses_no_colour_anywhere() {
        let view = demo_view();
        let mut app = App::with_focus(PaneId::Queue);
        app.help = true;
        let ctx = DrawContext { theme: Theme::mono(), ..ctx() };
        for (w, h) in [(120, 40), (80, 24)] {
            for help in [false, true] {
                app.help = help;
                let terminal = screen(w, h, &app, &view, &ctx);
                for cell in &terminal.backend().buffer().content {
                    assert_eq!((cell.fg, cell.bg), (ratatui::style::Color::Reset, ratatui::style::Color::Reset));
                }
            }
        }
    }

    #[test]
    fn the_important_figures_are_said_in_words() {
        let view = demo_view();
        let shown = text(&screen(120, 40, &App::new(), &view, &ctx()));
        for needle in ["OVER MAX", "draining 87s", "↻ requeued", "▲ 3 alarms", "▲ 1 over budget", "2020-01-06 03:00:00", "$58.02/h"] {
            assert!(shown.contains(needle), "{needle:?} missing");
        }
        let small = text(&screen(80, 24, &App::new(), &view, &ctx()));
        for needle in ["▲OVER", "draining 87s", "▲ ALARM", "2020-01-06 03:00:00"] {
            assert!(small.contains(needle), "{needle:?} missing at 80x24");
        }
    }

    #[test]
    fn acknowledged_alarms_leave_the_count_and_the_strip() {
        let mut view = demo_view();
        let newest = view.alarms[0].text.clone();
        view.alarms[0].acked_by = Some("ana".into());
        let shown = text(&screen(120, 40, &App::new(), &view, &ctx()));
        assert!(shown.contains("▲ 2 alarms") && shown.contains("✓ 1 acked"), "{shown}");
        let strip: String = shown.chars().skip(120).take(120).collect();
        assert!(!strip.contains(&newest[..20]), "the strip shows the newest unacknowledged alarm: {strip}");
        for a in &mut view.alarms {
            a.acked_by = Some("ana".into());
        }
        let shown = text(&screen(120, 40, &App::new(), &view, &ctx()));
        assert!(shown.contains("acknowledged alarm(s) still active") && !shown.contains("▲ ALARM"), "{shown}");
    }

    #[test]
    fn a_cleared_alarm_nobody_read_stays_counted_and_listed_until_acknowledged() {
        let mut view = demo_view();
        let fired = view.alarms[0].raised_at;
        let cleared = fired + chrono::TimeDelta::minutes(3);
        for a in &mut view.alarms {
            a.cleared_at = Some(cleared);
        }
        let app = App::with_focus(PaneId::Alarms);
        let shown = text(&screen(120, 40, &app, &view, &ctx()));
        let n = view.alarms.len();
        assert!(shown.contains(&format!("◌ {n} cleared unread")), "the header counts them: {shown}");
        assert!(!shown.contains("✓ no alarms") && !shown.contains("▲ ALARM"), "neither quiet nor active: {shown}");
        assert!(shown.contains(&format!("◌ {n} fired and cleared unseen (:ack all)")), "the strip says so: {shown}");
        let mut zoomed = App::with_focus(PaneId::Alarms);
        zoomed.zoom = true;
        let pane = text(&screen(160, 40, &zoomed, &view, &ctx()));
        let line = format!("cleared {}, unread", crate::tui::fmt::time_of_day(cleared));
        assert_eq!(pane.matches(&line).count(), n, "the pane lists each: {pane}");
        // At 80x24 the header keeps the unread count (short form).
        let small = text(&screen(80, 24, &app, &view, &ctx()));
        assert!(small.contains(&format!("◌{n}")) || small.contains(&format!("◌ {n}")), "{small}");
    }

    #[test]
    fn simulated_data_says_so_at_every_size_owned_or_attached_and_live_does_not() {
        let view = demo_view();
        let owned = DrawContext { simulated: true, ..ctx() };
        let mut attached_view = view.clone();
        attached_view.world = Some("sim".into());
        for (w, h) in [(63, 15), (80, 24), (120, 40), (200, 60)] {
            let shown = text(&screen(w, h, &App::new(), &view, &owned));
            let header: String = shown.chars().take(w as usize).collect();
            assert!(header.contains("SIM"), "{w}x{h} owning console: {header}");
            let shown = text(&screen(w, h, &App::new(), &attached_view, &ctx()));
            let header: String = shown.chars().take(w as usize).collect();
            assert!(header.contains("SIM"), "{w}x{h} attached console: {header}");
        }
        let full = text(&screen(200, 60, &App::new(), &attached_view, &ctx()));
        assert!(full.contains("SIMULATED"), "the full word where it fits");
        let mut live = view.clone();
        live.world = Some("live".into());
        let shown = text(&screen(200, 60, &App::new(), &live, &ctx()));
        assert!(!shown.contains("SIMULATED"), "{shown}");
    }

    #[test]
    fn help_scrolls_at_80x24_to_its_last_line() {
        let view = demo_view();
        let mut app = App::new();
        app.on_key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE), &view);
        let top = text(&screen(80, 24, &app, &view, &ctx()));
        assert!(top.contains("Keys in Fleet") && top.contains("↓ more"), "{top}");
        assert!(!top.contains("Slurm: gpuroom's advice"), "the legend's end is below");
        app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE), &view);
        let end = text(&screen(80, 24, &app, &view, &ctx()));
        assert!(end.contains("Slurm: gpuroom's advice") && end.contains("(end)"), "{end}");
        assert!(!end.contains("Keys in Fleet"), "scrolled past the top");
        // Up from the end moves at once (the scroll is clamped when drawn).
        app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE), &view);
        let up = text(&screen(80, 24, &app, &view, &ctx()));
        assert!(up.contains("↓ more"), "{up}");
        // A tall screen shows all of it without scrolling.
        let tall = text(&screen(120, 60, &app, &view, &ctx()));
        assert!(tall.contains("Keys in Fleet") && tall.contains("Slurm: gpuroom's advice") && !tall.contains("scroll"), "{tall}");
    }

    #[test]
    fn enter_on_a_job_opens_its_detail_and_esc_comes_back() {
        let view = demo_view();
        let mut app = App::with_focus(PaneId::Queue);
        app.zoom = true;
        let key = |app: &mut App, code| app.on_key(KeyEvent::new(code, KeyModifiers::NONE), &view);
        // The first row is the longest-waiting queued job.
        key(&mut app, KeyCode::Enter);
        let queued = app.selected_job(&view).unwrap();
        let shown = text(&screen(120, 40, &app, &view, &ctx()));
        let row = view.jobs.iter().find(|j| j.id == queued).unwrap();
        for needle in
            [format!("{} {}", row.id, row.name), "waits for".into(), "no fit".into(), "needs 8 on one node".into(), "history".into(), "Esc back".into()]
        {
            assert!(shown.contains(&needle), "{needle:?} missing:\n{shown}");
        }
        insta::assert_snapshot!("job_detail_queued_120x40", screen(120, 40, &app, &view, &ctx()).backend());
        // ↓ moves to the next job, still in detail: down to a running spot job.
        let spot = view.spot_jobs.first().map(|s| s.id).unwrap();
        while app.selected_job(&view) != Some(spot) {
            key(&mut app, KeyCode::Down);
        }
        let shown = text(&screen(120, 40, &app, &view, &ctx()));
        for needle in ["max price", "vs market", "headroom", "risk", "%/min", "saved", "so far"] {
            assert!(shown.contains(needle), "{needle:?} missing:\n{shown}");
        }
        insta::assert_snapshot!("job_detail_spot_120x40", screen(120, 40, &app, &view, &ctx()).backend());
        key(&mut app, KeyCode::Esc);
        let back = text(&screen(120, 40, &app, &view, &ctx()));
        assert!(back.contains("WAITS FOR") && !back.contains("Esc back"), "{back}");
    }

    #[test]
    fn help_says_where_the_log_is() {
        let view = demo_view();
        let mut app = App::new();
        app.help = true;
        let with_log = DrawContext { log_path: Some("/var/lib/gpuroom/room.db".into()), ..ctx() };
        for (w, h) in [(80, 24), (120, 40)] {
            let shown = text(&screen(w, h, &app, &view, &with_log));
            assert!(shown.contains("Log  /var/lib/gpuroom/room.db"), "{w}x{h}: {shown}");
        }
    }

    #[test]
    fn a_stale_view_says_alarms_unknown_not_a_green_check() {
        let mut view = demo_view();
        view.alarms.clear();
        let fresh = text(&screen(120, 40, &App::new(), &view, &ctx()));
        assert!(fresh.contains("✓ no alarms"), "{fresh}");
        let stale = DrawContext { data_age: Some(std::time::Duration::from_secs(42)), ..ctx() };
        let shown = text(&screen(120, 40, &App::new(), &view, &stale));
        assert!(shown.contains("alarms?") && shown.contains("? alarms unknown") && !shown.contains("✓ no"), "{shown}");
    }

    #[test]
    fn tiny_sizes_do_not_panic() {
        let view = demo_view();
        let slurm = crate::tui::fixture::slurm_view();
        for focus in [PaneId::Queue, PaneId::Slurm] {
            let mut app = App::with_focus(focus);
            for (w, h) in [(1, 1), (2, 2), (20, 5), (5, 20), (40, 10), (59, 12), (79, 23), (300, 100), (0, 0)] {
                for help in [false, true] {
                    for zoom in [false, true] {
                        app.help = help;
                        app.zoom = zoom;
                        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
                        for v in [&view, &slurm, &View::default()] {
                            terminal.draw(|f| draw(f, &app, v, &ctx())).unwrap();
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_hostile_job_name_never_puts_an_escape_on_screen() {
        use crate::domain::event::{Event, TenantSpec};
        use crate::domain::ids::TenantId;
        use crate::domain::job::JobSpec;
        use crate::domain::testkit::job_spec;
        use crate::domain::units::Micros;
        let mut room = crate::tui::fixture::demo_room();
        let at = room.now().unwrap();
        let evil = "\x1b[2J\x1b]0;pwned\x07\u{9b}31m";
        let spec = TenantSpec {
            id: TenantId(format!("t{evil}")),
            quota_gpus: 1,
            monthly_budget: Micros(1),
            quota_gpu_mem: crate::domain::units::Mib(0),
            borrow_limit_gpus: 0,
        };
        room.apply(at, &Event::TenantDefined { spec });
        let spec = JobSpec { name: format!("job{evil}"), ..job_spec(99, &format!("t{evil}"), 64) };
        room.apply(at + chrono::TimeDelta::seconds(1), &Event::JobSubmitted { spec });
        let view = room.view();
        assert!(view.jobs.iter().any(|j| j.name.starts_with("job")), "the job is in the view");
        for (w, h) in [(120, 40), (80, 24)] {
            let mut app = App::with_focus(PaneId::Queue);
            // The engine's order lists it last.
            app.order.sort = crate::tui::job_order::SortKey::Queue;
            app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE), &view);
            let terminal = screen(w, h, &app, &view, &ctx());
            assert!(text(&terminal).contains("job[2J"), "the hostile job is on screen at {w}x{h}");
            for cell in &terminal.backend().buffer().content {
                assert!(!cell.symbol().chars().any(|c| c.is_control()), "control character in {:?}", cell.symbol());
            }
        }
    }

    #[test]
    fn keys_then_draw_moves_the_highlight() {
        let view = demo_view();
        let mut app = App::with_focus(PaneId::Queue);
        for _ in 0..3 {
            app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE), &view);
        }
        let terminal = screen(120, 40, &app, &view, &ctx());
        let shown = text(&terminal);
        assert!(shown.contains(&format!("▶ {}", view.jobs[app.job_rows(&view)[3]].id)), "selected row marked");
    }
}
