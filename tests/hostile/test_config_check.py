#!/usr/bin/env python3
"""test_config_check.py: `enrichd -t` knows its neighbours, `-T` shows
where every value came from.

1. An operator's first mistakes, each refused with a message that says
   what to do: a typo ("did you mean"), a UTF-8 byte order mark, a unit
   after a number ("drop the unit").
2. Valid files that would fail next to their neighbours, each warned
   (exit 0, "warning: FILE:LINE: key:" on stderr) and the same file
   without the problem not warned: an empty file; a world-writable
   socket; a socket directory listen_group cannot search (nginx: 502);
   fd_hard above the process's RLIMIT_NOFILE; workers x rss_hard_mb above
   the memory limit of the cgroup -t runs in (a real cgroup made for the
   test); request_timeout_ms not below fastcgi_read_timeout in the nginx
   snippet named by nginx_fastcgi_conf (the shipped one, and a copy with
   a compound time).
3. -T: every key of the built-in configuration once, the ones the file
   set with FILE:LINE, the others "built-in default"; the output is a
   configuration -t accepts and -T prints the same values again.
4. A FIFO (no writer ever comes) given as -c, as an included file or as
   nginx_fastcgi_conf is refused at once ("not a regular file"), by -t
   and by the daemon, never waited on.
"""
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness  # noqa: E402
from test_config_reload import builtin_keys  # noqa: E402  (the keys of the built-in text)

SNIPPET = os.path.join(harness.ROOT, "nginx", "snippets", "enrichd-fastcgi.conf")


class Checker:
    def __init__(self, env):
        self.env = env
        self.path = os.path.join(env.dir, "t.conf")
        self.enrichd = os.path.join(harness.build_dir(), "enrichd")
        # A base that warns of nothing: sockets in the test's own directory,
        # no nginx snippet unless a case names one.
        self.base = ["listen = %s" % env.sock, "status_listen = %s" % env.status_sock,
                     "nginx_fastcgi_conf ="]

    def run(self, lines, flag="-t", base=True, raw=None, preexec=None):
        if raw is None:
            mine = set(l.split("=", 1)[0].strip() for l in lines)
            text = [l for l in self.base if l.split("=", 1)[0].strip() not in mine] if base else []
            raw = ("\n".join(text + lines) + "\n").encode() if text or lines else b""
        with open(self.path, "wb") as f:
            f.write(raw)
        p = subprocess.run([self.enrichd, flag, "-c", self.path], capture_output=True,
                           timeout=10, preexec_fn=preexec)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def warnings(self, lines, **kw):
        code, out, err = self.run(lines, **kw)
        return code, [l for l in err.splitlines() if l.startswith("enrichd: warning: ")], err


def test_messages(r):
    with harness.Env(name="conf-check-msg") as env:
        c = Checker(env)
        cases = [
            (["worker = 4"], ":4: worker: unknown key (did you mean \"workers\"?)"),
            (["requst_timeout_ms = 900"],
             ":4: requst_timeout_ms: unknown key (did you mean \"request_timeout_ms\"?)"),
            (["request_timeout_ms = 150ms"], "drop the unit \"ms\""),
            (["drain_timeout_ms = 10 s"],
             "drop the unit \"s\" (drain_timeout_ms is in milliseconds: 10000)"),
            (["rss_hard_mb = 1GB"], "drop the unit \"GB\" (rss_hard_mb is in MiB)"),
            (["workers = 4x"], "drop the unit \"x\" (a plain number: 4)"),
            (["max_body_bytes = 4MB"], "drop the unit \"MB\" (bytes, or one letter k, m or g: 4m)"),
            (["idle_exit_s = 300s"], "drop the unit \"s\" (idle_exit_s is in seconds: 300)"),
        ]
        for lines, want in cases:
            code, out, err = c.run(lines)
            r.check(code == 1 and want in err, "%r refused with %r: %r" % (lines, want, err))
        code, out, err = c.run([], raw=b"\xef\xbb\xbfworkers = 2\n")
        r.check(code == 1 and "t.conf:1: (file): starts with a UTF-8 byte order mark" in err
                and "\ufeff" not in err,
                "a BOM is named, not shown as an invisible key: %r" % err)
        code, out, err = c.run(["colour = blue"])
        r.check(code == 1 and "colour: unknown key" in err and "did you mean" not in err,
                "no guess when no key is close: %r" % err)


