#!/usr/bin/env python3
"""test_upstream_tls.py: the provider as it really is, HTTPS across a
network path, through the real stack (client -> nginx -> enrichd ->
delay proxy -> nginx as TLS terminator -> the fake upstream); the
fixtures are tests/integration/tls_fixture.py and tests/delay_proxy.py.

  (a) HTTPS 50 ms away, the provider closing every connection after 100
      requests, workers 2, the defaults plus upstream_url and
      upstream_ca_file: after a warm-up, BATCHES sequential batches of 20
      new ids: >= 99 % of records enriched, batch p50 <= RTT + 10 ms,
      the same workers throughout with their descriptors flat, TLS 1.2+
      on every request, reconnections resuming their TLS session,
      connections warmed with HEAD
  (b) plain HTTP at the same round trip, the control, its batches
      interleaved with (a)'s: when it misses a goal itself the machine is
      too loaded for the goal to say anything, and HTTPS is held to it
      instead (p50 within CONTROL_MARGIN_MS, share within
      CONTROL_SHARE_SLACK)
  (c) a CA enrichd does not trust (no upstream_ca_file), a certificate for
      another name, an expired one: every record degraded with its local
      values, counted as kind tls (not connect, not timeout) in /metrics
      and /status, the provider never asked, the log saying why in words
  (d) mutual TLS: a provider that requires a client certificate serves
      one given upstream_client_cert / upstream_client_key, and refuses
      (degraded) without
  (e) two OpenSSLs in one process: enrichd's static libcrypto exports no
      symbol (`nm -D --defined-only`), libcurl's libssl and libcrypto are
      loaded beside it in a worker that has made a TLS exchange.  The
      same exchange under valgrind is tests/valgrind.py (make valgrind);
      under ASan it is this suite in make san-test.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import tls_fixture  # noqa: E402
from tls_fixture import batch  # noqa: E402
from harness import degraded, fake_poster, get_json, local_poster  # noqa: E402

RTT_MS = 50
BATCHES = int(os.environ.get("ENR_TLS_BATCHES", "300"))
WARM_BATCHES = 20
IDS = tls_fixture.BATCH_IDS
WORKERS = 2
MAX_CONNECTIONS = 4          # the shipped upstream_max_connections
P50_MARGIN_MS = 10           # the goal: p50 <= one round trip + 10 ms
ENRICHED_GOAL = 0.99
CONTROL_MARGIN_MS = 5        # on a loaded machine: HTTPS's p50 within this of plain HTTP's
CONTROL_SHARE_SLACK = 0.005  # and its enriched share within this of plain HTTP's
CONTROL_FLOOR = 0.9          # a control enriching less than this says nothing
SAN = harness.is_sanitized(harness.build_dir())
# Sanitizer builds are big: recycling for RSS would change the workers
# under the descriptor check.
BIG = "rss_soft_mb = 4000\nrss_hard_mb = 8000\n" if SAN else ""
# (c) and (d) check how a call ends (refused as tls, accepted with a
# client certificate), not when or what it does to the pool's queue:
# deadlines no handshake outlasts, the connection's set-up bound among
# them, so the call ends as the handshake does (on a loaded machine a
# handshake that fails took past the shipped 150 ms, and the call was
# counted timeout before it could fail as tls), and room in the queue and
# the request's time.
PATIENT = {"queue_timeout_ms": 10000, "request_timeout_ms": 10000, "upstream_timeout_ms": 5000,
           "upstream_connect_timeout_ms": 5000}
# OpenSSL's exported names (libcrypto's and libssl's prefixes).
OPENSSL_SYMBOL = re.compile(r"^(SSL|EVP|CRYPTO|OPENSSL|OSSL|BIO|X509|ERR|RAND|PEM|ASN1|BN|"
                            r"EC|ECDSA|ECDH|RSA|DH|DSA|HMAC|CMAC|SHA\d*|MD5|OBJ|PKCS\d*|d2i|i2d|"
                            r"TLS|DTLS|CONF|ENGINE|UI|OCSP|CMS|CT|SCT|COMP)_")


def conf(url, **over):
    """The defaults plus these keys (and the test's sockets)."""
    keys = dict(workers=WORKERS, upstream_url=url)
    keys.update(over)
    return BIG + "".join("%s = %s\n" % kv for kv in keys.items())


def measure(r, prov, runs):
    """(a) and (b) side by side (tls_fixture.side_by_side); checks what
    holds for both, returns {label: results}."""
    out = tls_fixture.side_by_side(
        prov, [(kind, label, conf(prov.url(kind, RTT_MS), **extra))
               for kind, label, extra in runs], RTT_MS, BATCHES, WARM_BATCHES, WORKERS)
    for label, res in out.items():
        check_run(r, label, res)
    return out


def check_run(r, label, res):
    """What holds for plain HTTP and HTTPS alike."""
    s0, s1, log = res["s0"], res["s1"], res["log"]
    r.check(res["bad"] == 0, "%s: every batch answered 200 with every record (%d not)"
            % (label, res["bad"]))
    r.check(sorted(s0) == sorted(s1) and len(s0) == WORKERS,
            "%s: the same %d workers throughout: %s %s" % (label, WORKERS, sorted(s0), sorted(s1)))
    for p in s0:
        a, b = s0[p], s1.get(p, (0, 0))
        r.check(a[0] - a[1] == b[0] - b[1],
                "%s: worker %d: descriptors less provider sockets flat: %d -> %d (total %d -> %d)"
                % (label, p, a[0] - a[1], b[0] - b[1], a[0], b[0]))
        r.check(max(a[1], b[1]) <= MAX_CONNECTIONS, "%s: worker %d: provider sockets within %d: "
                "%d %d" % (label, p, MAX_CONNECTIONS, a[1], b[1]))
    r.check(res["proxy"]["accepted"] >= res["conns"] > 0,
            "%s: every connection the provider saw came through the %d ms path (%d accepted "
            "there, %d seen)" % (label, RTT_MS, res["proxy"]["accepted"], res["conns"]))
    cycled = sum(1 for x in log if x["nth"] == tls_fixture.KEEPALIVE_REQUESTS)
    r.check(cycled >= 1, "%s: the provider closed connections after %d requests during the run "
            "(%d times, %d requests)" % (label, tls_fixture.KEEPALIVE_REQUESTS, cycled, len(log)))
    print("%s: %d batches of %d new ids, %.0f ms away: enriched %.1f %%, degraded batches %d, "
          "p50 %.1f ms, p99 %.1f ms; provider requests %d (HEAD %d), connections %d, "
          "cycled %d" % (label, BATCHES, IDS, RTT_MS, 100 * res["share"],
                         res["degraded_batches"], res["p50"], res["p99"], len(log),
                         sum(1 for x in log if x["method"] == "HEAD"),
                         len(set(x["conn"] for x in log)), cycled))
    # What the provider saw around each degraded batch: which connections
    # were new then (n-th request 1), resumed or not.
    for t0, t1 in res["degraded_at"][:5]:
        near = [x for x in log if t0 - 0.05 <= x["at"] <= t1 + 0.05]
        print("  %s: degraded batch at +%.2f s, %.0f ms: provider requests ending then %s"
              % (label, t0 - res["t0"], (t1 - t0) * 1000,
                 [(x["conn"], x["nth"], x["method"], "r" if x["reused"] else "-") for x in near]))


def test_near(r, prov, state):
    """(a) HTTPS and (b) plain HTTP, 50 ms away, side by side."""
    out = measure(r, prov, [("http", "http", {}),
                            ("https", "https", {"upstream_ca_file": prov.pki.ca})])
    ctl, res = out["http"], out["https"]
    goal_ms = RTT_MS + P50_MARGIN_MS
    # The goals are absolute, and this machine is shared: when the plain
    # HTTP control, measured at the same moments, misses one itself, the
    # machine's load is past what the goal can say and HTTPS is held to
    # the control instead (no worse than plain HTTP on the same path).
    share_min = min(ENRICHED_GOAL, max(CONTROL_FLOOR, ctl["share"] - CONTROL_SHARE_SLACK))
    limit_ms = max(goal_ms, ctl["p50"] + CONTROL_MARGIN_MS)
    print("goals (>= %.0f %% enriched, p50 <= %d ms): http %s, https %s"
          % (100 * ENRICHED_GOAL, goal_ms,
             "met" if ctl["share"] >= ENRICHED_GOAL and ctl["p50"] <= goal_ms else "MISSED",
             "met" if res["share"] >= ENRICHED_GOAL and res["p50"] <= goal_ms else "MISSED"))
    r.check(res["share"] >= share_min,
            "https: >= %.1f %% of records enriched (99 %%, or the control's %.1f %% less %.1f): "
            "%.1f %% (%d of %d), %d of %d batches degraded"
            % (100 * share_min, 100 * ctl["share"], 100 * CONTROL_SHARE_SLACK,
               100 * res["share"], res["enriched"], res["records"], res["degraded_batches"],
               BATCHES))
    r.goal(res["p50"] <= limit_ms,
           "https: batch p50 %.1f ms <= %.1f ms (RTT + %d ms, or the control's %.1f ms + %d ms)"
           % (res["p50"], limit_ms, P50_MARGIN_MS, ctl["p50"], CONTROL_MARGIN_MS), res["p50"], limit_ms)
    r.check(ctl["share"] >= CONTROL_FLOOR, "http: the control enriches (>= %.0f %%): %.1f %%"
            % (100 * CONTROL_FLOOR, 100 * ctl["share"]))
    protos = sorted(set(x["protocol"] for x in res["log"]))
    r.check(protos and all(p in ("TLSv1.2", "TLSv1.3") for p in protos),
            "https: every request over TLS 1.2 or later: %s" % protos)
    conns = {}
    for x in res["log"]:
        if x["nth"] == 1:
            conns[x["conn"]] = x["reused"]
    resumed = sum(conns.values())
    r.check(len(conns) >= 1 and resumed >= len(conns) / 2,
            "https: new connections during the run resume their TLS session: %d of %d"
            % (resumed, len(conns)))
    r.check(res["heads"] > 0, "https: connections warmed with HEAD {upstream_url}: %d"
            % res["heads"])
    m0, m1 = res["m0"], res["m1"]
    r.check("enrichd_upstream_late_total" in m1, "enrichd_upstream_late_total is exported")
    d = lambda k: m1.get(k, 0) - m0.get(k, 0)  # noqa: E731
    fails = {k: d('enrichd_upstream_failures_total{kind="%s"}' % k)
             for k in ("timeout", "connect", "tls", "status", "body", "deadline")}
    print("https: failures during the run %s, late %d, calls %d" %
          (fails, d("enrichd_upstream_late_total"), d("enrichd_upstream_calls_total")))


TLS_FAILURES = [
    # (listener, upstream_ca_file given, the log's words)
    ("https", False, "certificate not trusted"),
    ("wrong_name", True, "certificate is for %s, not %s" % (tls_fixture.WRONG_NAME,
                                                           tls_fixture.HOST)),
    ("expired", True, "certificate expired"),
]


def serving(env, n):
    """Waits until env's n workers each wait for a connection.  A worker
    sets up its upstream connections (libcurl loaded, the CA store read,
    the warm-up handshake) before it takes its first one: 1.5-2 s on the
    sanitizer build beside other stages, past queue_timeout_ms (1 s), so
    a batch sent as soon as the worker exists was shed with 503."""
    for pid in env.wait_workers(n):
        harness.wait_worker_listening(pid)


def test_refused(r, prov, state):
    """(c) untrusted, misnamed, expired: never accepted."""
    for kind, with_ca, words in TLS_FAILURES:
        over = dict(PATIENT, workers=1)
        if with_ca:
            over["upstream_ca_file"] = prov.pki.ca
        seen0 = len(prov.nginx.requests(kind))
        data0 = prov.fake.stats()["data_requests"]
        with harness.Env(name="up-tls-" + kind) as env:
            env.start_enrichd(conf(prov.url(kind), **over))
            env.start_nginx()
            serving(env, 1)
            total = deg = local = 0
            for i in range(3):
                recs = batch("bad-" + kind, i, 9)
                st, h, lines = harness.post(env, recs)
                total += len(recs)
                deg += degraded(h) if st == 200 else 0
                local += sum(1 for rec, l in zip(recs, lines)
                             if l["poster"] == local_poster(rec["provider"], rec["id"].lower()))
            kinds = harness.fail_kinds(env)
            status = get_json(env, "/status").get("upstream", {}).get("failures", {})
            said = harness.poll(lambda: [e for e in env.log_events()
                                         if words in e.get("reason", "")], 3)
        r.check(deg == total, "%s: every record degraded: %d of %d" % (kind, deg, total))
        r.check(local == total, "%s: every record kept its local poster: %d of %d"
                % (kind, local, total))
        r.check(kinds["tls"] > 0 and kinds["connect"] == kinds["timeout"] == 0,
                "%s: counted as kind tls, not connect or timeout: %s" % (kind, kinds))
        r.check(status.get("tls", 0) > 0, "%s: /status says tls: %s" % (kind, status))
        r.check(prov.fake.stats()["data_requests"] == data0
                and len(prov.nginx.requests(kind)) == seen0,
                "%s: the provider was never asked (no request passed the handshake)" % kind)
        r.check(bool(said), "%s: the log says reason=%r" % (kind, words))
        if said:
            print("%s: %s" % (kind, said[0]))


def test_mtls(r, prov, state):
    """(d) a provider that requires a client certificate."""
    cert, key = prov.pki.cert["client"]
    for given in (True, False):
        over = dict(PATIENT, workers=1, upstream_ca_file=prov.pki.ca)
        if given:
            over.update(upstream_client_cert=cert, upstream_client_key=key)
        seen0 = len(prov.nginx.requests("mtls"))
        with harness.Env(name="up-mtls") as env:
            env.start_enrichd(conf(prov.url("mtls"), **over))
            env.start_nginx()
            serving(env, 1)
            recs = batch("mtls-%d" % given, 0, 12)
            st, h, lines = harness.post(env, recs)
            enriched = sum(1 for rec, l in zip(recs, lines)
                           if l["poster"] == fake_poster(rec["provider"], rec["id"]))
            if given:
                state["maps"] = maps_of(env.worker_pids())
        log = prov.nginx.requests("mtls")[seen0:]
        if given:
            r.check(st == 200 and enriched == len(recs) and degraded(h) == 0,
                    "mtls: with upstream_client_cert/key every record enriched: %d of %d"
                    % (enriched, len(recs)))
            r.check(log and all(x["status"] == 200 for x in log),
                    "mtls: the provider accepted the client certificate: %s"
                    % sorted(set(x["status"] for x in log)))
        else:
            r.check(st == 200 and enriched == 0 and degraded(h) == len(recs),
                    "mtls: without a client certificate nothing enriched, all degraded: "
                    "%d enriched, degraded %d" % (enriched, degraded(h)))


def maps_of(pids):
    out = set()
    for p in pids:
        try:
            with open("/proc/%d/maps" % p) as f:
                for line in f:
                    path = line.split()[-1] if len(line.split()) >= 6 else ""
                    out.add(os.path.basename(path))
        except OSError:
            pass
    return out


def test_two_openssls(r, prov, state):
    """(e) enrichd's own libcrypto (static) and libcurl's (dynamic)."""
    exe = os.path.join(harness.build_dir(), "enrichd")
    dyn = subprocess.run(["nm", "-D", "--defined-only", exe], capture_output=True, text=True,
                         timeout=60)
    names = [l.split()[-1].split("@")[0] for l in dyn.stdout.splitlines() if l.strip()]
    leaked = [n for n in names if OPENSSL_SYMBOL.match(n)]
    r.check(dyn.returncode == 0 and not leaked,
            "enrichd exports no OpenSSL symbol (%d exported, OpenSSL's: %s)"
            % (len(names), leaked[:10]))
    full = subprocess.run(["nm", exe], capture_output=True, text=True, timeout=60)
    static = [l for l in full.stdout.splitlines() if re.search(r" [Tt] (EVP|CRYPTO)_", l)]
    with open(exe, "rb") as f:
        has_version = b"OpenSSL 3" in f.read()
    r.check(bool(static) or has_version,
            "enrichd carries its own static libcrypto (%d EVP_/CRYPTO_ functions)" % len(static))
    maps = state.get("maps", set())
    ssl = sorted(m for m in maps if m.startswith(("libssl.so", "libcrypto.so")))
    r.check(any(m.startswith("libssl.so") for m in ssl) and
            any(m.startswith("libcrypto.so") for m in ssl),
            "a worker that made a TLS exchange has libcurl's OpenSSL loaded beside its own: %s"
            % ssl)


def main():
    r = harness.Results()
    state = {}
    t0 = time.monotonic()
    with tls_fixture.Provider() as prov:
        r.run(test_near, prov, state)
        r.run(test_refused, prov, state)
        r.run(test_mtls, prov, state)
        r.run(test_two_openssls, prov, state)
    print("test_upstream_tls: %.1f s" % (time.monotonic() - t0))
    r.done()


if __name__ == "__main__":
    main()
