#!/usr/bin/env python3
"""test_status.py: the operators' endpoints through the real nginx and the
real enrichd: /healthz /readyz /status /metrics, the counters,
promtool, `enrichd status`, the allow list, the operators' server (the
site's second server, on a port of its own), and leak attribution.

The endpoints under load, the health verdicts and the listen queue are in
test_status_load.py (they need a fake upstream that hangs or fails).
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

PHP_FPM_KEYS = ("pool", "process manager", "start time", "start since", "accepted conn",
                "listen queue", "max listen queue", "listen queue len", "idle processes",
                "active processes", "total processes", "max active processes",
                "max children reached", "slow requests")


from harness import (  # noqa: E402,F401
    FakeUpstream, PROMTOOL, get_json, records_body, promtool_check, metrics_values,
    ss_listen_queue)

# ---- tests ------------------------------------------------------------------

def check_health_endpoints(r, env):
    """/healthz, /readyz, HEAD, and a POST refused."""
    st, h, body = env.request("/healthz", method="GET")
    r.check(st == 200, "/healthz 200 (got %d %r)" % (st, body[:200]))
    doc = json.loads(body)
    r.check(doc.get("status") == "ok" and doc.get("reasons") == [], "/healthz ok: %r" % doc)
    r.check(h.get("content-type", "").startswith("application/json"), "/healthz json")
    st, _, body = env.request("/readyz", method="GET")
    r.check(st == 200 and json.loads(body)["status"] == "ready", "/readyz ready: %r" % body)
    st, h, body = env.request("/healthz", method="HEAD")
    r.check(st == 200 and body == b"", "HEAD /healthz: %d %r" % (st, body))
    st, _, _ = env.request("/status", method="POST", body=b"x")
    r.check(st == 405, "POST /status is 405 (got %d)" % st)


def check_counters(r, env):
    """/status before and after known traffic: every request and record counted."""
    before = get_json(env, "/status")
    for k in PHP_FPM_KEYS:
        r.check(k in before, "/status has php-fpm field %r" % k)
    r.check(before["total processes"] == 2 and before["idle processes"] == 2,
            "2 idle workers: %r" % before)
    r.check(abs(before["start time"] - time.time()) < 60, "start time is now-ish")

    # Traffic with rejected records: 20 good + 5 with a bad provider each.
    sent, lines = 0, 0
    for i in range(10):
        st, h, body = env.request("/v1/enrich", records_body(20, bad=5, seed=i))
        r.check(st == 200, "enrich request %d: %d" % (i, st))
        sent += 1
        lines += body.count(b"\n") if body != b"\n" else 0
    st, _, _ = env.request("/v1/enrich", b"{not json")
    r.check(400 <= st < 500, "bad body is 4xx (got %d)" % st)
    sent += 1

    after = get_json(env, "/status")
    d_acc = after["accepted conn"] - before["accepted conn"]
    d_done = after["completed"] - before["completed"]
    r.check(d_acc == sent, "accepted grew by %d (got %d)" % (sent, d_acc))
    r.check(d_done == sent, "completed grew by %d (got %d)" % (sent, d_done))
    r.check(after["accepted conn"] == after["completed"] + after["in_flight"] + after["lost"]
            and after["lost"] == 0,
            "accepted = completed + in flight + lost: %d = %d + %d + %d"
            % (after["accepted conn"], after["completed"], after["in_flight"], after["lost"]))
    r.check(after["in_flight"] == 0 and after["active processes"] == 0, "nothing in flight")
    rec = after["records"]
    r.check(rec["in"] == rec["out"] + rec["rejected"],
            "records in = out + rejected: %r" % rec)
    r.check(rec["in"] == 250 and rec["out"] == lines == 200 and rec["rejected"] == 50,
            "records 250 in, 200 out (%d lines), 50 rejected: %r" % (lines, rec))
    r.check(after["responses"]["4xx"] - before["responses"]["4xx"] == 1, "one 4xx counted")
    return after


def check_metrics(r, env, after):
    """/metrics agrees with /status and passes promtool."""
    st, h, text = env.request("/metrics", method="GET")
    r.check(st == 200, "/metrics 200")
    r.check(h.get("content-type", "").startswith("text/plain; version=0.0.4"),
            "/metrics content type %r" % h.get("content-type"))
    ok, out = promtool_check(text)
    r.check(ok, "promtool check metrics: %s" % out)
    m = metrics_values(text.decode())
    r.check(m.get("enrichd_requests_accepted_total") == after["accepted conn"],
            "metrics accepted %r" % m.get("enrichd_requests_accepted_total"))
    r.check(m.get("enrichd_records_rejected_total") == 50, "metrics rejected")
    r.check(m.get('enrichd_request_duration_seconds_bucket{le="+Inf"}')
            == m.get("enrichd_request_duration_seconds_count") == after["completed"],
            "histogram count = completed")
    r.check(m.get("enrichd_healthy") == 1, "metrics healthy")
    r.check(all(n.startswith("enrichd_") for n in m), "every metric has the enrichd_ prefix")


def check_worker_table(r, env):
    """?full: the per-worker table matches /proc."""
    full = get_json(env, "/status?full")
    procs = [p for p in full["processes"] if p["state"] != "empty"]
    pids = sorted(env.worker_pids())
    r.check(sorted(p["pid"] for p in procs) == pids, "worker pids %r vs %r"
            % ([p["pid"] for p in procs], pids))
    served = sum(p["requests"] for p in procs)
    r.check(served == full["completed"], "per-worker requests add up: %d" % served)
    for p in procs:
        k = p.get("fds_by_kind", {})
        try:
            nfd = len(os.listdir("/proc/%d/fd" % p["pid"]))
        except OSError:
            nfd = -1
        r.check(k.get("total") == nfd, "worker %d fds %r vs /proc %d" % (p["pid"], k.get("total"), nfd))
        r.check(k.get("unix", 0) >= 1, "worker holds the listening unix socket")
        r.check(k.get("summary", "").startswith("%d fds" % k.get("total", -1)), "summary %r" % k)
    return pids


def check_text_views(r, env):
    """Text views: ?text and Accept: text/plain."""
    st, h, body = env.request("/status?text&full", method="GET")
    r.check(st == 200 and h.get("content-type", "").startswith("text/plain"), "?text is text")
    r.check(b"accepted conn:" in body and b"SLOT" in body and b"worker 0:" in body,
            "text view has fields, table and leak lines")
    st, h, body = env.request("/status", method="GET", headers={"Accept": "text/plain"})
    r.check(h.get("content-type", "").startswith("text/plain") and b"listen queue:" in body,
            "Accept: text/plain gives text")


def check_status_cli(r, env, pids):
    """The operator's command, on the status socket directly."""
    cli = subprocess.run([os.path.join(env.build, "enrichd"), "status", env.status_sock],
                         capture_output=True, text=True, timeout=10)
    r.check(cli.returncode == 0, "enrichd status exit %d: %s" % (cli.returncode, cli.stderr))
    r.check("accepted conn:" in cli.stdout and "SLOT" in cli.stdout
            and str(pids[0]) in cli.stdout, "enrichd status table:\n" + cli.stdout[-800:])
    cli = subprocess.run([os.path.join(env.build, "enrichd"), "status", "-c", env.conf],
                         capture_output=True, text=True, timeout=10)
    r.check(cli.returncode == 0 and "worker 0:" in cli.stdout, "enrichd status -c CONF: %s" % cli.stderr)
    cli = subprocess.run([os.path.join(env.build, "enrichd"), "status", "--health", "--json",
                          env.status_sock], capture_output=True, text=True, timeout=10)
    r.check(cli.returncode == 0 and json.loads(cli.stdout)["status"] == "ok", "enrichd status --health --json")
    cli = subprocess.run([os.path.join(env.build, "enrichd"), "status",
                          os.path.join(env.dir, "nope.sock")],
                         capture_output=True, text=True, timeout=10)
    r.check(cli.returncode != 0 and "nope.sock" in cli.stderr, "enrichd status on a dead socket fails")


