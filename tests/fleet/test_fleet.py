#!/usr/bin/env python3
"""test_fleet.py (`make fleet-test`): three enrichd hosts behind one front
nginx, on a network of the test's own (network namespaces, tests/fleet/
netns.py), while a trace is replayed through the front.

Each host runs enrichd on TCP with `listen_allow` naming the front (and
itself), plus its own nginx with the shipped site (nginx/enrichd.conf:
only the FastCGI address and the paths substituted), whose operators'
server serves /metrics and /readyz on port 8084 to the addresses of
enrichd-allow-fleet.conf (the front's); the front runs
nginx/enrichd-cluster.conf; Prometheus (Debian's package) scrapes the
three hosts with conf/prometheus/prometheus.yml (the example targets
replaced by the hosts' addresses) and enrichd-alerts.yml.  The test
checks that the operators' server refuses a peer outside the allow list
(403) and does not serve the API (404).  During one replay the test:

  - kills one host's master with SIGKILL (its workers die with it), waits
    for EnrichdHostDown to fire, restarts it, waits for the alert to clear;
  - cuts another host's link (a blackhole: connects time out), then
    restores it;
  - rolls a restart across the three hosts with scripts/rolling-restart,
    run on the front with its default readiness probe.

Pass: zero failed requests through the front (a retry is fine, a 5xx is
not), the alert fired within its `for:` window and cleared, and a host's
listener refuses a peer that `listen_allow` does not name; the p99 during
the faults is a goal (printed, not counted: make bench-goals).  Then,
with each host limited to a fixed CPU share (cgroup cpu quota), the
fleet's throughput with 1, 2 and 3 hosts, with no failed request; that it
grows with the hosts (1.5x, then 1.2x) is a goal too.

Last, one provider for the fleet (a fake in a namespace of its own, its
/_stats counting every call): the same batches, whose ids recur, through
the front to three hosts and then to one give the provider calls per
1,000 records of each (one host asks each id once; three, each with its
own cache, more, at most three times); the same with one Redis for the
fleet (shared_store, AUTH as an ACL user): three hosts within 5 % of one
host's calls; and one YouTube key shared as
docs/fleet.md says (each host's youtube_daily_quota its third): each host
spends its share and no more, and the provider never answers
quotaExceeded.
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402
import hostctl  # noqa: E402
import netns  # noqa: E402

ROOT = harness.ROOT
BUILD = harness.build_dir()
ENRICHD = os.path.join(BUILD, "enrichd")
REPLAY = os.path.join(BUILD, "enrich-replay")
HOSTS = ("h1", "h2", "h3")
CANARY = "c1"            # the candidate build, fed by nginx's mirror
PROV = "prov"            # the fake provider API, one key for the fleet
FRONT = "front"
FCGI_PORT, SITE_PORT, PROM_PORT = 9000, 8080, 9090
# The operators' server of the shipped site, on every address of a host.
OPS_PORT = int(harness.NGINX_OPS_TOKENS["ops_listen"])
ALERT_FOR_S = 3          # the shipped 30 s window, shortened for the test
REPLAY_RATE = 60         # requests per second through the front
REPLAY_S = 60            # trace length; the faults fit inside it
FAULT_P99_MAX_MS = 1500  # a connect to a cut host costs 250 ms, a lost answer a retry
FRONT_MAX_CONNS = 32     # enrichd-cluster.conf's per host
# Share of one core per host, for the capacity run: small enough that
# three hosts stay the bottleneck, not the two nginx hops and the client,
# which no quota holds (at 0.2, three hosts gave 612 req/s against two's
# 517 on a loaded machine: the machine's limit, not the fleet's).
CPU_QUOTA = 0.1


def log(*a):
    print(*a, flush=True)


class Fleet:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="enrfleet-")
        os.chmod(self.dir, 0o755)
        self.net = netns.Net()
        self.front_addr = self.net.add(FRONT, 1)
        self.addr = {h: self.net.add(h, 11 + i) for i, h in enumerate(HOSTS)}
        self.addr[CANARY] = self.net.add(CANARY, 21)
        self.prov_addr = self.net.add(PROV, 31)
        self.procs = []
        with open(os.path.join(self.dir, "prefix"), "w") as f:
            f.write(self.net.prefix)
        with open(os.path.join(self.dir, "enrichd"), "w") as f:
            f.write(ENRICHD)
        for h in HOSTS + (CANARY,):
            with open(os.path.join(self.host_dir(h), "addr"), "w") as f:
                f.write(self.addr[h])

    # -- hosts ------------------------------------------------------------
    def host_dir(self, h):
        d = os.path.join(self.dir, h)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        return d

    def write_host_conf(self, h, workers=2, extra=""):
        d = self.host_dir(h)
        conf = os.path.join(d, "enrichd.conf")
        with open(conf, "w") as f:
            f.write("listen = %s:%d\n" % (self.addr[h], FCGI_PORT))
            f.write("listen_allow = %s, %s\n" % (self.front_addr, self.addr[h]))
            f.write("status_listen = %s/status.sock\nlisten_group = www-data\n" % d)
            f.write("workers = %d\ndrain_timeout_ms = 5000\n%s" % (workers, extra))
        return conf

    def master_pid(self, h):
        return int(hostctl.read(os.path.join(self.host_dir(h), "master.pid")))

    def start_enrichd(self, h, binary=None, env=None):
        """Starts the host's enrichd (as hostctl.py does for the rolling
        restart) and waits until the front can see it ready."""
        pid = hostctl.start(self.dir, h, binary, env)
        harness.wait_for(lambda: hostctl.ready(self.dir, h) == 0 or not hostctl.alive(pid), 10,
                         what="%s ready" % h)
        if not hostctl.alive(pid):
            raise RuntimeError("%s: enrichd exited at start: %s" % (
                h, open(os.path.join(self.host_dir(h), "enrichd.log")).read()[-2000:]))
        return pid

    def kill_master(self, h, sig):
        pid = self.master_pid(h)
        os.kill(pid, sig)
        harness.wait_for(lambda: not hostctl.alive(pid), 10, what="%s master gone" % h)

    def start_host_nginx(self, h, api_on_host_address=False):
        """The shipped site with what every deployment sets: the FastCGI
        address (enrichd on TCP), the status socket and log paths.  Both
        listens stay as shipped: the API on the host's loopback, the
        operators' server on port 8084 of every address.  Only the
        candidate (api_on_host_address) serves its API on its address,
        for the compare run from the front."""
        d = self.host_dir(h)
        with open(harness.NGINX_CONF) as f:
            text = f.read()
        listen = harness.NGINX_TOKENS["listen"]
        if api_on_host_address:
            listen = "%s:%d" % (self.addr[h], SITE_PORT)
        text = harness.render_nginx_site(text, {
            "listen": listen,
            "ops_listen": harness.NGINX_OPS_TOKENS["ops_listen"],
            "fastcgi": "FCGI",
            "status": os.path.join(d, "status.sock"),
            "access_log": os.path.join(d, "access.log"),
        }).replace("unix:FCGI", "%s:%d" % (self.addr[h], FCGI_PORT))
        # The allow list: the monitoring host, here the front (Prometheus
        # and rolling-restart run there); the other hosts are not in it.
        with open(os.path.join(d, "enrichd-allow-fleet.conf"), "w") as f:
            f.write("allow %s;\n" % self.front_addr)
        self.start_nginx(h, text)

    def start_nginx(self, node, site):
        d = self.host_dir(node)
        harness.copy_snippets(os.path.join(d, "snippets"))
        with open(os.path.join(d, "site.conf"), "w") as f:
            f.write(site)
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write("user www-data www-data;\nworker_processes 1;\ndaemon off;\n"
                    "pid %s/nginx.pid;\nerror_log %s/nginx-error.log warn;\n"
                    "events { worker_connections 1024; }\n"
                    "http {\n  client_body_temp_path %s/body;\n  fastcgi_temp_path %s/fastcgi;\n"
                    "  proxy_temp_path %s/proxy;\n  uwsgi_temp_path %s/uwsgi;\n"
                    "  scgi_temp_path %s/scgi;\n  include %s/site.conf;\n}\n" % ((d,) * 8))
        p = subprocess.Popen(self.net.argv(node, "nginx", "-p", d, "-c",
                                           os.path.join(d, "nginx.conf")),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs.append(p)
        return p

    # -- front ------------------------------------------------------------
    def front_site(self, hosts, canary=None):
        with open(os.path.join(ROOT, "nginx", "enrichd-cluster.conf")) as f:
            text = f.read()
        m = re.search(r"max_conns=(\d+)", text)
        assert m and int(m.group(1)) == FRONT_MAX_CONNS, "enrichd-cluster.conf: max_conns"
        servers = re.findall(r"^\s*server 198\.51\.100\.1\d:9000 ([^;]*);\n", text, re.M)
        assert len(servers) == 3, "enrichd-cluster.conf: three example servers"
        # The example addresses replaced, the shipped options (max_fails,
        # fail_timeout, max_conns) kept as they are.
        new = "".join("    server %s:%d %s;\n" % (self.addr[h], FCGI_PORT, servers[0])
                      for h in hosts)
        text = re.sub(r"(^\s*server 198\.51\.100\.1\d:9000 [^;]*;\n)+", lambda _: new, text,
                      count=1, flags=re.M)
        if canary:
            assert text.count("#mirror /_enrichd_canary;") == 3
            text = text.replace("#mirror /_enrichd_canary;", "mirror /_enrichd_canary;")
            assert "server 198.51.100.21:9000 " in text
            text = text.replace("server 198.51.100.21:9000 ", "server %s:%d " % (self.addr[canary],
                                                                               FCGI_PORT))
        assert "listen 127.0.0.1:8080;" in text
        return text.replace("/var/log/nginx/enrichd.access.log",
                            os.path.join(self.host_dir(FRONT), "access.log"))

    def start_front(self, hosts=HOSTS):
        self.front = self.start_nginx(FRONT, self.front_site(hosts))
        harness.wait_for(lambda: self.front_get("/nope")[0] == 404, 10, what="front nginx")

    def set_front_hosts(self, hosts, canary=None):
        with open(os.path.join(self.host_dir(FRONT), "site.conf"), "w") as f:
            f.write(self.front_site(hosts, canary))
        self.front.send_signal(signal.SIGHUP)
        time.sleep(1.0)

    def front_get(self, path):
        p = self.net.exec(FRONT, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                          "http://127.0.0.1:8080" + path, check=False)
        return (int(p.stdout or 0),)

    # -- prometheus -------------------------------------------------------
    def start_prometheus(self):
        d = self.host_dir("prom")
        with open(os.path.join(ROOT, "conf", "prometheus", "enrichd-alerts.yml")) as f:
            rules = f.read()
        assert "for: 30s" in rules
        rules = rules.replace("for: 30s", "for: %ds" % ALERT_FOR_S, 1)
        with open(os.path.join(d, "enrichd-alerts.yml"), "w") as f:
            f.write(rules)
        with open(os.path.join(ROOT, "conf", "prometheus", "prometheus.yml")) as f:
            cfg = f.read()
        # The example targets' addresses replaced; their port, the
        # operators' server's, kept as shipped.
        for i, h in enumerate(HOSTS):
            target = "198.51.100.%d:%d" % (11 + i, OPS_PORT)
            assert target in cfg, "prometheus.yml: target %s" % target
            cfg = cfg.replace(target, "%s:%d" % (self.addr[h], OPS_PORT))
        cfg = cfg.replace("scrape_interval: 15s", "scrape_interval: 1s").replace(
            "evaluation_interval: 15s", "evaluation_interval: 1s")
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write(cfg)
        p = subprocess.Popen(self.net.argv(FRONT, "prometheus", "--config.file",
                                           os.path.join(d, "prometheus.yml"),
                                           "--storage.tsdb.path", os.path.join(d, "data"),
                                           "--web.listen-address", "127.0.0.1:%d" % PROM_PORT),
                             stdout=open(os.path.join(d, "prometheus.log"), "ab"),
                             stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        harness.wait_for(lambda: self.alerts() is not None, 20, what="prometheus")

    def prom_api(self, path):
        p = self.net.exec(FRONT, "curl", "-fsS", "http://127.0.0.1:%d%s" % (PROM_PORT, path),
                          check=False)
        if p.returncode != 0:
            return None
        return json.loads(p.stdout)

    def alerts(self):
        doc = self.prom_api("/api/v1/alerts")
        return None if doc is None else doc["data"]["alerts"]

    def firing(self, name, instance):
        return [a for a in self.alerts() or [] if a["labels"].get("alertname") == name
                and a["labels"].get("instance") == instance and a["state"] == "firing"]

    def close(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        self.net.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Replay:
    """enrich-replay inside the front namespace, against the front."""

    def __init__(self, fleet, trace, extra):
        self.out = os.path.join(fleet.dir, "replay.json")
        self.tsv = os.path.join(fleet.dir, "replay.tsv")
        self.p = subprocess.Popen(fleet.net.argv(FRONT, REPLAY, "--no-progress", "--timeout", "15000",
                                                 "--json", self.out, "--tsv", self.tsv, *extra, trace,
                                                 "http://127.0.0.1:8080/v1/enrich"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait(self, timeout):
        out, _ = self.p.communicate(timeout=timeout)
        with open(self.out) as f:
            return json.load(f), out


def make_trace(path, n, duration, big=False):
    argv = [sys.executable, os.path.join(ROOT, "scripts", "gen-trace"), "-n", str(n),
            "--duration", str(duration), "--bad-rate", "0", "--seed", "7", "-o", path]
    if big:
        argv += ["--shape", "big"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def tsv_rows(path):
    rows = []
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            rows.append(dict(zip(head, line.rstrip("\n").split("\t"))))
    return rows


def test_faults(r, fleet):
    trace = os.path.join(fleet.dir, "trace.ndjson")
    make_trace(trace, REPLAY_RATE * REPLAY_S, REPLAY_S)
    replay = Replay(fleet, trace, ["--speed", "1", "--concurrency", "32"])
    marks = {}
    t0 = time.monotonic()

    def mark(what):
        marks[what] = time.monotonic() - t0
        log("  %5.1f s  %s" % (marks[what], what))

    time.sleep(3)
    # 1. SIGKILL of h1's master: its workers die with it (parent-death
    # signal), the front retries their batches elsewhere.
    mark("SIGKILL h1 master")
    fleet.kill_master("h1", signal.SIGKILL)
    inst = "%s:%d" % (fleet.addr["h1"], OPS_PORT)
    try:
        harness.wait_for(lambda: fleet.firing("EnrichdHostDown", inst), ALERT_FOR_S + 15,
                         interval=0.25, what="EnrichdHostDown for h1")
        mark("EnrichdHostDown firing for h1")
        r.check(marks["EnrichdHostDown firing for h1"] - marks["SIGKILL h1 master"]
                <= ALERT_FOR_S + 6, "host-down alert fired within its window plus two scrapes")
    except TimeoutError as e:
        r.check(False, str(e))
    fleet.start_enrichd("h1")
    mark("h1 restarted")
    try:
        harness.wait_for(lambda: not fleet.firing("EnrichdHostDown", inst), 15, interval=0.25,
                         what="EnrichdHostDown for h1 to clear")
        mark("EnrichdHostDown cleared")
        time.sleep(1.0)
        r.check(not fleet.firing("EnrichdHostDown", inst),
                "host-down alert cleared and stays cleared a scrape later")
    except TimeoutError as e:
        r.check(False, str(e))
    # 2. h2 cut off: connects to it time out.
    time.sleep(2)
    mark("cut h2")
    fleet.net.cut("h2")
    time.sleep(6)
    fleet.net.restore("h2")
    mark("restored h2")
    time.sleep(6)  # fail_timeout passes, h2 takes its share again
    # 3. A rolling restart of the fleet.
    mark("rolling restart")
    # The default pause: longer than the front's fail_timeout (5 s), so the
    # front takes each host back before the next one leaves.  Run on the
    # front, the hosts named by their addresses, with the default -w: the
    # shipped probe of each host's operators' server.  Only -r stands in
    # for `ssh HOST systemctl restart enrichd`.
    rr = subprocess.run(fleet.net.argv(FRONT, os.path.join(ROOT, "scripts", "rolling-restart"),
                                       "-t", "20",
                                       "-r", sys.executable + " " + os.path.join(HERE, "hostctl.py")
                                       + " restart " + fleet.dir + " {}",
                                       *[fleet.addr[h] for h in HOSTS]),
                        capture_output=True, text=True, timeout=120)
    mark("rolling restart done (exit %d)" % rr.returncode)
    r.check(rr.returncode == 0, "rolling-restart succeeded: %s" % rr.stderr[-500:])
    summary, out = replay.wait(REPLAY_S + 60)
    rows = tsv_rows(replay.tsv)
    statuses = {}
    for row in rows:
        statuses[row.get("status")] = statuses.get(row.get("status"), 0) + 1
    bad = {k: v for k, v in statuses.items() if k != "200"}
    log("  replay: %d requests, statuses %r" % (len(rows), statuses))
    r.check(len(rows) >= REPLAY_RATE * REPLAY_S * 0.95, "the replay ran (%d requests)" % len(rows))
    r.check(not bad, "zero failed requests through the front during the faults: %r" % bad)
    if bad:
        when = sorted(float(row["t_due_s"]) for row in rows if row.get("status") != "200")
        log("  failures at t = %.1f .. %.1f s (marks: %s)" % (when[0], when[-1], marks))
        elog = os.path.join(fleet.host_dir(FRONT), "nginx-error.log")
        with open(elog, errors="replace") as f:
            lines = [l for l in f if "upstream" in l]
        for l in lines[-8:]:
            log("  front: " + l.rstrip()[:300])
    lat = sorted(float(row["latency_us"]) / 1000 for row in rows if row.get("latency_us"))
    if lat:
        p50, p99, mx = lat[len(lat) // 2], lat[int(len(lat) * 0.99)], lat[-1]
        log("  latency through the faults: p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (p50, p99, mx))
        r.goal(p99 <= FAULT_P99_MAX_MS, "p99 during the faults %.1f ms <= %d ms" % (p99, FAULT_P99_MAX_MS),
               p99, FAULT_P99_MAX_MS)


def replay_latency(fleet, trace, name):
    rep = Replay(fleet, trace, ["--speed", "1", "--concurrency", "16"])
    summary, _ = rep.wait(120)
    t = summary[0]
    log("  %-34s %4d requests, %d ok, p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms"
        % (name, t["count"], t["ok"], t["p50"], t["p95"], t["p99"], t["max"]))
    if t["ok"] != t["count"]:
        rows = tsv_rows(rep.tsv)
        sts = {}
        for row in rows:
            sts[row.get("status")] = sts.get(row.get("status"), 0) + 1
        log("    statuses %r" % sts)
        with open(os.path.join(fleet.host_dir(FRONT), "nginx-error.log"), errors="replace") as f:
            for line in f.readlines()[-6:]:
                log("    front: " + line.rstrip()[:300])
    return t


EXPECT_PLANTED = r"""
import json, sys, urllib.request
n = 0
for line in open(sys.argv[1], "rb"):
    doc = json.loads(line)
    p = doc["payload"]
    body = p.encode("utf-8", "surrogateescape") if isinstance(p, str) else \
        line[line.index(b'"payload":') + 10:line.rindex(b"}")]
    req = urllib.request.Request("http://127.0.0.1:8080/v1/enrich", data=body, method="POST")
    out = urllib.request.urlopen(req, timeout=10).read()
    n += len(out) > 10 and len(out) % 2 == 1
