#!/usr/bin/env python3
"""test_frontends.py: enrichd behind Debian 12's Apache 2.4
(mod_proxy_fcgi, conf/apache/enrichd.conf) and lighttpd 1.4 (mod_fastcgi,
conf/lighttpd/enrichd.conf), each started with its site as shipped, in
front of one pool, with nginx (nginx/enrichd.conf) as the control:

- the conformance vectors, once through each front end (/v1/enrich);
  / , /normalize and the percent-encoded /%6Eormalize answer the same;
- a 400 KB and a ~3.9 MB batch, and the 400 KB one sent chunked: the
  same bytes as nginx's answer (fetched_at aside);
- a slow upload (the batch in parts over ~3.5 s): nginx and lighttpd take
  the whole body first (200, the same bytes, no worker busy while it
  arrives, the chunked one too through lighttpd); Apache streams it to
  the worker, which holds the request while it arrives and answers it
  whole, the upload being within body_timeout_ms, and a client at a
  normal pace gets its 200;
- /healthz /readyz /status /metrics: 200 and the same documents as
  through nginx (`promtool check metrics` on /metrics), and 403 from
  127.0.0.2, a loopback address the sites do not allow;
- a client that reads a 7.7 MB answer at 160 KB/s: nginx and lighttpd
  take the whole answer at once (the worker is free in well under a
  second); Apache passes it on at the client's pace, and the worker gives
  up by itself at write_timeout_ms, not at twice that or by the master's
  kill, and lives on;
- 8 clients at once, each on one kept-alive connection to the front end,
  polling /healthz (and the workers' bodyless 405): 40 answers each in
  well under the time a 500 ms close linger per request would take, and
  nginx's /healthz answers in time meanwhile;
- the HTTP rules: the worker's 405, the front end's 413 above
  max_body_bytes and 404 off the routes, the request id through Apache;
- the lighttpd site loads after Debian's own lighttpd.conf.
"""
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frontends  # noqa: E402
import harness  # noqa: E402

H = harness
VECTORS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vectors.py")
REQUEST_TIMEOUT_MS = 2000  # set below; the worker's body deadline is half of it
SLACK_S = 1.0  # scheduling on a loaded 2-core machine
# The slow reader's bound on the worker: this many times the batch's time
# through nginx in the same run, plus SLACK_S (plus write_timeout_ms for
# Apache); and at most this much longer reading, for /status samples late
# in coming on a loaded machine.
ENGINE_X, READ_MORE_S = 1.5, 8.0
MAX_BODY = 4194304  # max_body_bytes (the default), the front ends' limit too
WORKERS = 3
WRITE_TIMEOUT_MS = 2000  # set below
# The slow reader's batch: short records, long answers (7.7 MB of NDJSON
# from 3 MB), so max_records is raised to take it.
READER_RECORDS = 20000
READER_CHUNK, READER_PAUSE_S = 8192, 0.05  # 160 KB/s: the answer would take 47 s
DRIP_PARTS, DRIP_PAUSE_S = 15, 0.25  # ~3.5 s: past request_timeout_ms, within body_timeout_ms
POLL_CLIENTS, POLL_EACH = 8, 5
# 40 requests through one status process: with a 500 ms linger on each
# close they would take up to 20 s (3.7 s with Apache's enablereuse=on,
# each request up to 3.5 s); answered as they should, ~0.05 s.
POLL_WALL_S = 2.0


def huge_body(big):
    """~3.9 MB: the 400 KB batch's records again and again, under MAX_BODY."""
    recs = json.loads(big)
    out, size = [], 2
    for i in range(100 * len(recs)):
        out.append(recs[i % len(recs)])
        size += len(json.dumps(out[-1], ensure_ascii=False).encode()) + 2
        if size >= 3900000:
            break
    data = json.dumps(out, ensure_ascii=False).encode()
    assert 3900000 <= len(data) < MAX_BODY, len(data)
    return data


