#!/usr/bin/env python3
"""test_pool_systemd.py: enrichd under systemd-socket-activate, as systemd
runs it: the sockets are passed in, the NOTIFY_SOCKET is read, and the
notifications come in order (READY, STATUS, WATCHDOG; RELOADING then
READY around HUP; STOPPING on TERM).  Also `-t` on good and bad
configurations, and systemd-analyze on the unit files."""
import grp
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ENRICHD = os.path.join(harness.build_dir(), "enrichd")


def test_activation_and_notify(r):
    with harness.Env(name="pool-sd") as env:
        # WATCHDOG_USEC of 1 s: enrichd must ping about every 500 ms.
        env.start_enrichd("workers = 3\n", activate=True, notify=True, watchdog_usec=1000000)
        env.start_nginx()
        st, hdr, body = env.request("/v1/enrich", harness.sample_body(5))
        r.check(st == 200 and body.count(b"\n") == 5, "first request through activation: %d" % st)
        r.check(hdr.get("x-request-id"), "X-Request-ID returned")
        env.notify.wait("READY", 1, timeout=10)
        # No source is set: nothing on the way to that answer needed
        # libcurl (loading it and its libraries took tens of ms).
        pids = [env.master_pid()] + env.worker_pids()
        for pid in pids:
            with open("/proc/%d/maps" % pid) as f:
                r.check("libcurl" not in f.read(), "pid %d has not loaded libcurl" % pid)
        r.check(len(pids) == 4, "the master and its 3 workers looked at: %r" % pids)
        r.check(env.log_events("socket activation") != [], "used the passed sockets")
        r.check(not env.log_events("cannot open sockets"), "did not bind its own")
        env.notify.wait("WATCHDOG", 3, timeout=10)
        env.notify.wait("STATUS", 1, timeout=10)
        status = env.notify.values("STATUS")[-1]
        r.check("workers 3/3" in status and "req/s" in status and "restarts" in status,
                "STATUS= says workers, req/s, restarts: %r" % status)
        # Watchdog interval: half of WATCHDOG_USEC.
        with env.notify.lock:
            wd = [t for t, kv in env.notify.messages if "WATCHDOG" in kv]
        gaps = [b - a for a, b in zip(wd, wd[1:])]
        r.check(gaps and 0.3 <= min(gaps) and max(gaps) <= 1.0,
                "watchdog pings about every 0.5 s: %r" % [round(g, 2) for g in gaps])

        # Reload: RELOADING=1 with MONOTONIC_USEC, then READY=1.
        n_ready = len(env.notify.values("READY"))
        env.signal(signal.SIGHUP)
        env.notify.wait("RELOADING", 1, timeout=5)
        env.notify.wait("READY", n_ready + 1, timeout=10)
        with env.notify.lock:
            rel = [kv for _, kv in env.notify.messages if "RELOADING" in kv]
        r.check("MONOTONIC_USEC" in rel[0], "RELOADING carries MONOTONIC_USEC")
        env.wait_log("reload done", timeout=10)
        env.wait_workers(3)
        st, _, _ = env.request("/v1/enrich", harness.sample_body(2))
        r.check(st == 200, "serves after reload: %d" % st)

        # Stop: STOPPING=1, exit 0.
        env.signal(signal.SIGTERM)
        code = env.wait_exit(15)
        r.check(code == 0, "exit 0 after TERM (got %r)" % code)
        env.notify.wait("STOPPING", 1, timeout=2)
        seq = env.notify.keys()
        first = {k: seq.index(k) for k in ("READY", "STATUS", "WATCHDOG", "RELOADING", "STOPPING")
                 if k in seq}
        r.check(len(first) == 5, "all five kinds seen: %r" % sorted(first))
        r.check(first.get("READY", 99) < first.get("RELOADING", -1) < first.get("STOPPING", -1),
                "READY < RELOADING < STOPPING in order: %r" % seq)
        r.check(seq[-1] == "STOPPING", "STOPPING is last: %r" % seq[-3:])
        r.check(seq.index("READY") < seq.index("WATCHDOG"), "no watchdog ping before READY")


