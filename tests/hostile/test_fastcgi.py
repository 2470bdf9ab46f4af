#!/usr/bin/env python3
"""test_fastcgi.py: FastCGI as the spec says, driven by a raw client on
enrichd's unix socket (no nginx in between) and by cgi-fcgi (libfcgi-bin).

- FCGI_KEEP_CONN: 200 kept-connection requests leave the workers'
  descriptor counts flat, and a kept connection is closed after its
  response (docs/pool.md says why), never left hanging;
- roles other than RESPONDER get END_REQUEST{FCGI_UNKNOWN_ROLE}, no output;
- a second BEGIN_REQUEST on a connection (multiplexing), garbage, a bad
  version, truncated records, garbage in the body stream: a clean
  END_REQUEST or a closed connection within the worker's bounds;
- a client that connects and sends nothing, or only BEGIN_REQUEST, or
  stops half way through its body: the worker is free again within
  ENR_WORKER_HEADER_TIMEOUT_MS / ENR_WORKER_READ_TIMEOUT_MS (worker.h);
- nginx with `fastcgi_keep_conn on` serves a load with zero failed
  requests and flat descriptors;
- a flood of management records is cut at the header bound too, with
  the worker's peak RSS under rss_soft_mb;
- after all of it the pool serves a batch through nginx with the same
  workers alive, and no exit of any kind in the log."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

BODY = harness.sample_body(20)
PARAMS = harness.fcgi_enrich_params(BODY)


HEADER_S = harness.worker_constant("ENR_WORKER_HEADER_TIMEOUT_MS")
READ_S = harness.worker_constant("ENR_WORKER_READ_TIMEOUT_MS")
LINGER_S = harness.worker_constant("ENR_WORKER_LINGER_MS")
SLACK_S = 1.5  # scheduling on a loaded 2-core machine, sanitizer builds


def fd_total(pids):
    return sum(harness.fd_count(p) for p in pids)


def raw(env, data, rid=1, timeout=8.0, shut=False):
    """Sends data on a new connection; returns (recv_until_end result, seconds)."""
    return harness.fcgi_exchange(env.sock, data, shut=shut, timeout=timeout, rid=rid)


def test_keep_conn(r, env):
    pids = env.worker_pids()
    before = fd_total(pids)
    ok = served = 0
    deadline = time.monotonic() + 30
    for i in range(200):
        if time.monotonic() > deadline:
            break
        c = harness.FcgiConn(env.sock, 5)
        try:
            c.send(harness.fcgi_request_bytes(PARAMS, BODY, rid=1 + i % 7,
                                              flags=harness.FCGI_KEEP_CONN))
            out = c.recv_until_end(1 + i % 7, 5)
        finally:
            c.close()
        served += 1
        ok += harness.fcgi_status(out["stdout"]) == 200 and out["ends"].get(1 + i % 7) == (0, 0)
    time.sleep(LINGER_S + 0.2)  # the worker's side of the last close
    after = fd_total(pids)
    r.check(served == 200 and ok == 200, "keep-conn: 200 requests answered 200 (%d of %d)"
            % (ok, served))
    r.check(env.worker_pids() == pids, "keep-conn: same workers (%r -> %r)"
            % (pids, env.worker_pids()))
    r.check(after - before <= 2, "keep-conn: worker descriptors flat over 200 requests: "
            "%d -> %d" % (before, after))
    print("keep-conn: worker fds %d -> %d after %d requests" % (before, after, served))

    # The next request on a kept connection: served, or the connection
    # closed, within a bound; never silence.
    for i in range(3):
        c = harness.FcgiConn(env.sock, 5)
        try:
            c.send(harness.fcgi_request_bytes(PARAMS, BODY, flags=harness.FCGI_KEEP_CONN))
            first = c.recv_until_end(1, 5)
            t0 = time.monotonic()
            try:
                c.send(harness.fcgi_request_bytes(PARAMS, BODY, rid=2,
                                                  flags=harness.FCGI_KEEP_CONN))
            except OSError:
                pass  # already closed: as good as an EOF
            second = c.recv_until_end(2, 3)
            took = time.monotonic() - t0
        finally:
            c.close()
        r.check(harness.fcgi_status(first["stdout"]) == 200, "kept conn %d: first answered" % i)
        answered = harness.fcgi_status(second["stdout"]) == 200 and 2 in second["ends"]
        r.check(answered or (second["eof"] and not second["stdout"]),
                "kept conn %d: next request served or connection closed, not silence "
                "(eof=%s timeout=%s %.2f s)" % (i, second["eof"], second["timeout"], took))


def test_roles(r, env):
    for role, name in ((harness.FCGI_AUTHORIZER, "AUTHORIZER"), (harness.FCGI_FILTER, "FILTER")):
        out, took = raw(env, harness.fcgi_request_bytes(PARAMS, BODY, role=role))
        r.check(out["ends"].get(1) == (0, harness.FCGI_UNKNOWN_ROLE) and not out["stdout"],
                "%s: END_REQUEST{FCGI_UNKNOWN_ROLE}, no output (ends=%r stdout=%r)"
                % (name, out["ends"], out["stdout"][:40]))
        r.check(took < SLACK_S, "%s: answered at once (%.2f s)" % (name, took))
    out, took = raw(env, harness.fcgi_request_bytes(PARAMS, BODY, role=99))
    r.check((out["ends"].get(1) == (0, harness.FCGI_UNKNOWN_ROLE) or out["eof"])
            and not out["stdout"], "role 99: UNKNOWN_ROLE or closed, no output (%r)" % out["ends"])


def test_multiplexed(r, env):
    req1 = harness.fcgi_request_bytes(PARAMS, BODY, rid=1)
    begin1_params = req1[:req1.index(harness.fcgi_record(harness.FCGI_PARAMS, b"", 1))]
    rest1 = req1[len(begin1_params):]
    second = harness.fcgi_begin(2) + harness.fcgi_record(harness.FCGI_PARAMS,
                                                         harness.fcgi_pairs(PARAMS), 2)
    out, took = raw(env, begin1_params + second + rest1 + harness.fcgi_record(
        harness.FCGI_STDIN, b"", 2))
    ok1 = harness.fcgi_status(out["stdout"]) == 200 and out["ends"].get(1) == (0, 0)
    r.check(ok1 or (out["eof"] and not out["stdout"]),
            "multiplexed BEGIN: first request answered whole or connection closed (%r, %.2f s)"
            % (out["ends"], took))
    r.check(out["ends"].get(2, (0, harness.FCGI_CANT_MPX_CONN))[1] == harness.FCGI_CANT_MPX_CONN,
            "multiplexed BEGIN: the second id is refused with CANT_MPX_CONN (%r)" % out["ends"])
    r.check(not out["timeout"], "multiplexed BEGIN: no hang")


def test_malformed(r, env):
    begin = harness.fcgi_begin(1)
    params = harness.fcgi_record(harness.FCGI_PARAMS, harness.fcgi_pairs(PARAMS)) + \
        harness.fcgi_record(harness.FCGI_PARAMS, b"")
    cases = [
        ("garbage", os.urandom(64) + b"GET / HTTP/1.1\r\n\r\n"),
        ("bad version", harness.fcgi_record(harness.FCGI_BEGIN_REQUEST, begin[8:], 1, version=2)
         + params),
        ("BEGIN with a short body", harness.fcgi_record(harness.FCGI_BEGIN_REQUEST, b"\0\1", 1)),
        ("PARAMS before BEGIN", params),
        ("truncated header", begin[:5]),
        ("truncated record", begin[:11]),
        ("unknown type for the request", begin + harness.fcgi_record(11, b"xxxx", 1)),
        ("unknown management record", harness.fcgi_record(11, b"", 0)),
        ("garbage in the body stream", begin + params + b"\x07\x05\x00\x01\xff\xff\x00\x00junk"),
        ("body cut short", begin + params + harness.fcgi_record(harness.FCGI_STDIN, BODY[:100])),
        ("PARAMS longer than sent", begin + harness.fcgi_record(
            harness.FCGI_PARAMS, b"\x80\x10\x00\x00\x01" + b"A" * 100)),
    ]
    for name, data in cases:
        out, took = raw(env, data, timeout=HEADER_S + READ_S + LINGER_S + SLACK_S + 3)
        st = harness.fcgi_status(out["stdout"])
        clean = out["eof"] or (1 in out["ends"] and st in (None, 400, 408, 413))
        r.check(clean and st != 200, "%s: closed or a clean END_REQUEST, never a 200 "
                "(eof=%s ends=%r status=%r)" % (name, out["eof"], out["ends"], st))
        bound = max(HEADER_S, READ_S) + LINGER_S + SLACK_S
        r.check(not out["timeout"] and took < bound,
                "%s: settled within %.1f s (%.2f s)" % (name, bound, took))
    # and the pool still answers
    out, _ = raw(env, harness.fcgi_request_bytes(PARAMS, BODY))
    r.check(harness.fcgi_status(out["stdout"]) == 200, "after malformed input: a request is served")


def test_stalled(r, env, workers):
    """As many stalled clients as workers: the pool answers again within
    the header bound, and the stalled connections are closed."""
    stalled = []
    for i in range(workers):
        c = harness.FcgiConn(env.sock, 10)
        if i % 2:
            c.send(harness.fcgi_begin(1))  # BEGIN_REQUEST, then nothing
        stalled.append(c)
    time.sleep(0.2)  # let the workers take them
    t0 = time.monotonic()
    out, _ = raw(env, harness.fcgi_request_bytes(PARAMS, BODY), timeout=HEADER_S + SLACK_S + 4)
    took = time.monotonic() - t0
    r.check(harness.fcgi_status(out["stdout"]) == 200,
            "stalled clients: a normal request is still answered (%r)" % out["ends"])
    r.check(took < HEADER_S + SLACK_S, "stalled clients: answered within %.1f s (%.2f s)"
            % (HEADER_S + SLACK_S, took))
    closed = [c.wait_eof(HEADER_S + SLACK_S) for c in stalled]
    r.check(all(closed), "stalled clients: their connections were closed (%r)" % closed)
    print("stalled: %d silent clients, next request answered in %.2f s" % (workers, took))
    for c in stalled:
        c.close()


def test_cgi_fcgi(r, env):
    exe = "cgi-fcgi"
    try:
        subprocess.run([exe, "-h"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=5)
    except FileNotFoundError:
        r.check(False, "cgi-fcgi not installed (scripts/deps.sh test installs libfcgi-bin)")
        return
    out, _ = raw(env, harness.fcgi_request_bytes(PARAMS, BODY))
    e = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    e.update(PARAMS)
    p = subprocess.run([exe, "-bind", "-connect", env.sock], input=BODY, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    r.check(p.returncode == 0, "cgi-fcgi: exit 0 (%d, %r)" % (p.returncode, p.stderr[:200]))
    # fetched_at is the time of the answer: the only bytes that may differ.
    same = re.sub(rb'"fetched_at":\d+', b"", p.stdout) == re.sub(rb'"fetched_at":\d+', b"",
                                                                  out["stdout"])
    r.check(harness.fcgi_status(p.stdout) == 200 and same,
            "cgi-fcgi: same 200 answer as the raw client (%d vs %d bytes)"
            % (len(p.stdout), len(out["stdout"])))
    e = dict(e, DOCUMENT_URI="/nope", SCRIPT_NAME="/nope", REQUEST_METHOD="GET",
             CONTENT_LENGTH="0")
    p = subprocess.run([exe, "-bind", "-connect", env.sock], input=b"", env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    r.check(harness.fcgi_status(p.stdout) == 404, "cgi-fcgi: unknown route is a 404 (%r)"
            % p.stdout[:80])


def test_raw_suite(r):
    workers = 2
    with harness.Env(name="fcgi-raw") as env:
        env.start_enrichd("workers = %d\n" % workers)
        env.start_nginx()
        pids = env.wait_workers(workers)
        for fn in (test_keep_conn, test_roles, test_multiplexed, test_malformed, test_cgi_fcgi):
            r.run(fn, env)
        r.run(test_stalled, env, workers)
        # After all of it: a normal batch through nginx, same workers.
        bad = harness.batches_failing(env, BODY, 50, 20)
        r.check(not bad, "after the abuse: 50 batches through nginx all 200 (%r)" % bad[:5])
        r.check(env.worker_pids() == pids, "after the abuse: the same workers alive (%r -> %r)"
                % (pids, env.worker_pids()))
        r.check(not harness.worker_exit_reasons(env), "no worker exit at all: %r"
                % harness.worker_exit_reasons(env))
        reasons = set(e.get("reason") for e in env.log_events("FastCGI connection rejected"))
        r.check({"timeout", "unknown_role"} <= reasons,
                "rejections logged with their reason (rate-limited): %r" % sorted(reasons))
        st, _, data = env.request("/metrics", method="GET")
        m = re.search(rb"^enrichd_fastcgi_rejected_total (\d+)$", data, re.M)
        r.check(m is not None and int(m.group(1)) > 0,
                "/metrics counts rejected FastCGI connections (%r)" % (m and m.group(0)))


def test_close_after_whole_input(r):
    """A request whose body was read to its end is closed at once: the
    worker does not wait for the peer's close (nginx has nothing more to
    send), so a peer that keeps its end open does not hold the worker for
    the linger."""
    with harness.Env(name="fcgi-close") as env:
        env.start_enrichd("workers = 1\n")
        env.wait_workers(1)
        a = harness.FcgiConn(env.sock, 5.0)
        try:
            a.send(harness.fcgi_request_bytes(PARAMS, BODY))
            out = a.recv_until_end(1, 5.0)
            r.check(1 in out["ends"] and out["stdout"].startswith(b"Status: 200"),
                    "the first request is answered (%r)" % (out["ends"],))
            r.check(a.wait_eof(2.0), "the worker closed the connection after the answer")
            t0 = time.monotonic()
            b, _ = raw(env, harness.fcgi_request_bytes(PARAMS, BODY))
            took = time.monotonic() - t0
            r.check(1 in b["ends"], "the next request is answered while the first peer holds "
                    "its end open")
            r.check(took < LINGER_S / 2,
                    "and without waiting out the linger: %.3f s (linger %.1f s)" % (took, LINGER_S))
        finally:
            a.close()


def test_management_flood(r):
    """A peer that never sends BEGIN_REQUEST but floods management records
    (libfcgi answers each itself, and Debian's 2.4.2 leaks 48 bytes on
    each): cut at the header bound, the worker's peak RSS stays under
    rss_soft_mb, the worker lives on."""
    import threading
    with harness.Env(name="fcgi-flood") as env:
        env.start_enrichd("workers = 1\n")
        pid = env.wait_workers(1)[0]
        c = harness.FcgiConn(env.sock, 10)
        replies = [0]

        def drain():
            try:
                while True:
                    d = c.sock.recv(1 << 20)
                    if not d:
                        return
                    replies[0] += len(d) // 16
            except OSError:
                return

        th = threading.Thread(target=drain, daemon=True)
        th.start()
        burst = harness.fcgi_record(11, b"", 0) * 4096
        t0 = time.monotonic()
        cut = None
        while time.monotonic() - t0 < HEADER_S + SLACK_S + 3:
            try:
                c.sock.sendall(burst)
            except OSError:
                cut = time.monotonic() - t0
                break
        c.close()
        th.join(5)
        r.check(cut is not None and cut < HEADER_S + SLACK_S,
                "management flood: cut within %.1f s (%r, %d records answered)"
                % (HEADER_S + SLACK_S, cut, replies[0]))
        hwm = harness.proc_status_kb(pid, "VmHWM") if harness.pid_alive(pid) else None
        r.check(hwm is not None and hwm < 64 * 1024,
                "management flood: worker peak RSS %r kB under rss_soft_mb (64 MB)" % hwm)
        out, _ = raw(env, harness.fcgi_request_bytes(PARAMS, BODY))
        r.check(harness.fcgi_status(out["stdout"]) == 200 and env.worker_pids() == [pid],
                "management flood: the same worker serves the next request")
        print("management flood: cut after %.2f s, %d records answered, worker peak RSS %s kB"
              % (cut or -1, replies[0], hwm))


def test_nginx_keep_conn(r):
    """nginx with fastcgi_keep_conn on in front of the pool: zero failed
    requests, descriptors flat.  (No `keepalive` cache in the upstream
    block: docs/pool.md says why it must not be used with enrichd.)"""
    edit = harness.site_edit("enrichd-fastcgi.conf", "fastcgi_keep_conn off;",
                             "fastcgi_keep_conn on;")

    with harness.Env(name="fcgi-keep") as env:
        # No recycling: the same three workers must be there to count their
        # descriptors after the load (the sanitizer build's RSS would pass
        # rss_soft_mb and replace them).
        env.start_enrichd("workers = 3\nmax_requests = 0\nrss_soft_mb = 0\nrss_hard_mb = 0\n")
        env.start_nginx(snippet_edit=edit)
        pids = env.wait_workers(3)
        env.request("/v1/enrich", BODY)
        before = fd_total(pids)
        load = harness.Load(env, clients=6, body=BODY)
        harness.poll(lambda: load.count() > 250, 30)
        res = load.stop()
        time.sleep(LINGER_S + 0.2)
        after = fd_total(pids)
        fails = [x for x in res if x[0] != 200]
        r.check(len(res) > 200, "nginx keep_conn on: load ran (%d requests)" % len(res))
        r.check(not fails, "nginx keep_conn on: zero failed requests (%d of %d) %r"
                % (len(fails), len(res), fails[:3]))
        r.check(after - before <= 3, "nginx keep_conn on: worker descriptors flat (%d -> %d)"
                % (before, after))
        r.check(env.worker_pids() == pids, "nginx keep_conn on: same workers")
        print("nginx keep_conn on: %d requests, %d failed, worker fds %d -> %d"
              % (len(res), len(fails), before, after))


if __name__ == "__main__":
    harness.run_tests(test_raw_suite, test_close_after_whole_input, test_management_flood,
                      test_nginx_keep_conn)
