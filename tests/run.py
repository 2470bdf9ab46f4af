#!/usr/bin/env python3
"""make test: every suite, one summary.

Runs the unit test binaries, the conformance vectors through the CLI, and
every integration script (real nginx, real enrichd); each prints
"N passed, M failed" as its last such line, which is summed here.  A suite
that crashes or prints no summary counts as one failure.  Ends with the
total "N passed, M failed" and exits non-zero on any failure.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SUMMARY = re.compile(r"^(?:\w+: )?(\d+) passed, (\d+) failed", re.M)
# Tests (functions) apart from assertions: "tests: N run, M failed".  A
# suite that does not say counts as one test.
TESTS = re.compile(r"^tests: (\d+) run, (\d+) failed", re.M)
SUITE_TIMEOUT_S = 300


def run(name, argv, env):
    t = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                           errors="replace", timeout=SUITE_TIMEOUT_S)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += "\nTIMEOUT after %ds" % SUITE_TIMEOUT_S
        rc = -1
    found = SUMMARY.findall(out)
    if found:
        passed, failed = int(found[-1][0]), int(found[-1][1])
    else:
        passed, failed = 0, 1
    if rc != 0 and failed == 0:
        failed = 1  # a crash after its summary still fails the suite
    tests = TESTS.findall(out)
    ntests, tfailed = (int(tests[-1][0]), int(tests[-1][1])) if tests else (1, 0)
    if failed and tfailed == 0:
        tfailed = 1
    status = "ok  " if failed == 0 else "FAIL"
    print("%s %-36s %3d tests %5d passed, %d failed  (%.1fs)"
          % (status, name, ntests, passed, failed, time.monotonic() - t), flush=True)
    if failed:
        lines = out.strip().splitlines()
        for line in lines[-40:]:
            print("     | " + line)
    return passed, failed, ntests, tfailed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", help="substring of the suite names to run")
    ap.add_argument("--kind", default="unit,vectors,integration",
                    help="comma-separated suite kinds: unit, vectors, integration "
                         "(integration includes hostile), hostile")
    args = ap.parse_args()
    env = dict(os.environ, ENR_BUILD=args.build, PYTHONUNBUFFERED="1")
    suites = []
    for t in sorted(glob.glob(os.path.join(args.build, "tests", "test_*"))):
        if os.access(t, os.X_OK) and not t.endswith((".o", ".d")):
            suites.append(("unit/" + os.path.basename(t), [t]))
    suites.append(("vectors/cli", [sys.executable, "tests/vectors.py", "--cmd",
                                   os.path.join(args.build, "enrich")]))
    # The lower-casing and NFKC against Node's (tests/unicode/oracle.mjs):
    # every code point and composition pair, then seeded random strings
    # (a million of them once by hand: --random 1000000).
    node = ["node", "tests/unicode/oracle.mjs", "--cmd", os.path.join(args.build, "enrich")]
    suites.append(("vectors/unicode-node", node))
    suites.append(("vectors/unicode-node-random", node + ["--random", "200000", "--seed", "17"]))
    # hostile/: the same real stack, driven as an attacker or a careless
    # operator would (slow readers, inflating input, bad upstreams, bad
    # reloads, raw FastCGI); counted as integration suites.
    for kind in ("integration", "hostile"):
        for t in sorted(glob.glob(os.path.join(HERE, kind, "test_*.py"))):
            suites.append((kind + "/" + os.path.basename(t), [sys.executable, t]))
    kinds = args.kind.split(",")
    if "integration" in kinds:
        kinds.append("hostile")
    suites = [s for s in suites if s[0].split("/")[0] in kinds]
    if args.only:
        suites = [s for s in suites if args.only in s[0]]
    total_p = total_f = total_t = total_tf = 0
    for name, argv in suites:
        p, f, t, tf = run(name, argv, env)
        total_p += p
        total_f += f
        total_t += t
        total_tf += tf
    # Assertions overstate coverage (one table of cases is hundreds of
    # them): the tests are reported apart.
    print("%d suites, %d tests (%d failed), %d assertions (%d failed)"
          % (len(suites), total_t, total_tf, total_p + total_f, total_f))
    print("%d passed, %d failed" % (total_p, total_f))
    return 1 if total_f else 0


if __name__ == "__main__":
    sys.exit(main())
