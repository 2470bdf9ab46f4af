#!/usr/bin/env python3
"""test_status_load.py: the operators' endpoints when the pool is in
trouble, through the real nginx and enrichd with a fake upstream:
  - every worker blocked on a hanging upstream: the endpoints still answer
    at once, show who is busy with which request, and the listen-queue
    depth equals what `ss -xl` reports; work waiting a whole window
    without completing turns /healthz 503 ("stalled");
    (the queued batches, waiting past queue_timeout_ms, are shed with 503
    and Retry-After once a worker takes them);
  - the upstream failing: breakers open, degraded records pass the
    threshold, /healthz is 503 with the reasons, and the systemd watchdog
    ping goes on (a provider's fault is no reason to restart: liveness
    is not health); when the upstream recovers, so does the verdict.
"""
# How soon the endpoints answer and how soon /healthz turns 503 are goals
# (make bench-goals); that they answer while every worker is still
# blocked, the stall seen, the verdict and its reasons, the pings going on
# and the counts are checked.
import json
import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (FakeUpstream, get_json, metrics_values, promtool_check,  # noqa: E402
                         records_body, ss_listen_queue)

WORKERS = 2
QUEUED = 3
SAN = harness.is_sanitized(harness.build_dir())
# upstream_timeout_ms: how long a hung call holds a worker.  The stall is
# seen between the health window (2 s) and the hang's end; on a sanitizer
# build beside other suites the checks before it (promtool among them)
# can take a second or more, so the hang leaves it more room there.
HANG_MS = 5000 if SAN else 3000


def fire(env, n, results, tag):
    """n concurrent requests in threads, each with a unique batch and id."""
    threads = []

    def one(i):
        rid = "%s-%d" % (tag, i)
        try:
            st, _, _ = env.request("/v1/enrich", records_body(4, seed=random.randrange(1 << 40)),
                                   headers={"X-Request-ID": rid}, timeout=30)
        except Exception as e:  # a transport failure is a result too
            st = repr(e)
        results.append((rid, st))

    for i in range(n):
        t = threading.Thread(target=one, args=(i,), daemon=True)
        t.start()
        threads.append(t)
    return threads


def timed(env, path):
    t0 = time.monotonic()
    st, h, body = env.request(path, method="GET", timeout=10)
    return st, body, time.monotonic() - t0


def test_blocked_pool(r):
    with FakeUpstream() as up, harness.Env(name="enr-blocked") as env:
        env.start_enrichd("workers = %d\nupstream_url = %s\nupstream_timeout_ms = %d\n"
                          "request_timeout_ms = %d\nbreaker_failures = 50\nbreaker_window = 0\n"
                          "health_window_s = 2\nslow_request_ms = 10000\n"
                          % (WORKERS, up.url, HANG_MS, HANG_MS + 3000))
        env.start_nginx()
        up.control(mode="hang")
        results = []
        threads = fire(env, WORKERS, results, "blk")
        harness.wait_for(lambda: get_json(env, "/status")["active processes"] == WORKERS, 5,
                         what="all workers busy")
        threads += fire(env, QUEUED, results, "q")
        qpath = env.sock
        harness.wait_for(lambda: ss_listen_queue(qpath) == QUEUED, 5, what="queue in ss")

        # Every endpoint answers at once while every worker is stuck.
        # /healthz may already say stalled (503); its code and body agree.
        for path in ("/healthz", "/readyz", "/status?full", "/metrics"):
            st, body, dt = timed(env, path)
            if path == "/healthz":
                doc = json.loads(body)
                ok = (st, doc.get("status")) in ((200, "ok"), (503, "unhealthy"))
            else:
                ok = st == 200
            blocked = not any(rid.startswith("blk") for rid, _ in results)
            r.check(ok and blocked, "%s answers (status %d) while every worker is still blocked"
                    % (path, st))
            r.goal(ok and dt < 1.0, "%s answers in %.3fs (status %d)" % (path, dt, st), dt, 1.0)

        ss_before = ss_listen_queue(qpath)
        full = get_json(env, "/status?full")
        st, _, mtext = env.request("/metrics", method="GET")
        ss_after = ss_listen_queue(qpath)
        r.check(ss_before == ss_after == QUEUED, "queue stable in ss: %r %r" % (ss_before, ss_after))
        r.check(full["listen queue"] == ss_before,
                "/status listen queue %r == ss -xl Recv-Q %r" % (full["listen queue"], ss_before))
        m = metrics_values(mtext.decode())
        r.check(m.get("enrichd_listen_queue_connections") == ss_before,
                "metrics listen queue %r" % m.get("enrichd_listen_queue_connections"))
        r.check(full["max listen queue"] >= QUEUED, "max listen queue %r" % full["max listen queue"])
        r.check(full["listen queue len"] == 511, "backlog limit %r" % full.get("listen queue len"))
        r.check(full["active processes"] == WORKERS and full["idle processes"] == 0, "all busy")
        r.check(full["in_flight"] == WORKERS and full["lost"] == 0 and
                full["accepted conn"] == full["completed"] + full["in_flight"],
                "accepted %d = completed %d + in flight %d"
                % (full["accepted conn"], full["completed"], full["in_flight"]))
        busy = [p for p in full["processes"] if p["state"] == "busy"]
        ids = sorted(p.get("request_id", "") for p in busy)
        r.check(ids == sorted("blk-%d" % i for i in range(WORKERS)),
                "busy workers show the request ids: %r" % ids)
        r.check(all(p.get("request_age_ms", 0) > 0 for p in busy), "request ages shown")
        r.check(full["max active processes"] == WORKERS and full["max children reached"] == 1,
                "max active %r" % full["max active processes"])
        ok, out = promtool_check(mtext)
        r.check(ok, "promtool under load: %s" % out)

        # Nothing completes for a whole window (2 s): /healthz says so.
        stalled = None
        deadline = time.monotonic() + HANG_MS / 1000.0 + 1
        while time.monotonic() < deadline and stalled is None:
            st, body, _ = timed(env, "/healthz")
            doc = json.loads(body)
            if st == 503 and "stalled" in doc.get("reasons", []):
                stalled = doc
            time.sleep(0.1)
        r.check(stalled is not None, "/healthz 503 stalled while nothing completes")
        if stalled:
            r.check("requests queue without completing" in stalled.get("reason", ""),
                    "stall reason text %r" % stalled.get("reason"))
            r.check(stalled["window"]["oldest_request_ms"] >= 2000, "oldest request age shown")

        up.control(mode="ok")
        for t in threads:
            t.join(30)
        r.check(len(results) == WORKERS + QUEUED and
                all(st == (200 if rid.startswith("blk") else 503) for rid, st in results),
                "the blocked requests answered 200 in the end, the ones queued behind them "
                "for %d ms shed with 503 (queue_timeout_ms 1000): %r" % (HANG_MS, results))
        after = get_json(env, "/status")
        r.check(after["in_flight"] == 0 and after["listen queue"] == 0, "drained: %r/%r"
                % (after["in_flight"], after["listen queue"]))
        r.check(after["slow requests"] == 0, "no request passed slow_request_ms 10 s")


