#!/usr/bin/env python3
"""bench_proc.py: the processes bench.py and its siblings measure and
pin: a process tree from /proc, its PSS, descriptors and CPU seconds (a
Sampler for the first two during a run), and the core and nice level
each side runs at (servers on SERVER_CPUS, the load client on
CLIENT_CPUS).  Reads /proc only; changes only this process's own
affinity and priority.
"""
import os
import shutil
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "integration"))
from procinfo import descendants  # noqa: E402,F401  (the process tree: one walk of /proc)

TICK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1
SERVER_CPUS = {0}
CLIENT_CPUS = {1} if CORES > 1 else {0}


def pss_kb(pids):
    total = 0
    for p in pids:
        try:
            with open("/proc/%d/smaps_rollup" % p) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def nfds(pids):
    n = 0
    for p in pids:
        try:
            n += len(os.listdir("/proc/%d/fd" % p))
        except OSError:
            pass
    return n


def cpu_s(pids):
    """CPU seconds of pids and of their children already reaped (cutime,
    cstime): a worker recycled during a run (max_requests) takes its CPU
    out of the live processes, and into its master's children's time."""
    t = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            t += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        except (OSError, ValueError):
            pass
    return t / TICK


class Sampler(threading.Thread):
    """Samples PSS and descriptors of pids_fn() every 0.25 s."""

    def __init__(self, pids_fn):
        super().__init__(daemon=True)
        self.pids_fn, self.stop, self.pss, self.fds = pids_fn, threading.Event(), [], []

    def run(self):
        while not self.stop.wait(0.25):
            pids = self.pids_fn()
            self.pss.append(pss_kb(pids))
            self.fds.append(nfds(pids))


# As root, servers run at nice SERVER_NICE and the replayer at CLIENT_NICE
# (both sides of a comparison alike): the machine may be shared, and
# other work at nice 0 then takes ~10% of a core instead of half of it.
SERVER_NICE = -10
CLIENT_NICE = -15
IS_ROOT = os.geteuid() == 0


def pinned(cpus, nice=None):
    pre = ["taskset", "-c", ",".join(str(c) for c in sorted(cpus))] if shutil.which("taskset") else []
    if IS_ROOT:
        pre = ["nice", "-n", str(SERVER_NICE if nice is None else nice)] + pre
    return pre


def as_server():
    """This process's affinity and priority while it starts servers."""
    os.sched_setaffinity(0, SERVER_CPUS)
    if IS_ROOT:
        os.setpriority(os.PRIO_PROCESS, 0, SERVER_NICE)


def as_client():
    os.sched_setaffinity(0, set(range(CORES)))
    if IS_ROOT:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
