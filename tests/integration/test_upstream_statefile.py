#!/usr/bin/env python3
"""test_upstream_statefile.py: what enrichd reads back from its state
directory, through nginx.

HTTP client -> nginx -> enrichd workers -> the fake upstream.  Checks:
  - forged records: a batch's answers are cached in cache_file; enrichd is
    stopped, five records are rewritten as a writer of the state directory
    would (a javascript: poster, an https URL of the attacker's, a NaN, a
    -1e300 and a negative runtime), each record's checksum recomputed with
    the seed the file holds; the provider is made unreachable and enrichd
    started again.  No forged value reaches the client, every answer line
    is RFC 8259 JSON (no NaN, no Infinity), and the forgeries are counted
    (enrichd_upstream_cache_dropped_total).  With an upstream secret (the
    records' key: docs/limits.md) the https URL is dropped too; without
    one it is what a provider could have said, and is served;
  - two daemons on one cache_file: the second refuses to start, its log
    naming the file and the first's pid, and the answers the first gets
    afterwards are in the file at the path (read back from it);
  - two daemons on one budget_file: the second refuses to start the same
    way (it would count the day into a copy of its own);
  - a cache_file of mode 0666 is refused at start, named in the log, and
    left as it was;
  - a reload that needs a new cache (another upstream header: another
    identity) replaces the file the daemon itself holds: the reload is
    done, the path names a new file, and the new configuration's answers
    are in it.
"""

import json
import os
import signal
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

from harness import FakeUpstream, upstream_conf, post, fake_poster, metrics  # noqa: E402

M64 = (1 << 64) - 1
HDR = struct.Struct("<QIIIIII QQQQQQQ")  # magic .. seed (cache_int.h)
SLOT = struct.Struct("<IIIBBxxQQQ")      # seq, len, key_len, used, provider, hash, pos, expires
REC = struct.Struct("<IIQQQdIIBB6xQ")    # len .. sum (the mac, when there is one, follows)

# The forgeries, as the audit made them: (id, poster, runtime, a value a
# provider could have given).
FORGED = [("Forge-js", "javascript:alert(1)", 10.0, False),
          ("Forge-url", "https://attacker.example/x.jpg", 10.0, True),
          ("Forge-nan", "https://img.example/yt/a.jpg", float("nan"), False),
          ("Forge-huge", "https://img.example/yt/b.jpg", -1e300, False),
          ("Forge-neg", "https://img.example/yt/c.jpg", -5.0, False)]
HONEST = "Honest-1"
RECS = [{"provider": "yt", "id": i, "duration": 0} for i, _, _, _ in FORGED] + \
       [{"provider": "yt", "id": HONEST, "duration": 0}]


def cache_sum(seed, b):
    """enr_cache_sum (cache.c): what a record's checksum is, given the
    seed the file itself holds."""
    n = len(b)
    h = seed ^ 0x9E3779B97F4A7C15 ^ n
    for i in range(0, n - n % 8, 8):
        h = ((h ^ int.from_bytes(b[i:i + 8], "little")) * 0xFF51AFD7ED558CCD) & M64
        h = ((h << 29) | (h >> 35)) & M64
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & M64
    return h ^ (h >> 31)


def records(data):
    """Every used slot's record of a cache file: [(key, offset, rec fields)],
    only those whose checksum holds."""
    f = HDR.unpack_from(data, 0)
    slot_size, rec_size = f[3], f[4]
    nbuckets, ring_size, index_off, ring_off, seed = f[9], f[10], f[11], f[12], f[13]
    out = []
    for i in range(nbuckets * 8):
        s = SLOT.unpack_from(data, index_off + i * slot_size)
        if not s[3]:
            continue
        off = ring_off + s[6] % ring_size
        r = REC.unpack_from(data, off)
        rec = bytearray(data[off:off + r[0]])
        rec[56:64] = b"\0" * 8
        if cache_sum(seed, bytes(rec)) != r[10]:
            continue
        key = bytes(data[off + rec_size:off + rec_size + r[6]]).decode("utf-8", "replace")
        out.append((key, off, r))
    return out


