"""store_fixture.py: a real redis-server (the Debian package's binary) for
the shared store's tests, started by the test as nginx is: in a temp dir
of its own, on a unix socket (and, when asked, a loopback port), no
persistence unless asked, its own session, killed on close.

A small RESP client of its own (no redis-py in Debian's python3 base):
cmd() sends one command and reads one reply, for the tests to look at
and forge what the store holds.  kill9()/start() and stop()/cont() are
the faults the suites inject.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import harness

REDIS_SERVER = "/usr/bin/redis-server"


class RespError(Exception):
    pass


def _encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise ConnectionError("redis closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            d = self.sock.recv(65536)
            if not d:
                raise ConnectionError("redis closed")
            self.buf += d
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RespError("bad reply type %r" % t)


class Redis:
    """redis-server on a unix socket in its own temp dir (tcp=True: also
    on a loopback port).  password: requirepass for the default user and
    an ACL user 'enrichd' with it (Redis 6 ACL)."""

    def __init__(self, tcp=False, password=None, persist=False):
        if not os.path.exists(REDIS_SERVER):
            raise RuntimeError("redis-server is not installed (scripts/deps.sh test)")
        self.dir = tempfile.mkdtemp(prefix="enr-redis-")
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, "redis.sock")
        self.port = harness.free_port() if tcp else 0
        self.password = password
        self.persist = persist
        self.proc = None
        self.start()

    @property
    def url(self):
        return "unix:%s" % self.sock

    @property
    def tcp_url(self):
        return "redis://127.0.0.1:%d/0" % self.port

    def start(self):
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--unixsocket", self.sock, "--unixsocketperm", "777", "--dir", self.dir,
                "--daemonize", "no", "--logfile", os.path.join(self.dir, "redis.log"),
                "--save", "", "--appendonly", "yes" if self.persist else "no",
                "--protected-mode", "no"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        harness.wait_for(self._answers, 10, what="redis-server")
        if self.password:
            self.cmd("ACL", "SETUSER", "enrichd", "on", ">" + self.password, "~*", "+@all")

    def _answers(self):
        try:
            return self.cmd("PING") == "PONG"
        except (OSError, ConnectionError, RespError):
            return False

    def cmd(self, *args):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(self.sock)
            r = _Reader(s)
            if self.password:
                s.sendall(_encode(["AUTH", self.password]))
                r.reply()
            s.sendall(_encode(list(args)))
            return r.reply()
        finally:
            s.close()

    def keys(self, pattern="*"):
        return sorted(k.decode("utf-8", "surrogateescape") for k in self.cmd("KEYS", pattern))

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def cont(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def clients(self):
        """Connections of clients other than this one."""
        text = self.cmd("CLIENT", "LIST").decode()
        return max(0, len([l for l in text.splitlines() if l.strip()]) - 1)

    def close(self):
        if self.proc is not None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            harness.kill_group(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def wait_clients(redis, n, timeout=10.0):
    """Until at least n clients are connected (the workers' idle loops
    connect after their start)."""
    harness.wait_for(lambda: redis.clients() >= n, timeout, what="%d store clients" % n)


def monotonic_ms():
    return time.monotonic() * 1000
