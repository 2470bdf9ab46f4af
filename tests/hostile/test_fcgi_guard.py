#!/usr/bin/env python3
"""test_fcgi_guard.py: one FastCGI peer must not kill a worker, get a cut
body served, or hold a worker past its bounds (a raw client on the unix
sockets, no front end in between).

- CONTENT_LENGTH is digits or unknown: "-1" (Caddy's chunked uploads),
  empty or absent reads the body to its end (200), bounded by
  max_body_bytes (413); a body longer or shorter than the digits say is
  a 400 that says what was received;
- a bodyless request (a 404, a 405, every status route) has its empty
  FCGI_STDIN read before the close: a peer that keeps its connection
  open (Apache's enablereuse) sees the close at once, not after the
  linger;
- percent-encoded paths are routed after decoding (Caddy passes
  REQUEST_URI raw): /%6Eormalize is /normalize, an encoded '?'
  does not start a query;
- an answer nobody reads is given up write_timeout_ms after its write
  began, progress or not, and the worker lives on."""
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

H = harness
SLACK_S = 1.5  # scheduling on a loaded 2-core machine, sanitizer builds
MAX_BODY = 1 << 20
BODY = H.sample_body(50)


def worker_constant(name):
    with open(os.path.join(H.ROOT, "src", "pool", "worker.h")) as f:
        m = re.search(r"#define %s (\d+)" % name, f.read())
    if not m:
        raise RuntimeError("%s is not defined in src/pool/worker.h" % name)
    return int(m.group(1)) / 1000.0


LINGER_S = worker_constant("ENR_WORKER_LINGER_MS")


def head(params, rid=1, flags=0):
    p = H.fcgi_pairs(params)
    return (H.fcgi_begin(rid, flags=flags) + H.fcgi_record(H.FCGI_PARAMS, p, rid)
            + H.fcgi_record(H.FCGI_PARAMS, b"", rid))


def stdin(body, size=32768, rid=1):
    out = b""
    for i in range(0, len(body), size):
        out += H.fcgi_record(H.FCGI_STDIN, body[i:i + size], rid)
    return out + H.fcgi_record(H.FCGI_STDIN, b"", rid)


def strip_time(stdout):
    return re.sub(rb'"fetched_at":\d+', b"", stdout)