print(n)
"""


def test_canary(r, fleet):
    """nginx mirrors every batch to a candidate that differs on purpose
    (odd-length answers changed); its capture replayed with --compare
    against the front finds exactly those batches.  The mirror's cost to
    the primary path is measured with the candidate up and stopped."""
    trace = os.path.join(fleet.dir, "canary-trace.ndjson")
    make_trace(trace, 300, 10)
    base = replay_latency(fleet, trace, "mirror off")
    fleet.set_front_hosts(HOSTS, canary=CANARY)
    on = replay_latency(fleet, trace, "mirror on")
    cap = os.path.join(fleet.host_dir(CANARY), "capture")

    def captured():
        return sum(open(os.path.join(cap, n), "rb").read().count(b"\n") for n in os.listdir(cap))
    try:
        harness.wait_for(lambda: captured() >= 300, 10, what="the candidate's capture")
    except TimeoutError:
        pass
    r.check(captured() == 300, "the candidate got a copy of every batch (%d of 300)" % captured())
    merged = os.path.join(fleet.dir, "canary-capture.ndjson")
    with open(merged, "wb") as f:
        subprocess.run(["sort", "-m"] + [os.path.join(cap, n) for n in sorted(os.listdir(cap))],
                       stdout=f, check=True, env=dict(os.environ, LC_ALL="C"))
    pid = fleet.master_pid(CANARY)
    stopped = [pid] + harness.children(pid)
    for p in stopped:
        os.kill(p, signal.SIGSTOP)
    try:
        dead = replay_latency(fleet, trace, "mirror on, candidate stopped")
    finally:
        for p in stopped:
            os.kill(p, signal.SIGCONT)
    fleet.set_front_hosts(HOSTS)
    # The mirror off again: the baseline brackets the runs it is compared
    # with, so that the machine's load drifting up during them (the CI
    # runs other stages beside) reads as the baseline's, not the mirror's.
    base2 = replay_latency(fleet, trace, "mirror off again")
    for name, t in (("mirror off", base), ("mirror on", on), ("candidate stopped", dead),
                    ("mirror off again", base2)):
        r.check(t["ok"] == t["count"], "%s: every batch answered by the primary (%d of %d)"
                % (name, t["ok"], t["count"]))
    ref = {k: max(base[k], base2[k]) for k in ("p50", "p95", "max")}
    # p95, not p99: of 300 batches the p99 is the third slowest, one
    # scheduling stall of the 2-core machine apart; the p95 (the 15th)
    # shows what the mirror's copy and the candidate's work cost.
    r.goal(on["p95"] <= ref["p95"] * 2 + 5,
           "the mirror costs the primary little: p95 %.1f vs %.1f ms (mirror off: %.1f, %.1f)"
           % (on["p95"], ref["p95"], base["p95"], base2["p95"]), on["p95"], ref["p95"] * 2 + 5)
    # A stalled candidate costs the batches mirrored while nginx waits for
    # it (200 ms at most, once per fail_timeout), nobody else.
    r.check(dead["max"] <= ref["max"] + 300, "a stalled candidate holds no batch past nginx's "
            "200 ms: max %.1f ms (mirror off %.1f)" % (dead["max"], ref["max"]))
    r.goal(dead["p50"] <= ref["p50"] * 2 + 2, "a stalled candidate: p50 %.1f ms (mirror off %.1f)"
           % (dead["p50"], ref["p50"]), dead["p50"], ref["p50"] * 2 + 2)
    # Compare: the candidate's capture against the front and the candidate.
    p = fleet.net.exec(FRONT, REPLAY, "--no-progress", "--compare", "-s", "0", "-c", "8",
                       "--name", "primary", "--name", "candidate", merged,
                       "http://127.0.0.1:8080/v1/enrich",
                       "http://%s:%d/v1/enrich" % (fleet.addr[CANARY], SITE_PORT), check=False)
    m = re.search(r"(\d+) identical .*?, (\d+) both rejected, (\d+) FAILED .*?, (\d+) MISMATCHES",
                  p.stdout)
    expected = int(fleet.net.exec(FRONT, sys.executable, "-c", EXPECT_PLANTED, merged).stdout)
    log("  compare: %s; planted: %d" % (m.group(0) if m else p.stdout[-300:], expected))
    r.check(m is not None and int(m.group(4)) == expected and int(m.group(3)) == 0 and expected > 0,
            "the canary reports exactly the planted differences (%s vs %d)"
            % (m.group(3) if m else "?", expected))
    r.check(p.returncode == 3, "compare exits 3 on differences (%d)" % p.returncode)
    r.check("mismatch" in p.stderr or "mismatch" in p.stdout or "candidate:" in p.stderr,
            "the first differences are shown")


def test_listen_allow(r, fleet):
    """h3's listener refuses a peer listen_allow does not name: h1."""
    code = ("import socket,struct\n"
            "s=socket.create_connection(('%s',%d),2)\n"
            "s.sendall(struct.pack('>BBHHBB',1,1,1,8,0,0)+struct.pack('>HB5x',1,0))\n"
            "s.settimeout(2)\n"
            "try:\n  d=s.recv(100)\nexcept Exception as e:\n  d=repr(e).encode()\n"
            "print(repr(d))\n" % (fleet.addr["h3"], FCGI_PORT))
    p = fleet.net.exec("h1", sys.executable, "-c", code, check=False)
    log("  h1 -> h3:%d: %s" % (FCGI_PORT, p.stdout.strip()))
    r.check(p.stdout.strip() in ("b''", "ConnectionResetError(104, 'Connection reset by peer')")
            or "reset" in p.stdout.lower(),
            "a peer outside listen_allow is closed before anything is read: %r" % p.stdout)


