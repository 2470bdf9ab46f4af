#!/usr/bin/env python3
"""test_pool_leak.py: recycling at limits, on the test-hooks build
(make B=build-hooks EXTRA_CFLAGS=-DENR_TEST_HOOKS; built on demand).

- descriptor leak (ENRICHD_TEST_LEAK=fd:N): the worker ends itself at
  fd_soft after answering, zero failed requests under load;
- memory leak (mem:KB): same at rss_soft_mb;
- the exact request: one worker leaking one descriptor per request, with
  fd_soft set a few above its idle count, exits after the first request
  that leaves it over fd_soft, never at fd_soft itself (the limit is
  "over", not "at"); leaking 1 MiB per request it exits after the first
  request that takes its RSS over rss_soft_mb, read from outside after
  every request, not one later nor one sooner;
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
        env.start_stack("workers = 2\n" + extra, env={"ENRICHD_TEST_LEAK": leak}, workers=2)
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


def one_request(env):
    out = harness.fcgi_request(env.sock, harness.fcgi_enrich_params(BODY), BODY, timeout=10)
    return harness.fcgi_status(out)


def exit_after(env, pid, n_max, expect, between=None):
    """Sends requests one at a time until worker pid exits (at most
    n_max); calls between(i) after request i while pid lives.  Returns
    (the exit line, the number of requests sent).  The worker checks its
    limits after the connection is closed: from the request before the
    one expected to end it, the wait for its exit line is long enough for
    a loaded machine (a request sent too soon would go to its
    replacement); an earlier exit still shows in the line's served."""
    for i in range(1, n_max + 1):
        st = one_request(env)
        if st != 200:
            return None, i
        try:
            ev = harness.wait_for(lambda: [e for e in env.log_events("worker exit")
                                           if e.get("worker_pid") == str(pid)],
                                  3.0 if i >= expect - 1 else 0.3, what="exit")
            return ev[0], i
        except Exception:
            pass
        if between is not None:
            between(i)
    return None, n_max


def test_fd_soft_exact(r):
    with harness.Env(build=harness.hooks_build_dir(), name="pool-fdexact") as env:
        # A first pool only to learn the idle count of a worker like it.
        # The worker counts its own table without the directory it keeps
        # open for that (procstat.h): one less than we see from outside.
        env.start_enrichd("workers = 1\nfd_soft = 500\nfd_hard = 1000\n",
                          env={"ENRICHD_TEST_LEAK": "fd:0"})
        pid = env.wait_workers(1)[0]
        one_request(env)
        harness.wait_worker_listening(pid)
        idle = harness.fd_count(pid) - 1
        env.signal(15)
        env.wait_exit(10)
        limit = max(16, idle + 3)
        k = limit - idle  # requests that bring it to exactly fd_soft
        env.procs.remove(env.enrichd)
        env.start_enrichd("workers = 1\nfd_soft = %d\nfd_hard = 1000\n" % limit,
                          env={"ENRICHD_TEST_LEAK": "fd:1"})
        pid = env.wait_workers(1)[0]
        counts = {}

        def count(i):
            # Read once the request's connection is gone, as the worker
            # reads its own table: answered is not yet closed.
            harness.wait_worker_listening(pid)
            counts[i] = harness.fd_count(pid) - 1
        ev, sent = exit_after(env, pid, k + 5, k + 1, count)
        r.check(ev is not None and ev.get("reason") == "fd",
                "the worker ended itself for fd: %r" % ev)
        r.check(counts.get(k) == limit,
                "after %d requests it holds exactly fd_soft = %d descriptors and serves on "
                "(counts %r)" % (k, limit, counts))
        r.check(ev is not None and int(ev.get("served", -1)) == k + 1 and sent == k + 1,
                "it exits after request %d, the first over fd_soft, not at it: served %r"
                % (k + 1, ev and ev.get("served")))


