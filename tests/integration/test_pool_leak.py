#!/usr/bin/env python3
"""test_pool_leak.py: recycling at limits, on the test-hooks build
(make B=build-hooks EXTRA_CFLAGS=-DENR_TEST_HOOKS; built on demand).

- descriptor leak (ENRICHD_TEST_LEAK=fd:N): the worker ends itself at
  fd_soft after answering, zero failed requests under load;
- memory leak (mem:KB): same at rss_soft_mb;
- a stuck request (X-Test-Hang-Ms): the master's sampler stops the worker
  past request_timeout_ms (TERM, then KILL after kill_grace_ms), logs the
  request id it was serving, and replaces it;
- slow work (X-Test-Sleep-Ms): the worker itself answers 503 JSON before
  its deadline, before the master would step in."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BODY = harness.sample_body(20)


def leak_case(r, leak, extra, reason, name):
    with harness.Env(build=harness.hooks_build_dir(), name=name) as env:
        env.start_enrichd("workers = 2\n" + extra, env={"ENRICHD_TEST_LEAK": leak})
        env.start_nginx()
        env.wait_workers(2)
        load = harness.Load(env, clients=4, body=BODY)
        env.wait_log("worker exit", count=4, timeout=40)
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(not fails, "%s leak: zero failed requests (%d of %d) %r"
                % (reason, len(fails), len(res), fails[:3]))
        exits = env.log_events("worker exit")
        r.check(all(e["reason"] == reason for e in exits),
                "%s leak: every exit has reason=%s: %r" % (reason, reason,
                                                          [e["reason"] for e in exits]))
        r.check(not env.log_events("worker over a hard limit"),
                "%s leak: soft limit acted before the hard one" % reason)
        env.wait_workers(2)
        return exits


def test_fd_leak(r):
    exits = leak_case(r, "fd:10", "fd_soft = 60\nfd_hard = 1000\n", "fd", "pool-fdleak")
    served = [int(e["served"]) for e in exits]
    # ~10 leaked per request from ~10 at start: about 5 requests each.
    r.check(all(3 <= s <= 8 for s in served), "fd leak: recycled after ~5 requests: %r" % served)


def test_mem_leak(r):
    exits = leak_case(r, "mem:2048", "rss_soft_mb = 30\nrss_hard_mb = 2000\n", "rss",
                      "pool-memleak")
    served = [int(e["served"]) for e in exits]
    r.check(all(5 <= s <= 20 for s in served), "mem leak: recycled after ~13 requests: %r" % served)


def test_stuck_request(r):
    with harness.Env(build=harness.hooks_build_dir(), name="pool-stuck") as env:
        env.start_enrichd("workers = 2\nrequest_timeout_ms = 500\nkill_grace_ms = 300\n"
                          "upstream_timeout_ms = 100\n")
        env.start_nginx()
        env.wait_workers(2)
        t0 = time.monotonic()
        st, hdr, _ = env.request("/v1/enrich", BODY, headers={"X-Test-Hang-Ms": "20000",
                                                             "X-Request-ID": "stuck-req-1"})
        took = time.monotonic() - t0
        r.check(st == 503 and hdr.get("retry-after"),
                "the stuck request fails at nginx when its worker is killed: 503 with "
                "Retry-After (nginx's 502): %d %r" % (st, hdr))
        r.check(0.5 <= took <= 3.0, "stopped after the timeout and the grace: %.2f s" % took)
        ev = env.wait_log("worker exit")[0]
        r.check(ev["reason"] == "timeout", "reason=timeout: %r" % ev)
        r.check(ev.get("req_id") == "stuck-req-1", "the exit names the request: %r" % ev)
        r.check(env.log_events("worker did not stop in time: SIGKILL"), "escalated to KILL")
        env.wait_workers(2)
        st, _, _ = env.request("/v1/enrich", BODY)
        r.check(st == 200, "pool serves after the kill")


def test_worker_deadline(r):
    with harness.Env(build=harness.hooks_build_dir(), name="pool-deadline") as env:
        env.start_enrichd("workers = 1\nrequest_timeout_ms = 500\nupstream_timeout_ms = 100\n")
        env.start_nginx()
        env.wait_workers(1)
        t0 = time.monotonic()
        st, hdr, body = env.request("/v1/enrich", BODY, headers={"X-Test-Sleep-Ms": "460"})
        took = time.monotonic() - t0
        r.check(st == 503 and hdr.get("content-type") == "application/json",
                "the worker answers 503 JSON at its deadline: %d %r" % (st, body))
        r.check("error" in json.loads(body), "error body is JSON: %r" % body)
        # 460 ms of work plus the client's overhead through nginx (slack for
        # loaded CI machines); a kill would come after the master's 1 s tick
        # and kill_grace_ms on top of the 500 ms timeout.
        r.check(took < 1.2, "answered at its deadline, not after a kill: %.3f s" % took)
        time.sleep(1.2)
        r.check(not env.log_events("worker exit"), "the worker was not killed")


if __name__ == "__main__":
    res = harness.Results()
    res.run(test_fd_leak)
    res.run(test_mem_leak)
    res.run(test_stuck_request)
    res.run(test_worker_deadline)
    res.done()
