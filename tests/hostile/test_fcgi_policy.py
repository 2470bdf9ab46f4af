#!/usr/bin/env python3
"""test_fcgi_policy.py: one FastCGI policy, one writer, one routing rule
for both server processes (src/fcgi/fcgi_conn.h, src/fcgi/fcgi_http.h), driven by a
raw client on the workers' socket and on the status socket (no nginx).

- the status socket follows the workers' connection policy: a role other
  than RESPONDER gets END_REQUEST{FCGI_UNKNOWN_ROLE} and no output, a
  FCGI_KEEP_CONN connection is closed after its one answer, a silent
  client is dropped within the status client bound;
- the one writer: "Status: N REASON", Content-Type, Content-Length, extra headers,
  the body of exactly Content-Length bytes; a HEAD gets the same headers
  and no body, on both sockets;
- the worker's own JSON errors are the engine's error body (one line);
- the one routing rule: the path (DOCUMENT_URI, else SCRIPT_NAME, else
  REQUEST_URI before '?') equals a route whole, on both sockets."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

BODY = harness.sample_body(5)
SLACK_S = 1.5  # scheduling on a loaded 2-core machine, sanitizer builds


def src_constant(path, name):
    """A bound from the C source, so the test follows the code (a missing
    one is an error, not a guess)."""
    with open(os.path.join(harness.ROOT, "src", path)) as f:
        m = re.search(r"#define %s (\d+)" % name, f.read())
    if not m:
        raise RuntimeError("%s is not defined in src/%s" % (name, path))
    return int(m.group(1)) / 1000.0


STATUS_CLIENT_S = src_constant("ops/status.c", "STATUS_CLIENT_TIMEOUT_MS")
STATUS_LINGER_S = src_constant("ops/status.c", "STATUS_LINGER_MS")


def params(uri, method="GET", body=b"", **over):
    p = {"REQUEST_METHOD": method, "DOCUMENT_URI": uri, "SCRIPT_NAME": uri,
         "REQUEST_URI": uri, "CONTENT_LENGTH": str(len(body)), "SERVER_PROTOCOL": "HTTP/1.1",
         "REMOTE_ADDR": "127.0.0.1"}
    p.update(over)
    return {k: v for k, v in p.items() if v is not None}


def ask(addr, p, body=b"", role=harness.FCGI_RESPONDER, flags=0, keep=False):
    """One request on a new connection: (recv result, the FcgiConn if keep)."""
    c = harness.FcgiConn(addr, 8)
    c.send(harness.fcgi_request_bytes(p, body, role=role, flags=flags))
    out = c.recv_until_end(1, 8)
    if keep:
        return out, c
    c.close()
    return out, None


def split(stdout):
    head, _, body = stdout.partition(b"\r\n\r\n")
    return head.split(b"\r\n"), body


def content_length(lines):
    for ln in lines:
        if ln.lower().startswith(b"content-length:"):
            return int(ln.split(b":", 1)[1])
    return None


def test_status_policy(r, env):
    out, _ = ask(env.status_sock, params("/healthz"), role=harness.FCGI_AUTHORIZER)
    r.check(out["ends"].get(1) == (0, harness.FCGI_UNKNOWN_ROLE) and out["stdout"] == b"",
            "status socket: AUTHORIZER gets END_REQUEST{UNKNOWN_ROLE}, no output (%r, %r)"
            % (out["ends"], out["stdout"][:60]))
    out, c = ask(env.status_sock, params("/readyz"), flags=harness.FCGI_KEEP_CONN, keep=True)
    t0 = time.monotonic()
    kept_closed = c.wait_eof(STATUS_LINGER_S + SLACK_S)
    kept_s = time.monotonic() - t0
    c.close()
    r.check(harness.fcgi_status(out["stdout"]) == 200 and kept_closed,
            "status socket: a KEEP_CONN connection is answered, then closed (%s after %.2f s)"
            % (kept_closed, kept_s))
    c = harness.FcgiConn(env.status_sock, 8)
    t0 = time.monotonic()
    closed = c.wait_eof(STATUS_CLIENT_S + SLACK_S)
    took = time.monotonic() - t0
    c.close()
    r.check(closed and took < STATUS_CLIENT_S + SLACK_S,
            "status socket: a silent client is closed within %.1f s (%.2f s)"
            % (STATUS_CLIENT_S + SLACK_S, took))
    out, _ = ask(env.status_sock, params("/healthz"))
    r.check(harness.fcgi_status(out["stdout"]) == 200, "status socket: serves after all of it")
    print("status socket: KEEP_CONN connection closed %s after %.2f s; silent client closed %s"
          " after %.2f s" % (kept_closed, kept_s, closed, took))


def test_writer(r, env):
    get, _ = ask(env.status_sock, params("/readyz"))
    head, _ = ask(env.status_sock, params("/readyz", method="HEAD"))
    g_lines, g_body = split(get["stdout"])
    h_lines, h_body = split(head["stdout"])
    r.check(g_lines[:1] == [b"Status: 200 OK"] and g_lines[1] == b"Content-Type: application/json"
            and b"Cache-Control: no-store" in g_lines
            and content_length(g_lines) == len(g_body) and g_body.endswith(b"\n"),
            "status GET: status line, headers, body of Content-Length bytes: %r" % get["stdout"])
    r.check(h_lines == g_lines and h_body == b"",
            "status HEAD: the GET's headers, no body: %r" % head["stdout"])
    out, _ = ask(env.status_sock, params("/readyz", method="POST"))
    lines, body = split(out["stdout"])
    r.check(lines[0] == b"Status: 405 Method Not Allowed" and body == b"GET or HEAD only\n",
            "status POST: 405, its text body: %r" % out["stdout"])

    ok, _ = ask(env.sock, params("/v1/enrich", "POST", BODY), BODY)
    lines, body = split(ok["stdout"])
    r.check(lines[:2] == [b"Status: 200 OK", b"Content-Type: application/x-ndjson"]
            and content_length(lines) == len(body) and body.count(b"\n") == 5,
            "worker POST: 200, NDJSON of Content-Length bytes (%r)" % lines)
    out, _ = ask(env.sock, params("/v1/enrich", "GET"))
    lines, body = split(out["stdout"])
    r.check(lines[0] == b"Status: 405 Method Not Allowed" and b"Allow: POST" in lines
            and body == b"method not allowed",
            "worker GET: 405, Allow: POST, the contract's body: %r" % out["stdout"])
    out, _ = ask(env.sock, params("/v1/enrich", "HEAD"))
    h_lines, h_body = split(out["stdout"])
    r.check(h_lines == lines and h_body == b"" and content_length(h_lines) == 18,
            "worker HEAD: the 405's headers, no body: %r" % out["stdout"])
    out, _ = ask(env.sock, params("/nope", "POST", BODY), BODY)
    lines, body = split(out["stdout"])
    r.check(lines[0] == b"Status: 404 Not Found" and b"Content-Type: application/json" in lines
            and body == b'{"error":"not found"}\n',
            "worker 404: the engine's error body, one line: %r" % out["stdout"])
    out, _ = ask(env.sock, params("/v1/enrich", "POST", b"[1,"), b"[1,")
    lines, body = split(out["stdout"])
    r.check(lines[0] == b"Status: 400 Bad Request" and body.startswith(b'{"error":"')
            and b'"offset":' in body and body.endswith(b"}\n") and body.count(b"\n") == 1,
            "worker 400: what and where, one line: %r" % out["stdout"])


def test_routes(r, env):
    cases = [  # (socket, params, expected status)
        (env.status_sock, params("/status"), 200),
        (env.status_sock, params("/status/"), 404),
        (env.status_sock, params("/enrichd/status"), 404),
        (env.status_sock, params("/metricsx"), 404),
        (env.status_sock, params(None, DOCUMENT_URI="", SCRIPT_NAME="/readyz"), 200),
        (env.status_sock, params(None, DOCUMENT_URI=None, SCRIPT_NAME=None,
                                 REQUEST_URI="/readyz?full"), 200),
        (env.sock, params("/", "POST", BODY), 200),
        (env.sock, params("/normalize", "POST", BODY), 200),
        (env.sock, params("/v1/enrich/", "POST", BODY), 404),
        (env.sock, params("/x/v1/enrich", "POST", BODY), 404),
        (env.sock, params("/enrich", "POST", BODY), 404),
        (env.sock, params(None, "POST", BODY, DOCUMENT_URI=None, SCRIPT_NAME=None,
                          REQUEST_URI="/normalize?a=1"), 200),
    ]
    for addr, p, want in cases:
        body = BODY if p.get("REQUEST_METHOD") == "POST" else b""
        out, _ = ask(addr, p, body)
        got = harness.fcgi_status(out["stdout"])
        where = "status" if addr == env.status_sock else "worker"
        path = {k: p.get(k) for k in ("DOCUMENT_URI", "SCRIPT_NAME", "REQUEST_URI")}
        r.check(got == want, "%s route %r: %r (want %d)" % (where, path, got, want))


def main():
    res = harness.Results()
    with harness.Env(name="fcgi-policy") as env:
        env.start_enrichd("workers = 2\n")
        pids = env.wait_workers(2)
        for fn in (test_status_policy, test_writer, test_routes):
            res.run(fn, env)
        res.check(env.worker_pids() == pids and not harness.worker_exit_reasons(env),
                  "the same workers alive, no exit (%r)" % harness.worker_exit_reasons(env))
    res.done()


if __name__ == "__main__":
    main()
