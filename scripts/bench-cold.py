#!/usr/bin/env python3
"""bench-cold.py: `make bench-cold`, the bench's cold start alone, for
builds side by side.  Each build is started the way `make bench` starts
enrichd (sockets bound here and handed over as socket-activation
descriptors 3 and 4, nginx running, the request waiting in the backlog;
spawn to the first 200), --runs times per round; the builds alternate, in
reversed order every other round, so that each round sees them under the
same load.  Each round also times the same spawn path running /bin/true
(the machine's own price of a start) and prints the load average.

    scripts/bench-cold.py [--runs N] [--rounds R] [NAME=]BUILD_DIR ...

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
    a = ap.parse_args()
    builds = []
    for b in a.builds or [os.environ.get("ENR_BUILD", os.path.join(bench.ROOT, "build"))]:
        name, _, d = b.rpartition("=")
        d = os.path.abspath(d)
        if not os.access(os.path.join(d, "enrichd"), os.X_OK):
            sys.exit("bench-cold: no %s/enrichd" % d)
        builds.append((name or os.path.basename(d), d))
    sys.path.insert(0, os.path.join(bench.ROOT, "tests", "integration"))
    import harness
    body = b'[{"provider":"yt","id":"abc","title":"x"}]'
    med = {n: [] for n, _ in builds}
    print("%-6s %6s  %s  %s" % ("round", "load", "  ".join("%14s" % n for n, _ in builds), "/bin/true"))
    for r in range(a.rounds):
        order = builds if r % 2 == 0 else builds[::-1]
        load = os.getloadavg()[0]
        got = {}
        for n, d in order:
            got[n] = bench.cold_start_enrichd(harness, body, build=d, runs=a.runs)[0]
            med[n].append(got[n])
        floor = bench.spawn_floor_ms(a.runs)
        print("%-6d %6.1f  %s  %9.1f" % (r + 1, load, "  ".join("%14.1f" % got[n] for n, _ in builds), floor),
              flush=True)
    print("%-6s %6.1f  %s" % ("median", os.getloadavg()[0],
                              "  ".join("%14.1f" % statistics.median(med[n]) for n, _ in builds)))
    if len(builds) > 1:
        base = builds[0][0]
        for n, _ in builds[1:]:
            ratios = [b / x for b, x in zip(med[base], med[n])]
            print("%s / %s per round: %s" % (base, n, " ".join("%.2f" % x for x in ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
