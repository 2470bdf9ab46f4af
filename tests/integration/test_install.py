#!/usr/bin/env python3
"""test_install.py: `make install` and `make uninstall` into a DESTDIR.

With PREFIX=/usr: the programs in /usr/sbin and /usr/bin, the
configuration in /etc/enrichd (the shipped file), the three units with
ExecStart= rewritten to the installed daemon, the nginx site in
sites-available only (disabled), the man pages gzip'd and readable by
man; with the default PREFIX the units name /usr/local/sbin.  uninstall
leaves nothing but directories, and keeps a configuration the operator
changed."""
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROOT = harness.ROOT
sys.path.insert(0, os.path.join(ROOT, "scripts"))
OPERATOR_KEYS = __import__("gen-conffile").OPERATOR_KEYS
import confkeys  # noqa: E402
BUILD = harness.build_dir()


def make(*args):
    # -o: install the programs as built (a sanitizer build stays one),
    # never remade here.
    keep = []
    for p in ("enrichd", "enrich", "enrich-replay"):
        keep += ["-o", os.path.join(BUILD, p)]
    return subprocess.run(["make", "--no-print-directory", "-C", ROOT, "B=" + BUILD] + keep +
                          list(args), capture_output=True, text=True)


def files(d):
    out = set()
    for dp, _, fs in os.walk(d):
        for f in fs:
            out.add(os.path.relpath(os.path.join(dp, f), d))
    return out


def check_conffile(r, path):
    """The installed file sets only the keys a host is set up with; every
    other built-in key is there once, commented out at its default."""
    text = open(path).read()
    defaults = confkeys.defaults()
    set_keys = [k for k in re.findall(r"^(\w+) =", text, re.M) if k != "include"]
    r.check(text.rstrip().endswith("\ninclude = /etc/enrichd/conf.d/*.conf"),
            "the conffile ends with an include of /etc/enrichd/conf.d/*.conf")
    r.check(os.path.isdir(os.path.join(os.path.dirname(path), "conf.d")), "conf.d is installed")
    commented = dict(re.findall(r"^# (\w+) =(.*)$", text, re.M))
    r.check(sorted(set_keys) == sorted(OPERATOR_KEYS),
            "the conffile sets only the operator's keys: %r" % set_keys)
    missing = [k for k in defaults if k not in set_keys and k not in commented]
    wrong = [(k, v.strip(), defaults[k]) for k, v in commented.items()
             if k in defaults and v.strip() != defaults[k]]
    r.check(len(defaults) >= 50 and not missing and not wrong,
            "every other key (%d) is there, commented at its built-in default: missing %r, "
            "wrong %r" % (len(defaults) - len(set_keys), missing, wrong[:3]))
    # Uncommenting a key is all a change takes: the file stays valid.
    with open(path + ".t", "w") as f:
        f.write(text.replace("# max_records = ", "max_records = "))
    cp = subprocess.run([os.path.join(BUILD, "enrichd"), "-t", "-c", path + ".t"],
                        capture_output=True, text=True)
    os.unlink(path + ".t")
    r.check(cp.returncode == 0, "a commented key uncommented is valid: %s" % cp.stderr.strip())


def check_cited_docs(r, d):
    """Every docs/NAME.md the man pages, the configuration, the units, the
    nginx sites and README.Debian cite is installed."""
    cited = set()
    srcs = [os.path.join(ROOT, "man", n) for n in os.listdir(os.path.join(ROOT, "man"))]
    srcs += [os.path.join(ROOT, "conf", "enrichd.conf"),
             os.path.join(ROOT, "scripts", "debian", "README.Debian"),
             os.path.join(ROOT, "nginx", "enrichd.conf"),
             os.path.join(ROOT, "nginx", "enrichd-cluster.conf")]
    srcs += [os.path.join(ROOT, "conf", "systemd", n)
             for n in os.listdir(os.path.join(ROOT, "conf", "systemd"))]
    for p in srcs:
        cited |= set(re.findall(r"docs/([a-z_-]+\.md)", open(p).read()))
    absent = [n for n in sorted(cited)
              if not os.path.exists(os.path.join(d, "usr/share/doc/enrichd/docs", n))]
    r.check(len(cited) >= 3 and not absent,
            "every cited doc installed (%s): missing %r" % (", ".join(sorted(cited)), absent))