def healthz(env):
    st, _, body = env.request("/healthz", method="GET")
    return st, json.loads(body)


def round_of(env, n):
    """n concurrent requests (so every worker takes some), fresh ids."""
    res = []
    for t in fire(env, n, res, "r"):
        t.join(30)
    return res


def test_upstream_failure(r):
    with FakeUpstream() as up, harness.Env(name="enr-fail") as env:
        env.start_enrichd("workers = %d\nupstream_url = %s\nupstream_timeout_ms = 1000\n"
                          "request_timeout_ms = 3000\nbreaker_failures = 2\n"
                          "breaker_cooldown_ms = 4000\nhealth_window_s = 2\n"
                          "health_max_degraded_ratio = 0.5\n" % (WORKERS, up.url),
                          notify=True, watchdog_usec=1000000)
        env.start_nginx()
        round_of(env, 4)
        st, doc = healthz(env)
        r.check(st == 200, "healthy with a working upstream: %r" % doc)
        env.notify.wait("WATCHDOG", 2, timeout=5)

        # The upstream fails slowly enough that both workers take requests.
        up.control(mode="5xx", latency_ms=150)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            round_of(env, 2 * WORKERS)
            s = get_json(env, "/status")
            if s["upstream"]["breakers"]["open"] == WORKERS:
                break
        r.check(s["upstream"]["breakers"]["open"] == WORKERS, "every breaker open: %r" % s["upstream"])
        round_of(env, 2 * WORKERS)  # degraded answers while open
        # The master judges once a tick (1 s) and /healthz shows its
        # verdict: allow two ticks, not more.
        t0 = time.monotonic()
        st, doc = healthz(env)
        while st != 503 and time.monotonic() - t0 < 2.5:
            time.sleep(0.1)
            st, doc = healthz(env)
        took = time.monotonic() - t0
        # Beside other suites the verdict may come later: the upstream's
        # failures go on (the window keeps degraded answers) until it does;
        # how soon is a goal.
        while st != 503 and time.monotonic() - t0 < 15:
            round_of(env, 2 * WORKERS)
            st, doc = healthz(env)
            took = time.monotonic() - t0
        r.check(st == 503, "/healthz 503 while the upstream fails: %r" % doc)
        r.goal(st == 503 and took < 2.5, "/healthz 503 within two ticks while the upstream fails "
               "(%.1f s): %r" % (took, doc), took, 2.5)
        r.check(doc.get("master", {}).get("healthy") is False,
                "one verdict: the master's is the one /healthz shows: %r" % doc.get("master"))
        r.check("degraded_ratio" in doc.get("reasons", []) and "breaker_open" in doc.get("reasons", []),
                "reasons name the degraded ratio and the breakers: %r" % doc.get("reasons"))
        r.check(doc["window"]["degraded_ratio"] > 0.5 and "degraded ratio" in doc.get("reason", ""),
                "the ratio and its threshold are in the body: %r" % doc.get("reason"))
        st, _, mtext = env.request("/metrics", method="GET")
        m = metrics_values(mtext.decode())
        r.check(m.get("enrichd_healthy") == 0 and m.get('enrichd_unhealthy{reason="breaker_open"}') == 1,
                "metrics show the verdict")
        r.check(m.get("enrichd_upstream_breaker_opens_total", 0) >= WORKERS, "breaker opens counted")
        r.check(m.get('enrichd_upstream_failures_total{kind="status"}', 0) >= 2 * WORKERS,
                "upstream failures counted by kind")
        r.check(m.get("enrichd_records_degraded_total", 0) > 0, "degraded records counted")
        ok, out = promtool_check(mtext)
        r.check(ok, "promtool while unhealthy: %s" % out)

        # The watchdog ping goes on: the pool is live, the provider is sick.
        pings = len(env.notify.values("WATCHDOG"))
        t0 = time.monotonic()
        harness.poll(lambda: len(env.notify.values("WATCHDOG")) >= pings + 3, 5)
        still = healthz(env)[0] == 503
        r.check(still, "still unhealthy (breakers stay open for the cool-down)")
        r.check(len(env.notify.values("WATCHDOG")) >= pings + 3,
                "WATCHDOG=1 goes on while unhealthy for the provider (%d -> %d in %.1f s)"
                % (pings, len(env.notify.values("WATCHDOG")), time.monotonic() - t0))
        status_lines = env.notify.values("STATUS")
        r.check(any("unhealthy" in s for s in status_lines), "STATUS= says unhealthy: %r" % status_lines[-3:])

        # Recovery: after the cool-down the probes succeed and the window
        # of degraded answers ages out.
        up.control(mode="ok", latency_ms=0)
        deadline = time.monotonic() + 20
        st = 0
        while time.monotonic() < deadline:
            round_of(env, 2 * WORKERS)
            st, doc = healthz(env)
            if st == 200:
                break
            time.sleep(0.3)
        r.check(st == 200, "/healthz recovers with the upstream: %r" % doc)
        pings = len(env.notify.values("WATCHDOG"))
        env.notify.wait("WATCHDOG", pings + 1, timeout=5)
        r.check(len(env.notify.values("WATCHDOG")) > pings, "watchdog ping resumes")