def curl_code(fleet, node, *argv):
    """The HTTP status curl gets from inside node (0: no answer)."""
    p = fleet.net.exec(node, "curl", "-s", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}",
                       *argv, check=False)
    return int(p.stdout or 0)


def test_ops_server(r, fleet):
    """Each host's operators' server, as shipped: what the front (the
    allow list) reaches, what another host (not in it) is refused, and
    that the API is neither served there nor on the host's address."""
    h3 = fleet.addr["h3"]
    ops = "http://%s:%d" % (h3, OPS_PORT)
    body = json.dumps([{"provider": "yt", "id": "fleet-ops-1", "title": "x"}])
    seen = {}
    for path in ("/healthz", "/readyz", "/status", "/metrics"):
        code = curl_code(fleet, FRONT, ops + path)
        seen.setdefault("front", []).append(code)
        r.check(code == 200, "front -> h3:%d%s (in the allow list): %d" % (OPS_PORT, path, code))
        code = curl_code(fleet, "h1", ops + path)
        seen.setdefault("h1", []).append(code)
        r.check(code == 403, "h1 -> h3:%d%s (not in the allow list): %d" % (OPS_PORT, path, code))
    log("  h3:%d /healthz /readyz /status /metrics: from the front %r, from h1 %r"
        % (OPS_PORT, seen["front"], seen["h1"]))
    for argv in (["--data-binary", body, ops + "/v1/enrich"], ["--data-binary", body, ops + "/"],
                 [ops + "/v1/enrich"]):
        code = curl_code(fleet, FRONT, *argv)
        seen.setdefault("api", []).append(code)
        r.check(code == 404, "the operators' server does not serve the API: %s -> %d"
                % (" ".join(a for a in argv if a != body), code))
    log("  h3:%d POST /v1/enrich, POST /, GET /v1/enrich from the front: %r"
        % (OPS_PORT, seen["api"]))
    code = curl_code(fleet, FRONT, "--data-binary", body, "http://%s:%d/v1/enrich" % (h3, SITE_PORT))
    r.check(code == 0, "the API's server stays on the host's loopback (front -> h3:%d: %d)"
            % (SITE_PORT, code))
    code = curl_code(fleet, "h3", "--data-binary", body, "http://127.0.0.1:%d/v1/enrich" % SITE_PORT)
    r.check(code == 200, "h3's own loopback API answers: %d" % code)
    code = curl_code(fleet, "h3", "http://127.0.0.1:%d/healthz" % SITE_PORT)
    r.check(code == 200, "h3's loopback /healthz on the API's server: %d" % code)


