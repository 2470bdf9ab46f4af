"""harness.py: shared helpers for the integration tests (real processes).

Each test gets an Env: a private temp dir holding enrichd's sockets, its
configuration, a generated top-level nginx.conf that `include`s the
project's nginx/enrichd.conf (its four deployment strings substituted,
see that file's header), logs, and a NOTIFY_SOCKET listener.  Every
process is started in its own session and killed (whole process group)
by Env.close(), which runs even when a test fails.

One home per helper: a suite that needs a helper another suite has
takes it from here (or adds it here), never copies it.  The raw FastCGI
client is fcgi_client.py (its names are re-exported here); the other
front ends (Apache, lighttpd) are frontends.py.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

# What /proc says of a process has its own file; its names are the
# harness's too (the suites take them from here).
from procinfo import (children, fd_count, is_status_process, pid_alive,  # noqa: F401
                      proc_status_kb, socket_inodes_to, ss_listen_queue, upstream_fds)
# So do the clients that load the stack (loadgen.py).
from loadgen import Load, keepalive_clients  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NGINX_CONF = os.path.join(ROOT, "nginx", "enrichd.conf")
NGINX_SNIPPETS = os.path.join(ROOT, "nginx", "snippets")
NGINX_TOKENS = {
    "listen": "127.0.0.1:8080",
    "fastcgi": "/run/enrichd/enrichd.sock",
    "status": "/run/enrichd/status.sock",
    "access_log": "/var/log/nginx/enrichd.access.log",
}
# nginx's alone (the other front ends' sites have no operators' server):
# the port of the operators' server, on every address of the host.
NGINX_OPS_TOKENS = {
    "ops_listen": "8084",
}
IS_ROOT = os.geteuid() == 0


def render_nginx_site(text, subst):
    """nginx/enrichd.conf with its deployment strings (NGINX_TOKENS and
    NGINX_OPS_TOKENS, each exactly once outside comments) replaced by
    subst[key]."""
    return render_site(text, dict(NGINX_TOKENS, **NGINX_OPS_TOKENS), subst,
                       "nginx/enrichd.conf")


def render_site(text, tokens, subst, name):
    """A front end's shipped site (name) with its deployment strings
    (tokens: {key: string}, each exactly once outside comments) replaced
    by subst[key]."""
    lines = text.split("\n")
    for key, token in tokens.items():
        hits = [i for i, l in enumerate(lines) if token in l and not l.lstrip().startswith("#")]
        if len(hits) != 1:
            raise AssertionError("%s: %r must occur exactly once" % (name, token))
        lines[hits[0]] = lines[hits[0]].replace(token, subst[key])
    return "\n".join(lines)


def copy_snippets(dest, edit=None):
    """nginx/snippets/ into dest (the snippets/ folder next to a generated
    nginx.conf), each file through edit(name, text) when given."""
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(NGINX_SNIPPETS):
        with open(os.path.join(NGINX_SNIPPETS, name)) as f:
            text = f.read()
        if edit is not None:
            text = edit(name, text)
        with open(os.path.join(dest, name), "w") as f:
            f.write(text)


def build_dir():
    d = os.environ.get("ENR_BUILD", "build")
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def flagged_build_dir(var, default, flag):
    """The tree built with -Dflag into $var (else default), on demand, under a
    lock (concurrent suites, one build).  $ENR_HOOKS_NO_MAKE: taken as built."""
    d = os.environ.get(var, default)
    d = d if os.path.isabs(d) else os.path.join(ROOT, d)
    if os.environ.get("ENR_HOOKS_NO_MAKE"):
        return d
    import fcntl
    os.makedirs(d, exist_ok=True)
    rel = os.path.relpath(d, ROOT)
    with open(os.path.join(d, ".build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "-C", ROOT, "B=" + rel, "EXTRA_CFLAGS=-D" + flag,
                        rel + "/enrichd"], check=True, stdout=subprocess.DEVNULL)
    return d


def hooks_build_dir():
    """The test-hooks build: leak injection, crash and sleep hooks."""
    return flagged_build_dir("ENR_HOOKS_BUILD", "build-hooks", "ENR_TEST_HOOKS")


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def poll(cond, timeout=10.0, interval=0.02):
    """Polls cond() until it returns a true value or timeout passes;
    returns its last value (false on time-out), so that a check can be
    made of it: r.check(poll(...))."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def wait_for(cond, timeout=10.0, interval=0.02, what="condition"):
    """poll() that raises TimeoutError (saying what) instead of returning
    a false value."""
    v = poll(cond, timeout, interval)
    if not v:
        raise TimeoutError("timed out waiting for " + what)
    return v