def child_count(pid):
    """pid's children from one read of /proc (the kernel's list for its
    thread), not a walk over every process: on a loaded machine the walk
    took so long that a 500 ms request was sampled 3 times."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return len(f.read().split())
    except OSError:
        return len(harness.children(pid))


def test_cold_start_first_answer(r):
    """The connection that starts the service is answered by the first
    worker before the rest of the pool is forked: the other forks and
    their start-up would share the CPU with it.  The request is made slow
    (test hook) so that the pool can be watched while it is served, well
    inside the second after which the master forks the rest anyway."""
    import threading
    with harness.Env(build=harness.hooks_build_dir(), name="pool-sd-cold") as env:
        env.start_enrichd("workers = 3\n", activate=True)
        env.start_nginx()
        out = {}

        def first():
            out["st"] = env.request("/v1/enrich", harness.sample_body(2),
                                    headers={"X-Test-Sleep-Ms": "500"})[0]
            out["t"] = time.monotonic()
        t = threading.Thread(target=first)
        t.start()
        samples = []
        while t.is_alive():  # bounded: the request's own timeout
            if env.enrichd.poll() is None:
                samples.append((time.monotonic(), child_count(env.master_pid())))
            time.sleep(0.005)
        t.join()
        # The rest of the pool is forked once the answer is written, which
        # can be before this client has read it: only the samples taken
        # well before the answer arrived say what the request was served
        # beside (the request sleeps 500 ms; the last 150 ms are dropped).
        during = [n for ts, n in samples if ts < out.get("t", 0) - 0.15]
        r.check(out.get("st") == 200, "the first request answered: %r" % out.get("st"))
        r.check(len(during) >= 5 and max(during) == 1,
                "one child (the first worker) while it served the first request: %d (%d samples)"
                % (max(during or [0]), len(during)))
        env.wait_workers(3)
        env.wait_log("ready", timeout=10)
        st, _, _ = env.request("/v1/enrich", harness.sample_body(2))
        r.check(st == 200, "then the whole pool: %d" % st)


def test_start_relocations(r):
    """What the dynamic loader does at every exec, before main(): on this
    kind of VM each page it writes is a fault of tens of us.  enrichd's
    own relative relocations stay few (OpenSSL_version() alone linked
    libcrypto's init and provider code: 17,336 of them, 98 page faults per
    start), and it is bound at once with full RELRO, as the package's
    hardening links it: the master resolves the symbols before the fork,
    not each worker on its first request."""
    if not shutil.which("readelf"):
        r.check(False, "readelf (binutils) is needed to read enrichd's dynamic section")
        return
    out = subprocess.run(["readelf", "-d", ENRICHD], capture_output=True, text=True).stdout
    count = [int(l.split()[-1]) for l in out.splitlines() if "(RELACOUNT)" in l]
    # The sanitizer build links its runtime's own (22,772): judged on
    # the plain build, the one that ships.
    r.check(harness.is_sanitized(harness.build_dir()) or (count and count[0] < 2000),
            "relative relocations at start: %r (< 2,000)" % count)
    r.check("BIND_NOW" in out and "GNU_RELRO" in subprocess.run(
        ["readelf", "-lW", ENRICHD], capture_output=True, text=True).stdout,
        "bound at once (BIND_NOW) with RELRO")


def test_config_check(r):
    d = tempfile.mkdtemp(prefix="pool-conf-")
    try:
        def check(text):
            p = os.path.join(d, "e.conf")
            with open(p, "w") as f:
                f.write(text)
            cp = subprocess.run([ENRICHD, "-t", "-c", p], capture_output=True, text=True)
            return cp.returncode, cp.stdout + cp.stderr, p

        code, out, _ = check("")
        r.check(code == 0, "-t on an empty file (all defaults): %d %s" % (code, out))
        code, out, p = check("workers = 4\n# comment\n\nmax_body_bytes = 1m  # one MiB\n")
        r.check(code == 0, "-t on a good file: %d %s" % (code, out))
        code, out, _ = check(open(os.path.join(harness.ROOT, "conf", "enrichd.conf")).read())
        r.check(code == 0, "-t on conf/enrichd.conf: %s" % out)
        bad = [
            ("workers = 4\nfrobnicate = 1\n", ":2: frobnicate: unknown key"),
            ("workers = zero\n", ":1: workers: "),
            ("workers = 0\n", ":1: workers: 0 is out of range"),
            ("listen_mode = 0999\n", ":1: listen_mode:"),
            ("listen = example.org:9000\n", ":1: listen:"),
            ("rss_soft_mb = 300\nrss_hard_mb = 200\n", ":1: rss_soft_mb: must be below"),
            ("workers = 2\nworkers = 3\n", ":2: workers: duplicate key"),
            ("upstream_url = ftp://x\n", ":1: upstream_url:"),
            ("listen_group = no-such-group-xyz\n", ":1: listen_group: no such group"),
            ("health_max_5xx_ratio = 1.5\n", ":1: health_max_5xx_ratio:"),
            ("just words\n", ":1: just words: expected"),
        ]
        for text, want in bad:
            code, out, p = check(text)
            r.check(code == 1 and (p + want) in out, "-t rejects %r: want %r in %r (%d)"
                    % (text, want, out.strip(), code))
        cp = subprocess.run([ENRICHD, "-t", "-c", os.path.join(d, "missing.conf")],
                            capture_output=True, text=True)
        r.check(cp.returncode == 1 and "missing.conf" in cp.stderr, "-t on a missing file")
        cp = subprocess.run([ENRICHD, "-t"], capture_output=True, text=True)
        r.check(cp.returncode == 0 and "(built-in)" in cp.stdout, "-t on the built-in config")
        cp = subprocess.run([ENRICHD, "-V"], capture_output=True, text=True)
        r.check(cp.returncode == 0 and "Unicode 17.0" in cp.stdout and "libcurl" in cp.stdout
                and "json-c" in cp.stdout and "OpenSSL" in cp.stdout and "libfcgi" in cp.stdout,
                "-V lists versions: %r" % cp.stdout)
        # The test-hooks build says what it is, and never lands in build/.
        r.check("TEST HOOKS" not in cp.stdout, "the product's -V does not say TEST HOOKS")
        hooked = os.path.join(harness.hooks_build_dir(), "enrichd")
        cp = subprocess.run([hooked, "-V"], capture_output=True, text=True)
        r.check(cp.returncode == 0 and "TEST HOOKS" in cp.stdout.splitlines()[0],
                "the hooked build's -V says TEST HOOKS: %r" % cp.stdout[:120])
        cp = subprocess.run(["make", "-n", "-C", harness.ROOT, "EXTRA_CFLAGS=-DENR_TEST_HOOKS",
                             "all"], capture_output=True, text=True)
        r.check(cp.returncode != 0 and "build-hooks" in cp.stderr,
                "make refuses a hooked build into build/: %r" % cp.stderr.strip()[-160:])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_units(r):
    """systemd-analyze verify and security on conf/systemd/*."""
    # A missing tool is a failure, not a pass: the units would go unchecked.
    if not r.check(shutil.which("systemd-analyze") is not None,
                   "systemd-analyze installed (apt-get install systemd)"):
        return
    d = tempfile.mkdtemp(prefix="pool-units-")
    try:
        for name in ("enrichd.socket", "enrichd-status.socket", "enrichd.service"):
            with open(os.path.join(harness.ROOT, "conf", "systemd", name)) as f:
                text = f.read()
            # verify checks that ExecStart's binary exists: point it at ours.
            text = text.replace("/usr/sbin/enrichd", ENRICHD)
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        # --man=no: the man pages are checked by test_man_pages.py.
        cp = subprocess.run(["systemd-analyze", "verify", "--man=no", os.path.join(d, "enrichd.socket"),
                             os.path.join(d, "enrichd-status.socket"),
                             os.path.join(d, "enrichd.service")], capture_output=True, text=True)
        r.check(cp.returncode == 0 and cp.stderr.strip() == "",
                "systemd-analyze verify: rc=%d %s" % (cp.returncode, cp.stderr.strip()))
        cp = subprocess.run(["systemd-analyze", "security", "--offline=true",
                             os.path.join(d, "enrichd.service")], capture_output=True, text=True)
        score = None
        for line in cp.stdout.splitlines():
            if "Overall exposure level" in line:
                score = float(line.split(":")[1].split()[0])
        r.check(score is not None and score <= 2.0,
                "systemd-analyze security: exposure %r must be <= 2.0 (OK)" % score)
        unit = open(os.path.join(harness.ROOT, "conf", "systemd", "enrichd.service")).read()
        for key in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "ExecReload=",
                    "LimitNOFILE=", "ProtectSystem=strict", "NoNewPrivileges=yes",
                    "PrivateTmp=yes", "RestrictAddressFamilies=",
                    "SystemCallFilter=@system-service", "MemoryMax=", "DynamicUser=yes"):
            r.check(key in unit, "enrichd.service sets %s" % key)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def unit_exec_reload():
    """The ExecReload= lines of the shipped unit, in order."""
    unit = open(os.path.join(harness.ROOT, "conf", "systemd", "enrichd.service")).read()
    return [l.split("=", 1)[1] for l in unit.splitlines() if l.startswith("ExecReload=")]


def run_exec_reload(env):
    """`systemctl reload` as systemd runs it: each ExecReload= line in
    turn, the installed paths replaced by the test's, stopping at the
    first that fails.  Returns (exit status, output, lines run)."""
    ran = 0
    for cmd in unit_exec_reload():
        cmd = (cmd.replace("/usr/sbin/enrichd", ENRICHD)
               .replace("/etc/enrichd/enrichd.conf", env.conf)
               .replace("$MAINPID", str(env.master_pid())))
        cp = subprocess.run(cmd.split(), capture_output=True, text=True, timeout=10)
        ran += 1
        if cp.returncode != 0:
            return cp.returncode, cp.stdout + cp.stderr, ran
    return 0, "", ran


def test_reload_verdict(r):
    """A refused configuration fails `systemctl reload` (the unit checks
    before it signals), and a refused HUP is counted and shown."""
    cmds = unit_exec_reload()
    r.check(len(cmds) == 2 and cmds[0].startswith("/usr/sbin/enrichd -t -c ")
            and "kill -HUP $MAINPID" in cmds[1],
            "ExecReload= checks the file, then signals: %r" % cmds)
    with harness.Env(name="pool-reload-verdict") as env:
        env.start_stack("workers = 2\n", notify=True, workers=2)
        good = open(env.conf).read()
        r.check(harness.metric(env, "enrichd_reload_failures_total") == 0, "no reload failure at start")
        with open(env.conf, "a") as f:
            f.write("max_records = many\n")
        code, out, ran = run_exec_reload(env)
        time.sleep(0.5)
        r.check(code != 0 and ran == 1 and " max_records: " in out,
                "systemctl reload of a bad file fails at the check, naming it: rc=%d after %d "
                "line(s): %r" % (code, ran, out.strip()[-160:]))
        r.check(not env.notify.values("RELOADING"), "no HUP was sent: no RELOADING=1")
        # A HUP that bypasses the unit (kill -HUP by hand): refused, counted, shown.
        env.signal(signal.SIGHUP)
        env.wait_log("reload refused: configuration invalid, keeping the old one", timeout=5)
        n = harness.metric(env, "enrichd_reload_failures_total")
        st, _, body = env.request("/status", method="GET")
        rl = json.loads(body).get("reload", {})
        r.check(n == 1, "a refused HUP counts in enrichd_reload_failures_total: %r" % n)
        r.check(rl.get("failures") == 1 and rl.get("last_error", "").startswith("refused: ")
                and "max_records" in rl.get("last_error", ""),
                "/status shows the refused reload: %r" % rl)
        with open(env.conf, "w") as f:
            f.write(good.replace("workers = 2", "workers = 3"))
        code, out, ran = run_exec_reload(env)
        r.check(code == 0 and ran == 2, "systemctl reload of a good file: rc=%d %r" % (code, out))
        env.wait_log("reload done", timeout=15)
        env.wait_workers(3)
        st, _, body = env.request("/status", method="GET")
        rl = json.loads(body).get("reload", {})
        r.check(rl.get("last_error") == "" and harness.metric(env, "enrichd_reload_failures_total") == 1,
                "a done reload clears last_error, the counter stays: %r" % rl)


OVERRIDE_MSG = ("socket activation: the passed socket overrides the configuration (change the "
                "socket unit, or the key)")


def test_activation_overrides(r):
    """Under socket activation the passed sockets are served, whatever the
    file says: each key they override is a warning naming the key, the
    configured and the real value, and `starting` says what is served
    (path, mode, owner, the kernel's backlog)."""
    with harness.Env(name="pool-sd-override") as env:
        other = os.path.join(env.dir, "configured.sock")
        env.start_enrichd("listen = %s\nlisten_mode = 0600\nlisten_backlog = 64\n"
                          "listen_group =\nworkers = 1\n" % other, activate=True)
        env.start_nginx()
        st, _, _ = env.request("/v1/enrich", harness.sample_body(2))
        r.check(st == 200, "serves the passed socket, not the configured one: %d" % st)
        env.wait_log("starting", timeout=10)
        warns = {(e.get("socket"), e.get("key")): e for e in env.log_events(OVERRIDE_MSG)}
        gname = grp.getgrgid(os.getegid()).gr_name
        real_group = "www-data" if harness.IS_ROOT else gname
        want = {("fastcgi", "listen"): (other, env.sock),
                ("fastcgi", "listen_mode"): ("0600", "0660"),
                ("status", "listen_mode"): ("0600", "0660")}
        if real_group != gname:
            want[("fastcgi", "listen_group")] = ("", real_group)
        for k, (conf, real) in sorted(want.items()):
            e = warns.get(k, {})
            r.check(e.get("configured", "") == conf and e.get("real") == real,
                    "warning for %s on the %s socket: configured %r, real %r: %r"
                    % (k[1], k[0], conf, real, e))
        e = warns.get(("fastcgi", "listen_backlog"), {})
        r.check(e.get("configured") == "64" and int(e.get("real", "0")) > 64,
                "warning for listen_backlog with the kernel's value: %r" % e)
        r.check(("status", "listen") not in warns and ("status", "status_listen") not in warns,
                "no warning for the status socket's matching address: %r" % sorted(warns))
        start = env.log_events("starting")[-1]
        r.check(start.get("listen") == env.sock and start.get("listen_mode") == "0660"
                and start.get("listen_owner") == "%s:%s" % (pwd.getpwuid(os.geteuid()).pw_name,
                                                            real_group)
                and start.get("listen_backlog") == e.get("real")
                and start.get("status_listen") == env.status_sock and start.get("activated") == "1",
                "starting says what is served: %r" % start)
        backlog = e.get("real")
    # The same sockets, configured as they are: not one warning.
    with harness.Env(name="pool-sd-agree") as env:
        env.start_enrichd("listen_backlog = %s\nworkers = 1\n%s" % (
            backlog, "" if harness.IS_ROOT else "listen_group =\n"), activate=True)
        env.start_nginx()
        st, _, _ = env.request("/v1/enrich", harness.sample_body(2))
        env.wait_log("starting", timeout=10)
        r.check(st == 200 and not env.log_events(OVERRIDE_MSG),
                "a configuration that agrees with the passed sockets: no warning: %r"
                % env.log_events(OVERRIDE_MSG))
    # Bound by enrichd itself: the same line says what it made.
    with harness.Env(name="pool-bound") as env:
        env.start_enrichd("listen_backlog = 77\nworkers = 1\n")
        start = env.log_events("starting")[-1]
        r.check(start.get("listen") == env.sock and start.get("listen_backlog") == "77"
                and start.get("listen_mode") == "0660" and start.get("activated") == "0",
                "starting when enrichd binds: its own socket, the kernel's backlog: %r" % start)


def test_include(r):
    """`include = /DIR/*.conf`: the files it matches, in name order, as if
    their lines stood there; a key once in all of them; errors name the
    included file and its line; a HUP reads them again."""
    with harness.Env(name="pool-include") as env:
        d = os.path.join(env.dir, "conf.d")
        os.mkdir(d)

        def put(name, text):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)

        put("10-pool.conf", "# the pool\nworkers = 3\n")
        put("20-limits.conf", "max_records = 500\n")
        put("README", "not a .conf: never read\n")
        env.start_enrichd("include = %s/*.conf\n" % d)
        env.start_nginx()
        big = json.dumps([{"provider": "yt", "id": str(i)} for i in range(501)]).encode()
        st, _, _ = env.request("/v1/enrich", big)
        r.check(len(env.wait_workers(3)) == 3 and st == 413,
                "the included files are in force: 3 workers, max_records 500 (501 -> %d)" % st)
        put("10-pool.conf", "workers = 2\n")
        env.signal(signal.SIGHUP)
        env.wait_log("reload done", timeout=15)
        r.check(len(env.wait_workers(2)) == 2, "a HUP reads the included files again")

        def check(text):
            put("20-limits.conf", text)
            cp = subprocess.run([ENRICHD, "-t", "-c", env.conf], capture_output=True, text=True)
            return cp.returncode, cp.stderr
        inc = os.path.join(d, "20-limits.conf")
        for text, want in (("workers = 4\n", inc + ":1: workers: duplicate key"),
                           ("\nfrobnicate = 1\n", inc + ":2: frobnicate: unknown key"),
                           ("rss_soft_mb = 300\n", inc + ":1: rss_soft_mb: must be below"),
                           ("include = %s/*.conf\n" % d,
                            inc + ":1: include: an included file cannot include")):
            code, out = check(text)
            r.check(code == 1 and want in out, "-t refuses %r in an included file: %r"
                    % (text, out.strip()))
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
        code = subprocess.run([ENRICHD, "-t", "-c", env.conf], capture_output=True).returncode
        r.check(code == 0, "an include that matches nothing is no error (an empty conf.d)")
        with open(env.conf, "a") as f:
            f.write("include = conf.d/*.conf\n")
        cp = subprocess.run([ENRICHD, "-t", "-c", env.conf], capture_output=True, text=True)
        r.check(cp.returncode == 1 and ": include: " in cp.stderr and "absolute" in cp.stderr,
                "a relative include is refused: %r" % cp.stderr.strip())


if __name__ == "__main__":
    harness.run_tests(test_config_check, test_start_relocations, test_units,
                      test_activation_and_notify, test_cold_start_first_answer,
                      test_reload_verdict, test_activation_overrides, test_include)
