#!/usr/bin/env python3
"""Prints the include graph of src/ from its #include "..." lines, one
module (x.c with x.h) per line with the modules it includes, in an order
where each module comes after everything it includes; then the same graph
between the folders of src/ (the layers).  Exits 1 and names the modules
or the folders when the arrows go round (a cycle): a layer may use the
layers below it, never one above.

A call is an arrow too: a module whose .c calls a function defined in
x.c depends on x, whichever header declared it, so two files that call
each other through a shared header are seen as the cycle they are.

    python3 scripts/incgraph.py [--dot] [SRC_DIR]
    python3 scripts/incgraph.py --self-test   (make lint: the check sees
        a circle through a shared header)
    python3 scripts/incgraph.py --table       the map of docs/architecture.md:
        a row per module, by layer, with what it owns (the first sentence
        of the top comment of its .h, else its .c, to its first colon),
        then the counts and the graph between the layers
    python3 scripts/incgraph.py --check-doc FILE | --write-doc FILE
        (make lint: FILE's part between the markers is --table's output)
"""
import os
import re
import sys

import docsection

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


DECL = re.compile(r'^[A-Za-z_][^;#{}()]*?\b(enr_\w+)\s*\([^;{}]*\)\s*;', re.M)
DEFN = re.compile(r'^(?!static\b)[A-Za-z_][^;#{}()=]*?\b(enr_\w+)\s*\([^;{}]*\)\s*\{', re.M)
CALL = re.compile(r'\b(enr_\w+)\s*\(')

# Modules that are one module in several files, on purpose (a family
# that shares a private header): seen as one node.
FAMILIES = {"upstream/upsource": "upstream/upstream", "upstream/upstale": "upstream/upstream",
            "upstream/uprun": "upstream/upstream", "upstream/upanswer": "upstream/upstream",
            "upstream/upstore": "upstream/upstream",
            "upstream/api_time": "upstream/api", "upstream/upwarm": "upstream/upconn"}


def calls(src):
    """Arrows through a shared header: a header with no .c of its own
    that declares a function defined in x.c makes each module whose .c
    calls that function depend on x.  Two files that call each other
    through such a header (a state header both include) are then the
    cycle they are, though neither includes the other's header."""
    texts = {}
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith((".c", ".h")):
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    texts[os.path.relpath(os.path.join(root, f), src)] = fh.read()
    defined = {}
    for rel, text in texts.items():
        if rel.endswith(".c"):
            for name in DEFN.findall(text):
                defined.setdefault(name, rel[:-2])
    shared = set()
    for rel, text in texts.items():
        if rel.endswith(".h") and rel[:-2] + ".c" not in texts:
            shared.update(n for n in DECL.findall(text) if n in defined)
    out = {}
    for rel, text in texts.items():
        if not rel.endswith(".c"):
            continue
        deps = out.setdefault(rel[:-2], set())
        for name in set(CALL.findall(text)) & shared:
            if defined[name] != rel[:-2]:
                deps.add(defined[name])
    return out


def merged(edges, more):
    out = {}
    for g in (edges, more):
        for n, deps in g.items():
            m = FAMILIES.get(n, n)
            ds = (FAMILIES.get(d, d) for d in deps)
            out.setdefault(m, set()).update(d for d in ds if d != m)
    return out


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


def self_test():
    """Two files calling each other through a header of neither's name
    (as master.c and reload.c once did through master_state.h) must be a
    cycle; without the call back, none."""
    import tempfile
    files = {
        "p/a.h": "void enr_a(void);\n",
        "p/a.c": '#include "p/a.h"\n#include "p/b.h"\nvoid enr_a(void)\n{\n    enr_b();\n}\n'
        "int enr_a_spawn(void)\n{\n    return 0;\n}\n",
        "p/b.h": '#include "p/state.h"\nvoid enr_b(void);\n',
        "p/b.c": '#include "p/b.h"\nvoid enr_b(void)\n{\n    enr_a_spawn();\n}\n',
        "p/state.h": "struct s { int x; };\nint enr_a_spawn(void);\n",
    }
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as fh:
                fh.write(text)
        _, cyc = order(merged(graph(d), calls(d)))
        with open(os.path.join(d, "p/state.h"), "w") as fh:
            fh.write("struct s { int x; };\n")
        with open(os.path.join(d, "p/b.c"), "w") as fh:
            fh.write('#include "p/b.h"\nvoid enr_b(void)\n{\n}\n')
        _, clean = order(merged(graph(d), calls(d)))
    if not cyc or clean:
        print("self-test failed: circle seen %s, clean graph cycle %s" % (cyc, clean))
        return 1
    return 0


