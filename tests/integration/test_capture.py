#!/usr/bin/env python3
"""test_capture.py: capture_* through the real nginx and daemon.

- every batch (sample 1) lands in the capture files byte for byte,
  whatever it is (valid JSON, a BOM, line breaks, bytes that are not
  UTF-8, a rejected body), with its arrival time, in time order;
- enrich-replay plays the merged capture back against the stack and gets
  the same statuses;
- rotation keeps the directory under capture_max_bytes;
- a full disk (a tiny tmpfs) and a full queue drop samples, count them in
  /metrics and never fail a request; the files hold whole lines only.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

REPLAY = os.path.join(harness.build_dir(), "enrich-replay")

BODIES = [
    harness.sample_body(5),
    b"[]",
    b'\xef\xbb\xbf[{"provider":"yt","id":"bom"}]',
    b'[\n{"provider":"vm","id":"lines"}\r\n]',
    b'[{"provider":"dm","id":"a\xc0\x80b","title":"\xff\xfe x"}]',
    b'[{"provider":"yt","id":"q\\"uote","title":"tab\\there"}]',
    b"[1,",  # rejected: not JSON
    b'[{"provider":"yt","id":"\xe2\x82"}]',
]


def payload_bytes(line):
    """The body a trace line stands for, as the trace reader reads it."""
    doc = json.loads(line)
    p = doc["payload"]
    if isinstance(p, str):
        return p.encode("utf-8", "surrogateescape"), doc["ts"]
    raw = line[line.index(b'"payload":') + len(b'"payload":'):line.rindex(b"}")]
    return raw, doc["ts"]


def read_capture(d):
    lines = []
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        assert data == b"" or data.endswith(b"\n"), "%s ends with a whole line" % name
        lines += [l for l in data.split(b"\n") if l]
    return lines


def metric(env, name):
    st, _, body = env.request("/metrics", method="GET")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_every_body_round_trips(r):
    cap = tempfile.mkdtemp(prefix="capture-")
    os.chmod(cap, 0o777)
    with harness.Env(name="capture") as env:
        env.start_enrichd("workers = 2\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
        env.start_nginx()
        t0 = time.time()
        statuses = []
        for b in BODIES:
            st, _, _ = env.request("/v1/enrich", b)
            statuses.append(st)
        r.check(statuses.count(200) == len(BODIES) - 1 and 400 <= statuses[-2] < 500,
                "all answered as usual: %r" % statuses)
        harness.wait_for(lambda: metric(env, "enrichd_capture_written_total") == len(BODIES), 5,
                         what="every sample written")
        lines = read_capture(cap)
        got = [payload_bytes(l) for l in lines]
        bodies = sorted(b for b, _ in got)
        r.check(bodies == sorted(BODIES), "every body captured byte for byte (%d of %d)"
                % (len([b for b in BODIES if b in bodies]), len(BODIES)))
        r.check(all(t0 - 1 <= ts <= time.time() + 1 for _, ts in got), "arrival times are now")
        verbatim = [l for l in lines if not l.startswith(b'{"ts":') or b'"payload":[' in l]
        r.check(len(verbatim) >= 3, "valid one-line JSON bodies are written verbatim (%d)"
                % len(verbatim))
        # Merge and replay the capture against the same stack.
        merged = os.path.join(env.dir, "trace.ndjson")
        files = [os.path.join(cap, n) for n in sorted(os.listdir(cap))]
        with open(merged, "wb") as f:
            subprocess.run(["sort", "-m"] + files, stdout=f, check=True,
                           env=dict(os.environ, LC_ALL="C"))
        ts = [json.loads(l)["ts"] for l in open(merged, "rb").read().split(b"\n") if l]
        r.check(ts == sorted(ts), "sort -m gives one trace in time order")
        out = os.path.join(env.dir, "replay.json")
        p = subprocess.run([REPLAY, "--no-progress", "-s", "0", "--json", out, merged,
                            "http://127.0.0.1:%d/v1/enrich" % env.port],
                           capture_output=True, text=True, timeout=60)
        doc = json.load(open(out))[0]
        r.check(p.returncode == 0 and doc["count"] == len(BODIES), "replay ran: %s" % p.stderr[-300:])
        r.check(doc["ok"] == len(BODIES) - 1 and doc["s4xx"] == 1,
                "the replay gets the same statuses (%d ok, %d 4xx)" % (doc["ok"], doc["s4xx"]))


def test_rotation_bounds_the_directory(r):
    cap = tempfile.mkdtemp(prefix="capture-rot-")
    os.chmod(cap, 0o777)
    body = harness.sample_body(200)  # ~60 KB
    with harness.Env(name="capture-rot") as env:
        env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n"
                          "capture_max_bytes = 1m\n" % cap)
        env.start_nginx()
        for _ in range(60):  # ~3.6 MB offered
            st, _, _ = env.request("/v1/enrich", body)
            if st != 200:
                break
        r.check(st == 200, "requests answered while rotating")
        harness.wait_for(lambda: metric(env, "enrichd_capture_written_total") == 60, 5,
                         what="samples written")
        names = sorted(os.listdir(cap))
        total = sum(os.path.getsize(os.path.join(cap, n)) for n in names)
        r.check(names == ["capture-0.ndjson", "capture-0.ndjson.1"], "rotated once: %r" % names)
        r.check(total <= 1 << 20, "directory within capture_max_bytes: %d bytes" % total)
        read_capture(cap)  # whole lines


def test_full_disk_and_full_queue_never_fail_a_request(r):
    if not harness.IS_ROOT:
        r.check(False, "the full-disk case needs root (a tmpfs mount)")
        return
    cap = tempfile.mkdtemp(prefix="capture-full-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0777", "tmpfs", cap], check=True)
    body = harness.sample_body(200)
    try:
        with harness.Env(name="capture-full") as env:
            env.start_enrichd("workers = 2\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
            env.start_nginx()
            sts = [env.request("/v1/enrich", body)[0] for _ in range(20)]
            r.check(sts == [200] * 20, "a full disk fails no request: %r" % sorted(set(sts)))
            harness.wait_for(lambda: (metric(env, "enrichd_capture_written_total") or 0)
                             + (metric(env, "enrichd_capture_dropped_error_total") or 0) == 20, 5,
                             what="every sample written or dropped")
            dropped = metric(env, "enrichd_capture_dropped_error_total")
            r.check(dropped and dropped > 0, "samples dropped on the full disk are counted (%s)" % dropped)
            lines = read_capture(cap)
            r.check(all(payload_bytes(l)[0] == body for l in lines),
                    "the files hold whole samples only (%d)" % len(lines))
            ev = env.log_events("capture sample dropped")
            r.check(1 <= len(ev) <= 2, "the drop is logged once per kind, not per sample (%d)" % len(ev))
        with harness.Env(name="capture-queue") as env:
            env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n"
                              "capture_queue_bytes = 1k\n" % cap)
            env.start_nginx()
            sts = [env.request("/v1/enrich", body)[0] for _ in range(5)]
            r.check(sts == [200] * 5, "a full queue fails no request")
            r.check(metric(env, "enrichd_capture_dropped_queue_total") == 5,
                    "samples larger than the queue are dropped and counted")
    finally:
        subprocess.run(["umount", cap], check=False)


def test_config_is_checked(r):
    with harness.Env(name="capture-conf") as env:
        for extra, key in (("capture_sample = 0.5\n", "capture_sample"),
                           ("capture_dir = relative\n", "capture_dir"),
                           ("capture_dir = /nonexistent/dir\ncapture_sample = 1\n", "capture_dir"),
                           ("capture_sample = 2\n", "capture_sample")):
            env.write_config(extra)
            p = subprocess.run([os.path.join(env.build, "enrichd"), "-t", "-c", env.conf],
                               capture_output=True, text=True)
            r.check(p.returncode != 0 and (": %s:" % key) in p.stderr,
                    "-t refuses %r: %s" % (extra.strip(), p.stderr.strip()))


def main():
    r = harness.Results()
    r.run(test_every_body_round_trips)
    r.run(test_rotation_bounds_the_directory)
    r.run(test_full_disk_and_full_queue_never_fail_a_request)
    r.run(test_config_is_checked)
    r.done()


if __name__ == "__main__":
    main()
