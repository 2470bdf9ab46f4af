#!/bin/sh
# bench-upstream-net.sh [BUILD]: the provider across a network path, a
# section of make bench-upstream.  The fake upstream behind nginx as TLS
# terminator, closing every connection after 100 requests, reached through
# a delaying proxy (tests/integration/tls_fixture.py, tests/delay_proxy.py)
# at each round trip of BENCH_NET_RTTS; at each, plain HTTP and HTTPS side
# by side (their batches interleaved, so the machine's load weighs on both
# alike), workers 2, the shipped defaults plus upstream_url (and
# upstream_ca_file for the test's CA), and upstream_timeout_ms = 400 past
# 100 ms (the deadline must cover a round trip and the provider's time).
# Sequential batches of 20 new ids (three calls each) after a warm-up.
# Prints, per round trip and scheme: records enriched, degraded batches,
# batch p50 / p99, the provider's requests, connections and resumed TLS
# sessions, the workers' descriptors (less provider sockets) before and
# after; then whether HTTPS meets the goal at each round trip (>= 99 %
# enriched, p50 <= round trip + 10 ms).  Exits non-zero only when a batch
# was not answered 200 with all its records.
# Knobs (env): BENCH_NET_BATCHES (default 300 per cell), BENCH_NET_RTTS
# ("0 10 50 150"), BENCH_NET_WORKERS (2).
set -eu
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ENR_BUILD="$B"
exec python3 - "$ROOT" <<'PY'
import os, sys
root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "tests", "integration"))
import tls_fixture

N = int(os.environ.get("BENCH_NET_BATCHES", "300"))
RTTS = [int(x) for x in os.environ.get("BENCH_NET_RTTS", "0 10 50 150").split()]
WORKERS = int(os.environ.get("BENCH_NET_WORKERS", "2"))
WARM = 20
SLOW_RTT_MS = 100        # past it the shipped 150 ms deadline cannot cover a round trip
SLOW_TIMEOUT_MS = 400
GOAL_SHARE, GOAL_MARGIN_MS = 0.99, 10


def conf(url, rtt, ca=None):
    lines = ["workers = %d" % WORKERS, "upstream_url = %s" % url]
    if ca:
        lines.append("upstream_ca_file = %s" % ca)
    if rtt > SLOW_RTT_MS:
        lines.append("upstream_timeout_ms = %d" % SLOW_TIMEOUT_MS)
    return "\n".join(lines) + "\n"


def flat(res):
    a = sum(v[0] - v[1] for v in res["s0"].values())
    b = sum(v[0] - v[1] for v in res["s1"].values())
    return "%d->%d" % (a, b)


rows, bad, goals = [], 0, []
with tls_fixture.Provider() as prov:
    for rtt in RTTS:
        runs = [("http", "http", conf(prov.url("http", rtt), rtt)),
                ("https", "https", conf(prov.url("https", rtt), rtt, prov.pki.ca))]
        out = tls_fixture.side_by_side(prov, runs, rtt, N, WARM, WORKERS)
        for label in ("http", "https"):
            res = out[label]
            log = res["log"]
            new = [x for x in log if x["nth"] == 1]
            rows.append((rtt, label, 100 * res["share"], res["degraded_batches"], res["p50"],
                         res["p99"], len(log), sum(1 for x in log if x["method"] == "HEAD"),
                         len(new), sum(1 for x in new if x["reused"]), flat(res)))
            bad += res["bad"]
        h = out["https"]
        goals.append((rtt, h["share"] >= GOAL_SHARE and h["p50"] <= rtt + GOAL_MARGIN_MS))

print("bench-upstream-net: %d sequential batches of %d new ids per cell, workers %d, the provider "
      "closing every connection after %d requests" % (N, tls_fixture.BATCH_IDS, WORKERS,
                                                      tls_fixture.KEEPALIVE_REQUESTS))
print("| round trip | scheme | enriched | degraded batches | batch p50 | batch p99 "
      "| provider requests (HEAD) | new connections (resumed) | worker fds |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %d ms | %s | %.1f %% | %d of %d | %.1f ms | %.1f ms | %d (%d) | %d (%d) | %s |"
          % (r[0], r[1], r[2], r[3], N, r[4], r[5], r[6], r[7], r[8], r[9], r[10]))
print("bench-upstream-net: HTTPS goal (>= %.0f %% enriched, p50 <= round trip + %d ms): %s"
      % (100 * GOAL_SHARE, GOAL_MARGIN_MS,
         ", ".join("%d ms %s" % (rtt, "MET" if ok else "MISSED") for rtt, ok in goals)))
print("bench-upstream-net: %s" % ("PASS" if bad == 0 else "FAIL (%d batches not answered)" % bad))
sys.exit(0 if bad == 0 else 1)
PY
