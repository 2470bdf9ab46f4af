#!/usr/bin/env python3
"""test_store.py: the fleet's shared store (docs/fleet.md) with a real
redis-server started by the test (store_fixture.py) and two or three
daemons, each behind its own nginx, on one fake upstream whose /_stats
counts every call.  Checks:
  - the fleet asks once: the ids one host fetched cost another host no
    call (its misses are answered by the store, the same lines); the
    store holds one key per id, each with its lifetime (TTL);
  - a forged value in the store never reaches a client: values that fail
    the checks of a provider's answer (a poster not https, with a control
    byte, a duration negative, NaN or too large, a lifetime ended or too
    long, another version, a trailing field, a value too large, a key of
    another type) are refused and their ids asked of the upstream, whose
    answers the clients get and the store keeps instead;
  - the store lost (kill -9, then started again), stopped (SIGSTOP 5 s)
    or slow (behind tests/delay_proxy.py, 50 ms away): every batch
    answers 200 with every record enriched, the batches' p99 within
    their deadline + 10 ms (every one within + 100 ms, the margin of the
    upstream suites on a shared machine), a far store is not asked on a
    batch's path at all (its answers are still written), and the hosts
    use the store again once it is back; /healthz says degraded (200)
    while no worker reaches the store, ok once it is back; /status has
    the store's object (connected, its address, its round trip; then
    unreachable, its errors counted) and `enrichd status` its line;
  - a reply larger than its command asked for (64 MB to an MGET of 9
    ids) drops the connection unread: the batch is the upstream's, the
    worker's peak RSS stays far below the reply;
  - without shared_store nothing connects (one host needs no Redis),
    /status has no store object and `enrichd status` says it is off.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (FakeUpstream, upstream_conf, post, post_timed, degraded,  # noqa: E402
                     fake_poster, strip_clock, metrics)
from store_fixture import Redis, wait_clients  # noqa: E402

ROOT = harness.ROOT
RECS = [{"provider": ("yt", "vm", "dm")[i % 3], "id": "Fleet%03d" % i, "duration": 0}
        for i in range(60)]
TIMEOUT_MS = 150  # upstream_timeout_ms: the batch's deadline
MARGIN_MS = 10          # the bound on the p99, over the batch's deadline
LOADED_MARGIN_MS = 100  # the bound on every batch: the upstream suites' margin on a shared machine


def calls(fake):
    return fake.stats()["data_requests"]


def store_conf(fake, url, workers=2, extra=""):
    return ("workers = %d\nmax_requests = 0\nshared_store = %s\n%s" % (workers, url, extra) +
            upstream_conf(fake, upstream_timeout_ms=TIMEOUT_MS))


def start_host(name, conf):
    env = harness.Env(name=name)
    env.start_enrichd(conf)
    env.start_nginx()
    return env


def value_keys(redis):
    return [k for k in redis.keys("enrichd:c:*")]


def test_fleet_asks_once(r, fake):
    with Redis() as redis:
        a = start_host("store-a", store_conf(fake, redis.url))
        b = start_host("store-b", store_conf(fake, redis.url))
        try:
            wait_clients(redis, 4)
            fake.reset()
            st, h, first = post(a, RECS)
            c1 = calls(fake)
            r.check(st == 200 and degraded(h) == 0 and c1 >= 3,
                    "host A fetched the batch (%d calls)" % c1)
            harness.wait_for(lambda: len(value_keys(redis)) == len(RECS), 5,
                             what="one key per id in the store")
            keys = value_keys(redis)
            r.check(len(keys) == len(RECS) and
                    keys[0].startswith("enrichd:c:upstream:"),
                    "one key per id: %d, e.g. %s" % (len(keys), keys[:1]))
            ttl = redis.cmd("TTL", keys[0])
            r.check(3500 <= ttl <= 3600, "stored with its lifetime (TTL %s of 3600)" % ttl)
            st, h, second = post(b, RECS)
            r.check(st == 200 and degraded(h) == 0 and
                    [strip_clock(x) for x in second] == [strip_clock(x) for x in first],
                    "host B: the same lines")
            r.check(calls(fake) == c1, "host B made no call: %d then %d" % (c1, calls(fake)))
            m = metrics(b)
            r.check(m.get("enrichd_store_hits_total", 0) == len(RECS),
                    "host B's store hits: %r" % m.get("enrichd_store_hits_total"))
        finally:
            a.close()
            b.close()


def forged_values(now_ms):
    exp = now_ms + 3600 * 1000
    good = "https://ok.example/a.jpg"
    return [
        "E1 %d F 10 http://evil.example/x.jpg" % exp,
        "E1 %d F 10 javascript:alert(1)" % exp,
        "E1 %d F 10 https://evil.example/\x01.jpg" % exp,
        "E1 %d F -5 %s" % (exp, good),
        "E1 %d F nan %s" % (exp, good),
        "E1 %d F 1e9 %s" % (exp, good),
        "E1 %d F 10 %s" % (now_ms - 1000, good),
        "E1 %d F 10 %s" % (now_ms + 20 * 365 * 86400 * 1000, good),
        "E2 %d F 10 %s" % (exp, good),
        "E1 %d F 10 %s extra" % (exp, good),
        "E1 %d F 10 %s" % (exp, good + "a" * 5000),
        "E1 %d F - -" % exp,
        "garbage",
    ]


def test_forged_never_served(r, fake):
    with Redis() as redis:
        env = start_host("store-forged", store_conf(fake, redis.url, workers=1))
        try:
            wait_clients(redis, 1)
            now = int(time.time() * 1000)
            forged = forged_values(now)
            recs = [{"provider": "yt", "id": "Forged%02d" % i, "duration": 0}
                    for i in range(len(forged) + 1)]
            for i, v in enumerate(forged):
                redis.cmd("SET", "enrichd:c:upstream:yt:Forged%02d" % i, v, "EX", 3600)
            # one key of another type
            redis.cmd("RPUSH", "enrichd:c:upstream:yt:Forged%02d" % len(forged), "x")
            fake.reset()
            st, h, lines = post(env, recs)
            r.check(st == 200 and degraded(h) == 0, "answered, nothing degraded")
            want = [fake_poster("yt", x["id"]) for x in recs]
            got = [x.get("poster") for x in lines]
            r.check(got == want, "every poster is the upstream's: %r" %
                    [g for g, w in zip(got, want) if g != w][:3])
            r.check(calls(fake) >= 1, "the forged ids were asked of the upstream")
            m = metrics(env)
            r.check(m.get("enrichd_store_refused_total", 0) == len(forged),
                    "refused %r of %d (the list is an error, not a value)"
                    % (m.get("enrichd_store_refused_total"), len(forged)))
            harness.wait_for(lambda: redis.cmd("GET", "enrichd:c:upstream:yt:Forged00")
                             .startswith(b"E1 "), 5, what="the forged value replaced")
            v = redis.cmd("GET", "enrichd:c:upstream:yt:Forged00").decode()
            r.check(fake_poster("yt", "Forged00") in v, "the store keeps the upstream's: %s" % v)
        finally:
            env.close()


def batches(env, n, results, stop=None, tag="a"):
    """n batches of 30 new ids each (every one a miss of the host's cache,
    so each asks the store when it is usable): (status, degraded, ms)."""
    conn = None
    for i in range(n):
        if stop is not None and stop.is_set():
            break
        recs = [{"provider": "yt", "id": "Load%s%s_%05d_%02d" % (tag, env.dir[-6:], i, k),
                 "duration": 0} for k in range(30)]
        try:
            st, h, lines, ms = post_timed(env, recs, conn)
            results.append((st, degraded(h) if st == 200 else -1, ms))
        except Exception as e:  # counted as a failed request
            results.append((0, -1, 0.0))
            sys.stderr.write("request failed: %r\n" % e)


def grown(env, name, since, tag, tries=20):
    """The counter name once past since, or as it is after tries batches
    of new ids: a worker reads the store's replies while it serves, and on
    a loaded machine a batch may go on without the store (a lookup's time
    spent, or the store judged too far away by a round trip measured under
    load), so the counter may move only on a later batch."""
    v = metrics(env).get(name, 0)
    for i in range(tries):
        if v > since:
            break
        batches(env, 1, [], tag="%s%d" % (tag, i))
        v = metrics(env).get(name, 0)
    return v


def healthz(env):
    st, _, data = env.request("/healthz", method="GET")
    return st, json.loads(data)


def store_status(env):
    """/status's store object ({} without one) and `enrichd status`'s text."""
    st, _, data = env.request("/status?json", method="GET")
    cli = subprocess.run([os.path.join(env.build, "enrichd"), "status", env.status_sock],
                         capture_output=True, text=True, timeout=10)
    return json.loads(data).get("store", {}), cli.stdout


def check_batches(r, what, results):
    bad = [x for x in results if x[0] != 200 or x[1] != 0]
    slow = sorted(x[2] for x in results)
    worst = slow[-1] if slow else 0
    r.check(results and not bad, "%s: %d batches, none failed or degraded (%r)"
            % (what, len(results), bad[:3]))
    p99 = slow[min(len(slow) - 1, int(len(slow) * 0.99))] if slow else 0
    r.check(p99 <= TIMEOUT_MS + MARGIN_MS,
            "%s: batch p99 within the deadline + %d ms (p99 %.1f ms, deadline %d)"
            % (what, MARGIN_MS, p99, TIMEOUT_MS))
    r.check(worst <= TIMEOUT_MS + LOADED_MARGIN_MS,
            "%s: no batch past the deadline + %d ms, a loaded machine's margin (worst %.1f ms)"
            % (what, LOADED_MARGIN_MS, worst))


def test_store_lost_and_back(r, fake):
    with Redis() as redis:
        env = start_host("store-lost", store_conf(fake, redis.url, workers=2))
        try:
            wait_clients(redis, 2)
            res = []
            batches(env, 20, res, tag="a")
            s, text = store_status(env)
            r.check(s.get("state") == "connected" and s.get("address") == redis.url and
                    s.get("up") == 2 and s.get("rtt_us", 0) > 0 and "lease_held" in s,
                    "/status: the store connected, where, its round trip (%r)" % s)
            r.check("shared store: connected " + redis.url in text,
                    "enrichd status: the store's line:\n" + text[:400])
            redis.kill9()
            batches(env, 40, res, tag="b")
            check_batches(r, "redis killed (-9)", res)
            harness.wait_for(lambda: healthz(env)[1].get("status") == "degraded", 10,
                             what="/healthz degraded")
            st, doc = healthz(env)
            r.check(st == 200 and "shared store" in doc.get("reason", ""),
                    "/healthz: degraded, not failed (%d %r)" % (st, doc.get("reason")))
            s, text = store_status(env)
            r.check(s.get("state") == "unreachable" and s.get("up") == 0 and
                    s.get("errors", 0) >= 1, "/status: the store unreachable (%r)" % s)
            r.check("shared store: unreachable" in text,
                    "enrichd status: unreachable:\n" + text[:400])
            redis.start()
            wait_clients(redis, 2, timeout=20)
            harness.wait_for(lambda: healthz(env)[1].get("status") == "ok", 10,
                             what="/healthz ok once the store is back")
            res = []
            batches(env, 20, res, tag="c")
            check_batches(r, "redis started again", res)
            m = metrics(env)
            r.check(m.get("enrichd_store_errors_total", 0) >= 2 and
                    m.get("enrichd_store_connects_total", 0) >= 4,
                    "lost and connected again, counted: errors %r connects %r"
                    % (m.get("enrichd_store_errors_total"), m.get("enrichd_store_connects_total")))
            h0 = m.get("enrichd_store_lookups_total", 0)
            n = grown(env, "enrichd_store_lookups_total", h0, tag="d")
            r.check(n > h0, "asked again once back (lookups %r, then %r)" % (h0, n))
        finally:
            env.close()


def test_store_stopped(r, fake):
    with Redis() as redis:
        env = start_host("store-stop", store_conf(fake, redis.url, workers=2))
        try:
            wait_clients(redis, 2)
            res, stop = [], threading.Event()
            t = threading.Thread(target=batches, args=(env, 100000, res, stop))
            t.start()
            time.sleep(0.5)  # the load runs before the fault (a span, not a wait on an event)
            redis.stop()
            time.sleep(5)  # the fault's length is the test's subject: SIGSTOP for 5 s
            redis.cont()
            time.sleep(0.5)
            stop.set()
            t.join()
            check_batches(r, "redis stopped 5 s", res)
        finally:
            env.close()


def test_store_slow(r, fake):
    with Redis(tcp=True) as redis:
        proxy_dir = harness.tempfile.mkdtemp(prefix="enr-delay-")
        ready = os.path.join(proxy_dir, "ready")
        proxy = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "tests", "delay_proxy.py"), "--target",
             "127.0.0.1:%d" % redis.port, "--rtt-ms", "50", "--ready-file", ready],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            harness.wait_for(lambda: os.path.exists(ready), 10, what="delay proxy")
            with open(ready) as f:
                port = json.load(f)["port"]
            env = start_host("store-slow", store_conf(fake, "redis://127.0.0.1:%d/0" % port,
                                                      workers=2))
            try:
                wait_clients(redis, 2)
                harness.wait_for(lambda: metrics(env).get("enrichd_store_up", 0) >= 1, 10,
                                 what="store up through the proxy")
                res = []
                batches(env, 30, res)
                check_batches(r, "redis 50 ms away", res)
                m = metrics(env)
                r.check(m.get("enrichd_store_lookups_total", 0) == 0 and
                        m.get("enrichd_store_skipped_total", 0) >= 30,
                        "a store 50 ms away is not asked on a batch's path (lookups %r, "
                        "skipped %r)" % (m.get("enrichd_store_lookups_total"),
                                         m.get("enrichd_store_skipped_total")))
                harness.wait_for(lambda: len(value_keys(redis)) >= 30 * 30, 10,
                                 what="its answers written all the same")
            finally:
                env.close()
        finally:
            harness.kill_group(proxy)
            harness.shutil.rmtree(proxy_dir, ignore_errors=True)


class HostileRedis:
    """A peer speaking RESP that logs a worker in, answers its PINGs, and
    answers every MGET with a bulk string of 64 MB: more than any reply a
    command of enrichd asks for may take."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.sent_big = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.conn, args=(c,), daemon=True).start()

    def conn(self, c):
        buf = b""
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
                while b"PING" in buf or b"MGET" in buf:
                    if buf.find(b"PING") >= 0 and (buf.find(b"MGET") < 0 or
                                                   buf.find(b"PING") < buf.find(b"MGET")):
                        buf = buf[buf.find(b"PING") + 4:]
                        c.sendall(b"+PONG\r\n")
                    else:
                        buf = b""
                        self.sent_big += 1
                        c.sendall(b"*1\r\n$67108864\r\n")
                        chunk = b"x" * 65536
                        for _ in range(1024):
                            c.sendall(chunk)
        except OSError:
            return

    def close(self):
        self.sock.close()


