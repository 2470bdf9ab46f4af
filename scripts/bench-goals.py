#!/usr/bin/env python3
"""make bench-goals: the test suites' time goals, measured and compared.

A time or rate goal that is no deadline the product enforces (a p50, a
rate, how soon a verdict comes, a parser's time on a flood) is not a
reason for a test to fail on a loaded machine: the suites print it
("goal met: ..." or "goal missed: ...", with [value=V bound=B] where it
is one number against one bar: harness.Results.goal, T_GOAL in
tests/unit/t.h) and count only their checks.  This runs every suite that
has goals one at a time, with nothing else of its own running (start it
on a quiet machine: what it measures is the machine too), reads those
lines and prints each goal with value/bound, and against the previous
run's value (BUILD/bench-goals.json, the one before kept as
bench-goals.prev.json; --only replaces only its suites'): a
ratio above 1 is slower or further from the bar than last time.  It
fails only when a suite fails its checks or prints no goal it used to;
a goal missed is reported, not failed.

    python3 scripts/bench-goals.py [--build DIR] [--only SUBSTRING]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL = re.compile(r"^goal (met|missed)(?:, [^:]*)?: (.*?)(?: \[value=(\S+) bound=(\S+)\])?$", re.M)
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed", re.M)
# The goal calls a suite's source holds: Python (r.goal(, goal() or C (T_GOAL().
HAS_GOAL = re.compile(r"\b(?:r\.goal|goal|T_GOAL)\(")
SUITE_TIMEOUT_S = 900


def suites(build, only):
    """(name, argv) of every suite whose source calls a goal."""
    out = []
    for kind in ("unit", "integration"):
        for src in sorted(glob.glob(os.path.join(ROOT, "tests", kind, "test_*.c"))):
            name = os.path.basename(src)[:-2]
            if HAS_GOAL.search(open(src, encoding="utf-8").read()):
                out.append((kind + "/" + name, [os.path.join(build, "tests", name)]))
    # The fleet's (root, network namespaces, ~150 s) too: its capacity by
    # host count is the throughput step of docs/fleet.md.
    for kind in ("integration", "hostile", "fleet"):
        for src in sorted(glob.glob(os.path.join(ROOT, "tests", kind, "test_*.py"))):
            if HAS_GOAL.search(open(src, encoding="utf-8").read()):
                out.append((kind + "/" + os.path.basename(src), [sys.executable, src]))
    return [s for s in out if not only or only in s[0]]


def key(what):
    """A goal's name from run to run: its text without its numbers."""
    return re.sub(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", what)[:160]


def run(name, argv, build):
    env = dict(os.environ, ENR_BUILD=build, PYTHONUNBUFFERED="1")
    try:
        p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=SUITE_TIMEOUT_S)
        text, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = (e.stdout or "") + "\nTIMEOUT", 1
    goals = []
    for m in GOAL.finditer(text):
        value = float(m.group(3)) if m.group(3) else None
        bound = float(m.group(4)) if m.group(4) else None
        goals.append({"key": key(m.group(2)), "what": m.group(2), "met": m.group(1) == "met",
                      "value": value, "bound": bound})
    found = SUMMARY.findall(text)
    failed = rc != 0 or not found or int(found[-1][1]) > 0
    return goals, failed, text


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(x):
    return "   -  " if x is None else "%6.2f" % x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("ENR_BUILD", "build"))
    ap.add_argument("--only", help="substring of the suite names to run")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    path = os.path.join(build, "bench-goals.json")
    try:
        with open(path) as f:
            prev = json.load(f)
    except (OSError, ValueError):
        prev = {}
    results, bad = {}, []
    for name, argv in suites(build, args.only):
        goals, failed, text = run(name, argv, build)
        results[name] = goals
        if failed:
            bad.append(name)
            print("FAIL %s: its checks failed (goals below all the same); its output's tail:" % name)
            print("".join("     | " + l + "\n" for l in text.strip().splitlines()[-20:]), end="")
        before = {g["key"]: g for g in prev.get(name, [])}
        lost = [k for k in before if k not in {g["key"] for g in goals}]
        print("%s: %d goals, %d missed" % (name, len(goals), sum(not g["met"] for g in goals)))
        print("   value/bound  vs last run")
        for g in goals:
            last = before.get(g["key"])
            print("   %s       %s     %s %s" % (
                fmt(ratio(g["value"], g["bound"])),
                fmt(ratio(g["value"], last["value"] if last else None)),
                "met   " if g["met"] else "MISSED", g["what"][:150]))
        if lost and not args.only:
            bad.append(name)
            print("   goals printed last time, not now: %s" % lost[:5])
    # The suites run replace theirs (--only: the others' are kept).
    if os.path.exists(path):
        os.replace(path, os.path.join(build, "bench-goals.prev.json"))
    with open(path, "w") as f:
        json.dump(dict(prev, **results), f, indent=1, sort_keys=True)
    total = sum(len(g) for g in results.values())
    missed = sum(not x["met"] for g in results.values() for x in g)
    print("%d suites, %d goals, %d missed%s" % (len(results), total, missed,
                                                ("; failed: " + " ".join(bad)) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
