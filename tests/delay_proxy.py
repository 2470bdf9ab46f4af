#!/usr/bin/env python3
"""delay_proxy.py: a network path of a given round trip, on loopback.

These machines have no netem; a TCP proxy that holds every chunk for
half a round trip in each direction gives the timing that matters to a
client across a network:
  - every chunk read from one side is written to the other RTT/2 after
    it was read, in order (a chunk never overtakes the one before it);
  - the connection's first bytes from the client wait one more RTT: the
    client's connect() completes at once on loopback, where a real one
    waits for SYN / SYN-ACK, so the handshake's round trip is added to
    what the client sends first (its request, or its TLS ClientHello);
  - end of stream is passed on in order too, after the same delay, so a
    server closing a kept-alive connection is seen RTT/2 later, as on a
    network.
Bandwidth is not modelled (loopback's), nor loss.

Bounded: at most --max-connections at once (more are refused by closing
them), at most --max-buffer-bytes held per direction of a connection
(reading pauses past it), a connection silent for --idle-s is closed, and
the proxy exits by itself after --max-seconds, when the process that
started it dies, or on SIGTERM/SIGINT.  It listens on 127.0.0.1 and, with
the same port, on ::1 when it can (a client resolving "localhost" may try
::1 first); it only ever connects to --target, which must be loopback
(or in 198.18.0.0/15, the test fleet's namespaces: tests/fleet/netns.py,
where a host's loopback relay reaches the fleet's provider).

Usage: delay_proxy.py --target HOST:PORT [--target ...] --rtt-ms MS [--port P]
                      [--ready-file F] [--max-connections N] ...
Each --target gets its own listener (--port is the first's), all served
by one process, so that paths to several servers whose chunks fall due
together are delivered together (separate processes would each wake on
their own, and a client waiting on all of them would wait for the
latest).  Prints {"port":..,"ports":[..],"pid":..} on stdout when ready
(and writes it to --ready-file atomically).  SIGUSR1 writes its counters as JSON to
--stats-file (connections accepted, refused, bytes each way).
"""
import argparse
import asyncio
import ipaddress
import json
import os
import signal
import socket
import sys

CHUNK = 65536
# A sleep of tens of milliseconds ends 0.2-0.5 ms late on these virtual
# machines (an idle core's wake-up and the event loop's turn): a 50 ms
# path measured 51.7 ms.  Each chunk's sleep ends "lead" early, lead
# learnt from how late the wake-ups have come (a running average,
# bounded), so that deliveries fall on their time on average.
LEAD_GAIN = 0.2
LEAD_MAX_S = 0.002
wake = {"lead": 0.0}

counters = {"accepted": 0, "refused": 0, "open": 0, "max_open": 0, "to_server": 0,
            "to_client": 0}


