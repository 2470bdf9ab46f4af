#!/usr/bin/env python3
"""test_upstream_budget.py: the day's quota budget (src/upstream/budget.c)
through the real path, on a compressed day.

HTTP clients -> nginx -> enrichd (2 workers, the test-hooks build, whose
budget day lasts DAY_S seconds from the test's origin) -> nginx (TLS) ->
the YouTube fake, which counts units as YouTube does (1 per videos.list
call) against a day's quota set to the budget.  Three clients post
batches of 50 new ids as fast as they are answered, far more than the
budget: a naive client would spend a unit a batch.
  - pace: at every sample the fake's units are at most the day's elapsed
    share of the budget plus the burst;
  - never exceeded: the day's units at most the budget, and the fake
    never answered quotaExceeded;
  - enrichment never stops longer than the pace allows (a unit frees
    every DAY_S / BUDGET seconds);
  - survival: the master SIGKILLed mid-day, a new one on the same
    budget_file finds what the day spent and holds the same pace;
  - the deferred ids are not negatively cached: asked again the next day,
    they are enriched; the deferred calls are counted (failure kind
    budget, the day's deferred_new), the forecast says the budget runs
    out, /metrics and `enrichd status` show the day;
  - new before refresh: with answers past their lifetime (stale) and new
    ids asked alike past the pace, the units go to the new ids, the
    stale ones keep their stale answers (counted stale and
    deferred_refresh), and a batch of both asks its new ids first.
"""
# The budget's use is a goal (make bench-goals); the pace (its gaps
# bounded by the run's own slowest request), the spending and which calls
# got the units (each refresh checked against the pace when it came, not
# counted) are checked, and held with four such suites at once on a loaded
# machine.
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import providers_fixture as pf  # noqa: E402

DAY_S = 24.0
BUDGET = 120                     # units a day: 5 a second
BURST_S = 3600                   # a 24th of the day: 5 units
BURST = BUDGET * BURST_S // 86400
PER_BATCH = 50                   # ids a batch: one videos.list call
CLIENT_PAUSE_S = 0.02            # between a client's batches: demand ~20x the pace, not 100x
REFRESH_BUDGET = 240             # test_new_before_refresh's: 10 units a second
REFRESH_BURST = REFRESH_BUDGET * BURST_S // 86400 // 2   # a refresh gets half the burst: 5


def allowed(t, origin, budget=BUDGET, burst=BURST):
    """Units the pace allows by wall time t of the day that began at origin."""
    el = max(0.0, t - origin)
    return min(budget, int(budget * el / DAY_S) + burst)


def budget_doc(env):
    doc = harness.get_json(env, "/status")
    return doc["upstream"]["sources"]["youtube"].get("budget", {})


class Drive:
    """Clients posting batches of new ids, and a sampler of the fake's units."""

    def __init__(self, env, fake, tag, clients=3):
        self.env, self.fake, self.tag = env, fake, tag
        self.stop_at = None
        self.lock = threading.Lock()
        self.batches = []   # (t_answered, enriched records, recs)
        self.sent = []      # when each request was sent, every client's
        self.started = None
        self.samples = []   # (t_after_read, units)
        self.errors = []
        self.slowest = 0.0  # the longest a request took: a loaded machine's stall
        self.threads = [threading.Thread(target=self.client, args=(k,)) for k in range(clients)]
        self.threads.append(threading.Thread(target=self.sampler))
        self.halt = threading.Event()

    def client(self, k):
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.env.port, timeout=15)
        i = 0
        try:
            while not self.halt.is_set() and i < 5000:
                recs = [{"provider": "yt", "id": "B%s%dk%dn%d" % (self.tag, k, i, j),
                         "duration": 0} for j in range(PER_BATCH)]
                t0 = time.time()
                with self.lock:
                    self.sent.append(t0)
                try:
                    st, h, lines = harness.post(self.env, recs, conn=conn)
                except Exception as e:  # counted: the checks on gaps and totals see it
                    with self.lock:
                        self.errors.append(repr(e))
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.env.port, timeout=15)
                    continue
                t = time.time()
                with self.lock:
                    self.slowest = max(self.slowest, t - t0)
                if st == 200:
                    with self.lock:
                        self.batches.append((t, PER_BATCH - harness.degraded(h), recs))
                i += 1
                self.halt.wait(CLIENT_PAUSE_S)
        finally:
            conn.close()

    def sampler(self):
        while not self.halt.is_set():
            u = self.fake.stats()["settings"]["quota_used"]
            with self.lock:
                self.samples.append((time.time(), u))
            time.sleep(0.1)

    def run_until(self, t_end):
        self.started = time.time()
        for t in self.threads:
            t.start()
        while time.time() < t_end:
            time.sleep(0.05)
        self.halt.set()
        for t in self.threads:
            t.join(30)

    def max_gap(self, t0, t1):
        """The longest time without an enriched batch in [t0, t1]."""
        ts = sorted([t0] + [t for t, n, _ in self.batches if n > 0 and t0 <= t <= t1] + [t1])
        return max(b - a for a, b in zip(ts, ts[1:]))

    def max_silence(self, t0, t1):
        """The longest time no client sent anything in [t0, t1]: a test
        process the machine did not run, whose gap is not the pace's."""
        ts = sorted([t0] + [t for t in self.sent if t0 <= t <= t1] + [t1])
        return max(b - a for a, b in zip(ts, ts[1:]))


