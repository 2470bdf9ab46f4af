#!/usr/bin/env python3
"""soak.py: `make soak`, one long run of a production-shaped trace through
the shipped nginx site with every fault on a schedule, overlapping.

The stack: nginx/enrichd.conf as the tests run it (harness.py), enrichd
from the test-hooks build (the leak shim) under a socket holder of ours
that plays systemd (it binds both sockets once, passes them as LISTEN_FDS
and starts the master again 1 s after it dies, as Restart=on-failure
would), the wall clock shifted by tests/hostile/clockshift.c, and
tests/fake_upstream.py as the provider.  Traffic: scripts/gen-trace's
trace replayed open loop (a new connection per batch, like the PHP
client), hostile bodies interleaved, slow readers, bursts at 3x the
capacity measured at start.

The faults, every PERIOD_S seconds (docs/soak.md has the table): the
provider down, slow, answering 429, resetting connections (and cycling
them every 100 requests all along); kill -9 of a worker; HUP with a good
and with a bad configuration; a wall-clock step forward and back; a burst;
SIGKILL of the master (the holder restarts it; the leak shim is on in
every other master's life).

Pass: every request answered (200, a 4xx the contract names, or a 503 with
Retry-After; a 502 only for a request a worker held when the soak killed
it, each matched by enrichd_requests_lost_total); every answer's status what
build/enrich says of its body, every 200 byte-exact against build/enrich
(poster, duration and fetched_at masked); pool RSS and descriptors flat
(a fitted slope); the client's, nginx's access log's and enrichd's
ledgers equal.  Writes summary.txt and PNG plots into --out.

Every loop is bounded in count and time; traffic goes to loopback only.
"""
import argparse
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import pngplot  # noqa: E402

PERIOD_S = 60.0
# Client threads: a burst at 3x capacity stays open loop only if the client
# can hold every request nginx keeps waiting (rate x fastcgi_read_timeout).
SENDERS = 1500
SENDER_STACK = 256 * 1024
CLIENT_TIMEOUT_S = 30.0       # the PHP client's
CAL_S = 5.0                   # capacity calibration, closed loop, 4 in flight
BASE_RATE = 6.0               # trace requests a second, on average
RESTART_SEC = 1.0             # the unit's RestartSec
QUIESCE_S = 30.0              # the longest wait for in-flight requests to end
SAMPLE_S = 0.5
WATCHDOG_S = 10.0             # the shipped unit's WatchdogSec
CONTRACT_4XX = (400, 405, 408, 413)
SLOW_READ_CHUNK, SLOW_READ_PAUSE = 2048, 0.02
LEAK = "fd:1,mem:128"
UP_LATENCY_MS = 40            # the provider's answer time when well
BURST_IDS = 20
# Flat: the fitted growth over the run at most this share of the median,
# or this absolute amount (small pools are noisy in relative terms).
# Descriptors: the upstream connections each worker may keep (4 here) come
# and go with the provider's faults, so the slack is two workers' worth.
FLAT_SHARE, FLAT_RSS_KB, FLAT_FDS = 0.10, 6 * 1024, 2 * 4 + 4
# Samples before this are the pool warming up (the host's upstream cache
# filling to cache_entries, connections opening).
WARM_SHARE, WARM_MIN_S = 0.15, 12.0
FLAT_WINDOW_S = 10.0
FLAT_MIN_PERIODS = 4

# (offset in the period, action, argument).  Bursts are of batches of
# BURST_IDS ids never seen before, so each costs a worker a provider round
# trip (UP_LATENCY_MS) as in the incident; the first with the provider
# well, the second while it resets connections.
SCHEDULE = [
    (0.0, "upstream", {"mode": "ok", "latency_ms": UP_LATENCY_MS, "drop_every": 0}),
    (3.0, "burst_on", None),
    (5.0, "kill_worker", None),
    (10.0, "burst_off", None),
    (12.0, "upstream", {"mode": "refuse"}),               # provider down
    (17.0, "hup", "good"),
    (22.0, "upstream", {"mode": "ok", "latency_ms": 400}),  # slow: past upstream_timeout_ms
    (24.0, "clock", 3600),
    (27.0, "kill_worker", None),
    (32.0, "upstream", {"mode": "429", "latency_ms": UP_LATENCY_MS, "retry_after": "1"}),
    (37.0, "hup", "bad"),
    (40.0, "upstream", {"mode": "ok", "drop_every": 5}),  # resets
    (42.0, "burst_on", None),
    (45.0, "kill_worker", None),
    (49.0, "burst_off", None),
    (50.0, "upstream", {"mode": "ok", "drop_every": 0}),
    (52.0, "clock", 0),
    (57.0, "kill_master", None),
]

HOSTILE = [
    ("deep", b"[" * 1001 + b"]" * 1001),
    ("null", b"[null]"),
    ("object", b'{"provider":"yt","id":"x"}'),
    ("badutf8", b'[{"provider":"yt","id":"a"}]\xff'),
    ("truncated", b'[{"provider":"yt","id":"abc","title":"t'),
    ("tostring", b'[{"provider":"yt","id":"a","toString":1}]'),
    ("empty", b""),
    ("bom", b'\xef\xbb\xbf[{"provider":"vm","id":" 12 ","title":"  A\\u3000B "}]'),
    ("nul", b'[{"provider":"dm","id":"x1\\u0000","title":"a\\u0000b"}]'),
    ("lonesurrogate", b'[{"provider":"yt","id":"\\ud800z","title":"\\udfff"}]'),
    ("bigint", b'[{"provider":"yt","id":123456789012345678901234567890,"duration":1e400}]'),
    ("types", b'[1,"s",true,[],{"provider":"vm","id":[1,null,2],"blocked":"JP"}]'),
    ("get", None),
]