def test_warnings(r):
    with harness.Env(name="conf-check-warn") as env:
        c = Checker(env)
        code, w, err = c.warnings([])
        r.check(code == 0 and not w, "the base configuration warns of nothing: %r" % err)
        # an empty file
        code, w, err = c.warnings([], base=False)
        r.check(code == 0 and len(w) == 1 and "t.conf:0: (file): sets no key" in w[0],
                "an empty file: exit 0, one warning (%r)" % w)
        code, w, err = c.warnings([], raw=b"# only a comment\n\n")
        r.check(code == 0 and len(w) == 1 and "sets no key" in w[0], "comments only: %r" % w)
        # a world-writable socket
        code, w, err = c.warnings(["listen_mode = 0666"])
        r.check(code == 0 and len(w) == 1 and ":4: listen_mode: 0666 lets every local user" in w[0],
                "listen_mode 0666 warned: %r" % w)
        code, w, err = c.warnings(["listen_mode = 0660"])
        r.check(code == 0 and not w, "0660: no warning %r" % w)
        # a socket directory the group cannot search
        locked = os.path.join(env.dir, "locked")
        os.mkdir(locked, 0o700)
        os.chmod(locked, 0o700)
        sock = ["listen = %s/enrichd.sock" % locked, "listen_group = www-data"]
        code, w, err = c.warnings(sock)
        r.check(code == 0 and len(w) == 1 and "listen: group www-data cannot reach the socket" in w[0]
                and '"%s" is mode 0700' % locked in w[0], "a 0700 directory warned: %r" % w)
        code, w, err = c.warnings(["status_listen = %s/status.sock" % locked,
                                   "listen_group = www-data"])
        r.check(code == 0 and len(w) == 1 and "status_listen: group www-data cannot reach" in w[0],
                "the status socket's directory too: %r" % w)
        os.chmod(locked, 0o711)
        code, w, err = c.warnings(sock)
        r.check(code == 0 and not w, "a 0711 directory: no warning %r" % w)
        os.chmod(locked, 0o750)
        os.chown(locked, -1, 33)  # www-data
        code, w, err = c.warnings(sock)
        r.check(code == 0 and not w, "0750, group www-data: no warning %r" % w)
        # fd_hard above RLIMIT_NOFILE (the process's own soft limit)
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

        def nofile(n):
            return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
        code, w, err = c.warnings(["fd_soft = 256", "fd_hard = 512"], preexec=nofile(300))
        r.check(code == 0 and len(w) == 1 and "fd_hard: 512 is above this process's descriptor "
                "limit (RLIMIT_NOFILE 300" in w[0], "fd_hard over RLIMIT_NOFILE warned: %r" % w)
        code, w, err = c.warnings(["fd_soft = 256", "fd_hard = 512"], preexec=nofile(1024))
        r.check(code == 0 and not w, "under a limit of 1024: no warning %r" % w)
        # request_timeout_ms and nginx's fastcgi_read_timeout (the shipped snippet: 10s)
        code, w, err = c.warnings(["nginx_fastcgi_conf = %s" % SNIPPET,
                                   "request_timeout_ms = 10000"])
        r.check(code == 0 and len(w) == 1 and
                "request_timeout_ms: 10000 ms is not below nginx's fastcgi_read_timeout (10000 ms"
                in w[0], "request_timeout_ms = the shipped read timeout warned: %r" % w)
        code, w, err = c.warnings(["nginx_fastcgi_conf = %s" % SNIPPET,
                                   "request_timeout_ms = 2000"])
        r.check(code == 0 and not w, "the shipped pair: no warning %r" % w)
        mine = os.path.join(env.dir, "snippet.conf")
        with open(SNIPPET) as f:
            text = f.read()
        with open(mine, "w") as f:
            f.write("# fastcgi_read_timeout 1h;\n" + re.sub(r"fastcgi_read_timeout [^;]*;",
                                                            "fastcgi_read_timeout 1m30s;", text))
        code, w, err = c.warnings(["nginx_fastcgi_conf = %s" % mine,
                                   "request_timeout_ms = 120000"])
        r.check(code == 0 and len(w) == 1 and "(90000 ms in %s)" % mine in w[0],
                "1m30s read as 90 s, the comment ignored: %r" % w)
        code, w, err = c.warnings(["nginx_fastcgi_conf = %s/none.conf" % env.dir,
                                   "request_timeout_ms = 120000"])
        r.check(code == 0 and not w, "no snippet there: nothing compared %r" % w)


def cgroup_for_test(name):
    """A child of this process's memory cgroup (v2 or v1) with a limit
    setter: (dir, procs file, set(limit_bytes)) or None."""
    with open("/proc/self/cgroup") as f:
        lines = f.read().splitlines()
    for line in lines:
        hid, ctrls, path = line.split(":", 2)
        if hid == "0" and ctrls == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            base, limit = "/sys/fs/cgroup", "memory.max"
        elif "memory" in ctrls.split(","):
            base, limit = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
        else:
            continue
        d = os.path.join(base + path, name)
        try:
            os.mkdir(d)
        except OSError:
            continue
        if not os.path.exists(os.path.join(d, limit)):
            os.rmdir(d)
            continue

        def set_limit(n, d=d, limit=limit):
            with open(os.path.join(d, limit), "w") as f:
                f.write(str(n))
        return d, os.path.join(d, "cgroup.procs"), set_limit
    return None