def capacity(fleet, hosts, trace):
    fleet.set_front_hosts(hosts)
    out = os.path.join(fleet.dir, "cap-%d.json" % len(hosts))
    # Closed loop, never more in flight than the front lets in (the shipped
    # max_conns per host): past that the front refuses at once, by design.
    conc = min(16, FRONT_MAX_CONNS * len(hosts))
    p = subprocess.run(fleet.net.argv(FRONT, REPLAY, "--no-progress", "--closed", "-d", "5",
                                      "-c", str(conc), "--json", out, trace,
                                      "http://127.0.0.1:8080/v1/enrich"),
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("replay through the front failed (exit %d): %s"
                           % (p.returncode, p.stderr.strip()[-400:]))
    with open(out) as f:
        doc = json.load(f)
    return doc[0]


def cgroup_limit(fleet, h):
    base = "/sys/fs/cgroup/cpu"
    d = os.path.join(base, "enrfleet-" + h)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
        f.write("100000")
    with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(int(100000 * CPU_QUOTA)))
    master = fleet.master_pid(h)
    for pid in [master] + harness.children(master):
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write(str(pid))
    return d


def test_capacity(r, fleet):
    trace = os.path.join(fleet.dir, "big.ndjson")
    make_trace(trace, 400, 10, big=True)
    groups = [cgroup_limit(fleet, h) for h in HOSTS]
    try:
        rates = []
        for n in (1, 2, 3):
            t = capacity(fleet, HOSTS[:n], trace)
            rate = t["rps"]
            fails = t["count"] - t["ok"]
            rates.append(rate)
            log("  %d host(s) at %.0f%% of a core each: %.0f req/s, %s failed"
                % (n, CPU_QUOTA * 100, rate, fails))
            r.check(fails == 0, "%d host(s): no failed request (%d)" % (n, fails))
        # A throughput step is a goal: the machine's own load moves it.
        r.goal(rates[1] > rates[0] * 1.5, "capacity grows with hosts, 1 to 2: %r"
               % ["%.0f" % x for x in rates], rates[0] * 1.5 / max(rates[1], 1e-9), 1.0)
        r.goal(rates[2] > rates[1] * 1.2, "capacity grows with hosts, 2 to 3: %r"
               % ["%.0f" % x for x in rates], rates[1] * 1.2 / max(rates[2], 1e-9), 1.0)
    finally:
        for d in groups:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids = f.read().split()
                for pid in pids:
                    with open("/sys/fs/cgroup/cpu/cgroup.procs", "w") as f:
                        f.write(pid)
                os.rmdir(d)
            except OSError:
                pass

