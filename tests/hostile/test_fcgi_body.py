#!/usr/bin/env python3
"""test_fcgi_body.py: the worker's record reader (src/fcgi/fcgi_body.c:
FCGI_STDIN records read by readv straight into the body buffer, every
other record through its byte parser) driven by a raw FastCGI client on
the unix socket, against the answers of the plain case.

- the same 400 KB batch in nginx's 32 KB records, in 64 KB records, in
  records of odd lengths with every padding length up to 255, in 1-byte
  sends that split every header across reads, or without CONTENT_LENGTH:
  the same 200 answer; a CONTENT_LENGTH shorter or longer than the body
  is a 400;
- records enrichd answers or skips mid-body (FCGI_GET_VALUES, another
  request id's stdin) still give the same 200, with enrichd's reply;
- an empty FCGI_STDIN record mid-body ends the body there (a 400: shorter
  than CONTENT_LENGTH), content past max_body_bytes without CONTENT_LENGTH is
  a 413, FCGI_ABORT_REQUEST or a peer gone mid-body gets no answer and
  the connection closed at once;
- a body dripped a byte at a time is cut by the worker itself within
  body_timeout_ms plus one read timeout (a JSON 408: the caller is still
  there), before the master's stuck-request kill: the same worker lives
  on, no exit in the log."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

H = harness
SLACK_S = 1.5  # scheduling on a loaded 2-core machine, sanitizer builds
REQUEST_TIMEOUT_MS = 2000  # set in the config below
BODY_TIMEOUT_MS = 1000  # likewise
MAX_BODY = 1 << 20


READ_S = min(H.worker_constant("ENR_WORKER_READ_TIMEOUT_MS"), REQUEST_TIMEOUT_MS / 2000.0)
LINGER_S = H.worker_constant("ENR_WORKER_LINGER_MS")


def head(params, rid=1):
    p = H.fcgi_pairs(params)
    return (H.fcgi_begin(rid) + H.fcgi_record(H.FCGI_PARAMS, p, rid)
            + H.fcgi_record(H.FCGI_PARAMS, b"", rid))


def stdin_records(body, size, rid=1, pad=None):
    """body as FCGI_STDIN records of `size` bytes (a list: one size each
    in turn), padded to 8 or by pad(i)."""
    out, i, n = b"", 0, 0
    sizes = size if isinstance(size, list) else [size]
    while i < len(body):
        k = sizes[n % len(sizes)]
        chunk = body[i:i + k]
        p = pad(n) if pad else (8 - len(chunk) % 8) % 8
        out += H.fcgi_record(H.FCGI_STDIN, chunk, rid, padding=p)
        i += k
        n += 1
    return out


def end(rid=1):
    return H.fcgi_record(H.FCGI_STDIN, b"", rid)


def test_layouts(r, env, body):
    params = H.fcgi_enrich_params(body)
    ref, _ = H.fcgi_exchange(env.sock, head(params) + stdin_records(body, 65535) + end())
    r.check(H.fcgi_status(ref["stdout"]) == 200 and ref["ends"].get(1) == (0, 0),
            "reference: 65535-byte records answered 200 (%r)" % (ref["ends"],))
    want = H.zero_fetched_at(ref["stdout"])
    longer = dict(params, CONTENT_LENGTH=str(len(body) + 4096))
    shorter = dict(params, CONTENT_LENGTH=str(len(body) // 3))
    nolen = {k: v for k, v in params.items() if k != "CONTENT_LENGTH"}
    cases = [
        ("nginx's 32 KB records", head(params) + stdin_records(body, 32768) + end(), None),
        ("a short first record, then 32 KB ones",
         head(params) + stdin_records(body[:1000], 1000) + stdin_records(body[1000:], 32768)
         + end(), None),
        ("odd lengths, padding 0..255", head(params) + stdin_records(
            body, [1, 7, 4093, 32769, 65535, 13, 8191], pad=lambda i: (i * 37) % 256) + end(),
         None),
        ("1-byte sends: every header split across reads (first 3 KB)",
         head(params) + stdin_records(body, [1, 2, 3, 5, 600]) + end(), 1),
        ("no CONTENT_LENGTH", head(nolen) + stdin_records(body, 32768) + end(), None),
        ("FCGI_GET_VALUES mid-body (enrichd answers it)",
         head(params) + stdin_records(body[:200000], 32768)
         + H.fcgi_record(9, H.fcgi_pairs({"FCGI_MAX_CONNS": ""}), 0)
         + stdin_records(body[200000:], 32768) + end(), None),
        ("another request id's stdin mid-body (skipped)",
         head(params) + stdin_records(body[:100000], 32768)
         + H.fcgi_record(H.FCGI_STDIN, b"x" * 3000, 7, padding=3)
         + stdin_records(body[100000:], 32768) + end(), None),
    ]
    for name, p in (("larger", longer), ("smaller", shorter)):
        out, _ = H.fcgi_exchange(env.sock, head(p) + stdin_records(body, 32768) + end())
        r.check(H.fcgi_status(out["stdout"]) == 400 and out["ends"].get(1) == (0, 0),
                "CONTENT_LENGTH %s than the body: a 400, never the batch parsed as it came (%r)"
                % (name, H.fcgi_status(out["stdout"])))
    for name, data, chunk in cases:
        if chunk:
            # dribble the first 3 KB (headers split), then the rest at once
            c = H.FcgiConn(env.sock, 10)
            try:
                for i in range(0, 3072):
                    c.send(data[i:i + 1])
                    if i % 64 == 0:
                        time.sleep(0.001)
                c.send(data[3072:])
                out = c.recv_until_end(1, 10)
            finally:
                c.close()
        else:
            out, _ = H.fcgi_exchange(env.sock, data)
        ok = H.zero_fetched_at(out["stdout"]) == want and out["ends"].get(1) == (0, 0)
        r.check(ok, "%s: the same 200 answer (status %r, %d vs %d bytes, ends %r)"
                % (name, H.fcgi_status(out["stdout"]), len(out["stdout"]), len(ref["stdout"]),
                   out["ends"]))
        if "GET_VALUES" in name:
            got = [rec for rec in out["records"] if rec[0] == 10 and rec[1] == 0]
            r.check(got and b"FCGI_MAX_CONNS" in got[0][2],
                    "GET_VALUES mid-body: the GET_VALUES_RESULT came back (%r)" % got[:1])


def test_cut_short(r, env, body):
    params = H.fcgi_enrich_params(body)
    half = stdin_records(body[:150001], 32768)
    bound = READ_S + LINGER_S + SLACK_S
    out, took = H.fcgi_exchange(env.sock, head(params) + half + end() + stdin_records(body[150001:], 32768)
                         + end())
    r.check(H.fcgi_status(out["stdout"]) == 400 and 1 in out["ends"],
            "empty FCGI_STDIN mid-body: the body ends there, a 400 (%r, %r)"
            % (H.fcgi_status(out["stdout"]), out["ends"]))
    r.check(took < bound, "empty FCGI_STDIN mid-body: settled in %.2f s (< %.1f)" % (took, bound))
    nolen = {k: v for k, v in params.items() if k != "CONTENT_LENGTH"}
    big = body * (MAX_BODY // len(body) + 1)
    out, took = H.fcgi_exchange(env.sock, head(nolen) + stdin_records(big, 32768) + end(), timeout=15)
    r.check(H.fcgi_status(out["stdout"]) == 413,
            "%d bytes without CONTENT_LENGTH, max_body_bytes %d: 413 (%r)"
            % (len(big), MAX_BODY, H.fcgi_status(out["stdout"])))
    for name, tail, shut in (
            ("FCGI_ABORT_REQUEST mid-body", H.fcgi_record(H.FCGI_ABORT_REQUEST, b"", 1), False),
            ("peer gone mid-body", b"", True),
            ("a header cut mid-body, then gone", H.fcgi_record(H.FCGI_STDIN, b"abc")[:5], True),
            ("bad version mid-body", H.fcgi_record(H.FCGI_STDIN, b"abc", version=2), False)):
        out, took = H.fcgi_exchange(env.sock, head(params) + half + tail, shut=shut)
        r.check(not out["stdout"] and (out["eof"] or 1 in out["ends"]),
                "%s: no answer, END_REQUEST or closed (stdout %d bytes, ends %r, eof %s)"
                % (name, len(out["stdout"]), out["ends"], out["eof"]))
        r.check(not out["timeout"] and took < SLACK_S,
                "%s: settled at once (%.2f s)" % (name, took))


def test_drip(r, env, body):
    """One byte every 50 ms: each wait ends within the read timeout, so only
    the body's own deadline (body_timeout_ms) ends it."""
    params = H.fcgi_enrich_params(body)
    pid = env.worker_pids()
    data = head(params) + stdin_records(body, 32768) + end()
    cut = H.fcgi_drip_cut(env.sock, data, 4096)
    bound = BODY_TIMEOUT_MS / 1000.0 + READ_S + SLACK_S
    r.check(cut is not None and cut < bound,
            "drip: the worker ended the connection within %.1f s (%r)" % (bound, cut))
    time.sleep(0.3)
    r.check(env.worker_pids() == pid, "drip: the same worker lives on (%r -> %r)"
            % (pid, env.worker_pids()))
    r.check(not H.worker_exit_reasons(env), "drip: no worker exit (%r)"
            % H.worker_exit_reasons(env))
    errs = [e.get("error") for e in env.log_events("request body read failed")]
    r.check(any(e and "timed out" in e.lower() for e in errs),
            "drip: logged as a body read that timed out (%r)" % errs[-3:])
    print("drip: cut after %.2f s" % (cut or -1))


def main():
    res = H.Results()
    body = H.bench_body()
    with H.Env(name="fcgi-body") as env:
        pids = H.start_one_worker(env, MAX_BODY, REQUEST_TIMEOUT_MS, BODY_TIMEOUT_MS)
        for fn in (test_layouts, test_cut_short, test_drip):
            res.run(fn, env, body)
        H.check_same_worker(res, env, pids, head(H.fcgi_enrich_params(body))
                            + stdin_records(body, 32768) + end())
    res.done()


if __name__ == "__main__":
    main()
