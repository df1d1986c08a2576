#!/usr/bin/env bash
# Measures the real console in a real terminal at 1,000 GPUs: bytes written
# to the terminal per second, CPU % of the gpuroom process and its RSS, at
# steady state (default speed ×60) and idle (--speed 0.001, the sim barely
# moves), at 200×60 and 120×40. See docs/console-bench.md.
#
#   scripts/console-load.sh                 # builds --release if needed
#   WARMUP=20 SAMPLE=30 scripts/console-load.sh
#
# Each run: gpuroom in a detached tmux session of the given size, every byte
# it writes to its pane appended to a file by `tmux pipe-pane -o`, WARMUP s
# to get past the simulated warm-up and the first frame, then SAMPLE s of
# figures: bytes/s from the file's growth, CPU from /proc/PID/stat
# (utime + stime, in clock ticks of `getconf CLK_TCK`), RSS from
# /proc/PID/status. Linux only. The tmux server is killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=${CONFIG:-fixtures/sim/large-1000.toml}
WARMUP=${WARMUP:-15}      # seconds after the console appears before sampling
SAMPLE=${SAMPLE:-30}      # seconds sampled
START_LIMIT=${START_LIMIT:-300}  # seconds allowed for the simulated warm-up
BIN=target/release/gpuroom

command -v tmux >/dev/null 2>&1 || { echo "console-load: tmux is required (apt-get install tmux)" >&2; exit 2; }
[ -r /proc/self/stat ] || { echo "console-load: needs Linux /proc" >&2; exit 2; }
[ -f "$CONFIG" ] || { echo "console-load: no $CONFIG" >&2; exit 2; }
if [ ! -x "$BIN" ] || [ -n "$(find src Cargo.toml -newer "$BIN" -print -quit)" ]; then
    echo "console-load: building $BIN" >&2
    cargo build --release --quiet
fi

# One tmux server per run (a fresh socket each time: a server that is still
# shutting down refuses new sessions), all killed on exit.
SOCKETS=()
SOCKET=""
WORK=$(mktemp -d)
tm() { tmux -L "$SOCKET" -f /dev/null "$@"; }
cleanup() {
    for s in "${SOCKETS[@]}"; do tmux -L "$s" -f /dev/null kill-server >/dev/null 2>&1 || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

TICKS=$(getconf CLK_TCK)
cpu_ticks() { # utime + stime of PID (fields 14 and 15; the name in field 2 may hold spaces)
    local rest
    rest=$(sed 's/^.*) //' "/proc/$1/stat")
    awk '{ print $12 + $13 }' <<<"$rest"
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
size_of() { stat -c %s "$1" 2>/dev/null || echo 0; }

# run NAME WIDTH HEIGHT SPEED: prints one table row.
run() {
    local name=$1 w=$2 h=$3 speed=$4 out="$WORK/$1.bytes"
    : >"$out"
    [ -n "$SOCKET" ] && tm kill-server >/dev/null 2>&1 || true
    SOCKET="gpuroom-load-$$-$name-${w}x$h"
    SOCKETS+=("$SOCKET")
    tm new-session -d -s load -x "$w" -y "$h" \
        "$BIN --sim-config $CONFIG --no-log --speed $speed; echo \"gpuroom exited with \$?\"; sleep 600"
    tm pipe-pane -o -t load "cat >> $out"
    # The pane runs sh; gpuroom is its child.
    local shell pid="" tries=0
    shell=$(tm display-message -p -t load '#{pane_pid}')
    while [ -z "$pid" ] && [ "$tries" -lt 50 ]; do
        pid=$(pgrep -P "$shell" -x gpuroom 2>/dev/null || cat "/proc/$shell/task/$shell/children" 2>/dev/null || true)
        pid=${pid%% *}
        [ -n "$pid" ] || sleep 0.1
        tries=$((tries + 1))
    done
    [ -n "$pid" ] || { echo "console-load: $name: gpuroom did not start" >&2; tm capture-pane -p -t load >&2 || true; exit 1; }
    # The console is up once its screen shows the pane titles.
    local waited=0
    until tm capture-pane -p -t load | grep -q "Budgets"; do
        sleep 1
        waited=$((waited + 1))
        if [ "$waited" -ge "$START_LIMIT" ] || ! kill -0 "$pid" 2>/dev/null; then
            echo "console-load: $name: the console did not come up within ${START_LIMIT}s:" >&2
            tm capture-pane -p -t load >&2 || true
            exit 1
        fi
    done
    sleep "$WARMUP"
    local b0 c0 t0 b1 c1 t1 rss
    b0=$(size_of "$out"); c0=$(cpu_ticks "$pid"); t0=$(date +%s.%N)
    sleep "$SAMPLE"
    b1=$(size_of "$out"); c1=$(cpu_ticks "$pid"); t1=$(date +%s.%N)
    rss=$(rss_kib "$pid")
    kill -0 "$pid" 2>/dev/null || { echo "console-load: $name: gpuroom died while sampled" >&2; exit 1; }
    tm send-keys -t load q
    awk -v n="$name" -v w="$w" -v h="$h" -v s="$speed" -v up="$waited" \
        -v b="$((b1 - b0))" -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v hz="$TICKS" -v rss="$rss" \
        'BEGIN { dt = t1 - t0;
                 printf "%-8s %7s %7s %9.1f %10.1f %7.1f %8.0f %6ds\n", n, w "x" h, s, b / dt / 1000, b / dt / 4, 100 * c / hz / dt, rss / 1024, up }'
}

echo "gpuroom console at 1,000 GPUs ($CONFIG), warm-up ${WARMUP}s then ${SAMPLE}s sampled; $(nproc) CPUs"
printf "%-8s %7s %7s %9s %10s %7s %8s %7s\n" run size speed "KB/s" "B/view@4" "CPU%" "RSS MiB" "start"
run steady 200 60 60
run idle 200 60 0.001
run steady 120 40 60
run idle 120 40 0.001
echo "KB/s: bytes written to the terminal per second (1 KB = 1000 B); B/view@4: that over 4 views/s;"
echo "CPU%: of one core, the whole process (engine and console); start: seconds until the first frame."
