#!/usr/bin/env python3
"""The list of docs/upstream.md's failure kinds, made from the one table
of how an upstream call ends (ENR_UP_FAILS in src/base/upfail.h): a row
per kind with what it means, whether the breaker hears of it, the pause
it stands for and how that ends, and whether its records count as
degraded.

    python3 scripts/failkinds.py               prints the list
    python3 scripts/failkinds.py --check FILE  (make lint) FILE's part
        between the markers is the list; exits 1 when it is not
    python3 scripts/failkinds.py --write FILE  rewrites that part
"""
import os
import re
import sys

import docsection

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TABLE = os.path.join(ROOT, "src", "base", "upfail.h")
BEGIN = "<!-- made by scripts/failkinds.py from src/base/upfail.h: edit the table, not this -->"
END = "<!-- end of scripts/failkinds.py -->"
ROW = re.compile(r'X\(A,\s*(\w+),\s*(\w+),\s*"([^"]*)",\s*(\d+),\s*([01]),\s*([01]),\s*'
                 r'(\w+),\s*(\w+),\s*(\w+),\s*(?:NULL|"[^"]*"),\s*'
                 r'((?:"(?:[^"\\]|\\.)*"\s*)+)\)')
DEFINE = re.compile(r'^#define\s+(\w+)\s+(\d+)\b', re.M)
# How a pause of each end rule (enum enr_up_end) ends, for operators.
ENDS = {"RATE": "until the provider's rate limit allows (its reset header, else Retry-After; "
                "neither: %d s)",
        "DAY": "until the API's next day",
        "RELOAD": "until a reload (HUP), %d s at most"}


def rows(path=TABLE):
    with open(path, encoding="utf-8") as fh:
        text = fh.read().replace("\\\n", " ")
    consts = dict((k, int(v)) for k, v in DEFINE.findall(text))
    body = text.split("#define ENR_UP_FAILS_WITH(X, A)", 1)[1].split("\n", 1)[0]
    out = []
    for m in ROW.finditer(body):
        help_text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(10)))
        pause_s = consts.get(m.group(8), int(m.group(8)) if m.group(8).isdigit() else None)
        if m.group(7) != "NONE" and (m.group(7) not in ENDS or pause_s is None):
            sys.exit("%s: %s: ends %s, pause_s %s unknown" % (path, m.group(3), m.group(7),
                                                            m.group(8)))
        out.append({"word": m.group(3), "pause": int(m.group(4)), "breaker": m.group(5) == "1",
                    "degraded": m.group(6) == "1", "ends": m.group(7), "pause_s": pause_s,
                    "help": help_text})
    if len(out) != body.count("X(A,"):
        sys.exit("%s: %d rows of ENR_UP_FAILS, %d read" % (path, body.count("X(A,"), len(out)))
    return out


def pause_text(r):
    if not r["pause"]:
        return "-"
    ends = ENDS[r["ends"]]
    return "`why=\"%s\"` (rank %d), %s" % (r["word"], r["pause"],
                                           ends % r["pause_s"] if "%d" in ends else ends)


def listing(path=TABLE):
    lines = ["| kind | when | the breaker | the source's pause | records |",
             "|---|---|---|---|---|"]
    for r in rows(path):
        lines.append("| `%s` | %s | %s | %s | %s |" % (
            r["word"], r["help"], "counts it" if r["breaker"] else "not told",
            pause_text(r),
            "degraded" if r["degraded"] else "not degraded"))
    return "\n".join(lines) + "\n"


def doc(path, write):
    return docsection.sync(path, BEGIN, END, "\n" + listing(), write,
                           "the failure kinds differ from src/base/upfail.h; "
                           "python3 scripts/failkinds.py --write %s" % path)


def main(argv):
    if len(rows()) == 0:
        print("%s: no row of ENR_UP_FAILS read" % TABLE)
        return 1
    for flag in ("--check", "--write"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return doc(argv[argv.index(flag) + 1], flag == "--write")
    sys.stdout.write(listing())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
