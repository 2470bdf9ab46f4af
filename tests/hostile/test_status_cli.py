#!/usr/bin/env python3
"""test_status_cli.py: `enrichd status` against a status socket that lies.

A fake status process (a real unix socket served by this script) answers
the real `enrichd status` with what a wrong path, another program or a
hostile peer could send: a key longer than any buffer (it overflowed a
128-byte stack buffer before), nesting deeper than the document has,
terminal escape sequences, an answer that never ends, one that drips, a
flood of FCGI_STDERR, records of another protocol.  Every case must end
within the client's deadline with a clear exit code, no crash (no death
by signal, no sanitizer report on the SAN build) and no control
character on the terminal.
"""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import harness  # noqa: E402

CLI_DEADLINE_S = 5.0  # STATUS_CLI_TIMEOUT_MS in src/ops/statuscli.c
MARGIN_S = 2.0


def rec(rtype, content, rid=1, version=1):
    return struct.pack(">BBHHBB", version, rtype, rid, len(content), 0, 0) + content


def stdout(data):
    out = b""
    for i in range(0, len(data), 65535):
        out += rec(6, data[i:i + 65535])
    return out


END = rec(3, struct.pack(">IB3x", 0, 0))


def http(body, status=b"200 OK"):
    return b"Status: " + status + b"\r\nContent-Type: application/json\r\n\r\n" + body


class FakeStatus(harness.SocketLoop):
    """A unix socket that answers each connection with behaviour(conn)."""

    join_s = 15.0  # a behaviour may be in a send of up to 10 s

    def __init__(self, path, behaviour):
        self.path, self.behaviour = path, behaviour
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(4)
        super().__init__(sock)

    def serve(self):
        conn, _ = self.sock.accept()
        try:
            conn.settimeout(10)
            conn.recv(65536)  # the request; its content does not matter here
            self.behaviour(conn, lambda: self.stop)
        except OSError:
            pass
        finally:
            conn.close()


def send(data):
    def b(conn, stopped):
        conn.sendall(data)
    return b


def drip(conn, stopped):
    """One byte a second of a valid answer: never finishes in time."""
    data = stdout(http(b'{"pool":"x"}')) + END
    for ch in data:
        if stopped():
            return
        conn.sendall(bytes([ch]))
        time.sleep(1.0)


def endless(conn, stopped):
    """STDOUT records forever, as fast as the client reads."""
    chunk = rec(6, b"x" * 65535)
    t = time.monotonic()
    while not stopped() and time.monotonic() - t < 20:
        conn.sendall(chunk)


def stderr_flood(conn, stopped):
    chunk = rec(7, b"\x1b[2J\x1b]0;pwned\x07" * 4000)
    t = time.monotonic()
    while not stopped() and time.monotonic() - t < 20:
        conn.sendall(chunk)


def doc_with(**kw):
    d = {"pool": "enrichd", "processes": []}
    d.update(kw)
    return json.dumps(d).encode()


def deep(n):
    return ('{"pool":' + '{"a":' * n + '1' + '}' * n + '}').encode()


CASES = [
    # name, behaviour, expected exit code, must print
    ("long key", send(stdout(http(json.dumps({"k" * 5000: {"j" * 5000: 1}}).encode())) + END), 0, b"kkkk"),
    ("long key in array", send(stdout(http(json.dumps({"x" * 300: ["y" * 5000, None, 1]}).encode())) + END), 0, b"xxx"),
    ("escape sequences", send(stdout(http(doc_with(**{"\x1b]0;t\x07": "\x1b[2J\u009b31m", "processes": [
        {"slot": "\x1b[1A", "pid": 1, "state": "idle\r\n", "request_id": "\x07" * 30,
         "last_exit": {"reason": "crash\x1b", "pid": 2, "request_id": "r\x1b"},
         "fds_by_kind": {"summary": "\x1b[31mred"}}]}))) + END), 0, b"SLOT"),
    ("nesting deeper than the document", send(stdout(http(deep(5000))) + END), 1, b""),
    ("processes of the wrong types", send(stdout(http(doc_with(processes=[1, None, "x", [], {"last_exit": 5, "fds_by_kind": []}]))) + END), 0, b"SLOT"),
    ("not an object", send(stdout(http(b"[1,2,3]")) + END), 1, b""),
    ("trailing bytes", send(stdout(http(doc_with() + b" garbage")) + END), 1, b""),
    ("NUL inside", send(stdout(http(b'{"a":1}\x00{"b":2}')) + END), 1, b""),
    ("no END_REQUEST", send(stdout(http(doc_with()))), 1, b""),
    ("another protocol", send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"), 1, b""),
    ("record cut short", send(rec(6, b"x" * 100)[:50]), 1, b""),
    ("answer that drips", drip, 1, b""),
    ("answer that never ends", endless, 1, b""),
    ("stderr flood", stderr_flood, 1, b""),
    ("500", send(stdout(http(doc_with(), b"500 Internal")) + END), 1, b""),
]


def test_cases(r):
    cli = os.path.join(harness.build_dir(), "enrichd")
    d = tempfile.mkdtemp(prefix="status-cli-")
    for i, (name, behaviour, want_rc, must) in enumerate(CASES):
        path = os.path.join(d, "s%d.sock" % i)
        fake = FakeStatus(path, behaviour)
        t = time.monotonic()
        try:
            p = subprocess.run([cli, "status", path], capture_output=True, timeout=CLI_DEADLINE_S + 10)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = "hung", b"", b""
        took = time.monotonic() - t
        fake.close()
        r.check(rc == want_rc, "%s: exit %r (want %d); stderr %r" % (name, rc, want_rc, err[-300:]))
        r.check(took < CLI_DEADLINE_S + MARGIN_S, "%s: ended in %.1f s" % (name, took))
        ctl = [c for c in out + err if (c < 0x20 and c not in (0x0a, 0x09)) or c == 0x7f]
        r.check(not ctl, "%s: no control character printed (%r)" % (name, bytes(ctl[:10])))
        r.check(b"\xc2\x9b" not in out + err, "%s: no C1 control printed" % name)
        r.check(must in out, "%s: printed %r" % (name, must))
        r.check(len(out) + len(err) < 1 << 20, "%s: bounded output (%d bytes)" % (name, len(out) + len(err)))


def main():
    harness.run_tests(test_cases)


if __name__ == "__main__":
    main()
