#!/usr/bin/env python3
"""test_worker_orphan.py: a master that dies while a worker is starting
leaves no unsupervised worker.

PR_SET_PDEATHSIG only covers a parent that dies after the prctl() call.
On the test-hooks build, ENRICHD_TEST_START_DELAY_MS holds a new worker
before that call; the master is killed (SIGKILL: it cannot stop its
children) inside the window.  The worker must notice that its parent is
no longer the master (getppid() against the pid recorded before fork),
log it and exit, instead of serving the socket forever."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

DELAY_MS = 1500


def test_master_dies_during_worker_start(r):
    with harness.Env(build=harness.hooks_build_dir(), name="orphan") as env:
        env.start_enrichd("workers = 1\n", env={"ENRICHD_TEST_START_DELAY_MS": str(DELAY_MS)},
                          wait_ready=False)
        ev = env.wait_log("worker start", timeout=10)[0]
        worker = int(ev["worker_pid"])
        master = env.master_pid()
        os.kill(master, signal.SIGKILL)
        env.enrichd.wait(5)
        # The worker wakes DELAY_MS after it started; give it that and a margin.
        deadline = time.monotonic() + DELAY_MS / 1000.0 + 3
        while harness.pid_alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = harness.pid_alive(worker)
        r.check(not alive, "the worker whose master died before its prctl() exited "
                "(pid %d alive: %s)" % (worker, alive))
        r.check(bool(env.log_events("master gone before the worker started")),
                "the worker logged why it ended")
        served = False
        if os.path.exists(env.sock):
            try:
                out = harness.fcgi_request(env.sock, harness.fcgi_enrich_params(b"[]"), b"[]",
                                           timeout=2)
                served = bool(out)
            except OSError:
                pass
        r.check(not served, "nobody serves the socket of a dead master")


if __name__ == "__main__":
    harness.run_tests(test_master_dies_during_worker_start)
