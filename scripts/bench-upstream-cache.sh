#!/bin/sh
# bench-upstream-cache.sh [BUILD]: upstream calls per 1,000 records on a
# multi-region trace, with the cache per worker (the last revision before
# the cache moved to shared memory, built once into build-baseline/) and
# shared by the host (BUILD).
#
# The trace: G groups of 20 video ids (the three providers mixed); every
# group appears in the batches of eight regions (the seed's US GB JP KR TW
# SG VN TH), each region's copy with its own record order and titles.  The
# regions run staggered (region r sends group g at step g + 6r), so the
# eight batches of a group are (almost) never in flight together: a second
# fetch of an id comes from a cache that did not have it.  Four clients
# send the batches in order through nginx to four workers, each batch
# served by whichever worker is free.  The fake upstream (one process, so
# its /_stats counts every call) answers after 2 ms.
#
# What it should be: an id in R = 8 batches spread over W workers is
# fetched once per distinct worker that sees it with caches per worker,
# W * (1 - (1 - 1/W)^R) times on average when the free worker is a random
# one (3.6 for W = 4; never more than min(W, R)), and once with the
# host's cache: the ids asked per 1,000 records fall by that factor, and
# the calls by about as much (every group misses as a whole, one call per
# provider).  The free worker is not a random one (accept() favours some),
# so the expectation is also given from the shares of batches each worker
# actually served: sum over workers of 1 - (1 - share)^R.  Exits non-zero
# when a batch failed or was degraded, or when the shared cache asked for
# more than 2% of the ids twice (two batches of a group in flight at once
# on a loaded machine: no cache can answer an id still being fetched).
# Knobs (env): BENCH_GROUPS (default 100), BENCH_WORKERS (4), BENCH_CLIENTS (4),
# BENCH_BASELINE (a build directory whose enrichd has caches per worker;
# default: built from BENCH_BASELINE_REV, the parent of the commit that put
# the cache in shared memory).
set -eu
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "$B" in /*) ;; *) B="$ROOT/$B" ;; esac

if [ -z "${BENCH_BASELINE:-}" ]; then
    rev=${BENCH_BASELINE_REV:-}
    if [ -z "$rev" ]; then
        first=$(git -C "$ROOT" log --reverse --format=%H -S MAP_SHARED -- src/upstream/cache.c | head -n 1)
        [ -n "$first" ] || { echo "bench-upstream-cache: no revision with a shared cache" >&2; exit 1; }
        rev="$first^"
    fi
    BENCH_BASELINE="$ROOT/build-baseline/build"
    src="$ROOT/build-baseline/src"
    want=$(git -C "$ROOT" rev-parse "$rev")
    if [ "$(cat "$ROOT/build-baseline/rev" 2>/dev/null)" != "$want" ] || [ ! -x "$BENCH_BASELINE/enrichd" ]; then
        echo "bench-upstream-cache: building the per-worker baseline ($want) into build-baseline/"
        rm -rf "$ROOT/build-baseline"
        mkdir -p "$src"
        git -C "$ROOT" archive "$want" | tar -x -C "$src"
        make -s -C "$src" -j2 B="$BENCH_BASELINE" "$BENCH_BASELINE/enrichd" >/dev/null
        echo "$want" > "$ROOT/build-baseline/rev"
    fi
fi
export BENCH_BASELINE
exec python3 - "$ROOT" "$B" <<'PY'
import json, os, random, sys
root, build = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "tests", "integration"))
import harness
from harness import FakeUpstream, metrics, upstream_conf

GROUPS = int(os.environ.get("BENCH_GROUPS", "100"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "4"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "4"))
REGIONS = ["US", "GB", "JP", "KR", "TW", "SG", "VN", "TH"]
PER_GROUP, STAGGER = 20, 6


def trace():
    rnd = random.Random(7)
    out = []
    for t in range(GROUPS + STAGGER * (len(REGIONS) - 1)):
        for r, region in enumerate(REGIONS):
            g = t - STAGGER * r
            if not 0 <= g < GROUPS:
                continue
            recs = [{"provider": ("yt", "vm", "dm")[k % 3], "id": "G%04d-%02d" % (g, k),
                     "title": "%s video %d/%d" % (region, g, k), "duration": 0,
                     "blocked": [region] if k % 9 == 0 else []} for k in range(PER_GROUP)]
            rnd.shuffle(recs)
            out.append(json.dumps(recs).encode())
    return out


def run(build_dir, fake, batches):
    extra = "workers = %d\nmax_requests = 0\n" % WORKERS
    conf = upstream_conf(fake, upstream_timeout_ms=1000, max_calls_per_batch=4, ids_per_call=50)

    def send(c, i):
        c.request("POST", "/v1/enrich", body=batches[i])
        r = c.getresponse()
        r.read()
        return r.status != 200, int(r.getheader("X-Enrich-Degraded") or 0)

    with harness.Env(build=build_dir, name="bench-upc") as env:
        env.start_enrichd(extra + conf)
        env.start_nginx()
        env.wait_workers(WORKERS)
        fake.reset()
        m0 = metrics(env)
        sent = harness.keepalive_clients(env, len(batches), CLIENTS, send)
        m1 = metrics(env)
        st = fake.stats()
    served = [m1.get('enrichd_worker_requests_total{slot="%d"}' % i, 0) -
              m0.get('enrichd_worker_requests_total{slot="%d"}' % i, 0) for i in range(WORKERS)]
    return {"calls": st["data_requests"], "ids": st["ids"], "bad": sum(x[0] for x in sent),
            "degraded": sum(x[1] for x in sent),
            "served": [int(s) for s in served]}


batches = trace()
records = len(batches) * PER_GROUP
distinct = GROUPS * PER_GROUP
with FakeUpstream("--latency-ms", "2", "--close-after", "100") as fake:
    per_worker = run(os.environ["BENCH_BASELINE"], fake, batches)
    shared = run(build, fake, batches)
W, R = WORKERS, len(REGIONS)
predicted = W * (1 - (1 - 1.0 / W) ** R)
shares = [s / max(1, sum(per_worker["served"])) for s in per_worker["served"]]
observed = sum(1 - (1 - p) ** R for p in shares)
k = 1000.0 / records
print("bench-upstream-cache: %d batches of %d records (%d groups x %d regions, %d distinct ids), "
      "%d clients, %d workers" % (len(batches), PER_GROUP, GROUPS, R, distinct, CLIENTS, W))
print("  %-11s %16s %18s %9s %9s  %s" % ("cache", "calls/1000 rec", "ids asked/1000 rec",
                                         "non-200", "degraded", "batches per worker"))
for name, x in (("per worker", per_worker), ("shared", shared)):
    print("  %-11s %16.1f %18.1f %9d %9d  %s" % (name, x["calls"] * k, x["ids"] * k, x["bad"],
                                                 x["degraded"], x["served"]))
fc = per_worker["calls"] / max(1, shared["calls"])
fi = per_worker["ids"] / max(1, shared["ids"])
print("  factor: %.2f fewer calls, %.2f fewer ids asked; expected %.2f for a random free worker "
      "(W=%d, R=%d, at most %d), %.2f from the per-worker run's shares"
      % (fc, fi, predicted, W, R, min(W, R), observed))
print("  shared: %d ids asked for %d distinct (%d twice); ideal %.1f ids/1000 rec"
      % (shared["ids"], distinct, shared["ids"] - distinct, distinct * k))
ok = (per_worker["bad"] == shared["bad"] == 0 and per_worker["degraded"] == shared["degraded"] == 0
      and shared["ids"] <= distinct * 1.02)
print("bench-upstream-cache: %s" % ("PASS" if ok else
                                    "FAIL (non-200, degraded, or ids asked twice when shared)"))
sys.exit(0 if ok else 1)
PY