def test_endpoints_and_counters(r):
    with harness.Env(name="enr-status") as env:
        env.start_enrichd("workers = 2\n")
        env.start_nginx()

        check_health_endpoints(r, env)
        after = check_counters(r, env)
        check_metrics(r, env, after)
        pids = check_worker_table(r, env)
        check_text_views(r, env)
        check_status_cli(r, env, pids)

        # A client that connects and says nothing does not stop the page.
        s = socket.socket(socket.AF_UNIX)
        s.connect(env.status_sock)
        t0 = time.monotonic()
        st, _, _ = env.request("/healthz", method="GET")
        r.check(st == 200 and time.monotonic() - t0 < 4.5,
                "/healthz behind a silent client: %d in %.1fs" % (st, time.monotonic() - t0))
        s.close()


def test_refused_addresses(r):
    """Only loopback and the configured allow list reach the endpoints."""
    with harness.Env(name="enr-allow") as env:
        env.start_enrichd("workers = 1\n")
        env.start_nginx()
        # 127.0.0.2 is loopback but not in the allow list; a host address,
        # when the machine has one, is the remote case proper.
        others = ["127.0.0.2"]
        if non_loopback_address():
            others.append(non_loopback_address())
        for src in others:
            for path in ("/healthz", "/readyz", "/status", "/metrics"):
                st = raw_get(env.port, path, src)
                r.check(st == 403, "%s from %s is refused (got %r)" % (path, src, st))
            st = raw_get(env.port, "/v1/enrich", src, method="POST", body=b"[]")
            r.check(st == 200, "the API itself still answers %s (got %r)" % (src, st))
        st = raw_get(env.port, "/metrics", "127.0.0.1")
        r.check(st == 200, "loopback allowed (got %r)" % st)
        # The configurable allow list: a file next to nginx.conf, then reload.
        ok = allow_and_reload(env, env.port, "/status", "127.0.0.2")
        r.check(ok, "an address in enrichd-allow*.conf is allowed after reload")


