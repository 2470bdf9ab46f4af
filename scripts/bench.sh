#!/bin/sh
# bench.sh: `make bench`.  Runs scripts/bench.py (generates traces, starts
# nginx + enrichd and, when npm is available, the incumbent Bun/Node
# worker, replays with build/enrich-replay, prints one table).
# Options are passed through: --peer [NAME=]URL, --no-incumbent,
# --requests N, --seed N, --keep.  See docs/benchmarks.md.
set -eu
cd "$(dirname "$0")/.."
exec python3 scripts/bench.py "$@"
