#!/usr/bin/env python3
"""test_pool_http.py: the worker's request path through the real nginx
and nginx/enrichd.conf: routes, methods, body limits, the request id in
both directions, Content-Type ignored, the JSON access log, the socket's
permissions; and a TCP listen address (127.0.0.1:PORT) spoken to
directly in FastCGI."""
import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BODY = harness.sample_body(30)


def test_routes(r):
    # Test-hooks build: X-Test-Sleep-Ms makes a request slow enough to be
    # logged with its id (slow_request_ms), which shows what the worker saw.
    with harness.Env(build=harness.hooks_build_dir(), name="pool-http") as env:
        env.start_enrichd("workers = 2\nmax_body_bytes = 4096\nslow_request_ms = 1\n")
        env.start_nginx()
        small = harness.sample_body(3)
        outs = []
        for path in ("/", "/v1/enrich", "/normalize"):
            st, hdr, body = env.request(path, small, headers={"Content-Type": "text/plain"})
            outs.append(body)
            r.check(st == 200 and hdr.get("content-type") == "application/x-ndjson",
                    "POST %s: %d %r" % (path, st, hdr.get("content-type")))
        r.check(outs[0].count(b"\n") == 3, "3 NDJSON lines")
        st, hdr, body = env.request("/v1/enrich", b"", method="GET")
        r.check(st == 405 and body == b"method not allowed", "GET: 405 %r" % body)
        st, hdr, body = env.request("/v1/enrich", b"[]", method="PUT")
        r.check(st == 405, "PUT: 405")
        st, _, _ = env.request("/elsewhere", b"[]")
        r.check(st == 404, "unknown path: 404")
        st, hdr, body = env.request("/v1/enrich", BODY)
        r.check(st == 413 and hdr.get("content-type") == "application/json"
                and "error" in json.loads(body), "over max_body_bytes: 413 JSON %r" % body[:80])
        st, hdr, body = env.request("/v1/enrich", b"[1,")
        r.check(st == 400 and hdr.get("content-type") == "application/json",
                "bad JSON: 400 JSON %r" % body[:80])
        st, hdr, _ = env.request("/v1/enrich", small, headers={"X-Request-ID": "abc-123",
                                                                "X-Test-Sleep-Ms": "5"})
        r.check(hdr.get("x-request-id") == "abc-123", "X-Request-ID echoed: %r" % hdr)
        ev = env.wait_log("slow request", pred=lambda e: e.get("req_id") == "abc-123")
        r.check(ev, "the worker saw the request id (slow-request log)")
        st, hdr, _ = env.request("/v1/enrich", small, headers={"X-Test-Sleep-Ms": "5"})
        rid = hdr.get("x-request-id", "")
        r.check(len(rid) == 32, "nginx's $request_id when the client sends none: %r" % rid)
        env.wait_log("slow request", pred=lambda e: e.get("req_id") == rid)
        # nginx writes the access log line after the response went out.
        def logged():
            for line in open(env.access_log):
                d = json.loads(line)
                if d["request_id"] == rid:
                    return d
            return None
        last = harness.wait_for(logged, 5, what="access log line of %s" % rid)
        r.check(last["request_id"] == rid and "upstream_response_time" in last
                and last["status"] == 200, "JSON access log with upstream timings: %r" % last)
        if harness.IS_ROOT:
            stt = os.stat(env.sock)
            r.check(stat.S_IMODE(stt.st_mode) == 0o660 and stt.st_gid == 33,
                    "socket 0660 group www-data: %o %d" % (stat.S_IMODE(stt.st_mode), stt.st_gid))
        # Routed to the status process (workers answer 404 for it), and the
        # served pool is healthy: the master's verdict within two ticks.
        def healthz_ok():
            st, _, body = env.request("/healthz", method="GET")
            return (st, body) if st == 200 else None

        hz = harness.poll(healthz_ok, 2.5)
        r.check(hz and json.loads(hz[1]).get("status") == "ok",
                "/healthz routed to the status process, ok: %r" % (hz,))


def test_tcp_listen(r):
    with harness.Env(name="pool-tcp") as env:
        port = harness.free_port()
        env.start_enrichd("listen = 127.0.0.1:%d\nworkers = 1\n" % port)
        out = harness.fcgi_request(("127.0.0.1", port),
                                   {"REQUEST_METHOD": "POST", "DOCUMENT_URI": "/v1/enrich",
                                    "CONTENT_LENGTH": str(len(BODY))}, BODY)
        head, _, body = out.partition(b"\r\n\r\n")
        r.check(b"Status: 200" in head and body.count(b"\n") == 30,
                "FastCGI over 127.0.0.1 TCP: %r" % head)


if __name__ == "__main__":
    harness.run_tests(test_routes, test_tcp_listen)
