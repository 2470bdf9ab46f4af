#!/usr/bin/env python3
"""test_pool_view.py: looking at the pool as an operator does, through the
real nginx and the real enrichd (the test-hooks build, whose X-Test-Sleep-MS
header holds a worker busy for a known time):

- each worker's last request in /status?full, the text view and
  `enrichd status` (status, duration, CPU ms, RSS after, records in/out,
  request id);
- no row for an empty slot (no pid 0), its last exit kept apart;
- process titles: `enrichd: master`, `enrichd: worker N gen G busy|idle`,
  `enrichd: status`;
- the reload's log line counting the workers that serve, not the first;
- a clean stop logs no "pool unhealthy" warning;
- `enrichd status --watch` redrawing under tmux;
- /status?html: self-contained, refreshing, with charts, rendered by
  headless Chromium (screenshot in the build directory).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import get_json, records_body  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
TMUX = "/usr/bin/tmux"
SLEEP_MS = 300  # X-Test-Sleep-MS: the worker's work, so duration and busy state are known


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")


def eventually(cond, timeout=5.0, interval=0.02):
    """True once cond() is, False after timeout (a check, not a wait that raises)."""
    end = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return True
        except OSError:
            pass
        if time.monotonic() >= end:
            return False
        time.sleep(interval)


def enrichd_cli(env, *args, timeout=10):
    return subprocess.run([os.path.join(env.build, "enrichd")] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def test_last_request_titles_and_slots(r):
    with harness.Env(build=harness.hooks_build_dir(), name="enr-view") as env:
        env.start_enrichd("workers = 1\n")
        env.start_nginx()
        r.check(cmdline(env.master_pid()) == "enrichd: master",
                "master's title: %r" % cmdline(env.master_pid()))
        r.check(eventually(lambda: cmdline(env.status_pid()) == "enrichd: status"),
                "status process's title: %r" % cmdline(env.status_pid()))
        wpid = env.worker_pids()[0]
        r.check(eventually(lambda: cmdline(wpid) == "enrichd: worker 0 gen 0 idle"),
                "idle worker's title: %r" % cmdline(wpid))

        # A slow request: the worker's title says busy meanwhile.
        import threading
        res = []
        body = records_body(7, bad=2, seed=1)
        t = threading.Thread(target=lambda: res.append(env.request(
            "/v1/enrich", body=body, headers={"X-Request-ID": "view-1",
                                              "X-Test-Sleep-MS": str(SLEEP_MS)})))
        t.start()
        r.check(eventually(lambda: cmdline(wpid) == "enrichd: worker 0 gen 0 busy", interval=0.01),
                "busy worker's title")
        t.join(15)
        r.check(res and res[0][0] == 200, "the slow request answered: %r" % (res[:1],))
        r.check(eventually(lambda: cmdline(wpid) == "enrichd: worker 0 gen 0 idle"),
                "idle again after it")

        full = get_json(env, "/status?full")
        p = [x for x in full["processes"] if x["pid"] == wpid][0]
        last = p.get("last_request", {})
        r.check(last.get("request_id") == "view-1" and last.get("status") == 200,
                "last request id and status: %r" % last)
        r.check(last.get("records_in") == 9 and last.get("records_out") == 7,
                "last request records in/out 9/7: %r" % last)
        r.check(SLEEP_MS <= last.get("duration_ms", 0) < SLEEP_MS + 5000,
                "last request duration >= the %d ms it slept: %r" % (SLEEP_MS, last))
        r.check(0 <= last.get("cpu_ms", -1) < last.get("duration_ms", 0),
                "CPU ms measured and below the duration (it slept): %r" % last)
        r.check(last.get("rss_kb", 0) > 1000 and last.get("pid") == wpid,
                "RSS after and the worker's pid: %r" % last)
        st, _, text = env.request("/status?text&full", method="GET")
        r.check(b"LAST_REQUEST_ID" in text and re.search(rb"\n0 +%d +200 " % wpid, text)
                and b"view-1" in text, "text view's last request row:\n%s" % text[-900:].decode())
        cli = enrichd_cli(env, "status", env.status_sock)
        r.check(cli.returncode == 0 and "view-1" in cli.stdout and "CPU_MS" in cli.stdout,
                "enrichd status shows the last request:\n%s" % cli.stdout[-900:])

        # Reload to 4 workers: the log line counts what serves.
        env.write_config("workers = 4\n")
        env.signal(signal.SIGHUP)
        env.wait_log("reload done", timeout=15)
        ev = [e for e in env.log_events("reload done")][-1]
        r.check(ev.get("workers") == "4", "reload done counts 4 workers: %r" % ev)
        env.wait_workers(4)
        want = ["enrichd: worker %d gen 1 idle" % i for i in range(4)]
        r.check(eventually(lambda: sorted(cmdline(p) for p in env.worker_pids()) == want),
                "titles after the reload: %r" % sorted(cmdline(p) for p in env.worker_pids()))

        # Down to 2: slots 2 and 3 are empty, never rows with pid 0.
        env.write_config("workers = 2\n")
        env.signal(signal.SIGHUP)
        harness.wait_for(lambda: len(env.log_events("reload done")) >= 2, 15, what="2nd reload")
        env.wait_workers(2)
        # the master reaps and clears the slots it stopped
        full = harness.poll(lambda: (lambda d: d if len(d["processes"]) == 2 else None)(
            get_json(env, "/status?full")), 5) or get_json(env, "/status?full")
        r.check(len(full["processes"]) == 2 and all(p["pid"] > 0 for p in full["processes"]),
                "every listed process has a pid: %r" % [p["pid"] for p in full["processes"]])
        # (slots 2, 3, and the slots the reloads' probes used)
        r.check({2, 3} <= set(e["slot"] for e in full.get("empty_slots", []))
                and all("pid" not in e for e in full.get("empty_slots", [])),
                "empty slots apart, without a pid: %r" % full.get("empty_slots"))
        r.check(all(e["last_exit"]["reason"] == "reload" for e in full.get("empty_slots", [])),
                "their last exit kept: %r" % full.get("empty_slots"))
        st, _, text = env.request("/status?text&full", method="GET")
        r.check(b"slot 2: empty, last exit reload" in text and b"\n2    0 " not in text,
                "text view: empty slot line, no pid 0 row")

        # The latency block operations.md promises.
        lat = full.get("latency", {})
        r.check(lat.get("requests", 0) >= 1 and lat.get("mean_ms", 0) >= SLEEP_MS
                and lat.get("p99_ms", 0) >= SLEEP_MS and "window_p99_ms" in lat,
                "/status latency block: %r" % lat)

        # A clean stop says nothing about health.
        env.signal(signal.SIGTERM)
        r.check(env.wait_exit(20) == 0, "clean stop exits 0")
        unhealthy = [l for l in env.log_lines() if "pool unhealthy" in l]
        r.check(unhealthy == [], "no unhealthy warning on a clean stop: %r" % unhealthy)


def run_bounded(argv, cwd, timeout=10):
    """(exit code, stdout) of argv run in cwd, or (None, "") when it was
    still running after timeout (a program that took --help for an
    operand): its process group is then killed."""
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, ""


def test_health_and_help(r):
    with harness.Env(name="enr-help") as env:
        env.start_enrichd("workers = 1\n")
        cli = enrichd_cli(env, "status", "--health", env.status_sock)
        r.check(cli.returncode == 0 and cli.stdout == "ok\n",
                "--health prints the verdict only: %r %r" % (cli.stdout[:300], cli.stderr))
        cli = enrichd_cli(env, "status", "--health", "--json", "-c", env.conf)
        r.check(cli.returncode == 0 and json.loads(cli.stdout)["status"] == "ok",
                "--health --json -c CONF: the /healthz document")
    b = harness.build_dir()
    progs = [[os.path.join(b, "enrichd"), "--help"], [os.path.join(b, "enrichd"), "-h"],
             [os.path.join(b, "enrichd"), "status", "--help"],
             [os.path.join(b, "enrich"), "--help"], [os.path.join(b, "enrich"), "-h"],
             [os.path.join(b, "enrich-replay"), "--help"],
             [os.path.join(b, "bench-engine"), "--help"], [os.path.join(b, "bench-null"), "--help"],
             [os.path.join(harness.ROOT, "scripts", "rolling-restart"), "--help"],
             [os.path.join(harness.ROOT, "scripts", "gen-trace"), "--help"]]
    scratch = tempfile.mkdtemp(prefix="enr-help-")
    try:
        for argv in progs:
            rc, out = run_bounded(argv, scratch)
            r.check(rc == 0 and "usage" in out.lower(),
                    "%s exits 0 with its usage on stdout (rc %r)" % (" ".join(argv[-2:]), rc))
        r.check(os.listdir(scratch) == [], "--help created nothing: %r" % os.listdir(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    p = subprocess.run([os.path.join(b, "enrichd"), "status", "--bogus"], capture_output=True,
                       text=True, timeout=10)
    r.check(p.returncode == 2 and "usage" in p.stderr, "a usage mistake still exits 2")
    # enrich-replay(1) says what --compare exits with on a mismatch (3,
    # which test_replay.py sees it do).
    with open(os.path.join(harness.ROOT, "man", "enrich-replay.1")) as f:
        man = f.read()
    ex = man.split('.SH "EXIT STATUS"')[1].split(".SH")[0] if '.SH "EXIT STATUS"' in man else ""
    r.check("compare" in ex and "3 when some entry was a mismatch" in ex
            and "0 when the replay ran" in ex, "enrich-replay(1) EXIT STATUS: %r" % ex)
    # The README's usage names what the command takes.
    with open(os.path.join(harness.ROOT, "README.md")) as f:
        readme = f.read()
    m = re.search(r"enrichd status \[[^|\n]*", readme)
    for opt in ("--json", "--health", "--watch", "-c"):
        r.check(m and opt in m.group(0), "README's enrichd status usage has %s: %r"
                % (opt, m.group(0) if m else None))


def test_watch_under_tmux(r):
    if not r.check(os.path.exists(TMUX), "tmux installed (scripts/deps.sh)"):
        return
    with harness.Env(name="enr-watch") as env:
        env.start_enrichd("workers = 2\n")
        env.start_nginx()
        sess = "enrwatch%d" % os.getpid()
        # A tmux server of the test's own (-L): nobody else's sessions.
        tmux = [TMUX, "-L", sess]
        cmd = "%s status --watch -n 1 %s" % (os.path.join(env.build, "enrichd"), env.status_sock)
        subprocess.run(tmux + ["new-session", "-d", "-s", sess, "-x", "200", "-y", "60", cmd],
                       check=True, timeout=10)
        try:
            def screen():
                return subprocess.run(tmux + ["capture-pane", "-p", "-t", sess], capture_output=True,
                                      text=True, timeout=10).stdout

            def accepted():
                m = re.search(r"accepted conn: +(\d+)", screen())
                return int(m.group(1)) if m else None

            first = harness.wait_for(lambda: "SLOT" in screen() and accepted() is not None, 10,
                                     what="the table on screen")
            s = screen()
            r.check(first and "every 1s" in s and "idle" in s, "watch header and table:\n" + s)
            before = accepted()
            for i in range(3):
                env.request("/v1/enrich", body=records_body(2, seed=i))
            got = harness.wait_for(lambda: accepted() == before + 3, 10, what="redrawn count")
            r.check(got, "the screen redraws with the new count (%r -> %r)" % (before, accepted()))
            r.check(screen().count("accepted conn:") == 1, "redrawn in place, not scrolled")
            subprocess.run(tmux + ["send-keys", "-t", sess, "C-c"], timeout=10)
            gone = harness.wait_for(
                lambda: subprocess.run(tmux + ["has-session", "-t", sess],
                                       capture_output=True).returncode != 0, 5, what="Ctrl-C ends")
            r.check(gone, "Ctrl-C ends the watch")
        finally:
            subprocess.run(tmux + ["kill-server"], capture_output=True, timeout=10)


EXTERNAL = re.compile(rb"""(?:src|href|action)\s*=\s*["']?\s*(?:[a-z]+:)?//|url\(|@import|<script""",
                      re.I)


