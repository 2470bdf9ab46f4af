#!/usr/bin/env python3
"""test_memory.py: memory is bounded by the configuration, never by the
input.  Real nginx, real daemon, default limits (max_body_bytes 4 MiB,
max_output_bytes 8 MiB, rss_soft_mb 64).

Bodies just under max_body_bytes whose output inflates:
- titles of U+FDFA (NFKC: 3 bytes become 33);
- an id `[{},{},...]` (each `{}` is joined as "[object Object]", twice
  in the output: id and poster);
- an id of invalid UTF-8 bytes (each becomes U+FFFD, 3 bytes);
- an id `[1e20,1e20,...]` (each number prints as 21 digits; 1.1 MB, so
  that the printer, not the parser, stops it);
- a 1 MB `[{},...]` id (refused while printing, not while parsing);
- an id just under its cap next to a title of invalid bytes (the most
  the engine holds at once).
Each gets a 413 JSON that names max_output_bytes, its limit and how far
it got; the worker's peak RSS (VmHWM, sampled from /proc while the
request runs and read after it) stays under rss_soft_mb and its RSS
falls back after it; it is answered within a few times a benign batch
of the same size timed around it; no worker exits for rss or a crash;
the pool then serves a normal batch.  Four such requests at once keep
the pool's total bounded, and no worker exits for any reason.  A legitimately large
output (7 MB, under the limit) is answered whole."""
import json
import os
import re
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402

MAX_BODY = 4 * 1024 * 1024
MAX_OUTPUT = 8 * 1024 * 1024
RSS_SOFT_MB = 64
NORMAL = harness.sample_body(50)


def fit(prefix, unit, suffix, limit=MAX_BODY - 64):
    """prefix + unit * n + suffix, the largest n under limit bytes."""
    n = (limit - len(prefix) - len(suffix)) // len(unit)
    return prefix + unit * n + suffix


def fdfa_titles():
    # many records, each a 3000-character title: the arena and the output
    # grow record by record, not through one string
    rec = b'{"provider":"yt","id":"x","title":"' + "\ufdfa".encode() * 3000 + b'"},'
    return fit(b"[", rec, b'{"provider":"yt","id":"x"}]')


def object_ids():
    return fit(b'[{"provider":"yt","id":[', b"{},", b'{}]}]')


def invalid_utf8_id():
    return fit(b'[{"provider":"dm","id":"', b"\xff", b'"}]')


def number_ids():
    # 1.1 MB: fits the parse-time bounds (5 MB of id), not the output (the
    # id is printed twice); each number costs ~2 us to read and print
    return fit(b'[{"provider":"vm","id":[', b"1e20,", b'1]}]', limit=1100 * 1024)


def object_ids_1mb():
    # 5.3 MB of id fits the parse-time bound; printed twice (id, poster)
    # it does not: the printer stops at the limit
    return fit(b'[{"provider":"yt","id":[', b"{},", b'{}]}]', limit=1 << 20)


def id_and_title():
    # the most the engine holds at once: an id just under its cap (in the
    # arena twice: as given and lower-cased) and a title of invalid bytes
    n = (MAX_OUTPUT - 64) // 16
    head = b'[{"provider":"yt","id":["\xc3\xa9",' + b"{}," * n + b'{}],"title":"'
    return fit(head, b"\xff", b'"}]')


HOSTILE = [("U+FDFA titles", fdfa_titles), ("[{},...] id", object_ids),
           ("invalid UTF-8 id", invalid_utf8_id), ("[1e20,...] id", number_ids),
           ("[{},...] id 1 MB", object_ids_1mb), ("id + title", id_and_title)]
RSS_AFTER_KB = 16 * 1024  # what a worker keeps once a huge request is done
# An ASan build's memory (shadow, quarantine) and speed say nothing of the
# real one: there the answers and exits are checked, not RSS or time.
SAN = harness.is_sanitized(harness.build_dir())
SAN_CONF = "rss_soft_mb = 0\nrss_hard_mb = 0\nrequest_timeout_ms = 60000\n" if SAN else ""
TIME_LIMIT_S = 60 if SAN else 3.0
# A hostile body may take this many times a benign batch of the same size
# (timed just before and after it, so under the same load), and never
# less than TIME_LIMIT_S: a cost that grows faster than the input does
# not hide behind a loaded machine, nor does the load fail a sound one.
TIME_RATIO = 4
# Four near-limit parses at once on a loaded 2-core machine can outlast
# the default request_timeout_ms (2 s of work); the master then stops
# each such worker (reason timeout) once its 413 is out.  This test is
# about memory: its deadline is out of the way (test_one_at_a_time and
# the timeout tests hold the times).  (SAN_CONF sets the same deadline:
# a key given twice is a configuration error.)
FOUR_CONF = "" if SAN else "request_timeout_ms = 60000\n"


