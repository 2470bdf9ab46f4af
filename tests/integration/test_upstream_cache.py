#!/usr/bin/env python3
"""test_upstream_cache.py: the host's one upstream cache, through nginx.

HTTP client -> nginx -> enrichd workers -> the fake upstream, whose
/_stats counts every call.  Checks:
  - the ids a batch made one worker fetch are hits for the others: with
    max_requests = 1 every batch is served by a new worker process, and
    the same batch again costs the upstream no call (the cache outlives
    the workers that filled it);
  - under concurrent load spread over several live workers, a batch
    fetched once is never fetched again, and its answers are the same;
  - /metrics and /status report the cache host-wide (entries = the
    distinct ids fetched, its size = cache_bytes);
  - HUP with the cache settings unchanged keeps the cache (no call);
    HUP with cache_bytes changed gives the new generation a new, empty
    cache of the new size (the ids are fetched once again);
  - HUP changing what a call carries (a tenant header alpha -> beta, then
    the secret file's key) empties the cache, says what changed, and the
    ids are asked again as beta: none of alpha's answers is served (the
    fake answers beta for half of the ids only);
  - one client's batch cannot poison the cache for another: ids that one
    decoding merges ("\\ud800" and "\\ufffd") asked in one batch leave
    the cache answering each as a fresh host does;
  - cache_file: a HUP, a restart (SIGTERM, start) and a SIGKILL of the
    master keep the cache: the ids of 20 batches (1,000 ids) cost no call
    after each, and the file is opened with its 1,000 entries;
  - a cache file truncated (to half, to less than its header), zeroed, of
    a foreign magic or of another version is refused with a log line
    saying which, replaced by an empty one of the configured size, and
    the ids are asked again: nothing of it is read;
  - stale-if-error: entries past their lifetime, with the upstream
    hanging (deadline), answering 5xx, refusing connections and behind
    an open breaker (no call made), give the records their last answers,
    not their local values, nothing degraded, counted stale in /metrics
    and /status; once the upstream answers again they are asked again and
    are fresh hits after.
"""

import os
import signal
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

from harness import (  # noqa: E402
    FakeUpstream, upstream_conf, post, degraded, fake_poster, metrics, strip_clock, get_json)

RECS = [{"provider": ("yt", "vm", "dm")[i % 3], "id": "Shared%03d" % i, "duration": 0}
        for i in range(45)] + [{"provider": "dm", "id": "unkShared%d" % i} for i in range(5)]
DISTINCT = len(RECS)


def calls(fake):
    return fake.stats()["data_requests"]


def first_batch(env, fake, conf, workers=None):
    """enrichd (conf) behind nginx, with its workers when given, the
    fake's counts cleared, then RECS once: status, headers, lines, and
    the calls that batch made."""
    env.start_enrichd(conf)
    env.start_nginx()
    if workers:
        env.wait_workers(workers)
    fake.reset()
    st, h, lines = post(env, RECS)
    return st, h, lines, calls(fake)


def exits_max_requests(env):
    m = metrics(env)
    return int(m.get('enrichd_worker_exits_total{reason="max_requests"}', 0))


def test_hits_across_recycled_workers(r, fake):
    extra = "workers = 2\nmax_requests = 1\nmax_requests_jitter = 0\n"
    with harness.Env(name="upc-recycle") as env:
        st, h, first, c1 = first_batch(env, fake, extra + upstream_conf(fake))
        r.check(st == 200 and degraded(h) == 0 and c1 >= 3,
                "first batch enriched by the upstream (%d calls, degraded %s)" % (c1, degraded(h)))
        r.check(first[0]["poster"] == fake_poster("yt", "Shared000"), "poster from the upstream")
        pids = set()
        for i in range(6):
            pids |= set(env.worker_pids())
            st, h, again = post(env, RECS)
            r.check(st == 200 and degraded(h) == 0 and
                    [strip_clock(x) for x in again] == [strip_clock(x) for x in first],
                    "batch %d: the same lines from the cache" % i)
        harness.wait_for(lambda: exits_max_requests(env) >= 6, 10, what="workers recycled")
        r.check(exits_max_requests(env) >= 6,
                "every batch was served by a new worker (%d exits at max_requests, pids seen %d)"
                % (exits_max_requests(env), len(pids)))
        r.check(calls(fake) == c1,
                "no upstream call after the first batch: %d then %d" % (c1, calls(fake)))
        m = metrics(env)
        r.check(m.get("enrichd_upstream_cache_entries") == DISTINCT,
                "cache entries host-wide: %r (want %d)" % (m.get("enrichd_upstream_cache_entries"),
                                                         DISTINCT))
        r.check(m.get("enrichd_upstream_cache_size_bytes") == 16 << 20,
                "cache size = cache_bytes: %r" % m.get("enrichd_upstream_cache_size_bytes"))
        r.check(m.get("enrichd_upstream_cache_recoveries_total") == 0 and
                m.get("enrichd_upstream_cache_evictions_total") == 0,
                "no eviction, no recovery: %r" % {k: v for k, v in m.items() if "cache" in k})
        doc = get_json(env, "/status")
        cache = doc["upstream"]["cache"]
        r.check(cache["entries"] == DISTINCT and cache["max_bytes"] == 16 << 20 and
                cache["bytes"] > 0, "/status upstream.cache: %r" % cache)