def test_cgroup_memory(r):
    with harness.Env(name="conf-check-cg") as env:
        c = Checker(env)
        cg = cgroup_for_test("enrichd-conf-check-%d" % os.getpid())
        r.check(cg is not None, "a memory cgroup to run -t in (cgroup v2 or v1 memory, as root)")
        if cg is None:
            return
        d, procs, set_limit = cg
        try:
            def enter():
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
            set_limit(300 << 20)
            code, w, err = c.warnings(["workers = 4", "rss_hard_mb = 128"], preexec=enter)
            r.check(code == 0 and len(w) == 1 and "rss_hard_mb: workers x rss_hard_mb (4 x 128 MiB)"
                    " is above this cgroup's memory limit (300 MiB" in w[0],
                    "4 x 128 MiB in a 300 MiB cgroup warned: %r" % w)
            code, w, err = c.warnings(["workers = 2", "rss_hard_mb = 128"], preexec=enter)
            r.check(code == 0 and not w, "2 x 128 MiB in 300 MiB: no warning %r" % w)
        finally:
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)


def test_dump(r):
    keys = builtin_keys()
    with harness.Env(name="conf-check-dump") as env:
        c = Checker(env)
        code, out, err = c.run(["workers = 3", "# a comment", "listen_mode = 0640",
                                "upstream_header = X-Team: discovery"], flag="-T")
        r.check(code == 0, "-T exits 0: %r" % err)
        lines = [l for l in out.splitlines() if l and not l.startswith("#")]
        names = [l.split("=", 1)[0].strip() for l in lines]
        r.check(sorted(names) == sorted(keys) and len(keys) > 50,
                "every built-in key once (%d printed, %d keys)" % (len(names), len(keys)))
        want = {"workers": "workers = 3  # %s:4" % c.path,
                "listen_mode": "listen_mode = 0640  # %s:6" % c.path,
                "upstream_header": "upstream_header = X-Team: discovery  # %s:7" % c.path,
                "listen": "listen = %s  # %s:1" % (env.sock, c.path),
                "max_body_bytes": "max_body_bytes = 4194304  # built-in default",
                "max_requests_jitter": "max_requests_jitter = 1000  # built-in default "
                                       "(max_requests / 10)"}
        for k, line in want.items():
            r.check(line in lines, "-T: %r (got %r)" % (line, [l for l in lines if
                                                            l.startswith(k + " ")]))
        again = os.path.join(env.dir, "effective.conf")
        with open(again, "w") as f:
            f.write(out)
        p = subprocess.run([c.enrichd, "-T", "-c", again], capture_output=True, text=True,
                           timeout=10)
        strip = lambda t: [l.split("  #", 1)[0] for l in t.splitlines() if l and l[0] != "#"]
        r.check(p.returncode == 0 and strip(p.stdout) == strip(out),
                "-T's output is a configuration with the same values: %r" % p.stderr)
        code, out, err = c.run(["worker = 3"], flag="-T")
        r.check(code == 1 and "did you mean" in err and out == "",
                "-T on a bad file: exit 1, the error, nothing printed")


FIFO_WAIT_S = 5  # each run's bound: the answer takes milliseconds


def test_fifo(r):
    with harness.Env(name="conf-check-fifo") as env:
        c = Checker(env)
        fifo = os.path.join(env.dir, "fifo.conf")
        os.mkfifo(fifo)
        inc = os.path.join(env.dir, "inc.conf")
        with open(inc, "w") as f:
            f.write("\n".join(c.base + ["include = %s" % fifo]) + "\n")
        nginx = os.path.join(env.dir, "nginx.conf")
        with open(nginx, "w") as f:
            f.write("\n".join([l for l in c.base if not l.startswith("nginx_fastcgi_conf")] +
                              ["nginx_fastcgi_conf = %s" % fifo]) + "\n")
        cases = [("-c FIFO, -t", [c.enrichd, "-t", "-c", fifo], "not a regular file"),
                 ("-c FIFO, -T", [c.enrichd, "-T", "-c", fifo], "not a regular file"),
                 ("-c FIFO, daemon", [c.enrichd, "-c", fifo], "not a regular file"),
                 ("included FIFO, -t", [c.enrichd, "-t", "-c", inc], "not a regular file"),
                 ("nginx_fastcgi_conf FIFO, -t", [c.enrichd, "-t", "-c", nginx], None)]
        for what, argv, words in cases:
            t0 = time.monotonic()
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=FIFO_WAIT_S)
                code, err = p.returncode, p.stderr
            except subprocess.TimeoutExpired:
                code, err = None, "still waiting after %d s" % FIFO_WAIT_S
            took = time.monotonic() - t0
            if words is None:
                r.check(code == 0, "%s: answered in %.2f s, exit %r: %r" % (what, took, code, err))
            else:
                r.check(code == 1 and words in err,
                        "%s: refused in %.2f s, exit %r: %r" % (what, took, code, err.strip()))


def main():
    harness.run_tests(test_fifo, test_messages, test_warnings, test_cgroup_memory, test_dump)


if __name__ == "__main__":
    main()
