#!/usr/bin/env python3
"""confkeys.py: the configuration keys' rows (src/base/confkeys.inc) for
the scripts and tests that need them: gen-conf-man.py's summary, and the
tests that hold conf/enrichd.conf, enrichd.conf(5), the installed file and
the bad-config corpus to the daemon's keys.

Each row is one line, K(name, TYPE, "default", lo, hi, ON_HUP, "help") or
KF(name, field, ...); a line that starts like a row and does not read as
one stops the reader, so a row cannot be skipped unnoticed.  A template
row, KS(suffix, TYPE, column, lo, hi, ON_HUP, "help") or
KSECRET(ON_HUP, "help", "help"), is one key per API of the list of
sources (src/base/sources.h), as conftable.c makes them.

usage: confkeys.py [confkeys.inc]   prints the rows, tab-separated
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INC = os.path.join(ROOT, "src", "base", "confkeys.inc")
SOURCES = os.path.join(ROOT, "src", "base", "sources.h")

_STR = r'"((?:[^"\\]|\\.)*)"'
_ROW = re.compile(r"^(K|KF)\((\w+),\s*(?:(\w+),\s*)?([A-Z_]+),\s*" + _STR +
                  r",\s*([^,]+?),\s*([^,]+?),\s*(LIVE|RESTART|IDENTITY|LAYOUT),\s*" + _STR + r"\)$")


def _number(expr):
    """A bound as written in C (50000, 0777, 1ULL << 30) as an int."""
    m = re.fullmatch(r"(\d+)(?:ULL)?(?:\s*<<\s*(\d+))?", expr.strip())
    if not m:
        raise ValueError("confkeys: cannot read the bound %r" % expr)
    n = int(m.group(1), 8 if m.group(1).startswith("0") and m.group(1) != "0" else 10)
    return n << int(m.group(2)) if m.group(2) else n


_SRC = re.compile(r"^X\(ctx, (\w+), (\w+), (\w+), (SECRET|NOSECRET), (\w+), " + _STR + r", " +
                  _STR + r", " + _STR + r", " + _STR + r", " + _STR + r", " + _STR +
                  r"\) \\$")
_KS = re.compile(r"^KS\((\w+),\s*([A-Z_]+),\s*(url|ttl|quota),\s*([^,]+?),\s*([^,]+?),\s*"
                 r"(LIVE|RESTART|IDENTITY|LAYOUT),\s*" + _STR + r"\)$")
_KSECRET = re.compile(r"^KSECRET\((LIVE|RESTART|IDENTITY|LAYOUT),\s*" + _STR + r",\s*" + _STR +
                      r"\)$")


def sources(path=SOURCES):
    """The APIs of ENR_SOURCE_LIST in order, each a dict: name, prov,
    secret (bool), word, noun, url, ttl, quota, title, units."""
    out, inside = [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            # ENR_SOURCE_ROWS's lines alone: a test build's row (ENR_SOURCE_EXTRA) is not the
            # product's.
            if line.startswith("#define ENR_SOURCE_ROWS("):
                inside = True
                continue
            if not inside or not line.startswith("X(ctx,"):
                inside = inside and line.endswith("\\")
                continue
            m = _SRC.match(line)
            if m is None:
                raise ValueError("%s:%d: not a source: %s" % (path, n, line))
            g = m.groups()
            out.append({"name": g[1], "prov": g[2], "secret": g[3] == "SECRET", "word": g[4],
                        "noun": g[5], "url": g[6], "ttl": g[7], "quota": g[8], "title": g[9],
                        "units": g[10]})
    return out


def _expand(line, path, n):
    """A template row's keys, one per source (KS) or two per source with
    a secret (KSECRET), as conftable.c makes them."""
    m, out = _KS.match(line), []
    if m is not None:
        suffix, typ, col, lo, hi, reload, help_ = m.groups()
        for s in sources():
            out.append({"name": "%s_%s" % (s["name"], suffix), "type": typ, "default": s[col],
                        "lo": _number(lo), "hi": _number(hi), "reload": reload,
                        "help": help_.format(**s)})
        return out
    m = _KSECRET.match(line)
    if m is None:
        raise ValueError("%s:%d: not a row: %s" % (path, n, line))
    reload, hfile, hcred = m.groups()
    for s in sources():
        if s["secret"]:
            stem = "%s_%s" % (s["name"], s["word"])
            for suffix, typ, h in (("file", "PATH", hfile), ("credential", "STR", hcred)):
                out.append({"name": "%s_%s" % (stem, suffix), "type": typ, "default": "", "lo": 0,
                            "hi": 0, "reload": reload, "help": h.format(**s)})
    return out


def rows(path=INC):
    """The rows in order, each a dict: name, field, type, default, lo, hi,
    reload (LIVE, RESTART, IDENTITY or LAYOUT), help."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if re.match(r"^KS(ECRET)?\(", line):
                for r in _expand(line, path, n):
                    r["field"] = r["name"]
                    out.append(r)
                continue
            if not re.match(r"^KF?\(", line):
                continue
            m = _ROW.match(line)
            if m is None or (m.group(1) == "KF") != (m.group(3) is not None):
                raise ValueError("%s:%d: not a row: %s" % (path, n, line))
            unq = lambda s: s.replace('\\"', '"').replace("\\\\", "\\")
            out.append({"name": m.group(2), "field": m.group(3) or m.group(2),
                        "type": m.group(4), "default": unq(m.group(5)),
                        "lo": _number(m.group(6)), "hi": _number(m.group(7)),
                        "reload": m.group(8), "help": unq(m.group(9))})
    return out


def defaults(path=INC):
    """key -> its built-in default, as a file would say it."""
    return dict((r["name"], r["default"]) for r in rows(path))


if __name__ == "__main__":
    for r in rows(*sys.argv[1:]):
        print("\t".join(str(r[k]) for k in
                        ("name", "type", "default", "lo", "hi", "reload", "help")))