def rss_ok(kb, limit_kb):
    return SAN or 0 < kb <= limit_kb


def hwm_kb(pid):
    return harness.proc_status_kb(pid, "VmHWM")


class Sampler:
    """Peak VmHWM per worker pid while requests run (a worker that exits
    right after its peak is still seen at its last sample)."""

    def __init__(self, env):
        self.env, self.peak, self.halt = env, {}, threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.halt.is_set():
            for p in self.env.worker_pids():
                self.peak[p] = max(self.peak.get(p, 0), hwm_kb(p))
            time.sleep(0.005)

    def stop(self):
        self.halt.set()
        self.t.join(5)
        for p in self.env.worker_pids():
            self.peak[p] = max(self.peak.get(p, 0), hwm_kb(p))
        return self.peak


def bad_exits(env):
    return [e for e in env.log_events("worker exit") if e.get("reason") in ("rss", "crash")]


def check_limit_answer(r, name, st, hdr, body, size):
    r.check(st == 413, "%s (%d bytes): 413, got %d" % (name, size, st))
    r.check(hdr.get("content-type") == "application/json", "%s: JSON error: %r"
            % (name, hdr.get("content-type")))
    r.check(int(hdr.get("content-length", -1)) == len(body), "%s: whole error body" % name)
    try:
        doc = json.loads(body)
    except ValueError:
        doc = {}
    r.check("max_output_bytes" in doc.get("error", ""), "%s: the error names the limit: %r"
            % (name, body[:200]))
    r.check(doc.get("limit") == MAX_OUTPUT, "%s: the error gives the limit: %r" % (name, doc))
    r.check(isinstance(doc.get("at_record"), int), "%s: the error says where: %r" % (name, doc))


def benign():
    """A valid batch of the hostile bodies' size (4 MB): plain ASCII
    titles, a 200 of about the same size out."""
    rec = b'{"provider":"yt","id":"abcdefghijk","title":"' + b"Hello World " * 250 + b'"},'
    return fit(b"[", rec, b'{"provider":"yt","id":"x"}]')


def timed(env, body):
    t0 = time.monotonic()
    st, hdr, out = env.request("/v1/enrich", body, timeout=90)
    return st, hdr, out, time.monotonic() - t0


def test_one_at_a_time(r):
    with harness.Env(name="hostile-mem") as env:
        env.start_stack("workers = 2\n" + SAN_CONF, workers=2)
        base_body = benign()
        for name, make in HOSTILE:
            body = make()
            r.check(len(body) <= MAX_BODY, "%s: body under max_body_bytes" % name)
            bst, _, _, before = timed(env, base_body)
            s = Sampler(env)
            st, hdr, out, took = timed(env, body)
            peak = s.stop()
            top = max(peak.values()) if peak else 0
            rss_after = max([harness.proc_status_kb(p, "VmRSS") for p in env.worker_pids()] or [0])
            bst2, _, _, after = timed(env, base_body)
            r.check(bst == bst2 == 200, "%s: the benign 4 MB batch around it: %d, %d"
                    % (name, bst, bst2))
            bar = max(TIME_LIMIT_S, TIME_RATIO * max(before, after))
            print("%-18s body %d B: status %d, %d B out, %.2f s (benign %.2f s, %.2f s), peak "
                  "worker VmHWM %d kB, largest VmRSS after %d kB"
                  % (name, len(body), st, len(out), took, before, after, top, rss_after))
            check_limit_answer(r, name, st, hdr, out, len(body))
            r.check(rss_ok(top, RSS_SOFT_MB * 1024),
                    "%s: peak worker RSS %d kB <= rss_soft_mb" % (name, top))
            r.check(rss_ok(rss_after, RSS_AFTER_KB),
                    "%s: the worker gives the memory back: VmRSS %d kB after" % (name, rss_after))
            r.check(took < bar, "%s: answered in %.2f s (< %.2f s: %g x the benign batch's "
                    "%.2f s, at least %.1f s)" % (name, took, bar, TIME_RATIO, max(before, after),
                                                  TIME_LIMIT_S))
        st, _, out = env.request("/v1/enrich", NORMAL)
        r.check(st == 200 and out.count(b"\n") == 50, "the pool serves a normal batch after")
        time.sleep(0.3)  # a worker over rss_soft_mb would have exited by now
        r.check(not bad_exits(env), "no worker exit for rss or a crash: %r" % bad_exits(env))


