#!/bin/sh
# bench-upstream.sh [BUILD]: the upstream benchmark: 200-record batches
# through nginx -> enrichd, once with enrichment off and once against the
# fake upstream (tests/fake_upstream.py) at 2 ms latency, closing each
# connection after 100 requests, with a 90% cache hit ratio (180 of the
# 200 ids of every batch are a hot set every worker has cached; 20 are
# new) and at most 4 calls per batch.  Prints p50/p99 of both runs, the
# outbound calls per batch and the hit ratio the workers measured, and
# whether p50(on) <= 1.5 x p50(off); exits non-zero when a batch failed or
# was degraded or a batch needed more than 4 calls.
# Knobs (env): BENCH_REQUESTS (default 2000), BENCH_CLIENTS (4), BENCH_WORKERS (4),
# BENCH_FAKE_PROCESSES (4: one Python process cannot keep up with the workers).
# Then the cache section, a script of its own (bench-upstream-cache.sh):
# upstream calls per 1,000 records with the cache per worker and shared.
set -eu
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ENR_BUILD="$B"
rc=0
python3 - "$ROOT" <<'PY' || rc=$?
import json, os, sys, time
root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "tests", "integration"))
import harness
from harness import FakeUpstream, metrics, upstream_conf

N = int(os.environ.get("BENCH_REQUESTS", "2000"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "4"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "4"))
HOT = [{"provider": ("yt", "vm", "dm")[i % 3], "id": "Hot%04d" % i, "title": "  Title %d " % i,
        "duration": 0 if i % 2 else i, "blocked": ["JP"] if i % 7 == 0 else []} for i in range(180)]


def batch(tag, i):
    new = [{"provider": ("yt", "vm", "dm")[k % 3], "id": "New-%s-%d-%d" % (tag, i, k),
            "title": "fresh %d" % k, "duration": 0} for k in range(20)]
    return json.dumps(HOT[:90] + new + HOT[90:]).encode()


def run(env, tag, n):
    def send(c, i):
        body = batch(tag, i)
        t0 = time.perf_counter()
        c.request("POST", "/v1/enrich", body=body)
        r = c.getresponse()
        r.read()
        return (time.perf_counter() - t0, r.status != 200,
                int(r.getheader("X-Enrich-Degraded") or 0) > 0)

    sent = harness.keepalive_clients(env, n, CLIENTS, send)
    lat = sorted(x[0] for x in sent)
    return (lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000, sum(x[1] for x in sent),
            sum(x[2] for x in sent))


def bench(fake):
    extra = "workers = %d\nmax_requests = 0\nmax_records = 1000\n" % WORKERS
    conf = upstream_conf(fake, upstream_timeout_ms=150, max_calls_per_batch=4)
    with harness.Env(name="bench-up") as env:
        env.start_enrichd(extra + conf)
        env.start_nginx()
        run(env, "warm", 50 * WORKERS)       # every worker caches the hot set
        m0 = metrics(env)
        res = run(env, "run", N)
        m1 = metrics(env)
    d = lambda k: m1.get(k, 0) - m0.get(k, 0)
    hits, misses = d("enrichd_upstream_cache_hits_total"), d("enrichd_upstream_cache_misses_total")
    return res, d("enrichd_upstream_calls_total") / N, hits / max(1, hits + misses)


with FakeUpstream("--latency-ms", "2", "--close-after", "100", "--processes",
                  os.environ.get("BENCH_FAKE_PROCESSES", "4")) as fake:
    off, _, _ = bench(None)
    on, calls, ratio = bench(fake)
print("bench-upstream: %d batches of 200 records, %d clients, %d workers" % (N, CLIENTS, WORKERS))
print("  enrichment off: p50 %.2f ms  p99 %.2f ms  non-200 %d" % (off[0], off[1], off[2]))
print("  enrichment on : p50 %.2f ms  p99 %.2f ms  non-200 %d  degraded batches %d"
      % (on[0], on[1], on[2], on[3]))
print("  outbound calls per batch %.2f, cache hit ratio %.3f, p50 ratio on/off %.2f (limit 1.5)"
      % (calls, ratio, on[0] / off[0]))
print("  added latency beyond the upstream's own 2 ms: %.2f ms" % (on[0] - off[0] - 2.0))
# Correctness fails the run; the latency target is reported, not enforced:
# when p50(off) < 4 ms the 2 ms upstream latency alone exceeds 1.5x.
correct = off[2] == on[2] == 0 and on[3] == 0 and calls <= 4
print("bench-upstream: p50 target (on <= 1.5 x off): %s"
      % ("MET" if on[0] <= 1.5 * off[0] else "MISSED"))
print("bench-upstream: %s" % ("PASS" if correct else "FAIL (non-200, degraded or > 4 calls)"))
sys.exit(0 if correct else 1)
PY
"$ROOT/scripts/bench-upstream-cache.sh" "$B" || rc=$?
exit "$rc"
