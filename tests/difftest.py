#!/usr/bin/env python3
"""make difftest: the engine against the incumbent on random batches.

A development check, outside `make test`: it needs Node and a checkout of
the incumbent worker (the old Node service: the directory that holds its
server-raw.mjs), given as --incumbent DIR or `make difftest INCUMBENT=DIR`
and read in place, never copied.  Each
random batch goes to the incumbent's raw node:http server and to
build/enrich; the bodies must be equal once every fetched_at is written 0,
and where the incumbent fails (500, or 400 "expected array") enrich must
reject with a 4xx.  Random batches are built from pieces that stress the
contract: every JSON type for id/duration/title, escapes, lone surrogates,
invalid UTF-8, the white-space set, compatibility characters, final sigma,
duplicate keys, and the code points whose behaviour changed between
Unicode 15.0 and 17.0 (CONTRACT rule 17.3: the engine's tables and the
incumbent's Node 20 are both 17.0).
"""
import argparse
import http.client
import os
import random
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FETCHED = re.compile(rb'"fetched_at":[0-9]+\}')

WS = ["\t", "\n", "\u000b", "\f", "\r", " ", "\u00a0", "\u1680", "\u2000", "\u2005", "\u200a",
      "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"]
NOT_WS = ["\u0085", "\u180e", "\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\u3164"]
CHARS = (list("abcXYZ019-_.:/?#&% ,'\"\\") + WS + NOT_WS +
         ["é", "É", "ß", "ẞ", "İ", "ı", "Σ", "σ", "ς", "Ω", "K", "Å", "ǅ", "Ⅻ", "Ⓐ", "Ａ", "ｙ",
          "ﬁ", "①", "㍻", "¨", "ﷺ", "\u0301", "\u0308", "\u0345", "ʰ", "'", "Ꭰ", "Ა", "𐐀", "𞤀",
          "東", "京", "ก", "ำ", "한", "ᄀ", "ᅡ", "ᆨ", "Ệ", "ệ", "😀", "👍🏽", "\u0000", "\u001f",
          "\u007f", "\u0080", "\u2028", "\ufffd", "\U0001D400", "\u1e9e", "\u0130", "\u03a3"])
# Unicode 15.0 -> 17.0 (rule 17.3): new lower-case mappings, NFKC
# mappings, compositions (with their pairs' parts), combining classes,
# Cased / Case_Ignorable; drawn as often as the rest together.
POST15 = [chr(c) for a, b in (
    (0x1C89, 0x1C8A), (0xA7CB, 0xA7CF), (0xA7D2, 0xA7D2), (0xA7D4, 0xA7D4), (0xA7DA, 0xA7DC),
    (0xA7F1, 0xA7F1), (0x0295, 0x0295), (0x0897, 0x0897), (0x1ACF, 0x1ADD), (0x1AE0, 0x1AEB),
    (0x105C9, 0x105C9), (0x105D2, 0x105D2), (0x105DA, 0x105DA), (0x105E4, 0x105E4),
    (0x10D4E, 0x10D4E), (0x10D50, 0x10D6D), (0x10D6F, 0x10D85), (0x10EC5, 0x10EC5),
    (0x10EFA, 0x10EFC), (0x11382, 0x11385), (0x1138B, 0x1138E), (0x11390, 0x11391),
    (0x113B8, 0x113C9), (0x113CE, 0x113D2), (0x113E1, 0x113E2), (0x1171E, 0x1171E),
    (0x11B60, 0x11B66), (0x11DD9, 0x11DD9), (0x11F5A, 0x11F5A), (0x1611E, 0x1612F),
    (0x16D40, 0x16D42), (0x16D63, 0x16D6C), (0x16EA0, 0x16ED3), (0x16FF2, 0x16FF3),
    (0x1CCD6, 0x1CCF9), (0x1E5EE, 0x1E5EF), (0x1E6E3, 0x1E6FF)) for c in range(a, b + 1)]
POST15 += ["\u0307", "\u0301", "\u0316", "A", "\u03a3"]  # their partners
ESCAPES = ["\\ud800", "\\udc00", "\\ud83d\\ude00", "\\ud83dA", "\\u0041", "\\u00e9", "\\n",
           "\\/", "\\\\", "\\\"", "\\u0000", "\\u03A3", "\\uFEFF", "\\u2028"]
BAD_UTF8 = [b"\x80", b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xff",
            b"\xf4\x90\x80\x80", b"\xe2\x82"]


def rstr(rng, maxlen=12):
    out = bytearray()
    for _ in range(rng.randint(0, maxlen)):
        r = rng.random()
        if r < 0.12:
            out += rng.choice(ESCAPES).encode()
        elif r < 0.16:
            out += rng.choice(BAD_UTF8)
        else:
            c = rng.choice(POST15 if rng.random() < 0.5 else CHARS)
            if c in ("\"", "\\") or (len(c) == 1 and ord(c) < 0x20):
                out += ("\\u%04x" % ord(c)).encode()
            else:
                out += c.encode()
    return b'"' + bytes(out) + b'"'


def rnum(rng):
    return rng.choice([b"0", b"-0", b"1", b"-1", b"253", b"1e21", b"1e20", b"1.5e-7", b"0.1",
                       b"123456789012345678901", b"1e400", b"-1e400", b"1e-400", b"5e-324",
                       b"0.000001", b"1e-7", b"17.25", b"-0.0", b"2.5E+3", b"12345678901234567890"])


