#!/usr/bin/env python3
"""test_man_pages.py: the man pages cannot drift from the code.

enrichd.conf(5) is regenerated from conf/enrichd.conf, and every key of
the built-in configuration (enr_config_default_text and the
enr_config_keys[] table in src/base/conftable.c) must be in
conf/enrichd.conf with the same default and in the page; every option
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

ROOT = harness.ROOT
ENRICHD = os.path.join(harness.build_dir(), "enrichd")
PAGES = ["enrichd.8", "enrich.1", "enrich-replay.1"]  # plus the generated enrichd.conf.5


def builtin_defaults():
    """key -> value from enr_config_default_text, and the enr_config_keys[] names."""
    src = open(os.path.join(ROOT, "src", "base", "conftable.c")).read()
    m = re.search(r"enr_config_default_text\[\]\s*=\s*((?:\s*\"(?:[^\"\\]|\\.)*\")+)\s*;", src)
    text = "".join(re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1))).replace("\\n", "\n")
    defaults = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if "=" in line:
            k, v = line.split("=", 1)
            defaults[k.strip()] = v.strip()
    table = re.search(r"const enr_config_key enr_config_keys\[\]\s*=\s*\{(.*?)\n\};", src, re.S).group(1)
    names = re.findall(r"\{\"([a-z0-9_]+)\",", table)
    return defaults, names


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
    r.check(len(names) >= 30 and set(names) == set(defaults),
            "enr_config_keys[] and enr_config_default_text name the same keys: only in one: %s"
            % sorted(set(names) ^ set(defaults)))
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
