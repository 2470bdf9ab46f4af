#!/usr/bin/env python3
"""test_pool_crashloop.py: workers that die right after start make the
master back off exponentially instead of fork-looping; the state shows in
STATUS= and the log, and the pool recovers when the cause goes away.
Test-hooks build: a worker aborts at start while ENRICHD_TEST_CRASH_FILE
exists."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def test_crash_loop(r):
    with harness.Env(build=harness.hooks_build_dir(), name="pool-crashloop") as env:
        crash = os.path.join(env.dir, "crash-now")
        open(crash, "w").close()
        t0 = time.monotonic()
        env.start_enrichd("workers = 3\n", notify=True, wait_ready=False,
                          env={"ENRICHD_TEST_CRASH_FILE": crash})
        holds = env.wait_log("crash loop: holding forks", count=4, timeout=15)
        elapsed = time.monotonic() - t0
        backoffs = [int(e["backoff_ms"]) for e in holds]
        r.check(backoffs[:4] == [250, 500, 1000, 2000],
                "back-off doubles from 250 ms: %r" % backoffs)
        starts = len(env.log_events("worker start"))
        # Without the guard: a fork per exit, hundreds in these seconds.
        r.check(starts <= 3 + len(holds) + 1, "no fork loop: %d starts in %.1f s"
                % (starts, elapsed))
        exits = env.log_events("worker exit")
        r.check(exits and all(e["reason"] == "crash" and e.get("signal") == "ABRT"
                              for e in exits), "each death is a crash (ABRT)")
        env.notify.wait("STATUS", 1, timeout=5)
        r.check(harness.poll(lambda: any("CRASH LOOP" in s for s in env.notify.values("STATUS")),
                             5), "STATUS= shows the crash loop")
        r.check(not env.notify.values("READY"), "no READY=1 while no worker ever started")

        os.unlink(crash)
        r.check(harness.poll(lambda: env.log_events("crash loop over"), 15),
                "recovered: crash loop over logged")
        env.wait_workers(3, timeout=10)
        r.check(harness.poll(lambda: env.notify.values("READY"), 5), "READY=1 after recovery")
        r.check(harness.poll(lambda: any("CRASH LOOP" not in s and "workers 3/3" in s
                                         for s in env.notify.values("STATUS")[-2:]), 6),
                "STATUS= back to normal")


if __name__ == "__main__":
    harness.run_tests(test_crash_loop)
