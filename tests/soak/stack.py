"""stack.py: the soak's stack, systemd's part and the pool seen from outside.

Owns the socket holder (both sockets bound once and passed to each master
as LISTEN_FDS, the master started again RESTART_SEC after it dies, the
NOTIFY_SOCKET with the unit's WATCHDOG_USEC), the reads of the pool from
outside (/metrics from the status socket, RSS and descriptors from /proc,
the listen queue from ss), and the master's life cycle as the run drives it
(start, wait for ready, the SIGKILL).  Invariant: the sockets outlive
every master, so a request made while no master runs waits in the queue.
"""
import os
import shutil
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness  # noqa: E402

RESTART_SEC = 1.0             # the unit's RestartSec
QUIESCE_S = 30.0              # the longest wait for in-flight requests to end
SAMPLE_S = 0.5
WATCHDOG_S = 10.0             # the shipped unit's WatchdogSec
LEAK = "fd:1,mem:128"
T0 = time.monotonic()


def log(msg):
    sys.stdout.write("[%7.1f] %s\n" % (time.monotonic() - T0, msg))
    sys.stdout.flush()


# ---- the socket holder (systemd's part) ----------------------------------
class Holder:
    """Binds enrichd's two sockets once and starts the master with them as
    LISTEN_FDS 3 and 4 (named enrichd and status), again after each death."""

    def __init__(self, env, build, backlog, shim, clockfile):
        self.env, self.build, self.shim, self.clockfile = env, build, shim, clockfile
        # systemd's other half: the notifications, WATCHDOG=1 among them.
        self.notify = harness.Notify(os.path.join(env.dir, "notify.sock"))
        self.starts = []
        self.socks = []
        for path in (env.sock, env.status_sock):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(backlog)
            os.chmod(path, 0o660)
            if harness.IS_ROOT:
                shutil.chown(path, group="www-data")
            self.socks.append(s)
        # Above 4, so dup2 onto 3 and 4 always clears close-on-exec.
        self.fds = [os.dup2(s.fileno(), 20 + i, inheritable=False) for i, s in enumerate(self.socks)]
        self.pid = None
        self.lives = 0
        self.logfd = os.open(env.enrichd_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def start(self):
        e = dict(os.environ)
        e.update(LISTEN_FDS="2", LISTEN_FDNAMES="enrichd:status", LD_PRELOAD=self.shim,
                 ENR_CLOCKSHIFT_FILE=self.clockfile, NOTIFY_SOCKET=self.notify.path,
                 WATCHDOG_USEC=str(int(WATCHDOG_S * 1e6)))
        e.pop("ENRICHD_TEST_LEAK", None)
        if self.lives % 2 == 1:
            e["ENRICHD_TEST_LEAK"] = LEAK
        argv = ["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"',
                os.path.join(self.build, "enrichd"), "-c", self.env.conf]
        acts = [(os.POSIX_SPAWN_DUP2, self.fds[0], 3), (os.POSIX_SPAWN_DUP2, self.fds[1], 4),
                (os.POSIX_SPAWN_DUP2, self.logfd, 1), (os.POSIX_SPAWN_DUP2, self.logfd, 2)]
        self.starts.append(time.monotonic())
        self.pid = os.posix_spawn("/bin/sh", argv, e, file_actions=acts, setsid=True)
        self.lives += 1
        return self.pid

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)

    def watchdog_gaps(self, end):
        """[(start, seconds)] of the stretches without WATCHDOG=1 longer
        than WatchdogSec: where systemd would have killed the service."""
        with self.notify.lock:
            pings = [t for t, kv in self.notify.messages if kv.get("WATCHDOG") == "1"]
        marks = sorted(pings + self.starts + [end])
        return [(a, b - a) for a, b in zip(marks, marks[1:]) if b - a > WATCHDOG_S]

    def close(self):
        self.notify.close()
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass


def scrape(env):
    """/metrics from the status socket itself (so not in nginx's ledger)."""
    params = {"REQUEST_METHOD": "GET", "REQUEST_URI": "/metrics", "DOCUMENT_URI": "/metrics",
              "SCRIPT_NAME": "/metrics", "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1",
              "SERVER_PROTOCOL": "HTTP/1.1", "CONTENT_LENGTH": ""}
    try:
        out = harness.fcgi_request(env.status_sock, params, timeout=5)
    except OSError:
        return None
    body = out.split(b"\r\n\r\n", 1)[-1].decode("utf-8", "replace")
    try:
        return harness.metrics_values(body)
    except ValueError:
        return None


def mval(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def pool_pids(master):
    return [master] + harness.children(master)


def pool_sample(master):
    rss = fds = 0
    for p in pool_pids(master):
        rss += harness.proc_status_kb(p, "VmRSS")
        try:
            fds += harness.fd_count(p)
        except OSError:
            pass
    return rss, fds


class StackMixin:
    """The Soak methods that drive the stack (soak.py holds the state)."""

    def workers(self):
        m = self.holder.pid
        kids = harness.children(m)
        st = [e for e in self.env.log_events("status process start")]
        stp = int(st[-1]["child_pid"]) if st else None
        return [p for p in kids if p != stp]

    def quiesce(self):
        """Holds new requests and waits for those in flight: the ledger of a
        master about to die is read when nothing can move it."""
        self.gate.clear()
        deadline = time.monotonic() + QUIESCE_S
        while time.monotonic() < deadline:
            with self.lock:
                n = self.inflight
            m = scrape(self.env) or {}
            if n == 0 and mval(m, "enrichd_requests_in_flight") == 0:
                return m
            time.sleep(0.05)
        return scrape(self.env)

    def kill_master(self):
        t = time.monotonic()
        m = self.quiesce()
        self.final.append(m)
        self.event("quiesced for the master's SIGKILL in %.2f s" % (time.monotonic() - t))
        self.holder.kill()
        self.gate.set()     # requests made meanwhile wait in the socket's queue
        self.event("SIGKILL master (life %d), traffic resumed" % self.holder.lives)
        time.sleep(RESTART_SEC)
        self.start_master()

    def start_master(self):
        t = time.monotonic()
        pid = self.holder.start()
        ok = harness.poll(lambda: scrape(self.env) is not None and len(self.workers()) >= 2, 10, 0.05)
        self.ready_s.append(time.monotonic() - t if ok else None)
        self.event("master %d started (life %d%s), ready in %s" %
                   (pid, self.holder.lives, ", leak shim " + LEAK if self.holder.lives % 2 == 0 else "",
                    "%.2f s" % self.ready_s[-1] if ok else "NEVER"))

    def conf_text(self):
        return ("workers = 2\nfd_soft = 64\nrss_soft_mb = 48\nmax_requests = %d\n" % self.max_requests
                + harness.upstream_conf(self.fake, upstream_timeout_ms=150, cache_entries=4096))

    # -- threads -----------------------------------------------------------
    def sampler(self):
        while not self.stop.is_set():
            t = self.now()
            pid = self.holder.pid
            rss, fds = pool_sample(pid)
            m = scrape(self.env) or {}
            q = harness.ss_listen_queue(self.env.sock)
            self.samples.append({"t": t, "rss": rss, "fds": fds, "queue": q or 0,
                                 "shed": mval(m, "enrichd_shed_total"),
                                 "degraded": mval(m, "enrichd_records_degraded_total"),
                                 "life": self.holder.lives, "up": bool(m)})
            self.stop.wait(SAMPLE_S)
