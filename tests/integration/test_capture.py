#!/usr/bin/env python3
"""test_capture.py: capture_* through the real nginx and daemon.

- every batch (sample 1) lands in the capture files byte for byte,
  whatever it is (valid JSON, a BOM, line breaks, bytes that are not
  UTF-8, a rejected body), with its arrival time, in time order;
- enrich-replay plays the merged capture back against the stack and gets
  the same statuses;
- rotation keeps the directory under capture_max_bytes;
- a full disk (a tiny tmpfs) and a full queue drop samples, count them in
  /metrics and never fail a request; the files hold whole lines only;
- nothing on disk is trusted (links and files planted as another user,
  nobody): a directory writable by every user without the sticky bit is
  refused by -t and at start, and when it becomes so while running; in a
  sticky one (as /tmp) a planted symlink is not followed and a planted
  file of another user not written, the samples dropped and counted; a
  file of ours opened wider is narrowed to 0640;
- a directory removed while running is noticed before the write: the
  samples are counted as dropped (nodir), never as written, said in one
  line; when it is back it is opened again, said in one line, and every
  sample counted as written is a line in a file.
"""
import grp
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


def test_every_body_round_trips(r):
    cap = tempfile.mkdtemp(prefix="capture-")
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
        harness.wait_for(lambda: harness.metric(env, "enrichd_capture_written_total") == len(BODIES), 5,
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
        harness.wait_for(lambda: harness.metric(env, "enrichd_capture_written_total") == 60, 5,
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
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", cap], check=True)
    body = harness.sample_body(200)
    try:
        with harness.Env(name="capture-full") as env:
            env.start_enrichd("workers = 2\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
            env.start_nginx()
            sts = [env.request("/v1/enrich", body)[0] for _ in range(20)]
            r.check(sts == [200] * 20, "a full disk fails no request: %r" % sorted(set(sts)))
            harness.wait_for(lambda: (harness.metric(env, "enrichd_capture_written_total") or 0)
                             + (harness.metric(env, "enrichd_capture_dropped_error_total") or 0) == 20, 5,
                             what="every sample written or dropped")
            dropped = harness.metric(env, "enrichd_capture_dropped_error_total")
            r.check(dropped and dropped > 0, "samples dropped on the full disk are counted (%s)" % dropped)
            lines = read_capture(cap)
            r.check(all(payload_bytes(l)[0] == body for l in lines),
                    "the files hold whole samples only (%d)" % len(lines))
            ev = env.log_events("capture write failed: sample dropped")
            r.check(1 <= len(ev) <= 2, "the drop is logged once per worker, not per sample (%d)"
                    % len(ev))
        with harness.Env(name="capture-queue") as env:
            env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n"
                              "capture_queue_bytes = 1k\n" % cap)
            env.start_nginx()
            sts = [env.request("/v1/enrich", body)[0] for _ in range(5)]
            r.check(sts == [200] * 5, "a full queue fails no request")
            r.check(harness.metric(env, "enrichd_capture_dropped_queue_total") == 5,
                    "samples larger than the queue are dropped and counted")
    finally:
        subprocess.run(["umount", cap], check=False)


def settle(cond, timeout=5):
    """Waits until cond() (the writer thread is behind the answer); the
    caller checks the values itself."""
    try:
        harness.wait_for(cond, timeout)
    except Exception:  # noqa: BLE001
        pass


def secret_file(d):
    """A root-owned file outside the capture directory, 0600."""
    path = os.path.join(d, "secret")
    with open(path, "w") as f:
        f.write("root only\n")
    os.chmod(path, 0o600)
    return path


def planted_in_world_writable(r, secret, exe):
    """Writable by everyone, no sticky bit: a symlink planted in enrichd's file's place.
    Refused before anything is written."""
    cap = tempfile.mkdtemp(prefix="capture-0777-")
    os.chmod(cap, 0o777)
    r.check(harness.as_user(lambda: os.symlink(secret, os.path.join(cap, "capture-0.ndjson"))),
            "nobody plants a symlink")
    with harness.Env(name="capture-0777") as env:
        env.write_config("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
        p = subprocess.run([exe, "-t", "-c", env.conf], capture_output=True, text=True, timeout=10)
        r.check(p.returncode != 0 and ": capture_dir: " in p.stderr and
                "writable by every user without the sticky bit" in p.stderr,
                "-t refuses a capture_dir writable by all: %s" % p.stderr.strip()[-200:])
        proc = env.start_enrichd(wait_ready=False)
        try:
            rc = proc.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        r.check(rc == 1, "enrichd does not start on it: exit %r" % rc)
    r.check(open(secret).read() == "root only\n", "the link's target is untouched")


def planted_in_sticky(r, secret, body):
    """Sticky and writable by all (as /tmp): a symlink in the file's place, then a file of
    nobody's, mode 0666.  Neither is written."""
    cap = tempfile.mkdtemp(prefix="capture-sticky-")
    os.chmod(cap, 0o1777)
    planted = os.path.join(cap, "capture-0.ndjson")

    def plant_file():
        os.unlink(planted)
        fd = os.open(planted, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.fchmod(fd, 0o666)
        os.close(fd)
    for what, plant, reasons in (
            # The kernel's protected_symlinks may refuse it first (EACCES).
            ("a symlink", lambda: os.symlink(secret, planted),
             ("a symbolic link: not followed", "Permission denied")),
            # protected_regular may refuse the open itself (EACCES).
            ("a 0666 file of nobody's", plant_file,
             ("owned by uid %d" % harness.NOBODY, "Permission denied"))):
        r.check(harness.as_user(plant), "nobody plants %s" % what)
        with harness.Env(name="capture-sticky") as env:
            env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
            env.start_nginx()
            sts = [env.request("/v1/enrich", body)[0] for _ in range(6)]
            r.check(sts == [200] * 6, "%s: every request answered: %r" % (what, sorted(set(sts))))
            settle(lambda: harness.metric(env, "enrichd_capture_dropped_error_total") == 6)
            r.check(harness.metric(env, "enrichd_capture_written_total") == 0 and
                    harness.metric(env, "enrichd_capture_dropped_error_total") == 6,
                    "%s: 6 samples dropped and counted, none written (written %r, dropped %r)"
                    % (what, harness.metric(env, "enrichd_capture_written_total"),
                       harness.metric(env, "enrichd_capture_dropped_error_total")))
            ev = env.log_events("capture file refused: samples dropped")
            err = ev[0].get("error", "") if ev else ""
            r.check(len(ev) == 1 and any(x in err for x in reasons),
                    "%s: said once, with why: %d lines, %r" % (what, len(ev), err))
        r.check(open(secret).read() == "root only\n", "%s: the secret is untouched" % what)
    r.check(os.path.getsize(planted) == 0, "the planted file got no production body")


def links_in_private_dir(r, secret, body):
    """In a directory only we may write, what the kernel does not guard: a symlink and a hard
    link to the secret in the file's place (made by a careless admin, or anything running as
    enrichd's user)."""
    for what, make, reason in (("a symlink", os.symlink, "a symbolic link: not followed"),
                               ("a hard link", os.link, "has 2 links")):
        cap = tempfile.mkdtemp(prefix="capture-link-")
        make(secret, os.path.join(cap, "capture-0.ndjson"))
        with harness.Env(name="capture-link") as env:
            env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
            env.start_nginx()
            for _ in range(3):
                env.request("/v1/enrich", body)
            settle(lambda: harness.metric(env, "enrichd_capture_dropped_error_total") == 3)
            ev = env.log_events("capture file refused: samples dropped")
            r.check(harness.metric(env, "enrichd_capture_written_total") == 0 and len(ev) == 1 and
                    reason in ev[0].get("error", ""),
                    "%s in the file's place: refused (%s), said once: %r"
                    % (what, reason, [e.get("error") for e in ev]))
        r.check(open(secret).read() == "root only\n", "%s: the secret is untouched" % what)


def file_mode_narrowed(r, body):
    """A file of ours, opened wider by someone: narrowed before the write."""
    cap = tempfile.mkdtemp(prefix="capture-mode-")
    mine = os.path.join(cap, "capture-0.ndjson")
    open(mine, "w").close()
    os.chmod(mine, 0o666)
    with harness.Env(name="capture-mode") as env:
        env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
        env.start_nginx()
        env.request("/v1/enrich", body)
        harness.wait_for(lambda: harness.metric(env, "enrichd_capture_written_total") == 1, 5,
                         what="written")
        r.check(os.stat(mine).st_mode & 0o7777 == 0o640, "our 0666 file narrowed to 0640: %o"
                % (os.stat(mine).st_mode & 0o7777))
        # Opened to everyone while running: the next samples are refused.
        os.chmod(cap, 0o777)
        for _ in range(4):
            env.request("/v1/enrich", body)
        settle(lambda: harness.metric(env, "enrichd_capture_dropped_error_total") == 4)
        r.check(harness.metric(env, "enrichd_capture_written_total") == 1,
                "a directory opened to all while running takes no more samples")
        r.check(len(env.log_events("capture directory refused: samples dropped")) == 1,
                "said in one line")
        os.chmod(cap, 0o700)
        env.request("/v1/enrich", body)
        harness.wait_for(lambda: harness.metric(env, "enrichd_capture_written_total") == 2, 5,
                         what="written again once fixed")


def test_planted_links_and_files(r):
    if not harness.IS_ROOT:
        r.check(False, "planting as another user needs root")
        return
    outside = tempfile.mkdtemp(prefix="capture-outside-")
    secret = secret_file(outside)
    exe = os.path.join(harness.build_dir(), "enrichd")
    body = harness.sample_body(3)

    planted_in_world_writable(r, secret, exe)
    planted_in_sticky(r, secret, body)
    links_in_private_dir(r, secret, body)
    file_mode_narrowed(r, body)


def test_directory_gone_and_back(r):
    import shutil
    cap = tempfile.mkdtemp(prefix="capture-gone-")
    body = harness.sample_body(3)
    with harness.Env(name="capture-gone") as env:
        env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n" % cap)
        env.start_nginx()
        for _ in range(3):
            env.request("/v1/enrich", body)
        harness.wait_for(lambda: harness.metric(env, "enrichd_capture_written_total") == 3, 5,
                         what="3 written")
        shutil.rmtree(cap)
        sts = [env.request("/v1/enrich", body)[0] for _ in range(5)]
        r.check(sts == [200] * 5, "requests answered while the directory is gone")
        settle(lambda: harness.metric(env, "enrichd_capture_dropped_nodir_total") == 5)
        r.check(harness.metric(env, "enrichd_capture_written_total") == 3,
                "no sample counted as written into a directory that is gone (%r)"
                % harness.metric(env, "enrichd_capture_written_total"))
        ev = env.log_events("capture directory gone: samples dropped until it is back")
        r.check(len(ev) == 1, "said in one line, not one per sample: %d" % len(ev))
        os.mkdir(cap, 0o700)
        for _ in range(2):
            env.request("/v1/enrich", body)
        harness.wait_for(lambda: harness.metric(env, "enrichd_capture_written_total") == 5, 5,
                         what="written again")
        r.check(len(env.log_events("capture directory back")) == 1, "its return said once")
        lines = read_capture(cap)
        r.check(len(lines) == 2 and all(payload_bytes(l)[0] == body for l in lines),
                "the two samples counted since are the two lines in the new directory: %d"
                % len(lines))


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


def oldest_on_disk(d):
    """The arrival time of the oldest sample in the directory, or None."""
    ts = []
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            first = f.readline()
        if first:
            ts.append(json.loads(first)["ts"])
    return min(ts) if ts else None


def test_age_bound(r):
    """capture_max_age_s: no sample on disk older than the bound (a tick
    of slack), with traffic and without; files left by an earlier run are
    judged by their first line."""
    cap = tempfile.mkdtemp(prefix="capture-age-")
    os.chmod(cap, 0o700)
    stale = b'{"ts":%.6f,"payload":[{"provider":"yt","id":"old"}]}\n' % (time.time() - 100)
    for name in ("capture-0.ndjson", "capture-0.ndjson.1"):
        with open(os.path.join(cap, name), "wb") as f:
            f.write(stale)
        os.chmod(os.path.join(cap, name), 0o640)
    age, slack = 2.0, 0.75  # the tick is 250 ms at this bound; a loaded machine
    with harness.Env(name="capture-age") as env:
        env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n"
                          "capture_max_age_s = 2\n" % cap)
        env.start_nginx()
        settle(lambda: not os.listdir(cap), timeout=3)
        gone = not os.listdir(cap)
        r.check(gone, "samples 100 s old left by an earlier run removed with no traffic: %r"
                % os.listdir(cap))
        worst, n, t_end = 0.0, 0, time.monotonic() + 5
        while time.monotonic() < t_end:
            st, _, _ = env.request("/v1/enrich", harness.sample_body(2))
            n += st == 200
            o = oldest_on_disk(cap)
            if o is not None:
                worst = max(worst, time.time() - o)
            time.sleep(0.05)
        names = sorted(os.listdir(cap))
        print("capture_max_age_s = 2: oldest sample on disk under traffic %.2f s (%d requests)"
              % (worst, n))
        r.check(n > 20 and worst <= age + slack,
                "under traffic (%d requests over 5 s) the oldest sample on disk was %.2f s old "
                "(bound %.1f s + %.2f)" % (n, worst, age, slack))
        r.check(names == ["capture-0.ndjson", "capture-0.ndjson.1"],
                "rotated by age, not size: %r" % names)
        t0 = time.monotonic()
        settle(lambda: not os.listdir(cap), timeout=age + 2)
        empty = not os.listdir(cap)
        r.check(empty, "with no more traffic every file goes within the bound: %.2f s, left %r"
                % (time.monotonic() - t0, os.listdir(cap)))
        written = harness.metric(env, "enrichd_capture_written_total")
        r.check(written == n, "every sample was written before it expired: %r of %d"
                % (written, n))


def test_group(r):
    """capture_group: the files are given that group, mode 0640, before a
    byte is in them; -t refuses a group enrichd cannot give."""
    if not r.check(harness.IS_ROOT, "capture_group with www-data needs root"):
        return
    cap = tempfile.mkdtemp(prefix="capture-grp-")
    os.chmod(cap, 0o750)
    www = grp.getgrnam("www-data").gr_gid
    with harness.Env(name="capture-grp") as env:
        # The unit's UMask=0077 would make the files 0600: the group could not read.
        old_umask = os.umask(0o077)
        try:
            env.start_enrichd("workers = 1\ncapture_dir = %s\ncapture_sample = 1\n"
                              "capture_group = www-data\n" % cap)
        finally:
            os.umask(old_umask)
        env.start_nginx()
        st, _, _ = env.request("/v1/enrich", harness.sample_body(2))
        harness.wait_for(lambda: harness.metric(env, "enrichd_capture_written_total") == 1, 5,
                         what="the sample written")
        f = os.stat(os.path.join(cap, "capture-0.ndjson"))
        r.check(st == 200 and f.st_gid == www and f.st_mode & 0o777 == 0o640,
                "the capture file is group www-data, mode 0640: gid %d mode %o"
                % (f.st_gid, f.st_mode & 0o777))
        for extra, want, as_nobody in (
                ("capture_group = no-such-group-enrichd\n", "no such group", False),
                ("capture_group = www-data\n", 'is not in group "www-data"', True)):
            path = os.path.join(env.dir, "grp.conf")
            with open(path, "w") as fh:
                fh.write(extra)
            os.chmod(path, 0o644)
            pre = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if as_nobody else []
            p = subprocess.run(pre + [os.path.join(env.build, "enrichd"), "-t", "-c", path],
                               capture_output=True, text=True)
            r.check(p.returncode != 0 and ":1: capture_group: " in p.stderr and want in p.stderr,
                    "-t refuses %r%s: %s" % (extra.strip(), " as nobody" if as_nobody else "",
                                             p.stderr.strip()))


def main():
    harness.run_tests(test_every_body_round_trips, test_rotation_bounds_the_directory,
                      test_full_disk_and_full_queue_never_fail_a_request,
                      test_planted_links_and_files, test_directory_gone_and_back,
                      test_config_is_checked, test_age_bound, test_group)


if __name__ == "__main__":
    main()
