#!/usr/bin/env python3
"""test_idle_exit.py: idle_exit_s with the real daemon.

- socket-activated (systemd-socket-activate passes the sockets): after
  idle_exit_s without a request the pool drains and exits 0, with STOPPING
  on its notify socket; a request in the meantime restarts the idle clock;
- bound its own socket: the setting is ignored with a warning (nothing
  would start enrichd again) and the pool keeps serving.
(systemd starting it again on the next connection is in the system test,
under the real systemd.)
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

IDLE_S = 2
# The master looks at the pool once a tick (ENR_MASTER_TICK_MS, master_jobs.h):
# the idle clock starts at the first tick that sees no new request, so the
# exit comes IDLE_S to IDLE_S + one tick after the last request.
TICK_S = 1.0
# What a loaded machine adds to the drain and the exit (scheduling).
SLACK_S = 0.4


def test_activated_pool_exits_when_idle(r):
    with harness.Env(name="idle-exit") as env:
        env.start_enrichd("workers = 2\nidle_exit_s = %d\n" % IDLE_S, activate=True, notify=True)
        env.start_nginx()
        st, _, _ = env.request("/v1/enrich", harness.sample_body(5))
        r.check(st == 200, "the first request starts and is served (%s)" % st)
        env.notify.wait("READY", timeout=10)
        # Requests more often than IDLE_S keep it up.
        t0 = time.monotonic()
        while True:
            # The idle clock starts between t_sent and t_last: the lower
            # bound is counted from the one, the upper from the other.
            t_sent = time.monotonic()
            env.request("/v1/enrich", b"[]")
            t_last = time.monotonic()
            if t_last - t0 >= IDLE_S * 1.5:
                break
            time.sleep(IDLE_S / 4)
        r.check(env.enrichd.poll() is None, "requests every %.1f s keep it running" % (IDLE_S / 4))
        try:
            rc = env.enrichd.wait(IDLE_S + 10)
        except Exception:  # noqa: BLE001
            rc = None
        t_exit = time.monotonic()
        took = t_exit - t_last
        r.check(rc == 0, "idle: exits 0 (%r)" % rc)
        r.check(IDLE_S - 0.05 <= t_exit - t_sent and took <= IDLE_S + TICK_S + SLACK_S,
                "exits idle_exit_s to idle_exit_s + one tick after the last request: %.2f s "
                "from its send, %.2f s from its answer (%.2f..%.2f)"
                % (t_exit - t_sent, took, IDLE_S - 0.05, IDLE_S + TICK_S + SLACK_S))
        r.check(len(env.log_events("idle exit")) == 1, "logged as an idle exit")
        r.check(harness.poll(lambda: "STOPPING" in env.notify.keys(), 2),
                "systemd is told it is stopping")
        exits = [e.get("reason") for e in env.log_events("worker exit")]
        r.check(exits and all(x == "stop" for x in exits), "workers ended as a stop: %r" % exits)


def test_not_activated_ignores_it(r):
    with harness.Env(name="idle-exit-bound") as env:
        env.start_enrichd("workers = 1\nidle_exit_s = 1\n")
        env.start_nginx()
        time.sleep(2.5)
        r.check(env.enrichd.poll() is None, "a pool that bound its own socket keeps running")
        r.check(len(env.log_events("idle_exit_s ignored: not socket-activated, nothing would "
                                   "start enrichd again")) == 1, "and says why")
        st, _, _ = env.request("/v1/enrich", b"[]")
        r.check(st == 200, "and serves (%s)" % st)


def main():
    harness.run_tests(test_activated_pool_exits_when_idle, test_not_activated_ignores_it)


if __name__ == "__main__":
    main()
