#!/usr/bin/env python3
"""test_replay.py: scripts/gen-trace and build/enrich-replay against a real
recording HTTP server process (Python's http.server, HTTP/1.1 keep-alive)
on a free loopback port: trace fidelity (verbatim and raw-string
payloads), open-loop timing, queueing counted from the due time, closed
loop concurrency, interleaving, compare mode, errors by kind, chunked and
Connection: close responses, TSV/JSON/histogram outputs.
"""
# The open loop's schedule (ms), --speed 4's pace and the closed loop's
# rate are goals (make bench-goals); that every arrival is sent, a 200 ms
# server does not serialize them and the cap cuts an endless answer are
# checked.
import hashlib
import json
import resource
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from harness import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ENR_BUILD", "build")
BUILD = BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD)
REPLAY = os.path.join(BUILD, "enrich-replay")
GEN = os.path.join(ROOT, "scripts", "gen-trace")

SERVER = r'''
import http.server, json, sys, threading, time, hashlib
log = open(sys.argv[2], "a", buffering=1)
lock = threading.Lock()
state = {"inflight": 0, "max_inflight": 0, "n": 0}
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        t = time.monotonic()
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            state["inflight"] += 1
            state["max_inflight"] = max(state["max_inflight"], state["inflight"])
            state["n"] += 1
            n = state["n"]
        try:
            if self.path == "/slow":
                time.sleep(0.2)
            out = body
            if self.path == "/stamp":
                out = b'{"x":1,"fetched_at":%d}\n' % int(time.time() * 1e6)
            if self.path == "/differ":
                out = b'{"x":2,"fetched_at":5}\n'
            if self.path == "/endless":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
                try:
                    for _ in range(1 << 16):  # 4 GiB at most: the client must stop first
                        self.wfile.write(chunk)
                except OSError:
                    pass
                self.close_connection = True
                return
            log.write(json.dumps({"t": t, "path": self.path, "len": len(body),
                                  "sha1": hashlib.sha1(body).hexdigest(),
                                  "inflight": state["inflight"]}) + "\n")
            self.send_response(200)
            if self.path == "/chunked" or self.path == "/stamp":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(out), 7):
                    part = out[i:i + 7]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
                return
            self.send_header("Content-Length", str(len(out)))
            if self.path == "/close":
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(out)
        finally:
            with lock:
                state["inflight"] -= 1
class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        pass  # clients that time out and close are part of the tests
    request_queue_size = 256
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what)


def goal(cond, what):
    """A time or rate goal, as harness.Results.goal: printed, met or
    missed, and never counted (make bench-goals reads the line)."""
    print("goal %s: %s" % ("met" if cond else "missed", what))


class Server:
    def __init__(self, tmp):
        self.port = free_port()
        self.log = os.path.join(tmp, "server-%d.log" % self.port)
        script = os.path.join(tmp, "server.py")
        with open(script, "w") as f:
            f.write(SERVER)
        self.p = subprocess.Popen([sys.executable, script, str(self.port), self.log],
                                  start_new_session=True)
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.02)

    def url(self, path="/"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def records(self):
        with open(self.log) as f:
            return [json.loads(l) for l in f if l.strip()]

    def reset(self):
        open(self.log, "w").close()

    def close(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except OSError:
            pass
        self.p.wait()


def replay(args, tmp, expect_rc=0):
    js = os.path.join(tmp, "sum.json")
    r = subprocess.run([REPLAY, "--no-progress", "--json", js] + args, capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == expect_rc, "enrich-replay %s: rc %d (want %d): %s" % (args, r.returncode, expect_rc,
                                                                            r.stderr[-500:]))
    try:
        with open(js) as f:
            summ = json.load(f)
    except (OSError, ValueError):
        summ = []
    return r, summ


TIMING_TRIES = 3


def wake_noise(n, step):
    """The median lateness of n sleeps to absolute times step apart: what
    the machine's load does to a process keeping a schedule (the
    recording server's, here)."""
    t0 = time.monotonic() + step
    late = []
    for i in range(n):
        due = t0 + i * step
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        late.append(time.monotonic() - due)
    return sorted(late)[n // 2]


def tries(attempt):
    """attempt() -> (ok, figure), up to TIMING_TRIES times until ok:
    (ok, every figure seen)."""
    seen = []
    for _ in range(TIMING_TRIES):
        ok, fig = attempt()
        seen.append(fig)
        if ok:
            break
    return ok, seen


def write_trace(path, lines):
    with open(path, "w") as f:
        for l in lines:
            f.write(l + "\n")


def check_gen_trace(tmp):
    """gen-trace: deterministic, shaped."""
    a, b, c = (os.path.join(tmp, n) for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    args = ["-n", "300", "--duration", "600", "--bad-rate", "0.02"]
    for path, seed in ((a, "5"), (b, "5"), (c, "6")):
        subprocess.run([GEN, "--seed", seed, "-o", path] + args, check=True, capture_output=True)
    da, db, dc = (open(p, "rb").read() for p in (a, b, c))
    check(da == db, "gen-trace: same seed, same bytes")
    check(da != dc, "gen-trace: another seed, another trace")
    ts, sizes, strings, arrays = [], [], 0, 0
    for line in da.decode().split("\n"):
        if not line:
            continue
        o = json.loads(line)
        ts.append(o["ts"])
        if isinstance(o["payload"], str):
            strings += 1
        else:
            arrays += 1
            sizes.append(len(json.dumps(o["payload"], ensure_ascii=False).encode()))
    check(len(ts) == 300 and ts == sorted(ts), "gen-trace: 300 lines in arrival order")
    check(strings > 0 and arrays > 250, "gen-trace: raw-string (rejected) and JSON payloads")
    check(max(sizes) <= 420 * 1024 and min(sizes) >= 500, "gen-trace: body sizes in range")
    text = da.decode()
    for needle in ("ทดสอบ", "안녕하세요", "東京", "Tiếng Việt", "\uff26\uff35\uff2c\uff2c", "🎉",
                   '"blocked"', '"provider":"vm"', '"provider":"dm"', '"duration":"0x1F"'):
        check(needle in text, "gen-trace: trace contains %r" % needle)


def check_fidelity(srv, tmp):
    """Fidelity: verbatim JSON payloads and raw-string payloads."""
    t = os.path.join(tmp, "fid.jsonl")
    raw1 = '[ {"id" : "a\\u00e9\\ud83d\\ude00", "x":[1, 2]} ]'
    lines = ['{"ts": 0, "payload": %s}' % raw1,
             '{"payload": "[\\"\\udcff\\u00e9\\ud83d\\ude00\\n\\"", "ts": 0.01, "other": {"a": [1]}}',
             '{"ts":0.02,"payload":{"k":"v \\" }"}}']
    write_trace(t, lines)
    srv.reset()
    r, s = replay(["--speed", "1", t, srv.url("/echo")], tmp)
    got = sorted(x["sha1"] for x in srv.records())
    want = sorted(hashlib.sha1(x).hexdigest() for x in (
        raw1.encode(), b'["\xff\xc3\xa9\xf0\x9f\x98\x80\n"', b'{"k":"v \\" }"}'))
    check(got == want, "payload bytes: verbatim JSON and decoded raw strings (%s)" % got)
    check(s and s[0]["ok"] == 3 and s[0]["errors"] == 0, "echo: 3 answered")
    return t


def check_open_loop(srv, tmp, t):
    """Open-loop timing.  Each timing is played up to TIMING_TRIES times
    until it meets its bar: a replayer that misses it misses it every time,
    a load spike beside it once."""
    write_trace(t, ['{"ts": %.3f, "payload": [%d]}' % (1000 + i * 0.02, i) for i in range(50)])

    def open_loop():
        # Each arrival against its due time (the arrivals' own median
        # offset as time zero): an open loop's late sends do not add
        # up, a replayer that paces by the answers or plays too fast
        # or slow is off by tens to hundreds of ms.  The bar: 3 ms
        # over how late this machine wakes a sleeper right now.
        noise = wake_noise(50, 0.02)
        srv.reset()
        replay(["--speed", "1", t, srv.url("/echo")], tmp)
        arr = [x["t"] for x in srv.records()]
        zero = sorted(a - i * 0.02 for i, a in enumerate(arr))[len(arr) // 2] if arr else 0
        errs = sorted(abs(a - i * 0.02 - zero) for i, a in enumerate(arr))
        med = errs[len(errs) // 2] if errs else -1
        return len(arr) == 50 and 0 <= med < 0.003 + noise, (med, noise, len(arr))
    ok, meds = tries(open_loop)
    check(all(n == 50 for _, _, n in meds), "open loop: every one of 50 entries sent (%s)"
          % [n for _, _, n in meds])
    goal(ok, "open loop keeps arrivals to their due times (median error %s s)"
         % ", ".join("%.4f (bar %.4f)" % (m, 0.003 + n) for m, n, _ in meds))

    def speed4():
        srv.reset()
        replay(["--speed", "4", t, srv.url("/echo")], tmp)
        arr = [x["t"] for x in srv.records()]
        span = arr[-1] - arr[0] if arr else -1
        return len(arr) == 50 and 0.2 < span < 0.3, (span, len(arr))
    ok, spans = tries(speed4)
    # What --speed does at all: the 0.98 s of trace played faster than
    # at speed 1, every entry sent; how close to 4x is the goal.
    check(all(n == 50 for _, n in spans) and min(x for x, _ in spans) < 0.98,
          "--speed 4 sends all 50 faster than the trace's 0.98 s (%s)"
          % ", ".join("%d in %.3f s" % (n, x) for x, n in spans))
    goal(ok, "--speed 4 plays 0.98 s in ~0.245 s (%s s)" % ", ".join("%.3f" % x for x, _ in spans))


def check_slow_server(srv, tmp, t):
    """A slow server does not slow arrivals; queue time counts."""
    write_trace(t, ['{"ts": %.3f, "payload": [%d]}' % (i * 0.01, i) for i in range(10)])
    got = {}

    def slow_arrivals():
        srv.reset()
        got["s"] = replay(["--speed", "1", "-c", "64", t, srv.url("/slow")], tmp)[1]
        arr = sorted(x["t"] for x in srv.records())
        span = arr[-1] - arr[0] if arr else -1
        return len(arr) == 10 and 0 <= span < 0.15, (span, len(arr))
    ok, spans = tries(slow_arrivals)
    s = got["s"]
    # Not serialized, on every build: a replayer that waited for each
    # answer would spread the 10 arrivals over 9 x 200 ms or more, in
    # every try (a load spike spreads one try, not all of them).
    check(all(n == 10 for _, n in spans) and 0 <= min(x for x, _ in spans) < 9 * 0.2,
          "open loop: 10 arrivals not serialized behind a 200 ms server (< 1.8 s: %s)"
          % ", ".join("%d over %.3f s" % (n, x) for x, n in spans))
    goal(ok, "open loop: arrivals not slowed by a 200 ms server (10 due over 0.09 s, "
         "arriving over %s s)" % ", ".join("%.3f" % x for x, _ in spans))
    check(s and s[0]["p50"] >= 195, "latency includes the server's 200 ms")
    r, s = replay(["--speed", "1", "-c", "2", t, srv.url("/slow")], tmp)
    check(s and s[0]["max"] >= 800, "capped concurrency: latency counted from the due time (max %.0f ms)"
          % (s[0]["max"] if s else -1))


def check_closed_loop(srv, tmp, t):
    """Closed loop: exactly -c in flight."""
    srv.reset()
    r, s = replay(["--closed", "-d", "1", "-c", "3", t, srv.url("/slow")], tmp)
    recs = srv.records()
    # At most 3 in flight on a 200 ms server for 1 s: 15, and never more
    # than 20 (a loop that did not wait for its answers) on any build;
    # at least 9 is the rate, a goal.
    check(s and 3 <= s[0]["count"] <= 20, "closed loop c=3 on a 200 ms server: between 3 and "
          "20 requests in 1 s (%s)" % (s[0]["count"] if s else None))
    goal(s and 9 <= s[0]["count"] <= 20, "closed loop c=3 on a 200 ms server: ~15 requests in 1 s (%s)"
         % (s[0]["count"] if s else None))
    check(recs and max(x["inflight"] for x in recs) == 3, "closed loop keeps exactly 3 in flight")


def check_interleaving(srv, tmp, t):
    """Interleaving, chunked, Connection: close, compare."""
    write_trace(t, ['{"ts": %.3f, "payload": [%d, "%s"]}' % (i * 0.002, i, "z" * i) for i in range(60)])
    srv.reset()
    r, s = replay(["--speed", "1", "--name", "A", "--name", "B", "--name", "C", t, srv.url("/echo"),
                   srv.url("/chunked"), srv.url("/close")], tmp)
    check(len(s) == 3 and all(x["ok"] == 60 and x["errors"] == 0 for x in s),
          "three targets interleaved, chunked and Connection: close, no errors")
    check(len(s) == 3 and abs(s[0]["mb_in"] - s[1]["mb_in"]) < 1e-6, "chunked bodies counted exactly")
    paths = [x["path"] for x in srv.records()]
    check(paths.count("/echo") == 60 and paths.count("/close") == 60, "every entry sent to every target")
    check("side by side" in r.stdout and "ratio" in r.stdout, "side-by-side table printed")
    r, s = replay(["--compare", "--speed", "0", t, srv.url("/echo"), srv.url("/chunked")], tmp)
    check("60 identical" in r.stdout and "0 MISMATCHES" in r.stdout, "compare: identical bodies")
    r, s = replay(["--compare", "--speed", "0", "-c", "1", t, srv.url("/stamp"), srv.url("/stamp")], tmp)
    check("0 MISMATCHES" in r.stdout, "compare ignores fetched_at values")
    r, s = replay(["--compare", "--speed", "0", "-c", "1", t, srv.url("/stamp"), srv.url("/differ")], tmp,
                  expect_rc=3)
    m = [l for l in r.stdout.splitlines() if "MISMATCHES" in l]
    n = int(m[0].split(",")[-1].split()[0]) if m else -1
    check(n == 60, "compare counts every differing body (%d of 60)" % n)


def check_compare_caps(srv, tmp, t):
    """Compare: only answers are compared; every answer is capped."""
    dead1 = "http://127.0.0.1:%d/" % free_port()
    dead2 = "http://127.0.0.1:%d/" % free_port()
    r, s = replay(["--compare", "--speed", "0", "-n", "5", t, dead1, dead2], tmp, expect_rc=3)
    check("0 identical" in r.stdout and "5 FAILED" in r.stdout and "0 MISMATCHES" in r.stdout,
          "two dead targets: 5 failed, none identical: %r" % r.stdout.splitlines()[-1:])
    r, s = replay(["--compare", "--speed", "0", "-n", "5", t, srv.url("/echo"), dead1], tmp,
                  expect_rc=3)
    check("0 identical" in r.stdout and "5 FAILED" in r.stdout and "failed: trace entry" in
          r.stderr and "connect" in r.stderr, "one dead target: 5 failed, said with the kind: %r %r"
          % (r.stdout.splitlines()[-1:], r.stderr[-300:]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.monotonic()
    r, s = replay(["--compare", "--speed", "0", "-n", "3", "-c", "3", "--max-answer-bytes",
                   "1000000", t, srv.url("/echo"), srv.url("/endless")], tmp, expect_rc=3)
    took = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    check("3 FAILED" in r.stdout and "too_large=3" in r.stdout,
          "an endless answer fails as too_large past --max-answer-bytes: %r"
          % r.stdout[-400:])
    check(took < 10, "the cap ends it at once, not the 30 s timeout (%.1f s)" % took)
    check(rss < max(before, 0) + 64 * 1024 or rss < 100 * 1024,
          "the replayer's peak RSS stays small (%d KB)" % rss)
    r, s = replay(["--speed", "0", "-n", "2", "--max-answer-bytes", "4", t, srv.url("/echo")], tmp)
    check(s and s[0]["errors"] == 2 and "too_large=2" in r.stdout,
          "the cap holds without --compare too, Content-Length or not: %r" % r.stdout[-300:])
    for bad in ("-1", "0", "x"):
        r = subprocess.run([REPLAY, "--max-answer-bytes", bad, t, srv.url()], capture_output=True,
                           text=True, timeout=10)
        check(r.returncode == 2, "--max-answer-bytes %s is a usage error (rc %d)" % (bad, r.returncode))


def check_error_kinds(srv, tmp, t):
    """Errors by kind; the dead target's URL, for the next check."""
    dead = "http://127.0.0.1:%d/" % free_port()
    r, s = replay(["--speed", "0", "-n", "7", t, dead], tmp)
    check(s and s[0]["errors"] == 7 and "connect=7" in r.stdout, "refused connections counted as connect errors")
    r, s = replay(["--speed", "0", "--timeout", "100", "-n", "3", t, srv.url("/slow")], tmp)
    check(s and s[0]["errors"] == 3 and "timeout=3" in r.stdout, "timeouts counted by kind")
    return dead


def check_good_answers(srv, tmp, t, dead):
    """--check: good answers are 200s with the expected body."""
    n_t = sum(1 for l in open(t) if l.strip())
    ck = os.path.join(tmp, "check.txt")
    want = hashlib.sha1(b'{"x":1,"fetched_at":0}\n').hexdigest()[:16]
    with open(ck, "w") as f:
        f.write((want + "\n") * n_t)
    r, s = replay(["--speed", "0", "--name", "stamp", "--check", ck, "--name", "differ", "--check", ck,
                   t, srv.url("/stamp"), srv.url("/differ")], tmp)
    by = {x["target"]: x for x in s}
    check(by.get("stamp", {}).get("good") == n_t and by["stamp"]["bad_body"] == 0,
          "--check: every answer with the expected body (its fetched_at aside) is good: %r" % by.get("stamp"))
    check(by.get("differ", {}).get("good") == 0 and by["differ"]["bad_body"] == n_t
          and by["differ"]["ok"] == n_t and by["differ"]["good_rps"] == 0,
          "--check: a 200 with another body is a bad body, in no good rate: %r" % by.get("differ"))
    r, s = replay(["--speed", "0", "-n", "5", t, dead], tmp)
    check(s and s[0]["good"] == 0 and s[0]["good_p50"] == 0 and s[0]["p50"] == 0,
          "no answer, no good latency")


def check_outputs(srv, tmp, t):
    """Outputs (TSV, histograms) and usage errors."""
    tsv = os.path.join(tmp, "r.tsv")
    hp = os.path.join(tmp, "h")
    r, s = replay(["--speed", "0", "--tsv", tsv, "--histogram=" + hp, t, srv.url("/echo"), srv.url("/chunked")],
                  tmp)
    rows = open(tsv).read().splitlines()
    check(len(rows) == 121 and rows[0].startswith("t_due_s\tjob\ttarget\tstatus\tlatency_us"),
          "TSV: header and one row per request")
    check(all(os.path.exists(hp + x) for x in (".0.hgrm", ".1.hgrm", ".cdf.dat", ".gp")),
          "histogram files written")
    check("latency histogram" in r.stdout, "text histogram printed")
    r = subprocess.run([REPLAY, t], capture_output=True, text=True)
    check(r.returncode == 2, "usage error without a target")
    bad = os.path.join(tmp, "bad.jsonl")
    write_trace(bad, ['{"ts": 1, "payload": [1]}', '{"payload": [2]}'])
    r = subprocess.run([REPLAY, bad, srv.url()], capture_output=True, text=True)
    check(r.returncode == 1 and ":2:" in r.stderr, "a broken trace line is reported with its number")


def main():
    tmp = tempfile.mkdtemp(prefix="test-replay-")
    srv = None
    try:
        srv = Server(tmp)
        check_gen_trace(tmp)
        t = check_fidelity(srv, tmp)
        check_open_loop(srv, tmp, t)
        check_slow_server(srv, tmp, t)
        check_closed_loop(srv, tmp, t)
        check_interleaving(srv, tmp, t)
        check_compare_caps(srv, tmp, t)
        dead = check_error_kinds(srv, tmp, t)
        check_good_answers(srv, tmp, t, dead)
        check_outputs(srv, tmp, t)
    finally:
        if srv:
            srv.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
