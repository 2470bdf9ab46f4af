#!/usr/bin/env python3
"""The conformance vectors through the real path: HTTP client -> nginx
(nginx/enrichd.conf) -> FastCGI -> an enrichd worker, on every route a
drop-in client may use (/, /v1/enrich and the checker's /normalize), plus
the HTTP rules the vectors do not cover (405, 413, the JSON error body,
the request id echoed back)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(os.path.dirname(HERE), "vectors.py")


def vectors_via(r, env, path):
    p = subprocess.run([sys.executable, VECTORS, "--url", "http://127.0.0.1:%d%s" % (env.port, path),
                        "--jobs", "6"], capture_output=True, text=True, timeout=240)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    r.check(p.returncode == 0 and last.endswith(" 0 failed"),
            "vectors through nginx on %s: %s\n%s" % (path, last, p.stdout[-3000:]))


def http_rules(r, env):
    st, h, body = env.request("/v1/enrich", method="GET")
    r.check(st == 405 and body == b"method not allowed", "GET gives 405: %d %r" % (st, body))
    st, h, body = env.request("/v1/enrich", body=b"[1,]", headers={"Content-Type": "text/plain"})
    r.check(st == 400 and h.get("content-type") == "application/json", "bad JSON gives 400 JSON: %d %s" % (st, h))
    r.check(b'"offset":3' in body and b'"error":' in body, "error says what and where: %r" % body)
    st, h, body = env.request("/", body=b'[{"provider":"yt","id":"A"}]',
                              headers={"X-Request-ID": "test-req-42"})
    r.check(st == 200 and h.get("x-request-id") == "test-req-42", "request id echoed: %s" % h)
    r.check(body.startswith(b'{"hash":"') and body.endswith(b"}\n"), "one NDJSON line: %r" % body)
    big = b"[" + b",".join([b'{"x":"' + b"a" * 1000 + b'"}'] * 2000) + b"]"
    st, h, body = env.request("/v1/enrich", body=big)
    r.check(st == 413 and b'"error":' in body, "a body over max_body_bytes gives a JSON 413: %d %r" % (st, body[:200]))
    st, h, body = env.request("/v1/enrich", body=b"[" + b"x" * (5 << 20) + b"]")
    r.check(st == 413 and h.get("content-type") == "application/json" and b'"error":' in body,
            "a body over nginx's client_max_body_size gives a JSON 413: %d %r" % (st, body[:200]))
    st, h, body = env.request("/nope", body=b"[]")
    r.check(st == 404 and b'"error":' in body and h.get("x-request-id", "") in body.decode(),
            "an unknown route gives a JSON 404 with the request id: %d %r" % (st, body[:200]))
    st, h, body = env.request("/v1/enrich", body=b"[" + b"{}," * 300 + b"{}]")
    r.check(st == 413 and b'"element":200' in body, "a batch over max_records gives 413 at the element: %d %r" % (st, body[:200]))


def main():
    r = harness.Results()
    with harness.Env(name="vectors") as env:
        env.start_enrichd("workers = 3\nmax_body_bytes = 1500000\nmax_records = 200\n")
        env.start_nginx()
        for path in ("/normalize", "/", "/v1/enrich"):
            r.run(vectors_via, env, path)
        r.run(http_rules, env)
        r.run(no_worker, env)
    r.done()


def no_worker(r, env):
    """With enrichd gone, nginx itself answers: JSON 503 with Retry-After
    (its 502, nothing was done), not an HTML page."""
    import signal
    env.signal(signal.SIGQUIT)
    env.wait_exit(10)
    st, h, body = env.request("/v1/enrich", body=b"[]")
    r.check(st == 503 and h.get("content-type") == "application/json" and b'"error":' in body
            and h.get("retry-after") == "1",
            "no worker: JSON 503 with Retry-After: %d %r %r" % (st, h, body[:200]))


if __name__ == "__main__":
    main()