def start(prov, name, env_vars, env=None, budget=BUDGET, extra=""):
    conf = ("workers = 2\nmax_requests = 0\nbudget_burst_s = %d\n"
            "budget_file = %%s\nupstream_timeout_ms = 1000\n" % BURST_S + extra)
    over = {"vm_source": None, "dm_source": None, "youtube_daily_quota": budget}
    if env is None:
        env = harness.Env(build=harness.hooks_build_dir(), name=name)
        env.start_enrichd(conf % os.path.join(env.dir, "budget")
                          + prov.conf(**over), env=env_vars)
        env.start_nginx()
    else:
        env.start_enrichd(env=env_vars)
    env.wait_workers(2)
    return env


def test_compressed_day(r, prov):
    yt = prov.fakes["youtube"]
    yt.control(quota=BUDGET, quota_used=0)
    origin = time.time() + 3.0
    env_vars = {"ENRICHD_TEST_BUDGET_DAY_MS": str(int(DAY_S * 1000)),
                "ENRICHD_TEST_BUDGET_ORIGIN_MS": str(int(origin * 1000))}
    env = start(prov, "budget-day", env_vars)
    try:
        while time.time() < origin + 0.05:
            time.sleep(0.02)
        yt.control(quota_used=0)  # the day starts: whatever the start-up asked is the day before's

        # ---- the morning, then the master killed ----
        d1 = Drive(env, yt, "a")
        d1.run_until(origin + 10.0)
        b1 = budget_doc(env)
        u1 = yt.stats()["settings"]["quota_used"]
        m = harness.metrics(env)
        r.check(m.get('enrichd_upstream_failures_total{kind="budget",source="youtube"}', 0) > 0,
                "the deferred calls are counted (kind budget): %s"
                % m.get('enrichd_upstream_failures_total{kind="budget",source="youtube"}'))
        r.check(m.get('enrichd_budget_spent_units{source="youtube"}') == b1.get("spent"),
                "/metrics shows the day's spending: %s" % m.get('enrichd_budget_spent_units{source="youtube"}'))
        r.check(b1.get("deferred_new", 0) > 0 and b1.get("runs_out") is True
                and b1.get("forecast", 0) > BUDGET,
                "/status: calls deferred, the forecast runs out before the day ends: %s" % b1)
        r.check(u1 <= b1.get("spent", -1) <= u1 + 2,
                "the units the fake counted are the spent ones (%d, %s)" % (u1, b1.get("spent")))
        txt = subprocess.run([os.path.join(env.build, "enrichd"), "status", env.status_sock],
                             capture_output=True, text=True, timeout=10).stdout
        r.check("upstream.sources.youtube.budget.spent: %d" % b1.get("spent", -1) in txt
                and "upstream.sources.youtube.budget.runs_out: true" in txt,
                "`enrichd status` shows the day: %r" % [l for l in txt.splitlines() if "budget" in l])
        harness.kill_group(env.enrichd)
        env.procs.remove(env.enrichd)
        start(prov, "budget-day", env_vars, env=env)
        b2 = budget_doc(env)
        r.check(b2.get("spent") == b1.get("spent"),
                "a new master finds what the day spent: %s then %s"
                % (b1.get("spent"), b2.get("spent")))

        # ---- the rest of the day ----
        d2 = Drive(env, yt, "b")
        t_restart = time.time()
        d2.run_until(origin + DAY_S - 0.7)
        st = yt.stats()
        units = st["settings"]["quota_used"]
        refused = st["api"]["refused"].get("quota", 0)
        r.check(units <= BUDGET and refused == 0,
                "the day's units within the budget as the fake counts them: %d of %d, %d "
                "quotaExceeded" % (units, BUDGET, refused))
        r.check(units > 0, "units were spent: %d" % units)
        r.goal(units >= BUDGET - 2 * BURST,
               "and the budget was used, not hoarded: %d of %d" % (units, BUDGET),
               (BUDGET - 2 * BURST) / max(units, 1), 1.0)
        over = [(round(t - origin, 2), u, allowed(t, origin))
               for t, u in d1.samples + d2.samples if u > allowed(t, origin)]
        r.check(not over, "the pace held at every sample (t, units, allowed): %s" % over[:5])
        # From the clients' start: a loaded machine may start enrichd past
        # the day's origin (seen: the first 1.5 s of the window were before
        # the first request).
        w1 = (max(origin, d1.started) + 0.5, origin + 10.0)
        w2 = (t_restart + 0.5, origin + DAY_S - 0.7)
        gap1, gap2 = d1.max_gap(*w1), d2.max_gap(*w2)
        quiet = max(d1.max_silence(*w1), d2.max_silence(*w2))
        pace_s = DAY_S / BUDGET
        # Five units' time past the longest time nobody asked, or, on a
        # machine that stalled a request longer, that request's time (the
        # stall is the machine's, not the pace's).
        bound = max(5 * pace_s + quiet, 1.5 * max(d1.slowest, d2.slowest))
        r.check(gap1 <= bound and gap2 <= bound,
                "enrichment never stopped longer than the pace allows (a unit every %.2f s): "
                "longest gaps %.2f s, %.2f s; slowest requests %.2f s, %.2f s; longest time "
                "nothing was sent %.2f s; clients started %.2f s into the day; errors %s"
                % (pace_s, gap1, gap2, d1.slowest, d2.slowest, quiet, d1.started - origin,
                   (d1.errors + d2.errors)[:3]))
        asked = len(d1.batches) + len(d2.batches)
        r.check(asked > 2 * BUDGET, "the clients asked for more than the budget: %d batches" % asked)

        # ---- the next day: the deferred ids were not negatively cached ----
        while time.time() < origin + DAY_S + 0.2:
            time.sleep(0.02)
        yt.control(quota_used=0)
        deferred = [recs for t, n, recs in d1.batches if n == 0][:3]
        enriched = 0
        for recs in deferred:
            stc, h, lines = harness.post(env, recs)
            enriched += PER_BATCH - harness.degraded(h) if stc == 200 else 0
        r.check(len(deferred) == 3 and enriched == 3 * PER_BATCH,
                "ids deferred yesterday are asked today, not negatively cached: %d of %d"
                % (enriched, 3 * PER_BATCH))
        b3 = budget_doc(env)
        r.check(b3.get("spent") == 3 and b3.get("deferred_new") == 0,
                "a new day starts from nothing: %s" % {k: b3.get(k) for k in ("spent", "deferred_new")})
        sys.stdout.write("day: %d batches asked (%d records), %d units, %d enriched batches; "
                         "gaps %.2f/%.2f s\n"
                         % (asked, asked * PER_BATCH, units,
                            sum(1 for _, n, _ in d1.batches + d2.batches if n > 0), gap1, gap2))
    finally:
        env.close()