def test_html_page(r):
    with harness.Env(build=harness.hooks_build_dir(), name="enr-html") as env:
        env.start_enrichd("workers = 3\n")
        env.start_nginx()
        # Traffic over a few seconds, so the charts have samples to draw.
        stop = time.monotonic() + 4
        def load(k):
            i = 0
            while time.monotonic() < stop and i < 400:
                env.request("/v1/enrich", body=records_body(5, seed=k * 1000 + i),
                            headers={"X-Request-ID": "html-%d-%d" % (k, i),
                                     "X-Test-Sleep-MS": "20"})
                i += 1
        harness.in_threads(load, 2)
        st, h, body = env.request("/status?html", method="GET")
        r.check(st == 200 and h.get("content-type", "").startswith("text/html"),
                "/status?html is HTML: %d %r" % (st, h.get("content-type")))
        r.check("default-src 'none'" in h.get("content-security-policy", ""),
                "CSP forbids loading anything: %r" % h.get("content-security-policy"))
        r.check(re.search(rb'<meta http-equiv="refresh" content="\d+">', body) is not None,
                "the page refreshes itself")
        r.check(EXTERNAL.search(body) is None,
                "no script and no external resource: %r" % (EXTERNAL.search(body),))
        for fig in (b'id="throughput"', b'id="latency"', b'id="health"'):
            r.check(fig in body, "chart %s" % fig.decode())
        r.check(body.count(b"<polyline") == 2, "throughput and latency drawn as lines")
        m = re.search(rb"Throughput: <b>([\d.]+) req/s</b> now, max ([\d.]+)", body)
        r.check(m and float(m.group(2)) > 1.0, "throughput seen in the window: %r"
                % (m.group(0) if m else body[:400]))
        r.check(b"Health: <b>healthy</b>" in body and body.count(b'class="ok"') >= 3,
                "health strip: healthy samples")
        r.check(len(re.findall(rb'<tr class="(?:w|busy)">', body)) == 3,
                "one row per worker")
        r.check(b"html-" in body, "last request ids shown")
        # A hostile request id is escaped, never markup.  nginx replaces
        # one that is not a well-formed id (snippets/enrichd-http.conf):
        # sent to the FastCGI socket directly, as another front end could.
        batch = records_body(1, seed=99)
        params = harness.fcgi_enrich_params(batch)
        params["REQUEST_ID"] = "<b>x</b>"
        harness.fcgi_request(env.sock, params, batch)
        _, _, body2 = env.request("/status?html", method="GET")
        r.check(b"<b>x</b>" not in body2 and b"&lt;b&gt;x&lt;/b&gt;" in body2,
                "request id HTML-escaped")

        if not r.check(os.path.exists(CHROMIUM), "chromium installed (scripts/deps.sh)"):
            return
        url = "http://127.0.0.1:%d/status?html" % env.port
        prof = tempfile.mkdtemp(prefix="enr-chromium-")
        shot = os.path.join(harness.build_dir(), "status-page.png")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                 "--user-data-dir=" + prof, "--window-size=1280,900"]
        try:
            if os.path.exists(shot):
                os.unlink(shot)
            p = subprocess.run([CHROMIUM] + flags + ["--screenshot=" + shot, url],
                               capture_output=True, timeout=90)
            r.check(p.returncode == 0 and os.path.exists(shot) and os.path.getsize(shot) > 20000,
                    "screenshot %s (%d bytes): %s" % (shot, os.path.getsize(shot) if
                                                       os.path.exists(shot) else 0,
                                                       p.stderr[-400:]))
            with open(shot, "rb") as f:
                r.check(f.read(8) == b"\x89PNG\r\n\x1a\n", "a PNG")
            p = subprocess.run([CHROMIUM] + flags + ["--dump-dom", url], capture_output=True,
                               timeout=90)
            dom = p.stdout
            r.check(b"<svg" in dom and b'id="workers"' in dom and b"enrichd: pool" in dom,
                    "the DOM Chromium built has the charts and the workers table")
            r.check(b"Refused to load" not in p.stderr,
                    "Chromium loaded nothing the policy refused: %r" % p.stderr[-300:])
            print("screenshot: %s" % shot)
        finally:
            shutil.rmtree(prof, ignore_errors=True)


def main():
    harness.run_tests(test_last_request_titles_and_slots, test_health_and_help,
                      test_watch_under_tmux, test_html_page)


if __name__ == "__main__":
    main()
