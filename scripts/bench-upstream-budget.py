#!/usr/bin/env python3
"""bench-upstream-budget.py: the day's quota budget, a section of make
bench-upstream.  A day of the old worker's traffic compressed into
BENCH_BUDGET_DAY_S seconds: scripts/gen-trace's arrivals over 24 hours
(the diurnal rate, bursts, idle gaps, its batch sizes), each batch sent
by the eight regions (the same ids in eight batches, a few seconds of
the day apart), the ids drawn from those seen before with new ids
arriving through the day (BENCH_BUDGET_NEW of them new).  YouTube
records only (the budget is YouTube's), against the YouTube fake behind
nginx (TLS), which counts units as YouTube does; the cache's lifetimes
compressed alike.  A restart at noon (the master SIGKILLed, a new one
started on the same state).  Three runs of the same day:
  naive   today's client, no budget, the fake's quota unbounded: what a
          naive client spends (U);
  before  today's client against a day's quota of U / 3: the provider's
          403 stops it until midnight;
  after   the budget (youtube_daily_quota = U / 3, the same quota at the
          fake): paced through the day.
For each: calls and units per 1,000 records, records enriched (fresh) /
stale / local, the longest time without an enriched batch (in minutes
of the real day), the units against the quota, the fake's 403s.
The build: the test-hooks build (its budget day can be compressed);
ENR_HOOKS_BUILD as the tests take it.  Knobs (env): BENCH_BUDGET_DAY_S
(120), BENCH_BUDGET_BATCHES (400 trace batches, x 8 regions),
BENCH_BUDGET_NEW (0.3), BENCH_BUDGET_SENDERS (6).  A batch the senders
could not send before the day's end (a loaded machine) is not sent, and
counted (late).
Exits non-zero when the budget was exceeded as the fake counts.
"""
import json
import os
import queue
import random
import subprocess
import sys
import threading
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tests", "integration"))
import harness  # noqa: E402
import providers_fixture as pf  # noqa: E402

DAY_S = float(os.environ.get("BENCH_BUDGET_DAY_S", "120"))
BATCHES = int(os.environ.get("BENCH_BUDGET_BATCHES", "400"))
NEW = float(os.environ.get("BENCH_BUDGET_NEW", "0.3"))
SENDERS = int(os.environ.get("BENCH_BUDGET_SENDERS", "6"))
REGIONS = 8
REGION_SPREAD = 120.0        # seconds of the real day between a batch's first and last region
SCALE = DAY_S / 86400.0      # compressed seconds per real second
TTL, NEG_TTL = 3600, 300


def day_of_batches():
    """[(t in the compressed day, [records])], each trace batch once per
    region, in time order."""
    p = subprocess.run([os.path.join(root, "scripts", "gen-trace"), "-n", str(BATCHES),
                        "--duration", "86400", "--start", "1767254400", "--seed", "7"],
                       capture_output=True, text=True, check=True)
    r = random.Random(7)
    seen, fresh = [], 0
    out = []
    for line in p.stdout.split("\n"):
        if not line:
            continue
        d = json.loads(line)
        if not isinstance(d["payload"], list):
            continue
        n = sum(1 for x in d["payload"] if isinstance(x, dict) and x.get("provider") == "yt")
        if n == 0:
            continue
        ids = []
        for _ in range(n):
            if not seen or r.random() < NEW:
                fresh += 1
                seen.append("Bd%06dY" % fresh)
                ids.append(seen[-1])
            else:  # the recent ones more often: what the pipeline sees again
                ids.append(seen[max(0, len(seen) - 1 - int(r.expovariate(1 / 2000.0)))])
        t = (d["ts"] - 1767254400) * SCALE
        for g in range(REGIONS):
            mine = [i for i in ids if r.random() < 0.9]  # a region drops some
            if mine:
                out.append((t + r.random() * REGION_SPREAD * SCALE,
                            [{"provider": "yt", "id": i, "duration": 0} for i in mine]))
    out.sort(key=lambda x: x[0])
    return out


def conf(env_dir, quota):
    return ("workers = 2\nmax_requests = 0\n"
            "budget_file = %s\nyoutube_cache_ttl_s = %d\ncache_negative_ttl_s = %d\n"
            "upstream_timeout_ms = 500\n"
            % (os.path.join(env_dir, "budget"), max(1, TTL * SCALE), max(1, NEG_TTL * SCALE)))


def stale_of(m):
    """Records answered stale, of every source, from a /metrics."""
    return int(sum(v for k, v in m.items() if k.startswith("enrichd_upstream_stale_total")))


