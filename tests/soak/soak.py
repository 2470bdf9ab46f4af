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
Retry-After; no 502: nginx answers its own as 503 + Retry-After, a request
a killed worker or master held among them, each matched by enrichd's
count of it); every answer's status what build/enrich says of its body,
every 200 byte-exact against build/enrich (poster, duration and
fetched_at masked); pool RSS and descriptors flat
(a fitted slope); the client's, nginx's access log's and enrichd's
ledgers equal.  Writes summary.txt and PNG plots into --out.

Every loop is bounded in count and time; traffic goes to loopback only.

The modules, one concern each: stack.py (the socket holder, the pool
seen from outside, the master's life), traffic.py (the schedule, the
faults, the client), verdict.py (the reference and the checks),
report.py (summary, CSVs, plots; svgplot.py draws them).  This file
holds the run's state and its order.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from report import ReportMixin
from stack import QUIESCE_S, ROOT, Holder, StackMixin, harness, log
from traffic import (BASE_RATE, CAL_S, CLIENT_TIMEOUT_S, HOSTILE, PERIOD_S, SENDER_STACK, SENDERS,
                     UP_LATENCY_MS, TrafficMixin)
from verdict import Reference, VerdictMixin


# ---- the soak --------------------------------------------------------------
class Soak(StackMixin, TrafficMixin, VerdictMixin, ReportMixin):
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
        self.master_kills = []      # (t, requests its workers held) of the master's SIGKILL
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

    def report(self, ref):
        return self.summary(self.verdict(ref))



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
