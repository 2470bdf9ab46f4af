#!/usr/bin/env python3
"""test_config_reload.py: a bad reload is never an outage.

1. Every case of tests/hostile/bad_config/cases.txt (bad values for every
   key, cross-key rules, URLs a worker's upstream client would refuse at
   start) is refused by `enrichd -t`: non-zero exit, "FILE:LINE: key:"
   with the line of that key.  The corpus covers every key of the
   built-in configuration (its rows, src/base/confkeys.inc), so a new key
   without a bad value here fails this test.
2. The same cases sent with HUP to a daemon under load: each is refused
   ("reload refused" naming FILE:LINE: key), zero failed requests, no
   worker replaced, the generation unchanged.
3. A configuration that validates but whose workers cannot start (test
   hooks: ENRICHD_TEST_CRASH_FILE aborts new workers at start): on HUP the
   old generation keeps serving (zero failed requests, same workers), the
   failure is in the log, in /status, /healthz and STATUS=, the probe is
   retried with a back-off, and once the cause is gone the reload
   completes on its own.
4. Each key whose row says RESTART (src/base/confkeys.inc: the sockets'
   settings), changed by a HUP on its own: the reload is done with every
   other change applied, the warning says the key changes only on restart
   and names it, and the sockets are the ones bound at start (same files, same
   mode and group, the same backlog) and still serve.
"""
import grp
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402

CASES = os.path.join(HERE, "bad_config", "cases.txt")
sys.path.insert(0, os.path.join(harness.ROOT, "scripts"))
import confkeys  # noqa: E402