def test_four_at_once(r):
    with harness.Env(name="hostile-mem4") as env:
        pids = env.start_stack("workers = 4\n" + FOUR_CONF + SAN_CONF, workers=4)
        # the four refused while parsing, each near max_body_bytes
        bodies = [fdfa_titles(), object_ids(), invalid_utf8_id(), id_and_title()]
        res = [None] * 4
        s = Sampler(env)

        def one(i):
            res[i] = env.request("/v1/enrich", bodies[i], timeout=90)

        ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(100)
        peak = s.stop()
        total = sum(peak.values())
        print("4 at once: statuses %r, per-worker peak kB %r, total %d kB"
              % ([x[0] if x else None for x in res], sorted(peak.values()), total))
        r.check(all(x is not None and x[0] == 413 for x in res),
                "4 at once: every one a 413: %r" % [x[0] if x else None for x in res])
        r.check(all(rss_ok(v, RSS_SOFT_MB * 1024) for v in peak.values()),
                "4 at once: each worker under rss_soft_mb: %r" % sorted(peak.values()))
        r.check(SAN or total <= 4 * RSS_SOFT_MB * 1024,
                "4 at once: total worker peak %d kB <= 4 x rss_soft_mb" % total)
        now, exits = env.worker_pids(), harness.worker_exit_reasons(env)
        r.check(sorted(now) == sorted(pids) and not exits,
                "4 at once: the same 4 workers live (%r -> %r), no worker exit (reasons %r)"
                % (sorted(pids), sorted(now), exits))
        st, _, out = env.request("/v1/enrich", NORMAL)
        r.check(st == 200 and out.count(b"\n") == 50, "4 at once: the pool serves after")
        r.check(not bad_exits(env), "4 at once: no exit for rss or a crash: %r" % bad_exits(env))


def test_large_legit_output(r):
    """Under the limit, a large output is whole: 7 MB of NDJSON from a
    650 KB body (the same U+FDFA titles, fewer of them)."""
    with harness.Env(name="hostile-mem-big") as env:
        env.start_stack("workers = 1\n" + SAN_CONF, workers=1)
        body = fdfa_titles()[:650000]
        body = body[:body.rindex(b'},{"provider"') + 1] + b"]"
        nrec = body.count(b'"provider"')
        s = Sampler(env)
        st, hdr, out = env.request("/v1/enrich", body, timeout=30)
        top = max(s.stop().values())
        print("legit: body %d B, %d records: status %d, %d B out, peak VmHWM %d kB"
              % (len(body), nrec, st, len(out), top))
        r.check(st == 200, "a %d-byte output under max_output_bytes is a 200: %d" % (len(out), st))
        r.check(6 * 1024 * 1024 < len(out) <= MAX_OUTPUT, "output is large (%d B)" % len(out))
        r.check(int(hdr.get("content-length", -1)) == len(out) and out.count(b"\n") == nrec,
                "whole: %s B announced, %d received, %d lines"
                % (hdr.get("content-length"), len(out), out.count(b"\n")))
        r.check(rss_ok(top, RSS_SOFT_MB * 1024),
                "legit: peak worker RSS %d kB <= rss_soft_mb" % top)
        r.check(not bad_exits(env), "legit: no exit for rss or a crash: %r" % bad_exits(env))


def test_unit_memory_max(r):
    """The unit's MemoryMax holds workers x rss_hard_mb + the rest, and the
    loss of one worker to the kernel does not stop the service."""
    root = os.path.dirname(os.path.dirname(HERE))
    conf = {}
    with open(os.path.join(root, "conf", "enrichd.conf")) as f:
        for line in f:
            if "=" in line and not line.lstrip().startswith("#"):
                k, v = line.split("=", 1)
                conf[k.strip()] = v.split("#")[0].strip()
    unit = {}
    with open(os.path.join(root, "conf", "systemd", "enrichd.service")) as f:
        for line in f:
            if "=" in line and not line.startswith("#"):
                k, v = line.strip().split("=", 1)
                unit[k] = v
    mem = unit.get("MemoryMax", "0")
    mb = int(mem[:-1]) * (1024 if mem.endswith("G") else 1) if mem[-1] in "MG" else 0
    # workers = auto is at most ENR_WORKERS_AUTO_MAX (config.h): read, not copied.
    with open(os.path.join(root, "src", "base", "config.h")) as f:
        auto_max = int(re.search(r"#define ENR_WORKERS_AUTO_MAX (\d+)", f.read()).group(1))
    workers = auto_max if conf["workers"] == "auto" else int(conf["workers"])
    pool = workers * int(conf["rss_hard_mb"])
    r.check(pool + 32 <= mb <= pool * 2,
            "MemoryMax %s covers workers x rss_hard_mb (%d MB) + master, status, margin"
            % (mem, pool))
    r.check(int(conf["rss_soft_mb"]) == RSS_SOFT_MB and
            int(conf["max_output_bytes"]) == MAX_OUTPUT and int(conf["max_body_bytes"]) == MAX_BODY,
            "the defaults this test assumes are conf/enrichd.conf's")
    r.check(unit.get("OOMPolicy") == "continue", "OOMPolicy=continue: %r" % unit.get("OOMPolicy"))


if __name__ == "__main__":
    harness.run_tests(test_unit_memory_max, test_one_at_a_time, test_four_at_once,
                      test_large_legit_output)
