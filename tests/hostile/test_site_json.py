#!/usr/bin/env python3
"""test_site_json.py: every body the nginx sites write themselves (their
error locations, the operators' server's 404) is one JSON object whatever
the client's headers hold.

The sites paste the request id into those bodies; a client's
X-Request-ID is kept only when it is a well-formed id
(snippets/enrichd-http.conf), else nginx's own is used.  Each error
location of nginx/enrichd.conf (both servers) and of
nginx/enrichd-cluster.conf is asked with forged ids: one that closes the
string and opens a second object, a trailing backslash, control bytes,
spaces and markup, and 10 KB of letters (past nginx's header buffer).
Each answer must parse as exactly one JSON object whose request_id is
the answer's X-Request-ID header: the client's id when well-formed,
nginx's 32 hex digits otherwise.
"""
import json
import os
import re
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402

GOOD = "req-42.a_b:c/d+e=f"
# 7 KB fits nginx's header buffer (8 KB) and reaches every location;
# 10 KB does not: nginx refuses the request itself (its 494, a JSON 400).
FORGED = ['"}{"error":"forged', "a\\", "\x01\x1b[31m\x7f", "two words", "<b>x</b>",
          "x" * 7168, "x" * 10240]
HEADER_BUFFER = 8192
NGINX_ID = re.compile(r"^[0-9a-f]{32}$")
CLUSTER_CONF = os.path.join(harness.ROOT, "nginx", "enrichd-cluster.conf")


def raw_request(port, method, path, rid, extra=b"", body=b"", src="127.0.0.1", timeout=10):
    """One HTTP/1.1 request as bytes (no client library: it would refuse
    the control bytes).  Returns (status, {lower header: value}, body),
    the body read by Content-Length (nginx may linger on an unread
    upload after a 413)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        req = (b"%s %s HTTP/1.1\r\nX-Request-ID: " % (method.encode(), path.encode())
               + rid.encode("latin-1") + b"\r\nHost: enrichd\r\nConnection: close\r\n"
               + extra + b"\r\n" + body)
        s.sendall(req)
        data = b""
        while b"\r\n\r\n" not in data:
            c = s.recv(65536)
            if not c:
                break
            data += c
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "-1"))
        while (n < 0 or len(rest) < n):
            c = s.recv(65536)
            if not c:
                break
            rest += c
        return status, hdrs, rest[:n] if n >= 0 else rest
    finally:
        s.close()


def one_object(body):
    """The body as one JSON object, or None (two documents, invalid JSON)."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def check_case(r, what, port, want, method, path, extra=b"", body=b"", src="127.0.0.1",
               line_refused=False):
    """Asks (method, path) with the good id and every forged one.
    line_refused: nginx refuses the request line, before any header is
    read (so the id is always nginx's)."""
    for rid in [GOOD] + FORGED:
        st, h, data = raw_request(port, method, path, rid, extra, body, src)
        doc = one_object(data)
        label = "%s, id %r (%d bytes)" % (what, rid[:24], len(rid))
        expect = 400 if len(rid) > HEADER_BUFFER and not line_refused else want
        r.check(st == expect and doc is not None and isinstance(doc.get("error"), str),
                "%s: %d with one JSON object (%d %r)" % (label, expect, st, data[:160]))
        if doc is None:
            continue
        got = doc.get("request_id", "")
        r.check(got == h.get("x-request-id"),
                "%s: the body's request_id is the header's (%r, %r)"
                % (label, got[:40], h.get("x-request-id", "")[:40]))
        if rid == GOOD and not line_refused:
            r.check(got == GOOD, "%s: a well-formed id is kept (%r)" % (label, got))
        else:
            r.check(NGINX_ID.match(got) is not None,
                    "%s: a malformed id is replaced by nginx's (%r)" % (label, got[:40]))


class SilentFastcgi:
    """A FastCGI socket that accepts and never answers (nginx's 504)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o666)
        self.sock.listen(64)
        self.conns = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self):
        self.stop = True
        self.thread.join(2)
        for c in self.conns:
            c.close()
        self.sock.close()


short_read_timeout = harness.site_edit("enrichd-fastcgi.conf", "fastcgi_read_timeout 10s;",
                                       "fastcgi_read_timeout 1s;")


def test_one_host_site(r):
    """nginx/enrichd.conf: the API's server and the operators' server."""
    with harness.Env(name="enr-sitejson") as env:
        # No enrichd: its sockets are absent (502, answered as 503), then
        # a FastCGI peer that never answers (504).
        env.start_nginx(snippet_edit=short_read_timeout)
        big = b"Content-Type: application/json\r\nContent-Length: 5000000\r\n"
        for srv, port in (("api", env.port), ("ops", env.ops_port)):
            check_case(r, "%s 404" % srv, port, 404, "GET", "/nope")
            check_case(r, "%s 404 of a batch" % srv, port, 404, "POST", "/nope",
                       b"Content-Length: 2\r\n", b"[]")
            check_case(r, "%s 413" % srv, port, 413, "POST", "/v1/enrich" if srv == "api"
                       else "/nope", big)
            check_case(r, "%s 400" % srv, port, 400, "GET", "/healthz", b"Host: twice\r\n")
            check_case(r, "%s 403" % srv, port, 403, "GET", "/metrics", src="127.0.0.2")
            check_case(r, "%s 414" % srv, port, 414, "GET", "/" + "u" * 9000,
                       line_refused=True)
            check_case(r, "%s 501" % srv, port, 501, "POST", "/v1/enrich",
                       b"Transfer-Encoding: gzip\r\n")
            check_case(r, "%s 503 (no status socket)" % srv, port, 503, "GET", "/healthz")
        check_case(r, "api 503 (no FastCGI socket)", env.port, 503, "POST", "/v1/enrich",
                   b"Content-Length: 2\r\n", b"[]")
        silent = SilentFastcgi(env.sock)
        try:
            check_case(r, "api 504", env.port, 504, "POST", "/v1/enrich",
                       b"Content-Length: 2\r\n", b"[]")
        finally:
            silent.close()


def cluster_site(env, port):
    """nginx/enrichd-cluster.conf on a port of the test's own, its hosts
    and canary sockets that do not exist."""
    with open(CLUSTER_CONF) as f:
        text = f.read()
    text = re.sub(r"198\.51\.100\.\d+:9000", "unix:%s/no-host.sock" % env.dir, text)
    text = text.replace("listen 127.0.0.1:8080;", "listen 127.0.0.1:%d;" % port)
    return text.replace("/var/log/nginx/enrichd.access.log", env.access_log)


def test_cluster_site(r):
    """nginx/enrichd-cluster.conf: the same error locations, its own 404."""
    with harness.Env(name="enr-sitejson-cl") as env:
        # start_nginx has chosen env.port when it calls the edit.
        env.start_nginx(site_edit=lambda _text: cluster_site(env, env.port))
        check_case(r, "cluster 404", env.port, 404, "GET", "/nope")
        check_case(r, "cluster 413", env.port, 413, "POST", "/v1/enrich",
                   b"Content-Type: application/json\r\nContent-Length: 5000000\r\n")
        check_case(r, "cluster 400", env.port, 400, "GET", "/v1/enrich", b"Host: twice\r\n")
        check_case(r, "cluster 503 (no host)", env.port, 503, "POST", "/v1/enrich",
                   b"Content-Length: 2\r\n", b"[]")


def main():
    harness.run_tests(test_one_host_site, test_cluster_site)


if __name__ == "__main__":
    main()
