#!/usr/bin/env python3
"""test_credentials.py: every credential file under one rule per kind, and
the commands that never call the provider never read the secret.

1. -t and the daemon: a TLS client key is a secret (refused when others
   may read it, when its group may write it, or its group read it and
   root does not own it); a CA bundle and a client certificate are
   public (refused when group or others may write them); each refusal
   names FILE:LINE: key and the chmod that mends it, and the same file
   at a good mode passes.  The daemon itself refuses to start on a key
   at 0666 (without -t in front of it).
2. A secret sent over http:// to a host that is not loopback (the
   aggregator's, YouTube's key, Vimeo's token: one rule) is refused by
   -t naming the key and the URL, by the daemon at start, and by a
   reload (the old configuration kept); over https:// or to loopback it
   is accepted.
3. As nobody, with a secret file only root can read: -t passes with a
   warning saying it could not look, -T passes and prints no secret, and
   `enrichd status -c` reaches the running daemon.  With
   upstream_secret_credential outside the unit (no
   CREDENTIALS_DIRECTORY): -t warns and passes, -T and `status -c` work.
   Under strace: -t never read()s the secret file, -T and status -c
   never even open it.
"""
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from test_config_check import Checker  # noqa: E402

NOBODY = 65534
SECRET = "k3y-" + os.urandom(10).hex()


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def write(path, text, mode, uid=0):
    with open(path, "w") as f:
        f.write(text)
    os.chown(path, uid, -1)
    os.chmod(path, mode)
    return path


