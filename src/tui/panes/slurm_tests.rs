//! Tests of the Slurm pane: what it shows at the widths and heights it gets
//! in the console, zoomed and not.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Modifier;

use super::*;
use crate::tui::fixture::{demo_view, slurm_view};
use crate::tui::panes::testing::draw_pane;

fn draw(view: &View, w: u16, h: u16, selected: Option<usize>) -> Terminal<TestBackend> {
    let window = Cell::new(Window::default());
    draw_pane(w, h, true, |p, a, b| render(view, &SlurmUi { selected, window: &window }, p, a, b))
}

fn lines(terminal: &Terminal<TestBackend>) -> Vec<String> {
    let buf = terminal.backend().buffer();
    (0..buf.area.height).map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>()).collect()
}

fn text(terminal: &Terminal<TestBackend>) -> String {
    lines(terminal).join("\n")
}

#[test]
fn slurm_pane_zoomed_160() {
    let view = slurm_view();
    insta::assert_snapshot!(draw(&view, 160, 20, Some(0)).backend());
}

#[test]
fn slurm_pane_80_wide_keeps_the_note() {
    let view = slurm_view();
    let terminal = draw(&view, 80, 18, Some(1));
    insta::assert_snapshot!(terminal.backend());
    let shown = text(&terminal);
    for needle in ["cluster gpuroom-ci", "ADVISORY", "seen 3s ago", "NOTE", "✗ suspend by carol@", "vision 4/3 ▲borrowing", "[13 13 17 19]"] {
        assert!(shown.contains(needle), "{needle:?} missing at 80 wide:\n{shown}");
    }
    // The selected job's note, cut in its column, is shown in full below.
    assert!(shown.contains("48217 bert-large-eval: ✗ suspend by carol@console: failed: Access/permission"), "{shown}");
}

#[test]
fn slurm_pane_as_the_console_gives_it_at_80x24() {
    // 46×8 is the queue's place at 80×24: the job table keeps three rows.
    let view = slurm_view();
    let terminal = draw(&view, 46, 8, Some(4));
    insta::assert_snapshot!(terminal.backend());
    let rows = lines(&terminal);
    assert!(rows[1].contains("gpuroom-ci"), "{rows:#?}");
    assert!(rows[2].contains("gpu* 7/8 +2 pending  spare 3/4 +1 pending"), "one summary line for the partitions: {rows:#?}");
    assert!(rows[3].contains("ID") && rows[3].contains("STATE"), "{rows:#?}");
    assert!(rows.iter().any(|r| r.contains("▶ 48225")), "the selection scrolled into view: {rows:#?}");
}

#[test]
fn every_section_shows_when_there_is_room() {
    let view = slurm_view();
    let shown = text(&draw(&view, 160, 24, None));
    for needle in [
        "Slurm 22.05.8",
        "preempt = requeue",
        "seen 3s ago",
        "gpu*",
        "7/8 GPUs",
        "2 pending (5 GPUs)",
        "spare",
        "1 pending (1 GPU)",
        "n2",
        "mixed+drain",
        "ECC errors on GPU 3",
        "CPU 24/64",
        "vision 4/3 ▲borrowing",
        "ext 0 no quota +1 pending",
        "⚑ requeue for job 48240",
        "→ cancel by bob@console: on its way",
        "✓ suspend by ana@console: done",
        "Resources",
        "suspended",
        "failed",
        "1 on its way",
    ] {
        assert!(shown.contains(needle), "{needle:?} missing:\n{shown}");
    }
    // Pending jobs show how long they waited; running ones how long they ran.
    let row = |id: &str| shown.lines().find(|l| l.contains(&format!("  {id} "))).unwrap().to_string();
    assert!(row("48240").contains("47m12s") && row("48213").contains("5h12m"), "{shown}");
    assert!(row("48242").contains("held") && row("48242").contains("2h05m"), "{shown}");
}