def run(prov, batches, label, budget, fake_quota):
    """One compressed day; its figures."""
    yt = prov.fakes["youtube"]
    prov.reset()
    yt.control(quota=fake_quota, quota_used=0)
    origin = time.time() + 3.0
    env_vars = {"ENRICHD_TEST_BUDGET_DAY_MS": str(int(DAY_S * 1000)),
                "ENRICHD_TEST_BUDGET_ORIGIN_MS": str(int(origin * 1000))}
    env = harness.Env(build=harness.hooks_build_dir(), name="bench-budget")
    res = {"records": 0, "enriched": 0, "local": 0, "lost": 0, "late": 0, "ok_times": [],
           "q_recs": [0] * 4, "q_enr": [0] * 4}
    lock = threading.Lock()
    try:
        env.start_enrichd(conf(env.dir, budget) + pf.Providers.conf(
            prov, vm_source=None, dm_source=None, youtube_daily_quota=budget),
                          env=env_vars)
        env.start_nginx()
        env.wait_workers(2)
        while time.time() < origin:
            time.sleep(0.01)
        yt.control(quota_used=0)
        q = queue.Queue()

        def sender():
            import http.client
            conn = http.client.HTTPConnection("127.0.0.1", env.port, timeout=15)
            while True:
                item = q.get()
                if item is None:
                    break
                t, recs = item
                if time.time() >= origin + DAY_S:
                    # The senders fell behind past the day's end (a loaded
                    # machine): sent now it would be the next day's.
                    with lock:
                        res["late"] += len(recs)
                    continue
                try:
                    st, h, lines = harness.post(env, recs, conn=conn)
                except Exception:
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", env.port, timeout=15)
                    st, lines = 0, []
                with lock:
                    res["records"] += len(recs)
                    if st != 200 or len(lines) != len(recs):
                        res["lost"] += len(recs)
                        continue
                    good = sum(1 for rec, l in zip(recs, lines)
                               if l.get("poster") == pf.want(rec)[0])
                    res["enriched"] += good
                    res["local"] += len(recs) - good
                    quarter = min(3, int(4 * t / DAY_S))
                    res["q_recs"][quarter] += len(recs)
                    res["q_enr"][quarter] += good
                    if good:
                        res["ok_times"].append(min(DAY_S, time.time() - origin))

        threads = [threading.Thread(target=sender) for _ in range(SENDERS)]
        for th in threads:
            th.start()
        restarted = False
        for t, recs in batches:
            if not restarted and t >= DAY_S / 2:
                # Noon: the master SIGKILLed, a new one on the same state
                # (the morning's stale answers counted first: the counters
                # go with the workers).
                res["stale_am"] = stale_of(harness.metrics(env))
                harness.kill_group(env.enrichd)
                env.procs.remove(env.enrichd)
                env.start_enrichd(env=env_vars)
                env.wait_workers(2)
                restarted = True
            wait = origin + t - time.time()
            if wait > 0:
                time.sleep(wait)
            q.put((t, recs))
        for _ in threads:
            q.put(None)
        for th in threads:
            th.join(60)
        m = harness.metrics(env)
        st = yt.stats()
    finally:
        env.close()
    res["calls"] = st["api"]["calls"]
    res["units"] = st["settings"]["quota_used"]
    res["refused"] = st["api"]["refused"].get("quota", 0)
    res["stale"] = res.get("stale_am", 0) + stale_of(m)
    ts = sorted([0.0] + res["ok_times"] + [DAY_S])
    res["gap_min"] = max(b - a for a, b in zip(ts, ts[1:])) / SCALE / 60.0
    res["label"], res["budget"], res["quota"] = label, budget, fake_quota
    return res


def main():
    harness.hooks_build_dir()  # built before any day's origin is set: a build takes minutes
    batches = day_of_batches()
    recs = sum(len(r) for _, r in batches)
    bad = 0
    with pf.Providers() as prov:
        naive = run(prov, batches, "naive (no budget, no quota)", 0, 10 ** 9)
        quota = max(10, naive["units"] // 3)
        before = run(prov, batches, "before (no budget, quota U/3)", 0, quota)
        after = run(prov, batches, "after (budget U/3, quota U/3)", quota, quota)
    print("bench-upstream-budget: a day compressed into %.0f s: %d batches (%d trace batches "
          "x %d regions), %d YouTube records, %.0f %% of ids new; a restart at noon; the "
          "naive client spends U = %d units, the quota U/3 = %d"
          % (DAY_S, len(batches), BATCHES, REGIONS, recs, 100 * NEW, naive["units"], quota))
    print("| run | calls / 1,000 records | units / 1,000 records | units (quota) | 403s "
          "| enriched fresh | stale | local | lost (restart) / late | enriched by quarter of "
          "the day (fresh or stale), % | longest stop, min of the day |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for x in (naive, before, after):
        per = lambda n: 1000.0 * n / max(1, x["records"])  # noqa: E731
        quarters = " / ".join("%.0f" % (100.0 * e / max(1, n))
                              for e, n in zip(x["q_enr"], x["q_recs"]))
        print("| %s | %.2f | %.2f | %d (%s) | %d | %d | %d | %d | %d / %d | %s | %.0f |"
              % (x["label"], per(x["calls"]), per(x["units"]), x["units"],
                 x["quota"] if x["quota"] < 10 ** 9 else "-", x["refused"],
                 x["enriched"] - x["stale"],
                 x["stale"], x["local"], x["lost"], x["late"], quarters, x["gap_min"]))
    if after["units"] > quota or after["refused"]:
        bad += 1
        print("bench-upstream-budget: FAIL: the budget was exceeded: %d units, %d 403s"
              % (after["units"], after["refused"]))
    print("bench-upstream-budget: %s" % ("PASS" if bad == 0 else "FAIL"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
