"""loadgen.py: clients that put load on the stack through nginx: the same
request in a loop while a test does something else to it (signals,
reloads, recycling, faults: Load), or a run of batches drained by a
pool of keep-alive clients (keepalive_clients), and what each request
got.  The suites and the benchmarks take them from harness.

Every client is a daemon thread of the test's process, waited for
before the call that ends them returns (Load's stop(), or
keepalive_clients itself, up to its timeout).
"""
import http.client
import threading
import time


class Load:
    """Concurrent clients sending the same request in a loop until stop().
    Each result is (status, start, end, error-or-None)."""

    def __init__(self, env, clients=8, path="/v1/enrich", body=b"[]", headers=None):
        self.env = env
        self.path, self.body, self.headers = path, body, headers or {}
        self.results = []
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def _run(self):
        while not self.halt.is_set():
            t0 = time.monotonic()
            try:
                st, _, _ = self.env.request(self.path, self.body, headers=self.headers)
                err = None
            except Exception as e:  # a transport failure is a failed request
                st, err = 0, repr(e)
            with self.lock:
                self.results.append((st, t0, time.monotonic(), err))

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(30)
        return self.results

    def count(self):
        with self.lock:
            return len(self.results)

    def failures(self):
        with self.lock:
            return [r for r in self.results if r[0] != 200]


def keepalive_clients(env, n, clients, fn, timeout=None):
    """fn(conn, i) for i = 0 ... n - 1 from `clients` threads side by
    side, each over a keep-alive connection of its own to env's nginx
    (http.client: one fn closed reopens at the next request) and taking
    the next i when it is free, as a pool of clients drains a queue of
    batches.  Returns what fn returned for each i it finished, in i's
    order: an i whose client died of an exception (printed) or was still
    running after timeout s (None: waited for) is left out."""
    lock = threading.Lock()
    todo = iter(range(n))
    undone = object()
    out = [undone] * n

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", env.port, timeout=15)
        try:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                out[i] = fn(conn, i)
        finally:
            conn.close()

    ts = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    with lock:
        return [x for x in out if x is not undone]
