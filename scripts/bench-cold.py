#!/usr/bin/env python3
"""bench-cold.py: `make bench-cold`, the bench's cold start alone, for
builds side by side.  Each build is started the way `make bench` starts
enrichd (sockets bound here and handed over as socket-activation
descriptors 3 and 4, nginx running, the request waiting in the backlog;
spawn to the first 200), --runs times per round; the builds alternate, in
reversed order every other round, so that each round sees them under the
same load.  Each round also times the same spawn path running /bin/true
(the machine's own price of a start) and prints the load average.

    scripts/bench-cold.py [--runs N] [--rounds R] [--launchers L,...] [NAME=]BUILD_DIR ...

--launchers: how enrichd is started, each a column of its own for every
build: "activate" (build/bench-activate, as systemd's exec; the default)
and "sh" (the shell the bench used before, for comparison).

Also per round, the CPU time and page faults of the start (master, its
launcher's exec included, and the first worker, at the answer): steadier
than the wall clock when the machine is loaded.

Invariants: every process started here is killed before the next start
(bench.py's cold_start_enrichd); figures are medians of this run only.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description="cold start through socket activation, builds alternated")
    ap.add_argument("builds", nargs="*", metavar="[NAME=]DIR", help="build directories (default: build)")
    ap.add_argument("--runs", type=int, default=10, help="cold starts per build and round (median)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--launchers", default="activate", help="activate, sh or both (comma-separated)")
    a = ap.parse_args()
    own = os.path.abspath(os.environ.get("ENR_BUILD", os.path.join(bench.ROOT, "build")))
    activate = os.path.join(own, "bench-activate")
    launchers = {"activate": activate, "sh": "sh"}
    builds = []
    for b in a.builds or [own]:
        name, _, d = b.rpartition("=")
        d = os.path.abspath(d)
        if not os.access(os.path.join(d, "enrichd"), os.X_OK):
            sys.exit("bench-cold: no %s/enrichd" % d)
        for ln in a.launchers.split(","):
            if ln not in launchers or (ln != "sh" and not os.access(launchers[ln], os.X_OK)):
                sys.exit("bench-cold: no launcher %s (make builds %s)" % (ln, activate))
            tag = (name or os.path.basename(d)) + ("" if ln == "activate" else "/" + ln)
            builds.append((tag, d, launchers[ln]))
    sys.path.insert(0, os.path.join(bench.ROOT, "tests", "integration"))
    import harness
    body = b'[{"provider":"yt","id":"abc","title":"x"}]'
    med = {n: [] for n, _, _ in builds}
    cost = {n: [] for n, _, _ in builds}
    print("%-6s %6s  %s  %s" % ("round", "load", "  ".join("%14s" % n for n, _, _ in builds),
                                "  ".join("%9s" % ("true/" + ln) for ln in a.launchers.split(","))))
    for r in range(a.rounds):
        order = builds if r % 2 == 0 else builds[::-1]
        load = os.getloadavg()[0]
        got = {}
        for n, d, ln in order:
            ms, _, cpu, faults = bench.cold_start_enrichd(harness, body, ln, build=d, runs=a.runs)
            got[n] = ms
            med[n].append(ms)
            cost[n].append((cpu, faults))
        floors = [bench.spawn_floor_ms(launchers[ln], a.runs) for ln in a.launchers.split(",")]
        print("%-6d %6.1f  %s  %s" % (r + 1, load, "  ".join("%14.1f" % got[n] for n, _, _ in builds),
                                      "  ".join("%9.1f" % f for f in floors)), flush=True)
    print("%-6s %6.1f  %s" % ("median", os.getloadavg()[0],
                              "  ".join("%14.1f" % statistics.median(med[n]) for n, _, _ in builds)))
    print("CPU ms / page faults of the start (launcher, master, first worker), per round:")
    for n, _, _ in builds:
        print("  %-14s %s" % (n, "  ".join("%5.1f / %3d" % c for c in cost[n] if c[0] is not None)))
    if len(builds) > 1:
        base = builds[0][0]
        for n, _, _ in builds[1:]:
            ratios = [b / x for b, x in zip(med[base], med[n])]
            print("%s / %s per round: %s" % (base, n, " ".join("%.2f" % x for x in ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
