#!/usr/bin/env python3
"""test_rejected.py: what the contract drops is said, through the real
nginx and its shipped snippets (fastcgi_buffer_size 16k).

1. A batch with invalid elements: X-Enrich-Rejected counts them and
   X-Enrich-Rejected-Positions lists their indexes (ranges a-b); the body
   is byte for byte the answer to the same batch without them
   (fetched_at aside).
2. A clean batch: X-Enrich-Rejected: 0 and no positions header.
3. The worst case for the list, every other element of a 10000-element
   batch dropped (~24 KB of positions uncut, past nginx's 16 KB header
   buffer): still a 200 through nginx, never a 502; the list is cut at
   a whole entry and ends in ",...", its entries exact.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def rec(i):
    return {"provider": ("yt", "vm", "dm")[i % 3], "id": " Id%05d " % i, "title": "T %d" % i}


BAD = [{"provider": "nope", "id": "x"}, 7, "text", {"provider": "yt"}, [], {"id": "y"}]


def no_time(body):
    return re.sub(rb'"fetched_at":\d+', b'"fetched_at":0', body)


def expand(value):
    out = []
    for item in value.split(",") if value else []:
        if item == "...":
            break
        a, _, b = item.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def test_rejected_headers(r):
    with harness.Env(name="rejected") as env:
        env.start_enrichd("workers = 2\n")
        env.start_nginx()
        # 1. invalid elements at the start, in a run, and at the end
        batch, valid, want = [], [], []
        for i in range(40):
            if i in (0, 5, 6, 7, 20, 39):
                batch.append(BAD[len(want) % len(BAD)])
                want.append(i)
            else:
                batch.append(rec(i))
                valid.append(rec(i))
        st, hdr, body = env.request("/v1/enrich", json.dumps(batch).encode())
        r.check(st == 200, "mixed batch: 200 (got %d)" % st)
        r.check(hdr.get("x-enrich-rejected") == "6", "X-Enrich-Rejected: 6 (got %r)"
                % hdr.get("x-enrich-rejected"))
        r.check(hdr.get("x-enrich-rejected-positions") == "0,5-7,20,39",
                "positions 0,5-7,20,39 (got %r)" % hdr.get("x-enrich-rejected-positions"))
        st2, hdr2, body2 = env.request("/v1/enrich", json.dumps(valid).encode())
        r.check(st2 == 200 and body.count(b"\n") == 34 and no_time(body) == no_time(body2),
                "the body is the answer to the valid records alone (%d lines)" % body.count(b"\n"))
        # 2. nothing dropped
        r.check(hdr2.get("x-enrich-rejected") == "0" and
                "x-enrich-rejected-positions" not in hdr2,
                "clean batch: X-Enrich-Rejected: 0, no positions (%r)" % hdr2)
        st, hdr, body = env.request("/v1/enrich", b"[]")
        r.check(st == 200 and hdr.get("x-enrich-rejected") == "0", "empty batch: 0")
        # 3. the longest list: every other element of 10000 dropped
        n = 10000
        batch = [rec(i) if i % 2 else 0 for i in range(n)]
        st, hdr, body = env.request("/v1/enrich", json.dumps(batch).encode(), timeout=30)
        pos = hdr.get("x-enrich-rejected-positions", "")
        r.check(st == 200, "10000 elements, half dropped: 200 through nginx, not 502 (got %d)"
                % st)
        r.check(hdr.get("x-enrich-rejected") == str(n // 2), "X-Enrich-Rejected: %d (got %r)"
                % (n // 2, hdr.get("x-enrich-rejected")))
        got = expand(pos)
        r.check(pos.endswith(",...") and 3000 < len(pos) <= 4096,
                "the list is cut below 4 KiB and says so (%d bytes, ends %r)"
                % (len(pos), pos[-12:]))
        r.check(len(got) > 500 and got == list(range(0, 2 * len(got), 2)),
                "its %d entries are exactly the first dropped positions" % len(got))
        r.check(body.count(b"\n") == n // 2, "5000 lines")


def main():
    harness.run_tests(test_rejected_headers)


if __name__ == "__main__":
    main()
