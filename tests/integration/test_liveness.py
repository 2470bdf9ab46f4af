#!/usr/bin/env python3
"""test_liveness.py: the systemd watchdog follows liveness, not health.

enrichd with a NOTIFY_SOCKET this test reads and WATCHDOG_USEC of 1 s (a
ping due every 500 ms), behind the shipped nginx, enriching from the
fake upstream under a steady trickle of batches of new ids:
- the provider answering 5xx, refusing connections, and slow (past
  health_max_p99_ms): /healthz is 503 with the reason the whole time,
  and WATCHDOG=1 keeps coming on schedule (no gap near WATCHDOG_USEC);
- the provider well again: healthy again;
- every worker stopped (SIGSTOP) with connections waiting in the listen
  queue: after liveness_timeout_ms the watchdog is no longer fed, the
  log and /healthz say why; the workers continued, it is fed again;
- the master stopped (SIGSTOP): no WATCHDOG=1 while it is stopped.
"""
# The watchdog's schedule and how soon the pool is not live are goals
# (make bench-goals); that the pings go on, that it is not live before
# liveness_timeout_ms, the verdicts, logs and STATUS= are checked.
import itertools
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

WATCHDOG_USEC = 1000000
LIVENESS_MS = 3000
FAULT_S = 5.0


class Trickle:
    """Two clients posting batches of ids never seen (so every batch asks
    the provider) until stop()."""

    def __init__(self, env):
        self.env, self.halt, self.statuses = env, threading.Event(), []
        self.seq = itertools.count()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(2)]
        for t in self.threads:
            t.start()

    def _run(self):
        while not self.halt.is_set():
            n = next(self.seq)
            recs = [{"provider": "yt", "id": "Live-%d-%d" % (n, k)} for k in range(5)]
            try:
                st, _, _ = H.post(self.env, recs)
            except Exception:  # a transport failure is recorded as 0
                st = 0
            self.statuses.append(st)
            time.sleep(0.05)

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(20)
        return self.statuses


def pings(env):
    with env.notify.lock:
        return [t for t, kv in env.notify.messages if kv.get("WATCHDOG") == "1"]


def pings_between(env, t0, t1):
    return [t for t in pings(env) if t0 <= t <= t1]


def healthz(env):
    """/healthz's document, 200 or 503 alike."""
    import json
    try:
        st, _, body = env.request("/healthz", method="GET")
        doc = json.loads(body)
        doc["http_status"] = st
        return doc
    except Exception as e:  # recorded, and fails the check that reads it
        return {"error": repr(e)}


