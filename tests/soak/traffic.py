"""traffic.py: what the soak sends and what it breaks, on a schedule.

Owns the fault schedule (SCHEDULE, PERIOD_S) and its actions, the hostile
bodies, and the client: one request (a new connection per batch, as the
PHP client does; a slow reader), the sender pool, the bursts at 3x the
measured capacity and the slow readers.  Invariant: every request is
recorded once, with its latency counted from when it was due, and every
loop is bounded in count and time; traffic goes to loopback only.
"""
import hashlib
import http.client
import json
import os
import random
import re
import signal
import socket
import time

from stack import QUIESCE_S, harness, mval, scrape

PERIOD_S = 60.0
# Client threads: a burst at 3x capacity stays open loop only if the client
# can hold every request nginx keeps waiting (rate x fastcgi_read_timeout).
SENDERS = 1500
SENDER_STACK = 256 * 1024
CLIENT_TIMEOUT_S = 30.0       # the PHP client's
CAL_S = 5.0                   # capacity calibration, closed loop, 4 in flight
BASE_RATE = 6.0               # trace requests a second, on average
CONTRACT_4XX = (400, 405, 408, 413)
SLOW_READ_CHUNK, SLOW_READ_PAUSE = 2048, 0.02
UP_LATENCY_MS = 40            # the provider's answer time when well
BURST_IDS = 20

# (offset in the period, action, argument).  Bursts are of batches of
# BURST_IDS ids never seen before, so each costs a worker a provider round
# trip (UP_LATENCY_MS) as in the incident; the first with the provider
# well, the second while it resets connections.
SCHEDULE = [
    (0.0, "upstream", {"mode": "ok", "latency_ms": UP_LATENCY_MS, "drop_every": 0}),
    (3.0, "burst_on", None),
    (5.0, "kill_worker", None),
    # In the burst, so its workers hold a request each when it dies.
    (8.0, "kill_master", None),
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


class TrafficMixin:
    """The Soak methods that send and that make the faults."""

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
        else:
            rec["errbody"] = payload[:300]

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
            # A worker listed may have ended on its own since (recycled at
            # fd_soft or max_requests, which the soak provokes): another
            # is picked, a few times at most.
            rnd = random.Random(self.seq)
            for attempt in range(5):
                pids = self.workers()
                if not pids:
                    break
                pid = rnd.choice(pids)
                t = self.now()  # before: nginx may answer its request first
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    if attempt == 4:
                        raise
                    continue
                with self.lock:
                    self.kills.append((t, pid))
                self.event("kill -9 worker %d" % pid)
                break
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