def forge(path):
    """The FORGED records rewritten in the file at path, their sums
    recomputed with the file's seed (a MAC, if any, left as it was: its
    key is not in the file).  The number forged."""
    with open(path, "r+b") as fh:
        data = bytearray(fh.read())
    f = HDR.unpack_from(data, 0)
    rec_size, seed = f[4], f[13]
    done = 0
    for key, off, r in records(data):
        hit = [x for x in FORGED if x[0] == key]
        if not hit:
            continue
        _, poster, dur, _ = hit[0]
        p = poster.encode()
        end = off + r[0]
        body = off + rec_size + r[6]
        data[body:end] = (p + b"\0" * (end - body))[:end - body]
        struct.pack_into("<d", data, off + 32, dur)
        struct.pack_into("<I", data, off + 44, len(p))
        struct.pack_into("<B", data, off + 49, 3)  # a poster and a runtime
        data[off + 56:off + 64] = b"\0" * 8
        struct.pack_into("<Q", data, off + 56, cache_sum(seed, bytes(data[off:end])))
        done += 1
    with open(path, "r+b") as fh:
        fh.write(data)
    return done


def strict_lines(data):
    """The answer's lines as RFC 8259 reads them (no NaN, no Infinity);
    None when one is not."""
    def refuse(name):
        raise ValueError(name)
    try:
        return [json.loads(x, parse_constant=refuse)
                for x in data.decode("utf-8", "surrogatepass").split("\n") if x]
    except ValueError:
        return None


def forged_run(r, fake, keyed):
    what = "with a key" if keyed else "without a key"
    with harness.Env(name="upsf-forge") as env:
        path = os.path.join(env.dir, "cache")
        extra = ""
        if keyed:
            kf = os.path.join(env.dir, "key")
            with open(kf, "w") as fh:
                fh.write("k-0123456789\n")
            os.chmod(kf, 0o600)
            extra = "upstream_secret_file = %s\nupstream_secret_header = X-Key\n" % kf
        fake.control(mode="ok")
        conf = "workers = 1\ncache_file = %s\n%s" % (path, extra) + upstream_conf(fake)
        env.start_enrichd(conf)
        env.start_nginx()
        st, h, lines = post(env, RECS)
        r.check(st == 200 and lines[-1]["poster"] == fake_poster("yt", HONEST),
                "%s: the batch answered and cached" % what)
        env.signal(signal.SIGTERM)
        env.wait_exit()
        n = forge(path)
        r.check(n == len(FORGED), "%s: %d records forged, sums recomputed" % (what, n))
        fake.control(mode="refuse")
        fake.reset()
        env.start_enrichd(wait_ready=False)
        env.wait_log("ready", count=2, timeout=15)
        st, h, data = env.request("/v1/enrich", body=json.dumps(RECS).encode())
        lines = strict_lines(data) if st == 200 else None
        r.check(lines is not None and len(lines) == len(RECS),
                "%s: every line is RFC 8259 JSON: %r" % (what, data[:300]))
        lines = lines or []
        served = [f[0] for f, x in zip(FORGED, lines)
                  if x.get("poster") == f[1] or x.get("duration") != 0]
        want = [] if keyed else [f[0] for f in FORGED if f[3]]
        r.check(served == want, "%s: forged values served: %r (want %r): %r"
                % (what, served, want, lines[:len(FORGED)]))
        r.check(len(lines) == len(RECS) and lines[-1]["poster"] == fake_poster("yt", HONEST),
                "%s: the honest record still served from the file" % what)
        dropped = metrics(env).get("enrichd_upstream_cache_dropped_total")
        r.check(dropped == len(FORGED) - len(want),
                "%s: the forgeries counted: %r" % (what, dropped))
    fake.control(mode="ok")


def test_forged_records(r, fake):
    forged_run(r, fake, keyed=False)
    forged_run(r, fake, keyed=True)


def second_refused(r, first, conf, msg, what):
    """A second enrichd (its own sockets) on first's state file: it exits
    without serving, its log naming msg, the file and first's pid."""
    with harness.Env(name="upsf-second") as env:
        env.start_enrichd(conf, wait_ready=False)
        try:
            rc = env.wait_exit(timeout=20)
        except Exception:
            rc = None
        said = env.log_events(msg)
        pid = "pid %d" % first.master_pid()
        r.check(rc not in (None, 0) and not env.log_events("ready"),
                "%s: the second daemon refuses to start (exit %r)" % (what, rc))
        r.check(said and pid in said[0].get("reason", ""),
                "%s: its log names the file and the first's %s: %r" % (what, pid, said))
        return said


