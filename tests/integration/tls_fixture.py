"""tls_fixture.py: the metadata provider as it really is, for tests and
benchmarks: HTTPS, a network path away, cycling its connections.

  Pki        a certificate chain made with openssl at run time: a CA of
             the test's own, a server certificate for localhost /
             127.0.0.1 / ::1, one for another name (metadata.invalid), an
             expired one, and a client certificate for mutual TLS; all
             EC P-256, valid for two days (the expired one ended a year ago)
  Terminator the machine's nginx as TLS terminator in front of the fake
             upstream (tests/fake_upstream.py), TLS 1.2 and 1.3 only,
             `keepalive_requests 100` (the provider closes every
             connection after 100 requests, saying so in the last reply),
             one listener per kind of server (KINDS), and an access log
             per listener that says, per request, which TLS connection
             carried it and whether its session was resumed
  DelayProxy tests/delay_proxy.py in its own session: a round trip added
             on the path to one listener
  Provider   the three together: Provider().url(kind, rtt_ms) is what
             upstream_url is set to
  side_by_side  sequential batches of new ids against several enrichd at
             once (plain HTTP and HTTPS, say), interleaved batch by batch
             so that the machine's load weighs on each alike; latency,
             enriched share, the provider's view (connections, resumed
             sessions, HEADs) and the workers' descriptors

Every process runs in its own session and is killed by close(), which
runs even when a test fails; each also exits by itself when the process
that started it dies.  Traffic stays on loopback.
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROOT = harness.ROOT
DELAY_PROXY = os.path.join(ROOT, "tests", "delay_proxy.py")
HOST = "localhost"              # the name in upstream_url, and in the good certificate
WRONG_NAME = "metadata.invalid"  # RFC 2606: can never be a real host
KEEPALIVE_REQUESTS = 100        # the incident's provider
# Listener kinds: which certificate, and whether a client certificate is required.
KINDS = ("https", "wrong_name", "expired", "mtls", "http")
OPENSSL_TIMEOUT_S = 30
# The provider's side (the path, the terminator, the fake) stands for
# another machine and a network, whose times do not grow with this
# machine's load: it runs before the machine's other work (it uses little
# CPU), so that what the tests measure is enrichd's.
REMOTE_NICE = -10


def _openssl(args, cwd):
    p = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, text=True,
                       timeout=OPENSSL_TIMEOUT_S)
    if p.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout


CA_CONF = """[ca]
default_ca = test_ca
[test_ca]
dir = {dir}
database = {dir}/index.txt
new_certs_dir = {dir}/issued
serial = {dir}/serial
certificate = {dir}/ca.pem
private_key = {dir}/ca.key
default_md = sha256
policy = any_name
unique_subject = no
copy_extensions = none
[any_name]
commonName = supplied
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = {san}
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
"""


class Pki:
    """Files (absolute paths): ca (the CA's PEM, for upstream_ca_file and
    nginx's ssl_client_certificate), and a (cert, key) pair per name in
    cert: server, wrong_name, expired, client."""

    def __init__(self, d):
        self.dir = d
        os.makedirs(os.path.join(d, "issued"), exist_ok=True)
        open(os.path.join(d, "index.txt"), "w").close()
        with open(os.path.join(d, "serial"), "w") as f:
            f.write("1000\n")
        self.ca = os.path.join(d, "ca.pem")
        _openssl(["req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-sha256",
                  "-subj", "/CN=enrichd test CA",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign"], d)
        self.cert = {}
        good = "DNS:%s,IP:127.0.0.1,IP:::1" % HOST
        self._issue("server", HOST, "server", good, [])
        self._issue("wrong_name", WRONG_NAME, "server", "DNS:" + WRONG_NAME, [])
        # Valid for a day, a year ago: refused only for its dates.
        self._issue("expired", HOST, "server", good,
                    ["-startdate", _utc(-366), "-enddate", _utc(-365)])
        self._issue("client", "enrichd test client", "client", good, [])

    def _issue(self, name, cn, ext, san, dates):
        d = self.dir
        with open(os.path.join(d, "ca-%s.cnf" % name), "w") as f:
            f.write(CA_CONF.format(dir=d, san=san))
        _openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
                  "-subj", "/CN=" + cn], d)
        _openssl(["ca", "-config", "ca-%s.cnf" % name, "-batch", "-notext", "-extensions", ext,
                  "-in", name + ".csr", "-out", name + ".pem"]
                 + (dates or ["-days", "2"]), d)
        self.cert[name] = (os.path.join(d, name + ".pem"), os.path.join(d, name + ".key"))


def _utc(days):
    import datetime
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days)
    return t.strftime("%Y%m%d%H%M%SZ")


NGINX_TOP = """{user}worker_processes 1;
worker_priority {nice};
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 512; }}
http {{
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  # Per request: the TLS connection that carried it, its n-th request,
  # whether its session was resumed ("r"), the protocol, its time, when
  # it ended, and of its time the backend's (the fake's answer, as nginx
  # waited for it).
  log_format conn '$connection $connection_requests $request_method $status '
                  '"$ssl_protocol" "$ssl_session_reused" $request_time $msec '
                  '$upstream_response_time';
  keepalive_requests {keepalive_requests};
  keepalive_timeout 60s;
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_session_cache shared:provider:1m;
  ssl_session_timeout 10m;
{upstreams}{servers}}}
"""

NGINX_SERVER = """  server {{
    listen 127.0.0.1:{port}{ssl};
{listen6}    server_name {host};
{tls}    access_log {dir}/access-{kind}.log conn;
    location / {{
      proxy_pass http://{backend};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
    }}
  }}