MASK_POSTER = re.compile(rb'"poster":"(?:[^"\\]|\\.)*","duration":[^,]*,')
MASK_FETCHED = re.compile(rb'"fetched_at":-?[0-9]+\}')


def masked(ndjson):
    return MASK_FETCHED.sub(b'"fetched_at":_}', MASK_POSTER.sub(b'"poster":_,"duration":_,', ndjson))


def digest(b):
    return hashlib.sha256(b).hexdigest()


def log(msg):
    sys.stdout.write("[%7.1f] %s\n" % (time.monotonic() - T0, msg))
    sys.stdout.flush()


T0 = time.monotonic()


# ---- the reference ---------------------------------------------------------
class Reference:
    """build/enrich's verdict on a body: (200, masked digest, records in,
    records out) or (4xx, None, 0, 0); one run per distinct body."""

    def __init__(self, enrich):
        self.enrich, self.memo = enrich, {}

    def get(self, body):
        k = hashlib.sha1(body).digest()
        if k not in self.memo:
            p = subprocess.run([self.enrich], input=body, capture_output=True, timeout=60)
            if p.returncode == 0:
                lines = p.stdout.count(b"\n") if p.stdout != b"\n" else 0
                self.memo[k] = (200, digest(masked(p.stdout)), elements(body), lines)
            else:
                self.memo[k] = (400, None, 0, 0)
        return self.memo[k]


def elements(body):
    """The number of top-level array elements of a body the engine
    accepts (-1 when Python's reader disagrees: the ledger then shows it)."""
    text = body.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return len(json.loads(text))
    except (ValueError, RecursionError):
        return -1


def dechunk(data):
    """An HTTP/1.1 chunked body, decoded (what arrived of it)."""
    out, i = b"", 0
    for _ in range(len(data) + 1):  # bounded: each turn consumes bytes
        j = data.find(b"\r\n", i)
        if j < 0:
            break
        n = int(data[i:j].split(b";")[0] or b"0", 16)
        if n == 0:
            break
        out += data[j + 2:j + 2 + n]
        i = j + 2 + n + 2
    return out


# ---- the socket holder (systemd's part) ----------------------------------
class Holder:
    """Binds enrichd's two sockets once and starts the master with them as
    LISTEN_FDS 3 and 4 (named enrichd and status), again after each death."""

    def __init__(self, env, build, backlog, shim, clockfile):
        self.env, self.build, self.shim, self.clockfile = env, build, shim, clockfile
        # systemd's other half: the notifications, WATCHDOG=1 among them.
        self.notify = harness.Notify(os.path.join(env.dir, "notify.sock"))
        self.starts = []
        self.socks = []
        for path in (env.sock, env.status_sock):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(backlog)
            os.chmod(path, 0o660)
            if harness.IS_ROOT:
                shutil.chown(path, group="www-data")
            self.socks.append(s)
        # Above 4, so dup2 onto 3 and 4 always clears close-on-exec.
        self.fds = [os.dup2(s.fileno(), 20 + i, inheritable=False) for i, s in enumerate(self.socks)]
        self.pid = None
        self.lives = 0
        self.logfd = os.open(env.enrichd_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def start(self):
        e = dict(os.environ)
        e.update(LISTEN_FDS="2", LISTEN_FDNAMES="enrichd:status", LD_PRELOAD=self.shim,
                 ENR_CLOCKSHIFT_FILE=self.clockfile, NOTIFY_SOCKET=self.notify.path,
                 WATCHDOG_USEC=str(int(WATCHDOG_S * 1e6)))
        e.pop("ENRICHD_TEST_LEAK", None)
        if self.lives % 2 == 1:
            e["ENRICHD_TEST_LEAK"] = LEAK
        argv = ["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"',
                os.path.join(self.build, "enrichd"), "-c", self.env.conf]
        acts = [(os.POSIX_SPAWN_DUP2, self.fds[0], 3), (os.POSIX_SPAWN_DUP2, self.fds[1], 4),
                (os.POSIX_SPAWN_DUP2, self.logfd, 1), (os.POSIX_SPAWN_DUP2, self.logfd, 2)]
        self.starts.append(time.monotonic())
        self.pid = os.posix_spawn("/bin/sh", argv, e, file_actions=acts, setsid=True)
        self.lives += 1
        return self.pid

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)

    def watchdog_gaps(self, end):
        """[(start, seconds)] of the stretches without WATCHDOG=1 longer
        than WatchdogSec: where systemd would have killed the service."""
        with self.notify.lock:
            pings = [t for t, kv in self.notify.messages if kv.get("WATCHDOG") == "1"]
        marks = sorted(pings + self.starts + [end])
        return [(a, b - a) for a, b in zip(marks, marks[1:]) if b - a > WATCHDOG_S]

    def close(self):
        self.notify.close()
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass


def scrape(env):
    """/metrics from the status socket itself (so not in nginx's ledger)."""
    params = {"REQUEST_METHOD": "GET", "REQUEST_URI": "/metrics", "DOCUMENT_URI": "/metrics",
              "SCRIPT_NAME": "/metrics", "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1",
              "SERVER_PROTOCOL": "HTTP/1.1", "CONTENT_LENGTH": ""}
    try:
        out = harness.fcgi_request(env.status_sock, params, timeout=5)
    except OSError:
        return None
    body = out.split(b"\r\n\r\n", 1)[-1].decode("utf-8", "replace")
    try:
        return harness.metrics_values(body)
    except ValueError:
        return None


