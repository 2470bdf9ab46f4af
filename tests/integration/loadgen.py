"""loadgen.py: clients that put load on the stack through nginx while a
test does something else to it (signals, reloads, recycling, faults),
and says what each request got.  The suites take them from harness.

Every client is a thread of the test's process; none outlives its
test: stop() ends them and waits for each.
"""
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