class Path:
    """One proxied connection: two directions, each a queue of
    (deliver-at, bytes) drained by a writer that waits for each chunk's
    time.  b"" in a queue is the end of that direction's stream."""

    def __init__(self, args, loop, target):
        self.a, self.loop = args, loop
        self.host, self.tport = target
        self.half = args.rtt_ms / 2000.0
        self.last_io = loop.time()

    async def run(self, creader, cwriter):
        try:
            sreader, swriter = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.tport), 5)
        except (OSError, asyncio.TimeoutError):
            cwriter.transport.abort()
            return
        up = asyncio.Queue(self.a.max_buffer_bytes // CHUNK + 1)
        down = asyncio.Queue(self.a.max_buffer_bytes // CHUNK + 1)
        tasks = [asyncio.ensure_future(x) for x in (
            self.pump_in(creader, up, 2 * self.half, "to_server"),
            self.pump_out(up, swriter),
            self.pump_in(sreader, down, 0.0, "to_client"),
            self.pump_out(down, cwriter),
            self.watch_idle())]
        # The connection is over when both directions have delivered their
        # end of stream, or at the first error or the idle time-out.
        pending, failed = set(tasks), False
        try:
            while not (tasks[1].done() and tasks[3].done()):
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if tasks[4] in done or any(t.exception() for t in done):
                    failed = True
                    break
        finally:
            for t in tasks:
                t.cancel()
        for w in (cwriter, swriter):
            if failed:
                w.transport.abort()  # a reset on one side is a reset on the other
            else:
                w.close()

    async def pump_in(self, reader, q, first_extra, counter):
        last = 0.0
        extra = first_extra
        while True:
            data = await reader.read(CHUNK)
            now = self.loop.time()
            self.last_io = now
            at = max(now + self.half + extra, last)
            last = at
            if data:
                extra = 0.0
                counters[counter] += len(data)
            await q.put((at, data))
            if not data:
                return

    async def pump_out(self, q, writer):
        while True:
            at, data = await q.get()
            wait = at - wake["lead"] - self.loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                # how late this wake-up came, learnt for the next ones
                late = self.loop.time() - at
                wake["lead"] = min(LEAD_MAX_S, max(0.0, wake["lead"] + LEAD_GAIN * late))
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
            self.last_io = self.loop.time()

    async def watch_idle(self):
        while True:
            left = self.last_io + self.a.idle_s - self.loop.time()
            if left <= 0:
                return
            await asyncio.sleep(left)


async def serve(a, ready):
    loop = asyncio.get_running_loop()
    servers, ports = [], []
    for i, target in enumerate(a.targets):
        port = await listen(a, loop, target, a.port if i == 0 else 0, servers)
        ports.append(port)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if a.stats_file:
        loop.add_signal_handler(signal.SIGUSR1, write_stats, a.stats_file)
    ready(ports)
    parent = os.getppid()
    end = loop.time() + a.max_seconds
    while not stop.is_set() and loop.time() < end and os.getppid() == parent:
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except asyncio.TimeoutError:
            pass
    for s in servers:
        s.close()


async def listen(a, loop, target, port, servers):
    """The listener of one target (127.0.0.1, and ::1 on the same port
    when it can); its port."""

    async def client(reader, writer):
        if counters["open"] >= a.max_connections:
            counters["refused"] += 1
            writer.transport.abort()
            return
        counters["accepted"] += 1
        counters["open"] += 1
        counters["max_open"] = max(counters["max_open"], counters["open"])
        try:
            await Path(a, loop, target).run(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            writer.transport.abort()
        finally:
            counters["open"] -= 1

    s = await asyncio.start_server(client, "127.0.0.1", port, reuse_address=True, backlog=128)
    servers.append(s)
    port = s.sockets[0].getsockname()[1]
    try:
        servers.append(await asyncio.start_server(client, "::1", port, reuse_address=True,
                                                  backlog=128, family=socket.AF_INET6))
    except OSError:
        pass  # no IPv6 loopback: 127.0.0.1 alone
    return port


def write_stats(path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(counters, f)
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True, action="append",
                    help="HOST:PORT, a loopback address; repeated: one listener each, one "
                         "process (paths whose chunks are due together go together)")
    ap.add_argument("--rtt-ms", type=float, required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ready-file")
    ap.add_argument("--stats-file")
    ap.add_argument("--max-connections", type=int, default=256)
    ap.add_argument("--max-buffer-bytes", type=int, default=4 << 20)
    ap.add_argument("--idle-s", type=float, default=120.0)
    ap.add_argument("--max-seconds", type=float, default=1800.0)
    ap.add_argument("--nice", type=int, default=0,
                    help="scheduling priority (negative: before the machine's other work, so "
                         "that its load does not lengthen the path; needs root)")
    a = ap.parse_args()
    a.targets = []
    for t in a.target:
        host, _, tport = t.rpartition(":")
        host = host.strip("[]")
        ip = ipaddress.ip_address(host)
        if not (ip.is_loopback or ip in ipaddress.ip_network("198.18.0.0/15")):
            sys.exit("delay_proxy: the target must be a loopback address (or the test "
                     "fleet's 198.18.0.0/15), not %s" % host)
        a.targets.append((host, int(tport)))
    if a.rtt_ms < 0:
        sys.exit("delay_proxy: --rtt-ms must be >= 0")

    def ready(ports):
        info = json.dumps({"port": ports[0], "ports": ports, "pid": os.getpid()})
        if a.ready_file:
            tmp = a.ready_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(info + "\n")
            os.rename(tmp, a.ready_file)
        sys.stdout.write(info + "\n")
        sys.stdout.flush()

    if a.nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, a.nice)
        except OSError:
            pass  # not permitted: the machine's load then shows on the path
    asyncio.run(serve(a, ready))
    os._exit(0)


if __name__ == "__main__":
    main()
