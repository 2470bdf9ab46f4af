#!/usr/bin/env python3
"""fake_upstream.py: the upstream metadata API of docs/upstream.md, for tests.

A real HTTP/1.1 server on loopback (keep-alive, one thread per
connection) answering deterministic data:
  poster   = https://img.example/{provider}/{id percent-encoded}.jpg
  duration = 1 + crc32(id) % 7200  (always > 0)
Ids starting with "unk" are unknown (absent).  Ids starting with "badp<k>"
get an invalid poster (variant k), "badd<k>" an invalid duration,
"long" a poster of exactly 2048 bytes, "frac" a duration of 12.5.

Hostile modes (the reply as an attacker would shape it):
  flood          {"items":[{},{},...]} of flood_bytes bytes, with Content-Length
  flood_chunked  the same, chunked (no Content-Length: only a cap while
                 receiving can stop it)
  oversize       the right items plus a pad field, flood_bytes in all
  drip           the right reply, one byte every drip_ms (chunked)
  biglength      Content-Length: flood_bytes, then the right reply (short) and
                 a hang: the declared size alone says it is too big

Fault modes and knobs switch at run time, on the data port or on the
separate control port (which keeps answering while the data port
refuses connections):
  POST /_control {"mode":"ok|hang|5xx|malformed|badshape|truncated|partial|refuse",
                  "close_after":100, "close_style":"silent|header",
                  "latency_ms":2, "drop_every":0, "flood_bytes":4194304, "drip_ms":20}
  GET  /_stats   counters (requests, connections, ids, bad requests, ...)
  HEAD {path}    200 with no body, kept alive: a client warming a
                 connection; counted as "heads", never as a data request
  POST /_reset   zero the counters
Quotas and credentials (a provider with an API key and a quota):
  mode 429       every data request is answered throttle_status (429, or
                 503) with "Retry-After: {retry_after}" (omitted when "")
  extra_params   query parameters accepted besides provider and ids (the
                 key of upstream_secret_query); any other is a bad request
  /_stats        answered_429, and of the last 16 data requests their
                 headers (last_headers) and extra parameters (last_extra)
close_after N: a connection is closed after its N-th response (the
incident: the upstream cycles connections every 100 requests); "silent"
closes without a Connection: close header, so the client finds out only
when it reuses the connection.  drop_every K: every K-th data request is
answered by closing the connection before any byte (a dead connection).

Usage: fake_upstream.py [--port P] [--control-port P] [--path /v1/meta]
                        [--ready-file F] [--close-after N] [--mode M]
                        [--processes K] ...
Prints {"port":..,"control_port":..,"pid":..} on stdout when ready (and
writes it to --ready-file atomically).  SIGTERM/SIGINT stop it.
"""
import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote_to_bytes

UNRESERVED = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
HEX = set(b"0123456789ABCDEFabcdef")
MODES = ("ok", "hang", "5xx", "malformed", "badshape", "truncated", "partial", "refuse",
         "flood", "flood_chunked", "oversize", "drip", "biglength", "429")
HANG_MAX_S = 60.0

lock = threading.Lock()
settings = {"mode": "ok", "close_after": 100, "close_style": "silent", "latency_ms": 0,
            "drop_every": 0, "flood_bytes": 4 << 20, "drip_ms": 20,
            "retry_after": "", "throttle_status": 429, "extra_params": []}
QUOTA_KEYS = ("retry_after", "throttle_status", "extra_params")
CONTROL_KEYS = ("mode", "close_after", "close_style", "latency_ms", "drop_every", "flood_bytes",
                "drip_ms") + QUOTA_KEYS
LAST_KEPT = 16
mode_changed = threading.Condition(lock)


def zero_stats():
    return {"requests": 0, "data_requests": 0, "connections": 0, "open_connections": 0,
            "heads": 0,
            "max_open_connections": 0, "server_closes": 0, "ids": 0, "bad_requests": 0,
            "bad_encoding": 0, "dropped": 0, "answered_200": 0, "answered_5xx": 0,
            "calls_by_provider": {}, "max_ids_per_call": 0, "last_targets": [],
            "hosts": [], "events": [], "answered_429": 0, "last_headers": [],
            "last_extra": []}


stats = zero_stats()
open_socks = set()
flood_cache = {}


def crc(b):
    return zlib.crc32(b) & 0xFFFFFFFF


def poster_for(provider, idb):
    return "https://img.example/%s/%s.jpg" % (provider, quote(idb, safe="-._~"))


