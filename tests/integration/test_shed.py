#!/usr/bin/env python3
"""test_shed.py: shedding and what the verdict measures, on the real
daemon (raw FastCGI to its socket, then through the shipped nginx).

- A batch whose ENRICHD_QUEUED_AT (nginx's $msec) is older than
  queue_timeout_ms is answered at once with 503, Retry-After and a JSON
  reason, before its body is read (an invalid body gets the 503, not a
  400), and counted in enrichd_shed_total; a fresh one, an absent one, a
  malformed one or one from a clock ahead is served.
- The wait counts in the latency histogram (a batch that waited 300 ms
  lands past the 250 ms bucket); a request whose caller went away is
  counted in enrichd_client_gone_total and never in the histogram.
- A body that does not arrive within body_timeout_ms while the caller is
  still there gets a JSON 408 (and the worker lives on).
- On a TCP listener the kernel's view of this host's own queue wait
  (TCP_INFO) is taken instead: a batch that waited 5 s elsewhere (the
  parameter of a front retrying another host) is served here at once, and
  one that sat in this host's queue past the bound is shed without any
  parameter.
- Through nginx: the shipped config passes ENRICHD_QUEUED_AT (a worker
  held busy makes the next batch wait past the bound: 503 + Retry-After);
  nginx's own 502 (no worker reachable: the backlog full, enrichd gone)
  is a 503 with Retry-After and a JSON body too.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

QUEUE_MS = 200
BODY_MS = 600


def msec(t):
    return "%.3f" % t


def headers_of(stdout):
    head = stdout.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    out = {}
    for line in head.split("\r\n"):
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip().lower()] = v.strip()
    return out


def body_of(stdout):
    return stdout.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in stdout else b""


def exchange(env, body, queued_at=None):
    params = H.fcgi_enrich_params(body)
    if queued_at is not None:
        params["ENRICHD_QUEUED_AT"] = queued_at
    t0 = time.monotonic()
    out = H.fcgi_request(env.sock, params, body)
    return H.fcgi_status(out), headers_of(out), body_of(out), time.monotonic() - t0


def test_shed_raw(r, env):
    # The pool older than the waits below: what waited before the master
    # started is not shed (test_cold_start).
    time.sleep(1.2)
    good = H.sample_body(3)
    # The control: the path's own time under this moment's load, the
    # slowest of three fresh batches just before (served, not shed).
    ctl = max(exchange(env, good, msec(time.time()))[3] for _ in range(3))
    shed0 = H.metric(env, "enrichd_shed_total", 0.0)
    st, h, body, took = exchange(env, b"[{not json", msec(time.time() - 1.0))
    r.check(st == 503, "waited 1 s > %d ms: 503 (%r)" % (QUEUE_MS, st))
    r.check(h.get("retry-after") == "1", "Retry-After: 1 (%r)" % h)
    r.check(h.get("content-type", "").startswith("application/json"), "JSON (%r)" % h)
    try:
        doc = json.loads(body)
    except ValueError:
        doc = {}
    r.check("overloaded" in doc.get("error", "") and "queue_timeout_ms" in doc.get("error", ""),
            "the reason says why: %r" % body[:200])
    r.check(took < 0.5 + ctl, "answered at once: %.3f s (< 0.5 s + the control's %.3f s)"
            % (took, ctl))
    r.check(H.metric(env, "enrichd_shed_total", 0.0) == shed0 + 1, "enrichd_shed_total counted it")
    # Served: fresh, absent, malformed, from a clock ahead, from a clock far behind.
    for what, at in (("fresh", msec(time.time())), ("absent", None), ("malformed", "soon"),
                     ("a clock ahead", msec(time.time() + 5)),
                     ("a clock 1 h behind", msec(time.time() - 3600))):
        st, _, body, _ = exchange(env, good, at)
        r.check(st == 200 and body.count(b"\n") == 3, "%s: served (%r)" % (what, st))
    r.check(H.metric(env, "enrichd_shed_total", 0.0) == shed0 + 1, "nothing else shed")
    # An invalid body that did not wait is parsed (and refused) as usual.
    st, _, _, _ = exchange(env, b"[{not json", msec(time.time()))
    r.check(st == 400, "not shed: the engine answers 400 (%r)" % st)


def bucket_counts(env):
    m = H.metrics(env)
    return {k: v for k, v in m.items() if k.startswith("enrichd_request_duration_seconds_")}


def test_wait_in_latency(r, env):
    b0 = bucket_counts(env)
    st, _, _, _ = exchange(env, H.sample_body(2), msec(time.time() - 0.15))
    r.check(st == 200, "waited 150 ms < %d ms: served (%r)" % (QUEUE_MS, st))
    b1 = bucket_counts(env)
    le100 = 'enrichd_request_duration_seconds_bucket{le="0.1"}'
    le250 = 'enrichd_request_duration_seconds_bucket{le="0.25"}'
    cnt = "enrichd_request_duration_seconds_count"
    r.check(b1[cnt] == b0[cnt] + 1, "one more in the histogram")
    r.check(b1[le100] == b0[le100] and b1[le250] == b0[le250] + 1,
            "its 150 ms wait counts: in the 250 ms bucket, not the 100 ms one (%r -> %r)"
            % ((b0[le100], b0[le250]), (b1[le100], b1[le250])))


def test_client_gone(r, env):
    body = H.sample_body(20)
    gone0 = H.metric(env, "enrichd_client_gone_total", 0.0)
    b0 = bucket_counts(env)
    data = H.fcgi_request_bytes(H.fcgi_enrich_params(body), body)
    c = H.FcgiConn(env.sock, 5)
    c.send(data[:len(data) - len(body) // 2])  # half the body, then gone
    time.sleep(0.05)
    c.close()
    ok = H.poll(lambda: H.metric(env, "enrichd_client_gone_total", 0.0) == gone0 + 1, 5)
    r.check(ok, "a caller gone mid-body: counted in enrichd_client_gone_total")
    b1 = bucket_counts(env)
    r.check(b1["enrichd_request_duration_seconds_count"] ==
            b0["enrichd_request_duration_seconds_count"],
            "and never in the latency histogram")


def test_body_timeout(r, env):
    body = H.sample_body(20)
    pids = env.worker_pids()
    data = H.fcgi_request_bytes(H.fcgi_enrich_params(body), body)
    c = H.FcgiConn(env.sock, 5)
    t0 = time.monotonic()
    try:
        c.send(data[:len(data) - len(body) // 2])  # the rest never comes; the caller stays
        out = c.recv_until_end(1, timeout=5)
    finally:
        c.close()
    took = time.monotonic() - t0
    st = H.fcgi_status(out["stdout"])
    r.check(st == 408, "body not in within body_timeout_ms: 408 (%r %r)" % (st, out["stdout"][:200]))
    r.check("body_timeout_ms" in body_of(out["stdout"]).decode("utf-8", "replace"),
            "the JSON says which bound: %r" % out["stdout"][-200:])
    r.check(BODY_MS / 1000.0 - 0.05 <= took <= BODY_MS / 1000.0 + 1.5,
            "after about body_timeout_ms: %.2f s" % took)
    time.sleep(0.2)
    r.check(env.worker_pids() == pids and not H.worker_exit_reasons(env),
            "the worker lives on")


def test_through_nginx(r, env):
    """A worker held busy (the test hook) makes the next batch wait in the
    queue past queue_timeout_ms: nginx's ENRICHD_QUEUED_AT gets it shed."""
    res = {}

    def hold(i):
        res[i] = env.request("/v1/enrich", H.sample_body(1), headers={"X-Test-Sleep-Ms": "700"})

    # The control: the same path's own time under this moment's load, the
    # slowest of three batches through nginx just before.
    ctl = 0.0
    for _ in range(3):
        t0 = time.monotonic()
        env.request("/v1/enrich", H.sample_body(1))
        ctl = max(ctl, time.monotonic() - t0)
    threads = [threading.Thread(target=hold, args=(i,)) for i in range(2)]  # both workers
    for t in threads:
        t.start()
    time.sleep(0.15)
    t0 = time.monotonic()
    st, h, body = env.request("/v1/enrich", H.sample_body(1))
    took = time.monotonic() - t0
    for t in threads:
        t.join(10)
    r.check(all(v[0] == 200 for v in res.values()), "the held batches: 200 (%r)"
            % [v[0] for v in res.values()])
    r.check(st == 503 and h.get("retry-after") == "1" and b"overloaded" in body,
            "the batch behind them waited past %d ms: 503 + Retry-After (%r %r %r)"
            % (QUEUE_MS, st, h.get("retry-after"), body[:160]))
    r.check(took < 1.5 + ctl, "answered as soon as a worker took it: %.2f s (< 1.5 s + the "
            "control's %.2f s)" % (took, ctl))
    st, _, _ = env.request("/v1/enrich", H.sample_body(1))
    r.check(st == 200, "then served at once again (%r)" % st)