def test_two_daemons(r, fake):
    fake.control(mode="ok")
    with harness.Env(name="upsf-first") as first:
        path = os.path.join(first.dir, "cache")
        budget = os.path.join(first.dir, "budget")
        conf = ("workers = 1\ncache_file = %s\nbudget_file = %s\n" % (path, budget) +
                upstream_conf(fake))
        first.start_enrichd(conf)
        first.start_nginx()
        st, h, lines = post(first, RECS)
        r.check(st == 200, "the first daemon answers")
        said = second_refused(r, first, "workers = 1\ncache_file = %s\n" % path +
                              upstream_conf(fake),
                              "upstream cache file refused: another daemon uses it", "cache_file")
        r.check(said and said[0].get("path") == path, "the cache file named: %r" % said)
        later = [{"provider": "yt", "id": "Later-%d" % i, "duration": 0} for i in range(5)]
        st, h, lines = post(first, later)
        r.check(st == 200 and lines[0]["poster"] == fake_poster("yt", "Later-0"),
                "the first answers afterwards")
        with open(path, "rb") as fh:
            keys = set(k for k, _, _ in records(fh.read()))
        r.check(all(x["id"] in keys for x in later + RECS),
                "the file at the path holds the first's later answers: %r"
                % sorted(k for k in keys if k.startswith("Later")))
        said = second_refused(r, first, "workers = 1\nbudget_file = %s\n" % budget +
                              upstream_conf(fake, cache_entries=0),
                              "cannot open budget_file", "budget_file")
        r.check(said and said[0].get("path") == budget, "the budget file named: %r" % said)


def test_mode_refused(r, fake):
    fake.control(mode="ok")
    with harness.Env(name="upsf-mode") as env:
        path = os.path.join(env.dir, "cache")
        env.start_enrichd("workers = 1\ncache_file = %s\n" % path + upstream_conf(fake))
        env.signal(signal.SIGTERM)
        env.wait_exit()
        os.chmod(path, 0o666)
        before = os.stat(path)
        env.start_enrichd(wait_ready=False)
        try:
            rc = env.wait_exit(timeout=20)
        except Exception:
            rc = None
        said = env.log_events("upstream cache file refused: it is not enrichd's to use")
        r.check(rc != 0 and said and said[0].get("path") == path and
                "mode 0666" in said[0].get("reason", ""),
                "a 0666 cache file: the start refused, the file and why named: %r" % said)
        after = os.stat(path)
        r.check(after.st_ino == before.st_ino and after.st_mode == before.st_mode and
                after.st_mtime == before.st_mtime, "and the file left as it was")


def test_reload_new_file(r, fake):
    fake.control(mode="ok")
    with harness.Env(name="upsf-reload") as env:
        path = os.path.join(env.dir, "cache")
        conf = "workers = 1\ncache_file = %s\n" % path + upstream_conf(fake)
        env.start_enrichd(conf + "upstream_header = X-Tenant: alpha\n")
        env.start_nginx()
        st, h, lines = post(env, RECS)
        before = os.stat(path).st_ino
        env.write_config(conf + "upstream_header = X-Tenant: beta\n")
        env.signal(signal.SIGHUP)
        env.wait_log("reload done", timeout=15)
        r.check(env.log_events("reload: a new, empty upstream cache for the new configuration")
                and not env.log_events("upstream cache file refused: another daemon uses it"),
                "the reload made a new cache, its own file not taken for another daemon's")
        later = [{"provider": "yt", "id": "Beta-%d" % i, "duration": 0} for i in range(3)]
        st, h, lines = post(env, later)
        with open(path, "rb") as fh:
            keys = set(k for k, _, _ in records(fh.read()))
        r.check(os.stat(path).st_ino != before and all(x["id"] in keys for x in later) and
                not any(x["id"] in keys for x in RECS),
                "the path names the new file, with the new configuration's answers only: %r"
                % sorted(keys))


def main():
    harness.run_tests(test_forged_records, test_two_daemons, test_mode_refused,
                      test_reload_new_file, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