TOP = re.compile(r"\A\s*/\*+\s*\*?\s*[\w.+-]+:\s*(.*?)\*/", re.S)
BEGIN = "<!-- made by scripts/incgraph.py --table: edit the files' top comments, not this -->"
END = "<!-- end of scripts/incgraph.py --table -->"


def owns(src, mod):
    """What mod owns: the first sentence of its header's top comment (its
    .c's when it has no header), to its first colon outside parentheses."""
    for ext in (".h", ".c"):
        path = os.path.join(src, mod + ext)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            m = TOP.match(fh.read())
        if not m:
            continue
        text = re.sub(r"\s*\n\s*\*?\s?", " ", m.group(1)).strip()
        depth, out = 0, []
        for i, ch in enumerate(text):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            nxt = text[i + 1:i + 2]
            if depth == 0 and (ch in ":;" or (ch == "." and nxt in ("", " "))):
                break
            out.append(ch)
        return "".join(out).strip().replace("|", "\\|")
    return ""


def table(src):
    """The markdown of the map: every module by layer, then the graph."""
    edges = merged(graph(src), calls(src))
    seq, cyc = order(edges)
    if cyc:
        return None
    layers = layer_graph(edges)
    lseq, _ = order(layers)
    members = {}
    for mod in sorted(graph(src)):
        members.setdefault(FAMILIES.get(mod, mod), []).append(mod)
    lines = ["| layer | module | owns |", "|---|---|---|"]
    for layer in lseq:
        first = True
        for n in seq:
            if (os.path.dirname(n) or ".") != layer:
                continue
            for mod in [n] + [m for m in members.get(n, []) if m != n]:
                lines.append("| %s | `%s` | %s |" % ("`%s/`" % layer if first else "",
                                                      os.path.basename(mod), owns(src, mod)))
                first = False
    lines += ["", "%d modules, %d arrows, no cycle; between the layers:" % (
        len(seq), sum(len(v) for v in edges.values())), "", "```"]
    for n in lseq:
        lines.append("%-10s -> %s" % (n + "/", " ".join(d + "/" for d in sorted(layers[n]))
                                      or "(nothing)"))
    return "\n".join(lines + ["```"]) + "\n"


def doc(src, path, write):
    """Checks (or rewrites) the part of path between BEGIN and END."""
    return docsection.sync(path, BEGIN, END, "\n" + table(src), write,
                           "the module table differs from the files' top comments; "
                           "python3 scripts/incgraph.py --write-doc %s" % path)


def layer_graph(edges):
    layers = {}
    for n, deps in edges.items():
        ln = os.path.dirname(n) or "."
        ls = layers.setdefault(ln, set())
        ls.update(os.path.dirname(d) or "." for d in deps if (os.path.dirname(d) or ".") != ln)
    return layers


def main(argv):
    if "--self-test" in argv:
        return self_test()
    root_src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    if "--table" in argv:
        out = table(root_src)
        if out is None:
            return main([])
        sys.stdout.write(out)
        return 0
    for flag in ("--check-doc", "--write-doc"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return doc(root_src, argv[argv.index(flag) + 1], flag == "--write-doc")
    dot = "--dot" in argv
    args = [a for a in argv if a != "--dot"]
    src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    edges = merged(graph(src), calls(src))
    seq, cyc = order(edges)
    if cyc:
        print("cycle: " + " -> ".join(cyc))
        return 1
    layers = layer_graph(edges)
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
