#!/usr/bin/env python3
"""Prints the include graph of src/ from its #include "..." lines, one
module (x.c with x.h) per line with the modules it includes, in an order
where each module comes after everything it includes; then the same graph
between the folders of src/ (the layers).  Exits 1 and names the modules
or the folders when the arrows go round (a cycle): a layer may use the
layers below it, never one above.

    python3 scripts/incgraph.py [--dot] [SRC_DIR]
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(src):
    edges = {}
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)
            mod = rel[:-2]
            with open(path, encoding="utf-8", errors="replace") as fh:
                incs = INCLUDE.findall(fh.read())
            deps = edges.setdefault(mod, set())
            for inc in incs:
                if not inc.endswith(".h"):
                    continue  # a generated .inc is part of the file that includes it
                dep = inc[:-2]
                if dep != mod and (os.path.exists(os.path.join(src, inc))):
                    deps.add(dep)
    return edges


def order(edges):
    """Topological order (dependencies first), or (None, cycle)."""
    done, onpath, out = set(), [], []

    def visit(n):
        if n in done:
            return None
        if n in onpath:
            return onpath[onpath.index(n):] + [n]
        onpath.append(n)
        for d in sorted(edges.get(n, ())):
            cyc = visit(d)
            if cyc:
                return cyc
        onpath.pop()
        done.add(n)
        out.append(n)
        return None

    for n in sorted(edges):
        cyc = visit(n)
        if cyc:
            return None, cyc
    return out, None


def main(argv):
    dot = "--dot" in argv
    args = [a for a in argv if a != "--dot"]
    src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    edges = graph(src)
    seq, cyc = order(edges)
    if cyc:
        print("cycle: " + " -> ".join(cyc))
        return 1
    layers = {}
    for n, deps in edges.items():
        ln = os.path.dirname(n) or "."
        ls = layers.setdefault(ln, set())
        ls.update(os.path.dirname(d) or "." for d in deps if (os.path.dirname(d) or ".") != ln)
    lseq, lcyc = order(layers)
    if lcyc:
        print("layer cycle: " + " -> ".join(lcyc))
        for n in sorted(edges):
            for d in sorted(edges[n]):
                if (os.path.dirname(n) or ".", os.path.dirname(d) or ".") in zip(lcyc, lcyc[1:]):
                    print("  %s -> %s" % (n, d))
        return 1
    if dot:
        print("digraph src {")
        for n in seq:
            for d in sorted(edges[n]):
                print('  "%s" -> "%s";' % (n, d))
        print("}")
    else:
        for n in seq:
            print("%-20s -> %s" % (n, " ".join(sorted(edges[n])) or "(nothing)"))
        print("%d modules, %d arrows, no cycle" % (len(seq), sum(len(v) for v in edges.values())))
        for n in lseq:
            print("%-20s -> %s" % (n + "/", " ".join(d + "/" for d in sorted(layers[n])) or "(nothing)"))
        print("%d layers, arrows one way" % len(lseq))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