def test_install_usr(r):
    d = tempfile.mkdtemp(prefix="install-")
    try:
        cp = make("install", "DESTDIR=" + d, "PREFIX=/usr", "UNITDIR=/lib/systemd/system")
        r.check(cp.returncode == 0, "make install PREFIX=/usr: %s" % cp.stderr[-400:])
        got = files(d)
        want = {"usr/sbin/enrichd", "usr/bin/enrich", "usr/bin/enrich-replay",
                "etc/enrichd/enrichd.conf", "etc/nginx/sites-available/enrichd",
                "lib/systemd/system/enrichd.socket", "lib/systemd/system/enrichd-status.socket",
                "lib/systemd/system/enrichd.service", "usr/share/man/man8/enrichd.8.gz",
                "usr/share/man/man5/enrichd.conf.5.gz", "usr/share/man/man1/enrich.1.gz",
                "usr/share/man/man1/enrich-replay.1.gz",
                "etc/nginx/sites-available/enrichd-cluster",
                "usr/share/doc/enrichd/examples/enrichd-alerts.yml",
                "usr/share/doc/enrichd/examples/prometheus.yml",
                "usr/share/doc/enrichd/examples/rolling-restart",
                "usr/share/doc/enrichd/README.md"}
        want |= {"usr/share/doc/enrichd/docs/" + n for n in os.listdir(os.path.join(ROOT, "docs"))}
        want |= {"etc/nginx/snippets/" + n for n in os.listdir(os.path.join(ROOT, "nginx", "snippets"))}
        r.check(got == want, "installed files: missing %s, extra %s" % (sorted(want - got),
                                                                       sorted(got - want)))
        r.check(not os.path.exists(os.path.join(d, "etc/nginx/sites-enabled")),
                "the nginx site is not enabled")
        unit = open(os.path.join(d, "lib/systemd/system/enrichd.service")).read()
        r.check("ExecStart=/usr/sbin/enrichd -c /etc/enrichd/enrichd.conf" in unit,
                "the unit runs the installed daemon")
        check_conffile(r, os.path.join(d, "etc/enrichd/enrichd.conf"))
        check_cited_docs(r, d)
        for f in ("usr/sbin/enrichd", "usr/bin/enrich"):
            r.check(os.stat(os.path.join(d, f)).st_mode & 0o777 == 0o755, "%s is 0755" % f)
        page = gzip.open(os.path.join(d, "usr/share/man/man8/enrichd.8.gz")).read()
        r.check(page.startswith(b".TH ENRICHD 8"), "enrichd.8.gz is the page, compressed")
        cp = subprocess.run([os.path.join(d, "usr/sbin/enrichd"), "-t", "-c",
                             os.path.join(d, "etc/enrichd/enrichd.conf")], capture_output=True,
                            text=True)
        r.check(cp.returncode == 0, "the installed daemon accepts the installed configuration: %s"
                % cp.stderr.strip())
        # An operator's change survives uninstall; everything else goes.
        with open(os.path.join(d, "etc/enrichd/enrichd.conf"), "a") as f:
            f.write("workers = 2\n")
        cp = make("uninstall", "DESTDIR=" + d, "PREFIX=/usr", "UNITDIR=/lib/systemd/system")
        r.check(cp.returncode == 0, "make uninstall: %s" % cp.stderr[-400:])
        r.check(files(d) == {"etc/enrichd/enrichd.conf"},
                "uninstall leaves only the changed configuration: %s" % sorted(files(d)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_install_default_prefix(r):
    d = tempfile.mkdtemp(prefix="install-")
    try:
        cp = make("install", "DESTDIR=" + d)
        r.check(cp.returncode == 0, "make install: %s" % cp.stderr[-400:])
        unit = os.path.join(d, "usr/local/lib/systemd/system/enrichd.service")
        text = open(unit).read() if os.path.exists(unit) else ""
        r.check("ExecStart=/usr/local/sbin/enrichd -c /etc/enrichd/enrichd.conf" in text
                and "/usr/sbin/" not in text, "PREFIX=/usr/local: the unit names /usr/local/sbin")
        r.check(os.path.exists(os.path.join(d, "usr/local/share/man/man8/enrichd.8.gz")),
                "man pages under /usr/local/share/man")
        cp = make("uninstall", "DESTDIR=" + d)
        r.check(cp.returncode == 0 and files(d) == set(),
                "uninstall removes all, the unchanged configuration too: %s" % sorted(files(d)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    harness.run_tests(test_install_usr, test_install_default_prefix)
