#!/usr/bin/env python3
"""test_pool_signals.py: HUP, TERM and QUIT on a loaded pool.

- HUP under continuous load: every worker replaced, zero failed requests;
- HUP with a broken file: refused, the old configuration stays and serves;
- TERM with requests in flight and queued in the backlog: every one of
  them answered 200, then exit 0 (test-hooks build: X-Test-Sleep-Ms keeps
  requests in flight long enough to be sure they were queued);
- TERM under continuous load (test-hooks build: each request held 100 ms
  in its worker, so several are in flight when TERM lands): every request
  that reached enrichd before it answered 200, exit 0; only a request
  sent in the last moments may find the socket already gone (502: nginx
  fails it fast, as documented);
- QUIT: every process gone at once;
- a second TERM while draining stops at once, as QUIT does."""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BODY = harness.sample_body(50)


def test_hup_under_load(r):
    with harness.Env(name="pool-hup") as env:
        env.start_enrichd("workers = 4\n")
        env.start_nginx()
        before = set(env.wait_workers(4))
        load = harness.Load(env, clients=8, body=BODY)
        harness.wait_for(lambda: load.count() > 50, 20, what="load")
        for i in range(3):
            env.signal(signal.SIGHUP)
            env.wait_log("reload done", count=i + 1, timeout=10)
            time.sleep(0.2)
        n0 = load.count()
        harness.wait_for(lambda: load.count() > n0 + 50, 20, what="load after reloads")
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(len(res) > 100, "load ran: %d" % len(res))
        r.check(not fails, "zero failed requests across 3 reloads: %d %r" % (len(fails), fails[:3]))
        after = set(env.wait_workers(4))
        r.check(not (before & after), "every worker replaced")
        exits = env.log_events("worker exit")
        # 4 workers per reload, plus the probe worker each reload starts first
        # (docs/pool.md), which retires once its generation fills the pool.
        r.check(len(exits) == 15 and all(e["reason"] == "reload" for e in exits),
                "15 exits (3 x 4 workers + 3 probes), all reason=reload: %r"
                % [e["reason"] for e in exits])

        # A broken file is refused; the old configuration keeps serving.
        with open(env.conf, "a") as f:
            f.write("workers = banana\n")
        env.signal(signal.SIGHUP)
        ev = env.wait_log("reload refused: configuration invalid, keeping the old one")
        r.check(env.conf in ev[0].get("error", "") and "workers" in ev[0].get("error", ""),
                "the refusal names file and key: %r" % ev[0].get("error"))
        time.sleep(0.3)
        r.check(set(env.wait_workers(4)) == after, "no worker replaced by a refused reload")
        st, _, _ = env.request("/v1/enrich", BODY)
        r.check(st == 200, "still serving after a refused reload")


def test_term_drains_queue(r):
    build = harness.hooks_build_dir()
    with harness.Env(build=build, name="pool-drain") as env:
        env.start_stack("workers = 3\n", workers=3)
        results = []
        lock = threading.Lock()

        def one():
            try:
                st, _, body = env.request("/v1/enrich", BODY, headers={"X-Test-Sleep-Ms": "400"})
            except Exception as e:
                st, body = 0, repr(e).encode()
            with lock:
                results.append((st, body[:80]))

        threads = [threading.Thread(target=one) for _ in range(9)]
        for t in threads:
            t.start()
        time.sleep(0.25)  # 3 requests in the workers, 6 in the backlog
        t0 = time.monotonic()
        env.signal(signal.SIGTERM)
        for t in threads:
            t.join(20)
        code = env.wait_exit(15)
        took = time.monotonic() - t0
        r.check(code == 0, "exit 0 after draining: %r" % code)
        r.check(len(results) == 9 and all(x[0] == 200 for x in results),
                "all 9 in-flight and queued requests answered 200: %r" % results)
        r.check(took >= 0.5, "the drain waited for the queued requests (%.2f s)" % took)
        r.check(not os.path.exists(env.sock), "socket removed at exit")


