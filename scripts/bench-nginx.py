#!/usr/bin/env python3
"""bench-nginx.py: what each nginx directive of nginx/enrichd.conf costs per
request, measured on the floor (build/bench-null behind the shipped nginx
configuration, so the worker's own noise is out of the figures).

Each variant is the shipped configuration with one change; every variant
runs --rounds times in alternation (closed loop, 400 KB batches, nginx on
core 0, the replayer on core 1); the best round is kept.  Prints req/s
and nginx CPU per request, and each as a ratio to the shipped one.
req/s is kept from the best round and nginx CPU per request is the
lowest of the rounds (on a shared machine the neighbours only add).
--only SUBSTR[,SUBSTR] runs the variants whose names contain one of them
(and the shipped one).
  scripts/bench-nginx.py [--build build] [--seconds 3] [--rounds 2] [--only ...]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import harness  # noqa: E402
from bench import cpu_s, descendants, pinned, SERVER_CPUS, CLIENT_CPUS  # noqa: E402


def no_line(pattern, repl=""):
    return lambda text: re.sub(pattern, repl, text, flags=re.M)


def no_line2(pattern):
    return lambda name, text: re.sub(pattern, "", text, flags=re.M)


VARIANTS = [
    ("shipped", None, None),
    ("access_log off", no_line(r"^\s*access_log .*$", "    access_log off;"), None),
    ("access_log buffer=64k flush=1s",
     no_line(r"^(\s*access_log \S+ enrichd_json);$", r"\1 buffer=64k flush=1s;"), None),
    ("no add_header X-Request-ID", no_line(r"^\s*add_header X-Request-ID .*$"), None),
    ("fastcgi_buffering off", None,
     lambda name, text: text.replace("fastcgi_buffering on;", "fastcgi_buffering off;")),
    ("fastcgi_buffers 8 64k", None,
     lambda name, text: text.replace("fastcgi_buffers 64 16k;", "fastcgi_buffers 8 64k;")),
    ("fastcgi_buffer_size 64k, buffers 16 64k", None,
     lambda name, text: text.replace("fastcgi_buffers 64 16k;", "fastcgi_buffers 16 64k;")
     .replace("fastcgi_buffer_size 16k;", "fastcgi_buffer_size 64k;")
     .replace("fastcgi_busy_buffers_size 64k;", "fastcgi_busy_buffers_size 128k;")),
    ("client_body_buffer_size 16k (body to a file)",
     no_line(r"^(\s*)client_body_buffer_size .*$", r"\1client_body_buffer_size 16k;"), None),
    ("request id without the map ($request_id)",
     lambda text: text.replace("$enrichd_request_id", "$request_id"),
     lambda name, text: re.sub(r"^map \$http_x_request_id \$enrichd_request_id \{.*?^\}", "", text,
                               flags=re.M | re.S).replace("$enrichd_request_id", "$request_id")),
    ("no REQUEST_ID fastcgi_param", None, no_line2(r"^\s*fastcgi_param REQUEST_ID .*$")),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = [x for x in a.only.split(",") if x]
    variants = [v for v in VARIANTS if v[0] == "shipped" or not only or any(o in v[0] for o in only)]
    tmp = tempfile.mkdtemp(prefix="enrichd-bench-nginx-")
    big = os.path.join(tmp, "big.jsonl")
    subprocess.run([os.path.join(ROOT, "scripts", "gen-trace"), "--shape", "big", "-n", "20", "-o", big],
                   check=True, stderr=subprocess.DEVNULL)
    best = {}
    try:
        for rnd in range(a.rounds):
            for name, site_edit, snip_edit in variants:
                env = harness.Env(build=a.build, name="bench-nginx")
                try:
                    null = subprocess.Popen(pinned(SERVER_CPUS) + [os.path.join(a.build, "bench-null"), env.sock],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True)
                    env.procs.append(null)
                    harness.wait_for(lambda: os.path.exists(env.sock), 5, what="bench-null")
                    os.sched_setaffinity(0, SERVER_CPUS)
                    try:
                        env.start_nginx(site_edit=site_edit, snippet_edit=snip_edit)
                    finally:
                        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
                    out = os.path.join(tmp, "r.json")
                    n0 = cpu_s(descendants(env.nginx.pid))
                    subprocess.run(pinned(CLIENT_CPUS) + [os.path.join(a.build, "enrich-replay"), "--no-progress",
                                   "--json", out, "--closed", "-d", str(a.seconds), big,
                                   "http://127.0.0.1:%d/" % env.port], check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                    n1 = cpu_s(descendants(env.nginx.pid))
                    with open(out) as f:
                        r = json.load(f)[0]
                    cur = (r["rps"], (n1 - n0) * 1e3 / r["count"] if r["count"] else 0, r["s5xx"] + r["errors"])
                    if name not in best:
                        best[name] = cur
                    else:
                        b = best[name]
                        best[name] = (max(b[0], cur[0]), min(b[1], cur[1]) if cur[1] else b[1], b[2] + cur[2])
                finally:
                    env.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = best["shipped"]
    print("nginx directives on the floor (bench-null), closed loop, 400 KB batches, best of %d x %.0f s:"
          % (a.rounds, a.seconds))
    print("%-46s %9s %8s %14s %8s %7s" % ("variant", "req/s", "ratio", "nginx ms/req", "ratio", "errors"))
    for name, _, _ in variants:
        rps, ms, err = best[name]
        print("%-46s %9.0f %7.2fx %14.3f %7.2fx %7d" % (name, rps, rps / base[0], ms,
                                                       ms / base[1] if base[1] else 0, err))


if __name__ == "__main__":
    main()
