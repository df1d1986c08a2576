//! The help overlay (`?`): the commands of `COMMANDS` that apply in the
//! focused pane with their keys, the `:` commands, and (where it fits) a
//! legend of the glyphs the panes use. Each pane has its own keys, so the
//! overlay says which pane it is about.
//!
//! Generated from the command list so it cannot drift from the keys; draws a
//! centred popup over whatever is below, inside the area it is given.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::app::App;
use super::commands::{COMMANDS, KeyContext};
use super::fmt;
use super::theme::Theme;

const LEGEND: &[(&str, &str)] = &[
    ("· ░ ▁▄█", "GPU: no sample, idle, utilization"),
    ("✕", "node down"),
    ("█ ▓ ░", "memory: in use, allocated, free"),
    ("↻", "requeued job (ran before)"),
    ("▲", "over: max price, budget, quota"),
    ("│", "budget marks at 80 / 100 / 120%"),
    ("╌", "max price across the price chart"),
    ("✓", "acknowledged alarm, approved overrun"),
    ("→OD", "job sent to another pool, waiting there"),
    ("↑ → ↓", "spot price trend: rising, flat, falling (with $/h per hour)"),
    ("frag mem", "free GPU memory outside each GPU's largest free block"),
    ("frag gpu", "free whole GPUs not on the node with the most of them"),
    ("F(M)", "free memory the usual job shapes cannot use (FGD): amber ≥10%, red ≥30%"),
    ("lf", "largest free block of GPU memory (one name: largest free)"),
    ("burn", "header: the fleet's $/h; budgets: what tenants are charged (the gap is idle)"),
    ("%/min", "risk: chance of an interruption in the next minute"),
    ("[13 ··]", "Slurm node: the job on each GPU (its id's end), free"),
    ("⚑ ✗ →", "Slurm: gpuroom's advice, a command failed, on its way"),
];

/// `log`: the event log this console's engine writes or reads, said first
/// (where the run is kept is the question an on-call asks before any key).
pub fn render(app: &App, log: Option<&str>, t: &Theme, area: Rect, buf: &mut Buffer) {
    let key_w = COMMANDS.iter().map(|c| fmt::width(c.keys)).chain(LEGEND.iter().map(|(g, _)| fmt::width(g))).max().unwrap_or(0);
    // What applies under the overlay: judge the commands as if it were closed.
    let beneath = KeyContext { help: false, ..app.keys() };
    let mut lines: Vec<Line> = Vec::new();
    if let Some(log) = log {
        lines.push(Line::from(vec![Span::styled("Log  ", t.heading), Span::styled(log.to_string(), t.text)]));
    }
    lines.push(Line::from(Span::styled(format!("Keys in {} (Tab, then ? for another pane)", app.focus.title()), t.heading)));
    for c in COMMANDS.iter().filter(|c| c.enabled(beneath)) {
        lines.push(Line::from(vec![Span::styled(format!("  {} ", fmt::left(c.keys, key_w)), t.key), Span::styled(c.desc, t.text)]));
    }
    let text_w = (area.width as usize).saturating_sub(8 + key_w).max(20);
    for (i, part) in fmt::wrap(&super::command_bar::COMMAND_NAMES.join(" "), text_w).into_iter().enumerate() {
        let lead = if i == 0 { format!("  {} ", fmt::left(":cmds", key_w)) } else { " ".repeat(key_w + 3) };
        lines.push(Line::from(vec![Span::styled(lead, t.key), Span::styled(part, t.text)]));
    }
    // The legend always, below the keys: on a short screen the overlay scrolls.
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled("Legend", t.heading)));
    for (glyph, meaning) in LEGEND {
        lines.push(Line::from(vec![Span::styled(format!("  {} ", fmt::left(glyph, key_w)), t.figure), Span::styled(*meaning, t.text)]));
    }
    let room = area.height.saturating_sub(2) as usize;
    let total = lines.len();
    let bottom = if total <= room {
        Line::from(Span::styled(" Esc or ? closes ", t.dim))
    } else {
        let first = app.help_scroll.get().min(total - room);
        app.help_scroll.set(first);
        lines = lines.into_iter().skip(first).take(room).collect();
        let more = if first + room < total { "↓ more" } else { "end" };
        Line::from(Span::styled(format!(" {}–{} of {total}, ↑↓ PgUp PgDn scroll ({more}) · Esc or ? closes ", first + 1, first + room), t.dim))
    };
    super::dialog::popup("Help", lines, bottom, area.width, t, area, buf);
}
