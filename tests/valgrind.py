#!/usr/bin/env python3
"""make valgrind: a worker's request loop under valgrind (memcheck).

Starts the real enrichd (master + 1 worker + status process) under
valgrind, which follows forks, puts it behind the real nginx, sends
requests of every kind (valid batches small and large, every contract
rejection, 405, 413), stops it with TERM (the graceful path a worker
takes in production) and reads each process's report: no memory error,
and no byte definitely or indirectly lost, however many requests ran.
Then the same for a worker enriching over HTTPS (tests/integration/
tls_fixture.py): the TLS exchanges of libcurl's OpenSSL in the process
that also holds enrichd's own.
Ends with "N passed, M failed".
"""
import glob
import os
import re
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "integration"))
import harness  # noqa: E402
import tls_fixture  # noqa: E402

REQUESTS = 300
TLS_BATCHES = 50             # 150 calls: past the provider's 100 requests per connection
TLS_TIMEOUT_MS = 10000


def start(env, conf):
    """enrichd under memcheck (following its forks), then nginx."""
    env.write_config(conf)
    vglog = os.path.join(env.dir, "vg.%p.log")
    cmd = ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect",
           "--errors-for-leak-kinds=definite,indirect", "--track-fds=no",
           "--log-file=" + vglog, os.path.join(env.build, "enrichd"), "-c", env.conf]
    env._log_fh = open(env.enrichd_log, "ab")
    env.enrichd = subprocess.Popen(cmd, stdout=env._log_fh, stderr=env._log_fh,
                                   start_new_session=True)
    env.procs.append(env.enrichd)
    env.wait_log("ready", timeout=60)
    env.start_nginx()


def stop_and_read(r, env, what):
    """TERM (the graceful path a worker takes in production), then each
    process's report: no memory error, no byte definitely or indirectly lost."""
    env.signal(signal.SIGTERM)
    rc = env.wait_exit(120)
    r.check(rc == 0, "%s: enrichd exits 0 on TERM under valgrind (rc %s)" % (what, rc))
    logs = glob.glob(os.path.join(env.dir, "vg.*.log"))
    r.check(len(logs) >= 3, "%s: a report per process (master, worker, status): %d"
            % (what, len(logs)))
    for path in logs:
        text = open(path, errors="replace").read()
        errors = re.findall(r"ERROR SUMMARY: (\d+) errors", text)
        lost = re.findall(r"(definitely|indirectly) lost: ([\d,]+) bytes", text)
        bad = [x for x in lost if x[1] != "0"]
        if not r.check(errors and not bad and all(e == "0" for e in errors),
                       "%s: %s: no memory error, no leak" % (what, os.path.basename(path))):
            print(text[-4000:])


def requests(r, build):
    with harness.Env(build=build, name="valgrind") as env:
        start(env, "workers = 1\nmax_records = 500\nmax_body_bytes = 2000000\n"
                   "request_timeout_ms = 20000\nrss_soft_mb = 2000\nrss_hard_mb = 4000\n")
        bodies = [harness.sample_body(200), harness.sample_body(5), b"[]", b"[1,]",
                  b"[null]", b'[{"provider":"yt","id":"a","title":1}]',
                  b'[{"provider":"yt","id":{"toString":1}}]', b"[" + b"{}," * 600 + b"{}]",
                  '[{"provider":"yt","id":"ΣΑΣ İ","title":"ﬁ ①\\ud800"}]'.encode()]
        statuses = {}
        for i in range(REQUESTS):
            st, _, _ = env.request("/v1/enrich", body=bodies[i % len(bodies)], timeout=60)
            statuses[st] = statuses.get(st, 0) + 1
        st, _, _ = env.request("/v1/enrich", method="GET", timeout=60)
        statuses[st] = statuses.get(st, 0) + 1
        r.check(statuses.get(200, 0) > 0 and statuses.get(400, 0) > 0 and statuses.get(413, 0) > 0
                and statuses.get(405, 0) == 1, "every kind of answer served: %s" % statuses)
        stop_and_read(r, env, "requests")


def tls(r, build):
    """Enrichment over HTTPS (libcurl's libssl and libcrypto beside
    enrichd's static libcrypto) from a provider that closes every
    connection after 100 requests: handshakes, reconnections (resumed
    sessions) and the replies read, then the same reports.  The deadlines
    are raised for valgrind's pace."""
    with tls_fixture.Provider() as prov, harness.Env(build=build, name="valgrind-tls") as env:
        # A secret too: its mapping made, inherited, unmapped by the status
        # process and wiped at the master's exit, under memcheck.
        key = os.path.join(env.dir, "key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, b"valgrind-k3y\n")
        os.close(fd)
        start(env, "workers = 1\nrequest_timeout_ms = 30000\nrss_soft_mb = 2000\n"
                   "upstream_secret_file = %s\nupstream_secret_header = X-Api-Key\n"
                   "rss_hard_mb = 4000\nupstream_url = %s\nupstream_ca_file = %s\n"
                   "upstream_timeout_ms = %d\nupstream_connect_timeout_ms = %d\n"
                   # One connection, so the 150 calls go past the provider's
                   # 100 requests on it and the reconnection is exercised.
                   "upstream_max_connections = 1\nupstream_warm_connections = 1\n"
                   % (key, prov.url("https"), prov.pki.ca, TLS_TIMEOUT_MS, TLS_TIMEOUT_MS))
        enriched = records = 0
        for i in range(TLS_BATCHES):
            recs = [{"provider": ("yt", "vm", "dm")[k % 3], "id": "Vg-%d-%d" % (i, k)}
                    for k in range(9)]
            st, _, lines = harness.post(env, recs)
            records += len(recs)
            enriched += sum(1 for rec, l in zip(recs, lines)
                            if l["poster"] == harness.fake_poster(rec["provider"], rec["id"]))
        log = prov.nginx.requests("https")
        conns = set(x["conn"] for x in log)
        r.check(enriched >= records // 2, "tls: records enriched over HTTPS: %d of %d"
                % (enriched, records))
        r.check(len(conns) > 1 and any(x["nth"] == tls_fixture.KEEPALIVE_REQUESTS for x in log),
                "tls: the provider cycled a connection and enrichd reconnected: %d requests on "
                "%d connections" % (len(log), len(conns)))
        print("tls: %d of %d records enriched, %d provider requests on %d connections (%d "
              "resumed)" % (enriched, records, len(log), len(conns),
                            sum(1 for x in log if x["nth"] == 1 and x["reused"])))
        stop_and_read(r, env, "tls")


def main():
    r = harness.Results()
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ENR_BUILD", "build")
    requests(r, build)
    tls(r, build)
    r.done()


if __name__ == "__main__":
    main()