"""


class Terminator:
    """nginx in front of the fake upstream: one listener per kind of KINDS,
    port[kind]; requests(kind) parses its access log.  backends {kind:
    port} puts another fake behind a listener (the providers' APIs, one
    fake each); kinds not in it proxy to fake_port.  http2: the TLS
    listeners offer HTTP/2 by ALPN too, as the providers' APIs do."""

    def __init__(self, d, pki, fake_port, kinds=KINDS, backends=None, http2=False):
        self.dir = d
        self.port = {}
        servers = []
        ipv6 = _has_ipv6_loopback()
        backends = dict((k, fake_port) for k in kinds) if backends is None else backends
        ports = sorted(set(backends.values()))
        upstreams = "".join("  upstream fake%d {\n    server 127.0.0.1:%d;\n    keepalive 16;\n  }\n"
                            % (p, p) for p in ports)
        for kind in kinds:
            self.port[kind] = harness.free_port()
            tls = ""
            if kind != "http":
                cert, key = pki.cert[kind if kind in ("wrong_name", "expired") else "server"]
                tls = "    ssl_certificate %s;\n    ssl_certificate_key %s;\n" % (cert, key)
                if kind == "mtls":
                    tls += ("    ssl_client_certificate %s;\n    ssl_verify_client on;\n"
                            % pki.ca)
            ssl = (" ssl http2" if http2 else " ssl") if tls else ""
            # A client resolving localhost may try ::1 first.
            listen6 = "    listen [::1]:%d%s;\n" % (self.port[kind], ssl) if ipv6 else ""
            servers.append(NGINX_SERVER.format(port=self.port[kind], host=HOST, dir=d,
                                               kind=kind, ssl=ssl, tls=tls, listen6=listen6,
                                               backend="fake%d" % backends[kind]))
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_TOP.format(user="user www-data www-data;\n" if harness.IS_ROOT else "",
                                     nice=REMOTE_NICE if harness.IS_ROOT else 0, dir=d,
                                     keepalive_requests=KEEPALIVE_REQUESTS,
                                     upstreams=upstreams, servers="".join(servers)))
        self.proc = subprocess.Popen(["nginx", "-p", d, "-c", conf, "-e", d + "/error.log"],
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(d, "error.log"), "ab"),
                                     start_new_session=True)
        for kind in kinds:
            harness.wait_for(lambda: _port_open(self.port[kind]) or self.proc.poll() is not None,
                             10, what="TLS terminator port (%s)" % kind)
        if self.proc.poll() is not None:
            raise RuntimeError("nginx (TLS terminator) exited: %s" % self.error_log()[-2000:])

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def requests(self, kind):
        """[{'conn', 'nth', 'method', 'status', 'protocol', 'reused', 'time',
        'at', 'upstream'}] of the listener's access log (nginx writes each
        line when the request ends, 'at', in seconds since the epoch;
        'upstream': the backend's part of 'time', None when nginx asked
        none)."""
        out = []
        try:
            with open(os.path.join(self.dir, "access-%s.log" % kind)) as f:
                lines = f.read().splitlines()
        except OSError:
            return out
        for line in lines:
            p = line.split()
            if len(p) < 8:
                continue
            out.append({"conn": int(p[0]), "nth": int(p[1]), "method": p[2],
                        "status": int(p[3]), "protocol": p[4].strip('"'),
                        "reused": p[5].strip('"') == "r", "time": float(p[6]),
                        "at": float(p[7]), "upstream": _upstream_time(p[8:])})
        return out

    def close(self):
        harness.kill_group(self.proc)


