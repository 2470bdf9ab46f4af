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
WORKERS = 2                   # enrichd.conf's workers
FREEZE_WAIT_S = 1.0           # the longest wait for a SIGSTOP to take
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


def proc_state(pid):
    """The state letter of /proc/PID/stat ("X" once it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


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

    def status_pid(self):
        st = self.env.log_events("status process start")
        return int(st[-1]["child_pid"]) if st else None

    def workers(self, status_pid=None):
        stp = self.status_pid() if status_pid is None else status_pid
        return [p for p in harness.children(self.holder.pid) if p != stp]

    def quiesce(self):
        """Holds new requests and waits for those in flight: the run's
        last ledger is read when nothing can move it."""
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
        """SIGKILL of the master under live traffic, as systemd's would
        come (the watchdog's, or KillMode=mixed after a crash).  Its last
        counters cannot be read once it is dead, so the pool is frozen for
        the moment it takes to read them: SIGSTOP to the master (it then
        replaces no worker) and to each worker, the status process left
        running to answer /metrics; then SIGKILL, and the workers go with
        the master (PR_SET_PDEATHSIG).  What the workers held at that
        instant is enrichd_requests_in_flight of that read, and lost:
        nginx answers each 503 with Retry-After (its 502 turned by
        snippets/enrichd-errors.conf).  Requests made meanwhile wait in
        the socket's queue for the next master."""
        stp = self.status_pid()  # read before the freeze: the log is long
        t = time.monotonic()
        # Before the freeze: a request it loses was due before and is
        # answered (nginx's 503) after, maybe before this thread runs on.
        t_kill = self.now()
        master = self.holder.pid
        os.kill(master, signal.SIGSTOP)
        pids = self.workers(stp)
        for p in pids:
            try:
                os.kill(p, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped = harness.poll(lambda: all(proc_state(p) in "TtZX" for p in [master] + pids),
                               FREEZE_WAIT_S, 0.001)
        m = scrape(self.env)
        frozen_s = time.monotonic() - t
        self.holder.kill()
        held = int(mval(m, "enrichd_requests_in_flight")) if m else 0
        with self.lock:
            self.final.append(m)
            self.master_kills.append((t_kill, held))
        self.event("SIGKILL master (life %d) under traffic, frozen %.3f s to read its counters%s: %d "
                   "requests held by its workers" % (self.holder.lives, frozen_s,
                                                     "" if stopped else " (NOT ALL STOPPED)", held))
        time.sleep(RESTART_SEC)
        self.start_master()
        if not stopped or m is None:  # a fault not made as it should be: the verdict's finding
            raise RuntimeError("the pool was not frozen for the master's last counters "
                               "(stopped %s, /metrics %s)" % (stopped, m is not None))

    def start_master(self):
        t = time.monotonic()
        pid = self.holder.start()
        ok = harness.poll(lambda: scrape(self.env) is not None and len(self.workers()) >= WORKERS, 10, 0.05)
        self.ready_s.append(time.monotonic() - t if ok else None)
        self.event("master %d started (life %d%s), ready in %s" %
                   (pid, self.holder.lives, ", leak shim " + LEAK if self.holder.lives % 2 == 0 else "",
                    "%.2f s" % self.ready_s[-1] if ok else "NEVER"))

    def conf_text(self):
        return ("workers = %d\nfd_soft = 64\nrss_soft_mb = 48\nmax_requests = %d\n" % (WORKERS, self.max_requests)
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
