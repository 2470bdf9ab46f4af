#!/usr/bin/env python3
"""test_store_lease.py: one day's quota for the fleet (store_lease.h),
on a compressed day, with a real redis-server and the YouTube fake, which
counts units as YouTube does (1 per videos.list call).

Hosts (the test-hooks build, whose budget day lasts DAY_S seconds) each
behind their own nginx, on one Redis; clients post batches of 50 new ids
to every host far faster than the budget allows.
  - a compressed day with hosts joining and leaving (A and B from the
    start, C joins at a third of the day, B stops at two thirds and gives
    back what it holds), and the store killed (-9) and started again in
    the middle of it: the day's units stay at most the budget + hosts x
    one lease, and at least half of the budget is spent (the fleet does
    enrich), no request failed;
  - a host stopping gives back what it holds: the ledger then counts
    exactly the units it spent;
  - a quota spent (the fake answers quotaExceeded) seen by one host pauses
    the others: the pause's end is in the store, and a second host makes
    no call while it holds.
"""
# side by side: the units are bounded by the ledger, not by time (a loaded
# machine spends less of the day, never more).
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import providers_fixture as pf  # noqa: E402
from store_fixture import Redis, wait_clients  # noqa: E402

DAY_S = 24.0
BUDGET = 240        # units a day: 10 a second
LEASE = 8           # budget_lease_units
BURST_S = 3600      # a 24th of the day: 10 units
PER_BATCH = 50


def host(prov, redis, name, env_vars, workers=2):
    conf = ("workers = %d\nmax_requests = 0\nbudget_burst_s = %d\nupstream_timeout_ms = 1000\n"
            "shared_store = %s\nbudget_lease_units = %d\n" % (workers, BURST_S, redis.url, LEASE))
    env = harness.Env(build=harness.hooks_build_dir(), name=name)
    try:
        env.start_enrichd(conf + prov.conf(vm_source=None, dm_source=None,
                                           youtube_daily_quota=BUDGET), env=env_vars)
        env.start_nginx()
        env.wait_workers(workers)
    except Exception:
        env.close()
        raise
    return env


class Clients:
    def __init__(self):
        self.halt = threading.Event()
        self.threads = []
        self.errors = []
        self.enriched = 0
        self.lock = threading.Lock()

    def drive(self, env, tag, until_event=None):
        def run():
            i = 0
            while not self.halt.is_set() and not (until_event and until_event.is_set()):
                recs = [{"provider": "yt", "id": "L%s%dn%d" % (tag, i, j), "duration": 0}
                        for j in range(PER_BATCH)]
                try:
                    st, h, lines = harness.post(env, recs)
                except Exception as e:
                    with self.lock:
                        self.errors.append(repr(e))
                    continue
                with self.lock:
                    if st != 200:
                        self.errors.append((st, tag, round(time.time() % 1000, 2)))
                    else:
                        self.enriched += PER_BATCH - harness.degraded(h)
                i += 1
                self.halt.wait(0.02)
        t = threading.Thread(target=run)
        t.start()
        self.threads.append(t)
        return t

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(30)


def units(prov):
    return prov.fakes["youtube"].stats()["settings"]["quota_used"]


def test_compressed_day(r, prov):
    yt = prov.fakes["youtube"]
    yt.control(quota=10 * BUDGET, quota_used=0)
    origin = time.time() + 4.0
    env_vars = {"ENRICHD_TEST_BUDGET_DAY_MS": str(int(DAY_S * 1000)),
                "ENRICHD_TEST_BUDGET_ORIGIN_MS": str(int(origin * 1000))}
    with Redis(persist=True) as redis:
        a = host(prov, redis, "lease-a", env_vars)
        b = host(prov, redis, "lease-b", env_vars)
        c = None
        cl = Clients()
        b_stop = threading.Event()
        try:
            wait_clients(redis, 4)
            while time.time() < origin:
                time.sleep(0.05)
            u0 = units(prov)
            cl.drive(a, "a")
            b_client = cl.drive(b, "b", b_stop)
            time.sleep(DAY_S / 3)  # the day's thirds are the test's subject
            c = host(prov, redis, "lease-c", env_vars)
            cl.drive(c, "c")
            time.sleep(DAY_S / 6)
            redis.kill9()
            time.sleep(1.0)
            redis.start()
            time.sleep(DAY_S / 6)
            b_stop.set()
            b_client.join(30)  # B's last batch answered: none is sent to a host on its way out
            os.kill(b.enrichd.pid, signal.SIGTERM)  # a graceful stop: B gives back its units
            b.enrichd.wait(30)
            time.sleep(origin + DAY_S - 0.5 - time.time())
            cl.stop()
            spent = units(prov) - u0
            hosts = 3
            print("the day's units: %d (budget %d, bound %d)" % (spent, BUDGET, BUDGET + hosts * LEASE))
            r.check(spent <= BUDGET + hosts * LEASE,
                    "the day's units %d <= budget %d + %d hosts x lease %d"
                    % (spent, BUDGET, hosts, LEASE))
            r.check(spent >= BUDGET // 2, "the fleet spent its day: %d units of %d"
                    % (spent, BUDGET))
            r.check(not cl.errors, "no request failed: %r" % cl.errors[:3])
            keys = redis.keys("enrichd:q:youtube:*")
            r.check(len(keys) >= 1, "the day's ledger is in the store: %r" % keys)
        finally:
            cl.stop()
            for e in (a, b, c):
                if e is not None:
                    e.close()


