#!/usr/bin/env python3
"""test_upstream_trust.py: which CAs enrichd trusts for an HTTPS provider,
and what trusting them costs.

The system's store is played by a directory of the test's own bind-mounted
on /etc/ssl in a private mount namespace (unshare -m), so the host's store
is untouched: its certs/ holds libcurl's default bundle (the host's own
certificates, with or without the test's CA added) and the CA directory
(the test's CA under its hash name, or not).  The provider is
tests/integration/tls_fixture.py's (nginx as TLS terminator, a server
certificate from the test's CA).

  (a) upstream_ca_file unset: the system's store is trusted, the provider
      enriches every record
  (b) upstream_ca_file set to another CA: that file alone is trusted, not
      the system's store beside it (which trusts the provider both ways,
      bundle and directory): every record degraded, counted tls, the log
      saying the certificate is not trusted
  (c) the store read once per worker: the system's bundle (the host's 140
      or so certificates, the provider's CA not among them) opened once
      by a worker through handshakes that each fail (inotify counts the
      opens); libcurl reads it again for every handshake when it also has
      a CA directory (Debian's build does), 30 ms of CPU each
  (d) no bundle, the directory alone: still trusted (libcurl refuses every
      handshake when its default file is missing, directory or not)
  (e) an upstream_ca_file that holds no certificate: refused as tls, the
      log naming the file
  (f) -t warns, naming upstream_ca_file, when an https source would trust
      a system without a CA store (no bundle, an empty directory), and
      only then
"""
import ctypes
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import tls_fixture  # noqa: E402
from tls_fixture import batch  # noqa: E402
from harness import degraded, fake_poster, local_poster  # noqa: E402

SSL_DIR = "/etc/ssl"
NS_FLAG = "ENR_TRUST_NS"
# How a call ends is checked, not how fast: deadlines no handshake
# outlasts.  And one worker throughout (a sanitizer build's passes
# rss_soft_mb): a second would read the store again.
PATIENT = ("queue_timeout_ms = 10000\nrequest_timeout_ms = 10000\n"
           "upstream_timeout_ms = 5000\nupstream_connect_timeout_ms = 5000\n"
           "rss_soft_mb = 0\nrss_hard_mb = 0\n")
BATCHES = 3
IN_OPEN = 0x20
IN_CLOSE_NOWRITE = 0x10


def bundle_path():
    """libcurl's default CA bundle, as it was built."""
    out = subprocess.run(["curl-config", "--ca"], capture_output=True, text=True, timeout=30)
    path = out.stdout.strip()
    if out.returncode != 0 or not path.startswith(SSL_DIR + "/"):
        raise RuntimeError("libcurl's default bundle is not under %s: %r" % (SSL_DIR, path))
    return path


class Store:
    """The system's store, played: SSL_DIR replaced by a directory whose
    certs/ the test fills as each case needs."""

    def __init__(self, root):
        self.bundle = bundle_path()
        with open(self.bundle) as f:
            self.host_bundle = f.read()
        self.dir = os.path.join(root, "ssl")
        os.makedirs(os.path.join(self.dir, "certs"))
        for name in ("openssl.cnf",):  # what OpenSSL reads at start
            if os.path.exists(os.path.join(SSL_DIR, name)):
                shutil.copy(os.path.join(SSL_DIR, name), self.dir)
        subprocess.run(["mount", "--bind", self.dir, SSL_DIR], check=True, timeout=30)

    def fill(self, bundle, hashed):
        """bundle: the PEM text of the default bundle (None: no file);
        hashed: CA files to put in the directory under their hash names."""
        certs = os.path.join(SSL_DIR, "certs")
        for name in os.listdir(certs):
            os.unlink(os.path.join(certs, name))
        if bundle is not None:
            with open(self.bundle, "w") as f:
                f.write(bundle)
        for ca in hashed:
            h = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", ca],
                               capture_output=True, text=True, timeout=30, check=True)
            shutil.copy(ca, os.path.join(certs, h.stdout.strip() + ".0"))


def trusting(store, ca):
    """The system's store as a host with ca installed has it: in the bundle
    and, under its hash name, in the directory."""
    with open(ca) as f:
        store.fill(store.host_bundle + f.read(), [ca])


