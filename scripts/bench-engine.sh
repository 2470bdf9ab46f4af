#!/bin/sh
# make bench-engine: engine time per batch (with a memchr baseline of the
# same run), then callgrind's instruction count per batch, which is stable
# on a noisy machine: Ir(--once big) - Ir(--once none).  The batches
# `make bench` sends (gen-trace --shape big, same seed) are timed and
# counted too: they carry more nested fields nobody reads than the
# built-in batch, and are what the closed-loop figures are made of.
set -eu
B=${1:-build}
TRACE="$B/bench-engine-trace.jsonl"
scripts/gen-trace --shape big -n 20 --seed 7 -o "$TRACE" 2>/dev/null
"$B/bench-engine"
"$B/bench-engine" --trace "$TRACE"
if command -v valgrind >/dev/null 2>&1; then
    ir() {
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$B/bench-engine" "$@" 2>&1 |
            sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
    }
    base=$(ir --once none)
    for c in big small; do
        n=$(ir --once "$c")
        echo "callgrind: $c batch: $((n - base)) instructions per batch (one warm batch: parse + emit)"
    done
    base=$(ir --once-trace-none "$TRACE")
    n=$(ir --once-trace "$TRACE")
    echo "callgrind: trace batch: $(((n - base) / 20)) instructions per batch (mean of 20, warm)"
else
    echo "callgrind: valgrind not installed, instruction counts skipped"
fi