def test_content_length(r, env):
    params = H.fcgi_enrich_params(BODY)
    ref, _ = H.fcgi_exchange(env.sock, head(params) + stdin(BODY))
    r.check(H.fcgi_status(ref["stdout"]) == 200, "reference batch answered 200")
    want = strip_time(ref["stdout"])
    for cl in ("-1", "", None, "12abc"):
        p = dict(params)
        if cl is None:
            del p["CONTENT_LENGTH"]
        else:
            p["CONTENT_LENGTH"] = cl
        out, _ = H.fcgi_exchange(env.sock, head(p) + stdin(BODY))
        r.check(strip_time(out["stdout"]) == want and out["ends"].get(1) == (0, 0),
                "CONTENT_LENGTH %r: the body read to its end, the same 200 (status %r)"
                % (cl, H.fcgi_status(out["stdout"])))
    big = BODY * (MAX_BODY // len(BODY) + 1)
    out, _ = H.fcgi_exchange(env.sock, head(dict(params, CONTENT_LENGTH="-1")) + stdin(big),
                             timeout=15)
    r.check(H.fcgi_status(out["stdout"]) == 413,
            "CONTENT_LENGTH -1 and %d bytes, max_body_bytes %d: 413 (%r)"
            % (len(big), MAX_BODY, H.fcgi_status(out["stdout"])))
    for name, cl in (("longer", len(BODY) + 100), ("shorter", len(BODY) - 100)):
        out, _ = H.fcgi_exchange(env.sock, head(dict(params, CONTENT_LENGTH=str(cl)))
                                 + stdin(BODY))
        text = out["stdout"].split(b"\r\n\r\n", 1)[-1]
        r.check(H.fcgi_status(out["stdout"]) == 400 and b"%d bytes received" % len(BODY) in text
                and b"CONTENT_LENGTH %d" % cl in text,
                "CONTENT_LENGTH %s than the body: 400 saying what was received (%r)"
                % (name, out["stdout"][-160:]))


def closes_at_once(r, sock, params, what, want_status):
    """A kept connection (FCGI_KEEP_CONN, the peer never closes its end):
    the answer, then the next request on another connection to the same
    single process is answered well before the linger would have ended
    (our half-close alone shows nothing: the process lingers after it)."""
    c = H.FcgiConn(sock, 5)
    try:
        c.send(head(params, flags=H.FCGI_KEEP_CONN) + H.fcgi_record(H.FCGI_STDIN, b""))
        out = c.recv_until_end(1, 5)
        t0 = time.monotonic()
        nxt, _ = H.fcgi_exchange(sock, head(params) + H.fcgi_record(H.FCGI_STDIN, b""))
        took = time.monotonic() - t0
    finally:
        c.close()
    r.check(H.fcgi_status(out["stdout"]) == want_status and H.fcgi_status(nxt["stdout"])
            == want_status, "%s: answered %d (%r, %r)" % (what, want_status, H.fcgi_status(
                out["stdout"]), H.fcgi_status(nxt["stdout"])))
    r.check(took < LINGER_S / 2,
            "%s: the next request answered %.3f s after the first while its peer holds the "
            "connection open (linger %.1f s: the empty FCGI_STDIN was read)"
            % (what, took, LINGER_S))


def test_bodyless_close(r, env):
    get = {"REQUEST_METHOD": "GET", "DOCUMENT_URI": "/healthz", "SCRIPT_NAME": "/healthz",
           "REQUEST_URI": "/healthz", "SERVER_PROTOCOL": "HTTP/1.1"}
    for route in ("/healthz", "/readyz", "/status", "/metrics", "/nope"):
        p = dict(get, DOCUMENT_URI=route, SCRIPT_NAME=route, REQUEST_URI=route)
        closes_at_once(r, env.status_sock, p, "status %s" % route, 404 if route == "/nope"
                       else 200)
    p = dict(get, DOCUMENT_URI="/nope", SCRIPT_NAME="/nope", REQUEST_URI="/nope")
    closes_at_once(r, env.sock, p, "worker 404", 404)
    p = dict(get, DOCUMENT_URI="/v1/enrich", SCRIPT_NAME="/v1/enrich", REQUEST_URI="/v1/enrich")
    closes_at_once(r, env.sock, p, "worker 405", 405)


def test_percent_paths(r, env):
    for raw, want in (("/%6Eormalize", 200), ("/v1%2Fenrich", 200), ("/v1/%65nrich", 200),
                      ("/normalize%3Fx", 404), ("/%2", 404), ("/%zz", 404), ("/normalize%00", 404)):
        params = {k: v for k, v in H.fcgi_enrich_params(BODY).items()
                  if k not in ("DOCUMENT_URI", "SCRIPT_NAME")}
        params["REQUEST_URI"] = raw + "?a=1"
        out, _ = H.fcgi_exchange(env.sock, head(params) + stdin(BODY))
        r.check(H.fcgi_status(out["stdout"]) == want,
                "REQUEST_URI %s: %d (%r)" % (raw, want, H.fcgi_status(out["stdout"])))


WRITE_MS = 1500  # write_timeout_ms of the write suite; the master's kill comes at twice it


def big_answer_body():
    """About 7.5 MB of answer from 0.7 MB (test_slow_reader.py's batch):
    far more than the socket's buffer holds."""
    import json
    return json.dumps([{"provider": "yt", "id": "big%03d" % i, "title": "\ufdfa" * 9400}
                       for i in range(24)], ensure_ascii=False).encode()


def test_write_deadline(r):
    """A peer that reads nothing of the answer: the socket buffer fills
    with the answer's first bytes, every write after makes no progress at
    all, and the worker gives up write_timeout_ms after the write began
    (not at the master's kill, twice that), resets the connection and
    serves the next request."""
    body = big_answer_body()
    req = head(H.fcgi_enrich_params(body)) + stdin(body)
    with H.Env(name="fcgi-write") as env:
        env.start_enrichd("workers = 1\nwrite_timeout_ms = %d\nrss_soft_mb = 0\n"
                          "rss_hard_mb = 0\n" % WRITE_MS)
        pids = env.wait_workers(1)
        t0 = time.monotonic()
        ref, _ = H.fcgi_exchange(env.sock, req, timeout=20)
        work = time.monotonic() - t0
        r.check(H.fcgi_status(ref["stdout"]) == 200 and len(ref["stdout"]) > 4 << 20,
                "the big answer, read: 200, %d bytes in %.2f s" % (len(ref["stdout"]), work))
        w = WRITE_MS / 1000.0
        for name, drip in (("reads nothing", False), ("reads 2 KB every 50 ms", True)):
            stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect(env.sock)
            stop = []

            def drain(sk=stalled):
                sk.settimeout(0.05)
                while not stop:
                    try:
                        if not sk.recv(2048):
                            return
                    except socket.timeout:
                        pass
                    except OSError:
                        return
                    time.sleep(0.05)
            import threading
            th = threading.Thread(target=drain, daemon=True)
            try:
                stalled.sendall(req)
                if drip:
                    th.start()
                t0 = time.monotonic()
                nxt, _ = H.fcgi_exchange(env.sock, H.fcgi_request_bytes(
                    H.fcgi_enrich_params(BODY), BODY), timeout=4 * w + 10)
                took = time.monotonic() - t0
            finally:
                stop.append(1)
                if drip:
                    th.join(2)
                stalled.close()
            r.check(H.fcgi_status(nxt["stdout"]) == 200,
                    "%s: the next request is answered (%r)" % (name, H.fcgi_status(nxt["stdout"])))
            r.check(w <= took < w + work + SLACK_S,
                    "%s: the answer given up %.2f s after it was sent (write_timeout_ms %.1f s, "
                    "the work %.2f s; the master's kill would come at %.1f s)"
                    % (name, took, w, work, 2 * w))
            print("write deadline, peer %s: given up after %.2f s" % (name, took))
        r.check(env.worker_pids() == pids and not H.worker_exit_reasons(env),
                "the same worker lives on (%r -> %r, exits %r)"
                % (pids, env.worker_pids(), H.worker_exit_reasons(env)))
        logged = env.wait_log("answer write failed: connection reset", count=2, timeout=5)
        r.check(len(logged) == 2, "each aborted write is logged (%r)"
                % [e.get("error") for e in logged])


def main():
    res = H.Results()
    with H.Env(name="fcgi-guard") as env:
        env.start_enrichd("workers = 1\nmax_body_bytes = %d\nrss_soft_mb = 0\nrss_hard_mb = 0\n"
                          % MAX_BODY)
        pids = env.wait_workers(1)
        for fn in (test_content_length, test_bodyless_close, test_percent_paths):
            res.run(fn, env)
        out, _ = H.fcgi_exchange(env.sock, H.fcgi_request_bytes(H.fcgi_enrich_params(BODY), BODY))
        res.check(H.fcgi_status(out["stdout"]) == 200 and env.worker_pids() == pids,
                  "after all of it: the same worker answers a batch")
        res.check(not H.worker_exit_reasons(env), "no worker exit (%r)"
                  % H.worker_exit_reasons(env))
    res.run(test_write_deadline)
    res.done()


if __name__ == "__main__":
    main()
