#!/bin/sh
# make bench-engine: engine time per batch (with a memchr baseline of the
# same run), then callgrind's instruction count per batch, which is stable
# on a noisy machine: Ir(--once big) - Ir(--once none).
set -eu
B=${1:-build}
"$B/bench-engine"
if command -v valgrind >/dev/null 2>&1; then
    ir() {
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$B/bench-engine" --once "$1" 2>&1 |
            sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
    }
    base=$(ir none)
    for c in big small; do
        n=$(ir "$c")
        echo "callgrind: $c batch: $((n - base)) instructions per batch (one warm batch: parse + emit)"
    done
else
    echo "callgrind: valgrind not installed, instruction counts skipped"
fi
