#!/usr/bin/env python3
"""Every pointer the prose gives exists: the repository paths named in
docs/*.md, README.md, the Makefile, the comments of src/ and the text of
tests/ and scripts/ (a file or a
folder of the repository, a glob that matches one, or a file the
Makefile makes), the functions named as `name()` in backquotes in the
docs and as name() in src's comments, and the project's own ENR_/enr_
names anywhere in them, each defined in the code (comments aside).
Prints one line per dangling pointer and exits 1 when there is one.

    python3 scripts/check-refs.py [ROOT]
"""
import glob
import os
import re
import subprocess
import sys

C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
IDENT = re.compile(r"[A-Za-z_]\w*")
# A name in prose that stands for many (src/LAYER/*.c, docs/NAME.md):
# matched as a glob when no file has that very name.
PLACEHOLDER = re.compile(r"(^|/)[A-Z][A-Z_]+(/|\.|$)")
CODE_EXT = (".c", ".h", ".inc", ".py", ".sh", ".mjs")


def tracked(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    if out.returncode != 0:  # not a checkout: every file below root
        return sorted(os.path.relpath(os.path.join(d, f), root)
                      for d, _, fs in os.walk(root) for f in fs)
    return out.stdout.split()


def code_text(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    return C_COMMENT.sub(" ", text) if path.endswith((".c", ".h", ".inc")) else text


def prose(root, path):
    """(line number, text) of what path says in words: all of a Markdown
    file or the Makefile, the comments of a C file."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    if not path.endswith((".c", ".h")):
        return [(i + 1, l) for i, l in enumerate(text.split("\n"))]
    out = []
    for m in C_COMMENT.finditer(text):
        first = text.count("\n", 0, m.start()) + 1
        out += [(first + i, l) for i, l in enumerate(m.group().split("\n"))]
    return out


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = tracked(root)
    known = set(files)
    for f in files:
        while "/" in f:
            f = f.rsplit("/", 1)[0]
            known.add(f)
    with open(os.path.join(root, "Makefile")) as f:
        known.update(re.findall(r"^([\w./-]+):", f.read(), re.M))  # files it makes
    tops = sorted({f.split("/")[0] for f in files if "/" in f})
    path_re = re.compile(r"(?<![\w/.~$-])((?:%s)/[\w.*+/-]*[\w*/])" % "|".join(map(re.escape, tops)))

    code = "\n".join(code_text(root, f) for f in files if f.endswith(CODE_EXT)
                     or f.startswith(("scripts/", "conf/", "nginx/")))
    idents = set(IDENT.findall(code))
    pasted = tuple(set(re.findall(r"(\w+)##", code)))  # X-macro names: ENR_API_##name

    def defined(name):
        return name in idents or (pasted and name.startswith(pasted))

    def exists(p):
        p = p.rstrip("/")
        if p in known:
            return True
        p = PLACEHOLDER.sub(lambda m: m.group(1) + "*" + m.group(2), p)
        return any(c in p for c in "*?[") and bool(glob.glob(os.path.join(root, p)))

    sources = [f for f in files if (f.startswith("docs/") and f.endswith(".md"))
               or f in ("README.md", "Makefile")
               or (f.startswith("src/") and f.endswith((".c", ".h")))]
    # The tests' and scripts' own text: paths only (their code names
    # functions of Python's and the shell's).
    scripts = [f for f in files if f.startswith(("tests/", "scripts/"))
               and (f.endswith((".py", ".sh", ".c", ".h", ".mjs", ".md")) or "." not in os.path.basename(f))]
    bad = []
    for f in sources:
        md = f.endswith(".md")
        for n, line in prose(root, f):
            for m in path_re.finditer(line):
                p = m.group(1).rstrip(".")
                if not exists(p):
                    bad.append("%s:%d: %s does not exist" % (f, n, p))
            fn = r"`([A-Za-z_]\w*)\(\)`" if md else r"\b([A-Za-z_]\w*)\(\)"
            for m in re.finditer(fn, line):
                if not defined(m.group(1)):
                    bad.append("%s:%d: %s() is defined nowhere" % (f, n, m.group(1)))
            for m in re.finditer(r"\b((?:enr|ENR)_\w*[A-Za-z0-9])\b", line):
                if not defined(m.group(1)):
                    bad.append("%s:%d: %s is defined nowhere" % (f, n, m.group(1)))
    for f in scripts:
        for n, line in prose(root, f):
            for m in path_re.finditer(line):
                p = m.group(1).rstrip(".")
                if not exists(p):
                    bad.append("%s:%d: %s does not exist" % (f, n, p))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