def test_store_reply_bounded(r, fake):
    evil = HostileRedis()
    # Its round trip is a Python thread's, measured beside other suites
    # (on a sanitizer build): judged too far for the default 20 ms (its
    # half), the store would never be asked, and its reply never read.
    env = start_host("store-evil", store_conf(fake, "redis://127.0.0.1:%d/0" % evil.port,
                                              workers=1, extra="shared_store_timeout_ms = 100\n"))
    try:
        harness.wait_for(lambda: metrics(env).get("enrichd_store_up", 0) >= 1, 10,
                         what="the worker logged in to the hostile store")
        st, h, lines = post(env, RECS[:9])
        r.check(st == 200 and degraded(h) == 0, "the batch answered and enriched (%d)" % st)
        r.check([x.get("poster") for x in lines] ==
                [fake_poster(x["provider"], x["id"]) for x in RECS[:9]],
                "from the upstream, nothing of the store's reply")
        # Counted when the worker reads the reply's header: on a loaded
        # machine that may come after the batch went on without the store
        # (its lookup's time spent), so on a later batch (grown).
        errors = grown(env, "enrichd_store_errors_total", 0, tag="e")
        r.check(evil.sent_big >= 1 and errors >= 1,
                "a 64 MB reply to an MGET of 9 ids: the connection dropped, counted "
                "(sent %d, errors %r)" % (evil.sent_big, errors))
        pids = env.worker_pids()
        rss = max(harness.proc_status_kb(p, "VmHWM") for p in pids)
        r.check(rss < 64 * 1024, "the worker never held it: peak RSS %d kB" % rss)
    finally:
        env.close()
        evil.close()


def test_off_by_default(r, fake):
    with Redis() as redis:
        env = start_host("store-off", "workers = 2\n" + upstream_conf(fake))
        try:
            st, h, lines = post(env, RECS[:6])
            r.check(st == 200 and degraded(h) == 0, "enriched without a store")
            r.check(redis.clients() == 0 and not value_keys(redis),
                    "nothing connected to Redis, nothing written")
            s, text = store_status(env)
            r.check(s == {} and "shared store: off" in text,
                    "/status: no store object, enrichd status: off (%r)" % s)
        finally:
            env.close()


def main():
    harness.run_tests(test_off_by_default, test_fleet_asks_once, test_forged_never_served,
                      test_store_lost_and_back, test_store_stopped, test_store_slow,
                      test_store_reply_bounded, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
