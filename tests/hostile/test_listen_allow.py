#!/usr/bin/env python3
"""test_listen_allow.py: a TCP `listen` serves only the peers named by
listen_allow (default: loopback only).

- enrichd on TCP 127.0.0.1:PORT with listen_allow = 127.0.0.2: a client
  from 127.0.0.1 is closed with nothing read or served, and counted in
  /metrics (enrichd_listen_refused_total) and /status (listen_refused);
  a client bound to 127.0.0.2 is served;
- nginx in front, connecting from 127.0.0.2 (fastcgi_bind), serves a
  batch with zero failures;
- a HUP that names 127.0.0.1 lets that peer in (new workers, new list);
- a dual-stack listener ([::]:PORT): an IPv4 client (::ffff:127.0.0.1)
  is matched as 127.0.0.1 against IPv4 entries and by ::/0, refused by
  ::1 alone;
- a unix socket is not filtered (its mode and group decide);
- bad values fail `enrichd -t` with FILE:LINE: listen_allow: problem."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

BODY = harness.sample_body(10)
PARAMS = harness.fcgi_enrich_params(BODY)


def raw(addr, source=None):
    """One request; (status or None, eof without any byte, seconds)."""
    c = harness.FcgiConn(addr, 5, source=source)
    t0 = time.monotonic()
    try:
        try:
            c.send(harness.fcgi_request_bytes(PARAMS, BODY))
        except OSError:
            pass  # closed before we finished sending: refused
        out = c.recv_until_end(1, 5)
        return harness.fcgi_status(out["stdout"]), out["eof"] and not out["records"], \
            time.monotonic() - t0
    finally:
        c.close()


def test_tcp(r):
    port = harness.free_port()
    addr = ("127.0.0.1", port)
    with harness.Env(name="allow-tcp") as env:
        env.start_enrichd("listen = 127.0.0.1:%d\nlisten_allow = 127.0.0.2\nworkers = 2\n" % port)

        def edit(text):
            old = "server unix:%s" % env.sock  # the shipped options after it stay
            assert old in text, "the site names the FastCGI socket"
            text = text.replace(old, "server 127.0.0.1:%d" % port)
            # Only the API locations: the status socket is a unix socket.
            return text.replace("fastcgi_pass enrichd_fastcgi;",
                                "fastcgi_pass enrichd_fastcgi;\n        fastcgi_bind 127.0.0.2;")

        env.start_nginx(site_edit=edit)
        env.wait_workers(2)
        # The control: the slowest of three requests an allowed peer has
        # served over the same listener just before, the path's own time
        # under this moment's load (counted before accepted0 is read).
        ctl = 0.0
        for _ in range(3):
            st, _, took = raw(addr, source="127.0.0.2")
            r.check(st == 200, "control: peer 127.0.0.2 served (%r)" % st)
            ctl = max(ctl, took)
        accepted0 = harness.metric(env, "enrichd_requests_accepted_total")

        refused = 0
        for _ in range(5):
            st, closed, took = raw(addr)
            refused += 1
            r.check(st is None and closed, "peer 127.0.0.1 refused: closed with nothing "
                    "served (status %r, closed %r)" % (st, closed))
            r.check(took < 1.0 + ctl, "refused at once (%.2f s < 1 s + the control's %.2f s)"
                    % (took, ctl))
        st, _, _ = raw(addr, source="127.0.0.2")
        r.check(st == 200, "peer 127.0.0.2 (in listen_allow) served: %r" % st)

        bad = harness.batches_failing(env, BODY, 30, 10)
        r.check(not bad, "nginx from 127.0.0.2: 30 batches all 200 (%r)" % bad[:5])

        n = harness.metric(env, "enrichd_listen_refused_total")
        r.check(n == refused, "/metrics enrichd_listen_refused_total = %d (got %r)" % (refused, n))
        acc = harness.metric(env, "enrichd_requests_accepted_total")
        r.check(acc == accepted0 + 31, "refused peers never reached a request: accepted "
                "%r -> %r (31 served)" % (accepted0, acc))
        st, _, data = env.request("/status", method="GET")
        doc = json.loads(data) if st == 200 else {}
        r.check(doc.get("listen_refused") == refused, "/status listen_refused = %d (got %r)"
                % (refused, doc.get("listen_refused")))
        logs = env.log_events("connection refused: peer not in listen_allow")
        r.check(logs and logs[0].get("peer") == "127.0.0.1",
                "refusal logged with the peer (rate-limited): %r" % logs[:1])

        # HUP with the list widened: the next workers let 127.0.0.1 in.
        with open(env.conf) as f:
            text = f.read()
        with open(env.conf, "w") as f:
            f.write(text.replace("listen_allow = 127.0.0.2", "listen_allow = 127.0.0.2, 127.0.0.1"))
        env.signal(1)
        env.wait_log("reload done", timeout=10)
        st, _, _ = raw(addr)
        r.check(st == 200, "after HUP naming 127.0.0.1: that peer is served (%r)" % st)
        r.check(not [e for e in harness.worker_exit_reasons(env) if e not in ("reload",)],
                "no worker exit but the reload: %r" % harness.worker_exit_reasons(env))


def test_dual_stack(r):
    """[::]:PORT takes IPv4 clients as ::ffff:A.B.C.D: each list below is
    matched the way allow.h says (a HUP per list: new workers)."""
    port = harness.free_port()
    with harness.Env(name="allow-dual") as env:
        base = "listen = [::]:%d\nworkers = 1\n" % port
        env.start_enrichd(base + "listen_allow = ::/0\n")
        env.wait_workers(1)
        cases = (("::/0", 200), ("127.0.0.0/8", 200), ("::1", None), ("10.0.0.0/8 ::1", None),
                 ("::ffff:0:0/96", 200))
        for i, (allow, want) in enumerate(cases):
            if i:
                env.write_config(base + "listen_allow = %s\n" % allow)
                env.signal(1)
                env.wait_log("reload done", count=i, timeout=10)
            st, _, _ = raw(("127.0.0.1", port))
            r.check(st == want, "dual stack, listen_allow = %s: the IPv4 client 127.0.0.1 is %s "
                    "(status %r)" % (allow, "served" if want else "refused", st))
        st6, _, _ = raw(("::1", port))
        r.check(st6 is None, "the mapped range takes no native IPv6 peer: ::1 refused (%r)" % st6)


def test_unix_not_filtered(r):
    with harness.Env(name="allow-unix") as env:
        env.start_enrichd("listen_allow = 127.0.0.2\nworkers = 1\n")
        st, _, _ = raw(env.sock)
        r.check(st == 200, "unix socket: served whatever listen_allow says (%r)" % st)


def test_bad_values(r):
    exe = os.path.join(harness.build_dir(), "enrichd")
    with harness.Env(name="allow-t") as env:
        for value, want in (("10.0.0.1/8", "bits set past /8"),
                            ("localhost", "not an IPv4 or IPv6 address"),
                            ("127.0.0.1/33", "prefix must be 0..32"),
                            ("::1/200", "prefix must be 0..128"),
                            ("", "empty"),
                            ("127.0.0.1;::1", "not an IPv4 or IPv6 address"),
                            ("::ffff:127.0.0.1", "IPv4-mapped: such peers are matched as IPv4 "
                             "addresses (write 127.0.0.1)"),
                            ("0.0.0.0", "the unspecified address"),
                            ("224.0.0.0/4", "multicast")):
            env.write_config("workers = 1\nlisten_allow = %s\n" % value)
            cp = subprocess.run([exe, "-t", "-c", env.conf], capture_output=True, text=True,
                                timeout=10)
            out = cp.stdout + cp.stderr
            with open(env.conf) as f:
                line = [l.startswith("listen_allow") for l in f.read().splitlines()].index(True) + 1
            r.check(cp.returncode != 0 and ("%s:%d: listen_allow: " % (env.conf, line)) in out
                    and want in out, "-t refuses listen_allow = %r with FILE:LINE: key: %s "
                    "(rc %d: %s)" % (value, want, cp.returncode, out.strip()[:200]))
        env.write_config("workers = 1\nlisten_allow = 127.0.0.0/8, ::1 10.0.0.0/8\n")
        cp = subprocess.run([exe, "-t", "-c", env.conf], capture_output=True, text=True,
                            timeout=10)
        r.check(cp.returncode == 0, "-t accepts a good list (%s)" % (cp.stdout + cp.stderr)[:200])


if __name__ == "__main__":
    harness.run_tests(test_bad_values, test_tcp, test_dual_stack, test_unix_not_filtered)