def test_killed_worker_attribution(r):
    """A worker killed mid-request: the status page names the request it
    was serving and its age, and the request counts as lost, not in flight."""
    with FakeUpstream() as up, harness.Env(name="enr-killed") as env:
        env.start_enrichd("workers = 1\nupstream_url = %s\nupstream_timeout_ms = %d\n"
                          "request_timeout_ms = %d\n" % (up.url, HANG_MS, HANG_MS + 3000))
        env.start_nginx()
        up.control(mode="hang")
        results = []
        threads = fire(env, 1, results, "doomed")
        busy = harness.wait_for(
            lambda: [p for p in get_json(env, "/status?full")["processes"] if p["state"] == "busy"],
            5, what="busy worker")[0]
        time.sleep(0.3)
        os.kill(busy["pid"], signal.SIGKILL)
        harness.wait_for(lambda: [p for p in get_json(env, "/status?full")["processes"]
                                  if p["state"] == "idle" and p["pid"] != busy["pid"]], 5,
                         what="replacement worker")
        for t in threads:
            t.join(30)
        full = get_json(env, "/status?full")
        last = full["processes"][0]["last_exit"]
        r.check(last["reason"] == "crash" and last["pid"] == busy["pid"], "last exit: %r" % last)
        r.check(last["request_id"] == "doomed-0", "the lost request id: %r" % last)
        r.check(last["request_age_ms"] >= 300, "the lost request's age: %r" % last)
        r.check(full["restarts"]["crash"] == 1 and full["processes"][0]["restarts"] == 1,
                "restart counted by reason")
        r.check(full["lost"] == 1 and full["in_flight"] == 0 and
                full["accepted conn"] == full["completed"] + full["in_flight"] + full["lost"],
                "accepted %d = completed %d + in flight %d + lost %d"
                % (full["accepted conn"], full["completed"], full["in_flight"], full["lost"]))
        st, _, body = env.request("/status?text&full", method="GET")
        r.check(b"crash pid %d req doomed-0" % busy["pid"] in body, "text view names the lost request")
        up.control(mode="ok")


def main():
    harness.run_tests(test_blocked_pool, test_killed_worker_attribution, test_upstream_failure)


if __name__ == "__main__":
    main()
