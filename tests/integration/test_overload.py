#!/usr/bin/env python3
"""test_overload.py: a burst at 3x capacity through the shipped nginx
config, the way the cron pipeline's PHP client sends it (a new
connection per batch, open loop, a 30 s timeout).

The fake upstream answers in 40 ms, so a batch of 20 new ids costs a
worker about that long: capacity is measured first (closed loop, 4 in
flight), then BURST_S seconds at 3x that rate.  Expected: no 502, no
504, no client timeout, no transport error; every refusal a 503 with
Retry-After and a JSON reason, answered within 100 ms and a margin
(the shipped site lets max_conns batches into enrichd and refuses the
next at once); the 200s within queue_timeout_ms + two service times and
a margin; goodput near capacity; enrichd_shed_total equal to the worker's
503s; the same worker processes throughout; served at once again after
the burst.  enrichd runs its defaults apart from workers (2, the shipped
max_conns, 32, being sized for 6: a longer queue per worker, the harder case).
Margins are for a shared 2-core machine: the bar (goodput >= 90 %,
refusals within 100 ms) is what a quiet host shows and what the report
prints; ENR_OVERLOAD_BURST_S=60 runs the full minute.
"""
# run alone: it measures the pool's capacity, then offers 3x that rate:
# the load it makes would slow every suite beside it, and its capacity
# measured beside them says nothing.  Goodput, the 200s' p99 and the
# refusals' times are goals (make bench-goals).
# sanitizer build: side by side: what it checks (200s and 503s only,
# Retry-After, the shed counter, the same workers) held on the sanitizer
# build beside other suites, where the machine is no measure of capacity.
import http.client
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

QUEUE_MS = 1000  # enrichd's default queue_timeout_ms
REFUSAL_MS = 100
CAPACITY_S = 3.0
BURST_S = float(os.environ.get("ENR_OVERLOAD_BURST_S", "10"))
RATE_X = 3.0
IDS = 20
MARGIN_S = 0.7  # scheduling on a loaded shared machine
GOODPUT_MIN = 0.6


class Counter:
    def __init__(self):
        self.n = 0
        self.lock = threading.Lock()

    def next(self):
        with self.lock:
            self.n += 1
            return self.n


def batch(seq):
    n = seq.next()
    return json.dumps([{"provider": "yt", "id": "Ov-%d-%d" % (n, k)} for k in range(IDS)]).encode()