def mval(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def pool_pids(master):
    return [master] + harness.children(master)


def pool_sample(master):
    rss = fds = 0
    for p in pool_pids(master):
        rss += harness.proc_status_kb(p, "VmRSS")
        try:
            fds += harness.fd_count(p)
        except OSError:
            pass
    return rss, fds


def window_medians(points):
    """[(group, x, y)] -> the median y of each FLAT_WINDOW_S window of a
    group, at the window's middle."""
    win = {}
    for g, x, y in points:
        win.setdefault((g, int(x // FLAT_WINDOW_S)), []).append(y)
    out = []
    for (g, w), ys in sorted(win.items()):
        if len(ys) >= FLAT_WINDOW_S / SAMPLE_S / 2:  # a window mostly covered
            out.append((g, (w + 0.5) * FLAT_WINDOW_S, sorted(ys)[len(ys) // 2]))
    return out


def slope(points):
    """Least-squares slope of [(group, x, y)] within groups (each group its
    own offset)."""
    groups = {}
    for g, x, y in points:
        groups.setdefault(g, []).append((x, y))
    sxy = sxx = 0.0
    for pts in groups.values():
        if len(pts) < 2:
            continue
        mx = sum(p[0] for p in pts) / len(pts)
        my = sum(p[1] for p in pts) / len(pts)
        sxx += sum((p[0] - mx) ** 2 for p in pts)
        sxy += sum((p[0] - mx) * (p[1] - my) for p in pts)
    return sxy / sxx if sxx else 0.0


# ---- the soak --------------------------------------------------------------
class Soak:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.results = []           # one dict a request
        self.seq = 0
        self.inflight = 0
        self.gate = threading.Event()
        self.gate.set()
        self.stop = threading.Event()
        self.events = []            # (t, what)
        self.kills = []             # (t, worker pid) of kill -9
        self.samples = []           # dicts
        self.final = []             # the last /metrics of each master life
        self.reloads = {"good": 0, "bad": 0}
        self.refused_counted = 0
        self.ready_s = []
        self.pool = ThreadPoolExecutor(SENDERS)

    def now(self):
        return time.monotonic() - self.t0

    def event(self, what):
        with self.lock:
            self.events.append((self.now(), what))
        log(what)

    # -- one request -------------------------------------------------------
    def send(self, kind, body, slow=False, due=None):
        with self.lock:
            self.seq += 1
            rid = "soak-%d" % self.seq
        # Latency counts from when the request was due, so a queue in this
        # client (all its senders busy) is not hidden.
        rec = {"rid": rid, "kind": kind, "t0": self.now() if due is None else due, "status": 0, "err": None,
               "retry_after": None, "degraded": 0, "digest": None, "body": body}
        try:
            if slow:
                self._slow(rec, body)
            else:
                c = http.client.HTTPConnection("127.0.0.1", self.env.port, timeout=CLIENT_TIMEOUT_S)
                try:
                    if body is None:
                        c.request("GET", "/v1/enrich", headers={"X-Request-ID": rid})
                    else:
                        c.request("POST", "/v1/enrich", body=body, headers={"X-Request-ID": rid})
                    r = c.getresponse()
                    data = r.read()
                    rec["status"] = r.status
                    rec["retry_after"] = r.getheader("Retry-After")
                    rec["degraded"] = int(r.getheader("X-Enrich-Degraded") or 0)
                    rec["ctype"] = r.getheader("Content-Type")
                finally:
                    c.close()
                if rec["status"] == 200:
                    rec["digest"] = digest(masked(data))
                    rec["lines"] = data.count(b"\n") if data != b"\n" else 0
                    rec["complete"] = data.endswith(b"\n")
                elif rec["status"] != 200:
                    rec["errbody"] = data[:300]
        except Exception as e:  # a transport failure is an unanswered request
            rec["err"] = repr(e)
        rec["t1"] = self.now()
        with self.lock:
            self.results.append(rec)

    def _slow(self, rec, body):
        """A client reading its answer a little at a time."""
        s = socket.create_connection(("127.0.0.1", self.env.port), timeout=CLIENT_TIMEOUT_S)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"POST /v1/enrich HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Request-ID: "
                      + rec["rid"].encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            deadline = time.monotonic() + CLIENT_TIMEOUT_S
            while time.monotonic() < deadline:
                chunk = s.recv(SLOW_READ_CHUNK)
                if not chunk:
                    break
                data += chunk
                time.sleep(SLOW_READ_PAUSE)
        finally:
            s.close()
        head, _, payload = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        rec["status"] = int(lines[0].split()[1])
        hdr = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip()
               for l in lines[1:] if b":" in l}
        ra = hdr.get(b"retry-after")
        rec["retry_after"] = ra.decode("latin-1") if ra is not None else None
        rec["degraded"] = int(hdr.get(b"x-enrich-degraded", b"0"))
        if b"chunked" in hdr.get(b"transfer-encoding", b""):
            payload = dechunk(payload)
        elif b"content-length" in hdr and len(payload) != int(hdr[b"content-length"]):
            rec["err"] = "slow reader: %d of %s bytes" % (len(payload), hdr[b"content-length"])
        if rec["status"] == 200:
            rec["digest"] = digest(masked(payload))
            rec["lines"] = payload.count(b"\n") if payload != b"\n" else 0
            rec["complete"] = payload.endswith(b"\n")

    def fresh(self):
        """A batch of BURST_IDS ids no cache has seen."""
        with self.lock:
            self.fresh_n += 1
            n = self.fresh_n
        return harness.records_body(BURST_IDS, bad=n % 3, seed=n)

    def submit(self, kind, body, slow=False):
        """Queues a request; counted in flight from here, so a quiesce
        waits for queued ones too."""
        self.gate.wait(QUIESCE_S + 10)
        with self.lock:
            self.inflight += 1
        self.pool.submit(self._counted, kind, body, slow, self.now())

    def _counted(self, kind, body, slow, due):
        try:
            self.send(kind, body, slow, due)
        finally:
            with self.lock:
                self.inflight -= 1

    # -- faults ------------------------------------------------------------
    def do(self, action, arg):
        if action == "upstream":
            self.fake.control(**arg)
            self.event("upstream %s" % json.dumps(arg, sort_keys=True))
        elif action == "kill_worker":
            pids = self.workers()
            if pids:
                pid = random.Random(self.seq).choice(pids)
                os.kill(pid, signal.SIGKILL)
                with self.lock:
                    self.kills.append((self.now(), pid))
                self.event("kill -9 worker %d" % pid)
        elif action == "hup":
            gen0 = mval(scrape(self.env) or {}, "enrichd_config_generation")
            fail0 = mval(scrape(self.env) or {}, "enrichd_reload_failures_total")
            refused0 = len(self.env.log_events("reload refused: configuration invalid, keeping the old one"))
            if arg == "good":
                self.max_requests += 1  # a real change the new workers take
                self.env.write_config(self.conf_text())
            else:
                with open(self.env.conf, "a") as f:
                    f.write("workers = many\n")
            os.kill(self.holder.pid, signal.SIGHUP)
            if arg == "good":
                ok = harness.poll(lambda: mval(scrape(self.env) or {}, "enrichd_config_generation") > gen0,
                                  10, 0.1)
            else:
                # enrichd logs the refusal; it does not count it (see summary).
                ok = harness.poll(lambda: len(self.env.log_events(
                    "reload refused: configuration invalid, keeping the old one")) > refused0, 10, 0.1)
                self.refused_counted += mval(scrape(self.env) or {}, "enrichd_reload_failures_total") > fail0
            self.reloads[arg] += 1 if ok else 0
            self.event("HUP %s configuration: %s" % (arg, "taken" if arg == "good" and ok else
                                                      "refused" if ok else "NO EFFECT SEEN"))
            if arg == "bad":
                self.env.write_config(self.conf_text())  # the operator fixes it
        elif action == "clock":
            tmp = self.clockfile + ".tmp"
            with open(tmp, "w") as f:
                f.write("%d\n" % arg)
            os.rename(tmp, self.clockfile)
            self.event("wall clock offset %+d s" % arg)
        elif action == "burst_on":
            self.burst.set()
            self.event("burst at %.0f/s" % (3 * self.capacity))
        elif action == "burst_off":
            self.burst.clear()
            self.event("burst over")
        elif action == "kill_master":
            self.kill_master()

    def workers(self):
        m = self.holder.pid
        kids = harness.children(m)
        st = [e for e in self.env.log_events("status process start")]
        stp = int(st[-1]["child_pid"]) if st else None
        return [p for p in kids if p != stp]

    def quiesce(self):
        """Holds new requests and waits for those in flight: the ledger of a
        master about to die is read when nothing can move it."""
        self.gate.clear()
        deadline = time.monotonic() + QUIESCE_S
        while time.monotonic() < deadline:
            with self.lock:
                n = self.inflight
            m = scrape(self.env) or {}
            if n == 0 and mval(m, "enrichd_requests_in_flight") == 0:
                return m
            time.sleep(0.05)
        return scrape(self.env)

    def kill_master(self):
        t = time.monotonic()
        m = self.quiesce()
        self.final.append(m)
        self.event("quiesced for the master's SIGKILL in %.2f s" % (time.monotonic() - t))
        self.holder.kill()
        self.gate.set()     # requests made meanwhile wait in the socket's queue
        self.event("SIGKILL master (life %d), traffic resumed" % self.holder.lives)
        time.sleep(RESTART_SEC)
        self.start_master()

    def start_master(self):
        t = time.monotonic()
        pid = self.holder.start()
        ok = harness.poll(lambda: scrape(self.env) is not None and len(self.workers()) >= 2, 10, 0.05)
        self.ready_s.append(time.monotonic() - t if ok else None)
        self.event("master %d started (life %d%s), ready in %s" %
                   (pid, self.holder.lives, ", leak shim " + LEAK if self.holder.lives % 2 == 0 else "",
                    "%.2f s" % self.ready_s[-1] if ok else "NEVER"))

    def conf_text(self):
        return ("workers = 2\nfd_soft = 64\nrss_soft_mb = 48\nmax_requests = %d\n" % self.max_requests
                + harness.upstream_conf(self.fake, upstream_timeout_ms=150, cache_entries=4096))

    # -- threads -----------------------------------------------------------
    def sampler(self):
        while not self.stop.is_set():
            t = self.now()
            pid = self.holder.pid
            rss, fds = pool_sample(pid)
            m = scrape(self.env) or {}
            q = harness.ss_listen_queue(self.env.sock)
            self.samples.append({"t": t, "rss": rss, "fds": fds, "queue": q or 0,
                                 "shed": mval(m, "enrichd_shed_total"),
                                 "degraded": mval(m, "enrichd_records_degraded_total"),
                                 "life": self.holder.lives, "up": bool(m)})
            self.stop.wait(SAMPLE_S)

    def faults(self):
        periods = max(1, int(self.args.seconds // PERIOD_S))
        plan = sorted((k * PERIOD_S + off, a, arg) for k in range(periods) for off, a, arg in SCHEDULE)
        for t, a, arg in plan:
            if self.stop.wait(max(0.0, t - self.now())):
                return
            try:
                self.do(a, arg)
            except Exception as e:  # a fault that could not be made is a finding
                self.event("FAULT %s FAILED: %r" % (a, e))
                self.fault_errors.append((a, repr(e)))

    def bursts(self):
        while not self.stop.is_set():
            if not self.burst.wait(0.2):
                continue
            t = time.monotonic()
            gap = 1.0 / max(1.0, 3 * self.capacity - BASE_RATE)
            while self.burst.is_set() and not self.stop.is_set():
                self.submit("burst", self.fresh())
                t += gap
                time.sleep(max(0.0, t - time.monotonic()))

    def slow_readers(self):
        i = 0
        while not self.stop.wait(2.0):
            self.submit("slow", self.slow_bodies[i % len(self.slow_bodies)], slow=True)
            i += 1

    # -- the run -----------------------------------------------------------
    def run(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        self.fault_errors = []
        self.max_requests = 100000
        self.fresh_n = 0
        self.env = harness.Env(build=a.build, name="soak")
        self.fake = harness.FakeUpstream("--close-after", "100", "--latency-ms", str(UP_LATENCY_MS))
        try:
            return self._run()
        finally:
            self.stop.set()
            self.gate.set()
            self.pool.shutdown(wait=False, cancel_futures=True)
            if hasattr(self, "holder"):
                self.holder.close()
            self.fake.close()
            self.env.close()

    def _run(self):
        a = self.args
        env = self.env
        self.clockfile = os.path.join(env.dir, "clockshift")
        shim = os.path.join(env.dir, "clockshift.so")
        subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2", "-o", shim,
                        os.path.join(ROOT, "tests", "hostile", "clockshift.c")], check=True)
        with open(self.clockfile, "w") as f:
            f.write("0\n")
        env.write_config(self.conf_text())
        self.holder = Holder(env, a.build, 511, shim, self.clockfile)

        # The trace: gen-trace, production-shaped, over the soak's length.
        trace = os.path.join(env.dir, "trace.ndjson")
        n = int(BASE_RATE * a.seconds)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen-trace"), "-n", str(n),
                        "--duration", str(a.seconds), "--seed", str(a.seed), "--bad-rate", "0.02",
                        "--max-body", str(256 * 1024), "-o", trace], check=True,
                       stderr=subprocess.DEVNULL)
        sched = []
        with open(trace, "rb") as f:
            for line in f:
                ts = float(line[6:line.index(b",")])
                raw = line[line.index(b',"payload":') + 11:line.rstrip().rindex(b"}")]
                body = (json.loads(raw).encode("utf-8", "surrogateescape") if raw.startswith(b'"')
                        else raw)
                sched.append((ts, body))
        t_first = sched[0][0]
        sched = [(ts - t_first, b) for ts, b in sched]
        self.slow_bodies = [b for _, b in sched[::7]]

        ref = Reference(a.enrich)
        t = time.monotonic()
        for _, b in sched:
            ref.get(b)
        for _, b in HOSTILE:
            if b is not None:
                ref.get(b)
        log("reference answers for %d bodies in %.1f s" % (len(ref.memo), time.monotonic() - t))

        self.t0 = time.monotonic()
        self.start_master()
        env.start_nginx()

        # Capacity: closed loop, 4 in flight, the burst bodies.
        done = []
        end = time.monotonic() + CAL_S

        def cal(i):
            k = 0
            while time.monotonic() < end and k < 100000:
                self.send("calibrate", self.fresh())
                k += 1
            done.append(k)
        ts = [threading.Thread(target=cal, args=(i,)) for i in range(4)]
        for x in ts:
            x.start()
        for x in ts:
            x.join(CAL_S + CLIENT_TIMEOUT_S)
        self.capacity = sum(done) / CAL_S
        log("capacity %.1f batches/s (closed loop, 4 in flight)" % self.capacity)

        self.burst = threading.Event()
        self.t0 = time.monotonic()
        self.ledger_t0 = 0.0
        threads = [threading.Thread(target=f, daemon=True)
                   for f in (self.sampler, self.faults, self.bursts, self.slow_readers)]
        for x in threads:
            x.start()
        hi = 0
        for i, (ts, body) in enumerate(sched):
            if self.stop.is_set():
                break
            d = ts - self.now()
            if d > 0:
                time.sleep(d)
            self.submit("trace", body)
            if i % 10 == 5:
                name, hb = HOSTILE[hi % len(HOSTILE)]
                hi += 1
                self.submit("hostile:" + name, hb)
        # The end of the schedule: let the faults finish their period.
        time.sleep(max(0.0, a.seconds - self.now()))
        self.stop.set()
        self.burst.clear()
        for x in threads:
            x.join(QUIESCE_S)
        self.final.append(self.quiesce())
        self.pool.shutdown(wait=True)
        time.sleep(0.5)  # nginx writes its access line after the answer
        return self.report(ref)

    # -- the verdict -------------------------------------------------------
    def report(self, ref):
        a = self.args
        out = []
        fails = []

        def check(cond, what):
            out.append(("PASS " if cond else "FAIL ") + what)
            if not cond:
                fails.append(what)
            return cond

        t = time.monotonic()
        with ThreadPoolExecutor(2) as ex:  # build/enrich on every body not yet seen
            list(ex.map(ref.get, {r["body"] for r in self.results if r["body"] is not None}))
        log("reference answers: %d bodies, %.1f s" % (len(ref.memo), time.monotonic() - t))
        res = [r for r in self.results if r["kind"] != "calibrate"]
        cal = [r for r in self.results if r["kind"] == "calibrate"]
        allres = self.results
        by_status = {}
        for r in res:
            by_status[r["status"]] = by_status.get(r["status"], 0) + 1

        # 1. every request answered
        bad, excused = [], []
        for r in res:
            st = r["status"]
            if r["err"]:
                bad.append(r)
            elif st == 200 or st in CONTRACT_4XX or (st == 503 and r["retry_after"]):
                continue
            elif st == 502 and any(r["t0"] <= kt <= r["t1"] for kt, _ in self.kills):
                excused.append(r)
            else:
                bad.append(r)
        check(not bad, "every request answered (200, contract 4xx, 503+Retry-After): %d of %d not: %s"
              % (len(bad), len(res), "; ".join("%s %s st=%s err=%s %r" % (r["rid"], r["kind"], r["status"],
                                                r["err"], r.get("errbody", b"")[:120]) for r in bad[:8])))
        check(len(excused) <= len(self.kills),
              "502s only for requests held by a killed worker: %d, %d kills" % (len(excused), len(self.kills)))

        # 2. the answer is build/enrich's
        wrong, incomplete = [], []
        for r in res:
            if r["body"] is None or r["err"]:
                continue
            rst, rdig, _, _ = ref.get(r["body"])
            if r["status"] == 200:
                if not r.get("complete"):
                    incomplete.append(r)
                if rst != 200 or r["digest"] != rdig:
                    wrong.append(r)
            elif r["status"] in CONTRACT_4XX and rst == 200:
                wrong.append(r)
        check(not incomplete, "every 200 complete (ends in LF): %d not" % len(incomplete))
        check(not wrong, "every answer build/enrich's (status; 200s byte-exact, poster/duration/fetched_at "
              "masked): %d differ: %s" % (len(wrong), "; ".join("%s %s st=%s ref=%s" % (
                  r["rid"], r["kind"], r["status"], ref.get(r["body"])[0]) for r in wrong[:8])))

        # 3. flat RSS and descriptors
        live = [s for s in self.samples if s["up"] and s["rss"]]
        # Every period replays the same faults and ends with the master's
        # death (a new pool), and every other pool runs the leak shim: so
        # the pool at a given phase of the schedule, with or without the
        # shim, is compared with itself a period later.  The slope is
        # fitted to FLAT_WINDOW_S window medians, each (shim, phase window)
        # its own offset; a growth that survives only within a phase, or a
        # saw-tooth of recycling, is no trend.
        periods_run = int(max((s["t"] for s in live), default=0) // PERIOD_S)
        cut = [s for s in live if s["t"] >= max(WARM_SHARE * a.seconds, WARM_MIN_S)]
        for key, absmax, unit in (("rss", FLAT_RSS_KB, "kB"), ("fds", FLAT_FDS, "fds")):
            pts = window_medians([((s["life"] % 2, int((s["t"] % PERIOD_S) // FLAT_WINDOW_S)), s["t"], s[key])
                                  for s in cut])
            k = slope(pts)
            med = sorted(p[2] for p in pts)[len(pts) // 2] if pts else 0
            growth = k * (a.seconds - cut[0]["t"] if cut else 0)
            what = ("pool %s flat: fitted slope %.4f %s/s, %.0f %s over the run (median %d, limit %.0f), "
                    "%d windows of %.0f s" % (key, k, unit, growth, unit, med, max(FLAT_SHARE * med, absmax),
                                              len(pts), FLAT_WINDOW_S))
            if periods_run < FLAT_MIN_PERIODS:
                out.append("NOTE %s: not judged, %d periods (at least %d: each phase with and without the "
                           "leak shim twice)" % (what, periods_run, FLAT_MIN_PERIODS))
            else:
                check(growth <= max(FLAT_SHARE * med, absmax), what)

        # 4. the three ledgers
        access = []
        with open(self.env.access_log) as f:
            for line in f:
                try:
                    access.append(json.loads(line))
                except ValueError:
                    out.append("WARN unparsable access log line: %r" % line[:200])
        api = [x for x in access if x.get("request_id", "").startswith("soak-")]
        acc = {x["request_id"]: x for x in api}
        cli = {r["rid"]: r for r in allres}
        answered = {k: r for k, r in cli.items() if not r["err"]}
        miss = [k for k in answered if k not in acc]
        extra = [k for k in acc if k not in cli]
        check(not miss and not extra and len(api) == len(acc),
              "client and access log: the same requests (%d client, %d logged, %d missing, %d extra, "
              "%d duplicate)" % (len(answered), len(api), len(miss), len(extra), len(api) - len(acc)))
        diff = [k for k, r in answered.items() if k in acc and acc[k]["status"] != r["status"]]
        check(not diff, "client and access log: the same status for each (%d differ: %s)" % (
            len(diff), ", ".join("%s %s/%s" % (k, answered[k]["status"], acc[k]["status"]) for k in diff[:8])))
        ddiff = [k for k, r in answered.items() if k in acc and int(acc[k].get("degraded") or 0) != r["degraded"]]
        check(not ddiff, "client and access log: the same degraded count for each (%d differ)" % len(ddiff))

        # enrichd's counters, summed over the masters' lives
        tot = {}
        names = ("enrichd_requests_accepted_total", "enrichd_requests_completed_total", "enrichd_requests_lost_total",
                 "enrichd_records_in_total", "enrichd_records_out_total", "enrichd_records_rejected_total",
                 "enrichd_records_degraded_total", "enrichd_shed_total")
        for m in self.final:
            m = m or {}
            for nm in names:
                tot[nm] = tot.get(nm, 0) + mval(m, nm)
            for c in ("2xx", "4xx", "5xx"):
                k = 'enrichd_responses_total{code="%s"}' % c
                tot[k] = tot.get(k, 0) + m.get(k, 0)
        check(all(m for m in self.final), "a final /metrics read from each of %d master lives" % len(self.final))
        # What enrichd answered: nginx logged an upstream status of its own.
        by_enrichd = [x for x in api if x.get("upstream_status") not in ("", "-", "502", "504")]
        # A 502 with a connect time reached a worker (that died); without
        # one nginx could not connect (the socket's backlog full).
        lost_log = [x for x in api if x.get("upstream_status") == "502"
                    and x.get("upstream_connect_time") not in ("", "-")]
        refused_log = [x for x in api if x.get("upstream_status") == "502" and x not in lost_log]
        gave_up = [x for x in api if x.get("upstream_status") == "504"]
        out.append("NOTE nginx: %d 502 where its connect failed (backlog full or no master), %d 502 from a "
                   "worker that died, %d 504 (fastcgi_read_timeout: nginx gave up, the request stayed "
                   "queued)" % (len(refused_log), len(lost_log), len(gave_up)))
        cls = {"2xx": 0, "4xx": 0, "5xx": 0}
        for x in by_enrichd:
            cls["%dxx" % (int(x["status"]) // 100)] = cls.get("%dxx" % (int(x["status"]) // 100), 0) + 1
        cli_cls = {"2xx": 0, "4xx": 0, "5xx": 0}
        for x in by_enrichd:
            r = cli.get(x["request_id"])
            if r and not r["err"]:
                cli_cls["%dxx" % (r["status"] // 100)] = cli_cls.get("%dxx" % (r["status"] // 100), 0) + 1
        for c in ("2xx", "4xx", "5xx"):
            e = tot.get('enrichd_responses_total{code="%s"}' % c, 0)
            check(cli_cls[c] == cls[c] == e, "ledgers agree on %s answered by enrichd: client %d, nginx %d, "
                  "enrichd %d" % (c, cli_cls[c], cls[c], e))
        check(len(by_enrichd) == tot.get("enrichd_requests_completed_total"),
              "ledgers agree on requests enrichd completed: nginx %d, enrichd %d" % (
                  len(by_enrichd), tot.get("enrichd_requests_completed_total", 0)))
        check(len(lost_log) == len(excused) == tot.get("enrichd_requests_lost_total"),
              "ledgers agree on requests lost with a killed worker: nginx %d, client %d, enrichd %d" % (
                  len(lost_log), len(excused), tot.get("enrichd_requests_lost_total", 0)))
        ok200 = [r for r in allres if r["status"] == 200 and not r["err"] and r["body"] is not None]
        rin = sum(ref.get(r["body"])[2] for r in ok200)
        rout = sum(r.get("lines", 0) for r in ok200)
        rdeg = sum(r["degraded"] for r in allres if not r["err"])
        ndeg = sum(int(x.get("degraded") or 0) for x in api)
        if gave_up:
            late = [r for x in gave_up for r in [cli.get(x["request_id"])] if r and r["body"] is not None]
            lin = sum(ref.get(r["body"])[2] for r in late)
            lout = sum(ref.get(r["body"])[3] for r in late if ref.get(r["body"])[0] == 200)
            out.append("NOTE the %d requests nginx gave up on (504) hold %d records in, %d out; enrichd "
                       "counts %d records in and %d out more than the client received, %d 4xx more"
                       % (len(gave_up), lin, lout, tot.get("enrichd_records_in_total", 0) - rin,
                          tot.get("enrichd_records_out_total", 0) - rout,
                          tot.get('enrichd_responses_total{code="4xx"}', 0) - cli_cls["4xx"]))
        check(rin == tot.get("enrichd_records_in_total"), "ledgers agree on records in: client %d, enrichd %d"
              % (rin, tot.get("enrichd_records_in_total", 0)))
        check(rout == tot.get("enrichd_records_out_total"), "ledgers agree on records out: client %d, enrichd %d"
              % (rout, tot.get("enrichd_records_out_total", 0)))
        check(rin - rout == tot.get("enrichd_records_rejected_total"),
              "ledgers agree on records rejected: client %d, enrichd %d"
              % (rin - rout, tot.get("enrichd_records_rejected_total", 0)))
        check(rdeg == ndeg == tot.get("enrichd_records_degraded_total"),
              "ledgers agree on records degraded: client %d, nginx %d, enrichd %d"
              % (rdeg, ndeg, tot.get("enrichd_records_degraded_total", 0)))
        # Every 503 carries Retry-After: a worker's shed (nginx logged the
        # upstream's 503) or nginx's own refusal (max_conns reached, no
        # master, a full backlog: its 502 answered as 503).
        shed_c = sum(1 for r in allres if r["status"] == 503 and r["retry_after"])
        shed_n = sum(1 for x in api if int(x["status"]) == 503)
        shed_w = sum(1 for x in api if int(x["status"]) == 503 and x.get("upstream_status") == "503")
        out.append("NOTE 503s: %d shed by a worker, %d refused by nginx (max_conns, no master, "
                   "backlog)" % (shed_w, shed_n - shed_w))
        check(shed_c == shed_n, "ledgers agree on 503 + Retry-After: client %d, nginx %d"
              % (shed_c, shed_n))
        if any("enrichd_shed_total" in k for m in self.final if m for k in m):
            check(shed_w == tot.get("enrichd_shed_total"),
                  "ledgers agree on shed by a worker: nginx %d, enrichd %d"
                  % (shed_w, tot.get("enrichd_shed_total", 0)))

        # 5. the faults happened
        check(not self.fault_errors, "every scheduled fault made: %r" % self.fault_errors)
        check(all(x is not None and x < 5 for x in self.ready_s),
              "each master ready within 5 s of its start: %s" % ", ".join(
                  "%.2f" % x if x is not None else "never" for x in self.ready_s))
        periods = max(1, int(a.seconds // PERIOD_S))
        out.append("NOTE refused reloads (invalid configuration) counted in enrichd_reload_failures_total: "
                   "%d of %d (the metric counts only new workers that did not start)"
                   % (self.refused_counted, self.reloads["bad"]))
        check(self.reloads["good"] == periods and self.reloads["bad"] == periods,
              "HUP: %d of %d good configurations taken, %d of %d bad ones refused" % (
                  self.reloads["good"], periods, self.reloads["bad"], periods))

        # systemd's watchdog: would it have restarted the service?
        gaps = self.holder.watchdog_gaps(time.monotonic())
        check(not gaps, "WATCHDOG=1 never withheld past WatchdogSec=%.0f s (systemd would have restarted "
              "enrichd %d times: %s)" % (WATCHDOG_S, len(gaps), ", ".join(
                  "at %.0f s for %.1f s" % (t - self.t0, d) for t, d in gaps)))

        # the summary
        lat = sorted(r["t1"] - r["t0"] for r in res if r["status"] == 200 and r["kind"] != "slow")

        def pct(p):
            return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0
        exits = {}
        for e in self.env.log_events("worker exit"):
            exits[e.get("reason")] = exits.get(e.get("reason"), 0) + 1
        kinds = {}
        for r in res:
            k = r["kind"].split(":")[0]
            kinds.setdefault(k, {}).setdefault(r["status"], 0)
            kinds[k][r["status"]] += 1
        head = ["enrichd soak: %.0f s, seed %d, %s" % (a.seconds, a.seed, time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                       time.gmtime())),
                "capacity (closed loop, 4 in flight) %.1f batches/s; bursts at %.1f/s" % (
                    self.capacity, 3 * self.capacity),
                "requests %d (+%d calibration): by status %s" % (len(res), len(cal), json.dumps(
                    {str(k): v for k, v in sorted(by_status.items())})),
                "by kind: %s" % json.dumps({k: {str(s): n for s, n in sorted(v.items())}
                                            for k, v in sorted(kinds.items())}),
                "200 latency ms p50 %.1f p90 %.1f p99 %.1f max %.1f" % (pct(0.5), pct(0.9), pct(0.99),
                                                                         pct(1.0)),
                "200 latency ms by kind (p50/p99/max): %s" % "; ".join(
                    "%s %s" % (k, lat_of(res, k)) for k in ("trace", "burst", "hostile", "slow")),
                "records in %d out %d degraded %d; enrichd counters %s" % (rin, rout, rdeg, json.dumps(tot)),
                "worker exits by reason: %s; kill -9: %d; master lives: %d" % (json.dumps(exits),
                                                                              len(self.kills),
                                                                              self.holder.lives),
                "listen queue max %d; pool RSS max %d kB; descriptors max %d" % (
                    max((s["queue"] for s in self.samples), default=0),
                    max((s["rss"] for s in self.samples), default=0),
                    max((s["fds"] for s in self.samples), default=0)),
                ""]
        self.plots(res)
        with open(os.path.join(a.out, "samples.csv"), "w") as f:
            f.write("t,life,up,rss_kb,fds,listen_queue,shed_total,degraded_total\n")
            for x in self.samples:
                f.write("%.2f,%d,%d,%d,%d,%d,%d,%d\n" % (x["t"], x["life"], x["up"], x["rss"], x["fds"],
                                                         x["queue"], x["shed"], x["degraded"]))
        with open(os.path.join(a.out, "requests.csv"), "w") as f:
            f.write("request_id,kind,due_s,done_s,status,retry_after,degraded,error\n")
            for r in sorted(self.results, key=lambda r: r["t0"]):
                f.write("%s,%s,%.3f,%.3f,%d,%s,%d,%s\n" % (r["rid"], r["kind"], r["t0"], r["t1"], r["status"],
                                                          r["retry_after"] or "", r["degraded"],
                                                          json.dumps(r["err"] or "")))
        text = "\n".join(head + out + ["", "events:"] +
                         ["  %7.1f %s" % e for e in self.events] +
                         ["", "%s: %d checks, %d failed" % ("FAIL" if fails else "PASS", len(out), len(fails))])
        with open(os.path.join(a.out, "summary.txt"), "w") as f:
            f.write(text + "\n")
        print(text)
        return 1 if fails else 0

    def plots(self, res):
        d = self.args.out
        lat = [(r["t0"], (r["t1"] - r["t0"]) * 1000) for r in sorted(res, key=lambda r: r["t0"])
               if r["status"] == 200 and r["kind"] != "slow"]
        ref = [(r["t0"], (r["t1"] - r["t0"]) * 1000) for r in sorted(res, key=lambda r: r["t0"])
               if r["status"] not in (200,) and not r["err"]]
        s = self.samples
        pngplot.plot(os.path.join(d, "latency.png"), "LATENCY MS", "SECONDS",
                     [("200", lat), ("OTHER", ref)], dots=True)
        pngplot.plot(os.path.join(d, "rss.png"), "POOL RSS KB", "SECONDS", [("RSS", [(x["t"], x["rss"]) for x in s])])
        pngplot.plot(os.path.join(d, "fds.png"), "POOL DESCRIPTORS", "SECONDS",
                     [("FDS", [(x["t"], x["fds"]) for x in s])])
        pngplot.plot(os.path.join(d, "queue.png"), "LISTEN QUEUE", "SECONDS",
                     [("QUEUE", [(x["t"], x["queue"]) for x in s])])
        shed = self.per_second(res, lambda r: r["status"] == 503 and r["retry_after"])
        deg = self.per_second(res, lambda r: r["degraded"] > 0, weight=lambda r: r["degraded"])
        pngplot.plot(os.path.join(d, "shed_degraded.png"), "SHED AND DEGRADED A SECOND", "SECONDS",
                     [("SHED", shed), ("DEGRADED RECORDS", deg)])

    @staticmethod
    def per_second(res, pred, weight=lambda r: 1):
        n = {}
        for r in res:
            if pred(r):
                n[int(r["t0"])] = n.get(int(r["t0"]), 0) + weight(r)
        if not res:
            return []
        end = int(max(r["t0"] for r in res)) + 1
        return [(t, n.get(t, 0)) for t in range(0, end)]


def lat_of(res, kind):
    v = sorted((r["t1"] - r["t0"]) * 1000 for r in res if r["status"] == 200 and r["kind"] == kind)
    if not v:
        return "-"
    return "%.0f/%.0f/%.0f" % (v[len(v) // 2], v[min(len(v) - 1, int(0.99 * len(v)))], v[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-hooks"), help="the test-hooks build")
    ap.add_argument("--enrich", default=os.path.join(ROOT, "build", "enrich"), help="the reference CLI")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "soak"))
    a = ap.parse_args()
    if a.seconds < PERIOD_S:
        ap.error("--seconds: at least %d (one period of the fault schedule)" % PERIOD_S)
    sys.setrecursionlimit(10000)
    threading.stack_size(SENDER_STACK)
    sys.exit(Soak(a).run())


if __name__ == "__main__":
    main()