def item_for(provider, idb, ids):
    """The item for one id, or None (unknown)."""
    text = idb.decode("utf-8", "surrogatepass")
    if idb.startswith(b"unk"):
        return None
    item = {"id": text, "poster": poster_for(provider, idb), "duration": 1 + crc(idb) % 7200,
            "extra": {"ignored": True}}
    k = idb[-1] - 48 if idb and 48 <= idb[-1] <= 57 else 0
    if idb.startswith(b"badp"):
        item["poster"] = ["http://img.example/x.jpg", "https://img.example/a b.jpg",
                          "https://img.example/" + "a" * 2030 + ".jpg",
                          "https://img.example/\u0001.jpg", "/relative.jpg", 12,
                          "https://", "https://img.example/\u00a0.jpg", None][k % 9]
    elif idb.startswith(b"badd"):
        item["duration"] = [-1, 1e7, "213", None, True, 12345678.0, -0.5, {"s": 1}][k % 8]
    elif idb.startswith(b"long"):
        head = "https://img.example/"
        item["poster"] = head + "p" * (2048 - len(head))
    elif idb.startswith(b"frac"):
        item["duration"] = 12.5
    return item


def flood_body(size):
    """{"items":[{},{},...]} of about size bytes, built once per size."""
    body = flood_cache.get(size)
    if body is None:
        n = max(0, (size - len(b'{"items":[]}') + 1) // 3)
        body = flood_cache[size] = b'{"items":[' + b",".join([b"{}"] * n) + b"]}"
    return body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-upstream/1"
    # What /_control accepts: a fake built on this one (fake_providers.py)
    # adds its own settings and modes.
    modes = MODES
    extra_control_keys = ()

    def log_message(self, fmt, *args):  # quiet: tests read /_stats instead
        pass

    def setup(self):
        super().setup()
        # One write per response and no Nagle: otherwise a split header/body
        # meets the client's delayed ACK and every call takes 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.served = 0
        with lock:
            stats["connections"] += 1
            self.conn_no = stats["connections"]
            # Only the data port's, counted and cut: the open count is
            # the client's connections (a control request's, closed while
            # this thread has not yet read its end, would pass for one),
            # and a control connection cut by refuse would lose the reply
            # to the very request that asked for refuse.
            if self.server.is_data:
                stats["open_connections"] += 1
                stats["max_open_connections"] = max(stats["max_open_connections"],
                                                    stats["open_connections"])
                open_socks.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            with lock:
                if self.server.is_data:
                    stats["open_connections"] -= 1
                open_socks.discard(self.connection)

    def reply(self, status, body, ctype="application/json", extra_len=0, close=False,
              headers=()):
        with lock:
            self.served += 1
            if self.server.is_data and settings["close_after"] > 0 and \
                    self.served >= settings["close_after"]:
                close = True
                stats["server_closes"] += 1
            silent = settings["close_style"] == "silent"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) + extra_len))
        for k, v in headers:
            self.send_header(k, v)
        if close and (not silent or not self.server.is_data):
            self.send_header("Connection", "close")
        self._headers_buffer.append(b"\r\n" + body)
        self.flush_headers()
        if close:
            self.close_connection = True

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with lock:
            stats["requests"] += 1
        if self.path == "/_control":
            try:
                req = json.loads(body or b"{}")
                if "mode" in req and req["mode"] not in self.modes:
                    raise ValueError("mode")
            except ValueError as e:
                return self.reply(400, json.dumps({"error": str(e)}).encode())
            with mode_changed:
                old = settings["mode"]
                for k in CONTROL_KEYS + self.extra_control_keys:
                    if k in req:
                        settings[k] = req[k]
                mode_changed.notify_all()
                new = settings["mode"]
            if old != new:
                switch = self.server.owner.mode_switch(old, new)
                if not self.server.is_data:
                    # Answered once the switch is whole: the data port
                    # closed AND its open connections cut.  A client that
                    # saw only the closed port could send its next batch
                    # down a kept connection not cut yet, and be answered.
                    switch.join(5)
            if new in ("flood", "flood_chunked"):
                flood_body(settings["flood_bytes"])  # built now, so replies come at wire speed
            return self.reply(200, json.dumps(settings).encode())
        if self.path == "/_reset":
            with lock:
                fresh = zero_stats()
                fresh["open_connections"] = stats["open_connections"]
                stats.clear()
                stats.update(fresh)
            return self.reply(200, b"{}")
        return self.reply(404, b'{"error":"not found"}')

    def do_GET(self):
        with lock:
            stats["requests"] += 1
        if self.path == "/_stats":
            with lock:
                body = json.dumps(dict(stats, settings=dict(settings))).encode()
            return self.reply(200, body)
        return self.data_request()

    def do_HEAD(self):
        # A client warming or checking a connection: 200, no body, kept
        # alive (close_after still counts it, as a provider would).  Counted
        # apart: it asks for no id, so it is not a data call.
        with lock:
            stats["requests"] += 1
            stats["heads"] += 1
        if self.path.partition("?")[0] != self.server.owner.path:
            return self.reply(404, b"")
        return self.reply(200, b"")

    def data_request(self):
        owner = self.server.owner
        with lock:
            stats["data_requests"] += 1
            seq = stats["data_requests"]
            stats["last_targets"] = (stats["last_targets"] + [self.path])[-64:]
            drop_now = settings["drop_every"] and seq % settings["drop_every"] == 0
            stats["events"] = (stats["events"] + [[seq, self.conn_no, self.served,
                                                   bool(drop_now)]])[-64:]
            host = self.headers.get("Host", "")
            if host not in stats["hosts"]:
                stats["hosts"].append(host)
            mode, latency = settings["mode"], settings["latency_ms"]
            drop = settings["drop_every"] and seq % settings["drop_every"] == 0
        if drop:
            with lock:
                stats["dropped"] += 1
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00")
            except OSError:
                pass
            return
        path, _, query = self.path.partition("?")
        params = {}
        for part in query.split("&") if query else []:
            k, _, v = part.partition("=")
            params.setdefault(k, []).append(v)
        with lock:
            extra_ok = set(settings["extra_params"])
            stats["last_headers"] = (stats["last_headers"] + [dict(self.headers.items())])[-LAST_KEPT:]
            stats["last_extra"] = (stats["last_extra"] + [{k: v for k, v in params.items()
                                                           if k in extra_ok}])[-LAST_KEPT:]
        ok = (path == owner.path and set(params) - extra_ok == {"provider", "ids"}
              and len(params["provider"]) == 1 and len(params["ids"]) == 1
              and params["provider"][0] in ("yt", "vm", "dm") and params["ids"][0] != "")
        if not ok:
            with lock:
                stats["bad_requests"] += 1
            return self.reply(400, b'{"error":"bad request"}')
        provider = params["provider"][0]
        raw_ids = params["ids"][0].encode("latin-1").split(b",")
        for raw in raw_ids:
            i = 0
            while i < len(raw):
                if raw[i] == 0x25 and i + 2 < len(raw) and raw[i + 1] in HEX and \
                        raw[i + 2] in HEX:
                    i += 3
                elif raw[i] in UNRESERVED:
                    i += 1
                else:
                    with lock:
                        stats["bad_encoding"] += 1
                    break
        ids = [unquote_to_bytes(r) for r in raw_ids]
        with lock:
            stats["ids"] += len(ids)
            cbp = stats["calls_by_provider"]
            cbp[provider] = cbp.get(provider, 0) + 1
            stats["max_ids_per_call"] = max(stats["max_ids_per_call"], len(ids))
        if self.fault(mode, latency):
            return
        if mode == "malformed":
            return self.reply(200, b'{"items":[{"id":"' + raw_ids[0][:8] + b'","poster":')
        if mode == "badshape":
            return self.reply(200, b'{"data":[]}')
        if mode in ("flood", "flood_chunked"):
            return self.flood(mode == "flood_chunked")
        items = []
        for idb in ids:
            if mode == "partial" and crc(idb) % 2 == 1:
                continue
            it = item_for(provider, idb, ids)
            if it is not None:
                items.append(it)
        body = json.dumps({"items": items}).encode()
        if mode in ("oversize", "drip", "biglength"):
            return self.hostile_reply(mode, body)
        if mode == "truncated":
            self.reply(200, body[: len(body) // 2], extra_len=len(body) - len(body) // 2,
                       close=True)
            return
        with lock:
            stats["answered_200"] += 1
        return self.reply(200, body)


    def fault(self, mode, latency):
        """The latency, then the faults every fake shares (hang, 429, 5xx):
        True when the request was answered (or dropped) here."""
        if latency:
            time.sleep(latency / 1000.0)
        if mode == "hang":
            end = time.monotonic() + HANG_MAX_S
            with mode_changed:
                while settings["mode"] == "hang" and time.monotonic() < end:
                    mode_changed.wait(0.5)
            self.close_connection = True
            return True
        if mode == "429":
            self.throttle()
            return True
        if mode == "5xx":
            with lock:
                stats["answered_5xx"] += 1
            self.reply(503, b'{"error":"unavailable"}')
            return True
        return False

    def throttle(self):
        """The provider's quota: 429 (or 503) and, unless empty, Retry-After."""
        with lock:
            stats["answered_429"] += 1
            status, after = settings["throttle_status"], str(settings["retry_after"])
        body = b'{"error":"quota exceeded"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if after:
            self.send_header("Retry-After", after)
        self._headers_buffer.append(b"\r\n" + body)
        self.flush_headers()

    def flood(self, chunked):
        """{"items":[{},{},...]} of about flood_bytes bytes."""
        with lock:
            size = settings["flood_bytes"]
        body = flood_body(size)
        if not chunked:
            return self.reply(200, body)
        self.start_chunked()
        try:
            for i in range(0, len(body), 65536):
                part = body[i:i + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client refused the rest: what it should do
        self.close_connection = True

    def start_chunked(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def hostile_reply(self, mode, body):
        with lock:
            size, drip = settings["flood_bytes"], settings["drip_ms"]
        self.close_connection = True
        try:
            if mode == "oversize":  # well-formed, but padded far past any need
                pad = max(0, size - len(body) - len(b',"pad":""'))
                body = body[:-1] + b',"pad":"' + b"x" * pad + b'"}'
                self.reply(200, body, close=True)
            elif mode == "biglength":  # declares flood_bytes, sends the reply, hangs
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                end = time.monotonic() + 10
                while time.monotonic() < end and settings["mode"] == "biglength":
                    time.sleep(0.05)
            else:  # drip: one byte at a time
                self.start_chunked()
                for i in range(len(body)):
                    self.wfile.write(b"1\r\n%s\r\n" % body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(drip / 1000.0)
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client gave up: what it should do


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # A client that aborts a reply (as enrichd does with one too large)
        # resets the connection: expected here, not worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Fake:
    def __init__(self, host, port, cport, path, handler=Handler):
        self.host, self.path, self.handler = host, path, handler
        self.data = self.make(port, True)
        self.port = self.data.server_address[1]
        self.control = self.make(cport, False)
        self.cport = self.control.server_address[1]
        self.switch_lock = threading.Lock()

    def start(self):
        self.data_thread = self.serve(self.data)
        self.serve(self.control)

    def make(self, port, is_data):
        s = Server((self.host, port), self.handler)
        s.owner, s.is_data = self, is_data
        return s

    @staticmethod
    def serve(s):
        t = threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                             daemon=True)
        t.start()
        return t

    def mode_switch(self, old, new):
        # Runs in a handler thread; shutdown() from the data server's own
        # handler would wait for itself, so refuse is driven from a thread.
        t = threading.Thread(target=self._switch, args=(old, new), daemon=True)
        t.start()
        return t

    def _switch(self, old, new):
        with self.switch_lock:
            if new == "refuse" and self.data is not None:
                d, self.data = self.data, None
                d.shutdown()
                d.server_close()
                with lock:
                    socks = [s for s in open_socks]
                for s in socks:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            elif old == "refuse" and new != "refuse" and self.data is None:
                self.data = self.make(self.port, True)
                self.data_thread = self.serve(self.data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--path", default="/v1/meta")
    ap.add_argument("--ready-file")
    ap.add_argument("--mode", default="ok", choices=MODES)
    ap.add_argument("--close-after", type=int, default=100)
    ap.add_argument("--close-style", default="silent", choices=("silent", "header"))
    ap.add_argument("--latency-ms", type=float, default=0)
    ap.add_argument("--processes", type=int, default=1,
                    help="extra processes accepting on the data port (benchmarks: one "
                         "Python process is the bottleneck); their settings are fixed at "
                         "start and /_stats counts only the first process")
    a = ap.parse_args()
    settings.update(mode="ok", close_after=a.close_after, close_style=a.close_style,
                    latency_ms=a.latency_ms)
    fake = Fake(a.host, a.port, a.control_port, a.path)
    parent = os.getppid()
    for _ in range(a.processes - 1):
        if os.fork() == 0:  # before any thread exists
            me = os.getppid()
            t = threading.Thread(target=fake.data.serve_forever, daemon=True)
            t.start()
            while os.getppid() == me:
                time.sleep(0.2)
            os._exit(0)
    fake.start()
    if a.mode != "ok":
        settings["mode"] = a.mode
        fake._switch("ok", a.mode)
    serve(fake, a.ready_file, parent)


def serve(fake, ready_file, parent):
    """Says where the started fake listens (stdout, and ready_file
    atomically), then runs until SIGTERM/SIGINT or parent's death."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    ready = json.dumps({"port": fake.port, "control_port": fake.cport, "pid": os.getpid()})
    if ready_file:
        tmp = ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(ready + "\n")
        os.rename(tmp, ready_file)
    sys.stdout.write(ready + "\n")
    sys.stdout.flush()
    while not stop.wait(0.2):
        if os.getppid() != parent:  # the test that started us died: do not linger
            break
    os._exit(0)


if __name__ == "__main__":
    main()