def one(env, body, timeout=30):
    """(status, retry-after, answer, seconds, error, batch): a new connection per batch."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", env.port, timeout=timeout)
    try:
        c.request("POST", "/v1/enrich", body=body, headers={"Content-Type": "application/json"})
        resp = c.getresponse()
        data = resp.read()
        return resp.status, resp.getheader("Retry-After"), data, time.monotonic() - t0, None, body
    except Exception as e:  # a transport failure or a client timeout: recorded as status 0
        return 0, None, b"", time.monotonic() - t0, repr(e), body
    finally:
        c.close()


def capacity(env, seq):
    done = []
    stop = time.monotonic() + CAPACITY_S

    def loop():
        while time.monotonic() < stop:
            st, _, _, took, _, _ = one(env, batch(seq))
            done.append((st, took))

    threads = [threading.Thread(target=loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ok = [d for d in done if d[0] == 200]
    service = sorted(d[1] for d in ok)[len(ok) // 2] if ok else 0.1
    return len(ok) / CAPACITY_S, service, done


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def test_burst(r):
    seq = Counter()
    with H.FakeUpstream() as fake:
        fake.control(latency_ms=40)
        conf = ("workers = 2\nhealth_window_s = 5\n"
                + H.upstream_conf(fake, upstream_timeout_ms=1000, ids_per_call=IDS,
                                  breaker_failures=1000)
                + "request_timeout_ms = 2000\n")
        with H.Env(name="overload") as env:
            pids = env.start_stack(conf, workers=2)
            cap, service, warm = capacity(env, seq)
            r.check(cap > 5 and all(d[0] == 200 for d in warm),
                    "capacity measured: %.1f batches/s, service %.0f ms, all 200" % (cap, service * 1000))
            rate = cap * RATE_X
            shed0 = H.metrics(env).get("enrichd_shed_total", 0)
            results = []
            lock = threading.Lock()

            def fire():
                res = one(env, batch(seq))
                with lock:
                    results.append(res)

            n = int(rate * BURST_S)
            t0 = time.monotonic()
            with ThreadPoolExecutor(max_workers=256) as pool:
                for i in range(n):
                    due = t0 + i / rate
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    pool.submit(fire)
            t_end = time.monotonic()
            after = one(env, batch(seq))
            # The PHP-style client honours Retry-After: a refused batch sent
            # again after it is answered.
            again = None
            refused_bodies = [x for x in results if x[0] == 503 and x[1] and x[1].isdigit()]
            if refused_bodies:
                time.sleep(int(refused_bodies[0][1]))
                again = one(env, refused_bodies[0][5])

            sts = [x[0] for x in results]
            ok = [x for x in results if x[0] == 200]
            refused = [x for x in results if x[0] != 200]
            by = {s: sts.count(s) for s in set(sts)}
            goodput = len(ok) / (t_end - t0)
            print("overload: capacity %.1f/s (service %.0f ms), sent %d at %.1f/s over %.1f s: %r"
                  % (cap, service * 1000, n, rate, t_end - t0, by))
            print("overload: goodput %.1f/s = %.0f %% of capacity; 200 p50 %.0f ms p99 %.0f ms; "
                  "503 p50 %.0f ms p99 %.0f ms max %.0f ms"
                  % (goodput, 100 * goodput / cap, pct([x[3] for x in ok], .5) * 1000,
                     pct([x[3] for x in ok], .99) * 1000, pct([x[3] for x in refused], .5) * 1000,
                     pct([x[3] for x in refused], .99) * 1000,
                     max([x[3] for x in refused] or [0]) * 1000))
            r.check(len(results) == n, "every batch answered: %d of %d" % (len(results), n))
            r.check(set(sts) <= {200, 503}, "only 200 and 503 (no 502, 504, timeout): %r" % by)
            errs = [x[4] for x in results if x[4]]
            r.check(not errs, "no transport error or client timeout: %r" % errs[:3])
            r.check(refused, "the burst was past capacity: some refused (%r)" % by)
            bad = [x for x in refused if not (x[1] and x[1].isdigit() and b'"error":' in x[2])]
            r.check(not bad, "every refusal a 503 with Retry-After and a JSON reason: %r"
                    % [(x[1], x[2][:80]) for x in bad[:3]])
            slow_refusals = [x[3] for x in refused if x[3] > REFUSAL_MS / 1000.0 + MARGIN_S]
            r.goal(not slow_refusals, "refusals answered within %d ms + %.1f s: %r"
                   % (REFUSAL_MS, MARGIN_S, sorted(slow_refusals)[-3:]),
                   len(slow_refusals), 0)
            p99 = pct([x[3] for x in ok], .99)
            r.goal(p99 <= QUEUE_MS / 1000.0 + 2 * service + MARGIN_S,
                   "200s p99 %.0f ms <= queue_timeout_ms + 2 service times + margin" % (p99 * 1000),
                   p99, QUEUE_MS / 1000.0 + 2 * service + MARGIN_S)
            r.goal(goodput >= GOODPUT_MIN * cap, "goodput %.1f/s >= %.0f %% of capacity %.1f/s"
                   % (goodput, GOODPUT_MIN * 100, cap), GOODPUT_MIN * cap / max(goodput, 1e-9), 1.0)
            shed_seen = sum(1 for x in refused if b"overloaded" in x[2])
            shed = H.metrics(env).get("enrichd_shed_total", 0) - shed0
            r.check(shed == shed_seen, "enrichd_shed_total %d = the worker's 503s seen %d"
                    % (shed, shed_seen))
            r.check(after[0] == 200 and after[3] < 1.0,
                    "after the burst: served at once (%r, %.0f ms)" % (after[0], after[3] * 1000))
            r.check(again is not None and again[0] == 200 and again[2].count(b"\n") == IDS,
                    "a refused batch sent again after its Retry-After: 200 with every record (%r)"
                    % (again[:2] if again else None,))
            r.check(env.worker_pids() == pids and not H.worker_exit_reasons(env),
                    "no worker replaced: %r" % H.worker_exit_reasons(env))


def main():
    H.run_tests(test_burst)


if __name__ == "__main__":
    main()