def test_nginx_502_is_503(r, env):
    """No worker reachable: the listen backlog full (workers stopped) and
    then enrichd gone.  nginx's 502 reaches the client as 503 with
    Retry-After and JSON."""
    pids = env.worker_pids()
    # The control: a batch through nginx, the slowest of three just before
    # (the same path to nginx under this moment's load).
    ctl = 0.0
    for _ in range(3):
        t0 = time.monotonic()
        env.request("/v1/enrich", H.sample_body(1))
        ctl = max(ctl, time.monotonic() - t0)
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    out = []
    lock = threading.Lock()

    def one():
        t0 = time.monotonic()
        try:
            st, h, body = env.request("/v1/enrich", H.sample_body(1), timeout=20)
        except Exception as e:  # a transport failure is a failure of the rule
            st, h, body = 0, {}, repr(e).encode()
        with lock:
            out.append((st, h, body, time.monotonic() - t0))

    try:
        threads = [threading.Thread(target=one) for _ in range(12)]
        for t in threads:
            t.start()
        time.sleep(1.0)
    finally:
        for p in pids:
            os.kill(p, signal.SIGCONT)
    for t in threads:
        t.join(30)
    sts = sorted(o[0] for o in out)
    r.check(len(out) == 12 and all(s in (200, 503) for s in sts), "only 200 or 503: %r" % sts)
    refused = [o for o in out if o[0] == 503]
    r.check(all(o[1].get("retry-after") and o[1].get("content-type") == "application/json"
                and b'"error":' in o[2] for o in refused),
            "every 503 with Retry-After and JSON: %r" % [(o[1].get("retry-after"), o[2][:80])
                                                       for o in refused])
    fast = [o for o in refused if b"reachable" in o[2]]
    r.check(fast, "the backlog overflowed (listen_backlog 2): nginx's own refusals seen (%r)"
            % [o[2][:60] for o in refused])
    r.check(all(o[3] < 0.5 + ctl for o in fast), "nginx's refusals are immediate (< 0.5 s + "
            "the control's %.3f s): %r" % (ctl, [round(o[3], 3) for o in fast]))
    r.check(all(b"overloaded" in o[2] for o in refused if o not in fast),
            "the queued ones waited past queue_timeout_ms: shed by the worker")
    env.signal(signal.SIGQUIT)
    env.wait_exit(10)
    st, h, body = env.request("/v1/enrich", b"[]")
    r.check(st == 503 and h.get("retry-after") == "1" and b"reachable" in body
            and h.get("x-request-id"),
            "enrichd gone: 503 + Retry-After + X-Request-ID (%r %r %r)" % (st, h, body[:120]))


