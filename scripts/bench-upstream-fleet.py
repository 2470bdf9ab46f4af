#!/usr/bin/env python3
"""bench-upstream-fleet.py: `make bench-upstream`'s fleet section: YouTube
calls and quota units per 1,000 records for one host and for three, each
without and with one shared store (docs/fleet.md, "One store for the
fleet").

The trace: BENCH_FLEET_RECORDS records (default 12,000) drawn with a skew
from BENCH_FLEET_IDS YouTube ids (1,500), in batches of 50, sent one after
another and spread over the hosts in turn, as the front's round robin
does.  Each host is enrichd (2 workers) behind its own nginx, on the
YouTube fake over HTTPS (tests/integration/providers_fixture.py), whose
counters see every call and every unit; with the store, every host on
one redis-server started here.  Each run has ids of its own, so every
cache (the hosts' and the store's) starts cold.  The goal: with the
store, three hosts' units per 1,000 records within 5 % of one host's.
Exits non-zero when a batch failed or was degraded.
"""
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness  # noqa: E402
import providers_fixture as pf  # noqa: E402
from store_fixture import Redis, wait_clients  # noqa: E402

RECORDS = int(os.environ.get("BENCH_FLEET_RECORDS", "12000"))
IDS = int(os.environ.get("BENCH_FLEET_IDS", "1500"))
PER_BATCH = 50
GOAL = 1.05


def batches(tag):
    rng = random.Random(11)
    out = []
    for _ in range(RECORDS // PER_BATCH):
        out.append([{"provider": "yt", "id": "F%s%05d" % (tag, int(IDS * rng.random() ** 2)),
                     "duration": 0} for _ in range(PER_BATCH)])
    return out


def run(prov, hosts, store, tag):
    yt = prov.fakes["youtube"]
    extra = ("shared_store = %s\n" % store.url) if store else ""
    envs = []
    try:
        for h in range(hosts):
            envs.append(pf.start_env(prov, "fleet-%s%d" % (tag, h), 2, extra=extra,
                                     vm_source=None, dm_source=None))
        if store:
            wait_clients(store, 2 * hosts)
            harness.wait_for(lambda: all(harness.metric(e, "enrichd_store_up", 0) >= 2
                                         for e in envs), 15, what="every host on the store")
        s0 = yt.stats()
        bad = 0
        for i, b in enumerate(batches(tag)):
            st, h, _ = harness.post(envs[i % hosts], b)
            bad += st != 200 or harness.degraded(h) != 0
        s1 = yt.stats()
    finally:
        for e in envs:
            e.close()
    calls = s1["data_requests"] - s0["data_requests"]
    units = s1["settings"]["quota_used"] - s0["settings"]["quota_used"]
    return calls * 1000.0 / RECORDS, units * 1000.0 / RECORDS, bad


def main():
    rows, bad = {}, 0
    with pf.Providers() as prov:
        prov.fakes["youtube"].control(quota=10 ** 9, quota_used=0)
        for hosts in (1, 3):
            rows[(hosts, False)] = run(prov, hosts, None, "n%d" % hosts)
            with Redis() as store:
                rows[(hosts, True)] = run(prov, hosts, store, "s%d" % hosts)
    print("bench-upstream fleet: %d YouTube records from %d ids, batches of %d, spread over "
          "the hosts in turn" % (RECORDS, IDS, PER_BATCH))
    print("  %-22s %18s %18s" % ("", "calls / 1,000 rec", "units / 1,000 rec"))
    for (hosts, store), (calls, units, b) in sorted(rows.items()):
        bad += b
        print("  %-22s %18.1f %18.1f" % ("%d host%s, %s" % (hosts, "s" if hosts > 1 else "",
                                                            "one store" if store else "no store"),
                                         calls, units))
    one, three = rows[(1, True)][1], rows[(3, True)][1]
    plain = rows[(3, False)][1] / rows[(1, False)][1] if rows[(1, False)][1] else 0
    print("bench-upstream fleet: three hosts / one host: %.2fx without the store, %.2fx with it;"
          " goal (<= %.2fx with it): %s" % (plain, three / one if one else 0, GOAL,
                                           "MET" if one and three <= GOAL * one else "MISSED"))
    print("bench-upstream fleet: %s" % ("PASS" if bad == 0 else "FAIL (%d batches failed or "
                                                                 "degraded)" % bad))
    sys.exit(0 if bad == 0 else 1)


if __name__ == "__main__":
    main()
