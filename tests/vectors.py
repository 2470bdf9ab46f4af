#!/usr/bin/env python3
"""The conformance vectors (tests/vectors, copied from the contract's public
set) run against the CLI (--cmd) or a running service (--url).

Comparison follows the contract's README: status and content type, LF
termination, each line's fetched_at within the request's time window, then
byte equality with fetched_at written as 0.  Prints one line per failure
and ends with "N passed, M failed"; exit 1 on any failure.
"""
import argparse
import concurrent.futures as cf
import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
LINE_RE = re.compile(rb'^(.*,"fetched_at":)(0|[1-9][0-9]*)\}$', re.S)
SLACK_MS = 2000


def load(vdir):
    with open(os.path.join(vdir, "index.json"), encoding="utf-8") as f:
        index = json.load(f)
    return index["vectors"]


def compare_body(body, expected, t0, t1):
    if not body.endswith(b"\n"):
        return "body does not end with LF"
    got = body[:-1].split(b"\n")
    want = expected[:-1].split(b"\n")
    if expected == b"\n":
        return None if body == b"\n" else "expected a single LF"
    if len(got) != len(want):
        return "line count %d, want %d" % (len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        m = LINE_RE.match(g)
        if not m:
            return "line %d does not end with fetched_at: %r" % (i, g[-80:])
        ms = int(m.group(2))
        if not (t0 - SLACK_MS <= ms <= t1 + SLACK_MS):
            return "line %d fetched_at %d outside [%d, %d]" % (i, ms, t0, t1)
        g0 = m.group(1) + b"0}"
        if g0 != w:
            at = next((k for k in range(min(len(g0), len(w))) if g0[k] != w[k]), min(len(g0), len(w)))
            return "line %d differs at byte %d: got %r want %r" % (i, at, g0[max(0, at - 30):at + 40], w[max(0, at - 30):at + 40])
    return None


def judge(v, vdir, status, ctype, body, t0, t1, cmd_mode):
    vid = v["id"]
    meta_path = os.path.join(vdir, vid + ".meta.json")
    meta = None
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    want = meta["status"] if meta else "200"
    is4xx = 400 <= status <= 499
    if want == "4xx":
        return None if is4xx else "status %d, want 4xx" % status
    if want == "200|4xx" and is4xx:
        return None
    if status != 200:
        return "status %d, want 200" % status
    if not cmd_mode and ctype != "application/x-ndjson":
        return "content type %r" % ctype
    with open(os.path.join(vdir, vid + ".out.ndjson"), "rb") as f:
        expected = f.read()
    return compare_body(body, expected, t0, t1)


def run_cmd(cmd, data):
    t0 = int(time.time() * 1000)
    p = subprocess.run(cmd, input=data, capture_output=True, shell=False)
    t1 = int(time.time() * 1000)
    if p.returncode == 0:
        status = 200
    elif p.returncode == 2:
        status = 400
        try:
            err = json.loads(p.stderr)
            if "error" not in err:
                status = 599
        except ValueError:
            status = 599  # a rejection must say what and where, as JSON
        if p.stdout:
            status = 598  # nothing on stdout on an error
    else:
        status = 500 + min(p.returncode, 99) if p.returncode > 0 else 599
    return status, None, p.stdout, t0, t1


def run_url(url, data):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
    t0 = int(time.time() * 1000)
    conn.request("POST", u.path or "/", body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    t1 = int(time.time() * 1000)
    ctype = r.getheader("Content-Type")
    conn.close()
    if 400 <= r.status <= 499:
        try:
            if "error" not in json.loads(body):
                return 599, ctype, body, t0, t1
        except ValueError:
            if r.status != 405 and r.status != 413:
                return 599, ctype, body, t0, t1
    return r.status, ctype, body, t0, t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cmd")
    ap.add_argument("--url")
    ap.add_argument("--dir", default=os.path.join(HERE, "vectors"))
    # none left out by default: the engine has the Unicode 17.0 tables
    # that the unicode_post15 vectors ask for
    ap.add_argument("--exclude-category", action="append", default=[])
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args()
    vectors = [v for v in load(args.dir) if v["category"] not in args.exclude_category]
    passed = failed = 0

    def one(v):
        with open(os.path.join(args.dir, v["id"] + ".in.json"), "rb") as f:
            data = f.read()
        if args.cmd:
            res = run_cmd(args.cmd.split(), data)
        else:
            res = run_url(args.url, data)
        return v, judge(v, args.dir, *res, cmd_mode=bool(args.cmd))

    with cf.ThreadPoolExecutor(args.jobs) as ex:
        for v, problem in ex.map(one, vectors):
            if problem is None:
                passed += 1
            else:
                failed += 1
                print("FAIL vector %s (%s): %s" % (v["id"], v["category"], problem))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