def daemon_start(env):
    """The daemon started on env.conf without -t in front of it, as a unit
    starts it: (its exit code, its stderr) once it has exited; killed
    when it still runs after 10 s (-9: it was serving)."""
    p = subprocess.Popen([os.path.join(env.build, "enrichd"), "-c", env.conf],
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    env.procs.append(p)
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        _, err = p.communicate()
    return p.returncode, err


def test_tls_files(r):
    with harness.Env(name="cred-tls") as env:
        c = Checker(env)
        ca = write(os.path.join(env.dir, "ca.pem"), "-----BEGIN CERTIFICATE-----\n", 0o644)
        cert = write(os.path.join(env.dir, "c.pem"), "-----BEGIN CERTIFICATE-----\n", 0o644)
        key = write(os.path.join(env.dir, "c.key"), "-----BEGIN PRIVATE KEY-----\n", 0o600)
        base = ["upstream_url = https://127.0.0.1:9/v1", "upstream_ca_file = %s" % ca,
                "upstream_client_cert = %s" % cert, "upstream_client_key = %s" % key]
        code, out, err = c.run(base)
        r.check(code == 0, "CA 0644, cert 0644, key 0600: accepted (%r)" % err)
        cases = [
            (key, 0o666, 0, "upstream_client_key", "writable by others"),
            (key, 0o644, 0, "upstream_client_key", "open to others"),
            (key, 0o604, 0, "upstream_client_key", "chmod o-rwx"),
            (key, 0o620, 0, "upstream_client_key", "chmod go-w"),
            (key, 0o640, NOBODY, "upstream_client_key", "not owned by root"),
            (ca, 0o666, 0, "upstream_ca_file", "writable by others"),
            (ca, 0o664, 0, "upstream_ca_file", "writable by its group"),
            (cert, 0o646, 0, "upstream_client_cert", "chmod go-w"),
        ]
        for path, mode, uid, k, want in cases:
            os.chown(path, uid, -1)
            os.chmod(path, mode)
            code, out, err = c.run(base)
            line = 4 + base.index([b for b in base if b.startswith(k + " ")][0])
            r.check(code == 1 and ("t.conf:%d: %s: " % (line, k)) in err and want in err,
                    "%s at %04o (uid %d) refused: %r" % (k, mode, uid, err.strip()))
            os.chown(path, 0, -1)
            os.chmod(path, 0o600 if path == key else 0o644)
        os.chown(key, 0, -1)
        os.chmod(key, 0o640)
        code, out, err = c.run(base)
        r.check(code == 0, "a key root:GROUP 0640 (the ssl-cert way) accepted: %r" % err)
        # the daemon, without -t in front of it
        os.chmod(key, 0o666)
        env.write_config("\n".join(base) + "\n")
        rc, err = daemon_start(env)
        r.check(rc == 1 and "upstream_client_key: " in err and "writable by others" in err,
                "the daemon refuses to start on a key at 0666 (rc %r): %r"
                % (rc, err.strip()[-200:]))


def test_cleartext(r):
    """One rule for every secret: over http:// to another host, refused."""
    with harness.Env(name="cred-clear") as env:
        c = Checker(env)
        key = write(os.path.join(env.dir, "key"), SECRET + "\n", 0o600)
        # (the secret's lines, the URL key, the key the refusal names)
        secrets = [
            (["upstream_secret_file = %s" % key, "upstream_secret_header = X-Api-Key"],
             "upstream_url", "upstream_secret_file"),
            (["yt_source = youtube", "youtube_key_file = %s" % key], "youtube_url",
             "youtube_key_file"),
            (["vm_source = vimeo", "vimeo_token_file = %s" % key], "vimeo_url",
             "vimeo_token_file"),
        ]
        for sec, url_key, named in secrets:
            for url, refused in (("http://192.0.2.1:8080/v1", True),
                                 ("http://api.example.com/v1", True),
                                 ("http://127.0.0.1:9/v1", False), ("http://[::1]:9/v1", False),
                                 ("http://localhost:9/v1", False),
                                 ("https://api.example.com/v1", False)):
                code, w, err = c.warnings(["%s = %s" % (url_key, url)] + sec)
                line = 4 + sec.index([l for l in sec if l.startswith(named + " ")][0]) + 1
                want = ("t.conf:%d: %s: refused: the secret would go in clear text to another "
                        "host (%s = %s)" % (line, named, url_key, url))
                if refused:
                    r.check(code == 1 and want in err and SECRET not in err,
                            "-t refuses %s over %s, naming the key and the URL: %r"
                            % (named, url, err.strip()[-300:]))
                else:
                    r.check(code == 0 and "clear text" not in err,
                            "-t accepts %s over %s: %r" % (named, url, err.strip()[-300:]))
        # The daemon refuses to start (no -t in front of it).
        env.write_config("youtube_url = http://192.0.2.1:8080/v3\nyt_source = youtube\n"
                         "youtube_key_file = %s\n" % key)
        rc, err = daemon_start(env)
        r.check(rc == 1 and "youtube_key_file: refused" in err
                and "youtube_url = http://192.0.2.1:8080/v3" in err and SECRET not in err,
                "the daemon refuses to start with the key over http (rc %r): %r"
                % (rc, err.strip()[-300:]))
        # A reload to it is refused and the old configuration keeps serving.
        env.start_enrichd("youtube_url = http://127.0.0.1:9/v3\nyt_source = youtube\n"
                          "youtube_key_file = %s\n" % key)
        good = open(env.conf).read()
        with open(env.conf, "w") as f:
            f.write(good.replace("http://127.0.0.1:9/v3", "http://192.0.2.1:9/v3"))
        env.signal(signal.SIGHUP)
        ev = env.wait_log("reload refused: configuration invalid, keeping the old one")
        err = ev[0].get("error", "")
        r.check("youtube_key_file: refused" in err and "youtube_url = http://192.0.2.1:9/v3" in err,
                "a reload to it is refused, naming the key and the URL: %r" % err)
        out = subprocess.run([os.path.join(env.build, "enrichd"), "status", "--json",
                              env.status_sock], capture_output=True, text=True, timeout=10).stdout
        doc = json.loads(out) if out.strip() else {}
        r.check(doc.get("generation") == 0 and not env.log_events("reload"),
                "the old configuration kept (generation %r)" % doc.get("generation"))
        log = open(env.enrichd_log).read()
        r.check(SECRET not in log, "no log line quotes the secret")


def strace(argv, preexec=None, env=None):
    """(returncode, stdout+stderr, the trace's lines)."""
    trace = os.path.join(os.environ.get("TMPDIR", "/tmp"), "enr-cred-%d.trace" % os.getpid())
    p = subprocess.run(["strace", "-f", "-y", "-e", "trace=open,openat,read", "-o", trace]
                       + argv, capture_output=True, text=True, timeout=30, preexec_fn=preexec,
                       env=env)
    with open(trace) as f:
        lines = f.read().splitlines()
    os.unlink(trace)
    return p.returncode, p.stdout + p.stderr, lines


def test_no_secret_needed(r):
    with harness.Env(name="cred-nobody") as env:
        key = write(os.path.join(env.dir, "key"), SECRET + "\n", 0o600)
        cred_dir = os.path.join(env.dir, "creds")
        os.mkdir(cred_dir, 0o700)
        write(os.path.join(cred_dir, "api"), SECRET + "\n", 0o400)
        enrichd = os.path.join(env.build, "enrichd")
        common = ("workers = 2\nupstream_url = http://127.0.0.1:9/v1\nlisten_group =\n"
                  "listen_mode = 0666\nupstream_secret_header = X-Api-Key\n")
        by_file = common + "upstream_secret_file = %s\n" % key
        by_cred = common + "upstream_secret_credential = api\n"
        no_creds = dict(os.environ)
        no_creds.pop("CREDENTIALS_DIRECTORY", None)

        for label, text, env_vars in (("a root-only file", by_file, None),
                                      ("a credential", by_cred, {"CREDENTIALS_DIRECTORY":
                                                                 cred_dir})):
            env.start_enrichd(text, env=env_vars)
            os.chmod(env.conf, 0o644)
            # -t as nobody, or outside the unit
            user = as_nobody if env_vars is None else None
            p = subprocess.run([enrichd, "-t", "-c", env.conf], capture_output=True, text=True,
                               timeout=10, preexec_fn=user, env=no_creds)
            r.check(p.returncode == 0 and "not checked" in p.stderr and SECRET not in p.stdout
                    + p.stderr, "%s: -t passes with a warning (%r)" % (label, p.stderr.strip()))
            p = subprocess.run([enrichd, "-T", "-c", env.conf], capture_output=True, text=True,
                               timeout=10, preexec_fn=user, env=no_creds)
            r.check(p.returncode == 0 and "upstream_secret_header = X-Api-Key" in p.stdout
                    and SECRET not in p.stdout + p.stderr,
                    "%s: -T prints the configuration (%r)" % (label, p.stderr.strip()))
            p = subprocess.run([enrichd, "status", "-c", env.conf], capture_output=True,
                               text=True, timeout=10, preexec_fn=user, env=no_creds)
            r.check(p.returncode == 0 and "worker" in p.stdout and SECRET not in p.stdout,
                    "%s: `enrichd status -c` reaches the daemon (rc %d, %r)"
                    % (label, p.returncode, (p.stderr or p.stdout).strip()[-200:]))
            env.enrichd.terminate()
            env.enrichd.wait(15)

        # Where the checker may read it, it still does not.
        env.write_config(by_file)
        rc, out, lines = strace([enrichd, "-t", "-c", env.conf])
        reads = [l for l in lines if "read(" in l and "<%s>" % key in l]
        opened = [l for l in lines if key in l and "open" in l]
        r.check(rc == 0 and opened and not reads,
                "-t as root opens the secret file and reads none of it (%d opens, %r)"
                % (len(opened), reads[:2]))
        for argv in ([enrichd, "-T", "-c", env.conf], [enrichd, "status", "-c", env.conf]):
            rc, out, lines = strace(argv)
            touched = [l for l in lines if key in l]
            r.check(not touched, "%s never opens the secret file (%r)"
                    % (" ".join(argv[1:2]), touched[:2]))


def main():
    harness.run_tests(test_tls_files, test_cleartext, test_no_secret_needed)


if __name__ == "__main__":
    main()
