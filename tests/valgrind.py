#!/usr/bin/env python3
"""make valgrind: a worker's request loop under valgrind (memcheck).

Starts the real enrichd (master + 1 worker + status process) under
valgrind, which follows forks, puts it behind the real nginx, sends
requests of every kind (valid batches small and large, every contract
rejection, 405, 413), stops it with TERM (the graceful path a worker
takes in production) and reads each process's report: no memory error,
and no byte definitely or indirectly lost, however many requests ran.
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

REQUESTS = 300


def main():
    r = harness.Results()
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ENR_BUILD", "build")
    with harness.Env(build=build, name="valgrind") as env:
        env.write_config("workers = 1\nmax_records = 500\nmax_body_bytes = 2000000\n"
                         "request_timeout_ms = 20000\nrss_soft_mb = 2000\nrss_hard_mb = 4000\n")
        vglog = os.path.join(env.dir, "vg.%p.log")
        cmd = ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect",
               "--errors-for-leak-kinds=definite,indirect", "--track-fds=no",
               "--log-file=" + vglog, os.path.join(build, "enrichd"), "-c", env.conf]
        env._log_fh = open(env.enrichd_log, "ab")
        env.enrichd = subprocess.Popen(cmd, stdout=env._log_fh, stderr=env._log_fh,
                                       start_new_session=True)
        env.procs.append(env.enrichd)
        env.wait_log("ready", timeout=60)
        env.start_nginx()
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
        env.signal(signal.SIGTERM)
        rc = env.wait_exit(120)
        r.check(rc == 0, "enrichd exits 0 on TERM under valgrind (rc %s)" % rc)
        logs = glob.glob(os.path.join(env.dir, "vg.*.log"))
        r.check(len(logs) >= 3, "a report per process (master, worker, status): %d" % len(logs))
        for path in logs:
            text = open(path, errors="replace").read()
            errors = re.findall(r"ERROR SUMMARY: (\d+) errors", text)
            lost = re.findall(r"(definitely|indirectly) lost: ([\d,]+) bytes", text)
            bad = [x for x in lost if x[1] != "0"]
            if not r.check(errors and not bad and all(e == "0" for e in errors),
                           "%s: no memory error, no leak" % os.path.basename(path)):
                print(text[-4000:])
    r.done()


if __name__ == "__main__":
    main()
