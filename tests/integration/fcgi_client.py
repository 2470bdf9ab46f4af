"""fcgi_client.py: a raw FastCGI client for the tests (records built by
hand, so that malformed input can be sent), beside nginx's.

harness.py re-exports every name: suites use harness.fcgi_record etc.
"""
import select
import socket
import struct
import time

FCGI_BEGIN_REQUEST, FCGI_ABORT_REQUEST, FCGI_END_REQUEST = 1, 2, 3
FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT, FCGI_STDERR = 4, 5, 6, 7
FCGI_RESPONDER, FCGI_AUTHORIZER, FCGI_FILTER = 1, 2, 3
FCGI_KEEP_CONN = 1
FCGI_REQUEST_COMPLETE, FCGI_CANT_MPX_CONN, FCGI_OVERLOADED, FCGI_UNKNOWN_ROLE = 0, 1, 2, 3


def fcgi_record(rtype, content=b"", rid=1, version=1, padding=0):
    """One FastCGI record: 8-byte header, content, `padding` zero bytes."""
    return (struct.pack(">BBHHBB", version, rtype, rid, len(content), padding, 0) + content
            + b"\0" * padding)


def fcgi_pairs(params):
    """Name-value pairs encoded as in FCGI_PARAMS."""
    out = b""
    for k, v in params.items():
        k = k.encode() if isinstance(k, str) else k
        v = v.encode() if isinstance(v, str) else v
        for n in (len(k), len(v)):
            out += bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
        out += k + v
    return out


def fcgi_begin(rid=1, role=FCGI_RESPONDER, flags=0):
    return fcgi_record(FCGI_BEGIN_REQUEST, struct.pack(">HB5x", role, flags), rid)


def fcgi_enrich_params(body, uri="/v1/enrich", method="POST"):
    """The params nginx/enrichd.conf passes for a POST of body to uri."""
    return {"REQUEST_METHOD": method, "DOCUMENT_URI": uri, "SCRIPT_NAME": uri,
            "REQUEST_URI": uri, "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/json", "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1"}


def fcgi_request_bytes(params, body=b"", rid=1, role=FCGI_RESPONDER, flags=0):
    """A whole well-formed request: BEGIN, PARAMS, empty PARAMS, STDIN, empty STDIN."""
    out = fcgi_begin(rid, role, flags)
    p = fcgi_pairs(params)
    for i in range(0, len(p), 65535):
        out += fcgi_record(FCGI_PARAMS, p[i:i + 65535], rid)
    out += fcgi_record(FCGI_PARAMS, b"", rid)
    for i in range(0, len(body), 65535):
        out += fcgi_record(FCGI_STDIN, body[i:i + 65535], rid)
    return out + fcgi_record(FCGI_STDIN, b"", rid)


