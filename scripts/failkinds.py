#!/usr/bin/env python3
"""The list of docs/upstream.md's failure kinds, made from the one table
of how an upstream call ends (ENR_UP_FAILS in src/base/upfail.h): a row
per kind with what it means, whether the breaker hears of it, the pause
it stands for and whether its records count as degraded.

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
                 r'((?:"(?:[^"\\]|\\.)*"\s*)+)\)')


def rows(path=TABLE):
    with open(path, encoding="utf-8") as fh:
        text = fh.read().replace("\\\n", " ")
    body = text.split("#define ENR_UP_FAILS_WITH(X, A)", 1)[1].split("\n", 1)[0]
    out = []
    for m in ROW.finditer(body):
        help_text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(7)))
        out.append({"word": m.group(3), "pause": int(m.group(4)), "breaker": m.group(5) == "1",
                    "degraded": m.group(6) == "1", "help": help_text})
    if len(out) != body.count("X(A,"):
        sys.exit("%s: %d rows of ENR_UP_FAILS, %d read" % (path, body.count("X(A,"), len(out)))
    return out


def listing(path=TABLE):
    lines = ["| kind | when | the breaker | the source's pause | records |",
             "|---|---|---|---|---|"]
    for r in rows(path):
        lines.append("| `%s` | %s | %s | %s | %s |" % (
            r["word"], r["help"], "counts it" if r["breaker"] else "not told",
            "`why=\"%s\"` (rank %d)" % (r["word"], r["pause"]) if r["pause"] else "-",
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