def test_tcp_own_queue(r):
    port = H.free_port()
    with H.Env(name="shed-tcp") as env:
        env.start_enrichd("listen = 127.0.0.1:%d\nworkers = 1\nqueue_timeout_ms = %d\n"
                          % (port, QUEUE_MS))
        pids = env.wait_workers(1)
        addr = ("127.0.0.1", port)
        body = H.sample_body(2)
        params = H.fcgi_enrich_params(body)
        params["ENRICHD_QUEUED_AT"] = msec(time.time() - 5.0)
        out = H.fcgi_request(addr, params, body)
        r.check(H.fcgi_status(out) == 200 and body_of(out).count(b"\n") == 2,
                "TCP: 5 s of wait elsewhere (a retried batch), none here: served (%r)"
                % out[:120])
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        try:
            c = H.FcgiConn(addr, 5)
            c.send(H.fcgi_request_bytes(H.fcgi_enrich_params(body), body))  # no parameter
            time.sleep(QUEUE_MS / 1000.0 + 0.4)
        finally:
            for p in pids:
                os.kill(p, signal.SIGCONT)
        res = c.recv_until_end(1, timeout=5)
        c.close()
        h = headers_of(res["stdout"])
        r.check(H.fcgi_status(res["stdout"]) == 503 and h.get("retry-after") == "1"
                and b"overloaded" in body_of(res["stdout"]),
                "TCP: %d ms in this host's queue, no parameter: shed (%r)"
                % (QUEUE_MS + 400, res["stdout"][:200]))