class FcgiConn:
    """A raw FastCGI connection: send bytes, read records with a bound.
    recv_until_end() returns {'stdout', 'stderr', 'ends': {rid: (app, proto)},
    'eof': bool, 'timeout': bool, 'records': [(type, rid, content)]}."""

    def __init__(self, addr, timeout=5.0, source=None):
        fam = socket.AF_UNIX if isinstance(addr, str) else \
            socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        if source is not None:
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect(addr)
        self.buf = bytearray()
        self.eof = False

    def send(self, data):
        self.sock.sendall(data)

    def drip(self, data, gap_s=0.05, most=200):
        """Sends data one byte every gap_s (at most `most` bytes) until the
        peer answers or closes; returns the seconds from the first byte to
        that moment, or None if it never did."""
        t0 = time.monotonic()
        for i in range(min(len(data), most)):
            try:
                self.sock.sendall(data[i:i + 1])
            except OSError:
                return time.monotonic() - t0
            time.sleep(gap_s)
            if select.select([self.sock], [], [], 0)[0]:  # an answer, or EOF
                return time.monotonic() - t0
        return None

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buf += chunk

    def recv_until_end(self, rid=1, timeout=5.0):
        """Reads records until END_REQUEST for rid, EOF, or timeout."""
        out = {"stdout": b"", "stderr": b"", "ends": {}, "eof": False, "timeout": False,
               "records": []}
        # bytearrays, appended in place: a 7 MB answer read by copying
        # the whole so far at every record cost the reader more than the
        # worker's write deadline.
        stdout, stderr = bytearray(), bytearray()

        def done():
            out["stdout"], out["stderr"] = bytes(stdout), bytes(stderr)
            return out

        deadline = time.monotonic() + timeout
        try:
            while True:
                while len(self.buf) >= 8:
                    _, t, r, clen, plen, _ = struct.unpack_from(">BBHHBB", self.buf)
                    if len(self.buf) < 8 + clen + plen:
                        break
                    content = bytes(self.buf[8:8 + clen])
                    del self.buf[:8 + clen + plen]
                    out["records"].append((t, r, content))
                    if t == FCGI_STDOUT:
                        stdout += content
                    elif t == FCGI_STDERR:
                        stderr += content
                    elif t == FCGI_END_REQUEST and len(content) >= 5:
                        app, proto = struct.unpack(">IB", content[:5])
                        out["ends"][r] = (app, proto)
                        if r == rid:
                            return done()
                if self.eof:
                    out["eof"] = True
                    return done()
                self._fill(deadline)
        except (socket.timeout, TimeoutError):
            out["timeout"] = True
            return done()

    def wait_eof(self, timeout=3.0):
        """True when the peer closes within timeout (data before EOF is dropped)."""
        deadline = time.monotonic() + timeout
        try:
            while not self.eof:
                self._fill(deadline)
            return True
        except (socket.timeout, TimeoutError):
            return False
        except OSError:
            return True

    def close(self):
        self.sock.close()


def fcgi_status(stdout):
    """The Status: of CGI response headers (200 when absent), or None."""
    head = stdout.split(b"\r\n\r\n", 1)[0]
    if not stdout:
        return None
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"status:"):
            return int(line.split()[1])
    return 200


def fcgi_request(addr, params, body=b"", timeout=10):
    """A whole FastCGI request (no nginx) to addr: a unix socket path or a
    (host, port) tuple.  Returns the raw STDOUT bytes (CGI headers + body)."""
    c = FcgiConn(addr, timeout)
    try:
        c.send(fcgi_request_bytes(params, body))
        return c.recv_until_end(1, timeout)["stdout"]
    finally:
        c.close()


def fcgi_exchange(sock, data, chunk=None, pause=0.0, shut=False, timeout=10.0, rid=1):
    """Sends raw FastCGI bytes on a new connection to sock (in chunks of
    `chunk` bytes, `pause` s apart; `shut`: then half-closes), reads the
    answer; returns (FcgiConn.recv_until_end's result, seconds).  A send
    the worker refused by closing first is not an error: the answer (or
    EOF) tells."""
    c = FcgiConn(sock, timeout)
    t0 = time.monotonic()
    try:
        try:
            if chunk is None:
                c.send(data)
            else:
                for i in range(0, len(data), chunk):
                    c.send(data[i:i + chunk])
                    if pause:
                        time.sleep(pause)
            if shut:
                c.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        out = c.recv_until_end(rid, timeout)
        if not out["eof"] and not out["timeout"] and rid not in out["ends"]:
            out["eof"] = c.wait_eof(timeout)
        return out, time.monotonic() - t0
    finally:
        c.close()


def fcgi_drip_cut(addr, data, first, timeout=10.0):
    """Sends data's first `first` bytes at once, then the rest a byte at a
    time (FcgiConn.drip: 200 bytes, 10 s at most); the seconds from the
    start until the peer answered or closed, or None if it never did."""
    c = FcgiConn(addr, timeout)
    t0 = time.monotonic()
    try:
        c.send(data[:first])
        cut = c.drip(data[first:])
        return None if cut is None else time.monotonic() - t0
    finally:
        c.close()
