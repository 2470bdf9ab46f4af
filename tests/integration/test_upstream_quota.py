#!/usr/bin/env python3
"""test_upstream_quota.py: a provider's quota, through the real path.

HTTP client -> nginx -> enrichd workers (2) -> the fake upstream, calls
counted where they arrive (the fake's /_stats).
  - 429 + Retry-After: 3 stops every call of every worker for 3 s (none
    at the fake, though both workers keep serving new ids), the records
    degraded and counted as kind throttled, the breakers stay closed, one
    log line for the pause; then calls come back by themselves.
  - 503 + Retry-After as an HTTP-date: the same pause; a 503 whose
    Retry-After is no value is kind status and no pause.
  - upstream_max_calls_per_s: 4 clients asking for 4 calls a batch for
    3 s get at most rate x t + burst calls to the fake, and no batch
    waits past the deadline for a token.
"""
# How soon calls resume after a pause, how much of the rate is used and
# the batches' latency are goals (make bench-goals); no call in a pause,
# none past the rate, calls resuming at all and no batch held for a token
# far past its deadline are checked.

import os
import sys
import threading
import time
from email.utils import formatdate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import FakeUpstream, upstream_conf, post, degraded, metrics  # noqa: E402

THROTTLED = 'enrichd_upstream_failures_total{kind="throttled"}'


def env_for(name, fake, workers=2, **over):
    env = harness.Env(name=name)
    env.start_enrichd("workers = %d\nmax_requests = 0\n" % workers + upstream_conf(fake, **over))
    env.start_nginx()
    return env


def fresh(tag, n=6):
    """n records of new ids (never cached), every provider."""
    return [{"provider": ("yt", "vm", "dm")[i % 3], "id": "%s-%d" % (tag, i)} for i in range(n)]


def worker_served(env):
    doc = harness.get_json(env, "/status?full=1")
    return {p["pid"]: p.get("requests", 0) for p in doc.get("processes", [])
            if p.get("pid") in env.worker_pids()}