def check_trusted(r, prov, tag, what):
    """The provider trusted: every record of run_batches() enriched."""
    n, total, enriched, deg, _, kinds, said = run_batches(prov, tag, "")
    r.check(total == n and enriched == n and deg == 0,
            "%s: trusted, every record enriched: %d of %d answered, %d enriched, %d degraded; "
            "%s %s" % (what, total, n, enriched, deg, kinds, said[:1]))


class Opens:
    """inotify: how many times a file was opened since start.  Closes are
    watched too: inotify merges an event into the same one still unread
    before it, so opens alone would count one for any number."""

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, path.encode(),
                                                    IN_OPEN | IN_CLOSE_NOWRITE) < 0:
            raise OSError(ctypes.get_errno(), "inotify on " + path)
        self.count = 0

    def read(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.count
            i = 0
            while i + 16 <= len(data):
                _, mask, _, n = struct.unpack_from("iIII", data, i)
                if mask & IN_OPEN:
                    self.count += 1
                i += 16 + n

    def close(self):
        os.close(self.fd)


def other_ca(d):
    """A CA that signed nothing the provider serves."""
    subprocess.run(["openssl", "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", "other.key", "-out",
                    "other.pem", "-days", "2", "-subj", "/CN=enrichd test other CA"],
                   cwd=d, capture_output=True, timeout=30, check=True)
    return os.path.join(d, "other.pem")


def run_batches(prov, tag, extra):
    """BATCHES batches to an enrichd of one worker; (records, enriched,
    degraded, kept their local poster, failure kinds, TLS log events)."""
    with harness.Env(name="up-trust-" + tag) as env:
        env.start_enrichd(PATIENT + "workers = 1\nupstream_url = %s\n%s"
                          % (prov.url("https"), extra))
        env.start_nginx()
        for pid in env.wait_workers(1):
            harness.wait_worker_listening(pid)
        total = enriched = deg = local = 0
        for i in range(BATCHES):
            recs = batch(tag, i, 9)
            st, h, lines = harness.post(env, recs)
            if st != 200:
                continue
            total += len(recs)
            deg += degraded(h)
            enriched += sum(1 for rec, l in zip(recs, lines)
                            if l["poster"] == fake_poster(rec["provider"], rec["id"]))
            local += sum(1 for rec, l in zip(recs, lines)
                         if l["poster"] == local_poster(rec["provider"], rec["id"].lower()))
        kinds = harness.fail_kinds(env, ("timeout", "connect", "tls"))
        said = [e.get("reason", "") for e in env.log_events("upstream TLS failed")]
    return BATCHES * 9, total, enriched, deg, local, kinds, said


def test_system_store(r, prov, store):
    """(a) unset: the system's store."""
    trusting(store, prov.pki.ca)
    check_trusted(r, prov, "system", "(a) upstream_ca_file unset, the system's store")


def test_ca_file_alone(r, prov, store, other):
    """(b) set: that file, and not the system's store beside it."""
    trusting(store, prov.pki.ca)
    n, total, enriched, deg, local, kinds, said = run_batches(
        prov, "alone", "upstream_ca_file = %s\n" % other)
    r.check(total == n and enriched == 0 and deg == n and local == n,
            "(b) upstream_ca_file of another CA: the system's store not trusted beside it, "
            "every record degraded with its local values: %d of %d answered, %d enriched, "
            "%d degraded, %d local" % (total, n, enriched, deg, local))
    r.check(kinds["tls"] > 0 and kinds["connect"] == kinds["timeout"] == 0,
            "(b) counted as tls: %s" % kinds)
    r.check(any("certificate not trusted" in s for s in said),
            "(b) the log says the certificate is not trusted: %s" % said[:1])


def test_read_once(r, prov, store):
    """(c) the system's bundle read once per worker."""
    store.fill(store.host_bundle, [])
    opens = Opens(store.bundle)
    try:
        n, total, enriched, deg, _, kinds, said = run_batches(prov, "once", "")
        count = opens.read()
    finally:
        opens.close()
    print("(c) %d handshakes refused, the bundle (%d certificates) opened %d times"
          % (kinds["tls"], store.host_bundle.count("BEGIN CERTIFICATE"), count))
    r.check(total == n and enriched == 0 and kinds["tls"] >= 2 * BATCHES - 1,
            "(c) the provider's CA not in the store: every call refused as tls: "
            "%d enriched, %s" % (enriched, kinds))
    r.check(count == 1, "(c) the bundle read once by the one worker through %d refused "
            "handshakes: opened %d times" % (kinds["tls"], count))


def test_directory_only(r, prov, store):
    """(d) no bundle file, the CA directory alone."""
    store.fill(None, [prov.pki.ca])
    check_trusted(r, prov, "dir", "(d) no bundle, the CA directory alone")


def test_ca_file_empty(r, prov, store, root):
    """(e) a CA file without a certificate."""
    trusting(store, prov.pki.ca)
    empty = os.path.join(root, "no-certificate.pem")
    with open(empty, "w") as f:
        f.write("# the CAs go here\n")
    n, total, enriched, deg, local, kinds, said = run_batches(
        prov, "empty", "upstream_ca_file = %s\n" % empty)
    r.check(total == n and enriched == 0 and deg == n and kinds["tls"] > 0,
            "(e) a CA file without a certificate: every record degraded, counted tls: "
            "%d of %d answered, %d enriched, %d degraded; %s" % (total, n, enriched, deg, kinds))
    r.check(any(empty in s for s in said), "(e) the log names the file: %s" % said[:1])


def check_warns(prov, extra):
    """enrichd -t's exit status and the lines that warn of the CA store."""
    with harness.Env(name="up-trust-t") as env:
        conf = env.write_config("upstream_url = %s\n%s" % (prov.url("https"), extra))
        p = subprocess.run([os.path.join(env.build, "enrichd"), "-t", "-c", conf],
                           capture_output=True, text=True, timeout=60)
    return p.returncode, [l for l in p.stderr.splitlines() if "CA store" in l]


def test_check_warns(r, prov, store, other):
    """(f) -t on a system without a CA store."""
    with open(prov.pki.ca) as f:
        pem = f.read()
    cases = [  # (what, bundle, hashed, extra, warned)
        ("no bundle, an empty directory", None, [], "", True),
        ("the bundle", store.host_bundle + pem, [], "", False),
        ("the directory alone", None, [prov.pki.ca], "", False),
        ("no store, upstream_ca_file set", None, [], "upstream_ca_file = %s\n" % other, False),
    ]
    for what, bundle, hashed, extra, warned in cases:
        store.fill(bundle, hashed)
        rc, lines = check_warns(prov, extra)
        if warned and lines:
            print("(f) %s: %s" % (what, lines[0]))
        ok = rc == 0 and (len(lines) == 1 and "upstream_ca_file" in lines[0]
                          and "ca-certificates" in lines[0] if warned else not lines)
        r.check(ok, "(f) -t with %s: %s, exit %d: %s"
                % (what, "warns naming upstream_ca_file" if warned else "no warning", rc, lines))


def main():
    r = harness.Results()
    root = tempfile.mkdtemp(prefix="enr-trust-")
    os.chmod(root, 0o755)
    try:
        store = Store(root)
        other = other_ca(root)
        with tls_fixture.Provider() as prov:
            r.run(test_system_store, prov, store)
            r.run(test_ca_file_alone, prov, store, other)
            r.run(test_read_once, prov, store)
            r.run(test_directory_only, prov, store)
            r.run(test_ca_file_empty, prov, store, root)
            r.run(test_check_warns, prov, store, other)
    finally:
        subprocess.run(["umount", SSL_DIR], timeout=30)
        harness.discard_dir(root)
    r.done()


if __name__ == "__main__":
    if os.environ.get(NS_FLAG) != "1":
        # A private mount table: the played store never touches the host's.
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            # Not a pass: what enrichd trusts would go unchecked.
            print("FAIL: needs root and unshare for a private /etc/ssl")
            print("0 passed, 1 failed")
            sys.exit(1)
        os.execvpe("unshare", ["unshare", "-m", "--propagation", "private",
                               sys.executable, os.path.abspath(__file__)],
                   dict(os.environ, **{NS_FLAG: "1"}))
    main()