def test_give_back(r, prov):
    yt = prov.fakes["youtube"]
    yt.control(quota=1000000, quota_used=0)
    with Redis() as redis:
        a = host(prov, redis, "lease-back", {})
        try:
            wait_clients(redis, 2)
            harness.wait_for(lambda: harness.metric(a, "enrichd_store_leases_total", 0) >= 1, 10,
                             what="a lease taken in idle time")
            u0 = units(prov)
            for i in range(3):
                st, h, _ = harness.post(a, [{"provider": "yt", "id": "Gb%d" % i, "duration": 0}])
                r.check(st == 200 and harness.degraded(h) == 0, "batch %d enriched" % i)
            spent = units(prov) - u0
            key = redis.keys("enrichd:q:youtube:*")[0]
            held = int(redis.cmd("HVALS", key)[0])
            r.check(held > spent, "the ledger counts the lease held: %d, spent %d" % (held, spent))
            os.kill(a.enrichd.pid, signal.SIGTERM)  # a graceful stop
            a.enrichd.wait(30)
            left = int(redis.cmd("HVALS", key)[0])
            r.check(left == spent == 3,
                    "given back at stop: the ledger counts the units spent, %d (spent %d)"
                    % (left, spent))
            r.check(a.log_events("lease given back"), "and says so in the log")
        finally:
            a.close()


def lease_held(env):
    """The units of YouTube's day a host holds, as its /metrics says."""
    return harness.metrics(env).get('enrichd_store_lease_held_units{source="youtube"}', 0)


def test_pause_shared(r, prov):
    yt = prov.fakes["youtube"]
    with Redis() as redis:
        a = host(prov, redis, "pause-a", {})
        b = host(prov, redis, "pause-b", {})
        try:
            wait_clients(redis, 4)
            # Both hosts hold a lease before the first batch: a worker takes
            # one in its idle time after connecting, and a batch that came
            # first would be held back by the pace, never reaching the API.
            harness.wait_for(lambda: all(lease_held(h) > 0 for h in (a, b)), 5,
                             what="both hosts' leases")
            yt.control(quota=0, quota_used=0)  # every call now answers quotaExceeded
            st, h, _ = harness.post(a, [{"provider": "yt", "id": "Pz1", "duration": 0}])
            r.check(st == 200, "host A answered (its record keeps its local values)")
            harness.wait_for(lambda: redis.keys("enrichd:p:youtube"), 5,
                             what="the pause in the store")
            until = int(redis.cmd("GET", "enrichd:p:youtube"))
            r.check(until > time.time(), "the pause's end is in the future: %d" % until)
            # A worker of B reads the fleet's pauses in its idle time (once a
            # second) and holds it host-wide: B says so before it is asked.
            harness.wait_for(lambda: harness.metric(
                b, 'enrichd_upstream_paused{source="youtube",why="quota"}', 0) == 1, 5,
                what="host B paused by the fleet's pause")
            c0 = yt.stats()["data_requests"]
            st, h, _ = harness.post(b, [{"provider": "yt", "id": "Pz2", "duration": 0}])
            r.check(st == 200 and yt.stats()["data_requests"] == c0,
                    "host B paused by A's quotaExceeded: no call (%d then %d)"
                    % (c0, yt.stats()["data_requests"]))
        finally:
            yt.control(quota=1000000, quota_used=0)
            a.close()
            b.close()


def main():
    harness.run_tests(test_give_back, test_pause_shared, test_compressed_day,
                      fixture=pf.Providers)


if __name__ == "__main__":
    main()