#[test]
fn gpu_boxes_name_their_job_and_the_selected_job_is_reversed() {
    let view = slurm_view();
    let terminal = draw(&view, 120, 24, Some(0));
    let rows = lines(&terminal);
    let n1 = rows.iter().position(|r| r.contains("┃n1 ")).unwrap();
    assert!(rows[n1].contains("[13 13 17 19]"), "{}", rows[n1]);
    let n2 = rows.iter().position(|r| r.contains("┃n2 ")).unwrap();
    assert!(rows[n2].contains("[01 01 25 ✕✕]"), "a free GPU on a draining node is no place to go: {}", rows[n2]);
    let buf = terminal.backend().buffer();
    let x = rows[n1].chars().position(|c| c == '[').unwrap() as u16 + 1;
    assert!(buf[(x, n1 as u16)].modifier.contains(Modifier::REVERSED), "the selected job's GPUs stand out");
    assert!(!buf[(x + 6, n1 as u16)].modifier.contains(Modifier::REVERSED), "the others do not");
    // The job's id in the table has its boxes' colour.
    let tags = Tags::new(view.slurm.as_ref().unwrap(), &Theme::dark());
    assert_ne!(tags.style(48213), tags.style(48217), "neighbours differ");
}

#[test]
fn tags_grow_until_they_tell_jobs_apart() {
    let mut view = slurm_view();
    let s = view.slurm.as_mut().unwrap();
    s.nodes[0].gpu_jobs = vec![Some(1013), Some(2013), Some(7), None];
    let shown = text(&draw(&view, 120, 24, None));
    assert!(shown.contains("[1013 2013    7 ····]"), "{shown}");
}

#[test]
fn stale_says_why_in_the_header_and_the_title() {
    let mut view = slurm_view();
    view.slurm.as_mut().unwrap().stale = Some("squeue: timed out after 10 s".into());
    for w in [46, 80, 160] {
        let shown = text(&draw(&view, w, 12, None));
        assert!(shown.contains(" STALE "), "title tag at {w}:\n{shown}");
        assert!(shown.contains("STALE: squeue"), "the reason at {w}:\n{shown}");
        assert!(!shown.contains("· seen"), "{shown}");
    }
    assert!(text(&draw(&view, 160, 12, None)).contains("STALE: squeue: timed out after 10 s (seen 3s ago)"));
    view.slurm.as_mut().unwrap().mode = SlurmMode::Control;
    assert!(text(&draw(&view, 160, 12, None)).contains("CONTROL"));
}

#[test]
fn many_nodes_end_in_a_count_and_the_jobs_keep_their_rows() {
    let mut view = slurm_view();
    let s = view.slurm.as_mut().unwrap();
    let spare = s.nodes[1].clone();
    for i in 3..40 {
        s.nodes.push(crate::room::view_slurm::SlurmNodeRow { name: format!("n{i}"), ..spare.clone() });
    }
    let terminal = draw(&view, 120, 20, None);
    let shown = text(&terminal);
    assert!(shown.contains("+") && shown.contains("more nodes, ") && shown.contains("drained or down (z zooms)"), "{shown}");
    let table = lines(&terminal).iter().filter(|r| r.contains(" 482") || r.contains(" 481")).count();
    assert!(table >= 3, "{shown}");
}

#[test]
fn without_a_cluster_or_jobs_it_says_so() {
    assert!(text(&draw(&demo_view(), 60, 6, None)).contains("no Slurm cluster is attached"));
    let mut view = slurm_view();
    view.slurm.as_mut().unwrap().jobs.clear();
    assert!(text(&draw(&view, 60, 12, None)).contains("no jobs in Slurm's queue"));
}

#[test]
fn tiny_areas_do_not_panic_and_nothing_escapes() {
    let view = slurm_view();
    for (w, h) in [(1, 1), (3, 3), (10, 4), (20, 3), (46, 5), (300, 100)] {
        let terminal = draw(&view, w, h, Some(8));
        for cell in &terminal.backend().buffer().content {
            assert!(!cell.symbol().chars().any(|c| c.is_control()));
        }
    }
}
