#!/usr/bin/env python3
"""test_log_journal.py: log records go to the journal, one field per key,
when stderr is the journal's stream, and stay text lines otherwise.

journald is played by a datagram socket at /run/systemd/journal/socket
(the path sd_journal_sendv() uses) in a private mount namespace (unshare
-m, a tmpfs on /run), so the host's /run is untouched.  enrichd's stderr
is a pipe whose device:inode is passed as JOURNAL_STREAM, as systemd does.
Checks: PRIORITY, MESSAGE, MSG, ROLE, REASON=reload and WORKER_PID of a
worker's exit after HUP, no text on stderr meanwhile; with a
JOURNAL_STREAM naming another file, text on stderr and no record."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ENRICHD = os.path.abspath(os.path.join(harness.build_dir(), "enrichd"))
JOURNAL = "/run/systemd/journal/socket"
DEADLINE_S = 10


def parse_record(data):
    """journald's native protocol: KEY=value lines, or KEY\\n<le64><bytes>\\n."""
    fields = {}
    i = 0
    while i < len(data):
        nl = data.find(b"\n", i)
        if nl < 0:
            break
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            n = int.from_bytes(data[nl + 1:nl + 9], "little")
            k, v = line, data[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        fields[k.decode()] = v.decode(errors="replace")
    return fields


def run_enrichd(d, journal_stream):
    """Starts enrichd with stderr on a pipe; JOURNAL_STREAM from
    journal_stream(pipe_fd).  Returns (proc, read end)."""
    conf = os.path.join(d, "enrichd.conf")
    with open(conf, "w") as f:
        f.write("listen = %s/e.sock\nstatus_listen = %s/s.sock\nlisten_group =\nworkers = 2\n"
                % (d, d))
    r, w = os.pipe()
    env = dict(os.environ, JOURNAL_STREAM=journal_stream(w))
    p = subprocess.Popen([ENRICHD, "-c", conf], stderr=w, stdout=subprocess.DEVNULL, env=env)
    os.close(w)
    os.set_blocking(r, False)
    return p, r


def read_pipe(fd):
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def collect(sock, until, timeout=DEADLINE_S):
    recs = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        sock.settimeout(max(0.05, end - time.monotonic()))
        try:
            recs.append(parse_record(sock.recv(65536)))
        except socket.timeout:
            continue
        if until(recs):
            break
    return recs


def test_journal(r):
    os.makedirs(os.path.dirname(JOURNAL), exist_ok=True)
    j = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    j.bind(JOURNAL)
    d = tempfile.mkdtemp(prefix="log-journal-")
    try:
        def ours(w):
            st = os.fstat(w)
            return "%d:%d" % (st.st_dev, st.st_ino)
        p, err = run_enrichd(d, ours)
        try:
            recs = collect(j, lambda rs: any(x.get("MSG") == "ready" for x in rs))
            r.check(any(x.get("MSG") == "ready" for x in recs),
                    "'ready' reached the journal (%d records)" % len(recs))
            p.send_signal(signal.SIGHUP)
            recs = collect(j, lambda rs: any(x.get("REASON") == "reload" and x.get("WORKER_PID")
                                             for x in rs))
            ex = [x for x in recs if x.get("REASON") == "reload" and x.get("WORKER_PID")]
            r.check(ex != [], "a worker exit with REASON=reload and WORKER_PID: %r" % recs[-3:])
            if ex:
                x = ex[0]
                r.check(x.get("PRIORITY") == "6" and x.get("MSG") == "worker exit"
                        and x.get("ROLE") == "master" and x.get("SYSLOG_IDENTIFIER") == "enrichd"
                        and x["WORKER_PID"].isdigit()
                        and x.get("MESSAGE", "").startswith("level=info role=master")
                        and "reason=reload" in x.get("MESSAGE", "")
                        and "CODE_FILE" not in x, "the record's fields: %r" % x)
            text = read_pipe(err)
            r.check(text == b"", "nothing on stderr while the journal takes records: %r" % text[:200])
        finally:
            p.terminate()
            p.wait(timeout=DEADLINE_S)
            os.close(err)
        # A JOURNAL_STREAM that names another file: text, no record.
        # (Records of the first run's last moments are read away first.)
        collect(j, lambda rs: False, timeout=0.5)
        p, err = run_enrichd(d, lambda w: "1:2")
        try:
            text = b""
            end = time.monotonic() + DEADLINE_S
            while b"msg=ready" not in text and time.monotonic() < end:
                text += read_pipe(err)
                time.sleep(0.02)
            r.check(b"msg=ready" in text and text.startswith(b"ts="),
                    "JOURNAL_STREAM not stderr: text lines: %r" % text[:120])
            j.settimeout(0.2)
            try:
                got = j.recv(65536)
            except socket.timeout:
                got = b""
            r.check(got == b"", "and no journal record: %r" % got[:120])
        finally:
            p.terminate()
            p.wait(timeout=DEADLINE_S)
            os.close(err)
    finally:
        j.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    if os.environ.get("ENR_LOG_JOURNAL_NS") != "1":
        # A private /run: the fake journal socket never touches the host's.
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            # Not a pass: the journal records would go unchecked.
            print("FAIL: needs root and unshare for a private /run")
            print("0 passed, 1 failed")
            sys.exit(1)
        os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs tmpfs /run && exec \"$0\" \"$1\"",
                               sys.executable, os.path.abspath(__file__)],
                   dict(os.environ, ENR_LOG_JOURNAL_NS="1"))
    harness.run_tests(test_journal)
