#!/usr/bin/env python3
"""test_upstream_secret.py: the upstream secret arrives, and only there.

HTTP client -> nginx -> enrichd workers (2) -> the fake upstream, which
keeps the headers and extra query parameters of the last calls.
  - upstream_secret_file + upstream_secret_header (a Bearer template) and
    upstream_header lines: the fake sees exactly those headers; a new
    file is read on HUP (rotation).
  - upstream_secret_credential ($CREDENTIALS_DIRECTORY, the systemd way)
    + upstream_secret_query: the fake sees key=<secret> percent-encoded,
    and no call is a bad request.
  - Then the secret (raw, percent-encoded, and its random part alone) is
    searched for in everything the test can see: the daemon's stderr at
    log level debug with failing calls (5xx, time-outs, refused), nginx's
    logs, /status (full), /metrics, /healthz, /readyz, `enrichd status`,
    the answers and error bodies, `enrichd -t` output, every capture file, and
    /proc/PID/cmdline and environ of every enrichd process.
  - A secret file open to others, or missing, is refused by -t without a
    byte of the secret in the message; a credential outside systemd is
    a warning of -t and a refusal of the daemon.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from urllib.parse import quote, unquote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import FakeUpstream, upstream_conf, post, degraded  # noqa: E402


def make_secret():
    tail = os.urandom(12).hex()
    return "k3y+/=" + tail, tail  # '+', '/' and '=' need percent-encoding


def forms(secret, tail):
    return [secret, quote(secret, safe="-._~"), quote(secret, safe=""), tail]


def write_secret(path, secret, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (secret + "\n").encode())
    os.close(fd)
    os.chmod(path, mode)


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(harness.children(p))
    return out


def leaks(env, secret, tail, cap_dir, extra_texts):
    """Every place the secret must not be: [(where, form)] it was found in."""
    seen = []
    texts = dict(extra_texts)
    for name in ("enrichd_log", "nginx_log", "access_log"):
        try:
            with open(getattr(env, name), "rb") as f:
                texts[name] = f.read()
        except OSError:
            pass
    for path in ("/status", "/status?full=1", "/metrics", "/healthz", "/readyz"):
        st, _, body = env.request(path, method="GET")
        texts[path] = body
    p = subprocess.run([os.path.join(env.build, "enrichd"), "status", env.status_sock],
                       capture_output=True, timeout=10)
    texts["enrichd status"] = p.stdout + p.stderr
    p = subprocess.run([os.path.join(env.build, "enrichd"), "-t", "-c", env.conf],
                       capture_output=True, timeout=10, env=env_of(env))
    texts["enrichd -t"] = p.stdout + p.stderr
    ncap = 0
    for root, _, files in os.walk(cap_dir):
        for fn in files:
            with open(os.path.join(root, fn), "rb") as f:
                texts["capture " + fn] = f.read()
            ncap += 1
    procs = descendants(env.master_pid())
    for pid in procs:
        for what in ("cmdline", "environ"):
            try:
                with open("/proc/%d/%s" % (pid, what), "rb") as f:
                    texts["/proc/%d/%s" % (pid, what)] = f.read()
            except OSError:
                pass
    for where, data in texts.items():
        for form in forms(secret, tail):
            if form.encode() in data:
                seen.append((where, form))
    return seen, len(texts), ncap, len(procs)


ENV_EXTRA = {}


def env_of(env):
    e = dict(os.environ)
    e.update(ENV_EXTRA.get(env.dir, {}))
    return e


def start(name, fake, extra, env_vars=None, cap_dir=None):
    env = harness.Env(name=name)
    ENV_EXTRA[env.dir] = dict(env_vars or {}, ENRICHD_LOG_LEVEL="debug")
    conf = ("workers = 2\nmax_requests = 0\n" + upstream_conf(fake, upstream_timeout_ms=300,
                                                              breaker_failures=1000) + extra)
    if cap_dir:
        conf += "capture_dir = %s\ncapture_sample = 1\n" % cap_dir
    env.start_enrichd(conf, env=ENV_EXTRA[env.dir])
    env.start_nginx()
    return env


def exercise(env, fake, tag):
    """Calls that succeed, and calls that fail every way the log tells of."""
    answers = []
    for mode in ("ok", "5xx", "malformed", "hang", "refuse", "ok"):
        fake.control(mode=mode)
        for i in range(3):
            st, h, lines = post(env, [{"provider": p, "id": "%s-%s-%d" % (tag, mode, i)}
                                      for p in ("yt", "vm", "dm")])
            answers.append(repr((st, h, lines)).encode())
    fake.control(mode="ok")
    # error bodies: a batch that is not JSON, a wrong method, a missing path
    for path, body, method in (("/v1/enrich", b"[{", "POST"), ("/v1/enrich", b"", "GET"),
                               ("/nope", b"[]", "POST")):
        st, h, data = env.request(path, body=body, method=method)
        answers.append(repr((st, h)).encode() + data)
    return b"\n".join(answers)


@contextlib.contextmanager
def secret_dirs(prefix):
    """A directory for the secret's files and a capture_dir (closed to
    others, as safedir wants), both removed after."""
    d = tempfile.mkdtemp(prefix=prefix)
    cap = tempfile.mkdtemp(prefix="enr-secret-cap-")
    os.chmod(cap, 0o700)
    try:
        yield d, cap
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(cap, ignore_errors=True)


def test_header_and_rotation(r, fake):
    secret, tail = make_secret()
    with secret_dirs("enr-secret-") as (d, cap):
        path = os.path.join(d, "api-key")
        write_secret(path, secret)
        extra = ("upstream_secret_file = %s\n"
                 "upstream_secret_header = Authorization: Bearer {secret}\n"
                 "upstream_header = X-Client: enrichd-test\n"
                 "upstream_header = X-Tenant: t42\n" % path)
        with start("secret-hdr", fake, extra, cap_dir=cap) as env:
            fake.control(mode="ok", extra_params=[])
            fake.reset()
            st, h, _ = post(env, [{"provider": "yt", "id": "hdr1"}, {"provider": "vm", "id": "hdr2"}])
            s = fake.stats()
            hs = s["last_headers"]
            r.check(st == 200 and degraded(h) == 0 and len(hs) == 2,
                    "enriched through the fake: %d %s, %d calls" % (st, h.get("x-enrich-degraded"), len(hs)))
            r.check(all(x.get("Authorization") == "Bearer " + secret for x in hs),
                    "Authorization: Bearer <secret> on every call")
            r.check(all(x.get("X-Client") == "enrichd-test" and x.get("X-Tenant") == "t42"
                        and x.get("Accept") == "application/json" for x in hs),
                    "the upstream_header lines too: %r" % [sorted(x) for x in hs])
            answers = exercise(env, fake, "h")
            found, n, ncap, nproc = leaks(env, secret, tail, cap, {"answers": answers})
            r.check(not found, "the secret is in none of %d texts (%d capture files, %d processes): %r"
                    % (n, ncap, nproc, found))
            r.check(ncap >= 1 and nproc >= 4, "captures and processes were looked at: %d, %d"
                    % (ncap, nproc))
            r.check(len(env.log_events("upstream call failed")) >= 6,
                    "the debug log told of the failed calls (so it was searched with them)")

            # rotation: a new key, read on HUP
            new, new_tail = make_secret()
            write_secret(path, new)
            old_workers = set(env.worker_pids())
            env.signal(signal.SIGHUP)
            harness.wait_for(lambda: len(set(env.worker_pids()) - old_workers) == 2 and
                             len(env.worker_pids()) == 2, 15, what="new workers after HUP")
            fake.reset()
            st, h, _ = post(env, [{"provider": "dm", "id": "rot1"}])
            hs = fake.stats()["last_headers"]
            r.check(st == 200 and hs and hs[-1].get("Authorization") == "Bearer " + new,
                    "after HUP the new key is sent")
            found, _, _, _ = leaks(env, new, new_tail, cap, {})
            r.check(not found, "the new key appears nowhere either: %r" % found)


def test_credential_query(r, fake):
    secret, tail = make_secret()
    with secret_dirs("enr-creds-") as (creds, cap):
        write_secret(os.path.join(creds, "upstream-key"), secret, 0o400)
        extra = "upstream_secret_credential = upstream-key\nupstream_secret_query = key\n"
        with start("secret-cred", fake, extra, {"CREDENTIALS_DIRECTORY": creds}, cap) as env:
            fake.control(mode="ok", extra_params=["key"])
            fake.reset()
            st, h, _ = post(env, [{"provider": "yt", "id": "q1"}, {"provider": "dm", "id": "q2"}])
            s = fake.stats()
            ex = s["last_extra"]
            r.check(st == 200 and degraded(h) == 0 and s["bad_requests"] == 0,
                    "enriched, no bad request: %d %s %d" % (st, h.get("x-enrich-degraded"), s["bad_requests"]))
            r.check(len(ex) == 2 and all(x.get("key") == [quote(secret, safe="-._~")] for x in ex),
                    "key=<secret> percent-encoded on every call: %r" % ex)
            r.check(all(unquote(x["key"][0]) == secret for x in ex if x.get("key")),
                    "and it decodes to the secret")
            r.check(all(t.startswith("/v1/meta?key=") and "&provider=" in t for t in s["last_targets"]),
                    "the key first, then the client's parameters: %r" % s["last_targets"][:1])
            answers = exercise(env, fake, "q")
            found, n, ncap, nproc = leaks(env, secret, tail, cap, {"answers": answers})
            r.check(not found, "the secret is in none of %d texts (%d capture files, %d processes): %r"
                    % (n, ncap, nproc, found))
            fake.control(extra_params=[])


def test_refused(r, fake):
    secret, tail = make_secret()
    d = tempfile.mkdtemp(prefix="enr-secret-")
    path = os.path.join(d, "k")
    write_secret(path, secret, 0o644)
    conf = os.path.join(d, "enrichd.conf")
    enrichd = os.path.join(harness.build_dir(), "enrichd")
    try:
        with open(conf, "w") as f:
            f.write("upstream_url = %s\nupstream_secret_file = %s\n"
                    "upstream_secret_query = key\n" % (fake.url, path))
        p = subprocess.run([enrichd, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
        out = p.stdout + p.stderr
        r.check(p.returncode == 1 and "upstream_secret_file" in out and "open to others" in out,
                "a secret others can read is refused: %r" % out.strip())
        r.check(not any(f in out for f in forms(secret, tail)), "without the secret in the message")
        os.chmod(path, 0o600)
        p = subprocess.run([enrichd, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
        r.check(p.returncode == 0 and not any(f in p.stdout + p.stderr for f in forms(secret, tail)),
                "0600 passes, -t says nothing of the secret: %r" % (p.stdout + p.stderr).strip())
        with open(conf, "w") as f:
            f.write("upstream_url = %s\nupstream_secret_credential = nope\n"
                    "upstream_secret_header = X-Api-Key\n" % fake.url)
        e = dict(os.environ)
        e.pop("CREDENTIALS_DIRECTORY", None)
        p = subprocess.run([enrichd, "-t", "-c", conf], capture_output=True, text=True, timeout=10,
                           env=e)
        r.check(p.returncode == 0 and "CREDENTIALS_DIRECTORY" in p.stderr
                and "not checked" in p.stderr,
                "-t outside systemd passes, saying how to give the credential: %r"
                % p.stderr.strip())
        p = subprocess.run([enrichd, "-c", conf], capture_output=True, text=True, timeout=10,
                           env=e)
        r.check(p.returncode == 1 and "CREDENTIALS_DIRECTORY" in p.stderr,
                "the daemon outside systemd refuses it: %r" % p.stderr.strip())
        with open(conf, "w") as f:
            f.write("upstream_url = %s?token=%s\n" % (fake.url.replace("http://", "gopher://"), secret))
        p = subprocess.run([enrichd, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
        r.check(p.returncode == 1 and "?[redacted]" in p.stderr and
                not any(f in p.stderr for f in forms(secret, tail)),
                "a bad URL is shown with its query redacted: %r" % p.stderr.strip())
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    harness.run_tests(
        test_header_and_rotation, test_credential_query, test_refused, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