def load_cases():
    out = []
    with open(CASES, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            key, _, rest = line.partition("\t")
            lines = [l.strip().replace("\\t", "\t") for l in rest.split(" ;; ")]
            out.append((n, key, lines))
    return out


def builtin_keys():
    """The keys of the built-in configuration, in the rows' order."""
    return [k["name"] for k in confkeys.rows()]


def key_of(line):
    return line.split("=", 1)[0].strip() if "=" in line else None


def write_case(path, base, lines):
    """base lines, minus the keys the case sets, then the case's lines.
    Returns the 1-based line of the case's last line for each key."""
    mine = set(key_of(l) for l in lines)
    text = [l for l in base if key_of(l) not in mine] + lines
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n")
    where = {}
    for i, l in enumerate(text, 1):
        where[key_of(l) if key_of(l) else "(none)"] = i
    last = len(text)
    return where, last


def expected_line(key, where, last):
    return where.get(key, last) if key != "(none)" else last


def test_check_refuses_corpus(r):
    cases = load_cases()
    keys = builtin_keys()
    covered = set(k for _, k, _ in cases)
    missing = [k for k in keys if k not in covered]
    r.check(len(keys) >= 30 and not missing,
            "the corpus has bad values for every key (%d keys; missing %r)" % (len(keys), missing))
    enrichd = os.path.join(harness.build_dir(), "enrichd")
    with harness.Env(name="hostile-conf-t") as env:
        base = ["listen = %s" % env.sock, "status_listen = %s" % env.status_sock,
                "listen_group =", "workers = 2"]
        path = os.path.join(env.dir, "bad.conf")
        wrong = []
        for n, key, lines in cases:
            where, last = write_case(path, base, lines)
            p = subprocess.run([enrichd, "-t", "-c", path], capture_output=True, text=True,
                               timeout=10)
            msg = p.stdout + p.stderr
            want = "%s:%d: %s: " % (path, expected_line(key, where, last), key)
            if p.returncode == 0 or want not in msg:
                wrong.append((n, p.returncode, msg.strip()[-160:], want[len(env.dir):]))
        r.check(not wrong, "-t refuses all %d cases naming FILE:LINE: key (%d wrong: %r)"
                % (len(cases), len(wrong), wrong[:5]))
        # The base itself is good: the refusals are the cases' doing.
        write_case(path, base, [])
        p = subprocess.run([enrichd, "-t", "-c", path], capture_output=True, text=True,
                           timeout=10)
        r.check(p.returncode == 0, "-t accepts the base configuration: %r" % p.stderr)
        print("-t: %d cases over %d keys, %d refused as expected"
              % (len(cases), len(covered), len(cases) - len(wrong)))


def test_hup_refuses_corpus(r):
    cases = load_cases()
    with harness.Env(name="hostile-conf-hup") as env:
        # (no recycling by request count: thousands of requests run across
        # the HUPs, and the check is that no reload replaced a worker)
        env.start_enrichd("workers = 3\nmax_requests = 0\n", notify=True)
        env.start_nginx()
        before = set(env.wait_workers(3))
        good = open(env.conf).read().splitlines()
        load = harness.Load(env, clients=4, body=harness.sample_body(20))
        harness.wait_for(lambda: load.count() > 20, 20, what="load")
        wrong = []
        t0 = time.monotonic()
        for i, (n, key, lines) in enumerate(cases):
            where, last = write_case(env.conf, good, lines)
            env.signal(signal.SIGHUP)
            try:
                evs = env.wait_log("reload refused: configuration invalid, keeping the old one",
                                   count=i + 1, timeout=5)
            except TimeoutError:
                wrong.append((n, "no refusal"))
                break
            want = "%s:%d: %s: " % (env.conf, expected_line(key, where, last), key)
            if want not in evs[i].get("error", ""):
                wrong.append((n, evs[i].get("error"), want))
        elapsed = time.monotonic() - t0
        with open(env.conf, "w") as f:
            f.write("\n".join(good) + "\n")
        time.sleep(0.3)
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(not wrong, "HUP refuses all %d cases naming FILE:LINE: key (%d wrong: %r)"
                % (len(cases), len(wrong), wrong[:5]))
        r.check(len(res) > 100, "load ran across the HUPs: %d requests" % len(res))
        r.check(not fails, "zero failed requests across %d refused reloads (%d failed: %r)"
                % (len(cases), len(fails), fails[:3]))
        r.check(not env.log_events("worker exit"), "no worker replaced: %r"
                % [e.get("reason") for e in env.log_events("worker exit")][:5])
        r.check(not env.log_events("reload"), "no reload committed")
        r.check(set(env.wait_workers(3)) == before, "the same workers serve")
        st, _, body = env.request("/status", method="GET")
        doc = json.loads(body)
        r.check(doc.get("generation") == 0, "generation unchanged: %r" % doc.get("generation"))
        r.check(any("reload refused" in s for s in env.notify.values("STATUS")),
                "STATUS= says the reload was refused")
        st, _, body = env.request("/metrics", method="GET")
        n = [l.split()[1] for l in body.decode().splitlines()
             if l.startswith("enrichd_reload_failures_total ")]
        r.check(n == [str(len(cases))], "every refused HUP counted in "
                "enrichd_reload_failures_total: %r of %d" % (n, len(cases)))
        r.check(doc.get("reload", {}).get("last_error", "").startswith("refused: "),
                "/status reload.last_error says the last was refused: %r" % doc.get("reload"))
        print("HUP: %d refused reloads in %.1f s under load, %d requests, %d failed"
              % (len(cases), elapsed, len(res), len(fails)))


def test_new_workers_cannot_start(r):
    with harness.Env(build=harness.hooks_build_dir(), name="hostile-conf-crash") as env:
        crash = os.path.join(env.dir, "crash-new-workers")
        env.start_enrichd("workers = 3\n", notify=True, env={"ENRICHD_TEST_CRASH_FILE": crash})
        env.start_nginx()
        before = set(env.wait_workers(3))
        load = harness.Load(env, clients=4, body=harness.sample_body(20))
        harness.wait_for(lambda: load.count() > 20, 20, what="load")
        # A valid new configuration; every worker that starts now aborts.
        open(crash, "w").close()
        env.write_config("workers = 3\nslow_request_ms = 400\n")
        env.signal(signal.SIGHUP)
        fails_ev = env.wait_log("reload failed: a worker of the new configuration did not "
                                "start; the old configuration keeps serving", count=2, timeout=10)
        n_mid = load.count()
        harness.wait_for(lambda: load.count() > n_mid + 50, 10, what="load while failing")
        r.check(before <= set(env.worker_pids()),
                "the old workers are all still alive: %r vs %r" % (before, env.worker_pids()))
        r.check(all(e.get("reason") == "crash" for e in fails_ev),
                "the failure names the cause: %r" % [e.get("reason") for e in fails_ev])
        retry = [int(e["retry_in_ms"]) for e in fails_ev]
        r.check(retry[:2] == [1000, 2000], "retried with a doubling back-off: %r" % retry)
        st, _, body = env.request("/status", method="GET")
        doc = json.loads(body)
        rl = doc.get("reload", {})
        r.check(rl.get("pending") is True and rl.get("failures", 0) >= 2 and
                "crash" in rl.get("last_error", ""), "/status shows the failed reload: %r" % rl)
        r.check(doc.get("generation") == 0, "/status: still generation 0: %r"
                % doc.get("generation"))
        st, _, body = env.request("/healthz", method="GET")
        hz = json.loads(body)
        r.check(st == 200 and hz.get("reload", {}).get("pending") is True,
                "/healthz stays 200 (the old pool is fine) and shows the pending reload: %d %r"
                % (st, hz.get("reload")))
        st, _, text = env.request("/metrics", method="GET")
        m = dict(l.rsplit(" ", 1) for l in text.decode().splitlines() if l and l[0] != "#")
        r.check(m.get("enrichd_reload_pending") == "1" and
                int(m.get("enrichd_reload_failures_total", "0")) >= 2,
                "/metrics: reload pending, failures counted: %r %r"
                % (m.get("enrichd_reload_pending"), m.get("enrichd_reload_failures_total")))
        r.check(harness.poll(lambda: any("RELOAD FAILED" in s
                                         for s in env.notify.values("STATUS")), 5),
                "STATUS= says RELOAD FAILED")
        # Said in one wording, whether sent as the probe fails or with the
        # periodic line: the same text after the pool's figures.
        failed = re.compile(r"RELOAD FAILED: new workers do not start \(crash[^)]*\), old "
                            r"configuration serving, attempt \d+, retry in \d+ ms$")

        def kinds():
            said = [s for s in env.notify.values("STATUS") if "RELOAD FAILED" in s]
            return said, {s.startswith("workers ") for s in said}
        harness.poll(lambda: kinds()[1] == {True, False}, 10)
        said, seen = kinds()
        r.check(seen == {True, False} and
                all(failed.search(s) for s in said),
                "STATUS= words a failed reload one way, at the failure and periodically: %r"
                % said[:4])
        r.check(not env.log_events("crash loop: holding forks"),
                "the running pool is not put in a crash loop")
        r.check(not [e for e in env.log_events("worker exit") if e.get("reason") == "reload"],
                "no old worker was asked to stop")

        # The cause goes away: the next probe starts and the reload completes.
        os.unlink(crash)
        env.wait_log("reload done", timeout=40)
        after = set(env.wait_workers(3))
        time.sleep(0.3)
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(len(res) > 100, "load ran: %d requests" % len(res))
        r.check(not fails, "zero failed requests through the failed and the completed reload "
                "(%d failed: %r)" % (len(fails), fails[:3]))
        r.check(not (before & after), "the old generation was replaced once the new one started")
        st, _, body = env.request("/status", method="GET")
        doc = json.loads(body)
        r.check(doc.get("generation") == 1 and doc.get("reload", {}).get("pending") is False,
                "/status: generation 1, nothing pending: %r %r"
                % (doc.get("generation"), doc.get("reload")))
        print("crash at start on HUP: %d probe failures, retries %r ms, %d requests, %d failed"
              % (len(env.log_events("reload failed: a worker of the new configuration did not "
                                    "start; the old configuration keeps serving")),
                 retry, len(res), len(fails)))


RESTART_WARNING = "reload: these keys change only on restart, their running values stay"


def restart_values(env):
    """A valid value other than the running one, for each restart-only key."""
    group = "" if harness.IS_ROOT else grp.getgrgid(os.getgid()).gr_name
    return {"listen": "listen = %s" % os.path.join(env.dir, "other.sock"),
            "status_listen": "status_listen = %s" % os.path.join(env.dir, "other-status.sock"),
            "listen_mode": "listen_mode = 0600",
            "listen_group": "listen_group = %s" % group,
            "listen_backlog": "listen_backlog = 7",
            "budget_file": "budget_file = %s" % os.path.join(env.dir, "other-budget")}


def backlog(path):
    """The listen backlog of the unix socket at path (ss: Send-Q), or None."""
    out = subprocess.run(["ss", "-xlnH"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[4] == path:
            return int(f[3])
    return None


def test_hup_keeps_restart_keys(r):
    keys = [k["name"] for k in confkeys.rows() if k["reload"] == "RESTART"]
    with harness.Env(name="hostile-conf-restart") as env:
        env.start_enrichd("workers = 2\nlisten_backlog = 100\n")
        env.start_nginx()
        env.wait_workers(2)
        values = restart_values(env)
        # The socket settings and the budget's file are the keys only a
        # restart changes (the sockets stay open and the budget's page
        # mapped across generations); each is tried, whatever its row
        # says, and every row that says RESTART has a value here.
        r.check(sorted(keys) == sorted(values),
                "the rows' restart-only keys are the socket settings and budget_file: %r" % keys)
        keys = list(values)
        socks = (env.sock, env.status_sock)
        before = [(os.stat(p).st_ino, os.stat(p).st_mode, os.stat(p).st_gid) for p in socks]
        base = open(env.conf).read().splitlines()
        wrong = []
        for i, key in enumerate(keys):
            workers = 3 if i % 2 == 0 else 2
            write_case(env.conf, base, [values[key], "workers = %d" % workers])
            env.signal(signal.SIGHUP)
            env.wait_log("reload done", count=i + 1, timeout=15)
            warned = env.log_events(RESTART_WARNING)
            applied = len(env.wait_workers(workers))
            if len(warned) != i + 1 or warned[-1].get("keys") != key or applied != workers:
                wrong.append((key, [e.get("keys") for e in warned], applied))
        r.check(not wrong, "each restart-only key's change is kept back with the warning, the "
                "rest applied: %r" % wrong)
        after = [(os.stat(p).st_ino, os.stat(p).st_mode, os.stat(p).st_gid) for p in socks]
        r.check(after == before, "the sockets are the ones bound at start: %r, then %r"
                % (before, after))
        r.check(not os.path.exists(values["listen"].split(" = ")[1]) and
                not os.path.exists(values["status_listen"].split(" = ")[1]) and
                not os.path.exists(values["budget_file"].split(" = ")[1]),
                "no socket nor budget file at the new paths")
        r.check(backlog(env.sock) == 100, "listen_backlog as at start: %r" % backlog(env.sock))
        st, _, _ = env.request("/v1/enrich", body=harness.sample_body(3))
        r.check(st == 200, "the workers' socket serves: %d" % st)
        st, _, body = env.request("/status", method="GET")
        r.check(st == 200 and json.loads(body).get("generation") == len(keys),
                "the status socket serves, every reload committed: %d" % st)


if __name__ == "__main__":
    harness.run_tests(
        test_check_refuses_corpus, test_hup_refuses_corpus, test_new_workers_cannot_start,
        test_hup_keeps_restart_keys)