# The calls replay: a fixed set of batches whose ids recur (a skewed draw
# from a catalogue), the same shape for each run with ids of its own, so
# every run starts with cold caches.
CALLS_BATCHES, CALLS_BATCH, CALLS_CATALOGUE = 120, 50, 600
PROV_PORT, YT_PORT = 8000, 8002   # a provider's data port; its control port is the next
# The budget run: one YouTube key of KEY_QUOTA units shared by the three
# hosts, each with youtube_daily_quota its third; more batches of new ids
# than the key's quota pays for.
SHARE, BUDGET_BATCHES = 8, 60


def calls_batches(tag):
    """CALLS_BATCHES batches of CALLS_BATCH records; the same draw (seed)
    for every tag, so two runs differ in their ids only."""
    rng = random.Random(7)
    batches = []
    for _ in range(CALLS_BATCHES):
        b = []
        for _ in range(CALLS_BATCH):
            i = int(CALLS_CATALOGUE * rng.random() ** 2)  # popular ids recur
            b.append({"provider": ("yt", "vm", "dm")[i % 3], "id": "Fleet%s%04d" % (tag, i),
                      "title": "t", "duration": 0})
        batches.append(b)
    return batches


def start_provider(fleet, port, *argv):
    """A fake provider (tests/fake_upstream.py, or argv's) in its own
    namespace on the fleet's network, its control port port + 1: every
    host's calls reach the one provider, whose /_stats counts them."""
    ready = os.path.join(fleet.host_dir(PROV), "ready-%d.json" % port)
    p = subprocess.Popen(fleet.net.argv(PROV, sys.executable, *(argv or (harness.FAKE_UPSTREAM,)),
                                        "--host", fleet.prov_addr, "--port", str(port),
                                        "--control-port", str(port + 1),
                                        "--close-after", "0", "--ready-file", ready),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    fleet.procs.append(p)
    harness.wait_for(lambda: os.path.exists(ready), 10, what="fake provider")


def provider_req(fleet, port, path, body=None):
    argv = ["curl", "-fsS", "http://%s:%d%s" % (fleet.prov_addr, port + 1, path)]
    if body is not None:
        argv += ["--data-binary", json.dumps(body)]
    return json.loads(fleet.net.exec(PROV, *argv).stdout)


def provider_stats(fleet, port=PROV_PORT):
    return provider_req(fleet, port, "/_stats")


def post_batches(fleet, name, batches):
    """The batches, one after another, through the front: the statuses and
    the records degraded (X-Enrich-Degraded)."""
    path = os.path.join(fleet.dir, "batches-%s.json" % name)
    with open(path, "w") as f:
        json.dump(batches, f)
    p = fleet.net.exec(FRONT, sys.executable, os.path.join(HERE, "post_batches.py"), path,
                       check=False)
    if p.returncode != 0:
        return {"statuses": {"error": p.stderr[-300:]}, "degraded": None}
    return json.loads(p.stdout)


def reload_hosts(fleet, extra):
    """Every host's enrichd.conf plus extra, applied by HUP; returns when
    each master has logged its reload done."""
    for h in HOSTS:
        logf = os.path.join(fleet.host_dir(h), "enrichd.log")
        before = open(logf, errors="replace").read().count("reload done")
        fleet.write_host_conf(h, extra=extra)
        os.kill(fleet.master_pid(h), signal.SIGHUP)
        harness.wait_for(lambda: open(logf, errors="replace").read().count("reload done") > before,
                         15, what="%s reload done" % h)


def calls_run(r, fleet, hosts, tag):
    """The batches through the front to hosts: (calls, ids asked) the
    provider got, and the distinct ids of the run."""
    fleet.set_front_hosts(hosts)
    batches = calls_batches(tag)
    before = provider_stats(fleet)
    res = post_batches(fleet, "calls-" + tag, batches)
    after = provider_stats(fleet)
    n = CALLS_BATCHES * CALLS_BATCH
    r.check(res["statuses"] == {"200": CALLS_BATCHES} and res.get("degraded") == 0,
            "%d host(s): every batch answered and enriched: %r, %s degraded"
            % (len(hosts), res["statuses"], res.get("degraded")))
    distinct = len({(rec["provider"], rec["id"]) for b in batches for rec in b})
    calls = after["data_requests"] - before["data_requests"]
    ids = after["ids"] - before["ids"]
    log("  %d host(s): %d records (%d distinct ids): %d calls, %d ids asked; "
        "per 1,000 records %.1f calls, %.1f ids" % (len(hosts), n, distinct, calls, ids,
                                                    calls * 1000.0 / n, ids * 1000.0 / n))
    return calls, ids, distinct


def test_calls(r, fleet):
    """Provider calls per 1,000 records: the same replay through the front
    to three hosts, then to one.  Each host has its own cache, so three
    hosts ask each id at most three times, one host once."""
    start_provider(fleet, PROV_PORT)
    url = types.SimpleNamespace(url="http://%s:%d/v1/meta" % (fleet.prov_addr, PROV_PORT))
    reload_hosts(fleet, harness.upstream_conf(url))
    try:
        c3, ids3, d3 = calls_run(r, fleet, HOSTS, "T")
        c1, ids1, d1 = calls_run(r, fleet, HOSTS[:1], "O")
    finally:
        fleet.set_front_hosts(HOSTS)
    n = CALLS_BATCHES * CALLS_BATCH
    r.check(ids1 == d1, "one host asks each id once: %d ids asked, %d distinct" % (ids1, d1))
    r.check(d1 < ids3 <= 3 * d3, "three hosts ask each id one to three times: %d ids asked, "
            "%d distinct" % (ids3, d3))
    r.check(0 < c1 < c3 <= 3 * c1, "calls per 1,000 records: one host %.1f < three hosts %.1f "
            "<= three times one" % (c1 * 1000.0 / n, c3 * 1000.0 / n))


STORE_PORT, STORE_TOLERANCE = 6379, 1.05   # three hosts on one store: within 5 % of one's calls


def test_store_calls(r, fleet):
    """docs/fleet.md's shared store: one redis-server (Debian's) in the
    provider's namespace, every host AUTHed as the ACL user enrichd (the
    default user off); the same replay to three hosts, then to one: calls
    per 1,000 records within 5 % of one host's (each id asked once)."""
    pw, d = "fleet-" + os.urandom(8).hex(), fleet.host_dir("store")
    fleet.procs.append(subprocess.Popen(fleet.net.argv(
        PROV, "/usr/bin/redis-server", "--port", str(STORE_PORT), "--bind", fleet.prov_addr,
        "--dir", d, "--save", "", "--protected-mode", "no", "--user", "default", "off",
        "--user", "enrichd", "on", ">" + pw, "~*", "+@all"), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True))
    with open(os.path.join(d, "password"), "w") as f:
        f.write(pw + "\n")
    os.chmod(os.path.join(d, "password"), 0o600)
    if not os.path.exists(os.path.join(fleet.host_dir(PROV), "ready-%d.json" % PROV_PORT)):
        start_provider(fleet, PROV_PORT)
    url = types.SimpleNamespace(url="http://%s:%d/v1/meta" % (fleet.prov_addr, PROV_PORT))
    reload_hosts(fleet, harness.upstream_conf(url) + "shared_store = redis://%s:%d/0\n"
                 "shared_store_user = enrichd\nshared_store_password_file = %s/password\n"
                 % (fleet.prov_addr, STORE_PORT, d))
    try:  # the workers connect in their idle time after the reload
        harness.wait_for(lambda: all((host_metric(fleet, h, "enrichd_store_up") or 0) >= 2
                                     for h in HOSTS), 15, what="every host on the store")
        c3, ids3, d3 = calls_run(r, fleet, HOSTS, "S")
        c1, ids1, d1 = calls_run(r, fleet, HOSTS[:1], "U")
    finally:
        fleet.set_front_hosts(HOSTS)
        reload_hosts(fleet, "")
    n = CALLS_BATCHES * CALLS_BATCH
    r.check(ids3 <= d3 * STORE_TOLERANCE, "three hosts on one store ask each id once for the "
            "fleet: %d ids asked, %d distinct" % (ids3, d3))
    r.check(0 < c3 <= c1 * STORE_TOLERANCE, "calls per 1,000 records with the store: three "
            "hosts %.1f within 5 %% of one's %.1f" % (c3 * 1000.0 / n, c1 * 1000.0 / n))


def host_metric(fleet, h, name):
    p = fleet.net.exec(FRONT, "curl", "-fsS", "http://%s:%d/metrics" % (fleet.addr[h], OPS_PORT),
                       check=False)
    for line in p.stdout.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_budget_share(r, fleet):
    """docs/fleet.md's shares: a YouTube key of 3 x SHARE units, each host's
    youtube_daily_quota = SHARE (the burst a whole day's, so the pace of
    the hour does not matter), and more batches of new ids than the key
    pays for.  Each host spends its share and no more, and the provider
    never sees its key's quota passed (no quotaExceeded)."""
    key = "AIzaSy" + "fleetSharedKey0123456789abcdefghi"
    key_file = os.path.join(fleet.host_dir(PROV), "youtube.key")
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (key + "\n").encode())
    os.close(fd)
    start_provider(fleet, YT_PORT, os.path.join(ROOT, "tests", "fake_providers.py"),
                   "--api", "youtube", "--key", key)
    provider_req(fleet, YT_PORT, "/_control", {"quota": SHARE * len(HOSTS)})
    # The key goes only over https:// or to loopback (-t refuses it in
    # clear to another host): each host reaches the provider through a
    # relay on its own loopback, as a host's TLS-originating proxy would.
    for h in HOSTS:
        ready = os.path.join(fleet.host_dir(h), "relay-%d.json" % YT_PORT)
        p = subprocess.Popen(fleet.net.argv(h, sys.executable, os.path.join(ROOT, "tests", "delay_proxy.py"),
                                            "--target", "%s:%d" % (fleet.prov_addr, YT_PORT),
                                            "--rtt-ms", "0", "--port", str(YT_PORT),
                                            "--ready-file", ready),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        fleet.procs.append(p)
        harness.wait_for(lambda: os.path.exists(ready), 10, what="%s's relay" % h)
    reload_hosts(fleet, "yt_source = youtube\nyoutube_url = http://127.0.0.1:%d/youtube/v3\n"
                 "youtube_key_file = %s\nyoutube_daily_quota = %d\nbudget_burst_s = 86400\n"
                 "vm_source = off\ndm_source = off\n" % (YT_PORT, key_file, SHARE))
    batches = [[{"provider": "yt", "id": "FleetBudget%02dx%02d" % (b, i), "title": "t"}
                for i in range(20)] for b in range(BUDGET_BATCHES)]
    res = post_batches(fleet, "budget", batches)
    st = provider_stats(fleet, YT_PORT)
    calls, quota_refused = st["data_requests"], st["api"]["refused"].get("quota", 0)
    spent = {h: host_metric(fleet, h, 'enrichd_budget_spent_units{source="youtube"}')
             for h in HOSTS}
    log("  budget: key quota %d, youtube_daily_quota %d per host: %d batches of new ids, "
        "%d calls, %d quotaExceeded, spent per host %r, %s records degraded"
        % (SHARE * len(HOSTS), SHARE, BUDGET_BATCHES, calls, quota_refused, spent,
           res.get("degraded")))
    r.check(res["statuses"] == {"200": BUDGET_BATCHES},
            "every batch answered: %r" % res["statuses"])
    r.check(all(v == SHARE for v in spent.values()),
            "each host spent its share, no more: %r of %d" % (spent, SHARE))
    r.check(calls == SHARE * len(HOSTS) and quota_refused == 0,
            "the provider saw the key's quota and no more: %d calls of %d, %d quotaExceeded"
            % (calls, SHARE * len(HOSTS), quota_refused))
    r.check((res.get("degraded") or 0) > 0, "the shares bound: records past them kept "
            "their local values (%s degraded)" % res.get("degraded"))


def test_promtool(r):
    d = os.path.join(ROOT, "conf", "prometheus")
    for argv in (["promtool", "check", "config", "prometheus.yml"],
                 ["promtool", "check", "rules", "enrichd-alerts.yml"]):
        p = subprocess.run(argv, cwd=d, capture_output=True, text=True)
        r.check(p.returncode == 0, "%s: %s" % (" ".join(argv), (p.stdout + p.stderr)[-400:]))


def main():
    r = harness.Results()
    if os.geteuid() != 0:
        r.check(False, "the fleet test needs root (network namespaces, cgroups)")
        r.done()
    for tool in ("ip", "nginx", "prometheus", "curl"):
        r.check(shutil.which(tool) is not None, "%s installed" % tool)
    r.run(test_promtool)
    only = sys.argv[1:]  # test names without test_, to run some of them on the fleet

    def run(fn, *args):
        if not only or fn.__name__[len("test_"):] in only:
            r.run(fn, *args)

    fleet = Fleet()
    try:
        for h in HOSTS:
            fleet.write_host_conf(h)
            fleet.start_host_nginx(h)
            fleet.start_enrichd(h)
        cdir = os.path.join(fleet.host_dir(CANARY), "capture")
        os.makedirs(cdir)
        os.chmod(cdir, 0o700)  # capture_dir must not be open to others (safedir)
        fleet.write_host_conf(CANARY, extra="capture_dir = %s\ncapture_sample = 1\n" % cdir)
        fleet.start_host_nginx(CANARY, api_on_host_address=True)
        fleet.start_enrichd(CANARY, binary=os.path.join(harness.hooks_build_dir(), "enrichd"),
                            env={"ENRICHD_TEST_PLANT": "odd"})
        fleet.start_front()
        fleet.start_prometheus()
        log("fleet up: front %s, hosts %s" % (fleet.front_addr, fleet.addr))
        run(test_listen_allow, fleet)
        run(test_ops_server, fleet)
        run(test_faults, fleet)
        run(test_canary, fleet)
        run(test_capacity, fleet)
        run(test_calls, fleet)
        run(test_store_calls, fleet)
        run(test_budget_share, fleet)
    finally:
        fleet.close()
    r.done()


if __name__ == "__main__":
    main()