def in_threads(fn, n, timeout=30.0):
    """fn(0) ... fn(n - 1), each in a thread of its own, side by side;
    returns once every one has ended (or timeout s passed for each)."""
    ts = [threading.Thread(target=fn, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)


NOBODY = 65534  # the other user tests plant files and links as (root only)


def as_user(fn, uid=NOBODY, gid=NOBODY):
    """fn() in a forked child as uid/gid (another user, for planting what
    an attacker would); True unless it raised or returned False."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os._exit(1 if fn() is False else 0)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, st = os.waitpid(pid, 0)
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0


def parse_logfmt(line):
    out = {}
    for m in re.finditer(r'(\w+)=("((?:[^"\\]|\\.)*)"|\S*)', line):
        out[m.group(1)] = m.group(3) if m.group(3) is not None else m.group(2)
    return out


class SocketLoop:
    """A socket served by a daemon thread until close(): a subclass's
    serve() takes one turn (one accept, one datagram).  The socket's
    short timeout lets the loop see close() within 0.2 s; close() waits
    join_s for a turn in progress."""

    join_s = 5.0

    def __init__(self, sock):
        self.sock = sock
        self.sock.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                self.serve()
            except OSError:  # a time-out, or the socket closed by close()
                continue

    def serve(self):
        raise NotImplementedError

    def close(self):
        self.stop = True
        self.thread.join(self.join_s)
        self.sock.close()


class Notify(SocketLoop):
    """A NOTIFY_SOCKET: collects sd_notify datagrams with their times."""

    def __init__(self, path):
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        os.chmod(path, 0o666)
        self.messages = []  # (monotonic time, {key: value})
        self.lock = threading.Lock()
        super().__init__(sock)

    def serve(self):
        data = self.sock.recv(4096)
        kv = {}
        for line in data.decode("utf-8", "replace").split("\n"):
            if "=" in line:
                k, v = line.split("=", 1)
                kv[k] = v
        with self.lock:
            self.messages.append((time.monotonic(), kv))

    def keys(self):
        """The sequence of notification kinds, e.g. ['READY', 'STATUS', ...]."""
        with self.lock:
            out = []
            for _, kv in self.messages:
                for k in ("READY", "RELOADING", "STOPPING", "WATCHDOG", "STATUS"):
                    if k in kv:
                        out.append(k)
                        break
            return out

    def values(self, key):
        with self.lock:
            return [kv[key] for _, kv in self.messages if key in kv]

    def wait(self, key, count=1, timeout=10.0):
        return wait_for(lambda: len(self.values(key)) >= count, timeout,
                        what="%d x %s notification" % (count, key))


class Env:
    """One test's world: temp dir, enrichd, nginx, notify socket."""

    def __init__(self, build=None, name="enrichd"):
        self.dir = tempfile.mkdtemp(prefix=name + "-")
        # nginx workers (www-data) must reach the sockets in here.
        os.chmod(self.dir, 0o755)
        self.build = build or build_dir()
        self.sock = os.path.join(self.dir, "enrichd.sock")
        self.status_sock = os.path.join(self.dir, "status.sock")
        self.conf = os.path.join(self.dir, "enrichd.conf")
        self.enrichd_log = os.path.join(self.dir, "enrichd.log")
        self.nginx_log = os.path.join(self.dir, "nginx-error.log")
        self.access_log = os.path.join(self.dir, "access.log")
        self.port = None
        self.ops_port = None
        self.procs = []
        self.enrichd = None  # Popen of enrichd (or of systemd-socket-activate)
        self.nginx = None
        self.notify = None
        self._log_fh = None

    # -- configuration ----------------------------------------------------
    def write_config(self, extra=""):
        group = "www-data" if IS_ROOT else ""
        text = ("listen = %s\nstatus_listen = %s\nlisten_group = %s\n"
                "listen_mode = 0660\n" % (self.sock, self.status_sock, group))
        # A key in extra replaces the harness's own line (duplicates are errors).
        mine = set(l.split("=")[0].strip() for l in extra.splitlines() if "=" in l)
        text = "".join(l + "\n" for l in text.splitlines() if l.split("=")[0].strip() not in mine)
        with open(self.conf, "w") as f:
            f.write(text + extra)
        return self.conf

    # -- processes ----------------------------------------------------------
    def start_enrichd(self, extra_conf="", activate=False, notify=False, watchdog_usec=None,
                      env=None, args=None, wait_ready=True):
        """Starts enrichd (under systemd-socket-activate when activate=True,
        which binds both sockets and passes them with names)."""
        if not os.path.exists(self.conf) or extra_conf:
            self.write_config(extra_conf)
        e = dict(os.environ)
        e.update(env or {})
        if notify:
            self.notify = Notify(os.path.join(self.dir, "notify.sock"))
            e["NOTIFY_SOCKET"] = self.notify.path
        if watchdog_usec:
            e["WATCHDOG_USEC"] = str(watchdog_usec)
        cmd = [os.path.join(self.build, "enrichd"), "-c", self.conf] + (args or [])
        if activate:
            pre = ["systemd-socket-activate", "-l", self.sock, "-l", self.status_sock,
                   "--fdname=enrichd:status"]
            # it passes on only what -E names: the daemon's own settings,
            # and the sanitizers' (so that a sanitizer build reports to
            # the pass's logs, as every other daemon of the run does)
            for k in sorted(e):
                if k in ("NOTIFY_SOCKET", "WATCHDOG_USEC") or k.startswith("ENRICHD_") \
                        or k.endswith("SAN_OPTIONS"):
                    pre += ["-E", "%s=%s" % (k, e[k])]
            cmd = pre + cmd
        self._log_fh = open(self.enrichd_log, "ab")
        self.enrichd = subprocess.Popen(cmd, stdout=self._log_fh, stderr=self._log_fh, env=e,
                                        start_new_session=True)
        self.procs.append(self.enrichd)
        if activate:
            wait_for(lambda: os.path.exists(self.sock) and os.path.exists(self.status_sock),
                     5, what="activation sockets")
            for p in (self.sock, self.status_sock):
                os.chmod(p, 0o660)
                if IS_ROOT:
                    shutil.chown(p, group="www-data")
        elif wait_ready:
            self.wait_log("ready", timeout=10)
        return self.enrichd

    def start_nginx(self, site_edit=None, snippet_edit=None):
        """nginx with nginx/enrichd.conf and nginx/snippets/; site_edit(text)
        (the site with its deployment strings substituted) and
        snippet_edit(name, text) -> text may change them first (another
        upstream, a careless operator's settings)."""
        self.port = free_port()
        # The operators' server on loopback and a port of its own, so that
        # parallel tests' nginx instances never collide.
        self.ops_port = free_port()
        while self.ops_port == self.port:
            self.ops_port = free_port()
        copy_snippets(os.path.join(self.dir, "snippets"), snippet_edit)
        with open(NGINX_CONF) as f:
            text = f.read()
        subst = {
            "listen": "127.0.0.1:%d" % self.port,
            "ops_listen": "127.0.0.1:%d" % self.ops_port,
            "fastcgi": self.sock,
            "status": self.status_sock,
            "access_log": self.access_log,
        }
        text = render_nginx_site(text, subst)
        if site_edit is not None:
            text = site_edit(text)
        site = os.path.join(self.dir, "enrichd-site.conf")
        with open(site, "w") as f:
            f.write(text)
        top = os.path.join(self.dir, "nginx.conf")
        user = "user www-data www-data;\n" if IS_ROOT else ""
        with open(top, "w") as f:
            f.write(user + "worker_processes 2;\ndaemon off;\nmaster_process on;\n"
                    "pid %s/nginx.pid;\nerror_log %s warn;\n"
                    "events { worker_connections 1024; }\n"
                    "http {\n"
                    "  client_body_temp_path %s/body;\n  fastcgi_temp_path %s/fastcgi;\n"
                    "  proxy_temp_path %s/proxy;\n  uwsgi_temp_path %s/uwsgi;\n"
                    "  scgi_temp_path %s/scgi;\n"
                    "  include %s;\n}\n" % ((self.dir, self.nginx_log) + (self.dir,) * 5 + (site,)))
        self.nginx = subprocess.Popen(["nginx", "-p", self.dir, "-c", top, "-e", self.nginx_log],
                                      stdout=subprocess.DEVNULL, stderr=open(self.nginx_log, "ab"),
                                      start_new_session=True)
        self.procs.append(self.nginx)
        wait_for(self._port_open, 10, what="nginx port")
        return self.nginx

    def start_stack(self, extra_conf="", workers=None, **kw):
        """enrichd (start_enrichd's arguments), then nginx in front of it;
        with workers=N, waits for N workers and returns their pids."""
        self.start_enrichd(extra_conf, **kw)
        self.start_nginx()
        return self.wait_workers(workers) if workers is not None else None

    def _port_open(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            return True
        except OSError:
            return False

    def request(self, path="/", body=b"[]", method="POST", headers=None, timeout=15):
        """One request through nginx: (status, {lower header: value}, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body if method not in ("GET", "HEAD") else None,
                         headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    # -- observation ----------------------------------------------------------
    def log_lines(self):
        try:
            with open(self.enrichd_log, "rb") as f:
                return f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []

    def log_events(self, msg=None):
        out = []
        for line in self.log_lines():
            if not line.startswith("ts="):
                continue
            ev = parse_logfmt(line)
            if msg is None or ev.get("msg") == msg:
                out.append(ev)
        return out

    def wait_log(self, msg, count=1, timeout=10.0, pred=None):
        def have():
            evs = [e for e in self.log_events(msg) if pred is None or pred(e)]
            return evs if len(evs) >= count else None
        return wait_for(have, timeout, what="%d log line(s) msg=%r" % (count, msg))

    def master_pid(self):
        """enrichd's master: the Popen pid (systemd-socket-activate execs it)."""
        return self.enrichd.pid

    def status_pid(self):
        evs = self.log_events("status process start")
        return int(evs[-1]["child_pid"]) if evs else None

    def worker_pids(self):
        """The master's children but the status process: the one the log
        names, and one whose title says so (the master logs a new status
        process only after its fork, so a restarted one is unnamed for a
        moment; it titles itself as it starts)."""
        st = self.status_pid()
        return [p for p in children(self.master_pid()) if p != st and not is_status_process(p)]

    def wait_workers(self, n, timeout=10.0):
        """Waits until exactly n workers are alive and idle or busy."""
        def ok():
            pids = self.worker_pids()
            return pids if len(pids) == n else None
        return wait_for(ok, timeout, what="%d workers" % n)

    def signal(self, sig):
        os.kill(self.master_pid(), sig)

    def wait_exit(self, timeout=15.0):
        return self.enrichd.wait(timeout)

    def close(self):
        for p in self.procs:
            kill_group(p)
        if self.notify:
            self.notify.close()
        if self._log_fh:
            self._log_fh.close()
        discard_dir(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None and os.environ.get("ENR_VERBOSE"):
            sys.stdout.write("\n".join(self.log_lines()[-40:]) + "\n")
        self.close()
        return False


def kill_group(proc):
    """SIGKILL to proc's whole process group (each process the tests start
    leads its own session), then reaps it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(5)
    except Exception:  # noqa: BLE001
        pass


def batches_failing(env, body, n, lines):
    """Sends body n times through nginx; the statuses of those that were
    not a 200 of `lines` lines."""
    bad = []
    for _ in range(n):
        st, _, data = env.request("/v1/enrich", body)
        if st != 200 or data.count(b"\n") != lines:
            bad.append(st)
    return bad


def discard_dir(path):
    """Removes a test's directory, or keeps it (and says where) when
    ENR_KEEP_TMP is set, for a look at its logs and configurations."""
    if os.environ.get("ENR_KEEP_TMP"):
        print("kept", path)
    else:
        shutil.rmtree(path, ignore_errors=True)


class Results:
    """Counts checks and prints the 'N passed, M failed' line."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.tests = self.tests_failed = 0  # test functions run, and those that failed

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what)
        return cond

    def goal(self, cond, what, value=None, bound=None):
        """A time or rate goal that is no deadline the product enforces:
        printed, met or missed, never counted.  `make bench-goals` runs
        the suites one at a time, reads these lines and compares
        value/bound (one number against one bar) with its last run's.  A
        deadline the product enforces is a check with a wide margin."""
        line = "goal %s: %s" % ("met" if cond else "missed", what)
        if value is not None and bound is not None:
            line += " [value=%.6g bound=%.6g]" % (value, bound)
        print(line)
        return cond

    def run(self, fn, *args):
        """Runs one test function; an exception counts as one failure."""
        failed0 = self.failed
        self.tests += 1
        try:
            fn(self, *args)
        except Exception as e:
            import traceback
            self.failed += 1
            print("FAIL: %s raised %r" % (fn.__name__, e))
            traceback.print_exc(file=sys.stdout)
        if self.failed > failed0:
            self.tests_failed += 1

    def done(self):
        # tests/run.py reads both lines: tests (functions) and assertions.
        print("tests: %d run, %d failed" % (self.tests, self.tests_failed))
        print("%d passed, %d failed" % (self.passed, self.failed))
        sys.exit(1 if self.failed else 0)


def site_edit(conf, old, new):
    """An edit of the nginx site's files for Env.start_nginx: old (which
    the file must hold, so a test never runs on a site it did not mean)
    replaced by new in the file named conf."""
    def edit(name, text):
        if name != conf:
            return text
        assert old in text, "%s holds no %r" % (conf, old)
        return text.replace(old, new)
    return edit


def run_tests(*fns, fixture=None):
    """A suite's main: each test function in order, then the summary
    lines, and exit 1 on any failure.  With fixture (a context manager
    class, such as a fake upstream), one is made for the whole suite and
    passed to every test function.  Names on the command line (a test's
    name without test_) run those tests alone, to rerun one by hand."""
    r = Results()
    only = sys.argv[1:]
    fns = [fn for fn in fns if not only or fn.__name__[len("test_"):] in only]
    if fixture is None:
        for fn in fns:
            r.run(fn)
    else:
        with fixture() as fx:
            for fn in fns:
                r.run(fn, fx)
    r.done()


def sample_body(records=50):
    """A valid batch of `records` records (ASCII, with bulky fields)."""
    recs = []
    for i in range(records):
        recs.append({"id": "Vid%05d" % i, "provider": ("yt", "vm", "dm")[i % 3],
                     "title": "  Title   number %d  " % i, "duration": i * 7,
                     "blocked": ["JP"] if i % 5 == 0 else [],
                     "description": "x" * 200, "tags": ["a", "b", "c"]})
    return json.dumps(recs).encode()


def is_sanitized(build):
    """True for an ASan build (its allocator fails differently from glibc's)."""
    with open(os.path.join(build, "enrichd"), "rb") as f:
        return b"__asan_init" in f.read()


FAKE_UPSTREAM = os.path.join(ROOT, "tests", "fake_upstream.py")


class FakeUpstream:
    """tests/fake_upstream.py (docs/upstream.md with switchable faults) in its own
    session, killed on exit; control() switches its fault mode.  A fake
    built on it (tests/fake_providers.py) sets script."""
    script = FAKE_UPSTREAM

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="enr-fakeup-")
        ready = os.path.join(self.dir, "ready.json")
        self.proc = subprocess.Popen([sys.executable, self.script, "--ready-file", ready] + list(args),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        try:
            wait_for(lambda: os.path.exists(ready), 10, what="fake upstream")
            with open(ready) as f:
                info = json.load(f)
        except Exception:
            self.close()
            raise
        self.port, self.cport = info["port"], info["control_port"]
        self.url = "http://127.0.0.1:%d/v1/meta" % self.port

    def _req(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.cport, timeout=5)
        try:
            c.request(method, path, body=body)
            r = c.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError("fake upstream %s %s: %d" % (method, path, r.status))
            return json.loads(data)
        finally:
            c.close()

    def control(self, **kw):
        out = self._req("POST", "/_control", json.dumps(kw))
        # refuse closes (and leaving it reopens) the data listener from a
        # thread of the fake, which answers once it is done: the port is
        # checked too, so a switch that outlasts the fake's wait is seen.
        if "mode" in kw:
            wait_for(lambda: self._listening() == (kw["mode"] != "refuse"), 5,
                             what="fake upstream data port state")
        return out

    def _listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.5).close()
            return True
        except OSError:
            return False

    def stats(self):
        return self._req("GET", "/_stats")

    def reset(self):
        return self._req("POST", "/_reset", "{}")

    def close(self):
        kill_group(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def worker_exit_reasons(env):
    """reason= of every 'worker exit' line of the log."""
    return [e.get("reason") for e in env.log_events("worker exit")]


# ---- helpers shared by the upstream and status suites ------------------------
# (one copy here; the suites import them from this module, never from each
# other)

from collections import OrderedDict  # noqa: E402
from urllib.parse import quote  # noqa: E402

PROMTOOL = "/usr/bin/promtool"

BASES = {"yt": "https://i.ytimg.com/vi", "vm": "https://i.vimeocdn.com/video",
         "dm": "https://s2.dmcdn.net/v"}


def upstream_conf(fake, **over):
    """enrichd.conf lines for an upstream at fake (None: enrichment off)."""
    keys = OrderedDict([("upstream_url", fake.url if fake else ""),
                        ("upstream_timeout_ms", 500), ("ids_per_call", 50),
                        ("max_calls_per_batch", 4), ("upstream_max_connections", 4),
                        ("cache_entries", 50000), ("cache_ttl_s", 3600),
                        ("cache_negative_ttl_s", 300), ("breaker_failures", 5),
                        ("breaker_cooldown_ms", 5000)])
    keys.update(over)
    return "".join("%s = %s\n" % (k, v) for k, v in keys.items())


def post(env, recs, conn=None, path="/v1/enrich"):
    """POST a batch; (status, headers, [ordered dict per line])."""
    return post_timed(env, recs, conn, path)[:3]


def post_timed(env, recs, conn=None, path="/v1/enrich"):
    """post(), and the exchange's milliseconds: from the request's first
    byte sent to the answer's last byte read, the client's own JSON work
    (the body's encoding, the lines' decoding) left out, as a latency
    measures the server and the path, not the client."""
    body = json.dumps(recs).encode()
    t0 = time.monotonic()
    if conn is None:
        st, h, data = env.request(path, body=body)
    else:
        conn.request("POST", path, body=body)
        r = conn.getresponse()
        data = r.read()
        st, h = r.status, {k.lower(): v for k, v in r.getheaders()}
    ms = (time.monotonic() - t0) * 1000
    lines = []
    if st == 200:
        lines = [json.loads(x, object_pairs_hook=OrderedDict)
                 for x in data.decode("utf-8", "surrogatepass").split("\n") if x]
    return st, h, lines, ms


def degraded(h):
    return int(h.get("x-enrich-degraded", "0"))


def fake_duration(key):
    import zlib
    return 1 + (zlib.crc32(key.encode("utf-8", "surrogatepass")) & 0xFFFFFFFF) % 7200


def fake_poster(provider, key):
    return "https://img.example/%s/%s.jpg" % (provider, quote(key.encode("utf-8"), safe="-._~"))


def local_poster(provider, out_id):
    return "%s/%s/hqdefault.jpg" % (BASES[provider], out_id)


def metrics(env):
    """env's /metrics as {name{labels}: float} ({} when not a 200)."""
    st, _, data = env.request("/metrics", method="GET")
    return metrics_values(data.decode()) if st == 200 else {}


def fail_kinds(env, kinds=("timeout", "connect", "tls", "status", "body")):
    """env's upstream failures of these kinds, {kind: count}."""
    m = metrics(env)
    return {k: m.get('enrichd_upstream_failures_total{kind="%s"}' % k, 0) for k in kinds}


def metric(env, name, default=None):
    """One sample of env's /metrics (name with its labels as printed)."""
    return metrics(env).get(name, default)


# The calls a worker blocks in while it waits for its next connection
# (epoll_pwait, ppoll), by machine; a lingering close polls with poll().
_LISTEN_WAIT = {"x86_64": ("281", "271"), "aarch64": ("22", "73")}


def wait_worker_listening(pid, timeout=10.0):
    """Waits until worker pid blocks in its wait for the next connection
    (/proc/pid/syscall): the connection before it is closed, not merely
    answered (the worker's lingering close ends after the client's)."""
    calls = _LISTEN_WAIT[os.uname().machine]

    def waiting():
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split(" ", 1)[0] in calls
    wait_for(waiting, timeout, 0.002, what="worker %d to wait for a connection" % pid)


def worker_constant(name):
    """A millisecond constant of src/pool/worker.h, in seconds."""
    with open(os.path.join(ROOT, "src", "pool", "worker.h")) as f:
        m = re.search(r"#define %s (\d+)" % name, f.read())
    if not m:
        raise RuntimeError("%s is not defined in src/pool/worker.h" % name)
    return int(m.group(1)) / 1000.0


def bench_body(which="big"):
    """One of bench-engine's batches (big: 400 KB, 200 records)."""
    return subprocess.run([os.path.join(build_dir(), "bench-engine"), "--dump", which],
                          capture_output=True, check=True).stdout


def zero_fetched_at(body):
    """NDJSON with every fetched_at written as 0: the bytes to compare."""
    return re.sub(rb'"fetched_at":\d+', b'"fetched_at":0', body)


def cli_enrich(body):
    """build/enrich's answer to body: (exit status, stdout bytes)."""
    p = subprocess.run([os.path.join(build_dir(), "enrich")], input=body,
                       capture_output=True, timeout=60)
    return p.returncode, p.stdout


def strip_clock(line):
    return OrderedDict((k, v) for k, v in line.items() if k != "fetched_at")


def get_json(env, path, expect=200):
    st, h, body = env.request(path, method="GET")
    if st != expect:
        raise AssertionError("%s: %d %r" % (path, st, body[:300]))
    return json.loads(body)


def records_body(n, bad=0, seed=0):
    """n valid records with ids unique to seed (so no cache hit), plus bad
    records (provider not in the contract) that are rejected."""
    recs = [{"provider": ("yt", "vm", "dm")[i % 3], "id": "s%dr%d" % (seed, i), "title": "t %d" % i}
            for i in range(n)]
    recs += [{"provider": "xx", "id": "bad%d" % i} for i in range(bad)]
    return json.dumps(recs).encode()


def promtool_check(text):
    """`promtool check metrics` (Debian's prometheus package) on text."""
    if not os.path.exists(PROMTOOL):
        return False, "promtool missing: apt-get install prometheus"
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30)
    return p.returncode == 0, (p.stdout + p.stderr).decode(errors="replace")


def metrics_values(text):
    """{'name{labels}': value} of an exposition (labels as printed): the
    one parser of the tests."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, v = line.rpartition(" ")
        out[name] = float(v)
    return out


# The raw FastCGI client has its own file; its names are the harness's too.
from fcgi_client import *  # noqa: E402,F401,F403


def start_one_worker(env, max_body, request_timeout_ms, body_timeout_ms):
    """enrichd with one worker, these bounds, and no recycling for its
    size (the raw FastCGI suites count on one worker throughout): its
    pid, in a list."""
    env.start_enrichd("workers = 1\nmax_body_bytes = %d\nrequest_timeout_ms = %d\n"
                      "body_timeout_ms = %d\nrss_soft_mb = 0\nrss_hard_mb = 0\n"
                      % (max_body, request_timeout_ms, body_timeout_ms))
    return env.wait_workers(1)


def check_same_worker(r, env, pids, request):
    """After a suite's hostile records: request (FastCGI bytes, a batch)
    is answered 200 by the worker that took them all."""
    out, _ = fcgi_exchange(env.sock, request)  # noqa: F405
    return r.check(fcgi_status(out["stdout"]) == 200 and env.worker_pids() == pids,  # noqa: F405
                   "after all of it: the same worker answers a batch")
