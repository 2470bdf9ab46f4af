#!/bin/sh
# bench-incumbent.sh: prepares a private, runnable copy of the incumbent
# worker (../shared/peers/incumbent, read-only) for side-by-side benchmarks
# and prints its directory on stdout.  Nothing of it is committed here.
#
#   scripts/bench-incumbent.sh [DIR]     (default /tmp/enrichd-incumbent)
#
# Exit 0 with the directory printed; exit 1 with a reason on stderr when
# the incumbent, node/npm or the npm registry is not available.  A second
# call reuses the copy when its package-lock.json is unchanged.
set -eu
SRC=${ENR_INCUMBENT:-$(cd "$(dirname "$0")/.." && pwd)/../shared/peers/incumbent}
DIR=${1:-/tmp/enrichd-incumbent}
if [ ! -f "$SRC/package.json" ]; then
    echo "bench-incumbent: no incumbent at $SRC" >&2; exit 1
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "bench-incumbent: node/npm not installed" >&2; exit 1
fi
if [ -x "$DIR/node_modules/@oven/bun-linux-x64/bin/bun" ] && cmp -s "$SRC/package-lock.json" "$DIR/package-lock.json"; then
    echo "$DIR"; exit 0
fi
rm -rf "$DIR"
mkdir -p "$DIR"
cp -r "$SRC"/. "$DIR"/
chmod -R u+w "$DIR"
if ! (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error >"$DIR/npm-ci.log" 2>&1); then
    echo "bench-incumbent: npm ci failed (see $DIR/npm-ci.log)" >&2; exit 1
fi
echo "$DIR"
