#!/usr/bin/env bash
# Regenerates every image in screenshots/ with the real renderer
# (`gpuroom screenshot`), and a PNG copy of each where rsvg-convert exists.
# Usage: scripts/screenshots.sh [path/to/gpuroom]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/gpuroom}
[ -x "$bin" ] || cargo build --release
out=screenshots
mkdir -p "$out"
shot() { # name, then screenshot flags
    local name=$1
    shift
    "$bin" screenshot --out "$out/$name.svg" "$@"
}
shot console-120x40
shot console-80x24 --width 80 --height 24
shot console-200x60 --width 200 --height 60 --hours 96
shot console-300x100 --width 300 --height 100 --hours 96
shot console-120x40-mono --theme mono
shot console-120x40-light --theme light
shot console-120x40-high-contrast --theme high-contrast
shot console-120x40-colour-blind --theme colour-blind
for pane in fleet memory queue market budget alarms; do
    shot "pane-$pane" --pane "$pane"
done
shot pane-memory-fragmentation --pane memory --config fixtures/config/fragmentation.toml
# A spot storm seven simulated hours in: its alarm, critical, on the strip
# and in the pane, with the cleared ones nobody read yet (◌).
shot alarms-storm-120x40 --hours 7 --pane alarms
shot alarms-storm-80x24 --hours 7 --width 80 --height 24
# Enter on a job: the longest-waiting one (why it waits, pool by pool; on
# the paging fixture, whose recsys budget is cut so that its work waits),
# and one running on spot (its max price, risk and checkpoint).
shot job-detail-waiting --dialog detail-waiting --hours 12 --sim-config fixtures/sim/paging.toml
shot job-detail-spot --dialog detail-spot --hours 7
shot dialog-preempt --dialog preempt
shot dialog-migrate --dialog migrate
shot dialog-approve --dialog approve
shot dialog-command --dialog command
shot dialog-whatif --dialog whatif --width 140 --height 45
shot dialog-quit --dialog quit --width 80 --height 24
shot wall-120x40 --wall 0 --theme high-contrast
shot wall-200x60 --wall 1 --width 200 --height 60 --theme high-contrast
shot fleet-1000-gpus --sim-config fixtures/sim/large-1000.toml --pane fleet --hours 6
# The bench's console rooms (each built through the core: seconds).
shot fleet-10000-gpus --room large --pane fleet --width 200 --height 60
shot memory-10000-gpus --room large --pane memory --width 200 --height 60
shot fleet-alibaba-6212-gpus --room trace --pane fleet
shot memory-alibaba-6212-gpus --room trace --pane memory
shot console-alibaba-200x60 --room trace --width 200 --height 60
# The Slurm screens draw the fixture cluster (the simulated world has no Slurm).
profile=$([ "$bin" = target/debug/gpuroom ] && echo "" || echo --release)
TUI_SHOTS="$out" cargo test $profile --lib tui::svg::shots::write_slurm_screenshots -- --ignored --quiet
# A Slurm-on-EC2 site, fed through the live translator into a room.
TUI_SHOTS="$out" cargo test $profile --test slurm_site_screens write_slurm_site_screenshots -- --ignored --quiet
if command -v rsvg-convert >/dev/null; then
    for svg in "$out"/*.svg; do
        rsvg-convert "$svg" -o "${svg%.svg}.png"
    done
fi