def _upstream_time(fields):
    """$upstream_response_time's seconds ("0.004", or one per backend
    tried: "0.001, 0.003"), None for "-" (no backend asked)."""
    secs = [float(x) for x in " ".join(fields).replace(",", " ").replace(":", " ").split()
            if x != "-"]
    return sum(secs) if secs else None


def renice_threads(pid, nice):
    """Every thread of pid to nice (the threads they start inherit it);
    quietly nothing when not permitted."""
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
    except OSError:
        pass


def _has_ipv6_loopback():
    import socket
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def _port_open(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


class DelayProxy:
    """tests/delay_proxy.py to 127.0.0.1:target_port adding rtt_ms; .port.
    target_port a list: one process, a listener each, .ports in its order."""

    def __init__(self, d, target_port, rtt_ms):
        os.makedirs(d, exist_ok=True)
        ready = os.path.join(d, "ready.json")
        self.stats_file = os.path.join(d, "stats.json")
        targets = []
        for p in (target_port if isinstance(target_port, list) else [target_port]):
            targets += ["--target", "127.0.0.1:%d" % p]
        self.proc = subprocess.Popen(
            [sys.executable, DELAY_PROXY] + targets +
            ["--rtt-ms", str(rtt_ms), "--ready-file", ready, "--stats-file", self.stats_file,
             "--nice", str(REMOTE_NICE)],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "proxy.log"), "ab"),
            start_new_session=True)
        try:
            harness.wait_for(lambda: os.path.exists(ready) or self.proc.poll() is not None, 10,
                             what="delay proxy")
            with open(ready) as f:
                info = json.load(f)
            self.port, self.ports = info["port"], info["ports"]
        except Exception:
            self.close()
            raise

    def stats(self):
        """The proxy's counters (connections accepted, bytes each way)."""
        try:
            os.unlink(self.stats_file)
        except OSError:
            pass
        os.kill(self.proc.pid, signal.SIGUSR1)
        harness.wait_for(lambda: os.path.exists(self.stats_file), 5, what="delay proxy stats")
        with open(self.stats_file) as f:
            return json.load(f)

    def close(self):
        harness.kill_group(self.proc)


class Provider:
    """The fake upstream behind nginx as TLS terminator, with delay
    proxies in front made on demand.  url(kind, rtt_ms) is an upstream_url;
    fake is the harness.FakeUpstream (its own close_after is off: nginx's
    keepalive_requests does the cycling)."""

    def __init__(self, fake_args=()):
        self.dir = tempfile.mkdtemp(prefix="enr-provider-")
        os.chmod(self.dir, 0o755)  # nginx's workers (www-data) create their temp dirs here
        self.fake = self.nginx = None
        self.proxies = {}
        try:
            self.pki = Pki(os.path.join(self.dir, "pki"))
            self.fake = harness.FakeUpstream("--close-after", "0", *fake_args)
            renice_threads(self.fake.proc.pid, REMOTE_NICE)
            self.nginx = Terminator(self.dir, self.pki, self.fake.port)
        except Exception:
            self.close()
            raise

    def proxy(self, kind, rtt_ms):
        key = (kind, rtt_ms)
        if key not in self.proxies:
            self.proxies[key] = DelayProxy(os.path.join(self.dir, "proxy-%s-%s" % key),
                                           self.nginx.port[kind], rtt_ms)
        return self.proxies[key]

    def port(self, kind, rtt_ms=None):
        """The port a client connects to: the listener's own, or (rtt_ms
        not None) that of a delay proxy in front of it."""
        return self.nginx.port[kind] if rtt_ms is None else self.proxy(kind, rtt_ms).port

    def url(self, kind, rtt_ms=None):
        scheme = "http" if kind == "http" else "https"
        return "%s://%s:%d/v1/meta" % (scheme, HOST, self.port(kind, rtt_ms))

    def close(self):
        for p in self.proxies.values():
            p.close()
        if self.nginx is not None:
            self.nginx.close()
        if self.fake is not None:
            self.fake.close()
        harness.discard_dir(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# ---- measuring enrichd against a Provider ------------------------------

BATCH_IDS = 20


def batch(tag, i, n=BATCH_IDS):
    """n records with ids no batch has had (tag, i), over the three
    providers (three calls per batch)."""
    return [{"provider": ("yt", "vm", "dm")[k % 3], "id": "Tls-%s-%d-%d" % (tag, i, k),
             "duration": 0} for k in range(n)]


class Client:
    """Sequential batches on one kept-alive connection to env's nginx;
    res: {'lat': [ms], 'records', 'enriched', 'degraded_batches', 'bad',
    'degraded_at': [(start, end) of each degraded batch, epoch seconds]}."""

    def __init__(self, env):
        self.env, self.conn = env, None
        self.res = {"lat": [], "records": 0, "enriched": 0, "degraded_batches": 0, "bad": 0,
                    "degraded_at": []}

    def send(self, recs):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.env.port, timeout=15)
        t0, wall = time.monotonic(), time.time()
        try:
            st, h, lines = harness.post(self.env, recs, conn=self.conn)
        except Exception as e:  # a transport failure is a failed batch
            print("client error:", repr(e))
            self.close()
            st, h, lines = 0, {}, []
        res = self.res
        res["lat"].append((time.monotonic() - t0) * 1000)
        if st != 200 or len(lines) != len(recs):
            res["bad"] += 1
            return
        res["records"] += len(recs)
        res["enriched"] += sum(1 for rec, l in zip(recs, lines)
                               if l["poster"] == harness.fake_poster(rec["provider"], rec["id"]))
        if harness.degraded(h) > 0:
            res["degraded_batches"] += 1
            res["degraded_at"].append((wall, time.time()))

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None