def test_hits_across_live_workers(r, fake):
    extra = "workers = 4\nmax_requests = 0\n"
    with harness.Env(name="upc-live") as env:
        st, h, first, c1 = first_batch(env, fake, extra + upstream_conf(fake), workers=4)
        r.check(st == 200 and degraded(h) == 0 and c1 >= 3, "first batch fetched (%d calls)" % c1)
        m0 = metrics(env)
        bad, lock = [], threading.Lock()

        def client():
            conn = harness.http.client.HTTPConnection("127.0.0.1", env.port, timeout=15)
            for _ in range(25):
                s, hh, lines = post(env, RECS, conn=conn)
                if s != 200 or degraded(hh) or \
                        [strip_clock(x) for x in lines] != [strip_clock(x) for x in first]:
                    with lock:
                        bad.append((s, hh.get("x-enrich-degraded")))
            conn.close()

        # Rounds of 100 until two workers or more have served: on a loaded
        # machine one worker can take a round alone (bounded: 4 rounds).
        rounds = 0
        while rounds < 4:
            ts = [threading.Thread(target=client) for _ in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
            rounds += 1
            m1 = metrics(env)
            served = [m1.get('enrichd_worker_requests_total{slot="%d"}' % i, 0) -
                      m0.get('enrichd_worker_requests_total{slot="%d"}' % i, 0) for i in range(4)]
            if sum(1 for s in served if s > 0) >= 2:
                break
        r.check(not bad, "%d concurrent batches answered the same, nothing degraded: %r"
                % (100 * rounds, bad[:3]))
        r.check(sum(1 for s in served if s > 0) >= 2,
                "the load was spread over several workers in %d rounds: %r" % (rounds, served))
        r.check(calls(fake) == c1, "workers that never fetched them hit: %d calls, then %d"
                % (c1, calls(fake)))
        hits = (m1.get("enrichd_upstream_cache_hits_total", 0) -
                m0.get("enrichd_upstream_cache_hits_total", 0))
        r.check(hits == 100 * rounds * DISTINCT,
                "every lookup a hit: %d of %d" % (hits, 100 * rounds * DISTINCT))


def test_reload(r, fake):
    base = "workers = 2\nmax_requests = 0\n"
    with harness.Env(name="upc-reload") as env:
        _, _, _, c1 = first_batch(env, fake, base + upstream_conf(fake))
        # the same cache settings (another key changed): the cache is kept
        env.write_config(base + upstream_conf(fake, breaker_failures=6))
        env.signal(signal.SIGHUP)
        env.wait_log("reload done", count=1, timeout=15)
        st, h, _ = post(env, RECS)
        r.check(st == 200 and degraded(h) == 0 and calls(fake) == c1,
                "reload without cache changes keeps the cache: %d calls, then %d"
                % (c1, calls(fake)))
        r.check(metrics(env).get("enrichd_upstream_cache_entries") == DISTINCT,
                "entries kept across the reload")
        r.check(not env.log_events("reload: a new, empty upstream cache for the new configuration"),
                "no new cache logged")
        # cache_bytes changed: a new, empty cache of the new size
        env.write_config(base + upstream_conf(fake, cache_bytes=8 << 20))
        env.signal(signal.SIGHUP)
        env.wait_log("reload done", count=2, timeout=15)
        r.check(len(env.log_events("reload: a new, empty upstream cache for the new "
                                   "configuration")) == 1, "the new cache is logged")
        m = metrics(env)
        r.check(m.get("enrichd_upstream_cache_size_bytes") == 8 << 20 and
                m.get("enrichd_upstream_cache_entries") == 0,
                "the new generation's cache: 8 MiB, empty: %r"
                % {k: v for k, v in m.items() if k.startswith("enrichd_upstream_cache_")})
        st, h, lines = post(env, RECS)
        c2 = calls(fake)
        r.check(st == 200 and degraded(h) == 0 and c2 > c1 and
                lines[0]["poster"] == fake_poster("yt", "Shared000"),
                "the ids are fetched once again into the new cache: %d then %d calls" % (c1, c2))
        post(env, RECS)
        r.check(calls(fake) == c2 and metrics(env).get("enrichd_upstream_cache_entries") == DISTINCT,
                "and then served from it")


def fake_knows_partial(key):
    """Whether the fake in mode partial still answers for key."""
    import zlib
    return zlib.crc32(key.encode()) % 2 == 0


def test_reload_identity(r, fake):
    d = tempfile.mkdtemp(prefix="enr-cache-id-")
    key = os.path.join(d, "api-key")

    def write_key(text):
        with open(key + ".new", "w") as f:
            f.write(text + "\n")
        os.chmod(key + ".new", 0o600)
        os.rename(key + ".new", key)

    def conf(tenant):
        return ("workers = 2\nmax_requests = 0\nupstream_header = X-Tenant: %s\n"
                "upstream_secret_file = %s\nupstream_secret_header = X-Key\n" % (tenant, key)
                + upstream_conf(fake))

    write_key("k-one")
    fake.control(mode="ok")
    try:
        with harness.Env(name="upc-identity") as env:
            st, h, alpha, c1 = first_batch(env, fake, conf("alpha"))
            r.check(st == 200 and degraded(h) == 0 and c1 >= 3 and
                    all(x.get("X-Tenant") == "alpha" for x in fake.stats()["last_headers"]),
                    "alpha's answers fetched and cached (%d calls)" % c1)
            # the same file again: kept (the identity is the same)
            env.signal(signal.SIGHUP)
            env.wait_log("reload done", count=1, timeout=15)
            post(env, RECS)
            r.check(calls(fake) == c1, "an unchanged HUP keeps the cache: %d, then %d calls"
                    % (c1, calls(fake)))
            # the tenant header changes, and so does the provider's answer
            fake.control(mode="partial")
            env.write_config(conf("beta"))
            env.signal(signal.SIGHUP)
            env.wait_log("reload done", count=2, timeout=15)
            said = env.log_events("reload: a new, empty upstream cache for the new configuration")
            r.check(len(said) == 1 and said[0].get("changed") == "upstream_headers",
                    "the new cache is logged with what changed: %r" % said)
            r.check(not any("beta" in str(e) or "alpha" in str(e) for e in said),
                    "the log names the key, never its value")
            st, h, beta = post(env, RECS)
            c2 = calls(fake)
            hs = fake.stats()["last_headers"]
            r.check(c2 > c1 and all(x.get("X-Tenant") == "beta" for x in hs[-(c2 - c1):]),
                    "the ids are asked again, as beta: %d then %d calls" % (c1, c2))
            served_alpha = [rec["id"] for rec, a, b in zip(RECS, alpha, beta)
                            if not fake_knows_partial(rec["id"]) and b["poster"] == a["poster"]
                            and a["poster"] == fake_poster(rec["provider"], rec["id"])]
            unknown = [rec for rec in RECS if not fake_knows_partial(rec["id"])]
            r.check(len(unknown) >= 5 and not served_alpha,
                    "none of alpha's answers served for the %d ids beta does not know: %r"
                    % (len(unknown), served_alpha))
            # the secret file's key changes (same path, same everything else)
            write_key("k-two")
            env.signal(signal.SIGHUP)
            env.wait_log("reload done", count=3, timeout=15)
            said = env.log_events("reload: a new, empty upstream cache for the new configuration")
            r.check(len(said) == 2 and said[-1].get("changed") == "upstream_secret",
                    "a new key: a new cache, logged: %r" % said[-1:])
            post(env, RECS)
            r.check(calls(fake) > c2 and fake.stats()["last_headers"][-1].get("X-Key") == "k-two",
                    "and asked again with the new key: %d then %d calls" % (c2, calls(fake)))
    finally:
        fake.control(mode="ok")
        import shutil
        shutil.rmtree(d, ignore_errors=True)


# Ids that one decoding merges: the engine keeps a lone surrogate as its
# WTF-8 bytes (ED A0 80), a reader that decoded the echoed "\\ud800" to
# U+FFFD took its item for the id "\\ufffd".
MERGED = [{"provider": "yt", "id": "\ud800", "duration": 0},
          {"provider": "yt", "id": "\ufffd", "duration": 0},
          {"provider": "yt", "id": "\ud800\ufffd", "duration": 0},
          {"provider": "yt", "id": "\ufffd\ufffd", "duration": 0}]


def test_no_poisoning(r, fake):
    """The batch of the report, then each id alone: from the cache of the
    host that took the batch, and from a fresh host; the same lines."""
    extra = "workers = 2\nmax_requests = 0\n"
    alone = {}
    with harness.Env(name="upc-poison") as env:
        env.start_enrichd(extra + upstream_conf(fake))
        env.start_nginx()
        fake.reset()
        st, h, _ = post(env, MERGED)
        r.check(st == 200, "the batch of merged ids answered: %d" % st)
        c1 = calls(fake)
        for rec in MERGED:
            st, h, lines = post(env, [rec])
            alone[rec["id"]] = [strip_clock(x) for x in lines]
        r.check(calls(fake) == c1, "each id again comes from the cache: %d calls, then %d"
                % (c1, calls(fake)))
    with harness.Env(name="upc-fresh") as env:
        env.start_enrichd(extra + upstream_conf(fake))
        env.start_nginx()
        for rec in MERGED:
            st, h, lines = post(env, [rec])
            fresh = [strip_clock(x) for x in lines]
            r.check(st == 200 and fresh == alone[rec["id"]],
                    "id %r: the cached answer is a fresh host's: %r, fresh %r"
                    % (rec["id"], alone[rec["id"]], fresh))
        st, h, lines = post(env, [MERGED[1]])
        r.check(lines and lines[0]["poster"] == fake_poster("yt", "\ufffd"),
                "\\ufffd has its own poster: %r" % (lines and lines[0]["poster"]))



# ---- the cache in a file ----------------------------------------------------

KEEP = [[{"provider": ("yt", "vm", "dm")[k % 3], "id": "Keep%02d-%03d" % (b, k), "duration": 0}
         for k in range(50)] for b in range(20)]
FILE_REFUSED = "upstream cache file refused, replaced by an empty one"


def file_conf(fake, path, **over):
    return ("workers = 2\nmax_requests = 0\ncache_file = %s\n" % path) + upstream_conf(fake, **over)


def post_batches(env, batches):
    """Every batch posted: (all answered 200 and none degraded, their lines)."""
    ok, out = True, []
    for recs in batches:
        st, h, lines = post(env, recs)
        ok = ok and st == 200 and degraded(h) == 0
        out.append([strip_clock(x) for x in lines])
    return ok, out


def restart(env, ready, after=None):
    """enrichd stopped (SIGTERM, or after(pid) does it) and started again on
    the same configuration; ready: the "ready" lines the log then holds."""
    pid = env.master_pid()
    if after is None:
        env.signal(signal.SIGTERM)
    else:
        after(pid)
    env.wait_exit()
    env.start_enrichd(wait_ready=False)
    env.wait_log("ready", count=ready, timeout=15)


def start_with_file(env, fake):
    """enrichd behind nginx, its cache in a file of env's directory, the
    fake answering: the file's path."""
    fake.control(mode="ok")
    path = os.path.join(env.dir, "cache")
    env.start_enrichd(file_conf(fake, path))
    env.start_nginx()
    return path


def test_file_keeps_cache(r, fake):
    with harness.Env(name="upc-file") as env:
        path = start_with_file(env, fake)
        r.check(len(env.log_events("upstream cache file created")) == 1 and
                os.path.getsize(path) == 16 << 20 and os.stat(path).st_mode & 0o077 == 0,
                "a new file, cache_bytes long, the service's alone: %o" % os.stat(path).st_mode)
        fake.reset()
        ok, first = post_batches(env, KEEP)
        c1 = calls(fake)
        r.check(ok and c1 >= 20 and first[0][0]["poster"] == fake_poster("yt", "Keep00-000"),
                "1,000 ids in 20 batches fetched: %d calls" % c1)
        env.signal(signal.SIGHUP)
        env.wait_log("reload done", count=1, timeout=15)
        ok, again = post_batches(env, KEEP)
        r.check(ok and again == first and calls(fake) == c1,
                "HUP: the 20 batches again cost no call: %d, then %d" % (c1, calls(fake)))
        restart(env, 2)
        said = env.log_events("upstream cache file opened")
        r.check(len(said) == 1 and int(said[0]["entries"]) == 1000,
                "restart: the file opened with its entries: %r" % said)
        ok, again = post_batches(env, KEEP)
        r.check(ok and again == first and calls(fake) == c1,
                "restart: the 20 batches again cost no call: %d, then %d" % (c1, calls(fake)))
        m = metrics(env)
        r.check(m.get("enrichd_upstream_cache_entries") == 1000 and
                m.get("enrichd_upstream_cache_hits_total") == 1000,
                "restart: every lookup a hit, 1,000 entries: %r"
                % {k: v for k, v in m.items() if "cache" in k})
        pids = env.worker_pids()
        restart(env, 3, after=lambda pid: os.kill(pid, signal.SIGKILL))
        r.check(not any(harness.pid_alive(p) for p in pids), "the killed master's workers are gone")
        said = env.log_events("upstream cache file opened")
        r.check(len(said) == 2 and int(said[-1]["entries"]) == 1000,
                "master SIGKILL: the file opened with its entries: %r" % said[-1:])
        ok, again = post_batches(env, KEEP)
        r.check(ok and again == first and calls(fake) == c1,
                "master SIGKILL: the 20 batches again cost no call: %d, then %d"
                % (c1, calls(fake)))
        r.check(not env.log_events(FILE_REFUSED), "the file was never refused")


def damage_half(path):
    os.truncate(path, os.path.getsize(path) // 2)


def damage_short(path):
    os.truncate(path, 100)


def damage_zero(path):
    n = os.path.getsize(path)
    os.truncate(path, 0)
    os.truncate(path, n)


def damage_foreign(path):
    with open(path, "r+b") as f:
        f.write(b"\x7fELF\x02\x01\x01\x00")


def damage_version(path):
    with open(path, "r+b") as f:
        f.seek(8)
        (v,) = struct.unpack("<I", f.read(4))
        f.seek(8)
        f.write(struct.pack("<I", v + 1))


DAMAGES = [("truncated to half", damage_half, "truncated or extended"),
           ("truncated to 100 bytes", damage_short, "truncated: shorter than its header"),
           ("zeroed", damage_zero, "zeroed"),
           ("foreign magic", damage_foreign, "foreign"),
           ("another version", damage_version, "another version")]


def test_file_refused(r, fake):
    with harness.Env(name="upc-refuse") as env:
        path = start_with_file(env, fake)
        fake.reset()
        post(env, RECS)
        for n, (what, damage, reason) in enumerate(DAMAGES):
            env.signal(signal.SIGTERM)
            env.wait_exit()
            damage(path)
            env.start_enrichd(wait_ready=False)
            env.wait_log("ready", count=n + 2, timeout=15)
            said = env.log_events(FILE_REFUSED)
            r.check(len(said) == n + 1 and said[-1].get("reason", "").startswith(reason) and
                    said[-1].get("path") == path,
                    "%s: refused, saying why (%r): %r" % (what, reason, said[-1:]))
            with open(path, "rb") as f:
                head = f.read(8)
            r.check(head == b"enrcache" and os.path.getsize(path) == 16 << 20,
                    "%s: replaced by a new file: %r, %d bytes" % (what, head,
                                                                 os.path.getsize(path)))
            m = metrics(env)
            r.check(m.get("enrichd_upstream_cache_entries") == 0,
                    "%s: the new cache is empty" % what)
            c0 = calls(fake)
            st, h, lines = post(env, RECS)
            r.check(st == 200 and degraded(h) == 0 and calls(fake) > c0 and
                    lines[0]["poster"] == fake_poster("yt", "Shared000"),
                    "%s: the ids asked again (%d calls), answered right" % (what, calls(fake) - c0))


# ---- stale-if-error ------------------------------------------------------------

STALE_RECS = RECS[:45]  # the known ids (the unknown ones stay fresh: cache_negative_ttl_s)


def stale_total(env):
    return metrics(env).get("enrichd_upstream_stale_total", 0)


def expired(t0, ttl_s):
    """Waits out the entries' lifetime: time, not an event, is what ends it."""
    harness.wait_for(lambda: time.time() > t0 + ttl_s + 0.2, ttl_s + 2, what="lifetime over")


def test_stale(r, fake):
    fake.control(mode="ok")
    conf = "workers = 1\nmax_requests = 0\n"
    with harness.Env(name="upc-stale") as env:
        env.start_enrichd(conf + upstream_conf(fake, cache_ttl_s=1, breaker_failures=1000,
                                               upstream_timeout_ms=300))
        env.start_nginx()
        fake.reset()
        t0 = time.time()
        st, h, first = post(env, RECS)
        first = [strip_clock(x) for x in first]
        r.check(st == 200 and degraded(h) == 0 and first[0]["poster"] == fake_poster(
            "yt", "Shared000"), "the batch fetched")
        expired(t0, 1)
        for mode in ("hang", "5xx", "refuse"):
            fake.control(mode=mode)
            s0, c0 = stale_total(env), calls(fake)
            st, h, lines = post(env, RECS)
            r.check(st == 200 and degraded(h) == 0 and [strip_clock(x) for x in lines] == first,
                    "upstream %s: the records carry their last answers, nothing degraded "
                    "(degraded %d)" % (mode, degraded(h)))
            r.check(stale_total(env) - s0 == len(STALE_RECS),
                    "upstream %s: counted stale: %d" % (mode, stale_total(env) - s0))
            if mode != "refuse":
                r.check(calls(fake) > c0, "upstream %s: asked again first (%d calls)"
                        % (mode, calls(fake) - c0))
        doc = get_json(env, "/status")
        r.check(doc["upstream"].get("stale", 0) >= 3 * len(STALE_RECS),
                "/status upstream.stale: %r" % doc["upstream"].get("stale"))
        # an open breaker: the same, without a call
        fake.control(mode="5xx")
        # (a lifetime applies to answers stored from then on: the refreshed ones)
        # (the cooldown outlasts the two batches and three scrapes below on a
        # loaded sanitizer build; the wait for fresh hits outlasts it)
        env.write_config(conf + upstream_conf(fake, cache_ttl_s=60, breaker_failures=1,
                                              breaker_cooldown_ms=4000))
        env.signal(signal.SIGHUP)
        env.wait_log("reload done", count=1, timeout=15)
        # A breaker is a worker's own: the reload's probe, a second worker
        # of the new generation, serves until it is asked to go, and a batch
        # it took would leave the other worker's breaker closed.  Both the
        # old worker and the probe are gone before the batches that count.
        env.wait_log("worker exit", count=2, timeout=15, pred=lambda e: e.get("reason") == "reload")
        post(env, RECS)  # the failure that opens it
        c0, s0 = calls(fake), stale_total(env)
        st, h, lines = post(env, RECS)
        r.check(calls(fake) == c0 and metric_open(env),
                "breaker open: no call (%d)" % (calls(fake) - c0))
        r.check(st == 200 and degraded(h) == 0 and [strip_clock(x) for x in lines] == first and
                stale_total(env) - s0 == len(STALE_RECS),
                "breaker open: the last answers, counted stale (%d)" % (stale_total(env) - s0))
        # the upstream back: asked again (the breaker lets a probe through,
        # then every call), until a batch is all fresh hits
        fake.control(mode="ok")

        def all_hits():
            h0 = metrics(env).get("enrichd_upstream_cache_hits_total", 0)
            st, h, lines = post(env, RECS)
            ok = st == 200 and degraded(h) == 0 and [strip_clock(x) for x in lines] == first
            return ok and metrics(env).get("enrichd_upstream_cache_hits_total", 0) - h0 == len(RECS)

        harness.wait_for(all_hits, 20, interval=0.3, what="a batch of fresh hits")
        r.check(calls(fake) > c0, "refreshed: asked again (%d calls)" % (calls(fake) - c0))
        s0, c1 = stale_total(env), calls(fake)
        st, h, lines = post(env, RECS)
        r.check(st == 200 and degraded(h) == 0 and stale_total(env) == s0,
                "refreshed: fresh hits, none stale (+%d)" % (stale_total(env) - s0))
        r.check(calls(fake) == c1, "and costs no call")
    fake.control(mode="ok")


def metric_open(env):
    return metrics(env).get("enrichd_upstream_breaker_opens_total", 0) >= 1

def main():
    harness.run_tests(test_hits_across_recycled_workers, test_hits_across_live_workers,
                      test_reload, test_reload_identity, test_no_poisoning, test_file_keeps_cache,
                      test_file_refused, test_stale, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