def test_new_before_refresh(r, prov):
    """240 units a day of 24 s (10 a second, a burst of 10: refreshes 5);
    answers stale after 1 s."""
    yt = prov.fakes["youtube"]
    yt.control(quota=10 ** 6, quota_used=0)
    origin = time.time() + 3.0
    env_vars = {"ENRICHD_TEST_BUDGET_DAY_MS": str(int(DAY_S * 1000)),
                "ENRICHD_TEST_BUDGET_ORIGIN_MS": str(int(origin * 1000))}
    env = start(prov, "budget-refresh", env_vars, budget=REFRESH_BUDGET,
                extra="youtube_cache_ttl_s = 1\n")
    try:
        while time.time() < origin + 0.05:
            time.sleep(0.02)
        old = [[{"provider": "yt", "id": "Old%dn%d" % (b, j), "duration": 0}
                for j in range(PER_BATCH)] for b in range(4)]
        for recs in old:  # 4 units of the burst's 10: their answers cached
            st, h, _ = harness.post(env, recs)
            r.check(st == 200 and harness.degraded(h) == 0, "the old ids answered at first")
        time.sleep(1.5)   # now stale: refreshes
        prov.reset()
        spent0 = budget_doc(env).get("spent", 0)
        stale0 = harness.metrics(env).get('enrichd_upstream_stale_total{source="youtube"}', 0)
        # One batch of both: its new ids are planned first, so they are
        # in the first call.
        mixed = old[0][:25] + [{"provider": "yt", "id": "Mix%d" % j, "duration": 0}
                               for j in range(25)]
        harness.post(env, mixed)
        first = pf.asked_ids("youtube", yt.log()[0]) if yt.log() else []
        r.check(first[:25] == ["Mix%d" % j for j in range(25)],
                "a batch of new and stale ids asks the new ones first: %s" % first[:4])
        # Past the pace: stale and new batches alike, from 4 clients.
        stop = time.time() + 6.0
        lock = threading.Lock()
        out = {"stale_ok": 0, "stale_n": 0, "new_ok": 0, "new_n": 0}

        def client(k):
            i = 0
            while time.time() < stop and i < 2000:
                stale = (i + k) % 2 == 0
                recs = old[(i + k) % 4] if stale else [
                    {"provider": "yt", "id": "New%dk%dn%d" % (k, i, j), "duration": 0}
                    for j in range(PER_BATCH)]
                st, h, lines = harness.post(env, recs)
                ok = sum(1 for rec, l in zip(recs, lines) if l.get("poster") == pf.want(rec)[0])
                with lock:
                    key = "stale" if stale else "new"
                    out[key + "_n"] += 1
                    out[key + "_ok"] += ok if st == 200 else 0
                i += 1
        harness.in_threads(client, 4)
        oldids = set(x["id"] for recs in old for x in recs)
        log = yt.log()
        calls = [pf.asked_ids("youtube", e) for e in log]
        refresh_calls = sum(1 for ids in calls if ids and set(ids) <= oldids)
        new_calls = sum(1 for ids in calls if ids and not set(ids) & oldids)
        b = budget_doc(env)
        stale = harness.metrics(env).get('enrichd_upstream_stale_total{source="youtube"}', 0)
        # A refresh takes a unit only where new ids left half the burst
        # unused: the units spent before it (the fake's order, off by one
        # where the two workers took at once) within the pace with half the
        # burst, at the time the fake saw it (the take came before).
        # Refreshes taking as new ids do would show here, where demand
        # keeps the spending at the full burst; how many there are depends
        # on how often a loaded machine stalls every client at once.
        over, spent = [], spent0
        for e, ids in zip(log, calls):
            if not ids:
                continue  # no videos.list call, no unit (none is expected)
            limit = allowed(e["t"], origin, REFRESH_BUDGET, REFRESH_BURST)
            if set(ids) <= oldids and spent > limit:
                over.append((round(e["t"] - origin, 2), spent, limit))
            spent += 1
        r.check(new_calls >= 40 and not over,
                "past the pace the units go to new ids, a refresh only within half the "
                "burst: %d calls of new ids, %d refreshes; past it (t, spent before, "
                "allowed): %s" % (new_calls, refresh_calls, over[:4]))
        r.check(b.get("deferred_refresh", 0) > 0 and b.get("deferred_new", 0) > 0,
                "both deferred past the pace, counted apart: %s"
                % {k: b.get(k) for k in ("deferred_new", "deferred_refresh")})
        # Every old record carries its answer: stale, or fresh for a second
        # after one of the few refreshes.
        r.check(out["stale_n"] > 0 and out["stale_ok"] == out["stale_n"] * PER_BATCH
                and stale - stale0 >= out["stale_ok"] // 2,
                "the deferred refreshes keep their stale answers, counted stale: %s, stale %d"
                % (out, stale - stale0))
    finally:
        env.close()


def main():
    harness.hooks_build_dir()  # built before any day's origin is set: a build takes minutes
    harness.run_tests(test_compressed_day, test_new_before_refresh, fixture=pf.Providers)


if __name__ == "__main__":
    main()