def percentile(lat, q):
    s = sorted(lat)
    return s[min(len(s) - 1, int(len(s) * q))] if s else float("inf")


def worker_fds(env, port):
    """{worker pid: (descriptors, of which sockets to port)}, sampled with
    no batch in flight."""
    time.sleep(0.3)
    return {p: (harness.fd_count(p), harness.upstream_fds(p, port))
            for p in sorted(env.worker_pids())}


def side_by_side(prov, runs, rtt_ms, batches, warm_batches, workers):
    """One enrichd (and its nginx) per run of runs, [(listener kind, label,
    enrichd.conf text)], their upstream_url through a delay proxy of
    rtt_ms; warm_batches each, then `batches` each, interleaved.  Returns
    {label: res}: Client's counts plus share, p50, p99 (ms), took (s), t0
    (its start, epoch seconds), m0
    and m1 (/metrics before and after), log (the listener's requests
    during the run), s0 and s1 (worker_fds before and after), heads and
    conns (HEAD requests and connections the listener saw from the start
    of enrichd), proxy (the delay proxy's counters)."""
    envs, out = [], {}
    start = [len(prov.nginx.requests(kind)) for kind, _, _ in runs]
    try:
        for kind, label, conf in runs:
            env = harness.Env(name="up-" + label)
            envs.append(env)
            env.start_enrichd(conf)
            env.start_nginx()
        for env in envs:
            env.wait_workers(workers)
        clients = [Client(env) for env in envs]
        for i in range(warm_batches):
            for c, run in zip(clients, runs):
                c.send(batch(run[1] + "warm", i))
        time.sleep(0.5)  # connections the warm-up saw closed are replaced
        before = [(harness.metrics(env), len(prov.nginx.requests(kind)),
                   worker_fds(env, prov.port(kind, rtt_ms)))
                  for env, (kind, _, _) in zip(envs, runs)]
        for c in clients:
            c.close()
        clients = [Client(env) for env in envs]
        t0, wall0 = time.monotonic(), time.time()
        for i in range(batches):
            for c, run in zip(clients, runs):
                c.send(batch(run[1], i))
        took = time.monotonic() - t0
        for c in clients:
            c.close()
        for env, c, (kind, label, _), (m0, seen0, s0), first in zip(envs, clients, runs, before,
                                                                     start):
            res = c.res
            whole = prov.nginx.requests(kind)
            res.update(took=took, t0=wall0, m0=m0, m1=harness.metrics(env), log=whole[seen0:], s0=s0,
                       s1=worker_fds(env, prov.port(kind, rtt_ms)), kind=kind,
                       heads=sum(1 for x in whole[first:] if x["method"] == "HEAD"),
                       conns=len(set(x["conn"] for x in whole[first:])),
                       proxy=prov.proxy(kind, rtt_ms).stats(),
                       share=res["enriched"] / max(1, res["records"]),
                       p50=percentile(res["lat"], 0.5), p99=percentile(res["lat"], 0.99))
            out[label] = res
    finally:
        for env in envs:
            env.close()
    return out