def allow_and_reload(env, port, path, src):
    """Names src in an enrichd-allow*.conf next to nginx.conf, reloads
    nginx, and says whether src then gets a 200 for path (10 s at most)."""
    with open(os.path.join(env.dir, "enrichd-allow-test.conf"), "w") as f:
        f.write("allow %s;\n" % src)
    os.kill(env.nginx.pid, signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if raw_get(port, path, src) == 200:
            return True
        time.sleep(0.1)
    return False


OPS_PATHS = ("/healthz", "/readyz", "/status", "/metrics")


def ops_request(env, path, method="GET", body=None):
    """One request to the operators' server: (status, headers, body)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", env.ops_port, timeout=10)
    try:
        conn.request(method, path, body=body,
                     headers={"Content-Type": "application/json"} if body is not None else {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def accepted(env):
    """Requests the workers took, from /metrics (the API's server)."""
    st, _, text = env.request("/metrics", method="GET")
    m = metrics_values(text.decode())
    return sum(v for k, v in m.items() if k.startswith("enrichd_requests_accepted_total"))


def test_operators_server(r):
    """The site's second server: the operators' endpoints on a port of
    their own, with the same allow list, and nothing else."""
    with harness.Env(name="enr-ops") as env:
        env.start_enrichd("workers = 1\n")
        env.start_nginx()
        r.check(env.ops_port and env.ops_port != env.port,
                "the operators' server has its own port (%r, API %r)" % (env.ops_port, env.port))
        for path in OPS_PATHS:
            st, h, body = ops_request(env, path)
            r.check(st == 200 and h.get("x-request-id"),
                    "%s on the operators' server from loopback: %d" % (path, st))
        st, _, body = ops_request(env, "/metrics")
        m = metrics_values(body.decode())
        r.check(any(k.startswith("enrichd_healthy") for k in m),
                "the operators' /metrics is enrichd's exposition (%d series)" % len(m))
        ok, out = promtool_check(body)
        r.check(ok, "promtool on the operators' /metrics: %s" % out)
        st, _, body = ops_request(env, "/healthz")
        st2, _, body2 = env.request("/healthz", method="GET")
        r.check(json.loads(body).get("status") == json.loads(body2).get("status"),
                "both servers give the same health verdict")

        # Not the API: a batch is refused there, and no worker sees it.
        before = accepted(env)
        batch = records_body(5, seed=random.randrange(1 << 30))
        for method, path in (("POST", "/v1/enrich"), ("POST", "/"), ("POST", "/normalize"),
                             ("GET", "/v1/enrich"), ("GET", "/metrics/"), ("GET", "/nope")):
            st, h, body = ops_request(env, path, method, batch if method == "POST" else None)
            try:
                doc = json.loads(body)
            except ValueError:
                doc = {}
            r.check(st == 404 and "no such route" in doc.get("error", "")
                    and doc.get("request_id") == h.get("x-request-id"),
                    "%s %s on the operators' server: JSON 404 with the request id (%d %r)"
                    % (method, path, st, body[:120]))
        r.check(accepted(env) == before,
                "no worker took a request sent to the operators' server (%d -> %d)"
                % (before, accepted(env)))
        st, _, _ = env.request("/v1/enrich", batch)
        r.check(st == 200, "the API's server still enriches: %d" % st)

        # The same allow list: loopback only, then what enrichd-allow*.conf adds.
        others = ["127.0.0.2"]
        if non_loopback_address():
            others.append(non_loopback_address())
        for src in others:
            for path in OPS_PATHS:
                st = raw_get(env.ops_port, path, src)
                r.check(st == 403, "%s from %s refused by the operators' server (got %r)"
                        % (path, src, st))
        ok = allow_and_reload(env, env.ops_port, "/metrics", "127.0.0.2")
        r.check(ok, "an address in enrichd-allow*.conf reaches the operators' server after reload")
        if len(others) > 1:
            st = raw_get(env.ops_port, "/metrics", others[1])
            r.check(st == 403, "an address the allow list does not name is still refused (%r)" % st)

        # enrichd gone: the operators' server says so (503), as Prometheus
        # and rolling-restart need to see it.
        env.enrichd.send_signal(signal.SIGTERM)
        env.enrichd.wait(15)
        st, h, body = ops_request(env, "/readyz")
        r.check(st == 503 and h.get("retry-after"),
                "/readyz on the operators' server with enrichd stopped: %d %r" % (st, body[:120]))


def non_loopback_address():
    """A local non-loopback IPv4 address (no packet is sent)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.200", 9))
        a = s.getsockname()[0]
        return None if a.startswith("127.") else a
    except OSError:
        return None
    finally:
        s.close()


def raw_get(port, path, src, method="GET", body=None):
    """A request from source address src; the status code or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        req = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" % (method, path)
        if body is not None:
            req += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        s.sendall(req.encode() + b"\r\n" + (body or b""))
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
        return int(data.split(b"\r\n", 1)[0].split(b" ")[1])
    except (OSError, ValueError, IndexError):
        return None
    finally:
        s.close()


def test_close_wait_attribution(r):
    """An upstream that closes idle connections leaves the worker's side in
    CLOSE_WAIT until it is reused: the status page names the peer."""
    with FakeUpstream() as up, harness.Env(name="enr-cw") as env:
        up.control(close_after=1, close_style="silent")
        env.start_enrichd("workers = 1\nupstream_url = %s\nupstream_timeout_ms = 1000\n"
                          "request_timeout_ms = 3000\n" % up.url)
        env.start_nginx()
        st, h, _ = env.request("/v1/enrich", records_body(5, seed=random.randrange(1 << 30)))
        r.check(st == 200, "enrich via upstream: %d" % st)
        time.sleep(0.3)  # the server's FIN reaches the worker's socket
        full = get_json(env, "/status?full")
        p = [x for x in full["processes"] if x["state"] != "empty"][0]
        k = p.get("fds_by_kind", {})
        peer = "127.0.0.1:%d" % up.port
        r.check(k.get("tcp_close_wait", 0) >= 1, "CLOSE_WAIT counted: %r" % k)
        r.check(k.get("close_wait_peers") and k["close_wait_peers"][0]["peer"] == peer,
                "CLOSE_WAIT peer is the upstream %s: %r" % (peer, k.get("close_wait_peers")))
        r.check("TCP CLOSE_WAIT to %s" % peer in k.get("summary", ""), "summary %r" % k.get("summary"))
        st, _, text = env.request("/metrics", method="GET")
        m = metrics_values(text.decode())
        r.check(m.get('enrichd_worker_fds{slot="0",kind="tcp_close_wait"}', 0) >= 1,
                "metrics count the CLOSE_WAIT socket")
        ok, out = promtool_check(text)
        r.check(ok, "promtool with upstream metrics: %s" % out)


def main():
    harness.run_tests(test_endpoints_and_counters, test_refused_addresses, test_operators_server,
                      test_close_wait_attribution)


if __name__ == "__main__":
    main()