def test_retry_after_pauses_host(r, fake):
    with env_for("quota-429", fake, upstream_timeout_ms=500) as env:
        fake.control(mode="429", retry_after="3", throttle_status=429)
        fake.reset()
        t_sent = time.monotonic()
        st, h, lines = post(env, fresh("first"))
        t_first = time.monotonic()
        first_calls = fake.stats()["data_requests"]
        r.check(st == 200 and degraded(h) == 6 and len(lines) == 6,
                "the throttled batch keeps its local values: %d %s" % (st, h.get("x-enrich-degraded")))
        r.check(1 <= first_calls <= 3, "one call per provider reached the fake: %d" % first_calls)
        up = harness.get_json(env, "/status")["upstream"]
        r.check(2000 <= up.get("pause_ms_left", 0) <= 3000 and up.get("pauses") == 1,
                "/status shows the pause: %s" % {k: up.get(k) for k in ("pause_ms_left", "pauses")})
        pm = metrics(env).get("enrichd_upstream_pause_seconds", 0)
        r.check(2.0 <= pm <= 3.0, "so does /metrics: %s" % pm)

        # Up to 2.2 s of new ids from 6 clients: both workers serve them, none
        # calls.  A worker that just answered wins the next accept while
        # it has the core (on a loaded machine, every one of hundreds of
        # batches), so the clients keep several batches in flight: one
        # queued while the first worker is busy is the second's.
        served0 = worker_served(env)
        # (and no batch starts later than 0.6 s before the pause can end:
        # it began after t_sent, however slow the checks above were)
        stop = min(time.monotonic() + 2.2, t_sent + 2.4)
        results, lock = [], threading.Lock()

        def client(k):
            i = 0
            while time.monotonic() < stop and i < 400:
                st, h, _ = post(env, fresh("p%d-%d" % (k, i)))
                with lock:
                    results.append((st, degraded(h)))
                i += 1
                time.sleep(0.002)

        ts = [threading.Thread(target=client, args=(k,)) for k in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        during = fake.stats()["data_requests"] - first_calls
        served1 = worker_served(env)
        busy = [p for p in served1 if served1[p] > served0.get(p, 0)]
        r.check(during == 0, "no call reached the fake during the pause: %d" % during)
        r.check(len(busy) == 2, "both workers served batches meanwhile: %r -> %r" % (served0, served1))
        r.check(len(results) >= 20 and all(s == 200 and d == 6 for s, d in results),
                "every batch answered, every record degraded: %d batches, %r" %
                (len(results), [x for x in results if x != (200, 6)][:3]))
        m = metrics(env)
        r.check(m.get(THROTTLED) == first_calls + len(results),
                "throttled = the 429s + one per batch that met the pause: %s vs %d + %d"
                % (m.get(THROTTLED), first_calls, len(results)))
        r.check(m.get('enrichd_upstream_breakers{state="closed"}') == 2 and
                m.get('enrichd_upstream_failures_total{kind="status"}', 0) == 0,
                "the breakers never heard of it: %s" % {k: v for k, v in m.items() if "breaker" in k})
        doc = harness.get_json(env, "/status")
        r.check(doc["upstream"]["failures"].get("throttled") == m.get(THROTTLED),
                "/status says throttled too: %s" % doc["upstream"]["failures"])
        pauses = env.log_events("upstream throttled: no calls until the provider's quota allows")
        r.check(len(pauses) == 1 and pauses[0].get("status") == "429" and
                pauses[0].get("pause_s") == "3", "one log line for the pause: %r" % pauses)

        # The provider is fine again: calls come back once the 3 s are over.
        fake.control(mode="ok")
        enriched_at = None
        while time.monotonic() < t_first + 6:
            st, h, _ = post(env, fresh("after%d" % int(time.monotonic() * 1000)))
            if st == 200 and degraded(h) == 0:
                enriched_at = time.monotonic()
                break
            time.sleep(0.05)
        r.check(enriched_at is not None and enriched_at - t_sent >= 2.95,
                "no call before the 3 s were over: %.2f s" % ((enriched_at or 0) - t_sent))
        r.check(enriched_at is not None, "calls again once the pause is over")
        r.goal(enriched_at is not None and enriched_at - t_first <= 3.8,
               "calls again right after: %.2f s" % ((enriched_at or 99) - t_first),
               (enriched_at or 99) - t_first, 3.8)


def test_503_http_date(r, fake):
    with env_for("quota-503", fake, upstream_timeout_ms=500) as env:
        fake.control(mode="429", throttle_status=503,
                     retry_after=formatdate(time.time() + 5, usegmt=True))
        fake.reset()
        st, h, _ = post(env, fresh("d"))
        n0 = fake.stats()["data_requests"]
        t0 = time.monotonic()
        sent = 0
        while time.monotonic() < t0 + 1.0:
            post(env, fresh("d%d" % sent))
            sent += 1
            time.sleep(0.02)
        n1 = fake.stats()["data_requests"]
        r.check(st == 200 and degraded(h) == 6 and n0 >= 1, "503 + date: degraded (%d calls)" % n0)
        r.check(n1 == n0 and sent >= 10, "no call for a second after it: %d more, %d batches"
                % (n1 - n0, sent))
        m = metrics(env)
        r.check(m.get(THROTTLED, 0) >= n0 + sent and
                m.get('enrichd_upstream_failures_total{kind="status"}', 0) == 0,
                "counted throttled, not status: %s" % m.get(THROTTLED))
        # A Retry-After that is neither a number nor a date: a 503 like any
        # other (kind status, the breaker hears of it), no pause.
        harness.wait_for(lambda: harness.get_json(env, "/status")["upstream"]["pause_ms_left"] == 0,
                         8, what="the pause to end")
        fake.control(mode="429", throttle_status=503, retry_after="soon")
        n2 = fake.stats()["data_requests"]
        post(env, fresh("bad-ra-1"))
        post(env, fresh("bad-ra-2"))
        n3 = fake.stats()["data_requests"]
        m2 = metrics(env)
        r.check(n3 - n2 == 6 and m2.get('enrichd_upstream_failures_total{kind="status"}', 0) == 6
                and m2.get(THROTTLED) == m.get(THROTTLED),
                "503 with a Retry-After that is no value: status, no pause (%d calls, status %s)"
                % (n3 - n2, m2.get('enrichd_upstream_failures_total{kind="status"}')))
        fake.control(mode="ok", retry_after="", throttle_status=429)


def test_rate_limit(r, fake):
    rate, span = 20, 3.0
    with env_for("quota-rate", fake, upstream_timeout_ms=300, ids_per_call=1,
                 max_calls_per_batch=4, breaker_failures=1000,
                 upstream_max_calls_per_s=rate) as env:
        fake.control(mode="ok", latency_ms=0)
        post(env, fresh("warm", 1))
        # The path's own time on this machine now: the slowest of three
        # batches the upstream has no part in (a provider outside the
        # contract, rejected: no token taken).
        path_s = 0.0
        for i in range(3):
            t = time.monotonic()
            post(env, [{"provider": "xx", "id": "path%d" % i}])
            path_s = max(path_s, time.monotonic() - t)
        harness.time.sleep(1.0)  # the bucket full again
        fake.reset()
        stop = time.monotonic() + span
        lat, lock = [], threading.Lock()

        def client(k):
            i = 0
            while time.monotonic() < stop and i < 2000:
                t = time.monotonic()
                st, h, _ = post(env, fresh("r%d-%d" % (k, i), 4))
                with lock:
                    lat.append((time.monotonic() - t, st, degraded(h)))
                i += 1

        ts = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        t_start = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        elapsed = time.monotonic() - t_start
        calls = fake.stats()["data_requests"]
        cap = rate * elapsed + rate // 10 + 1
        r.check(calls <= cap, "at most rate x t + burst calls: %d in %.2f s (cap %.0f)"
                % (calls, elapsed, cap))
        r.check(calls > 0, "calls were made: %d" % calls)
        r.goal(calls >= 0.7 * rate * span, "the rate is used: %d calls" % calls,
               0.7 * rate * span / max(calls, 1), 1.0)
        wanted = 4 * len(lat)
        r.check(wanted > 2 * calls, "far more calls were wanted than made: %d vs %d" % (wanted, calls))
        r.check(all(st == 200 for _, st, _ in lat), "every batch answered")
        worst = max(l for l, _, _ in lat)
        # A batch that waited for a token would wait the span (seconds).
        r.check(worst < 0.3 + 2.0 + path_s, "no batch held for a token: max %.3f s (< 0.3 s + "
                "2 s + the path's %.3f s)" % (worst, path_s))
        r.goal(worst < 0.3 + 0.4 + path_s,
               "no batch held past its deadline for a token: max %.3f s (< 0.3 s + 0.4 s + the "
               "path's %.3f s)" % (worst, path_s), worst, 0.3 + 0.4 + path_s)
        deg = sum(d for _, _, d in lat)
        r.check(deg == wanted - calls, "every id not asked is degraded: %d of %d (%d asked)"
                % (deg, wanted, calls))
        m = metrics(env)
        r.check(m.get(THROTTLED, 0) > 0 and m.get('enrichd_upstream_breakers{state="closed"}') == 2,
                "throttled counted, breakers closed: %s" % m.get(THROTTLED))


def main():
    harness.run_tests(
        test_retry_after_pauses_host, test_503_http_date, test_rate_limit, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
