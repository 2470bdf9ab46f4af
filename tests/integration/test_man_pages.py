#!/usr/bin/env python3
"""test_man_pages.py: the man pages cannot drift from the code.

enrichd.conf(5) is regenerated from conf/enrichd.conf, and every key of
the built-in configuration (its rows, src/base/confkeys.inc, the ones
`enrichd -T` prints) must be in conf/enrichd.conf with the same default
and in the page, and no other key; every option
of `enrichd -h` must be in enrichd(8).  All four pages must be
lint-clean: `groff -ww -z -man` and `man --warnings` print nothing."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

sys.path.insert(0, os.path.join(harness.ROOT, "scripts"))
import confkeys  # noqa: E402

ROOT = harness.ROOT
ENRICHD = os.path.join(harness.build_dir(), "enrichd")
PAGES = ["enrichd.8", "enrich.1", "enrich-replay.1"]  # plus the generated enrichd.conf.5


def builtin_defaults():
    """key -> default from the keys' rows (src/base/confkeys.inc), and
    their names in order; the names are checked against what the daemon
    itself prints (-T), so the rows read here are the ones it was built with."""
    rows = confkeys.rows()
    return dict((k["name"], k["default"]) for k in rows), [k["name"] for k in rows]


def daemon_keys():
    """The keys `enrichd -T` prints, in its order (each once)."""
    out = subprocess.run([ENRICHD, "-T"], capture_output=True, text=True, check=True).stdout
    names = []
    for k in re.findall(r"^([a-z0-9_]+) =", out, re.M):
        if k not in names:
            names.append(k)
    return names


def shipped_conf():
    conf = {}
    for line in open(os.path.join(ROOT, "conf", "enrichd.conf")):
        s = line.strip()
        if s and not s.startswith("#") and "=" in s:
            k, v = s.split("=", 1)
            conf[k.strip()] = v.strip()
    return conf


def generate(d):
    page = os.path.join(d, "enrichd.conf.5")
    with open(page, "w") as f:
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen-conf-man.py"),
                        os.path.join(ROOT, "conf", "enrichd.conf")], stdout=f, check=True)
    return page


def test_conf_page_has_every_key(r):
    defaults, names = builtin_defaults()
    conf = shipped_conf()
    known = daemon_keys()
    r.check(len(names) >= 30 and names == known,
            "the rows of confkeys.inc are the keys enrichd -T prints, in its order: only in "
            "one: %s" % sorted(set(names) ^ set(known)))
    missing = [k for k in names if k not in conf]
    r.check(not missing, "every built-in key in conf/enrichd.conf; missing: %s" % missing)
    differ = [(k, defaults[k], conf[k]) for k in defaults if k in conf and defaults[k] != conf[k]]
    r.check(not differ, "conf/enrichd.conf has the built-in defaults; differ: %s" % differ)
    extra = [k for k in conf if k not in names]
    r.check(not extra, "conf/enrichd.conf has no key the daemon does not know: %s" % extra)
    d = tempfile.mkdtemp(prefix="man-")
    try:
        text = open(generate(d)).read()
        documented = set(re.findall(r"^\\fB([a-z0-9_]+)\\fR = ", text.replace("\\-", "-"), re.M))
        missing = [k for k in names if k not in documented]
        r.check(not missing, "every key in enrichd.conf(5); missing: %s" % missing)
        # The KEYS section: a line per row, saying what a HUP does with it.
        summary = text[text.index(".SH KEYS"):text.index(".SH FILES")].replace("\\-", "-")
        listed = re.findall(r"^\\fB([a-z0-9_]+)\\fR \(.*; ([^;]*)\)$", summary, re.M)
        hup = {"LIVE": "applied on HUP", "RESTART": "restart only",
               "IDENTITY": "applied on HUP, with a new, empty cache",
               "LAYOUT": "applied on HUP, with a new, empty cache"}
        want = [(k["name"], hup[k["reload"]]) for k in confkeys.rows()]
        r.check(listed == want, "enrichd.conf(5)'s KEYS lists every row with what a HUP does "
                "with it: differ %r" % sorted(set(listed) ^ set(want)))
        for k in names:
            if k in documented and defaults.get(k):
                want = "\\fB%s\\fR = %s" % (k, defaults[k].replace("-", "\\-"))
                if not r.check(want in text, "enrichd.conf(5) gives %s = %s" % (k, defaults[k])):
                    break
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_enrichd_page_has_every_option(r):
    usage = subprocess.run([ENRICHD, "-h"], capture_output=True, text=True).stdout
    opts = sorted(set(re.findall(r"^\s+(-[a-zA-Z])\b", usage, re.M)))
    page = open(os.path.join(ROOT, "man", "enrichd.8")).read().replace("\\-", "-")
    r.check(len(opts) >= 3, "enrichd -h lists its options: %s" % opts)
    for o in opts:
        r.check(re.search(r"\\fB%s\\fR|^\.B[RI]? %s\b" % (o, o), page, re.M) is not None,
                "enrichd(8) documents %s" % o)
    for word in ("SIGHUP", "SIGTERM", "EXIT STATUS", "FILES", "ENVIRONMENT", "status",
                 "ENRICHD_LOG_LEVEL", "JOURNAL_STREAM", "NOTIFY_SOCKET"):
        r.check(word in page, "enrichd(8) mentions %s" % word)


def test_lint(r):
    if shutil.which("groff") is None or shutil.which("man") is None:
        r.check(False, "groff and man are installed (scripts/deps.sh test)")
        return
    d = tempfile.mkdtemp(prefix="man-")
    try:
        pages = [os.path.join(ROOT, "man", p) for p in PAGES] + [generate(d)]
        for p in pages:
            cp = subprocess.run(["groff", "-ww", "-z", "-man", p], capture_output=True, text=True)
            r.check(cp.returncode == 0 and cp.stderr == "",
                    "groff -ww clean on %s: %s" % (os.path.basename(p), cp.stderr.strip()))
            cp = subprocess.run(["man", "--warnings", "-l", p], capture_output=True, text=True,
                                env=dict(os.environ, MANWIDTH="80"))
            r.check(cp.returncode == 0 and cp.stderr == "" and "NAME" in cp.stdout,
                    "man --warnings clean on %s: %s" % (os.path.basename(p), cp.stderr.strip()))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    harness.run_tests(test_conf_page_has_every_key, test_enrichd_page_has_every_option, test_lint)