def test_cold_start(r):
    """A batch queued in a kept socket before the master starts (a cold
    start through socket activation, a restart): its wait up to the
    master's start is no overload, so it is served, however long it was;
    one that then waits behind a busy pool is shed as ever."""
    with H.Env(name="shed-cold") as env:
        env.write_config("workers = 1\nqueue_timeout_ms = %d\n" % QUEUE_MS)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(env.sock)
        s.listen(16)
        body = H.sample_body(2)
        params = H.fcgi_enrich_params(body)
        params["ENRICHD_QUEUED_AT"] = msec(time.time())
        c = H.FcgiConn(env.sock, 10)
        c.send(H.fcgi_request_bytes(params, body))
        time.sleep(QUEUE_MS / 1000.0 * 3)  # the master not started yet: no one to take it
        e = dict(os.environ, LISTEN_FDS="1", LISTEN_FDNAMES="enrichd")
        log = open(env.enrichd_log, "ab")
        p = subprocess.Popen(["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"',
                              os.path.join(env.build, "enrichd"), "-c", env.conf],
                             env=e, stdout=log, stderr=log, start_new_session=True,
                             pass_fds=(s.fileno(),),
                             preexec_fn=lambda: os.dup2(s.fileno(), 3))
        env.procs.append(p)
        try:
            res = c.recv_until_end(1, timeout=10)
        finally:
            c.close()
        r.check(H.fcgi_status(res["stdout"]) == 200 and body_of(res["stdout"]).count(b"\n") == 2,
                "queued %d ms before the master started: served (%r)"
                % (QUEUE_MS * 3, res["stdout"][:160]))
        log.close()
        s.close()


def main():
    r = H.Results()
    conf = ("workers = 2\nqueue_timeout_ms = %d\nbody_timeout_ms = %d\nlisten_backlog = 2\n"
            "request_timeout_ms = 1500\n" % (QUEUE_MS, BODY_MS))
    with H.Env(build=H.hooks_build_dir(), name="shed") as env:
        env.start_stack(conf, workers=2)
        for fn in (test_shed_raw, test_wait_in_latency, test_client_gone, test_body_timeout,
                   test_through_nginx, test_nginx_502_is_503):
            r.run(fn, env)
    r.run(test_tcp_own_queue)
    r.run(test_cold_start)
    r.done()


if __name__ == "__main__":
    main()