def rnumstr(rng):
    s = rng.choice(["12", " 12 ", "0x1F", "0X1f", "0o17", "0b101", "1.", ".5", "5.e1", "+5", "-5",
                    "Infinity", "-Infinity", "1e400", "12px", "1 2", "0x", "", " ", "017", "08",
                    "-0x1F", "1_000", "infinity", "\u00a012\u3000", "\ufeff12", "１２", "1e", "."])
    return b'"' + s.encode() + b'"'


def rvalue(rng, depth=0, kind=None):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rstr(rng)
    if r < 0.45:
        return rnum(rng)
    if r < 0.5:
        return rnumstr(rng)
    if r < 0.6:
        return rng.choice([b"true", b"false", b"null"])
    if r < 0.8:
        return b"[" + b",".join(rvalue(rng, depth + 1) for _ in range(rng.randint(0, 3))) + b"]"
    keys = [b'"a"', b'"valueOf"', b'"x"'] + ([b'"toString"'] if rng.random() < 0.1 else [])
    return b"{" + b",".join(k + b":" + rvalue(rng, depth + 1) for k in rng.sample(keys, rng.randint(0, len(keys)))) + b"}"


def rrecord(rng):
    fields = []
    for _ in range(rng.randint(0, 7)):
        k = rng.choice(["id", "id", "provider", "provider", "title", "title", "duration", "blocked",
                        "extra", "\\u0069d", "__proto__"])
        if k == "provider":
            v = rng.choice([b'"yt"', b'"vm"', b'"dm"', b'"yt"', b'"YT"', b'"\\u0079t"', b'" yt"', b"null", b'["yt"]'])
        elif k == "title":
            v = rstr(rng, 30) if rng.random() < 0.85 else rng.choice([b"0", b"-0", b"null", b"false", b'""', b"1", b"[]"])
        elif k == "blocked":
            v = b"[" + b",".join(rng.choice([b'"US"', b'"GB"', b'"JP"', b'"jp"', b'["KR"]', b"1", b'"TH"', b'"VN"']) for _ in range(rng.randint(0, 4))) + b"]" if rng.random() < 0.8 else b'"US"'
        elif k == "duration":
            v = rvalue(rng) if rng.random() < 0.5 else rng.choice([rnum(rng), rnumstr(rng)])
        else:
            v = rvalue(rng)
        ws = rng.choice([b"", b" ", b"\n\t"])
        fields.append(b'"' + k.encode() + b'"' + ws + b":" + ws + v)
    return b"{" + b",".join(fields) + b"}"


def rbatch(rng):
    elems = []
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        if r < 0.9:
            elems.append(rrecord(rng))
        elif r < 0.97:
            elems.append(rvalue(rng))
        else:
            elems.append(b"null")
    body = b"[" + b",".join(elems) + b"]"
    if rng.random() < 0.03:
        body = b"\xef\xbb\xbf" + body
    if rng.random() < 0.02:
        body = body[: rng.randint(0, len(body))]
    return body


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/", body=body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--build", default=os.environ.get("ENR_BUILD", "build"))
    ap.add_argument("--save", default="build/difftest-failures")
    ap.add_argument("--incumbent", default=os.environ.get("ENR_INCUMBENT"),
                    help="the incumbent worker's checkout (holds server-raw.mjs)")
    args = ap.parse_args()
    if not args.incumbent or not os.path.exists(os.path.join(args.incumbent, "server-raw.mjs")):
        print("difftest: no incumbent at %r: pass --incumbent DIR (make difftest INCUMBENT=DIR), "
              "DIR being a checkout of the old Node worker with its server-raw.mjs"
              % args.incumbent)
        return 2
    incumbent = args.incumbent
    port = free_port()
    node = subprocess.Popen(["node", os.path.join(incumbent, "server-raw.mjs")],
                            env=dict(os.environ, PORT=str(port), HOST="127.0.0.1"))
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        rng = random.Random(args.seed)
        passed = failed = 0
        os.makedirs(args.save, exist_ok=True)
        for i in range(args.count):
            body = rbatch(rng)
            # The raw node:http incumbent does not strip a leading BOM (its
            # hono and Bun deployments do, as the contract says): strip it here.
            st, ref = post(port, body[3:] if body.startswith(b"\xef\xbb\xbf") else body)
            p = subprocess.run([os.path.join(args.build, "enrich")], input=body, capture_output=True)
            if st == 200:
                ok = p.returncode == 0 and FETCHED.sub(b'"fetched_at":0}', p.stdout) == FETCHED.sub(b'"fetched_at":0}', ref)
            else:
                ok = p.returncode == 2 and p.stdout == b""
            if ok:
                passed += 1
            else:
                failed += 1
                path = os.path.join(args.save, "%d-%d.json" % (args.seed, i))
                with open(path, "wb") as f:
                    f.write(body)
                if failed <= 10:
                    print("FAIL %s: incumbent %d %r\n     enrich exit %d %r %r" % (path, st, ref[:300], p.returncode, p.stdout[:300], p.stderr[:200]))
        print("seed %d" % args.seed)
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0
    finally:
        node.terminate()
        node.wait()


if __name__ == "__main__":
    sys.exit(main())