def same_answer(r, what, got, want):
    st, h, body = got
    wst, wh, wbody = want
    r.check(st == wst == 200 and h.get("content-type") == wh.get("content-type")
            and H.zero_fetched_at(body) == H.zero_fetched_at(wbody),
            "%s: the same answer as nginx's (%d vs %d, %s vs %s, %d vs %d bytes)"
            % (what, st, wst, h.get("content-type"), wh.get("content-type"), len(body),
               len(wbody)))


def post_parts(port, body, parts, pause, chunked=False, path="/v1/enrich", timeout=20):
    """POSTs body in `parts` writes `pause` s apart (chunked: as chunks).
    Returns ((status or 0, {lower header: value}, body), seconds, the
    monotonic time of the last part)."""
    sent = {}

    def gen():
        step = -(-len(body) // parts)
        for i in range(0, len(body), step):
            if i:
                time.sleep(pause)
            if i + step >= len(body):
                sent["last"] = time.monotonic()
            yield body[i:i + step]

    headers = {"Content-Type": "application/json"}
    if not chunked:
        headers["Content-Length"] = str(len(body))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    try:
        conn.request("POST", path, body=gen(), headers=headers, encode_chunked=chunked)
        resp = conn.getresponse()
        got = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    except (OSError, http.client.HTTPException) as e:
        got = 0, {}, repr(e).encode()
    finally:
        conn.close()
    return got, time.monotonic() - t0, sent.get("last", time.monotonic())


class BusySampler:
    """'active processes' of /status (through nginx) every 50 ms: the
    workers busy with a request, [(t0, t1, n)]."""

    def __init__(self, env):
        self.env, self.samples, self.halt = env, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for _ in range(400):  # 20 s at most
            if self.halt.is_set():
                return
            t0 = time.monotonic()
            try:
                st, _, body = self.env.request("/status", method="GET", timeout=5)
                n = json.loads(body)["active processes"] if st == 200 else None
            except (OSError, ValueError, KeyError):
                n = None
            self.samples.append((t0, time.monotonic(), n))
            time.sleep(0.05)

    def stop(self):
        self.halt.set()
        self.thread.join(10)
        return self.samples

    def busy_between(self, a, b):
        """The samples taken wholly inside [a, b]: their counts."""
        return [n for t0, t1, n in self.samples if t0 >= a and t1 <= b]


def test_vectors(r, env, fe):
    p = subprocess.run([sys.executable, VECTORS, "--url",
                        "http://127.0.0.1:%d/v1/enrich" % fe.port, "--jobs", "6"],
                       capture_output=True, text=True, timeout=240)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    r.check(p.returncode == 0 and last.endswith(" 0 failed"),
            "%s: the vectors: %s\n%s" % (fe.name, last, p.stdout[-3000:]))
    body = b'[{"provider":"yt","id":" AbC-123 ","title":"Hello\\u3000World"}]'
    want = env.request("/v1/enrich", body=body)
    for path in ("/", "/normalize", "/%6Eormalize"):
        same_answer(r, "%s: POST %s" % (fe.name, path), fe.request(path, body=body), want)


def test_large(r, env, fe, big, huge):
    for name, body in (("400 KB", big), ("%.1f MB" % (len(huge) / 1e6), huge)):
        same_answer(r, "%s: a %s batch" % (fe.name, name), fe.request("/v1/enrich", body=body,
                                                                       timeout=30),
                    env.request("/v1/enrich", body=body, timeout=30))
    want = env.request("/v1/enrich", body=big)
    got, _, _ = post_parts(fe.port, big, 7, 0, chunked=True)
    same_answer(r, "%s: the 400 KB batch chunked" % fe.name, got, want)


def test_slow(r, env, fe, big, buffers):
    """buffers: the front end takes the whole body before it connects."""
    want = env.request("/v1/enrich", body=big)
    variants = [False, True] if fe.name == "lighttpd" else [False]
    for chunked in variants:
        what = "%s: a %sslow upload (%d parts, %.2f s apart)" % (
            fe.name, "chunked " if chunked else "", DRIP_PARTS, DRIP_PAUSE_S)
        cuts = len(env.log_events("request body read failed"))
        sampler = BusySampler(env)
        t0 = time.monotonic()
        got, took, last = post_parts(fe.port, big, DRIP_PARTS, DRIP_PAUSE_S, chunked=chunked)
        sampler.stop()
        st = got[0]
        drip = sampler.busy_between(t0 + 0.1, last - 0.05)
        r.check(len([n for n in drip if n is not None]) >= 10,
                "%s: /status sampled while the body arrives (%d samples)" % (what, len(drip)))
        if buffers:
            same_answer(r, what, got, want)
            r.check(all(n == 0 for n in drip),
                    "%s: no worker busy while the body arrives (%r)" % (what, drip))
        else:
            # Apache streams: a worker holds the request from the first
            # bytes; a client still sending within body_timeout_ms (5 s,
            # the default) gets its answer, not a cut.
            r.check(any(n for n in drip), "%s: a worker holds it while it arrives (%r)"
                    % (what, drip))
            same_answer(r, "%s: answered whole within body_timeout_ms" % what, got, want)
            r.check(len(env.log_events("request body read failed")) == cuts,
                    "%s: no body read failed" % what)
            got, _, _ = post_parts(fe.port, big, 4, 0.05)
            same_answer(r, "%s: an upload at a normal pace (4 parts, 50 ms apart)" % fe.name,
                        got, want)
        print("%s: %d in %.2f s, busy while arriving %s" % (what, st, took, sorted(set(drip))))


def reader_body():
    recs = [{"provider": ("yt", "vm", "dm")[i % 3], "id": "r%05d" % i, "title": "t" * 100}
            for i in range(READER_RECORDS)]
    return json.dumps(recs).encode()


def timed_nginx(env, body):
    """The batch through nginx, which takes the whole answer at once:
    ((status, headers, body), seconds), the engine's time on it in this
    run, under this load, plus a fast client's read."""
    t0 = time.monotonic()
    got = env.request("/v1/enrich", body=body, timeout=30)
    return got, time.monotonic() - t0


def test_slow_reader(r, env, fe, body, buffers):
    """buffers: the front end takes the whole answer at once."""
    (st, _, whole), engine_s = timed_nginx(env, body)
    r.check(st == 200 and len(whole) > 7000000, "the slow reader's batch: nginx answers %d, "
            "%d bytes" % (st, len(whole)))
    pids, exits = env.worker_pids(), len(H.worker_exit_reasons(env))
    failed = len(env.log_events("answer write failed: connection reset"))
    # The worker must be free by `bound`, which counts the engine's time on
    # the batch as nginx's answer measured it just before (0.2 s on a quiet
    # machine, 0.8 s in CI beside the other stages): a buffering front end
    # frees the worker once the answer is computed and written, Apache at
    # its write deadline after that, well before twice write_timeout_ms.
    # The client reads on for 1.5 s more and until the sampler has seen
    # the pool 5 times after `bound`, so a worker still busy is seen busy.
    bound = ENGINE_X * engine_s + (SLACK_S if buffers else WRITE_TIMEOUT_MS / 1000.0 +
                                   SLACK_S / 2)
    read_for = bound + 1.5
    sampler = BusySampler(env)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small receive buffer (set before connect, so the kernel does not
    # grow it): what the client has not read stays in the path.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, READER_CHUNK)
    s.settimeout(1)
    got, data = 0, []
    try:
        s.connect(("127.0.0.1", fe.port))
        t0 = time.monotonic()
        s.sendall(b"POST /v1/enrich HTTP/1.1\r\nHost: enrichd\r\nContent-Type: application/json"
                  b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        for _ in range(int((read_for + READ_MORE_S) / READER_PAUSE_S)):
            now = time.monotonic() - t0
            if now > read_for + READ_MORE_S or (now > read_for and len(
                    [1 for a, _, _ in sampler.samples if a - t0 >= bound]) >= 5):
                break
            try:
                d = s.recv(READER_CHUNK)
            except socket.timeout:
                d = None
            if d == b"":
                break
            got += len(d or b"")
            data.append(d or b"")
            time.sleep(READER_PAUSE_S)
        sampler.stop()
        # Then the rest at once: what the front end still passes on.
        s.settimeout(2)
        for _ in range(2000):
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            data.append(d)
    finally:
        s.close()
        sampler.stop()
    busy = [a - t0 for a, _, n in sampler.samples if n]
    late = [n for a, _, n in sampler.samples if a - t0 >= bound]
    what = "%s: a client reading the %.1f MB answer at %d KB/s" % (
        fe.name, len(whole) / 1e6, READER_CHUNK / READER_PAUSE_S / 1000)
    r.check(got < len(whole), "%s: still reading when it stops (%d of %d bytes)"
            % (what, got, len(whole)))
    # A buffering front end frees the worker in tens of ms, too soon for
    # the sampler to see it busy every time.
    r.check(len(late) >= 5 and all(n == 0 for n in late),
            "%s: the worker is free %.2f s in (%s; %.1f x the batch's %.2f s through nginx; "
            "busy until %s; %d samples after)"
            % (what, bound, "it takes the whole answer" if buffers
               else "its own write deadline, write_timeout_ms %d" % WRITE_TIMEOUT_MS,
               ENGINE_X, engine_s, "%.2f s" % max(busy) if busy else "never seen busy",
               len(late)))
    r.check(env.worker_pids() == pids and len(H.worker_exit_reasons(env)) == exits,
            "%s: the same workers live on (%r -> %r, exits %r)"
            % (what, pids, env.worker_pids(), H.worker_exit_reasons(env)[exits:]))
    # A worker that gave up on the answer (Apache) leaves the client a cut
    # one, never a whole-looking one; one that wrote it all (the front end
    # took it), the whole answer.
    st, body = parse_response(b"".join(data))
    gave_up = len(env.log_events("answer write failed: connection reset")) > failed
    if gave_up:
        r.check(not buffers and body is None,
                "%s: the worker gave up on the answer: the client gets it cut (%r, %d bytes)"
                % (what, st, len(body or b"")))
    else:
        r.check(st == 200 and H.zero_fetched_at(body or b"") == H.zero_fetched_at(whole),
                "%s: then read at once, the whole answer (%r, %d of %d bytes)"
                % (what, st, len(body or b""), len(whole)))
    print("%s: busy until %s s (bound %.2f s; nginx %.2f s), client read %d bytes, the worker %s"
          % (what, "%.2f" % max(busy) if busy else "-", bound, engine_s, got,
        "gave up" if gave_up else "wrote it all"))


def parse_response(raw):
    """(status, body) of one HTTP/1.1 response in raw, body None when it
    is cut short (fewer bytes than its Content-Length, or no last chunk)."""
    class Raw:
        def makefile(self, *a, **k):
            return io.BytesIO(raw)
    resp = http.client.HTTPResponse(Raw())
    try:
        resp.begin()
    except (http.client.HTTPException, OSError):
        return None, None
    try:
        return resp.status, resp.read()
    except http.client.IncompleteRead:
        return resp.status, None


def test_status(r, env, fe):
    for path in ("/healthz", "/readyz", "/status", "/metrics"):
        st, h, body = fe.request(path, method="GET")
        nst, nh, nbody = env.request(path, method="GET")
        r.check(st == nst == 200 and h.get("content-type") == nh.get("content-type"),
                "%s: GET %s: %d %s (nginx: %d %s)" % (fe.name, path, st, h.get("content-type"),
                                                     nst, nh.get("content-type")))
        if path == "/metrics":
            ok, out = H.promtool_check(body)
            r.check(ok, "%s: promtool check metrics: %s" % (fe.name, out[:500]))
            def names(text):
                return set(l.split("{")[0].split(" ")[0] for l in text.decode().splitlines()
                           if l and not l.startswith("#"))
            r.check(names(body) == names(nbody), "%s: the same metrics as through nginx (%r)"
                    % (fe.name, names(body) ^ names(nbody)))
        elif st == 200:
            doc, ndoc = json.loads(body), json.loads(nbody)
            r.check(set(doc) == set(ndoc), "%s: GET %s: the same fields as through nginx (%r)"
                    % (fe.name, path, set(doc) ^ set(ndoc)))
            if path == "/healthz":
                r.check(doc.get("status") == "ok", "%s: /healthz ok (%r)" % (fe.name, doc))


def test_operators_only(r, env, fe):
    """From 127.0.0.2 (loopback, but not an allowed address) the status
    endpoints are refused; the API is not."""
    for path, method, want in (("/healthz", "GET", 403), ("/metrics", "GET", 403),
                               ("/v1/enrich", "POST", 200)):
        conn = http.client.HTTPConnection("127.0.0.1", fe.port, timeout=10,
                                          source_address=("127.0.0.2", 0))
        try:
            conn.request(method, path, body=b"[]" if method == "POST" else None)
            resp = conn.getresponse()
            resp.read()
            st = resp.status
        finally:
            conn.close()
        r.check(st == want, "%s: %s %s from 127.0.0.2: %d (%d)" % (fe.name, method, path, want, st))


def poll_at_once(port, path, method):
    """POLL_CLIENTS threads, each POLL_EACH requests on one connection
    (the front end on port keeps it alive); (statuses, wall seconds,
    slowest)."""
    out, lock = [], threading.Lock()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for _ in range(POLL_EACH):
                t0 = time.monotonic()
                try:
                    conn.request(method, path, body=b"[]" if method == "POST" else None)
                    resp = conn.getresponse()
                    resp.read()
                    st = resp.status
                except (OSError, http.client.HTTPException):
                    st = 0
                    conn.close()
                with lock:
                    out.append((st, time.monotonic() - t0))
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(POLL_CLIENTS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return [s for s, _ in out], time.monotonic() - t0, max([d for _, d in out] or [0])


def test_polling(r, env, fe):
    for path, method, want in (("/healthz", "GET", 200), ("/v1/enrich", "GET", 405)):
        # The baseline: the same polling of nginx's own 404 (no enrichd
        # part, so a slow status process or worker is not in it) just
        # before: what this moment's load makes of an HTTP server's
        # answers; two servers on the front end's path, so twice that.  A
        # 500 ms linger on each close still takes seconds more.
        base_sts, base_wall, base_slowest = poll_at_once(env.port, "/no-such-route", "GET")
        r.check(all(s == 404 for s in base_sts), "nginx's own 404, polled: all 404 (%r)"
                % sorted(set(base_sts)))
        base_wall, base_slowest = 2 * base_wall, 2 * base_slowest
        control = []
        halt = threading.Event()

        def nginx_healthz():
            for _ in range(100):
                if halt.is_set():
                    return
                t0 = time.monotonic()
                try:
                    st = env.request("/healthz", method="GET", timeout=10)[0]
                except (OSError, http.client.HTTPException):
                    st = 0
                control.append((st, time.monotonic() - t0))
                time.sleep(0.05)

        th = threading.Thread(target=nginx_healthz)
        th.start()
        sts, wall, slowest = poll_at_once(fe.port, path, method)
        halt.set()
        th.join(15)
        what = "%s: %d clients x %d %s %s" % (fe.name, POLL_CLIENTS, POLL_EACH, method, path)
        r.check(len(sts) == POLL_CLIENTS * POLL_EACH and all(s == want for s in sts),
                "%s: all %d (%r)" % (what, want, sorted(set(sts))))
        r.check(wall < POLL_WALL_S + base_wall and slowest < SLACK_S + base_slowest,
                "%s: done in %.2f s (< %.1f + %.2f), slowest %.2f s (< %.1f + %.2f)"
                % (what, wall, POLL_WALL_S, base_wall, slowest, SLACK_S, base_slowest))
        worst = max([d for _, d in control] or [0])
        r.check(control and all(s == 200 for s, _ in control) and worst < SLACK_S + base_slowest,
                "%s: nginx's /healthz meanwhile: %d answers, slowest %.2f s (< %.1f + %.2f)"
                % (what, len(control), worst, SLACK_S, base_slowest))
        print("%s: %.2f s, slowest %.3f s; nginx /healthz slowest %.3f s; twice nginx's "
              "own 404 polled %.2f s, slowest %.3f s"
              % (what, wall, slowest, worst, base_wall, base_slowest))


def test_http_rules(r, env, fe):
    st, _, body = fe.request("/v1/enrich", method="GET")
    r.check(st == 405 and body == b"method not allowed", "%s: GET gives the worker's 405: %d %r"
            % (fe.name, st, body[:100]))
    st, _, _ = fe.request("/v1/enrich", body=b"[" + b"x" * (MAX_BODY + 1000) + b"]")
    r.check(st == 413, "%s: a body over max_body_bytes: 413 (%d)" % (fe.name, st))
    for path in ("/nope", "/v1/enrich/", "/v1"):
        st, _, _ = fe.request(path, body=b"[]")
        r.check(st == 404, "%s: POST %s: 404 (%d)" % (fe.name, path, st))
    if fe.name == "apache":
        st, h, _ = fe.request("/v1/enrich", body=b"[]", headers={"X-Request-ID": "fe-req-7"})
        r.check(st == 200 and h.get("x-request-id") == "fe-req-7",
                "apache: the request id echoed (%d %r)" % (st, h.get("x-request-id")))
        st, h, _ = fe.request("/v1/enrich", body=b"[]")
        r.check(st == 200 and len(h.get("x-request-id", "")) >= 16,
                "apache: its own request id when none is sent (%r)" % h.get("x-request-id"))


def test_lighttpd_stock(r, env, fe):
    """The site as Debian would load it: included after the package's own
    lighttpd.conf (its modules, conf-enabled/), `lighttpd -tt` passes."""
    stock = "/etc/lighttpd/lighttpd.conf"
    wrap = os.path.join(fe.dir, "stock-check.conf")
    with open(wrap, "w") as f:
        f.write('include "%s"\ninclude "%s"\n' % (stock, os.path.join(fe.dir, "enrichd-site.conf")))
    p = subprocess.run([frontends.LIGHTTPD_BIN, "-tt", "-f", wrap], capture_output=True, text=True,
                       timeout=30)
    r.check(p.returncode == 0, "lighttpd: the site loads after Debian's %s: rc %d %s"
            % (stock, p.returncode, (p.stdout + p.stderr)[-500:]))


def main():
    r = H.Results()
    big = H.bench_body()
    huge = huge_body(big)
    reader = reader_body()
    with H.Env(name="frontends") as env:
        env.start_enrichd("workers = %d\nrequest_timeout_ms = %d\nmax_body_bytes = %d\n"
                          "write_timeout_ms = %d\nmax_records = %d\n"
                          % (WORKERS, REQUEST_TIMEOUT_MS, MAX_BODY, WRITE_TIMEOUT_MS,
                             READER_RECORDS))
        env.start_nginx()
        fronts = [(frontends.start_apache(env), False), (frontends.start_lighttpd(env), True)]
        control = frontends.FrontEnd("nginx", env.nginx, env.port, env.dir)
        for fe, buffers in fronts:
            for fn in (test_vectors, test_status, test_operators_only, test_polling,
                       test_http_rules):
                r.run(fn, env, fe)
            r.run(test_large, env, fe, big, huge)
            r.run(test_slow, env, fe, big, buffers)
            r.run(test_slow_reader, env, fe, reader, buffers)
        r.run(test_lighttpd_stock, env, fronts[1][0])
        r.run(test_operators_only, env, control)
        r.run(test_slow, env, control, big, True)
        r.run(test_slow_reader, env, control, reader, True)
        for fe, _ in fronts:
            log = fe.error_log()
            if r.failed:
                print("%s's error log:\n%s" % (fe.name, log[-1500:]))
        r.check(env.worker_pids() and not H.worker_exit_reasons(env),
                "no worker exited through it all (%r)" % H.worker_exit_reasons(env))
    r.done()


if __name__ == "__main__":
    main()