def fault_phase(r, env, what, want_reason):
    """FAULT_S seconds of a provider fault: unhealthy with the reason, watchdog fed."""
    docs = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < FAULT_S:
        docs.append(healthz(env))
        time.sleep(0.25)
    t1 = time.monotonic()
    late = [d for d in docs[len(docs) // 2:]]  # after the window has seen the fault
    r.check(late and all(d.get("status") == "unhealthy" and d.get("http_status") == 503
                         and want_reason in d.get("reasons", []) for d in late),
            "%s: /healthz unhealthy with %s the whole time: %r"
            % (what, want_reason, sorted(set(str(d.get("reasons")) for d in late))))
    r.check(all(d.get("live") is True for d in docs), "%s: live throughout: %r"
            % (what, [d.get("live_reason") for d in docs if d.get("live") is not True][:3]))
    p = pings_between(env, t0, t1)
    gaps = [b - a for a, b in zip(p, p[1:])]
    r.check(len(p) >= 2, "%s: WATCHDOG=1 goes on while live: %d pings in %.1f s"
            % (what, len(p), t1 - t0))
    r.goal(len(p) >= FAULT_S / 0.5 * 0.7 and gaps and max(gaps) < 0.9,
           "%s: WATCHDOG=1 on schedule: %d pings in %.1f s, largest gap %.2f s"
           % (what, len(p), t1 - t0, max(gaps) if gaps else -1), max(gaps or [99]), 0.9)
    return docs


def test_provider_faults(r, env, fake):
    trickle = Trickle(env)
    try:
        H.poll(lambda: len(trickle.statuses) >= 3 and healthz(env).get("status") == "ok", 10)
        d = healthz(env)
        r.check(d.get("status") == "ok" and d.get("live") is True, "healthy to begin: %r" % d)
        fake.control(mode="5xx")
        fault_phase(r, env, "provider 5xx", "degraded_ratio")
        fake.control(mode="refuse")
        fault_phase(r, env, "provider refusing", "degraded_ratio")
        fake.control(mode="ok", latency_ms=250)
        fault_phase(r, env, "provider slow", "p99_latency")
        fake.control(mode="ok", latency_ms=0)
        ok = H.poll(lambda: healthz(env).get("status") == "ok", 15, 0.25)
        r.check(ok, "provider well again: healthy again (%r)" % healthz(env).get("reason"))
    finally:
        sts = trickle.stop()
    r.check(sts and all(s == 200 for s in sts),
            "every batch answered 200 (degraded, never failed): %r"
            % sorted(set(sts)))
    r.check(not H.worker_exit_reasons(env), "no worker replaced: %r" % H.worker_exit_reasons(env))
    r.check(not env.log_events("pool not live: watchdog not fed"), "never not live")


def test_wedged_pool(r, env):
    pids = env.worker_pids()
    conns = []
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    try:
        for _ in range(4):  # waiting in the listen queue: nobody takes them
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(env.sock)
            conns.append(s)
        t0 = time.monotonic()
        ev = env.wait_log("pool not live: watchdog not fed", timeout=LIVENESS_MS / 1000.0 + 5)
        took = time.monotonic() - t0
        r.check(LIVENESS_MS / 1000.0 - 1.2 <= took, "not live, not before liveness_timeout_ms: "
                "%.2f s" % took)
        r.goal(took <= LIVENESS_MS / 1000.0 + 3,
               "not live after about liveness_timeout_ms: %.2f s" % took, took,
               LIVENESS_MS / 1000.0 + 3)
        r.check("unmoved" in ev[-1].get("reason", ""), "the log says why: %r" % ev[-1])
        d = healthz(env)
        r.check(d.get("live") is False and "unmoved" in d.get("live_reason", ""),
                "/healthz says not live, and why: %r" % {k: d.get(k) for k in ("live", "live_reason")})
        time.sleep(0.3)
        t1 = time.monotonic()
        time.sleep(2.0)
        p = pings_between(env, t1, time.monotonic())
        r.check(not p, "no WATCHDOG=1 while the pool is wedged: %d" % len(p))
        st = env.notify.values("STATUS")
        r.check(st and "NOT LIVE" in st[-1], "STATUS= says so: %r" % (st[-1:] or None))
    finally:
        for p in pids:
            os.kill(p, signal.SIGCONT)
        for s in conns:
            s.close()
    t2 = time.monotonic()
    r.check(H.poll(lambda: env.log_events("pool live again: watchdog fed"), 5),
            "workers continued: the log says live again")
    p = H.poll(lambda: len(pings_between(env, t2, time.monotonic())) >= 2, 5)
    r.check(p, "workers continued: WATCHDOG=1 fed again")
    d = healthz(env)
    r.check(d.get("live") is True, "/healthz says live again: %r"
            % {k: d.get(k) for k in ("live", "live_reason")})


def test_master_stopped(r, env):
    master = env.master_pid()
    os.kill(master, signal.SIGSTOP)
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        time.sleep(2.0)
        p = pings_between(env, t0, time.monotonic())
    finally:
        os.kill(master, signal.SIGCONT)
    r.check(not p, "no WATCHDOG=1 while the master is stopped: %d" % len(p))
    t1 = time.monotonic()
    H.wait_for(lambda: len(pings_between(env, t1, time.monotonic())) >= 2, 5,
               what="WATCHDOG=1 after SIGCONT")


def main():
    r = H.Results()
    with H.FakeUpstream() as fake:
        conf = ("workers = 2\nhealth_window_s = 2\nhealth_max_p99_ms = 150\n"
                "request_timeout_ms = 1000\nbody_timeout_ms = 500\nkill_grace_ms = 500\n"
                "liveness_timeout_ms = %d\n" % LIVENESS_MS
                + H.upstream_conf(fake, upstream_timeout_ms=400, breaker_failures=1000,
                                  breaker_window=0))
        with H.Env(name="liveness") as env:
            env.start_stack(conf, notify=True, watchdog_usec=WATCHDOG_USEC, workers=2)
            env.notify.wait("WATCHDOG", 2, timeout=10)
            for fn, args in ((test_provider_faults, (env, fake)), (test_wedged_pool, (env,)),
                             (test_master_stopped, (env,))):
                r.run(fn, *args)
    r.done()


if __name__ == "__main__":
    main()