def test_term_after_load(r):
    build = harness.hooks_build_dir()
    with harness.Env(build=build, name="pool-term") as env:
        env.start_stack("workers = 4\n", workers=4)
        load = harness.Load(env, clients=8, body=BODY, headers={"X-Test-Sleep-Ms": "100"})
        harness.wait_for(lambda: load.count() > 40, 20, what="load")
        t_term = time.monotonic()
        env.signal(signal.SIGTERM)  # the load is still running: requests in flight
        load.halt.set()
        res = load.stop()
        code = env.wait_exit(15)
        # Sent 50 ms before TERM: nginx had connected long before (it
        # connects within a millisecond), so enrichd holds or queues it.
        before = [x for x in res if x[1] < t_term - 0.05]
        in_flight = [x for x in before if x[2] > t_term]
        fails = [x for x in before if x[0] != 200]
        r.check(code == 0, "exit 0: %r" % code)
        r.check(len(in_flight) >= 4, "requests were in flight when TERM landed: %d" % len(in_flight))
        r.check(not fails, "every request that reached enrichd before TERM answered 200 "
                "(%d, %d in flight): %r" % (len(before), len(in_flight), fails[:3]))
        ev = env.log_events("worker exit")
        r.check(len(ev) == 4 and all(e["reason"] == "stop" for e in ev), "4 stops logged")
        r.check(env.log_events("stopped"), "'stopped' logged")


def idle_stop_s(conf, workers, build=None):
    """The control for a stop's time: how long a pool of the same build and
    configuration with nothing to wait for takes to stop on TERM (its
    workers' exits, their reaping, the status process's, the master's),
    measured just before under this moment's load."""
    with harness.Env(build=build, name="pool-stop-ctl") as env:
        env.start_enrichd(conf)
        env.wait_workers(workers)
        t0 = time.monotonic()
        env.signal(signal.SIGTERM)
        env.wait_exit(15)
        return time.monotonic() - t0


def test_quit(r):
    ctl = idle_stop_s("workers = 3\n", 3)
    with harness.Env(name="pool-quit") as env:
        env.start_enrichd("workers = 3\n")
        kids = harness.wait_for(lambda: len(harness.children(env.master_pid())) == 4 and
                                harness.children(env.master_pid()), 5, what="children")
        t0 = time.monotonic()
        env.signal(signal.SIGQUIT)
        code = env.wait_exit(5)
        took = time.monotonic() - t0
        r.check(code == 0 and took < 1.0 + ctl, "QUIT exits at once: code %r in %.2f s (< 1 s + "
                "an idle pool's stop on TERM, %.2f s)" % (code, took, ctl))
        r.check(not any(harness.pid_alive(p) for p in kids), "no child survives QUIT")


def test_second_term(r):
    """A drain that would wait 20 s for slow requests: the first TERM
    drains (the master stays), the second stops at once (test-hooks build:
    X-Test-Sleep-Ms keeps requests in flight)."""
    build = harness.hooks_build_dir()
    conf = "workers = 2\ndrain_timeout_ms = 20000\nrequest_timeout_ms = 30000\n"
    ctl = idle_stop_s(conf, 2, build)
    with harness.Env(build=build, name="pool-term2") as env:
        env.start_stack(conf, workers=2)
        kids = harness.children(env.master_pid())
        results = []
        lock = threading.Lock()

        def one():
            try:
                st, _, _ = env.request("/v1/enrich", BODY, headers={"X-Test-Sleep-Ms": "15000"},
                                       timeout=25)
            except Exception:
                st = 0
            with lock:
                results.append(st)

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        def busy():
            st, _, body = env.request("/status", method="GET")
            return st == 200 and json.loads(body)["active processes"] == 2

        harness.wait_for(busy, 10, what="both workers busy")
        env.signal(signal.SIGTERM)
        env.wait_log("draining", timeout=5)
        time.sleep(0.5)
        r.check(harness.pid_alive(env.master_pid()) and not env.log_events("stopped"),
                "one TERM drains: the master waits for the requests in flight")
        t0 = time.monotonic()
        env.signal(signal.SIGTERM)
        code = env.wait_exit(5)
        took = time.monotonic() - t0
        r.check(code == 0 and took < 1.5 + ctl,
                "the second TERM stops at once: code %r in %.2f s (< 1.5 s + an idle pool's "
                "stop on TERM, %.2f s)" % (code, took, ctl))
        r.check(len(env.log_events("second TERM while draining: stopping at once")) == 1,
                "the escalation is logged")
        r.check(not any(harness.pid_alive(p) for p in kids), "no child survives")
        for t in threads:
            t.join(20)
        r.check(len(results) == 2 and all(st != 200 for st in results),
                "the slow requests were cut, not served: %r" % results)


if __name__ == "__main__":
    harness.run_tests(test_hup_under_load, test_term_drains_queue, test_term_after_load, test_quit,
                      test_second_term)
