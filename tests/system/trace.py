#!/usr/bin/env python3
"""trace.py N RATE: a replay trace (enrich-replay's format, see
scripts/gen-trace) of N small valid batches at RATE per second, for the
system test: short bodies, so the load is the arrivals, not the engine."""
import json
import sys

n, rate = int(sys.argv[1]), float(sys.argv[2])
for i in range(n):
    batch = [{"provider": ("yt", "vm", "dm")[j % 3], "id": "Sys%05d%d" % (i, j),
              "title": "  System   test %d " % i} for j in range(4)]
    print(json.dumps({"ts": i / rate, "payload": batch}))