def test_rss_soft_exact(r):
    with harness.Env(build=harness.hooks_build_dir(), name="pool-rssexact") as env:
        # A first pool only to learn the RSS of a worker like it after one
        # request (its buffers warm).
        env.start_enrichd("workers = 1\nrss_soft_mb = 0\n", env={"ENRICHD_TEST_LEAK": "mem:0"})
        pid = env.wait_workers(1)[0]
        one_request(env)
        idle_kb = harness.proc_status_kb(pid, "VmRSS")
        env.signal(15)
        env.wait_exit(10)
        env.procs.remove(env.enrichd)
        # The leak puts the limit half a leak past 6 of them: request 7
        # is the first to take the worker over it, with ~500 KB of margin
        # either side for what differs between two workers.
        limit_mb = max(16, (idle_kb + 6 * 1024) // 1024 + 1)
        limit_kb = limit_mb * 1024
        leak_kb = int((limit_kb - idle_kb) / 6.5)
        env.start_enrichd("workers = 1\nrss_soft_mb = %d\nrss_hard_mb = 2000\n" % limit_mb,
                          env={"ENRICHD_TEST_LEAK": "mem:%d" % leak_kb})
        pid = env.wait_workers(1)[0]
        rss = {}
        ev, sent = exit_after(env, pid, 20, 7,
                              lambda i: rss.__setitem__(i, harness.proc_status_kb(pid, "VmRSS")))
        r.check(ev is not None and ev.get("reason") == "rss",
                "the worker ended itself for rss: %r" % ev)
        r.check(rss and all(v <= limit_kb for v in rss.values()),
                "while it served on, its RSS was never over rss_soft_mb = %d KB: %r"
                % (limit_kb, rss))
        # Each request adds the leak and a few KB of its own: the last
        # reading plus that step is where the request that ended it took
        # the worker, and it must be the first step over the limit.
        steps = [rss[i + 1] - rss[i] for i in range(1, sent - 1) if i + 1 in rss]
        step = sum(steps) / len(steps) if steps else leak_kb
        last = rss.get(sent - 1, 0)
        r.check(ev is not None and int(ev.get("served", -1)) == sent and
                last <= limit_kb < last + step,
                "it exits after request %d, the first over %d KB (%d KB before it, %.0f KB a "
                "request; leaking %d KB from %d KB; expected 7): served %r"
                % (sent, limit_kb, last, step, leak_kb, idle_kb, ev and ev.get("served")))


def path_time(env):
    """The slowest of three normal batches through nginx: what the path
    itself costs on this machine now."""
    worst = 0.0
    for _ in range(3):
        t0 = time.monotonic()
        st, _, _ = env.request("/v1/enrich", BODY)
        assert st == 200, st
        worst = max(worst, time.monotonic() - t0)
    return worst


def test_stuck_request(r):
    with harness.Env(build=harness.hooks_build_dir(), name="pool-stuck") as env:
        env.start_enrichd("workers = 2\nrequest_timeout_ms = 500\nkill_grace_ms = 300\n"
                          "upstream_timeout_ms = 100\n")
        env.start_nginx()
        env.wait_workers(2)
        path_s = path_time(env)
        t0 = time.monotonic()
        st, hdr, _ = env.request("/v1/enrich", BODY, headers={"X-Test-Hang-Ms": "20000",
                                                             "X-Request-ID": "stuck-req-1"})
        took = time.monotonic() - t0
        r.check(st == 503 and hdr.get("retry-after"),
                "the stuck request fails at nginx when its worker is killed: 503 with "
                "Retry-After (nginx's 502): %d %r" % (st, hdr))
        # The master sees the request past request_timeout_ms (0.5 s) at its
        # next tick (each second), sends TERM, which the stuck worker does
        # not take in the middle of a request, and KILL kill_grace_ms
        # (0.3 s) later: 0.8 to 1.8 s by the master's own clock (the age it
        # logs for the lost request), and what a loaded machine adds to a
        # tick; the client's 503 then comes no later than the path's own
        # time (a normal batch just before) after the kill.
        lost = env.wait_log("request lost with its worker")[0]
        age = int(lost.get("req_age_ms", -1)) / 1000.0
        r.check(0.8 <= age <= 1.8 + 0.4, "stopped after the timeout, one tick at most, and the "
                "grace: the request was %.2f s old (0.8..2.2)" % age)
        r.check(0.8 <= took <= age + 0.4 + path_s,
                "the client's 503 once the worker is killed: %.2f s (the request %.2f s old at the "
                "kill, a normal batch %.2f s)" % (took, age, path_s))
        ev = env.wait_log("worker exit")[0]
        r.check(ev["reason"] == "timeout", "reason=timeout: %r" % ev)
        r.check(ev.get("req_id") == "stuck-req-1", "the exit names the request: %r" % ev)
        r.check(env.log_events("worker did not stop in time: SIGKILL"), "escalated to KILL")
        env.wait_workers(2)
        st, _, _ = env.request("/v1/enrich", BODY)
        r.check(st == 200, "pool serves after the kill")


def test_worker_deadline(r):
    with harness.Env(build=harness.hooks_build_dir(), name="pool-deadline") as env:
        env.start_stack("workers = 1\nrequest_timeout_ms = 500\nupstream_timeout_ms = 100\n", workers=1)
        path_s = path_time(env)
        t0 = time.monotonic()
        st, hdr, body = env.request("/v1/enrich", BODY, headers={"X-Test-Sleep-Ms": "460"})
        took = time.monotonic() - t0
        r.check(st == 503 and hdr.get("content-type") == "application/json",
                "the worker answers 503 JSON at its deadline: %d %r" % (st, body))
        r.check("error" in json.loads(body), "error body is JSON: %r" % body)
        # 460 ms of work plus the client's overhead through nginx (a normal
        # batch's time just before, and slack); a kill would come after the
        # master's 1 s tick and kill_grace_ms on top of the 500 ms timeout.
        r.check(took < 1.2 + path_s, "answered at its deadline, not after a kill: %.3f s "
                "(< 1.2 s + a normal batch's %.3f s)" % (took, path_s))
        time.sleep(1.2)
        r.check(not env.log_events("worker exit"), "the worker was not killed")


if __name__ == "__main__":
    harness.run_tests(test_fd_leak, test_mem_leak, test_fd_soft_exact, test_rss_soft_exact,
                      test_stuck_request, test_worker_deadline)
